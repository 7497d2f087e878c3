"""The effect benchmark: a fixed interval vs adaptive buckets on the same hosts.

The same fleet is polled twice, one mode after the other (fixed first), each for the
same warm-up and measured time, with the same hosts slow at the same moments: some
from the start, more a third into the measured time (they turn slow while the poller
runs). One after the other rather than side by side on two halves of the fleet: the
two modes must not share the machine's two cores (sshd, the polled shells and the
client all run here), or one mode's load would make the other's polls late.

Measured, for each mode and phase (before / after the second group turns slow):
the fast hosts' polls on time (started within a tenth of the interval of when they
were due, the poller's own definition of late), their achieved interval (the time
between one poll's start and the next's on the same host: median and p90), and the
load on the slow hosts (polls per minute that reached each, and how many timed out).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

from benchmarks._polling_fleet import LoopbackFleet, split_hosts

#: One poll as the harness keeps it: (host, due, started, response_time, bucket, status).
Record = Tuple[str, float, float, float, float, str]


@dataclass
class EffectSettings:
    hosts: int = 200
    duration: float = 180.0
    warmup: float = 10.0
    buckets: str = "5s,10s,30s,60s"
    upgrade: str = "count:3"
    workers: int = 32
    slow: float = 0.1
    turn_slow: float = 0.1
    slow_seconds: float = 12.0
    bin: float = 0.0  # chart bins (s); default: a twelfth of the measured time


def run_effect(settings: EffectSettings, progress=print) -> dict:
    from pssh.poll import Buckets

    adaptive = Buckets.parse(settings.buckets, settings.upgrade)
    modes = {"fixed": Buckets.fixed(adaptive.fastest), "adaptive": adaptive}
    with LoopbackFleet(settings.hosts) as fleet:
        slow_start, turning, fast = split_hosts(fleet.hosts, settings.slow, settings.turn_slow)
        groups = {"slow": slow_start, "turning": turning, "fast": fast}
        result = {"settings": dict(settings.__dict__), "sshd_processes": len(fleet.servers),
                  "groups": {k: len(v) for k, v in groups.items()}, "modes": {}}
        for name, buckets in modes.items():
            progress(f"{name}: {buckets}, {settings.hosts} hosts, "
                     f"{settings.warmup:g} + {settings.duration:g} s")
            records, timeline, states, engine = _run_mode(fleet, buckets, groups, settings)
            result["modes"][name] = analyse(records, timeline, groups, settings, states)
            result["modes"][name].update(engine, buckets=str(buckets))
            fleet.set_delay(slow_start + turning, 0)
            # Let the slow hosts' abandoned commands end before the next mode starts.
            time.sleep(min(settings.slow_seconds, 15.0))
        return result


def _run_mode(fleet: LoopbackFleet, buckets, groups: Dict[str, List[str]],
              settings: EffectSettings):
    import gevent

    from pssh.poll import Check, Poller

    records: List[Record] = []

    def keep(r) -> None:
        records.append((r.host, r.time, r.started, r.response_time, r.bucket, r.status))

    poller = Poller(fleet.hosts, [Check("probe", fleet.check_command())], buckets=buckets,
                    workers_per_bucket=settings.workers or None, on_result=keep, seed=1,
                    **fleet.connect_settings())
    fleet.set_delay(groups["slow"], settings.slow_seconds)
    start = time.time()
    timeline = {"start": start + settings.warmup,
                "turn": start + settings.warmup + settings.duration / 3,
                "end": start + settings.warmup + settings.duration}
    turn = gevent.spawn_later(timeline["turn"] - start, fleet.set_delay, groups["turning"],
                              settings.slow_seconds)
    try:
        poller.run(settings.warmup + settings.duration)
    finally:
        turn.kill()
    states = {host: state.interval for (host, _), state in poller.states().items()}
    engine = {"reconnects": poller.health().reconnects, "skipped": poller.skipped}
    return records, timeline, states, engine


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _gaps(records: Sequence[Record], hosts: Set[str], low: float, high: float) -> List[float]:
    """Seconds between consecutive poll starts of each host in ``hosts``, for second
    starts in [low, high)."""
    starts: Dict[str, List[float]] = {}
    for host, _, started, *_ in records:
        if host in hosts:
            starts.setdefault(host, []).append(started)
    gaps = []
    for values in starts.values():
        values.sort()
        gaps += [b - a for a, b in zip(values, values[1:]) if low <= b < high]
    return gaps


def _phase(records: Sequence[Record], low: float, high: float, fast: Set[str],
           slow: Set[str], fastest: float) -> dict:
    """The figures of one phase: polls due in [low, high)."""
    mine = [r for r in records if low <= r[1] < high]
    fast_polls = [r for r in mine if r[0] in fast]
    on_time = sum(r[2] - r[1] <= 0.1 * r[4] for r in fast_polls)
    slow_polls = [r for r in mine if r[0] in slow]
    minutes = (high - low) / 60
    gaps = _gaps(records, fast, low, high)
    return {
        "seconds": high - low, "slow_hosts": len(slow),
        "fast": {"polls": len(fast_polls), "on_time": on_time,
                 "on_time_share": on_time / len(fast_polls) if fast_polls else None,
                 "ok": sum(r[5] == "ok" for r in fast_polls),
                 "timeouts": sum(r[5] == "timeout" for r in fast_polls),
                 "late_max": max((r[2] - r[1] for r in fast_polls), default=0.0),
                 "late_p90": _quantile([r[2] - r[1] for r in fast_polls], 0.9)
                 if fast_polls else None,
                 "interval_median": statistics.median(gaps) if gaps else None,
                 "interval_p90": _quantile(gaps, 0.9) if gaps else None,
                 "expected_polls": round(len(fast) * (high - low) / fastest)},
        "slow": {"polls": len(slow_polls),
                 "timeouts": sum(r[5] == "timeout" for r in slow_polls),
                 "ok": sum(r[5] == "ok" for r in slow_polls),
                 "polls_per_min_per_host": len(slow_polls) / minutes / len(slow)
                 if slow and minutes else 0.0,
                 "polls_per_min": len(slow_polls) / minutes if minutes else 0.0},
    }


def analyse(records: Sequence[Record], timeline: dict, groups: Dict[str, List[str]],
            settings: EffectSettings, states: Dict[str, float]) -> dict:
    fast = set(groups["fast"])
    slow_first = set(groups["slow"])
    slow_later = slow_first | set(groups["turning"])
    fastest = min(r[4] for r in records) if records else 1.0
    start, turn, end = timeline["start"], timeline["turn"], timeline["end"]
    counted = [r for r in records if start <= r[1] < end]
    result = {
        "polls": len(records), "polls_measured": len(counted),
        "by_status": {s: sum(r[5] == s for r in counted) for s in {r[5] for r in counted}},
        "phases": {"before": _phase(records, start, turn, fast, slow_first, fastest),
                   "after": _phase(records, turn, end, fast, slow_later, fastest)},
        "end_buckets": {group: _count_by(states, hosts) for group, hosts in groups.items()},
        "series": _series(records, timeline, fast, slow_first, slow_later,
                          settings.bin or settings.duration / 12),
    }
    return result


def _count_by(states: Dict[str, float], hosts: Sequence[str]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for host in hosts:
        key = f"{states[host]:g}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _series(records: Sequence[Record], timeline: dict, fast: Set[str], slow_first: Set[str],
            slow_later: Set[str], width: float) -> List[dict]:
    """Per bin of ``width`` seconds over the measured time: the fast hosts' share of
    polls on time, their lateness (p90) and median interval; and the polls per minute
    per always-slow host over the minute before the bin's end (a slow bucket polls
    less often than a bin is wide)."""
    start, end = timeline["start"], timeline["end"]
    series = []
    for number in range(math.ceil((end - start) / width - 1e-9)):
        low = start + number * width
        high = min(end, low + width)
        phase = _phase(records, low, high, fast, slow_later, 1.0)
        late = [r[2] - r[1] for r in records if low <= r[1] < high and r[0] in fast]
        trailing = _phase(records, max(start, high - 60.0), high, fast, slow_first, 1.0)
        series.append({"t": high - start, "on_time": phase["fast"]["on_time_share"],
                       "late_p90": _quantile(late, 0.9) if late else None,
                       "interval": phase["fast"]["interval_median"],
                       "slow_per_min": trailing["slow"]["polls_per_min_per_host"]})
    return series


def _pool(workers: int) -> str:
    return f"{workers} workers per bucket" if workers else "a worker per host in each bucket"


def _fmt(value, spec: str, missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec)


def report(result: dict) -> str:
    cfg, groups = result["settings"], result["groups"]
    lines = [
        f"Effect: {cfg['hosts']} hosts ({groups['fast']} fast, {groups['slow']} slow from the "
        f"start, {groups['turning']} turning slow at 1/3), slow = {cfg['slow_seconds']:g} s "
        f"to answer; {_pool(cfg['workers'])}; {cfg['warmup']:g} s warm-up + "
        f"{cfg['duration']:g} s measured per mode, fixed first; "
        f"{result['sshd_processes']} sshd processes",
        "",
        "| mode | phase | slow hosts | fast polls on time | fast late p90 (s) "
        "| fast interval median / p90 (s) | fast polls timed out | polls/min per slow host "
        "| slow polls timed out |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, mode in result["modes"].items():
        for phase_name, phase in mode["phases"].items():
            f, s = phase["fast"], phase["slow"]
            share = _fmt(f["on_time_share"] and 100 * f["on_time_share"], ".1f")
            lines.append(
                f"| {name} ({mode['buckets']}) | {phase_name} ({phase['seconds']:.0f} s) | "
                f"{phase['slow_hosts']} | {share} % ({f['on_time']}/{f['polls']}) | "
                f"{_fmt(f['late_p90'], '.2f')} | "
                f"{_fmt(f['interval_median'], '.2f')} / {_fmt(f['interval_p90'], '.2f')} | "
                f"{f['timeouts']} | {s['polls_per_min_per_host']:.1f} | "
                f"{s['timeouts']} of {s['polls']} |")
    lines += ["", "Hosts per bucket at the end (interval s: hosts); over the whole run, "
                  "reconnections (a connection dropped as hung is made anew) and rounds "
                  "skipped (a host a whole interval behind):", ""]
    for name, mode in result["modes"].items():
        cells = ", ".join(f"{group} {counts}" for group, counts in mode["end_buckets"].items())
        lines.append(f"- {name}: {cells}; {mode['reconnects']} reconnections, "
                     f"{mode['skipped']} rounds skipped")
    return "\n".join(lines)


def chart(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    cfg = result["settings"]
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 8.5), sharex=True)
    panels = [("on_time", "fast hosts' polls\non time (%)", 100.0),
              ("late_p90", "fast hosts' polls:\nlate, p90 (s)", 1.0),
              ("slow_per_min", "polls per minute per\nalways-slow host (last 60 s)", 1.0)]
    for ax, (key, label, scale) in zip(axes, panels):
        for name, mode in result["modes"].items():
            points = [(p["t"], p[key] * scale) for p in mode["series"] if p[key] is not None]
            if points:
                ax.plot(*zip(*points), marker=".", label=f"{name} ({mode['buckets']})")
        ax.axvline(cfg["duration"] / 3, color="grey", linestyle="--", linewidth=1)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[0].annotate("more hosts turn slow", (cfg["duration"] / 3, 5), fontsize=8,
                     color="grey", xytext=(4, 0), textcoords="offset points")
    axes[-1].set_xlabel("seconds into the measured time (end of each bin)")
    groups = result["groups"]
    fig.suptitle(f"{cfg['hosts']} hosts, {groups['slow']} slow then "
                 f"{groups['slow'] + groups['turning']} slow ({cfg['slow_seconds']:g} s), "
                 f"{_pool(cfg['workers'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
