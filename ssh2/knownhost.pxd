from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session


cdef class KnownHost:
    cdef c.LIBSSH2_KNOWNHOSTS *_hosts
    cdef readonly Session session
    # Bumped by every delete: entries from before it may point at freed nodes.
    cdef unsigned long _generation
    cdef c.LIBSSH2_KNOWNHOSTS *_ptr(self) except NULL


cdef class KnownHostEntry:
    cdef c.libssh2_knownhost *_entry
    cdef KnownHost _owner
    cdef unsigned long _generation
    cdef readonly unsigned int magic
    cdef readonly bytes name
    cdef readonly bytes key
    cdef readonly int typemask


cdef KnownHost PyKnownHost(Session session)
