"""The native runner: every core procedure of a thread on one epoll set.

:class:`NativeRunner` has :class:`~pssh.runners.gevent.GeventRunner`'s interface,
for the gevent clients (``SSHClient(..., runner="native")``,
``ParallelSSHClient(..., runner="native")``): ``run(procedure)`` from any
greenlet, ``spawn(procedure)`` for background work. Instead of a watcher, a
timeout and two greenlet switches for each wait of each procedure, the waits of
all of them are answered by one engine (:mod:`pssh.runners._native`, compiled)
that the hub turns: a wait is an entry in a set and a heap, and a greenlet
switch happens once per ``run``, not once per wait. After each of the engine's
turns the hub polls its own loop, so timers, signals and other greenlets run as
they do with the gevent runner. (Hosted on gevent, it answers name resolution
and the connects of a program's own functions with the gevent runner's ways.)

:func:`run` drives a procedure in a thread with no gevent at all.
"""
from __future__ import annotations

import logging
import socket as _socket
from typing import Any, Callable, Optional

from pssh.core import clock as _clock
from pssh.core.waits import Blocking, Procedure, Task
from pssh.runners._native import Cancelled, Engine

log = logging.getLogger("pssh.runners.native")

__all__ = ["Cancelled", "NativeRunner", "hub_engine", "run"]


class _GeventHost:
    """One engine on this thread's gevent hub, turned by the hub itself.

    The engine turns in the hub's callbacks: when its epoll set is readable (one io
    watcher for every socket of every procedure), at its next deadline (one timer), and
    after new work arrived (a zero timer, started by :meth:`kick`). Procedures never
    block (they say what they wait for), so stepping them in the hub is safe; what
    could block (a client's own method, a name to resolve) runs in a greenlet of its own.

    A caller waiting for its procedure is switched to after the turn that ended it,
    never in the middle of one: were it woken at once and start its next procedure in
    the same turn, a reader of a host that never stops sending would keep the hub from
    ever polling, and timers, signals and other greenlets would wait. Each turn is
    followed by a poll of the hub's loop instead.
    """

    def __init__(self) -> None:
        import gevent
        from gevent.hub import get_hub
        from pssh.runners.gevent import GeventRunner
        self._gevent = gevent
        self._loop = get_hub().loop
        #: Resolves names for procedures with no resolver of their own, in gevent's way.
        self.engine = Engine(delegate=self._delegated(GeventRunner()), kick=self.kick,
                             adopt=_gevent_socket)
        # The watchers keep the hub's loop alive only while a caller waits (see _hold):
        # background work alone (keepalives) must not make gevent.wait() wait for ever.
        self._io = self._loop.io(self.engine.fileno(), 1, ref=False)   # 1: readable
        self._io.start(self._turn)
        self._kicker = self._loop.timer(0.0, ref=False)
        self._waiting = 0
        self._timer: Optional[Any] = None
        self._timer_at: Optional[float] = None
        #: (waiter, outcome) of callers whose procedures ended in this turn.
        self._finished: list = []

    def _turn(self, *_: Any) -> None:
        """In the hub: turn the engine, then wake the callers it finished."""
        try:
            self.engine.turn(0)
        except Exception:   # a bug of the engine's own: said, never the hub's end
            log.exception("native runner: a turn failed")
        finished, self._finished = self._finished, []
        for waiter, outcome in finished:
            waiter.switch(outcome)   # it runs until it waits again, then comes back here
        self._arm()

    def _arm(self) -> None:
        """The next turn: at once (after a poll) if work is ready, else by the next
        deadline (the io watcher covers the sockets). A timer already armed for an
        earlier time is kept (its turn arms the next one): most deadlines are far away
        and move later, and a timer made and closed per turn would cost more than a
        turn that finds nothing due."""
        timeout = self.engine.next_timeout()
        if timeout == 0:
            self.kick()
            return
        if timeout is None:
            return
        at = _clock.now() + timeout
        timer = self._timer
        if timer is not None and timer.active and self._timer_at is not None \
                and self._timer_at <= at:
            return
        if timer is not None:
            timer.stop()
            timer.close()
        self._timer = self._loop.timer(timeout, ref=self._waiting > 0)
        self._timer.start(self._turn)
        self._timer_at = at

    def _hold(self, callers: int) -> None:
        """``callers`` more (or fewer) callers wait: the loop stays alive while any do."""
        self._waiting += callers
        ref = self._waiting > 0
        for watcher in (self._io, self._kicker, self._timer):
            if watcher is not None and watcher.ref != ref:
                watcher.ref = ref

    def kick(self) -> None:
        """Work arrived: turn after the hub's next poll (a zero timer: callbacks scheduled
        while the hub runs callbacks would run before it ever polls again)."""
        if not self._kicker.active:
            self._kicker.start(self._turn)

    # -- resolving and connecting in greenlets -----------------------------------------------

    def _delegated(self, runner: Any) -> Callable[[str, Any, Callable], Callable[[], None]]:
        """A delegate answering in a greenlet of its own: Resolve and Connect with
        ``runner``'s handlers (a :class:`~pssh.runners.gevent.GeventRunner`'s), Blocking
        with its call. What it returns stops that greenlet."""
        handlers = {"resolve": runner._resolve_host, "connect": runner._connect_socket,
                    "call": Blocking.call}

        def delegate(kind: str, request: Any, answer: Callable) -> Callable[[], None]:
            helper = self._gevent.spawn(_answer_with, handlers[kind], request, answer)
            return lambda: helper.kill(block=False)
        return delegate

    # -- the runner's calls ------------------------------------------------------------------

    def run(self, procedure: Procedure, delegate: Optional[Callable]) -> Any:
        from gevent.hub import Waiter
        waiter = Waiter()

        def done(result: Any, error: Optional[BaseException]) -> None:
            self._finished.append((waiter, (result, error)))
        run = self.engine.start(procedure, done, None, delegate)
        self.kick()
        self._hold(1)
        try:
            while True:
                try:
                    result, error = waiter.get()
                    break
                except BaseException as err:   # noqa: B036 - a Timeout or a kill: into it
                    # As with the gevent runner: the procedure gets it at its wait (its
                    # finally blocks run) and decides; this greenlet waits for its end.
                    if run.ended:
                        raise
                    self.engine.throw_in(run, err)
        finally:
            self._hold(-1)
        if error is not None:
            raise error
        return result


def _gevent_socket(sock: _socket.socket) -> Any:
    """A socket the engine connected, as a gevent socket object: what parallel-ssh's
    clients hold in ``client.sock`` (programs read its ``closed``)."""
    from gevent import socket as gsocket
    return gsocket.socket(sock.family, sock.type, sock.proto, sock.detach())


def _answer_with(handler: Callable, request: Any, answer: Callable) -> None:
    try:
        value = handler(request)
    except BaseException as err:   # noqa: B036 - the procedure's to handle
        answer(None, err)
    else:
        answer(value)


def hub_engine() -> Engine:
    """The engine of this thread's gevent hub, which every native-runner client of the
    thread shares: made on first use (an epoll set, one descriptor) and kept for the
    hub's life, as the hub keeps its own loop."""
    return _host().engine


def _host() -> _GeventHost:
    from gevent.hub import get_hub
    hub = get_hub()
    host = getattr(hub, "_pssh_native", None)
    if host is None:
        host = hub._pssh_native = _GeventHost()
    return host


class NativeRunner:
    """Runs core procedures on this thread's native engine, from gevent greenlets.

    ``resolve(host, port)`` and ``connect(family, kind, address, timeout)`` are an
    application's own ways (parallel-ssh's client passes its methods, which programs
    replace): given, procedures resolve and connect through them in a greenlet each;
    otherwise an address is used as it is, a name is resolved by gevent's resolver,
    and the connect is the engine's own (non-blocking).
    """

    def __init__(self, resolve: Optional[Callable] = None,
                 connect: Optional[Callable] = None) -> None:
        self._delegate: Optional[Callable] = None
        if resolve is not None or connect is not None:
            from pssh.runners.gevent import GeventRunner, default_connect, default_resolve
            self._own = GeventRunner(resolve or default_resolve, connect or default_connect)
            self._delegate = _host()._delegated(self._own)

    def run(self, procedure: Procedure) -> Any:
        """Drive ``procedure`` to its end; this greenlet waits meanwhile. An exception
        raised into this greenlet while it waits (a gevent ``Timeout``, a kill) is
        thrown into the procedure, so that its ``finally`` blocks run, and then
        propagates (unless the procedure handles it)."""
        return _host().run(procedure, self._delegate)

    def spawn(self, procedure: Procedure, name: str = "") -> Task:
        """Start ``procedure`` in the background on the engine; its :class:`Task`
        (cancelling it throws :class:`Cancelled` into it)."""
        return _host().engine.spawn(procedure, name)


def run(procedure: Procedure) -> Any:
    """Drive ``procedure`` (and what it spawns) to its end in this thread, with no event
    loop but the engine's own; its result, or its exception. For programs without
    gevent: from a gevent program it would hold up the hub. Names are resolved with
    the system's resolver, which may block the thread (addresses never do)."""
    outcome: list = []

    def at_once(kind: str, request: Any, answer: Callable) -> None:
        try:
            answer(request.call() if kind == "call" else
                   _socket.getaddrinfo(request.host, request.port, type=_socket.SOCK_STREAM,
                                       proto=_socket.IPPROTO_TCP))
        except BaseException as err:   # noqa: B036 - the procedure's to handle
            answer(None, err)

    engine = Engine(delegate=at_once)
    engine.start(procedure, lambda result, error: outcome.append((result, error)))
    while not outcome:
        engine.turn(engine.next_timeout())
    result, error = outcome[0]
    if error is not None:
        raise error
    return result
