"""One result pipeline for ``pssh run|copy|fetch|ping``, whatever runs the hosts.

How hosts run is an :class:`Executor`'s business: the plain client in this
process, or the client sharded over worker processes or a Dask cluster (all
:class:`pssh.cli.executors.ClientExecutor`). An executor starts a host when the
pipeline says so and reports what happens through :class:`HostEvents`: the
command started, each output line, bytes moved, the end.

Everything else is decided here, once for every mode: when each host starts
(``-p`` hosts at once, in host order; none after a failure with
``--fail-fast``), stopping a host that runs out of ``-t``, where its lines go
(``[host]`` lines as they come, ``-o``/``-e`` and ``--output-dir`` files, or
kept for ``-i``, ``--json``, ``-b`` and ``--diff``), the ``.status`` files, the
gathered and diff views, the summary, the exit status (``--exit-status``), and
Ctrl-C, SIGINT and SIGTERM (:mod:`pssh.cli.signals`).
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Dict, List, Optional, Protocol

import gevent
from gevent.event import Event

from pssh import exceptions as exc
from pssh.cli import options
from pssh.cli.display import Display, HostResult
from pssh.cli.hosts import file_name, fold
from pssh.cli.signals import RunSignals, Stopped

log = logging.getLogger("pssh.cli")


class HostEvents(Protocol):
    """What an executor reports, by the host's index (each host's events in order)."""

    def command_started(self, index: int) -> None:
        """``run``: the host's command has started (its output files are made now)."""

    def to_file(self, index: int, stderr: bool) -> bool:
        """``run``: whether that stream of the host goes to a file: then it comes through
        :meth:`data` as it came, else line by line through :meth:`line`."""

    def data(self, index: int, data: bytes, stderr: bool) -> None:
        """Output for a file, as it came."""

    def line(self, index: int, text: str, stderr: bool) -> None:
        """A line of the command's output."""

    def transferred(self, index: int, size: int) -> None:
        """``copy``/``fetch``: ``size`` more bytes moved."""

    def finished(self, index: int, exit_code: Optional[int] = None,
                 error: Optional[str] = None, note: Optional[str] = None) -> None:
        """The host is done: its exit status, or why it failed; ``note``: what it has to
        say instead of output (``ping``: the time it took)."""


class Executor(Protocol):
    """How hosts run. Every started host gets exactly one ``finished``; nothing here
    blocks the event loop for long but :meth:`stop` and :meth:`close`."""

    def start(self, index: int) -> None:
        """Begin the work on ``hosts[index]``."""

    def cancel(self, index: int, error: exc.PSSHError) -> None:
        """Stop that host's work (its command too); it finishes with ``error``."""

    def done_starting(self) -> None:
        """No more hosts will start."""

    def stop(self) -> None:
        """Stop everything now: commands stopped on their hosts, partial transfers
        removed. Returns once that is done (within seconds)."""

    def close(self, now: bool = False) -> None:
        """Let go of everything (``now``: exiting at once, wait for nothing)."""


@dataclass
class _Running:
    """A host started and not finished."""

    result: HostResult
    started: float
    files: List[Optional[BinaryIO]] = field(default_factory=lambda: [None, None])
    timer: Optional[gevent.Greenlet] = None
    timed_out: Optional[str] = None  # -t ran out: the host's error, whatever follows
    command_started: bool = False  # its remote command started (run): a stop stops it
    file_error: Optional[str] = None


WORK = {"run": "the command", "copy": "the copy", "fetch": "the fetch", "ping": "the login"}


class Pipeline:
    """One run of ``args`` over ``hosts``, shown on ``display``: see the module's text."""

    def __init__(self, args, hosts: List[str], display: Display) -> None:
        self.args = args
        self.hosts = hosts
        self.display = display
        self.results: List[Optional[HostResult]] = [None] * len(hosts)
        self.collect = any(getattr(args, name, False)
                           for name in ("json", "inline", "gather", "diff"))
        self.executor: Optional[Executor] = None
        self._running: Dict[int, _Running] = {}
        self._next = 0  # the next host to start
        self._all_started = False
        self._starting = False
        self._first_failure: Optional[str] = None
        self._over = Event()
        self._signals = RunSignals(self._say_who_runs, self._stop)

    @property
    def _executor(self) -> Executor:
        """The run's executor: :meth:`run` makes it before any host starts."""
        assert self.executor is not None
        return self.executor

    # -- the run ---------------------------------------------------------------------

    def run(self, make_executor: Callable[[HostEvents], Executor]) -> int:
        """Run every host with the executor ``make_executor(self)`` makes; the exit
        status. :class:`~pssh.cli.signals.Stopped` if a signal stopped the run."""
        exiting_now = False
        with self._signals:
            self.executor = make_executor(self)
            try:
                with self.display:
                    self._start_more()  # (nothing starts if a signal came meanwhile)
                    self._over.wait()
            except Stopped:
                exiting_now = True
                raise
            finally:
                self.executor.close(now=exiting_now)
        if self._signals.stopping is not None:
            raise Stopped(self._signals.stopping)
        return self.finish()

    def _start_more(self) -> None:
        """Start hosts in order while fewer than ``-p`` run; after a failure with
        ``--fail-fast`` the rest end at once, not started."""
        if self._starting:  # a host that ended while starting another: the loop goes on
            return
        self._starting = True
        try:
            while self._next < len(self.hosts) and len(self._running) < self.args.parallel \
                    and self._signals.stopping is None:
                index = self._next
                self._next += 1
                result = HostResult(self.hosts[index])
                self.display.host_started()
                if self._first_failure is not None and self.args.fail_fast:
                    result.error = f"not started: {self._first_failure} failed first " \
                                   f"(--fail-fast)"
                    self._end(index, result)
                    continue
                running = self._running[index] = _Running(result, time.monotonic())
                if self.args.timeout:
                    # The loop's clock may be behind after a call that blocked it (Dask's
                    # start-up): a timer set from it would ring early.
                    gevent.get_hub().loop.update_now()
                    running.timer = gevent.spawn_later(self.args.timeout, self._time_out,
                                                       index)
                self._executor.start(index)
            if self._next == len(self.hosts) and not self._all_started:
                self._all_started = True
                self._executor.done_starting()
        finally:
            self._starting = False
        if self._all_started and not self._running and self._signals.stopping is None:
            self._over.set()  # (a run being stopped ends when the stopping is done)

    def _time_out(self, index: int) -> None:
        running = self._running.get(index)
        if running is not None:
            running.timed_out = f"did not finish within {self.args.timeout} s"
            self._executor.cancel(index, exc.Timeout(running.timed_out, running.result.host))

    # -- what executors report -------------------------------------------------------

    def command_started(self, index: int) -> None:
        running = self._running.get(index)
        if running is None or self.args.subcommand != "run":
            return
        running.command_started = True
        # Started again (--idempotent, its worker lost): its output is the new run's.
        for earlier in running.files:
            if earlier is not None:
                earlier.close()
        running.result.clear_output()
        args, host = self.args, running.result.host
        name = file_name(host)
        paths = [os.path.join(d, name) if d else None for d in (args.outdir, args.errdir)]
        if args.output_dir:
            paths = [os.path.join(args.output_dir, f"{name}.{kind}")
                     for kind in ("stdout", "stderr")]
        try:
            # Bytes, as they came (not lines, not decoded): the files are the whole output.
            running.files = [open(path, "wb") if path else None for path in paths]
        except OSError as err:
            running.file_error = f"cannot write its output: {err}"

    def to_file(self, index: int, stderr: bool) -> bool:
        running = self._running.get(index)
        return running is not None and running.files[stderr] is not None

    def data(self, index: int, data: bytes, stderr: bool) -> None:
        running = self._running.get(index)
        sink = running.files[stderr] if running is not None else None
        if sink is not None:
            sink.write(data)
            sink.flush()  # written as it comes: nothing lost if the run is stopped

    def line(self, index: int, text: str, stderr: bool) -> None:
        running = self._running.get(index)
        if running is None or running.file_error is not None:
            return
        if self.collect:
            running.result.keep(text, stderr)  # up to a bound, the rest counted
        else:
            self.display.line(running.result.host, text, stderr)

    def transferred(self, index: int, size: int) -> None:
        running = self._running.get(index)
        if running is not None:
            running.result.transferred += size
            self.display.add_bytes(size)

    def finished(self, index: int, exit_code: Optional[int] = None,
                 error: Optional[str] = None, note: Optional[str] = None) -> None:
        running = self._running.pop(index, None)
        if running is None:  # ended already (the run was stopped)
            return
        if running.timer is not None:
            running.timer.kill(block=False)
        result = running.result
        result.error = running.timed_out or running.file_error or error
        result.exit_code = None if running.timed_out else exit_code
        if note is not None:
            result.stdout = [note]
        result.duration = time.monotonic() - running.started
        self._close_files(running)
        self._end(index, result)
        self._start_more()

    def _end(self, index: int, result: HostResult) -> None:
        write_status(self.args, result)
        self.results[index] = result
        if self._signals.stopping is not None:
            return  # the run is being stopped: its output has ended
        self.display.host_finished(result)
        if not result.ok and self._first_failure is None:
            self._first_failure = result.host
        show_result(self.args, self.display, result)

    @staticmethod
    def _close_files(running: _Running) -> None:
        for sink in running.files:
            if sink is not None:
                sink.close()

    # -- signals ---------------------------------------------------------------------

    def _say_who_runs(self) -> None:
        """First Ctrl-C on a terminal: who is still running (the run goes on)."""
        names = [self.hosts[i] for i in sorted(self._running)]
        self.display.message(f"pssh: still running on {len(names)} host(s): "
                             f"{fold(names) or 'none'} (Ctrl-C again to stop them)")

    def _stop(self, signum: int, by_hand: bool) -> None:
        """Stop the run: the executor stops what runs (each host it ends says how its
        command ended), the hosts it leaves are ended here (their ``.status`` files say
        so: a command started and stopped, :data:`STOPPED_NO_STATUS`; other work,
        :data:`INTERRUPTED`), and the run ends."""
        names = [self.hosts[i] for i in sorted(self._running)]
        if names:
            cause = "interrupted" if signum == signal.SIGINT else "terminated"
            hint = " (Ctrl-C again to exit at once)" if by_hand else ""
            sys.stderr.write(f"pssh: {cause}: stopping {WORK[self.args.subcommand]} on "
                             f"{len(names)} host(s) still running: {fold(names)}{hint}\n")
            sys.stderr.flush()
        stopped = False
        try:
            if self.executor is not None:
                self.executor.stop()
                stopped = True
        except Exception as err:  # what could not be stopped is ended here all the same
            log.error("stopping the run: %s", err)
        finally:
            for index in sorted(self._running):
                running = self._running.pop(index)
                if running.timer is not None:
                    running.timer.kill(block=False)
                # The executor stopped its command (signalled it, closed or gave up its
                # channel) but did not report its end: it has no exit status we know of.
                running.result.error = STOPPED_NO_STATUS \
                    if stopped and running.command_started else INTERRUPTED
                running.result.duration = time.monotonic() - running.started
                self._close_files(running)
                self._end(index, running.result)
            self._over.set()

    # -- the end ---------------------------------------------------------------------

    def finish(self) -> int:
        """Gathered or diff views, the summary, and the exit status the policy asks for."""
        args, display = self.args, self.display
        done = [r for r in self.results if r is not None]
        if getattr(args, "gather", False):
            from pssh.cli.gather import show_gathered
            show_gathered(display, done)
        elif getattr(args, "diff", False):
            from pssh.cli.gather import show_diff
            show_diff(display, done)
        if args.subcommand == "ping":
            # Its own view (pssh.cli.ping_view): at a terminal the failures were shown
            # with the answers, so no table; elsewhere the summary says them once.
            from pssh.cli.ping_view import summary_line
            if not display.interactive:
                display.summary(done)
            display.message(summary_line(done, time.monotonic() - display.started))
        else:
            display.summary(done)
        return exit_status(args.exit_status, self.results)


def show_result(args, display: Display, result: HostResult) -> None:
    """A finished host, as the output options ask (streamed lines were shown already)."""
    if args.json and args.subcommand == "ping":
        from pssh.cli.ping_view import as_json
        display.out.write(as_json(result) + "\n")  # as display.json: JSON, not rich text
        display.out.flush()
    elif args.json:
        display.json(result)
    elif getattr(args, "inline", False):
        display.block(result, display.done)
    elif args.subcommand == "ping":
        display.ping(result)


def write_status(args, result: HostResult) -> None:
    """``--output-dir``: the host's ``.status`` file, once it has ended."""
    directory = getattr(args, "output_dir", None)
    if directory:
        text = (f"error: {result.error}" if result.error is not None
                else f"exit {result.exit_code}")
        with open(os.path.join(directory, file_name(result.host) + ".status"), "w",
                  encoding="utf-8") as fh:
            fh.write(f"{text}\n")


def exit_status(policy: str, results: List[Optional[HostResult]]) -> int:
    """``all``: 0 only if every host succeeded; ``any``: 0 if one did; ``max``: the highest
    remote exit status (255, as ssh's own, for a host that could not run the command)."""
    if policy == "max":
        return max((255 if r is None or r.error is not None or r.exit_code is None
                    else r.exit_code for r in results), default=0)
    succeeded = [r is not None and r.ok for r in results]
    if all(succeeded) if policy == "all" else any(succeeded):
        return options.EXIT_OK
    return options.EXIT_HOSTS_FAILED


#: The error of a host whose command we stopped (the run stopped, or the host's -t ran
#: out) and that said neither an exit status nor a signal: what happened, never a guess.
STOPPED_NO_STATUS = "stopped, no exit status"
#: The error of a host whose work was under way when the run stopped, no command of its
#: started (connecting, logging in, a transfer; its partial file is removed).
INTERRUPTED = "interrupted"


def ended_without_status(exit_signal: Optional[str], stopped: bool = False) -> str:
    """The error of a command that ended with no exit status: the signal that killed it
    (``killed by signal TERM``), else whether we had stopped it (:data:`STOPPED_NO_STATUS`)
    or it ended so by itself (``no exit status``: the server closed its channel without
    saying how it ended)."""
    if exit_signal:
        return f"killed by signal {exit_signal}"
    return STOPPED_NO_STATUS if stopped else "no exit status"
