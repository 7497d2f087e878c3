"""``pssh ping``'s own view: each host with its latency (connecting and logging in) or why
it could not, and one summary line; ``--json``: one object per host with the latency as a
number.

Where each part goes (every failure is said once):

* reachable hosts: ``[host] 12.3 ms`` on standard output, as they answer;
* failures: at a terminal (the progress display on), ``[host] unreachable: ...`` among the
  answers, where the person looks; otherwise (piped, a script) not on standard output but
  once on standard error, ``pssh: host: unreachable: ...``, as every subcommand says a
  failed host, so standard output holds only hosts that answered;
* one summary line on standard error: ``pssh ping: 2 of 3 hosts reachable (1 unreachable)
  in 0.31 s``.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Dict, List, Optional

if TYPE_CHECKING:
    from pssh.cli.display import HostResult


def note(seconds: float) -> str:
    """The latency as the executor hands it to the pipeline (a host's note is text)."""
    return repr(round(seconds, 6))


def latency(result: "HostResult") -> Optional[float]:
    """Seconds the host took to connect and log in; None when it could not."""
    if not result.ok or not result.stdout:
        return None
    try:
        return float(result.stdout[0])
    except ValueError:  # a note that is not ours: no latency rather than a wrong one
        return None


def shown(seconds: Optional[float]) -> str:
    """The latency for people: ``12.3 ms``."""
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def as_json(result: "HostResult") -> str:
    """One host as a JSON line: ``host``, ``ok``, ``latency_s`` (seconds, a number; null
    when it failed) and ``error`` (null when it answered)."""
    return json.dumps({"host": result.host, "ok": result.ok, "latency_s": latency(result),
                       "error": None if result.ok else result.error or "failed"})


def kind_of_failure(result: "HostResult") -> str:
    """``unreachable``, ``login refused``, ``host key problem``, ... (the error's first
    words, as the executor names the problem)."""
    return (result.error or "failed").split(":")[0]


def summary_line(results: List["HostResult"], seconds: float) -> str:
    """The one line a ping ends with."""
    reachable = sum(r.ok for r in results)
    kinds: Dict[str, int] = {}
    for result in results:
        if not result.ok:
            kind = kind_of_failure(result)
            kinds[kind] = kinds.get(kind, 0) + 1
    failed = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda i: -i[1]))
    return (f"pssh ping: {reachable} of {len(results)} "
            f"{'host' if len(results) == 1 else 'hosts'} reachable"
            + (f" ({failed})" if failed else "") + f" in {seconds:.2f} s")


__all__ = ["as_json", "kind_of_failure", "latency", "note", "shown", "summary_line"]
