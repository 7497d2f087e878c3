"""Each setting is declared once (pssh.core.settings); everything that lists settings is
made from that declaration or checked against it here, so none can drift."""
import dataclasses
import inspect

import pytest

from pssh.clients import ParallelSSHClient, SSHClient
from pssh.config import HostConfig
from pssh.core.settings import (DEFAULTS, FIELD_NAMES, ConnectOptions, config_layer,
                                declarations)
from pssh.ssh_config import HostOptions, SSHConfig

DECLARED = dict(declarations())
#: What an ssh config entry says that is not a setting but a fact of the connection.
CONFIG_FACTS = {"hostname", "identity_files", "certificate_files", "host_key_alias"}


def parameters(function) -> set:
    return set(inspect.signature(function).parameters)


def test_every_field_is_a_declared_setting():
    assert set(FIELD_NAMES) == set(DECLARED)
    for name, declared in DECLARED.items():
        assert declared.help, name


def test_defaults_come_from_the_declarations():
    for name, declared in DECLARED.items():
        assert getattr(DEFAULTS, name) == declared.default, name


@pytest.mark.parametrize("client", [SSHClient, ParallelSSHClient])
def test_the_clients_take_every_setting_by_name(client):
    taken = parameters(client.__init__)
    wanted = {name for name, d in DECLARED.items()
              if not (d.per_host and client is ParallelSSHClient)}
    assert wanted <= taken, wanted - taken


def test_host_config_has_every_setting_and_its_types():
    fields = parameters(HostConfig.__init__) - {"self"}
    spelled = {"private_key" if name == "pkey" else name for name in DECLARED}
    ignored = {"auth_thread_pool", "gssapi_auth", "gssapi_server_identity",
               "gssapi_client_identity", "gssapi_delegate_credentials"}
    assert fields == spelled | ignored
    # Every setting it holds reaches the options, under the setting's own name.
    values = {"private_key" if name == "pkey" else name:
              (d.types[0](1) if d.types[0] in (int, float) else
               True if d.types[0] is bool else d.types[0]("x") if d.types[0] is str else b"k")
              for name, d in DECLARED.items()}
    values.pop("keyboard_interactive")  # needs a password; checked below
    options = HostConfig(**values).options()
    for name in DECLARED:
        if name != "keyboard_interactive":
            assert getattr(options, name) is not None, name
    with pytest.raises(ValueError):
        HostConfig(port="22")


def test_the_ssh_config_mapping_covers_what_the_config_reads():
    mapped = {d.ssh_config[0] for d in DECLARED.values() if d.ssh_config}
    read = {f.name for f in dataclasses.fields(HostOptions)}
    assert mapped | CONFIG_FACTS == read
    config = SSHConfig.from_text("Host h\n  User u\n  Port 2022\n  IdentitiesOnly yes\n"
                                 "  ServerAliveInterval 7\n  Compression yes\n"
                                 "  ForwardAgent yes\n  ConnectTimeout 9\n")
    layer = config_layer(config.lookup("h"))
    assert (layer.user, layer.port, layer.allow_agent, layer.keepalive_seconds, layer.compress,
            layer.forward_ssh_agent, layer.connect_timeout) == ("u", 2022, False, 7, True,
                                                                True, 9.0)


def test_the_command_line_flags_are_the_declared_ones():
    from pssh.cli.options import build
    run = build()._subparsers._group_actions[0].choices["run"]
    flags = {flag for action in run._actions for flag in action.option_strings}
    for name, declared in DECLARED.items():
        for flag in declared.cli:
            assert flag in flags, (name, flag)


def test_aio_connect_takes_the_asyncssh_names():
    from pssh import aio
    taken = parameters(aio.connect)
    for name, declared in DECLARED.items():
        if declared.asyncssh is None:
            continue
        assert (declared.asyncssh or name) in taken, name


def test_timeout_stays_parallel_ssh_s_with_named_limits_underneath():
    plain = ConnectOptions(timeout=7).resolve("h", None)
    assert (plain.timeout, plain.connect_timeout) == (7, 7)
    named = ConnectOptions(timeout=7, connect_timeout=3, request_timeout=1).resolve("h", None)
    assert (named.timeout, named.connect_timeout) == (1, 3)
    default = ConnectOptions().resolve("h", None)
    assert (default.timeout, default.connect_timeout) == (None, DEFAULTS.connect_timeout)


def test_no_credential_is_shown_in_a_repr():
    """Options end up in logs and tracebacks: passwords, passphrases and key data never do."""
    from pssh.aio.options import SSHClientConnectionOptions
    from pssh.config import HostConfig
    from pssh.options import ConnectOptions
    secrets = dict(password="pw-1-secret", passphrase="pp-2-secret", proxy_password="jp-3-secret",
                   pkey=b"KEY-4-SECRET", proxy_pkey=b"KEY-5-SECRET")
    options = ConnectOptions(user="deploy", **secrets)
    shown = [repr(options), repr(options.resolve("host", None)),
             repr(HostConfig(user="deploy", password=secrets["password"],
                             private_key=secrets["pkey"], proxy_password="jp-3-secret",
                             proxy_pkey=secrets["proxy_pkey"])),
             repr(SSHClientConnectionOptions(username="deploy", password="pw-1-secret",
                                             passphrase="pp-2-secret",
                                             client_keys=[b"KEY-4-SECRET"]))]
    for text in shown:
        assert "deploy" in text
        assert "SECRET" not in text.upper(), text
