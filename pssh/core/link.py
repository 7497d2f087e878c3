"""One SSH connection as the core sees it: a libssh2 session, its socket, how to call it.

Every libssh2 call runs non-blocking. A call that would block returns
``LIBSSH2_ERROR_EAGAIN``; :meth:`Link.call` then yields a
:class:`~pssh.core.waits.SessionIO` request (the runner waits on the socket in
the direction libssh2 asks for) and calls again. Channels, readers, transfers,
tunnels and agent forwarding all go through a :class:`Link`; they never see the
socket or the loop.

Several procedures may use one session at once (a command's reader, a
transfer, a keepalive). A call by one may read packets meant for another off
the socket: libssh2 queues them, and the other's socket would never become
readable for them. So every call that got something, and every wait that
finds that bytes arrived since the last, wakes the procedures waiting on the
link (:meth:`Link.wake`, which the runner carries out).
"""
from __future__ import annotations

import itertools
import logging
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Type, TypeVar

from pssh.core import clock
from pssh.core import errors as exc
from pssh.core.deadlines import Limit, UNSET, deadline_after, remaining
from pssh.core.waits import Procedure, SessionIO, Sleep, Turnstile
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN

if TYPE_CHECKING:  # the bindings' types, for annotations only
    import socket

    from ssh2.session import Session

log = logging.getLogger("pssh.core.link")

W = TypeVar("W")

#: Seconds a procedure may keep working without giving its loop a turn (:meth:`Link.turn`):
#: a server that always has more to send must not stop timers, signals and other hosts.
TURN_SLICE = 0.02
#: Numbers of wakes (see Link.wakes).
_wake_numbers = itertools.count(1)


class Link:
    """Drives the libssh2 ``session`` over the connected ``sock``.

    ``host``/``port`` name the host in errors; ``timeout`` is the limit of each
    request as a whole unless a call gives its own (``None``: no limit).
    """

    #: The number of the latest wake of any link (:meth:`wake`); a link's :attr:`woken`
    #: is the number of its own latest. A runner that queues a procedure before the
    #: procedure reaches its wait (the native one) notes this when it queues it: a wake
    #: of the link that comes in between has a higher number, was meant for that wait,
    #: and ends it at once. Without the numbers the wake found no waiter and was lost.
    wakes = 0

    def __init__(self, sock: Optional[socket.socket], session: Optional[Session], host: str,
                 port: int, timeout: Optional[float] = None) -> None:
        # None for a client that is not connected, and the session once closed: the
        # procedures, which use both while the link is open, take them as live_session
        # and live_sock (the link's error, never an AttributeError on None, if closed).
        self.sock: Optional[socket.socket] = sock
        self.session: Optional[Session] = session
        self.host = host
        self.port = port
        self.timeout = timeout
        #: Each runner's state for this link (who waits, its socket watch), by its class
        #: (:meth:`waker_for`). Usually one; two when procedures of two runners share the
        #: link (a jump host's, connected on gevent's, carrying a tunnel driven natively).
        self.wakers: Dict[type, Any] = {}
        #: Procedures run before every wait (agent forwarding accepts channels there).
        self.before_wait: List[Callable[[], Procedure[None]]] = []
        #: Called once the link is closed, whoever closed it.
        self.on_close: List[Callable[[], None]] = []
        #: Calls whose progress libssh2 keeps in the session, not a channel, one at a time.
        self.opening = Turnstile()
        #: Background procedures of this link (keepalives): cancelled when it closes.
        self.tasks: list = []
        self.lost: Optional[exc.PSSHError] = None
        #: Makes the error of a lost server, ``lost_error(host, port, reason)`` (a front
        #: end's own class, e.g. asyncssh's ConnectionLost).
        self.lost_error: Callable[[str, int, str], exc.PSSHError] = exc.ConnectionError.at
        #: Agent forwarding on this connection (:class:`~pssh.core.forwarding.AgentForwarding`).
        self.agent: Any = None
        self._turn_at = monotonic()
        #: False when the server's host key did not verify and the policy let the connection
        #: go on (``off``): then no secret is sent and the agent is not forwarded.
        self.host_key_verified = True
        self._received_seen = -1
        #: :attr:`wakes` at this link's last :meth:`wake` (0: none yet).
        self.woken = 0

    @property
    def live_session(self) -> Session:
        """The libssh2 session of this open link; its error once lost or closed."""
        session = self.session
        if session is None:
            raise self._closed_error()
        return session

    @property
    def live_sock(self) -> socket.socket:
        """The connected socket of this open link; its error once lost or closed."""
        sock = self.sock
        if sock is None or self.session is None:
            raise self._closed_error()
        return sock

    def _closed_error(self) -> exc.PSSHError:
        return self.lost or exc.ConnectionError.at(self.host, self.port,
                                                   "the connection is closed")

    # -- waiting -------------------------------------------------------------------------

    def turn(self) -> Procedure[None]:
        """Give the loop a turn if this link's procedures have worked :data:`TURN_SLICE`
        seconds without waiting: reads that always find data never wait, and would keep
        every other host, timer and signal handler of the loop waiting instead."""
        if self.turn_due():
            yield Sleep(0)
            self.turned()

    def turn_due(self) -> bool:
        """Whether this link's work has gone on :data:`TURN_SLICE` seconds since the loop
        last had a turn (:meth:`turn`, a wait, or :meth:`turned`): for a front end that
        hands on buffered output without calling the core (pssh.aio's ``readline``)."""
        return monotonic() - self._turn_at >= TURN_SLICE

    def turned(self) -> None:
        """The loop has just had a turn (see :meth:`turn_due`)."""
        self._turn_at = monotonic()

    def waker_for(self, kind: Type[W], make: Callable[[], W]) -> W:
        """A runner's state for this link: the one of class ``kind``, made by ``make()``
        the first time (it has ``wake()`` and ``close()``)."""
        waker = self.wakers.get(kind)
        if waker is None:
            waker = self.wakers[kind] = make()
        return waker

    def wake(self) -> None:
        """Tell the procedures waiting on this link to try again (after progress)."""
        # Numbered by a counter, not by "wakes + 1": next() is atomic, so no two wakes
        # share a number whatever threads the engines run in. (Link.wakes itself may lag
        # after a race between threads: a run that noted the lower number only ends one
        # wait more at once than it had to.)
        Link.wakes = self.woken = next(_wake_numbers)
        for waker in tuple(self.wakers.values()):
            waker.wake()

    def wait(self, timeout: Optional[float], what: str = "waiting for the server",
             limit: Optional[float] = None) -> Procedure[None]:
        """Wait once for the socket (or a :meth:`wake`); Timeout after ``timeout`` seconds
        (``limit``: the whole phase's, for the message)."""
        if not (yield from self.wait_briefly(timeout)):
            raise self.timed_out(what, timeout if limit is None else limit)

    def wait_briefly(self, seconds: Optional[float]) -> Procedure[bool]:
        """Wait once for the socket (or a :meth:`wake`), ``seconds`` at the most (None: no
        limit); whether something came, never a Timeout. For a procedure that must let the
        others run before it tries again, and has no deadline of its own to raise at."""
        request = SessionIO(self, deadline_after(seconds))
        if self.before_wait:
            yield from self._before_wait()
        self._check_before_wait()
        ready = yield request
        self._turn_at = monotonic()
        if self.lost is not None:
            raise self.lost
        return bool(ready)

    def _before_wait(self) -> Procedure[None]:
        for hook in tuple(self.before_wait):
            yield from hook()

    def _check_before_wait(self) -> None:
        """Raise if the link is lost or closed; wake the others if our call read from the
        socket though it got nothing for itself (what it read may be another procedure's
        reply, now queued in libssh2 where that procedure's socket wait never sees it)."""
        if self.lost is not None:
            raise self.lost
        received = self.live_session.bytes_received
        if received != self._received_seen:
            self._received_seen = received
            self.wake()

    def timed_out(self, what: str, limit: Optional[float]) -> exc.Timeout:
        return exc.Timeout("%s:%s: %s: nothing within %.3g s", self.host, self.port, what,
                           limit or 0, host=self.host, port=self.port)

    def _wait_request(self, limit: Optional[float], what: object, request: Optional[SessionIO]
                      ) -> SessionIO:
        """The request for the next wait of a call bounded by ``limit`` (made at its first
        wait, reused for the rest); Timeout if its deadline has passed. ``what``: a text,
        or the function called (named only if it comes to a timeout)."""
        if request is None:
            request = SessionIO(self, deadline_after(limit))
        elif request.deadline is not None and clock.now() >= request.deadline:
            raise self.timed_out(_what(what), limit)
        self._check_before_wait()
        return request

    # -- calling libssh2 -----------------------------------------------------------------

    def call(self, fn: Callable, *args: Any, timeout: Limit = UNSET, what: str = "",
             check: Optional[Callable[[], None]] = None) -> Procedure[Any]:
        """``fn(*args)``, called again after each EAGAIN until it gives a result;
        ``timeout`` (default: the link's) bounds the whole call, however many waits.
        ``check()``, made before each wait, may raise to end it: a request of a channel
        whose far end is gone (an SFTP server that died) would otherwise be answered
        "try again" for as long as the timeout allows
        (:func:`pssh.core.channel_io.end_check`)."""
        result = fn(*args)
        if result.__class__ is not int or result != LIBSSH2_ERROR_EAGAIN:
            self.wake()
            return result
        # This is the hot path of every transfer: one request per call, no sub-generators.
        limit = self.timeout if timeout is UNSET else timeout
        request = None
        while True:
            if check is not None:
                check()
            if self.before_wait:
                yield from self._before_wait()
            request = self._wait_request(limit, what or fn, request)
            if not (yield request):
                raise self.timed_out(_what(what or fn), limit)
            if self.lost is not None:
                raise self.lost
            result = fn(*args)
            if result.__class__ is not int or result != LIBSSH2_ERROR_EAGAIN:
                self.wake()
                return result

    def exclusive(self, fn: Callable, *args: Any, timeout: Limit = UNSET, what: str = "",
                  check: Optional[Callable[[], None]] = None) -> Procedure[Any]:
        """:meth:`call` for the calls whose progress libssh2 keeps in the session, not in
        a channel: opening channels (session, direct-tcpip, SCP), starting SFTP, remote
        listeners. Two in progress at once would share that state (one's open would
        finish the other's), so they run one at a time; the wait for a turn counts
        toward ``timeout``."""
        limit = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(limit)
        if not (yield from self.opening.enter(deadline)):
            raise exc.Timeout("%s:%s: %s: waited %.3g s for other requests", self.host,
                              self.port, what or getattr(fn, "__name__", "request"), limit,
                              host=self.host, port=self.port)
        try:
            return (yield from self.call(fn, *args, timeout=remaining(deadline), what=what,
                                         check=check))
        finally:
            self.opening.leave()

    def write(self, write: Callable, data: bytes, timeout: Limit = UNSET, what: str = "writing",
              check: Optional[Callable[[], None]] = None) -> Procedure[None]:
        """Write all of ``data`` with ``write`` (calls returning ``(rc, written)``),
        resuming after each EAGAIN from the last byte written; ``timeout`` bounds it all,
        ``check`` as for :meth:`call`."""
        limit = self.timeout if timeout is UNSET else timeout
        view, total, size = memoryview(data), 0, len(data)
        request = None
        while total < size:
            rc, written = write(view[total:] if total else data)
            total += written
            if rc == LIBSSH2_ERROR_EAGAIN:
                if check is not None:
                    check()
                if self.before_wait:
                    yield from self._before_wait()
                request = self._wait_request(limit, what, request)
                if not (yield request):
                    raise self.timed_out(what, limit)
                if self.lost is not None:
                    raise self.lost
            elif written:
                self.wake()

    # -- liveness ------------------------------------------------------------------------

    def lose(self, reason: str) -> exc.PSSHError:
        """Fail every wait on this link from now on (and wake the waiting ones)."""
        log.warning("%s:%s: %s; closing the connection", self.host, self.port, reason)
        self.lost = self.lost_error(self.host, self.port, reason)
        self.wake()
        return self.lost

    @property
    def closed(self) -> bool:
        return self.session is None

    def close(self) -> None:
        """Stop background tasks, say goodbye without waiting, close the socket
        (idempotent); then the ``on_close`` hooks run."""
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        agent, self.agent = self.agent, None
        if agent is not None:
            agent.close()
        session, self.session = self.session, None
        sock = self.sock
        if session is not None and sock is not None and _is_open(sock):
            try:
                session.disconnect()  # non-blocking: sent if the socket takes it
            except ssh2_exc.SSH2Error:
                pass
        del session
        self.wake()
        for waker in tuple(self.wakers.values()):
            waker.close()
        if sock is not None:
            sock.close()
        hooks, self.on_close = self.on_close, []
        for hook in hooks:
            hook()


def _what(what: object) -> str:
    return what if isinstance(what, str) else getattr(what, "__name__", "request")


def _is_open(sock: socket.socket) -> bool:
    closed = getattr(sock, "closed", None)
    if closed is not None and not callable(closed):
        return not closed
    try:
        return sock.fileno() >= 0
    except (OSError, ValueError):
        return False


__all__ = ["Link"]
