"""The capacity benchmark: polls per second one process sustains, and client CPU per
poll, with persistent sessions (the Poller) vs a fresh login for every poll (cron +
fan-out). Each run is a fresh process (benchmarks/_polling_worker.py) on the first H
hosts of one fleet; the sshd side's CPU is measured too (on this 2-core machine the
servers share the cores with the client, so polls/s is the machine's, and client CPU
per poll is what says how far one client process goes on its own).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import List, Sequence

from benchmarks._polling_fleet import LoopbackFleet

WAYS = ("poller", "fresh")
COMMAND_OUTPUT = "echo 1"


def run_capacity(host_counts: Sequence[int], ways: Sequence[str], duration: float,
                 offered: float, progress=print) -> dict:
    runs: List[dict] = []
    with LoopbackFleet(max(host_counts)) as fleet:
        progress(f"{len(fleet.hosts)} hosts on {len(fleet.servers)} sshd processes; "
                 f"{len(os.sched_getaffinity(0))} cores")
        for count in host_counts:
            for way in ways:
                figures = _run_worker(fleet, way, count, duration, offered)
                figures.update(way=way, hosts=count)
                runs.append(figures)
                progress(f"  H={count:<5} {way:<7} {figures['polls']:6d} polls "
                         f"{figures['polls'] / figures['wall']:7.1f}/s  client "
                         f"{1000 * figures['cpu'] / max(1, figures['polls']):.2f} ms/poll")
    return {"duration": duration, "offered": offered, "cores": len(os.sched_getaffinity(0)),
            "sshd_processes": len(fleet.servers), "runs": runs}


def _run_worker(fleet: LoopbackFleet, way: str, count: int, duration: float,
                offered: float) -> dict:
    job = {"way": way, "hosts": fleet.hosts[:count], "settings": fleet.connect_settings(),
           "command": fleet.check_command(COMMAND_OUTPUT), "duration": duration,
           "offered": offered, "sshd_pids": [s.process.pid for s in fleet.servers]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(job, fh)
    try:
        out = subprocess.run([sys.executable, "-m", "benchmarks._polling_worker", fh.name],
                             capture_output=True, text=True, timeout=duration + 900)
    finally:
        os.unlink(fh.name)
    if out.returncode != 0:
        raise RuntimeError(f"capacity {way} H={count} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def report(result: dict) -> str:
    lines = [
        f"Capacity: {result['duration']:g} s per run, one client process, "
        f"{result['cores']} cores shared with {result['sshd_processes']} sshd processes",
        "",
        "| hosts | way | polls (ok) | polls/s | client CPU ms/poll | client-bound polls/s "
        "| sshd CPU ms/poll | client peak RSS MiB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in result["runs"]:
        per_poll = run["cpu"] / run["polls"] if run["polls"] else float("nan")
        lines.append(
            f"| {run['hosts']} | {run['way']} | {run['polls']} ({run['ok']}) | "
            f"{run['polls'] / run['wall']:.1f} | {1000 * per_poll:.2f} | "
            f"{1 / per_poll:.0f} | {1000 * run['sshd_cpu'] / max(1, run['polls']):.2f} | "
            f"{run['maxrss_kib'] / 1024:.0f} |")
    return "\n".join(lines)
