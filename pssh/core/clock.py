"""The clock the core's deadlines read.

Deadlines are absolute times of this clock (:mod:`pssh.core.deadlines`). It is the
system's monotonic clock, except while a runner on virtual time
(:class:`pssh.runners.virtual.VirtualRunner`) drives procedures: then time passes
only when that runner says so, and a test of keepalives, deadlines or retry delays
takes milliseconds whatever the machine's load. One clock per process: runners on
virtual time do not nest, and nothing else runs core procedures meanwhile.

Only deadlines read this clock; :meth:`pssh.core.link.Link.turn` measures work done
without waiting, which is real time by nature.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

_now: Callable[[], float] = time.monotonic


def now() -> float:
    """The current time of the core's clock, in seconds."""
    return _now()


@contextlib.contextmanager
def using(clock: Callable[[], float]) -> Iterator[None]:
    """The core's deadlines read ``clock()`` inside the block."""
    global _now
    if _now is not time.monotonic:
        raise RuntimeError("a virtual clock is already in use in this process")
    _now = clock
    try:
        yield
    finally:
        _now = time.monotonic


__all__ = ["now", "using"]
