"""Whether the files a login reads changed: one ``stat`` per file for a burst of logins.

Key files, known_hosts and ssh_config files are parsed once and kept while they stay as they
are (:mod:`pssh.core.keys`, :mod:`pssh.core.known_hosts`, :mod:`pssh.core.ssh_config`); each
use asks the kernel whether they still are. A client marks the span of its log-in with
:func:`logins`; while any log-in of this thread is in such a span, a file's status is asked
for once and then reused, so that a fan-out to 500 hosts stats the key file and its folder
once per run instead of three times per host. The status is forgotten as soon as no log-in
of the thread is under way, so the next run sees a file replaced in between, and after
:data:`MAX_AGE` seconds even within a span, so that logins that keep a span open (a dead host
retried for minutes beside a program's other connections) still see a file change within a
second.

What decides whether a host is trusted never uses a reused status: the host key check reads
known_hosts' status afresh for every host (:func:`pssh.core.known_hosts.verify_host_key`), so
a line added or revoked by another thread, greenlet or process is seen by the next check.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Dict, Iterator, Tuple, Union

__all__ = ["MAX_AGE", "forget", "logins", "stat"]

#: Seconds a status is reused within a span of log-ins.
MAX_AGE = 1.0


class _Memo:
    """One thread's open spans and the statuses asked for in them."""

    __slots__ = ("open", "seen")

    def __init__(self) -> None:
        self.open = 0
        #: absolute path -> (when it was asked for, the status or the error)
        self.seen: Dict[str, Tuple[float, Union[os.stat_result, OSError]]] = {}


_local = threading.local()


def _memo() -> _Memo:
    try:
        return _local.memo
    except AttributeError:
        memo = _local.memo = _Memo()
        return memo


def _reset() -> None:
    # A child forked while a log-in was under way must not keep its span open for ever.
    _local.memo = _Memo()


os.register_at_fork(after_in_child=_reset)


@contextmanager
def logins() -> Iterator[None]:
    """The span of one log-in (spans nest and overlap: the statuses are kept until the
    last one of this thread ends)."""
    # The thread's own object, held: a span that ends in another thread (a coroutine
    # closed there by the garbage collector) closes this thread's span, not that one's.
    memo = _memo()
    memo.open += 1
    try:
        yield
    finally:
        memo.open -= 1
        if memo.open <= 0:
            memo.open = 0
            memo.seen.clear()


def stat(path: str) -> os.stat_result:
    """``os.stat(path)``, asked once per file within a span of log-ins, for at most
    :data:`MAX_AGE` seconds (an error too: a missing file stays missing as long)."""
    memo = _memo()
    if memo.open <= 0:
        return os.stat(path)
    where = os.path.abspath(path)   # a relative path means another file after a chdir
    now = time.monotonic()
    asked, seen = memo.seen.get(where, (0.0, None))
    if seen is None or now - asked > MAX_AGE:
        try:
            seen = os.stat(where)
        except OSError as err:
            seen = err
        memo.seen[where] = (now, seen)
    if isinstance(seen, OSError):
        # A new exception each time: raising the stored one would chain tracebacks.
        raise type(seen)(seen.errno, seen.strerror, path)
    return seen


def forget(path: str) -> None:
    """Ask for ``path``'s status again at its next use: this thread just changed it
    (a host key added to known_hosts is seen by the next host of the same run)."""
    _memo().seen.pop(os.path.abspath(path), None)
