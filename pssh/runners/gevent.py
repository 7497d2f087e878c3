"""The gevent runner: drives core procedures in the calling greenlet.

:meth:`GeventRunner.run` steps a procedure (:mod:`pssh.core.waits`) and turns
each request it yields into a wait on the gevent hub, letting other greenlets
run meanwhile. This module and :mod:`pssh.runners.asyncio` are the only places
where the core's procedures wait.
"""
from __future__ import annotations

import socket as _socket
from typing import Any, Callable, Dict, Optional

import gevent
from gevent import socket as gsocket
from gevent.event import Event as GEvent
from gevent.hub import get_hub

from pssh.core.deadlines import remaining
from pssh.core.waits import (Blocking, Connect, Procedure, Resolve, SessionIO, Sleep, SocketIO,
                             Spawn, Task, WaitFor)
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND

_READ, _WRITE = 1, 2  # libev event bits
#: Seconds: the shortest timer, for a turn of the loop (timers and sockets included).
TURN = 1e-6


class _Waiters:
    """A link's greenlets waiting on its socket, for :meth:`pssh.core.link.Link.wake`."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: set = set()

    def wake(self) -> None:
        for ready in tuple(self.events):
            ready.set()

    def close(self) -> None:
        self.wake()


def default_resolve(host: str, port: int) -> list:
    """Through gevent's resolver (it never blocks the hub)."""
    return gsocket.getaddrinfo(host, port, proto=_socket.IPPROTO_TCP)


def default_connect(family: int, kind: int, address: tuple, timeout: Optional[float]):
    """A gevent socket connected to ``address`` (``socket.timeout`` after ``timeout``)."""
    sock = gsocket.socket(family, kind)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


class GeventRunner:
    """Runs core procedures on the gevent hub.

    ``resolve(host, port)`` and ``connect(family, kind, address, timeout)``
    answer :class:`~pssh.core.waits.Resolve` and
    :class:`~pssh.core.waits.Connect` (by default with gevent's socket module;
    parallel-ssh's client passes its own, which its tests replace).
    """

    def __init__(self, resolve: Callable = default_resolve,
                 connect: Callable = default_connect) -> None:
        self._resolve = resolve
        self._connect = connect

    def run(self, procedure: Procedure) -> Any:
        """Drive ``procedure`` to its end in this greenlet; its result, or its exception.

        An exception raised into this greenlet while it waits (a gevent
        ``Timeout``, a kill) is thrown into the procedure, so that its ``finally``
        blocks run, and then propagates.
        """
        send, throw = procedure.send, procedure.throw
        value: Any = None
        error: Optional[BaseException] = None
        while True:
            try:
                request = send(value) if error is None else throw(error)
            except StopIteration as stop:
                return stop.value
            error = None
            try:
                value = _HANDLERS[request.__class__](self, request)
            except BaseException as err:  # into the procedure, which decides
                value, error = None, err

    def spawn(self, procedure: Procedure, name: str = "") -> Task:
        """Start ``procedure`` in a greenlet of its own; its :class:`Task`.

        Background procedures (keepalives, relays) run on the plain runner: one of a
        client's own would keep that client alive for as long as they run.
        """
        task = Task(name)
        greenlet = gevent.spawn(RUNNER._run_task, task, procedure)

        def cancel() -> None:
            # A task that cancels itself (a keepalive closing its lost link) is ending anyway.
            if greenlet is not gevent.getcurrent():
                greenlet.kill(block=False)

        def ended(_: gevent.Greenlet) -> None:
            # Killed before it started, _run_task never ran: said here, or a join would
            # wait for it to the end of its deadline.
            if not task.done.is_set():
                task.finished(exception=greenlet.exception or gevent.GreenletExit())
        task._cancel = cancel
        greenlet.rawlink(ended)
        return task

    def _run_task(self, task: Task, procedure: Procedure) -> None:
        try:
            result = self.run(procedure)
        except BaseException as err:  # noqa: B036 - a kill ends the task, recorded as such
            task.finished(exception=err)
        else:
            task.finished(result)

    # -- the requests ----------------------------------------------------------------------

    def _session_io(self, request: SessionIO) -> bool:
        link = request.link
        waiters = link.waker_for(_Waiters, _Waiters)
        directions = link.live_session.block_directions()
        events = ((_READ if directions & LIBSSH2_SESSION_BLOCK_INBOUND else 0)
                  | (_WRITE if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND else 0)) or _READ
        return _wait_io(link.live_sock.fileno(), events, request.deadline, waiters.events)

    def _socket_io(self, request: SocketIO) -> bool:
        return _wait_io(request.sock.fileno(), _WRITE if request.write else _READ,
                        request.deadline, None)

    def _sleep(self, request: Sleep) -> bool:
        # Sleep(0) is a turn of the loop (pssh.core.link.Link.turn): gevent.sleep(0) only
        # queues a callback, and the hub runs callbacks added while it runs them without
        # polling, so timers and sockets could wait for ever. A timer, however short, is
        # taken after the loop has polled.
        gevent.sleep(request.seconds or TURN)
        return True

    def _wait_for(self, request: WaitFor) -> bool:
        event = request.event
        if event.is_set():
            return True
        ready = GEvent()
        event.subscribe(ready.set)
        try:
            return ready.wait(remaining(request.deadline)) or event.is_set()
        finally:
            event.unsubscribe(ready.set)

    def _resolve_host(self, request: Resolve) -> Optional[list]:
        with gevent.Timeout(remaining(request.deadline), False):
            return self._resolve(request.host, request.port)
        return None

    def _connect_socket(self, request: Connect):
        try:
            return self._connect(request.family, request.kind, request.address,
                                 remaining(request.deadline))
        except _socket.timeout:
            return None

    def _spawn(self, request: Spawn) -> Task:
        return self.spawn(request.procedure, request.name)

    def _blocking(self, request: Blocking) -> Any:
        return request.call()   # in the procedure's own greenlet, which may wait


def _wait_io(fd: int, events: int, deadline: Optional[float], waiters: Optional[set]) -> bool:
    """Wait for ``fd`` (or, when ``waiters`` is given, a wake); False at the deadline."""
    ready = GEvent()
    watcher = get_hub().loop.io(fd, events)
    watcher.start(ready.set)
    if waiters is not None:
        waiters.add(ready)
    try:
        return ready.wait(remaining(deadline))
    finally:
        if waiters is not None:
            waiters.discard(ready)
        watcher.stop()
        watcher.close()


#: request type -> its handler (the runner and the request in, the answer out)
_HANDLERS: Dict[type, Callable[[GeventRunner, Any], Any]] = {
    SessionIO: GeventRunner._session_io,
    SocketIO: GeventRunner._socket_io,
    Sleep: GeventRunner._sleep,
    WaitFor: GeventRunner._wait_for,
    Resolve: GeventRunner._resolve_host,
    Connect: GeventRunner._connect_socket,
    Spawn: GeventRunner._spawn,
    Blocking: GeventRunner._blocking,
}

#: The runner of code that has no reason for another (default resolver and sockets).
RUNNER = GeventRunner()

__all__ = ["GeventRunner", "RUNNER", "TURN", "default_connect", "default_resolve"]
