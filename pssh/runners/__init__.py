"""Runners: the only code that waits.

A runner drives the session core's procedures (:mod:`pssh.core`) on one event
loop, turning each wait request they yield (:mod:`pssh.core.waits`) into a
wait of that loop: :mod:`pssh.runners.gevent` on the gevent hub,
:mod:`pssh.runners.asyncio` on the running asyncio loop (default or uvloop).

What they may import: the core, ``ssh2`` (the session's block directions) and
their loop. Nothing imports them but the API shells (:mod:`pssh.clients`,
:mod:`pssh.aio`), the poller (:mod:`pssh.poll`, whose schedule is procedures of
the core) and programs of their own; :mod:`pssh.runners.virtual` is for tests. The
command line reads :data:`RUNNERS` here, which imports nothing.
"""

#: The runners the gevent clients' procedures can run on (``runner=``): ``"gevent"``, each
#: wait a wait of the hub; ``"native"``, the waits of every client of a thread answered by
#: one epoll set (:mod:`pssh.runners.native`: less CPU per host in a fan-out).
RUNNERS = ("gevent", "native")
