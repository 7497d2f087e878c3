"""Spreading hosts over workers: one layer for every mode that does it.

Two transports carry a shard's messages, and know nothing of what runs there:

* :mod:`pssh.fanout.process`: worker processes on this machine, spawned as
  ``python -m pssh.fanout.worker`` and spoken to over a framed pipe
  (:mod:`pssh.fanout.frames`); every one belongs to a :class:`~pssh.fanout.process.ProcessGroup`,
  a ``with`` scope that stops and reaps them all when it ends.
* :mod:`pssh.fanout.dask`: tasks on a Dask ``distributed`` cluster, spoken to
  through Dask queues (``pip install .[dask]``).

Which one a mode uses (``processes=N`` or ``scheduler=``), and how many shards its
hosts make there, is :func:`pssh.fanout.groups.group_for`'s one rule.

What runs in a shard is a *job*, which knows nothing of the transport: a
function ``serve(link, init)`` that talks to its parent through a
:class:`~pssh.fanout.link.Link`. Two jobs: :mod:`pssh.fanout.run` (the parallel
client's per-host steps, for ``ParallelSSHClient(processes=N)`` and
``pssh run/copy/fetch --processes``) and :mod:`pssh.fanout.poll` (one shard of a
:class:`~pssh.poll.shards.ShardedPoller`). Both transports share one signal policy
(:mod:`pssh.fanout.signals`).

What it may import: gevent, the standard library, and (the jobs only) the layers
whose work they run: :mod:`pssh.clients` and :mod:`pssh.poll`. The transports import
no job, and no job imports a transport.
"""
