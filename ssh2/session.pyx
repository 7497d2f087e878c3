# cython: language_level=3
"""``Session``: one SSH connection over a socket the caller connected."""
cimport cython
from cpython.pythread cimport PyThread_allocate_lock, PyThread_free_lock
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, strlen
from libc.errno cimport EAGAIN, EBADF, EINTR, ENOTCONN, errno
from posix.types cimport time_t

from ssh2.c cimport libssh2 as c
from ssh2.c cimport sftp as csftp
from ssh2.c cimport publickey as cpk
from ssh2.session cimport (SessionHook, lock, unlock, ChildFactory, MODULE_CHANNEL,
                           MODULE_SFTP, MODULE_LISTENER, MODULE_PUBLICKEY, MODULE_KNOWNHOST,
                           MODULE_AGENT, MODULE_COUNT)
from ssh2.fileinfo cimport PyFileInfo
from ssh2.utils cimport to_bytes, sock_fd, fd_is, set_tcp_nodelay, quick_ack, \
    set_fd_nonblocking, set_fd_blocking

from ssh2 import cipher_prefs, exceptions as _exc

#: The default cipher preference (bytes), ordered by the first session that needs it.
cdef object _default_ciphers = None

LIBSSH2_SESSION_BLOCK_INBOUND = c.LIBSSH2_SESSION_BLOCK_INBOUND
LIBSSH2_SESSION_BLOCK_OUTBOUND = c.LIBSSH2_SESSION_BLOCK_OUTBOUND
LIBSSH2_HOSTKEY_HASH_MD5 = c.LIBSSH2_HOSTKEY_HASH_MD5
LIBSSH2_HOSTKEY_HASH_SHA1 = c.LIBSSH2_HOSTKEY_HASH_SHA1
LIBSSH2_HOSTKEY_HASH_SHA256 = c.LIBSSH2_HOSTKEY_HASH_SHA256
LIBSSH2_HOSTKEY_TYPE_UNKNOWN = c.LIBSSH2_HOSTKEY_TYPE_UNKNOWN
LIBSSH2_HOSTKEY_TYPE_RSA = c.LIBSSH2_HOSTKEY_TYPE_RSA
LIBSSH2_HOSTKEY_TYPE_DSS = c.LIBSSH2_HOSTKEY_TYPE_DSS
LIBSSH2_HOSTKEY_TYPE_ECDSA_256 = c.LIBSSH2_HOSTKEY_TYPE_ECDSA_256
LIBSSH2_HOSTKEY_TYPE_ECDSA_384 = c.LIBSSH2_HOSTKEY_TYPE_ECDSA_384
LIBSSH2_HOSTKEY_TYPE_ECDSA_521 = c.LIBSSH2_HOSTKEY_TYPE_ECDSA_521
LIBSSH2_HOSTKEY_TYPE_ED25519 = c.LIBSSH2_HOSTKEY_TYPE_ED25519


class _Members(type):
    def __iter__(cls):
        return iter(cls._names_of)

    def __len__(cls):
        return len(cls._names_of)


class _NamedInt(int, metaclass=_Members):
    """An int constant that knows its name: what ``enum.IntEnum`` gives here,
    without importing ``enum`` at start-up (a third of ``import ssh2.session``).
    Members are the int-valued class attributes; only their values construct."""

    __slots__ = ()
    _names_of: dict = {}

    def __init_subclass__(cls):
        members = {name: value for name, value in vars(cls).items()
                   if type(value) is int and not name.startswith("_")}
        cls._names_of = {}
        for name, value in members.items():
            # A repeated value is an alias of the first name, as in enum.
            member = next((m for m in cls._names_of if m == value), None)
            if member is None:
                member = int.__new__(cls, value)
            setattr(cls, name, member)
            cls._names_of.setdefault(member, name)

    def __new__(cls, value):
        for member in cls._names_of:
            if member == value:
                return member
        raise ValueError(f"{value!r} is not a valid {cls.__name__}")

    @property
    def name(self) -> str:
        return type(self)._names_of[self]

    @property
    def value(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)}>"

    __str__ = int.__repr__


class MethodType(_NamedInt):
    """A method type of :meth:`Session.method_pref` and friends (``LIBSSH2_METHOD_*``).

    As in ssh2-python, the methods take only these, not plain numbers.
    """

    KEX = c.LIBSSH2_METHOD_KEX
    HOSTKEY = c.LIBSSH2_METHOD_HOSTKEY
    CRYPT_CS = c.LIBSSH2_METHOD_CRYPT_CS
    CRYPT_SC = c.LIBSSH2_METHOD_CRYPT_SC
    MAC_CS = c.LIBSSH2_METHOD_MAC_CS
    MAC_SC = c.LIBSSH2_METHOD_MAC_SC
    COMP_CS = c.LIBSSH2_METHOD_COMP_CS
    COMP_SC = c.LIBSSH2_METHOD_COMP_SC
    LANG_CS = c.LIBSSH2_METHOD_LANG_CS
    LANG_SC = c.LIBSSH2_METHOD_LANG_SC
    SIGN_ALGO = c.LIBSSH2_METHOD_SIGN_ALGO


class FlagType(_NamedInt):
    """A session flag of :meth:`Session.flag` (``LIBSSH2_FLAG_*``; only these, not numbers)."""

    SIGPIPE = c.LIBSSH2_FLAG_SIGPIPE
    COMPRESS = c.LIBSSH2_FLAG_COMPRESS
    QUOTE_PATHS = c.LIBSSH2_FLAG_QUOTE_PATHS
    # Flags of security-key (FIDO) identities, listed here as ssh2-python does.
    SK_PRESENCE_REQUIRED = 0x01
    SK_VERIFICATION_REQUIRED = 0x04
    #: Publickey logins sign at once, skipping the "would this key do?" query
    #: (one round trip less). Only in the bundled libssh2 (build_support/patches);
    #: a libssh2 without it raises from :meth:`Session.flag`.
    PUBLICKEY_NO_QUERY = 0x7001
    #: The handshake returns once the userauth service is requested; the first
    #: login request then goes out without waiting a round trip for the accept.
    #: Bundled libssh2 only, like the flag above.
    EARLY_USERAUTH = 0x7002


LIBSSH2_METHOD_KEX = MethodType.KEX
LIBSSH2_METHOD_HOSTKEY = MethodType.HOSTKEY
LIBSSH2_METHOD_CRYPT_CS = MethodType.CRYPT_CS
LIBSSH2_METHOD_CRYPT_SC = MethodType.CRYPT_SC
LIBSSH2_METHOD_MAC_CS = MethodType.MAC_CS
LIBSSH2_METHOD_MAC_SC = MethodType.MAC_SC
LIBSSH2_METHOD_COMP_CS = MethodType.COMP_CS
LIBSSH2_METHOD_COMP_SC = MethodType.COMP_SC
LIBSSH2_METHOD_LANG_CS = MethodType.LANG_CS
LIBSSH2_METHOD_LANG_SC = MethodType.LANG_SC
LIBSSH2_METHOD_SIGN_ALGO = MethodType.SIGN_ALGO
LIBSSH2_FLAG_SIGPIPE = FlagType.SIGPIPE
LIBSSH2_FLAG_COMPRESS = FlagType.COMPRESS
LIBSSH2_FLAG_QUOTE_PATHS = FlagType.QUOTE_PATHS
LIBSSH2_FLAG_SK_PRESENCE_REQUIRED = FlagType.SK_PRESENCE_REQUIRED
LIBSSH2_FLAG_SK_VERIFICATION_REQUIRED = FlagType.SK_VERIFICATION_REQUIRED
LIBSSH2_FLAG_PUBLICKEY_NO_QUERY = FlagType.PUBLICKEY_NO_QUERY
LIBSSH2_FLAG_EARLY_USERAUTH = FlagType.EARLY_USERAUTH
#: Our patch 0011's flag: the recv callback passes MSG_PEEK on (ours does; set by itself).
cdef int _FLAG_RECV_PEEKS = 0x7003


def _method(method_type):
    if not isinstance(method_type, MethodType):
        raise TypeError(f"method_type must be a ssh2.session.MethodType (LIBSSH2_METHOD_*), "
                        f"not {method_type!r}")
    return int(method_type)

cdef extern from *:
    """
    #ifndef PSSH2_PATCHED_LIBSSH2
    #define PSSH2_PATCHED_LIBSSH2 0
    #endif
    """
    int PSSH2_PATCHED_LIBSSH2

#: Whether this build's libssh2 can use OpenSSH host certificates (the host
#: key algorithms ``*-cert-v01@openssh.com``): only the bundled libssh2 with
#: build_support/patches can. Checking the certificate is the caller's job.
HOST_CERTIFICATES = bool(PSSH2_PATCHED_LIBSSH2)
#: Whether libssh2 is the bundled build with every patch of build_support/patches
#: (host certificates, one-round-trip logins, ChaCha20-Poly1305 on OpenSSL's
#: EVP, SFTP reads as large as the server allows, ...).
PATCHED_LIBSSH2 = bool(PSSH2_PATCHED_LIBSSH2)

# SSH_DISCONNECT_BY_APPLICATION (RFC 4253 section 11.1)
cdef int DISCONNECT_BY_APPLICATION = 11

cdef int _libssh2_ready = 0


cdef int _ensure_libssh2() except -1:
    global _libssh2_ready
    if not _libssh2_ready:
        if c.libssh2_init(0) != 0:
            raise _exc.SessionStartupError("libssh2_init failed")
        _libssh2_ready = 1
    return 0


# Installed once the caller's socket is closed: libssh2 must never touch an fd
# number that the kernel may already have given to another connection.
cdef ssize_t _dead_send(c.libssh2_socket_t s, const void *buf, size_t n, int flags,
                        void **abstract) noexcept nogil:
    return -EBADF


cdef ssize_t _dead_recv(c.libssh2_socket_t s, void *buf, size_t n, int flags,
                        void **abstract) noexcept nogil:
    return -ENOTCONN


# libssh2's own recv, plus a count of bytes received: lets a keepalive tell a
# silent server from a live one (ServerAliveCountMax) at no extra cost.
cdef extern from "<sys/socket.h>" nogil:
    ssize_t recv(int fd, void *buf, size_t n, int flags)


# A read this short means request/reply traffic rather than a bulk stream.
cdef enum:
    QUICKACK_BELOW = 4096


cdef ssize_t _counting_recv(c.libssh2_socket_t s, void *buf, size_t n, int flags,
                            void **abstract) noexcept nogil:
    cdef ssize_t rc = recv(s, buf, n, flags)
    cdef SessionHook *hook = <SessionHook *>abstract[0]
    cdef int err
    if rc > 0:
        hook.received += <unsigned long long>rc
        hook.last_read = rc
    elif rc < 0:
        err = errno
        if err == EAGAIN and hook.tcp and hook.last_read < QUICKACK_BELOW:
            # libssh2 now waits for the server's answer to a request. sshd
            # keeps Nagle on for sessions without a pty, so that answer can
            # sit behind our ACK of the small packet before it, which delayed
            # ACK would hold ~40 ms (the first channel after login stalled
            # that long). Bulk reads skip it: immediate ACKs cost ~10 % more
            # client CPU on a download, and full-sized packets never wait.
            quick_ack(s)
        # As libssh2: an interrupted call is tried again, not an error.
        return -EAGAIN if err == EINTR else -err
    return rc


cdef void _kbd_callback(const char *name, int name_len, const char *instruction,
                        int instruction_len, int num_prompts,
                        const c.LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
                        c.LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses,
                        void **abstract) noexcept nogil:
    with gil:
        _kbd_answer(<Session>(<SessionHook *>abstract[0]).owner, name[:name_len], instruction[:instruction_len],
                    num_prompts, prompts, responses)


class Prompt(str):
    """A keyboard-interactive prompt: its text, and ``echo`` (whether the answer may be shown)."""

    echo: bool

    def __new__(cls, text, echo):
        prompt = str.__new__(cls, text)
        prompt.echo = bool(echo)
        return prompt


cdef void _kbd_answer(Session session, bytes name, bytes instruction, int num_prompts,
                      const c.LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
                      c.LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses) noexcept:
    cdef int i
    cdef bytes answer
    cdef char *copy
    try:
        # ssh2-python's types: name and instruction as bytes, prompts as str.
        questions = [Prompt(prompts[i].text[:prompts[i].length].decode("utf-8", "replace"),
                            prompts[i].echo) for i in range(num_prompts)]
        answers = session._kbd_responder(name, instruction, questions)
        if len(answers) != num_prompts:
            raise ValueError(f"keyboard-interactive callback returned {len(answers)} "
                             f"answers for {num_prompts} prompts")
        for i in range(num_prompts):
            answer = to_bytes(answers[i])
            # libssh2 frees each response with free(): allocate with malloc.
            copy = <char *>malloc(len(answer) + 1)
            if copy is NULL:
                raise MemoryError()
            memcpy(copy, <char *>answer, len(answer))
            copy[len(answer)] = 0
            responses[i].text = copy
            responses[i].length = len(answer)
    except BaseException as err:
        session._kbd_error = err


# libssh2_userauth_publickey's signer: runs inside that call (session lock held),
# hands the data to the Python callable and the signature back in malloc'd memory
# (libssh2 frees it with free(), its default allocator here).
cdef int _sign_callback(c.LIBSSH2_SESSION *session, unsigned char **sig, size_t *sig_len,
                        const unsigned char *data, size_t data_len,
                        void **abstract) noexcept nogil:
    with gil:
        return _sign(<Session>(<SessionHook *>abstract[0]).owner, data[:data_len], sig, sig_len)


cdef int _sign(Session session, bytes data, unsigned char **sig, size_t *sig_len) noexcept:
    cdef bytes signature
    cdef unsigned char *copy
    try:
        signature = session._signer(data)
        if not isinstance(signature, bytes) or not signature:
            raise TypeError("the signing callback must return the signature as bytes")
        copy = <unsigned char *>malloc(len(signature))
        if copy is NULL:
            raise MemoryError()
        memcpy(copy, <const char *>signature, len(signature))
        sig[0] = copy
        sig_len[0] = len(signature)
        return 0
    except BaseException as err:
        session._kbd_error = err
        return -1


# libssh2 calls this from inside whichever call read the server's
# "auth-agent@openssh.com" channel open, with the session lock held: the channel
# is only queued here (calling back into Python code that might use the session
# would deadlock) and handed out by Session.accept_agent_channel().
cdef void _agent_channel_opened(c.LIBSSH2_SESSION *session, c.LIBSSH2_CHANNEL *channel,
                                void **abstract) noexcept nogil:
    with gil:
        try:
            (<Session>(<SessionHook *>abstract[0]).owner)._agent_channels.append(
                <size_t>channel)
        except BaseException:
            pass  # the channel stays in the session's list and is freed with it


# -- child constructors (see session.pxd) ---------------------------------------------

cdef ChildFactory _factories[MODULE_COUNT]
_CHILD_MODULES = ("ssh2.channel", "ssh2.sftp", "ssh2.sftp_handle", "ssh2.listener",
                  "ssh2.publickey", "ssh2.knownhost", "ssh2.agent")


cdef void register_child(int module, ChildFactory factory) noexcept:
    _factories[module] = factory


cdef ChildFactory child_factory(int module) except NULL:
    """The constructor of a child module's objects, importing that module if need be.

    Looked up before the libssh2 call that makes the handle, so that a module
    that cannot be imported never leaves a handle without an owner."""
    if _factories[module] is NULL:
        __import__(_CHILD_MODULES[module])
        if _factories[module] is NULL:
            raise ImportError(f"{_CHILD_MODULES[module]} did not register its constructor")
    return _factories[module]


@cython.no_gc_clear
cdef class Session:
    """An SSH session (libssh2 ``LIBSSH2_SESSION``).

    Connect a TCP socket yourself, then call :meth:`handshake` with it. In
    blocking mode (the default) calls wait as libssh2 does; after
    ``set_blocking(False)`` a call that would block returns
    ``LIBSSH2_ERROR_EAGAIN`` and :meth:`block_directions` says what to wait for.

    Every call releases the GIL while libssh2 runs. A session may be shared by
    threads: calls are serialised on an internal lock.
    """

    def __cinit__(self):
        _ensure_libssh2()
        self._lock = PyThread_allocate_lock()
        if self._lock is NULL:
            raise MemoryError()
        # What libssh2's callbacks get as their abstract: C state the recv
        # callback can update without the GIL, and (borrowed) this object.
        self._hook = <SessionHook *>calloc(1, sizeof(SessionHook))
        if self._hook is NULL:
            raise MemoryError()
        self._hook.owner = <void *>self
        self._session = c.libssh2_session_init_ex(NULL, NULL, NULL, <void *>self._hook)
        if self._session is NULL:
            raise _exc.SessionStartupError("libssh2 could not allocate a session")
        c.libssh2_session_callback_set2(self._session, c.LIBSSH2_CALLBACK_RECV,
                                      <c.libssh2_cb_generic *>_counting_recv)
        # The callback passes recv(2)'s flags on: our libssh2 may peek at the server's
        # version line instead of reading it a byte at a time (patch 0011; a libssh2
        # without it refuses the flag, harmlessly).
        c.libssh2_session_flag(self._session, _FLAG_RECV_PEEKS, 1)
        self._fd = -1
        self._deferred = []
        self._agent_channels = []

    def __dealloc__(self):
        cdef bint restore_blocking
        if self._session is not NULL:
            # The session's last act must not write to the network: a child
            # still holding network state is released without I/O, and the
            # server learns of the end when the socket closes (disconnect()
            # says goodbye explicitly).
            restore_blocking = self._sock_was_blocking and not self._socket_closed()
            self._mark_dead()
            while self._deferred:
                kind, addr = self._deferred.pop(0)
                _free_child(kind, <void *><size_t>addr)
            with nogil:
                c.libssh2_session_free(self._session)
            self._session = NULL
            if restore_blocking:
                set_fd_blocking(self._fd)
        if self._lock is not NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL
        free(self._hook)
        self._hook = NULL

    # -- internal ------------------------------------------------------------

    cdef bint _socket_closed(self) noexcept:
        # Pure C on purpose: this runs in finalisers, where the socket object
        # may already be half-cleared by the cycle collector (a gevent socket
        # then recurses forever in __getattr__ if asked for its fileno()).
        if self._fd < 0:
            return False
        return not fd_is(self._fd, self._fd_identity)

    cdef void _mark_dead(self) noexcept:
        if not self._dead and self._session is not NULL:
            self._dead = True
            c.libssh2_session_callback_set2(self._session, c.LIBSSH2_CALLBACK_SEND,
                                          <c.libssh2_cb_generic *>_dead_send)
            c.libssh2_session_callback_set2(self._session, c.LIBSSH2_CALLBACK_RECV,
                                          <c.libssh2_cb_generic *>_dead_recv)

    cdef int _check(self) except -1:
        """Notice a closed socket; finish deferred releases.

        Once the caller's socket is closed the session is "dead": calls still
        go to libssh2, whose sends and receives then fail at once without
        touching the fd (SocketSendError / SocketRecvError, as with any
        closed socket; :meth:`_raise` says why). (``_session`` itself is never
        NULL while methods can be called: ``__cinit__`` raises instead.)
        """
        if not self._dead and self._socket_gone():
            self._mark_dead()
        if self._deferred and not self._dead:
            self._drain_deferred()
        return 0

    cdef bint _socket_gone(self) except -1:
        """Whether the caller's socket was closed, for a call (not a finaliser): asked of
        the socket object (closed, its fileno() is -1), which costs no system call; the
        fd's inode is compared only for an fd given as a number. (Each call asking the
        kernel was some forty ``fstat`` calls per login.) A socket object whose fd is
        closed behind its back, with ``os.close``, is not noticed here."""
        sock = self._sock
        if sock is None or isinstance(sock, int) or not hasattr(sock, "fileno"):
            return self._socket_closed()
        try:
            return sock.fileno() != self._fd
        except Exception:   # a socket object broken or half torn down: gone
            return True

    cdef void _release(self, int kind, void *ptr) noexcept:
        """Free a child's libssh2 handle, or queue it if that would block.

        Called from the children's ``__dealloc__``. In non-blocking mode the
        release may need a round trip; it is then retried on the session's
        next call instead of blocking a finaliser.
        """
        cdef int rc
        if self._session is NULL:
            return
        if not self._dead and self._socket_closed():
            self._mark_dead()
        if self._deferred and not self._dead:
            try:
                self._drain_deferred()
            except BaseException:
                pass
        if self._deferred:
            self._deferred.append((kind, <size_t>ptr))
            return
        with nogil:
            lock(self._lock)
            rc = _free_child(kind, ptr)
            unlock(self._lock)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            self._deferred.append((kind, <size_t>ptr))

    cdef int _drain_deferred(self) except -1:
        cdef int rc, kind
        cdef void *ptr
        while self._deferred:
            kind, addr = self._deferred[0]
            ptr = <void *><size_t>addr
            with nogil:
                lock(self._lock)
                rc = _free_child(kind, ptr)
                unlock(self._lock)
            if rc == c.LIBSSH2_ERROR_EAGAIN:
                return 0
            self._deferred.pop(0)
        return 0

    cdef int _raise(self, int rc, str context="") except -1:
        cdef char *msg = NULL
        cdef int msg_len = 0
        message = ""
        if self._session is not NULL:
            with nogil:
                lock(self._lock)
                c.libssh2_session_last_error(self._session, &msg, &msg_len, 0)
                if msg is not NULL and msg_len > 0:
                    with gil:
                        message = msg[:msg_len].decode("utf-8", "replace")
                unlock(self._lock)
        if self._dead:
            message = ("the socket this session was using has been closed; open a new session"
                       + (f" ({message})" if message else ""))
        raise _exc.error_for(rc, message, context=context)

    cdef int _rc(self, int rc, str context="") except -1:
        if rc >= 0 or rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        return self._raise(rc, context)

    cdef int _check_unauthenticated(self) except -1:
        # OpenSSH ignores auth requests once authenticated: libssh2 would wait forever.
        self._check()
        if c.libssh2_userauth_authenticated(self._session):
            raise _exc.BadUseError("the session is already authenticated")
        return 0

    cdef object _null_result(self, str context):
        """For calls that return NULL on failure: EAGAIN or raise."""
        cdef int rc = c.libssh2_session_last_errno(self._session)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            return c.LIBSSH2_ERROR_EAGAIN
        if rc == 0:
            rc = c.LIBSSH2_ERROR_SOCKET_NONE
        self._raise(rc, context)

    cdef int _apply_default_prefs(self) except -1:
        """Set the default cipher preference, unless the user chose one."""
        if self._prefs_applied:
            return 0
        self._prefs_applied = True
        if self._user_crypt_pref:
            return 0
        global _default_ciphers
        if _default_ciphers is None:
            # The ciphers are libssh2's compiled-in ones, the same both ways and for
            # every session: ordered once, not for each of a fan-out's sessions.
            _default_ciphers = cipher_prefs.default_order(
                self.supported_algs(MethodType.CRYPT_CS)).encode()
        if _default_ciphers:
            for method in (MethodType.CRYPT_CS, MethodType.CRYPT_SC):
                c.libssh2_session_method_pref(self._session, method, _default_ciphers)
        return 0

    # -- connection ----------------------------------------------------------

    @property
    def sock(self):
        """The socket given to :meth:`handshake` (``None`` before it)."""
        return self._sock

    def handshake(self, sock not None):
        """Start the SSH session over a connected socket.

        Sets TCP_NODELAY on the socket (on loopback its absence costs ~40 ms
        per round trip), acknowledges at once (TCP_QUICKACK) whenever the
        session is about to wait for the server, and leaves the socket in
        non-blocking mode at OS level, as libssh2 needs. Returns 0, or ``LIBSSH2_ERROR_EAGAIN`` in
        non-blocking mode; raises on failure.
        """
        cdef FdIdentity identity
        cdef int fd
        cdef int rc
        if self._sock is not None and sock is self._sock:
            fd = self._fd   # a non-blocking handshake's next call: known already
        else:
            fd = sock_fd(sock, &identity)
        if self._sock is None:
            self._sock = sock
            self._fd = fd
            self._fd_identity = identity
            self._hook.tcp = set_tcp_nodelay(fd)
            # libssh2 would otherwise restore blocking mode on the fd when the
            # session is freed, even if the fd then belongs to someone else.
            self._sock_was_blocking = set_fd_nonblocking(fd)
        elif sock is not self._sock:
            raise _exc.BadUseError("handshake() was already started on another socket")
        self._check()
        self._apply_default_prefs()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_session_handshake(self._session, fd)
            unlock(self._lock)
        return self._rc(rc, "SSH handshake failed")

    def disconnect(self, int reason=DISCONNECT_BY_APPLICATION, description="bye", lang=""):
        """Send SSH_MSG_DISCONNECT. The socket stays open: close it yourself."""
        cdef int rc
        cdef bytes b_desc = to_bytes(description)
        cdef bytes b_lang = to_bytes(lang)
        cdef const char *c_desc = b_desc
        cdef const char *c_lang = b_lang
        self._check()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_session_disconnect_ex(self._session, reason, c_desc, c_lang)
            unlock(self._lock)
        return self._rc(rc, "disconnect failed")

    def set_blocking(self, bint blocking):
        """Blocking (True, default) or non-blocking (False) mode for the session and its children."""
        with nogil:
            lock(self._lock)
            c.libssh2_session_set_blocking(self._session, blocking)
            unlock(self._lock)

    def get_blocking(self):
        return bool(c.libssh2_session_get_blocking(self._session))

    def set_timeout(self, long timeout):
        """Timeout in milliseconds for blocking calls (0: wait forever)."""
        if timeout < 0:
            raise ValueError("timeout must be >= 0 milliseconds")
        c.libssh2_session_set_timeout(self._session, timeout)

    def get_timeout(self):
        return c.libssh2_session_get_timeout(self._session)

    def block_directions(self):
        """After EAGAIN: ``LIBSSH2_SESSION_BLOCK_INBOUND`` and/or ``..._OUTBOUND``."""
        return c.libssh2_session_block_directions(self._session)

    def flag(self, flag, enabled=True):
        """Set a session flag (a :class:`FlagType`: ``LIBSSH2_FLAG_COMPRESS``,
        ``LIBSSH2_FLAG_SIGPIPE``, ``LIBSSH2_FLAG_PUBLICKEY_NO_QUERY``,
        ``LIBSSH2_FLAG_EARLY_USERAUTH``); before the handshake."""
        cdef int rc
        if not isinstance(flag, FlagType):
            raise TypeError(f"flag must be a ssh2.session.FlagType (LIBSSH2_FLAG_*), not {flag!r}")
        rc = c.libssh2_session_flag(self._session, int(flag), 1 if enabled else 0)
        return self._rc(rc, f"setting session flag {flag}")

    def keepalive_config(self, bint want_reply, unsigned int interval):
        """Send keepalives every ``interval`` seconds from :meth:`keepalive_send`."""
        c.libssh2_keepalive_config(self._session, want_reply, interval)

    def keepalive_send(self):
        """Send a keepalive if one is due; returns seconds until the next one.

        Non-blocking mode: ``LIBSSH2_ERROR_EAGAIN`` while the keepalive is
        still being sent (call again when the socket is writable).
        """
        cdef int seconds = 0
        cdef int rc
        self._check()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_keepalive_send(self._session, &seconds)
            unlock(self._lock)
        if self._rc(rc, "sending keepalive") == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        return seconds

    def banner_set(self, banner):
        cdef bytes b = to_bytes(banner)
        return self._rc(c.libssh2_session_banner_set(self._session, b), "setting banner")

    def banner_get(self):
        """The server's SSH banner, after the handshake."""
        cdef const char *banner
        banner = c.libssh2_session_banner_get(self._session)
        return None if banner is NULL else banner.decode("utf-8", "replace")

    # -- algorithms ------------------------------------------------------------

    def method_pref(self, method_type, prefs not None):
        """Set the comma-separated preference list for a :class:`MethodType`."""
        cdef int kind = _method(method_type)
        cdef bytes b_prefs = to_bytes(prefs)
        if kind in (c.LIBSSH2_METHOD_CRYPT_CS, c.LIBSSH2_METHOD_CRYPT_SC):
            self._user_crypt_pref = True
        return self._rc(c.libssh2_session_method_pref(self._session, kind, b_prefs),
                        f"setting preferences {prefs!r}")

    def methods(self, method_type):
        """The algorithm negotiated for a :class:`MethodType` (after handshake)."""
        cdef int kind = _method(method_type)
        cdef const char *m
        m = c.libssh2_session_methods(self._session, kind)
        return None if m is NULL else m.decode()

    def supported_algs(self, method_type):
        """The algorithms this libssh2 supports for a :class:`MethodType`."""
        cdef int kind = _method(method_type)
        cdef const char **algs = NULL
        cdef int i, n
        n = c.libssh2_session_supported_algs(self._session, kind, &algs)
        self._rc(n, f"listing algorithms for method {method_type}")
        try:
            return [algs[i].decode() for i in range(n)]
        finally:
            if algs is not NULL:
                c.libssh2_free(self._session, algs)

    # -- host key ----------------------------------------------------------------

    def hostkey(self):
        """The server's host key as ``(key_bytes, LIBSSH2_HOSTKEY_TYPE_*)``."""
        cdef size_t length = 0
        cdef int key_type = 0
        cdef const char *key
        self._check()
        key = c.libssh2_session_hostkey(self._session, &length, &key_type)
        if key is NULL:
            raise _exc.SessionHostKeyError("no host key: has the handshake completed?")
        return key[:length], key_type

    def hostkey_hash(self, int hash_type):
        """The host key's hash (``LIBSSH2_HOSTKEY_HASH_MD5/SHA1/SHA256``) as bytes."""
        cdef const char *digest
        cdef int size
        if hash_type == c.LIBSSH2_HOSTKEY_HASH_MD5:
            size = 16
        elif hash_type == c.LIBSSH2_HOSTKEY_HASH_SHA1:
            size = 20
        elif hash_type == c.LIBSSH2_HOSTKEY_HASH_SHA256:
            size = 32
        else:
            raise ValueError(f"unknown hash type {hash_type}")
        digest = c.libssh2_hostkey_hash(self._session, hash_type)
        if digest is NULL:
            return None
        return digest[:size]

    def knownhost_init(self):
        """A :class:`ssh2.knownhost.KnownHost` collection bound to this session."""
        return child_factory(MODULE_KNOWNHOST)(NULL, self, None, None)

    # -- authentication ------------------------------------------------------------

    def userauth_list(self, username):
        """Authentication methods the server offers for ``username``.

        Returns a list of names, ``None`` when the "none" method already
        authenticated the user, or ``LIBSSH2_ERROR_EAGAIN``.
        """
        cdef bytes b_user = to_bytes(username)
        cdef const char *c_user = b_user
        cdef unsigned int n = len(b_user)
        cdef char *methods
        self._check()
        # Asking again after success would wait forever: OpenSSH ignores it.
        if c.libssh2_userauth_authenticated(self._session):
            return None
        with nogil:
            lock(self._lock)
            methods = c.libssh2_userauth_list(self._session, c_user, n)
            unlock(self._lock)
        if methods is NULL:
            if c.libssh2_userauth_authenticated(self._session):
                return None
            return self._null_result("listing authentication methods")
        return methods.decode().split(",")

    def userauth_authenticated(self):
        return bool(c.libssh2_userauth_authenticated(self._session))

    def userauth_publickey_fromfile(self, username, privatekey, passphrase="", publickey=None):
        """Authenticate with a private key file (public key derived if not given)."""
        cdef bytes b_user = to_bytes(username)
        cdef bytes b_priv = to_bytes(privatekey)
        cdef bytes b_pass = to_bytes(passphrase or "")
        cdef bytes b_pub = to_bytes(publickey) if publickey is not None else None
        cdef const char *c_user = b_user
        cdef const char *c_priv = b_priv
        cdef const char *c_pass = b_pass
        cdef const char *c_pub = NULL if b_pub is None else <const char *>b_pub
        cdef unsigned int n = len(b_user)
        cdef int rc
        self._check_unauthenticated()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_userauth_publickey_fromfile_ex(self._session, c_user, n, c_pub,
                                                        c_priv, c_pass)
            unlock(self._lock)
        return self._rc(rc, f"public key authentication as {username!r} with {privatekey!r} failed")

    def userauth_publickey_frommemory(self, username, privatekeyfiledata, passphrase="",
                                      publickeyfiledata=None):
        """Authenticate with a private key held in memory (OpenSSH or PEM text)."""
        cdef bytes b_user = to_bytes(username)
        cdef bytes b_priv = to_bytes(privatekeyfiledata)
        cdef bytes b_pass = to_bytes(passphrase or "")
        cdef bytes b_pub = to_bytes(publickeyfiledata) if publickeyfiledata else b""
        cdef const char *c_user = b_user
        cdef const char *c_priv = b_priv
        cdef const char *c_pass = b_pass
        cdef const char *c_pub = b_pub
        cdef size_t n_user = len(b_user), n_priv = len(b_priv), n_pub = len(b_pub)
        cdef int rc
        self._check_unauthenticated()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_userauth_publickey_frommemory(self._session, c_user, n_user,
                                                       c_pub if n_pub else NULL, n_pub,
                                                       c_priv, n_priv, c_pass)
            unlock(self._lock)
        return self._rc(rc, f"public key authentication as {username!r} (key from memory) failed")

    def userauth_publickey(self, username, bytes pubkeydata not None, sign=None):
        """Authenticate with a public key whose signatures come from ``sign``.

        ``pubkeydata``: the public key blob (SSH wire format); ``sign(data)``
        returns the raw signature of ``data`` (an HSM, a ``cryptography`` key).
        It runs inside the call and must not use the session. Without it
        there is nothing to sign with (libssh2 would crash): ``BadUseError``.
        """
        cdef bytes b_user = to_bytes(username)
        cdef const char *c_user = b_user
        cdef const unsigned char *c_pub = <const unsigned char *><const char *>pubkeydata
        cdef size_t n_pub = len(pubkeydata)
        cdef void **abstract = <void **>&self._hook
        cdef int rc
        if sign is None or not callable(sign):
            raise _exc.BadUseError("userauth_publickey needs a signing callable, sign(data) -> "
                                   "signature; for key files and keys in memory use "
                                   "userauth_publickey_fromfile/_frommemory")
        self._check_unauthenticated()
        self._signer = sign
        self._kbd_error = None
        try:
            with nogil:
                lock(self._lock)
                rc = c.libssh2_userauth_publickey(self._session, c_user, c_pub, n_pub,
                                                  _sign_callback, abstract)
                unlock(self._lock)
            if self._kbd_error is not None:
                raise self._kbd_error
        finally:
            self._signer = None
            self._kbd_error = None
        return self._rc(rc, f"public key authentication as {username!r} failed")

    def userauth_hostbased_fromfile(self, username, privatekey, hostname, publickey=None,
                                    passphrase=""):
        """Host-based authentication with the client host's key files."""
        cdef bytes b_user = to_bytes(username)
        cdef bytes b_priv = to_bytes(privatekey)
        cdef bytes b_host = to_bytes(hostname)
        cdef bytes b_pass = to_bytes(passphrase or "")
        cdef bytes b_pub = to_bytes(publickey) if publickey is not None else None
        cdef const char *c_user = b_user
        cdef const char *c_priv = b_priv
        cdef const char *c_host = b_host
        cdef const char *c_pass = b_pass
        cdef const char *c_pub = NULL if b_pub is None else <const char *>b_pub
        cdef unsigned int n_user = len(b_user), n_host = len(b_host)
        cdef int rc
        self._check_unauthenticated()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_userauth_hostbased_fromfile_ex(self._session, c_user, n_user, c_pub,
                                                         c_priv, c_pass, c_host, n_host,
                                                         c_user, n_user)
            unlock(self._lock)
        return self._rc(rc, f"host-based authentication as {username!r} failed")

    def publickey_init(self):
        """The publickey subsystem (:class:`ssh2.publickey.PublicKeySystem`), or EAGAIN;
        :class:`ssh2.exceptions.PublicKeyInitError` if the server does not offer it."""
        cdef cpk.LIBSSH2_PUBLICKEY *pk
        cdef ChildFactory make = child_factory(MODULE_PUBLICKEY)
        self._check()
        with nogil:
            lock(self._lock)
            pk = cpk.libssh2_publickey_init(self._session)
            unlock(self._lock)
        if pk is NULL:
            try:
                return self._null_result("starting the publickey subsystem failed")
            except _exc.SSH2Error as err:
                raise _exc.PublicKeyInitError(str(err), err.errno) from err
        return make(pk, self, self, None)

    def userauth_password(self, username, password):
        cdef bytes b_user = to_bytes(username)
        cdef bytes b_pass = to_bytes(password)
        cdef const char *c_user = b_user
        cdef const char *c_pass = b_pass
        cdef unsigned int n_user = len(b_user), n_pass = len(b_pass)
        cdef int rc
        self._check_unauthenticated()
        with nogil:
            lock(self._lock)
            rc = c.libssh2_userauth_password_ex(self._session, c_user, n_user, c_pass, n_pass, NULL)
            unlock(self._lock)
        return self._rc(rc, f"password authentication as {username!r} failed")

    def userauth_keyboardinteractive(self, username, password):
        """Keyboard-interactive authentication answering every prompt with ``password``."""
        return self.userauth_keyboardinteractive_callback(
            username, lambda name, instruction, prompts: [password] * len(prompts))

    def userauth_keyboardinteractive_callback(self, username, callback):
        """Keyboard-interactive authentication driven by ``callback``.

        ``callback(name, instruction, prompts)`` gets the server's name and
        instruction (bytes) and prompts (str; each a :class:`Prompt` whose
        ``echo`` says whether the answer may be shown), and returns one answer
        (str or bytes) per prompt, as in ssh2-python.
        """
        cdef bytes b_user = to_bytes(username)
        cdef const char *c_user = b_user
        cdef unsigned int n_user = len(b_user)
        cdef int rc
        if not callable(callback):
            raise TypeError("callback must be callable")
        self._check_unauthenticated()
        self._kbd_responder = callback
        self._kbd_error = None
        try:
            with nogil:
                lock(self._lock)
                rc = c.libssh2_userauth_keyboard_interactive_ex(self._session, c_user, n_user,
                                                              _kbd_callback)
                unlock(self._lock)
            if self._kbd_error is not None:
                raise self._kbd_error
        finally:
            self._kbd_responder = None
            self._kbd_error = None
        return self._rc(rc, f"keyboard-interactive authentication as {username!r} failed")

    def agent_init(self):
        """A :class:`ssh2.agent.Agent` for this session (not yet connected)."""
        self._check()
        return child_factory(MODULE_AGENT)(NULL, self, None, None)

    def agent_auth(self, username):
        """Authenticate with any identity of the running SSH agent (blocking mode)."""
        agent = self.agent_init()
        agent.connect()
        try:
            for identity in agent.get_identities():
                try:
                    agent.userauth(username, identity)
                    return
                except _exc.AuthenticationError:
                    continue
            raise _exc.AgentAuthenticationError(
                f"no identity in the SSH agent was accepted for {username!r}")
        finally:
            agent.disconnect()

    @property
    def bytes_received(self):
        """Bytes read from the socket so far (a keepalive's way to see the server is alive)."""
        return self._hook.received

    def accept_agent_forwarding(self):
        """Accept the agent channels a server opens after ``Channel.request_auth_agent``.

        Without this libssh2 refuses them. Accepted channels queue up until
        :meth:`accept_agent_channel` takes them; relaying their bytes to a
        local agent is the caller's job.
        """
        self._check()
        c.libssh2_session_callback_set2(self._session, c.LIBSSH2_CALLBACK_AUTHAGENT,
                                      <c.libssh2_cb_generic *>_agent_channel_opened)

    def accept_agent_channel(self):
        """The oldest agent channel the server opened, or ``None``; never does I/O.

        Channel opens are read by whichever call on the session meets them,
        so check after calls that waited for the server.
        """
        if not self._agent_channels:
            return None
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        return make(<c.LIBSSH2_CHANNEL *><size_t>self._agent_channels.pop(0), self, None, None)

    # -- channels ----------------------------------------------------------------

    def open_session(self, unsigned int window_size=c.LIBSSH2_CHANNEL_WINDOW_DEFAULT,
                     unsigned int packet_size=c.LIBSSH2_CHANNEL_PACKET_DEFAULT):
        """Open a "session" channel: a :class:`Channel`, or ``LIBSSH2_ERROR_EAGAIN``."""
        cdef c.LIBSSH2_CHANNEL *channel
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        with nogil:
            lock(self._lock)
            channel = c.libssh2_channel_open_ex(self._session, "session", 7, window_size,
                                              packet_size, NULL, 0)
            unlock(self._lock)
        if channel is NULL:
            return self._null_result("opening a session channel failed")
        return make(channel, self, None, None)

    def direct_tcpip_ex(self, host, int port, shost, int sport):
        """A channel to ``host:port`` as seen from the server (``ssh -L``)."""
        cdef bytes b_host = to_bytes(host)
        cdef bytes b_shost = to_bytes(shost)
        cdef const char *c_host = b_host
        cdef const char *c_shost = b_shost
        cdef c.LIBSSH2_CHANNEL *channel
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        with nogil:
            lock(self._lock)
            channel = c.libssh2_channel_direct_tcpip_ex(self._session, c_host, port, c_shost, sport)
            unlock(self._lock)
        if channel is NULL:
            return self._null_result(f"opening a direct-tcpip channel to {host}:{port} failed")
        return make(channel, self, None, None)

    def direct_tcpip(self, host, int port):
        return self.direct_tcpip_ex(host, port, "127.0.0.1", 22)

    def direct_streamlocal_ex(self, socket_path, shost, int sport):
        """A channel to a Unix socket on the server."""
        cdef bytes b_path = to_bytes(socket_path)
        cdef bytes b_shost = to_bytes(shost)
        cdef const char *c_path = b_path
        cdef const char *c_shost = b_shost
        cdef c.LIBSSH2_CHANNEL *channel
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        with nogil:
            lock(self._lock)
            channel = c.libssh2_channel_direct_streamlocal_ex(self._session, c_path, c_shost, sport)
            unlock(self._lock)
        if channel is NULL:
            return self._null_result(f"opening a streamlocal channel to {socket_path} failed")
        return make(channel, self, None, None)

    def forward_listen_ex(self, int queue_maxsize, host=None, int port=0):
        """Ask the server to listen on ``host:port`` (``ssh -R``): ``(listener, bound_port)``,
        or EAGAIN in non-blocking mode.

        ``host`` None listens on every address; ``port`` 0 lets the server
        choose (``bound_port`` says which). At most ``queue_maxsize``
        connections wait for ``Listener.forward_accept``.
        """
        cdef bytes b_host = to_bytes(host) if host is not None else None
        cdef const char *c_host = NULL if b_host is None else <const char *>b_host
        cdef int out_port = 0
        cdef c.LIBSSH2_LISTENER *listener
        cdef ChildFactory make = child_factory(MODULE_LISTENER)
        self._check()
        with nogil:
            lock(self._lock)
            listener = c.libssh2_channel_forward_listen_ex(self._session, c_host, port,
                                                         &out_port, queue_maxsize)
            unlock(self._lock)
        if listener is NULL:
            return self._null_result(f"remote port forward on {host or '*'}:{port} failed")
        return make(listener, self, None, out_port), out_port

    def forward_listen(self, int port):
        """Ask the server to listen on ``port`` of every address: a :class:`Listener`."""
        result = self.forward_listen_ex(16, None, port)
        return result if isinstance(result, int) else result[0]

    def sftp_init(self):
        """Start the SFTP subsystem: an :class:`ssh2.sftp.SFTP`, or EAGAIN."""
        cdef csftp.LIBSSH2_SFTP *sftp
        cdef ChildFactory make = child_factory(MODULE_SFTP)
        self._check()
        with nogil:
            lock(self._lock)
            sftp = csftp.libssh2_sftp_init(self._session)
            unlock(self._lock)
        if sftp is NULL:
            return self._null_result("starting the SFTP subsystem failed")
        return make(sftp, self, None, None)

    def scp_recv2(self, path):
        """Start an SCP download: ``(Channel, FileInfo)``, or EAGAIN."""
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef c.libssh2_struct_stat st
        cdef c.LIBSSH2_CHANNEL *channel
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        with nogil:
            lock(self._lock)
            channel = c.libssh2_scp_recv2(self._session, c_path, &st)
            unlock(self._lock)
        if channel is NULL:
            return self._null_result(f"SCP download of {path!r} failed")
        return make(channel, self, None, None), PyFileInfo(&st)

    def scp_send64(self, path, int mode, c.libssh2_int64_t size, time_t mtime, time_t atime):
        """Start an SCP upload of ``size`` bytes: a :class:`Channel` to write to, or EAGAIN."""
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef c.LIBSSH2_CHANNEL *channel
        cdef ChildFactory make = child_factory(MODULE_CHANNEL)
        self._check()
        with nogil:
            lock(self._lock)
            channel = c.libssh2_scp_send64(self._session, c_path, mode, size, mtime, atime)
            unlock(self._lock)
        if channel is NULL:
            return self._null_result(f"SCP upload to {path!r} failed")
        return make(channel, self, None, None)

    # -- errors ------------------------------------------------------------------

    def last_error(self, size_t msg_size=1024):
        """libssh2's message for the last error ('' if none)."""
        cdef char *msg = NULL
        cdef int msg_len = 0
        c.libssh2_session_last_error(self._session, &msg, &msg_len, 0)
        if msg is NULL:
            return ""
        return msg[:min(<size_t>msg_len, msg_size)].decode("utf-8", "replace")

    def last_errno(self):
        return c.libssh2_session_last_errno(self._session)

    def set_last_error(self, int errcode, errmsg):
        cdef bytes b_msg = to_bytes(errmsg)
        return c.libssh2_session_set_last_error(self._session, errcode, b_msg)


cdef int _free_child(int kind, void *ptr) noexcept nogil:
    if kind == CHILD_CHANNEL:
        return c.libssh2_channel_free(<c.LIBSSH2_CHANNEL *>ptr)
    if kind == CHILD_SFTP_HANDLE:
        return csftp.libssh2_sftp_close_handle(<csftp.LIBSSH2_SFTP_HANDLE *>ptr)
    if kind == CHILD_SFTP:
        return csftp.libssh2_sftp_shutdown(<csftp.LIBSSH2_SFTP *>ptr)
    if kind == CHILD_LISTENER:
        return c.libssh2_channel_forward_cancel(<c.LIBSSH2_LISTENER *>ptr)
    if kind == CHILD_PUBLICKEY:
        return cpk.libssh2_publickey_shutdown(<cpk.LIBSSH2_PUBLICKEY *>ptr)
    return 0
