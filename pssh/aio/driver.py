"""The session driver for asyncio: how one libssh2 session is driven on an event loop.

The same contract as :class:`pssh.driver.SessionDriver` (the gevent one), with
``async`` methods: every libssh2 call runs non-blocking; one that would block
returns ``LIBSSH2_ERROR_EAGAIN``, and the driver then waits with
``loop.add_reader`` / ``loop.add_writer`` on the socket in the direction
libssh2 asks for, and calls again. No libssh2 call ever waits on the loop's
thread and no thread is used.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from pssh import exceptions as exc
from pssh.deadlines import UNSET, deadline_after, remaining
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND

log = logging.getLogger("pssh.aio.driver")


class AsyncSessionDriver:
    """Drives the libssh2 ``session`` over the non-blocking socket ``sock`` for tasks
    of the running loop.

    ``timeout``: the limit of each request as a whole (None: none), unless a
    call gives its own. ``host``/``port`` name the host in errors.
    """

    def __init__(self, sock, session, host: str, port: int,
                 timeout: Optional[float] = None) -> None:
        self.sock = sock
        self.session = session
        self.host = host
        self.port = port
        self.timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._waiters: set = set()
        self._readers: set = set()
        self._writers: set = set()
        self._registrations: set = set()  # loop.add_reader / add_writer while registered
        self._opening = asyncio.Lock()
        self._received_seen = -1
        self._lost: Optional[exc.PSSHError] = None
        self._keepalive: Optional[asyncio.Task] = None
        #: Called once the connection is closed, whoever closed it.
        self.on_close: list = []
        #: Called before every wait (agent forwarding accepts channels there).
        self.before_wait: list = []

    async def wait(self, timeout: Optional[float], what: str = "waiting for the server") -> None:
        """Wait once for the socket, in the direction libssh2 is blocked on.

        Returns early when another task using this session made progress
        (:meth:`wake`): its call may have read our packets into libssh2's queue,
        and the socket would then never become readable for us.
        """
        if self._lost is not None:
            raise self._lost
        if self.session is None:
            raise exc.ConnectionError.at(self.host, self.port, "the connection is closed")
        directions = self.session.block_directions()
        for hook in self.before_wait:
            hook()
        received = self.session.bytes_received
        if received != self._received_seen:
            self._received_seen = received
            self.wake()
        ready = self._loop.create_future()
        reading = bool(directions & LIBSSH2_SESSION_BLOCK_INBOUND) or not directions
        writing = bool(directions & LIBSSH2_SESSION_BLOCK_OUTBOUND)
        # One registration per direction for all of this socket's waiters: the
        # loop keeps one reader and one writer per fd, a second would replace the first.
        if reading:
            self._watch(self._readers, ready, self._loop.add_reader, self._readable)
        if writing:
            self._watch(self._writers, ready, self._loop.add_writer, self._writable)
        self._waiters.add(ready)
        # A timer that resolves the same future with False: cheaper than wait_for's task.
        timer = None if timeout is None else self._loop.call_later(timeout, _resolve, ready, False)
        try:
            if not await ready:
                raise exc.Timeout("%s:%s: %s: nothing within %.3g s", self.host, self.port,
                                  what, timeout, host=self.host, port=self.port)
            if self._lost is not None:
                raise self._lost
        finally:
            if timer is not None:
                timer.cancel()
            self._waiters.discard(ready)
            self._unwatch(self._readers, ready, self._loop.remove_reader)
            self._unwatch(self._writers, ready, self._loop.remove_writer)

    def _watch(self, waiters: set, ready: asyncio.Future, add: Callable,
               callback: Callable) -> None:
        if not waiters and add not in self._registrations:
            add(self._fd, callback)
            self._registrations.add(add)
        waiters.add(ready)

    def _unwatch(self, waiters: set, ready: asyncio.Future, remove: Callable) -> None:
        # The registration stays until an event finds nobody waiting: a transfer waits
        # thousands of times a second, and each add/remove is a system call.
        waiters.discard(ready)

    def _readable(self) -> None:
        self._dispatch(self._readers, self._loop.add_reader, self._loop.remove_reader)

    def _writable(self) -> None:
        self._dispatch(self._writers, self._loop.add_writer, self._loop.remove_writer)

    def _dispatch(self, waiters: set, add: Callable, remove: Callable) -> None:
        if not waiters:
            remove(self._fd)
            self._registrations.discard(add)
            return
        for ready in tuple(waiters):
            _resolve(ready)

    def wake(self) -> None:
        """Tell the tasks waiting on this session to try again (call after progress)."""
        for ready in tuple(self._waiters):
            _resolve(ready)

    async def eagain(self, fn: Callable, *args, timeout=UNSET, what: str = "",
                     check: Optional[Callable[[], None]] = None):
        """``fn(*args)``, called again after each EAGAIN until it gives a result;
        ``timeout`` bounds the whole call, however many waits it takes. ``check()`` before
        each wait may raise to end it (see :meth:`write`)."""
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        while True:
            result = fn(*args)
            if type(result) is int and result == LIBSSH2_ERROR_EAGAIN:
                if check is not None:
                    check()
                await self._wait_until(deadline, timeout, what or getattr(fn, "__name__", "request"))
                continue
            self.wake()
            return result

    async def exclusive(self, fn: Callable, *args, timeout=UNSET, what: str = ""):
        """:meth:`eagain` for the calls whose progress libssh2 keeps in the session (opening
        channels, starting SFTP): one at a time, the wait for a turn inside ``timeout``."""
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        try:
            await asyncio.wait_for(self._opening.acquire(), remaining(deadline))
        except asyncio.TimeoutError:
            raise exc.Timeout("%s:%s: %s: waited %.3g s for other requests", self.host,
                              self.port, what or getattr(fn, "__name__", "request"), timeout,
                              host=self.host, port=self.port) from None
        try:
            return await self.eagain(fn, *args, timeout=remaining(deadline), what=what)
        finally:
            self._opening.release()

    async def write(self, write: Callable, data: bytes, timeout=UNSET,
                    what: str = "writing", check: Optional[Callable[[], None]] = None) -> None:
        """Write all of ``data`` with ``write`` (``(rc, written)`` calls), within ``timeout``;
        ``check()`` before each wait may raise to end the write (the channel's far end gone:
        :func:`pssh.channel_io.end_check`)."""
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        view, total, size = memoryview(data), 0, len(data)
        while total < size:
            rc, written = write(view[total:] if total else data)
            total += written
            if rc == LIBSSH2_ERROR_EAGAIN:
                if check is not None:
                    check()
                await self._wait_until(deadline, timeout, what)
            elif written:
                self.wake()

    async def _wait_until(self, deadline: Optional[float], timeout: Optional[float],
                          what: str) -> None:
        left = remaining(deadline)
        if left == 0:
            raise exc.Timeout("%s:%s: %s: nothing within %.3g s", self.host, self.port, what,
                              timeout, host=self.host, port=self.port)
        await self.wait(left, what)

    # -- liveness ----------------------------------------------------------------------

    def lose(self, reason: str) -> exc.PSSHError:
        """Fail every wait on this connection from now on (and wake the waiting ones)."""
        log.warning("%s:%s: %s; closing the connection", self.host, self.port, reason)
        self._lost = exc.ConnectionError.at(self.host, self.port, reason)
        self.wake()
        return self._lost

    def start_keepalive(self, seconds: int, count_max: int) -> None:
        """Keepalives every ``seconds``; after a round with nothing from the server, a probe
        that needs an answer (a channel opened and closed). None within ``count_max``
        intervals: the server is lost, every wait fails and the connection closes."""
        self.session.keepalive_config(False, seconds)
        self._keepalive = asyncio.ensure_future(self._keep_alive(seconds, count_max))

    async def _keep_alive(self, seconds: int, count_max: int) -> None:
        received = -1
        try:
            while self.session is not None:
                if count_max and self.session.bytes_received == received:
                    await self._probe(seconds * count_max, count_max, seconds)
                due = await self.eagain(self.session.keepalive_send, what="sending a keepalive")
                received = self.session.bytes_received if self.session is not None else -1
                await asyncio.sleep(due or seconds)
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            log.debug("%s:%s: keepalives end: %s", self.host, self.port, err)

    async def _probe(self, timeout: float, count_max: int, seconds: int) -> None:
        try:
            channel = await self.exclusive(self.session.open_session, timeout=timeout,
                                           what="keepalive probe")
            await self.eagain(channel.close, timeout=timeout, what="keepalive probe")
        except ssh2_exc.SSH2Error:
            return  # refused (e.g. MaxSessions): an answer all the same
        except exc.Timeout:
            lost = self.lose(f"server not responding: no answer for {timeout} s "
                             f"({count_max} keepalive intervals of {seconds} s)")
            self._keepalive = None  # this task: close() must not cancel it under itself
            self.close()
            raise lost

    def close(self) -> None:
        """Say goodbye without waiting and close the socket (idempotent)."""
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        session, self.session = self.session, None
        if session is not None and self.sock.fileno() >= 0:
            try:
                session.disconnect()  # non-blocking: sent if the socket takes it
            except ssh2_exc.SSH2Error:
                pass
        del session
        if self._registrations:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
            self._registrations.clear()
        self.sock.close()
        self.wake()
        hooks, self.on_close = self.on_close, []
        for hook in hooks:
            hook()


def _resolve(future: asyncio.Future, ready: bool = True) -> None:
    if not future.done():
        future.set_result(ready)

