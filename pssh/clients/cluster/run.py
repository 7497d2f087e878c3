"""One command on many hosts, spread over a Dask ``distributed`` cluster, each host's
result as it completes.

The hosts are cut into shards (per label first, then by size); each shard is one
Dask task running the "run" job of :mod:`pssh.fanout` (the gevent client's per-host
steps, as for ``ParallelSSHClient(scheduler=...)``), through the Dask transport
(:mod:`pssh.fanout.dask`). A task ends once its hosts are done, which frees its
worker for the next. Dask does the scheduling, placement and failure detection;
nothing here is a scheduler.

Labels pin hosts to workers: a host labelled ``"dc2"`` runs only in a task that
asks for the Dask worker resource ``dc2``, which only workers started with it have
(``dask worker ... --resources dc2=100``). Key files, known_hosts and other paths in
the options are read on the workers.

A :class:`ClusterRun` runs in a thread of its own (a gevent hub of its own): its
methods may be called from any thread, and the run goes on whatever the caller's
thread does meanwhile.
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Callable, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

from pssh import exceptions as exc
from pssh.fanout.dask import connect_cluster  # noqa: F401 (pssh.clients.cluster names it)

if TYPE_CHECKING:
    from pssh.fanout.run.hosts import Plan, ShardedHosts
    from pssh.output import HostOutput

log = logging.getLogger("pssh.cluster")

#: Seconds a stopped run gives its commands to stop.
STOP_TIMEOUT = 15.0
#: The most hosts one task takes when no shard size is given.
MAX_SHARD = 250

Labels = Union[Mapping[str, str], Callable[[str], Optional[str]], None]
_END = object()  # the last item of a run's results


@dataclass
class HostRunResult:
    """One host's command, complete: what :func:`run_on_cluster` yields."""

    index: int            # the host's position in the hosts given
    host: str
    exit_code: Optional[int] = None
    exit_signal: Optional[str] = None
    stdout: str = ""
    stderr: str = ""
    #: Why the host failed (connection, login, a lost worker...); None if the command ran.
    exception: Optional[BaseException] = None
    #: Where it ran: the Dask worker's address and host name.
    worker: str = ""
    #: Seconds from the host's start (connecting included) to its end.
    duration: float = 0.0
    #: Whether the command started on the host (it may have failed since).
    started: bool = False

    @property
    def ok(self) -> bool:
        return self.exception is None and self.exit_code == 0


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

    def __init__(self, scheduler, hosts: List[str], plan: Callable[[int], list], command: str,
                 run_kwargs: dict, options, ssh_config, idempotent: bool,
                 pool_size: int) -> None:
        self.hosts = hosts
        self._results: "queue.Queue" = queue.Queue()
        self._started = threading.Event()
        self._start_error: Optional[BaseException] = None
        self._hub = None
        self._stop = None  # the run's gevent event, set from any thread
        self._ended = threading.Event()
        #: Held while telling the run's hub to stop, and while ending it: never both.
        self._hub_lock = threading.Lock()
        self._finished = False
        self._thread = threading.Thread(
            target=self._main, name="pssh cluster run", daemon=True,
            args=(scheduler, plan, command, run_kwargs, options, ssh_config, idempotent,
                  pool_size))
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error

    # -- the run's own thread -----------------------------------------------------------

    def _main(self, scheduler, plan, command, run_kwargs, options, ssh_config, idempotent,
              pool_size) -> None:
        import gevent

        try:
            self._run_in_thread(scheduler, plan, command, run_kwargs, options, ssh_config,
                                idempotent, pool_size)
        finally:
            # The thread's hub (its loop's descriptors, its thread pool's threads) would
            # outlive the thread unless destroyed: one of each per run, for the process.
            with self._hub_lock:
                self._ended.set()
                gevent.get_hub().destroy(destroy_loop=True)

    def _run_in_thread(self, scheduler, plan, command, run_kwargs, options, ssh_config,
                       idempotent, pool_size) -> None:
        import gevent
        from gevent.event import Event

        from pssh.fanout.dask import DaskGroup
        from pssh.fanout.run.hosts import ShardedHosts
        try:
            group = DaskGroup(scheduler)
        except BaseException as err:
            self._start_error = err
            self._started.set()
            return
        self._hub, self._stop = gevent.get_hub(), Event()
        try:
            with group:
                workers = len(group.workers())
                shards = [({"resources": {label: 1}} if label else {}, indices)
                          for label, indices in plan(workers)]
                sharded = ShardedHosts(group, lambda: shards, lambda: self.hosts, options,
                                       ssh_config, pool_size, kind="Dask task",
                                       own_process=False)
                self._started.set()
                _Hosts(self, sharded, shards, command, run_kwargs, idempotent).run(self._stop)
        except BaseException as err:  # a bug, or Dask gone: every host not reported fails
            log.error("the Dask run failed: %s", err)
            self._results.put(("failed", err))
        finally:
            self._started.set()
            self._results.put(_END)

    # -- the caller's side (any thread) --------------------------------------------------

    def __iter__(self) -> Iterator[HostRunResult]:
        reported = set()
        while not self._finished:
            item = self._results.get()
            if item is _END:
                self._finished = True
                break
            if isinstance(item, tuple):  # the run failed: the hosts left fail with it
                for index, host in enumerate(self.hosts):
                    if index not in reported:
                        reported.add(index)
                        yield HostRunResult(index, host, exception=exc.WorkerError(
                            "%s: the Dask run failed: %s", host, item[1], host=host))
                continue
            reported.add(item.index)
            yield item

    def stop(self) -> None:
        """Stop the run: running commands are stopped on their hosts; returns once they
        have (or after :data:`STOP_TIMEOUT`). The results of the hosts stopped come next
        in the iteration."""
        with self._hub_lock:
            if self._hub is not None and not self._ended.is_set():
                self._hub.loop.run_callback_threadsafe(self._stop.set)
        self._ended.wait(STOP_TIMEOUT + 5)

    def close(self) -> None:
        """Stop what still runs and let go of the cluster (a ``local:N`` cluster started
        for the run is closed)."""
        self.stop()

    def __enter__(self) -> "ClusterRun":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class _Hosts:
    """The hosts of a run, in its own thread: each host's command started, waited for and
    reported; a shard's task retired once its hosts are done."""

    def __init__(self, run: ClusterRun, sharded: ShardedHosts, shards: Plan, command: str,
                 run_kwargs: dict, idempotent: bool) -> None:
        self.run_, self.sharded, self.command = run, sharded, command
        self.run_kwargs, self.idempotent = run_kwargs, idempotent
        self.left = {number: set(indices) for number, (_, indices) in enumerate(shards)}
        self.shard_of = {i: number for number, (_, indices) in enumerate(shards)
                         for i in indices}
        self.outputs: Dict[int, HostOutput] = {}
        self.stopping = False

    def run(self, stop) -> None:
        import gevent
        self.sharded.start()  # every task submitted: Dask starts them as workers have room
        hosts = {i: gevent.spawn(self._host, i) for i in range(len(self.run_.hosts))}
        done = gevent.spawn(gevent.joinall, list(hosts.values()))
        gevent.wait([stop, done], count=1)
        if not done.ready():
            self._stop(hosts)
        done.join()

    def _stop(self, hosts) -> None:
        import gevent
        self.stopping = True
        outputs = list(self.outputs.values())
        if outputs:
            log.info("run stopped: cancelling %d commands", len(outputs))
            gevent.joinall([gevent.spawn(o.client.cancel, o, "TERM", STOP_TIMEOUT)
                            for o in outputs], timeout=STOP_TIMEOUT)
        gevent.killall([g for g in hosts.values() if not g.ready()], block=False)

    def _host(self, index: int) -> None:
        import gevent
        host = self.run_.hosts[index]
        result = HostRunResult(index, host)
        began = time.monotonic()
        try:
            try:
                self._run(index, result)
            except exc.WorkerError as err:  # its worker was lost mid-run
                if self.stopping:
                    raise
                if not self.idempotent:
                    raise exc.WorkerError("%s; the command was not run again (it is not "
                                          "marked idempotent)", err.reason,
                                          host=host) from err
                log.warning("%s; running it again (idempotent)", err.reason)
                self._run(index, result)
        except gevent.GreenletExit:
            result.exception = exc.PSSHError("%s: stopped before the command ended", host,
                                             host=host)
        except Exception as err:
            result.exception = err
        finally:
            self.outputs.pop(index, None)
            result.duration = time.monotonic() - began
            self.run_._results.put(result)
            self._done(index)

    def _run(self, index: int, result: HostRunResult) -> None:
        """One attempt at the host's command, into ``result``."""
        host = self.run_.hosts[index]
        worker = self.sharded.worker(index)
        try:
            output = self.sharded.run_command(index, host, self.command, cancellable=True,
                                              **self.run_kwargs)
            result.started = True
            self.outputs[index] = output
            output.client.wait_finished(output)  # a lost worker: in output.exception
            if output.exception is not None:
                raise output.exception
            # The whole output, as it came: its lines are not cut (they are joined again).
            output.max_line = None
            result.stdout = "\n".join(output.stdout)
            result.stderr = "\n".join(output.stderr)
            result.exit_code, result.exit_signal = output.exit_code, output.exit_signal
        finally:
            result.worker = worker.transport.where or ""  # (said before any answer)

    def _done(self, index: int) -> None:
        number = self.shard_of[index]
        self.left[number].discard(index)
        if not self.left[number]:
            import gevent
            gevent.spawn(self.sharded.retire, number)  # its worker is free for the next


def run_on_cluster(scheduler, hosts: Sequence[str], command: str, *, labels: Labels = None,
                   idempotent: bool = False, shard_size: Optional[int] = None,
                   pool_size: int = 100, host_config=None, ssh_config=None,
                   sudo: bool = False, sudo_user: Optional[str] = None, use_pty: bool = False,
                   shell: Optional[str] = None, encoding: str = "utf-8",
                   **options) -> ClusterRun:
    """Run ``command`` on every host, spread over the Dask cluster at ``scheduler``
    (see :func:`~pssh.fanout.dask.connect_cluster`); a :class:`ClusterRun` to iterate
    for results.

    ``options``, ``host_config`` and ``ssh_config`` are the parallel client's
    (resolved here, used on the workers; ``user`` is the login name, as there).
    ``sudo``, ``sudo_user`` (``run_command``'s ``user``), ``use_pty``, ``shell``,
    ``encoding``: as for ``run_command``. ``labels`` (host -> label, or a
    function of the host): hosts with a label run only on workers that have the
    Dask resource of that name. ``idempotent``: a host whose worker is lost
    mid-run runs again on another worker; otherwise it fails with
    :class:`~pssh.exceptions.WorkerError` (never silently dropped, never run
    twice). ``shard_size``: hosts per task (default: each worker gets about two
    tasks, at most :data:`MAX_SHARD` hosts each).
    """
    from pssh.clients.native.parallel import ParallelSSHClient
    hosts = list(hosts)
    # The parallel client's own resolution of per-host settings (nothing connects here).
    local = ParallelSSHClient(hosts, host_config=host_config, ssh_config=ssh_config,
                              pool_size=pool_size, **options)

    def plan(workers: int):
        size = shard_size or max(1, min(MAX_SHARD, math.ceil(len(hosts) /
                                                             (2 * max(1, workers)))))
        return plan_shards(hosts, labels, size)

    run_kwargs = dict(sudo=sudo, user=sudo_user, use_pty=use_pty, shell=shell,
                      encoding=encoding)
    return ClusterRun(scheduler, hosts, plan, command, run_kwargs, local.host_options,
                      local.ssh_config or False, idempotent, pool_size)
