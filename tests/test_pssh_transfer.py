"""pssh file transfer (SFTP and SCP) across several real sshd hosts."""
import asyncio
import os
import shutil
import stat
import tempfile
from pathlib import Path

import gevent
import pytest

from pssh import aio
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.core import scp as core_scp
from conftest import trusting
from loopback import addresses
from pssh.sshd import ServerGroup


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


@pytest.fixture
def client(group, tmp_path):
    c = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                          known_hosts=str(tmp_path / "kh"), allow_agent=False,
                          identity_auth=False, timeout=10)
    yield c
    c.close()


def make_tree(root):
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"alpha\n")
    (root / "sub" / "b.bin").write_bytes(os.urandom(3_000_000))
    (root / "sub" / "deeper" / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(root / "sub" / "deeper" / "run.sh", 0o750)
    os.chmod(root / "sub", 0o710)


def same_tree(a, b):
    for dirpath, dirnames, filenames in os.walk(a):
        rel = os.path.relpath(dirpath, a)
        other = os.path.join(b, rel)
        assert sorted(os.listdir(other)) == sorted(dirnames + filenames)
        assert stat.S_IMODE(os.stat(other).st_mode) == stat.S_IMODE(os.stat(dirpath).st_mode)
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as x, \
                    open(os.path.join(other, name), "rb") as y:
                assert x.read() == y.read()
            assert stat.S_IMODE(os.stat(os.path.join(other, name)).st_mode) == \
                stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode)
    return True


def test_copy_file_to_every_host_with_copy_args(client, group, tmp_path):
    src = tmp_path / "payload"
    src.write_bytes(os.urandom(5_000_000))
    args = [{"n": i} for i in range(len(group.hosts))]
    cmds = client.copy_file(str(src), str(tmp_path / "remote" / "copy%(n)s"), copy_args=args)
    gevent.joinall(cmds, raise_error=True)
    for i in range(len(group.hosts)):
        assert (tmp_path / "remote" / f"copy{i}").read_bytes() == src.read_bytes()


def test_recursive_copy_both_ways_keeps_modes(client, group, tmp_path):
    make_tree(tmp_path / "tree")
    gevent.joinall(client.copy_file(str(tmp_path / "tree"), str(tmp_path / "up"), recurse=True),
                   raise_error=True)
    assert same_tree(tmp_path / "tree", tmp_path / "up")
    gevent.joinall(client.copy_remote_file(str(tmp_path / "up"), str(tmp_path / "down"),
                                           recurse=True), raise_error=True)
    for host in group.hosts:
        assert same_tree(tmp_path / "tree", tmp_path / f"down_{host}")


def test_scp_both_ways(client, group, tmp_path):
    make_tree(tmp_path / "tree")
    gevent.joinall(client.scp_send(str(tmp_path / "tree" / "sub" / "b.bin"),
                                   str(tmp_path / "scp.bin")), raise_error=True)
    assert (tmp_path / "scp.bin").read_bytes() == (tmp_path / "tree" / "sub" / "b.bin").read_bytes()
    gevent.joinall(client.scp_recv(str(tmp_path / "scp.bin"), str(tmp_path / "back")),
                   raise_error=True)
    for host in group.hosts:
        assert (tmp_path / f"back_{host}").read_bytes() == (tmp_path / "scp.bin").read_bytes()
    gevent.joinall(client.scp_send(str(tmp_path / "tree"), str(tmp_path / "scptree"),
                                   recurse=True), raise_error=True)
    assert same_tree(tmp_path / "tree", tmp_path / "scptree")


def test_transfer_errors_name_host_and_leave_no_partial_file(group, tmp_path):
    server = group.servers[0]
    client = SSHClient(server.address, port=server.port, pkey=group.keys.private(),
                       known_hosts=str(tmp_path / "kh"), allow_agent=False, identity_auth=False)
    with pytest.raises(exc.SFTPError) as info:
        client.copy_remote_file(str(tmp_path / "missing"), str(tmp_path / "x"))
    assert server.address in str(info.value)
    with pytest.raises(FileNotFoundError):  # a local OSError, as parallel-ssh raises it
        client.copy_file(str(tmp_path / "missing"), str(tmp_path / "y"))
    with pytest.raises(ValueError):
        client.copy_file(str(tmp_path), str(tmp_path / "z"))
    with pytest.raises(exc.SCPError):
        client.scp_recv(str(tmp_path / "missing"), str(tmp_path / "w"))
    assert sorted(os.listdir(tmp_path)) == ["kh"]


def test_host_killed_mid_transfer_leaves_no_complete_looking_file(tmp_path):
    with ServerGroup(addresses=addresses(1)) as one:
        server = one.servers[0]
        src = tmp_path / "big"
        with open(src, "wb") as fh:
            for _ in range(200):
                fh.write(os.urandom(1 << 20))
        client = SSHClient(server.address, port=server.port, pkey=one.keys.private(),
                           known_hosts=str(tmp_path / "kh"), allow_agent=False,
                           identity_auth=False, timeout=5)
        dest = tmp_path / "dest"
        killed = []

        def kill_midway(done, total):
            if done > total // 4 and not killed:
                server.kill()
                killed.append(done)

        with pytest.raises(exc.PSSHError):
            client.copy_remote_file(str(src), str(dest), callback=kill_midway)
        assert killed
        assert not dest.exists()
        assert [n for n in os.listdir(tmp_path) if n.endswith(".part")] == []


@pytest.fixture
def tmpfs(tmp_path):
    """A directory in memory (/dev/shm), removed after the test: a source sshd reads as
    fast as it can send, and a target written as fast as the client reads."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="pssh-test-"))
    yield path
    shutil.rmtree(path)


@pytest.mark.parametrize("front_end", ["gevent", "aio"])
def test_a_large_scp_download_lets_the_loop_run_between_its_reads(front_end, group, tmpfs,
                                                                 tmp_path, monkeypatch):
    """A download that always finds data waiting never waits on the socket, and so gave
    its loop no turn: a 50 ms timer stalled up to 1.3 s during a 1.5 GB scp_recv. With the
    turn slice at 0 the loop must run after every read: a watcher on the same loop, which
    looks at the partial file at each of its turns, never sees it grow by more than a
    read or two (it saw 14 to 26 MB at once before)."""
    monkeypatch.setattr("pssh.core.link.TURN_SLICE", 0.0)
    source = tmpfs / "big"
    with open(source, "wb") as fh:
        fh.truncate(200_000_000)
    target = tmpfs / "got"
    seen = []

    def look():
        parts = list(tmpfs.glob(".got.*.part"))
        try:
            seen.append(parts[0].stat().st_size)
        except (IndexError, FileNotFoundError):
            pass

    server = group.servers[0]
    if front_end == "gevent":
        def watch():
            while True:
                look()
                gevent.sleep(1e-6)   # a timer: a turn of the loop, as Link.turn takes
        with SSHClient(server.address, port=server.port, pkey=group.keys.private(),
                       known_hosts=str(tmp_path / "kh"), allow_agent=False,
                       identity_auth=False, timeout=30) as client:
            watcher = gevent.spawn(watch)
            try:
                client.scp_recv(str(source), str(target))
            finally:
                watcher.kill()
    else:
        async def main():
            async def watch():
                while True:
                    look()
                    await asyncio.sleep(0)
            async with aio.connect(server.address, port=server.port,
                                   client_keys=[group.keys.private()],
                                   known_hosts=trusting(tmp_path / "kh", group),
                                   agent_path=None, ssh_config=False) as conn:
                watcher = asyncio.ensure_future(watch())
                try:
                    await aio.scp((conn, str(source)), str(target))
                finally:
                    watcher.cancel()
        asyncio.run(main())
    assert target.stat().st_size == 200_000_000
    steps = [b - a for a, b in zip(seen, seen[1:])]
    assert len(steps) > 50, f"the watcher ran {len(seen)} times"
    assert max(steps) <= 2 * core_scp.CHUNK, \
        f"{max(steps) >> 20} MiB read between two turns of the loop"
