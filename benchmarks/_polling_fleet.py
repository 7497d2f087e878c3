"""The polling benchmarks' hosts: many real sshd hosts on loopback, each slow on demand.

Every host has an address of its own (127.0.1.1, 127.0.1.2, ... then 127.0.2.1 ...: all
of 127.0.0.0/8 is loopback on Linux, and 127.0.0.x is left to the tests), all on one
port, so a host is just its address (the poller's per-(host, check) state needs distinct
names). OpenSSH's sshd listens on at most 16 sockets (``MAX_LISTEN_SOCKS``), so one sshd
process serves 16 hosts: 1,000 hosts are 63 sshd processes, not 1,000.

How slow a host is lives in a file per host that the harness writes: the polled command
(:meth:`LoopbackFleet.check_command`) finds its own host from ``$SSH_CONNECTION`` (the
address the client connected to) and sleeps for the seconds in that host's file, if any.
Only shell built-ins run for a fast host; a slow one adds a ``sleep``.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

from pssh.sshd import ClientKeys, OpenSSHServer, common_free_port

PER_SERVER = 16  # OpenSSH's MAX_LISTEN_SOCKS
ADDRESSES_PER_BLOCK = 250  # 127.0.B.1 .. 127.0.B.250


def loopback_address(index: int) -> str:
    """The address of host ``index`` (0-based): 127.0.1.1, ..., 127.0.1.250, 127.0.2.1, ..."""
    block, offset = divmod(index, ADDRESSES_PER_BLOCK)
    if block + 1 > 255:
        raise ValueError(f"host {index}: more hosts than loopback addresses in 127.0.1-255.x")
    return f"127.0.{block + 1}.{offset + 1}"


class LoopbackFleet:
    """``hosts`` real sshd hosts on distinct loopback addresses and one port.

    Use as a context manager; :attr:`hosts` are the addresses, :attr:`port` the port,
    :meth:`connect_settings` what a client needs (user, key, port, a known_hosts file
    listing every host: host keys are verified).
    """

    def __init__(self, hosts: int, workdir: os.PathLike = None) -> None:
        if hosts < 1:
            raise ValueError("a fleet needs at least one host")
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pssh-polling-"))
        self.delays_dir = self.workdir / "delays"
        self.delays_dir.mkdir(parents=True, exist_ok=True)
        self.hosts: List[str] = [loopback_address(i) for i in range(hosts)]
        self.port = common_free_port(self.hosts)
        self.keys = ClientKeys.generate(self.workdir / "client")
        # One set of host keys for all: generating 3 keys per sshd would cost minutes.
        host_keys = OpenSSHServer(workdir=self.workdir / "hostkeys").host_keys
        self.servers: List[OpenSSHServer] = []
        for number in range(math.ceil(hosts / PER_SERVER)):
            addresses = self.hosts[number * PER_SERVER:(number + 1) * PER_SERVER]
            self.servers.append(OpenSSHServer(
                addresses[0], self.port, workdir=self.workdir / f"sshd{number}", keys=self.keys,
                host_keys=host_keys,
                config=[f"ListenAddress {a}:{self.port}" for a in addresses[1:]]
                + ["LogLevel ERROR"]))
        self.known_hosts = self.workdir / "known_hosts"

    # -- life cycle ----------------------------------------------------------------

    def __enter__(self) -> "LoopbackFleet":
        for server in self.servers:
            try:
                server.start()
            except BaseException:  # the ones started already are stopped, the folder removed
                self.close()
                raise
        keys = [" ".join(self.servers[0].public_host_key(t).split()[:2])
                for t in self.servers[0].host_keys]
        self.known_hosts.write_text("".join(f"[{host}]:{self.port} {key}\n"
                                            for host in self.hosts for key in keys))
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- for clients --------------------------------------------------------------

    @property
    def user(self) -> str:
        return self.servers[0].user

    def connect_settings(self) -> Dict[str, object]:
        """Keyword arguments for ParallelSSHClient / Poller: this fleet's login, host keys
        checked against its known_hosts file, nothing read from the user's ssh setup."""
        return dict(user=self.user, port=self.port, pkey=self.keys.private(),
                    allow_agent=False, identity_auth=False, known_hosts=str(self.known_hosts),
                    ssh_config=False)

    def check_command(self, output: str = "echo 1") -> str:
        """The polled command: sleep for the seconds in this host's delay file (if there is
        one), then ``output``. ``$3`` of ``$SSH_CONNECTION`` is the server's address."""
        folder = self.delays_dir
        return (f"set -- $SSH_CONNECTION; f={folder}/$3; "
                f"if [ -f $f ]; then read d < $f; sleep $d; fi; {output}")

    # -- the harness's controls ------------------------------------------------------

    def set_delay(self, hosts: Iterable[str], seconds: float) -> None:
        """Make ``hosts`` answer after ``seconds`` (0: at once) from their next poll on."""
        for host in hosts:
            path = self.delays_dir / host
            if seconds <= 0:
                path.unlink(missing_ok=True)
                continue
            # Written aside and renamed: a poll never reads half a number.
            temporary = self.delays_dir / f".{host}.tmp"
            temporary.write_text(f"{seconds:g}\n")
            temporary.replace(path)

    def sshd_cpu(self) -> float:
        """CPU seconds of every sshd process of the fleet and everything below them (live
        connection processes and their shells included; reaped ones through cutime)."""
        return sum(tree_cpu(server.process.pid) for server in self.servers if server.process)

    def sshd_processes(self) -> int:
        """How many processes the fleet's sshd listeners have below them now."""
        return sum(len(_descendants(server.process.pid)) for server in self.servers
                   if server.process)


def _descendants(root: int) -> List[int]:
    """Every live process below ``root``, from the kernel's list of each one's children
    (``/proc/PID/task/TID/children``): no walk over all of /proc."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended meanwhile
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    children = [int(c) for c in fh.read().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and the children it has reaped (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live process below it. A live process's own
    cutime holds only its reaped children, so nothing is counted twice."""
    return sum(process_cpu(pid) for pid in [root, *_descendants(root)])


def rss_mib(pid: int = None) -> float:
    """Resident set size (MiB) of process ``pid`` (default: this one)."""
    with open(f"/proc/{pid or 'self'}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid or os.getpid()}")


def split_hosts(hosts: Sequence[str], *fractions: float) -> List[List[str]]:
    """Consecutive groups of ``hosts`` of the given fractions (rounded), and the rest
    last. Hosts are taken spread over the list (every k-th) so that no group sits on
    one sshd process."""
    remaining = list(hosts)
    groups = []
    for fraction in fractions:
        count = round(len(hosts) * fraction)
        step = len(remaining) / count if count else 0
        chosen = [remaining[int(i * step)] for i in range(count)]
        chosen_set = set(chosen)
        remaining = [h for h in remaining if h not in chosen_set]
        groups.append(chosen)
    groups.append(remaining)
    return groups
