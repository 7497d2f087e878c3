"""A logged-in connection to one host, from its settings: the sequence, composed once.

connect (directly, or through a jump host's tunnel) → handshake → host key
check (:func:`open_session`) → login → keepalives and agent forwarding
(:func:`start_services`). :func:`establish` is all of it with the core's login
order; ``pssh.aio`` runs :func:`open_session`, its own login (asyncssh's client
callbacks may be coroutines) and :func:`start_services`; jump hosts of
``pssh.aio`` are connected by :func:`establish` (:class:`pssh.core.jump.JumpChain`).
parallel-ssh's client runs the same steps one by one from its own methods,
which programs replace (``_connect``, ``_init_session``, ``_auth_retry``,
``_keepalive``): each calls the core's procedure for its step.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Callable, Optional, Tuple

from pssh.core.auth import Credentials, LoginMethods, Logins, login_retrying
from pssh.core.connect import Destination, open_socket
from pssh.core.forwarding import AgentForwarding, open_tunnel
from pssh.core.handshake import Attempt, check_host_key, start_session
from pssh.core.keepalive import start_keepalive
from pssh.core.link import Link
from pssh.core.waits import Procedure, Sleep, Task
from pssh.core.deadlines import deadline_after
from pssh.core.settings import Resolved
from pssh.core import errors as exc

log = logging.getLogger("pssh.core.establish")


class Dialer:
    """How to get a connected socket, from try ``n`` on (``dialer(n)``): directly
    (:func:`open_socket`), or through ``via``'s server (a tunnel; a target the jump host
    cannot reach is tried again ``num_retries`` times, as parallel-ssh does). ``tunnel``:
    the latest tunnel's relay task (None when direct)."""

    def __init__(self, dest: Destination, via: Optional[Link] = None,
                 attempt: Optional[Attempt] = None) -> None:
        self.dest = dest
        self.via = via
        self.attempt = attempt
        self.tunnel: Optional[Task] = None

    def __call__(self, first_try: int) -> Procedure[socket.socket]:
        dest = self.dest
        if self.via is None:
            return (yield from open_socket(dest, first_try))
        tries = dest.num_retries
        for try_no in range(first_try, max(tries, first_try) + 1):
            try:
                sock, self.tunnel = yield from open_tunnel(
                    self.via, dest.hostname, dest.port,
                    self.attempt.left() if self.attempt is not None else dest.connect_timeout)
            except exc.ProxyTargetError:
                if try_no < tries:
                    yield Sleep(dest.retry_delay)
                    continue
                raise
            return sock
        raise AssertionError("unreachable: the last try returns or raises")


dialer = Dialer


def agent_path_of(path: Optional[str]) -> Optional[str]:
    """The local agent to forward: ``path``, else ``SSH_AUTH_SOCK``."""
    return path or os.environ.get("SSH_AUTH_SOCK")


def forward_agent(link: Link, path: Optional[str]) -> Optional[AgentForwarding]:
    """Agent forwarding on ``link`` if there is a local agent (a warning if not)."""
    if not link.host_key_verified:
        log.warning("%s: not forwarding the SSH agent: the host key did not verify",
                    link.host)
        return None
    path = agent_path_of(path)
    if not path:
        log.warning("%s: agent forwarding asked for, but there is no local SSH agent "
                    "(SSH_AUTH_SOCK is not set): not forwarding", link.host)
        return None
    return AgentForwarding(link, path)


def open_session(host: str, resolved: Resolved, new_session: Callable, via: Optional[Link] = None,
                 attempt: Optional[Attempt] = None, *, login_timeout: Optional[float] = None,
                 started: Optional[Callable[[Link], None]] = None,
                 verify: Optional[Callable[[Link], None]] = None
                 ) -> Procedure[Tuple[Link, Attempt]]:
    """Connect to ``host`` (through ``via``'s server when given), handshake (retried on a
    new connection), then check the host key: ``(link, attempt)``, the attempt being the
    time left for the login. On any failure everything made so far is closed.

    ``login_timeout``: asyncssh's limit from the TCP connection to the end of the login
    (kept in ``attempt.cap``). ``started(link)``: called once the session is up, before
    the host key check (asyncssh's ``connection_made``). ``verify(link)``: the host key
    check (default :func:`~pssh.core.handshake.check_host_key` under the host's policy).
    """
    dest = Destination.of(host, resolved)
    attempt = attempt if attempt is not None else Attempt(resolved.connect_timeout)
    dial = dialer(dest, via, attempt)
    sock = yield from dial(1)
    if login_timeout is not None:
        attempt.cap_at(deadline_after(login_timeout))
    try:
        link = yield from start_session(dest, resolved, sock, new_session, attempt, dial=dial)
    except BaseException:
        _cancel(getattr(dial, "tunnel", None))
        raise
    if getattr(dial, "tunnel", None) is not None:
        link.tasks.append(dial.tunnel)
    try:
        if started is not None:
            started(link)
        if verify is not None:
            verify(link)
        else:
            check_host_key(link, resolved)
    except BaseException:
        link.close()
        raise
    return link, attempt


def start_services(link: Link, resolved: Resolved,
                   agent_path: Optional[str] = None) -> Procedure[None]:
    """What follows a login: keepalives, and agent forwarding when asked for (never to a
    host whose key did not verify: :func:`forward_agent`)."""
    options = resolved.options
    if options.keepalive_seconds:
        yield from start_keepalive(link, options.keepalive_seconds,
                                   options.keepalive_count_max or 0)
    link.agent = forward_agent(link, agent_path) if options.forward_ssh_agent else None


def establish(host: str, resolved: Resolved, creds: Credentials, new_session: Callable,
              via: Optional[Link] = None, methods: Optional[Logins] = None
              ) -> Procedure[Link]:
    """The whole sequence: :func:`open_session`, the core's login order
    (:func:`~pssh.core.auth.login_retrying`), :func:`start_services`. On any failure
    everything made so far is closed."""
    link, attempt = yield from open_session(host, resolved, new_session, via)
    try:
        if methods is None:
            methods = LoginMethods(link, creds, attempt)
        options = resolved.options
        yield from login_retrying(link, creds, methods, attempt, options.num_retries,
                                  options.retry_delay)
        yield from start_services(link, resolved, creds.agent_path)
    except BaseException:
        link.close()
        raise
    return link


def _cancel(task: Optional[Task]) -> None:
    if task is not None:
        task.cancel()


__all__ = ["Dialer", "agent_path_of", "dialer", "establish", "forward_agent", "open_session",
           "start_services"]
