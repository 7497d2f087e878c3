"""Host key verification against OpenSSH known_hosts files.

Policies, as OpenSSH's StrictHostKeyChecking defines them:

* ``"strict"``: the host must be in known_hosts with this key.
* ``"accept-new"`` (default): an unknown host's key is added to the file; a
  key that differs from the known one is refused.
* ``"off"``: no check. Logged as a warning for every connection.

A refused key raises :class:`~pssh.exceptions.HostKeyMismatchError` naming
the host and the presented key's fingerprint, before any authentication.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import os
from typing import Optional

from pssh.exceptions import HostKeyMismatchError, UnknownHostKeyError
from ssh2 import exceptions as ssh2_exc
from ssh2.knownhost import (LIBSSH2_KNOWNHOST_KEYENC_RAW, LIBSSH2_KNOWNHOST_TYPE_PLAIN,
                            hostkey_typemask)

log = logging.getLogger("pssh.known_hosts")

POLICIES = ("strict", "accept-new", "off")
DEFAULT_KNOWN_HOSTS = os.path.join("~", ".ssh", "known_hosts")


def fingerprint(key: bytes) -> str:
    """OpenSSH-style SHA256 fingerprint of a raw host key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def verify_host_key(session, host: str, port: int, policy: str = "accept-new",
                    known_hosts: Optional[str] = None) -> None:
    """Check the session's host key for ``host:port`` under ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"host key policy must be one of {POLICIES}, not {policy!r}")
    if policy == "off":
        log.warning("%s:%d: host key NOT verified (host_key_policy='off')", host, port)
        return
    path = os.path.expanduser(known_hosts or DEFAULT_KNOWN_HOSTS)
    key, key_type = session.hostkey()
    typemask = (LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW
                | hostkey_typemask(key_type))
    store = session.knownhost_init()
    if os.path.exists(path):
        try:
            store.readfile(path)
        except ssh2_exc.KnownHostReadFileError as err:
            log.warning("%s: %s; treating it as empty", path, err)
    try:
        store.checkp(host, port, key, typemask)
        return
    except ssh2_exc.KnownHostCheckMisMatchError:
        raise HostKeyMismatchError(
            f"host key does NOT match {path}: the server presented {fingerprint(key)}; "
            f"the key changed or someone is intercepting the connection. Remove the old "
            f"entry (ssh-keygen -R '{known_hosts_name(host, port)}') if the change is expected",
            host, port) from None
    except ssh2_exc.KnownHostCheckNotFoundError:
        if policy == "strict":
            raise UnknownHostKeyError(
                f"host is not in {path} (policy 'strict'); its key is {fingerprint(key)}",
                host, port) from None
    entry = store.addc(known_hosts_name(host, port), key, typemask)
    line = store.writeline(entry)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # One write() call in one greenlet: concurrent hosts never interleave lines.
    with open(path, "ab") as fh:
        fh.write(line)
    log.info("%s:%d: added host key %s to %s", host, port, fingerprint(key), path)
