"""Commands on the asyncio front end: a running process's streams and its result.

:class:`ChannelStreams` is the session core's command streams on the running
loop: output is read on demand, never in the background (memory stays bounded
by what was read and not yet consumed), and whenever the stream asked for has
nothing, the other stream is drained first, because both share one
flow-control window.
"""
from __future__ import annotations

import asyncio
import codecs
import signal as _signal
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Optional, Tuple, Union

from pssh import exceptions as exc
from pssh.aio.exceptions import TimeoutError, _returncode, connection_errors
from pssh.core.lines import MAX_LINE, LineBuffer, LongLines
from pssh.core.link import Link
from pssh.core.streams import CommandStreams, StreamBuffer
from pssh.core.deadlines import UNSET, deadline_after, remaining
from pssh.runners.asyncio import RUNNER



@dataclass
class SSHCompletedProcess:
    """What :meth:`SSHClientConnection.run` returns (asyncssh's fields)."""

    command: Optional[str]  # None: the login shell
    exit_status: Optional[int]
    #: ``(signal name, core dumped, message, language)`` if killed by a signal, else None.
    exit_signal: Optional[tuple]
    stdout: Union[str, bytes]
    stderr: Union[str, bytes]

    @property
    def returncode(self) -> Optional[int]:
        """``exit_status``, or minus the signal number when killed by a known signal."""
        return _returncode(self.exit_status, self.exit_signal)


class ChannelStreams:
    """A command's channel for the asyncio front end: the core's streams
    (:class:`pssh.core.streams.CommandStreams`, ``core``) driven on the running loop.
    Nothing is read in the background: a chunk is read when one is asked for."""

    def __init__(self, link: Link, channel, read_timeout: Optional[float]):
        self.link = link
        self.channel = channel
        self.read_timeout = read_timeout
        self._buffers = (StreamBuffer(), StreamBuffer())  # stdout, stderr
        self.core = CommandStreams(link, channel, *self._buffers)
        self.core.auto_finish = False  # closed by wait() / finish(), as asyncssh's are
        # Streams being read: from the first chunk asked for to the end (see chunk()).
        self._reading = [False, False]

    @property
    def closed(self) -> bool:
        return self.core.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.core.closed = value

    @property
    def exit_status(self) -> Optional[int]:
        return self.core.exit_code

    @property
    def exit_signal(self) -> Optional[tuple]:
        return self.core.exit_signal

    async def _run(self, procedure):
        with connection_errors(self.link.host, self.link.port, self.link):
            return await RUNNER.run(procedure)

    async def turn(self) -> None:
        """Give the loop a turn if this connection has worked
        :data:`~pssh.core.link.TURN_SLICE` without one (:meth:`Link.turn
        <pssh.core.link.Link.turn>` for what is handed on without calling the core)."""
        if self.link.turn_due():
            await asyncio.sleep(0)  # a turn: asyncio runs the timers due, and cancels here
            self.link.turned()

    async def chunk(self, stream: int) -> bytes:
        """The next chunk of ``stream``; b"" once it has ended.

        From the first chunk asked for until the stream's end, ``stream`` counts as
        read (:meth:`CommandStreams.reading <pssh.core.streams.CommandStreams.reading>`):
        while the other stream is read, this one's output is held back for its reader,
        never dropped. A program that reads some of a stream must go on reading it (or
        close the process), as with asyncssh, which stalls the command sooner."""
        if not self._reading[stream]:
            self._reading[stream] = True
            self.core.reading(stream, True)
        await self._run(self.core.fill(stream, deadline_after(self.read_timeout)))
        data = self._buffers[stream].next_chunk()
        if data:
            self.core.taken(stream)
        elif self._reading[stream]:  # its end: nothing more to hold back for it
            self._reading[stream] = False
            self.core.reading(stream, False)
        return data

    async def any_chunk(self) -> Tuple[int, bytes]:
        """The next chunk of either stream, as ``(stream, data)``; ``(-1, b"")`` once both
        have ended (or the channel was closed)."""
        await self._run(self.core.fill_any(None))
        for stream in (0, 1):
            buffer = self._buffers[stream]
            if buffer.has_data():
                data = buffer.next_chunk()
                self.core.taken(stream)
                return stream, data
        return -1, b""

    async def wait(self, timeout: Optional[float] = None) -> None:
        """Read all output into the buffers until both streams end, then close the channel
        (keeping the exit status)."""
        await self._run(self.core.wait_eof(timeout))

    async def finish(self, timeout=UNSET) -> None:
        """Close the channel, wait for the server's close, keep the exit status (idempotent)."""
        await self._run(self.core.finish(timeout))

    def take(self, stream: int) -> bytes:
        """Everything buffered for ``stream``, consumed."""
        data = self.core.buffers[stream].take()
        self.core.taken(stream)
        return data

    async def write(self, data: bytes) -> None:
        await self._run(self.core.write(data))

    async def send_eof(self) -> None:
        await self._run(self.core.send_eof())


class SSHReader:
    """One output stream of a process (asyncssh's ``SSHReader``): ``read``, ``readline``,
    ``async for line in ...``; str with an encoding, bytes with ``encoding=None``.

    ``max_line`` (ours): a line longer than that many bytes comes from ``readline`` in
    pieces of that size, the first time said by a warning naming the host (default
    :data:`pssh.core.lines.MAX_LINE`, 1 MiB; ``None``: no limit). asyncssh's own
    ``readline`` returns a line longer than its receive window (2 MiB) in pieces too,
    without saying so. ``read`` hands on the bytes as they came.

    Lines already received are handed on without waiting, but a reader that finds
    them faster than the loop's turn comes round (:data:`pssh.core.link.TURN_SLICE`)
    gives the loop a turn first: timers, ``wait_for`` and the other hosts run whatever
    one host sends.
    """

    def __init__(self, streams: ChannelStreams, stream: int, encoding: Optional[str],
                 errors: str, long_lines: Optional[LongLines] = None) -> None:
        self._streams = streams
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(encoding)(errors) if encoding else None
        link = streams.link
        self._long_lines = long_lines if long_lines is not None \
            else LongLines(f"{link.host}:{link.port}")
        self._lines = LineBuffer(MAX_LINE, self._long_lines)
        self._at_eof = False

    @property
    def max_line(self) -> Optional[int]:
        """The longest line ``readline`` hands on whole, in bytes (None: no limit)."""
        return self._lines.max_line

    @max_line.setter
    def max_line(self, value: Optional[int]) -> None:
        if value is not None and value < 1:
            raise ValueError(f"max_line must be at least 1 byte (or None), not {value}")
        self._lines.max_line = self._long_lines.max_line = value

    def _decode(self, data: bytes, final: bool = False):
        return self._decoder.decode(data, final) if self._decoder else data

    async def _more(self) -> bool:
        """Add the stream's next chunk to what is held; False at its end."""
        if self._at_eof:
            return False
        data = await self._streams.chunk(self._stream)
        if not data:
            self._at_eof = True
            return False
        self._lines.add(data)
        return True

    def _unread(self) -> bytes:
        """Everything received and not yet handed on, consumed."""
        return self._lines.take()

    async def read(self, n: int = -1):
        """Up to ``n`` bytes (characters are decoded from them), or all until EOF if ``n < 0``."""
        await self._streams.turn()
        if n < 0:
            while await self._more():
                pass
            return self._decode(self._lines.take(), final=True)
        if not self._lines:
            await self._more()
        data = self._lines.take(n)
        return self._decode(data, final=not data)

    async def readline(self):
        """The next line with its ``\\n`` (the rest of the stream at EOF; empty after it);
        a line longer than :attr:`max_line` in pieces of that size."""
        # The turn comes before anything is taken: a cancellation there loses nothing.
        await self._streams.turn()
        lines = self._lines
        while True:
            line = lines.line()
            if line is not None:
                return self._decode(line)
            if not await self._more():
                rest = lines.take()
                return self._decode(rest, final=True)

    def at_eof(self) -> bool:
        return self._at_eof and not self._lines

    def __aiter__(self) -> AsyncIterator:
        return self

    async def __anext__(self):
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line


class SSHWriter:
    """A process's standard input (asyncssh's ``SSHWriter``): :meth:`write` starts sending
    at once, in the background; :meth:`drain` waits until all is sent."""

    def __init__(self, streams: ChannelStreams, encoding: Optional[str]) -> None:
        self._streams = streams
        self._encoding = encoding
        self._pending: deque = deque()
        self._eof = False
        self._eof_sent = False
        self._sender: Optional[asyncio.Future] = None
        self._closer: Optional[asyncio.Future] = None

    def write(self, data: Union[str, bytes]) -> None:
        """Send ``data`` (str is encoded); returns at once."""
        if self._eof:
            raise exc.SessionError("stdin was already closed (write_eof)")
        self._pending.append(data.encode(self._encoding or "utf-8")
                             if isinstance(data, str) else bytes(data))
        self._kick()

    def write_eof(self) -> None:
        """End standard input once what was written has been sent."""
        if not self._eof:
            self._eof = True
            self._kick()

    async def drain(self) -> None:
        """Wait until everything written (and the EOF, if asked for) has been sent;
        raises what sending met."""
        while self._sender is not None and not (self._sender.done() and self._idle()):
            await self._sender
            self._kick()

    def _idle(self) -> bool:
        return not self._pending and (self._eof_sent or not self._eof)

    def _kick(self) -> None:
        if (self._sender is None or self._sender.done()) and not self._idle():
            self._sender = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        while self._pending:
            await self._streams.write(self._pending.popleft())
        if self._eof and not self._eof_sent:
            self._eof_sent = True
            await self._streams.send_eof()

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        """End the stream and close its channel once what was written has been sent
        (``await wait_closed()`` for that)."""
        if self._closer is None:
            self.write_eof()
            self._closer = asyncio.ensure_future(self._close())

    async def _close(self) -> None:
        await self.drain()
        await self._streams.finish()

    def is_closing(self) -> bool:
        return self._closer is not None

    async def wait_closed(self) -> None:
        if self._closer is not None:
            await self._closer

    def _stop(self) -> None:
        if self._sender is not None and not self._sender.done():
            self._sender.cancel()


class SSHClientProcess:
    """A running command (asyncssh's ``SSHClientProcess``): ``stdin``, ``stdout``,
    ``stderr``, ``await wait()`` for the :class:`SSHCompletedProcess`."""

    def __init__(self, streams: ChannelStreams, command: Optional[str], encoding: Optional[str],
                 errors: str = "strict", stopper: Optional[Callable] = None,
                 env=None) -> None:
        self._streams = streams
        self._stopper = stopper  # stopper(signal name) -> the task that stops the command
        self.command = command
        self.env = env
        self.stdin = SSHWriter(streams, encoding)
        # One for both streams: a long line is said once per command.
        long_lines = LongLines(f"{streams.link.host}:{streams.link.port}")
        self.stdout = SSHReader(streams, 0, encoding, errors, long_lines)
        self.stderr = SSHReader(streams, 1, encoding, errors, long_lines)
        self._encoding = encoding
        self._errors = errors
        self._redirects: list = []   # tasks moving redirected streams
        self._stderr_to_stdout = False

    def redirect(self, stdin=None, stdout=None, stderr=None) -> None:
        """Feed standard input from, and send output to, files, pipes or other processes'
        streams (see :mod:`pssh.aio.redirect`); None or ``PIPE`` leaves a stream as it is.
        :meth:`wait` waits for the redirected streams to end."""
        from pssh.aio.redirect import PIPE, STDOUT, drain_into, feed
        if stdin is not None and stdin != PIPE:
            self._redirects.append(asyncio.ensure_future(
                feed(stdin, self.stdin, self._encoding)))
        merge = stderr == STDOUT
        self._stderr_to_stdout = merge and stdout in (None, PIPE)
        for stream, target in ((0, stdout), (1, None if merge else stderr)):
            if target is not None and target != PIPE:
                self._redirects.append(asyncio.ensure_future(drain_into(
                    self._streams, stream, target, self._encoding, self._errors,
                    also=1 if merge and stream == 0 else None)))

    @property
    def exit_status(self) -> Optional[int]:
        return self._streams.exit_status

    @property
    def exit_signal(self) -> Optional[tuple]:
        return self._streams.exit_signal

    @property
    def returncode(self) -> Optional[int]:
        return _returncode(self.exit_status, self.exit_signal)

    async def wait(self, timeout: Optional[float] = None) -> SSHCompletedProcess:
        """Send pending stdin (and its EOF if asked), read the rest of the output, close.
        ``timeout`` running out raises :class:`~pssh.aio.TimeoutError` with the output
        received so far."""
        deadline = deadline_after(timeout)
        try:
            if self._redirects:
                done, _ = await asyncio.wait(self._redirects, timeout=remaining(deadline))
                for task in done:
                    task.result()   # a failed redirection fails the wait
                if len(done) < len(self._redirects):
                    raise exc.Timeout.at(self._streams.link.host, self._streams.link.port,
                                         f"command still running after {timeout} s")
            await self.stdin.drain()
            await self._streams.wait(remaining(deadline))
        except exc.Timeout as err:
            if isinstance(err, TimeoutError):
                raise
            out, errout = self._collect()
            raise TimeoutError(self.env, self.command, None, self.exit_status,
                               self.exit_signal, self.returncode, out, errout,
                               err.reason, host=self._streams.link.host,
                               port=self._streams.link.port) from err
        finally:
            for task in self._redirects:
                task.cancel()
        out, errout = self._collect()
        return SSHCompletedProcess(self.command, self.exit_status, self.exit_signal, out, errout)

    def _collect(self) -> Tuple[Union[str, bytes], Union[str, bytes]]:
        """The output received and not yet read, decoded (consumed)."""
        out = self.stdout._unread() + self._streams.take(0)
        err = self.stderr._unread() + self._streams.take(1)
        if self._stderr_to_stdout:
            out, err = out + err, b""
        return self.stdout._decode(out, final=True), self.stderr._decode(err, final=True)

    def send_signal(self, signal: Union[str, int]) -> "asyncio.Task":
        """Send ``signal`` (``"TERM"``, ``"KILL"``, ``signal.SIGINT``...) to the command.

        sshd may refuse the request (it does for root logins); a command started
        with ``cancellable=True`` is signalled for sure, with its children, through
        its marker (:mod:`pssh.core.cancel`). Returns the task doing it (awaiting it is
        optional: the connection waits for it before it closes).
        """
        if not isinstance(signal, str):
            signal = _signal.Signals(signal).name[3:]
        assert self._stopper is not None  # the connection gives every process one
        return self._stopper(signal.upper().removeprefix("SIG"))

    def terminate(self) -> "asyncio.Task":
        """``send_signal("TERM")``."""
        return self.send_signal("TERM")

    def kill(self) -> "asyncio.Task":
        """``send_signal("KILL")``."""
        return self.send_signal("KILL")

    def close(self) -> None:
        """Stop reading and writing; the channel is closed when the connection closes (or
        by :meth:`wait`)."""
        self.stdin._stop()
        self._streams.closed = True

    async def __aenter__(self) -> "SSHClientProcess":
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.stdin._stop()
        if not self._streams.closed:
            await self._streams.finish()
