"""What ``pssh poll`` tells a person on standard error: the first failed poll of each kind as
it happens (:class:`FirstErrors`), and at the end the summary (:func:`summary`) and the exit
status (:func:`exit_status`).

A poller runs for hours: the same failure on every poll of every host must be said once, not
once per poll. A *kind* is the poll's status, its check (a host that is down is down for
every check: one kind) and its cause without what changes from poll to poll (the host, the
output that did not parse, the delay before the next connection attempt). Results reach the
parent from worker processes and Dask workers too, so every mode says the same; the summary's
counts are the poller's health (:class:`~pssh.poll.results.Health`), which the shards add up.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Set, TextIO, Tuple

if TYPE_CHECKING:
    from pssh.poll.results import Health, PollResult

#: Every poll succeeded.
EXIT_OK = 0
#: Some polls failed (a check's command or parser, a timeout, a host down), or a worker
#: process or standard output's reader failed the run.
EXIT_SOME_FAILED = 1
#: No poll succeeded (or none was made): nothing this run wrote is a measurement.
EXIT_NONE_SUCCEEDED = 3

#: How many names of hosts down the summary shows before it only counts them.
HOSTS_SHOWN = 10

#: (status, check or None for a host down, cause): one kind of failure.
Kind = Tuple[str, Optional[str], str]


def cause_of(result: "PollResult") -> str:
    """The result's error without the ``host:port:`` and ``check NAME:`` it starts with,
    nor the delay before the next connection attempt (it changes on every poll)."""
    cause = result.error or result.status
    for prefix in (f"{result.host}:{result.port}: ", f"check {result.check}: "):
        if cause.startswith(prefix):
            cause = cause[len(prefix):]
    return cause.split("; next connection attempt")[0]


def kind_of(result: "PollResult") -> Kind:
    """What makes two failed polls "the same error": see the module's doc."""
    cause = cause_of(result)
    if cause.startswith("exit status"):  # what the command said after it may vary
        cause = cause.split(":")[0]
    cause = cause.split(", got ")[0]     # a parser's quote of the output it could not read
    # The host's own name (a resolver's error names it) as a word, not inside one: a host
    # called "a" must not change "parse".
    cause = re.sub(rf"(?<![\w.-]){re.escape(result.host)}(?![\w.-])", "HOST", cause)
    return result.status, None if result.status == "down" else result.check, cause


class FirstErrors:
    """The poller's ``on_result``: writes the first failed poll of each kind to ``stream``
    and counts the rest (polls and hosts per kind, for :func:`summary`)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.polls: Dict[Kind, int] = {}
        self.hosts: Dict[Kind, Set[str]] = {}

    def __call__(self, result: "PollResult") -> None:
        if result.ok:
            return
        kind = kind_of(result)
        seen = self.polls.get(kind, 0)
        self.polls[kind] = seen + 1
        self.hosts.setdefault(kind, set()).add(result.host)
        if seen == 0:
            self.stream.write(f"pssh poll: {self._said(result)} (repeats are counted in the "
                              f"summary, not shown)\n")
            self.stream.flush()

    @staticmethod
    def _said(result: "PollResult") -> str:
        where = f"{result.host}:{result.port}"
        if result.status == "down":
            return f"{where} is down: {cause_of(result)}"
        return f"{where}: check {result.check}: {cause_of(result)}"

    def lines(self) -> List[str]:
        """One line per kind seen: how many polls, on how many hosts."""
        out = []
        for kind, polls in self.polls.items():
            status, check, cause = kind
            hosts = len(self.hosts[kind])
            what = "host down" if check is None else f"check {check} {status}"
            out.append(f"  {polls} {_plural(polls, 'poll')} on {hosts} "
                       f"{_plural(hosts, 'host')}: {what}: {cause}")
        return out


def summary(health: "Health", hosts: int, down: Sequence[str], errors: FirstErrors) -> str:
    """The lines ``pssh poll`` ends with (points written and dropped are added by the
    caller): polls by status, the failures by kind, the hosts down at the end."""
    counts = [(health.polls_ok, "ok"), (health.polls_failed, "failed"),
              (health.polls_timeout, "timed out"), (health.polls_down, "down")]
    shown = ", ".join(f"{n} {word}" for n, word in counts if n)
    text = f"pssh poll: {health.polls} polls of {hosts} {_plural(hosts, 'host')}" \
        + (f" ({shown})" if shown else "")
    lines = errors.lines()
    if down:
        names = ", ".join(down[:HOSTS_SHOWN]) + (f" and {len(down) - HOSTS_SHOWN} more"
                                                 if len(down) > HOSTS_SHOWN else "")
        lines.append(f"  {len(down)} of {hosts} {_plural(hosts, 'host')} down at the end: "
                     f"{names}")
    if not health.polls_ok:
        lines.append("  no poll succeeded" if health.polls else "  no poll was made")
    return "\n".join([text, *lines])


def exit_status(health: "Health", failed_otherwise: bool) -> int:
    """:data:`EXIT_NONE_SUCCEEDED` when no poll succeeded, :data:`EXIT_SOME_FAILED` when a
    poll failed (or ``failed_otherwise``: a worker process or the output), else 0."""
    if not health.polls_ok:
        return EXIT_NONE_SUCCEEDED
    if health.polls_ok < health.polls or failed_otherwise:
        return EXIT_SOME_FAILED
    return EXIT_OK


def hosts_down(states: Mapping[Tuple[str, str], object]) -> List[str]:
    """Hosts whose last poll found no connection, in the order first seen."""
    down: Dict[str, None] = {}
    for (host, _check), state in states.items():
        if getattr(state, "down", False):
            down[host] = None
    return list(down)


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"

