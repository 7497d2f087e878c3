import os
from typing import Callable, Optional, Union

from ssh2.channel import Channel
from ssh2.session import Session
from ssh2.sftp_handle import SFTPAttributes, SFTPHandle, SFTPStatVFS

_Str = Union[str, bytes]
_Path = Union[str, bytes, "os.PathLike[str]"]
_EAGAIN = int
Progress = Callable[[int, int], None]

LIBSSH2_FXF_READ: int
LIBSSH2_FXF_WRITE: int
LIBSSH2_FXF_APPEND: int
LIBSSH2_FXF_CREAT: int
LIBSSH2_FXF_TRUNC: int
LIBSSH2_FXF_EXCL: int
LIBSSH2_SFTP_S_IFMT: int
LIBSSH2_SFTP_S_IFIFO: int
LIBSSH2_SFTP_S_IFCHR: int
LIBSSH2_SFTP_S_IFDIR: int
LIBSSH2_SFTP_S_IFBLK: int
LIBSSH2_SFTP_S_IFREG: int
LIBSSH2_SFTP_S_IFLNK: int
LIBSSH2_SFTP_S_IFSOCK: int
LIBSSH2_SFTP_S_IRWXU: int
LIBSSH2_SFTP_S_IRUSR: int
LIBSSH2_SFTP_S_IWUSR: int
LIBSSH2_SFTP_S_IXUSR: int
LIBSSH2_SFTP_S_IRWXG: int
LIBSSH2_SFTP_S_IRGRP: int
LIBSSH2_SFTP_S_IWGRP: int
LIBSSH2_SFTP_S_IXGRP: int
LIBSSH2_SFTP_S_IRWXO: int
LIBSSH2_SFTP_S_IROTH: int
LIBSSH2_SFTP_S_IWOTH: int
LIBSSH2_SFTP_S_IXOTH: int
LIBSSH2_SFTP_ATTR_SIZE: int
LIBSSH2_SFTP_ATTR_UIDGID: int
LIBSSH2_SFTP_ATTR_PERMISSIONS: int
LIBSSH2_SFTP_ATTR_ACMODTIME: int
LIBSSH2_SFTP_ATTR_EXTENDED: int
LIBSSH2_SFTP_ST_RDONLY: int
LIBSSH2_SFTP_ST_NOSUID: int
LIBSSH2_SFTP_RENAME_OVERWRITE: int
LIBSSH2_SFTP_RENAME_ATOMIC: int
LIBSSH2_SFTP_RENAME_NATIVE: int
LIBSSH2_FX_OK: int
LIBSSH2_FX_EOF: int
LIBSSH2_FX_NO_SUCH_FILE: int
LIBSSH2_FX_PERMISSION_DENIED: int
LIBSSH2_FX_FAILURE: int
LIBSSH2_FX_BAD_MESSAGE: int
LIBSSH2_FX_NO_CONNECTION: int
LIBSSH2_FX_CONNECTION_LOST: int
LIBSSH2_FX_OP_UNSUPPORTED: int
LIBSSH2_FX_INVALID_HANDLE: int
LIBSSH2_FX_NO_SUCH_PATH: int
LIBSSH2_FX_FILE_ALREADY_EXISTS: int
LIBSSH2_FX_WRITE_PROTECT: int
LIBSSH2_FX_NO_MEDIA: int
LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM: int
LIBSSH2_FX_QUOTA_EXCEEDED: int
LIBSSH2_FX_UNKNOWN_PRINCIPAL: int
LIBSSH2_FX_LOCK_CONFLICT: int
LIBSSH2_FX_DIR_NOT_EMPTY: int
LIBSSH2_FX_NOT_A_DIRECTORY: int
LIBSSH2_FX_INVALID_FILENAME: int
LIBSSH2_FX_LINK_LOOP: int

LIBSSH2_SFTP_OPENFILE: int
LIBSSH2_SFTP_OPENDIR: int

class SFTP:
    session: Session
    def last_error(self) -> int: ...
    def open(self, filename: _Str, flags: int, mode: int) -> Union[SFTPHandle, _EAGAIN]: ...
    def opendir(self, path: _Str) -> Union[SFTPHandle, _EAGAIN]: ...
    def open_ex(self, filename: _Str, filename_len: int, flags: int, mode: int,
                open_type: int) -> Union[SFTPHandle, _EAGAIN]: ...
    def get_channel(self) -> Optional[Channel]: ...
    def stat(self, path: _Str) -> Union[SFTPAttributes, _EAGAIN]: ...
    def lstat(self, path: _Str) -> Union[SFTPAttributes, _EAGAIN]: ...
    def setstat(self, path: _Str, attrs: SFTPAttributes) -> int: ...
    def mkdir(self, path: _Str, mode: int = ...) -> int: ...
    def rmdir(self, path: _Str) -> int: ...
    def unlink(self, filename: _Str) -> int: ...
    def rename_ex(self, source_filename: _Str, source_filename_len: int, dest_filename: _Str,
                  dest_filename_len: int, flags: int) -> int: ...
    def rename(self, source_filename: _Str, dest_filename: _Str) -> int: ...
    def posix_rename(self, source_filename: _Str, dest_filename: _Str) -> int: ...
    def symlink(self, path: _Str, target: _Str) -> int: ...
    def readlink(self, path: _Str, max_len: int = ...) -> Union[str, _EAGAIN]: ...
    def realpath(self, path: _Str, max_len: int = ...) -> Union[str, _EAGAIN]: ...
    def statvfs(self, path: _Str) -> Union[SFTPStatVFS, _EAGAIN]: ...
    def download(self, remote_path: _Str, local_path: _Path, callback: Optional[Progress] = ...,
                 wait: Optional[Callable[[], object]] = ..., chunk_size: int = ...) -> int: ...
    def upload(self, local_path: _Path, remote_path: _Str, mode: Optional[int] = ...,
               callback: Optional[Progress] = ..., wait: Optional[Callable[[], object]] = ...,
               chunk_size: int = ...) -> int: ...
