"""Runs spread over a real Dask cluster (scheduler and worker processes on this machine)."""
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from distributed import Client, LocalCluster

from pssh import exceptions as exc
from pssh.clients.cluster import plan_shards, run_on_cluster
from pssh.fanout.dask import cluster_workers
from pssh.sshd import ServerGroup, free_port
from loopback import address, addresses
from processes import processes_with
from waiting import eventually, gone

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(4)) as g:
        yield g


@pytest.fixture(scope="module")
def scheduler():
    """A scheduler with no workers of its own: each test starts the workers it needs."""
    cluster = LocalCluster(n_workers=0, processes=True, dashboard_address=":0")
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def start_worker(scheduler):
    """Starts ``dask worker`` processes (no nanny: a killed one stays dead) with resources."""
    started = []

    def start(name, resources):
        proc = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", scheduler.scheduler.address,
             "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", name,
             "--resources", resources], env=ENV, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        started.append(proc)
        scheduler.wait_for_workers(len(started), timeout=60)
        address = next(a for a, w in cluster_workers(scheduler).items()
                       if w["name"] == name)
        return proc, address
    yield start
    for proc in started:
        proc.kill()
        proc.wait()
    eventually(lambda: not cluster_workers(scheduler), 30,
               "the scheduler to see its workers gone")


def test_every_look_at_the_workers_sees_them_while_the_client_refreshes_its_own_copy():
    """The client refreshes its cached copy of the scheduler's identity (without the
    workers) on a timer: a look at the workers just after one found none, and a run
    failed every task as lost with its worker. Here the timer fires every 2 ms."""
    import dask
    with dask.config.set({"distributed.client.scheduler-info-interval": "2ms"}):
        with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            looks = [len(cluster_workers(client)) for _ in range(300)]
    assert looks == [1] * 300


def options(group, tmp_path):
    return dict(port=group.port, pkey=group.keys.private(), allow_agent=False,
                identity_auth=False, known_hosts=str(tmp_path / "known_hosts"), timeout=10)


def test_plan_shards_by_label_then_size():
    hosts = ["a1", "b1", "a2", "a3", "b2"]
    plan = plan_shards(hosts, lambda h: h[0] if h != "a3" else None, 1)
    assert plan == [("a", [0]), ("a", [2]), ("b", [1]), ("b", [4]), (None, [3])]
    assert plan_shards(hosts, None, 2) == [(None, [0, 1]), (None, [2, 3]), (None, [4])]


def test_each_host_comes_back_once_as_it_completes(group, tmp_path, scheduler, start_worker):
    _, first = start_worker("w1", "any=1")
    _, second = start_worker("w2", "any=1")
    refused = address()   # nothing listens there
    hosts = group.hosts + [refused]
    from pssh.config import HostConfig
    configs = [HostConfig(port=group.port)] * len(group.hosts) + [HostConfig(port=free_port())]
    slow = group.hosts[0]
    command = f'case "$SSH_CONNECTION" in *" {slow} "*) sleep 3;; esac; echo $SSH_CONNECTION'
    with run_on_cluster(scheduler, hosts, command, host_config=configs, shard_size=3,
                        **options(group, tmp_path)) as run:
        results = list(run)
    assert sorted(r.index for r in results) == list(range(len(hosts)))
    by_host = {r.index: r for r in results}
    for i, host in enumerate(group.hosts):
        assert by_host[i].exit_code == 0 and by_host[i].stdout.split()[2] == host
    assert isinstance(by_host[len(hosts) - 1].exception, exc.ConnectionRefused)
    assert results[-1].host == slow  # the slow host's own shard mate came back first
    assert {r.worker.split()[0] for r in results} == {first, second}


def test_labelled_hosts_run_only_on_matching_workers(group, tmp_path, scheduler,
                                                     start_worker):
    _, dc1 = start_worker("dc1-worker", "dc1=2")
    _, dc2 = start_worker("dc2-worker", "dc2=2")
    labels = {host: ("dc1" if i % 2 == 0 else "dc2") for i, host in enumerate(group.hosts)}
    with run_on_cluster(scheduler, group.hosts * 2, "true", labels=labels, shard_size=1,
                        **options(group, tmp_path)) as run:
        results = list(run)
    assert len(results) == 8 and all(r.exit_code == 0 for r in results)
    for result in results:
        expected = dc1 if labels[result.host] == "dc1" else dc2
        assert result.worker.split()[0] == expected


@pytest.mark.parametrize("idempotent", [False, True], ids=["run-once", "idempotent"])
def test_a_lost_worker_fails_its_hosts_or_reruns_them(group, tmp_path, scheduler,
                                                      start_worker, idempotent):
    victim, victim_address = start_worker("victim", "pool=1")
    _, survivor = start_worker("survivor", "pool=1")
    marker = f"sleep 3.{uuid.uuid4().int % 10**9}"  # this test's commands alone
    labels = {host: "pool" for host in group.hosts}
    with run_on_cluster(scheduler, group.hosts, f"echo start; {marker}; echo end",
                        labels=labels, shard_size=2, idempotent=idempotent,
                        **options(group, tmp_path)) as run:
        eventually(lambda: len(processes_with(marker)), 30, "both shards running",
                   equal_to=4)
        victim.send_signal(signal.SIGKILL)
        results = list(run)
    assert sorted(r.index for r in results) == [0, 1, 2, 3]  # each host once
    lost = [r for r in results if r.exception is not None]
    if idempotent:
        assert lost == [] and all(r.stdout == "start\nend" for r in results)
        assert {r.worker.split()[0] for r in results} == {survivor}  # re-run there
    else:
        assert len(lost) == 2
        for result in lost:
            assert isinstance(result.exception, exc.WorkerError)
            assert result.host in str(result.exception)
            assert "not run again" in str(result.exception)
        done = [r for r in results if r.exception is None]
        assert [r.stdout for r in done] == ["start\nend"] * 2
        assert {r.worker.split()[0] for r in done} == {survivor}
    assert victim_address not in {r.worker.split()[0] for r in results if r.exit_code == 0}


@pytest.mark.parametrize("idempotent", [False, True], ids=["run-once", "idempotent"])
def test_command_line_runs_a_lost_workers_hosts_again_only_with_idempotent(
        group, tmp_path, scheduler, start_worker, idempotent):
    """pssh run --scheduler ADDRESS [--idempotent]: the hosts of a worker killed mid-run
    fail (exit 1, each named), or run again on the worker left."""
    victim, _ = start_worker("victim", "any=1")
    start_worker("survivor", "any=1")
    marker = f"sleep 3.{uuid.uuid4().int % 10**9}"  # this test's commands alone
    run = subprocess.Popen(
        [sys.executable, "-m", "pssh", "run", "-H", " ".join(group.hosts), "--port",
         str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
         "--known-hosts", str(tmp_path / "known_hosts"), "--json",
         "--scheduler", scheduler.scheduler.address, *(["--idempotent"] * idempotent),
         "--", f"echo start; {marker}; echo end"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        # Host i goes to shard i % 2: both workers hold two of the four. (The command
        # line of pssh itself holds the marker too.)
        eventually(lambda: len(set(processes_with(marker)) - {run.pid}), 60,
                   "the four commands running", equal_to=4)
        victim.kill()
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
        run.wait()
    records = {r["host"]: r for r in map(json.loads, out.splitlines())}
    assert set(records) == set(group.hosts), err
    lost = [h for h, r in records.items() if r["error"]]
    if idempotent:
        assert run.returncode == 0 and lost == [], err
        assert all(r["stdout"] == "start\nend" and r["exit_code"] == 0
                   for r in records.values())
        assert err.count("running it again (--idempotent)") == 2, err
    else:
        assert run.returncode == 1 and len(lost) == 2, err
        assert all(h in records[h]["error"] and "was lost" in records[h]["error"] for h in lost)
        assert all(records[h]["stdout"] == "start\nend" for h in records if h not in lost)


def test_stop_stops_the_remote_commands(group, tmp_path, scheduler, start_worker):
    start_worker("w1", "any=1")
    marker = f"sleep 432.{uuid.uuid4().int % 10**9}"  # this test's commands alone
    run = run_on_cluster(scheduler, group.hosts, f"{marker}; echo never", shard_size=4,
                         **options(group, tmp_path))
    eventually(lambda: len(processes_with(marker)), 30, "the four commands running",
               equal_to=4)
    run.stop()  # returns once the tasks have stopped their commands
    assert gone(lambda: processes_with(marker), what="the commands stopped") == []
    results = list(run)
    assert len(results) == 4 and all(r.stdout == "" and r.exit_code != 0 for r in results)


def test_command_line_on_a_local_dask_cluster(group, tmp_path):
    refused = f"{address()}:1"
    hosts = " ".join(group.hosts + [refused])
    result = subprocess.run(
        [sys.executable, "-m", "pssh", "run", "-H", hosts, "--port", str(group.port), "-k",
         group.keys.private(), "--no-agent", "-F", "none", "--known-hosts",
         str(tmp_path / "known_hosts"), "--scheduler", "local:2", "--json", "--",
         "echo out; exit 3"], capture_output=True, text=True, timeout=120, env=ENV)
    assert result.returncode == 1, result.stderr
    records = {r["host"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(records) == set(group.hosts) | {refused}   # host:port: its port given
    assert all(records[h]["exit_code"] == 3 and records[h]["stdout"] == "out"
               for h in group.hosts)
    assert "cannot connect" in records[refused]["error"]
    assert "distributed" not in result.stderr  # Dask's own logging stays quiet


def test_the_parallel_client_with_a_scheduler_keeps_its_api(group, tmp_path, scheduler,
                                                             start_worker):
    """ParallelSSHClient(scheduler=...): the hosts over Dask tasks, the API as in one
    process (output in host order, exit codes, standard input, a failed host)."""
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig
    _, first = start_worker("w1", "any=1")
    _, second = start_worker("w2", "any=1")
    hosts = group.hosts + [address()]   # the last refuses
    configs = [HostConfig(port=group.port)] * len(group.hosts) + [HostConfig(port=free_port())]
    client = ParallelSSHClient(hosts, host_config=configs, scheduler=scheduler,
                               **options(group, tmp_path))
    try:
        output = client.run_command("echo $SSH_CONNECTION; cat; exit %s",
                                    host_args=list(range(len(hosts))), stop_on_errors=False)
        assert [o.host for o in output] == hosts
        for host_output in output[:-1]:
            host_output.stdin.write(f"to {host_output.host}\n")
            host_output.stdin.close()
        client.join(output)
        for i, host_output in enumerate(output[:-1]):
            lines = list(host_output.stdout)
            assert lines[0].split()[2] == host_output.host
            assert lines[1:] == [f"to {host_output.host}"] and host_output.exit_code == i
        assert isinstance(output[-1].exception, exc.ConnectionRefused)
        where = {w.transport.where.split()[0] for w in client.workers}
        assert where == {first, second}  # one task per worker thread
    finally:
        client.close()
    assert cluster_workers(scheduler)  # the caller's cluster stays as it was
