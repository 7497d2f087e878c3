from ssh2.c.publickey cimport LIBSSH2_PUBLICKEY
from ssh2.handle cimport SessionChild
from ssh2.session cimport Session


cdef class PublicKeySystem(SessionChild):
    cdef LIBSSH2_PUBLICKEY *_ptr(self) except NULL


cdef PublicKeySystem PyPublicKeySystem(LIBSSH2_PUBLICKEY *pkey, Session session)
