"""Time-driven behaviour of the core on virtual time (pssh.runners.virtual): keepalives
that declare a stopped server lost, a command's deadline, handshake retries and their
delays. Each is the same core procedure the gevent and asyncio runners drive, against a
real sshd or a real socket; only the clock is virtual, so each case takes a fraction of
a second (a few seconds on a loaded machine, where giving up waits for the machine's
stalls: pssh.runners.virtual), and its times are exact whatever the load."""
import signal
import socket
import time
import uuid

import pytest

from pssh.core import clock
from pssh.core import errors as exc
from pssh.core.auth import Credentials
from pssh.core.establish import establish
from pssh.core.settings import ConnectOptions
from pssh.core.streams import CommandStreams
from pssh.core.cancel import new_marker, with_marker
from pssh.core.commands import open_channel, start, stop
from pssh.core.waits import Sleep, Slots, Spawn
from pssh.runners.virtual import VirtualClock, VirtualRunner
from ssh2.session import Session

from processes import processes_with, signal_each, stopped
from waiting import gone


def connected(server, servers, **settings):
    options = ConnectOptions(port=server.port, pkey=servers.keys.private(),
                             known_hosts=servers.known_hosts_file(), host_key_policy="strict",
                             **settings)
    resolved = options.resolve(server.address, None)
    return establish(server.address, resolved, Credentials(resolved.user, keys=[options.pkey]),
                     Session)


def started(link, command: bytes, pty=None, marker=None):
    channel = yield from open_channel(link)
    streams = CommandStreams(link, channel)
    streams.marker = marker
    yield from start(link, channel, command, pty=pty)
    return streams


def test_keepalives_declare_a_stopped_server_lost(servers, server):
    """Keepalives every 5 s, 3 unanswered intervals: a server that stops answering in the
    middle of a command is declared lost after one silent round and the probe's 15 s, and
    the wait on the command fails with "server not responding"."""
    runner = VirtualRunner()

    def procedure():
        link = yield from connected(server, servers, keepalive_seconds=5,
                                    keepalive_count_max=3, num_retries=1)
        streams = yield from started(link, b"sleep 1000")
        began = runner.clock.now()
        with stopped(server):
            try:
                yield from streams.wait_eof(None)
            except exc.ConnectionError as err:
                return err, runner.clock.now() - began
        raise AssertionError("the command ended though its server was stopped")

    err, after = runner.run(procedure())
    assert "server not responding" in str(err) and server.address in str(err)
    assert 15 <= after <= 25, after   # virtual seconds: one silent round, then the probe


def test_a_live_idle_server_answers_the_probes(servers, server):
    """Keepalives every 5 s to a server that answers them: an hour passes on the virtual
    clock (720 keepalive rounds, the silent ones probed) and the connection still runs a
    command. The remote command's own time is real: only our side's clock is virtual."""
    runner = VirtualRunner()

    def procedure():
        link = yield from connected(server, servers, keepalive_seconds=5,
                                    keepalive_count_max=3, num_retries=1)
        yield Sleep(3600)
        assert link.lost is None
        streams = yield from started(link, b"echo still here")
        yield from streams.wait_eof(30)
        link.close()
        return streams.buffers[0].take(), streams.exit_code, runner.clock.now()

    out, code, now = runner.run(procedure())
    assert (out, code) == (b"still here\n", 0)
    assert now >= 3600


def test_a_command_deadline_is_exact(servers, server):
    runner = VirtualRunner()

    def procedure():
        link = yield from connected(server, servers, keepalive_seconds=0, num_retries=1)
        streams = yield from started(link, b"echo begun; sleep 1000")
        began = runner.clock.now()
        try:
            yield from streams.wait_eof(30)
        except exc.Timeout as err:
            return err, runner.clock.now() - began, streams.buffers[0].take()
        finally:
            link.close()
        raise AssertionError("no timeout")

    err, after, out = runner.run(procedure())
    assert server.address in str(err)
    assert after == pytest.approx(30)
    assert out == b"begun\n"


#: Commands that ignore the signals a stop sends (TERM, and HUP when their pty is hung
#: up): only SIGKILL ends them. Their names are unique, so the test finds and kills them.
STUBBORN = {
    "marker": "trap '' TERM HUP INT; echo started; exec sleep 1000.{}",
    "pty": "trap '' TERM HUP INT; echo started; exec sleep 1000.{}",
    # Its output ends (EOF) but it runs on: the close waits for an exit status that
    # never comes, then for the server's answer to the close.
    "output-closed": "trap '' TERM HUP INT; echo started; exec sleep 1000.{} >&- 2>&-",
}


@pytest.mark.parametrize("how", list(STUBBORN))
@pytest.mark.parametrize("timeout", [0, 1, 3, 10])
def test_a_stop_ends_within_its_deadline(servers, server, how, timeout):
    """stop(timeout=T) of a command that ignores the signal, on a live server: each step
    (the signal request, the kill script, the wait for the command's end, the close) gets
    what is left of the one deadline, so the whole returns within T virtual seconds,
    0 included, and says the command was still running; the command has no exit status."""
    runner = VirtualRunner()
    name = f"{uuid.uuid4().int % 10**9}"
    marker = None if how == "pty" else new_marker()
    command = STUBBORN[how].format(name)
    if marker is not None:
        command = with_marker(command, marker)

    def procedure():
        link = yield from connected(server, servers, keepalive_seconds=0, num_retries=1)
        try:
            streams = yield from started(link, command.encode(),
                                         pty=() if how == "pty" else None, marker=marker)
            out, ready_by = b"", runner.clock.now() + 30
            while b"started" not in out:  # its trap is set: the stop may begin
                yield from streams.fill(0, ready_by)
                out += streams.buffers[0].take()
            began = runner.clock.now()
            was_running = yield from stop(link, streams, timeout=timeout)
            return was_running, runner.clock.now() - began, streams.exit_code
        finally:
            link.close()

    try:
        was_running, took, exit_code = runner.run(procedure())
    finally:
        signal_each(processes_with(f"sleep 1000.{name}"), signal.SIGKILL)
    assert gone(lambda: processes_with(f"sleep 1000.{name}")) == []
    assert was_running
    assert took <= timeout, took
    assert exit_code is None


def test_handshake_retries_wait_their_delay_and_each_try_its_timeout():
    """A host that accepts TCP connections and never says a word: 3 tries of 10 s each,
    5 s apart, then the error naming the host: 40 s of virtual time, 3 connections."""
    tarpit = socket.socket()
    tarpit.bind(("127.0.0.1", 0))
    tarpit.listen(16)
    port = tarpit.getsockname()[1]
    runner = VirtualRunner()
    options = ConnectOptions(port=port, num_retries=3, retry_delay=5, timeout=10,
                             connect_timeout=10, host_key_policy="strict", known_hosts=None,
                             allow_agent=False, identity_auth=False)
    resolved = options.resolve("127.0.0.1", None)

    def procedure():
        try:
            yield from establish("127.0.0.1", resolved, Credentials(resolved.user), Session)
        except exc.PSSHError as err:
            return err, runner.clock.now()
        raise AssertionError("connected to a host that never speaks")

    try:
        err, now = runner.run(procedure())
        tarpit.setblocking(False)
        accepted = []
        while True:
            try:
                accepted.append(tarpit.accept()[0])
            except BlockingIOError:
                break
    finally:
        tarpit.close()
    for conn in accepted:
        conn.close()
    assert "127.0.0.1" in str(err)
    assert now == pytest.approx(3 * 10 + 2 * 5)
    assert len(accepted) == 3


def test_background_tasks_sleep_on_the_same_clock():
    """Two background procedures and the main one interleave by their virtual times."""
    runner = VirtualRunner()
    seen = []

    def ticker(name, every, times):
        for _ in range(times):
            yield Sleep(every)
            seen.append((runner.clock.now(), name))

    def procedure():
        a = yield Spawn(ticker("a", 2, 3))
        b = yield Spawn(ticker("b", 3, 2))
        yield from a.join()
        yield from b.join()
        return runner.clock.now()

    assert runner.run(procedure()) == 6
    # At 6 both are due: b went to sleep first (at 3, a at 4), so b wakes first.
    assert seen == [(2, "a"), (3, "b"), (4, "a"), (6, "b"), (6, "a")]


def test_slots_hold_at_most_their_size_and_a_deadline_gives_up():
    """Three holders of two slots, for 5 s, 8 s and 5 s: the third gets one when the first
    gives it back (at 5); a fourth that may wait only 2 s gives up at 2 without one."""
    runner = VirtualRunner()
    slots = Slots(2)
    seen = []

    def holder(name, hold, patience=None):
        deadline = None if patience is None else runner.clock.now() + patience
        if not (yield from slots.take(deadline)):
            seen.append((runner.clock.now(), name, "gave up"))
            return
        seen.append((runner.clock.now(), name, "took", slots.taken))
        try:
            yield Sleep(hold)
        finally:
            slots.give()

    def procedure():
        tasks = []
        for name, hold, patience in (("a", 5, None), ("b", 8, None), ("c", 5, None),
                                     ("d", 5, 2)):
            tasks.append((yield Spawn(holder(name, hold, patience))))
        for task in tasks:
            yield from task.join()

    runner.run(procedure())
    assert seen == [(0, "a", "took", 1), (0, "b", "took", 2), (2, "d", "gave up"),
                    (5, "c", "took", 2)]
    assert slots.taken == 0
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)


def test_the_time_of_day_moves_with_the_virtual_clock():
    runner = VirtualRunner(clock=VirtualClock(wall_start=1_000_000.0))

    def procedure():
        before = clock.wall()
        yield Sleep(90)
        return before, clock.wall()

    assert runner.run(procedure()) == (1_000_000.0, 1_000_090.0)
    real = clock.wall()   # outside the run: the real time of day again
    assert abs(real - time.time()) < 60
