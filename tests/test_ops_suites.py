"""The per-operation benchmark suites (benchmarks/test_ops_*.py, pytest-benchmark) run: each
once, one round per benchmark, into a --benchmark-json file that has every operation's group
with ours and the peers in it. Timings are never checked, only that the suites work.

The suites live in benchmarks/, outside this run's collection; they are run here as their
own pytest process from this folder, in importlib mode, so that the installed package (not
the checkout's unbuilt sources) is imported, as everywhere in the tests."""
import json
import os
import subprocess
import re
import sys
from pathlib import Path

from extras import require
from loopback import address

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run_suite(name, tmp_path):
    require("pytest_benchmark", "paramiko", "hussh", "asyncssh")
    out = tmp_path / f"{name}.json"
    # Without xdist's variables: pytest-benchmark reads PYTEST_XDIST_WORKER as "this is an
    # xdist worker" and then quietly disables itself (no JSON is written).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env.update(BENCH_OPS_ROUNDS="1", BENCH_OPS_ADDRESS=address())
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--import-mode=importlib",
         "-q", "-rs", str(BENCHMARKS / f"{name}.py"), f"--benchmark-json={out}"],
        capture_output=True, text=True, env=env, cwd=Path(__file__).parent, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    measured = {}
    for bench in json.loads(out.read_text())["benchmarks"]:
        assert bench["stats"]["rounds"] == 1 and bench["stats"]["median"] > 0, bench["name"]
        measured.setdefault(bench["group"], set()).add(bench["param"])
    return measured, result.stdout


def test_sync_suite_measures_every_operation_side_by_side(tmp_path):
    measured, _ = run_suite("test_ops_sync", tmp_path)
    assert measured == {
        "connect+handshake": {"ours-ssh2", "paramiko"},
        "auth": {"ours-ssh2", "paramiko"},
        "login": {"ours-ssh2", "ours-SSHClient", "paramiko", "hussh"},
        "channel open": {"ours-ssh2", "paramiko"},
        "exec true": {"ours-ssh2", "ours-SSHClient", "paramiko", "hussh"},
        "sftp read 1 MiB": {"ours-ssh2", "ours-SSHClient", "paramiko", "hussh"},
        "scp recv 1 MiB": {"ours-ssh2", "ours-SSHClient", "hussh"},
        "exec true, 4 threads": {"ours-ssh2", "paramiko", "hussh"},
        "sftp read 1 MiB, 4 threads": {"ours-ssh2", "paramiko", "hussh"},
    }


def test_async_suite_measures_every_operation_side_by_side(tmp_path):
    measured, _ = run_suite("test_ops_async", tmp_path)
    every = {"ours-aio", "asyncssh", "hussh-aio"}
    assert measured == {"login": every, "login, 10 at once": every, "exec true": every,
                        "exec true, 10 at once": every, "sftp read 1 MiB": every,
                        "scp recv 1 MiB": {"ours-aio", "asyncssh"}}


def test_the_normal_test_run_does_not_collect_the_suites():
    # pytest collects testpaths (tests/) when given no path: the suites beside it, never.
    pyproject = (BENCHMARKS.parent / "pyproject.toml").read_text()
    assert re.search(r'^testpaths = \["tests"\]$', pyproject, re.M)
    assert sorted(p.name for p in BENCHMARKS.glob("test_*.py")) == ["test_ops_async.py",
                                                                     "test_ops_sync.py"]
    assert not list(Path(__file__).parent.glob("test_ops_s*nc.py"))
