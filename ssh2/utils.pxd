cdef bytes to_bytes(object value)
cdef int sock_fd(object sock) except -1
cdef void set_tcp_nodelay(int fd) noexcept nogil
cdef bint fd_is_blocking(int fd) noexcept nogil
cdef void set_fd_nonblocking(int fd) noexcept nogil
cdef void set_fd_blocking(int fd) noexcept nogil
cdef int poll_fd(int fd, int directions, long timeout_ms) noexcept nogil
