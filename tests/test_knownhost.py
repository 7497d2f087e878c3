"""KnownHost against real host keys: read, check (match/mismatch/not found), add, write."""
import subprocess

import pytest

from conftest import connect
from ssh2 import exceptions as exc
from ssh2.knownhost import (LIBSSH2_KNOWNHOST_KEY_ED25519, LIBSSH2_KNOWNHOST_KEYENC_BASE64,
                            LIBSSH2_KNOWNHOST_KEYENC_RAW, LIBSSH2_KNOWNHOST_TYPE_PLAIN,
                            KnownHost, hostkey_typemask)


def _typemask(session):
    key, key_type = session.hostkey()
    return key, LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | \
        hostkey_typemask(key_type)


@pytest.fixture
def checked(server):
    sock, session = connect(server, auth=False)
    yield session, session.knownhost_init()
    sock.close()


def test_read_and_match(server, checked, tmp_path):
    session, kh = checked
    path = tmp_path / "known_hosts"
    path.write_text(server.known_hosts_lines())
    assert kh.readfile(str(path)) == 3
    key, mask = _typemask(session)
    entry = kh.checkp(server.address, server.port, key, mask)
    assert entry.name == f"[{server.address}]:{server.port}".encode()
    assert entry.key
    assert "KnownHostEntry" in repr(entry)


def test_hashed_entries_match(server, checked, tmp_path):
    session, kh = checked
    path = tmp_path / "known_hosts"
    path.write_text(server.known_hosts_lines())
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    assert "|1|" in path.read_text()
    kh.readfile(str(path))
    key, mask = _typemask(session)
    assert kh.checkp(server.address, server.port, key, mask).name is None


def test_mismatch_raises(server, checked, tmp_path):
    session, kh = checked
    # A different key of the negotiated type (another type would be "not found").
    key_type = {1: "rsa", 3: "ecdsa", 6: "ed25519"}[session.hostkey()[1]]
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(tmp_path / "other")],
                   check=True)
    other = (tmp_path / "other.pub").read_text().split()
    kh.readline(f"[{server.address}]:{server.port} {other[0]} {other[1]}")
    key, mask = _typemask(session)
    with pytest.raises(exc.KnownHostCheckMisMatchError) as info:
        kh.checkp(server.address, server.port, key, mask)
    assert "does NOT match" in str(info.value)
    assert str(server.port) in str(info.value)


def test_not_found_raises(server, checked):
    session, kh = checked
    key, mask = _typemask(session)
    with pytest.raises(exc.KnownHostCheckNotFoundError) as info:
        kh.checkp("127.0.0.99", 2222, key, mask)
    assert "127.0.0.99" in str(info.value)


def test_add_write_read_back_get_delete(server, checked, tmp_path):
    session, kh = checked
    key, mask = _typemask(session)
    name = f"[{server.address}]:{server.port}"
    entry = kh.addc(name, key, mask, comment="added by test")
    line = kh.writeline(entry)
    assert line.startswith(name.encode()) and b"added by test" in line
    path = tmp_path / "written"
    kh.writefile(str(path))
    assert name in path.read_text()

    fresh = session.knownhost_init()
    assert fresh.readfile(str(path)) == 1
    assert fresh.checkp(server.address, server.port, key, mask).key == entry.key
    entries = fresh.get()
    assert len(entries) == 1
    fresh.delete(entries[0])
    assert fresh.get() == []
    with pytest.raises(exc.KnownHostError, match="stale"):
        fresh.delete(entries[0])
    with pytest.raises(exc.KnownHostError, match="stale"):
        fresh.writeline(entry)


def test_base64_key_and_bad_input(checked, tmp_path):
    session, kh = checked
    import base64
    key, key_type = session.hostkey()
    mask = (LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_BASE64
            | LIBSSH2_KNOWNHOST_KEY_ED25519)
    kh.addc("example.test", base64.b64encode(key), mask)
    assert [e.name for e in kh.get()] == [b"example.test"]
    with pytest.raises(exc.KnownHostReadFileError) as info:
        kh.readfile(str(tmp_path / "missing"))
    assert "missing" in str(info.value)
    with pytest.raises(exc.KnownHostReadLineError):
        kh.readline("garbage")
    with pytest.raises(TypeError):
        KnownHost()
    with pytest.raises(ValueError):
        hostkey_typemask(99)
