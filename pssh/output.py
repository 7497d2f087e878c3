"""``HostOutput``: one host's command, its streams and its result."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

if TYPE_CHECKING:
    from pssh.clients.native.single import SSHClient
    from pssh.reader import ChannelReader


class Stdin:
    """The command's standard input: ``write()`` then ``flush()``; ``close()`` sends EOF."""

    __slots__ = ("_reader",)

    def __init__(self, reader: "ChannelReader") -> None:
        self._reader = reader

    def write(self, data) -> None:
        self._reader.write(data)

    def flush(self) -> None:
        self._reader.flush()

    def close(self) -> None:
        self._reader.send_eof()


class HostOutput:
    """What ``run_command`` returns for each host.

    ``stdout`` and ``stderr`` iterate over decoded lines as the command
    produces them (``\\n`` and ``\\r\\n`` endings removed, a last line without
    a newline included). ``exit_code`` is set once the command has finished
    and its output has been read (or ``join`` has run). A host that failed has
    ``exception`` set and empty ``stdout``/``stderr``.
    """

    __slots__ = ("host", "alias", "client", "exception", "encoding", "errors", "read_timeout",
                 "_reader", "stdin")

    def __init__(self, host: str, reader: Optional["ChannelReader"] = None,
                 client: Optional["SSHClient"] = None, exception: Optional[BaseException] = None,
                 alias: Optional[str] = None, encoding: str = "utf-8", errors: str = "replace",
                 read_timeout: Optional[float] = None) -> None:
        self.host = host
        self.alias = alias
        self.client = client
        self.exception = exception
        self.encoding = encoding
        self.errors = errors
        self.read_timeout = read_timeout
        self._reader = reader
        self.stdin = Stdin(reader) if reader is not None else None

    @property
    def channel(self):
        return self._reader.channel if self._reader is not None else None

    @property
    def stdout(self) -> Iterator[str]:
        if self._reader is None:
            return iter(())
        return self._reader.lines(0, self.encoding, self.errors, self.read_timeout)

    @property
    def stderr(self) -> Iterator[str]:
        if self._reader is None:
            return iter(())
        return self._reader.lines(1, self.encoding, self.errors, self.read_timeout)

    @property
    def exit_code(self) -> Optional[int]:
        return self._reader.exit_code if self._reader is not None else None

    @property
    def exit_signal(self) -> Optional[str]:
        return self._reader.exit_signal if self._reader is not None else None

    @property
    def finished(self) -> bool:
        return self._reader is None or self._reader.closed

    def __repr__(self) -> str:
        state = f"exception={self.exception!r}" if self.exception else f"exit_code={self.exit_code}"
        return f"HostOutput(host={self.host!r}, {state})"
