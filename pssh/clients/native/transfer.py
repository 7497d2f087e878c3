"""File transfer for :class:`SSHClient`: SFTP and SCP, single files and trees.

Transfers run through the bindings' pipelined bulk path (``SFTP.download``
/ ``upload``) with the client's gevent wait, so many hosts transfer at once.
Local files are written under a temporary name and renamed when complete;
remote uploads likewise. Recursive copies keep permission bits.
"""
from __future__ import annotations

import os
import posixpath
import stat
import tempfile
from typing import Callable, Optional

from pssh import exceptions as exc
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.sftp import LIBSSH2_SFTP_S_IFDIR, LIBSSH2_SFTP_S_IFMT

Progress = Optional[Callable[[int, int], None]]
SCP_CHUNK = 1 << 20


class TransferMixin:
    """SFTP/SCP methods; mixed into SSHClient (uses ``session``, ``wait``, ``retry_eagain``)."""

    _sftp = None

    def _sftp_session(self):
        if self._sftp is None:
            try:
                self._sftp = self.retry_eagain(self.session.sftp_init, what="starting SFTP")
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPError(f"cannot start SFTP: {err}", self.host, self.port) from None
        return self._sftp

    def _wait_transfer(self):
        return lambda: self.wait(self.timeout, "file transfer")

    def _sftp_error(self, what: str, err: Exception) -> exc.PSSHError:
        cls = exc.SFTPIOError if isinstance(err, (OSError, ssh2_exc.SFTPIOError)) else exc.SFTPError
        return cls(f"{what}: {err}", self.host, self.port)

    # -- SFTP, single files ----------------------------------------------------

    def sftp_put(self, local_file: str, remote_file: str, callback: Progress = None) -> int:
        """Upload one file; returns its size. The remote file appears only when complete."""
        sftp = self._sftp_session()
        try:
            return sftp.upload(local_file, remote_file, callback=callback,
                               wait=self._wait_transfer())
        except (ssh2_exc.SSH2Error, OSError) as err:
            raise self._sftp_error(f"uploading {local_file} to {remote_file} failed", err) from None

    def sftp_get(self, remote_file: str, local_file: str, callback: Progress = None) -> int:
        """Download one file; returns its size. ``local_file`` appears only when complete."""
        sftp = self._sftp_session()
        try:
            return sftp.download(remote_file, local_file, callback=callback,
                                 wait=self._wait_transfer())
        except (ssh2_exc.SSH2Error, OSError) as err:
            raise self._sftp_error(f"downloading {remote_file} to {local_file} failed",
                                   err) from None

    def _remote_stat(self, path: str):
        try:
            return self.retry_eagain(self._sftp_session().stat, path)
        except ssh2_exc.SFTPNoSuchFileError:
            return None

    def mkdir(self, sftp, directory: str, mode: int = 0o755) -> None:
        """Create ``directory`` and its missing parents on the server (``mkdir -p``)."""
        sftp = sftp or self._sftp_session()
        parts = [p for p in directory.split("/") if p]
        path = "/" if directory.startswith("/") else ""
        for part in parts:
            path = posixpath.join(path, part) if path else part
            attrs = self._remote_stat(path)
            if attrs is None:
                try:
                    self.retry_eagain(sftp.mkdir, path, mode)
                    continue
                except ssh2_exc.SSH2Error as err:
                    # SFTP v3 reports "exists" as a generic failure: someone may
                    # have created it meanwhile, as mkdir -p tolerates.
                    attrs = self._remote_stat(path)
                    if attrs is None:
                        raise exc.SFTPError(f"cannot create remote directory {path}: {err}",
                                            self.host, self.port) from None
            if attrs.permissions & LIBSSH2_SFTP_S_IFMT != LIBSSH2_SFTP_S_IFDIR:
                raise exc.SFTPError(f"{path} exists and is not a directory", self.host,
                                    self.port)

    # -- SFTP, trees --------------------------------------------------------------

    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  sftp=None, callback: Progress = None) -> None:
        """Copy a local file (or with ``recurse``, a directory tree) to the server.

        Missing remote parent directories are created.
        """
        if os.path.isdir(local_file):
            if not recurse:
                raise ValueError(f"{local_file} is a directory: pass recurse=True")
            self.mkdir(sftp, remote_file, stat.S_IMODE(os.stat(local_file).st_mode))
            for entry in sorted(os.scandir(local_file), key=lambda e: e.name):
                self.copy_file(entry.path, posixpath.join(remote_file, entry.name), True, sftp,
                               callback)
            return
        if not os.path.exists(local_file):
            raise exc.SFTPIOError(f"local file {local_file} does not exist", self.host, self.port)
        parent = posixpath.dirname(remote_file)
        if parent and parent != "/":
            self.mkdir(sftp, parent)
        self.sftp_put(local_file, remote_file, callback)

    def copy_remote_file(self, remote_file: str, local_file: str, recurse: bool = False,
                         sftp=None, callback: Progress = None) -> None:
        """Copy a remote file (or with ``recurse``, a directory tree) to ``local_file``."""
        sftp = sftp or self._sftp_session()
        attrs = self._remote_stat(remote_file)
        if attrs is None:
            raise exc.SFTPError(f"remote file {remote_file} does not exist", self.host, self.port)
        if attrs.permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFDIR:
            if not recurse:
                raise ValueError(f"{remote_file} is a directory: pass recurse=True")
            os.makedirs(local_file, exist_ok=True)
            os.chmod(local_file, attrs.permissions & 0o7777)
            for name in self._listdir(sftp, remote_file):
                self.copy_remote_file(posixpath.join(remote_file, name),
                                      os.path.join(local_file, name), True, sftp, callback)
            return
        parent = os.path.dirname(local_file)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.sftp_get(remote_file, local_file, callback)

    def _listdir(self, sftp, path: str) -> list:
        names = []
        handle = self.retry_eagain(sftp.opendir, path)
        try:
            while True:
                batch = list(handle.readdir())
                more = batch and batch[-1][0] == LIBSSH2_ERROR_EAGAIN
                names += [name.decode("utf-8", "surrogateescape") for size, name, _ in batch
                          if size > 0 and name not in (b".", b"..")]
                if not more:
                    return sorted(names)
                self.wait(self.timeout, "listing a remote directory")
        finally:
            self.retry_eagain(handle.close)

    # -- SCP ------------------------------------------------------------------------

    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False) -> None:
        """Upload with SCP (recursive copies go file by file, creating directories by SFTP)."""
        if os.path.isdir(local_file):
            if not recurse:
                raise ValueError(f"{local_file} is a directory: pass recurse=True")
            self.mkdir(None, remote_file, stat.S_IMODE(os.stat(local_file).st_mode))
            for entry in sorted(os.scandir(local_file), key=lambda e: e.name):
                self.scp_send(entry.path, posixpath.join(remote_file, entry.name), True)
            return
        st = os.stat(local_file)
        try:
            channel = self.retry_eagain(self.session.scp_send64, remote_file,
                                        stat.S_IMODE(st.st_mode), st.st_size, int(st.st_mtime),
                                        int(st.st_atime), what="starting SCP upload")
            with open(local_file, "rb") as fh:
                while chunk := fh.read(SCP_CHUNK):
                    while chunk:
                        rc, written = channel.write(chunk)
                        chunk = chunk[written:]
                        if rc == LIBSSH2_ERROR_EAGAIN:
                            self.wait(self.timeout, "SCP upload")
            for step in (channel.send_eof, channel.wait_eof, channel.close, channel.wait_closed):
                self.retry_eagain(step)
        except ssh2_exc.SSH2Error as err:
            raise exc.SCPError(f"SCP upload of {local_file} to {remote_file} failed: {err}",
                               self.host, self.port) from None

    def scp_recv(self, remote_file: str, local_file: str, recurse: bool = False) -> None:
        """Download with SCP to a temporary file renamed into place when complete."""
        if recurse:
            attrs = self._remote_stat(remote_file)
            if attrs is not None and attrs.permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFDIR:
                os.makedirs(local_file, exist_ok=True)
                for name in self._listdir(self._sftp_session(), remote_file):
                    self.scp_recv(posixpath.join(remote_file, name),
                                  os.path.join(local_file, name), True)
                return
        try:
            channel, info = self.retry_eagain(self.session.scp_recv2, remote_file,
                                              what="starting SCP download")
        except ssh2_exc.SSH2Error as err:
            raise exc.SCPError(f"SCP download of {remote_file} failed: {err}", self.host,
                               self.port) from None
        directory = os.path.dirname(os.path.abspath(local_file))
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(local_file)}.", suffix=".part",
                                   dir=directory)
        try:
            remaining = info.st_size
            with os.fdopen(fd, "wb") as fh:
                while remaining > 0:
                    size, data = channel.read(min(SCP_CHUNK, remaining))
                    if size == LIBSSH2_ERROR_EAGAIN:
                        self.wait(self.timeout, "SCP download")
                    elif size == 0:
                        raise exc.SCPError(f"SCP download of {remote_file} ended "
                                           f"{remaining} bytes early", self.host, self.port)
                    else:
                        fh.write(data)
                        remaining -= size
            os.chmod(tmp, info.st_mode & 0o7777)
            os.utime(tmp, (info.st_atime, info.st_mtime))
            os.replace(tmp, local_file)
        except BaseException:
            os.unlink(tmp)
            raise
        finally:
            try:
                self.retry_eagain(channel.close)
            except ssh2_exc.SSH2Error:
                pass
