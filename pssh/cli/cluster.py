"""``pssh run --scheduler``: hosts run on a Dask cluster, through the same pipeline.

The run is paced (:func:`pssh.clients.cluster.run_on_cluster` with ``paced=True``):
a host starts on the cluster when the pipeline starts it, so ``-p``,
``--fail-fast`` and ``-t`` mean what they mean in one process. Each host's
output arrives whole when the host ends (the workers do not stream lines); its
lines go through the pipeline then, so the final output is a local run's.

Dask's calls wait, in threads of their own (gevent's thread pool): the event
loop goes on meanwhile (progress bar, signals, timers).
"""
from __future__ import annotations

import logging
from typing import List, Optional, Set

import gevent
from gevent.queue import Queue

from pssh import exceptions as exc
from pssh.cli.executors import reason
from pssh.cli.hosts import HostSpec, UsageError
from pssh.cli.pipeline import HostEvents, ended_without_status
from pssh.config import HostConfig
from pssh.options import ConnectOptions

log = logging.getLogger("pssh.cli")


class ClusterExecutor:
    """The :class:`~pssh.cli.pipeline.Executor` of a Dask cluster (``run`` only)."""

    def __init__(self, args, hosts: List[HostSpec], connect: ConnectOptions, config,
                 events: HostEvents) -> None:
        try:
            from pssh.clients.cluster import run_on_cluster
        except ImportError:
            raise UsageError("--scheduler needs Dask: pip install 'pssh[dask]' "
                             "(dask and distributed)") from None
        self.events = events
        self.threads = gevent.get_hub().threadpool
        try:
            self.run = run_on_cluster(
                args.scheduler, [h.host for h in hosts], args.command,
                host_config=[HostConfig(user=h.user, port=h.port) for h in hosts],
                ssh_config=config, sudo=args.sudo, idempotent=args.idempotent,
                pool_size=args.parallel, paced=True, **connect.given())
        except OSError as err:  # no scheduler at that address
            raise UsageError(f"cannot reach the Dask scheduler {args.scheduler}: {err}") \
                from None
        self._orders: Queue = Queue()
        self._unreported: Set[int] = set()  # hosts started that have not ended
        self._broken: Optional[str] = None  # why no more results can come
        self._closing = False
        self._sender = gevent.spawn(self._send_orders)
        self._receiver = gevent.spawn(self._receive)

    # -- orders, sent in order by one greenlet (consecutive starts together) -----------

    def start(self, index: int) -> None:
        if self._broken is not None:
            self.events.finished(index, error=self._broken)
            return
        self._unreported.add(index)
        self._orders.put(("start", index))

    def cancel(self, index: int, error: exc.PSSHError) -> None:
        self._orders.put(("cancel", index, error))

    def done_starting(self) -> None:
        self._orders.put(("done",))

    def _send_orders(self) -> None:
        while True:
            orders = [self._orders.get()]
            while not self._orders.empty():
                orders.append(self._orders.get_nowait())
            try:
                self._send(orders)
            except Exception as err:  # the scheduler is gone
                self._lost(f"the Dask run failed: {err}")
                return

    def _send(self, orders: list) -> None:
        starts: List[int] = []
        for order in orders + [("end",)]:
            if order[0] == "start":
                starts.append(order[1])
                continue
            if starts:
                self.threads.apply(self.run.start, (starts,))
                starts = []
            if order[0] == "cancel":
                self.threads.apply(self.run.cancel, order[1:])
            elif order[0] == "done":
                self.threads.apply(self.run.done_starting)

    # -- results -----------------------------------------------------------------------

    def _receive(self) -> None:
        results = iter(self.run)
        while True:
            try:
                result = self.threads.apply(next, (results, None))
            except Exception as err:  # the scheduler is gone, or the run was closed
                if not self._closing:
                    self._lost(f"the Dask run failed: {err}")
                return
            if result is None:
                return
            index = result.index
            self._unreported.discard(index)
            if result.started:
                self.events.command_started(index)
            for stderr, text in ((False, result.stdout), (True, result.stderr)):
                for line in text.split("\n") if text else ():
                    self.events.line(index, line, stderr)
            if result.exception is not None:
                self.events.finished(index, error=reason(result.exception))
            elif result.exit_code is None:
                self.events.finished(index, error=ended_without_status(result.exit_signal))
            else:
                self.events.finished(index, result.exit_code)

    def _lost(self, why: str) -> None:
        """No result can come any more: the hosts started end with ``why``."""
        log.error("%s", why)
        self._broken = why
        for index in sorted(self._unreported):
            self._unreported.discard(index)
            self.events.finished(index, error=why)

    # -- the end -----------------------------------------------------------------------

    def stop(self) -> None:
        self._sender.kill()
        self.threads.apply(self.run.stop)  # the tasks stop their commands, then end

    def close(self, now: bool = False) -> None:
        self._closing = True
        self._sender.kill()
        self.threads.apply(self.run.close, (not now,))  # now: no waiting for the tasks
        self._receiver.join(5)
        self._receiver.kill()

