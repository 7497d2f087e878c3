"""What one core step costs: a libssh2 call that says EAGAIN, turned into a wait and back.

    python -m benchmarks.core_step [--steps 200000] [--repeat 5]

Every procedure of the session core (:mod:`pssh.core`) is a generator that
yields a wait request where it would block; a runner turns the request into a
wait of its loop and resumes it. This measures that round trip without any I/O:
``Link.call`` on a function that returns ``LIBSSH2_ERROR_EAGAIN`` on every
other call, each EAGAIN answered at once. The runner's own wait (a socket
watch on the hub, a future on the loop) is replaced by an immediate answer,
so what is left is the interpreter's cost per EAGAIN: the generator resuming,
the request object, the runner's dispatch, the link's bookkeeping. Reported
as the median of ``--repeat`` runs, in nanoseconds per step, per runner.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from pssh.core.link import Link
from pssh.core.waits import SessionIO
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN


class _Session:
    """Stands in for a libssh2 session: no socket, nothing received."""

    bytes_received = 0

    def block_directions(self) -> int:
        return 1


def _flip():
    state = [False]

    def call():
        state[0] = not state[0]
        return LIBSSH2_ERROR_EAGAIN if state[0] else 0
    return call


def _procedure(link: Link, steps: int):
    call = _flip()
    for _ in range(steps):
        yield from link.call(call)


def measure(runner_name: str, steps: int) -> float:
    """Nanoseconds per EAGAIN step with ``runner_name`` (``gevent`` or ``asyncio``)."""
    link = Link(None, _Session(), "bench", 22, timeout=None)
    if runner_name == "gevent":
        from pssh.runners import gevent as module
        handlers = module._HANDLERS
        saved = handlers[SessionIO]
        handlers[SessionIO] = lambda runner, request: True
        try:
            started = time.perf_counter_ns()
            module.RUNNER.run(_procedure(link, steps))
            return (time.perf_counter_ns() - started) / steps
        finally:
            handlers[SessionIO] = saved
    from pssh.runners import asyncio as module
    handlers = module._HANDLERS
    saved = handlers[SessionIO]

    def answered(runner, request):
        future = asyncio.get_running_loop().create_future()
        future.set_result(True)
        return future
    handlers[SessionIO] = (answered, True)
    try:
        async def go() -> float:
            started = time.perf_counter_ns()
            await module.RUNNER.run(_procedure(link, steps))
            return (time.perf_counter_ns() - started) / steps
        return asyncio.run(go())
    finally:
        handlers[SessionIO] = saved


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    for name in ("gevent", "asyncio"):
        runs = [measure(name, args.steps) for _ in range(args.repeat)]
        print(f"{name:8} {statistics.median(runs):7.0f} ns per EAGAIN step "
              f"(median of {args.repeat} x {args.steps})")


if __name__ == "__main__":
    main()
