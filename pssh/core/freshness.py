"""Whether the files a login reads changed: one ``stat`` per file for a burst of logins.

Key files, known_hosts and ssh_config files are parsed once and kept while they stay as
they are (:mod:`pssh.core.keys`, :mod:`pssh.core.known_hosts`, :mod:`pssh.core.ssh_config`);
each use asks the kernel whether they still are. A client marks the span of its log-in
with :func:`logins`; while any log-in of this thread is in such a span, a file's status is
asked for once and then reused, so that a fan-out to 500 hosts stats each file once per
run instead of several times per host (each host asks for its key file three times and for
known_hosts twice). The status is forgotten as soon as no log-in of the thread is under
way, so the next run sees a file replaced in between, and after :data:`MAX_AGE` seconds
even within a span, so that logins that keep a span open (a dead host retried for minutes
beside a program's other connections) still see a file change within a second.

Threads do not share spans: a fan-out in one thread never hides a change from another.
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


class _Spans(threading.local):
    def __init__(self) -> None:
        self.open = 0
        #: path -> (when it was asked for, the status or the error)
        self.seen: Dict[str, Tuple[float, Union[os.stat_result, OSError]]] = {}


_spans = _Spans()


@contextmanager
def logins() -> Iterator[None]:
    """The span of one log-in (spans nest and overlap: the statuses are kept until the
    last one of this thread ends)."""
    spans = _spans
    spans.open += 1
    try:
        yield
    finally:
        spans.open -= 1
        if not spans.open:
            spans.seen.clear()


def stat(path: str) -> os.stat_result:
    """``os.stat(path)``, asked once per file within a span of log-ins (an error too:
    a missing file stays missing until the span ends)."""
    spans = _spans
    if not spans.open:
        return os.stat(path)
    now = time.monotonic()
    asked, seen = spans.seen.get(path, (0.0, None))
    if seen is None or now - asked > MAX_AGE:
        try:
            seen = os.stat(path)
        except OSError as err:
            seen = err
        spans.seen[path] = (now, seen)
    if isinstance(seen, OSError):
        # A new exception each time: raising the stored one would chain tracebacks.
        raise type(seen)(seen.errno, seen.strerror, seen.filename)
    return seen


def forget(path: str) -> None:
    """Ask for ``path``'s status again at its next use: this thread just changed it
    (a host key added to known_hosts is seen by the next host of the same run)."""
    _spans.seen.pop(path, None)
