"""Local port forwarding through an SSH host (``ssh -L``), parallel-ssh's tunnel API.

A :class:`TunnelServer` listens on a local port; each TCP connection made to
it is carried to ``host:port`` as seen from the SSH server, over a
direct-tcpip channel of the given client. :class:`LocalForwarder` runs such
servers in a thread with its own gevent hub, handing out their ports.

The clients do not need any of this: jump hosts (``proxy_host``,
``proxy_jump``) tunnel in-process through a socket pair, with no thread and
no listening port (:mod:`pssh.clients.native.jump`). This module is for
programs that want a local port of their own, e.g. for a database client.
"""
from __future__ import annotations

import atexit
import logging
from queue import Queue
from threading import Event, Thread
from typing import Any, Dict, Optional

from gevent import joinall, sleep
from gevent.hub import get_hub
from gevent.pool import Pool
from gevent.server import StreamServer

from pssh.constants import DEFAULT_RETRIES
from pssh.core.forwarding import open_direct
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

logger = logging.getLogger(__name__)

CHUNK = 65536


class TunnelServer(StreamServer):
    """Forwards every connection to ``bind_address:<listen_port>`` to ``host:port``
    through ``client`` (a connected :class:`~pssh.clients.native.single.SSHClient`).

    ``listen_port`` is the local port once started. Opening the remote end is
    tried ``num_retries`` times; the last failure is kept in ``exception``.
    """

    def __init__(self, client, host: str, port: int, bind_address: str = "127.0.0.1",
                 num_retries: int = DEFAULT_RETRIES) -> None:
        self.client = client
        self.host = host
        self.port = port
        self.session = client.session
        self.bind_address = bind_address
        self._retries = num_retries
        self._pool = Pool()
        self.exception: Optional[BaseException] = None
        StreamServer.__init__(self, (bind_address, 0), self._read_rw, spawn=self._pool)

    @property
    def listen_port(self) -> Optional[int]:
        """The local port connections go to (None before the server started)."""
        return self.socket.getsockname()[1] if self.socket is not None else None

    def _read_rw(self, socket, address) -> None:
        """One accepted connection: open its channel, then move bytes both ways."""
        local_port = address[1]
        try:
            channel = self._open_channel_retries(self.host, self.port, local_port)
        except Exception as err:
            logger.error("%s: cannot open a channel to %s:%s: %s", self.client.host, self.host,
                         self.port, err)
            self.exception = err
            socket.close()
            return
        source = self._pool.spawn(self._read_forward_sock, socket, channel)
        dest = self._pool.spawn(self._read_channel, socket, channel)
        self._wait_send_receive_lets(source, dest, channel)

    def _wait_send_receive_lets(self, source, dest, channel) -> None:
        """Wait for both directions to end (raising the first error), then close the channel."""
        try:
            joinall((source, dest), raise_error=True)
        finally:
            logger.debug("tunnel to %s:%s done; closing its channel", self.host, self.port)
            self.client.close_channel(channel)

    def _read_forward_sock(self, forward_sock, channel) -> None:
        """Local connection -> channel, until either end is done."""
        while True:
            if channel is None or channel.eof():
                return
            if not forward_sock or forward_sock.closed:
                return
            data = forward_sock.recv(CHUNK)
            if not data:
                send_eof = getattr(channel, "send_eof", None)
                if send_eof is not None:
                    self.client.eagain(send_eof)
                return
            self.client.eagain_write(channel.write, data)

    def _read_channel(self, forward_sock, channel) -> None:
        """Channel -> local connection, until the channel ends."""
        while True:
            if channel is None or channel.eof():
                return
            size, data = channel.read()
            if size == LIBSSH2_ERROR_EAGAIN:
                self.client.poll()
                continue
            if size == 0:
                continue  # end of stream: eof() says so on the next round
            forward_sock.sendall(data)

    def _open_channel(self, fw_host: str, fw_port: int, local_port: int):
        return self.client._run(open_direct(self.client._link, fw_host, fw_port,
                                            source=(self.bind_address, local_port)))

    def _open_channel_retries(self, fw_host: str, fw_port: int, local_port: int,
                              wait_time: float = 0.1):
        for attempt in range(1, self._retries + 1):
            try:
                return self._open_channel(fw_host, fw_port, local_port)
            except Exception:
                logger.error("cannot open a channel to %s:%s (try %s of %s)", fw_host, fw_port,
                             attempt, self._retries)
                if attempt >= self._retries:
                    raise
                sleep(wait_time)
                wait_time *= 5


class LocalForwarder(Thread):
    """A thread, with its own gevent hub, that runs :class:`TunnelServer` s.

    ``enqueue(client, host, port)`` asks for a server; its local port then
    arrives on ``out_q``. Servers whose client's socket closed are stopped by
    :meth:`_cleanup_servers` (every minute, and on demand).
    """

    def __init__(self) -> None:
        Thread.__init__(self, daemon=True)
        self.in_q: Queue = Queue(1)
        self.out_q: Queue = Queue(1)
        self._servers: Dict[Any, TunnelServer] = {}  # by the client it goes through
        self._hub = None
        self._pool: Optional[Pool] = None
        self.started = Event()
        self.shutdown_triggered = Event()

    def start(self) -> None:
        atexit.register(self.shutdown)
        Thread.start(self)

    def enqueue(self, client, host: str, port: int) -> None:
        """Ask for a server forwarding to ``host:port`` through ``client``."""
        self.in_q.put((client, host, port))

    def _start_server(self) -> None:
        client, host, port = self.in_q.get()
        server = TunnelServer(client, host, port)
        self._servers[client] = server
        server.start()
        self.out_q.put(server.listen_port)

    def run(self) -> None:
        self._hub = hub = get_hub()
        self._pool = pool = Pool(1)
        self._pool.spawn(self._cleanup_servers_let)
        self.started.set()
        try:
            while not self.shutdown_triggered.is_set():
                if self.in_q.empty():
                    sleep(0.01)
                    continue
                self._start_server()
        except Exception:
            logger.exception("the tunnel thread stops after an error")
            self.shutdown()
        finally:
            # A thread's hub outlives the thread unless destroyed: its loop's descriptors
            # (an epoll, an eventfd) stayed open for the rest of the process.
            pool.kill()
            hub.destroy(destroy_loop=True)
            self._hub = None

    def _cleanup_servers_let(self) -> None:
        while True:
            self._cleanup_servers()
            sleep(60)

    def _cleanup_servers(self) -> None:
        for client in list(self._servers):
            if client.sock is None or client.sock.closed:
                self.cleanup_server(client)

    def cleanup_server(self, client) -> None:
        """Stop the server of ``client`` and forget it."""
        server = self._servers.pop(client, None)
        if server is not None:
            server.stop()

    def shutdown(self) -> None:
        """Stop every server and end the thread (waits for it)."""
        atexit.unregister(self.shutdown)  # (registered by start: nothing left to do then)
        for server in list(self._servers.values()):
            server.stop()
        self._servers = {}
        if self.started.is_set():
            self.shutdown_triggered.set()
            try:
                self.join()
            except RuntimeError:  # called from the thread itself
                pass


#: A forwarder for programs that want one shared (started on first use by them).
FORWARDER = LocalForwarder()
