"""Scaling: one command on up to thousands of loopback hosts, one process vs sharded vs Dask.

    python -m benchmarks.scaling [--hosts 200 500 2000] [--modes single sharded:2 dask:2]
                                 [--repeat 1] [--chart docs/images/scaling.png]

Starts ceil(max(H) / 16) sshd processes, each listening on 16 loopback
addresses (OpenSSH's most listen sockets) on a port of its own, so H hosts are
H distinct (address, port) pairs spread over the sshd processes. Each run is a
fresh client process (benchmarks/_scaling_worker.py) whose workers start
before the clock. Reported per run: wall time, client CPU per host (its
workers included, interpreter start-up excluded), sshd CPU per login (the
listeners' reaped connection processes), the sshd-bound limit (sshd CPU /
cores: the least wall time the servers allow on this machine) and wall / limit,
peak client RSS.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pssh.sshd import ClientKeys, OpenSSHServer, common_free_port

WORKER = Path(__file__).resolve().parent / "_scaling_worker.py"
ADDRESSES = [f"127.0.0.{i}" for i in range(2, 242)]  # 15 x 16


class Fleet:
    """sshd processes listening on 16 loopback addresses each (OpenSSH's limit of listen
    sockets, MAX_LISTEN_SOCKS), 250 addresses to a port: every host is a distinct
    (address, port) pair with a listener of its own kind."""

    PER_SERVER = 16

    def __init__(self, hosts: int) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="pssh-scaling-"))
        self.keys = ClientKeys.generate(self.workdir / "client")
        host_keys = OpenSSHServer(workdir=self.workdir / "hostkeys").host_keys  # one set for all
        self.servers = []
        self.hosts = []
        for number in range(math.ceil(hosts / self.PER_SERVER)):
            first = number * self.PER_SERVER % len(ADDRESSES)
            addresses = ADDRESSES[first:first + self.PER_SERVER]
            port = common_free_port(addresses)
            self.servers.append(OpenSSHServer(
                addresses[0], port, workdir=self.workdir / f"sshd{number}", keys=self.keys,
                host_keys=host_keys, config=[f"ListenAddress {a}:{port}" for a in addresses[1:]]
                + ["LogLevel ERROR"]))
            self.hosts.extend((address, port) for address in addresses)

    def __enter__(self) -> "Fleet":
        for server in self.servers:
            server.start()
        return self

    def __exit__(self, *exc_info) -> None:
        for server in self.servers:
            server.close()

    def pairs(self, count: int):
        """``count`` distinct (address, port) hosts, spread evenly over the sshd processes."""
        per = self.PER_SERVER
        n = len(self.servers)
        return [self.hosts[(i % n) * per + (i // n) % per] for i in range(count)]

    def cpu(self) -> float:
        """CPU seconds of the sshd processes, their finished connections included."""
        total = 0.0
        for server in self.servers:
            with open(f"/proc/{server.process.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        return total


def run_once(fleet: Fleet, mode: str, count: int, command: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(fleet.pairs(count), fh)
    try:
        before = fleet.cpu()
        out = subprocess.run([sys.executable, str(WORKER), mode, fh.name,
                              fleet.servers[0].user, fleet.keys.private(), command],
                             capture_output=True, text=True, cwd="/", timeout=1800)
        sshd_cpu = fleet.cpu() - before
    finally:
        os.unlink(fh.name)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} H={count} failed: {out.stderr.strip()[-2000:]}")
    result = json.loads(out.stdout)
    cores = len(os.sched_getaffinity(0))
    result.update(mode=mode, hosts=count, sshd_cpu=sshd_cpu, cores=cores,
                  sshd_limit=sshd_cpu / cores)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[200, 500, 2000])
    parser.add_argument("--modes", nargs="+", default=["single", "sharded:2", "dask:2"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--command", default="echo ok")
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--chart", help="draw wall time vs hosts (PNG) to this file")
    args = parser.parse_args(argv)
    runs = []
    with Fleet(max(args.hosts)) as fleet:
        print(f"{len(fleet.servers)} sshd x {Fleet.PER_SERVER} addresses; "
              f"{len(os.sched_getaffinity(0))} cores", file=sys.stderr)
        for count in args.hosts:
            for _ in range(args.repeat):
                for mode in args.modes:  # round-robin: drift hits every mode alike
                    result = run_once(fleet, mode, count, args.command)
                    runs.append(result)
                    print(f"  {mode:>10} H={count:<5} wall {result['wall']:6.2f} s  "
                          f"ok {result['ok']}", file=sys.stderr)
    report(runs, args.modes, args.hosts)
    model(runs)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    if args.chart:
        chart(runs, args.modes, args.hosts, args.chart)
    return 0 if all(r["ok"] == r["hosts"] for r in runs) else 1


def _median(runs, key):
    return statistics.median(r[key] for r in runs)


def report(runs, modes, host_counts) -> None:
    print("| hosts | mode | ok | wall s | client CPU ms/host (parent) | sshd CPU ms/login | "
          "sshd-bound limit s | wall / limit | client peak RSS MiB (worker) | "
          "wall vs single |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for count in host_counts:
        single = [r for r in runs if r["hosts"] == count and r["mode"] == "single"]
        for mode in modes:
            mine = [r for r in runs if r["hosts"] == count and r["mode"] == mode]
            if not mine:
                continue
            wall, limit = _median(mine, "wall"), _median(mine, "sshd_limit")
            vs = f"{wall / _median(single, 'wall'):.2f}x" if single else "-"
            print(f"| {count} | {mode} | {min(r['ok'] for r in mine)}/{count} | {wall:.2f} | "
                  f"{1000 * _median(mine, 'cpu') / count:.2f} "
                  f"({1000 * _median(mine, 'parent_cpu') / count:.2f}) | "
                  f"{1000 * _median(mine, 'sshd_cpu') / count:.1f} | {limit:.2f} | "
                  f"{wall / limit:.2f} | {_median(mine, 'maxrss_kib') / 1024:.0f} "
                  f"({_median(mine, 'worker_maxrss_kib') / 1024:.0f}) | {vs} |")


def model(runs, cores=(2, 16, 64)) -> None:
    """Client-bound logins per second with servers elsewhere, from the measured per-host
    CPU: one process is one core; sharded, N-1 workers share the per-host work and the
    parent dispatches every host on a core of its own."""
    largest = max(r["hosts"] for r in runs)
    single = [r for r in runs if r["hosts"] == largest and r["mode"] == "single"]
    sharded = [r for r in runs if r["hosts"] == largest and r["mode"].startswith("sharded")
               and "parent_cpu" in r]
    if not single or not sharded:
        return
    one = _median(single, "cpu") / largest
    parent = _median(sharded, "parent_cpu") / largest
    worker = (_median(sharded, "cpu") - _median(sharded, "parent_cpu")) / largest
    print(f"\nmodel (H={largest}): one process {1000 * one:.2f} ms/host -> {1 / one:.0f} "
          f"logins/s on any machine; sharded: parent {1000 * parent:.2f} ms/host, workers "
          f"{1000 * worker:.2f} ms/host")
    for n in cores:
        rate = min(1 / parent, (n - 1) / worker) if n > 1 else 1 / (parent + worker)
        print(f"  {n:>2} cores: sharded over {max(1, n - 1)} workers -> {rate:.0f} logins/s "
              f"({rate * one:.1f}x one process); 10,000 hosts in {10000 / rate:.0f} s "
              f"of client time")


def chart(runs, modes, host_counts, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode in modes:
        points = [(c, _median([r for r in runs if r["hosts"] == c and r["mode"] == mode],
                              "wall")) for c in host_counts
                  if any(r["hosts"] == c and r["mode"] == mode for r in runs)]
        ax.plot(*zip(*points), marker="o", label=mode)
    limits = [(c, _median([r for r in runs if r["hosts"] == c], "sshd_limit"))
              for c in host_counts]
    ax.plot(*zip(*limits), linestyle="--", color="grey", label="sshd-bound limit")
    ax.set_xlabel("hosts")
    ax.set_ylabel("wall time (s)")
    ax.set_title("echo on H loopback hosts, 2 cores shared with the servers")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
