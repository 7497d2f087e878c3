# Allocate a bytes object, fill it without the GIL, then shrink it in place:
# one allocation and no copy per read.
from cpython.object cimport PyObject

cdef extern from "Python.h":
    PyObject *bytes_alloc "PyBytes_FromStringAndSize"(const char *v, Py_ssize_t n)
    char *bytes_data "PyBytes_AS_STRING"(PyObject *o)
    int bytes_resize "_PyBytes_Resize"(PyObject **o, Py_ssize_t n)
    void decref "Py_DECREF"(PyObject *o)


cdef inline object bytes_take(PyObject *raw, Py_ssize_t used, Py_ssize_t size):
    """Own ``raw`` as a bytes object trimmed to ``used`` bytes (b'' if none).

    Less than half used: copied into a bytes of its own size instead. Shrinking in place
    leaves the rest of the block as a hole that the next read's full-size block does not
    fit in: output held in small pieces (a slow reader, a stream nobody reads) then took
    several times its size in memory."""
    cdef object result
    cdef PyObject *copy
    if used <= 0:
        decref(raw)
        return b""
    if used < size // 2:
        copy = bytes_alloc(bytes_data(raw), used)
        decref(raw)
        if copy is NULL:
            raise MemoryError()
        result = <object>copy
        decref(copy)
        return result
    if used < size:
        if bytes_resize(&raw, used) < 0:
            raise MemoryError()
    result = <object>raw
    decref(raw)
    return result
