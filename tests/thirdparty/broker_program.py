"""broker's hosts over its ``ssh2-python`` session backend (commands, SFTP, SCP, a shell
with and without a pty, host-to-host copies), used as broker's documentation shows,
against a real sshd.

Run: python broker_program.py SPEC.json (see observe.load_spec); prints what it saw.
"""
import os
import time

from observe import Observations, load_spec

spec = load_spec()
WORK = spec["workdir"]
seen = Observations({WORK: "WORK"})

# broker reads its settings from $BROKER_DIRECTORY (and would fetch an example file from
# the network if there were none): a minimal file choosing the ssh2-python backend.
settings_dir = os.path.join(WORK, "broker")
os.makedirs(settings_dir)
with open(os.path.join(settings_dir, "broker_settings.yaml"), "w") as fh:
    fh.write("_version: 0.8.11\nSSH:\n  BACKEND: ssh2-python\n")
os.environ["BROKER_DIRECTORY"] = settings_dir

from broker.hosts import Host  # noqa: E402  (reads BROKER_DIRECTORY at import)

USER, PORT = spec["user"], spec["port"]


def host(index=0, **auth):
    auth = auth or {"key_filename": spec["key"]}
    return Host(hostname=spec["hosts"][index], port=PORT, username=USER, **auth)


def result(res):
    return [res.status, res.stdout, res.stderr]


first, second = host(0), host(1)
seen.stage("backend", lambda: type(first.session).__module__)
seen.stage("execute", lambda: result(first.execute("echo out; echo err >&2; exit 4")))
seen.stage("execute_large", lambda: len(first.execute("seq 1 50000").stdout))

local_file = os.path.join(WORK, "data.txt")
with open(local_file, "w") as fh:
    fh.write("line\n" * 20000)
remote_file = os.path.join(WORK, "remote", "sub", "data.txt")


def read(path):
    with open(path) as fh:
        return fh.read()


def sftp_write():
    first.session.sftp_write(local_file, remote_file)
    return [read(remote_file) == read(local_file), oct(os.stat(remote_file).st_mode)]


def sftp_read():
    back = os.path.join(WORK, "back", "data.txt")
    first.session.sftp_read(remote_file, back)
    return read(back) == read(local_file)


def scp_write():
    first.session.scp_write(local_file, remote_file + ".scp")
    # broker leaves the SCP channel to the garbage collector: wait for the whole file.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.exists(remote_file + ".scp") and read(remote_file + ".scp") == read(local_file):
            return True
        time.sleep(0.1)
    return False


def remote_copy():
    first.session.remote_copy(remote_file, second, remote_file + ".copy")
    return read(remote_file + ".copy") == read(local_file)


seen.stage("sftp_write", sftp_write)
seen.stage("sftp_read", sftp_read)
seen.stage("sftp_read_data", lambda: len(first.session.sftp_read(remote_file, return_data=True)))
seen.stage("sftp_read_missing",
           lambda: first.session.sftp_read(remote_file + ".missing", return_data=True))
seen.stage("scp_write", scp_write)
seen.stage("remote_copy", remote_copy)


def shell(pty):
    with first.session.shell(pty=pty) as sh:
        sh.send("echo from the shell")
        sh.send("exit 3")
        time.sleep(0.5)
    return [sh.result.status, [line.strip() for line in sh.result.stdout.splitlines()
                               if "from the shell" in line and "echo" not in line]]


seen.stage("shell_pty", lambda: shell(True))
seen.stage("shell", lambda: shell(False))

log_file = os.path.join(WORK, "log.txt")
with open(log_file, "w") as fh:
    fh.write("old\n")


def tail():
    with first.session.tail_file(log_file) as tailer:
        with open(log_file, "a") as fh:
            fh.write("new 1\nnew 2\n")
    return tailer.contents


seen.stage("tail_file", tail)
seen.stage("execute_timeout", lambda: result(first.execute("sleep 5; echo late", timeout=1)))
seen.stage("execute_after_timeout", lambda: result(first.execute("echo again")))
first.close()
second.close()

seen.stage("password", lambda: result(host(password=spec["password"]).execute("echo pw")))
seen.stage("bad_password", lambda: host(password="not the password").execute("true"))
seen.stage("bad_key", lambda: host(key_filename=spec["unauthorized_key"]).execute("true"))
seen.dump()
