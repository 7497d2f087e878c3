"""One timed SSH session per library: the operations of the ramp benchmark.

Each driver connects, authenticates with a key, runs ``cat`` of a small file,
reads its output, closes the channel and reads the exit status, then reads a
large file over SFTP, and returns the seconds each operation took:

    auth                   TCP connect + SSH handshake + public key auth
    channel_open           open a session channel
    execute                send the exec request (``cat FILE``)
    channel_read           read stdout to EOF
    close_and_exit_status  close the channel and fetch the exit status
    sftp_read              start SFTP, open, read the whole file, close
    total                  the whole session, connect to disconnect

asyncssh opens the channel and sends the exec request in one call, so its
``channel_open`` covers both and it has no ``execute``; hussh's one call also
reads the output and the exit status (see :func:`hussh_`).

This module imports nothing from this project at top level: the ramp worker
loads it as a plain file under a peer's interpreter (ssh2-python's module is
also called ``ssh2``, so it lives in its own virtualenv).
"""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional

OPERATIONS = ("auth", "channel_open", "execute", "channel_read", "close_and_exit_status",
              "sftp_read", "total")
READ_CHUNK = 2 * 1024 * 1024

clock = time.perf_counter


@dataclass(frozen=True)
class Target:
    """Where the sessions go and what they fetch (the same for every library)."""
    host: str
    port: int
    user: str
    key: str
    cat_path: str       # read with ``cat`` over an exec channel
    cat_size: int
    sftp_path: str      # read whole over SFTP
    sftp_size: int
    cipher: Optional[str] = None   # None: each library's own default


class SessionFailed(RuntimeError):
    """The session ran but did not get what it should have (size, exit code)."""


def _expect(what: str, got: int, want: int) -> None:
    if got != want:
        raise SessionFailed(f"{what}: got {got}, expected {want}")


class _Timer:
    def __init__(self) -> None:
        self.times: Dict[str, float] = {}
        self.start = self.last = clock()

    def lap(self, name: str) -> None:
        now = clock()
        self.times[name] = now - self.last
        self.last = now

    def done(self) -> Dict[str, float]:
        self.times["total"] = clock() - self.start
        return self.times


def _ssh2_api(target: Target, nonblocking: bool, bulk: bool) -> Dict[str, float]:
    """The ``ssh2`` API: ours, or ssh2-python (whichever ``ssh2`` is importable)."""
    from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
    from ssh2.session import LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC, Session
    from ssh2.sftp import LIBSSH2_FXF_READ

    timer = _Timer()
    sock = socket.create_connection((target.host, target.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    session = Session()
    if target.cipher:
        session.method_pref(LIBSSH2_METHOD_CRYPT_CS, target.cipher)
        session.method_pref(LIBSSH2_METHOD_CRYPT_SC, target.cipher)

    if nonblocking:
        from ssh2.utils import wait_socket
        session.set_blocking(False)

        def call(fn: Callable, *args):
            while True:
                result = fn(*args)
                rc = result[0] if type(result) is tuple else result
                if type(rc) is not int or rc != LIBSSH2_ERROR_EAGAIN:
                    return result
                wait_socket(sock, session, 30)
    else:
        def call(fn: Callable, *args):
            return fn(*args)

    try:
        call(session.handshake, sock)
        call(session.userauth_publickey_fromfile, target.user, target.key)
        timer.lap("auth")
        chan = call(session.open_session)
        timer.lap("channel_open")
        call(chan.execute, f"cat {target.cat_path}")
        timer.lap("execute")
        received = 0
        while (size := call(chan.read)[0]) > 0:
            received += size
        timer.lap("channel_read")
        call(chan.close)
        call(chan.wait_closed)
        status = chan.get_exit_status()
        timer.lap("close_and_exit_status")
        _expect("cat output bytes", received, target.cat_size)
        _expect("exit status", status, 0)

        sftp = call(session.sftp_init)
        handle = call(sftp.open, target.sftp_path, LIBSSH2_FXF_READ, 0)
        received = 0
        if bulk:  # ours: one reused buffer, no bytes object per chunk
            buf = bytearray(READ_CHUNK)
            while (size := call(handle.read_into, buf)) > 0:
                received += size
        else:
            while (size := call(handle.read, READ_CHUNK)[0]) > 0:
                received += size
        call(handle.close)
        timer.lap("sftp_read")
        _expect("SFTP bytes", received, target.sftp_size)
        call(session.disconnect)
    finally:
        sock.close()
    return timer.done()


def ours_blocking(target: Target) -> Dict[str, float]:
    return _ssh2_api(target, nonblocking=False, bulk=True)


def ours_nonblocking(target: Target) -> Dict[str, float]:
    return _ssh2_api(target, nonblocking=True, bulk=True)


def ssh2_python(target: Target) -> Dict[str, float]:
    return _ssh2_api(target, nonblocking=False, bulk=False)


def paramiko_(target: Target) -> Dict[str, float]:
    import paramiko

    timer = _Timer()
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    kwargs = {}
    if target.cipher:
        kwargs["disabled_algorithms"] = {
            "ciphers": [c for c in paramiko.Transport._preferred_ciphers if c != target.cipher]}
    try:
        client.connect(target.host, target.port, target.user, key_filename=target.key,
                       look_for_keys=False, allow_agent=False, **kwargs)
        timer.lap("auth")
        chan = client.get_transport().open_session()
        timer.lap("channel_open")
        chan.exec_command(f"cat {target.cat_path}")
        timer.lap("execute")
        received = 0
        while data := chan.recv(READ_CHUNK):
            received += len(data)
        timer.lap("channel_read")
        status = chan.recv_exit_status()
        chan.close()
        timer.lap("close_and_exit_status")
        _expect("cat output bytes", received, target.cat_size)
        _expect("exit status", status, 0)

        sftp = client.open_sftp()
        received = 0
        with sftp.open(target.sftp_path, "rb") as handle:
            handle.prefetch()   # paramiko's pipelined read; without it 5-10x slower
            while data := handle.read(READ_CHUNK):
                received += len(data)
        sftp.close()
        timer.lap("sftp_read")
        _expect("SFTP bytes", received, target.sftp_size)
    finally:
        client.close()
    return timer.done()


def asyncssh_(target: Target, loop) -> Dict[str, float]:
    """asyncssh on this thread's own event loop (one loop per thread)."""
    import asyncssh

    async def session() -> Dict[str, float]:
        timer = _Timer()
        kwargs = {"encryption_algs": [target.cipher]} if target.cipher else {}
        async with asyncssh.connect(target.host, target.port, username=target.user,
                                    client_keys=[target.key], known_hosts=None,
                                    agent_path=None, **kwargs) as conn:
            timer.lap("auth")
            process = await conn.create_process(f"cat {target.cat_path}", encoding=None)
            timer.lap("channel_open")
            received = len(await process.stdout.read())
            timer.lap("channel_read")
            result = await process.wait()
            process.close()
            timer.lap("close_and_exit_status")
            _expect("cat output bytes", received, target.cat_size)
            _expect("exit status", result.exit_status, 0)
            async with conn.start_sftp_client() as sftp:
                async with sftp.open(target.sftp_path, "rb") as handle:
                    received = len(await handle.read())
            timer.lap("sftp_read")
            _expect("SFTP bytes", received, target.sftp_size)
        return timer.done()

    return loop.run_until_complete(session())


def hussh_(target: Target) -> Dict[str, float]:
    """hussh's sync Connection (libssh2 in Rust; it holds the GIL while it works).

    Its execute() opens the channel, runs the command, reads the output and the
    exit status in one call (timed as ``channel_open``, as asyncssh's); it returns
    text, so the byte count of the random file cannot be checked, only the exit
    status. It reads SFTP files into a local path (``/dev/null`` here). It cannot
    pin a cipher, so ``--cipher`` runs skip it.
    """
    import hussh

    if target.cipher:
        raise SessionFailed("hussh cannot pin a cipher")
    timer = _Timer()
    conn = hussh.Connection(target.host, port=target.port, username=target.user,
                            private_key=target.key)
    try:
        timer.lap("auth")
        result = conn.execute(f"cat {target.cat_path}")
        timer.lap("channel_open")
        _expect("exit status", result.status, 0)
        conn.sftp_read(target.sftp_path, "/dev/null")
        timer.lap("sftp_read")
    finally:
        conn.close()
    return timer.done()


# Library name -> (module that must be importable, driver). Drivers that need
# per-thread state take it from ``thread_state``.
DRIVERS = {
    "ours-blocking": ("ssh2", ours_blocking),
    "ours-nonblocking": ("ssh2", ours_nonblocking),
    "ssh2-python": ("ssh2", ssh2_python),
    "paramiko": ("paramiko", paramiko_),
    "asyncssh": ("asyncssh", asyncssh_),
    "hussh": ("hussh", hussh_),
}


def thread_runner(library: str) -> Callable[[Target], Dict[str, float]]:
    """A session function for one thread (asyncssh gets a loop of its own)."""
    driver = DRIVERS[library][1]
    if library == "asyncssh":
        import asyncio
        loop = asyncio.new_event_loop()
        return lambda target: driver(target, loop)
    return driver


def library_version(library: str) -> str:
    """The installed version, and for the ``ssh2`` APIs the libssh2 in use."""
    from importlib.metadata import PackageNotFoundError, version
    module = DRIVERS[library][0]
    dist = {"ours-blocking": "pssh2", "ours-nonblocking": "pssh2"}.get(library, library)
    try:
        text = version(dist)
    except PackageNotFoundError:
        text = "source tree"
    if module == "ssh2":
        try:
            import ssh2.utils
            libssh2 = ssh2.utils.version()
            if isinstance(libssh2, bytes):  # ssh2-python returns bytes
                libssh2 = libssh2.decode()
            text += f" (libssh2 {libssh2})"
        except (ImportError, AttributeError, TypeError):
            pass
    return text
