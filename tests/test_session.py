"""Session: handshake, algorithms, host key, authentication, against real sshd."""
import socket

import pytest

from conftest import PASSPHRASE, PASSWORD, connect, read_all, run
from ssh2 import exceptions as exc
from ssh2.session import (LIBSSH2_HOSTKEY_HASH_MD5, LIBSSH2_HOSTKEY_HASH_SHA1,
                          LIBSSH2_HOSTKEY_HASH_SHA256, LIBSSH2_HOSTKEY_TYPE_ED25519,
                          LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC, LIBSSH2_METHOD_HOSTKEY,
                          LIBSSH2_METHOD_KEX, Session)
from ssh2.utils import version


def test_version_is_at_least_1_11():
    assert tuple(int(p) for p in version().split(".")[:2]) >= (1, 11)


def test_handshake_sets_tcp_nodelay_and_prefers_gcm(server):
    sock = socket.create_connection((server.address, server.port))
    try:
        session = Session()
        assert session.handshake(sock) == 0
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        with open("/proc/cpuinfo") as fh:
            has_aes = " aes" in fh.read()
        cipher = session.methods(LIBSSH2_METHOD_CRYPT_CS)
        assert cipher == ("aes128-gcm@openssh.com" if has_aes else "chacha20-poly1305@openssh.com")
        assert session.methods(LIBSSH2_METHOD_KEX)
        assert session.banner_get().startswith("SSH-2.0-OpenSSH")
        assert session.sock is sock
    finally:
        sock.close()


def test_default_ciphers_exclude_weak_ones(server):
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.SSH2Error):
        session.method_pref(LIBSSH2_METHOD_CRYPT_CS, "no-such-cipher")
    supported = session.supported_algs(LIBSSH2_METHOD_CRYPT_CS)
    assert "aes256-ctr" in supported
    sock.close()


def login_with_cipher(server, cipher):
    """A session logged in with ``cipher`` asked for both ways (and checked to be in use)."""
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    session.method_pref(LIBSSH2_METHOD_CRYPT_CS, cipher)
    session.method_pref(LIBSSH2_METHOD_CRYPT_SC, cipher)
    session.handshake(sock)
    assert session.methods(LIBSSH2_METHOD_CRYPT_CS) == session.methods(LIBSSH2_METHOD_CRYPT_SC) \
        == cipher
    session.userauth_publickey_fromfile(server.user, server.keys.private())
    return sock, session


@pytest.mark.parametrize("cipher", ["chacha20-poly1305@openssh.com", "aes256-ctr",
                                    "aes256-gcm@openssh.com"])
def test_method_pref_chooses_cipher(server, cipher):
    sock, session = login_with_cipher(server, cipher)
    assert run(session, "echo ok")[:2] == (0, b"ok\n")
    sock.close()


@pytest.mark.parametrize("cipher", ["chacha20-poly1305@openssh.com", "aes128-gcm@openssh.com",
                                    "aes128-ctr"])
def test_cipher_carries_every_packet_size_intact(server, cipher):
    # Writes of 1 byte to past the maximum packet, echoed back by the server:
    # each size is a different split of the packet for the cipher code (the
    # bundled build runs ChaCha20-Poly1305 on OpenSSL's EVP, AES in bulk calls).
    import hashlib
    import os
    import random
    rng = random.Random(7)
    sizes = [1, 2, 15, 16, 17, 31, 32, 33, 4095, 4096, 32768, 34999, 35000, 40000]
    sizes += [rng.randrange(1, 70000) for _ in range(40)]
    data = os.urandom(sum(sizes))
    sock, session = login_with_cipher(server, cipher)
    chan = session.open_session()
    chan.execute("cat; echo done >&2")
    offset = 0
    for size in sizes:
        assert chan.write(data[offset:offset + size])[1] == size
        offset += size
    chan.send_eof()
    echoed = read_all(chan)
    assert len(echoed) == len(data)
    assert hashlib.sha256(echoed).digest() == hashlib.sha256(data).digest()
    assert read_all(chan, stderr=True) == b"done\n"
    sock.close()


@pytest.mark.parametrize("key_type, key_format", [
    ("ed25519", "openssh"), ("ecdsa", "openssh"), ("rsa", "openssh"), ("ecdsa", "pem"),
    ("rsa", "pem")])   # ssh-keygen writes ed25519 keys in OpenSSH's format only
def test_key_files_of_either_format_log_in(server, tmp_path, key_type, key_format):
    # ssh-keygen writes OpenSSH's own format; older keys are PEM (PKCS#1, SEC1).
    # The bundled libssh2 reads OpenSSH's format without asking OpenSSL first;
    # a PEM file still goes to OpenSSL.
    import shutil
    import subprocess
    key = tmp_path / f"id_{key_type}"
    shutil.copy(server.keys.private(key_type), key)
    key.chmod(0o600)
    if key_format == "pem":
        subprocess.run(["ssh-keygen", "-q", "-p", "-N", "", "-m", "PEM", "-f", str(key)],
                       check=True, capture_output=True)
    header = key.read_text().splitlines()[0]
    assert ("OPENSSH" in header) is (key_format == "openssh")
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    session.handshake(sock)
    session.userauth_publickey_fromfile(server.user, str(key))
    assert session.userauth_authenticated()
    sock.close()


def test_hostkey_and_hashes_match_server_key(server):
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    session.method_pref(LIBSSH2_METHOD_HOSTKEY, "ssh-ed25519")
    session.handshake(sock)
    key, key_type = session.hostkey()
    import base64
    import hashlib
    expected = base64.b64decode(server.public_host_key("ed25519").split()[1])
    assert key_type == LIBSSH2_HOSTKEY_TYPE_ED25519
    assert key == expected
    assert session.hostkey_hash(LIBSSH2_HOSTKEY_HASH_SHA256) == hashlib.sha256(key).digest()
    assert session.hostkey_hash(LIBSSH2_HOSTKEY_HASH_SHA1) == hashlib.sha1(key).digest()
    assert session.hostkey_hash(LIBSSH2_HOSTKEY_HASH_MD5) == hashlib.md5(key).digest()
    with pytest.raises(ValueError):
        session.hostkey_hash(99)
    sock.close()


def test_blocking_timeout_and_keepalive_settings(session):
    assert session.get_blocking() is True
    session.set_blocking(False)
    assert session.get_blocking() is False
    session.set_blocking(True)
    session.set_timeout(1234)
    assert session.get_timeout() == 1234
    with pytest.raises(ValueError):
        session.set_timeout(-1)
    session.keepalive_config(True, 5)
    assert 0 <= session.keepalive_send() <= 5
    assert session.block_directions() in (0, 1, 2, 3)


def test_userauth_list_offers_configured_methods(server):
    sock, session = connect(server, auth=False)
    methods = session.userauth_list(server.user)
    assert {"publickey", "password", "keyboard-interactive"} <= set(methods)
    assert session.userauth_authenticated() is False
    sock.close()


@pytest.mark.parametrize("key", ["ed25519", "ecdsa", "rsa"])
def test_publickey_fromfile_each_key_type(server, key):
    sock, session = connect(server, auth=False)
    assert session.userauth_publickey_fromfile(server.user, server.keys.private(key)) == 0
    assert session.userauth_authenticated()
    assert run(session, "whoami")[1].strip() == server.user.encode()
    sock.close()


def test_publickey_with_public_key_file(server):
    sock, session = connect(server, auth=False)
    session.userauth_publickey_fromfile(server.user, server.keys.private("rsa"),
                                        publickey=server.keys.public("rsa"))
    assert session.userauth_authenticated()
    sock.close()


def test_publickey_with_passphrase(server):
    sock, session = connect(server, auth=False)
    session.userauth_publickey_fromfile(server.user, server.keys.private("passphrase"),
                                        PASSPHRASE)
    assert session.userauth_authenticated()
    sock.close()


def test_wrong_passphrase_raises_file_error(server):
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.FileError) as info:
        session.userauth_publickey_fromfile(server.user, server.keys.private("passphrase"),
                                            "wrong")
    assert info.value.errno == -16
    assert "Wrong passphrase" in str(info.value)
    assert "id_passphrase" in str(info.value)
    sock.close()


def test_missing_key_file_raises(server, tmp_path):
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.FileError) as info:
        session.userauth_publickey_fromfile(server.user, str(tmp_path / "nope"))
    assert str(tmp_path / "nope") in str(info.value)
    assert "Unable to open private key file" in str(info.value)
    sock.close()


def test_unauthorised_key_is_rejected(server, tmp_path):
    import subprocess
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.AuthenticationError):
        session.userauth_publickey_fromfile(server.user, str(tmp_path / "k"))
    assert not session.userauth_authenticated()
    sock.close()


@pytest.mark.parametrize("key", ["ed25519", "rsa", "passphrase"])
def test_publickey_frommemory(server, key):
    sock, session = connect(server, auth=False)
    with open(server.keys.private(key), "rb") as fh:
        private = fh.read()
    session.userauth_publickey_frommemory(server.user, private,
                                          PASSPHRASE if key == "passphrase" else "")
    assert session.userauth_authenticated()
    sock.close()


def test_password(server):
    sock, session = connect(server, auth=False)
    assert session.userauth_password(server.user, PASSWORD) == 0
    assert run(session, "echo pw")[1] == b"pw\n"
    sock.close()


def test_bad_password_raises_authentication_error(server):
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.AuthenticationError) as info:
        session.userauth_password(server.user, "not the password")
    assert info.value.errno == -18
    assert "password authentication" in str(info.value)
    sock.close()


def test_keyboard_interactive(server):
    sock, session = connect(server, auth=False)
    session.userauth_keyboardinteractive(server.user, PASSWORD)
    assert session.userauth_authenticated()
    sock.close()


def test_keyboard_interactive_callback_sees_prompts(server):
    sock, session = connect(server, auth=False)
    seen = []

    def answer(name, instruction, prompts):
        seen.append(prompts)
        return [PASSWORD for _ in prompts]

    session.userauth_keyboardinteractive_callback(server.user, answer)
    assert session.userauth_authenticated()
    prompt = seen[0][0]
    assert isinstance(prompt, str) and prompt.startswith("Password")  # ssh2-python's type
    assert prompt.echo is False
    sock.close()


def test_keyboard_interactive_callback_error_propagates(server):
    sock, session = connect(server, auth=False)

    def broken(name, instruction, prompts):
        raise RuntimeError("no answers here")

    with pytest.raises(RuntimeError, match="no answers here"):
        session.userauth_keyboardinteractive_callback(server.user, broken)
    with pytest.raises(TypeError):
        session.userauth_keyboardinteractive_callback(server.user, "not callable")
    sock.close()


def test_agent_auth_with_real_ssh_agent(server, agent, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    sock, session = connect(server, auth=False)
    session.agent_auth(server.user)
    assert session.userauth_authenticated()
    sock.close()


def test_agent_identities_and_userauth(server, agent):
    sock, session = connect(server, auth=False)
    ag = session.agent_init()
    ag.set_identity_path(agent)
    assert ag.get_identity_path() == agent.encode()
    ag.connect()
    identities = ag.get_identities()
    assert len(identities) == 1
    assert identities[0].comment == b"id_rsa"
    assert identities[0].blob
    ag.userauth(server.user, identities[0])
    assert session.userauth_authenticated()
    ag.list_identities()
    with pytest.raises(exc.AgentError, match="stale"):
        ag.userauth(server.user, identities[0])
    ag.disconnect()
    sock.close()


def test_agent_without_running_agent_raises(server, tmp_path):
    sock, session = connect(server, auth=False)
    ag = session.agent_init()
    ag.set_identity_path(str(tmp_path / "no-agent.sock"))
    with pytest.raises(exc.AgentConnectionError):
        ag.connect()
    sock.close()


def test_second_authentication_raises_instead_of_hanging(session, server):
    with pytest.raises(exc.BadUseError, match="already authenticated"):
        session.userauth_password(server.user, PASSWORD)
    assert session.userauth_list(server.user) is None


def test_disconnect_then_calls_fail(server):
    sock, session = connect(server)
    assert session.disconnect() == 0
    with pytest.raises(exc.SSH2Error):
        session.open_session()
    sock.close()


def test_not_an_ssh_server_raises_banner_error():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    sock = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    peer.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    peer.close()
    session = Session()
    with pytest.raises(exc.SSH2Error) as info:
        session.handshake(sock)
    assert info.value.errno is not None
    sock.close()
    listener.close()


def test_silent_server_times_out():
    """A peer that accepts TCP and never speaks: blocking handshake honours set_timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    sock = socket.create_connection(listener.getsockname())
    session = Session()
    session.set_timeout(300)
    with pytest.raises((exc.Timeout, exc.SocketTimeout, exc.BannerRecvError)):
        session.handshake(sock)
    sock.close()
    listener.close()


def test_session_handshake_rejects_bad_arguments():
    session = Session()
    with pytest.raises(TypeError):
        session.handshake("not a socket")
    sock = socket.socket()
    sock.close()
    with pytest.raises(exc.BadSocketError):
        session.handshake(sock)


@pytest.mark.parametrize("no_query", [False, True])
def test_publickey_with_and_without_the_query_round_trip(server, tmp_path, no_query):
    from ssh2.session import LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, Session
    sock = socket.create_connection((server.address, server.port), timeout=10)
    session = Session()
    session.handshake(sock)
    if no_query:
        session.flag(LIBSSH2_FLAG_PUBLICKEY_NO_QUERY)
    local_port = sock.getsockname()[1]
    session.userauth_publickey_fromfile(server.user, server.keys.private())
    assert session.userauth_authenticated()
    ours = f"port {local_port} "
    text = server.wait_for_log(lambda text: any(
        "Accepted publickey" in line and ours in line for line in text.splitlines()))
    log = [line for line in text.splitlines() if ours in line]
    # sshd logs "Postponed publickey" when it answers a query with PK_OK.
    assert any("Postponed publickey" in line for line in log) is not no_query
    sock.close()


def test_no_query_still_rejects_an_unauthorised_key(server, tmp_path):
    import subprocess
    from ssh2.session import LIBSSH2_FLAG_PUBLICKEY_NO_QUERY
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sock, session = connect(server, auth=False)
    session.flag(LIBSSH2_FLAG_PUBLICKEY_NO_QUERY)
    with pytest.raises(exc.AuthenticationError):
        session.userauth_publickey_fromfile(server.user, str(key))
    session.userauth_publickey_fromfile(server.user, server.keys.private())
    assert session.userauth_authenticated()
    sock.close()


def test_early_userauth_logs_in_and_still_refuses_a_bad_password(server):
    from ssh2.session import LIBSSH2_FLAG_EARLY_USERAUTH, Session
    for password, ok in ((PASSWORD + "x", False), (PASSWORD, True)):
        sock = socket.create_connection((server.address, server.port), timeout=10)
        session = Session()
        session.flag(LIBSSH2_FLAG_EARLY_USERAUTH)
        session.handshake(sock)
        session.hostkey()  # the host key is there to check before any login
        if ok:
            session.userauth_password(server.user, password)
            assert run(session, "echo early")[1] == b"early\n"
        else:
            with pytest.raises(exc.AuthenticationError):
                session.userauth_password(server.user, password)
        sock.close()


@pytest.mark.parametrize("key", ["rsa", "ecdsa", "ed25519"])
def test_early_userauth_with_every_key_type(server, key):
    """RSA needs the server's sig algs (EXT_INFO), which come with the service accept."""
    from ssh2.session import LIBSSH2_FLAG_EARLY_USERAUTH, LIBSSH2_FLAG_PUBLICKEY_NO_QUERY, Session
    sock = socket.create_connection((server.address, server.port), timeout=10)
    session = Session()
    session.flag(LIBSSH2_FLAG_EARLY_USERAUTH)
    session.flag(LIBSSH2_FLAG_PUBLICKEY_NO_QUERY)
    session.handshake(sock)
    session.userauth_publickey_fromfile(server.user, server.keys.private(key))
    assert session.userauth_authenticated()
    sock.close()
