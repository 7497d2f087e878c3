from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class Agent:
    cdef c.LIBSSH2_AGENT *_agent
    cdef readonly Session session
    cdef bint _connected
    # Bumped whenever identities are re-listed or the agent disconnects.
    cdef unsigned long _generation
    cdef c.LIBSSH2_AGENT *_ptr(self) except NULL


cdef class PublicKey:
    cdef c.libssh2_agent_publickey *_pkey
    cdef Agent _agent
    cdef unsigned long _generation
    cdef readonly bytes blob
    cdef readonly bytes comment
    cdef readonly unsigned int magic


cdef Agent PyAgent(Session session)
cdef PublicKey PyPublicKey(c.libssh2_agent_publickey *pkey, Agent agent)
