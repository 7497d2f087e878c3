"""Reaching a host: resolving its name and connecting a TCP socket, with retries.

parallel-ssh's ``num_retries`` governs: at most that many attempts (at least
one) to resolve and connect, ``retry_delay`` seconds apart. A refused
connection is final at once (nothing listens: retrying would only wait).
Each attempt is bounded by the connect timeout as a whole.
"""
from __future__ import annotations

import logging
import socket
from typing import List, Optional

from pssh.core import errors as exc
from pssh.core.waits import Connect, Procedure, Resolve, Sleep
from pssh.core.deadlines import deadline_after, remaining
from pssh.core.settings import Resolved

log = logging.getLogger("pssh.core.connect")


class Destination:
    """Where a connection goes and how hard to try: ``host`` names it in errors,
    ``hostname:port`` is dialled (the ssh config's HostName, or the host itself)."""

    __slots__ = ("host", "hostname", "port", "ipv6_only", "num_retries", "retry_delay",
                 "connect_timeout")

    def __init__(self, host: str, hostname: str, port: int, ipv6_only: bool = False,
                 num_retries: Optional[int] = 1, retry_delay: Optional[float] = 0.0,
                 connect_timeout: Optional[float] = None) -> None:
        self.host = host
        self.hostname = hostname
        self.port = port
        self.ipv6_only = ipv6_only
        self.num_retries = max(1, num_retries or 1)
        self.retry_delay = retry_delay or 0.0
        self.connect_timeout = connect_timeout

    @classmethod
    def of(cls, host: str, resolved: Resolved) -> "Destination":
        """From a :class:`~pssh.options.Resolved` for ``host``."""
        o = resolved.options
        return cls(host, resolved.hostname, resolved.port, bool(o.ipv6_only), o.num_retries,
                   o.retry_delay, resolved.connect_timeout)


def resolve(dest: Destination, deadline: Optional[float]) -> Procedure[List[tuple]]:
    """``getaddrinfo``'s TCP entries for the destination (IPv6 only if asked);
    :class:`~pssh.exceptions.UnknownHostError` if the name does not resolve."""
    try:
        infos = yield Resolve(dest.hostname, dest.port, deadline)
    except socket.gaierror as err:
        raise exc.UnknownHostError("cannot resolve host name %s: %s", dest.hostname,
                                   err.strerror or err, host=dest.host,
                                   port=dest.port) from None
    if infos is None:
        raise exc.ConnectTimeout.at(dest.host, dest.port, "resolving the name took over "
                                    f"{dest.connect_timeout} s")
    if dest.ipv6_only:
        v6 = [info for info in infos if info[0] == socket.AF_INET6]
        if not v6:
            raise exc.NoIPv6AddressFoundError(
                "IPv6 only was asked for, and host %s has no IPv6 address among %s",
                dest.hostname, [info[4] for info in infos], host=dest.host, port=dest.port)
        infos = v6
    return infos


def connect_any(dest: Destination, infos: List[tuple], deadline: Optional[float]
                ) -> Procedure[socket.socket]:
    """A socket connected to the first address that accepts; refused addresses are
    skipped (:class:`~pssh.exceptions.ConnectionRefused` when all refuse); any other
    failure is raised as it is (``OSError``; ``None`` socket: out of time)."""
    refused: Optional[ConnectionRefusedError] = None
    for family, kind, _, _, address in infos:
        log.debug("connecting to %s:%s (%s)", dest.host, dest.port, address)
        try:
            sock = yield Connect(family, kind, address, deadline)
        except ConnectionRefusedError as err:
            refused = err
            continue
        if sock is None:
            raise socket.timeout("timed out")
        return sock
    log.debug("%s:%s: refused on %s", dest.host, dest.port, [info[4] for info in infos])
    raise exc.ConnectionRefused(refused.errno if refused else None,
                                refused.strerror if refused else "connection refused",
                                dest.host, dest.port)


def open_socket(dest: Destination, first_try: int = 1) -> Procedure[socket.socket]:
    """Resolve and connect, retrying as :class:`Destination` says; each attempt within
    the connect timeout. Errors name the host and the attempt ("try 2 of 3")."""
    tries = dest.num_retries
    for attempt in range(first_try, max(tries, first_try) + 1):
        deadline = deadline_after(dest.connect_timeout)
        try:
            infos = yield from resolve(dest, deadline)
        except exc.UnknownHostError as err:
            if attempt < tries:
                yield Sleep(dest.retry_delay)
                continue
            raise exc.UnknownHostError("cannot resolve host name %s: %s (try %s of %s)",
                                       dest.hostname, err.args[2], attempt, tries,
                                       host=dest.host, port=dest.port) from None
        try:
            return (yield from connect_any(dest, infos, deadline))
        except exc.ConnectionRefused:
            raise
        except OSError as err:
            if attempt < tries:
                yield Sleep(dest.retry_delay)
                continue
            reason = err.strerror or str(err) or type(err).__name__
            cls = exc.ConnectTimeout if isinstance(err, socket.timeout) \
                or remaining(deadline) == 0 else exc.ConnectionError
            raise cls("%s:%s: cannot connect: %s (try %s of %s)", dest.host, dest.port, reason,
                      attempt, tries, host=dest.host, port=dest.port,
                      errno=err.errno) from None
    raise AssertionError("unreachable")


__all__ = ["Destination", "connect_any", "open_socket", "resolve"]
