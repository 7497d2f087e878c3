"""``SSHClient``: one host, on gevent, with every libssh2 call non-blocking.

Each call that would block returns EAGAIN from the bindings; the client then
waits on the socket in the direction libssh2 asks for, letting other
greenlets run. Timeouts (one model, seconds):

* ``timeout``: connecting, the handshake, authentication, and each wait for a
  reply to a request (opening a channel, starting a command, closing);
* ``read_timeout`` (per command): no output for that long raises ``Timeout``;
* ``join(timeout=...)``: how long to wait for commands to finish.

Connection failures (refused, reset, unreachable) are retried ``num_retries``
times with exponential backoff and jitter; timeouts and rejected logins are
never retried.
"""
from __future__ import annotations

import getpass
import logging
import os
import random
import shlex
import socket
import weakref
from typing import Optional, Union

import gevent
from gevent import socket as gsocket
from gevent.event import Event
from gevent.hub import get_hub

from pssh import exceptions as exc
from pssh.clients.native.agent_forwarding import AgentForwarder
from pssh.clients.native.transfer import TransferMixin
from pssh.clients.native.tunnel import JumpHosts, Tunnel
from pssh.known_hosts import prefer_certificates, verify_host_key
from pssh.output import HostOutput
from pssh.reader import ChannelReader
from pssh.shell import InteractiveShell
from pssh.ssh_config import HostOptions, SSHConfig, load, parse_jump
from ssh2 import exceptions as ssh2_exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import (LIBSSH2_FLAG_COMPRESS, LIBSSH2_FLAG_EARLY_USERAUTH,
                          LIBSSH2_FLAG_PUBLICKEY_NO_QUERY,
                          LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND, Session)

log = logging.getLogger("pssh.client")

DEFAULT_RETRIES = 3
DEFAULT_RETRY_DELAY = 1.0
DEFAULT_KEEPALIVE = 60
DEFAULT_KEEPALIVE_COUNT_MAX = 3  # OpenSSH's ServerAliveCountMax default
IDENTITY_FILES = ("id_ed25519", "id_ecdsa", "id_rsa")
_READ, _WRITE = 1, 2  # libev event bits


def _config(ssh_config) -> Optional[SSHConfig]:
    if ssh_config is False:
        return None
    if isinstance(ssh_config, SSHConfig):
        return ssh_config
    return load(ssh_config if isinstance(ssh_config, str) else None)


def _keepalive_loop(ref) -> None:
    """Keep the connection alive and notice when the server stops answering.

    Every ``keepalive_seconds`` a keepalive goes out (want_reply off: the
    replies libssh2 would queue and never free). A round in which not a byte
    came from the server is followed by a probe that needs an answer (a
    channel opened and closed); no answer within ``keepalive_count_max``
    intervals declares the server lost, as ServerAliveCountMax does, and
    every wait on the connection fails. Holds the client only weakly
    between rounds.
    """
    received = -1
    while True:
        client = ref()
        if client is None or client.session is None:
            return
        try:
            if client.session.bytes_received == received and client.keepalive_count_max:
                client._probe()
            client.retry_eagain(client.session.keepalive_send, what="sending a keepalive")
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            client.log.debug("keepalive failed: %s", err)
            return
        received = client.session.bytes_received if client.session is not None else -1
        interval = client.keepalive_seconds
        del client
        gevent.sleep(interval)


class HostLog(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['host']}: {msg}", kwargs


class SSHClient(TransferMixin):
    """An SSH connection to one host (connects and authenticates on creation).

    Settings left at ``None`` come from the OpenSSH client config
    (``ssh_config``: a path, an :class:`~pssh.ssh_config.SSHConfig`, ``False``
    for none; default ``~/.ssh/config``), then from the defaults: explicit
    arguments always win. ``proxy_host`` (with ``proxy_port``, ``proxy_user``,
    ``proxy_password``, ``proxy_pkey``; the key defaults to ``pkey``) or the
    ``proxy_jump`` (OpenSSH ``-J`` syntax: ``[user@]host[:port],...``) or the
    config's ``ProxyJump`` chain reach the host through jump hosts. ``cert_file``:
    an OpenSSH certificate for ``pkey`` (``<key>-cert.pub`` is found by itself).
    """

    # False once a libssh2 without our patches' flags was met.
    _patched_flags = True

    def __init__(self, host: str, user: Optional[str] = None, password: Optional[str] = None,
                 port: Optional[int] = None, pkey: Union[str, bytes, None] = None,
                 alias: Optional[str] = None, num_retries: int = DEFAULT_RETRIES,
                 retry_delay: float = DEFAULT_RETRY_DELAY, allow_agent: Optional[bool] = None,
                 timeout: Optional[float] = None, identity_auth: bool = True,
                 keepalive_seconds: Optional[int] = None, known_hosts: Optional[str] = None,
                 keepalive_count_max: Optional[int] = None,
                 host_key_policy: Optional[str] = None, keyboard_interactive: bool = False,
                 passphrase: Optional[str] = None, proxy_host: Optional[str] = None,
                 proxy_port: Optional[int] = None, proxy_user: Optional[str] = None,
                 proxy_password: Optional[str] = None,
                 proxy_pkey: Union[str, bytes, None] = None, forward_ssh_agent: bool = False,
                 compress: Optional[bool] = None, ipv6_only: bool = False,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 proxy_jump: Optional[str] = None, cert_file: Optional[str] = None,
                 jump_hosts: Optional[JumpHosts] = None,
                 _via: Optional["SSHClient"] = None
                 ) -> None:
        config = _config(ssh_config)
        options = config.lookup(host, user, port) if config is not None else HostOptions()
        self.host = host
        self.hostname = options.hostname or host
        self.port = port or options.port or 22
        self.user = user or options.user or getpass.getuser()
        self.password = password
        self.pkey = pkey
        self.passphrase = passphrase
        self.cert_file = os.path.expanduser(cert_file) if cert_file \
            else options.certificate_files[0] if options.certificate_files else None
        self.alias = alias
        self.num_retries = num_retries
        self.retry_delay = retry_delay
        self.allow_agent = allow_agent if allow_agent is not None \
            else not options.identities_only
        self.timeout = timeout if timeout is not None else options.connect_timeout
        self.identity_auth = identity_auth
        self.identity_files = options.identity_files or tuple(
            os.path.expanduser(os.path.join("~", ".ssh", name)) for name in IDENTITY_FILES)
        self.keepalive_seconds = keepalive_seconds if keepalive_seconds is not None \
            else options.server_alive_interval if options.server_alive_interval is not None \
            else DEFAULT_KEEPALIVE
        self.keepalive_count_max = keepalive_count_max if keepalive_count_max is not None \
            else options.server_alive_count_max if options.server_alive_count_max is not None \
            else DEFAULT_KEEPALIVE_COUNT_MAX
        self.known_hosts = known_hosts or options.known_hosts
        self.host_key_policy = host_key_policy or options.host_key_policy or "accept-new"
        self.host_key_name = options.host_key_alias or self.hostname
        self.keyboard_interactive = keyboard_interactive
        self.compress = compress if compress is not None else bool(options.compression)
        self.ipv6_only = ipv6_only
        self.log = HostLog(log, {"host": f"{host}:{self.port}"})
        self.forward_ssh_agent = bool(forward_ssh_agent or options.forward_agent)
        self._agent: Optional[AgentForwarder] = None
        self.sock: Optional[socket.socket] = None
        self.session: Optional[Session] = None
        self._hub = get_hub()
        self._waiters: set = set()
        self._lost: Optional[exc.PSSHError] = None
        self._received_seen = -1
        self._keepalive: Optional[gevent.Greenlet] = None
        self._tunnel: Optional[Tunnel] = None
        self._quickack = False
        self._own_jumps = jump_hosts is None
        self._jumps = jump_hosts or JumpHosts(SSHClient)
        if _via is None:
            hops = self._jump_hops(options, proxy_host, proxy_port, proxy_user, proxy_jump)
            if hops:
                _via = self._jumps.chain(
                    hops, password=proxy_password, pkey=proxy_pkey or pkey,
                    passphrase=passphrase, num_retries=num_retries, retry_delay=retry_delay,
                    allow_agent=allow_agent, timeout=timeout, identity_auth=identity_auth,
                    known_hosts=known_hosts, host_key_policy=host_key_policy,
                    ssh_config=config or False, jump_hosts=self._jumps)
        try:
            self._connect(_via)
            self._verify_host_key()
            self._authenticate()
            if self.forward_ssh_agent:
                self._start_agent_forwarding()
        except BaseException:
            self.disconnect()
            raise
        if self.keepalive_seconds:
            self.session.keepalive_config(False, self.keepalive_seconds)
            self._keepalive = gevent.spawn(_keepalive_loop, weakref.ref(self))

    def _start_agent_forwarding(self) -> None:
        agent_path = os.environ.get("SSH_AUTH_SOCK")
        if not agent_path:
            self.log.warning("agent forwarding asked for, but no local SSH agent "
                             "(SSH_AUTH_SOCK is not set): not forwarding")
            return
        self._agent = AgentForwarder(self, agent_path)

    @staticmethod
    def _jump_hops(options: HostOptions, proxy_host, proxy_port, proxy_user,
                   proxy_jump) -> list:
        if proxy_host:
            return [(proxy_user, proxy_host, proxy_port)]
        spec = proxy_jump or options.proxy_jump
        if spec and spec.lower() != "none":
            return parse_jump(spec)
        return []

    # -- waiting ---------------------------------------------------------------

    def wait(self, timeout: Optional[float], what: str = "waiting for the server") -> None:
        """Wait on the socket in the direction libssh2 is blocked on.

        Also returns early when another greenlet using this session made
        progress (:meth:`wake`): its libssh2 call may have read packets for
        us off the socket, which would then never become readable for them.
        """
        if self._lost is not None:
            raise self._lost
        directions = self.session.block_directions()
        events = ((_READ if directions & LIBSSH2_SESSION_BLOCK_INBOUND else 0)
                  | (_WRITE if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND else 0)) or _READ
        if self._agent is not None:
            self._agent.poll()
        received = self.session.bytes_received
        if received != self._received_seen:
            # Our call read from the socket though it got nothing for itself:
            # what it read may be another greenlet's reply, now queued in
            # libssh2 where that greenlet's socket watch will never see it.
            self._received_seen = received
            self.wake()
        ready = Event()
        watcher = self._hub.loop.io(self.sock.fileno(), events)
        watcher.start(ready.set)
        self._waiters.add(ready)
        try:
            if not ready.wait(timeout):
                raise exc.Timeout(f"{what}: nothing within {timeout} s", self.host, self.port)
            if self._lost is not None:
                raise self._lost
        finally:
            self._waiters.discard(ready)
            watcher.stop()
            watcher.close()

    def wake(self) -> None:
        """Tell greenlets waiting on this session to retry (call after progress)."""
        for ready in tuple(self._waiters):
            ready.set()

    def _probe(self) -> None:
        """Ask the server for an answer; declare it lost if none comes in time."""
        timeout = self.keepalive_seconds * self.keepalive_count_max
        try:
            channel = self.retry_eagain(self.session.open_session, timeout=timeout,
                                        what="keepalive probe")
            self.retry_eagain(channel.close, timeout=timeout, what="keepalive probe")
        except ssh2_exc.SSH2Error:
            return  # refused (e.g. MaxSessions): an answer all the same
        except exc.Timeout:
            self._lose(f"server not responding: no answer for {timeout} s "
                       f"({self.keepalive_count_max} keepalive intervals of "
                       f"{self.keepalive_seconds} s)")

    def _lose(self, reason: str) -> None:
        """Fail every wait on this connection now and later, then drop it."""
        self.log.warning("%s; closing the connection", reason)
        self._lost = exc.ConnectionError(reason, self.host, self.port)
        self.wake()
        gevent.spawn(self.disconnect)
        raise self._lost

    def retry_eagain(self, fn, *args, timeout: Optional[float] = None, what: str = ""):
        """Call ``fn`` until it stops returning EAGAIN, waiting on the socket between tries."""
        timeout = self.timeout if timeout is None else timeout
        while True:
            result = fn(*args)
            if type(result) is int and result == LIBSSH2_ERROR_EAGAIN:
                if self._quickack:
                    # Acknowledge the reply at once: sshd (Nagle on for non-pty
                    # sessions) holds its next packet until our ACK, which
                    # delayed ACK would postpone ~40 ms (first channel after auth).
                    self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                self.wait(timeout, what or getattr(fn, "__name__", "waiting"))
                continue
            self.wake()
            return result

    # -- connection ------------------------------------------------------------

    def _open_socket(self, via: Optional["SSHClient"]) -> socket.socket:
        if via is not None:
            self._tunnel = Tunnel(via, self.hostname, self.port)
            return self._tunnel.sock
        if self.ipv6_only:
            infos = gsocket.getaddrinfo(self.hostname, self.port, socket.AF_INET6,
                                        socket.SOCK_STREAM)
            sock = gsocket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(infos[0][4])
            except BaseException:
                sock.close()
                raise
            return sock
        return gsocket.create_connection((self.hostname, self.port), timeout=self.timeout)

    def _connect(self, via: Optional["SSHClient"] = None) -> None:
        for attempt in range(self.num_retries + 1):
            try:
                self.sock = self._open_socket(via)
                self._quickack = self.sock.family in (socket.AF_INET, socket.AF_INET6)
                break
            except socket.gaierror as err:
                raise exc.UnknownHostError(f"cannot resolve host name {self.hostname!r}: "
                                           f"{err.strerror}", self.host, self.port) from None
            except socket.timeout:
                raise exc.Timeout(f"connecting timed out after {self.timeout} s",
                                  self.host, self.port) from None
            except (OSError, exc.ProxyError) as err:
                if attempt == self.num_retries:
                    reason = err.message if isinstance(err, exc.PSSHError) \
                        else err.strerror or err
                    raise exc.ConnectionError(
                        f"cannot connect: {reason} (after {attempt + 1} attempts)",
                        self.host, self.port) from None
                delay = self.retry_delay * (2 ** attempt) * random.uniform(0.5, 1.5)
                self.log.debug("connect failed (%s), retrying in %.2f s", err, delay)
                gevent.sleep(delay)
        self.session = Session()
        self.session.set_blocking(False)
        if self.compress:
            self.session.flag(LIBSSH2_FLAG_COMPRESS)
        # The first login request follows the handshake at once (a round trip less).
        self._patched_flag(LIBSSH2_FLAG_EARLY_USERAUTH, True)
        if self.host_key_policy != "off":
            prefer_certificates(self.session, self.host_key_name, self.port, self.known_hosts)
        try:
            self.retry_eagain(self.session.handshake, self.sock, what="SSH handshake")
        except ssh2_exc.SSH2Error as err:
            raise exc.ConnectionError(f"SSH handshake failed: {err}", self.host, self.port) from None

    def _verify_host_key(self) -> None:
        verify_host_key(self.session, self.host_key_name, self.port, self.host_key_policy, self.known_hosts)

    def _authenticate(self) -> None:
        failures = []
        for name, attempt in self._auth_methods():
            self._sign_without_query(not name.startswith("agent"))
            try:
                self.retry_eagain(attempt, what=f"authentication ({name})")
            except ssh2_exc.SSH2Error as err:
                failures.append(f"{name}: {err.message or type(err).__name__}")
                self.log.debug("authentication with %s failed: %s", name, err)
                continue
            if self.session.userauth_authenticated():
                self.log.debug("authenticated as %s with %s", self.user, name)
                return
        tried = "; ".join(failures) or "no authentication method available"
        raise exc.AuthenticationError(f"authentication as {self.user!r} failed ({tried})",
                                      self.host, self.port)

    def _sign_without_query(self, enabled: bool) -> None:
        """Key files and keys in memory sign at once (a round trip less per login);
        agent keys are asked about first, as an agent may prompt the user to sign."""
        self._patched_flag(LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, enabled)

    def _patched_flag(self, flag: int, enabled: bool) -> None:
        """Set a session flag of our libssh2 patches; without them there is none to set."""
        if self._patched_flags:
            try:
                self.session.flag(flag, enabled)
            except ssh2_exc.SSH2Error:
                type(self)._patched_flags = False

    def _auth_methods(self):
        session, user = self.session, self.user
        if self.pkey is not None:
            if isinstance(self.pkey, bytes):
                yield "key from memory", lambda: session.userauth_publickey_frommemory(
                    user, self.pkey, self.passphrase or "")
            else:
                path = os.path.expanduser(self.pkey)
                if not os.path.exists(path):
                    raise exc.PKeyFileError(f"private key file {path!r} not found",
                                            self.host, self.port)
                yield from self._key_file_methods(path, self.cert_file)
        if self.allow_agent and os.environ.get("SSH_AUTH_SOCK"):
            yield from self._agent_methods()
        if self.identity_auth and self.pkey is None:
            for path in self.identity_files:
                if os.path.exists(path):
                    yield from self._key_file_methods(path, self.cert_file)
        if self.password is not None:
            yield "password", lambda: session.userauth_password(user, self.password)
            if self.keyboard_interactive:
                yield "keyboard-interactive", lambda: session.userauth_keyboardinteractive(
                    user, self.password)

    def _key_file_methods(self, path: str, cert_file: Optional[str]):
        """A key file, preceded by its certificate (``cert_file``, else ``<key>-cert.pub``)."""
        session, user, passphrase = self.session, self.user, self.passphrase or ""
        cert = cert_file or (path + "-cert.pub" if os.path.exists(path + "-cert.pub") else None)
        if cert is not None:
            if not os.path.exists(cert):
                raise exc.PKeyFileError(f"certificate file {cert!r} not found",
                                        self.host, self.port)
            yield f"certificate {cert}", lambda: session.userauth_publickey_fromfile(
                user, path, passphrase, cert)
        # With the public half beside it, as ssh uses it, libssh2 need not
        # derive it from the private key: 0.94 -> 0.26 ms of CPU per login.
        public = path + ".pub" if os.path.exists(path + ".pub") else None
        yield f"key {path}", lambda: session.userauth_publickey_fromfile(user, path, passphrase,
                                                                         public)

    def _agent_methods(self):
        try:
            agent = self.session.agent_init()
            agent.connect()
            identities = agent.get_identities()
        except ssh2_exc.SSH2Error as err:
            self.log.debug("SSH agent unavailable: %s", err)
            return
        for identity in identities:
            yield (f"agent key {identity.comment.decode(errors='replace')}",
                   lambda i=identity: agent.userauth(self.user, i))

    def disconnect(self) -> None:
        """Close the session, the socket and any jump sessions of our own (idempotent)."""
        self._sftp = None
        if self._agent is not None:
            self._agent.close()
            self._agent = None
        if self._keepalive is not None and self._keepalive is not gevent.getcurrent():
            self._keepalive.kill(block=False)
        session, self.session = self.session, None
        if session is not None and self.sock is not None and self.sock.fileno() != -1:
            try:
                # Best effort goodbye, never blocking the hub.
                session.disconnect()
            except ssh2_exc.SSH2Error:
                pass
        del session
        if self.sock is not None:
            self.sock.close()
        if self._tunnel is not None:
            self._tunnel.close()
        if self._own_jumps:
            self._jumps.close()

    # -- commands ----------------------------------------------------------------

    def _wrap(self, command: str, sudo: bool, user: Optional[str], shell: Optional[str]) -> str:
        if shell:
            command = f"{shell} -c {shlex.quote(command)}"
        if user:
            command = f"sudo -u {shlex.quote(user)} -S {command}" if shell else \
                f"sudo -u {shlex.quote(user)} -S sh -c {shlex.quote(command)}"
        elif sudo:
            command = f"sudo -S {command}" if shell else f"sudo -S sh -c {shlex.quote(command)}"
        return command

    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    use_pty: bool = False, shell: Optional[str] = None, encoding: str = "utf-8",
                    read_timeout: Optional[float] = None, errors: str = "replace",
                    timeout: Optional[float] = None) -> HostOutput:
        """Start ``command``; its output streams from the returned :class:`HostOutput`."""
        if self.session is None:
            raise exc.SessionError("client is disconnected", self.host, self.port)
        read_timeout = read_timeout if read_timeout is not None else timeout
        wrapped = self._wrap(command, sudo, user, shell)
        try:
            channel = self.open_session()
            if use_pty:
                self.retry_eagain(channel.pty, what="requesting a pty")
            self.retry_eagain(channel.execute, wrapped, what="starting the command")
        except ssh2_exc.SSH2Error as err:
            raise exc.SessionError(f"cannot run command: {err}", self.host, self.port) from None
        self.log.debug("started %r", wrapped)
        return HostOutput(self.host, ChannelReader(self, channel), client=self, alias=self.alias,
                          encoding=encoding, errors=errors, read_timeout=read_timeout)

    def open_session(self):
        """A new session channel, with agent forwarding requested if it is on.

        Raises ``ssh2`` errors; ``run_command`` and ``open_shell`` turn them
        into :class:`~pssh.exceptions.SessionError` naming the host.
        """
        if self.session is None:
            raise exc.SessionError("client is disconnected", self.host, self.port)
        channel = self.retry_eagain(self.session.open_session, what="opening a channel")
        if self._agent is not None:
            self._agent.request(channel)
        return channel

    def open_shell(self, encoding: str = "utf-8",
                   read_timeout: Optional[float] = None) -> InteractiveShell:
        """Start a login shell to feed commands to (see :class:`pssh.shell.InteractiveShell`)."""
        if self.session is None:
            raise exc.SessionError("client is disconnected", self.host, self.port)
        return InteractiveShell(self, encoding=encoding, read_timeout=read_timeout)

    def wait_finished(self, host_output: HostOutput, timeout: Optional[float] = None) -> None:
        """Wait for the command to end, buffering its output for later reading."""
        if host_output._reader is not None:
            host_output._reader.wait_eof(timeout)

    def get_exit_status(self, channel) -> Optional[int]:
        return channel.get_exit_status()

    def read_output(self, host_output: HostOutput):
        return host_output.stdout

    def read_stderr(self, host_output: HostOutput):
        return host_output.stderr

    def __del__(self):
        if getattr(self, "sock", None) is not None:
            self.sock.close()
