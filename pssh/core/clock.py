"""The clock the core's deadlines read, and the wall clock beside it.

Deadlines are absolute times of this clock (:mod:`pssh.core.deadlines`). It is the
system's monotonic clock, except while a runner on virtual time
(:class:`pssh.runners.virtual.VirtualRunner`) drives procedures: then time passes
only when that runner says so, and a test of keepalives, deadlines or retry delays
takes milliseconds whatever the machine's load. One clock per process: runners on
virtual time do not nest, and nothing else runs core procedures meanwhile.

:func:`wall` is the time of day (``time.time()``) for what is said about a moment
rather than waited for (a poll result's time); under a virtual clock it moves with
that clock, so that a time of day and a deadline never disagree about how much time
passed.

Deadlines and schedules read this clock; :meth:`pssh.core.link.Link.turn` measures
work done without waiting, which is real time by nature.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator, Optional

_now: Callable[[], float] = time.monotonic
_wall: Callable[[], float] = time.time


def now() -> float:
    """The current time of the core's clock, in seconds."""
    return _now()


def wall() -> float:
    """The time of day (seconds since the epoch) by the core's clock."""
    return _wall()


@contextlib.contextmanager
def using(clock: Callable[[], float], wall: Optional[Callable[[], float]] = None
          ) -> Iterator[None]:
    """The core's deadlines read ``clock()`` inside the block, and :func:`wall` reads
    ``wall()`` (default: the real time of day)."""
    global _now, _wall
    if _now is not time.monotonic:
        raise RuntimeError("a virtual clock is already in use in this process")
    _now, _wall = clock, wall or time.time
    try:
        yield
    finally:
        _now, _wall = time.monotonic, time.time


__all__ = ["now", "using", "wall"]
