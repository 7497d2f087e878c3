"""The poller's own metrics: counters kept as polls end, read into :class:`Health`.

Only counters and maxima: nothing grows with the number of polls, so a poller that runs
for months keeps the same memory. Times are the core's clock (:mod:`pssh.core.clock`),
virtual when the poller runs on virtual time.
"""
from __future__ import annotations

from typing import Dict, Iterable

from pssh.core import clock
from pssh.poll.results import STATUSES, Health, PollResult

#: A poll is late when it started more than this fraction of its bucket's interval after
#: it was due (a busy pool, a host's other check still running, a busy hub).
LATE_FRACTION = 0.1


class HealthCounters:
    """Counts polls, late polls, skipped rounds and reconnects; :meth:`snapshot` makes a
    :class:`Health`."""

    def __init__(self) -> None:
        self.polls = 0
        self.late = 0
        self.reconnects = 0
        self.skipped = 0
        self.by_status: Dict[str, int] = {}
        self._late_max = 0.0
        self._period_polls = 0
        self._period_start = clock.now()

    def restart(self) -> None:
        """A new period starts now (the first when the run starts: on the runner's
        clock, which for a virtual one counts from its own zero)."""
        self._period_polls = 0
        self._late_max = 0.0
        self._period_start = clock.now()

    def count(self, result: PollResult) -> None:
        """One finished poll."""
        self.polls += 1
        self._period_polls += 1
        self.by_status[result.status] = self.by_status.get(result.status, 0) + 1
        late = result.late
        if late > LATE_FRACTION * result.bucket:
            self.late += 1
        if late > self._late_max:
            self._late_max = late

    def snapshot(self, hosts_per_bucket: Dict[float, int], hosts_down: int,
                 sinks: Iterable[object], in_flight: int, new_period: bool = True) -> Health:
        """The metrics now; with ``new_period`` the next period (of ``polls_per_s`` and
        ``late_max``) starts."""
        now = clock.now()
        elapsed = max(now - self._period_start, 1e-9)
        dropped = buffered = 0
        for sink in sinks:
            dropped += int(getattr(sink, "dropped", 0) or 0)
            buffered += int(getattr(sink, "buffered", 0) or 0)
        health = Health(time=clock.wall(), polls=self.polls,
                        polls_per_s=self._period_polls / elapsed, late=self.late,
                        late_max=self._late_max, hosts_per_bucket=dict(hosts_per_bucket),
                        hosts_down=hosts_down, reconnects=self.reconnects, dropped=dropped,
                        buffered=buffered, in_flight=in_flight, skipped=self.skipped,
                        **{f"polls_{status}": self.by_status.get(status, 0)
                           for status in STATUSES})
        if new_period:
            self.restart()
        return health


__all__ = ["HealthCounters", "LATE_FRACTION"]
