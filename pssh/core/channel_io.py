"""Reading a channel without waiting: shared by both front ends' output readers.

The waiting (greenlets or the asyncio loop) stays with each front end; what
libssh2 already holds is moved the same way for both.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Tuple

from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from ssh2.channel import Channel
    from ssh2.sftp import SFTP

#: Bytes asked for per read: bulk output needs few calls, polls stay short.
CHUNK = 65536
#: Bytes moved per call at most: a server that sends as fast as we read would otherwise
#: keep one call going (and the loop waiting) for as long as it likes.
MAX_PER_CALL = 16 * CHUNK


def read_available(channel: Channel, stream: int, append: Callable[[bytes], None],
                   enough: Optional[Callable[[], bool]] = None,
                   most: Optional[int] = MAX_PER_CALL) -> Tuple[bool, bool]:
    """Hand what libssh2 holds for ``stream`` (0 stdout, 1 stderr) to ``append`` until it
    would block, or until ``enough()`` says so: each read lets the server send more, and a
    fast server would otherwise fill memory faster than it is consumed. ``most``: bytes
    moved at the most (None: all there is; for data being dropped, which must keep up
    with a server that libssh2 lets send again on every read of the channel).
    Returns ``(progress, ended)``; the stream's end counts as progress."""
    progress = False
    moved = 0
    while not (enough is not None and enough()) and (most is None or moved < most):
        size, data = channel.read_ex(CHUNK, stream)
        if size > 0:
            append(data)
            moved += size
        elif size == 0:
            return True, True
        else:
            break
        progress = True
    return progress, False


def data_pending(channel: Channel) -> bool:
    """Whether libssh2 already holds data or EOF for ``channel``: reading one stream can pull
    the other's packets off the socket, which would then never become readable for them."""
    return bool(channel.poll_channel_read(1)) or channel.eof()


def raise_if_ended(channel: Optional[Channel], what: str) -> None:
    """Raise :class:`ssh2.exceptions.ChannelClosedError`, naming ``what``, if the server has
    ended ``channel`` (sent its end of file, nothing left to read).

    For a channel whose program (sftp-server, scp) ends it only by exiting, whatever a
    transfer waits for will then never come: libssh2 would answer "try again" for ever.
    """
    if channel is not None and channel.eof():
        raise ssh2_exc.ChannelClosedError(f"{what} ended on the server: its end of the "
                                          f"channel is closed")


def end_check(channel: Channel, what: str) -> Callable[[], None]:
    """:func:`raise_if_ended` for ``channel``, as a check to make before each wait."""
    return lambda: raise_if_ended(channel, what)


def sftp_end_check(sftp: SFTP) -> Callable[[], None]:
    """The check for requests of SFTP session ``sftp`` (its channel looked up when needed)."""
    return lambda: raise_if_ended(sftp.get_channel(), "the SFTP session")
