"""``pssh ping``'s own view (host and latency, one summary line, each failure said once;
``--json`` with the latency as a number), and the summary title of the other subcommands
on a terminal of 80 columns or more. Real sshd hosts, piped and under script(1)'s
pseudo-terminal."""
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
