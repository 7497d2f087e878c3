"""pssh.fanout's worker-process transport on its own: the with-scoped group, the worker's
main and the signal policy, with jobs of the tests' own (tests/fanout_jobs.py)."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from gevent.queue import Queue

from pssh.fanout.link import WorkerGone
from pssh.fanout.process import ProcessGroup
from processes import alive, children_running
from waiting import gone


def start(group, job, init="hi"):
    """(the worker, its messages, how it ended) for ``job`` started in ``group``."""
    messages, ended = Queue(), Queue()
    worker = group.start("test worker", f"fanout_jobs:{job}", init, messages.put, ended.put)
    assert messages.get(timeout=60) == ("ready", init)
    return worker, messages, ended


def reaped(pid: int) -> bool:
    """Whether ``pid`` is gone for good: not running, not a zombie waiting to be reaped."""
    return not os.path.exists(f"/proc/{pid}")


def test_a_worker_answers_and_the_scope_reaps_it_when_an_exception_leaves_it():
    with pytest.raises(RuntimeError):
        with ProcessGroup() as group:
            worker, messages, ended = start(group, "echo")
            worker.send(("ping", 1))
            assert messages.get(timeout=30) == ("echo", "ping", 1)
            raise RuntimeError("the scope ends by an exception")
    assert ended.get(timeout=1) == "closed"
    assert reaped(worker.pid) and worker.popen.returncode == 0
    with pytest.raises(WorkerGone):
        worker.send(("ping", 2))
    with pytest.raises(RuntimeError):
        group.start("late", "fanout_jobs:echo", None, print, print)  # the group is closed


def test_a_worker_whose_job_cannot_be_sent_is_ended_at_once():
    """An init that cannot be pickled: the start fails, and the worker it spawned is
    killed and reaped there (nothing else holds it)."""
    with ProcessGroup() as group:
        with pytest.raises(Exception, match="pickle|Pickl"):
            group.start("test worker", "fanout_jobs:echo", lambda: None, print, print)
        assert children_running(os.getpid(), "pssh.fanout.worker") == []


def test_a_worker_that_does_not_end_is_killed_when_the_deadline_passes():
    with ProcessGroup(close_timeout=1) as group:
        worker, _, ended = start(group, "stubborn")
    assert worker.popen.returncode == -signal.SIGKILL and reaped(worker.pid)
    assert ended.get(timeout=1) == "closed"


def test_a_dead_worker_is_reported_with_how_it_ended():
    with ProcessGroup() as group:
        worker, _, ended = start(group, "echo")
        os.kill(worker.pid, signal.SIGKILL)
        assert ended.get(timeout=30) == "was killed by signal 9"
        assert not worker.alive


def test_a_worker_ignores_sigint_and_takes_sigterm_as_stop_your_work():
    with ProcessGroup() as group:
        worker, messages, _ = start(group, "echo")
        os.kill(worker.pid, signal.SIGINT)  # the parent's to handle (Ctrl-C at a terminal)
        worker.send(("still there",))
        assert messages.get(timeout=30) == ("echo", "still there")
        os.kill(worker.pid, signal.SIGTERM)
        assert messages.get(timeout=30) == ("terminated",)
        worker.send(("after SIGTERM",))  # it goes on serving its parent
        assert messages.get(timeout=30) == ("echo", "after SIGTERM")
    assert reaped(worker.pid) and not alive(worker.pid)


PARENT_KILLED = textwrap.dedent("""
    import os, signal
    from gevent.queue import Queue
    from pssh.fanout.process import ProcessGroup
    group = ProcessGroup()
    messages = Queue()
    worker = group.start("w", "fanout_jobs:echo", None, messages.put, lambda why: None)
    assert messages.get(timeout=60) == ("ready", None)  # its job runs, serving this parent
    print(worker.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no scope ends: nothing is closed
""")


def test_a_parent_killed_outright_ends_its_workers(tmp_path):
    program = tmp_path / "parent.py"
    program.write_text(PARENT_KILLED)
    parent = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                            timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                p for p in sys.path if p)))
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    pid = int(parent.stdout)
    assert gone(lambda: [pid] if alive(pid) else [], what="the orphaned worker") == []
