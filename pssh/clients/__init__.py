"""The gevent front end: parallel-ssh's API as a shell over the session core.

:class:`SSHClient` for one host, :class:`ParallelSSHClient` for many
(``processes=N`` shards them over worker processes, through :mod:`pssh.fanout`;
:mod:`pssh.clients.cluster` spreads a run over a Dask cluster). What this package
owns is parallel-ssh's API: its classes, method names and overridable steps,
``HostOutput``, its buffers and greenlet pools; every SSH procedure it runs is the
core's (:mod:`pssh.core`), driven by the gevent runner (:mod:`pssh.runners.gevent`).

What it may import: the core, the gevent runner, gevent, ``ssh2`` (its constants and
classes that parallel-ssh's API exposes), :mod:`pssh.fanout` (its transports and the
parent's side of its "run" job, for ``processes=N``); never :mod:`pssh.aio` or
:mod:`pssh.cli`.
"""
from pssh.clients.native import ParallelSSHClient, SSHClient

__all__ = ["ParallelSSHClient", "SSHClient"]
