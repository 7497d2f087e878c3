from cpython.pythread cimport PyThread_type_lock, PyThread_acquire_lock, PyThread_release_lock
from ssh2.c.libssh2 cimport LIBSSH2_SESSION
from ssh2.utils cimport FdIdentity

# Kinds of child handle whose release may need the network (see Session._release).
cdef enum ChildKind:
    CHILD_CHANNEL = 1
    CHILD_SFTP_HANDLE = 2
    CHILD_SFTP = 3
    CHILD_LISTENER = 4
    CHILD_PUBLICKEY = 5


# libssh2's "abstract" for this session's callbacks.
cdef struct SessionHook:
    void *owner                  # the Session (borrowed)
    unsigned long long received  # bytes read from the socket
    bint tcp                     # the socket is TCP: may acknowledge at once before waiting
    ssize_t last_read            # size of the last read that returned data


cdef class Session:
    cdef LIBSSH2_SESSION *_session
    # libssh2 sessions are not thread-safe: every call on the session or a child
    # holds this lock, taken with the GIL released.
    cdef PyThread_type_lock _lock
    cdef object _sock
    cdef int _fd
    cdef FdIdentity _fd_identity
    cdef bint _sock_was_blocking
    cdef bint _dead
    cdef bint _prefs_applied
    cdef bint _user_crypt_pref
    cdef list _deferred
    cdef object _kbd_responder
    cdef object _kbd_error
    cdef object _signer
    # Addresses of agent channels the server opened, not yet handed out.
    cdef list _agent_channels
    cdef SessionHook *_hook

    cdef int _check(self) except -1
    cdef int _check_unauthenticated(self) except -1
    cdef bint _socket_closed(self) noexcept
    cdef bint _socket_gone(self) except -1
    cdef void _mark_dead(self) noexcept
    cdef void _release(self, int kind, void *ptr) noexcept
    cdef int _drain_deferred(self) except -1
    cdef int _raise(self, int rc, str context=*) except -1
    cdef int _rc(self, int rc, str context=*) except -1
    cdef object _null_result(self, str context)
    cdef int _apply_default_prefs(self) except -1


cdef inline void lock(PyThread_type_lock l) noexcept nogil:
    PyThread_acquire_lock(l, 1)


cdef inline void unlock(PyThread_type_lock l) noexcept nogil:
    PyThread_release_lock(l)


# -- creating child objects without importing their modules ----------------------
# The session module imports none of the modules that define its children (they
# all import it), so that the package's module graph is a tree and any module may
# be imported first. Each child module registers a constructor when it is
# initialised; the session imports a child module on first use if nobody has yet.

cdef enum ChildModule:
    MODULE_CHANNEL = 0
    MODULE_SFTP = 1
    MODULE_SFTP_HANDLE = 2
    MODULE_LISTENER = 3
    MODULE_PUBLICKEY = 4
    MODULE_KNOWNHOST = 5
    MODULE_AGENT = 6
    MODULE_COUNT = 7

# ``raw``: the new libssh2 handle (NULL for objects that make their own);
# ``parent``: what the handle belongs to besides the session; ``extra``: one
# more value the constructor needs (a listener's bound port).
ctypedef object (*ChildFactory)(void *raw, Session session, object parent, object extra)

cdef void register_child(int module, ChildFactory factory) noexcept
cdef ChildFactory child_factory(int module) except NULL
