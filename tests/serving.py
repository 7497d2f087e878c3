"""TCP servers of the tests' own, each in a thread: an echo server (the destination of
forwarded connections), a port that hangs up at once.

Closing one shuts its sockets down before closing them: a thread blocked in ``accept()``
or ``recv()`` is not woken by a close of the socket in another thread (Linux), and was
left blocked for the rest of the run, holding its port. Shut down, it returns, and is
joined: no thread of a test outlives it (conftest.py's nothing_left_behind).
"""
from __future__ import annotations

import socket
import threading
from typing import Callable, List

#: Only a hang takes this long to join.
JOIN_TIMEOUT = 30.0


class Serving:
    """A listener on ``address`` (a free port: :attr:`port`) whose connections are handed,
    one at a time, to ``handle(connection)`` in a thread of its own; the connection is
    closed after. A ``with`` block, or :meth:`close`, ends it."""

    def __init__(self, handle: Callable[[socket.socket], None], address: str = "127.0.0.1",
                 backlog: int = 16) -> None:
        self.handle = handle
        self.sock = socket.socket()
        self.sock.bind((address, 0))
        self.sock.listen(backlog)
        self.port: int = self.sock.getsockname()[1]
        self._connections: List[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, name=f"serving {address}:{self.port}")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:  # shut down: the test is over
                return
            self._connections.append(connection)
            with connection:
                try:
                    self.handle(connection)
                except OSError:  # shut down while its client still held it
                    pass

    def close(self) -> None:
        for sock in [self.sock, *self._connections]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already (a connection that ended), or never connected
                pass
        self._thread.join(JOIN_TIMEOUT)
        self.sock.close()
        if self._thread.is_alive():
            raise RuntimeError(f"{self._thread.name}: still running {JOIN_TIMEOUT} s after "
                               f"its sockets were shut down")

    def __enter__(self) -> "Serving":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def echo(connection: socket.socket) -> None:
    """Sends back what comes, until the peer's end."""
    while data := connection.recv(65536):
        connection.sendall(data)


__all__ = ["Serving", "echo"]
