"""SCP transfers of single files.

A download lands in a temporary file renamed over the target when complete,
with the remote file's times and its permission bits less the umask
(:mod:`pssh.core.partial_files`). Complete means the protocol said so: after
the file's bytes, the server's status byte is 0 (not an error such as
``scp: ...: Input/output error``, which a failing source sends after padding
the file) and the remote ``scp`` exits 0 once we acknowledged it. An upload writes the remote file
directly (``scp -t`` has no temporary name) with the local mode (OpenSSH's
``scp -t`` keeps the upload time, not the local one); a failed upload is
removed again over SFTP when the connection still allows.

Each wait for the server is bounded by the link's timeout, else by the stall limit of
SFTP (:func:`pssh.core.sftp.limit`): a server that answers keepalives but stops sending
a file must not hold the call for ever.
"""
from __future__ import annotations

import logging
import os
import stat as _stat
from typing import TYPE_CHECKING, Optional

from pssh.core import errors as exc
from pssh.core import sftp as core_sftp
from pssh.core.link import Link
from pssh.core.waits import Procedure
from pssh.core.channel_io import end_check
from pssh.core.partial_files import (PERMISSIONS, keep_download, local_file_errors,
                                     local_part_file)
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.channel import Channel

log = logging.getLogger("pssh.core.scp")

CHUNK = 2 * 1024 * 1024
#: The longest error line of the SCP protocol read from a server (OpenSSH's are short).
STATUS_LINE_MAX = 1024


def _close(link: Link, channel: Channel) -> Procedure[None]:
    try:
        yield from link.call(channel.close, what="closing the SCP channel")
    except (ssh2_exc.SSH2Error, exc.PSSHError):
        pass


def download(link: Link, remote: str, local: str, modes: str = PERMISSIONS) -> Procedure[int]:
    """Copy ``remote`` to ``local`` over SCP; returns the bytes copied. ``modes``: how the
    local mode follows the remote one (:func:`~pssh.core.partial_files.local_mode`)."""
    stall = core_sftp.limit(link)
    try:
        channel, info = yield from link.exclusive(link.live_session.scp_recv2, remote,
                                                  timeout=stall,
                                                  what="starting an SCP download")
    except (exc.Timeout, exc.ConnectionError):
        raise
    except Exception as err:
        raise exc.SCPError("error copying file %s from host %s: " + exc.cause_format(err),
                           remote, link.host, err, host=link.host, port=link.port) from err
    fd, part = local_part_file(local)
    try:
        with local_file_errors(local), os.fdopen(fd, "wb") as fh:
            left = info.st_size
            while left > 0:
                try:
                    size, data = channel.read(min(CHUNK, left))
                except ssh2_exc.SSH2Error as err:
                    raise exc.SCPError("error copying file %s from host %s: "
                                       + exc.cause_format(err), remote, link.host, err,
                                       host=link.host, port=link.port) from err
                if size == LIBSSH2_ERROR_EAGAIN:
                    yield from link.wait(stall, f"downloading {remote}")
                elif size == 0:
                    raise exc.SCPError("SCP download of %s from host %s ended %s bytes early",
                                       remote, link.host, left, host=link.host, port=link.port)
                else:
                    link.wake()
                    fh.write(data)
                    left -= size
                    # While data keeps coming this loop never waits: without a turn, the
                    # timers, signals and other hosts of its loop wait for the whole file.
                    yield from link.turn()
        try:
            yield from _completed(link, channel, remote, stall)
        except ssh2_exc.SSH2Error as err:
            raise exc.SCPError("error copying file %s from host %s: " + exc.cause_format(err),
                               remote, link.host, err, host=link.host, port=link.port) from err
        keep_download(part, local, info.st_mode, info.st_atime, info.st_mtime, modes)
    except BaseException:
        os.unlink(part)
        raise
    finally:
        yield from _close(link, channel)
    return info.st_size


def _completed(link: Link, channel: Channel, remote: str,
               stall: Optional[float]) -> Procedure[None]:
    """After a file's bytes: the source's status (0, or 1/2 and an error line), our
    acknowledgement, and the remote scp's exit status. :class:`~pssh.exceptions.SCPError`
    unless all say the copy is complete. Each wait for the server is bounded by ``stall``."""
    status = b""
    while not status.endswith(b"\n") and len(status) < STATUS_LINE_MAX:
        size, data = channel.read(1 if not status else STATUS_LINE_MAX - len(status))
        if size == LIBSSH2_ERROR_EAGAIN:
            yield from link.wait(stall, f"the end of the SCP download of {remote}")
            continue
        if size <= 0:
            break
        link.wake()
        status += data
        if status[:1] == b"\0":
            break
    if status[:1] != b"\0":
        said = status[1:].decode("utf-8", "replace").strip() if status else "nothing"
        raise exc.SCPError("SCP download of %s from host %s failed: the server said %r after "
                           "the file's bytes", remote, link.host, said[:200],
                           host=link.host, port=link.port)
    yield from link.write(channel.write, b"\0", timeout=stall, what=f"acknowledging {remote}")
    # The server's close, not ours, ends it: its exit status comes before its close, and
    # a close of ours that got there first would make it drop the status.
    for step in (channel.send_eof, channel.wait_eof, channel.wait_closed):
        yield from link.call(step, timeout=stall, what=f"ending the SCP download of {remote}")
    code = channel.get_exit_status()
    if code:
        raise exc.SCPError("SCP download of %s from host %s failed: the remote scp exited %s",
                           remote, link.host, code, host=link.host, port=link.port)


def upload(link: Link, local: str, remote: str) -> Procedure[int]:
    """Copy ``local`` to ``remote`` over SCP; returns the bytes copied. A local file that
    cannot be read is its ``OSError`` (as parallel-ssh's)."""
    with open(local, "rb") as fh:
        st = os.fstat(fh.fileno())
        stall = core_sftp.limit(link)
        try:
            channel = yield from link.exclusive(
                link.live_session.scp_send64, remote, _stat.S_IMODE(st.st_mode), st.st_size,
                int(st.st_mtime), int(st.st_atime), timeout=stall, what="starting an SCP upload")
        except (exc.Timeout, exc.ConnectionError):
            raise
        except Exception as err:
            raise exc.SCPError("cannot open remote file %s for writing on host %s: "
                               + exc.cause_format(err), remote, link.host, err,
                               host=link.host, port=link.port) from err
        check = end_check(channel, "the SCP copy")
        try:
            while data := fh.read(CHUNK):
                yield from link.write(channel.write, data, timeout=stall,
                                      what=f"uploading {remote}", check=check)
            for step in (channel.send_eof, channel.wait_eof, channel.close,
                         channel.wait_closed):
                yield from link.call(step, timeout=stall,
                                     what=f"ending the SCP upload of {remote}")
        except BaseException as err:
            # SCP writes the real name (it cannot rename): remove what was written.
            yield from core_sftp.remove_partial(link, remote)
            if isinstance(err, (ssh2_exc.SSH2Error, exc.PSSHError, OSError)) \
                    and not isinstance(err, (exc.Timeout, exc.ConnectionError)):
                raise exc.SCPError("writing remote file %s on host %s failed: "
                                   + exc.cause_format(err), remote, link.host, err,
                                   host=link.host, port=link.port) from err
            raise
    return st.st_size


__all__ = ["CHUNK", "download", "upload"]
