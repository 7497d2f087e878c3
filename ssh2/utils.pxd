cdef bytes to_bytes(object value)

# Which open file an fd number refers to, to tell a live socket from a
# closed one whose number was reused.
cdef struct FdIdentity:
    bint valid
    unsigned long long dev
    unsigned long long ino

cdef int sock_fd(object sock, FdIdentity *identity=*) except -1

cdef FdIdentity fd_identity(int fd) noexcept nogil
cdef bint fd_is(int fd, FdIdentity ident) noexcept nogil
cdef bint set_tcp_nodelay(int fd) noexcept nogil
cdef void quick_ack(int fd) noexcept nogil
cdef bint set_fd_nonblocking(int fd) noexcept nogil
cdef void set_fd_blocking(int fd) noexcept nogil
cdef int poll_fd(int fd, int directions, long timeout_ms) noexcept nogil
