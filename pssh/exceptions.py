"""Exceptions of the parallel client. Every one names the host and the cause.

Names follow parallel-ssh's ``pssh.exceptions`` (both the ``...Error`` and the
older ``...Exception`` spellings), so existing ``except`` clauses keep working.
"""
from __future__ import annotations

from typing import Optional


class PSSHError(Exception):
    """Base class: ``host`` is the host it concerns (None when not host-specific)."""

    def __init__(self, message: str, host: Optional[str] = None, port: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.host = host
        self.port = port

    def __str__(self) -> str:
        if self.host is None:
            return self.message
        where = self.host if self.port in (None, 22) else f"{self.host}:{self.port}"
        return f"{where}: {self.message}"


class UnknownHostError(PSSHError):
    """The host name does not resolve."""


class ConnectionError(PSSHError):  # noqa: A001 - the established name
    """The TCP connection or the SSH handshake failed."""


class Timeout(PSSHError):
    """An operation did not complete within its timeout."""


class AuthenticationError(PSSHError):
    """Every authentication method was rejected."""


class PKeyFileError(PSSHError):
    """A private key file is missing or unreadable."""


class HostKeyError(PSSHError):
    """The server's host key could not be verified."""


class UnknownHostKeyError(HostKeyError):
    """The host is not in known_hosts and the policy is strict."""


class HostKeyMismatchError(HostKeyError):
    """The host presented a key different from the one in known_hosts."""


class SessionError(PSSHError):
    """The SSH session failed after connecting (channel, command)."""


class SFTPError(PSSHError):
    """An SFTP operation failed."""


class SFTPIOError(SFTPError):
    """Local I/O failed during an SFTP transfer."""


class SCPError(PSSHError):
    """An SCP transfer failed."""


class ProxyError(PSSHError):
    """The proxy (jump) host failed."""


class ShellError(PSSHError):
    """An interactive shell failed."""


class HostArgumentError(PSSHError):
    """``host_args`` does not match the hosts."""


class HostConfigError(PSSHError):
    """``host_config`` does not match the hosts."""


# parallel-ssh's older names.
UnknownHostException = UnknownHostError
ConnectionErrorException = ConnectionError
AuthenticationException = AuthenticationError
SSHException = SessionError
HostArgumentException = HostArgumentError
