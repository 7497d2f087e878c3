"""``connect()`` and :class:`SSHClientConnection`: one host on the running asyncio loop.

Settings resolve as for the gevent client (:class:`pssh.options.ConnectOptions`:
arguments, then the OpenSSH client config, then the defaults), the host key is
checked against known_hosts with the same code and policies, and every libssh2
call, the handshake and logins included, waits through
:class:`~pssh.aio.driver.AsyncSessionDriver`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Optional, Sequence, Union

from pssh import exceptions as exc
from pssh.aio.awaitable import AwaitableContext
from pssh.aio.driver import AsyncSessionDriver, deadline_after, remaining
from pssh.aio.exceptions import HostKeyNotVerifiable, PermissionDenied, ProcessError
from pssh.aio.process import ChannelStreams, SSHClientProcess, SSHCompletedProcess
from pssh.cancel import kill_script, new_marker, with_marker
from pssh.keys import inspect_key, inspect_key_file
from pssh.known_hosts import verify_host_key
from pssh.login import (accepted, agent_attempts, disconnect_agent, key_data_attempt,
                        key_errors, key_file_attempts, password_attempt, prepare_session)
from pssh.options import ConnectOptions, ssh_config_of
from pssh.ssh_config import SSHConfig
from ssh2 import exceptions as ssh2_exc
from ssh2.session import Session

log = logging.getLogger("pssh.aio")

#: Key files tried when no ``client_keys`` are given, unless the ssh config names some.
DEFAULT_IDENTITIES = tuple(os.path.expanduser(os.path.join("~", ".ssh", name))
                           for name in ("id_ed25519", "id_ecdsa", "id_rsa"))

#: Seconds allowed for signalling a command that is being stopped.
STOP_TIMEOUT = 10.0

Key = Union[str, bytes]
Algorithms = Union[str, Sequence[str], None]
_NOT_GIVEN = object()


def connect(host: str, port: Optional[int] = None, *, username: Optional[str] = None,
            client_keys: Optional[Sequence[Key]] = None, password: Optional[str] = None,
            passphrase: Optional[str] = None, known_hosts=_NOT_GIVEN,
            host_key_policy: Optional[str] = None, connect_timeout: Optional[float] = None,
            timeout: Optional[float] = None, agent_path=_NOT_GIVEN,
            ssh_config: Union[str, SSHConfig, bool, None] = None,
            compress: Optional[bool] = None,
            tunnel: Optional["SSHClientConnection"] = None,
            keepalive_interval: Optional[int] = None,
            keepalive_count_max: Optional[int] = None,
            agent_forwarding: Optional[bool] = None,
            encryption_algs: Algorithms = None, mac_algs: Algorithms = None,
            kex_algs: Algorithms = None) -> AwaitableContext:
    """Connect to ``host``, check its host key, log in; ``await`` it or ``async with`` it.

    asyncssh's names: ``username``, ``client_keys`` (key file paths or key
    data; default: the agent, then ``~/.ssh/id_*``), ``passphrase``,
    ``password``, ``known_hosts`` (a file; ``None`` turns host key checking
    off, which is logged), ``connect_timeout`` (connection, handshake and login
    as a whole), ``agent_path`` (``None``: no agent). Ours as well:
    ``host_key_policy`` (``"accept-new"`` by default, ``"strict"``, ``"off"``),
    ``timeout`` (each later request as a whole), ``ssh_config``, ``compress``.
    ``tunnel``: an open connection to reach ``host`` through (a jump host, as
    asyncssh's ``tunnel=``); the host name is resolved by the jump host.
    ``keepalive_interval`` (seconds; 0: none) and ``keepalive_count_max``: a
    server silent for that many intervals is declared lost and every wait on
    the connection fails (default: ServerAliveInterval / ServerAliveCountMax of
    the ssh config, else the gevent client's defaults). ``agent_forwarding``: remote
    commands may use the local agent (``agent_path``, else ``SSH_AUTH_SOCK``; default: the
    ssh config's ForwardAgent). ``encryption_algs``, ``mac_algs``, ``kex_algs``:
    the algorithms to offer, in order (a list, or a string in OpenSSH's
    ``Ciphers`` syntax: ``"+aes128-cbc"`` adds to the default, ``"-chacha*"``
    removes, ``"^aes256-ctr"`` puts first); default: the ssh config's
    Ciphers / MACs / KexAlgorithms, else libssh2's (fastest cipher first).
    """
    policy = host_key_policy
    if known_hosts is None:
        policy = "off"
    options = ConnectOptions(
        user=username, port=port, password=password, passphrase=passphrase, timeout=timeout,
        known_hosts=None if known_hosts in (None, _NOT_GIVEN) else os.fspath(known_hosts),
        host_key_policy=policy, compress=compress,
        allow_agent=False if agent_path is None else None,
        keepalive_seconds=keepalive_interval, keepalive_count_max=keepalive_count_max,
        forward_ssh_agent=agent_forwarding, ciphers=_algorithms(encryption_algs),
        macs=_algorithms(mac_algs), kex_algorithms=_algorithms(kex_algs))
    return AwaitableContext(_connect(host, options, ssh_config, client_keys, connect_timeout,
                                      None if agent_path in (None, _NOT_GIVEN) else agent_path,
                                      tunnel))


def _algorithms(algs: Algorithms) -> Optional[str]:
    """asyncssh's algorithm lists (a sequence of names) in OpenSSH's comma syntax."""
    return algs if algs is None or isinstance(algs, str) else ",".join(algs)


async def _connect(host, options, ssh_config, client_keys, connect_timeout, agent_path, tunnel):
    resolved = options.resolve(host, ssh_config_of(ssh_config))
    # Every failure from here on concerns this host (a bad key file included).
    with exc.on_host(host, resolved.port):
        return await _connect_resolved(host, resolved, client_keys, connect_timeout,
                                       agent_path, tunnel)


async def _connect_resolved(host, resolved, client_keys, connect_timeout, agent_path, tunnel):
    limit = connect_timeout if connect_timeout is not None else resolved.connect_timeout
    deadline = deadline_after(limit)
    relay = None
    if tunnel is not None:
        from pssh.aio.forward import tunnel_socket
        sock, relay = await asyncio.wait_for(
            tunnel_socket(tunnel, resolved.hostname, resolved.port), limit)
    else:
        sock = await _open_socket(resolved.hostname, resolved.port, host, deadline)
    conn = SSHClientConnection(host, resolved, sock)
    conn._relay = relay
    try:
        await conn._start(deadline, client_keys, agent_path)
    except BaseException:
        conn.close()
        raise
    return conn


async def _open_socket(hostname: str, port: int, host: str, deadline: float) -> socket.socket:
    """A connected non-blocking TCP socket to ``hostname:port`` before ``deadline`` (which
    bounds resolving and every address tried, together)."""
    loop = asyncio.get_running_loop()
    limit = _left(deadline)
    try:
        try:
            # An IP address needs no resolver: no hop to the loop's executor thread.
            infos = socket.getaddrinfo(hostname, port, type=socket.SOCK_STREAM,
                                       proto=socket.IPPROTO_TCP, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(hostname, port, type=socket.SOCK_STREAM,
                                 proto=socket.IPPROTO_TCP), limit)
    except socket.gaierror as err:
        raise exc.UnknownHostError("cannot resolve host name %s: %s", hostname,
                                   err.strerror or err, host=host, port=port) from None
    except asyncio.TimeoutError:
        raise exc.ConnectTimeout.at(host, port, f"resolving took over {limit} s") from None
    refused = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, address), _left(deadline))
            return sock
        except ConnectionRefusedError as err:
            sock.close()
            refused = err
        except asyncio.TimeoutError:
            sock.close()
            raise exc.ConnectTimeout.at(host, port, f"cannot connect: no answer within "
                                                    f"{limit} s") from None
        except BaseException as err:
            sock.close()
            if isinstance(err, OSError):
                raise exc.ConnectionError.at(host, port, f"cannot connect: "
                                             f"{err.strerror or err}") from None
            raise
    raise exc.ConnectionRefused(refused.errno, refused.strerror, host, port)


class SSHClientConnection:
    """An authenticated SSH connection (asyncssh's name); from :func:`connect`."""

    def __init__(self, host: str, resolved, sock: socket.socket) -> None:
        self.host = host
        self.port = resolved.port
        self.username = resolved.user
        self._resolved = resolved
        self.session = Session()
        self.session.set_blocking(False)
        self._driver = AsyncSessionDriver(sock, self.session, host, self.port, resolved.timeout)
        self._driver.on_close.append(self.close)  # a lost server closes the connection too
        self._closed = asyncio.Event()
        self._relay: Optional[asyncio.Future] = None
        self._agent = None  # an AgentForwarder when agent_forwarding is on
        self._cleanups: set = set()  # tasks stopping remote commands

    # -- connecting --------------------------------------------------------------------

    async def _start(self, deadline, client_keys, agent_path) -> None:
        session, options = self.session, self._resolved.options
        prepare_session(session, self._resolved, self.host)
        await self._driver.eagain(session.handshake, self._driver.sock,
                                  timeout=_left(deadline), what="SSH handshake")
        try:
            verify_host_key(session, self._resolved.host_key_name, self.port,
                            options.host_key_policy, options.known_hosts)
        except exc.HostKeyError as err:
            raise HostKeyNotVerifiable(*err.args, host=err.host, port=err.port) from err
        await self._login(deadline, client_keys, agent_path)
        if options.keepalive_seconds:
            self._driver.start_keepalive(options.keepalive_seconds,
                                         options.keepalive_count_max or 0)
        if options.forward_ssh_agent:
            self._forward_agent(agent_path or os.environ.get("SSH_AUTH_SOCK"))

    def _forward_agent(self, agent_path: Optional[str]) -> None:
        if not agent_path:
            log.warning("%s: agent forwarding asked for, but there is no local SSH agent "
                        "(SSH_AUTH_SOCK is not set): not forwarding", self.host)
            return
        from pssh.aio.forward import AgentForwarder
        self._agent = AgentForwarder(self, agent_path)

    async def _login(self, deadline, client_keys, agent_path) -> None:
        """Keys given (and nothing else), else the agent, then the default identities;
        then the password. :class:`PermissionDenied` says what was tried."""
        tried = []
        options = self._resolved.options
        passphrase = options.passphrase or options.password or ""
        if client_keys is not None:
            keys = list(client_keys)
        else:
            keys = []
            if options.allow_agent and (agent_path or os.environ.get("SSH_AUTH_SOCK")):
                if await self._agent_login(deadline, agent_path, tried):
                    return
            keys = [path for path in (self._resolved.identity_files or DEFAULT_IDENTITIES)
                    if os.path.isfile(path)]
        for key in keys:
            if await self._key_login(key, passphrase, deadline, tried):
                return
        if options.password is not None:
            attempt = password_attempt(self.session, self.username, options.password,
                                       options.keyboard_interactive)
            if await self._attempts([attempt], deadline, tried):
                return
        raise PermissionDenied.at(self.host, self.port, f"authentication as {self.username!r} "
                                  f"failed (tried: {', '.join(tried) or 'nothing'})")

    async def _attempts(self, attempts, deadline, tried: list) -> bool:
        """Make each login call in turn until one logs us in."""
        for attempt in attempts:
            tried.append(attempt.what)
            try:
                await self._driver.eagain(attempt.call, *attempt.args, timeout=_left(deadline),
                                          what=attempt.what)
            except ssh2_exc.PublickeyUnverifiedError:
                raise  # signing failed here (a wrong passphrase?): the caller says why
            except ssh2_exc.AuthenticationError as err:
                log.debug("%s: %s refused: %s", self.host, attempt.what, err)
                continue
            if accepted(self.session):
                return True
        return False

    async def _key_login(self, key: Key, passphrase: str, deadline, tried: list) -> bool:
        if isinstance(key, (bytes, bytearray)):
            key, name = bytes(key), "the private key given in memory"
            info = inspect_key(key, name)
            attempts = [key_data_attempt(self.session, self.username, key, passphrase)]
        else:
            key = os.path.expanduser(os.fspath(key))
            info, name = inspect_key_file(key), f"private key file {key}"
            # Its certificate, when ``<key>-cert.pub`` is beside it, as ssh does.
            attempts = key_file_attempts(self.session, self.username, key, passphrase)
        try:
            with key_errors(info, name, passphrase):
                return await self._attempts(attempts, deadline, tried)
        except ssh2_exc.PublickeyUnverifiedError as err:
            log.debug("%s: %s could not sign: %s", self.host, name, err)
            return False

    async def _agent_login(self, deadline, agent_path, tried: list) -> bool:
        # The agent is a local socket that answers at once: talked to directly.
        agent = self.session.agent_init()
        if agent_path:
            agent.set_identity_path(agent_path)
        try:
            agent.connect()
            attempts = list(agent_attempts(self.session, agent, self.username))
        except ssh2_exc.SSH2Error as err:
            log.debug("%s: no agent: %s", self.host, err)
            return False
        try:
            return await self._attempts(attempts, deadline, tried)
        finally:
            disconnect_agent(agent)

    # -- commands ------------------------------------------------------------------------

    async def _open(self, command: str, env, term_type, term_size) -> "ChannelStreams":
        if self.session is None:
            raise exc.SessionError.at(self.host, self.port, "the connection is closed")
        channel = await self._driver.exclusive(self.session.open_session,
                                               what="opening a channel")
        streams = ChannelStreams(self._driver, channel, None)
        try:
            if self._agent is not None:
                await self._agent.request(channel)
            for name, value in (env or {}).items():
                await self._driver.eagain(channel.setenv, str(name), str(value),
                                          what="setting the environment")
            if term_type:
                width, height = term_size or (80, 24)
                await self._driver.eagain(channel.pty, term_type, width, height,
                                          what="asking for a terminal")
            await self._driver.eagain(channel.execute, command, what="starting the command")
        except BaseException:
            streams.closed = True
            raise
        return streams

    async def create_process(self, command: str, *, env=None, term_type: Optional[str] = None,
                             term_size=None, encoding: Optional[str] = "utf-8",
                             errors: str = "strict",
                             cancellable: bool = False) -> SSHClientProcess:
        """Start ``command``; its ``stdin``, ``stdout``, ``stderr`` are streams.

        ``cancellable`` (ours): the command and its children carry a marker in
        their environment, so that :meth:`SSHClientProcess.terminate` (and a
        cancelled :meth:`run`) stops them for sure even without a pty, where sshd
        leaves a command running when its channel closes (see :mod:`pssh.cancel`).
        """
        marker = new_marker() if cancellable else None
        sent = with_marker(command, marker) if marker else command
        streams = await self._open(sent, env, term_type, term_size)
        return SSHClientProcess(streams, command, encoding, errors,
                                stopper=lambda signal: self._background(
                                    self._stop_command(streams, marker, signal)))

    async def run(self, command: str, *, check: bool = False,
                  input: Union[str, bytes, None] = None, env=None,
                  term_type: Optional[str] = None, timeout: Optional[float] = None,
                  encoding: Optional[str] = "utf-8", errors: str = "strict",
                  cancellable: bool = False) -> SSHCompletedProcess:
        """Run ``command`` to its end: its output and exit status. ``check``: raise
        :class:`ProcessError` unless it exits 0. ``input``: its standard input.
        ``timeout``: the whole run (:class:`pssh.exceptions.Timeout`).
        ``cancellable``: if the run is cancelled or times out, the remote command is
        stopped too (TERM to it and its children; see :meth:`create_process`)."""
        process = await self.create_process(command, env=env, term_type=term_type,
                                            encoding=encoding, errors=errors,
                                            cancellable=cancellable)
        try:
            if input is not None:
                process.stdin.write(input)
            process.stdin.write_eof()
            result = await process.wait(timeout)
        except BaseException:
            process.stdin._stop()
            if cancellable:
                process.terminate()  # in the background; closing the connection waits for it
            self._abandon(process._streams)
            raise
        if check and result.exit_status != 0:
            raise ProcessError(self.host, self.port, command, result.exit_status,
                               result.exit_signal, result.stdout, result.stderr)
        return result

    def _background(self, coro) -> asyncio.Task:
        """A task the connection waits for before it closes (stopping a command)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        return task

    async def _stop_command(self, streams: ChannelStreams, marker: Optional[str],
                            signal: str) -> None:
        """Send ``signal`` to a command: a "signal" request, then, for a command started
        cancellable, to every process carrying its marker (on a channel of its own)."""
        if self.session is None:
            return
        if not streams.closed:
            try:
                await self._driver.eagain(streams.channel.signal, signal, timeout=STOP_TIMEOUT,
                                          what="sending a signal")
            except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
                log.debug("%s: signal request failed: %s", self.host, err)
        if marker is not None:
            await self.run(kill_script(marker, signal), timeout=STOP_TIMEOUT)
        log.info("%s: sent %s to a command", self.host, signal)

    def _abandon(self, streams: ChannelStreams) -> None:
        """A command given up (cancelled, timed out): send its channel's close and keep the
        connection. sshd confirms the close only once the command has ended (without a pty
        it is left to run, as with a closed ``ssh`` client), so nothing waits for that:
        libssh2 drops the channel's later packets. If even the close cannot be sent, the
        connection is closed, so that nothing half-done remains."""
        if self.session is None or streams.closed:
            return
        streams.closed = True
        try:
            streams.channel.close()   # sends CLOSE; EAGAIN: the server has not answered yet
        except ssh2_exc.SSH2Error as err:
            log.debug("%s: closing an abandoned channel failed (%s): closing the connection",
                      self.host, err)
            self.close()

    # -- forwarding ------------------------------------------------------------------------

    async def open_connection(self, host: str, port: int):
        """``(reader, writer)`` of a TCP connection to ``host:port`` made by the server
        (a direct-tcpip channel); bytes in, bytes out."""
        from pssh.aio.forward import open_channel_connection
        channel = await open_channel_connection(self, host, port)
        return channel.reader, channel.writer

    async def forward_local_port(self, listen_host: str, listen_port: int, dest_host: str,
                                 dest_port: int):
        """Listen locally (``ssh -L``) and carry each connection to ``dest_host:dest_port``
        as the server sees it: an :class:`~pssh.aio.forward.SSHListener`."""
        from pssh.aio.forward import forward_local_port
        return await forward_local_port(self, listen_host, listen_port, dest_host, dest_port)

    async def forward_remote_port(self, listen_host: str, listen_port: int, dest_host: str,
                                  dest_port: int):
        """Have the server listen (``ssh -R``) and carry each connection it accepts to
        ``dest_host:dest_port`` from here: a :class:`~pssh.aio.forward.SSHRemoteListener`."""
        from pssh.aio.forward import forward_remote_port
        return await forward_remote_port(self, listen_host, listen_port, dest_host, dest_port)

    # -- SFTP ------------------------------------------------------------------------------

    def start_sftp_client(self) -> AwaitableContext:
        """An SFTP client on this connection; ``await`` it or ``async with`` it."""
        from pssh.aio.sftp import start_sftp_client
        return AwaitableContext(start_sftp_client(self))

    # -- ending ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection at once (idempotent)."""
        if self.session is None:
            return
        self.session = None
        if self._agent is not None:
            self._agent.close()
        self._driver.close()
        if self._relay is not None:  # the jump host's side of a tunnelled connection
            self._relay.cancel()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Wait until the connection is closed and, for one made through a jump host, the
        jump host's side of the tunnel is too."""
        await self._closed.wait()
        if self._relay is not None:
            await asyncio.gather(self._relay, return_exceptions=True)
            await asyncio.sleep(0)  # the relay's local stream closes on the next turn

    async def __aenter__(self) -> "SSHClientConnection":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.stop_pending()
        self.close()
        await self.wait_closed()

    async def stop_pending(self) -> None:
        """Wait (up to :data:`STOP_TIMEOUT`) for commands being stopped to be signalled;
        leaving ``async with`` does this before closing."""
        if self._cleanups:
            await asyncio.wait(tuple(self._cleanups), timeout=STOP_TIMEOUT)


def _left(deadline) -> float:
    """Seconds left before ``deadline`` (at least a sliver: the next wait then times out)."""
    left = remaining(deadline)
    return None if left is None else max(left, 1e-3)
