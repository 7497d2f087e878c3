from ssh2.c cimport sftp as csftp
from ssh2.handle cimport SessionChild
from ssh2.session cimport Session


# libssh2 keeps up to 4x the buffer size of read requests in flight (capped at
# 8 MiB): 2 MiB buffers fill that pipeline.
cdef enum:
    TRANSFER_CHUNK = 2097152


cdef class SFTP(SessionChild):
    cdef csftp.LIBSSH2_SFTP *_ptr(self) except NULL
    cdef int _raise(self, int rc, str context) except -1
    cdef int _rc(self, int rc, str context) except -1
    cdef object _null_result(self, str context)
    cdef int _wait(self, object wait) except -1


cdef SFTP PySFTP(csftp.LIBSSH2_SFTP *sftp, Session session)
