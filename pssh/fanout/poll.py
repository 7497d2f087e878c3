"""The "poll" job, in its shard: one :class:`~pssh.poll.poller.Poller` of a
:class:`~pssh.poll.shards.ShardedPoller`'s hosts.

The shard keeps its own hosts' bucket state for the whole run, and sends what its
poller gives in batches (``("items", number, [...])`` every
:data:`FORWARD_INTERVAL` seconds), holding at most :data:`FORWARD_BOUND` of them
while its parent is not reading: past that it drops and counts, as a sink does. Any
word from the parent ends it (as does the parent going away, or being told to
terminate): it stops its poller (closing its sessions), sends what it still holds,
then ``("ended", number, states, dropped)``; a poller that cannot be made is
``("error", number, why)``.
"""
from __future__ import annotations

import logging
import pickle
import sys
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Union

import gevent
from gevent.event import Event

from pssh.fanout.link import Link
from pssh.poll.buckets import Buckets
from pssh.poll.checks import Check
from pssh.poll.results import Health, PollResult

log = logging.getLogger("pssh.fanout.poll")

#: Seconds between a shard's batches of results to the parent.
FORWARD_INTERVAL = 0.25
#: The most results and health reports a shard holds while its parent is not reading.
FORWARD_BOUND = 100_000


def portable_checks(checks: Sequence[Check]) -> bytes:
    """The checks pickled for another process; a parser that pickle cannot take (a
    closure, such as ``regex(...)``) goes by value through cloudpickle when installed."""
    try:
        return pickle.dumps(list(checks), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        try:
            import cloudpickle
        except ImportError:
            names = ", ".join(c.name for c in checks)
            raise ValueError(f"checks {names}: a parser cannot be sent to a worker process "
                             f"({err}); use parsers defined at module level, or install "
                             f"cloudpickle") from None
        return cloudpickle.dumps(list(checks), protocol=pickle.HIGHEST_PROTOCOL)


@dataclass
class ShardSpec:
    """What one shard is told: its hosts and everything its poller is made with."""

    number: int
    hosts: List[str]
    checks: bytes  # pickled (see portable_checks)
    buckets: Buckets
    health_interval: float
    workers_per_bucket: Optional[int]
    settings: Dict[str, Any] = field(default_factory=dict)  # host_config, ssh_config, ...
    duration: Optional[float] = None
    #: The shard's logging to its standard error at this level; None: left as it is (a
    #: process of someone else's, such as a Dask worker).
    log_level: Optional[int] = logging.WARNING


class Outbox:
    """What a shard has for its parent, bounded; drops past the bound are counted."""

    def __init__(self, bound: int = FORWARD_BOUND) -> None:
        self.items: Deque[Union[PollResult, Health]] = deque()
        self.bound = bound
        self.dropped = 0

    def put(self, item: Union[PollResult, Health]) -> None:
        if isinstance(item, Health):  # the shard's drops are the parent's to add up
            item = replace(item, dropped=item.dropped + self.dropped, buffered=len(self.items))
        if len(self.items) >= self.bound:
            if not self.dropped:
                log.warning("the parent is not reading: dropping results")
            self.dropped += 1
            return
        self.items.append(item)

    def take(self) -> List[Union[PollResult, Health]]:
        items = list(self.items)
        self.items.clear()
        return items


def serve(link: Link, spec: ShardSpec) -> None:
    """The job: poll the shard ``spec`` describes until its duration ends or the parent
    (or a SIGTERM) stops it."""
    if spec.log_level is not None:
        logging.basicConfig(level=spec.log_level, stream=sys.stderr,
                            format=f"pssh poll (shard {spec.number}): %(message)s")
    stop = Event()
    link.on_terminate(stop.set)

    def listen() -> None:  # any word from the parent, or the parent gone: stop
        link.receive()
        stop.set()

    def send(message: tuple) -> None:
        try:
            link.send(message)
            link.flush()
        except OSError:  # the parent is gone
            stop.set()

    listener = gevent.spawn(listen)
    try:
        _poll(spec, send, stop)
    finally:
        listener.kill()
        link.flush()


def _poll(spec: ShardSpec, send: Callable[[tuple], None], stop: Event) -> None:
    from pssh.poll.poller import Poller
    outbox = Outbox()
    try:
        poller = Poller(spec.hosts, pickle.loads(spec.checks), buckets=spec.buckets,
                        on_result=outbox.put, on_health=outbox.put,
                        health_interval=spec.health_interval,
                        workers_per_bucket=spec.workers_per_bucket, **spec.settings)
    except Exception as err:
        send(("error", spec.number, f"{type(err).__name__}: {err}"))
        return

    def forward() -> None:
        while True:
            gevent.sleep(FORWARD_INTERVAL)
            items = outbox.take()
            if items:
                send(("items", spec.number, items))

    def watch() -> None:
        stop.wait()
        poller.stop()

    helpers = [gevent.spawn(forward), gevent.spawn(watch)]
    try:
        poller.run(spec.duration)
    finally:
        gevent.killall(helpers)
        items = outbox.take()
        if items:
            send(("items", spec.number, items))
        send(("ended", spec.number, dict(poller.states()), outbox.dropped))
