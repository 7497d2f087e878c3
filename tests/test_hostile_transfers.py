"""Downloads from a compromised host never write outside their target, never take its
modes as given, and never keep a file the protocol did not say was complete.

The server is :class:`hostile.HostileServer`: its directory listings name
``../../x``, absolute paths and ``sub/../../y``; its files claim modes 06777 and
07777; its ``scp -f`` sends ``C6777``, or pads a file and then reports an error; it
says entries are symlinks (to an ancestor, to ``/etc``). Every front end is tried:
the gevent client (SFTP and SCP), pssh.aio, and ``pssh fetch -r`` / ``pssh copy -r``.
"""
from __future__ import annotations

import asyncio
import os
import shlex
import stat
import subprocess
import sys

import pytest

import pssh.aio
from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.sshd import ClientKeys

from hostile import Dir, File, HostileServer, Link, scp_source
from loopback import address

ADDRESS = address()


@pytest.fixture(scope="module")
def key(tmp_path_factory):
    return ClientKeys.generate(tmp_path_factory.mktemp("hostile-keys")).private()


def escaping_tree(escape_dir) -> dict:
    """/srv lists one good file, a good subdirectory, and names that lead out: each
    registered under the path a client that joined the name would ask for."""
    absolute = f"{escape_dir}/absolute"
    return {
        "/srv": Dir([b"good.txt", b"sub", b"../../dotdot", absolute.encode(),
                     b"sub/../../../through_sub", b"..", b".", b"nul\0name"]),
        "/srv/good.txt": File(b"good\n"),
        "/srv/sub": Dir([b"inner.txt"]),
        "/srv/sub/inner.txt": File(b"inner\n"),
        "/srv/../../dotdot": File(b"owned\n"),
        absolute: File(b"owned\n"),
        "/srv/sub/../../../through_sub": File(b"owned\n"),
    }


def serve_tree_by_scp(server: HostileServer):
    """``scp -f PATH`` answered from the server's tree (as the real scp would)."""
    async def serve(proc):
        path = shlex.split(proc.command)[-1]
        node = server.tree.get(server.resolve(path))
        data = node.data if isinstance(node, File) else b""
        mode = node.mode if isinstance(node, File) else 0o644
        await scp_source(f"C{mode:04o} {len(data)} x".encode(), data)(proc)
    return serve


def gevent_client(server: HostileServer, key: str, tmp_path) -> SSHClient:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(server.known_hosts_line())
    return SSHClient(server.address, port=server.port, pkey=key, allow_agent=False,
                     identity_auth=False, ssh_config=False, known_hosts=str(known_hosts),
                     host_key_policy="strict", num_retries=1, timeout=10)


def aio_run(server: HostileServer, key: str, tmp_path, use) -> None:
    """``use(conn)`` (a coroutine function) on a pssh.aio connection to ``server``."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(server.known_hosts_line())

    async def main():
        async with pssh.aio.connect(server.address, server.port, client_keys=[key],
                                    known_hosts=str(known_hosts), agent_path=None,
                                    ssh_config=False, connect_timeout=10) as conn:
            await use(conn)
    asyncio.run(main())


def aio_sftp(server: HostileServer, key: str, tmp_path, use) -> None:
    """``use(sftp)`` on a pssh.aio SFTP client of ``server``."""
    async def on(conn):
        async with conn.start_sftp_client() as sftp:
            await use(sftp)
    aio_run(server, key, tmp_path, on)


def aio_get(server: HostileServer, key: str, tmp_path, remote: str, local: str,
            **kwargs) -> None:
    aio_sftp(server, key, tmp_path, lambda sftp: sftp.get(remote, local, **kwargs))


def cli(server: HostileServer, key: str, tmp_path, subcommand: str, *args):
    """``pssh SUBCOMMAND`` against ``server`` (its key in a known_hosts of the test's)."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(server.known_hosts_line())
    return subprocess.run(
        [sys.executable, "-m", "pssh", subcommand, "-H", server.address, "--port",
         str(server.port), "-k", key, "--no-agent", "--known-hosts", str(known_hosts),
         "--host-key-policy", "strict", "-F", "none", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def cli_fetch(server: HostileServer, key: str, tmp_path, remote: str, local: str, *more):
    return cli(server, key, tmp_path, "fetch", *more, remote, local)


def fetch_tree(front_end, server, key, tmp_path, local):
    """Download /srv recursively with ``front_end``; the error it raised (None if none)."""
    if front_end in ("sftp", "scp"):
        with gevent_client(server, key, tmp_path) as client:
            try:
                if front_end == "sftp":
                    client.copy_remote_file("/srv", local, recurse=True)
                else:
                    client.scp_recv("/srv", local, recurse=True)
            except exc.PSSHError as err:
                return err
        return None
    if front_end == "aio":
        try:
            aio_get(server, key, tmp_path, "/srv", local, recurse=True)
        except exc.PSSHError as err:
            return err
        return None
    done = cli_fetch(server, key, tmp_path, "/srv", local, "-r")
    return None if done.returncode == 0 else done


@pytest.mark.parametrize("front_end", ["sftp", "scp", "aio", "cli"])
def test_names_that_lead_out_of_the_target_are_refused(front_end, key, tmp_path):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    with HostileServer(ADDRESS, escaping_tree(tmp_path)) as server:
        server.scp = serve_tree_by_scp(server)
        error = fetch_tree(front_end, server, key, tmp_path, str(deep / "target"))
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                     if p.is_file() and p.name not in ("known_hosts",))
    if front_end == "cli":
        base = f"a/b/target/{ADDRESS}/srv"
    else:
        base = "a/b/target"
    assert written == [f"{base}/good.txt", f"{base}/sub/inner.txt"]
    # Nothing outside was even asked for.
    assert not any("dotdot" in path or "absolute" in path or "through_sub" in path
                   for path in server.asked)
    # The result says so: an error naming the host and the names (non-zero in the CLI).
    assert error is not None
    text = str(error) if not isinstance(error, subprocess.CompletedProcess) \
        else error.stdout + error.stderr
    assert ADDRESS in text and "../../dotdot" in text and "not copied" in text


@pytest.mark.parametrize("front_end", ["sftp", "scp", "aio", "cli"])
def test_a_local_symlink_out_of_the_target_is_not_written_through(front_end, key, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    # asyncssh's get() copies into an existing directory (target/srv), ours into the target;
    # pssh fetch into target/<host>/srv.
    root = {"aio": target / "srv", "cli": target / ADDRESS / "srv"}.get(front_end, target)
    root.mkdir(parents=True)
    (root / "sub").symlink_to(outside)    # left there by someone, or an earlier run
    (root / "f.txt").symlink_to(outside / "f.txt")
    tree = {"/srv": Dir([b"sub", b"f.txt"]), "/srv/sub": Dir([b"inner.txt"]),
            "/srv/sub/inner.txt": File(b"inner\n"), "/srv/f.txt": File(b"f\n")}
    with HostileServer(ADDRESS, tree) as server:
        server.scp = serve_tree_by_scp(server)
        error = fetch_tree(front_end, server, key, tmp_path, str(target))
    assert list(outside.iterdir()) == []
    # A file is renamed into place: it replaces a link there, never writes through it.
    assert (root / "f.txt").read_text() == "f\n" and not (root / "f.txt").is_symlink()
    assert error is not None
    text = str(error) if not isinstance(error, subprocess.CompletedProcess) \
        else error.stdout + error.stderr
    assert "leads out" in text and ADDRESS in text


@pytest.mark.parametrize("front_end", ["sftp", "scp", "aio", "cli"])
def test_a_deep_remote_tree_ends_in_a_clear_error_not_a_recursion_error(front_end, key,
                                                                         tmp_path):
    """1,200 levels: more than Python's recursion limit, so a walk that recursed would end
    in a RecursionError, and one without a bound would copy them all (200 levels, as this
    test had, were copied without error by a recursive walk)."""
    tree, path = {}, "/srv"
    for _ in range(1200):
        tree[path] = Dir([b"d"])
        path += "/d"
    tree[path] = Dir([])
    with HostileServer(ADDRESS, tree) as server:
        error = fetch_tree(front_end, server, key, tmp_path, str(tmp_path / "target"))
    assert error is not None
    text = str(error) if not isinstance(error, subprocess.CompletedProcess) \
        else error.stdout + error.stderr
    assert "deeper than 64 levels" in text and ADDRESS in text
    assert "RecursionError" not in text
    if front_end == "sftp":
        assert isinstance(error, exc.SFTPIOError)
    deepest = max(len(p.relative_to(tmp_path).parts) for p in tmp_path.rglob("d"))
    assert deepest <= 64 + 4      # target[/host/srv]/d/...: 64 levels at the most


# -- symlinks the server says it has ------------------------------------------------------------

def error_text(error) -> str:
    return str(error) if not isinstance(error, subprocess.CompletedProcess) \
        else error.stdout + error.stderr


@pytest.mark.parametrize("front_end", ["sftp", "scp", "aio", "cli"])
def test_a_remote_symlink_to_a_directory_is_not_entered(front_end, key, tmp_path):
    """The server says /srv/loop is a symlink to /srv: followed, the walk went round it to
    the depth limit (and with two such links never ended). A symlink to a file is copied
    as the file."""
    tree = {"/srv": Dir([b"loop", b"f.txt", b"to_file"]), "/srv/loop": Link("/srv"),
            "/srv/f.txt": File(b"f\n"), "/srv/to_file": Link("/srv/f.txt")}
    with HostileServer(ADDRESS, tree) as server:
        server.scp = serve_tree_by_scp(server)
        error = fetch_tree(front_end, server, key, tmp_path, str(tmp_path / "target"))
    assert error is None, error_text(error)
    base = tmp_path / "target" / (f"{ADDRESS}/srv" if front_end == "cli" else "")
    assert sorted(str(p.relative_to(base)) for p in base.rglob("*")) == ["f.txt", "to_file"]
    assert (base / "to_file").read_text() == "f\n"
    assert not [path for path in server.asked if path.startswith("/srv/loop/")]


def put_tree(front_end, server: HostileServer, key: str, tmp_path, local: str, remote: str):
    """Upload ``local`` recursively to ``remote``; the error it raised (None if none)."""
    if front_end == "sftp":
        with gevent_client(server, key, tmp_path) as client:
            try:
                client.copy_file(local, remote, recurse=True)
            except exc.PSSHError as err:
                return err
        return None
    if front_end == "aio":
        try:
            aio_sftp(server, key, tmp_path, lambda sftp: sftp.put(local, remote, recurse=True))
        except exc.PSSHError as err:
            return err
        return None
    # As scp: into the existing parent, under the local name.
    done = cli(server, key, tmp_path, "copy", "-r", local, os.path.dirname(remote))
    return None if done.returncode == 0 else done


# SCP uploads need the server's own scp -t: tests/test_remote_symlinks.py runs them on sshd.
@pytest.mark.parametrize("front_end", ["sftp", "aio", "cli"])
def test_an_upload_asks_for_nothing_through_a_remote_symlink(front_end, key, tmp_path):
    """The server says /srv/up/sub is a symlink to /etc and /srv/up/f.txt one to
    /etc/passwd: no request of the upload may create, rename onto or chmod anything
    there (a server's file system would follow them)."""
    local = tmp_path / "up"
    (local / "sub").mkdir(parents=True)
    (local / "sub" / "planted").write_text("planted\n")
    (local / "f.txt").write_text("new\n")
    (local / "ok.txt").write_text("ok\n")
    tree = {"/srv": Dir([b"up"]), "/srv/up": Dir([b"sub", b"f.txt"]),
            "/srv/up/sub": Link("/etc"), "/etc": Dir([b"passwd"]),
            "/srv/up/f.txt": Link("/etc/passwd"), "/etc/passwd": File(b"root:x:0:0\n")}
    with HostileServer(ADDRESS, tree) as server:
        error = put_tree(front_end, server, key, tmp_path, str(local), "/srv/up")
        written = list(server.written)
        passwd = server.tree["/etc/passwd"]
        ok = server.tree.get("/srv/up/ok.txt")
    assert [path for path in written if path == "/etc" or path.startswith("/etc/")] == []
    assert passwd.data == b"root:x:0:0\n" and passwd.mode == 0o644
    assert isinstance(ok, File) and ok.data == b"ok\n"
    assert error is not None
    text = error_text(error)
    assert ADDRESS in text and "/srv/up/sub" in text and "/srv/up/f.txt" in text
    assert "symlink" in text


# -- modes -----------------------------------------------------------------------------------

@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("front_end", ["sftp", "scp", "aio", "cli"])
def test_special_bits_and_world_write_are_not_taken_from_the_server(front_end, key, tmp_path,
                                                                    umask_022):
    tree = {"/srv": Dir([b"setuid", b"all"], mode=0o7777),
            "/srv/setuid": File(b"#!/bin/sh\n", mode=0o6777),
            "/srv/all": File(b"x", mode=0o7777)}
    with HostileServer(ADDRESS, tree) as server:
        server.scp = serve_tree_by_scp(server)
        error = fetch_tree(front_end, server, key, tmp_path, str(tmp_path / "target"))
    assert error is None
    base = tmp_path / "target" / (f"{ADDRESS}/srv" if front_end == "cli" else "")
    for path in (base / "setuid", base / "all", base):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o7000 == 0, (path, oct(mode))       # no setuid, setgid, sticky
        assert mode & 0o022 == 0, (path, oct(mode))        # the umask applied
    if front_end != "aio":   # OpenSSH's rule: the remote permission bits, less the umask
        assert stat.S_IMODE((base / "setuid").stat().st_mode) == 0o755


def test_preserve_keeps_the_mode_whole_when_asked(key, tmp_path, umask_022):
    tree = {"/srv": Dir([b"tool"]), "/srv/tool": File(b"x", mode=0o4755)}
    with HostileServer(ADDRESS, tree) as server:
        aio_get(server, key, tmp_path, "/srv/tool", str(tmp_path / "tool"), preserve=True)
    assert stat.S_IMODE((tmp_path / "tool").stat().st_mode) == 0o4755


def test_scp_takes_no_special_bits_from_a_c6777_header(key, tmp_path, umask_022):
    with HostileServer(ADDRESS, scp=scp_source(b"C6777 5 evil", b"hello")) as server:
        with gevent_client(server, key, tmp_path) as client:
            client.scp_recv("/anything", str(tmp_path / "got"))
    assert (tmp_path / "got").read_bytes() == b"hello"
    assert stat.S_IMODE((tmp_path / "got").stat().st_mode) == 0o755
    assert not (tmp_path / "evil").exists()     # the server's name is not used either


# -- SCP's final status ------------------------------------------------------------------------

@pytest.mark.parametrize("front_end", ["gevent", "aio"])   # the CLI copies over SFTP only
@pytest.mark.parametrize("trailer, status", [
    (b"\x01scp: /data: Input/output error\n", 1),
    (b"\x02scp: fatal\n", 1),
    (b"\0", 1),          # said complete, then exited with an error
])
def test_an_scp_download_the_server_did_not_complete_is_not_kept(trailer, status, front_end,
                                                                  key, tmp_path):
    padded = b"\0" * 4096
    with HostileServer(ADDRESS, scp=scp_source(b"C0644 4096 data", padded, trailer,
                                               exit_status=status)) as server:
        with pytest.raises(exc.SCPError) as info:
            if front_end == "gevent":
                with gevent_client(server, key, tmp_path) as client:
                    client.scp_recv("/data", str(tmp_path / "data"))
            else:
                aio_run(server, key, tmp_path,
                        lambda conn: pssh.aio.scp((conn, "/data"), str(tmp_path / "data")))
    if front_end == "aio":
        assert isinstance(info.value, pssh.aio.SFTPError)   # asyncssh's scp() raises these
    assert ADDRESS in str(info.value) and "/data" in str(info.value)
    assert list(tmp_path.iterdir()) == [tmp_path / "known_hosts"]   # nothing, not even a .part


def test_a_complete_scp_download_is_kept(key, tmp_path):
    with HostileServer(ADDRESS, scp=scp_source(b"C0644 5 data", b"hello")) as server:
        with gevent_client(server, key, tmp_path) as client:
            client.scp_recv("/data", str(tmp_path / "data"))
    assert (tmp_path / "data").read_bytes() == b"hello"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("front_end", ["gevent", "aio"])
def test_an_scp_download_that_stops_ends_after_the_stall_limit(front_end, key, tmp_path,
                                                               monkeypatch):
    """No timeout set, a server that sends half a file and then nothing (keepalives still
    answered): the download ends after the stall limit (1 s here) instead of never, and
    leaves no file behind."""
    monkeypatch.setattr("pssh.core.sftp.STALL_TIMEOUT", 1.0)
    source = scp_source(b"C0644 10 data", b"hello", stall=True)
    with HostileServer(ADDRESS, scp=source) as server:
        with pytest.raises(exc.Timeout) as info:
            if front_end == "gevent":
                with gevent_client(server, key, tmp_path) as client:
                    client.timeout = client._link.timeout = None
                    client.scp_recv("/data", str(tmp_path / "data"))
            else:
                async def main():
                    async with pssh.aio.connect(
                            server.address, server.port, client_keys=[key],
                            known_hosts=str(tmp_path / "known_hosts"), agent_path=None,
                            ssh_config=False) as conn:
                        await pssh.aio.scp((conn, "/data"), str(tmp_path / "data"))
                (tmp_path / "known_hosts").write_text(server.known_hosts_line())
                asyncio.run(main())
    assert ADDRESS in str(info.value)
    assert list(tmp_path.iterdir()) == [tmp_path / "known_hosts"]   # nothing, not even a .part


# -- a server that stops answering SFTP ----------------------------------------------------------

STALLS = {"download": ("read",), "upload": ("write",), "listing": True}


def stalled_transfer(front_end, what, server, key, tmp_path, timeout):
    if front_end == "gevent":
        with gevent_client(server, key, tmp_path) as client:
            client.timeout = timeout
            client._link.timeout = timeout
            if what == "download":
                client.copy_remote_file("/srv/f", str(tmp_path / "f"))
            elif what == "upload":
                client.copy_file(str(tmp_path / "known_hosts"), "/srv/up")
            else:
                client.copy_remote_file("/srv", str(tmp_path / "t"), recurse=True)
        return

    async def main():
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(server.known_hosts_line())
        async with pssh.aio.connect(server.address, server.port, client_keys=[key],
                                    known_hosts=str(known_hosts), agent_path=None,
                                    ssh_config=False, timeout=timeout) as conn:
            async with conn.start_sftp_client() as sftp:
                if what == "download":
                    await sftp.get("/srv/f", str(tmp_path / "f"))
                elif what == "upload":
                    await sftp.put(str(known_hosts), "/srv/up")
                else:
                    await sftp.listdir("/srv")
    asyncio.run(main())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", STALLS)
@pytest.mark.parametrize("front_end", ["gevent", "aio"])
@pytest.mark.parametrize("timeout", [2, None])
def test_a_server_that_stops_answering_sftp_ends_the_call(front_end, what, timeout, key,
                                                          tmp_path, monkeypatch):
    """With timeout=2 the call ends at its deadline (the clean-up does not wait for a server
    that is not answering: it overran by 10 s); with no timeout at all, after the stall
    limit (pssh.core.sftp.STALL_TIMEOUT, 1 s here) instead of never."""
    import time
    monkeypatch.setattr("pssh.core.sftp.STALL_TIMEOUT", 1.0)
    tree = {"/srv": Dir([b"f"]), "/srv/f": File(b"x" * 100)}
    with HostileServer(ADDRESS, tree, stall_sftp=STALLS[what]) as server:
        started = time.monotonic()
        with pytest.raises(exc.Timeout) as info:
            stalled_transfer(front_end, what, server, key, tmp_path, timeout)
        elapsed = time.monotonic() - started
    assert ADDRESS in str(info.value)
    assert elapsed < 8, f"the deadline was overrun: {elapsed:.1f} s"
    assert not (tmp_path / "f").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
