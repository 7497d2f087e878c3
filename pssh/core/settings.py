"""Connection settings, each declared once.

Every setting is one field of :class:`ConnectOptions`, declared with
:func:`setting`: its name and type (the field), its default, the OpenSSH client
config keyword that supplies it, its command-line flag, its name in asyncssh's
API where that differs, and its help text. Everything else is made from, or
checked against, these declarations:

- :data:`DEFAULTS` and :func:`config_layer` (what an ssh_config entry sets);
- the per-host ``HostConfig`` of parallel-ssh (accepted types);
- the ``pssh`` command's connection flags;
- ``pssh.aio.connect``'s keyword arguments (asyncssh's names);
- the settings table of the documentation;
- the explicit keyword arguments of the clients, which a test compares with them.

A field left at ``None`` is "not said at this layer". :meth:`ConnectOptions.resolve`
layers, for one host: the options given, then the ssh config, then the
defaults (``False`` and ``0`` given explicitly win, as they should).

Time limits: parallel-ssh's ``timeout`` keeps its meaning (connecting and
logging in, and each request, as wholes) and is the fallback of two limits
underneath: ``connect_timeout`` (resolve + connect + handshake + login, each
attempt) and ``request_timeout`` (each later request: opening a channel,
starting a command, one SFTP call). Keepalives have their own
(``keepalive_seconds``, ``keepalive_count_max``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, TypeVar, Union

from pssh.core.ssh_config import HostOptions, SSHConfig, load, local_user, parse_jump

Key = Union[str, bytes, None]
Hop = Tuple[Optional[str], str, Optional[int]]  # (user, host, port) of a jump host
_T = TypeVar("_T")


def decided(value: Optional[_T]) -> _T:
    """A resolved setting that has a default: never None (:data:`DEFAULTS` is the last
    layer), though every field of a layer is Optional to the type checker."""
    assert value is not None, "a setting with a default was left unset"
    return value

HOST_KEY_POLICIES = ("strict", "accept-new", "off")


@dataclass(frozen=True)
class Declaration:
    """What :func:`setting` declares about a field (its ``metadata["setting"]``)."""

    help: str
    default: Any = None
    #: The :class:`~pssh.core.ssh_config.HostOptions` attribute (OpenSSH keyword) supplying it,
    #: and how its value becomes this setting's.
    ssh_config: Optional[Tuple[str, str]] = None
    convert: Optional[Callable[[Any], Any]] = None
    #: The ``pssh`` command's flags for it (none: not a flag).
    cli: Tuple[str, ...] = ()
    #: Its keyword in ``pssh.aio.connect`` (asyncssh's name), "" if the same, None if none.
    asyncssh: Optional[str] = ""
    #: A keyword of parallel-ssh's clients and ``HostConfig`` (else ours only).
    parallel_ssh: bool = True
    #: The types a value may have (checked by ``HostConfig``).
    types: Tuple[type, ...] = (str,)
    #: Only meaningful for one host (not a keyword of the parallel client).
    per_host: bool = False
    #: A credential: never shown (``repr``, logs, tracebacks).
    secret: bool = False


def setting(help: str, *, default: Any = None, ssh_config: Optional[str] = None,
            keyword: Optional[str] = None, convert: Optional[Callable[[Any], Any]] = None,
            cli: Tuple[str, ...] = (), asyncssh: Optional[str] = "", parallel_ssh: bool = True,
            types: Tuple[type, ...] = (str,), per_host: bool = False,
            secret: bool = False) -> Any:
    """Declare a field of :class:`ConnectOptions` (``None`` at every layer until set).

    ``ssh_config``: the :class:`~pssh.core.ssh_config.HostOptions` attribute that supplies
    it, ``keyword`` that attribute's OpenSSH spelling (for the docs), ``convert`` how its
    value becomes this setting's.
    """
    declared = Declaration(help=help, default=default,
                           ssh_config=(ssh_config, keyword or ssh_config) if ssh_config else None,
                           convert=convert, cli=cli, asyncssh=asyncssh,
                           parallel_ssh=parallel_ssh, types=types, per_host=per_host,
                           secret=secret)
    return field(default=None, repr=not secret, metadata={"setting": declared})


_INT, _NUMBER, _BOOL, _KEY = (int,), (int, float), (bool,), (str, bytes)


@dataclass
class ConnectOptions:
    """Every setting of a connection; ``None`` means "not set at this layer"."""

    user: Optional[str] = setting(
        "login name (default: yours)", default=None, ssh_config="user", keyword="User",
        cli=("-l", "--user"), asyncssh="username")
    port: Optional[int] = setting(
        "port", default=22, ssh_config="port", keyword="Port", cli=("--port",), types=_INT)
    password: Optional[str] = setting(
        "password for logging in (and, without passphrase, a key's passphrase)",
        asyncssh="password", secret=True)
    pkey: Key = setting(
        "private key: a file path, or the key itself as bytes", cli=("-k", "--key"),
        asyncssh="client_keys", types=_KEY, secret=True)
    passphrase: Optional[str] = setting("the private key's passphrase", parallel_ssh=False,
                                        secret=True)
    cert_file: Optional[str] = setting(
        "OpenSSH user certificate for pkey (<key>-cert.pub beside a key file is found by "
        "itself)", asyncssh="client_certs", types=_KEY)
    alias: Optional[str] = setting("a name for the host in output", asyncssh=None,
                                   per_host=True)
    num_retries: Optional[int] = setting(
        "attempts to connect, handshake and log in", default=3,
        types=_INT)
    retry_delay: Optional[float] = setting(
        "seconds between attempts", default=5, types=_NUMBER)
    timeout: Optional[float] = setting(
        "parallel-ssh's limit, in seconds, of connecting and of each request as wholes "
        "(0: none); the default of connect_timeout and request_timeout", types=_NUMBER,
        asyncssh=None)
    connect_timeout: Optional[float] = setting(
        "seconds to resolve, connect, handshake and log in (each attempt)",
        default=120, ssh_config="connect_timeout",
        keyword="ConnectTimeout", cli=("--connect-timeout",), parallel_ssh=False,
        types=_NUMBER)
    request_timeout: Optional[float] = setting(
        "seconds each request may take as a whole (opening a channel, starting a command, "
        "an SFTP call; none by default)", parallel_ssh=False, types=_NUMBER,
        asyncssh="timeout")
    allow_agent: Optional[bool] = setting(
        "log in with the SSH agent's keys", default=True, ssh_config="identities_only",
        keyword="IdentitiesOnly", convert=lambda only: not only, cli=("--agent",),
        asyncssh=None, types=_BOOL)
    identity_auth: Optional[bool] = setting(
        "log in with the default identity files (~/.ssh/id_*)", default=True, asyncssh=None,
        types=_BOOL)
    keyboard_interactive: Optional[bool] = setting(
        "answer keyboard-interactive prompts with the password", default=False,
        asyncssh="kbdint_auth", types=_BOOL)
    keepalive_seconds: Optional[int] = setting(
        "seconds between keepalives (0: none)", default=60,
        ssh_config="server_alive_interval", keyword="ServerAliveInterval",
        asyncssh="keepalive_interval", types=_INT)
    keepalive_count_max: Optional[int] = setting(
        "unanswered keepalive intervals before the server counts as lost (0: never)",
        default=3, ssh_config="server_alive_count_max",
        keyword="ServerAliveCountMax", parallel_ssh=False, types=_INT)
    known_hosts: Optional[str] = setting(
        "known_hosts file (default ~/.ssh/known_hosts)", ssh_config="known_hosts",
        keyword="UserKnownHostsFile", cli=("--known-hosts",), parallel_ssh=False)
    host_key_policy: Optional[str] = setting(
        "unknown or changed host keys: strict, accept-new or off (logged)",
        default="accept-new", ssh_config="host_key_policy", keyword="StrictHostKeyChecking",
        cli=("--host-key-policy",), parallel_ssh=False)
    forward_ssh_agent: Optional[bool] = setting(
        "let remote commands use the local SSH agent", default=False,
        ssh_config="forward_agent", keyword="ForwardAgent", cli=("--forward-agent",),
        asyncssh="agent_forwarding", types=_BOOL)
    compress: Optional[bool] = setting(
        "compress the connection", default=False, ssh_config="compression",
        keyword="Compression", types=_BOOL)
    ipv6_only: Optional[bool] = setting(
        "connect over IPv6 only", default=False, types=_BOOL)
    proxy_host: Optional[str] = setting("parallel-ssh's one jump host", asyncssh=None)
    proxy_port: Optional[int] = setting("the jump host's port", asyncssh=None, types=_INT)
    proxy_user: Optional[str] = setting("login name on the jump host", asyncssh=None)
    proxy_password: Optional[str] = setting("password on the jump host", asyncssh=None,
                                            secret=True)
    proxy_pkey: Key = setting("private key for the jump host", asyncssh=None, types=_KEY,
                              secret=True)
    proxy_jump: Optional[str] = setting(
        "jump hosts as ssh -J: [user@]host[:port],...", ssh_config="proxy_jump",
        keyword="ProxyJump", cli=("-J", "--jump"), asyncssh="tunnel", parallel_ssh=False)
    ciphers: Optional[str] = setting(
        "ciphers in OpenSSH's list syntax (+ adds, - removes, ^ puts first)",
        ssh_config="ciphers", keyword="Ciphers", asyncssh="encryption_algs",
        parallel_ssh=False)
    macs: Optional[str] = setting(
        "MACs in OpenSSH's list syntax", ssh_config="macs", keyword="MACs",
        asyncssh="mac_algs", parallel_ssh=False)
    kex_algorithms: Optional[str] = setting(
        "key exchange algorithms in OpenSSH's list syntax", ssh_config="kex_algorithms",
        keyword="KexAlgorithms", asyncssh="kex_algs", parallel_ssh=False)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "ConnectOptions":
        """The settings among ``values`` (an entry point's keyword arguments) as a layer:
        names that are not settings are ignored, ``None`` is "not set"."""
        # Per host, on every entry point: one pass over what was given, not a call of
        # __init__ with every declared field.
        layer = object.__new__(cls)
        layer.__dict__.update(_NOTHING_SET)
        layer.__dict__.update({name: value for name, value in values.items()
                               if value is not None and name in _FIELD_SET})
        return layer

    def given(self) -> dict:
        """The fields set at this layer."""
        # The instance dict holds exactly the fields (a plain dataclass): reading it is a
        # third of the cost of a getattr per declared name, and this runs per host.
        return {name: value for name, value in self.__dict__.items() if value is not None}

    def over(self, base: "ConnectOptions") -> "ConnectOptions":
        """These options layered over ``base``: fields set here win, ``False`` and 0 included."""
        # What dataclasses.replace gives, without its pass over every field and a call of
        # __init__ with all of them: several layers per host made that a tenth of the
        # client's interpreter time in a fan-out.
        layered = object.__new__(base.__class__)
        layered.__dict__.update(base.__dict__)
        layered.__dict__.update(self.given())
        return layered

    def resolve(self, host: str, config: Optional[SSHConfig],
                defaults: Optional["ConnectOptions"] = None) -> "Resolved":
        """Every setting for ``host``: these options, then ``config``, then ``defaults``
        (an API's own, e.g. the command line's), then :data:`DEFAULTS`."""
        cfg = config.lookup(host, self.user, self.port) if config is not None else HostOptions()
        base = DEFAULTS if defaults is None else defaults.over(DEFAULTS)
        given = self.over(config_layer(cfg)).over(base)
        if given.host_key_policy not in HOST_KEY_POLICIES:
            raise ValueError(f"host_key_policy must be one of {HOST_KEY_POLICIES}, "
                             f"not {given.host_key_policy!r}")
        hostname = cfg.hostname or host
        port = decided(given.port)
        timeout = given.timeout or None
        # parallel-ssh's timeout is the default of both limits underneath it, and wins
        # over the ssh config's ConnectTimeout, as an explicit setting does.
        if self.connect_timeout is not None or not timeout:
            connect_timeout = given.connect_timeout
        else:
            connect_timeout = timeout
        connect_timeout = decided(connect_timeout or DEFAULTS.connect_timeout)
        request_timeout = given.request_timeout if given.request_timeout is not None \
            else timeout
        return Resolved(
            options=given,
            hostname=hostname,
            port=port,
            user=given.user or local_user(),
            timeout=request_timeout or None,
            connect_timeout=connect_timeout,
            identity_files=cfg.identity_files,
            cert_file=os.path.expanduser(given.cert_file) if isinstance(given.cert_file, str)
            else given.cert_file.decode() if given.cert_file else
            (cfg.certificate_files[0] if cfg.certificate_files else None),
            host_key_name=cfg.host_key_alias or hostname,
            jump_hops=_jump_hops(given, port),
        )


#: Looked up once: dataclasses.fields() rebuilds the list on every call (per host).
FIELD_NAMES = tuple(f.name for f in fields(ConnectOptions))
_FIELD_SET = frozenset(FIELD_NAMES)
_NOTHING_SET = dict.fromkeys(FIELD_NAMES)


def declarations() -> Iterator[Tuple[str, Declaration]]:
    """``(name, declaration)`` of every setting, in declaration order."""
    for f in fields(ConnectOptions):
        yield f.name, f.metadata["setting"]


#: The values used when neither the caller nor the ssh config sets one
#: (parallel-ssh's defaults, plus host key verification).
DEFAULTS = ConnectOptions(**{name: d.default for name, d in declarations()
                             if d.default is not None})

#: ssh config attribute -> (setting, conversion), from the declarations.
_FROM_CONFIG: Dict[str, Tuple[str, Optional[Callable[[Any], Any]]]] = {
    d.ssh_config[0]: (name, d.convert) for name, d in declarations() if d.ssh_config}


def config_layer(cfg: HostOptions) -> ConnectOptions:
    """What an OpenSSH client config entry says, as a layer of options."""
    values = {}
    for attribute, (name, convert) in _FROM_CONFIG.items():
        value = getattr(cfg, attribute)
        if value is not None:
            values[name] = convert(value) if convert is not None else value
    return ConnectOptions(**values)


def _jump_hops(options: ConnectOptions, port: int) -> Tuple[Hop, ...]:
    """The jump hosts to go through: ``proxy_host`` (parallel-ssh's one proxy, on the
    target's port unless ``proxy_port``), else the ProxyJump chain."""
    if options.proxy_host:
        return ((options.proxy_user or options.user, options.proxy_host,
                 options.proxy_port or port),)
    spec = options.proxy_jump
    if spec and spec.lower() != "none":
        return tuple(parse_jump(spec))
    return ()


#: Settings a jump host takes from its target. Its credentials are its own (see
#: :meth:`Resolved.jump_options`); never the target's password, which a hop has no
#: business learning.
_JUMP_INHERITS = ("passphrase", "num_retries", "retry_delay", "timeout", "connect_timeout",
                  "request_timeout", "allow_agent", "identity_auth", "keepalive_seconds",
                  "keepalive_count_max", "known_hosts", "host_key_policy", "compress",
                  "keyboard_interactive")


@dataclass(frozen=True)
class Resolved:
    """The settings of one connection, every one decided (see :meth:`ConnectOptions.resolve`)."""

    options: ConnectOptions
    hostname: str
    port: int
    user: str
    #: The limit of each request (None: none).
    timeout: Optional[float]
    connect_timeout: float
    identity_files: Tuple[str, ...] = ()
    cert_file: Optional[str] = None
    host_key_name: str = ""
    jump_hops: Tuple[Hop, ...] = field(default=())

    def jump_options(self) -> ConnectOptions:
        """Options for the jump hosts; keepalives and host key checks as for the target.

        Their password is ``proxy_password``, never the target's (parallel-ssh 2.16 sent
        a hop the target's password). Their key is ``proxy_pkey``; without one, the hop
        of parallel-ssh's ``proxy_host`` logs in with the target's ``pkey``, as parallel-ssh
        2.16 does (and its own tests need), while ProxyJump hops log in as OpenSSH's do
        (``ssh -i KEY -J HOP`` runs the hop's ``ssh`` without ``-i``): with the agent and
        their own identity files (their ssh config entry's, else the default files),
        never offered the target's key."""
        o = self.options
        pkey = o.proxy_pkey if o.proxy_pkey is not None else o.pkey if o.proxy_host else None
        return ConnectOptions(
            password=o.proxy_password, pkey=pkey,
            proxy_jump="none", **{name: getattr(o, name) for name in _JUMP_INHERITS})


def ssh_config_of(source: Union[str, SSHConfig, bool, None]) -> Optional[SSHConfig]:
    """The OpenSSH client config to read: a path, a parsed config, ``False`` for none,
    ``None`` for ``~/.ssh/config``."""
    if source is False:
        return None
    if isinstance(source, SSHConfig):
        return source
    return load(source if isinstance(source, str) else None)


__all__ = ["ConnectOptions", "DEFAULTS", "Declaration", "FIELD_NAMES", "HOST_KEY_POLICIES",
           "Hop", "Key", "Resolved", "config_layer", "decided", "declarations", "setting",
           "ssh_config_of"]
