"""The ``pssh`` argument parser: subcommands ``run``, ``copy``, ``fetch``, ``ping``,
``poll`` (its own options in :mod:`pssh.cli.poll`), ``hosts``."""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import List, NoReturn, Optional

from pssh.cli.extras import MissingExtra
from pssh.cli.hosts import UsageError
from pssh.runners import RUNNERS

EXIT_OK, EXIT_HOSTS_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXAMPLES = {
    "run": """
        examples:
          pssh run --embedded 5 -- 'uname -sr'
          pssh run -H "web[01-20].example db1" -l deploy -- 'systemctl is-active nginx'
          pssh run -h hosts.txt -i -t 30 -- 'df -h /'
          pssh run -h hosts.txt --json -- 'cat /etc/os-release' | jq .host
          pssh run -H "app1 app2" -J bastion.example -o out/ -e err/ -- 'journalctl -n 100'
          pssh run -h fleet.txt --processes auto -p 500 -- 'uptime'   # every core
          pssh run -h fleet.txt --scheduler tcp://dask.example:8786 -- 'uptime'
          pssh run -H "web[01-40]" -x "web[13,27]" -b -- 'cat /etc/debian_version'
          pssh run -H ^fleet.txt --diff -- 'sha256sum /etc/app.conf'
          pssh run -h fleet.txt -f 20 --fail-fast --exit-status max -- ./deploy.sh
          pssh run -h fleet.txt --output-dir runs/today -- 'journalctl -n 50'
        """,
    "copy": """
        examples:
          pssh copy -h hosts.txt app.conf /etc/app/app.conf
          pssh copy -H "web[1-4]" -r ./site /srv/www/site
        """,
    "ping": """
        examples:
          pssh ping -h hosts.txt                 # who is reachable, key and login problems
          pssh ping -H "web[01-40]" -x web13 --json
        """,
    "fetch": """
        examples:
          pssh fetch -h hosts.txt /var/log/syslog logs/      # logs/<host>/syslog
          pssh fetch -H "db1 db2" -r /etc/postgresql conf/   # conf/<host>/postgresql/...
        """,
}
DESCRIPTIONS = {
    "run": "Run a command on every host at once; output is streamed with a [host] prefix.",
    "copy": "Copy a local file (or with -r a directory) to the same path on every host (SFTP).",
    "fetch": "Fetch a remote file (or with -r a directory) from every host into LOCALDIR/<host>/.",
    "ping": "Connect and log in to every host, run nothing: time per host, and who cannot be "
            "reached, has a host key problem, or refuses the login.",
    "hosts": "Print the hosts a host expression stands for (ranges, ^files, exclusions), one "
             "per line, or folded.",
}
EXIT_TEXT = """
exit status: 0 every host succeeded; 1 some host failed (error or non-zero exit);
2 usage error; 130 stopped by SIGINT (Ctrl-C); 143 stopped by SIGTERM.
--exit-status any: 0 if any host succeeded; --exit-status max: the highest remote
exit status (255 for a host that failed to run).

stopping: at a terminal (pssh reads the terminal and is its foreground job, so a
person can press Ctrl-C again), Ctrl-C once says who is still running; twice stops
their commands and transfers (none leaves a file under its final name) and exits;
three times exits at once. A
script run at the terminal gets the same Ctrl-C, so it is staged there too.
Anywhere else (a script's background job, cron, CI, a supervisor, input not from
the terminal), one SIGINT stops the run as the second Ctrl-C does. SIGTERM always
stops the run at once. Every mode alike (--processes, --scheduler included).
"""


def _processes(text: str):
    """``--processes``: a positive number, or ``auto``."""
    if text == "auto":
        return text
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes or 'auto', "
                                         f"not {text!r}")
    return number


class Parser(argparse.ArgumentParser):
    """One-line errors with a hint instead of argparse's usage dump."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n"
                         f"Try '{self.prog} --help' for more information.\n")
        sys.exit(EXIT_USAGE)


def _common(parser: argparse.ArgumentParser, subcommand: str) -> None:
    parser.add_argument("--help", action="help", help="show this help and exit")
    hosts = parser.add_argument_group("hosts")
    hosts.add_argument("-H", "-w", "--host", dest="host_specs", action="append", default=[],
                       metavar='"HOST,..."', help="hosts as [user@]host[:port], separated by "
                       "commas or blanks; node sets like web[01-20,25].example (ClusterShell's "
                       "grammar; -w as clush and pdsh); repeatable")
    hosts.add_argument("-h", "--hosts", dest="host_files", action="append", default=[],
                       metavar="FILE", help="file of hosts, one or more per line, # comments")
    hosts.add_argument("-x", "--exclude", action="append", default=[], metavar="HOSTS",
                       help="leave out these hosts: node sets (web[01-04],db1) or globs "
                            "(db*); repeatable")
    hosts.add_argument("--embedded", type=int, metavar="N",
                       help="start N local OpenSSH hosts (127.0.0.1..N) and use them")
    conn = parser.add_argument_group("connection")
    conn.add_argument("-l", "--user", help="login name (default: ssh config, then you)")
    conn.add_argument("--port", type=int, help="port (default: ssh config, then 22)")
    if subcommand != "poll":  # (poll's own options: pssh.cli.poll)
        _run_options(conn, subcommand)
    _login_options(conn)
    if subcommand != "poll":
        _output_options(parser)


def _run_options(conn, subcommand: str) -> None:
    conn.add_argument("-p", "-f", "--parallel", "--fanout", type=int, default=100, metavar="N",
                      dest="parallel", help="hosts worked on at once, in host order, in all "
                      "(also with --processes or --scheduler; default 100)")
    conn.add_argument("--fail-fast", action="store_true",
                      help="start no more hosts after the first failure (-k is the key file)")
    conn.add_argument("--processes", metavar="N|auto", type=_processes,
                      help="shard the hosts over N worker processes (auto: one per core); "
                           "for runs bound by one core's CPU (default: one process)")
    if subcommand == "run":  # copy and fetch read and write local files: never on Dask's
        conn.add_argument("--scheduler", metavar="ADDRESS|local:N",
                          help="run on a Dask cluster (tcp://host:8786), or on N local Dask "
                               "worker processes started for the run (local:N)")
        conn.add_argument("--idempotent", action="store_true",
                          help="with --scheduler: a host whose Dask worker is lost may run "
                               "the command again elsewhere (otherwise it fails)")
    conn.add_argument("-t", "--timeout", type=float, metavar="SECONDS",
                      help="time each host may take in all (default: no limit)")
    conn.add_argument("--runner", choices=RUNNERS, default=None,
                      help="how each process drives its hosts' connections: native (one "
                           "epoll set for all of them: less CPU per host) or gevent "
                           "(default: PSSH_RUNNER, else native)")


def _login_options(conn) -> None:
    conn.add_argument("--connect-timeout", type=float, metavar="SECONDS",
                      help="time to connect and log in (default: ssh config "
                           "ConnectTimeout, then 10)")
    conn.add_argument("-O", "--ssh-option", dest="ssh_options", action="append", default=[],
                      metavar="OPTION", help="an ssh_config option, as ssh -o: Key=Value or "
                      "'Key Value', e.g. -O StrictHostKeyChecking=no -O ConnectTimeout=5; "
                      "repeatable; the first value given for a key wins, over the ssh config "
                      "file; flags such as --port and -l win over it")
    conn.add_argument("-k", "--key", metavar="FILE", help="private key file")
    conn.add_argument("-A", "--askpass", action="store_true",
                      help="ask for a password (not echoed) and log in with it; with -k, "
                           "it unlocks the key instead")
    conn.add_argument("--agent", action=argparse.BooleanOptionalAction, default=None,
                      help="use the SSH agent (default: yes unless IdentitiesOnly)")
    conn.add_argument("--forward-agent", action="store_true", default=None,
                      help="let remote commands use your SSH agent (as ssh -A; default: "
                           "ssh config ForwardAgent)")
    conn.add_argument("-J", "--jump", metavar="[USER@]HOST[:PORT][,...]",
                      help="jump host(s), as ssh -J")
    conn.add_argument("-F", "--config", metavar="FILE",
                      help="ssh client config (default ~/.ssh/config; 'none' for none)")
    conn.add_argument("--known-hosts", metavar="FILE", help="known_hosts file")
    conn.add_argument("--host-key-policy", choices=("strict", "accept-new", "off"),
                      help="unknown or changed host keys (default: ssh config, then accept-new)")


def _output_options(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="one JSON object per host, as it ends")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    out.add_argument("--raw", action="store_true",
                     help="on a terminal, show the hosts' control characters as they are "
                          "(default: made visible, as cat -v: a host cannot move the cursor "
                          "or rewrite other hosts' lines)")
    out.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                     help="live progress bar and summary table (auto: when stderr is a terminal)")
    out.add_argument("--exit-status", choices=("all", "any", "max"), default="all",
                     help="all: 0 only if every host succeeded (default); any: 0 if one did; "
                          "max: the highest remote exit status")
    out.add_argument("-v", "--verbose", action="count", default=0, help="log more (repeatable)")


class _Version(argparse.Action):
    """``--version``: pssh2's version and the libssh2 it runs on (imported only when asked)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         help="print pssh2's version and its libssh2's, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace, values,
                 option_string=None) -> NoReturn:
        import ssh2
        import ssh2.session
        import ssh2.utils
        build = "patched" if ssh2.session.PATCHED_LIBSSH2 else "unpatched"
        print(f"pssh {ssh2.__version__} (libssh2 {ssh2.utils.version()}, {build})")
        parser.exit()


class _HostsFileFirst(argparse.Action):
    """``pssh -h``: -h is a hosts file (classic pssh's), after the subcommand; --help is
    help, everywhere."""

    def __call__(self, parser: argparse.ArgumentParser, namespace, values,
                 option_string=None) -> NoReturn:
        parser.error("-h FILE is a hosts file and goes after the subcommand, as in "
                     "pssh run -h hosts.txt -- uptime; --help shows help")


def build() -> argparse.ArgumentParser:
    parser = Parser(prog="pssh", description="Run commands and move files on many hosts over "
                    "SSH at once.", epilog=EXIT_TEXT, add_help=False,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--help", action="help", help="show this help and exit")
    parser.add_argument("-h", action=_HostsFileFirst, nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="subcommand", metavar="{run,copy,fetch,ping,poll,hosts}",
                                parser_class=Parser)
    sub.required = True
    hosts = sub.add_parser("hosts", help=DESCRIPTIONS["hosts"], add_help=False,
                           description=DESCRIPTIONS["hosts"], epilog=textwrap.dedent("""
                               examples:
                                 pssh hosts "web[01-20]" -x "web[05-07]"
                                 pssh hosts -w "web[1-3],db1" --fold
                                 pssh hosts --fold ^fleet.txt
                                 pssh hosts -h fleet.txt -x "db*"
                                 pssh hosts --count "rack[1-4]-n[01-32]"
                               """), formatter_class=argparse.RawDescriptionHelpFormatter)
    hosts.add_argument("--help", action="help", help="show this help and exit")
    hosts.add_argument("expressions", nargs="*", metavar="HOSTS",
                       help="node sets of [user@]host[:port] (web[1-3,7],db1), or ^FILE")
    hosts.add_argument("-H", "-w", "--host", dest="host_specs", action="append", default=[],
                       metavar='"HOST,..."', help="more hosts, as the positional ones "
                       "(the option run, copy, fetch and ping take); repeatable")
    hosts.add_argument("-h", "--hosts", dest="host_files", action="append", default=[],
                       metavar="FILE", help="file of hosts, as for the other subcommands "
                       "(the same as ^FILE)")
    hosts.add_argument("-x", "--exclude", action="append", default=[], metavar="HOSTS",
                       help="leave out these hosts (node sets or globs); repeatable")
    shown = hosts.add_mutually_exclusive_group()
    shown.add_argument("--fold", action="store_true", help="print them folded into ranges")
    shown.add_argument("--count", action="store_true", help="print how many there are")
    for name in ("run", "copy", "fetch", "ping", "poll"):
        if name == "poll":
            from pssh.cli import poll
            description, epilog = poll.DESCRIPTION, poll.EPILOG
        else:
            description, epilog = DESCRIPTIONS[name], textwrap.dedent(EXAMPLES[name]) + EXIT_TEXT
        p = sub.add_parser(name, add_help=False, help=description, description=description,
                           epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        _common(p, name)
        if name == "poll":
            poll.add_arguments(p)
        elif name == "run":
            p.add_argument("-i", "--inline", action="store_true",
                           help="print each host's output as one block when it ends")
            p.add_argument("-b", "--gather", action="store_true",
                           help="at the end, show identical outputs once under their hosts "
                                "(folded: web[01-05]), as clush -b / dshbak -c")
            p.add_argument("--diff", action="store_true",
                           help="at the end, show each output that differs from the most "
                                "common one as a unified diff")
            p.add_argument("-o", "--outdir", metavar="DIR", help="write stdout to DIR/<host>")
            p.add_argument("-e", "--errdir", metavar="DIR", help="write stderr to DIR/<host>")
            p.add_argument("--output-dir", metavar="DIR",
                           help="write DIR/<host>.stdout and .stderr as lines come, and "
                                "DIR/<host>.status when the host ends")
            p.add_argument("--sudo", action="store_true", help="run the command with sudo")
            p.add_argument("-I", "--send-input", action="store_true",
                           help="read local stdin once and send it to every host's command, "
                                "then end of file (default: the commands read end of file "
                                "at once, as ssh host CMD </dev/null)")
            p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                           help="the command line to run (after --)")
        elif name != "ping":
            p.add_argument("-r", "--recursive", action="store_true", help="copy directories")
            if name == "copy":
                p.add_argument("local", metavar="LOCAL")
                p.add_argument("remote", metavar="REMOTE")
            else:
                p.add_argument("remote", metavar="REMOTE")
                p.add_argument("local", metavar="LOCALDIR")
    return parser


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = build()
    args, unknown = parser.parse_known_args(argv)
    # For error(): argparse has no public way to a subcommand's parser.
    sub = parser._subparsers._group_actions[0].choices[  # type: ignore[union-attr, index]
        args.subcommand]
    if unknown:  # pointing to the subcommand's --help, where its options are
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        _check(args)
    except UsageError as err:
        sub.error(str(err))
    except MissingExtra as err:  # one line: the option's usage is right, --help has nothing
        sys.stderr.write(f"{sub.prog}: {err}\n")
        sys.exit(EXIT_USAGE)
    args.error = sub.error
    return args


def _check(args: argparse.Namespace) -> None:
    if args.subcommand == "hosts":
        if not args.expressions and not args.host_specs and not args.host_files:
            raise UsageError("no hosts given: pssh hosts \"web[1-3],db1\" (or -H ..., -h FILE)")
        args.expressions += [f"^{path}" for path in args.host_files]
        return
    from pssh.cli.ssh_options import checked
    args.ssh_options = checked(args.ssh_options)
    if args.subcommand == "poll":
        from pssh.cli import poll
        poll.check(args)
    if args.subcommand == "run":
        shown = [flag for flag, on in (("--json", args.json), ("-i", args.inline),
                                       ("-b", args.gather), ("--diff", args.diff)) if on]
        if len(shown) > 1:
            raise UsageError(f"{' and '.join(shown)} are different ways to show output: "
                             f"pick one")
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            raise UsageError("no command given: put it after --, as in: pssh run -H host -- uptime")
        args.command = " ".join(command)
    if args.embedded is not None:
        if args.host_specs or args.host_files:
            raise UsageError("--embedded starts its own hosts: leave out -H and -h")
        if not 1 <= args.embedded <= 250:
            raise UsageError("--embedded takes 1 to 250 hosts")
    elif not args.host_specs and not args.host_files:
        raise UsageError("no hosts given: use -H \"host ...\", -h FILE or --embedded N")
    if getattr(args, "parallel", 1) < 1:
        raise UsageError("--parallel must be at least 1")
    if args.processes == 1:
        args.processes = None  # one process: the plain client
    if getattr(args, "scheduler", None) is not None:
        if args.processes is not None:
            raise UsageError("--processes cannot be used with --scheduler")
        from pssh.cli.extras import require
        require("dask", "--scheduler")
    elif getattr(args, "idempotent", False):
        raise UsageError("--idempotent goes with --scheduler")
    for name in ("timeout", "connect_timeout"):
        value = getattr(args, name, None)
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
