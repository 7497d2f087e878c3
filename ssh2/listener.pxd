from ssh2.c cimport libssh2 as c
from ssh2.handle cimport SessionChild
from ssh2.session cimport Session


cdef class Listener(SessionChild):
    cdef readonly int bound_port
    cdef c.LIBSSH2_LISTENER *_ptr(self) except NULL


cdef Listener PyListener(c.LIBSSH2_LISTENER *listener, Session session, int bound_port)
