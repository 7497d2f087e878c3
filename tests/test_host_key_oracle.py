"""Host keys decided as OpenSSH decides, case by case, with ``ssh`` itself as the oracle.

Every case is a known_hosts file as OpenSSH writes or reads it and a real sshd
with chosen host keys (or a host certificate). ``ssh`` and each of our front ends
(the gevent client, pssh.aio, the ``pssh`` command) connect to the same server with
a copy of the same file under the same ``StrictHostKeyChecking``, and must come to
the same decision: connected or refused, and the file left as it was or with the
same line appended. A man in the middle is a server with another key: of the known
type, or of a type the file does not hold for the host, or certified by a CA the
file does not trust.

``StrictHostKeyChecking ask`` is ``strict`` for us (pssh never asks); ``ssh`` runs
with no terminal to ask on (a session of its own, stdin not a tty, no BatchMode),
where it refuses what it would have asked about.

One intended difference, stricter than OpenSSH: a key marked ``@revoked``, or a
certificate signed by a CA marked so, is refused under every policy (``ssh -o
StrictHostKeyChecking=no`` connects to either, without password logins).
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pssh.aio
from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.core.ssh_config import host_key_policy_of
from extras import imported
from loopback import addresses
from pssh.sshd import ClientKeys, OpenSSHServer, _keygen
from test_cli import ENV

#: The StrictHostKeyChecking values, by the name of our policy each means (``ask``: the
#: one OpenSSH value that has no policy of its own name).
POLICIES = {"strict": "yes", "ask": "ask", "accept-new": "accept-new", "off": "no"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Client keys, spare host keys (the impostor's) and two CA keys."""
    folder = tmp_path_factory.mktemp("oracle-keys")
    spare = {t: _keygen(folder / f"spare_{t}", t) for t in ("ed25519", "ecdsa", "rsa")}
    ca = _keygen(folder / "ca", "ed25519")
    _keygen(folder / "other_ca", "ed25519")
    return ClientKeys.generate(folder / "client"), spare, ca


def certified(key: Path, ca: Path, principal: str) -> None:
    """A host certificate for ``key`` (``key-cert.pub``), signed by ``ca``."""
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-h", "-I", f"{principal}-host",
                    "-n", principal, "-V", "-5m:+1h", f"{key}.pub"], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def servers(keys, tmp_path_factory):
    """``full``: a host with ed25519, ecdsa and rsa host keys; ``ecdsa``: one with an
    ECDSA key only (a man in the middle whose key is of another type); ``certified``: a
    host presenting a certificate signed by the CA; ``other-ca``: one presenting a
    certificate signed by another CA."""
    client_keys, _, ca = keys
    folder = tmp_path_factory.mktemp("oracle-hosts")
    hosts = (("full", ("ed25519", "ecdsa", "rsa"), None), ("ecdsa", ("ecdsa",), None),
             ("certified", ("ed25519",), ca), ("other-ca", ("ed25519",), ca.parent / "other_ca"))
    made = {}
    try:
        for address, (name, types, signer) in zip(addresses(len(hosts)), hosts):
            hostkeys = folder / name
            hostkeys.mkdir()
            host_keys = {t: _keygen(hostkeys / f"ssh_host_{t}_key", t) for t in types}
            config = []
            if signer is not None:
                certified(host_keys["ed25519"], signer, address)
                config = [f"HostCertificate {host_keys['ed25519']}-cert.pub"]
            made[name] = OpenSSHServer(address, keys=client_keys, host_keys=host_keys,
                                       config=config).start()
        yield made
    finally:
        for server in made.values():
            server.close()


def name_of(server) -> str:
    return f"[{server.address}]:{server.port}"


def line(name: str, pub: str) -> str:
    return f"{name} {' '.join(Path(pub).read_text().split()[:2])}\n"


def host_line(server, key_type: str) -> str:
    return line(name_of(server), str(server.host_keys[key_type]) + ".pub")


def spare_line(server, spare, key_type: str) -> str:
    return line(name_of(server), str(spare[key_type]) + ".pub")


def hashed(text: str, tmp: Path) -> str:
    path = tmp / "to-hash"
    path.write_text(text)
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(path)], check=True,
                   capture_output=True)
    return path.read_text()


#: case -> (server, the file's text from (server, spare keys, CA, a scratch folder)).
CASES = {
    "unknown host": ("full", lambda s, spare, ca, tmp: ""),
    "known key": ("full", lambda s, spare, ca, tmp: host_line(s, "ed25519")),
    "known rsa key of a host that has all types":
        ("full", lambda s, spare, ca, tmp: host_line(s, "rsa")),
    "known ecdsa key only": ("full", lambda s, spare, ca, tmp: host_line(s, "ecdsa")),
    "changed key, same type": ("full", lambda s, spare, ca, tmp: spare_line(s, spare, "ed25519")),
    "changed key, other type (server has no ed25519)":
        ("ecdsa", lambda s, spare, ca, tmp: spare_line(s, spare, "ed25519")),
    "changed key, other type (server has rsa too)":
        ("full", lambda s, spare, ca, tmp: spare_line(s, spare, "rsa")),
    "hashed known key": ("full", lambda s, spare, ca, tmp: hashed(host_line(s, "ed25519"), tmp)),
    "hashed changed key":
        ("ecdsa", lambda s, spare, ca, tmp: hashed(spare_line(s, spare, "ed25519"), tmp)),
    "wildcard pattern": ("full", lambda s, spare, ca, tmp: line(
        f"other.example,[127.0.1.1?]:{s.port}", str(s.host_keys["ed25519"]) + ".pub")),
    "negated pattern": ("full", lambda s, spare, ca, tmp: line(
        f"[127.0.1.1?]:{s.port},!{name_of(s)}", str(s.host_keys["ed25519"]) + ".pub")),
    "cert-authority only, no certificate": ("full", lambda s, spare, ca, tmp: line(
        "@cert-authority *", str(ca) + ".pub")),
    "malformed lines, then a changed key": ("ecdsa", lambda s, spare, ca, tmp: (
        "this line is garbage\n@unknown-marker host ssh-ed25519 AAAA\n"
        "somehost ssh-ed25519 bm90IGEga2V5\n" + spare_line(s, spare, "ed25519"))),
    "malformed lines, then the known key": ("full", lambda s, spare, ca, tmp: (
        "garbage\n" + host_line(s, "ed25519"))),
    "revoked key": ("ecdsa", lambda s, spare, ca, tmp: (
        host_line(s, "ecdsa") + line("@revoked *", str(s.host_keys["ecdsa"]) + ".pub"))),
    "cert-authority, a certificate it signed": ("certified", lambda s, spare, ca, tmp: line(
        "@cert-authority *", str(ca) + ".pub")),
    "cert-authority, a certificate another CA signed": ("other-ca", lambda s, spare, ca, tmp:
        line("@cert-authority *", str(ca) + ".pub")),
    "cert-authority revoked, a certificate it signed": ("certified", lambda s, spare, ca, tmp:
        line("@cert-authority *", str(ca) + ".pub") + line("@revoked *", str(ca) + ".pub")),
}

#: Where we decide otherwise than ssh, on purpose: (case, policy) -> our decision.
STRICTER = {("revoked key", "off"): False,
            ("cert-authority revoked, a certificate it signed", "off"): False}


def ssh_decides(server, keys, path: Path, policy: str) -> bool:
    """Whether OpenSSH's ssh connects (and runs a command) with this file and policy."""
    client_keys = keys[0]
    value = POLICIES[policy]
    # ask: no terminal to ask on, and no BatchMode (which would refuse by itself);
    # nothing but the key may log in.
    prompts = (["-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no"]
               if value == "ask" else ["-o", "BatchMode=yes"])
    result = subprocess.run(
        ["ssh", "-F", "none", "-o", f"UserKnownHostsFile={path}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"StrictHostKeyChecking={value}",
         *prompts, "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
         "-i", client_keys.private(), "-p", str(server.port), server.address, "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        start_new_session=True)
    return result.returncode == 0


def ssh_config_saying(policy: str, folder: Path) -> Path:
    """An ssh config that says ``StrictHostKeyChecking`` for ``policy``."""
    path = folder / f"ssh_config_{policy}"
    path.write_text(f"Host *\n    StrictHostKeyChecking {POLICIES[policy]}\n")
    return path


def gevent_decides(server, keys, path: Path, policy: str) -> bool:
    # ask has no name of ours: it comes from the ssh config, as a user would say it.
    chosen = dict(ssh_config=str(ssh_config_saying(policy, path.parent))) \
        if policy == "ask" else dict(ssh_config=False, host_key_policy=policy)
    try:
        client = SSHClient(server.address, port=server.port, pkey=keys[0].private(),
                           known_hosts=str(path), allow_agent=False, identity_auth=False,
                           timeout=10, num_retries=1, **chosen)
    except exc.HostKeyError:
        return False
    with client:
        client.run_command("true").exit_code  # noqa: B018 - reading it waits: the connection is of use
    return True


def aio_decides(server, keys, path: Path, policy: str) -> bool:
    # pssh.aio, as asyncssh, does not read StrictHostKeyChecking: ask is given as the
    # policy the ssh config would have made of it.
    async def attempt() -> bool:
        try:
            conn = await pssh.aio.connect(server.address, server.port,
                                          client_keys=[keys[0].private()],
                                          known_hosts=str(path),
                                          host_key_policy=host_key_policy_of(POLICIES[policy]),
                                          agent_path=None, ssh_config=False,
                                          connect_timeout=10)
        except pssh.aio.HostKeyNotVerifiable:
            return False
        async with conn:
            await conn.run("true", check=True)
        return True
    return asyncio.run(attempt())


def cli_decides(server, keys, path: Path, policy: str) -> bool:
    """``pssh run`` given the file and the policy as ``ssh -o`` is (``-O``)."""
    result = subprocess.run(
        [sys.executable, "-m", "pssh", "run", "-H", server.address, "--port", str(server.port),
         "-k", keys[0].private(), "--no-agent", "-F", "none", "--progress", "never",
         "-O", f"StrictHostKeyChecking={POLICIES[policy]}", "-O", f"UserKnownHostsFile={path}",
         "-t", "30", "--", "true"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=ENV,
        start_new_session=True)
    assert result.returncode in (0, 1), result.stderr  # connected, or the host failed
    return result.returncode == 0


FRONT_ENDS = {"gevent": gevent_decides, "asyncio": aio_decides, "cli": cli_decides}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_the_same_decision_as_openssh(front_end, case, policy, servers, keys, tmp_path):
    server_name, make = CASES[case]
    server = servers[server_name]
    text = make(server, keys[1], keys[2], tmp_path)
    theirs, ours = tmp_path / "ssh_known_hosts", tmp_path / "our_known_hosts"
    theirs.write_text(text)
    ours.write_text(text)

    ssh_connected = ssh_decides(server, keys, theirs, policy)
    our_connected = FRONT_ENDS[front_end](server, keys, ours, policy)

    expected = STRICTER.get((case, policy), ssh_connected)
    assert our_connected == expected, (
        f"{case}, {policy}: ssh {'connected' if ssh_connected else 'refused'}, "
        f"{front_end} {'connected' if our_connected else 'refused'}")
    if (case, policy) not in STRICTER:
        # Unchanged, or the same line appended (ssh -F none writes names unhashed).
        assert ours.read_text() == theirs.read_text()


def test_the_table_covers_what_the_issue_names():
    """Same type changed, type switch, hashed, @revoked, @cert-authority (with and without
    a certificate, from the CA, another one, a revoked one), malformed lines, unknown
    host: each is a case above; every StrictHostKeyChecking value, every front end."""
    for word in ("same type", "other type", "hashed", "revoked", "cert-authority",
                 "a certificate it signed", "another CA", "cert-authority revoked",
                 "malformed", "unknown host"):
        assert any(word in case for case in CASES), word
    assert sorted(POLICIES.values()) == ["accept-new", "ask", "no", "yes"]
    assert all(host_key_policy_of(value) for value in POLICIES.values())
    assert sorted(FRONT_ENDS) == ["asyncio", "cli", "gevent"]


def test_ssh_is_there():
    assert shutil.which("ssh"), "openssh-client is needed: apt-get install openssh-client"


# -- pssh.aio without a policy: asyncssh's own decisions ------------------------------------

def asyncssh_decides(server, keys, path: Path) -> bool:
    asyncssh = imported("asyncssh")

    async def attempt() -> bool:
        try:
            async with asyncssh.connect(server.address, server.port, username=server.user,
                                        client_keys=[keys[0].private()],
                                        known_hosts=str(path), agent_path=None,
                                        config=None, connect_timeout=10) as conn:
                await conn.run("true", check=True)
        except asyncssh.HostKeyNotVerifiable:
            return False
        except (asyncssh.KeyExchangeFailed, asyncssh.ConnectionLost, ConnectionResetError):
            # asyncssh offers only the key types (or certificates) the file holds for a
            # known host: a server without one fails the negotiation. Refused all the same.
            return False
        return True
    return asyncio.run(attempt())


def aio_default_decides(server, keys, path: Path) -> bool:
    async def attempt() -> bool:
        try:
            async with pssh.aio.connect(server.address, server.port,
                                        client_keys=[keys[0].private()],
                                        known_hosts=str(path), agent_path=None,
                                        ssh_config=False, connect_timeout=10) as conn:
                await conn.run("true", check=True)
        except pssh.aio.HostKeyNotVerifiable:
            return False
        return True
    return asyncio.run(attempt())


#: asyncssh's parser refuses a file with lines it cannot read; ours skips them (as ssh).
ASYNCSSH_CANNOT_READ = {"malformed lines, then a changed key",
                        "malformed lines, then the known key"}


@pytest.mark.parametrize("case", sorted(set(CASES) - ASYNCSSH_CANNOT_READ))
def test_pssh_aio_decides_as_asyncssh_and_never_writes(case, servers, keys, tmp_path):
    """A program written for asyncssh keeps its protection when it switches the import:
    every host verified, unknown and changed keys refused, the file never written."""
    server_name, make = CASES[case]
    server = servers[server_name]
    text = make(server, keys[1], keys[2], tmp_path)
    path = tmp_path / "known_hosts"
    path.write_text(text)
    theirs = asyncssh_decides(server, keys, path)
    ours = aio_default_decides(server, keys, path)
    assert ours == theirs, f"{case}: asyncssh {theirs}, pssh.aio {ours}"
    assert path.read_text() == text


def test_pssh_aio_known_hosts_none_checks_nothing_and_writes_nothing(servers, keys, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    async def attempt():
        async with pssh.aio.connect(servers["full"].address, servers["full"].port,
                                    client_keys=[keys[0].private()], known_hosts=None,
                                    agent_path=None, ssh_config=False) as conn:
            return (await conn.run("echo hi", check=True)).stdout
    assert asyncio.run(attempt()) == "hi\n"
    assert not (tmp_path / ".ssh").exists()
