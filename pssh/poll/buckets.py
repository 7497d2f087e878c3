"""Adaptive polling-interval buckets (Roquero & Aracil, IEEE Access 2021): pure logic.

Buckets are polling intervals, fastest first; every (host, check) starts in the
fastest. After each poll :meth:`HostState.observe` applies the rule:

* a poll that failed, timed out, or took longer than its bucket's interval moves the
  host to the next slower bucket at once;
* a poll fast enough for the next faster bucket (response time within that bucket's
  interval) counts towards an upgrade; after ``count`` such answers in a row the host
  moves up ONE bucket; any other answer restarts the run;
* with a dynamic count (``dynamic:MIN..MAX``) ``count`` is reset to MIN on a downgrade
  and grows by one (up to MAX) for every round the host stays slow (an answer not fast
  enough for the faster bucket), so a chronically slow host needs longer to earn an
  upgrade;
* with a time (``time:DURATION``, the paper's third rule) the host moves up ONE bucket
  at the first fast answer due DURATION seconds or more after the first fast answer of
  its run; any other answer restarts the run. The poll's due time (``at``, which every
  :class:`~pssh.poll.results.PollResult` keeps as ``time``) is the clock, so a run of
  results replays exactly;
* a host that is down (no connection) goes to the slowest bucket at once: it is polled
  there until it answers, then climbs back by the rule above.

With ``adaptive=False`` (:meth:`Buckets.fixed`) nobody ever moves. No I/O here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional, Tuple, Union

#: Due times are sums of intervals on a large clock (epoch seconds): their rounding must
#: not cost a ``time:`` run one more interval.
_CLOCK_SLACK = 1e-3
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|min|m|h|)\s*$")


def parse_duration(text: Union[str, float, int]) -> float:
    """Seconds from ``"10s"``, ``"500ms"``, ``"2m"``, ``"1h"`` or a plain number (seconds)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text))
        if match is None:
            raise ValueError(f"not a duration: {text!r} (e.g. 10s, 500ms, 2m, 1h)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, not {text!r}")
    return seconds


@dataclass(frozen=True)
class Upgrade:
    """What earns an upgrade: a fixed count of fast answers in a row (``count:N``), a
    dynamic one (``dynamic:MIN..MAX``), or fast answers for ``seconds`` (``time:DURATION``);
    see the module's doc."""

    minimum: int = 3
    maximum: int = 3
    dynamic: bool = False
    #: ``time:DURATION``: seconds of fast answers that earn an upgrade (counts unused).
    seconds: Optional[float] = None

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.maximum < self.minimum:
            raise ValueError(f"upgrade counts need 1 <= min <= max, not {self.minimum}.."
                             f"{self.maximum}")
        if self.seconds is not None and (self.dynamic or self.seconds <= 0):
            raise ValueError(f"an upgrade time must be positive and not dynamic, not "
                             f"{self.seconds!r}")

    @classmethod
    def parse(cls, text: str) -> "Upgrade":
        """``"count:3"``, ``"dynamic:2..10"`` or ``"time:10m"`` (any
        :func:`parse_duration` form)."""
        kind, _, value = text.strip().partition(":")
        try:
            if kind == "count":
                return cls(int(value), int(value), False)
            if kind == "dynamic":
                low, sep, high = value.partition("..")
                if sep:
                    return cls(int(low), int(high), True)
            if kind == "time":
                return cls(1, 1, False, seconds=parse_duration(value))
        except ValueError:
            pass
        raise ValueError(f"upgrade rule {text!r}: use count:N, dynamic:MIN..MAX or "
                         f"time:DURATION (30s, 10m, 1h or seconds)")

    @classmethod
    def after(cls, duration: Union[str, float]) -> "Upgrade":
        """``time:DURATION``: an upgrade after fast answers for ``duration`` seconds."""
        return cls(1, 1, False, seconds=parse_duration(duration))

    def __str__(self) -> str:
        if self.seconds is not None:
            return f"time:{self.seconds:g}s"
        return f"dynamic:{self.minimum}..{self.maximum}" if self.dynamic \
            else f"count:{self.minimum}"


@dataclass(frozen=True)
class Buckets:
    """Polling intervals in seconds, fastest first, the upgrade rule, and whether hosts
    move between buckets at all (``adaptive``)."""

    intervals: Tuple[float, ...] = (10.0, 20.0, 60.0, 100.0)
    upgrade: Upgrade = Upgrade()
    adaptive: bool = True

    def __post_init__(self) -> None:
        intervals = tuple(float(i) for i in self.intervals)
        if not intervals:
            raise ValueError("at least one bucket interval is needed")
        if any(i <= 0 for i in intervals):
            raise ValueError(f"bucket intervals must be positive: {intervals}")
        if any(b <= a for a, b in zip(intervals, intervals[1:])):
            raise ValueError(f"bucket intervals must increase, fastest first: {intervals}")
        object.__setattr__(self, "intervals", intervals)

    @classmethod
    def parse(cls, text: str, upgrade: Union[str, Upgrade, None] = None,
              adaptive: bool = True) -> "Buckets":
        """``"10s,20s,60s,100s"`` (any :func:`parse_duration` form) and an upgrade rule."""
        intervals = tuple(parse_duration(part) for part in text.split(",") if part.strip())
        return cls(intervals, _upgrade_of(upgrade), adaptive)

    @classmethod
    def fixed(cls, interval: Union[str, float]) -> "Buckets":
        """One interval for every host, no adaptation (the comparison baseline)."""
        return cls((parse_duration(interval),), Upgrade(), adaptive=False)

    @property
    def fastest(self) -> float:
        return self.intervals[0]

    @property
    def slowest(self) -> float:
        return self.intervals[-1]

    def state(self) -> "HostState":
        """A new (host, check) state in the fastest bucket."""
        return HostState(self)

    def __str__(self) -> str:
        shown = ",".join(f"{i:g}s" for i in self.intervals)
        return f"{shown} {self.upgrade}" if self.adaptive else f"fixed {shown}"


def _upgrade_of(upgrade: Union[str, Upgrade, None]) -> Upgrade:
    if upgrade is None:
        return Upgrade()
    return upgrade if isinstance(upgrade, Upgrade) else Upgrade.parse(upgrade)


class HostState:
    """One (host, check)'s place in the buckets and its run of fast answers.

    ``index``: the bucket (0 = fastest); ``fast``: fast-enough answers in a row;
    ``count``: how many it takes to move up now; ``since``: when the first of those was
    due (for ``time:``); ``down``: the last poll found no connection; ``moves``: bucket
    changes so far.
    """

    __slots__ = ("buckets", "index", "fast", "count", "since", "down", "moves")

    def __init__(self, buckets: Buckets, index: int = 0) -> None:
        self.buckets = buckets
        self.index = index
        self.fast = 0
        self.count = buckets.upgrade.minimum
        self.since: Optional[float] = None
        self.down = False
        self.moves = 0

    @property
    def interval(self) -> float:
        """The interval of the bucket the host is in."""
        return self.buckets.intervals[self.index]

    def observe(self, response_time: Optional[float], ok: bool, down: bool = False,
                at: Optional[float] = None) -> bool:
        """Apply one poll's outcome (``ok``: it answered in time and successfully;
        ``down``: there was no connection; ``at``: when the poll was due, in seconds on any
        clock, which the ``time:`` rule needs). Returns whether the host changed bucket."""
        self.down = down
        if not self.buckets.adaptive:
            return False
        last = len(self.buckets.intervals) - 1
        if down and self.index < last:
            return self._move_to(last, downgrade=True)
        if down or not ok or response_time is None or response_time > self.interval:
            if self.index < last:
                return self._move_to(self.index + 1, downgrade=True)
            self._stay_slow()  # already in the slowest bucket: slow all the same
            return False
        if self.index == 0:
            self._restart_run()  # nowhere faster to go
            return False
        if response_time <= self.buckets.intervals[self.index - 1]:
            self.fast += 1
            if self._earned(at):
                return self._move_to(self.index - 1, downgrade=False)
            return False
        self._stay_slow()
        return False

    def _earned(self, at: Optional[float]) -> bool:
        """After one more fast answer: has the run earned the upgrade?"""
        seconds = self.buckets.upgrade.seconds
        if seconds is None:
            return self.fast >= self.count
        if at is None:
            raise ValueError("the time: upgrade rule needs each poll's time (observe(at=...))")
        if self.since is None:
            self.since = at
        return at - self.since >= seconds - _CLOCK_SLACK

    def _restart_run(self) -> None:
        self.fast = 0
        self.since = None

    def _stay_slow(self) -> None:
        self._restart_run()
        upgrade = self.buckets.upgrade
        if upgrade.dynamic:
            self.count = min(upgrade.maximum, self.count + 1)

    def _move_to(self, index: int, downgrade: bool) -> bool:
        self._restart_run()
        if downgrade and self.buckets.upgrade.dynamic:
            self.count = self.buckets.upgrade.minimum
        if index == self.index:
            return False
        self.index = index
        self.moves += 1
        return True

    def __repr__(self) -> str:
        return (f"HostState(bucket={self.interval:g}s, fast={self.fast}, count={self.count}, "
                f"down={self.down})")


def spread(count: int, interval: float, jitter: Iterable[float]) -> list:
    """Offsets (s) for ``count`` first polls spread evenly over ``interval``, each
    shifted within its slot by the next ``jitter`` value (in [0, 1))."""
    slot = interval / max(count, 1)
    return [slot * (i + j) for i, j in zip(range(count), jitter)]


__all__ = ["Buckets", "HostState", "Upgrade", "parse_duration", "spread"]
