"""Client CPU per host, wall time and system calls per login: ours against the peers and
libssh2's own floor, side by side.

    python -m benchmarks.cpu_per_host [--hosts 1 10 100 200 500] [--repeat 3]
                                      [--libs ours ours-native ours-aio hussh asyncssh
                                              parallel-ssh floor-c]
                                      [--strace-hosts 100] [--perf-hosts 100] [--floor]
                                      [--json FILE]

For each library and H, a fresh process (``benchmarks/_fanout_worker.py``; the C program of
``benchmarks/login_floor.c`` for ``floor-c``) runs one command on H loopback hosts at once
(real sshd on 127.0.0.2..; an H over 250 connects to each address more than once, as
``benchmarks.fanout`` does) and reports wall time, client CPU (user + system, the library's
imports excluded) and peak RSS, round-robin over ``--repeat`` rounds with the libraries'
order rotating. Reported per library:

- client CPU per host, start-up excluded: ``(cpu(H) - cpu(1)) / (H - 1)``, each H paired with
  the same round's one-host run, median over rounds (what remains of start-up after the
  imports -- the first connection's set-up, loading the key, thread pools -- cancels out);
- wall time and the ratios ours / hussh and ours / asyncssh (per round, median), for each of
  our runners;
- system calls per login and command: the ``--strace-hosts`` case run once more under
  ``strace -f -c``, less a one-host run under it, over H - 1; and the most frequent calls;
- client CPU per host by where it goes (the interpreter, compiled extensions, libssh2,
  libcrypto, libc, the kernel): the ``--perf-hosts`` case run once more under ``perf record``,
  less a one-host run under it, over H - 1 (``benchmarks.cpu_parts``).

``ours`` is ``ParallelSSHClient`` on gevent, ``ours-native`` the same client with
``runner="native"`` (reported unavailable, and skipped, by a build without that keyword),
``ours-aio`` is ``pssh.aio.gather_hosts``, ``floor-c`` is libssh2 driven from C with epoll.
Ours and ``floor-c`` check host keys (a known_hosts file listing the group's keys, policy
"strict"); hussh, asyncssh (``known_hosts=None``) and parallel-ssh do not. ``--floor`` adds the
public-key operations of one login, timed on this machine (``benchmarks.login_floor``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from benchmarks import cpu_parts, login_floor, syscalls
from benchmarks.fanout import MAX_ADDRESSES, run_once
from pssh.sshd import ServerGroup

LIBRARIES = ["ours", "ours-native", "ours-aio", "hussh", "asyncssh", "parallel-ssh", "floor-c"]
#: Ours, whose wall time is put against each peer's.
RUNNERS = ("ours", "ours-native", "ours-aio", "floor-c")
PEERS = ("hussh", "asyncssh")
#: Who checks host keys in this benchmark.
CHECKS_HOST_KEYS = ("ours", "ours-native", "ours-aio", "floor-c")


class Harness:
    """The servers, the known_hosts file and the compiled C floor of one run."""

    def __init__(self, group: ServerGroup, command: str, workdir: Path) -> None:
        self.group, self.command, self.workdir = group, command, workdir
        self.known_hosts = group.known_hosts_file()
        self.floor: Optional[Path] = None

    def hosts(self, count: int) -> List[str]:
        return [self.group.hosts[i % len(self.group.hosts)] for i in range(count)]

    def run(self, library: str, count: int, prefix=()) -> Optional[dict]:
        if library == "floor-c":
            assert self.floor is not None
            return login_floor.run_floor(self.floor, self.hosts(count), self.group,
                                         self.command, self.known_hosts, prefix)
        return run_once(library, self.hosts(count), self.group, self.command,
                        known_hosts=self.known_hosts, prefix=prefix)

    def _one_and_many(self, tool: str, library: str, count: int, prefix_for,
                      read) -> Optional[tuple]:
        """What ``read`` makes of a one-host and a ``count``-host run, each run under the
        prefix ``prefix_for(output)`` gives: (one, many), or None if either gave nothing."""
        readings = {}
        for hosts in (1, count):
            output = self.workdir / f"{tool}-{library}-{hosts}"
            prefix = prefix_for(output)
            result = self.run(library, hosts, prefix) if prefix else None
            if not result or "unavailable" in result:
                return None
            readings[hosts] = read(output)
            if not readings[hosts]:
                return None
        return readings[1], readings[count]

    def syscalls(self, library: str, count: int) -> Optional[Dict[str, float]]:
        """Calls per login: a ``count``-host run less a one-host run, both under strace."""
        both = self._one_and_many("strace", library, count, syscalls.strace_prefix,
                                  syscalls.read_counts)
        return syscalls.per_login(both[1], both[0], count) if both else None

    def cpu_parts(self, library: str, count: int, rate: int) -> Optional[dict]:
        """CPU per host by part (a ``count``-host run less a one-host run, both under perf,
        sampling at ``rate``), and each run's samples by shared object (to group them anew)."""
        both = self._one_and_many("perf", library, count,
                                  lambda output: cpu_parts.perf_prefix(output, rate),
                                  cpu_parts.read_samples)
        if not both:
            return None
        one, many = both
        return {"per_host_ms": cpu_parts.per_host_ms(many, one, count, rate),
                "samples": {"1": one, str(count): many}}


def _median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def measure(args) -> dict:
    results: Dict[tuple, List[Optional[dict]]] = {}
    unavailable: Dict[str, str] = {}
    libs = list(args.libs)
    with tempfile.TemporaryDirectory() as tmp, \
            ServerGroup(min(max(args.hosts), MAX_ADDRESSES), first_address=2,
                        # parallel-ssh logs in one host at a time (see benchmarks.fanout).
                        config=["LoginGraceTime 120"]) as group:
        harness = Harness(group, args.command, Path(tmp))
        if "floor-c" in libs:
            try:
                harness.floor = login_floor.build_floor(Path(tmp))
            except login_floor.FloorUnavailable as err:
                unavailable["floor-c"] = str(err)
                libs.remove("floor-c")
                print(f"floor-c skipped: {err}", file=sys.stderr)
        for round_ in range(args.repeat):
            shift = round_ % len(libs) if libs else 0
            for count in args.hosts:
                for lib in libs[shift:] + libs[:shift]:
                    if lib in unavailable:
                        continue
                    r = harness.run(lib, count)
                    if r is not None and "unavailable" in r:
                        unavailable[lib] = r["unavailable"]
                        print(f"{lib} skipped: {r['unavailable']}", file=sys.stderr)
                        continue
                    results.setdefault((lib, count), []).append(r)
                    if r is not None:
                        print(f"round {round_ + 1} H={count:<4} {lib:<13} {r['wall']:7.3f} s "
                              f"{r['cpu'] / count * 1000:7.2f} ms CPU/host "
                              f"{r['maxrss_kib'] / 1024:6.1f} MiB", file=sys.stderr)
        traced: Dict[str, Dict[str, float]] = {}
        if args.strace_hosts > 1:
            if syscalls.strace_prefix(Path(tmp) / "x"):
                for lib in libs:
                    if lib not in unavailable:
                        per = harness.syscalls(lib, args.strace_hosts)
                        if per is not None:
                            traced[lib] = per
            else:
                print("strace not installed: no system call counts", file=sys.stderr)
        parts: Dict[str, dict] = {}
        if args.perf_hosts > 1:
            if cpu_parts.perf_prefix(Path(tmp) / "probe", args.perf_rate):
                for lib in libs:
                    if lib not in unavailable:
                        per = harness.cpu_parts(lib, args.perf_hosts, args.perf_rate)
                        if per is not None:
                            parts[lib] = per
            else:
                print("perf not installed or may not sample here: no CPU by part",
                      file=sys.stderr)
    measured = [lib for lib in libs if lib not in unavailable]
    return summarize(args, measured, results, traced, parts, unavailable)


def summarize(args, libs, results, traced, parts, unavailable) -> dict:
    hosts = args.hosts

    def runs(lib, count) -> List[Optional[dict]]:
        return results.get((lib, count), [])

    wall = {lib: {str(h): _median(r["wall"] for r in runs(lib, h) if r) for h in hosts}
            for lib in libs}
    cpu_raw = {lib: {str(h): _median(r["cpu"] / h * 1000 for r in runs(lib, h) if r)
                     for h in hosts} for lib in libs}
    cpu = {lib: {str(h): _median((r["cpu"] - one["cpu"]) / (h - 1) * 1000
                                 for r, one in zip(runs(lib, h), runs(lib, 1)) if r and one)
                 for h in hosts if h > 1} for lib in libs}
    rss = {lib: {str(h): _median(r["maxrss_kib"] / 1024 for r in runs(lib, h) if r)
                 for h in hosts} for lib in libs}
    ratios = {}
    for ours in (r for r in RUNNERS if r in libs):
        for peer in (p for p in PEERS if p in libs):
            ratios[f"{ours} / {peer}"] = {
                str(h): _median(a["wall"] / b["wall"] for a, b in zip(runs(ours, h), runs(peer, h))
                                if a and b) for h in hosts}
    imports = {lib: _median(r.get("import_wall") for h in hosts for r in runs(lib, h) if r)
               for lib in libs if lib != "floor-c"}
    import_cpu = {lib: _median(r.get("import_cpu") for h in hosts for r in runs(lib, h) if r)
                  for lib in libs if lib != "floor-c"}
    calls = {}
    for lib, per in traced.items():
        total, top = syscalls.summary(per)
        calls[lib] = {"total": round(total, 1), "top": top}
    return {
        "run": f"{datetime.date.today().isoformat()}: python -m benchmarks.cpu_per_host "
               f"--hosts {' '.join(map(str, hosts))} --repeat {args.repeat}"
               + (" --floor" if args.floor else ""),
        "command": args.command, "hosts": hosts, "repeat": args.repeat, "libraries": libs,
        "host_keys_checked": [lib for lib in libs if lib in CHECKS_HOST_KEYS],
        "unavailable": unavailable,
        "wall_s": wall, "cpu_ms_per_host": cpu, "cpu_ms_per_host_with_startup": cpu_raw,
        "peak_rss_mib": rss, "wall_ratio": ratios, "import_wall_s": imports,
        "import_cpu_s": import_cpu,
        "syscalls_per_login": {"hosts": args.strace_hosts, "by_library": calls},
        "cpu_ms_per_host_by_part": {"hosts": args.perf_hosts, "samples_per_cpu_second":
                                    args.perf_rate, "by_library": parts},
        # Every run as the worker reported it (None: failed), round by round.
        "runs": {lib: {str(h): runs(lib, h) for h in hosts} for lib in libs},
    }


def floor_figures() -> dict:
    crypto = login_floor.crypto_floor()
    speed = login_floor.openssl_speed()
    return {"crypto_us": crypto, "openssl_speed_us": speed,
            "per_login_us": login_floor.login_sums(crypto)}


def _cell(value: Optional[float], fmt: str) -> str:
    return format(value, fmt) if value is not None else "n/a"


def report(result: dict) -> None:
    hosts, libs = [str(h) for h in result["hosts"]], result["libraries"]
    print(f"\nOne command ({result['command']!r}) on H hosts, median of {result['repeat']}; "
          f"host keys checked by {', '.join(result['host_keys_checked']) or 'none'}, "
          "not by the others\n")
    ratios = result["wall_ratio"]
    print("| H | " + " | ".join(libs) + "".join(f" | {r}" for r in ratios) + " |")
    print("|---:|" + "---:|" * (len(libs) + len(ratios)))
    for h in hosts:
        print(f"| {h} | " + " | ".join(_cell(result["wall_s"][lib][h], ".3f") for lib in libs)
              + "".join(f" | {_cell(ratios[r][h], '.2f')}" for r in ratios) + " |")
    print("\nClient CPU per host (ms), start-up excluded: (cpu(H) - cpu(1)) / (H - 1)\n")
    print("| library | " + " | ".join(f"H={h}" for h in hosts[1:])
          + " | import (s) | peak RSS MiB |")
    print("|---|" + "---:|" * (len(hosts) + 1))
    for lib in libs:
        cells = [_cell(result["cpu_ms_per_host"][lib].get(h), ".2f") for h in hosts[1:]]
        print(f"| {lib} | " + " | ".join(cells)
              + f" | {_cell(result['import_wall_s'].get(lib), '.3f')}"
              + f" | {_cell(result['peak_rss_mib'][lib][hosts[-1]], '.0f')} |")
    calls = result["syscalls_per_login"]
    if calls["by_library"]:
        print(f"\nSystem calls per login and command (strace -f -c, H={calls['hosts']} "
              "less H=1):\n")
        for lib, figures in calls["by_library"].items():
            print(f"- {lib}: " + syscalls.describe(figures["total"], figures["top"]))
    parts = result["cpu_ms_per_host_by_part"]
    if parts["by_library"]:
        print(f"\nClient CPU per host (ms) by where it goes (perf record -e cpu-clock, "
              f"H={parts['hosts']} less H=1):\n")
        print("| library | " + " | ".join(cpu_parts.PARTS) + " | total |")
        print("|---|" + "---:|" * (len(cpu_parts.PARTS) + 1))
        for lib, per in parts["by_library"].items():
            print(f"| {lib} | " + " | ".join(cpu_parts.describe(per["per_host_ms"])) + " |")
    for lib, why in result["unavailable"].items():
        print(f"\n{lib}: not measured ({why})")
    floor = result.get("floor")
    if floor:
        sums = floor["per_login_us"]["client"]
        print("\nPublic-key operations of one login (client side, cryptography): "
              + ", ".join(f"{k} {v:.0f} µs" for k, v in sums.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 10, 100, 200])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command", default="echo hello")
    parser.add_argument("--libs", nargs="+", default=LIBRARIES, choices=LIBRARIES)
    parser.add_argument("--strace-hosts", type=int, default=100, metavar="H",
                        help="count system calls at this H (0: not at all)")
    parser.add_argument("--perf-hosts", type=int, default=100, metavar="H",
                        help="sample where the CPU goes at this H (0: not at all)")
    parser.add_argument("--floor", action="store_true",
                        help="also time the public-key operations of one login")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    args.hosts = sorted(set(args.hosts) | {1})   # the start-up exclusion needs H = 1
    args.perf_rate = cpu_parts.sampling_rate()
    load_before = os.getloadavg()[0]
    result = measure(args)
    # The machine is shared: say how busy it was (1-minute load average, 2 cores here).
    result["load_average"] = {"start": round(load_before, 1),
                              "end": round(os.getloadavg()[0], 1)}
    if args.floor:
        result["floor"] = floor_figures()
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
