"""One command on many hosts, spread over a Dask ``distributed`` cluster.

The hosts are cut into shards (per label first, then by size); each shard is
one Dask task that runs it with the gevent client on a worker
(:mod:`pssh.clients.cluster.shard_task`), and every host's result comes back
through a Dask queue as soon as that host completes. Dask does the
scheduling, placement and failure detection; nothing here is a scheduler.

Labels pin hosts to workers: a host labelled ``"dc2"`` runs only in a task
that asks for the Dask worker resource ``dc2``, which only workers started
with it have (``dask worker ... --resources dc2=100``). Key files, known_hosts
and other paths in the options are read on the workers.

By default every host starts at once (``pool_size`` at a time per task). A
caller that paces the run itself (``paced=True``, as ``pssh run --scheduler``
does for its fan-out and ``--fail-fast``) says when each host starts
(:meth:`ClusterRun.start`) and may stop one host (:meth:`ClusterRun.cancel`).
"""
from __future__ import annotations

import logging
import math
import pickle
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import (Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Set, Tuple, Union)

from pssh import exceptions as exc
from pssh.clients.cluster.shard_task import (HEARTBEAT, HostRunResult, Shard, pickled,
                                             report_queue_name, run_shard)
from pssh.fanout.frames import portable

log = logging.getLogger("pssh.cluster")

#: Seconds a stopped run waits for its tasks to stop their commands.
STOP_TIMEOUT = 15.0
#: The most hosts one task takes when no shard size is given.
MAX_SHARD = 250

Labels = Union[Mapping[str, str], Callable[[str], Optional[str]], None]


def plan_shards(hosts: Sequence[str], labels: Labels, shard_size: int
                ) -> List[Tuple[Optional[str], List[int]]]:
    """(label, host indices) per shard: the hosts of each label (None: any worker) cut
    into pieces of at most ``shard_size``."""
    groups = _by_label(hosts, labels)
    return [(label, indices[start:start + shard_size])
            for label, indices in groups.items()
            for start in range(0, len(indices), shard_size)]


def plan_interleaved(hosts: Sequence[str], labels: Labels, count: int
                     ) -> List[Tuple[Optional[str], List[int]]]:
    """(label, host indices) per shard: the hosts of each label dealt over at most
    ``count`` shards in turn, so that hosts started in order keep every shard busy."""
    return [(label, indices[start::min(count, len(indices))])
            for label, indices in _by_label(hosts, labels).items()
            for start in range(min(count, len(indices)))]


def _by_label(hosts: Sequence[str], labels: Labels) -> Dict[Optional[str], List[int]]:
    label_of = labels if callable(labels) else (labels or {}).get
    groups: Dict[Optional[str], List[int]] = {}
    for index, host in enumerate(hosts):
        groups.setdefault(label_of(host), []).append(index)
    return groups


@dataclass
class _ShardState:
    """The caller's view of one shard: its task, the attempt serving it, its hosts."""

    shard: Shard
    future: object
    control: object  # the shard's control queue
    attempt: Optional[str] = None
    started: Set[int] = field(default_factory=set)
    no_more: bool = False
    dead: Optional[str] = None  # why its task is gone for good


class ClusterRun:
    """A command running on a Dask cluster: iterate it for each host's
    :class:`HostRunResult` as that host completes (each started host exactly once).

    Leaving a ``with`` block (or :meth:`stop`) before the end stops the
    commands still running, on their hosts too. The methods may be called from
    another thread than the one iterating.
    """

    def __init__(self, dask_client, hosts: List[str], shards: List[Tuple[Optional[str], Shard]],
                 command: str, ssh_config, run_kwargs: dict, idempotent: bool,
                 pool_size: int, own_cluster=None, paced: bool = False) -> None:
        from distributed import Queue
        self.dask = dask_client
        self.hosts = hosts
        self.idempotent = idempotent
        self.run_id = shards[0][1].run_id if shards else uuid.uuid4().hex[:12]
        self._own_cluster = own_cluster
        self._lock = threading.RLock()
        self._reports = Queue(report_queue_name(self.run_id), client=dask_client)
        self._shards: List[_ShardState] = []
        self._shard_of: Dict[int, _ShardState] = {}
        self._reported: Set[int] = set()
        self._ready: Deque[HostRunResult] = deque()  # results made here (failed tasks)
        self._retired: List[object] = []  # control queues of attempts lost
        self._all_started = False
        self._stopping = False
        self._closed = False
        self._ended = threading.Event()  # closed: the heartbeat stops
        for label, shard in shards:
            state = _ShardState(shard, None, Queue(shard.control_name(), client=dask_client))
            state.future = dask_client.submit(
                run_shard, shard, command, ssh_config, run_kwargs, pool_size,
                key=shard.name, pure=False, resources={label: 1} if label else None)
            state.future.add_done_callback(self._task_ended)
            self._shards.append(state)
            for index, _ in shard.hosts:
                self._shard_of[index] = state
        log.info("%d hosts in %d tasks on %s", len(hosts), len(shards), dask_client)
        threading.Thread(target=self._heartbeat, name=f"pssh {self.run_id} heartbeat",
                         daemon=True).start()
        if not paced:
            self.start(range(len(hosts)))
            self.done_starting()

    # -- the caller's orders -----------------------------------------------------------

    def start(self, indices: Iterable[int]) -> None:
        """Let these hosts start (in this order, as their tasks have room)."""
        batches: Dict[int, List[int]] = {}
        with self._lock:
            for index in indices:
                state = self._shard_of[index]
                if index in state.started or self._stopping:
                    continue
                state.started.add(index)
                if state.dead is not None:
                    self._fail(index, state.dead)
                else:
                    batches.setdefault(state.shard.number, []).append(index)
            # Sent holding the lock: a shard's new attempt cannot come in between.
            self._send([(self._shards[n], "start", batch) for n, batch in batches.items()])

    def cancel(self, index: int, error: BaseException) -> None:
        """Stop one host's command; its result carries ``error``."""
        with self._lock:
            state = self._shard_of[index]
            if index in state.started and index not in self._reported:
                self._send([(state, "cancel", index, portable(error))])

    def done_starting(self) -> None:
        """No more hosts will start: each task ends once its started hosts are done."""
        with self._lock:
            self._all_started = True
            for state in self._shards:
                state.no_more = True
            self._send([(state, "no-more") for state in self._shards])
        self._wake()

    def _send(self, orders) -> None:
        for state, kind, *values in orders:
            if state.dead is None:
                state.control.put(pickled((kind, *values)))

    def _heartbeat(self) -> None:
        """``alive`` to every shard now and then: shards of a caller gone stop."""
        while not self._ended.wait(HEARTBEAT):
            try:
                with self._lock:
                    self._send([(state, "alive") for state in self._shards
                                if not state.future.done()])
            except Exception as err:  # the client is closing
                log.debug("heartbeat not sent: %s", err)
                return

    # -- results -----------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether every started host has reported and no more will start."""
        with self._lock:
            return self._all_started and self._unreported() == 0 and not self._ready

    def _unreported(self) -> int:
        return sum(len(s.started) for s in self._shards) - len(self._reported)

    def __iter__(self) -> Iterator[HostRunResult]:
        while True:
            with self._lock:
                if self._ready:
                    result = self._ready.popleft()
                elif self._closed or (self._all_started and self._unreported() == 0):
                    return
                else:
                    result = None
            if result is not None:
                yield result
                continue
            # Blocks until a message comes: a task's, or our own wake-up (no timeout: a
            # timed-out get is logged as an error by the scheduler).
            message = pickle.loads(self._reports.get())
            result = self._receive(message)
            if result is not None:
                yield result

    def _receive(self, message: tuple) -> Optional[HostRunResult]:
        kind, *values = message
        with self._lock:
            if kind == "result":
                result = values[0]
                if result.index in self._reported:  # an attempt's second report
                    return None
                self._reported.add(result.index)
                return result
            if kind == "attempt":
                self._rerun(self._shards[values[0]], values[1])
            elif kind == "wake":
                self._look_at_tasks()
        return None

    def _rerun(self, state: _ShardState, attempt: str) -> None:
        """A shard runs again (its worker was lost): what its first attempt started runs
        again if the command is idempotent, and fails otherwise; the rest goes on there."""
        from distributed import Queue
        state.attempt = attempt
        self._retired.append(state.control)
        state.control = Queue(state.shard.control_name(attempt), client=self.dask)
        unfinished = sorted(state.started - self._reported)
        orders: list = []
        if self.idempotent:
            if unfinished:
                orders.append((state, "start", unfinished))
        else:
            for index in unfinished:
                self._fail(index, "the Dask worker running this host's shard was lost "
                                  "mid-run; the command was not run again (it is not marked "
                                  "idempotent)")
        if state.no_more:
            orders.append((state, "no-more"))
        if self._stopping:
            orders.append((state, "stop"))
        self._send(orders)

    def _task_ended(self, future) -> None:
        # Called in Dask's event loop thread, which must not wait on Dask: a thread of its
        # own puts the wake-up on the queue (after whatever the task put there).
        if future.status in ("error", "cancelled"):
            self._wake()

    def _wake(self) -> None:
        if not self._closed:
            threading.Thread(target=self._put_wake, daemon=True).start()

    def _put_wake(self) -> None:
        try:
            self._reports.put(pickled(("wake",)))
        except Exception as err:  # the client is closing
            log.debug("wake-up not sent: %s", err)

    def _look_at_tasks(self) -> None:
        """Tasks that failed for good (or were cancelled) fail the hosts they had not
        reported; hosts of theirs started later fail at once."""
        for state in self._shards:
            future = state.future
            if state.dead is not None or future.status not in ("error", "cancelled"):
                continue
            cause = future.exception() if future.status == "error" else "cancelled"
            state.dead = f"the Dask task running this host failed: {cause}"
            for index in sorted(state.started - self._reported):
                self._fail(index, state.dead)

    def _fail(self, index: int, why: str) -> None:
        host = self.hosts[index]
        self._reported.add(index)
        self._ready.append(HostRunResult(index, host, exception=exc.WorkerError(
            "%s: %s", host, why, host=host)))

    # -- the end -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the run: no more hosts start, tasks not started are dropped, running ones
        stop their commands; returns once they have (or after :data:`STOP_TIMEOUT`)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self._all_started = True
            live = [s for s in self._shards if s.dead is None]
            self._send([(state, "stop") for state in live])
        futures = [s.future for s in live]
        self.dask.cancel([f for f in futures if f.status == "pending" and not _running(f)])
        self._wait_for_tasks(time.monotonic() + STOP_TIMEOUT)
        self._wake()

    def _wait_for_tasks(self, deadline: float) -> None:
        """Until every task has ended (or ``deadline``): a task released while it runs is
        cancelled, and its worker says so in its log."""
        for state in self._shards:
            try:
                state.future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # cancelled, failed, or still running: nothing more to do
                pass

    def close(self, stop: bool = True) -> None:
        """Stop the run if it is not over; shut down a cluster started for it.

        ``stop=False`` (exiting at once): no waiting for the tasks; a cluster started for
        the run goes with them, the tasks of another stop when they have heard nothing
        from this caller for a while (see :mod:`~pssh.clients.cluster.shard_task`).
        """
        if not stop:
            pass
        elif not self.done:
            self.stop()
        else:  # every task has been told no more hosts will start: they end at once
            self._wait_for_tasks(time.monotonic() + STOP_TIMEOUT)
        with self._lock:
            self._closed = True
        self._ended.set()
        for state in self._shards:
            # Released: a worker lost later must not make Dask run the task again.
            state.future.release()
        try:
            self._reports.put(pickled(("wake",)))  # an iteration still waiting ends
        except Exception:
            pass
        for queue in [self._reports] + [s.control for s in self._shards] + self._retired:
            try:
                queue.close()
            except Exception:
                pass
        if self._own_cluster is not None:
            self.dask.close()
            self._own_cluster.close()
            self._own_cluster = None

    def __enter__(self) -> "ClusterRun":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _running(future) -> bool:
    """Whether Dask has the task on a worker already (then it stops itself, reporting)."""
    try:
        states = future.client.processing()
    except Exception:
        return True
    return any(future.key in keys for keys in states.values())


def connect_cluster(scheduler) -> Tuple[object, object]:
    """(a Dask client, the cluster started for it or None): ``scheduler`` is a
    ``distributed.Client``, an address (``tcp://host:8786``), or ``local:N`` for a
    ``LocalCluster`` of N worker processes started here."""
    from distributed import Client, LocalCluster
    if isinstance(scheduler, Client):
        return scheduler, None
    if isinstance(scheduler, str) and scheduler.startswith("local:"):
        workers = int(scheduler.split(":", 1)[1] or 1)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0",  # no clash with another cluster's
                               preload=["pssh.clients.cluster.local_worker"])
        return Client(cluster), cluster
    return Client(scheduler), None


def run_on_cluster(scheduler, hosts: Sequence[str], command: str, *, labels: Labels = None,
                   idempotent: bool = False, shard_size: Optional[int] = None,
                   pool_size: int = 100, host_config=None, ssh_config=None,
                   sudo: bool = False, sudo_user: Optional[str] = None, use_pty: bool = False,
                   shell: Optional[str] = None, encoding: str = "utf-8",
                   paced: bool = False, **options) -> ClusterRun:
    """Run ``command`` on every host, spread over the Dask cluster at ``scheduler``
    (see :func:`connect_cluster`); a :class:`ClusterRun` to iterate for results.

    ``options``, ``host_config`` and ``ssh_config`` are the parallel client's
    (resolved here, used on the workers; ``user`` is the login name, as there).
    ``sudo``, ``sudo_user`` (``run_command``'s ``user``), ``use_pty``, ``shell``,
    ``encoding``: as for ``run_command``. ``labels`` (host -> label, or a
    function of the host): hosts with a label run only on workers that have the
    Dask resource of that name. ``idempotent``: a shard whose worker is lost
    mid-run runs its unfinished hosts again on another worker; otherwise they fail
    with :class:`~pssh.exceptions.WorkerError` (never silently dropped, never
    run twice). ``shard_size``: hosts per task (default: each worker gets about
    two tasks, at most :data:`MAX_SHARD` hosts each). ``paced``: no host starts
    until :meth:`ClusterRun.start` names it; the hosts are then dealt over one
    task per worker thread (``shard_size`` does not apply), so that hosts started
    in order spread over the cluster.
    """
    from pssh.clients.native.parallel import ParallelSSHClient
    hosts = list(hosts)
    # The parallel client's own resolution of per-host settings (nothing connects here).
    local = ParallelSSHClient(hosts, host_config=host_config, ssh_config=ssh_config,
                              pool_size=pool_size, **options)
    dask_client, own_cluster = connect_cluster(scheduler)
    try:
        workers = dask_client.scheduler_info()["workers"].values()
        if paced:
            threads = sum(w.get("nthreads", 1) for w in workers)
            plan = plan_interleaved(hosts, labels, max(1, threads))
        else:
            if shard_size is None:
                shard_size = max(1, min(MAX_SHARD, math.ceil(len(hosts) /
                                                             (2 * max(1, len(workers))))))
            plan = plan_shards(hosts, labels, shard_size)
        run_id = uuid.uuid4().hex[:12]
        shards = [(label, Shard(run_id, number, [(i, hosts[i]) for i in indices],
                                [local._host_options(i) for i in indices]))
                  for number, (label, indices) in enumerate(plan)]
        run_kwargs = dict(sudo=sudo, user=sudo_user, use_pty=use_pty, shell=shell,
                          encoding=encoding)
        return ClusterRun(dask_client, hosts, shards, command, local._ssh_config or False,
                          run_kwargs, idempotent, pool_size, own_cluster, paced=paced)
    except BaseException:
        if own_cluster is not None:
            dask_client.close()
            own_cluster.close()
        raise
