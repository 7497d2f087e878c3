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
"""
from __future__ import annotations

import logging
import math
import pickle
import time
import uuid
from typing import (Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from pssh import exceptions as exc
from pssh.clients.cluster.shard_task import HostRunResult, Shard, run_shard

log = logging.getLogger("pssh.cluster")

#: Seconds the caller waits for an answer before looking at the tasks' states.
POLL = 0.5
#: Seconds a stopped run waits for its tasks to stop their commands.
STOP_TIMEOUT = 15.0
#: The most hosts one task takes when no shard size is given.
MAX_SHARD = 250

Labels = Union[Mapping[str, str], Callable[[str], Optional[str]], None]


def plan_shards(hosts: Sequence[str], labels: Labels, shard_size: int
                ) -> List[Tuple[Optional[str], List[int]]]:
    """(label, host indices) per shard: the hosts of each label (None: any worker) cut
    into pieces of at most ``shard_size``."""
    label_of = labels if callable(labels) else (labels or {}).get
    groups: Dict[Optional[str], List[int]] = {}
    for index, host in enumerate(hosts):
        groups.setdefault(label_of(host), []).append(index)
    return [(label, indices[start:start + shard_size])
            for label, indices in groups.items()
            for start in range(0, len(indices), shard_size)]


class ClusterRun:
    """A command running on a Dask cluster: iterate it for each host's
    :class:`HostRunResult` as that host completes (each host exactly once).

    Leaving a ``with`` block (or :meth:`stop`) before the end stops the
    commands still running, on their hosts too.
    """

    def __init__(self, dask_client, hosts: List[str], shards: List[Tuple[Optional[str], Shard]],
                 command: str, ssh_config, run_kwargs: dict, idempotent: bool,
                 pool_size: int, own_cluster=None) -> None:
        from distributed import Event, Queue
        self.dask = dask_client
        self.hosts = hosts
        self.run_id = shards[0][1].run_id if shards else uuid.uuid4().hex
        self._own_cluster = own_cluster
        self._queue = Queue(f"pssh-{self.run_id}", client=dask_client)
        self._stop_event = Event(f"pssh-{self.run_id}-stop", client=dask_client)
        self._pending = set(range(len(hosts)))
        self._shard_of: Dict[object, Shard] = {}
        for label, shard in shards:
            future = dask_client.submit(
                run_shard, shard, command, ssh_config, run_kwargs, idempotent, pool_size,
                key=shard.name, pure=False, resources={label: 1} if label else None)
            self._shard_of[future] = shard
        log.info("%d hosts in %d tasks on %s", len(hosts), len(shards), dask_client)

    @property
    def done(self) -> bool:
        return not self._pending

    def __iter__(self) -> Iterator[HostRunResult]:
        while self._pending:
            try:
                result = pickle.loads(self._queue.get(timeout=POLL))
            except TimeoutError:
                # Nothing came: the tasks that failed have reported all they could.
                yield from self._failed_tasks()
                continue
            if result.index in self._pending:  # a re-run's second report is dropped
                self._pending.discard(result.index)
                yield result

    def _failed_tasks(self) -> Iterator[HostRunResult]:
        for future, shard in list(self._shard_of.items()):
            if future.status not in ("error", "cancelled"):
                continue
            del self._shard_of[future]
            cause = future.exception() if future.status == "error" else "cancelled"
            for index, host in shard.hosts:
                if index in self._pending:
                    self._pending.discard(index)
                    yield HostRunResult(index, host, exception=exc.WorkerError(
                        "%s: the Dask task running this host failed: %s", host, cause,
                        host=host))

    def stop(self) -> None:
        """Stop the run: tasks not started are dropped, running ones stop their commands."""
        if not self._pending:
            return
        self._stop_event.set()
        self.dask.cancel([f for f in self._shard_of if f.status == "pending"])
        deadline = time.monotonic() + STOP_TIMEOUT
        for future in self._shard_of:
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # cancelled, failed, or still running: nothing more to do
                pass

    def close(self) -> None:
        """Stop the run if it is not over; shut down a cluster started for it."""
        self.stop()
        if self._own_cluster is not None:
            self.dask.close()
            self._own_cluster.close()
            self._own_cluster = None

    def __enter__(self) -> "ClusterRun":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


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
                               dashboard_address=":0")  # no clash with another cluster's
        return Client(cluster), cluster
    return Client(scheduler), None


def run_on_cluster(scheduler, hosts: Sequence[str], command: str, *, labels: Labels = None,
                   idempotent: bool = False, shard_size: Optional[int] = None,
                   pool_size: int = 100, host_config=None, ssh_config=None,
                   sudo: bool = False, sudo_user: Optional[str] = None, use_pty: bool = False,
                   shell: Optional[str] = None, encoding: str = "utf-8",
                   **options) -> ClusterRun:
    """Run ``command`` on every host, spread over the Dask cluster at ``scheduler``
    (see :func:`connect_cluster`); a :class:`ClusterRun` to iterate for results.

    ``options``, ``host_config`` and ``ssh_config`` are the parallel client's
    (resolved here, used on the workers; ``user`` is the login name, as there).
    ``sudo``, ``sudo_user`` (``run_command``'s ``user``), ``use_pty``, ``shell``,
    ``encoding``: as for ``run_command``. ``labels`` (host -> label, or a
    function of the host): hosts with a label run only on workers that have the
    Dask resource of that name. ``idempotent``: a shard whose worker is lost
    mid-run runs again on another worker; otherwise its unfinished hosts fail
    with :class:`~pssh.exceptions.WorkerError` (never silently dropped, never
    run twice). ``shard_size``: hosts per task (default: each worker gets about
    two tasks, at most :data:`MAX_SHARD` hosts each).
    """
    from pssh.clients.native.parallel import ParallelSSHClient
    hosts = list(hosts)
    # The parallel client's own resolution of per-host settings (nothing connects here).
    local = ParallelSSHClient(hosts, host_config=host_config, ssh_config=ssh_config,
                              pool_size=pool_size, **options)
    dask_client, own_cluster = connect_cluster(scheduler)
    try:
        if shard_size is None:
            workers = max(1, len(dask_client.scheduler_info()["workers"]))
            shard_size = max(1, min(MAX_SHARD, math.ceil(len(hosts) / (2 * workers))))
        run_id = uuid.uuid4().hex[:12]
        shards = [(label, Shard(run_id, number, [(i, hosts[i]) for i in indices],
                                [local._host_options(i) for i in indices]))
                  for number, (label, indices) in enumerate(plan_shards(hosts, labels,
                                                                        shard_size))]
        run_kwargs = dict(sudo=sudo, user=sudo_user, use_pty=use_pty, shell=shell,
                          encoding=encoding)
        return ClusterRun(dask_client, hosts, shards, command, local._ssh_config or False,
                          run_kwargs, idempotent, pool_size, own_cluster)
    except BaseException:
        if own_cluster is not None:
            dask_client.close()
            own_cluster.close()
        raise
