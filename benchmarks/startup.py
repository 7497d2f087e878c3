"""Start-up: wall time of a fresh process that imports a library (or runs ``pssh --help``).

    python -m benchmarks.startup [--runs 21]

Every case runs once per round, the rounds interleaving all cases, so that a
busy moment of the machine weighs on all of them alike; medians are reported
beside the bare interpreter's. Peers run under their own interpreter (see
``benchmarks.peers``); a peer that is not installed is left out with a note.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from benchmarks.peers import PeerUnavailable, default_venv_dir, environment, interpreter

# label -> (library whose interpreter runs it, arguments after the interpreter)
CASES = {
    "interpreter alone": ("ours-blocking", ["-c", "pass"]),
    "import gevent (+ socket, pool, lock)": (
        "ours-blocking", ["-c", "import gevent.socket, gevent.pool, gevent.lock"]),
    "import ssh2.session": ("ours-blocking", ["-c", "import ssh2.session"]),
    "import pssh.clients": ("ours-blocking", ["-c", "import pssh.clients"]),
    "pssh --help": ("ours-blocking", ["-m", "pssh", "--help"]),
    "import asyncssh": ("asyncssh", ["-c", "import asyncssh"]),
    "import paramiko": ("paramiko", ["-c", "import paramiko"]),
    "import hussh": ("hussh", ["-c", "import hussh"]),
}


def _wall(python: str, args, env) -> float:
    start = time.perf_counter()
    subprocess.run([python, *args], cwd="/", env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds (each runs every case once)")
    args = parser.parse_args(argv)
    runnable = {}
    for label, (library, case_args) in CASES.items():
        try:
            python = interpreter(library, default_venv_dir())
        except PeerUnavailable as err:
            print(f"{label}: skipped ({err})", file=sys.stderr)
            continue
        runnable[label] = (python, case_args, environment(library, python))
    for python, case_args, env in runnable.values():  # warm the page cache and .pyc files
        _wall(python, case_args, env)
    times = {label: [] for label in runnable}
    for _ in range(args.runs):
        for label, (python, case_args, env) in runnable.items():
            times[label].append(_wall(python, case_args, env))
    base = statistics.median(times["interpreter alone"]) if "interpreter alone" in times else 0.0
    print(f"| command | median of {args.runs} | minus the interpreter |")
    print("|---|---:|---:|")
    for label, samples in times.items():
        median = statistics.median(samples)
        print(f"| {label} | {median * 1000:.0f} ms | {(median - base) * 1000:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
