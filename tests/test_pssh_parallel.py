"""pssh clients on gevent against real sshd hosts on loopback, including faulty ones."""
import socket
import subprocess
import time

import gevent
import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.config import HostConfig
from loopback import addresses
from waiting import eventually
from pssh.sshd import ServerGroup
from ssh2 import exceptions as ssh2_exc


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(5)) as g:
        yield g


@pytest.fixture
def known_hosts(tmp_path):
    return str(tmp_path / "known_hosts")


#: The clients client_for() made during the running test.
_made = []


@pytest.fixture(autouse=True)
def closing_clients():
    """Each test's clients are closed after it, whatever the test did (their connections
    would otherwise wait for the collector, their sshd sessions with them)."""
    yield
    while _made:
        _made.pop().close()


def client_for(group, known_hosts, hosts=None, **kwargs):
    kwargs.setdefault("timeout", 10)
    kwargs.setdefault("retry_delay", 0.1)
    client = ParallelSSHClient(hosts or group.hosts, port=group.port,
                               pkey=group.keys.private(), known_hosts=known_hosts,
                               allow_agent=False, identity_auth=False, **kwargs)
    _made.append(client)
    return client


def test_run_command_on_every_host(group, known_hosts):
    client = client_for(group, known_hosts)
    output = client.run_command('echo "$SSH_CONNECTION"; echo warn >&2; exit 4')
    assert [o.host for o in output] == group.hosts
    for host_output in output:
        assert list(host_output.stdout)[0].split()[2] == host_output.host
        assert list(host_output.stderr) == ["warn"]
        assert host_output.exit_code == 4
        assert host_output.exception is None
    assert client.finished(output)
    # accept-new wrote every host's key
    assert open(known_hosts).read().count("\n") == len(group.hosts)


def test_join_then_read_and_exit_codes(group, known_hosts):
    client = client_for(group, known_hosts)
    output = client.run_command("for i in 1 2 3; do echo line$i; done; exit 7")
    client.join(output)
    assert all(o.exit_code == 7 for o in output)
    assert [list(o.stdout) for o in output] == [["line1", "line2", "line3"]] * len(group.hosts)
    output = client.run_command("echo discarded; exit 1")
    client.join(output, consume_output=True)
    assert all(o.exit_code == 1 for o in output)
    assert all(list(o.stdout) == [] for o in output)


def test_host_args_and_shell_quoting(group, known_hosts):
    client = client_for(group, known_hosts)
    output = client.run_command("echo %s", host_args=[f"arg{i}" for i in range(5)])
    assert [list(o.stdout) for o in output] == [[f"arg{i}"] for i in range(5)]
    output = client.run_command("echo 'it'\"'\"'s quoted'", shell="sh -c")
    assert all(list(o.stdout) == ["it's quoted"] for o in output)
    with pytest.raises(exc.HostArgumentError):
        client.run_command("echo %s", host_args=["only one"])


def test_line_splitting_binary_and_invalid_utf8(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:1])
    out = client.run_command(r"printf 'a\r\nb\n\377\376 bad\nnul\000byte\nno newline'")[0]
    assert list(out.stdout) == ["a", "b", "\ufffd\ufffd bad", "nul\x00byte", "no newline"]
    out = client.run_command(r"printf '\377\n'", errors="surrogateescape")[0]
    assert list(out.stdout) == ["\udcff"]


def test_large_output_and_stderr_do_not_stall(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:2])
    output = client.run_command("head -c 20000000 /dev/zero | tr '\\0' x >&2; seq 1 500000")
    for host_output in output:
        lines = list(host_output.stdout)   # stderr (20 MB) is drained meanwhile
        assert len(lines) == 500000 and lines[-1] == "500000"
        assert sum(len(line) for line in host_output.stderr) == 20000000
        assert host_output.exit_code == 0


def test_streaming_fifty_megabytes_holds_little_in_memory(group, known_hosts):
    # Each read lets the server send more: reading "all that is there" before
    # handing out a line kept up to the whole output in memory.
    import tracemalloc
    client = client_for(group, known_hosts, hosts=group.hosts[:1])
    output = client.run_command("head -c 52428800 /dev/zero | tr '\\0' x | fold -w 1000")
    tracemalloc.start()
    try:
        total = sum(len(line) for line in output[0].stdout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == 52428800
    assert peak < 4 * 1024 * 1024, f"{peak} bytes held while streaming"


def test_stdin(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:1])
    out = client.run_command("cat; echo done")[0]
    out.stdin.write("from stdin\n")
    out.stdin.flush()
    out.stdin.close()
    assert list(out.stdout) == ["from stdin", "done"]


def test_stdin_flush_keeps_the_output_not_yet_read(group, known_hosts):
    # libssh2's channel_flush throws away output received and not yet read: flush() must
    # not call it. Input written (and flushed) while the command echoes it back all comes
    # back, byte for byte.
    client = client_for(group, known_hosts, hosts=group.hosts[:1])
    data = b"".join(b"%07d %s\n" % (i, b"x" * 56) for i in range(64 * 1024))  # 4 MiB
    out = client.run_command("cat")[0]

    def feed():
        for start in range(0, len(data), 64 * 1024):
            out.stdin.write(data[start:start + 64 * 1024])
            out.stdin.flush()
        out.stdin.close()

    feeder = gevent.spawn(feed)
    echoed = b"".join(out.buffers.stdout.rw_buffer.chunks())
    feeder.get(timeout=60)
    assert len(echoed) == len(data) and echoed == data


def test_as_completed_yields_fastest_first(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:3])
    output = client.run_command("sleep %s; echo $0", host_args=["1.5", "0", "0.5"],
                                shell="sh -c")
    order = [o.host for o in client.as_completed(output)]
    assert order == [group.hosts[1], group.hosts[2], group.hosts[0]]
    assert all(o.exit_code == 0 for o in output)


def test_read_timeout_and_join_timeout(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:2])
    out = client.run_command("sleep 30", read_timeout=0.5, cancellable=True)[0]
    started = time.monotonic()
    with pytest.raises(exc.Timeout) as info:
        list(out.stdout)
    assert out.host in str(info.value)
    assert time.monotonic() - started < 10
    output = client.run_command("sleep 30", cancellable=True)
    with pytest.raises(exc.Timeout) as info:
        client.join(output, timeout=0.5)
    assert group.hosts[0] in str(info.value) and group.hosts[1] in str(info.value)
    client.cancel()  # the sleeps end with the test


def test_failed_hosts_do_not_stop_the_others(group, known_hosts, tmp_path):
    refused, silent = addresses(2)
    with socket.socket() as s:  # a port nobody listens on
        s.bind((refused, 0))
        closed_port = s.getsockname()[1]
    blackhole = socket.socket()   # accepts TCP, never speaks
    blackhole.bind((silent, 0))
    blackhole.listen(16)
    hosts = group.hosts[:2] + [refused, silent, "no-such-host.invalid"]
    configs = [HostConfig(), HostConfig(), HostConfig(port=closed_port, num_retries=1,
                                                      retry_delay=0.1),
               HostConfig(port=blackhole.getsockname()[1]), HostConfig()]
    client = client_for(group, known_hosts, hosts=hosts, host_config=configs, timeout=1)
    started = time.monotonic()
    output = client.run_command("echo ok", stop_on_errors=False)
    elapsed = time.monotonic() - started
    assert [list(o.stdout) for o in output[:2]] == [["ok"], ["ok"]]
    assert isinstance(output[2].exception, exc.ConnectionError)
    assert isinstance(output[2].exception, ConnectionRefusedError)  # as parallel-ssh raises it
    assert refused in str(output[2].exception) and "refused" in str(output[2].exception)
    assert isinstance(output[3].exception, exc.Timeout)
    assert silent in str(output[3].exception)
    assert isinstance(output[4].exception, exc.UnknownHostError)
    for failed in output[2:]:
        assert list(failed.stdout) == [] and failed.exit_code is None
    assert elapsed < 15, "a dead host held up the run"
    with pytest.raises(exc.ConnectionError):
        client.run_command("echo ok")  # stop_on_errors=True raises the first failure
    blackhole.close()


def test_rejected_login_is_tried_num_retries_times_on_one_connection(group, known_hosts,
                                                                    tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    server = group.servers[0]
    before = server.read_log(None).count("Connection from")
    with pytest.raises(exc.AuthenticationError) as info:
        SSHClient(server.address, port=server.port, pkey=str(tmp_path / "k"),
                  known_hosts=known_hosts, allow_agent=False, identity_auth=False,
                  timeout=5, num_retries=3, retry_delay=0.05)
    err = info.value
    assert server.user in str(err) and server.address in str(err) and "3 of 3" in str(err)
    # parallel-ssh's args: (message, host, port, last cause, tries, num_retries)
    assert err.args[1:3] == (server.address, server.port)
    assert isinstance(err.args[3], ssh2_exc.AuthenticationError)
    assert err.args[-2:] == (3, 3)
    log = server.wait_for_log(lambda text: text.count("Connection from") > before)
    assert log.count("Connection from") == before + 1
    with pytest.raises(exc.PKeyFileError):
        SSHClient(server.address, port=server.port, pkey=str(tmp_path / "missing"),
                  known_hosts=known_hosts, timeout=5)


def test_host_key_policies(group, tmp_path):
    server = group.servers[0]
    path = tmp_path / "kh"
    common = dict(port=server.port, pkey=group.keys.private(), allow_agent=False,
                  identity_auth=False, timeout=5, known_hosts=str(path))
    with pytest.raises(exc.UnknownHostKeyError) as info:
        SSHClient(server.address, host_key_policy="strict", **common)
    assert "SHA256:" in str(info.value)
    assert not path.exists()
    SSHClient(server.address, **common).close()          # accept-new adds it
    SSHClient(server.address, host_key_policy="strict", **common).close()

    # Another key of the negotiated type for the same host: refused before authentication.
    name, key_type, _ = path.read_text().split()
    keygen_type = {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(key_type, "ecdsa")
    subprocess.run(["ssh-keygen", "-q", "-t", keygen_type, "-N", "", "-f", str(tmp_path / "o")],
                   check=True)
    other_type, other_key = (tmp_path / "o.pub").read_text().split()[:2]
    path.write_text(f"{name} {other_type} {other_key}\n")
    accepted_before = server.read_log(None).count("Accepted")
    with pytest.raises(exc.HostKeyMismatchError) as info:
        SSHClient(server.address, **common)
    assert server.address in str(info.value) and "SHA256:" in str(info.value)
    assert "does NOT match" in str(info.value)
    assert server.read_log(None).count("Accepted") == accepted_before
    assert path.read_text() == f"{name} {other_type} {other_key}\n"   # never overwritten


def test_host_config_false_and_zero_override(group, known_hosts):
    configs = [HostConfig(keepalive_seconds=0, allow_agent=False), HostConfig()]
    client = client_for(group, known_hosts, hosts=group.hosts[:2], host_config=configs,
                        keepalive_seconds=30)
    gevent.joinall(client.connect_auth(), raise_error=True)
    assert client.host_client(0).keepalive_seconds == 0
    assert client.host_client(1).keepalive_seconds == 30
    with pytest.raises(exc.HostConfigError):
        client_for(group, known_hosts, hosts=group.hosts[:2], host_config=[HostConfig()])


def test_single_client(group, known_hosts):
    server = group.servers[1]
    client = SSHClient(server.address, port=server.port, pkey=group.keys.private(),
                       known_hosts=known_hosts, allow_agent=False, identity_auth=False)
    out = client.run_command("echo single; exit 2")
    client.wait_finished(out)
    assert out.exit_code == 2
    assert list(out.stdout) == ["single"]
    assert "exit_code=2" in repr(out)
    with pytest.warns(DeprecationWarning):
        client.disconnect()  # parallel-ssh 2.x: does nothing
    assert list(client.run_command("echo still").stdout) == ["still"]
    client.close()
    client.close()
    with pytest.raises(exc.SessionError):
        client.run_command("echo after")


def test_many_hosts_in_one_run(tmp_path):
    # More hosts than the default pool_size (100) works on at once: the rest wait their turn.
    with ServerGroup(addresses=addresses(130)) as many:
        client = ParallelSSHClient(many.hosts, port=many.port, pkey=many.keys.private(),
                                   known_hosts=str(tmp_path / "kh"), allow_agent=False,
                                   identity_auth=False, timeout=30)
        output = client.run_command("echo $SSH_CONNECTION")
        client.join(output)
        assert all(o.exit_code == 0 for o in output)
        assert sorted(list(o.stdout)[0].split()[2] for o in output) == sorted(many.hosts)


def test_reading_stdout_then_join_never_waits_on_queued_packets(group, known_hosts):
    """Reading one stream can pull the other's packets (and EOF) into libssh2's
    queue; the client must not then wait on a socket that stays silent. The
    race is timing-dependent (it hung the fan-out benchmark with 200 sshd
    running): this repeats the benchmark's read-then-join pattern as a guard."""
    client = client_for(group, known_hosts)
    for _ in range(15):
        output = client.run_command("echo hello; echo err >&2")
        for host_output in output:
            assert list(host_output.stdout) == ["hello"]
            client.join([host_output], timeout=10)
            assert host_output.exit_code == 0
        for host_output in output:
            assert list(host_output.stderr) == ["err"]


def test_keepalives_run_and_do_not_keep_a_dropped_client_alive(group, known_hosts):
    import gc
    import weakref

    import gevent

    client = SSHClient(group.hosts[0], port=group.port, pkey=group.keys.private(),
                       known_hosts=known_hosts, allow_agent=False, identity_auth=False,
                       keepalive_seconds=1, timeout=10)
    # Nothing but the keepalive loop reads from this connection now: after a first round
    # with nothing from the server it probes it (a channel opened and closed), and the
    # answers are the first bytes to come since. Seen, the loop has run two rounds.
    received = client.session.bytes_received
    eventually(lambda session=client.session: session.bytes_received > received,
               what="the keepalives' probe answered", pause=gevent.sleep)
    assert not client._keepalive_greenlet.dead
    assert list(client.run_command("echo alive").stdout) == ["alive"]
    ref = weakref.ref(client)
    del client
    gc.collect()
    # The keepalive greenlet wakes, finds no client and ends: nothing holds the client.
    eventually(lambda: gc.collect() is not None and ref() is None, what="the client freed",
               pause=gevent.sleep)


def test_shells_on_every_host(group, known_hosts):
    client = client_for(group, known_hosts, hosts=group.hosts[:3])
    shells = client.open_shell()
    client.run_shell_commands(shells, "cd /tmp && X='it''s'")
    client.run_shell_commands(shells, ['echo "$X in $(pwd)"', "echo oops >&2", "false"])
    client.join_shells(shells, timeout=10)
    for shell in shells:
        assert list(shell.stdout) == ["its in /tmp"]
        assert list(shell.stderr) == ["oops"]
        assert shell.exit_code == 1  # the last command's status
    with client.host_client(0).open_shell() as shell:
        shell.run(["echo first", "exit 3", "echo never"])
    assert list(shell.stdout) == ["first"]
    assert shell.exit_code == 3
    with pytest.raises(exc.ShellError):
        shell.run("echo closed")
