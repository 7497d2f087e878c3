"""The poller's outputs against real servers: InfluxDB 1.x (influxd) and the InfluxDB 2.x
write API (VictoriaMetrics), fed by a real poll of real sshd hosts; a database stopped
mid-run and started again; a destination that blocks; bounded flush and close.

Deadlines here only catch hangs; no timing is asserted.
"""
import json
import logging
import os
import time

import gevent
import pytest

from benchmarks.servers import InfluxDB1, VictoriaMetrics
from pssh.poll import Buckets, Check, Health, Poller, PollResult, loadavg
from pssh.poll.line_protocol import STATE_CODES, line
from pssh.poll.sinks import (InfluxDB1Sink, InfluxDB2Sink, JSONLinesSink, LineProtocolSink,
                             as_json, encode_line)
from loopback import addresses
from pssh.sshd import ServerGroup, free_port
from processes import in_syscall
from test_poll_engine import HANG, settings, wait_until
from waiting import eventually



@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


@pytest.fixture(scope="module")
def influx():
    with InfluxDB1() as server:
        yield server


def poll(group, sinks, seconds, interval="0.5s", **kwargs):
    """Poll the group's hosts (load average and a failing check) for ``seconds``."""
    results, health = [], []
    checks = [Check("load", "cat /proc/loadavg", loadavg), Check("broken", "exit 3")]
    poller = Poller(group.hosts, checks, buckets=Buckets.fixed(interval), sinks=sinks,
                    on_result=results.append, on_health=health.append, health_interval=0.5,
                    **settings(group), **kwargs)
    poller.run(seconds)
    return results, health


def result(host="h1", values=None, status="ok", when=None, **kwargs):
    now = time.time() if when is None else when
    return PollResult(host, 22, "load", {"load1": 0.5} if values is None else values, now,
                      now + 0.25, 0.125, 10.0, status, **kwargs)


def test_line_protocol_escapes_and_types():
    point = line("m e,x", {"host": "a b,c=d", "empty": ""}, {"n": 1, "f": 0.5, "s": 'say "hi"\\',
                                                           "b": True, "nan": float("nan")}, 7)
    assert point == r'm\ e\,x,host=a\ b\,c\=d n=1.0,f=0.5,s="say \"hi\"\\",b=true 7'
    with pytest.raises(ValueError, match="no field"):
        line("m", {}, {"nan": float("nan")}, 1)
    text = encode_line(result(values={"load1": 2, "late": "x"}, when=1.5), {"site": "dc1"})
    assert text == ("ssh_poll,bucket=10,check=load,host=h1,port=22,site=dc1,status=ok "
                    "load1=2.0,response_time=0.125,late=0.25,state=0.0 1500000000")
    failed = encode_line(result(values={}, status="down", error="h1:22: refused"))
    assert f'state={float(STATE_CODES["down"])},error="h1:22: refused"' in failed
    health = Health(1.0, 5, 2.5, 1, 0.5, {10.0: 3, 0.5: 1}, 1, 2, 3, 4, 5, skipped=6,
                    polls_ok=1, polls_failed=2, polls_timeout=1, polls_down=1)
    assert encode_line(health) == (
        "ssh_poll_health polls=5.0,polls_per_s=2.5,late=1.0,late_max=0.5,skipped=6.0,"
        "hosts_down=1.0,"
        "reconnects=2.0,dropped=3.0,buffered=4.0,in_flight=5.0,polls_ok=1.0,polls_failed=2.0,"
        "polls_timeout=1.0,polls_down=1.0,bucket_0.5=1.0,bucket_10=3.0 "
        "1000000000")
    assert as_json(health)["hosts_per_bucket"] == {"10": 3, "0.5": 1}
    assert as_json(result(when=2.0))["late"] == 0.25


def test_a_point_no_format_can_write_is_dropped_and_counted_not_the_ones_behind_it(tmp_path):
    # An integer beyond a double and a parser's own type (Decimal) must not hold up the
    # stream: the value or the point is left out, counted, and the rest is written.
    from decimal import Decimal
    for sink_class in (LineProtocolSink, JSONLinesSink):
        path = tmp_path / f"{sink_class.__name__}.txt"
        with open(path, "w") as stream:
            sink = sink_class(stream, flush_interval=0.05)
            sink.write(result("h1", {"huge": 10 ** 400, "load1": 1.0}))
            sink.write(result("h2", {"load1": Decimal("1.5")}))
            sink.write(result("h3", {"load1": 3}))
            sink.close(HANG)
        lines = path.read_text().splitlines()
        hosts = [next(h for h in ("h1", "h2", "h3") if h in text) for text in lines]
        if sink_class is LineProtocolSink:   # the huge value is left out of h1's point
            assert hosts == ["h1", "h2", "h3"] and "huge" not in lines[0]
            assert (sink.sent, sink.dropped) == (3, 0)
        else:                                # JSON cannot hold a Decimal: h2's point goes
            assert hosts == ["h1", "h3"]
            assert (sink.sent, sink.dropped) == (2, 1)


def test_influxdb1_user_with_write_rights_only_gets_its_points_written():
    # Production databases are made by an admin; the poller's user may only write: its
    # CREATE DATABASE is refused, which must not cost a single point.
    with InfluxDB1(auth=True) as server:
        def admin(q):
            server.get("/query", q=q, u="admin", p="secret")
        server.get("/query", q="CREATE USER admin WITH PASSWORD 'secret' WITH ALL PRIVILEGES")
        admin('CREATE DATABASE "metrics"')
        admin("CREATE USER poller WITH PASSWORD 'pw'")
        admin('GRANT WRITE ON "metrics" TO poller')
        sink = InfluxDB1Sink(server.url, "metrics", username="poller", password="pw",
                             flush_interval=0.05)
        for host in ("h1", "h2", "h3"):
            sink.write(result(host))
        sink.close(HANG)
        assert (sink.sent, sink.dropped) == (3, 0)
        data = json.loads(server.get("/query", db="metrics", u="admin", p="secret",
                                     q='SELECT count("load1") FROM "ssh_poll"'))
        assert data["results"][0]["series"][0]["values"][0][1] == 3


def test_a_partial_write_counts_only_the_points_influxdb_refused(influx, caplog):
    # A value whose type changes (a parser that gives a number, then text) is refused by
    # InfluxDB point by point; it writes the rest of the batch ("partial write").
    sink = InfluxDB1Sink(influx.url, "partial", flush_interval=0.05)
    sink.write(result("h0", {"load1": 1.0}, when=1.0))
    sink.flush(HANG)
    for i, value in enumerate([2.0, "text", 3.0, "more text"], start=1):
        sink.write(result(f"h{i}", {"load1": value}, when=1.0 + i))
    with caplog.at_level(logging.ERROR, logger="pssh"):
        sink.close(HANG)
    assert (sink.sent, sink.dropped) == (3, 2)
    stored = influx.query('SELECT "load1" FROM "ssh_poll"', "partial")["series"][0]
    assert [v[1] for v in stored["values"]] == [1.0, 2.0, 3.0]
    assert "field type conflict" in caplog.text and "points not sent" in caplog.text


def test_values_polled_from_sshd_are_read_back_from_influxdb1(group, influx):
    sink = InfluxDB1Sink(influx.url, "polls", flush_interval=0.2)
    results, health = poll(group, [sink], 2.5)
    ok = [r for r in results if r.check == "load"]
    assert {r.host for r in ok} == set(group.hosts) and all(r.status == "ok" for r in ok)
    assert sink.dropped == 0 and sink.buffered == 0
    assert sink.sent == len(results) + len(health)
    counts = influx.query('SELECT count("load1") FROM "ssh_poll" GROUP BY "host"', "polls")
    assert {s["tags"]["host"]: s["values"][0][1] for s in counts["series"]} == \
        {h: len([r for r in ok if r.host == h]) for h in group.hosts}
    # Each value as polled, at the time it was due.
    first = ok[0]
    stored = influx.query(f'SELECT "load1", "load15", "total", "response_time" FROM "ssh_poll" '
                          f"WHERE \"host\" = '{first.host}' AND \"check\" = 'load' "
                          f"AND time = {round(first.time * 1e9)}", "polls")["series"][0]
    assert stored["values"][0][1:] == [first.values["load1"], first.values["load15"],
                                       float(first.values["total"]), first.response_time]
    errors = influx.query('SELECT "error" FROM "ssh_poll" WHERE "status" = \'failed\'', "polls")
    texts = {v[1] for v in errors["series"][0]["values"]}
    assert texts == {r.error for r in results if r.check == "broken"}
    assert all("exit status 3" in t for t in texts)
    final = influx.query('SELECT last("polls") FROM "ssh_poll_health"', "polls")["series"][0]
    assert final["values"][0][1] == len(results)


def test_values_polled_from_sshd_are_read_back_through_the_v2_write_api():
    with ServerGroup(addresses=addresses(2)) as group, VictoriaMetrics() as vm:
        sink = InfluxDB2Sink(vm.url, "token", "org", "polls", flush_interval=0.2)
        results, _ = poll(group, [sink], 2.5)
        assert sink.dropped == 0 and sink.sent >= len(results)
        ok = [r for r in results if r.check == "load"]

        def stored():
            return {(s["metric"]["host"], s["metric"]["status"]): s["values"]
                    for s in vm.export('{__name__="ssh_poll_load1"}')}

        want = {(h, "ok"): sorted(r.values["load1"] for r in ok if r.host == h)
                for h in group.hosts}
        wait_until(lambda: {k: sorted(v) for k, v in stored().items()} == want, 30,
                   "every load1 value in VictoriaMetrics")
        buckets = vm.export('{__name__="ssh_poll_health_bucket_0.5"}')
        assert buckets and buckets[0]["values"][-1] == 4  # 2 hosts x 2 checks


def test_influxd_stopped_mid_run_buffers_drops_past_the_bound_and_recovers(group, influx,
                                                                           caplog):
    caplog.set_level(logging.WARNING, "pssh.poll.sinks")
    sink = InfluxDB1Sink(influx.url, "outage", max_buffered=6, flush_interval=0.1,
                         retry_max=0.5)
    results, health = [], []
    poller = Poller(group.hosts, [Check("load", "cat /proc/loadavg", loadavg)],
                    buckets=Buckets.fixed("0.2s"), sinks=[sink], on_result=results.append,
                    on_health=health.append, health_interval=0.3, **settings(group))
    runner = gevent.spawn(poller.run)
    try:
        wait_until(lambda: sink.sent >= 4, what="points sent before the outage")
        influx.process.terminate()
        influx.process.wait(30)
        wait_until(lambda: sink.dropped >= 10, what="points dropped while influxd is down")
        assert sink.buffered == 6  # the bound: memory stays flat
        wait_until(lambda: any(h.dropped for h in health), what="drops in the health")
        influx.start()
        restarted = time.time()
        wait_until(lambda: any(r.time > restarted + 0.5 for r in results)
                   and sink.buffered == 0, what="polls after the restart")
        wait_until(lambda: sink.sent > 0 and sink.buffered == 0)
    finally:
        poller.stop()
        runner.join(HANG)
    assert runner.successful()
    dropped = sink.dropped
    assert dropped >= 10 and sink.buffered == 0
    assert sink.sent + dropped == len(results) + len(health)
    full = [r for r in caplog.records if "buffer full" in r.getMessage()]
    assert len(full) == 1, [r.getMessage() for r in caplog.records]  # once per episode
    assert "cannot reach" in full[0].getMessage()
    episode = [r for r in caplog.records if "were dropped while the buffer was full" in
               r.getMessage()]
    assert len(episode) == 1
    # Everything sent is there (before the outage, the buffered six, and after). Counted
    # by "state", which every result has: a poll that timed out under load has no load1.
    count = influx.query('SELECT count("state") FROM "ssh_poll"', "outage")["series"][0]
    health_count = influx.query('SELECT count("polls") FROM "ssh_poll_health"', "outage")
    assert count["values"][0][1] + health_count["series"][0]["values"][0][1] == sink.sent
    after = influx.query(f'SELECT count("load1") FROM "ssh_poll" WHERE time > '
                         f'{round((restarted + 0.5) * 1e9)}', "outage")["series"][0]
    assert after["values"][0][1] > 0
    last = influx.query('SELECT last("dropped") FROM "ssh_poll_health"', "outage")["series"][0]
    assert last["values"][0][1] == dropped  # the last health report counts every drop


def writing_to(fd: int) -> bool:
    """Whether a thread of this process is blocked in write(2) on ``fd`` (what the kernel
    says, not a guess from counters that stopped moving for a while)."""
    return any(in_syscall(int(task)) == ("write", fd) for task in os.listdir("/proc/self/task"))


def test_a_destination_that_blocks_never_blocks_write(caplog):
    caplog.set_level(logging.WARNING, "pssh.poll.sinks")
    read_end, write_end = os.pipe()  # nobody reads: the sender's write() blocks for good
    stream = os.fdopen(write_end, "w", buffering=1)
    sink = LineProtocolSink(stream, max_buffered=10, flush_interval=0.01)
    written = 0

    def full() -> bool:  # fill the buffer again until the sender is stuck on the pipe
        nonlocal written
        while sink.buffered < 10:
            sink.write(result())
            written += 1
        return writing_to(write_end)
    eventually(full, HANG, "the sender stuck writing to the full pipe, 10 points buffered")
    assert sink.dropped == 0
    started = time.monotonic()
    for _ in range(1000):
        sink.write(result())
    written += 1000
    assert time.monotonic() - started < HANG
    assert sink.dropped == 1000 and sink.buffered == 10
    full = [r for r in caplog.records if "buffer full" in r.getMessage()]
    assert len(full) == 1
    closing = time.monotonic()
    sink.close(timeout=0.5)  # bounded, although the sender still waits on the pipe
    assert time.monotonic() - closing < HANG
    assert sink.buffered == 0 and sink.sent + sink.dropped == written
    os.close(read_end)  # the sender's write fails now; it counts nothing more
    eventually(lambda: sink.reader_gone, HANG, "the sender's write failed")
    assert sink.sent + sink.dropped == written


def test_a_database_that_is_not_there_costs_a_count_and_a_bounded_close(caplog):
    caplog.set_level(logging.WARNING, "pssh.poll.sinks")
    dead = free_port("127.0.0.1")
    sink = InfluxDB1Sink(f"http://127.0.0.1:{dead}", "nowhere", retry_max=0.2)
    for _ in range(5):
        sink.write(result())
    sink.flush(0.5)
    assert sink.buffered == 5 and sink.sent == 0
    sink.close(timeout=0.5)
    assert sink.dropped == 5 and sink.buffered == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("cannot reach" in m and "kept and retried" in m for m in messages)
    assert any("5 points not sent at close" in m for m in messages)
    sink.write(result())  # after close: dropped, counted
    assert sink.dropped == 6


def test_refused_points_are_dropped_counted_and_said(influx, caplog):
    caplog.set_level(logging.WARNING, "pssh.poll.sinks")
    sink = InfluxDB1Sink(influx.url, "types", flush_interval=0.05)
    sink.write(result(values={"load1": "a string"}))
    sink.flush(HANG)
    sink.write(result(values={"load1": 1.5}))  # a number where a string is stored: refused
    sink.flush(HANG)
    assert sink.sent == 1 and sink.dropped == 1
    assert any("HTTP 400" in r.getMessage() and "1 points not sent" in r.getMessage()
               for r in caplog.records)
    sink.close()


def test_json_lines_and_line_protocol_to_a_file(tmp_path):
    path = tmp_path / "points"
    with open(path, "w") as fh:
        with JSONLinesSink(fh) as sink:
            sink.write(result(host="a"))
            sink.write(Health(1.0, 1, 1.0, 0, 0.0, {10.0: 1}))
        with LineProtocolSink(fh, tags={"site": "x"}) as sink:
            sink.write(result(host="b"))
    lines = path.read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines[:2]] == ["result", "health"]
    assert json.loads(lines[0])["values"] == {"load1": 0.5}
    assert lines[2].startswith("ssh_poll,bucket=10,check=load,host=b,port=22,site=x,status=ok ")


def test_a_database_dropped_meanwhile_is_created_again(influx):
    sink = InfluxDB1Sink(influx.url, "dropped_db", flush_interval=0.05, retry_max=0.2)
    sink.write(result(host="before"))
    sink.flush(HANG)
    influx.query('DROP DATABASE "dropped_db"', "dropped_db")
    sink.write(result(host="after"))
    sink.flush(HANG)
    sink.close()
    assert sink.sent == 2 and sink.dropped == 0
    hosts = influx.query('SHOW TAG VALUES FROM "ssh_poll" WITH KEY = "host"', "dropped_db")
    assert hosts["series"][0]["values"] == [["host", "after"]]
