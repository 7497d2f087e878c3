"""System calls of a benchmark process, counted by ``strace -f -c``, and per login.

A process's count includes its start-up (the interpreter, the imports, loading the key); the
count per login subtracts a run with one host from a run with H hosts, the same start-up
exclusion as the CPU figures: ``(calls(H) - calls(1)) / (H - 1)``, per system call.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple


def strace_prefix(output: Path) -> List[str]:
    """The command prefix that counts every system call of a process and its threads and
    children into ``output``; empty when strace is not installed."""
    strace = shutil.which("strace")
    return [strace, "-f", "-c", "-o", str(output)] if strace else []


def parse_counts(text: str) -> Dict[str, int]:
    """``strace -c``'s table as {system call: calls}, without the total line."""
    counts: Dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        # "% time seconds usecs/call calls [errors] syscall": calls is the 4th field whether
        # the errors column is empty or not.
        if len(fields) < 5 or not fields[3].isdigit() or fields[-1] == "total":
            continue
        counts[fields[-1]] = counts.get(fields[-1], 0) + int(fields[3])
    return counts


def per_login(many: Dict[str, int], one: Dict[str, int], hosts: int) -> Dict[str, float]:
    """Calls per login of each system call: the H-host run less the one-host run, over
    H - 1; calls that the larger run made fewer of (noise in start-up) count as 0."""
    return {name: max(0, many.get(name, 0) - one.get(name, 0)) / (hosts - 1)
            for name in set(many) | set(one)}


def summary(per: Dict[str, float], top: int = 8) -> Tuple[float, List[Tuple[str, float]]]:
    """The total per login and the ``top`` most frequent calls, most frequent first."""
    ranked = sorted(per.items(), key=lambda item: (-item[1], item[0]))
    return sum(per.values()), [(name, round(value, 2)) for name, value in ranked[:top]
                               if value > 0]


def describe(total: float, top: Sequence[Tuple[str, float]]) -> str:
    """``"57.3: recvfrom 21.0, sendto 9.0, ..."``."""
    return f"{total:.1f}: " + ", ".join(f"{name} {value:.1f}" for name, value in top)


def read_counts(path: Path) -> Optional[Dict[str, int]]:
    """The counts strace wrote to ``path``, None if it wrote none."""
    try:
        return parse_counts(path.read_text())
    except OSError:
        return None
