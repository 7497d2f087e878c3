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
    """Run ``command`` on a channel of its own until it exits (output discarded).

    ``timeout`` bounds the whole: opening the channel, starting the command and its run
    (None: opening and starting take the link's request timeout, the run has no limit).
    On a Timeout the channel is given up (its close sent), never left open."""
    deadline = deadline_after(timeout)
    channel = yield from start_command(link, command,
                                       timeout=UNSET if timeout is None else timeout)
    streams = CommandStreams(link, channel)
    try:
        yield from streams.wait_eof(remaining(deadline), consume=True)
    except BaseException:
        streams.abandon()
        raise
    return streams


#: The longest one step of a stop after the signals may wait: for the command's end, then
#: for the server's answer to our close. A command that ignores the signal costs this per
#: step (within the stop's own deadline), not the whole timeout.
STEP_LIMIT = 2.0


def _step(deadline: Optional[float]) -> float:
    """What a step of a stop may wait: what is left before ``deadline``, at most
    :data:`STEP_LIMIT` (0 when nothing is left: the step tries once, never waits)."""
    left = remaining(deadline)
    return STEP_LIMIT if left is None else min(STEP_LIMIT, left)


def signal_marked(link: Link, marker: str, signal: str = "TERM",
                  timeout: Optional[float] = 10) -> Procedure[None]:
    """Send ``signal`` to every process carrying ``marker`` (a command started cancellable,
    and its children): :func:`~pssh.core.cancel.kill_script` on a channel of its own,
    within ``timeout`` (:class:`~pssh.exceptions.Timeout` after it). For a command whose
    own channel is gone or was never had (its start was cancelled half-way)."""
    yield from run_to_end(link, kill_script(marker, signal).encode(), timeout)


def signal_command(link: Link, streams: CommandStreams, signal: str = "TERM",
                   timeout: Optional[float] = 10) -> Procedure[bool]:
    """Send ``signal`` to a running command: a "signal" request, then, for a command
    started cancellable, :func:`~pssh.core.cancel.kill_script` on a channel of its own.
    ``timeout`` bounds both; a step that runs out of it is given up (logged), the
    channel is left as it is. True if the command was signalled, as far as we know:
    the server took the request, or the command carries a marker.

    A lost connection is raised (:class:`~pssh.exceptions.ConnectionError`)."""
    deadline = deadline_after(timeout)
    signalled = False
    try:
        yield from link.call(streams.channel.signal, signal, timeout=remaining(deadline),
                             what="sending a signal")
        signalled = True
    except (ssh2_exc.SSH2Error, exc.Timeout) as err:
        log.debug("%s: signal request failed: %s", link.host, err)
    if streams.marker is not None:
        signalled = True
        try:
            yield from signal_marked(link, streams.marker, signal, remaining(deadline))
        except exc.Timeout as err:
            log.warning("%s: signalling the command's processes did not finish in time: %s",
                        link.host, err)
    return signalled


def stop(link: Link, streams: CommandStreams, signal: str = "TERM",
         timeout: Optional[float] = 10) -> Procedure[bool]:
    """Stop a running command: :func:`signal_command`, then a wait for the command's end,
    then the channel's close (which hangs up a command with a pty). Output read so far
    stays. True if the command was still running.

    ``timeout`` (None: no limit) bounds the whole: each step gets what the ones before
    it left, the wait and the close :data:`STEP_LIMIT` at the most. Whatever happens the
    channel ends closed or given up; a command that ignores the signal is never waited
    for beyond the deadline. A command with neither marker nor pty, on a server that
    refuses the signal, keeps running (as with ssh); its channel is given up here.
    """
    if streams.closed:
        return False
    deadline = deadline_after(timeout)
    signalled = yield from signal_command(link, streams, signal, remaining(deadline))
    if signalled:
        # The signalled processes die when next scheduled: wait for the command's end
        # (and its exit signal) before closing, or a close of ours that gets there first
        # makes the server drop how the command ended.
        try:
            yield from streams.wait_eof(_step(deadline), settle=True)
        except exc.Timeout:
            log.warning("%s: the command outlived %s", link.host, signal)
    try:
        # sshd answers our close once the command has ended (with a pty, it hangs it up).
        yield from streams.close(timeout=_step(deadline))
    except exc.Timeout:
        log.warning("%s: the command is still running (the server ignored the signal, "
                    "or it ignores %s); its channel is given up", link.host, signal)
    log.info("%s: command stopped (%s)", link.host, signal)
    return True


__all__ = ["STEP_LIMIT", "open_channel", "run_to_end", "signal_command", "signal_marked",
           "start", "start_command", "stop"]
