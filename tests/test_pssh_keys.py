"""Key problems named plainly, before or instead of libssh2's one message for all of them."""
import shutil
import subprocess
import time

import pytest

from pssh import exceptions as exc
from pssh.clients import SSHClient
from loopback import addresses
from pssh.sshd import PASSPHRASE, ServerGroup


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


@pytest.fixture
def login(group, tmp_path):
    def connect(**kwargs):
        kwargs.setdefault("identity_auth", False)
        return SSHClient(group.hosts[0], port=group.port, allow_agent=False,
                         known_hosts=str(tmp_path / "kh"), timeout=10, retry_delay=0.05,
                         **kwargs)
    return connect


def test_wrong_passphrase_is_said_and_not_retried(group, login):
    key = group.keys.private("passphrase")  # its .pub lies beside it
    started = time.monotonic()
    with pytest.raises(exc.PKeyFileError) as info:
        login(pkey=key, passphrase="not it", num_retries=3)
    assert "wrong passphrase" in str(info.value) and key in str(info.value)
    assert time.monotonic() - started < 5  # a wrong passphrase is not retried
    assert list(login(pkey=key, passphrase=PASSPHRASE).run_command("echo in").stdout) == ["in"]
    # parallel-ssh's way: the password is the key's passphrase
    assert login(pkey=key, password=PASSPHRASE).session is not None


def test_encrypted_key_without_a_passphrase(group, login):
    with pytest.raises(exc.PKeyFileError, match="is encrypted: give its passphrase"):
        login(pkey=group.keys.private("passphrase"))
    with open(group.keys.private("passphrase"), "rb") as fh:
        data = fh.read()
    # Key data is no file: a failed login, retried as parallel-ssh does, cause named.
    with pytest.raises(exc.AuthenticationError, match="in memory is encrypted"):
        login(pkey=data, num_retries=1)


def test_not_a_key(group, login, tmp_path):
    with pytest.raises(exc.PKeyFileError, match="is a directory"):
        login(pkey=str(tmp_path))
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(exc.PKeyFileError, match="not a private key"):
        login(pkey=str(tmp_path / "notes.txt"))
    with pytest.raises(exc.PKeyFileError, match="is a public key"):
        login(pkey=group.keys.public())
    with pytest.raises(exc.PKeyFileError, match="does not exist"):
        login(pkey=str(tmp_path / "missing"))


def test_encrypted_default_identity_is_skipped_for_the_next_one(group, login, tmp_path):
    home_keys = tmp_path / "ids"
    home_keys.mkdir()
    shutil.copy(group.keys.private("passphrase"), home_keys / "id_locked")
    shutil.copy(group.keys.private("ed25519"), home_keys / "id_open")
    subprocess.run(["chmod", "600", str(home_keys / "id_locked"), str(home_keys / "id_open")],
                   check=True)

    class Client(SSHClient):
        IDENTITIES = (str(home_keys / "id_locked"), str(home_keys / "id_open"))

    client = Client(group.hosts[0], port=group.port, allow_agent=False,
                    known_hosts=str(tmp_path / "kh"), timeout=10)
    assert list(client.run_command("echo second key").stdout) == ["second key"]
