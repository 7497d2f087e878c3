"""parallel-ssh 2.16's behaviour where ours used to differ, against real sshd hosts."""
import gc
import logging
import socket
import threading
import time
import warnings
import weakref

import gevent
import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.clients.native.tunnel import LocalForwarder, TunnelServer
from pssh.config import HostConfig
from loopback import address, addresses
from pssh.sshd import ServerGroup
from pssh.utils import enable_host_logger, host_logger
from waiting import eventually
from ssh2 import exceptions as ssh2_exc


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(3)) as g:
        yield g


@pytest.fixture
def parallel(kw):
    """``parallel(hosts, **more)``: a ParallelSSHClient with ``kw``, closed after the test
    whatever it did (else its sshd sessions wait for the collector)."""
    made = []

    def make(hosts, **more):
        made.append(ParallelSSHClient(hosts, **dict(kw, **more)))
        return made[-1]
    yield make
    for client in made:
        client.close()


@pytest.fixture
def kw(group, tmp_path):
    """Settings every client here shares (fast retries, a private known_hosts)."""
    return dict(port=group.port, pkey=group.keys.private(), allow_agent=False,
                identity_auth=False, known_hosts=str(tmp_path / "kh"), retry_delay=0.05,
                timeout=10)


REFUSED = address()  # nobody listens there


def closed_port(address):
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


# -- exceptions -----------------------------------------------------------------------

def test_refused_connection_is_a_connection_refused_error_with_host_and_port(kw):
    kw.update(port=closed_port(REFUSED), num_retries=2)
    with pytest.raises(ConnectionRefusedError) as info:
        SSHClient(REFUSED, **kw)
    err = info.value
    assert isinstance(err, exc.ConnectionError) and isinstance(err, ConnectionError)
    assert err.args[2:] == (REFUSED, kw["port"])  # parallel-ssh's (errno, text, host, port)
    assert str(err) == f"{REFUSED}:{kw['port']}: cannot connect: Connection refused"


def test_failed_logins_carry_parallel_ssh_args(group, kw):
    kw.update(pkey=b"not a key", num_retries=2)
    with pytest.raises(exc.AuthenticationError) as info:
        SSHClient(group.hosts[0], **kw)
    err = info.value
    assert err.args[1:3] == (group.hosts[0], group.port)
    assert err.args[-2:] == (2, 2)  # tries, num_retries
    assert group.hosts[0] in str(err) and "2 of 2" in str(err)


def test_missing_key_file_and_keyboard_interactive_without_password(group, kw):
    with pytest.raises(exc.PKeyFileError):
        ParallelSSHClient(group.hosts, **dict(kw, pkey="/no/such/key"))
    with pytest.raises(exc.InvalidAPIUseError):
        ParallelSSHClient(group.hosts, keyboard_interactive=True)
    with pytest.raises(ValueError):
        HostConfig(port="22")
    with pytest.raises(ValueError):  # a HostConfigError is a ValueError, as parallel-ssh raises
        ParallelSSHClient(group.hosts, host_config=[HostConfig()])


def test_no_ipv6_address(group, kw):
    with pytest.raises(exc.NoIPv6AddressFoundError) as info:
        SSHClient(group.hosts[0], ipv6_only=True, **kw)
    assert info.value.args[1] == group.hosts[0]
    assert info.value.args[2] == [(group.hosts[0], group.port)]


# -- commands and output -------------------------------------------------------------

def test_encoding_encodes_the_command_and_fully_qualified_command(group, kw):
    client = ParallelSSHClient(group.hosts, **kw)
    command = b"echo \xbc %s".decode("latin-1")
    output = client.run_command(command, host_args=("a", "b", "c"), encoding="latin-1",
                                sudo=False, shell="sh -c")
    for host_out, arg in zip(output, "abc"):
        assert list(host_out.stdout) == [f"\xbc {arg}"]
        assert host_out.fully_qualified_command == \
            f"sh -c 'echo \xbc {arg}'".encode("latin-1")
    with pytest.raises(exc.HostArgumentError):
        client.run_command("echo %s", host_args=("only one",))
    with pytest.raises(TypeError):
        client.run_command("echo %s %s", host_args=(("x",),) * 3)


def test_join_without_output_joins_the_last_run(group, parallel):
    client = parallel(group.hosts)
    assert client.cmds is None and client.get_last_output() is None
    client.join()  # nothing ran yet: nothing to do
    assert client.finished()
    output = client.run_command("sleep 0.3; exit 5")
    assert not client.finished()
    client.join()
    assert client.finished() and all(o.exit_code == 5 for o in output)
    assert [o.exit_code for o in client.get_last_output()] == [5, 5, 5]
    assert [g.get().host for g in client.cmds] == group.hosts


def test_join_timeout_carries_finished_and_unfinished_output(group, parallel):
    client = parallel(group.hosts[:2])
    output = client.run_command("sleep %s; echo done", host_args=("0", "1.5"))
    with pytest.raises(exc.Timeout) as info:
        client.join(output, timeout=0.7)
    message, timeout, finished, unfinished = info.value.args
    assert timeout == 0.7 and finished == [output[0]] and unfinished == [output[1]]
    assert group.hosts[1] in str(info.value)
    client.join(unfinished, timeout=5)  # nothing was lost: a later join carries on
    assert [list(o.stdout) for o in output] == [["done"], ["done"]]


def test_read_timeout_bounds_the_whole_iteration(group, kw):
    client = SSHClient(group.hosts[0], **kw)
    # A line every 0.2 s: an idle timer of 0.5 s would never fire.
    out = client.run_command("for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.2; done",
                             read_timeout=0.5)
    lines, started = [], time.monotonic()
    with pytest.raises(exc.Timeout):
        for line in out.stdout:
            lines.append(line)
    assert 0.45 < time.monotonic() - started < 1.5
    assert 1 <= len(lines) < 10
    client.wait_finished(out)
    assert lines + list(out.stdout) == [str(i) for i in range(1, 11)]  # the rest stayed


def test_single_client_semantics(group, kw):
    with SSHClient(group.hosts[0], **kw) as client:
        out = client.run_command("read x; echo got $x; exit 3")
        assert not client.finished(out.channel)
        out.stdin.write("it\n")
        out.stdin.flush()
        with pytest.raises(ValueError):
            client.wait_finished(out.channel)  # a channel is not a HostOutput
        client.wait_finished(out)
        assert client.finished(out.channel) and out.exit_code == 3
        assert list(out.stdout) == ["got it"]
        with pytest.warns(DeprecationWarning):
            channel = client.execute("exit 4")
        assert client.finished(None) is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            client.close_channel(channel)
    assert client.session is None  # the with block closed it


def test_outputs_keep_the_connection_after_the_client_is_gone(group, kw):
    def start():
        client = SSHClient(group.hosts[0], **kw)
        output = client.run_command("sleep 0.2; echo late")
        with pytest.warns(DeprecationWarning):
            client.disconnect()  # parallel-ssh 2.x: no-op
        return output, weakref.ref(client)

    output, client_ref = start()
    gc.collect()
    assert list(output.stdout) == ["late"] and output.exit_code == 0


def test_close_channel_keeps_what_was_read(group, parallel):
    client = parallel(group.hosts[:1])
    output = client.run_command("while true; do echo a line; sleep 0.05; done", use_pty=True,
                                read_timeout=0.3)
    with pytest.raises(exc.Timeout):
        list(output[0].stdout)
    output[0].client.close_channel(output[0].channel)
    client.join(output, timeout=5)
    assert client.finished(output)


def test_hosts_can_be_replaced_and_given_as_iterators(group, parallel):
    client = parallel(iter(group.hosts[:2]))
    assert client.hosts == group.hosts[:2]
    gevent.joinall(client.connect_auth(), raise_error=True)
    kept = client._host_clients[(0, group.hosts[0])]
    client.hosts = (h for h in [group.hosts[0], group.hosts[2]])
    assert list(client._host_clients) == [(0, group.hosts[0])]  # same index, same client
    assert client.host_client(0) is kept
    output = client.run_command("hostname -I 2>/dev/null; echo $SSH_CONNECTION")
    assert [o.host for o in output] == [group.hosts[0], group.hosts[2]]
    with pytest.raises(ValueError):
        client.hosts = None
    with pytest.raises(TypeError):
        client.hosts = "a host"


def test_host_config_overrides_and_aliases(group, parallel):
    configs = [HostConfig(alias="first", keepalive_seconds=0),
               HostConfig(alias="second", private_key="/no/such/key")]
    client = parallel(group.hosts[:2], host_config=configs)
    output = client.run_command("echo hi", stop_on_errors=False)
    assert [o.alias for o in output] == ["first", "second"]
    assert list(output[0].stdout) == ["hi"] and output[0].client.keepalive_seconds == 0
    assert isinstance(output[1].exception, exc.PKeyFileError)
    assert output[1].client is None and list(output[1].stdout) == []


def test_host_logger_sees_consumed_output(group, parallel, caplog):
    enable_host_logger()
    client = parallel(group.hosts[:1])
    with caplog.at_level(logging.INFO, logger=host_logger.name):
        client.run_command("echo logged; echo also >&2")
        client.join(consume_output=True)
    lines = [r.getMessage() for r in caplog.records if r.name == host_logger.name]
    assert f"[{group.hosts[0]}]\tlogged" in lines
    assert f"[{group.hosts[0]}]\t[err]\talso" in lines
    host_logger.setLevel(logging.NOTSET)


def test_shells_and_their_stdin(group, parallel):
    client = parallel(group.hosts[:2])
    shells = client.open_shell()
    client.run_shell_commands(shells, ["echo one", "echo two"])
    assert all(shell.stdin is not None for shell in shells)
    client.join_shells(shells, timeout=10)
    assert [list(s.stdout) for s in shells] == [["one", "two"]] * 2
    with pytest.raises(exc.ShellError):
        client.run_shell_commands(shells, "echo closed")


def test_ssh_namespace_serves_the_native_clients(group, kw):
    from pssh.clients.ssh import ParallelSSHClient as SSHParallel
    client = SSHParallel(group.hosts[:1], gssapi_auth=False, **kw)
    assert list(client.run_command("echo via ssh")[0].stdout) == ["via ssh"]


# -- jump hosts and forwarding ----------------------------------------------------------

def test_targets_behind_one_jump_host_get_their_own_channels(group, parallel):
    # Opens on the shared jump session are serialised: interleaved, libssh2 handed
    # one target's channel to another (each host answered under another's name).
    client = parallel(group.hosts[1:] * 4, proxy_host=group.hosts[0])
    output = client.run_command("echo $SSH_CONNECTION")
    for host_out in output:
        assert list(host_out.stdout)[0].split()[2] == host_out.host


def test_jump_host_failures(group, kw):
    no_jump, no_target = addresses(2)   # nobody listens there
    client = ParallelSSHClient(group.hosts[1:2], proxy_host=no_jump,
                               proxy_port=closed_port(no_jump), **kw)
    output = client.run_command("echo never", stop_on_errors=False)
    assert isinstance(output[0].exception, exc.ProxyError)
    with pytest.raises(ssh2_exc.SocketRecvError) as info:  # as parallel-ssh reports it
        SSHClient(no_target, proxy_host=group.hosts[0], proxy_port=group.port,
                  num_retries=1, **dict(kw, port=closed_port(no_target)))
    assert isinstance(info.value, exc.ProxyTargetError) and no_target in str(info.value)


@pytest.fixture
def forwarded(group, kw):
    """(client, forwarder, local port): a LocalForwarder's server carrying connections to
    the second host's sshd through a client of the first; shut down and closed after."""
    client = SSHClient(group.hosts[0], **kw)
    forwarder = LocalForwarder()
    forwarder.start()
    forwarder.started.wait()
    try:
        forwarder.enqueue(client, group.hosts[1], group.port)
        yield client, forwarder, forwarder.out_q.get(timeout=10)
    finally:
        forwarder.shutdown()
        client.close()


def test_local_forwarder_carries_a_connection(forwarded):
    client, forwarder, port = forwarded
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert sock.recv(100).startswith(b"SSH-2.0-OpenSSH")  # the far sshd's banner
    assert isinstance(forwarder._servers[client], TunnelServer)
    forwarder.shutdown()
    assert forwarder._servers == {} and not forwarder.is_alive()


def test_local_forwarder_stops_the_server_of_a_client_that_closed(forwarded):
    client, forwarder, port = forwarded
    client.close()   # the forwarder hears of it: no sweep to wait for
    eventually(lambda: forwarder._servers == {}, what="the closed client's server gone")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=10).close()


# -- a tunnel that floods ----------------------------------------------------------------

#: Bytes a flood may move before the test gives up on the timer: far more than moves in
#: the loop's few turns before a short timer is due, whatever the machine's speed.
FLOOD_CAP = 1 << 30


@pytest.fixture
def far_end(request):
    """A loopback TCP server in a thread, the far end of a tunnel (as the SSH server sees
    it: this machine): ``"down"`` sends without end to whoever connects, ``"up"`` reads
    and drops without end; either until the connection closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        try:
            peer, _ = listener.accept()
        except OSError:
            return
        chunk = b"x" * 65536
        with peer:
            try:
                while peer.send(chunk) if request.param == "down" else peer.recv(65536):
                    pass
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield request.param, listener.getsockname()[1]
    listener.shutdown(socket.SHUT_RDWR)  # wakes an accept() still waiting
    listener.close()
    thread.join(60)


@pytest.fixture
def tunnel_to(group, kw):
    """``tunnel_to(port)``: a TunnelServer on this thread's hub forwarding to 127.0.0.1:port
    through a client of the first host; both closed after the test."""
    made = []

    def make(port):
        client = SSHClient(group.hosts[0], **kw)
        server = TunnelServer(client, "127.0.0.1", port)
        made.append((client, server))
        server.start()
        return server
    yield make
    for client, server in made:
        server.stop()
        client.close()


#: Bytes moved before the timer is armed: more than the sockets on the way buffer, so the
#: relay is at work by then, whichever way the flood goes.
FLOWING = 16 << 20


def _flood(port: int, direction: str, hub, due: list) -> tuple:
    """In a thread: connect to ``port`` and move bytes as fast as the tunnel takes them.
    Once they flow, arm a timer on the tunnel's ``hub`` (noted in ``due``); stop when it
    fired or after :data:`FLOOD_CAP` bytes. Returns (bytes moved, whether it fired)."""
    fired = threading.Event()
    moved = 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        chunk = b"y" * 65536
        while not fired.is_set() and moved < FLOOD_CAP:
            moved += sock.send(chunk) if direction == "up" else len(sock.recv(65536))
            if moved >= FLOWING and not due:
                due.append(moved)
                hub.loop.run_callback_threadsafe(gevent.spawn_later, 0.05, fired.set)
    return moved, fired.is_set()


@pytest.mark.parametrize("far_end", ["down", "up"], indirect=True)
def test_a_flooding_tunnel_leaves_the_loop_its_turns(far_end, tunnel_to):
    """A tunnel whose far end (down) or local end (up) always has more to send must not
    keep the tunnel's loop to itself: a timer armed on that loop mid-flood fires while
    the flood goes on (the relay gives the loop its turns, pssh.core.link.Link.turn)."""
    direction, port = far_end
    server = tunnel_to(port)
    due: list = []
    hub = gevent.get_hub()
    moved, fired = hub.threadpool.apply(_flood, (server.listen_port, direction, hub, due))
    assert due and fired, f"the timer did not fire while {moved} bytes went {direction}"
    assert server.exception is None
