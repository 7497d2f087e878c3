"""Fixtures: real OpenSSH servers on loopback and sessions connected to them."""
from __future__ import annotations

import gc
import importlib.util
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
from processes import cmdline, described_socket, descendants, open_fds, tcp_peers
from serving import Serving, echo
from waiting import eventually, gone

PASSWORD = "s3cret pw"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs(*modules): optional modules the test needs (tests/extras.py): "
        "missing, it fails at once, naming the install command")
    interruptible()


def interruptible() -> None:
    """SIGINT and SIGQUIT at their defaults in this process, so that every program a test
    starts gets them as it would from a terminal. A suite started in the background by a
    non-interactive shell (``bash ci/test.sh &`` in a script) has both ignored, and an
    ignored signal stays ignored across fork and exec: a program of a Ctrl-C test then never
    saw its SIGINT (its masks said SigIgn 0x1001006) and waited for ever."""
    import signal
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        require(*mark.args)


#: How long what a test started may take to end after it (sshd's session processes end
#: some moments after their client closed): only what stays pays it all.
LEFT_BEHIND_GRACE = float(os.environ.get("PSSH_TESTS_LEFT_BEHIND_GRACE", 15.0))
#: The modules checked for processes, threads and file descriptors left behind: every
#: module that starts a process, a server, a thread or a client (run one with
#: ``PSSH_TESTS_CHECK_EVERY_MODULE=1`` to check it: each leak fails its test, naming what
#: it left). Not checked, and why:
#: - test_poll_engine and test_poll_sinks restart a fixture's server themselves (an sshd
#:   crashed on purpose, influxd stopped mid-run): the new server process would count as
#:   the test's;
#: - test_pssh_cluster runs Dask's scheduler and a Client in this process (module
#:   fixtures): the pool of connections between the two grows as tests use them, by
#:   Dask's design, and would count as the tests';
#: - modules that start nothing (parsing, settings, layout, suite tools): nothing to find.
LEFT_BEHIND_CHECKED = {
    "test_aio", "test_aio_callbacks", "test_aio_examples", "test_aio_exceptions",
    "test_benchmarks", "test_benchmarks_polling", "test_build_support", "test_channel",
    "test_checkout_location", "test_cli", "test_cli_host_lists", "test_cli_modes",
    "test_cli_ping_view", "test_cli_signals", "test_cli_ssh_options", "test_cli_stdio",
    "test_cli_transfer", "test_cli_usage", "test_cli_views", "test_core", "test_docs",
    "test_exceptions", "test_exit_status", "test_fanout", "test_figures", "test_front_ends",
    "test_full_socket", "test_host_errors_keys", "test_host_errors_transfers",
    "test_host_key_credentials", "test_host_key_oracle", "test_hostile_names",
    "test_hostile_output", "test_hostile_transfers", "test_import_order", "test_knownhost",
    "test_lifetimes", "test_netns_delay", "test_nonblocking", "test_packaging",
    "test_poll_buckets", "test_poll_cli", "test_poll_dashboard", "test_poll_virtual",
    "test_pssh_agent_forwarding", "test_pssh_cancel", "test_pssh_certificates",
    "test_pssh_compat", "test_pssh_deadlines", "test_pssh_host_certificates", "test_pssh_jump",
    "test_pssh_keepalive", "test_pssh_keys", "test_pssh_known_hosts",
    "test_pssh_known_hosts_fleet", "test_pssh_parallel", "test_pssh_sharded",
    "test_pssh_transfer", "test_readme", "test_remote_output", "test_remote_symlinks",
    "test_session", "test_sftp", "test_ssh2_compat", "test_stacks", "test_stop_truth",
    "test_thirdparty", "test_threads", "test_virtual_clock", "test_wheels",
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


class _Before:
    """What ran and was open when a test began (after its module's and the session's
    fixtures had started their servers, clusters and pools)."""

    def __init__(self) -> None:
        self.processes = set(descendants(os.getpid()))
        self.threads = set(threading.enumerate())
        self.fds = open_fds()

    def left(self) -> list:
        """What the test started that is still there, each said with what it is. Clients
        dropped by the test close their connections when collected: a collection (a tenth
        of a second and more in a worker that has run many modules) is made only when
        something is there to look at again."""
        found = self._left()
        if found:
            gc.collect()
            found = self._left()
        return found

    def _left(self) -> list:
        kept_pid, kept_fd = _resource_tracker()
        found = [f"process {pid}: {command}{_client_of(pid, command)}"
                 for (pid, start), command in descendants(os.getpid()).items()
                 if (pid, start) not in self.processes and pid != kept_pid]
        found += [f"thread {thread.name!r} ({_started_by(thread)})"
                  for thread in threading.enumerate()
                  if thread not in self.threads and _runs(thread) and not _pooled(thread)]
        found += [f"fd {fd}: {described_socket(target)}"
                  for fd, target in sorted(open_fds() - self.fds) if fd != kept_fd]
        busy = _gevent_pool_busy()
        if busy:  # its threads are kept, but one still in a call is lost to the pool
            found.append(f"{busy} call(s) still running in gevent's thread pool")
        return found


def _started_by(thread: threading.Thread) -> str:
    """What a thread runs, for the failure's text."""
    target = getattr(thread, "_target", None)
    if target is None:
        return type(thread).__name__
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"


def _runs(thread: threading.Thread) -> bool:
    """Whether ``thread`` still runs. A thread that ``threading`` did not start (a
    ``_DummyThread``: a gevent pool's, say, that asked for ``current_thread()``) stays
    listed, and "alive", after it ended: its thread in /proc says (CI saw a pool thread
    of a hub run in a thread, ended with its hub, reported as left behind)."""
    if type(thread).__name__ != "_DummyThread":
        return thread.is_alive()
    return os.path.exists(f"/proc/self/task/{thread.native_id}")


def _pooled(thread: threading.Thread) -> bool:
    """A thread that outlives a test by design: see :data:`POOLED_THREADS`, and
    :func:`_gevent_pool_threads`."""
    return thread.name.startswith(POOLED_THREADS) or (
        type(thread).__name__ == "_DummyThread" and thread.ident in _gevent_pool_threads())


def _gevent_pool_threads() -> set:
    """The thread ids of the main thread's gevent hub's thread pool (the hub's
    ``threadpool``: DNS resolution, Dask's blocking calls from pssh.fanout.dask). Its
    threads are started as needed, at most its size, and kept idle for the hub's life,
    the process's; one that runs Python code that asks for ``threading.current_thread()``
    (logging does) is listed by ``threading`` as a ``_DummyThread`` from then on."""
    hub = sys.modules["gevent"].get_hub()  # (process_wide_caches made it)
    pool = getattr(hub, "_threadpool", None)  # None: not made yet, and none made here
    return {worker._thread_ident for worker in getattr(pool, "_worker_greenlets", ())}


def _gevent_pool_busy() -> int:
    """How many calls the main thread's hub's thread pool is still running or holds: its
    threads are kept (:func:`_gevent_pool_threads`), but one left blocked in a call is
    lost to every later user of the pool (DNS resolution among them) until the call ends;
    with all of them lost, the next call waits for ever."""
    hub = sys.modules["gevent"].get_hub()
    pool = getattr(hub, "_threadpool", None)
    return len(pool) if pool is not None else 0


#: Threads a library keeps for the rest of the process once a test made it start them,
#: by name; each is reused by the next test that needs it, and bounded.
POOLED_THREADS = (
    # distributed.utils' module-level offload executor (one thread, made on the first use
    # of Dask in this process: a LocalCluster, a Client).
    "Dask-Offload",
)


def _resource_tracker() -> tuple:
    """``(pid, fd)`` of multiprocessing's resource tracker, or Nones: one process per
    process, started by the first use of multiprocessing that needs it (a Dask
    LocalCluster of worker processes, in a documentation example) and kept, with the
    pipe to it, until this process exits."""
    module = sys.modules.get("multiprocessing.resource_tracker")
    tracker = getattr(module, "_resource_tracker", None)
    return getattr(tracker, "_pid", None), getattr(tracker, "_fd", None)


@pytest.fixture(scope="session", autouse=True)
def process_wide_caches():
    """Made once, before any test, so that the first test to use them is not charged with
    them (:func:`nothing_left_behind`): what a library keeps for the rest of the process
    by design, the same whichever test made it.

    - gevent's hub of the main thread (its loop's epoll and eventfd descriptors): one per
      thread, for the thread's life; every gevent test of this process runs on it.
    - the native runner's engine of that hub (:func:`pssh.runners.native.hub_engine`, an
      epoll descriptor), shared by every native-runner client of the thread, likewise.
    - libuv's process-wide signal pipe (a pipe pair made by the first uvloop loop, never
      closed: ``uv__signal_global_init``), when uvloop is installed.
    """
    import gevent
    gevent.get_hub()
    from pssh.runners.native import hub_engine
    hub_engine()
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop
        uvloop.new_event_loop().close()
    yield


@pytest.fixture(autouse=True)
def nothing_left_behind(request):
    """Fails a test that leaves a process, a thread or a file descriptor of its own behind:
    one that was not there when the test began (after the module's and session's fixtures
    started their servers) and is still there when it has ended, but for what libraries
    keep for the process by design (:func:`process_wide_caches`, :data:`POOLED_THREADS`,
    :func:`_resource_tracker`). A client, server, worker or file not closed on some path
    is found here, not by the tests after it."""
    if (request.module.__name__ not in LEFT_BEHIND_CHECKED
            and not os.environ.get("PSSH_TESTS_CHECK_EVERY_MODULE")):
        yield
        return
    before = _Before()
    yield
    # A client the test dropped closes its connections when collected (many tests leave
    # that to the collector), and gevent's hub may still have work the test did not wait
    # for (a finished host greenlet's link notification holds its client; a forwarded
    # agent's relay has yet to see the agent's EOF): the hub runs between the looks, and
    # each look collects first.
    pause = sys.modules["gevent"].sleep if "gevent" in sys.modules else time.sleep
    left = gone(before.left, LEFT_BEHIND_GRACE, "what the test started ended", pause=pause)
    if left:
        pytest.fail(f"{request.node.nodeid} left {len(left)} behind: " + "; ".join(left),
                    pytrace=False)
    broken = _hub_deafness() if "gevent" in sys.modules else ""
    if broken:
        pytest.fail(f"after {request.node.nodeid}, this process's gevent hub no longer "
                    f"delivers {broken}: every later test here would wait for ever",
                    pytrace=False)


def _hub_deafness() -> str:
    """What the main thread's hub no longer delivers ("" when it works): a byte on a
    socket, a thread pool's result. A hub's loop can stop hearing its descriptors (one
    closed or replaced under it); its timers go on, so the tests after it then wait
    until their timeouts, far from the cause. Checked after each test, it names the test
    after which it happened."""
    import gevent
    from gevent import socket as gsocket
    a, b = gsocket.socketpair()
    try:
        b.send(b"x")
        got = None
        with gevent.Timeout(10, False):
            got = a.recv(1)
        if got != b"x":
            return "socket readiness"
    finally:
        a.close()
        b.close()
    answer = None
    with gevent.Timeout(10, False):
        answer = gevent.get_hub().threadpool.apply(int)
    return "" if answer == 0 else "thread pool results"


#: The command line's words for each way of running the hosts (``mode``, a module-scoped
#: parameter of the tests that take :func:`mode_options`); Dask's (None) are the address of
#: the module's cluster (:func:`dask_mode`).
RUN_MODES = {"one-process": [], "processes-2": ["--processes", "2"], "dask": None}


@pytest.fixture(scope="module")
def dask_mode():
    """``--scheduler ADDRESS`` of a cluster of two workers that a module's tests share
    (tests/dask_cluster.py)."""
    from dask_cluster import shared_cluster
    from test_cli import ENV
    with shared_cluster(ENV) as words:
        yield words


@pytest.fixture(scope="module")
def mode_options(mode, request):
    """The command line's words for ``mode``. A module's fixture, so that the cluster starts
    (only if a Dask test runs) before the test, which is then not charged with it."""
    words = RUN_MODES[mode]
    return request.getfixturevalue("dask_mode") if words is None else words


@pytest.fixture(scope="session")
def servers():
    """Two sshd hosts (on addresses of their own) accepting keys and a password."""
    with ServerGroup(addresses=addresses(2), password=PASSWORD) as group:
        yield group


@pytest.fixture(scope="session")
def server(servers):
    return servers.servers[0]


def connect(server, *, blocking: bool = True, auth: bool = True, key: str = "ed25519",
            receive_buffer: int | None = None):
    """A TCP connection and a handshaken (and authenticated) Session; ``receive_buffer``:
    the socket's receive buffer in bytes, instead of the kernel's own, growing one."""
    sock = socket.socket(socket.AF_INET6 if ":" in server.address else socket.AF_INET)
    if receive_buffer:
        _set_receive_buffer(sock, receive_buffer)
    sock.settimeout(10)
    sock.connect((server.address, server.port))
    session = Session()
    session.set_timeout(30_000)
    session.handshake(sock)
    if auth:
        session.userauth_publickey_fromfile(server.user, server.keys.private(key))
    session.set_blocking(blocking)
    return sock, session


# Linux's SO_RCVBUFFORCE (absent from Python's socket module): SO_RCVBUF past
# net.core.rmem_max, for a process with CAP_NET_ADMIN.
_SO_RCVBUFFORCE = 33


def _set_receive_buffer(sock: socket.socket, size: int) -> None:
    """Before connecting: the window scale is agreed in TCP's handshake."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, size)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) < size:  # the kernel doubles it
        pytest.fail(f"needs a TCP receive buffer of {size} bytes: run as root, or "
                    f"sysctl -w net.core.rmem_max={size}", pytrace=False)


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
    with Serving(echo) as server:
        yield server.port


@pytest.fixture
def busy_port():
    """A port in use on 127.0.0.1, where sshd binds a remote forward (GatewayPorts no,
    whatever address is asked for): asking the server to listen there fails."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    yield listener.getsockname()[1]
    listener.close()
