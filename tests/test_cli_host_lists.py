"""Host lists through the real ``pssh`` command: node sets in ``-H``/``-w``/``-x`` and
``pssh hosts``, two ports on one address, hosts written twice, one line per distinct
failure. Real sshd hosts on loopback."""
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from loopback import addresses
from pssh.cli.hosts import fold
from pssh.cli.options import EXAMPLES
from pssh.sshd import OpenSSHServer, ServerGroup, free_port
from test_cli import pssh

REPO = Path(__file__).resolve().parent.parent
REFUSED = addresses(3)  # nobody listens on these addresses
# Each host's own answer: the address and port it was reached on.
WHERE = 'echo "$SSH_CONNECTION" | cut -d" " -f3,4'


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


@pytest.fixture(scope="module")
def second_port(group):
    """Another sshd on the group's first address, on a port of its own."""
    with OpenSSHServer(group.hosts[0], keys=group.keys) as server:
        yield server.port


def conn(group, tmp_path):
    """The group's key, a private known_hosts holding the group's hosts (no "Permanently
    added" lines among the messages the tests read), no ssh config (the port: each
    test's)."""
    known_hosts = tmp_path / "known_hosts"
    if not known_hosts.exists():
        shutil.copyfile(group.known_hosts_file(), known_hosts)
    return ["-k", group.keys.private(), "--no-agent", "-F", "none",
            "--known-hosts", str(known_hosts), "--progress", "never"]


def streamed(stdout):
    """``[label] line`` lines as (label, line) pairs."""
    return [tuple(re.fullmatch(r"\[(.*?)\] (.*)", line).groups()) for line in stdout.splitlines()]


def test_pssh_hosts_reads_node_sets():
    assert pssh("hosts", "web[1-3],db1").stdout.split() == ["web1", "web2", "web3", "db1"]
    assert pssh("hosts", "-w", "web1,web2").stdout.split() == ["web1", "web2"]
    assert pssh("hosts", "-H", "web[01-40]", "-x", "web[13,27]", "--fold").stdout == \
        "web[01-12,14-26,28-40]\n"
    assert pssh("hosts", "user@web[1-3]:2222").stdout.split() == \
        ["user@web1:2222", "user@web2:2222", "user@web3:2222"]
    assert pssh("hosts", "n[1-9/2]", "--fold").stdout == "n[1,3,5,7,9]\n"
    assert pssh("hosts", "web1 web[1-2],web1", "--count").stdout == "2\n"
    assert pssh("hosts", "web[1-40]!web[13,27]", "--count").stdout == "38\n"
    result = pssh("hosts", "web[1-3],,db1")
    assert result.returncode == 2 and "a node is missing before ','" in result.stderr


def test_commas_dash_w_and_node_set_exclusions_pick_the_hosts(group, tmp_path):
    port = ["--port", str(group.port)]
    result = pssh("run", "-H", ",".join(group.hosts), *port, *conn(group, tmp_path), "--",
                  WHERE)
    assert result.returncode == 0, result.stderr
    assert sorted(streamed(result.stdout)) == \
        sorted((host, f"{host} {group.port}") for host in group.hosts)
    # -w, with the hosts folded, less a node set of two of them (-x, or ClusterShell's !)
    left_out = f"{group.hosts[1]},{group.hosts[2]}"
    for hosts in (["-w", fold(group.hosts), "-x", left_out],
                  ["-w", f"{fold(group.hosts)}!{fold(group.hosts[1:])}"]):
        result = pssh("run", *hosts, *port, *conn(group, tmp_path), "--", WHERE)
        assert result.returncode == 0, result.stderr
        assert streamed(result.stdout) == [(group.hosts[0], f"{group.hosts[0]} {group.port}")]


def test_two_ports_on_one_address_are_two_hosts(group, second_port, tmp_path):
    address = group.hosts[0]
    first, second = f"{address}:{group.port}", f"{address}:{second_port}"
    # Streamed: the entry without a port is labelled with the run's (--port).
    result = pssh("run", "-H", f"{address},{second}", "--port", str(group.port),
                  *conn(group, tmp_path), "--", WHERE)
    assert result.returncode == 0, result.stderr
    assert sorted(streamed(result.stdout)) == sorted([
        (first, f"{address} {group.port}"), (second, f"{address} {second_port}")])
    # JSON and --output-dir: one record and one set of files each.
    result = pssh("run", "--json", "-H", f"{first},{second}", *conn(group, tmp_path), "--",
                  WHERE)
    records = {r["host"]: r["stdout"] for r in map(json.loads, result.stdout.splitlines())}
    assert records == {first: f"{address} {group.port}", second: f"{address} {second_port}"}
    out = tmp_path / "runs"
    result = pssh("run", "--output-dir", str(out), "-H", f"{first} {second}",
                  *conn(group, tmp_path), "--", WHERE)
    assert result.returncode == 0, result.stderr
    assert (out / f"{first}.stdout").read_text() == f"{address} {group.port}\n"
    assert (out / f"{second}.stdout").read_text() == f"{address} {second_port}\n"
    # Errors too: a third port there that nobody listens on.
    nobody = f"{address}:{free_port(address)}"
    result = pssh("run", "-H", f"{address},{nobody}", "--port", str(group.port),
                  *conn(group, tmp_path), "--", "true")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"pssh: {nobody}: cannot connect: Connection refused"]


def test_a_host_written_twice_runs_once(group, tmp_path):
    host = group.hosts[0]
    result = pssh("run", "-H", f"{host},{host}:{group.port} {fold(group.hosts)}", "-H", host,
                  "--port", str(group.port), *conn(group, tmp_path), "--", WHERE)
    assert result.returncode == 0, result.stderr
    assert sorted(label for label, _ in streamed(result.stdout)) == sorted(group.hosts)


def test_the_same_failure_on_many_hosts_is_one_line(group, tmp_path):
    port = ["--port", str(group.port)]
    odd = group.hosts[0]
    command = f'case "$SSH_CONNECTION" in *" {odd} "*) exit 0;; esac; exit 3'
    result = pssh("run", "-H", ",".join([*REFUSED, *group.hosts]), *port,
                  *conn(group, tmp_path), "--", command)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"pssh: {fold(REFUSED)}: cannot connect: Connection refused",
        f"pssh: {fold(group.hosts[1:])}: exited with 3"]
    # -b: the failure once, under its folded hosts.
    result = pssh("run", "-b", "-H", ",".join(REFUSED), *port, *conn(group, tmp_path), "--",
                  "true")
    assert result.stdout.splitlines() == [
        f"---------------- {fold(REFUSED)} (3) ----------------",
        "cannot connect: Connection refused"]


def test_a_failure_naming_its_host_is_told_once_without_it(group, tmp_path):
    result = pssh("fetch", "-H", fold(group.hosts), "--port", str(group.port),
                  *conn(group, tmp_path), "/nonexistent/file", str(tmp_path / "fetched"))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pssh: {fold(group.hosts)}: ")
    assert "/nonexistent/file" in lines[0] and "does not exist" in lines[0]
    assert not any(host in lines[0].split(": ", 2)[2] for host in group.hosts)


def documented_commands():
    """Every ``pssh ...`` command line of the README, the docs and the help's examples."""
    texts = [(REPO / "README.md").read_text()]
    texts += [path.read_text() for path in sorted((REPO / "docs").rglob("*.md"))]
    texts += [*EXAMPLES.values(), pssh("hosts", "--help").stdout]
    for text in texts:
        for line in text.splitlines():
            line = line.strip().strip("`")
            # A backtick left inside is prose that wrapped onto a line starting with a
            # command's words ("pssh fetch -r`; ..."), not a command line.
            if re.match(r"pssh (run|copy|fetch|ping|hosts) ", line) and "`" not in line:
                yield line


def host_options(line):
    """(hosts, exclusions) of a command line: -H/-w values, or ``pssh hosts``' own."""
    words = shlex.split(line, comments=True)
    hosts, excluded = [], []
    taking_values = {"-H", "-w", "--host", "-x", "--exclude", "-h", "--hosts"}
    for flag, value in zip(words, words[1:]):
        if flag in ("-h", "--hosts"):  # a hosts file: the same as ^FILE
            hosts.append(f"^{value}")
        elif flag in taking_values:
            (excluded if flag in ("-x", "--exclude") else hosts).append(value)
    if words[1] == "hosts":
        hosts += [w for w, before in zip(words[2:], words[1:]) if not w.startswith("-")
                  and before not in taking_values]
    return hosts, excluded


def test_every_documented_host_expression_is_read(tmp_path):
    (tmp_path / "fleet.txt").write_text("web[01-40]\ndb[1-2]\n")
    checked = 0
    for line in documented_commands():
        hosts, excluded = host_options(line)
        if not hosts:
            continue
        for name in (h[1:] for h in hosts if h.startswith("^")):  # the example's file
            if not (tmp_path / name).exists():
                (tmp_path / name).write_text("web[01-40]\ndb[1-2]\n")
        every = ["-H" if i % 2 == 0 else h for h in hosts for i in range(2)]
        total = pssh("hosts", *every, "--count", cwd=tmp_path)
        assert total.returncode == 0, (line, total.stderr)
        if excluded:
            less = pssh("hosts", *every, *[w for x in excluded for w in ("-x", x)],
                        "--count", cwd=tmp_path)
            assert less.returncode == 0, (line, less.stderr)
            assert 0 < int(less.stdout) < int(total.stdout), line
        checked += 1
    assert checked >= 10  # the README's and the help's examples were found
