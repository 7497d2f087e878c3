"""Set-up of the worker processes of a ``LocalCluster`` that
:func:`~pssh.clients.cluster.connect_cluster` starts for ``"local:N"`` (a Dask
preload: ``dask_setup`` runs in each worker process as it starts).

These processes belong to the caller's process group, so a signal meant for
the caller reaches them too: Ctrl-C typed at a terminal, or the SIGTERM that
``timeout``, systemd and CI runners send to the whole group. SIGINT is the
caller's to handle (it stops the run through the scheduler when it means to),
so it is ignored here. SIGTERM stops every shard running here at once (their
commands stopped on the hosts); the process itself goes on until its cluster
is closed, which its caller, stopped by the same signal, does.
"""
from __future__ import annotations

import logging
import signal
import threading

log = logging.getLogger("pssh.cluster")


def dask_setup(worker) -> None:
    """Dask's preload hook: the signal handling above, where it can be set (the process's
    main thread)."""
    if threading.current_thread() is not threading.main_thread():
        log.warning("Dask worker %s: not in the main thread; signals are left as they are",
                    worker.address)
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_every_shard)


def _stop_every_shard(signum, frame) -> None:
    from pssh.clients.cluster.shard_task import stop_every_shard
    stop_every_shard()
