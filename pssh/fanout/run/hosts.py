"""The "run" job, in the parent: ``ParallelSSHClient(hosts, processes=N)``'s hosts, sharded
over N workers.

One gevent hub is one core. With ``processes`` each worker runs its shard of the
hosts (host ``i`` goes to worker ``i % N``) with the ordinary client in a hub of its
own (:mod:`pssh.fanout.run.shard`), and the client in this process keeps its API:
its per-host steps (``_run_command``, ``_copy_file``, ...) are handed to
:class:`ShardedHosts`, which forwards each to the host's worker; ``run_command``
returns ordinary :class:`~pssh.output.HostOutput` objects whose output streams from
the workers as it is read (:mod:`pssh.fanout.run.remote`).

The workers come from the group the client gives (a transport's ``with`` scope,
e.g. :class:`~pssh.fanout.process.ProcessGroup`): this module does not know how they
run.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from gevent.event import AsyncResult
from gevent.lock import RLock

from pssh import exceptions as exc
from pssh.fanout.link import WorkerGone
from pssh.fanout.run.remote import RemoteCommand, RemoteHostClient, RemoteStdin
from pssh.options import ConnectOptions
from pssh.output import HostOutput, HostOutputBuffers

log = logging.getLogger("pssh.fanout.run")

#: The job a shard runs (see :mod:`pssh.fanout.run.shard`).
JOB = "pssh.fanout.run.shard:serve"


class Group(Protocol):
    """What this needs of a transport's group of workers."""

    def start(self, label: str, job: str, init: Any, on_message: Callable[[tuple], None],
              on_gone: Callable[[str], None]) -> Any: ...

    def stop(self, workers: list, timeout: Optional[float] = None) -> None: ...


class ShardWorker:
    """One worker of the run job: the calls waiting for an answer, its commands."""

    def __init__(self, group: Group, number: int, hosts: List[Tuple[int, str]],
                 init: tuple) -> None:
        self.number = number
        self.hosts = dict(hosts)  # the client's host index -> host name
        self._ids = itertools.count()
        self._waiting: Dict[int, Tuple[AsyncResult, Optional[str]]] = {}
        self._progress: Dict[int, Callable] = {}
        #: The commands it runs, by id (the id of the request that started each).
        self.commands: Dict[int, RemoteCommand] = {}
        self.error: Optional[str] = None  # why it is gone, once it is
        self.transport = group.start(f"worker process {number}", JOB, init, self._dispatch,
                                     self._gone)
        self.pid: Optional[int] = getattr(self.transport, "pid", None)
        log.debug("worker %d (pid %s) runs %d hosts", number, self.pid, len(self.hosts))

    @property
    def alive(self) -> bool:
        return self.error is None

    def new_id(self) -> int:
        return next(self._ids)

    def send(self, message: tuple, host: Optional[str] = None) -> None:
        """Send one message; :class:`~pssh.exceptions.WorkerError` (naming ``host``) if the
        worker is gone."""
        if self.error is None:
            try:
                return self.transport.send(message)
            except WorkerGone as gone:
                self._gone(gone.why)
        raise self.lost_error(host)

    def request(self, kind: str, *args, host: Optional[str] = None,
                request_id: Optional[int] = None, progress=None):
        """Send ``(kind, id, *args)`` and wait for its answer (its error is raised here);
        ``progress(*values)`` is called with each progress report the request makes."""
        request_id = self.new_id() if request_id is None else request_id
        result = AsyncResult()
        self._waiting[request_id] = (result, host)
        if progress is not None:
            self._progress[request_id] = progress
        try:
            self.send((kind, request_id) + args, host)
            return result.get()
        finally:
            self._waiting.pop(request_id, None)
            self._progress.pop(request_id, None)

    def _dispatch(self, message: tuple) -> None:
        kind, key, *rest = message
        if kind in ("data", "eof", "status", "exit", "lost"):
            command = self.commands.pop(key) if kind in ("exit", "lost") \
                else self.commands.get(key)
            if command is not None:
                getattr(command, "on_" + kind)(*rest)
        elif kind == "progress":
            report = self._progress.get(key)
            if report is not None:
                report(*rest)
        elif kind == "log":  # the worker's log record, logged here as if logged here
            record = logging.makeLogRecord(rest[0])
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)
        else:
            waiting = self._waiting.get(key)
            if waiting is not None:
                if kind == "done":
                    waiting[0].set(rest[0])
                else:
                    waiting[0].set_exception(rest[0])

    def _gone(self, why: str) -> None:
        """The worker is gone: everything still waiting on it fails, naming its host."""
        if self.error is not None:
            return
        self.error = why
        if why != "closed":
            log.error("worker process %s (pid %s) %s", self.number, self.pid, why)
        for result, host in list(self._waiting.values()):
            result.set_exception(self.lost_error(host))
        for command in self.commands.values():
            command.on_lost(self.lost_error(command.host))
        self.commands.clear()

    def lost_error(self, host: Optional[str]) -> exc.WorkerError:
        if host is None:
            return exc.WorkerError("worker process %s (pid %s) is gone: it %s", self.number,
                                   self.pid, self.error)
        return exc.WorkerError("%s: worker process %s (pid %s) %s before the work on this "
                               "host was done", host, self.number, self.pid, self.error,
                               host=host)


class ShardedHosts:
    """The hosts of a parallel client, sharded over workers of ``group``. ``hosts()`` and
    ``options(i)`` are the client's (read at each worker's start: the client may change
    its hosts); ``pool_size`` applies per worker."""

    def __init__(self, group: Group, count: Callable[[], int], hosts: Callable[[], List[str]],
                 options: Callable[[int], ConnectOptions], ssh_config, pool_size: int) -> None:
        self.group = group
        #: How many workers the hosts are sharded over now.
        self.count = count
        self._hosts, self._options = hosts, options
        self.ssh_config = ssh_config
        self.pool_size = pool_size
        self._workers: List[Optional[ShardWorker]] = []
        # Starting a worker waits (the process is spawned): hosts asking for their workers
        # at once must not start one twice (the second would be lost, never closed).
        self._starting = RLock()

    # -- workers ---------------------------------------------------------------------

    @property
    def workers(self) -> List[ShardWorker]:
        """The workers (started if they were not, or started again if they died)."""
        with self._starting:
            count = self.count()
            if len(self._workers) != count:
                self.close()
                self._workers.extend([None] * count)
            for number, worker in enumerate(self._workers):
                if worker is None or not worker.alive:
                    self._workers[number] = self._start(number, count)
            return list(self._workers)

    def _start(self, number: int, count: int) -> ShardWorker:
        shard = [(i, host) for i, host in enumerate(self._hosts()) if i % count == number]
        options = [self._options(i) for i, _ in shard]
        init = (shard, options, self.ssh_config or False, self.pool_size,
                logging.getLogger("pssh").getEffectiveLevel())
        return ShardWorker(self.group, number, shard, init)

    def worker(self, host_i: int) -> ShardWorker:
        workers = self._workers
        worker = workers[host_i % len(workers)] if workers else None
        if worker is None or not worker.alive:
            worker = self.workers[host_i % len(self._workers)]
        return worker

    def close(self) -> None:
        """Stop the workers: commands still running are stopped on their hosts."""
        running = [w.transport for w in self._workers if w is not None]
        self._workers.clear()
        self.group.stop(running)

    # -- the client's per-host steps, in the host's worker -----------------------------

    def call(self, name: str, host_i: int, host: str, *args, callback=None, **kwargs):
        """The client's per-host step ``name``, done by the host's worker; ``callback``
        is called here with what the worker reports."""
        if callback is not None:
            kwargs["callback"] = True
        return self.worker(host_i).request("call", host_i, name, args, kwargs, host=host,
                                           progress=callback)

    def run_command(self, host_i: int, host: str, command: str, encoding: str = "utf-8",
                    read_timeout: Optional[float] = None, errors: str = "replace",
                    **kwargs) -> HostOutput:
        """The client's ``_run_command``: the command runs in the worker, its output streams
        here as it is read."""
        worker = self.worker(host_i)
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
                          alias=self._options(host_i).alias, encoding=encoding,
                          read_timeout=read_timeout, buffers=HostOutputBuffers.of(remote),
                          fully_qualified_command=sent, errors=errors)

    def connect(self, host_i: int, host: str) -> None:
        self.call("_connect_only", host_i, host)

    def disconnect(self, host_i: int, host: str) -> None:
        self.call("_disconnect_only", host_i, host)

