"""``pssh ping``'s own view (host and latency, one summary line, each failure said once;
``--json`` with the latency as a number), and the summary title of the other subcommands
on a terminal of 80 columns or more. Real sshd hosts, piped and under script(1)'s
pseudo-terminal."""
import json
import re
import sys

import pytest

from loopback import address, addresses
from pssh.sshd import ServerGroup
from test_cli import ENV, on_terminal, pssh

REFUSED = address()  # nobody listens there
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
LATENCY = re.compile(r"\[(\S+)\] (\d+\.\d) ms")


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


def conn(group, tmp_path, config="none"):
    return ["--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", config,
            "--known-hosts", str(tmp_path / "known_hosts")]


def test_piped_ping_puts_answers_on_stdout_and_each_failure_once_on_stderr(group, tmp_path):
    result = pssh("ping", "-H", " ".join([*group.hosts, REFUSED]), *conn(group, tmp_path),
                  "--progress", "never")
    assert result.returncode == 1, result.stderr
    # Standard output: the hosts that answered, each with its latency; nothing else.
    lines = result.stdout.splitlines()
    assert sorted(LATENCY.fullmatch(line).group(1) for line in lines) == sorted(group.hosts)
    # Standard error: the failure once, and one summary line.
    # (the address whole: 127.x.y.6 is in 127.x.y.60's "Permanently added" line)
    said = [line for line in result.stderr.splitlines()
            if re.search(rf"(?<![\d.]){re.escape(REFUSED)}(?![\d.])", line)]
    assert said == [f"pssh: {REFUSED}: unreachable: cannot connect: Connection refused"]
    summary = [line for line in result.stderr.splitlines() if line.startswith("pssh ping:")]
    assert len(summary) == 1
    assert re.fullmatch(r"pssh ping: 2 of 3 hosts reachable \(1 unreachable\) in \d+\.\d\d s",
                        summary[0]), summary


@pytest.mark.parametrize("sharding", [[], ["--processes", "2"]],
                         ids=["one-process", "processes-2"])
def test_ping_json_has_the_latency_as_a_number_and_the_error_when_failed(group, tmp_path,
                                                                         sharding):
    result = pssh("ping", "-H", " ".join([*group.hosts, REFUSED]), *conn(group, tmp_path),
                  "--json", *sharding)
    assert result.returncode == 1, result.stderr
    records = {r["host"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(records) == {*group.hosts, REFUSED}
    for host in group.hosts:
        record = records[host]
        assert set(record) == {"host", "ok", "latency_s", "error"}
        assert record["ok"] is True and record["error"] is None
        assert isinstance(record["latency_s"], float) and record["latency_s"] > 0
    refused = records[REFUSED]
    assert refused["ok"] is False and refused["latency_s"] is None
    assert refused["error"] == "unreachable: cannot connect: Connection refused"


def test_ping_on_a_terminal_shows_hosts_and_latencies_and_one_summary_line(group, tmp_path):
    command = [sys.executable, "-m", "pssh", "ping", "-H", " ".join([*group.hosts, REFUSED]),
               *conn(group, tmp_path)]
    text, _ = on_terminal(command, dict(ENV, TERM="xterm"), lambda screen: None, timeout=30)
    text = ANSI.sub("", text)
    for host in group.hosts:
        assert re.search(rf"\[{re.escape(host)}\] \d+\.\d ms", text), text
    assert f"[{REFUSED}] unreachable: cannot connect: Connection refused" in text
    # No table of exit statuses and byte counts (nor bytes in the progress bar): one
    # summary line.
    assert "┃ exit" not in text and " B " not in text and "hosts succeeded" not in text
    assert len(re.findall(r"pssh ping: 2 of 3 hosts reachable \(1 unreachable\)", text)) == 1


@pytest.mark.parametrize("columns", ["120", "80"])
def test_the_summary_title_is_one_line_on_a_terminal_of_80_columns_or_more(group, tmp_path,
                                                                          columns):
    # A host called "a" (through an ssh config) makes the table narrower than its title.
    config = tmp_path / "ssh_config"
    config.write_text(f"Host a\n  HostName {group.hosts[0]}\n")
    command = [sys.executable, "-m", "pssh", "run", "-H", "a",
               *conn(group, tmp_path, str(config)), "--", "true"]
    text, _ = on_terminal(command, dict(ENV, TERM="xterm", COLUMNS=columns),
                          lambda screen: None, timeout=30)
    text = ANSI.sub("", text)
    assert "┃ host" in text, text  # the summary table
    assert re.search(r"pssh run: 1/1 hosts succeeded in \d+\.\d\d s\r?\n", text), text
