"""Host names from a handed-over hosts file never become paths outside the chosen directory,
and two hosts never share a file: ``pssh run -o/-e/--output-dir`` and ``pssh fetch``."""
from __future__ import annotations

import pytest

from pssh.cli.hosts import file_name
from pssh.sshd import ClientKeys, OpenSSHServer
from loopback import address
from test_cli import pssh

ADDRESS = address()  # both servers listen there, on two ports


@pytest.fixture(scope="module")
def two_ports(tmp_path_factory):
    """Two sshd on one address, two ports: two hosts."""
    keys = ClientKeys.generate(tmp_path_factory.mktemp("names-keys"))
    with OpenSSHServer(ADDRESS, keys=keys) as first, OpenSSHServer(ADDRESS, keys=keys) as second:
        yield first, second


def conn(server, tmp_path):
    return ["-k", server.keys.private(), "--no-agent", "-F", "none", "--known-hosts",
            str(tmp_path / "known_hosts"), "--progress", "never", "--connect-timeout", "5"]


@pytest.mark.parametrize("label, name", [
    ("web1", "web1"), ("h:2222", "h:2222"), ("../../x", "..%2F..%2Fx"), ("/abs/x", "%2Fabs%2Fx"),
    ("..", "%2E%2E"), (".", "%2E"), ("a%2Fb", "a%252Fb"), ("a/b", "a%2Fb"),
])
def test_a_host_label_is_one_distinct_path_component(label, name):
    assert file_name(label) == name
    assert "/" not in file_name(label) and file_name(label) not in (".", "..")


def test_names_from_a_hosts_file_stay_in_the_output_dir(two_ports, tmp_path):
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text(f"../../escaped\n{tmp_path}/absolute\n")
    out = tmp_path / "a" / "b" / "runs"
    result = pssh("run", "-h", str(hosts_file), "--output-dir", str(out), "-o", str(out / "o"),
                  *conn(two_ports[0], tmp_path), "--", "true")
    assert result.returncode == 1      # neither name resolves
    outside = [p for p in tmp_path.rglob("*") if out not in p.parents and p != out
               and p.name not in ("hosts", "known_hosts") and p not in out.parents]
    assert outside == []
    assert sorted(p.name for p in out.glob("*.status")) == sorted(
        [f"{file_name('../../escaped')}.status", f"{file_name(f'{tmp_path}/absolute')}.status"])


def test_two_ports_of_one_address_are_two_hosts_with_two_files(two_ports, tmp_path):
    first, second = two_ports
    out = tmp_path / "runs"
    hosts = f"{ADDRESS}:{first.port} {ADDRESS}:{second.port}"
    result = pssh("run", "-H", hosts, "--output-dir", str(out), *conn(first, tmp_path), "--",
                  "echo $SSH_CONNECTION | cut -d' ' -f4")
    assert result.returncode == 0, result.stderr
    for server in two_ports:
        label = f"{ADDRESS}:{server.port}"
        assert (out / f"{label}.stdout").read_text() == f"{server.port}\n"
        assert (out / f"{label}.status").read_text() == "exit 0\n"
    # The stream names each by its port too.
    streamed = pssh("run", "-H", hosts, *conn(first, tmp_path), "--", "true")
    assert streamed.returncode == 0


def test_fetch_puts_each_host_in_its_own_directory(two_ports, tmp_path):
    first, second = two_ports
    source = tmp_path / "source.txt"
    source.write_text("data\n")
    local = tmp_path / "fetched"
    hosts = f"{ADDRESS}:{first.port} {ADDRESS}:{second.port}"
    result = pssh("fetch", "-H", hosts, *conn(first, tmp_path), str(source), str(local))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in local.iterdir()) == sorted(
        f"{ADDRESS}:{s.port}" for s in two_ports)


def test_a_hosts_file_that_includes_itself_is_a_usage_error(tmp_path):
    hosts_file = tmp_path / "loop"
    hosts_file.write_text(f"web1\n^{hosts_file}\n")
    result = pssh("run", "-h", str(hosts_file), "--", "true")
    assert result.returncode == 2
    assert "includes itself" in result.stderr and "Traceback" not in result.stderr
