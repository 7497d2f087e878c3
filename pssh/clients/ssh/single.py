"""``pssh.clients.ssh.single``: the native single-host client under parallel-ssh's other name."""
import logging

from pssh.clients.native.single import SSHClient as _NativeSSHClient

logger = logging.getLogger(__name__)


class SSHClient(_NativeSSHClient):
    """:class:`pssh.clients.native.single.SSHClient`, also accepting the ``gssapi_*``
    arguments of parallel-ssh's libssh client (ignored)."""

    def __init__(self, host, *args, gssapi_auth=False, gssapi_server_identity=None,
                 gssapi_client_identity=None, gssapi_delegate_credentials=False, **kwargs):
        super().__init__(host, *args, **kwargs)


__all__ = ["SSHClient"]
