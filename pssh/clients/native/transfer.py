"""File transfer for :class:`~pssh.clients.native.single.SSHClient`: SFTP and SCP.

parallel-ssh's methods, each a step a caller may replace (``_make_sftp``,
``sftp_put``/``_sftp_put``, ``sftp_get``/``_sftp_get``, ``_scp_send``, ...);
each runs the session core's procedure for it (:mod:`pssh.core.sftp`,
:mod:`pssh.core.scp`): the bytes move in the bindings' C pumps (pipelined,
without the GIL) between waits, so many hosts transfer at once. A file
appears under its final name only once complete: downloads are written to a
temporary file beside the target and renamed, SFTP uploads likewise on the
server; a failed SCP upload is removed. Local OS errors (permission denied,
no space) are raised as they are (``OSError``), as in parallel-ssh.
"""
from __future__ import annotations

import logging
import os
import posixpath
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional

from pssh import exceptions as exc
from pssh.clients.base.single import BaseSSHClient, in_greenlet, on_this_host
from pssh.core import scp as core_scp, sftp as core_sftp, tree as core_tree
from pssh.core.sftp import is_dir as _is_dir

logger = logging.getLogger("pssh.clients.native.single")

Progress = Optional[Callable[[int, int], None]]
SCP_CHUNK = core_scp.CHUNK
DIR_MODE = core_sftp.DIR_MODE


if TYPE_CHECKING:
    # For the type checker, the client this is mixed into (its host, link and runner);
    # at run time a plain mixin, as parallel-ssh's.
    _Client = BaseSSHClient
else:
    _Client = object


class TransferMixin(_Client):
    """SFTP and SCP methods of the native client (runs the core's on its link)."""

    # -- SFTP sessions and directories ------------------------------------------------

    def _make_sftp_eagain(self):
        return self._run(core_sftp.start(self._link))

    def _make_sftp(self):
        """A new SFTP session on this connection; :class:`~pssh.exceptions.SFTPError` if
        the server refuses it."""
        try:
            return self._make_sftp_eagain()
        except exc.SFTPError:
            raise
        except Exception as err:
            raise exc.SFTPError("%s:%s: cannot start SFTP: %s", self.host, self.port, err,
                                host=self.host, port=self.port) from err

    def _sftp(self, sftp=None):
        """``sftp``, or a new SFTP session for one call and its recursion (as parallel-ssh:
        concurrent copies on one client each have their own, so their requests
        never share an SFTP session's state)."""
        return sftp if sftp is not None else self._make_sftp()

    def _remote_stat(self, sftp, path: str):
        """The remote path's attributes, or None if it does not exist."""
        return self._run(core_sftp.stat(self._link, sftp, path))

    def _mkdir(self, sftp, directory: str) -> None:
        """Create one remote directory; :class:`~pssh.exceptions.SFTPIOError` if refused."""
        self._run(core_sftp.mkdir(self._link, sftp, directory))

    @on_this_host
    def mkdir(self, sftp, directory: str) -> None:
        """Create ``directory`` and its missing parents on the server (``mkdir -p``)."""
        self._run(core_sftp.makedirs(self._link, self._sftp(sftp), directory))

    def _set_remote_mode(self, sftp, path: str, mode: int) -> None:
        self._run(core_sftp.set_mode(self._link, sftp, path, mode))

    # -- directory trees: the core's walk (pssh.core.tree), files by these methods -----

    def _copy_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        """Upload a local tree over SFTP (modes kept, set once the contents are in)."""
        refused = self._run(core_tree.upload(
            self._link, sftp, local_dir, remote_dir,
            lambda local, remote: in_greenlet(self.sftp_put, sftp, local, remote)))
        self._raise_refused(refused, f"{local_dir} to {remote_dir}", exc.SFTPIOError)

    def _scp_send_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        """Upload a local tree file by file over SCP, directories made over SFTP."""
        refused = self._run(core_tree.upload(
            self._link, sftp, local_dir, remote_dir,
            lambda local, remote: in_greenlet(self._scp_send, local, remote)))
        self._raise_refused(refused, f"{local_dir} to {remote_dir}", exc.SCPError)

    def _download_tree(self, remote_dir: str, local_dir: str, sftp, encoding: str,
                       fetch, error, names: Optional[Iterable[bytes]] = None) -> None:
        """Download a remote tree, each file by ``fetch(remote, local)``; names the server
        should not have sent are refused and raised at the end as ``error``. ``names``:
        the top level as the caller listed it (see :func:`pssh.core.tree.download`)."""
        refused = self._run(core_tree.download(self._link, sftp, remote_dir, local_dir, fetch,
                                               encoding, names=names))
        self._raise_refused(refused, remote_dir, error)

    def _raise_refused(self, refused, what: str, error) -> None:
        """``error`` naming this host and the entries a tree copy refused, if any."""
        if refused:
            raise error("%s:%s: copying %s: %s", self.host, self.port, what,
                        core_tree.refused_message(refused), host=self.host, port=self.port)

    def _sftp_readdir(self, dir_h) -> Iterator[bytes]:
        """The names in an open remote directory."""
        return iter(self._run(core_sftp.read_names(self._link, dir_h)))

    def _sftp_openfh(self, open_func, remote_file: str, *args):
        try:
            return self.eagain(open_func, remote_file, *args)
        except Exception as err:
            raise exc.SFTPError("%s:%s: cannot open %s: %s", self.host, self.port, remote_file,
                                err, host=self.host, port=self.port) from err

    def _listdir(self, sftp, remote_dir: str) -> list:
        return self._run(core_sftp.listdir(self._link, sftp, remote_dir))

    # -- SFTP uploads ------------------------------------------------------------------

    @on_this_host
    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  sftp=None, callback: Progress = None, into_directory: bool = False) -> None:
        """Copy a local file (with ``recurse``, a directory tree) to the server.

        Missing remote parent directories are created. ``callback(done, total)``
        reports each file's progress in bytes. With ``into_directory``, the target is
        decided as ``scp`` decides it: an existing remote directory receives the copy
        under the local name (``site`` to ``/srv/``: ``/srv/site``); a path that does not
        exist becomes the copy; one that ends in ``/`` must be a directory.

        Nothing is written through a remote symlink below the target (a file or a
        directory of the tree): the rest is copied, then
        :class:`~pssh.exceptions.SFTPIOError` names what was not.
        """
        if os.path.isdir(local_file) and not recurse:
            raise ValueError(f"{local_file} is a directory: pass recurse=True")
        sftp = self._sftp(sftp)
        if into_directory:
            remote_file = self._scp_target(sftp, local_file, remote_file)
        if os.path.isdir(local_file):
            return self._copy_dir(local_file, remote_file, sftp)
        destination = self._remote_paths_split(remote_file)
        if destination is not None and self._remote_stat(sftp, destination) is None:
            self.mkdir(sftp, destination)
        target = self._run(core_sftp.upload_target(self._link, sftp, remote_file))
        self.sftp_put(sftp, local_file, target, callback=callback)
        logger.info("copied %s to %s:%s", local_file, self.host, remote_file)

    def _scp_target(self, sftp, local_file: str, remote_file: str) -> str:
        """Where ``scp local_file host:remote_file`` puts the copy (see ``copy_file``)."""
        attrs = self._remote_stat(sftp, remote_file.rstrip("/") or "/")
        if attrs is not None and _is_dir(attrs):
            name = os.path.basename(os.path.normpath(local_file))
            return posixpath.join(remote_file, name)
        if remote_file.endswith("/"):
            raise exc.SFTPIOError("%s:%s: cannot copy %s into %s: no such directory",
                                  self.host, self.port, local_file, remote_file,
                                  host=self.host, port=self.port)
        return remote_file

    def _sftp_put(self, remote_fh, local_file: str, callback: Progress = None) -> int:
        """Write the local file into an open remote file handle; returns the bytes sent."""
        fd = os.open(local_file, os.O_RDONLY)
        try:
            return self._run(core_sftp.pump(self._link, remote_fh.pump_from_fd, fd,
                                            f"uploading {local_file}", callback,
                                            os.fstat(fd).st_size))
        finally:
            os.close(fd)

    @on_this_host
    def sftp_put(self, sftp, local_file: str, remote_file: str,
                 callback: Progress = None) -> None:
        """Upload one file (with the local file's permission bits); the remote file
        appears under its name only when complete."""
        send = (lambda handle: in_greenlet(self._sftp_put, handle, local_file)) \
            if callback is None else \
            (lambda handle: in_greenlet(self._sftp_put, handle, local_file, callback))
        self._run(core_sftp.upload(self._link, sftp, local_file, remote_file, send=send))

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
            return self._download_tree(
                remote_file, local_file, sftp, encoding,
                lambda remote, local: in_greenlet(self.sftp_get, sftp, remote, local,
                                                  callback=callback),
                exc.SFTPIOError)
        self._make_local_dir(os.path.dirname(local_file))
        self.sftp_get(sftp, remote_file, local_file, callback=callback)
        logger.info("copied %s:%s to %s", self.host, remote_file, local_file)

    def _sftp_get(self, remote_fh, local_file: str, callback: Progress = None) -> int:
        """Read an open remote file handle to its end into ``local_file``."""
        fd = os.open(local_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            return self._run(core_sftp.pump(self._link, remote_fh.pump_to_fd, fd,
                                            f"downloading into {local_file}", callback))
        finally:
            os.close(fd)

    @on_this_host
    def sftp_get(self, sftp, remote_file: str, local_file: str,
                 callback: Progress = None) -> None:
        """Download one file; ``local_file`` appears only when complete, with the remote
        file's permission bits."""
        if callback is None:
            receive = lambda handle, part: in_greenlet(self._sftp_get, handle, part)  # noqa: E731
        else:
            receive = lambda handle, part: in_greenlet(  # noqa: E731
                self._sftp_get, handle, part, callback)
        self._run(core_sftp.download(self._link, sftp, remote_file, local_file,
                                     receive=receive))

    # -- SCP ------------------------------------------------------------------------------

    @on_this_host
    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False,
                 sftp=None) -> None:
        """Upload with SCP. With ``recurse``, directories are copied file by file and
        missing remote directories created over SFTP (SCP cannot), and nothing is written
        through a remote symlink below the target (:class:`~pssh.exceptions.SCPError`
        names it once the rest is copied). A ``remote_file`` ending in ``/`` is a
        directory to copy into."""
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
        self._run(core_scp.upload(self._link, local_file, remote_file))

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
            self._download_tree(remote_file, local_file, sftp, encoding,
                                lambda remote, local: in_greenlet(self._scp_recv, remote,
                                                                  local),
                                exc.SCPError)
        except exc.SFTPError as err:
            raise exc.SCPError("cannot list remote directory %s on host %s: %s", remote_file,
                               self.host, err, host=self.host, port=self.port) from err

    def _scp_recv(self, remote_file: str, local_file: str) -> None:
        self._run(core_scp.download(self._link, remote_file, local_file))
