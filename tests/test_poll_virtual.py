"""The poller's schedule on virtual time (pssh.runners.virtual): bucket moves by each upgrade
rule, late polls, skipped rounds, health reports, reconnection backoff, stopping.

The poller runs as it does in production, its procedures driven by a VirtualRunner
instead of gevent. Hosts are scripted (a connector of the test's, the seam
``Poller(connector=...)``): each poll takes the virtual seconds the script says, or
misses its deadline, or finds its host down. So every time is exact: the tests assert
the virtual times polls were due and started at, which are behaviours of the
schedule, not timings of the machine. The last test polls real sshd hosts on virtual
time through the default connector.
"""
from collections import Counter

import pytest

from pssh import exceptions as exc
from pssh.core import clock
from pssh.core.waits import Sleep
from pssh.poll import (Buckets, Check, CommandOutput, HostDown, Poller, PollTimeout, key_value,
                       loadavg)
from pssh.poll.health import LATE_FRACTION
from pssh.poll.sinks import encode_line
from pssh.runners.virtual import VirtualClock, VirtualRunner
from pssh.sshd import ServerGroup
from loopback import addresses
from test_poll_engine import settings

#: The time of day at virtual zero: a result's time is WALL + its virtual due time.
WALL = 1_000_000.0
PORT = 22


def at(item):
    """When a result was due (or a health report made), in virtual seconds (rounded off
    to the microsecond: sums of intervals are not exact in binary)."""
    return round(item.time - WALL, 6)


def began(result):
    return round(result.started - WALL, 6)


class Fleet:
    """Scripted hosts (the poller's connector). ``answers[host]``: the virtual seconds each
    poll takes, in order (the last one for ever after); a time past the poll's deadline is
    a timeout at the deadline. A host in ``down`` refuses connections; one in ``crashing``
    loses its connection at its next poll; ``attempts``: when each connection was tried,
    per host; ``cancelled``: the polls stopped while they ran (host, when)."""

    def __init__(self, answers=None, output="1\n"):
        self.answers = dict(answers or {})
        self.output = output
        self.down = set()
        self.attempts = {}
        self.polled = Counter()
        self.crashing = set()
        self.cancelled = []

    def connect(self, session):
        self.attempts.setdefault(session.host, []).append(clock.now())
        if session.host in self.down:
            raise exc.ConnectionRefused(111, "Connection refused", session.host, PORT)
        yield Sleep(0)   # logged in at once: a poll's time is its command's
        return ScriptedConnection(self, session.host)

    def took(self, host):
        script = self.answers.get(host, [0.1])
        n = self.polled[host]
        self.polled[host] += 1
        return script[min(n, len(script) - 1)]


class ScriptedConnection:
    """A scripted host's connection (a :class:`pssh.poll.Connection`)."""

    def __init__(self, fleet, host):
        self.fleet, self.host = fleet, host
        self.lost = None

    def run(self, command, timeout, encoding):
        took = self.fleet.took(self.host)
        try:
            if self.host in self.fleet.crashing:
                self.fleet.crashing.discard(self.host)
                self.lost = "connection lost: reset by peer"
                raise HostDown.at(self.host, PORT, self.lost)
            if took > timeout:
                yield Sleep(timeout)
                raise PollTimeout.at(self.host, PORT, f"no answer within {timeout:g} s")
            yield Sleep(took)
        except BaseException as err:
            if not isinstance(err, Exception):   # cancelled: the poller is stopping
                self.fleet.cancelled.append((self.host, clock.now()))
            raise
        return CommandOutput(0, self.fleet.output, "", took)

    def close(self):
        self.lost = self.lost or "closed"


def poller_of(fleet, hosts, checks=None, polls=None, **kwargs):
    """A poller of ``hosts`` on ``fleet``, keeping its results (``poller.results``) and
    health reports (``poller.reports``); with ``polls``, it stops itself after that many
    results."""
    results, reports = [], []

    def on_result(result):
        results.append(result)
        if polls is not None and len(results) == polls:
            poller.stop()

    kwargs.setdefault("seed", 7)
    poller = Poller(hosts, checks or [Check("n", "echo 1")], connector=fleet.connect,
                    on_result=on_result, on_health=reports.append, **kwargs)
    poller.results, poller.reports = results, reports
    return poller


def run_virtually(poller, duration=None):
    runner = VirtualRunner(clock=VirtualClock(wall_start=WALL))
    poller.run(duration, runner=runner)
    return runner.clock.now()


def schedule(results):
    """``(due, bucket, status, response time)`` of each result, due times from the
    first result's."""
    zero = at(results[0])
    return [(round(at(r) - zero, 6), r.bucket, r.status, round(r.response_time, 6))
            for r in results]


# -- the upgrade rules ----------------------------------------------------------------------

def test_a_slow_answer_moves_down_at_once_and_count_fast_ones_move_back_up():
    # 0.8 s is a timeout in the 0.5 s bucket and in time for the 1.5 s one; count:2.
    fleet = Fleet({"web": [0.1, 0.1, 0.8, 0.8, 0.8, 0.1, 0.1, 0.1]})
    poller = poller_of(fleet, ["web"], buckets=Buckets.parse("0.5s,1.5s", "count:2"),
                       polls=8)
    run_virtually(poller)
    assert schedule(poller.results) == [
        (0.0, 0.5, "ok", 0.1), (0.5, 0.5, "ok", 0.1),
        (1.0, 0.5, "timeout", 0.5),       # at its deadline, and down at once:
        (2.5, 1.5, "ok", 0.8), (4.0, 1.5, "ok", 0.8),
        (5.5, 1.5, "ok", 0.1),            # fast enough for 0.5 s: one of the two
        (7.0, 1.5, "ok", 0.1),            # two in a row: back up
        (7.5, 0.5, "ok", 0.1)]
    assert all(r.started == r.time for r in poller.results)   # nothing waited
    assert "web:22" in poller.results[2].error and "within 0.5 s" in poller.results[2].error
    assert fleet.attempts["web"] == pytest.approx([at(poller.results[0])], abs=1e-6)
    assert poller.states()[("web", "n")].moves == 2


def test_the_dynamic_count_grows_while_the_host_stays_slow():
    fleet = Fleet({"web": [0.8, 0.8, 0.8, 0.8, 0.1, 0.1, 0.1, 0.1]})
    poller = poller_of(fleet, ["web"], [Check("n", "echo 1", timeout=1.4)],
                       buckets=Buckets.parse("0.5s,1.5s", "dynamic:1..3"), polls=8)
    counts = []
    on_result = poller.on_result

    def count_too(result):
        counts.append(poller.states()[("web", "n")].count)
        on_result(result)

    poller.on_result = count_too
    run_virtually(poller)
    assert schedule(poller.results) == [
        (0.0, 0.5, "ok", 0.8),            # too slow for 0.5 s: down, the count reset to 1
        (1.5, 1.5, "ok", 0.8), (3.0, 1.5, "ok", 0.8), (4.5, 1.5, "ok", 0.8),
        (6.0, 1.5, "ok", 0.1), (7.5, 1.5, "ok", 0.1),
        (9.0, 1.5, "ok", 0.1),            # the third fast one: the count had grown to 3
        (9.5, 0.5, "ok", 0.1)]
    assert counts[:4] == [1, 2, 3, 3]


def test_the_time_rule_moves_a_host_up_after_fast_answers_for_that_long():
    fleet = Fleet({"web": [0.8, 0.8, 0.1]})
    poller = poller_of(fleet, ["web"], [Check("n", "echo 1", timeout=1.4)],
                       buckets=Buckets.parse("0.5s,1.5s", "time:3s"), polls=7)
    run_virtually(poller)
    assert schedule(poller.results) == [
        (0.0, 0.5, "ok", 0.8), (1.5, 1.5, "ok", 0.8),
        (3.0, 1.5, "ok", 0.1),            # the run of fast answers starts
        (4.5, 1.5, "ok", 0.1),            # 1.5 s of it
        (6.0, 1.5, "ok", 0.1),            # 3 s: up (due times are the rule's clock)
        (6.5, 0.5, "ok", 0.1), (7.0, 0.5, "ok", 0.1)]


def test_a_host_that_is_down_goes_to_the_slowest_bucket_and_backs_off():
    """Refused connections: down at once to the slowest bucket; attempts further and
    further apart (1, 2, 4 s, ... up to 8, each drawn from [half, all] of it), the polls
    between them down at once without one; back up when it answers, and a connection
    lost later is made again at the next poll."""
    fleet = Fleet()
    fleet.down.add("web")
    poller = poller_of(fleet, ["web"], buckets=Buckets.parse("0.5s,1s", "count:1"),
                       reconnect_delay=1, reconnect_max=8)

    def on_result(result):
        results = poller.results
        results.append(result)
        if len(fleet.attempts["web"]) == 7 and "web" in fleet.down:
            fleet.down.discard("web")    # it answers from the next attempt on
        elif len(results) == 40:
            fleet.crashing.add("web")
        elif len(results) == 60:
            poller.stop()

    poller.on_result = on_result
    run_virtually(poller)
    results = poller.results
    tries = fleet.attempts["web"]
    assert len(tries) == 9   # 7 refused, the one that got in, the one after the crash
    first_ok = next(i for i, r in enumerate(results) if r.ok)
    assert all(r.status == "down" and r.bucket == (0.5 if i == 0 else 1.0)
               for i, r in enumerate(results[:first_ok]))
    assert "web:22: cannot connect" in results[0].error
    assert any("next connection attempt in" in r.error for r in results[:first_ok])
    gaps = [b - a for a, b in zip(tries, tries[1:7])]
    for n, gap in enumerate(gaps):
        full = min(8, 2 ** n)
        # Attempts are made by polls, one a second while down: a gap is the delay drawn,
        # up to the next poll.
        assert full / 2 <= gap < full + 1.0, (n, gaps)
    assert gaps[-1] >= 4   # capped at 8: never under half of it
    # Up again: the fast bucket after one fast answer (count:1), one connection.
    assert results[first_ok].bucket == 1.0 and results[first_ok + 1].bucket == 0.5
    crashed = next(i for i, r in enumerate(results) if i > first_ok and not r.ok)
    assert results[crashed].status == "down" and "reset by peer" in results[crashed].error
    # The lost connection is made again at once, by the next poll (no backoff yet).
    assert tries[-1] == pytest.approx(at(results[crashed + 1]), abs=1e-6)
    assert results[crashed + 1].ok
    assert poller.sessions["web"].connects == 2 and poller.health().reconnects == 1


# -- waiting: late polls, skipped rounds ----------------------------------------------------

def starts_follow_ends(results):
    """Each poll began when it was due or when the poll before it ended, whichever was
    later: nothing overlapped, nothing waited for nothing."""
    ordered = sorted(results, key=began)
    end = None
    for r in ordered:
        assert began(r) == pytest.approx(at(r) if end is None else max(at(r), end),
                                         abs=1e-6), r
        end = began(r) + r.response_time


def test_a_hosts_checks_take_turns_and_waiting_makes_them_late():
    fleet = Fleet({"web": [0.3]})
    poller = poller_of(fleet, ["web"], [Check("a", "echo 1"), Check("b", "echo 2")],
                       buckets=Buckets.fixed(0.5), polls=12)
    run_virtually(poller)
    results = poller.results
    starts_follow_ends(results)
    late = [r for r in results if r.late > LATE_FRACTION * 0.5]
    # 0.6 s of commands every 0.5 s on one connection: polls wait their turn.
    assert late and poller.health().late == len(late)
    assert fleet.attempts["web"] == pytest.approx([min(at(r) for r in results)], abs=1e-6)


def test_a_pool_of_one_makes_every_other_host_wait():
    fleet = Fleet({"a": [0.7], "b": [0.7]})   # 1.4 s of polls a second: some wait
    poller = poller_of(fleet, ["a", "b"], buckets=Buckets.fixed(1), workers_per_bucket=1,
                       polls=10)
    run_virtually(poller)
    starts_follow_ends(poller.results)
    assert max(r.late for r in poller.results) > 0
    assert {r.host for r in poller.results} == {"a", "b"}


def test_a_poll_longer_than_its_interval_skips_rounds_and_counts_them():
    fleet = Fleet({"web": [1.2]})
    poller = poller_of(fleet, ["web"], [Check("slow", "sleep 1.2; echo 1", timeout=5)],
                       buckets=Buckets.fixed(0.5), polls=4, health_interval=100)
    run_virtually(poller)
    zero = at(poller.results[0])
    # Each poll takes 1.2 s of a 0.5 s interval: when it ends the next round is a whole
    # interval behind or more, and is skipped (not polled twice, nor queued up).
    assert [round(at(r) - zero, 6) for r in poller.results] == [0, 1.0, 2.0, 3.5]
    assert [round(began(r) - zero, 6) for r in poller.results] == [0, 1.2, 2.4, 3.6]
    assert poller.skipped == 1 + 1 + 2   # the fourth poll stopped the run: not rescheduled
    last = poller.reports[-1]
    assert last.skipped == poller.skipped and last.polls == 4
    assert f"skipped={float(poller.skipped)}" in encode_line(last)


def test_a_hung_host_holds_only_its_own_slot():
    fleet = Fleet({"hung": [0.1, 1000], "fine": [0.1]})
    poller = poller_of(fleet, ["hung", "fine"], buckets=Buckets.parse("0.5s,1s,2s"))
    run_virtually(poller, duration=20)
    hung = [r for r in poller.results if r.host == "hung"]
    fine = [r for r in poller.results if r.host == "fine"]
    # Down a bucket at each deadline, then polled every 2 s, each poll its deadline long.
    assert [(r.bucket, r.status) for r in hung[:4]] == [
        (0.5, "ok"), (0.5, "timeout"), (1.0, "timeout"), (2.0, "timeout")]
    assert [r.response_time for r in hung[1:4]] == [0.5, 1.0, 2.0]
    assert all(r.ok and r.bucket == 0.5 and r.started == r.time for r in fine)
    assert len(fine) == 40


# -- health and stopping ---------------------------------------------------------------------

def test_health_is_reported_every_interval_and_when_stopping():
    # b: a timeout (down to 3 s), then fast answers (back up after three); seed 7 puts
    # no poll in flight at 35 s, so the last report is made right then.
    fleet = Fleet({"a": [0.1], "b": [2.5, 0.2]})
    poller = poller_of(fleet, ["a", "b"], buckets=Buckets.parse("1s,3s"), health_interval=10)
    assert run_virtually(poller, duration=35) == 35
    assert [at(h) for h in poller.reports] == [10, 20, 30, 35]
    last = poller.reports[-1]
    assert last.polls == len(poller.results) and last.hosts_per_bucket == {1.0: 2, 3.0: 0}
    # Each report's polls per second are of its own period.
    polls = [h.polls for h in poller.reports]
    periods = [10, 10, 10, 5]
    assert [h.polls_per_s for h in poller.reports] == pytest.approx(
        [(b - a) / s for a, b, s in zip([0] + polls, polls, periods)])
    assert last.polls_timeout == 1 and last.in_flight == 0


def test_stopping_waits_for_polls_in_flight_then_cancels_them():
    """A poll that would take 1000 s when the run ends at 5 s: the poller waits half of
    ``stop_timeout`` for it, then stops it (its clean-up runs), and its session closes."""
    fleet = Fleet({"slow": [1000]})
    poller = poller_of(fleet, ["slow"], [Check("n", "echo 1", timeout=2000)],
                       buckets=Buckets.fixed(1), stop_timeout=8)
    assert run_virtually(poller, duration=5) == pytest.approx(5 + 8 / 2)
    assert fleet.cancelled == [("slow", pytest.approx(9))]
    assert poller.results == [] and not poller.sessions["slow"].connected
    assert poller.reports[-1].in_flight == 0


# -- real hosts on virtual time -------------------------------------------------------------

@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


#: Real quiet (s) before the clock jumps. Here nothing waits on a server that stays
#: silent, so it costs no time: it is how long a busy machine's sshd may take to answer.
IDLE = 5.0


def test_real_hosts_polled_on_virtual_time_over_one_connection_each(group):
    """Ten minutes of polling every 30 s, two checks on each of two real sshd hosts:
    values parsed from real commands, every poll exactly on schedule, health every
    minute, one connection per host, all closed at the end."""
    checks = [Check("load", "cat /proc/loadavg", loadavg),
              Check("kv", "echo name=$(echo $SSH_CONNECTION | cut -d' ' -f3); echo n: 7",
                    parser=key_value)]
    results, reports = [], []
    hosts = group.hosts
    poller = Poller(hosts, checks, buckets=Buckets.fixed(30), on_result=results.append,
                    on_health=reports.append, health_interval=60, seed=3,
                    **settings(group))
    runner = VirtualRunner(idle=IDLE, clock=VirtualClock(wall_start=WALL))
    poller.run(610, runner=runner)
    for host in hosts:
        for check in checks:
            mine = [r for r in results if r.host == host and r.check == check.name]
            assert all(r.ok for r in mine), mine
            dues = [at(r) for r in mine]
            # Due every 30 s from a first poll in the first interval, to the end.
            assert dues[0] < 30 and dues[-1] + 30 >= 610
            assert [b - a for a, b in zip(dues, dues[1:])] == pytest.approx(
                [30] * (len(dues) - 1))
        load = next(r for r in results if r.host == host and r.check == "load")
        assert set(load.values) == {"load1", "load5", "load15", "running", "total"}
        assert {r.values["name"] for r in results if r.host == host and r.check == "kv"} \
            == {host}
        assert poller.sessions[host].connects == 1
    assert [at(h) for h in reports] == [60 * k for k in range(1, 11)] + [610]
    assert reports[-1].polls == len(results) and reports[-1].polls_ok == len(results)
    assert not any(s.connected for s in poller.sessions.values())

