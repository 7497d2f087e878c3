"""pssh.aio: the asyncio front end, against real sshd, on the default loop and uvloop."""
from __future__ import annotations

import asyncio
import os
import shlex
import socket
import stat
import threading
import tracemalloc

import pytest

from pssh import aio
from pssh import exceptions as exc
from pssh.sshd import PASSPHRASE, ClientKeys, _descendants
from conftest import trusting
from extras import imported
from loopback import address
from processes import alive, cmdline, stopped, tcp_owners
from waiting import eventually, eventually_async



@pytest.fixture
def login(servers, tmp_path):
    """connect() arguments for the test servers, with a private known_hosts that holds
    their keys (pssh.aio, as asyncssh, verifies every host and never writes the file)."""
    server = servers.servers[0]
    return dict(port=server.port, username=server.user, client_keys=[server.keys.private()],
                known_hosts=trusting(tmp_path / "known_hosts", servers), agent_path=None)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_run_returns_output_and_exit_status(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            return await conn.run("echo out; echo err >&2; exit 3")
    result = run_loop(main())
    assert (result.stdout, result.stderr, result.exit_status, result.returncode) == \
        ("out\n", "err\n", 3, 3)
    assert result.exit_signal is None


def test_check_raises_process_error_with_the_result(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            await conn.run("echo partial; kill -TERM $$", check=True)
    with pytest.raises(aio.ProcessError) as info:
        run_loop(main())
    err = info.value
    assert err.exit_signal[0] == "TERM" and err.returncode == -15 and err.exit_status is None
    assert err.stdout == "partial\n"
    assert server.address in str(err) and "signal TERM" in str(err)


def test_process_streams_stdin_and_lines(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            proc = await conn.create_process("cat; echo done >&2")
            proc.stdin.write("one\ntwo\n")
            await proc.stdin.drain()
            first = await proc.stdout.readline()
            proc.stdin.write(b"three\n")
            proc.stdin.write_eof()
            await proc.stdin.drain()
            rest = [line async for line in proc.stdout]
            completed = await proc.wait()
            return first, rest, completed
    first, rest, completed = run_loop(main())
    assert first == "one\n" and rest == ["two\n", "three\n"]
    assert completed.exit_status == 0 and completed.stderr == "done\n"


def test_environment_pty_and_bytes(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            env = await conn.run("echo $TEST_AIO", env={"TEST_AIO": "given"})
            tty = await conn.run("tty -s && echo terminal", term_type="xterm")
            raw = await conn.run("printf '\\377\\000'", encoding=None)
            return env.stdout, tty.stdout, raw.stdout
    assert run_loop(main()) == ("given\n", "terminal\r\n", b"\xff\x00")


def test_fifty_megabytes_of_output_stream_in_bounded_memory(server, login, run_loop):
    size = 50 * 1024 * 1024

    async def main():
        async with aio.connect(server.address, **login) as conn:
            proc = await conn.create_process(f"head -c {size} /dev/zero", encoding=None)
            total = 0
            tracemalloc.start()
            try:
                while chunk := await proc.stdout.read(65536):
                    total += len(chunk)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            await proc.wait()
            return total, peak, proc.exit_status
    total, peak, status = run_loop(main())
    assert total == size and status == 0
    assert peak < 4 * 1024 * 1024, f"{peak} bytes held while streaming"


def test_sftp_put_get_listdir_stat_mkdir_remove(server, login, run_loop, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 7)
    (tmp_path / "src").write_bytes(data)
    (tmp_path / "src").chmod(0o640)
    remote_dir = str(tmp_path / "remote")
    seen = []

    async def main():
        async with aio.connect(server.address, **login) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.mkdir(remote_dir)
                await sftp.put(str(tmp_path / "src"), remote_dir + "/file",
                               progress_handler=lambda s, d, done, total: seen.append(done))
                attrs = await sftp.stat(remote_dir + "/file")
                names = sorted(await sftp.listdir(remote_dir))
                await sftp.get(remote_dir + "/file", str(tmp_path / "back"))
                await sftp.remove(remote_dir + "/file")
                gone = not await sftp.exists(remote_dir + "/file")
                await sftp.rmdir(remote_dir)
                return attrs, names, gone
    attrs, names, gone = run_loop(main())
    assert attrs.size == len(data) and attrs.permissions & 0o777 == 0o640 and attrs.type == 1
    assert names == [".", "..", "file"] and gone
    assert (tmp_path / "back").read_bytes() == data
    assert seen and seen[-1] == len(data)


def test_failed_download_leaves_no_file(server, login, run_loop, tmp_path):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.get(str(tmp_path / "missing"), str(tmp_path / "local"))
    with pytest.raises(exc.SFTPError, match="missing"):
        run_loop(main())
    assert os.listdir(tmp_path) == ["known_hosts"]


@pytest.mark.parametrize("policy", [{}, {"host_key_policy": "strict"}])
def test_unknown_host_key_refused_by_default_and_under_strict_policy(server, login, run_loop,
                                                                     tmp_path, policy):
    (tmp_path / "empty").write_text("")
    login["known_hosts"] = str(tmp_path / "empty")

    async def main():
        async with aio.connect(server.address, **policy, **login):
            pass
    with pytest.raises(aio.HostKeyNotVerifiable) as info:
        run_loop(main())
    assert isinstance(info.value, exc.UnknownHostKeyError.__bases__[0])  # a HostKeyError
    assert server.address in str(info.value)
    assert (tmp_path / "empty").read_text() == ""   # asyncssh never writes the file


def test_wrong_key_is_permission_denied_naming_what_was_tried(server, login, run_loop,
                                                              tmp_path):
    other = ClientKeys.generate(tmp_path / "other")
    login["client_keys"] = [other.private()]

    async def main():
        async with aio.connect(server.address, **login):
            pass
    with pytest.raises(aio.PermissionDenied) as info:
        run_loop(main())
    assert isinstance(info.value, exc.AuthenticationError)
    assert other.private() in str(info.value) and server.user in str(info.value)


@pytest.fixture
def blackhole():
    """A loopback port that accepts connections and never says anything."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener.getsockname()[1]
    listener.close()


def test_blackhole_host_times_out_alone_among_healthy_ones(server, login, run_loop,
                                                           blackhole):
    hosts = [server.address] * 5

    async def main():
        healthy = aio.run_on_hosts(hosts, "echo ok", timeout=10, **login)
        stuck = aio.run_on_hosts(["127.0.0.1"], "echo ok", timeout=1,
                                 **dict(login, port=blackhole))
        return await asyncio.gather(_collect(healthy), _collect(stuck))
    healthy, stuck = run_loop(main())
    assert [r.result.stdout for r in healthy] == ["ok\n"] * 5 and all(r.ok for r in healthy)
    assert len(stuck) == 1 and isinstance(stuck[0].exception, exc.Timeout)


async def _collect(results):
    return [r async for r in results]


def test_two_hundred_hosts_in_one_call_without_threads(server, login, run_loop):
    threads = threading.active_count()
    counts = []

    async def main():
        async def watch():
            while True:
                counts.append(threading.active_count())
                await asyncio.sleep(0.05)
        watcher = asyncio.ensure_future(watch())
        try:
            return await aio.gather_hosts([server.address] * 200, "echo $SSH_CONNECTION",
                                          limit=200, timeout=60, **login)
        finally:
            watcher.cancel()
    results = run_loop(main())
    assert len(results) == 200 and all(r.ok for r in results)
    assert len({r.result.stdout for r in results}) == 200  # 200 separate connections
    # IP addresses skip the resolver; host names would use the loop's bounded executor.
    assert max(counts) == threads


def test_cancelled_command_and_transfer_and_handshake_leak_nothing(server, login, run_loop,
                                                                   blackhole, tmp_path):
    (tmp_path / "big").write_bytes(os.urandom(8 * 1024 * 1024))

    async def main():
        async with aio.connect(server.address, **login) as conn:   # warm
            await conn.run("true")
        before = open_fds()
        async with aio.connect(server.address, **login) as conn:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(conn.run("sleep 30"), 0.5)
            # Only the command's channel went: the connection carries on.
            assert (await conn.run("echo still here")).stdout == "still here\n"
        async with aio.connect(server.address, **login) as conn:
            async with conn.start_sftp_client() as sftp:
                started = asyncio.Event()
                task = asyncio.ensure_future(sftp.get(
                    str(tmp_path / "big"), str(tmp_path / "copy"),
                    progress_handler=lambda *_: started.set()))
                await started.wait()   # the first 2 MiB are written: mid-transfer
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(aio.connect("127.0.0.1", **dict(login, port=blackhole)),
                                   0.5)
        return before, open_fds()
    before, after = run_loop(main())
    assert after == before
    assert sorted(os.listdir(tmp_path)) == ["big", "known_hosts"]  # no partial copy left


def test_unresolvable_host_name_is_a_clear_error(login, run_loop):
    async def main():
        async with aio.connect("no-such-host.invalid", **login):
            pass
    with pytest.raises(exc.UnknownHostError, match="no-such-host.invalid"):
        run_loop(main())


def test_an_asyncssh_program_ports_by_changing_its_import(server, tmp_path):
    # The control: the same program against asyncssh itself must see the same things.
    asyncssh = imported("asyncssh")

    from asyncssh_program import exercise
    bad = ClientKeys.generate(tmp_path / "bad").private()
    seen = {}
    for name, module in (("asyncssh", asyncssh), ("pssh.aio", aio)):
        work = tmp_path / name
        work.mkdir()
        seen[name] = asyncio.run(exercise(module, server.address, server.port, server.user,
                                          server.keys.private(), str(work), bad))
    assert seen["pssh.aio"] == seen["asyncssh"]
    assert seen["asyncssh"]["run"] == ("out\n", "err\n", 2, 2, None)
    assert set(seen["asyncssh"]) == {"run", "check", "process", "stat", "listdir", "get",
                                     "progress", "denied"}


def test_sftp_file_objects(server, login, run_loop, tmp_path):
    path = str(tmp_path / "notes.txt")

    async def main():
        async with aio.connect(server.address, **login) as conn:
            async with conn.start_sftp_client() as sftp:
                async with sftp.open(path, "w") as fh:
                    await fh.write("first line\n")
                    await fh.write(b"second line\n")
                async with sftp.open(path, "a") as fh:
                    await fh.write("third\n")
                async with sftp.open(path, "rb") as fh:
                    head = await fh.read(5)
                    rest = await fh.read()
                    end = await fh.read(10)
                fh = await sftp.open(path)
                text = await fh.read()
                await fh.close()
                with pytest.raises(exc.SFTPError):
                    await sftp.open(path, "x")
                return head, rest, end, text
    head, rest, end, text = run_loop(main())
    assert (head, rest, end) == (b"first", b" line\nsecond line\nthird\n", b"")
    assert text == "first line\nsecond line\nthird\n"



def test_open_connection_and_local_port_forwarding(server, login, run_loop, echo_port):
    payload = os.urandom(300_000)

    async def main():
        async with aio.connect(server.address, **login) as conn:
            reader, writer = await conn.open_connection("127.0.0.1", echo_port)
            writer.write(payload)
            writer.write_eof()
            direct = await reader.read()
            async with await conn.forward_local_port("", 0, "127.0.0.1", echo_port) as listener:
                results = []
                for _ in range(3):   # several connections through one listener
                    r, w = await asyncio.open_connection("127.0.0.1", listener.get_port())
                    w.write(payload)
                    w.write_eof()
                    results.append(await r.read())
                    w.close()
            with pytest.raises(exc.ProxyTargetError):
                await conn.open_connection("127.0.0.1", 1)   # nothing listens there
            return direct, results
    direct, results = run_loop(main())
    assert direct == payload and results == [payload] * 3


def test_connection_through_a_jump_host(servers, login, run_loop):
    first, second = servers.servers[:2]

    async def main():
        async with aio.connect(first.address, **login) as jump:
            before = None
            for _ in range(2):   # the first round lets the loop open what it keeps (uvloop)
                async with aio.connect(second.address, tunnel=jump, **login) as conn:
                    result = await conn.run("echo $SSH_CONNECTION", check=True)
                    client_ip, client_port, server_ip, _ = result.stdout.split()
                    # Who holds the connection's client end: a session process of sshd 1.
                    owners = tcp_owners(client_ip, int(client_port))
                    jump_sessions = _descendants(first.process.pid)
                before = before or open_fds()
            # The tunnel's channel closes with the connection; the jump host stays usable.
            after = await jump.run("echo still here")
            return server_ip, owners, jump_sessions, after.stdout, before, open_fds()
    server_ip, owners, jump_sessions, after, before, fds = run_loop(main())
    assert server_ip == second.address
    assert owners and set(owners) <= set(jump_sessions)  # sshd 1 connected onward
    assert after == "still here\n" and fds == before


def test_a_silent_server_is_declared_lost_by_keepalives(run_loop, tmp_path):
    from pssh.sshd import OpenSSHServer

    with OpenSSHServer(address()) as silent:
        login = dict(port=silent.port, username=silent.user, client_keys=[silent.keys.private()],
                     known_hosts=trusting(tmp_path / "kh", silent), agent_path=None)

        async def main():
            async with aio.connect(silent.address, keepalive_interval=1, keepalive_count_max=2,
                                   **login) as conn:
                running = asyncio.ensure_future(conn.run("sleep 60"))
                # The command runs (its session and process made) before the server hangs.
                await eventually_async(lambda: any(b"sleep" in cmdline(p) for p in
                                                   _descendants(silent.process.pid)),
                                       what="the remote sleep 60 started")
                with stopped(silent):   # TCP still answers, SSH does not
                    # No read timeout is set: only the keepalives can end this wait.
                    with pytest.raises(exc.ConnectionError) as info:
                        await asyncio.wait_for(running, 60)
                return info.value, conn.session
        error, session = run_loop(main())
    assert "server not responding" in str(error) and silent.address in str(error)
    assert session is None  # the connection was closed


def test_agent_forwarding_lets_remote_commands_use_the_local_agent(server, login, run_loop,
                                                                   agent):
    async def main():
        async with aio.connect(server.address, agent_forwarding=True,
                               **dict(login, agent_path=agent)) as conn:
            listed = await conn.run("ssh-add -l")
            # Host 1 logs in onward to itself with the agent's key (in no file there).
            onward = await conn.run(
                f"ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                f" -o IdentitiesOnly=no -o IdentityFile=/dev/null -p {server.port}"
                f" {server.user}@{server.address} echo onward", check=True)
        async with aio.connect(server.address, **dict(login, agent_path=agent)) as conn:
            unforwarded = await conn.run("ssh-add -l")
        return listed, onward.stdout, unforwarded.exit_status
    listed, onward, unforwarded = run_loop(main())
    assert listed.exit_status == 0 and "RSA" in listed.stdout
    assert onward == "onward\n"
    assert unforwarded == 2   # no agent there without forwarding


def test_scp_both_ways_keeps_the_mode(server, login, run_loop, tmp_path):
    data = os.urandom(5 * 1024 * 1024 + 3)
    (tmp_path / "src").write_bytes(data)
    os.chmod(tmp_path / "src", 0o751)
    os.utime(tmp_path / "src", (1_600_000_000, 1_600_000_100))

    async def main():
        async with aio.connect(server.address, **login) as conn:
            await aio.scp(str(tmp_path / "src"), (conn, str(tmp_path / "remote")))
            await aio.scp((conn, str(tmp_path / "remote")), str(tmp_path / "back"))
            with pytest.raises(exc.SCPError, match="missing"):
                await aio.scp((conn, str(tmp_path / "missing")), str(tmp_path / "never"))
    run_loop(main())
    remote, back = os.stat(tmp_path / "remote"), os.stat(tmp_path / "back")
    assert (tmp_path / "remote").read_bytes() == data == (tmp_path / "back").read_bytes()
    assert stat.S_IMODE(remote.st_mode) == stat.S_IMODE(back.st_mode) == 0o751
    assert int(back.st_mtime) == int(remote.st_mtime)   # a download keeps the remote times
    assert not (tmp_path / "never").exists()
    assert sorted(os.listdir(tmp_path)) == ["back", "known_hosts", "remote", "src"]


def test_sftp_recursive_put_and_get(server, login, run_loop, tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    (tree / "a.txt").write_text("a")
    (tree / "sub" / "b.bin").write_bytes(os.urandom(70_000))
    (tree / "sub" / "deeper" / "c").write_text("c")
    (tree / "sub").chmod(0o750)

    def listing(root):
        return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else None)
                      for p in root.rglob("*"))

    async def main():
        async with aio.connect(server.address, **login) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.put(str(tree), str(tmp_path / "remote"), recurse=True)
                (tmp_path / "local").mkdir()
                await sftp.get(str(tmp_path / "remote"), str(tmp_path / "local"), recurse=True)
    run_loop(main())
    assert listing(tmp_path / "remote") == listing(tree)
    assert listing(tmp_path / "local" / "remote") == listing(tree)   # into the existing folder
    assert stat.S_IMODE(os.stat(tmp_path / "remote" / "sub").st_mode) == 0o750


def test_remote_port_forwarding(server, login, run_loop, echo_port):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            async with await conn.forward_remote_port("127.0.0.1", 0, "127.0.0.1",
                                                      echo_port) as listener:
                port = listener.get_port()
                # A program on the server connects to its own port: we carry it to echo.
                results = [await conn.run(
                    f"exec 3<>/dev/tcp/127.0.0.1/{port}; echo hello {i} >&3; head -n 1 <&3",
                    check=True) for i in range(2)]
            return port, [r.stdout for r in results]
    port, outputs = run_loop(main())
    assert port > 0 and outputs == ["hello 0\n", "hello 1\n"]


def test_algorithm_lists_decide_what_is_negotiated(server, login, run_loop):
    from ssh2.session import LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_KEX, LIBSSH2_METHOD_MAC_CS

    async def main():
        async with aio.connect(server.address, encryption_algs=["aes256-ctr"],
                               mac_algs="hmac-sha2-512", kex_algs=["ecdh-sha2-nistp256"],
                               **login) as conn:
            methods = [conn.session.methods(kind) for kind in
                       (LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_MAC_CS, LIBSSH2_METHOD_KEX)]
            return methods, (await conn.run("echo ok")).stdout
    assert run_loop(main()) == (["aes256-ctr", "hmac-sha2-512", "ecdh-sha2-nistp256"], "ok\n")


def test_no_supported_algorithm_is_a_clear_error(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, encryption_algs="twofish-cbc", **login):
            pass
    with pytest.raises(exc.ConnectionError, match=f"{server.address}.*Ciphers 'twofish-cbc'"):
        run_loop(main())


def test_encrypted_key_errors_say_what_is_wrong(server, login, run_loop):
    login["client_keys"] = [server.keys.private("passphrase")]

    async def attempt(**more):
        async with aio.connect(server.address, **login, **more) as conn:
            return (await conn.run("echo in")).stdout
    with pytest.raises(exc.PKeyFileError, match="is encrypted: give its passphrase"):
        run_loop(attempt())
    with pytest.raises(exc.PKeyFileError, match="wrong passphrase") as info:
        run_loop(attempt(passphrase="wrong"))
    assert info.value.host == server.address
    assert run_loop(attempt(passphrase=PASSPHRASE)) == "in\n"


def test_cancellable_commands_are_stopped_on_the_server(server, login, run_loop, tmp_path):
    pidfile = tmp_path / "pid"

    async def main():
        async with aio.connect(server.address, **login) as conn:
            with pytest.raises(asyncio.TimeoutError):
                background = f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}; wait"
                await asyncio.wait_for(conn.run(background, cancellable=True), 1)
            proc = await conn.create_process("echo started; sleep 300", cancellable=True)
            assert await proc.stdout.readline() == "started\n"
            await proc.terminate()
            return await proc.wait(10)
    done = run_loop(main())
    assert done.exit_signal[0] == "TERM" and done.returncode == -15
    # The cancelled run's background child was signalled before the connection closed.
    pid = int(pidfile.read_text())
    eventually(lambda: not alive(pid), what=f"sleep {pid} ended with its cancelled run")
