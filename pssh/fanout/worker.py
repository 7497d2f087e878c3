"""``python -m pssh.fanout.worker``: one worker process of a
:class:`~pssh.fanout.process.ProcessGroup`.

Its stdin and stdout carry :mod:`pssh.fanout.frames` messages; anything printed goes
to stderr. The first message names the job and what it starts with
(``("job", "module:function", init)``); the job then serves the parent through a
:class:`PipeLink` until the parent says ``("close",)`` or goes away (end of input).
Signals: :mod:`pssh.fanout.signals`.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, List, Optional

import gevent

from pssh.fanout.frames import FramedPipe
from pssh.fanout.link import load_job
from pssh.fanout.signals import install_worker_policy


class PipeLink:
    """The :class:`~pssh.fanout.link.Link` of a worker process: its framed pipe."""

    def __init__(self, pipe: FramedPipe) -> None:
        self.pipe = pipe
        self._on_terminate: List[Callable[[], None]] = []

    def send(self, message: tuple) -> None:
        self.pipe.send(message)

    def receive(self) -> Optional[tuple]:
        message = self.pipe.receive()
        return None if message is None or message == ("close",) else message

    def flush(self) -> None:
        self.pipe.flush()

    @property
    def closed(self) -> bool:
        return self.pipe.closed

    def on_terminate(self, callback: Callable[[], None]) -> None:
        self._on_terminate.append(callback)

    def terminate(self) -> None:
        for callback in self._on_terminate:
            gevent.spawn(callback)


def main() -> None:
    # Messages go out on the real stdout; anything printed goes to stderr instead.
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pipe = FramedPipe(0, out)
    link = PipeLink(pipe)
    install_worker_policy(link.terminate, hub=True)
    first = pipe.receive()
    if first is None:  # the parent went before saying what to do
        return
    _, job, init = first
    load_job(job)(link, init)
    pipe.flush()  # the last answers go out before the process does


if __name__ == "__main__":
    main()
