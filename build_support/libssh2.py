"""Locate libssh2 >= 1.11 for the build, or build it from Debian's source package.

Order of preference:

1. ``LIBSSH2_PREFIX`` (env): a prefix with ``include/libssh2.h`` and ``lib/libssh2.so``.
2. pkg-config's ``libssh2`` when it is new enough (``PKG_CONFIG_PATH`` is honoured).
3. Debian's trixie source package (libssh2 1.11.1 plus Debian's security patches),
   fetched with ``apt-get source`` from the mirror this machine's apt is
   configured with (build_support/apt_sources.py) through a private apt
   configuration, so the machine's own apt state is never touched, patched with
   build_support/patches and built with the OpenSSL backend. The shared library
   is then shipped inside the ``ssh2`` package and found through an ``$ORIGIN``
   rpath.

A prefix made by (3), or by ci/wheels.sh, carries ``patches.sha256``: a
``LIBSSH2_PREFIX`` with our current patches counts as patched. Any other
libssh2 is built against as it is, and the build says what that loses
(``ssh2.session.PATCHED_LIBSSH2`` is then False).

``LIBSSH2_BUNDLE=1`` forces (3) even where the system's libssh2 would do.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from build_support import apt_sources

MIN_VERSION = (1, 11, 0)
SOURCE_SUITE = "trixie"
APT_PACKAGES = "build-essential dpkg-dev libssl-dev zlib1g-dev pkg-config"
NO_APT_HELP = (
    "install libssh2 >= 1.11 with its headers (e.g. libssh2-1-dev on Debian 13 / Ubuntu 24.04, "
    "libssh2-devel on Fedora) so that pkg-config finds it, or set LIBSSH2_PREFIX to a prefix "
    "with include/libssh2.h and lib/libssh2.so; or install a pssh2 wheel (bash ci/wheels.sh "
    "builds them), which carries our patched libssh2")
UNPATCHED_LOSES = (
    "without build_support/patches: no OpenSSH host certificates, a round trip more per "
    "public-key login, slower AES-GCM, ChaCha20-Poly1305 and SFTP downloads; "
    "ssh2.session.PATCHED_LIBSSH2 is False")
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
    libdirs = [d for d in (os.path.join(prefix, "lib"), os.path.join(prefix, "lib64"))
               if os.path.isdir(d)]
    patched = _read(os.path.join(prefix, "patches.sha256")) == _patches_digest()
    return LibSSH2(version, [os.path.join(prefix, "include")], libdirs, patched=patched)


def _from_pkg_config() -> LibSSH2 | None:
    try:
        version = subprocess.run(["pkg-config", "--modversion", "libssh2"], check=True,
                                 capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    if _parse(version) < MIN_VERSION:
        _log(f"system libssh2 {version} is older than 1.11; "
             "building 1.11.1 from Debian's source package")
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


def _apt_options(scratch: str) -> list[str]:
    """A private apt configuration for Debian's SOURCE_SUITE source packages, on the mirrors
    of this machine's own apt configuration."""
    mirror = apt_sources.debian_archive()
    security = apt_sources.debian_security()
    apt = os.path.join(scratch, "apt")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(apt, sub), exist_ok=True)
    sources = os.path.join(apt, "sources.list")
    keyring = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]"
    with open(sources, "w", encoding="utf-8") as fh:
        fh.write(f"deb-src {keyring} {mirror} {SOURCE_SUITE} main\n")
        if security:
            # Debian's security fixes reach the source suite here first.
            fh.write(f"deb-src {keyring} {security} {SOURCE_SUITE}-security main\n")
    return [
        "-o", f"Dir::Etc::sourcelist={sources}",
        "-o", "Dir::Etc::sourceparts=/nonexistent",
        "-o", f"Dir::State::Lists={apt}/lists",
        "-o", f"Dir::Cache={apt}/cache",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
    ]


def fetch_debian_source(package: str, scratch: str, log: str, update: bool = True) -> str:
    """Download and unpack Debian's ``package`` source package of SOURCE_SUITE (with
    Debian's patches applied, security fixes among them) into ``scratch``/src-``package``;
    return the source tree."""
    if not shutil.which("apt-get") or not shutil.which("dpkg-source"):
        raise LibSSH2NotFound(
            "libssh2 >= 1.11 was not found and cannot be built here: apt-get and dpkg-source are "
            f"needed to fetch Debian's source package (apt-get install {APT_PACKAGES}); "
            f"otherwise {NO_APT_HELP}")
    try:
        opts = _apt_options(scratch)
    except apt_sources.NoDebianMirror as exc:
        raise LibSSH2NotFound(f"{exc}; {NO_APT_HELP}") from None
    if update:
        _log(f"fetching the {SOURCE_SUITE} source index from this machine's Debian mirror")
        _run(["apt-get", *opts, "update"], scratch, log)
    download = os.path.join(scratch, "download", package)
    shutil.rmtree(download, ignore_errors=True)
    os.makedirs(download)
    versions = _source_versions(opts, package)
    for number, version in enumerate(versions):
        try:
            _run(["apt-get", *opts, "--download-only", "source", f"{package}={version}"],
                 download, log)
            break
        except LibSSH2NotFound:
            # A mirror can list a version its pool does not have yet: take the next one.
            if number == len(versions) - 1:
                raise
            _log(f"{package} {version} could not be downloaded; trying an older version")
    dsc = sorted(glob.glob(os.path.join(download, f"{package}_*.dsc")))
    if not dsc:
        raise LibSSH2NotFound(f"apt-get source {package} produced no .dsc in {download} "
                              f"(log: {log})")
    src = os.path.join(scratch, f"src-{package}")
    shutil.rmtree(src, ignore_errors=True)
    # dpkg-source applies Debian's patches, which include security fixes.
    _run(["dpkg-source", "--no-check", "-x", dsc[-1], src], download, log)
    return src


def _source_versions(opts: list[str], package: str) -> list[str]:
    """The versions of ``package``'s source the private apt configuration lists, newest first."""
    out = subprocess.run(["apt-cache", *opts, "showsrc", package], capture_output=True,
                         text=True).stdout
    versions = {line.split(":", 1)[1].strip() for line in out.splitlines()
                if line.startswith("Version:")}
    if not versions:
        raise LibSSH2NotFound(f"Debian {SOURCE_SUITE} has no source package {package} on this "
                              f"machine's mirror; {NO_APT_HELP}")

    def newer(a: str, b: str) -> int:
        gt = subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0
        return -1 if gt else 1

    return sorted(versions, key=functools.cmp_to_key(newer))


def _fetch_source(scratch: str, log: str) -> str:
    """Debian's libssh2 source with our patches applied; return the source tree."""
    src = fetch_debian_source("libssh2", scratch, log)
    apply_patches(src, log)
    return src


def apply_patches(src: str, log: str) -> None:
    """Apply build_support/patches to the libssh2 source tree ``src``."""
    for patch in sorted(glob.glob(os.path.join(PATCHES, "*.patch"))):
        _log(f"applying {os.path.basename(patch)}")
        _run(["patch", "-p1", "--forward", "-i", patch], src, log)


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
    """The libssh2 to build against (see the module's docstring for the order)."""
    prefix = os.environ.get("LIBSSH2_PREFIX")
    if prefix:
        info = _from_prefix(prefix)
        _log(f"using libssh2 {info.version} from LIBSSH2_PREFIX={prefix}")
    elif os.environ.get("LIBSSH2_BUNDLE") != "1" and (info := _from_pkg_config()) is not None:
        _log(f"using system libssh2 {info.version} (pkg-config)")
    else:
        info = build_bundled(scratch)
        _log(f"using bundled libssh2 {info.version} built in {scratch}")
    if not info.patched:
        _log(f"WARNING: libssh2 {info.version} is unpatched, {UNPATCHED_LOSES} "
             f"(LIBSSH2_BUNDLE=1 builds the patched one)")
    return info


def fetch_wheel_sources(scratch: str) -> None:
    """For ci/wheels.sh: Debian's libssh2 (with our patches) and OpenSSL sources in
    ``scratch``/src-libssh2 and ``scratch``/src-openssl, and ``patches.sha256``."""
    os.makedirs(scratch, exist_ok=True)
    log = os.path.join(scratch, "fetch.log")
    src = fetch_debian_source("libssh2", scratch, log)
    apply_patches(src, log)
    fetch_debian_source("openssl", scratch, log, update=False)
    with open(os.path.join(scratch, "patches.sha256"), "w", encoding="utf-8") as fh:
        fh.write(_patches_digest())


def main(argv: list[str]) -> int:
    """``fetch-wheel-sources DIR`` or ``fetch-source PACKAGE DIR`` (for ci/wheels.sh)."""
    try:
        if len(argv) == 2 and argv[0] == "fetch-wheel-sources":
            fetch_wheel_sources(argv[1])
        elif len(argv) == 3 and argv[0] == "fetch-source":
            os.makedirs(argv[2], exist_ok=True)
            print(fetch_debian_source(argv[1], argv[2], os.path.join(argv[2], "fetch.log")))
        else:
            print("usage: python -m build_support.libssh2 fetch-wheel-sources DIR\n"
                  "       python -m build_support.libssh2 fetch-source PACKAGE DIR",
                  file=sys.stderr)
            return 2
    except LibSSH2NotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
