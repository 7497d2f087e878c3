"""client.cancel(): remote commands stopped, on hosts that run them for real."""
import signal
import uuid

import gevent
import pytest

from pssh.clients import ParallelSSHClient
from loopback import addresses
from pssh.sshd import ServerGroup
from processes import pgrep, signal_each
from waiting import eventually, gone


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


@pytest.fixture
def client(group, tmp_path):
    client = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                               allow_agent=False, identity_auth=False,
                               known_hosts=str(tmp_path / "kh"), timeout=10)
    yield client
    client.close()  # its sshd sessions end with the test, not when it is collected


def left(pattern):
    """Processes still running whose command line has ``pattern``, once they had the
    time to end (they end some moments after being told to)."""
    return gone(lambda: pgrep(pattern), what=f"every {pattern!r} ended")


def test_cancellable_commands_stop_without_a_pty(client, group):
    sleeper = f"sleep 331.{uuid.uuid4().int % 10**9}"
    output = client.run_command(f"echo started; {sleeper}; echo never", cancellable=True)
    assert [next(o.stdout) for o in output] == ["started", "started"]
    stopped = client.cancel()
    assert [o.host for o in stopped] == group.hosts
    assert left(sleeper) == []
    for host_out in output:
        assert list(host_out.stdout) == []  # "never" was never printed
        assert host_out.exit_signal == "TERM" and host_out.exit_code is None
    assert client.cancel(output) == []  # nothing left to stop


def test_pty_commands_stop_when_their_channel_closes(client):
    sleeper = f"sleep 332.{uuid.uuid4().int % 10**9}"
    output = client.run_command(sleeper, use_pty=True)
    # Started for sure (a cancel before the start would stop nothing, and prove nothing).
    eventually(lambda: len(pgrep(sleeper)) >= 2, what="the command on both hosts",
               pause=gevent.sleep)
    assert len(client.cancel(output)) == 2
    assert left(sleeper) == []


def test_without_marker_or_pty_the_channel_still_closes(client):
    # The server ignores the signal request for this (root) login: the process
    # stays, as with ssh; the client side is released all the same.
    sleeper = f"sleep 333.{uuid.uuid4().int % 10**9}"
    output = client.run_command(f"echo hi; {sleeper}")
    assert [next(o.stdout) for o in output] == ["hi", "hi"]
    assert len(client.cancel(output)) == 2
    assert client.finished(output)
    # Left running by the server, as said: ended here, by its unique name.
    signal_each(pgrep(sleeper), signal.SIGKILL)
    assert left(sleeper) == []
