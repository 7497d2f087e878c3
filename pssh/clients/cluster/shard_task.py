"""What a Dask worker runs for :func:`pssh.clients.cluster.run_on_cluster`: one shard of hosts.

The shard runs with the ordinary gevent client in the worker's task thread
(a hub of its own). The task starts a host only when the caller says so,
through the shard's control queue (``start``: a list of hosts, the whole shard
at once unless the caller paces the run), and each host's
:class:`HostRunResult` goes to the run's report queue the moment it completes,
so the caller sees hosts as they end. The caller can also stop one host
(``cancel``), say no more hosts will start (``no-more``: the task ends once its
hosts are done) or stop everything (``stop``). The caller says ``alive`` every
:data:`HEARTBEAT` seconds: a task that hears nothing for :data:`CALLER_LOST`
seconds stops as if told to (a caller killed outright leaves nothing running).
The task looks at its queue without waiting there (a timed-out wait is an
error in the scheduler's log), more often while messages come.

A shard runs at most once unless the caller allows it: its first attempt sets
a Dask event before anything starts. Dask runs a task again when the worker
running it is lost; an attempt that finds the event set announces itself
(``attempt``, with an id of its own) and serves a control queue of its own
(a lost worker's pending read of the first one would swallow a message): the
caller decides what becomes of the hosts the lost attempt had started (run
again for an idempotent command, failed otherwise) and goes on starting the
others there.

Messages are pickled tuples ``(kind, *values)`` (Dask queues carry msgpack,
and warn for each object they must pickle).
"""
from __future__ import annotations

import logging
import pickle
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from pssh import exceptions as exc
from pssh.fanout.frames import portable
from pssh.options import ConnectOptions

log = logging.getLogger("pssh.cluster")

#: Seconds a stopped shard allows its commands to stop.
STOP_TIMEOUT = 10.0
#: Seconds between the caller's ``alive`` messages, and the silence that stops a shard.
HEARTBEAT, CALLER_LOST = 5.0, 30.0
#: Seconds between looks at an idle control queue: from the first to the last.
POLL_FIRST, POLL_LAST = 0.01, 0.25


#: Set in a worker process told to stop (see :mod:`pssh.clients.cluster.local_worker`):
#: every shard there stops.
_STOP_EVERY_SHARD = threading.Event()


def stop_every_shard() -> None:
    """Stop every shard running in this process (from a signal handler: only a flag)."""
    _STOP_EVERY_SHARD.set()


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

    def control_name(self, attempt: Optional[str] = None) -> str:
        """The queue of the caller's messages to this shard's ``attempt`` (None: the
        first)."""
        return f"{self.name}-control" + (f"-{attempt}" if attempt else "")


def report_queue_name(run_id: str) -> str:
    """The queue of every shard's messages to the caller."""
    return f"pssh-{run_id}"


def pickled(message: tuple) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def run_shard(shard: Shard, command: str, ssh_config, run_kwargs: dict, pool_size: int) -> int:
    """Serve the caller's messages for the shard's hosts until the shard is done; put each
    host's result on the run's report queue. Returns how many hosts it reported."""
    from distributed import Event, Queue, get_worker

    reports = Queue(report_queue_name(shard.run_id))
    worker = f"{get_worker().address} ({socket.gethostname()})"
    first = Event(shard.name)
    attempt = None
    if first.is_set():  # an earlier attempt's worker was lost
        attempt = uuid.uuid4().hex[:12]
        log.warning("shard %s runs again (attempt %s)", shard.number, attempt)
    control = Queue(shard.control_name(attempt))
    if attempt is not None:
        reports.put(pickled(("attempt", shard.number, attempt)))
    first.set()
    return _ShardServer(shard, command, ssh_config, run_kwargs, pool_size, reports, control,
                        worker).serve()


class _ShardServer:
    """The hosts of one shard, started, stopped and reported as the caller's messages say."""

    def __init__(self, shard: Shard, command: str, ssh_config, run_kwargs: dict,
                 pool_size: int, reports, control, worker: str) -> None:
        import gevent
        from gevent.event import Event
        from gevent.lock import BoundedSemaphore

        from pssh.fanout.run.shard import ShardClient
        self.client = ShardClient([host for _, host in shard.hosts], shard.options, ssh_config,
                                  pool_size)
        self.shard = shard
        self.command = command
        self.run_kwargs = run_kwargs
        self.reports = reports
        self.control = control
        self.worker = worker
        self.local = {index: (i, host) for i, (index, host) in enumerate(shard.hosts)}
        self.slots = BoundedSemaphore(pool_size)
        self.hosts: Dict[int, "gevent.Greenlet"] = {}  # running, by the caller's index
        self.outputs: Dict[int, object] = {}  # their commands, once started
        self.seen: set = set()  # every host started (a host starts once per attempt)
        self.cancelled: Dict[int, BaseException] = {}  # why, for hosts the caller stopped
        self.reporting: set = set()  # hosts whose result is on its way
        self.no_more = False
        self.stopping = False
        self.reported = 0
        self.done = Event()
        self._gevent = gevent

    # -- messages --------------------------------------------------------------------

    def serve(self) -> int:
        reader = self._gevent.spawn(self._read)
        try:
            self.done.wait()
        finally:
            reader.kill()
            self.client.close()
        return self.reported

    def _blocking(self, call, *args):
        """A Dask call, made in a thread: this hub goes on serving the hosts meanwhile."""
        return self._gevent.get_hub().threadpool.apply(call, args)

    def _read(self) -> None:
        pause, heard = POLL_FIRST, time.monotonic()
        while True:
            messages = self._blocking(self.control.get, None, True)  # all there, no wait
            for message in messages:
                kind, *values = pickle.loads(message)
                getattr(self, "_on_" + kind.replace("-", "_"))(*values)
            now = time.monotonic()
            if messages:
                pause, heard = POLL_FIRST, now
            elif self.stopping:
                pass
            elif _STOP_EVERY_SHARD.is_set():
                log.warning("shard %s: this worker process was told to stop: stopping",
                            self.shard.number)
                self._on_stop()
            elif now - heard > CALLER_LOST:
                log.warning("shard %s: no word from the caller for %.0f s: stopping",
                            self.shard.number, now - heard)
                self._on_stop()
            self._gevent.sleep(pause)
            pause = min(POLL_LAST, pause * 2)

    def _on_alive(self) -> None:
        pass

    def _on_start(self, indices: List[int]) -> None:
        for index in indices:
            if index in self.seen or self.stopping:
                continue
            self.seen.add(index)
            greenlet = self.hosts[index] = self._gevent.spawn(self._run_host, index)
            greenlet.link(self._host_gone)

    def _on_cancel(self, index: int, error: BaseException) -> None:
        greenlet = self.hosts.get(index)
        if greenlet is not None:
            self.cancelled[index] = error
            greenlet.kill(block=False)  # GreenletExit: quiet even if it had not run yet

    def _on_no_more(self) -> None:
        self.no_more = True
        self._check_done()

    def _on_stop(self) -> None:
        self.stopping = True
        outputs = list(self.outputs.values())
        if outputs:
            log.info("run stopped: cancelling %d commands", len(outputs))
            self.client.cancel(outputs, timeout=STOP_TIMEOUT)
        # Hosts still connecting or waiting for a slot: the caller gets them as failed.
        for index, greenlet in list(self.hosts.items()):
            if index not in self.reporting:
                self._on_cancel(index, exc.PSSHError("stopped before the command ended"))
        self._check_done()

    def _check_done(self) -> None:
        if (self.no_more or self.stopping) and not self.hosts:
            self.done.set()

    # -- hosts -----------------------------------------------------------------------

    def _run_host(self, index: int) -> None:
        local_i, host = self.local[index]
        result = HostRunResult(index, host, worker=self.worker)
        began = time.monotonic()
        output = None
        try:
            with self.slots:
                output = self.client.run_host_command(local_i, self.command, cancellable=True,
                                                      **self.run_kwargs)
                result.started = True
                self.outputs[index] = output
                output.client.wait_finished(output)
        except BaseException as err:  # a failure, the caller's cancel, or the stop
            result.exception = self._why_ended(index, err)
            self._give_up(local_i, host, output)
        finally:
            self.outputs.pop(index, None)
        if output is not None:
            self._collect(result, output)
        result.duration = time.monotonic() - began
        self.reporting.add(index)  # no stopping it now: its report would be lost
        try:
            self._blocking(self.reports.put, pickled(("result", result)))
            self.reported += 1
        finally:
            self.hosts.pop(index, None)
            self._check_done()

    def _host_gone(self, greenlet) -> None:
        """A host's greenlet has ended: one killed before it ran (cancelled at once) is
        reported here, as failed with what killed it."""
        index = next((i for i, g in self.hosts.items() if g is greenlet), None)
        if index is None:
            return  # it reported itself
        _, host = self.local[index]
        result = HostRunResult(index, host, worker=self.worker,
                               exception=self._why_ended(index, greenlet.exception))
        try:
            self._blocking(self.reports.put, pickled(("result", result)))
            self.reported += 1
        finally:
            self.hosts.pop(index, None)
            self._check_done()

    def _why_ended(self, index: int, err: Optional[BaseException]) -> BaseException:
        if index in self.cancelled:
            return portable(self.cancelled[index])
        if isinstance(err, Exception):
            return portable(err)
        return exc.PSSHError("stopped before the command ended")

    def _give_up(self, local_i: int, host: str, output) -> None:
        """After a failure: stop the command if it runs, drop the host's connection."""
        try:
            if output is not None and not output.client.finished(output.channel):
                self.client.cancel([output], timeout=5)
            self.client.disconnect_host(local_i)
        except Exception as err:  # the connection may be what failed
            log.debug("%s: %s", host, err)

    @staticmethod
    def _collect(result: HostRunResult, output) -> None:
        """The output read so far (all of it if the command ended), and how it ended."""
        try:
            result.stdout = "\n".join(output.stdout)
            result.stderr = "\n".join(output.stderr)
            if result.exception is None:
                result.exit_code = output.exit_code
                result.exit_signal = output.exit_signal
        except Exception as err:  # the connection broke while reading
            if result.exception is None:
                result.exception = portable(err)
