"""Latency of the first channel opened right after authentication.

    python -m benchmarks.post_auth_stall [--runs 10]

On loopback the first open_session() after auth stalls ~43 ms. Our reading
(not confirmed by a packet trace): sshd keeps Nagle on for sessions without a
pty, so its reply waits for our ACK of the small packet it sent just before,
and the client's delayed ACK holds that ACK ~40 ms. TCP_QUICKACK is not
sticky: set once before auth it is gone by the time the reply arrives (no
effect, measured). Set before every wait, as pssh's clients do, it removes
the stall.
Both modes run alternately in non-blocking mode, waiting with select().
"""
from __future__ import annotations

import argparse
import select
import socket
import statistics
import time

from pssh.sshd import OpenSSHServer
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import Session


def _call(sock, quickack: bool, fn, *args):
    while True:
        result = fn(*args)
        if type(result) is int and result == LIBSSH2_ERROR_EAGAIN:
            if quickack:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            select.select([sock], [], [], 10)
            continue
        return result


def _first_channel_ms(server: OpenSSHServer, quickack: bool) -> float:
    with socket.create_connection((server.address, server.port)) as sock:
        session = Session()
        session.set_blocking(False)
        _call(sock, quickack, session.handshake, sock)
        _call(sock, quickack, session.userauth_publickey_fromfile, server.user,
              server.keys.private())
        started = time.perf_counter()
        _call(sock, quickack, session.open_session)
        return (time.perf_counter() - started) * 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    times = {False: [], True: []}
    with OpenSSHServer() as server:
        for _ in range(args.runs):
            for quickack in (False, True):
                times[quickack].append(_first_channel_ms(server, quickack))
    for quickack, label in ((False, "plain"), (True, "TCP_QUICKACK before each wait")):
        values = times[quickack]
        print(f"open_session after auth, {label}: median {statistics.median(values):.1f} ms "
              f"(max {max(values):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
