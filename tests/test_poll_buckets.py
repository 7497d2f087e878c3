"""The adaptive bucket rule (Roquero & Aracil 2021), as pure logic: no I/O, no clock."""
import pytest

from pssh.poll import Buckets, Upgrade, parse_duration
from pssh.poll.buckets import spread

FOUR = Buckets((10, 20, 60, 100), Upgrade.parse("count:3"))


def test_durations():
    assert parse_duration("10s") == 10 and parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120 and parse_duration("1h") == 3600
    assert parse_duration("1.5") == 1.5 and parse_duration(7) == 7.0
    for bad in ("", "ten", "-1s", "0", "5 parsecs"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_parse_buckets_and_upgrades():
    buckets = Buckets.parse("10s,20s,60s,100s", "dynamic:2..10")
    assert buckets.intervals == (10.0, 20.0, 60.0, 100.0)
    assert buckets.upgrade == Upgrade(2, 10, dynamic=True) and buckets.adaptive
    assert Buckets.parse("500ms, 1s").upgrade == Upgrade(3, 3, False)
    assert str(Buckets.parse("1s,2s", "count:4")) == "1s,2s count:4"
    fixed = Buckets.fixed("30s")
    assert fixed.intervals == (30.0,) and not fixed.adaptive


@pytest.mark.parametrize("text", ["20s,10s", "10s,10s", ""])
def test_buckets_must_increase(text):
    with pytest.raises(ValueError):
        Buckets.parse(text)


@pytest.mark.parametrize("text, seconds", [("time:10m", 600), ("time:30s", 30),
                                           ("time:1h", 3600), ("time:45", 45)])
def test_parse_the_time_upgrade_rule(text, seconds):
    upgrade = Upgrade.parse(text)
    assert upgrade.seconds == seconds and upgrade == Upgrade.after(seconds)
    assert str(Buckets.parse("1s,2s", text)) == f"1s,2s time:{seconds}s"


@pytest.mark.parametrize("text", ["count:0", "count:x", "dynamic:5..2", "dynamic:3", "often",
                                  "time:", "time:0", "time:-5s", "time:soon", "time:2..4"])
def test_bad_upgrade_rules(text):
    with pytest.raises(ValueError):
        Upgrade.parse(text)


def test_every_host_starts_in_the_fastest_bucket():
    assert FOUR.state().interval == 10


def test_a_slow_answer_moves_down_one_bucket_at_once():
    state = FOUR.state()
    assert state.observe(10.0, ok=True) is False  # exactly the interval: in time
    assert state.observe(10.5, ok=True) is True
    assert state.interval == 20
    assert state.observe(61.0, ok=True) is True  # one bucket per poll, however slow
    assert state.interval == 60


def test_failures_and_timeouts_move_down_too_and_the_slowest_is_the_floor():
    state = FOUR.state()
    for expected in (20, 60, 100, 100):
        state.observe(0.1, ok=False)
        assert state.interval == expected


def test_upgrade_one_bucket_after_count_fast_answers_in_a_row():
    state = FOUR.state()
    state.observe(30, ok=True)
    state.observe(70, ok=True)
    assert state.interval == 60
    # Fast enough for 20 s (and even for 10 s): counts, but moves up one bucket only.
    assert [state.observe(1.0, ok=True) for _ in range(3)] == [False, False, True]
    assert state.interval == 20
    assert [state.observe(1.0, ok=True) for _ in range(3)] == [False, False, True]
    assert state.interval == 10
    assert state.observe(1.0, ok=True) is False and state.interval == 10


def test_an_answer_too_slow_for_the_faster_bucket_restarts_the_run():
    state = FOUR.state()
    state.observe(15, ok=True)  # -> 20
    state.observe(5, ok=True)
    state.observe(5, ok=True)
    state.observe(15, ok=True)  # in time for 20 s, not for 10 s
    assert state.fast == 0
    state.observe(5, ok=True)
    state.observe(5, ok=True)
    assert state.interval == 20
    state.observe(5, ok=True)
    assert state.interval == 10


def test_dynamic_count_reset_on_downgrade_and_grown_while_slow():
    buckets = Buckets((1, 2, 4), Upgrade.parse("dynamic:2..5"))
    state = buckets.state()
    assert state.count == 2
    state.observe(1.5, ok=True)  # -> 2 s bucket, count reset to 2
    assert (state.interval, state.count) == (2, 2)
    for expected in (3, 4, 5, 5):  # each round too slow for 1 s: +1, up to the maximum
        state.observe(1.5, ok=True)
        assert state.count == expected and state.interval == 2
    # Now it takes 5 fast answers in a row to earn the upgrade.
    moves = [state.observe(0.5, ok=True) for _ in range(5)]
    assert moves == [False] * 4 + [True] and state.interval == 1
    assert state.count == 5  # an upgrade keeps the count; the next downgrade resets it
    state.observe(3, ok=True)
    assert (state.interval, state.count) == (2, 2)


def test_dynamic_count_grows_in_the_slowest_bucket_while_still_too_slow():
    state = Buckets((1, 2), Upgrade.parse("dynamic:1..3")).state()
    state.observe(5, ok=True)  # -> 2 s, count 1
    state.observe(5, ok=True)  # still too slow, nowhere slower to go: a slow round
    assert (state.interval, state.count) == (2, 2)


def test_time_rule_moves_up_after_fast_answers_for_the_duration_one_bucket_at_a_time():
    state = Buckets((10, 20, 60), Upgrade.parse("time:50s")).state()
    state.observe(30, ok=True, at=0)
    state.observe(70, ok=True, at=20)
    assert state.interval == 60
    # Fast enough for 20 s: the run starts at the first such answer (due at 80) and earns
    # the upgrade at the first answer due 50 s or more after it (a poll every 60 s here).
    assert [state.observe(1.0, ok=True, at=t) for t in (80, 140)] == [False, True]
    assert state.interval == 20
    # In the 20 s bucket a new run starts: 50 s of fast answers again, one bucket up.
    moves = [state.observe(1.0, ok=True, at=t) for t in (160, 180, 200, 220)]
    assert moves == [False, False, False, True] and state.interval == 10


def test_time_rule_run_restarts_on_an_answer_too_slow_for_the_faster_bucket():
    state = Buckets((10, 20), Upgrade.parse("time:30s")).state()
    state.observe(15, ok=True, at=0)               # -> 20 s
    state.observe(5, ok=True, at=20)
    state.observe(15, ok=True, at=40)              # in time for 20 s, not for 10 s
    assert state.since is None and state.interval == 20
    assert [state.observe(5, ok=True, at=t) for t in (60, 80, 100)] == [False, False, True]
    # A failure or a down host restarts it too (and downgrades).
    state.observe(None, ok=False, down=True, at=110)
    assert state.since is None and state.interval == 20


def test_time_rule_needs_the_poll_times():
    state = Buckets((1, 2), Upgrade.parse("time:5s")).state()
    state.observe(1.5, ok=True, at=0)
    with pytest.raises(ValueError, match="at="):
        state.observe(0.5, ok=True)


def test_a_down_host_goes_to_the_slowest_bucket_and_climbs_back_by_the_rule():
    state = FOUR.state()
    assert state.observe(None, ok=False, down=True) is True
    assert state.interval == 100 and state.down
    state.observe(None, ok=False, down=True)
    assert state.interval == 100
    state.observe(0.1, ok=True)  # it answers: the first of the fast answers in a row
    assert not state.down and state.interval == 100
    for expected in (100, 60):
        state.observe(0.1, ok=True)
        assert state.interval == expected


def test_fixed_buckets_never_move():
    state = Buckets.fixed(10).state()
    for outcome in [(50, True, False), (None, False, True), (0.1, True, False)]:
        assert state.observe(*outcome) is False
        assert state.interval == 10
    not_adaptive = Buckets((1, 2), adaptive=False).state()
    not_adaptive.observe(5, ok=True)
    assert not_adaptive.interval == 1


def test_first_polls_spread_over_the_interval():
    offsets = spread(4, 10.0, [0.5] * 4)
    assert offsets == [1.25, 3.75, 6.25, 8.75]
    assert all(0 <= o < 10 for o in spread(1000, 10.0, [0.999] * 1000))


def test_reconnection_backoff_doubles_with_jitter_up_to_its_maximum():
    from pssh.poll.sessions import Backoff
    low, high = Backoff(1.0, 8.0, rng=lambda: 0.0), Backoff(1.0, 8.0, rng=lambda: 0.999999)
    assert [low.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [round(high.next_delay(), 3) for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    low.reset()
    assert low.next_delay() == 0.5
    with pytest.raises(ValueError):
        Backoff(2.0, 1.0)
