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


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_each_subcommand_offers_the_dask_options_only_if_it_takes_them(subcommand):
    offered = help_of(subcommand)
    takes = {"run": {"--scheduler", "--idempotent"}, "poll": {"--scheduler"}}.get(subcommand,
                                                                                 set())
    for option in ("--scheduler", "--idempotent"):
        listed = re.search(rf"^  {option}\b", offered, re.M) is not None
        assert listed == (option in takes), option
