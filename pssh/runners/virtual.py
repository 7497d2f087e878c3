"""A runner on virtual time, for tests: sleeps and deadlines pass at once.

:class:`VirtualRunner` drives core procedures (:mod:`pssh.core.waits`) in the
calling thread with a loop of its own over :mod:`selectors`, and installs its
:class:`VirtualClock` as the core's clock (:mod:`pssh.core.clock`, the time of day
included) while it runs.
Real sockets stay real: a server's bytes wake their procedure as they arrive. When
every procedure has waited ``idle`` real seconds without anything arriving, the
clock jumps to the next time something is due (a :class:`~pssh.core.waits.Sleep`'s
end, a wait's deadline) and that happens at once, as trio's
``MockClock(autojump_threshold=...)`` does. So a keepalive that declares a silent
server lost after three 5 s intervals, a 30 s command deadline or a retry delay is a
fraction of a second of real time (a few seconds on a loaded machine, see below): the
outcome depends on what the server sent, not on how fast the test ran.

``idle`` is the real quiet that counts as "everyone waits". Giving up is decided
with more care: a loaded machine (a CPU burner beside the suite, a wheel build) can
keep a live local sshd from answering a handshake step for longer than ``idle``, and
a jump to the deadline of a wait on it would report a live server as silent. So a
jump that makes a wait fail while some socket is watched happens after ``idle`` only
if no task on the machine waited for a CPU, I/O or memory meanwhile (the kernel's
pressure stall counters, ``/proc/pressure``), else after ``settle`` seconds of quiet
(always, where the kernel has no such counters).
"""
from __future__ import annotations

import heapq
import itertools
import selectors
import socket as _socket
import time
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

from pssh.core import clock as core_clock
from pssh.core.waits import (Blocking, Connect, Procedure, Resolve, SessionIO, Sleep, SocketIO,
                             Spawn, Task, Wait, WaitFor)
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND

#: Real seconds of quiet after which the clock jumps to the end of a sleep.
IDLE = 0.2
#: Real seconds of quiet after which the clock jumps to a deadline that fails a wait
#: while a socket is watched, on a machine whose tasks wait for CPU or I/O: what a live
#: sshd may take to answer there.
SETTLE = 3.0
#: The kernel's cumulative stall times (µs during which some task waited).
PRESSURE_FILES = ("/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory")
#: Stalls up to this share of a quiet spell are noise: no task was kept waiting.
STALL_SHARE = 0.05


def stalled_microseconds() -> Optional[int]:
    """Microseconds during which some task waited for a CPU, for I/O or for memory,
    since boot (the sum of the files' ``some total=``); None where the kernel does not
    say."""
    total = 0
    for path in PRESSURE_FILES:
        try:
            with open(path) as counters:
                first = counters.readline()
            total += int(first.rsplit("total=", 1)[1])
        except (OSError, IndexError, ValueError):  # absent, or in a form not known here
            return None
    return total


class Cancelled(BaseException):
    """Thrown into a background procedure whose :class:`~pssh.core.waits.Task` was
    cancelled (as gevent's GreenletExit or asyncio's CancelledError would be)."""


class VirtualClock:
    """Seconds that pass only when :meth:`jump` says so.

    ``wall_start``: the time of day at virtual ``start`` (default: the real time when
    the clock is made); :meth:`wall` moves on from it with the virtual seconds, and is
    what :func:`pssh.core.clock.wall` reads while the runner runs.
    """

    def __init__(self, start: float = 0.0, wall_start: Optional[float] = None) -> None:
        self._start = self._now = start
        self.wall_start = time.time() if wall_start is None else wall_start

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        """The time of day: ``wall_start`` plus the virtual seconds passed since."""
        return self.wall_start + (self._now - self._start)

    def jump(self, to: float) -> None:
        """Move the clock forward to ``to`` (never back)."""
        self._now = max(self._now, to)


class _Waiter:
    """One parked procedure: what wakes it (a socket, an event, a wake of its link),
    and when it gives up (``deadline``, answered False) or is done (``wake_at``)."""

    __slots__ = ("task", "deadline", "on_time", "fd", "events", "undo")

    def __init__(self, task: "_Running", deadline: Optional[float], on_time: bool) -> None:
        self.task = task
        self.deadline = deadline
        #: The answer when the deadline comes: True for a sleep, False for any other wait.
        self.on_time = on_time
        self.fd: Optional[int] = None
        self.events = 0
        self.undo: List[Any] = []


class _Running:
    """A procedure being driven, and the :class:`Task` it answers to (None: the main one)."""

    __slots__ = ("procedure", "task", "waiter", "result", "error", "ended")

    def __init__(self, procedure: Procedure, task: Optional[Task]) -> None:
        self.procedure = procedure
        self.task = task
        self.waiter: Optional[_Waiter] = None
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.ended = False


class _LinkWaiters:
    """The waiters on one link, for :meth:`pssh.core.link.Link.wake`."""

    __slots__ = ("runner", "waiters")

    def __init__(self, runner: "VirtualRunner") -> None:
        self.runner = runner
        self.waiters: Set[_Waiter] = set()

    def wake(self) -> None:
        for waiter in tuple(self.waiters):
            self.runner._resume(waiter, True)

    def close(self) -> None:
        self.wake()


class VirtualRunner:
    """Drives core procedures on a :class:`VirtualClock` (see the module's text)."""

    def __init__(self, idle: float = IDLE, clock: Optional[VirtualClock] = None,
                 settle: float = SETTLE) -> None:
        self.idle = idle
        self.settle = max(settle, idle)
        self.clock = clock or VirtualClock()
        self._ready: Deque[Tuple[_Running, Any, Optional[BaseException]]] = deque()
        self._timers: List[Tuple[float, int, _Waiter]] = []
        self._order = itertools.count()
        self._selector: selectors.BaseSelector = selectors.DefaultSelector()
        self._by_fd: Dict[int, Set[_Waiter]] = {}
        self._spawned: List[Task] = []
        self._background: List[_Running] = []

    def run(self, procedure: Procedure) -> Any:
        """Drive ``procedure`` (and what it spawns) to its end; its result, or its
        exception. Background procedures still running then are closed."""
        main = _Running(procedure, None)
        self._ready.append((main, None, None))
        self._selector.close()
        self._selector = selectors.DefaultSelector()   # a fresh one for each run
        self._spawned, self._background = [], []
        try:
            with core_clock.using(self.clock.now, self.clock.wall):
                while True:
                    while self._ready:
                        self._step(*self._ready.popleft())
                    if main.ended:
                        break
                    self._wait()
                for task in self._spawned:
                    task.cancel()
                while self._ready:
                    self._step(*self._ready.popleft())
                for running in self._background:
                    if not running.ended:   # waiting again in its clean-up: no more
                        try:
                            running.procedure.close()
                        except RuntimeError:  # it yielded once more: dropped all the same
                            pass
        finally:
            self._selector.close()
            self._timers.clear()
            self._by_fd.clear()
        if main.error is not None:
            raise main.error
        return main.result

    # -- the loop --------------------------------------------------------------------------

    def _wait(self) -> None:
        """Wait for a socket for real, up to ``idle`` (``settle`` before a give-up); if
        nothing came, jump the clock to the next due time and answer what is due."""
        due = self._timers[0][0] if self._timers else None
        if due is not None and due <= self.clock.now():
            events = self._selector.select(0) if self._by_fd else []
        elif due is not None and not self._timers[0][2].on_time and self._by_fd:
            events = self._quiet_before_giving_up()
        else:
            events = self._selector.select(self.idle) if self._by_fd \
                else self._no_sockets(self.idle)
        for key, mask in events:
            for waiter in tuple(self._by_fd.get(key.fd, ())):
                if waiter.events & mask:
                    self._resume(waiter, True)
        if not events and not self._ready and due is not None:
            self.clock.jump(due)
            while self._timers and self._timers[0][0] <= self.clock.now():
                _, _, waiter = heapq.heappop(self._timers)
                self._resume(waiter, waiter.on_time)

    def _quiet_before_giving_up(self) -> list:
        """Wait for a socket for ``idle`` real seconds, and on up to ``settle`` while the
        machine's tasks were kept waiting meanwhile (a live server may be one of them)."""
        waited = 0.0
        while True:
            before = stalled_microseconds()
            events = self._selector.select(self.idle)
            waited += self.idle
            if events or waited >= self.settle:
                return events
            after = stalled_microseconds()
            if before is not None and after is not None \
                    and after - before <= STALL_SHARE * self.idle * 1e6:
                return events

    def _no_sockets(self, quiet: float) -> list:
        """No socket to wait for: nothing real can happen, only the clock can move (and
        if nothing is due either, every procedure waits for ever: a bug of the test)."""
        if quiet and not self._ready and not self._timers:
            raise RuntimeError("every procedure waits for something that cannot come")
        return []

    def _step(self, running: _Running, value: Any, error: Optional[BaseException]) -> None:
        try:
            if error is not None:
                request = running.procedure.throw(error)
            else:
                request = running.procedure.send(value)
        except StopIteration as stop:
            self._end(running, stop.value, None)
            return
        except BaseException as err:  # noqa: B036 - the procedure's own failure, passed on
            self._end(running, None, err)
            return
        try:
            self._handle(running, request)
        except BaseException as err:  # noqa: B036 - into the procedure, which decides
            self._ready.append((running, None, err))

    def _end(self, running: _Running, result: Any, error: Optional[BaseException]) -> None:
        running.ended = True
        running.result, running.error = result, error
        if running.task is not None:
            if error is not None:
                running.task.finished(exception=error)
            else:
                running.task.finished(result)

    # -- answering requests ----------------------------------------------------------------

    def _handle(self, running: _Running, request: Wait) -> None:
        if isinstance(request, Sleep):
            waiter = self._park(running, self.clock.now() + request.seconds, on_time=True)
        elif isinstance(request, SessionIO):
            link = request.link
            waiters = link.waker_for(_LinkWaiters, lambda: _LinkWaiters(self))
            directions = link.live_session.block_directions()
            events = ((selectors.EVENT_READ if directions & LIBSSH2_SESSION_BLOCK_INBOUND
                       else 0)
                      | (selectors.EVENT_WRITE if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND
                         else 0)) or selectors.EVENT_READ
            waiter = self._park(running, request.deadline)
            self._watch(waiter, link.live_sock.fileno(), events)
            waiters.waiters.add(waiter)
            waiter.undo.append(lambda: waiters.waiters.discard(waiter))
        elif isinstance(request, SocketIO):
            waiter = self._park(running, request.deadline)
            self._watch(waiter, request.sock.fileno(),
                        selectors.EVENT_WRITE if request.write else selectors.EVENT_READ)
        elif isinstance(request, WaitFor):
            if request.event.is_set():
                self._ready.append((running, True, None))
                return
            waiter = self._park(running, request.deadline)

            def ready(waiter=waiter) -> None:
                self._resume(waiter, True)
            request.event.subscribe(ready)
            waiter.undo.append(lambda: request.event.unsubscribe(ready))
        elif isinstance(request, Resolve):
            self._ready.append((running, _socket.getaddrinfo(
                request.host, request.port, proto=_socket.IPPROTO_TCP), None))
        elif isinstance(request, Connect):
            # Loopback answers a connect at once (accepted or refused).
            sock = _socket.socket(request.family, request.kind)
            try:
                sock.connect(request.address)
            except BaseException:
                sock.close()
                raise
            sock.setblocking(False)
            self._ready.append((running, sock, None))
        elif isinstance(request, Spawn):
            self._ready.append((running, self._spawn(request), None))
        elif isinstance(request, Blocking):
            self._ready.append((running, request.call(), None))
        else:
            raise TypeError(f"not a wait request: {request!r}")

    def _spawn(self, request: Spawn) -> Task:
        task = Task(request.name)
        spawned = _Running(request.procedure, task)
        self._background.append(spawned)
        self._ready.append((spawned, None, None))

        def cancel() -> None:
            # Thrown in at its wait, as a kill is in a greenlet: its finally blocks run.
            if spawned.ended:
                return
            if spawned.waiter is not None:
                self._forget(spawned.waiter)
            self._ready.append((spawned, None, Cancelled(request.name)))
        task._cancel = cancel
        self._spawned.append(task)
        return task

    def _park(self, running: _Running, deadline: Optional[float],
              on_time: bool = False) -> _Waiter:
        waiter = _Waiter(running, deadline, on_time)
        running.waiter = waiter
        if deadline is not None:
            heapq.heappush(self._timers, (deadline, next(self._order), waiter))
        return waiter

    def _watch(self, waiter: _Waiter, fd: int, events: int) -> None:
        waiter.fd, waiter.events = fd, events
        self._by_fd.setdefault(fd, set()).add(waiter)
        self._interest(fd)

    def _interest(self, fd: int) -> None:
        """Register ``fd`` for what its waiters wait for (none left: unregister it). A
        socket closed meanwhile left the kernel's set by itself, and a new one may have
        its number: start afresh then."""
        waiters = self._by_fd.get(fd)
        wanted = 0
        for waiter in waiters or ():
            wanted |= waiter.events
        try:
            self._selector.unregister(fd)
        except (KeyError, ValueError, OSError):
            pass
        if wanted:
            self._selector.register(fd, wanted)
        else:
            self._by_fd.pop(fd, None)

    def _forget(self, waiter: _Waiter) -> None:
        for undo in waiter.undo:
            undo()
        waiter.undo.clear()
        if waiter.fd is not None:
            self._by_fd.get(waiter.fd, set()).discard(waiter)
            self._interest(waiter.fd)
        self._timers = [t for t in self._timers if t[2] is not waiter]
        heapq.heapify(self._timers)
        waiter.task.waiter = None

    def _resume(self, waiter: _Waiter, answer: bool) -> None:
        if waiter.task.waiter is not waiter:
            return  # answered already
        self._forget(waiter)
        self._ready.append((waiter.task, answer, None))


__all__ = ["Cancelled", "IDLE", "SETTLE", "VirtualClock", "VirtualRunner"]
