"""pssh.aio's callback API (asyncssh's SSHClient, SSHClientSession, SSHTCPSession, listeners)
and stream redirection, against real sshd, on the default loop and uvloop."""
from __future__ import annotations

import asyncio
import base64
import errno
import os
import subprocess

import pytest

from conftest import PASSWORD, trusting
from pssh import aio
from pssh.known_hosts import fingerprint



@pytest.fixture
def login(server, tmp_path):
    """connect() arguments, with a known_hosts file that holds the server's keys."""
    return dict(port=server.port, username=server.user, client_keys=[server.keys.private()],
                known_hosts=trusting(tmp_path / "known_hosts", server), agent_path=None)



class Recorder(aio.SSHClient):
    """Notes every callback."""

    def __init__(self):
        self.events = []

    def connection_made(self, conn):
        self.events.append(("made", conn.get_extra_info("peername")[0]))

    def begin_auth(self, username):
        self.events.append(("begin_auth", username))

    def auth_completed(self):
        self.events.append(("auth_completed",))

    def connection_lost(self, exc):
        self.events.append(("lost", exc))


def test_create_connection_reports_the_connections_life(server, login, run_loop):
    async def main():
        conn, client = await aio.create_connection(Recorder, server.address, **login)
        async with conn:
            out = (await conn.run("echo hi")).stdout
        return client.events, out
    events, out = run_loop(main())
    assert out == "hi\n"
    assert events == [("made", server.address), ("begin_auth", server.user),
                      ("auth_completed",), ("lost", None)]


def test_credentials_come_from_the_client_when_asked(server, login, run_loop, tmp_path):
    asked = []

    class Keys(aio.SSHClient):
        def public_key_auth_requested(self):
            asked.append("key")
            return server.keys.private() if asked.count("key") == 1 else None

    class Passwords(aio.SSHClient):
        def password_auth_requested(self):
            asked.append("password")
            return {1: "wrong", 2: PASSWORD}.get(asked.count("password"))

    class Kbdint(aio.SSHClient):
        def kbdint_auth_requested(self):
            return ""

        def kbdint_challenge_received(self, name, instructions, lang, prompts):
            asked.append(("kbdint", len(prompts)))
            return [PASSWORD] * len(prompts)

    async def main():
        done = []
        for factory in (Keys, Passwords, Kbdint):
            conn, _ = await aio.create_connection(factory, server.address,
                                                  **dict(login, client_keys=[]))
            async with conn:
                done.append((await conn.run("echo in")).stdout)
        return done
    assert run_loop(main()) == ["in\n"] * 3
    assert asked[:3] == ["key", "password", "password"]
    # PAM's conversation: the password prompt (and possibly an empty round before it).
    assert ("kbdint", 1) in asked[3:] and set(asked[3:]) <= {("kbdint", 0), ("kbdint", 1)}


def test_no_credentials_from_the_client_is_permission_denied(server, login, run_loop):
    async def main():
        await aio.create_connection(aio.SSHClient, server.address, **dict(login, client_keys=[]))
    with pytest.raises(aio.PermissionDenied, match=server.address):
        run_loop(main())


def test_the_client_decides_on_unknown_host_keys(server, login, run_loop, tmp_path):
    login["known_hosts"] = str(tmp_path / "unknown")   # no file: every host is unknown
    seen = []

    def client(answer):
        class Deciding(aio.SSHClient):
            def validate_host_public_key(self, host, addr, port, key):
                seen.append((host, addr, port, key.get_fingerprint(), key.get_algorithm()))
                return answer
        return Deciding

    async def main():
        with pytest.raises(aio.HostKeyNotVerifiable, match=server.address):
            await aio.create_connection(client(False), server.address, **login)
        conn, _ = await aio.create_connection(client(True), server.address, **login)
        async with conn:
            return (await conn.run("echo trusted")).stdout
    assert run_loop(main()) == "trusted\n"
    known = {fingerprint(base64.b64decode(line.split()[2]))
             for line in server.known_hosts_lines().splitlines()}
    assert [s[:3] for s in seen] == [(server.address, server.address, server.port)] * 2
    assert seen[0][3] in known and seen[0][3] == seen[1][3]
    assert not os.path.exists(login["known_hosts"])   # accepted, not recorded


class Collecting(aio.SSHClientSession):
    def __init__(self):
        self.out, self.err, self.events = [], [], []

    def connection_made(self, chan):
        self.chan = chan
        self.events.append("made")

    def session_started(self):
        self.events.append("started")

    def data_received(self, data, datatype):
        (self.err if datatype == aio.EXTENDED_DATA_STDERR else self.out).append(data)

    def eof_received(self):
        self.events.append("eof")

    def exit_status_received(self, status):
        self.events.append(("status", status))

    def exit_signal_received(self, signal, core_dumped, msg, lang):
        self.events.append(("signal", signal))

    def connection_lost(self, exc):
        self.events.append(("lost", exc))


def test_create_session_delivers_output_eof_and_exit(server, login, run_loop):
    async def main():
        async with aio.connect(server.address, **login) as conn:
            chan, session = await conn.create_session(
                Collecting, "cat; echo done >&2; exit 4", env={"TEST_CB": "x"})
            chan.write("line one\n")
            chan.write(b"line two\n")
            chan.write_eof()
            await chan.wait_closed()
            killed_chan, killed = await conn.create_session(Collecting, "kill -TERM $$")
            await killed_chan.wait_closed()
            return session, chan.get_exit_status(), killed, killed_chan.get_returncode()
    session, status, killed, returncode = run_loop(main())
    assert "".join(session.out) == "line one\nline two\n" and "".join(session.err) == "done\n"
    assert session.events == ["made", "started", "eof", ("status", 4), ("lost", None)]
    assert status == 4
    assert killed.events[-2:] == [("signal", "TERM"), ("lost", None)] and returncode == -15


def test_a_paused_session_gets_all_its_data_in_bounded_reads(server, login, run_loop):
    size = 4 * 1024 * 1024

    class Slow(aio.SSHClientSession):
        def connection_made(self, chan):
            self.chan, self.total = chan, 0

        def data_received(self, data, datatype):
            self.total += len(data)
            self.chan.pause_reading()
            asyncio.get_running_loop().call_soon(self.chan.resume_reading)

    async def main():
        async with aio.connect(server.address, **login) as conn:
            chan, session = await conn.create_session(Slow, f"head -c {size} /dev/zero",
                                                      encoding=None)
            await chan.wait_closed()
            return session.total, chan.get_exit_status()
    assert run_loop(main()) == (size, 0)


def test_direct_tcp_session_and_channel(server, login, run_loop, echo_port):
    class Echoed(aio.SSHTCPSession):
        def __init__(self):
            self.data = []

        def data_received(self, data, datatype):
            self.data.append(data)

    async def main():
        async with aio.connect(server.address, **login) as conn:
            chan, session = await conn.create_connection(Echoed, "127.0.0.1", echo_port)
            chan.write(b"ping " * 1000)
            chan.write_eof()
            await chan.wait_closed()
            with pytest.raises(aio.ChannelOpenError):
                await conn.create_connection(Echoed, "127.0.0.1", 1)
            return b"".join(session.data), chan.get_extra_info("connection") is conn
    assert run_loop(main()) == (b"ping " * 1000, True)


def test_listeners_with_sessions_handlers_and_forwarders(server, login, run_loop, echo_port,
                                                        busy_port):
    origins = []

    class Echo(aio.SSHTCPSession):
        def connection_made(self, chan):
            self.chan = chan

        def data_received(self, data, datatype):
            self.chan.write(data.upper())

    def sessions(orig_host, orig_port):
        origins.append((orig_host, orig_port))
        return Echo()

    def refusing(orig_host, orig_port):
        raise aio.ChannelOpenError(aio.OPEN_ADMINISTRATIVELY_PROHIBITED, "not from there")

    def handlers(orig_host, orig_port):
        async def handle(reader, writer):
            while line := await reader.readline():
                writer.write(line[::-1])
            writer.close()
        return handle

    async def talk(port, data=b"abc\n"):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(data)
            writer.write_eof()
            answer = await reader.read()
        except (ConnectionResetError, OSError) as exc:
            # A refused forward: sshd closes the accepted socket as soon as the channel
            # open fails, which may be before our EOF goes out (ENOTCONN) or our data
            # arrives (a reset): to the client that is a connection closed unanswered.
            if not isinstance(exc, ConnectionResetError) and exc.errno != errno.ENOTCONN:
                raise
            answer = b""
        writer.close()
        return answer

    async def main():
        async with aio.connect(server.address, **login) as conn:
            answers = []
            async with await conn.create_server(sessions, "127.0.0.1", 0,
                                                encoding="utf-8") as listener:
                answers.append(await talk(listener.get_port()))
            async with conn.start_server(handlers, "127.0.0.1", 0) as listener:
                answers.append(await talk(listener.get_port()))
            listener = await conn.create_server(refusing, "127.0.0.1", 0)
            answers.append(await talk(listener.get_port()))
            listener.close()
            await listener.wait_closed()
            listener = await conn.create_server(
                lambda host, port: conn.forward_connection("127.0.0.1", echo_port), "", 0)
            answers.append(await talk(listener.get_port(), b"through\n"))
            listener.close()
            with pytest.raises(aio.ChannelListenError, match=server.address):
                await conn.create_server(sessions, "127.0.0.1", busy_port)
            return answers
    assert run_loop(main()) == [b"ABC\n", b"\ncba", b"", b"through\n"]
    assert origins == [("", 0)]   # libssh2 does not say where a connection came from


def test_redirected_streams(server, login, run_loop, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("b\na\nc\n")

    async def main():
        async with aio.connect(server.address, **login) as conn:
            await conn.run("sort", stdin=str(source), stdout=str(tmp_path / "out.txt"))
            merged = await conn.run("echo out; echo err >&2", stderr=aio.STDOUT)
            nothing = await conn.run("cat", stdin=aio.DEVNULL, stdout=aio.DEVNULL)
            first = await conn.create_process("printf 'x\\ny\\n'")
            piped = await conn.run("tac", stdin=first.stdout)
            with open(tmp_path / "err.txt", "w") as fh:
                await conn.run("echo to a file >&2", stderr=fh)
            local = subprocess.Popen(["printf", "p\\nq\\n"], stdout=subprocess.PIPE)
            from_pipe = await conn.run("tac", stdin=local.stdout)
            local.wait()
            return merged, nothing, piped, from_pipe
    merged, nothing, piped, from_pipe = run_loop(main())
    assert from_pipe.stdout == "q\np\n"
    assert (tmp_path / "out.txt").read_text() == "a\nb\nc\n"
    assert sorted(merged.stdout.splitlines()) == ["err", "out"] and merged.stderr == ""
    assert (nothing.stdout, nothing.exit_status) == ("", 0)
    assert piped.stdout == "y\nx\n"
    assert (tmp_path / "err.txt").read_text() == "to a file\n"


def test_scp_with_host_strings(server, login, run_loop, tmp_path, monkeypatch):
    remote = tmp_path / "remote.txt"
    remote.write_text("copied\n")
    local = tmp_path / "here"
    local.mkdir()
    monkeypatch.chdir(local)

    async def main():
        args = dict(login, known_hosts=None)
        await aio.scp(f"{server.address}:{remote}", **args)
        await aio.scp("remote.txt", f"{server.user}@{server.address}:{tmp_path}/back.txt",
                      **args)
    run_loop(main())
    assert (local / "remote.txt").read_text() == "copied\n"
    assert (tmp_path / "back.txt").read_text() == "copied\n"
