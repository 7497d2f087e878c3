"""Carrying out ``pssh poll``: hosts and connection settings as ``pssh run`` gathers them,
the outputs asked for, a :class:`~pssh.poll.Poller` (or, with ``--processes`` /
``--scheduler``, a :class:`~pssh.poll.shards.ShardedPoller`), and the signals.

SIGINT and SIGTERM stop the run as they stop ``pssh run`` (:mod:`pssh.cli.signals`):
the poller stops its polls, writes its last health report, flushes the outputs (at
most ``--flush-timeout`` seconds) and closes every connection; pssh then exits with
130 or 143. A signal while stopping exits at once.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, List, Optional, Union

import gevent

from pssh.cli.hosts import HostSpec, UsageError
from pssh.cli.poll_feedback import FirstErrors, exit_status, hosts_down, summary
from pssh.cli.run import run as run_command
from pssh.cli.signals import RunSignals, Stopped
from pssh.config import HostConfig
from pssh.options import ConnectOptions

if TYPE_CHECKING:
    from pssh.poll.poller import Poller
    from pssh.poll.shards import ShardedPoller

log = logging.getLogger("pssh.cli")



class _Signals(RunSignals):
    """``pssh run``'s signal rule (:mod:`pssh.cli.signals`): at a terminal, a first Ctrl-C
    prints the poller's health and a second stops; elsewhere one SIGINT stops, and
    SIGTERM always does; a signal while stopping exits at once. Before the poller runs,
    a stop ends the command (:class:`Stopped` unwinds what was started, embedded servers
    included)."""

    def __init__(self) -> None:
        super().__init__(self._status, self._stop)
        self.poller: Optional[Union[Poller, ShardedPoller]] = None
        self._main = gevent.getcurrent()

    def _status(self) -> None:
        if self.poller is not None:
            health = self.poller.health()
            buckets = ", ".join(f"{interval:g}s: {count}" for interval, count
                                in sorted(health.hosts_per_bucket.items()))
            sys.stderr.write(f"pssh poll: {health.polls} polls, {health.hosts_down} hosts "
                             f"down, buckets {buckets}; Ctrl-C again to stop\n")

    def _stop(self, signum: int, by_hand: bool) -> None:
        if self.poller is None:
            self._main.throw(Stopped(signum))
            return
        log.info("%s: stopping", signal.Signals(signum).name)
        self.poller.stop()


def run(args) -> int:
    """Carry out ``pssh poll`` (``args`` parsed by :func:`pssh.cli.options.parse`): hosts,
    settings, usage errors and the exit on a signal as ``pssh run`` has them."""
    return run_command(args, execute=_poll)


def make_sinks(args) -> list:
    """The outputs the options ask for."""
    from pssh.poll.sinks import InfluxDB1Sink, InfluxDB2Sink, JSONLinesSink, LineProtocolSink
    common = dict(max_buffered=args.buffer, tags=dict(args.tags))
    sinks: list = []
    if args.output == "lp":
        sinks.append(LineProtocolSink(sys.stdout, **common))
    elif args.output == "json":
        sinks.append(JSONLinesSink(sys.stdout, **common))
    if args.influx_db is not None:
        sinks.append(InfluxDB1Sink(args.influx_url, args.influx_db, username=args.influx_user,
                                   password=os.environ.get("INFLUX_PASSWORD"), **common))
    elif args.influx_token is not None:
        sinks.append(InfluxDB2Sink(args.influx_url, args.influx_token, args.influx_org,
                                   args.influx_bucket, **common))
    return sinks


def _logging(args) -> None:
    level = max(logging.DEBUG, logging.WARNING - 10 * args.verbose)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pssh: %(message)s"))
    handler.setLevel(level)  # libraries' loggers with levels of their own (Dask's) included
    logging.basicConfig(level=level, handlers=[handler], force=True)


def _poll(args, hosts: List[HostSpec], connect: ConnectOptions, config) -> int:
    with _Signals() as signals:
        return _poll_with(args, hosts, connect, config, signals)


def _poll_with(args, hosts: List[HostSpec], connect: ConnectOptions, config,
               signals: _Signals) -> int:
    from dataclasses import replace

    from pssh.poll.poller import Poller
    from pssh.poll.shards import ShardedPoller
    _logging(args)
    checks = args.check_list
    if args.deadline is not None:
        checks = [replace(c, timeout=args.deadline) for c in checks]
    settings = dict(connect.given(), host_config=[HostConfig(user=h.user, port=h.port)
                                                  for h in hosts], ssh_config=config)
    sinks = make_sinks(args)
    errors = FirstErrors(sys.stderr)
    common = dict(buckets=args.bucket_rule, sinks=sinks, health_interval=args.health_interval,
                  workers_per_bucket=args.workers, on_result=errors)
    names = [h.host for h in hosts]
    poller: Union[Poller, ShardedPoller]
    try:
        if args.processes is not None or args.scheduler is not None:
            poller = ShardedPoller(names, checks, processes=args.processes,
                                   scheduler=args.scheduler, stop_timeout=args.flush_timeout,
                                   **common, **settings)
        else:
            poller = Poller(names, checks, stop_timeout=args.flush_timeout, **common,
                            **settings)
    except (ValueError, TypeError) as err:
        for sink in sinks:
            sink.close(0)
        raise UsageError(str(err)) from None
    signals.poller = poller
    watcher = gevent.spawn(_stop_when_stdout_closes, sinks, poller)
    log.info("polling %d hosts, %d checks, buckets %s", len(names), len(checks),
             args.bucket_rule)
    try:
        poller.run(args.duration)
    finally:
        watcher.kill()
        for sink in sinks:  # (the poller closed them; this is for a failed start)
            sink.close(args.flush_timeout)
    health = poller.health()
    dropped = sum(s.dropped for s in sinks)
    first, *details = summary(health, len(names), hosts_down(poller.states()),
                              errors).splitlines()
    sys.stderr.write("\n".join([
        f"{first}; {sum(s.sent for s in sinks)} points written"
        + (f", {dropped} dropped" if dropped else "")
        + (f", {health.skipped} rounds skipped (hosts a whole interval behind)"
           if health.skipped else ""), *details]) + "\n")
    if signals.stopping is not None:
        raise Stopped(signals.stopping)
    return exit_status(health, bool(getattr(poller, "errors", None))
                       or any(getattr(s, "reader_gone", False) for s in sinks))


def _stop_when_stdout_closes(sinks: list, poller) -> None:
    """``pssh poll | head``: once standard output's reader has gone, stop (nothing more
    written there would be read); the exit status is 1."""
    while not any(getattr(sink, "reader_gone", False) for sink in sinks):
        gevent.sleep(0.5)
    log.warning("standard output was closed by its reader: stopping")
    devnull = os.open(os.devnull, os.O_WRONLY)  # no second error at exit
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    poller.stop()
