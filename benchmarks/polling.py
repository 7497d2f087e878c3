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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.polling",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log pssh.poll's INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    eff = sub.add_parser("effect", help="fixed interval vs adaptive buckets, same hosts")
    eff.add_argument("--hosts", type=int, default=200)
    eff.add_argument("--duration", type=_duration, default=180.0,
                     help="measured seconds per mode (default 180)")
    eff.add_argument("--warmup", type=_duration, default=10.0,
                     help="seconds run before the measurement (logins; default 10)")
    eff.add_argument("--buckets", default="5s,10s,30s,60s",
                     help="adaptive buckets; the fixed run polls at the first (default "
                          "5s,10s,30s,60s)")
    eff.add_argument("--upgrade", default="count:3")
    eff.add_argument("--workers", type=int, default=32,
                     help="worker pool of each bucket (default 32)")
    eff.add_argument("--slow", type=_fraction, default=0.1,
                     help="share of hosts slow from the start (default 0.1)")
    eff.add_argument("--turn-slow", type=_fraction, default=0.1,
                     help="share of hosts that turn slow a third into the run (default 0.1)")
    eff.add_argument("--slow-seconds", type=_duration, default=12.0,
                     help="how long a slow host takes to answer (default 12 s)")
    eff.add_argument("--chart", help="draw the comparison (PNG) to this file")
    eff.add_argument("--json", help="write the figures to this file")

    cap = sub.add_parser("capacity", help="polls/s: persistent sessions vs a login per poll")
    cap.add_argument("--hosts", type=int, nargs="+", default=[100, 1000])
    cap.add_argument("--duration", type=_duration, default=30.0,
                     help="measured seconds per run (default 30)")
    cap.add_argument("--ways", nargs="+", choices=capacity.WAYS, default=list(capacity.WAYS))
    cap.add_argument("--offered", type=float, default=2000.0,
                     help="polls/s asked of the poller (interval = hosts / this; more than "
                          "it can do, so it runs flat out; default 2000)")
    cap.add_argument("--json", help="write the figures to this file")

    sk = sub.add_parser("soak", help="hundreds of hosts for a long time: memory, late, lost")
    sk.add_argument("--hosts", type=int, default=500)
    sk.add_argument("--interval", type=_duration, default=10.0,
                    help="the fastest bucket (default 10 s)")
    sk.add_argument("--buckets", default="",
                    help="default: interval x 1, 2, 6, 10 (10s,20s,60s,100s)")
    sk.add_argument("--upgrade", default="count:3")
    sk.add_argument("--duration", type=_duration, default=1800.0, help="default 30m")
    sk.add_argument("--sample", type=_duration, default=10.0,
                    help="seconds between RSS samples (default 10)")
    sk.add_argument("--slow", type=_fraction, default=0.05,
                    help="share of hosts always slow (default 0.05)")
    sk.add_argument("--flapping", type=_fraction, default=0.05,
                    help="share of hosts slow part of the time (default 0.05)")
    sk.add_argument("--flap-period", type=_duration, default=360.0)
    sk.add_argument("--flap-slow", type=_duration, default=120.0)
    sk.add_argument("--keep-points", help="write the line protocol here (default: a "
                                          "temporary file, removed)")
    sk.add_argument("--chart", help="draw RSS, polls and buckets over time (PNG) here")
    sk.add_argument("--json", help="write the figures to this file")
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
