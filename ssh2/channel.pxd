from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class Channel:
    cdef c.LIBSSH2_CHANNEL *_channel
    cdef readonly Session session
    # close() completed: libssh2 has also seen the server's close.
    cdef bint _close_done
    # Set when another object owns the libssh2 channel (SFTP.get_channel()).
    cdef object _owner
    cdef c.LIBSSH2_CHANNEL *_ptr(self) except NULL
    cdef int _call(self, int rc, str context) except -1
    cdef int _simple(self, int (*fn)(c.LIBSSH2_CHANNEL *) noexcept nogil,
                     str context) except -1


cdef Channel PyChannel(c.LIBSSH2_CHANNEL *channel, Session session, object owner=*)
