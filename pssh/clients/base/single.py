"""One host, parallel-ssh's way: the ``SSHClient`` API as a shell over the session core.

:class:`BaseSSHClient` keeps parallel-ssh's structure, whose steps programs
and tests call and replace: ``_connect`` -> ``_init_session`` ->
``_auth_retry`` (``auth``: ``_pkey_auth``, ``_agent_auth``,
``_identity_auth``, ``_password_auth``) -> ``_start_services`` (``_keepalive``,
then agent forwarding). Each step runs the core's procedure for it
(:mod:`pssh.core.establish`: a :class:`~pssh.core.establish.Dialer`,
:func:`~pssh.core.establish.begin_session`, the login order,
:func:`~pssh.core.establish.start_services`) on the gevent runner, in the calling
greenlet; the order of login methods, of the services, and every retry are the
core's. :class:`pssh.clients.native.single.SSHClient` adds jump hosts and
transfers.

Retries follow parallel-ssh's ``num_retries``: at most that many attempts
(at least one) to resolve and connect, to handshake, and to log in, with
``retry_delay`` seconds between them. A refused connection is final at once,
as a timeout during login is.
"""
from __future__ import annotations

import functools
import logging
import os
import shlex
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator, List, Optional, Union

import gevent
from gevent import socket

from pssh import exceptions as exc
from pssh.core.cancel import new_marker, with_marker
from pssh.clients.common import _validate_api, _validate_pkey
from pssh.clients.reader import ChannelReader, ConcurrentRWBuffer
from pssh.core import commands as core_commands
from pssh.core.auth import DEFAULT_IDENTITIES, Credentials, LoginMethods, login, \
    login_retrying
from pssh.core.connect import Destination
from pssh.core.establish import Dialer, dialer, start_services
from pssh.core.handshake import Attempt, named
from pssh.core.link import Link
from pssh.core.waits import Blocking, Procedure, Task, pause
from pssh.core.deadlines import deadline_after
from pssh.core import freshness
from pssh.core.keys import read_key_file
from pssh.core.lines import MAX_LINE, LongLines, split_lines
from pssh.core.settings import decided
from pssh.options import ConnectOptions, Resolved, ssh_config_of
from pssh.output import HostOutput, HostOutputBuffers
from pssh.runners import RUNNERS
from pssh.runners.gevent import GeventRunner
from pssh.ssh_config import SSHConfig
from ssh2.session import Session

host_logger = logging.getLogger("pssh.host_logger")
logger = logging.getLogger(__name__)

#: Seconds given to signalling the processes of a cancellable command whose start was cut
#: short (:meth:`BaseSSHClient._signal_marked_later`).
STOP_TIMEOUT = 10.0

_named = named  # parallel-ssh era name, kept for callers

_GEVENT_SOCKET = socket


def _key_path(pkey: str) -> str:
    """A key path as given, ``~`` expanded and normalised."""
    return os.path.normpath(os.path.expanduser(pkey))


def runner_kind(runner: Optional[str]) -> str:
    """``runner`` checked, one of :data:`pssh.runners.RUNNERS` (a client given none
    takes the environment's ``PSSH_RUNNER``, else ``"gevent"``)."""
    if runner is None:
        runner = os.environ.get("PSSH_RUNNER") or "gevent"
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {RUNNERS}, not {runner!r}")
    return runner


def on_this_host(method):
    """A client method whose errors name the client's host and port, whatever raised
    them (see :func:`pssh.exceptions.with_host`)."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with exc.on_host(self.host, self.port):
            return method(self, *args, **kwargs)
    return call


def options_of(values: dict, base: Optional[ConnectOptions] = None) -> ConnectOptions:
    """The settings among ``values`` (a client's keyword arguments) as options, over
    ``base`` (options handed down whole, by the parallel client or a jump chain)."""
    given = ConnectOptions.of(values)
    return given if base is None else given.over(base)


class PollMixIn:
    """``poll``/``eagain``/``eagain_write`` on the client's session (parallel-ssh's
    co-operative polling API), each a core procedure on the client's runner."""

    session: Optional[Session] = None
    sock: Optional[socket.socket] = None
    host = ""
    port = 22
    timeout: Optional[float] = None
    _runner: GeventRunner = GeventRunner()

    @property
    def _link(self) -> Link:
        """The core's link for the current session and socket (a new one if either was
        replaced, as programs and tests may do)."""
        link = self.__dict__.get("_link_obj")
        if link is None or link.session is not self.session or link.sock is not self.sock:
            link = Link(self.sock, self.session, self.host, self.port, self.timeout)
            self.__dict__["_link_obj"] = link
        return link

    def _run(self, procedure):
        """Drive a core procedure to its end in this greenlet."""
        return self._runner.run(procedure)

    def poll(self, timeout: Optional[float] = None) -> None:
        """Wait once for the socket, in the direction the session is blocked on."""
        if self.session is not None and self.sock is not None:
            self._run(self._link.wait(timeout, "waiting for the server"))

    def eagain(self, func, *args, **kwargs):
        """``func(*args, **kwargs)``, called again after each EAGAIN until it gives a
        result; the whole call is bounded by ``timeout``."""
        if kwargs:
            return self._run(self._link.call(lambda *a: func(*a, **kwargs), *args,
                                             what=getattr(func, "__name__", "")))
        return self._run(self._link.call(func, *args))

    def eagain_write(self, write_func, data: bytes) -> None:
        """Write all of ``data`` with ``write_func`` (returning ``(rc, written)``), resuming
        after each EAGAIN from the last byte written."""
        self._run(self._link.write(write_func, data))


class Stdin:
    """A command's standard input: ``write`` and ``flush``; ``close`` ends it (sends EOF)."""

    __slots__ = ("_channel", "_client", "_reader")

    def __init__(self, channel, client: "BaseSSHClient",
                 reader: Optional[ChannelReader] = None) -> None:
        self._channel = channel
        self._client = client
        self._reader = reader

    def write(self, data: Union[str, bytes]) -> None:
        """Send ``data`` (str is UTF-8 encoded) whole."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        if self._reader is not None:
            self._reader.write(data)
        else:
            self._client.eagain_write(self._channel.write, data)

    def flush(self) -> None:
        """Kept for parallel-ssh's API: ``write`` has sent the data already. (libssh2's
        ``channel_flush`` would throw away unread output, so it is never called.)"""
        if self._reader is not None:
            self._reader.flush()

    def close(self) -> None:
        """End the input: the command sees end of file."""
        if self._reader is not None:
            self._reader.send_eof()
        else:
            self._client.eagain(self._channel.send_eof)


class InteractiveShell:
    """A login shell on its own channel, fed command lines on its standard input.

    Without a pty (as ``ssh host < script``): no prompts or echo in the
    output, stdout and stderr apart. As a context manager, ``close`` runs on
    exit: input ends, the shell runs what it was sent and exits, and
    ``exit_code`` is that of the last command (or of an explicit ``exit``)::

        with client.open_shell() as shell:
            shell.run("cd /tmp")
            shell.run("pwd")
        print(list(shell.stdout), shell.exit_code)
    """

    __slots__ = ("_chan", "_client", "output", "_encoding", "_closed")
    _EOL = b"\n"

    def __init__(self, channel, client: "BaseSSHClient", encoding: str = "utf-8",
                 read_timeout: Optional[float] = None) -> None:
        self._chan = channel
        self._client = client
        self._encoding = encoding
        self._closed = False
        self._client._shell(self._chan)
        self.output = self._client._make_host_output(
            self._chan, encoding=encoding, read_timeout=read_timeout,
            fully_qualified_command=None)

    @property
    def stdout(self) -> Iterator[str]:
        return self.output.stdout

    @property
    def stderr(self) -> Iterator[str]:
        return self.output.stderr

    @property
    def stdin(self) -> Stdin:
        return self.output.stdin

    @property
    def exit_code(self) -> Optional[int]:
        return self.output.exit_code

    def __enter__(self) -> "InteractiveShell":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> Optional["InteractiveShell"]:
        """End the shell's input and wait for it to exit (its output stays readable)."""
        if self._chan is None:
            return None
        self._closed = True
        self.output.stdin.close()
        self._client.wait_finished(self.output)
        return self

    def run(self, cmd: Union[str, Iterable[str]]) -> None:
        """Send one command line (``\\n`` is added), or each of several."""
        if self._closed:
            raise exc.ShellError("%s:%s: the shell's input is closed", self._client.host,
                                 self._client.port, host=self._client.host,
                                 port=self._client.port)
        lines = [cmd] if isinstance(cmd, str) else list(cmd)
        self._client.eagain_write(self._chan.write, b"".join(
            line.encode(self._encoding) + self._EOL for line in lines))


def in_greenlet(method, *args, **kwargs):
    """A procedure that calls the client's (blocking) ``method``: for steps of the core
    that parallel-ssh's API lets programs replace. The gevent runner calls it in the
    greenlet driving the procedure; the native runner in a greenlet of its own."""
    return (yield Blocking(method, args, kwargs))


def _kept(client: "BaseSSHClient", *names: str) -> bool:
    """Whether ``client``'s class keeps these methods as :class:`BaseSSHClient` has them."""
    cls = type(client)
    return all(getattr(cls, name) is getattr(BaseSSHClient, name) for name in names)


class _ClientLogins:
    """The core's login order calls these; each is the client's overridable method, so
    that a program which replaces ``_agent_auth`` (say) keeps working."""

    def __init__(self, client: "BaseSSHClient") -> None:
        self.client = client

    def key(self, key):
        client = self.client
        if _kept(client, "_pkey_auth", "_pkey_file_auth", "_pkey_from_memory"):
            # No program replaced these steps: the login is the core's procedure, run
            # where this one runs (no greenlet of its own for it, no nested run).
            return client._pkey_login(key)
        return in_greenlet(client._pkey_auth, key)

    def agent(self):
        return in_greenlet(self.client._agent_auth)

    def identities(self):
        return in_greenlet(self.client._identity_auth)

    def password(self):
        return in_greenlet(self.client._password_auth)


class BaseSSHClient(PollMixIn):
    """An SSH connection to one host: connects and logs in on creation.

    Arguments are the settings of :class:`~pssh.options.ConnectOptions` (each
    defaults to the OpenSSH client config, then to parallel-ssh's default) plus
    ``ssh_config`` (a path, an :class:`~pssh.ssh_config.SSHConfig`, or ``False``
    for none; default ``~/.ssh/config``). ``_auth_thread_pool`` is accepted and
    ignored: logins never block the event loop here.
    """

    #: Key files tried when no ``pkey`` is given (``identity_auth``), unless the
    #: ssh config names IdentityFiles (OpenSSH's order; the core's default).
    IDENTITIES = DEFAULT_IDENTITIES

    # Set while connecting; class defaults for subclasses that bypass __init__ (as
    # parallel-ssh's own tests do).
    #: The connection this one is tunnelled through (a jump host's), None when direct.
    _via: Optional[Link] = None
    #: The tunnel ``sock`` runs over until a session on it owns it (None when direct).
    _tunnel: Optional[Task] = None

    def __init__(self, host: str, user: Optional[str] = None, password: Optional[str] = None,
                 port: Optional[int] = None, pkey: Union[str, bytes, None] = None,
                 alias: Optional[str] = None, num_retries: Optional[int] = None,
                 retry_delay: Optional[float] = None, allow_agent: Optional[bool] = None,
                 timeout: Optional[float] = None, proxy_host: Optional[str] = None,
                 proxy_port: Optional[int] = None, _auth_thread_pool: bool = True,
                 identity_auth: Optional[bool] = None, ipv6_only: Optional[bool] = None,
                 compress: Optional[bool] = None, keyboard_interactive: Optional[bool] = None,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 _options: Optional[ConnectOptions] = None, runner: Optional[str] = None,
                 **more_options) -> None:
        _options = options_of({**locals(), **more_options}, _options)
        self.runner = runner_kind(runner)
        # The files the log-in reads (ssh_config, the key, known_hosts) are looked at
        # once for all the hosts logging in meanwhile, not once or more per host.
        with freshness.logins():
            self._ssh_config = ssh_config_of(ssh_config)
            resolved = _options.resolve(host, self._ssh_config)
            # From here on every failure concerns this host: a bad key file, the
            # connection, the login... (PKeyFileError for a key file, as parallel-ssh).
            with exc.on_host(host, resolved.port):
                self._apply(resolved, host)
                _validate_api(self.keyboard_interactive, self.password)
                self._init()

    def _apply(self, resolved: Resolved, host: str) -> None:
        """Set the client's attributes (parallel-ssh's names) from the resolved options."""
        o = resolved.options
        self.resolved = resolved
        self.host = host
        self.hostname = resolved.hostname
        self.alias = o.alias
        self.user = resolved.user
        self.password = o.password
        self.passphrase = o.passphrase
        self.port = resolved.port
        self.num_retries = decided(o.num_retries)
        self.retry_delay = decided(o.retry_delay)
        self.timeout = resolved.timeout
        self.allow_agent = o.allow_agent
        self.identity_auth = o.identity_auth
        self.keyboard_interactive = o.keyboard_interactive
        self.ipv6_only = o.ipv6_only
        self.compress = o.compress
        self.forward_ssh_agent = o.forward_ssh_agent
        self.keepalive_seconds = decided(o.keepalive_seconds)
        self.keepalive_count_max = decided(o.keepalive_count_max)
        self.known_hosts = o.known_hosts
        self.host_key_policy = o.host_key_policy
        self.cert_file = resolved.cert_file
        # ``pkey`` holds the key's bytes, as parallel-ssh's clients have it; the
        # file's path is kept so that libssh2 can read it with its .pub (cheaper).
        self._pkey_file = _key_path(o.pkey) if isinstance(o.pkey, str) else None
        if self._pkey_file is not None:
            try:  # read once for all hosts while it stays as it is
                self.pkey: Union[str, bytes, None] = read_key_file(self._pkey_file).data
            except exc.PKeyFileError:
                _validate_pkey(o.pkey)  # a missing file: parallel-ssh's message
                raise  # a directory, garbage...: the reader's
        else:
            self.pkey = o.pkey
        self._pkey_data = self.pkey
        self.session = None
        self.sock = None
        self._host, self._port = resolved.hostname, resolved.port
        self._readers: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._keepalive_greenlet: Optional[Any] = None  # the native client's KeepAlive
        self._runner = self._make_runner()
        self._attempt = Attempt(resolved.connect_timeout)

    def _make_runner(self) -> Any:
        """The runner of this client's procedures (``runner=``: see :data:`RUNNERS`)."""
        if self.runner == "native":
            from pssh.runners.native import NativeRunner
            if self._resolves_and_connects_as_the_core():
                return NativeRunner()
            return NativeRunner(resolve=self._resolve_for_core,
                                connect=self._socket_for_core)
        # Each client resolves and connects through its own methods (parallel-ssh's
        # tests replace this module's socket).
        return GeventRunner(resolve=self._resolve_for_core, connect=self._socket_for_core)

    def _resolves_and_connects_as_the_core(self) -> bool:
        """Whether this client's class keeps parallel-ssh's resolve and connect steps as
        they are (then the native runner makes the connection itself, non-blocking),
        and this module's ``socket`` is gevent's (programs and tests may replace it)."""
        cls = type(self)
        return (cls._get_addr_info is BaseSSHClient._get_addr_info
                and cls._resolve_for_core is BaseSSHClient._resolve_for_core
                and cls._socket_for_core is BaseSSHClient._socket_for_core
                and socket is _GEVENT_SOCKET)

    def _init(self) -> None:
        """Connect, handshake, log in, start the services; on any failure release
        everything. The steps are the core's (:mod:`pssh.core.establish`), each called
        from the method programs replace."""
        try:
            self._connect(self._host, self._port)
            self._init_session()
            self._auth_retry()
            self._start_services()
        except BaseException:
            self._disconnect()
            raise

    def _start_services(self) -> None:
        """What follows the login, in the core's order
        (:func:`~pssh.core.establish.start_services`): keepalives through this client's
        ``_keepalive`` (parallel-ssh's step), then agent forwarding if asked for."""
        self._run(start_services(self._link, self.resolved,
                                 keepalive=lambda: in_greenlet(self._keepalive)))

    # -- connecting ----------------------------------------------------------------

    def _destination(self) -> Destination:
        return Destination.of(self.host, self.resolved)

    def _get_addr_info(self, host: str, port: int) -> list:
        # Through gevent's resolver, even for an IP address (a thread hop each):
        # parallel-ssh's own tests patch this very call and check it was made.
        addr_info = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        if self.ipv6_only:
            filtered = [a for a in addr_info if a[0] == socket.AF_INET6]
            if not filtered:
                raise exc.NoIPv6AddressFoundError(
                    "IPv6 only was asked for, and host %s has no IPv6 address among %s",
                    host, [a[4] for a in addr_info], host=host, port=port)
            addr_info = filtered
        return addr_info

    def _resolve_for_core(self, host: str, port: int) -> list:
        return self._get_addr_info(host, port)

    def _socket_for_core(self, family, kind, address, timeout: Optional[float]):
        sock = socket.socket(family, kind)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except BaseException:
            try:
                sock.close()
            except Exception:  # a replaced or broken socket object: nothing to release
                pass
            raise
        return sock

    def _start_attempt(self) -> None:
        """A new attempt to connect, handshake and log in: the connect timeout bounds it
        as a whole, whatever the server sends meanwhile."""
        self._attempt.start()

    def _attempt_left(self) -> Optional[float]:
        return self._attempt.left()

    def _dial(self, host: str, port: int) -> Dialer:
        """The core's way to ``host:port``: directly, or through ``_via``'s server."""
        dest = self._destination()
        dest.hostname, dest.port = host, port
        return dialer(dest, self._via, self._attempt)

    def _connect(self, host: str, port: int, retries: int = 1) -> None:
        """Open ``self.sock`` to ``host:port``, trying each address it resolves to (through
        the jump host's tunnel when there is one): the core's
        :class:`~pssh.core.establish.Dialer`."""
        self._start_attempt()
        self._drop_tunnel()  # a socket's left from before, which no session took over
        dial = self._dial(host, port)
        self.sock = self._run(dial(retries))
        self._tunnel = dial.tunnel

    def _drop_tunnel(self) -> None:
        tunnel, self._tunnel = self._tunnel, None
        if tunnel is not None:
            tunnel.cancel()

    def _close_socket(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.close()
            except Exception:  # a replaced or broken socket object: nothing to release
                pass

    def _init_session(self, retries: int = 1) -> None:
        raise NotImplementedError

    def _disconnect_eagain(self) -> None:
        if self.session is not None and self.sock is not None and not self.sock.closed:
            self.eagain(self.session.disconnect)

    def _connect_init_session_retry(self, retries: int) -> None:
        """Drop the failed session and connection, wait, connect again, handshake again."""
        try:
            self._disconnect_eagain()
        except Exception:
            pass
        self.session = None
        self._close_socket()
        self._run(pause(self.retry_delay))
        self._connect(self._host, self._port, retries=retries)
        return self._init_session(retries=retries)

    # -- logging in ----------------------------------------------------------------

    def _credentials(self) -> Credentials:
        """Who logs in with what, for the core's login order."""
        keys = () if self.pkey is None else (self.pkey,)
        return Credentials(
            self.user, keys=keys, password=self.password, passphrase=self.passphrase,
            allow_agent=bool(self.allow_agent), identity_auth=bool(self.identity_auth),
            identities=self.resolved.identity_files or tuple(self.IDENTITIES),
            keyboard_interactive=bool(self.keyboard_interactive), cert_file=self.cert_file)

    def _login_methods(self) -> LoginMethods:
        """The core's login methods on this client's session."""
        return LoginMethods(self._link, self._credentials(), self._attempt)

    def _auth_retry(self, retries: int = 1) -> None:
        """:meth:`auth`, tried again after a failure (``num_retries``, the core's rule)."""
        if retries > 1:
            self._start_attempt()
        self._run(login_retrying(self._link, self._credentials(), _ClientLogins(self),
                                 self._attempt, self.num_retries, self.retry_delay,
                                 first_try=retries))

    def auth(self) -> None:
        """Log in: with ``pkey`` if given (and nothing else); otherwise with the
        agent (``allow_agent``), the default identities (``identity_auth``), then
        the password (the core's order, :mod:`pssh.core.auth`). Raises
        :class:`~pssh.exceptions.AuthenticationError`."""
        self._run(login(self._link, self._credentials(), _ClientLogins(self)))

    def _identity_files(self) -> tuple:
        return self.resolved.identity_files or tuple(self.IDENTITIES)

    def _identity_auth(self) -> None:
        methods = self._login_methods()
        methods.creds.identities = self._identity_files()
        self._run(methods.identities())

    def _pkey_auth(self, pkey: Union[str, bytes]) -> None:
        if isinstance(pkey, str):
            return self._pkey_file_auth(pkey, password=self.passphrase or self.password)
        if pkey is self._pkey_data and self._pkey_file is not None:
            # The key was read from this file: log in with the file (its .pub beside it
            # spares deriving the public key; a certificate beside it is tried first).
            return self._pkey_file_auth(self._pkey_file,
                                        password=self.passphrase or self.password)
        return self._pkey_from_memory(pkey)

    def _pkey_login(self, pkey: Union[str, bytes]) -> Procedure[None]:
        """What :meth:`_pkey_auth` does, as one procedure (for a class that keeps it)."""
        methods = self._login_methods()
        if isinstance(pkey, str) or (pkey is self._pkey_data and self._pkey_file is not None):
            passphrase = self.passphrase or self.password
            if passphrase is not None:
                methods.creds.passphrase = passphrase
            return methods.key_file(pkey if isinstance(pkey, str) else str(self._pkey_file))
        return methods.key_data(pkey)

    def _agent_auth(self) -> None:
        self._run(self._login_methods().agent())

    def _password_auth(self) -> None:
        self._run(self._login_methods().password())

    def _pkey_file_auth(self, pkey_file: str, password: Optional[str] = None) -> None:
        """Log in with a key file: its certificate first (``cert_file`` or
        ``<key>-cert.pub``), then the key itself, with its ``.pub`` when present.
        :class:`~pssh.exceptions.PKeyFileError` says what is wrong with the key."""
        methods = self._login_methods()
        if password is not None:
            methods.creds.passphrase = password
        self._run(methods.key_file(pkey_file))

    def _pkey_from_memory(self, pkey_data: bytes) -> None:
        self._run(self._login_methods().key_data(pkey_data))

    def _keepalive(self) -> None:
        raise NotImplementedError

    # -- ending --------------------------------------------------------------------

    def disconnect(self) -> None:
        """Deprecated, and does nothing (as in parallel-ssh 2.x): the connection closes
        when the client and every output of it are gone. :meth:`close` closes it now."""
        warnings.warn("SSHClient.disconnect() does nothing; use close() or a with block",
                      DeprecationWarning, stacklevel=2)

    def close(self) -> None:
        """Close the connection now (idempotent); outputs not yet read are lost."""
        self._disconnect()

    def _disconnect(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "BaseSSHClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self._disconnect()

    # -- commands ------------------------------------------------------------------

    def open_session(self):
        raise NotImplementedError

    def _shell(self, channel) -> None:
        self._run(core_commands.start(self._link, channel, None))

    @on_this_host
    def open_shell(self, encoding: str = "utf-8",
                   read_timeout: Optional[float] = None) -> InteractiveShell:
        """A login shell on a new channel, to feed commands to (see :class:`InteractiveShell`)."""
        channel = self.open_session()
        try:
            return InteractiveShell(channel, self, encoding=encoding, read_timeout=read_timeout)
        except Exception as err:
            raise exc.ShellError("%s:%s: cannot start a shell: %s", self.host, self.port, err,
                                 host=self.host, port=self.port) from None

    @staticmethod
    def _wrap_command(command: str, sudo: bool, user: Optional[str],
                      shell: Optional[str]) -> str:
        """``command`` run through ``shell`` (e.g. ``"bash -c"``; the login shell's
        ``$SHELL -c`` when sudo or user need one), under sudo as asked."""
        if not sudo and not user and not shell:
            return command
        prefix = f"sudo -u {shlex.quote(user)} -S " if user else "sudo -S " if sudo else ""
        return f"{prefix}{shell or '$SHELL -c'} {shlex.quote(command)}"

    @on_this_host
    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    use_pty: bool = False, shell: Optional[str] = None,
                    encoding: str = "utf-8", timeout: Optional[float] = None,
                    read_timeout: Optional[float] = None, errors: str = "replace",
                    cancellable: bool = False) -> HostOutput:
        """Start ``command``; its output streams from the :class:`~pssh.output.HostOutput`.

        The command is sent encoded with ``encoding``, which also decodes its
        output (``errors``: how undecodable bytes are decoded). Opening the
        channel and starting the command are bounded by the client's
        ``timeout``. ``read_timeout`` bounds each iteration of stdout/stderr
        as a whole (``timeout`` here is its older name). ``cancellable``
        (ours): :meth:`cancel` can stop it even without a pty (see
        :mod:`pssh.core.cancel`; it prefixes the command with an ``export``).
        """
        marker = new_marker() if cancellable else None
        if marker is not None:
            command = with_marker(command, marker)
        wrapped = self._wrap_command(command, sudo, user, shell).encode(encoding)
        try:
            channel = self._execute(wrapped, use_pty=use_pty)
        except BaseException:
            if marker is not None:
                self._signal_marked_later(marker)
            raise
        logger.debug("%s: started %r", self.host, wrapped)
        host_out = self._make_host_output(channel, encoding, read_timeout or timeout,
                                          fully_qualified_command=wrapped, errors=errors)
        buffers = host_out.buffers
        # _make_host_output gave it a channel's reader (CommandOutput is a worker's).
        assert buffers is not None and isinstance(buffers.stdout.reader, ChannelReader)
        buffers.stdout.reader.marker = marker
        return host_out

    @on_this_host
    def cancel(self, host_output: HostOutput, signal: str = "TERM",
               timeout: Optional[float] = 10) -> bool:
        """Stop the command of ``host_output`` if it is still running; True if it was.

        Sends it ``signal`` (a "signal" request; servers may refuse it), then
        for a ``cancellable`` command signals every process that carries its
        marker, then closes its channel (which hangs up a command with a pty).
        Output read so far stays readable. ``timeout`` bounds the whole. A
        command with neither marker nor pty, on a server that refuses the
        signal, keeps running (as with ssh); its channel is given up here.
        """
        reader = self._reader_of(host_output.channel)
        if reader is None or reader.closed:
            return False
        return self._run(core_commands.stop(self._link, reader.streams, signal, timeout))

    def _signal_marked_later(self, marker: str) -> None:
        """A cancellable command whose start was cut short (its greenlet killed: a stopped
        run, a timeout): the server may have started it all the same (the request was
        sent), and without a pty would leave it running. Its marked processes are sent
        TERM from a greenlet of their own (the one cut short is on its way out)."""
        if self.session is None:
            return
        link = self._link

        def signal_them() -> None:
            try:
                self._run(core_commands.signal_marked(link, marker, "TERM", STOP_TIMEOUT))
            except Exception as err:  # the connection closed or was lost meanwhile
                logger.debug("%s: signalling a command cut short failed: %s", self.host, err)
        gevent.spawn(signal_them)

    def execute(self, cmd: str, use_pty: bool = False, channel=None):
        """Deprecated: use :meth:`run_command`. Starts ``cmd``; returns its channel."""
        warnings.warn("execute() is deprecated; use run_command", DeprecationWarning,
                      stacklevel=2)
        return self._execute(cmd, use_pty=use_pty, channel=channel)

    def _execute(self, cmd, use_pty: bool = False, channel=None):
        raise NotImplementedError

    def _make_host_output(self, channel, encoding: str, read_timeout: Optional[float],
                          fully_qualified_command: Optional[bytes] = None,
                          errors: str = "replace") -> HostOutput:
        reader = ChannelReader(self, channel)
        self._readers[id(channel)] = reader
        return HostOutput(self.host, channel, Stdin(channel, self, reader), self,
                          alias=self.alias, encoding=encoding, read_timeout=read_timeout,
                          buffers=HostOutputBuffers.of(reader),
                          fully_qualified_command=fully_qualified_command, errors=errors)

    def _reader_of(self, channel) -> Optional[ChannelReader]:
        reader = self._readers.get(id(channel))
        return reader if reader is not None and reader.channel is channel else None

    # -- output ----------------------------------------------------------------------

    def read_output(self, stdout_buffer: ConcurrentRWBuffer,
                    timeout: Optional[float] = None, max_line: Optional[int] = MAX_LINE,
                    on_split: Optional[Callable[[], None]] = None) -> Iterator[bytes]:
        """Lines (bytes) of a stream buffer as they come; the whole iteration bounded by
        ``timeout`` (:class:`~pssh.exceptions.Timeout`). A line longer than ``max_line``
        bytes (None: no limit) comes in pieces of that size; ``on_split()`` is called
        for each (by default the first is logged as a warning naming the host)."""
        return self._read_output_buffer(stdout_buffer, timeout, max_line, on_split)

    def read_stderr(self, stderr_buffer: ConcurrentRWBuffer,
                    timeout: Optional[float] = None, max_line: Optional[int] = MAX_LINE,
                    on_split: Optional[Callable[[], None]] = None) -> Iterator[bytes]:
        """As :meth:`read_output`, for the standard error buffer."""
        return self._read_output_buffer(stderr_buffer, timeout, max_line, on_split)

    def _read_output_buffer(self, _buffer: ConcurrentRWBuffer,
                            timeout: Optional[float] = None,
                            max_line: Optional[int] = MAX_LINE,
                            on_split: Optional[Callable[[], None]] = None) -> Iterator[bytes]:
        # The deadline starts when iteration starts, as the caller expects.
        if on_split is None:
            on_split = LongLines(self.host, max_line)
        yield from split_lines(_buffer.chunks(deadline_after(timeout)), max_line, on_split)

    def read_output_buffer(self, output_buffer: Iterable[bytes], prefix: Optional[str] = None,
                           callback=None, callback_args=None, encoding: str = "utf-8",
                           errors: str = "replace") -> Iterator[str]:
        """Decode lines, logging each to ``pssh.host_logger`` as ``[host]<prefix>\\tline``;
        ``callback(*callback_args)`` once they are all read."""
        prefix = prefix or ""
        log_lines = host_logger.isEnabledFor(logging.INFO)
        for line in output_buffer:
            text = line.decode(encoding, errors)
            if log_lines:
                host_logger.info("[%s]%s\t%s", self.host, prefix, text)
            yield text
        if callback:
            callback(*(callback_args or ()))

    @on_this_host
    def wait_finished(self, host_output: HostOutput, timeout: Optional[float] = None,
                      consume_output: bool = False) -> None:
        """Wait for the command to end (its output is kept for reading, or with
        ``consume_output`` discarded as it comes), then close its channel;
        :class:`~pssh.exceptions.Timeout` after ``timeout`` seconds."""
        if not isinstance(host_output, HostOutput):
            raise ValueError(f"{host_output!r} is not a HostOutput")
        channel = host_output.channel
        if channel is None:
            return
        reader = self._reader_of(channel)
        if reader is None:  # a channel of the caller's own: read it with the core's streams
            reader = ChannelReader(self, channel)
        reader.wait_eof(timeout, consume=consume_output)

    def close_channel(self, channel) -> None:
        """Close ``channel`` (output read so far stays readable)."""
        reader = self._reader_of(channel)
        if reader is not None:
            reader.close()
        else:
            self.eagain(channel.close)

    def finished(self, channel) -> Optional[bool]:
        """Whether the command on ``channel`` has ended (None for no channel); never blocks."""
        if channel is None:
            return None
        reader = self._reader_of(channel)
        if reader is not None and reader.at_eof:
            return True
        return bool(channel.eof())

    def get_exit_status(self, channel) -> Optional[int]:
        """The exit status of the command on ``channel``, or None while not known."""
        if channel is None:
            return None
        reader = self._reader_of(channel)
        if reader is not None:
            return reader.exit_code
        if not channel.eof():
            return None
        return channel.get_exit_status()

    # -- directory trees (the walk is the core's; the transfers the subclass's) -----------

    def _copy_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        raise NotImplementedError

    def _scp_send_dir(self, local_dir: str, remote_dir: str, sftp) -> None:
        raise NotImplementedError

    def _download_tree(self, remote_dir: str, local_dir: str, sftp, encoding: str,
                       fetch, error, names: Optional[Iterable[bytes]] = None) -> None:
        raise NotImplementedError

    def _sftp(self, sftp=None):
        raise NotImplementedError

    def _copy_remote_dir(self, file_list: Iterable[bytes], remote_dir: str, local_dir: str,
                         sftp, encoding: str = "utf-8") -> None:
        """parallel-ssh's step: copy what ``file_list`` names in ``remote_dir`` into
        ``local_dir``, each file with ``copy_remote_file``. The core's walk does it
        (:mod:`pssh.core.tree`), so there is one recursion with one set of checks."""
        self._fetch_names(self.copy_remote_file, file_list, remote_dir, local_dir, sftp,
                          encoding, exc.SFTPIOError)

    def _scp_recv_dir(self, file_list: Iterable[bytes], remote_dir: str, local_dir: str,
                      sftp, encoding: str = "utf-8") -> None:
        """As :meth:`_copy_remote_dir`, with ``scp_recv``."""
        self._fetch_names(self.scp_recv, file_list, remote_dir, local_dir, sftp, encoding,
                          exc.SCPError)

    def _fetch_names(self, fetch, file_list: Iterable[bytes], remote_dir: str, local_dir: str,
                     sftp, encoding: str, error) -> None:
        # The names are the top level of one walk whose target is local_dir: each is
        # checked as any entry (one path component; a local directory that leads out of
        # local_dir, or a remote symlink to a directory, not entered), and the directories
        # are walked there, not handed to fetch as new roots with checks of their own.
        # Files go to fetch with parallel-ssh's arguments (its suite checks them).
        def fetch_file(remote: str, local: str):
            return in_greenlet(fetch, remote, local, recurse=True, sftp=sftp, encoding=encoding)
        self._download_tree(remote_dir, local_dir, self._sftp(sftp), encoding, fetch_file,
                            error, names=file_list)

    @staticmethod
    def _make_local_dir(dirpath: str) -> None:
        if dirpath:
            os.makedirs(dirpath, exist_ok=True)

    @staticmethod
    def _remote_paths_split(file_path: str) -> Optional[str]:
        """The directory part of a remote path (None if it has none)."""
        sep = file_path.rfind("/")
        return file_path[:sep] if sep > 0 else None

    # transfer methods the native client provides
    def mkdir(self, sftp, directory: str) -> None:
        raise NotImplementedError

    def sftp_put(self, sftp, local_file: str, remote_file: str) -> None:
        raise NotImplementedError

    def sftp_get(self, sftp, remote_file: str, local_file: str) -> None:
        raise NotImplementedError

    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  sftp=None) -> None:
        raise NotImplementedError

    def copy_remote_file(self, remote_file: str, local_file: str, recurse: bool = False,
                         sftp=None, encoding: str = "utf-8") -> None:
        raise NotImplementedError

    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False,
                 sftp=None) -> None:
        raise NotImplementedError

    def scp_recv(self, remote_file: str, local_file: str, recurse: bool = False, sftp=None,
                 encoding: str = "utf-8") -> None:
        raise NotImplementedError


__all__: List[str] = ["BaseSSHClient", "InteractiveShell", "PollMixIn", "Stdin",
                      "in_greenlet", "on_this_host", "options_of"]
