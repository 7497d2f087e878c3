"""Waiting for something the tests cannot be told about (a process started, a file made,
a count reached): poll until it holds, never sleep a guessed time.

A fixed sleep is a bet on how fast a loaded machine is; losing it is a flaky test. A poll
with a generous limit costs nothing when things are fast and only bounds a hang when
they are not, and its failure says what was awaited and what was seen last.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, TypeVar, Union

T = TypeVar("T")

#: The limit of a wait: far beyond what anything awaited here takes, even on a machine
#: shared by several test runs; it only turns a hang into a failure.
TIMEOUT = 60.0
#: Between two looks: short, as nothing here is expensive to look at.
INTERVAL = 0.05


class NeverHappened(AssertionError):
    """What was awaited did not happen within the limit (a test failure)."""


_ANY = object()


def eventually(predicate: Callable[[], T], timeout: float = TIMEOUT, what: str = "",
               interval: float = INTERVAL,
               pause: Callable[[float], object] = time.sleep, equal_to: Any = _ANY) -> T:
    """Call ``predicate()`` until its value is true (or, given ``equal_to``, equal to it)
    and return that value.

    Fails with :class:`NeverHappened` after ``timeout`` seconds, naming ``what`` was
    awaited and the last value seen. ``pause`` is how to wait between looks:
    ``gevent.sleep`` when what is awaited runs in a greenlet of this thread.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if (value == equal_to) if equal_to is not _ANY else value:
            return value
        if time.monotonic() >= deadline:
            raise NeverHappened(f"not within {timeout} s: {what or predicate!r} "
                                f"(last seen: {value!r})")
        pause(interval)


async def eventually_async(predicate: Callable[[], Union[T, Awaitable[T]]],
                           timeout: float = TIMEOUT, what: str = "",
                           interval: float = INTERVAL) -> T:
    """:func:`eventually` for a coroutine: the loop goes on running between looks.
    ``predicate`` may return an awaitable (its result is the value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise NeverHappened(f"not within {timeout} s: {what or predicate!r} "
                                f"(last seen: {value!r})")
        await asyncio.sleep(interval)


def eventually_procedure(predicate: Callable[[], T], timeout: float = TIMEOUT,
                         what: str = "", interval: float = INTERVAL):
    """:func:`eventually` inside a core procedure (:mod:`pssh.core.waits`), as
    ``value = yield from eventually_procedure(...)``: it waits with a ``Sleep`` between
    looks, so the runner's loop (any runner's) goes on meanwhile. The limit is real
    time, whatever the runner's clock."""
    from pssh.core.waits import Sleep
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise NeverHappened(f"not within {timeout} s: {what or predicate!r} "
                                f"(last seen: {value!r})")
        yield Sleep(interval)


def gone(find: Callable[[], list], timeout: float = TIMEOUT, what: str = "",
         interval: float = INTERVAL, pause: Callable[[float], object] = time.sleep) -> list:
    """What ``find()`` still lists once it is empty or ``timeout`` has passed (processes
    end some moments after being told to): ``[]`` when everything went. For
    ``assert gone(...) == []``, whose failure shows what stayed."""
    left: list = []

    def empty() -> bool:
        left[:] = find()
        return not left
    try:
        eventually(empty, timeout, what or "gone", interval, pause)
    except NeverHappened:
        pass
    return left
