"""``pssh.aio``: the same libssh2 bindings behind an asyncio API.

Named ``aio`` as hussh and aiohttp name theirs: short, and never mistaken for
the standard library's ``asyncio``. For the most used part of asyncssh's API
the names and meanings are asyncssh's, so such a program ports by changing
its import::

    from pssh import aio as asyncssh

    async with asyncssh.connect("host", username="me", client_keys=["~/.ssh/id_ed25519"]) as conn:
        result = await conn.run("uname -a", check=True)
        print(result.stdout, result.exit_status)

Many hosts: ``async for r in aio.run_on_hosts(hosts, "uptime", limit=100, timeout=30)``
yields each host's :class:`HostResult` as it completes; :func:`gather_hosts` collects
them in host order.

Every libssh2 call runs non-blocking on the loop's thread; waits are
``add_reader`` / ``add_writer`` on the socket in the direction libssh2 asks
for. No thread per connection.
"""
from pssh.aio.connection import SSHClientConnection, connect
from pssh.aio.exceptions import DisconnectError, HostKeyNotVerifiable, PermissionDenied, ProcessError
from pssh.aio.many import HostResult, gather_hosts, run_on_hosts
from pssh.aio.process import SSHClientProcess, SSHCompletedProcess, SSHReader, SSHWriter
from pssh.aio.scp import scp
from pssh.aio.sftp import SFTPAttrs, SFTPClient

__all__ = ["DisconnectError", "HostKeyNotVerifiable", "HostResult", "PermissionDenied",
           "ProcessError", "SFTPAttrs", "SFTPClient", "SSHClientConnection", "SSHClientProcess",
           "SSHCompletedProcess", "SSHReader", "SSHWriter", "connect", "gather_hosts",
           "run_on_hosts", "scp"]
