"""One command on many hosts, on the running loop: results as each host completes.

Every host runs in its own task (connect, check the host key, log in, run,
close) under a concurrency limit; a failure or a timeout is that host's result
and nothing else's. Leaving the iteration early (``break``, cancellation)
cancels the hosts still running and closes their connections.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import AsyncIterator, Dict, Iterable, List, Optional

from pssh import exceptions as exc
from pssh.aio.connection import connect
from pssh.aio.process import SSHCompletedProcess


@dataclass
class HostResult:
    """One host's outcome: ``result`` if the command ran, else ``exception``."""

    host: str
    result: Optional[SSHCompletedProcess] = None
    exception: Optional[BaseException] = None

    @property
    def ok(self) -> bool:
        """The command ran and exited 0."""
        return self.result is not None and self.result.exit_status == 0


async def run_on_hosts(hosts: Iterable[str], command: str, *, limit: int = 100,
                       timeout: Optional[float] = None, check: bool = False,
                       **connect_args) -> AsyncIterator[HostResult]:
    """Run ``command`` on every host; yield each :class:`HostResult` as it completes.

    ``limit``: hosts in progress at once. ``timeout``: each host's whole job
    (connect, login, run) in seconds. ``check``: a non-zero exit is that host's
    :class:`~pssh.aio.ProcessError`. Other keyword arguments go to
    :func:`~pssh.aio.connect` (``username``, ``client_keys``, ``port``, ...).
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    hosts = list(hosts)
    done: asyncio.Queue = asyncio.Queue()
    gate = asyncio.Semaphore(limit)

    async def one(host: str) -> None:
        async with gate:
            try:
                result = await asyncio.wait_for(_run_one(host, command, check, connect_args),
                                                timeout)
            except asyncio.TimeoutError:
                done.put_nowait(HostResult(host, exception=exc.Timeout.at(
                    host, connect_args.get("port"), f"no result within {timeout} s")))
            except Exception as err:  # the host's own failure, reported as its result
                done.put_nowait(HostResult(host, exception=err))
            else:
                done.put_nowait(HostResult(host, result=result))

    tasks = [asyncio.ensure_future(one(host)) for host in hosts]
    try:
        for _ in hosts:
            yield await done.get()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _run_one(host: str, command: str, check: bool, connect_args: dict):
    async with connect(host, **connect_args) as conn:
        return await conn.run(command, check=check)


async def gather_hosts(hosts: Iterable[str], command: str, **kwargs) -> List[HostResult]:
    """:func:`run_on_hosts` collected: one :class:`HostResult` per host, in host order."""
    hosts = list(hosts)
    results: Dict[str, List[HostResult]] = {}
    async for item in run_on_hosts(hosts, command, **kwargs):
        results.setdefault(item.host, []).append(item)
    return [results[host].pop(0) for host in hosts]
