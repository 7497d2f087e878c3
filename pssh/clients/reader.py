"""A running command's output for the gevent client: parallel-ssh's buffers over the core.

:class:`ConcurrentRWBuffer` is parallel-ssh's buffer API (``write``, ``read``,
``eof``, iteration); as the buffer of a command's stream it is filled by the
session core (:class:`pssh.core.streams.CommandStreams`), which reads when
someone iterates it or joins the command and drains the other stream first
(both share one flow-control window). Used on its own, any writer fills it.

:class:`ChannelReader` owns a command's channel for the client: the core's
streams with these buffers, driven by the client's runner.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Iterator, Optional, Protocol

from gevent.event import Event

from pssh import exceptions as exc
from pssh.core.lines import split_lines
from pssh.core.streams import CommandStreams
from pssh.core.deadlines import UNSET, remaining

log = logging.getLogger("pssh.reader")


class Source(Protocol):
    """What fills a buffer on demand: a :class:`ChannelReader`, or a
    :class:`CommandOutput` for output that comes from elsewhere."""

    def fill(self, stream: int, deadline: Optional[float]) -> None: ...

    def reading(self, stream: int, started: bool) -> None: ...

    def taken(self, stream: int) -> None: ...


class ConcurrentRWBuffer:
    """Bytes of one stream: written as they arrive, consumed as they are read.

    ``eof`` is an event set once the writer is done. Iterating yields chunks
    until EOF. With a ``source`` (a :class:`ChannelReader`), an empty buffer
    asks the source for more instead of waiting for a writer.
    """

    __slots__ = ("_chunks", "eof", "_unread_data", "_source", "_stream", "_held")

    def __init__(self, source: Optional[Source] = None, stream: int = 0) -> None:
        self._chunks: deque = deque()
        self._held = 0
        self._unread_data = Event()
        self.eof = Event()
        self._source = source
        self._stream = stream

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        if data:
            self._chunks.append(data)
            self._held += len(data)
            self._unread_data.set()

    def read(self) -> Optional[bytes]:
        """Everything buffered, or None if nothing is."""
        if not self._chunks:
            self._unread_data.clear()
            return None
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._held = 0
        self._unread_data.clear()
        if self._source is not None:
            self._source.taken(self._stream)  # a read held back for this one goes on
        return data

    # The core's buffer protocol (pssh.core.streams).
    append = write

    def has_data(self) -> bool:
        return bool(self._chunks)

    def held(self) -> int:
        return self._held

    def take(self) -> bytes:
        return self.read() or b""

    def end(self) -> None:
        self.eof.set()

    @property
    def ended(self) -> bool:
        return self.eof.is_set()

    def chunks(self, deadline: Optional[float] = None) -> Iterator[bytes]:
        """Chunks until EOF; :class:`~pssh.exceptions.Timeout` if ``deadline`` passes first.

        While the iteration is open (begun, not ended nor closed) the source counts it a
        reader of the stream: what the stream holds unread is then held back for it,
        never dropped (see :mod:`pssh.core.streams`). So a reader of both streams at
        once loses nothing; one that keeps an iteration open and stops advancing it
        holds up the other stream once this one has 32 MiB unread."""
        source = self._source
        if source is not None:
            source.reading(self._stream, True)
        try:
            while True:
                data = self.read()
                if data is not None:
                    yield data
                    continue
                if self.eof.is_set():
                    return
                if source is not None:
                    source.fill(self._stream, deadline)
                elif not self._wait_for_writer(deadline):
                    raise exc.Timeout("no output within the read timeout")
        finally:
            if source is not None:
                source.reading(self._stream, False)

    def _wait_for_writer(self, deadline: Optional[float]) -> bool:
        waiter = Event()
        # Whichever comes first: data or EOF.
        self._unread_data.rawlink(lambda _: waiter.set())
        self.eof.rawlink(lambda _: waiter.set())
        return waiter.wait(remaining(deadline)) or self._unread_data.is_set() \
            or self.eof.is_set()

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks()


class CommandOutput:
    """A command's two output buffers, which ask this object for more when empty
    (:meth:`fill`), and how the command ended: for commands whose output comes from
    elsewhere than a channel of this process (the sharded client's workers)."""

    def __init__(self) -> None:
        self.stdout = ConcurrentRWBuffer(self, 0)
        self.stderr = ConcurrentRWBuffer(self, 1)
        #: ``(stdout, stderr)``, by stream number (0, 1): where a subclass writes what
        #: comes, and sets ``eof`` on at a stream's end.
        self.buffers = (self.stdout, self.stderr)
        self.exit_code: Optional[int] = None
        self.exit_signal: Optional[str] = None
        self.closed = False

    def fill(self, stream: int, deadline: Optional[float]) -> None:
        """Wait until ``stream`` has data or has ended (:class:`~pssh.exceptions.Timeout`
        once ``deadline`` has passed)."""
        raise NotImplementedError

    def reading(self, stream: int, started: bool) -> None:
        """An iteration of ``stream`` begins or ends (nothing to do here: what comes from
        elsewhere is bounded there)."""

    def taken(self, stream: int) -> None:
        """Output of ``stream`` was taken out of its buffer (nothing to do here)."""


class ChannelReader:
    """A command's channel for the gevent client: the core's streams (``streams``) with
    parallel-ssh's buffers, each step run by the client's runner."""

    def __init__(self, client, channel) -> None:
        self.stdout = ConcurrentRWBuffer(self, 0)
        self.stderr = ConcurrentRWBuffer(self, 1)
        self.streams = CommandStreams(client._link, channel, self.stdout, self.stderr)
        self.channel = channel
        self._run = client._run

    # -- what the core knows -------------------------------------------------------------

    @property
    def at_eof(self) -> bool:
        """Both streams have ended (the command finished writing)."""
        return self.streams.at_eof

    @property
    def closed(self) -> bool:
        return self.streams.closed

    @property
    def exit_code(self) -> Optional[int]:
        return self.streams.exit_code

    @property
    def exit_signal(self) -> Optional[str]:
        """The name of the signal that ended the command (e.g. ``"TERM"``), if one did."""
        signal = self.streams.exit_signal
        return signal[0] if signal else None

    @property
    def marker(self) -> Optional[str]:
        return self.streams.marker

    @marker.setter
    def marker(self, value: Optional[str]) -> None:
        self.streams.marker = value

    @property
    def auto_finish(self) -> bool:
        return self.streams.auto_finish

    @auto_finish.setter
    def auto_finish(self, value: bool) -> None:
        self.streams.auto_finish = value

    # -- steps ---------------------------------------------------------------------------

    def fill(self, stream: int, deadline: Optional[float]) -> None:
        """Read until ``stream`` has data or has ended (Timeout once ``deadline`` passed)."""
        self._run(self.streams.fill(stream, deadline))

    def reading(self, stream: int, started: bool) -> None:
        """An iteration of ``stream`` begins or ends (:meth:`CommandStreams.reading
        <pssh.core.streams.CommandStreams.reading>`)."""
        self.streams.reading(stream, started)

    def taken(self, stream: int) -> None:
        """Output of ``stream`` was taken out of its buffer."""
        self.streams.taken(stream)

    def wake(self) -> None:
        """Wake whoever waits on this command's connection (they look again)."""
        self.streams.link.wake()

    def read_some(self, stream: int) -> bool:
        """Move what libssh2 holds for ``stream`` into its buffer without waiting."""
        return self.streams.read_some(stream)

    def read_or_wait(self, timeout: Optional[float] = None, limited: bool = False) -> None:
        self._run(self.streams.read_or_wait(timeout, limited))

    def wait_eof(self, timeout: Optional[float] = None, consume: bool = False,
                 settle: bool = False) -> None:
        """Read (or discard) all output, then close the channel (see the core's)."""
        self._run(self.streams.wait_eof(timeout, consume, settle))

    def finish(self, timeout=UNSET) -> None:
        self._run(self.streams.finish(timeout))

    def close(self, timeout=UNSET) -> None:
        """Stop the command's output here: keep what was read, close the channel."""
        self._run(self.streams.close(timeout))

    def write(self, data) -> None:
        """Send ``data`` (str is UTF-8 encoded) to the command's standard input."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        self._run(self.streams.write(data))

    def flush(self) -> None:
        self._run(self.streams.flush())

    def send_eof(self) -> None:
        """End the command's standard input (once)."""
        self._run(self.streams.send_eof())


__all__ = ["ChannelReader", "CommandOutput", "ConcurrentRWBuffer", "split_lines"]
