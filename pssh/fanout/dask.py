"""The Dask transport: shards as tasks on a Dask ``distributed`` cluster, spoken to
through Dask queues (``pip install .[dask]``).

Each task has a control queue (the parent's messages to it); every task of a group
puts its messages, tagged with its number, on the group's one report queue. Messages
are pickled tuples (Dask queues carry msgpack, and warn for each object they must
pickle). Dask's calls wait, so both sides make them in threads of their own (gevent's
thread pool) and look at their queue without waiting there (a timed-out wait is an
error in the scheduler's log): more often while messages come.

A task says where it runs first (``hello``). Dask runs a task again when the worker
running it is lost; the second attempt finds the first one's mark (a Dask event), says
so (``lost``) and ends at once: the parent's handle on the task is then gone, as a
worker process that died, and what it ran is the parent's to run again (or not).

The parent says ``alive`` every :data:`HEARTBEAT` seconds: a task that hears nothing
for :data:`CALLER_LOST` seconds ends as if told to (a parent killed outright leaves
nothing running). A :class:`DaskGroup` is a ``with`` scope: leaving it tells its
tasks to end, cancels those not done by the deadline, and closes the client (and the
``local:N`` cluster it started, if it did).

The worker processes of a ``local:N`` cluster load this module as a preload
(:func:`dask_setup`): they take :mod:`pssh.fanout.signals`' policy, a SIGTERM telling
every task running there to stop its work.
"""
from __future__ import annotations

import contextlib
import logging
import pickle
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import gevent

from pssh.fanout.link import WorkerGone, load_job
from pssh.fanout.signals import install_worker_policy

log = logging.getLogger("pssh.fanout.dask")

#: Seconds between the parent's ``alive`` messages, and the silence that ends a task.
HEARTBEAT, CALLER_LOST = 5.0, 30.0
#: Seconds between looks at an idle queue: from the first to the last.
POLL_FIRST, POLL_LAST = 0.01, 0.25
#: Seconds a closing group gives its tasks to end before cancelling them.
CLOSE_TIMEOUT = 15.0
#: Seconds between looks at the cluster's workers, for the tasks of workers lost.
LOST_CHECK = 1.0

#: Set in a worker process told to terminate: every task there stops its work.
_TERMINATED = threading.Event()


def dask_setup(worker) -> None:
    """Dask's preload hook, run in each worker process of a ``local:N`` cluster."""
    install_worker_policy(_TERMINATED.set, hub=False)


def terminated() -> bool:
    """Whether this Dask worker process was told to terminate (SIGTERM)."""
    return _TERMINATED.is_set()


def pickled(message: tuple) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Logger ``name`` says only errors meanwhile, unless asked for more (its level below
    WARNING: ``-v``). For the close of a local cluster pssh started: on a loaded machine
    its nannies warn that a worker process took over 4 s to exit and was killed, which is
    nothing to a user who never saw those processes."""
    logger = logging.getLogger(name)
    level = logger.level
    if logger.getEffectiveLevel() >= logging.WARNING:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def connect_cluster(scheduler) -> Tuple[Any, Any]:
    """(a Dask client, the cluster started for it or None): ``scheduler`` is a
    ``distributed.Client``, an address (``tcp://host:8786``), or ``local:N`` for a
    ``LocalCluster`` of N worker processes started here."""
    from distributed import Client, LocalCluster
    if isinstance(scheduler, Client):
        return scheduler, None
    if isinstance(scheduler, str) and scheduler.startswith("local:"):
        workers = int(scheduler.split(":", 1)[1] or 1)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0",  # no clash with another cluster's
                               preload=[__name__])
        return Client(cluster), cluster
    return Client(scheduler), None


def cluster_workers(client) -> Dict[str, dict]:
    """The workers of ``client``'s cluster now, by address, asked of the scheduler.

    Not ``Client.scheduler_info()``: that returns the client's cached copy, which the
    client's own refresh (every 2 s) replaces with one that lists no worker (distributed
    2025 and later refresh the totals only). A look that read the cache just after a
    refresh found every worker gone, and every task was failed as lost with its worker.
    """
    return client.sync(client.scheduler.identity)["workers"]


def control_name(run_id: str, number: int) -> str:
    """The queue of the parent's messages to task ``number``."""
    return f"pssh-{run_id}-{number}-control"


def report_name(run_id: str) -> str:
    """The queue of every task's messages to the parent."""
    return f"pssh-{run_id}"


# -- in the task ----------------------------------------------------------------------

class QueueLink:
    """The :class:`~pssh.fanout.link.Link` of a Dask task: its control queue in, the
    group's report queue out."""

    def __init__(self, run_id: str, number: int) -> None:
        from distributed import Queue
        self.number = number
        self.reports = Queue(report_name(run_id))
        self.control = Queue(control_name(run_id, number))
        self.threads = gevent.get_hub().threadpool  # Dask's calls wait there
        self._pending: List[tuple] = []
        self._on_terminate: List[Callable[[], None]] = []
        self._terminated = False
        self.closed = False

    def send(self, message: tuple) -> None:
        self.report("job", message)

    def report(self, kind: str, payload: Any) -> None:
        """Put ``payload`` on the report queue as this task's message of ``kind``: "job"
        (the job's messages), or the transport's own ("hello": where it runs; "lost")."""
        try:
            self.threads.apply(self.reports.put, (pickled((self.number, kind, payload)),))
        except Exception as err:  # the scheduler is gone: nobody reads any more
            raise OSError(f"the Dask scheduler is gone: {err}") from err

    def flush(self) -> None:
        pass  # a put has left when it returns

    def on_terminate(self, callback: Callable[[], None]) -> None:
        self._on_terminate.append(callback)

    def receive(self) -> Optional[tuple]:
        pause, heard = POLL_FIRST, time.monotonic()
        while not self._pending:
            if self.closed:
                return None
            try:
                messages = self.threads.apply(self.control.get, (None, True))  # no wait
            except Exception as err:
                log.warning("task %s: the Dask scheduler is gone (%s): ending", self.number,
                            err)
                self.closed = True
                return None
            now = time.monotonic()
            if terminated() and not self._terminated:  # (looked at however busy it is)
                self._terminated = True
                log.warning("task %s: this worker process was told to stop", self.number)
                for callback in self._on_terminate:
                    gevent.spawn(callback)
            self._pending = [pickle.loads(m) for m in messages]
            self._pending = [m for m in self._pending if m != ("alive",)]
            if messages:
                pause, heard = POLL_FIRST, now
                continue
            if now - heard > CALLER_LOST:
                log.warning("task %s: no word from the parent for %.0f s: ending",
                            self.number, now - heard)
                self.closed = True
                return None
            gevent.sleep(pause)
            pause = min(POLL_LAST, pause * 2)
        message = self._pending.pop(0)
        if message == ("close",):
            self.closed = True
            return None
        return message


def run_task(job: str, init: Any, run_id: str, number: int) -> int:
    """What a Dask worker runs: ``job`` with ``init``, linked to its parent; returns the
    task's number."""
    import socket

    from distributed import Event, get_worker, secede
    # A shard is a service that mostly waits on its hosts, for as long as its client
    # lives: out of the worker's thread pool, it leaves the slot to other tasks, such as
    # the one that takes over the shard of a worker that was lost (otherwise that one
    # would wait for a free thread for ever).
    secede()
    link = QueueLink(run_id, number)
    first = Event(f"{control_name(run_id, number)}-started")
    if first.is_set():  # an earlier attempt's worker was lost
        log.warning("task %s: its first worker was lost: ending", number)
        link.report("lost", ())
        return number
    first.set()
    link.report("hello", f"{get_worker().address} ({socket.gethostname()})")
    load_job(job)(link, init)
    return number


# -- in the parent --------------------------------------------------------------------

class DaskTask:
    """The parent's handle on one task: ``send`` to it; its messages go to
    ``on_message``, and ``on_gone(why)`` is called once it has ended."""

    def __init__(self, group: "DaskGroup", number: int, future: Any, control: Any,
                 on_message: Callable[[tuple], None], on_gone: Callable[[str], None]) -> None:
        self.group, self.number, self.future, self.control = group, number, future, control
        self.on_message, self.on_gone = on_message, on_gone
        self.error: Optional[str] = None
        self.closing = False  # told to end: its end is no news
        #: Where it runs (the Dask worker's address and host name), once it has said.
        self.where: Optional[str] = None

    @property
    def alive(self) -> bool:
        return self.error is None

    def send(self, message: tuple) -> None:
        """Send one message; :class:`WorkerGone` if the task is gone."""
        if self.error is not None:
            raise WorkerGone(self.error)
        try:
            self.group.threads.apply(self.control.put, (pickled(message),))
        except Exception as err:
            raise WorkerGone(f"cannot be reached through Dask ({err})") from err

    def ask_to_end(self) -> None:
        self.closing = True
        try:
            self.send(("close",))
        except WorkerGone:
            pass

    def _gone(self, why: str) -> None:
        if self.error is None:
            self.error = why
            self.on_gone(why)


class DaskGroup:
    """The tasks of one scope on the cluster at ``scheduler`` (see :func:`connect_cluster`):
    ``with DaskGroup(scheduler) as group:``; every task :meth:`start` makes is ended when
    the scope ends (or at :meth:`close`), and the client closed if made here (with its
    cluster, if started here; a ``distributed.Client`` given stays open)."""

    def __init__(self, scheduler: Any, close_timeout: float = CLOSE_TIMEOUT) -> None:
        from distributed import Queue
        self.threads = gevent.get_hub().threadpool
        self.client, self.cluster = self.threads.apply(connect_cluster, (scheduler,))
        self._own_client = self.client is not scheduler  # a client given stays open
        self.close_timeout = close_timeout
        self.run_id = uuid.uuid4().hex[:12]
        self.reports = Queue(report_name(self.run_id), client=self.client)
        self.tasks: Dict[int, DaskTask] = {}
        self.closed = False
        self._receiver = gevent.spawn(self._receive)
        self._heartbeat = gevent.spawn(self._beat)

    def workers(self) -> Dict[str, dict]:
        """The cluster's workers now, by address (see :func:`cluster_workers`)."""
        return self.threads.apply(cluster_workers, (self.client,))

    def worker_threads(self) -> int:
        """How many tasks the cluster runs at once (its workers' threads)."""
        return sum(w.get("nthreads", 1) for w in self.workers().values())

    def start(self, label: str, job: str, init: Any, on_message: Callable[[tuple], None],
              on_gone: Callable[[str], None], **placement: Any) -> DaskTask:
        """A new task running ``job`` with ``init``, owned by this group; ``placement``:
        where it may run, as keywords of Dask's ``submit`` (``resources={"dc2": 1}``: only
        on workers that have that resource)."""
        from distributed import Queue
        if self.closed:
            raise RuntimeError("this DaskGroup is closed: it starts no more tasks")
        number = len(self.tasks)
        control = Queue(control_name(self.run_id, number), client=self.client)
        future = self.threads.apply(self.client.submit, (run_task, job, init, self.run_id,
                                                         number),
                                    dict(placement, key=f"pssh-{self.run_id}-{number}",
                                         pure=False))
        task = self.tasks[number] = DaskTask(self, number, future, control, on_message,
                                             on_gone)
        log.debug("%s: Dask task %s", label, future.key)
        return task

    def _receive(self) -> None:
        """Hand each task's messages on; note the tasks that have ended."""
        pause, looked = POLL_FIRST, time.monotonic()
        while True:
            if time.monotonic() - looked > LOST_CHECK:
                self._look_for_lost_workers()
                looked = time.monotonic()
            # Ended before this look at the queue: everything they sent is in it.
            ended = [t for t in self.tasks.values() if t.error is None
                     and t.future.status in ("error", "cancelled", "finished")]
            try:
                messages = self.threads.apply(self.reports.get, (None, True))  # no wait
            except Exception as err:
                log.error("the Dask run failed: %s", err)
                for failed in self.tasks.values():
                    failed._gone(f"the Dask run failed: {err}")
                return
            for raw in messages:
                number, kind, message = pickle.loads(raw)
                task = self.tasks.get(number)
                if task is None or task.error is not None:
                    continue
                if kind == "job":
                    try:
                        task.on_message(message)
                    except Exception:  # a bug there must not leave everything waiting
                        log.exception("task %s: bad message %.200r", number, message)
                elif kind == "hello":
                    task.where = message
                else:  # "lost": its attempt ran on a worker that was lost
                    task._gone(f"was lost with its Dask worker {task.where or ''}".strip())
            for task in ended:
                status = task.future.status
                task._gone("closed" if task.closing else "ended" if status == "finished" else
                           f"its Dask task failed: {task.future.exception()}"
                           if status == "error" else "its Dask task was cancelled")
            pause = POLL_FIRST if messages else min(POLL_LAST, pause * 2)
            gevent.sleep(pause)

    def _look_for_lost_workers(self) -> None:
        """A task whose Dask worker has left the cluster is gone (Dask may run it again
        elsewhere: that attempt says ``lost`` and ends)."""
        # By its worker's address (``where`` is "address (host name)").
        running = {t: t.where.split()[0] for t in self.tasks.values()
                   if t.error is None and t.where}
        if not running:
            return
        try:
            workers = self.workers()
        except Exception as err:  # the scheduler is gone: the receiving says so
            log.debug("cannot see the cluster's workers: %s", err)
            return
        for task, address in running.items():
            if address not in workers:
                task._gone(f"was lost with its Dask worker {address}")

    def _beat(self) -> None:
        while True:
            gevent.sleep(HEARTBEAT)
            for task in list(self.tasks.values()):
                if task.error is None:
                    try:
                        task.send(("alive",))
                    except WorkerGone:
                        pass

    def stop(self, tasks: List[DaskTask], timeout: Optional[float] = None) -> None:
        """End these tasks: told to, and cancelled if still there after ``timeout``."""
        deadline = time.monotonic() + (self.close_timeout if timeout is None else timeout)
        for task in tasks:
            task.ask_to_end()
        while any(t.error is None for t in tasks) and time.monotonic() < deadline:
            gevent.sleep(POLL_LAST)
        for task in tasks:
            task._gone("closed")
            try:
                self.threads.apply(task.future.cancel)
                self.threads.apply(task.control.close)
            except Exception as err:
                log.debug("task %s: %s", task.number, err)

    def close(self, timeout: Optional[float] = None) -> None:
        """End every task (told to; cancelled if still there at the deadline); close the
        queues and the client, and the cluster if it was started here."""
        if self.closed:
            return
        self.closed = True
        self.stop(list(self.tasks.values()), timeout)
        self._heartbeat.kill()
        self._receiver.kill()
        try:
            self.threads.apply(self.reports.close)
            if self._own_client:
                self.threads.apply(self.client.close)
            if self.cluster is not None:
                with _quiet("distributed.nanny"):
                    self.threads.apply(self.cluster.close)
        except Exception as err:
            log.warning("closing the Dask client: %s", err)

    def __enter__(self) -> "DaskGroup":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
