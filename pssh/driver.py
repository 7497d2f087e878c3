"""The session driver: how one libssh2 session is driven on the gevent hub.

Every libssh2 call runs non-blocking. A call that would block returns
``LIBSSH2_ERROR_EAGAIN``; the driver then waits on the socket in the
direction libssh2 asks for, letting other greenlets run, and calls again.
Nothing else in the client knows how to wait: channels readers, shells,
transfers, tunnels and agent forwarding all go through a
:class:`SessionDriver`. An asyncio driver would offer the same methods.

Also here: the keepalive loop with lost-server detection (ServerAliveCountMax).
"""
from __future__ import annotations

import logging
import weakref
from typing import Callable, List, Optional

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from gevent.hub import get_hub

from pssh import exceptions as exc
from pssh.deadlines import UNSET, deadline_after, remaining
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND

log = logging.getLogger("pssh.driver")

_READ, _WRITE = 1, 2  # libev event bits


class SessionDriver:
    """Drives the libssh2 ``session`` over ``sock`` for greenlets on the hub.

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
        #: Called before every wait (agent forwarding accepts channels there).
        self.before_wait: List[Callable[[], None]] = []
        #: Called once the connection is closed, whoever closed it.
        self.on_close: List[Callable[[], None]] = []
        self._waiters: set = set()
        self._opening = Semaphore()
        self._lost: Optional[exc.PSSHError] = None
        self._received_seen = -1
        self._keepalive: Optional["KeepAlive"] = None

    # -- waiting ---------------------------------------------------------------------

    def wait(self, timeout: Optional[float], what: str = "waiting for the server") -> None:
        """Wait once on the socket, in the direction libssh2 is blocked on.

        Also returns early when another greenlet using this session made
        progress (:meth:`wake`): its libssh2 call may have read packets for
        us off the socket, which would then never become readable for us.
        Raises :class:`~pssh.exceptions.Timeout` after ``timeout`` seconds.
        """
        if self._lost is not None:
            raise self._lost
        directions = self.session.block_directions()
        events = ((_READ if directions & LIBSSH2_SESSION_BLOCK_INBOUND else 0)
                  | (_WRITE if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND else 0)) or _READ
        for hook in self.before_wait:
            hook()
        received = self.session.bytes_received
        if received != self._received_seen:
            # Our call read from the socket though it got nothing for itself:
            # what it read may be another greenlet's reply, now queued in
            # libssh2 where that greenlet's socket watch will never see it.
            self._received_seen = received
            self.wake()
        ready = Event()
        watcher = get_hub().loop.io(self.sock.fileno(), events)
        watcher.start(ready.set)
        self._waiters.add(ready)
        try:
            if not ready.wait(timeout):
                raise exc.Timeout("%s:%s: %s: nothing within %.3g s", self.host, self.port,
                                  what, timeout, host=self.host, port=self.port)
            if self._lost is not None:
                raise self._lost
        finally:
            self._waiters.discard(ready)
            watcher.stop()
            watcher.close()

    def wake(self) -> None:
        """Tell greenlets waiting on this session to try again (call after progress)."""
        for ready in tuple(self._waiters):
            ready.set()

    def eagain(self, fn: Callable, *args, timeout=UNSET, what: str = "",
               check: Optional[Callable[[], None]] = None):
        """``fn(*args)``, called again after each EAGAIN until it gives a result.

        ``timeout`` bounds the whole call, however many waits it takes. ``check()`` before
        each wait may raise to end it (see :meth:`write`).
        """
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        while True:
            result = fn(*args)
            if type(result) is int and result == LIBSSH2_ERROR_EAGAIN:
                if check is not None:
                    check()
                self._wait_until(deadline, timeout, what or getattr(fn, "__name__", "request"))
                continue
            self.wake()
            return result

    def exclusive(self, fn: Callable, *args, timeout=UNSET, what: str = ""):
        """:meth:`eagain` for the calls whose progress libssh2 keeps in the session, not
        in a channel: opening channels (session, direct-tcpip, SCP), starting SFTP.

        Two such calls in progress at once would share that state: one
        greenlet's open would finish another's (it gets the other's channel).
        They run one at a time; waiting for a turn counts toward ``timeout``.
        """
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        if not self._opening.acquire(timeout=remaining(deadline)):
            raise exc.Timeout("%s:%s: %s: waited %.3g s for other requests", self.host,
                              self.port, what or getattr(fn, "__name__", "request"), timeout,
                              host=self.host, port=self.port)
        try:
            return self.eagain(fn, *args, timeout=remaining(deadline), what=what)
        finally:
            self._opening.release()

    def write(self, write: Callable, data: bytes, timeout=UNSET, what: str = "writing",
              check: Optional[Callable[[], None]] = None) -> None:
        """Write all of ``data`` with ``write`` (``(rc, written)`` calls), within ``timeout``;
        ``check()`` before each wait may raise to end the write (the channel's far end gone:
        :func:`pssh.channel_io.end_check`)."""
        timeout = self.timeout if timeout is UNSET else timeout
        deadline = deadline_after(timeout)
        total, size = 0, len(data)
        while total < size:
            rc, written = write(data[total:] if total else data)
            total += written
            if rc == LIBSSH2_ERROR_EAGAIN:
                if check is not None:
                    check()
                self._wait_until(deadline, timeout, what)
            elif written:
                self.wake()

    def _wait_until(self, deadline: Optional[float], timeout: Optional[float],
                    what: str) -> None:
        left = remaining(deadline)
        if left == 0:
            raise exc.Timeout("%s:%s: %s: nothing within %.3g s", self.host, self.port, what,
                              timeout, host=self.host, port=self.port)
        self.wait(left, what)

    # -- liveness ------------------------------------------------------------------

    @property
    def lost(self) -> Optional[exc.PSSHError]:
        """Why the server counts as lost, or None."""
        return self._lost

    def lose(self, reason: str) -> exc.PSSHError:
        """Fail every wait on this connection from now on (and wake the waiting ones)."""
        log.warning("%s:%s: %s; closing the connection", self.host, self.port, reason)
        self._lost = exc.ConnectionError("%s:%s: %s", self.host, self.port, reason,
                                         host=self.host, port=self.port)
        self.wake()
        return self._lost

    def start_keepalive(self, seconds: int, count_max: int) -> "KeepAlive":
        """Send keepalives every ``seconds`` and notice a server that stopped answering."""
        self.session.keepalive_config(False, seconds)
        self._keepalive = KeepAlive(self.sock, self.session, seconds, count_max, driver=self)
        return self._keepalive

    def close(self) -> None:
        """Stop keepalives, say goodbye without waiting, close the socket (idempotent)."""
        if self._keepalive is not None:
            self._keepalive.stop()
            self._keepalive = None
        session, self.session = self.session, None
        sock = self.sock
        if session is not None and sock is not None and not getattr(sock, "closed", True):
            try:
                session.disconnect()  # non-blocking: sent if the socket takes it
            except ssh2_exc.SSH2Error:
                pass
        del session
        if sock is not None:
            sock.close()
        self.wake()
        hooks, self.on_close = self.on_close, []
        for hook in hooks:
            hook()


class KeepAlive:
    """Keepalives for one session, and what OpenSSH's ServerAliveCountMax does.

    parallel-ssh's ``KeepAlive(sock, session)``: a greenlet that calls
    ``session.keepalive_send()`` and sleeps as long as it answers (set the
    interval first with ``session.keepalive_config``). Added here: after a
    round of ``seconds`` in which not a byte came from the server, a probe
    that needs an answer (a channel opened and closed); no answer within
    ``count_max`` intervals declares the server lost, and every wait on the
    session fails. Holds the driver only weakly, so a dropped connection
    ends its keepalives.
    """

    def __init__(self, sock, session, seconds: int = 60, count_max: int = 0,
                 driver: Optional[SessionDriver] = None) -> None:
        self.sock = sock
        self.session = session
        self.seconds = seconds
        self.count_max = count_max
        if driver is None:
            driver = self._own_driver = SessionDriver(sock, session, "", 0)
        self._let = gevent.spawn(self._send_keepalive, weakref.ref(driver))

    _own_driver: Optional[SessionDriver] = None

    @property
    def dead(self) -> bool:
        return self._let.dead

    def stop(self) -> None:
        if self._let is not gevent.getcurrent():
            self._let.kill(block=False)

    def poll(self, timeout: Optional[float] = None) -> None:
        """Wait once for the socket, in the direction the session is blocked on."""
        SessionDriver(self.sock, self.session, "", 0).wait(timeout, "keepalive")

    def eagain(self, func, *args, **kwargs):
        """``func(*args, **kwargs)`` until it stops returning EAGAIN."""
        return SessionDriver(self.sock, self.session, "", 0).eagain(
            lambda *a: func(*a, **kwargs), *args)

    def _send_keepalive(self, ref) -> None:
        received = -1
        while True:
            driver = ref()
            if driver is None or driver.session is None:
                return
            try:
                if driver.session.bytes_received == received and self.count_max:
                    self._probe(driver)
                due = driver.eagain(driver.session.keepalive_send, what="sending a keepalive")
            except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
                log.debug("%s:%s: keepalive failed: %s", driver.host, driver.port, err)
                return
            received = driver.session.bytes_received if driver.session is not None else -1
            del driver
            gevent.sleep(due or self.seconds)

    def _probe(self, driver: SessionDriver) -> None:
        timeout = self.seconds * self.count_max
        try:
            channel = driver.exclusive(driver.session.open_session, timeout=timeout,
                                       what="keepalive probe")
            driver.eagain(channel.close, timeout=timeout, what="keepalive probe")
        except ssh2_exc.SSH2Error:
            return  # refused (e.g. MaxSessions): an answer all the same
        except exc.Timeout:
            lost = driver.lose(f"server not responding: no answer for {timeout} s "
                               f"({self.count_max} keepalive intervals of {self.seconds} s)")
            gevent.spawn(driver.close)
            raise lost
