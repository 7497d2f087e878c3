"""The "run" job: the parallel client's per-host steps, done in a shard.

:mod:`pssh.fanout.run.shard` is the job's side in the worker (the hosts of one shard, run
with the ordinary gevent client); :mod:`pssh.fanout.run.hosts` and
:mod:`pssh.fanout.run.remote` are its side in the parent (the client's hosts handed to
the workers, and the commands running there as ``HostOutput`` here). Nothing is
imported here: the parent's side must not load the worker's, nor the other way round.
"""
