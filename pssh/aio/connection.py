"""``connect()`` and :class:`SSHClientConnection`: one host on the running asyncio loop.

A shell over the session core (:mod:`pssh.core`): settings resolve as for the
gevent client (:class:`pssh.options.ConnectOptions`: arguments, then the
OpenSSH client config, then the defaults), and connecting with its retries, the
handshake, the host key check, the login order, keepalives, commands, transfers
and forwarding are the core's procedures, driven by the asyncio runner
(:mod:`pssh.runners.asyncio`). What is here is asyncssh's API: its names, its
exceptions, its callbacks.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Optional, Sequence, Union

from pssh import exceptions as exc
from pssh.aio.awaitable import AwaitableContext
from pssh.aio.constants import OPEN_CONNECT_FAILED
from pssh.core import freshness
from pssh.aio.exceptions import (ChannelOpenError, ConnectionLost, ConnectTimeout,
                                 HostKeyNotVerifiable, HostNotFound, KeyEncryptionError,
                                 KeyFileNotFound, KeyImportError, PermissionDenied,
                                 ProcessError, channel_open_error, connection_errors,
                                 disconnect_error, lost_error)
from pssh.aio.options import ARGUMENTS, NOT_GIVEN, SSHClientConnectionOptions
from pssh.aio.process import ChannelStreams, SSHClientProcess, SSHCompletedProcess
from pssh.core.cancel import new_marker, with_marker
from pssh.core import commands as core_commands
from pssh.core.auth import DEFAULT_IDENTITIES, Credentials, KeyErrors, LoginMethods, login
from pssh.core.establish import agent_path_of, establish, open_session, start_services
from pssh.core.handshake import Attempt, check_host_key
from pssh.core.jump import JumpChain, route
from pssh.core.link import Link
from pssh.core.deadlines import UNSET, remaining
from pssh.runners.asyncio import RUNNER
from ssh2 import exceptions as ssh2_exc
from ssh2.session import Session

log = logging.getLogger("pssh.aio")

#: Key files tried when no ``client_keys`` are given, unless the ssh config names some
#: (the same as the gevent client's: the core's, OpenSSH's order).
DEFAULT_IDENTITIES = DEFAULT_IDENTITIES

#: Seconds allowed for signalling a command that is being stopped.
STOP_TIMEOUT = 10.0

#: asyncssh's key errors, one per case (the core raises these on this front end).
KEY_ERRORS = KeyErrors(missing=KeyFileNotFound, unreadable=KeyImportError,
                       encrypted=KeyImportError, passphrase=KeyEncryptionError)

Key = Union[str, bytes]
Algorithms = Union[str, Sequence[str], None]


def connect(host: str, port: Optional[int] = None, *,
            options: Optional[SSHClientConnectionOptions] = None, tunnel=None,
            client_factory=None, username: Optional[str] = None,
            password: Optional[str] = None, client_keys: Optional[Sequence[Key]] = None,
            client_certs=None, passphrase: Optional[str] = None, known_hosts=NOT_GIVEN,
            host_key_policy: Optional[str] = None, connect_timeout: Optional[float] = None,
            login_timeout: Optional[float] = None, timeout: Optional[float] = None,
            agent_path=NOT_GIVEN, agent_forwarding: Optional[bool] = None,
            keepalive_interval: Optional[int] = None,
            keepalive_count_max: Optional[int] = None, encryption_algs: Algorithms = None,
            mac_algs: Algorithms = None, kex_algs: Algorithms = None,
            kbdint_auth: Optional[bool] = None, compress: Optional[bool] = None,
            ipv6_only: Optional[bool] = None, num_retries: Optional[int] = None,
            retry_delay: Optional[float] = None, ssh_config=None,
            _settings=None) -> AwaitableContext:
    # Most arguments are None: that test first (this runs per host).
    given = {name: value for name, value in locals().items()
             if (value is not None or name in ("known_hosts", "agent_path"))
             and value is not NOT_GIVEN and name in ARGUMENTS and name != "tunnel"}
    merged = SSHClientConnectionOptions(options, **given)
    return AwaitableContext(_connect(host, port, merged, tunnel, client_factory))


async def create_connection(client_factory, host: str = "", port: Optional[int] = None,
                            **connect_args):
    """Connect as :func:`~pssh.aio.connect` does, with ``client_factory()``'s callbacks
    (``client_factory`` None: a plain :class:`SSHClient`); returns ``(conn, client)``."""
    from pssh.aio.callbacks import SSHClient
    conn = await connect(host, port, client_factory=client_factory or SSHClient,
                         **connect_args)
    return conn, conn._client


async def _connect(host: str, port: Optional[int], opts: SSHClientConnectionOptions,
                   tunnel, client_factory) -> "SSHClientConnection":
    if isinstance(tunnel, str):
        opts = SSHClientConnectionOptions(opts, tunnel=tunnel)
        tunnel = None
    # The files the log-in reads are looked at once for the hosts logging in meanwhile.
    with freshness.logins():
        resolved = opts.resolve(host, port)
        # Every failure from here on concerns this host (a bad key file included).
        with exc.on_host(host, resolved.port):
            return await _connect_resolved(host, resolved, opts, tunnel, client_factory)


async def _connect_resolved(host: str, resolved, opts: SSHClientConnectionOptions, tunnel,
                            client_factory) -> "SSHClientConnection":
    """The core's composition (:func:`pssh.core.establish.open_session`, then asyncssh's
    login with the client's callbacks, then :func:`~pssh.core.establish.start_services`)."""
    limit = resolved.connect_timeout
    attempt = Attempt(limit)
    chain = None
    via = tunnel._link if tunnel is not None else None
    made = []   # the connection, once the session is up (connection_made comes first)
    client = None
    try:
        if via is None and resolved.jump_hops:
            chain = JumpChain()
            via = await _jump_chain(chain, resolved, opts)
        client = client_factory() if client_factory is not None else None

        def started(link: Link) -> None:
            made.append(SSHClientConnection(host, resolved, link, client, opts))

        def verify(link: Link) -> None:
            made[0]._verify_host_key(resolved.options)

        await RUNNER.run(open_session(host, resolved, Session, via, attempt,
                                      login_timeout=opts.login_timeout, started=started,
                                      verify=verify))
        conn = made[0]
        conn._jumps = chain
        await conn._start(attempt)
    except BaseException as err:
        if made:
            made[0]._link.close()
        if chain is not None:
            chain.close()
        if client is not None:
            client.connection_lost(err if isinstance(err, Exception) else None)
        raise _connect_error(err, host, resolved.port, limit, attempt.cap) from err
    return conn


def _connect_error(err: BaseException, host: str, port: int, limit: float,
                   login_deadline: Optional[float]) -> BaseException:
    """What asyncssh raises for a failure while connecting and logging in."""
    if isinstance(err, exc.UnknownHostError) and not isinstance(err, HostNotFound):
        return HostNotFound(*err.args, host=err.host or host, port=err.port or port)
    if isinstance(err, exc.ConnectTimeout) and not isinstance(err, ConnectTimeout):
        return ConnectTimeout.at(host, port, err.reason)
    if isinstance(err, exc.Timeout) and not isinstance(err, (exc.ConnectTimeout,
                                                             ConnectionLost)):
        if login_deadline is not None and remaining(login_deadline) == 0:
            return ConnectionLost("Login timeout expired", host=host, port=port)
        return ConnectTimeout.at(host, port, f"{err.reason} (connect_timeout {limit} s)")
    if isinstance(err, exc.HostKeyError) and not isinstance(err, HostKeyNotVerifiable):
        return HostKeyNotVerifiable(err.reason, host=host, port=port)
    if isinstance(err, ssh2_exc.SSH2Error) and not isinstance(err, exc.PSSHError):
        return disconnect_error(host, port, err)
    return err


async def _jump_chain(chain: JumpChain, resolved, opts: SSHClientConnectionOptions) -> Link:
    """The link of the last jump host (ssh_config's ProxyJump or ``tunnel="..."``), each hop
    reached through the one before and logged in by the core's sequence
    (:func:`~pssh.core.establish.establish`), with the hop's own settings: its user, its
    ssh config entry. As asyncssh's and OpenSSH's hops, it logs in with the agent and its
    own identity files: ``client_keys``, ``client_certs`` and the password are the
    target's alone (``passphrase`` is shared, as asyncssh shares it)."""
    # "none": the hops themselves are reached directly (asyncssh's name for ProxyJump).
    hop_options = SSHClientConnectionOptions(opts, tunnel="none", password=None,
                                             client_keys=None, client_certs=None,
                                             _settings=resolved.jump_options())

    def make(hop, via):
        user, name, port = hop
        options = SSHClientConnectionOptions(hop_options, username=user or resolved.user)
        hop_resolved = options.resolve(name, port)
        return establish(name, hop_resolved, credentials(hop_resolved, options), Session, via)

    try:
        return await RUNNER.run(chain.chain(resolved.jump_hops, make))
    except Exception as err:
        raise exc.ProxyError("%s:%s: jump host %s failed: %s", resolved.hostname,
                             resolved.port, route(resolved.jump_hops), err,
                             host=resolved.hostname, port=resolved.port) from err


def credentials(resolved, opts: SSHClientConnectionOptions,
                with_password: bool = True) -> Credentials:
    """asyncssh's login: ``client_keys`` given, those only (then the password); else the
    agent and the identity files; the password, never a key's passphrase."""
    options = resolved.options
    keys = opts.client_keys
    return Credentials(
        resolved.user, keys=tuple(keys) if keys is not None else (),
        password=options.password if with_password else None,
        passphrase=options.passphrase or "",
        allow_agent=keys is None and opts.agent_path is not None
        and bool(agent_path_of(opts.agent_path or None)),
        agent_path=opts.agent_path or None, identity_auth=keys is None,
        identities=resolved.identity_files or DEFAULT_IDENTITIES,
        keyboard_interactive=bool(options.keyboard_interactive), cert_file=resolved.cert_file)


class SSHClientConnection:
    """An authenticated SSH connection (asyncssh's name); from :func:`connect`."""

    def __init__(self, host: str, resolved, link: Link, client=None,
                 opts: Optional[SSHClientConnectionOptions] = None) -> None:
        self.host = host
        self.port = resolved.port
        self.username = resolved.user
        self._resolved = resolved
        self._opts = opts or SSHClientConnectionOptions()
        self.session = link.session
        self._link = link
        link.lost_error = lost_error
        link.on_close.append(self.close)  # a lost server closes the connection too
        self._closed = asyncio.Event()
        self._jumps: Optional[JumpChain] = None  # ProxyJump hops of its own
        self._cleanups: set = set()  # tasks stopping remote commands
        sock = link.sock
        assert sock is not None  # a connected link
        self._peername = _address(sock.getpeername)
        self._sockname = _address(sock.getsockname)
        #: The :class:`~pssh.aio.SSHClient` told of this connection's events (if any).
        self._client = client
        if client is not None:
            client.connection_made(self)

    def get_extra_info(self, name: str, default=None):
        """asyncssh's connection details: ``peername`` and ``sockname`` (address, port),
        ``username``, ``host``, ``port``, ``server_version`` (the server's SSH banner),
        ``socket`` (the connection's socket, as asyncio's transports give it, for socket
        options)."""
        if name == "server_version" and self.session is not None:
            return self.session.banner_get() or default
        if name == "socket":
            return default if self._link.closed else self._link.sock
        return {"peername": self._peername, "sockname": self._sockname,
                "username": self.username, "host": self.host, "port": self.port}.get(name, default)

    # -- the core, on this loop ----------------------------------------------------------

    async def _run(self, procedure):
        """Drive a core procedure on this connection; libssh2's "the connection is gone"
        errors become :class:`~pssh.aio.ConnectionLost` (and close it)."""
        with connection_errors(self.host, self.port, self._link):
            return await RUNNER.run(procedure)

    async def _call(self, fn, *args, timeout=UNSET, what: str = ""):
        """``fn(*args)`` on this session, waiting out every EAGAIN (the core's ``call``)."""
        return await self._run(self._link.call(fn, *args, timeout=timeout, what=what))

    # -- connecting --------------------------------------------------------------------

    async def _start(self, attempt: Attempt) -> None:
        """After :func:`~pssh.core.establish.open_session`: the login, then the core's
        :func:`~pssh.core.establish.start_services`."""
        if self._client is not None:
            self._client.begin_auth(self.username)
        await self._login(attempt)
        if self._client is not None:
            self._client.auth_completed()
        await RUNNER.run(start_services(self._link, self._resolved, self._opts.agent_path))

    def _verify_host_key(self, options) -> None:
        """known_hosts under the policy; an unknown host goes to the client's
        ``validate_host_public_key`` when it has one of its own."""
        from pssh.aio.callbacks import asks_host_keys, host_key_accepted
        asking = asks_host_keys(self._client) and options.host_key_policy != "off"
        resolved = self._resolved
        if asking:
            resolved = _with_policy(resolved, "strict")
        try:
            check_host_key(self._link, resolved)
        except exc.UnknownHostKeyError as err:
            if not (asking and host_key_accepted(self)):
                raise HostKeyNotVerifiable(err.reason, host=self.host, port=self.port) from err
        except exc.HostKeyError as err:
            raise HostKeyNotVerifiable(err.reason, host=self.host, port=self.port) from err

    def _credentials(self, with_password: bool = True) -> Credentials:
        return credentials(self._resolved, self._opts, with_password)

    def _login_methods(self, attempt: Attempt, creds: Credentials) -> LoginMethods:
        return LoginMethods(self._link, creds, attempt, KEY_ERRORS)

    async def _login(self, attempt: Attempt) -> None:
        """The core's login order; then, with a client of callbacks, what it supplies for
        the methods the server still offers. :class:`PermissionDenied` says what was
        tried."""
        creds = self._credentials(with_password=self._client is None)
        methods = self._login_methods(attempt, creds)
        try:
            await RUNNER.run(login(self._link, creds, methods))
            return
        except exc.AuthenticationError as err:
            log.debug("%s: login failed: %s", self.host, err)
        except (ssh2_exc.AuthenticationError, ssh2_exc.AgentError) as err:
            log.debug("%s: login failed: %s", self.host, err)
        if self._client is not None:
            from pssh.aio.callbacks import client_logins
            if await client_logins(self, methods):
                return
        raise PermissionDenied(f"authentication as {self.username!r} failed "
                               f"(tried: {', '.join(methods.tried) or 'nothing'})",
                               host=self.host, port=self.port)

    # -- commands ------------------------------------------------------------------------

    async def _open(self, command: Optional[str], env, term_type, term_size,
                    subsystem: Optional[str] = None) -> ChannelStreams:
        """A session channel running ``command`` (None: the login shell; or ``subsystem``)."""
        if self.session is None:   # asyncssh's error for this
            raise ChannelOpenError(OPEN_CONNECT_FAILED, "SSH connection closed",
                                   host=self.host, port=self.port)
        try:
            channel = await self._run(core_commands.open_channel(self._link, self._link.agent))
        except exc.SessionError as err:
            raise channel_open_error(self.host, self.port, "opening a session channel",
                                     err.__cause__ or err) from err
        streams = ChannelStreams(self._link, channel, None)
        try:
            await self._start_channel(channel, command, env, term_type, term_size, subsystem)
        except BaseException:
            streams.core.abandon()
            raise
        return streams

    async def _start_channel(self, channel, command, env, term_type, term_size,
                             subsystem) -> None:
        for name, value in (env or {}).items():
            try:
                await self._call(channel.setenv, str(name), str(value),
                                 what="setting the environment")
            except ssh2_exc.ChannelError as err:
                # asyncssh asks without waiting for an answer: a refusal (sshd's AcceptEnv)
                # does not stop the command. Logged here.
                log.info("%s: the server did not set %s (%s)", self.host, name, err)
        pty = None
        if term_type:
            width, height = (term_size or (80, 24))[:2]
            pty = (term_type, width, height)
        if subsystem is not None:
            if pty is not None:
                await self._call(channel.pty, *pty, what="asking for a terminal")
            await self._call(channel.subsystem, subsystem,
                             what=f"starting subsystem {subsystem}")
        else:
            await self._run(core_commands.start(
                self._link, channel, None if command is None else command.encode(), pty=pty))

    def create_process(self, command: Optional[str] = None, **kwargs) -> AwaitableContext:
        """:meth:`start_process`, awaited or used as ``async with conn.create_process(...)``
        (asyncssh's two styles)."""
        return AwaitableContext(self.start_process(command, **kwargs))

    async def start_process(self, command: Optional[str] = None, *, env=None,
                            term_type: Optional[str] = None, term_size=None,
                            encoding: Optional[str] = "utf-8", errors: str = "strict",
                            cancellable: bool = False, stdin=None, stdout=None, stderr=None,
                            subsystem: Optional[str] = None) -> SSHClientProcess:
        """Start ``command`` (None: the login shell); its ``stdin``, ``stdout``, ``stderr``
        are streams, or redirected by ``stdin=``, ``stdout=``, ``stderr=`` (paths, file
        objects, pipes, other processes' streams, ``DEVNULL``: see
        :mod:`pssh.aio.redirect`).

        ``cancellable`` (ours): the command and its children carry a marker in
        their environment, so that :meth:`SSHClientProcess.terminate` (and a
        cancelled :meth:`run`) stops them for sure even without a pty, where sshd
        leaves a command running when its channel closes (see :mod:`pssh.core.cancel`).
        """
        marker: Optional[str] = None
        sent = command
        if cancellable and command is not None:
            marker = new_marker()
            sent = with_marker(command, marker)
        try:
            streams = await self._open(sent, env, term_type, term_size, subsystem)
        except BaseException:
            if marker is not None:
                # Stopped (cancelled, timed out) half-way through its start: the server may
                # have started the command all the same (its request was sent), and would
                # leave it running without a pty. Its marked processes are signalled, in
                # the background (closing the connection waits for it).
                self._background(self._signal_marked(marker, "TERM"))
            raise
        streams.core.marker = marker
        process = SSHClientProcess(streams, command, encoding, errors,
                                   stopper=lambda signal: self._background(
                                       self._stop_command(streams, signal)),
                                   env=env)
        process.redirect(stdin, stdout, stderr)
        return process

    async def run(self, command: Optional[str] = None, *, check: bool = False,
                  input: Union[str, bytes, None] = None, env=None,
                  term_type: Optional[str] = None, term_size=None,
                  timeout: Optional[float] = None, encoding: Optional[str] = "utf-8",
                  errors: str = "strict", cancellable: bool = False, stdin=None,
                  stdout=None, stderr=None) -> SSHCompletedProcess:
        """Run ``command`` to its end: its output and exit status. ``check``: raise
        :class:`ProcessError` unless it exits 0. ``input``: its standard input (or
        ``stdin=`` a source, and ``stdout=`` / ``stderr=`` targets, as for
        :meth:`create_process`; a redirected stream's output is empty in the result).
        ``timeout``: the whole run (:class:`~pssh.aio.TimeoutError`, with the output so far).
        ``cancellable``: if the run is cancelled or times out, the remote command is
        stopped too (TERM to it and its children; see :meth:`create_process`)."""
        process = await self.start_process(command, env=env, term_type=term_type,
                                            term_size=term_size, encoding=encoding,
                                            errors=errors, cancellable=cancellable,
                                            stdin=stdin, stdout=stdout, stderr=stderr)
        try:
            if input is not None:
                process.stdin.write(input)
            if stdin is None or input is not None:
                process.stdin.write_eof()
            result = await process.wait(timeout)
        except BaseException:
            process.stdin._stop()
            if cancellable:
                process.terminate()  # in the background; closing the connection waits for it
            self._abandon(process._streams)
            raise
        if check and (result.exit_status != 0 or result.exit_signal):
            raise ProcessError(env, command, None, result.exit_status, result.exit_signal,
                               result.returncode, result.stdout, result.stderr,
                               host=self.host, port=self.port)
        return result

    def _background(self, coro) -> asyncio.Task:
        """A task the connection waits for before it closes (stopping a command)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        return task

    async def _stop_command(self, streams: ChannelStreams, signal: str) -> None:
        """Send ``signal`` to a command: a "signal" request, then, for a command started
        cancellable, to every process carrying its marker (the core's
        :func:`~pssh.core.commands.signal_command`, within :data:`STOP_TIMEOUT` as a
        whole; the channel's close is left to the command's own end)."""
        if self.session is None:
            return
        try:
            await self._run(core_commands.signal_command(self._link, streams.core, signal,
                                                         STOP_TIMEOUT))
        except exc.PSSHError as err:  # the connection was lost meanwhile
            log.debug("%s: signalling a command failed: %s", self.host, err)
            return
        log.info("%s: sent %s to a command", self.host, signal)

    async def _signal_marked(self, marker: str, signal: str) -> None:
        """Send ``signal`` to the processes carrying ``marker`` (within
        :data:`STOP_TIMEOUT`), for a command whose start was cut short."""
        if self.session is None:
            return
        try:
            await self._run(core_commands.signal_marked(self._link, marker, signal,
                                                        STOP_TIMEOUT))
        except exc.PSSHError as err:  # the connection was lost meanwhile
            log.debug("%s: signalling a command cut short failed: %s", self.host, err)

    def _abandon(self, streams: ChannelStreams) -> None:
        """A command given up (cancelled, timed out): send its channel's close and keep the
        connection. sshd confirms the close only once the command has ended (without a pty
        it is left to run, as with a closed ``ssh`` client), so nothing waits for that:
        libssh2 drops the channel's later packets. If even the close cannot be sent, the
        connection is closed, so that nothing half-done remains."""
        if self.session is None or streams.closed:
            return
        if not streams.core.abandon():
            log.debug("%s: closing an abandoned channel failed: closing the connection",
                      self.host)
            self.close()

    # -- callbacks (asyncssh's session API) --------------------------------------------

    async def create_session(self, session_factory, command: Optional[str] = None, *,
                             subsystem: Optional[str] = None, env=None,
                             term_type: Optional[str] = None, term_size=None,
                             encoding: Optional[str] = "utf-8", errors: str = "strict"):
        """Start ``command`` (None: the login shell; or ``subsystem``) and hand its channel
        to ``session_factory()``, an :class:`~pssh.aio.SSHClientSession`: returns
        ``(channel, session)``; data, EOF and the exit status arrive as callbacks."""
        from pssh.aio.session import SSHClientChannel
        streams = await self._open(command, env, term_type, term_size, subsystem)
        chan = SSHClientChannel(self, streams, encoding, errors, command, env, subsystem,
                                stopper=lambda signal: self._background(
                                    self._stop_command(streams, signal)))
        return chan, await chan._open(session_factory)

    async def create_connection(self, session_factory, remote_host: str, remote_port: int,
                                orig_host: str = "", orig_port: int = 0, *,
                                encoding: Optional[str] = None, errors: str = "strict"):
        """A TCP connection to ``remote_host:remote_port`` made by the server, handed to
        ``session_factory()``, an :class:`~pssh.aio.SSHTCPSession`: ``(channel, session)``
        (bytes unless an ``encoding`` is given)."""
        from pssh.aio.forward import open_tcp_channel
        from pssh.aio.session import SSHTCPChannel
        channel = await open_tcp_channel(self, remote_host, remote_port, orig_host, orig_port)
        chan = SSHTCPChannel(self, ChannelStreams(self._link, channel, None), encoding,
                             errors)
        return chan, await chan._open(session_factory)

    async def create_server(self, session_factory, listen_host: str, listen_port: int, *,
                            encoding: Optional[str] = None, errors: str = "strict"):
        """Have the server listen on ``listen_host:listen_port`` and hand each connection
        to ``session_factory(orig_host, orig_port)`` (see :mod:`pssh.aio.listeners`);
        a refusal to listen raises :class:`~pssh.aio.ChannelListenError`."""
        from pssh.aio.listeners import create_server
        return await create_server(self, session_factory, listen_host, listen_port,
                                   encoding, errors)

    def start_server(self, handler_factory, listen_host: str, listen_port: int, *,
                     encoding: Optional[str] = None, errors: str = "strict"):
        """:meth:`create_server` with stream handlers: ``handler_factory(orig_host,
        orig_port)`` returns ``handler(reader, writer)``; ``await`` it or ``async with``."""
        from pssh.aio.listeners import start_server
        return AwaitableContext(start_server(self, handler_factory, listen_host, listen_port,
                                             encoding, errors))

    async def forward_connection(self, dest_host: str, dest_port: int):
        """For a listener's session factory: a session carrying the connection to
        ``dest_host:dest_port`` from here (asyncssh's ``SSHForwarder``)."""
        from pssh.aio.listeners import forward_connection
        return await forward_connection(self, dest_host, dest_port)

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

    @property
    def closed(self) -> bool:
        return self.session is None

    def close(self, error: Optional[Exception] = None) -> None:
        """Close the connection at once (idempotent). A client given as ``client_factory``
        hears of it through ``connection_lost`` (with ``error``, or what ended the
        connection if it was lost)."""
        if self.session is None:
            return
        self.session = None
        self._link.close()  # keepalives, agent forwarding and a jump tunnel stop with it
        if self._jumps is not None:
            self._jumps.close()
        self._closed.set()
        if self._client is not None:
            self._client.connection_lost(error or self._link.lost)

    async def wait_closed(self) -> None:
        """Wait until the connection is closed."""
        await self._closed.wait()
        await asyncio.sleep(0)  # a tunnel's relay ends on the next turn

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


def _with_policy(resolved, policy: str):
    """``resolved`` with another host key policy (a client that decides asks as strict)."""
    from dataclasses import replace
    return replace(resolved, options=replace(resolved.options, host_key_policy=policy))


def _address(get) -> Optional[tuple]:
    """``sock.getpeername()`` / ``getsockname()`` as asyncssh gives them: (address, port)."""
    try:
        address = get()
    except OSError:
        return None
    return tuple(address[:2]) if isinstance(address, tuple) else address


__all__ = ["SSHClientConnection", "connect", "create_connection"]
