"""Messages between the parent and a worker process: pickled tuples, length-prefixed, over
a pair of pipes, read and written without blocking the gevent hub.

Each side sends from many greenlets: a lock keeps each message's bytes together.
"""
from __future__ import annotations

import os
import pickle
import struct
from typing import Any, Optional

from gevent.lock import Semaphore
from gevent.os import make_nonblocking, nb_read, nb_write

_LENGTH = struct.Struct(">I")
_READ_SIZE = 256 * 1024


class FramedPipe:
    """Sends and receives messages over ``read_fd`` / ``write_fd`` (owned: closed by
    :meth:`close`)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        make_nonblocking(read_fd)
        make_nonblocking(write_fd)
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._sending = Semaphore()
        self._buffer = bytearray()
        self._start = 0  # where the next unread message begins in _buffer
        self.closed = False

    def send(self, message: Any) -> None:
        """Send one message (a tuple of picklable values); OSError if the other side is gone."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        frame = memoryview(_LENGTH.pack(len(data)) + data)
        with self._sending:
            while frame:
                frame = frame[nb_write(self._write_fd, frame):]

    def receive(self) -> Optional[Any]:
        """The next message; None once the other side has closed its end."""
        while True:
            buffer, start = self._buffer, self._start
            if len(buffer) - start >= _LENGTH.size:
                (size,) = _LENGTH.unpack_from(buffer, start)
                end = start + _LENGTH.size + size
                if len(buffer) >= end:
                    message = pickle.loads(buffer[start + _LENGTH.size:end])
                    self._start = end
                    return message
            if start:  # what was handed out goes before reading more
                del buffer[:start]
                self._start = 0
            chunk = nb_read(self._read_fd, _READ_SIZE)
            if not chunk:
                return None
            buffer += chunk

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in {self._read_fd, self._write_fd}:
            try:
                os.close(fd)
            except OSError:
                pass


def portable(err: BaseException) -> BaseException:
    """``err`` if it can be pickled for the other side, else a PSSHError saying the same."""
    try:
        pickle.dumps(err)
        return err
    except Exception:
        from pssh import exceptions as exc
        return exc.PSSHError("%s: %s", type(err).__name__, err)
