"""Connection settings: one object that holds each setting once.

:class:`ConnectOptions` is what every entry point builds: the keyword
arguments of :class:`~pssh.clients.SSHClient` and
:class:`~pssh.clients.ParallelSSHClient` map onto it one to one,
:class:`~pssh.config.HostConfig` is a per-host layer of it, and the command
line fills one from its flags. A field left at ``None`` is "not said here".

:meth:`ConnectOptions.resolve` layers, for one host: the options given, then
the OpenSSH client config (``~/.ssh/config``), then :data:`DEFAULTS`; the
result (:class:`Resolved`) has a value for everything a connection needs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Optional, Tuple, Union

from pssh import constants
from pssh.ssh_config import HostOptions, SSHConfig, load, local_user, parse_jump

Key = Union[str, bytes, None]
Hop = Tuple[Optional[str], str, Optional[int]]  # (user, host, port) of a jump host

HOST_KEY_POLICIES = ("strict", "accept-new", "off")


@dataclass
class ConnectOptions:
    """Every setting of a connection; ``None`` means "not set at this layer"."""

    user: Optional[str] = None
    port: Optional[int] = None
    password: Optional[str] = None
    #: A private key: a file path, or the key itself as bytes.
    pkey: Key = None
    #: The key's passphrase (parallel-ssh uses ``password`` for it; so do we when this is unset).
    passphrase: Optional[str] = None
    #: An OpenSSH certificate for ``pkey`` (``<key>-cert.pub`` beside a key file is found by itself).
    cert_file: Optional[str] = None
    alias: Optional[str] = None
    num_retries: Optional[int] = None
    retry_delay: Optional[float] = None
    #: Seconds for connecting and for each request as a whole (0: no limit, as parallel-ssh).
    timeout: Optional[float] = None
    allow_agent: Optional[bool] = None
    identity_auth: Optional[bool] = None
    keyboard_interactive: Optional[bool] = None
    keepalive_seconds: Optional[int] = None
    keepalive_count_max: Optional[int] = None
    known_hosts: Optional[str] = None
    host_key_policy: Optional[str] = None
    forward_ssh_agent: Optional[bool] = None
    compress: Optional[bool] = None
    ipv6_only: Optional[bool] = None
    proxy_host: Optional[str] = None
    proxy_port: Optional[int] = None
    proxy_user: Optional[str] = None
    proxy_password: Optional[str] = None
    proxy_pkey: Key = None
    #: Jump hosts in OpenSSH ``-J`` syntax: ``[user@]host[:port],...``.
    proxy_jump: Optional[str] = None
    #: Algorithm lists in OpenSSH syntax (``Ciphers``, ``MACs``, ``KexAlgorithms``):
    #: ``a,b`` these only, ``+a`` added to the default, ``-a*`` removed, ``^a`` put first.
    ciphers: Optional[str] = None
    macs: Optional[str] = None
    kex_algorithms: Optional[str] = None

    def given(self) -> dict:
        """The fields set at this layer."""
        return {name: value for name in _FIELD_NAMES
                if (value := getattr(self, name)) is not None}

    def over(self, base: "ConnectOptions") -> "ConnectOptions":
        """These options layered over ``base``: fields set here win, ``False`` and 0 included."""
        return replace(base, **self.given())

    def resolve(self, host: str, config: Optional[SSHConfig]) -> "Resolved":
        """Every setting for ``host``: these options, then ``config``, then :data:`DEFAULTS`."""
        cfg = config.lookup(host, self.user, self.port) if config is not None else HostOptions()
        given = self.over(config_layer(cfg)).over(DEFAULTS)
        if given.host_key_policy not in HOST_KEY_POLICIES:
            raise ValueError(f"host_key_policy must be one of {HOST_KEY_POLICIES}, "
                             f"not {given.host_key_policy!r}")
        hostname = cfg.hostname or host
        port = given.port
        timeout = given.timeout or None
        return Resolved(
            options=given,
            hostname=hostname,
            port=port,
            user=given.user or local_user(),
            timeout=timeout,
            connect_timeout=timeout or cfg.connect_timeout or constants.DEFAULT_CONNECT_TIMEOUT,
            identity_files=cfg.identity_files,
            cert_file=os.path.expanduser(given.cert_file) if given.cert_file else
            (cfg.certificate_files[0] if cfg.certificate_files else None),
            host_key_name=cfg.host_key_alias or hostname,
            jump_hops=_jump_hops(given, port),
        )


# Looked up once: dataclasses.fields() rebuilds the list on every call (per host).
_FIELD_NAMES = tuple(f.name for f in fields(ConnectOptions))


def config_layer(cfg: HostOptions) -> ConnectOptions:
    """What an OpenSSH client config entry says, as a layer of options."""
    return ConnectOptions(
        user=cfg.user, port=cfg.port,
        allow_agent=None if cfg.identities_only is None else not cfg.identities_only,
        keepalive_seconds=cfg.server_alive_interval,
        keepalive_count_max=cfg.server_alive_count_max,
        known_hosts=cfg.known_hosts, host_key_policy=cfg.host_key_policy,
        forward_ssh_agent=cfg.forward_agent, compress=cfg.compression,
        proxy_jump=cfg.proxy_jump, ciphers=cfg.ciphers, macs=cfg.macs,
        kex_algorithms=cfg.kex_algorithms)


#: The values used when neither the caller nor the ssh config sets one
#: (parallel-ssh's defaults, plus host key verification).
DEFAULTS = ConnectOptions(
    port=22, num_retries=constants.DEFAULT_RETRIES, retry_delay=constants.RETRY_DELAY,
    allow_agent=True, identity_auth=True, keyboard_interactive=False,
    keepalive_seconds=constants.DEFAULT_KEEPALIVE,
    keepalive_count_max=constants.DEFAULT_KEEPALIVE_COUNT_MAX,
    host_key_policy="accept-new", forward_ssh_agent=False, compress=False, ipv6_only=False)


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


@dataclass(frozen=True)
class Resolved:
    """The settings of one connection, every one decided (see :meth:`ConnectOptions.resolve`)."""

    options: ConnectOptions
    hostname: str
    port: int
    user: str
    timeout: Optional[float]
    connect_timeout: float
    identity_files: Tuple[str, ...] = ()
    cert_file: Optional[str] = None
    host_key_name: str = ""
    jump_hops: Tuple[Hop, ...] = field(default=())

    def jump_options(self) -> ConnectOptions:
        """Options for the jump hosts: parallel-ssh's ``proxy_*`` settings, else the target's
        credentials; keepalives and host key checks as for the target."""
        o = self.options
        return ConnectOptions(
            password=o.proxy_password if o.proxy_password is not None else o.password,
            pkey=o.proxy_pkey if o.proxy_pkey is not None else o.pkey,
            passphrase=o.passphrase, num_retries=o.num_retries, retry_delay=o.retry_delay,
            timeout=o.timeout, allow_agent=o.allow_agent, identity_auth=o.identity_auth,
            keepalive_seconds=o.keepalive_seconds, keepalive_count_max=o.keepalive_count_max,
            known_hosts=o.known_hosts, host_key_policy=o.host_key_policy,
            compress=o.compress, keyboard_interactive=o.keyboard_interactive,
            proxy_jump="none")


def ssh_config_of(source: Union[str, SSHConfig, bool, None]) -> Optional[SSHConfig]:
    """The OpenSSH client config to read: a path, a parsed config, ``False`` for none,
    ``None`` for ``~/.ssh/config``."""
    if source is False:
        return None
    if isinstance(source, SSHConfig):
        return source
    return load(source if isinstance(source, str) else None)
