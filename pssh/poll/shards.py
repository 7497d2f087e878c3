"""Polling scaled out: the hosts partitioned over worker processes (``processes=N``) or
Dask workers (``scheduler=``), each shard a :class:`~pssh.poll.poller.Poller` of its own
(the "poll" job of :mod:`pssh.fanout`, :mod:`pssh.fanout.poll`).

Each shard keeps its own hosts' bucket state for the whole run (a host never changes
shard). Results and health reports come back to this process, which writes them to
*its* sinks: one place buffers, counts drops and flushes at the end, standard output
is written by one process only (no interleaved lines), and a database sees one writer
per run. A shard sends what its poller gives in batches and holds a bounded backlog
while this process is not reading (see :mod:`pssh.fanout.poll`). The health written is
the fleet's: the shards' latest reports added up, with this process's sinks' drops and
backlog.

Stopping (:meth:`ShardedPoller.stop`, e.g. on SIGTERM) asks every shard to end: it
stops its poller (closing its sessions), sends what it still holds and exits; a shard
that does not within half of the ShardedPoller's ``stop_timeout`` (by default
:data:`STOP_TIMEOUT`) is killed when the transport's ``with`` scope ends. Signals in
the workers: :mod:`pssh.fanout.signals`. A worker whose parent disappears stops too.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import gevent
from gevent.event import Event

from pssh.fanout.groups import group_for
from pssh.fanout.poll import FORWARD_BOUND, FORWARD_INTERVAL, ShardSpec, portable_checks
from pssh.poll.buckets import Buckets, HostState
from pssh.poll.checks import Check
from pssh.poll.results import Health, PollResult

log = logging.getLogger("pssh.poll.shards")

#: Seconds a stopped shard gets to close its sessions and send what it holds, and then
#: the sinks to send theirs, unless ``ShardedPoller(stop_timeout=...)`` says otherwise.
STOP_TIMEOUT = 20.0
#: The longest delay (s) before a worker process that died is started again.
RESTART_MAX = 30.0
#: Seconds a shard that has said it ended gets to exit before it is killed.
EXIT_GRACE = 5.0
#: The job each shard runs.
JOB = "pssh.fanout.poll:serve"


def partition(count: int, shards: int) -> List[List[int]]:
    """Host indices dealt over ``shards`` shards in turn (neighbours in a host list, often
    one rack or site, spread over the shards); never an empty shard."""
    shards = max(1, min(shards, count))
    return [list(range(start, count, shards)) for start in range(shards)]


class _Shards:
    """The shards of a run, as workers of ``group`` (a transport's scope). A shard gone
    without a word (killed, out of memory, a crash) is started again if ``restart``
    says so, after a delay that doubles up to :data:`RESTART_MAX` seconds: its hosts are
    polled again, from the fastest bucket; otherwise it is an error. ``ended`` is set
    once every shard has ended for good (told to stop, or unable to start)."""

    def __init__(self, group: Any, specs: List[ShardSpec], deliver: Callable[[tuple], None],
                 restart: bool) -> None:
        self.group = group
        self.specs = {spec.number: spec for spec in specs}
        self.deliver = deliver
        self.restart = restart
        self.workers: Dict[int, Any] = {}
        self.said: Set[int] = set()  # shards that said "ended" or "error"
        self.running = set(self.specs)
        self.delays = {number: 1.0 for number in self.specs}
        self.ended = Event()
        self.stopping = False
        for number in self.specs:
            self._start(number)

    def _start(self, number: int) -> None:
        self.said.discard(number)
        self.workers[number] = self.group.start(
            f"shard {number}", JOB, self.specs[number],
            lambda message: self._message(number, message), lambda why: self._gone(number, why))

    def _message(self, number: int, message: tuple) -> None:
        if message[0] in ("ended", "error"):
            self.said.add(number)
        self.deliver(message)

    def _gone(self, number: int, why: str) -> None:
        if number not in self.said and not self.stopping:
            pid = getattr(self.workers[number], "pid", None)
            lost = f"worker process {pid} {why}" if pid is not None else why
            if self.restart:
                gevent.spawn(self._start_again, number, lost)
                return
            self.deliver(("error", number, lost))
        self._ended(number)

    def _ended(self, number: int) -> None:
        self.running.discard(number)
        if not self.running:
            self.ended.set()

    def _start_again(self, number: int, lost: str) -> None:
        delay = self.delays[number]
        log.warning("shard %d: %s; started again in %g s (its hosts start again in the "
                    "fastest bucket)", number, lost, delay)
        gevent.sleep(delay)
        if self.stopping:
            return self._ended(number)
        self.delays[number] = min(RESTART_MAX, delay * 2)
        self.deliver(("restarted", number))
        self._start(number)

    def stop(self) -> None:
        self.stopping = True
        for worker in self.workers.values():
            worker.ask_to_end()


# -- the parent -----------------------------------------------------------------------

@dataclass
class _Cumulative:
    """The health counters that count since the start, added up over reports."""

    polls: int = 0
    late: int = 0
    skipped: int = 0
    reconnects: int = 0
    dropped: int = 0
    polls_ok: int = 0
    polls_failed: int = 0
    polls_timeout: int = 0
    polls_down: int = 0

    def add(self, report: Health) -> None:
        self.polls += report.polls
        self.polls_ok += report.polls_ok
        self.polls_failed += report.polls_failed
        self.polls_timeout += report.polls_timeout
        self.polls_down += report.polls_down
        self.late += report.late
        self.skipped += report.skipped
        self.reconnects += report.reconnects
        self.dropped += report.dropped


class ShardedPoller:
    """A :class:`~pssh.poll.poller.Poller` whose hosts are partitioned over ``processes``
    worker processes (a number, or ``"auto"``: one per core) or the Dask cluster
    ``scheduler`` (an address, ``"local:N"``, or a ``distributed.Client``; one shard per
    worker thread). Same arguments and methods as the Poller; the results and health
    reach this process's ``sinks``, ``on_result`` and ``on_health``.

    Per-host ``host_config``, ``ssh_config`` and the other connection settings go to the
    shards as given (pickled): key files and known_hosts are read where the shard
    runs. ``stop_timeout``: how long stopping may take, as the Poller's: the shards get
    half of it (their polls in flight, then their sessions closed; a shard still running
    after that is killed), the sinks the rest (at least a second) to send what they hold.
    """

    def __init__(self, hosts: Sequence[str], checks: Sequence[Check], *,
                 processes: Union[int, str, None] = None, scheduler: Any = None,
                 buckets: Optional[Buckets] = None, sinks: Sequence[Any] = (),
                 on_result: Optional[Callable[[PollResult], None]] = None,
                 on_health: Optional[Callable[[Health], None]] = None,
                 health_interval: float = 10.0, workers_per_bucket: Optional[int] = None,
                 host_config: Optional[Sequence[Any]] = None,
                 stop_timeout: float = 2 * STOP_TIMEOUT, **connect_settings: Any) -> None:
        if (processes is None) == (scheduler is None):
            raise ValueError("ShardedPoller needs processes=N or scheduler=..., not both")
        if stop_timeout <= 0:
            raise ValueError("stop_timeout must be positive")
        self.hosts = list(hosts)
        if not self.hosts or not checks:
            raise ValueError("ShardedPoller needs hosts and checks")
        if host_config is not None and len(host_config) != len(self.hosts):
            raise ValueError(f"host_config has {len(host_config)} entries for "
                             f"{len(self.hosts)} hosts")
        self.sinks = list(sinks)
        self.on_result = on_result
        self.on_health = on_health
        self.health_interval = health_interval
        self.stop_timeout = stop_timeout
        self._stop_deadline: Optional[float] = None
        self._checks = portable_checks(checks)
        self._buckets = buckets if buckets is not None else Buckets()
        self._workers = workers_per_bucket
        self._host_config = list(host_config) if host_config is not None else None
        self._settings = connect_settings
        self.processes, self.scheduler = processes, scheduler
        self._latest: Dict[int, Health] = {}
        # What shards that died had counted (their successors count from zero): the
        # fleet's cumulative counters must not go down when a worker is started again.
        self._counted_before = _Cumulative()
        self._states: Dict[Tuple[str, str], HostState] = {}
        self._outbox_dropped: Dict[int, int] = {}
        #: Shard number of each host (known once :meth:`run` has started).
        self.shard_of: Dict[str, int] = {}
        #: Why shards failed, if any did ("shard N: ...").
        self.errors: List[str] = []
        self._shards: Any = None
        self._stop = Event()
        self._running = False
        self._closed = False

    def _specs(self, count: int, level: Optional[int]) -> List[ShardSpec]:
        specs = []
        for number, indices in enumerate(partition(len(self.hosts), count)):
            settings = dict(self._settings, stop_timeout=self.stop_timeout / 2)
            if self._host_config is not None:
                settings["host_config"] = [self._host_config[i] for i in indices]
            hosts = [self.hosts[i] for i in indices]
            for host in hosts:
                self.shard_of[host] = number
            specs.append(ShardSpec(number, hosts, self._checks, self._buckets,
                                   self.health_interval, self._workers, settings,
                                   log_level=level))
        return specs

    def run(self, duration: Optional[float] = None) -> None:
        """Start the shards and poll until ``duration`` seconds have passed, :meth:`stop`
        is called or every shard has ended; then stop the shards (each closes its
        sessions and sends what it holds; one that does not within half of
        ``stop_timeout`` is killed), write the last health, flush and close the sinks
        (within the rest of ``stop_timeout``)."""
        if self._running or self._closed:
            raise RuntimeError("this ShardedPoller has run already (or is running)")
        self._running = True
        reporter = None
        try:
            if self._stop.is_set():
                return
            group, count, restart = self._group()
            with group:
                # A worker process logs to its stderr at this process's level; a Dask
                # worker's logging is its own.
                level = logging.getLogger("pssh").getEffectiveLevel() if restart else None
                self._shards = _Shards(group, self._specs(count, level), self._deliver,
                                       restart)
                try:
                    reporter = gevent.spawn(self._report_health)
                    self._poll(duration)
                finally:  # the scope's end kills what is still running: no restarts
                    self._shards.stopping = True
        finally:
            if reporter is not None:
                reporter.kill()
            self._finish()

    def _poll(self, duration: Optional[float]) -> None:
        gevent.wait([self._stop, self._shards.ended], timeout=duration, count=1)
        self._stop_deadline = time.monotonic() + self.stop_timeout
        self._shards.stop()
        if self._shards.ended.wait(self.stop_timeout / 2):
            # Every shard has said it ended: all that is left is its process exiting, which
            # may take a moment more. Without this grace the scope's end would kill a
            # shard that is already done, and warn about it on every run.
            self._shards.group.close_timeout = EXIT_GRACE
        else:
            log.warning("shards still running %s s after they were told to stop: "
                        "killed", self.stop_timeout / 2)

    def _group(self) -> Tuple[Any, int, bool]:
        """(the transport's group, how many shards, whether a shard that dies starts
        again): worker processes, or tasks on the Dask cluster (one per worker thread;
        Dask itself runs a task again when its worker is lost)."""
        # Shards are killed as the scope ends: they had their time (see _poll).
        workers = group_for(self.processes, self.scheduler, close_timeout=0)
        return workers.group, workers.count(len(self.hosts)), workers.own_process

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._write_health(self.health())
        deadline = self._stop_deadline or time.monotonic() + self.stop_timeout / 2
        for sink in self.sinks:
            try:
                sink.flush(max(1.0, deadline - time.monotonic()))
                sink.close(max(1.0, deadline - time.monotonic()))
            except Exception:
                log.exception("sink %r failed to flush or close", sink)

    def stop(self) -> None:
        """End the run (safe from a signal handler's greenlet; it never waits): :meth:`run`
        stops the shards, flushes and closes the sinks, and returns. Called when no run
        is going on, it closes the sinks itself."""
        self._stop.set()
        if not self._running:
            self._finish()

    def _deliver(self, message: tuple) -> None:
        kind, number, *rest = message
        if kind == "items":
            for item in rest[0]:
                if isinstance(item, Health):
                    self._latest[number] = item
                    continue
                for sink in self.sinks:
                    sink.write(item)
                if self.on_result is not None:
                    self.on_result(item)
        elif kind == "ended":
            self._states.update(rest[0])
            self._outbox_dropped[number] = rest[1]
        elif kind == "restarted":
            last = self._latest.pop(number, None)
            if last is not None:
                self._counted_before.add(last)
        elif kind == "error":
            self.errors.append(f"shard {number}: {rest[0]}")
            log.error("shard %d: %s", number, rest[0])

    def _report_health(self) -> None:
        while True:
            gevent.sleep(self.health_interval)
            self._write_health(self.health())

    def _write_health(self, health: Health) -> None:
        for sink in self.sinks:
            sink.write(health)
        if self.on_health is not None:
            self.on_health(health)

    def health(self) -> Health:
        """The fleet's health: every shard's latest report added up, with this process's
        sinks' drops and backlog."""
        reports = list(self._latest.values())
        buckets: Dict[float, int] = {}
        for report in reports:
            for interval, count in report.hosts_per_bucket.items():
                buckets[interval] = buckets.get(interval, 0) + count
        counted = replace(self._counted_before)
        for report in reports:
            counted.add(report)
        return Health(time=time.time(), polls=counted.polls,
                      polls_per_s=sum(r.polls_per_s for r in reports),
                      late=counted.late, skipped=counted.skipped,
                      late_max=max((r.late_max for r in reports), default=0.0),
                      hosts_per_bucket=buckets, hosts_down=sum(r.hosts_down for r in reports),
                      reconnects=counted.reconnects,
                      dropped=counted.dropped + sum(s.dropped for s in self.sinks),
                      buffered=sum(r.buffered for r in reports)
                      + sum(s.buffered for s in self.sinks),
                      in_flight=sum(r.in_flight for r in reports),
                      polls_ok=counted.polls_ok, polls_failed=counted.polls_failed,
                      polls_timeout=counted.polls_timeout, polls_down=counted.polls_down)

    @property
    def skipped(self) -> int:
        """Rounds the shards skipped (see :attr:`Poller.skipped`), as they last reported."""
        return self.health().skipped

    def states(self) -> Dict[Tuple[str, str], HostState]:
        """Bucket state per (host, check), as the shards had it when they ended."""
        return dict(self._states)


__all__ = ["ShardedPoller", "ShardSpec", "partition", "FORWARD_INTERVAL", "FORWARD_BOUND",
           "STOP_TIMEOUT", "RESTART_MAX"]
