"""Names for transfers in progress, shared by both front ends.

A download is written to a temporary file beside its target and renamed over
it once complete; an upload goes to a temporary remote name and is renamed
into place. A failed or interrupted transfer never leaves a truncated file
under the real name.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator


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


def keep_download(part: str, local_file: str, mode: int, atime: int, mtime: int) -> None:
    """Give a finished download the remote file's mode and times, then its real name."""
    os.chmod(part, mode & 0o7777)
    os.utime(part, (atime, mtime))
    os.replace(part, local_file)


def new_file_mode() -> int:
    """The mode a newly created file gets here (0666 less the umask): what a download not
    asked to keep the remote mode is given (the temporary file is made private)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o22)  # no other way to read it: set, then put back at once
    os.umask(mask)
    return 0o666 & ~mask


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
