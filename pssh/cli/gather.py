"""Outputs compared across hosts: ``-b`` (identical outputs once, under their hosts, as
``clush -b`` / ``dshbak -c``) and ``--diff`` (each differing output against the most
common one)."""
from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Dict, List, Tuple

from pssh.cli.display import Display, HostResult
from pssh.cli.failures import without_host
from pssh.cli.hosts import fold

Key = Tuple[Tuple[str, ...], Tuple[str, ...], str]


def _key(result: HostResult) -> Key:
    """What makes two hosts' outcomes the same: both streams (with what was left out of
    them) and how it ended."""
    # The error without the host's own name in it: the same failure on two hosts is one.
    ending = without_host(result.error, result.host) if result.error is not None \
        else f"exit {result.exit_code}"
    stdout, stderr = (tuple(lines) + ((note,) if note else ())
                      for lines, note in ((result.stdout, result.omitted_note(False)),
                                          (result.stderr, result.omitted_note(True))))
    return stdout, stderr, ending


def groups(results: List[HostResult]) -> List[Tuple[Key, List[str]]]:
    """(outcome, hosts) for each distinct outcome, the most common first."""
    hosts: Dict[Key, List[str]] = defaultdict(list)
    for result in results:
        hosts[_key(result)].append(result.host)
    return sorted(hosts.items(), key=lambda item: -len(item[1]))


def _header(display: Display, names: List[str], ending: str) -> None:
    display.text(f"---------------- {fold(names)} ({len(names)}) ----------------",
                 style="bold")
    if ending != "exit 0":
        display.text(ending, style="red")


def show_gathered(display: Display, results: List[HostResult]) -> None:
    """Each distinct outcome once, under the folded set of its hosts and their count."""
    for (stdout, stderr, ending), names in groups(results):
        _header(display, names, ending)
        for line in stdout:
            display.text(line)
        for line in stderr:
            display.text(f"stderr: {line}", style="red")


def show_diff(display: Display, results: List[HostResult]) -> None:
    """The most common outcome in full, then each other one as a unified diff against it."""
    outcomes = groups(results)
    if not outcomes:
        return
    (reference, reference_hosts), rest = outcomes[0], outcomes[1:]
    _header(display, reference_hosts, reference[2])
    for line in _lines(reference):
        display.text(line)
    label = fold(reference_hosts)
    for outcome, names in rest:
        display.text(f"---------------- {fold(names)} ({len(names)}) differs "
                     f"----------------", style="bold")
        for line in difflib.unified_diff(_lines(reference), _lines(outcome), label,
                                         fold(names), lineterm=""):
            style = "green" if line.startswith("+") else "red" if line.startswith("-") \
                else "cyan" if line.startswith("@@") else None
            display.text(line, style=style)
    if not rest:
        display.text(f"all {len(reference_hosts)} hosts: the same output", style="green")


def _lines(outcome: Key) -> List[str]:
    stdout, stderr, ending = outcome
    return list(stdout) + [f"stderr: {line}" for line in stderr] + \
        ([] if ending == "exit 0" else [f"({ending})"])
