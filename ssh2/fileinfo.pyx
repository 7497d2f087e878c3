# cython: language_level=3
"""``FileInfo``: the stat of a file received with SCP (``Session.scp_recv2``)."""
from ssh2.c cimport libssh2 as c


cdef FileInfo PyFileInfo(const c.libssh2_struct_stat *st):
    cdef FileInfo obj = FileInfo.__new__(FileInfo)
    obj._stat = st[0]
    return obj


cdef class FileInfo:
    """``st_size``, ``st_mode``, ``st_atime``, ``st_mtime`` ... of an SCP download."""

    def __repr__(self):
        return f"FileInfo(st_size={self.st_size}, st_mode={self.st_mode:o})"

    @property
    def st_size(self):
        return self._stat.st_size

    @property
    def st_mode(self):
        return self._stat.st_mode

    @property
    def st_atime(self):
        return self._stat.st_atime

    @property
    def st_mtime(self):
        return self._stat.st_mtime

    @property
    def st_uid(self):
        return self._stat.st_uid

    @property
    def st_gid(self):
        return self._stat.st_gid

    @property
    def st_nlink(self):
        return self._stat.st_nlink

    @property
    def st_ino(self):
        return self._stat.st_ino

    @property
    def st_dev(self):
        return self._stat.st_dev

    @property
    def st_rdev(self):
        return self._stat.st_rdev

    @property
    def st_blksize(self):
        return self._stat.st_blksize

    @property
    def st_blocks(self):
        return self._stat.st_blocks

    @property
    def st_ctime(self):
        return self._stat.st_ctime

