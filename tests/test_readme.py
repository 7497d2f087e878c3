"""The README's command-line examples: every subcommand is shown, and each example that needs
no hosts of the reader's own (`--embedded`) runs as written, through the real `pssh`."""
import re
import shlex
from pathlib import Path

import pytest

from test_cli import pssh

README = Path(__file__).resolve().parent.parent / "README.md"


def command_line_examples():
    """The `pssh ...` lines of the README's command-line section, continuations joined."""
    section = README.read_text().split("### `pssh`: the command line", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)[1]
    return [line for line in block.replace("\\\n", " ").splitlines() if line.startswith("pssh ")]


def test_every_subcommand_has_an_example():
    shown = {line.split()[1] for line in command_line_examples()}
    assert shown == {"run", "copy", "fetch", "ping", "hosts", "poll"}


EMBEDDED = [line for line in command_line_examples() if "--embedded" in line]


def test_the_examples_include_runs_on_embedded_hosts():
    assert {line.split()[1] for line in EMBEDDED} >= {"run", "poll"}


@pytest.mark.parametrize("line", EMBEDDED)
def test_an_embedded_example_runs_as_written(line):
    args = shlex.split(line, comments=True)
    assert args[0] == "pssh"
    result = pssh(*args[1:], timeout=180)
    assert result.returncode == 0, result.stderr
    if args[1] == "poll":
        # Line protocol: one point per poll of each host, with values from the parser.
        points = [p for p in result.stdout.splitlines() if p.startswith("ssh_poll,")]
        hosts = {re.search(r"host=([^,]+)", p)[1] for p in points}
        assert hosts == {"127.0.0.1", "127.0.0.2"}
        assert all("status=ok" in p and "load1=" in p for p in points)
    else:
        assert result.stdout.strip()
