"""The Grafana polling dashboard (benchmarks/grafana/polling.json): every panel's query and
every variable's returns data from a real influxd fed by a real ``pssh poll`` run, and the
JSON decodes with the Grafana schema."""
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks
from benchmarks.servers import InfluxDB1
from dashboards import assert_decodes_with_the_grafana_schema, assert_every_query_returns_data
from test_cli import ENV

DASHBOARD = Path(benchmarks.__file__).parent / "grafana" / "polling.json"
# 127.0.0.2 answers too slowly for 1 s, 127.0.0.3 fails: both move to the 3 s bucket.
WORK = ('work=case "$SSH_CONNECTION" in *" 127.0.0.2 "*) sleep 1.5;; '
        '*" 127.0.0.3 "*) exit 4;; esac; echo 1')


@pytest.fixture(scope="module")
def polled():
    """influxd with database "fleet" holding a short poll of three hosts."""
    with InfluxDB1() as influx:
        done = subprocess.run(
            [sys.executable, "-m", "pssh", "poll", "--embedded", "3",
             "--check", "load:loadavg=cat /proc/loadavg", "--check", WORK,
             "--buckets", "1s,3s", "--duration", "8", "--health-interval", "1",
             "--influx-url", influx.url, "--influx-db", "fleet"],
            capture_output=True, text=True, timeout=180, env=ENV)
        assert done.returncode == 1, done.stderr  # the work check fails on purpose
        yield influx


SUBSTITUTIONS = {  # as Grafana fills them in (multi-value variables: a regex group)
    "$timeFilter": "time > now() - 1h", "$__interval_ms": "1000", "$__interval": "1s",
    "$host": r"(127\.0\.0\.1|127\.0\.0\.2|127\.0\.0\.3)", "$check": "(load|work)"}


def test_every_panel_query_returns_data_from_a_real_poll(polled):
    found = assert_every_query_returns_data(DASHBOARD, polled, "fleet", SUBSTITUTIONS)
    titles = {title for title, _ in found}
    for wanted in ("Hosts per bucket", "Response time", "Late polls", "Host states",
                   "Polls per second", "Dropped and buffered points", "variable host"):
        assert wanted in titles


def test_hosts_per_bucket_and_states_show_what_the_run_did(polled):
    buckets = polled.query('SELECT last(/^bucket_/) FROM "ssh_poll_health"', "fleet")
    columns, values = buckets["series"][0]["columns"], buckets["series"][0]["values"][0]
    assert dict(zip(columns[1:], values[1:])) == {"last_bucket_1": 4, "last_bucket_3": 2}
    states = polled.query('SELECT last("state") FROM "ssh_poll" WHERE "check" = \'work\' '
                          'GROUP BY "host"', "fleet")["series"]
    assert {s["tags"]["host"]: s["values"][0][1] for s in states} == \
        {"127.0.0.1": 0, "127.0.0.2": 0, "127.0.0.3": 1}  # ok, ok (at 3 s), failed


def test_the_dashboard_decodes_with_the_grafana_schema():
    assert_decodes_with_the_grafana_schema(DASHBOARD, {"host", "check"})
