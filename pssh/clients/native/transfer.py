"""File transfer for :class:`~pssh.clients.native.single.SSHClient`: SFTP and SCP.

parallel-ssh's methods, each a step a caller may replace (``_make_sftp``,
``sftp_put``/``_sftp_put``, ``sftp_get``/``_sftp_get``, ``_scp_send``, ...).
The bytes move in the bindings' C loops (pipelined, without the GIL) with
the session driver's wait, so many hosts transfer at once. A file appears
under its final name only once complete: downloads are written to a
temporary file beside the target and renamed, SFTP uploads likewise on the
server; a failed SCP upload is removed. Local OS errors (permission denied,
no space) are raised as they are (``OSError``), as in parallel-ssh.
"""
from __future__ import annotations

import logging
import os
import posixpath
import stat
from typing import Callable, Iterator, Optional

from pssh import exceptions as exc
from pssh.channel_io import end_check, sftp_end_check
from pssh.clients.base.single import on_this_host
from pssh.partial_files import (keep_download, local_file_errors, local_part_file,
                                remote_part_name)
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.sftp import (LIBSSH2_FXF_CREAT, LIBSSH2_FXF_EXCL, LIBSSH2_FXF_READ,
                       LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE, LIBSSH2_SFTP_ATTR_PERMISSIONS,
                       LIBSSH2_SFTP_S_IFDIR, LIBSSH2_SFTP_S_IFMT)
from ssh2.sftp_handle import SFTPAttributes

logger = logging.getLogger("pssh.clients.native.single")

Progress = Optional[Callable[[int, int], None]]
SCP_CHUNK = 2 * 1024 * 1024
DIR_MODE = 0o755


def _is_dir(attrs) -> bool:
    return attrs.permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFDIR


class TransferMixin:
    """SFTP and SCP methods of the native client (uses its session, driver and ``eagain``)."""

    # -- SFTP sessions and directories ------------------------------------------------

    def _make_sftp_eagain(self):
        return self._driver.exclusive(self.session.sftp_init, what="starting SFTP")

    def _make_sftp(self):
        """A new SFTP session on this connection; :class:`~pssh.exceptions.SFTPError` if
        the server refuses it."""
        try:
            return self._make_sftp_eagain()
        except Exception as err:
            raise exc.SFTPError("%s:%s: cannot start SFTP: %s", self.host, self.port, err,
                                host=self.host, port=self.port) from err

    def _sftp(self, sftp=None):
        """``sftp``, or a new SFTP session for one call and its recursion (as parallel-ssh:
        concurrent copies on one client each have their own, so their requests
        never share an SFTP session's state)."""
        return sftp if sftp is not None else self._make_sftp()

    def _sftp_eagain(self, sftp, fn, *args):
        """``fn(*args)``, a request of SFTP session ``sftp``, until it has its answer; fails
        (:class:`ssh2.exceptions.ChannelClosedError`) once the session has ended on the
        server, whose answer libssh2 would otherwise wait for as long as the timeout allows."""
        return self._driver.eagain(fn, *args,
                                   check=None if sftp is None else sftp_end_check(sftp))

    def _remote_stat(self, sftp, path: str):
        """The remote path's attributes, or None if it does not exist."""
        try:
            return self._sftp_eagain(sftp, sftp.stat, path)
        except (ssh2_exc.SFTPNoSuchFileError, ssh2_exc.SFTPHandleError):
            return None

    def _mkdir(self, sftp, directory: str) -> None:
        """Create one remote directory; :class:`~pssh.exceptions.SFTPIOError` if refused."""
        try:
            self._sftp_eagain(sftp, sftp.mkdir, directory, DIR_MODE)
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPIOError("cannot create directory %s on host %s: %s", directory,
                                  self.host, err, host=self.host, port=self.port) from None
        logger.debug("%s: created remote directory %s", self.host, directory)

    @on_this_host
    def mkdir(self, sftp, directory: str) -> None:
        """Create ``directory`` and its missing parents on the server (``mkdir -p``)."""
        sftp = self._sftp(sftp)
        path = "" if directory.startswith("/") else "."
        for part in (p for p in directory.split("/") if p):
            path = f"{path}/{part}"
            attrs = self._remote_stat(sftp, path)
            if attrs is None:
                try:
                    self._mkdir(sftp, path)
                    continue
                except exc.SFTPIOError:
                    # SFTP v3 reports "exists" as a plain failure: another
                    # host or greenlet may have made it, as mkdir -p tolerates.
                    attrs = self._remote_stat(sftp, path)
                    if attrs is None:
                        raise
            if not _is_dir(attrs):
                raise exc.SFTPIOError("%s on host %s exists and is not a directory", path,
                                      self.host, host=self.host, port=self.port)

    def _set_remote_mode(self, sftp, path: str, mode: int) -> None:
        attrs = SFTPAttributes()
        attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS
        attrs.permissions = mode
        try:
            self._sftp_eagain(sftp, sftp.setstat, path, attrs)
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPIOError("cannot set the mode of %s on host %s: %s", path, self.host,
                                  err, host=self.host, port=self.port) from err

    # Directory trees keep their permission bits, set once their contents are in
    # (a read-only directory would refuse them).
    def _copy_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        super()._copy_dir(local_dir, remote_dir, sftp)
        self._set_remote_mode(sftp, remote_dir, stat.S_IMODE(os.stat(local_dir).st_mode))

    def _scp_send_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        super()._scp_send_dir(local_dir, remote_dir, sftp)
        self._set_remote_mode(sftp, remote_dir, stat.S_IMODE(os.stat(local_dir).st_mode))

    def _sftp_readdir(self, dir_h) -> Iterator[bytes]:
        """The names in an open remote directory (EAGAIN handled)."""
        for size, name, _ in dir_h.readdir():
            if size == LIBSSH2_ERROR_EAGAIN:
                self.poll()
                continue
            yield name

    def _sftp_openfh(self, open_func, remote_file: str, *args):
        try:
            return self._sftp_eagain(getattr(open_func, "__self__", None), open_func,
                                     remote_file, *args)
        except Exception as err:
            raise exc.SFTPError("%s:%s: cannot open %s: %s", self.host, self.port, remote_file,
                                err, host=self.host, port=self.port) from err

    def _wait_for_transfer(self) -> None:
        self._driver.wait(self.timeout, "file transfer")

    def _sftp_transfer_wait(self, remote_fh) -> Callable[[], None]:
        """The wait of a transfer through ``remote_fh``, failing once the server's SFTP
        session has ended (its sftp-server exited: the replies waited for never come)."""
        check = sftp_end_check(remote_fh.sftp)

        def wait() -> None:
            check()
            self._wait_for_transfer()
        return wait

    # -- SFTP uploads ------------------------------------------------------------------

    @on_this_host
    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  sftp=None, callback: Progress = None) -> None:
        """Copy a local file (with ``recurse``, a directory tree) to the server.

        Missing remote parent directories are created. ``callback(done, total)``
        reports each file's progress in bytes.
        """
        if os.path.isdir(local_file):
            if not recurse:
                raise ValueError(f"{local_file} is a directory: pass recurse=True")
            return self._copy_dir(local_file, remote_file, self._sftp(sftp))
        sftp = self._sftp(sftp)
        destination = self._remote_paths_split(remote_file)
        if destination is not None and self._remote_stat(sftp, destination) is None:
            self.mkdir(sftp, destination)
        self.sftp_put(sftp, local_file, remote_file, callback=callback)
        logger.info("copied %s to %s:%s", local_file, self.host, remote_file)

    def _sftp_put(self, remote_fh, local_file: str, callback: Progress = None) -> int:
        """Write the local file into an open remote file handle; returns the bytes sent."""
        fd = os.open(local_file, os.O_RDONLY)
        try:
            return remote_fh.write_from_fd(fd, callback=callback,
                                           wait=self._sftp_transfer_wait(remote_fh))
        finally:
            os.close(fd)

    @on_this_host
    def sftp_put(self, sftp, local_file: str, remote_file: str,
                 callback: Progress = None) -> None:
        """Upload one file (with the local file's permission bits); the remote file
        appears under its name only when complete."""
        mode = stat.S_IMODE(os.stat(local_file).st_mode)
        part = remote_part_name(remote_file)
        flags = LIBSSH2_FXF_CREAT | LIBSSH2_FXF_WRITE | LIBSSH2_FXF_TRUNC | LIBSSH2_FXF_EXCL
        remote_fh = self._sftp_openfh(sftp.open, part, flags, mode)
        try:
            try:
                if callback is None:
                    self._sftp_put(remote_fh, local_file)
                else:
                    self._sftp_put(remote_fh, local_file, callback=callback)
                self._sftp_eagain(remote_fh.sftp, remote_fh.close)
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPIOError("writing remote file %s on host %s failed: "
                                      + exc.cause_format(err), remote_file, self.host, err,
                                      host=self.host, port=self.port) from err
            self._rename_into_place(sftp, part, remote_file)
        except BaseException:
            self._discard_remote(sftp, remote_fh, part)
            raise

    def _rename_into_place(self, sftp, part: str, remote_file: str) -> None:
        try:
            self._sftp_eagain(sftp, sftp.posix_rename, part, remote_file)
        except ssh2_exc.SFTPOpUnsupportedError:
            try:
                self._sftp_eagain(sftp, sftp.unlink, remote_file)
            except ssh2_exc.SFTPNoSuchFileError:
                pass
            self._sftp_eagain(sftp, sftp.rename, part, remote_file)
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPIOError("cannot move %s into place on host %s: %s", remote_file,
                                  self.host, err, host=self.host, port=self.port) from err

    def _discard_remote(self, sftp, remote_fh, path: str) -> None:
        """Best effort, after a failure: close the handle and remove the partial file;
        over a new SFTP session if the failure ended this one (the SFTP server died, its
        channel closed) while the connection lives."""
        try:
            if not remote_fh.closed:
                self._sftp_eagain(sftp, remote_fh.close)
        except Exception as err:  # the SFTP session may be what failed
            logger.debug("%s: closing the partial file %s failed: %s", self.host, path, err)
        self._remove_remote(path, sftp)

    def _remove_remote(self, path: str, sftp=None) -> None:
        """Remove a partial upload (best effort): over ``sftp``, else (or if that fails)
        over a new SFTP session; a warning says what is left when neither can."""
        failure: object = "the connection is closed"
        for current in (sftp, None) if sftp is not None else (None,):
            if current is None and self.session is None:
                break
            try:
                current = current or self._make_sftp()
                self._sftp_eagain(current, current.unlink, path)
                return
            except ssh2_exc.SFTPNoSuchFileError:
                return
            except Exception as err:  # the connection may be what failed
                failure = err
        logger.warning("%s:%s: the partial upload %s is left on the server: %s", self.host,
                       self.port, path, failure)

    # -- SFTP downloads ------------------------------------------------------------------

    @on_this_host
    def copy_remote_file(self, remote_file: str, local_file: str, recurse: bool = False,
                         sftp=None, encoding: str = "utf-8", callback: Progress = None) -> None:
        """Copy a remote file (with ``recurse``, a directory tree) to ``local_file``.

        Missing local directories are created; files keep their permission bits.
        """
        sftp = self._sftp(sftp)
        attrs = self._remote_stat(sftp, remote_file)
        if attrs is None:
            raise exc.SFTPIOError("remote file or directory %s on host %s does not exist",
                                  remote_file, self.host, host=self.host, port=self.port)
        if _is_dir(attrs):
            if not recurse:
                raise ValueError(f"{remote_file} is a directory: pass recurse=True")
            self._make_local_dir(local_file)
            dir_h = self._sftp_openfh(sftp.opendir, remote_file)
            with dir_h:
                names = list(self._sftp_readdir(dir_h))
            self._copy_remote_dir(names, remote_file, local_file, sftp, encoding=encoding)
            os.chmod(local_file, attrs.permissions & 0o7777)
            return
        self._make_local_dir(os.path.dirname(local_file))
        if callback is not None:
            size, report = attrs.filesize, callback
            callback = lambda done, _: report(done, size)  # noqa: E731 - the stat knows the size
        self.sftp_get(sftp, remote_file, local_file, callback=callback)
        os.chmod(local_file, attrs.permissions & 0o7777)
        logger.info("copied %s:%s to %s", self.host, remote_file, local_file)

    def _sftp_get(self, remote_fh, local_file: str, callback: Progress = None) -> int:
        """Read an open remote file handle to its end into ``local_file``."""
        fd = os.open(local_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            return remote_fh.read_into_fd(fd, callback=callback,
                                          wait=self._sftp_transfer_wait(remote_fh))
        finally:
            os.close(fd)

    @on_this_host
    def sftp_get(self, sftp, remote_file: str, local_file: str,
                 callback: Progress = None) -> None:
        """Download one file; ``local_file`` appears only when complete."""
        remote_fh = self._sftp_openfh(sftp.open, remote_file, LIBSSH2_FXF_READ, 0)
        fd, part = local_part_file(local_file)
        os.close(fd)
        try:
            try:
                with local_file_errors(local_file):
                    if callback is None:
                        self._sftp_get(remote_fh, part)
                    else:
                        self._sftp_get(remote_fh, part, callback=callback)
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPIOError("reading remote file %s on host %s failed: "
                                      + exc.cause_format(err), remote_file, self.host, err,
                                      host=self.host, port=self.port) from err
            os.replace(part, local_file)
        except BaseException:
            try:
                os.unlink(part)
            except OSError:
                pass
            raise
        finally:
            try:
                if not remote_fh.closed:
                    self._sftp_eagain(sftp, remote_fh.close)
            except (ssh2_exc.SSH2Error, exc.PSSHError):
                pass

    # -- SCP ------------------------------------------------------------------------------

    @on_this_host
    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False,
                 sftp=None) -> None:
        """Upload with SCP. With ``recurse``, directories are copied file by file and
        missing remote directories created over SFTP (SCP cannot). A ``remote_file``
        ending in ``/`` is a directory to copy into."""
        if os.path.isdir(local_file):
            if not recurse:
                raise ValueError(f"{local_file} is a directory: pass recurse=True")
            return self._scp_send_dir(local_file, remote_file, self._sftp(sftp))
        if recurse:
            destination = self._remote_paths_split(remote_file)
            if destination is not None:
                sftp = self._sftp(sftp)
                if self._remote_stat(sftp, destination) is None:
                    self.mkdir(sftp, destination)
        elif remote_file.endswith("/"):
            remote_file += os.path.basename(local_file)
        logger.info("SCP %s to %s:%s", local_file, self.host, remote_file)
        self._scp_send(local_file, remote_file)

    def _scp_send(self, local_file: str, remote_file: str) -> None:
        with open(local_file, "rb") as fh:  # a local OSError as it is, as parallel-ssh's
            st = os.fstat(fh.fileno())
            try:
                chan = self._driver.exclusive(self.session.scp_send64, remote_file,
                                              stat.S_IMODE(st.st_mode), st.st_size,
                                              int(st.st_mtime), int(st.st_atime),
                                              what="starting an SCP upload")
            except Exception as err:
                raise exc.SCPError("cannot open remote file %s for writing on host %s: "
                                   + exc.cause_format(err), remote_file, self.host, err,
                                   host=self.host, port=self.port) from err
            check = end_check(chan, "the SCP copy")
            try:
                while data := fh.read(SCP_CHUNK):
                    self._driver.write(chan.write, data, check=check)
                for step in (chan.send_eof, chan.wait_eof, chan.close, chan.wait_closed):
                    self.eagain(step)
            except Exception as err:
                # SCP writes the real name (it cannot rename): remove what was written.
                self._remove_remote(remote_file)
                raise exc.SCPError("writing remote file %s on host %s failed: "
                                   + exc.cause_format(err), remote_file, self.host, err,
                                   host=self.host, port=self.port) from err

    @on_this_host
    def scp_recv(self, remote_file: str, local_file: str, recurse: bool = False, sftp=None,
                 encoding: str = "utf-8") -> None:
        """Download with SCP. With ``recurse``, directories are listed over SFTP (SCP
        cannot) and copied file by file. A ``local_file`` ending in ``/`` is a directory
        to copy into."""
        if recurse:
            return self._scp_recv_recursive(remote_file, local_file, self._sftp(sftp),
                                            encoding=encoding)
        if local_file.endswith("/"):
            local_file += posixpath.basename(remote_file)
        self._make_local_dir(os.path.dirname(local_file))
        self._scp_recv(remote_file, local_file)
        logger.info("SCP %s:%s to %s", self.host, remote_file, local_file)

    def _scp_recv_recursive(self, remote_file: str, local_file: str, sftp,
                            encoding: str = "utf-8") -> None:
        attrs = self._remote_stat(sftp, remote_file)
        if attrs is None:
            raise exc.SCPError("remote file or directory %s on host %s does not exist",
                               remote_file, self.host, host=self.host, port=self.port)
        if not _is_dir(attrs):
            return self.scp_recv(remote_file, local_file, encoding=encoding)
        try:
            dir_h = self._sftp_openfh(sftp.opendir, remote_file)
        except exc.SFTPError as err:
            raise exc.SCPError("cannot list remote directory %s on host %s: %s", remote_file,
                               self.host, err, host=self.host, port=self.port) from err
        with dir_h:
            names = list(self._sftp_readdir(dir_h))
        os.makedirs(local_file, exist_ok=True)
        self._scp_recv_dir(names, remote_file, local_file, sftp, encoding=encoding)
        os.chmod(local_file, attrs.permissions & 0o7777)

    def _scp_recv(self, remote_file: str, local_file: str) -> None:
        try:
            chan, info = self._driver.exclusive(self.session.scp_recv2, remote_file,
                                                what="starting an SCP download")
        except Exception as err:
            raise exc.SCPError("error copying file %s from host %s: " + exc.cause_format(err),
                               remote_file, self.host, err,
                               host=self.host, port=self.port) from err
        fd, part = local_part_file(local_file)
        try:
            with local_file_errors(local_file), os.fdopen(fd, "wb") as fh:
                left = info.st_size
                while left > 0:
                    try:
                        size, data = chan.read(min(SCP_CHUNK, left))
                    except ssh2_exc.SSH2Error as err:
                        raise exc.SCPError("error copying file %s from host %s: "
                                           + exc.cause_format(err), remote_file, self.host,
                                           err, host=self.host, port=self.port) from err
                    if size == LIBSSH2_ERROR_EAGAIN:
                        self._wait_for_transfer()
                    elif size == 0:
                        raise exc.SCPError("SCP download of %s from host %s ended %s bytes "
                                           "early", remote_file, self.host, left,
                                           host=self.host, port=self.port)
                    else:
                        fh.write(data)
                        left -= size
            keep_download(part, local_file, info.st_mode, info.st_atime, info.st_mtime)
        except BaseException:
            os.unlink(part)
            raise
        finally:
            try:
                self.eagain(chan.close)
            except ssh2_exc.SSH2Error:
                pass
