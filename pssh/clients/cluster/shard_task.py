"""What a Dask worker runs for :func:`pssh.clients.cluster.run_on_cluster`: one shard of hosts.

The shard runs with the ordinary gevent client in the worker's task thread
(a hub of its own), and each host's :class:`HostRunResult` goes to the run's
Dask queue the moment it completes, so the caller sees hosts as they end.

A shard runs at most once unless its command is idempotent: its first
attempt sets a Dask event before anything starts. Dask runs a task again when
the worker running it is lost; an attempt that finds the event set reports
every host of the shard as failed (:class:`~pssh.exceptions.WorkerError`),
or, for an idempotent command, runs the shard again (the caller keeps the
first result of each host).
"""
from __future__ import annotations

import logging
import pickle
import socket
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from pssh import exceptions as exc
from pssh.clients.sharded.frames import portable
from pssh.options import ConnectOptions

log = logging.getLogger("pssh.cluster")

#: Seconds between a running shard's looks at the run's stop event.
STOP_POLL = 1.0


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
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exception is None and self.exit_code == 0


@dataclass
class Shard:
    """One task's hosts: (index, host) pairs with their resolved options."""

    run_id: str
    number: int
    hosts: List[Tuple[int, str]]
    options: List[ConnectOptions]

    @property
    def name(self) -> str:
        return f"pssh-{self.run_id}-shard-{self.number}"


def run_shard(shard: Shard, command: str, ssh_config, run_kwargs: dict, idempotent: bool,
              pool_size: int) -> int:
    """Run ``command`` on the shard's hosts; put each host's result on the run's queue.
    Returns how many hosts it reported."""
    from distributed import Event, Queue, get_worker

    queue = Queue(f"pssh-{shard.run_id}")
    worker = f"{get_worker().address} ({socket.gethostname()})"
    started = Event(shard.name)
    if started.is_set() and not idempotent:
        for index, host in shard.hosts:
            queue.put(_pickled(HostRunResult(index, host, worker=worker, exception=exc.WorkerError(
                "%s: the Dask worker running this host's shard was lost mid-run; the command "
                "was not run again (it is not marked idempotent)", host, host=host))))
        return len(shard.hosts)
    started.set()
    return _run(shard, command, ssh_config, run_kwargs, pool_size, queue, worker)


def _run(shard: Shard, command, ssh_config, run_kwargs, pool_size, queue, worker) -> int:
    import gevent
    from distributed import Event

    from pssh.clients.sharded.worker import ShardClient
    client = ShardClient([host for _, host in shard.hosts], shard.options, ssh_config,
                         pool_size)
    began = time.monotonic()
    stop = Event(f"pssh-{shard.run_id}-stop")
    output = client.run_command(command, stop_on_errors=False, cancellable=True, **run_kwargs)
    watcher = gevent.spawn(_stop_when_asked, stop, client, output)
    reported = 0
    index_of = {id(host_output): index for host_output, (index, _) in zip(output, shard.hosts)}
    try:
        for host_output in client.as_completed(output):
            index = index_of[id(host_output)]
            queue.put(_pickled(_result(index, host_output, worker, time.monotonic() - began)))
            reported += 1
    finally:
        watcher.kill()
        client.close()
    return reported


def _stop_when_asked(stop, client, output) -> None:
    import gevent
    while not stop.is_set():
        gevent.sleep(STOP_POLL)
    log.info("run stopped: cancelling the commands still running")
    client.cancel(output, timeout=10)


def _result(index: int, host_output, worker: str, duration: float) -> HostRunResult:
    result = HostRunResult(index, host_output.host, worker=worker, duration=duration,
                           exception=_portable(host_output.exception))
    if host_output.exception is None:
        try:
            result.stdout = "\n".join(host_output.stdout)
            result.stderr = "\n".join(host_output.stderr)
            result.exit_code = host_output.exit_code
            result.exit_signal = host_output.exit_signal
        except Exception as err:  # the connection broke while reading
            result.exception = _portable(err)
    return result


def _pickled(result: HostRunResult) -> bytes:
    # Pickled here: Dask queues send msgpack, and warn for each object they must pickle.
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _portable(err: Optional[BaseException]) -> Optional[BaseException]:
    return None if err is None else portable(err)
