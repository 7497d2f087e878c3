"""Run one command on many local OpenSSH hosts in parallel with the ssh2 bindings.

    python -m pssh.demo [--hosts N] [--] [COMMAND]

Starts N real sshd hosts on 127.0.0.1..N (see :mod:`pssh.sshd`), connects to
each from a thread pool (the bindings release the GIL), verifies every host
key against a known_hosts file, runs the command, and prints each host's
output and a summary. Stand-in for the ``pssh`` command line until it lands.
"""
from __future__ import annotations

import argparse
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from pssh.sshd import ServerGroup
from ssh2.knownhost import LIBSSH2_KNOWNHOST_KEYENC_RAW, LIBSSH2_KNOWNHOST_TYPE_PLAIN, \
    hostkey_typemask
from ssh2.session import Session


@dataclass
class Result:
    host: str
    exit_code: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None
    seconds: float = 0.0
    lines: list = field(default_factory=list)


def _drain(read) -> bytes:
    chunks = []
    while True:
        size, data = read()
        if size <= 0:
            return b"".join(chunks)
        chunks.append(data)


def run_on(server, known_hosts: str, key: str, command: str, timeout_ms: int) -> Result:
    result = Result(f"{server.address}:{server.port}")
    started = time.monotonic()
    try:
        with socket.create_connection((server.address, server.port), timeout=timeout_ms / 1000) as sock:
            session = Session()
            session.set_timeout(timeout_ms)
            session.handshake(sock)
            hosts = session.knownhost_init()
            hosts.readfile(known_hosts)
            hostkey, key_type = session.hostkey()
            hosts.checkp(server.address, server.port, hostkey,
                         LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW
                         | hostkey_typemask(key_type))
            session.userauth_publickey_fromfile(server.user, key)
            chan = session.open_session()
            chan.execute(command)
            result.stdout = _drain(chan.read)
            result.stderr = _drain(chan.read_stderr)
            chan.close()
            chan.wait_closed()
            result.exit_code = chan.get_exit_status()
            session.disconnect()
    except Exception as err:
        result.error = f"{type(err).__name__}: {err}"
    result.seconds = time.monotonic() - started
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pssh.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=20, help="number of local hosts (default 20)")
    parser.add_argument("--parallel", type=int, default=20, help="concurrent connections")
    parser.add_argument("--timeout", type=float, default=30, help="per-host timeout, seconds")
    parser.add_argument("command", nargs="*", default=["uname -sr; echo \"$SSH_CONNECTION\""])
    args = parser.parse_args(argv)
    command = " ".join(args.command)

    print(f"starting {args.hosts} local sshd hosts ...", file=sys.stderr)
    with ServerGroup(args.hosts) as group:
        known_hosts = group.known_hosts_file()
        key = group.keys.private("ed25519")
        started = time.monotonic()
        results = []
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(run_on, s, known_hosts, key, command, int(args.timeout * 1000))
                       for s in group.servers]
            for future in as_completed(futures):
                r = future.result()
                results.append(r)
                for line in r.stdout.decode(errors="replace").splitlines():
                    print(f"[{r.host}] {line}")
                for line in r.stderr.decode(errors="replace").splitlines():
                    print(f"[{r.host}] stderr: {line}")
                if r.error:
                    print(f"[{r.host}] ERROR {r.error}")
        wall = time.monotonic() - started

    failed = [r for r in results if r.error or r.exit_code != 0]
    print(f"\n{'host':<22} {'status':<8} {'exit':>4} {'seconds':>8}")
    for r in sorted(results, key=lambda r: (r.error is None and r.exit_code == 0, r.host)):
        status = "error" if r.error else ("ok" if r.exit_code == 0 else "failed")
        exit_code = "-" if r.exit_code is None else str(r.exit_code)
        print(f"{r.host:<22} {status:<8} {exit_code:>4} {r.seconds:8.3f}")
    print(f"\n{len(results) - len(failed)}/{len(results)} hosts succeeded in {wall:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
