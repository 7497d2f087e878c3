"""The benchmarks' delayed loopback: a network namespace that really holds packets."""
import subprocess
import sys

from benchmarks.netns_delay import DelayedLoopback

PING_PONG = """
import socket, time
server = socket.socket(); server.bind(("127.0.0.9", 0)); server.listen()
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
for s in (client, peer):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(5):
    started = time.monotonic()
    client.send(b"x"); peer.recv(1); peer.send(b"y"); client.recv(1)
    rtts.append((time.monotonic() - started) * 1000)
print(min(rtts))
"""


def namespaces():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_every_round_trip_is_held_and_the_namespace_goes_away():
    ns = DelayedLoopback(40).__enter__()  # NamespaceError (needing root, say) fails the test
    try:
        assert ns.name in namespaces()
        result = subprocess.run(ns.command([sys.executable, "-c", PING_PONG]),
                                capture_output=True, text=True, timeout=60, check=True)
        # A lower bound, not a timing: each packet is held 20 ms each way.
        assert float(result.stdout) >= 40
    finally:
        ns.__exit__(None, None, None)
    assert ns.name not in namespaces()
    # The machine's own packet filter was never touched.
    assert "NFQUEUE" not in subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True,
                                           text=True).stdout
