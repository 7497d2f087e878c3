"""netssh2's Session (ssh2-python driven non-blocking with ``wait_socket``, keyword
arguments to ``userauth_publickey_fromfile`` and ``scp_send64``, a pty shell waiting for a
prompt), used as its documentation shows, against a real sshd.

Run: python netssh2_program.py SPEC.json (see observe.load_spec); prints what it saw.
"""
import os
import time

from netssh2.session import Session
from observe import Observations, load_spec

spec = load_spec()
WORK = spec["workdir"]
seen = Observations({WORK: "WORK"})
LOGIN = dict(host=spec["hosts"][0], user=spec["user"], port=spec["port"], timeout=10000,
             verbose=False)

commands = Session(key_file_private=spec["key"], **LOGIN)
seen.stage("run_cmd", lambda: commands.run_cmd("echo out; echo err >&2; exit 3",
                                               return_output=True))
seen.stage("run_cmd_long", lambda: commands.run_cmd("seq 1 3000", return_output=True)[1]
           .splitlines()[-1])
local_file = os.path.join(WORK, "data.txt")
with open(local_file, "w") as fh:
    fh.write("x" * 100000)
os.chmod(local_file, 0o640)


def written_by_scp(path, size, limit=10.0):
    """send_scp closes the channel without waiting for the server's EOF, so it returns while
    the remote scp may still be writing the file. Measured with a 100 kB upload closed at once,
    40 rounds: 1-2 short files with Nagle's algorithm on (as the originals leave the socket),
    5-10 with TCP_NODELAY (ours). What a user of it relies on is that the data arrives: wait,
    within a bound, for scp to finish."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) >= size:
            break
        time.sleep(0.05)


def scp():
    status = commands.send_scp(local_file, local_file + ".copy")
    copy = local_file + ".copy"
    written_by_scp(copy, os.path.getsize(local_file))
    with open(copy) as fh:
        return {"exit_status": status, "copied": fh.read() == "x" * 100000,
                "mode": oct(os.stat(copy).st_mode)}


sent = seen.stage("send_scp", scp)
seen.stage("send_scp/exit_status", lambda: sent.pop("exit_status"))
seen.stage("disconnect", commands.disconnect)


def output_lines(result, marker):
    """The command's own output: the shell's echo of it and its prompts come and go with
    timing (on both sides)."""
    status, output = result
    return [status, [line.strip() for line in output.splitlines()
                     if marker in line and "echo" not in line]]


# header_newline=False: netssh2's default sends a newline before waiting for the prompt, so
# the shell prints two prompts and the read stops at the first; whether the second then ends
# the next command's read (with none of its output) is a race on either side. One prompt
# makes what the program sees the same every time.
shell = Session(key_file_private=spec["key"], invoke_shell=True, prompt="# ",
                header_newline=False, **LOGIN)
seen.stage("shell", lambda: output_lines(shell.run_cmd("echo from the shell",
                                                       return_output=True), "from the shell"))
seen.stage("shell_again", lambda: output_lines(shell.run_cmd("echo again", return_output=True),
                                               "again"))
seen.stage("password", lambda: Session(passwd=spec["password"], **LOGIN)
           .run_cmd("echo by password", return_output=True))
seen.stage("bad_password", lambda: Session(passwd="not the password", **LOGIN))
seen.stage("bad_key", lambda: Session(key_file_private=spec["unauthorized_key"], **LOGIN))
seen.dump()
