"""The soak benchmark: one Poller on hundreds of hosts for a long time, memory sampled.

Every ``sample`` seconds the harness records the process's RSS, the polls finished
since the last sample, the late polls of fast hosts, the hosts per bucket and the
sink's buffer; at the end it counts the points the sink wrote (line protocol, to a
real file) and compares them with the polls the poller reported. The harness keeps
only counters and one small record per sample, so the process's memory is the
poller's (and the sink's).

Hosts: most are fast; ``slow`` of them answer after ``slow_seconds`` all the time, and
``flapping`` of them are slow for ``flap_slow`` seconds of every ``flap_period`` (the
adaptive buckets move them down and up all run long).
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set

from benchmarks._polling_fleet import LoopbackFleet, rss_mib, split_hosts


@dataclass
class SoakSettings:
    hosts: int = 500
    interval: float = 10.0
    buckets: str = ""               # default: interval, 2x, 6x, 10x (the paper's 10,20,60,100)
    upgrade: str = "count:3"
    duration: float = 1800.0
    sample: float = 10.0
    slow: float = 0.05
    flapping: float = 0.05
    slow_seconds: float = 0.0       # default 1.5 x interval
    flap_period: float = 360.0
    flap_slow: float = 120.0
    keep_points: Optional[str] = None  # keep the line protocol file here

    def bucket_text(self) -> str:
        if self.buckets:
            return self.buckets
        return ",".join(f"{self.interval * k:g}s" for k in (1, 2, 6, 10))

    def slow_delay(self) -> float:
        return self.slow_seconds or 1.5 * self.interval


@dataclass
class _Counters:
    """What the poller reported, as it came (counters only)."""

    fast: Set[str]
    results: int = 0
    ok: int = 0
    by_status: Dict[str, int] = field(default_factory=dict)
    fast_polls: int = 0
    fast_late: int = 0
    fast_late_max: float = 0.0
    health: object = None

    def on_result(self, result) -> None:
        from pssh.poll.health import LATE_FRACTION
        self.results += 1
        self.ok += result.status == "ok"
        self.by_status[result.status] = self.by_status.get(result.status, 0) + 1
        if result.host in self.fast:
            self.fast_polls += 1
            if result.late > LATE_FRACTION * result.bucket:
                self.fast_late += 1
            self.fast_late_max = max(self.fast_late_max, result.late)

    def on_health(self, health) -> None:
        self.health = health


def count_points(path: Path) -> Dict[str, int]:
    """Points in a line protocol file: poll results (all, ok) and health reports."""
    counts = {"results": 0, "ok": 0, "health": 0}
    with open(path) as fh:
        for line in fh:
            if line.startswith("ssh_poll,"):
                counts["results"] += 1
                tags = line.split(" ", 1)[0]
                counts["ok"] += ",status=ok" in tags
            elif line.startswith("ssh_poll_health"):
                counts["health"] += 1
    return counts


def run_soak(settings: SoakSettings, progress=print) -> dict:
    import gevent

    from pssh.poll import Buckets, Check, Poller
    from pssh.poll.sinks import LineProtocolSink

    buckets = Buckets.parse(settings.bucket_text(), settings.upgrade)
    with LoopbackFleet(settings.hosts) as fleet:
        slow, flapping, fast = split_hosts(fleet.hosts, settings.slow, settings.flapping)
        fleet.set_delay(slow, settings.slow_delay())
        points = Path(settings.keep_points) if settings.keep_points \
            else fleet.workdir / "points.lp"
        stream = open(points, "w")
        sink = LineProtocolSink(stream)
        counters = _Counters(set(fast))
        poller = Poller(fleet.hosts, [Check("probe", fleet.check_command())], buckets=buckets,
                        sinks=[sink], on_result=counters.on_result,
                        on_health=counters.on_health, health_interval=settings.sample,
                        **fleet.connect_settings())
        samples: List[dict] = []
        start = time.monotonic()

        def sample_forever() -> None:
            last = (0, 0, 0)
            while True:
                gevent.sleep(settings.sample - (time.monotonic() - start) % settings.sample)
                if time.monotonic() - start >= settings.duration - 0.5:
                    return  # the run is ending: a partial window would read as a drop
                health = poller.health()
                now = (counters.results, counters.fast_polls, counters.fast_late)
                samples.append({
                    "t": round(time.monotonic() - start, 2), "rss_mib": round(rss_mib(), 2),
                    "polls": now[0] - last[0], "fast_polls": now[1] - last[1],
                    "fast_late": now[2] - last[2],
                    "buckets": {f"{k:g}": v for k, v in health.hosts_per_bucket.items()},
                    "in_flight": health.in_flight, "buffered": sink.buffered,
                    "dropped": sink.dropped, "reconnects": health.reconnects,
                    "sshd_processes": fleet.sshd_processes()})
                last = now
                s = samples[-1]
                progress(f"t={s['t']:7.0f}s rss={s['rss_mib']:7.1f} MiB polls={s['polls']:5d} "
                         f"fast late={s['fast_late']:4d} buckets={s['buckets']} "
                         f"buffered={s['buffered']} dropped={s['dropped']}")

        def flap_forever() -> None:
            while True:
                fleet.set_delay(flapping, settings.slow_delay())
                gevent.sleep(settings.flap_slow)
                fleet.set_delay(flapping, 0)
                gevent.sleep(settings.flap_period - settings.flap_slow)

        helpers = [gevent.spawn(sample_forever)]
        if flapping:
            helpers.append(gevent.spawn(flap_forever))
        try:
            poller.run(settings.duration)  # ends with the sink flushed and closed
        finally:
            gevent.killall(helpers)
            sink.close()
            stream.close()
        wall = time.monotonic() - start
        written = count_points(points)
        final = poller.health()
        result = {
            "settings": {**settings.__dict__, "buckets": settings.bucket_text(),
                         "slow_seconds": settings.slow_delay()},
            "hosts": {"fast": len(fast), "slow": len(slow), "flapping": len(flapping)},
            "sshd_processes": len(fleet.servers), "wall": wall, "samples": samples,
            "poller": {"results": counters.results, "ok": counters.ok,
                       "by_status": counters.by_status, "health_polls": final.polls,
                       "skipped": poller.skipped, "reconnects": final.reconnects,
                       "late": final.late},
            "sink": {"written": written, "sent": sink.sent, "dropped": sink.dropped,
                     "buffered": sink.buffered, "file_bytes": os.path.getsize(points),
                     "file": str(points) if settings.keep_points else None},
            "fast": {"polls": counters.fast_polls, "late": counters.fast_late,
                     "late_max": counters.fast_late_max},
        }
        result["summary"] = summarise(result)
        return result


def summarise(result: dict) -> dict:
    """RSS growth, late share of fast hosts, lost points."""
    samples = result["samples"]
    rss = [s["rss_mib"] for s in samples]
    # Growth after the first tenth of the run (connections made, buffers at size).
    settle = max(1, len(samples) // 10) if samples else 0
    after = samples[settle:] or samples
    slope = _slope([s["t"] for s in after], [s["rss_mib"] for s in after]) if len(after) > 2 \
        else 0.0
    poller, sink, fast = result["poller"], result["sink"], result["fast"]
    return {
        "rss_first": rss[0] if rss else None, "rss_settled": after[0]["rss_mib"] if after else None,
        "rss_end": rss[-1] if rss else None, "rss_max": max(rss) if rss else None,
        "rss_growth_after_settle": (rss[-1] - after[0]["rss_mib"]) if after else None,
        "rss_slope_mib_per_hour": slope * 3600,
        "fast_late_share": fast["late"] / fast["polls"] if fast["polls"] else None,
        "lost_results": poller["results"] - sink["written"]["results"],
        "lost_ok": poller["ok"] - sink["written"]["ok"],
        "polls_per_s": poller["results"] / result["wall"] if result["wall"] else 0.0,
        "median_polls_per_sample": statistics.median([s["polls"] for s in samples])
        if samples else 0,
    }


def _slope(xs: List[float], ys: List[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def report(result: dict) -> str:
    s, p, k, f = result["summary"], result["poller"], result["sink"], result["fast"]
    cfg = result["settings"]
    lines = [
        f"Soak: {cfg['hosts']} hosts ({result['hosts']['fast']} fast, {result['hosts']['slow']} "
        f"slow at {cfg['slow_seconds']:g} s, {result['hosts']['flapping']} flapping), buckets "
        f"{cfg['buckets']} {cfg['upgrade']}, {result['wall'] / 60:.1f} min; "
        f"{result['sshd_processes']} sshd processes",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| polls (poller's count) | {p['results']} ({p['ok']} ok; {p['by_status']}) |",
        f"| polls per second | {s['polls_per_s']:.1f} |",
        f"| RSS first sample / settled (after 1/10 of the run) / end / max, MiB | "
        f"{s['rss_first']:.1f} / {s['rss_settled']:.1f} / {s['rss_end']:.1f} / "
        f"{s['rss_max']:.1f} |",
        f"| RSS growth after settling, MiB | {s['rss_growth_after_settle']:+.1f} |",
        f"| RSS trend after settling, MiB per hour | {s['rss_slope_mib_per_hour']:+.2f} |",
        f"| fast hosts' polls late (> 1/10 interval) | {f['late']} of {f['polls']} "
        f"({100 * (s['fast_late_share'] or 0):.2f} %), latest {f['late_max']:.2f} s |",
        f"| points in the file: results (ok) / health | {k['written']['results']} "
        f"({k['written']['ok']}) / {k['written']['health']} |",
        f"| lost results (poller - file), of them ok | {s['lost_results']}, {s['lost_ok']} |",
        f"| sink dropped / left buffered | {k['dropped']} / {k['buffered']} |",
        f"| rounds skipped (a pair a whole interval behind) | {p['skipped']} |",
        f"| reconnects | {p['reconnects']} |",
    ]
    return "\n".join(lines)


def chart(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    samples = result["samples"]
    minutes = [s["t"] / 60 for s in samples]
    fig, (ax_rss, ax_polls, ax_buckets) = plt.subplots(3, 1, figsize=(7.5, 8), sharex=True)
    ax_rss.plot(minutes, [s["rss_mib"] for s in samples], color="tab:blue")
    ax_rss.set_ylabel("poller RSS (MiB)")
    ax_rss.set_ylim(bottom=0)
    sample = result["settings"]["sample"]
    ax_polls.plot(minutes, [s["polls"] / sample for s in samples], label="all polls / s")
    ax_polls.plot(minutes, [s["fast_late"] / sample for s in samples],
                  label="late polls of fast hosts / s", color="tab:red")
    ax_polls.set_ylabel("per second")
    ax_polls.legend(fontsize=8)
    names = sorted({b for s in samples for b in s["buckets"]}, key=float)
    for name in names:
        ax_buckets.plot(minutes, [s["buckets"].get(name, 0) for s in samples],
                        label=f"{name} s bucket")
    ax_buckets.set_ylabel("hosts in bucket")
    ax_buckets.set_yscale("symlog")
    ax_buckets.set_xlabel("minutes")
    ax_buckets.legend(fontsize=8)
    for ax in (ax_rss, ax_polls, ax_buckets):
        ax.grid(alpha=0.3)
    cfg = result["settings"]
    fig.suptitle(f"Soak: {cfg['hosts']} hosts, buckets {cfg['buckets']}, one process")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
