"""python -m benchmarks: the ramp benchmark of SSH libraries (see docs/benchmarks.md).

    python -m benchmarks run [--quick] [--libs ...] [--steps 1 5 10 ...] [--seconds 10]
                             [--influx-url URL (--influx-db DB | --influx-token T
                              --influx-org O --influx-bucket B)] [--graphite HOST:PORT]
    python -m benchmarks report RAW_FILE

Other benchmarks: python -m benchmarks.fanout, .sftp_throughput, .pool_size,
.post_auth_stall.
"""
from __future__ import annotations

import argparse
import json
import logging
import platform
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from benchmarks import peers, report
from benchmarks.ramp import CAT_SIZE, SFTP_SIZE, Ramp, StepResult, make_files, new_run_id
from benchmarks.sessions import DRIVERS, Target
from benchmarks.sinks import GraphiteSink, InfluxV1Sink, InfluxV2Sink, RawFile, read_raw

LIBRARIES = list(DRIVERS)
FULL_STEPS = [1, 2, 5, 10, 20, 30, 40, 50]
QUICK_STEPS = [1, 2, 4]

EPILOG = """\
examples:
  python -m benchmarks run --quick
  python -m benchmarks run --libs ours-blocking paramiko --steps 1 10 50 --seconds 20
  python -m benchmarks run --cipher aes128-ctr          # the same cipher for all
  python -m benchmarks run --influx-url http://127.0.0.1:8086 --influx-db ssh_bench
  python -m benchmarks run --influx-url http://127.0.0.1:8086 --influx-token T \\
      --influx-org my-org --influx-bucket ssh_bench
  python -m benchmarks run --graphite 127.0.0.1:2003
  python -m benchmarks report bench-results/RUN/sessions.jsonl

ssh2-python (module also named ssh2) runs from its own virtualenv in
--venv-dir; --setup-peers creates the virtualenvs that are missing.
Exit status: 0 done, 1 a library's worker failed or had no good session,
2 usage error.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.split("\n")[0], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the ramp", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--libs", nargs="+", choices=LIBRARIES, metavar="LIB",
                     help=f"libraries to measure: {' '.join(LIBRARIES)} "
                          "(default: all; with --quick, those available here)")
    run.add_argument("--steps", nargs="+", type=int, metavar="N",
                     help=f"concurrency steps (default {' '.join(map(str, FULL_STEPS))})")
    run.add_argument("--seconds", type=float, help="seconds per step and library (default 10)")
    run.add_argument("--quick", action="store_true",
                     help=f"steps {' '.join(map(str, QUICK_STEPS))}, 2 s each: under a minute")
    run.add_argument("--cipher", help="pin this cipher for every library (e.g. aes128-ctr; "
                                      "paramiko has no aes-gcm or chacha20). Default: each "
                                      "library's own choice")
    run.add_argument("--baseline", default="paramiko",
                     help="library the ratios are relative to (default paramiko)")
    run.add_argument("--out", type=Path, help="results folder (default bench-results/RUN_ID)")
    run.add_argument("--format", choices=["jsonl", "csv"], default="jsonl",
                     help="raw per-session timings (default jsonl)")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG charts")
    run.add_argument("--venv-dir", type=Path, default=None,
                     help="where peer virtualenvs live (default $BENCH_VENV_DIR or .)")
    run.add_argument("--other-build", action="append", metavar="LABEL=PYTHON",
                     help="also run ours under this interpreter (another build of this "
                          "project) as LIBRARY@LABEL: before/after figures from one run")
    run.add_argument("--setup-peers", action="store_true",
                     help="create missing peer virtualenvs (pip installs from PyPI)")
    db = run.add_argument_group("InfluxDB / Graphite (every timing, as measured)")
    db.add_argument("--influx-url", help="InfluxDB base URL, e.g. http://127.0.0.1:8086")
    db.add_argument("--influx-db", help="InfluxDB 1.x database (1.x write API; created)")
    db.add_argument("--influx-user", help="InfluxDB 1.x user")
    db.add_argument("--influx-password", help="InfluxDB 1.x password")
    db.add_argument("--influx-token", help="InfluxDB 2.x/3.x token (2.x write API)")
    db.add_argument("--influx-org", help="InfluxDB 2.x organisation")
    db.add_argument("--influx-bucket", help="InfluxDB 2.x bucket")
    db.add_argument("--graphite", metavar="HOST:PORT",
                    help="also send to a Graphite listener (InfluxDB 1.x graphite input)")
    run.add_argument("-v", "--verbose", action="store_true")

    rep = sub.add_parser("report", help="tables and charts from a raw results file")
    rep.add_argument("raw", type=Path, help="sessions.jsonl or sessions.csv of a run")
    rep.add_argument("--baseline", default="paramiko")
    rep.add_argument("--out", type=Path, help="where the charts go (default: beside RAW)")
    rep.add_argument("--no-plots", action="store_true")
    return parser


def make_sinks(args, parser) -> List:
    sinks: List = []
    v2 = any([args.influx_token, args.influx_org, args.influx_bucket])
    if args.influx_url:
        if v2:
            missing = [name for name in ("token", "org", "bucket")
                       if not getattr(args, f"influx_{name}")]
            if missing:
                parser.error("InfluxDB 2.x needs --influx-" + ", --influx-".join(missing))
            sinks.append(InfluxV2Sink(args.influx_url, args.influx_token, args.influx_org,
                                      args.influx_bucket))
        elif args.influx_db:
            sinks.append(InfluxV1Sink(args.influx_url, args.influx_db, args.influx_user,
                                      args.influx_password))
        else:
            parser.error("--influx-url needs --influx-db (1.x) or --influx-token/--influx-org/"
                         "--influx-bucket (2.x)")
    elif args.influx_db or v2:
        parser.error("--influx-db/--influx-token/... need --influx-url")
    if args.graphite:
        try:
            sinks.append(GraphiteSink(args.graphite))
        except ValueError as err:
            parser.error(str(err))
    return sinks


class Progress:
    """A live bar on a terminal, one line per finished step otherwise."""

    def __init__(self, total: int) -> None:
        self._live = sys.stderr.isatty()
        self._sessions = 0
        if self._live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, \
                TimeElapsedColumn
            from rich.progress import Progress as RichProgress
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(),
                                     console=Console(stderr=True))
            self._task = self._bar.add_task("starting", total=total)
            self._bar.start()

    def __call__(self, kind: str, **info) -> None:
        if kind == "step":
            self._current = f"{info['concurrency']:>3} threads {info['library']:<16}"
            self._sessions = 0
        elif kind == "session":
            self._sessions += 1
        elif kind == "step_done":
            step = info["step"]
            if not self._live:
                status = f"FAILED: {step.failure}" if step.failure else \
                    f"{step.sessions} sessions" + (f", {step.errors} failed" if step.errors else "")
                print(f"[bench] {step.concurrency:>3} threads {step.library:<16} {status}",
                      file=sys.stderr, flush=True)
        if self._live:
            advance = 1 if kind == "step_done" else 0
            self._bar.update(self._task, advance=advance,
                             description=f"{self._current} {self._sessions:>5} sessions")

    def stop(self) -> None:
        if self._live:
            self._bar.stop()


def run(args, parser) -> int:
    steps = args.steps or (QUICK_STEPS if args.quick else FULL_STEPS)
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    if any(n < 1 for n in steps) or seconds <= 0:
        parser.error("steps must be >= 1 and --seconds > 0")
    venv_dir = args.venv_dir or peers.default_venv_dir()
    interpreters, skipped = {}, []
    for library in args.libs or LIBRARIES:
        try:
            interpreters[library] = peers.interpreter(library, venv_dir, args.setup_peers)
        except peers.PeerUnavailable as err:
            if args.libs:   # asked for by name: not having it is an error
                parser.error(str(err))
            skipped.append(str(err))
    try:
        builds = peers.other_builds(args.other_build)
    except ValueError as err:
        parser.error(str(err))
    for library in [lib for lib in interpreters if lib in peers.OURS]:
        for label, python in builds.items():
            interpreters[f"{library}@{label}"] = python
    for reason in skipped:
        print(f"[bench] skipped {reason}", file=sys.stderr)
    if not interpreters:
        parser.error("no library to measure")
    sinks = make_sinks(args, parser)

    from pssh.sshd import OpenSSHServer
    run_id = new_run_id()
    out = args.out or Path("bench-results") / run_id
    out.mkdir(parents=True, exist_ok=True)
    raw = RawFile(str(out / f"sessions.{args.format}"))
    progress = Progress(len(steps) * len(interpreters))
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, OpenSSHServer() as server:
        cat_path, sftp_path = make_files(Path(tmp))
        target = Target(server.address, server.port, server.user, server.keys.private(),
                        str(cat_path), CAT_SIZE, str(sftp_path), SFTP_SIZE, args.cipher)
        ramp = Ramp(target, list(interpreters), steps, seconds, interpreters, raw=raw,
                    sinks=sinks, baseline=args.baseline, run_id=run_id, on_event=progress)
        try:
            result = ramp.run()
        finally:
            progress.stop()
            raw.close()
    sink_reports = [sink.close() for sink in sinks]

    setting = RunSetting(machine=machine_line(), steps=list(steps), seconds=seconds,
                         cipher=args.cipher, command=shlex.join(sys.argv[1:]))
    text = summary_text(result.records, args.baseline, result.versions, setting, run_id,
                        result.steps)
    (out / "steps.json").write_text(json.dumps([s.__dict__ for s in result.steps], indent=1))
    # What the raw file cannot tell (the time per step, the cipher, the command), kept so
    # that `report` on this folder later says what this run said.
    (out / RUN_FILE).write_text(json.dumps(setting.__dict__, indent=1))
    (out / "report.md").write_text(text + "\n")
    print(text)
    for sink_report in sink_reports:
        print(f"[bench] {sink_report}", file=sys.stderr)
    if not args.no_plots:
        for path in report.plot(result.records, out):
            print(f"[bench] chart: {path}", file=sys.stderr)
    print(f"[bench] raw timings: {raw.path}; report: {out / 'report.md'}", file=sys.stderr)

    failed = [s for s in result.steps if s.failure] + \
        [lib for lib in interpreters
         if not any(r["library"] == lib and "ops" in r for r in result.records)]
    return 1 if failed else 0


#: Beside the raw file: the run's setting (RunSetting as JSON).
RUN_FILE = "run.json"


@dataclass
class RunSetting:
    """How a ramp was run: what its report states beside the measured figures."""
    machine: str
    steps: List[int]
    seconds: Optional[float]    # None: not recorded (a run older than run.json)
    cipher: Optional[str]
    command: Optional[str]


def machine_line() -> str:
    return f"{platform.node()}, {platform.machine()}, Python {platform.python_version()}"


def read_setting(raw: Path, records: List[dict]) -> RunSetting:
    """The setting a run stored beside ``raw``; for an older run without it, what the
    records tell (the steps), and the rest said to be unknown rather than guessed."""
    stored = raw.parent / RUN_FILE
    if stored.exists():
        return RunSetting(**json.loads(stored.read_text()))
    return RunSetting(machine="not recorded", steps=sorted({r["concurrency"] for r in records}),
                      seconds=None, cipher=None, command=None)


def summary_text(records, baseline, versions, setting: RunSetting, run_id,
                 step_results=()) -> str:
    libs = ", ".join(f"{lib} {versions.get(lib) or ''}".strip() for lib in
                     report.libraries_in(records))
    each = "time per step not recorded" if setting.seconds is None \
        else f"{setting.seconds:g} s each"
    cipher = setting.cipher or ("each library default" if setting.command is not None
                                else "not recorded")
    return "\n".join([
        f"# Ramp {run_id}",
        "",
        f"Machine: {setting.machine}; "
        f"steps {' '.join(map(str, setting.steps))} threads, {each}; cipher: {cipher}.",
        f"Libraries: {libs}.",
        f"Sessions: {report.session_counts(records)}.",
        f"Command: python -m benchmarks {setting.command or '(not recorded)'}",
        "",
        f"## Median per operation, all steps (speed-up vs {baseline}: > 1 is faster)",
        "",
        report.relative_table(records, baseline),
        "",
        "## Median session total by concurrency",
        "",
        report.concurrency_table(records),
    ] + ([
        "",
        "## Throughput and client CPU by concurrency",
        "",
        report.throughput_table(step_results),
    ] if step_results else []))


def report_command(args) -> int:
    records = read_raw(str(args.raw))
    if not records:
        print(f"python -m benchmarks report: no sessions in {args.raw}", file=sys.stderr)
        return 2
    versions = {r["library"]: r.get("version") for r in records}
    steps_file = args.raw.parent / "steps.json"
    step_results = [StepResult(**s) for s in json.loads(steps_file.read_text())] \
        if steps_file.exists() else []
    print(summary_text(records, args.baseline, versions, read_setting(args.raw, records),
                       records[0]["run_id"], step_results))
    if not args.no_plots:
        for path in report.plot(records, args.out or args.raw.parent):
            print(f"[bench] chart: {path}", file=sys.stderr)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command == "report":
        return report_command(args)
    return run(args, parser)


if __name__ == "__main__":
    sys.exit(main())
