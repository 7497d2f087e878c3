"""``pssh poll`` driven as a subprocess against real sshd hosts (``--embedded``) and a real
influxd: JSON lines, signals that flush and exit 143/130, sharding over worker processes
and Dask, usage errors.

Deadlines here only catch hangs; no timing is asserted.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from benchmarks.servers import InfluxDB1
from pssh.fanout.process import WORKER_MODULE
from conftest import RUN_MODES
from loopback import address, addresses
from processes import children_running
from pssh.sshd import ServerGroup
from test_cli import ENV, conn
from test_poll_engine import HANG, wait_until

LOAD = "load:loadavg=cat /proc/loadavg"
REFUSED = address()  # nobody listens there
# Every option gives the same result in every mode: one process, worker processes, Dask.
# The Dask mode's cluster is the module's (conftest's mode_options);
# test_scheduler_local_dask_workers_poll_every_host starts one of its own.
MODES = pytest.mark.parametrize("mode", list(RUN_MODES), scope="module")
# One number, after 1.5 s on 127.0.0.2 only (the server address of the SSH connection).
SLOW_ON_2 = 'work=case "$SSH_CONNECTION" in *" 127.0.0.2 "*) sleep 1.5;; esac; echo 1'


def pssh_poll(*args, timeout=HANG):
    return subprocess.run([sys.executable, "-m", "pssh", "poll", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def start(*args):
    # Input not from a terminal: one SIGINT stops it (no staged Ctrl-C).
    return subprocess.Popen([sys.executable, "-m", "pssh", "poll", *args], env=ENV, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def signalled(run, signum, when_ready):
    """Send ``signum`` once ``when_ready()`` holds; (stdout, stderr) when it has exited."""
    try:
        when_ready()
        run.send_signal(signum)
        return run.communicate(timeout=HANG)
    finally:
        run.kill()


def workers_of(pid):
    """The shard worker processes ``pid`` started that are alive (its own children only:
    no other run on this machine counts)."""
    return children_running(pid, WORKER_MODULE)


def json_lines(text):
    items = [json.loads(line) for line in text.splitlines()]
    return ([i for i in items if i["type"] == "result"],
            [i for i in items if i["type"] == "health"])


@pytest.fixture(scope="module")
def influx():
    with InfluxDB1() as server:
        yield server


def count(influx, database, measurement, field):
    """Points of ``measurement`` in ``database`` (0 before the database exists)."""
    databases = influx.query("SHOW DATABASES", database).get("series", [{}])[0]
    if [database] not in databases.get("values", []):
        return 0
    result = influx.query(f'SELECT count("{field}") FROM "{measurement}"', database)
    series = result.get("series")
    return series[0]["values"][0][1] if series else 0


def test_json_lines_parse_and_every_host_answers():
    done = pssh_poll("--embedded", "2", "--check", LOAD, "--check", "broken=exit 7",
                     "--interval", "0.5s", "--duration", "3", "--health-interval", "1",
                     "--output", "json", "--tag", "site=lab")
    assert done.returncode == 1, done.stderr  # some polls (the broken check's) failed
    results, health = json_lines(done.stdout)
    load = [r for r in results if r["check"] == "load"]
    assert {r["host"] for r in load} == {"127.0.0.1", "127.0.0.2"}
    assert all(r["status"] == "ok" and r["bucket"] == 0.5 and "load1" in r["values"]
               for r in load)
    broken = [r for r in results if r["check"] == "broken"]
    assert broken and all(r["status"] == "failed" and r["exit_code"] == 7 and
                          r["error"].startswith(r["host"] + ":") for r in broken)
    assert all(i["tags"] == {"site": "lab"} for i in results + health)
    assert health[-1]["polls"] == len(results)
    assert health[-1]["hosts_per_bucket"] == {"0.5": 4}
    assert f"pssh poll: {len(results)} polls of 2 hosts" in done.stderr


def test_deadline_bounds_each_poll_and_names_the_host():
    done = pssh_poll("--embedded", "1", "--check", "slow=sleep 2; echo 1", "--interval", "1s",
                     "--deadline", "0.3s", "--duration", "2.5", "--output", "json")
    assert done.returncode == 3, done.stderr  # no poll succeeded
    results, _ = json_lines(done.stdout)
    assert results and all(r["status"] == "timeout" and r["values"] == {} for r in results)
    assert all(r["error"].startswith("127.0.0.1:") and "within 0.3 s" in r["error"]
               for r in results)


def test_sigterm_flushes_every_point_then_exits_143(influx):
    run = start("--embedded", "2", "--check", LOAD, "--interval", "0.5s",
                "--health-interval", "1", "--influx-url", influx.url, "--influx-db", "term")
    sent = []

    def ready():
        wait_until(lambda: count(influx, "term", "ssh_poll", "load1") >= 4, what="points")
        sent.append(time.time())

    _, stderr = signalled(run, signal.SIGTERM, ready)
    assert run.returncode == 143, stderr
    assert "pssh: terminated" in stderr
    written = int(stderr.split(" points written")[0].rsplit(" ", 1)[1])
    # Every point it says it wrote is there, the last health report (written as it
    # stopped, after the signal) included: the buffer was flushed before the exit.
    assert count(influx, "term", "ssh_poll", "load1") + \
        count(influx, "term", "ssh_poll_health", "polls") == written
    last = influx.query('SELECT last("polls") FROM "ssh_poll_health"', "term")["series"][0]
    assert last["values"][0][0] > sent[0] * 1e9
    assert "dropped" not in stderr


def test_sigint_stops_with_130_and_the_last_line_is_the_final_health():
    run = start("--embedded", "1", "--check", LOAD, "--interval", "0.5s", "--output", "lp")
    first = []
    stdout, stderr = signalled(run, signal.SIGINT,
                               lambda: first.append(run.stdout.readline()))  # polling began
    assert first[0].startswith("ssh_poll,")
    assert run.returncode == 130, stderr
    assert "pssh: interrupted" in stderr
    lines = [first[0], *stdout.splitlines()]
    assert lines[-1].startswith("ssh_poll_health ")
    assert all(line.startswith("ssh_poll,bucket=") for line in lines[:-1])


def test_processes_2_poll_every_host_each_shard_keeping_its_bucket_state():
    run = start("--embedded", "3", "--check", SLOW_ON_2, "--buckets", "1s,4s",
                "--duration", "9", "--health-interval", "1", "--processes", "2",
                "--output", "json")
    try:
        wait_until(lambda: len(workers_of(run.pid)) == 2, what="two worker processes")
        stdout, stderr = run.communicate(timeout=HANG)
    finally:
        run.kill()
    assert run.returncode == 1, stderr  # the slow host's first poll timed out
    assert workers_of(run.pid) == []
    results, health = json_lines(stdout)
    by_host = {h: [r for r in results if r["host"] == h]
               for h in ("127.0.0.1", "127.0.0.2", "127.0.0.3")}
    assert all(by_host.values()), {h: len(r) for h, r in by_host.items()}
    for host in ("127.0.0.1", "127.0.0.3"):  # fast: always in the fastest bucket
        assert all(r["bucket"] == 1 and r["status"] == "ok" for r in by_host[host])
    slow = by_host["127.0.0.2"]  # too slow for 1 s: moved to 4 s at once, and stays
    assert slow[0]["bucket"] == 1 and slow[0]["status"] == "timeout"
    assert slow[1:] and all(r["bucket"] == 4 and r["status"] == "ok" for r in slow[1:])
    # The fleet's health adds up the shards'.
    assert health[-1]["hosts_per_bucket"] == {"1": 2, "4": 1}
    assert health[-1]["polls"] == len(results)
    missed = sum(round((b["time"] - a["time"]) / b["bucket"]) - 1
                 for rs in by_host.values() for a, b in zip(rs, rs[1:]))
    assert health[-1]["skipped"] >= missed


def test_a_worker_process_that_dies_is_started_again_and_its_hosts_polled():
    run = start("--embedded", "2", "--check", LOAD, "--interval", "0.5s", "--processes", "2",
                "--health-interval", "0.5", "--output", "json")
    printed = []  # its JSON lines as they come (read beside the test, below)
    killed = []

    def read_stdout() -> None:
        for line in run.stdout:
            printed.append(json.loads(line))

    def tally(items: list, since: float = 0.0) -> list:
        """How many results of each host ``items`` hold (polled after ``since``)."""
        hosts = [i["host"] for i in items if i["type"] == "result" and i["time"] > since]
        return [hosts.count(host) for host in ("127.0.0.1", "127.0.0.2")]

    def counted() -> bool:
        """The victim, whichever it is, has counted polls in the fleet's health.

        The fleet's health adds up each shard's latest report, which may lag that shard's
        printed results by a poll: reports and polls share the 0.5 s period, so their phases
        can lock, and a health line counting every poll printed before it then comes in
        only a few ticks in a hundred, or none (a run failed so). Each shard here has one
        host. A line counting all but two of the results printed before it, each host
        having three, shows both shards' reports: a shard that had reported none would
        leave out all of its host's results, three or more."""
        items = list(printed)
        return any(h["type"] == "health" and min(tally(items[:p])) >= 3
                   and h["polls"] >= sum(tally(items[:p])) - 2 for p, h in enumerate(items))

    def kill_one_and_wait_for_its_successor():
        wait_until(lambda: len(workers_of(run.pid)) == 2, what="two worker processes")
        wait_until(counted, what="both hosts' polls counted in the fleet's health")
        victim = workers_of(run.pid)[0]
        os.kill(victim, signal.SIGKILL)
        killed.append(time.time())
        wait_until(lambda: len(workers_of(run.pid)) == 2 and victim not in workers_of(run.pid),
                   what="a new worker process")
        wait_until(lambda: min(tally(list(printed), since=killed[0])) >= 2,
                   what="both hosts polled twice since the kill")

    reader = threading.Thread(target=read_stdout)
    reader.start()
    try:
        kill_one_and_wait_for_its_successor()
        run.send_signal(signal.SIGTERM)
        run.wait(HANG)
        reader.join(HANG)
        stderr = run.stderr.read()
    finally:
        run.kill()
        run.wait()
        reader.join(HANG)
        run.stdout.close()
        run.stderr.close()
    stdout = "".join(json.dumps(item) + "\n" for item in printed)
    assert run.returncode == 143, stderr
    assert "was killed by signal 9; started again" in stderr
    results, health = json_lines(stdout)
    assert {r["host"] for r in results if r["time"] > killed[0]} == {"127.0.0.1", "127.0.0.2"}
    # The fleet's counters since the start keep what the dead worker had counted.
    for counter in ("polls", "late", "skipped", "reconnects", "dropped"):
        counts = [h[counter] for h in health]
        assert counts == sorted(counts), (counter, counts)


def test_processes_with_a_database_that_never_answers_end_and_count_what_they_dropped():
    # A listening socket nobody reads: the write requests connect and wait for an answer
    # that never comes. --flush-timeout bounds the wait at the end (here as without
    # --processes), then what is left is dropped and counted.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        run = start("--embedded", "2", "--check", LOAD, "--interval", "0.5s",
                    "--duration", "3", "--processes", "2", "--flush-timeout", "1",
                    "--influx-url", f"http://127.0.0.1:{silent.getsockname()[1]}",
                    "--influx-db", "never")
        try:
            stdout, stderr = run.communicate(timeout=HANG)
        finally:
            run.kill()
    assert run.returncode == 0, stderr
    assert workers_of(run.pid) == []
    summary = stderr.strip().splitlines()[-1]
    polls, written, dropped = (int(n) for n in re.match(
        r"pssh poll: (\d+) polls of 2 hosts \(\d+ ok\); (\d+) points written, (\d+) dropped",
        summary).groups())
    assert polls > 0 and written == 0 and dropped > polls  # every result and health point
    assert "points not sent at close" in stderr


def test_scheduler_local_dask_workers_poll_every_host():
    done = pssh_poll("--embedded", "2", "--check", LOAD, "--interval", "1s", "--duration", "4",
                     "--scheduler", "local:2", "--output", "json", timeout=180)
    assert done.returncode == 0, done.stderr
    results, health = json_lines(done.stdout)
    assert {r["host"] for r in results} == {"127.0.0.1", "127.0.0.2"}
    assert all(r["status"] == "ok" for r in results)
    assert health[-1]["polls"] == len(results)
    assert done.stderr.count("\n") <= 2  # Dask's own chatter is not shown without -v


@pytest.mark.parametrize("args, message", [
    (["--embedded", "1"], "no check given"),
    (["--embedded", "1", "--check", "x:nosuchparser=true"], "unknown parser"),
    (["--embedded", "1", "--check", "no command"], "NAME=COMMAND"),
    (["--embedded", "1", "--check", "a=true", "--check", "a=false"], "used twice"),
    (["--embedded", "1", "--check", "a=true", "--interval", "5s", "--upgrade", "count:2"],
     "--upgrade is for --buckets"),
    (["--embedded", "1", "--check", "a=true", "--buckets", "10s,5s"], "increase"),
    (["--embedded", "1", "--check", "a=true", "--upgrade", "sometimes"], "--upgrade"),
    (["--embedded", "1", "--check", "a=true", "--upgrade", "time:soon"], "time:DURATION"),
    (["--embedded", "1", "--check", "a=true", "--duration", "soon"], "not a duration"),
    (["--embedded", "1", "--check", "a=true", "--influx-url", "http://127.0.0.1:1"],
     "needs --influx-db"),
    (["--embedded", "1", "--check", "a=true", "--influx-db", "x"], "need --influx-url"),
    (["--embedded", "1", "--check", "a=true", "--influx-url", "http://127.0.0.1:1",
      "--influx-token", "t"], "--influx-org"),
    (["--embedded", "1", "--check", "a=true", "--interval", "1s", "--buckets", "1s,2s"],
     "not allowed with"),
    (["--check", "a=true"], "no hosts given"),
])
def test_usage_errors_are_one_line_and_exit_2(args, message):
    done = pssh_poll(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Try 'pssh poll --help'" in done.stderr
    assert "starting" not in done.stderr  # refused before any host was started


def test_help_lists_the_options_and_examples():
    done = subprocess.run([sys.executable, "-m", "pssh", "poll", "--help"],
                          capture_output=True, text=True, timeout=HANG, env=ENV)
    assert done.returncode == 0
    for text in ("--check", "--buckets", "--interval", "--upgrade", "--influx-bucket",
                 "--processes", "--scheduler", "--duration", "--health-interval",
                 "examples:", "exit status"):
        assert text in done.stdout
    # No letter means something else than in pssh run.
    for letter in ("-p", "-t", "-o", "-e", "-i", "-b"):
        assert f" {letter}," not in done.stdout and f" {letter} " not in done.stdout


def test_output_closed_by_its_reader_stops_the_run():
    # As `pssh poll ... | head -2`: the reader goes after two lines.
    run = start("--embedded", "1", "--check", LOAD, "--interval", "0.2s")
    lines = [run.stdout.readline(), run.stdout.readline()]
    run.stdout.close()
    stderr = run.stderr.read()
    assert run.wait(HANG) == 1, stderr
    assert all(line.startswith("ssh_poll,") for line in lines)
    assert "standard output was closed by its reader: stopping" in stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


def test_help_and_usage_parse_before_anything_heavy_is_loaded():
    probe = ("import sys\nfrom pssh.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('gevent', 'rich', 'pssh.clients', 'pssh.poll')"
             " if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, "poll", "--help"], capture_output=True,
                          text=True, timeout=HANG, env=ENV)
    assert "usage: pssh poll" in done.stdout
    assert done.stderr.strip().endswith("[]")
    # A usage error found by parsing the checks and buckets loads no poller either.
    done = subprocess.run([sys.executable, "-c", probe, "poll", "-H", "127.0.0.1", "--check",
                           "load=uptime", "--buckets", "nonsense"], capture_output=True,
                          text=True, timeout=HANG, env=ENV)
    assert "pssh poll" in done.stderr and "nonsense" in done.stderr
    assert "'gevent'" not in done.stderr and "'pssh.clients'" not in done.stderr


def test_a_shard_holds_a_bounded_backlog_and_counts_what_it_drops():
    from pssh.poll import Health, PollResult
    from pssh.fanout.poll import Outbox
    from pssh.poll.shards import partition
    outbox = Outbox(bound=2)
    for host in ("a", "b", "c"):
        outbox.put(PollResult(host, 22, "load", {}, 1.0, 1.0, 0.1, 10.0, "ok"))
    outbox.put(Health(2.0, 3, 1.0, 0, 0.0, {10.0: 3}, dropped=0))
    assert [r.host for r in outbox.take()] == ["a", "b"] and outbox.dropped == 2
    outbox.put(Health(3.0, 3, 1.0, 0, 0.0, {10.0: 3}))
    assert outbox.take()[0].dropped == 2  # the shard's drops reach the fleet's health
    assert partition(5, 2) == [[0, 2, 4], [1, 3]] and partition(1, 4) == [[0]]


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


@MODES
def test_a_check_that_never_parses_is_said_once_counted_and_exits_3(mode_options):
    # /proc/loadavg is five words: the default parser wants one number, on every poll.
    done = pssh_poll("--embedded", "2", "--check", "load=cat /proc/loadavg", "--interval",
                     "0.5s", "--duration", "3", "--output", "json", *mode_options, timeout=180)
    assert done.returncode == 3, done.stderr
    results, health = json_lines(done.stdout)
    assert results and all(r["status"] == "failed" for r in results)
    said = [line for line in done.stderr.splitlines() if "expected one number" in line]
    # Said as it happened, once for both hosts; then counted in the summary.
    assert len(said) == 2, done.stderr
    assert said[0].startswith("pssh poll: 127.0.0.") and "check load: cannot parse the " \
        "output: expected one number, got '" in said[0] and "not shown" in said[0]
    assert said[1] == (f"  {len(results)} polls on 2 hosts: check load failed: cannot parse "
                       f"the output: expected one number")
    assert f"pssh poll: {len(results)} polls of 2 hosts ({len(results)} failed); " \
        in done.stderr
    assert "  no poll succeeded" in done.stderr
    assert health[-1]["polls_failed"] == len(results) and health[-1]["polls_ok"] == 0


@MODES
def test_a_host_down_is_said_once_named_in_the_summary_and_the_exit_is_1(group, tmp_path,
                                                                          mode_options):
    # 8 s: room for a worker to start and log in on a loaded machine (beside a CPU burner,
    # 3 s once saw no poll of the live host at all; the exit was then 3, not 1).
    done = pssh_poll("-H", f"{group.hosts[0]} {REFUSED}", *conn(group, tmp_path),
                     "--check", "one=echo 1", "--check", "two=echo 2", "--interval", "0.5s",
                     "--duration", "8", "--output", "json", *mode_options, timeout=180)
    assert done.returncode == 1, done.stderr  # some polls succeeded, some did not
    results, health = json_lines(done.stdout)
    ok = [r for r in results if r["status"] == "ok"]
    down = [r for r in results if r["status"] == "down"]
    assert {r["host"] for r in ok} == {group.hosts[0]}
    assert {r["host"] for r in down} == {REFUSED} and len(ok) + len(down) == len(results)
    # Down is the host's, not a check's: one line for both checks, said once.
    said = [line for line in done.stderr.splitlines() if "is down" in line]
    assert said == [f"pssh poll: {REFUSED}:{group.port} is down: cannot connect: Connection "
                    f"refused (repeats are counted in the summary, not shown)"], done.stderr
    assert f"pssh poll: {len(results)} polls of 2 hosts ({len(ok)} ok, {len(down)} down); " \
        in done.stderr
    assert f"  {len(down)} polls on 1 host: host down: cannot connect: Connection refused" \
        in done.stderr.splitlines()
    assert f"  1 of 2 hosts down at the end: {REFUSED}" in done.stderr.splitlines()
    assert (health[-1]["polls_ok"], health[-1]["polls_down"]) == (len(ok), len(down))
    assert health[-1]["hosts_down"] == 1


@MODES
def test_upgrade_time_moves_a_host_back_up_after_fast_answers_for_that_long(tmp_path, mode_options):
    from pssh.poll import Buckets
    slow = tmp_path / "slow"
    slow.write_text("0.8\n")  # past 0.5 s, in time for 1.5 s
    run = start("--embedded", "2", "--check", f"work=sleep $(cat {slow}); echo 1",
                "--buckets", "0.5s,1.5s", "--upgrade", "time:3s", "--output", "json", *mode_options)
    seen = []
    watchdog = threading.Timer(HANG, run.kill)  # a rule that never moves it: no hang
    watchdog.start()

    def read_until(condition):
        while not condition():
            line = run.stdout.readline()
            assert line, "pssh poll ended"
            item = json.loads(line)
            if item["type"] == "result":
                seen.append(item)

    def back_up():
        read_until(lambda: any(r["bucket"] == 1.5 and r["status"] == "ok" for r in seen))
        slow.write_text("0\n")
        read_until(lambda: {r["host"] for r in seen if r["bucket"] == 0.5
                            and any(s["bucket"] == 1.5 and s["host"] == r["host"]
                                    for s in seen[:seen.index(r)])} == {"127.0.0.1",
                                                                         "127.0.0.2"})

    try:
        stdout, stderr = signalled(run, signal.SIGTERM, back_up)
    finally:
        watchdog.cancel()
    assert run.returncode == 143, stderr
    seen += json_lines(stdout)[0]
    buckets = Buckets.parse("0.5s,1.5s", "time:3s")
    for host in ("127.0.0.1", "127.0.0.2"):
        mine = [r for r in seen if r["host"] == host]
        state = buckets.state()  # the rule replayed over what the run reported
        for r in mine:
            assert r["bucket"] == state.interval, (r, state)
            state.observe(r["response_time"], r["status"] == "ok", r["status"] == "down",
                          at=r["time"])
        up = next(i for i, r in enumerate(mine) if i and r["bucket"] == 0.5
                  and mine[i - 1]["bucket"] == 1.5)
        fast = [r["status"] == "ok" and r["response_time"] <= 0.5 for r in mine[:up]]
        first = len(fast) - fast[::-1].index(False)  # the run of fast answers that earned it
        assert mine[up - 1]["time"] - mine[first]["time"] >= 3 - 1e-3


def test_failures_are_one_kind_whatever_the_host_output_or_next_attempt():
    from pssh.cli.poll_feedback import kind_of
    from pssh.poll import PollResult

    def failed(host, status, error, check="load"):
        return kind_of(PollResult(host, 22, check, {}, 1.0, 1.0, 0.1, 10.0, status, error))
    parse = "cannot parse the output: expected one number, got"
    assert failed("a", "failed", f"a:22: check load: {parse} '1 2'") == \
        failed("web7", "failed", f"web7:22: check load: {parse} '3 4'") == \
        ("failed", "load", "cannot parse the output: expected one number")
    assert failed("a", "failed", "a:22: check load: exit status 3: no a here") == \
        ("failed", "load", "exit status 3")
    # A host down is the host's: one kind for all its checks, whatever the name it failed.
    assert failed("x.invalid", "down", "x.invalid:22: cannot resolve x.invalid; next "
                  "connection attempt in 1.0 s", check="one") == \
        failed("y.invalid", "down", "y.invalid:22: cannot resolve y.invalid", check="two") == \
        ("down", None, "cannot resolve HOST")
