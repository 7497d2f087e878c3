"""Carrying out a parsed ``pssh`` command: run, copy and fetch across many hosts.

``pssh run|copy|fetch --help`` describes each subcommand. Every host is one
greenlet on :class:`pssh.clients.ParallelSSHClient`; its output streams as
soon as that host is up, whatever the other hosts do.
"""
from __future__ import annotations

import contextlib
import functools
import getpass
import logging
import os
import posixpath
import signal
import sys
import time
from typing import Dict, Iterator, List, Optional, Tuple

import gevent

from pssh import exceptions as exc
from pssh.cli import options
from pssh.cli.display import Display, HostResult
from pssh.cli.hosts import (HostSpec, UsageError, exclude, fold, parse_hosts,
                            read_hosts_file)
from pssh.clients import ParallelSSHClient
from pssh.config import HostConfig
from pssh.options import ConnectOptions
from pssh.output import HostOutput
from pssh.ssh_config import SSHConfig, SSHConfigError, load

log = logging.getLogger("pssh.cli")


class _DisplayLogHandler(logging.Handler):
    """Log records printed through the display, so they never break the progress bar."""

    def __init__(self, display: Display) -> None:
        super().__init__()
        self.display = display

    def emit(self, record: logging.LogRecord) -> None:
        self.display.message(self.format(record))


def run(args) -> int:
    """Carry out the command line ``args`` (parsed by :func:`pssh.cli.options.parse`)."""
    try:
        with _hosts(args) as (hosts, base, config):
            return _execute(args, hosts, _connect_options(args, base), _ssh_config(args, config))
    except UsageError as err:
        args.error(str(err))
    except KeyboardInterrupt:
        sys.stderr.write("pssh: interrupted\n")
        return options.EXIT_INTERRUPTED


@contextlib.contextmanager
def _hosts(args) -> Iterator[Tuple[List[HostSpec], ConnectOptions, object]]:
    """The hosts to work on, connection settings and ssh config: from the arguments, or
    embedded servers."""
    if args.embedded is not None:
        from pssh.sshd import ServerGroup  # only the embedded mode needs the server wrapper

        sys.stderr.write(f"pssh: starting {args.embedded} local OpenSSH hosts "
                         f"(127.0.0.1..{args.embedded}) with a throwaway key\n")
        with ServerGroup(args.embedded) as group:
            yield [HostSpec(h) for h in group.hosts], ConnectOptions(
                port=group.port, pkey=group.keys.private(), known_hosts=group.known_hosts_file(),
                host_key_policy="strict", allow_agent=False, identity_auth=False), False
        return
    specs: List[str] = []
    for text in args.host_specs:
        specs.extend(text.split())
    hosts = parse_hosts(specs)
    for path in args.host_files:
        hosts.extend(read_hosts_file(path))
    if hosts and args.exclude:
        hosts = exclude(hosts, args.exclude)
        if not hosts:
            raise UsageError("no host is left once -x has excluded its hosts")
    if not hosts:
        raise UsageError("the host list is empty")
    yield hosts, ConnectOptions(), None


# What the command line does unless told otherwise: fail fast rather than retry.
CLI_DEFAULTS = ConnectOptions(num_retries=1, retry_delay=0.5)


def _connect_options(args, base: ConnectOptions) -> ConnectOptions:
    """The connection settings: the flags, over ``base`` (embedded servers), over the
    command line's defaults."""
    if args.key is not None and not os.path.isfile(os.path.expanduser(args.key)):
        raise UsageError(f"key file {args.key} not found")
    flags = ConnectOptions(user=args.user, port=args.port, pkey=args.key, allow_agent=args.agent,
                           timeout=args.connect_timeout, known_hosts=args.known_hosts,
                           host_key_policy=args.host_key_policy, proxy_jump=args.jump,
                           forward_ssh_agent=args.forward_agent)
    options = flags.over(base).over(CLI_DEFAULTS)
    if args.askpass:
        try:
            options.password = getpass.getpass("Password: ")
        except EOFError:
            raise UsageError("-A: no password given (end of input)") from None
        options.keyboard_interactive = True
    return options


def _ssh_config(args, embedded_config):
    if embedded_config is False or args.config == "none":
        return False
    try:
        return SSHConfig.from_file(args.config) if args.config else load()
    except SSHConfigError as err:
        raise UsageError(str(err)) from None


def _check_paths(args) -> None:
    if getattr(args, "output_dir", None):
        os.makedirs(args.output_dir, exist_ok=True)
    if args.subcommand == "copy":
        if not os.path.exists(args.local):
            raise UsageError(f"local file {args.local} not found")
        if os.path.isdir(args.local) and not args.recursive:
            raise UsageError(f"{args.local} is a directory: add -r to copy it")
    if args.subcommand == "run":
        for directory in (args.outdir, args.errdir):
            if directory:
                os.makedirs(directory, exist_ok=True)


def _display(args, hosts: List[HostSpec]) -> Display:
    """The run's display, with log records going through it."""
    interactive = {"auto": None, "always": True, "never": False}[args.progress]
    colour = {"auto": None, "always": True, "never": False}[args.color]
    display = Display(len(hosts), title=f"pssh {args.subcommand}", interactive=interactive,
                      colour=colour, show_bytes=args.subcommand != "run")
    handler = _DisplayLogHandler(display)
    handler.setFormatter(logging.Formatter("pssh: %(message)s"))
    level = max(logging.DEBUG, logging.WARNING - 10 * args.verbose)
    handler.setLevel(level)  # libraries' loggers with levels of their own (Dask's) included
    logging.basicConfig(level=level, handlers=[handler], force=True)
    return display


def _execute(args, hosts: List[HostSpec], connect: ConnectOptions, config) -> int:
    _check_paths(args)
    if args.scheduler is not None:
        from pssh.cli.cluster import execute_on_cluster  # Dask is imported only for this
        return execute_on_cluster(args, hosts, connect, config, _display(args, hosts))
    display = _display(args, hosts)
    client = ParallelSSHClient([h.host for h in hosts],
                               host_config=[HostConfig(user=h.user, port=h.port) for h in hosts],
                               pool_size=args.parallel, ssh_config=config,
                               processes=args.processes, **connect.given())
    results: List[Optional[HostResult]] = [None] * len(hosts)
    running: Dict[int, HostOutput] = {}  # commands started and not yet finished, by host
    work = {"run": functools.partial(_run_host, running=running), "copy": _copy_host,
            "fetch": _fetch_host, "ping": _ping_host}[args.subcommand]
    failed = []  # with --fail-fast, hosts not yet started are skipped once this is not empty

    def task(index: int) -> None:
        result = HostResult(hosts[index].host)
        display.host_started()
        started = time.monotonic()
        timeout = gevent.Timeout(args.timeout, exc.Timeout(
            f"did not finish within {args.timeout} s", hosts[index].host)) \
            if args.timeout else contextlib.nullcontext()
        try:
            if failed and args.fail_fast:
                raise exc.PSSHError(f"not started: {failed[0]} failed first (--fail-fast)")
            with timeout:
                work(args, client, index, result, display)
        except gevent.GreenletExit:
            result.error = "interrupted"
            raise
        except (exc.PSSHError, OSError, ValueError) as err:
            result.error = err.reason if isinstance(err, exc.PSSHError) else str(err)
            unfinished = running.pop(index, None)
            if unfinished is not None:  # e.g. -t ran out: stop what it started
                client.cancel([unfinished], timeout=5)
            client.disconnect_host(index)  # its session may be half-way through a call
        finally:
            result.duration = time.monotonic() - started
            write_status(args, result)
        results[index] = result
        display.host_finished(result)
        if not result.ok:
            failed.append(result.host)
        show_result(args, display, result)

    tasks = [client.pool.spawn(task, i) for i in range(len(hosts))]
    interrupted = _Interrupt(lambda: _status(hosts, running, display),
                             lambda: _stop(client, hosts, running, tasks))
    try:
        with display, interrupted:
            gevent.joinall(tasks)
    finally:
        gevent.killall(tasks, block=False)
        client.close()
    if interrupted.count > 1:
        raise KeyboardInterrupt
    return finish(args, display, results)


def show_result(args, display: Display, result: HostResult) -> None:
    """A finished host, as the output options ask (streamed lines were shown already)."""
    if args.json:
        display.json(result)
    elif getattr(args, "inline", False):
        display.block(result, display.done)
    elif args.subcommand == "ping":
        display.ping(result)


def write_status(args, result: HostResult) -> None:
    """``--output-dir``: the host's ``.status`` file, once it has ended."""
    directory = getattr(args, "output_dir", None)
    if directory:
        text = (f"error: {result.error}" if result.error is not None
                else f"exit {result.exit_code}")
        with open(os.path.join(directory, result.host + ".status"), "w",
                  encoding="utf-8") as fh:
            fh.write(f"{text}\n")


def finish(args, display: Display, results: List[Optional[HostResult]]) -> int:
    """Gathered or diff views, the summary, and the exit status the policy asks for."""
    done = [r for r in results if r is not None]
    if getattr(args, "gather", False):
        from pssh.cli.gather import show_gathered
        show_gathered(display, done)
    elif getattr(args, "diff", False):
        from pssh.cli.gather import show_diff
        show_diff(display, done)
    display.summary(done)
    if args.subcommand == "ping":
        counts: Dict[str, int] = {}
        for result in done:
            kind = "reachable" if result.ok else (result.error or "failed").split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        display.message("pssh ping: " + ", ".join(f"{n} {kind}" for kind, n in
                                                  sorted(counts.items(), key=lambda i: -i[1])))
    return exit_status(args.exit_status, results)


def exit_status(policy: str, results: List[Optional[HostResult]]) -> int:
    """``all``: 0 only if every host succeeded; ``any``: 0 if one did; ``max``: the highest
    remote exit status (255, as ssh's own, for a host that could not run the command)."""
    if policy == "max":
        return max((255 if r is None or r.error is not None or r.exit_code is None
                    else r.exit_code for r in results), default=0)
    succeeded = [r is not None and r.ok for r in results]
    if all(succeeded) if policy == "all" else any(succeeded):
        return options.EXIT_OK
    return options.EXIT_HOSTS_FAILED


class _Interrupt:
    """Ctrl-C while hosts run, taken by the event loop (never mid-call in some greenlet):
    the first runs ``on_first`` (say who is still running), the second ``on_second`` (stop
    them), each in a greenlet of its own; the third exits at once."""

    def __init__(self, on_first, on_second) -> None:
        self.actions = [on_first, on_second]
        self.count = 0
        self._handler = None

    def __enter__(self) -> "_Interrupt":
        self._handler = gevent.signal_handler(signal.SIGINT, self._interrupted)
        return self

    def __exit__(self, *exc_info) -> None:
        self._handler.cancel()

    def _interrupted(self) -> None:
        self.count += 1
        if self.count <= len(self.actions):
            gevent.spawn(self.actions[self.count - 1])
        else:  # the main greenlet stops waiting: exit now
            gevent.get_hub().parent.throw(KeyboardInterrupt)


def _status(hosts: List[HostSpec], running: Dict[int, HostOutput], display: Display) -> None:
    """First Ctrl-C: who is still running (the run goes on)."""
    names = [hosts[i].host for i in sorted(running)]
    display.message(f"pssh: still running on {len(names)} host(s): "
                    f"{fold(names) or 'none'} (Ctrl-C again to stop them)")


def _stop(client: ParallelSSHClient, hosts: List[HostSpec], running: Dict[int, HostOutput],
          tasks: List[gevent.Greenlet]) -> None:
    """Second Ctrl-C: stop the commands still running, end the run."""
    names = [hosts[i].host for i in sorted(running)]
    if names:
        sys.stderr.write(f"pssh: interrupted: stopping the command on {len(names)} host(s) "
                         f"still running: {fold(names)} (Ctrl-C again to exit at once)\n")
        client.cancel(list(running.values()), timeout=10)
    gevent.killall(tasks, block=False)


def _run_host(args, client: ParallelSSHClient, index: int, result: HostResult,
              display: Display, running: Dict[int, HostOutput]) -> None:
    output = client.run_host_command(index, args.command, sudo=args.sudo, cancellable=True)
    running[index] = output
    collect = args.json or args.inline or args.gather or args.diff
    paths = [os.path.join(d, result.host) if d else None for d in (args.outdir, args.errdir)]
    if args.output_dir:
        paths = [os.path.join(args.output_dir, f"{result.host}.{name}")
                 for name in ("stdout", "stderr")]
    files = [open(path, "w", encoding="utf-8") if path else None for path in paths]

    def pump(lines, stderr: bool) -> None:
        sink, stream = files[stderr], (result.stderr if stderr else result.stdout)
        for line in lines:
            if sink is not None:
                sink.write(line + "\n")
                sink.flush()  # written as it comes: nothing lost if the run is stopped
            elif collect:
                stream.append(line)
            else:
                display.line(result.host, line, stderr)

    pumps = [gevent.spawn(pump, output.stdout, False), gevent.spawn(pump, output.stderr, True)]
    try:
        gevent.joinall(pumps, raise_error=True)
    finally:
        gevent.killall(pumps)
        for sink in files:
            if sink is not None:
                sink.close()
    running.pop(index, None)
    result.exit_code = output.exit_code
    if result.exit_code is None:
        signal = output.exit_signal
        result.error = f"killed by signal {signal}" if signal else "no exit status"


def _ping_host(args, client: ParallelSSHClient, index: int, result: HostResult,
               display: Display) -> None:
    """Connect and log in only; a failure says which kind it is."""
    started = time.monotonic()
    try:
        client.connect_host(index)
    except exc.PSSHError as err:
        raise exc.PSSHError(f"{_ping_problem(err)}: {err.reason}") from err
    result.exit_code = 0
    result.stdout = [f"{1000 * (time.monotonic() - started):.1f} ms"]


def _ping_problem(err: BaseException) -> str:
    if isinstance(err, (exc.AuthenticationError, exc.PKeyFileError)):
        return "login refused"
    if isinstance(err, exc.HostKeyError):
        return "host key problem"
    if isinstance(err, (exc.ConnectionError, exc.UnknownHostError, exc.Timeout)):
        return "unreachable"
    return "failed"


def _byte_counter(result: HostResult, display: Display):
    last = [0]

    def progress(done: int, total: int) -> None:
        # Called per file with bytes so far: a smaller count means the next file began.
        delta = done - last[0] if done >= last[0] else done
        last[0] = done
        result.transferred += delta
        display.add_bytes(delta)
    return progress


def _copy_host(args, client: ParallelSSHClient, index: int, result: HostResult,
               display: Display) -> None:
    client.copy_file_to_host(index, args.local, args.remote, recurse=args.recursive,
                             callback=_byte_counter(result, display))


def _fetch_host(args, client: ParallelSSHClient, index: int, result: HostResult,
                display: Display) -> None:
    name = posixpath.basename(args.remote.rstrip("/")) or "root"
    local = os.path.join(args.local, result.host, name)
    client.copy_remote_file_from_host(index, args.remote, local, recurse=args.recursive,
                                      callback=_byte_counter(result, display))
