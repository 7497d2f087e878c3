"""Jump hosts for the gevent client: hop clients shared by every target behind them.

A target behind jump hosts connects over a tunnel: a direct-tcpip channel on the
last hop's session, relayed by the core to one end of a socket pair whose other
end the target's session runs over (:func:`pssh.core.forwarding.open_tunnel`; no
threads, no listening sockets). Every target behind the same chain shares one
:class:`~pssh.clients.native.single.SSHClient` per hop (:class:`JumpHosts`, the
core's :class:`~pssh.core.jump.JumpChain`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from pssh.clients.base.single import in_greenlet
from pssh.core.jump import Hop, JumpChain
from pssh.core.waits import Procedure

if TYPE_CHECKING:
    from pssh.clients.native.single import SSHClient


class JumpHosts(JumpChain):
    """Hop clients made by ``factory`` (the client class), shared; a failed hop is
    forgotten, a closed one made again."""

    def __init__(self, factory: Callable[..., "SSHClient"]) -> None:
        super().__init__()
        self._factory = factory

    def chain_clients(self, hops: Sequence[Hop], **settings) -> Procedure["SSHClient"]:
        """The client of the last of ``hops``, each reached through the one before;
        ``settings``: the keyword arguments of each hop's client. (:meth:`JumpChain.chain`
        with this client's way of making a hop: named apart, as it takes other arguments.)"""
        def make(hop: Hop, via) -> Procedure["SSHClient"]:
            user, host, port = hop
            # A client connects in its constructor, waiting in this greenlet.
            return in_greenlet(self._factory, host, user=user, port=port, _via=via,
                               **settings)
        return super().chain(hops, make)
