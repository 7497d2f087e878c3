"""Host key verification against OpenSSH known_hosts files.

Policies, as OpenSSH's StrictHostKeyChecking defines them:

* ``"strict"``: the host must be in known_hosts with this key.
* ``"accept-new"`` (default): an unknown host's key is added to the file; a
  key that differs from the known one is refused.
* ``"off"``: no check. Logged as a warning for every connection.

The file is read here rather than by libssh2, whose reader stops at the
first line it cannot parse (an ``@cert-authority`` line, a key type it does
not know) and would silently drop every entry after it. Understood: host
patterns with ``*``/``?`` and ``!`` negation, ``[host]:port``, hashed names
(``|1|salt|hash``), ``@revoked`` keys and ``@cert-authority`` CA keys, whose
host certificates are checked by :mod:`pssh.host_certificates`. Lines that
cannot be parsed are skipped, one warning each.

A refused key raises :class:`~pssh.exceptions.HostKeyMismatchError` naming
the host and the presented key's fingerprint, before any authentication.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence, Tuple

from pssh.exceptions import HostKeyError, HostKeyMismatchError, UnknownHostKeyError
from pssh.host_certificates import CERT_SUFFIX, HostCertificate, is_certificate, key_type_of
from ssh2.session import HOST_CERTIFICATES, LIBSSH2_METHOD_HOSTKEY

log = logging.getLogger("pssh.known_hosts")

POLICIES = ("strict", "accept-new", "off")
DEFAULT_KNOWN_HOSTS = os.path.join("~", ".ssh", "known_hosts")
MARKERS = ("cert-authority", "revoked")
# Asked for first when a CA is trusted for the host (our libssh2 patch makes them work).
CERT_ALGORITHMS = ("ssh-ed25519-cert-v01@openssh.com",
                   "ecdsa-sha2-nistp256-cert-v01@openssh.com",
                   "ecdsa-sha2-nistp384-cert-v01@openssh.com",
                   "ecdsa-sha2-nistp521-cert-v01@openssh.com",
                   "rsa-sha2-512-cert-v01@openssh.com",
                   "rsa-sha2-256-cert-v01@openssh.com")


def fingerprint(key: bytes) -> str:
    """OpenSSH-style SHA256 fingerprint of a raw host key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> "re.Pattern[str]":
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Entry:
    """One known_hosts line."""

    marker: Optional[str]   # None, "cert-authority" or "revoked"
    hosts: str              # patterns, or a hashed name
    key: bytes
    line: int

    def matches(self, name: str) -> bool:
        """Whether ``name`` (``host`` or ``[host]:port``) is one of this line's hosts."""
        if self.hosts.startswith("|1|"):
            try:
                _, _, salt, digest = self.hosts.split("|")
                expected = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
                return hmac.compare_digest(expected, base64.b64decode(digest))
            except (ValueError, binascii.Error):
                return False
        matched = False
        for pattern in self.hosts.split(","):
            negated = pattern.startswith("!")
            if _pattern(pattern[1:] if negated else pattern).fullmatch(name):
                if negated:
                    return False
                matched = True
        return matched


def _parse(text: str, path: str) -> Tuple[Entry, ...]:
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = None
        if fields[0].startswith("@"):
            marker, fields = fields[0][1:], fields[1:]
        try:
            if marker is not None and marker not in MARKERS:
                raise ValueError(f"unknown marker @{marker}")
            if len(fields) < 3:
                raise ValueError("expected hosts, key type and key")
            key = base64.b64decode(fields[2], validate=True)
            if key_type_of(key) != fields[1]:
                raise ValueError(f"the key is not of type {fields[1]}")
        except (ValueError, binascii.Error) as err:
            log.warning("%s line %d skipped: %s", path, number, err)
            continue
        entries.append(Entry(marker, fields[0], key, number))
    return tuple(entries)


_cache: dict = {}


def load(path: str) -> Sequence[Entry]:
    """The entries of ``path`` (none if it does not exist); re-read only when it changes."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return ()
    stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    with open(path, encoding="utf-8", errors="replace") as fh:
        entries = _parse(fh.read(), path)
    _cache[path] = (stamp, entries)
    return entries


def _path(known_hosts: Optional[str]) -> str:
    return os.path.expanduser(known_hosts or DEFAULT_KNOWN_HOSTS)


def host_key_algorithms(host: str, port: int, known_hosts: Optional[str],
                        supported: Sequence[str]) -> Optional[str]:
    """The host key algorithm preference for ``host``, or None for libssh2's default.

    Certificates first when an ``@cert-authority`` line covers the host, as
    OpenSSH does; otherwise libssh2's order of plain algorithms.
    """
    name = known_hosts_name(host, port)
    if not any(e.marker == "cert-authority" and e.matches(name)
               for e in load(_path(known_hosts))):
        return None
    plain = [a for a in supported if not a.endswith(CERT_SUFFIX)]
    return ",".join([a for a in CERT_ALGORITHMS if a in supported] + plain)


def verify_host_key(session, host: str, port: int, policy: str = "accept-new",
                    known_hosts: Optional[str] = None) -> None:
    """Check the session's host key (or host certificate) for ``host:port`` under ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"host key policy must be one of {POLICIES}, not {policy!r}")
    if policy == "off":
        log.warning("%s:%d: host key NOT verified (host_key_policy='off')", host, port)
        return
    path = _path(known_hosts)
    name = known_hosts_name(host, port)
    entries = load(path)
    presented = session.hostkey()
    key = presented[0] if isinstance(presented, tuple) and presented else None
    if not isinstance(key, bytes) or not key:
        raise HostKeyError.at(host, port, "the server presented no host key to verify")
    if is_certificate(key):
        if _certificate_trusted(key, host, port, name, entries, path):
            return
        key = HostCertificate.parse(key).public_key
    _refuse_revoked(key, entries, host, port, path, "host key")
    known = [e for e in entries if e.marker is None and e.matches(name)]
    if any(e.key == key for e in known):
        return
    key_type = key_type_of(key)
    if any(key_type_of(e.key) == key_type for e in known):
        raise HostKeyMismatchError.at(
            host, port,
            f"host key does NOT match {path}: the server presented {fingerprint(key)}; "
            f"the key changed or someone is intercepting the connection. Remove the old "
            f"entry (ssh-keygen -R '{name}') if the change is expected")
    if policy == "strict":
        raise UnknownHostKeyError.at(
            host, port, f"host is not in {path} (policy 'strict'); its key is {fingerprint(key)}")
    line = f"{name} {key_type} {base64.b64encode(key).decode()}\n"
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # One write() call in one greenlet: concurrent hosts never interleave lines.
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
    log.info("%s:%d: added host key %s to %s", host, port, fingerprint(key), path)


def _refuse_revoked(key: bytes, entries: Sequence[Entry], host: str, port: int, path: str,
                    what: str) -> None:
    for entry in entries:
        if entry.marker == "revoked" and entry.key == key:
            raise HostKeyMismatchError.at(
                host, port, f"the {what} {fingerprint(key)} is marked @revoked in {path} "
                f"(line {entry.line})")


def _certificate_trusted(blob: bytes, host: str, port: int, name: str,
                         entries: Sequence[Entry], path: str) -> bool:
    """True if a CA trusted for the host vouches for this certificate; raises if it
    is trusted but the certificate is not valid; False if no trusted CA signed it."""
    try:
        cert = HostCertificate.parse(blob)
    except ValueError as err:
        raise HostKeyMismatchError.at(
            host, port, f"the server's host certificate cannot be read: {err}") from None
    if not any(e.marker == "cert-authority" and e.key == cert.signature_key and e.matches(name)
               for e in entries):
        log.debug("%s:%d: host certificate by CA %s, not trusted for %s; checking its key",
                  host, port, fingerprint(cert.signature_key), name)
        return False
    _refuse_revoked(cert.signature_key, entries, host, port, path, "certificate authority")
    _refuse_revoked(cert.public_key, entries, host, port, path, "host key")
    problem = cert.problem(host)
    if problem is not None:
        raise HostKeyMismatchError.at(
            host, port, f"host certificate {cert.key_id!r} (serial {cert.serial}, CA "
            f"{fingerprint(cert.signature_key)}) refused: {problem}")
    log.debug("%s:%d: host certificate %r valid, CA %s", host, port, cert.key_id,
              fingerprint(cert.signature_key))
    return True


def prefer_certificates(session, host: str, port: int, known_hosts: Optional[str]) -> None:
    """Before the handshake: ask for a host certificate if a CA is trusted for the host."""
    prefs = host_key_algorithms(host, port, known_hosts,
                                session.supported_algs(LIBSSH2_METHOD_HOSTKEY))
    if prefs is None:
        return
    if not HOST_CERTIFICATES:
        log.info("%s:%d: known_hosts trusts a CA for this host, but this build's libssh2 "
                 "cannot use host certificates (see LIBSSH2_BUNDLE); checking the plain key",
                 host, port)
        return
    session.method_pref(LIBSSH2_METHOD_HOSTKEY, prefs)
