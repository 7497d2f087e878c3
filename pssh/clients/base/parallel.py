"""Many hosts at once: one greenlet per host, a pool bounding how many run together.

:class:`BaseParallelSSHClient` holds what does not depend on the SSH
library: the host list, per-host settings, per-host clients (created on
first use, kept in ``_host_clients`` by ``(index, host)``), and the
parallel forms of running commands, shells, joins and copies, with
parallel-ssh's semantics. Its settings are a
:class:`~pssh.options.ConnectOptions`; the keyword arguments and attributes
of parallel-ssh (``client.user``, ``client.timeout``, ...) read and write it.
"""
from __future__ import annotations

import logging
import resource
from dataclasses import fields
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import gevent
from gevent import Timeout as GTimeout
from gevent.pool import Pool
from gevent.queue import Queue

from pssh import exceptions as exc
from pssh.clients.base.single import BaseSSHClient, InteractiveShell
from pssh.clients.common import _validate_api, _validate_pkey
from pssh.core import freshness
from pssh.config import HostConfig
from pssh.options import ConnectOptions, ssh_config_of
from pssh.output import HostOutput
from pssh.ssh_config import SSHConfig

logger = logging.getLogger(__name__)
host_logger = logging.getLogger("pssh.host_logger")


def raise_open_file_limit(needed: int) -> None:
    """Raise the soft RLIMIT_NOFILE towards the hard limit when ``needed`` calls for it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed <= soft:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    logger.info("raised the open file limit from %d to %d for %d connections", soft, target,
                needed)


class HostGreenlet(gevent.Greenlet):
    """A per-host task. Its failure reaches the caller (``HostOutput.exception``,
    ``get()``, ``joinall(raise_error=True)``) and is logged once; the hub does not
    also print a traceback for each failed host."""


def _quiet_host_failures() -> None:
    """Make this thread's hub leave :class:`HostGreenlet` failures to their callers
    (gevent's documented per-hub ``handle_error`` hook; other greenlets unchanged)."""
    hub = gevent.get_hub()
    if getattr(hub, "_pssh_quiet", False):
        return
    report = hub.handle_error

    def handle_error(context, kind, value, tb):
        if isinstance(context, HostGreenlet) and kind is not None \
                and issubclass(kind, Exception):
            return
        report(context, kind, value, tb)

    hub.handle_error = handle_error
    hub._pssh_quiet = True


def _within(items: Sequence, greenlets: List[gevent.Greenlet],
            timeout: Optional[float]) -> tuple:
    """Wait up to ``timeout`` for the greenlet of each item (raising the first error);
    stop those still running. Returns the items that finished and those that did not."""
    try:
        done = set(gevent.joinall(greenlets, timeout=timeout, raise_error=True))
    finally:
        gevent.killall([g for g in greenlets if not g.ready()])
    finished = [item for item, g in zip(items, greenlets) if g in done]
    unfinished = [item for item, g in zip(items, greenlets) if g not in done]
    return finished, unfinished


class _Setting:
    """A client attribute that is a field of the client's ConnectOptions."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, client, owner=None):
        return self if client is None else getattr(client._options, self.name)

    def __set__(self, client, value) -> None:
        setattr(client._options, self.name, value)


class BaseParallelSSHClient:
    """Runs commands and copies on every host of ``hosts`` concurrently.

    Settings (``user``, ``port``, ``pkey``, ``timeout``, ... see
    :class:`~pssh.options.ConnectOptions`) apply to every host;
    ``host_config`` (one :class:`~pssh.config.HostConfig` per host, in
    order) overrides them per host. ``pool_size`` bounds how many hosts are
    worked on at once. ``hosts`` may be any iterable of host names, and may
    be replaced later (clients of hosts that stay at their index are kept).
    """

    # Every setting is an attribute, set on the class below (one descriptor each); for
    # the type checker, those this class reads itself.
    timeout: Optional[float]

    def __init__(self, hosts: Iterable[str], pool_size: int = 100,
                 host_config: Optional[List[HostConfig]] = None,
                 ssh_config: Union[str, SSHConfig, bool, None] = None,
                 _auth_thread_pool: bool = True, _options: Optional[ConnectOptions] = None,
                 **settings) -> None:
        for ignored in ("gssapi_auth", "gssapi_server_identity", "gssapi_client_identity",
                        "gssapi_delegate_credentials"):
            settings.pop(ignored, None)  # parallel-ssh's libssh client only
        self._options = ConnectOptions(**settings).over(_options or ConnectOptions())
        self._options.pkey = _validate_pkey(self._options.pkey)
        _validate_api(self._options.keyboard_interactive, self._options.password)
        self._ssh_config = ssh_config_of(ssh_config)
        self.pool_size = pool_size
        self.pool = Pool(size=pool_size, greenlet_class=HostGreenlet)
        _quiet_host_failures()
        self._hosts = self._validate_hosts(hosts)
        self.host_config = host_config
        self._check_host_config()
        self._host_clients: dict = {}
        self.cmds: Optional[List[gevent.Greenlet]] = None
        self._auth_thread_pool = _auth_thread_pool
        raise_open_file_limit(len(self._hosts) + 64)

    # -- hosts ---------------------------------------------------------------------

    @staticmethod
    def _validate_hosts(hosts) -> List[str]:
        if hosts is None:
            raise ValueError("hosts is None: give a list of host names")
        if isinstance(hosts, (str, bytes)):
            raise TypeError("hosts must be a list (or other iterable) of host names, not a "
                            "string: ['localhost'], not 'localhost'")
        return list(hosts)

    @property
    def hosts(self) -> List[str]:
        return self._hosts

    @hosts.setter
    def hosts(self, hosts) -> None:
        hosts = self._validate_hosts(hosts)
        kept = set(enumerate(hosts))
        for key in [k for k in self._host_clients if k not in kept]:
            del self._host_clients[key]
        self._hosts = hosts
        self._hosts_changed()

    def _hosts_changed(self) -> None:
        """Called once ``hosts`` was replaced: for what a subclass derives from them."""

    def _check_host_config(self) -> None:
        if self.host_config is None:
            return
        if not isinstance(self.host_config, list):
            raise exc.HostConfigError("host_config must be a list of HostConfig, not %s",
                                      type(self.host_config).__name__)
        if len(self.host_config) != len(self._hosts):
            raise exc.HostConfigError("host_config has %s entries for %s hosts",
                                      len(self.host_config), len(self._hosts))

    def _get_host_config(self, host_i: int) -> HostConfig:
        if self.host_config is not None:
            return self.host_config[host_i]
        return HostConfig.of(self._options)

    def host_options(self, host_i: int) -> ConnectOptions:
        """The options ``hosts[host_i]`` is connected with: the client's, with
        ``host_config[host_i]`` layered over them (the host's ssh config entry comes
        later, when its client resolves them; its client checks the key file: a missing
        one is that host's PKeyFileError). A client whose hosts' options are resolved
        elsewhere (a sharded client's worker is given them) overrides this."""
        if self.host_config is None:
            return self._options
        return self.host_config[host_i].options().over(self._options)

    @property
    def ssh_config(self) -> Optional[SSHConfig]:
        """The OpenSSH client config each host's settings are completed from (the
        ``ssh_config`` argument, loaded), or None for none."""
        return self._ssh_config

    # -- clients -------------------------------------------------------------------

    def _get_ssh_client(self, host_i: int, host: str) -> BaseSSHClient:
        """The connected client of ``hosts[host_i]`` (connects and logs in on first use)."""
        client = self._host_clients.get((host_i, host))
        if client is not None and client.session is not None:
            return client
        with freshness.logins():   # the span covers resolving this host's options too
            client = self._make_ssh_client(host, self.host_options(host_i))
        self._host_clients[(host_i, host)] = client
        return client

    def _make_ssh_client(self, host: str, options: ConnectOptions) -> BaseSSHClient:
        raise NotImplementedError

    def host_client(self, host_i: int) -> BaseSSHClient:
        """The connected client of ``hosts[host_i]``: for work of your own per host."""
        return self._get_ssh_client(host_i, self.hosts[host_i])

    def connect_auth(self) -> List[gevent.Greenlet]:
        """Connect and log in to every host now (otherwise done on first use); returns
        the greenlets doing it (``gevent.joinall(..., raise_error=True)`` waits)."""
        return [self.pool.spawn(self._get_ssh_client, i, host)
                for i, host in enumerate(self.hosts)]

    def disconnect_host(self, host_i: int) -> None:
        """Close ``hosts[host_i]``'s connection; the next use of that host reconnects."""
        client = self._host_clients.pop((host_i, self.hosts[host_i]), None)
        if client is not None:
            client.close()

    def close(self) -> None:
        """Close every host's connection now (they also close when the client is dropped)."""
        for client in self._host_clients.values():
            client.close()
        self._host_clients.clear()

    # -- commands ------------------------------------------------------------------

    # The parallel clients' signature (parallel-ssh's ParallelSSHClient.run_command, with
    # our errors and cancellable), so that a client's override is this one's.
    def run_command(self, command: str, sudo: bool = False, user: Optional[str] = None,
                    stop_on_errors: bool = True, use_pty: bool = False,
                    host_args: Optional[Sequence] = None, shell: Optional[str] = None,
                    encoding: str = "utf-8", read_timeout: Optional[float] = None,
                    errors: str = "replace", cancellable: bool = False) -> List[HostOutput]:
        """Start ``command`` on every host; one :class:`~pssh.output.HostOutput` per host,
        in host order, once every command has started (or its host failed).

        ``host_args``: one value per host (tuple, dict or single value) that
        ``command`` is ``%``-formatted with. With ``stop_on_errors`` a host's
        failure is raised; without it, it is in that host's
        ``HostOutput.exception``. The other arguments are each host's
        (see :meth:`SSHClient.run_command`).
        """
        if host_args:
            try:
                commands = [command % host_args[i] for i in range(len(self.hosts))]
            except IndexError:
                raise exc.HostArgumentError(
                    "%s host arguments for %s hosts", len(host_args), len(self.hosts)) from None
        else:
            commands = [command] * len(self.hosts)
        self.cmds = [self.pool.spawn(self._run_command, i, host, commands[i], sudo=sudo,
                                     user=user, shell=shell, use_pty=use_pty, encoding=encoding,
                                     read_timeout=read_timeout, errors=errors,
                                     cancellable=cancellable)
                     for i, host in enumerate(self.hosts)]
        gevent.joinall(self.cmds)
        return self._get_output_from_cmds(self.cmds, raise_error=stop_on_errors)

    def _run_command(self, host_i: int, host: str, command: str, sudo: bool = False,
                     user: Optional[str] = None, shell: Optional[str] = None,
                     use_pty: bool = False, encoding: str = "utf-8",
                     read_timeout: Optional[float] = None, errors: str = "replace",
                     cancellable: bool = False) -> HostOutput:
        try:
            client = self._get_ssh_client(host_i, host)
            return client.run_command(command, sudo=sudo, user=user, shell=shell,
                                      use_pty=use_pty, encoding=encoding,
                                      read_timeout=read_timeout, errors=errors,
                                      cancellable=cancellable)
        except (GTimeout, Exception) as err:
            logger.error("failed to run on host %s: %s", host, err)
            raise

    def _get_output_from_cmds(self, cmds: Sequence[gevent.Greenlet],
                              raise_error: bool = False) -> List[HostOutput]:
        gevent.joinall(cmds)
        return [self._get_output_from_greenlet(i, cmd, raise_error=raise_error)
                for i, cmd in enumerate(cmds)]

    def _get_output_from_greenlet(self, cmd_i: int, cmd: gevent.Greenlet,
                                  raise_error: bool = False) -> HostOutput:
        cmd.join()
        if cmd.successful():
            return cmd.value
        # The greenlet's own exception, not one re-raised here: its traceback ends
        # at the greenlet, so keeping it in the output keeps no caller's frame
        # (and with it the caller's objects, connections included) alive.
        err = cmd.exception
        if isinstance(err, GTimeout):
            err = exc.Timeout("%s: timed out", self.hosts[cmd_i], host=self.hosts[cmd_i])
        if raise_error:
            raise err
        return HostOutput(self.hosts[cmd_i], None, None, None, exception=err,
                          alias=self._get_host_config(cmd_i).alias)

    def get_last_output(self, cmds: Optional[Sequence[gevent.Greenlet]] = None
                        ) -> Optional[List[HostOutput]]:
        """The outputs of the last ``run_command`` (None if it never ran); errors are in
        each output's ``exception``."""
        cmds = self.cmds if cmds is None else cmds
        if cmds is None:
            return None
        return self._get_output_from_cmds(cmds, raise_error=False)

    def join(self, output: Optional[List[HostOutput]] = None, consume_output: bool = False,
             timeout: Optional[float] = None) -> None:
        """Wait until the commands of ``output`` (default: the last ``run_command``) end;
        then ``exit_code`` is set and their output stays readable.

        ``consume_output`` discards the output instead. ``timeout`` bounds the
        whole wait and raises :class:`~pssh.exceptions.Timeout` with ``args``
        ``(message, timeout, finished_output, unfinished_output)``; nothing is
        lost, a later join carries on.
        """
        if output is None:
            output = self.get_last_output()
            if output is None:
                logger.info("nothing to join: run_command never ran")
                return
        elif not isinstance(output, list):
            raise ValueError(f"output must be the list run_command returned, not "
                             f"{type(output).__name__}")
        finished, unfinished = _within(
            output, [HostGreenlet.spawn(self._join, host_out, consume_output=consume_output)
                     for host_out in output], timeout)
        if unfinished:
            names = ", ".join(str(o.host) for o in unfinished[:10])
            raise exc.Timeout(f"commands still running after %s s on: {names}",
                              timeout, finished, unfinished)

    def _join(self, host_out: Optional[HostOutput], consume_output: bool = False,
              timeout: Optional[float] = None) -> Optional[HostOutput]:
        if host_out is None or host_out.client is None:
            return host_out
        if consume_output and host_logger.isEnabledFor(logging.INFO):
            # Read line by line so that the host logger sees the output.
            self._consume_output(host_out.stdout, host_out.stderr)
        host_out.client.wait_finished(host_out, timeout=timeout, consume_output=consume_output)
        return host_out

    @staticmethod
    def _consume_output(stdout: Iterable[str], stderr: Iterable[str]) -> None:
        for _ in stdout:
            pass
        for _ in stderr:
            pass

    def cancel(self, output: Optional[List[HostOutput]] = None, signal: str = "TERM",
               timeout: Optional[float] = 10) -> List[HostOutput]:
        """Stop every command of ``output`` (default: the last run) still running, on all
        hosts at once (see :meth:`SSHClient.cancel`); returns their outputs.

        Commands stop for sure when started ``cancellable=True`` or with a pty.
        ``timeout`` bounds the whole; a host that fails to answer is logged.
        """
        if output is None:
            output = self.get_last_output() or []
        running = [o for o in output if o.client is not None
                   and not o.client.finished(o.channel)]
        greenlets = [HostGreenlet.spawn(o.client.cancel, o, signal, timeout) for o in running]
        gevent.joinall(greenlets, timeout=timeout)
        for host_out, greenlet in zip(running, greenlets):
            if not greenlet.successful():
                logger.warning("%s: cancelling failed: %s", host_out.host,
                               greenlet.exception or "no answer in time")
        gevent.killall([g for g in greenlets if not g.ready()], block=False)
        return running

    def finished(self, output: Optional[List[HostOutput]] = None) -> bool:
        """Whether every command of ``output`` (default: the last run) has ended; never
        blocks."""
        if output is None:
            output = self.get_last_output()
            if output is None:
                return True
        return all(not host_out.client or host_out.client.finished(host_out.channel)
                   for host_out in output)

    def as_completed(self, output: Iterable[HostOutput],
                     timeout: Optional[float] = None) -> Iterator[HostOutput]:
        """Each ``HostOutput`` as its command ends (output buffered, ``exit_code`` set),
        fastest first; hosts that failed to start come first of all."""
        queue: Queue = Queue()
        pending = 0
        for host_out in output:
            if host_out.client is None:
                yield host_out
                continue
            pending += 1
            HostGreenlet.spawn(self._finish_into, host_out, queue)
        with GTimeout(timeout, exc.Timeout("commands still running after %s s", timeout)):
            for _ in range(pending):
                host_out, error = queue.get()
                if error is not None:
                    host_out.exception = error
                yield host_out

    @staticmethod
    def _finish_into(host_out: HostOutput, queue: Queue) -> None:
        try:
            host_out.client.wait_finished(host_out)
            queue.put((host_out, None))
        except Exception as error:  # reported through the HostOutput
            queue.put((host_out, error))

    # -- shells ------------------------------------------------------------------------

    def _open_shell(self, host_i: int, host: str, encoding: str = "utf-8",
                    read_timeout: Optional[float] = None) -> InteractiveShell:
        try:
            return self._get_ssh_client(host_i, host).open_shell(
                encoding=encoding, read_timeout=read_timeout)
        except (GTimeout, Exception) as err:
            logger.error("failed to open a shell on host %s: %s", host, err)
            raise

    def open_shell(self, encoding: str = "utf-8",
                   read_timeout: Optional[float] = None) -> List[InteractiveShell]:
        """A login shell on every host (see :class:`~pssh.clients.base.single.InteractiveShell`);
        raises the first host's failure."""
        cmds = [self.pool.spawn(self._open_shell, i, host, encoding=encoding,
                                read_timeout=read_timeout) for i, host in enumerate(self.hosts)]
        gevent.joinall(cmds, raise_error=True)
        return [cmd.get() for cmd in cmds]

    def run_shell_commands(self, shells: Sequence[InteractiveShell],
                           commands: Union[str, List[str]]) -> None:
        """Send ``commands`` (one line or a list, in order) to every shell;
        :class:`~pssh.exceptions.ShellError` if one cannot take them."""
        if not isinstance(commands, list):
            commands = [commands]
        cmds = [self.pool.spawn(shell.run, commands) for shell in shells]
        try:
            gevent.joinall(cmds, raise_error=True, timeout=self.timeout)
        except Exception as err:
            raise exc.ShellError("cannot send commands to a shell: %s", err) from err

    def join_shells(self, shells: Sequence[InteractiveShell],
                    timeout: Optional[float] = None) -> None:
        """End every shell's input and wait for them to exit (``exit_code`` then set).

        ``timeout`` (default: the client's) bounds the whole wait:
        :class:`~pssh.exceptions.Timeout` with ``args`` ``(message, timeout,
        finished_shells, unfinished_shells)``; a later call carries on.
        """
        timeout = self.timeout if timeout is None else timeout
        finished, unfinished = _within(shells, [self.pool.spawn(shell.close) for shell in shells],
                                       timeout)
        if unfinished:
            raise exc.Timeout("shells still running after %s s", timeout, finished, unfinished)

    # -- file transfer ---------------------------------------------------------------

    def _per_host(self, copy_args: Optional[Sequence[dict]], *paths: str) -> List[tuple]:
        """``paths`` for each host: ``%``-formatted with that host's ``copy_args``."""
        if not copy_args:
            return [paths] * len(self.hosts)
        try:
            return [tuple(p % copy_args[i] for p in paths) for i in range(len(self.hosts))]
        except IndexError:
            raise exc.HostArgumentError("%s copy arguments for %s hosts", len(copy_args),
                                        len(self.hosts)) from None

    def _fetch_pairs(self, copy_args: Optional[Sequence[dict]], remote_file: str,
                     local_file: str, suffix_separator: str) -> List[tuple]:
        """(remote, local) for each host: ``copy_args``-formatted, else the local
        path suffixed with the host name so that hosts do not overwrite each other."""
        if copy_args:
            return self._per_host(copy_args, remote_file, local_file)
        return [(remote_file, suffix_separator.join([local_file, host])) for host in self.hosts]

    def _spawn_pairs(self, per_host, pairs: Sequence[tuple], **kwargs) -> List[gevent.Greenlet]:
        """One greenlet per host running ``per_host(host_i, host, *that host's pair, **kwargs)``."""
        return [self.pool.spawn(per_host, i, host, *pair, **kwargs)
                for i, (host, pair) in enumerate(zip(self.hosts, pairs))]

    def copy_file(self, local_file: str, remote_file: str, recurse: bool = False,
                  copy_args: Optional[Sequence[dict]] = None) -> List[gevent.Greenlet]:
        """Copy a local file (or with ``recurse``, a tree) to every host over SFTP.

        Returns one greenlet per host: ``gevent.joinall(cmds, raise_error=True)``
        waits and raises the first failure. ``copy_args`` (one dict per host)
        formats ``%(name)s`` fields in both paths. Missing remote directories
        are created.
        """
        return self._spawn_pairs(self._copy_file,
                                 self._per_host(copy_args, local_file, remote_file),
                                 recurse=recurse)

    def _copy_file(self, host_i: int, host: str, local_file: str, remote_file: str,
                   recurse: bool = False, **kwargs) -> None:
        return self._get_ssh_client(host_i, host).copy_file(local_file, remote_file,
                                                            recurse=recurse, **kwargs)

    def copy_remote_file(self, remote_file: str, local_file: str, recurse: bool = False,
                         suffix_separator: str = "_", copy_args: Optional[Sequence[dict]] = None,
                         encoding: str = "utf-8") -> List[gevent.Greenlet]:
        """Copy a remote file (or tree) from every host to ``<local_file><sep><host>``
        (or, with ``copy_args``, to each host's formatted ``local_file``)."""
        pairs = self._fetch_pairs(copy_args, remote_file, local_file, suffix_separator)
        return self._spawn_pairs(self._copy_remote_file, pairs, recurse=recurse,
                                 encoding=encoding)

    def _copy_remote_file(self, host_i: int, host: str, remote_file: str, local_file: str,
                          recurse: bool = False, **kwargs) -> None:
        return self._get_ssh_client(host_i, host).copy_remote_file(
            remote_file, local_file, recurse=recurse, **kwargs)

    # -- one host (ours: work per host, as the command line does it) ------------------------

    def connect_host(self, host_i: int) -> None:
        """Connect and log in to ``hosts[host_i]`` now (a failure is raised)."""
        self._get_ssh_client(host_i, self.hosts[host_i])

    def run_host_command(self, host_i: int, command: str, **kwargs) -> HostOutput:
        """Start ``command`` on ``hosts[host_i]`` alone (``run_command``'s per-host keywords:
        ``sudo``, ``user``, ``use_pty``, ``shell``, ``encoding``, ``read_timeout``,
        ``errors``, ``cancellable``); failures are raised."""
        return self._run_command(host_i, self.hosts[host_i], command, **kwargs)

    def copy_file_to_host(self, host_i: int, local_file: str, remote_file: str,
                          recurse: bool = False, callback=None,
                          into_directory: bool = False) -> None:
        """``copy_file`` for ``hosts[host_i]`` alone, done when it returns; ``callback(done,
        total)`` is called with the bytes of each file as they go; ``into_directory``: the
        target as ``scp`` decides it (see the single client's ``copy_file``)."""
        self._copy_file(host_i, self.hosts[host_i], local_file, remote_file, recurse=recurse,
                        callback=callback, **({"into_directory": True} if into_directory
                                              else {}))

    def copy_remote_file_from_host(self, host_i: int, remote_file: str, local_file: str,
                                   recurse: bool = False, callback=None) -> None:
        """``copy_remote_file`` from ``hosts[host_i]`` alone, to ``local_file`` as given (no
        host suffix); ``callback`` as for :meth:`copy_file_to_host`."""
        self._copy_remote_file(host_i, self.hosts[host_i], remote_file, local_file,
                               recurse=recurse, callback=callback)


for _field in fields(ConnectOptions):
    setattr(BaseParallelSSHClient, _field.name, _Setting(_field.name))
del _field
