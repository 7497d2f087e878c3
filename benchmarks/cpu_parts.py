"""Where a benchmark process's CPU goes: the interpreter, compiled extensions, libssh2,
libcrypto, the C library, the kernel, by ``perf record``'s samples, and per host.

``perf record -e cpu-clock -F N`` takes N samples per second of CPU that the process and
its threads and children spend, wherever they spend it (kernel included, which callgrind
leaves out), so each part's samples over N are seconds of CPU. Per host subtracts a run
with one host from a run with H hosts, over H - 1: the start-up exclusion of the CPU and
system call figures. A part's figure carries about ``1 / N`` s of sampling error per run,
so compare parts at an H where they are many samples per host (100 at 2999 Hz: ~0.3 ms
per sample, 0.003 ms per host).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Sequence

#: Samples per second of CPU: not a multiple of the kernel's tick, so that sampling does
#: not fall into step with it.
FREQUENCY = 2999

#: The parts, in the order reported, and which shared objects (perf's "dso") make each.
PARTS = ("interpreter", "extensions", "libssh2", "libcrypto", "libc", "kernel", "other")
_PART_OF = (
    ("kernel", re.compile(r"^\[kernel")),
    ("interpreter", re.compile(r"^(libpython3[.\d]*\.so|python3[.\d]*$)")),
    # Compiled modules of Python packages: our Cython bindings, gevent, greenlet, and
    # peers' (hussh's Rust module, which carries its own libssh2 and crypto).
    ("extensions", re.compile(r"\.(cpython-[^.]+|abi3)\.so$")),
    # A wheel's own copies carry a hash in their names (libssh2-38398901.so.1.0.1).
    ("libssh2", re.compile(r"^libssh2(-[0-9a-f]+)?\.so")),
    ("libcrypto", re.compile(r"^libcrypto(-[0-9a-f]+)?\.so")),
    ("libc", re.compile(r"^libc(\.so|-)")),
)


def part_of(dso: str) -> str:
    """The part a shared object's samples count to (``other``: the dynamic loader, the vdso,
    zlib, the floor's own program, ...)."""
    for part, pattern in _PART_OF:
        if pattern.search(dso):
            return part
    return "other"


def sampling_rate() -> int:
    """:data:`FREQUENCY`, or the kernel's limit if lower: the kernel lowers
    ``perf_event_max_sample_rate`` on its own when sampling interrupts run long, and perf
    refuses a rate above it."""
    try:
        limit = int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text())
    except (OSError, ValueError):
        return FREQUENCY
    return max(1, min(FREQUENCY, limit))


def perf_prefix(output: Path, frequency: int = FREQUENCY) -> List[str]:
    """The command prefix that samples a process (threads and children too) at
    ``frequency`` into ``output``; empty when perf is not installed or may not sample here."""
    perf = shutil.which("perf")
    if not perf:
        return []
    command = [perf, "record", "-q", "-e", "cpu-clock", "-F", str(frequency), "-o", str(output),
               "--"]
    if subprocess.run([*command, "true"], capture_output=True).returncode != 0:
        return []
    return command


def parse_report(text: str) -> Dict[str, int]:
    """``perf report --sort dso -n --stdio -q``'s lines as {shared object: samples}."""
    samples: Dict[str, int] = {}
    for line in text.splitlines():
        # "    60.77%          1411  libpython3.11.so.1.0"
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[0].endswith("%") and fields[1].isdigit():
            dso = fields[2].strip()
            samples[dso] = samples.get(dso, 0) + int(fields[1])
    return samples


def read_samples(path: Path) -> Optional[Dict[str, int]]:
    """The samples perf wrote to ``path`` by shared object, None if it wrote none."""
    if not path.exists():
        return None
    report = subprocess.run(["perf", "report", "-i", str(path), "--sort", "dso", "-n",
                             "--stdio", "-q"], capture_output=True, text=True)
    if report.returncode != 0:
        return None
    return parse_report(report.stdout) or None


def by_part(samples: Dict[str, int]) -> Dict[str, int]:
    """Samples summed by part, every part present."""
    parts = dict.fromkeys(PARTS, 0)
    for dso, count in samples.items():
        parts[part_of(dso)] += count
    return parts


def per_host_ms(many: Dict[str, int], one: Dict[str, int], hosts: int,
                frequency: int = FREQUENCY) -> Dict[str, float]:
    """Each part's CPU per host in ms: the H-host run's samples less the one-host run's,
    over H - 1 (a part the larger run sampled less of, noise in start-up, counts as 0),
    and their ``total``."""
    a, b = by_part(many), by_part(one)
    per = {part: max(0, a[part] - b[part]) / frequency / (hosts - 1) * 1000 for part in PARTS}
    per["total"] = sum(per.values())
    return {part: round(ms, 3) for part, ms in per.items()}


def describe(per: Dict[str, float], parts: Sequence[str] = PARTS) -> List[str]:
    """Table cells: each part's ms per host, then the total."""
    return [f"{per[part]:.2f}" for part in (*parts, "total")]
