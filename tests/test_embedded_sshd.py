"""pssh.sshd's servers as a user starts them: ready when started, restartable, and a server
that cannot start says why in sshd's own words."""
import socket

import pytest

from loopback import address, addresses
from pssh.sshd import OpenSSHServer, ServerGroup, SSHDError


def banner(server) -> bytes:
    with socket.create_connection((server.address, server.port), timeout=10) as sock:
        return sock.recv(64)


def test_a_started_group_answers_on_every_address_at_once():
    with ServerGroup(addresses=addresses(12)) as group:
        # No retry: start() returns once every server listens.
        assert all(banner(server).startswith(b"SSH-2.0-") for server in group)
        pids = {server.process.pid for server in group}
        assert len(pids) == 12
    assert all(server.process is None for server in group)


def test_a_stopped_server_starts_again_on_its_port():
    with OpenSSHServer(address()) as server:
        first = server.process.pid
        server.stop()
        with pytest.raises(OSError):
            banner(server)
        server.start()   # its log already says "Server listening" from the first start
        assert server.process.pid != first
        assert banner(server).startswith(b"SSH-2.0-")


def test_a_server_that_logs_nothing_is_ready_all_the_same():
    # Ready is a socket that listens, not a line in the log (LogLevel QUIET writes none).
    with OpenSSHServer(address(), config=["LogLevel QUIET"]) as server:
        assert banner(server).startswith(b"SSH-2.0-")
        assert server.read_log() == ""


def test_a_configuration_sshd_rejects_is_named():
    server = OpenSSHServer(address(), config=["NoSuchKeyword yes"])
    with pytest.raises(SSHDError, match=r"exited with 255: .*NoSuchKeyword"):
        server.start()
    server.close()


def test_a_port_already_taken_is_named_and_the_group_stops_what_it_started():
    taken = socket.socket()
    hosts = addresses(3)
    taken.bind((hosts[2], 0))
    taken.listen()
    group = ServerGroup(addresses=hosts, port=taken.getsockname()[1])
    try:
        taken_message = rf"{hosts[2]}.*exited with 255: .*[Aa]ddress already in use"
        with pytest.raises(SSHDError, match=taken_message):
            group.start()
        assert all(server.process is None for server in group)
    finally:
        taken.close()
        group.close()
