"""A running command's channel: its output streams, standard input, and how it ended.

Nothing reads in the background: output is read when someone asks for it, a chunk
at a time, so a reader that is slow is a reader that asks seldom. libssh2 opens the
channel's flow-control window again only as output is read out of it, so the server
then waits (the remote command blocks, as under ``ssh host cmd | slow-consumer``),
and at most one window (2 MiB) waits in libssh2.

stdout and stderr share that one window: output of the stream nobody is asking for
fills it as well, and would stall the stream being read. So whenever the stream being
read has nothing, :meth:`CommandStreams.fill` moves the other one's output into its
buffer. That buffer is bounded (:data:`UNREAD_LIMIT` unread bytes, and a read more):

- if someone reads that stream too (:meth:`CommandStreams.reading`: an iteration of it
  is open, a pssh.aio reader has begun on it, the command line reads both), its output
  is **held back** at the bound: no longer moved, the window closes, until that reader
  takes some (:meth:`CommandStreams.taken`). Nothing is lost; a slow reader of either
  stream slows the command down.
- if nobody reads it (a program that reads stdout to its end, then stderr), its output
  beyond the bound is **dropped** and counted (``dropped``, and a warning naming the
  host), so that the stream being read keeps flowing: holding it back would stall that
  stream for ever.

``join`` and pssh.aio's ``wait`` and ``run`` read everything into the buffers, unbounded:
they are asked for the whole output (read it as it comes instead, or join with
``consume_output``).

The buffers are the front end's (parallel-ssh's ``ConcurrentRWBuffer`` for the
gevent client, plain :class:`StreamBuffer` otherwise); each takes ``append``,
says with ``has_data()`` whether it holds unread data and with ``held()`` how
many bytes, ``end()`` marks its stream's end and ``ended`` tells it.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Tuple

from pssh.core import errors as exc
from pssh.core.channel_io import MAX_PER_CALL, data_pending, read_available
from pssh.core.link import Link
from pssh.core.deadlines import Limit, UNSET, deadline_after, remaining
from pssh.core.waits import Procedure
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.channel import Channel

log = logging.getLogger("pssh.core.streams")

#: Seconds a command whose output has ended is given to say how it ended (its exit status
#: or signal) before we close its channel: sshd sends it when it has reaped the command,
#: which can be after the output's end, and drops it if our close got there first.
SETTLE_TIMEOUT = 2.0

#: The longest wait of a read held up sending (see :meth:`CommandStreams._wait`) before it
#: tries again: it is woken sooner by the socket or the writer that holds it up.
HELD_UP_WAIT = 0.05

#: Bytes of one stream moved into its buffer, unread, while the other stream is being read:
#: beyond, held back if someone reads that stream too, dropped if nobody does.
UNREAD_LIMIT = 32 * 1024 * 1024
STREAM_NAMES = ("stdout", "stderr")


class StreamBuffer:
    """One stream's unread chunks and whether it has ended."""

    __slots__ = ("chunks", "ended", "_held")

    def __init__(self) -> None:
        self.chunks: deque = deque()
        self.ended = False
        self._held = 0

    def append(self, data: bytes) -> None:
        self.chunks.append(data)
        self._held += len(data)

    def end(self) -> None:
        self.ended = True

    def has_data(self) -> bool:
        return bool(self.chunks)

    def held(self) -> int:
        """Bytes buffered and not yet consumed."""
        return self._held

    def take(self) -> bytes:
        """Everything buffered, consumed."""
        data = b"".join(self.chunks)
        self.chunks.clear()
        self._held = 0
        return data

    def next_chunk(self) -> bytes:
        """The oldest chunk, consumed (b"" if none)."""
        if not self.chunks:
            return b""
        data = self.chunks.popleft()
        self._held -= len(data)
        return data


#: (signal name, core dumped, message, language) of a command killed by a signal.
ExitSignal = Tuple[str, bool, str, str]


class Buffer(Protocol):
    """Where a stream's data goes: a :class:`StreamBuffer`, or a front end's own
    (parallel-ssh's ``ConcurrentRWBuffer``)."""

    @property
    def ended(self) -> bool: ...

    def append(self, data: bytes) -> None: ...

    def end(self) -> None: ...

    def has_data(self) -> bool: ...

    def held(self) -> int: ...

    def take(self) -> bytes: ...


class CommandStreams:
    """Owns a command's channel: its two stream buffers, stdin, EOF and exit status."""

    def __init__(self, link: Link, channel: Channel, stdout: Optional[Buffer] = None,
                 stderr: Optional[Buffer] = None) -> None:
        self.link = link
        self.channel = channel
        self.buffers = (stdout if stdout is not None else StreamBuffer(),
                        stderr if stderr is not None else StreamBuffer())
        self.exit_code: Optional[int] = None
        self.exit_signal: Optional[ExitSignal] = None
        #: The channel is closed (or given up): nothing more will be read.
        self.closed = False
        #: The environment marker of a cancellable command (see pssh.core.cancel).
        self.marker: Optional[str] = None
        #: Close the channel as soon as both streams end. A relay, which may still send
        #: after the far end's EOF, turns this off and closes it itself (nothing may
        #: follow our close: sshd drops the connection).
        self.auto_finish = True
        self._eof_sent = False
        #: Bytes of each stream dropped unread (:data:`UNREAD_LIMIT`).
        self.dropped = [0, 0]
        #: Readers of each stream now (:meth:`reading`).
        self.readers = [0, 0]
        #: Streams at the bound and held back for their reader (:meth:`taken` lets go).
        self._held_back = [False, False]

    @property
    def at_eof(self) -> bool:
        """Both streams have ended (the command finished writing)."""
        return self.buffers[0].ended and self.buffers[1].ended

    # -- reading -------------------------------------------------------------------------

    def reading(self, stream: int, started: bool = True) -> None:
        """A reader of ``stream`` begins (``started``) or is done: while one is, that
        stream's output beyond :data:`UNREAD_LIMIT` is held back for it, never dropped.
        The front ends say it: an iteration of the stream open (gevent, the command
        line), a pssh.aio reader from its first read to the stream's end."""
        self.readers[stream] += 1 if started else -1
        if not self.readers[stream] and self._held_back[stream]:
            # Nobody will take it now: a read waiting on the other stream drops it instead.
            self._held_back[stream] = False
            self.link.wake()

    def taken(self, stream: int) -> None:
        """The reader of ``stream`` took output out of its buffer: a read that was held
        back for it goes on."""
        if self._held_back[stream] and self.buffers[stream].held() < UNREAD_LIMIT:
            self._held_back[stream] = False
            self.link.wake()

    @property
    def held_back(self) -> bool:
        """Whether a stream is at the bound, held back for its reader (the window is
        left to close)."""
        return self._held_back[0] or self._held_back[1]

    def read_some(self, stream: int, enough: bool = False, limited: bool = False,
                  most: Optional[int] = MAX_PER_CALL) -> bool:
        """Move what libssh2 holds for ``stream`` into its buffer without waiting; True if
        anything came (with ``enough``, stop at the first chunk: see
        :func:`pssh.core.channel_io.read_available`). ``limited``: nobody is waiting for
        this stream now, so it is bounded by :data:`UNREAD_LIMIT` unread bytes: held
        back there if someone reads it, its data beyond dropped if nobody does.
        ``most``: bytes moved at the most (None: all libssh2 holds)."""
        buffer = self.buffers[stream]
        if buffer.ended:
            return False
        if self.closed:
            buffer.end()
            return True
        keep: Callable[[bytes], None] = buffer.append
        stop: Optional[Callable[[], bool]] = buffer.has_data if enough else None
        if limited:
            if self.readers[stream]:
                if buffer.held() >= UNREAD_LIMIT:
                    # Left in libssh2: the window closes, the server waits.
                    self._held_back[stream] = True
                    return False
                stop = lambda: buffer.held() >= UNREAD_LIMIT  # noqa: E731
            else:
                keep = self._keeper(stream)
        progress, ended = read_available(self.channel, stream, keep, stop, most)
        if ended:
            buffer.end()
        if progress:
            self.link.wake()
        return progress

    def _keeper(self, stream: int) -> Callable[[bytes], None]:
        """``append`` for a stream nobody reads: kept up to :data:`UNREAD_LIMIT` unread
        bytes, dropped and counted beyond."""
        buffer = self.buffers[stream]

        def keep(data: bytes) -> None:
            if buffer.held() < UNREAD_LIMIT:
                buffer.append(data)
                return
            if not self.dropped[stream]:
                log.warning("%s:%s: more than %d MiB of %s unread while %s is read: dropping "
                            "the rest of it (read both streams, or join with "
                            "consume_output)", self.link.host, self.link.port,
                            UNREAD_LIMIT >> 20, STREAM_NAMES[stream], STREAM_NAMES[1 - stream])
            self.dropped[stream] += len(data)
        return keep

    def pending(self) -> bool:
        """Whether libssh2 already holds data or EOF for the channel."""
        return not self.closed and data_pending(self.channel)

    def fill(self, stream: int, deadline: Optional[float]) -> Procedure[None]:
        """Read until ``stream`` has data or has ended, draining the other stream meanwhile;
        Timeout once ``deadline`` has passed, even while output keeps coming (it bounds
        the reader's iteration as a whole)."""
        buffer = self.buffers[stream]
        self._check_deadline(deadline)
        yield from self.link.turn()
        while not buffer.has_data() and not buffer.ended:
            if self.read_some(stream, enough=True) or self.read_some(1 - stream,
                                                                      limited=True):
                yield from self.link.turn()
                continue
            yield from self._wait_for_output(deadline)
        if buffer.ended:
            # The channel's end of file has come: what libssh2 still holds of the other
            # stream is all there will be (a window at the most), so all of it is moved,
            # kept or counted as dropped within the unread limit (nobody waits for it
            # here either). Then the exit status can be collected.
            self.read_some(1 - stream, limited=True, most=None)
        if self.at_eof and self.auto_finish:
            yield from self.finish()

    def fill_any(self, deadline: Optional[float]) -> Procedure[None]:
        """Read until either stream has data, or both have ended; Timeout once ``deadline``
        has passed."""
        out, err = self.buffers
        self._check_deadline(deadline)
        yield from self.link.turn()
        while not (out.has_data() or err.has_data()) and not self.at_eof:
            if self.read_some(0, enough=True) | self.read_some(1, enough=True):
                yield from self.link.turn()
                continue
            yield from self._wait_for_output(deadline)
        if self.at_eof and self.auto_finish:
            yield from self.finish()

    def _check_deadline(self, deadline: Optional[float]) -> None:
        if deadline is not None and remaining(deadline) == 0:
            raise exc.Timeout.at(self.link.host, self.link.port,
                                 "output not read to its end within the read timeout")

    def _wait_for_output(self, deadline: Optional[float]) -> Procedure[None]:
        """A read got nothing: wait once (:meth:`_wait`); Timeout if ``deadline`` has
        passed."""
        left = remaining(deadline)
        if left == 0:
            raise exc.Timeout.at(self.link.host, self.link.port,
                                 "no output within the read timeout")
        yield from self._wait(left, "reading output")

    def _wait(self, timeout: Optional[float], what: str) -> Procedure[None]:
        """Wait once after a read that got nothing: for the server (Timeout after
        ``timeout``); or, when libssh2 already holds data for the channel, briefly.

        Data held, yet none read, means the read was held up sending: its window
        adjustment (sent before any read) waits behind a packet another procedure,
        such as a writer of stdin, has half written to a full socket. libssh2 sends one
        packet at a time, and only that writer can finish it. Reading again at once,
        without waiting, kept the loop from ever running that writer: the read spun for
        ever. Waiting for the socket, as libssh2 asks, lets the writer finish and wakes
        this read (the writer's progress does)."""
        if self.pending() and not self.held_back:
            yield from self.link.wait_briefly(HELD_UP_WAIT if timeout is None
                                              else min(timeout, HELD_UP_WAIT))
        else:
            # (Held back, libssh2 holds that stream's data by design: the wait is for the
            # socket, or for its reader to take some, which wakes the link.)
            yield from self.link.wait(timeout, what)

    def read_or_wait(self, timeout: Optional[float] = None,
                     limited: bool = False) -> Procedure[None]:
        """Read what has come for either stream; if nothing had, wait once. ``limited``:
        each stream within :data:`UNREAD_LIMIT` (see :meth:`read_some`)."""
        if not (self.read_some(0, limited=limited) | self.read_some(1, limited=limited)) \
                and not self.at_eof:
            yield from self._wait(timeout, "reading output")

    def wait_eof(self, timeout: Optional[float] = None, consume: bool = False,
                 settle: bool = False) -> Procedure[None]:
        """Read (with ``consume``, discard) all output until both streams end, then close
        the channel; Timeout after ``timeout`` seconds.

        With ``settle``, the server's own close is awaited before ours: sshd sends
        the exit status or signal just before it, when it has reaped the command,
        which can be later than the EOF; a close of ours that got there first
        would make it drop them.
        """
        deadline = deadline_after(timeout)
        while not self.at_eof:
            progress = self.read_some(0) | self.read_some(1)
            if consume:
                self.discard()
            if progress:
                self._check_deadline(deadline)
                yield from self.link.turn()
            if not progress and not self.at_eof:
                left = remaining(deadline)
                if left == 0:
                    raise exc.Timeout.at(self.link.host, self.link.port,
                                         f"command still running after {timeout} s")
                yield from self._wait(left, "command still running")
        if consume:
            self.discard()
        if settle and not self.closed:
            yield from self.link.call(self.channel.wait_closed, timeout=remaining(deadline),
                                      what="waiting for the exit status")
        yield from self.finish(UNSET if deadline is None else remaining(deadline))

    def discard(self) -> None:
        """Drop what the buffers hold."""
        for buffer in self.buffers:
            if buffer.has_data():
                buffer.take()

    def finish(self, timeout: Limit = UNSET) -> Procedure[None]:
        """Close the channel, wait for the server's close, keep the exit status
        (idempotent). A server that does not answer within ``timeout`` (the link's by
        default), which bounds the whole, leaves the channel given up: no exit status.

        ``exit_code`` is None when the command did not say how it ended: killed by a
        signal (``exit_signal``), or closed before any exit status came. libssh2 says 0
        for "none"; where it can tell the two apart (our patched build), a stopped
        command never reads as a success."""
        if self.closed:
            return
        self.closed = True
        channel = self.channel
        deadline = deadline_after(self.link.timeout if timeout is UNSET else timeout)
        try:
            if channel.eof() and channel.exit_status_received() is False:
                yield from self._settle(remaining(deadline))
            # libssh2's close also waits for the server's close (wait_closed would
            # refuse a channel closed before the command's EOF). It gets what the
            # settling left: one deadline for the whole.
            yield from self.link.call(channel.close, timeout=remaining(deadline),
                                      what="closing the channel")
        finally:
            for buffer in self.buffers:
                if not buffer.ended:
                    buffer.end()
        _, name, message, language = channel.get_exit_signal()
        if name:
            self.exit_signal = (name.decode(errors="replace"), False,
                                (message or b"").decode(errors="replace"),
                                (language or b"").decode(errors="replace"))
        if self.exit_signal or channel.exit_status_received() is False:
            self.exit_code = None
        else:
            self.exit_code = channel.get_exit_status()

    def _settle(self, timeout: Limit) -> Procedure[None]:
        """The output has ended and no exit status has come yet: wait, within
        :data:`SETTLE_TIMEOUT`, for the server's close, which follows it."""
        limit = SETTLE_TIMEOUT if timeout is UNSET or timeout is None \
            else min(timeout, SETTLE_TIMEOUT)
        try:
            yield from self.link.call(self.channel.wait_closed, timeout=limit,
                                      what="waiting for the exit status")
        except exc.Timeout:
            log.debug("%s: no exit status within %s s of the output's end", self.link.host,
                      limit)
        for stream, size in enumerate(self.dropped):
            if size:
                log.warning("%s:%s: %d bytes of %s were dropped unread", self.link.host,
                            self.link.port, size, STREAM_NAMES[stream])

    def close(self, timeout: Limit = UNSET) -> Procedure[None]:
        """Stop the command's output here: keep what was read, close the channel."""
        for stream in (0, 1):
            try:
                self.read_some(stream)
            except ssh2_exc.SSH2Error as err:
                log.debug("%s: reading before close: %s", self.link.host, err)
        yield from self.finish(timeout)

    def abandon(self) -> bool:
        """Give the command up without waiting: send the channel's close (libssh2 drops
        its later packets). False if even that could not be sent."""
        if self.closed:
            return True
        self.closed = True
        for buffer in self.buffers:
            if not buffer.ended:
                buffer.end()
        try:
            self.channel.close()  # EAGAIN: the server has not answered yet
        except ssh2_exc.SSH2Error as err:
            log.debug("%s: closing an abandoned channel failed: %s", self.link.host, err)
            return False
        return True

    # -- writing -------------------------------------------------------------------------

    def write(self, data: bytes) -> Procedure[None]:
        """Send ``data`` (bytes) to the command's standard input."""
        yield from self.link.write(self.channel.write, data, what="writing stdin")

    def flush(self) -> Procedure[None]:
        """Nothing to do: :meth:`write` returns once libssh2 has taken the data. libssh2's
        ``channel_flush`` is no input flush: it throws away the output received and not yet
        read, so calling it here lost output of a command being written to."""
        return
        yield  # never reached: makes this function a generator, i.e. a procedure

    def send_eof(self) -> Procedure[None]:
        """End the command's standard input (once)."""
        if not self._eof_sent and not self.closed:
            self._eof_sent = True
            yield from self.link.call(self.channel.send_eof, what="ending stdin")


__all__ = ["CommandStreams", "ExitSignal", "STREAM_NAMES", "StreamBuffer", "UNREAD_LIMIT"]
