"""What a third-party program saw, stage by stage, printed as JSON for the test to compare.

Each program in this folder runs twice, once on the originals (ssh2-python 1.2,
parallel-ssh 2.16) and once on ours, in a fresh interpreter; the only thing that
changes between the runs is which ``ssh2`` / ``pssh`` the interpreter imports.
A stage's record is its return value, or the exception it raised: class, the
classes it derives from (so that a subclass of the original's class still
compares equal) and its message.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Callable, Dict


def load_spec() -> Dict[str, Any]:
    """The servers and files to use, passed by the test as JSON in argv[1]."""
    with open(sys.argv[1]) as fh:
        return json.load(fh)


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def exception_record(exc: BaseException) -> Dict[str, Any]:
    cause = exc.__cause__
    return {"raised": qualified(type(exc)),
            "bases": [qualified(c) for c in type(exc).__mro__],
            "message": str(exc),
            "cause": qualified(type(cause)) if cause is not None else None}


class Observations:
    """Stages run in order; a failing stage is recorded and the next one runs."""

    def __init__(self, replacements: Dict[str, str]) -> None:
        # Paths and ports differ between the two runs: they are written as names.
        self.replacements = sorted(replacements.items(), key=lambda kv: -len(kv[0]))
        self.seen: Dict[str, Any] = {}

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        # Progress on stderr: a run that hangs shows the test where.
        print(f"stage {name} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            value = fn()
        except Exception as exc:  # any exception: it is the observation
            self.seen[name] = exception_record(exc)
            value = None
        else:
            self.seen[name] = value
        print(f"stage {name} done in {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)
        return value

    def dump(self) -> None:
        text = json.dumps(self.seen, default=repr, sort_keys=True)
        for literal, name in self.replacements:
            text = text.replace(literal, name)
        print(text, flush=True)
