from ssh2.c cimport sftp as csftp
from ssh2.handle cimport SessionChild
from ssh2.session cimport Session
from ssh2.sftp_handle cimport SFTPHandle


cdef class SFTP(SessionChild):
    cdef csftp.LIBSSH2_SFTP *_ptr(self) except NULL
    cdef int _raise(self, int rc, str context) except -1
    cdef int _rc(self, int rc, str context) except -1
    cdef object _null_result(self, str context)
    cdef int _wait(self, object wait) except -1


cdef SFTP PySFTP(csftp.LIBSSH2_SFTP *sftp, Session session)
