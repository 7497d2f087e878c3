"""Every ``pssh run`` option gives the same result whatever runs the hosts: one process,
worker processes (--processes 2), a Dask cluster (--scheduler ADDRESS). Each case runs
the three and compares what they print and write, with only what must differ made
alike (durations, and the order in which concurrent hosts end)."""
import json
import re
import subprocess
import sys
import uuid

import pytest

from conftest import RUN_MODES
from loopback import address, addresses
from pssh.sshd import ServerGroup
from processes import processes_with
from test_cli import ENV
from waiting import gone

REFUSED = address()  # nobody listens there
# Each host's answer: the last number of its address; the first host is the odd one out.
WHO = 'n=$(echo "$SSH_CONNECTION" | cut -d" " -f3 | cut -d. -f4)'


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


def command(group, slow=None):
    odd = group.hosts[0].rsplit(".", 1)[1]
    text = (f'{WHO}; echo "host $n"; echo same; echo warn >&2; '
            f'case $n in {odd}) echo other; exit 3;; esac')
    if slow is not None:
        text += f'; case $n in {group.hosts[-1].rsplit(".", 1)[1]}) {slow}; echo late;; esac'
    return text


def run_in_every_mode(group, tmp_path, options, text, dask_mode):
    """(exit status, stdout, stderr, files written) of each mode, made comparable."""
    outcomes = {}
    for name, mode in RUN_MODES.items():
        mode = dask_mode if mode is None else mode
        work = tmp_path / name
        work.mkdir()
        args = [a.replace("{dir}", str(work)) for a in options]
        result = subprocess.run(
            [sys.executable, "-m", "pssh", "run", "-H", " ".join([*group.hosts, REFUSED]),
             "--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
             "--known-hosts", str(work / "known_hosts"), *mode, *args, "--", text],
            capture_output=True, text=True, timeout=180, env=ENV, stdin=subprocess.DEVNULL)
        outcomes[name] = (result.returncode, normal(result.stdout, options),
                          normal_stderr(result.stderr), files(work))
    return outcomes


def normal(text: str, options) -> object:
    """What must be equal: durations dropped; with output per host as each host ends
    (streamed lines, -i blocks, --json), hosts sorted, as their order is the order in
    which concurrent hosts happen to end."""
    text = re.sub(r"\(\d+\.\d+ s\)", "(duration)", text)
    if "--json" in options:
        records = [json.loads(line) for line in text.splitlines()]
        for record in records:
            assert record.pop("duration") >= 0
        return sorted(records, key=lambda r: r["host"])
    if "-i" in options:
        blocks = re.split(r"^\[\d+\] ", text, flags=re.M)
        return sorted(blocks)
    if any(o in options for o in ("-b", "--diff")):
        return text  # made at the end, in host order: exactly the same
    return sorted(text.splitlines())


def normal_stderr(text: str) -> object:
    """The summary, in host order: exactly the same; apart from it, as sorted lines, what
    comes as the hosts happen to go: their stderr lines (streamed), and the host keys added
    to the known_hosts file as each host connects."""
    lines = text.splitlines()
    as_they_come = [line for line in lines
                    if line.startswith("[") or line.startswith("pssh: Permanently added")]
    return sorted(as_they_come), [line for line in lines if line not in as_they_come]


def files(directory) -> dict:
    return {str(path.relative_to(directory)): path.read_text()
            for path in sorted(directory.rglob("*"))
            if path.is_file() and path.name != "known_hosts"}


# (options, the exit status): one host exits 3, one cannot be reached.
CASES = {
    "streamed": ([], 1),
    "json": (["--json"], 1),
    "inline": (["-i"], 1),
    "gathered": (["-b"], 1),
    "diff": (["--diff"], 1),
    "exit-status-any": (["--exit-status", "any"], 0),
    "exit-status-max": (["--exit-status", "max"], 255),
    "out-and-err-dirs": (["-o", "{dir}/out", "-e", "{dir}/err"], 1),
    "output-dir": (["--output-dir", "{dir}/runs"], 1),
    "fail-fast": (["-f", "1", "--fail-fast", "--json"], 1),
}


@pytest.mark.parametrize("options, status", CASES.values(), ids=CASES.keys())
def test_every_mode_gives_the_same_result(group, tmp_path, options, status, dask_mode):
    outcomes = run_in_every_mode(group, tmp_path, options, command(group), dask_mode)
    plain = outcomes["one-process"]
    assert plain[0] == status, plain
    for name, outcome in outcomes.items():
        assert outcome == plain, f"{name} differs from one process"
    assert "distributed" not in str(plain[2])  # (Dask's own logging stays quiet in its mode too)


def test_every_mode_stops_a_host_that_runs_out_of_time(group, tmp_path, dask_mode):
    marker = f"sleep 60.{uuid.uuid4().int % 10**9}"
    outcomes = run_in_every_mode(group, tmp_path, ["-t", "10", "--json"],
                                 command(group, slow=f"{marker}; echo never"), dask_mode)
    plain = outcomes["one-process"]
    for name, outcome in outcomes.items():
        assert outcome == plain, f"{name} differs from one process"
    slow = next(r for r in plain[1] if r["host"] == group.hosts[-1])
    assert slow["error"] == "did not finish within 10.0 s"
    assert slow["stdout"] == f"host {group.hosts[-1].rsplit('.', 1)[1]}\nsame"
    assert gone(lambda: processes_with(marker)) == []  # its command was stopped, in every mode


def test_every_run_option_is_taken_with_the_scheduler():
    """-t (refused with --scheduler before) is taken, as every other run option;
    --processes and --scheduler remain two different modes."""
    from pssh.cli.options import parse
    args = parse(["run", "-H", "h", "--scheduler", "local:1", "-t", "5", "-f", "1",
                  "--fail-fast", "--exit-status", "max", "--output-dir", "d", "--", "true"])
    assert (args.timeout, args.parallel, args.fail_fast) == (5, 1, True)
    result = subprocess.run([sys.executable, "-m", "pssh", "run", "-H", "h", "--processes",
                             "2", "--scheduler", "local:1", "--", "true"], capture_output=True,
                            text=True, timeout=60, env=ENV)
    assert result.returncode == 2
    assert "--processes cannot be used with --scheduler" in result.stderr
