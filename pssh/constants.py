"""Defaults shared by the clients (parallel-ssh's ``pssh.constants``)."""

DEFAULT_RETRIES = 3
"""Connection and authentication attempts before a client gives up."""

RETRY_DELAY = 5
"""Seconds between those attempts."""

DEFAULT_KEEPALIVE = 60
"""Seconds between keepalive messages (0 turns them off)."""

DEFAULT_KEEPALIVE_COUNT_MAX = 3
"""Unanswered keepalive rounds before the server counts as lost (OpenSSH's ServerAliveCountMax)."""

DEFAULT_CONNECT_TIMEOUT = 120
"""Seconds a connection may take (TCP connect, SSH handshake, login) when no ``timeout`` is given."""
