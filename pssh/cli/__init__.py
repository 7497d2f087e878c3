"""The ``pssh`` command: run, copy and fetch across many hosts at once.

The arguments are parsed before anything heavy is imported: ``pssh --help`` and
usage errors never load gevent, the clients or rich (a third of a second).
"""
from __future__ import annotations

from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    """The ``pssh`` command: parse ``argv`` (default: ``sys.argv[1:]``), then run it."""
    from pssh.cli import options
    args = options.parse(argv)
    if args.subcommand == "hosts":
        from pssh.cli.hosts import print_hosts
        return print_hosts(args)
    from pssh.cli.run import run
    return run(args)
