"""The asyncio runner: drives core procedures as coroutines on the running loop.

``await AsyncioRunner().run(procedure)`` steps a procedure
(:mod:`pssh.core.waits`) and turns each request into an awaitable of the loop:
the session's socket with ``add_reader`` / ``add_writer`` (one registration
per direction and socket, kept while waits keep coming: each add/remove is a
system call, and a transfer waits thousands of times a second), timers with
``call_later``. Works on the default loop and on uvloop; no threads.
"""
from __future__ import annotations

import asyncio
import socket as _socket
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple

from pssh.core.deadlines import remaining
from pssh.core.waits import (Blocking, Connect, Procedure, Resolve, SessionIO, Sleep, SocketIO,
                             Spawn, Task, WaitFor)
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND


def _resolve(future: asyncio.Future, ready: bool = True) -> None:
    if not future.done():
        future.set_result(ready)


class _Watch:
    """One socket's waiting futures, and its reader/writer registrations on the loop."""

    __slots__ = ("loop", "fd", "readers", "writers", "waiters", "registered")

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.readers: set = set()
        self.writers: set = set()
        self.waiters: set = set()   # everything a wake resolves
        self.registered = [False, False]

    async def wait(self, reading: bool, writing: bool, deadline: Optional[float]) -> bool:
        """Until the socket is ready in a direction asked for, or a wake; False at the
        ``deadline``."""
        loop = self.loop
        ready = loop.create_future()
        if reading:
            self._add(0, self.readers, ready)
        if writing:
            self._add(1, self.writers, ready)
        self.waiters.add(ready)
        timer = None if deadline is None else \
            loop.call_later(remaining(deadline), _resolve, ready, False)
        # Cleaned up here rather than by done-callbacks: each of those is one more
        # callback through the loop, on every wait of every session.
        try:
            return await ready
        finally:
            if timer is not None:
                timer.cancel()
            self._forget(ready)

    def _add(self, direction: int, waiters: set, ready: asyncio.Future) -> None:
        waiters.add(ready)
        if not self.registered[direction]:
            (self.loop.add_writer if direction else self.loop.add_reader)(
                self.fd, self._writable if direction else self._readable)
            self.registered[direction] = True

    def _forget(self, ready: asyncio.Future) -> None:
        self.readers.discard(ready)
        self.writers.discard(ready)
        self.waiters.discard(ready)

    def _readable(self) -> None:
        self._dispatch(0, self.readers)

    def _writable(self) -> None:
        self._dispatch(1, self.writers)

    def _dispatch(self, direction: int, waiters: set) -> None:
        if not waiters:
            # Nobody waits any more: only now give the registration up.
            (self.loop.remove_writer if direction else self.loop.remove_reader)(self.fd)
            self.registered[direction] = False
            return
        for ready in tuple(waiters):
            _resolve(ready)

    def wake(self) -> None:
        for ready in tuple(self.waiters):
            _resolve(ready)

    def close(self) -> None:
        """Drop the registrations (the socket is about to close) and wake the waiters."""
        if self.registered[0]:
            self.loop.remove_reader(self.fd)
        if self.registered[1]:
            self.loop.remove_writer(self.fd)
        self.registered = [False, False]
        self.wake()


class AsyncioRunner:
    """Runs core procedures on the running asyncio loop."""

    async def run(self, procedure: Procedure) -> Any:
        """Drive ``procedure`` to its end; its result, or its exception. A cancellation
        while it waits is thrown into the procedure (its ``finally`` blocks run)."""
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
                handler, awaited = _HANDLERS[request.__class__]
                value = handler(self, request)
                if awaited:
                    value = await value
            except BaseException as err:  # into the procedure, which decides
                value, error = None, err

    def spawn(self, procedure: Procedure, name: str = "") -> Task:
        """Start ``procedure`` as a task of the running loop; its :class:`Task`."""
        task = Task(name)
        job = asyncio.ensure_future(self._run_task(task, procedure))

        def cancel() -> None:
            # A task that cancels itself (a keepalive closing its lost link) is ending anyway.
            if job is not asyncio.current_task():
                job.cancel()

        def ended(_: asyncio.Future) -> None:
            # Cancelled before it started, _run_task never ran: said here, or a join would
            # wait for it to the end of its deadline.
            if not task.done.is_set():
                task.finished(exception=asyncio.CancelledError())
        task._cancel = cancel
        job.add_done_callback(ended)
        return task

    async def _run_task(self, task: Task, procedure: Procedure) -> None:
        try:
            result = await self.run(procedure)
        except BaseException as err:  # noqa: B036 - a cancel ends the task, recorded as such
            task.finished(exception=err)
        else:
            task.finished(result)

    # -- the requests ----------------------------------------------------------------------

    def _session_io(self, request: SessionIO) -> Awaitable[bool]:
        link = request.link
        watch = link.waker_for(_Watch, lambda: _Watch(asyncio.get_running_loop(),
                                                      link.live_sock.fileno()))
        directions = link.live_session.block_directions()
        writing = bool(directions & LIBSSH2_SESSION_BLOCK_OUTBOUND)
        reading = bool(directions & LIBSSH2_SESSION_BLOCK_INBOUND) or not writing
        return watch.wait(reading, writing, request.deadline)

    def _socket_io(self, request: SocketIO) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fd = request.sock.fileno()
        ready = loop.create_future()
        (loop.add_writer if request.write else loop.add_reader)(fd, _resolve, ready)
        timer = None if request.deadline is None else \
            loop.call_later(remaining(request.deadline), _resolve, ready, False)

        def done(_) -> None:
            (loop.remove_writer if request.write else loop.remove_reader)(fd)
            if timer is not None:
                timer.cancel()
        ready.add_done_callback(done)
        return ready

    async def _sleep(self, request: Sleep) -> bool:
        await asyncio.sleep(request.seconds)
        return True

    def _wait_for(self, request: WaitFor) -> asyncio.Future:
        event = request.event
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        if event.is_set():
            ready.set_result(True)
            return ready
        setter = lambda: _resolve(ready)  # noqa: E731
        event.subscribe(setter)
        timer = None if request.deadline is None else \
            loop.call_later(remaining(request.deadline), _resolve, ready, False)

        def done(_) -> None:
            event.unsubscribe(setter)
            if timer is not None:
                timer.cancel()
        ready.add_done_callback(done)
        return ready

    async def _resolve_host(self, request: Resolve) -> Optional[list]:
        try:
            # An IP address needs no resolver: no hop to the loop's executor thread.
            return _socket.getaddrinfo(request.host, request.port, type=_socket.SOCK_STREAM,
                                       proto=_socket.IPPROTO_TCP,
                                       flags=_socket.AI_NUMERICHOST)
        except _socket.gaierror:
            pass
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                loop.getaddrinfo(request.host, request.port, type=_socket.SOCK_STREAM,
                                 proto=_socket.IPPROTO_TCP), remaining(request.deadline))
        except asyncio.TimeoutError:
            return None

    async def _connect_socket(self, request: Connect):
        loop = asyncio.get_running_loop()
        sock = _socket.socket(request.family, request.kind)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, request.address),
                                   remaining(request.deadline))
        except asyncio.TimeoutError:
            sock.close()
            return None
        except BaseException:
            sock.close()
            raise
        return sock

    def _spawn(self, request: Spawn) -> Task:
        return self.spawn(request.procedure, request.name)

    def _blocking(self, request: Blocking) -> Any:
        # Only the gevent client's replaceable steps ask for one; nothing on asyncio does.
        return request.call()


# request type -> (handler, whether its answer is to be awaited)
_HANDLERS: Dict[type, Tuple[Callable[[AsyncioRunner, Any], Any], bool]] = {
    SessionIO: (AsyncioRunner._session_io, True),
    SocketIO: (AsyncioRunner._socket_io, True),
    Sleep: (AsyncioRunner._sleep, True),
    WaitFor: (AsyncioRunner._wait_for, True),
    Resolve: (AsyncioRunner._resolve_host, True),
    Connect: (AsyncioRunner._connect_socket, True),
    Spawn: (AsyncioRunner._spawn, False),
    Blocking: (AsyncioRunner._blocking, False),
}

#: One runner serves every loop: it keeps no state of its own.
RUNNER = AsyncioRunner()

__all__ = ["AsyncioRunner", "RUNNER"]
