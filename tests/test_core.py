"""The session core driven by each runner: the same procedures, gevent and asyncio (default
loop and uvloop), against a real sshd."""
import asyncio
import os
import uuid

import pytest

from extras import imported
from pssh.core import scp as core_scp, sftp as core_sftp
from pssh.core.auth import Credentials
from pssh.core.commands import open_channel, start, stop
from pssh.core.establish import establish
from pssh.core.settings import ConnectOptions
from pssh.core.streams import CommandStreams
from pssh.core import clock
from pssh.core.waits import Sleep, Spawn
from ssh2.session import Session
from waiting import eventually_procedure, gone

RUNNERS = ["gevent", "asyncio", "uvloop"]


def run(runner: str, procedure):
    """Drive ``procedure`` to its end with ``runner``; its result."""
    if runner == "gevent":
        from pssh.runners.gevent import RUNNER
        return RUNNER.run(procedure)
    from pssh.runners.asyncio import RUNNER
    if runner == "uvloop":
        return imported("uvloop").run(RUNNER.run(procedure))
    return asyncio.run(RUNNER.run(procedure))


def connected(server, servers, **settings):
    options = ConnectOptions(port=server.port, pkey=servers.keys.private(), num_retries=1,
                             known_hosts=servers.known_hosts_file(), host_key_policy="strict",
                             **settings)
    resolved = options.resolve(server.address, None)
    creds = Credentials(resolved.user, keys=[options.pkey])
    return establish(server.address, resolved, creds, Session)


def command(link, text: bytes):
    channel = yield from open_channel(link)
    streams = CommandStreams(link, channel)
    yield from start(link, channel, text)
    return streams


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_command_runs_to_its_end(runner, servers, server):
    def procedure():
        link = yield from connected(server, servers)
        streams = yield from command(link, b"echo out; echo err >&2; exit 3")
        yield from streams.wait_eof(30)
        link.close()
        return streams.buffers[0].take(), streams.buffers[1].take(), streams.exit_code

    assert run(runner, procedure()) == (b"out\n", b"err\n", 3)


@pytest.mark.parametrize("runner", RUNNERS)
def test_files_both_ways_over_sftp_and_scp_and_through_a_tunnel(runner, servers, server,
                                                                 tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(3_000_001))

    def procedure():
        jump = yield from connected(server, servers)
        link = yield from establish(server.address, *_target(server, servers), Session,
                                    via=jump)
        sftp = yield from core_sftp.start(link)
        up = yield from core_sftp.upload(link, sftp, str(source), str(tmp_path / "up.bin"))
        down = yield from core_sftp.download(link, sftp, str(tmp_path / "up.bin"),
                                             str(tmp_path / "down.bin"))
        yield from core_scp.upload(link, str(source), str(tmp_path / "scp.bin"))
        yield from core_scp.download(link, str(tmp_path / "scp.bin"),
                                     str(tmp_path / "scp-down.bin"))
        names = yield from core_sftp.listdir(link, sftp, str(tmp_path))
        link.close()
        jump.close()
        return up, down, sorted(names)

    up, down, names = run(runner, procedure())
    assert up == down == 3_000_001
    for name in ("down.bin", "scp-down.bin"):
        assert (tmp_path / name).read_bytes() == source.read_bytes()
    assert not [n for n in names if n.endswith(b".part")]


def _target(server, servers):
    options = ConnectOptions(port=server.port, pkey=servers.keys.private(), num_retries=1,
                             known_hosts=servers.known_hosts_file(), host_key_policy="strict")
    resolved = options.resolve(server.address, None)
    return resolved, Credentials(resolved.user, keys=[options.pkey])


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_cancellable_command_is_stopped_on_the_server(runner, servers, server):
    from pssh.core.cancel import new_marker, with_marker
    from processes import processes_with

    marker = new_marker()
    word = f"sleep 341.{uuid.uuid4().int % 10**9}"  # this test's alone, on a shared machine

    def procedure():
        link = yield from connected(server, servers)
        streams = yield from command(
            link, with_marker(f"echo started; {word}; echo never", marker).encode())
        streams.marker = marker
        # Started for sure (the servers run here).
        yield from eventually_procedure(lambda: processes_with(word), what=f"{word} running")
        stopped = yield from stop(link, streams, "TERM", timeout=20)
        link.close()
        return stopped

    assert run(runner, procedure()) is True
    assert gone(lambda: processes_with(word)) == []


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_task_cancelled_before_it_ran_is_done_at_once(runner):
    """A background procedure cancelled before its runner started it: its task ends then
    and there (a join does not wait for its deadline), and the procedure never runs."""
    ran = []

    def child():
        ran.append(True)
        yield Sleep(1)

    def procedure():
        task = yield Spawn(child())
        task.cancel()
        joined = yield from task.join(clock.now() + 30)
        yield Sleep(0.01)   # the child would have run by now
        return joined, task.exception is not None

    assert run(runner, procedure()) == (True, True)
    assert ran == []
