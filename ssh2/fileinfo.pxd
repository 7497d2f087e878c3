from ssh2.c cimport libssh2 as c


cdef class FileInfo:
    cdef c.libssh2_struct_stat _stat


cdef FileInfo PyFileInfo(const c.libssh2_struct_stat *st)
