"""A logged-in connection to one host, from its settings: the whole sequence.

connect (directly, or through a jump host's tunnel) → handshake → host key
check → login → keepalives → agent forwarding. Each step is its module's
procedure; parallel-ssh's client runs the same steps one by one from its own
(overridable) methods, everything else runs :func:`establish`.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, Optional

from pssh.core.auth import Credentials, LoginMethods, login_retrying
from pssh.core.connect import Destination, open_socket
from pssh.core.forwarding import AgentForwarding, open_tunnel
from pssh.core.handshake import Attempt, check_host_key, start_session
from pssh.core.keepalive import start_keepalive
from pssh.core.link import Link
from pssh.core.waits import Procedure, Sleep
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
        self.tunnel = None

    def __call__(self, first_try: int) -> Procedure[object]:
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


def establish(host: str, resolved, creds: Credentials, new_session: Callable,
              via: Optional[Link] = None, methods=None) -> Procedure[Link]:
    """Connect to ``host`` (through ``via``'s server when given), check its host key, log
    in, start keepalives and, if asked, agent forwarding (``link.agent``). On any failure
    everything made so far is closed."""
    options = resolved.options
    dest = Destination.of(host, resolved)
    attempt = Attempt(resolved.connect_timeout)
    dial = dialer(dest, via, attempt)
    sock = yield from dial(1)
    try:
        link = yield from start_session(dest, resolved, sock, new_session, attempt, dial=dial)
    except BaseException:
        _cancel(getattr(dial, "tunnel", None))
        raise
    if getattr(dial, "tunnel", None) is not None:
        link.tasks.append(dial.tunnel)
    try:
        check_host_key(link, resolved)
        if methods is None:
            methods = LoginMethods(link, creds, attempt)
        yield from login_retrying(link, creds, methods, attempt, options.num_retries,
                                  options.retry_delay)
        if options.keepalive_seconds:
            yield from start_keepalive(link, options.keepalive_seconds,
                                       options.keepalive_count_max or 0)
        link.agent = forward_agent(link, creds.agent_path) if options.forward_ssh_agent \
            else None
    except BaseException:
        link.close()
        raise
    return link


def _cancel(task) -> None:
    if task is not None:
        task.cancel()


__all__ = ["Dialer", "agent_path_of", "dialer", "establish", "forward_agent"]
