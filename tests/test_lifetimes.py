"""Object lifetimes, misuse and memory: never a crash, never a write to a reused fd."""
import fcntl
import gc
import os
import socket

import pytest
from gevent import socket as gsocket

from conftest import connect, read_all, run
from loopback import address
from ssh2 import exceptions as exc
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import LIBSSH2_METHOD_KEX, Session
from ssh2.sftp import LIBSSH2_FXF_READ


def rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def test_children_keep_session_alive(server):
    sock, session = connect(server)
    chan = session.open_session()
    sftp = session.sftp_init()
    handle = sftp.opendir("/")
    del session, sftp
    gc.collect()
    chan.execute("echo still here")
    assert read_all(chan) == b"still here\n"
    assert any(name == b"etc" for _, name, _ in handle.readdir())
    assert chan.session.userauth_authenticated()
    assert handle.sftp.session is chan.session
    sock.close()


@pytest.mark.parametrize("order", ["session-first", "children-first", "handle-first"])
def test_drop_objects_in_any_order(server, order):
    sock, session = connect(server)
    chan = session.open_session()
    sftp = session.sftp_init()
    handle = sftp.open("/etc/hostname", LIBSSH2_FXF_READ, 0)
    listener, _ = session.forward_listen_ex(16, "127.0.0.1", 0)
    objects = {"session": session, "chan": chan, "sftp": sftp, "handle": handle,
               "listener": listener}
    del session, chan, sftp, handle, listener
    names = {"session-first": ["session", "sftp", "chan", "listener", "handle"],
             "children-first": ["handle", "listener", "chan", "sftp", "session"],
             "handle-first": ["handle", "session", "chan", "listener", "sftp"]}[order]
    for name in names:
        del objects[name]
        gc.collect()
    sock.close()


def test_use_after_close_raises(server):
    sock, session = connect(server)
    sftp = session.sftp_init()
    handle = sftp.open("/etc/hostname", LIBSSH2_FXF_READ, 0)
    handle.close()
    for call in (handle.read, handle.fstat, handle.close, lambda: handle.write(b"x")):
        with pytest.raises(exc.SFTPHandleError):
            call()
    listener, _ = session.forward_listen_ex(16, "127.0.0.1", 0)
    listener.forward_cancel()
    with pytest.raises(exc.ChannelError):
        listener.forward_accept()
    chan = session.open_session()
    chan.execute("true")
    read_all(chan)
    chan.close()
    chan.wait_closed()
    assert chan.close() == 0  # closing twice is harmless
    sock.close()


def test_closed_socket_raises_and_frees_without_touching_reused_fd(server):
    sock, session = connect(server)
    chan = session.open_session()
    sftp = session.sftp_init()
    fd = sock.fileno()
    sock.close()
    # The kernel hands the lowest free fd to the next socket: the old number.
    a, b = socket.socketpair()
    reused = a if a.fileno() == fd else b if b.fileno() == fd else None
    other = b if reused is a else a
    flags_before = fcntl.fcntl(reused.fileno(), fcntl.F_GETFL) if reused else None
    # As with any closed socket, sending fails (ssh2-python's SocketSendError),
    # and the message says why.
    with pytest.raises(exc.SocketSendError, match="socket this session was using has been closed"):
        chan.execute("echo nope")
    with pytest.raises(exc.SocketSendError, match="closed"):
        session.open_session()
    with pytest.raises((exc.SocketSendError, exc.SocketRecvError), match="closed"):
        sftp.stat("/")
    del chan, sftp, session
    gc.collect()
    if reused is not None:
        other.setblocking(False)
        with pytest.raises(BlockingIOError):
            other.recv(100)  # nothing was written into the reused fd
        assert fcntl.fcntl(reused.fileno(), fcntl.F_GETFL) == flags_before
    a.close()
    b.close()


def test_session_free_restores_blocking_socket(server):
    sock = socket.create_connection((server.address, server.port))  # OS-level blocking
    assert not fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
    session = Session()
    session.handshake(sock)
    assert fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
    del session
    gc.collect()
    assert not fcntl.fcntl(sock.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK
    sock.close()


def test_cycle_collection_never_calls_into_a_half_cleared_socket(server):
    # The collector may clear a socket's slots before the session and channel
    # in the same cycle are freed. Asking a cleared gevent socket for its
    # fileno() recursed in its __getattr__ until CPython aborted ("Cannot
    # recover from stack overflow"), seen once in the 210-host test.
    touched = []

    class TrackedSocket(gsocket.socket):
        def __getattr__(self, name):  # reached only for slots already cleared
            touched.append(name)
            raise AttributeError(name)

    for blocking in (True, False):
        sock = TrackedSocket()
        sock.connect((server.address, server.port))
        os.set_blocking(sock.fileno(), blocking)  # a blocking fd is restored on free
        session = Session()
        session.handshake(sock)
        session.userauth_publickey_fromfile(server.user, server.keys.private())
        chan = session.open_session()
        sock.cycle = (session, chan)  # now reachable only through each other
        del sock, session, chan
        gc.collect()
    assert touched == []


def test_nonblocking_dealloc_of_open_channel_is_deferred_then_completed(server):
    sock, session = connect(server)
    session.set_blocking(False)
    for _ in range(5):
        while (chan := session.open_session()) == LIBSSH2_ERROR_EAGAIN:
            pass
        while chan.execute("sleep 0.2") == LIBSSH2_ERROR_EAGAIN:
            pass
        del chan  # not closed: freeing needs a round trip, which must not block
    session.set_blocking(True)
    assert run(session, "echo after")[1] == b"after\n"
    sock.close()


def test_calls_before_handshake_raise_not_crash():
    session = Session()
    with pytest.raises(exc.SSH2Error):
        session.open_session()
    with pytest.raises(exc.SSH2Error):
        session.userauth_password("user", "pw")
    with pytest.raises(exc.SSH2Error):
        session.sftp_init()
    with pytest.raises(exc.SessionHostKeyError):
        session.hostkey()
    assert session.hostkey_hash(2) is None
    assert session.methods(LIBSSH2_METHOD_KEX) is None
    with pytest.raises(TypeError):  # a plain number, as ssh2-python refuses it
        session.methods(0)


def test_wrong_argument_types_raise(session):
    with pytest.raises(TypeError):
        session.userauth_list(None)
    chan = session.open_session()
    with pytest.raises(TypeError):
        chan.write(12345)
    with pytest.raises(TypeError):
        chan.execute(None)
    with pytest.raises(ValueError):
        chan.read(0)
    sftp = session.sftp_init()
    with pytest.raises(TypeError):
        sftp.open(None, LIBSSH2_FXF_READ, 0)
    with pytest.raises(TypeError):
        sftp.setstat("/", None)
    with pytest.raises(TypeError):
        session.knownhost_init().delete(None)


def test_open_close_loop_memory_is_flat(session):
    def cycle(count):
        for _ in range(count):
            chan = session.open_session()
            chan.close()
            chan.wait_closed()
            del chan

    cycle(1000)
    gc.collect()
    before = rss_kib()
    cycle(10_000)
    gc.collect()
    assert rss_kib() - before < 4096, "RSS grew by more than 4 MiB over 10,000 channels"


def test_sftp_handle_loop_and_session_loop_memory_is_flat(server, session, tmp_path):
    sftp = session.sftp_init()
    path = str(tmp_path / "f")
    open(path, "wb").close()

    def cycle(count):
        for _ in range(count):
            with sftp.open(path, LIBSSH2_FXF_READ, 0) as fh:
                fh.read()
            Session()

    cycle(1000)
    gc.collect()
    before = rss_kib()
    cycle(10_000)
    gc.collect()
    assert rss_kib() - before < 4096


def test_connect_disconnect_loop_memory_is_flat(server):
    def cycle(count):
        for _ in range(count):
            sock, session = connect(server)
            session.disconnect()
            del session
            sock.close()

    cycle(30)
    gc.collect()
    before = rss_kib()
    cycle(200)
    gc.collect()
    assert rss_kib() - before < 4096


def test_failed_close_then_finalise_does_not_double_free():
    """libssh2 frees handles even when closing fails; the finaliser must not free again."""
    from pssh.sshd import OpenSSHServer
    with OpenSSHServer(address()) as server:
        sock, session = connect(server)
        sftp = session.sftp_init()
        handle = sftp.open("/etc/hostname", LIBSSH2_FXF_READ, 0)
        listener, _ = session.forward_listen_ex(16, "127.0.0.1", 0)
        server.kill()
        with pytest.raises(exc.SSH2Error):
            handle.close()
        assert handle.closed
        try:  # needs no reply: the send may still succeed on a freshly dead peer
            listener.forward_cancel()
        except exc.SSH2Error:
            pass
        with pytest.raises(exc.ChannelError):
            listener.forward_accept()
        del handle, listener, sftp, session
        gc.collect()
        sock.close()
