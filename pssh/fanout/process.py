"""The worker-process transport: ``python -m pssh.fanout.worker`` processes, each spoken to
over a framed pipe (its stdin and stdout), owned by a :class:`ProcessGroup`.

The group is a ``with`` scope, as a nursery: leaving it, normally or by an exception,
asks every worker it started to end, waits for them until a deadline, kills the ones
still there (SIGKILL) and reaps them all. No worker outlives its scope; a parent killed
outright closes its workers' input, which ends them too.

Imported when the first worker starts, not with :mod:`pssh.clients` (subprocess and
pickle are start-up most programs do not need).
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, List, Optional, Union

import gevent
from gevent import subprocess

from pssh.fanout.frames import FramedPipe
from pssh.fanout.link import WorkerGone
from pssh.fanout.signals import held_for_a_new_worker

log = logging.getLogger("pssh.fanout")

#: Seconds a group gives its workers to end (their commands stopped) before killing them.
CLOSE_TIMEOUT = 15.0
#: The module a worker process runs (``python -m``): tests find workers by it.
WORKER_MODULE = "pssh.fanout.worker"

OnMessage = Callable[[tuple], None]
OnGone = Callable[[str], None]


def worker_count(processes: Union[int, str], hosts: int) -> int:
    """How many workers ``processes`` asks for (``"auto"``: one per usable core), never
    more than there are hosts."""
    if processes == "auto":
        wanted = len(os.sched_getaffinity(0))
    else:
        try:
            wanted = int(processes)
        except (TypeError, ValueError):
            raise ValueError(f"processes must be a number or 'auto', not {processes!r}") \
                from None
        if wanted < 1:
            raise ValueError(f"processes must be at least 1, not {wanted}")
    return max(1, min(wanted, hosts))


class WorkerProcess:
    """One worker process running ``job`` (``"module:function"``) with ``init``. Each
    message it sends goes to ``on_message``; once it is gone (ended, killed, closed),
    ``on_gone(why)`` is called, once."""

    def __init__(self, label: str, job: str, init: Any, on_message: OnMessage,
                 on_gone: OnGone) -> None:
        self.label = label
        worker_stdin, to_worker = os.pipe()
        from_worker, worker_stdout = os.pipe()
        try:
            with held_for_a_new_worker():
                self.popen = subprocess.Popen([sys.executable, "-m", WORKER_MODULE],
                                              stdin=worker_stdin, stdout=worker_stdout,
                                              env=worker_environment(), close_fds=True)
        except BaseException:
            for fd in (to_worker, from_worker):
                os.close(fd)
            raise
        finally:
            os.close(worker_stdin)
            os.close(worker_stdout)
        self.pid = self.popen.pid
        self.pipe = FramedPipe(from_worker, to_worker)
        self.error: Optional[str] = None  # how it ended, once it has
        self._closing = False
        self._on_message, self._on_gone = on_message, on_gone
        # Made here, started once the job is sent: a send that fails leaves no reader.
        self._reader = gevent.Greenlet(self._read)
        try:
            self.pipe.send(("job", job, init))
        except BaseException:
            # The worker never got its job: nobody else holds it, so it ends here.
            self.error = "its job could not be sent"
            self.pipe.close()
            self.popen.kill()
            self.popen.wait()
            raise
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self.error is None

    def send(self, message: tuple) -> None:
        """Send one message; :class:`WorkerGone` if the worker is gone."""
        if self.error is None:
            try:
                return self.pipe.send(message)
            except OSError:
                self._gone(how_it_ended(self.popen))
        raise WorkerGone(self.error or "gone")

    def _read(self) -> None:
        """Hand each message on until the worker is gone. Nothing here may end this loop
        early: every wait on the worker depends on it."""
        try:
            while (message := self.pipe.receive()) is not None:
                try:
                    self._on_message(message)
                except Exception:  # a bug there must not leave everything waiting
                    log.exception("%s: bad message %.200r", self.label, message)
            why = "closed" if self._closing else how_it_ended(self.popen)
        except Exception as err:
            why = f"could not be read from ({err})"
        self._gone(why)

    def _gone(self, why: str) -> None:
        if self.error is not None:
            return
        self.error = why
        if self._reader is not gevent.getcurrent():
            self._reader.kill()  # its wait on the pipe ends before the pipe is closed
        self.pipe.close()
        self._on_gone(why)

    def ask_to_end(self) -> None:
        """Tell the worker to end its job (it stops its work, sends what it holds, exits)."""
        self._closing = True
        if self.error is None:
            try:
                self.pipe.send(("close",))
            except OSError:
                pass

    def reap(self, deadline: float) -> None:
        """Wait for the worker to exit until ``deadline`` (monotonic), then kill it; either
        way it is reaped here, and its messages read to the end."""
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %s) did not exit: killed", self.label, self.pid)
            self.popen.kill()
            self.popen.wait()
        self._reader.join(1)
        self._closing = True
        self._gone("closed")

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """:meth:`ask_to_end`, then :meth:`reap` within ``timeout`` seconds."""
        self.ask_to_end()
        self.reap(time.monotonic() + timeout)


class ProcessGroup:
    """The worker processes of one scope: ``with ProcessGroup() as group:``; every worker
    :meth:`start` makes is stopped and reaped when the scope ends (or at :meth:`close`)."""

    def __init__(self, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.close_timeout = close_timeout
        self.workers: List[WorkerProcess] = []
        self.closed = False

    def start(self, label: str, job: str, init: Any, on_message: OnMessage,
              on_gone: OnGone, **placement: Any) -> WorkerProcess:
        """A new worker running ``job`` (see :class:`WorkerProcess`), owned by this group.
        A worker process runs on this machine: there is no ``placement`` (where a Dask task
        may run) to choose, and one given is refused."""
        if placement:
            raise TypeError(f"a worker process takes no placement: {sorted(placement)}")
        if self.closed:
            raise RuntimeError("this ProcessGroup is closed: it starts no more workers")
        worker = WorkerProcess(label, job, init, on_message, on_gone)
        # Workers that ended by themselves and were reaped need no more of the group.
        self.workers = [w for w in self.workers if w.alive or w.popen.returncode is None]
        self.workers.append(worker)
        log.debug("%s: pid %d", label, worker.pid)
        return worker

    def stop(self, workers: List[WorkerProcess], timeout: Optional[float] = None) -> None:
        """End these workers of the group (all at once, within ``timeout``) and forget
        them."""
        deadline = time.monotonic() + (self.close_timeout if timeout is None else timeout)
        for worker in workers:
            worker.ask_to_end()
        gevent.joinall([gevent.spawn(w.reap, deadline) for w in workers])
        self.workers = [w for w in self.workers if w not in workers]

    def close(self, timeout: Optional[float] = None) -> None:
        """End every worker still there; the group starts no more."""
        self.closed = True
        self.stop(list(self.workers), timeout)

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def how_it_ended(popen) -> str:
    try:
        code = popen.wait(5)
    except subprocess.TimeoutExpired:
        return "closed its pipe"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


def worker_environment() -> dict:
    """This environment, with this process's module path as the workers' path: they
    import the very ssh2 and pssh this process runs, whatever their current directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path
                                        if p and os.path.isdir(p))
    return env
