"""pssh.aio's exceptions: asyncssh's names, hierarchy and codes, raised where asyncssh raises
them (checked against asyncssh itself on the same servers), naming the host, and each also
the matching pssh.exceptions class."""
from __future__ import annotations

import asyncio
import builtins
import os
import socket

import pytest

from pssh import aio
from pssh import exceptions as exc
from extras import imported
from pssh.sshd import ClientKeys

asyncssh = imported("asyncssh")

#: asyncssh's exception classes (all it exports, but the server-side signals and the
#: password-change and key-export ones, which a pssh.aio client never meets).
NAMES = sorted(
    name for name in dir(asyncssh)
    if isinstance(getattr(asyncssh, name), type) and issubclass(getattr(asyncssh, name),
                                                                  Exception)
    and name not in {"BreakReceived", "SignalReceived", "TerminalSizeChanged",
                     "PasswordChangeRequired", "KeyExportError", "KeyGenerationError",
                     "ConfigParseError"})



@pytest.fixture
def login(server, tmp_path):
    return dict(port=server.port, username=server.user, client_keys=[server.keys.private()],
                known_hosts=None, agent_path=None)


def test_every_asyncssh_exception_is_there_with_its_hierarchy_and_code():
    assert len(NAMES) > 40
    for name in NAMES:
        ours, theirs = getattr(aio, name), getattr(asyncssh, name)
        for other in NAMES:
            assert issubclass(ours, getattr(aio, other)) == \
                issubclass(theirs, getattr(asyncssh, other)), (name, other)
        for base in (ValueError, builtins.TimeoutError, asyncio.TimeoutError):
            if issubclass(theirs, base):
                assert issubclass(ours, base), (name, base)
    for name in NAMES:
        theirs = getattr(asyncssh, name)
        if issubclass(theirs, asyncssh.Error) and name not in {
                "Error", "DisconnectError", "ChannelOpenError", "SFTPError", "ProcessError",
                "TimeoutError"}:
            # The classes that imply their code take (reason[, lang]).
            assert getattr(aio, name)("why").code == theirs("why").code, name
    made = aio.ChannelOpenError(aio.OPEN_ADMINISTRATIVELY_PROHIBITED, "only from here")
    assert (made.code, made.reason, str(made)) == (1, "only from here", "only from here")
    for name in dir(asyncssh):
        if name.startswith(("DISC_", "OPEN_", "FX_")) or name == "EXTENDED_DATA_STDERR":
            assert getattr(aio, name) == getattr(asyncssh, name), name


def test_each_is_also_the_gevent_clients_exception():
    pairs = [(aio.PermissionDenied, exc.AuthenticationError),
             (aio.HostKeyNotVerifiable, exc.HostKeyError),
             (aio.ConnectionLost, exc.ConnectionError),
             (aio.KeyExchangeFailed, exc.ConnectionError),
             (aio.ChannelOpenError, exc.SessionError), (aio.ChannelListenError, exc.SessionError),
             (aio.TimeoutError, exc.Timeout), (aio.ConnectTimeout, exc.ConnectTimeout),
             (aio.SFTPNoSuchFile, exc.SFTPError), (aio.KeyImportError, exc.PKeyFileError),
             (aio.KeyEncryptionError, exc.PKeyFileError), (aio.HostNotFound, exc.UnknownHostError),
             (aio.Error, exc.PSSHError)]
    for ours, theirs in pairs:
        assert issubclass(ours, theirs), (ours, theirs)
    err = aio.PermissionDenied("no key", host="web1", port=2222)
    assert (str(err), err.reason, err.host, err.port, err.code) == \
        ("web1:2222: no key", "no key", "web1", 2222, asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE)


def _kind(module, err: BaseException) -> str:
    """The most specific of asyncssh's exception names ``err`` is an instance of."""
    for cls in type(err).__mro__:
        if cls.__name__ in NAMES and getattr(module, cls.__name__) is cls:
            return cls.__name__
    # Else the built-in one (asyncssh lets asyncio.TimeoutError, OSErrors through).
    if isinstance(err, builtins.TimeoutError):
        return "TimeoutError"
    return next(cls.__name__ for cls in type(err).__mro__ if cls.__module__ == "builtins")


async def _failures(ssh, server, tmp_path, bad_key, blackhole) -> dict:
    """The same failures provoked through ``ssh`` (asyncssh or pssh.aio), as an asyncssh
    program meets them: what each raised, by asyncssh's names."""
    seen = {}
    base = dict(port=server.port, username=server.user, known_hosts=None,
                client_keys=[server.keys.private()])

    async def attempt(name, coro):
        try:
            await coro
            seen[name] = "no error"
        except (OSError, ssh.Error, ValueError) as err:   # asyncssh's examples' clause
            seen[name] = _kind(ssh, err)

    async def with_conn(body, **more):
        async with ssh.connect(server.address, **dict(base, **more)) as conn:
            await body(conn)

    async def sftp_missing(conn):
        async with conn.start_sftp_client() as sftp:
            await sftp.stat(str(tmp_path / "missing"))

    async def sftp_mkdir_twice(conn):
        async with conn.start_sftp_client() as sftp:
            await sftp.mkdir(str(tmp_path / f"made-{ssh.__name__}"))
            await sftp.mkdir(str(tmp_path / f"made-{ssh.__name__}"))

    async def lost(conn):
        try:
            await conn.run("kill -9 $PPID")
        except (OSError, ssh.Error) as err:
            # asyncssh returns an empty result (exit status None) for the command whose
            # connection died; pssh.aio says so (tested below). Then both agree:
            assert _kind(ssh, err) == "ConnectionLost"
        # asyncssh learns of it in the background: once it has, either library must say
        # the connection is lost (not a guessed moment later).
        await asyncio.wait_for(conn.wait_closed(), 60)
        await conn.run("echo never")

    await attempt("check", with_conn(lambda c: c.run("exit 3", check=True)))
    await attempt("timeout", with_conn(lambda c: c.run("sleep 5", timeout=0.5)))
    await attempt("bad key", with_conn(lambda c: c.run("true"), client_keys=[bad_key]))
    empty = tmp_path / f"known_hosts-{ssh.__name__}"
    empty.write_text("")
    await attempt("unknown host key", with_conn(lambda c: c.run("true"), known_hosts=str(empty),
                                                 host_key_policy="strict")
                  if ssh is aio else with_conn(lambda c: c.run("true"), known_hosts=str(empty)))
    await attempt("sftp missing", with_conn(sftp_missing))
    await attempt("sftp mkdir twice", with_conn(sftp_mkdir_twice))
    await attempt("tcp refused", with_conn(lambda c: c.open_connection("127.0.0.1", 1)))
    await attempt("no passphrase", with_conn(
        lambda c: c.run("true"), client_keys=[server.keys.private("passphrase")]))
    await attempt("wrong passphrase", with_conn(
        lambda c: c.run("true"), client_keys=[server.keys.private("passphrase")],
        passphrase="wrong"))
    await attempt("lost", with_conn(lost))
    await attempt("connect timeout", with_conn(lambda c: c.run("true"), port=blackhole,
                                                connect_timeout=1))
    # A server that never sends its banner: login_timeout bounds the handshake too (a
    # connect_timeout beyond the test's own would make a miss a hang, not a slow pass).
    await attempt("login timeout", with_conn(lambda c: c.run("true"), port=blackhole,
                                              login_timeout=1, connect_timeout=600))
    return seen


@pytest.fixture
def blackhole(server):
    """A port on the server's address that accepts connections and never says anything."""
    listener = socket.socket()
    listener.bind((server.address, 0))
    listener.listen(64)
    yield listener.getsockname()[1]
    listener.close()


def test_failures_raise_what_asyncssh_raises(server, tmp_path, blackhole):
    bad = ClientKeys.generate(tmp_path / "bad").private()
    seen = {name: asyncio.run(_failures(module, server, tmp_path, bad, blackhole))
            for name, module in (("asyncssh", asyncssh), ("pssh.aio", aio))}
    assert seen["pssh.aio"] == seen["asyncssh"]
    assert seen["asyncssh"] == {
        "check": "ProcessError", "timeout": "TimeoutError", "bad key": "PermissionDenied",
        "unknown host key": "HostKeyNotVerifiable", "sftp missing": "SFTPNoSuchFile",
        "sftp mkdir twice": "SFTPFailure", "tcp refused": "ChannelOpenError",
        "no passphrase": "KeyImportError", "wrong passphrase": "KeyEncryptionError",
        "lost": "ChannelOpenError", "connect timeout": "TimeoutError",
        "login timeout": "ConnectionLost"}


def test_raised_errors_name_the_host_and_are_ours_too(server, login, run_loop, tmp_path,
                                                      blackhole, busy_port):
    async def main():
        caught = {}
        async with aio.connect(server.address, **login) as conn:
            try:
                await conn.run("echo partial; sleep 5", timeout=0.5)
            except asyncio.TimeoutError as err:
                caught["timeout"] = err
            try:
                await conn.open_connection("127.0.0.1", 1)
            except exc.ProxyTargetError as err:
                caught["tcp"] = err
            try:
                await conn.forward_remote_port("127.0.0.1", busy_port, "127.0.0.1", 1)
            except exc.SessionError as err:
                caught["listen"] = err
            async with conn.start_sftp_client() as sftp:
                try:
                    await sftp.get(str(tmp_path / "missing"), str(tmp_path / "local"))
                except exc.SFTPError as err:
                    caught["sftp"] = err
        try:
            await aio.connect(server.address, **dict(login, port=blackhole), connect_timeout=1)
        except exc.ConnectTimeout as err:
            caught["connect"] = err
        try:
            await aio.connect("no-such-host.invalid", **login)
        except socket.gaierror as err:
            caught["resolve"] = err
        try:
            await aio.connect(server.address, **dict(login, client_keys=["/nonexistent/key"]))
        except FileNotFoundError as err:
            caught["key file"] = err
        return caught
    caught = run_loop(main())
    timeout = caught["timeout"]
    assert isinstance(timeout, aio.TimeoutError) and isinstance(timeout, exc.Timeout)
    assert timeout.stdout == "partial\n" and timeout.exit_status is None
    assert timeout.command == "echo partial; sleep 5"
    assert isinstance(caught["tcp"], aio.ChannelOpenError)
    assert caught["tcp"].code == aio.OPEN_CONNECT_FAILED
    assert isinstance(caught["listen"], aio.ChannelListenError)
    assert isinstance(caught["sftp"], aio.SFTPNoSuchFile)
    assert caught["sftp"].code == aio.FX_NO_SUCH_FILE
    assert isinstance(caught["connect"], builtins.TimeoutError)
    assert isinstance(caught["resolve"], exc.UnknownHostError)
    assert isinstance(caught["key file"], exc.PKeyFileError)
    for name, err in caught.items():
        if name != "resolve":
            assert err.host == server.address and f"{server.address}:" in str(err), name
    assert "no-such-host.invalid" in str(caught["resolve"])
    assert os.listdir(tmp_path) == []   # the failed download left nothing


def test_a_lost_connection_reaches_the_client_and_the_waiters(server, login, run_loop):
    lost = []

    class Client(aio.SSHClient):
        def connection_lost(self, exc):
            lost.append(exc)

    async def main():
        conn, _ = await aio.create_connection(Client, server.address, **login)
        proc = await conn.create_process("sleep 30")
        with pytest.raises(aio.ConnectionLost) as info:
            await conn.run("kill -KILL $PPID")   # this session's sshd dies ...
        with pytest.raises(aio.ConnectionLost) as other:
            await proc.wait(20)                  # ... and the other commands hear of it
        assert other.value.host == server.address
        with pytest.raises(aio.ChannelOpenError):
            await conn.run("echo the connection is closed")
        return info.value
    err = run_loop(main())
    assert isinstance(err, exc.ConnectionError) and err.host == server.address
    assert err.code == asyncssh.DISC_CONNECTION_LOST
    assert len(lost) == 1

