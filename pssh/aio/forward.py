"""Forwarded TCP connections on the asyncio front end (asyncssh's names).

:func:`open_connection` carries one TCP connection to ``host:port`` as seen
from the server over a direct-tcpip channel, as a reader and a writer;
:func:`forward_local_port` listens locally (``ssh -L``) and
:func:`forward_remote_port` has the server listen (``ssh -R``). The bytes of
forwarded ports move in the session core's relays
(:mod:`pssh.core.forwarding`), run on this loop.
"""
from __future__ import annotations

import logging
import socket

from pssh import exceptions as exc
from pssh.aio.constants import OPEN_CONNECT_FAILED
from pssh.aio.exceptions import ChannelListenError, TCPChannelOpenError, connection_errors
from pssh.aio.process import ChannelStreams, SSHReader, SSHWriter
from pssh.core import forwarding as core_forwarding
from pssh.core.waits import Task
from pssh.runners.asyncio import RUNNER
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.aio.forward")


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
    if conn.session is None:
        raise exc.SessionError.at(conn.host, conn.port, "the connection is closed")
    try:
        return await conn._run(core_forwarding.open_direct(
            conn._link, host, port, source=(orig_host or "127.0.0.1", orig_port)))
    except exc.ProxyTargetError as err:
        cause = err.__cause__ or err.__context__
        reason = getattr(cause, "message", "") or str(cause or err)
        raise TCPChannelOpenError(
            OPEN_CONNECT_FAILED, f"the server could not connect to {host}:{port}: {reason}",
            host=conn.host, port=conn.port) from err


async def open_channel_connection(conn, host: str, port: int) -> ChannelConnection:
    channel = await open_tcp_channel(conn, host, port)
    return ChannelConnection(ChannelStreams(conn._link, channel, None))


class _Forwarding:
    """A forward's task on the core (cancelled by ``close``) and how it ends."""

    def __init__(self, task: Task) -> None:
        self._task = task

    def close(self) -> None:
        self._task.cancel()

    async def _finished(self) -> None:
        await RUNNER.run(self._task.join())

    async def wait_closed(self) -> None:
        """Wait for the forward to end."""
        await self._finished()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.close()
        await self.wait_closed()


class SSHListener(_Forwarding):
    """A local port forwarded through the connection (asyncssh's ``SSHListener``)."""

    def __init__(self, listener: socket.socket, task: Task) -> None:
        super().__init__(task)
        self._listener = listener

    def get_port(self) -> int:
        """The local port listened on (the one chosen when 0 was asked for)."""
        return self._listener.getsockname()[1]

    def close(self) -> None:
        super().close()
        self._listener.close()

    async def wait_closed(self) -> None:
        await self._finished()


async def forward_local_port(conn, listen_host: str, listen_port: int, dest_host: str,
                             dest_port: int) -> SSHListener:
    """Listen on ``listen_host:listen_port`` (``""``: loopback; port 0: any) and carry each
    connection to ``dest_host:dest_port`` as the server sees it."""
    infos = socket.getaddrinfo(listen_host or "127.0.0.1", listen_port,
                               type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    task = RUNNER.spawn(core_forwarding.serve_local(conn._link, listener, dest_host, dest_port),
                        f"local forward to {dest_host}:{dest_port}")
    conn._link.tasks.append(task)
    return SSHListener(listener, task)


class SSHRemoteListener(_Forwarding):
    """A port the server listens on for us (``ssh -R``; asyncssh's listener API): each
    connection made to it is carried to a local destination."""

    def __init__(self, conn, listener, port: int, task: Task) -> None:
        super().__init__(task)
        self._conn = conn
        self._listener = listener
        self._port = port

    def get_port(self) -> int:
        """The port the server listens on (the one it chose when 0 was asked for)."""
        return self._port

    async def wait_closed(self) -> None:
        """Wait for the forward to end; then the server stops listening."""
        await self._finished()
        if self._conn.session is not None and self._listener is not None:
            listener, self._listener = self._listener, None
            try:
                await self._conn._call(listener.forward_cancel,
                                       what="cancelling a remote forward")
            except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
                log.debug("%s: cancelling a remote forward: %s", self._conn.host, err)


async def forward_remote_port(conn, listen_host: str, listen_port: int, dest_host: str,
                              dest_port: int) -> SSHRemoteListener:
    """Ask the server to listen on ``listen_host:listen_port`` (``""``: every address; port
    0: the server chooses) and carry each connection to ``dest_host:dest_port`` from here."""
    listener, port = await remote_listen(conn, listen_host, listen_port)
    link = conn._link
    task = RUNNER.spawn(core_forwarding.accept_loop(
        link, listener, lambda channel: core_forwarding.relay_to(link, channel, dest_host,
                                                                 dest_port)),
        f"remote forward from port {port}")
    link.tasks.append(task)
    return SSHRemoteListener(conn, listener, port, task)


async def remote_listen(conn, listen_host: str, listen_port: int):
    """Ask the server to listen: ``(libssh2 listener, port)``; a refusal is a
    :class:`~pssh.aio.ChannelListenError` naming the host."""
    with connection_errors(conn.host, conn.port):
        try:
            return await conn._run(core_forwarding.listen_remote(conn._link, listen_host,
                                                                 listen_port))
        except exc.SessionError as err:
            raise ChannelListenError.at(conn.host, conn.port, err.reason) from err


__all__ = ["ChannelConnection", "SSHListener", "SSHRemoteListener", "forward_local_port",
           "forward_remote_port", "open_channel_connection", "open_tcp_channel",
           "remote_listen"]
