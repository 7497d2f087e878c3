"""Thread/greenlet pool size vs time to finish H hosts (after Roquero & Aracil).

    python -m benchmarks.pool_size [--hosts 100] [--pools 1 2 5 10 25 50 100] [--repeat 3]

Runs one command on H loopback sshd hosts with at most POOL hosts in flight:
ours (ParallelSSHClient pool_size, greenlets) and paramiko (a thread pool of
POOL threads), each in a fresh process, round-robin across repeats. Prints
the median wall time and the speed-up over a pool of 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from benchmarks.fanout import run_once
from pssh.sshd import ServerGroup


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pools", type=int, nargs="+", default=[1, 2, 5, 10, 25, 50, 100])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command", default="echo hello")
    parser.add_argument("--libs", nargs="+", default=["ours", "paramiko"])
    args = parser.parse_args(argv)
    walls: dict = {}
    with tempfile.TemporaryDirectory(), ServerGroup(args.hosts, first_address=2) as group:
        for round_ in range(args.repeat):
            for pool in args.pools:
                for lib in args.libs:
                    result = run_once(lib, group.hosts, group, args.command, pool=pool)
                    if result is not None:
                        walls.setdefault((lib, pool), []).append(result["wall"])
                        print(f"round {round_ + 1} pool={pool:<4} {lib:<9} {result['wall']:7.3f} s",
                              file=sys.stderr)
    print(f"\nTime to finish {args.hosts} hosts by pool size, median of {args.repeat}\n")
    header = " | ".join(f"{lib} s | {lib} speed-up" for lib in args.libs)
    print(f"| pool | {header} |\n|---:|" + "---:|---:|" * len(args.libs))
    for pool in args.pools:
        cells = []
        for lib in args.libs:
            wall = statistics.median(walls[(lib, pool)]) if walls.get((lib, pool)) else None
            base = statistics.median(walls[(lib, args.pools[0])]) \
                if walls.get((lib, args.pools[0])) else None
            cells += [f"{wall:.3f}" if wall else "n/a",
                      f"{base / wall:.1f}x" if wall and base else "n/a"]
        print(f"| {pool} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
