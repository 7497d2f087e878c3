"""Defaults shared by the clients (parallel-ssh's ``pssh.constants``).

The values are the settings' declared defaults (:mod:`pssh.core.settings`), named as
parallel-ssh names them.
"""
from pssh.core.settings import DEFAULTS as _DEFAULTS, decided as _decided

DEFAULT_RETRIES = _decided(_DEFAULTS.num_retries)
"""Connection and authentication attempts before a client gives up."""

RETRY_DELAY = _decided(_DEFAULTS.retry_delay)
"""Seconds between those attempts."""

DEFAULT_KEEPALIVE = _decided(_DEFAULTS.keepalive_seconds)
"""Seconds between keepalive messages (0 turns them off)."""

DEFAULT_KEEPALIVE_COUNT_MAX = _decided(_DEFAULTS.keepalive_count_max)
"""Unanswered keepalive rounds before the server counts as lost (OpenSSH's ServerAliveCountMax)."""

DEFAULT_CONNECT_TIMEOUT = _decided(_DEFAULTS.connect_timeout)
"""Seconds a connection may take (TCP connect, SSH handshake, login) when no ``timeout``
is given."""
