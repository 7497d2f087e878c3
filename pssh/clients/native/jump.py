"""Jump hosts for the gevent client: hop connections shared by every target behind them.

A target behind jump hosts connects over a tunnel: a direct-tcpip channel on the
last hop's session, relayed by the core to one end of a socket pair whose other
end the target's session runs over (:func:`pssh.core.forwarding.open_tunnel`; no
threads, no listening sockets). Each hop is connected and logged in by the core's
sequence (:func:`pssh.core.establish.establish`, as ``pssh.aio``'s hops are), with
the hop's own settings (:meth:`pssh.core.settings.Resolved.jump_options`, its user
and port, its ssh config entry); every target behind the same chain shares one
connection per hop (:class:`JumpHosts`, the core's :class:`~pssh.core.jump.JumpChain`).
"""
from __future__ import annotations

from typing import Optional, Sequence

from pssh.core.auth import Credentials
from pssh.core.establish import establish
from pssh.core.jump import Hop, JumpChain
from pssh.core.link import Link
from pssh.core.settings import ConnectOptions
from pssh.core.waits import Procedure
from pssh.ssh_config import SSHConfig
from ssh2.session import Session


class JumpHosts(JumpChain):
    """Hop connections (:class:`~pssh.core.link.Link`), shared; a failed hop is
    forgotten, a closed one made again."""

    def chain_links(self, hops: Sequence[Hop], options: ConnectOptions,
                    ssh_config: Optional[SSHConfig]) -> Procedure[Link]:
        """The connection of the last of ``hops``, each reached through the one before;
        ``options``: the hops' settings under their own user and port, and
        ``ssh_config`` for each hop's entry. (:meth:`JumpChain.chain` with this front
        end's settings: named apart, as it takes other arguments.)"""
        def make(hop: Hop, via: Optional[Link]) -> Procedure[Link]:
            user, host, port = hop
            resolved = ConnectOptions(user=user, port=port).over(options).resolve(
                host, ssh_config)
            return establish(host, resolved, Credentials.of(resolved), Session, via)
        return super().chain(hops, make)


__all__ = ["JumpHosts"]
