"""The command line's usage: an optional extra that is not installed, options offered only
where they are accepted, ``-h`` (a hosts file everywhere) and ``--help``, and where an
unknown option's hint points."""
import re
import subprocess
import sys

import pytest

from loopback import addresses
from pssh.sshd import ServerGroup
from test_cli import ENV, pssh

SUBCOMMANDS = ("run", "copy", "fetch", "ping", "poll", "hosts")

# Runs the pssh command with some top-level packages impossible to import, as on a machine
# where they are not installed: a finder first on sys.meta_path refuses them.
HIDING = """
import sys

class Hide:
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide(sys.argv[1].split(",")))
for loaded in [m for m in sys.modules if m.split(".")[0] in sys.argv[1].split(",")]:
    del sys.modules[loaded]
from pssh.cli import main
sys.exit(main(sys.argv[2:]))
"""


def pssh_without(hidden, *args):
    return subprocess.run([sys.executable, "-c", HIDING, ",".join(hidden), *args],
                          capture_output=True, text=True, timeout=120, env=ENV,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(1)) as g:
        yield g


def conn(group, tmp_path):
    return ["-H", group.hosts[0], "--port", str(group.port), "-k", group.keys.private(),
            "--no-agent", "-F", "none", "--known-hosts", str(tmp_path / "known_hosts")]


@pytest.mark.parametrize("hidden", [("distributed",), ("dask", "distributed")])
@pytest.mark.parametrize("subcommand", ["run", "poll"])
def test_scheduler_without_dask_is_one_line_naming_the_extra(group, tmp_path, subcommand,
                                                             hidden):
    marker = tmp_path / "ran"
    words = ["--", f"touch {marker}"] if subcommand == "run" else \
        ["--check", f"ran=touch {marker}; echo 1", "--duration", "2"]
    result = pssh_without(hidden, subcommand, *conn(group, tmp_path),
                          "--scheduler", "local:2", *words)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    assert f"pssh {subcommand}: --scheduler needs the optional extra 'dask'" in result.stderr
    assert "pip install 'pssh2[dask]'" in result.stderr
    assert f"missing: {', '.join(hidden)}" in result.stderr
    assert not marker.exists()  # refused before any host was reached
    if subcommand == "run":  # and it is --scheduler that is refused: without it, it runs
        result = pssh_without(hidden, "run", *conn(group, tmp_path), "--", f"touch {marker}")
        assert result.returncode == 0, result.stderr
        assert marker.exists()


def help_of(subcommand):
    result = pssh(subcommand, "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_each_subcommand_offers_the_dask_options_only_if_it_takes_them():
    takes = {"run": {"--scheduler", "--idempotent"}, "poll": {"--scheduler"}}
    listed = {subcommand: {option for option in ("--scheduler", "--idempotent")
                           if re.search(rf"^  {option}\b", help_of(subcommand), re.M)}
              for subcommand in SUBCOMMANDS}
    assert listed == {subcommand: takes.get(subcommand, set()) for subcommand in SUBCOMMANDS}


@pytest.mark.parametrize("subcommand, words", [
    ("copy", ["local.txt", "/tmp/remote.txt"]), ("fetch", ["/etc/hostname", "here"]),
    ("ping", [])])
def test_a_dask_option_where_it_is_not_taken_points_to_that_help(subcommand, words):
    result = pssh(subcommand, "-H", "127.0.0.1", "--scheduler", "local:2", *words)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"pssh {subcommand}: error: unrecognized arguments: --scheduler local:2"
        if subcommand == "ping" else
        f"pssh {subcommand}: error: unrecognized arguments: --scheduler {words[-1]}",
        f"Try 'pssh {subcommand} --help' for more information."]


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_an_unknown_option_points_to_the_subcommands_help(subcommand):
    result = pssh(subcommand, "--no-such-option", "-H", "127.0.0.1", "x", "y")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert "unrecognized arguments: --no-such-option" in lines[0], result.stderr
    assert lines[-1] == f"Try 'pssh {subcommand} --help' for more information."


def test_dash_h_is_a_hosts_file_and_help_is_long_everywhere():
    for subcommand in SUBCOMMANDS:
        offered = help_of(subcommand)
        assert "-h FILE" in offered and "--help" in offered, subcommand
        assert "-h, --help" not in offered, subcommand
    top = pssh("--help")
    assert top.returncode == 0 and "--help" in top.stdout and "-h, --help" not in top.stdout


def test_pssh_hosts_reads_a_hosts_file_with_dash_h(tmp_path):
    hosts_file = tmp_path / "fleet"
    hosts_file.write_text("web[1-3] # the web tier\ndb1\n")
    result = pssh("hosts", "-h", str(hosts_file), "-x", "web2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["web1", "web3", "db1"]
    result = pssh("hosts", "db9", "-h", str(hosts_file), "--count")
    assert result.stdout == "5\n"


def test_dash_h_before_the_subcommand_says_where_it_goes():
    result = pssh("-h", "hosts.txt", "run", "--", "uptime")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "pssh: error: -h FILE is a hosts file and goes after the subcommand, as in pssh run "
        "-h hosts.txt -- uptime; --help shows help",
        "Try 'pssh --help' for more information."]
