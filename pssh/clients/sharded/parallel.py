"""``ParallelSSHClient(hosts, processes=N)``: the hosts sharded over N worker processes.

One gevent hub is one core. With ``processes`` each worker process runs its
shard of the hosts (host ``i`` goes to worker ``i % N``) with the ordinary
client in a hub of its own, and this process keeps the client's API: the
base client's per-host steps (``_run_command``, ``_copy_file``, ...) are
forwarded to the host's worker, and ``run_command`` returns ordinary
:class:`~pssh.output.HostOutput` objects whose output streams from the
workers as it is read (see :mod:`pssh.clients.sharded.remote`).

Why a subclass chosen by ``ParallelSSHClient(processes=...)`` and not a
separate API: every program written for the parallel client runs sharded by
adding one argument, and everything but the per-host steps is the base
client's code, run unchanged in the parent (join, as_completed, cancel, host
arguments, copy arguments, host_config).
"""
from __future__ import annotations

import logging
import os
import weakref
from typing import TYPE_CHECKING, List, Optional, Union

import gevent
from gevent.lock import RLock
from gevent.pool import Pool

from pssh import exceptions as exc
from pssh.clients.base.parallel import HostGreenlet
from pssh.clients.native.parallel import ParallelSSHClient
from pssh.clients.sharded.remote import RemoteCommand, RemoteHostClient, RemoteStdin
from pssh.output import HostOutput, HostOutputBuffers

if TYPE_CHECKING:
    from pssh.clients.sharded.process import WorkerProcess

log = logging.getLogger("pssh.sharded")


def worker_count(processes: Union[int, str], hosts: int) -> int:
    """How many workers ``processes`` asks for (``"auto"``: one per usable core), never
    more than there are hosts."""
    if processes == "auto":
        wanted = len(os.sched_getaffinity(0))
    else:
        try:
            wanted = int(processes)
        except (TypeError, ValueError):
            raise ValueError(f"processes must be a number or 'auto', not {processes!r}") \
                from None
        if wanted < 1:
            raise ValueError(f"processes must be at least 1, not {wanted}")
    return max(1, min(wanted, hosts))


def _in_worker(name: str):
    """A per-host step of the base client, done by the host's worker."""
    def step(self, host_i: int, host: str, *args, callback=None, **kwargs):
        if callback is not None:  # called here with what the worker reports
            kwargs["callback"] = True
        return self._worker(host_i).request("call", host_i, name, args, kwargs, host=host,
                                            progress=callback)
    step.__name__ = name
    step.__doc__ = f"The base client's ``{name}``, in the worker process of ``hosts[host_i]``."
    return step


class ShardedParallelSSHClient(ParallelSSHClient):
    """:class:`~pssh.clients.ParallelSSHClient` with its hosts sharded over worker processes.

    Made by ``ParallelSSHClient(hosts, ..., processes=N)`` (``"auto"``: one per
    usable core; never more than there are hosts); the arguments and methods
    are the parallel client's. Workers start on first use, each with its own
    hub and connections; ``pool_size`` applies per worker. Commands start
    ``cancellable`` by default, so that stopping them (``cancel``, ``close``, or
    this process ending, Ctrl-C included) stops them on the hosts for sure.

    A worker that dies fails its own hosts only: their ``HostOutput`` gets a
    :class:`~pssh.exceptions.WorkerError` in ``exception`` (reading their output
    raises it; ``join`` logs it and carries on with the other hosts), and the
    next use of those hosts starts a new worker. Per-host clients live in the
    workers: ``host_client()`` and interactive shells are not available.
    """

    def __init__(self, hosts, *args, processes: Union[int, str, None] = "auto",
                 **kwargs) -> None:
        super().__init__(hosts, *args, **kwargs)
        self.processes = processes or 1
        self._workers: List[Optional[WorkerProcess]] = []
        # Starting a worker waits (the process is spawned): hosts asking for their workers
        # at once must not start one twice (the second would be lost, never closed).
        self._starting = RLock()
        self._finalizer = weakref.finalize(self, _close_workers, self._workers)
        self._size_pool()

    def _size_pool(self) -> None:
        # pool_size applies per worker; here the hosts' greenlets only wait on them.
        count = worker_count(self.processes, len(self.hosts))
        self.pool = Pool(size=self.pool_size * count, greenlet_class=HostGreenlet)

    @property
    def hosts(self) -> List[str]:
        return self._hosts

    @hosts.setter
    def hosts(self, hosts) -> None:
        self._hosts = self._validate_hosts(hosts)
        _close_workers(self._workers)  # the shards change: new workers on next use
        self._size_pool()

    # -- workers ---------------------------------------------------------------------

    @property
    def workers(self) -> List[WorkerProcess]:
        """The worker processes (started if they were not)."""
        with self._starting:
            count = worker_count(self.processes, len(self.hosts))
            if len(self._workers) != count:
                _close_workers(self._workers)
                self._workers.extend([None] * count)
            for number, worker in enumerate(self._workers):
                if worker is None or not worker.alive:
                    self._workers[number] = self._start_worker(number, count)
            return list(self._workers)

    def _start_worker(self, number: int, count: int) -> WorkerProcess:
        shard = [(i, host) for i, host in enumerate(self.hosts) if i % count == number]
        options = [self._host_options(i) for i, _ in shard]
        init = (shard, options, self._ssh_config or False, self.pool_size,
                logging.getLogger("pssh").getEffectiveLevel())
        # Imported with the first worker: subprocess and pickle cost every program that
        # imports pssh.clients a few milliseconds of start-up, and most never shard.
        from pssh.clients.sharded.process import WorkerProcess
        return WorkerProcess(number, shard, init)

    def _worker(self, host_i: int) -> WorkerProcess:
        workers = self._workers
        worker = workers[host_i % len(workers)] if workers else None
        if worker is None or not worker.alive:
            worker = self.workers[host_i % len(self._workers)]
        return worker

    # -- the per-host steps ------------------------------------------------------------

    def run_command(self, command: str, *args, cancellable: bool = True,
                    **kwargs) -> List[HostOutput]:
        """As :meth:`ParallelSSHClient.run_command`; ``cancellable`` is on by default."""
        self.workers  # started before the hosts' greenlets ask for them
        return super().run_command(command, *args, cancellable=cancellable, **kwargs)

    def _run_command(self, host_i: int, host: str, command: str, encoding: str = "utf-8",
                     read_timeout: Optional[float] = None, errors: str = "replace",
                     **kwargs) -> HostOutput:
        worker = self._worker(host_i)
        command_id = worker.new_id()
        remote = RemoteCommand(worker, command_id, host)
        worker.commands[command_id] = remote  # its output may follow the answer at once
        try:
            sent = worker.request("call", host_i, "_run_command", (command,),
                                  dict(kwargs, encoding=encoding, errors=errors),
                                  host=host, request_id=command_id)
        except BaseException:
            worker.commands.pop(command_id, None)
            raise
        return HostOutput(host, remote, RemoteStdin(remote), RemoteHostClient(host),
                          alias=self._host_options(host_i).alias, encoding=encoding,
                          read_timeout=read_timeout, buffers=HostOutputBuffers.of(remote),
                          fully_qualified_command=sent, errors=errors)

    def _spawn_pairs(self, per_host, pairs, **kwargs) -> List[gevent.Greenlet]:
        # The workers start here, before the hosts' greenlets ask for them: starting one
        # waits (gevent's Popen), and two greenlets would each start the same worker.
        self.workers
        return super()._spawn_pairs(per_host, pairs, **kwargs)

    _copy_file = _in_worker("_copy_file")
    _copy_remote_file = _in_worker("_copy_remote_file")
    _scp_send = _in_worker("_scp_send")
    _scp_recv = _in_worker("_scp_recv")
    _connect = _in_worker("_connect_only")

    def connect_auth(self) -> List[gevent.Greenlet]:
        """Connect and log in to every host now, each in its worker."""
        self.workers
        return [self.pool.spawn(self._connect, i, host) for i, host in enumerate(self.hosts)]

    def connect_host(self, host_i: int) -> None:
        self._connect(host_i, self.hosts[host_i])

    def _get_ssh_client(self, host_i: int, host: str):
        raise exc.PSSHError("%s: with processes=N each host's client lives in a worker "
                            "process; use the parallel client's methods", host, host=host)

    def disconnect_host(self, host_i: int) -> None:
        self._worker(host_i).request("call", host_i, "_disconnect_only", (), {},
                                     host=self.hosts[host_i])

    def close(self) -> None:
        """Stop the workers: commands still running are stopped on their hosts."""
        _close_workers(self._workers)


def _close_workers(workers: List[Optional[WorkerProcess]]) -> None:
    running = [w for w in workers if w is not None]
    workers.clear()
    gevent.joinall([gevent.spawn(w.close) for w in running])


# ParallelSSHClient(processes=N) makes this class (the base never imports it).
ParallelSSHClient.sharded_class = ShardedParallelSSHClient
