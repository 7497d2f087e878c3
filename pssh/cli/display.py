"""What the command line shows: host lines, a live progress bar, the summary.

On a terminal (stderr is a tty): a progress bar that host output scrolls
above, colours, and a summary table, failures first. Otherwise plain text:
output lines, then one line per failed host on stderr.

What a host sends reaches a terminal with its control characters made visible,
as ``cat -v`` shows them (``ESC`` as ``^[``): a compromised host must not move
the cursor, rewrite lines, pose as another host or set the window title on the
operator's screen. Host names (from a handed-over hosts file) and error texts
get the same treatment. ``--raw`` passes them; files, pipes and JSON keep the
text as it came.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional, TextIO

import gevent
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pssh.cli.failures import failure, folded_failures

_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_cyan", "bright_magenta",
            "bright_green")

#: Control characters as ``cat -v`` shows them (tab kept): C0 as ``^@``..``^_``, DEL as
#: ``^?``, C1 as ``M-^@``..``M-^_``.
_VISIBLE = {**{code: f"^{chr(code + 64)}" for code in range(32) if code != 9},
            127: "^?", **{code: f"M-^{chr(code - 64)}" for code in range(128, 160)}}


def visible(text: str) -> str:
    """``text`` with its control characters made visible (``cat -v``)."""
    return text.translate(_VISIBLE)


#: Bytes of each stream of a host's output kept for ``-i``, ``--json``, ``-b`` and
#: ``--diff`` (and the line that reaches it): the rest is left out, counted and said in
#: the view. A fleet of hosts that print without end cannot fill the controller's memory;
#: ``--output-dir`` keeps everything, streamed to its files.
KEPT_OUTPUT = 1 << 20


@dataclass
class HostResult:
    """How one host went."""

    host: str
    exit_code: Optional[int] = None
    error: Optional[str] = None
    duration: float = 0.0
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)
    transferred: int = 0
    #: Bytes of stdout and stderr left out of ``stdout`` and ``stderr`` (:meth:`keep`).
    omitted: List[int] = field(default_factory=lambda: [0, 0])
    _kept: List[int] = field(default_factory=lambda: [0, 0], repr=False)

    def keep(self, line: str, stderr: bool) -> None:
        """Keep a line of output for the views that show it at the end, up to
        :data:`KEPT_OUTPUT` bytes of each stream; beyond, count it in :attr:`omitted`."""
        size = (len(line) if line.isascii() else len(line.encode("utf-8", "replace"))) + 1
        if self._kept[stderr] < KEPT_OUTPUT:
            self._kept[stderr] += size
            (self.stderr if stderr else self.stdout).append(line)
        else:
            self.omitted[stderr] += size

    def clear_output(self) -> None:
        """Forget the output kept (the command runs again)."""
        self.stdout.clear()
        self.stderr.clear()
        self.omitted[:] = self._kept[:] = [0, 0]

    def omitted_note(self, stderr: bool) -> Optional[str]:
        """What the views say where output was left out, or None."""
        size = self.omitted[stderr]
        if not size:
            return None
        return (f"[pssh: {size} more bytes of {'stderr' if stderr else 'stdout'} left out: "
                f"over {KEPT_OUTPUT >> 20} MiB; --output-dir keeps it all]")

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code in (0, None)

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        return "ok" if self.ok else "failed"

    def as_json(self) -> str:
        return json.dumps({"host": self.host, "exit_code": self.exit_code,
                           "stdout": "\n".join(self.stdout), "stderr": "\n".join(self.stderr),
                           "error": self.error, "duration": round(self.duration, 3),
                           "stdout_omitted": self.omitted[0],
                           "stderr_omitted": self.omitted[1]})


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class Display:
    """Output for one run of ``total`` hosts."""

    def __init__(self, total: int, *, title: str, interactive: Optional[bool] = None,
                 colour: Optional[bool] = None, show_bytes: bool = False,
                 out: Optional[TextIO] = None, err: Optional[TextIO] = None,
                 raw: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        # What reaches a terminal passes through these (--raw: as it came).
        self._for_out = str if raw or not self.out.isatty() else visible
        self._for_err = str if raw or not self.err.isatty() else visible
        self.interactive = self.err.isatty() if interactive is None else interactive
        self.total = total
        self.title = title
        self.show_bytes = show_bytes
        self.done = self.failed = self.running = self.transferred = 0
        self.started = time.monotonic()
        self._err_console = Console(file=self.err, force_terminal=self.interactive or None,
                                    no_color=colour is False, highlight=False)
        out_tty = colour if colour is not None else self.out.isatty()
        self._out_console = Console(file=self.out, force_terminal=out_tty, no_color=not out_tty,
                                    highlight=False, soft_wrap=True)
        self._live: Optional[Live] = None
        self._ticker: Optional[gevent.Greenlet] = None
        self._colours: dict = {}

    # -- progress -------------------------------------------------------------------

    def __enter__(self) -> "Display":
        if self.interactive:
            self._live = Live(self._bar(), console=self._err_console, auto_refresh=False,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
            self._ticker = gevent.spawn(self._tick, self._live)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._ticker is not None:
            self._ticker.kill()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _tick(self, live: Live) -> None:
        while True:
            live.update(self._bar(), refresh=True)
            gevent.sleep(0.1)

    def _bar(self) -> Group:
        bar = ProgressBar(total=max(self.total, 1), completed=self.done, width=30)
        text = Text(f" {self.done}/{self.total} hosts done")
        if self.failed:
            text.append(f" · {self.failed} failed", style="red")
        text.append(f" · {self.running} running")
        if self.show_bytes:
            text.append(f" · {_size(self.transferred)}")
        text.append(f" · {time.monotonic() - self.started:.1f} s", style="dim")
        grid = Table.grid()
        grid.add_row(Text(f"{self.title} "), bar, text)
        return Group(grid)

    def host_started(self) -> None:
        self.running += 1

    def host_finished(self, result: HostResult) -> None:
        self.running -= 1
        self.done += 1
        if not result.ok:
            self.failed += 1

    def add_bytes(self, n: int) -> None:
        self.transferred += n

    # -- output ---------------------------------------------------------------------

    def _colour(self, host: str) -> str:
        return self._colours.setdefault(host, _COLOURS[len(self._colours) % len(_COLOURS)])

    def _print(self, text: Text, to_err: bool = False) -> None:
        # On a terminal, print through the live display so the bar stays below.
        on_tty = (self.err if to_err else self.out).isatty()
        console = self._live.console if self._live is not None and on_tty \
            else self._err_console if to_err else self._out_console
        # (The stderr console wraps the summary table; a host's line is never wrapped.)
        console.print(text, markup=False, highlight=False, overflow="ignore", crop=False,
                      soft_wrap=True if console is self._err_console else None)

    def message(self, text: str) -> None:
        """A diagnostic (log record) on stderr."""
        text = self._for_err(text)
        if self._live is not None:
            self._live.console.print(Text(text, style="yellow"), markup=False, highlight=False)
        else:
            self.err.write(text + "\n")
            self.err.flush()

    def line(self, host: str, line: str, stderr: bool = False) -> None:
        """A streamed line, ``[host] line``: a host's stdout on stdout, its stderr on
        stderr (as ssh, clush and pdsh keep them apart)."""
        shown = self._for_err if stderr else self._for_out
        text = Text(f"[{shown(host)}] ", style=self._colour(host))
        text.append(shown(line), style="red" if stderr else None)
        self._print(text, to_err=stderr)

    def text(self, line: str, style: Optional[str] = None) -> None:
        """A line of output of our own (gathered views, diffs: hosts' lines inside)."""
        self._print(Text(self._for_out(line), style=style or ""))

    def ping(self, result: HostResult) -> None:
        """``pssh ping``: one line per host as it answers; a failure only at a terminal
        (elsewhere the summary says it once, on stderr: see :mod:`pssh.cli.ping_view`)."""
        from pssh.cli.ping_view import latency, shown as latency_text
        shown = self._for_out
        text = Text(f"[{shown(result.host)}] ", style=self._colour(result.host))
        if result.ok:
            text.append(latency_text(latency(result)), style="green")
        elif self.interactive:
            text.append(shown(result.error or "failed"), style="red")
        else:
            return
        self._print(text)

    def block(self, result: HostResult, number: int) -> None:
        """A finished host's output, grouped (``-i``)."""
        style = "green" if result.ok else "red"
        shown = self._for_out
        detail = result.error or f"exit {result.exit_code}"
        self._print(Text(f"[{number}] {shown(result.host)} [{result.status.upper()}] "
                         f"{shown(detail)} ({result.duration:.2f} s)", style=style))
        for line in result.stdout:
            self._print(Text(shown(line)))
        if result.omitted[0]:
            self._print(Text(str(result.omitted_note(False)), style="yellow"))
        for line in result.stderr:
            self._print(Text(f"stderr: {shown(line)}", style="red"))
        if result.omitted[1]:
            self._print(Text(str(result.omitted_note(True)), style="yellow"))

    def json(self, result: HostResult) -> None:
        self.out.write(result.as_json() + "\n")
        self.out.flush()

    # -- the end ----------------------------------------------------------------------

    def summary(self, results: List[HostResult]) -> None:
        failed = [r for r in results if not r.ok]
        wall = time.monotonic() - self.started
        if not self.interactive:
            # One line per distinct failure, under the folded set of its hosts.
            for hosts, reason in folded_failures(failed):
                self.err.write(self._for_err(f"pssh: {hosts}: {reason}") + "\n")
            self.err.flush()
            return
        # The title is a line of its own: as the table's title it was wrapped to the
        # table's width (a few narrow columns), whatever the terminal's.
        title = Text(f"{self.title}: {len(results) - len(failed)}/{len(results)} hosts "
                     f"succeeded in {wall:.2f} s", style="italic")
        table = Table()
        table.add_column("host")
        table.add_column("status")
        table.add_column("exit", justify="right")
        table.add_column("seconds", justify="right")
        if self.show_bytes:
            table.add_column("bytes", justify="right")
        errors = any(r.error for r in results)
        if errors:
            table.add_column("error")
        for result in failed + [r for r in results if r.ok]:
            style = {"ok": "green", "failed": "yellow", "error": "red"}[result.status]
            row = [escape(self._for_err(result.host)), f"[{style}]{result.status}[/]",
                   "-" if result.exit_code is None else str(result.exit_code),
                   f"{result.duration:.2f}"]
            if self.show_bytes:
                row.append(_size(result.transferred))
            if errors:
                row.append(escape(self._for_err(failure(result) if result.error else "")))
            table.add_row(*row)
        self._err_console.print(title, soft_wrap=True)
        self._err_console.print(table)
