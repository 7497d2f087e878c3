"""parallel-ssh's second client (on libssh), served by the libssh2 clients.

The API of the two is the same; ``from pssh.clients.ssh import
ParallelSSHClient, SSHClient`` keeps working and gets the native clients.
The ``gssapi_*`` arguments that only that client had are accepted and
ignored (GSSAPI logins are not offered).
"""
from pssh.clients.ssh.parallel import ParallelSSHClient
from pssh.clients.ssh.single import SSHClient

__all__ = ["ParallelSSHClient", "SSHClient"]
