"""OpenSSH host certificates: parsing and checking (PROTOCOL.certkeys).

libssh2 (with our patch) uses a certificate's embedded key for the key
exchange but does not look at the certificate itself. Trusting one needs,
as OpenSSH does: a CA key that known_hosts marks ``@cert-authority`` for the
host, the CA's valid signature over the certificate, the host type, the host
name among the principals (or no principals at all), the current time inside
the validity window, and no critical options. Signatures are checked with
``cryptography``.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

CERT_SUFFIX = "-cert-v01@openssh.com"
HOST_CERT = 2
# Fields of the certified key, after type and nonce, per key type.
_KEY_FIELDS = {"ssh-ed25519": 1, "ecdsa-sha2-nistp256": 2, "ecdsa-sha2-nistp384": 2,
               "ecdsa-sha2-nistp521": 2, "ssh-rsa": 2}
# CA signature algorithms accepted (OpenSSH's default CASignatureAlgorithms: no SHA-1).
_SIGNATURE_HASHES = {"ssh-ed25519": None, "ecdsa-sha2-nistp256": "sha256",
                     "ecdsa-sha2-nistp384": "sha384", "ecdsa-sha2-nistp521": "sha512",
                     "rsa-sha2-256": "sha256", "rsa-sha2-512": "sha512"}


class _Reader:
    """SSH wire format (RFC 4251): uint32, uint64, string."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise ValueError("truncated certificate")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def uint32(self) -> int:
        return struct.unpack(">I", self._take(4))[0]

    def uint64(self) -> int:
        return struct.unpack(">Q", self._take(8))[0]

    def string(self) -> bytes:
        return self._take(self.uint32())

    def strings(self) -> List[bytes]:
        inner = _Reader(self.string())
        items = []
        while inner.pos < len(inner.data):
            items.append(inner.string())
        return items

    def done(self) -> bool:
        return self.pos == len(self.data)


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def key_type_of(blob: bytes) -> str:
    """The type name a public key or certificate blob starts with."""
    return _Reader(blob).string().decode("ascii", "replace")


def is_certificate(blob: bytes) -> bool:
    return key_type_of(blob).endswith(CERT_SUFFIX)


@dataclass(frozen=True)
class HostCertificate:
    """The fields of an OpenSSH certificate that a host check needs."""

    key_type: str                 # the certified key's type, e.g. "ssh-ed25519"
    public_key: bytes             # the certified key as a plain public key blob
    serial: int
    cert_type: int
    key_id: str
    principals: Tuple[str, ...]
    valid_after: int
    valid_before: int
    critical_options: Tuple[str, ...]
    signature_key: bytes          # the CA's public key blob
    signature: bytes
    signed_data: bytes

    @classmethod
    def parse(cls, blob: bytes) -> "HostCertificate":
        reader = _Reader(blob)
        cert_type_name = reader.string().decode("ascii", "replace")
        key_type = cert_type_name[:-len(CERT_SUFFIX)] if cert_type_name.endswith(CERT_SUFFIX) \
            else ""
        if key_type not in _KEY_FIELDS:
            raise ValueError(f"not a supported certificate type: {cert_type_name!r}")
        reader.string()  # nonce
        fields = [reader.string() for _ in range(_KEY_FIELDS[key_type])]
        public_key = _string(key_type.encode()) + b"".join(_string(f) for f in fields)
        serial, cert_type = reader.uint64(), reader.uint32()
        key_id = reader.string().decode("utf-8", "replace")
        principals = tuple(p.decode("utf-8", "replace") for p in reader.strings())
        valid_after, valid_before = reader.uint64(), reader.uint64()
        critical = reader.strings()[::2]  # name, data, name, data, ...
        reader.string()  # extensions
        reader.string()  # reserved
        signature_key = reader.string()
        signed_data = blob[:reader.pos]
        signature = reader.string()
        if not reader.done():
            raise ValueError("trailing bytes after the certificate's signature")
        return cls(key_type, public_key, serial, cert_type, key_id, principals, valid_after,
                   valid_before, tuple(o.decode("utf-8", "replace") for o in critical),
                   signature_key, signature, signed_data)

    def problem(self, host: str, now: Optional[float] = None) -> Optional[str]:
        """Why this certificate cannot vouch for ``host`` (None if it can).

        The caller has already found the signing key trusted for ``host``.
        """
        now = time.time() if now is None else now
        if self.cert_type != HOST_CERT:
            return "it is a user certificate, not a host certificate"
        if self.principals and host.lower() not in (p.lower() for p in self.principals):
            return f"{host!r} is not among its principals {list(self.principals)}"
        if now < self.valid_after:
            return f"it is not valid before {_when(self.valid_after)}"
        if now >= self.valid_before:
            return f"it expired at {_when(self.valid_before)}"
        if self.critical_options:
            return f"it has critical options {list(self.critical_options)} (none are defined " \
                   f"for host certificates)"
        if not verify_signature(self.signature_key, self.signature, self.signed_data):
            return "its CA signature is not valid"
        return None


def _when(stamp: int) -> str:
    if stamp >= 2 ** 63:
        return "forever"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def verify_signature(key_blob: bytes, signature_blob: bytes, data: bytes) -> bool:
    """Whether ``signature_blob`` (SSH format) by ``key_blob`` signs ``data``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    key = _Reader(key_blob)
    key_type = key.string().decode("ascii", "replace")
    sig = _Reader(signature_blob)
    sig_type = sig.string().decode("ascii", "replace")
    sig_bytes = sig.string()
    if sig_type not in _SIGNATURE_HASHES:
        return False
    digests: Dict[str, Callable[[], hashes.HashAlgorithm]] = {
        "sha256": hashes.SHA256, "sha384": hashes.SHA384, "sha512": hashes.SHA512}
    hash_name = _SIGNATURE_HASHES[sig_type]
    digest = digests[hash_name] if hash_name is not None else None
    try:
        if key_type == "ssh-ed25519" and sig_type == "ssh-ed25519":
            ed25519.Ed25519PublicKey.from_public_bytes(key.string()).verify(sig_bytes, data)
        elif key_type.startswith("ecdsa-sha2-") and sig_type == key_type:
            curves: Dict[str, Callable[[], ec.EllipticCurve]] = {
                "nistp256": ec.SECP256R1, "nistp384": ec.SECP384R1, "nistp521": ec.SECP521R1}
            curve = curves[key.string().decode("ascii")]()
            public = ec.EllipticCurvePublicKey.from_encoded_point(curve, key.string())
            parts = _Reader(sig_bytes)
            r = int.from_bytes(parts.string(), "big")
            s = int.from_bytes(parts.string(), "big")
            assert digest is not None  # every ECDSA signature type names its hash
            public.verify(encode_dss_signature(r, s), data, ec.ECDSA(digest()))
        elif key_type == "ssh-rsa" and sig_type.startswith("rsa-sha2-"):
            e = int.from_bytes(key.string(), "big")
            n = int.from_bytes(key.string(), "big")
            assert digest is not None  # every rsa-sha2 signature type names its hash
            rsa.RSAPublicNumbers(e, n).public_key().verify(sig_bytes, data, padding.PKCS1v15(),
                                                           digest())
        else:
            return False
    except (InvalidSignature, ValueError, KeyError):
        return False
    return True

