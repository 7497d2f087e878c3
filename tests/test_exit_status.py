"""How a command ended is never misreported: a command whose channel closed before it
said how it ended has no exit code (None), never libssh2's 0 for "none came"."""
from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest

import pssh.aio
from pssh.clients import SSHClient
from pssh.sshd import ClientKeys
from ssh2.session import PATCHED_LIBSSH2

from hostile import HostileServer
from loopback import address
from test_cli import ENV
from test_cli_signals import Pssh

ADDRESS = address()



def test_this_libssh2_can_tell_an_exit_status_from_none():
    assert PATCHED_LIBSSH2, ("a system libssh2 cannot tell exit status 0 from none: build "
                             "with the bundled one (LIBSSH2_BUNDLE=1 pip install .)")


async def closes_without_status(proc):
    proc.stdout.write(b"partial\n")
    proc.stdout.write_eof()
    proc.close()          # the channel ends: no exit-status, no exit-signal


async def exits_zero(proc):
    proc.stdout.write(b"done\n")
    proc.exit(0)


async def killed(proc):
    proc.stdout.write(b"partial\n")
    proc.exit_with_signal("KILL")


CASES = {"closed without a status": (closes_without_status, None, None),
         "exit 0": (exits_zero, 0, None),
         "killed": (killed, None, "KILL")}


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    return ClientKeys.generate(tmp_path_factory.mktemp("exit-keys")).private()


def known_hosts(server, tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text(server.known_hosts_line())
    return str(path)


@pytest.mark.parametrize("case", CASES)
def test_the_gevent_client_reports_how_it_ended(case, key, tmp_path):
    handler, code, signal = CASES[case]
    with HostileServer(ADDRESS, command=handler) as server:
        with SSHClient(server.address, port=server.port, pkey=key, allow_agent=False,
                       identity_auth=False, ssh_config=False,
                       known_hosts=known_hosts(server, tmp_path), num_retries=1,
                       timeout=10) as client:
            output = client.run_command("anything")
            lines = list(output.stdout)
            client.wait_finished(output)
            assert (output.exit_code, lines[:1]) == (code, ["partial" if code is None
                                                            else "done"])


@pytest.mark.parametrize("case", CASES)
def test_pssh_aio_reports_how_it_ended(case, key, tmp_path):
    handler, code, signal = CASES[case]

    async def main():
        async with pssh.aio.connect(server.address, server.port, client_keys=[key],
                                    known_hosts=known_hosts(server, tmp_path),
                                    agent_path=None, ssh_config=False) as conn:
            return await conn.run("anything")
    with HostileServer(ADDRESS, command=handler) as server:
        result = asyncio.run(main())
    assert result.exit_status == code
    assert (result.exit_signal[0] if result.exit_signal else None) == signal


def test_the_command_line_says_what_happened(key, tmp_path):
    with HostileServer(ADDRESS, command=closes_without_status) as server:
        done = subprocess.run(
            [sys.executable, "-m", "pssh", "run", "-H", server.address, "--port",
             str(server.port), "-k", key, "--no-agent", "-F", "none", "--known-hosts",
             known_hosts(server, tmp_path), "--output-dir", str(tmp_path / "out"), "--",
             "anything"], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 1
    status = (tmp_path / "out" / f"{ADDRESS}.status").read_text()
    assert status == "error: no exit status\n"
    assert "no exit status" in done.stderr


async def ignores_signals(proc):
    """Says it started, then runs until the connection ends: a signal request is kept for
    a read that never comes (ignored), and when the client closes the channel asyncssh
    closes it too, with no exit status nor signal. The stop's kill script (a command of
    its own here) finds nothing to signal."""
    if proc.command.startswith("for pass "):  # pssh.core.cancel.kill_script
        proc.exit(0)
        return
    proc.stdout.write(b"started\n")
    await asyncio.Future()


def test_the_command_line_says_it_stopped_a_command_that_gave_no_status(key, tmp_path):
    """A run stopped (SIGTERM) while its command runs on: the command gives no exit
    status, and the ``.status`` file says it was stopped, not merely "no exit status" (a
    command that ended so by itself, above) nor "interrupted" (work with no command)."""
    out = tmp_path / "out"
    with HostileServer(ADDRESS, command=ignores_signals) as server:
        pssh = Pssh(["run", "-H", server.address, "--port", str(server.port), "-k", key,
                     "--no-agent", "-F", "none", "--known-hosts",
                     known_hosts(server, tmp_path), "--output-dir", str(out), "--",
                     "anything"], tmp_path)
        try:
            stdout = out / f"{ADDRESS}.stdout"
            pssh.started(lambda: stdout.exists() and "started" in stdout.read_text(),
                         "the command running")
            pssh.signal(signal.SIGTERM, whole_group=False)
            assert pssh.wait() == 143, pssh.stderr()
        finally:
            pssh.kill()
    assert (out / f"{ADDRESS}.status").read_text() == "error: stopped, no exit status\n"
