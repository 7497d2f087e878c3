from ssh2.c cimport libssh2 as c
from ssh2.agent cimport Agent


cdef class PublicKey:
    cdef c.libssh2_agent_publickey *_pkey
    cdef Agent _agent
    cdef unsigned long _generation
    cdef readonly bytes blob
    cdef readonly bytes comment
    cdef readonly unsigned int magic


cdef PublicKey PyPublicKey(c.libssh2_agent_publickey *pkey, Agent agent)
