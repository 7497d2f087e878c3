"""Which transport shards run on: one rule for every mode that shards.

``processes=N`` (or ``"auto"``) means worker processes on this machine
(:mod:`pssh.fanout.process`), ``scheduler=`` tasks on a Dask cluster
(:mod:`pssh.fanout.dask`); :func:`group_for` makes the group and says how many shards a
number of hosts gets there and what a shard is. The parallel client
(``ParallelSSHClient(processes=..., scheduler=...)``) and the sharded poller
(:class:`~pssh.poll.shards.ShardedPoller`) both ask it.

The transports' modules load when asked for: subprocess, pickle and Dask cost a
program that never shards its start-up time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union


@dataclass(frozen=True)
class Workers:
    """Where the shards run. ``group``: the transport's group (a ``with`` scope that ends
    every shard it started); ``count(hosts)``: how many shards ``hosts`` hosts make;
    ``own_process``: whether a shard is a process of this program's own (its logging
    ours to set, and one that dies started again; a Dask worker's are Dask's);
    ``kind``: what a shard is called in messages."""

    group: Any
    count: Callable[[int], int]
    own_process: bool
    kind: str


def group_for(processes: Union[int, str, None], scheduler: Any,
              close_timeout: Optional[float] = None) -> Workers:
    """The workers that ``processes`` (a number, or ``"auto"``: one per usable core;
    never more than there are hosts) or ``scheduler`` (a Dask scheduler's address,
    ``"local:N"``, or a ``distributed.Client``; one shard per worker thread) ask for:
    exactly one of the two. ``close_timeout``: how long the group's end waits for its
    shards before killing them (default: the transport's). A bad ``processes`` is
    refused here, before anything starts."""
    if (processes is None) == (scheduler is None):
        raise ValueError("processes= and scheduler= are two ways of sharding the hosts: "
                         "give one")
    timeout = {} if close_timeout is None else {"close_timeout": close_timeout}
    if processes is not None:
        from pssh.fanout.process import ProcessGroup, worker_count
        worker_count(processes, 1)
        return Workers(ProcessGroup(**timeout), lambda hosts: worker_count(processes, hosts),
                       own_process=True, kind="worker process")
    from pssh.fanout.dask import DaskGroup
    group = DaskGroup(scheduler, **timeout)
    try:
        threads = group.worker_threads()
    except BaseException:
        group.close(timeout=0)
        raise
    return Workers(group, lambda hosts: max(1, min(threads, hosts)), own_process=False,
                   kind="Dask task")


__all__ = ["Workers", "group_for"]
