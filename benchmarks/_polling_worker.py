"""One capacity run in a process of its own; reads a JSON job file, prints JSON figures.

    python -m benchmarks._polling_worker JOB.json

JOB: ``{"way": "poller"|"fresh", "hosts": [...], "settings": {...}, "command": "...",
"duration": s, "offered": polls/s, "sshd_pids": [...]}``.

``poller``: one :class:`pssh.poll.Poller` with persistent sessions, a fixed interval of
hosts / offered seconds (more than it can do: it polls flat out). The window opens once
every host has answered once (logins done) and lasts ``duration`` seconds.

``fresh``: the cron + fan-out way: each round a new ParallelSSHClient logs in to every
host, runs the command, reads it and disconnects; rounds back to back for ``duration``
seconds (at least two), after one untimed round (first-use costs). In one process, so
no interpreter start-up per round: a cron job would pay that too.

Figures: polls and ok polls in the window, its wall time, this process's CPU seconds,
the sshd side's CPU seconds (every process below the given sshd listeners), peak RSS.
"""
import json
import resource
import sys
import time

from benchmarks._polling_fleet import tree_cpu


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _sshd_cpu(pids) -> float:
    return sum(tree_cpu(pid) for pid in pids)


def poller_way(job: dict) -> dict:
    import gevent
    from gevent.event import Event

    from pssh.poll import Buckets, Check, Poller

    hosts = job["hosts"]
    counts = {"polls": 0, "ok": 0}
    answered = set()
    everyone = Event()

    def on_result(result) -> None:
        counts["polls"] += 1
        if result.ok:
            counts["ok"] += 1
            if len(answered) < len(hosts):
                answered.add(result.host)
                if len(answered) == len(hosts):
                    everyone.set()

    interval = len(hosts) / job["offered"]
    poller = Poller(hosts, [Check("probe", job["command"], timeout=60)],
                    buckets=Buckets.fixed(interval), on_result=on_result,
                    health_interval=3600, **job["settings"])
    figures: dict = {"interval": interval}

    def measure() -> None:
        started = time.monotonic()
        if not everyone.wait(timeout=300):
            figures["error"] = f"only {len(answered)} of {len(hosts)} hosts answered"
        gevent.sleep(1)  # the logins' last replies out of the way
        figures["warmup"] = time.monotonic() - started
        sshd0 = _sshd_cpu(job["sshd_pids"])
        cpu0, polls0, ok0, t0 = _cpu(), counts["polls"], counts["ok"], time.monotonic()
        gevent.sleep(job["duration"])
        cpu1, polls1, ok1, t1 = _cpu(), counts["polls"], counts["ok"], time.monotonic()
        figures.update(polls=polls1 - polls0, ok=ok1 - ok0, wall=t1 - t0, cpu=cpu1 - cpu0,
                       sshd_cpu=_sshd_cpu(job["sshd_pids"]) - sshd0)
        poller.stop()

    watcher = gevent.spawn(measure)
    poller.run()
    watcher.join()
    figures.update(skipped=poller.skipped, reconnects=poller.health().reconnects)
    return figures


def fresh_way(job: dict) -> dict:
    from pssh.clients import ParallelSSHClient

    hosts = job["hosts"]

    def one_round() -> int:
        client = ParallelSSHClient(hosts, pool_size=len(hosts), timeout=60, **job["settings"])
        try:
            output = client.run_command(job["command"], stop_on_errors=False)
            client.join(output)
            ok = 0
            for host_output in output:
                if host_output.exception is None:
                    for _ in host_output.stdout:
                        pass
                    ok += host_output.exit_code == 0
            return ok
        finally:
            client.close()

    one_round()
    sshd0 = _sshd_cpu(job["sshd_pids"])
    cpu0, t0 = _cpu(), time.monotonic()
    rounds = ok = 0
    while rounds < 2 or time.monotonic() - t0 < job["duration"]:
        ok += one_round()
        rounds += 1
    cpu1, t1 = _cpu(), time.monotonic()
    return {"polls": rounds * len(hosts), "ok": ok, "wall": t1 - t0, "cpu": cpu1 - cpu0,
            "sshd_cpu": _sshd_cpu(job["sshd_pids"]) - sshd0, "rounds": rounds}


def main() -> None:
    with open(sys.argv[1]) as fh:
        job = json.load(fh)
    figures = {"poller": poller_way, "fresh": fresh_way}[job["way"]](job)
    figures["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
