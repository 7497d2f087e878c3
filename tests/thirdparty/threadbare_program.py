"""threadbare (a Fabric replacement on parallel-ssh's SSHClient: run_command with and
without a pty, copy_file / copy_remote_file / scp_send / scp_recv, one client per
process under multiprocessing), used as its documentation shows, against a real sshd.

Run: python threadbare_program.py SPEC.json (see observe.load_spec); prints what it saw.
"""
import io
import os

import threadbare  # noqa: F401  (monkey-patches with gevent first, as its users get it)
from observe import Observations, load_spec
from threadbare import execute, state
from threadbare.operations import (download, remote, remote_file_exists, single_command,
                                   upload)
from threadbare.state import settings

spec = load_spec()
WORK = spec["workdir"]
seen = Observations({WORK: "WORK", str(spec["closed_port"]): "CLOSED_PORT"})


def outcome(res):
    return {k: res[k] for k in ("stdout", "stderr", "return_code", "succeeded", "failed")}


login = dict(user=spec["user"], host_string=spec["hosts"][0], port=spec["port"],
             key_filename=spec["key"], quiet=True)
with settings(**login):
    both_streams = 'echo "standard out"; >&2 echo "standard error"'
    seen.stage("combined", lambda: outcome(remote(both_streams)))
    seen.stage("separate", lambda: outcome(remote(both_streams, combine_stderr=False)))
    seen.stage("exit_status", lambda: outcome(remote("exit 123", warn_only=True)))
    seen.stage("exit_status_aborts", lambda: outcome(remote("exit 7")))
    os.makedirs(os.path.join(WORK, "rdir"))
    seen.stage("remote_working_dir",
               lambda: outcome(remote("pwd", remote_working_dir=os.path.join(WORK, "rdir"))))
    seen.stage("no_shell", lambda: outcome(remote('foo=bar; echo "bar? $foo!"', use_shell=False)))
    seen.stage("single_command", lambda: outcome(remote(single_command(["echo a", "echo b"]))))
    seen.stage("file_exists", lambda: [remote_file_exists(WORK),
                                       remote_file_exists(WORK + "/nope")])
    seen.stage("undecodable_output", lambda: outcome(remote("printf 'caf\\xc3\\xa9 \\xff end\\n'")))
    seen.stage("pty_output_lines", lambda: len(remote("seq 1 20000")["stdout"]))
    seen.stage("output_lines", lambda: len(remote("seq 1 20000", combine_stderr=False)["stdout"]))

    for protocol in ("sftp", "scp"):
        local = os.path.join(WORK, f"{protocol}-up.txt")
        with open(local, "w") as fh:
            fh.write("foo")
        os.chmod(local, 0o640)
        target = os.path.join(WORK, f"remote-{protocol}.txt")

        def read(path):
            with open(path) as fh:
                return fh.read()

        def upload_file(local=local, target=target, protocol=protocol):
            upload(local, target, transfer_protocol=protocol)
            return read(target)

        def download_file(target=target, protocol=protocol):
            remote(f'printf "bar" >> {target}')
            path = os.path.join(WORK, f"{protocol}-down.txt")
            download(target, path, transfer_protocol=protocol)
            return read(path)

        def buffers(target=target, protocol=protocol):
            upload(io.BytesIO(b"from bytes"), target + ".b", transfer_protocol=protocol)
            buffer = io.BytesIO()
            download(target + ".b", buffer, transfer_protocol=protocol)
            return buffer.getvalue().decode()

        seen.stage(f"{protocol}/upload", upload_file)
        seen.stage(f"{protocol}/uploaded_mode", lambda target=target: oct(os.stat(target).st_mode))
        seen.stage(f"{protocol}/download", download_file)
        seen.stage(f"{protocol}/buffers", buffers)
        seen.stage(f"{protocol}/download_missing",
                   lambda protocol=protocol: download(WORK + "/missing", WORK + "/x",
                                                      transfer_protocol=protocol))
        seen.stage(f"{protocol}/upload_to_new_dir",
                   lambda local=local, protocol=protocol: read(upload(
                       local, f"{WORK}/new/{protocol}/dir/x", transfer_protocol=protocol)
                       or f"{WORK}/new/{protocol}/dir/x"))

    @execute.parallel
    def exists_in_a_child_process():
        with state.settings() as env:
            return remote_file_exists(env["remote_file"])

    seen.stage("parallel", lambda: execute.execute(
        exists_in_a_child_process, param_key="remote_file",
        param_values=[WORK, "/foo/bar", WORK + "/rdir"]))

    @execute.parallel
    def address_seen_by_each_host():
        return remote("echo $SSH_CONNECTION | cut -d' ' -f3")["stdout"]

    seen.stage("execute_with_hosts", lambda: execute.execute_with_hosts(
        address_seen_by_each_host, hosts=spec["hosts"]))
    seen.stage("after_parallel", lambda: outcome(remote("echo back in the parent")))
    seen.stage("timeout", lambda: outcome(remote("sleep 5; echo late", timeout=1)))

with settings(**dict(login, key_filename=spec["unauthorized_key"])):
    seen.stage("bad_key", lambda: outcome(remote("echo never")))
with settings(**dict(login, host_string="127.0.0.1", port=spec["closed_port"])):
    seen.stage("refused", lambda: outcome(remote("echo never")))
seen.dump()
