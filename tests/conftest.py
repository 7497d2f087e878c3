"""Fixtures: real OpenSSH servers on loopback and sessions connected to them."""
from __future__ import annotations

import gc
import os
import socket
import sys
import subprocess
import threading
import time

import pytest

from extras import imported, require
from loopback import addresses
from pssh.sshd import PASSPHRASE, ServerGroup
from ssh2.session import Session
from processes import cmdline, descendants, tcp_peers
from waiting import eventually, gone

PASSWORD = "s3cret pw"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs(*modules): optional modules the test needs (tests/extras.py): "
        "missing, it fails at once, naming the install command")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        require(*mark.args)


#: How long a test's processes may take to end after it (sshd's session processes end
#: some moments after their client closed): only a process that stays pays it all.
LEFT_BEHIND_GRACE = 15.0
#: The modules checked for processes left behind: those whose tests were made to clean
#: up. A module joins once its leaks are fixed (run it with
#: ``PSSH_TESTS_CHECK_EVERY_MODULE=1``: each leak fails its test, naming the processes).
#: Not yet: modules whose tests restart a fixture's server themselves (an sshd crashed
#: on purpose, influxd stopped mid-run), which this would count, modules that start no
#: process (parsing, layout, import order), and the slow end-to-end ones (docs, examples,
#: benchmarks, third-party programs) not yet run with it.
LEFT_BEHIND_CHECKED = {
    "test_aio", "test_aio_callbacks", "test_aio_exceptions", "test_channel", "test_cli",
    "test_cli_modes", "test_cli_signals", "test_cli_views", "test_core", "test_exceptions",
    "test_exit_status", "test_fanout", "test_front_ends", "test_host_errors_keys",
    "test_host_errors_transfers", "test_host_key_credentials", "test_hostile_names",
    "test_hostile_output", "test_hostile_transfers", "test_knownhost", "test_lifetimes",
    "test_nonblocking", "test_poll_buckets", "test_poll_cli", "test_poll_virtual",
    "test_pssh_agent_forwarding", "test_pssh_cancel", "test_pssh_certificates",
    "test_pssh_compat", "test_pssh_deadlines",
    "test_pssh_host_certificates", "test_pssh_jump", "test_pssh_keepalive",
    "test_pssh_keys", "test_pssh_known_hosts", "test_pssh_parallel", "test_pssh_sharded",
    "test_pssh_transfer", "test_remote_symlinks", "test_session", "test_sftp",
    "test_ssh2_compat",
    "test_stop_truth", "test_threads", "test_virtual_clock",
}


def _client_of(pid: int, command: str) -> str:
    """For an sshd session left behind: who holds its connection open (this test
    process: a client of the test's not closed)."""
    if not command.startswith("sshd:"):
        return ""
    peers = tcp_peers(pid)
    who = ["this test process" if p == os.getpid() else f"pid {p} ({cmdline(p)[:60]!r})"
           for p in peers]
    return f" (connected to {', '.join(who) or 'nothing here'})"


@pytest.fixture(autouse=True)
def no_process_left_behind(request):
    """Fails a test that leaves a process of its own behind: a process below this one
    that was not there when the test began (after the module's and session's fixtures
    started their servers) and is still there when it has ended. A client or server not
    closed on some path is found here, not by the tests after it."""
    if (request.module.__name__ not in LEFT_BEHIND_CHECKED
            and not os.environ.get("PSSH_TESTS_CHECK_EVERY_MODULE")):
        yield
        return
    before = set(descendants(os.getpid()))
    yield
    # A client the test dropped closes its connections when collected (many tests leave
    # that to the collector), and gevent's hub may still have work the test did not wait
    # for (a finished host greenlet's link notification holds its client; a forwarded
    # agent's relay has yet to see the agent's EOF): the hub runs between the looks, and
    # each look collects first.
    pause = sys.modules["gevent"].sleep if "gevent" in sys.modules else time.sleep

    def new() -> list:
        gc.collect()
        return [f"{pid}: {command}{_client_of(pid, command)}" for (pid, start), command in
                descendants(os.getpid()).items() if (pid, start) not in before]
    left = gone(new, LEFT_BEHIND_GRACE, "the test's processes ended", pause=pause)
    if left:
        pytest.fail(f"{request.node.nodeid} left {len(left)} process(es) behind: "
                    + "; ".join(left), pytrace=False)


@pytest.fixture(scope="session")
def servers():
    """Two sshd hosts (on addresses of their own) accepting keys and a password."""
    with ServerGroup(addresses=addresses(2), password=PASSWORD) as group:
        yield group


@pytest.fixture(scope="session")
def server(servers):
    return servers.servers[0]


def connect(server, *, blocking: bool = True, auth: bool = True, key: str = "ed25519"):
    """A TCP connection and a handshaken (and authenticated) Session."""
    sock = socket.create_connection((server.address, server.port), timeout=10)
    session = Session()
    session.set_timeout(30_000)
    session.handshake(sock)
    if auth:
        session.userauth_publickey_fromfile(server.user, server.keys.private(key))
    session.set_blocking(blocking)
    return sock, session


@pytest.fixture
def conn(server):
    sock, session = connect(server)
    yield sock, session
    del session
    sock.close()


@pytest.fixture
def session(conn):
    return conn[1]


@pytest.fixture
def tmp_remote(tmp_path):
    """A folder the servers see (they run on this machine)."""
    return tmp_path


def run(session, command, *, stdin: bytes | None = None):
    """Run a command to completion: (exit status, stdout, stderr)."""
    chan = session.open_session()
    chan.execute(command)
    if stdin is not None:
        chan.write(stdin)
        chan.send_eof()
    out, err = read_all(chan), read_all(chan, stderr=True)
    # The server's close first: sshd sends the exit status when it has reaped the command,
    # which can be after the output's EOF, and drops it if our close got there first.
    chan.wait_closed()
    chan.close()
    return chan.get_exit_status(), out, err


def read_all(chan, stderr: bool = False) -> bytes:
    chunks = []
    read = chan.read_stderr if stderr else chan.read
    while True:
        size, data = read()
        if size <= 0:
            return b"".join(chunks)
        chunks.append(data)


@pytest.fixture
def agent(server, tmp_path):
    """A real ssh-agent holding the servers' rsa client key."""
    path = str(tmp_path / "agent.sock")
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        eventually(lambda: os.path.exists(path), what=f"ssh-agent's socket {path}")
        env = dict(os.environ, SSH_AUTH_SOCK=path)
        subprocess.run(["ssh-add", server.keys.private("rsa")], env=env, check=True,
                       capture_output=True)
        yield path
    finally:
        proc.terminate()
        proc.wait()


def trusting(path, *servers) -> str:
    """``path`` as a known_hosts file that holds the host keys of ``servers`` (servers or
    groups; kept lines are kept): what a user has before connecting where nothing is
    accepted on first use (pssh.aio, as asyncssh; ``strict``)."""
    lines = "".join(s.known_hosts_lines() for group in servers
                    for s in getattr(group, "servers", [group]))
    with open(path, "a") as fh:
        fh.write(lines)
    return str(path)


__all__ = ["PASSWORD", "PASSPHRASE", "connect", "run", "read_all", "trusting"]


@pytest.fixture(params=["asyncio", "uvloop"])
def run_loop(request):
    """Runs a coroutine to completion on a fresh loop of either kind (default, uvloop)."""
    import asyncio
    if request.param == "uvloop":
        factory = imported("uvloop").new_event_loop
    else:
        factory = asyncio.new_event_loop

    def run(coro):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    return run


@pytest.fixture
def echo_port():
    """A loopback TCP echo server in a thread (it serves whichever loop the test runs):
    the destination of forwarded connections."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve():
        while True:
            try:
                peer, _ = listener.accept()
            except OSError:
                return
            with peer:
                while data := peer.recv(65536):
                    peer.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


@pytest.fixture
def busy_port():
    """A port in use on 127.0.0.1, where sshd binds a remote forward (GatewayPorts no,
    whatever address is asked for): asking the server to listen there fails."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    yield listener.getsockname()[1]
    listener.close()
