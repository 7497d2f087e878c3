"""``ParallelSSHClient``: the parallel client over libssh2 (parallel-ssh's API)."""
from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Union

import gevent

from pssh.clients.base.parallel import BaseParallelSSHClient
from pssh.clients.base.single import options_of
from pssh.clients.native.jump import JumpHosts
from pssh.clients.native.single import SSHClient
from pssh.config import HostConfig
from pssh.options import ConnectOptions
from pssh.output import HostOutput
from pssh.ssh_config import SSHConfig

logger = logging.getLogger(__name__)


class ParallelSSHClient(BaseParallelSSHClient):
    """Runs commands and transfers files on many hosts at once, on gevent.

    The arguments are :class:`~pssh.clients.native.single.SSHClient`'s
    (parallel-ssh's names and defaults; ``None`` takes the OpenSSH client
    config's value, then the default), applied to every host, plus:

    * ``hosts``: host names (any iterable; a string is refused);
    * ``pool_size``: hosts worked on at once (default 100);
    * ``host_config``: one :class:`~pssh.config.HostConfig` per host, in
      order, whose set fields override the client's for that host.

    * ``processes`` (ours): shard the hosts over that many worker processes
      (``"auto"``: one per usable core), each with its own hub, for runs
      bound by one core's CPU; the API stays the same (see
      :class:`~pssh.clients.sharded.parallel.ShardedParallelSSHClient`).

    Hosts behind the same jump hosts share one session per jump host.
    ``timeout`` is per host, as for a single client; ``join(timeout=...)``
    bounds a whole join.
    """

    #: The class that runs the hosts in worker processes (``processes=N``): the sharded
    #: client registers itself here when :mod:`pssh.clients` is imported, which every
    #: import of a client module does first. This class never imports its subclass.
    sharded_class: Optional[type] = None

    def __new__(cls, *args, processes: Union[int, str, None] = None, **kwargs):
        if cls is ParallelSSHClient and processes not in (None, 1):
            if ParallelSSHClient.sharded_class is None:
                raise RuntimeError("processes= needs pssh.clients.sharded, which is not "
                                   "installed with this pssh")
            cls = ParallelSSHClient.sharded_class
        return super().__new__(cls)

    def __init__(self, hosts, user: Optional[str] = None, password: Optional[str] = None,
                 port: Optional[int] = None, pkey: Union[str, bytes, None] = None,
                 num_retries: Optional[int] = None, timeout: Optional[float] = None,
                 pool_size: int = 100, allow_agent: Optional[bool] = None,
                 host_config: Optional[List[HostConfig]] = None,
                 retry_delay: Optional[float] = None, proxy_host: Optional[str] = None,
                 proxy_port: Optional[int] = None, proxy_user: Optional[str] = None,
                 proxy_password: Optional[str] = None, proxy_pkey: Union[str, bytes, None] = None,
                 forward_ssh_agent: Optional[bool] = None, keepalive_seconds: Optional[int] = None,
                 identity_auth: Optional[bool] = None, ipv6_only: Optional[bool] = None,
                 compress: Optional[bool] = None, keyboard_interactive: Optional[bool] = None,
                 passphrase: Optional[str] = None, cert_file: Optional[str] = None,
                 known_hosts: Optional[str] = None, host_key_policy: Optional[str] = None,
                 keepalive_count_max: Optional[int] = None, proxy_jump: Optional[str] = None,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 ciphers: Optional[str] = None, macs: Optional[str] = None,
                 kex_algorithms: Optional[str] = None,
                 connect_timeout: Optional[float] = None,
                 request_timeout: Optional[float] = None,
                 processes: Union[int, str, None] = None,
                 _auth_thread_pool: bool = True) -> None:
        super().__init__(hosts, pool_size=pool_size, host_config=host_config,
                         ssh_config=ssh_config, _auth_thread_pool=_auth_thread_pool,
                         _options=options_of(locals()))
        self._jumps = JumpHosts(SSHClient)

    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    stop_on_errors: bool = True, use_pty: bool = False,
                    host_args: Optional[Sequence] = None, shell: Optional[str] = None,
                    encoding: str = "utf-8", read_timeout: Optional[float] = None,
                    errors: str = "replace", cancellable: bool = False) -> List[HostOutput]:
        """Start ``command`` on every host; one :class:`~pssh.output.HostOutput` per host,
        in host order, returned once every command has started.

        ``sudo``/``user`` run it through sudo (as ``user``); ``shell`` names the
        shell and its option (``"bash -c"``); ``use_pty`` asks for a pseudo
        terminal (stderr then comes on stdout). ``host_args``: one value per
        host to ``%``-format ``command`` with (too few:
        :class:`~pssh.exceptions.HostArgumentError`). ``encoding`` encodes the
        command and decodes its output (``errors``: how bad bytes decode).
        ``read_timeout`` bounds each iteration of a host's stdout/stderr.
        With ``stop_on_errors`` a host's failure is raised; otherwise it is in
        that host's ``exception``. ``cancellable``: :meth:`cancel` can stop the
        commands even without a pty.
        """
        return super().run_command(command, user=user, stop_on_errors=stop_on_errors,
                                    host_args=host_args, use_pty=use_pty, shell=shell,
                                    encoding=encoding, sudo=sudo, read_timeout=read_timeout,
                                    errors=errors, cancellable=cancellable)

    def _make_ssh_client(self, host: str, options: ConnectOptions) -> SSHClient:
        return SSHClient(host, ssh_config=self._ssh_config or False, _jump_hosts=self._jumps,
                         _options=options)

    # -- SCP --------------------------------------------------------------------------

    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False,
                 copy_args: Optional[Sequence[dict]] = None) -> List[gevent.Greenlet]:
        """Copy a local file (or tree) to every host over SCP; greenlets as for
        :meth:`copy_file`. Remote directories are created over SFTP (SCP cannot)."""
        return self._spawn_pairs(self._scp_send,
                                 self._per_host(copy_args, local_file, remote_file),
                                 recurse=recurse)

    def _scp_send(self, host_i: int, host: str, local_file: str, remote_file: str,
                  recurse: bool = False) -> None:
        return self._get_ssh_client(host_i, host).scp_send(local_file, remote_file,
                                                           recurse=recurse)

    def scp_recv(self, remote_file: str, local_file: str, recurse: bool = False,
                 copy_args: Optional[Sequence[dict]] = None,
                 suffix_separator: str = "_") -> List[gevent.Greenlet]:
        """Copy a remote file (or tree) from every host over SCP to
        ``<local_file><sep><host>`` (or each host's ``copy_args`` paths)."""
        pairs = self._fetch_pairs(copy_args, remote_file, local_file, suffix_separator)
        return self._spawn_pairs(self._scp_recv, pairs, recurse=recurse)

    def _scp_recv(self, host_i: int, host: str, remote_file: str, local_file: str,
                  recurse: bool = False) -> None:
        return self._get_ssh_client(host_i, host).scp_recv(remote_file, local_file,
                                                           recurse=recurse)

    def close(self) -> None:
        """Close every host's connection, then the jump host sessions they went through."""
        super().close()
        self._jumps.close()
