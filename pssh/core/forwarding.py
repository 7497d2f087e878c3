"""Bytes between SSH channels and local sockets: relays, tunnels, agent forwarding,
remote listeners.

A relay copies a local socket to a channel and the channel to the socket until
both directions end, as two procedures of the same loop (no threads). The local
socket is a plain non-blocking socket: each side waits for it with
:class:`~pssh.core.waits.SocketIO` and for the channel through its link, like
every other channel of that session.

- a *tunnel* is a direct-tcpip channel relayed to one end of a socket pair: a
  session to a host behind a jump host runs over the other end as if it were a
  TCP connection (no listening socket, no thread);
- a *local forward* (``ssh -L``) carries each connection accepted on a local port
  over a direct-tcpip channel (:func:`forward_connection`; :func:`serve_local`
  accepts them too): ``pssh.aio``'s ``forward_local_port`` and parallel-ssh's
  ``TunnelServer`` both run it;
- *agent forwarding* relays each agent channel the server opens to the local
  agent (``SSH_AUTH_SOCK``): remote programs use local keys, which never leave
  the agent;
- a *remote listener* (``ssh -R``) hands each connection the server accepts to
  a procedure that relays it to a local destination.
"""
from __future__ import annotations

import errno
import logging
import socket
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple, Union

from pssh.core import errors as exc
from pssh.core.link import Link
from pssh.core.streams import CommandStreams
from pssh.core.waits import Procedure, Resolve, Sleep, SocketIO, Spawn, Task
from pssh.core.deadlines import Limit, UNSET
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.channel import Channel
    from ssh2.listener import Listener

log = logging.getLogger("pssh.core.forwarding")

CHUNK = 65536
_ENDED = (OSError, ssh2_exc.SSH2Error, exc.PSSHError)


# -- local sockets without waiting ----------------------------------------------------------

def recv(sock: socket.socket, size: int = CHUNK) -> Procedure[bytes]:
    """Bytes from a non-blocking socket (b"" at its end)."""
    while True:
        try:
            return sock.recv(size)
        except (BlockingIOError, InterruptedError):
            yield SocketIO(sock, False, None)


def send_all(sock: socket.socket, data: bytes) -> Procedure[None]:
    """All of ``data`` to a non-blocking socket."""
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
        except (BlockingIOError, InterruptedError):
            yield SocketIO(sock, True, None)


def connect_local(family: int, address: Union[str, Tuple[str, int]],
                  deadline: Optional[float] = None) -> Procedure[socket.socket]:
    """A non-blocking socket connected to a local ``address`` (a Unix path or
    ``(host, port)``); ``OSError`` if refused."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        rc = sock.connect_ex(address)
        if rc in (errno.EINPROGRESS, errno.EAGAIN):
            if not (yield SocketIO(sock, True, deadline)):
                raise socket.timeout(f"connecting to {address} timed out")
            rc = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if rc:
            raise OSError(rc, f"cannot connect to {address}: {errno.errorcode.get(rc, rc)}")
    except BaseException:
        sock.close()
        raise
    return sock


def connect_first(host: str, port: int, deadline: Optional[float] = None
                  ) -> Procedure[socket.socket]:
    """A non-blocking socket connected to the first address of ``host:port`` that takes
    the connection (``localhost`` may be ::1 first, with the service on 127.0.0.1)."""
    infos = yield Resolve(host, port, deadline)
    if not infos:
        raise OSError(f"{host}:{port} did not resolve in time")
    error: Optional[OSError] = None
    for family, _, _, _, address in infos:
        try:
            return (yield from connect_local(family, address, deadline))
        except OSError as err:
            error = err
    assert error is not None  # infos is not empty: every address failed
    raise error


# -- relays --------------------------------------------------------------------------------

def relay(link: Link, channel: Channel, sock: socket.socket, name: str) -> Procedure[None]:
    """Copy ``sock`` to ``channel`` and ``channel`` to ``sock`` until both finish; then
    close both. ``sock`` must be non-blocking. A direction that fails ends the other too:
    left alone it could wait for ever on a socket or channel that will not move again,
    holding the connection open (a forwarded agent's relay did, after the remote side
    closed its channel)."""
    streams = CommandStreams(link, channel)
    streams.auto_finish = False  # the far end may still send after its EOF
    tasks: List[Task] = []
    failed: List[bool] = []

    def stop_both() -> None:
        failed.append(True)
        for task in tasks:
            task.cancel()  # (a task cancelling itself is ending anyway)
    try:
        tasks.append((yield Spawn(_upstream(streams, sock, name, stop_both), f"{name} up")))
        tasks.append((yield Spawn(_downstream(streams, sock, name, stop_both),
                                  f"{name} down")))
        if failed:  # the first failed before the second had begun
            stop_both()
        for task in tasks:
            yield from task.join()
    finally:
        for task in tasks:
            task.cancel()
        sock.close()
        if not link.closed:
            try:
                yield from streams.finish()
            except _ENDED as err:
                log.debug("%s: closing %s: %s", link.host, name, err)


def _upstream(streams: CommandStreams, sock: socket.socket, name: str,
              failed: Callable[[], None]) -> Procedure[None]:
    try:
        while True:
            data = yield from recv(sock)
            if not data:
                break
            yield from streams.write(data)
            # A local end that always has more, into a channel that always takes it,
            # never waits: the loop's other work (timers, other hosts) gets its turn here.
            # (The other direction gets it in streams.fill.)
            yield from streams.link.turn()
        yield from streams.send_eof()
    except _ENDED as err:
        log.debug("%s: %s ended sending: %s", streams.link.host, name, err)
        failed()


def _downstream(streams: CommandStreams, sock: socket.socket, name: str,
                failed: Callable[[], None]) -> Procedure[None]:
    out = streams.buffers[0]
    try:
        while True:
            yield from streams.fill(0, None)
            if out.has_data():
                yield from send_all(sock, out.take())
            elif out.ended:
                break
        sock.shutdown(socket.SHUT_WR)
    except _ENDED as err:
        log.debug("%s: %s ended receiving: %s", streams.link.host, name, err)
        failed()


# -- tunnels -------------------------------------------------------------------------------

def open_direct(link: Link, host: str, port: int, timeout: Optional[float] = None,
                source: Tuple[str, int] = ("127.0.0.1", 22)) -> Procedure[Channel]:
    """A direct-tcpip channel to ``host:port`` as the server sees it;
    :class:`~pssh.exceptions.ProxyTargetError` (naming the target) if the server cannot
    connect there."""
    if link.closed:
        raise exc.SessionError.at(link.host, link.port, "the connection is closed")
    try:
        return (yield from link.exclusive(link.live_session.direct_tcpip_ex, host, port,
                                          source[0], source[1], timeout=timeout,
                                          what=f"opening a tunnel to {host}:{port}"))
    except ssh2_exc.SSH2Error as err:
        raise exc.ProxyTargetError(
            "%s:%s: jump host %s cannot connect to it: %s", host, port, link.host,
            err.message or type(err).__name__, host=host, port=port) from None


def open_tunnel(link: Link, host: str, port: int, timeout: Optional[float] = None
                ) -> Procedure[Tuple[socket.socket, Task]]:
    """A local socket connected, through ``link``'s server, to ``host:port``: one end of a
    socket pair whose other end a background relay carries over a direct-tcpip channel.
    Returns the socket and the relay's task (cancel it to close the tunnel)."""
    channel = yield from open_direct(link, host, port, timeout)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    task = yield Spawn(relay(link, channel, theirs, f"tunnel to {host}:{port}"),
                       f"tunnel to {host}:{port}")
    log.debug("%s: tunnel to %s:%s open", link.host, host, port)
    return ours, task


def open_direct_retrying(link: Link, host: str, port: int,
                         source: Tuple[str, int] = ("127.0.0.1", 22), tries: int = 1,
                         retry_delay: float = 0.1) -> Procedure[Channel]:
    """:func:`open_direct`, tried ``tries`` times in all while the connection is open:
    ``retry_delay`` seconds before the second try, five times longer before each next
    (parallel-ssh's tunnel server: 0.1, 0.5, 2.5 s)."""
    delay = retry_delay
    try_no = 1
    while True:
        try:
            return (yield from open_direct(link, host, port, source=source))
        except (exc.PSSHError, ssh2_exc.SSH2Error) as err:
            if try_no >= tries or link.closed:
                raise
            log.warning("%s: cannot open a channel to %s:%s (try %s of %s): %s", link.host,
                        host, port, try_no, tries, err)
        yield Sleep(delay)
        delay *= 5
        try_no += 1


def serve_local(link: Link, listener: socket.socket, dest_host: str,
                dest_port: int) -> Procedure[None]:
    """``ssh -L``: accept connections on the non-blocking listening socket ``listener`` and
    carry each to ``dest_host:dest_port`` as the server sees it (:func:`forward_connection`),
    until cancelled (the relays stop with it; the listener is the caller's to close)."""
    tasks: List[Task] = []
    try:
        while True:
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                yield SocketIO(listener, False, None)
                continue
            sock.setblocking(False)
            tasks = [task for task in tasks if not task.done.is_set()]
            tasks.append((yield Spawn(forward_connection(link, sock, address, dest_host,
                                                         dest_port), "local forward")))
    finally:
        for task in tasks:
            task.cancel()


def forward_connection(link: Link, sock: socket.socket, address: Tuple[str, int],
                       dest_host: str, dest_port: int, *, tries: int = 1,
                       retry_delay: float = 0.1,
                       failed: Optional[Callable[[BaseException], None]] = None
                       ) -> Procedure[None]:
    """One connection accepted for ``ssh -L`` from ``address``: a direct-tcpip channel to
    ``dest_host:dest_port`` as the server sees it (:func:`open_direct_retrying`), relayed
    to the non-blocking ``sock`` until both directions end. A channel that cannot be
    opened closes ``sock``, is logged, and told to ``failed(error)`` if given."""
    try:
        source = address if isinstance(address, tuple) else ("127.0.0.1", 0)
        channel = yield from open_direct_retrying(link, dest_host, dest_port, source[:2],
                                                  tries, retry_delay)
    except (exc.PSSHError, ssh2_exc.SSH2Error) as err:
        log.warning("%s: forwarding to %s:%s failed: %s", link.host, dest_host, dest_port, err)
        sock.close()
        if failed is not None:
            failed(err)
        return
    yield from relay(link, channel, sock, f"local forward to {dest_host}:{dest_port}")


# -- agent forwarding ----------------------------------------------------------------------

class AgentForwarding:
    """Relays the agent channels the server opens on ``link`` to the local agent at
    ``agent_path``. :meth:`request` asks for forwarding on a channel before its command
    starts; the channels are taken before every wait on the link."""

    def __init__(self, link: Link, agent_path: str) -> None:
        self.link = link
        self.agent_path = agent_path
        self.tasks: List[Task] = []
        link.live_session.accept_agent_forwarding()
        link.before_wait.append(self.poll)

    def request(self, channel: Channel, timeout: Limit = UNSET) -> Procedure[None]:
        """Ask for forwarding on ``channel``; a refusal is logged and the command still runs."""
        try:
            yield from self.link.call(channel.request_auth_agent, timeout=timeout,
                                      what="requesting agent forwarding")
        except ssh2_exc.SSH2Error as err:
            log.warning("%s: the server refused agent forwarding (%s); the command runs "
                        "without it", self.link.host, err.message or type(err).__name__)

    def poll(self) -> Procedure[None]:
        """Start relaying every agent channel the server has opened so far."""
        session = self.link.session
        while session is not None and (channel := session.accept_agent_channel()) is not None:
            self.tasks = [task for task in self.tasks if not task.done.is_set()]
            self.tasks.append((yield Spawn(self._relay(channel), "forwarded agent")))

    def _relay(self, channel: Channel) -> Procedure[None]:
        try:
            sock = yield from connect_local(socket.AF_UNIX, self.agent_path)
        except OSError as err:
            log.warning("%s: cannot reach the local SSH agent at %s: %s", self.link.host,
                        self.agent_path, err.strerror or err)
            # Closed through the link, so the remote program sees a refusal at once. Left
            # to be closed when freed, its close read the server's packets (the command's
            # output among them) off the socket with nobody woken for them: the command's
            # reader slept until the next keepalive, 60 s later.
            yield from CommandStreams(self.link, channel).close()
            return
        log.debug("%s: relaying a forwarded agent connection", self.link.host)
        yield from relay(self.link, channel, sock, "forwarded agent connection")

    def close(self) -> None:
        if self.poll in self.link.before_wait:
            self.link.before_wait.remove(self.poll)
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()


# -- remote listeners (ssh -R) -------------------------------------------------------------

def listen_remote(link: Link, listen_host: Optional[str], listen_port: int,
                  queue_size: int = 16) -> Procedure[Tuple[object, int]]:
    """Ask the server to listen on ``listen_host:listen_port`` (None: every address;
    port 0: the server chooses): ``(listener, bound port)``."""
    try:
        return (yield from link.exclusive(link.live_session.forward_listen_ex, queue_size,
                                          listen_host or None, listen_port,
                                          what="asking for a remote forward"))
    except ssh2_exc.SSH2Error as err:
        raise exc.SessionError.at(link.host, link.port, f"the server refused to listen on "
                                  f"{listen_host or '*'}:{listen_port}: {err}") from err


def accept_loop(link: Link, listener: Listener, handle: Callable[[Channel], Procedure[None]]
                ) -> Procedure[None]:
    """Hand every connection the server accepts on ``listener`` to ``handle(channel)``
    (each in a task of its own) until cancelled; the handlers stop with it."""
    tasks: List[Task] = []
    try:
        while True:
            channel = yield from link.call(listener.forward_accept, timeout=None,
                                           what="waiting for forwarded connections")
            tasks = [task for task in tasks if not task.done.is_set()]
            tasks.append((yield Spawn(handle(channel), "forwarded connection")))
    finally:
        for task in tasks:
            task.cancel()


def relay_to(link: Link, channel: Channel, host: str, port: int) -> Procedure[None]:
    """Relay ``channel`` to a new TCP connection to ``host:port`` from here."""
    try:
        sock = yield from connect_first(host, port)
    except OSError as err:
        log.warning("%s: a forwarded connection to %s:%s failed: %s", link.host, host, port,
                    err.strerror or err)
        streams = CommandStreams(link, channel)
        yield from streams.close()
        return
    yield from relay(link, channel, sock, f"forward to {host}:{port}")


__all__ = ["AgentForwarding", "accept_loop", "connect_first", "connect_local",
           "forward_connection", "listen_remote", "open_direct", "open_direct_retrying",
           "open_tunnel", "recv", "relay", "relay_to", "send_all", "serve_local"]
