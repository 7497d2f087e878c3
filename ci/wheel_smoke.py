"""Smoke run of an installed pssh2 wheel, as a user meets it: run by ci/wheels.sh
with a fresh virtual environment's Python, from outside the source tree, with no
compiler on PATH, against a real OpenSSH server on loopback.

Checks: every ``ssh2`` module imports; exactly one libssh2 is loaded, the one the
wheel carries, and it is our patched build; a public-key login, a command and its
exit status; an SFTP upload and download; the server's host key checked against
known_hosts (a match passes, another key is refused); ``pssh run --embedded 3 --
true``. Prints one line per check; exits non-zero at the first failure.
"""
import hashlib
import importlib
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile

MODULES = ["session", "channel", "sftp", "sftp_handle", "sftp_attributes", "knownhost",
           "agent", "pkey", "listener", "fileinfo", "error_codes", "utils", "publickey",
           "handle"]


def check(label: str, condition: bool, detail: object = "") -> None:
    if not condition:
        sys.exit(f"FAILED: {label} {detail}")
    print(f"ok: {label} {detail}".rstrip(), flush=True)


def no_compiler_on_path() -> None:
    found = [c for c in ("cc", "gcc", "clang") if shutil.which(c)]
    check("no compiler on PATH", not found, found or "")


def imports_every_module() -> None:
    """Each module as a program's first import (a fresh interpreter each), then all."""
    for name in MODULES:
        first = subprocess.run([sys.executable, "-c", f"import ssh2.{name}"],
                               capture_output=True, text=True, timeout=60, cwd="/")
        check(f"ssh2.{name} imports first", first.returncode == 0, first.stderr[-400:])
    for name in MODULES:
        importlib.import_module(f"ssh2.{name}")
    check("every ssh2 module imports", True, f"({len(MODULES)})")


def one_bundled_libssh2() -> None:
    with open("/proc/self/maps", encoding="utf-8") as fh:
        paths = {line.split()[-1] for line in fh if "libssh2" in line.split()[-1]}
    site = os.path.realpath(sysconfig.get_paths()["platlib"])
    check("exactly one libssh2 is loaded", len(paths) == 1, sorted(paths))
    check("it is the wheel's own", os.path.realpath(paths.pop()).startswith(site + os.sep))
    import ssh2
    import ssh2.session
    import ssh2.utils
    check("libssh2 is patched (PATCHED_LIBSSH2)", ssh2.session.PATCHED_LIBSSH2,
          f"libssh2 {ssh2.utils.version()}, pssh2 {ssh2.__version__}")


def login_exec_sftp_hostkey(server, workdir: str) -> None:
    from ssh2 import exceptions
    from ssh2.knownhost import (LIBSSH2_KNOWNHOST_KEYENC_RAW, LIBSSH2_KNOWNHOST_TYPE_PLAIN,
                                hostkey_typemask)
    from ssh2.session import Session
    from ssh2.sftp import LIBSSH2_FXF_CREAT, LIBSSH2_FXF_READ, LIBSSH2_FXF_TRUNC, LIBSSH2_FXF_WRITE

    sock = socket.create_connection((server.address, server.port), timeout=10)
    session = Session()
    session.set_timeout(30_000)
    session.handshake(sock)

    known_hosts = os.path.join(workdir, "known_hosts")
    with open(known_hosts, "w", encoding="utf-8") as fh:
        fh.write(server.known_hosts_lines())
    key, key_type = session.hostkey()
    mask = LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | hostkey_typemask(key_type)
    known = session.knownhost_init()
    known.readfile(known_hosts)
    check("host key matches known_hosts", known.checkp(server.address, server.port, key, mask)
          is not None)
    stranger = session.knownhost_init()
    other_type = {1: "rsa", 3: "ecdsa", 6: "ed25519"}[key_type]
    other = os.path.join(workdir, "other")
    subprocess.run(["ssh-keygen", "-q", "-t", other_type, "-N", "", "-f", other], check=True)
    with open(other + ".pub", encoding="utf-8") as fh:
        kind, blob = fh.read().split()[:2]
    stranger.readline(f"[{server.address}]:{server.port} {kind} {blob}")
    try:
        stranger.checkp(server.address, server.port, key, mask)
        refused = False
    except exceptions.KnownHostCheckMisMatchError:
        refused = True
    check("another host key is refused", refused)

    session.userauth_publickey_fromfile(server.user, server.keys.private("ed25519"))
    check("public-key login", session.userauth_authenticated())
    channel = session.open_session()
    channel.execute("echo pssh2-wheel; exit 3")
    output = b""
    while True:
        size, data = channel.read()
        if size <= 0:
            break
        output += data
    channel.wait_eof()
    channel.close()
    channel.wait_closed()
    check("exec output and exit status", (output, channel.get_exit_status()) ==
          (b"pssh2-wheel\n", 3), output)

    sftp = session.sftp_init()
    payload = os.urandom(3 * 1024 * 1024 + 17)
    remote = os.path.join(workdir, "uploaded")
    with sftp.open(remote, LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC,
                   0o600) as fh:
        for start in range(0, len(payload), 256 * 1024):
            fh.write(payload[start:start + 256 * 1024])
    with open(remote, "rb") as fh:
        check("SFTP upload", fh.read() == payload, f"({len(payload)} bytes)")
    with sftp.open(remote, LIBSSH2_FXF_READ, 0) as fh:
        downloaded = b"".join(chunk for _, chunk in fh)
    check("SFTP download", hashlib.sha256(downloaded).digest() == hashlib.sha256(payload).digest())
    session.disconnect()
    sock.close()


def pssh_embedded() -> None:
    pssh = os.path.join(os.path.dirname(sys.executable), "pssh")
    done = subprocess.run([pssh, "run", "--embedded", "3", "--", "true"], capture_output=True,
                          text=True, timeout=120)
    check("pssh run --embedded 3 -- true", done.returncode == 0,
          done.stdout[-400:] + done.stderr[-400:] if done.returncode else "")
    version = subprocess.run([pssh, "--version"], capture_output=True, text=True, timeout=60)
    import ssh2
    check("pssh --version", ssh2.__version__ in version.stdout, version.stdout.strip())


def main() -> None:
    print(f"smoke run of the pssh2 wheel with Python {sys.version.split()[0]} on "
          f"{os.confstr('CS_GNU_LIBC_VERSION')}", flush=True)
    no_compiler_on_path()
    imports_every_module()
    one_bundled_libssh2()
    from pssh.sshd import ServerGroup
    with tempfile.TemporaryDirectory(prefix="pssh2-smoke-") as workdir, ServerGroup(1) as group:
        login_exec_sftp_hostkey(group.servers[0], workdir)
    pssh_embedded()
    print("smoke run passed", flush=True)


if __name__ == "__main__":
    main()
