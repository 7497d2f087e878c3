"""The native runner (pssh.runners.native): the same core procedures, their waits answered by
one epoll set per thread instead of the gevent hub, against real sshd hosts. Each behaviour
the gevent client has is tried through ``runner="native"``: commands on many hosts, two
commands sharing one connection, transfers (whose steps programs may replace, run in a
greenlet of their own), a gevent Timeout or kill while a procedure waits, a flood that must
not stop timers, a refused connection, and a program's own connect function."""
from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import textwrap

import gevent
import pytest
from gevent.event import Event

from loopback import addresses
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.core.auth import Credentials
from pssh.core.commands import open_channel, start
from pssh.core.establish import establish
from pssh.core.settings import ConnectOptions
from pssh.core.streams import CommandStreams
from pssh.core.waits import Connect, Resolve, Sleep, SocketIO, Spawn
from pssh.runners import native
from pssh.sshd import ServerGroup
from ssh2.session import Session


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(4)) as g:
        yield g


def settings(group, **more):
    return dict(port=group.port, pkey=group.keys.private(), allow_agent=False,
                identity_auth=False, known_hosts=group.known_hosts_file(),
                host_key_policy="strict", timeout=30, **more)


@pytest.fixture
def client(group):
    with_client = SSHClient(group.hosts[0], runner="native", **settings(group))
    yield with_client
    with_client.close()


def test_a_procedure_runs_with_no_event_loop_at_all(group):
    """pssh.runners.native.run: the engine alone, in this thread (no gevent hub)."""
    options = ConnectOptions(**settings(group))
    resolved = options.resolve(group.hosts[1], None)

    def procedure():
        link = yield from establish(group.hosts[1], resolved, Credentials.of(resolved),
                                    Session)
        try:
            channel = yield from open_channel(link)
            streams = CommandStreams(link, channel)
            yield from start(link, channel, b"echo one; echo two >&2; exit 3")
            yield from streams.wait_eof(30)
            return streams.buffers[0].take(), streams.buffers[1].take(), streams.exit_code
        finally:
            link.close()

    assert native.run(procedure()) == (b"one\n", b"two\n", 3)


def test_sleeps_and_background_tasks_and_sockets():
    """The engine's own waits: a sleep, a task spawned and joined, a socket made readable
    by another task."""
    ours, theirs = socket.socketpair()

    def writer():
        yield Sleep(0.01)
        theirs.send(b"x")
        return "wrote"

    def reader():
        task = yield Spawn(writer(), "writer")
        ready = yield SocketIO(ours, False, None)
        joined = yield from task.join()
        return ready, ours.recv(1), joined, task.result

    try:
        assert native.run(reader()) == (True, b"x", True, "wrote")
    finally:
        ours.close()
        theirs.close()


def test_commands_on_every_host(group):
    client = ParallelSSHClient(group.hosts, runner="native", **settings(group))
    try:
        output = client.run_command("echo $SSH_CONNECTION | cut -d' ' -f3; exit 7")
        client.join(output)
        assert [list(o.stdout) for o in output] == [[h] for h in group.hosts]
        assert [o.exit_code for o in output] == [7] * len(group.hosts)
    finally:
        client.close()


def test_two_commands_on_one_connection_at_once(client):
    """Each command's reads may take the other's packets off the socket: the link's wake
    must reach the other's wait on the engine."""
    first = client.run_command("for i in $(seq 3000); do echo a$i; done")
    second = client.run_command("for i in $(seq 3000); do echo b$i; done")
    readers = [gevent.spawn(list, o.stdout) for o in (first, second)]
    gevent.joinall(readers, timeout=60, raise_error=True)
    assert readers[0].value == [f"a{i}" for i in range(1, 3001)]
    assert readers[1].value == [f"b{i}" for i in range(1, 3001)]


@pytest.mark.parametrize("when", ["queued", "waiting"])
def test_a_wake_from_another_greenlet_ends_the_wait(group, when):
    """A wake of a link from a greenlet of the program (a sharded worker's pump told of
    new credit, say) ends the wait of a call on that link, whether the call's procedure
    is still queued for the engine's next turn ("queued") or already waits on the socket
    ("waiting"). Lost, the call waited on a command that sends nothing, for ever (no
    keepalive here to wake it)."""
    client = SSHClient(group.hosts[0], runner="native", **settings(group, keepalive_seconds=0))
    output = client.run_command("sleep 1000", cancellable=True)
    reader = output.buffers.stdout.reader
    returned = Event()

    def reading():  # each call waits once: for the socket, or for a wake
        while True:
            reader.read_or_wait()
            returned.set()
    waiting = gevent.spawn(reading)
    try:
        if when == "waiting":
            # The loop has nothing left to do: the engine has turned and the call waits on
            # the socket (what the server sent after the command's start is read by now).
            gevent.idle()
        returned.clear()
        # Spawned after the reader: in the "queued" case it runs before the hub's next
        # poll, so before the engine's turn steps the call to its wait.
        gevent.spawn(reader.wake)
        gevent.idle()   # the loop has done all the wake led to, and has nothing left to do
        assert returned.is_set(), "the wake was lost: the call still waits"
        assert not output.buffers.stdout.rw_buffer.has_data()
    finally:
        waiting.kill()
        client.cancel(output, timeout=10)
        client.close()


def test_a_kill_after_the_wait_was_answered_still_ends_the_caller(group):
    """A greenlet killed after its call's wait was answered (a wake) but before the
    engine stepped the call on: the kill ends the greenlet. It used to be queued behind
    the answer, which ended the call: the kill was lost and the greenlet went on."""
    client = SSHClient(group.hosts[0], runner="native", **settings(group, keepalive_seconds=0))
    output = client.run_command("sleep 1000", cancellable=True)
    reader = output.buffers.stdout.reader

    def reading():
        while True:
            reader.read_or_wait()
    waiting = gevent.spawn(reading)
    try:
        gevent.idle()   # the call waits on the socket
        reader.wake()   # from this greenlet: the wait is answered, its step queued
        waiting.kill(timeout=60)   # thrown in before the engine's next turn
        assert waiting.dead, "the kill was lost: the greenlet called again"
    finally:
        waiting.kill(block=False)
        client.cancel(output, timeout=10)
        client.close()


def test_transfers_both_ways(client, tmp_path):
    """SFTP and SCP: their per-file steps are the client's own methods (which programs
    may replace), called in greenlets of their own while the engine drives the rest."""
    data = bytes(range(256)) * 8192
    local = tmp_path / "data"
    local.write_bytes(data)
    client.copy_file(str(local), str(tmp_path / "sent"))
    client.scp_send(str(local), str(tmp_path / "sent_scp"))
    client.copy_remote_file(str(tmp_path / "sent"), str(tmp_path / "back"))
    client.scp_recv(str(tmp_path / "sent_scp"), str(tmp_path / "back_scp"))
    for name in ("sent", "sent_scp", "back", "back_scp"):
        assert hashlib.sha256((tmp_path / name).read_bytes()).digest() == \
            hashlib.sha256(data).digest(), name


def test_a_timeout_while_waiting_reaches_the_procedure(client):
    """A gevent Timeout raised into the caller while the engine drives its procedure is
    thrown into the procedure (its clean-up runs) and then out of the call; the client
    runs the next command as before."""
    output = client.run_command("sleep 30", read_timeout=0.5)
    with pytest.raises(exc.Timeout):
        list(output.stdout)
    with gevent.Timeout(0.5, False):
        client.wait_finished(output)
        pytest.fail("the command ended though it sleeps 30 s")
    client.cancel(output, timeout=10)
    again = client.run_command("echo still here")
    assert list(again.stdout) == ["still here"]


def test_a_flood_does_not_stop_the_timers(client):
    """A host that never stops sending: the engine gives the hub its turns, so a timer
    greenlet keeps ticking, and a read timeout still ends the read."""
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.05)) for _ in range(1000)])
    output = client.run_command("yes flood", read_timeout=2)
    seen = 0
    try:
        with pytest.raises(exc.Timeout):
            for _ in output.stdout:
                seen += 1
    finally:
        ticker.kill()
        client.cancel(output, timeout=10)
    assert seen > 1000 and len(ticks) >= 10, (seen, len(ticks))


def test_hosts_behind_a_jump_host(group):
    """The jump host's connection is made on the gevent runner, the tunnels through it
    are driven by the engine: two runners wait on one link, and each is woken."""
    jump, targets = group.hosts[0], group.hosts[1:]
    client = ParallelSSHClient(targets, runner="native", proxy_host=jump,
                               proxy_port=group.port, **settings(group))
    try:
        output = client.run_command("for i in $(seq 2000); do echo $i; done")
        client.join(output)
        assert [len(list(o.stdout)) for o in output] == [2000] * len(targets)
        assert [o.exit_code for o in output] == [0] * len(targets)
    finally:
        client.close()


def test_a_refused_connection_is_an_error_naming_the_host(group):
    with socket.socket() as closed:
        closed.bind((group.hosts[0], 0))
        port = closed.getsockname()[1]   # bound, not listening: refused
        with pytest.raises(exc.ConnectionError) as raised:
            SSHClient(group.hosts[0], runner="native", num_retries=1,
                      **dict(settings(group), port=port))
    assert group.hosts[0] in str(raised.value)


def test_a_programs_own_connect_is_kept(group):
    """parallel-ssh lets programs replace a client's connect step: under the native
    runner it is still the one that makes the connection."""
    made = []

    class Counting(SSHClient):
        def _socket_for_core(self, family, kind, address, timeout):
            made.append(address)
            return super()._socket_for_core(family, kind, address, timeout)

    counting = Counting(group.hosts[2], runner="native", **settings(group))
    try:
        assert list(counting.run_command("echo ok").stdout) == ["ok"]
    finally:
        counting.close()
    assert made == [(group.hosts[2], group.port)]


def test_a_name_is_resolved_and_connected():
    """A host given by name (not an address) is resolved by gevent's resolver in a
    greenlet of its own; the engine then connects, non-blocking."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def procedure():
            infos = yield Resolve("localhost", port, None)
            family, kind, _, _, address = next(i for i in infos if i[0] == socket.AF_INET)
            sock = yield Connect(family, kind, address, None)
            try:
                return sock.getpeername()
            finally:
                sock.close()

        assert native.NativeRunner().run(procedure()) == ("127.0.0.1", port)


def test_nothing_left_for_the_hub_to_wait_for(group):
    """Once its clients are closed, a program's ``gevent.wait()`` returns: the engine's
    watchers keep the hub's loop alive only while a caller waits (a fresh interpreter,
    so that nothing of the test process's own keeps it busy)."""
    program = textwrap.dedent(f"""
        import gevent
        from pssh.clients import SSHClient
        client = SSHClient({group.hosts[0]!r}, runner="native", **{settings(group)!r})
        output = client.run_command("echo hi")
        client.wait_finished(output)
        assert list(output.stdout) == ["hi"]
        client.close()
        print(gevent.wait(timeout=30))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert done.stdout.strip() == "True", done.stderr


def test_an_unknown_runner_is_refused(group):
    with pytest.raises(ValueError, match="runner"):
        ParallelSSHClient(group.hosts, runner="threads")


def test_the_environment_chooses_the_default(group, monkeypatch):
    monkeypatch.setenv("PSSH_RUNNER", "native")
    client = ParallelSSHClient(group.hosts[:1], **settings(group))
    try:
        assert client.runner == "native"
        assert list(client.run_command("echo env")[0].stdout) == ["env"]
        assert isinstance(client.host_client(0)._runner, native.NativeRunner)
        # parallel-ssh's programs read the connection's socket as gevent's.
        assert client.host_client(0).sock.closed is False
    finally:
        client.close()


def test_the_command_line_run_in_a_program_leaves_its_default_runner_alone(group, tmp_path):
    # The command line's runner (native unless told) goes to its client and that client's
    # worker processes, not into the process's environment, where the program's own
    # clients would take it as their default.
    program = textwrap.dedent(f"""
        import os, sys
        from pssh.cli import main
        from pssh.clients import ParallelSSHClient
        try:
            code = main(["run", "-H", "{" ".join(group.hosts)}", "--port", "{group.port}",
                  "-k", "{group.keys.private()}", "--no-agent", "-F", "none",
                  "--known-hosts", "{group.known_hosts_file()}", "--processes", "2",
                  "--", "echo ran"])
        except SystemExit as end:
            code = end.code
        print("exit", code, file=sys.stderr)
        print(os.environ.get("PSSH_RUNNER"), ParallelSSHClient(["x"]).runner)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.stdout.count("ran") == len(group.hosts), done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "None gevent", done.stdout + done.stderr
    assert "exit 0" in done.stderr or "exit None" in done.stderr, done.stderr
