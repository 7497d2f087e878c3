# cython: language_level=3
"""``KnownHost``: an OpenSSH known_hosts collection (libssh2 knownhost API)."""
cimport cython
from ssh2.c cimport libssh2 as c
from ssh2.session cimport Session, MODULE_KNOWNHOST, register_child
from ssh2.utils cimport to_bytes

from ssh2 import exceptions as _exc

LIBSSH2_KNOWNHOST_TYPE_MASK = c.LIBSSH2_KNOWNHOST_TYPE_MASK
LIBSSH2_KNOWNHOST_TYPE_PLAIN = c.LIBSSH2_KNOWNHOST_TYPE_PLAIN
LIBSSH2_KNOWNHOST_TYPE_SHA1 = c.LIBSSH2_KNOWNHOST_TYPE_SHA1
LIBSSH2_KNOWNHOST_TYPE_CUSTOM = c.LIBSSH2_KNOWNHOST_TYPE_CUSTOM
LIBSSH2_KNOWNHOST_KEYENC_MASK = c.LIBSSH2_KNOWNHOST_KEYENC_MASK
LIBSSH2_KNOWNHOST_KEYENC_RAW = c.LIBSSH2_KNOWNHOST_KEYENC_RAW
LIBSSH2_KNOWNHOST_KEYENC_BASE64 = c.LIBSSH2_KNOWNHOST_KEYENC_BASE64
LIBSSH2_KNOWNHOST_KEY_MASK = c.LIBSSH2_KNOWNHOST_KEY_MASK
LIBSSH2_KNOWNHOST_KEY_SHIFT = c.LIBSSH2_KNOWNHOST_KEY_SHIFT
LIBSSH2_KNOWNHOST_KEY_RSA1 = c.LIBSSH2_KNOWNHOST_KEY_RSA1
LIBSSH2_KNOWNHOST_KEY_SSHRSA = c.LIBSSH2_KNOWNHOST_KEY_SSHRSA
LIBSSH2_KNOWNHOST_KEY_SSHDSS = c.LIBSSH2_KNOWNHOST_KEY_SSHDSS
LIBSSH2_KNOWNHOST_KEY_ECDSA_256 = c.LIBSSH2_KNOWNHOST_KEY_ECDSA_256
LIBSSH2_KNOWNHOST_KEY_ECDSA_384 = c.LIBSSH2_KNOWNHOST_KEY_ECDSA_384
LIBSSH2_KNOWNHOST_KEY_ECDSA_521 = c.LIBSSH2_KNOWNHOST_KEY_ECDSA_521
LIBSSH2_KNOWNHOST_KEY_ED25519 = c.LIBSSH2_KNOWNHOST_KEY_ED25519
LIBSSH2_KNOWNHOST_KEY_UNKNOWN = c.LIBSSH2_KNOWNHOST_KEY_UNKNOWN
LIBSSH2_KNOWNHOST_CHECK_MATCH = c.LIBSSH2_KNOWNHOST_CHECK_MATCH
LIBSSH2_KNOWNHOST_CHECK_MISMATCH = c.LIBSSH2_KNOWNHOST_CHECK_MISMATCH
LIBSSH2_KNOWNHOST_CHECK_NOTFOUND = c.LIBSSH2_KNOWNHOST_CHECK_NOTFOUND
LIBSSH2_KNOWNHOST_CHECK_FAILURE = c.LIBSSH2_KNOWNHOST_CHECK_FAILURE
LIBSSH2_KNOWNHOST_FILE_OPENSSH = c.LIBSSH2_KNOWNHOST_FILE_OPENSSH

# Session.hostkey() type -> known hosts key type bits.
_HOSTKEY_TO_KNOWNHOST = {
    c.LIBSSH2_HOSTKEY_TYPE_RSA: c.LIBSSH2_KNOWNHOST_KEY_SSHRSA,
    c.LIBSSH2_HOSTKEY_TYPE_DSS: c.LIBSSH2_KNOWNHOST_KEY_SSHDSS,
    c.LIBSSH2_HOSTKEY_TYPE_ECDSA_256: c.LIBSSH2_KNOWNHOST_KEY_ECDSA_256,
    c.LIBSSH2_HOSTKEY_TYPE_ECDSA_384: c.LIBSSH2_KNOWNHOST_KEY_ECDSA_384,
    c.LIBSSH2_HOSTKEY_TYPE_ECDSA_521: c.LIBSSH2_KNOWNHOST_KEY_ECDSA_521,
    c.LIBSSH2_HOSTKEY_TYPE_ED25519: c.LIBSSH2_KNOWNHOST_KEY_ED25519,
}


def hostkey_typemask(int hostkey_type):
    """The known hosts key-type bits for a ``Session.hostkey()`` type."""
    try:
        return _HOSTKEY_TO_KNOWNHOST[hostkey_type]
    except KeyError:
        raise ValueError(f"unknown host key type {hostkey_type}") from None


cdef KnownHost PyKnownHost(Session session):
    cdef KnownHost obj = KnownHost.__new__(KnownHost)
    obj._hosts = c.libssh2_knownhost_init(session._session)
    if obj._hosts is NULL:
        raise _exc.KnownHostError("libssh2 could not create a known hosts collection")
    obj.session = session
    return obj


cdef object _new_knownhost(void *raw, Session session, object parent, object extra):
    return PyKnownHost(session)


register_child(MODULE_KNOWNHOST, _new_knownhost)


cdef KnownHostEntry _entry(KnownHost owner, c.libssh2_knownhost *entry):
    cdef KnownHostEntry obj = KnownHostEntry.__new__(KnownHostEntry)
    obj._entry = entry
    obj._owner = owner
    obj._generation = owner._generation
    obj.magic = entry.magic
    obj.name = entry.name if entry.name is not NULL else None
    obj.key = entry.key if entry.key is not NULL else None
    obj.typemask = entry.typemask
    return obj


@cython.no_gc_clear
cdef class KnownHost:
    """A collection of known host keys; from ``Session.knownhost_init()``.

    Reading and writing files needs no network: these calls only touch
    memory and local files.
    """

    def __init__(self):
        raise TypeError("known hosts collections come from Session.knownhost_init()")

    def __dealloc__(self):
        if self._hosts is not NULL:
            c.libssh2_knownhost_free(self._hosts)
            self._hosts = NULL

    cdef c.LIBSSH2_KNOWNHOSTS *_ptr(self) except NULL:
        if self._hosts is NULL:
            raise _exc.KnownHostError("the known hosts collection is freed")
        return self._hosts

    def readfile(self, filename, int f_type=c.LIBSSH2_KNOWNHOST_FILE_OPENSSH):
        """Add the entries of a known_hosts file; returns how many were read."""
        cdef bytes b_file = to_bytes(filename)
        cdef int rc = c.libssh2_knownhost_readfile(self._ptr(), b_file, f_type)
        if rc < 0:
            raise _exc.KnownHostReadFileError(
                f"could not read known hosts file {filename!r}: "
                f"{self.session.last_error() or 'unreadable or malformed'}", rc)
        return rc

    def readline(self, line, int f_type=c.LIBSSH2_KNOWNHOST_FILE_OPENSSH):
        cdef bytes b_line = to_bytes(line)
        cdef int rc = c.libssh2_knownhost_readline(self._ptr(), b_line, len(b_line), f_type)
        if rc < 0:
            raise _exc.KnownHostReadLineError(f"could not parse known hosts line {line!r}", rc)
        return rc

    def writefile(self, filename, int f_type=c.LIBSSH2_KNOWNHOST_FILE_OPENSSH):
        """Write every entry to a known_hosts file (replacing it)."""
        cdef bytes b_file = to_bytes(filename)
        cdef int rc = c.libssh2_knownhost_writefile(self._ptr(), b_file, f_type)
        if rc < 0:
            raise _exc.KnownHostWriteFileError(f"could not write known hosts file {filename!r}", rc)
        return rc

    def writeline(self, KnownHostEntry entry not None, int f_type=c.LIBSSH2_KNOWNHOST_FILE_OPENSSH,
                  size_t buf_len=4096):
        """One entry as a known_hosts line (bytes, with newline)."""
        cdef bytearray buf = bytearray(buf_len)
        cdef size_t out = 0
        cdef int rc
        self._valid(entry)
        rc = c.libssh2_knownhost_writeline(self._ptr(), entry._entry, buf, buf_len, &out, f_type)
        if rc < 0:
            raise _exc.KnownHostWriteLineError("could not format the known hosts entry", rc)
        return bytes(buf[:out])

    def _valid(self, KnownHostEntry entry):
        if entry._owner is not self or entry._generation != self._generation:
            raise _exc.KnownHostError(
                "stale known hosts entry: it belongs to another collection or the "
                "collection changed since it was obtained; call get() again")

    def checkp(self, host, int port, key, int typemask):
        """Check ``key`` for ``host:port`` (port -1: any); return the matching entry.

        Raises ``KnownHostCheckMisMatchError`` when the host is known with a
        different key, ``KnownHostCheckNotFoundError`` when it is unknown and
        ``KnownHostCheckFailure`` if the check could not run.
        """
        cdef bytes b_host = to_bytes(host)
        cdef bytes b_key = to_bytes(key)
        cdef c.libssh2_knownhost *found = NULL
        cdef int rc = c.libssh2_knownhost_checkp(self._ptr(), b_host, port, b_key, len(b_key),
                                                 typemask, &found)
        where = host if port in (-1, 22) else f"[{host}]:{port}"
        if rc == c.LIBSSH2_KNOWNHOST_CHECK_MATCH:
            return _entry(self, found)
        if rc == c.LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
            raise _exc.KnownHostCheckMisMatchError(
                f"the host key of {where} does NOT match the known hosts entry: "
                f"the key changed or someone is intercepting the connection")
        if rc == c.LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
            raise _exc.KnownHostCheckNotFoundError(f"{where} is not in known hosts")
        raise _exc.KnownHostCheckFailure(f"checking the host key of {where} failed")

    def check(self, host, key, int typemask):
        return self.checkp(host, -1, key, typemask)

    def addc(self, host, key, int typemask, salt=None, comment=None):
        """Add an entry; ``typemask`` combines TYPE_*, KEYENC_* and KEY_* bits."""
        cdef bytes b_host = to_bytes(host)
        cdef bytes b_key = to_bytes(key)
        cdef bytes b_salt = to_bytes(salt) if salt is not None else None
        cdef bytes b_comment = to_bytes(comment) if comment is not None else None
        cdef const char *c_salt = NULL if b_salt is None else <const char *>b_salt
        cdef const char *c_comment = NULL if b_comment is None else <const char *>b_comment
        cdef size_t n_comment = 0 if b_comment is None else len(b_comment)
        cdef c.libssh2_knownhost *store = NULL
        cdef int rc = c.libssh2_knownhost_addc(self._ptr(), b_host, c_salt, b_key, len(b_key),
                                               c_comment, n_comment, typemask, &store)
        if rc < 0:
            raise _exc.KnownHostAddError(f"could not add {host!r} to known hosts", rc)
        return _entry(self, store)

    def add(self, host, key, int typemask, salt=None):
        return self.addc(host, key, typemask, salt)

    def delete(self, KnownHostEntry entry not None):
        """Remove an entry; entries obtained earlier become stale."""
        cdef int rc
        self._valid(entry)
        rc = c.libssh2_knownhost_del(self._ptr(), entry._entry)
        if rc < 0:
            raise _exc.KnownHostDeleteError("could not delete the known hosts entry", rc)
        self._generation += 1
        entry._entry = NULL
        return rc

    def get(self, KnownHostEntry prev=None):
        """Every entry (after ``prev`` if given), as :class:`KnownHostEntry` objects."""
        cdef c.libssh2_knownhost *store = NULL
        cdef c.libssh2_knownhost *cur = NULL
        cdef int rc
        entries = []
        if prev is not None:
            self._valid(prev)
            cur = prev._entry
        while True:
            rc = c.libssh2_knownhost_get(self._ptr(), &store, cur)
            if rc == 1:
                return entries
            if rc < 0:
                raise _exc.KnownHostGetError("could not list known hosts", rc)
            entries.append(_entry(self, store))
            cur = store


@cython.no_gc_clear
cdef class KnownHostEntry:
    """One known hosts entry: ``name`` (None for hashed), ``key`` (base64), ``typemask``."""

    def __repr__(self):
        return f"KnownHostEntry(name={self.name!r}, typemask={self.typemask:#x})"
