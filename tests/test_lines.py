"""The line views' splitting (pssh.core.lines): every line and byte in order, however the
stream is cut into chunks, and no line longer than the cap."""
from __future__ import annotations

import logging
import random

import pytest

from pssh.core.lines import LineBuffer, LongLines, size_text, split_lines


def reference(stream: bytes, limit):
    """The lines of ``stream`` with their ``\\n``, each longer than ``limit`` cut into
    pieces of ``limit`` bytes: the plainest statement of what LineBuffer promises."""
    lines = stream.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    if limit is None:
        return out
    return [line[i:i + limit] for line in out for i in range(0, len(line), limit)]


def stripped(pieces, limit):
    """As split_lines hands them on: ``\\n`` and ``\\r\\n`` removed from whole lines, and
    a ``\\r`` from the last line of all (not from a piece: it is handed on before the end is
    known)."""
    out = []
    for piece in pieces:
        if piece.endswith(b"\r\n"):
            piece = piece[:-2]
        elif piece.endswith(b"\n"):
            piece = piece[:-1]
        out.append(piece)
    last = pieces[-1] if pieces else b"\n"
    if not last.endswith(b"\n") and (limit is None or len(last) < limit) \
            and out[-1].endswith(b"\r"):
        out[-1] = out[-1][:-1]
    return out


def chunked(stream: bytes, rng: random.Random):
    chunks, start = [], 0
    while start < len(stream):
        size = rng.choice((1, 2, 3, 7, 50, 400, 5000))
        chunks.append(stream[start:start + size])
        start += size
    return chunks


def random_stream(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 60)):
        parts.append(rng.choice((b"", b"x" * rng.randrange(1, 30), b"y" * rng.randrange(200, 900),
                                 b"\r", b"\n", b"\r\n", b"\n\n")))
    return b"".join(parts)


@pytest.mark.parametrize("limit", [None, 1, 2, 7, 64, 500])
def test_line_by_line_matches_the_reference_however_the_stream_is_chunked(limit):
    rng = random.Random(limit or 0)
    for _ in range(300):
        stream = random_stream(rng)
        buffer = LineBuffer(limit)
        got = []
        for chunk in chunked(stream, rng):
            buffer.add(chunk)
            while (line := buffer.line()) is not None:
                got.append(line)
        rest = buffer.take()
        if limit is not None:  # what is left at the end is shorter than a piece
            assert len(rest) < limit or not rest
        got += [rest] if rest else []
        assert got == reference(stream, limit)
        assert b"".join(got) == stream
        assert all(limit is None or len(piece) <= limit for piece in got)


@pytest.mark.parametrize("limit", [None, 1, 5, 64, 500])
def test_split_lines_matches_the_reference(limit):
    rng = random.Random(100 + (limit or 0))
    for _ in range(300):
        stream = random_stream(rng)
        got = list(split_lines(chunked(stream, rng), limit))
        assert got == stripped(reference(stream, limit), limit), stream


def test_take_and_lines_share_one_position():
    buffer = LineBuffer(None)
    for chunk in (b"ab", b"c\nde", b"f\ng"):
        buffer.add(chunk)
    assert buffer.take(1) == b"a"
    assert buffer.line() == b"bc\n"
    assert buffer.take(4) == b"def\n"
    assert len(buffer) == 1 and buffer.line() is None
    assert buffer.take() == b"g" and len(buffer) == 0


def test_a_long_line_is_cut_and_said_once(caplog):
    said = LongLines("10.0.0.1", 4)
    with caplog.at_level(logging.WARNING, logger="pssh.core.lines"):
        assert list(split_lines([b"abcdefghij\nk"], 4, said)) == [b"abcd", b"efgh", b"ij", b"k"]
        list(split_lines([b"0123456789"], 4, said))
    assert said.pieces == 4
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["10.0.0.1: a line longer than 4 bytes: handed on in pieces of that "
                        "size (max_line)"]


def test_size_text():
    assert (size_text(1 << 20), size_text(64 << 10), size_text(1000)) == \
        ("1 MiB", "64 KiB", "1000 bytes")


def test_a_cap_below_one_byte_is_refused():
    with pytest.raises(ValueError, match="max_line"):
        LineBuffer(0)
