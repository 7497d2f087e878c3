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
from pssh.core.establish import begin_session
from pssh.core.handshake import check_host_key
from pssh.core.jump import route
from pssh.core.keepalive import start_keepalive
from pssh.core.link import Link
from pssh.core.waits import Task
from pssh.options import ConnectOptions
from pssh.runners.gevent import RUNNER
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

    ``runner`` (ours): ``"gevent"`` (default) waits on the hub for each step;
    ``"native"`` has one epoll set answer the waits of every client of the
    thread (:mod:`pssh.runners.native`), for less CPU per host when many run.
    """

    # Set by __init__; class defaults for subclasses that bypass it (parallel-ssh allows).
    _jumps: Optional[JumpHosts] = None
    _own_jumps = True

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
                 _via: Optional[Link] = None,
                 _options: Optional[ConnectOptions] = None, runner: Optional[str] = None) -> None:
        self._via = _via
        self._own_jumps = _jump_hosts is None
        self._jumps = _jump_hosts
        super().__init__(host, ssh_config=ssh_config, _options=options_of(locals(), _options),
                         runner=runner)

    @classmethod
    def from_options(cls, host: str, options: ConnectOptions, *,
                     ssh_config: Union[str, SSHConfig, bool, None] = None,
                     jump_hosts: Optional[JumpHosts] = None,
                     runner: Optional[str] = None) -> "SSHClient":
        """A client of ``host`` (connected and logged in, as the constructor's) with
        ``options`` already made: what the keyword arguments would give, for a program
        that makes many clients from options it resolved once (a parallel client, a
        poller). ``ssh_config`` completes them per host, as the constructor's.
        ``jump_hosts``: the connections to jump hosts, shared by the clients given the
        same one (whoever made it closes it); None, this client's own. ``runner``: as
        the constructor's."""
        return cls(host, ssh_config=ssh_config, _jump_hosts=jump_hosts, _options=options,
                   runner=runner)

    # -- connecting ----------------------------------------------------------------
    # Each step calls the core's (pssh.core.establish); the base class runs them in the
    # core's order. Here: jump hosts, and the session on the connected socket.

    def _connect(self, host: str, port: int, retries: int = 1) -> None:
        if self._via is None and self.resolved.jump_hops:
            self._via = self._connect_jump_hosts()
        super()._connect(host, port, retries)

    def _connect_jump_hosts(self) -> Link:
        """The connection of the last jump host, each hop logged in by the core's
        sequence and shared with every target behind it (:class:`JumpHosts`)."""
        hops = self.resolved.jump_hops
        if self._jumps is None:
            self._jumps = JumpHosts()
        try:
            # On the plain runner: a hop is resolved and reached under its own settings,
            # not through this client's resolver (which filters by this host's ipv6_only).
            return RUNNER.run(self._jumps.chain_links(hops, self.resolved.jump_options(),
                                                      self._ssh_config))
        except Exception as err:
            raise exc.ProxyError("%s:%s: jump host %s failed: %s", self.host, self.port,
                                 route(hops), err, host=self.host, port=self.port) from err

    def _init_session(self, retries: int = 1) -> None:
        """A new session on ``self.sock``: handshake (retried on a new connection, as
        parallel-ssh does), then the host key check (never retried): the core's
        :func:`~pssh.core.establish.begin_session`."""
        assert self.sock is not None  # _connect() made it
        dial = self._dial(self._host, self._port)
        dial.tunnel, self._tunnel = self._tunnel, None  # the session's link takes it over
        self._run(begin_session(self._destination(), self.resolved, self.sock, _new_session,
                                self._attempt, dial, retries, started=self._started,
                                verify=lambda link: self._verify_host_key()))

    def _started(self, link: Link) -> None:
        """The session is up: it is this client's from now on."""
        self.sock, self.session = link.sock, link.session
        self.__dict__["_link_obj"] = link
        self._follow_connection()

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
        return self._run(core_commands.open_channel(self._link, self._link.agent))

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
                self._link, cmd, pty=() if use_pty else None, agent=self._link.agent))
        self._run(core_commands.start(self._link, channel, cmd,
                                      pty=() if use_pty else None))
        return channel

    # -- ending ------------------------------------------------------------------------

    def _disconnect(self) -> None:
        """Close the session, the socket, and jump host sessions of our own (idempotent)."""
        link: Optional[Link] = self.__dict__.get("_link_obj")
        session, self.session = self.session, None
        if session is not None and link is not None and link.session is session:
            link.close()  # says goodbye without waiting; stops keepalives and forwarding
        self._keepalive_greenlet = None
        del session
        self._close_socket()
        self._drop_tunnel()
        if self._own_jumps and self._jumps is not None:
            self._jumps.close()
