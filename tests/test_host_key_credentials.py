"""A host whose key changed, let through by ``StrictHostKeyChecking no`` (our ``off``),
learns no secret: no password, no keyboard-interactive answer, no forwarded agent.

OpenSSH's ``ssh`` is run beside ours: with the known key it asks for the password
(through SSH_ASKPASS) and logs in; with a changed key it never asks.
"""
from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

import pssh.aio
from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.sshd import _keygen

from conftest import PASSWORD


@pytest.fixture
def files(server, tmp_path):
    """known_hosts files for ``server``: ``right`` holds its keys, ``changed`` another key."""
    spare = _keygen(tmp_path / "spare", "ed25519")
    name = f"[{server.address}]:{server.port}"
    right, changed = tmp_path / "right", tmp_path / "changed"
    right.write_text(server.known_hosts_lines())
    changed.write_text(f"{name} {' '.join((tmp_path / 'spare.pub').read_text().split()[:2])}\n")
    assert spare.exists()
    return {"right": right, "changed": changed}


def ssh_asks_for_the_password(server, path, tmp_path) -> tuple:
    """(connected, asked): ssh with password logins only, the password from SSH_ASKPASS."""
    asked = tmp_path / "asked"
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\ntouch '{asked}'\nprintf '%s\\n' '{PASSWORD}'\n")
    askpass.chmod(0o700)
    env = dict(os.environ, SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force",
               DISPLAY=":0")
    result = subprocess.run(
        ["ssh", "-F", "none", "-o", f"UserKnownHostsFile={path}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no",
         "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
         "-o", "PreferredAuthentications=password", "-p", str(server.port),
         server.address, "true"],
        env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    was_asked = asked.exists()
    if was_asked:
        asked.unlink()
    return result.returncode == 0, was_asked


def secret_logins(text: str) -> int:
    """The password and keyboard-interactive logins (accepted or failed) sshd logged."""
    return sum(1 for line in text.splitlines()
               if ("password" in line or "keyboard-interactive" in line)
               and ("Accepted" in line or "Failed" in line or "Postponed" in line))


def password_client(server, path, **kwargs):
    return SSHClient(server.address, port=server.port, password=PASSWORD, allow_agent=False,
                     identity_auth=False, ssh_config=False, known_hosts=str(path),
                     host_key_policy="off", num_retries=1, timeout=10, **kwargs)


@pytest.mark.parametrize("keyboard_interactive", [False, True])
def test_no_password_for_a_changed_host_key_as_ssh(server, files, tmp_path,
                                                   keyboard_interactive):
    assert ssh_asks_for_the_password(server, files["right"], tmp_path) == (True, True)
    assert ssh_asks_for_the_password(server, files["changed"], tmp_path) == (False, False)

    accepted = server.read_log(None).count("Accepted")
    password_client(server, files["right"], keyboard_interactive=keyboard_interactive).close()
    # sshd logs a login after the client has it: wait for the line, then count.
    logged = secret_logins(server.wait_for_log(lambda text: text.count("Accepted") > accepted))
    ended = server.read_log(None).count("[preauth]")
    with pytest.raises(exc.AuthenticationError) as info:
        password_client(server, files["changed"], keyboard_interactive=keyboard_interactive)
    assert "disabled" in str(info.value) and "host key" in str(info.value)
    assert server.address in str(info.value)
    # The impostor's connection has ended (logged before auth): nothing secret was tried.
    text = server.wait_for_log(lambda text: text.count("[preauth]") > ended)
    assert secret_logins(text) == logged
    # The file is left as it was: a changed key is never written over the known one.
    assert "spare" not in files["changed"].read_text()
    assert len(files["changed"].read_text().splitlines()) == 1


def test_pssh_aio_sends_no_password_to_a_changed_host_key(server, files):
    async def login(path):
        async with pssh.aio.connect(server.address, server.port, password=PASSWORD,
                                    known_hosts=str(path), host_key_policy="off",
                                    agent_path=None, client_keys=[], ssh_config=False,
                                    connect_timeout=10) as conn:
            return (await conn.run("echo in", check=True)).stdout

    assert asyncio.run(login(files["right"])) == "in\n"
    with pytest.raises(pssh.aio.PermissionDenied):
        asyncio.run(login(files["changed"]))


def test_no_agent_forwarding_to_a_changed_host_key(server, files, agent, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    seen = {}
    for which in ("right", "changed"):
        with SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                       allow_agent=False, identity_auth=False, ssh_config=False,
                       known_hosts=str(files[which]), host_key_policy="off",
                       forward_ssh_agent=True, num_retries=1, timeout=10) as client:
            output = client.run_command('echo "${SSH_AUTH_SOCK:-none}"')
            seen[which] = list(output.stdout)
    assert seen["right"] != ["none"]
    assert seen["changed"] == ["none"]


def test_pssh_aio_forwards_no_agent_to_a_changed_host_key(server, files, agent):
    async def socket_seen(path) -> str:
        async with pssh.aio.connect(server.address, server.port,
                                    client_keys=[server.keys.private()], known_hosts=str(path),
                                    host_key_policy="off", agent_path=agent,
                                    agent_forwarding=True, ssh_config=False,
                                    connect_timeout=10) as conn:
            return (await conn.run('echo "${SSH_AUTH_SOCK:-none}"', check=True)).stdout

    assert asyncio.run(socket_seen(files["right"])) != "none\n"
    assert asyncio.run(socket_seen(files["changed"])) == "none\n"
