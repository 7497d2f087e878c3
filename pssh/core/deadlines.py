"""Deadlines shared by both front ends' drivers (nothing here imports an event loop)."""
from __future__ import annotations

from typing import Optional

from pssh.core import clock


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Use the driver's own timeout" (``None`` means no limit).
UNSET = _Unset()


def deadline_after(timeout: Optional[float]) -> Optional[float]:
    """The time of :mod:`pssh.core.clock` ``timeout`` seconds from now (None: no
    deadline)."""
    return None if timeout is None else clock.now() + timeout


def remaining(deadline: Optional[float]) -> Optional[float]:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - clock.now())


__all__ = ["UNSET", "deadline_after", "remaining"]
