"""One persistent SSH connection per host, reused for every poll (a channel per check run).

A :class:`HostSession` keeps one host's connection and what goes with it: the lock by
which the host's checks take turns on it, connecting when a poll needs a connection
(bounded by the connect timeout, not part of the poll's response time), and after a
failed or lost connection an exponential backoff with jitter before the next attempt;
until then the host's polls say "down" at once instead of waiting.

Everything here is a procedure of the core (:mod:`pssh.core.waits`): the poller drives
it on gevent in production and on a virtual clock in tests
(:class:`pssh.runners.virtual.VirtualRunner`), against the same sshd.

The connection comes from a *connector*. The default, :func:`connect_ssh`, is the core's
whole sequence (:func:`pssh.core.establish.establish`), so the OpenSSH client config,
known_hosts verification, keys, the agent, jump hosts and keepalives
(``keepalive_seconds``, ``keepalive_count_max``) work as for ``pssh run``; its
:class:`SSHConnection` runs each command on a new channel. A command that misses its
deadline is killed and its channel closed; if the server does not even manage that
within :data:`CLOSE_GRACE` (a hung host), the whole connection is dropped and made
anew by a later poll. A connector of one's own (``Poller(connector=...)``) stands in
for SSH: a test scripts its hosts' answers with one.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Protocol, Union

from pssh import exceptions as exc
from pssh.core import clock
from pssh.core.auth import Credentials
from pssh.core.cancel import kill_connection_script
from pssh.core.commands import start_command
from pssh.core.deadlines import remaining
from pssh.core.establish import establish
from pssh.core.jump import Hop, JumpChain, route
from pssh.core.link import Link
from pssh.core.streams import CommandStreams
from pssh.core.waits import Procedure, Turnstile
from pssh.options import ConnectOptions, Resolved
from pssh.ssh_config import SSHConfig
from ssh2 import exceptions as ssh2_exc
from ssh2.session import Session

log = logging.getLogger("pssh.poll.sessions")

#: Bytes of a command's standard output kept (the rest is read and dropped), and of its
#: standard error (the last ones): a runaway command cannot fill the poller's memory.
MAX_OUTPUT = 1 << 20

#: Seconds the server gets to stop a command that missed its deadline (SIGKILL to the
#: command's processes, then its channel's close) before its connection counts as hung
#: and is dropped. A close alone is not enough: sshd answers it only once the command
#: has ended, and the command would go on running after the poll.
CLOSE_GRACE = 2.0

#: What libssh2 raises when the connection itself is gone (besides our own errors).
_GONE = (exc.ConnectionError, exc.SessionError, OSError, ssh2_exc.SocketRecvError,
         ssh2_exc.SocketSendError, ssh2_exc.SocketDisconnectError)


class HostDown(exc.ConnectionError):
    """No connection to the host (connecting failed, the connection was lost, or a
    reconnection is not due yet); names the host, port and cause."""


class PollTimeout(exc.Timeout):
    """The command did not end within the poll's deadline."""


class _NotStarted(Exception):
    """The connection failed before the command started (the cause is chained)."""


@dataclass(frozen=True)
class CommandOutput:
    """How one check's command ended."""

    exit_code: Optional[int]
    stdout: str
    stderr: str
    response_time: float


class Connection(Protocol):
    """What a :class:`HostSession` needs of a connection: an :class:`SSHConnection`, or a
    test's scripted one."""

    @property
    def lost(self) -> Optional[str]:
        """None while the connection can serve polls; else why not (it is closed then)."""

    def run(self, command: str, timeout: float, encoding: str) -> Procedure[CommandOutput]:
        """Run ``command`` to its end within ``timeout`` seconds: its output.
        :class:`PollTimeout` past the deadline (the command stopped),
        :class:`HostDown` when the connection was lost meanwhile."""

    def close(self) -> None:
        """Close it now, without waiting."""


#: Makes a host's connection: ``connector(session)`` is a procedure that returns a
#: :class:`Connection` to ``session.host``, or raises (the error says why) when it cannot.
Connector = Callable[["HostSession"], Procedure[Connection]]


class Backoff:
    """Delays between connection attempts: ``base * 2**(failures-1)`` capped at
    ``maximum``, each drawn uniformly from [half, all] of that (jitter, so a fleet that
    lost its connections at once does not come back at once)."""

    def __init__(self, base: float = 1.0, maximum: float = 60.0,
                 rng: Callable[[], float] = random.random) -> None:
        if base <= 0 or maximum < base:
            raise ValueError(f"backoff needs 0 < base <= maximum, not {base}, {maximum}")
        self.base = base
        self.maximum = maximum
        self.failures = 0
        self._rng = rng

    def next_delay(self) -> float:
        """Count one more failure; the seconds to wait before the next attempt."""
        self.failures += 1
        full = min(self.maximum, self.base * 2 ** min(self.failures - 1, 30))
        return full * (0.5 + self._rng() / 2)

    def reset(self) -> None:
        self.failures = 0


def reason_of(err: BaseException) -> str:
    """What went wrong, without the ``host:port:`` our errors lead with."""
    return err.reason if isinstance(err, exc.PSSHError) else str(err) or type(err).__name__


class HostSession:
    """The connection to one host and the lock that keeps one poll in flight on it.

    ``options`` are the host's settings (as the parallel client layers them),
    ``ssh_config`` the parsed OpenSSH client config (``False`` or None: none), ``jumps``
    the jump host connections shared by the hosts behind them (default: this host's
    own), ``backoff`` the delays between failed connection attempts, ``connector`` what
    makes a connection (default :func:`connect_ssh`).
    """

    def __init__(self, host: str, options: ConnectOptions, *,
                 ssh_config: Union[SSHConfig, Literal[False], None] = None,
                 jumps: Optional[JumpChain] = None, backoff: Optional[Backoff] = None,
                 connector: Optional[Connector] = None) -> None:
        self.host = host
        self.options = options
        self.ssh_config: Optional[SSHConfig] = ssh_config or None
        self.jumps = jumps if jumps is not None else JumpChain()
        self._own_jumps = jumps is None
        # The port as the ssh config makes it (results name it before any connection).
        self.port = options.resolve(host, self.ssh_config).port
        self.backoff = backoff or Backoff()
        #: Held by the poll in flight: the host's other checks wait their turn.
        self.lock = Turnstile()
        self.connection: Optional[Connection] = None
        self.connects = 0
        self.last_error: Optional[str] = None
        self._connector: Connector = connector or connect_ssh
        self._next_attempt = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self.connection is not None and self.connection.lost is None

    def _where(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connecting --------------------------------------------------------------------

    def connect(self) -> Procedure[Connection]:
        """The connection: the current one, or a new one when it is due
        (:class:`HostDown` otherwise, or when connecting fails)."""
        connection = self.connection
        if connection is not None and connection.lost is None:
            return connection
        self._drop()
        if self._closed:
            raise HostDown.at(self.host, self.port, "the poller is closed")
        wait = self._next_attempt - clock.now()
        if wait > 0:
            raise HostDown.at(self.host, self.port,
                              f"{self.last_error}; next connection attempt in {wait:.1f} s")
        try:
            connection = yield from self._connector(self)
        except Exception as err:
            reason = reason_of(err)
            if not reason.startswith("cannot connect"):
                reason = f"cannot connect: {reason}"
            self._failed(reason)
            raise HostDown.at(self.host, self.port, reason) from err
        if self._closed:  # closed while connecting
            connection.close()
            raise HostDown.at(self.host, self.port, "the poller is closed")
        self.connection = connection
        self.connects += 1
        self.backoff.reset()
        self._next_attempt = 0.0
        log.info("%s: connected (connection %d)", self._where(), self.connects)
        return connection

    def _failed(self, reason: str) -> None:
        """The connection failed or was lost: drop it, wait before trying again."""
        self._drop()
        self.last_error = reason
        delay = self.backoff.next_delay()
        self._next_attempt = clock.now() + delay
        # Every poll of a host that is down says why (PollResult.error), and pssh poll
        # shows the first of each kind: a warning per attempt would repeat it for hours.
        log.info("%s: %s; next connection attempt in %.1f s", self._where(), reason, delay)

    def lost(self, reason: str) -> None:
        """The connection that worked is lost (a poll found it dead or hung): drop it; the
        first attempt to connect again may be made at once (the backoff starts when
        that fails)."""
        self._drop()
        self.last_error = reason
        self._next_attempt = 0.0
        log.warning("%s: %s", self._where(), reason)

    def _drop(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            try:
                connection.close()  # says goodbye without waiting for the server
            except Exception as err:
                log.debug("%s: closing: %s", self._where(), err)

    # -- running -----------------------------------------------------------------------

    def run(self, command: str, timeout: float, encoding: str = "utf-8"
            ) -> Procedure[CommandOutput]:
        """Run ``command`` on the connection, to its end, within ``timeout`` seconds (from
        when it is started; connecting comes first and is not counted). :class:`HostDown`
        without a connection, :class:`PollTimeout` past the deadline. Call with
        :attr:`lock` held."""
        for last_try in (False, True):
            connection = yield from self.connect()
            try:
                return (yield from connection.run(command, timeout, encoding))
            except _NotStarted as err:
                # The connection died before the command started (a server restarted since
                # the last poll, say): nothing ran, so one new connection may try again now.
                reason = f"connection lost: {reason_of(err.__cause__ or err)}"
                self.lost(reason)
                if last_try:
                    raise HostDown.at(self.host, self.port, reason) from err.__cause__
            except Exception:
                why = connection.lost
                if why is not None and connection is self.connection:
                    self.lost(why)
                raise
        raise AssertionError("unreachable: the last try returns or raises")

    def close(self) -> None:
        """Close the connection now; no new one is made afterwards."""
        self._closed = True
        self._drop()
        if self._own_jumps:
            self.jumps.close()


# -- SSH ---------------------------------------------------------------------------------

def connect_ssh(session: HostSession) -> Procedure["SSHConnection"]:
    """The default connector: the core's whole sequence to ``session.host`` with its
    settings and ssh config (through its jump hosts, shared in ``session.jumps``)."""
    resolved = session.options.resolve(session.host, session.ssh_config)
    via = None
    if resolved.jump_hops:
        via = yield from _last_hop(session, resolved)
    link = yield from establish(session.host, resolved, Credentials.of(resolved), Session, via)
    return SSHConnection(link)


def _last_hop(session: HostSession, resolved: Resolved) -> Procedure[Link]:
    """The connection of the host's last jump host, each hop logged in with the jump
    settings (:meth:`~pssh.options.Resolved.jump_options`) and its own ssh config entry."""
    hop_options = resolved.jump_options()

    def make(hop: Hop, via: Optional[Link]) -> Procedure[Link]:
        user, name, port = hop
        hop_resolved = ConnectOptions.of({"user": user, "port": port}).over(
            hop_options).resolve(name, session.ssh_config)
        return establish(name, hop_resolved, Credentials.of(hop_resolved), Session, via)

    try:
        return (yield from session.jumps.chain(resolved.jump_hops, make))
    except Exception as err:
        raise exc.ProxyError("%s:%s: jump host %s failed: %s", session.host, resolved.port,
                             route(resolved.jump_hops), err, host=session.host,
                             port=resolved.port) from err


class _Kept:
    """A stream's buffer (:class:`pssh.core.streams.Buffer`) that keeps
    :data:`MAX_OUTPUT` bytes of it, the first ones or (``tail``) the last; the rest is
    read and dropped, so that a runaway command cannot fill the poller's memory."""

    __slots__ = ("tail", "data", "size", "ended")

    def __init__(self, tail: bool) -> None:
        self.tail = tail
        self.data = bytearray()
        self.size = 0
        self.ended = False

    def append(self, data: bytes) -> None:
        self.size += len(data)
        if self.tail:
            self.data += data
            if len(self.data) > 2 * MAX_OUTPUT:  # cut now and then, not on every chunk
                del self.data[:-MAX_OUTPUT]
        elif len(self.data) < MAX_OUTPUT:
            self.data += data[:MAX_OUTPUT - len(self.data)]

    def end(self) -> None:
        self.ended = True

    def has_data(self) -> bool:
        return bool(self.data)

    def held(self) -> int:
        return len(self.data)

    def take(self) -> bytes:
        data = bytes(self.data[-MAX_OUTPUT:] if self.tail else self.data)
        if self.size > MAX_OUTPUT:
            log.debug("output of %d bytes cut to %d", self.size, MAX_OUTPUT)
        self.data.clear()
        return data


def _read_to_end(streams: CommandStreams, deadline: float) -> Procedure[None]:
    """Read both streams to their end, then close the channel (keeping the exit status),
    all by ``deadline`` (a Timeout after it). The close is bounded too, unlike
    :meth:`~pssh.core.streams.CommandStreams.wait_eof`'s: a server that hangs just
    after the command's output ended must not hold the poll past its deadline."""
    link = streams.link
    while not streams.at_eof:
        if clock.now() >= deadline:
            raise exc.Timeout.at(link.host, link.port, "command still running")
        yield from streams.read_or_wait(remaining(deadline))
        yield from link.turn()
    yield from streams.finish(remaining(deadline))


class SSHConnection:
    """A logged-in SSH connection (the core's :class:`~pssh.core.link.Link`) that runs
    one command at a time, each on a channel of its own."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self._lost: Optional[str] = None

    @property
    def lost(self) -> Optional[str]:
        if self._lost is None and self.link.closed:
            # Closed underneath: keepalives found the server gone, say.
            cause = self.link.lost
            self._lost = reason_of(cause) if cause is not None else "the connection is closed"
        return self._lost

    def _lose(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        self.link.close()

    def close(self) -> None:
        self._lose("the connection is closed")

    def run(self, command: str, timeout: float, encoding: str) -> Procedure[CommandOutput]:
        """See :meth:`Connection.run`; ``_NotStarted`` when the connection failed before
        the command started (nothing ran: the session may try once more)."""
        link = self.link
        host, port = link.host, link.port
        started = clock.now()
        deadline = started + timeout
        # Each request (opening the channel, starting the command) within the settings'
        # request limit, and all of it within the poll's deadline.
        limit = timeout if link.timeout is None else min(link.timeout, timeout)
        out, err = _Kept(tail=False), _Kept(tail=True)
        streams: Optional[CommandStreams] = None
        try:
            channel = yield from start_command(link, command.encode(encoding), timeout=limit)
            streams = CommandStreams(link, channel, out, err)
            yield from _read_to_end(streams, deadline)
        except exc.Timeout as error:
            if clock.now() >= deadline:
                if streams is None:
                    self._lose("no answer to starting the command")
                else:
                    yield from self._abandon(streams)
                raise PollTimeout.at(host, port, f"no answer within {timeout:g} s") from None
            # A request limit (the settings' request_timeout) ran out before the poll's
            # deadline: the host is slow, not gone; the poll is a timeout (one bucket down),
            # not a host down. A half-opened channel goes with its connection (made anew by
            # the next poll); a started command's channel is closed as at the deadline.
            if link.closed:
                reason = f"connection lost: {reason_of(error)}"
                self._lose(reason)
                raise HostDown.at(host, port, reason) from error
            if streams is None:
                self._lose(f"starting the command: {reason_of(error)}")
            else:
                yield from self._abandon(streams)
            raise PollTimeout.at(host, port, reason_of(error)) from error
        except Exception as error:
            if not (isinstance(error, _GONE) or link.closed):
                if streams is not None:
                    yield from self._abandon(streams)   # no channel left open on the session
                raise
            if streams is None:
                raise _NotStarted() from error
            reason = f"connection lost: {reason_of(error)}"
            self._lose(reason)
            raise HostDown.at(host, port, reason) from error
        return CommandOutput(streams.exit_code, out.take().decode(encoding, "replace"),
                             err.take().decode(encoding, "replace"), clock.now() - started)

    def _abandon(self, streams: CommandStreams) -> Procedure[None]:
        """A command missed its deadline: kill it (every process of this connection, whose
        polls take turns) and close its channel, so that the connection can serve the next
        poll. A server that has not done so within :data:`CLOSE_GRACE` (a hung host,
        or a process that SIGKILL cannot end, such as one stuck on a dead NFS mount) loses
        its connection: the next poll makes a new one."""
        link = self.link
        if link.closed:
            return   # lost meanwhile: ``lost`` says why
        limit = clock.now() + 2 * CLOSE_GRACE
        killed = False
        try:
            # The only command on this connection: its processes are the connection's.
            killer = yield from start_command(link, kill_connection_script("KILL").encode(),
                                              timeout=2 * CLOSE_GRACE)
            yield from _read_to_end(CommandStreams(link, killer), limit)
            killed = True
            try:  # a server without /proc may still take the signal request
                yield from link.call(streams.channel.signal, "KILL",
                                     timeout=remaining(limit), what="sending a signal")
            except ssh2_exc.SSH2Error as error:
                log.debug("%s: signal request failed: %s", link.host, error)
            yield from _read_to_end(streams, min(limit, clock.now() + CLOSE_GRACE))
        except exc.Timeout:
            if killed and clock.now() < limit:
                self._lose(f"the command outlived SIGKILL for {CLOSE_GRACE:g} s")
            else:
                self._lose(f"no answer within {2 * CLOSE_GRACE:g} s to stopping a command")
        except Exception as error:
            self._lose(f"stopping a command failed: {reason_of(error)}")


__all__ = ["Backoff", "CLOSE_GRACE", "CommandOutput", "Connection", "Connector", "HostDown",
           "HostSession", "MAX_OUTPUT", "PollTimeout", "SSHConnection", "connect_ssh",
           "reason_of"]
