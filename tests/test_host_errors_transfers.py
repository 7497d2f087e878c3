"""Failed transfers name their host and leave no partial file behind where they can help it
(issue 20, point 5).

Two real hosts; every case runs through the gevent parallel client (in one process and in
worker processes: its greenlets' exceptions) and through asyncio (``SFTPClient.get/put``,
``scp()``). The servers run on this machine, so the tests see the "remote" files and kill
the server's processes mid-transfer: the whole connection (every sshd process serving
it), or only the program at the far end of the transfer's channel (sftp-server, scp), the
connection living on. Local failures come from a tiny disk only this test sees.
"""
import asyncio
import errno
import os
import re
import signal
import subprocess
import threading
import time

import gevent
from gevent.util import format_run_info
import pytest

from pssh import aio
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient
from loopback import addresses
from pssh.sshd import ServerGroup, _descendants
from conftest import trusting
from tiny_disk import run_on_tiny_disk, tiny_disk

BIG = 64 << 20
#: Where Debian-like systems (and this machine) keep OpenSSH's SFTP server program.
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                "/usr/libexec/sftp-server")
FRONT_ENDS = ["ParallelSSHClient", "ParallelSSHClient(processes=2)", "asyncio"]
OPERATIONS = ["sftp upload", "sftp download", "scp upload", "scp download"]
PART = re.compile(r"^\.(?P<name>.+)\.[0-9a-z_]+\.part$")  # remote: 8 hex; local: mkstemp


def sftp_server() -> str:
    found = [path for path in SFTP_SERVERS if os.access(path, os.X_OK)]
    assert found, f"no sftp-server program among {SFTP_SERVERS}"
    return found[0]


@pytest.fixture(scope="module")
def group():
    # An SFTP server process per session (not sshd's built-in one), so that it can die
    # while its connection lives.
    with ServerGroup(addresses=addresses(2), config=[f"Subsystem sftp {sftp_server()}"]) as g:
        yield g


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("source") / "big.bin"
    with open(path, "wb") as fh:
        for _ in range(BIG >> 20):
            fh.write(os.urandom(1 << 20))
    return str(path)


@pytest.fixture
def dirs(tmp_path):
    """(local folder, "remote" folder): the servers see this machine's files."""
    local, remote = tmp_path / "local", tmp_path / "remote"
    local.mkdir()
    remote.mkdir()
    return str(local), str(remote)


def paths(operation: str, source: str, local: str, remote: str):
    """(from, to) of ``operation``, with ``%(host)s`` where each host's file differs."""
    if operation.endswith("upload"):
        return source, os.path.join(remote, "up_%(host)s")
    return source, os.path.join(local, "down_%(host)s")


def transfer(front_end: str, operation: str, group, src: str, dst: str, kh: str):
    """Run ``operation`` from ``src`` to ``dst`` on every host: {host: its exception}."""
    if front_end == "asyncio":
        return asyncio.run(_aio_transfer(operation, group, src, dst, kh))
    client = gevent_client(front_end, group, kh)
    try:
        return gevent_transfer(client, operation, group, src, dst)
    finally:
        client.close()


def gevent_client(front_end: str, group, kh: str) -> ParallelSSHClient:
    return ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                             known_hosts=kh, allow_agent=False, identity_auth=False,
                             timeout=20, processes=2 if "processes" in front_end else None)


def gevent_transfer(client, operation: str, group, src: str, dst: str):
    method = {"sftp upload": client.copy_file, "sftp download": client.copy_remote_file,
              "scp upload": client.scp_send, "scp download": client.scp_recv}[operation]
    greenlets = method(src, dst, copy_args=[{"host": h} for h in group.hosts])
    gevent.joinall(greenlets, timeout=120)
    if not all(g.ready() for g in greenlets):
        # A greenlet still running after that is a hang: where every greenlet and thread
        # of this process waits, in full, for the report.
        stuck = [host for host, g in zip(group.hosts, greenlets) if not g.ready()]
        pytest.fail(f"still running after 120 s: {stuck}\n"
                    + "\n".join(format_run_info(thread_stacks=True, greenlet_stacks=True)))
    return {host: g.exception for host, g in zip(group.hosts, greenlets)}


async def _aio_transfer(operation, group, src, dst, kh):
    async def one(host):
        mine = {"host": host}
        async with aio.connect(host, group.port, client_keys=[group.keys.private()],
                               known_hosts=kh, agent_path=None, timeout=20) as conn:
            if operation.startswith("sftp"):
                async with conn.start_sftp_client() as sftp:
                    if operation.endswith("upload"):
                        await sftp.put(src % mine, dst % mine)
                    else:
                        await sftp.get(src % mine, dst % mine)
            elif operation.endswith("upload"):
                await aio.scp(src % mine, (conn, dst % mine))
            else:
                await aio.scp((conn, src % mine), dst % mine)

    results = await asyncio.wait_for(asyncio.gather(
        *(one(h) for h in group.hosts), return_exceptions=True), 120)
    return dict(zip(group.hosts, results))


def assert_names(err, host, port, *causes):
    text = str(err)
    assert f"{host}:{port}" in text, text
    for cause in causes:
        assert cause in text, text
    assert (err.host, err.port) == (host, port)


def files_of(folder: str, host: str):
    """The files of ``folder`` that are ``host``'s: its target, and its partial files."""
    return sorted(name for name in os.listdir(folder) if name.endswith(host)
                  or (PART.match(name) and PART.match(name)["name"].endswith(host)))


class KillWhen(threading.Thread):
    """Kills ``targets()`` once ``ready()`` holds (a thread: it works whatever loop runs the
    transfer, and however the transfer holds its own thread)."""

    def __init__(self, ready, targets) -> None:
        super().__init__(daemon=True)
        self.ready, self.targets, self.killed = ready, targets, []
        self.stop = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop.is_set():
            if self.ready():
                # All stopped first, then killed: none of them sees another die and tells
                # the client (a session process would close the channel of its dead child).
                targets = self.targets()
                for sig in (signal.SIGSTOP, signal.SIGKILL):
                    for pid in targets:
                        try:
                            os.kill(pid, sig)
                        except ProcessLookupError:
                            pass
                self.killed = targets
                if self.killed:
                    return
            time.sleep(0.002)

    def __enter__(self) -> "KillWhen":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.join()


def grown(folder: str, host: str, size: int):
    """True once a file of ``host`` in ``folder`` holds more than ``size`` bytes."""
    def check() -> bool:
        for name in files_of(folder, host):
            try:
                if os.path.getsize(os.path.join(folder, name)) > size:
                    return True
            except OSError:
                pass
        return False
    return check


def server_processes(server, word: str = ""):
    """The processes serving ``server``'s connections (below its listening sshd), or those
    among them whose command line holds ``word``."""
    def pids():
        found = []
        for pid in _descendants(server.process.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if word.encode() in fh.read():
                        found.append(pid)
            except OSError:
                pass
        return found
    return pids


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_connection_killed_mid_transfer_names_its_host(group, big_file, dirs, tmp_path,
                                                       front_end, operation):
    local, remote = dirs
    victim, other = group.servers
    src, dst = paths(operation, big_file, local, remote)
    watched = remote if operation.endswith("upload") else local
    with KillWhen(grown(watched, victim.address, 4 << 20), server_processes(victim)) as kill:
        errors = transfer(front_end, operation, group, src, dst, trusting(tmp_path / "kh", group))
    assert kill.killed
    assert errors[other.address] is None
    assert os.path.getsize(dst % {"host": other.address}) == BIG
    err = errors[victim.address]
    assert isinstance(err, (exc.SFTPError, exc.SCPError)), repr(err)
    assert_names(err, victim.address, group.port, "the connection was lost")
    if operation.endswith("download"):
        assert files_of(local, victim.address) == []
    elif operation == "sftp upload":
        # The connection is gone, so nothing could remove it: the partial file, never the
        # target's name (docs/guides/transfers.md says so).
        left = files_of(remote, victim.address)
        assert len(left) == 1 and PART.match(left[0]), left


# Not "sftp download": libssh2 1.11.1 spins for ever in sftp_packet_read() when the SFTP
# channel ends in the middle of a packet (a data packet cut short: the usual case for a
# download), before any wait could notice. Fixed upstream (libssh2 pull request 2581);
# the case belongs here once our libssh2 carries that fix.
@pytest.mark.parametrize("operation", ["sftp upload", "scp upload", "scp download"])
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_transfer_program_killed_connection_lives_nothing_left(group, big_file, dirs,
                                                               tmp_path, front_end,
                                                               operation):
    local, remote = dirs
    victim, other = group.servers
    src, dst = paths(operation, big_file, local, remote)
    watched = remote if operation.endswith("upload") else local
    program = "sftp-server" if operation.startswith("sftp") else "scp"
    with KillWhen(grown(watched, victim.address, 4 << 20),
                  server_processes(victim, program)) as kill:
        errors = transfer(front_end, operation, group, src, dst, trusting(tmp_path / "kh", group))
    assert kill.killed
    assert errors[other.address] is None
    err = errors[victim.address]
    assert isinstance(err, (exc.SFTPError, exc.SCPError)), repr(err)
    cause = "ended early" if operation == "scp download" else "ended on the server"
    assert_names(err, victim.address, group.port, cause.split()[0])
    assert re.search(cause.replace(" ", ".*"), str(err)), str(err)
    # The connection lived: the partial file (an SCP upload's, the real name) is gone.
    assert files_of(local, victim.address) == []
    assert files_of(remote, victim.address) == []


@pytest.mark.parametrize("operation", ["sftp download", "scp download"])
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_local_disk_full_is_an_oserror_naming_the_host(group, tmp_path, front_end,
                                                       operation):
    source = tmp_path / "one_mib"
    source.write_bytes(os.urandom(1 << 20))
    disk, size, kh = str(tmp_path / "tiny"), 256 << 10, trusting(tmp_path / "kh", group)
    src, dst = paths(operation, str(source), disk, "")
    if "processes" in front_end:
        # The workers write the files: they start on the tiny disk, this process stays off it.
        client = gevent_client(front_end, group, kh)
        try:
            with tiny_disk(disk, size):
                workers = client.workers
            errors = gevent_transfer(client, operation, group, src, dst)
            left = [name for worker in workers
                    for name in os.listdir(f"/proc/{worker.pid}/root{disk}")]
        finally:
            client.close()
    else:
        def work():
            try:
                return transfer(front_end, operation, group, src, dst, kh), os.listdir(disk)
            finally:
                if front_end != "asyncio":
                    gevent.get_hub().destroy(destroy_loop=True)  # this thread's hub and pool
        errors, left = run_on_tiny_disk(disk, size, work)
    assert left == []
    for host, err in errors.items():
        # parallel-ssh's contract: a local OS error stays an OSError.
        assert isinstance(err, OSError) and isinstance(err, exc.LocalOSError), repr(err)
        assert err.errno == errno.ENOSPC
        assert err.filename == dst % {"host": host}
        assert_names(err, host, group.port, "No space left on device", err.filename)


@pytest.fixture
def read_only_remote(dirs):
    """A "remote" folder nobody may write in, root included (immutable)."""
    remote = os.path.join(dirs[1], "locked")
    os.mkdir(remote)
    subprocess.run(["chattr", "+i", remote], check=True)
    try:
        yield remote
    finally:
        subprocess.run(["chattr", "-i", remote], check=True)


@pytest.mark.parametrize("operation", ["sftp upload", "scp upload"])
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_remote_permission_denied_names_the_host(group, dirs, read_only_remote, tmp_path,
                                                 front_end, operation):
    source = tmp_path / "small"
    source.write_bytes(b"x" * 1000)
    src, dst = paths(operation, str(source), dirs[0], read_only_remote)
    errors = transfer(front_end, operation, group, src, dst, trusting(tmp_path / "kh", group))
    cause = "PERMISSION_DENIED" if operation.startswith("sftp") else "refused"
    for host, err in errors.items():
        assert isinstance(err, (exc.SFTPError, exc.SCPError)), repr(err)
        assert_names(err, host, group.port, cause)
    assert os.listdir(read_only_remote) == []


@pytest.mark.parametrize("operation", ["sftp upload", "scp upload"])
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_missing_local_file_is_a_file_not_found_error_naming_the_host(group, dirs, tmp_path,
                                                                      front_end, operation):
    missing = str(tmp_path / "no_such_file")
    src, dst = paths(operation, missing, *dirs)
    errors = transfer(front_end, operation, group, src, dst, trusting(tmp_path / "kh", group))
    for host, err in errors.items():
        assert isinstance(err, FileNotFoundError), repr(err)
        assert_names(err, host, group.port, "No such file or directory", missing)
    assert os.listdir(dirs[1]) == []
