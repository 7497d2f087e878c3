"""Messages between the parent and a worker process: pickled tuples, length-prefixed, over
a pair of pipes, read and written without blocking the gevent hub.

Each side sends from many greenlets. A message joins an outgoing buffer, and one writer
greenlet writes what has gathered: the messages of one turn of the loop (a join's drain of
every host, the exits of many hosts) go out in one system call and wake the other process
once, in the order they were sent.
"""
from __future__ import annotations

import os
import pickle
import struct
from typing import Any, Optional

import gevent
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
        self._outgoing = bytearray()
        self._writer: Optional[gevent.Greenlet] = None
        self._broken: Optional[OSError] = None
        self._buffer = bytearray()
        self._start = 0  # where the next unread message begins in _buffer
        self.closed = False

    def send(self, message: Any) -> None:
        """Queue one message (a tuple of picklable values) for sending; OSError if the other
        side is known to be gone."""
        if self._broken is not None:
            raise self._broken
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self._outgoing += _LENGTH.pack(len(data))
        self._outgoing += data
        if self._writer is None:
            self._writer = gevent.spawn(self._write)

    def _write(self) -> None:
        try:
            while self._outgoing:
                chunk, self._outgoing = self._outgoing, bytearray()
                view = memoryview(chunk)
                while view:
                    view = view[nb_write(self._write_fd, view):]
        except OSError as err:
            self._broken = err  # the reader of this side sees the end and says why
        finally:
            self._writer = None

    def flush(self) -> None:
        """Wait until everything sent so far is written (or the other side is gone)."""
        while self._writer is not None:
            self._writer.join()

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
        if self._writer is not None and self._writer is not gevent.getcurrent():
            self._writer.kill()  # no write may reach a descriptor number reused later
        for fd in {self._read_fd, self._write_fd}:
            try:
                os.close(fd)
            except OSError:
                pass
