"""Keepalives, and noticing a server that stopped answering (OpenSSH's ServerAliveCountMax).

Every ``seconds`` a keepalive message goes out (no reply asked: a busy
connection needs none). After a round in which not a byte came from the
server, a probe that needs an answer is sent (a channel opened and closed); no
answer within ``count_max`` intervals declares the server lost: every wait on
the link fails with :class:`~pssh.exceptions.ConnectionError` ("server not
responding") and the link closes, so a host that hangs mid-command never
hangs its caller.
"""
from __future__ import annotations

import logging
import weakref

from pssh.core import errors as exc
from pssh.core.link import Link
from pssh.core.waits import Procedure, Sleep, Spawn, Task
from ssh2 import exceptions as ssh2_exc

log = logging.getLogger("pssh.core.keepalive")


def keep_alive(link_ref: "weakref.ref[Link]", seconds: int, count_max: int) -> Procedure[None]:
    """The keepalive loop of a link, held weakly: a link that is dropped ends it."""
    received = -1
    while True:
        link = link_ref()
        if link is None or link.session is None:
            return
        try:
            if count_max and link.session.bytes_received == received:
                yield from probe(link, seconds, count_max)
            due = yield from link.call(link.session.keepalive_send,
                                       what="sending a keepalive")
        except (ssh2_exc.SSH2Error, exc.PSSHError) as err:
            log.debug("%s:%s: keepalives end: %s", link.host, link.port, err)
            return
        received = link.session.bytes_received if link.session is not None else -1
        del link
        yield Sleep(due or seconds)


def probe(link: Link, seconds: int, count_max: int) -> Procedure[None]:
    """Ask the server for an answer; none within ``count_max`` intervals loses the link."""
    timeout = seconds * count_max
    try:
        channel = yield from link.exclusive(link.live_session.open_session, timeout=timeout,
                                            what="keepalive probe")
        yield from link.call(channel.close, timeout=timeout, what="keepalive probe")
    except ssh2_exc.SSH2Error:
        return  # refused (e.g. MaxSessions): an answer all the same
    except exc.Timeout as err:
        lost = link.lose(f"server not responding: no answer for {timeout} s "
                         f"({count_max} keepalive intervals of {seconds} s)")
        link.close()
        raise lost from err  # the unanswered probe is why the connection counts as lost


def start_keepalive(link: Link, seconds: int, count_max: int) -> Procedure[Task]:
    """Start keepalives on ``link`` (``seconds`` 0: none); the task stops with the link."""
    link.live_session.keepalive_config(False, seconds)
    task = yield Spawn(keep_alive(weakref.ref(link), seconds, count_max),
                       f"keepalive {link.host}:{link.port}")
    link.tasks.append(task)
    return task


__all__ = ["keep_alive", "probe", "start_keepalive"]
