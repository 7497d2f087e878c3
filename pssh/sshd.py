"""Real OpenSSH servers on loopback, for tests, benchmarks and demos.

Each :class:`OpenSSHServer` is one ``sshd`` process (Debian's openssh-server)
with its own generated host keys and ``sshd_config`` in a temporary folder,
listening on a free port of a loopback address. :class:`ServerGroup` starts N
of them on 127.0.0.1 .. 127.0.0.N, so that a client sees N distinct hosts.

The servers are independent of the machine's SSH setup: the login user is the
current user, authorised by generated client keys; the remote ``HOME`` is a
temporary folder, so the user's shell start-up files (slow on some machines)
are not run. Password and keyboard-interactive logins are offered when a
password is given: sshd then runs in a private mount namespace whose
``/etc/pam.d`` checks that password (needs root and ``unshare``).

Example::

    with ServerGroup(3) as group:
        for server in group.servers:
            print(server.address, server.port)
        group.keys.private("ed25519")   # a key the servers accept
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import (IO, Callable, Iterable, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

log = logging.getLogger("pssh.sshd")

SSHD = shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", ""))
KEY_TYPES = ("ed25519", "ecdsa", "rsa")
PASSPHRASE = "correct horse battery staple"


class SSHDError(RuntimeError):
    """The test server could not be set up or started."""


def _keygen(path: Path, key_type: str, passphrase: str = "", comment: str = "") -> Path:
    args = ["ssh-keygen", "-q", "-t", key_type, "-N", passphrase, "-f", str(path),
            "-C", comment or path.name]
    if key_type == "rsa":
        # 2048 bits, not ssh-keygen's 3072: these are loopback hosts for tests, demos and
        # benchmarks, made by the hundred, and a 3072-bit key costs three times the CPU
        # (a second each on a busy two-core machine). OpenSSH takes 2048 as it does 3072.
        args += ["-b", "2048"]
    try:
        subprocess.run(args, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise SSHDError("ssh-keygen not found: apt-get install openssh-client") from None
    except subprocess.CalledProcessError as exc:
        raise SSHDError(f"ssh-keygen -t {key_type} failed: {exc.stderr.strip()}") from None
    return path


@dataclass
class ClientKeys:
    """Client key pairs accepted by the servers: ed25519, ecdsa, rsa, and an
    ed25519 key protected by :data:`PASSPHRASE` (named ``"passphrase"``)."""

    directory: Path

    @classmethod
    def generate(cls, directory: Path) -> "ClientKeys":
        directory.mkdir(parents=True, exist_ok=True)
        for key_type in KEY_TYPES:
            _keygen(directory / f"id_{key_type}", key_type)
        _keygen(directory / "id_passphrase", "ed25519", PASSPHRASE)
        return cls(directory)

    def private(self, name: str = "ed25519") -> str:
        return str(self.directory / f"id_{name}")

    def public(self, name: str = "ed25519") -> str:
        return str(self.directory / f"id_{name}.pub")

    def authorized_keys(self) -> str:
        return "".join((self.directory / f"id_{n}.pub").read_text()
                       for n in (*KEY_TYPES, "passphrase"))


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


_PAM_SERVICE = """\
auth     required pam_exec.so expose_authtok quiet {checker}
# pam_exec has no credentials to set; this makes pam_setcred() succeed.
auth     required pam_permit.so
account  required pam_permit.so
session  required pam_permit.so
password required pam_deny.so
"""

_PASSWORD_CHECKER = """\
#!/bin/sh
# pam_exec hands the password on stdin, NUL-terminated.
given=$(head -c 4096 | tr -d '\\000')
[ "$given" = "$(cat '{password_file}')" ]
"""


class OpenSSHServer:
    """One real ``sshd`` on ``address:port``.

    ``keys``: the :class:`ClientKeys` to authorise (generated if omitted).
    ``password``: also accept this password for the current user (password
    and keyboard-interactive methods). ``config``: extra sshd_config lines,
    written first so that they override the defaults (no ``Match`` blocks); a
    ``Subsystem sftp ...`` line replaces the default ``internal-sftp`` (sshd
    refuses a subsystem defined twice).
    """

    def __init__(self, address: str = "127.0.0.1", port: Optional[int] = None, *,
                 workdir: Optional[os.PathLike] = None, keys: Optional[ClientKeys] = None,
                 host_keys: Optional[Mapping[str, Path]] = None,
                 password: Optional[str] = None, config: Sequence[str] = (),
                 start_timeout: float = 10.0) -> None:
        if SSHD is None:
            raise SSHDError("sshd not found: apt-get install openssh-server")
        self.address = address
        self.port = port or free_port(address)
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pssh-sshd-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.keys = keys or ClientKeys.generate(self.workdir / "client")
        self.password = password
        self.extra_config = list(config)
        self.start_timeout = start_timeout
        self.user = _current_user()
        self.home = self.workdir / "home"
        self.home.mkdir(exist_ok=True)
        self.host_keys = dict(host_keys) if host_keys else self._make_host_keys()
        self.process: Optional[subprocess.Popen] = None

    # -- set-up -------------------------------------------------------------

    def _make_host_keys(self) -> dict:
        folder = self.workdir / "hostkeys"
        folder.mkdir(exist_ok=True)
        return {t: _keygen(folder / f"ssh_host_{t}_key", t) for t in KEY_TYPES}

    def _write_config(self) -> Path:
        authorized = self.workdir / "authorized_keys"
        authorized.write_text(self.keys.authorized_keys())
        authorized.chmod(0o600)
        lines = [
            # sshd keeps the first value of a keyword: extra lines come first
            # so that they override the defaults below.
            *self.extra_config,
            f"ListenAddress {self.address}:{self.port}",
            *(f"HostKey {path}" for path in self.host_keys.values()),
            f"PidFile {self.workdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "StrictModes no",
            "PubkeyAuthentication yes",
            f"UsePAM {'yes' if self.password else 'no'}",
            f"PasswordAuthentication {'yes' if self.password else 'no'}",
            f"KbdInteractiveAuthentication {'yes' if self.password else 'no'}",
            "PermitRootLogin yes",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            "X11Forwarding no",
            "AllowTcpForwarding yes",
            "AllowAgentForwarding yes",
            "AllowStreamLocalForwarding yes",
            "PermitTTY yes",
            "PermitUserEnvironment no",
            "AcceptEnv LANG LC_* PSSH_* TEST_*",
            # The remote HOME is ours: shell start-up files in the real home
            # (slow init on some machines) are never read.
            f"SetEnv HOME={self.home}",
            "MaxStartups 1000",
            "MaxSessions 1000",
            "MaxAuthTries 20",
            "LoginGraceTime 30",
            "ClientAliveInterval 0",
            "LogLevel VERBOSE",
        ]
        if not any(line.split()[:2] == ["Subsystem", "sftp"] for line in self.extra_config):
            lines.append("Subsystem sftp internal-sftp")
        path = self.workdir / "sshd_config"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _pam_dir(self) -> Path:
        pam = self.workdir / "pam.d"
        pam.mkdir(exist_ok=True)
        password_file = self.workdir / "password"
        password_file.write_text(self.password or "")
        password_file.chmod(0o600)
        checker = self.workdir / "check-password"
        checker.write_text(_PASSWORD_CHECKER.format(password_file=password_file))
        checker.chmod(0o700)
        for service in ("sshd", "other"):
            (pam / service).write_text(_PAM_SERVICE.format(checker=checker))
        return pam

    def _command(self, config: Path) -> list:
        sshd = [SSHD, "-D", "-e", "-f", str(config), "-E", str(self.log_file)]
        if not self.password:
            return sshd
        if os.geteuid() != 0 or not shutil.which("unshare"):
            raise SSHDError("password logins need root and unshare (util-linux): sshd checks "
                            "the password through PAM in a private mount namespace")
        pam = self._pam_dir()
        script = f'mount --bind "{pam}" /etc/pam.d && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *sshd]

    @property
    def log_file(self) -> Path:
        return self.workdir / "sshd.log"

    # -- life cycle ------------------------------------------------------------

    def start(self) -> "OpenSSHServer":
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> None:
        """Start sshd without waiting for it to listen (:meth:`wait_ready`): a group
        launches all its servers first, then waits for each."""
        if self.process is not None:
            return
        if os.geteuid() == 0:
            # sshd's privilege separation directory (made by the service
            # scripts, which never ran on a fresh machine).
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        config = self._write_config()
        assert SSHD is not None  # __init__ raised without it
        self.process = subprocess.Popen(
            self._command(config), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, preexec_fn=_die_with_parent)

    def wait_ready(self) -> None:
        """Wait until the launched sshd listens; raise :class:`SSHDError` with its own
        words if it exits first (a configuration it rejects, a port taken) or never does.

        Ready is the kernel's word: a listening socket on the address and port, held by
        this sshd (whatever its LogLevel). A connection from then on waits in the socket's
        backlog; connecting to find out would cost sshd a session process per start.
        """
        process = self.process
        assert process is not None, "launch() first"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if _listening(process.pid, self.address, self.port):
                log.debug("sshd ready on %s:%d (pid %d)", self.address, self.port, process.pid)
                return
            if process.poll() is not None:
                err = _stderr(process).read().decode(errors="replace")
                raise SSHDError(f"sshd on {self.address}:{self.port} exited with "
                                f"{process.returncode}: {err.strip() or self.read_log()}")
            time.sleep(0.01)
        self.stop()
        raise SSHDError(f"sshd on {self.address}:{self.port} not ready after "
                        f"{self.start_timeout}s: {self.read_log()}")

    def read_log(self, limit: Optional[int] = 2000) -> str:
        """The server's log: its last ``limit`` characters, or all of it with ``None``."""
        try:
            text = self.log_file.read_text(errors="replace")
            return text if limit is None else text[-limit:]
        except OSError:
            return ""

    def wait_for_log(self, condition: Union[Callable[[str], bool], str],
                     timeout: float = 10.0) -> str:
        """Wait until the log satisfies ``condition`` (a predicate, or text it must contain).

        sshd's monitor writes a line such as "Accepted publickey" after it has told the
        client, so a client can see success before the line exists. Returns the whole
        log; raises ``TimeoutError`` with the log's tail when ``timeout`` passes first.
        """
        check = condition if callable(condition) else (lambda text: condition in text)
        deadline = time.monotonic() + timeout
        while True:
            text = self.read_log(None)
            if check(text):
                return text
            if time.monotonic() >= deadline:
                raise TimeoutError(f"sshd on {self.address}:{self.port}: the log did not show "
                                   f"{condition!r} within {timeout}s: {text[-2000:]}")
            time.sleep(0.02)

    def stop(self) -> None:
        self.terminate()
        self.reap()

    def terminate(self) -> None:
        """Ask sshd to end (SIGTERM), without waiting: :meth:`reap` waits."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def reap(self) -> None:
        """Wait for the ended sshd (SIGKILL after 5 s) and let go of it."""
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            _stderr(self.process).close()
            self.process = None

    def kill(self) -> None:
        """Simulate a host crash: SIGKILL sshd and every session process it started."""
        if self.process is None:
            return
        for pid in [*_descendants(self.process.pid), self.process.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        _stderr(self.process).close()
        self.process = None

    def close(self) -> None:
        """Stop the server and remove its folder (if we made it)."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "OpenSSHServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- for clients -------------------------------------------------------------

    def public_host_key(self, key_type: str = "ed25519") -> str:
        """The host public key line (``type base64 comment``)."""
        return Path(str(self.host_keys[key_type]) + ".pub").read_text().strip()

    def known_hosts_lines(self) -> str:
        """known_hosts lines for every host key of this server."""
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return "".join(f"{name} {' '.join(self.public_host_key(t).split()[:2])}\n"
                       for t in self.host_keys)


class ServerGroup:
    """N servers on 127.0.0.1 .. 127.0.0.N (or on ``addresses``) sharing client keys and
    host keys.

    ``first_address``: the last number of the first address (127.0.0.``first_address``).
    ``addresses``: the servers' addresses instead, one server each (a test suite handing
    out addresses from all of 127.0.0.0/8, say); ``count`` is then their number.
    """

    def __init__(self, count: Optional[int] = None, *, first_address: int = 1,
                 password: Optional[str] = None, config: Sequence[str] = (),
                 workdir: Optional[os.PathLike] = None, port: Optional[int] = None,
                 addresses: Optional[Sequence[str]] = None) -> None:
        if addresses is None:
            count = 1 if count is None else count
            if not 1 <= count <= 250 or first_address + count > 255:
                raise ValueError("count must be between 1 and 250 (addresses up to 127.0.0.254)")
            addresses = [f"127.0.0.{first_address + i}" for i in range(count)]
        elif not addresses or count not in (None, len(addresses)):
            raise ValueError("addresses: one or more, as many as count")
        addresses = list(addresses)
        # One port for every address, so that clients can take (hosts, port).
        self.port = port or common_free_port(addresses)
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pssh-sshd-group-"))
        self.keys = ClientKeys.generate(self.workdir / "client")
        self._host_keys_dir = self.workdir / "hostkeys"
        self._host_keys_dir.mkdir(exist_ok=True)
        host_keys = {t: _keygen(self._host_keys_dir / f"ssh_host_{t}_key", t) for t in KEY_TYPES}
        self.servers = [
            OpenSSHServer(address, self.port, workdir=self.workdir / f"host{i}",
                          keys=self.keys, host_keys=host_keys, password=password, config=config)
            for i, address in enumerate(addresses)]

    @property
    def hosts(self) -> list:
        return [s.address for s in self.servers]

    def start(self) -> "ServerGroup":
        # All launched, then each waited for: the servers start side by side.
        try:
            for server in self.servers:
                server.launch()
            for server in self.servers:
                server.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def known_hosts_file(self) -> str:
        """A known_hosts file listing every server, written in the group's folder."""
        path = self.workdir / "known_hosts"
        path.write_text("".join(s.known_hosts_lines() for s in self.servers))
        return str(path)

    def close(self) -> None:
        for server in self.servers:
            server.terminate()
        for server in self.servers:
            server.reap()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "ServerGroup":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __iter__(self) -> Iterable[OpenSSHServer]:
        return iter(self.servers)


def _stderr(process: subprocess.Popen) -> IO[bytes]:
    """sshd's stderr, a pipe (it is started with ``stderr=PIPE``)."""
    assert process.stderr is not None
    return process.stderr


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the creating process dies, so a
    crashed test run never leaves servers behind (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except Exception:  # never fail the exec over this
        pass


def _descendants(root: int) -> list:
    """Every process below ``root`` (from /proc), deepest first."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found[::-1]


class TcpSocket(NamedTuple):
    """One TCP socket of the machine, as the kernel's table lists it."""

    local: Tuple[str, int]
    remote: Tuple[str, int]
    #: The kernel's state number: :data:`ESTABLISHED`, :data:`LISTEN`, ...
    state: int
    #: Bytes written to it and not yet taken by the other end.
    send_queue: int
    #: What its descriptors point at in ``/proc/PID/fd``: ``socket:[inode]``.
    target: str


#: TCP states, as the kernel numbers them in its table.
ESTABLISHED, LISTEN = 0x01, 0x0A


def _end(text: str, family: int) -> Tuple[str, int]:
    """``ADDRESS:PORT`` of the kernel's table: the address as 32-bit words of hex digits,
    each in the machine's (little-endian) byte order; the port in hex."""
    address, port = text.split(":")
    packed = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, len(address), 8))
    return socket.inet_ntop(family, packed), int(port, 16)


def tcp_sockets(ipv6: bool = False) -> List[TcpSocket]:
    """The machine's TCP sockets (IPv4, or IPv6), from ``/proc/net/tcp`` (``tcp6``);
    OSError where there is no such table."""
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    with open("/proc/net/tcp6" if ipv6 else "/proc/net/tcp") as fh:
        rows = [line.split() for line in fh.readlines()[1:]]
    return [TcpSocket(_end(row[1], family), _end(row[2], family), int(row[3], 16),
                      int(row[4].split(":")[0], 16), f"socket:[{row[9]}]") for row in rows]


def _listening(pid: int, address: str, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``address``:``port``
    (from the kernel's TCP table and the process's descriptors)."""
    ip = socket.gethostbyname(address) if ":" not in address else address
    ipv6 = ":" in ip
    if ipv6:  # as the table spells it
        ip = socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, ip))
    try:
        targets = {row.target for row in tcp_sockets(ipv6)
                   if row.local == (ip, port) and row.state == LISTEN}
        if not targets:
            return False
        fds = f"/proc/{pid}/fd"
        return any(os.readlink(f"{fds}/{fd}") in targets for fd in os.listdir(fds))
    except OSError:  # the process ended meanwhile: its exit says why
        return False


def common_free_port(addresses: Sequence[str], attempts: int = 50) -> int:
    """A TCP port free on every one of ``addresses``."""
    for _ in range(attempts):
        port = free_port(addresses[0])
        try:
            for address in addresses[1:]:
                with socket.socket() as s:
                    s.bind((address, port))
            return port
        except OSError:
            continue
    raise SSHDError(f"no port free on all of {addresses[0]}..{addresses[-1]}")


def _current_user() -> str:
    import pwd
    return pwd.getpwuid(os.geteuid()).pw_name
