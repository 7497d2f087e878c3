"""Agent forwarding: programs on the remote host use the local SSH agent.

``request`` asks sshd for forwarding on a channel before its command starts;
sshd then gives the command an ``SSH_AUTH_SOCK``, and each connection a
remote program makes to it arrives here as an agent channel the server
opens. The bindings queue those channels; :meth:`AgentForwarder.poll`, run
by the client before every wait on the socket, connects each one to the
local agent and relays the bytes. Keys never leave the local agent: only its
requests and answers (key lists, signatures) cross the connection.
"""
from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Set

from gevent import socket as gsocket

from pssh.clients.native.relay import Relay
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:
    from pssh.driver import SessionDriver

log = logging.getLogger("pssh.agent")


class AgentForwarder:
    """Relays the agent channels of one session to the agent at ``agent_path``."""

    def __init__(self, driver: "SessionDriver", agent_path: str) -> None:
        self.driver = driver
        self.agent_path = agent_path
        self._relays: Set[Relay] = set()
        driver.session.accept_agent_forwarding()
        driver.before_wait.append(self.poll)

    def request(self, channel) -> None:
        """Ask for forwarding on ``channel``; a refusal is logged and the command still runs."""
        try:
            self.driver.eagain(channel.request_auth_agent, what="requesting agent forwarding")
        except ssh2_exc.SSH2Error as err:
            log.warning("%s: the server refused agent forwarding (%s); the command runs "
                        "without it", self.driver.host, err.message or type(err).__name__)

    def poll(self) -> None:
        """Start relaying every agent channel the server has opened so far; never waits."""
        while True:
            channel = self.driver.session.accept_agent_channel()
            if channel is None:
                return
            sock = gsocket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.agent_path)
            except OSError as err:
                sock.close()
                # Dropping the channel closes it: the remote program sees
                # "agent refused operation"-style failure, not a hang.
                log.warning("%s: cannot reach the local SSH agent at %s: %s", self.driver.host,
                            self.agent_path, err.strerror or err)
                continue
            log.debug("%s: relaying a forwarded agent connection", self.driver.host)
            self._relays.add(Relay(self.driver, channel, sock, "forwarded agent connection",
                                   on_end=self._relays.discard))

    def close(self) -> None:
        if self.poll in self.driver.before_wait:
            self.driver.before_wait.remove(self.poll)
        for relay in tuple(self._relays):
            relay.close()
        self._relays.clear()
