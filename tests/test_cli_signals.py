"""SIGINT and SIGTERM for the pssh command: one signal from a program (a script, CI, a
supervisor: no terminal) stops the run at once, remote commands and partial transfers
included; Ctrl-C typed at a terminal stays staged. Every mode: one process, worker
processes (--processes 2), a Dask cluster (--scheduler local:2)."""
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid

import pytest

from extras import needs
from loopback import addresses
from pssh.sshd import ServerGroup
from processes import in_session, pgrep, signal_each
from test_cli import ENV, on_terminal
from trickle import TrickleProxy
from waiting import eventually, gone

MODES = pytest.mark.parametrize("mode", [
    pytest.param([], id="one-process"), pytest.param(["--processes", "2"], id="processes-2"),
    pytest.param(["--scheduler", "local:2"], id="dask-local-2",
                 marks=needs("dask", "distributed"))])
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM],
                                  ids=["SIGINT", "SIGTERM"])
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: The "does not hang" bound: far beyond what stopping takes (a few seconds).
HANG = 60


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


def conn(group, tmp_path):
    return ["--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
            "--known-hosts", str(tmp_path / "known_hosts")]


class Pssh:
    """``pssh`` started as a script or supervisor starts it: no terminal (input from
    /dev/null, a session of its own), output to files."""

    def __init__(self, args, tmp_path, preexec_fn=None) -> None:
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "pssh", *args],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         start_new_session=True, env=ENV,
                                         preexec_fn=preexec_fn)
        self.pid = self.proc.pid

    def started(self, condition, what: str) -> None:
        """Wait until ``condition()`` holds while pssh runs; fail at once, with what it
        said, if it ends first (a usage error, a missing module: nothing to signal)."""
        eventually(lambda: self.proc.poll() is not None or condition(), HANG, what)
        if self.proc.poll() is not None:
            pytest.fail(f"pssh ended ({self.proc.returncode}) before {what}: {self.stderr()}")

    def signal(self, signum: int, whole_group: bool) -> None:
        if whole_group:  # as timeout(1), systemd or a CI runner do
            os.killpg(self.pid, signum)
        else:
            self.proc.send_signal(signum)

    def wait(self) -> int:
        try:
            return self.proc.wait(HANG)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"pssh still running {HANG} s after one signal (a hang): "
                        f"{self.err.read_text()}")

    def stderr(self) -> str:
        return self.err.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()


@MODES
@SIGNALS
@pytest.mark.parametrize("whole_group", [False, True], ids=["to-pssh", "to-its-group"])
def test_one_signal_without_a_terminal_stops_the_run(group, tmp_path, mode, signum,
                                                    whole_group):
    marker = f"sleep 300.{uuid.uuid4().int % 10**9}"  # the remote commands, by name
    pssh = Pssh(["run", "-H", " ".join(group.hosts), *conn(group, tmp_path), *mode, "--",
                 f"echo started; {marker}; echo never"], tmp_path)
    try:
        pssh.started(lambda: len(sleeping(marker)) >= len(group.hosts),
                     "the commands running on every host")
        pssh.signal(signum, whole_group)
        assert pssh.wait() == EXIT[signum], pssh.stderr()
    finally:
        pssh.kill()
    assert described(gone(lambda: pgrep(marker))) == []  # the remote commands stopped
    assert described(gone(lambda: in_session(pssh.pid))) == []  # no worker left behind
    stderr = pssh.stderr()
    cause = "interrupted" if signum == signal.SIGINT else "terminated"
    assert f"pssh: {cause}: stopping the command on {len(group.hosts)} host(s)" in stderr
    assert "Ctrl-C again" not in stderr  # nobody there to press it
    assert "never" not in pssh.out.read_text()


def sigint_ignored() -> None:
    """In the child, before exec: SIGINT ignored, as sh without job control starts a
    background job (``sh -c 'cmd &'``, ``nohup``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_sigint_ignored_at_the_start_stays_ignored_as_ssh_keeps_it(group, tmp_path):
    """ssh and pssh, each started with SIGINT ignored, each get a SIGINT and then a
    SIGTERM: both keep the SIGINT ignored, and end on the SIGTERM. (A SIGINT taken would
    be answered first: it comes first, and the lower number of two pending.)"""
    mine, its = (f"sleep 300.{uuid.uuid4().int % 10**9}" for _ in range(2))
    host = group.hosts[0]
    theirs = subprocess.Popen(
        ["ssh", "-F", "none", "-o", f"UserKnownHostsFile={group.known_hosts_file()}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
         "-o", "IdentitiesOnly=yes", "-o", "LogLevel=VERBOSE",  # says which signal ended it
         "-i", group.keys.private(), "-p", str(group.port), host, f"echo started; {its}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=sigint_ignored)
    ours = Pssh(["run", "-H", host, *conn(group, tmp_path), "--", f"echo started; {mine}"],
                tmp_path, preexec_fn=sigint_ignored)
    try:
        ours.started(lambda: (sleeping(mine) and sleeping(its)) or theirs.poll() is not None,
                     "the command running through ssh and through pssh")
        for signum in (signal.SIGINT, signal.SIGTERM):
            theirs.send_signal(signum)
            ours.signal(signum, whole_group=False)
        _, their_stderr = theirs.communicate(timeout=HANG)
        assert ours.wait() == EXIT[signal.SIGTERM], ours.stderr()
    finally:
        ours.kill()
        if theirs.poll() is None:
            os.killpg(theirs.pid, signal.SIGKILL)
            theirs.communicate()
        # ssh leaves its remote command running (no pty to hang up).
        signal_each(pgrep(its), signal.SIGKILL)
    assert b"Killed by signal 15." in their_stderr, their_stderr   # ssh's SIGTERM, not 2
    stderr = ours.stderr()
    assert "pssh: terminated: stopping the command on 1 host(s)" in stderr, stderr
    assert "interrupted" not in stderr
    assert described(gone(lambda: pgrep(mine))) == []


@pytest.fixture
def slow_hosts(group):
    """Two hosts behind proxies that let 64 kB through every 0.05 s each way: a transfer
    of 30 MB is still going when the signal comes, and what is in flight then (a few MB
    in socket buffers) drains in seconds, for the removal of the partial file to
    follow."""
    first, second = addresses(2)
    with TrickleProxy((group.hosts[0], group.port), first, "rate", 0.05, 65536) as a, \
            TrickleProxy((group.hosts[1], group.port), second, "rate", 0.05, 65536) as b:
        yield [f"{proxy.address}:{proxy.port}" for proxy in (a, b)]


@pytest.mark.parametrize("mode", [[], ["--processes", "2"]], ids=["one-process", "processes-2"])
@SIGNALS
@pytest.mark.parametrize("direction", ["copy", "fetch"])
def test_one_signal_stops_transfers_and_removes_their_partial_files(
        group, tmp_path, slow_hosts, mode, signum, direction):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(os.urandom(30_000_000))
    remote_dir = tmp_path / "remote"  # the servers run here: their files are ours to see
    remote_dir.mkdir()
    fetched = tmp_path / "fetched"
    if direction == "copy":
        final = [remote_dir / "payload.bin"]
        args = [str(payload), str(remote_dir / "payload.bin")]
        partial = lambda: [p for p in remote_dir.iterdir() if p.name.endswith(".part")]  # noqa: E731
    else:
        (remote_dir / "payload.bin").write_bytes(payload.read_bytes())
        hosts = list(slow_hosts)   # host:port, each its own directory
        final = [fetched / host / "payload.bin" for host in hosts]
        args = [str(remote_dir / "payload.bin"), str(fetched)]
        partial = lambda: [p for host in hosts if (fetched / host).is_dir()  # noqa: E731
                           for p in (fetched / host).iterdir() if p.name.endswith(".part")]
    pssh = Pssh([direction, "-H", " ".join(slow_hosts), *conn(group, tmp_path)[2:], *mode,
                 *args], tmp_path)
    try:
        pssh.started(lambda: any(p.stat().st_size > 0 for p in partial()),
                     "a partial file with some bytes in it")
        pssh.signal(signum, whole_group=False)
        assert pssh.wait() == EXIT[signum], pssh.stderr()
    finally:
        pssh.kill()
    assert [path for path in final if path.exists()] == []  # nothing posing as complete
    if direction == "fetch":
        assert gone(partial) == []  # and the partial files were removed
    # (An upload's remote partial file stays on a link this slow: the SFTP session of a
    # write cut short never answers the close that would remove it.)
    assert described(gone(lambda: in_session(pssh.pid))) == []
    stderr = pssh.stderr()
    assert f"stopping the {direction} on 2 host(s) still running" in stderr, stderr


@MODES
def test_ctrl_c_on_a_terminal_stays_staged(group, tmp_path, mode):
    """Typed at a terminal: the first Ctrl-C only names the hosts still running (their
    commands go on), the second stops them."""
    marker = f"sleep 300.{uuid.uuid4().int % 10**9}"
    command = [sys.executable, "-m", "pssh", "run", "-H", " ".join(group.hosts),
               *conn(group, tmp_path), *mode, "--progress", "never", "--",
               f"echo started; {marker}; echo never"]
    still_running = []

    def first(screen):
        return b"\x03" if len(sleeping(marker)) >= len(group.hosts) else None

    def second(screen):
        if b"still running on" not in screen:
            return None
        # The first Ctrl-C must stop nothing: a moment for a wrongful stop to show (what
        # is checked is an absence: no event says it will not happen).
        time.sleep(1)
        still_running.extend(p for p in pgrep(marker) if b"pssh" not in _cmdline(p))
        return b"\x03"
    text, typed = on_terminal(command, dict(ENV, TERM="xterm"), [first, second], timeout=120)
    assert typed, text
    assert len(still_running) >= len(group.hosts)
    assert f"still running on {len(group.hosts)} host(s)" in text
    assert f"stopping the command on {len(group.hosts)} host(s) still running" in text
    assert "Ctrl-C again to exit at once" in text
    assert gone(lambda: pgrep(marker)) == []


def sleeping(marker: str) -> list:
    """The remote ``sleep`` of ``marker`` (``"sleep 300.N"``) itself, on each host: the
    command has started for sure. (The command line of pssh, and of the shell that
    exports pssh's stop marker before it execs the one that runs the command, hold the
    same words: a stop sent while only those exist finds nothing marked yet.)"""
    argv = marker.replace(" ", "\0").encode() + b"\0"
    return [p for p in pgrep(marker) if _cmdline(p) == argv]


def described(pids: list) -> list:
    """Processes, with what they run."""
    return [f"{pid}: " + _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")
            for pid in pids]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


@pytest.mark.parametrize("setup, expected", [
    ("{python}", "True"),                        # the terminal's foreground job
    ("{python} < /dev/null", "False"),           # input from elsewhere
    ("setsid {python}", "False"),                # a session of its own: no terminal
    ("{python} & wait", "False"),                # a script's background job (/dev/null in)
], ids=["foreground", "input-redirected", "own-session", "background-job"])
def test_who_can_press_ctrl_c(tmp_path, setup, expected):
    """The rule, in a fresh interpreter on a pseudo-terminal (script(1))."""
    probe = tmp_path / "probe.py"
    probe.write_text("from pssh.cli.signals import someone_can_press_ctrl_c\n"
                     "print('answer', someone_can_press_ctrl_c())\n")
    line = setup.format(python=shlex.join([sys.executable, str(probe)]))
    text, _ = on_terminal(["sh", "-c", line], dict(ENV, TERM="xterm"), lambda screen: None,
                          timeout=10)
    assert f"answer {expected}" in text, text
