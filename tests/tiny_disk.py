"""A local disk that fills up: a tiny tmpfs in a mount namespace of the test's own.

Nothing is mounted for anyone else, and nothing needs unmounting: a mount namespace
(with its tmpfs) is gone once no thread or process is left in it. Two ways in:

- :func:`run_on_tiny_disk`: ``work()`` in a thread of its own, in the namespace; the
  threads it starts (gevent's resolver pool, asyncio's executor) share the namespace
  and end with the work;
- :func:`tiny_disk`: the calling thread, for a ``with`` block that starts processes
  (they stay in the namespace) and no thread (a thread sharing the namespace would keep
  the caller from leaving it).

Needs root (CAP_SYS_ADMIN), as the test servers' PAM set-up does.
"""
from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
T = TypeVar("T")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _enter(path: str, size: int) -> None:
    """Move this thread into a new mount namespace where ``path`` is a tmpfs of ``size``."""
    os.makedirs(path, exist_ok=True)
    _check(_libc.unshare(_CLONE_NEWNS), "unshare")
    # Mounts made here must not travel back to the machine's namespace.
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
           "making mounts private")
    _check(_libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0,
                       f"size={size},mode=0755".encode()), "mounting a tmpfs")


@contextmanager
def tiny_disk(path: str, size: int = 256 * 1024) -> Iterator[str]:
    """The calling thread sees ``path`` as a tmpfs of ``size`` bytes in the block; processes
    started in it keep seeing it (``/proc/<pid>/root`` shows their view)."""
    home = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY)
    try:
        _enter(path, size)
        try:
            yield path
        finally:
            _check(_libc.setns(home, _CLONE_NEWNS), "returning to the machine's namespace")
    finally:
        os.close(home)


def run_on_tiny_disk(path: str, size: int, work: Callable[[], T]) -> T:
    """``work()``'s result (or exception), run in a new thread that sees ``path`` as a tmpfs
    of ``size`` bytes."""
    outcome: dict = {}

    def run() -> None:
        try:
            _enter(path, size)
            outcome["value"] = work()
        except BaseException as err:  # handed to the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, name="tiny-disk")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
