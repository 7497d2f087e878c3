# cython: language_level=3
"""Helpers: libssh2 version, waiting on a session's socket, error codes."""
from libc.errno cimport errno, EINTR
from posix.fcntl cimport fcntl, F_GETFL, F_SETFL, O_NONBLOCK
from posix.stat cimport struct_stat, fstat, S_ISSOCK

from ssh2.c cimport libssh2 as c

from ssh2 import exceptions as _exc

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    enum:
        POLLIN
        POLLOUT

cdef extern from "<netinet/in.h>" nogil:
    enum:
        IPPROTO_TCP

cdef extern from "<netinet/tcp.h>" nogil:
    enum:
        TCP_NODELAY
        TCP_QUICKACK

cdef extern from "<sys/socket.h>" nogil:
    int setsockopt(int fd, int level, int optname, const void *optval, unsigned int optlen)


cdef bytes to_bytes(object value):
    if isinstance(value, bytes):
        return <bytes>value
    if isinstance(value, str):
        return (<str>value).encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if hasattr(value, "__fspath__"):
        return to_bytes(value.__fspath__())
    raise TypeError(f"expected str or bytes, got {type(value).__name__}")


cdef int sock_fd(object sock, FdIdentity *identity=NULL) except -1:
    """The fd of a socket object (or an fd given as int); TypeError unless it is a socket.
    ``identity``, if given, receives the fd's :func:`fd_identity` from the same ``fstat``."""
    cdef int fd
    cdef struct_stat st
    if isinstance(sock, int):
        number = sock
    else:
        try:
            number = sock.fileno()
        except AttributeError:
            raise TypeError(f"expected a socket or file descriptor, got {type(sock).__name__}")
        if not isinstance(number, int):
            raise TypeError(f"{type(sock).__name__}.fileno() returned "
                            f"{type(number).__name__}, not a file descriptor")
    fd = number
    if fd < 0:
        raise _exc.BadSocketError("the socket is closed (fileno() is -1)")
    cdef bint valid = fstat(fd, &st) == 0
    if valid and not S_ISSOCK(st.st_mode):
        raise TypeError(f"file descriptor {fd} is not a socket")
    if identity is not NULL:
        identity.valid = valid
        identity.dev = st.st_dev if valid else 0
        identity.ino = st.st_ino if valid else 0
    return fd


cdef FdIdentity fd_identity(int fd) noexcept nogil:
    cdef struct_stat st
    cdef FdIdentity ident
    ident.valid = fstat(fd, &st) == 0
    ident.dev = st.st_dev if ident.valid else 0
    ident.ino = st.st_ino if ident.valid else 0
    return ident


cdef bint fd_is(int fd, FdIdentity ident) noexcept nogil:
    # A closed fd number may already belong to a new socket: same number is
    # not enough, the inode (unique per socket in sockfs) must match too.
    cdef FdIdentity now = fd_identity(fd)
    return now.valid and ident.valid and now.dev == ident.dev and now.ino == ident.ino


cdef bint set_tcp_nodelay(int fd) noexcept nogil:
    cdef int one = 1
    # Fails harmlessly on non-TCP sockets (socketpair, Unix sockets): the
    # result says whether the fd is TCP.
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0


cdef void quick_ack(int fd) noexcept nogil:
    cdef int one = 1
    # Linux only, and not sticky: the kernel returns to delayed ACK on its own,
    # so this is set again before every wait for the peer.
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one))


cdef bint set_fd_nonblocking(int fd) noexcept nogil:
    """Whether the fd was in blocking mode (it is not any more): one ``fcntl`` to read
    the mode, a second only to change it."""
    cdef int flags = fcntl(fd, F_GETFL, 0)
    if flags >= 0 and not (flags & O_NONBLOCK):
        fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        return True
    return False


cdef void set_fd_blocking(int fd) noexcept nogil:
    cdef int flags = fcntl(fd, F_GETFL, 0)
    if flags >= 0 and (flags & O_NONBLOCK):
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)


cdef int poll_fd(int fd, int directions, long timeout_ms) noexcept nogil:
    """poll() the fd in the libssh2 block directions; EINTR is retried."""
    cdef pollfd p
    cdef int rc
    p.fd = fd
    p.events = 0
    p.revents = 0
    if directions & c.LIBSSH2_SESSION_BLOCK_INBOUND:
        p.events |= POLLIN
    if directions & c.LIBSSH2_SESSION_BLOCK_OUTBOUND:
        p.events |= POLLOUT
    if p.events == 0:
        p.events = POLLIN
    while True:
        rc = poll(&p, 1, timeout_ms)
        if rc >= 0 or errno != EINTR:
            return rc


def version(int required_version=0):
    """The version of the libssh2 library in use, e.g. ``'1.11.1'``; None if it is older
    than ``required_version`` (``0x010b00`` for 1.11.0)."""
    cdef const char *v = c.libssh2_version(required_version)
    return v.decode() if v is not NULL else None


def wait_socket(_socket, session, timeout=1):
    """Wait until ``_socket`` is ready in the direction ``session`` is blocked on.

    For non-blocking mode without an event loop: call after a call returned
    ``LIBSSH2_ERROR_EAGAIN``. ``timeout`` in seconds (``None``: no limit).
    Returns the poll() result: 0 on timeout, > 0 when ready. The GIL is
    released while waiting.
    """
    cdef int fd = sock_fd(_socket)
    cdef int directions = session.block_directions()
    cdef long timeout_ms = -1 if timeout is None else <long>(timeout * 1000)
    cdef int rc
    with nogil:
        rc = poll_fd(fd, directions, timeout_ms)
    if rc < 0:
        raise OSError(errno, "poll() failed")
    return rc


def handle_error_codes(int errcode):
    """Raise the exception for a libssh2 error code; return it if not an error."""
    if errcode >= 0 or errcode == c.LIBSSH2_ERROR_EAGAIN:
        return errcode
    raise _exc.error_for(errcode)


#: How str arguments are encoded for libssh2 (and its answers decoded).
ENCODING = "utf-8"


def find_eol(bytes buf not None, Py_ssize_t pos):
    """Where the line starting at ``pos`` ends: ``(length, eol_length)``.

    ``length`` counts the line's bytes from ``pos`` up to its end of line
    (``\n``, or ``\r\n`` whose ``\r`` it leaves out), ``eol_length`` is 1 or
    2; the next line starts at ``pos + length + eol_length``. ``(-1, 0)`` when
    no end of line follows ``pos``.
    """
    cdef Py_ssize_t end
    if pos < 0 or pos > len(buf):
        raise ValueError(f"position {pos} is outside the buffer")
    end = buf.find(b"\n", pos)
    if end < 0:
        return -1, 0
    if end > pos and buf[end - 1] == 13:  # "\r\n"
        return end - 1 - pos, 2
    return end - pos, 1


def ssh2_exit():
    """Release libssh2's global resources (only once no session is left)."""
    c.libssh2_exit()

