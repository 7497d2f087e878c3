"""Runs spread over a Dask ``distributed`` cluster (``pip install .[dask]``)."""
from pssh.clients.cluster.run import ClusterRun, connect_cluster, plan_shards, run_on_cluster
from pssh.clients.cluster.shard_task import HostRunResult

__all__ = ["ClusterRun", "HostRunResult", "connect_cluster", "plan_shards", "run_on_cluster"]
