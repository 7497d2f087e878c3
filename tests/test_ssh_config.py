"""OpenSSH client config parsing (ssh_config(5) rules), without servers."""
import os

import pytest

from pssh.ssh_config import SSHConfig, SSHConfigError, parse_jump

CONFIG = """
# global defaults come first only if they are first in the file
User everyone

Host web* !web-admin
    HostName %h.example.org
    Port=2200
    IdentityFile ~/.ssh/web_%r
    StrictHostKeyChecking yes

Host "db1" db2
    HostName 10.0.0.%h
    User dba
    ProxyJump bastion,admin@gw:2222
    IdentitiesOnly yes

Match host 10.0.0.*
    ConnectTimeout 7
    Port 2201

Match exec "true"
    User never

Host *
    IdentityFile "/keys/with space"
    Port 22
    ServerAliveInterval 15
    Compression yes
    UserKnownHostsFile ~/kh_%h
    StrictHostKeyChecking accept-new
"""


@pytest.fixture
def config():
    return SSHConfig.from_text(CONFIG)


def test_host_patterns_first_value_wins_and_tokens(config):
    web = config.lookup("web1")
    assert web.hostname == "web1.example.org"
    assert web.port == 2200  # the later "Host *" Port 22 does not override
    assert web.user == "everyone"
    home = os.path.expanduser("~")
    assert web.identity_files == (f"{home}/.ssh/web_everyone", "/keys/with space")
    assert web.host_key_policy == "strict"
    assert web.known_hosts == f"{home}/kh_web1.example.org"
    assert web.server_alive_interval == 15
    assert web.compression is True


def test_negated_pattern_excludes_host(config):
    admin = config.lookup("web-admin")
    assert admin.hostname is None
    assert admin.port == 22
    assert admin.host_key_policy == "accept-new"


def test_match_host_sees_the_resolved_hostname(config):
    db = config.lookup("db1")
    assert db.hostname == "10.0.0.db1"
    assert db.user == "everyone"  # the global User came first, as in OpenSSH
    assert db.connect_timeout == 7.0
    assert db.port == 2201
    assert db.identities_only is True
    assert parse_jump(db.proxy_jump) == [(None, "bastion", None), ("admin", "gw", 2222)]


def test_unsupported_match_never_applies(config, caplog):
    assert config.lookup("other").user == "everyone"
    assert "Match exec is not supported" in caplog.text


def test_explicit_user_feeds_tokens(config):
    assert config.lookup("web2", user="ops").identity_files[0].endswith("/.ssh/web_ops")


def test_include_globs_relative_paths_and_blocks(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    ssh_dir = tmp_path / ".ssh"
    (ssh_dir / "conf.d").mkdir(parents=True)
    (ssh_dir / "conf.d" / "10-a.conf").write_text("Host a\n  Port 1001\n")
    (ssh_dir / "conf.d" / "20-b.conf").write_text("Port 1002\nHost b\n  Port 1003\n")
    (ssh_dir / "config").write_text("Host b\n  Include conf.d/*.conf\nHost *\n  User x\n")
    config = SSHConfig.from_file()
    assert config.lookup("a").port == 1001
    # "Port 1002" sits under the including "Host b" block
    assert config.lookup("b").port == 1002
    assert config.lookup("c").port is None
    assert config.lookup("c").user == "x"


def test_missing_default_file_is_empty_but_missing_named_file_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert SSHConfig.from_file().lookup("h").hostname is None
    with pytest.raises(SSHConfigError, match="cannot read ssh config"):
        SSHConfig.from_file(str(tmp_path / "nope"))


@pytest.mark.parametrize("text, message", [
    ("Host x\n  Port abc\n", "<config>:2: port 'abc' is not a number"),
    ("Host x\n  Compression maybe\n", "<config>:2: compression must be yes or no"),
    ("Host x\n  StrictHostKeyChecking sometimes\n", "<config>:2: StrictHostKeyChecking"),
    ("Host\n", "<config>:1: Host needs an argument"),
    ('Host x\n  User "unterminated\n', "<config>:2:"),
])
def test_bad_values_name_file_and_line(text, message):
    with pytest.raises(SSHConfigError) as info:
        SSHConfig.from_text(text).lookup("x")
    assert message in str(info.value)


def test_proxy_jump_none_and_jump_syntax():
    config = SSHConfig.from_text("Host x\n  ProxyJump none\nHost *\n  ProxyJump j\n")
    assert config.lookup("x").proxy_jump is None
    assert parse_jump("ssh://u@[::1]:2022") == [("u", "::1", 2022)]
    with pytest.raises(SSHConfigError):
        parse_jump("u@:22")


def test_algorithm_lists_from_the_config_and_arguments(server, tmp_path):
    from pssh.clients import SSHClient
    from ssh2.session import LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC
    config = tmp_path / "config"
    config.write_text(f"Host {server.address}\n  Ciphers ^aes192-ctr\n")
    client = SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                       known_hosts=str(tmp_path / "kh"), ssh_config=str(config))
    assert client.session.methods(LIBSSH2_METHOD_CRYPT_CS) == "aes192-ctr"
    assert client.session.methods(LIBSSH2_METHOD_CRYPT_SC) == "aes192-ctr"
    client.close()
    client = SSHClient(server.address, port=server.port, pkey=server.keys.private(),
                       known_hosts=str(tmp_path / "kh"), ssh_config=str(config),
                       ciphers="aes128-ctr")
    assert client.session.methods(LIBSSH2_METHOD_CRYPT_CS) == "aes128-ctr"
    assert list(client.run_command("echo ok").stdout) == ["ok"]
    client.close()


def test_algorithm_list_syntax():
    from pssh.core.login import algorithm_list
    supported = ["a-gcm", "b-gcm", "c-ctr", "d-cbc"]
    default = ["b-gcm", "a-gcm", "c-ctr"]
    assert algorithm_list("c-ctr,x,a-gcm", supported, default) == ["c-ctr", "a-gcm"]
    assert algorithm_list("+d-cbc", supported, default) == default + ["d-cbc"]
    assert algorithm_list("-*-gcm", supported, default) == ["c-ctr"]
    assert algorithm_list("^c-ctr", supported, default) == ["c-ctr", "b-gcm", "a-gcm"]
