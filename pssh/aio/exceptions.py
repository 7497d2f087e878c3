"""Exceptions of the asyncio front end: asyncssh's names, arguments and hierarchy.

``except (OSError, asyncssh.Error)`` and ``except asyncssh.PermissionDenied``
catch here what they catch with asyncssh: :class:`Error` is the base, carrying
``code``, ``reason`` and ``lang``; :class:`DisconnectError` and its subclasses
end a connection; :class:`ChannelOpenError`, :class:`ProcessError` (and its
:class:`TimeoutError`) and the SFTP errors (:mod:`pssh.aio.sftp_errors`)
concern one channel or request. Each constructor takes asyncssh's arguments,
so a program may raise them too (a listener's ``ChannelOpenError``).

Added here, as everywhere in pssh: what we raise names the host and port in
``str()`` and in ``.host`` / ``.port`` (``.reason`` is the text without them),
and each is also the gevent client's exception for the same failure, so an
``except`` written for :mod:`pssh.exceptions` catches it as well:
:class:`PermissionDenied` is an :class:`~pssh.exceptions.AuthenticationError`,
:class:`ConnectionLost` a :class:`~pssh.exceptions.ConnectionError`, ...
"""
from __future__ import annotations

import builtins
import signal
import socket
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional

from pssh import exceptions as exc
from pssh.aio.constants import (DEFAULT_LANG, DISC_COMPRESSION_ERROR, DISC_CONNECTION_LOST,
                                DISC_HOST_KEY_NOT_VERIFIABLE, DISC_ILLEGAL_USER_NAME,
                                DISC_KEY_EXCHANGE_FAILED, DISC_MAC_ERROR,
                                DISC_NO_MORE_AUTH_METHODS_AVAILABLE, DISC_PROTOCOL_ERROR,
                                DISC_SERVICE_NOT_AVAILABLE, OPEN_CONNECT_FAILED)
from ssh2 import exceptions as ssh2_exc


class Error(exc.PSSHError):
    """asyncssh's base of SSH errors: ``code``, ``reason``, ``lang``.

    ``host`` / ``port`` (keywords, ours): the host concerned, then named by ``str()``.
    """

    def __init__(self, code: int, reason: str, lang: str = DEFAULT_LANG, *,
                 host: Optional[str] = None, port: Optional[int] = None) -> None:
        args = ("%s:%s: %s", host, port, reason) if host is not None else (reason,)
        exc.PSSHError.__init__(self, *args, host=host, port=port)
        if isinstance(self, OSError):
            # The classes that are also built-in OSErrors: OSError reads two or more
            # arguments as (errno, strerror, ...); keep ours as given. (Set through a name
            # of the OSError type: they are OSError's fields, not ones of this class.)
            os_error: OSError = self
            os_error.args, os_error.errno, os_error.strerror, os_error.filename = \
                args, None, reason, None
        self.code = code
        self._reason = reason
        self.lang = lang

    @property
    def reason(self) -> str:
        """What went wrong, without the host (asyncssh's field)."""
        return self._reason


class DisconnectError(Error):
    """The connection ended for a reason of SSH itself: ``code`` is the disconnect reason."""


class _DisconnectReason(DisconnectError):
    """A :class:`DisconnectError` whose code its class implies: ``(reason, lang)``."""

    CODE = 0

    def __init__(self, reason: str, lang: str = DEFAULT_LANG, *, host: Optional[str] = None,
                 port: Optional[int] = None) -> None:
        super().__init__(self.CODE, reason, lang, host=host, port=port)


class CompressionError(_DisconnectReason, exc.SSHError):
    """Compressing or decompressing the connection's data failed."""
    CODE = DISC_COMPRESSION_ERROR


class ConnectionLost(_DisconnectReason, exc.ConnectionError):
    """The connection went away: the server closed it or stopped answering keepalives, or
    logging in took longer than ``login_timeout``."""
    CODE = DISC_CONNECTION_LOST


class HostKeyNotVerifiable(_DisconnectReason, exc.HostKeyError):
    """The server's host key is unknown (policy ``strict``, or a client's
    ``validate_host_public_key`` said no), changed or revoked."""
    CODE = DISC_HOST_KEY_NOT_VERIFIABLE


class IllegalUserName(_DisconnectReason, exc.AuthenticationError):
    """The user name was refused."""
    CODE = DISC_ILLEGAL_USER_NAME


class KeyExchangeFailed(_DisconnectReason, exc.ConnectionError):
    """The key exchange failed: most often no algorithm both sides accept."""
    CODE = DISC_KEY_EXCHANGE_FAILED


class MACError(_DisconnectReason, exc.SSHError):
    """A message failed its integrity check."""
    CODE = DISC_MAC_ERROR


class PermissionDenied(_DisconnectReason, exc.AuthenticationError):
    """No authentication method was accepted."""
    CODE = DISC_NO_MORE_AUTH_METHODS_AVAILABLE


class ProtocolError(_DisconnectReason, exc.SSHError):
    """The server broke the SSH protocol (or libssh2 could not follow it)."""
    CODE = DISC_PROTOCOL_ERROR


class ProtocolNotSupported(_DisconnectReason, exc.ConnectionError):
    """The peer does not speak SSH version 2 (code: protocol error, as asyncssh has it)."""
    CODE = DISC_PROTOCOL_ERROR


class ServiceNotAvailable(_DisconnectReason, exc.SSHError):
    """The server refused a service the client asked for."""
    CODE = DISC_SERVICE_NOT_AVAILABLE


class ChannelOpenError(Error, exc.SessionError):
    """A channel could not be opened: ``code`` is the channel open failure reason
    (``OPEN_CONNECT_FAILED`` ...). Listeners' session factories raise it to refuse."""


# The ignore: as for ProxyTargetError, PSSHError's ``message`` property wins, as intended.
class TCPChannelOpenError(ChannelOpenError, exc.ProxyTargetError):  # type: ignore[override]
    """The server could not make a TCP connection asked for (``open_connection``,
    ``create_connection``, a forwarded port): a :class:`ChannelOpenError` and the gevent
    client's :class:`~pssh.exceptions.ProxyTargetError`."""

    def __init__(self, code: int, reason: str, lang: str = DEFAULT_LANG, *,
                 host: Optional[str] = None, port: Optional[int] = None) -> None:
        super().__init__(code, reason, lang, host=host, port=port)
        self.errname = ""


class ChannelListenError(exc.SessionError):
    """The server refused to listen for us (``forward_remote_port``, ``create_server``)."""


class ProcessError(Error):
    """A command run with ``check=True`` exited non-zero or by a signal.

    asyncssh's fields: ``env``, ``command``, ``subsystem``, ``exit_status``,
    ``exit_signal``, ``returncode``, ``stdout``, ``stderr``; ``reason`` says how it
    ended.
    """

    def __init__(self, env: Optional[Mapping[str, str]], command: Optional[str],
                 subsystem: Optional[str], exit_status: Optional[int],
                 exit_signal: Optional[tuple], returncode: Optional[int], stdout, stderr,
                 reason: str = "", lang: str = DEFAULT_LANG, *, host: Optional[str] = None,
                 port: Optional[int] = None) -> None:
        if exit_signal:
            name, core_dumped, message = exit_signal[0], exit_signal[1], exit_signal[2]
            reason = (f"Process exited with signal {name}" + (f": {message}" if message else "")
                      + (" (core dumped)" if core_dumped else ""))
        elif exit_status:
            reason = f"Process exited with non-zero exit status {exit_status}"
        super().__init__(exit_status or 0, reason, lang, host=host, port=port)
        if command and host is not None:
            self.args = ("%s:%s: command %r: %s", host, port, command, reason)
        self.env = env
        self.command = command
        self.subsystem = subsystem
        self.exit_status = exit_status
        self.exit_signal = exit_signal
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


class TimeoutError(ProcessError, exc.Timeout, builtins.TimeoutError):  # noqa: A001
    """``run(timeout=)`` or ``process.wait(timeout)`` ran out: a :class:`ProcessError`
    with the output received so far, an :class:`asyncio.TimeoutError` (asyncssh's) and
    the gevent client's :class:`~pssh.exceptions.Timeout`."""


class ConnectTimeout(exc.ConnectTimeout, builtins.TimeoutError):
    """``connect_timeout`` ran out (connecting, the handshake and logging in as a whole):
    the :class:`asyncio.TimeoutError` asyncssh raises, and the gevent client's
    :class:`~pssh.exceptions.ConnectTimeout`."""


class HostNotFound(exc.UnknownHostError, socket.gaierror):
    """The host name does not resolve: the :class:`socket.gaierror` asyncssh lets through
    (an ``OSError``) and the gevent client's :class:`~pssh.exceptions.UnknownHostError`."""

    def __init__(self, *args, host: Optional[str] = None, port: Optional[int] = None) -> None:
        exc.PSSHError.__init__(self, *args, host=host, port=port)
        self.errno = self.strerror = self.filename = None


class KeyImportError(exc.PKeyFileError, ValueError):
    """A private key cannot be read: unknown format, or encrypted and no passphrase given
    (asyncssh's, a ``ValueError``; also a :class:`~pssh.exceptions.PKeyFileError`)."""


class KeyEncryptionError(exc.PKeyFileError, ValueError):
    """An encrypted private key did not open with the passphrase given."""


class KeyFileNotFound(exc.PKeyFileError, FileNotFoundError):
    """A key file named in ``client_keys`` does not exist (asyncssh lets the
    ``FileNotFoundError`` through; also a :class:`~pssh.exceptions.PKeyFileError`)."""

    def __init__(self, *args, host: Optional[str] = None, port: Optional[int] = None) -> None:
        exc.PSSHError.__init__(self, *args, host=host, port=port)
        self.errno, self.strerror, self.filename = 2, "No such file or directory", None


#: libssh2's errors that mean the connection itself is gone.
_SOCKET_ERRORS = (ssh2_exc.SocketDisconnectError, ssh2_exc.SocketRecvError,
                  ssh2_exc.SocketSendError)


def disconnect_error(host: str, port: int, err: ssh2_exc.SSH2Error) -> DisconnectError:
    """The :class:`DisconnectError` for a libssh2 error that ended the connection."""
    text = getattr(err, "message", "") or str(err) or type(err).__name__
    if isinstance(err, _SOCKET_ERRORS):
        return ConnectionLost(f"connection lost: {text}", host=host, port=port)
    if isinstance(err, ssh2_exc.KexFailureError):
        return KeyExchangeFailed(f"key exchange failed: {text}", host=host, port=port)
    return ProtocolError(text, host=host, port=port)


@contextmanager
def connection_errors(host: str, port: int, link=None) -> Iterator[None]:
    """Turn libssh2's "the connection is gone" errors into :class:`ConnectionLost`; with
    the connection's ``link``, also declare it lost and close it (every other wait on it
    then fails the same way, and its client hears of it)."""
    try:
        yield
    except _SOCKET_ERRORS as err:
        if isinstance(err, exc.PSSHError):   # ours already (ProxyTargetError is one)
            raise
        lost = disconnect_error(host, port, err)
        if link is not None and link.session is not None:
            lost = link.lose(lost.reason)
            link.close()
        raise lost from err


def lost_error(host: str, port: int, reason: str) -> "ConnectionLost":
    """What a lost server raises on this front end (a link's ``lost_error``)."""
    return ConnectionLost(reason, host=host, port=port)


def channel_open_error(host: str, port: int, what: str, err: BaseException) -> ChannelOpenError:
    """The :class:`ChannelOpenError` for a channel the server would not open."""
    text = getattr(err, "message", "") or str(err)
    return ChannelOpenError(OPEN_CONNECT_FAILED, f"{what}: {text}", host=host, port=port)


def returncode(exit_status: Optional[int], exit_signal: Optional[tuple]) -> Optional[int]:
    """As ``subprocess`` does: minus the signal's number (this platform's) when killed by one."""
    if exit_signal:
        try:
            return -signal.Signals[f"SIG{exit_signal[0]}"]
        except KeyError:
            pass
    return exit_status


_returncode = returncode  # the name process.py imports
