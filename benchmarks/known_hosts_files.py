"""known_hosts files of fleet size, for the known_hosts benchmark and its test.

``filler(n, hashed)`` gives n lines for hosts that are not ours (plain
``name type key`` or OpenSSH's hashed ``|1|salt|hmac`` form, a random salt
per line as ``ssh-keygen -H`` writes them), with well-formed random keys of
the three common types.
"""
from __future__ import annotations

import base64
import hmac
import os
import struct
from typing import Iterator

KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa")


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def random_key(key_type: str) -> bytes:
    """A well-formed public key blob of ``key_type`` (not a usable key)."""
    if key_type == "ssh-ed25519":
        return _string(b"ssh-ed25519") + _string(os.urandom(32))
    if key_type == "ecdsa-sha2-nistp256":
        return (_string(b"ecdsa-sha2-nistp256") + _string(b"nistp256")
                + _string(b"\x04" + os.urandom(64)))
    return _string(b"ssh-rsa") + _string(b"\x01\x00\x01") + _string(b"\x00" + os.urandom(256))


def hashed_name(name: str) -> str:
    salt = os.urandom(20)
    digest = hmac.digest(salt, name.encode(), "sha1")
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def line(name: str, key: bytes, hashed: bool = False) -> str:
    key_type = key[4:4 + struct.unpack(">I", key[:4])[0]].decode()
    shown = hashed_name(name) if hashed else name
    return f"{shown} {key_type} {base64.b64encode(key).decode()}\n"


def filler(n: int, hashed: bool) -> Iterator[str]:
    """``n`` lines for other hosts (``host-<i>.fleet.example``, one key type each)."""
    for i in range(n):
        yield line(f"host-{i}.fleet.example", random_key(KEY_TYPES[i % 3]), hashed)
