"""``pssh run``'s standard input and error behave as ssh's: OpenSSH's ``ssh``, run against
the same server in each test, is the reference.

Without ``-I`` a command reads end of file at once (as ``ssh -n``, or ``ssh host cmd
</dev/null``): nothing is sent and nothing waits. With ``-I`` local stdin is read once and
every host gets all of it, then end of file. In the streamed view, stdout lines go to
stdout and stderr lines to stderr, both labelled ``[host]``. A host key added under
``accept-new`` is announced in ssh's words, once per host.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import RUN_MODES
from loopback import addresses
from processes import run_or_show_stacks
from pssh.sshd import ServerGroup
from test_cli import ENV

EVERY_MODE = pytest.mark.parametrize("mode", list(RUN_MODES), scope="module")


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


def ssh(group, host, command, known_hosts, stdin=None, policy="yes"):
    """OpenSSH's ``ssh host command``: ``stdin`` bytes piped in, None for ``</dev/null``."""
    return subprocess.run(
        ["ssh", "-F", "none", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"StrictHostKeyChecking={policy}",
         "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", group.keys.private(),
         "-p", str(group.port), host, command],
        input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True, timeout=120)


def pssh_run(group, known_hosts, *args, stdin=None, policy="strict", timeout=120):
    """``pssh run`` on the group's hosts (``stdin`` bytes piped in, None: ``</dev/null``);
    a hang fails on the timeout."""
    return run_or_show_stacks(
        [sys.executable, "-m", "pssh", "run", "-H", " ".join(group.hosts),
         "--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
         "--known-hosts", str(known_hosts), "--host-key-policy", policy, *args],
        input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=timeout, env=ENV)


def lines_of(text: bytes, host: str):
    """The lines of ``host`` in a streamed view, without their ``[host] `` label, in order."""
    label = f"[{host}] ".encode()
    return [line[len(label):] for line in text.splitlines() if line.startswith(label)]


@pytest.fixture
def known(group, tmp_path):
    """A known_hosts file that holds the group's keys, for ssh and pssh alike."""
    path = tmp_path / "known_hosts"
    with open(group.known_hosts_file()) as theirs:
        path.write_text(theirs.read())
    return path


READS_A_LINE = 'read x; echo "got=$x status=$?"'


@EVERY_MODE
@pytest.mark.parametrize("local_input", [None, b"local data\n"], ids=["devnull", "piped"])
def test_without_send_input_the_command_reads_end_of_file_at_once(group, known, mode_options,
                                                                   local_input):
    # Today's main sent no EOF: the command waited for input for ever.
    reference = ssh(group, group.hosts[0], READS_A_LINE, known)  # ssh -n: nothing sent
    assert reference.returncode == 0 and reference.stdout == b"got= status=1\n"
    result = pssh_run(group, known, *mode_options, "--", READS_A_LINE, stdin=local_input)
    assert result.returncode == 0, result.stderr
    for host in group.hosts:
        assert lines_of(result.stdout, host) == reference.stdout.splitlines()


INPUT = b"first line\n\nthird line: $HOME `id` \\ \xc3\xa9\nno newline at the end"
ECHOES_INPUT = 'cat; echo "[end]"; wc -c </dev/null'


@EVERY_MODE
def test_send_input_gives_every_host_the_same_input_then_end_of_file(group, known, mode_options):
    reference = ssh(group, group.hosts[0], ECHOES_INPUT, known, stdin=INPUT)
    assert reference.returncode == 0
    for flag in ("-I", "--send-input"):
        result = pssh_run(group, known, *mode_options, flag, "--", ECHOES_INPUT, stdin=INPUT)
        assert result.returncode == 0, result.stderr
        for host in group.hosts:
            assert lines_of(result.stdout, host) == reference.stdout.splitlines()


@EVERY_MODE
def test_megabytes_of_input_to_a_command_writing_output_meanwhile(group, known, mode_options,
                                                                   tmp_path):
    # cat writes back all it reads while more input comes: input and output must flow at
    # once (neither waits for the other), and none of either is lost.
    data = b"".join(b"%07d %s\n" % (i, b"abcdefgh" * 8) for i in range(96 * 1024))  # 7 MB
    reference = ssh(group, group.hosts[0], "cat", known, stdin=data)
    assert reference.returncode == 0 and reference.stdout == data
    out = tmp_path / "out"
    result = pssh_run(group, known, *mode_options, "-I", "--output-dir", str(out), "--", "cat",
                      stdin=data, timeout=240)
    assert result.returncode == 0, result.stderr
    for host in group.hosts:
        assert (out / f"{host}.stdout").read_bytes() == reference.stdout
        assert (out / f"{host}.stderr").read_bytes() == b""


#: What a Dask process of a ``local:N`` cluster may print on a loaded machine: a tornado
#: connect that timed out inside distributed, reported by asyncio as never retrieved (seen
#: once in a fresh-clone run). Not pssh's to say or to silence; the tests leave it out.
DASK_TIMEOUT_NOISE = re.compile(rb"Future exception was never retrieved\nfuture: <Future "
                                rb"finished exception=TimeoutError\('Timeout'\)>\n"
                                rb"TimeoutError: Timeout\n")


def pssh_stderr(result, mode) -> bytes:
    """pssh's own standard error (without Dask's noise in the Dask mode)."""
    return DASK_TIMEOUT_NOISE.sub(b"", result.stderr) if mode.startswith("dask") \
        else result.stderr


@EVERY_MODE
def test_a_command_that_reads_part_of_its_input_ends_quietly(group, known, mode, mode_options):
    # head stops reading and exits; the rest of the input has nowhere to go. ssh says
    # nothing about it, and neither does pssh, whichever mode writes the input.
    data = b"0123456789" * 400_000  # 4 MB: far more than the channel's window takes
    reference = ssh(group, group.hosts[0], "head -c 12; echo", known, stdin=data)
    assert reference.returncode == 0 and reference.stderr == b""
    result = pssh_run(group, known, *mode_options, "-I", "--", "head -c 12; echo", stdin=data)
    assert result.returncode == 0, result.stderr
    for host in group.hosts:
        assert lines_of(result.stdout, host) == reference.stdout.splitlines()
    assert pssh_stderr(result, mode) == reference.stderr


BOTH_STREAMS = "echo out1; echo err1 >&2; echo out2; printf 'err2\\n' >&2; echo out3"


@pytest.mark.parametrize("mode", ["one-process", "processes-2"], scope="module")
def test_stderr_lines_go_to_stderr_labelled_stdout_lines_to_stdout(group, known, mode_options,
                                                                   tmp_path):
    # Today's main printed both streams' lines on stdout.
    reference = ssh(group, group.hosts[0], BOTH_STREAMS, known)
    assert reference.returncode == 0
    assert reference.stdout.splitlines() == [b"out1", b"out2", b"out3"]
    assert reference.stderr.splitlines() == [b"err1", b"err2"]
    result = pssh_run(group, known, *mode_options, "--", BOTH_STREAMS)
    assert result.returncode == 0, result.stderr
    for host in group.hosts:
        assert lines_of(result.stdout, host) == reference.stdout.splitlines()
        assert lines_of(result.stderr, host) == reference.stderr.splitlines()
    # Nothing else on either: every line is a host's, on its own stream.
    assert len(result.stdout.splitlines()) == 3 * len(group.hosts)
    assert len(result.stderr.splitlines()) == 2 * len(group.hosts)
    # --output-dir keeps them apart in files the same way.
    files = tmp_path / "files"
    result = pssh_run(group, known, *mode_options, "--output-dir", str(files), "--",
                      BOTH_STREAMS)
    assert result.returncode == 0, result.stderr
    for host in group.hosts:
        assert (files / f"{host}.stdout").read_bytes() == reference.stdout
        assert (files / f"{host}.stderr").read_bytes() == reference.stderr


def permanently_added(stderr: bytes, prefix: bytes):
    return sorted(line[len(prefix):] for line in stderr.splitlines()
                  if line.startswith(prefix + b"Permanently added"))


@EVERY_MODE
def test_a_new_host_key_is_announced_once_per_host_in_ssh_s_words(group, tmp_path, mode_options):
    # Today's main added the keys silently.
    said_by_ssh = []
    for host in group.hosts:
        done = ssh(group, host, "true", tmp_path / "ssh_known_hosts", policy="accept-new")
        assert done.returncode == 0, done.stderr
        said_by_ssh += permanently_added(done.stderr, b"Warning: ")
    assert len(said_by_ssh) == len(group.hosts)
    ours = tmp_path / "known_hosts"
    first = pssh_run(group, ours, *mode_options, "--", "true", policy="accept-new")
    assert first.returncode == 0, first.stderr
    assert permanently_added(first.stderr, b"pssh: ") == sorted(said_by_ssh)
    again = pssh_run(group, ours, *mode_options, "--", "true", policy="accept-new")
    assert again.returncode == 0, again.stderr
    assert b"Permanently added" not in again.stderr  # known now: nothing to say
    assert os.path.getsize(ours) > 0
