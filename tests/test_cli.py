"""The pssh command line, driven as a subprocess against real sshd hosts."""
import json
import os
import shlex
import subprocess
import sys
import uuid

import pytest

import pssh as pssh_package
from loopback import address, addresses
from pssh.sshd import ServerGroup
from processes import pgrep
from waiting import eventually, gone

REFUSED = address()  # nobody listens there
# The subprocess imports the same pssh as the tests, wherever they run from.
ENV = dict(os.environ, COLUMNS="120", PYTHONPATH=os.pathsep.join(
    [os.path.dirname(os.path.dirname(os.path.abspath(pssh_package.__file__))),
     os.environ.get("PYTHONPATH", "")]))


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


def pssh(*args, timeout=60, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "pssh", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env or ENV)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["run"]])
def test_help_and_usage_errors_load_nothing_heavy(args):
    # Parsing comes first: asking for help (or getting a usage error) must not
    # pay for gevent, the clients or rich.
    probe = ("import sys\nfrom pssh.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\n"
             "print(sorted(m for m in ('gevent', 'rich', 'pssh.clients', 'ssh2.session')"
             " if m in sys.modules), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True,
                         timeout=60, env=ENV)
    assert "usage: pssh" in out.stdout or "pssh run: error:" in out.stderr
    assert out.stderr.strip().endswith("[]")


def conn(group, tmp_path):
    """Options that reach the group: its port and key, a private known_hosts, no config."""
    return ["--port", str(group.port), "-k", group.keys.private(), "--no-agent", "-F", "none",
            "--known-hosts", str(tmp_path / "known_hosts")]


def hosts_arg(group, *extra):
    return ["-H", " ".join([*group.hosts, *extra])]


def test_run_streams_prefixed_lines_and_exits_zero(group, tmp_path):
    result = pssh("run", *hosts_arg(group), *conn(group, tmp_path), "--",
                  "echo", "out;", "echo", "err", ">&2")
    assert result.returncode == 0, result.stderr
    lines, errors = result.stdout.splitlines(), result.stderr.splitlines()
    for host in group.hosts:
        assert f"[{host}] out" in lines
        assert f"[{host}] err" in errors  # each stream to its own, as ssh
    # Quiet when all is well and not on a terminal: nothing else but, as from ssh, the
    # host keys added to the (new) known_hosts file.
    assert len(lines) == len(group.hosts)
    others = [line for line in errors if not line.endswith("] err")]
    assert len(others) == len(group.hosts)
    assert all(line.startswith("pssh: Permanently added '") for line in others)


# The same runs with the hosts sharded over worker processes.
PROCESSES = pytest.mark.parametrize("sharding", [[], ["--processes", "2"]],
                                    ids=["one-process", "processes-2"])


@PROCESSES
def test_json_output_with_a_failed_host(group, tmp_path, sharding):
    result = pssh("run", *hosts_arg(group, REFUSED), *conn(group, tmp_path), *sharding,
                  "--json", "--", 'printf "a\\nb\\n"; echo e >&2; exit 3')
    assert result.returncode == 1
    records = {r["host"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(records) == {*group.hosts, REFUSED}
    for host in group.hosts:
        assert records[host]["exit_code"] == 3
        assert records[host]["stdout"] == "a\nb" and records[host]["stderr"] == "e"
        assert records[host]["error"] is None and records[host]["duration"] > 0
    refused = records[REFUSED]
    assert refused["exit_code"] is None and "cannot connect" in refused["error"]
    assert f"pssh: {REFUSED}: cannot connect" in result.stderr


def test_inline_groups_each_host(group, tmp_path):
    result = pssh("run", "-i", *hosts_arg(group), *conn(group, tmp_path), "--",
                  "echo one; echo two")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for host in group.hosts:
        header = next(i for i, line in enumerate(lines) if f"] {host} [OK] exit 0" in line)
        assert lines[header + 1:header + 3] == ["one", "two"]


def test_output_and_error_directories(group, tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    result = pssh("run", *hosts_arg(group), *conn(group, tmp_path), "-o", str(out), "-e",
                  str(err), "--", 'echo "o $SSH_CONNECTION" | cut -d" " -f1,4; echo x >&2')
    assert result.returncode == 0 and result.stdout == ""
    for host in group.hosts:
        assert (out / host).read_text() == f"o {host}\n"
        assert (err / host).read_text() == "x\n"


def test_host_files_ranges_and_user_port_syntax(group, tmp_path):
    user = group.servers[0].user
    network, first = group.hosts[0].rsplit(".", 1)
    last = group.hosts[-1].rsplit(".", 1)[1]
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(f"# fleet\n{network}.[{first}-{last}]  # a range\n\n"
                          f"{user}@{group.hosts[0]}:{group.port}\n")
    result = pssh("run", "-h", str(hosts_file), *conn(group, tmp_path), "--json", "--",
                  'echo "$SSH_CONNECTION" | cut -d" " -f3')
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["stdout"] for r in records) == sorted([*group.hosts, group.hosts[0]])


@PROCESSES
def test_timeout_fails_only_the_slow_host(group, tmp_path, sharding):
    sleeper = f"sleep 60.{uuid.uuid4().int % 10**9}"  # this test's commands alone
    # -t counts from each host's start, worker processes' start-up included: 3 s was
    # too short for the quick hosts on a loaded machine (they timed out too).
    result = pssh("run", *hosts_arg(group), *conn(group, tmp_path), *sharding, "-t", "10",
                  "--json", "--",
                  f'case "$SSH_CONNECTION" in *{group.hosts[0]}*) {sleeper};; esac; echo done')
    assert result.returncode == 1
    records = {r["host"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert "did not finish within 10" in records[group.hosts[0]]["error"]
    assert all(records[h]["stdout"] == "done" for h in group.hosts[1:])
    # the slow host's command was stopped, not left running
    assert gone(lambda: pgrep(sleeper)) == []


@PROCESSES
def test_copy_and_fetch_trees(group, tmp_path, sharding):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha\n")
    (tree / "sub" / "b.bin").write_bytes(os.urandom(200_000))
    # The hosts share this machine's files: copied into a directory that exists, as scp
    # does it, every host writes the same remote/tree (a target that did not exist would
    # be made by the first host, and the others would copy into it).
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    result = pssh("copy", "-r", *hosts_arg(group), *conn(group, tmp_path), *sharding, str(tree),
                  str(remote_dir))
    assert result.returncode == 0, result.stderr
    remote = str(remote_dir / "tree")
    fetched = tmp_path / "fetched"
    result = pssh("fetch", "-r", *hosts_arg(group), *conn(group, tmp_path), *sharding, remote,
                  str(fetched))
    assert result.returncode == 0, result.stderr
    name = os.path.basename(remote)
    for host in group.hosts:
        assert (fetched / host / name / "a.txt").read_text() == "alpha\n"
        assert (fetched / host / name / "sub" / "b.bin").read_bytes() == \
            (tree / "sub" / "b.bin").read_bytes()
    result = pssh("fetch", *hosts_arg(group), *conn(group, tmp_path), *sharding,
                  "/nonexistent/file", str(fetched))
    assert result.returncode == 1
    assert "does not exist" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "--bogus", "-H", "h", "--", "true"], "unrecognized arguments: --bogus"),
    (["run", "-H", "h"], "no command given"),
    (["run", "--", "true"], "no hosts given"),
    (["run", "-H", "web[9-1]", "--", "true"], "bad range [9-1]"),
    (["run", "-H", "web[1-", "--", "true"], "unbalanced brackets"),
    (["run", "-H", "h:99999", "--", "true"], "bad port '99999'"),
    (["run", "-h", "/nonexistent/hosts", "--", "true"], "cannot read hosts file"),
    (["copy", "-H", "h", "/nonexistent/local", "/tmp/x"], "local file /nonexistent/local"),
    (["run", "-H", "h", "-k", "/nonexistent/key", "--", "true"], "key file /nonexistent/key"),
    (["run", "--embedded", "2", "-H", "h", "--", "true"], "leave out -H"),
])
def test_bad_input_gives_one_line_and_a_hint(args, message, tmp_path):
    result = pssh(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and message in lines[0], result.stderr
    assert lines[1].startswith("Try 'pssh ")


def test_empty_hosts_file(tmp_path):
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("# nothing here yet\n\n")
    result = pssh("run", "-h", str(hosts_file), "--", "true")
    assert result.returncode == 2 and "host list is empty" in result.stderr


def test_help_for_each_subcommand():
    for name in ("run", "copy", "fetch"):
        result = pssh(name, "--help")
        assert result.returncode == 0
        assert "examples:" in result.stdout and "exit status" in result.stdout


def test_progress_bar_and_summary_on_a_terminal(group, tmp_path):
    """Under a pseudo-terminal (script(1)): the live bar, then the summary table."""
    command = [sys.executable, "-m", "pssh", "run", *hosts_arg(group, REFUSED),
               *conn(group, tmp_path), "--", "sleep 0.5; echo hi"]
    typescript = tmp_path / "typescript"
    env = dict(ENV, LINES="40", TERM="xterm")
    subprocess.run(["script", "-qec", shlex.join(command), str(typescript)],
                   env=env, capture_output=True, timeout=60)
    screen = typescript.read_text(errors="replace")
    assert "hosts done" in screen and "running" in screen  # the bar
    assert f"[{group.hosts[0]}] hi" in screen
    assert "3/4 hosts succeeded" in screen  # the summary table
    summary = screen[screen.index("hosts succeeded"):]
    # failures first, with their error
    assert summary.index(REFUSED) < summary.index(group.hosts[0])
    assert "cannot connect" in summary
    assert 'COMMAND_EXIT_CODE="1"' in screen


def test_forward_agent(group, tmp_path):
    path = str(tmp_path / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", path], stdout=subprocess.DEVNULL)
    try:
        env = dict(ENV, SSH_AUTH_SOCK=path)
        eventually(lambda: os.path.exists(path), what=f"ssh-agent's socket {path}")
        subprocess.run(["ssh-add", group.keys.private("rsa")], env=env, check=True,
                       capture_output=True)
        result = pssh("run", *hosts_arg(group), *conn(group, tmp_path), "--forward-agent",
                      "--", "ssh-add -l", env=env)
    finally:
        agent.terminate()
        agent.wait()
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(RSA)") == len(group.hosts)


def test_embedded_hosts(tmp_path):
    result = pssh("run", "--embedded", "2", "--json", "--", "echo up", timeout=120)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["host"] for r in records) == ["127.0.0.1", "127.0.0.2"]
    assert all(r["stdout"] == "up" for r in records)


def on_terminal(command, env, answer, timeout=60):
    """Run ``command`` under script(1)'s pseudo-terminal. ``answer(screen)`` returns what
    to type once the screen calls for it (then it is not asked again), or None; a list of
    such functions types each one's answer in turn. Returns the screen and whether
    everything was typed."""
    import select
    import time

    answers = list(answer) if isinstance(answer, (list, tuple)) else [answer]
    proc = subprocess.Popen(["script", "-qec", shlex.join(command), "/dev/null"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    screen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            screen += chunk
        keys = answers[0](screen) if answers else None
        if keys is not None:
            proc.stdin.write(keys)  # typed only once called for, as a person would
            proc.stdin.flush()
            answers.pop(0)
    proc.kill()
    proc.wait()
    return screen.decode(errors="replace"), not answers


def test_password_prompt_is_not_echoed(tmp_path):
    """-A asks on the terminal and logs in with the answer."""
    with ServerGroup(addresses=addresses(1), password="s3cret pw") as group:
        command = [sys.executable, "-m", "pssh", "run", "-H", group.hosts[0], "--port",
                   str(group.port), "-A", "--no-agent", "-F", "none", "--known-hosts",
                   str(tmp_path / "kh"), "--progress", "never", "--", "echo logged in"]
        text, answered = on_terminal(command, dict(ENV, TERM="xterm", HOME=str(tmp_path)),
                                     lambda screen: b"s3cret pw\n" if b"Password:" in screen
                                     else None)
    assert answered, text
    assert "s3cret" not in text  # not echoed
    assert f"[{group.hosts[0]}] logged in" in text, text


@PROCESSES
def test_ctrl_c_stops_the_remote_commands(group, tmp_path, sharding):
    """The first Ctrl-C (typed on the terminal) names the hosts still running, the second
    stops their commands (sshd alone would leave them running); none is left behind."""
    sleeper = f"sleep 321.{uuid.uuid4().int % 10**9}"  # this test's commands alone
    command = [sys.executable, "-m", "pssh", "run", *hosts_arg(group), *conn(group, tmp_path),
               *sharding, "--progress", "never", "--", f"echo started; {sleeper}; echo never"]
    text, interrupted = on_terminal(command, dict(ENV, TERM="xterm"), [
        lambda screen: b"\x03" if screen.count(b"started") == len(group.hosts) else None,
        lambda screen: b"\x03" if b"still running on" in screen else None])
    assert interrupted, text
    # The first Ctrl-C says who is still running; the second stops them.
    network = group.hosts[0].rsplit(".", 1)[0]
    assert f"still running on {len(group.hosts)} host(s): {network}.[" in text, text
    assert f"stopping the command on {len(group.hosts)} host(s) still running" in text, text
    assert all(host in text for host in group.hosts) and "never" not in text
    # The remote processes are gone (the servers run on this machine).
    assert gone(lambda: pgrep(sleeper)) == []
