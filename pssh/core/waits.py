"""What a procedure of the core waits for: the requests it yields to its runner.

Every SSH procedure of the core is a generator. Where it would have to wait,
it yields one of the requests below instead and is resumed with the answer
(``True``: ready; ``False``: the deadline passed first). A runner (gevent or
asyncio, :mod:`pssh.runners`) turns each request into its event loop's wait;
nothing in the core waits by itself, imports an event loop, or sleeps.

Sub-procedures compose with ``yield from``; a runner never sees them, only
the requests. Deadlines are absolute times of :mod:`pssh.core.clock` (``None``:
no limit), so one deadline bounds a whole phase however many waits it takes.

Also here: :class:`Event`, a flag a procedure can wait for (:class:`WaitFor`)
and anything can set; :class:`Slots`, at most N holders at a time, built on it
(:class:`Turnstile`: one at a time); and :class:`Task`, what :class:`Spawn`
hands back for a procedure started in the background.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Generator, List, Optional, TypeVar

if TYPE_CHECKING:  # for annotations only (the link imports this module)
    import socket

    from pssh.core.link import Link

T = TypeVar("T")
#: A core procedure: yields wait requests, returns its result.
Procedure = Generator["Wait", Any, T]


class Wait:
    """Base of the requests a procedure yields."""

    __slots__ = ()


class SessionIO(Wait):
    """Wait on a connection's socket in the direction libssh2 is blocked on, or until
    another procedure on that connection made progress (``link.wake()``): its call may
    have read our packets off the socket, which would then never become readable for us.
    ``link``: a :class:`pssh.core.link.Link`."""

    __slots__ = ("link", "deadline")

    def __init__(self, link: Link, deadline: Optional[float]) -> None:
        self.link = link
        self.deadline = deadline


class SocketIO(Wait):
    """Wait until a plain socket (a local end: agent, forwarded port, socket pair) is
    readable, or writable with ``write``."""

    __slots__ = ("sock", "write", "deadline")

    def __init__(self, sock: socket.socket, write: bool, deadline: Optional[float]) -> None:
        self.sock = sock
        self.write = write
        self.deadline = deadline


class Sleep(Wait):
    """Let ``seconds`` pass (retry delays, keepalive intervals)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class WaitFor(Wait):
    """Wait until ``event`` (an :class:`Event`) is set."""

    __slots__ = ("event", "deadline")

    def __init__(self, event: "Event", deadline: Optional[float]) -> None:
        self.event = event
        self.deadline = deadline


class Resolve(Wait):
    """Resolve ``host:port`` to TCP addresses: answered with ``getaddrinfo``'s list
    (a resolver may block, so each loop asks its own)."""

    __slots__ = ("host", "port", "deadline")

    def __init__(self, host: str, port: int, deadline: Optional[float]) -> None:
        self.host = host
        self.port = port
        self.deadline = deadline


class Connect(Wait):
    """A TCP socket of ``family`` connected to ``address``: answered with the socket, or
    ``None`` when the deadline passed; a refusal or other failure is raised
    (``OSError``) into the procedure."""

    __slots__ = ("family", "kind", "address", "deadline")

    def __init__(self, family: int, kind: int, address: tuple,
                 deadline: Optional[float]) -> None:
        self.family = family
        self.kind = kind
        self.address = address
        self.deadline = deadline


class Spawn(Wait):
    """Start ``procedure`` in the background (it runs concurrently, on the same loop):
    answered at once with its :class:`Task`."""

    __slots__ = ("procedure", "name")

    def __init__(self, procedure: Procedure, name: str = "") -> None:
        self.procedure = procedure
        self.name = name


class Blocking(Wait):
    """Call ``function(*args, **kwargs)``, which may itself wait on the event loop (a
    parallel-ssh client method that programs may replace): answered with its result,
    its exception raised into the procedure. A runner that drives each procedure in the
    caller's greenlet calls it there; one that drives many procedures in one greenlet
    (the native runner) calls it in a greenlet of its own."""

    __slots__ = ("function", "args", "kwargs")

    def __init__(self, function: Callable[..., Any], args: tuple = (),
                 kwargs: Optional[dict] = None) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs or {}

    def call(self) -> Any:
        return self.function(*self.args, **self.kwargs)


def pause(seconds: float) -> Procedure[None]:
    """Let ``seconds`` pass (a procedure of its own, for code that has no other wait)."""
    yield Sleep(seconds)


# -- loop-free synchronisation -------------------------------------------------------------

class Event:
    """A flag: :meth:`set` wakes every procedure waiting for it (``yield WaitFor(event,
    deadline)``). Runners subscribe a callback while one of theirs waits."""

    __slots__ = ("_set", "_subscribers")

    def __init__(self) -> None:
        self._set = False
        self._subscribers: List[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        subscribers, self._subscribers = self._subscribers, []
        for callback in subscribers:
            callback()

    def clear(self) -> None:
        self._set = False

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, when the event is next set."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[], None]) -> None:
        try:
            self._subscribers.remove(callback)
        except ValueError:
            pass


class Slots:
    """At most ``size`` holders at a time (a semaphore for procedures): ``yield from
    slots.take(deadline)`` is True once this procedure holds one, False if the deadline
    passed first; :meth:`give` hands it back and lets a waiting one in."""

    __slots__ = ("size", "taken", "_free")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"slots need a size of at least 1, not {size}")
        self.size = size
        #: Slots held now.
        self.taken = 0
        self._free = Event()

    def take(self, deadline: Optional[float]) -> Procedure[bool]:
        while self.taken >= self.size:
            self._free.clear()
            # Every waiter wakes when one slot frees; the first to run takes it, the
            # others wait again (False only if the deadline passed and none is free).
            if not (yield WaitFor(self._free, deadline)) and self.taken >= self.size:
                return False
        self.taken += 1
        return True

    def give(self) -> None:
        self.taken -= 1
        self._free.set()


class Turnstile(Slots):
    """One holder at a time (a lock for procedures): ``yield from turnstile.enter(deadline)``
    is True once this procedure holds it, False if the deadline passed first;
    :meth:`leave` lets the next one in."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(1)

    def enter(self, deadline: Optional[float]) -> Procedure[bool]:
        return self.take(deadline)

    def leave(self) -> None:
        self.give()


class Task:
    """A procedure running in the background (:class:`Spawn`'s answer).

    ``done`` is set when it has ended; then ``result`` or ``exception`` holds how.
    :meth:`cancel` stops it at its current wait (its ``finally`` blocks run).
    """

    __slots__ = ("name", "done", "result", "exception", "_cancel")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.done = Event()
        self.result: Any = None
        self.exception: Optional[BaseException] = None
        self._cancel: Optional[Callable[[], None]] = None  # set by the runner

    def cancel(self) -> None:
        """Stop the procedure (nothing happens if it has ended)."""
        if not self.done.is_set() and self._cancel is not None:
            self._cancel()

    def finished(self, result: Any = None, exception: Optional[BaseException] = None) -> None:
        """Record how the procedure ended (the runner calls this)."""
        self.result = result
        self.exception = exception
        self.done.set()

    def join(self, deadline: Optional[float] = None) -> Procedure[bool]:
        """Wait until the task has ended; False if ``deadline`` passed first."""
        if self.done.is_set():
            return True
        return (yield WaitFor(self.done, deadline))


__all__ = ["Blocking", "Connect", "Event", "Procedure", "Resolve", "pause", "SessionIO",
           "Sleep", "Slots", "SocketIO", "Spawn", "Task", "Turnstile", "Wait", "WaitFor"]
