from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class Listener:
    cdef c.LIBSSH2_LISTENER *_listener
    cdef readonly Session session
    cdef readonly int bound_port


cdef Listener PyListener(c.LIBSSH2_LISTENER *listener, Session session, int bound_port)
