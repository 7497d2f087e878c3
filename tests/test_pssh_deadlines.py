"""Deadlines that hold against servers that answer a byte at a time (real sshd behind a proxy)."""
import time
from contextlib import closing

import pytest

from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.config import HostConfig
from loopback import address, addresses
from pssh.sshd import ServerGroup
from trickle import TrickleProxy


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


def test_trickling_servers_fail_within_the_connect_timeout(group, tmp_path):
    # Each byte arrives well inside the timeout: a timeout per wait would never fire.
    first, second = addresses(2)
    with TrickleProxy((group.hosts[0], group.port), first, "banner") as banner, \
            TrickleProxy((group.hosts[1], group.port), second, "kex") as kex:
        hosts = group.hosts + [banner.address, kex.address]
        configs = [HostConfig(), HostConfig(), HostConfig(port=banner.port),
                   HostConfig(port=kex.port)]
        client = ParallelSSHClient(hosts, host_config=configs, port=group.port,
                                   pkey=group.keys.private(), known_hosts=str(tmp_path / "kh"),
                                   allow_agent=False, identity_auth=False, timeout=2,
                                   num_retries=1)
        started = time.monotonic()
        output = client.run_command("echo fine", stop_on_errors=False)
        elapsed = time.monotonic() - started
    with closing(client):   # its sessions on the two direct hosts end with the test
        assert [list(o.stdout) for o in output[:2]] == [["fine"], ["fine"]]
        for failed in output[2:]:
            assert isinstance(failed.exception, exc.Timeout), failed.exception
            assert failed.host in str(failed.exception)
    assert elapsed < 10, "a trickling server stretched the deadline"


def test_a_request_is_bounded_as_a_whole(group, tmp_path):
    with TrickleProxy((group.hosts[0], group.port), address(), "later") as proxy:
        client = SSHClient(proxy.address, port=proxy.port, pkey=group.keys.private(),
                           known_hosts=str(tmp_path / "kh"), allow_agent=False,
                           identity_auth=False, timeout=1.5, keepalive_seconds=0)
        assert list(client.run_command("echo before").stdout) == ["before"]
        proxy.slow_down()
        started = time.monotonic()
        with pytest.raises(exc.Timeout) as info:
            client.run_command("echo after")
        assert time.monotonic() - started < 6
        assert proxy.address in str(info.value)
