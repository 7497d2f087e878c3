"""The parallel client with its hosts sharded over worker processes (``processes=N``)."""
from pssh.clients.sharded.parallel import ShardedParallelSSHClient

__all__ = ["ShardedParallelSSHClient"]
