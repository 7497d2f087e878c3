"""``pssh.aio``: the same libssh2 bindings behind an asyncio API.

Named ``aio`` as hussh and aiohttp name theirs: short, and never mistaken for
the standard library's ``asyncio``. For the most used part of asyncssh's API
the names and meanings are asyncssh's, so such a program ports by changing
its import::

    from pssh import aio as asyncssh

    async with asyncssh.connect("host", username="me", client_keys=["~/.ssh/id_ed25519"]) as conn:
        result = await conn.run("uname -a", check=True)
        print(result.stdout, result.exit_status)

asyncssh's callback style is there too (:func:`create_connection` with an
:class:`SSHClient`, ``conn.create_session`` with an :class:`SSHClientSession`,
``conn.create_connection`` / ``create_server`` with an :class:`SSHTCPSession`), and
so are its exceptions (:class:`Error` and the rest, each also the matching
:mod:`pssh.exceptions` class).

Many hosts: ``async for r in aio.run_on_hosts(hosts, "uptime", limit=100, timeout=30)``
yields each host's :class:`HostResult` as it completes; :func:`gather_hosts` collects
them in host order.

Every libssh2 call runs non-blocking on the loop's thread; waits are
``add_reader`` / ``add_writer`` on the socket in the direction libssh2 asks
for. No thread per connection.

What this package owns is asyncssh's API (names, exceptions, callbacks, options);
every SSH procedure it runs is the session core's (:mod:`pssh.core`), driven by the
asyncio runner (:mod:`pssh.runners.asyncio`). What it may import: the core, the
asyncio runner, asyncio, ``ssh2``; never :mod:`pssh.clients` (gevent) or :mod:`pssh.cli`.
"""
from pssh.aio import constants as _constants, sftp_errors as _sftp_errors
from pssh.aio.callbacks import SSHClient
from pssh.aio.connection import SSHClientConnection, connect, create_connection
from pssh.aio.constants import *  # noqa: F403  (asyncssh's protocol constants)
from pssh.aio.constants import DataType, EXTENDED_DATA_STDERR
from pssh.aio.exceptions import (ChannelListenError, ChannelOpenError, CompressionError,
                                 ConnectionLost, ConnectTimeout, DisconnectError, Error,
                                 HostKeyNotVerifiable, HostNotFound, IllegalUserName,
                                 KeyEncryptionError, KeyExchangeFailed, KeyFileNotFound,
                                 KeyImportError, MACError, PermissionDenied, ProcessError,
                                 ProtocolError, ProtocolNotSupported, ServiceNotAvailable,
                                 TimeoutError)
from pssh.aio.many import HostResult, gather_hosts, run_on_hosts
from pssh.aio.process import SSHClientProcess, SSHCompletedProcess, SSHReader, SSHWriter
from pssh.aio.redirect import DEVNULL, PIPE, STDOUT
from pssh.aio.scp import scp
from pssh.aio.session import (SSHClientChannel, SSHClientSession, SSHForwarder,
                              SSHTCPChannel, SSHTCPSession)
from pssh.aio.sftp import SFTPAttrs, SFTPClient
from pssh.aio.sftp_errors import *  # noqa: F403  (SFTPError and one class per status)
from pssh.aio.sftp_errors import SFTPError

__all__ = ["ChannelListenError", "ChannelOpenError", "CompressionError", "ConnectionLost",
           "ConnectTimeout", "DEVNULL", "DataType", "DisconnectError", "EXTENDED_DATA_STDERR",
           "Error", "HostKeyNotVerifiable", "HostNotFound", "HostResult", "IllegalUserName",
           "KeyEncryptionError", "KeyExchangeFailed", "KeyFileNotFound", "KeyImportError",
           "MACError", "PIPE", "PermissionDenied", "ProcessError", "ProtocolError",
           "ProtocolNotSupported", "SFTPAttrs", "SFTPClient", "SFTPError", "STDOUT",
           "SSHClient", "SSHClientChannel", "SSHClientConnection", "SSHClientProcess",
           "SSHClientSession", "SSHCompletedProcess", "SSHForwarder", "SSHReader",
           "SSHTCPChannel", "SSHTCPSession", "SSHWriter", "ServiceNotAvailable",
           "TimeoutError", "connect", "create_connection", "gather_hosts", "run_on_hosts",
           "scp"]
__all__ += [name for name in _constants.__all__ + _sftp_errors.__all__ if name not in __all__]
