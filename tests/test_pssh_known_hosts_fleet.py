"""known_hosts of fleet size: 100,000 lines and 60 real hosts in one run, right decisions."""
import base64

import pytest

from benchmarks.known_hosts_files import KEY_TYPES, filler, line, random_key
from pssh import exceptions as exc
from pssh.clients import ParallelSSHClient
from loopback import addresses
from pssh.sshd import ServerGroup


@pytest.fixture(scope="module")
def fleet():
    with ServerGroup(addresses=addresses(60)) as group:
        yield group


def real_keys(group):
    """The group's host keys (every server shares them), one blob per type."""
    return [base64.b64decode(group.servers[0].public_host_key(t).split()[1])
            for t in ("ed25519", "ecdsa", "rsa")]


def test_decisions_with_100000_lines(fleet, tmp_path):
    keys = real_keys(fleet)
    names = [f"[{h}]:{fleet.port}" for h in fleet.hosts]
    path = tmp_path / "known_hosts"
    with open(path, "w") as fh:
        fh.writelines(filler(50_000, hashed=False))
        fh.writelines(filler(50_000, hashed=True))
        for i, name in enumerate(names):
            if i < 24:      # known, plain
                fh.writelines(line(name, key) for key in keys)
            elif i < 45:    # known, hashed
                fh.writelines(line(name, key, hashed=True) for key in keys)
            elif i < 52:    # changed: another key of every type, plain or hashed
                fh.writelines(line(name, random_key(t), hashed=i % 2 == 0) for t in KEY_TYPES)
            # 52..59: unknown
    client = ParallelSSHClient(fleet.hosts, port=fleet.port, pkey=fleet.keys.private(),
                               allow_agent=False, identity_auth=False, known_hosts=str(path),
                               host_key_policy="strict", timeout=60, num_retries=1,
                               pool_size=60)
    try:
        output = client.run_command("echo ok", stop_on_errors=False)
        for i, host_out in enumerate(output):
            if i < 45:
                assert host_out.exception is None, (i, host_out.exception)
                assert list(host_out.stdout) == ["ok"]
            elif i < 52:
                assert isinstance(host_out.exception, exc.HostKeyMismatchError), i
            else:
                assert isinstance(host_out.exception, exc.UnknownHostKeyError), i
    finally:
        client.close()  # its 45 sessions end with the test, not when it is collected
