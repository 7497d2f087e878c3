# cython: language_level=3
"""``Agent`` (authentication through a running ssh-agent, SSH_AUTH_SOCK) and its
identities, ``PublicKey`` (also importable as ``ssh2.pkey.PublicKey``, ssh2-python's place).

One module for both: an identity points into its agent's list and an agent login
takes one, so neither can be defined without the other.
"""
cimport cython
from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session, MODULE_AGENT, lock, unlock, register_child
from ssh2.utils cimport to_bytes

from ssh2 import exceptions as _exc


cdef Agent PyAgent(Session session):
    return Agent(session)


cdef object _new_agent(void *raw, Session session, object parent, object extra):
    return Agent(session)


register_child(MODULE_AGENT, _new_agent)


cdef PublicKey PyPublicKey(c.libssh2_agent_publickey *pkey, Agent agent):
    cdef PublicKey obj = PublicKey.__new__(PublicKey)
    obj._pkey = pkey
    obj._agent = agent
    obj._generation = agent._generation
    obj.magic = pkey.magic
    obj.blob = pkey.blob[:pkey.blob_len]
    obj.comment = pkey.comment if pkey.comment is not NULL else b""
    return obj


@cython.no_gc_clear
cdef class PublicKey:
    """An agent identity: ``blob`` (SSH wire-format public key) and ``comment``."""

    def __init__(self):
        raise TypeError("public keys come from Agent.get_identities()")

    def __repr__(self):
        return f"PublicKey(comment={self.comment!r})"

    @property
    def blob_len(self):
        return len(self.blob)


@cython.no_gc_clear
cdef class Agent:
    """The SSH agent (``SSH_AUTH_SOCK``) for ``session``; also ``Session.agent_init()``.

    ``connect``, ``get_identities`` and ``disconnect`` talk to the local agent
    (blocking, briefly); ``userauth`` is a session call and returns EAGAIN in
    non-blocking mode.
    """

    def __cinit__(self):
        self._agent = NULL

    def __init__(self, Session session not None):
        if self._agent is not NULL:
            return
        session._check()
        self._agent = c.libssh2_agent_init(session._session)
        if self._agent is NULL:
            raise _exc.AgentError("libssh2 could not create an agent handle")
        self.session = session

    def __dealloc__(self):
        if self._agent is not NULL:
            if self._connected:
                with nogil:
                    c.libssh2_agent_disconnect(self._agent)
            c.libssh2_agent_free(self._agent)
            self._agent = NULL

    cdef c.LIBSSH2_AGENT *_ptr(self) except NULL:
        if self._agent is NULL:
            raise _exc.AgentError("the agent handle is freed")
        return self._agent

    def set_identity_path(self, path):
        """Use this agent socket instead of $SSH_AUTH_SOCK."""
        cdef bytes b_path = to_bytes(path)
        c.libssh2_agent_set_identity_path(self._ptr(), b_path)

    def get_identity_path(self):
        """The agent socket set by :meth:`set_identity_path` (bytes), or None."""
        cdef const char *p = c.libssh2_agent_get_identity_path(self._ptr())
        return p if p is not NULL else None

    def connect(self):
        cdef c.LIBSSH2_AGENT *a = self._ptr()
        cdef int rc
        with nogil:
            rc = c.libssh2_agent_connect(a)
        if rc != 0:
            raise _exc.AgentConnectionError(
                "could not connect to the SSH agent (is SSH_AUTH_SOCK set and the agent running?)",
                rc)
        self._connected = True
        return 0

    def disconnect(self):
        cdef c.LIBSSH2_AGENT *a = self._ptr()
        cdef int rc
        with nogil:
            rc = c.libssh2_agent_disconnect(a)
        self._connected = False
        self._generation += 1
        if rc != 0:
            raise _exc.AgentError("disconnecting from the SSH agent failed", rc)
        return 0

    def list_identities(self):
        """Fetch the agent's identity list (done by :meth:`get_identities` too)."""
        cdef c.LIBSSH2_AGENT *a = self._ptr()
        cdef int rc
        if not self._connected:
            raise _exc.AgentConnectionError("connect() to the agent first")
        with nogil:
            rc = c.libssh2_agent_list_identities(a)
        self._generation += 1
        if rc != 0:
            raise _exc.AgentListIdentitiesError("could not list the SSH agent's identities", rc)
        return 0

    def get_identities(self):
        """The agent's identities as :class:`ssh2.pkey.PublicKey` objects."""
        cdef c.libssh2_agent_publickey *cur = NULL
        cdef c.libssh2_agent_publickey *store = NULL
        cdef int rc
        self.list_identities()
        identities = []
        while True:
            rc = c.libssh2_agent_get_identity(self._ptr(), &store, cur)
            if rc == 1:
                return identities
            if rc < 0:
                raise _exc.AgentGetIdentityError("could not read an identity from the agent", rc)
            identities.append(PyPublicKey(store, self))
            cur = store

    def userauth(self, username, PublicKey pkey not None):
        """Authenticate ``username`` with one agent identity."""
        cdef bytes b_user = to_bytes(username)
        cdef const char *c_user = b_user
        cdef c.LIBSSH2_AGENT *a = self._ptr()
        cdef int rc
        if pkey._agent is not self or pkey._generation != self._generation:
            raise _exc.AgentError("stale identity: call get_identities() again")
        self.session._check_unauthenticated()
        with nogil:
            lock(self.session._lock)
            rc = c.libssh2_agent_userauth(a, c_user, pkey._pkey)
            unlock(self.session._lock)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        if rc != 0:
            self.session._raise(rc, f"agent authentication as {username!r} with "
                                    f"{pkey.comment.decode(errors='replace')!r} failed")
        return 0
