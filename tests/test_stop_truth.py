"""Stopping commands never reads as success: many hosts, many rounds, one core kept busy
beside. Commands cancelled through the API (the gevent client's cancel(), pssh.aio's
terminate(), kill() and a cancelled run), and runs stopped by SIGINT or SIGTERM in
every mode of the command line (one process, --processes 2, --scheduler local:2),
report how each command ended: the ones that ended on
their own their own exit status, the stopped ones the signal that killed them or
"stopped, no exit status", never exit 0. And no command or worker is left running."""
import asyncio
import signal
import subprocess
import sys
import uuid

import pytest

from pssh import aio
from pssh.clients import ParallelSSHClient
from pssh.sshd import ServerGroup
from conftest import trusting
from loopback import addresses
from processes import alive, in_session, processes_with
from test_cli_signals import EXIT, MODES, Pssh, conn, described, sleeping
from waiting import eventually, eventually_async, gone

HOSTS = 8
ROUNDS = 4
#: Hosts whose command ends on its own (exit status), before the stop: the first two.
QUICK = {0: 0, 1: 3}


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(HOSTS)) as g:
        yield g


@pytest.fixture(scope="module", autouse=True)
def busy_core():
    """A process that keeps one of the machine's cores busy for the whole module."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield burner
    finally:
        burner.kill()
        burner.wait()


def commands(sleeper: str) -> list:
    """Per host: the quick hosts exit on their own, the others run ``sleeper`` until
    stopped. Every command says "started" first."""
    return [f"echo started; exit {QUICK[i]}" if i in QUICK
            else f"echo started; {sleeper}; echo never" for i in range(HOSTS)]


def new_sleeper() -> str:
    """A remote command found by its unique name on this machine (the hosts are local)."""
    return f"sleep 300.{uuid.uuid4().int % 10**9}"


@pytest.mark.parametrize("how", ["cancellable", "pty"])
def test_cancelled_commands_never_read_as_success(group, tmp_path, how):
    client = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                               allow_agent=False, identity_auth=False,
                               known_hosts=str(tmp_path / "known_hosts"), timeout=10)
    try:
        for _ in range(ROUNDS):
            cancel_round(client, how)
    finally:
        client.close()


def cancel_round(client, how: str) -> None:
    sleeper = new_sleeper()
    output = client.run_command("%s", host_args=commands(sleeper),
                                cancellable=how == "cancellable", use_pty=how == "pty")
    assert [next(o.stdout).strip() for o in output] == ["started"] * HOSTS
    eventually(lambda: len(processes_with(sleeper)) >= HOSTS - len(QUICK),
               what="every slow command running")
    client.cancel(output)
    client.join(output, timeout=30)
    for i, host_out in enumerate(output):
        if i in QUICK:
            # It may have been stopped while exiting: then it has no exit code.
            assert host_out.exit_code in (QUICK[i], None), host_out
        else:
            assert host_out.exit_code is None, (
                f"{host_out.host}: a stopped command read as exit {host_out.exit_code} "
                f"(signal {host_out.exit_signal})")
    assert gone(lambda: processes_with(sleeper)) == []


def test_a_command_stopped_the_moment_it_starts_is_stopped(group, tmp_path):
    """cancel() right after run_command(): the login shell may not have exec'd the
    command's shell yet (the marker is in its command line, not yet its environment)."""
    client = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private(),
                               allow_agent=False, identity_auth=False,
                               known_hosts=str(tmp_path / "known_hosts"), timeout=10)
    try:
        for _ in range(ROUNDS):
            sleeper = new_sleeper()
            output = client.run_command(f"{sleeper}; echo never", cancellable=True)
            client.cancel(output)
            client.join(output, timeout=30)
            assert gone(lambda: processes_with(sleeper)) == []  # noqa: B023 - this round's
            for host_out in output:
                assert host_out.exit_code is None and list(host_out.stdout) == []
    finally:
        client.close()


#: pssh.aio's ways to stop a command (asyncssh's): the signal each sends, None for a
#: cancelled run (no result to read: the command is stopped in the background).
AIO_STOPS = {"terminate": "TERM", "kill": "KILL", "cancelled-run": None}


@pytest.mark.parametrize("how", list(AIO_STOPS))
def test_pssh_aio_stopped_commands_never_read_as_success(group, tmp_path, how):
    known_hosts = trusting(tmp_path / "known_hosts", group)
    for _ in range(ROUNDS):
        sleeper = new_sleeper()
        results = asyncio.run(aio_round(group, known_hosts, how, sleeper))
        for i, result in enumerate(results):
            if result is None:  # a cancelled run
                continue
            if i in QUICK:
                assert result.exit_status in (QUICK[i], None), result
            else:
                assert result.exit_status is None and result.returncode != 0, (
                    f"{group.hosts[i]}: a stopped command read as exit "
                    f"{result.exit_status} (signal {result.exit_signal})")
                # The signal it was sent, or none said (never another's).
                assert result.exit_signal is None or \
                    result.exit_signal[0] == AIO_STOPS[how], result
        # The connections are closed: every command stopped, none left running.
        assert gone(lambda: processes_with(sleeper)) == []  # noqa: B023 - this round's


async def aio_round(group, known_hosts: str, how: str, sleeper: str) -> list:
    """One round on every host at once, each on its own connection: the commands start
    (cancellable), the slow ones are seen running, then each is stopped ``how``. The
    results (None for a cancelled run), once every connection has closed."""
    server = group.servers[0]

    async def one(i: int, command: str, ready: asyncio.Event):
        async with aio.connect(group.hosts[i], port=group.port, username=server.user,
                               client_keys=[group.keys.private()], known_hosts=known_hosts,
                               agent_path=None) as conn:
            if how == "cancelled-run":
                run = asyncio.ensure_future(conn.run(command, cancellable=True))
                await ready.wait()
                if i in QUICK:
                    return await run
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
                return None
            process = await conn.create_process(command, cancellable=True)
            assert await process.stdout.readline() == "started\n"
            await ready.wait()
            if how == "terminate":
                process.terminate()
            else:
                process.kill()
            return await process.wait(30)

    ready = asyncio.Event()
    hosts = [asyncio.ensure_future(one(i, command, ready))
             for i, command in enumerate(commands(sleeper))]
    try:
        # Each slow host's sleep itself (its shell's command line holds the same words).
        await eventually_async(lambda: len(sleeping(sleeper)) == HOSTS - len(QUICK),
                               what="every slow command running")
    finally:
        ready.set()
    return await asyncio.gather(*hosts)


def test_a_start_killed_as_its_command_appears_leaves_nothing_running(group, tmp_path):
    """The gevent client's run_command(cancellable=True) killed (as a stopped run kills
    its hosts' greenlets) the moment its command shows on the server: it may still be
    waiting for the server's answer to its start, or be past it (then the output is
    cancelled). Either way the command is stopped."""
    import gevent
    from pssh.clients import SSHClient
    from pssh.output import HostOutput
    client = SSHClient(group.hosts[0], port=group.port, pkey=group.keys.private(),
                       allow_agent=False, identity_auth=False,
                       known_hosts=str(tmp_path / "known_hosts"), timeout=10)
    sleepers = [new_sleeper() for _ in range(ROUNDS * 2)]
    try:
        for sleeper in sleepers:
            start = gevent.spawn(client.run_command, f"{sleeper}; echo never",
                                 cancellable=True)
            while not processes_with(sleeper) and not start.dead:
                gevent.sleep(0)  # one turn of the hub: the start goes on
            start.kill()
            if isinstance(start.value, HostOutput):  # it was past its start: it returned
                client.cancel(start.value)
        assert gone(lambda: [p for s in sleepers for p in processes_with(s)],
                    pause=gevent.sleep) == []
    finally:
        client.close()


def test_pssh_aio_a_run_cancelled_as_its_command_appears_leaves_nothing_running(group,
                                                                             tmp_path):
    """A cancellable run cancelled the moment its command shows on the server (the
    loop looks between each of its turns): the run may still be waiting for the
    server's answer to its start, or be past it. Either way the command is stopped."""
    known_hosts = trusting(tmp_path / "known_hosts", group)
    server = group.servers[0]
    sleepers = [new_sleeper() for _ in range(ROUNDS * 2)]

    async def main():
        async with aio.connect(group.hosts[0], port=group.port, username=server.user,
                               client_keys=[group.keys.private()], known_hosts=known_hosts,
                               agent_path=None) as conn:
            for sleeper in sleepers:
                run = asyncio.ensure_future(conn.run(f"{sleeper}; echo never",
                                                     cancellable=True))
                while not processes_with(sleeper):
                    assert not run.done(), run
                    await asyncio.sleep(0)  # one turn of the loop: the run goes on
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
    asyncio.run(main())
    assert gone(lambda: [p for s in sleepers for p in processes_with(s)]) == []


def test_the_kill_script_finds_a_shell_that_has_not_exec_d_yet(group, tmp_path):
    """The state a command is in the moment it starts: the login shell runs the marker's
    ``export ...; exec`` line, so the marker is in its command line but not yet in its
    environment. The stop's kill script (run over SSH as cancel() runs it) ends it too,
    and whatever it forked meanwhile."""
    from pssh.core.cancel import MARKER, kill_script, new_marker
    marker = new_marker()
    shell = subprocess.Popen(["sh", "-c", f"export {MARKER}={marker}; "
                                          "while :; do sleep 0.1; done"])
    client = ParallelSSHClient(group.hosts[:1], port=group.port, pkey=group.keys.private(),
                               allow_agent=False, identity_auth=False,
                               known_hosts=str(tmp_path / "known_hosts"), timeout=10)
    try:
        client.join(client.run_command(kill_script(marker)), timeout=30)
        # Not shell.wait(): once gevent has run a subprocess in this process its child
        # watcher may reap our children first, and Popen then reads "exit 0".
        assert gone(lambda: [shell.pid] if alive(shell.pid) else []) == []
    finally:
        client.close()
        if shell.poll() is None:
            shell.kill()
            shell.wait()


@MODES
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_stopped_runs_never_write_success(group, tmp_path, mode, signum):
    for round_number in range(ROUNDS):
        here = tmp_path / str(round_number)
        here.mkdir()
        stopped_run(group, here, mode, signum)


def started(path) -> bool:
    return path.exists() and "started" in path.read_text()


def stopped_run(group, here, mode, signum) -> None:
    sleeper = new_sleeper()
    out = here / "out"
    script = ["case \"$SSH_CONNECTION\" in"]
    for i, command in enumerate(commands(sleeper)):
        script.append(f"  *' {group.hosts[i]} '*) {command} ;;")
    script.append("esac")
    pssh = Pssh(["run", "-H", " ".join(group.hosts), *conn(group, here), *mode,
                 "--output-dir", str(out), "--", "\n".join(script)], here)
    try:
        # Each slow host's command started as pssh knows it: its first line is in its
        # output file (opened when pssh saw the start). A stop before that finds work with
        # no command yet, rightly said "interrupted".
        eventually(lambda: all(started(out / f"{group.hosts[i]}.stdout")
                               for i in range(HOSTS) if i not in QUICK),
                   what="every slow command running")
        eventually(lambda: all((out / f"{group.hosts[i]}.status").exists() for i in QUICK),
                   what="the quick hosts' status files")
        pssh.signal(signum, whole_group=False)
        assert pssh.wait() == EXIT[signum], pssh.stderr()
    finally:
        pssh.kill()
    for i, host in enumerate(group.hosts):
        status = (out / f"{host}.status").read_text().strip()
        if i in QUICK:
            assert status == f"exit {QUICK[i]}", (host, status)
        else:
            # Each slow host's command was running: the stop signalled it (TERM), so it
            # says it was killed, or that it was stopped without a status; never exit 0,
            # never "interrupted" (work that had no command), nor a bare "no exit status"
            # (a command that ended so by itself).
            assert status in ("error: killed by signal TERM",
                              "error: stopped, no exit status"), \
                (host, status, pssh.stderr())
    assert gone(lambda: processes_with(sleeper)) == []
    assert described(gone(lambda: in_session(pssh.pid))) == []
