"""Starting the SSH session on a connected socket: the handshake and the host key check.

A failed handshake is retried on a new connection (``num_retries``, as
parallel-ssh does); a host key that does not verify is final at once.
"""
from __future__ import annotations

import logging
import socket
from typing import Callable, Optional

from pssh.core import errors as exc
from pssh.core.connect import Destination, open_socket
from pssh.core.link import Link
from pssh.core.waits import Procedure, Sleep
from pssh.core.deadlines import deadline_after, remaining
from pssh.core.known_hosts import verify_host_key
from pssh.core.login import prepare_session
from pssh.core.settings import Resolved

log = logging.getLogger("pssh.core.handshake")


class Attempt:
    """One attempt to connect, handshake and log in: the connect timeout bounds it as a
    whole, whatever the server sends meanwhile. :meth:`start` begins the next one."""

    __slots__ = ("limit", "deadline", "cap")

    def __init__(self, limit: Optional[float]) -> None:
        self.limit = limit
        self.cap: Optional[float] = None
        self.deadline: Optional[float] = None
        self.start()

    def start(self) -> None:
        self.deadline = _earlier(deadline_after(self.limit), self.cap)

    def cap_at(self, cap: Optional[float]) -> None:
        """No attempt, this one or a retry, ends after the time ``cap`` (:mod:`pssh.core.clock`)
        (asyncssh's ``login_timeout``: one limit for the handshake and the login)."""
        self.cap = cap
        self.deadline = _earlier(self.deadline, cap)

    def left(self) -> Optional[float]:
        """Seconds left (at least a sliver, so that a call made after the deadline fails
        on its first wait with a clear Timeout)."""
        left = remaining(self.deadline)
        return None if left is None else max(left, 1e-3)


def _earlier(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """The earlier of two deadlines, None being never."""
    return b if a is None else a if b is None else min(a, b)


def named(err: BaseException, host: str, port: int) -> BaseException:
    """``err``, naming the host it happened on (:func:`pssh.exceptions.with_host`)."""
    return exc.with_host(err, host, port)


def handshake(link: Link, resolved: Resolved, attempt: Attempt) -> Procedure[None]:
    """The SSH handshake of ``link``'s new session (algorithm preferences, flags and host
    certificate wishes set first), within the attempt's time."""
    prepare_session(link.live_session, resolved, link.host)
    yield from link.call(link.live_session.handshake, link.live_sock, timeout=attempt.left(),
                         what="SSH handshake")


def start_session(dest: Destination, resolved: Resolved, sock: socket.socket,
                  new_session: Callable, attempt: Attempt, first_try: int = 1,
                  dial: Optional[Callable[[int], Procedure[socket.socket]]] = None
                  ) -> Procedure[Link]:
    """A handshaken session on ``sock``: its :class:`Link`. A failed handshake closes
    that connection and tries again on a new one (``dial(try number)``; default: a new
    TCP connection) while tries are left. The host key is not checked here:
    :func:`check_host_key`."""
    tries = dest.num_retries
    try_no = first_try
    while True:
        session = new_session()
        session.set_blocking(False)
        link = Link(sock, session, dest.host, dest.port, resolved.timeout)
        try:
            yield from handshake(link, resolved, attempt)
            return link
        except Exception as err:
            if try_no >= tries:
                log.error("%s:%s: SSH handshake failed: %s", dest.host, dest.port, err)
                link.close()
                failure = named(err, dest.host, dest.port)
                if failure is err:  # the same error, now naming the host
                    raise
                raise failure from err  # a local OSError, rebuilt to name the host
            log.debug("%s:%s: SSH handshake failed (try %s of %s): %s", dest.host, dest.port,
                      try_no, tries, err)
            link.close()
        except BaseException:  # cancelled, or the greenlet killed: nothing stays open
            link.close()
            raise
        yield Sleep(dest.retry_delay)
        try_no += 1
        attempt.start()
        sock = yield from (dial(try_no) if dial is not None else open_socket(dest, try_no))


def check_host_key(link: Link, resolved: Resolved) -> None:
    """Verify the server's host key (or certificate) under the host key policy; never
    retried, and nothing is sent before it passed. A changed key let through (policy
    ``off``) marks the link: ``link.host_key_verified`` is False."""
    options = resolved.options
    policy = options.host_key_policy
    assert policy is not None  # resolve() checked it against HOST_KEY_POLICIES
    link.host_key_verified = verify_host_key(link.live_session, resolved.host_key_name, link.port,
                                             policy, options.known_hosts)


__all__ = ["Attempt", "check_host_key", "handshake", "named", "start_session"]
