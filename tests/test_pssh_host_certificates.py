"""OpenSSH host certificates and @cert-authority / @revoked, against real sshd."""
import subprocess
import time

import pytest

from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.core.host_certificates import HostCertificate
from pssh.known_hosts import fingerprint
from loopback import address
from pssh.sshd import OpenSSHServer
from ssh2.session import HOST_CERTIFICATES


@pytest.fixture(autouse=True)
def host_certificates():
    """Missing, every test here fails saying how to get them (a skip would pass CI while
    testing nothing)."""
    if not HOST_CERTIFICATES:
        pytest.fail("host certificates need the bundled libssh2 with our patches: "
                    "LIBSSH2_BUNDLE=1 pip install .", pytrace=False)


ADDRESS = address()  # each test restarts its server there


def keygen(*args):
    subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True)


def read_blob(pub_path) -> bytes:
    import base64
    return base64.b64decode(open(pub_path).read().split()[1])


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two CAs and one host key per type."""
    folder = tmp_path_factory.mktemp("hostcerts")
    for name in ("ca", "other_ca"):
        keygen("-t", "ed25519", "-N", "", "-f", str(folder / name))
    for key_type in ("ed25519", "ecdsa", "rsa"):
        keygen("-t", key_type, "-N", "", "-f", str(folder / f"host_{key_type}"))
    return folder


def certify(keys, key_type, tmp_path, *, ca="ca", principals=ADDRESS, validity="-5m:+1h",
            extra=()):
    """A copy of the host key with a certificate signed as asked."""
    key = tmp_path / f"host_{key_type}"
    key.write_bytes((keys / f"host_{key_type}").read_bytes())
    key.chmod(0o600)
    (tmp_path / f"host_{key_type}.pub").write_bytes((keys / f"host_{key_type}.pub").read_bytes())
    keygen("-s", str(keys / ca), "-h", "-I", f"{key_type}-host", "-n", principals,
           "-V", validity, *extra, str(key) + ".pub")
    return key


@pytest.fixture
def serve(tmp_path):
    """Start an sshd whose only host key is ``key``, presenting its certificate."""
    started = []

    def start(key):
        server = OpenSSHServer(ADDRESS, workdir=tmp_path / f"sshd{len(started)}",
                               host_keys={"k": key}, config=[f"HostCertificate {key}-cert.pub"])
        server.start()
        started.append(server)
        return server
    yield start
    for server in started:
        server.stop()


def known_hosts(tmp_path, server, keys, *lines, ca="ca"):
    path = tmp_path / "known_hosts"
    ca_key = " ".join(open(keys / f"{ca}.pub").read().split()[:2])
    path.write_text("".join(lines) + f"@cert-authority [{ADDRESS}]:{server.port} {ca_key}\n")
    return path


def connect(server, path, **kwargs):
    kwargs.setdefault("host_key_policy", "strict")
    return SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                     known_hosts=str(path), allow_agent=False, identity_auth=False,
                     ssh_config=False, timeout=10, **kwargs)


@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
def test_a_certificate_from_a_trusted_ca_is_accepted(keys, key_type, tmp_path, serve):
    server = serve(certify(keys, key_type, tmp_path))
    path = known_hosts(tmp_path, server, keys)
    before = path.read_text()
    client = connect(server, path)
    assert client.session.hostkey()[0].startswith(b"\x00\x00\x00")
    output = client.run_command("echo certified")
    assert list(output.stdout) == ["certified"]
    assert path.read_text() == before  # nothing learnt: the CA vouches for the host


@pytest.mark.parametrize("sign, reason", [
    (dict(principals="some.other.host"), "not among its principals"),
    (dict(validity="-2h:-1h"), "it expired at"),
    (dict(validity="+1h:+2h"), "it is not valid before"),
    (dict(extra=("-O", "force-command=/bin/false")), "critical options"),
])
def test_an_invalid_certificate_is_refused_before_login(keys, tmp_path, serve, sign, reason):
    server = serve(certify(keys, "ed25519", tmp_path, **sign))
    path = known_hosts(tmp_path, server, keys)
    with pytest.raises(exc.HostKeyMismatchError) as info:
        connect(server, path, host_key_policy="accept-new")
    assert reason in str(info.value) and ADDRESS in str(info.value)
    assert "Accepted" not in server.read_log(None)


def test_a_revoked_ca_is_refused(keys, tmp_path, serve):
    server = serve(certify(keys, "ed25519", tmp_path))
    ca_key = " ".join(open(keys / "ca.pub").read().split()[:2])
    path = known_hosts(tmp_path, server, keys, f"@revoked * {ca_key}\n")
    with pytest.raises(exc.HostKeyMismatchError) as info:
        connect(server, path)
    assert "@revoked" in str(info.value) and fingerprint(read_blob(keys / "ca.pub")) in str(
        info.value)


def test_an_untrusted_ca_falls_back_to_the_plain_key(keys, tmp_path, serve):
    server = serve(certify(keys, "ed25519", tmp_path, ca="other_ca"))
    path = known_hosts(tmp_path, server, keys)
    with pytest.raises(exc.UnknownHostKeyError):
        connect(server, path)
    connect(server, path, host_key_policy="accept-new").close()
    learnt = path.read_text().splitlines()[-1].split()
    # The certified key itself is what accept-new records, never the certificate.
    assert learnt[1] == "ssh-ed25519"
    assert learnt[2] == open(keys / "host_ed25519.pub").read().split()[1]
    connect(server, path).close()


def test_a_host_without_a_ca_line_is_checked_by_its_plain_key(keys, tmp_path, serve):
    server = serve(certify(keys, "ed25519", tmp_path))
    path = tmp_path / "kh_plain"
    path.write_text(server.known_hosts_lines())
    client = connect(server, path)
    assert client.session.hostkey()[0][4:15] == b"ssh-ed25519"


def test_certificate_fields_and_signature(keys, tmp_path):
    key = certify(keys, "ecdsa", tmp_path, principals="a.example,b.example", validity="+0s:+1h")
    cert = HostCertificate.parse(read_blob(f"{key}-cert.pub"))
    assert cert.key_type == "ecdsa-sha2-nistp256"
    assert cert.public_key == read_blob(keys / "host_ecdsa.pub")
    assert cert.principals == ("a.example", "b.example")
    assert cert.signature_key == read_blob(keys / "ca.pub")
    now = time.time() + 60
    assert cert.problem("b.example", now) is None
    assert "principals" in cert.problem("c.example", now)
    # One flipped bit in the signed part: the CA signature no longer holds.
    blob = bytearray(read_blob(f"{key}-cert.pub"))
    blob[60] ^= 1  # inside the nonce
    assert "signature is not valid" in HostCertificate.parse(bytes(blob)).problem(
        "b.example", now)


def test_a_user_certificate_is_not_a_host_certificate(keys, tmp_path):
    key = tmp_path / "user"
    keygen("-t", "ed25519", "-N", "", "-f", str(key))
    keygen("-s", str(keys / "ca"), "-I", "user", "-n", ADDRESS, "-V", "-5m:+1h",
           str(key) + ".pub")
    cert = HostCertificate.parse(read_blob(f"{key}-cert.pub"))
    assert "user certificate" in cert.problem(ADDRESS)
