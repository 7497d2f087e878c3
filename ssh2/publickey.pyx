# cython: language_level=3
"""The publickey subsystem (RFC 4819): list, add and remove a server's accepted keys.

From ``Session.publickey_init()``. Few servers offer the subsystem (OpenSSH
does not: there ``publickey_init`` raises :class:`ssh2.exceptions.PublicKeyInitError`).
"""
cimport cython
from libc.stdlib cimport malloc, free

from ssh2.c cimport libssh2 as c
from ssh2.c cimport publickey as cpk
from ssh2.handle cimport SessionChild
from ssh2.session cimport (Session, CHILD_PUBLICKEY, MODULE_PUBLICKEY, lock, unlock,
                           register_child)

from ssh2 import exceptions as _exc


cdef PublicKeySystem PyPublicKeySystem(cpk.LIBSSH2_PUBLICKEY *pkey, Session session):
    cdef PublicKeySystem obj = PublicKeySystem.__new__(PublicKeySystem)
    obj._adopt(pkey, session, session, CHILD_PUBLICKEY)
    return obj


cdef object _new_publickey_system(void *raw, Session session, object parent, object extra):
    return PyPublicKeySystem(<cpk.LIBSSH2_PUBLICKEY *>raw, session)


register_child(MODULE_PUBLICKEY, _new_publickey_system)


class PublicKeyAttribute:
    """One attribute of a key (name, value, and whether the server must understand it)."""

    def __init__(self, bytes name not None, bytes value not None, mandatory):
        self.name = name
        self.value = value
        self.mandatory = bool(mandatory)

    @property
    def name_len(self):
        return len(self.name)

    @property
    def value_len(self):
        return len(self.value)

    def __repr__(self):
        return f"PublicKeyAttribute({self.name!r}, {self.value!r}, {self.mandatory})"


class PublicKeyList:
    """A key the server accepts: ``name`` (its algorithm), ``blob`` and ``attrs``."""

    def __init__(self, bytes name, bytes blob, list attrs):
        self.name = name
        self.blob = blob
        self.attrs = attrs

    @property
    def name_len(self):
        return len(self.name)

    @property
    def blob_len(self):
        return len(self.blob)

    @property
    def num_attrs(self):
        return len(self.attrs)

    def __repr__(self):
        return f"PublicKeyList({self.name!r}, {len(self.blob)} bytes, {len(self.attrs)} attrs)"


@cython.no_gc_clear
cdef class PublicKeySystem(SessionChild):
    """The publickey subsystem of a session; calls return 0 (or EAGAIN in non-blocking mode)."""

    _CLOSED = (_exc.PublicKeyError, "the publickey subsystem is shut down")

    def __init__(self):
        raise TypeError("the publickey subsystem comes from Session.publickey_init()")

    cdef cpk.LIBSSH2_PUBLICKEY *_ptr(self) except NULL:
        return <cpk.LIBSSH2_PUBLICKEY *>self._live()

    def add(self, bytes name not None, bytes blob not None, char overwrite, list attrs):
        """Add a key (``name``: its algorithm, ``blob``: the key) with ``attrs``
        (:class:`PublicKeyAttribute`); ``overwrite`` replaces a key already there."""
        cdef cpk.LIBSSH2_PUBLICKEY *pk = self._ptr()
        cdef unsigned long n = len(attrs)
        cdef cpk.libssh2_publickey_attribute *c_attrs = NULL
        cdef const unsigned char *c_name = <const unsigned char *><const char *>name
        cdef const unsigned char *c_blob = <const unsigned char *><const char *>blob
        cdef unsigned long n_name = len(name), n_blob = len(blob)
        cdef unsigned long i
        cdef int rc
        keep = []  # the bytes the C array points into
        if n:
            c_attrs = <cpk.libssh2_publickey_attribute *>malloc(
                n * sizeof(cpk.libssh2_publickey_attribute))
            if c_attrs is NULL:
                raise MemoryError()
        try:
            for i in range(n):
                attr = attrs[i]
                keep.append((attr.name, attr.value))
                c_attrs[i].name = <const char *>keep[i][0]
                c_attrs[i].name_len = len(keep[i][0])
                c_attrs[i].value = <const char *>keep[i][1]
                c_attrs[i].value_len = len(keep[i][1])
                c_attrs[i].mandatory = 1 if attr.mandatory else 0
            with nogil:
                lock(self.session._lock)
                rc = cpk.libssh2_publickey_add_ex(pk, c_name, n_name, c_blob, n_blob, overwrite,
                                                  n, c_attrs)
                unlock(self.session._lock)
        finally:
            free(c_attrs)
        return self.session._rc(rc, "adding a key through the publickey subsystem failed")

    def remove(self, bytes name not None, bytes blob not None):
        """Remove a key."""
        cdef cpk.LIBSSH2_PUBLICKEY *pk = self._ptr()
        cdef const unsigned char *c_name = <const unsigned char *><const char *>name
        cdef const unsigned char *c_blob = <const unsigned char *><const char *>blob
        cdef unsigned long n_name = len(name), n_blob = len(blob)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = cpk.libssh2_publickey_remove_ex(pk, c_name, n_name, c_blob, n_blob)
            unlock(self.session._lock)
        return self.session._rc(rc, "removing a key through the publickey subsystem failed")

    def list_fetch(self):
        """The keys the server accepts (:class:`PublicKeyList` each), or EAGAIN."""
        cdef cpk.LIBSSH2_PUBLICKEY *pk = self._ptr()
        cdef unsigned long num_keys = 0, i, j
        cdef cpk.libssh2_publickey_list *keys = NULL
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = cpk.libssh2_publickey_list_fetch(pk, &num_keys, &keys)
            unlock(self.session._lock)
        if self.session._rc(rc, "listing keys of the publickey subsystem failed") != 0:
            return rc
        try:
            return [PublicKeyList(
                keys[i].name[:keys[i].name_len], keys[i].blob[:keys[i].blob_len],
                [PublicKeyAttribute(keys[i].attrs[j].name[:keys[i].attrs[j].name_len],
                                    keys[i].attrs[j].value[:keys[i].attrs[j].value_len],
                                    keys[i].attrs[j].mandatory)
                 for j in range(keys[i].num_attrs)]) for i in range(num_keys)]
        finally:
            with nogil:
                lock(self.session._lock)
                cpk.libssh2_publickey_list_free(pk, keys)
                unlock(self.session._lock)

    def list_free(self):
        """Nothing to do: :meth:`list_fetch` copies the list and frees libssh2's."""

    def shutdown(self):
        """End the subsystem (done when the object is dropped, too)."""
        cdef cpk.LIBSSH2_PUBLICKEY *pk = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = cpk.libssh2_publickey_shutdown(pk)
            unlock(self.session._lock)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        self._raw = NULL  # freed by libssh2 whatever the result
        return self.session._rc(rc, "shutting down the publickey subsystem failed")
