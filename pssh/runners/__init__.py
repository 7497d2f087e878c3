"""Runners: the only code that waits.

A runner drives the session core's procedures (:mod:`pssh.core`) on one event
loop, turning each wait request they yield (:mod:`pssh.core.waits`) into a
wait of that loop: :mod:`pssh.runners.gevent` on the gevent hub,
:mod:`pssh.runners.asyncio` on the running asyncio loop (default or uvloop).

What they may import: the core, ``ssh2`` (the session's block directions) and
their loop. Nothing imports them but the API shells (:mod:`pssh.clients`,
:mod:`pssh.aio`), the poller (:mod:`pssh.poll`, whose schedule is procedures of
the core) and programs of their own; :mod:`pssh.runners.virtual` is for tests.
"""
