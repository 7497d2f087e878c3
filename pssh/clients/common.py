"""Argument checks shared by the clients (parallel-ssh's ``pssh.clients.common``)."""
from __future__ import annotations

import logging
import os
from typing import Optional, Union

from pssh.exceptions import InvalidAPIUseError, PKeyFileError

logger = logging.getLogger("pssh")


def _validate_pkey_path(pkey: Optional[str]) -> Optional[str]:
    """The key file's normalised path (``~`` expanded); PKeyFileError if it does not exist."""
    if pkey is None:
        return None
    path = os.path.normpath(os.path.expanduser(pkey))
    if not os.path.exists(path):
        raise PKeyFileError("private key file %s does not exist; give an absolute path or one "
                            "relative to the home directory such as '~/.ssh/my_key'", path)
    return path


def _validate_pkey(pkey: Union[str, bytes, None]) -> Union[str, bytes, None]:
    """A key path checked and normalised; key data (bytes) as given."""
    if isinstance(pkey, str):
        return _validate_pkey_path(pkey)
    return pkey


def _validate_api(keyboard_interactive: Optional[bool], password: Optional[str]) -> None:
    if keyboard_interactive and not password:
        msg = "keyboard_interactive authentication is on but no password is given"
        logger.error(msg)
        raise InvalidAPIUseError(msg)
