"""What a job sees of the transport it runs on: a :class:`Link` to its parent."""
from __future__ import annotations

import importlib
import pickle
from typing import Any, Callable, Optional, Protocol


class Link(Protocol):
    """A shard's line to its parent. Messages are tuples of picklable values, delivered
    in the order sent."""

    def send(self, message: tuple) -> None:
        """Queue ``message`` for the parent; OSError once the parent is known to be gone."""

    def receive(self) -> Optional[tuple]:
        """The parent's next message (waits); None once the parent is gone or has told the
        shard to end."""

    def flush(self) -> None:
        """Wait until everything sent has left this process."""

    def on_terminate(self, callback: Callable[[], None]) -> None:
        """Have ``callback()`` called (in a greenlet) when this worker is told to stop its
        work (SIGTERM, see :mod:`pssh.fanout.signals`)."""


#: A job: ``serve(link, init)`` runs one shard until its parent ends it.
Job = Callable[[Link, Any], None]


class WorkerGone(Exception):
    """The worker is gone (``why``: how it ended); nothing more can be sent to it."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def load_job(name: str) -> Job:
    """The job function ``"module:function"`` names (jobs go to workers by name)."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def portable(err: BaseException) -> BaseException:
    """``err`` if the other side gets it back whole (its class, message, host and port),
    else a PSSHError saying the same, with the same host and port."""
    try:
        copy = pickle.loads(pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL))
        if type(copy) is type(err) and str(copy) == str(err) \
                and getattr(copy, "host", None) == getattr(err, "host", None) \
                and getattr(copy, "port", None) == getattr(err, "port", None):
            return err
    except Exception:
        pass
    from pssh import exceptions as exc
    port = getattr(err, "port", None)
    return exc.PSSHError("%s: %s", type(err).__name__, err, host=getattr(err, "host", None),
                         port=port if isinstance(port, int) else None)
