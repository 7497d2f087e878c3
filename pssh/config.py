"""Per-host settings for :class:`pssh.clients.ParallelSSHClient` (parallel-ssh's ``HostConfig``)."""
from __future__ import annotations

from typing import Optional, Union

from pssh.exceptions import InvalidAPIUseError
from pssh.core.settings import FIELD_NAMES, ConnectOptions, declarations

# ConnectOptions name -> HostConfig name, where parallel-ssh spells it otherwise
_SPELLING = {"pkey": "private_key"}
#: HostConfig field -> the setting it is (every setting has one)
_SETTING_OF = {_SPELLING.get(name, name): name for name in FIELD_NAMES}
_DECLARED = dict(declarations())
#: Credentials, never shown in a repr.
_SECRET = frozenset(field for field, name in _SETTING_OF.items() if _DECLARED[name].secret)
# accepted for parallel-ssh compatibility; they change nothing here (see the docs)
_IGNORED = ("gssapi_auth", "gssapi_server_identity", "gssapi_client_identity",
            "gssapi_delegate_credentials")
# field -> accepted types, for the checks parallel-ssh makes (ValueError on others): the
# settings' declared types, and parallel-ssh's for the fields that change nothing here.
_TYPES = {**{field: _DECLARED[name].types for field, name in _SETTING_OF.items()},
          "gssapi_auth": (bool,), "gssapi_server_identity": (str,),
          "gssapi_client_identity": (str,), "gssapi_delegate_credentials": (bool,)}


class HostConfig:
    """Settings for one host that override the client's.

    A field left at ``None`` takes the client's value; any other value,
    ``False`` and ``0`` included, overrides it. Wrong types raise
    ``ValueError``, as in parallel-ssh. Beyond parallel-ssh's fields:
    every other setting of :class:`~pssh.options.ConnectOptions` (``passphrase``,
    ``proxy_jump``, ``known_hosts``, ``host_key_policy``, ``keepalive_count_max``,
    ``connect_timeout``, ``request_timeout``, ``ciphers``, ``macs``, ``kex_algorithms``).
    ``auth_thread_pool`` and the ``gssapi_*`` fields are accepted and ignored
    (logins never block the event loop here; GSSAPI is not offered).
    """

    __slots__ = tuple(_TYPES) + ("auth_thread_pool",)

    # The fields, set from __init__'s arguments (declared for the type checker).
    user: Optional[str]
    port: Optional[int]
    password: Optional[str]
    private_key: Union[str, bytes, None]
    allow_agent: Optional[bool]
    alias: Optional[str]
    num_retries: Optional[int]
    retry_delay: Optional[float]
    timeout: Optional[float]
    identity_auth: Optional[bool]
    proxy_host: Optional[str]
    proxy_port: Optional[int]
    proxy_user: Optional[str]
    proxy_password: Optional[str]
    proxy_pkey: Union[str, bytes, None]
    keepalive_seconds: Optional[int]
    ipv6_only: Optional[bool]
    cert_file: Optional[str]
    auth_thread_pool: bool
    gssapi_auth: Optional[bool]
    gssapi_server_identity: Optional[str]
    gssapi_client_identity: Optional[str]
    gssapi_delegate_credentials: Optional[bool]
    forward_ssh_agent: Optional[bool]
    compress: Optional[bool]
    keyboard_interactive: Optional[bool]
    passphrase: Optional[str]
    proxy_jump: Optional[str]
    known_hosts: Optional[str]
    host_key_policy: Optional[str]
    keepalive_count_max: Optional[int]
    connect_timeout: Optional[float]
    request_timeout: Optional[float]
    ciphers: Optional[str]
    macs: Optional[str]
    kex_algorithms: Optional[str]

    def __init__(self, user: Optional[str] = None, port: Optional[int] = None,
                 password: Optional[str] = None, private_key: Union[str, bytes, None] = None,
                 allow_agent: Optional[bool] = None, alias: Optional[str] = None,
                 num_retries: Optional[int] = None, retry_delay: Optional[float] = None,
                 timeout: Optional[float] = None, identity_auth: Optional[bool] = None,
                 proxy_host: Optional[str] = None, proxy_port: Optional[int] = None,
                 proxy_user: Optional[str] = None, proxy_password: Optional[str] = None,
                 proxy_pkey: Union[str, bytes, None] = None,
                 keepalive_seconds: Optional[int] = None, ipv6_only: Optional[bool] = None,
                 cert_file: Optional[str] = None, auth_thread_pool: bool = True,
                 gssapi_auth: Optional[bool] = None, gssapi_server_identity: Optional[str] = None,
                 gssapi_client_identity: Optional[str] = None,
                 gssapi_delegate_credentials: Optional[bool] = None,
                 forward_ssh_agent: Optional[bool] = None, compress: Optional[bool] = None,
                 keyboard_interactive: Optional[bool] = None, passphrase: Optional[str] = None,
                 proxy_jump: Optional[str] = None, known_hosts: Optional[str] = None,
                 host_key_policy: Optional[str] = None,
                 keepalive_count_max: Optional[int] = None,
                 connect_timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None, ciphers: Optional[str] = None,
                 macs: Optional[str] = None, kex_algorithms: Optional[str] = None) -> None:
        values = dict(locals())
        for name in self.__slots__:
            setattr(self, name, values[name])
        if keyboard_interactive and not password:
            raise InvalidAPIUseError("keyboard_interactive authentication is on but no "
                                     "password is given")
        self._sanity_checks()

    def _sanity_checks(self) -> None:
        for name, types in _TYPES.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, types):
                raise ValueError(f"HostConfig {name}={value!r} is not "
                                 f"{' or '.join(t.__name__ for t in types)}")

    @classmethod
    def of(cls, options: ConnectOptions) -> "HostConfig":
        """The per-host config that sets what ``options`` set (every setting)."""
        return cls(**{field: getattr(options, name) for field, name in _SETTING_OF.items()
                      if name != "keyboard_interactive" or options.password})

    def options(self) -> ConnectOptions:
        """The settings this config makes, as a layer of :class:`~pssh.options.ConnectOptions`."""
        given = {name: getattr(self, field) for field, name in _SETTING_OF.items()
                 if getattr(self, field) is not None}
        if isinstance(given.get("cert_file"), bytes):
            given["cert_file"] = given["cert_file"].decode()
        return ConnectOptions(**given)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _TYPES
                          if getattr(self, name) is not None and name not in _SECRET)
        return f"HostConfig({shown})"
