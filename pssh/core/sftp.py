"""SFTP: remote files and directories, and whole-file transfers that never leave a
truncated file under the real name.

A download is written to a temporary file beside its target and renamed over
it once complete; an upload goes to a temporary remote name (``.<name>.<hex>.part``)
and is renamed into place: with ``posix-rename@openssh.com`` where the server
has it (atomic, replaces the target), else by removing the target first. A
failed or interrupted upload removes its temporary file when the connection
still allows (a warning names what is left when it does not). The bytes move in
the bindings' C pumps (many requests in flight, no GIL) between waits.

Every request of an SFTP session fails at once (rather than wait for its
timeout, or for ever) once the server's end of that session is gone: an
sftp-server that died while the connection lives (:func:`ended`).
"""
from __future__ import annotations

import logging
import os
import stat as _stat
from typing import Callable, List, Optional

from pssh.core import errors as exc
from pssh.core.link import Link
from pssh.core.deadlines import Limit, UNSET, deadline_after, remaining
from pssh.core.waits import Procedure
from pssh.core.channel_io import sftp_end_check
from pssh.core.partial_files import (PERMISSIONS, local_file_errors, local_mode,
                                     local_part_file, remote_part_name)
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.sftp import SFTP
from ssh2.sftp_attributes import SFTPAttributes
from ssh2.sftp_handle import SFTPHandle
from ssh2.sftp import (LIBSSH2_FXF_CREAT, LIBSSH2_FXF_EXCL, LIBSSH2_FXF_READ,
                       LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE, LIBSSH2_SFTP_S_IFDIR,
                       LIBSSH2_SFTP_S_IFMT)

log = logging.getLogger("pssh.core.sftp")

#: ``progress(bytes done, total)`` of one file.
Progress = Optional[Callable[[int, int], None]]
DIR_MODE = 0o755
#: Seconds the clean-up after a failed or stopped transfer may take (closing the handle,
#: removing the partial file): a session that stopped answering must not hold the caller.
CLEANUP_TIMEOUT = 10.0
#: Seconds an SFTP request waits for its answer when no limit is set (``request_timeout``,
#: ``timeout``): a server that keeps the connection alive (keepalives answered) but never
#: answers SFTP must not hold the call for ever. A transfer in progress answers each of
#: its requests in milliseconds.
STALL_TIMEOUT = 120.0
_UPLOAD = LIBSSH2_FXF_CREAT | LIBSSH2_FXF_WRITE | LIBSSH2_FXF_TRUNC | LIBSSH2_FXF_EXCL
_MISSING = (ssh2_exc.SFTPNoSuchFileError, ssh2_exc.SFTPHandleError)


def limit(link: Link) -> Optional[float]:
    """The time an SFTP request may wait for its answer: the link's request limit, else
    :data:`STALL_TIMEOUT`."""
    return link.timeout if link.timeout is not None else STALL_TIMEOUT


def cleanup_time(err: Optional[BaseException]) -> float:
    """Seconds the clean-up after ``err`` may wait for the server: none after a timeout
    (it is not answering, and the caller's deadline has passed: a handle's close is sent
    and not waited for, libssh2 finishes it later), else :data:`CLEANUP_TIMEOUT`."""
    return 0.0 if isinstance(err, exc.Timeout) else CLEANUP_TIMEOUT


def is_dir(attrs: SFTPAttributes) -> bool:
    return attrs.permissions & LIBSSH2_SFTP_S_IFMT == LIBSSH2_SFTP_S_IFDIR


def ended(sftp: SFTP) -> Callable[[], None]:
    """The check made before each wait of a request of ``sftp``: raises once the server's
    end of the session is gone (libssh2 would say "try again" for ever)."""
    return sftp_end_check(sftp)


def _handle_ended(handle: SFTPHandle) -> Callable[[], None]:
    return ended(handle.sftp)


def start(link: Link, timeout: Limit = UNSET) -> Procedure[SFTP]:
    """A new SFTP session on the connection; :class:`~pssh.exceptions.SFTPError` if the
    server refuses it."""
    if link.session is None:
        raise exc.SFTPError.at(link.host, link.port, "cannot start SFTP: the connection is "
                               "closed")
    try:
        return (yield from link.exclusive(link.session.sftp_init,
                                          timeout=limit(link) if timeout is UNSET else timeout,
                                          what="starting SFTP"))
    except (exc.Timeout, exc.ConnectionError):
        raise
    except Exception as err:
        raise exc.SFTPError("%s:%s: cannot start SFTP: %s", link.host, link.port, err,
                            host=link.host, port=link.port) from err


def stat(link: Link, sftp: SFTP, path: str) -> Procedure[Optional[SFTPAttributes]]:
    """The remote path's attributes, or None if it does not exist."""
    try:
        return (yield from link.call(sftp.stat, path, timeout=limit(link),
                                     what=f"stat of {path!r}", check=ended(sftp)))
    except _MISSING:
        return None


def lstat(link: Link, sftp: SFTP, path: str) -> Procedure[Optional[SFTPAttributes]]:
    """The remote path's own attributes (a symlink's, not followed), or None if it does
    not exist."""
    try:
        return (yield from link.call(sftp.lstat, path, timeout=limit(link),
                                     what=f"lstat of {path!r}", check=ended(sftp)))
    except _MISSING:
        return None


def is_link(attrs: Optional[SFTPAttributes]) -> bool:
    return attrs is not None and _stat.S_ISLNK(attrs.permissions)


def upload_target(link: Link, sftp: SFTP, remote: str) -> Procedure[str]:
    """The path a single-file upload to ``remote`` writes: ``remote``, or the path it
    leads to when it is a symlink. The user named that path, so it is followed, as
    OpenSSH's scp and sftp follow it (``/etc/resolv.conf -> ../run/...`` stays a link and
    the file it names gets the content); without this the upload's rename would replace
    the link itself. What lies below a tree's target is the server's, and the tree walk
    refuses links there (:mod:`pssh.core.tree`)."""
    if not is_link((yield from lstat(link, sftp, remote))):
        return remote
    try:
        real = yield from link.call(sftp.realpath, remote, timeout=limit(link),
                                    what=f"realpath of {remote!r}", check=ended(sftp))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("cannot resolve the symlink %s on host %s: %s", remote,
                              link.host, err, host=link.host, port=link.port) from err
    log.debug("%s: %s is a symlink to %s: uploading there", link.host, remote, real)
    return real


def mkdir(link: Link, sftp: SFTP, path: str, mode: int = DIR_MODE) -> Procedure[None]:
    """Create one remote directory; :class:`~pssh.exceptions.SFTPIOError` if refused."""
    try:
        yield from link.call(sftp.mkdir, path, mode, timeout=limit(link),
                             what=f"mkdir of {path!r}", check=ended(sftp))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("cannot create directory %s on host %s: %s", path, link.host,
                              err, host=link.host, port=link.port) from None
    log.debug("%s: created remote directory %s", link.host, path)


def makedirs(link: Link, sftp: SFTP, directory: str) -> Procedure[None]:
    """Create ``directory`` and its missing parents (``mkdir -p``)."""
    path = "" if directory.startswith("/") else "."
    for part in (p for p in directory.split("/") if p):
        path = f"{path}/{part}"
        yield from ensure_dir(link, sftp, path)


def ensure_dir(link: Link, sftp: SFTP, path: str) -> Procedure[None]:
    """Make the remote directory ``path`` unless it is one already (its parent exists)."""
    attrs = yield from stat(link, sftp, path)
    if attrs is None:
        try:
            return (yield from mkdir(link, sftp, path))
        except exc.SFTPIOError:
            # SFTP v3 reports "exists" as a plain failure: another host or task may have
            # made it meanwhile (hosts sharing a file system), as mkdir -p tolerates.
            attrs = yield from stat(link, sftp, path)
            if attrs is None:
                raise
    if not is_dir(attrs):
        raise exc.SFTPIOError("%s on host %s exists and is not a directory", path,
                              link.host, host=link.host, port=link.port)


def set_mode(link: Link, sftp: SFTP, path: str, mode: int) -> Procedure[None]:
    from ssh2.sftp_attributes import SFTPAttributes
    attrs = SFTPAttributes()
    attrs.permissions = mode
    try:
        yield from link.call(sftp.setstat, path, attrs, timeout=limit(link),
                             what=f"chmod of {path!r}", check=ended(sftp))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("cannot set the mode of %s on host %s: %s", path, link.host,
                              err, host=link.host, port=link.port) from err


def open_file(link: Link, sftp: SFTP, path: str, flags: int,
              mode: int = 0) -> Procedure[SFTPHandle]:
    """An open remote file handle; :class:`~pssh.exceptions.SFTPError` naming the host."""
    try:
        return (yield from link.call(sftp.open, path, flags, mode, timeout=limit(link),
                                     what=f"opening {path!r}", check=ended(sftp)))
    except (exc.Timeout, exc.ConnectionError):
        raise
    except Exception as err:
        raise exc.SFTPError("%s:%s: cannot open %s: %s", link.host, link.port, path, err,
                            host=link.host, port=link.port) from err


def close_handle(link: Link, handle: SFTPHandle, timeout: Limit = UNSET) -> Procedure[None]:
    """Close a remote file handle (a failure to is of no consequence here)."""
    if handle.closed:
        return
    try:
        yield from link.call(handle.close, timeout=limit(link) if timeout is UNSET else timeout,
                             what="closing a remote file",
                             check=_handle_ended(handle))
    except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
        log.debug("%s: closing a remote file: %s", link.host, err)


def listdir(link: Link, sftp: SFTP, path: str) -> Procedure[List[bytes]]:
    """The names in a remote directory, as bytes (``.`` and ``..`` included)."""
    return [name for name, _ in (yield from listdir_attrs(link, sftp, path))]


def listdir_attrs(link: Link, sftp: SFTP, path: str) -> Procedure[List[tuple]]:
    """``(name, attributes)`` of each entry of a remote directory (names as bytes, ``.``
    and ``..`` included; the attributes are the entry's own, a symlink's not followed)."""
    try:
        handle = yield from link.call(sftp.opendir, path, timeout=limit(link),
                                      what=f"opendir of {path!r}", check=ended(sftp))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPError("%s:%s: cannot open directory %s: %s", link.host, link.port, path,
                            err, host=link.host, port=link.port) from err
    try:
        entries = yield from read_entries(link, handle)
    except BaseException as err:
        yield from close_handle(link, handle, cleanup_time(err))
        raise
    yield from close_handle(link, handle, CLEANUP_TIMEOUT)
    return entries


def read_names(link: Link, handle: SFTPHandle) -> Procedure[List[bytes]]:
    """The names an open remote directory lists, as bytes."""
    return [name for name, _ in (yield from read_entries(link, handle))]


def read_entries(link: Link, handle: SFTPHandle) -> Procedure[List[tuple]]:
    """``(name, attributes)`` of each entry an open remote directory lists."""
    entries = []
    check = _handle_ended(handle)
    # The bindings' iterator yields an EAGAIN entry when it would block, then goes on.
    for size, name, attrs in handle.readdir():
        if size == LIBSSH2_ERROR_EAGAIN:
            check()
            yield from link.wait(limit(link), "reading a directory")
        else:
            entries.append((name, attrs))
    return entries


def read(link: Link, handle: SFTPHandle, size: int, what: str) -> Procedure[bytes]:
    """Up to ``size`` bytes of an open remote file (b"" at its end)."""
    check = _handle_ended(handle)
    while True:
        try:
            n, data = handle.read(size)
            if n == LIBSSH2_ERROR_EAGAIN:
                check()
        except ssh2_exc.SSH2Error as err:
            raise exc.SFTPIOError("%s:%s: %s failed: " + exc.cause_format(err), link.host,
                                  link.port, what, err, host=link.host,
                                  port=link.port) from err
        if n != LIBSSH2_ERROR_EAGAIN:
            link.wake()
            return data
        yield from link.wait(limit(link), what)


def write(link: Link, handle: SFTPHandle, data: bytes, what: str) -> Procedure[None]:
    """Write all of ``data`` to an open remote file."""
    try:
        yield from link.write(handle.write, data, timeout=limit(link), what=what,
                              check=_handle_ended(handle))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("%s:%s: %s failed: " + exc.cause_format(err), link.host,
                              link.port, what, err, host=link.host, port=link.port) from err


# -- whole files ---------------------------------------------------------------------------

def pump(link: Link, step: Callable, fd: int, what: str, progress: Progress = None,
         total: int = 0) -> Procedure[int]:
    """Run a bindings pump (``handle.pump_to_fd`` / ``pump_from_fd``) to its end,
    waiting whenever it would block; returns the bytes moved."""
    check = _handle_ended(step.__self__)  # type: ignore[attr-defined]  # a bound method
    done = 0
    while True:
        rc, moved = step(fd)
        done += moved
        if moved:
            link.wake()
            if progress is not None:
                progress(done, total)
            yield from link.turn()
        if rc == 0:
            return done
        if rc == LIBSSH2_ERROR_EAGAIN:
            check()
            yield from link.wait(limit(link), what)


def download(link: Link, sftp: SFTP, remote: str, local: str, progress: Progress = None,
             modes: str = PERMISSIONS, receive: Optional[Callable] = None) -> Procedure[int]:
    """Copy a remote file to ``local``, which appears only when complete, with the mode
    ``modes`` decides (:func:`~pssh.core.partial_files.local_mode`: by default the remote
    permission bits less the umask); returns its size.

    ``receive(handle, path)``: a procedure that reads the open remote file into the
    local file at ``path`` (default: the bindings' pump), for front ends whose API lets
    programs replace that step.
    """
    handle = yield from open_file(link, sftp, remote, LIBSSH2_FXF_READ)
    fd, part = local_part_file(local)
    try:
        failure: Optional[BaseException] = None
        try:
            attrs = yield from link.call(handle.fstat, timeout=limit(link),
                                         what=f"fstat of {remote!r}", check=ended(sftp))
            with local_file_errors(local):  # a full disk names the target, not the part
                if receive is None:
                    total = yield from pump(link, handle.pump_to_fd, fd,
                                            f"downloading {remote}", progress, attrs.filesize)
                else:
                    os.close(fd)
                    fd = -1
                    total = yield from receive(handle, part)
        except ssh2_exc.SSH2Error as err:
            failure = err
            raise exc.SFTPIOError("reading remote file %s on host %s failed: "
                                  + exc.cause_format(err), remote, link.host, err,
                                  host=link.host, port=link.port) from err
        except BaseException as err:
            failure = err
            raise
        finally:
            if fd >= 0:
                os.close(fd)
            yield from close_handle(link, handle, cleanup_time(failure))
        os.chmod(part, local_mode(attrs.permissions, modes))
        os.replace(part, local)
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise
    return total


def upload(link: Link, sftp: SFTP, local: str, remote: str, progress: Progress = None,
           mode: Optional[int] = None, send: Optional[Callable] = None) -> Procedure[int]:
    """Copy ``local`` to ``remote`` (with the local file's permission bits unless
    ``mode``); the remote file appears under its name only once complete.

    ``send(handle)``: a procedure that writes the local file into the open remote one
    (default: the bindings' pump), for front ends whose API lets programs replace it.
    """
    fd = os.open(local, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        mode = _stat.S_IMODE(st.st_mode) if mode is None else mode
        part = remote_part_name(remote)
        handle = yield from open_file(link, sftp, part, _UPLOAD, mode)
        try:
            try:
                if send is None:
                    total = yield from pump(link, handle.pump_from_fd, fd,
                                            f"uploading {remote}", progress, st.st_size)
                else:
                    total = yield from send(handle)
                yield from link.call(handle.close, timeout=limit(link),
                                     what=f"closing {part!r}", check=ended(sftp))
            except ssh2_exc.SSH2Error as err:
                raise exc.SFTPIOError("writing remote file %s on host %s failed: "
                                      + exc.cause_format(err), remote, link.host, err,
                                      host=link.host, port=link.port) from err
            yield from rename_into_place(link, sftp, part, remote)
        except BaseException as err:
            yield from discard(link, sftp, handle, part, err)
            raise
    finally:
        os.close(fd)
    return total


def rename_into_place(link: Link, sftp: SFTP, part: str, remote: str) -> Procedure[None]:
    """``part`` renamed to ``remote``, replacing it: atomically with posix-rename, else
    (a server without that extension) by removing ``remote`` first."""
    try:
        yield from link.call(sftp.posix_rename, part, remote, timeout=limit(link),
                             what=f"renaming into {remote!r}", check=ended(sftp))
        return
    except ssh2_exc.SFTPOpUnsupportedError:
        pass
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("cannot move %s into place on host %s: %s", remote, link.host,
                              err, host=link.host, port=link.port) from err
    try:
        try:
            yield from link.call(sftp.unlink, remote, timeout=limit(link),
                                 what=f"removing {remote!r}", check=ended(sftp))
        except ssh2_exc.SFTPNoSuchFileError:
            pass
        yield from link.call(sftp.rename, part, remote, timeout=limit(link),
                             what=f"renaming into {remote!r}", check=ended(sftp))
    except ssh2_exc.SSH2Error as err:
        raise exc.SFTPIOError("cannot move %s into place on host %s: %s", remote, link.host,
                              err, host=link.host, port=link.port) from err


def discard(link: Link, sftp: SFTP, handle: SFTPHandle, path: str,
            err: Optional[BaseException] = None) -> Procedure[None]:
    """Best effort, after a failure (``err``): close the handle and remove the partial
    file, each within :func:`cleanup_time` (after a timeout: not waited for, and the
    partial file is left, named in a warning)."""
    limit = cleanup_time(err)
    yield from close_handle(link, handle, limit)
    if limit:
        yield from remove_partial(link, path, sftp)
    else:
        log.warning("%s:%s: the partial upload %s is left on the server: %s", link.host,
                    link.port, path, err)


def remove_partial(link: Link, path: str, sftp: Optional[SFTP] = None) -> Procedure[None]:
    """Remove a failed upload's file (best effort): over ``sftp``, else (or if that fails:
    the failure may have ended that session) over a new SFTP session, while the
    connection lives, within :data:`CLEANUP_TIMEOUT`; a warning names what is left when
    neither can."""
    failure: object = "the connection is closed"
    deadline = deadline_after(CLEANUP_TIMEOUT)
    for current in ((sftp, None) if sftp is not None else (None,)):
        if link.closed or remaining(deadline) == 0:
            break
        try:
            if current is None:
                current = yield from start(link, remaining(deadline))
            yield from link.call(current.unlink, path, timeout=remaining(deadline),
                                 what=f"removing {path!r}", check=ended(current))
            return
        except ssh2_exc.SFTPNoSuchFileError:
            return
        except Exception as err:  # the connection may be what failed
            failure = err
    log.warning("%s:%s: the partial upload %s is left on the server: %s", link.host,
                link.port, path, failure)


__all__ = ["CLEANUP_TIMEOUT", "DIR_MODE", "Progress", "STALL_TIMEOUT", "cleanup_time",
           "close_handle", "discard", "download", "ensure_dir", "is_dir", "is_link", "limit",
           "listdir", "listdir_attrs", "lstat", "makedirs", "mkdir", "open_file", "pump", "read",
           "read_entries", "read_names", "remove_partial", "rename_into_place", "set_mode",
           "start", "stat", "upload", "upload_target", "write"]
