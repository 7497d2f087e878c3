"""Bytes both ways between an SSH channel and a local socket, on the hub.

Used by jump-host tunnels (a direct-tcpip channel and one end of a socket
pair) and by agent forwarding (an agent channel the server opened and a
connection to the local agent). Two greenlets, no threads: the channel side
waits on its session's socket like every other channel of that session.
"""
from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Callable, Optional

import gevent

from pssh import exceptions as exc
from pssh.clients.reader import ChannelReader
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:
    from pssh.driver import SessionDriver

log = logging.getLogger("pssh.relay")

CHUNK = 65536
_ENDED = (OSError, ssh2_exc.SSH2Error, exc.PSSHError)


class Relay:
    """Copy ``sock`` to ``channel`` and ``channel`` to ``sock`` until both ends finish.

    When both directions are done the channel is closed and ``on_end`` (if
    any) is called with the relay.
    """

    def __init__(self, driver: "SessionDriver", channel, sock: socket.socket, name: str,
                 on_end: Optional[Callable[["Relay"], None]] = None) -> None:
        self.driver = driver
        self.name = name
        self.reader = ChannelReader(driver, channel)
        self.reader.auto_finish = False
        self.sock = sock
        self._on_end = on_end
        self._greenlets = [gevent.spawn(self._upstream), gevent.spawn(self._downstream)]
        gevent.spawn(self._finish)

    def _upstream(self) -> None:
        try:
            while True:
                data = self.sock.recv(CHUNK)
                if not data:
                    break
                self.reader.write(data)
            self.reader.send_eof()
        except _ENDED as err:
            log.debug("%s: %s ended sending: %s", self.driver.host, self.name, err)
            self.sock.close()

    def _downstream(self) -> None:
        try:
            for data in self.reader.stdout:
                self.sock.sendall(data)
            self.sock.shutdown(socket.SHUT_WR)
        except _ENDED as err:
            log.debug("%s: %s ended receiving: %s", self.driver.host, self.name, err)
            self.sock.close()

    def _finish(self) -> None:
        gevent.joinall(self._greenlets)
        self.sock.close()
        if self.driver.session is not None:
            try:
                self.reader.finish()
            except _ENDED as err:
                log.debug("%s: closing %s: %s", self.driver.host, self.name, err)
        if self._on_end is not None:
            self._on_end(self)

    def close(self) -> None:
        """Stop moving bytes and close the local socket (the channel goes with the session)."""
        gevent.killall(self._greenlets, block=False)
        self.sock.close()
