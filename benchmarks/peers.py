"""Which Python runs each library, and the virtualenvs for peers that clash.

ssh2-python's module is also called ``ssh2``: it can never share an
interpreter with ours, so it runs from its own virtualenv. paramiko and
asyncssh run under the current interpreter when installed there
(``pip install 'pssh2[bench]'``), otherwise from a virtualenv of their own.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

log = logging.getLogger(__name__)

OURS = ("ours-blocking", "ours-nonblocking")
# The releases whose API we keep (tests/test_thirdparty.py runs programs on both).
ORIGINALS = ["ssh2-python>=1.2,<1.3", "parallel-ssh>=2.16,<2.17"]
BENCH_PEERS = ["paramiko>=3", "asyncssh>=2.14", "hussh>=0.3"]
# library -> (virtualenv folder, what pip installs there, module to import)
VENVS = {
    "ssh2-python": (".venv-ssh2python", ["ssh2-python"], "ssh2"),
    "paramiko": (".venv-bench", BENCH_PEERS, "paramiko"),
    "asyncssh": (".venv-bench", BENCH_PEERS, "asyncssh"),
    "hussh": (".venv-bench", BENCH_PEERS, "hussh"),
}


def other_builds(specs) -> Dict[str, str]:
    """``--other-build LABEL=PYTHON`` arguments as ``{label: python}``: our libraries run
    again under another build of this project (an earlier commit's virtualenv), named
    ``LIBRARY@LABEL``, for before/after figures from one run."""
    builds = {}
    for spec in specs or ():
        label, sep, python = spec.partition("=")
        if not sep or not label or not python:
            raise ValueError(f"--other-build takes LABEL=PYTHON, not {spec!r}")
        builds[label] = python
    return builds


def with_other_builds(libraries, builds: Dict[str, str], ours) -> list:
    """``libraries`` and, after each of ours, the same library under each other build."""
    result = []
    for library in libraries:
        result.append(library)
        if library in ours:
            result.extend(f"{library}@{label}" for label in builds)
    return result


def split_build(library: str):
    """``"ours@before"`` -> ``("ours", "before")``; ``"ours"`` -> ``("ours", None)``."""
    name, _, label = library.partition("@")
    return name, label or None


class PeerUnavailable(RuntimeError):
    """A library cannot be run here (not installed, no virtualenv)."""


def default_venv_dir() -> Path:
    """$BENCH_VENV_DIR, else the current directory."""
    return Path(os.environ.get("BENCH_VENV_DIR") or os.getcwd())


def interpreter(library: str, venv_dir: Path, create: bool = False) -> str:
    """The Python executable that runs ``library``'s sessions."""
    if library in OURS:
        return sys.executable
    if library not in VENVS:
        raise PeerUnavailable(f"unknown library {library!r}")
    folder, requirements, module = VENVS[library]
    if module != "ssh2" and importlib.util.find_spec(module) is not None:
        return sys.executable
    python = venv_dir / folder / "bin" / "python"
    if python.exists() and _imports(str(python), module):
        return str(python)
    if not create:
        hint = ("--setup-peers creates it" if module == "ssh2"
                else "pip install 'pssh2[bench]', or --setup-peers")
        raise PeerUnavailable(f"{library}: not installed for {sys.executable} and no "
                              f"virtualenv at {venv_dir / folder} ({hint})")
    create_virtualenv(venv_dir / folder, requirements)
    if not _imports(str(python), module):
        raise PeerUnavailable(f"{library}: installed into {venv_dir / folder} but "
                              f"'import {module}' fails there")
    return str(python)


def environment(library: str, python: str) -> Dict[str, str]:
    """The worker's environment: a peer's virtualenv must not see our tree, and
    no worker may compile its sources on every start (as PYTHONDONTWRITEBYTECODE
    would make it: ~25 ms of start-up CPU that an installed package never pays)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if python != sys.executable:
        env.pop("PYTHONPATH", None)
    return env


def _imports(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], cwd="/",
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                          capture_output=True).returncode == 0


def create_virtualenv(folder: Path, requirements, python: Optional[str] = None) -> str:
    """A virtualenv at ``folder`` with ``requirements`` installed by its own pip
    (which reads the machine's pip configuration); returns its Python."""
    log.warning("creating virtualenv %s with %s", folder, " ".join(requirements))
    subprocess.run([python or sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "-q", *requirements],
                   check=True)
    return str(folder / "bin" / "python")
