"""Channel: commands, streams, pty, shell, forwarding and SCP against real sshd."""
import hashlib
import os
import shlex
import signal
import socket
import threading
import time

import pytest

from conftest import read_all, run
from processes import in_syscall
from waiting import eventually
from ssh2 import exceptions as exc
from ssh2.channel import Channel
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN


def test_execute_stdout_stderr_exit_status(session):
    status, out, err = run(session, "echo out; echo err >&2; exit 42")
    assert (status, out, err) == (42, b"out\n", b"err\n")


def test_read_returns_size_and_bytes(session):
    chan = session.open_session()
    chan.execute("printf abc")
    size, data = chan.read()
    assert (size, data) == (3, b"abc")
    assert chan.read() == (0, b"")
    assert chan.eof() is True
    chan.close()
    chan.wait_closed()
    assert chan.get_exit_status() == 0
    assert chan.get_exit_signal()[1] is None


def test_exit_signal(session):
    chan = session.open_session()
    chan.execute("kill -TERM $$")
    read_all(chan)
    chan.close()
    chan.wait_closed()
    rc, signal, errmsg, lang = chan.get_exit_signal()
    assert rc == 0
    assert signal == b"TERM"


def test_signal_request_reaches_server(session, server):
    """OpenSSH never answers "signal" requests, and refuses them for root
    sessions without privilege separation: check the server received it."""
    chan = session.open_session()
    chan.execute("exec sleep 1")
    assert chan.signal("TERM") == 0
    read_all(chan)
    chan.close()
    chan.wait_closed()
    assert "session_signal_req" in server.read_log() or chan.get_exit_signal()[1] == b"TERM"


def test_pty(session):
    chan = session.open_session()
    chan.pty("xterm", 100, 30)
    chan.execute("tty; stty size")
    out = read_all(chan)
    chan.close()
    chan.wait_closed()
    assert b"/dev/pts/" in out
    assert b"30 100" in out


def test_setenv_accepted_variable(session):
    chan = session.open_session()
    chan.setenv("TEST_VAR", "hello world")
    chan.execute('echo "$TEST_VAR"')
    assert read_all(chan) == b"hello world\n"
    chan.close()


def test_setenv_refused_variable_raises(session):
    chan = session.open_session()
    with pytest.raises(exc.ChannelError):
        chan.setenv("NOT_ACCEPTED", "x")


def test_shell_with_stdin(session):
    chan = session.open_session()
    chan.shell()
    chan.write(b"echo from-shell\nexit 7\n")
    out = read_all(chan)
    chan.close()
    chan.wait_closed()
    assert b"from-shell" in out
    assert chan.get_exit_status() == 7


def test_stdin_then_eof(session):
    payload = os.urandom(1 << 20)
    status, out, _ = run(session, "cat", stdin=payload)
    assert status == 0
    assert out == payload


def test_write_accepts_str_and_reports_bytes_written(session):
    chan = session.open_session()
    chan.execute("cat")
    rc, written = chan.write("héllo")
    assert written == len("héllo".encode())
    chan.send_eof()
    assert read_all(chan) == "héllo".encode()
    chan.close()


def test_large_output_read_fully_and_byte_exact(session, tmp_path):
    path = tmp_path / "big"
    block = os.urandom(1 << 20)
    with open(path, "wb") as fh:
        for i in range(50):
            fh.write(hashlib.sha256(bytes([i])).digest() + block[32:])
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    chan = session.open_session()
    chan.execute(f"cat {shlex.quote(str(path))}")
    digest = hashlib.sha256()
    total = 0
    while True:
        size, data = chan.read()
        if size == 0:
            break
        digest.update(data)
        total += size
    chan.close()
    chan.wait_closed()
    assert total == 50 << 20
    assert digest.hexdigest() == expected
    assert chan.get_exit_status() == 0


def test_stderr_merge_and_flush(session):
    from ssh2.channel import LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE
    chan = session.open_session()
    chan.handle_extended_data2(LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE)
    chan.execute("echo a; echo b >&2")
    out = read_all(chan)
    assert sorted(out.split()) == [b"a", b"b"]
    assert chan.flush() >= 0
    chan.close()


def test_window_helpers(session):
    chan = session.open_session()
    chan.execute("cat")
    window = chan.window_read_ex(0, 0)  # ssh2-python's form: the window alone
    assert window > 0 and chan.window_read() == window
    wwindow = chan.window_write_ex(0)
    assert wwindow > 0 and chan.window_write() == wwindow
    assert chan.receive_window_adjust(1 << 20, True) >= window
    chan.send_eof()
    read_all(chan)
    chan.close()


def test_request_auth_agent_sets_remote_agent_socket(session):
    chan = session.open_session()
    chan.request_auth_agent()
    chan.execute('echo "$SSH_AUTH_SOCK"')
    assert read_all(chan).strip().startswith(b"/")
    chan.close()


def test_channel_cannot_be_built_directly():
    with pytest.raises(TypeError):
        Channel()


def test_direct_tcpip_to_local_echo_server(session, echo_port):
    chan = session.direct_tcpip("127.0.0.1", echo_port)
    payload = os.urandom(300_000)
    chan.write(payload)
    received = b""
    while len(received) < len(payload):
        size, data = chan.read()
        assert size > 0
        received += data
    assert received == payload
    chan.send_eof()
    chan.close()


def test_direct_tcpip_ex_to_closed_port_raises(session):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(exc.ChannelFailure) as info:
        session.direct_tcpip_ex("127.0.0.1", port, "127.0.0.1", 12345)
    assert str(port) in str(info.value)


def test_forward_listen_and_accept(session):
    listener, _ = session.forward_listen_ex(16, "127.0.0.1", 0)
    assert listener.bound_port > 0
    replies = []

    def client():
        with socket.create_connection(("127.0.0.1", listener.bound_port), timeout=10) as s:
            s.sendall(b"hello via server")
            replies.append(s.recv(100))

    thread = threading.Thread(target=client)
    thread.start()
    chan = listener.forward_accept()
    size, data = chan.read()
    assert data == b"hello via server"
    chan.write(b"reply")
    thread.join(10)
    assert replies == [b"reply"]
    chan.close()
    assert listener.forward_cancel() == 0


def test_scp_send_and_recv(session, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    target = tmp_path / "scp-upload"
    now = int(time.time())
    chan = session.scp_send64(str(target), 0o640, len(data), now - 100, now - 50)
    for i in range(0, len(data), 1 << 20):
        rc, written = chan.write(data[i:i + (1 << 20)])
        assert written == len(data[i:i + (1 << 20)])
    chan.send_eof()
    chan.wait_eof()
    chan.close()
    chan.wait_closed()
    assert target.read_bytes() == data
    assert (target.stat().st_mode & 0o777) == 0o640

    chan, info = session.scp_recv2(str(target))
    assert info.st_size == len(data)
    assert info.st_mode & 0o777 == 0o640
    received = bytearray()
    while len(received) < info.st_size:
        size, chunk = chan.read(min(1 << 20, info.st_size - len(received)))
        assert size > 0
        received += chunk
    assert bytes(received) == data
    chan.close()


def test_scp_recv_missing_file_raises(session, tmp_path):
    with pytest.raises(exc.SCPProtocolError) as info:
        session.scp_recv2(str(tmp_path / "missing"))
    assert "missing" in str(info.value)


def test_nonblocking_read_returns_eagain(server):
    from conftest import connect
    sock, session = connect(server)
    chan = session.open_session()
    chan.execute("sleep 1; echo late")
    session.set_blocking(False)
    assert chan.read() == (LIBSSH2_ERROR_EAGAIN, b"")
    session.set_blocking(True)
    assert read_all(chan) == b"late\n"
    sock.close()


def test_direct_streamlocal_to_unix_socket(session, tmp_path):
    path = str(tmp_path / "echo.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(conn.recv(100).upper())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    chan = session.direct_streamlocal_ex(path, "127.0.0.1", 0)
    chan.write(b"over a unix socket")
    assert chan.read()[1] == b"OVER A UNIX SOCKET"
    thread.join(10)
    chan.close()
    listener.close()


def test_agent_channels_the_server_opens_are_queued(server, agent):
    """Relay one agent request by hand: the remote ssh-add lists the local agent's key."""
    import select
    import struct
    from conftest import connect
    sock, session = connect(server)
    session.accept_agent_forwarding()
    chan = session.open_session()
    chan.request_auth_agent()
    chan.execute("ssh-add -l")
    session.set_blocking(False)
    deadline = time.monotonic() + 10
    agent_chan = session.accept_agent_channel()
    while agent_chan is None:
        assert time.monotonic() < deadline, "the server never opened an agent channel"
        select.select([sock], [], [], 0.1)
        chan.read()  # any call on the session reads the channel open
        agent_chan = session.accept_agent_channel()
    assert session.accept_agent_channel() is None
    session.set_blocking(True)

    def message(recv) -> bytes:
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            data += recv()
        return data

    local = socket.socket(socket.AF_UNIX)
    local.connect(agent)
    local.sendall(message(lambda: agent_chan.read()[1]))
    agent_chan.write(message(lambda: local.recv(65536)))
    assert b"(RSA)" in read_all(chan)
    local.close()
    sock.close()


def test_a_signal_handlers_exception_comes_out_of_the_blocking_call_it_interrupted(session):
    # Python runs a pending signal handler at the first Python code it executes; the
    # exception of a failed call is built in Python, so the handler's exception replaces
    # it and comes out of the call itself (ssh2-python: just after the call, in the
    # caller). scrapli's timeout_ops relies on such a handler: see docs/migrating.md.
    class Alarm(Exception):
        pass

    def handler(signum, frame):
        raise Alarm()

    chan = session.open_session()
    chan.execute("sleep 5")
    session.set_timeout(30_000)        # only the signal (or the end of sleep) ends the wait
    previous = signal.signal(signal.SIGUSR1, handler)
    reader = threading.get_native_id()

    def interrupt():
        # Once the read waits on the socket (the kernel says so): a signal sent earlier
        # would interrupt Python code, not the call.
        eventually(lambda: (in_syscall(reader) or (None,))[0] in ("poll", "ppoll", "select",
                                                                  "pselect6"),
                   what="the read waiting on the socket")
        os.kill(os.getpid(), signal.SIGUSR1)
    timer = threading.Thread(target=interrupt)
    timer.start()
    try:
        with pytest.raises(Alarm):
            chan.read()
    finally:
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
