"""Exceptions raised by the ssh2 bindings.

Every exception carries the libssh2 error number (``errno``), its symbolic
name (``errname``) and libssh2's own message, and ``str(exc)`` reads as a
sentence. SFTP protocol errors also carry the SFTP status code
(``sftp_status``) and its name, and the common statuses have their own
subclasses (no such file, permission denied, ...).

Class names follow the established ``ssh2.exceptions`` module so existing
``except`` clauses keep working. ``error_for`` is the one place that maps a
libssh2 error number to a class.
"""
from __future__ import annotations

from ssh2 import error_codes


class SSH2Error(Exception):
    """Base class of every error raised by the bindings."""

    errno: int | None
    errname: str
    message: str
    host: str | None

    def __init__(self, message: str = "", errno: int | None = None,
                 host: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.errname = _ERROR_NAMES.get(errno, "") if errno is not None else ""
        self.host = host

    def __str__(self) -> str:
        # An error without a message reads as the first line of its class's docstring.
        doc = type(self).__doc__ or type(self).__name__
        text = self.message or doc.strip().splitlines()[0].rstrip(".")
        if self.host:
            text = f"{self.host}: {text}"
        if self.errno is not None:
            text = f"{text} (libssh2 error {self.errno} {self.errname})".replace(" )", ")")
        return text


class UnknownError(SSH2Error):
    """libssh2 returned an error this module does not know."""


# Session and transport
class SessionError(SSH2Error):
    """The SSH session failed."""


class SessionStartupError(SessionError):
    """The session could not be started."""


class SessionHandshakeError(SessionError):
    """The SSH handshake failed."""


class SessionHostKeyError(SessionError):
    """The server's host key could not be read."""


class SessionClosedError(SessionError):
    """The session, or the object it was used through, is already closed."""


class BannerRecvError(SessionError):
    """No SSH banner was received from the server (is it an SSH server?)."""


class BannerSendError(SessionError):
    """The SSH banner could not be sent to the server."""


class KexFailureError(SessionError):
    """Key exchange failed: client and server share no algorithm, or the exchange broke."""


class KeyExchangeError(KexFailureError):
    """Key exchange failed."""


class AllocError(SessionError):
    """libssh2 could not allocate memory."""


class SocketSendError(SSH2Error):
    """Sending on the socket failed."""


class SocketRecvError(SSH2Error):
    """Receiving from the socket failed (the server closed the connection?)."""


class SocketDisconnectError(SSH2Error):
    """The connection is closed."""


class SocketTimeout(SessionError):
    """Timed out waiting on the socket."""


class Timeout(SessionError):
    """The operation timed out (see Session.set_timeout)."""


class BadSocketError(SSH2Error):
    """The socket is not usable."""


class InvalidMACError(SSH2Error):
    """A packet failed its integrity check."""


class MacFailureError(InvalidMACError):
    """MAC computation failed."""


class DecryptError(SessionError):
    """A packet could not be decrypted."""


class EncryptError(SessionError):
    """A packet could not be encrypted."""


class HostkeyInitError(SessionError):
    """The host key algorithm could not be initialised."""


class HostkeySignError(SessionError):
    """The server's host key signature did not verify."""


class ProtocolError(SSH2Error):
    """The peer broke the SSH protocol."""


class MethodNoneError(SSH2Error):
    """No algorithm was negotiated for a method."""


class MethodNotSupported(SessionError):
    """The method or algorithm is not supported."""


class AlgoUnsupportedError(MethodNotSupported):
    """The algorithm is not supported by this libssh2 build."""


class InvalidPollTypeError(SSH2Error):
    """Invalid poll type."""


class BufferTooSmallError(SSH2Error):
    """The buffer given was too small."""


class BadUseError(SSH2Error):
    """The call was used wrongly (wrong order or arguments)."""


class InvalidRequestError(BadUseError):
    """An argument was invalid."""


class OutOfBoundaryError(SSH2Error):
    """Out of boundary access."""


class CompressError(SessionError):
    """Compression failed."""


class ZlibError(CompressError):
    """zlib failed."""


class RandGenError(SSH2Error):
    """The random number generator failed."""


class HashInitError(SSH2Error):
    """A hash could not be initialised."""


class HashCalcError(SSH2Error):
    """A hash could not be computed."""


class FileError(SSH2Error):
    """A local file (key, known hosts) could not be read or written."""


# Authentication
class AuthenticationError(SSH2Error):
    """Authentication failed: the server rejected the user, key or password."""


class PasswordExpiredError(AuthenticationError):
    """The password has expired."""


class PublickeyUnverifiedError(AuthenticationError):
    """The server did not accept the public key."""


class PublicKeyError(SSH2Error):
    """The publickey subsystem (RFC 4819) failed."""


class PublicKeyInitError(PublicKeyError):
    """The publickey subsystem could not be started (most servers do not offer it)."""


class PublicKeyProtocolError(SSH2Error):
    """Public key subsystem protocol error."""


class KeyfileAuthFailedError(AuthenticationError):
    """The key file could not be used (wrong passphrase, bad format or not found)."""


class MissingUserAuthBannerError(SSH2Error):
    """The server sent no user authentication banner."""


class AgentError(SSH2Error):
    """The SSH agent failed."""


class AgentConnectionError(AgentError):
    """Could not connect to the SSH agent (is SSH_AUTH_SOCK set?)."""


class AgentAuthenticationError(AuthenticationError, AgentError):
    """No identity in the SSH agent was accepted by the server."""


class AgentListIdentitiesError(AgentError):
    """The SSH agent's identities could not be listed."""


class AgentGetIdentityError(AgentError):
    """An identity could not be read from the SSH agent."""


class AgentProtocolError(AgentError):
    """The SSH agent broke its protocol."""


# Channels
class ChannelError(SSH2Error):
    """A channel operation failed."""


class ChannelOutOfOrderError(ChannelError):
    """Channel packets arrived out of order."""


class ChannelFailure(ChannelError):
    """The server refused the channel request."""


class ChannelRequestDenied(ChannelFailure):
    """The server denied the channel request."""


class RequestDeniedError(SessionError):
    """The server denied the request."""


class ChannelUnknownError(ChannelError):
    """The channel is unknown to the server."""


class ChannelWindowExceeded(ChannelError):
    """The peer exceeded the channel window."""


class ChannelPacketExceeded(ChannelError):
    """The peer exceeded the channel packet size."""


class ChannelClosedError(ChannelError):
    """The channel is closed."""


class ChannelEOFSentError(ChannelError):
    """EOF was already sent on this channel."""


class ChannelWindowFullError(ChannelError):
    """The channel window is full."""


class SCPProtocolError(ChannelError, SessionError):
    """SCP failed (no such file, permission denied, or a protocol error)."""


# Known hosts
class KnownHostError(SSH2Error):
    """A known hosts operation failed."""


class KnownHostAddError(KnownHostError):
    """The host could not be added to known hosts."""


class KnownHostDeleteError(KnownHostError):
    """The entry could not be deleted from known hosts."""


class KnownHostReadLineError(KnownHostError):
    """The known hosts line could not be parsed."""


class KnownHostReadFileError(KnownHostError):
    """The known hosts file could not be read."""


class KnownHostWriteLineError(KnownHostError):
    """The known hosts line could not be written."""


class KnownHostWriteFileError(KnownHostError):
    """The known hosts file could not be written."""


class KnownHostGetError(KnownHostError):
    """Known hosts entries could not be listed."""


class KnownHostCheckError(KnownHostError):
    """The host key check did not match."""


class KnownHostCheckFailure(KnownHostCheckError):
    """The host key check failed to run."""


class KnownHostCheckNotFoundError(KnownHostCheckError):
    """The host is not in known hosts."""


class KnownHostCheckMisMatchError(KnownHostCheckError):
    """The host's key does NOT match the key in known hosts: possible man-in-the-middle."""


# SFTP
class SFTPError(SSH2Error):
    """An SFTP operation failed."""


class SFTPHandleError(SFTPError):
    """An SFTP handle could not be opened or used."""


class SFTPIOError(SFTPError):
    """Local file I/O failed during an SFTP transfer."""


class SFTPProtocolError(SFTPError):
    """The SFTP server answered with an error status."""

    sftp_status: int | None
    status_name: str

    def __init__(self, message: str = "", errno: int | None = None,
                 host: str | None = None, sftp_status: int | None = None) -> None:
        super().__init__(message, errno, host)
        self.sftp_status = sftp_status
        self.status_name = (_SFTP_STATUS_NAMES.get(sftp_status, "")
                            if sftp_status is not None else "")

    def __str__(self) -> str:
        text = super().__str__()
        if self.sftp_status is not None:
            text = f"{text}: SFTP status {self.sftp_status} {self.status_name}"
        return text


class SFTPEOFError(SFTPProtocolError):
    """End of file."""


class SFTPNoSuchFileError(SFTPProtocolError):
    """No such file or directory on the server."""


class SFTPPermissionDeniedError(SFTPProtocolError):
    """Permission denied on the server."""


class SFTPFailureError(SFTPProtocolError):
    """The SFTP server reported a generic failure."""


class SFTPOpUnsupportedError(SFTPProtocolError):
    """The SFTP server does not support this operation."""


class SFTPFileAlreadyExistsError(SFTPProtocolError):
    """The file already exists on the server."""


class SFTPNoSpaceError(SFTPProtocolError):
    """No space left on the server's file system."""


class SFTPDirNotEmptyError(SFTPProtocolError):
    """The directory is not empty."""


class SFTPNotADirectoryError(SFTPProtocolError):
    """Not a directory."""


class SFTPConnectionLostError(SFTPProtocolError):
    """The SFTP connection was lost."""


# The exception class of each libssh2 error, by the name libssh2.h gives it
# (without the LIBSSH2_ERROR_ prefix): the numbers come from the header, through
# ssh2.error_codes, never from this file. EAGAIN is no error here.
_CLASS_OF_ERROR = {
    "SOCKET_NONE": SocketDisconnectError,
    "BANNER_RECV": BannerRecvError,
    "BANNER_SEND": BannerSendError,
    "INVALID_MAC": InvalidMACError,
    "KEX_FAILURE": KexFailureError,
    "ALLOC": AllocError,
    "SOCKET_SEND": SocketSendError,
    "KEY_EXCHANGE_FAILURE": KeyExchangeError,
    "TIMEOUT": Timeout,
    "HOSTKEY_INIT": HostkeyInitError,
    "HOSTKEY_SIGN": HostkeySignError,
    "DECRYPT": DecryptError,
    "SOCKET_DISCONNECT": SocketDisconnectError,
    "PROTO": ProtocolError,
    "PASSWORD_EXPIRED": PasswordExpiredError,
    "FILE": FileError,
    "METHOD_NONE": MethodNoneError,
    "AUTHENTICATION_FAILED": AuthenticationError,
    "PUBLICKEY_UNVERIFIED": PublickeyUnverifiedError,
    "CHANNEL_OUTOFORDER": ChannelOutOfOrderError,
    "CHANNEL_FAILURE": ChannelFailure,
    "CHANNEL_REQUEST_DENIED": ChannelRequestDenied,
    "CHANNEL_UNKNOWN": ChannelUnknownError,
    "CHANNEL_WINDOW_EXCEEDED": ChannelWindowExceeded,
    "CHANNEL_PACKET_EXCEEDED": ChannelPacketExceeded,
    "CHANNEL_CLOSED": ChannelClosedError,
    "CHANNEL_EOF_SENT": ChannelEOFSentError,
    "SCP_PROTOCOL": SCPProtocolError,
    "ZLIB": ZlibError,
    "SOCKET_TIMEOUT": SocketTimeout,
    "SFTP_PROTOCOL": SFTPProtocolError,
    "REQUEST_DENIED": RequestDeniedError,
    "METHOD_NOT_SUPPORTED": MethodNotSupported,
    "INVAL": InvalidRequestError,
    "INVALID_POLL_TYPE": InvalidPollTypeError,
    "PUBLICKEY_PROTOCOL": PublicKeyProtocolError,
    "BUFFER_TOO_SMALL": BufferTooSmallError,
    "BAD_USE": BadUseError,
    "COMPRESS": CompressError,
    "OUT_OF_BOUNDARY": OutOfBoundaryError,
    "AGENT_PROTOCOL": AgentProtocolError,
    "SOCKET_RECV": SocketRecvError,
    "ENCRYPT": EncryptError,
    "BAD_SOCKET": BadSocketError,
    "KNOWN_HOSTS": KnownHostError,
    "CHANNEL_WINDOW_FULL": ChannelWindowFullError,
    "KEYFILE_AUTH_FAILED": KeyfileAuthFailedError,
    "RANDGEN": RandGenError,
    "MISSING_USERAUTH_BANNER": MissingUserAuthBannerError,
    "ALGO_UNSUPPORTED": AlgoUnsupportedError,
    "MAC_FAILURE": MacFailureError,
    "HASH_INIT": HashInitError,
    "HASH_CALC": HashCalcError,
}
_ERROR_NAMES: dict[int, str] = {}
for _name, _number in vars(error_codes).items():
    if _name.startswith("LIBSSH2_ERROR_") and _number:
        _ERROR_NAMES.setdefault(_number, _name)  # an alias keeps the first name
_ERROR_CLASSES: dict[int, type[SSH2Error]] = {
    getattr(error_codes, "LIBSSH2_ERROR_" + name): cls for name, cls in _CLASS_OF_ERROR.items()}

_SFTP_STATUS_NAMES = {
    0: "FX_OK", 1: "FX_EOF", 2: "FX_NO_SUCH_FILE", 3: "FX_PERMISSION_DENIED",
    4: "FX_FAILURE", 5: "FX_BAD_MESSAGE", 6: "FX_NO_CONNECTION", 7: "FX_CONNECTION_LOST",
    8: "FX_OP_UNSUPPORTED", 9: "FX_INVALID_HANDLE", 10: "FX_NO_SUCH_PATH",
    11: "FX_FILE_ALREADY_EXISTS", 12: "FX_WRITE_PROTECT", 13: "FX_NO_MEDIA",
    14: "FX_NO_SPACE_ON_FILESYSTEM", 15: "FX_QUOTA_EXCEEDED", 16: "FX_UNKNOWN_PRINCIPAL",
    17: "FX_LOCK_CONFLICT", 18: "FX_DIR_NOT_EMPTY", 19: "FX_NOT_A_DIRECTORY",
    20: "FX_INVALID_FILENAME", 21: "FX_LINK_LOOP",
}

_SFTP_STATUS_CLASSES: dict[int, type[SFTPProtocolError]] = {
    1: SFTPEOFError, 2: SFTPNoSuchFileError, 3: SFTPPermissionDeniedError,
    4: SFTPFailureError, 7: SFTPConnectionLostError, 8: SFTPOpUnsupportedError,
    10: SFTPNoSuchFileError, 11: SFTPFileAlreadyExistsError, 14: SFTPNoSpaceError,
    18: SFTPDirNotEmptyError, 19: SFTPNotADirectoryError,
}


def error_name(errno: int) -> str:
    """The symbolic name of a libssh2 error number (``LIBSSH2_ERROR_...``)."""
    return _ERROR_NAMES.get(errno, f"unknown error {errno}")


def error_for(errno: int, message: str = "", sftp_status: int | None = None,
              context: str = "") -> SSH2Error:
    """Build the exception for a libssh2 error number.

    ``context`` names what was being done ("opening /etc/x"), ``message`` is
    libssh2's own text; both end up in ``str(exc)``.
    """
    text = message or "failed"
    if context:
        text = f"{context}: {text}"
    cls: type[SSH2Error]
    if errno == error_codes.LIBSSH2_ERROR_SFTP_PROTOCOL and sftp_status is not None:
        cls = _SFTP_STATUS_CLASSES.get(sftp_status, SFTPProtocolError)
        return cls(text, errno, sftp_status=sftp_status)
    cls = _ERROR_CLASSES.get(errno, UnknownError)
    return cls(text, errno)
