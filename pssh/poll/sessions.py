"""One persistent SSH connection per host, reused for every poll (a channel per check run).

A :class:`HostSession` connects with the public gevent client
(:class:`pssh.clients.SSHClient`), so the OpenSSH client config, known_hosts
verification, keys, the agent and jump hosts work exactly as for ``pssh run``;
keepalives are the client's (``keepalive_seconds``, ``keepalive_count_max``).

Connecting happens in the host's own poll (bounded by the connect timeout, not part of
the poll's response time). A failed or lost connection is tried again after an
exponential backoff with jitter; until then the host's polls say "down" at once
instead of waiting. A command that misses its deadline has its channel closed; if the
server does not even answer that close within a short grace, the whole connection is
dropped (a hung host) and made anew by a later poll.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Union

import gevent
from gevent.lock import Semaphore

from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.clients.native.jump import JumpHosts
from pssh.core.cancel import kill_connection_script
from pssh.options import ConnectOptions
from pssh.ssh_config import SSHConfig

log = logging.getLogger("pssh.poll.sessions")

#: Bytes of a command's standard output kept (the rest is read and dropped), and of its
#: standard error (the last ones): a runaway command cannot fill the poller's memory.
MAX_OUTPUT = 1 << 20

#: Seconds the server gets to stop a command that missed its deadline (SIGKILL to the
#: command's processes, then its channel's close) before its connection counts as hung
#: and is dropped. A close alone is not enough: sshd answers it only once the command
#: has ended, and the command would go on running after the poll.
CLOSE_GRACE = 2.0


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


def _read_capped(chunks) -> bytes:
    """The first :data:`MAX_OUTPUT` bytes of a stream, read to its end."""
    kept, size = [], 0
    for chunk in chunks:
        if size < MAX_OUTPUT:
            kept.append(chunk[:MAX_OUTPUT - size])
        size += len(chunk)
    if size > MAX_OUTPUT:
        log.debug("output of %d bytes cut to %d", size, MAX_OUTPUT)
    return b"".join(kept)


def _read_tail(chunks) -> bytes:
    """The last :data:`MAX_OUTPUT` bytes of a stream, read to its end as it comes (a
    command flooding its standard error is not held in memory whole)."""
    tail = bytearray()
    for chunk in chunks:
        tail += chunk
        if len(tail) > 2 * MAX_OUTPUT:
            del tail[:-MAX_OUTPUT]
    return bytes(tail[-MAX_OUTPUT:])


class HostSession:
    """The connection to one host and the lock that keeps one poll in flight on it.

    ``options`` are the host's settings (as the parallel client layers them),
    ``ssh_config`` the parsed OpenSSH client config (``False``: none), ``jumps`` the jump
    host sessions shared by the hosts behind them.
    """

    def __init__(self, host: str, options: ConnectOptions, *,
                 ssh_config: Union[SSHConfig, Literal[False], None] = None,
                 jumps: Optional[JumpHosts] = None, backoff: Optional[Backoff] = None) -> None:
        self.host = host
        self.options = options
        self._ssh_config = ssh_config
        self._jumps = jumps
        # The port as the ssh config makes it (results name it before any connection).
        self.port = options.resolve(host, ssh_config or None).port
        self.backoff = backoff or Backoff()
        self.lock = Semaphore()
        self.client: Optional[SSHClient] = None
        self.connects = 0
        self.last_error: Optional[str] = None
        self._next_attempt = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.session is not None

    def _where(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connecting --------------------------------------------------------------------

    def connect(self) -> SSHClient:
        """The connected client: the current one, or a new connection when it is due
        (:class:`HostDown` otherwise, or when connecting fails)."""
        if self.client is not None and self.connected:
            return self.client
        self._drop()
        if self._closed:
            raise HostDown.at(self.host, self.port, "the poller is closed")
        wait = self._next_attempt - time.monotonic()
        if wait > 0:
            raise HostDown.at(self.host, self.port,
                              f"{self.last_error}; next connection attempt in {wait:.1f} s")
        try:
            client = SSHClient(self.host, ssh_config=self._ssh_config or False,
                               _jump_hosts=self._jumps, _options=self.options)
        except Exception as err:
            reason = reason_of(err)
            if not reason.startswith("cannot connect"):
                reason = f"cannot connect: {reason}"
            self._failed(reason)
            raise HostDown.at(self.host, self.port, reason) from err
        if self._closed:  # closed while connecting
            client.close()
            raise HostDown.at(self.host, self.port, "the poller is closed")
        self.client, self.port = client, client.port
        self.connects += 1
        self.backoff.reset()
        self._next_attempt = 0.0
        log.info("%s: connected (connection %d)", self._where(), self.connects)
        return client

    def _failed(self, reason: str) -> None:
        """The connection failed or was lost: drop it, wait before trying again."""
        self._drop()
        self.last_error = reason
        delay = self.backoff.next_delay()
        self._next_attempt = time.monotonic() + delay
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
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()  # says goodbye without waiting for the server
            except Exception as err:
                log.debug("%s: closing: %s", self._where(), err)

    # -- running -----------------------------------------------------------------------

    def run(self, command: str, deadline: float, encoding: str = "utf-8") -> CommandOutput:
        """Run ``command`` on a new channel of the connection, to its end, within
        ``deadline`` seconds (from when it is started; connecting comes first and is not
        counted). :class:`HostDown` without a connection, :class:`PollTimeout` past the
        deadline. Call with :attr:`lock` held."""
        client = self.connect()
        try:
            return self._run_on(client, command, deadline, encoding)
        except _NotStarted as err:
            # The connection died before the command started (a server restarted since
            # the last poll, say): nothing ran, so one new connection may try again now.
            self.lost(f"connection lost: {reason_of(err.__cause__ or err)}")
        client = self.connect()
        try:
            return self._run_on(client, command, deadline, encoding)
        except _NotStarted as err:
            reason = f"connection lost: {reason_of(err.__cause__ or err)}"
            self.lost(reason)
            raise HostDown.at(self.host, self.port, reason) from err.__cause__

    def _run_on(self, client: SSHClient, command: str, deadline: float,
                encoding: str) -> CommandOutput:
        started = time.monotonic()
        timer = gevent.Timeout(deadline)
        timer.start()
        output = stderr_tail = None
        try:
            output = client.run_command(command, encoding=encoding)
            stderr_tail = gevent.spawn(_read_tail, output.buffers.stderr.rw_buffer.chunks())
            stdout = _read_capped(output.buffers.stdout.rw_buffer.chunks())
            client.wait_finished(output)
            stderr = stderr_tail.get()
            exit_code = output.exit_code
        except gevent.Timeout as fired:
            if fired is not timer:
                raise
            self._abandon(client, output)
            raise PollTimeout.at(self.host, self.port,
                                 f"no answer within {deadline:g} s") from None
        except exc.Timeout as err:
            # A request limit (the settings' request_timeout) ran out before the poll's
            # deadline: the host is slow, not gone; the poll is a timeout (one bucket down),
            # not a host down. A half-opened channel goes with its connection (made anew by
            # the next poll); a started command's channel is closed as at the deadline.
            if not self.connected:
                reason = f"connection lost: {reason_of(err)}"
                self.lost(reason)
                raise HostDown.at(self.host, self.port, reason) from err
            if output is None:
                self.lost(f"starting the command: {reason_of(err)}")
            else:
                self._abandon(client, output)
            raise PollTimeout.at(self.host, self.port, reason_of(err)) from err
        except Exception as err:
            gone = isinstance(err, (exc.ConnectionError, exc.SessionError, OSError)) \
                or not self.connected
            if not gone:
                if output is not None:
                    self._abandon(client, output)   # no channel left open on the session
                raise
            if output is None:
                raise _NotStarted() from err
            reason = f"connection lost: {reason_of(err)}"
            self.lost(reason)
            raise HostDown.at(self.host, self.port, reason) from err
        finally:
            timer.close()
            if stderr_tail is not None:
                stderr_tail.kill(block=False)   # done already, unless the poll failed
        return CommandOutput(exit_code, stdout.decode(encoding, "replace"),
                             stderr.decode(encoding, "replace"), time.monotonic() - started)

    def _abandon(self, client: SSHClient, output) -> None:
        """A command missed its deadline: kill it (every process of this connection, whose
        polls take turns) and close its channel, so that the connection can serve the next
        poll. A server that has not done so within :data:`CLOSE_GRACE` (a hung host,
        or a process that SIGKILL cannot end, such as one stuck on a dead NFS mount) loses
        its connection: the next poll makes a new one."""
        if output is None or not self.connected:
            self.lost("no answer to starting the command")
            return
        try:
            with gevent.Timeout(2 * CLOSE_GRACE):
                # The only command on this connection: its processes are the connection's.
                killer = client.run_command(kill_connection_script("KILL"))
                client.wait_finished(killer)
                client.cancel(output, "KILL", timeout=CLOSE_GRACE)
        except gevent.Timeout:
            self.lost(f"no answer within {2 * CLOSE_GRACE:g} s to stopping a command")
        except Exception as err:
            self.lost(f"stopping a command failed: {reason_of(err)}")
        else:
            if not output.channel.eof():
                self.lost(f"the command outlived SIGKILL for {CLOSE_GRACE:g} s")

    def close(self) -> None:
        """Close the connection now; no new one is made afterwards."""
        self._closed = True
        self._drop()


__all__ = ["Backoff", "CLOSE_GRACE", "CommandOutput", "HostDown", "HostSession", "reason_of",
           "PollTimeout"]
