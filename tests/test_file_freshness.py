"""The files a log-in reads (the key, known_hosts) are looked at once per run, not once or
more per host, except by the host key decision, which looks afresh for each host: a change
between runs is seen by the next run, a key revoked meanwhile by the next check. Real sshd
hosts on loopback; the kernel's own count of ``stat`` calls, by ``strace``, in a fresh
interpreter running each front end as a program would."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest

from loopback import addresses
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.core import freshness, known_hosts as core_known_hosts
from pssh.sshd import ServerGroup

#: Logins per run: each of the group's hosts five times over.
HOSTS_PER_RUN = 15

FAN_OUT = textwrap.dedent("""
    import asyncio, sys
    from pssh.core import freshness
    # The run's own span only: the count must not depend on how fast this machine is.
    freshness.MAX_AGE = 3600.0
    front, hosts, port, user, key, known_hosts = sys.argv[1:]
    hosts = hosts.split(",")
    if front == "aio":
        from pssh import aio

        async def main():
            results = await aio.gather_hosts(hosts, "true", port=int(port), username=user,
                                             client_keys=[key], known_hosts=known_hosts,
                                             agent_path=None, timeout=60)
            return sum(r.ok for r in results)
        ok = asyncio.run(main())
    else:
        from pssh.clients import ParallelSSHClient
        client = ParallelSSHClient(hosts, port=int(port), user=user, pkey=key,
                                   allow_agent=False, identity_auth=False, timeout=60,
                                   known_hosts=known_hosts, host_key_policy="strict",
                                   runner=front)
        output = client.run_command("true")
        client.join(output)
        ok = sum(o.exit_code == 0 for o in output)
    print(ok)
""")


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


def stats_of(trace: Path, paths) -> Counter:
    """How many stat-like calls (stat, newfstatat, statx...) named each of ``paths``."""
    counts: Counter = Counter()
    for line in trace.read_text().splitlines():
        for path in paths:
            if re.search(r'stat\w*\((?:AT_FDCWD, )?"%s"' % re.escape(str(path)), line):
                counts[str(path)] += 1
    return counts


def looks_of_one_run(group, tmp_path: Path, front: str, logins: int) -> Counter:
    """The stat calls naming the key file, its folder and known_hosts in a fresh
    interpreter running one fan-out of ``logins`` logins over the group's hosts."""
    strace = shutil.which("strace")
    assert strace, "strace is not installed: apt-get install strace (ci/setup.sh does)"
    known_hosts = Path(group.known_hosts_file())
    key = Path(group.keys.private())
    hosts = [group.hosts[i % len(group.hosts)] for i in range(logins)]
    trace = tmp_path / f"trace-{logins}"
    program = tmp_path / "fan_out.py"
    program.write_text(FAN_OUT)
    result = subprocess.run(
        [strace, "-f", "-e", "trace=stat,lstat,newfstatat,statx", "-o", str(trace),
         sys.executable, str(program), front, ",".join(hosts), str(group.port),
         group.servers[0].user, str(key), str(known_hosts)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(logins)], result.stderr[-2000:]
    return stats_of(trace, [key, key.parent, known_hosts])


@pytest.mark.parametrize("front", ["gevent", "native", "aio"])
def test_a_fan_out_looks_at_its_key_and_known_hosts_once_not_per_host(group, tmp_path, front):
    one = looks_of_one_run(group, tmp_path, front, 1)
    many = looks_of_one_run(group, tmp_path, front, HOSTS_PER_RUN)
    key, known_hosts = str(group.keys.private()), str(group.known_hosts_file())
    folder = str(Path(key).parent)
    # The key file and its folder are looked at as often for 15 logins as for one
    # (before: three times per host each; the key file once more when the client
    # checks its options).
    assert (many[key], many[folder]) == (one[key], one[folder]), (one, many)
    assert one[key] <= 2 and one[folder] == 1, one
    # known_hosts: once for the run (the host key algorithms to offer), and once per
    # host for the host key decision, which never uses a status seen before (before:
    # twice per host).
    assert many[known_hosts] - one[known_hosts] == HOSTS_PER_RUN - 1, (one, many)
    assert one[known_hosts] == 2, one


def test_a_host_key_added_between_runs_is_seen_by_the_next_run(group, tmp_path):
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    client = ParallelSSHClient(group.hosts, port=group.port, user=group.servers[0].user,
                               pkey=str(group.keys.private()), allow_agent=False,
                               identity_auth=False, timeout=30, num_retries=1,
                               known_hosts=str(known_hosts), host_key_policy="strict")
    output = client.run_command("true", stop_on_errors=False)
    assert all(isinstance(o.exception, exc.UnknownHostKeyError) for o in output), output
    # As `ssh-keyscan >> known_hosts` would, between two runs of the same client.
    known_hosts.write_text(Path(group.known_hosts_file()).read_text())
    output = client.run_command("true", stop_on_errors=False)
    client.join(output)
    assert [(o.exception, o.exit_code) for o in output] == [(None, 0)] * len(group.hosts)


@pytest.mark.parametrize("runner", ["gevent", "native"])
def test_a_host_twice_in_one_run_under_accept_new_is_added_once(group, tmp_path, runner):
    """The first of the two logins adds the key; the second, in the same run, sees the
    file it changed and finds the key there."""
    known_hosts = tmp_path / "known_hosts"
    host = group.hosts[0]
    client = ParallelSSHClient([host, host], port=group.port, user=group.servers[0].user,
                               pkey=str(group.keys.private()), allow_agent=False,
                               identity_auth=False, timeout=30, runner=runner,
                               known_hosts=str(known_hosts), host_key_policy="accept-new")
    output = client.run_command("true")
    client.join(output)
    assert [o.exit_code for o in output] == [0, 0]
    lines = known_hosts.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[{host}]:{group.port} "), lines


@pytest.mark.parametrize("runner", ["gevent", "native"])
def test_a_key_revoked_during_a_run_is_refused_by_the_next_check(group, tmp_path, runner):
    """Another login of the run looked at known_hosts when the key was still trusted;
    then another thread marks it ``@revoked`` (as an administrator would). The next host
    key check must see that, not the status the run looked at."""
    server = group.servers[0]
    path = tmp_path / "known_hosts"
    path.write_text(server.known_hosts_lines())
    with freshness.logins():   # a run's span, still open (another host logging in)
        assert core_known_hosts.load(str(path)).entries_for(f"[{server.address}]:{group.port}")
        revoked = "".join(f"@revoked * {' '.join(line.split()[1:3])}\n"
                          for line in server.known_hosts_lines().splitlines())
        writer = threading.Thread(target=lambda: path.write_text(path.read_text() + revoked))
        writer.start()
        writer.join()
        with pytest.raises(exc.HostKeyRevokedError):
            SSHClient(server.address, port=group.port, user=server.user,
                      pkey=str(group.keys.private()), allow_agent=False, identity_auth=False,
                      timeout=30, num_retries=1, runner=runner, known_hosts=str(path),
                      host_key_policy="strict")


def test_a_span_ended_in_another_thread_ends_where_it_began(tmp_path):
    """A log-in's span can end in another thread (a coroutine closed there by the garbage
    collector): the span of the thread it began in ends, and the other thread's looks stay
    its own, afresh each time."""
    path = tmp_path / "file"
    path.write_text("a")
    span = freshness.logins()
    span.__enter__()
    sizes = []

    def end_then_look():
        span.__exit__(None, None, None)
        sizes.append(freshness.stat(str(path)).st_size)
        path.write_text("ab")
        sizes.append(freshness.stat(str(path)).st_size)

    ender = threading.Thread(target=end_then_look)
    ender.start()
    ender.join()
    assert sizes == [1, 2]
    assert freshness.stat(str(path)).st_size == 2   # this thread's span ended too
    path.write_text("abc")
    assert freshness.stat(str(path)).st_size == 3
