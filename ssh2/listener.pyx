# cython: language_level=3
"""``Listener``: a port the server listens on for us (remote forwarding)."""
cimport cython
from ssh2.c cimport libssh2 as c
from ssh2.handle cimport SessionChild
from ssh2.session cimport (Session, CHILD_LISTENER, MODULE_LISTENER, lock, unlock,
                           register_child)
from ssh2.channel cimport PyChannel

from ssh2 import exceptions as _exc


cdef Listener PyListener(c.LIBSSH2_LISTENER *listener, Session session, int bound_port):
    cdef Listener obj = Listener.__new__(Listener)
    obj._adopt(listener, session, session, CHILD_LISTENER)
    obj.bound_port = bound_port
    return obj


cdef object _new_listener(void *raw, Session session, object parent, object bound_port):
    return PyListener(<c.LIBSSH2_LISTENER *>raw, session, bound_port)


register_child(MODULE_LISTENER, _new_listener)


@cython.no_gc_clear
cdef class Listener(SessionChild):
    """From ``Session.forward_listen*()``; ``bound_port`` is the server's port."""

    _CLOSED = (_exc.ChannelError, "the listener is cancelled")

    def __init__(self):
        raise TypeError("listeners come from Session.forward_listen()")

    cdef c.LIBSSH2_LISTENER *_ptr(self) except NULL:
        return <c.LIBSSH2_LISTENER *>self._live()

    def forward_accept(self):
        """Wait for a connection to the forwarded port: a Channel, or EAGAIN."""
        cdef c.LIBSSH2_LISTENER *listener = self._ptr()
        cdef c.LIBSSH2_CHANNEL *channel
        with nogil:
            lock(self.session._lock)
            channel = c.libssh2_channel_forward_accept(listener)
            unlock(self.session._lock)
        if channel is NULL:
            return self.session._null_result("accepting a forwarded connection failed")
        return PyChannel(channel, self.session)

    def forward_cancel(self):
        """Stop listening on the server."""
        cdef c.LIBSSH2_LISTENER *listener = self._ptr()
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_channel_forward_cancel(listener)
            unlock(self.session._lock)
        # Freed by libssh2 on every return but EAGAIN, errors included.
        if rc != c.LIBSSH2_ERROR_EAGAIN:
            self._raw = NULL
        return self.session._rc(rc, "cancelling the port forward failed")
