"""asyncssh's callback interface for channels: sessions, channels, and a forwarder.

A program subclasses :class:`SSHClientSession` (a command's channel) or
:class:`SSHTCPSession` (a TCP connection carried over SSH) and overrides the
callbacks it needs; ``conn.create_session(factory, command)``,
``conn.create_connection(factory, host, port)`` and ``conn.create_server(factory, ...)``
make the session, give it its channel (:class:`SSHClientChannel` /
:class:`SSHTCPChannel`) in ``connection_made``, and call it as data, EOF, the exit
status and the end arrive.

Under it is the same machinery as under :class:`~pssh.aio.SSHClientProcess`: a
:class:`~pssh.aio.process.ChannelStreams` read by one task per channel (the pump),
which reads only while the session is not paused (``pause_reading``), so memory stays
bounded by what ``data_received`` keeps; writes go out in the background in order
(an :class:`~pssh.aio.SSHWriter`).
"""
from __future__ import annotations

import asyncio
import codecs
import inspect
import logging
from typing import Any, Callable, Optional, Union

from pssh import exceptions as exc
from pssh.aio.constants import EXTENDED_DATA_STDERR, DataType
from pssh.aio.exceptions import returncode
from pssh.aio.process import ChannelStreams, SSHWriter
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.aio.session")


class SSHTCPSession:
    """The callbacks of a TCP connection carried over SSH (asyncssh's ``SSHTCPSession``).

    The default of each does nothing; ``eof_received`` returning a true value keeps the
    channel open for writing after the peer's EOF (else it is closed)."""

    def connection_made(self, chan: "SSHTCPChannel") -> None:
        """The channel is open: keep ``chan`` to write to it."""

    def connection_lost(self, exc: Optional[Exception]) -> None:
        """The channel is closed (``exc``: why, if it failed)."""

    def session_started(self) -> None:
        """Data can flow."""

    def data_received(self, data: Union[str, bytes], datatype: DataType) -> None:
        """``data`` arrived (str when the channel has an encoding)."""

    def eof_received(self) -> bool:
        """The peer will send nothing more."""
        return False

    def pause_writing(self) -> None:
        """Kept for asyncssh's interface: writes here are queued, never refused."""

    def resume_writing(self) -> None:
        """Kept for asyncssh's interface."""


class SSHClientSession(SSHTCPSession):
    """The callbacks of a command's channel (asyncssh's ``SSHClientSession``): also the
    exit status or signal; ``data_received``'s ``datatype`` is None for standard output
    and :data:`~pssh.aio.EXTENDED_DATA_STDERR` for standard error."""

    def exit_status_received(self, status: int) -> None:
        """The command exited with ``status``."""

    def exit_signal_received(self, signal: str, core_dumped: bool, msg: str,
                             lang: str) -> None:
        """The command was killed by ``signal`` (``"TERM"``, ...)."""

    def xon_xoff_requested(self, client_can_do: bool) -> None:
        """Kept for asyncssh's interface (libssh2 does not report these requests)."""


class SSHTCPChannel:
    """A channel given to a session's ``connection_made`` (asyncssh's ``SSHTCPChannel``):
    ``write``, ``write_eof``, ``close``, ``wait_closed``, ``pause_reading`` ...

    ``encoding`` None: bytes in and out; else str, encoded and decoded with it."""

    def __init__(self, conn, streams: ChannelStreams, encoding: Optional[str] = None,
                 errors: str = "strict", extra: Optional[dict] = None) -> None:
        self._conn = conn
        self._streams = streams
        self._encoding = encoding
        self._errors = errors
        self._writer = SSHWriter(streams, encoding)
        self._reading = asyncio.Event()
        self._reading.set()
        self._closed = asyncio.Event()
        self._eof_asked = asyncio.Event()   # write_eof() or close() was called
        self._closing = False
        self._extra = dict(extra or {}, connection=conn)
        self._session: Optional[SSHTCPSession] = None
        self._pump: Optional[asyncio.Task] = None

    # -- what the session calls ----------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """This channel's details (``connection``, and the connection's own:
        ``peername``, ``sockname``, ``username`` ...)."""
        if name in self._extra:
            return self._extra[name]
        return self._conn.get_extra_info(name, default)

    def get_encoding(self) -> tuple:
        return self._encoding, self._errors

    def write(self, data: Union[str, bytes], datatype: DataType = None) -> None:
        """Send ``data`` (queued; sent in order in the background)."""
        if datatype is not None:
            raise ValueError("a client channel sends only normal data (datatype None)")
        if self._closing:
            raise exc.SessionError.at(self._conn.host, self._conn.port, "the channel is closed")
        self._writer.write(data)

    def writelines(self, list_of_data, datatype: DataType = None) -> None:
        for data in list_of_data:
            self.write(data, datatype)

    def write_eof(self) -> None:
        """Send EOF once what was written has been sent."""
        self._eof_asked.set()
        self._writer.write_eof()

    def can_write_eof(self) -> bool:
        return True

    def get_write_buffer_size(self) -> int:
        """Bytes queued and not yet handed to libssh2."""
        return sum(len(data) for data in self._writer._pending)

    def set_write_buffer_limits(self, high: Optional[int] = None,
                                low: Optional[int] = None) -> None:
        """Kept for asyncssh's interface: writes are queued without limit."""

    def pause_reading(self) -> None:
        """Stop calling ``data_received`` (nothing more is read from the server meanwhile:
        its flow-control window fills and it waits)."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_closing(self) -> bool:
        return self._closing or self._closed.is_set()

    def close(self) -> None:
        """Close the channel now (unsent writes are dropped); ``connection_lost`` follows."""
        if self._closing:
            return
        self._closing = True
        self._eof_asked.set()
        self._writer._stop()
        if not self._streams.closed:
            self._conn._abandon(self._streams)
        self._streams.link.wake()   # the pump sees the channel closed

    def abort(self) -> None:
        self.close()

    async def wait_closed(self) -> None:
        """Wait until the channel is closed and the session told (``connection_lost``)."""
        await self._closed.wait()

    # -- running ---------------------------------------------------------------------------

    def _start(self, session: SSHTCPSession) -> None:
        """Introduce ``session`` to this channel and start delivering data to it."""
        self._session = session
        session.connection_made(self)
        session.session_started()
        self._pump = asyncio.ensure_future(self._run(session))

    async def _run(self, session: SSHTCPSession) -> None:
        error: Optional[Exception] = None
        decoders = {s: codecs.getincrementaldecoder(self._encoding)(self._errors)
                    for s in (0, 1)} if self._encoding else None
        try:
            while True:
                await self._reading.wait()
                stream, data = await self._streams.any_chunk()
                if stream < 0:
                    break
                self._deliver(session, decoders, stream, data, False)
            if decoders:
                for stream in (0, 1):
                    self._deliver(session, decoders, stream, b"", True)
            if not self._closing:
                if session.eof_received():
                    await self._eof_asked.wait()   # the session still writes, then ends
                else:
                    self.write_eof()
            if not self._closing:
                await self._writer.drain()
                await self._streams.finish()
                self._report_exit(session)
        except asyncio.CancelledError:
            raise
        except Exception as err:   # the channel failed: the session hears why
            log.debug("%s: channel ended: %s", self._conn.host, err)
            error = err
            self._writer._stop()
        finally:
            self._closing = True
            self._closed.set()
            session.connection_lost(error)

    async def _open(self, session_factory: Callable, *args) -> Optional[SSHTCPSession]:
        """Make the session with ``session_factory(*args)`` (awaited if it returns an
        awaitable) and start it; a failing factory closes the channel."""
        try:
            session = await call_factory(session_factory, *args)
        except BaseException:
            self.close()
            self._closed.set()
            raise
        if not session:   # refused
            self.close()
            self._closed.set()
            return None
        self._start(session)
        return session

    def _deliver(self, session, decoders, stream: int, data: bytes, final: bool) -> None:
        text = decoders[stream].decode(data, final) if decoders else data
        if text:
            session.data_received(text, None if stream == 0 else EXTENDED_DATA_STDERR)

    def _report_exit(self, session) -> None:
        """A command's channel tells its exit; a TCP channel has none."""


class SSHClientChannel(SSHTCPChannel):
    """A command's channel (asyncssh's ``SSHClientChannel``): also the exit status and
    signal, and signals to send (``send_signal``, ``terminate``, ``kill``)."""

    def __init__(self, conn, streams: ChannelStreams, encoding: Optional[str] = "utf-8",
                 errors: str = "strict", command: Optional[str] = None, env=None,
                 subsystem: Optional[str] = None,
                 stopper: Optional[Callable[[str], asyncio.Task]] = None) -> None:
        super().__init__(conn, streams, encoding, errors)
        self._command = command
        self._env = env
        self._subsystem = subsystem
        self._stopper = stopper

    def get_command(self) -> Optional[str]:
        return self._command

    def get_subsystem(self) -> Optional[str]:
        return self._subsystem

    def get_environment(self) -> dict:
        return dict(self._env or {})

    def get_exit_status(self) -> Optional[int]:
        """The command's exit status (None until it has exited, or when killed by a signal)."""
        return self._streams.exit_status

    def get_exit_signal(self) -> Optional[tuple]:
        """``(signal, core dumped, message, language)`` if the command was killed."""
        return self._streams.exit_signal

    def get_returncode(self) -> Optional[int]:
        return returncode(self._streams.exit_status, self._streams.exit_signal)

    def send_signal(self, signal: str) -> asyncio.Task:
        """Send ``signal`` (``"TERM"``, ``"INT"`` ...) to the command (see
        :meth:`~pssh.aio.SSHClientProcess.send_signal`)."""
        assert self._stopper is not None  # the connection gives every command channel one
        return self._stopper(signal.upper().removeprefix("SIG"))

    def terminate(self) -> asyncio.Task:
        return self.send_signal("TERM")

    def kill(self) -> asyncio.Task:
        return self.send_signal("KILL")

    def change_terminal_size(self, width: int, height: int, pixwidth: int = 0,
                             pixheight: int = 0) -> asyncio.Task:
        """Tell the server the terminal's new size (a command started with ``term_type``)."""
        return asyncio.ensure_future(self._conn._call(
            self._streams.channel.pty_size, width, height, what="resizing the terminal"))

    def _report_exit(self, session) -> None:
        signal = self._streams.exit_signal
        if signal:
            session.exit_signal_received(*signal)
        elif self._streams.exit_status is not None:
            session.exit_status_received(self._streams.exit_status)


class SSHForwarder(SSHTCPSession):
    """A session that carries its channel to a local TCP connection, both ways (what
    asyncssh's ``conn.forward_connection(host, port)`` returns for a listener)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._chan: Optional[SSHTCPChannel] = None
        self._upstream: Optional[asyncio.Task] = None

    def connection_made(self, chan: SSHTCPChannel) -> None:
        self._chan = chan
        self._upstream = asyncio.ensure_future(self._from_local(chan))

    async def _from_local(self, chan: SSHTCPChannel) -> None:
        try:
            while data := await self._reader.read(65536):
                chan.write(data)
                await chan._writer.drain()
            chan.write_eof()
        except (OSError, exc.PSSHError, ssh2_exc.SSH2Error) as err:
            log.debug("forwarded connection: local side ended: %s", err)
            chan.close()

    # The ignore: a forwarded channel has no encoding, so its data are bytes.
    def data_received(self, data: bytes,  # type: ignore[override]
                      datatype: DataType) -> None:
        self._writer.write(data)

    def eof_received(self) -> bool:
        if self._writer.can_write_eof():
            self._writer.write_eof()
        return True   # the local side may still send: the channel closes at its EOF

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._upstream is not None:
            self._upstream.cancel()
        self._writer.close()


async def call_factory(factory: Callable, *args):
    """``factory(*args)``, awaited when it returns an awaitable (asyncssh lets listener
    factories be coroutines, or return ``conn.forward_connection(...)``)."""
    result = factory(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
