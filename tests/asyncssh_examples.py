"""Runs asyncssh's own client example programs against asyncssh and against pssh.aio.

Started by tests/test_aio_examples.py inside private network and mount namespaces
(``unshare --net --mount``), so that the examples run exactly as published:

- they connect to ``localhost`` with the default keys and known_hosts: the user's home
  is a fresh folder (``HOME``, and the home in a private copy of /etc/passwd, where sshd
  looks), whose ``~/.ssh/config`` points ``localhost`` at a test sshd (and holds its key
  and host key);
- they use fixed ports (80, 8080, 8888) and ``www.google.com``: the namespace has only
  its own loopback, where ``/etc/hosts`` (a private copy) puts that name, and a small
  HTTP server answers on port 80; nothing can leave the machine;
- ``redirect_input.py`` writes ``/tmp/stdout``: /tmp is a private tmpfs.

The server's PATH starts with a folder holding ``tail``, which takes BSD's ``-r``
(lines in reverse, what the redirect examples ask for; the examples were written on a
BSD) and is GNU tail otherwise.

Usage: ``python asyncssh_examples.py EXAMPLES_DIR``; prints one JSON object: for each
example and each library, the exit code, output, files written and, for the examples
that listen, what a connection through them got.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from waiting import NeverHappened, eventually

HTTP_RESPONSE = b"HTTP/1.0 200 OK\r\nServer: pssh-examples-test\r\nContent-Length: 0\r\n\r\n"
TAIL_SHIM = """#!/bin/sh
# BSD's tail -r: the lines in reverse order. Everything else is GNU tail.
if [ "$1" = "-r" ]; then shift; exec tac "$@"; fi
exec /usr/bin/tail "$@"
"""
EXAMPLE_FILE = "example.txt holds this line\nand this one\n"

#: Examples that run to their end by themselves.
RUN_TO_END = {
    "callback_client", "callback_client2", "callback_client3", "check_exit_status",
    "direct_client", "gather_results", "math_client", "redirect_input",
    "redirect_local_pipe", "redirect_remote_pipe", "scp_client", "set_environment",
    "set_terminal", "sftp_client", "simple_client", "stream_direct_client"}
#: Examples that listen until stopped: (port to connect to, what to send). Port None: the
#: example prints it ("Listening on port N...").
LISTENING = {
    "listening_client": (8888, b"echo me\n"),
    "stream_listening_client": (8888, b"echo me\n"),
    "local_forwarding_client": (8080, b"HEAD / HTTP/1.0\r\n\r\n"),
    "local_forwarding_client2": (None, b"HEAD / HTTP/1.0\r\n\r\n"),
    "remote_forwarding_client": (8080, b"HEAD / HTTP/1.0\r\n\r\n"),
    "remote_forwarding_client2": (8080, b"HEAD / HTTP/1.0\r\n\r\n"),
}
CLIENT_EXAMPLES = RUN_TO_END | set(LISTENING)
#: How long a listening example may refuse connections before that is taken as its answer.
REFUSED_FOR = 10.0
IMPORT_LINE = re.compile(r"^import (.*\basyncssh\b.*)$", re.MULTILINE)


def ported(source: str) -> str:
    """The example with only its import changed: ``asyncssh`` is ``pssh.aio``."""
    def change(match: re.Match) -> str:
        others = [name.strip() for name in match.group(1).split(",")
                  if name.strip() != "asyncssh"]
        lines = [f"import {', '.join(others)}"] if others else []
        return "\n".join(lines + ["from pssh import aio as asyncssh"])
    changed, count = IMPORT_LINE.subn(change, source)
    assert count == 1, "expected one line importing asyncssh"
    return changed


def sh(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def isolate() -> str:
    """Loopback up; a private /tmp, /etc/hosts and /etc/passwd (whose home for this user
    is a fresh folder); returns that home."""
    sh("ip", "link", "set", "lo", "up")
    private_tmp()
    home = "/tmp/home"
    os.makedirs(home, mode=0o700)
    with open("/tmp/hosts", "w") as fh:
        fh.write("127.0.0.1 localhost www.google.com\n::1 localhost ip6-localhost\n")
    user = pwd.getpwuid(os.getuid()).pw_name
    with open("/etc/passwd") as fh:
        entries = [line.split(":") for line in fh.read().splitlines() if line]
    with open("/tmp/passwd", "w") as fh:
        for fields in entries:
            if fields[0] == user:
                fields[5] = home
            fh.write(":".join(fields) + "\n")
    for name in ("hosts", "passwd"):
        sh("mount", "--bind", f"/tmp/{name}", f"/etc/{name}")
    return home


def private_tmp() -> None:
    """A fresh tmpfs on /tmp, through which what this program runs from stays visible.

    A checkout (its virtualenv, its tests) may itself live under /tmp: a bare tmpfs
    would hide it, and Python would no longer find pssh. The folders of /tmp holding
    what is needed are bound back, from the /tmp this process saw before (still open
    here: /proc/self/fd leads into it after it is covered).
    """
    needed = {os.path.realpath(p) for p in
              (sys.prefix, sys.executable, os.path.dirname(os.path.abspath(__file__)),
               *sys.argv[1:], *(entry for entry in sys.path if entry))}
    for name in ("pssh", "ssh2"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            needed.add(os.path.realpath(os.path.dirname(spec.origin)))
    # The folders right under /tmp holding any of them.
    tops = sorted({os.path.relpath(path, "/tmp").split(os.sep)[0] for path in needed
                   if path.startswith("/tmp/")})
    before = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
    try:
        sh("mount", "-t", "tmpfs", "tmpfs", "/tmp")
        for top in tops:
            target = os.path.join("/tmp", top)
            os.makedirs(target)
            # The syscall itself: mount(8) would resolve the source to the new /tmp.
            _mount(f"/proc/self/fd/{before}/{top}", target)
    finally:
        os.close(before)


def _mount(source: str, target: str) -> None:
    """``mount --bind --rec source target``, the path taken as given."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ms_bind, ms_rec = 4096, 16384
    if libc.mount(source.encode(), target.encode(), None, ms_bind | ms_rec, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"cannot bind {source} on {target}: {os.strerror(errno)}")


def write_ssh_setup(home: Path, server, group) -> None:
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    shutil.copy(server.keys.private(), ssh / "id_ed25519")
    shutil.copy(server.keys.public(), ssh / "id_ed25519.pub")
    (ssh / "config").write_text(f"Host localhost\n    HostName {server.address}\n"
                                f"    Port {server.port}\n")
    host_key = server.public_host_key()
    (ssh / "known_hosts").write_text(
        "".join(f"{name} {host_key}\n" for name in
                (f"[localhost]:{server.port}", f"[{server.address}]:{server.port}")))
    (home / "example.txt").write_text(EXAMPLE_FILE)


class HTTPServer(threading.Thread):
    """Answers every request on 127.0.0.1:80 with a fixed HTTP response, then closes."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(HTTP_RESPONSE)
            await writer.drain()
            writer.close()
        server = await asyncio.start_server(answer, "127.0.0.1", 80)
        self.ready.set()
        async with server:
            await server.serve_forever()


def normalize(text: str) -> str:
    """What differs from run to run whatever the library: ephemeral port numbers."""
    text = re.sub(r"(SSH_(?:CLIENT|CONNECTION)=\S+) \d+", r"\1 PORT", text)
    text = re.sub(r"Listening on port \d+", "Listening on port PORT", text)
    return re.sub(r"(Connection received from [^,]*), port \d+", r"\1, port PORT", text)


def run_example(name: str, source: str, workdir: Path, env: dict) -> dict:
    workdir.mkdir(parents=True)
    script = workdir / f"{name}.py"
    script.write_text(source)
    if os.path.exists("/tmp/stdout"):
        os.unlink("/tmp/stdout")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=workdir, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    result, first = {}, b""
    if name in LISTENING:
        result["through"], first = poke(proc, *LISTENING[name])
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        result["hung"] = True
    fixed_port = LISTENING.get(name, (None,))[0]
    if fixed_port is not None:
        # The next example may ask for the same port (two of them forward 8080 on the
        # server): the listener of this one, which sshd closes once it has seen the
        # client go, must be gone first, or the next one's request is refused and it
        # exits ("nothing listens on port 8080", seen once under load).
        try:
            eventually(lambda: not listening(fixed_port), 30,
                       f"port {fixed_port} free again after {name}")
        except NeverHappened:
            result["port_left_listening"] = fixed_port
    out = first + out
    result.update(returncode=proc.returncode, stdout=normalize(out.decode(errors="replace")),
                  stderr=normalize(err.decode(errors="replace")))
    files = {}
    for path in (Path("/tmp/stdout"), workdir / "example.txt"):
        if path.exists():
            files[str(path).replace(str(workdir), "CWD")] = path.read_text()
    result["files"] = files
    return result


def poke(proc: subprocess.Popen, port, payload: bytes):
    """Connect to the example's port once it listens: ``(what came back (or the error),
    the example's output read meanwhile)``."""
    first = b""
    if port is None:   # the example says which port it chose
        first = proc.stdout.readline()
        match = re.search(r"port (\d+)", first.decode())
        if not match:
            return f"no port announced: {first!r}", first
        port = int(match.group(1))
    try:
        eventually(lambda: listening(port) or proc.poll() is not None, 30,
                   f"the example listening on port {port}")
    except NeverHappened:
        pass
    if not listening(port):
        return f"nothing listens on port {port}", first
    # asyncssh registers a remote listener only after the server's reply has been handled,
    # and refuses a connection arriving before (the connection then gets nothing): while
    # that is all a connection gets, try again for a while. An example that refuses every
    # connection gets nothing in the end.
    answers = []

    def answered() -> bytes:
        answers.append(exchange(port, payload))
        return answers[-1][0]
    try:
        eventually(answered, REFUSED_FOR, f"an answer through port {port}", interval=0.2)
    except NeverHappened:
        pass
    # What the example prints of a connection it prints when the connection comes, before
    # any data goes back: it is in its output already (unbuffered).
    received, error = answers[-1]
    if error and error.startswith("cannot connect"):
        return error, first
    # Nothing through is nothing through, whether sshd closed the refused connection with
    # a FIN or, the request still unread, a reset.
    if error and received:
        return f"{received!r} then {error}", first
    return received.decode(errors="replace"), first


def exchange(port: int, payload: bytes):
    """Send ``payload`` to ``port`` and read until the other side closes: ``(what came
    back, the error that ended it or None)``."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as err:
        return b"", f"cannot connect: {err}"
    received = b""
    with sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while data := sock.recv(65536):
                received += data
        except OSError as err:
            return received, str(err)
    return received, None


def listening(port: int) -> bool:
    """Whether a socket of this namespace listens on ``port`` (asked without connecting)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def main(examples_dir: str) -> None:
    sources = {path.stem: path.read_text() for path in Path(examples_dir).glob("*.py")
               if path.stem in CLIENT_EXAMPLES}
    home = isolate()
    from pssh.sshd import ServerGroup

    shim = Path("/tmp/shim")
    shim.mkdir()
    (shim / "tail").write_text(TAIL_SHIM)
    (shim / "tail").chmod(0o755)
    # One SetEnv line: sshd keeps only the first.
    config = [f"SetEnv PATH={shim}:/usr/local/bin:/usr/bin:/bin HOME={home}"]
    HTTPServer().start()
    results = {}
    with ServerGroup(1, config=config) as group:
        server = group.servers[0]
        write_ssh_setup(Path(home), server, group)
        env = {key: value for key, value in os.environ.items() if key != "SSH_AUTH_SOCK"}
        env.update(HOME=home, PYTHONUNBUFFERED="1")
        for name in sorted(sources):
            for library, source in (("asyncssh", sources[name]),
                                    ("pssh.aio", ported(sources[name]))):
                workdir = Path("/tmp/runs") / library / name
                results.setdefault(name, {})[library] = run_example(name, source, workdir, env)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
