"""One timed run of the scaling benchmark in its own process; prints JSON.

    python _scaling_worker.py MODE HOSTS_JSON USER KEY COMMAND

MODE: ``single`` (one process), ``sharded:N`` (processes=N), ``dask:N`` (a
LocalCluster of N worker processes, started before the clock starts).
HOSTS_JSON: a file holding ``[[address, port], ...]``. Workers are started
before timing (a long-running program has them already); ``cpu`` is this
process's CPU plus its workers' over the run itself, start-up excluded.
"""
import json
import os
import resource
import sys
import time


def process_cpu(pid: int) -> float:
    """Seconds of CPU used by process ``pid`` (and the children it has reaped)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    mode, hosts_file, user, key, command = sys.argv[1:6]
    with open(hosts_file) as fh:
        pairs = json.load(fh)
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig
    hosts = [address for address, _ in pairs]
    config = [HostConfig(port=port) for _, port in pairs]
    settings = dict(user=user, pkey=key, allow_agent=False, identity_auth=False,
                    host_key_policy="off", timeout=120, ssh_config=False)
    kind, _, count = mode.partition(":")
    count = int(count or 1)
    cluster = dask_client = None
    if kind == "dask":
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        dask_client = Client(cluster)
        worker_pids = list(dask_client.run(os.getpid).values())
    else:
        client = ParallelSSHClient(hosts, host_config=config, processes=count,
                                   **settings)
        worker_pids = [w.pid for w in client.workers] if count > 1 else []
    parent_before = self_cpu()
    cpu_before = parent_before + sum(process_cpu(p) for p in worker_pids)
    started = time.monotonic()
    if kind == "dask":
        from pssh.clients.cluster import run_on_cluster
        with run_on_cluster(dask_client, hosts, command, host_config=config,
                            **settings) as run:
            ok = sum(result.ok for result in run)
    else:
        output = client.run_command(command, stop_on_errors=False)
        client.join(output)
        ok = sum(o.exit_code == 0 for o in output)
    wall = time.monotonic() - started
    parent_cpu = self_cpu() - parent_before  # this process alone (the dispatcher, sharded)
    cpu = self_cpu() + sum(process_cpu(p) for p in worker_pids) - cpu_before
    worker_rss = 0
    for pid in worker_pids:
        with open(f"/proc/{pid}/status") as fh:
            status = dict(line.split(":", 1) for line in fh)
        worker_rss = max(worker_rss, int(status["VmHWM"].split()[0]))
    if kind == "dask":
        dask_client.close()
        cluster.close()
    else:
        client.close()
    print(json.dumps({"wall": wall, "cpu": cpu, "parent_cpu": parent_cpu, "ok": ok,
                      "workers": len(worker_pids),
                      "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "worker_maxrss_kib": worker_rss}))


if __name__ == "__main__":
    main()
