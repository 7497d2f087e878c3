"""SFTP on the asyncio front end (asyncssh's ``SFTPClient`` names).

The transfers are the session core's (:mod:`pssh.core.sftp`): downloads land
in a temporary file beside the target, renamed over it once complete, and
uploads in a temporary remote file renamed into place (atomically where the
server has posix-rename, else by removing the target first), so a failed or
cancelled transfer leaves no truncated file under the real name; the bytes move
in the bindings' C pumps between waits. Errors are asyncssh's SFTP classes
(:mod:`pssh.aio.sftp_errors`), naming the host.
"""
from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Callable, List, Optional

from pssh import exceptions as exc
from pssh.aio.awaitable import AwaitableContext
from pssh.aio.sftp_errors import SFTPError, SFTPFailure, SFTPInvalidFilename, sftp_error
from pssh.core import sftp as core_sftp, tree as core_tree
from pssh.core.partial_files import NEW_FILE, PRESERVE
from ssh2 import exceptions as ssh2_exc
from ssh2.sftp import (LIBSSH2_FXF_APPEND, LIBSSH2_FXF_CREAT, LIBSSH2_FXF_EXCL,
                       LIBSSH2_FXF_READ, LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE)

#: Bytes per read call of a whole-file read: 4x of it in read requests may be in flight.
CHUNK = 2 * 1024 * 1024
#: ``progress_handler(source path, destination path, bytes done, total)``, paths as bytes.
Progress = Optional[Callable[[bytes, bytes, int, int], None]]
# SFTP v6 file types (asyncssh's FILEXFER_TYPE_*), by the mode's type bits.
_TYPES = {stat.S_IFREG: 1, stat.S_IFDIR: 2, stat.S_IFLNK: 3}
_OPEN_FLAGS = {"r": LIBSSH2_FXF_READ,
               "w": LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC,
               "a": LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_APPEND,
               "x": LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL}


@dataclass
class SFTPAttrs:
    """A remote file's attributes, under asyncssh's names (None: not sent by the server)."""

    type: int
    size: Optional[int]
    uid: Optional[int]
    gid: Optional[int]
    permissions: Optional[int]
    atime: Optional[int]
    mtime: Optional[int]

    @classmethod
    def of(cls, attrs) -> "SFTPAttrs":
        mode = attrs.permissions
        return cls(type=_TYPES.get(stat.S_IFMT(mode), 5), size=attrs.filesize, uid=attrs.uid,
                   gid=attrs.gid, permissions=mode, atime=attrs.atime, mtime=attrs.mtime)


def _asyncssh_error(conn, what: str, err: exc.PSSHError) -> BaseException:
    """The core's SFTP error as asyncssh's class for the server's status, with the core's
    words for what went wrong."""
    cause = err.__cause__ if isinstance(err.__cause__, ssh2_exc.SSH2Error) else err
    # A status's class: built from (reason, ...), its code being the class's.
    cls: Callable[..., SFTPError] = type(sftp_error(conn.host, conn.port, what, cause,
                                                    io=isinstance(err, exc.SFTPIOError)))
    return cls(err.reason, host=conn.host, port=conn.port)


def _per_file(handler: Progress, source: str, destination: str
              ) -> Optional[Callable[[int, int], None]]:
    """The core's ``progress(done, total)`` of one file, as asyncssh's ``progress_handler``
    (source and destination paths as bytes)."""
    if handler is None:
        return None
    return lambda done, total: handler(source.encode(), destination.encode(), done, total)


async def start_sftp_client(conn) -> "SFTPClient":
    try:
        sftp = await conn._run(core_sftp.start(conn._link))
    except exc.SFTPError as err:
        raise _asyncssh_error(conn, "cannot start SFTP", err) from err
    return SFTPClient(conn, sftp)


class SFTPClient:
    """Remote files of one connection: ``get``, ``put``, ``listdir``, ``stat``, ``mkdir``,
    ``remove``, ``exists``. Paths are str (UTF-8 on the wire)."""

    def __init__(self, conn, sftp) -> None:
        self._conn = conn
        self._sftp = sftp

    async def _call(self, fn, *args, what: str):
        try:
            return await self._conn._call(fn, *args, timeout=core_sftp.limit(self._conn._link),
                                          what=what)
        except ssh2_exc.SSH2Error as err:
            raise sftp_error(self._conn.host, self._conn.port, what, err) from err

    async def _run(self, procedure, what: str):
        try:
            return await self._conn._run(procedure)
        except (exc.SFTPError, exc.SCPError) as err:
            raise _asyncssh_error(self._conn, what, err) from err

    async def stat(self, path: str) -> SFTPAttrs:
        """The remote path's attributes (``size``, ``permissions``, ``mtime`` ...)."""
        return SFTPAttrs.of(await self._call(self._sftp.stat, path, what=f"stat of {path!r}"))

    async def exists(self, path: str) -> bool:
        link = self._conn._link
        return (await self._conn._run(core_sftp.stat(link, self._sftp, path))) is not None

    async def mkdir(self, path: str, attrs: Optional[SFTPAttrs] = None, *,
                    mode: int = 0o755) -> None:
        """Make a remote directory (``attrs.permissions``, else ``mode``)."""
        if attrs is not None and attrs.permissions is not None:
            mode = attrs.permissions
        await self._call(self._sftp.mkdir, path, mode, what=f"mkdir of {path!r}")

    async def remove(self, path: str) -> None:
        await self._call(self._sftp.unlink, path, what=f"remove of {path!r}")

    async def rmdir(self, path: str) -> None:
        await self._call(self._sftp.rmdir, path, what=f"rmdir of {path!r}")

    async def listdir(self, path: str = ".") -> List[str]:
        """The names in a remote directory (``.`` and ``..`` included, as asyncssh)."""
        names = await self._run(core_sftp.listdir(self._conn._link, self._sftp, path),
                                f"opendir of {path!r}")
        return [name.decode("utf-8", "surrogateescape") for name in names]

    def open(self, path: str, mode: str = "r") -> AwaitableContext:
        """A remote file (``async with sftp.open(path, "rb") as fh``, or ``await`` it):
        modes ``r``/``rb`` (read), ``w``/``wb`` (create or truncate), ``a``/``ab``,
        ``x``/``xb`` (create, must not exist). Text modes encode and decode UTF-8."""
        flags = _OPEN_FLAGS.get(mode.replace("b", ""))
        if flags is None:
            raise ValueError(f"unsupported mode {mode!r}: r, w, a or x, with b for bytes")
        return AwaitableContext(self._open_file(path, flags, "b" not in mode))

    async def _open_file(self, path: str, flags: int, text: bool) -> "SFTPClientFile":
        handle = await self._run(core_sftp.open_file(self._conn._link, self._sftp, path, flags,
                                                     0o644), f"opening {path!r}")
        return SFTPClientFile(self, handle, path, text)

    async def get(self, remotepath: str, localpath: Optional[str] = None, *,
                  recurse: bool = False, preserve: bool = False,
                  progress_handler: Progress = None) -> None:
        """Download ``remotepath`` to ``localpath`` (default: its name, here; into it if it is
        a directory). ``recurse``: a remote directory is copied with all it holds.
        ``preserve``: the remote file's permission bits (else the umask's). Errors name
        the host, local ones too (:class:`pssh.exceptions.LocalOSError`)."""
        with exc.on_host(self._conn.host, self._conn.port):
            await self._get(remotepath, localpath, recurse, preserve, progress_handler)

    async def _get(self, remotepath: str, localpath: Optional[str], recurse: bool,
                   preserve: bool, progress_handler: Progress) -> None:
        localpath = os.fspath(localpath) if localpath is not None \
            else posixpath.basename(remotepath.rstrip("/"))
        if os.path.isdir(localpath):
            localpath = os.path.join(localpath, posixpath.basename(remotepath.rstrip("/")))
        modes = PRESERVE if preserve else NEW_FILE
        link = self._conn._link

        def fetch(remote: str, local: str):
            return core_sftp.download(link, self._sftp, remote, local,
                                      _per_file(progress_handler, remote, local), modes=modes)

        if recurse and (await self.stat(remotepath)).type == _TYPES[stat.S_IFDIR]:
            refused = await self._run(core_tree.download(link, self._sftp, remotepath,
                                                         localpath, fetch, modes=modes),
                                      f"copying {remotepath!r}")
            if refused:
                raise SFTPInvalidFilename(f"copying {remotepath}: "
                                          f"{core_tree.refused_message(refused)}",
                                          host=self._conn.host, port=self._conn.port)
            return
        await self._run(fetch(remotepath, localpath), f"reading {remotepath!r}")

    async def put(self, localpath: str, remotepath: Optional[str] = None, *,
                  recurse: bool = False, progress_handler: Progress = None) -> None:
        """Upload ``localpath`` to ``remotepath`` (default: its name, in the remote home;
        a symlink there is followed, as asyncssh and scp follow it). ``recurse``: a local
        directory is copied with all it holds (directories made as needed, with the local
        ones' modes); nothing is written through a remote symlink below ``remotepath``:
        the rest is copied, then :class:`SFTPFailure` names what was not. A failed
        upload's partial file is removed while the connection allows. Errors name the
        host, local ones too."""
        with exc.on_host(self._conn.host, self._conn.port):
            await self._put(localpath, remotepath, recurse, progress_handler)

    async def _put(self, localpath: str, remotepath: Optional[str], recurse: bool,
                   progress_handler: Progress) -> None:
        localpath = os.fspath(localpath)
        remotepath = remotepath or os.path.basename(localpath.rstrip("/"))
        link = self._conn._link

        def send(local: str, remote: str):
            return core_sftp.upload(link, self._sftp, local, remote,
                                    _per_file(progress_handler, local, remote))

        if recurse and os.path.isdir(localpath):
            refused = await self._run(core_tree.upload(link, self._sftp, localpath, remotepath,
                                                       send),
                                      f"copying into {remotepath!r}")
            if refused:
                raise SFTPFailure(f"copying {localpath} to {remotepath}: "
                                  f"{core_tree.refused_message(refused)}",
                                  host=self._conn.host, port=self._conn.port)
            return
        target = await self._run(core_sftp.upload_target(link, self._sftp, remotepath),
                                 f"lstat of {remotepath!r}")
        await self._run(core_sftp.upload(link, self._sftp, localpath, target,
                                         _per_file(progress_handler, localpath, remotepath)),
                        f"writing {remotepath!r}")

    def exit(self) -> None:
        """Stop using SFTP (its channel is freed with the connection)."""
        self._sftp = None

    async def __aenter__(self) -> "SFTPClient":
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.exit()


class SFTPClientFile:
    """An open remote file (asyncssh's name): ``read``, ``write``, ``close``."""

    def __init__(self, client: SFTPClient, handle, path: str, text: bool) -> None:
        self._client = client
        self._handle = handle
        self._path = path
        self._text = text

    async def read(self, size: int = -1):
        """Up to ``size`` bytes (all that is left if ``size < 0``); empty at the end."""
        if size < 0:
            parts = []
            while data := await self._read_bytes(CHUNK):
                parts.append(data)
            data = b"".join(parts)
        else:
            data = await self._read_bytes(size) if size else b""
        return data.decode() if self._text else data

    async def _read_bytes(self, size: int) -> bytes:
        client = self._client
        return await client._run(core_sftp.read(client._conn._link, self._handle, size,
                                                f"reading {self._path!r}"),
                                 f"reading {self._path!r}")

    async def write(self, data) -> int:
        """Write all of ``data``; returns its length."""
        if isinstance(data, str):
            data = data.encode()
        client = self._client
        await client._run(core_sftp.write(client._conn._link, self._handle, data,
                                          f"writing {self._path!r}"),
                          f"writing {self._path!r}")
        return len(data)

    async def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            await self._client._conn._run(core_sftp.close_handle(self._client._conn._link,
                                                                 handle))

    async def __aenter__(self) -> "SFTPClientFile":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()
