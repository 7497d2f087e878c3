"""Reading a channel's two streams on the gevent hub without ever blocking it.

stdout and stderr share one flow-control window: a command that fills
stderr while the caller reads only stdout would stall. Whenever the stream
being read has nothing, the other one is drained into its buffer before
waiting on the socket. Consumed data is released as lines are handed out.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

if TYPE_CHECKING:
    from pssh.clients.native.single import SSHClient

CHUNK = 65536


def split_lines(chunks, encoding: str, errors: str) -> Iterator[str]:
    """Decoded lines from byte chunks; handles \\n, \\r\\n and a last unterminated line.

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
            if piece.endswith(b"\r"):
                piece = piece[:-1]
            yield piece.decode(encoding, errors)
            start = end + 1
    if partial:
        piece = b"".join(partial)
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        yield piece.decode(encoding, errors)


class ChannelReader:
    """Owns a running command's channel: buffers, EOF state, exit status."""

    def __init__(self, client: "SSHClient", channel) -> None:
        self.client = client
        self.channel = channel
        self._buffers = ([], [])
        self._eof = [False, False]
        self.exit_code: Optional[int] = None
        self.exit_signal: Optional[str] = None
        self.closed = False

    # -- reading ---------------------------------------------------------------

    def _drain(self, stream: int) -> bool:
        """Move everything available on ``stream`` into its buffer; True if anything came."""
        progress = False
        while not self._eof[stream]:
            size, data = self.channel.read_ex(CHUNK, stream)
            if size > 0:
                self._buffers[stream].append(data)
            elif size == 0:
                self._eof[stream] = True
            else:
                break
            progress = True
        if progress:
            self.client.wake()
        return progress

    def _pending(self) -> bool:
        """Whether libssh2 already holds data or EOF for this channel.

        Reading one stream can pull the other stream's packets off the socket
        into libssh2's queue; waiting on the socket for them would hang.
        """
        return bool(self.channel.poll_channel_read(1)) or self.channel.eof()

    def _wait(self, timeout: Optional[float], what: str) -> None:
        if not self._pending():
            self.client.wait(timeout, what)

    def chunks(self, stream: int, read_timeout: Optional[float],
               finish: bool = True) -> Iterator[bytes]:
        """Byte chunks of ``stream`` until its EOF.

        With ``finish``, the channel is closed once both streams have ended;
        a relay that may still send passes False and closes it itself
        (nothing may follow our close on a channel: sshd drops the connection).
        """
        buffer = self._buffers[stream]
        while True:
            if buffer:
                data = b"".join(buffer)
                buffer.clear()
                yield data
                continue
            if self._eof[stream]:
                break
            size, data = self.channel.read_ex(CHUNK, stream)
            if size > 0:
                self.client.wake()
                yield data
            elif size == 0:
                self._eof[stream] = True
            elif size == LIBSSH2_ERROR_EAGAIN:
                if not self._drain(1 - stream):
                    self._wait(read_timeout, "no output")
        # The other stream has usually ended too: then the exit status is known.
        self._drain(1 - stream)
        if finish and all(self._eof):
            self._finish()

    def lines(self, stream: int, encoding: str, errors: str,
              read_timeout: Optional[float]) -> Iterator[str]:
        return split_lines(self.chunks(stream, read_timeout), encoding, errors)

    def wait_eof(self, timeout: Optional[float]) -> None:
        """Buffer all remaining output until the command's streams end."""
        while not all(self._eof):
            progress = self._drain(0) | self._drain(1)
            if not progress and not all(self._eof):
                self._wait(timeout, "command still running")
        self._finish()

    def consume(self, timeout: Optional[float]) -> None:
        """Like :meth:`wait_eof`, discarding the output."""
        while not all(self._eof):
            progress = self._drain(0) | self._drain(1)
            for buffer in self._buffers:
                buffer.clear()
            if not progress and not all(self._eof):
                self._wait(timeout, "command still running")
        self._finish()

    def close(self) -> None:
        """Close the channel and wait for the server to close it too (idempotent)."""
        self._finish()

    def _finish(self) -> None:
        if self.closed:
            return
        self.client.retry_eagain(self.channel.close)
        self.client.retry_eagain(self.channel.wait_closed)
        self.exit_code = self.channel.get_exit_status()
        signal = self.channel.get_exit_signal()[1]
        self.exit_signal = signal.decode() if signal else None
        self.closed = True

    # -- writing -----------------------------------------------------------------

    def write(self, data) -> None:
        data = data.encode() if isinstance(data, str) else bytes(data)
        while data:
            rc, written = self.channel.write(data)
            data = data[written:]
            if rc == LIBSSH2_ERROR_EAGAIN:
                self.client.wait(self.client.timeout, "writing stdin")
            else:
                self.client.wake()

    def flush(self) -> None:
        self.client.retry_eagain(self.channel.flush)

    def send_eof(self) -> None:
        self.client.retry_eagain(self.channel.send_eof)
