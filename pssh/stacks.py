"""``kill -USR1 PID``: a run that seems stuck says where each of its greenlets waits.

A pssh process (the command line, a worker process, a Dask worker of a ``local:N``
cluster) writes, on SIGUSR1, the stack of every greenlet and thread it has to its
standard error and goes on. Each host's work is a greenlet, so this shows what
every host is waiting for, which a debugger attached to the process (it sees
threads, not greenlets) cannot. The same as ``faulthandler`` gives for threads, for
a program built on gevent.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

SIGNAL = signal.SIGUSR1


def write_stacks(signum=None, frame=None) -> None:
    """Every greenlet's and thread's stack, to standard error."""
    from gevent.util import format_run_info
    try:
        text = "\n".join(format_run_info(thread_stacks=True, greenlet_stacks=True,
                                         current_thread_ident=threading.get_ident()))
        sys.stderr.write(f"---- pssh: stacks of process {os.getpid()} ({SIGNAL.name}) ----\n"
                         f"{text}\n---- end of stacks ----\n")
        sys.stderr.flush()
    except Exception as err:  # never let a diagnosis end the run
        sys.stderr.write(f"pssh: cannot write the stacks: {err}\n")


def install() -> bool:
    """Take SIGUSR1 for :func:`write_stacks` (in the main thread only, where signals
    can be set; False elsewhere). A handler someone else installed stays."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(SIGNAL) not in (signal.SIG_DFL, None):
        return False
    signal.signal(SIGNAL, write_stacks)
    return True


__all__ = ["install", "write_stacks"]
