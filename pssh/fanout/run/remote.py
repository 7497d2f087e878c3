"""The "run" job, in the parent: a command that runs in a shard.

:class:`RemoteCommand` stands where a single-process client has the channel and
its :class:`~pssh.clients.reader.ChannelReader`: its two
:class:`~pssh.clients.reader.ConcurrentRWBuffer` fill from the worker's
messages, and an empty buffer grants the worker credit for more (at most
:data:`WINDOW` bytes per stream in flight), so that memory stays bounded and a
slow reader slows the remote command down. :class:`RemoteHostClient` is the
``HostOutput.client`` of such a command: the subset of the single-host client
that ``HostOutput``, ``join``, ``as_completed`` and ``cancel`` use.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from gevent.event import Event

from pssh import exceptions as exc
from pssh.clients.base.single import BaseSSHClient
from pssh.clients.reader import CommandOutput
from pssh.core.deadlines import deadline_after, remaining
from pssh.output import HostOutput

if TYPE_CHECKING:
    from pssh.fanout.run.hosts import ShardWorker

log = logging.getLogger("pssh.fanout.run")

#: Bytes of one stream the worker may send ahead of what the parent has consumed.
WINDOW = 1024 * 1024


class RemoteCommand(CommandOutput):
    """One host's command in a worker: output buffers, exit status, failure."""

    def __init__(self, worker: "ShardWorker", command_id: int, host: str) -> None:
        super().__init__()
        self.worker = worker
        self.command_id = command_id
        self.host = host
        #: Why the output stopped short (the worker died, the connection was lost).
        self.error: Optional[BaseException] = None
        self._granted = [0, 0]
        self._received = [0, 0]
        self._changed = Event()
        self._draining = False

    @property
    def at_eof(self) -> bool:
        return self.closed

    # -- from the worker ---------------------------------------------------------------

    def on_data(self, stream: int, data: bytes) -> None:
        self._received[stream] += len(data)
        self.buffers[stream].write(data)
        self._changed.set()

    def on_eof(self, stream: int) -> None:
        self.buffers[stream].eof.set()
        self._changed.set()

    def on_status(self, exit_code: Optional[int], exit_signal: Optional[str]) -> None:
        """The exit status, known once the output has ended (some may still be on its way)."""
        self.exit_code, self.exit_signal = exit_code, exit_signal

    def on_exit(self, exit_code: Optional[int], exit_signal: Optional[str]) -> None:
        self.exit_code, self.exit_signal = exit_code, exit_signal
        self.closed = True
        for buffer in self.buffers:
            buffer.eof.set()
        self._changed.set()

    def on_lost(self, error: BaseException) -> None:
        """The output ends short: readers and waiters get ``error`` (never a silent end)."""
        if self.closed:
            return
        self.error = error
        self._changed.set()

    # -- for readers -------------------------------------------------------------------

    def fill(self, stream: int, deadline: Optional[float]) -> None:
        """Wait until ``stream`` has data or has ended, granting the worker credit first
        (the :class:`ConcurrentRWBuffer` source protocol)."""
        buffer = self.buffers[stream]
        while not buffer.has_data() and not buffer.eof.is_set():
            if self.error is not None:
                raise self.error
            # Cleared before the grant, never after: sending it may wait (a Dask queue's
            # put does, in a thread), and what the worker sends meanwhile (its last output
            # and its exit, say) must still end the wait below. Cleared after, that news
            # was lost and the reader waited for a message that would never come.
            self._changed.clear()
            self._grant(stream)
            if buffer.has_data() or buffer.eof.is_set() or self.error is not None:
                continue
            if not self._changed.wait(remaining(deadline)):
                raise exc.Timeout("%s: no output within the read timeout", self.host,
                                  host=self.host)

    def _grant(self, stream: int) -> None:
        outstanding = self._granted[stream] - self._received[stream]
        if outstanding < WINDOW // 2 and not self._draining:
            self._granted[stream] += WINDOW - outstanding
            self.worker.send(("credit", self.command_id, stream, WINDOW - outstanding), self.host)

    def wait_eof(self, timeout: Optional[float] = None, consume: bool = False) -> None:
        """Have the worker send (or drop, with ``consume``) the rest; wait for the end."""
        deadline = deadline_after(timeout)
        if not self.closed and self.error is None and not self._draining:
            self._draining = True
            self.worker.send(("drain", self.command_id, consume), self.host)
        while not self.closed:
            if self.error is not None:
                raise self.error
            self._changed.clear()
            if consume:
                for buffer in self.buffers:
                    buffer.read()
            if not self._changed.wait(remaining(deadline)):
                raise exc.Timeout("%s: command still running after %s s", self.host, timeout,
                                  host=self.host)
        if consume:
            for buffer in self.buffers:
                buffer.read()


class RemoteStdin:
    """A command's standard input, written by its worker."""

    __slots__ = ("_command",)

    def __init__(self, command: RemoteCommand) -> None:
        self._command = command

    def _send(self, operation: str, data: Optional[bytes] = None) -> None:
        command = self._command
        command.worker.send(("stdin", command.command_id, operation, data), command.host)

    def write(self, data) -> None:
        """Send ``data`` (str is UTF-8 encoded) whole."""
        self._send("write", data.encode() if isinstance(data, str) else bytes(data))

    def flush(self) -> None:
        self._send("flush")

    def close(self) -> None:
        """End the input: the command sees end of file."""
        self._send("close")


class RemoteHostClient:
    """``HostOutput.client`` of a command run by a worker (one per host)."""

    def __init__(self, host: str) -> None:
        self.host = host

    # Output lines and their decoding: the single-host client's own code.
    read_output = BaseSSHClient.read_output
    read_stderr = BaseSSHClient.read_stderr
    _read_output_buffer = BaseSSHClient._read_output_buffer
    read_output_buffer = BaseSSHClient.read_output_buffer

    def get_exit_status(self, channel: RemoteCommand) -> Optional[int]:
        return None if channel is None else channel.exit_code

    def finished(self, channel: RemoteCommand) -> Optional[bool]:
        """Whether the command has ended (or its worker died); never blocks."""
        return None if channel is None else channel.closed or channel.error is not None

    def wait_finished(self, host_output: HostOutput, timeout: Optional[float] = None,
                      consume_output: bool = False) -> None:
        """Wait for the command to end. A command whose worker died gets that error in
        ``host_output.exception`` (logged), so that joins finish the other hosts."""
        channel = host_output.channel
        if channel is None:
            return
        try:
            channel.wait_eof(timeout, consume=consume_output)
        except exc.Timeout:
            raise
        except Exception as err:
            log.error("%s: %s", self.host, err)
            host_output.exception = err

    def cancel(self, host_output: HostOutput, signal: str = "TERM",
               timeout: Optional[float] = 10) -> bool:
        """Stop the command (in its worker, as :meth:`SSHClient.cancel` does)."""
        channel = host_output.channel
        if channel is None or channel.closed or channel.error is not None:
            return False
        return channel.worker.request("cancel", channel.command_id, signal, timeout,
                                      host=self.host)
