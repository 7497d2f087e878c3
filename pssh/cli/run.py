"""Carrying out a parsed ``pssh`` command: run, copy, fetch and ping across many hosts.

``pssh run|copy|fetch|ping --help`` describes each subcommand. This module
gathers the hosts and the connection settings, then hands the run to the one
result pipeline (:mod:`pssh.cli.pipeline`) with the executor of the mode
asked for (:mod:`pssh.cli.executors`).
"""
from __future__ import annotations

import contextlib
import getpass
import logging
import os
import signal
import sys
from typing import Iterator, List, Tuple

from pssh.cli import options
from pssh.cli.display import Display
from pssh.cli.hosts import (HostSpec, UsageError, exclude, labels, parse_hosts,
                            read_hosts_file, unique)
from pssh.cli.pipeline import Pipeline
from pssh.cli.signals import Stopped
from pssh.options import ConnectOptions
from pssh.ssh_config import SSHConfig, SSHConfigError, load

log = logging.getLogger("pssh.cli")


class _DisplayLogHandler(logging.Handler):
    """Log records printed through the display, so they never break the progress bar."""

    def __init__(self, display: Display) -> None:
        super().__init__()
        self.display = display

    def emit(self, record: logging.LogRecord) -> None:
        self.display.message(self.format(record))


#: Loggers whose INFO records are shown without -v: what ssh says at its default LogLevel
#: (INFO), such as "Permanently added '<host>' (<TYPE>) to the list of known hosts."
SHOWN_AT_INFO = ("pssh.core.known_hosts",)


def _not_a_host_failure(record: logging.LogRecord) -> bool:
    """Without -v: the clients' error records about one host's failure are left out, as
    the run reports each host's failure itself (once, whatever runs the hosts); errors
    with a traceback (bugs) are kept."""
    return not (record.levelno == logging.ERROR and record.name.startswith("pssh.clients.")
                and not record.exc_info and not getattr(record, "exc_text", None))


def run(args, execute=None) -> int:
    """Carry out the command line ``args`` (parsed by :func:`pssh.cli.options.parse`):
    ``execute(args, hosts, connect_options, ssh_config)`` (default: the one result
    pipeline; ``pssh poll`` gives its own) with the hosts and settings gathered here."""
    try:
        with _hosts(args) as (hosts, base, config):
            return (execute or _execute)(args, hosts, _connect_options(args, base),
                                         _ssh_config(args, config))
    except UsageError as err:
        args.error(str(err))  # exits: the subcommand parser's error()
        raise  # not reached
    except Stopped as stopped:
        sys.stderr.write("pssh: interrupted\n" if stopped.signum == signal.SIGINT
                         else "pssh: terminated\n")
        return stopped.code
    except KeyboardInterrupt:  # before the run began (a password prompt, say)
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
    hosts = parse_hosts(args.host_specs)
    for path in args.host_files:
        hosts.extend(read_hosts_file(path))
    hosts = unique(hosts, args.user, args.port)  # a host written twice runs once
    if hosts and args.exclude:
        hosts = exclude(hosts, args.exclude)
        if not hosts:
            raise UsageError("no host is left once -x has excluded its hosts")
    if not hosts:
        raise UsageError("the host list is empty")
    yield hosts, ConnectOptions(), None


# What the command line does unless told otherwise: fail fast rather than retry.
CLI_DEFAULTS = ConnectOptions(num_retries=1, retry_delay=0.5)
#: Seconds to connect and log in, and for each request, unless --connect-timeout says
#: (the connection's limit also gives way to the ssh config's ConnectTimeout and -O's).
CONNECT_TIMEOUT = 10.0


def _connect_options(args, base: ConnectOptions) -> ConnectOptions:
    """The connection settings: the flags, over ``base`` (embedded servers), over the
    command line's defaults."""
    if args.key is not None and not os.path.isfile(os.path.expanduser(args.key)):
        raise UsageError(f"key file {args.key} not found")
    # --connect-timeout is parallel-ssh's timeout (connecting, and each request); without
    # it, requests keep the default limit and connecting takes the ssh config's (_ssh_config).
    limits = ConnectOptions(timeout=args.connect_timeout) if args.connect_timeout is not None \
        else ConnectOptions(request_timeout=CONNECT_TIMEOUT)
    flags = ConnectOptions(user=args.user, port=args.port, pkey=args.key, allow_agent=args.agent,
                           known_hosts=args.known_hosts,
                           host_key_policy=args.host_key_policy, proxy_jump=args.jump,
                           forward_ssh_agent=args.forward_agent)
    options = flags.over(limits).over(base).over(CLI_DEFAULTS)
    if args.askpass:
        try:
            options.password = getpass.getpass("Password: ")
        except EOFError:
            raise UsageError("-A: no password given (end of input)") from None
        options.keyboard_interactive = True
    return options


def _ssh_config(args, embedded_config) -> SSHConfig:
    """The ssh config the hosts are resolved with: ``-O`` options first (as ``ssh -o``),
    then the file (none for embedded hosts or ``-F none``), then the command line's
    connection limit, which the file and ``-O`` override."""
    file_config = None
    if embedded_config is not False and args.config != "none":
        try:
            file_config = SSHConfig.from_file(args.config) if args.config else load()
        except SSHConfigError as err:
            raise UsageError(str(err)) from None
    own = [f"ConnectTimeout {CONNECT_TIMEOUT:g}"] if args.connect_timeout is None else []
    return SSHConfig.layered(args.ssh_options, file_config, own, origin="-O")


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
                      colour=colour, show_bytes=args.subcommand in ("copy", "fetch"),
                      raw=getattr(args, "raw", False))
    handler = _DisplayLogHandler(display)
    handler.setFormatter(logging.Formatter("pssh: %(message)s"))
    level = max(logging.DEBUG, logging.WARNING - 10 * args.verbose)
    # The level applies to libraries' loggers with levels of their own (Dask's) too; the
    # few records ssh shows at its default level pass below it.
    handler.setLevel(min(level, logging.INFO))
    handler.addFilter(lambda record: record.levelno >= level or record.name in SHOWN_AT_INFO)
    if not args.verbose:
        handler.addFilter(_not_a_host_failure)
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in SHOWN_AT_INFO:
        logging.getLogger(name).setLevel(min(level, logging.INFO))
    return display


def _execute(args, hosts: List[HostSpec], connect: ConnectOptions, config) -> int:
    """Run the hosts through the one result pipeline with the parallel client: in this
    process, sharded over worker processes (``--processes``) or over a Dask cluster
    (``--scheduler``)."""
    _check_paths(args)
    if getattr(args, "send_input", False):
        # Read whole before any host starts (and before the run's signal handling, so
        # Ctrl-C at a terminal still ends a read that waits): every host gets the same.
        args.input_data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        log.debug("-I: sending %d bytes of input to every host", len(args.input_data))
    from pssh.cli.executors import ClientExecutor
    pipeline = Pipeline(args, labels(hosts, connect.port), _display(args, hosts))
    return pipeline.run(lambda events: ClientExecutor(args, hosts, connect, config, events))
