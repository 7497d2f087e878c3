"""``SSHClient``: one host over libssh2, on gevent (parallel-ssh's API).

Every step is the session core's (:mod:`pssh.core`), run on the gevent
runner in the calling greenlet: the handshake and logins never block the hub
(parallel-ssh ran them blocking in a thread pool; ``_auth_thread_pool`` is
accepted and ignored).

Beyond parallel-ssh: the server's host key is verified against known_hosts
(``host_key_policy``: ``"accept-new"`` by default, ``"strict"``, or
``"off"``, which is logged); the OpenSSH client config is read; jump hosts
(``proxy_host``, ``proxy_jump``, ProxyJump) tunnel in-process; agent
forwarding, user and host certificates, ServerAliveCountMax.
"""
from __future__ import annotations

import logging
import weakref
from typing import Optional, Union

from pssh import exceptions as exc
from pssh.clients.base.single import BaseSSHClient, options_of
from pssh.clients.native.jump import JumpHosts
from pssh.clients.native.transfer import TransferMixin
from pssh.core import commands as core_commands
from pssh.core.establish import dialer, forward_agent
from pssh.core.handshake import check_host_key, start_session
from pssh.core.keepalive import start_keepalive
from pssh.core.link import Link
from pssh.core.waits import Task
from pssh.options import ConnectOptions
from pssh.ssh_config import SSHConfig
from ssh2.session import Session

logger = logging.getLogger(__name__)

__all__ = ["KeepAlive", "SSHClient"]


def __getattr__(name: str):
    if name == "THREAD_POOL":  # parallel-ssh's; nothing here runs in threads
        from gevent import get_hub
        return get_hub().threadpool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _new_session() -> Session:
    # Looked up in this module when called: parallel-ssh's tests replace ``Session`` here.
    return Session()


class KeepAlive:
    """The keepalives of one client (parallel-ssh's ``KeepAlive``): the core's keepalive
    task (:mod:`pssh.core.keepalive`), stopped with :meth:`stop`."""

    def __init__(self, task: Task) -> None:
        self._task = task

    @property
    def dead(self) -> bool:
        return self._task.done.is_set()

    def stop(self) -> None:
        self._task.cancel()


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
    puts first in the default; :func:`pssh.core.login.algorithm_list`),
    ``connect_timeout`` and ``request_timeout`` (the limits under ``timeout``).

    ``timeout`` bounds connecting and each request (opening a channel,
    starting a command) as a whole; ``read_timeout`` (per command) bounds
    reading its output; ``wait_finished(timeout=)`` waiting for it to end.
    """

    # Set by __init__; class defaults for subclasses that bypass it (parallel-ssh allows).
    _via: Optional["SSHClient"] = None
    _jumps: Optional[JumpHosts] = None
    _own_jumps = True
    _tunnel: Optional[Task] = None
    _agent = None

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
                 connect_timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None,
                 _via: Optional["SSHClient"] = None,
                 _options: Optional[ConnectOptions] = None) -> None:
        self._via = _via
        self._own_jumps = _jump_hosts is None
        self._jumps = _jump_hosts
        super().__init__(host, ssh_config=ssh_config, _options=options_of(locals(), _options))

    @classmethod
    def from_options(cls, host: str, options: ConnectOptions, *,
                     ssh_config: Union[str, SSHConfig, bool, None] = None,
                     jump_hosts: Optional[JumpHosts] = None) -> "SSHClient":
        """A client of ``host`` (connected and logged in, as the constructor's) with
        ``options`` already made: what the keyword arguments would give, for a program
        that makes many clients from options it resolved once (a parallel client, a
        poller). ``ssh_config`` completes them per host, as the constructor's.
        ``jump_hosts``: the connections to jump hosts, shared by the clients given the
        same one (whoever made it closes it); None, this client's own."""
        return cls(host, ssh_config=ssh_config, _jump_hosts=jump_hosts, _options=options)

    # -- connecting ----------------------------------------------------------------

    def _connect(self, host: str, port: int, retries: int = 1) -> None:
        if self._via is None and self.resolved.jump_hops:
            self._via = self._connect_jump_hosts()
        if self._via is None:
            return super()._connect(host, port, retries)
        self._start_attempt()
        dial = self._dial()
        self.sock = self._run(dial(retries))
        self._tunnel = dial.tunnel

    def _dial(self):
        """How to get a socket to the target (through the jump host when there is one)."""
        dest = self._destination()
        dest.hostname, dest.port = self._host, self._port
        return dialer(dest, self._via._link if self._via is not None else None, self._attempt)

    def _connect_jump_hosts(self) -> "SSHClient":
        hops = self.resolved.jump_hops
        if self._jumps is None:
            self._jumps = JumpHosts(SSHClient)
        options = self.resolved.jump_options()
        try:
            return self._run(self._jumps.chain_clients(
                hops, ssh_config=self._ssh_config or False, _jump_hosts=self._jumps,
                _options=options))
        except Exception as err:
            route = ", ".join(f"{h}:{p}" if p else h for _, h, p in hops)
            raise exc.ProxyError("%s:%s: jump host %s failed: %s", self.host, self.port, route,
                                 err, host=self.host, port=self.port) from err

    def _init_session(self, retries: int = 1) -> None:
        """A new session on ``self.sock``: handshake (retried on a new connection, as
        parallel-ssh does), then the host key check (never retried)."""
        dial = self._dial()
        assert self.sock is not None  # _connect() made it
        link = self._run(start_session(self._destination(), self.resolved, self.sock,
                                       _new_session, self._attempt, retries, dial=dial))
        if dial.tunnel is not None:
            self._tunnel = dial.tunnel
        self.sock, self.session = link.sock, link.session
        self.__dict__["_link_obj"] = link
        self._follow_connection()
        self._verify_host_key()

    def _follow_connection(self) -> None:
        """Once the link closes (a lost server, say), so does the client: the parallel
        client then connects afresh on the host's next use."""
        ref = weakref.ref(self)
        link = self._link

        def closed() -> None:
            client = ref()
            if client is not None and client.session is link_session:
                client._disconnect()

        link_session = link.session
        link.on_close.append(closed)

    def _verify_host_key(self) -> None:
        check_host_key(self._link, self.resolved)

    def _after_auth(self) -> None:
        if self.forward_ssh_agent:
            self._agent = forward_agent(self._link, None)

    def configure_keepalive(self) -> None:
        """Keepalives every ``keepalive_seconds`` (no replies asked)."""
        assert self.session is not None  # connected
        self.session.keepalive_config(False, self.keepalive_seconds)

    def _keepalive(self) -> None:
        if self.keepalive_seconds:
            self._keepalive_greenlet = KeepAlive(self._run(start_keepalive(
                self._link, self.keepalive_seconds, self.keepalive_count_max or 0)))

    # -- channels ----------------------------------------------------------------------

    def _open_session(self):
        return self._run(core_commands.open_channel(self._link, self._agent))

    def open_session(self):
        """A new session channel (agent forwarding requested on it when on);
        :class:`~pssh.exceptions.SessionError` if it cannot be opened."""
        if self.session is None:
            raise exc.SessionError("%s:%s: the client is closed", self.host, self.port,
                                   host=self.host, port=self.port)
        try:
            return self._open_session()
        except (exc.Timeout, exc.ConnectionError, exc.SessionError):
            raise  # the connection itself failed (or was declared lost): said as such
        except Exception as err:
            raise exc.SessionError("%s:%s: cannot open a channel: %s", self.host, self.port,
                                   err, host=self.host, port=self.port) from err

    def _execute(self, cmd, use_pty: bool = False, channel=None):
        if channel is None:
            if self.session is None:
                raise exc.SessionError("%s:%s: the client is closed", self.host, self.port,
                                       host=self.host, port=self.port)
            return self._run(core_commands.start_command(
                self._link, cmd, pty=() if use_pty else None, agent=self._agent))
        self._run(core_commands.start(self._link, channel, cmd,
                                      pty=() if use_pty else None))
        return channel

    # -- ending ------------------------------------------------------------------------

    def _disconnect(self) -> None:
        """Close the session, the socket, and jump host sessions of our own (idempotent)."""
        link: Optional[Link] = self.__dict__.get("_link_obj")
        session, self.session = self.session, None
        self._agent = None
        if session is not None and link is not None and link.session is session:
            link.close()  # says goodbye without waiting; stops keepalives and forwarding
        self._keepalive_greenlet = None
        del session
        self._close_socket()
        if self._tunnel is not None:
            self._tunnel.cancel()
            self._tunnel = None
        if self._own_jumps and self._jumps is not None:
            self._jumps.close()
