"""ssh config driving real connections, and jump hosts (proxy_* and ProxyJump chains)."""
import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from loopback import addresses
from pssh.sshd import ServerGroup, free_port

# Two jump hosts and two targets: the ssh configs below name them.
J1, J2, T1, T2 = addresses(4)


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=[J1, J2, T1, T2]) as g:
        yield g


@pytest.fixture
def known_hosts(tmp_path):
    return str(tmp_path / "known_hosts")


def accepted(group, address, at_least=0):
    """How many logins the server at ``address`` accepted so far, once it logged ``at_least``."""
    server = next(s for s in group if s.address == address)
    return server.wait_for_log(
        lambda text: text.count("Accepted publickey") >= at_least).count("Accepted publickey")


def write_config(tmp_path, group, text):
    path = tmp_path / "ssh_config"
    path.write_text(text.format(port=group.port, key=group.keys.private(),
                                kh=tmp_path / "known_hosts", J1=J1, J2=J2, T1=T1, T2=T2))
    return str(path)


def test_config_supplies_hostname_port_user_key_and_known_hosts(group, tmp_path):
    path = write_config(tmp_path, group, """
Host web1
    HostName {T1}
Host web2
    HostName {T2}
Host web*
    Port {port}
    IdentityFile {key}
    IdentitiesOnly yes
    UserKnownHostsFile {kh}
    ConnectTimeout 10
""")
    client = ParallelSSHClient(["web1", "web2"], ssh_config=path)
    output = client.run_command('echo "$SSH_CONNECTION"')
    client.join(output)
    assert [o.host for o in output] == ["web1", "web2"]
    assert [list(o.stdout)[0].split()[2] for o in output] == [T1, T2]
    # known_hosts records the real host name, not the alias
    known = (tmp_path / "known_hosts").read_text()
    assert f"[{T1}]:{group.port}" in known and "web1" not in known
    client.close()


def test_explicit_arguments_win_over_config(group, tmp_path, known_hosts):
    path = write_config(tmp_path, group, "Host *\n    Port 1\n    User nobody-here\n")
    client = SSHClient(T1, port=group.port, user=group.servers[0].user,
                       pkey=group.keys.private(), known_hosts=known_hosts, allow_agent=False,
                       identity_auth=False, ssh_config=path, timeout=10)
    assert list(client.run_command("echo ok").stdout) == ["ok"]
    client.close()


def test_config_strict_host_key_checking_refuses_unknown_host(group, tmp_path):
    path = write_config(tmp_path, group, """
Host *
    StrictHostKeyChecking yes
    UserKnownHostsFile {kh}
""")
    with pytest.raises(exc.UnknownHostKeyError) as info:
        SSHClient(T1, port=group.port, pkey=group.keys.private(), allow_agent=False,
                  ssh_config=path, timeout=10)
    assert T1 in str(info.value)


def test_proxy_host_shares_one_jump_session(group, known_hosts):
    before = accepted(group, J1)
    client = ParallelSSHClient([T1, T2], port=group.port, pkey=group.keys.private(),
                               known_hosts=known_hosts, allow_agent=False, identity_auth=False,
                               proxy_host=J1, proxy_port=group.port, ssh_config=False,
                               timeout=10)
    output = client.run_command("echo through; head -c 3000000 /dev/zero | wc -c")
    client.join(output)
    for host_output in output:
        assert list(host_output.stdout) == ["through", "3000000"]
        assert host_output.exit_code == 0
    assert accepted(group, J1, at_least=before + 1) == before + 1
    client.close()


def test_proxy_jump_chain_of_two_hops_from_config(group, tmp_path):
    path = write_config(tmp_path, group, """
Host target
    HostName {T1}
    ProxyJump {J1},{J2}
Host *
    Port {port}
    IdentityFile {key}
    IdentitiesOnly yes
    UserKnownHostsFile {kh}
""")
    counts = {a: accepted(group, a) for a in (J1, J2, T1)}
    client = SSHClient("target", ssh_config=path, timeout=10)
    assert list(client.run_command("echo hop hop").stdout) == ["hop hop"]
    # Each hop logged in once: J1 from us, J2 through J1, the target through J2.
    assert {a: accepted(group, a, at_least=counts[a] + 1) - counts[a]
            for a in counts} == {J1: 1, J2: 1, T1: 1}
    # Closing the jump sessions ends the target's connection: the traffic ran through them.
    client._jumps.close()
    with pytest.raises((exc.PSSHError, OSError)):
        list(client.run_command("echo still here").stdout)
    client.close()


def test_jump_host_cannot_reach_target(group, known_hosts):
    closed_port = free_port(T1)
    with pytest.raises(exc.ProxyTargetError) as info:  # a ConnectionError and a ProxyError
        SSHClient(T1, port=closed_port, pkey=group.keys.private(), known_hosts=known_hosts,
                  allow_agent=False, identity_auth=False, proxy_host=J1,
                  proxy_port=group.port, ssh_config=False, num_retries=1, retry_delay=0.05,
                  timeout=10)
    message = str(info.value)
    assert T1 in message and J1 in message
    assert isinstance(info.value, exc.ConnectionError) and isinstance(info.value, exc.ProxyError)


def test_failed_jump_host_is_reported_for_every_target(group, known_hosts):
    client = ParallelSSHClient([T1, T2], port=group.port, pkey=group.keys.private(),
                               known_hosts=known_hosts, allow_agent=False, identity_auth=False,
                               proxy_host=J1, proxy_port=free_port(J1), ssh_config=False,
                               num_retries=0, timeout=10)
    output = client.run_command("echo never", stop_on_errors=False)
    for host_output in output:
        assert isinstance(host_output.exception, exc.ProxyError)  # as parallel-ssh
        assert J1 in str(host_output.exception) and "refused" in str(host_output.exception)
        assert list(host_output.stdout) == []


# -- credentials per hop ---------------------------------------------------------------------

def _password_attempts(server, since: int) -> list:
    """The password and keyboard-interactive logins sshd saw after ``since`` characters of
    its log."""
    return [line for line in server.read_log(None)[since:].splitlines()
            if "password" in line.lower() or "keyboard-interactive" in line.lower()]


@pytest.mark.parametrize("front_end", ["gevent", "asyncio"])
def test_a_jump_host_never_learns_the_targets_password(front_end, servers, tmp_path):
    """A compromised hop that refuses our keys and offers password logins must not be sent
    the target's password: the hop's own password is proxy_password (parallel-ssh), the
    target's is for the target."""
    import asyncio
    from conftest import PASSWORD, trusting
    from pssh import aio

    hop, target = servers.servers
    known_hosts = trusting(tmp_path / "kh", servers)
    since = len(hop.read_log(None))
    if front_end == "gevent":
        with pytest.raises(exc.ProxyError) as info:
            SSHClient(target.address, port=target.port, password=PASSWORD,
                      proxy_host=hop.address, proxy_port=hop.port, allow_agent=False,
                      identity_auth=False, known_hosts=known_hosts, ssh_config=False,
                      num_retries=1, timeout=10)
        # Given for the hop, its password is the hop's: then both logins pass.
        with SSHClient(target.address, port=target.port, password=PASSWORD,
                       proxy_host=hop.address, proxy_port=hop.port,
                       proxy_password=PASSWORD, allow_agent=False, identity_auth=False,
                       known_hosts=known_hosts, ssh_config=False, num_retries=1,
                       timeout=10) as client:
            assert list(client.run_command("echo through").stdout) == ["through"]
    else:
        async def main():
            async with aio.connect(target.address, target.port, password=PASSWORD,
                                   tunnel=f"{hop.user}@{hop.address}:{hop.port}",
                                   client_keys=[], agent_path=None, known_hosts=known_hosts,
                                   ssh_config=False, connect_timeout=10):
                pass
        with pytest.raises(exc.PSSHError) as info:
            asyncio.run(main())
    assert hop.address in str(info.value)
    tried = _password_attempts(hop, since)
    if front_end == "gevent":   # the second client's proxy_password, and nothing before it
        assert len([line for line in tried if "Accepted" in line]) == 1
        assert not [line for line in tried if "Failed" in line]
    else:
        assert tried == []


def _fingerprint(public_key_file: str) -> str:
    """OpenSSH's SHA256 fingerprint of a public key file, as sshd logs it."""
    import base64
    import hashlib
    blob = base64.b64decode(open(public_key_file).read().split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@pytest.mark.parametrize("front_end, route", [("gevent", "proxy_host"),
                                              ("gevent", "ProxyJump"),
                                              ("asyncio", "ProxyJump")])
def test_which_key_a_jump_host_is_offered(front_end, route, servers, tmp_path):
    """The target's key (``pkey``, ``client_keys``) goes to a hop only through
    parallel-ssh's ``proxy_host``, whose hop logs in with ``proxy_pkey``, else ``pkey``
    (parallel-ssh 2.16). A ProxyJump hop logs in as OpenSSH's ``ssh -i KEY -J HOP``
    (and asyncssh's tunnel) does: with its own identities (its ssh config entry's
    IdentityFile), never offered the target's key."""
    import asyncio
    from conftest import trusting
    from pssh import aio

    hop, target = servers.servers
    target_key, hop_key = servers.keys.private("ecdsa"), servers.keys.private("ed25519")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host target\n    HostName {target.address}\n    ProxyJump hop\n"
                      f"Host hop\n    HostName {hop.address}\n    IdentityFile {hop_key}\n"
                      f"    IdentitiesOnly yes\nHost *\n    Port {target.port}\n")
    known_hosts = trusting(tmp_path / "kh", servers)
    since = len(hop.read_log(None))
    if front_end == "gevent":
        route_args = dict(proxy_host=hop.address, proxy_port=hop.port, ssh_config=False) \
            if route == "proxy_host" else dict(ssh_config=str(config))
        name = target.address if route == "proxy_host" else "target"
        with SSHClient(name, port=target.port, pkey=target_key, allow_agent=False,
                       known_hosts=known_hosts, num_retries=1, timeout=10,
                       **route_args) as client:
            assert list(client.run_command("echo through").stdout) == ["through"]
    else:
        async def main():
            async with aio.connect("target", client_keys=[target_key], agent_path=None,
                                   known_hosts=known_hosts, ssh_config=str(config),
                                   connect_timeout=10) as conn:
                return (await conn.run("echo through")).stdout
        assert asyncio.run(main()) == "through\n"
    hop_log = hop.read_log(None)[since:]
    hop_keys = {_fingerprint(key + ".pub"): name
                for key, name in ((target_key, "target's"), (hop_key, "hop's"))}
    accepted = [name for fp, name in hop_keys.items() if any(
        "Accepted publickey" in line and fp in line for line in hop_log.splitlines())]
    offered = [name for fp, name in hop_keys.items() if fp in hop_log]
    if route == "proxy_host":
        assert accepted == offered == ["target's"]
    else:
        assert accepted == offered == ["hop's"]
