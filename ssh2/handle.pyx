# cython: language_level=3
"""``SessionChild``: what every libssh2 handle object has in common.

A child owns one libssh2 handle (channel, SFTP session, file handle, listener,
publickey subsystem) and frees it exactly once, through its session, which it
keeps alive; it also keeps alive the object its handle depends on. Calls on a
closed handle, or on one whose parent is closed, raise instead of reaching
libssh2 with a dangling pointer. Subclasses set ``_CLOSED`` (exception class and
message) and cast ``_live()`` to their handle type.
"""
cimport cython

from ssh2 import exceptions as _exc


@cython.no_gc_clear
cdef class SessionChild:

    _CLOSED = (_exc.SSH2Error, "the handle is closed")

    cdef void _adopt(self, void *raw, Session session, object parent, int kind) noexcept:
        self._raw = raw
        self.session = session
        self._parent = parent
        self._kind = kind

    cdef void *_live(self) except NULL:
        """The handle, once this object and its parents are open (else raises)."""
        if self._raw is NULL:
            error, message = self._CLOSED
            raise error(message)
        if isinstance(self._parent, SessionChild):
            (<SessionChild>self._parent)._live()
        else:
            self.session._check()
        return self._raw

    def __dealloc__(self):
        # no_gc_clear: the session is still here when a reference cycle is collected.
        if self._raw is not NULL and self._kind:
            self.session._release(self._kind, self._raw)
        self._raw = NULL
