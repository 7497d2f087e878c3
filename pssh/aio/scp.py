"""SCP on the asyncio front end: asyncssh's ``scp()`` for single files.

A remote side is ``(connection, path)``, as in asyncssh; the other side is a
local path. A download lands in a temporary file renamed over the target when
complete (with the remote mode and times); an upload keeps the local mode but
not its times (libssh2 sends them, yet OpenSSH's ``scp -t`` leaves the upload
time: checked by the tests), and a failed one is removed again.
"""
from __future__ import annotations

import os
import stat
from typing import Tuple, Union

from pssh import exceptions as exc
from pssh.channel_io import end_check
from pssh.partial_files import keep_download, local_file_errors, local_part_file
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

CHUNK = 2 * 1024 * 1024
Remote = Tuple[object, str]


async def scp(srcpath: Union[str, Remote], dstpath: Union[str, Remote]) -> None:
    """Copy one file: ``scp((conn, "/remote/path"), "local")`` downloads,
    ``scp("local", (conn, "/remote/path"))`` uploads. Errors name the host, local ones
    too (:class:`pssh.exceptions.LocalOSError`)."""
    if isinstance(srcpath, tuple) and not isinstance(dstpath, tuple):
        conn, remote = srcpath
        with exc.on_host(conn.host, conn.port):
            await _download(conn, remote, os.fspath(dstpath))
    elif isinstance(dstpath, tuple) and not isinstance(srcpath, tuple):
        conn, remote = dstpath
        with exc.on_host(conn.host, conn.port):
            await _upload(conn, os.fspath(srcpath), remote)
    else:
        raise ValueError("scp(): one side is (connection, remote path), the other a local path")


def _error(conn, text: str, err: BaseException) -> exc.SCPError:
    return exc.SCPError("%s:%s: %s: " + exc.cause_format(err), conn.host, conn.port, text,
                        err, host=conn.host, port=conn.port)


async def _download(conn, remote: str, local: str) -> None:
    driver = conn._driver
    try:
        channel, info = await driver.exclusive(conn.session.scp_recv2, remote,
                                               what="starting an SCP download")
    except ssh2_exc.SSH2Error as err:
        raise _error(conn, f"cannot copy {remote}", err) from err
    fd, part = local_part_file(local)
    try:
        with local_file_errors(local), os.fdopen(fd, "wb") as fh:
            left = info.st_size
            while left > 0:
                try:
                    size, data = channel.read(min(CHUNK, left))
                except ssh2_exc.SSH2Error as err:
                    raise _error(conn, f"reading {remote} failed", err) from err
                if size == LIBSSH2_ERROR_EAGAIN:
                    await driver.wait(driver.timeout, f"downloading {remote}")
                elif size == 0:
                    raise exc.SCPError("%s:%s: SCP download of %s ended %s bytes early",
                                       conn.host, conn.port, remote, left,
                                       host=conn.host, port=conn.port)
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
        check = end_check(channel, "the SCP copy")
        try:
            while data := fh.read(CHUNK):
                await driver.write(channel.write, data, what=f"uploading {remote}",
                                   check=check)
            for step in (channel.send_eof, channel.wait_eof, channel.close, channel.wait_closed):
                await driver.eagain(step, what=f"ending the SCP upload of {remote}")
        except BaseException as err:
            await _remove(conn, remote)
            if isinstance(err, (ssh2_exc.SSH2Error, exc.PSSHError)):
                raise _error(conn, f"writing {remote} failed", err) from err
            raise


async def _remove(conn, remote: str) -> None:
    """SCP writes the real name (it cannot rename): a failed upload's truncated file is
    removed over SFTP while the connection lives."""
    from pssh.aio.sftp import remove_partial
    await remove_partial(conn, remote)
