"""The command line beyond streaming: host sets, gathered and diff views, ping, failure and
exit policies, per-host files, two-stage Ctrl-C. Real sshd hosts, piped and on a terminal."""
import json
import re
import subprocess
import sys
import uuid

import pytest

from pssh.cli.hosts import UsageError, exclude, fold, parse_hosts
from pssh.cli.nodeset import expand
from loopback import address, addresses
from pssh.sshd import ServerGroup
from processes import pgrep
from test_cli import ENV, on_terminal, pssh
from waiting import gone

REFUSED = address()  # nobody listens there
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(4)) as g:
        yield g


def conn(group, tmp_path):
    return ["--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
            "--known-hosts", str(tmp_path / "known_hosts"), "--progress", "never"]


def hosts_arg(group, *extra):
    return ["-H", " ".join([*group.hosts, *extra])]


# Each host's own answer: the last number of its address.
WHO = 'echo "$SSH_CONNECTION" | cut -d" " -f3 | cut -d. -f4'


@pytest.mark.parametrize("names, folded", [
    (["web01", "web02", "web03", "web05", "db1"], "web[01-03,05],db1"),
    (expand("web[01-10]"), "web[01-10]"),
    (expand("rack[1-2]-n[1-3]"), "rack[1-2]-n[1-3]"),
    (["n1", "n2", "n10", "n1", "x"], "n[1-2,10],x"),
    (["10.0.0.1", "10.0.0.2", "10.0.1.7"], "10.0.0.[1-2],10.0.1.7"),
])
def test_fold_writes_host_sets_back(names, folded):
    assert fold(names) == folded
    # and the folded form expands to the same names
    assert sorted(h.host for h in parse_hosts([folded])) == sorted(set(names))


def test_exclusions_and_host_files(tmp_path):
    hosts_file = tmp_path / "fleet"
    hosts_file.write_text("web[01-03]  # web\ndb1\n")
    hosts = parse_hosts([f"^{hosts_file}", "web[04-05]"])
    assert [h.host for h in exclude(hosts, ["web[02-04]", "d*"])] == ["web01", "web05"]
    with pytest.raises(UsageError, match="cannot read hosts file"):
        parse_hosts(["^/nonexistent"])


def test_hosts_subcommand_expands_folds_and_counts(tmp_path):
    (tmp_path / "fleet").write_text("web[01-20]\n")
    result = pssh("hosts", f"^{tmp_path / 'fleet'}", "-x", "web[05-07]", "--fold")
    assert (result.returncode, result.stdout) == (0, "web[01-04,08-20]\n")
    result = pssh("hosts", "rack[1-4]-n[01-32]", "--count")
    assert result.stdout == "128\n"
    result = pssh("hosts", "u@db[1-3]:2222", "-x", "db2")
    assert result.stdout.splitlines() == ["u@db1:2222", "u@db3:2222"]
    result = pssh("hosts", "web[3-1]")
    assert result.returncode == 2 and "3 is after 1" in result.stderr


def test_gathered_output_folds_identical_hosts(group, tmp_path):
    odd = group.hosts[1]
    command = f'case "$SSH_CONNECTION" in *" {odd} "*) echo other; exit 3;; esac; echo same'
    result = pssh("run", "-b", *hosts_arg(group), *conn(group, tmp_path), "--", command)
    assert result.returncode == 1
    others = fold([h for h in group.hosts if h != odd])
    assert result.stdout.splitlines() == [
        f"---------------- {others} (3) ----------------", "same",
        f"---------------- {odd} (1) ----------------", "exit 3", "other"]


def test_gathered_output_on_a_terminal(group, tmp_path):
    command = [sys.executable, "-m", "pssh", "run", "-b", *hosts_arg(group),
               *conn(group, tmp_path), "--", "echo same"]
    text, _ = on_terminal(command, dict(ENV, TERM="xterm"), lambda screen: None, timeout=15)
    assert f"{fold(group.hosts)} (4)" in text and "same" in text


def test_diff_against_the_most_common_output(group, tmp_path):
    odd = group.hosts[2]
    command = f'echo a; case "$SSH_CONNECTION" in *" {odd} "*) echo B;; *) echo b;; esac'
    result = pssh("run", "--diff", *hosts_arg(group), *conn(group, tmp_path), "--", command)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    others = fold([h for h in group.hosts if h != odd])
    assert lines[:3] == [f"---------------- {others} (3) ----------------", "a", "b"]
    assert lines[3] == f"---------------- {odd} (1) differs ----------------"
    assert lines[4:] == [f"--- {others}", f"+++ {odd}", "@@ -1,2 +1,2 @@", " a", "-b", "+B"]
    result = pssh("run", "--diff", "--json", *hosts_arg(group), *conn(group, tmp_path), "--",
                  "true")
    assert result.returncode == 2 and "pick one" in result.stderr


def test_ping_times_hosts_and_names_each_problem(group, tmp_path):
    other_key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)],
                   check=True)
    result = pssh("ping", *hosts_arg(group, REFUSED), *conn(group, tmp_path))
    assert result.returncode == 1
    lines = sorted(result.stdout.splitlines())
    for host in group.hosts:
        assert any(line.startswith(f"[{host}] ") and line.endswith(" ms") for line in lines)
    # Piped, a failure is said once, on stderr (see test_cli_ping_view.py).
    assert not any(line.startswith(f"[{REFUSED}]") for line in lines)
    assert f"pssh: {REFUSED}: unreachable: cannot connect" in result.stderr
    assert "pssh ping: 4 of 5 hosts reachable (1 unreachable)" in result.stderr
    result = pssh("ping", *hosts_arg(group), *conn(group, tmp_path)[:2], "-k", str(other_key),
                  *conn(group, tmp_path)[4:], "--json")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 4 and all(r["error"].startswith("login refused") for r in records)


def test_fail_fast_and_exit_status_policies(group, tmp_path):
    first = group.hosts[0]
    # One host at a time: after the first fails, the others are not started.
    result = pssh("run", "-f", "1", "--fail-fast", "--json", *hosts_arg(group),
                  *conn(group, tmp_path), "--", f'{WHO}; case "$SSH_CONNECTION" in '
                  f'*" {first} "*) exit 4;; esac')
    records = {r["host"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert records[first]["exit_code"] == 4
    assert all("--fail-fast" in records[h]["error"] and records[h]["stdout"] == ""
               for h in group.hosts[1:])
    fails_one = f'case "$SSH_CONNECTION" in *" {first} "*) exit 4;; esac'
    args = [*hosts_arg(group), *conn(group, tmp_path), "--", fails_one]
    assert pssh("run", *args).returncode == 1
    assert pssh("run", "--exit-status", "any", *args).returncode == 0
    assert pssh("run", "--exit-status", "max", *args).returncode == 4
    assert pssh("run", "--exit-status", "max", *hosts_arg(group, REFUSED),
                *conn(group, tmp_path), "--", "true").returncode == 255
    assert pssh("run", "--exit-status", "any", "-H", REFUSED, *conn(group, tmp_path), "--",
                "true").returncode == 1


def test_exclude_on_the_command_line(group, tmp_path):
    result = pssh("run", "--json", *hosts_arg(group), "-x", group.hosts[0], "-x",
                  group.hosts[1], *conn(group, tmp_path), "--", "true")
    assert {json.loads(line)["host"] for line in result.stdout.splitlines()} == \
        set(group.hosts[2:])
    network = group.hosts[0].rsplit(".", 1)[0]
    result = pssh("run", "-H", group.hosts[0], "-x", f"{network}.*", *conn(group, tmp_path),
                  "--", "true")
    assert result.returncode == 2 and "no host is left" in result.stderr


def test_output_dir_files_as_results_arrive(group, tmp_path):
    out = tmp_path / "runs"
    result = pssh("run", "--output-dir", str(out), *hosts_arg(group, REFUSED),
                  *conn(group, tmp_path), "--", f"{WHO}; echo warn >&2; exit 5")
    assert result.returncode == 1 and result.stdout == ""
    for host in group.hosts:
        assert (out / f"{host}.stdout").read_text() == host.rsplit(".", 1)[1] + "\n"
        assert (out / f"{host}.stderr").read_text() == "warn\n"
        assert (out / f"{host}.status").read_text() == "exit 5\n"
    assert (out / f"{REFUSED}.status").read_text().startswith("error: cannot connect")


def test_output_dir_keeps_what_came_before_ctrl_c(group, tmp_path):
    out = tmp_path / "runs"
    sleeper = f"sleep 322.{uuid.uuid4().int % 10**9}"  # this test's alone
    command = [sys.executable, "-m", "pssh", "run", "--output-dir", str(out),
               *hosts_arg(group), *conn(group, tmp_path), "--", f"echo before; {sleeper}"]

    def ctrl_c_when_started(screen):
        if all((out / f"{h}.stdout").exists() and (out / f"{h}.stdout").read_text()
               for h in group.hosts):
            return b"\x03"
        return None
    text, typed = on_terminal(command, dict(ENV, TERM="xterm"), [
        ctrl_c_when_started, lambda screen: b"\x03" if b"still running on" in screen else None])
    assert typed, text
    for host in group.hosts:
        assert (out / f"{host}.stdout").read_text() == "before\n"
        assert (out / f"{host}.status").read_text() != "exit 0\n"  # it did not finish
    assert gone(lambda: pgrep(sleeper)) == []  # the commands were stopped


def test_ping_and_diff_on_a_terminal(group, tmp_path):
    env = dict(ENV, TERM="xterm")
    text, _ = on_terminal([sys.executable, "-m", "pssh", "ping", *hosts_arg(group),
                           *conn(group, tmp_path)], env, lambda screen: None, timeout=15)
    assert re.search(r"\x1b\[32m\d+\.\d ms", text)  # coloured on a terminal
    text = ANSI.sub("", text)
    for host in group.hosts:
        assert re.search(rf"\[{re.escape(host)}\] \d+\.\d ms", text)
    assert "pssh ping: 4 of 4 hosts reachable" in text
    odd = group.hosts[0]
    text, _ = on_terminal([sys.executable, "-m", "pssh", "run", "--diff", *hosts_arg(group),
                           *conn(group, tmp_path), "--",  # (no $: script -c's shell expands)
                           f"printenv SSH_CONNECTION | grep -qF {odd} && echo B || echo b"],
                          env, lambda screen: None, timeout=15)
    text = ANSI.sub("", text)
    assert f"{odd} (1) differs" in text and "+B" in text and "-b" in text
