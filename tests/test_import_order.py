"""Any module of the bindings may be imported first, and in any order.

Programs often start with ``from ssh2.sftp import LIBSSH2_FXF_READ`` or
``from ssh2.channel import Channel`` (type hints) rather than with
``ssh2.session``. The bindings' module graph must be a tree: a module imports
only the modules its objects belong to (a channel its session), never its
children, which the session makes through constructors they register.
"""
import os
import subprocess
import sys
import textwrap

import pytest

import ssh2

PUBLIC = sorted(
    name[:-4] if name.endswith(".pyi") else name[:-3]
    for name in os.listdir(os.path.dirname(ssh2.__file__))
    if name.endswith((".pyi", ".py")) and not name.startswith("_"))


def run_python(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter that imports the same ssh2 as the tests."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(ssh2.__file__)), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd="/")


def test_the_public_modules_are_known():
    assert {"session", "channel", "sftp", "sftp_handle", "sftp_attributes", "listener",
            "publickey", "agent", "pkey", "knownhost", "fileinfo", "utils",
            "exceptions", "error_codes"} <= set(PUBLIC)


@pytest.mark.parametrize("first", PUBLIC)
def test_each_module_imports_first_in_a_fresh_interpreter(first):
    result = run_python(f"import ssh2.{first}")
    assert result.returncode == 0, result.stderr


def test_every_pair_imports_in_both_orders():
    # One fresh interpreter that never imports ssh2 itself forks a child per ordered
    # pair: each child starts with no ssh2 module loaded, as a new program would.
    probe = textwrap.dedent(f"""
        import importlib, os, sys
        modules = {PUBLIC!r}
        failures = []
        for a in modules:
            for b in modules:
                if a == b:
                    continue
                pid = os.fork()
                if pid == 0:
                    try:
                        importlib.import_module("ssh2." + a)
                        importlib.import_module("ssh2." + b)
                    except BaseException as err:
                        sys.stderr.write(f"{{a}} then {{b}}: {{err!r}}\\n")
                        os._exit(1)
                    os._exit(0)
                _, status = os.waitpid(pid, 0)
                if status:
                    failures.append((a, b))
        print(len(failures), "failed of", len(modules) * (len(modules) - 1))
        sys.exit(1 if failures else 0)
    """)
    result = run_python(probe)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_session_imports_none_of_its_children():
    result = run_python(
        "import sys, ssh2.session\n"
        "print(sorted(m for m in sys.modules if m.startswith('ssh2.')))")
    assert result.returncode == 0, result.stderr
    loaded = set(eval(result.stdout))
    assert not loaded & {"ssh2.channel", "ssh2.sftp", "ssh2.sftp_handle", "ssh2.listener",
                         "ssh2.publickey", "ssh2.agent", "ssh2.knownhost"}


def test_a_program_importing_only_the_session_gets_every_child(server, tmp_path):
    # Channels, SFTP, file handles, known hosts and agents come out of a session whose
    # program never imported their modules: the session loads them on first use.
    target = tmp_path / "hello.txt"
    target.write_text("hi\n")
    code = textwrap.dedent(f"""
        import socket, sys
        from ssh2.session import Session
        sock = socket.create_connection(({server.address!r}, {server.port}), timeout=10)
        session = Session()
        session.handshake(sock)
        session.userauth_publickey_fromfile({server.user!r}, {server.keys.private()!r})
        channel = session.open_session()
        channel.execute("echo out")
        size, data = channel.read()
        channel.close()
        sftp = session.sftp_init()
        with sftp.open({str(target)!r}, 1, 0) as handle:
            read = b"".join(chunk for _, chunk in handle)
        attrs = sftp.stat({str(target)!r})
        hosts = session.knownhost_init()
        agent = session.agent_init()
        print(data, read, attrs.filesize, type(channel).__module__, type(handle).__module__,
              type(hosts).__module__, type(agent).__module__)
    """)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["b'out\\n'", "b'hi\\n'", "3", "ssh2.channel",
                                     "ssh2.sftp_handle", "ssh2.knownhost", "ssh2.agent"]


def test_ssh2_python_names_stay_where_they_were():
    result = run_python(
        "from ssh2.sftp_handle import SFTPAttributes, SFTPStatVFS, SFTPHandle\n"
        "from ssh2.pkey import PublicKey\n"
        "from ssh2.agent import Agent\n"
        "a = SFTPAttributes(); a.permissions = 0o644; print(oct(a.permissions))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0o644"


def _pssh_modules():
    import pssh
    root = os.path.dirname(pssh.__file__)
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py") and name != "__main__.py":
                rel = os.path.relpath(os.path.join(folder, name), root)[:-3]
                found.append(("pssh." + rel.replace(os.sep, ".")).removesuffix(".__init__"))
    return sorted(found)


@pytest.mark.parametrize("module", _pssh_modules())
def test_every_pssh_module_imports_first_in_a_fresh_interpreter(module):
    # A program's first line may name any module (pssh.poll.sinks, pssh.core.settings, a
    # sharded client's process module): none may lean on another having been imported.
    done = run_python(f"import {module}")   # pssh sits beside ssh2 on that path
    assert done.returncode == 0, done.stderr
