"""One worker process of the sharded client: started, talked to over a framed pipe, closed.

Imported when a sharded client starts its first worker, not with :mod:`pssh.clients`
(subprocess and pickle are start-up most programs do not need).
"""
from __future__ import annotations

import itertools
import logging
import os
import sys
from typing import Callable, Dict, List, Optional, Tuple

import gevent
from gevent import subprocess
from gevent.event import AsyncResult

from pssh import exceptions as exc
from pssh.clients.sharded.frames import FramedPipe
from pssh.clients.sharded.remote import RemoteCommand

log = logging.getLogger("pssh.sharded")

#: Seconds a worker is given to stop its commands and exit when the client closes.
CLOSE_TIMEOUT = 15.0


class WorkerProcess:
    """One worker process: its pipe, the requests waiting for an answer, its commands."""

    def __init__(self, number: int, hosts: List[Tuple[int, str]], init: tuple) -> None:
        self.number = number
        self.hosts = dict(hosts)  # the client's host index -> host name
        worker_stdin, to_worker = os.pipe()
        from_worker, worker_stdout = os.pipe()
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "pssh.clients.sharded.worker"], stdin=worker_stdin,
                stdout=worker_stdout, env=_worker_environment(), close_fds=True)
        except BaseException:
            for fd in (to_worker, from_worker):
                os.close(fd)
            raise
        finally:
            os.close(worker_stdin)
            os.close(worker_stdout)
        self.pid = self.popen.pid
        self.pipe = FramedPipe(from_worker, to_worker)
        self._ids = itertools.count()
        self._waiting: Dict[int, Tuple[AsyncResult, Optional[str]]] = {}
        self._progress: Dict[int, Callable] = {}
        #: The commands it runs, by id (the id of the request that started each).
        self.commands: Dict[int, RemoteCommand] = {}
        self.error: Optional[str] = None  # why it is gone, once it is
        self._closing = False
        self.send(("init",) + init)
        self._reader = gevent.spawn(self._read)
        log.debug("worker %d (pid %d) runs %d hosts", number, self.pid, len(self.hosts))

    @property
    def alive(self) -> bool:
        return self.error is None

    def new_id(self) -> int:
        return next(self._ids)

    def send(self, message: tuple, host: Optional[str] = None) -> None:
        """Send one message; :class:`~pssh.exceptions.WorkerError` (naming ``host``) if the
        worker is gone."""
        if self.error is None:
            try:
                return self.pipe.send(message)
            except OSError:
                self._gone(_how_it_ended(self.popen))
        raise self.lost_error(host)

    def request(self, kind: str, *args, host: Optional[str] = None,
                request_id: Optional[int] = None, progress=None):
        """Send ``(kind, id, *args)`` and wait for its answer (its error is raised here);
        ``progress(*values)`` is called with each progress report the request makes."""
        request_id = self.new_id() if request_id is None else request_id
        result = AsyncResult()
        self._waiting[request_id] = (result, host)
        if progress is not None:
            self._progress[request_id] = progress
        try:
            self.send((kind, request_id) + args, host)
            return result.get()
        finally:
            self._waiting.pop(request_id, None)
            self._progress.pop(request_id, None)

    def _read(self) -> None:
        """Hand each message to what waits for it, until the worker is gone. Nothing here
        may end this loop early: every wait on the worker depends on it."""
        try:
            while (message := self.pipe.receive()) is not None:
                try:
                    self._dispatch(*message)
                except Exception:  # a bug here must not leave every host waiting forever
                    log.exception("worker process %s: bad message %.200r", self.number,
                                  message)
            why = "closed" if self._closing else _how_it_ended(self.popen)
        except Exception as err:
            why = f"could not be read from ({err})"
        self._gone(why)

    def _dispatch(self, kind: str, key: int, *rest) -> None:
        if kind in ("data", "eof", "status", "exit", "lost"):
            command = self.commands.pop(key) if kind in ("exit", "lost") \
                else self.commands.get(key)
            if command is not None:
                getattr(command, "on_" + kind)(*rest)
        elif kind == "progress":
            report = self._progress.get(key)
            if report is not None:
                report(*rest)
        elif kind == "log":  # the worker's log record, logged here as if logged here
            record = logging.makeLogRecord(rest[0])
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)
        else:
            waiting = self._waiting.get(key)
            if waiting is not None:
                if kind == "done":
                    waiting[0].set(rest[0])
                else:
                    waiting[0].set_exception(rest[0])

    def _gone(self, why: str) -> None:
        """The worker is gone: everything still waiting on it fails, naming its host."""
        if self.error is not None:
            return
        self.error = why
        self.pipe.close()
        if why != "closed":
            log.error("worker process %s (pid %s) %s", self.number, self.pid, why)
        for result, host in list(self._waiting.values()):
            result.set_exception(self.lost_error(host))
        for command in self.commands.values():
            command.on_lost(self.lost_error(command.host))
        self.commands.clear()

    def lost_error(self, host: Optional[str]) -> exc.WorkerError:
        if host is None:
            return exc.WorkerError("worker process %s (pid %s) is gone: it %s", self.number,
                                   self.pid, self.error)
        return exc.WorkerError("%s: worker process %s (pid %s) %s before the work on this "
                               "host was done", host, self.number, self.pid, self.error,
                               host=host)

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Ask the worker to stop its commands and exit; kill it if it does not in time."""
        self._closing = True
        if self.error is None:
            try:
                self.pipe.send(("close",))
            except OSError:
                pass
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("worker process %s (pid %s) did not exit: killed", self.number,
                        self.pid)
            self.popen.kill()
            self.popen.wait()
        self._reader.join(1)
        self._gone("closed")


def _how_it_ended(popen) -> str:
    try:
        code = popen.wait(5)
    except subprocess.TimeoutExpired:
        return "closed its pipe"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _worker_environment() -> dict:
    """This environment, with this process's module path as the workers' path: they
    import the very ssh2 and pssh this process runs, whatever their current directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path
                                        if p and os.path.isdir(p))
    return env


__all__ = ["CLOSE_TIMEOUT", "WorkerProcess"]
