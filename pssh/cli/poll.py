"""``pssh poll``'s own options, and their checks: parsed before anything heavy is imported
(what carries the command out is :mod:`pssh.cli.poll_run`).

Hosts, login and connection options are ``pssh run``'s (:mod:`pssh.cli.options`); no
option letter here means something else in ``pssh run``.
"""
from __future__ import annotations

import argparse
import os
import textwrap

from pssh.cli.hosts import UsageError

DESCRIPTION = ("Poll every host over one persistent SSH connection each, for ever or for "
               "--duration: each --check's output parsed into values, written as InfluxDB "
               "line protocol or JSON lines, or to InfluxDB 1.x/2.x. Slow hosts move to "
               "slower polling-interval buckets and earn their way back.")

EPILOG = textwrap.dedent("""
    examples:
      pssh poll --embedded 3 --check load:loadavg='cat /proc/loadavg' --duration 30s
      pssh poll -h fleet.txt --check 'load:loadavg=cat /proc/loadavg' \\
          --check 'disk:df=df -P' --influx-url http://127.0.0.1:8086 --influx-db fleet
      pssh poll -h fleet.txt --check 'users=who | wc -l' --interval 30s --output json
      pssh poll -h fleet.txt --check 'load:loadavg=cat /proc/loadavg' \\
          --buckets 5s,10s,30s,60s --upgrade dynamic:2..10 --processes 4 \\
          --influx-url http://127.0.0.1:8428 --influx-token - --influx-org o --influx-bucket b

    checks: NAME=COMMAND reads one number; NAME:PARSER=COMMAND with PARSER one of
    number, kv (k=v or k: v lines), json (nested keys joined by '.'), loadavg, df,
    regex:PATTERN (named groups), module:function (your own parser).

    buckets: every host starts in the fastest; a poll slower than its bucket's
    interval (or failed) moves the host one bucket slower at once; COUNT answers in
    a row fast enough for the faster bucket move it back one (--upgrade count:N),
    or with dynamic:MIN..MAX a count reset to MIN on a downgrade and grown by one
    for every round the host stays slow, or with time:DURATION (30s, 10m, 1h or
    seconds) fast answers for that long. A host that is down is polled at the
    slowest interval until it answers. --interval polls every host at one fixed
    interval instead.

    outputs: --output lp|json to standard output (lp is the default when no
    database is given); --influx-url with --influx-db (InfluxDB 1.x) or with
    --influx-token/--influx-org/--influx-bucket (the InfluxDB 2.x write API; a
    token of '-' is read from $INFLUX_TOKEN). Points are buffered (--buffer per
    output); past that they are dropped and counted (the ssh_poll_health points).

    errors: the first failed poll of each kind (its check and cause; a host down
    for every check) is said on standard error as it happens, later ones are
    counted; the summary at the end counts polls by status, failures by kind, and
    names the hosts down.

    exit status: 0 every poll succeeded; 1 some polls failed (or standard output
    was closed, or a worker process failed); 3 no poll succeeded; 2 usage error;
    130 stopped by SIGINT; 143 stopped by SIGTERM. Either signal flushes the
    buffered points (for at most --flush-timeout seconds), closes every connection
    and exits.
    """)

def duration(text: str) -> float:
    """``10s``, ``500ms``, ``5m``, ``1h`` or seconds, as argparse's ``type``."""
    from pssh.poll.buckets import parse_duration
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _count(text: str):
    """``--processes``: a positive number, or ``auto``."""
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a number of processes or 'auto', "
                                         f"not {text!r}")
    return int(text)


def _tag(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``pssh poll``'s options (after the hosts and connection options every
    subcommand has)."""
    conn = [g for g in parser._action_groups if g.title == "connection"][0]
    conn.add_argument("--processes", metavar="N|auto", type=_count,
                      help="shard the hosts over N worker processes (auto: one per core), "
                           "each polling its own hosts (default: one process)")
    conn.add_argument("--scheduler", metavar="ADDRESS|local:N",
                      help="poll from a Dask cluster (tcp://host:8786), or from N local "
                           "Dask worker processes started for the run (local:N)")
    polls = parser.add_argument_group("polling")
    polls.add_argument("--check", dest="checks", action="append", default=[],
                       metavar="NAME[:PARSER]=COMMAND",
                       help="a command to poll on every host and how to read its output; "
                            "repeatable (at least one)")
    rate = polls.add_mutually_exclusive_group()
    rate.add_argument("--buckets", metavar="INTERVALS", default="10s,20s,60s,100s",
                      help="polling-interval buckets, fastest first (default "
                           "10s,20s,60s,100s)")
    rate.add_argument("--interval", type=duration, metavar="DURATION",
                      help="poll every host at this one interval (no buckets)")
    polls.add_argument("--upgrade", metavar="count:N|dynamic:MIN..MAX|time:DURATION",
                       help="fast answers in a row (or for how long) that move a host one "
                            "bucket faster (default count:3)")
    polls.add_argument("--deadline", type=duration, metavar="DURATION",
                       help="time one poll may take (default: its bucket's interval)")
    polls.add_argument("--workers", type=int, metavar="N",
                       help="polls running at once per bucket (default: as many as the "
                            "bucket's hosts need)")
    polls.add_argument("--duration", type=duration, metavar="DURATION",
                       help="stop after this long (default: until SIGINT or SIGTERM)")
    polls.add_argument("--health-interval", type=duration, default=10.0, metavar="DURATION",
                       help="how often the poller's own metrics are written (default 10s)")
    out = parser.add_argument_group("output")
    out.add_argument("--output", choices=("lp", "json"),
                     help="write results to standard output as line protocol (lp, the "
                          "default without a database) or JSON lines")
    out.add_argument("--influx-url", metavar="URL",
                     help="InfluxDB (1.x with --influx-db; 2.x write API with "
                          "--influx-token, --influx-org, --influx-bucket)")
    out.add_argument("--influx-db", metavar="DB", help="InfluxDB 1.x database (created)")
    out.add_argument("--influx-user", metavar="USER",
                     help="InfluxDB 1.x user (password from $INFLUX_PASSWORD)")
    out.add_argument("--influx-token", metavar="TOKEN",
                     help="InfluxDB 2.x token ('-': from $INFLUX_TOKEN)")
    out.add_argument("--influx-org", metavar="ORG", help="InfluxDB 2.x organisation")
    out.add_argument("--influx-bucket", metavar="BUCKET", help="InfluxDB 2.x bucket")
    out.add_argument("--tag", dest="tags", type=_tag, action="append", default=[],
                     metavar="KEY=VALUE", help="a tag added to every point; repeatable")
    out.add_argument("--buffer", type=int, default=100_000, metavar="POINTS",
                     help="points each output holds while it cannot send; more are "
                          "dropped and counted (default 100000)")
    out.add_argument("--flush-timeout", type=duration, default=10.0, metavar="DURATION",
                     help="at the end, how long buffered points may take to be sent "
                          "(default 10s)")
    out.add_argument("-v", "--verbose", action="count", default=0,
                     help="log more (repeatable)")


def check(args: argparse.Namespace) -> None:
    """The combinations argparse cannot check; :class:`UsageError` names the problem.
    Checks, buckets and the upgrade rule are parsed here, so a typo never starts a run."""
    from pssh.poll.buckets import Buckets, Upgrade
    from pssh.poll.checks import Check

    if not args.checks:
        raise UsageError("no check given: add --check NAME=COMMAND, as in "
                         "--check 'load:loadavg=cat /proc/loadavg'")
    try:
        args.check_list = [Check.from_spec(text) for text in args.checks]
    except (ValueError, ImportError, AttributeError) as err:
        raise UsageError(f"--check: {err}") from None
    names = [c.name for c in args.check_list]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--check: the name {twice[0]} is used twice")
    if args.interval is not None and args.upgrade is not None:
        raise UsageError("--upgrade is for --buckets: --interval polls at one interval")
    try:
        upgrade = Upgrade.parse(args.upgrade) if args.upgrade is not None else None
    except ValueError as err:
        raise UsageError(f"--upgrade: {err}") from None
    try:
        args.bucket_rule = Buckets.fixed(args.interval) if args.interval is not None \
            else Buckets.parse(args.buckets, upgrade)
    except ValueError as err:
        raise UsageError(f"--buckets: {err}") from None
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.buffer < 1:
        raise UsageError("--buffer must be at least 1 point")
    _check_outputs(args)


def _check_outputs(args: argparse.Namespace) -> None:
    v1 = args.influx_db is not None or args.influx_user is not None
    v2 = [n for n in ("influx_token", "influx_org", "influx_bucket")
          if getattr(args, n) is not None]
    if args.influx_url is None:
        if v1 or v2:
            raise UsageError("--influx-db/--influx-token/... need --influx-url")
    elif v1 and v2:
        raise UsageError("--influx-db is InfluxDB 1.x, --influx-token/--influx-org/"
                         "--influx-bucket the 2.x write API: pick one")
    elif v2 and len(v2) < 3:
        raise UsageError("the InfluxDB 2.x write API needs --influx-token, --influx-org and "
                         "--influx-bucket")
    elif not v1 and not v2:
        raise UsageError("--influx-url needs --influx-db (1.x) or --influx-token, "
                         "--influx-org and --influx-bucket (2.x)")
    elif not args.influx_url.startswith(("http://", "https://")):
        raise UsageError(f"--influx-url must be an http(s) URL, not {args.influx_url!r}")
    if args.influx_token == "-":
        args.influx_token = os.environ.get("INFLUX_TOKEN")
        if not args.influx_token:
            raise UsageError("--influx-token -: $INFLUX_TOKEN is not set")
    if args.output is None and args.influx_url is None:
        args.output = "lp"
