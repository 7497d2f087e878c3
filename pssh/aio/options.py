"""asyncssh's ``SSHClientConnectionOptions``: connect()'s keyword arguments as one object.

``opts = SSHClientConnectionOptions(username="deploy", client_keys=[key])`` then
``connect(host, options=opts, known_hosts=...)``: keyword arguments given to
``connect`` win over the object's, as in asyncssh. Each asyncssh name maps onto a
setting of :class:`pssh.options.ConnectOptions` through that setting's declaration
(:mod:`pssh.core.settings`); what asyncssh has that is not a setting (``client_keys``
as a list, ``known_hosts=None``, ``agent_path``, ``login_timeout``) is read here.

Host keys as asyncssh checks them: every host verified against known_hosts
(``known_hosts=FILE``, else ``~/.ssh/known_hosts``), an unknown or changed key
refused, the file never written; ``known_hosts=None`` checks nothing. Ours
beyond asyncssh: ``host_key_policy="accept-new"`` adds unknown hosts to the
file, as ``ssh`` does (the only way to get that behaviour here).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

from pssh.core.settings import ConnectOptions, Resolved, declarations, ssh_config_of

#: asyncssh name (or ours) -> setting, from the settings' declarations.
SETTING_OF = {d.asyncssh or name: name for name, d in declarations() if d.asyncssh is not None}
#: Arguments that are not settings.
OTHERS = ("known_hosts", "agent_path", "login_timeout", "ssh_config", "_settings")
#: What asyncssh makes by default where our settings' defaults differ: one attempt.
AIO_DEFAULTS = ConnectOptions(num_retries=1)

#: Not given (for the arguments whose None means something: ``known_hosts``, ``agent_path``).
NOT_GIVEN: Any = object()
#: Every keyword argument of ``connect`` that these options hold.
ARGUMENTS = (set(SETTING_OF) | set(OTHERS) | {"client_keys"}) - {"port"}


def _algorithms(algs) -> Optional[str]:
    """asyncssh's algorithm lists (a sequence of names) in OpenSSH's comma syntax."""
    return algs if algs is None or isinstance(algs, str) else ",".join(algs)


_CONVERT = {"encryption_algs": _algorithms, "mac_algs": _algorithms, "kex_algs": _algorithms,
            "client_certs": lambda certs: certs if certs is None or isinstance(certs, str)
            else (list(certs)[0] if certs else None)}


class SSHClientConnectionOptions:
    """Options for :func:`pssh.aio.connect`, asyncssh's names; ``options``: another such
    object whose values these keyword arguments are laid over."""

    def __init__(self, options: Optional["SSHClientConnectionOptions"] = None,
                 **kwargs) -> None:
        self._values: Dict[str, Any] = dict(options._values) if options is not None else {}
        for name, value in kwargs.items():
            if name not in ARGUMENTS:
                raise TypeError(f"connect() got an unexpected keyword argument {name!r}")
            self._values[name] = value

    def __repr__(self) -> str:
        # Credentials are never shown (keys may be given as their bytes).
        shown = ", ".join(f"{k}={v!r}" for k, v in self._values.items()
                          if k not in ("password", "passphrase", "client_keys", "_settings"))
        return f"SSHClientConnectionOptions({shown})"

    # -- what is not a setting -------------------------------------------------------------

    @property
    def client_keys(self) -> Optional[Sequence]:
        """The keys given (None: the agent and the default identities)."""
        keys = self._values.get("client_keys")
        if keys is None:
            return None
        return [keys] if isinstance(keys, (str, bytes, bytearray)) else list(keys)

    @property
    def agent_path(self) -> Optional[str]:
        """The agent to use: a path, ``""`` for ``SSH_AUTH_SOCK``, None for none."""
        path = self._values.get("agent_path", NOT_GIVEN)
        return "" if path is NOT_GIVEN else path

    @property
    def login_timeout(self) -> Optional[float]:
        return self._values.get("login_timeout")

    # -- the settings ----------------------------------------------------------------------

    def settings(self, port: Optional[int] = None) -> ConnectOptions:
        """These options as a layer of :class:`~pssh.options.ConnectOptions`."""
        given: Dict[str, Any] = {}
        for name, value in self._values.items():
            setting = SETTING_OF.get(name)
            if setting is None or name == "client_keys":
                continue
            convert = _CONVERT.get(name)
            given[setting] = convert(value) if convert is not None else value
        if port is not None:
            given["port"] = port
        known_hosts = self._values.get("known_hosts", NOT_GIVEN)
        if known_hosts is None:
            # asyncssh's way of not checking (logged): no file read, none written.
            given["host_key_policy"] = "off"
            given["known_hosts"] = os.devnull
        else:
            if known_hosts is not NOT_GIVEN:
                given["known_hosts"] = str(known_hosts)
            # asyncssh verifies every host and never writes known_hosts (nor reads
            # StrictHostKeyChecking): accept-new only when asked for by name.
            given.setdefault("host_key_policy", "strict")
        if self._values.get("agent_path", NOT_GIVEN) is None:
            given["allow_agent"] = False
        layer = ConnectOptions.of(given)
        base = self._values.get("_settings")
        return layer.over(base) if base is not None else layer

    def resolve(self, host: str, port: Optional[int] = None) -> Resolved:
        """Every setting for ``host``: these, then the ssh config, then asyncssh's
        defaults (:data:`AIO_DEFAULTS`), then ours."""
        config = ssh_config_of(self._values.get("ssh_config"))
        return self.settings(port).resolve(host, config, defaults=AIO_DEFAULTS)


__all__ = ["AIO_DEFAULTS", "ARGUMENTS", "NOT_GIVEN", "SSHClientConnectionOptions"]
