"""Latency of the first channel opened right after authentication.

    python -m benchmarks.post_auth_stall [--runs 15] [--quickack]

On loopback the first open_session() after auth stalls ~44 ms while a
following execute() takes ~1 ms: a delayed-ACK / Nagle interaction between
sshd's post-auth packets and the client. ``--quickack`` sets TCP_QUICKACK
before authenticating, to test that remedy (it did not help here).
"""
from __future__ import annotations

import argparse
import socket
import statistics
import time

from pssh.sshd import OpenSSHServer
from ssh2.session import Session


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--quickack", action="store_true")
    args = parser.parse_args(argv)
    opens, execs = [], []
    with OpenSSHServer() as server:
        for _ in range(args.runs):
            with socket.create_connection((server.address, server.port)) as sock:
                session = Session()
                session.handshake(sock)
                if args.quickack:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                session.userauth_publickey_fromfile(server.user, server.keys.private())
                started = time.perf_counter()
                channel = session.open_session()
                opened = time.perf_counter()
                channel.execute("true")
                executed = time.perf_counter()
                opens.append((opened - started) * 1000)
                execs.append((executed - opened) * 1000)
                del channel, session
    print(f"open_session after auth: median {statistics.median(opens):.1f} ms "
          f"(max {max(opens):.1f}); execute: median {statistics.median(execs):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
