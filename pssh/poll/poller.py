"""The poller: every check on every host at its bucket's interval, on gevent.

Each bucket (a polling interval) has its own schedule (a heap of due polls) and its
own worker pool. A (host, check) pair is due every interval of the bucket it is in;
after each poll :meth:`~pssh.poll.buckets.HostState.observe` may move it to another
bucket, whose schedule then takes it. First polls are spread evenly, with jitter, over
the first interval (no thundering herd). A host's checks share its one connection
(:class:`~pssh.poll.sessions.HostSession`) and take turns on it: never two polls of
one host in flight. A poll waiting for a pool worker or for its host's other check
starts late; late polls are counted (:class:`~pssh.poll.results.Health`).

Memory stays flat: per (host, check) one schedule entry and its bucket state; results
go to ``on_result`` and the sinks as they come and are not kept.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math
import random
import resource
import time
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import gevent
from gevent.event import Event
from gevent.pool import Pool

from pssh.clients.base.parallel import raise_open_file_limit
from pssh.clients.native.jump import JumpHosts
from pssh.config import HostConfig
from pssh.options import ConnectOptions, ssh_config_of
from pssh.poll.buckets import Buckets, HostState, spread
from pssh.poll.checks import Check
from pssh.poll.health import HealthCounters
from pssh.poll.results import DOWN, FAILED, OK, TIMEOUT, Health, PollResult, Value
from pssh.poll.sessions import Backoff, HostDown, HostSession, PollTimeout, reason_of
from pssh.ssh_config import SSHConfig

if TYPE_CHECKING:  # the sinks (HTTP clients) load when a program makes one
    from pssh.poll.sinks import Sink

log = logging.getLogger("pssh.poll")

_SETTINGS = {f.name for f in fields(ConnectOptions)}
#: Seconds allowed to connect (resolve, handshake, log in) when neither ``timeout`` nor
#: ``connect_timeout`` is given: a poller should not hold a slot for the client's 120 s.
DEFAULT_CONNECT_TIMEOUT = 10.0


class _Entry:
    """One (host, check): its session, its bucket state, when it is next due."""

    __slots__ = ("session", "check", "state")

    def __init__(self, session: HostSession, check: Check, state: HostState) -> None:
        self.session = session
        self.check = check
        self.state = state


class _Bucket:
    """One interval's schedule (a heap of ``(due, seq, entry)``) and worker pool."""

    def __init__(self, interval: float, workers: int) -> None:
        self.interval = interval
        self.heap: List[Tuple[float, int, _Entry]] = []
        self.pool = Pool(size=workers)
        self.wake = Event()

    def push(self, due: float, seq: int, entry: _Entry) -> None:
        heapq.heappush(self.heap, (due, seq, entry))
        if self.heap[0][2] is entry:
            self.wake.set()  # due before what the scheduler sleeps for


class Poller:
    """Polls ``checks`` on ``hosts`` over one persistent SSH connection per host.

    ``buckets``: the polling intervals and upgrade rule (a check may bring its own);
    ``sinks``: objects with ``write``/``flush``/``close`` (:mod:`pssh.poll.sinks`) that
    get every :class:`PollResult` and :class:`Health`; ``on_result`` / ``on_health``:
    called with each as well. ``health_interval``: seconds between health reports.
    ``workers_per_bucket``: each bucket's pool size (default: every (host, check) may
    poll at once; smaller pools make polls late when they are full).
    ``reconnect_delay`` / ``reconnect_max``: the backoff between connection attempts
    (default up to the slowest interval). ``stop_timeout``: how long stopping may take
    (polls in flight get half of it at most, the sinks' flush the rest). ``seed``: the
    jitter's random seed. ``timeout`` (parallel-ssh's) limits connecting and logging in;
    each poll is bounded by its check's deadline.

    Connection settings are :class:`~pssh.clients.ParallelSSHClient`'s (``user``,
    ``port``, ``pkey``, ``password``, ``host_config``, ``known_hosts``, ``ssh_config``,
    ``proxy_*``, ``keepalive_seconds``, ``timeout``, ``num_retries`` ...), passed
    through to each host's :class:`~pssh.clients.SSHClient`; the poller's defaults
    differ in ``num_retries=1`` (it retries by itself, with backoff) and a connect
    timeout of :data:`DEFAULT_CONNECT_TIMEOUT` s.
    """

    def __init__(self, hosts: Sequence[str], checks: Sequence[Check], *,
                 buckets: Optional[Buckets] = None, sinks: Sequence["Sink"] = (),
                 on_result: Optional[Callable[[PollResult], None]] = None,
                 on_health: Optional[Callable[[Health], None]] = None,
                 health_interval: float = 10.0, workers_per_bucket: Optional[int] = None,
                 host_config: Optional[List[HostConfig]] = None,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 reconnect_delay: float = 1.0, reconnect_max: Optional[float] = None,
                 stop_timeout: float = 10.0, seed: Optional[int] = None,
                 encoding: str = "utf-8", **connect_settings) -> None:
        if isinstance(hosts, (str, bytes)):
            raise TypeError("hosts must be a list of host names, not a string")
        self.hosts = list(hosts)
        self.checks = list(checks)
        if not self.hosts or not self.checks:
            raise ValueError("a poller needs at least one host and one check")
        _unique("host", self.hosts)
        _unique("check name", [c.name for c in self.checks])
        if host_config is not None and len(host_config) != len(self.hosts):
            raise ValueError(f"host_config has {len(host_config)} entries for "
                             f"{len(self.hosts)} hosts")
        if health_interval <= 0:
            raise ValueError("health_interval must be positive")
        self.buckets = buckets or Buckets()
        self.sinks = list(sinks)
        self.on_result = on_result
        self.on_health = on_health
        self.health_interval = health_interval
        self.stop_timeout = stop_timeout
        self.encoding = encoding
        self._rng = random.Random(seed)
        options = _options_of(connect_settings)
        config = ssh_config_of(ssh_config)  # parsed once for every host
        self._jumps = JumpHosts()
        slowest = max(b.slowest for b in self._all_buckets())
        self.sessions: Dict[str, HostSession] = {}
        for i, host in enumerate(self.hosts):
            host_options = host_config[i].options().over(options) if host_config else options
            backoff = Backoff(reconnect_delay, max(reconnect_delay, reconnect_max or slowest),
                              rng=self._rng.random)
            self.sessions[host] = HostSession(host, host_options, ssh_config=config or False,
                                              jumps=self._jumps, backoff=backoff)
        self._entries = [_Entry(self.sessions[host], check,
                                (check.buckets or self.buckets).state())
                         for host in self.hosts for check in self.checks]
        pool_size = workers_per_bucket or len(self._entries)
        self._buckets: Dict[float, _Bucket] = {
            interval: _Bucket(interval, pool_size)
            for interval in sorted({i for b in self._all_buckets() for i in b.intervals})}
        self._seq = itertools.count()
        self._counters = HealthCounters()
        self._in_flight = 0
        self.sink_errors = 0
        self._stop = Event()
        self._running = False
        self._closed = False
        self._offset = time.time() - time.monotonic()  # monotonic -> wall clock
        _enough_files(len(self.hosts) + 64)

    def _all_buckets(self) -> List[Buckets]:
        return [self.buckets, *(c.buckets for c in self.checks if c.buckets is not None)]

    # -- running -------------------------------------------------------------------------

    def run(self, duration: Optional[float] = None) -> None:
        """Poll until ``duration`` seconds have passed or :meth:`stop` is called, then
        finish: wait for polls in flight (up to half of ``stop_timeout``), flush and close the
        sinks, close every connection. Blocks this greenlet; the hub runs the polls."""
        if self._closed or self._running:
            raise RuntimeError("this Poller has run already (or is running): make a new one")
        self._running = True
        greenlets = []
        try:
            self._schedule_first()
            greenlets = [gevent.spawn(self._schedule, b) for b in self._buckets.values()]
            greenlets.append(gevent.spawn(self._report_health))
            self._stop.wait(duration)
        finally:
            gevent.killall(greenlets)
            self._finish()

    def _schedule_first(self) -> None:
        """Every (host, check) in its fastest bucket, first polls spread over its interval."""
        now = time.monotonic()
        by_interval: Dict[float, List[_Entry]] = {}
        for entry in self._entries:
            by_interval.setdefault(entry.state.interval, []).append(entry)
        for interval, entries in by_interval.items():
            offsets = spread(len(entries), interval, iter(self._rng.random, None))
            for entry, offset in zip(entries, offsets):
                self._buckets[interval].push(now + offset, next(self._seq), entry)

    def _schedule(self, bucket: _Bucket) -> None:
        """Start each due poll in the bucket's pool (waiting for a free worker when full)."""
        while not self._stop.is_set():
            if bucket.heap:
                wait = bucket.heap[0][0] - time.monotonic()
                if wait <= 0:
                    due, _, entry = heapq.heappop(bucket.heap)
                    bucket.pool.spawn(self._poll, entry, due, bucket.interval)
                    continue
            else:
                wait = None
            bucket.wake.clear()
            bucket.wake.wait(wait)

    def _poll(self, entry: _Entry, due: float, interval: float) -> None:
        self._in_flight += 1
        try:
            with entry.session.lock:  # the host's other checks take turns
                if self._stop.is_set():
                    return
                result = self._run_check(entry, due, interval)
            entry.state.observe(result.response_time, result.status == OK,
                                down=result.status == DOWN, at=result.time)
            self._emit(result)
        except Exception:  # a bug here must not take the pair off the schedule
            log.exception("%s: poll of check %s failed", entry.session.host, entry.check.name)
        finally:
            self._in_flight -= 1
            self._reschedule(entry, due)

    def _run_check(self, entry: _Entry, due: float, interval: float) -> PollResult:
        session, check = entry.session, entry.check
        started = time.monotonic()
        values: Dict[str, Value] = {}
        error: Optional[str] = None
        exit_code: Optional[int] = None
        response_time: Optional[float] = None
        deadline = check.deadline(interval)
        try:
            output = session.run(check.command, deadline, self.encoding)
        except HostDown as err:
            status, error = DOWN, str(err)
        except PollTimeout as err:
            # The command's time is its deadline: what closing its channel took after that
            # (the server may wait for the command to end) is not the host's answer.
            status, error, response_time = TIMEOUT, str(err), deadline
        except Exception as err:  # any other failure is this host's, said as such
            status, error = FAILED, f"{session.host}:{session.port}: {reason_of(err)}"
            log.debug("%s: check %s failed", session.host, check.name, exc_info=True)
        else:
            response_time, exit_code = output.response_time, output.exit_code
            status, values, error = self._parse(entry, output.stdout, output.stderr, exit_code)
        if response_time is None:
            response_time = time.monotonic() - started
        return PollResult(host=session.host, port=session.port, check=check.name,
                          values=values, time=due + self._offset,
                          started=started + self._offset, response_time=response_time,
                          bucket=interval, status=status, error=error, exit_code=exit_code)

    @staticmethod
    def _parse(entry: _Entry, stdout: str, stderr: str,
               exit_code: Optional[int]) -> Tuple[str, Dict[str, Value], Optional[str]]:
        where = f"{entry.session.host}:{entry.session.port}: check {entry.check.name}"
        if exit_code != 0:
            said = stderr.strip()[-200:] or stdout.strip()[-200:]
            return FAILED, {}, f"{where}: exit status {exit_code}: {said}"
        try:
            return OK, dict(entry.check.parser(stdout)), None
        except Exception as err:  # a parser's ValueError, or a user parser's bug
            return FAILED, {}, f"{where}: cannot parse the output: {err}"

    def _reschedule(self, entry: _Entry, due: float) -> None:
        """Due again one interval (of its bucket now) after it was last due; a pair
        that fell a whole interval or more behind skips those rounds (counted)."""
        if self._stop.is_set():
            return
        interval = entry.state.interval
        next_due = due + interval
        behind = time.monotonic() - next_due
        if behind >= interval:
            rounds = math.floor(behind / interval)
            next_due += rounds * interval
            self._counters.skipped += rounds
        self._buckets[interval].push(next_due, next(self._seq), entry)

    def _emit(self, item: Union[PollResult, Health]) -> None:
        # The callback for item's type (each takes its own; Any joins the two).
        callback: Optional[Callable[[Any], None]] = self.on_health
        if isinstance(item, PollResult):
            self._counters.count(item)
            callback = self.on_result
        if callback is not None:
            try:
                callback(item)
            except Exception:
                log.exception("the %s callback failed", type(item).__name__)
        for sink in self.sinks:
            try:
                sink.write(item)
            except Exception:
                self.sink_errors += 1
                log.exception("sink %r failed to take a %s", sink, type(item).__name__)

    def _report_health(self) -> None:
        while not self._stop.wait(self.health_interval):
            # The wall clock may be stepped or slewed (NTP) during a long run: the
            # results' times follow it from here on; the schedule stays monotonic.
            self._offset = time.time() - time.monotonic()
            self._emit(self._health(new_period=True))

    # -- state ---------------------------------------------------------------------------

    def states(self) -> Dict[Tuple[str, str], HostState]:
        """Bucket state per (host, check name) (live objects: read, do not change)."""
        return {(e.session.host, e.check.name): e.state for e in self._entries}

    def health(self) -> Health:
        """The poller's metrics now (see :class:`Health`)."""
        return self._health(new_period=False)

    def _health(self, new_period: bool) -> Health:
        per_bucket = dict.fromkeys(self._buckets, 0)
        down_hosts = set()
        for entry in self._entries:
            per_bucket[entry.state.interval] += 1
            if entry.state.down:
                down_hosts.add(entry.session.host)
        self._counters.reconnects = sum(max(0, s.connects - 1)
                                        for s in self.sessions.values())
        return self._counters.snapshot(per_bucket, len(down_hosts), self.sinks,
                                       self._in_flight, new_period=new_period)

    @property
    def skipped(self) -> int:
        """Rounds not polled because a (host, check) fell a whole interval or more behind
        (each such pair is due again on its schedule, not once per missed round)."""
        return self._counters.skipped

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- stopping ------------------------------------------------------------------------

    def stop(self) -> None:
        """End the run: safe from a signal handler or another greenlet (it never waits).

        While :meth:`run` runs, it returns after finishing (polls in flight get up to half
        of ``stop_timeout``; the sinks are flushed and closed; every connection is
        closed). Called when no run is going on, it does that finishing itself.
        """
        self._stop.set()
        for bucket in self._buckets.values():
            bucket.wake.set()
        if not self._running and not self._closed:
            self._finish()

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        deadline = time.monotonic() + self.stop_timeout
        # Polls in flight get half of the time at most: a hung host's poll must not use
        # up what the sinks need to flush (after an outage their buffers are full).
        polls_deadline = time.monotonic() + self.stop_timeout / 2
        for bucket in self._buckets.values():
            bucket.pool.join(timeout=max(0.0, polls_deadline - time.monotonic()))
        for bucket in self._buckets.values():
            if len(bucket.pool):
                log.warning("%d polls of the %gs bucket still running after %g s: stopped",
                            len(bucket.pool), bucket.interval, self.stop_timeout / 2)
            bucket.pool.kill(block=True, timeout=2)
        self._emit(self._health(new_period=True))
        for sink in self.sinks:
            try:
                sink.flush(max(1.0, deadline - time.monotonic()))
                sink.close(max(1.0, deadline - time.monotonic()))
            except Exception:
                self.sink_errors += 1
                log.exception("sink %r failed to flush or close", sink)
        for session in self.sessions.values():
            session.close()
        self._jumps.close()
        self._running = False
        log.info("poller stopped: %d polls", self._counters.polls)

    def close(self) -> None:
        """Same as :meth:`stop` when not running: close sinks and connections."""
        self.stop()

    def __enter__(self) -> "Poller":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _enough_files(needed: int) -> None:
    """One socket per host (and a few for the rest): raise the open file limit, and say
    so when even the hard limit is too low (those hosts would fail to connect)."""
    raise_open_file_limit(needed)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("the open file limit is %d, under the %d this poller needs (one per "
                    "host): raise it (ulimit -n) or shard the hosts over processes", soft,
                    needed)


def _unique(what: str, names: Sequence[str]) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} {name!r} is given twice")
        seen.add(name)


def _options_of(settings: dict) -> ConnectOptions:
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        raise TypeError(f"Poller got unknown connection settings: {', '.join(unknown)} "
                        f"(known: see pssh.options.ConnectOptions)")
    settings = {k: v for k, v in settings.items() if v is not None}
    settings.setdefault("num_retries", 1)
    # parallel-ssh's ``timeout`` would also bound each request of a poll, below the poll's
    # own deadline (a host slow to start a command would count as lost, not as slow):
    # here it is the connect and login limit only.
    if "timeout" in settings:
        settings.setdefault("connect_timeout", settings.pop("timeout"))
    settings.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    return ConnectOptions(**settings)


__all__ = ["DEFAULT_CONNECT_TIMEOUT", "Poller"]
