"""``pssh -O OPTION``: ssh_config options on the command line, checked against OpenSSH's
``ssh -o`` with the same options against the same server: where an option decides
whether the connection is made, both must decide alike."""
import json
import os
import re
import socket
import subprocess

import pytest

from loopback import address, addresses
from pssh.sshd import ServerGroup
from test_cli import pssh

REFUSED_PORT = "1"  # nobody listens there on the group's addresses
# Last, so that a case's own StrictHostKeyChecking wins (the first value obtained does):
# ssh's default (ask) fails in batch mode where pssh's (accept-new) goes on.
LAST_PSSH = ("-O", "StrictHostKeyChecking=accept-new")
LAST_SSH = ("-o", "StrictHostKeyChecking=accept-new")


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


@pytest.fixture
def known_hosts(tmp_path):
    """An empty known_hosts file of this test's own."""
    path = tmp_path / "known_hosts"
    path.write_text("")
    return path


def with_pssh(group, known_hosts, *options):
    """Whether ``pssh run`` with ``options`` ran the command on the group's host."""
    result = pssh("run", "-H", group.hosts[0], "-k", group.keys.private(), "--no-agent",
                  "-F", "none", "-O", f"UserKnownHostsFile={known_hosts}", *options,
                  *LAST_PSSH, "--json", "--", "echo reached")
    assert result.returncode in (0, 1), result.stderr
    record = json.loads(result.stdout)
    return record["stdout"] == "reached" and result.returncode == 0


def with_ssh(group, known_hosts, *options):
    """Whether OpenSSH's ssh with ``options`` ran the command on the group's host."""
    result = subprocess.run(
        ["ssh", "-F", "none", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "IdentityAgent=none", "-i", group.keys.private(),
         "-o", f"UserKnownHostsFile={known_hosts}", *options, *LAST_SSH, group.hosts[0],
         "echo reached"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return result.stdout == "reached\n" and result.returncode == 0


def port(group):
    return str(group.port)


# (pssh's options, ssh's options, whether the command runs), for the group's one host;
# every case with the port right, unless it is about the port.
CASES = {
    "Port": (lambda g: ["-O", f"Port={port(g)}"], lambda g: ["-o", f"Port={port(g)}"], True),
    "Port, as 'Key Value'": (lambda g: ["-O", f"Port {port(g)}"],
                             lambda g: ["-o", f"Port {port(g)}"], True),
    "wrong Port": (lambda g: ["-O", f"Port={REFUSED_PORT}"],
                   lambda g: ["-o", f"Port={REFUSED_PORT}"], False),
    "the first Port wins": (lambda g: ["-O", f"Port={REFUSED_PORT}", "-O", f"Port={port(g)}"],
                            lambda g: ["-o", f"Port={REFUSED_PORT}", "-o", f"Port={port(g)}"],
                            False),
    "the first Port wins, right": (
        lambda g: ["-O", f"Port={port(g)}", "-O", f"Port={REFUSED_PORT}"],
        lambda g: ["-o", f"Port={port(g)}", "-o", f"Port={REFUSED_PORT}"], True),
    # ssh's -p given first wins over -o Port; pssh's --port wins over -O in any order.
    "--port over -O Port": (lambda g: ["--port", port(g), "-O", f"Port={REFUSED_PORT}"],
                            lambda g: ["-p", port(g), "-o", f"Port={REFUSED_PORT}"], True),
    "unknown User": (lambda g: ["-O", f"Port={port(g)}", "-O", "User=pssh-no-such-user"],
                     lambda g: ["-o", f"Port={port(g)}", "-o", "User=pssh-no-such-user"],
                     False),
    "-l over -O User": (
        lambda g: ["-O", f"Port={port(g)}", "-l", g.servers[0].user,
                   "-O", "User=pssh-no-such-user"],
        lambda g: ["-o", f"Port={port(g)}", "-l", g.servers[0].user,
                   "-o", "User=pssh-no-such-user"], True),
    "StrictHostKeyChecking=yes, unknown host": (
        lambda g: ["-O", f"Port={port(g)}", "-O", "StrictHostKeyChecking=yes"],
        lambda g: ["-o", f"Port={port(g)}", "-o", "StrictHostKeyChecking=yes"], False),
    "StrictHostKeyChecking=no, unknown host": (
        lambda g: ["-O", f"Port={port(g)}", "-O", "StrictHostKeyChecking=no"],
        lambda g: ["-o", f"Port={port(g)}", "-o", "StrictHostKeyChecking=no"], True),
    "StrictHostKeyChecking=accept-new, unknown host": (
        lambda g: ["-O", f"Port={port(g)}", "-O", "StrictHostKeyChecking=accept-new"],
        lambda g: ["-o", f"Port={port(g)}", "-o", "StrictHostKeyChecking=accept-new"], True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_option_decides_as_it_does_for_ssh(group, tmp_path, case):
    ours, theirs, reached = CASES[case]
    (tmp_path / "ssh").mkdir()
    (tmp_path / "pssh").mkdir()
    by_ssh = with_ssh(group, tmp_path / "ssh" / "known_hosts", *theirs(group))
    by_pssh = with_pssh(group, tmp_path / "pssh" / "known_hosts", *ours(group))
    assert by_ssh == reached  # the reference itself, so that the case means something
    assert by_pssh == by_ssh


def test_a_known_host_is_reached_under_strict_checking(group, known_hosts):
    known_hosts.write_text(group.servers[0].known_hosts_lines())
    strict = ("-O", f"Port={port(group)}", "-O", "StrictHostKeyChecking=yes")
    assert with_ssh(group, known_hosts, *[o.replace("-O", "-o") for o in strict])
    assert with_pssh(group, known_hosts, *strict)


def test_accept_new_adds_the_key_as_ssh_does(group, tmp_path):
    files = {name: tmp_path / name for name in ("ssh", "pssh")}
    assert with_ssh(group, files["ssh"], "-o", f"Port={port(group)}",
                    "-o", "StrictHostKeyChecking=accept-new")
    assert with_pssh(group, files["pssh"], "-O", f"Port={port(group)}",
                     "-O", "StrictHostKeyChecking=accept-new")
    # The same host key learnt (the lines' formats may differ: compare the keys).
    learnt = {name: {tuple(line.split()[-2:]) for line in path.read_text().splitlines()}
              for name, path in files.items()}
    assert learnt["pssh"] and learnt["pssh"] <= learnt["ssh"]


def test_the_options_win_over_the_config_file_and_flags_over_them(group, known_hosts, tmp_path):
    config = tmp_path / "config"
    config.write_text(f"Host *\n  Port {REFUSED_PORT}\n  User pssh-no-such-user\n")
    base = ("-F", str(config), "-k", group.keys.private(), "--no-agent",
            "-O", f"UserKnownHostsFile={known_hosts}", "--json")
    ours = pssh("run", "-H", group.hosts[0], *base, "-O", f"Port={port(group)}",
                "-O", f"User={group.servers[0].user}", "--", "echo reached")
    theirs = subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "IdentityAgent=none", "-i", group.keys.private(),
         "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", f"Port={port(group)}", "-o", f"User={group.servers[0].user}",
         group.hosts[0], "echo reached"], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL)
    assert theirs.stdout == "reached\n"
    assert ours.returncode == 0, ours.stderr
    assert json.loads(ours.stdout)["stdout"] == "reached"


def test_a_flag_wins_over_the_option_wherever_it_stands(group, known_hosts):
    # (OpenSSH 9 lets whichever of -p and -o Port comes first win: pssh's flags always do.)
    assert with_pssh(group, known_hosts, "-O", f"Port={REFUSED_PORT}", "--port", port(group))
    assert not with_pssh(group, known_hosts, "-O", f"Port={port(group)}",
                         "--port", REFUSED_PORT)


@pytest.fixture
def blackhole():
    """A loopback address and port that accept connections and never say anything."""
    listener = socket.socket()
    listener.bind((address(), 0))
    listener.listen(16)
    yield listener.getsockname()
    listener.close()


def test_connect_timeout_bounds_the_connection_as_for_ssh(blackhole):
    host, silent_port = blackhole
    theirs = subprocess.run(["ssh", "-F", "none", "-o", "BatchMode=yes", "-o",
                             "ConnectTimeout=2", "-p", str(silent_port), host, "true"],
                            capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert theirs.returncode == 255 and "timed out" in theirs.stderr
    ours = pssh("run", "-H", host, "--port", str(silent_port), "-F", "none",
                "-O", "ConnectTimeout=2", "--json", "--", "true")
    assert ours.returncode == 1
    error = json.loads(ours.stdout)["error"]
    # the limit it says it waited for is -O's, not the command line's default of 10 s
    waited = float(re.search(r"nothing within ([\d.]+) s", error).group(1))
    assert waited <= 2


@pytest.mark.parametrize("subcommand", ["ping", "copy", "fetch", "poll"])
def test_every_subcommand_that_connects_takes_the_options(group, known_hosts, tmp_path,
                                                          subcommand):
    local = tmp_path / "file.txt"
    local.write_text("payload\n")
    remote = f"/tmp/pssh-ssh-options-{tmp_path.name}.txt"
    words = {"ping": [], "copy": [str(local), remote], "fetch": [remote, str(tmp_path / "got")],
             "poll": ["--check", "one=echo 1", "--interval", "0.5s", "--duration", "1.5",
                      "--output", "json"]}[subcommand]
    if subcommand == "fetch":
        subprocess.run(["cp", str(local), remote], check=True)  # the host is this machine
    result = pssh(subcommand, "-H", group.hosts[0], "-k", group.keys.private(), "--no-agent",
                  "-F", "none", "-O", f"UserKnownHostsFile={known_hosts}",
                  "-O", f"Port={port(group)}", *words)
    assert result.returncode == 0, result.stderr
    if subcommand == "poll":
        polls = [json.loads(line) for line in result.stdout.splitlines()]
        assert any(p["type"] == "result" and p["status"] == "ok" and p["port"] == group.port
                   for p in polls)
    if subcommand == "fetch":
        fetched = tmp_path / "got" / group.hosts[0] / os.path.basename(remote)
        assert fetched.read_text() == "payload\n"
    if subcommand == "copy":
        with open(remote) as copied:
            assert copied.read() == "payload\n"
    if subcommand in ("copy", "fetch"):
        os.remove(remote)


@pytest.mark.parametrize("option, message", [
    ("Bogus=1", "-O Bogus: no such ssh_config option"),
    ("PortX 22", "-O PortX: no such ssh_config option"),
    ("Port=abc", "port 'abc' is not a number"),
    ("StrictHostKeyChecking=maybe", "StrictHostKeyChecking 'maybe' is not understood"),
    ("ProxyCommand=nc %h %p", "-O ProxyCommand: not supported by pssh"),
    ("Host web1", "-O Host: a config file's structure"),
])
def test_an_option_that_cannot_be_used_is_a_usage_error(option, message):
    result = pssh("run", "-H", "127.0.0.1", "-O", option, "--", "true")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert message in lines[0], result.stderr


def test_an_option_pssh_does_not_use_is_ignored_with_a_warning(group, known_hosts):
    known_hosts.write_text(open(group.known_hosts_file()).read())  # no "Permanently added"
    result = pssh("run", "-H", group.hosts[0], "-k", group.keys.private(), "--no-agent",
                  "-F", "none", "-O", f"UserKnownHostsFile={known_hosts}",
                  "-O", f"Port={port(group)}", "-O", "LogLevel=ERROR", "--", "echo reached")
    assert result.returncode == 0
    assert result.stdout == f"[{group.hosts[0]}] reached\n"
    assert result.stderr == "pssh: warning: -O LogLevel: an OpenSSH option pssh does not " \
                            "use: ignored\n"
