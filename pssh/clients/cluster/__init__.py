"""Runs spread over a Dask ``distributed`` cluster (``pip install .[dask]``), each host's
result as it completes; the shards go through :mod:`pssh.fanout`'s Dask transport."""
from pssh.clients.cluster.run import (ClusterRun, HostRunResult, connect_cluster, plan_shards,
                                      run_on_cluster)

__all__ = ["ClusterRun", "HostRunResult", "connect_cluster", "plan_shards", "run_on_cluster"]
