"""Non-blocking mode: EAGAIN and block_directions driving a select loop."""
import os
import select
import socket

from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import (LIBSSH2_SESSION_BLOCK_INBOUND, LIBSSH2_SESSION_BLOCK_OUTBOUND,
                          Session)
from ssh2.sftp import LIBSSH2_FXF_READ
from ssh2.utils import wait_socket


class Loop:
    """The canonical non-blocking pattern: retry on EAGAIN after select()."""

    def __init__(self, sock, session):
        self.sock, self.session, self.waits = sock, session, 0

    def wait(self):
        directions = self.session.block_directions()
        assert directions, "EAGAIN without a block direction"
        rlist = [self.sock] if directions & LIBSSH2_SESSION_BLOCK_INBOUND else []
        wlist = [self.sock] if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND else []
        ready = select.select(rlist, wlist, [], 10)
        assert ready != ([], [], []), "timed out waiting for the server"
        self.waits += 1

    def call(self, fn, *args):
        while True:
            result = fn(*args)
            if isinstance(result, int) and result == LIBSSH2_ERROR_EAGAIN:
                self.wait()
                continue
            if isinstance(result, tuple) and result[0] == LIBSSH2_ERROR_EAGAIN:
                self.wait()
                continue
            return result


def test_full_session_in_select_loop(server, tmp_path):
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    session.set_blocking(False)
    loop = Loop(sock, session)
    assert loop.call(session.handshake, sock) == 0
    assert loop.call(session.userauth_publickey_fromfile, server.user,
                     server.keys.private("rsa")) == 0
    assert session.userauth_authenticated()

    chan = loop.call(session.open_session)
    loop.call(chan.execute, "echo nonblocking; echo err >&2; exit 5")
    out = b""
    while True:
        size, data = loop.call(chan.read)
        if size == 0:
            break
        out += data
    assert out == b"nonblocking\n"
    assert loop.call(chan.read_stderr) == (4, b"err\n")
    loop.call(chan.close)
    loop.call(chan.wait_closed)
    assert chan.get_exit_status() == 5

    data = os.urandom(2_500_000)
    (tmp_path / "f").write_bytes(data)
    sftp = loop.call(session.sftp_init)
    fh = loop.call(sftp.open, str(tmp_path / "f"), LIBSSH2_FXF_READ, 0)
    attrs = loop.call(fh.fstat)
    assert attrs.filesize == len(data)
    got = b""
    while True:
        size, chunk = loop.call(fh.read)
        if size == 0:
            break
        got += chunk
    assert got == data
    loop.call(fh.close)
    entries = []
    dh = loop.call(sftp.opendir, str(tmp_path))
    # As in ssh2-python: an EAGAIN item means "wait"; iterating on continues the listing.
    for entry in dh.readdir():
        if entry[0] == LIBSSH2_ERROR_EAGAIN:
            loop.wait()
            continue
        entries.append(entry)
    assert sorted(name for _, name, _ in entries) == [b".", b"..", b"f"]
    assert loop.waits > 0
    sock.close()


def test_bulk_download_in_nonblocking_mode(server, tmp_path):
    sock = socket.create_connection((server.address, server.port))
    session = Session()
    session.handshake(sock)
    session.userauth_publickey_fromfile(server.user, server.keys.private())
    sftp = session.sftp_init()
    session.set_blocking(False)
    data = os.urandom(5_000_000)
    (tmp_path / "src").write_bytes(data)
    waits = []

    def wait():
        waits.append(1)
        wait_socket(sock, session, 10)

    assert sftp.download(str(tmp_path / "src"), tmp_path / "dst", wait=wait) == len(data)
    assert (tmp_path / "dst").read_bytes() == data
    assert sftp.upload(tmp_path / "src", str(tmp_path / "up"), wait=wait) == len(data)
    assert (tmp_path / "up").read_bytes() == data
    assert waits
    # Without a wait callable the bindings poll() the socket themselves.
    assert sftp.download(str(tmp_path / "src"), tmp_path / "dst2") == len(data)
    assert (tmp_path / "dst2").read_bytes() == data
    sock.close()
