"""``SSHClient``: one host over libssh2 (the ``ssh2`` bindings), on gevent.

Every libssh2 call is non-blocking, the handshake and logins included: a
call that would block waits on the socket through the session driver,
letting other greenlets run (parallel-ssh ran handshakes and logins blocking
in a thread pool; ``_auth_thread_pool`` is accepted and ignored).

Beyond parallel-ssh: the server's host key is verified against known_hosts
(``host_key_policy``: ``"accept-new"`` by default, ``"strict"``, or
``"off"``, which is logged); the OpenSSH client config is read; jump hosts
(``proxy_host``, ``proxy_jump``, ProxyJump) tunnel in-process; agent
forwarding, user and host certificates, ServerAliveCountMax.
"""
from __future__ import annotations

import logging
import os
import weakref
from typing import Optional, Union

from gevent import sleep

from pssh import exceptions as exc
from pssh.clients.base.single import BaseSSHClient
from pssh.clients.native.agent_forwarding import AgentForwarder
from pssh.clients.native.jump import JumpHosts, Tunnel
from pssh.clients.native.transfer import TransferMixin
from pssh.driver import KeepAlive
from pssh.keys import inspect_key, inspect_key_file
from pssh.known_hosts import verify_host_key
from pssh.login import (Attempt, accepted, agent_attempts, disconnect_agent, key_data_attempt,
                        key_errors, key_file_attempts, password_attempt, prepare_session)
from pssh.ssh_config import SSHConfig
from ssh2 import exceptions as ssh2_exc
from ssh2.session import Session

logger = logging.getLogger(__name__)

__all__ = ["KeepAlive", "SSHClient"]


def __getattr__(name: str):
    if name == "THREAD_POOL":  # parallel-ssh's; nothing here runs in threads
        from gevent import get_hub
        return get_hub().threadpool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SSHClient(TransferMixin, BaseSSHClient):
    """An SSH connection to one host; connects and logs in on creation.

    parallel-ssh's arguments and defaults. Each left at ``None`` comes from
    the OpenSSH client config (``ssh_config``: a path, an
    :class:`~pssh.ssh_config.SSHConfig`, ``False`` for none; default
    ``~/.ssh/config``) before the default. Also: ``passphrase`` (of ``pkey``;
    default ``password``, as parallel-ssh), ``cert_file`` (``<key>-cert.pub``
    is found by itself), ``known_hosts`` and ``host_key_policy``,
    ``keepalive_count_max``, ``proxy_jump`` (``[user@]host[:port],...``),
    ``ciphers`` / ``macs`` / ``kex_algorithms`` (OpenSSH's list syntax, as
    Ciphers / MACs / KexAlgorithms: ``+`` adds to, ``-`` removes from, ``^``
    puts first in the default; :func:`pssh.login.algorithm_list`).

    ``timeout`` bounds connecting and each request (opening a channel,
    starting a command) as a whole; ``read_timeout`` (per command) bounds
    reading its output; ``wait_finished(timeout=)`` waiting for it to end.
    """

    # Set by __init__; class defaults for subclasses that bypass it (parallel-ssh allows).
    _via: Optional["SSHClient"] = None
    _jumps: Optional[JumpHosts] = None
    _own_jumps = True
    _tunnel: Optional[Tunnel] = None
    _agent: Optional[AgentForwarder] = None

    def __init__(self, host: str, user: Optional[str] = None, password: Optional[str] = None,
                 port: Optional[int] = None, pkey: Union[str, bytes, None] = None,
                 alias: Optional[str] = None, num_retries: Optional[int] = None,
                 retry_delay: Optional[float] = None, allow_agent: Optional[bool] = None,
                 timeout: Optional[float] = None, forward_ssh_agent: Optional[bool] = None,
                 proxy_host: Optional[str] = None, proxy_port: Optional[int] = None,
                 proxy_pkey: Union[str, bytes, None] = None, proxy_user: Optional[str] = None,
                 proxy_password: Optional[str] = None, _auth_thread_pool: bool = True,
                 keepalive_seconds: Optional[int] = None, identity_auth: Optional[bool] = None,
                 ipv6_only: Optional[bool] = None, compress: Optional[bool] = None,
                 keyboard_interactive: Optional[bool] = None,
                 passphrase: Optional[str] = None, cert_file: Optional[str] = None,
                 known_hosts: Optional[str] = None, host_key_policy: Optional[str] = None,
                 keepalive_count_max: Optional[int] = None, proxy_jump: Optional[str] = None,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 _jump_hosts: Optional[JumpHosts] = None,
                 ciphers: Optional[str] = None, macs: Optional[str] = None,
                 kex_algorithms: Optional[str] = None,
                 _via: Optional["SSHClient"] = None) -> None:
        self._via = _via
        self._own_jumps = _jump_hosts is None
        self._jumps = _jump_hosts
        super().__init__(
            host, user=user, password=password, port=port, pkey=pkey, alias=alias,
            num_retries=num_retries, retry_delay=retry_delay, allow_agent=allow_agent,
            timeout=timeout, proxy_host=proxy_host, proxy_port=proxy_port,
            _auth_thread_pool=_auth_thread_pool, identity_auth=identity_auth,
            ipv6_only=ipv6_only, compress=compress, keyboard_interactive=keyboard_interactive,
            ssh_config=ssh_config, forward_ssh_agent=forward_ssh_agent, proxy_pkey=proxy_pkey,
            proxy_user=proxy_user, proxy_password=proxy_password,
            keepalive_seconds=keepalive_seconds, passphrase=passphrase, cert_file=cert_file,
            known_hosts=known_hosts, host_key_policy=host_key_policy,
            keepalive_count_max=keepalive_count_max, proxy_jump=proxy_jump, ciphers=ciphers,
            macs=macs, kex_algorithms=kex_algorithms)

    # -- connecting ----------------------------------------------------------------

    def _connect(self, host: str, port: int, retries: int = 1) -> None:
        if self._via is None and self.resolved.jump_hops:
            self._via = self._connect_jump_hosts()
        if self._via is None:
            return super()._connect(host, port, retries)
        self._start_attempt()
        try:
            self._tunnel = Tunnel(self._via, host, port, timeout=self._attempt_left())
        except exc.ProxyTargetError:
            if retries < self.num_retries:
                sleep(self.retry_delay)
                return self._connect(host, port, retries=retries + 1)
            raise
        self.sock = self._tunnel.sock

    def _connect_jump_hosts(self) -> "SSHClient":
        hops = self.resolved.jump_hops
        if self._jumps is None:
            self._jumps = JumpHosts(SSHClient)
        settings = self.resolved.jump_options().given()
        try:
            return self._jumps.chain(hops, ssh_config=self._ssh_config or False,
                                     _jump_hosts=self._jumps, **settings)
        except Exception as err:
            route = ", ".join(f"{h}:{p}" if p else h for _, h, p in hops)
            raise exc.ProxyError("%s:%s: jump host %s failed: %s", self.host, self.port, route,
                                 err, host=self.host, port=self.port) from err

    def _init_session(self, retries: int = 1) -> None:
        """A new session on ``self.sock``: handshake (retried as parallel-ssh does), then the
        host key check (never retried)."""
        self.session = Session()
        self.session.set_blocking(False)
        prepare_session(self.session, self.resolved, self.host)
        try:
            self._driver.eagain(self.session.handshake, self.sock,
                                timeout=self._attempt_left(), what="SSH handshake")
        except Exception as err:
            if retries < self.num_retries:
                return self._connect_init_session_retry(retries=retries + 1)
            logger.error("%s:%s: SSH handshake failed: %s", self.host, self.port, err)
            raise exc.with_host(err, self.host, self.port)
        self._follow_connection()
        self._verify_host_key()

    def _follow_connection(self) -> None:
        """Once the driver closes the connection (a lost server, say), so does the client:
        the parallel client then connects afresh on the host's next use."""
        ref = weakref.ref(self)
        driver = self._driver

        def closed() -> None:
            client = ref()
            if client is not None and client.session is driver_session:
                client._disconnect()

        driver_session = driver.session
        driver.on_close.append(closed)

    def _verify_host_key(self) -> None:
        verify_host_key(self.session, self.resolved.host_key_name, self.port,
                        self.host_key_policy, self.known_hosts)

    def _after_auth(self) -> None:
        if not self.forward_ssh_agent:
            return
        agent_path = os.environ.get("SSH_AUTH_SOCK")
        if not agent_path:
            logger.warning("%s: agent forwarding asked for, but there is no local SSH agent "
                           "(SSH_AUTH_SOCK is not set): not forwarding", self.host)
            return
        self._agent = AgentForwarder(self._driver, agent_path)

    def configure_keepalive(self) -> None:
        """Keepalives every ``keepalive_seconds`` (no replies asked)."""
        self.session.keepalive_config(False, self.keepalive_seconds)

    def _keepalive(self) -> None:
        if self.keepalive_seconds:
            self._keepalive_greenlet = self._driver.start_keepalive(
                self.keepalive_seconds, self.keepalive_count_max or 0)

    # -- logging in ----------------------------------------------------------------

    def _login(self, attempt: Attempt) -> None:
        """Make one login call; AuthenticationError unless it logged us in."""
        self._driver.eagain(attempt.call, *attempt.args, timeout=self._attempt_left(),
                            what=attempt.what)
        if not accepted(self.session):
            # A partial success: the server wants another method as well.
            raise ssh2_exc.AuthenticationError(f"{attempt.what}: the server asks for more "
                                               f"methods")

    def _agent_auth(self) -> None:
        """Log in with the first key of the SSH agent the server accepts."""
        agent = self.session.agent_init()
        agent.connect()
        try:
            for attempt in agent_attempts(self.session, agent, self.user):
                try:
                    return self._login(attempt)
                except ssh2_exc.AuthenticationError:
                    continue
            raise ssh2_exc.AgentAuthenticationError(
                f"no key of the SSH agent was accepted for {self.user!r}")
        finally:
            disconnect_agent(agent)

    def _pkey_file_auth(self, pkey_file: str, password: Optional[str] = None) -> None:
        """Log in with a key file: its certificate first (``cert_file`` or
        ``<key>-cert.pub``), then the key itself, with its ``.pub`` when present.

        :class:`~pssh.exceptions.PKeyFileError` says what is wrong with the
        key (missing, a directory, not a key, encrypted without a passphrase,
        a wrong passphrase) rather than libssh2's one message for all of them.
        """
        info = inspect_key_file(pkey_file)
        with key_errors(info, f"private key file {pkey_file}", password):
            self._pkey_file_login(pkey_file, password)

    def _pkey_from_memory(self, pkey_data: bytes) -> None:
        # Key data is not a file: its problems are failed logins (retried and
        # reported as AuthenticationError, as parallel-ssh does), said plainly.
        passphrase = self.passphrase or self.password
        name = "the private key given in memory"
        info = inspect_key(pkey_data, name, error=ssh2_exc.AuthenticationError)
        with key_errors(info, name, passphrase, error=ssh2_exc.AuthenticationError):
            self._login(key_data_attempt(self.session, self.user, pkey_data, passphrase or ""))

    def _pkey_file_login(self, pkey_file: str, password: Optional[str]) -> None:
        *certificates, key = key_file_attempts(self.session, self.user, pkey_file,
                                               password or "", self.cert_file)
        for attempt in certificates:
            try:
                return self._login(attempt)
            except ssh2_exc.AuthenticationError as err:
                logger.debug("%s: %s refused: %s", self.host, attempt.what, err)
        self._login(key)

    def _password_auth(self) -> None:
        self._login(password_attempt(self.session, self.user, self.password,
                                     self.keyboard_interactive))

    # -- channels ----------------------------------------------------------------------

    def _open_session(self):
        return self._driver.exclusive(self.session.open_session, what="opening a channel")

    def open_session(self):
        """A new session channel (agent forwarding requested on it when on);
        :class:`~pssh.exceptions.SessionError` if it cannot be opened."""
        if self.session is None:
            raise exc.SessionError("%s:%s: the client is closed", self.host, self.port,
                                   host=self.host, port=self.port)
        try:
            channel = self._open_session()
        except (exc.Timeout, exc.ConnectionError):
            raise  # the connection itself failed (or was declared lost): said as such
        except Exception as err:
            raise exc.SessionError("%s:%s: cannot open a channel: %s", self.host, self.port,
                                   err, host=self.host, port=self.port) from err
        if self._agent is not None:
            self._agent.request(channel)
        return channel

    def _shell(self, channel) -> None:
        self.eagain(channel.shell)

    def _execute(self, cmd, use_pty: bool = False, channel=None):
        channel = self.open_session() if channel is None else channel
        try:
            if use_pty:
                self.eagain(channel.pty)
            self.eagain(channel.execute, cmd)
        except ssh2_exc.SSH2Error as err:
            raise exc.with_host(err, self.host, self.port)
        return channel

    # -- ending ------------------------------------------------------------------------

    def _disconnect(self) -> None:
        """Close the session, the socket, and jump host sessions of our own (idempotent)."""
        if self._agent is not None:
            self._agent.close()
            self._agent = None
        driver = self.__dict__.get("_driver_obj")
        session, self.session = self.session, None
        if session is not None and driver is not None and driver.session is session:
            driver.close()  # says goodbye without waiting
        self._keepalive_greenlet = None
        del session
        self._close_socket()
        if self._tunnel is not None:
            self._tunnel.close()
            self._tunnel = None
        if self._own_jumps and self._jumps is not None:
            self._jumps.close()
