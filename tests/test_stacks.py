"""``kill -USR1`` on a pssh run that seems stuck: every pssh process of the run (the
command line, its worker processes) writes its greenlets' stacks to standard error and
goes on; the run ends as it would have."""
import os
import signal
import subprocess
import sys
import uuid

import pytest

from loopback import addresses
from processes import descendants, pgrep, signal_each
from pssh.sshd import ServerGroup
from test_cli import ENV
from waiting import eventually


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


@pytest.mark.parametrize("mode", [[], ["--processes", "2"]], ids=["one-process", "processes-2"])
def test_sigusr1_shows_what_each_host_waits_for_and_the_run_goes_on(group, mode, tmp_path):
    marker = f"pssh-stacks-{uuid.uuid4().hex[:8]}"
    release = tmp_path / "release"
    # Each host waits until the test says; the run is then "stuck" in a known place.
    command = f"while [ ! -e {release} ]; do sleep 0.1; done; echo {marker}"
    with subprocess.Popen(
            [sys.executable, "-m", "pssh", "run", "-H", " ".join(group.hosts),
             "--port", str(group.port), "-k", group.keys.private(), "--no-agent",
             "-F", "none", "--known-hosts", group.known_hosts_file(), *mode, "--", command],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=ENV) as run:
        try:
            eventually(lambda: len(pgrep(f"echo {marker}")) >= len(group.hosts),
                       what="the command running on every host")
            workers = [pid for pid, _ in descendants(run.pid)]
            assert bool(workers) == bool(mode), workers  # the worker processes
            assert signal_each([run.pid] + workers, signal.SIGUSR1)
            release.touch()
            stdout, stderr = run.communicate(timeout=60)
        finally:
            release.touch()
            if run.poll() is None:
                run.kill()
    assert run.returncode == 0, stderr
    # The run went on to its end: every host's output, none lost.
    assert stdout.decode().count(marker) == len(group.hosts), stdout
    text = stderr.decode()
    # One set of stacks per process signalled, each naming its process.
    for pid in [run.pid] + workers:
        assert f"---- pssh: stacks of process {pid} (SIGUSR1) ----" in text, text
    assert text.count("---- end of stacks ----") == 1 + len(workers), text
    # Greenlets, not only threads: the per-host work shows where it waits.
    assert "Greenlet" in text and "* Greenlets" in text, text


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGINT], ids=["SIGUSR1", "SIGINT"])
def test_a_signal_that_reaches_a_worker_while_it_starts_is_not_its_end(group, sig):
    # Ctrl-C and kill -USR1 at a terminal reach the whole process group whenever they
    # come: each worker is signalled as soon as it exists, before it can have set its
    # handlers (a Python process takes tens of milliseconds to get there).
    marker = f"pssh-early-{uuid.uuid4().hex[:8]}"
    with subprocess.Popen(
            [sys.executable, "-m", "pssh", "run", "-H", " ".join(group.hosts),
             "--port", str(group.port), "-k", group.keys.private(), "--no-agent",
             "-F", "none", "--known-hosts", group.known_hosts_file(), "--processes", "2",
             "--", f"echo {marker}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=ENV) as run:
        signalled: set = set()
        try:
            while run.poll() is None and len(signalled) < 2:
                for pid, _ in descendants(run.pid):
                    if pid not in signalled:
                        os.kill(pid, sig)
                        signalled.add(pid)
            stdout, stderr = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
    text = stderr.decode()
    assert run.returncode == 0, text
    assert stdout.decode().count(marker) == len(group.hosts), stdout
    assert len(signalled) == 2, signalled
    if sig == signal.SIGUSR1:  # taken once the handler was there: stacks, not an end
        for pid in signalled:
            assert f"---- pssh: stacks of process {pid} (SIGUSR1) ----" in text, text
    else:  # a worker ignores SIGINT: its parent decides
        assert "KeyboardInterrupt" not in text, text


def test_the_module_imports_first_and_writes_stacks_in_a_program_of_ones_own():
    # A program of the user's own, on gevent: pssh.stacks imported first, installed, then
    # signalled by itself; it goes on after writing its stacks.
    program = ("import os, signal\n"
               "from pssh import stacks\n"
               "assert stacks.install()\n"
               "import gevent\n"
               "def waiter():\n"
               "    gevent.sleep(0.2)\n"
               "    return 'went on'\n"
               "g = gevent.spawn(waiter)\n"
               "gevent.sleep(0)\n"
               "os.kill(os.getpid(), signal.SIGUSR1)\n"
               "print(g.get())\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=60, env=ENV, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "went on\n"
    assert "stacks of process" in result.stderr and "in waiter" in result.stderr, result.stderr
