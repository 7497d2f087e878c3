"""Hosts run by :class:`pssh.clients.ParallelSSHClient`: in this process, or sharded over
worker processes (``--processes``) or Dask tasks (``--scheduler``), both through
:mod:`pssh.fanout`. Each host is one greenlet here, doing the host's work through
the client's per-host methods; a command's output streams to the pipeline line by
line as it comes, whatever runs it.
"""
from __future__ import annotations

import logging
import os
import posixpath
import time
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import gevent

from pssh import exceptions as exc
from pssh.cli import ping_view
from pssh.cli.failures import without_host
from pssh.cli.hosts import HostSpec, UsageError, file_name, labels
from pssh.cli.pipeline import INTERRUPTED, HostEvents, ended_without_status
from pssh.clients import ParallelSSHClient
from pssh.config import HostConfig
from pssh.core import lines
from pssh.core.lines import split_lines
from pssh.core.link import TURN_SLICE
from pssh.runners.gevent import TURN
from pssh.options import ConnectOptions
from pssh.output import HostOutput

log = logging.getLogger("pssh.cli")

#: Seconds a stopped run gives its commands to stop, and its transfers to clean up.
STOP_TIMEOUT = 10.0

#: (exit status, error, note) of one host's work.
Outcome = Tuple[Optional[int], Optional[str], Optional[str]]

#: The longest line shown whole (the library's line views' too): a host that sends no
#: newline is shown in pieces this long (said once per host), never held whole.
MAX_LINE = lines.MAX_LINE


def reason(err: BaseException) -> str:
    """What went wrong, for a listing by host."""
    if isinstance(err, exc.PSSHError):
        return err.reason
    return str(err) if isinstance(err, (OSError, ValueError)) \
        else f"{type(err).__name__}: {err}"


class ClientExecutor:
    """The :class:`~pssh.cli.pipeline.Executor` of the parallel client (``processes`` and
    ``scheduler`` as ``--processes`` and ``--scheduler`` say)."""

    def __init__(self, args, hosts: List[HostSpec], connect: ConnectOptions, config,
                 events: HostEvents) -> None:
        self.args = args
        self.events = events
        self.labels = labels(hosts, connect.port)  # as the pipeline names them
        scheduler = getattr(args, "scheduler", None)
        # The native runner unless told otherwise; the client hands the choice on to its
        # worker processes and Dask tasks (never through this process's environment: a
        # program may run the command line in its own process, then make clients of its own).
        runner = getattr(args, "runner", None) or os.environ.get("PSSH_RUNNER") or "native"
        try:
            self.client = ParallelSSHClient(
                [h.host for h in hosts], host_config=[HostConfig(user=h.user, port=h.port)
                                                      for h in hosts],
                pool_size=args.parallel, ssh_config=config, processes=args.processes,
                scheduler=scheduler, runner=runner, **connect.given())
        except ImportError:
            raise UsageError("--scheduler needs Dask: pip install 'pssh2[dask]' "
                             "(dask and distributed)") from None
        except OSError as err:  # no scheduler at that address
            raise UsageError(f"cannot reach the Dask scheduler {scheduler}: {err}") from None
        #: Hosts that may run again once if their Dask task is lost (--idempotent).
        self.again = set(range(len(hosts))) if getattr(args, "idempotent", False) else set()
        self.work = {"run": self._run, "copy": self._copy, "fetch": self._fetch,
                     "ping": self._ping}[args.subcommand]
        self.tasks: Dict[int, gevent.Greenlet] = {}
        self.commands: Dict[int, HostOutput] = {}  # commands started and not yet finished
        self.cancelled: Dict[int, exc.PSSHError] = {}  # why, for hosts stopped one by one
        #: The run is being stopped (:meth:`stop`): every command still running is ours to
        #: stop, so one that ends without an exit status was stopped, and says so.
        self.stopping = False

    # -- the executor ------------------------------------------------------------------

    def start(self, index: int) -> None:
        task = self.tasks[index] = gevent.spawn(self._host, index)
        task.link(self._task_gone)

    def _task_gone(self, task: gevent.Greenlet) -> None:
        """A host's greenlet has ended: one killed before it ran (-t, or the run stopped,
        before it was scheduled) finishes here."""
        index = next((i for i, t in self.tasks.items() if t is task), None)
        if index is not None:  # (otherwise it finished itself)
            del self.tasks[index]
            error = self.cancelled.pop(index, None) or task.exception
            self.events.finished(index, error=reason(error) if isinstance(error, Exception)
                                 else INTERRUPTED)

    def cancel(self, index: int, error: exc.PSSHError) -> None:
        task = self.tasks.get(index)
        if task is not None:
            self.cancelled[index] = error
            task.kill(block=False)  # GreenletExit: quiet even if it had not run yet

    def done_starting(self) -> None:
        pass

    def stop(self) -> None:
        self.stopping = True
        commands = list(self.commands.values())
        if commands:
            self.client.cancel(commands, timeout=STOP_TIMEOUT)
        # Waited for: a transfer cut short removes its partial file as it ends.
        tasks = list(self.tasks.values())
        gevent.killall(tasks, block=False)
        gevent.joinall(tasks, timeout=STOP_TIMEOUT)

    def close(self, now: bool = False) -> None:
        gevent.killall(list(self.tasks.values()), block=False)
        if now and self.args.processes:
            return  # the workers stop their commands themselves when this process ends
        self.client.close()  # (a Dask cluster started for the run included)

    # -- one host ----------------------------------------------------------------------

    def _host(self, index: int) -> None:
        exit_code = error = note = None
        try:
            exit_code, error, note = self._work(index)
        except gevent.GreenletExit:  # stopped: this host alone (-t ran out), or the run
            if index in self.cancelled:
                error = reason(self.cancelled.pop(index))
                self._give_up(index)
            else:
                exit_code, error = self._stopped_outcome(index)
        except Exception as err:  # a failure, or a bug: the host ends, never hangs
            error = reason(err)
            if not isinstance(err, (exc.PSSHError, OSError, ValueError)):
                log.error("%s: %s", self.client.hosts[index], error, exc_info=True)
            self._give_up(index)
        finally:
            self.tasks.pop(index, None)
            self.commands.pop(index, None)
        self.events.finished(index, exit_code, error, note)

    def _stopped_outcome(self, index: int) -> Tuple[Optional[int], Optional[str]]:
        """(exit status, error) of a host whose greenlet the run's stop ended: how its
        command ended if one had started (the stop cancelled it first), else
        :data:`~pssh.cli.pipeline.INTERRUPTED`."""
        output = self.commands.get(index)
        if output is None:
            return None, INTERRUPTED
        if output.finished and output.exit_code is not None:
            # It ended by itself, its status said, as the stop came: that is how it ended.
            return output.exit_code, None
        return None, ended_without_status(output.exit_signal, stopped=True)

    def _work(self, index: int) -> Outcome:
        try:
            return self.work(index)
        except exc.WorkerError as err:
            if index not in self.again:
                raise
            self.again.discard(index)  # once: its shard's worker was lost mid-run
            log.warning("%s: %s; running it again (--idempotent)", self.labels[index],
                        without_host(reason(err), self.labels[index]))
            self.commands.pop(index, None)
            return self.work(index)

    def _give_up(self, index: int) -> None:
        """After a failure: stop the command if it runs (e.g. -t ran out), and drop the
        host's connection (its session may be half-way through a call)."""
        unfinished = self.commands.pop(index, None)
        try:
            if unfinished is not None:
                self.client.cancel([unfinished], timeout=5)
            self.client.disconnect_host(index)
        except Exception as err:
            log.debug("%s: %s", self.client.hosts[index], err)

    def _run(self, index: int) -> Outcome:
        args = self.args
        output = self.client.run_host_command(index, args.command, sudo=args.sudo,
                                              cancellable=True)
        self.commands[index] = output
        self.events.command_started(index)

        said: List[bool] = []  # whether a long line was said (once per host)

        def split() -> None:
            if not said:
                said.append(True)
                log.warning("%s: a line longer than %d MiB: shown in pieces",
                            self.labels[index], MAX_LINE >> 20)

        failed: List[BaseException] = []

        def pump(stream, stderr: bool) -> None:
            try:
                chunks = stream.rw_buffer.chunks()
                if self.events.to_file(index, stderr):  # as it came: no lines, no decoding
                    for chunk in chunks:
                        self.events.data(index, chunk, stderr)
                    return
                lines = split_lines(chunks, MAX_LINE, split)
                for line in taking_turns(lines):
                    self.events.line(index, line.decode(output.encoding, "replace"), stderr)
            except Exception as err:  # the host's failure: raised below (gevent's hub
                failed.append(err)    # would print it as a crash), the other pump stops
                gevent.killall([p for p in pumps if p is not gevent.getcurrent()],
                               block=False)

        buffers = output.buffers
        assert buffers is not None  # a command that started (a failure was raised)
        # Input is written beside the reading of output, never before it: a command that
        # writes while it reads would otherwise fill its output window and stop reading.
        feeder = gevent.spawn(send_input, output, getattr(args, "input_data", None),
                              self.labels[index])
        pumps = [gevent.spawn(pump, buffers.stdout, False),
                 gevent.spawn(pump, buffers.stderr, True)]
        try:
            gevent.joinall(pumps)
        finally:
            gevent.killall(pumps + [feeder])
        if failed:
            raise failed[0]
        self.commands.pop(index, None)
        if output.exit_code is None:
            # Stopped by us: the run's stop, or -t (whose own error the pipeline keeps).
            stopped = self.stopping or index in self.cancelled
            return None, ended_without_status(output.exit_signal, stopped), None
        return output.exit_code, None, None

    def _ping(self, index: int) -> Outcome:
        """Connect and log in only; a failure says which kind it is."""
        started = time.monotonic()
        try:
            self.client.connect_host(index)
        except exc.PSSHError as err:
            raise exc.PSSHError(f"{_ping_problem(err)}: {err.reason}") from err
        return 0, None, ping_view.note(time.monotonic() - started)

    def _byte_counter(self, index: int):
        last = [0]

        def progress(done: int, total: int) -> None:
            # Called per file with bytes so far: a smaller count means the next file began.
            delta = done - last[0] if done >= last[0] else done
            last[0] = done
            self.events.transferred(index, delta)
        return progress

    def _copy(self, index: int) -> Outcome:
        # As scp: into the remote path if it is a directory, else to it.
        self.client.copy_file_to_host(index, self.args.local, self.args.remote,
                                      recurse=self.args.recursive,
                                      callback=self._byte_counter(index), into_directory=True)
        return None, None, None

    def _fetch(self, index: int) -> Outcome:
        args = self.args
        name = posixpath.basename(args.remote.rstrip("/")) or "root"
        local = os.path.join(args.local, file_name(self.labels[index]), name)
        try:
            self.client.copy_remote_file_from_host(index, args.remote, local,
                                                   recurse=args.recursive,
                                                   callback=self._byte_counter(index))
        except ValueError as err:  # the API's words name its keyword: say the flag
            if args.recursive or "is a directory" not in str(err):
                raise
            raise ValueError(f"{args.remote} is a directory: add -r to fetch it") from None
        return None, None, None


#: Bytes of input per write: each is one message to a worker process or Dask task, and a
#: small one lets the other hosts' messages through between them.
INPUT_PIECE = 64 * 1024


def send_input(output: HostOutput, data: Optional[bytes], label: str) -> None:
    """Write ``data`` (``-I``; None: nothing) to the command's standard input, then end
    it, as ssh does: a command that reads its input gets end of file, never waits for
    more. A command that exits without reading it all is no failure (nor is it for ssh)."""
    stdin = output.stdin
    try:
        if data:
            for start in range(0, len(data), INPUT_PIECE):
                stdin.write(data[start:start + INPUT_PIECE])
        stdin.close()
    except Exception as err:  # the command ended, or the connection did: output says so
        log.debug("%s: sending standard input: %s", label, err)


def taking_turns(items: Iterable) -> Iterator:
    """``items``, giving the loop a turn every :data:`~pssh.core.link.TURN_SLICE` seconds
    of work: a chunk of a flooding host holds tens of thousands of lines, and showing them
    all before anything else runs would hold up -t, signals and the other hosts."""
    turn_at = time.monotonic()
    for item in items:
        yield item
        now = time.monotonic()
        if now - turn_at >= TURN_SLICE:
            gevent.sleep(TURN)   # a timer: gevent.sleep(0) would not let timers run
            turn_at = time.monotonic()


def _ping_problem(err: BaseException) -> str:
    if isinstance(err, (exc.AuthenticationError, exc.PKeyFileError)):
        return "login refused"
    if isinstance(err, exc.HostKeyError):
        return "host key problem"
    if isinstance(err, (exc.ConnectionError, exc.UnknownHostError, exc.Timeout)):
        return "unreachable"
    return "failed"
