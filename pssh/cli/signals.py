"""SIGINT and SIGTERM while hosts run: staged Ctrl-C for a person, one signal for a program.

A person can press Ctrl-C again only if pssh reads from a terminal and is that
terminal's foreground job: its standard input is a tty, and the tty's
foreground process group is pssh's own (:func:`someone_can_press_ctrl_c`). Then a
SIGINT is taken for Ctrl-C, and staged: the first says who is still running,
the second stops the run, the third exits at once. A script or shell function
run at the terminal shares its foreground group, so a Ctrl-C typed there is
staged too; a program that wants pssh gone sends SIGTERM.

Anywhere else (a script's background job, whose input is /dev/null; cron, CI,
systemd or another supervisor; a terminal's background job, ``kill`` from
elsewhere), nobody can press Ctrl-C twice: one SIGINT stops the run as the
second Ctrl-C does. SIGTERM always stops the run at once. A signal that comes
while the run is stopping exits at once.

A signal ignored when pssh starts stays ignored, as ssh keeps it: a shell without
job control (``sh -c 'pssh ... &'``, ``nohup``) starts its background jobs with
SIGINT ignored, so that a Ctrl-C meant for the script leaves them running.
"""
from __future__ import annotations

import os
import signal
from typing import Callable, Optional, TypeVar

import gevent

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal, as shells report


def someone_can_press_ctrl_c() -> bool:
    """Whether pssh's standard input is a terminal whose foreground job pssh is."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:  # no terminal after all (closed, or not ours)
        return False


class Stopped(Exception):
    """The run was stopped by a signal; ``code`` is the exit status to end with."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = EXIT_CODES[signal.Signals(signum)]


_Self = TypeVar("_Self", bound="RunSignals")  # a subclass's ``with`` gives that subclass


class RunSignals:
    """SIGINT and SIGTERM while a run is on, taken by the event loop (never mid-call in
    some greenlet). ``on_status()`` answers a first Ctrl-C on a terminal;
    ``on_stop(signum, by_hand)`` stops the run (each in a greenlet of its own); a signal
    while stopping throws :class:`Stopped` into the main greenlet at once."""

    def __init__(self, on_status: Callable[[], None],
                 on_stop: Callable[[int, bool], None]) -> None:
        self.on_status = on_status
        self.on_stop = on_stop
        self.ctrl_c = 0  # Ctrl-Cs taken as a person's
        self.stopping: Optional[int] = None  # the signal that stops the run
        self._handlers: list = []

    def __enter__(self: _Self) -> _Self:
        self._handlers = [gevent.signal_handler(signum, self._signalled, signum)
                          for signum in EXIT_CODES
                          if signal.getsignal(signum) is not signal.SIG_IGN]
        return self

    def __exit__(self, *exc_info) -> None:
        for handler in self._handlers:
            handler.cancel()
        self._handlers = []

    def _signalled(self, signum: int) -> None:
        if self.stopping is not None:  # the main greenlet stops waiting: exit now
            gevent.get_hub().parent.throw(Stopped(self.stopping))
            return
        by_hand = signum == signal.SIGINT and someone_can_press_ctrl_c()
        if by_hand:
            self.ctrl_c += 1
            if self.ctrl_c == 1:
                gevent.spawn(self.on_status)
                return
        self.stopping = signum
        gevent.spawn(self.on_stop, signum, by_hand)
