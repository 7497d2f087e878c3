# cython: language_level=3
"""``Listener``: a port the server listens on for us (remote forwarding)."""
cimport cython
from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session, CHILD_LISTENER, lock, unlock
from ssh2.channel cimport PyChannel

from ssh2 import exceptions as _exc


cdef Listener PyListener(c.LIBSSH2_LISTENER *listener, Session session, int bound_port):
    cdef Listener obj = Listener.__new__(Listener)
    obj._listener = listener
    obj.session = session
    obj.bound_port = bound_port
    return obj


@cython.no_gc_clear
cdef class Listener:
    """From ``Session.forward_listen*()``; ``bound_port`` is the server's port."""

    def __init__(self):
        raise TypeError("listeners come from Session.forward_listen()")

    def __dealloc__(self):
        if self._listener is not NULL and self.session is not None:
            self.session._release(CHILD_LISTENER, self._listener)
            self._listener = NULL

    def forward_accept(self):
        """Wait for a connection to the forwarded port: a Channel, or EAGAIN."""
        cdef c.LIBSSH2_CHANNEL *channel
        if self._listener is NULL:
            raise _exc.ChannelError("the listener is cancelled")
        self.session._check()
        with nogil:
            lock(self.session._lock)
            channel = c.libssh2_channel_forward_accept(self._listener)
            unlock(self.session._lock)
        if channel is NULL:
            return self.session._null_result("accepting a forwarded connection failed")
        return PyChannel(channel, self.session)

    def forward_cancel(self):
        """Stop listening on the server."""
        cdef int rc
        if self._listener is NULL:
            raise _exc.ChannelError("the listener is cancelled")
        self.session._check()
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_forward_cancel(self._listener)
            unlock(self.session._lock)
        # Freed by libssh2 on every return but EAGAIN, errors included.
        if rc != c.LIBSSH2_ERROR_EAGAIN:
            self._listener = NULL
        return self.session._rc(rc, "cancelling the port forward failed")
