"""Clients: :class:`SSHClient` for one host, :class:`ParallelSSHClient` for many."""
from pssh.clients.native import ParallelSSHClient, SSHClient

__all__ = ["ParallelSSHClient", "SSHClient"]
