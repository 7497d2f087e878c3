"""Programs that other projects wrote against ssh2-python 1.2 and parallel-ssh 2.16 run
unchanged on ours: each program in tests/thirdparty/ runs on the originals and on ours,
against the same real sshd, and what it observes must be the same, but for the
differences docs/migrating.md lists as intended (named below, with the value ours gives).

The third-party packages are installed from the package index at test time (the
machine's pip configuration) into folders shared by both runs; the originals live in a
virtualenv of their own, since their modules are also called ``ssh2`` and ``pssh``.
Both are made once per test session, or once for good in $THIRDPARTY_VENV_DIR if set.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import pytest

from benchmarks.peers import ORIGINALS, create_virtualenv
from loopback import address, addresses
from pssh.sshd import OpenSSHServer, ServerGroup

HERE = Path(__file__).parent / "thirdparty"
PASSWORD = "third party pw"

# The programs' packages, pinned: the last releases that run on ssh2-python or
# parallel-ssh with a current pip.
#   scrapli 2025.1.30: the last with the Python transport plugins (ssh2 among them).
#   redssh 2.2.4.post2: the last on ssh2-python (2.3 moved to a fork of its own).
#   redexpect 2.0.0: 2.0.1-2.0.3 declare "redssh>=2*", which pip >= 24.1 refuses.
#   netssh2 0.1.7: the current release.
#   threadbare 4.1.0: the current release, on parallel-ssh.
WITHOUT_DEPENDENCIES = ["scrapli==2025.1.30", "redssh==2.2.4.post2", "redexpect==2.0.0",
                        "netssh2==0.1.7", "threadbare==4.1.0"]
# broker 0.8.11 (current) with its dependencies, but not its ssh2-python extra.
BROKER = "broker==0.8.11"


class OneOf(tuple):
    """Any of these values (where the outcome is a race that ours loses more often)."""

    def __new__(cls, *values):
        return super().__new__(cls, values)


# Stage -> (what ours gives, why it differs from the originals: docs/migrating.md).
INTENDED: Dict[str, Dict[str, tuple]] = {
    "scrapli": {
        "silent/timeout": (
            {"raised": "scrapli.exceptions.ScrapliConnectionError",
             "cause": "scrapli.exceptions.ScrapliTimeout"},
            "a signal handler's exception is raised from the blocking call it interrupted: "
            "ssh2's exceptions are built in Python, where Python runs pending handlers"),
    },
    "netssh2": {
        # send_scp closes the channel before the server's EOF: scp exits 1 (no final
        # status byte), but the close may reach sshd first, and then no exit status is sent.
        "send_scp/exit_status": (
            OneOf(0, 1), "handshake() sets TCP_NODELAY: the close is not held back by Nagle's "
            "algorithm, so it more often beats the command's exit status (0: none received)"),
    },
    "threadbare": {
        "undecodable_output": (
            {"stdout": ["caf\u00e9 \ufffd end"], "stderr": [], "return_code": 0,
             "succeeded": True, "failed": False},
            "undecodable output is decoded with errors='replace', not a UnicodeDecodeError"),
        "pty_output_lines": (
            20000, "with use_pty=True parallel-ssh 2.16 can end stdout before the output does"),
        "sftp/uploaded_mode": (
            "0o100640", "uploads keep the local file's permission bits (parallel-ssh: 0644)"),
    },
}


@dataclass
class Sides:
    originals: str            # the originals' Python
    ours: str                 # ours: the Python running these tests
    packages: Path            # the programs' packages (no dependencies)
    broker: Path              # broker and its dependencies

    def pythonpath(self, program: str) -> str:
        paths = [HERE, self.packages] + ([self.broker] if program == "broker" else [])
        return os.pathsep.join(str(p) for p in paths)


def _pip_target(target: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--target", str(target), *args], check=True)


@pytest.fixture(scope="session")
def sides(tmp_path_factory) -> Sides:
    root = Path(os.environ.get("THIRDPARTY_VENV_DIR") or tmp_path_factory.mktemp("thirdparty"))
    originals = root / "originals" / "bin" / "python"
    if not originals.exists():
        create_virtualenv(root / "originals", ORIGINALS)
    packages, broker = root / "packages", root / "broker"
    if not packages.exists():
        _pip_target(packages, "--no-deps", *WITHOUT_DEPENDENCIES)
    if not broker.exists():
        _pip_target(broker, BROKER)
    return Sides(str(originals), sys.executable, packages, broker)


@pytest.fixture(scope="module")
def hosts():
    """Two hosts taking keys and a password, and one offering an RSA host key alone."""
    with ServerGroup(addresses=addresses(2), password=PASSWORD) as group, \
            OpenSSHServer(address(), keys=group.keys,
                          config=["HostKeyAlgorithms rsa-sha2-512,rsa-sha2-256"]) as rsa:
        yield group, rsa


@pytest.fixture(scope="module")
def unauthorized_key(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("unauthorized") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(sides: Sides, python: str, program: str, spec: dict, workdir: Path) -> subprocess.Popen:
    workdir.mkdir()
    (workdir / "home").mkdir()
    spec_file = workdir / "spec.json"
    spec_file.write_text(json.dumps(dict(spec, workdir=str(workdir))))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SSH_AUTH_SOCK", "PYTHONDONTWRITEBYTECODE")}
    # A home of its own: known_hosts, ~/.ssh/config and broker's settings are the run's.
    env.update(PYTHONPATH=sides.pythonpath(program), HOME=str(workdir / "home"),
               PYTHONHASHSEED="0")
    return subprocess.Popen([python, str(HERE / f"{program}_program.py"), str(spec_file)],
                            cwd=str(workdir), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def observe_both(sides: Sides, program: str, spec: dict, tmp_path: Path, timeout: float = 420):
    """Run the program on both sides at once; what each saw."""
    procs = {side: run(sides, getattr(sides, side), program, spec, tmp_path / side)
             for side in ("originals", "ours")}
    seen = {}
    for side, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{program} on {side} hung; its last stages:\n{err[-3000:]}")
        assert proc.returncode == 0 and out.strip(), \
            f"{program} on {side} exited {proc.returncode}:\n{err[-5000:]}"
        seen[side] = json.loads(out.strip().splitlines()[-1])
    return seen["originals"], seen["ours"]


def _same(original, ours) -> bool:
    """Equal, where an exception of ours may be a subclass of the original's and, when
    it is one of ssh2's or pssh's, word its message differently (both intended)."""
    if isinstance(original, dict) and "raised" in original:
        if not (isinstance(ours, dict) and "raised" in ours):
            return False
        if original["raised"] not in ours["bases"]:
            return False
        ours_module = ours["raised"].split(".")[0]
        return ours_module in ("ssh2", "pssh") or original["message"] == ours["message"]
    if isinstance(original, dict) and isinstance(ours, dict):
        return original.keys() == ours.keys() and all(_same(original[k], ours[k])
                                                      for k in original)
    if isinstance(original, list) and isinstance(ours, list):
        return len(original) == len(ours) and all(map(_same, original, ours))
    return original == ours


def _as_intended(ours, expected) -> bool:
    """An exception is named by its class and its cause's; anything else by its value."""
    if isinstance(expected, OneOf):
        return ours in expected
    if isinstance(expected, dict) and "raised" in expected:
        return isinstance(ours, dict) and all(ours.get(k) == v for k, v in expected.items())
    return ours == expected


def differences(program: str, original: dict, ours: dict) -> List[str]:
    intended = INTENDED.get(program, {})
    found = []
    for stage in sorted(original.keys() | ours.keys()):
        if stage in intended:
            expected, why = intended[stage]
            if not _as_intended(ours.get(stage), expected):
                found.append(f"{stage}: ours {ours.get(stage)!r}, expected {expected!r} ({why}; "
                             f"the originals: {original.get(stage)!r})")
        elif stage not in ours or stage not in original:
            found.append(f"{stage}: only {'ours' if stage in ours else 'the originals'} ran it")
        elif not _same(original[stage], ours[stage]):
            found.append(f"{stage}:\n  originals {original[stage]!r}\n  ours      {ours[stage]!r}")
    return found


def spec_for(hosts, unauthorized_key: str) -> dict:
    group, rsa = hosts
    server = group.servers[0]
    return {"hosts": group.hosts, "port": group.port, "user": server.user,
            "key": group.keys.private(), "unauthorized_key": unauthorized_key,
            "password": PASSWORD, "closed_port": closed_port(),
            "host_public_keys": [" ".join(server.public_host_key(t).split()[:2])
                                 for t in sorted(server.host_keys)],
            "rsa_server": {"host": rsa.address, "port": rsa.port}}


@pytest.mark.parametrize("program", ["scrapli", "redexpect", "broker", "netssh2", "threadbare"])
def test_program_sees_the_same_on_ours(program, sides, hosts, unauthorized_key, tmp_path):
    original, ours = observe_both(sides, program, spec_for(hosts, unauthorized_key), tmp_path)
    found = differences(program, original, ours)
    assert not found, "\n".join(found)
    # The programs really worked on ours (not merely failed the same way).
    failed = [stage for stage, value in ours.items()
              if isinstance(value, dict) and "raised" in value]
    assert set(failed) == EXPECTED_FAILURES[program], sorted(failed)


# Stages that fail on both sides by design (a wrong password, a timeout, a missing file,
# a host key the known_hosts file lacks) or by the program's own limits (scrapli compares
# the first known_hosts entry only; sshd refuses an environment variable set after the
# shell started): any other failure is a broken program.
EXPECTED_FAILURES = {
    "scrapli": {"key/slow_command", "silent/timeout", "bad_password/open", "bad_key/open",
                "refused/open", "strict/ssh-ed25519/open", "strict/ssh-rsa/open"},
    "redexpect": {"setenv", "sftp/stat_missing", "scp/read_missing",
                  "known_hosts/strict/False", "bad_password", "bad_key"},
    "broker": {"sftp_read_missing", "execute_timeout", "bad_password", "bad_key"},
    "netssh2": {"bad_password", "bad_key"},
    "threadbare": {"exit_status_aborts", "sftp/download_missing", "scp/download_missing",
                   "timeout", "bad_key", "refused"},
}


@pytest.mark.parametrize("module", ["scrapli.transport.plugins.ssh2.transport",
                                    "broker.binds.ssh2"])
def test_imports_first_in_a_fresh_interpreter(module, sides, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([str(sides.packages), str(sides.broker)]),
               HOME=str(tmp_path))
    result = subprocess.run([sides.ours, "-c", f"import {module}"], cwd=str(tmp_path), env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
