"""Commands: opening channels, starting commands and shells, stopping them.

A command started *cancellable* carries a marker in its environment (see
:mod:`pssh.core.cancel`) by which :func:`stop` finds and signals it and its children:
without a pty sshd leaves a command running when its channel closes, and it
refuses "signal" requests for some logins (root's here).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from pssh.core import errors as exc
from pssh.core.cancel import kill_script
from pssh.core.link import Link
from pssh.core.streams import CommandStreams
from pssh.core.waits import Procedure
from pssh.core.deadlines import Limit, UNSET, deadline_after, remaining
from ssh2 import exceptions as ssh2_exc

if TYPE_CHECKING:  # the bindings' types, for annotations only
    from pssh.core.forwarding import AgentForwarding
    from ssh2.channel import Channel

log = logging.getLogger("pssh.core.commands")


def open_channel(link: Link, agent: Optional[AgentForwarding] = None,
                 timeout: Limit = UNSET) -> Procedure[Channel]:
    """A new session channel (agent forwarding asked for on it when ``agent`` is an
    :class:`~pssh.core.forwarding.AgentForwarding`), within ``timeout`` (default: the
    link's request timeout); :class:`~pssh.exceptions.SessionError` if it cannot be
    opened."""
    if link.session is None:
        raise exc.SessionError.at(link.host, link.port, "the connection is closed")
    limit = link.timeout if timeout is UNSET else timeout
    deadline = deadline_after(limit)
    try:
        channel = yield from link.exclusive(link.session.open_session, timeout=limit,
                                            what="opening a channel")
    except (exc.Timeout, exc.ConnectionError):
        raise  # the connection itself failed (or was declared lost): said as such
    except Exception as err:
        raise exc.SessionError("%s:%s: cannot open a channel: %s", link.host, link.port, err,
                               host=link.host, port=link.port) from err
    if agent is not None:
        yield from agent.request(channel, remaining(deadline))
    return channel


def start(link: Link, channel: Channel, command: Optional[bytes], *, pty: Optional[Tuple] = None,
          env: Optional[Mapping[str, str]] = None, timeout: Limit = UNSET) -> Procedure[None]:
    """Start ``command`` on ``channel`` (``None``: the login shell): environment
    variables first, then a pseudo terminal (``pty``: ``(term, width, height)``, or
    ``()`` for libssh2's default), then the command; all within ``timeout`` (default:
    the link's request timeout)."""
    limit = link.timeout if timeout is UNSET else timeout
    deadline = deadline_after(limit)
    for name, value in (env or {}).items():
        yield from link.call(channel.setenv, str(name), str(value), timeout=remaining(deadline),
                             what="setting the environment")
    if pty is not None:
        yield from link.call(channel.pty, *pty, timeout=remaining(deadline),
                             what="asking for a terminal")
    if command is None:
        yield from link.call(channel.shell, timeout=remaining(deadline),
                             what="starting a shell")
    else:
        yield from link.call(channel.execute, command, timeout=remaining(deadline),
                             what="starting the command")


def start_command(link: Link, command: Optional[bytes], *, pty: Optional[Tuple] = None,
                  env: Optional[Mapping[str, str]] = None,
                  agent: Optional[AgentForwarding] = None,
                  timeout: Limit = UNSET) -> Procedure[Channel]:
    """A new channel running ``command``: opening it and starting the command are
    bounded by ``timeout`` (default: the link's request timeout) as a whole. A failure
    after the channel opened closes it again."""
    limit = link.timeout if timeout is UNSET else timeout
    deadline = deadline_after(limit)
    channel = yield from open_channel(link, agent, limit)
    try:
        yield from start(link, channel, command, pty=pty, env=env, timeout=remaining(deadline))
    except BaseException:
        CommandStreams(link, channel).abandon()
        raise
    return channel


def run_to_end(link: Link, command: bytes, timeout: Optional[float] = None
               ) -> Procedure[CommandStreams]:
    """Run ``command`` on a channel of its own until it exits (output discarded)."""
    channel = yield from open_channel(link)
    streams = CommandStreams(link, channel)
    yield from start(link, channel, command)
    yield from streams.wait_eof(timeout, consume=True)
    return streams


def stop(link: Link, streams: CommandStreams, signal: str = "TERM",
         timeout: Optional[float] = 10) -> Procedure[bool]:
    """Stop a running command: a "signal" request, then, for a command started
    cancellable, ``signal`` to every process carrying its marker, then the channel's
    close (which hangs up a command with a pty). Output read so far stays. ``timeout``
    bounds the whole. True if the command was still running.

    A command with neither marker nor pty, on a server that refuses the signal, keeps
    running (as with ssh); its channel is given up here.
    """
    if streams.closed:
        return False
    deadline = deadline_after(timeout)
    signalled = streams.marker is not None
    try:
        yield from link.call(streams.channel.signal, signal, timeout=remaining(deadline),
                             what="sending a signal")
        signalled = True
    except ssh2_exc.SSH2Error as err:
        log.debug("%s: signal request failed: %s", link.host, err)
    grace = min(2.0, remaining(deadline) or 2.0)
    if streams.marker is not None:
        yield from run_to_end(link, kill_script(streams.marker, signal).encode(),
                              remaining(deadline))
    if signalled:
        # The signalled processes die when next scheduled: wait for the command's end
        # (and its exit signal) before closing, or a close of ours that gets there first
        # makes the server drop how the command ended.
        try:
            yield from streams.wait_eof(grace, settle=True)
        except exc.Timeout:
            log.warning("%s: the command outlived %s", link.host, signal)
    try:
        # Without a pty sshd answers at once, whether the command ended or not.
        yield from streams.close(timeout=grace)
    except exc.Timeout:
        log.warning("%s: the command is still running (no pty, and the server ignored the "
                    "signal); its channel is given up", link.host)
    log.info("%s: command stopped (%s)", link.host, signal)
    return True


__all__ = ["open_channel", "run_to_end", "start", "start_command", "stop"]
