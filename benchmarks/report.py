"""Medians, the relative-performance table and the charts of a ramp run."""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from benchmarks.sessions import OPERATIONS
from benchmarks.sinks import STEP_MEASUREMENT, Point

SMALL_OPERATIONS = tuple(op for op in OPERATIONS if op not in ("sftp_read", "total"))


def libraries_in(records: Iterable[dict]) -> List[str]:
    seen: Dict[str, None] = {}
    for record in records:
        seen.setdefault(record["library"], None)
    return list(seen)


def samples(records: Iterable[dict]) -> Dict[Tuple[str, int, str], List[float]]:
    """(library, concurrency, operation) -> seconds of every successful session."""
    out: Dict[Tuple[str, int, str], List[float]] = defaultdict(list)
    for record in records:
        for op, seconds in record.get("ops", {}).items():
            out[(record["library"], record["concurrency"], op)].append(seconds)
    return out


def overall_medians(records: Sequence[dict]) -> Dict[Tuple[str, str], float]:
    """(library, operation) -> median over all sessions of the run."""
    pooled: Dict[Tuple[str, str], List[float]] = defaultdict(list)
    for record in records:
        for op, seconds in record.get("ops", {}).items():
            pooled[(record["library"], op)].append(seconds)
    return {key: statistics.median(values) for key, values in pooled.items()}


def step_points(records: Sequence[dict], concurrency: int, baseline: Optional[str],
                run_id: str, host: str, time_ns: int) -> List[Point]:
    """One ``ssh_bench_step`` point per library and operation of a finished step."""
    step = [r for r in records if r["concurrency"] == concurrency]
    by_key = samples(step)
    errors: Dict[str, int] = defaultdict(int)
    for record in step:
        errors[record["library"]] += "error" in record
    points = []
    for (library, _, op), values in sorted(by_key.items()):
        median = statistics.median(values)
        fields = {"median": median, "p90": _quantile(values, 0.9),
                  "sessions": float(len(values)), "errors": float(errors[library])}
        base = by_key.get((baseline, concurrency, op)) if baseline else None
        if base:
            fields["ratio"] = median / statistics.median(base)
        points.append(Point(STEP_MEASUREMENT,
                            {"library": library, "operation": op,
                             "concurrency": str(concurrency), "run_id": run_id, "host": host},
                            fields, time_ns))
    return points


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def relative_table(records: Sequence[dict], baseline: str = "paramiko") -> str:
    """Markdown: median per operation and library, and each library's speed-up
    over ``baseline`` (baseline median / library median; > 1 is faster)."""
    libraries = libraries_in(records)
    medians = overall_medians(records)
    lines = ["| operation | " + " | ".join(f"{lib} (ms)" for lib in libraries) + " | "
             + " | ".join(f"{lib} vs {baseline}" for lib in libraries if lib != baseline)
             + " |"]
    lines.append("|---|" + "---:|" * (2 * len(libraries) - (baseline in libraries)))
    for op in OPERATIONS:
        cells = [f"{medians[(lib, op)] * 1000:.2f}" if (lib, op) in medians else "n/a"
                 for lib in libraries]
        ratios = []
        for lib in libraries:
            if lib == baseline:
                continue
            mine, base = medians.get((lib, op)), medians.get((baseline, op))
            ratios.append(f"{base / mine:.2f}x" if mine and base else "n/a")
        lines.append(f"| {op} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def concurrency_table(records: Sequence[dict], operation: str = "total") -> str:
    """Markdown: median ``operation`` seconds per concurrency step and library."""
    libraries = libraries_in(records)
    by_key = samples(records)
    steps = sorted({r["concurrency"] for r in records})
    lines = ["| threads | " + " | ".join(libraries) + " |",
             "|---:|" + "---:|" * len(libraries)]
    for step in steps:
        cells = [f"{statistics.median(by_key[(lib, step, operation)]) * 1000:.1f} ms"
                 if by_key.get((lib, step, operation)) else "n/a" for lib in libraries]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def throughput_table(steps: Sequence) -> str:
    """Markdown: sessions completed per second and client CPU per session, per
    step and library. At saturation these, not per-operation latencies, say
    which library does more with the machine."""
    libraries = list(dict.fromkeys(s.library for s in steps))
    by_key = {(s.library, s.concurrency): s for s in steps}
    lines = ["| threads | " + " | ".join(f"{lib} sessions/s, CPU ms/session" for lib in libraries)
             + " |", "|---:|" + "---:|" * len(libraries)]
    for concurrency in sorted({s.concurrency for s in steps}):
        cells = []
        for lib in libraries:
            step = by_key.get((lib, concurrency))
            if step is None or not step.sessions or not step.wall:
                cells.append("n/a")
                continue
            cpu = f"{step.cpu / step.sessions * 1000:.1f}" if step.cpu is not None else "?"
            cells.append(f"{step.sessions / step.wall:.1f}, {cpu}")
        lines.append(f"| {concurrency} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def session_counts(records: Sequence[dict]) -> str:
    done: Dict[str, int] = defaultdict(int)
    failed: Dict[str, int] = defaultdict(int)
    for record in records:
        (failed if "error" in record else done)[record["library"]] += 1
    return ", ".join(f"{lib}: {done[lib]} sessions" + (f" ({failed[lib]} failed)"
                                                       if failed[lib] else "")
                     for lib in libraries_in(records))


def plot(records: Sequence[dict], out_dir: Path) -> List[Path]:
    """The post's two charts (every operation vs concurrency, one panel per
    library; the same without ``sftp_read`` and ``total``) and one panel per
    operation comparing the libraries. Returns the PNG paths."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    libraries = libraries_in(records)
    by_key = samples(records)
    steps = sorted({r["concurrency"] for r in records})

    def series(lib: str, op: str):
        xs = [s for s in steps if by_key.get((lib, s, op))]
        return xs, [statistics.median(by_key[(lib, s, op)]) * 1000 for s in xs]

    def grid(panels: Sequence[str], lines: Sequence[str], by_library: bool, title: str,
             name: str) -> Path:
        cols = min(3, len(panels))
        rows = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False,
                                 sharey=by_library)
        colours = plt.get_cmap("tab10")
        for ax, panel in zip(axes.flat, panels):
            for number, line in enumerate(lines):
                lib, op = (panel, line) if by_library else (line, panel)
                xs, ys = series(lib, op)
                if xs:
                    # Same colour for a line in every panel, even where one is missing.
                    ax.plot(xs, ys, marker="o", markersize=3, label=line,
                            color=colours(number % 10))
            ax.set_title(panel)
            ax.set_xlabel("concurrent sessions (threads)")
            ax.set_ylabel("median ms")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        fig.suptitle(title)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        return path

    return [
        grid(libraries, OPERATIONS, True, "Every operation vs concurrency, per library",
             "ramp_all_operations.png"),
        grid(libraries, SMALL_OPERATIONS, True,
             "Without sftp_read and total, per library", "ramp_small_operations.png"),
        grid(OPERATIONS, libraries, False, "Libraries compared, per operation",
             "ramp_by_operation.png"),
    ]
