"""Agent forwarding through real sshd: remote programs use the local ssh-agent."""
import logging
import os
import subprocess

import gevent
import pytest

from pssh.clients import ParallelSSHClient, SSHClient
from loopback import addresses
from pssh.sshd import ServerGroup
from waiting import eventually


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


@pytest.fixture
def local_agent(group, tmp_path, monkeypatch):
    """A real ssh-agent holding the hosts' ed25519 client key, as SSH_AUTH_SOCK."""
    path = str(tmp_path / "agent.sock")
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        eventually(lambda: os.path.exists(path), what=f"ssh-agent's socket {path}")
        env = dict(os.environ, SSH_AUTH_SOCK=path)
        subprocess.run(["ssh-add", group.keys.private("ed25519")], env=env, check=True,
                       capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", path)
        yield path
    finally:
        proc.terminate()
        proc.wait()


def fingerprint(public_key_file: str) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", public_key_file], check=True,
                         capture_output=True, text=True).stdout
    return out.split()[1]


def single(group, tmp_path, host=None, **kwargs):
    return SSHClient(host or group.hosts[0], port=group.port, pkey=group.keys.private("rsa"),
                     known_hosts=str(tmp_path / "known_hosts"), allow_agent=False,
                     identity_auth=False, timeout=10, **kwargs)


def test_remote_ssh_add_lists_the_local_agents_keys(group, local_agent, tmp_path):
    client = single(group, tmp_path, forward_ssh_agent=True)
    # Three connections to the forwarded agent, one after another.
    output = client.run_command("ssh-add -l; ssh-add -l; ssh-add -L")
    client.wait_finished(output)
    lines = list(output.stdout)
    assert output.exit_code == 0, (lines, list(output.stderr))
    expected = fingerprint(group.keys.public("ed25519"))
    assert [line.split()[1] for line in lines[:2]] == [expected, expected]
    assert lines[2].split()[1] == open(group.keys.public("ed25519")).read().split()[1]


def test_the_remote_side_signs_with_the_forwarded_agent(group, local_agent, tmp_path):
    """From host 1, log in to host 2 with a key that exists only in the local agent."""
    client = single(group, tmp_path, forward_ssh_agent=True)
    hop = (f"ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no "
           f"-o UserKnownHostsFile=/dev/null -o IdentityFile=/nonexistent "
           f"-p {group.port} {group.hosts[1]} 'echo hop from $SSH_CLIENT'")
    output = client.run_command(hop)
    client.wait_finished(output)
    stdout, stderr = list(output.stdout), list(output.stderr)
    assert output.exit_code == 0, (stdout, stderr)
    assert stdout[0].startswith("hop from ")
    # Host 2 let in the key that only the agent holds (this client used rsa).
    agent_key = f"ssh2: ED25519 {fingerprint(group.keys.public('ed25519'))}"
    group.servers[1].wait_for_log(agent_key)


def test_every_host_of_a_parallel_client_forwards(group, local_agent, tmp_path):
    client = ParallelSSHClient(group.hosts, port=group.port, pkey=group.keys.private("rsa"),
                               known_hosts=str(tmp_path / "known_hosts"), allow_agent=False,
                               identity_auth=False, timeout=10, forward_ssh_agent=True)
    output = client.run_command("ssh-add -l")
    client.join(output)
    expected = fingerprint(group.keys.public("ed25519"))
    for host_output in output:
        assert host_output.exit_code == 0, host_output.exception
        assert list(host_output.stdout)[0].split()[1] == expected


def test_a_shell_gets_the_agent_too(group, local_agent, tmp_path):
    client = single(group, tmp_path, forward_ssh_agent=True)
    with client.open_shell() as shell:
        shell.run("ssh-add -l >/dev/null && echo agent-ok")
    assert "agent-ok" in list(shell.stdout)


def test_without_forwarding_the_remote_side_has_no_agent(group, local_agent, tmp_path):
    client = single(group, tmp_path)
    output = client.run_command('ssh-add -l; echo "sock=${SSH_AUTH_SOCK:-none}"')
    client.wait_finished(output)
    assert list(output.stdout)[-1] == "sock=none"
    assert output.exit_code == 0


def test_no_local_agent_warns_and_runs(group, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with caplog.at_level(logging.WARNING, logger="pssh"):
        client = single(group, tmp_path, forward_ssh_agent=True)
    assert "no local SSH agent" in caplog.text
    output = client.run_command("ssh-add -l")
    client.wait_finished(output)
    assert output.exit_code == 2  # "Could not open a connection to your authentication agent"


def test_local_agent_gone_fails_the_remote_request_not_the_command(group, local_agent,
                                                                    tmp_path, caplog):
    # No keepalive: nothing but the server's own packets may wake the reader. (The refused
    # channel, once closed as it was freed, read the command's output off the socket with
    # nobody woken for it; the next keepalive, 60 s later, woke the reader.)
    client = single(group, tmp_path, forward_ssh_agent=True, keepalive_seconds=0)
    os.unlink(local_agent)
    with caplog.at_level(logging.WARNING, logger="pssh"), \
            gevent.Timeout(120, AssertionError("the command's end was never seen")):
        output = client.run_command("ssh-add -l; echo after")
        client.wait_finished(output)
    assert list(output.stdout)[-1] == "after"
    assert "cannot reach the local SSH agent" in caplog.text
