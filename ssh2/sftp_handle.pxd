from ssh2.c cimport sftp as csftp
from ssh2.handle cimport SessionChild
from ssh2.sftp cimport SFTP


cdef class SFTPHandle(SessionChild):
    cdef readonly SFTP sftp
    # read()'s landing buffer for large reads, kept for the handle's life.
    cdef char *_scratch
    cdef size_t _scratch_size
    # pump_from_fd()'s chunk in flight: libssh2 wants the same pointer and length again
    # after EAGAIN, so what was read from the file and not yet sent stays here.
    cdef char *_outgoing
    cdef size_t _outgoing_size
    cdef Py_ssize_t _outgoing_filled
    cdef Py_ssize_t _outgoing_sent
    cdef csftp.LIBSSH2_SFTP_HANDLE *_ptr(self) except NULL
    cdef bint _after_round(self, Py_ssize_t n, int local_errno, str local_what,
                           str remote_what, wait) except -1
    cdef object _read_via_scratch(self, csftp.LIBSSH2_SFTP_HANDLE *h, size_t size)
    cdef char *_buffer(self, char **buf, size_t *have, size_t size) except NULL
    cdef void _free_buffers(self) noexcept


cdef SFTPHandle PySFTPHandle(csftp.LIBSSH2_SFTP_HANDLE *handle, SFTP sftp)
