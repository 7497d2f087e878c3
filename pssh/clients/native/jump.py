"""Jump hosts: SSH to a target through direct-tcpip channels of other sessions.

A tunnel is a direct-tcpip channel on the jump host's session and one end of
a local socket pair; the target's session runs over the other end as if it
were a TCP connection. A :class:`~pssh.clients.native.relay.Relay` moves the
bytes: no threads and no listening sockets. Jump sessions are shared: every
target behind the same chain of jump hosts tunnels through one session per
hop (:class:`JumpHosts`).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence

from gevent import socket as gsocket
from gevent.event import AsyncResult

from pssh import exceptions as exc
from pssh.clients.native.relay import Relay
from pssh.options import Hop
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:
    from pssh.clients.native.single import SSHClient

log = logging.getLogger("pssh.jump")


class Tunnel:
    """A local socket whose bytes go through a direct-tcpip channel of ``via``."""

    def __init__(self, via: "SSHClient", host: str, port: int,
                 timeout: Optional[float] = None) -> None:
        self.via = via
        self.target = f"{host}:{port}"
        try:
            channel = via._driver.exclusive(via.session.direct_tcpip, host, port,
                                            timeout=timeout,
                                            what=f"opening a tunnel to {self.target}")
        except ssh2_exc.SSH2Error as err:
            raise exc.ProxyTargetError(
                "%s:%s: jump host %s cannot connect to it: %s", host, port, via.host,
                err.message or type(err).__name__, host=host, port=port) from None
        self.sock, far = gsocket.socketpair()
        self._relay = Relay(via._driver, channel, far, f"tunnel to {self.target}")
        log.debug("%s: tunnel to %s open", via.host, self.target)

    def close(self) -> None:
        """Stop moving bytes and close the channel's local end."""
        self._relay.close()


class JumpHosts:
    """Sessions to jump hosts, shared by every target that goes through them.

    ``connect(hop, via)`` returns the logged-in client for ``hop``, reached
    through ``via`` (or directly), creating it once however many greenlets
    ask at the same time. A failed hop is forgotten, so a later call tries
    again.
    """

    def __init__(self, factory: Callable[..., "SSHClient"]) -> None:
        self._factory = factory
        self._clients: Dict[tuple, AsyncResult] = {}

    def connect(self, hop: Hop, via: Optional["SSHClient"], **settings) -> "SSHClient":
        key = (hop, id(via))
        result = self._clients.get(key)
        if result is not None and result.ready() and result.successful() \
                and result.value.session is None:
            result = None  # closed since: make a new one
        if result is None:
            result = self._clients[key] = AsyncResult()
            user, host, port = hop
            try:
                client = self._factory(host, user=user, port=port, _via=via, **settings)
            except BaseException as err:
                del self._clients[key]
                result.set_exception(err)
                raise
            result.set(client)
        return result.get()

    def chain(self, hops: Sequence[Hop], **settings) -> "SSHClient":
        """The client of the last of ``hops``, each reached through the one before."""
        via = None
        for hop in hops:
            via = self.connect(hop, via, **settings)
        return via

    def close(self) -> None:
        for result in self._clients.values():
            if result.ready() and result.successful():
                result.value.close()
        self._clients.clear()
