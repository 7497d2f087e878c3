"""OpenSSH user certificates: a key the server does not list, signed by a CA it trusts."""
import subprocess

import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from loopback import address
from pssh.sshd import OpenSSHServer

from conftest import trusting


def keygen(*args):
    subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def ca_server(tmp_path_factory):
    keys = tmp_path_factory.mktemp("certs")
    keygen("-t", "ed25519", "-N", "", "-f", str(keys / "ca"))
    with OpenSSHServer(address(), config=[f"TrustedUserCAKeys {keys / 'ca.pub'}"]) as server:
        yield server, keys


def signed_key(keys, name, principal, tmp_path):
    key = tmp_path / name
    keygen("-t", "ed25519", "-N", "", "-f", str(key))
    keygen("-s", str(keys / "ca"), "-I", name, "-n", principal, "-V", "+1h", str(key) + ".pub")
    return str(key)


def connect(server, tmp_path, **kwargs):
    return SSHClient(server.address, port=server.port, known_hosts=str(tmp_path / "kh"),
                     allow_agent=False, identity_auth=False, ssh_config=False, timeout=10,
                     **kwargs)


def test_certificate_next_to_the_key_is_used(ca_server, tmp_path):
    server, keys = ca_server
    key = signed_key(keys, "user", server.user, tmp_path)
    client = connect(server, tmp_path, pkey=key)
    assert list(client.run_command("echo by certificate").stdout) == ["by certificate"]
    client.close()
    server.wait_for_log('Accepted certificate ID "user"')


def test_explicit_cert_file_and_parallel_client(ca_server, tmp_path):
    server, keys = ca_server
    key = signed_key(keys, "other", server.user, tmp_path)
    moved = tmp_path / "elsewhere.pub"
    (tmp_path / "other-cert.pub").rename(moved)
    client = ParallelSSHClient([server.address], port=server.port, pkey=key,
                               cert_file=str(moved), known_hosts=str(tmp_path / "kh"),
                               allow_agent=False, identity_auth=False, ssh_config=False)
    output = client.run_command("echo ok")
    client.join(output)
    assert list(output[0].stdout) == ["ok"] and output[0].exit_code == 0


def test_key_without_certificate_or_wrong_principal_is_refused(ca_server, tmp_path):
    server, keys = ca_server
    key = signed_key(keys, "nobody", "someone-else", tmp_path)
    with pytest.raises(exc.AuthenticationError) as info:
        connect(server, tmp_path, pkey=key)
    assert "certificate" in str(info.value)
    (tmp_path / "nobody-cert.pub").unlink()
    with pytest.raises(exc.AuthenticationError):
        connect(server, tmp_path, pkey=key)
    with pytest.raises(exc.PKeyFileError):
        connect(server, tmp_path, pkey=key, cert_file=str(tmp_path / "missing-cert.pub"))


def test_asyncio_front_end_uses_the_certificate_too(ca_server, tmp_path):
    import asyncio

    from pssh import aio
    server, keys = ca_server
    key = signed_key(keys, "aio", server.user, tmp_path)

    async def main():
        async with aio.connect(server.address, port=server.port, username=server.user,
                               client_keys=[key],
                               known_hosts=trusting(tmp_path / "kh", server),
                               agent_path=None, ssh_config=False) as conn:
            return (await conn.run("echo by certificate")).stdout
    assert asyncio.run(main()) == "by certificate\n"
    server.wait_for_log('Accepted certificate ID "aio"')
