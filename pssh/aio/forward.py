"""Forwarded TCP connections on the asyncio front end (asyncssh's names).

:func:`open_connection` carries one TCP connection to ``host:port`` as seen
from the server over a direct-tcpip channel, as a reader and a writer;
:func:`forward_local_port` listens locally (``ssh -L``) and does that for each
connection it accepts; :func:`relay` moves bytes both ways between such a
channel and a local stream, and is also what carries a connection made
``tunnel=`` another one (a jump host).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Tuple

from pssh import exceptions as exc
from pssh.aio.constants import OPEN_CONNECT_FAILED
from pssh.aio.exceptions import ChannelListenError, TCPChannelOpenError, connection_errors
from pssh.aio.process import ChannelStreams, SSHReader, SSHWriter
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.aio.forward")

CHUNK = 65536


class ChannelConnection:
    """Both ends of a forwarded channel: ``reader`` and ``writer``, and ``close()``."""

    def __init__(self, streams: ChannelStreams) -> None:
        self._streams = streams
        self.reader = SSHReader(streams, 0, None, "strict")
        self.writer = SSHWriter(streams, None)

    async def close(self) -> None:
        """Close the channel once both directions are done with (idempotent)."""
        self.writer._stop()
        try:
            await self._streams.finish()
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            log.debug("closing a forwarded channel: %s", err)


async def open_tcp_channel(conn, host: str, port: int, orig_host: str = "127.0.0.1",
                           orig_port: int = 0):
    """A direct-tcpip channel to ``host:port`` as the server sees it; a refusal is a
    :class:`~pssh.aio.ChannelOpenError` (also a :class:`pssh.exceptions.ProxyTargetError`)."""
    driver = conn._driver
    if conn.session is None:
        raise exc.SessionError.at(conn.host, conn.port, "the connection is closed")
    with connection_errors(conn.host, conn.port):
        try:
            return await driver.exclusive(conn.session.direct_tcpip_ex, host, port,
                                          orig_host or "127.0.0.1", orig_port,
                                          what=f"opening a tunnel to {host}:{port}")
        except ssh2_exc.ChannelError as err:
            raise TCPChannelOpenError(
                OPEN_CONNECT_FAILED, f"the server could not connect to {host}:{port}: "
                f"{err.message or err}", host=conn.host, port=conn.port) from err


async def open_channel_connection(conn, host: str, port: int) -> ChannelConnection:
    channel = await open_tcp_channel(conn, host, port)
    return ChannelConnection(ChannelStreams(conn._driver, channel, None))


async def relay(channel: ChannelConnection, reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter) -> None:
    """Move bytes both ways between ``channel`` and a local stream until both ends are
    done; then close both."""
    async def upstream() -> None:
        while data := await reader.read(CHUNK):
            channel.writer.write(data)
            await channel.writer.drain()
        channel.writer.write_eof()
        await channel.writer.drain()

    async def downstream() -> None:
        while data := await channel.reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    try:
        await asyncio.gather(upstream(), downstream())
    except (OSError, ssh2_exc.SSH2Error, exc.PSSHError) as err:
        log.debug("forwarded connection ended: %s", err)
    finally:
        writer.close()
        await channel.close()


class SSHListener:
    """A local port forwarded through the connection (asyncssh's ``SSHListener``)."""

    def __init__(self, server: asyncio.AbstractServer) -> None:
        self._server = server

    def get_port(self) -> int:
        """The local port listened on (the one chosen when 0 was asked for)."""
        return self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self._server.close()

    async def wait_closed(self) -> None:
        await self._server.wait_closed()

    async def __aenter__(self) -> "SSHListener":
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.close()
        await self.wait_closed()


async def forward_local_port(conn, listen_host: str, listen_port: int, dest_host: str,
                             dest_port: int) -> SSHListener:
    """Listen on ``listen_host:listen_port`` (``""``: loopback; port 0: any) and carry each
    connection to ``dest_host:dest_port`` as the server sees it."""
    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            channel = await open_channel_connection(conn, dest_host, dest_port)
        except (exc.PSSHError, ssh2_exc.SSH2Error) as err:
            log.warning("%s: forwarding to %s:%s failed: %s", conn.host, dest_host, dest_port,
                        err)
            writer.close()
            return
        await relay(channel, reader, writer)

    server = await asyncio.start_server(accepted, listen_host or "127.0.0.1", listen_port)
    return SSHListener(server)


class SSHRemoteListener:
    """A port the server listens on for us (``ssh -R``; asyncssh's listener API): each
    connection made to it is carried to a local destination."""

    def __init__(self, conn, listener, port: int, task: asyncio.Task) -> None:
        self._conn = conn
        self._listener = listener
        self._port = port
        self._task = task

    def get_port(self) -> int:
        """The port the server listens on (the one it chose when 0 was asked for)."""
        return self._port

    def close(self) -> None:
        """Stop accepting; the server stops listening when the connection ends (or at
        :meth:`wait_closed`)."""
        self._task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._task, return_exceptions=True)
        if self._conn.session is not None and self._listener is not None:
            listener, self._listener = self._listener, None
            try:
                await self._conn._driver.eagain(listener.forward_cancel,
                                                what="cancelling a remote forward")
            except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
                log.debug("%s: cancelling a remote forward: %s", self._conn.host, err)

    async def __aenter__(self) -> "SSHRemoteListener":
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.close()
        await self.wait_closed()


async def forward_remote_port(conn, listen_host: str, listen_port: int, dest_host: str,
                              dest_port: int) -> SSHRemoteListener:
    """Ask the server to listen on ``listen_host:listen_port`` (``""``: every address; port
    0: the server chooses) and carry each connection to ``dest_host:dest_port`` from here."""
    driver = conn._driver
    listener, port = await remote_listen(conn, listen_host, listen_port)

    async def accept_loop() -> None:
        relays = set()
        try:
            while True:
                channel = await driver.eagain(listener.forward_accept, timeout=None,
                                              what="waiting for forwarded connections")
                task = asyncio.ensure_future(_to_local(conn, channel, dest_host, dest_port))
                relays.add(task)
                task.add_done_callback(relays.discard)
        finally:
            for task in tuple(relays):
                task.cancel()

    return SSHRemoteListener(conn, listener, port, asyncio.ensure_future(accept_loop()))


async def remote_listen(conn, listen_host: str, listen_port: int):
    """Ask the server to listen: ``(libssh2 listener, port)``; a refusal is a
    :class:`~pssh.aio.ChannelListenError` naming the host."""
    with connection_errors(conn.host, conn.port):
        try:
            return await conn._driver.exclusive(conn.session.forward_listen_ex, 16,
                                                listen_host or None, listen_port,
                                                what="asking for a remote forward")
        except ssh2_exc.SSH2Error as err:
            raise ChannelListenError.at(conn.host, conn.port,
                                        f"the server refused to listen on "
                                        f"{listen_host or '*'}:{listen_port}: {err}") from err


async def _to_local(conn, channel, host: str, port: int) -> None:
    streams = ChannelStreams(conn._driver, channel, None)
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as err:
        log.warning("%s: a remote forward's connection to %s:%s failed: %s", conn.host, host,
                    port, err.strerror or err)
        await ChannelConnection(streams).close()
        return
    await relay(ChannelConnection(streams), reader, writer)


async def tunnel_socket(conn, host: str, port: int) -> Tuple[object, asyncio.Task]:
    """A socket connected, through ``conn``, to ``host:port``: one end of a socket pair
    whose other end a task relays over a direct-tcpip channel."""
    import socket

    channel = await open_channel_connection(conn, host, port)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    try:
        reader, writer = await asyncio.open_connection(sock=theirs)
    except BaseException:
        ours.close()
        theirs.close()
        await channel.close()
        raise
    return ours, asyncio.ensure_future(relay(channel, reader, writer))


class AgentForwarder:
    """Relays the agent channels the server opens (``agent_forwarding=True``) to the local
    agent at ``agent_path``: remote programs use local keys, which never leave the agent."""

    def __init__(self, conn, agent_path: str) -> None:
        self._conn = conn
        self._driver = conn._driver
        self.agent_path = agent_path
        self._relays: set = set()
        conn.session.accept_agent_forwarding()
        self._driver.before_wait.append(self.poll)

    async def request(self, channel) -> None:
        """Ask for forwarding on ``channel``; a refusal is logged and the command still runs."""
        try:
            await self._driver.eagain(channel.request_auth_agent,
                                      what="requesting agent forwarding")
        except ssh2_exc.SSH2Error as err:
            log.warning("%s: the server refused agent forwarding (%s); the command runs "
                        "without it", self._conn.host, err.message or type(err).__name__)

    def poll(self) -> None:
        """Start relaying every agent channel the server has opened so far; never waits."""
        while (channel := self._driver.session.accept_agent_channel()) is not None:
            task = asyncio.ensure_future(self._relay(channel))
            self._relays.add(task)
            task.add_done_callback(self._relays.discard)

    async def _relay(self, channel) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(self.agent_path)
        except OSError as err:
            # Dropping the channel closes it: the remote program sees a refusal, not a hang.
            log.warning("%s: cannot reach the local SSH agent at %s: %s", self._conn.host,
                        self.agent_path, err.strerror or err)
            return
        await relay(ChannelConnection(ChannelStreams(self._driver, channel, None)), reader, writer)

    def close(self) -> None:
        for task in tuple(self._relays):
            task.cancel()
