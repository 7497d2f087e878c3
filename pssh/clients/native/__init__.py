"""The libssh2-based clients (also importable from :mod:`pssh.clients`)."""
from pssh.clients.native.parallel import ParallelSSHClient
from pssh.clients.native.single import SSHClient

__all__ = ["ParallelSSHClient", "SSHClient"]
