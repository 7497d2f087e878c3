from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class Agent:
    cdef c.LIBSSH2_AGENT *_agent
    cdef readonly Session session
    cdef bint _connected
    # Bumped whenever identities are re-listed or the agent disconnects.
    cdef unsigned long _generation
    cdef c.LIBSSH2_AGENT *_ptr(self) except NULL


cdef Agent PyAgent(Session session)
