"""SCP on the asyncio front end: asyncssh's ``scp()`` for single files.

A remote side is ``(connection, path)`` or a ``"[user@]host:path"`` string (a
connection is then made with ``connect()``'s keyword arguments and closed after),
as in asyncssh; the other side is a local path (a directory: the file keeps its
name). The transfers are the session core's (:mod:`pssh.core.scp`): a download
lands in a temporary file renamed over the target when complete (with the remote
permission bits less the umask, and the remote times); an upload keeps the local mode
but not its times (libssh2 sends them, yet OpenSSH's ``scp -t`` leaves the upload time:
checked by the tests), and
a failed one is removed again.
"""
from __future__ import annotations

import os
import posixpath
from typing import Optional, Tuple, Union

from pssh import exceptions as exc
from pssh.aio.sftp_errors import SFTPFailure, also
from pssh.core import scp as core_scp

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
                with exc.on_host(conn.host, conn.port):
                    await _download(conn, remote, local)
            elif isinstance(dst, tuple) and not isinstance(src, tuple):
                conn, remote = dst
                local = os.fspath(src)
                if remote in ("", ".") or remote.endswith("/"):
                    remote = posixpath.join(remote, os.path.basename(local))
                with exc.on_host(conn.host, conn.port):
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
    reason = f"{text}: {err}" if err is not None and str(err) not in text else text
    return also(SFTPFailure, exc.SCPError)(reason, host=conn.host, port=conn.port)


async def _download(conn, remote: str, local: str) -> None:
    try:
        await conn._run(core_scp.download(conn._link, remote, local))
    except exc.SCPError as err:
        raise _error(conn, err.reason, err.__cause__) from err


async def _upload(conn, local: str, remote: str) -> None:
    try:
        await conn._run(core_scp.upload(conn._link, local, remote))
    except exc.SCPError as err:
        raise _error(conn, err.reason, err.__cause__) from err
