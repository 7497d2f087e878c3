"""Failures told once for all the hosts they happened on, as ``clush`` tells them.

A run over many hosts that fail the same way (a network down, a wrong key) would
otherwise print one line per host, each naming its host twice ("127.0.0.1: ... on
host 127.0.0.1"). :func:`folded_failures` gives each distinct failure once, headed
by the folded node set of its hosts: ``127.0.0.[1-5]: cannot connect: ...``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

from pssh.cli.hosts import address_of, fold

if TYPE_CHECKING:
    from pssh.cli.display import HostResult


def without_host(error: str, label: str) -> str:
    """``error`` without the ``on host X`` or leading ``X:`` naming the host it is shown
    under (the errors of transfers and lost workers say where they happened; the listing
    says it already)."""
    host = re.escape(address_of(label))
    error = re.sub(rf"^(?:{host}|{re.escape(label)}): ", "", error)  # "HOST: why" (WorkerError)
    return re.sub(rf" on host (?:{host}|{re.escape(label)})(?![\w.:-])", "", error)


def failure(result: "HostResult") -> str:
    """Why a host failed, as listed under its host: its error, or its exit status."""
    if result.error is not None:
        return without_host(result.error, result.host)
    return f"exited with {result.exit_code}"


def folded_failures(results: Sequence["HostResult"]) -> List[Tuple[str, str]]:
    """(folded hosts, why) for each distinct failure among ``results`` (the failed ones),
    in the order each first happened in ``results``."""
    hosts: Dict[str, List[str]] = {}
    for result in results:
        hosts.setdefault(failure(result), []).append(result.host)
    return [(fold(names), why) for why, names in hosts.items()]
