"""Names and modes for transfers in progress, shared by both front ends.

A download is written to a temporary file beside its target and renamed over
it once complete; an upload goes to a temporary remote name and is renamed
into place. A failed or interrupted transfer never leaves a truncated file
under the real name.

The mode a download gets is decided here, never taken from the server as
given: a hostile server reporting 07777 must not leave a setuid,
world-writable file on the controller. By default, as OpenSSH's ``sftp`` and
``scp`` do, the remote permission bits less the local umask
(:data:`PERMISSIONS`); the setuid, setgid and sticky bits only when the user
asks to preserve modes (:data:`PRESERVE`).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator, Optional


def local_part_file(local_file: str) -> tuple:
    """A new, exclusive ``(fd, path)`` beside ``local_file`` for a download in progress."""
    import tempfile  # ~6 ms of import: paid by the first download, not by every start-up
    return tempfile.mkstemp(prefix=f".{os.path.basename(local_file)}.", suffix=".part",
                            dir=os.path.dirname(os.path.abspath(local_file)))


def remote_part_name(path: str) -> str:
    """A temporary name beside ``path`` (a remote POSIX path)."""
    directory, _, base = path.rpartition("/")
    prefix = directory + "/" if directory or path.startswith("/") else ""
    return f"{prefix}.{base}.{os.urandom(4).hex()}.part"


#: How a download's local mode is decided (:func:`local_mode`).
NEW_FILE = "new"                # a new local file's: 0666 less the umask (asyncssh's default)
PERMISSIONS = "permissions"     # the remote permission bits less the umask (OpenSSH's)
PRESERVE = "preserve"           # the remote mode whole, special bits included (asked for)
MODE_POLICIES = (NEW_FILE, PERMISSIONS, PRESERVE)


def keep_download(part: str, local_file: str, mode: int, atime: int, mtime: int,
                  policy: str = PERMISSIONS) -> None:
    """Give a finished download its mode (from the remote one, under ``policy``) and the
    remote file's times, then its real name."""
    os.chmod(part, local_mode(mode, policy))
    os.utime(part, (atime, mtime))
    os.replace(part, local_file)


def local_mode(remote_mode: int, policy: str = PERMISSIONS, directory: bool = False,
               mask: Optional[int] = None) -> int:
    """The mode a downloaded file (or ``directory``) gets here from the server's
    ``remote_mode``, under ``policy``. A directory always keeps its owner's rwx: what it
    holds must stay manageable. ``mask``: the umask, when the caller has read it."""
    if policy not in MODE_POLICIES:
        raise ValueError(f"mode policy must be one of {MODE_POLICIES}, not {policy!r}")
    owner = 0o700 if directory else 0
    if policy == PRESERVE:
        return remote_mode & 0o7777 | owner
    mask = umask() if mask is None else mask
    if policy == NEW_FILE:
        return (0o777 if directory else 0o666) & ~mask
    return (remote_mode & 0o777 | owner) & ~mask


def new_file_mode() -> int:
    """The mode a newly created file gets here (0666 less the umask)."""
    return 0o666 & ~umask()


def umask() -> int:
    """This process's umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o22)  # no other way to read it: set, then put back at once
    os.umask(mask)
    return mask


@contextmanager
def local_file_errors(local_file: str) -> Iterator[None]:
    """A local OS error of the block names ``local_file`` (the download's target) when it
    names no file: writing through a descriptor (a full disk) says only its errno."""
    try:
        yield
    except OSError as err:
        if err.filename is None and err.errno is not None:
            err.filename = local_file
        raise
