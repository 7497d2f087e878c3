"""The "run" job, in its shard: the hosts of one worker of
``ParallelSSHClient(processes=N)`` (and of ``pssh run/copy/fetch --processes``).

It runs its shard of the hosts with the ordinary gevent :class:`ParallelSSHClient`,
in its own hub. What it is asked (``("call", ...)``) are the client's per-host
methods (``_run_command``, ``_copy_file``...), so that the parent keeps the
client's API as it is (:mod:`pssh.fanout.run.hosts`).

A command's output goes to the parent only as far as the parent has granted
credit for that host and stream (``("credit", ...)``): a parent that reads
slowly stops the shard reading the channel, which stops the remote command
through SSH flow control, as in a single process. When the parent goes away
(or ends the job), the shard stops every command it runs (``cancel``: the
commands are started ``cancellable``) and every transfer (which removes its
partial file). Told to terminate (:mod:`pssh.fanout.signals`), it stops the
commands and transfers the same way at once, but goes on serving its parent.
Log records go to the parent, where they go through its logging as if logged there.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Dict, List, Optional, Tuple

import gevent
from gevent.event import Event
from gevent.lock import BoundedSemaphore
from gevent.queue import Queue

from pssh.clients.native.parallel import ParallelSSHClient
from pssh.clients.reader import ChannelReader
from pssh.fanout.link import Link, portable
from pssh.options import ConnectOptions
from pssh.output import HostOutput

log = logging.getLogger("pssh.fanout.run")

#: Seconds allowed for stopping the remote commands when the parent has gone.
STOP_TIMEOUT = 10.0
#: The most output bytes in one message (the parent holds a message whole while it arrives).
MESSAGE_SIZE = 128 * 1024


class ShardClient(ParallelSSHClient):
    """The worker's client: its hosts, each with the options the parent resolved for it."""

    def __init__(self, hosts: List[str], options: List[ConnectOptions], ssh_config,
                 pool_size: int, runner: Optional[str]) -> None:
        super().__init__(hosts, pool_size=pool_size, ssh_config=ssh_config, runner=runner)
        # Not "_per_host": that is the client's method formatting copy_args per host.
        self._options_by_host = options

    def host_options(self, host_i: int) -> ConnectOptions:
        """As the parent resolved them (its host_config and arguments)."""
        return self._options_by_host[host_i]

    def _connect_only(self, host_i: int, host: str) -> None:
        self.connect_host(host_i)

    def _disconnect_only(self, host_i: int, host: str) -> None:
        self.disconnect_host(host_i)


class Pump:
    """Sends one command's output to the parent as credit allows, then its exit status."""

    def __init__(self, worker: "Worker", command_id: int, output: HostOutput) -> None:
        self.worker = worker
        self.command_id = command_id
        self.output = output
        self.reader = channel_reader(output)
        self.credit = [0, 0]
        self._asked = [False, False]  # streams the parent has asked for
        self.unlimited = False
        self.discard = False
        self._more = Event()  # credit granted, or told to drain
        self._stdin: Queue = Queue()
        self._feeder: Optional[gevent.Greenlet] = None
        self.greenlet = gevent.spawn(self._run)

    def stdin(self, operation: str, data: Optional[bytes]) -> None:
        """``write``/``flush``/``close`` the command's input, in the order asked (one
        greenlet feeds them: a write that has to wait must not be overtaken)."""
        self._stdin.put((operation, data))
        if self._feeder is None:
            self._feeder = gevent.spawn(self._feed)

    def _feed(self) -> None:
        stdin = self.output.stdin
        failed = False
        while True:
            operation, data = self._stdin.get()
            if failed:
                continue  # the rest has nowhere to go
            try:
                getattr(stdin, operation)(*(() if data is None else (data,)))
            except Exception as err:
                # A command that exits without reading all its input is no failure (ssh
                # says nothing either), and the rest of the writes would fail alike: said
                # once, quietly, as the client in one process says it.
                failed = True
                log.debug("%s: %s of standard input failed: %s; the rest is dropped",
                          self.output.host, operation, err)

    def grant(self, stream: int, size: int) -> None:
        if not self._asked[stream]:
            # The parent reads this stream (it asks for it only when a reader of it wants
            # more): from now on its output is held back for the parent, never dropped
            # (pssh.core.streams), as it is for a reader in one process.
            self._asked[stream] = True
            self.reader.reading(stream, True)
        self.credit[stream] += size
        self._wake()

    def drain(self, discard: bool) -> None:
        """Send (or with ``discard``, drop) everything, whatever the credit."""
        self.unlimited = True
        self.discard = self.discard or discard
        self._wake()

    def _wake(self) -> None:
        self._more.set()
        self.reader.wake()  # a wait on the socket for the other stream ends too

    def _run(self) -> None:
        send = self.worker.link.send
        reader = self.reader
        buffers = (reader.stdout, reader.stderr)
        held = [memoryview(b""), memoryview(b"")]  # read, not yet sent
        ended = [False, False]  # the stream's end was told to the parent
        status_sent = False
        try:
            while True:
                # Cleared before the state is looked at, never just before the wait: the
                # steps below may wait themselves (finish() waits for the channel's close),
                # and a grant that comes meanwhile must still end the wait below. Cleared
                # there, it was lost, and the pump waited with credit and output in hand.
                self._more.clear()
                progress = False  # data sent or a stream's end noted: look again before waiting
                for stream, buffer in enumerate(buffers):
                    allowance = MESSAGE_SIZE if self.unlimited \
                        else min(MESSAGE_SIZE, self.credit[stream])
                    if allowance > 0:
                        if not held[stream]:
                            held[stream] = memoryview(buffer.read() or b"")
                        piece, held[stream] = held[stream][:allowance], held[stream][allowance:]
                        if piece and not self.discard:
                            send(("data", self.command_id, stream, bytes(piece)))
                            self.credit[stream] -= len(piece)
                        progress = progress or bool(piece)
                    if not ended[stream] and buffer.eof.is_set() and not buffer.has_data() \
                            and not held[stream]:
                        # As in one process, the exit status is known when a stream ends:
                        # it goes first (one channel EOF ends both streams).
                        reader.read_some(1 - stream)
                        if reader.at_eof and not status_sent:
                            reader.finish()
                            send(("status", self.command_id, reader.exit_code,
                                  reader.exit_signal))
                            status_sent = True
                        ended[stream] = True
                        progress = True
                        # The parent may read one stream to its end before the other; the
                        # end of the last one comes with the exit status.
                        if not ended[1 - stream]:
                            send(("eof", self.command_id, stream))
                if progress:
                    continue
                if reader.at_eof:
                    reader.finish()
                    if all(ended):
                        break
                wanted = [s for s in (0, 1) if (self.credit[s] > 0 or self.unlimited)
                          and not buffers[s].eof.is_set()]
                if not wanted:
                    self._more.wait()
                else:
                    # Within the bound, unless told to send everything (a join): a stream
                    # the parent has no credit for left is held back or dropped there.
                    reader.read_or_wait(limited=not self.unlimited)
            send(("exit", self.command_id, reader.exit_code, reader.exit_signal))
        except Exception as err:
            log.debug("%s: output lost: %s", self.output.host, err)
            send(("lost", self.command_id, portable(err)))
        finally:
            self.worker.pumps.pop(self.command_id, None)
            if self._feeder is not None:
                self._feeder.kill(block=False)


def channel_reader(output: HostOutput) -> ChannelReader:
    """The channel reader of a command the shard's client started (a channel of this
    process, never output from elsewhere)."""
    reader = output.buffers.stdout.reader if output.buffers is not None else None
    if not isinstance(reader, ChannelReader):
        raise TypeError(f"{output.host}: {output!r} has no channel in this process")
    return reader


class _ToParent(logging.Handler):
    """Sends each log record to the parent (``("log", None, fields)``), where it goes
    through the logger of the same name."""

    def __init__(self, link: Link, fallback: List[logging.Handler]) -> None:
        super().__init__()
        self.link = link
        self.fallback = fallback

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if getattr(self.link, "closed", False):
                raise OSError("the link to the parent is closed")
            fields = {"name": record.name, "levelno": record.levelno,
                      "levelname": record.levelname, "msg": record.getMessage(),
                      "created": record.created, "process": record.process,
                      "pathname": record.pathname, "lineno": record.lineno,
                      "funcName": record.funcName}
            if record.exc_info:
                fields["exc_text"] = logging.Formatter().formatException(record.exc_info)
            self.link.send(("log", None, fields))
        except Exception:
            for handler in self.fallback:
                handler.handle(record)


class Worker:
    """Serves the parent's messages until it closes the pipe."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.client: Optional[ShardClient] = None
        self.local: Dict[int, Tuple[int, str]] = {}  # parent's host index -> (ours, host)
        self.pumps: Dict[int, Pump] = {}  # by command id (the id of the call that started it)
        self.calls: Dict[int, gevent.Greenlet] = {}  # calls not yet answered, by id

    def serve(self) -> None:
        while True:
            message = self.link.receive()
            if message is None:
                break
            kind, *args = message
            getattr(self, "on_" + kind)(*args)
        self.stop_all()

    def on_init(self, hosts: List[Tuple[int, str]], options: List[ConnectOptions],
                ssh_config, pool_size: int, log_level: int, own_process: bool,
                runner: Optional[str]) -> None:
        # Log records go to the parent's logging, as if logged there; to stderr once the
        # parent cannot take them. In a process of someone else's (a Dask worker), only
        # pssh's own records go, and that process's logging is left as it is.
        if own_process:
            logging.basicConfig(level=log_level, stream=sys.stderr,
                                format=f"%(levelname)s pssh worker {os.getpid()}: "
                                       "%(message)s")
            logger = logging.getLogger()
        else:
            logger = logging.getLogger("pssh")
        fallback = logger.handlers[:]
        self._restore_logging = (logger, fallback, logger.propagate, logger.level)
        logger.handlers[:] = [_ToParent(self.link, fallback)]
        if not own_process:
            logger.setLevel(log_level)
            logger.propagate = False  # the host process's handlers do not show them twice
        self.local = {index: (i, host) for i, (index, host) in enumerate(hosts)}
        self.client = ShardClient([host for _, host in hosts], options, ssh_config, pool_size,
                                  runner)
        self.slots = BoundedSemaphore(pool_size)

    def on_call(self, call_id: int, host_index: int, method: str, args: tuple,
                kwargs: dict) -> None:
        # Spawned at once: this loop must never wait (credits and stdin go through it).
        call = self.calls[call_id] = gevent.spawn(self._call, call_id, host_index, method,
                                                  args, kwargs)
        call.link(self._call_gone)

    def _call(self, call_id, host_index, method, args, kwargs) -> None:
        try:
            with self.slots:  # pool_size calls at a time, as the client's pool would allow
                self._call_now(call_id, host_index, method, args, kwargs)
        except gevent.GreenletExit:
            # Stopped while it waited for a slot (_call_now answers for itself once it
            # runs): the parent waits for an answer all the same.
            if self.calls.pop(call_id, None) is not None:
                self.link.send(("failed", call_id, self._stopped_error()))
            raise
        finally:
            self.calls.pop(call_id, None)

    def _call_gone(self, call: gevent.Greenlet) -> None:
        """A call stopped before it ran still gets its answer: the parent waits for one."""
        call_id = next((i for i, c in self.calls.items() if c is call), None)
        if call_id is not None:
            del self.calls[call_id]
            self.link.send(("failed", call_id, self._stopped_error()))

    def _stopped_error(self) -> BaseException:
        from pssh import exceptions as exc
        return exc.PSSHError("stopped: the worker process %s was told to stop (SIGTERM)",
                             os.getpid())

    def _call_now(self, call_id, host_index, method, args, kwargs) -> None:
        i, host = self.local[host_index]
        if kwargs.get("callback") is True:  # the parent's callback, by message
            kwargs["callback"] = lambda *values: self.link.send(("progress", call_id) + values)
        try:
            result = getattr(self.client, method)(i, host, *args, **kwargs)
        except BaseException as err:  # the parent's greenlet raises it
            if isinstance(err, gevent.GreenletExit):  # stopped (close, or SIGTERM)
                err = self._stopped_error()
            self.link.send(("failed", call_id, portable(err)))
            return
        if isinstance(result, HostOutput):
            self.pumps[call_id] = Pump(self, call_id, result)
            result = result.fully_qualified_command
        self.link.send(("done", call_id, result))

    # Messages about a command that has ended meanwhile (its pump is gone) have nothing left
    # to act on.
    def on_credit(self, command_id: int, stream: int, size: int) -> None:
        pump = self.pumps.get(command_id)
        if pump is not None:
            pump.grant(stream, size)

    def on_drain(self, command_id: int, discard: bool) -> None:
        pump = self.pumps.get(command_id)
        if pump is not None:
            pump.drain(discard)

    def on_stdin(self, command_id: int, operation: str, data: Optional[bytes]) -> None:
        pump = self.pumps.get(command_id)
        if pump is not None:
            pump.stdin(operation, data)

    def on_cancel(self, call_id: int, command_id: int, signal_name: str,
                  timeout: Optional[float]) -> None:
        pump = self.pumps.get(command_id)
        if pump is None:  # it ended meanwhile
            self.link.send(("done", call_id, False))
            return
        gevent.spawn(self._cancel, call_id, pump.output, signal_name, timeout)

    def _cancel(self, call_id, output, signal_name, timeout) -> None:
        try:
            cancelled = output.client.cancel(output, signal_name, timeout)
        except Exception as err:
            self.link.send(("failed", call_id, portable(err)))
        else:
            self.link.send(("done", call_id, cancelled))

    def stop_work(self) -> None:
        """Stop the commands still running on their hosts, and the calls in flight (a
        transfer cut short removes its partial file)."""
        running = [pump.output for pump in self.pumps.values() if not pump.reader.closed]
        if running and self.client is not None:
            log.info("stopping %d commands", len(running))
            self.client.cancel(running, timeout=STOP_TIMEOUT)
        calls = list(self.calls.values())
        gevent.killall(calls, block=False)
        gevent.joinall(calls, timeout=STOP_TIMEOUT)

    def stop_all(self) -> None:
        """The parent is gone (or done): stop everything, close every connection."""
        self.stop_work()
        if self.client is not None:
            self.client.close()


def serve(link: Link, init: tuple) -> None:
    """The job: serve the parent's calls for the shard ``init`` describes (hosts, their
    options, ssh_config, pool_size, log level) until the parent ends it."""
    worker = Worker(link)
    worker.on_init(*init)
    link.on_terminate(worker.stop_work)
    try:
        worker.serve()
    finally:  # the process may run other jobs after this one (a Dask worker)
        logger, handlers, propagate, level = worker._restore_logging
        logger.handlers[:] = handlers
        logger.propagate = propagate
        logger.setLevel(level)
