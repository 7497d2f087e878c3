"""``HostOutput``: one host's command, its streams and its result (parallel-ssh's API)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Optional, Union

from pssh.core.lines import MAX_LINE, LongLines

if TYPE_CHECKING:
    from pssh.clients.reader import ChannelReader, CommandOutput, ConcurrentRWBuffer

    #: What fills a command's buffers: the channel of a command run in this process, or
    #: the output of one run elsewhere (a worker of the sharded client).
    OutputReader = Union[ChannelReader, CommandOutput]


class BufferData:
    """One stream of a command: ``rw_buffer`` holds what was read and not yet consumed;
    ``reader`` fills it: a :class:`~pssh.clients.reader.ChannelReader`, or a
    :class:`~pssh.clients.reader.CommandOutput` for output that comes from elsewhere."""

    __slots__ = ("reader", "rw_buffer")

    def __init__(self, reader: Optional["OutputReader"], rw_buffer: "ConcurrentRWBuffer") -> None:
        self.reader = reader
        self.rw_buffer = rw_buffer


class HostOutputBuffers:
    """The stdout and stderr :class:`BufferData` of a command."""

    __slots__ = ("stdout", "stderr")

    def __init__(self, stdout: BufferData, stderr: BufferData) -> None:
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    def of(cls, reader: "OutputReader") -> "HostOutputBuffers":
        return cls(BufferData(reader, reader.stdout), BufferData(reader, reader.stderr))


class HostOutput:
    """What ``run_command`` returns for a host.

    ``stdout`` and ``stderr`` iterate over the command's output lines as it
    produces them (decoded with ``encoding``; ``\\n`` and ``\\r\\n`` removed;
    a last line without a newline included). Each iteration is bounded by
    ``read_timeout`` as a whole and raises :class:`pssh.exceptions.Timeout`
    when it passes; output not yet read stays for the next iteration.
    ``exit_code`` is set once the command has ended and its output was read
    to the end (or ``join``/``wait_finished`` ran). A host that failed has
    ``exception`` set, ``client`` None and no output.

    ``fully_qualified_command``: the command as sent, bytes in ``encoding``
    (with per-host arguments, sudo and shell applied); None for shells.
    ``errors``: how undecodable bytes are decoded (default ``"replace"``).

    ``max_line`` (ours; set it before iterating): a line longer than that many bytes
    comes in pieces of that size, the first time said by a warning naming the host
    (default :data:`pssh.core.lines.MAX_LINE`, 1 MiB; ``None``: no limit, a host that
    never sends a newline is then held whole).
    """

    __slots__ = ("host", "channel", "stdin", "client", "alias", "exception", "encoding",
                 "read_timeout", "buffers", "fully_qualified_command", "errors", "max_line",
                 "_long_lines")

    def __init__(self, host: str, channel: Any, stdin: Any, client: Any,
                 alias: Optional[str] = None, exception: Optional[BaseException] = None,
                 encoding: str = "utf-8", read_timeout: Optional[float] = None,
                 buffers: Optional[HostOutputBuffers] = None,
                 fully_qualified_command: Optional[bytes] = None,
                 errors: str = "replace") -> None:
        self.host = host
        self.channel = channel
        self.stdin = stdin
        self.client = client
        self.alias = alias
        self.exception = exception
        self.encoding = encoding
        self.read_timeout = read_timeout
        self.buffers = buffers
        self.fully_qualified_command = fully_qualified_command
        self.errors = errors
        self.max_line: Optional[int] = MAX_LINE
        self._long_lines: Optional[LongLines] = None

    def _lines(self, data: Optional[BufferData], prefix: str) -> Iterator[str]:
        if self.client is None or data is None:
            return iter(())
        # One for both streams and every iteration: a long line is said once per command.
        said = self._long_lines
        if said is None or said.max_line != self.max_line:
            said = self._long_lines = LongLines(self.host, self.max_line)
        return self.client.read_output_buffer(
            self.client.read_output(data.rw_buffer, timeout=self.read_timeout,
                                    max_line=self.max_line, on_split=said),
            prefix=prefix, encoding=self.encoding, errors=self.errors)

    @property
    def stdout(self) -> Iterator[str]:
        """The command's standard output, line by line, as it comes."""
        return self._lines(self.buffers.stdout if self.buffers else None, "")

    @property
    def stderr(self) -> Iterator[str]:
        """The command's standard error, line by line, as it comes."""
        return self._lines(self.buffers.stderr if self.buffers else None, "\t[err]")

    @property
    def exit_code(self) -> Optional[int]:
        """The exit status once known, else None."""
        if self.client is None:
            return None
        return self.client.get_exit_status(self.channel)

    @property
    def exit_signal(self) -> Optional[str]:
        """The signal that ended the command (e.g. ``"TERM"``), if one did."""
        reader = self._reader
        return reader.exit_signal if reader is not None else None

    @property
    def finished(self) -> bool:
        """Whether the command has ended and its channel is closed (never blocks)."""
        reader = self._reader
        return reader is None or reader.closed

    @property
    def _reader(self) -> Optional["OutputReader"]:
        return self.buffers.stdout.reader if self.buffers is not None else None

    def __repr__(self) -> str:
        return (f"HostOutput(host={self.host!r}, alias={self.alias!r}, "
                f"exit_code={self.exit_code!r}, exception={self.exception!r}, "
                f"encoding={self.encoding!r}, read_timeout={self.read_timeout!r}, "
                f"fully_qualified_command={self.fully_qualified_command!r})")

    __str__ = __repr__
