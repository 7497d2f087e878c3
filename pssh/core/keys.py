"""What a private key file is, before libssh2 is asked to use it.

libssh2 reports every key problem alike ("Wrong passphrase or
invalid/unrecognized private key file format"), and with the key's ``.pub``
beside it a wrong passphrase only shows at signing time ("Callback returned
error"). Reading the key's header first (no decryption: that is libssh2's
job, once) lets the error say which it is: missing, a directory, unreadable,
not a key format libssh2 reads, encrypted with no passphrase given, or (after
a failed login) a wrong passphrase.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
import stat
import struct
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Type

from pssh.core import freshness
from pssh.core.errors import PKeyFileError

_OPENSSH = re.compile(rb"-----BEGIN OPENSSH PRIVATE KEY-----\s*(.*?)\s*"
                      rb"-----END OPENSSH PRIVATE KEY-----", re.S)
_PEM = re.compile(rb"-----BEGIN ((?:RSA |EC |DSA |ENCRYPTED )?)PRIVATE KEY-----(.*?)-----END", re.S)
_MAGIC = b"openssh-key-v1\0"


@dataclass(frozen=True)
class KeyInfo:
    """A private key's container: ``openssh`` or ``pem``, and whether it is encrypted."""

    format: str
    encrypted: bool


def inspect_key(data: bytes, name: str, error: Type[Exception] = PKeyFileError) -> KeyInfo:
    """The format of private key ``data``; ``error`` naming ``name`` if it is not one
    libssh2 reads."""
    match = _OPENSSH.search(data)
    if match is not None:
        try:
            blob = base64.b64decode(b"".join(match.group(1).split()), validate=True)
            if not blob.startswith(_MAGIC):
                raise ValueError("no openssh-key-v1 header")
            (length,) = struct.unpack(">I", blob[len(_MAGIC):len(_MAGIC) + 4])
            cipher = blob[len(_MAGIC) + 4:len(_MAGIC) + 4 + length]
        except (binascii.Error, ValueError, struct.error) as err:
            raise error("%s is a damaged OpenSSH private key (%s)" % (name, err)) from None
        return KeyInfo("openssh", cipher != b"none")
    match = _PEM.search(data)
    if match is not None:
        encrypted = match.group(1) == b"ENCRYPTED " or b"Proc-Type: 4,ENCRYPTED" in match.group(2)
        return KeyInfo("pem", encrypted)
    if data.startswith(b"PuTTY-User-Key-File"):
        raise error("%s is a PuTTY key: convert it with puttygen KEY -O private-openssh "
                    "-o KEY.openssh" % name)
    if data.lstrip().startswith((b"ssh-", b"ecdsa-", b"sk-")):
        raise error("%s is a public key; give the private key (without .pub)" % name)
    raise error("%s is not a private key libssh2 reads (OpenSSH or PEM format)" % name)


@dataclass(frozen=True)
class KeyFile:
    """A private key file as logins use it: its container, its bytes, and the public key
    and certificate beside it (``<key>.pub``, ``<key>-cert.pub``), if present."""

    path: str
    info: KeyInfo
    data: bytes
    public: Optional[bytes]
    certificate: Optional[bytes]


#: path -> (what the file and its folder looked like, the file as read)
_cache: Dict[str, Tuple[tuple, KeyFile]] = {}


def read_key_file(path: str) -> KeyFile:
    """The key file at ``path`` and its ``.pub`` and ``-cert.pub``, read once for as long
    as neither the file nor its folder changes: a fan-out to many hosts reads them once,
    and asks whether they changed once per run (:mod:`pssh.core.freshness`), not per host.
    The error says whether the key is missing, a directory, unreadable or not a key."""
    try:
        st = freshness.stat(path)
        folder = freshness.stat(os.path.dirname(path) or ".")
    except FileNotFoundError:
        raise PKeyFileError("private key file %s does not exist", path) from None
    except OSError as err:
        raise PKeyFileError("private key file %s: %s", path, err.strerror) from None
    if stat.S_ISDIR(st.st_mode):
        raise PKeyFileError("private key file %s is a directory", path)
    # A file written in place keeps its inode: its time and size tell; a .pub or
    # certificate added, removed or replaced changes the folder's time.
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino, folder.st_mtime_ns, folder.st_ino)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        with open(path, "rb") as fh:
            read = os.fstat(fh.fileno())
            data = fh.read()
    except OSError as err:
        raise PKeyFileError("private key file %s cannot be read: %s", path,
                            err.strerror) from None
    info = inspect_key(data, f"private key file {path}")
    key = KeyFile(path, info, data, _read_beside(path + ".pub"),
                  _read_beside(path + "-cert.pub"))
    # Kept under the stamp of the file read (the status looked at before may be older).
    _cache[path] = ((read.st_mtime_ns, read.st_size, read.st_ino) + stamp[3:], key)
    return key


def _read_beside(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:   # absent (or unreadable: as if absent, as ssh does)
        return None


def inspect_key_file(path: str) -> KeyInfo:
    """:func:`inspect_key` for a file (read once per change of the file); the error says
    whether it is missing, a directory or unreadable."""
    return read_key_file(path).info
