"""Reading a channel without waiting: shared by both front ends' output readers.

The waiting (greenlets or the asyncio loop) stays with each front end; what
libssh2 already holds is moved the same way for both.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

#: Bytes asked for per read: bulk output needs few calls, polls stay short.
CHUNK = 65536


def read_available(channel, stream: int, append: Callable[[bytes], None],
                   enough: Optional[Callable[[], bool]] = None) -> Tuple[bool, bool]:
    """Hand what libssh2 holds for ``stream`` (0 stdout, 1 stderr) to ``append`` until it
    would block, or until ``enough()`` says so: each read lets the server send more, and a
    fast server would otherwise fill memory faster than it is consumed.
    Returns ``(progress, ended)``; the stream's end counts as progress."""
    progress = False
    while not (enough is not None and enough()):
        size, data = channel.read_ex(CHUNK, stream)
        if size > 0:
            append(data)
        elif size == 0:
            return True, True
        else:
            break
        progress = True
    return progress, False


def data_pending(channel) -> bool:
    """Whether libssh2 already holds data or EOF for ``channel``: reading one stream can pull
    the other's packets off the socket, which would then never become readable for them."""
    return bool(channel.poll_channel_read(1)) or channel.eof()
