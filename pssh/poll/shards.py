"""Polling scaled out: the hosts partitioned over worker processes (``processes=N``) or
Dask workers (``scheduler=``), each shard a :class:`~pssh.poll.poller.Poller` of its own.

Each shard keeps its own hosts' bucket state for the whole run (a host never changes
shard). Results and health reports come back to this process, which writes them to
*its* sinks: one place buffers, counts drops and flushes at the end, standard output
is written by one process only (no interleaved lines), and a database sees one writer
per run. A shard sends what its poller gives in batches (every
:data:`FORWARD_INTERVAL` seconds) and holds at most :data:`FORWARD_BOUND` of them
while this process is not reading: past that it drops and counts, as a sink does.
The health written is the fleet's: the shards' latest reports added up, with this
process's sinks' drops and backlog.

Stopping (:meth:`ShardedPoller.stop`, e.g. on SIGTERM) asks every shard to stop: it
stops its poller (closing its sessions), sends what it still holds and exits; a shard
that does not within half of the ShardedPoller's ``stop_timeout`` (by default
:data:`STOP_TIMEOUT`) is killed. Worker processes ignore SIGINT
(the parent's to handle) and take SIGTERM (sent to a whole process group by
``timeout``, systemd, CI) as a stop. A worker whose parent disappears stops too.
"""
from __future__ import annotations

import logging
import os
import pickle
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from typing import (Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union)

import gevent
from gevent.event import Event

from pssh.poll.buckets import Buckets, HostState
from pssh.poll.checks import Check
from pssh.poll.results import Health, PollResult

log = logging.getLogger("pssh.poll.shards")

#: Seconds between a shard's batches of results to the parent.
FORWARD_INTERVAL = 0.25
#: The most results and health reports a shard holds while its parent is not reading.
FORWARD_BOUND = 100_000
#: Seconds a stopped shard gets to close its sessions and send what it holds, and then
#: the sinks to send theirs, unless ``ShardedPoller(stop_timeout=...)`` says otherwise.
STOP_TIMEOUT = 20.0
#: The longest delay (s) before a worker process that died is started again.
RESTART_MAX = 30.0


def partition(count: int, shards: int) -> List[List[int]]:
    """Host indices dealt over ``shards`` shards in turn (neighbours in a host list, often
    one rack or site, spread over the shards); never an empty shard."""
    shards = max(1, min(shards, count))
    return [list(range(start, count, shards)) for start in range(shards)]


def _portable(checks: Sequence[Check]) -> bytes:
    """The checks pickled for another process; a parser that pickle cannot take (a
    closure, such as ``regex(...)``) goes by value through cloudpickle when installed."""
    try:
        return pickle.dumps(list(checks), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        try:
            import cloudpickle
        except ImportError:
            names = ", ".join(c.name for c in checks)
            raise ValueError(f"checks {names}: a parser cannot be sent to a worker process "
                             f"({err}); use parsers defined at module level, or install "
                             f"cloudpickle") from None
        return cloudpickle.dumps(list(checks), protocol=pickle.HIGHEST_PROTOCOL)


@dataclass
class ShardSpec:
    """What one shard is told: its hosts and everything its poller is made with."""

    number: int
    hosts: List[str]
    checks: bytes  # pickled (see _portable)
    buckets: Buckets
    health_interval: float
    workers_per_bucket: Optional[int]
    settings: Dict[str, Any] = field(default_factory=dict)  # host_config, ssh_config, ...
    duration: Optional[float] = None
    log_level: int = logging.WARNING


class _Outbox:
    """What a shard has for its parent, bounded; drops past the bound are counted."""

    def __init__(self, bound: int = FORWARD_BOUND) -> None:
        self.items: Deque[Union[PollResult, Health]] = deque()
        self.bound = bound
        self.dropped = 0

    def put(self, item: Union[PollResult, Health]) -> None:
        if isinstance(item, Health):  # the shard's drops are the parent's to add up
            item = replace(item, dropped=item.dropped + self.dropped, buffered=len(self.items))
        if len(self.items) >= self.bound:
            if not self.dropped:
                log.warning("the parent is not reading: dropping results")
            self.dropped += 1
            return
        self.items.append(item)

    def take(self) -> List[Union[PollResult, Health]]:
        items = list(self.items)
        self.items.clear()
        return items


def _shard_poller(spec: ShardSpec, outbox: _Outbox):
    from pssh.poll.poller import Poller
    checks = pickle.loads(spec.checks)
    return Poller(spec.hosts, checks, buckets=spec.buckets, on_result=outbox.put,
                  on_health=outbox.put, health_interval=spec.health_interval,
                  workers_per_bucket=spec.workers_per_bucket, **spec.settings)


def _serve_shard(spec: ShardSpec, send: Callable[[tuple], None],
                 stop_requested: Callable[[], bool]) -> None:
    """Run one shard's poller until its duration ends or it is told to stop, sending
    batches through ``send`` (which may wait: it runs in a greenlet of its own)."""
    outbox = _Outbox()
    try:
        poller = _shard_poller(spec, outbox)
    except Exception as err:
        send(("error", spec.number, f"{type(err).__name__}: {err}"))
        return

    def forward() -> None:
        while True:
            gevent.sleep(FORWARD_INTERVAL)
            items = outbox.take()
            if items:
                send(("items", spec.number, items))

    def watch() -> None:
        while not stop_requested():
            gevent.sleep(0.1)
        poller.stop()

    helpers = [gevent.spawn(forward), gevent.spawn(watch)]
    try:
        poller.run(spec.duration)
    finally:
        gevent.killall(helpers)
        items = outbox.take()
        if items:
            send(("items", spec.number, items))
        send(("ended", spec.number, dict(poller.states()), outbox.dropped))


# -- worker processes ---------------------------------------------------------------

def worker_main() -> None:
    """``python -m pssh.poll.shards``: one shard, told what to do on stdin, results out
    on stdout (framed pickles, :mod:`pssh.clients.sharded.frames`)."""
    import signal

    from pssh.fanout.frames import FramedPipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    out = os.dup(1)  # messages on the real stdout; anything printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pipe = FramedPipe(0, out)
    message = pipe.receive()
    if message is None:
        return
    spec: ShardSpec = pickle.loads(message[1])
    logging.basicConfig(level=spec.log_level, stream=sys.stderr,
                        format=f"pssh poll (shard {spec.number}): %(message)s")
    stop = Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)

    def listen() -> None:  # "stop", or the parent gone (end of input): stop
        pipe.receive()
        stop.set()

    listener = gevent.spawn(listen)

    def send(message: tuple) -> None:
        try:
            pipe.send(message)
            pipe.flush()
        except OSError:  # the parent is gone
            stop.set()

    _serve_shard(spec, send, stop.is_set)
    listener.kill()
    pipe.flush()


class _ProcessShard:
    """The parent's handle on one worker process."""

    def __init__(self, spec: ShardSpec, deliver: Callable[[tuple], None]) -> None:
        from gevent import subprocess

        from pssh.fanout.frames import FramedPipe
        from pssh.fanout.process import worker_environment
        self.number = spec.number
        worker_stdin, to_worker = os.pipe()
        from_worker, worker_stdout = os.pipe()
        try:
            self.popen = subprocess.Popen([sys.executable, "-m", "pssh.poll.shards"],
                                          stdin=worker_stdin, stdout=worker_stdout,
                                          env=worker_environment(), close_fds=True)
        except BaseException:
            os.close(to_worker)
            os.close(from_worker)
            raise
        finally:
            os.close(worker_stdin)
            os.close(worker_stdout)
        self.pipe = FramedPipe(from_worker, to_worker)
        self.pipe.send(("init", pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL)))
        self.deliver = deliver
        self.said: Optional[str] = None  # "ended" or "error", once the worker has said it
        self.lost: Optional[str] = None  # how it ended, when it ended without saying
        self.ended = Event()
        self.reader = gevent.spawn(self._read)
        log.debug("shard %d: worker process %d polls %d hosts", spec.number, self.popen.pid,
                  len(spec.hosts))

    def _read(self) -> None:
        try:
            while (message := self.pipe.receive()) is not None:
                if message[0] in ("ended", "error"):
                    self.said = message[0]
                self.deliver(message)
        except Exception as err:
            log.error("shard %d: cannot read from its worker process: %s", self.number, err)
        finally:
            code = self.popen.wait()
            if self.said is None:  # gone without a word: killed, or a crash
                self.lost = (f"worker process {self.popen.pid} was killed by signal {-code}"
                             if code < 0 else f"worker process {self.popen.pid} exited "
                             f"with status {code}")
            self.pipe.close()
            self.ended.set()

    def stop(self) -> None:
        try:
            self.pipe.send(("stop",))
        except OSError:
            pass

    def kill(self) -> None:
        if self.popen.poll() is None:
            log.warning("shard %d: worker process %d did not stop: killed", self.number,
                        self.popen.pid)
            self.popen.kill()


class _ProcessShards:
    """The worker processes of a run. A worker that dies (killed, out of memory, a crash)
    is started again after a delay that doubles up to :data:`RESTART_MAX` seconds: its
    hosts are polled again, from the fastest bucket. ``ended`` is set once every shard
    has ended for good (told to stop, or unable to start)."""

    def __init__(self, specs: List[ShardSpec], deliver: Callable[[tuple], None]) -> None:
        self.specs = {spec.number: spec for spec in specs}
        self.shards: Dict[int, _ProcessShard] = {}
        self.ended = Event()
        self.stopping = False
        self.restarts = 0
        try:
            for spec in specs:
                self.shards[spec.number] = _ProcessShard(spec, deliver)
        except BaseException:
            self.close()
            raise
        self._keepers = [gevent.spawn(self._keep, number, deliver) for number in self.shards]
        gevent.spawn(self._watch)

    def _keep(self, number: int, deliver: Callable[[tuple], None]) -> None:
        delay = 1.0
        while True:
            shard = self.shards[number]
            shard.ended.wait()
            if self.stopping or shard.lost is None:
                return
            log.warning("shard %d: %s; started again in %g s (its hosts start again in the "
                        "fastest bucket)", number, shard.lost, delay)
            gevent.sleep(delay)
            if self.stopping:
                return
            delay = min(RESTART_MAX, delay * 2)
            self.restarts += 1
            deliver(("restarted", number))
            self.shards[number] = _ProcessShard(self.specs[number], deliver)

    def _watch(self) -> None:
        gevent.joinall(self._keepers)
        self.ended.set()

    def stop(self) -> None:
        self.stopping = True
        for shard in self.shards.values():
            shard.stop()

    def close(self) -> None:
        self.stopping = True
        gevent.killall(getattr(self, "_keepers", []))
        for shard in self.shards.values():
            shard.kill()
        for shard in self.shards.values():
            shard.ended.wait(5)
        self.ended.set()


# -- Dask ----------------------------------------------------------------------------

def run_dask_shard(spec_bytes: bytes, run_id: str) -> int:
    """A Dask task: one shard, its batches put on the run's queue, stopped by the run's
    event (or by SIGTERM to a local worker process). Returns the shard's number."""
    from distributed import Event as DaskEvent, Queue

    from pssh.clients.cluster.shard_task import _STOP_EVERY_SHARD
    spec: ShardSpec = pickle.loads(spec_bytes)
    reports = Queue(f"pssh-poll-{run_id}")
    stop_event = DaskEvent(f"pssh-poll-{run_id}-stop")
    threads = gevent.get_hub().threadpool  # Dask's calls wait there, not on this hub
    stopped = [False]

    def watch() -> bool:
        if not stopped[0] and not _STOP_EVERY_SHARD.is_set():
            try:
                stopped[0] = bool(threads.apply(stop_event.is_set))
            except Exception:  # the scheduler is gone: nobody reads the results
                stopped[0] = True
        return stopped[0] or _STOP_EVERY_SHARD.is_set()

    last = [0.0]

    def stop_requested() -> bool:
        now = time.monotonic()
        if now - last[0] < 1.0:
            return stopped[0] or _STOP_EVERY_SHARD.is_set()
        last[0] = now
        return watch()

    def send(message: tuple) -> None:
        threads.apply(reports.put, (pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL),))

    _serve_shard(spec, send, stop_requested)
    return spec.number


class _DaskShards:
    """The parent's side of the shards' Dask tasks (``client``: connected;
    ``cluster``: the local cluster started for the run, if any, closed with it)."""

    def __init__(self, client: Any, cluster: Any, specs: List[ShardSpec],
                 deliver: Callable[[tuple], None]) -> None:
        from distributed import Event as DaskEvent, Queue
        self.threads = gevent.get_hub().threadpool
        self.client, self.cluster = client, cluster
        run_id = uuid.uuid4().hex[:12]
        self.reports = Queue(f"pssh-poll-{run_id}", client=self.client)
        self.stop_event = DaskEvent(f"pssh-poll-{run_id}-stop", client=self.client)
        self.deliver = deliver
        self.running = {spec.number for spec in specs}
        self.ended = Event()
        self.futures = [self.client.submit(
            run_dask_shard, pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL), run_id,
            key=f"pssh-poll-{run_id}-{spec.number}", pure=False) for spec in specs]
        self.receiver = gevent.spawn(self._receive)

    def _receive(self) -> None:
        while self.running:
            try:
                messages = self.threads.apply(self.reports.get, (None, True))
            except Exception as err:
                log.error("the Dask run failed: %s", err)
                break
            for raw in messages:
                message = pickle.loads(raw)
                if message[0] in ("ended", "error"):
                    self.running.discard(message[1])
                self.deliver(message)
            for future in self.futures:
                if future.status == "error" and self.running:
                    number = int(future.key.rsplit("-", 1)[1])
                    if number in self.running:
                        self.running.discard(number)
                        self.deliver(("error", number, f"its Dask task failed: "
                                      f"{future.exception()}"))
            if not messages:
                gevent.sleep(0.2)
        self.ended.set()

    def stop(self) -> None:
        try:
            self.threads.apply(self.stop_event.set)
        except Exception as err:  # the scheduler is gone: the tasks stop by themselves
            log.warning("cannot tell the Dask tasks to stop: %s", err)

    def close(self) -> None:
        self.receiver.kill()
        self.ended.set()
        try:
            for future in self.futures:
                self.threads.apply(future.cancel)
            self.threads.apply(self.client.close)
            if self.cluster is not None:
                self.threads.apply(self.cluster.close)
        except Exception as err:
            log.warning("closing the Dask client: %s", err)


# -- the parent -----------------------------------------------------------------------

@dataclass
class _Cumulative:
    """The health counters that count since the start, added up over reports."""

    polls: int = 0
    late: int = 0
    skipped: int = 0
    reconnects: int = 0
    dropped: int = 0

    def add(self, report: Health) -> None:
        self.polls += report.polls
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
        self._checks = _portable(checks)
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

    def _specs(self, count: int) -> List[ShardSpec]:
        specs = []
        level = logging.getLogger("pssh").getEffectiveLevel()
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
            if self.processes is not None:
                from pssh.fanout.process import worker_count
                count = worker_count(self.processes, len(self.hosts))
                self._shards = _ProcessShards(self._specs(count), self._deliver)
            else:
                self._shards = self._start_dask()
            reporter = gevent.spawn(self._report_health)
            gevent.wait([self._stop, self._shards.ended], timeout=duration, count=1)
            self._stop_deadline = time.monotonic() + self.stop_timeout
            self._shards.stop()
            if not self._shards.ended.wait(self.stop_timeout / 2):
                log.warning("shards still running %s s after they were told to stop: "
                            "killed", self.stop_timeout / 2)
        finally:
            if reporter is not None:
                reporter.kill()
            if self._shards is not None:
                self._shards.close()
            self._finish()

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

    def _start_dask(self) -> "_DaskShards":
        from pssh.clients.cluster.run import connect_cluster
        threads = gevent.get_hub().threadpool
        client, cluster = threads.apply(connect_cluster, (self.scheduler,))
        try:
            workers = threads.apply(client.scheduler_info)["workers"].values()
            count = max(1, min(len(self.hosts), sum(w.get("nthreads", 1) for w in workers)))
        except BaseException:
            threads.apply(client.close)
            if cluster is not None:
                threads.apply(cluster.close)
            raise
        return _DaskShards(client, cluster, self._specs(count), self._deliver)

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
                      in_flight=sum(r.in_flight for r in reports))

    @property
    def skipped(self) -> int:
        """Rounds the shards skipped (see :attr:`Poller.skipped`), as they last reported."""
        return self.health().skipped

    def states(self) -> Dict[Tuple[str, str], HostState]:
        """Bucket state per (host, check), as the shards had it when they ended."""
        return dict(self._states)


__all__ = ["ShardedPoller", "ShardSpec", "partition", "run_dask_shard", "worker_main",
           "FORWARD_INTERVAL", "FORWARD_BOUND", "STOP_TIMEOUT", "RESTART_MAX"]

if __name__ == "__main__":
    worker_main()
