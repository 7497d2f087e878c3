from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class Channel:
    cdef c.LIBSSH2_CHANNEL *_channel
    cdef readonly Session session
    cdef c.LIBSSH2_CHANNEL *_ptr(self) except NULL
    cdef int _call(self, int rc, str context) except -1
    cdef int _simple(self, int (*fn)(c.LIBSSH2_CHANNEL *) noexcept nogil,
                     str context) except -1


cdef Channel PyChannel(c.LIBSSH2_CHANNEL *channel, Session session)
