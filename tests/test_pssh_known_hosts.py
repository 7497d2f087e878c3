"""known_hosts as OpenSSH writes it: patterns, hashed names, markers, lines we cannot parse."""
import subprocess

import pytest

from pssh import exceptions as exc
from pssh.clients import SSHClient
from loopback import address, addresses
from pssh.sshd import ServerGroup


@pytest.fixture(scope="module")
def server():
    with ServerGroup(addresses=addresses(1)) as group:
        yield group.servers[0]


def key_of(server, key_type="ecdsa"):  # asked for first when it is the one known
    return " ".join(server.public_host_key(key_type).split()[:2])


def other_key(tmp_path, key_type="ecdsa"):
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(tmp_path / "o")],
                   check=True)
    return " ".join((tmp_path / "o.pub").read_text().split()[:2])


def connect(server, path, policy="strict"):
    return SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                     known_hosts=str(path), host_key_policy=policy, allow_agent=False,
                     identity_auth=False, ssh_config=False, timeout=10)


def name(server):
    return f"[{server.address}]:{server.port}"


def test_hashed_names(server, tmp_path):
    path = tmp_path / "kh"
    path.write_text(server.known_hosts_lines())
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert server.address not in path.read_text()
    connect(server, path).close()


def test_wildcards_and_negation(server, tmp_path):
    path = tmp_path / "kh"
    pattern = f"[{server.address[:-1]}?]:{server.port}"  # its last digit any
    path.write_text(f"other.example,{pattern} {key_of(server)}\n")
    connect(server, path).close()
    path.write_text(f"{pattern},!{name(server)} {key_of(server)}\n")
    with pytest.raises(exc.UnknownHostKeyError):
        connect(server, path)


def test_lines_we_cannot_parse_do_not_hide_the_ones_after(server, tmp_path):
    """libssh2's reader stopped at the first odd line; a changed key after it then
    looked unknown and accept-new would have taken it."""
    path = tmp_path / "kh"
    path.write_text("this line is garbage\n"
                    "@cert-authority *.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==\n"
                    "@unknown-marker host ssh-ed25519 AAAA\n"
                    f"somehost sk-ssh-ed25519@openssh.com bm90IGEga2V5\n"
                    f"{name(server)} {other_key(tmp_path)}\n")
    before = path.read_text()
    with pytest.raises(exc.HostKeyMismatchError):
        connect(server, path, policy="accept-new")
    assert path.read_text() == before


def test_revoked_key_is_refused_even_when_listed(server, tmp_path):
    path = tmp_path / "kh"
    path.write_text(f"{name(server)} {key_of(server)}\n@revoked * {key_of(server)}\n")
    with pytest.raises(exc.HostKeyMismatchError) as info:
        connect(server, path, policy="accept-new")
    assert "@revoked" in str(info.value) and "line 2" in str(info.value)


def test_a_host_known_by_a_key_of_another_type_has_changed(server, tmp_path):
    """As ssh decides: the known type is asked for first, and a known host presenting any
    other key has changed (an impostor with an ECDSA key must not pass as a new host)."""
    path = tmp_path / "kh"
    path.write_text(f"{name(server)} {other_key(tmp_path, 'rsa')}\n")
    before = path.read_text()
    for policy in ("strict", "accept-new"):
        with pytest.raises(exc.HostKeyMismatchError) as info:
            connect(server, path, policy=policy)
        assert "CHANGED" in str(info.value) and "ssh-keygen -R" in str(info.value)
    assert path.read_text() == before


def test_a_known_hosts_file_in_the_current_directory(tmp_path, monkeypatch):
    # A bare file name: nothing to create but the file (os.makedirs("") would fail).
    from pssh.sshd import OpenSSHServer
    monkeypatch.chdir(tmp_path)
    with OpenSSHServer(address()) as server:
        client = SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                           known_hosts="known_hosts", ssh_config=False, allow_agent=False)
        client.close()
    assert server.address in (tmp_path / "known_hosts").read_text()
