"""Parallel SSH on gevent and libssh2, with parallel-ssh's API.

Start with :class:`pssh.clients.ParallelSSHClient` (many hosts) or
:class:`pssh.clients.SSHClient` (one); :mod:`pssh.sshd` runs real OpenSSH
servers on loopback for tests and try-outs; the ``pssh`` command runs, copies
and fetches across hosts.
"""
from logging import NullHandler, getLogger

host_logger = getLogger("pssh.host_logger")
logger = getLogger("pssh")
host_logger.addHandler(NullHandler())
logger.addHandler(NullHandler())


def __getattr__(name: str):
    # Looked up on demand: reading package metadata costs milliseconds of start-up.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("pssh2")
        except PackageNotFoundError:  # a source tree
            return "0+unknown"
    raise AttributeError(f"module 'pssh' has no attribute {name!r}")
