"""A TCP proxy in front of a real sshd that hands the server's bytes on slowly.

``mode="banner"``: one byte per ``interval`` from the first byte on (the SSH
banner trickles). ``mode="kex"``: the banner line at once, then one byte per
``interval`` (key exchange trickles). ``mode="later"``: everything at once
until :meth:`TrickleProxy.slow_down`, one byte per ``interval`` after. What
the client sends goes through at once, but with ``mode="rate"``: both ways at
``chunk`` bytes per ``interval`` (a transfer that takes its time).

The proxy runs in a process of its own, so that it keeps trickling however the
client under test uses its own process (the gevent hub, the GIL).
"""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

from pssh.sshd import _die_with_parent  # the proxy never outlives the tests


class TrickleProxy:
    def __init__(self, target: tuple, address: str, mode: str = "banner",
                 interval: float = 0.3, chunk: int = 8192) -> None:
        self.address = address
        self.process = subprocess.Popen(
            [sys.executable, __file__, target[0], str(target[1]), address, mode, str(interval),
             str(chunk)],
            stdout=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self.port = int(self.process.stdout.readline())

    def slow_down(self) -> None:
        """From now on, trickle (``mode="later"``): returns once the proxy has taken it
        (it says so), so that whatever the server sends next is trickled."""
        self.process.send_signal(signal.SIGUSR1)
        answer = self.process.stdout.readline()
        if answer != "slow\n":
            raise RuntimeError(f"the trickling proxy did not take slow_down: {answer!r}")

    def close(self) -> None:
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> "TrickleProxy":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _limited(src, dst, interval: float, chunk: int) -> None:
    try:
        while data := src.recv(chunk):
            dst.sendall(data)
            time.sleep(interval)
    except OSError:
        pass


def _pipe(src, dst) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass


def _trickle(src, dst, mode: str, interval: float, slow: threading.Event) -> None:
    fast = mode == "kex"
    try:
        while True:
            if mode == "later" and not slow.is_set():
                src.settimeout(0.05)
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                if slow.is_set():  # told meanwhile: this is already after slow_down()
                    _trickled(data, dst, interval)
                else:
                    dst.sendall(data)
                continue
            src.settimeout(None)
            byte = src.recv(1)
            if not byte:
                return
            dst.sendall(byte)
            if fast:
                fast = byte != b"\n"  # the banner line ends here
            else:
                time.sleep(interval)
    except OSError:
        pass


def _trickled(data: bytes, dst, interval: float) -> None:
    for i in range(len(data)):
        dst.sendall(data[i:i + 1])
        time.sleep(interval)


def _slow_down(slow: threading.Event) -> None:
    slow.set()
    print("slow", flush=True)   # after the set: slow_down() returns once it holds


def _serve(target_host: str, target_port: int, address: str, mode: str,
           interval: float, chunk: int) -> None:
    slow = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: _slow_down(slow))
    listener = socket.create_server((address, 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((target_host, target_port))
        if mode == "rate":
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=_limited, args=(src, dst, interval, chunk),
                                 daemon=True).start()
            continue
        threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
        threading.Thread(target=_trickle, args=(server, client, mode, interval, slow),
                         daemon=True).start()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]),
           int(sys.argv[6]))
