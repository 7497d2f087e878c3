# cython: language_level=3
"""``SFTPHandle`` (an open remote file or directory) and SFTP attribute records."""
cimport cython
from cpython.object cimport PyObject
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_SIMPLE
from libc.errno cimport errno, EINTR
from libc.stdlib cimport malloc, free, realloc
from cpython.bytes cimport PyBytes_FromStringAndSize
from posix.unistd cimport read as c_read, write as c_write

from ssh2.c cimport libssh2 as c
from ssh2.c cimport sftp as csftp
from ssh2.handle cimport SessionChild
from ssh2.session cimport (Session, CHILD_SFTP_HANDLE, MODULE_SFTP_HANDLE, lock, unlock,
                           register_child)
from ssh2.sftp cimport SFTP, TRANSFER_CHUNK
from ssh2.sftp_attributes cimport SFTPAttributes, SFTPStatVFS, PySFTPAttributes
from ssh2.utils cimport to_bytes
from ssh2._bytes cimport bytes_alloc, bytes_data, bytes_take

import os
from ssh2 import exceptions as _exc

cdef enum:
    # As ssh2-python (its channel window size). libssh2 keeps up to four
    # times the buffer in read requests in flight, so this is also how deep
    # a plain ``for size, data in handle`` loop pipelines.
    READ_SIZE = 2 * 1024 * 1024
    NAME_SIZE = 1024
    # Reads up to this size land directly in the bytes object returned.
    DIRECT_READ = 65536


cdef Py_ssize_t _write_all(int fd, const char *buf, Py_ssize_t n) noexcept nogil:
    """write() all of buf; returns n, or -1 with errno set."""
    cdef Py_ssize_t done = 0, rc
    while done < n:
        rc = c_write(fd, buf + done, n - done)
        if rc < 0:
            if errno == EINTR:
                continue
            return -1
        done += rc
    return n


cdef SFTPHandle PySFTPHandle(csftp.LIBSSH2_SFTP_HANDLE *handle, SFTP sftp):
    cdef SFTPHandle obj = SFTPHandle.__new__(SFTPHandle)
    obj._adopt(handle, sftp.session, sftp, CHILD_SFTP_HANDLE)
    obj.sftp = sftp
    return obj


cdef object _new_handle(void *raw, Session session, object parent, object extra):
    return PySFTPHandle(<csftp.LIBSSH2_SFTP_HANDLE *>raw, <SFTP?>parent)


register_child(MODULE_SFTP_HANDLE, _new_handle)

# ssh2-python's home of the attribute records, which ssh2.sftp_attributes defines.
globals().update(SFTPAttributes=SFTPAttributes, SFTPStatVFS=SFTPStatVFS)


@cython.no_gc_clear
cdef class SFTPHandle(SessionChild):
    """An open remote file or directory. Iterate it for ``(size, data)`` chunks;
    use it as a context manager to close it."""

    _CLOSED = (_exc.SFTPHandleError, "the SFTP handle is closed")

    def __init__(self):
        raise TypeError("handles come from SFTP.open() and SFTP.opendir()")

    def __dealloc__(self):
        # SessionChild's finaliser, which runs after this one, frees the handle.
        self._free_buffers()

    cdef void _free_buffers(self) noexcept:
        free(self._scratch)
        self._scratch = NULL
        self._scratch_size = 0
        free(self._outgoing)
        self._outgoing = NULL
        self._outgoing_size = 0
        self._outgoing_filled = self._outgoing_sent = 0

    cdef char *_buffer(self, char **buf, size_t *have, size_t size) except NULL:
        """``buf[0]``, grown to ``size`` bytes if smaller (kept for the handle's life)."""
        cdef char *grown
        if have[0] < size:
            grown = <char *>realloc(buf[0], size)
            if grown is NULL:
                raise MemoryError()
            buf[0] = grown
            have[0] = size
        return buf[0]

    cdef csftp.LIBSSH2_SFTP_HANDLE *_ptr(self) except NULL:
        return <csftp.LIBSSH2_SFTP_HANDLE *>self._live()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self._raw is not NULL:
            self.close()

    def __iter__(self):
        return self

    def __next__(self):
        rc, data = self.read()
        if rc == 0:
            raise StopIteration
        return rc, data

    @property
    def closed(self):
        return self._raw is NULL

    def close(self):
        """Close the handle. Returns 0, or EAGAIN (call again) in non-blocking mode."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_close_handle(h)
            unlock(self.session._lock)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        # libssh2 frees the handle on every return but EAGAIN, errors included:
        # keeping the pointer would make the finaliser free it twice.
        self._raw = NULL
        self._free_buffers()
        return self.sftp._rc(rc, "closing the SFTP handle failed")

    def read(self, size_t buffer_maxlen=READ_SIZE):
        """Read up to ``buffer_maxlen`` bytes: ``(size, data)``; size 0 at end of file."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef PyObject *raw
        cdef char *buf
        cdef Py_ssize_t rc
        cdef size_t size = buffer_maxlen
        if size == 0:
            raise ValueError("buffer_maxlen must be > 0")
        if size > DIRECT_READ:
            return self._read_via_scratch(h, size)
        raw = bytes_alloc(NULL, size)
        if raw is NULL:
            raise MemoryError()
        buf = bytes_data(raw)
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_read(h, buf, size)
            unlock(self.session._lock)
        data = bytes_take(raw, rc, size)
        if rc < 0:
            self.sftp._rc(rc, "reading the remote file failed")
        return rc, data

    cdef bint _after_round(self, Py_ssize_t n, int local_errno, str local_what,
                           str remote_what, wait) except -1:
        """The end of one round of a transfer pump: raise the local file's error or
        the server's; True when libssh2 asked to wait (and the wait is done)."""
        if local_errno:
            raise OSError(local_errno, f"{local_what} failed: {os.strerror(local_errno)}")
        if n == c.LIBSSH2_ERROR_EAGAIN:
            self.sftp._wait(wait)
            return True
        if n < 0:
            self.sftp._raise(n, remote_what)
        return False

    cdef object _read_via_scratch(self, csftp.LIBSSH2_SFTP_HANDLE *h, size_t size):
        # A read returns what has arrived, often a fraction of a large buffer:
        # a fresh bytes object of the full size per call would fault in new
        # pages every time. Land in a buffer kept for the handle and copy out
        # exactly what came. The session lock covers the buffer until the
        # copy is made: another thread's read would land in it too. No Python
        # code runs meanwhile (a bytes object is not GC-tracked: allocating it
        # never starts a collection, so no finaliser can ask for the lock).
        cdef Py_ssize_t rc
        cdef char *grown
        with nogil:
            lock(self.session._lock)
            if self._scratch_size < size:
                grown = <char *>realloc(self._scratch, size)
                if grown is NULL:
                    rc = c.LIBSSH2_ERROR_ALLOC
                else:
                    self._scratch = grown
                    self._scratch_size = size
            if self._scratch_size >= size:
                rc = csftp.libssh2_sftp_read(h, self._scratch, size)
        try:
            data = PyBytes_FromStringAndSize(self._scratch, rc) if rc > 0 else b""
        finally:
            unlock(self.session._lock)
        if rc == c.LIBSSH2_ERROR_ALLOC:
            raise MemoryError()
        if rc < 0:
            self.sftp._rc(rc, "reading the remote file failed")
        return rc, data

    def read_into(self, buffer):
        """Read into a writable buffer (bytearray, memoryview, numpy array).

        Returns the number of bytes read, 0 at end of file, or EAGAIN. A
        large buffer keeps many read requests in flight.
        """
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef Py_buffer view
        cdef Py_ssize_t rc
        PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE | PyBUF_WRITABLE)
        try:
            if view.len == 0:
                raise ValueError("buffer is empty")
            with nogil:
                lock(self.session._lock)
                rc = csftp.libssh2_sftp_read(h, <char *>view.buf, view.len)
                unlock(self.session._lock)
        finally:
            PyBuffer_Release(&view)
        return self.sftp._rc(rc, "reading the remote file failed")

    def write(self, buf):
        """Write ``buf``: ``(rc, bytes_written)``, like ``Channel.write``."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef bytes data = to_bytes(buf)
        cdef const char *c_buf = data
        cdef size_t remaining = len(data)
        cdef size_t total = 0
        cdef Py_ssize_t rc = 0
        with nogil:
            while remaining > 0:
                lock(self.session._lock)
                rc = csftp.libssh2_sftp_write(h, c_buf + total, remaining)
                unlock(self.session._lock)
                if rc < 0:
                    break
                total += rc
                remaining -= rc
        if rc < 0:
            self.sftp._rc(rc, "writing the remote file failed")
        return rc, total

    def read_into_fd(self, int fd, callback=None, wait=None, size_t chunk_size=TRANSFER_CHUNK,
                     unsigned long long total_size=0):
        """Read the file to its end into the open file descriptor ``fd``.

        The copy loop runs in C without the GIL, with up to 4 x ``chunk_size``
        of read requests in flight. ``callback(bytes_done, total_size)``
        follows each chunk (``total_size``: as given, 0 if unknown). In
        non-blocking mode ``wait()`` is called whenever the session would
        block; without it the socket is poll()ed. Returns the bytes copied. A
        failed local write raises ``OSError``.
        """
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef char *buf = <char *>malloc(chunk_size)
        cdef Py_ssize_t n = 0
        cdef unsigned long long total = 0
        cdef bint report = callback is not None
        cdef int werr = 0
        if buf is NULL:
            raise MemoryError()
        try:
            while True:
                with nogil:
                    while True:
                        lock(self.session._lock)
                        n = csftp.libssh2_sftp_read(h, buf, chunk_size)
                        unlock(self.session._lock)
                        if n <= 0:
                            break
                        if _write_all(fd, buf, n) < 0:
                            werr = errno
                            break
                        total += n
                        if report:
                            break
                if self._after_round(n, werr, "writing the local file",
                                     "reading the remote file failed", wait):
                    continue
                if report and n > 0:
                    callback(total, total_size)
                if n == 0:
                    return total
        finally:
            free(buf)

    def write_from_fd(self, int fd, callback=None, wait=None, size_t chunk_size=TRANSFER_CHUNK):
        """Write everything readable from the file descriptor ``fd`` to the file.

        Writes are pipelined by libssh2 (many packets in flight per call), in
        C without the GIL. ``callback(bytes_done, total_size)`` follows each
        chunk (``total_size``: the size of ``fd``'s file). ``wait`` as for
        :meth:`read_into_fd`. Returns the bytes written. A failed local read
        raises ``OSError``.
        """
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef char *buf = <char *>malloc(chunk_size)
        cdef Py_ssize_t filled = 0, sent = 0, n = 0
        cdef unsigned long long total = 0
        cdef bint report = callback is not None
        cdef int rerr = 0
        size = os.fstat(fd).st_size if report else 0
        if buf is NULL:
            raise MemoryError()
        try:
            while True:
                with nogil:
                    while True:
                        if sent == filled:
                            filled = c_read(fd, buf, chunk_size)
                            sent = 0
                            if filled < 0:
                                if errno == EINTR:
                                    filled = 0
                                    continue
                                rerr = errno
                                filled = 0
                                break
                            if filled == 0:
                                n = 0
                                break
                        # Same pointer and length after EAGAIN, as libssh2 requires.
                        lock(self.session._lock)
                        n = csftp.libssh2_sftp_write(h, buf + sent, filled - sent)
                        unlock(self.session._lock)
                        if n < 0:
                            break
                        sent += n
                        total += n
                        if report and sent == filled:
                            n = 1
                            break
                if self._after_round(n, rerr, "reading the local file",
                                     "writing the remote file failed", wait):
                    continue
                if n == 0:
                    return total
                callback(total, size)
        finally:
            free(buf)

    def pump_to_fd(self, int fd, size_t chunk_size=TRANSFER_CHUNK):
        """Copy what the file has ready into ``fd``, without waiting: for event loops.

        Returns ``(rc, copied)``: ``copied`` bytes went to ``fd`` in this call;
        ``rc`` is 1 after a chunk of ``chunk_size`` (call again), 0 at the end of the
        file, or ``LIBSSH2_ERROR_EAGAIN`` (wait for the socket, then call again: the
        copy goes on where it stopped). Up to 4 x ``chunk_size`` of read requests are
        kept in flight; the loop runs in C without the GIL. A failed local write
        raises ``OSError``.
        """
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef char *buf = self._buffer(&self._scratch, &self._scratch_size, chunk_size)
        cdef Py_ssize_t n = 0
        cdef size_t copied = 0
        cdef int werr = 0
        with nogil:
            lock(self.session._lock)
            while True:
                n = csftp.libssh2_sftp_read(h, buf, chunk_size)
                if n <= 0:
                    break
                if _write_all(fd, buf, n) < 0:
                    werr = errno
                    break
                copied += n
                if copied >= chunk_size:
                    n = 1
                    break
            unlock(self.session._lock)
        if werr:
            raise OSError(werr, f"writing the local file failed: {os.strerror(werr)}")
        if n < 0 and n != c.LIBSSH2_ERROR_EAGAIN:
            self.sftp._raise(n, "reading the remote file failed")
        return (1 if n > 0 else n), copied

    def pump_from_fd(self, int fd, size_t chunk_size=TRANSFER_CHUNK):
        """Send what ``fd`` holds to the file, without waiting: for event loops.

        Returns ``(rc, sent)``: ``sent`` bytes were written in this call; ``rc`` is
        1 after a chunk of ``chunk_size`` (call again), 0 once ``fd`` is at its end
        and everything read from it is sent, or ``LIBSSH2_ERROR_EAGAIN`` (wait, then
        call again with the same ``fd``: the data read but not yet sent is kept
        here). Writes are pipelined by libssh2, in C without the GIL. A failed local
        read raises ``OSError``.
        """
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef char *buf = self._buffer(&self._outgoing, &self._outgoing_size, chunk_size)
        cdef Py_ssize_t n = 0, got
        cdef size_t sent = 0
        cdef int rerr = 0
        with nogil:
            while True:
                if self._outgoing_sent == self._outgoing_filled:
                    got = c_read(fd, buf, chunk_size)
                    if got < 0:
                        if errno == EINTR:
                            continue
                        rerr = errno
                        break
                    self._outgoing_filled = got
                    self._outgoing_sent = 0
                    if got == 0:
                        n = 0
                        break
                lock(self.session._lock)
                n = csftp.libssh2_sftp_write(h, buf + self._outgoing_sent,
                                             self._outgoing_filled - self._outgoing_sent)
                unlock(self.session._lock)
                if n < 0:
                    break
                self._outgoing_sent += n
                sent += n
                if sent >= chunk_size:
                    n = 1
                    break
        if rerr:
            raise OSError(rerr, f"reading the local file failed: {os.strerror(rerr)}")
        if n < 0 and n != c.LIBSSH2_ERROR_EAGAIN:
            self.sftp._raise(n, "writing the remote file failed")
        return (1 if n > 0 else n), sent

    def _readdir(self, size_t buffer_maxlen, size_t longentry_maxlen):
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef SFTPAttributes attrs = SFTPAttributes.__new__(SFTPAttributes)
        cdef bytearray name = bytearray(buffer_maxlen)
        cdef bytearray longentry = bytearray(longentry_maxlen) if longentry_maxlen else None
        cdef char *c_name = name
        cdef char *c_long = NULL if longentry is None else <char *>longentry
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_readdir_ex(h, c_name, buffer_maxlen, c_long,
                                               longentry_maxlen, &attrs._attrs)
            unlock(self.session._lock)
        self.sftp._rc(rc, "reading the remote directory failed")
        if rc <= 0:
            return rc, b"", b"", None
        return (rc, bytes(name[:rc]),
                bytes(longentry).split(b"\0", 1)[0] if longentry is not None else b"", attrs)

    def readdir_ex(self, size_t longentry_maxlen=NAME_SIZE, size_t buffer_maxlen=NAME_SIZE):
        """Yield ``(size, name, longentry, attrs)`` per entry. In non-blocking
        mode an ``(EAGAIN, b"", b"", None)`` item means "wait for the socket":
        iterating on continues the listing."""
        while True:
            rc, name, longentry, attrs = self._readdir(buffer_maxlen, longentry_maxlen)
            if rc == 0 or (rc < 0 and rc != c.LIBSSH2_ERROR_EAGAIN):
                return
            yield rc, name, longentry, attrs

    def readdir(self, size_t buffer_maxlen=NAME_SIZE):
        """Yield ``(size, name, attrs)`` per directory entry; EAGAIN items as for
        :meth:`readdir_ex`."""
        while True:
            rc, name, _, attrs = self._readdir(buffer_maxlen, 0)
            if rc == 0 or (rc < 0 and rc != c.LIBSSH2_ERROR_EAGAIN):
                return
            yield rc, name, attrs

    def fstat_ex(self, SFTPAttributes attrs not None, int setstat):
        """Read the open file's attributes into ``attrs`` (``setstat`` 0), or set the
        ones ``attrs.flags`` names (``setstat`` 1). Returns 0 or EAGAIN."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_fstat_ex(h, &attrs._attrs, setstat)
            unlock(self.session._lock)
        return self.sftp._rc(rc, "fstat on the remote file failed")

    def fstat(self):
        """The open file's :class:`SFTPAttributes` (or EAGAIN)."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef SFTPAttributes attrs = SFTPAttributes.__new__(SFTPAttributes)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_fstat_ex(h, &attrs._attrs, 0)
            unlock(self.session._lock)
        self.sftp._rc(rc, "fstat on the remote file failed")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else attrs

    def fsetstat(self, SFTPAttributes attrs not None):
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_fstat_ex(h, &attrs._attrs, 1)
            unlock(self.session._lock)
        return self.sftp._rc(rc, "setting attributes of the remote file failed")

    def fstatvfs(self):
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef SFTPStatVFS st = SFTPStatVFS.__new__(SFTPStatVFS)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_fstatvfs(h, &st._st)
            unlock(self.session._lock)
        self.sftp._rc(rc, "fstatvfs on the remote file failed")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else st

    def fsync(self):
        """Ask the server to flush the file to disk (fsync@openssh.com)."""
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_fsync(h)
            unlock(self.session._lock)
        return self.sftp._rc(rc, "fsync on the remote file failed")

    def seek64(self, unsigned long long offset):
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        with nogil:
            lock(self.session._lock)
            csftp.libssh2_sftp_seek64(h, offset)
            unlock(self.session._lock)

    def seek(self, unsigned long long offset):
        self.seek64(offset)

    def rewind(self):
        self.seek64(0)

    def tell64(self):
        cdef csftp.LIBSSH2_SFTP_HANDLE *h = self._ptr()
        return csftp.libssh2_sftp_tell64(h)

    def tell(self):
        return self.tell64()
