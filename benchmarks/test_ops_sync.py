"""Per-operation costs, synchronous APIs: ours and the peers side by side (pytest-benchmark).

    pytest benchmarks/test_ops_sync.py --benchmark-json=benchmarks/results/ops_sync.json

One group per operation, so that pytest-benchmark's table puts the libraries of one operation
side by side (each round is one operation; its set-up, such as closing the last round's
connection, is not timed):

====================  ==========================================================================
connect+handshake     TCP connect and SSH handshake (key exchange, host key signature checked)
auth                  public key authentication (ed25519 key file) on a handshaken connection
login                 the two together, as each library's own connect call does them
channel open          a session channel on a logged-in connection
exec true             channel, exec of ``true``, output to EOF, exit status
sftp read 1 MiB       open, read 1 MiB, close (the SFTP session started beforehand, untimed)
scp recv 1 MiB        an SCP download of the same file
... 4 threads         exec true / sftp read 1 MiB in 4 threads at once, each on a connection
                      of its own: one round is the wall time until all 4 are done. 4 threads
                      take about as long as one only where the library lets go of the GIL
                      while it waits (the server shares this machine's cores, so not less).
====================  ==========================================================================

Libraries: ``ours-ssh2`` (our ``ssh2`` bindings, blocking mode), ``ours-SSHClient``
(``pssh.clients.SSHClient``, which checks host keys against a known_hosts file: strict),
paramiko, hussh (sync ``Connection``); where a library has no such step of its own (hussh
connects and authenticates in one call; paramiko has no SCP) there is no figure. Under
ssh2-python's virtualenv the same ``ssh2`` code runs as ``ssh2-python``; see
docs/benchmarks.md for how.
"""
from __future__ import annotations

import importlib.util
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

CHUNK = 2 * 1024 * 1024
THREADS = 4


def _ssh2_label() -> str:
    if importlib.util.find_spec("ssh2") is None:
        return "ssh2"
    import ssh2.session
    return "ours-ssh2" if hasattr(ssh2.session, "PATCHED_LIBSSH2") else "ssh2-python"


SSH2 = _ssh2_label()
LIBRARIES = [SSH2, "ours-SSHClient", "paramiko", "hussh"]


def _connect(t):
    sock = socket.create_connection((t.host, t.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class SSH2API:
    """The ``ssh2`` API, blocking: ours, or ssh2-python where that is the ``ssh2`` module."""

    def __init__(self, t) -> None:
        pytest.importorskip("ssh2")
        from ssh2.session import Session
        from ssh2.sftp import LIBSSH2_FXF_READ
        self.t, self.Session, self.READ = t, Session, LIBSSH2_FXF_READ

    def handshake(self):
        sock = _connect(self.t)
        session = self.Session()
        session.handshake(sock)
        return sock, session

    def auth(self, conn) -> None:
        conn[1].userauth_publickey_fromfile(self.t.user, self.t.key)

    def login(self):
        conn = self.handshake()
        self.auth(conn)
        return conn

    def close(self, conn) -> None:
        sock, session = conn
        session.disconnect()
        sock.close()

    def channel_open(self, conn):
        return conn[1].open_session()

    def close_channel(self, channel) -> None:
        channel.close()
        channel.wait_closed()

    def exec_true(self, conn) -> None:
        channel = conn[1].open_session()
        channel.execute("true")
        while channel.read()[0] > 0:
            pass
        self.close_channel(channel)
        assert channel.get_exit_status() == 0

    def sftp_start(self, conn):
        return conn[1].sftp_init()

    def sftp_read(self, conn, sftp) -> None:
        handle = sftp.open(self.t.path, self.READ, 0)
        got = 0
        if hasattr(handle, "read_into"):    # ours: one kept buffer
            buf = bytearray(CHUNK)
            while (size := handle.read_into(buf)) > 0:
                got += size
        else:
            while (size := handle.read(CHUNK)[0]) > 0:
                got += size
        handle.close()
        assert got == self.t.size

    def scp_recv(self, conn) -> None:
        channel, info = conn[1].scp_recv2(self.t.path)
        left = info.st_size
        while left > 0:
            size, _ = channel.read(min(CHUNK, left))
            assert size > 0
            left -= size
        # The end of an SCP download: the source's status byte, our acknowledgement, then
        # the remote scp's exit and the channel's end (libssh2 waits for a close only after
        # the server's EOF).
        assert channel.read(1) == (1, b"\0")
        channel.write(b"\0")
        channel.send_eof()
        channel.wait_eof()
        self.close_channel(channel)


class ToLocalFile:
    """A client that copies a remote file to a local one (SFTP and SCP), with no SFTP handle
    of its own to start: ``sftp_get`` and ``scp_get`` name its methods."""

    sftp_get = scp_get = ""

    def sftp_start(self, conn):
        return None

    def sftp_read(self, conn, _) -> None:
        getattr(conn, self.sftp_get)(self.t.path, self.t.local)

    def scp_recv(self, conn) -> None:
        getattr(conn, self.scp_get)(self.t.path, self.t.local)


class OursSSHClient(ToLocalFile):
    """``pssh.clients.SSHClient``: logs in on creation, host keys checked (strict)."""

    sftp_get, scp_get = "copy_remote_file", "scp_recv"

    def __init__(self, t) -> None:
        pytest.importorskip("pssh.clients")
        from pssh.clients import SSHClient
        self.t, self.SSHClient = t, SSHClient

    def login(self):
        return self.SSHClient(self.t.host, user=self.t.user, port=self.t.port, pkey=self.t.key,
                              allow_agent=False, identity_auth=False, num_retries=1,
                              known_hosts=self.t.known_hosts, host_key_policy="strict")

    def close(self, conn) -> None:
        conn.close()

    def exec_true(self, conn) -> None:
        output = conn.run_command("true")
        conn.wait_finished(output)
        assert output.exit_code == 0


class Paramiko:
    """paramiko: a ``Transport`` for the separate steps, ``SSHClient.connect`` for login."""

    def __init__(self, t) -> None:
        self.paramiko = pytest.importorskip("paramiko")
        self.t = t

    def handshake(self):
        transport = self.paramiko.Transport(_connect(self.t))
        transport.start_client()
        return transport

    def auth(self, transport) -> None:
        key = self.paramiko.Ed25519Key.from_private_key_file(self.t.key)
        transport.auth_publickey(self.t.user, key)

    def login(self):
        client = self.paramiko.SSHClient()
        client.set_missing_host_key_policy(self.paramiko.AutoAddPolicy())
        client.connect(self.t.host, self.t.port, self.t.user, key_filename=self.t.key,
                       look_for_keys=False, allow_agent=False)
        return client

    def close(self, conn) -> None:
        conn.close()

    def _transport(self, conn):
        return conn.get_transport() if hasattr(conn, "get_transport") else conn

    def channel_open(self, conn):
        return self._transport(conn).open_session()

    def close_channel(self, channel) -> None:
        channel.close()

    def exec_true(self, conn) -> None:
        channel = self._transport(conn).open_session()
        channel.exec_command("true")
        while channel.recv(CHUNK):
            pass
        assert channel.recv_exit_status() == 0
        channel.close()

    def sftp_start(self, conn):
        return conn.open_sftp()

    def sftp_read(self, conn, sftp) -> None:
        with sftp.open(self.t.path, "rb") as handle:
            handle.prefetch()
            assert len(handle.read()) == self.t.size


class Hussh(ToLocalFile):
    """hussh's sync ``Connection`` (connects and authenticates in its constructor)."""

    sftp_get, scp_get = "sftp_read", "scp_read"

    def __init__(self, t) -> None:
        self.hussh = pytest.importorskip("hussh")
        self.t = t

    def login(self):
        return self.hussh.Connection(self.t.host, port=self.t.port, username=self.t.user,
                                     private_key=self.t.key)

    def close(self, conn) -> None:
        conn.close()

    def exec_true(self, conn) -> None:
        assert conn.execute("true").status == 0


DRIVERS = {SSH2: SSH2API, "ours-SSHClient": OursSSHClient, "paramiko": Paramiko,
           "hussh": Hussh}


@pytest.fixture(params=LIBRARIES)
def lib(request, target):
    return DRIVERS[request.param](target)


def step(lib, name: str):
    """The library's method for this step, or a skip: it has no such step of its own."""
    method = getattr(lib, name, None)
    if method is None:
        pytest.skip(f"{type(lib).__name__}: no separate {name.replace('_', ' ')}")
    return method


class Opened:
    """What the rounds opened, closed between rounds (untimed) and at the end."""

    def __init__(self, close) -> None:
        self.items, self._close = [], close

    def close_all(self) -> None:
        while self.items:
            self._close(self.items.pop())


@pytest.fixture
def logged_in(lib):
    conn = step(lib, "login")()
    yield conn
    lib.close(conn)


def test_connect_handshake(lib, measure):
    handshake = step(lib, "handshake")
    opened = Opened(lib.close)
    measure("connect+handshake", lambda: opened.items.append(handshake()), opened.close_all)
    opened.close_all()


def test_auth(lib, measure):
    handshake, auth = step(lib, "handshake"), step(lib, "auth")
    opened = Opened(lib.close)

    def setup():
        opened.close_all()
        opened.items.append(handshake())
    measure("auth", lambda: auth(opened.items[-1]), setup)
    opened.close_all()


def test_login(lib, measure):
    login = step(lib, "login")
    opened = Opened(lib.close)
    measure("login", lambda: opened.items.append(login()), opened.close_all)
    opened.close_all()


def test_channel_open(lib, logged_in, measure):
    channel_open = step(lib, "channel_open")
    opened = Opened(lib.close_channel)
    measure("channel open", lambda: opened.items.append(channel_open(logged_in)),
            opened.close_all)
    opened.close_all()


def test_exec_true(lib, logged_in, measure):
    measure("exec true", lambda: lib.exec_true(logged_in))


def test_sftp_read(lib, logged_in, measure):
    read = step(lib, "sftp_read")
    sftp = lib.sftp_start(logged_in)
    measure("sftp read 1 MiB", lambda: read(logged_in, sftp))


def test_scp_recv(lib, logged_in, measure):
    recv = step(lib, "scp_recv")
    measure("scp recv 1 MiB", lambda: recv(logged_in))


@pytest.fixture
def connections(lib):
    if isinstance(lib, OursSSHClient):
        pytest.skip("SSHClient runs on gevent's hub: its concurrency is greenlets, not threads")
    conns = [lib.login() for _ in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        yield conns, pool
    for conn in conns:
        lib.close(conn)


def test_exec_true_threads(lib, connections, measure):
    conns, pool = connections
    measure(f"exec true, {THREADS} threads", lambda: list(pool.map(lib.exec_true, conns)))


def test_sftp_read_threads(lib, connections, measure):
    conns, pool = connections
    sftps = [lib.sftp_start(conn) for conn in conns]
    measure(f"sftp read 1 MiB, {THREADS} threads",
            lambda: list(pool.map(lib.sftp_read, conns, sftps)))
