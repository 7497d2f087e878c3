"""``pssh.poll``: a long-running fleet poller over SSH (monitoring).

Owns: checks and their output parsers, the adaptive polling-interval buckets
(Roquero & Aracil 2021), persistent per-host sessions with reconnection, the gevent
scheduler (:class:`Poller`), poll results and the poller's health metrics; the sinks
that ship them (:mod:`pssh.poll.sinks`) and sharding (:mod:`pssh.poll.shards`).

What it may import: the gevent API shell :mod:`pssh.clients` (each host's connection
is a :class:`pssh.clients.SSHClient`, so ssh_config, known_hosts, keys and jump hosts
work as for ``pssh run``), the core's data (:mod:`pssh.options`,
:mod:`pssh.exceptions`, :mod:`pssh.ssh_config`, :mod:`pssh.config`), gevent and the
standard library; never :mod:`pssh.cli` (the ``pssh poll`` command imports this) nor
:mod:`pssh.aio`.

Example::

    from pssh.poll import Buckets, Check, Poller, loadavg

    poller = Poller(["web1", "web2"], [Check("load", "cat /proc/loadavg", loadavg)],
                    buckets=Buckets.parse("10s,20s,60s,100s", "dynamic:2..10"),
                    on_result=print)
    poller.run(duration=3600)
"""
from pssh.poll.buckets import Buckets, HostState, Upgrade, parse_duration
from pssh.poll.checks import Check
from pssh.poll.parsers import (Parser, df, json_values, key_value, loadavg, named_number,
                               number, parser_from_spec, regex)
from pssh.poll.poller import Poller
from pssh.poll.results import Health, PollResult, Value
from pssh.poll.sessions import HostDown, HostSession, PollTimeout



def __getattr__(name: str):
    if name == "Sink":  # the sinks' module (HTTP clients) loads only when asked for
        from pssh.poll.sinks import Sink
        return Sink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Buckets", "Check", "Health", "HostDown", "HostSession", "HostState", "Parser",
           "PollResult", "PollTimeout", "Poller", "Sink", "Upgrade", "Value", "df",
           "json_values", "key_value", "loadavg", "named_number", "number",
           "parse_duration", "parser_from_spec", "regex"]
