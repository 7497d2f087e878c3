"""Ctrl-C while hosts run, staged: the first says who is still running, the second stops
the run, the third exits at once."""
from __future__ import annotations

import signal
from typing import Callable, Optional

import gevent

EXIT_CODES = {signal.SIGINT: 130}  # 128 + the signal, as shells report


class Stopped(Exception):
    """The run was stopped by a signal; ``code`` is the exit status to end with."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = EXIT_CODES[signum]


class RunSignals:
    """Ctrl-C while a run is on, taken by the event loop (never mid-call in some
    greenlet). The first runs ``on_status()``, the second ``on_stop(signum, by_hand)``
    (each in a greenlet of its own); the third throws :class:`Stopped` into the main
    greenlet at once."""

    def __init__(self, on_status: Callable[[], None],
                 on_stop: Callable[[int, bool], None]) -> None:
        self.on_status = on_status
        self.on_stop = on_stop
        self.ctrl_c = 0
        self.stopping: Optional[int] = None  # the signal that stops the run
        self._handlers: list = []

    def __enter__(self) -> "RunSignals":
        self._handlers = [gevent.signal_handler(signum, self._signalled, signum)
                          for signum in EXIT_CODES]
        return self

    def __exit__(self, *exc_info) -> None:
        for handler in self._handlers:
            handler.cancel()
        self._handlers = []

    def _signalled(self, signum: int) -> None:
        if self.stopping is not None:  # the main greenlet stops waiting: exit now
            gevent.get_hub().parent.throw(Stopped(self.stopping))
            return
        self.ctrl_c += 1
        if self.ctrl_c == 1:
            gevent.spawn(self.on_status)
            return
        self.stopping = signum
        gevent.spawn(self.on_stop, signum, True)
