"""Per-host settings for :class:`pssh.clients.ParallelSSHClient`."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional, Union


@dataclass(slots=True)
class HostConfig:
    """Settings for one host that override the client's.

    A field left at ``None`` falls back to the client's value; any other value,
    including ``False`` and ``0``, overrides it.
    """

    user: Optional[str] = None
    port: Optional[int] = None
    password: Optional[str] = None
    private_key: Optional[Union[str, bytes]] = None
    allow_agent: Optional[bool] = None
    num_retries: Optional[int] = None
    retry_delay: Optional[float] = None
    timeout: Optional[float] = None
    identity_auth: Optional[bool] = None
    keepalive_seconds: Optional[int] = None
    keepalive_count_max: Optional[int] = None
    alias: Optional[str] = None
    known_hosts: Optional[str] = None
    host_key_policy: Optional[str] = None
    keyboard_interactive: Optional[bool] = None
    proxy_host: Optional[str] = None
    proxy_port: Optional[int] = None
    proxy_user: Optional[str] = None
    proxy_password: Optional[str] = None
    proxy_pkey: Optional[Union[str, bytes]] = None
    forward_ssh_agent: Optional[bool] = None
    compress: Optional[bool] = None
    ipv6_only: Optional[bool] = None
    cert_file: Optional[str] = None

    def overrides(self) -> dict:
        """The fields this config sets (not ``None``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None and f.name != "alias"}
