"""SFTP errors under asyncssh's names: :class:`SFTPError` and one class per status code.

A request the server answers with an error status raises the class of that status
(``SFTPNoSuchFile``, ``SFTPPermissionDenied``, ``SFTPFailure`` ...), with the status
as ``code``; each is also the gevent client's :class:`pssh.exceptions.SFTPError`
(reading or writing a file's data: :class:`pssh.exceptions.SFTPIOError`), and names
the host and port.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

from pssh import exceptions as exc
from pssh.aio import constants as c
from pssh.aio.exceptions import Error
from ssh2 import exceptions as ssh2_exc

__all__ = ["SFTPError", "SFTPEOFError", "SFTPNoSuchFile", "SFTPPermissionDenied", "SFTPFailure",
           "SFTPBadMessage", "SFTPNoConnection", "SFTPConnectionLost", "SFTPOpUnsupported",
           "SFTPInvalidHandle", "SFTPNoSuchPath", "SFTPFileAlreadyExists", "SFTPWriteProtect",
           "SFTPNoMedia", "SFTPNoSpaceOnFilesystem", "SFTPQuotaExceeded",
           "SFTPUnknownPrincipal", "SFTPLockConflict", "SFTPDirNotEmpty", "SFTPNotADirectory",
           "SFTPInvalidFilename", "SFTPLinkLoop", "SFTPCannotDelete", "SFTPInvalidParameter",
           "SFTPFileIsADirectory", "SFTPByteRangeLockConflict", "SFTPByteRangeLockRefused",
           "SFTPDeletePending", "SFTPFileCorrupt", "SFTPOwnerInvalid", "SFTPGroupInvalid",
           "SFTPNoMatchingByteRangeLock"]


class SFTPError(Error, exc.SFTPError):
    """An SFTP request failed: ``code`` is the SFTP status (``FX_...``)."""


class _Status(SFTPError):
    """An :class:`SFTPError` whose status its class implies: ``(reason, lang)``."""

    CODE = c.FX_FAILURE

    def __init__(self, reason: str = "", lang: str = c.DEFAULT_LANG, *,
                 host: Optional[str] = None, port: Optional[int] = None) -> None:
        super().__init__(self.CODE, reason, lang, host=host, port=port)


class SFTPEOFError(_Status):
    """End of file (or of a directory listing)."""
    CODE = c.FX_EOF


class SFTPNoSuchFile(_Status):
    """The file is not there."""
    CODE = c.FX_NO_SUCH_FILE


class SFTPPermissionDenied(_Status):
    """The server's permissions forbid the request."""
    CODE = c.FX_PERMISSION_DENIED


class SFTPFailure(_Status):
    """The request failed for a reason the status does not say (a directory not
    empty on SFTP version 3, a file that exists ...)."""
    CODE = c.FX_FAILURE


class SFTPBadMessage(_Status):
    """The server could not parse the request."""
    CODE = c.FX_BAD_MESSAGE


class SFTPNoConnection(_Status):
    """No connection to the server."""
    CODE = c.FX_NO_CONNECTION


class SFTPConnectionLost(_Status):
    """The connection to the server was lost."""
    CODE = c.FX_CONNECTION_LOST


class SFTPOpUnsupported(_Status):
    """The server does not do this operation."""
    CODE = c.FX_OP_UNSUPPORTED


class SFTPInvalidHandle(_Status):
    CODE = c.FX_INVALID_HANDLE


class SFTPNoSuchPath(_Status):
    CODE = c.FX_NO_SUCH_PATH


class SFTPFileAlreadyExists(_Status):
    CODE = c.FX_FILE_ALREADY_EXISTS


class SFTPWriteProtect(_Status):
    CODE = c.FX_WRITE_PROTECT


class SFTPNoMedia(_Status):
    CODE = c.FX_NO_MEDIA


class SFTPNoSpaceOnFilesystem(_Status):
    CODE = c.FX_NO_SPACE_ON_FILESYSTEM


class SFTPQuotaExceeded(_Status):
    CODE = c.FX_QUOTA_EXCEEDED


class SFTPUnknownPrincipal(_Status):
    CODE = c.FX_UNKNOWN_PRINCIPAL


class SFTPLockConflict(_Status):
    CODE = c.FX_LOCK_CONFLICT


class SFTPDirNotEmpty(_Status):
    CODE = c.FX_DIR_NOT_EMPTY


class SFTPNotADirectory(_Status):
    CODE = c.FX_NOT_A_DIRECTORY


class SFTPInvalidFilename(_Status):
    CODE = c.FX_INVALID_FILENAME


class SFTPLinkLoop(_Status):
    CODE = c.FX_LINK_LOOP


class SFTPCannotDelete(_Status):
    CODE = c.FX_CANNOT_DELETE


class SFTPInvalidParameter(_Status):
    CODE = c.FX_INVALID_PARAMETER


class SFTPFileIsADirectory(_Status):
    CODE = c.FX_FILE_IS_A_DIRECTORY


class SFTPByteRangeLockConflict(_Status):
    CODE = c.FX_BYTE_RANGE_LOCK_CONFLICT


class SFTPByteRangeLockRefused(_Status):
    CODE = c.FX_BYTE_RANGE_LOCK_REFUSED


class SFTPDeletePending(_Status):
    CODE = c.FX_DELETE_PENDING


class SFTPFileCorrupt(_Status):
    CODE = c.FX_FILE_CORRUPT


class SFTPOwnerInvalid(_Status):
    CODE = c.FX_OWNER_INVALID


class SFTPGroupInvalid(_Status):
    CODE = c.FX_GROUP_INVALID


class SFTPNoMatchingByteRangeLock(_Status):
    CODE = c.FX_NO_MATCHING_BYTE_RANGE_LOCK


#: Status code -> class, for errors the server reports.
BY_STATUS: Dict[int, Type[_Status]] = {
    cls.CODE: cls for cls in _Status.__subclasses__()}


def sftp_error(host: str, port: int, what: str, err: BaseException,
               io: bool = False) -> SFTPError:
    """The error for a failed SFTP request ``what``: the class of the status the server
    answered with (:class:`SFTPFailure` when it sent none, e.g. the channel failed).
    ``io``: reading or writing data, also a :class:`pssh.exceptions.SFTPIOError`."""
    status = getattr(err, "sftp_status", None) if isinstance(err, ssh2_exc.SFTPError) else None
    cls = BY_STATUS.get(status, SFTPFailure) if status is not None else SFTPFailure
    if isinstance(err, (ssh2_exc.SocketDisconnectError, ssh2_exc.SocketRecvError,
                        ssh2_exc.SocketSendError)):
        cls = SFTPConnectionLost
    text = str(err) or type(err).__name__
    if io:
        cls = also(cls, exc.SFTPIOError)
    return cls(f"{what}: {text}", host=host, port=port)


_COMBINED: Dict[tuple, type] = {}


def also(cls: type, base: type) -> type:
    """``cls`` that is also a ``base`` of :mod:`pssh.exceptions` (made once per pair), so
    that ``except`` clauses written for either catch it; it keeps ``cls``'s name."""
    key = (cls, base)
    if key not in _COMBINED:
        _COMBINED[key] = type(cls.__name__, (cls, base),
                              {"__module__": __name__, "__qualname__": cls.__qualname__})
    return _COMBINED[key]
