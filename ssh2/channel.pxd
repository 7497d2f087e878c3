from ssh2.c cimport libssh2 as c
from ssh2.handle cimport SessionChild
from ssh2.session cimport Session


cdef class Channel(SessionChild):
    # close() completed: libssh2 has also seen the server's close.
    cdef bint _close_done
    cdef c.LIBSSH2_CHANNEL *_ptr(self) except NULL
    cdef int _call(self, int rc, str context) except -1
    cdef int _simple(self, int (*fn)(c.LIBSSH2_CHANNEL *) noexcept nogil,
                     str context) except -1


cdef Channel PyChannel(c.LIBSSH2_CHANNEL *channel, Session session, object owner=*)
