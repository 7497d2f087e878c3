"""Exceptions of the asyncio front end: asyncssh's names, our hierarchy.

Each is also the gevent client's exception for the same failure, so an
``except`` written for either family catches it: :class:`PermissionDenied` is
a :class:`pssh.exceptions.AuthenticationError`, :class:`HostKeyNotVerifiable`
a :class:`pssh.exceptions.HostKeyError`; connection-level failures
(refused, timed out, lost) are the gevent client's own classes.
"""
from __future__ import annotations

import signal
from typing import Optional

from pssh import exceptions as exc


class DisconnectError(exc.PSSHError):
    """The connection ended for a reason of SSH itself (asyncssh's base of these)."""


class PermissionDenied(DisconnectError, exc.AuthenticationError):
    """No authentication method was accepted."""


class HostKeyNotVerifiable(DisconnectError, exc.HostKeyError):
    """The server's host key is unknown (policy ``strict``), changed or revoked."""


class ProcessError(exc.PSSHError):
    """A command run with ``check=True`` exited non-zero or by a signal.

    Carries what :class:`~pssh.aio.SSHCompletedProcess` carries: ``command``,
    ``exit_status``, ``returncode``, ``exit_signal``, ``stdout`` and ``stderr``.
    """

    def __init__(self, host: str, port: int, command: str, exit_status: Optional[int],
                 exit_signal: Optional[tuple], stdout, stderr) -> None:
        how = (f"was killed by signal {exit_signal[0]}" if exit_signal
               else f"exited with status {exit_status}")
        super().__init__("%s:%s: command %r %s", host, port, command, how, host=host, port=port)
        self.command = command
        self.exit_status = exit_status
        self.exit_signal = exit_signal
        self.stdout = stdout
        self.stderr = stderr

    @property
    def returncode(self) -> Optional[int]:
        """``exit_status``, or minus the signal's number when killed by a known signal."""
        return _returncode(self.exit_status, self.exit_signal)


def _returncode(exit_status: Optional[int], exit_signal: Optional[tuple]) -> Optional[int]:
    """As ``subprocess`` does: minus the signal's number (this platform's) when killed by one."""
    if exit_signal:
        try:
            return -signal.Signals[f"SIG{exit_signal[0]}"]
        except KeyError:
            pass
    return exit_status
