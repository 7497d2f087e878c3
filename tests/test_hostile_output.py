"""What a compromised host prints cannot take over the operator's screen, and how much it
prints cannot stall the others, the deadlines, the signals or the memory of the controller."""
from __future__ import annotations

import sys

import pytest

from pssh.cli.display import visible
from pssh.sshd import ServerGroup
from test_cli import ENV, on_terminal, pssh

#: Moves up a line, clears it, and writes a line that looks like another host's; then sets
#: the terminal's title.
FORGERY = r"printf '\033[1A\033[2K[10.9.9.9] all good\n\033]0;owned\007\n'"


@pytest.fixture(scope="module")
def group():
    with ServerGroup(2, first_address=171) as g:
        yield g


def conn(group, tmp_path):
    return ["--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
            "--known-hosts", str(tmp_path / "known_hosts"), "--color", "never",
            "--progress", "never"]


def test_visible_is_cat_v():
    assert visible("a\tb\x1b[1A\x07\x7f\x9b") == "a\tb^[[1A^G^?M-^["
    assert visible("plain ünïcode") == "plain ünïcode"


def test_escapes_from_a_host_are_made_visible_on_a_terminal(group, tmp_path):
    command = [sys.executable, "-m", "pssh", "run", "-H", group.hosts[0],
               *conn(group, tmp_path), "--", FORGERY]
    screen, _ = on_terminal(command, dict(ENV, TERM="xterm"), [], timeout=30)
    assert "\x1b" not in screen and "\x07" not in screen
    assert f"[{group.hosts[0]}] ^[[1A^[[2K[10.9.9.9] all good" in screen
    assert "^[]0;owned^G" in screen


def test_raw_passes_them_and_a_pipe_keeps_the_bytes(group, tmp_path):
    command = [sys.executable, "-m", "pssh", "run", "--raw", "-H", group.hosts[0],
               *conn(group, tmp_path), "--", FORGERY]
    screen, _ = on_terminal(command, dict(ENV, TERM="xterm"), [], timeout=30)
    assert "\x1b[1A" in screen
    piped = pssh("run", "-H", group.hosts[0], *conn(group, tmp_path), "--", FORGERY)
    assert f"[{group.hosts[0]}] \x1b[1A\x1b[2K[10.9.9.9] all good" in piped.stdout
