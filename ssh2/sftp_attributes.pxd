from ssh2.c cimport sftp as csftp


cdef class SFTPAttributes:
    cdef csftp.LIBSSH2_SFTP_ATTRIBUTES _attrs


cdef class SFTPStatVFS:
    cdef csftp.LIBSSH2_SFTP_STATVFS _st


cdef SFTPAttributes PySFTPAttributes(const csftp.LIBSSH2_SFTP_ATTRIBUTES *attrs)
