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
    """What this needs of a transport's group of workers (``placement``: where a worker
    may run, as a :data:`Plan` gives it; a transport with no choice refuses any)."""

    def start(self, label: str, job: str, init: Any, on_message: Callable[[tuple], None],
              on_gone: Callable[[str], None], **placement: Any) -> Any: ...

    def stop(self, workers: list, timeout: Optional[float] = None) -> None: ...


def lowest_pssh_level() -> int:
    """The lowest level any of pssh's loggers logs at here: the level the workers send
    records at. Each record sent is then handled here by the logger of its name, at that
    logger's level (a program that shows one logger's INFO records sees its workers')."""
    loggers = [logger for name, logger in logging.root.manager.loggerDict.items()
               if name.startswith("pssh.") and isinstance(logger, logging.Logger)]
    return min([logging.getLogger("pssh").getEffectiveLevel()]
               + [logger.level for logger in loggers if logger.level])


class ShardWorker:
    """One worker of the run job: the calls waiting for an answer, its commands."""

    def __init__(self, group: Group, number: int, hosts: List[Tuple[int, str]],
                 init: tuple, kind: str = "worker process",
                 placement: Optional[Dict[str, Any]] = None) -> None:
        self.number = number
        self.kind = kind
        self.hosts = dict(hosts)  # the client's host index -> host name
        self._ids = itertools.count()
        self._waiting: Dict[int, Tuple[AsyncResult, Optional[str]]] = {}
        self._progress: Dict[int, Callable] = {}
        #: The commands it runs, by id (the id of the request that started each).
        self.commands: Dict[int, RemoteCommand] = {}
        self.error: Optional[str] = None  # why it is gone, once it is
        self.transport = group.start(f"{kind} {number}", JOB, init, self._dispatch,
                                     self._gone, **(placement or {}))
        #: The worker's process id, for a worker process.
        self.pid: Optional[int] = getattr(self.transport, "pid", None)
        log.debug("%s runs %d hosts", self.name, len(self.hosts))

    @property
    def name(self) -> str:
        """The worker, and where it runs as far as known ("worker process 1 (pid 123)")."""
        where = f"pid {self.pid}" if self.pid is not None \
            else getattr(self.transport, "where", None)
        return f"{self.kind} {self.number}" + (f" ({where})" if where else "")

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
            log.error("%s %s", self.name, why)
        for result, host in list(self._waiting.values()):
            result.set_exception(self.lost_error(host))
        for command in self.commands.values():
            command.on_lost(self.lost_error(command.host))
        self.commands.clear()

    def lost_error(self, host: Optional[str]) -> exc.WorkerError:
        if host is None:
            return exc.WorkerError("%s is gone: it %s", self.name, self.error)
        return exc.WorkerError("%s: %s %s before the work on this host was done", host,
                               self.name, self.error, host=host)


#: How hosts are sharded: per shard, where its worker may run (keywords of the group's
#: ``start``, such as Dask ``resources``) and the indices of its hosts.
Plan = List[Tuple[Dict[str, Any], List[int]]]


def round_robin(count: int, hosts: int) -> Plan:
    """Host ``i`` in shard ``i % count``, any worker."""
    return [({}, list(range(number, hosts, count))) for number in range(count)]


class ShardedHosts:
    """The hosts of a parallel client, sharded over workers of ``group`` as ``plan()``
    says. ``hosts()`` and ``options(i)`` are the client's (read at each worker's start:
    the client may change its hosts); ``pool_size`` applies per worker."""

    def __init__(self, group: Group, plan: Callable[[], Plan], hosts: Callable[[], List[str]],
                 options: Callable[[int], ConnectOptions], ssh_config, pool_size: int,
                 kind: str = "worker process", own_process: bool = True,
                 runner: Optional[str] = None) -> None:
        self.group = group
        #: The runner of the workers' clients (:mod:`pssh.runners`): the parent client's
        #: (None: each worker's default, its environment's ``PSSH_RUNNER``).
        self.runner = runner
        self.plan = plan
        self.kind = kind
        #: Whether the workers are processes of their own, whose logging is the job's to
        #: set (otherwise only the records of pssh's loggers come here).
        self.own_process = own_process
        self._hosts, self._options = hosts, options
        self.ssh_config = ssh_config
        self.pool_size = pool_size
        self._plan: Optional[Plan] = None  # the plan of the workers there are
        self._shard_of: Dict[int, int] = {}
        self._workers: List[Optional[ShardWorker]] = []
        # Starting a worker waits (the process is spawned): hosts asking for their workers
        # at once must not start one twice (the second would be lost, never closed).
        self._starting = RLock()

    def count(self) -> int:
        """How many workers the hosts are sharded over now."""
        return len(self.plan())

    # -- workers ---------------------------------------------------------------------

    def start(self) -> List[ShardWorker]:
        """Start the workers not running (all of them when the plan changed: new hosts,
        new shards); returns every worker, in shard order."""
        with self._starting:
            plan = self.plan()
            if plan != self._plan:  # new hosts: new shards
                self.close()
                self._plan = plan
                self._shard_of = {i: n for n, (_, indices) in enumerate(plan) for i in indices}
                self._workers.extend([None] * len(plan))
            workers = []
            for number, worker in enumerate(self._workers):
                if worker is None or not worker.alive:
                    worker = self._workers[number] = self._start(number)
                workers.append(worker)
            return workers

    def _start(self, number: int) -> ShardWorker:
        # Only ever for a shard of the plan of the workers there are (see start, worker).
        assert self._plan is not None, "a worker starts for a shard of a plan"
        placement, indices = self._plan[number]
        hosts = self._hosts()
        shard = [(i, hosts[i]) for i in indices]
        options = [self._options(i) for i in indices]
        init = (shard, options, self.ssh_config or False, self.pool_size,
                lowest_pssh_level(), self.own_process, self.runner)
        return ShardWorker(self.group, number, shard, init, self.kind, placement)

    def worker(self, host_i: int) -> ShardWorker:
        """The worker of ``hosts[host_i]`` (started if it was not, or had died)."""
        number = self._shard_of.get(host_i)
        worker = self._workers[number] if number is not None and self._workers else None
        if worker is not None and worker.alive:
            return worker
        with self._starting:
            if self._plan is None or self._plan != self.plan():
                self.start()  # (new) shards: every worker starts
            number = self._shard_of[host_i]
            worker = self._workers[number]
            if worker is None or not worker.alive:  # this one alone starts (again)
                worker = self._workers[number] = self._start(number)
            return worker

    def retire(self, number: int) -> None:
        """Stop the worker of shard ``number`` (a later use of its hosts starts it again)."""
        worker = self._workers[number]
        self._workers[number] = None
        if worker is not None:
            self.group.stop([worker.transport])

    def close(self) -> None:
        """Stop the workers: commands still running are stopped on their hosts."""
        running = [w.transport for w in self._workers if w is not None]
        self._workers.clear()
        self._plan = None
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
        """Close the host's connection in its worker; none to close if that worker is not
        running (a lost worker's connections went with it): none is started for this."""
        number = self._shard_of.get(host_i)
        worker = self._workers[number] if number is not None and self._workers else None
        if worker is not None and worker.alive:
            worker.request("call", host_i, "_disconnect_only", (), {}, host=host)

