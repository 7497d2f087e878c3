"""Exceptions of the parallel client: parallel-ssh 2.16's names, arguments and hierarchy.

As in parallel-ssh, ``exc.args`` is a ``%``-format message followed by its
values, and the values sit where parallel-ssh puts them (most often
``(message, host, port, ...)``), so code that reads ``exc.args[1]`` keeps
working. Added here: ``str(exc)`` is the formatted sentence (which names the
host and the cause), and ``exc.host`` / ``exc.port`` say which host it is.

Where parallel-ssh raises a built-in or an :mod:`ssh2.exceptions` class, so
do we, through a subclass that is also ours: :class:`ConnectionError` is a
built-in :class:`ConnectionError` (parallel-ssh's *is* the built-in), a
refused connection is a :class:`ConnectionRefusedError`, and a target that a
jump host cannot reach is an :class:`ssh2.exceptions.SocketRecvError` as well
as a :class:`ProxyError`. Every ``except`` clause written for parallel-ssh
catches what it caught before.
"""
from __future__ import annotations

import builtins
import re
from typing import Any, Optional

from ssh2 import exceptions as ssh2_exc


class PSSHError(Exception):
    """Base class of this module's exceptions.

    ``args``: ``(message_format, *values)``; ``str()``: the formatted message.
    ``host`` and ``port``: the host the error concerns (None if none).
    """

    def __init__(self, *args: Any, host: Optional[str] = None, port: Optional[int] = None):
        # Not super(): the classes below that are also built-in or ssh2 errors
        # keep parallel-ssh's args, which their own __init__ would read otherwise.
        Exception.__init__(self, *args)
        self.host = host
        self.port = port

    @classmethod
    def at(cls, host: Optional[str], port: Optional[int], text: str, *details: Any):
        """``cls("%s:%s: %s", host, port, text, *details)``: an error at ``host:port``
        with ``args`` in parallel-ssh's order (message, host, port, ...)."""
        return cls("%s:%s: %s", host, port, text, *details, host=host, port=port)

    @property
    def message(self) -> str:
        """The formatted message (what ``str()`` returns)."""
        return str(self)

    @property
    def reason(self) -> str:
        """The message without its leading ``host:port:`` (for listings by host)."""
        args = self.args
        if args and isinstance(args[0], str) and args[0].startswith(_AT) and len(args) >= 3:
            return format_args((args[0][len(_AT):],) + tuple(args[3:]))
        return str(self)

    def __str__(self) -> str:
        return format_args(self.args)


def format_args(args: tuple) -> str:
    """``args[0] % args[1:]`` (values beyond the message's fields, such as a cause
    appended for callers that index ``args``, are left out of the sentence); the
    arguments joined by spaces when they do not format."""
    if not args:
        return ""
    text, *values = args
    if not values:
        return str(text)
    if isinstance(text, str):
        wanted = len(_FIELD.findall(text.replace("%%", "")))
        try:
            return text % tuple(values[:wanted])
        except (TypeError, ValueError, KeyError):
            pass
    return " ".join(str(a) for a in args)


_AT = "%s:%s: "
_FIELD = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]")


class _OSErrorArgs:
    """Keeps ``args`` exactly as given on the built-in OSError subclasses below.

    OSError would otherwise read two or more arguments as (errno, strerror,
    filename) and cut ``args`` down to two; parallel-ssh's callers index
    further (``exc.args[2]`` is the host of a refused connection).
    """

    def _keep_args(self, args: tuple, errno: Optional[int] = None,
                   strerror: Optional[str] = None) -> None:
        self.args = args
        self.errno = errno
        self.strerror = strerror
        self.filename = None


class NoIPv6AddressFoundError(PSSHError):
    """``ipv6_only`` was asked for but the host has no IPv6 address.

    ``args``: ``(message, host, [addresses found])``.
    """


class UnknownHostError(PSSHError):
    """The host name does not resolve (``args``: message, host, reason, try, of tries)."""


class ConnectionError(_OSErrorArgs, PSSHError, builtins.ConnectionError):  # noqa: A001
    """The TCP connection or the SSH handshake failed.

    Also a built-in :class:`ConnectionError`, which is what parallel-ssh's
    ``pssh.exceptions.ConnectionError`` is. ``args``: ``(message, host,
    port, reason, try, of tries)``.
    """

    def __init__(self, *args: Any, host: Optional[str] = None, port: Optional[int] = None,
                 errno: Optional[int] = None):
        PSSHError.__init__(self, *args, host=host, port=port)
        self._keep_args(args, errno)


class ConnectionRefused(ConnectionError, builtins.ConnectionRefusedError):
    """Nothing listens on the port (``ConnectionRefusedError``, as parallel-ssh raises).

    ``args``: ``(errno, strerror, host, port)`` as parallel-ssh leaves them;
    ``str()`` names the host.
    """

    def __init__(self, errno: int, strerror: str, host: str, port: int):
        PSSHError.__init__(self, errno, strerror, host, port, host=host, port=port)
        self._keep_args((errno, strerror, host, port), errno, strerror)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}: {self.reason}"

    @property
    def reason(self) -> str:
        return f"cannot connect: {self.strerror or 'connection refused'}"


class Timeout(PSSHError):
    """An operation did not complete in time.

    From ``join``/``join_shells``: ``args`` are ``(message, timeout,
    finished_output, unfinished_output)``.
    """


class ConnectTimeout(ConnectionError, Timeout):
    """Connecting timed out: a :class:`ConnectionError`, as in parallel-ssh, and a :class:`Timeout`."""


class AuthenticationError(PSSHError):
    """Every authentication method failed.

    ``args``: ``(message, host, port, last_error, tries, num_retries)``.
    """


class SSHError(PSSHError):
    """An SSH-level failure of a connected session."""


class HostKeyError(SSHError):
    """The server's host key could not be verified."""


class UnknownHostKeyError(HostKeyError):
    """The host is not in known_hosts and the policy is ``strict``."""


class HostKeyMismatchError(HostKeyError):
    """The host presented a key other than the one known_hosts holds for it (or a revoked one)."""


class HostArgumentError(PSSHError):
    """``host_args`` or ``copy_args`` do not match the hosts."""


class SessionError(PSSHError):
    """A channel could not be opened or a command not started."""


class SFTPError(PSSHError):
    """An SFTP operation failed."""


class SFTPIOError(SFTPError):
    """Reading or writing a file over SFTP (or the local end of it) failed."""


class ProxyError(PSSHError):
    """The proxy (jump) host failed (``args``: message, cause)."""


class ProxyTargetError(ProxyError, ConnectionError, ssh2_exc.SocketRecvError):
    """The jump host is up but cannot reach the target: a :class:`ProxyError` and a
    :class:`ConnectionError` to the target.

    Also an :class:`ssh2.exceptions.SocketRecvError`: parallel-ssh reports
    this case as that error, from the target's handshake.
    """

    def __init__(self, *args: Any, host: Optional[str] = None, port: Optional[int] = None):
        ConnectionError.__init__(self, *args, host=host, port=port)
        self.errname = ""

    __str__ = PSSHError.__str__


class SCPError(PSSHError):
    """An SCP transfer failed."""


class PKeyFileError(PSSHError):
    """A private key (or certificate) file is missing (``args``: message, path)."""


class ShellError(PSSHError):
    """An interactive shell failed."""


class HostConfigError(PSSHError, ValueError):
    """``host_config`` is not a list of :class:`pssh.config.HostConfig` of the hosts'
    length (also a ``ValueError``, which parallel-ssh raises for the length)."""


class WorkerError(PSSHError):
    """The worker process doing a host's work (``ParallelSSHClient(processes=N)``) died
    or is gone; the message names the host, the worker and how it ended."""


class InvalidAPIUseError(PSSHError):
    """Arguments that cannot work together (e.g. keyboard_interactive without a password)."""


# parallel-ssh's older names.
UnknownHostException = UnknownHostError
ConnectionErrorException = ConnectionError
AuthenticationException = AuthenticationError
SSHException = SSHError
HostArgumentException = HostArgumentError
