"""The one signal policy of every worker, process or Dask, and of its parent.

A worker belongs to its parent's process group, so a signal meant for the parent
reaches it too: Ctrl-C typed at a terminal, or the SIGTERM that ``timeout``,
systemd and CI runners send to a whole group.

* SIGINT is the parent's to handle (it stops the run through its workers when
  it means to, staged at a terminal): a worker ignores it.
* SIGTERM stops a worker's work at once (its remote commands stopped, its
  transfers' partial files removed), but the worker goes on serving its parent,
  which is being stopped by the same signal and ends it.
* SIGUSR1 writes every greenlet's stack to standard error (:mod:`pssh.stacks`).
* A worker is started with SIGINT and SIGUSR1 blocked (:func:`held_for_a_new_worker`)
  and takes them once its handlers are in place: one sent to the whole group while a
  worker starts (Ctrl-C, ``kill -USR1``) waits for it instead of ending it.
* The parent keeps its own handling (Python's KeyboardInterrupt, or the command
  line's): whatever ends it unwinds through the ``with`` scope that owns its
  workers, which stops and reaps them; a parent killed outright closes their
  input, which stops them too.
"""
from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from pssh import stacks

log = logging.getLogger("pssh.fanout")

#: Signals a new worker holds until :func:`install_worker_policy` has set its handlers.
HELD_AT_START = frozenset({signal.SIGINT, signal.SIGUSR1})


@contextmanager
def held_for_a_new_worker() -> Iterator[None]:
    """Around starting a worker process: :data:`HELD_AT_START` blocked in this thread,
    so that the child inherits them blocked through ``exec`` (a signal mask survives it;
    a handler does not). This thread gets any that came meanwhile once the block ends."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_AT_START)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def install_worker_policy(on_terminate: Callable[[], None], *, hub: bool) -> bool:
    """Ignore SIGINT; call ``on_terminate()`` on SIGTERM. ``hub``: the process runs a
    gevent hub (the handler then runs in a greenlet of its own; otherwise in the signal
    handler, where it may only set a flag). False where signals cannot be set (not the
    main thread): they are left as they are."""
    if threading.current_thread() is not threading.main_thread():
        log.warning("not in the main thread: signals are left as they are")
        return False
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stacks.install()
    if hub:
        import gevent
        gevent.signal_handler(signal.SIGTERM, gevent.spawn, on_terminate)
    else:
        signal.signal(signal.SIGTERM, lambda signum, frame: on_terminate())
    # Held since the fork (held_for_a_new_worker): any sent meanwhile is handled now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_AT_START)
    return True
