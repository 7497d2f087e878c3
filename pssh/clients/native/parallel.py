"""``ParallelSSHClient``: run commands on many hosts at once on gevent."""
from __future__ import annotations

import logging
import resource
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import gevent
from gevent.pool import Pool
from gevent.queue import Queue

from pssh import exceptions as exc
from pssh.clients.native.single import DEFAULT_RETRIES, DEFAULT_RETRY_DELAY, SSHClient
from pssh.config import HostConfig
from pssh.clients.native.tunnel import JumpHosts
from pssh.output import HostOutput
from pssh.shell import InteractiveShell
from pssh.ssh_config import SSHConfig, load

log = logging.getLogger("pssh.parallel")


def raise_open_file_limit(needed: int) -> None:
    """Raise the soft RLIMIT_NOFILE towards the hard limit when ``needed`` calls for it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed <= soft:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    log.info("raised the open file limit from %d to %d for %d connections", soft, target, needed)


class ParallelSSHClient:
    """Runs commands on every host of ``hosts`` concurrently.

    Arguments as for :class:`pssh.clients.SSHClient` apply to every host;
    ``host_config`` (one :class:`HostConfig` per host, in order) overrides
    them per host. ``pool_size`` bounds the hosts worked on at once.
    """

    def __init__(self, hosts: Sequence[str], user: Optional[str] = None,
                 password: Optional[str] = None, port: Optional[int] = None,
                 pkey: Union[str, bytes, None] = None, num_retries: int = DEFAULT_RETRIES,
                 timeout: Optional[float] = None, pool_size: int = 100,
                 allow_agent: Optional[bool] = None,
                 host_config: Optional[Sequence[HostConfig]] = None,
                 retry_delay: float = DEFAULT_RETRY_DELAY, identity_auth: bool = True,
                 keepalive_seconds: Optional[int] = None, known_hosts: Optional[str] = None,
                 keepalive_count_max: Optional[int] = None,
                 host_key_policy: Optional[str] = None, keyboard_interactive: bool = False,
                 passphrase: Optional[str] = None, proxy_host: Optional[str] = None,
                 proxy_port: Optional[int] = None, proxy_user: Optional[str] = None,
                 proxy_password: Optional[str] = None,
                 proxy_pkey: Union[str, bytes, None] = None, forward_ssh_agent: bool = False,
                 compress: Optional[bool] = None, ipv6_only: bool = False,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 proxy_jump: Optional[str] = None, cert_file: Optional[str] = None) -> None:
        if isinstance(hosts, str):
            raise TypeError("hosts must be a list of host names, not a string")
        self.hosts = list(hosts)
        if host_config is not None and len(host_config) != len(self.hosts):
            raise exc.HostConfigError(
                f"host_config has {len(host_config)} entries for {len(self.hosts)} hosts")
        self.host_config = list(host_config) if host_config is not None else None
        self.pool_size = pool_size
        if ssh_config is not False and not isinstance(ssh_config, SSHConfig):
            ssh_config = load(ssh_config if isinstance(ssh_config, str) else None)
        self._jumps = JumpHosts(SSHClient)
        self._defaults = dict(user=user, password=password, port=port, pkey=pkey,
                              num_retries=num_retries, retry_delay=retry_delay,
                              allow_agent=allow_agent, timeout=timeout,
                              identity_auth=identity_auth, keepalive_seconds=keepalive_seconds,
                              keepalive_count_max=keepalive_count_max,
                              known_hosts=known_hosts, host_key_policy=host_key_policy,
                              keyboard_interactive=keyboard_interactive, passphrase=passphrase,
                              proxy_host=proxy_host, proxy_port=proxy_port,
                              proxy_user=proxy_user, proxy_password=proxy_password,
                              proxy_pkey=proxy_pkey, forward_ssh_agent=forward_ssh_agent,
                              compress=compress, ipv6_only=ipv6_only, ssh_config=ssh_config,
                              proxy_jump=proxy_jump, cert_file=cert_file,
                              jump_hosts=self._jumps)
        self._clients: dict = {}
        self.pool = Pool(pool_size)
        raise_open_file_limit(len(self.hosts) + 64)

    # -- clients ------------------------------------------------------------------

    def _settings(self, index: int) -> dict:
        settings = dict(self._defaults)
        if self.host_config is not None:
            config = self.host_config[index]
            overrides = config.overrides()
            if "private_key" in overrides:
                overrides["pkey"] = overrides.pop("private_key")
            settings.update(overrides)
            settings["alias"] = config.alias
        return settings

    def host_client(self, index: int) -> SSHClient:
        """The connected client of ``hosts[index]`` (connects and authenticates on first use).

        For pipelines of your own per host, e.g. streaming each host's output
        as soon as that host is up rather than after every host connected.
        """
        return self._client(index)

    def _client(self, index: int) -> SSHClient:
        client = self._clients.get(index)
        if client is None or client.session is None:
            client = SSHClient(self.hosts[index], **self._settings(index))
            self._clients[index] = client
        return client

    def connect_auth(self) -> List[gevent.Greenlet]:
        """Connect and authenticate to every host now (otherwise done on first use)."""
        greenlets = [self.pool.spawn(self._client, i) for i in range(len(self.hosts))]
        gevent.joinall(greenlets)
        return greenlets

    # -- commands ------------------------------------------------------------------

    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    stop_on_errors: bool = True, use_pty: bool = False,
                    host_args: Optional[Sequence] = None, shell: Optional[str] = None,
                    encoding: str = "utf-8", read_timeout: Optional[float] = None,
                    errors: str = "replace", timeout: Optional[float] = None) -> List[HostOutput]:
        """Start ``command`` on every host; returns one :class:`HostOutput` per host, in order.

        ``host_args``: one value per host (tuple, dict or single value) to
        format into ``command`` with ``%``. With ``stop_on_errors`` the first
        host's failure is raised once every host has been tried; without it,
        failures are in each ``HostOutput.exception``.
        """
        if host_args is not None and len(host_args) != len(self.hosts):
            raise exc.HostArgumentError(
                f"host_args has {len(host_args)} entries for {len(self.hosts)} hosts")
        read_timeout = read_timeout if read_timeout is not None else timeout

        def run(index: int) -> HostOutput:
            cmd = command % host_args[index] if host_args is not None else command
            client = self._client(index)
            return client.run_command(cmd, sudo=sudo, user=user, use_pty=use_pty, shell=shell,
                                      encoding=encoding, read_timeout=read_timeout,
                                      errors=errors)

        greenlets = [self.pool.spawn(run, i) for i in range(len(self.hosts))]
        gevent.joinall(greenlets)
        outputs = []
        for index, greenlet in enumerate(greenlets):
            if greenlet.successful():
                outputs.append(greenlet.value)
                continue
            error = greenlet.exception
            if stop_on_errors:
                raise error
            log.debug("%s: %s", self.hosts[index], error)
            alias = self._settings(index).get("alias")
            outputs.append(HostOutput(self.hosts[index], exception=error, alias=alias,
                                      encoding=encoding))
        return outputs

    def join(self, output: Optional[Iterable[HostOutput]] = None, consume_output: bool = False,
             timeout: Optional[float] = None) -> None:
        """Wait until every command in ``output`` has finished; then ``exit_code`` is set.

        Output stays readable afterwards unless ``consume_output`` discards it.
        ``timeout`` bounds the whole wait (not per host) and raises
        :class:`pssh.exceptions.Timeout` with the hosts still running.
        """
        outputs = [o for o in (output or []) if o._reader is not None]

        def finish(host_output: HostOutput) -> None:
            reader = host_output._reader
            if consume_output:
                reader.consume(None)
            else:
                reader.wait_eof(None)

        greenlets = [self.pool.spawn(finish, o) for o in outputs]
        done = gevent.joinall(greenlets, timeout=timeout)
        if len(done) < len(greenlets):
            running = [o.host for o, g in zip(outputs, greenlets) if not g.ready()]
            gevent.killall([g for g in greenlets if not g.ready()])
            raise exc.Timeout(f"{len(running)} command(s) still running after {timeout} s "
                              f"on: {', '.join(running[:10])}")
        for greenlet in greenlets:
            if not greenlet.successful():
                raise greenlet.exception

    # -- shells ------------------------------------------------------------------------

    def open_shell(self, encoding: str = "utf-8", read_timeout: Optional[float] = None,
                   stop_on_errors: bool = True) -> List[InteractiveShell]:
        """Start a shell on every host (see :class:`pssh.shell.InteractiveShell`).

        Without ``stop_on_errors``, a host that failed is left out of the list
        and its error logged.
        """
        def start(index: int) -> InteractiveShell:
            return self._client(index).open_shell(encoding=encoding, read_timeout=read_timeout)

        greenlets = [self.pool.spawn(start, i) for i in range(len(self.hosts))]
        gevent.joinall(greenlets)
        shells = []
        for index, greenlet in enumerate(greenlets):
            if greenlet.successful():
                shells.append(greenlet.value)
            elif stop_on_errors:
                raise greenlet.exception
            else:
                log.warning("%s: no shell: %s", self.hosts[index], greenlet.exception)
        return shells

    def run_shell_commands(self, shells: Sequence[InteractiveShell],
                           commands: Union[str, Sequence[str]]) -> None:
        """Send ``commands`` (one line or a list) to every shell."""
        for shell in shells:
            shell.run(commands)

    def join_shells(self, shells: Sequence[InteractiveShell],
                    timeout: Optional[float] = None) -> None:
        """Close every shell's input and wait for them to exit; then ``exit_code`` is set."""
        for shell in shells:
            shell.close()
        self.join([shell.output for shell in shells], timeout=timeout)

    def as_completed(self, output: Iterable[HostOutput],
                     timeout: Optional[float] = None) -> Iterator[HostOutput]:
        """Yield each ``HostOutput`` as its command finishes (output buffered,
        ``exit_code`` set), fastest hosts first; failed hosts come first of all."""
        queue: Queue = Queue()
        pending = 0
        for host_output in output:
            if host_output._reader is None:
                yield host_output
                continue
            pending += 1
            self.pool.spawn(self._finish_into, host_output, queue)
        with gevent.Timeout(timeout, exc.Timeout(f"commands still running after {timeout} s")):
            for _ in range(pending):
                host_output, error = queue.get()
                if error is not None:
                    host_output.exception = error
                yield host_output

    @staticmethod
    def _finish_into(host_output: HostOutput, queue: Queue) -> None:
        try:
            host_output._reader.wait_eof(None)
            queue.put((host_output, None))
        except Exception as error:  # reported through the HostOutput
            queue.put((host_output, error))

    def finished(self, output: Optional[Iterable[HostOutput]] = None) -> bool:
        """Whether every command in ``output`` has finished and been read."""
        return all(o.finished for o in (output or []))

    # -- file transfer ---------------------------------------------------------------

    def _spawn_each(self, fn, *args) -> List[gevent.Greenlet]:
        return [self.pool.spawn(fn, i, *args) for i in range(len(self.hosts))]

    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  copy_args: Optional[Sequence[dict]] = None) -> List[gevent.Greenlet]:
        """Copy a local file (or tree) to every host over SFTP.

        Returns one greenlet per host: ``gevent.joinall(cmds, raise_error=True)``
        waits and raises the first failure. ``copy_args`` (one dict per host)
        formats ``%(name)s`` fields in both paths.
        """
        def copy(index):
            local, remote = self._paths(index, local_file, remote_file, copy_args)
            self._client(index).copy_file(local, remote, recurse=recurse)
        return self._spawn_each(copy)

    def copy_remote_file(self, remote_file: str, local_file: str, recurse: bool = False,
                         suffix_separator: str = "_", copy_args: Optional[Sequence[dict]] = None
                         ) -> List[gevent.Greenlet]:
        """Copy a remote file (or tree) from every host to ``local_file<sep><host>``."""
        def copy(index):
            remote, local = self._paths(index, remote_file, local_file, copy_args)
            local = f"{local}{suffix_separator}{self.hosts[index]}"
            self._client(index).copy_remote_file(remote, local, recurse=recurse)
        return self._spawn_each(copy)

    def scp_send(self, local_file: str, remote_file: str, recurse: bool = False,
                 copy_args: Optional[Sequence[dict]] = None) -> List[gevent.Greenlet]:
        """Like :meth:`copy_file`, over SCP."""
        def copy(index):
            local, remote = self._paths(index, local_file, remote_file, copy_args)
            self._client(index).scp_send(local, remote, recurse=recurse)
        return self._spawn_each(copy)

    def scp_recv(self, remote_file: str, local_file: str, recurse: bool = False,
                 suffix_separator: str = "_", copy_args: Optional[Sequence[dict]] = None
                 ) -> List[gevent.Greenlet]:
        """Like :meth:`copy_remote_file`, over SCP."""
        def copy(index):
            remote, local = self._paths(index, remote_file, local_file, copy_args)
            local = f"{local}{suffix_separator}{self.hosts[index]}"
            self._client(index).scp_recv(remote, local, recurse=recurse)
        return self._spawn_each(copy)

    def _paths(self, index, first, second, copy_args):
        if copy_args is None:
            return first, second
        if len(copy_args) != len(self.hosts):
            raise exc.HostArgumentError(
                f"copy_args has {len(copy_args)} entries for {len(self.hosts)} hosts")
        return first % copy_args[index], second % copy_args[index]

    def disconnect_host(self, index: int) -> None:
        """Close ``hosts[index]``'s session; the next use of that host reconnects."""
        client = self._clients.pop(index, None)
        if client is not None:
            client.disconnect()

    def disconnect(self) -> None:
        """Close every host's session, then the jump host sessions they went through."""
        for client in self._clients.values():
            client.disconnect()
        self._clients.clear()
        self._jumps.close()
