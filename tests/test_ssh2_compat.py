"""ssh2-python 1.2's API where ours used to differ, against a real sshd."""
import base64
import os
import socket

import pytest
from cryptography.hazmat.primitives.serialization import load_ssh_private_key

from conftest import connect, read_all
from ssh2 import exceptions as exc
from ssh2.agent import Agent
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN, LIBSSH2CHANNEL_EAGAIN
from ssh2.session import LIBSSH2_METHOD_CRYPT_CS, MethodType, Session
from ssh2.sftp import LIBSSH2_FXF_READ, LIBSSH2_SFTP_OPENFILE
from ssh2.sftp_handle import SFTPAttributes
from ssh2.statinfo import StatInfo
from ssh2.utils import ENCODING, find_eol


def test_agent_constructed_from_a_session(server, agent):
    sock, session = connect(server, auth=False)
    ag = Agent(session)
    ag.set_identity_path(agent)
    assert ag.get_identity_path() == agent.encode()
    ag.connect()
    assert [i.comment for i in ag.get_identities()] == [b"id_rsa"]
    assert ag.get_identities()[0].blob_len == len(ag.get_identities()[0].blob)
    ag.disconnect()
    sock.close()


def test_method_and_flag_types_behave_as_int_enums():
    from ssh2.session import LIBSSH2_FLAG_SIGPIPE, FlagType
    assert LIBSSH2_METHOD_CRYPT_CS == 2 and LIBSSH2_METHOD_CRYPT_CS.value == 2
    assert LIBSSH2_METHOD_CRYPT_CS.name == "CRYPT_CS"
    assert repr(LIBSSH2_METHOD_CRYPT_CS) == "<MethodType.CRYPT_CS: 2>"
    assert MethodType(2) is LIBSSH2_METHOD_CRYPT_CS and len(list(MethodType)) == len(MethodType)
    assert FlagType.SK_PRESENCE_REQUIRED is LIBSSH2_FLAG_SIGPIPE  # same value: an alias
    assert LIBSSH2_FLAG_SIGPIPE.name == "SIGPIPE"
    with pytest.raises(ValueError):
        MethodType(99)


def test_method_types_refuse_plain_numbers(session):
    assert isinstance(LIBSSH2_METHOD_CRYPT_CS, MethodType)
    assert session.methods(LIBSSH2_METHOD_CRYPT_CS)
    with pytest.raises(TypeError):
        session.method_pref(0, "fake")
    with pytest.raises(exc.MethodNotSupported):
        session.method_pref(LIBSSH2_METHOD_CRYPT_CS, "invalid algorithm")


def test_forward_listen_ex_defaults_and_tuple(session):
    listener, bound_port = session.forward_listen_ex(1)
    assert bound_port > 0 and listener.bound_port == bound_port


def test_wait_closed_after_a_close_that_beat_the_eof(session):
    # The close goes out before the command's EOF arrives; libssh2 refuses
    # wait_closed then, though its close already waited for the server's close.
    chan = session.open_session()
    chan.execute("sleep 0.2")
    assert chan.close() == 0
    assert chan.wait_closed() == 0


def test_handshake_refuses_what_is_not_a_socket(tmp_path):
    class NotASocket:
        def fileno(self):
            return "3"

    with open(tmp_path / "f", "w") as fh:
        with pytest.raises(TypeError, match="not a socket"):
            Session().handshake(fh.fileno())
    with pytest.raises(TypeError, match="fileno"):
        Session().handshake(NotASocket())


def test_userauth_publickey_with_a_signer(server):
    private = load_ssh_private_key(open(server.keys.private("ed25519"), "rb").read(), None)
    blob = base64.b64decode(open(server.keys.public("ed25519")).read().split()[1])
    sock, session = connect(server, auth=False)
    with pytest.raises(exc.BadUseError, match="signing"):
        session.userauth_publickey(server.user, blob)  # libssh2 would crash without a signer
    signed = []

    def sign(data):
        signed.append(data)
        return private.sign(data)

    assert session.userauth_publickey(server.user, blob, sign) == 0
    assert session.userauth_authenticated() and signed
    sock.close()


def test_signer_errors_propagate(server):
    blob = base64.b64decode(open(server.keys.public("ed25519")).read().split()[1])
    sock, session = connect(server, auth=False)

    def broken(data):
        raise RuntimeError("the HSM is unplugged")

    with pytest.raises(RuntimeError, match="unplugged"):
        session.userauth_publickey(server.user, blob, broken)
    assert not session.userauth_authenticated()
    sock.close()


def test_publickey_subsystem_refused_by_openssh(session):
    with pytest.raises(exc.PublicKeyInitError):
        session.publickey_init()
    assert list(run_echo(session)) == [b"still usable\n"]


def run_echo(session):
    chan = session.open_session()
    chan.execute("echo still usable")
    yield read_all(chan)
    chan.close()


def test_sftp_channel_open_ex_and_fstat_ex(session, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1234)
    sftp = session.sftp_init()
    assert sftp.get_channel() is not None
    name = str(path).encode()
    with sftp.open_ex(name + b"ignored", len(name), LIBSSH2_FXF_READ, 0,
                      LIBSSH2_SFTP_OPENFILE) as fh:
        attrs = SFTPAttributes()
        assert fh.fstat_ex(attrs, 0) == 0
        assert attrs.filesize == 1234
    del sftp  # the SFTP channel is its own: dropping both frees it once
    assert list(run_echo(session)) == [b"still usable\n"]


def test_scp_file_info_fields(session, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"y" * 10)
    chan, info = session.scp_recv2(str(path))
    assert isinstance(info, StatInfo)
    assert (info.st_size, info.st_mode & 0o777) == (10, os.stat(path).st_mode & 0o777)
    for field in ("st_ctime", "st_rdev", "st_blksize", "st_blocks"):
        assert isinstance(getattr(info, field), int)
    chan.close()


def test_x11_request_refused_cleanly(session):
    chan = session.open_session()
    with pytest.raises(exc.SSH2Error):
        chan.x11_req_ex(0, None, None, 0)  # the test sshd has X11Forwarding off


def test_exception_hierarchy_as_ssh2_python():
    # except SessionError catches these in ssh2-python; so it does here.
    for name in ("Timeout", "HostkeyInitError", "DecryptError", "SCPProtocolError",
                 "ZlibError", "SocketTimeout", "MethodNotSupported", "EncryptError"):
        assert issubclass(getattr(exc, name), exc.SessionError), name
    assert exc.error_for(-52).__class__ is exc.MacFailureError
    assert issubclass(exc.PublicKeyInitError, exc.PublicKeyError)


def test_utils_and_error_codes():
    assert ENCODING == "utf-8"
    assert LIBSSH2CHANNEL_EAGAIN == LIBSSH2_ERROR_EAGAIN
    data = b"one\ntwo\r\nthree"
    assert find_eol(data, 0) == (3, 1)
    assert find_eol(data, 4) == (3, 2)
    assert find_eol(data, 9) == (-1, 0)
    assert find_eol(b"a\x00b\n", 0) == (3, 1)  # NUL bytes are data, not the end
    with pytest.raises(ValueError):
        find_eol(data, 99)


def test_socket_type_check_accepts_real_sockets(server):
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    assert session.handshake(sock.fileno()) == 0
    sock.close()
