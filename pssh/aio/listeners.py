"""Ports the server listens on for us, with asyncssh's callbacks and handlers.

``conn.create_server(session_factory, listen_host, listen_port)``: for each
connection the server accepts, ``session_factory(orig_host, orig_port)`` returns an
:class:`~pssh.aio.SSHTCPSession` (or an awaitable of one, such as
``conn.forward_connection(host, port)``), or raises
:class:`~pssh.aio.ChannelOpenError` to refuse it.
``conn.start_server(handler_factory, ...)``: the same with streams:
``handler_factory(orig_host, orig_port)`` returns ``handler(reader, writer)`` (a
function or coroutine), whose end closes the connection.

libssh2 accepts a forwarded connection before we see it and does not pass on where it
came from: ``orig_host`` is ``""`` and ``orig_port`` 0, and a refused connection is
closed at once rather than never opened.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Callable, Optional

from pssh import exceptions as exc
from pssh.aio.exceptions import ChannelOpenError
from pssh.aio.forward import SSHRemoteListener, remote_listen
from pssh.aio.process import ChannelStreams, SSHReader, SSHWriter
from pssh.aio.session import SSHForwarder, SSHTCPChannel, call_factory
from pssh.core.waits import Event, WaitFor
from pssh.runners.asyncio import RUNNER
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.aio.listeners")

#: What a listener's factories are told of where a connection came from (unknown here).
UNKNOWN_ORIGIN = ("", 0)


async def create_server(conn, session_factory: Callable, listen_host: str, listen_port: int,
                        encoding: Optional[str] = None,
                        errors: str = "strict") -> SSHRemoteListener:
    """Have the server listen on ``listen_host:listen_port`` (``""``: all its addresses;
    0: a port it chooses) and give each connection to a session from ``session_factory``."""
    async def accepted(channel) -> None:
        streams = ChannelStreams(conn._link, channel, None)
        chan = SSHTCPChannel(conn, streams, encoding, errors,
                             extra={"local_peername": UNKNOWN_ORIGIN})
        try:
            session = await chan._open(session_factory, *UNKNOWN_ORIGIN)
        except ChannelOpenError as err:
            log.info("%s: a forwarded connection was refused: %s", conn.host, err.reason)
            return
        if not session:
            return
        await chan.wait_closed()

    return await _listen(conn, listen_host, listen_port, accepted)


async def start_server(conn, handler_factory: Callable, listen_host: str, listen_port: int,
                       encoding: Optional[str] = None,
                       errors: str = "strict") -> SSHRemoteListener:
    """:func:`create_server` with stream handlers: ``handler_factory(orig_host, orig_port)``
    gives ``handler(reader, writer)`` for each connection."""
    async def accepted(channel) -> None:
        streams = ChannelStreams(conn._link, channel, None)
        writer = SSHWriter(streams, encoding)
        try:
            handler = await call_factory(handler_factory, *UNKNOWN_ORIGIN)
            if not handler:
                raise ChannelOpenError(1, "refused by the handler factory")
        except ChannelOpenError as err:
            log.info("%s: a forwarded connection was refused: %s", conn.host, err.reason)
            conn._abandon(streams)
            return
        try:
            result = handler(SSHReader(streams, 0, encoding, errors), writer)
            if inspect.isawaitable(result):
                await result
        finally:
            writer.close()
            await writer.wait_closed()

    return await _listen(conn, listen_host, listen_port, accepted)


async def _listen(conn, listen_host: str, listen_port: int, accepted) -> SSHRemoteListener:
    listener, port = await remote_listen(conn, listen_host, listen_port)

    async def accept_loop() -> None:
        tasks = set()
        try:
            while True:
                channel = await conn._call(listener.forward_accept, timeout=None,
                                           what="waiting for forwarded connections")
                task = asyncio.ensure_future(_guarded(conn, accepted(channel)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            log.debug("%s: listener on port %s ends: %s", conn.host, port, err)
        finally:
            for task in tuple(tasks):
                task.cancel()

    task = RUNNER.spawn(_awaiting(accept_loop()), f"listener on port {port}")
    conn._link.tasks.append(task)
    return SSHRemoteListener(conn, listener, port, task)


def _awaiting(coro):
    """A core procedure that runs an asyncio coroutine of this front end (the listener's
    accept loop hands each connection to factories that may be coroutines)."""
    future = asyncio.ensure_future(coro)
    # One event and one callback for the future's life (the event stays set once set).
    done = Event()
    future.add_done_callback(lambda _: done.set())
    try:
        while not future.done():
            yield WaitFor(done, None)
    finally:
        future.cancel()
    return future.result()


async def _guarded(conn, coro) -> None:
    """One forwarded connection: its failure is logged, never the listener's end."""
    try:
        await coro
    except (OSError, ssh2_exc.SSH2Error, exc.PSSHError) as err:
        log.warning("%s: a forwarded connection failed: %s", conn.host, err)


async def forward_connection(conn, dest_host: str, dest_port: int) -> SSHForwarder:
    """A session carrying a forwarded connection to ``dest_host:dest_port`` from here."""
    try:
        reader, writer = await asyncio.open_connection(dest_host, dest_port)
    except OSError as err:
        raise ChannelOpenError(2, f"cannot connect to {dest_host}:{dest_port}: "
                               f"{err.strerror or err}", host=conn.host,
                               port=conn.port) from err
    return SSHForwarder(reader, writer)
