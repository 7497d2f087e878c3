from ssh2.session cimport Session


cdef class SessionChild:
    # The libssh2 handle; NULL until adopted and once freed (closed, cancelled).
    cdef void *_raw
    cdef readonly Session session
    # Kept alive as long as this object: what the libssh2 handle belongs to (the
    # session, the SFTP session of a file handle, the owner of a borrowed channel).
    cdef object _parent
    # Session.ChildKind that Session._release() frees; 0 for a borrowed handle.
    cdef int _kind

    cdef void _adopt(self, void *raw, Session session, object parent, int kind) noexcept
    cdef void *_live(self) except NULL
