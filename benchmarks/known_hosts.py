"""Host key verification cost against known_hosts files of fleet size.

    python -m benchmarks.known_hosts [--lines 10 10000 100000] [--hosts 200] [--repeat 3]

For each file size, plain and hashed: the time to read and index the file
(the first verification after a change of the file), then the cost per host
of verifying a host whose key is in the file (``known``) and of one that is
not (``unknown``: with hashed names every line's salt must be tried, one
HMAC each, as OpenSSH does too). Medians of ``--repeat`` runs; the work is
``pssh.known_hosts.verify_host_key``, the same call the clients make.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from benchmarks.known_hosts_files import filler, line, random_key
from pssh.core import known_hosts


class _PresentedKey:
    """What verify_host_key asks of a session: the key the server presented."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def hostkey(self):
        return self._key, 0


def measure(lines: int, hashed: bool, hosts: int) -> dict:
    directory = tempfile.mkdtemp(prefix="known-hosts-bench-")
    path = os.path.join(directory, "known_hosts")
    ours = [(f"target-{i}.example", random_key("ssh-ed25519")) for i in range(hosts)]
    with open(path, "w") as fh:
        fh.writelines(filler(max(lines - hosts, 0), hashed))
        fh.writelines(line(name, key, hashed) for name, key in ours)
    known_hosts._cache.clear()
    started = time.perf_counter()
    known_hosts.load(path)
    load = time.perf_counter() - started
    started = time.perf_counter()
    for name, key in ours:
        known_hosts.verify_host_key(_PresentedKey(key), name, 22, "strict", path)
    known = (time.perf_counter() - started) / hosts
    unknown_hosts = min(hosts, 20)
    started = time.perf_counter()
    for i in range(unknown_hosts):
        try:
            known_hosts.verify_host_key(_PresentedKey(random_key("ssh-ed25519")),
                                        f"new-{i}.example", 22, "strict", path)
        except known_hosts.UnknownHostKeyError:
            pass
    unknown = (time.perf_counter() - started) / unknown_hosts
    os.unlink(path)
    os.rmdir(directory)
    return {"load": load, "known": known, "unknown": unknown}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.known_hosts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[10, 10_000, 100_000])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print("| lines | names | load + index | verify, known host | verify, unknown host |")
    print("|---:|---|---:|---:|---:|")
    for lines in args.lines:
        for hashed in (False, True):
            runs = [measure(lines, hashed, min(args.hosts, lines)) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"| {lines:,} | {'hashed' if hashed else 'plain'} | {med['load'] * 1e3:.1f} ms "
                  f"| {med['known'] * 1e6:.1f} us | {med['unknown'] * 1e6:.0f} us |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
