"""The ramp harness end to end: real sshd, real InfluxDB 1.x, real VictoriaMetrics
(InfluxDB 2.x write API), real peer libraries; results read back from the servers."""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import benchmarks
from benchmarks.cpu_parts import PARTS, by_part, parse_report, part_of, per_host_ms
from benchmarks.servers import InfluxDB1, VictoriaMetrics
from benchmarks.sessions import OPERATIONS
from benchmarks.sinks import read_raw
from extras import imported, require
from dashboards import assert_decodes_with_the_grafana_schema, assert_every_query_returns_data
from waiting import eventually

DASHBOARD = Path(benchmarks.__file__).parent / "grafana" / "dashboard.json"
OPS_WITHOUT_EXECUTE = tuple(op for op in OPERATIONS if op != "execute")


def bench(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], capture_output=True,
                          text=True, timeout=timeout)


#: What the benchmark harness imports for a library it measures (beyond pssh).
LIBRARY_MODULES = {"paramiko": "paramiko", "asyncssh": "asyncssh", "hussh": "hussh"}


def ramp(out, *args, libs=("ours-blocking", "paramiko"), steps=("1", "2")):
    # What the run in a subprocess would miss, named now: its charts, its libraries, the
    # InfluxDB 2 client (a token means the 2.x write API).
    require("matplotlib", *(LIBRARY_MODULES[lib] for lib in libs if lib in LIBRARY_MODULES),
            *(["influxdb_client"] if "--influx-token" in args else []))
    result = bench("run", "--libs", *libs, "--steps", *steps, "--seconds", "1",
                   "--out", str(out), *args)
    assert result.returncode == 0, result.stderr
    raw = next(out.glob("sessions.*"))
    return result, read_raw(str(raw))


def expected_points(records):
    """(library, operation) -> number of timings the run measured."""
    return Counter((r["library"], op) for r in records for op in r.get("ops", {}))


@pytest.fixture(scope="module")
def influx():
    with InfluxDB1() as server:
        yield server




def test_ramp_records_every_operation_and_draws_the_table_and_charts(tmp_path):
    libs = ("ours-blocking", "ours-nonblocking", "paramiko", "asyncssh")
    result, records = ramp(tmp_path, "--format", "csv", libs=libs)
    for lib in libs:
        for step in (1, 2):
            mine = [r for r in records if r["library"] == lib and r["concurrency"] == step]
            assert mine and all("error" not in r for r in mine), (lib, step)
            assert {r["thread"] for r in mine} == set(range(step))
            for record in mine:
                want = OPS_WITHOUT_EXECUTE if lib == "asyncssh" else OPERATIONS
                assert set(record["ops"]) == set(want)
                assert all(v > 0 for v in record["ops"].values())
                assert record["ops"]["total"] >= record["ops"]["sftp_read"]
    # The relative table: a row per operation, ratios against paramiko.
    table = (tmp_path / "report.md").read_text()
    assert table == result.stdout
    for op in OPERATIONS:
        assert f"| {op} |" in table
    assert "ours-blocking vs paramiko" in table and "asyncssh vs paramiko" in table
    imread = imported("matplotlib.image").imread
    charts = sorted(tmp_path.glob("*.png"))
    assert [c.name for c in charts] == ["ramp_all_operations.png", "ramp_by_operation.png",
                                        "ramp_small_operations.png"]
    for chart in charts:
        height, width, _ = imread(chart).shape
        assert width > 800 and height > 300
    # The same report again from the run's folder: every line as the run wrote it, the time
    # per step (1 s here) and the command included.
    assert "1 s each" in table
    again = bench("report", str(tmp_path / "sessions.csv"), "--no-plots")
    assert again.returncode == 0 and again.stdout == table
    # A run that kept only its raw file: what it cannot know is said so, never "0 s each".
    (tmp_path / "run.json").unlink()
    bare = bench("report", str(tmp_path / "sessions.csv"), "--no-plots")
    assert bare.returncode == 0 and "| sftp_read |" in bare.stdout
    assert "time per step not recorded" in bare.stdout and "0 s each" not in bare.stdout


def test_influxdb1_http_api_and_graphite_input_hold_every_timing(influx, tmp_path):
    result, records = ramp(tmp_path, "--influx-url", influx.url, "--influx-db", "bench",
                           "--graphite", influx.graphite_address)
    run_id = records[0]["run_id"]
    want = expected_points(records)
    total = sum(want.values()) + 2 * 2 * len(OPERATIONS)  # + one step point per lib/op/step
    assert f"{total} points written" in result.stderr
    assert "NOT sent" not in result.stderr

    def counts(database):
        res = influx.query(f'SELECT count("seconds") FROM "ssh_bench" WHERE "run_id" = '
                           f"'{run_id}' GROUP BY \"library\", \"operation\"", database)
        return Counter({(s["tags"]["library"], s["tags"]["operation"]): s["values"][0][1]
                        for s in res.get("series", [])})

    for database in ("bench", influx.graphite_db):
        # A database shows writes some moments after taking them.
        eventually(lambda: counts(database),  # noqa: B023 - called within this iteration
                   what=f"the points in {database}", equal_to=want)
        tags = influx.query(f'SHOW TAG VALUES FROM "ssh_bench" WITH KEY IN ("concurrency", '
                            f'"host", "thread") WHERE "run_id" = \'{run_id}\'', database)
        values = {(k, v) for k, v in tags["series"][0]["values"]}
        assert values == {("concurrency", "1"), ("concurrency", "2"), ("thread", "0"),
                          ("thread", "1"), ("host", records[0]["host"].replace(".", "_")
                                            if database == influx.graphite_db
                                            else records[0]["host"])}
        steps = influx.query(f'SELECT "median", "ratio" FROM "ssh_bench_step" WHERE '
                             f"\"run_id\" = '{run_id}' AND \"operation\" = 'total' "
                             f'GROUP BY "library", "concurrency"', database)["series"]
        ratios = {(s["tags"]["library"], s["tags"]["concurrency"]): s["values"][0][2]
                  for s in steps}
        assert ratios[("paramiko", "1")] == pytest.approx(1.0)
        assert len(ratios) == 4 and all(r > 0 for r in ratios.values())


def test_every_dashboard_query_returns_data_from_influxdb(influx, tmp_path):
    _, records = ramp(tmp_path, "--influx-url", influx.url, "--influx-db", "dash")
    substitutions = {"$timeFilter": "time > now() - 1h", "$__interval": "1s",
                     "$run_id": records[0]["run_id"], "$library": "(ours-blocking|paramiko)",
                     "$operation": "total"}
    found = assert_every_query_returns_data(DASHBOARD, influx, "dash", substitutions)
    assert len(found) >= 7


def test_dashboard_json_parses_with_the_grafana_schema():
    assert_decodes_with_the_grafana_schema(DASHBOARD, {"run_id", "library", "operation"})


def test_influxdb2_write_api_into_victoria_metrics(tmp_path):
    with VictoriaMetrics() as vm:
        result, records = ramp(tmp_path, "--influx-url", vm.url, "--influx-token", "t",
                               "--influx-org", "o", "--influx-bucket", "ssh",
                               libs=("ours-nonblocking",), steps=("2",))
        want = expected_points(records)
        assert f"{sum(want.values()) + len(OPERATIONS)} points written" in result.stderr

        def counts():
            got = Counter()
            for series in vm.export('{__name__="ssh_bench_seconds"}'):
                labels = series["metric"]
                got[(labels["library"], labels["operation"])] += len(series["values"])
            return got

        eventually(counts, what="the points in VictoriaMetrics", equal_to=want)
        labels = vm.export('{__name__="ssh_bench_seconds"}')[0]["metric"]
        assert labels["run_id"] == records[0]["run_id"] and labels["concurrency"] == "2"
        assert labels["host"] == records[0]["host"] and labels["thread"] in ("0", "1")
        ratio = vm.export('{__name__="ssh_bench_step_median"}')
        assert len(ratio) == len(OPERATIONS)


def test_database_down_run_completes_and_says_what_was_not_sent(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]     # nothing listens here once closed
    started = time.monotonic()
    result, records = ramp(tmp_path, "--influx-url", f"http://127.0.0.1:{dead}",
                           "--influx-db", "bench", "--graphite", f"127.0.0.1:{dead}",
                           libs=("ours-blocking",), steps=("1",))
    assert time.monotonic() - started < 60
    total = sum(expected_points(records).values()) + len(OPERATIONS)
    assert records and all("ops" in r for r in records)
    assert f"0 points written, {total} NOT sent" in result.stderr
    assert result.stderr.count("NOT sent") == 2   # InfluxDB and Graphite both reported


def test_ssh2_python_runs_from_a_virtualenv_the_harness_creates(tmp_path):
    venvs = tmp_path / "venvs"
    result = bench("run", "--libs", "ssh2-python", "--steps", "1", "--seconds", "1",
                   "--setup-peers", "--venv-dir", str(venvs), "--out", str(tmp_path / "out"),
                   "--no-plots", timeout=600)
    assert result.returncode == 0, result.stderr
    assert (venvs / ".venv-ssh2python" / "bin" / "python").exists()
    records = read_raw(str(tmp_path / "out" / "sessions.jsonl"))
    assert records and all(set(r["ops"]) == set(OPERATIONS) for r in records)
    # Its own ssh2 module, not ours.
    assert records[0]["version"].startswith("1.") and "ssh2-python" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "--libs", "nosuchlib"], "invalid choice"),
    (["run", "--influx-url", "http://127.0.0.1:1"], "needs --influx-db"),
    (["run", "--influx-url", "http://x", "--influx-token", "t"], "--influx-org"),
    (["run", "--graphite", "nohostport"], "HOST:PORT"),
    (["run", "--steps", "0"], "steps must be >= 1"),
    (["run", "--libs", "ssh2-python", "--venv-dir", "/nonexistent"], "--setup-peers"),
])
def test_usage_errors_are_one_line_and_exit_2(args, message):
    result = bench(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_help_lists_the_options_and_examples():
    result = bench("run", "--help")
    assert result.returncode == 0
    for text in ("--quick", "--influx-bucket", "--graphite", "--cipher", "examples:"):
        assert text in result.stdout


def test_progress_bar_on_a_terminal(tmp_path):
    # script(1) gives the harness a pseudo-terminal: the live bar instead of step lines.
    command = shlex.join([sys.executable, "-m", "benchmarks", "run", "--libs", "ours-blocking",
                          "--steps", "1", "--seconds", "1", "--no-plots", "--out", str(tmp_path)])
    result = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True,
                            timeout=120)
    screen = result.stdout.decode(errors="replace")
    assert result.returncode == 0, screen
    assert "1 threads ours-blocking" in screen and "1/1" in screen   # the bar's step count
    assert "[bench]   1 threads" not in screen                      # no plain step lines


def test_startup_table_has_every_case_of_ours_with_a_median():
    result = subprocess.run([sys.executable, "-m", "benchmarks.startup", "--runs", "1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for case in ("interpreter alone", "import ssh2.session", "import pssh.clients", "pssh --help"):
        row = rf"^\| {re.escape(case)} \| \d+ ms \| -?\d+ ms \|$"
        assert re.search(row, result.stdout, re.M), result.stdout


#: The bundled libssh2's build, whose header the C floor compiles with (an installed
#: package carries the library, not the header).
BUNDLED_BUILD = Path(__file__).resolve().parent.parent / "build" / "libssh2"


def run_module(module, *args, timeout=600):
    # From / with this folder's interpreter: the installed package, as the docs run them.
    env = dict(os.environ)
    if BUNDLED_BUILD.is_dir():
        env.setdefault("LIBSSH2_BUILD_DIR", str(BUNDLED_BUILD))
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=timeout, cwd="/", env=env)


def test_cpu_per_host_reports_every_library_side_by_side_with_syscalls_and_the_floor(tmp_path):
    require("hussh", "asyncssh")
    out = tmp_path / "cpu.json"
    result = run_module("benchmarks.cpu_per_host", "--hosts", "2", "--repeat", "1",
                        "--libs", "ours", "ours-native", "ours-aio", "hussh", "asyncssh",
                        "floor-c", "--strace-hosts", "2", "--perf-hosts", "0", "--floor",
                        "--json", str(out))
    assert result.returncode == 0, result.stderr
    run = json.loads(out.read_text())
    assert run["hosts"] == [1, 2]     # H = 1 added: the start-up exclusion needs it
    # ours-native: measured once ParallelSSHClient takes runner=, skipped with a message before.
    native = "ours-native" in run["libraries"]
    assert native or ("ours-native skipped: " in result.stderr
                      and "ours-native: not measured" in result.stdout)
    measured = ["ours", *(["ours-native"] if native else []), "ours-aio", "hussh", "asyncssh",
                "floor-c"]
    assert run["libraries"] == measured
    assert run["host_keys_checked"] == [lib for lib in measured
                                        if lib.startswith(("ours", "floor"))]
    for lib in measured:
        assert run["wall_s"][lib]["1"] > 0 and run["wall_s"][lib]["2"] > 0, lib
        assert run["cpu_ms_per_host"][lib]["2"] is not None, lib
        calls = run["syscalls_per_login"]["by_library"][lib]
        assert calls["total"] > 0 and calls["top"], lib
    assert set(run["wall_ratio"]) >= {"ours / hussh", "ours / asyncssh", "ours-aio / hussh",
                                      "floor-c / asyncssh"}
    assert run["import_wall_s"]["ours"] > 0
    floor = run["floor"]
    assert set(floor["crypto_us"]) == {"x25519 keygen + shared secret", "ed25519 verify",
                                       "ed25519 sign", "ecdsa-p256 verify", "ecdsa-p256 sign"}
    assert all(v > 0 for v in floor["per_login_us"]["client"].values())
    # The report: a wall table with the ratios, the CPU table, the system calls by name.
    assert "| H | ours |" in result.stdout and "ours / hussh" in result.stdout
    assert "start-up excluded" in result.stdout and "- ours: " in result.stdout


def test_login_floor_builds_against_the_libssh2_that_ssh2_loads_and_runs(tmp_path, monkeypatch):
    from benchmarks.login_floor import build_floor, loaded_libssh2
    if BUNDLED_BUILD.is_dir() and not os.environ.get("LIBSSH2_BUILD_DIR"):
        monkeypatch.setenv("LIBSSH2_BUILD_DIR", str(BUNDLED_BUILD))
    library = loaded_libssh2()
    program = build_floor(tmp_path)
    linked = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
    assert str(library) in linked or str(library.parent) in linked
    out = tmp_path / "floor.json"
    result = run_module("benchmarks.login_floor", "--hosts", "1", "3", "--repeat", "1",
                        "--no-openssl", "--json", str(out))
    assert result.returncode == 0, result.stderr
    floor = json.loads(out.read_text())
    assert floor["c"]["wall_s"]["3"] > 0 and floor["c"]["cpu_ms_per_host"]["3"] > 0
    assert floor["c"]["syscalls_per_login"]["total"] > 0
    assert "per login, client side" in result.stdout


def test_cpu_per_host_says_where_each_librarys_cpu_goes(tmp_path):
    assert shutil.which("perf"), ("perf is not installed: apt-get install linux-perf "
                                  "(ci/setup.sh does)")
    out = tmp_path / "parts.json"
    result = run_module("benchmarks.cpu_per_host", "--hosts", "3", "--repeat", "1",
                        "--libs", "ours-native", "floor-c", "--strace-hosts", "0",
                        "--perf-hosts", "3", "--json", str(out))
    assert result.returncode == 0, result.stderr
    parts = json.loads(out.read_text())["cpu_ms_per_host_by_part"]
    assert parts["hosts"] == 3 and set(parts["by_library"]) == {"ours-native", "floor-c"}
    for lib, figures in parts["by_library"].items():
        per_host = figures["per_host_ms"]
        assert set(per_host) == {*PARTS, "total"}, lib
        assert all(ms >= 0 for ms in per_host.values()), lib
        assert per_host["total"] == pytest.approx(sum(per_host[p] for p in PARTS), abs=0.01)
        assert by_part(figures["samples"]["3"])["kernel"] > 0, lib   # at least its execve
    # Samples land where the code runs: the C program has no interpreter, ours has one;
    # the C program's key exchanges are libcrypto's.
    floor, ours = (by_part(parts["by_library"][lib]["samples"]["3"])
                   for lib in ("floor-c", "ours-native"))
    assert floor["interpreter"] == 0 and floor["libcrypto"] > 0
    assert ours["interpreter"] > 0
    assert "by where it goes" in result.stdout and "| ours-native | " in result.stdout


def test_cpu_parts_are_read_from_perf_reports():
    report = """    60.77%          1411  libpython3.11.so.1.0
    17.96%           417  [kernel.kallsyms]
    11.63%           270  libcrypto.so.3
     4.48%           104  libc.so.6
     1.64%            38  ld-linux-x86-64.so.2
     0.99%            23  _native.cpython-311-x86_64-linux-gnu.so
     0.65%            15  libssh2.so.1
     0.13%             3  [vdso]
"""
    samples = parse_report(report)
    assert samples["libpython3.11.so.1.0"] == 1411 and samples["[vdso]"] == 3
    assert [part_of(dso) for dso in samples] == [
        "interpreter", "kernel", "libcrypto", "libc", "other", "extensions", "libssh2", "other"]
    assert part_of("python3.12") == "interpreter" and part_of("hussh.abi3.so") == "extensions"
    # A wheel's own copies of the libraries (parallel-ssh's ssh2-python carries both).
    assert part_of("libssh2-38398901.so.1.0.1") == "libssh2"
    assert part_of("libcrypto-9a8edada.so.3") == "libcrypto"
    assert part_of("libcom_err-5cc7ca61.so.3.0") == "other"
    one = {"libpython3.11.so.1.0": 411, "[kernel.kallsyms]": 117, "libcrypto.so.3": 300}
    per = per_host_ms(samples, one, 101, frequency=1000)
    # (1411 - 411) samples at 1000 per CPU second, over 100 hosts: 10 ms per host; a part
    # sampled less in the larger run counts 0.
    assert per["interpreter"] == 10.0 and per["kernel"] == 3.0 and per["libcrypto"] == 0.0
    assert per["total"] == pytest.approx(sum(per[p] for p in PARTS))


def test_syscall_counts_are_read_from_strace_tables():
    from benchmarks.syscalls import parse_counts, per_login, summary
    table = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.00    0.000400           2       200        50 recvfrom
 30.00    0.000300           3       100           sendto
------ ----------- ----------- --------- --------- ----------------
100.00    0.001000           3       300        50 total
"""
    many = parse_counts(table)
    assert many == {"recvfrom": 200, "sendto": 100}
    per = per_login(many, {"recvfrom": 20, "sendto": 10, "execve": 1}, 10)
    assert per == {"recvfrom": 20.0, "sendto": 10.0, "execve": 0.0}
    assert summary(per) == (30.0, [("recvfrom", 20.0), ("sendto", 10.0)])
