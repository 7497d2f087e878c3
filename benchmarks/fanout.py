"""Fan-out: one command on H loopback hosts, ours vs peers, side by side.

    python -m benchmarks.fanout [--hosts 1 10 100 200] [--repeat 3] [--command echo]
                                [--rtt MS]

Starts max(H) real sshd hosts on 127.0.0.x (pssh.sshd; at most 250: a larger
H connects to each address more than once), then for each H and library runs
the whole job (connect, authenticate, run, read, exit code) in a fresh
process, round-robin across repeats. Reports median wall time, client CPU
per host and peak RSS. Peers come from benchmarks/peers.sh's virtualenvs.

``--rtt MS`` runs all of it (servers and clients) inside a network namespace
whose loopback has that round-trip time (benchmarks/netns_delay.py; root).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.peers import environment, other_builds, split_build, with_other_builds
from pssh.sshd import ServerGroup

ROOT = Path(os.environ.get("BENCH_VENV_DIR") or Path(__file__).resolve().parent.parent)
WORKER = Path(__file__).resolve().parent / "_fanout_worker.py"
MAX_ADDRESSES = 250  # 127.0.0.2 .. 127.0.0.251
VENVS = {"parallel-ssh": ".venv-parallel-ssh", "asyncssh": ".venv-bench",
         "paramiko": ".venv-bench", "fabric": ".venv-bench", "hussh": ".venv-bench",
         "hussh-aio": ".venv-bench"}
#: Peers that may run under this interpreter when their virtualenv is missing and their
#: module is installed here (the bench extra); never parallel-ssh, whose pssh is not ours.
HERE_IF_INSTALLED = {"asyncssh": "asyncssh", "paramiko": "paramiko", "fabric": "fabric",
                     "hussh": "hussh", "hussh-aio": "hussh"}


# Same-round wall-time ratios printed beside the table: (ours, peer).
RATIOS = [("ours", "asyncssh"), ("ours", "hussh"), ("ours-aio", "asyncssh"),
          ("ours-aio", "ours"), ("ours-aio", "hussh-aio")]


#: Our libraries, which --other-build runs again under another build.
OURS = ("ours", "ours-aio")
BUILDS: dict = {}


def run_once(library, hosts, group, command, pool=None, known_hosts=None, prefix=()):
    """One fan-out in a fresh worker process: its JSON, or None if it failed. A library
    this build lacks gives ``{"unavailable": reason}``. ``known_hosts``: our libraries
    check host keys against that file; ``prefix``: a command the worker runs under
    (``strace ...``)."""
    name, build = split_build(library)
    python = BUILDS[build] if build else _interpreter(name)
    env = environment(name, python)  # parallel-ssh's pssh must not meet ours
    out = subprocess.run([*prefix, python, str(WORKER),
                          *([f"--known-hosts={known_hosts}"] if known_hosts else []),
                          name, ",".join(hosts), str(group.port),
                          group.servers[0].user, group.keys.private(), command,
                          *([str(pool)] if pool else [])],
                         capture_output=True, text=True, env=env, cwd="/", timeout=600)
    if out.returncode != 0:
        print(f"{library} H={len(hosts)} failed: "
              f"{(out.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
        return None
    result = json.loads(out.stdout)
    if "unavailable" in result:
        return result
    if result["ok"] != len(hosts):
        print(f"{library} H={len(hosts)}: only {result['ok']} hosts succeeded", file=sys.stderr)
        return None
    return result


def _interpreter(name: str) -> str:
    """The Python that runs ``name``: its virtualenv's, or this one for ours (and for a
    peer installed here whose virtualenv is missing)."""
    venv = VENVS.get(name)
    if venv is None:
        return sys.executable
    python = ROOT / venv / "bin" / "python"
    if not python.exists() and name in HERE_IF_INSTALLED \
            and importlib.util.find_spec(HERE_IF_INSTALLED[name]) is not None:
        return sys.executable
    return str(python)


def _in_delayed_namespace(rtt: float, argv) -> int:
    """Run this benchmark again, without --rtt, inside a namespace with that RTT."""
    from benchmarks.netns_delay import DelayedLoopback

    inner, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--rtt":
            skip = True
        elif not arg.startswith("--rtt="):
            inner.append(arg)
    with DelayedLoopback(rtt) as ns:
        print(f"inside network namespace {ns.name}: {rtt:g} ms RTT on loopback"
              f"{'' if ns.realtime else ' (delay program NOT at real-time priority)'}",
              file=sys.stderr)
        # Where this package was imported from, as given (not resolved: a symlinked
        # benchmarks/ must not put a source tree's unbuilt ssh2/ first on the path).
        root = str(Path(__file__).absolute().parent.parent)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p))
        return subprocess.run(ns.command([sys.executable, "-m", "benchmarks.fanout", *inner]),
                              env=env).returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 10, 100, 200])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--command", default="echo hello")
    parser.add_argument("--libs", nargs="+",
                        default=["ours", "ours-aio", "asyncssh", "hussh", "hussh-aio",
                                 "paramiko", "fabric", "parallel-ssh"])
    parser.add_argument("--rtt", type=float, metavar="MS",
                        help="emulate this round-trip time (network namespace; needs root)")
    parser.add_argument("--other-build", action="append", metavar="LABEL=PYTHON",
                        help="also run ours under this interpreter (another build of this "
                             "project) as ours@LABEL, with ratios: before/after figures")
    args = parser.parse_args(argv)
    BUILDS.update(other_builds(args.other_build))
    args.libs = with_other_builds(args.libs, BUILDS, OURS)
    if args.rtt:
        return _in_delayed_namespace(args.rtt, argv if argv is not None else sys.argv[1:])
    results: dict = {}
    with tempfile.TemporaryDirectory(), \
            ServerGroup(min(max(args.hosts), MAX_ADDRESSES), first_address=2,
                        # OpenSSH's default: parallel-ssh logs in one host at a
                        # time and needs more than the test servers' 30 s at H=500.
                        config=["LoginGraceTime 120"]) as group:
        for round_ in range(args.repeat):
            # Rotate the order each round: no library always follows the same one.
            shift = round_ % len(args.libs)
            for count in args.hosts:
                hosts = [group.hosts[i % len(group.hosts)] for i in range(count)]
                for lib in args.libs[shift:] + args.libs[:shift]:
                    r = run_once(lib, hosts, group, args.command)
                    if r is not None and "unavailable" in r:
                        print(f"{lib}: {r['unavailable']}", file=sys.stderr)
                        r = None
                    # None keeps the rounds aligned for the per-round ratios.
                    results.setdefault((lib, count), []).append(r)
                    if r is not None:
                        print(f"round {round_ + 1} H={count:<4} {lib:<13} {r['wall']:7.3f} s "
                              f"{r['cpu'] / count * 1000:7.2f} ms CPU/host "
                              f"{r['maxrss_kib'] / 1024:6.1f} MiB", file=sys.stderr)

    def med(lib, count, key):
        values = [r[key] for r in results.get((lib, count), []) if r]
        return statistics.median(values) if values else None

    def ratio(ours, peer, count):
        """Median over rounds of ours/peer wall time, each pair from the same round."""
        pairs = [a["wall"] / b["wall"] for a, b in zip(results.get((ours, count), []),
                                                      results.get((peer, count), [])) if a and b]
        return f"{statistics.median(pairs):.2f}x" if pairs else "n/a"

    pairs = [(ours, peer) for ours, peer in RATIOS if ours in args.libs and peer in args.libs]
    pairs += [(split_build(lib)[0], lib) for lib in args.libs if split_build(lib)[1]]
    print(f"\nFan-out of {args.command!r}, wall time, median of {args.repeat}\n")
    print("| H | " + " | ".join(args.libs) + "".join(f" | {o} / {p}" for o, p in pairs) + " |")
    print("|---:|" + "---:|" * (len(args.libs) + len(pairs)))
    for count in args.hosts:
        cells = [f"{med(lib, count, 'wall'):.3f} s" if med(lib, count, "wall") else "n/a"
                 for lib in args.libs]
        print(f"| {count} | " + " | ".join(cells + [ratio(o, p, count) for o, p in pairs])
              + " |")
    print("\nClient CPU per host at each H (ms; the fan-out alone) and, apart, the CPU of\n"
          "importing the library; peak RSS at the largest H\n")
    print("| library | " + " | ".join(f"H={count}" for count in args.hosts)
          + " | import (ms) | peak RSS MiB |")
    print("|---|" + "---:|" * (len(args.hosts) + 2))
    top = max(args.hosts)
    for lib in args.libs:
        cells = [f"{med(lib, count, 'cpu') / count * 1000:.2f}" if med(lib, count, "cpu")
                 else "n/a" for count in args.hosts]
        imp, rss = med(lib, top, "import_cpu"), med(lib, top, "maxrss_kib")
        print(f"| {lib} | " + " | ".join(cells) + f" | {imp * 1000:.0f} | {rss / 1024:.0f} |"
              if imp is not None else f"| {lib} | " + " | ".join(cells) + " | n/a | n/a |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
