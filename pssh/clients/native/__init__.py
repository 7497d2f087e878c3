"""The libssh2 clients (also importable from :mod:`pssh.clients`)."""
from pssh.clients.native.parallel import ParallelSSHClient
from pssh.clients.native.single import SSHClient, logger

__all__ = ["ParallelSSHClient", "SSHClient", "logger"]
