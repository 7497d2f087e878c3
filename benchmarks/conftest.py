"""Fixtures of the per-operation suites (benchmarks/test_ops_*.py, pytest-benchmark): one
real sshd on loopback for the whole run, a client key it accepts, a known_hosts file for it
and a 1 MiB file to read over SFTP and SCP.

These suites live here, not in tests/, so the test run never collects them
(tests/test_ops_suites.py runs each once with ``--benchmark-disable``). They also run under
ssh2-python's own virtualenv, where ``pssh`` is not installed: the server module,
which needs only the standard library, is then loaded from this checkout by its path.
"""
from __future__ import annotations

import base64
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Rounds per benchmark (pedantic mode: each round one operation, set-up untimed).
ROUNDS = int(os.environ.get("BENCH_OPS_ROUNDS", "30"))
FILE_SIZE = 1024 * 1024


def _server_group():
    try:
        from pssh.sshd import ServerGroup
    except ImportError:   # ssh2-python's virtualenv: the module, by its path
        path = Path(__file__).resolve().parent.parent / "pssh" / "sshd.py"
        spec = importlib.util.spec_from_file_location("_bench_sshd", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        ServerGroup = module.ServerGroup
    return ServerGroup


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str
    key: str          # an ed25519 private key file the server accepts
    known_hosts: str  # the server's host keys
    path: str         # 1 MiB of text (hussh decodes what it reads as UTF-8)
    size: int
    local: str        # where the clients that copy to a file write it


@pytest.fixture(scope="session")
def target(tmp_path_factory):
    """The server: ``$BENCH_OPS_ADDRESS`` (default 127.0.0.1), a free port."""
    address = os.environ.get("BENCH_OPS_ADDRESS", "127.0.0.1")
    with _server_group()(addresses=[address]) as group:
        data = tmp_path_factory.mktemp("ops") / "file-1mib.txt"
        text = base64.encodebytes(os.urandom(FILE_SIZE))[:FILE_SIZE]
        data.write_bytes(text)
        yield Target(group.servers[0].address, group.port, group.servers[0].user,
                     group.keys.private(), group.known_hosts_file(), str(data), len(text),
                     str(data.parent / "copy"))


@pytest.fixture
def measure(benchmark):
    """``measure(group, target, setup=None, rounds=0)``: benchmark ``target`` in ``group``,
    ``rounds`` times (default ``ROUNDS``), with ``setup`` (untimed: closing the previous
    round's connection, say) before each round."""
    def run(group: str, target, setup=None, rounds: int = 0) -> None:
        rounds = rounds or ROUNDS
        benchmark.group = group
        # A warm-up round first (connections, caches), except in a one-round check.
        benchmark.pedantic(target, setup=setup, rounds=rounds, warmup_rounds=int(rounds > 1))
    return run
