"""Key file problems name the host they stopped, in every front end (issue 20, point 5).

Each case: a key file that cannot be used (missing, a directory, not a key, encrypted
without its passphrase, with a wrong one) given for two real hosts. Whatever runs them
(a single client, the parallel client in one process or in worker processes, asyncio's
``connect`` or ``run_on_hosts``), each host's error is a PKeyFileError whose message
names that host and port and says what is wrong with the key.
"""
import asyncio

import pytest

from pssh import aio
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient, SSHClient
from pssh.config import HostConfig
from loopback import addresses
from pssh.sshd import PASSPHRASE, ServerGroup

from conftest import trusting


@pytest.fixture(scope="module")
def group():
    with ServerGroup(addresses=addresses(2)) as g:
        yield g


@pytest.fixture
def bad_keys(group, tmp_path):
    """case -> (key file, passphrase, what the message must say)."""
    (tmp_path / "a_directory").mkdir()
    (tmp_path / "garbage").write_text("this is no key\n")
    encrypted = group.keys.private("passphrase")
    return {
        "missing": (str(tmp_path / "no_such_key"), None, "does not exist"),
        "directory": (str(tmp_path / "a_directory"), None, "is a directory"),
        "garbage": (str(tmp_path / "garbage"), None, "is not a private key"),
        "no passphrase": (encrypted, None, "is encrypted: give its passphrase"),
        "wrong passphrase": (encrypted, PASSPHRASE + " not", "wrong passphrase"),
    }


def per_host_single(group, key, passphrase, kh):
    errors = {}
    for host in group.hosts:
        with pytest.raises(exc.PKeyFileError) as info:
            SSHClient(host, port=group.port, pkey=key, passphrase=passphrase, known_hosts=kh,
                      allow_agent=False, identity_auth=False, num_retries=1, timeout=20)
        errors[host] = info.value
    return errors


def per_host_parallel(group, key, passphrase, kh, processes=None):
    # The key per host (host_config): every host's own error, in its own output.
    client = ParallelSSHClient(group.hosts, port=group.port, passphrase=passphrase,
                               host_config=[HostConfig(private_key=key)] * len(group.hosts),
                               known_hosts=kh, allow_agent=False, identity_auth=False,
                               num_retries=1, timeout=20, processes=processes)
    try:
        output = client.run_command("true", stop_on_errors=False)
        return {out.host: out.exception for out in output}
    finally:
        client.close()


def per_host_aio_connect(group, key, passphrase, kh):
    async def one(host):
        async with aio.connect(host, group.port, client_keys=[key], passphrase=passphrase,
                               known_hosts=kh, agent_path=None, connect_timeout=20):
            pass

    async def main():
        results = await asyncio.gather(*(one(h) for h in group.hosts), return_exceptions=True)
        return dict(zip(group.hosts, results))
    return asyncio.run(main())


def per_host_aio_run_on_hosts(group, key, passphrase, kh):
    async def main():
        return {r.host: r.exception async for r in aio.run_on_hosts(
            group.hosts, "true", port=group.port, client_keys=[key], passphrase=passphrase,
            known_hosts=kh, agent_path=None, timeout=20)}
    return asyncio.run(main())


FRONT_ENDS = {
    "SSHClient": per_host_single,
    "ParallelSSHClient": per_host_parallel,
    "ParallelSSHClient(processes=2)": lambda *a: per_host_parallel(*a, processes=2),
    "aio.connect": per_host_aio_connect,
    "aio.run_on_hosts": per_host_aio_run_on_hosts,
}


@pytest.mark.parametrize("case", ["missing", "directory", "garbage", "no passphrase",
                                  "wrong passphrase"])
@pytest.mark.parametrize("front_end", list(FRONT_ENDS))
def test_key_file_error_names_each_host_and_the_cause(group, bad_keys, tmp_path, front_end,
                                                      case):
    key, passphrase, cause = bad_keys[case]
    errors = FRONT_ENDS[front_end](group, key, passphrase, trusting(tmp_path / "kh", group))
    assert set(errors) == set(group.hosts)
    for host, err in errors.items():
        assert isinstance(err, exc.PKeyFileError), (host, err)
        text = str(err)
        assert text.startswith(f"{host}:{group.port}: "), text
        assert key in text and cause in text, text
        assert (err.host, err.port) == (host, group.port)

