"""Deadlines shared by both front ends' drivers (nothing here imports an event loop)."""
from __future__ import annotations

import enum
from typing import Literal, Optional, Union, overload

from pssh.core import clock


class _Unset(enum.Enum):
    # An enum's one member, so that ``timeout is UNSET`` narrows the type of ``timeout``.
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: "Use the driver's own timeout" (``None`` means no limit).
UNSET = _Unset.UNSET

#: A timeout argument: seconds, ``None`` for no limit, or :data:`UNSET`.
Limit = Union[float, None, Literal[_Unset.UNSET]]


# The overloads tell the type checker that a limit gives a number, and none gives None.
@overload
def deadline_after(timeout: float) -> float: ...
@overload
def deadline_after(timeout: None) -> None: ...
@overload
def deadline_after(timeout: Optional[float]) -> Optional[float]: ...


def deadline_after(timeout: Optional[float]) -> Optional[float]:
    """The time of :mod:`pssh.core.clock` ``timeout`` seconds from now (None: no
    deadline)."""
    return None if timeout is None else clock.now() + timeout


@overload
def remaining(deadline: float) -> float: ...
@overload
def remaining(deadline: None) -> None: ...
@overload
def remaining(deadline: Optional[float]) -> Optional[float]: ...


def remaining(deadline: Optional[float]) -> Optional[float]:
    """Seconds left until ``deadline`` (never negative; None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - clock.now())


__all__ = ["Limit", "UNSET", "deadline_after", "remaining"]
