"""``pssh.clients.ssh.parallel``: the native parallel client under parallel-ssh's other name."""
import logging

from pssh.clients.native.parallel import ParallelSSHClient as _NativeParallelSSHClient

logger = logging.getLogger(__name__)


class ParallelSSHClient(_NativeParallelSSHClient):
    """:class:`pssh.clients.native.parallel.ParallelSSHClient`, also accepting the
    ``gssapi_*`` arguments of parallel-ssh's libssh client (ignored)."""

    def __init__(self, hosts, *args, gssapi_auth=False, gssapi_server_identity=None,
                 gssapi_client_identity=None, gssapi_delegate_credentials=False, **kwargs):
        super().__init__(hosts, *args, **kwargs)


__all__ = ["ParallelSSHClient"]
