"""Fleet polling (pssh.poll): adaptive buckets' effect, capacity, and a long soak.

    python -m benchmarks.polling effect [--hosts 200] [--duration 180] [--slow 0.2]
                                        [--buckets 5s,10s,30s,60s] [--workers 32]
                                        [--chart docs/images/polling_effect.png]
    python -m benchmarks.polling capacity [--hosts 100 1000] [--duration 30]
    python -m benchmarks.polling soak [--hosts 500] [--interval 10] [--duration 30m]
                                      [--chart docs/images/polling_soak.png]

Every host is a real sshd on a loopback address of its own (127.0.1.1 ...; one sshd
process serves 16 addresses, OpenSSH's most listen sockets), all on one port, host keys
checked against a known_hosts file. The polled command sleeps for the seconds in a file
per host that the harness writes (benchmarks/_polling_fleet.py), so a host turns slow
or fast while the poller runs. ``--json FILE`` keeps every figure. See the "Polling"
section of docs/benchmarks.md for what each measures.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import List, Optional

from benchmarks import _polling_capacity as capacity
from benchmarks import _polling_effect as effect
from benchmarks import _polling_soak as soak


def _duration(text: str) -> float:
    from pssh.poll.buckets import parse_duration
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a fraction is in [0, 1)")
    return value


def _options(parser: argparse.ArgumentParser, *specs) -> None:
    """Add options given as (flag, type, default, help); a type of None is a string."""
    for flag, kind, default, text in specs:
        parser.add_argument(flag, type=kind, default=default, help=text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.polling",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log pssh.poll's INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    figures = ("--json", None, None, "write the figures to this file")

    eff = sub.add_parser("effect", help="fixed interval vs adaptive buckets, same hosts")
    _options(eff, ("--hosts", int, 200, "hosts (default 200)"),
             ("--duration", _duration, 180.0, "measured seconds per mode (default 180)"),
             ("--warmup", _duration, 10.0, "seconds run before the measurement (logins; "
                                           "default 10)"),
             ("--buckets", None, "5s,10s,30s,60s", "adaptive buckets; the fixed run polls at "
                                                   "the first (default 5s,10s,30s,60s)"),
             ("--upgrade", None, "count:3", "upgrade rule (default count:3)"),
             ("--workers", int, 32, "worker pool of each bucket (default 32; 0: the poller's "
                                   "default, a worker for every host)"),
             ("--slow", _fraction, 0.1, "share of hosts slow from the start (default 0.1)"),
             ("--turn-slow", _fraction, 0.1, "share of hosts that turn slow a third into the "
                                             "measured time (default 0.1)"),
             ("--slow-seconds", _duration, 12.0, "how long a slow host takes to answer "
                                                 "(default 12 s)"),
             ("--chart", None, None, "draw the comparison (PNG) to this file"), figures)

    cap = sub.add_parser("capacity", help="polls/s: persistent sessions vs a login per poll")
    cap.add_argument("--hosts", type=int, nargs="+", default=[100, 1000])
    cap.add_argument("--ways", nargs="+", choices=capacity.WAYS, default=list(capacity.WAYS))
    _options(cap, ("--duration", _duration, 30.0, "measured seconds per run (default 30)"),
             ("--offered", float, 2000.0, "polls/s asked of the poller (interval = hosts / "
                                          "this; more than it can do, so it runs flat out; "
                                          "default 2000)"), figures)

    sk = sub.add_parser("soak", help="hundreds of hosts for a long time: memory, late, lost")
    _options(sk, ("--hosts", int, 500, "hosts (default 500)"),
             ("--interval", _duration, 10.0, "the fastest bucket (default 10 s)"),
             ("--buckets", None, "", "default: interval x 1, 2, 6, 10 (10s,20s,60s,100s)"),
             ("--upgrade", None, "count:3", "upgrade rule (default count:3)"),
             ("--duration", _duration, 1800.0, "default 30m"),
             ("--sample", _duration, 10.0, "seconds between RSS samples (default 10)"),
             ("--slow", _fraction, 0.05, "share of hosts always slow (default 0.05)"),
             ("--flapping", _fraction, 0.05, "share of hosts slow part of the time "
                                             "(default 0.05)"),
             ("--flap-period", _duration, 360.0, "a flapping host's cycle (default 6 min)"),
             ("--flap-slow", _duration, 120.0, "how long of each cycle it is slow "
                                               "(default 2 min)"),
             ("--keep-points", None, None, "write the line protocol here (default: a "
                                           "temporary file, removed)"),
             ("--chart", None, None, "draw RSS, polls and buckets over time (PNG) here"),
             figures)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    if args.command == "effect":
        settings = effect.EffectSettings(
            hosts=args.hosts, duration=args.duration, warmup=args.warmup, buckets=args.buckets,
            upgrade=args.upgrade, workers=args.workers, slow=args.slow,
            turn_slow=args.turn_slow, slow_seconds=args.slow_seconds)
        result = effect.run_effect(settings, progress)
        print(effect.report(result))
        if args.chart:
            effect.chart(result, args.chart)
        ok = all(phase["fast"]["polls"] for mode in result["modes"].values()
                 for phase in mode["phases"].values())
    elif args.command == "capacity":
        if any(h < 1 for h in args.hosts) or args.offered <= 0:
            parser.error("--hosts must be >= 1 and --offered > 0")
        result = capacity.run_capacity(args.hosts, args.ways, args.duration, args.offered,
                                       progress)
        print(capacity.report(result))
        ok = all(r["polls"] > 0 and r["ok"] == r["polls"] for r in result["runs"])
    else:
        settings = soak.SoakSettings(
            hosts=args.hosts, interval=args.interval, buckets=args.buckets,
            upgrade=args.upgrade, duration=args.duration, sample=args.sample, slow=args.slow,
            flapping=args.flapping, flap_period=args.flap_period, flap_slow=args.flap_slow,
            keep_points=args.keep_points)
        if settings.flap_slow >= settings.flap_period:
            parser.error("--flap-slow must be shorter than --flap-period")
        result = soak.run_soak(settings, progress)
        print(soak.report(result))
        if args.chart:
            soak.chart(result, args.chart)
        ok = result["poller"]["results"] > 0
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
