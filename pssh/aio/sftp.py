"""SFTP on the asyncio front end (asyncssh's ``SFTPClient`` names).

Downloads land in a temporary file beside the target, renamed over it once
complete, and uploads in a temporary remote file renamed into place: a
failed or cancelled transfer leaves no truncated file under the real name.
Reads run through the bindings' large-buffer path (many read requests in
flight, decrypted in bulk), waiting on the loop between calls.
"""
from __future__ import annotations

import logging
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Callable, List, Optional

from pssh import exceptions as exc
from pssh.aio.awaitable import AwaitableContext
from pssh.channel_io import sftp_end_check
from pssh.partial_files import local_file_errors, local_part_file, remote_part_name
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.sftp import (LIBSSH2_FXF_APPEND, LIBSSH2_FXF_CREAT, LIBSSH2_FXF_EXCL,
                       LIBSSH2_FXF_READ, LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE)

log = logging.getLogger("pssh.aio")

#: Bytes per read call: 4x of it in read requests may be in flight.
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


async def start_sftp_client(conn) -> "SFTPClient":
    driver = conn._driver
    try:
        sftp = await driver.exclusive(conn.session.sftp_init, what="starting SFTP")
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPError.at(conn.host, conn.port, f"cannot start SFTP: {err}") from err
    return SFTPClient(conn, sftp)


class SFTPClient:
    """Remote files of one connection: ``get``, ``put``, ``listdir``, ``stat``, ``mkdir``,
    ``remove``, ``exists``. Paths are str (UTF-8 on the wire)."""

    def __init__(self, conn, sftp) -> None:
        self._conn = conn
        self._driver = conn._driver
        self._sftp = sftp
        # Every request fails, rather than wait for ever, once the session has ended.
        self._check = sftp_end_check(sftp)

    async def _call(self, fn, *args, what: str):
        try:
            return await self._driver.eagain(fn, *args, what=what, check=self._check)
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPError.at(self._conn.host, self._conn.port, f"{what}: {err}") from err

    async def stat(self, path: str) -> SFTPAttrs:
        """The remote path's attributes (``size``, ``permissions``, ``mtime`` ...)."""
        return SFTPAttrs.of(await self._call(self._sftp.stat, path, what=f"stat of {path!r}"))

    async def exists(self, path: str) -> bool:
        try:
            await self._driver.eagain(self._sftp.stat, path, what=f"stat of {path!r}",
                                      check=self._check)
        except ssh2_exc.SFTPProtocolError:
            return False
        return True

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
        handle = await self._call(self._sftp.opendir, path, what=f"opendir of {path!r}")
        names = []
        try:
            # The bindings' iterator yields an EAGAIN entry when it would block, then goes on.
            for size, name, _ in handle.readdir():
                if size == LIBSSH2_ERROR_EAGAIN:
                    self._check()
                    await self._driver.wait(self._driver.timeout, "reading a directory")
                else:
                    names.append(name.decode("utf-8", "surrogateescape"))
        finally:
            await self._close(handle)
        return names

    async def _close(self, handle) -> None:
        try:
            await self._driver.eagain(handle.close, what="closing a remote file",
                                      check=self._check)
        except ssh2_exc.SSH2Error:
            pass

    def open(self, path: str, mode: str = "r") -> AwaitableContext:
        """A remote file (``async with sftp.open(path, "rb") as fh``, or ``await`` it):
        modes ``r``/``rb`` (read), ``w``/``wb`` (create or truncate), ``a``/``ab``,
        ``x``/``xb`` (create, must not exist). Text modes encode and decode UTF-8."""
        flags = _OPEN_FLAGS.get(mode.replace("b", ""))
        if flags is None:
            raise ValueError(f"unsupported mode {mode!r}: r, w, a or x, with b for bytes")
        return AwaitableContext(self._open_file(path, flags, "b" not in mode))

    async def _open_file(self, path: str, flags: int, text: bool) -> "SFTPClientFile":
        handle = await self._call(self._sftp.open, path, flags, 0o644, what=f"opening {path!r}")
        return SFTPClientFile(self, handle, path, text)

    async def get(self, remotepath: str, localpath: Optional[str] = None, *,
                  recurse: bool = False, progress_handler: Progress = None) -> None:
        """Download ``remotepath`` to ``localpath`` (default: its name, here; into it if it is
        a directory). ``recurse``: a remote directory is copied with all it holds.
        Errors name the host, local ones too (:class:`pssh.exceptions.LocalOSError`)."""
        with exc.on_host(self._conn.host, self._conn.port):
            await self._get(remotepath, localpath, recurse, progress_handler)

    async def _get(self, remotepath: str, localpath: Optional[str], recurse: bool,
                   progress_handler: Progress) -> None:
        localpath = os.fspath(localpath) if localpath is not None \
            else posixpath.basename(remotepath.rstrip("/"))
        if os.path.isdir(localpath):
            localpath = os.path.join(localpath, posixpath.basename(remotepath.rstrip("/")))
        if recurse and (await self.stat(remotepath)).type == _TYPES[stat.S_IFDIR]:
            os.makedirs(localpath, exist_ok=True)
            for name in await self.listdir(remotepath):
                if name not in (".", ".."):
                    await self._get(posixpath.join(remotepath, name),
                                    os.path.join(localpath, name), True, progress_handler)
            return
        await self._get_file(remotepath, localpath, progress_handler)

    async def _get_file(self, remotepath: str, localpath: str, progress_handler: Progress):
        handle = await self._call(self._sftp.open, remotepath, LIBSSH2_FXF_READ, 0,
                                  what=f"opening {remotepath!r}")
        fd, part = local_part_file(localpath)
        try:
            try:
                total = (await self._call(handle.fstat, what="fstat")).filesize \
                    if progress_handler else 0
                with local_file_errors(localpath):
                    await self._download(handle, fd, remotepath, localpath, total,
                                         progress_handler)
            finally:
                os.close(fd)
                await self._close(handle)
            os.replace(part, localpath)
        except BaseException:
            os.unlink(part)
            raise

    async def _download(self, handle, fd: int, remotepath: str, localpath: str, total: int,
                        progress_handler: Progress) -> None:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        done = 0
        while True:
            try:
                n = handle.read_into(buf)
                if n == LIBSSH2_ERROR_EAGAIN:
                    self._check()
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPIOError.at(self._conn.host, self._conn.port,
                                         f"reading {remotepath!r} failed: "
                                         + exc.cause_format(err) % (err,)) from err
            if n == LIBSSH2_ERROR_EAGAIN:
                await self._driver.wait(self._driver.timeout, f"downloading {remotepath!r}")
                continue
            if n == 0:
                return
            self._driver.wake()
            written = 0
            while written < n:
                written += os.write(fd, view[written:n])
            done += n
            if progress_handler:
                progress_handler(remotepath.encode(), localpath.encode(), done, total)

    async def put(self, localpath: str, remotepath: Optional[str] = None, *,
                  recurse: bool = False, progress_handler: Progress = None) -> None:
        """Upload ``localpath`` to ``remotepath`` (default: its name, in the remote home).
        ``recurse``: a local directory is copied with all it holds (directories made as
        needed, with the local ones' modes). A failed upload's partial file is removed
        while the connection allows. Errors name the host, local ones too."""
        with exc.on_host(self._conn.host, self._conn.port):
            await self._put(localpath, remotepath, recurse, progress_handler)

    async def _put(self, localpath: str, remotepath: Optional[str], recurse: bool,
                   progress_handler: Progress) -> None:
        localpath = os.fspath(localpath)
        remotepath = remotepath or os.path.basename(localpath.rstrip("/"))
        if recurse and os.path.isdir(localpath):
            if not await self.exists(remotepath):
                await self.mkdir(remotepath, mode=stat.S_IMODE(os.stat(localpath).st_mode))
            for name in sorted(os.listdir(localpath)):
                await self._put(os.path.join(localpath, name), posixpath.join(remotepath, name),
                                True, progress_handler)
            return
        mode = stat.S_IMODE(os.stat(localpath).st_mode)
        part = remote_part_name(remotepath)
        handle = await self._call(self._sftp.open, part,
                                  LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_EXCL, mode,
                                  what=f"creating {part!r}")
        try:
            try:
                await self._upload(handle, localpath, remotepath, progress_handler)
            finally:
                await self._close(handle)
            await self._rename(part, remotepath)
        except BaseException:
            await remove_partial(self._conn, part, self)
            raise

    async def _upload(self, handle, localpath: str, remotepath: str,
                      progress_handler: Progress) -> None:
        total = os.path.getsize(localpath)
        done = 0
        with open(localpath, "rb") as fh:
            while data := fh.read(CHUNK):
                try:
                    await self._driver.write(handle.write, data,
                                             what=f"uploading {remotepath!r}",
                                             check=self._check)
                except ssh2_exc.SSH2Error as err:
                    raise exc.SFTPIOError.at(self._conn.host, self._conn.port,
                                             f"writing {remotepath!r} failed: "
                                             + exc.cause_format(err) % (err,)) from err
                done += len(data)
                if progress_handler:
                    progress_handler(localpath.encode(), remotepath.encode(), done, total)

    async def _rename(self, part: str, remotepath: str) -> None:
        try:
            await self._driver.eagain(self._sftp.posix_rename, part, remotepath,
                                      what=f"renaming into {remotepath!r}", check=self._check)
        except ssh2_exc.SSH2Error:
            # No posix-rename extension: remove the target, then rename.
            if await self.exists(remotepath):
                await self.remove(remotepath)
            await self._call(self._sftp.rename, part, remotepath,
                             what=f"renaming into {remotepath!r}")

    def exit(self) -> None:
        """Stop using SFTP (its channel is freed with the connection)."""
        self._sftp = None

    async def __aenter__(self) -> "SFTPClient":
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.exit()


async def remove_partial(conn, path: str, sftp: Optional[SFTPClient] = None) -> None:
    """Remove a failed upload's partial file (best effort): over ``sftp``, else (or if that
    fails: the failure ended the SFTP session) over a new SFTP session, while the
    connection lives; a warning says what is left when neither can."""
    failure: object = "the connection is closed"
    for current in (sftp, None):
        if current is None and conn.session is None:
            break
        try:
            if current is None:
                current = await start_sftp_client(conn)
            elif current._sftp is None:  # ended (exit()) meanwhile
                continue
            await current._driver.eagain(current._sftp.unlink, path,
                                         what="removing a partial file", check=current._check)
            return
        except ssh2_exc.SFTPNoSuchFileError:
            return
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            failure = err
    log.warning("%s:%s: the partial upload %s is left on the server: %s", conn.host,
                conn.port, path, failure)


class SFTPClientFile:
    """An open remote file (asyncssh's name): ``read``, ``write``, ``close``."""

    def __init__(self, client: SFTPClient, handle, path: str, text: bool) -> None:
        self._client = client
        self._driver = client._driver
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
        while True:
            try:
                n, data = self._handle.read(size)
                if n == LIBSSH2_ERROR_EAGAIN:
                    self._client._check()
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPIOError.at(self._client._conn.host, self._client._conn.port,
                                         f"reading {self._path!r} failed: "
                                         + exc.cause_format(err) % (err,)) from err
            if n != LIBSSH2_ERROR_EAGAIN:
                self._driver.wake()
                return data
            await self._driver.wait(self._driver.timeout, f"reading {self._path!r}")

    async def write(self, data) -> int:
        """Write all of ``data``; returns its length."""
        if isinstance(data, str):
            data = data.encode()
        try:
            await self._driver.write(self._handle.write, data, what=f"writing {self._path!r}",
                                     check=self._client._check)
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPIOError.at(self._client._conn.host, self._client._conn.port,
                                     f"writing {self._path!r} failed: "
                                     + exc.cause_format(err) % (err,)) from err
        return len(data)

    async def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            await self._client._close(handle)

    async def __aenter__(self) -> "SFTPClientFile":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

