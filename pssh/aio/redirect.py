"""A command's standard streams from and to elsewhere (asyncssh's ``stdin=``, ``stdout=``,
``stderr=`` of ``run`` and ``create_process``, and ``SSHClientProcess.redirect``).

A source (for stdin) or a target (for stdout, stderr) is one of:

- a local path (``str`` or ``os.PathLike``): read, or created and written;
- an open file object: a regular file is read or written directly; a pipe (such as a
  ``subprocess.Popen``'s ``stdout``) is read on the loop (``connect_read_pipe``) and
  closed at its end, as asyncssh does;
- another process's stream (:class:`~pssh.aio.SSHReader` / :class:`~pssh.aio.SSHWriter`),
  or an :class:`asyncio.StreamReader` / :class:`asyncio.StreamWriter`;
- ``DEVNULL`` (nothing in; output thrown away) or ``PIPE`` (the default: the process's
  own stream). ``stderr=STDOUT`` sends standard error where standard output goes.

Data moves a chunk at a time, each sent before the next is read: memory stays bounded
whatever the size.
"""
from __future__ import annotations

import asyncio
import io
import os
import stat
from asyncio.subprocess import DEVNULL, PIPE, STDOUT
from typing import Optional

CHUNK = 65536

__all__ = ["DEVNULL", "PIPE", "STDOUT", "feed", "drain_into"]


def _encode(data, encoding: Optional[str]) -> bytes:
    return data.encode(encoding or "utf-8") if isinstance(data, str) else bytes(data)


async def _read_chunks(source):
    """Yield the chunks of ``source`` (bytes or str) until its end."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            while data := fh.read(CHUNK):
                yield data
        return
    if hasattr(source, "fileno") and not hasattr(source, "at_eof"):
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            # A pipe, socket or terminal: read when the loop says it is readable.
            reader = asyncio.StreamReader()
            loop = asyncio.get_running_loop()
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), source)
            try:
                while data := await reader.read(CHUNK):
                    yield data
            finally:
                transport.close()
            return
        while data := source.read(CHUNK):
            yield data
        return
    # SSHReader, asyncio.StreamReader: read() is a coroutine.
    while data := await source.read(CHUNK):
        yield data


async def feed(source, stdin, encoding: Optional[str]) -> None:
    """Send everything ``source`` holds to the process's ``stdin`` (an SSHWriter), then
    end it."""
    try:
        if source != DEVNULL:
            async for data in _read_chunks(source):
                stdin.write(_encode(data, encoding))
                await stdin.drain()
    finally:
        stdin.write_eof()
    await stdin.drain()


class _Target:
    """Where one output stream goes: ``write(bytes)`` (a coroutine) and ``close()``."""

    def __init__(self, target, encoding: Optional[str], errors: str) -> None:
        self._target = target
        self._opened = None
        self._text = isinstance(target, io.TextIOBase)
        self._encoding = encoding or "utf-8"
        self._errors = errors
        if isinstance(target, (str, os.PathLike)):
            self._opened = open(target, "wb")
        self._stream = hasattr(target, "drain")   # SSHWriter, asyncio.StreamWriter

    async def write(self, data: bytes) -> None:
        if self._opened is not None:
            self._opened.write(data)
        elif self._stream:
            self._target.write(data)
            await self._target.drain()
        elif self._text:
            self._target.write(data.decode(self._encoding, self._errors))
        else:
            self._target.write(data)

    async def close(self) -> None:
        """Close a file we opened; end a stream we write into (its reader sees EOF)."""
        if self._opened is not None:
            self._opened.close()
        elif self._stream:
            if getattr(self._target, "can_write_eof", lambda: True)():
                self._target.write_eof()
            await self._target.drain()
        elif hasattr(self._target, "flush"):
            self._target.flush()


async def drain_into(streams, stream: int, target, encoding: Optional[str], errors: str,
                     also: Optional[int] = None) -> None:
    """Copy output ``stream`` of ``streams`` (a ChannelStreams) into ``target`` until it
    ends (``DEVNULL``: thrown away). ``also``: the other stream too (``stderr=STDOUT``),
    as each chunk of either comes: reading one to its end first would leave the other
    unread meanwhile, and beyond its bound a stream nobody reads is dropped."""
    sink = None if target == DEVNULL else _Target(target, encoding, errors)
    try:
        if also is not None:
            while True:
                _, data = await streams.any_chunk()
                if not data:  # both have ended
                    break
                if sink is not None:
                    await sink.write(data)
            return
        while data := await streams.chunk(stream):
            if sink is not None:
                await sink.write(data)
    finally:
        if sink is not None:
            await sink.close()
