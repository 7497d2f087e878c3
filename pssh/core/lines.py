"""Lines of a command's output, for every line view: the gevent client's ``stdout`` and
``stderr`` iteration, pssh.aio's ``readline`` and ``async for``, and the command line's
streamed and collected views.

A host that never sends a newline must not make a line view hold all it sends: a line
longer than ``max_line`` bytes (:data:`MAX_LINE`, 1 MiB, unless the view was given
another; ``None``: no limit) is handed on in pieces of ``max_line`` bytes, and
:class:`LongLines` says so once, naming the host. Only the line views cut: ``read()``
of pssh.aio, the buffers' chunks and files written with ``--output-dir`` keep the bytes
as they came.

Splitting is linear in the size of the output: a line is cut out of the chunk that
holds it by index (what follows is never copied for each line), and a line spanning
chunks is joined once.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Callable, Iterable, Iterator, Optional

log = logging.getLogger("pssh.core.lines")

#: The longest line a line view hands on whole, in bytes: a longer one comes in pieces of
#: this size (said once per command, naming the host).
MAX_LINE = 1 << 20


class LongLines:
    """``on_split`` for a command's line views: the first cut line is said once, as a
    warning naming ``name`` (the host); later ones are counted in :attr:`pieces`."""

    __slots__ = ("name", "max_line", "pieces")

    def __init__(self, name: str, max_line: Optional[int] = MAX_LINE) -> None:
        self.name = name
        self.max_line = max_line
        #: Pieces handed on so far because a line was longer than ``max_line``.
        self.pieces = 0

    def __call__(self) -> None:
        if not self.pieces:
            log.warning("%s: a line longer than %s: handed on in pieces of that size "
                        "(max_line)", self.name, size_text(self.max_line or 0))
        self.pieces += 1


def size_text(size: int) -> str:
    """``size`` bytes as the messages say it: ``1 MiB``, ``64 KiB``, ``100 bytes``."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


class LineBuffer:
    """Bytes received and not yet handed on: taken as lines (:meth:`line`) or as they
    are (:meth:`take`).

    ``max_line`` (bytes; ``None``: no limit): a line longer than that is handed on in
    pieces of exactly that many bytes, ``on_split()`` called for each.
    """

    __slots__ = ("max_line", "on_split", "_chunks", "_offset", "_held", "_scanned",
                 "_clean")

    def __init__(self, max_line: Optional[int] = MAX_LINE,
                 on_split: Optional[Callable[[], None]] = None) -> None:
        if max_line is not None and max_line < 1:
            raise ValueError(f"max_line must be at least 1 byte (or None), not {max_line}")
        self.max_line = max_line
        self.on_split = on_split
        self._chunks: deque = deque()
        self._offset = 0     # bytes of the first chunk already handed on
        self._held = 0       # bytes not yet handed on
        # What the last look for a newline found none in, kept so that a line arriving
        # over many chunks is scanned once, not once per chunk: the first ``_clean``
        # chunks, ``_scanned`` unread bytes in all.
        self._scanned = 0
        self._clean = 0

    def __len__(self) -> int:
        return self._held

    def add(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._held += len(data)

    def line(self) -> Optional[bytes]:
        """The next line with its ``\\n``, or a piece of ``max_line`` bytes of a longer
        one; None if what is held ends inside a line shorter than that (more is needed:
        at the stream's end, :meth:`take` the rest)."""
        chunks = self._chunks
        if not chunks:
            return None
        limit = self.max_line
        if self._clean == 0:  # the common case: the line ends in the first chunk
            first = chunks[0]
            end = first.find(b"\n", self._offset)
            if end >= 0:
                size = end + 1 - self._offset
                if limit is None or size <= limit:
                    line = first[self._offset:end + 1] if self._offset or end + 1 < len(first) \
                        else first
                    self._consumed_in_first(size)
                    return line
                return self._piece()
        scanned, index = self._scanned, self._clean
        if index == 0:
            scanned = len(chunks[0]) - self._offset
            index = 1
        while index < len(chunks):
            chunk = chunks[index]
            end = chunk.find(b"\n")
            if end >= 0:
                size = scanned + end + 1
                if limit is not None and size > limit:
                    return self._piece()
                return self.take(size)
            scanned += len(chunk)
            index += 1
            if limit is not None and scanned >= limit:
                return self._piece()
        self._scanned, self._clean = scanned, index
        if limit is not None and scanned >= limit:
            return self._piece()
        return None

    def lines(self) -> Iterator[bytes]:
        """Every line held, ``\\n`` or ``\\r\\n`` removed (pieces of longer ones as they
        are), until what is held ends inside a line. The lines within one chunk are cut in
        one loop (the gevent client's and the command line's hot path); nothing else may
        use the buffer until the iteration ends."""
        chunks = self._chunks
        limit = self.max_line
        while chunks:
            if self._clean == 0:
                first = chunks[0]
                start = offset = self._offset
                find = first.find
                while True:
                    end = find(b"\n", start)
                    if end < 0 or (limit is not None and end + 1 - start > limit):
                        break
                    yield first[start:end - 1] if end > start and first[end - 1] == 13 \
                        else first[start:end]
                    start = end + 1
                if start > offset:
                    self._consumed_in_first(start - offset)
                    continue  # the rest of the chunk, or the next chunk
            line = self.line()
            if line is None:
                return
            if line.endswith(b"\n"):
                yield line[:-2] if line.endswith(b"\r\n") else line[:-1]
            else:
                yield line

    def _piece(self) -> bytes:
        """``max_line`` bytes of a line longer than that."""
        assert self.max_line is not None
        if self.on_split is not None:
            self.on_split()
        return self.take(self.max_line)

    def _consumed_in_first(self, size: int) -> None:
        self._held -= size
        self._offset += size
        if self._offset == len(self._chunks[0]):
            self._chunks.popleft()
            self._offset = 0

    def take(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all with a negative ``size``), handed on as they are."""
        if size < 0 or size > self._held:
            size = self._held
        self._scanned = self._clean = 0
        if not size:
            return b""
        chunks = self._chunks
        first = chunks[0]
        if len(first) - self._offset >= size:
            data = first[self._offset:self._offset + size] \
                if self._offset or size < len(first) else first
            self._consumed_in_first(size)
            return data
        parts = [first[self._offset:] if self._offset else first]
        got = len(parts[0])
        chunks.popleft()
        while got < size:
            chunk = chunks.popleft()
            need = size - got
            if len(chunk) > need:
                parts.append(chunk[:need])
                chunks.appendleft(chunk)
                self._offset = need
                got = size
                break
            parts.append(chunk)
            got += len(chunk)
        else:
            self._offset = 0
        self._held -= size
        return b"".join(parts)


def split_lines(chunks: Iterable[bytes], max_line: Optional[int] = MAX_LINE,
                on_split: Optional[Callable[[], None]] = None) -> Iterator[bytes]:
    """Lines of a byte stream (``\\n`` or ``\\r\\n`` removed; a last line without one
    included), a line longer than ``max_line`` in pieces of that size (see
    :class:`LineBuffer`)."""
    lines = LineBuffer(max_line, on_split)
    for chunk in chunks:
        lines.add(chunk)
        yield from lines.lines()
    rest = lines.take()
    if rest:
        yield rest[:-1] if rest.endswith(b"\r") else rest


__all__ = ["LineBuffer", "LongLines", "MAX_LINE", "size_text", "split_lines"]
