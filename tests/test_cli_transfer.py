"""``pssh copy`` puts files where ``scp`` puts them, and ``pssh fetch`` speaks in flags.

OpenSSH's ``scp``, run against the same server, is the reference. The servers run on
this machine, so a remote path is a local one: each case copies to one host, into a
directory of its own, and compares the trees scp and pssh leave.
"""
import os
import subprocess

import pytest

from loopback import addresses
from pssh.sshd import ServerGroup
from test_cli import conn, pssh


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


def scp(group, *args):
    return subprocess.run(
        ["scp", "-F", "none", "-o", f"UserKnownHostsFile={group.known_hosts_file()}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
         "-o", "IdentitiesOnly=yes", "-i", group.keys.private(), "-P", str(group.port),
         *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def tree(root):
    """Every path under ``root`` (relative), with each file's content."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(directory, name), root)] = "dir"
        for name in files:
            path = os.path.join(directory, name)
            with open(path) as fh:
                found[os.path.relpath(path, root)] = fh.read()
    return found


# (what is copied: "site" a directory, "file.txt" a file, as given on the command line;
#  where to: a target under the case's directory; which directories exist there first)
CASES = [
    ("site", "existing/", ["existing"]),
    ("site", "existing", ["existing"]),
    ("site/", "existing", ["existing"]),
    ("site", "new", []),
    ("site", "new/", []),
    ("file.txt", "existing", ["existing"]),
    ("file.txt", "existing/", ["existing"]),
    ("file.txt", "new", []),
    ("file.txt", "new/", []),
]


def test_copy_puts_things_where_scp_puts_them(group, tmp_path):
    # Today's main copied site's contents into an existing directory (scp makes
    # existing/site), failed to copy a file into one, and made "new/" where scp refuses.
    source = tmp_path / "source"
    (source / "site" / "sub").mkdir(parents=True)
    (source / "site" / "index.html").write_text("<p>hi</p>\n")
    (source / "site" / "sub" / "style.css").write_text("p {}\n")
    (source / "file.txt").write_text("a file\n")
    host = group.hosts[0]
    differences = []
    for number, (what, target, existing) in enumerate(CASES):
        outcomes = {}
        for tool in ("scp", "pssh"):
            where = tmp_path / f"case{number}-{tool}"
            where.mkdir()
            for name in existing:
                (where / name).mkdir()
            local = os.path.join(str(source), what)
            remote = os.path.join(str(where), target)
            recursive = ["-r"] if what.startswith("site") else []
            if tool == "scp":
                done = scp(group, *recursive, local, f"{host}:{remote}")
            else:
                done = pssh("copy", "-H", host, *conn(group, tmp_path), *recursive, local,
                            remote)
            outcomes[tool] = (done.returncode == 0, tree(where))
        if outcomes["scp"] != outcomes["pssh"]:
            differences.append((what, target, outcomes))
    assert differences == []


def test_fetch_of_a_directory_without_r_says_to_use_r(group, tmp_path):
    remote = tmp_path / "remote-dir"
    remote.mkdir()
    (remote / "f").write_text("x\n")
    done = pssh("fetch", "-H", group.hosts[0], *conn(group, tmp_path), str(remote),
                str(tmp_path / "fetched"))
    assert done.returncode == 1
    assert f"{remote} is a directory: add -r to fetch it" in done.stderr
    assert "recurse" not in done.stderr  # the API's keyword means nothing here
