"""What a compromised host prints cannot take over the operator's screen, and how much it
prints cannot stall the others, the deadlines, the signals or the memory of the controller."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pssh.cli.display import visible
from pssh.core.channel_io import MAX_PER_CALL
from pssh.core.streams import UNREAD_LIMIT
from loopback import addresses
from pssh.sshd import ServerGroup
from test_cli import ENV, on_terminal, pssh
from waiting import eventually



#: Moves up a line, clears it, and writes a line that looks like another host's; then sets
#: the terminal's title.
FORGERY = r"printf '\033[1A\033[2K[10.9.9.9] all good\n\033]0;owned\007\n'"


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
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


# -- a host that talks without end ---------------------------------------------------------------

def flood_on_first(group) -> str:
    """The first host prints empty lines without end; the other answers after a second."""
    return (f'case "$(echo $SSH_CONNECTION | cut -d" " -f3)" in {group.hosts[0]}) exec yes "";; '
            f'*) sleep 1; echo fine;; esac')


def test_a_flooding_host_does_not_stop_the_deadline_or_the_other_hosts(group, tmp_path):
    import time
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pssh", "run", "-t", "2", "-H", " ".join(group.hosts),
         *conn(group, tmp_path), "--", flood_on_first(group)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert f"[{group.hosts[1]}] fine".encode() in result.stdout
    assert f"{group.hosts[0]}: did not finish within 2.0 s".encode() in result.stderr
    assert elapsed < 15, f"-t 2 took {elapsed:.1f} s"


def test_sigterm_stops_a_run_whose_host_floods(group, tmp_path):
    import signal
    out = tmp_path / "out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pssh", "run", "-H", group.hosts[0], *conn(group, tmp_path),
             "--", "yes ''"], stdout=sink, stderr=subprocess.PIPE, env=ENV)
        try:
            eventually(lambda: out.stat().st_size > 100_000,
                       what="over 100 kB of the flood's output written")
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        finally:
            proc.kill()
            proc.wait()
            proc.stderr.close()
    assert proc.returncode == 143


def test_read_timeout_and_timers_run_while_a_host_floods(group):
    import gevent
    from pssh import exceptions as exc
    from pssh.clients import SSHClient
    fired = []
    with SSHClient(group.hosts[0], port=group.port, pkey=group.keys.private(),
                   allow_agent=False, identity_auth=False, ssh_config=False,
                   host_key_policy="off", known_hosts=os.devnull, num_retries=1) as client:
        output = client.run_command("yes ''", read_timeout=2)
        gevent.spawn_later(0.5, fired.append, "timer")
        lines = 0
        with pytest.raises(exc.Timeout):
            for _ in output.stdout:
                lines += 1
        client.cancel(output, timeout=10)
    assert fired == ["timer"] and lines > 0


MEASURE = """
import logging, sys
logging.basicConfig()
from pssh.clients import SSHClient
host, port, key, command = sys.argv[1:]
with SSHClient(host, port=int(port), pkey=key, allow_agent=False, identity_auth=False,
               ssh_config=False, host_key_policy="off", known_hosts="/dev/null",
               num_retries=1) as client:
    output = client.run_command(command)
    print(list(output.stdout))
    reader = client._reader_of(output.channel)
    print(reader.stderr.held(), reader.streams.dropped[1])
# VmHWM, this program's own peak: ru_maxrss keeps, across exec, the peak of the process
# that started us (the test process, hundreds of MiB after a few hundred tests).
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024)
"""


def test_a_reader_of_stdout_alone_does_not_hold_a_flood_of_stderr(group):
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, group.hosts[0], str(group.port), group.keys.private(),
         "head -c 300000000 /dev/zero >&2; echo done"],
        capture_output=True, text=True, env=ENV, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    lines, counts, peak_mib = done.stdout.splitlines()
    held, dropped = map(int, counts.split())
    assert lines == "['done']"
    # At most the limit kept (and a read more); the rest dropped and counted.
    assert held <= UNREAD_LIMIT + MAX_PER_CALL and held + dropped == 300_000_000
    # Holding it all peaked at 315 MiB (the main before the limit); this peaks at 60.
    assert int(peak_mib) < 150, (f"{peak_mib} MiB at the peak for 300 MB of unread "
                                 f"stderr, {held >> 20} MiB of it kept")
    assert "of stderr unread while stdout is read: dropping" in done.stderr


def test_a_line_without_end_is_shown_in_pieces_not_held_whole(group, tmp_path):
    wrapper = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
               "stderr=subprocess.PIPE, text=True)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss"
               " // 1024)\nprint(done.stderr, file=sys.stderr)\n")
    done = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "pssh", "run", "-H",
         group.hosts[0], *conn(group, tmp_path), "--",
         "head -c 100000000 /dev/zero | tr '\\0' x"],
        capture_output=True, text=True, env=ENV, timeout=240)
    code, peak_mib = done.stdout.split()
    assert code == "0", done.stderr
    assert int(peak_mib) < 300, f"the CLI peaked at {peak_mib} MiB for a 100 MB line"
    assert "a line longer than 1 MiB: shown in pieces" in done.stderr


# -- pssh.aio: the same floods on the asyncio loop ------------------------------------------------

@pytest.fixture
def aio_login(group, tmp_path):
    """pssh.aio's connect() arguments for the group's first host."""
    from conftest import trusting
    return dict(port=group.port, client_keys=[group.keys.private()], agent_path=None,
                ssh_config=False, known_hosts=trusting(tmp_path / "known_hosts", group))


def test_pssh_aio_lines_of_a_flood_leave_timers_and_wait_for_running(group, aio_login,
                                                                      run_loop):
    """``yes ''`` sends empty lines faster than they can be read: readline hands them on
    from what is buffered, and must still give the loop its turns."""
    import asyncio
    from pssh import aio

    async def main():
        async with aio.connect(group.hosts[0], **aio_login) as conn:
            proc = await conn.create_process("yes ''", encoding=None)
            read = 0
            seen = []  # lines read so far, at each tick of the timer

            async def tick() -> None:
                while True:
                    await asyncio.sleep(0.05)
                    seen.append(read)

            async def read_all() -> None:
                nonlocal read
                async for _ in proc.stdout:
                    read += 1

            ticker = asyncio.ensure_future(tick())
            try:
                await asyncio.wait_for(read_all(), 2)
            except asyncio.TimeoutError:
                cut = True
            else:
                cut = False
            ticker.cancel()
            proc.kill()
            return cut, read, seen
    cut, read, seen = run_loop(main())
    # wait_for cancelled the read (``yes`` never ends), which had read lines...
    assert cut and read > 0
    # ...and the timer ticked while the lines were being read, not only around it: it saw
    # the count grow from tick to tick.
    assert len(set(seen)) >= 3, f"the timer saw the reader at {sorted(set(seen))}"


# -- bounded memory that loses nothing: long lines, slow readers ------------------------------

FLOOD_READER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flood_reader.py")


def read_flood(group, tmp_path, front_end: str, how: str, command: str):
    """(what tests/flood_reader.py reports, its stderr) for ``command`` on the first host."""
    import json
    from conftest import trusting
    known_hosts = trusting(tmp_path / f"known_hosts_{front_end}", group)
    done = subprocess.run(
        [sys.executable, FLOOD_READER, front_end, how, group.hosts[0], str(group.port),
         group.keys.private(), known_hosts, command],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def produced(command: str):
    """(sha256, bytes) of what ``command`` writes to stdout, run here."""
    import hashlib
    digest, size = hashlib.sha256(), 0
    with subprocess.Popen(["sh", "-c", command], stdout=subprocess.PIPE) as proc:
        while data := proc.stdout.read(1 << 20):
            digest.update(data)
            size += len(data)
    assert proc.returncode == 0
    return digest.hexdigest(), size


#: About 100 MB of digits, no newline anywhere (every byte's place checked by the hash).
ENDLESS_LINE = "seq 1 14000000 | tr -d '\\n'"


@pytest.mark.parametrize("front_end", ["gevent", "aio"])
def test_a_line_without_end_comes_in_pieces_in_bounded_memory(group, tmp_path, front_end):
    from pssh.core.lines import MAX_LINE
    report, log = read_flood(group, tmp_path, front_end, "lines", ENDLESS_LINE)
    digest, size = produced(ENDLESS_LINE)
    stdout = report["stdout"]
    # Every byte, in order, in pieces no longer than the cap.
    assert (stdout["sha256"], stdout["bytes"]) == (digest, size)
    assert stdout["longest"] <= MAX_LINE and stdout["pieces"] >= size // MAX_LINE
    # Held whole it peaked at over 300 MiB (the line, its join, its decoding).
    assert report["peak_mib"] < 150, f"{report['peak_mib']} MiB at the peak"
    said = [line for line in log.splitlines() if "a line longer than 1 MiB" in line]
    assert len(said) == 1 and group.hosts[0] in said[0], log[-2000:]


#: About 60 MB on each stream, at once; each line numbered (the hash checks the order).
TWO_FLOODS = "seq -f '%0999g' 1 60000 & seq -f '%0999g' 1 60000 >&2; wait"
ONE_FLOOD = "seq -f '%0999g' 1 60000"


@pytest.mark.parametrize("front_end", ["gevent", "aio"])
def test_a_slow_reader_slows_the_command_and_loses_nothing(group, tmp_path, front_end):
    """stdout read slowly, stderr as it comes: reading stderr moves stdout's output out
    of the shared window; at the bound it is held back (the window closes, the command
    waits), never dropped."""
    report, log = read_flood(group, tmp_path, front_end, "slow", TWO_FLOODS)
    digest, size = produced(ONE_FLOOD)
    for stream in ("stdout", "stderr"):
        got = report[stream]
        assert (got["sha256"], got["bytes"]) == (digest, size), (stream, got)
    assert report["dropped"] == [0, 0] and "dropping" not in log
    # Both streams held at most the bound (32 MiB) and a window; it peaked at 75-95 MiB.
    assert report["peak_mib"] < 200, f"{report['peak_mib']} MiB at the peak"


# -- the command line's views that keep output, and its files --------------------------------

PEAK_WRAPPER = """
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    done = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
sys.stderr.write(done.stderr)
"""


def pssh_measured(tmp_path, *args):
    """(exit status, peak MiB, stdout bytes, stderr) of ``pssh ARGS``, its peak memory its
    own (measured by a parent of its own, which only waits)."""
    out = tmp_path / "pssh.out"
    done = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, str(out), sys.executable, "-m",
                           "pssh", *args], capture_output=True, text=True, env=ENV, timeout=600)
    code, peak = map(int, done.stdout.split())
    return code, peak, out.read_bytes(), done.stderr


#: About 100 MB of output in numbered lines of 1000 bytes.
HUNDRED_MB = "seq -f '%0999g' 1 100000"
#: Past the 32 MiB the streamed view once dropped beyond, in a little under half the time.
FORTY_MB = "seq -f '%0999g' 1 40000"


def test_json_keeps_a_bounded_part_and_says_how_much_it_left_out(group, tmp_path):
    import json
    from pssh.cli.display import KEPT_OUTPUT
    code, peak, out, err = pssh_measured(tmp_path, "run", "--json", "-H", group.hosts[0],
                                         *conn(group, tmp_path), "--", HUNDRED_MB)
    assert code == 0, err
    record = json.loads(out)
    kept = len(record["stdout"]) + 1  # the lines, each with its newline
    assert record["stdout"].startswith("0" * 998 + "1\n") and \
        KEPT_OUTPUT <= kept <= KEPT_OUTPUT + 1000
    assert kept + record["stdout_omitted"] == 100_000_000 and record["stderr_omitted"] == 0
    # Kept whole it peaked at about 400 MiB.
    assert peak < 150, f"pssh --json peaked at {peak} MiB for 100 MB of output"


@pytest.mark.parametrize("view", ["-i", "-b", "--diff"])
def test_the_views_say_where_output_was_left_out(group, tmp_path, view):
    command = "seq -f '%0999g' 1 3000; seq -f '%0999g' 1 2000 >&2"
    result = pssh("run", view, "-H", " ".join(group.hosts), *conn(group, tmp_path), "--",
                  command, timeout=120)
    assert result.returncode == 0, result.stderr
    kept = (1 << 20) // 1000 + 1  # lines up to the bound, and the one that reached it
    for stream, size in (("stdout", 3000), ("stderr", 2000)):
        note = f"[pssh: {(size - kept) * 1000} more bytes of {stream} left out: over 1 MiB; " \
               f"--output-dir keeps it all]"
        assert note in result.stdout, result.stdout[-3000:]
    assert f"{kept:0999d}" in result.stdout and f"{kept + 1:0999d}" not in result.stdout


def test_the_streamed_view_shows_every_line_of_a_flood(group, tmp_path):
    """The display is slower than the host: stdout waits (the command with it), and its
    lines all come, in order, although the stderr pump moves stdout's output meanwhile
    (it was dropped beyond 32 MiB: 37% of 100 MB shown, 84% of 40 MB)."""
    import hashlib
    shown = tmp_path / "shown"
    with open(shown, "wb") as sink:
        done = subprocess.run([sys.executable, "-m", "pssh", "run", "-H", group.hosts[0],
                               *conn(group, tmp_path), "--", FORTY_MB],
                              stdout=sink, stderr=subprocess.PIPE, text=True, env=ENV,
                              timeout=600)
    assert done.returncode == 0 and "dropping" not in done.stderr, done.stderr
    prefix = f"[{group.hosts[0]}] ".encode()
    digest, lines = hashlib.sha256(), 0
    with open(shown, "rb") as text:
        for line in text:
            assert line.startswith(prefix), line[:100]
            digest.update(line[len(prefix):])
            lines += 1
    assert (digest.hexdigest(), lines) == (produced(FORTY_MB)[0], 40_000)


#: Bytes no line view keeps as they are: \r\n, bytes that are not UTF-8, a line of 3 MB,
#: and no newline at the end.
AS_IT_CAME = ("printf 'a\\r\\nb\\377\\376\\n'; seq 1 450000 | tr -d '\\n'; printf '\\nlast'; "
              "printf 'err\\377' >&2")


def test_output_dir_files_keep_the_bytes_as_they_came(group, tmp_path):
    out = tmp_path / "runs"
    code, peak, _, err = pssh_measured(tmp_path, "run", "--output-dir", str(out), "-H",
                                       group.hosts[0], *conn(group, tmp_path), "--",
                                       f"{AS_IT_CAME}; {HUNDRED_MB}")
    assert code == 0, err
    host = group.hosts[0]
    expected, size = produced(f"{AS_IT_CAME} 2>/dev/null; {HUNDRED_MB}")
    import hashlib
    written = (out / f"{host}.stdout").read_bytes()
    assert (hashlib.sha256(written).hexdigest(), len(written)) == (expected, size)
    assert (out / f"{host}.stderr").read_bytes() == b"err\xff"
    assert peak < 150, f"pssh --output-dir peaked at {peak} MiB for 100 MB of output"


def test_pssh_aio_stderr_to_stdout_loses_nothing_of_a_flood(group, aio_login, run_loop,
                                                            tmp_path):
    """``stderr=STDOUT`` takes each chunk of either stream as it comes: reading stdout to
    its end first left 40 MB of stderr unread meanwhile, and beyond the bound dropped."""
    import asyncio.subprocess
    from pssh import aio
    target = tmp_path / "merged"

    async def main():
        async with aio.connect(group.hosts[0], **aio_login) as conn:
            return await conn.run("head -c 40000000 /dev/zero >&2; echo done",
                                  stdout=str(target), stderr=asyncio.subprocess.STDOUT)
    assert run_loop(main()).exit_status == 0
    merged = target.read_bytes()
    # (Where "done" lands among the last window of zeros is the order of the reads.)
    assert len(merged) == 40_000_005 and merged.count(b"\0") == 40_000_000
    assert b"done\n" in merged
