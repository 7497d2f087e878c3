"""Host key verification against OpenSSH known_hosts files.

Decided as OpenSSH's ``ssh`` decides (its StrictHostKeyChecking, which the
tests run beside ours on the same files and servers):

* A host is *known* when any plain line of the file covers its name, whatever
  the key's type. Before the handshake the key types known for it are asked
  for first (:func:`host_key_algorithms`), so that a server which has the
  known key shows it; a known host presenting any other key, of another type
  included, has *changed*. Without that rule a man in the middle with a key of
  another type would pass as a new host.
* ``"strict"`` (``yes``): only a known key passes.
* ``"accept-new"`` (default): an unknown host's key is added to the file; a
  changed one is refused.
* ``"off"`` (``no``): an unknown host's key is added too; a changed one is let
  through with a warning, but the connection is marked (:func:`verify_host_key`
  answers False) and the login then sends no password and no
  keyboard-interactive answers, and the agent is not forwarded, as OpenSSH does.
* A key marked ``@revoked`` is refused under every policy (OpenSSH lets ``no``
  connect to it with the same restrictions; a key known to be stolen is refused
  here).

The file is read here rather than by libssh2, whose reader stops at the
first line it cannot parse (an ``@cert-authority`` line, a key type it does
not know) and would silently drop every entry after it. Understood: host
patterns with ``*``/``?`` and ``!`` negation, ``[host]:port``, hashed names
(``|1|salt|hash``), ``@revoked`` keys and ``@cert-authority`` CA keys, whose
host certificates are checked by :mod:`pssh.core.host_certificates`. Lines that
cannot be parsed are skipped, one warning each.

A refused key raises :class:`~pssh.exceptions.HostKeyMismatchError` naming
the host and the presented key's fingerprint, before any authentication.
"""
from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Sequence, Tuple

from pssh.core import freshness
from pssh.core.errors import (HostKeyError, HostKeyMismatchError, HostKeyRevokedError,
                              UnknownHostKeyError)
from pssh.core.host_certificates import CERT_SUFFIX, HostCertificate, is_certificate, key_type_of
from ssh2.session import HOST_CERTIFICATES, LIBSSH2_METHOD_HOSTKEY

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.session import Session

log = logging.getLogger("pssh.core.known_hosts")

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
    import hashlib  # here: loading OpenSSL's hashes costs ~7 ms at start-up
    return "SHA256:" + base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


@lru_cache(maxsize=4096)
def _pattern(pattern: str) -> "re.Pattern[str]":
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL)


class Entry(NamedTuple):
    """One known_hosts line (a tuple: a file has as many as a fleet has hosts)."""

    marker: Optional[str]   # None, "cert-authority" or "revoked"
    hosts: str              # patterns, or a hashed name
    key: bytes
    line: int

    @property
    def hashed(self) -> Optional[Tuple[bytes, bytes]]:
        """``(salt, digest)`` of a hashed name (``|1|salt|digest``), else None."""
        if not self.hosts.startswith("|1|"):
            return None
        try:
            _, _, salt, digest = self.hosts.split("|")
            return base64.b64decode(salt), base64.b64decode(digest)
        except (ValueError, binascii.Error):
            return None

    def matches(self, name: str) -> bool:
        """Whether ``name`` (``host`` or ``[host]:port``) is one of this line's hosts."""
        if self.hosts.startswith("|1|"):
            hashed = self.hashed
            return hashed is not None and _hashed_is(hashed, name)
        matched = False
        for pattern in self.hosts.split(","):
            negated = pattern.startswith("!")
            if _pattern(pattern[1:] if negated else pattern).fullmatch(name):
                if negated:
                    return False
                matched = True
        return matched


def _hashed_is(hashed: Tuple[bytes, bytes], name: str) -> bool:
    salt, digest = hashed
    import hmac  # here: only hashed entries need it, and it costs ~7 ms at start-up
    return hmac.compare_digest(hmac.digest(salt, name.encode(), "sha1"), digest)


class KnownHosts:
    """The entries of one known_hosts file, indexed once per version of the file.

    Plain names go in a dict; patterns are compiled once; hashed names are
    indexed by their key, so that confirming a known host costs one HMAC
    whatever the file's size. Only a host whose key is not there (new, or
    changed) needs every hashed name tried, one HMAC per line: the salts are
    per line, as OpenSSH writes them.
    """

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = tuple(entries)
        self._by_name: Dict[str, List[Entry]] = {}
        self._patterned: List[Entry] = []
        self._hashed: List[Tuple[Tuple[bytes, bytes], Entry]] = []
        self._hashed_by_key: Dict[bytes, List[Tuple[Tuple[bytes, bytes], Entry]]] = {}
        self.revoked: Dict[bytes, Entry] = {}
        self.authorities: List[Entry] = []
        self._entries: Dict[str, List[Entry]] = {}  # name -> entries_for(name), as asked
        for entry in self.entries:
            if entry.marker == "revoked":
                self.revoked.setdefault(entry.key, entry)
            elif entry.marker == "cert-authority":
                self.authorities.append(entry)
            elif entry.hosts.startswith("|1|"):
                hashed = entry.hashed
                if hashed is not None:
                    self._hashed.append((hashed, entry))
                    self._hashed_by_key.setdefault(entry.key, []).append((hashed, entry))
            elif any(ch in entry.hosts for ch in "*?!"):
                self._patterned.append(entry)
            else:
                for name in entry.hosts.split(","):
                    self._by_name.setdefault(name.lower(), []).append(entry)

    def knows(self, name: str, key: bytes) -> bool:
        """Whether a plain entry for ``name`` holds ``key`` (the common case, fast)."""
        if any(e.key == key for e in self._by_name.get(name.lower(), ())):
            return True
        if any(_hashed_is(hashed, name) for hashed, _ in self._hashed_by_key.get(key, ())):
            return True
        return any(e.key == key and e.matches(name) for e in self._patterned)

    def entries_for(self, name: str) -> List[Entry]:
        """Every plain entry (not @revoked, not @cert-authority) that covers ``name``
        (remembered: with hashed lines it costs an HMAC per line)."""
        found = self._entries.get(name)
        if found is None:
            found = self._unhashed_for(name)
            found += [e for hashed, e in self._hashed if _hashed_is(hashed, name)]
            self._entries[name] = found
        return found

    def _unhashed_for(self, name: str) -> List[Entry]:
        return list(self._by_name.get(name.lower(), ())) + [e for e in self._patterned
                                                            if e.matches(name)]

    def types_for(self, name: str) -> frozenset:
        """The key types known for ``name``, to ask the server for those first.

        Those of its plain-text and pattern lines when it has some: they are enough
        for the server to present a key we can check, and cost a dict look-up. Only a
        host named by hashed lines alone costs an HMAC per hashed line, as it does
        OpenSSH; a fleet whose known_hosts is hashed pays that once per host and run.
        """
        found = self._entries.get(name)
        if found is None:
            found = self._unhashed_for(name) or self.entries_for(name)
        return frozenset(key_type_of(e.key) for e in found)

    def authorities_for(self, name: str) -> List[Entry]:
        """The @cert-authority entries that cover ``name``."""
        return [e for e in self.authorities if e.matches(name)]


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
            # The blob starts with its type name (an SSH string): it must match.
            if key[4:4 + int.from_bytes(key[:4], "big")] != fields[1].encode():
                raise ValueError(f"the key is not of type {fields[1]}")
        except (ValueError, binascii.Error) as err:
            log.warning("%s line %d skipped: %s", path, number, err)
            continue
        entries.append(Entry(marker, fields[0], key, number))
    return tuple(entries)


_cache: Dict[str, Tuple[tuple, KnownHosts]] = {}
_EMPTY = KnownHosts(())


def load(path: str, fresh: bool = False) -> KnownHosts:
    """The indexed entries of ``path`` (none if it does not exist); read and indexed
    again only when the file changes. Whether it changed is looked at once per run
    (:mod:`pssh.core.freshness`) unless ``fresh``: a host key decision looks every time."""
    try:
        stat = os.stat(path) if fresh else freshness.stat(path)
    except FileNotFoundError:
        return _EMPTY
    stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    with open(path, encoding="utf-8", errors="replace") as fh:
        # The stamp of the file read, not of the status looked at before: the two differ
        # when the file changed in between, and the content must not be kept under the
        # older one (a restored copy with that stamp would then find it).
        read = os.fstat(fh.fileno())
        index = KnownHosts(_parse(fh.read(), path))
    _cache[path] = ((read.st_mtime_ns, read.st_size, read.st_ino), index)
    return index


def _path(known_hosts: Optional[str]) -> str:
    return os.path.expanduser(known_hosts or DEFAULT_KNOWN_HOSTS)


#: OpenSSH's order of plain host key algorithms (libssh2's own puts ECDSA first): a host
#: added to known_hosts gets the key ``ssh`` would have recorded.
PLAIN_ORDER = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
               "ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")


def key_type_of_algorithm(algorithm: str) -> str:
    """The key type an algorithm (plain or certificate) signs with: ``rsa-sha2-512`` and
    ``rsa-sha2-256-cert-v01@openssh.com`` are ``ssh-rsa`` keys."""
    if algorithm.endswith(CERT_SUFFIX):
        algorithm = algorithm[:-len(CERT_SUFFIX)]
    return "ssh-rsa" if algorithm.startswith("rsa-sha2-") else algorithm


def host_key_algorithms(host: str, port: int, known_hosts: Optional[str],
                        supported: Sequence[str]) -> str:
    """The host key algorithms to offer for ``host``, most wanted first.

    As OpenSSH orders them: certificates first when an ``@cert-authority`` line
    covers the host; then the algorithms of the key types known_hosts holds for
    the host; then the other plain algorithms in OpenSSH's order; certificates
    no CA vouches for last (their plain key is what gets checked).
    """
    index = load(_path(known_hosts))
    name = known_hosts_name(host, port)
    return _ordered(index.types_for(name), bool(index.authorities_for(name)),
                    tuple(supported))


@lru_cache(maxsize=256)
def _ordered(known: frozenset, vouched: bool, supported: Tuple[str, ...]) -> str:
    """:func:`host_key_algorithms`' order for hosts whose known key types are ``known``
    (``vouched``: a CA covers them); the same for most hosts of a fleet, so made once."""
    certs = [a for a in CERT_ALGORITHMS if a in supported]
    certs += [a for a in supported if a.endswith(CERT_SUFFIX) and a not in certs]
    plain = [a for a in PLAIN_ORDER if a in supported]
    plain += [a for a in supported if not a.endswith(CERT_SUFFIX) and a not in plain]

    def known_first(algorithms: List[str]) -> List[str]:
        return sorted(algorithms, key=lambda a: key_type_of_algorithm(a) not in known)

    if vouched:
        return ",".join(known_first(certs) + known_first(plain))
    return ",".join(known_first(plain) + certs)


def verify_host_key(session: Session, host: str, port: int, policy: str = "accept-new",
                    known_hosts: Optional[str] = None) -> bool:
    """Check the session's host key (or host certificate) for ``host:port`` under
    ``policy``: True when it is known (or was added as new); False when it has changed
    and the policy (``off``) lets the connection go on regardless, which must then send
    no secrets (:mod:`pssh.core.auth`). Raises when the connection must not go on."""
    if policy not in POLICIES:
        raise ValueError(f"host key policy must be one of {POLICIES}, not {policy!r}")
    path = _path(known_hosts)
    name = known_hosts_name(host, port)
    index = load(path, fresh=True)   # what trusts a host never uses a status seen earlier
    presented = session.hostkey()
    key = presented[0] if isinstance(presented, tuple) and presented else None
    if not isinstance(key, bytes) or not key:
        raise HostKeyError.at(host, port, "the server presented no host key to verify")
    if is_certificate(key):
        try:
            if _certificate_trusted(key, host, port, name, index, path):
                return True
        except HostKeyRevokedError:
            raise
        except HostKeyMismatchError as err:
            if policy != "off":
                raise
            return _let_through(host, port, err.reason)
        key = HostCertificate.parse(key).public_key
    _refuse_revoked(key, index, host, port, path, "host key")
    if index.knows(name, key):
        return True
    known = index.entries_for(name)
    if known:
        lines = ", ".join(f"{key_type_of(e.key)} on line {e.line}" for e in known[:3])
        reason = (f"host key has CHANGED: it does NOT match {path}, which holds {lines} for "
                  f"{name}; the server presented {key_type_of(key)} {fingerprint(key)}: the "
                  f"key changed or "
                  f"someone is intercepting the connection. Remove the old entry "
                  f"(ssh-keygen -R '{name}' -f '{path}') if the change is expected")
        if policy == "off":
            return _let_through(host, port, reason)
        raise HostKeyMismatchError.at(host, port, reason)
    if policy == "strict":
        raise UnknownHostKeyError.at(
            host, port, f"host is not in {path} (policy 'strict'); its key is {fingerprint(key)}")
    _append(path, f"{name} {key_type_of(key)} {base64.b64encode(key).decode()}\n")
    # ssh's words, at ssh's level for them (INFO: shown unless -q); the details below.
    log.info("Permanently added '%s' (%s) to the list of known hosts.", name,
             ssh_type_name(key_type_of(key)))
    log.debug("%s:%d: added host key %s %s to %s", host, port, key_type_of(key),
              fingerprint(key), path)
    return True


#: How OpenSSH names key types in its messages ("ED25519", not "ssh-ed25519").
_SSH_TYPE_NAMES = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA",
                   "ecdsa-sha2-nistp256": "ECDSA", "ecdsa-sha2-nistp384": "ECDSA",
                   "ecdsa-sha2-nistp521": "ECDSA", "sk-ssh-ed25519@openssh.com": "ED25519-SK",
                   "sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK"}


def ssh_type_name(key_type: str) -> str:
    """OpenSSH's name of a key type in its messages (``ssh-ed25519`` -> ``ED25519``)."""
    return _SSH_TYPE_NAMES.get(key_type, key_type)


def _let_through(host: str, port: int, reason: str) -> bool:
    log.warning("%s:%d: %s. Connecting anyway (host_key_policy 'off'): password and "
                "keyboard-interactive logins and agent forwarding are disabled to avoid a "
                "man-in-the-middle attack", host, port, reason)
    return False


def _append(path: str, line: str) -> None:
    directory = os.path.dirname(path)
    if directory:  # a bare file name is in the current directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
    # One write() call in one greenlet: concurrent hosts never interleave lines.
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
    freshness.forget(path)


def _refuse_revoked(key: bytes, index: KnownHosts, host: str, port: int, path: str,
                    what: str) -> None:
    entry = index.revoked.get(key)
    if entry is not None:
        raise HostKeyRevokedError.at(
                host, port, f"the {what} {fingerprint(key)} is marked @revoked in {path} "
                f"(line {entry.line})")


def _certificate_trusted(blob: bytes, host: str, port: int, name: str,
                         index: KnownHosts, path: str) -> bool:
    """True if a CA trusted for the host vouches for this certificate; raises if it
    is trusted but the certificate is not valid; False if no trusted CA signed it."""
    try:
        cert = HostCertificate.parse(blob)
    except ValueError as err:
        raise HostKeyMismatchError.at(
            host, port, f"the server's host certificate cannot be read: {err}") from None
    if not any(e.key == cert.signature_key for e in index.authorities_for(name)):
        log.debug("%s:%d: host certificate by CA %s, not trusted for %s; checking its key",
                  host, port, fingerprint(cert.signature_key), name)
        return False
    _refuse_revoked(cert.signature_key, index, host, port, path, "certificate authority")
    _refuse_revoked(cert.public_key, index, host, port, path, "host key")
    problem = cert.problem(host)
    if problem is not None:
        raise HostKeyMismatchError.at(
            host, port, f"host certificate {cert.key_id!r} (serial {cert.serial}, CA "
            f"{fingerprint(cert.signature_key)}) refused: {problem}")
    log.debug("%s:%d: host certificate %r valid, CA %s", host, port, cert.key_id,
              fingerprint(cert.signature_key))
    return True


def set_host_key_preference(session: Session, host: str, port: int,
                           known_hosts: Optional[str]) -> None:
    """Before the handshake: offer the host key algorithms :func:`host_key_algorithms`
    orders for the host."""
    session.method_pref(LIBSSH2_METHOD_HOSTKEY,
                        host_key_algorithms(host, port, known_hosts, _host_key_supported(session)))


_supported: Optional[Tuple[str, ...]] = None


def _host_key_supported(session: Session) -> Tuple[str, ...]:
    """The host key algorithms this build's libssh2 supports (asked once: they are
    compiled in)."""
    global _supported
    if _supported is None:
        supported = session.supported_algs(LIBSSH2_METHOD_HOSTKEY)
        if not HOST_CERTIFICATES:
            # This build's libssh2 cannot check certificates: never ask for them.
            supported = [a for a in supported if not a.endswith(CERT_SUFFIX)]
        _supported = tuple(supported)
    return _supported


__all__ = ["DEFAULT_KNOWN_HOSTS", "POLICIES", "KnownHosts", "fingerprint",
           "host_key_algorithms", "key_type_of_algorithm", "known_hosts_name", "load",
           "set_host_key_preference", "verify_host_key"]
