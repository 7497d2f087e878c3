"""Latency of the first channel opened right after authentication.

    python -m benchmarks.post_auth_stall [--runs 10] [--rounds 3]

On loopback the first open_session() after auth used to stall ~43 ms for
every library: sshd keeps Nagle on for sessions without a pty, so its reply
waited for the client's ACK of the small packet it had sent just before, and
the client's delayed ACK held that ACK ~40 ms. Our ``Session`` now sets
TCP_QUICKACK in its receive callback each time libssh2 is about to wait, so
the raw API, blocking or not, no longer stalls; ssh2-python and paramiko are
measured beside it in the same run. Each library runs in its own process (ssh2-python
from its virtualenv), in round-robin order.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.peers import PeerUnavailable, default_venv_dir, environment, interpreter
from pssh.sshd import OpenSSHServer

WORKER = Path(__file__).resolve().parent / "_post_auth_worker.py"
# label -> (library whose interpreter runs it, worker mode)
CASES = {
    "ours, blocking": ("ours-blocking", "ssh2-blocking"),
    "ours, non-blocking + select()": ("ours-nonblocking", "ssh2-nonblocking"),
    "ssh2-python, blocking": ("ssh2-python", "ssh2-blocking"),
    "ssh2-python, non-blocking + select()": ("ssh2-python", "ssh2-nonblocking"),
    "paramiko": ("paramiko", "paramiko"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="connections per round and case")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    pythons = {}
    for label, (library, _) in CASES.items():
        try:
            pythons[label] = interpreter(library, default_venv_dir())
        except PeerUnavailable as err:
            print(f"{label}: skipped ({err})", file=sys.stderr)
    times = {label: [] for label in pythons}
    with OpenSSHServer() as server:
        for _ in range(args.rounds):
            for label, python in pythons.items():
                out = subprocess.run(
                    [python, str(WORKER), CASES[label][1], server.address, str(server.port),
                     server.user, server.keys.private(), str(args.runs)],
                    capture_output=True, text=True, cwd="/",
                    env=environment(CASES[label][0], python), check=True)
                times[label] += json.loads(out.stdout)
    print("| client | first channel after auth, median | max |")
    print("|---|---:|---:|")
    for label, values in times.items():
        print(f"| {label} | {statistics.median(values):.1f} ms | {max(values):.1f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
