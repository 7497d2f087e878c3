"""The polling benchmarks (python -m benchmarks.polling) end to end, in quick runs: real
sshd hosts on loopback addresses, the real Poller, a real line protocol file. The tests
check that every figure is produced and that the counts add up, never how fast."""
import json
import subprocess
import sys

from extras import imported

imread = imported("matplotlib.image").imread


def polling(*args, timeout=300):
    result = subprocess.run([sys.executable, "-m", "benchmarks.polling", *args],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def assert_chart(path):
    height, width, _ = imread(path).shape
    assert height > 300 and width > 300


def test_effect_compares_both_modes_on_the_same_hosts(tmp_path):
    figures, chart = tmp_path / "effect.json", tmp_path / "effect.png"
    duration, bins = 9.0, 12  # the chart's bins: a twelfth of the measured time each
    result = polling("effect", "--hosts", "16", "--duration", f"{duration:g}", "--warmup", "2",
                     "--buckets", "1s,2s,4s,8s", "--slow-seconds", "2.5", "--workers", "3",
                     "--slow", "0.15", "--turn-slow", "0.15", "--json", str(figures),
                     "--chart", str(chart))
    data = json.loads(figures.read_text())
    groups = data["groups"]
    assert groups == {"slow": 2, "turning": 2, "fast": 12}
    assert set(data["modes"]) == {"fixed", "adaptive"}
    for name, mode in data["modes"].items():
        assert sum(mode["by_status"].values()) == mode["polls_measured"] <= mode["polls"]
        before, after = mode["phases"]["before"], mode["phases"]["after"]
        assert before["slow_hosts"] == 2 and after["slow_hosts"] == 4
        assert before["seconds"] + after["seconds"] == duration
        for phase in (before, after):
            fast, slow = phase["fast"], phase["slow"]
            assert fast["polls"] > 0, (name, phase)
            assert fast["on_time"] <= fast["polls"]
            assert fast["ok"] + fast["timeouts"] <= fast["polls"]
            assert fast["interval_median"] is not None
            assert fast["interval_median"] <= fast["interval_p90"]
            assert slow["ok"] + slow["timeouts"] <= slow["polls"]
        # Every host is in some bucket at the end, each group counted whole.
        for group, counts in mode["end_buckets"].items():
            assert sum(counts.values()) == groups[group]
        assert len(mode["series"]) == bins
        assert mode["reconnects"] >= 0 and mode["skipped"] >= 0
        assert f"| {name} (" in result.stdout
    # Slow hosts sleep 2.5 s: with a fixed 1 s interval every poll of theirs times out;
    # the adaptive buckets move them to the 4 s bucket, where they answer.
    fixed, adaptive = data["modes"]["fixed"], data["modes"]["adaptive"]
    slow_before = fixed["phases"]["before"]["slow"]
    assert slow_before["polls"] > 0 and slow_before["timeouts"] == slow_before["polls"]
    assert fixed["end_buckets"]["slow"] == {"1": 2}
    assert set(adaptive["end_buckets"]["slow"]) <= {"4", "8"}
    assert adaptive["phases"]["after"]["slow"]["ok"] > 0
    assert_chart(chart)


def test_capacity_counts_every_poll_of_both_ways(tmp_path):
    figures = tmp_path / "capacity.json"
    result = polling("capacity", "--hosts", "3", "6", "--duration", "2", "--json",
                     str(figures))
    data = json.loads(figures.read_text())
    runs = {(r["hosts"], r["way"]): r for r in data["runs"]}
    assert set(runs) == {(h, w) for h in (3, 6) for w in ("poller", "fresh")}
    for (hosts, way), run in runs.items():
        assert run["polls"] > 0 and run["ok"] == run["polls"], run
        assert run["cpu"] > 0 and run["sshd_cpu"] > 0 and run["wall"] > 0
        assert run["maxrss_kib"] > 0
        if way == "fresh":
            assert run["rounds"] >= 2 and run["polls"] == run["rounds"] * hosts
        else:
            assert "error" not in run and run["interval"] == hosts / data["offered"]
    assert result.stdout.count("| poller |") == 2 and result.stdout.count("| fresh |") == 2


def test_soak_counts_every_point_the_sink_wrote(tmp_path):
    figures, chart, points = tmp_path / "soak.json", tmp_path / "soak.png", tmp_path / "p.lp"
    result = polling("soak", "--hosts", "12", "--interval", "1", "--duration", "8",
                     "--sample", "2", "--slow", "0.1", "--flapping", "0.1", "--flap-period",
                     "4", "--flap-slow", "2", "--keep-points", str(points),
                     "--json", str(figures), "--chart", str(chart))
    data = json.loads(figures.read_text())
    poller, sink, summary = data["poller"], data["sink"], data["summary"]
    assert data["hosts"]["fast"] + data["hosts"]["slow"] + data["hosts"]["flapping"] == 12
    assert poller["results"] > 0
    assert sum(poller["by_status"].values()) == poller["results"] == poller["health_polls"]
    assert poller["ok"] == poller["by_status"].get("ok", 0)
    # Nothing lost between the poller and the file: every result is a line.
    assert sink["written"]["results"] == poller["results"]
    assert sink["written"]["ok"] == poller["ok"]
    assert summary["lost_results"] == 0 and summary["lost_ok"] == 0
    assert sink["dropped"] == 0 and sink["buffered"] == 0
    assert sink["written"]["health"] >= 1
    lines = points.read_text().splitlines()
    assert len(lines) == sink["written"]["results"] + sink["written"]["health"]
    assert data["fast"]["late"] <= data["fast"]["polls"] <= poller["results"]
    samples = data["samples"]
    assert len(samples) >= 3
    assert sum(s["polls"] for s in samples) <= poller["results"]
    assert all(s["rss_mib"] > 0 and sum(s["buckets"].values()) == 12 for s in samples)
    assert summary["rss_max"] >= summary["rss_end"] > 0
    assert "lost results" in result.stdout
    assert_chart(chart)


def test_bad_arguments_are_usage_errors():
    result = subprocess.run([sys.executable, "-m", "benchmarks.polling", "effect", "--slow",
                             "1.5"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "a fraction is in [0, 1)" in result.stderr
