"""A logged-in connection to one host, from its settings: the sequence, composed once.

connect (directly, or through a jump host's tunnel: :class:`Dialer`) → handshake
and host key check (:func:`begin_session`; the two: :func:`open_session`) → login
→ keepalives, then agent forwarding (:func:`start_services`). :func:`establish` is
all of it with the core's login order. Who runs what:

- ``pssh.aio`` runs :func:`open_session`, its own login (asyncssh's client
  callbacks may be coroutines), then :func:`start_services`;
- parallel-ssh's client runs the same steps one by one from the methods programs
  call and replace: ``_connect`` dials with a :class:`Dialer`, ``_init_session``
  runs :func:`begin_session`, ``_auth_retry`` the login, ``_start_services``
  :func:`start_services` (with the client's ``_keepalive`` as its keepalive step);
- jump hosts of both front ends are connected by :func:`establish`
  (:class:`pssh.core.jump.JumpChain`).
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Any, Callable, Optional, Tuple

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
    """Connect to ``host`` (through ``via``'s server when given), then
    :func:`begin_session`: ``(link, attempt)``, the attempt being the time left for the
    login. On any failure everything made so far is closed.

    ``login_timeout``: asyncssh's limit from the TCP connection to the end of the login
    (kept in ``attempt.cap``). ``started`` and ``verify``: as for :func:`begin_session`.
    """
    dest = Destination.of(host, resolved)
    attempt = attempt if attempt is not None else Attempt(resolved.connect_timeout)
    dial = dialer(dest, via, attempt)
    sock = yield from dial(1)
    if login_timeout is not None:
        attempt.cap_at(deadline_after(login_timeout))
    link = yield from begin_session(dest, resolved, sock, new_session, attempt, dial,
                                    started=started, verify=verify)
    return link, attempt


def begin_session(dest: Destination, resolved: Resolved, sock: socket.socket,
                  new_session: Callable, attempt: Attempt, dial: Dialer, first_try: int = 1,
                  *, started: Optional[Callable[[Link], None]] = None,
                  verify: Optional[Callable[[Link], None]] = None) -> Procedure[Link]:
    """The session on ``sock``, which ``dial`` connected: the handshake (retried on a new
    connection from ``dial``, try ``first_try`` being this one), then the host key
    check. The link owns the tunnel it runs over (``dial.tunnel``), which stops with it.
    On any failure everything made so far is closed.

    ``started(link)``: called once the session is up, before the host key check
    (asyncssh's ``connection_made``). ``verify(link)``: the host key check (default
    :func:`~pssh.core.handshake.check_host_key` under the host's policy).
    """
    try:
        link = yield from start_session(dest, resolved, sock, new_session, attempt, first_try,
                                        dial=dial)
    except BaseException:
        _cancel(dial.tunnel)
        raise
    if dial.tunnel is not None:
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
    return link


def start_services(link: Link, resolved: Resolved, agent_path: Optional[str] = None, *,
                   keepalive: Optional[Callable[[], Procedure[Any]]] = None) -> Procedure[None]:
    """What follows a login, in this order: keepalives, then agent forwarding when asked
    for (never to a host whose key did not verify: :func:`forward_agent`).

    Keepalives first: they are the connection's own upkeep (they notice a server that
    stopped answering), wanted from the moment it is usable, and parallel-ssh starts them
    right after the login (its ``_keepalive`` step); forwarding is a service for the
    channels opened later. ``keepalive()``: a front end's own step for them
    (parallel-ssh's overridable ``_keepalive``); by default :func:`start_keepalive` as the
    settings say."""
    options = resolved.options
    if keepalive is not None:
        yield from keepalive()
    elif options.keepalive_seconds:
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


__all__ = ["Dialer", "agent_path_of", "begin_session", "dialer", "establish", "forward_agent",
           "open_session", "start_services"]
