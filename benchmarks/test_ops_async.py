"""Per-operation costs, asyncio APIs: ours and the peers side by side (pytest-benchmark).

    pytest benchmarks/test_ops_async.py --benchmark-json=benchmarks/results/ops_async.json

Each round runs one coroutine to completion on an event loop kept for the whole run
(``loop.run_until_complete``: the same loop overhead for every library). Groups, one per
operation:

====================  ==========================================================================
login                 connect, handshake, authenticate (``connect()``)
login, 10 at once     10 logins gathered on the loop: the round is the wall time of all 10
exec true             ``conn.run("true")``: channel, exec, output, exit status
exec true, 10 at once 10 commands gathered on one connection (channels multiplexed)
sftp read 1 MiB       open, read 1 MiB, close (the SFTP client started beforehand, untimed)
scp recv 1 MiB        ``scp((conn, path), local_file)``
====================  ==========================================================================

Libraries: ``ours-aio`` (``pssh.aio``, which checks host keys against a known_hosts file),
asyncssh (``known_hosts=None``: not checked) and ``hussh-aio`` (hussh's
``AsyncConnection``, russh on tokio; it reads SFTP into a local file and has no SCP).
"""
from __future__ import annotations

import asyncio

import pytest

LIBRARIES = ["ours-aio", "asyncssh", "hussh-aio"]
AT_ONCE = 10


class AsyncsshAPI:
    """asyncssh's API: asyncssh itself, or ``pssh.aio`` (the same names)."""

    def __init__(self, t, module: str) -> None:
        self.module = pytest.importorskip(module)
        self.t = t
        # Ours checks host keys (the cost a real program pays); asyncssh is told not to.
        self.known_hosts = t.known_hosts if module == "pssh.aio" else None

    async def login(self):
        return await self.module.connect(self.t.host, self.t.port, username=self.t.user,
                                         client_keys=[self.t.key], known_hosts=self.known_hosts,
                                         agent_path=None)

    async def close(self, conn) -> None:
        conn.close()
        await conn.wait_closed()

    async def exec_true(self, conn) -> None:
        assert (await conn.run("true")).exit_status == 0

    async def sftp_start(self, conn):
        return await conn.start_sftp_client()

    async def sftp_read(self, conn, sftp) -> None:
        async with sftp.open(self.t.path, "rb") as handle:
            assert len(await handle.read()) == self.t.size

    async def scp_recv(self, conn) -> None:
        await self.module.scp((conn, self.t.path), self.t.local)


class HusshAio:
    """hussh's ``AsyncConnection``."""

    def __init__(self, t) -> None:
        self.aio = pytest.importorskip("hussh.aio")
        self.t = t

    async def login(self):
        conn = self.aio.AsyncConnection(self.t.host, username=self.t.user, key_path=self.t.key,
                                        port=self.t.port)
        await conn.connect()
        return conn

    async def close(self, conn) -> None:
        await conn.close()

    async def exec_true(self, conn) -> None:
        assert (await conn.execute("true")).status == 0

    async def sftp_start(self, conn):
        return None

    async def sftp_read(self, conn, _) -> None:
        await conn.sftp_read(self.t.path, self.t.local)


def _driver(name: str, t):
    if name == "hussh-aio":
        return HusshAio(t)
    return AsyncsshAPI(t, "pssh.aio" if name == "ours-aio" else "asyncssh")


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(params=LIBRARIES)
def lib(request, target):
    return _driver(request.param, target)


@pytest.fixture
def logged_in(lib, loop):
    conn = loop.run_until_complete(lib.login())
    yield conn
    loop.run_until_complete(lib.close(conn))


def test_login(lib, loop, measure):
    opened: list = []

    def close_all():
        for conn in opened:
            loop.run_until_complete(lib.close(conn))
        opened.clear()

    measure("login", lambda: opened.append(loop.run_until_complete(lib.login())), close_all)
    close_all()


def test_login_at_once(lib, loop, measure):
    opened: list = []

    async def logins():
        opened.extend(await asyncio.gather(*(lib.login() for _ in range(AT_ONCE))))

    async def close_all():
        await asyncio.gather(*(lib.close(conn) for conn in opened))
        opened.clear()

    measure(f"login, {AT_ONCE} at once", lambda: loop.run_until_complete(logins()),
            lambda: loop.run_until_complete(close_all()))
    loop.run_until_complete(close_all())


def test_exec_true(lib, loop, logged_in, measure):
    measure("exec true", lambda: loop.run_until_complete(lib.exec_true(logged_in)))


def test_exec_true_at_once(lib, loop, logged_in, measure):
    async def commands():
        await asyncio.gather(*(lib.exec_true(logged_in) for _ in range(AT_ONCE)))
    measure(f"exec true, {AT_ONCE} at once", lambda: loop.run_until_complete(commands()))


def test_sftp_read(lib, loop, logged_in, measure):
    sftp = loop.run_until_complete(lib.sftp_start(logged_in))
    measure("sftp read 1 MiB", lambda: loop.run_until_complete(lib.sftp_read(logged_in, sftp)))


def test_scp_recv(lib, loop, logged_in, measure):
    if not hasattr(lib, "scp_recv"):
        pytest.skip(f"{type(lib).__name__}: no SCP")
    measure("scp recv 1 MiB", lambda: loop.run_until_complete(lib.scp_recv(logged_in)))
