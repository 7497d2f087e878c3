"""Local port forwarding through an SSH host (``ssh -L``), parallel-ssh's tunnel API.

A :class:`TunnelServer` listens on a local port; each TCP connection made to
it is carried to ``host:port`` as seen from the SSH server, over a
direct-tcpip channel of the given client: the session core's
:func:`~pssh.core.forwarding.forward_connection` (the channel opened with
retries, then the core's relay, the same as ``pssh.aio``'s
``forward_local_port``), run on the gevent runner. :class:`LocalForwarder`
runs such servers in a thread with its own gevent hub, handing out their ports;
it sleeps until asked for something (a request, a client's connection closing,
its shutdown) and never polls.

The clients do not need any of this: jump hosts (``proxy_host``,
``proxy_jump``) tunnel in-process through a socket pair, with no thread and
no listening port (:mod:`pssh.clients.native.jump`). This module is for
programs that want a local port of their own, e.g. for a database client.
"""
from __future__ import annotations

import atexit
import logging
from collections import deque
from queue import Queue
from threading import Event, Lock, Thread, current_thread
from typing import Any, Callable, Deque, Dict, Optional

from gevent import joinall
from gevent.event import Event as GEvent
from gevent.hub import get_hub
from gevent.pool import Pool
from gevent.server import StreamServer

from pssh.constants import DEFAULT_RETRIES
from pssh.core.forwarding import forward_connection, open_direct, open_direct_retrying
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
        """One accepted connection, carried by the core until both ends are done."""
        socket.setblocking(False)  # the core waits for it through the runner
        self.client._run(forward_connection(
            self.client._link, socket, address, self.host, self.port, tries=self._retries,
            failed=self._failed))

    def _failed(self, err: BaseException) -> None:
        self.exception = err

    def _open_channel(self, fw_host: str, fw_port: int, local_port: int):
        return self.client._run(open_direct(self.client._link, fw_host, fw_port,
                                            source=(self.bind_address, local_port)))

    def _open_channel_retries(self, fw_host: str, fw_port: int, local_port: int,
                              wait_time: float = 0.1):
        return self.client._run(open_direct_retrying(
            self.client._link, fw_host, fw_port, (self.bind_address, local_port),
            self._retries, wait_time))

    # parallel-ssh's one-direction loops, for programs (and its tests) that call them with
    # objects of their own; the server's connections run the core's relay instead.

    def _wait_send_receive_lets(self, source, dest, channel) -> None:
        """Wait for both directions to end (raising the first error), then close the channel."""
        try:
            joinall((source, dest), raise_error=True)
        finally:
            self.client.close_channel(channel)

    def _read_forward_sock(self, forward_sock, channel) -> None:
        """Local connection -> channel, until either end is done."""
        while channel is not None and not channel.eof() and forward_sock \
                and not forward_sock.closed:
            data = forward_sock.recv(CHUNK)
            if not data:
                send_eof = getattr(channel, "send_eof", None)
                if send_eof is not None:
                    self.client.eagain(send_eof)
                return
            self.client.eagain_write(channel.write, data)

    def _read_channel(self, forward_sock, channel) -> None:
        """Channel -> local connection, until the channel ends."""
        while channel is not None and not channel.eof():
            size, data = channel.read()
            if size == LIBSSH2_ERROR_EAGAIN:
                self.client.poll()
            elif size > 0:
                forward_sock.sendall(data)


class LocalForwarder(Thread):
    """A thread, with its own gevent hub, that runs :class:`TunnelServer` s.

    ``enqueue(client, host, port)`` asks for a server; its local port then
    arrives on ``out_q``. A server stops once its client's connection closes
    (and on :meth:`cleanup_server`); :meth:`shutdown` stops them all and the thread.
    Every server is started and stopped in this thread, whichever thread asks.
    """

    def __init__(self) -> None:
        Thread.__init__(self, daemon=True)
        self.in_q: Queue = Queue(1)
        self.out_q: Queue = Queue(1)
        self._servers: Dict[Any, TunnelServer] = {}  # by the client it goes through
        self._hub = None
        self.started = Event()
        self.shutdown_triggered = Event()
        self._calls: Deque[Callable[[], None]] = deque()  # for this thread, once woken
        # The hub's async watcher: the one thing another thread may touch to wake this one.
        self._wakeup: Any = None
        self._wakeup_lock = Lock()

    def start(self) -> None:
        atexit.register(self.shutdown)
        Thread.start(self)

    def _wake(self) -> None:
        with self._wakeup_lock:
            if self._wakeup is not None:
                self._wakeup.send()

    def _in_thread(self, call: Callable[[], None]) -> None:
        """Make ``call`` in this thread, whose hub the servers' greenlets belong to: handed
        over while it runs, made at once otherwise."""
        if current_thread() is not self:
            with self._wakeup_lock:
                if self._wakeup is not None:  # running: it makes the call before it ends
                    self._calls.append(call)
                    self._wakeup.send()
                    return
        call()

    def enqueue(self, client, host: str, port: int) -> None:
        """Ask for a server forwarding to ``host:port`` through ``client``."""
        self.in_q.put((client, host, port))
        self._wake()

    def _start_server(self) -> None:
        client, host, port = self.in_q.get()
        server = TunnelServer(client, host, port)
        self._servers[client] = server
        server.start()
        # The client's connection closing (in whichever thread) stops its server.
        client._link.on_close.append(lambda: self._in_thread(self._cleanup_servers))
        self.out_q.put(server.listen_port)

    def run(self) -> None:
        self._hub = hub = get_hub()
        woken = GEvent()
        watcher = hub.loop.async_()
        watcher.start(woken.set)
        with self._wakeup_lock:
            self._wakeup = watcher
        self.started.set()
        try:
            while not self.shutdown_triggered.is_set():
                woken.clear()
                self._make_calls()
                if not self.in_q.empty():
                    self._start_server()
                    continue
                woken.wait()  # until another thread wakes us
        except Exception:
            logger.exception("the tunnel thread stops after an error")
            self.shutdown()
        finally:
            with self._wakeup_lock:
                self._wakeup = None  # from now on, _in_thread() calls at once
            watcher.stop()
            watcher.close()
            self._make_calls()
            # A thread's hub outlives the thread unless destroyed: its loop's descriptors
            # (an epoll, an eventfd) stayed open for the rest of the process.
            hub.destroy(destroy_loop=True)
            self._hub = None

    def _make_calls(self) -> None:
        while self._calls:
            self._calls.popleft()()

    def _cleanup_servers(self) -> None:
        for client in list(self._servers):
            if client.sock is None or client.sock.closed:
                self.cleanup_server(client)

    def cleanup_server(self, client) -> None:
        """Stop the server of ``client`` and forget it."""
        server = self._servers.pop(client, None)
        if server is not None:
            self._in_thread(server.stop)

    def shutdown(self) -> None:
        """Stop every server and end the thread (waits for it)."""
        atexit.unregister(self.shutdown)  # (registered by start: nothing left to do then)
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            self._in_thread(server.stop)
        if self.started.is_set():
            self.shutdown_triggered.set()
            self._wake()
            try:
                self.join()
            except RuntimeError:  # called from the thread itself
                pass


#: A forwarder for programs that want one shared (started on first use by them).
FORWARDER = LocalForwarder()

__all__ = ["FORWARDER", "LocalForwarder", "TunnelServer"]
