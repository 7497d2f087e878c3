# cython: language_level=3
"""``SFTP``: the SFTP subsystem of a session, and pipelined bulk transfers."""
cimport cython

from ssh2.c cimport libssh2 as c
from ssh2.c cimport sftp as csftp
from ssh2.handle cimport SessionChild
from ssh2.session cimport (Session, CHILD_SFTP, MODULE_SFTP, MODULE_SFTP_HANDLE, lock, unlock,
                           register_child, child_factory, ChildFactory)
from ssh2.sftp_attributes cimport SFTPAttributes, SFTPStatVFS
from ssh2.utils cimport to_bytes, poll_fd
from ssh2.channel cimport PyChannel

import os
from ssh2 import exceptions as _exc

LIBSSH2_FXF_READ = csftp.LIBSSH2_FXF_READ
LIBSSH2_FXF_WRITE = csftp.LIBSSH2_FXF_WRITE
LIBSSH2_FXF_APPEND = csftp.LIBSSH2_FXF_APPEND
LIBSSH2_FXF_CREAT = csftp.LIBSSH2_FXF_CREAT
LIBSSH2_FXF_TRUNC = csftp.LIBSSH2_FXF_TRUNC
LIBSSH2_FXF_EXCL = csftp.LIBSSH2_FXF_EXCL
LIBSSH2_SFTP_S_IFMT = csftp.LIBSSH2_SFTP_S_IFMT
LIBSSH2_SFTP_S_IFIFO = csftp.LIBSSH2_SFTP_S_IFIFO
LIBSSH2_SFTP_S_IFCHR = csftp.LIBSSH2_SFTP_S_IFCHR
LIBSSH2_SFTP_S_IFDIR = csftp.LIBSSH2_SFTP_S_IFDIR
LIBSSH2_SFTP_S_IFBLK = csftp.LIBSSH2_SFTP_S_IFBLK
LIBSSH2_SFTP_S_IFREG = csftp.LIBSSH2_SFTP_S_IFREG
LIBSSH2_SFTP_S_IFLNK = csftp.LIBSSH2_SFTP_S_IFLNK
LIBSSH2_SFTP_S_IFSOCK = csftp.LIBSSH2_SFTP_S_IFSOCK
LIBSSH2_SFTP_S_IRWXU = csftp.LIBSSH2_SFTP_S_IRWXU
LIBSSH2_SFTP_S_IRUSR = csftp.LIBSSH2_SFTP_S_IRUSR
LIBSSH2_SFTP_S_IWUSR = csftp.LIBSSH2_SFTP_S_IWUSR
LIBSSH2_SFTP_S_IXUSR = csftp.LIBSSH2_SFTP_S_IXUSR
LIBSSH2_SFTP_S_IRWXG = csftp.LIBSSH2_SFTP_S_IRWXG
LIBSSH2_SFTP_S_IRGRP = csftp.LIBSSH2_SFTP_S_IRGRP
LIBSSH2_SFTP_S_IWGRP = csftp.LIBSSH2_SFTP_S_IWGRP
LIBSSH2_SFTP_S_IXGRP = csftp.LIBSSH2_SFTP_S_IXGRP
LIBSSH2_SFTP_S_IRWXO = csftp.LIBSSH2_SFTP_S_IRWXO
LIBSSH2_SFTP_S_IROTH = csftp.LIBSSH2_SFTP_S_IROTH
LIBSSH2_SFTP_S_IWOTH = csftp.LIBSSH2_SFTP_S_IWOTH
LIBSSH2_SFTP_S_IXOTH = csftp.LIBSSH2_SFTP_S_IXOTH
LIBSSH2_SFTP_ATTR_SIZE = csftp.LIBSSH2_SFTP_ATTR_SIZE
LIBSSH2_SFTP_ATTR_UIDGID = csftp.LIBSSH2_SFTP_ATTR_UIDGID
LIBSSH2_SFTP_ATTR_PERMISSIONS = csftp.LIBSSH2_SFTP_ATTR_PERMISSIONS
LIBSSH2_SFTP_ATTR_ACMODTIME = csftp.LIBSSH2_SFTP_ATTR_ACMODTIME
LIBSSH2_SFTP_ATTR_EXTENDED = csftp.LIBSSH2_SFTP_ATTR_EXTENDED
LIBSSH2_SFTP_ST_RDONLY = csftp.LIBSSH2_SFTP_ST_RDONLY
LIBSSH2_SFTP_ST_NOSUID = csftp.LIBSSH2_SFTP_ST_NOSUID
LIBSSH2_SFTP_RENAME_OVERWRITE = csftp.LIBSSH2_SFTP_RENAME_OVERWRITE
LIBSSH2_SFTP_RENAME_ATOMIC = csftp.LIBSSH2_SFTP_RENAME_ATOMIC
LIBSSH2_SFTP_RENAME_NATIVE = csftp.LIBSSH2_SFTP_RENAME_NATIVE
LIBSSH2_SFTP_OPENFILE = csftp.LIBSSH2_SFTP_OPENFILE
LIBSSH2_SFTP_OPENDIR = csftp.LIBSSH2_SFTP_OPENDIR
LIBSSH2_FX_OK = csftp.LIBSSH2_FX_OK
LIBSSH2_FX_EOF = csftp.LIBSSH2_FX_EOF
LIBSSH2_FX_NO_SUCH_FILE = csftp.LIBSSH2_FX_NO_SUCH_FILE
LIBSSH2_FX_PERMISSION_DENIED = csftp.LIBSSH2_FX_PERMISSION_DENIED
LIBSSH2_FX_FAILURE = csftp.LIBSSH2_FX_FAILURE
LIBSSH2_FX_BAD_MESSAGE = csftp.LIBSSH2_FX_BAD_MESSAGE
LIBSSH2_FX_NO_CONNECTION = csftp.LIBSSH2_FX_NO_CONNECTION
LIBSSH2_FX_CONNECTION_LOST = csftp.LIBSSH2_FX_CONNECTION_LOST
LIBSSH2_FX_OP_UNSUPPORTED = csftp.LIBSSH2_FX_OP_UNSUPPORTED
LIBSSH2_FX_INVALID_HANDLE = csftp.LIBSSH2_FX_INVALID_HANDLE
LIBSSH2_FX_NO_SUCH_PATH = csftp.LIBSSH2_FX_NO_SUCH_PATH
LIBSSH2_FX_FILE_ALREADY_EXISTS = csftp.LIBSSH2_FX_FILE_ALREADY_EXISTS
LIBSSH2_FX_WRITE_PROTECT = csftp.LIBSSH2_FX_WRITE_PROTECT
LIBSSH2_FX_NO_MEDIA = csftp.LIBSSH2_FX_NO_MEDIA
LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM = csftp.LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM
LIBSSH2_FX_QUOTA_EXCEEDED = csftp.LIBSSH2_FX_QUOTA_EXCEEDED
LIBSSH2_FX_UNKNOWN_PRINCIPAL = csftp.LIBSSH2_FX_UNKNOWN_PRINCIPAL
LIBSSH2_FX_LOCK_CONFLICT = csftp.LIBSSH2_FX_LOCK_CONFLICT
LIBSSH2_FX_DIR_NOT_EMPTY = csftp.LIBSSH2_FX_DIR_NOT_EMPTY
LIBSSH2_FX_NOT_A_DIRECTORY = csftp.LIBSSH2_FX_NOT_A_DIRECTORY
LIBSSH2_FX_INVALID_FILENAME = csftp.LIBSSH2_FX_INVALID_FILENAME
LIBSSH2_FX_LINK_LOOP = csftp.LIBSSH2_FX_LINK_LOOP



cdef SFTP PySFTP(csftp.LIBSSH2_SFTP *sftp, Session session):
    cdef SFTP obj = SFTP.__new__(SFTP)
    obj._adopt(sftp, session, session, CHILD_SFTP)
    return obj


cdef object _new_sftp(void *raw, Session session, object parent, object extra):
    return PySFTP(<csftp.LIBSSH2_SFTP *>raw, session)


register_child(MODULE_SFTP, _new_sftp)

@cython.no_gc_clear
cdef class SFTP(SessionChild):
    """The SFTP subsystem; from ``Session.sftp_init()``.

    Paths may be str (UTF-8) or bytes. In non-blocking mode calls return
    ``LIBSSH2_ERROR_EAGAIN`` instead of waiting. Failures raise
    :class:`ssh2.exceptions.SFTPProtocolError` subclasses carrying the SFTP
    status (``SFTPNoSuchFileError``, ``SFTPPermissionDeniedError``, ...).
    """

    _CLOSED = (_exc.SFTPError, "the SFTP session is closed")

    def __init__(self):
        raise TypeError("SFTP objects come from Session.sftp_init()")

    cdef csftp.LIBSSH2_SFTP *_ptr(self) except NULL:
        return <csftp.LIBSSH2_SFTP *>self._live()

    cdef int _raise(self, int rc, str context) except -1:
        cdef unsigned long status = 0
        if rc == c.LIBSSH2_ERROR_SFTP_PROTOCOL and self._raw is not NULL:
            status = csftp.libssh2_sftp_last_error(<csftp.LIBSSH2_SFTP *>self._raw)
            exc = _exc.error_for(rc, "the server refused", sftp_status=status, context=context)
            raise exc
        return self.session._raise(rc, context)

    cdef int _rc(self, int rc, str context) except -1:
        if rc >= 0 or rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        return self._raise(rc, context)

    cdef object _null_result(self, str context):
        cdef int rc = c.libssh2_session_last_errno(self.session._session)
        if rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        self._raise(rc or c.LIBSSH2_ERROR_SOCKET_NONE, context)

    cdef int _wait(self, object wait) except -1:
        """Wait for the socket after EAGAIN: ``wait()`` if given, else poll()."""
        cdef int fd, directions, rc
        cdef long timeout_ms
        if wait is not None:
            wait()
            return 0
        fd = self.session._fd
        directions = c.libssh2_session_block_directions(self.session._session)
        timeout_ms = c.libssh2_session_get_timeout(self.session._session) or -1
        with nogil:
            rc = poll_fd(fd, directions, timeout_ms)
        if rc == 0:
            raise _exc.Timeout("SFTP transfer timed out waiting for the server")
        return 0

    def last_error(self):
        """The SFTP status code of the last failed request (``LIBSSH2_FX_*``)."""
        return csftp.libssh2_sftp_last_error(self._ptr())

    def open(self, filename, unsigned long flags, long mode):
        """Open a remote file: an :class:`SFTPHandle`, or EAGAIN.

        ``flags``: ``LIBSSH2_FXF_*``; ``mode``: permissions for a new file.
        """
        return self._open(filename, len(to_bytes(filename)), flags, mode,
                          csftp.LIBSSH2_SFTP_OPENFILE)

    def opendir(self, path):
        """Open a remote directory for ``readdir``: an :class:`SFTPHandle`, or EAGAIN."""
        return self._open(path, len(to_bytes(path)), 0, 0, csftp.LIBSSH2_SFTP_OPENDIR)

    def get_channel(self):
        """The channel the SFTP session runs on (owned by this object: not closed or
        freed through it)."""
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef c.LIBSSH2_CHANNEL *ch = csftp.libssh2_sftp_get_channel(s)
        if ch is NULL:
            return None
        return PyChannel(ch, self.session, self)

    def open_ex(self, filename, unsigned int filename_len, unsigned long flags, long mode,
                int open_type):
        """Open the first ``filename_len`` bytes of ``filename`` as a file
        (``LIBSSH2_SFTP_OPENFILE``) or directory (``LIBSSH2_SFTP_OPENDIR``)."""
        return self._open(filename, filename_len, flags, mode, open_type)

    def _open(self, path, unsigned int n_path, unsigned long flags, long mode, int open_type):
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef ChildFactory make = child_factory(MODULE_SFTP_HANDLE)
        if n_path > len(b_path):
            raise ValueError(f"filename_len {n_path} is longer than the name ({len(b_path)})")
        cdef csftp.LIBSSH2_SFTP_HANDLE *handle
        with nogil:
            lock(self.session._lock)
            handle = csftp.libssh2_sftp_open_ex(s, c_path, n_path, flags, mode, open_type)
            unlock(self.session._lock)
        if handle is NULL:
            what = "directory" if open_type == csftp.LIBSSH2_SFTP_OPENDIR else "file"
            return self._null_result(f"opening remote {what} {path!r} failed")
        return make(handle, self.session, self, None)

    def _stat(self, path, int stat_type, SFTPAttributes attrs, str what):
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef unsigned int n_path = len(b_path)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_stat_ex(s, c_path, n_path, stat_type, &attrs._attrs)
            unlock(self.session._lock)
        return self._rc(rc, f"{what} of {path!r} failed")

    def stat(self, path):
        """Attributes of ``path`` (following links): :class:`SFTPAttributes` or EAGAIN."""
        cdef SFTPAttributes attrs = SFTPAttributes.__new__(SFTPAttributes)
        rc = self._stat(path, csftp.LIBSSH2_SFTP_STAT, attrs, "stat")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else attrs

    def lstat(self, path):
        """Attributes of ``path`` itself (not following links)."""
        cdef SFTPAttributes attrs = SFTPAttributes.__new__(SFTPAttributes)
        rc = self._stat(path, csftp.LIBSSH2_SFTP_LSTAT, attrs, "lstat")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else attrs

    def setstat(self, path, SFTPAttributes attrs not None):
        """Set the attributes whose flags are set in ``attrs``."""
        return self._stat(path, csftp.LIBSSH2_SFTP_SETSTAT, attrs, "setstat")

    def _path_call(self, int op, path, long mode=0):
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef unsigned int n_path = len(b_path)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            if op == 0:
                rc = csftp.libssh2_sftp_mkdir_ex(s, c_path, n_path, mode)
            elif op == 1:
                rc = csftp.libssh2_sftp_rmdir_ex(s, c_path, n_path)
            else:
                rc = csftp.libssh2_sftp_unlink_ex(s, c_path, n_path)
            unlock(self.session._lock)
        return self._rc(rc, f"{('mkdir', 'rmdir', 'unlink')[op]} of {path!r} failed")

    def mkdir(self, path, long mode=0o755):
        return self._path_call(0, path, mode)

    def rmdir(self, path):
        return self._path_call(1, path)

    def unlink(self, filename):
        return self._path_call(2, filename)

    def rename_ex(self, source_filename, unsigned int source_filename_len, dest_filename,
                  unsigned int dest_filename_len, long flags):
        """Rename (the first ``*_len`` bytes of each name) with ``LIBSSH2_SFTP_RENAME_*`` flags."""
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_src = to_bytes(source_filename)
        cdef bytes b_dst = to_bytes(dest_filename)
        cdef const char *c_src = b_src
        cdef const char *c_dst = b_dst
        cdef unsigned int n_src = source_filename_len, n_dst = dest_filename_len
        cdef int rc
        if n_src > len(b_src) or n_dst > len(b_dst):
            raise ValueError("a name length is longer than the name")
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_rename_ex(s, c_src, n_src, c_dst, n_dst, flags)
            unlock(self.session._lock)
        return self._rc(rc, f"renaming {source_filename!r} to {dest_filename!r} failed")

    def rename(self, source_filename, dest_filename):
        """Rename (SFTP v3: fails if the destination exists; see :meth:`posix_rename`)."""
        return self.rename_ex(source_filename, len(to_bytes(source_filename)), dest_filename,
                              len(to_bytes(dest_filename)),
                              csftp.LIBSSH2_SFTP_RENAME_OVERWRITE
                              | csftp.LIBSSH2_SFTP_RENAME_ATOMIC
                              | csftp.LIBSSH2_SFTP_RENAME_NATIVE)

    def posix_rename(self, source_filename, dest_filename):
        """Rename replacing an existing destination atomically (posix-rename@openssh.com)."""
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_src = to_bytes(source_filename)
        cdef bytes b_dst = to_bytes(dest_filename)
        cdef const char *c_src = b_src
        cdef const char *c_dst = b_dst
        cdef size_t n_src = len(b_src), n_dst = len(b_dst)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_posix_rename_ex(s, c_src, n_src, c_dst, n_dst)
            unlock(self.session._lock)
        return self._rc(rc, f"renaming {source_filename!r} to {dest_filename!r} failed")

    def _link_call(self, path, target, int link_type, size_t max_len, str what):
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef unsigned int n_path = len(b_path)
        cdef bytearray buf
        cdef bytes b_target
        cdef char *c_target
        cdef unsigned int n_target
        cdef int rc
        if link_type == csftp.LIBSSH2_SFTP_SYMLINK:
            b_target = to_bytes(target)
            c_target = b_target
            n_target = len(b_target)
        else:
            buf = bytearray(max_len)
            c_target = buf
            n_target = max_len
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_symlink_ex(s, c_path, n_path, c_target, n_target, link_type)
            unlock(self.session._lock)
        self._rc(rc, f"{what} of {path!r} failed")
        if link_type == csftp.LIBSSH2_SFTP_SYMLINK or rc == c.LIBSSH2_ERROR_EAGAIN:
            return rc
        return bytes(buf[:rc]).decode("utf-8", "surrogateescape")

    def symlink(self, path, target):
        """Create a symbolic link at ``target`` that points to ``path``."""
        return self._link_call(path, target, csftp.LIBSSH2_SFTP_SYMLINK, 0, "symlink")

    def readlink(self, path, size_t max_len=4096):
        """The target of symbolic link ``path`` (or EAGAIN)."""
        return self._link_call(path, None, csftp.LIBSSH2_SFTP_READLINK, max_len, "readlink")

    def realpath(self, path, size_t max_len=4096):
        """The canonical absolute form of ``path`` (or EAGAIN)."""
        return self._link_call(path, None, csftp.LIBSSH2_SFTP_REALPATH, max_len, "realpath")

    def statvfs(self, path):
        """File system statistics for ``path``: :class:`SFTPStatVFS` or EAGAIN."""
        cdef csftp.LIBSSH2_SFTP *s = self._ptr()
        cdef SFTPStatVFS st = SFTPStatVFS.__new__(SFTPStatVFS)
        cdef bytes b_path = to_bytes(path)
        cdef const char *c_path = b_path
        cdef size_t n_path = len(b_path)
        cdef int rc
        with nogil:
            lock(self.session._lock)
            rc = csftp.libssh2_sftp_statvfs(s, c_path, n_path, &st._st)
            unlock(self.session._lock)
        self._rc(rc, f"statvfs of {path!r} failed")
        return rc if rc == c.LIBSSH2_ERROR_EAGAIN else st

    # -- bulk transfers -------------------------------------------------------------

    def _until_done(self, fn, wait, *args):
        """Repeat a call while it returns EAGAIN, waiting on the socket between tries."""
        while True:
            result = fn(*args)
            if not (isinstance(result, int) and result == c.LIBSSH2_ERROR_EAGAIN):
                return result
            self._wait(wait)

    def download(self, remote_path, local_path, callback=None, wait=None,
                 size_t chunk_size=TRANSFER_CHUNK):
        """Copy a remote file to ``local_path``; returns the number of bytes.

        The copy loop runs in C without the GIL, with up to 4 x ``chunk_size``
        of read requests in flight. Data goes to a temporary file beside
        ``local_path`` that is renamed into place only when complete, so a
        failed transfer never leaves a truncated file under the final name.
        The file gets the remote file's permission bits.

        ``callback(bytes_done, total_size)`` is called after each chunk.
        In non-blocking mode, ``wait()`` is called whenever the session would
        block (for an event loop); without it the socket is poll()ed.
        """
        cdef SFTPAttributes attrs
        local_path = os.fspath(local_path)
        handle = self._until_done(self.open, wait, remote_path, csftp.LIBSSH2_FXF_READ, 0)
        try:
            attrs = self._until_done(handle.fstat, wait)
            directory, base = os.path.split(os.path.abspath(local_path))
            import tempfile  # here: start-up pays for it only when a download happens
            fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=directory)
            try:
                try:
                    total = handle.read_into_fd(fd, callback, wait, chunk_size,
                                                attrs._attrs.filesize)
                finally:
                    os.close(fd)
                if attrs._attrs.flags & csftp.LIBSSH2_SFTP_ATTR_PERMISSIONS:
                    os.chmod(tmp, attrs._attrs.permissions & 0o7777)
                os.replace(tmp, local_path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        finally:
            if not handle.closed:
                try:
                    self._until_done(handle.close, wait)
                except _exc.SSH2Error:
                    pass
        return total

    def upload(self, local_path, remote_path, mode=None, callback=None, wait=None,
               size_t chunk_size=TRANSFER_CHUNK):
        """Copy ``local_path`` to the server; returns the number of bytes.

        Writes are pipelined by libssh2 (many packets in flight per call). The
        data goes to a temporary name beside ``remote_path`` that is renamed
        over it only once complete. ``mode`` defaults to the local file's
        permission bits. ``callback`` and ``wait`` as for :meth:`download`.
        """
        local_path = os.fspath(local_path)
        remote = remote_path.decode() if isinstance(remote_path, bytes) else os.fspath(remote_path)
        st = os.stat(local_path)
        if mode is None:
            mode = st.st_mode & 0o7777
        directory, base = remote.rpartition("/")[0], remote.rpartition("/")[2]
        tmp = f"{directory + '/' if directory or remote.startswith('/') else ''}.{base}.{os.urandom(4).hex()}.part"
        fd = os.open(local_path, os.O_RDONLY)
        try:
            handle = self._until_done(
                self.open, wait, tmp,
                csftp.LIBSSH2_FXF_WRITE | csftp.LIBSSH2_FXF_CREAT | csftp.LIBSSH2_FXF_TRUNC
                | csftp.LIBSSH2_FXF_EXCL, mode)
            try:
                total = handle.write_from_fd(fd, callback, wait, chunk_size)
                self._until_done(handle.close, wait)
                try:
                    self._until_done(self.posix_rename, wait, tmp, remote)
                except _exc.SFTPOpUnsupportedError:
                    try:
                        self._until_done(self.unlink, wait, remote)
                    except _exc.SFTPNoSuchFileError:
                        pass
                    self._until_done(self.rename, wait, tmp, remote)
            except BaseException:
                try:
                    if not handle.closed:
                        self._until_done(handle.close, wait)
                    self._until_done(self.unlink, wait, tmp)
                except _exc.SSH2Error:
                    pass
                raise
        finally:
            os.close(fd)
        return total
