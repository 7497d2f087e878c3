"""ParallelSSHClient(processes=N): hosts sharded over worker processes, against real sshd."""
import os
import signal
import socket
import subprocess
import sys
import textwrap
import tracemalloc
import uuid

import gevent
import pytest
from gevent.socket import wait_read

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient
from pssh.fanout.process import WORKER_MODULE, worker_count
from pssh.sshd import ServerGroup, free_port
from loopback import address, addresses
from processes import (alive, children_running, communicate_or_show_stacks, processes_with,
                       signal_state)
from waiting import gone


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(4)) as g:
        yield g


def sharded(group, tmp_path, hosts=None, processes=2, **kwargs):
    return ParallelSSHClient(hosts or group.hosts, port=group.port, pkey=group.keys.private(),
                             known_hosts=str(tmp_path / "known_hosts"), allow_agent=False,
                             identity_auth=False, timeout=10, retry_delay=0.1,
                             processes=processes, **kwargs)


def worker_pids(client):
    return [w.pid for w in client.workers]


def test_outputs_in_host_order_with_exit_codes_stdin_and_a_failed_host(group, tmp_path):
    refused = (address(), free_port())   # nothing listens there
    hosts = group.hosts + [refused[0]]
    from pssh.config import HostConfig
    configs = [HostConfig(port=group.port) for _ in group.hosts] + [HostConfig(port=refused[1])]
    client = sharded(group, tmp_path, hosts=hosts, host_config=configs)
    assert type(client) is ParallelSSHClient and client.processes == 2
    output = client.run_command("echo $SSH_CONNECTION; echo %s >&2; exit %s",
                                host_args=[(i, i) for i in range(len(hosts))],
                                stop_on_errors=False)
    pids = worker_pids(client)
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert [o.host for o in output] == hosts
    for i, host_output in enumerate(output[:-1]):
        assert list(host_output.stdout)[0].split()[2] == host_output.host
        assert list(host_output.stderr) == [str(i)]
        assert host_output.exit_code == i and host_output.exception is None
    # As in one process: the exit status is there once stdout has ended, stderr unread.
    output2 = client.run_command("echo out; seq 1 100000 >&2; exit 7", stop_on_errors=False)
    assert list(output2[0].stdout) == ["out"] and output2[0].exit_code == 7
    assert len(list(output2[0].stderr)) == 100000
    failed = output[-1]
    assert isinstance(failed.exception, exc.ConnectionRefused)
    assert refused[0] in str(failed.exception) and failed.exit_code is None
    # Standard input reaches the command through its worker.
    output = client.run_command("cat", stop_on_errors=False)
    for host_output in output[:-1]:
        host_output.stdin.write(f"to {host_output.host}\n")
        host_output.stdin.close()
    client.join(output)
    assert [list(o.stdout) for o in output[:-1]] == [[f"to {h}"] for h in group.hosts]
    client.close()
    assert not any(alive(pid) for pid in pids)


def test_as_completed_and_file_copies_both_ways(group, tmp_path):
    client = sharded(group, tmp_path)
    output = client.run_command("sleep %s; echo slept %s", host_args=[(d, d) for d in
                                                                      (2, 0, 1, 0.5)])
    order = [o.host for o in client.as_completed(output)]
    assert sorted(order) == sorted(group.hosts) and order[0] == group.hosts[1]
    assert order[-1] == group.hosts[0]
    assert all(o.exit_code == 0 for o in output)
    source = tmp_path / "source"
    source.write_bytes(os.urandom(300_000))
    remote = tmp_path / "remote_%(i)s"
    copy_args = [{"i": i} for i in range(len(group.hosts))]
    gevent.joinall(client.copy_file(str(source), str(remote), copy_args=copy_args),
                   raise_error=True)
    gevent.joinall(client.copy_remote_file(str(tmp_path / "remote_0"), str(tmp_path / "back")),
                   raise_error=True)
    for i, host in enumerate(group.hosts):
        assert (tmp_path / f"remote_{i}").read_bytes() == source.read_bytes()
        assert (tmp_path / f"back_{host}").read_bytes() == source.read_bytes()
    client.close()


def test_a_killed_worker_fails_only_its_hosts(group, tmp_path):
    client = sharded(group, tmp_path)
    output = client.run_command("echo started; sleep 2; echo done")
    victim = client.workers[0]
    assert [next(o.stdout) for o in output] == ["started"] * 4
    os.kill(victim.pid, signal.SIGKILL)
    client.join(output)
    mine = [o for i, o in enumerate(output) if i % 2 == 0]
    others = [o for i, o in enumerate(output) if i % 2 == 1]
    for host_output in mine:
        assert isinstance(host_output.exception, exc.WorkerError)
        assert host_output.host in str(host_output.exception)
        assert "killed by signal 9" in str(host_output.exception)
        with pytest.raises(exc.WorkerError):
            list(host_output.stdout)
        assert host_output.exit_code is None
    for host_output in others:
        assert host_output.exception is None and host_output.exit_code == 0
        assert list(host_output.stdout) == ["done"]
    # Its hosts get a new worker on the next run.
    output = client.run_command("echo again")
    client.join(output)
    assert [list(o.stdout) for o in output] == [["again"]] * 4
    assert victim.pid not in worker_pids(client)
    client.close()


def test_a_sigterm_to_a_worker_answers_the_calls_waiting_for_its_pool(group, tmp_path):
    """A worker with a pool of one and two hosts that accept connections and never speak:
    one's call holds the slot (its handshake waits), the other's waits for the slot. A
    SIGTERM to that worker alone stops both, and both are answered with the worker's
    "told to stop" error. The waiting call used to get no answer, and its caller waited
    for ever."""
    silent = [socket.socket(), socket.socket()]
    for listener in silent:
        listener.bind((address(), group.port))
        listener.listen(16)
    hosts = [silent[0].getsockname()[0], group.hosts[0],
             silent[1].getsockname()[0], group.hosts[1]]
    client = sharded(group, tmp_path, hosts=hosts, processes=2, pool_size=1, num_retries=1,
                     connect_timeout=600)
    try:
        victim = next(worker for worker in client.workers if 0 in worker.hosts)
        assert set(victim.hosts) == {0, 2}
        calls = [gevent.spawn(client.run_host_command, i, "echo done") for i in (0, 2)]
        # One call is in a silent handshake, so the other one waits for the slot ...
        gevent.wait([gevent.spawn(wait_read, s.fileno()) for s in silent], count=1, timeout=60)
        # ... once the worker has read both (it answers in the order it reads: a cancel of
        # a command it does not run is answered at once).
        assert victim.request("cancel", -1, "TERM", 1) is False
        os.kill(victim.pid, signal.SIGTERM)
        gevent.joinall(calls, timeout=60)
        assert all(call.dead for call in calls), "a call got no answer: its caller waits"
        for call in calls:
            assert "told to stop" in str(call.exception), call.exception
    finally:
        client.close()
        for listener in silent:
            listener.close()


def test_one_hundred_megabytes_through_a_worker_in_bounded_memory(group, tmp_path):
    size = 100 * 1024 * 1024
    client = sharded(group, tmp_path, hosts=group.hosts[:2])
    output = client.run_command(f"head -c {size} /dev/zero | tr '\\0' x | fold -w 1000")
    tracemalloc.start()
    try:
        total = sum(len(line) for line in output[0].stdout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    worker = client.workers[0]
    with open(f"/proc/{worker.pid}/status") as fh:
        status = dict(line.split(":", 1) for line in fh)
    client.join(output)
    assert total == size and output[0].exit_code == 0 and output[1].exit_code == 0
    assert peak < 8 * 1024 * 1024, f"{peak} bytes held here"
    worker_peak = int(status["VmHWM"].split()[0]) * 1024
    assert worker_peak < 100 * 1024 * 1024, f"the worker held {worker_peak} bytes"
    client.close()


CTRL_C_PROGRAM = textwrap.dedent("""
    import faulthandler, signal, sys
    from pssh import stacks
    from pssh.clients import ParallelSSHClient
    # A hang says where: every greenlet's stack (pssh.stacks), and every thread's even
    # when the interpreter never gets to run a Python handler (faulthandler).
    stacks.install()
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=True)
    hosts = sys.argv[1].split(",")
    client = ParallelSSHClient(hosts, port=int(sys.argv[2]), pkey=sys.argv[3],
                               known_hosts=sys.argv[4], allow_agent=False, identity_auth=False,
                               processes=2)
    output = client.run_command("echo started; sleep " + sys.argv[5])
    for host_output in output:
        next(host_output.stdout)
    print(" ".join(str(w.pid) for w in client.workers), flush=True)
    client.join(output)
""")


def test_ctrl_c_stops_the_workers_and_the_remote_commands(group, tmp_path):
    program = tmp_path / "program.py"
    program.write_text(CTRL_C_PROGRAM)
    sleeper = f"4321.{uuid.uuid4().int % 10**9}"  # this test's commands alone (sleep's argv)
    with subprocess.Popen([sys.executable, str(program), ",".join(group.hosts),
                           str(group.port), group.keys.private(),
                           str(tmp_path / "known_hosts"), sleeper],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, env=dict(os.environ, PYTHONPATH=":".join(
                              p for p in sys.path if p))) as proc:
        try:
            pids = [int(p) for p in proc.stdout.readline().split()]
            assert len(pids) == 2 and len(commands_of(sleeper, proc.pid)) == 4
            before = signal_state(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
            try:
                _, stderr = communicate_or_show_stacks(proc, 30)
            except AssertionError as hang:  # did SIGINT arrive? (seen once: it did not act)
                raise AssertionError(f"program's signals before the SIGINT: {before}\n"
                                     f"{hang}") from None
        finally:
            if proc.poll() is None:  # (a failure above: nothing of it is left running)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert "KeyboardInterrupt" in stderr
    assert gone(lambda: processes_with(sleeper) + [p for p in pids if alive(p)], 10,
                "the remote commands and the workers ended") == []


def commands_of(marker, program):
    """The remote commands holding ``marker``, but not ``program`` (whose own command line
    holds it too, as an argument)."""
    return [p for p in processes_with(marker) if p != program]


def test_worker_count_and_plain_client_for_one_process(group, tmp_path):
    assert worker_count("auto", 1000) == len(os.sched_getaffinity(0))
    assert worker_count(8, 3) == 3 and worker_count(1, 10) == 1
    for bad in (0, "many"):
        with pytest.raises(ValueError):
            worker_count(bad, 10)
    for plain in (1, None):
        client = sharded(group, tmp_path, processes=plain)
        assert type(client) is ParallelSSHClient and client.workers == []


def _our_workers():
    """Live worker processes started by this process."""
    return children_running(os.getpid(), WORKER_MODULE)


@pytest.mark.parametrize("attempt", range(3))  # (whether starting a worker yields varies)
def test_hosts_asking_for_their_workers_at_once_start_each_worker_once(group, tmp_path,
                                                                       attempt):
    """Each host's first call starts the workers; many at once must not start a worker
    twice (one would be lost: never closed, left running)."""
    client = sharded(group, tmp_path, processes=2)
    gevent.joinall([gevent.spawn(client.connect_host, i) for i in range(len(group.hosts))],
                   raise_error=True)
    assert len(_our_workers()) == 2
    client.close()
    assert gone(_our_workers, 10, "the workers ended") == []
