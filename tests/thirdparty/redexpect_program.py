"""RedExpect / RedSSH (built on ssh2-python: a pty and a shell driven non-blocking, with a
keepalive thread, SFTP, SCP, tunnels and known_hosts), used as their documentation shows,
against a real sshd.

Run: python redexpect_program.py SPEC.json (see observe.load_spec); prints what it saw.
"""
import os
import socket
import threading
import time

import redexpect
import redssh
from observe import Observations, load_spec
from redssh import enums

spec = load_spec()
WORK = spec["workdir"]
seen = Observations({WORK: "WORK"})
HOST, PORT, USER, KEY = spec["hosts"][0], spec["port"], spec["user"], spec["key"]
# 'dumb': bash then sends no bracketed-paste sequences, which RedExpect's prompt match
# does not strip (the same on both sides).
rx = redexpect.RedExpect(ssh_host_key_verification=enums.SSHHostKeyVerify.none,
                         terminal="dumb", ssh_keepalive_interval=0.5)
seen.stage("login", lambda: rx.login(HOST, PORT, USER, key_filepath=KEY) or rx.prompt_regex)
seen.stage("command", lambda: rx.command("echo out; echo err >&2", remove_newline=True))
seen.stage("command_lines", lambda: rx.command("printf 'a\\nb\\n'", remove_newline=True))
seen.stage("long_output",
           lambda: rx.command("seq 1 3000", remove_newline=True).splitlines()[-1])
seen.stage("execute_command",
           lambda: [(status, out.decode()) for status, out in
                    [rx.execute_command("echo via exec; exit 3")]][0])
seen.stage("eof", rx.eof)
seen.stage("setenv", lambda: rx.setenv("TEST_REDSSH", "set") or
           rx.command("echo ${TEST_REDSSH:-unset}", remove_newline=True))

local_file = os.path.join(WORK, "data.bin")
payload = bytes(range(256)) * 1000
with open(local_file, "wb") as fh:
    fh.write(payload)
os.chmod(local_file, 0o640)
remote_dir = os.path.join(WORK, "remote")


def sftp_calls():
    rx.start_sftp()
    sftp, seen_here = rx.sftp, {}
    sftp.mkdir(remote_dir, 0o755)
    sftp.put_file(local_file, remote_dir + "/data.bin")
    attrs = sftp.stat(remote_dir + "/data.bin")
    seen_here["stat"] = [attrs.filesize, oct(attrs.permissions)]
    handle = sftp.open(remote_dir + "/data.bin", redssh.libssh2.LIBSSH2_FXF_READ, 0)
    seen_here["read_back"] = sftp.read(handle, iter=False) == payload
    sftp.close(handle)
    seen_here["list_dir"] = sorted(entry[1].decode() for entry in
                                   sftp.list_dir(remote_dir, remove_empty=True)
                                   if len(entry) == 3)
    sftp.rename(remote_dir + "/data.bin", remote_dir + "/moved.bin")
    seen_here["after_rename"] = sorted(os.listdir(remote_dir))
    sftp.unlink(remote_dir + "/moved.bin")
    seen_here["after_unlink"] = sorted(os.listdir(remote_dir))
    return seen_here


seen.stage("sftp", sftp_calls)
seen.stage("sftp/stat_missing", lambda: rx.sftp.stat(remote_dir + "/missing"))


def complete(path, deadline=10.0):
    """Whether ``path`` holds the payload within ``deadline`` s: RedSCP.write returns when
    the channel is closed, which is before the server's scp has always written it all
    (on both sides)."""
    stop = time.monotonic() + deadline
    while time.monotonic() < stop:
        if os.path.exists(path):
            with open(path, "rb") as fh:
                if fh.read() == payload:
                    return True
        time.sleep(0.05)
    return False


def scp_calls():
    rx.start_scp()
    rx.scp.write(local_file, remote_dir + "/scp.bin")
    written = complete(remote_dir + "/scp.bin")
    # RedSSH's read gives up when no data came within its 5 ms select (on both sides,
    # under load): a user tries again.
    for _ in range(20):
        back = rx.scp.read(remote_dir + "/scp.bin", iter=False)
        if back:
            break
    return {"written": written, "mode": oct(os.stat(remote_dir + "/scp.bin").st_mode),
            "read_length": len(back), "read_prefix": back[:len(payload)] == payload}


seen.stage("scp", scp_calls)
seen.stage("scp/read_missing", lambda: rx.scp.read(remote_dir + "/missing", iter=False))


def echo_server():
    """A local TCP service for the tunnels to reach: answers 'echo:' + what it got."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)

    def serve():
        while True:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"echo:" + conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def through(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"ping")
        chunks = []
        while True:
            data = conn.recv(100)
            if not data:
                return b"".join(chunks).decode()
            chunks.append(data)


service = echo_server()
seen.stage("local_tunnel", lambda: through(rx.local_tunnel(0, "127.0.0.1", service)))
seen.stage("after_tunnel", lambda: rx.command("echo still here", remove_newline=True))
seen.stage("exit", rx.exit)

# known_hosts through libssh2's knownhost API (RedSSH writes RSA keys only, so this
# server offers an RSA host key alone).
known_hosts = os.path.join(WORK, "known_hosts")
rsa = spec["rsa_server"]
for mode in ("strict", "auto_add", "strict", "warn"):
    rs = redssh.RedSSH(known_hosts=known_hosts,
                       ssh_host_key_verification=getattr(enums.SSHHostKeyVerify, mode))

    def connect_and_run(rs=rs):
        rs.connect(rsa["host"], rsa["port"], USER, key_filepath=KEY)
        status, out = rs.execute_command("echo checked")
        rs.exit()
        return [status, out.decode()]

    seen.stage(f"known_hosts/{mode}/{os.path.exists(known_hosts)}", connect_and_run)
with open(known_hosts) as fh:
    seen.stage("known_hosts/written", lambda: [line.split()[:2] for line in fh])

for name, kwargs in {"password": dict(password=spec["password"]),
                     "bad_password": dict(password="not the password"),
                     "bad_key": dict(key_filepath=spec["unauthorized_key"])}.items():
    rs = redssh.RedSSH(ssh_host_key_verification=enums.SSHHostKeyVerify.none)

    def login(rs=rs, kwargs=kwargs):
        rs.connect(HOST, PORT, USER, **kwargs)
        status, out = rs.execute_command("echo logged in")
        rs.exit()
        return [status, out.decode()]

    seen.stage(name, login)

seen.dump()
