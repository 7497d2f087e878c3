# cython: language_level=3
"""``PublicKey``: an identity held by the SSH agent."""
cimport cython
from ssh2.c cimport libssh2 as c
from ssh2.agent cimport Agent


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

