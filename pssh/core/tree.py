"""Directory trees copied to and from a server: the one walk every front end uses.

The server chooses the names its directories list, and a compromised one lists
what it likes: ``../../.ssh/authorized_keys``, ``/etc/cron.d/x``, ``a/../../b``.
Joined onto a local path, such a name writes outside the target: command
execution on the controller. So a name from a server is taken only as a single
path component (:func:`checked_name`: no ``/``, not ``.`` or ``..``, no NUL,
not empty); any other is refused with a warning naming the host and the name,
the rest of the tree is copied, and the walk reports what it refused
(:class:`Refused`), which each front end raises as its error at the end.

Symlinks. The root a caller names is the user's choice and is followed, as scp and
sftp follow it; what lies below it is not taken on trust:

- A download does not enter a remote symlink to a directory (as OpenSSH's ``sftp get
  -r``; followed, ``a -> .`` beside ``b -> .`` is 2**64 directories within the depth
  bound), and copies one to a file as that file (as ``scp -r``). Nothing is written
  into a local directory that resolves outside the target (a symlink left there); a
  file is renamed into place, so it replaces a local symlink, never writes through it.
- An upload writes nothing through a remote symlink below the target: each remote
  entry it writes into or creates is lstat'ed first (but in a directory the walk made
  itself, which holds nothing else), and a symlink is refused as a bad name is. A
  directory is lstat'ed again just before its mode is set, which comes last. OpenSSH's
  sftp and scp write through such a link; a user of that host can plant one
  (``uploads -> /etc``) for someone's privileged upload to write and chmod there.
  SFTP version 3 has no request that does not follow a link, so one made in the round
  trip between the check and the write is not seen.

Also bounded here: the depth (:data:`MAX_DEPTH` levels, as OpenSSH's sftp; a server
can list directories without end). Special files (devices, FIFOs, sockets) are
skipped, as OpenSSH skips them. Directories get their modes
(:func:`~pssh.core.partial_files.local_mode`) once what they hold is in. The walk is
a loop over a stack, not recursion: a deep tree is no RecursionError.
"""
from __future__ import annotations

import logging
import os
import posixpath
import stat as _stat
from typing import TYPE_CHECKING, Callable, Iterable, List, NamedTuple, Optional, Tuple

from pssh.core import errors as exc
from pssh.core import sftp as core_sftp
from pssh.core.link import Link
from pssh.core.partial_files import PERMISSIONS, local_mode, umask
from pssh.core.waits import Procedure

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.sftp import SFTP
    from ssh2.sftp_attributes import SFTPAttributes

log = logging.getLogger("pssh.core.tree")

#: Directory levels below the top that a walk enters at most (OpenSSH's sftp: 64).
MAX_DEPTH = 64
#: Why an upload leaves a remote entry alone.
REMOTE_LINK = "a symlink on the server: nothing is written through it (it may lead out " \
              "of the target)"


class Refused(NamedTuple):
    """An entry a walk did not copy: its path (as the server named it) and why."""

    path: str
    reason: str


def checked_name(name: bytes, encoding: str = "utf-8") -> Tuple[str, Optional[str]]:
    """``(name as text, None)`` if ``name`` (from a server's directory listing) is a single
    path component, else ``(name as text, why not)``."""
    text = name.decode(encoding, "surrogateescape")
    if not name:
        return text, "an empty name"
    if b"/" in name:
        return text, "a name with '/'"
    if name in (b".", b".."):
        return text, f"'{text}'"
    if b"\0" in name:
        return text, "a name with a NUL byte"
    return text, None


def refused_message(refused: List[Refused], limit: int = 5) -> str:
    """The refused entries, for an error message."""
    shown = "; ".join(f"{r.path!r}: {r.reason}" for r in refused[:limit])
    more = f" and {len(refused) - limit} more" if len(refused) > limit else ""
    return f"{len(refused)} entr{'y' if len(refused) == 1 else 'ies'} not copied: {shown}{more}"


#: ``fetch(remote path, local path)``: a procedure copying one remote file to a local path.
Fetch = Callable[[str, str], Procedure[object]]
#: ``send(local path, remote path)``: a procedure copying one local file to a remote path.
Send = Callable[[str, str], Procedure[object]]


def download(link: Link, sftp: SFTP, remote_root: str, local_root: str, fetch: Fetch,
             encoding: str = "utf-8", modes: str = PERMISSIONS,
             names: Optional[Iterable[bytes]] = None) -> Procedure[List[Refused]]:
    """Copy the remote directory ``remote_root`` and all it holds into ``local_root``
    (made if missing), each file by ``fetch``; returns what was refused.

    ``names``: the entries of ``remote_root`` as a caller listed them (parallel-ssh's
    ``_copy_remote_dir`` step), walked in place of a listing of its own, with the same
    checks against ``local_root``. A name the server does not have goes to ``fetch``,
    whose error says so (as in parallel-ssh); ``local_root`` is made only if a directory
    needs it, and keeps its mode.
    """
    mask = umask()
    refused: List[Refused] = []
    dir_modes: List[Tuple[str, int]] = []
    if names is None:
        os.makedirs(local_root, exist_ok=True)
        root_attrs = yield from core_sftp.stat(link, sftp, remote_root)
        if root_attrs is not None:
            dir_modes.append((local_root, root_attrs.permissions))
    top = os.path.realpath(local_root)
    pending: List[Tuple[str, str, int, Optional[Iterable[bytes]]]] = [
        (remote_root, local_root, 0, names)]
    while pending:
        remote_dir, local_dir, depth, listed = pending.pop()
        if listed is None:
            entries = yield from core_sftp.listdir_attrs(link, sftp, remote_dir)
        else:
            entries = [(raw, None) for raw in listed]
        for raw, attrs in sorted(entries, key=lambda entry: entry[0]):
            if raw in (b".", b".."):
                continue
            name, problem = checked_name(raw, encoding)
            remote_path = posixpath.join(remote_dir, name)
            if problem is not None:
                _refuse(link, refused, remote_path, f"{problem}: not a name a file can have "
                        "in a directory, so it is not written anywhere")
                continue
            local_path = os.path.join(local_dir, name)
            if attrs is None:  # the caller's names, or a listing without attributes
                attrs = yield from core_sftp.lstat(link, sftp, remote_path)
                if attrs is None:
                    if listed is not None:
                        yield from fetch(remote_path, local_path)
                    continue
            if _stat.S_ISLNK(attrs.permissions):
                attrs = yield from _link_target(link, sftp, remote_path)
                if attrs is None:
                    continue
            kind = _stat.S_IFMT(attrs.permissions)
            if kind == _stat.S_IFDIR:
                if depth + 1 > MAX_DEPTH:
                    _refuse(link, refused, remote_path, f"deeper than {MAX_DEPTH} levels")
                    continue
                if listed is not None:
                    os.makedirs(local_root, exist_ok=True)
                if not _local_dir(local_path, top):
                    _refuse(link, refused, remote_path, f"the local {local_path} leads out of "
                            f"{local_root} (a symlink)")
                    continue
                dir_modes.append((local_path, attrs.permissions))
                pending.append((remote_path, local_path, depth + 1, None))
            elif kind == _stat.S_IFREG:
                yield from fetch(remote_path, local_path)
            else:
                log.warning("%s: %s is not a regular file or a directory: skipped", link.host,
                            remote_path)
    for path, mode in reversed(dir_modes):  # deepest first: a read-only parent comes last
        os.chmod(path, local_mode(mode, modes, directory=True, mask=mask))
    return refused


def _link_target(link: Link, sftp: SFTP, path: str) -> Procedure[Optional[SFTPAttributes]]:
    """The attributes of the file the remote symlink ``path`` leads to; None (skipped)
    for one that leads to a directory, or nowhere."""
    attrs = yield from core_sftp.stat(link, sftp, path)
    if attrs is None:
        log.info("%s: %s is a dangling symlink: skipped", link.host, path)
        return None
    if _stat.S_ISDIR(attrs.permissions):
        log.warning("%s:%s: %s is a symlink to a directory: not followed (as OpenSSH's "
                    "sftp get -r; a loop of them would never end)", link.host, link.port, path)
        return None
    return attrs


def _refuse(link: Link, refused: List[Refused], path: str, reason: str) -> None:
    log.warning("%s:%s: not copied: %r: %s", link.host, link.port, path, reason)
    refused.append(Refused(path, reason))


def _local_dir(path: str, top: str) -> bool:
    """Make the local directory ``path`` if missing; False if it exists and resolves
    outside ``top`` (a symlink someone left there)."""
    try:
        os.mkdir(path, 0o700)
        return True
    except FileExistsError:
        pass
    real = os.path.realpath(path)
    if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
        return False
    if not os.path.isdir(real):
        raise NotADirectoryError(f"{path} exists and is not a directory")
    return True


def upload(link: Link, sftp: SFTP, local_root: str, remote_root: str, send: Send,
           make_root: bool = True) -> Procedure[List[Refused]]:
    """Copy the local directory ``local_root`` and all it holds into ``remote_root``, each
    file by ``send``: directories made as needed (``make_root``: the top one with its
    missing parents), given the local ones' modes once their contents are in; returns
    the remote entries refused (symlinks below ``remote_root``). Local symlinks are
    followed (as ``scp -r``); one that loops back is skipped."""
    refused: List[Refused] = []
    if make_root:
        yield from core_sftp.makedirs(link, sftp, remote_root)
    # (local directory, remote directory, depth, the local ones above, made by this walk)
    pending: List[Tuple[str, str, int, frozenset, bool]] = [
        (local_root, remote_root, 0, frozenset(), False)]
    dir_modes: List[Tuple[str, int]] = [(remote_root, _stat.S_IMODE(os.stat(local_root).st_mode))]
    while pending:
        local_dir, remote_dir, depth, above, made = pending.pop()
        st = os.stat(local_dir)
        if (st.st_dev, st.st_ino) in above:
            log.warning("%s: %s loops back to a directory above it: skipped", link.host,
                        local_dir)
            continue
        above = above | {(st.st_dev, st.st_ino)}
        for entry in sorted(os.scandir(local_dir), key=lambda e: e.name):
            local_path = entry.path
            remote_path = posixpath.join(remote_dir, entry.name)
            if entry.is_dir():
                if depth + 1 > MAX_DEPTH:
                    raise NotADirectoryError(f"{local_path}: deeper than {MAX_DEPTH} levels")
                created = yield from _remote_dir(link, sftp, remote_path, made, refused)
                if created is None:
                    continue
                dir_modes.append((remote_path, _stat.S_IMODE(entry.stat().st_mode)))
                pending.append((local_path, remote_path, depth + 1, above, created))
            elif entry.is_file():
                if not made and core_sftp.is_link((yield from core_sftp.lstat(link, sftp,
                                                                              remote_path))):
                    _refuse(link, refused, remote_path, REMOTE_LINK)
                    continue
                yield from send(local_path, remote_path)
            else:
                log.warning("%s: %s is not a regular file or a directory: skipped", link.host,
                            local_path)
    for path, mode in reversed(dir_modes):
        # setstat follows a link, and comes after all the directory holds: what was a
        # directory when the walk came to it is checked again.
        if path != remote_root:
            attrs = yield from core_sftp.lstat(link, sftp, path)
            if attrs is None or not core_sftp.is_dir(attrs):
                _refuse(link, refused, path, "replaced since the walk came to it: its mode "
                        "is not set (setstat would follow a symlink)")
                continue
        yield from core_sftp.set_mode(link, sftp, path, mode)
    return refused


def _remote_dir(link: Link, sftp: SFTP, path: str, parent_made: bool,
                refused: List[Refused]) -> Procedure[Optional[bool]]:
    """Make the remote directory ``path`` unless one is there: True if made here, False if
    it was there, None if refused (a symlink). In a directory the walk made (``parent_made``)
    nothing is there: it is made without asking first."""
    if not parent_made:
        attrs = yield from core_sftp.lstat(link, sftp, path)
        if attrs is not None:
            return _existing_dir(link, path, attrs, refused)
    try:
        yield from core_sftp.mkdir(link, sftp, path)
        return True
    except exc.SFTPIOError:
        # SFTP v3 reports "exists" as a plain failure: another host or task may have made
        # it meanwhile (hosts sharing a file system), as mkdir -p tolerates.
        attrs = yield from core_sftp.lstat(link, sftp, path)
        if attrs is None:
            raise
        return _existing_dir(link, path, attrs, refused)


def _existing_dir(link: Link, path: str, attrs: SFTPAttributes,
                  refused: List[Refused]) -> Optional[bool]:
    if _stat.S_ISLNK(attrs.permissions):
        _refuse(link, refused, path, REMOTE_LINK)
        return None
    if not core_sftp.is_dir(attrs):
        raise exc.SFTPIOError("%s on host %s exists and is not a directory", path, link.host,
                              host=link.host, port=link.port)
    return False


__all__ = ["MAX_DEPTH", "REMOTE_LINK", "Refused", "checked_name", "download",
           "refused_message", "upload"]
