"""Exceptions of the parallel client: parallel-ssh 2.16's names, arguments and hierarchy.

As in parallel-ssh, ``exc.args`` is a ``%``-format message followed by its
values, and the values sit where parallel-ssh puts them (most often
``(message, host, port, ...)``), so code that reads ``exc.args[1]`` keeps
working. Added here: ``str(exc)`` is the formatted sentence (which names the
host and the cause), and ``exc.host`` / ``exc.port`` say which host it is.

Every error a host's work raises names that host: :func:`with_host` (and the
``with on_host(host, port):`` block around each host's work) gives one that
does not yet name it its host and port, whatever raised it. Ours and the
bindings' errors get ``.host`` set; a local :class:`OSError` (a missing file,
no permission, a full disk) is raised again as a :class:`LocalOSError`: a
subclass of the very class it was (``FileNotFoundError``, ``PermissionError``,
``OSError`` ...) whose message starts with ``host:port``, so that parallel-ssh's
contract (local OS errors propagate as ``OSError``) holds.

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
from types import TracebackType
from typing import Any, Dict, Literal, Optional, Type, TypeVar

from ssh2 import exceptions as ssh2_exc

#: Where users import these classes from (parallel-ssh's module): see the end of this file.
PUBLIC_HOME = "pssh.exceptions"


_Self = TypeVar("_Self", bound="PSSHError")  # at() makes an error of the class it is called on


class PSSHError(Exception):
    """Base class of this module's exceptions.

    ``args``: ``(message_format, *values)``; ``str()``: the formatted message, led
    by ``host:port:`` when it concerns a host and does not already say so.
    ``host`` and ``port``: the host the error concerns (None if none).
    """

    def __init__(self, *args: Any, host: Optional[str] = None, port: Optional[int] = None):
        # Not super(): the classes below that are also built-in or ssh2 errors
        # keep parallel-ssh's args, which their own __init__ would read otherwise.
        Exception.__init__(self, *args)
        self.host = host
        self.port = port

    @classmethod
    def at(cls: Type[_Self], host: Optional[str], port: Optional[int], text: str,
           *details: Any) -> _Self:
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
        return format_args(args)

    def __str__(self) -> str:
        return _led_by_host(format_args(self.args), self.host, self.port)


def _where(host: Optional[str], port: Optional[int]) -> str:
    return str(host) if port is None else f"{host}:{port}"


def _led_by_host(text: str, host: Optional[str], port: Optional[int]) -> str:
    """``text`` led by ``host:port:`` unless it already starts with the host or names
    ``host:port`` (messages written as ``"%s:%s: ..."`` say it themselves)."""
    if host is None:
        return text
    where = _where(host, port)
    if text.startswith(f"{host}:") or text.startswith(f"{host} ") or where in text:
        return text
    return f"{where}: {text}"


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

    def __init__(self, errno: Optional[int], strerror: Optional[str], host: str, port: int):
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
    """Connecting timed out: a :class:`ConnectionError`, as in parallel-ssh, and a
    :class:`Timeout`."""


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


class HostKeyRevokedError(HostKeyMismatchError):
    """The host presented a key (or a certificate by a CA) marked ``@revoked``."""


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


# The ignore: ``message`` is PSSHError's formatted one (a property), which the order of
# the bases makes win over SSH2Error's attribute, as intended.
class ProxyTargetError(ProxyError, ConnectionError,  # type: ignore[override]
                       ssh2_exc.SocketRecvError):
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


class LocalOSError(OSError):
    """A local OS error (a file on this machine missing, unreadable, a directory, the
    disk full...) met while working for a host.

    Never raised as itself: :func:`with_host` raises a subclass of both this and the
    error's own class (``FileNotFoundError``, ``PermissionError``, ``OSError``...), with
    its ``errno``, ``strerror`` and ``filename``, so that ``except`` clauses for the
    built-in classes catch it as before. ``str()``: ``host:port: [Errno 28] No space
    left on device: '/path'``; ``host`` and ``port`` as on our errors; ``reason``: the
    message without the host.
    """

    host: Optional[str] = None
    port: Optional[int] = None
    _base: type = OSError

    def __str__(self) -> str:
        return f"{_where(self.host, self.port)}: {super().__str__()}"

    @property
    def reason(self) -> str:
        return super().__str__()

    def __reduce__(self) -> tuple:
        # Rebuilt from the built-in class it stands for: the generated class has no
        # importable name (processes=N send errors to the parent pickled).
        return (_local_os_error, (self._base, self.args, self.filename, self.filename2,
                                  self.host, self.port), dict(self.__dict__))


_local_classes: Dict[type, type] = {}


def _local_class(base: type) -> type:
    """The :class:`LocalOSError` subclass standing for ``base`` (made once)."""
    if base is OSError:
        return LocalOSError
    cls = _local_classes.get(base)
    if cls is None:
        name = "Local" + base.__name__
        cls = type(name, (LocalOSError, base), {"__module__": PUBLIC_HOME, "__qualname__": name,
                                                "_base": base, "__doc__": LocalOSError.__doc__})
        _local_classes[base] = cls
    return cls


def _local_os_error(base: type, args: tuple, filename: Any, filename2: Any,
                    host: Optional[str], port: Optional[int]) -> OSError:
    """A :class:`LocalOSError` as ``base(*args)`` (with its file names) would be."""
    cls = _local_class(base)
    if filename2 is not None:
        err = cls(args[0], args[1], filename, None, filename2)
    elif filename is not None:
        err = cls(args[0], args[1], filename)
    else:
        err = cls(*args)
    err.host, err.port = host, port
    return err


_Error = TypeVar("_Error", bound=BaseException)


def with_host(err: _Error, host: Optional[str], port: Optional[int]) -> _Error:
    """``err``, made to name ``host`` and ``port`` if it names no host yet.

    Our errors and the bindings' get ``host`` (and ``port``) set and are returned
    as they are; a local :class:`OSError` comes back as a new :class:`LocalOSError`
    of its class (raise it ``from err``); anything else is returned untouched.
    """
    if isinstance(err, PSSHError):
        if err.host is None:
            err.host, err.port = host, port
        elif err.port is None and err.host == host:
            err.port = port
    elif isinstance(err, ssh2_exc.SSH2Error):
        if not getattr(err, "host", None):
            err.host = _where(host, port)
    elif isinstance(err, OSError) and not isinstance(err, LocalOSError):
        try:
            named = _local_os_error(type(err), err.args, err.filename, err.filename2,
                                    host, port)
        except Exception:  # an OSError subclass that cannot be rebuilt from its args
            return err
        named.__dict__.update(err.__dict__)
        return named  # type: ignore[return-value]  # a subclass of err's own class
    return err


class on_host:  # noqa: N801 - used as a statement: ``with on_host(host, port):``
    """``with on_host(host, port):``: an error leaving the block names the host
    (:func:`with_host`). ``port`` may be set on the object once it is known."""

    __slots__ = ("host", "port")

    def __init__(self, host: Optional[str], port: Optional[int] = None) -> None:
        self.host = host
        self.port = port

    def __enter__(self) -> "on_host":
        return self

    def __exit__(self, kind: Optional[type], err: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        if isinstance(err, Exception):
            named = with_host(err, self.host, self.port)
            if named is not err:
                raise named.with_traceback(tb) from err
        return False


#: The bindings' errors that mean the connection itself is gone.
_CONNECTION_GONE = (ssh2_exc.SocketRecvError, ssh2_exc.SocketSendError,
                    ssh2_exc.SocketDisconnectError)


def cause_format(err: BaseException) -> str:
    """The ``%``-format that says what ``err`` means: ``"%s"`` (its own message), or
    where libssh2's message says little, the meaning first: a socket failure is ``"the
    connection was lost (%s)"``, an SCP protocol error that the server's scp refused.
    Messages take it in their format and ``err`` in their ``args``."""
    if isinstance(err, _CONNECTION_GONE):
        return "the connection was lost (%s)"
    if isinstance(err, ssh2_exc.SCPProtocolError) and str(err.message).lower().endswith(
            ("failed to send file", "failed to recv file")):
        # The remote scp's answer to the file's name: libssh2 reads its reason and drops it.
        return ("the server's scp refused it; libssh2 drops the reason, most often a missing "
                "file or directory or no permission (%s)")
    return "%s"


# parallel-ssh's older names.
UnknownHostException = UnknownHostError
ConnectionErrorException = ConnectionError
AuthenticationException = AuthenticationError
SSHException = SSHError
HostArgumentException = HostArgumentError

__all__ = ["AuthenticationError", "AuthenticationException", "ConnectTimeout",
           "ConnectionError", "ConnectionErrorException", "ConnectionRefused",
           "HostArgumentError", "HostArgumentException", "HostConfigError", "HostKeyError",
           "HostKeyMismatchError", "HostKeyRevokedError", "InvalidAPIUseError", "LocalOSError",
           "NoIPv6AddressFoundError", "PKeyFileError", "PSSHError", "ProxyError",
           "ProxyTargetError", "SCPError", "SFTPError", "SFTPIOError", "SSHError",
           "SSHException", "SessionError", "ShellError", "Timeout", "UnknownHostError",
           "UnknownHostException", "UnknownHostKeyError", "WorkerError", "cause_format",
           "format_args", "on_host", "with_host"]

# Tracebacks, reprs and pickles name the classes by their public home, as programs written
# for parallel-ssh expect (some log the name or match on it).
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = PUBLIC_HOME
del _name, _obj
