"""SCP on the asyncio front end: asyncssh's ``scp()`` for single files.

A remote side is ``(connection, path)`` or a ``"[user@]host:path"`` string (a
connection is then made with ``connect()``'s keyword arguments and closed after),
as in asyncssh; the other side is a local path (a directory: the file keeps its
name). A download lands in a temporary file renamed over the target when
complete (with the remote mode and times); an upload keeps the local mode but
not its times (libssh2 sends them, yet OpenSSH's ``scp -t`` leaves the upload
time: checked by the tests), and a failed one is removed again.
"""
from __future__ import annotations

import os
import posixpath
import stat
from typing import Optional, Tuple, Union

from pssh import exceptions as exc
from pssh.aio.sftp_errors import SFTPFailure, also
from pssh.partial_files import keep_download, local_part_file
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

CHUNK = 2 * 1024 * 1024
Remote = Tuple[object, str]


async def scp(srcpath: Union[str, Remote], dstpath: Union[str, Remote, None] = None,
              **connect_args) -> None:
    """Copy one file: ``scp((conn, "/remote/path"), "local")`` or
    ``scp("host:/remote/path", ".")`` downloads, ``scp("local", (conn, "/remote/path"))``
    uploads. ``dstpath`` defaults to the current directory. Other keyword arguments are
    :func:`~pssh.aio.connect`'s, for a side given as a ``host:path`` string.

    Failures raise :class:`~pssh.aio.SFTPError` (as asyncssh's ``scp`` does), also a
    :class:`pssh.exceptions.SCPError`, naming the host."""
    src, src_opened = await _side(srcpath, connect_args)
    try:
        dst, dst_opened = await _side("." if dstpath is None else dstpath, connect_args)
        try:
            if isinstance(src, tuple) and not isinstance(dst, tuple):
                conn, remote = src
                local = os.fspath(dst)
                if os.path.isdir(local):
                    local = os.path.join(local, posixpath.basename(remote.rstrip("/")))
                await _download(conn, remote, local)
            elif isinstance(dst, tuple) and not isinstance(src, tuple):
                conn, remote = dst
                local = os.fspath(src)
                if remote in ("", ".") or remote.endswith("/"):
                    remote = posixpath.join(remote, os.path.basename(local))
                await _upload(conn, local, remote)
            else:
                raise ValueError("scp(): one side is remote ((connection, path) or "
                                 "'host:path'), the other a local path")
        finally:
            if dst_opened is not None:
                await dst_opened.__aexit__(None, None, None)
    finally:
        if src_opened is not None:
            await src_opened.__aexit__(None, None, None)


async def _side(path, connect_args: dict):
    """``(side, connection we opened or None)``: a ``host:path`` string becomes
    ``(connection, path)``."""
    if isinstance(path, tuple) or not isinstance(path, str):
        return path, None
    host, sep, remote = path.partition(":")
    if not sep or not host or "/" in host:
        return path, None
    from pssh.aio.connection import connect
    args = dict(connect_args)
    if "@" in host:
        args["username"], host = host.rsplit("@", 1)
    conn = await connect(host, **args)
    return (conn, remote), conn


def _error(conn, text: str, err: Optional[BaseException] = None) -> exc.SCPError:
    """An SCP failure: asyncssh's :class:`~pssh.aio.SFTPFailure` and our SCPError."""
    reason = f"{text}: {err}" if err is not None else text
    return also(SFTPFailure, exc.SCPError)(reason, host=conn.host, port=conn.port)


async def _download(conn, remote: str, local: str) -> None:
    driver = conn._driver
    try:
        channel, info = await driver.exclusive(conn.session.scp_recv2, remote,
                                               what="starting an SCP download")
    except ssh2_exc.SSH2Error as err:
        raise _error(conn, f"cannot copy {remote}", err) from err
    fd, part = local_part_file(local)
    try:
        with os.fdopen(fd, "wb") as fh:
            left = info.st_size
            while left > 0:
                size, data = channel.read(min(CHUNK, left))
                if size == LIBSSH2_ERROR_EAGAIN:
                    await driver.wait(driver.timeout, f"downloading {remote}")
                elif size == 0:
                    raise _error(conn, f"SCP download of {remote} ended {left} bytes early")
                else:
                    driver.wake()
                    fh.write(data)
                    left -= size
        keep_download(part, local, info.st_mode, info.st_atime, info.st_mtime)
    except BaseException:
        os.unlink(part)
        raise
    finally:
        try:
            await driver.eagain(channel.close, what="closing the SCP channel")
        except (ssh2_exc.SSH2Error, exc.PSSHError):
            pass


async def _upload(conn, local: str, remote: str) -> None:
    driver = conn._driver
    with open(local, "rb") as fh:
        st = os.fstat(fh.fileno())
        try:
            channel = await driver.exclusive(conn.session.scp_send64, remote,
                                             stat.S_IMODE(st.st_mode), st.st_size,
                                             int(st.st_mtime), int(st.st_atime),
                                             what="starting an SCP upload")
        except ssh2_exc.SSH2Error as err:
            raise _error(conn, f"cannot open {remote} for writing", err) from err
        try:
            while data := fh.read(CHUNK):
                await driver.write(channel.write, data, what=f"uploading {remote}")
            for step in (channel.send_eof, channel.wait_eof, channel.close, channel.wait_closed):
                await driver.eagain(step, what=f"ending the SCP upload of {remote}")
        except BaseException as err:
            await _remove(conn, remote)
            if isinstance(err, (ssh2_exc.SSH2Error, exc.PSSHError)):
                raise _error(conn, f"writing {remote} failed", err) from err
            raise


async def _remove(conn, remote: str) -> None:
    """A failed upload leaves a truncated file: remove it (best effort, over SFTP)."""
    if conn.session is None:
        return
    try:
        from pssh.aio.sftp import start_sftp_client
        sftp = await start_sftp_client(conn)
        await sftp.remove(remote)
    except (ssh2_exc.SSH2Error, exc.PSSHError):
        pass
