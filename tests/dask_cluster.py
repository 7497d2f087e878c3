"""A Dask cluster of two workers, in a process of its own, that a test module's runs
share through ``--scheduler ADDRESS``.

A cluster started per run (``--scheduler local:2``) costs about five seconds of CPU each
time (the scheduler's and two workers' interpreters and imports) for the same code in the
run; the suite keeps a few runs that start their own (test_cli_signals, test_stop_truth,
test_pssh_cluster, test_poll_cli's ``local`` test) and shares one cluster elsewhere. It
lives in a process of its own, as a user's does: the runs' connections to its scheduler
are never the test process's descriptors."""
import contextlib
import subprocess
import sys
from typing import Iterator, List, Mapping

from extras import require

_CLUSTER = ("import sys\nfrom pssh.fanout.dask import connect_cluster\n"
            "client, cluster = connect_cluster('local:2')\n"
            "print(cluster.scheduler_address, flush=True)\nsys.stdin.read()\n"
            "client.close()\ncluster.close()\n")


@contextlib.contextmanager
def shared_cluster(env: Mapping[str, str]) -> Iterator[List[str]]:
    """The command line's words for the cluster (``--scheduler tcp://...``); the cluster
    is closed, and its process gone, when the block ends."""
    require("dask", "distributed")
    cluster = subprocess.Popen([sys.executable, "-c", _CLUSTER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=dict(env))
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), "the cluster's process said no address"
        yield ["--scheduler", address]
    finally:
        cluster.stdin.close()   # its end of input: it closes the cluster and exits
        try:
            cluster.wait(60)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()
        cluster.stdout.close()
