# cython: language_level=3
"""SFTP attribute records: ``SFTPAttributes`` (``stat``) and ``SFTPStatVFS`` (``statvfs``).

Plain values, no libssh2 handle: both :mod:`ssh2.sftp` and :mod:`ssh2.sftp_handle`
use them, so they live apart from either (``ssh2.sftp_handle`` re-exports them
under the names ssh2-python gives them).
"""
from libc.string cimport memset

from ssh2.c cimport sftp as csftp


cdef SFTPAttributes PySFTPAttributes(const csftp.LIBSSH2_SFTP_ATTRIBUTES *attrs):
    cdef SFTPAttributes obj = SFTPAttributes.__new__(SFTPAttributes)
    obj._attrs = attrs[0]
    return obj


cdef class SFTPAttributes:
    """File attributes (``stat``): flags say which fields are set."""

    def __cinit__(self):
        memset(&self._attrs, 0, sizeof(self._attrs))

    def __repr__(self):
        return (f"SFTPAttributes(filesize={self.filesize}, permissions={self.permissions:o}, "
                f"uid={self.uid}, gid={self.gid}, atime={self.atime}, mtime={self.mtime})")

    @property
    def flags(self):
        return self._attrs.flags

    @flags.setter
    def flags(self, unsigned long value):
        self._attrs.flags = value

    @property
    def filesize(self):
        return self._attrs.filesize

    @filesize.setter
    def filesize(self, unsigned long long value):
        self._attrs.filesize = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_SIZE

    @property
    def uid(self):
        return self._attrs.uid

    @uid.setter
    def uid(self, unsigned long value):
        self._attrs.uid = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_UIDGID

    @property
    def gid(self):
        return self._attrs.gid

    @gid.setter
    def gid(self, unsigned long value):
        self._attrs.gid = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_UIDGID

    @property
    def permissions(self):
        return self._attrs.permissions

    @permissions.setter
    def permissions(self, unsigned long value):
        self._attrs.permissions = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_PERMISSIONS

    @property
    def atime(self):
        return self._attrs.atime

    @atime.setter
    def atime(self, unsigned long value):
        self._attrs.atime = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_ACMODTIME

    @property
    def mtime(self):
        return self._attrs.mtime

    @mtime.setter
    def mtime(self, unsigned long value):
        self._attrs.mtime = value
        self._attrs.flags |= csftp.LIBSSH2_SFTP_ATTR_ACMODTIME


cdef class SFTPStatVFS:
    """File system statistics (``statvfs``)."""

    @property
    def f_bsize(self):
        return self._st.f_bsize

    @property
    def f_frsize(self):
        return self._st.f_frsize

    @property
    def f_blocks(self):
        return self._st.f_blocks

    @property
    def f_bfree(self):
        return self._st.f_bfree

    @property
    def f_bavail(self):
        return self._st.f_bavail

    @property
    def f_files(self):
        return self._st.f_files

    @property
    def f_ffree(self):
        return self._st.f_ffree

    @property
    def f_favail(self):
        return self._st.f_favail

    @property
    def f_fsid(self):
        return self._st.f_fsid

    @property
    def f_flag(self):
        return self._st.f_flag

    @property
    def f_namemax(self):
        return self._st.f_namemax
