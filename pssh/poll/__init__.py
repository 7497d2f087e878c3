"""``pssh.poll``: a long-running fleet poller over SSH (monitoring).

Owns: checks and their output parsers, the adaptive polling-interval buckets
(Roquero & Aracil 2021), persistent per-host sessions with reconnection, the scheduler
(:class:`Poller`), poll results and the poller's health metrics; the sinks that ship
them (:mod:`pssh.poll.sinks`) and sharding (:mod:`pssh.poll.shards`).

The scheduler and the sessions are procedures of the core (:mod:`pssh.core`: each
host's connection is made by :func:`pssh.core.establish.establish`, so ssh_config,
known_hosts, keys and jump hosts work as for ``pssh run``), run on gevent by default
and on a virtual clock in tests (:mod:`pssh.runners.virtual`).

What it may import: the core (its procedures, waits and clock), the runners
(:mod:`pssh.runners`), the core's data (:mod:`pssh.options`, :mod:`pssh.exceptions`,
:mod:`pssh.ssh_config`, :mod:`pssh.config`), the gevent API shell :mod:`pssh.clients`
(its open file limit), :mod:`pssh.fanout` (its transports and its poll job, for
sharding), gevent and the standard library; never :mod:`pssh.cli` (the ``pssh poll``
command imports this) nor :mod:`pssh.aio`.

Example::

    from pssh.poll import Buckets, Check, Poller, loadavg

    poller = Poller(["web1", "web2"], [Check("load", "cat /proc/loadavg", loadavg)],
                    buckets=Buckets.parse("10s,20s,60s,100s", "dynamic:2..10"),
                    on_result=print)
    poller.run(duration=3600)
"""
from typing import TYPE_CHECKING, Any

from pssh.poll.buckets import Buckets, HostState, Upgrade, parse_duration
from pssh.poll.checks import Check
from pssh.poll.parsers import (Parser, df, json_values, key_value, loadavg, named_number,
                               number, parser_from_spec, regex)
from pssh.poll.results import Health, PollResult, Value

if TYPE_CHECKING:  # the lazily loaded names below, for the type checker
    from pssh.poll.poller import Poller
    from pssh.poll.sessions import (CommandOutput, Connection, Connector, HostDown,
                                    HostSession, PollTimeout)
    from pssh.poll.sinks import Sink

# Loaded when first asked for: the poller and sessions bring the core's procedures and
# gevent, the sinks HTTP clients; checks, buckets and parsers alone (what ``pssh poll``
# validates its arguments with) need none of them.
def __getattr__(name: str) -> Any:
    value: Any
    if name == "Poller":
        from pssh.poll.poller import Poller as value
    elif name in ("CommandOutput", "Connection", "Connector", "HostDown", "HostSession",
                  "PollTimeout"):
        from pssh.poll import sessions
        value = getattr(sessions, name)
    elif name == "Sink":
        from pssh.poll.sinks import Sink as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["Buckets", "Check", "CommandOutput", "Connection", "Connector", "Health",
           "HostDown", "HostSession", "HostState", "Parser", "PollResult", "PollTimeout",
           "Poller", "Sink", "Upgrade", "Value", "df", "json_values", "key_value", "loadavg",
           "named_number", "number", "parse_duration", "parser_from_spec", "regex"]
