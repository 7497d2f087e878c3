"""``ParallelSSHClient``: the parallel client over libssh2 (parallel-ssh's API)."""
from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

import gevent
from gevent.pool import Pool

from pssh import exceptions as exc
from pssh.clients.base.parallel import BaseParallelSSHClient, HostGreenlet
from pssh.clients.base.single import BaseSSHClient, runner_kind, options_of
from pssh.clients.native.jump import JumpHosts
from pssh.clients.native.single import SSHClient
from pssh.config import HostConfig
from pssh.options import ConnectOptions
from pssh.output import HostOutput
from pssh.ssh_config import SSHConfig

if TYPE_CHECKING:
    from pssh.fanout.run.hosts import ShardedHosts, ShardWorker

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
      (``"auto"``: one per usable core; never more than there are hosts), each
      with its own hub and connections, for runs bound by one core's CPU; the
      API stays the same. Host ``i`` goes to worker ``i % N``; workers start on
      first use; ``pool_size`` applies per worker. Commands then start
      ``cancellable`` by default, so that stopping them (``cancel``,
      ``close``, or this process ending, Ctrl-C included) stops them on the
      hosts for sure. A worker that dies fails its own hosts only: their
      ``HostOutput`` gets a :class:`~pssh.exceptions.WorkerError` in
      ``exception`` (reading their output raises it; ``join`` logs it and
      carries on with the other hosts), and the next use of those hosts
      starts a new worker. Per-host clients live in the workers:
      ``host_client()`` and interactive shells are not available.
    * ``scheduler`` (ours): the same, with the hosts sharded over tasks on a
      Dask cluster instead (an address such as ``tcp://host:8786``,
      ``"local:N"`` for N local Dask worker processes, or a
      ``distributed.Client``; one task per worker thread). Key files,
      known_hosts and other paths are read on the Dask workers.

    * ``runner`` (ours): ``"native"`` has one epoll set answer the waits of
      every host's connection (:mod:`pssh.runners.native`) instead of a wait
      on the hub for each: less client CPU per host; ``"gevent"`` (default).
      Programs that replace the clients' resolve or connect steps keep them.

    Hosts behind the same jump hosts share one session per jump host.
    ``timeout`` is per host, as for a single client; ``join(timeout=...)``
    bounds a whole join.
    """

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
                 processes: Union[int, str, None] = None, scheduler: Optional[object] = None,
                 runner: Optional[str] = None, _auth_thread_pool: bool = True) -> None:
        super().__init__(hosts, pool_size=pool_size, host_config=host_config,
                         ssh_config=ssh_config, _auth_thread_pool=_auth_thread_pool,
                         _options=options_of(locals()))
        self._jumps = JumpHosts()
        self.processes, self.scheduler = processes, scheduler
        self.runner = runner_kind(runner)
        #: The workers' side of the hosts, with ``processes=N`` or ``scheduler`` (None: the
        #: hosts run here).
        self._sharded: Optional[ShardedHosts] = None
        # processes=1: the hosts run here, as without it (unless a scheduler is given).
        sharding = None if processes == 1 else processes
        if sharding is not None or scheduler is not None:
            self._shard_over(sharding, scheduler)

    # -- processes=N, scheduler=: the hosts handed to workers (pssh.fanout) -----------------

    def _shard_over(self, processes: Union[int, str, None], scheduler: Optional[object]) -> None:
        """Host ``i`` to worker ``i % count`` of the transport ``processes`` or
        ``scheduler`` asks for."""
        # Imported here: subprocess and pickle cost every program that imports pssh.clients
        # a few milliseconds of start-up, and most never shard.
        from pssh.fanout.groups import group_for
        from pssh.fanout.run.hosts import ShardedHosts, round_robin
        workers = group_for(processes, scheduler)
        # The group is the workers' scope: it ends with this client (close() stops the
        # workers, the next use starts new ones).
        self._finalizer = weakref.finalize(self, workers.group.close)
        self._sharded = sharded = ShardedHosts(
            workers.group, lambda: round_robin(workers.count(len(self.hosts)), len(self.hosts)),
            lambda: self.hosts, self.host_options, self._ssh_config, self.pool_size,
            kind=workers.kind, own_process=workers.own_process, runner=self.runner)
        self._size_pool(sharded)

    def _size_pool(self, sharded: ShardedHosts) -> None:
        # pool_size applies per worker; here the hosts' greenlets only wait on them.
        self.pool = Pool(size=self.pool_size * sharded.count(), greenlet_class=HostGreenlet)

    def _hosts_changed(self) -> None:
        if self._sharded is not None:
            self._sharded.close()  # the shards change: new workers on next use
            self._size_pool(self._sharded)

    @property
    def workers(self) -> List["ShardWorker"]:
        """With ``processes=N``, the worker processes (started if they were not; each has
        its ``pid``); otherwise none."""
        return [] if self._sharded is None else self._sharded.start()

    def _start_workers(self) -> None:
        """With ``processes=N`` or ``scheduler``, start the workers not running, before
        the hosts' greenlets ask for them: starting one waits (gevent's Popen)."""
        if self._sharded is not None:
            self._sharded.start()

    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    stop_on_errors: bool = True, use_pty: bool = False,
                    host_args: Optional[Sequence] = None, shell: Optional[str] = None,
                    encoding: str = "utf-8", read_timeout: Optional[float] = None,
                    errors: str = "replace", cancellable: Optional[bool] = None
                    ) -> List[HostOutput]:
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
        commands even without a pty (by default off, on with ``processes=N``).
        """
        if cancellable is None:
            cancellable = self._sharded is not None
        self._start_workers()
        return super().run_command(command, user=user, stop_on_errors=stop_on_errors,
                                    host_args=host_args, use_pty=use_pty, shell=shell,
                                    encoding=encoding, sudo=sudo, read_timeout=read_timeout,
                                    errors=errors, cancellable=cancellable)

    # -- the per-host steps: here, or in the host's worker with processes=N ----------------

    def _run_command(self, host_i: int, host: str, command: str, sudo: bool = False,
                     user: Optional[str] = None, shell: Optional[str] = None,
                     use_pty: bool = False, encoding: str = "utf-8",
                     read_timeout: Optional[float] = None, errors: str = "replace",
                     cancellable: bool = False) -> HostOutput:
        if self._sharded is not None:
            return self._sharded.run_command(host_i, host, command, sudo=sudo, user=user,
                                             shell=shell, use_pty=use_pty, encoding=encoding,
                                             read_timeout=read_timeout, errors=errors,
                                             cancellable=cancellable)
        return super()._run_command(host_i, host, command, sudo=sudo, user=user, shell=shell,
                                    use_pty=use_pty, encoding=encoding,
                                    read_timeout=read_timeout, errors=errors,
                                    cancellable=cancellable)

    def _copy_file(self, host_i: int, host: str, *args, **kwargs) -> None:
        if self._sharded is not None:
            return self._sharded.call("_copy_file", host_i, host, *args, **kwargs)
        return super()._copy_file(host_i, host, *args, **kwargs)

    def _copy_remote_file(self, host_i: int, host: str, *args, **kwargs) -> None:
        if self._sharded is not None:
            return self._sharded.call("_copy_remote_file", host_i, host, *args, **kwargs)
        return super()._copy_remote_file(host_i, host, *args, **kwargs)

    def _spawn_pairs(self, per_host, pairs, **kwargs) -> List[gevent.Greenlet]:
        self._start_workers()
        return super()._spawn_pairs(per_host, pairs, **kwargs)

    def _get_ssh_client(self, host_i: int, host: str) -> BaseSSHClient:
        if self._sharded is not None:
            raise exc.PSSHError("%s: with processes=N each host's client lives in a worker "
                                "process; use the parallel client's methods", host, host=host)
        return super()._get_ssh_client(host_i, host)

    def connect_auth(self) -> List[gevent.Greenlet]:
        """Connect and log in to every host now (otherwise done on first use); returns
        the greenlets doing it (``gevent.joinall(..., raise_error=True)`` waits)."""
        if self._sharded is None:
            return super().connect_auth()
        self._start_workers()
        return [self.pool.spawn(self._sharded.connect, i, host)
                for i, host in enumerate(self.hosts)]

    def connect_host(self, host_i: int) -> None:
        """Connect and log in to ``hosts[host_i]`` now (a failure is raised)."""
        if self._sharded is None:
            return super().connect_host(host_i)
        self._sharded.connect(host_i, self.hosts[host_i])

    def disconnect_host(self, host_i: int) -> None:
        """Close ``hosts[host_i]``'s connection; the next use of that host reconnects."""
        if self._sharded is None:
            return super().disconnect_host(host_i)
        self._sharded.disconnect(host_i, self.hosts[host_i])

    def _make_ssh_client(self, host: str, options: ConnectOptions) -> SSHClient:
        return SSHClient.from_options(host, options, ssh_config=self._ssh_config or False,
                                      jump_hosts=self._jumps, runner=self.runner)

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
        if self._sharded is not None:
            return self._sharded.call("_scp_send", host_i, host, local_file, remote_file,
                                      recurse=recurse)
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
        if self._sharded is not None:
            return self._sharded.call("_scp_recv", host_i, host, remote_file, local_file,
                                      recurse=recurse)
        return self._get_ssh_client(host_i, host).scp_recv(remote_file, local_file,
                                                           recurse=recurse)

    def close(self) -> None:
        """Close every host's connection, then the jump host sessions they went through;
        with ``processes=N``, stop the workers (commands still running are stopped on their
        hosts; the next use starts new ones); with ``scheduler``, stop the tasks and let go
        of the cluster (a ``local:N`` one started for this client is closed)."""
        if self._sharded is not None:
            self._sharded.close()
            if self.scheduler is not None:
                self._finalizer()
        super().close()
        self._jumps.close()
