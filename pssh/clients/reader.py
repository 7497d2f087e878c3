"""A running command's output: read from its channel on demand, kept per stream.

stdout and stderr share one flow-control window: a command that fills
stderr while the caller reads only stdout would stall. Whenever the stream
being read has nothing, :class:`ChannelReader` drains the other stream into
its buffer before waiting on the socket. Nothing reads in the background:
a command's output is read when someone iterates it or joins it, and
consumed data is released as it is handed out (memory stays bounded by what
was read and not yet consumed).

:class:`ConcurrentRWBuffer` is parallel-ssh's buffer API (``write``,
``read``, ``eof``, iteration); filled by a :class:`ChannelReader` here, or by
any writer when used on its own.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Iterator, Optional

from gevent.event import Event

from pssh import exceptions as exc
from pssh.channel_io import data_pending, read_available
from pssh.driver import UNSET, SessionDriver, deadline_after, remaining
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.reader")



class ConcurrentRWBuffer:
    """Bytes of one stream: written as they arrive, consumed as they are read.

    ``eof`` is an event set once the writer is done. Iterating yields chunks
    until EOF. With a ``source`` (a :class:`ChannelReader`), an empty buffer
    asks the source for more instead of waiting for a writer.
    """

    __slots__ = ("_chunks", "eof", "_unread_data", "_source", "_stream")

    def __init__(self, source: Optional["CommandStreams"] = None, stream: int = 0) -> None:
        self._chunks: deque = deque()
        self._unread_data = Event()
        self.eof = Event()
        self._source = source
        self._stream = stream

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        if data:
            self._chunks.append(data)
            self._unread_data.set()

    def read(self) -> Optional[bytes]:
        """Everything buffered, or None if nothing is."""
        if not self._chunks:
            self._unread_data.clear()
            return None
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._unread_data.clear()
        return data

    def chunks(self, deadline: Optional[float] = None) -> Iterator[bytes]:
        """Chunks until EOF; :class:`~pssh.exceptions.Timeout` if ``deadline`` passes first."""
        while True:
            data = self.read()
            if data is not None:
                yield data
                continue
            if self.eof.is_set():
                return
            if self._source is not None:
                self._source.fill(self._stream, deadline)
            elif not self._wait_for_writer(deadline):
                raise exc.Timeout("no output within the read timeout")

    def _wait_for_writer(self, deadline: Optional[float]) -> bool:
        waiter = Event()
        # Whichever comes first: data or EOF.
        self._unread_data.rawlink(lambda _: waiter.set())
        self.eof.rawlink(lambda _: waiter.set())
        return waiter.wait(remaining(deadline)) or self._unread_data.is_set() \
            or self.eof.is_set()

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks()


def split_lines(chunks) -> Iterator[bytes]:
    """Lines of a byte stream (``\\n`` or ``\\r\\n`` removed; a last line without one included).

    Long lines are assembled from a list of pieces (no quadratic copying).
    """
    partial: list = []
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if start < len(chunk):
                    partial.append(chunk[start:])
                break
            piece = chunk[start:end]
            if partial:
                partial.append(piece)
                piece = b"".join(partial)
                partial = []
            yield piece[:-1] if piece.endswith(b"\r") else piece
            start = end + 1
    if partial:
        piece = b"".join(partial)
        yield piece[:-1] if piece.endswith(b"\r") else piece


class CommandStreams:
    """A command's two output buffers, which ask this object for more when empty
    (:meth:`fill`), and how the command ended."""

    def __init__(self) -> None:
        self.stdout = ConcurrentRWBuffer(self, 0)
        self.stderr = ConcurrentRWBuffer(self, 1)
        self._buffers = (self.stdout, self.stderr)
        self.exit_code: Optional[int] = None
        self.exit_signal: Optional[str] = None
        self.closed = False

    def fill(self, stream: int, deadline: Optional[float]) -> None:
        """Wait until ``stream`` has data or has ended (:class:`~pssh.exceptions.Timeout`
        once ``deadline`` has passed)."""
        raise NotImplementedError


class ChannelReader(CommandStreams):
    """Owns a running command's channel: its two stream buffers, EOF and exit status."""

    def __init__(self, driver: SessionDriver, channel) -> None:
        super().__init__()
        self.driver = driver
        self.channel = channel
        #: The environment marker of a cancellable command (see pssh.cancel).
        self.marker: Optional[str] = None
        #: Close the channel as soon as both streams end. A relay, which may
        #: still send after the far end's EOF, turns this off and closes it
        #: itself (nothing may follow our close: sshd drops the connection).
        self.auto_finish = True
        self._eof_sent = False

    @property
    def at_eof(self) -> bool:
        """Both streams have ended (the command finished writing)."""
        return self.stdout.eof.is_set() and self.stderr.eof.is_set()

    # -- reading ---------------------------------------------------------------

    def _read_some(self, stream: int, enough: bool = False) -> bool:
        """Move what libssh2 has for ``stream`` into its buffer; True if anything came
        (with ``enough``, stop at the first chunk: see :func:`pssh.channel_io.read_available`)."""
        buffer = self._buffers[stream]
        if buffer.eof.is_set():
            return False
        if self.closed:
            buffer.eof.set()
            return True
        progress, ended = read_available(self.channel, stream, buffer.write,
                                         (lambda: bool(buffer._chunks)) if enough else None)
        if ended:
            buffer.eof.set()
        if progress:
            self.driver.wake()
        return progress

    def _pending(self) -> bool:
        return data_pending(self.channel)

    def fill(self, stream: int, deadline: Optional[float]) -> None:
        """Read until ``stream`` has data or has ended, draining the other stream meanwhile.

        Raises :class:`~pssh.exceptions.Timeout` once ``deadline`` has passed.
        """
        buffer = self._buffers[stream]
        while not buffer._chunks and not buffer.eof.is_set():
            if self._read_some(stream, enough=True) or self._read_some(1 - stream):
                continue
            if not self._pending():
                left = remaining(deadline)
                if left == 0:
                    raise exc.Timeout("%s:%s: no output within the read timeout",
                                      self.driver.host, self.driver.port,
                                      host=self.driver.host, port=self.driver.port)
                self.driver.wait(left, "reading output")
        if buffer.eof.is_set():
            # The other stream has usually ended too (one EOF covers the channel):
            # then the exit status can be collected now.
            self._read_some(1 - stream)
        if self.at_eof and self.auto_finish:
            self.finish()

    def read_some(self, stream: int) -> bool:
        """Move what libssh2 holds for ``stream`` into its buffer without waiting; True if
        anything came."""
        return self._read_some(stream)

    def read_or_wait(self, timeout: Optional[float] = None) -> None:
        """Read what has come for either stream; if nothing had, wait once on the socket
        (or until :meth:`SessionDriver.wake`)."""
        if not (self._read_some(0) | self._read_some(1)) and not self._pending() \
                and not self.at_eof:
            self.driver.wait(timeout, "reading output")

    def wait_eof(self, timeout: Optional[float] = None, consume: bool = False,
                 settle: bool = False) -> None:
        """Read (or with ``consume``, discard) all output until both streams end, then
        close the channel. Raises :class:`~pssh.exceptions.Timeout` after ``timeout``.

        With ``settle``, the server's own close is awaited before ours: sshd sends
        the exit status or signal just before it, when it has reaped the command,
        which can be later than the EOF; a close of ours that got there first
        would make it drop them.
        """
        deadline = deadline_after(timeout)
        while not self.at_eof:
            progress = self._read_some(0) | self._read_some(1)
            if consume:
                for buffer in self._buffers:
                    buffer.read()
            if not progress and not self.at_eof and not self._pending():
                left = remaining(deadline)
                if left == 0:
                    raise exc.Timeout("%s:%s: command still running after %s s",
                                      self.driver.host, self.driver.port, timeout,
                                      host=self.driver.host, port=self.driver.port)
                self.driver.wait(left, "command still running")
        if consume:
            for buffer in self._buffers:
                buffer.read()
        if settle and not self.closed:
            self.driver.eagain(self.channel.wait_closed, timeout=remaining(deadline),
                               what="waiting for the exit status")
        self.finish()

    def finish(self, timeout=UNSET) -> None:
        """Close the channel, wait for the server's close, keep the exit status (idempotent).

        A server that does not answer within ``timeout`` (the driver's by
        default) leaves the channel given up here: no exit status.
        """
        if self.closed:
            return
        self.closed = True
        try:
            # libssh2's close also waits for the server's close (wait_closed
            # would refuse a channel closed before the command's EOF).
            self.driver.eagain(self.channel.close, timeout=timeout, what="closing the channel")
        finally:
            for buffer in self._buffers:
                buffer.eof.set()
        signal = self.channel.get_exit_signal()[1]
        self.exit_signal = signal.decode() if signal else None
        # A command killed by a signal has no exit status (libssh2 would say 0).
        self.exit_code = None if self.exit_signal else self.channel.get_exit_status()

    def close(self, timeout=UNSET) -> None:
        """Stop the command's output here: keep what was read, close the channel."""
        for stream in (0, 1):
            try:
                self._read_some(stream)
            except ssh2_exc.SSH2Error as err:
                log.debug("%s: reading before close: %s", self.driver.host, err)
        self.finish(timeout)

    # -- writing -----------------------------------------------------------------

    def write(self, data) -> None:
        """Send ``data`` (str is UTF-8 encoded) to the command's standard input."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        self.driver.write(self.channel.write, data, what="writing stdin")

    def flush(self) -> None:
        self.driver.eagain(self.channel.flush, what="flushing stdin")

    def send_eof(self) -> None:
        """End the command's standard input (once)."""
        if not self._eof_sent and not self.closed:
            self._eof_sent = True
            self.driver.eagain(self.channel.send_eof, what="ending stdin")
