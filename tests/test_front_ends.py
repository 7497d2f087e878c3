"""Both front ends decide the same way: the cases where their copies had drifted apart,
each through the gevent client (parallel-ssh's API) and pssh.aio (asyncssh's API, on the
default loop and on uvloop).

What each front end is asked to do is written once here in our settings' names; the
asyncio side is given them under asyncssh's names, taken from the settings' declarations
(pssh.core.settings), as a user would write them.
"""
import asyncio
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from pssh import exceptions as exc
from pssh.core.settings import declarations
from ssh2 import exceptions as ssh2_exc
from extras import imported
from loopback import address, addresses
from pssh.sshd import OpenSSHServer, ServerGroup
from conftest import trusting
from processes import processes_with, stopped
from serving import Serving
from waiting import gone

FRONT_ENDS = ["gevent", "asyncio", "uvloop"]
ASYNCSSH_NAME = {name: d.asyncssh or name for name, d in declarations()
                 if d.asyncssh is not None}


def aio_arguments(settings: dict) -> dict:
    """Our settings as pssh.aio.connect's keyword arguments (asyncssh's names)."""
    args = {}
    for name, value in settings.items():
        if name == "pkey":
            args["client_keys"] = [value]
        elif name == "allow_agent":
            if not value:
                args["agent_path"] = None
        elif name == "identity_auth":
            pass  # asyncssh: the default keys are tried unless client_keys are given
        elif name == "ssh_config":
            args["ssh_config"] = value
        else:
            args[ASYNCSSH_NAME[name]] = value
    return args


def run_command(front_end: str, host: str, command: str, **settings):
    """Connect to ``host`` with ``settings``, run ``command``: (stdout, exit status)."""
    if front_end == "gevent":
        from pssh.clients import SSHClient
        client = SSHClient(host, **settings)
        try:
            output = client.run_command(command)
            client.wait_finished(output)
            return "".join(line + "\n" for line in output.stdout), output.exit_code
        finally:
            client.close()
    from pssh import aio

    async def main():
        async with aio.connect(host, **aio_arguments(settings)) as conn:
            result = await conn.run(command)
            return result.stdout, result.exit_status
    return loop_run(front_end, main())


def upload(front_end: str, host: str, local: str, remote: str, **settings) -> None:
    if front_end == "gevent":
        from pssh.clients import SSHClient
        client = SSHClient(host, **settings)
        try:
            client.copy_file(local, remote)
        finally:
            client.close()
        return
    from pssh import aio

    async def main():
        async with aio.connect(host, **aio_arguments(settings)) as conn:
            async with conn.start_sftp_client() as sftp:
                await sftp.put(local, remote)
    loop_run(front_end, main())


def loop_run(front_end: str, coro):
    if front_end == "uvloop":
        return imported("uvloop").run(coro)
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


def login(group, tmp_path, **more) -> dict:
    return dict(port=group.port, pkey=group.keys.private(), allow_agent=False,
                identity_auth=False, ssh_config=False,
                known_hosts=trusting(tmp_path / "kh", group), num_retries=1, **more)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_user_certificate_logs_in(front_end, tmp_path):
    def keygen(*args):
        subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True)
    keygen("-t", "ed25519", "-N", "", "-f", str(tmp_path / "ca"))
    key = tmp_path / "user"
    keygen("-t", "ed25519", "-N", "", "-f", str(key))
    with OpenSSHServer(address(), config=[f"TrustedUserCAKeys {tmp_path / 'ca.pub'}"]) \
            as server:
        keygen("-s", str(tmp_path / "ca"), "-I", f"cert-{front_end}", "-n", server.user,
               "-V", "+1h", str(key) + ".pub")
        out = run_command(front_end, server.address, "echo by certificate", port=server.port,
                          pkey=str(key), allow_agent=False, identity_auth=False,
                          ssh_config=False, known_hosts=trusting(tmp_path / "kh", server),
                          num_retries=1)
        assert out == ("by certificate\n", 0)
        server.wait_for_log(f'Accepted certificate ID "cert-{front_end}"')


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_proxy_jump_from_the_ssh_config(front_end, tmp_path):
    with ServerGroup(addresses=addresses(2), config=["LogLevel DEBUG1"]) as hosts:
        jump, target = hosts.servers
        config = tmp_path / "config"
        config.write_text(textwrap.dedent(f"""\
            Host target
                HostName {target.address}
                ProxyJump jump
            Host jump
                HostName {jump.address}
            Host *
                Port {hosts.port}
                IdentityFile {hosts.keys.private()}
                IdentitiesOnly yes
                UserKnownHostsFile {trusting(tmp_path / 'kh', hosts)}
            """))
        out = run_command(front_end, "target", "echo behind the jump host",
                          ssh_config=str(config), num_retries=1)
        assert out == ("behind the jump host\n", 0)
        # The jump host carried it: sshd logs the direct-tcpip channel it opened.
        jump.wait_for_log(f"target {target.address} port {hosts.port}")


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_the_default_identity_files_are_the_same(front_end, group, tmp_path):
    # A key only at ~/.ssh/id_ecdsa, nothing given: OpenSSH's default files, in both.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    with open(group.keys.private("ecdsa"), "rb") as fh:
        (home / ".ssh" / "id_ecdsa").write_bytes(fh.read())
    (home / ".ssh" / "id_ecdsa").chmod(0o600)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_front_ends import run_command
        print(run_command({front_end!r}, {group.hosts[0]!r}, "echo default key",
                          port={group.port}, allow_agent=False, ssh_config=False,
                          known_hosts={trusting(tmp_path / 'kh', group)!r}, num_retries=1))
    """)
    env = dict(os.environ, HOME=str(home))
    env.pop("SSH_AUTH_SOCK", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "('default key\\n', 0)"


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_upload_replaces_a_file_but_never_what_it_cannot_replace(front_end, group,
                                                                    tmp_path):
    local = tmp_path / "new.txt"
    local.write_text("new contents\n")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "file.txt").write_text("old contents\n")
    upload(front_end, group.hosts[0], str(local), str(remote / "file.txt"),
           **login(group, tmp_path))
    assert (remote / "file.txt").read_text() == "new contents\n"
    # A directory in the way: the rename fails, and the directory (and what it holds)
    # is left alone; no partial file is left either.
    (remote / "dir.txt").mkdir()
    (remote / "dir.txt" / "keep").write_text("kept\n")
    with pytest.raises(exc.PSSHError):
        upload(front_end, group.hosts[0], str(local), str(remote / "dir.txt"),
               **login(group, tmp_path))
    assert (remote / "dir.txt" / "keep").read_text() == "kept\n"
    assert sorted(p.name for p in remote.iterdir()) == ["dir.txt", "file.txt"]


#: Where HangUp listens (an address of its own: a port there is HangUp's).
HANG_UP = address()


class HangUp(Serving):
    """A TCP port that accepts connections and closes them at once (a server whose SSH
    daemon keeps failing): counts the connections."""

    def __init__(self) -> None:
        self.accepted = 0
        super().__init__(self._hang_up, HANG_UP)

    def _hang_up(self, connection) -> None:
        self.accepted += 1  # closed by Serving as this returns


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_connecting_is_retried_num_retries_times(front_end, group, tmp_path):
    hang_up = HangUp()
    try:
        # parallel-ssh lets libssh2's error through (ssh2.exceptions), asyncssh raises
        # its own: both name the host.
        with pytest.raises((exc.PSSHError, OSError, ssh2_exc.SSH2Error)) as info:
            run_command(front_end, HANG_UP, "true",
                        **dict(login(group, tmp_path), port=hang_up.port, num_retries=3,
                               retry_delay=0.1))
        assert HANG_UP in str(info.value)
    finally:
        hang_up.close()
    assert hang_up.accepted == 3


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_ipv6_only_is_honoured(front_end, group, tmp_path):
    with pytest.raises(exc.NoIPv6AddressFoundError):
        run_command(front_end, group.hosts[0], "true", **login(group, tmp_path),
                    ipv6_only=True)



@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_server_that_stops_answering_is_declared_lost(front_end, group, tmp_path):
    settings = login(group, tmp_path, keepalive_seconds=1, keepalive_count_max=2)
    server = group.servers[1]
    if front_end == "gevent":
        from pssh.clients import SSHClient
        client = SSHClient(server.address, **settings)
        output = client.run_command("sleep 60")
        with stopped(server), pytest.raises(exc.ConnectionError) as info:
            client.wait_finished(output, timeout=60)
        client.close()
    else:
        from pssh import aio

        async def main():
            async with aio.connect(server.address, **aio_arguments(settings)) as conn:
                process = await conn.create_process("sleep 60")
                with stopped(server):
                    await process.wait(60)
        with pytest.raises(exc.ConnectionError) as info:
            loop_run(front_end, main())
    assert "server not responding" in str(info.value) and server.address in str(info.value)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_cancellable_command_is_stopped_on_the_server(front_end, group, tmp_path):
    sleeper = f"sleep 351.{uuid.uuid4().int % 10**9}"  # this test's alone
    settings = login(group, tmp_path)
    if front_end == "gevent":
        from pssh.clients import SSHClient
        client = SSHClient(group.hosts[0], **settings)
        output = client.run_command(f"echo started; {sleeper}", cancellable=True)
        assert next(iter(output.stdout)) == "started"
        assert client.cancel(output)
        client.close()
    else:
        from pssh import aio

        async def main():
            async with aio.connect(group.hosts[0], **aio_arguments(settings)) as conn:
                process = await conn.create_process(f"echo started; {sleeper}",
                                                    cancellable=True)
                assert await process.stdout.readline() == "started\n"
                await process.terminate()
        loop_run(front_end, main())
    assert gone(lambda: processes_with(sleeper)) == []
