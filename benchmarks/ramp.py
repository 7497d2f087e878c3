"""The ramp: sessions in parallel threads, concurrency stepping from 1 to 50.

For every step (N threads) and every library, one worker process
(``_ramp_worker.py``, under the library's interpreter) runs N threads of back
to back sessions for a fixed time against the same loopback sshd. The order
of libraries rotates from step to step so that drift in machine load does
not always favour the same one. Each finished session comes back as a JSON
line; this process writes it to the raw file and the database sinks at once,
so nothing the measured threads do waits on storage or the network.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from benchmarks import peers, report
from benchmarks.sessions import Target
from benchmarks.sinks import RawFile, session_points

log = logging.getLogger(__name__)

WORKER = Path(__file__).resolve().parent / "_ramp_worker.py"
CAT_SIZE = 26 * 1024          # the post's 26 KB file, read with cat
SFTP_SIZE = 11 * 1024 * 1024  # the post's 11 MB file, read over SFTP
STEP_GRACE_SECONDS = 120


@dataclass
class StepResult:
    library: str
    concurrency: int
    sessions: int = 0
    errors: int = 0
    cpu: Optional[float] = None     # worker CPU seconds for the step
    wall: Optional[float] = None    # seconds from start line to the last session's end
    failure: Optional[str] = None   # the worker itself failed


@dataclass
class RampResult:
    run_id: str
    records: List[dict] = field(default_factory=list)
    steps: List[StepResult] = field(default_factory=list)
    versions: dict = field(default_factory=dict)


def make_files(directory: Path) -> tuple:
    """The files the sessions read: random, so compression cannot help. The one read
    with ``cat`` is random text (base64 lines): hussh decodes command output as UTF-8
    and fails on binary, and the same file has to serve every library."""
    cat_path, sftp_path = directory / "cat_26k.txt", directory / "sftp_11m.bin"
    text = base64.encodebytes(os.urandom(CAT_SIZE))[:CAT_SIZE - 1] + b"\n"
    cat_path.write_bytes(text)
    sftp_path.write_bytes(os.urandom(SFTP_SIZE))
    return cat_path, sftp_path


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class Ramp:
    """One run: ``libraries`` x ``steps``, ``seconds`` per step and library.

    ``sinks``: objects with ``write(points)``; ``on_event(kind, **info)`` is
    told about progress ("step", "session", "step_done").
    """

    def __init__(self, target: Target, libraries: Sequence[str], steps: Sequence[int],
                 seconds: float, interpreters: dict, raw: Optional[RawFile] = None,
                 sinks: Sequence = (), baseline: Optional[str] = None,
                 run_id: Optional[str] = None, host: Optional[str] = None,
                 on_event: Optional[Callable] = None) -> None:
        self.target = target
        self.libraries = list(libraries)
        self.steps = list(steps)
        self.seconds = seconds
        self.interpreters = interpreters
        self.raw = raw
        self.sinks = list(sinks)
        self.baseline = baseline if baseline in self.libraries else None
        self.result = RampResult(run_id or new_run_id())
        self.host = host or socket.gethostname()
        self.on_event = on_event or (lambda kind, **info: None)

    def run(self) -> RampResult:
        for index, concurrency in enumerate(self.steps):
            shift = index % len(self.libraries)
            for library in self.libraries[shift:] + self.libraries[:shift]:
                self.on_event("step", library=library, concurrency=concurrency)
                step = self._run_step(library, concurrency)
                self.result.steps.append(step)
                self.on_event("step_done", step=step)
            points = report.step_points(self.result.records, concurrency, self.baseline,
                                        self.result.run_id, self.host, time.time_ns())
            for sink in self.sinks:
                sink.write(points)
        return self.result

    def _run_step(self, library: str, concurrency: int) -> StepResult:
        step = StepResult(library, concurrency)
        python = self.interpreters[library]
        config = {"library": peers.split_build(library)[0], "threads": concurrency,
                  "seconds": self.seconds, "target": self.target.__dict__}
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen([python, str(WORKER), json.dumps(config)],
                                    stdout=subprocess.PIPE, stderr=stderr, text=True,
                                    env=peers.environment(library, python), cwd="/")
            # A session that never ends (a peer's bug, a wedged server) must
            # not hang the run: the step gets its time plus a grace period.
            limit = self.seconds + STEP_GRACE_SECONDS
            killed = threading.Event()
            watchdog = threading.Timer(limit, lambda: (killed.set(), proc.kill()))
            watchdog.start()
            try:
                for line in proc.stdout:
                    self._handle(json.loads(line), library, concurrency, step)
                proc.wait()
            finally:
                watchdog.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if proc.returncode != 0:
                stderr.seek(0)
                lines = stderr.read().decode(errors="replace").strip().splitlines()
                step.failure = (f"killed after {limit:g} s: a session did not finish"
                                if killed.is_set() else
                                lines[-1] if lines else f"exit status {proc.returncode}")
                log.error("%s at %d threads: worker failed: %s", library, concurrency,
                          step.failure)
        return step

    def _handle(self, message: dict, library: str, concurrency: int, step: StepResult) -> None:
        event = message.get("event")
        if event == "start":
            self.result.versions[library] = message.get("version")
        elif event == "end":
            step.cpu, step.wall = message.get("cpu"), message.get("wall")
        elif event == "session":
            record = {"run_id": self.result.run_id, "host": self.host, "library": library,
                      "version": self.result.versions.get(library),
                      "concurrency": concurrency, "thread": message["thread"],
                      "time": message["time"]}
            if "error" in message:
                record["error"] = message["error"]
                step.errors += 1
                log.debug("%s session failed: %s", library, message["error"])
            else:
                record["ops"] = message["ops"]
                step.sessions += 1
            self.result.records.append(record)
            if self.raw is not None:
                self.raw.write(record)
            points = session_points(record)
            for sink in self.sinks:
                sink.write(points)
            self.on_event("session", record=record)
