"""What a poll gives: one :class:`PollResult` per (host, check) round, and the poller's own
:class:`Health` metrics. Plain frozen data: sinks, the command line and shards pass them on."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Union

#: A parsed value: numbers, strings and booleans, as metrics stores take them.
Value = Union[float, int, str, bool]

#: PollResult.status values.
OK, FAILED, TIMEOUT, DOWN = "ok", "failed", "timeout", "down"
STATUSES = (OK, FAILED, TIMEOUT, DOWN)


@dataclass(frozen=True)
class PollResult:
    """One poll of one check on one host.

    ``time`` is when the poll was due (wall clock, epoch seconds), ``started`` when it
    really started: ``late`` is the difference. ``status`` is ``"ok"`` (``values`` holds
    the parsed output), ``"failed"`` (the command exited non-zero or its output did not
    parse), ``"timeout"`` (no answer within the check's deadline) or ``"down"`` (no
    connection to the host); ``error`` then names ``host:port`` and the cause.
    """

    host: str
    port: int
    check: str
    values: Dict[str, Value]
    time: float
    started: float
    response_time: float
    bucket: float
    status: str
    error: Optional[str] = None
    exit_code: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def late(self) -> float:
        """Seconds the poll started after it was due (never negative)."""
        return max(0.0, self.started - self.time)


@dataclass(frozen=True)
class Health:
    """The poller's own metrics at ``time`` (emitted every ``health_interval`` seconds).

    Cumulative since the start: ``polls``, of which ``polls_ok``, ``polls_failed``,
    ``polls_timeout`` and ``polls_down`` by :attr:`PollResult.status`, ``late`` (polls
    that started more than a tenth of their bucket's interval after they were due),
    ``skipped`` (rounds not polled because their (host, check) fell a whole interval or
    more behind), ``reconnects``,
    ``dropped`` (points the sinks dropped). Over the last health interval: ``polls_per_s``,
    ``late_max`` (seconds). Now: ``hosts_per_bucket`` ({interval: (host, check) pairs in
    it}), ``hosts_down``, ``buffered`` (points waiting in sinks), ``in_flight`` (polls
    running).
    """

    time: float
    polls: int
    polls_per_s: float
    late: int
    late_max: float
    hosts_per_bucket: Dict[float, int] = field(default_factory=dict)
    hosts_down: int = 0
    reconnects: int = 0
    dropped: int = 0
    buffered: int = 0
    in_flight: int = 0
    skipped: int = 0
    polls_ok: int = 0
    polls_failed: int = 0
    polls_timeout: int = 0
    polls_down: int = 0


__all__ = ["DOWN", "FAILED", "Health", "OK", "PollResult", "STATUSES", "TIMEOUT", "Value"]
