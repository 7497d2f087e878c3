"""Locate libssh2 >= 1.11 for the build, or build it from Debian's source package.

Order of preference:

1. ``LIBSSH2_PREFIX`` (env): a prefix with ``include/libssh2.h`` and ``lib/libssh2.so``.
2. pkg-config's ``libssh2`` when it is new enough (``PKG_CONFIG_PATH`` is honoured).
3. Debian's trixie source package (libssh2 1.11.1 plus Debian's security patches),
   fetched with ``apt-get source`` through a private apt configuration so the
   machine's own apt state is never touched, and built with the OpenSSL backend.
   The shared library is then shipped inside the ``ssh2`` package and found
   through an ``$ORIGIN`` rpath.

``LIBSSH2_BUNDLE=1`` forces (3) even where the system's libssh2 would do.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

MIN_VERSION = (1, 11, 0)
SOURCE_SUITE = "trixie"
SOURCE_MIRROR = "http://deb.debian.org/debian"
APT_PACKAGES = "build-essential dpkg-dev libssl-dev zlib1g-dev pkg-config"
# Our own changes to the bundled build (see each file's header).
PATCHES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "patches")


class LibSSH2NotFound(RuntimeError):
    pass


@dataclass
class LibSSH2:
    version: str
    include_dirs: list[str]
    library_dirs: list[str]
    libraries: list[str] = field(default_factory=lambda: ["ssh2"])
    # Shared objects to copy next to the extensions (bundled build only).
    bundle: list[str] = field(default_factory=list)
    # Built with build_support/patches (bundled build only).
    patched: bool = False


def _parse(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def _log(msg: str) -> None:
    print(f"[libssh2] {msg}", file=sys.stderr, flush=True)


def _from_prefix(prefix: str) -> LibSSH2:
    header = os.path.join(prefix, "include", "libssh2.h")
    if not os.path.exists(header):
        raise LibSSH2NotFound(f"LIBSSH2_PREFIX={prefix} has no include/libssh2.h")
    version = "unknown"
    with open(header, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#define LIBSSH2_VERSION "):
                version = line.split('"')[1]
    libdirs = [d for d in (os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")) if os.path.isdir(d)]
    return LibSSH2(version, [os.path.join(prefix, "include")], libdirs)


def _from_pkg_config() -> LibSSH2 | None:
    try:
        version = subprocess.run(["pkg-config", "--modversion", "libssh2"], check=True,
                                 capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    if _parse(version) < MIN_VERSION:
        _log(f"system libssh2 {version} is older than 1.11; building 1.11.1 from Debian's source package")
        return None

    def flags(opt: str, prefix: str) -> list[str]:
        out = subprocess.run(["pkg-config", opt, "libssh2"], check=True,
                             capture_output=True, text=True).stdout.split()
        return [f[len(prefix):] for f in out if f.startswith(prefix)]

    return LibSSH2(version, flags("--cflags-only-I", "-I"), flags("--libs-only-L", "-L"))


def _run(cmd: list[str], cwd: str, log: str) -> None:
    with open(log, "ab") as fh:
        fh.write(("\n$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        with open(log, "rb") as fh:
            tail = fh.read()[-3000:].decode(errors="replace")
        raise LibSSH2NotFound(
            f"building libssh2 failed at `{' '.join(cmd)}` (log: {log}):\n{tail}\n"
            f"Install the build dependencies: apt-get install {APT_PACKAGES}")


def _fetch_source(scratch: str, log: str) -> str:
    """Download and unpack Debian's libssh2 source package; return the source tree."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-source"):
        raise LibSSH2NotFound(
            "libssh2 >= 1.11 was not found and cannot be built here: apt-get and dpkg-source are "
            f"needed to fetch Debian's source package (apt-get install {APT_PACKAGES}), or install "
            "libssh2 >= 1.11 and point PKG_CONFIG_PATH or LIBSSH2_PREFIX at it")
    apt = os.path.join(scratch, "apt")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(apt, sub), exist_ok=True)
    sources = os.path.join(apt, "sources.list")
    with open(sources, "w", encoding="utf-8") as fh:
        fh.write(f"deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                 f"{SOURCE_MIRROR} {SOURCE_SUITE} main\n")
    opts = [
        "-o", f"Dir::Etc::sourcelist={sources}",
        "-o", "Dir::Etc::sourceparts=/nonexistent",
        "-o", f"Dir::State::Lists={apt}/lists",
        "-o", f"Dir::Cache={apt}/cache",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
    ]
    _log(f"fetching libssh2 source from Debian {SOURCE_SUITE}")
    _run(["apt-get", *opts, "update"], apt, log)
    download = os.path.join(scratch, "download")
    os.makedirs(download, exist_ok=True)
    _run(["apt-get", *opts, "--download-only", "source", "libssh2"], download, log)
    dsc = sorted(glob.glob(os.path.join(download, "libssh2_*.dsc")))
    if not dsc:
        raise LibSSH2NotFound(f"apt-get source libssh2 produced no .dsc in {download} (log: {log})")
    src = os.path.join(scratch, "src")
    shutil.rmtree(src, ignore_errors=True)
    # dpkg-source applies Debian's patches, which include security fixes.
    _run(["dpkg-source", "--no-check", "-x", dsc[-1], src], download, log)
    for patch in sorted(glob.glob(os.path.join(PATCHES, "*.patch"))):
        _log(f"applying {os.path.basename(patch)}")
        _run(["patch", "-p1", "--forward", "-i", patch], src, log)
    return src


def _patches_digest() -> str:
    """One digest of our patches: a cached build made with other patches is rebuilt."""
    digest = hashlib.sha256()
    for patch in sorted(glob.glob(os.path.join(PATCHES, "*.patch"))):
        with open(patch, "rb") as fh:
            digest.update(os.path.basename(patch).encode() + b"\0" + fh.read())
    return digest.hexdigest()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def build_bundled(scratch: str) -> LibSSH2:
    """Build libssh2 from Debian's source package into ``scratch`` (reused if present)."""
    scratch = os.path.abspath(scratch)
    prefix = os.path.join(scratch, "install")
    libdir = os.path.join(prefix, "lib")
    stamp = os.path.join(prefix, "patches.sha256")
    if not (os.path.exists(os.path.join(libdir, "libssh2.so.1"))
            and os.path.exists(os.path.join(prefix, "include", "libssh2.h"))
            and _read(stamp) == _patches_digest()):
        os.makedirs(scratch, exist_ok=True)
        log = os.path.join(scratch, "build.log")
        src = _fetch_source(scratch, log)
        _log("configuring and building libssh2 (OpenSSL backend)")
        _run(["./configure", f"--prefix={prefix}", "--libdir=" + libdir, "--with-crypto=openssl",
              "--with-libz", "--enable-shared", "--disable-static", "--disable-examples-build",
              "--disable-docker-tests", "--disable-sshd-tests", "--disable-debug"], src, log)
        _run(["make", "-j2", "-C", "src"], src, log)
        _run(["make", "-C", "src", "install"], src, log)
        include = os.path.join(prefix, "include")
        os.makedirs(include, exist_ok=True)
        for header in glob.glob(os.path.join(src, "include", "*.h")):
            shutil.copy(header, include)
        with open(stamp, "w", encoding="utf-8") as fh:
            fh.write(_patches_digest())
    info = _from_prefix(prefix)
    info.library_dirs = [libdir]
    info.bundle = [os.path.realpath(os.path.join(libdir, "libssh2.so.1"))]
    info.patched = True
    return info


def locate(scratch: str) -> LibSSH2:
    prefix = os.environ.get("LIBSSH2_PREFIX")
    if prefix:
        info = _from_prefix(prefix)
        _log(f"using libssh2 {info.version} from LIBSSH2_PREFIX={prefix}")
        return info
    if os.environ.get("LIBSSH2_BUNDLE") != "1":
        info = _from_pkg_config()
        if info is not None:
            _log(f"using system libssh2 {info.version} (pkg-config)")
            return info
    info = build_bundled(scratch)
    _log(f"using bundled libssh2 {info.version} built in {scratch}")
    return info
