"""The ``pssh`` command: run, copy and fetch across many hosts at once; poll them.

The arguments are parsed before anything heavy is imported: ``pssh --help`` and
usage errors never load gevent, the clients or rich (a third of a second).

What this package owns: the command line (parsing, host sets, the display, one
result pipeline for every way hosts are run). What it may import: the API shells
(:mod:`pssh.clients`, sharded through :mod:`pssh.fanout`), the core's data
(settings, ssh_config), rich; the runners and ``ssh2`` only through the shells.
"""
from __future__ import annotations

from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    """The ``pssh`` command: parse ``argv`` (default: ``sys.argv[1:]``), then run it."""
    from pssh.cli import options
    args = options.parse(argv)
    from pssh import stacks
    stacks.install()  # kill -USR1: where each host's work waits, for a run that seems stuck
    if args.subcommand == "hosts":
        from pssh.cli.hosts import print_hosts
        return print_hosts(args)
    if args.subcommand == "poll":
        from pssh.cli.poll_run import run as poll
        return poll(args)
    from pssh.cli.run import run
    return run(args)
