"""Keepalives and ServerAliveCountMax: a server that stops answering is declared lost."""
import time
from contextlib import closing

import gevent
import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from loopback import addresses
from waiting import eventually
from pssh.sshd import ServerGroup
from processes import stopped
from pssh.ssh_config import SSHConfig


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g



def options(group, tmp_path, **kwargs):
    return dict(port=group.port, pkey=group.keys.private(), known_hosts=str(tmp_path / "kh"),
                allow_agent=False, identity_auth=False, timeout=10, **kwargs)


def test_a_silent_server_is_declared_lost_and_waits_fail(group, tmp_path):
    client = SSHClient(group.hosts[0], keepalive_seconds=1, keepalive_count_max=2,
                       **options(group, tmp_path))
    output = client.run_command("sleep 60")
    with stopped(group.servers[0]):
        started = time.monotonic()
        with pytest.raises(exc.ConnectionError) as info:
            client.wait_finished(output, timeout=30)
        took = time.monotonic() - started
    assert "server not responding" in str(info.value) and group.hosts[0] in str(info.value)
    assert took < 30  # the keepalive ended the wait, not the wait's own timeout
    # Dropped (by the keepalive greenlet): a new run connects afresh.
    eventually(lambda: client.session is None, what="the lost session dropped",
               pause=gevent.sleep)


def test_only_the_silent_host_fails(group, tmp_path):
    with closing(ParallelSSHClient(group.hosts, keepalive_seconds=1, keepalive_count_max=2,
                                   **options(group, tmp_path))) as client:
        gevent.joinall(client.connect_auth(), raise_error=True)
        with stopped(group.servers[1]):
            output = client.run_command("sleep 4; echo done", stop_on_errors=False)
            client.join(output, timeout=30)
        assert list(output[0].stdout) == ["done"] and output[0].exit_code == 0
        assert isinstance(output[1].exception, exc.ConnectionError)


def test_server_alive_settings_from_ssh_config(group, tmp_path):
    config = tmp_path / "config"
    config.write_text("Host *\n  ServerAliveInterval 7\n  ServerAliveCountMax 5\n")
    client = SSHClient(group.hosts[0], ssh_config=SSHConfig.from_file(str(config)),
                       **options(group, tmp_path))
    assert (client.keepalive_seconds, client.keepalive_count_max) == (7, 5)
    client = SSHClient(group.hosts[0], ssh_config=str(config), keepalive_count_max=0,
                       **options(group, tmp_path))
    assert client.keepalive_count_max == 0  # explicit arguments win; 0 never gives up
