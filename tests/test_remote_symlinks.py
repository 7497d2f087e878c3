"""Symlinks on the server's side of a tree copy, against real sshd: an upload writes
nothing through a symlink below its target, a download never follows one into a
directory (a loop of them never ends otherwise), and parallel-ssh's own recursion steps
(``_copy_remote_dir``, ``_scp_recv_dir``) walk with the same checks.

The server runs on this machine, so the remote tree is made here (``os.symlink``), as a
user of that host, or an earlier run, would have left it. Every front end is tried where
it has the behaviour: the gevent client over SFTP and over SCP, pssh.aio, the CLI.
"""
from __future__ import annotations

import asyncio
import logging
import os
import stat

import pytest

from pssh import aio
from pssh import exceptions as exc
from pssh.clients import SSHClient
from pssh.sshd import ServerGroup
from conftest import trusting
from loopback import addresses
from test_cli import conn, pssh

FRONT_ENDS = ["sftp", "scp", "aio", "cli"]


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


@pytest.fixture
def client(group, tmp_path):
    with SSHClient(group.hosts[0], port=group.port, pkey=group.keys.private(),
                   allow_agent=False, identity_auth=False, ssh_config=False,
                   known_hosts=str(tmp_path / "kh"), num_retries=1, timeout=10) as c:
        yield c


def aio_sftp(group, tmp_path, use):
    """Runs ``use(sftp)`` on a pssh.aio SFTP client of the group's host."""
    async def main():
        async with aio.connect(group.hosts[0], port=group.port,
                               client_keys=[group.keys.private()],
                               known_hosts=trusting(tmp_path / "aio_kh", group),
                               agent_path=None, ssh_config=False, connect_timeout=10) as c:
            async with c.start_sftp_client() as sftp:
                await use(sftp)
    asyncio.run(main())


def said(result) -> str:
    """What a failed CLI run printed, both streams."""
    return result.stdout + result.stderr


# -- uploads ---------------------------------------------------------------------------------

@pytest.fixture
def planted(tmp_path):
    """A remote target ``remote/site`` that already holds ``sub -> outside/`` and
    ``f.txt -> victim``, and a local ``site`` to upload into it: ``sub/planted.txt``,
    ``f.txt``, ``ok.txt`` and a directory ``fresh`` the server does not have yet."""
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o700)
    victim = tmp_path / "victim"
    victim.write_text("victim\n")
    target = tmp_path / "remote" / "site"
    target.mkdir(parents=True)
    (target / "sub").symlink_to(outside)
    (target / "f.txt").symlink_to(victim)
    local = tmp_path / "local" / "site"
    (local / "sub").mkdir(parents=True)
    (local / "sub").chmod(0o755)
    (local / "sub" / "planted.txt").write_text("planted\n")
    (local / "f.txt").write_text("new\n")
    (local / "ok.txt").write_text("ok\n")
    (local / "fresh").mkdir()
    (local / "fresh" / "inner.txt").write_text("inner\n")
    return local, target, outside, victim


def copy_tree(front_end, group, client, tmp_path, up: bool, source, target):
    """Copy ``source`` to ``target`` recursively, ``up`` (an upload) or down; the error, a
    failed CLI run, or None. As scp, ``pssh copy`` copies into the target's parent under
    the source's name; ``pssh fetch`` puts it in ``target/<host>/<name>``."""
    try:
        if front_end == "cli":
            where = str(target.parent) if up else str(target)
            done = pssh("copy" if up else "fetch", "-H", group.hosts[0], *conn(group, tmp_path),
                        "-r", str(source), where)
            return None if done.returncode == 0 else done
        if front_end == "aio":
            aio_sftp(group, tmp_path, lambda sftp: (sftp.put if up else sftp.get)(
                str(source), str(target), recurse=True))
        else:
            copy = {("sftp", True): client.copy_file, ("scp", True): client.scp_send,
                    ("sftp", False): client.copy_remote_file,
                    ("scp", False): client.scp_recv}[front_end, up]
            copy(str(source), str(target), recurse=True)
    except exc.PSSHError as err:
        return err
    return None


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_upload_writes_nothing_through_a_remote_symlink_below_its_target(
        front_end, group, client, tmp_path, planted):
    local, target, outside, victim = planted
    error = copy_tree(front_end, group, client, tmp_path, True, local, target)
    # Nothing written through either link, nor chmod'ed: OpenSSH's sftp and scp write
    # outside/planted.txt and into victim, and give outside the mode of local/sub.
    assert list(outside.iterdir()) == []
    assert stat.S_IMODE(outside.stat().st_mode) == 0o700
    assert victim.read_text() == "victim\n"
    assert (target / "sub").is_symlink() and (target / "f.txt").is_symlink()
    # The rest of the tree is copied.
    assert (target / "ok.txt").read_text() == "ok\n"
    assert (target / "fresh" / "inner.txt").read_text() == "inner\n"
    # And the result says so, naming the host and the links.
    assert error is not None
    text = said(error) if front_end == "cli" else str(error)
    assert group.hosts[0] in text
    assert f"{target}/sub" in text and f"{target}/f.txt" in text and "symlink" in text
    if front_end == "cli":
        assert error.returncode == 1
    elif front_end == "aio":
        assert isinstance(error, aio.SFTPFailure)
    else:
        assert isinstance(error, exc.SCPError if front_end == "scp" else exc.SFTPIOError)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_upload_into_a_target_that_is_a_symlink_follows_it(front_end, group, client,
                                                             tmp_path):
    """The target itself is the user's to choose, as scp and sftp take it: a link there is
    followed (``current -> releases/2``); only what lies below it is the server's."""
    release = tmp_path / "remote" / "releases" / "2"
    release.mkdir(parents=True)
    current = tmp_path / "remote" / "current"
    current.symlink_to(release)
    local = tmp_path / "local" / "current"
    local.mkdir(parents=True)
    (local / "app.conf").write_text("conf\n")
    error = copy_tree(front_end, group, client, tmp_path, True, local, current)
    assert error is None, said(error) if front_end == "cli" else error
    assert current.is_symlink()
    assert (release / "app.conf").read_text() == "conf\n"


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_single_file_upload_onto_a_remote_symlink_writes_the_file_it_names(
        front_end, group, client, tmp_path):
    """As scp, sftp, parallel-ssh and asyncssh do: ``/etc/resolv.conf -> ../run/...`` stays a
    link and the file it names gets the content. (SFTP used to replace the link.)"""
    real = tmp_path / "remote" / "real.conf"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "remote" / "app.conf"
    link.symlink_to(real)
    local = tmp_path / "app.conf"
    local.write_text("new\n")
    if front_end == "sftp":
        client.copy_file(str(local), str(link))
    elif front_end == "scp":
        client.scp_send(str(local), str(link))
    elif front_end == "aio":
        aio_sftp(group, tmp_path, lambda sftp: sftp.put(str(local), str(link)))
    else:
        done = pssh("copy", "-H", group.hosts[0], *conn(group, tmp_path), str(local),
                    str(link))
        assert done.returncode == 0, said(done)
    assert link.is_symlink() and real.read_text() == "new\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["app.conf", "real.conf"]


# -- downloads -------------------------------------------------------------------------------

def files_under(root) -> dict:
    """Every path under ``root`` (relative): a file's content, "dir", or "link"."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = "link"
            elif os.path.isdir(path):
                found[rel] = "dir"
            else:
                with open(path) as fh:
                    found[rel] = fh.read()
    return found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_loop_of_remote_directory_symlinks_is_not_followed(front_end, group, client,
                                                             tmp_path, caplog):
    """``a -> .`` and ``b -> .``: followed, 2**64 directories at the depth limit (the main
    had made 4,274 after 15 s). Not followed, as OpenSSH's ``sftp get -r``; a symlink to a
    file is copied as the file, as ``scp -r`` copies it."""
    remote = tmp_path / "remote" / "tree"
    (remote / "sub").mkdir(parents=True)
    (remote / "file.txt").write_text("file\n")
    (remote / "sub" / "inner.txt").write_text("inner\n")
    (remote / "a").symlink_to(".")
    (remote / "b").symlink_to(".")
    (remote / "up").symlink_to("..")
    (remote / "link.txt").symlink_to("file.txt")
    (remote / "dangling").symlink_to("nowhere")
    local = tmp_path / "local"
    with caplog.at_level(logging.WARNING, logger="pssh.core.tree"):
        error = copy_tree(front_end, group, client, tmp_path, False, remote, local)
    assert error is None, said(error) if front_end == "cli" else error
    root = local / group.hosts[0] / "tree" if front_end == "cli" else local
    assert files_under(root) == {"file.txt": "file\n", "link.txt": "file\n", "sub": "dir",
                                 "sub/inner.txt": "inner\n"}
    if front_end != "cli":
        warned = [r.getMessage() for r in caplog.records]
        assert any(group.hosts[0] in m and f"{remote}/a" in m and "symlink to a directory"
                   in m for m in warned), warned


def test_a_download_whose_root_is_a_symlink_follows_it(group, client, tmp_path):
    """The root is the user's choice (``fetch -r /srv/current``): followed."""
    release = tmp_path / "remote" / "releases" / "2"
    release.mkdir(parents=True)
    (release / "app.conf").write_text("conf\n")
    current = tmp_path / "remote" / "current"
    current.symlink_to(release)
    client.copy_remote_file(str(current), str(tmp_path / "got"), recurse=True)
    assert files_under(tmp_path / "got") == {"app.conf": "conf\n"}


# -- parallel-ssh's recursion steps ----------------------------------------------------------

@pytest.mark.parametrize("step, error", [("_copy_remote_dir", exc.SFTPIOError),
                                         ("_scp_recv_dir", exc.SCPError)])
def test_parallel_ssh_steps_check_each_name_against_the_callers_target(step, error, client,
                                                                       group, tmp_path):
    """parallel-ssh's steps took each listed name as a new root: a local ``name -> outside``
    became the target of that name's copy, and a remote symlink to a directory was
    followed. They walk with the core's checks now, against the caller's target."""
    outside = tmp_path / "outside"
    outside.mkdir()
    remote = tmp_path / "remote"
    (remote / "name").mkdir(parents=True)
    (remote / "name" / "inner.txt").write_text("inner\n")
    (remote / "good").mkdir()
    (remote / "good" / "g.txt").write_text("g\n")
    (remote / "top.txt").write_text("top\n")
    (remote / "dirlink").symlink_to(remote / "good")
    local = tmp_path / "local"
    local.mkdir()
    (local / "name").symlink_to(outside)
    sftp = client._make_sftp()
    with pytest.raises(error) as info:
        getattr(client, step)([b".", b"..", b"top.txt", b"name", b"good", b"dirlink",
                               b"../escape"], str(remote), str(local), sftp)
    assert list(outside.iterdir()) == []
    assert files_under(local) == {"name": "link", "top.txt": "top\n", "good": "dir",
                                  "good/g.txt": "g\n"}
    text = str(info.value)
    assert group.hosts[0] in text and "leads out" in text and f"{remote}/../escape" in text


def test_parallel_ssh_steps_still_copy_each_file_with_copy_remote_file(group, tmp_path):
    """parallel-ssh's contract, which its own suite checks (test_copy_remote_dir_encoding)
    and programs rely on when they override ``copy_remote_file``: the step copies each
    listed file with ``copy_remote_file(remote, local, recurse=True, sftp=..., encoding=...)``,
    names decoded with ``encoding``."""
    calls = []

    class Recording(SSHClient):
        def copy_remote_file(self, remote_file, local_file, recurse=False, sftp=None,
                             encoding="utf-8", callback=None):
            calls.append((remote_file, local_file, recurse, sftp, encoding))

    remote, local = str(tmp_path / "r_dir\xbc"), str(tmp_path / "l_dir\xbc")
    with Recording(group.hosts[0], port=group.port, pkey=group.keys.private(),
                   allow_agent=False, identity_auth=False, ssh_config=False,
                   known_hosts=str(tmp_path / "kh"), num_retries=1, timeout=10) as client:
        client._copy_remote_dir([b"\xbc1", b"\xbc2"], remote, local, None, encoding="latin-1")
    assert calls == [(f"{remote}/\xbc1", f"{local}/\xbc1", True, None, "latin-1"),
                     (f"{remote}/\xbc2", f"{local}/\xbc2", True, None, "latin-1")]
