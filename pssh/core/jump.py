"""Jump hosts: connections to hops shared by every target behind them.

``JumpChain.chain(hops)`` returns the connection of the last hop, each hop
reached through the one before (a tunnel, :func:`pssh.core.forwarding.open_tunnel`).
Every target behind the same chain goes through one connection per hop,
created once however many procedures ask at the same time; a hop that failed
is forgotten, so a later call tries again, and a hop found closed is
connected afresh.

The ``make(hop, via)`` procedure given to :meth:`JumpChain.chain` makes a hop's
connection with the hop's settings as its front end resolves them; both front ends
make it with :func:`pssh.core.establish.establish` (a :class:`~pssh.core.link.Link`).
Anything with ``closed`` (or ``session``) and ``close()`` will do.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from pssh.core.waits import Event, Procedure, WaitFor

Hop = Tuple[Optional[str], str, Optional[int]]  # (user, host, port)


class _Pending:
    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        self.done = Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None


#: ``make(hop, via)``: a procedure making the connection to ``hop`` through ``via`` (the
#: previous hop's connection, or None for the first).
MakeHop = Callable[[Hop, Any], Procedure[Any]]


class JumpChain:
    """Hop connections, shared by every target behind them."""

    def __init__(self) -> None:
        self._hops: Dict[tuple, _Pending] = {}

    def connect(self, hop: Hop, via: Any, make: MakeHop) -> Procedure[Any]:
        """The connection to ``hop`` through ``via``: made once (by ``make``), shared."""
        key = (hop, id(via))
        entry = self._hops.get(key)
        if entry is not None and entry.done.is_set() and entry.error is None \
                and _closed(entry.value):
            entry = None  # closed since: make a new one
        if entry is None:
            entry = self._hops[key] = _Pending()
            try:
                entry.value = yield from make(hop, via)
            except BaseException as err:
                del self._hops[key]
                entry.error = err
                entry.done.set()
                raise
            entry.done.set()
            return entry.value
        if not entry.done.is_set():
            yield WaitFor(entry.done, None)
        if entry.error is not None:
            raise entry.error
        return entry.value

    def chain(self, hops: Sequence[Hop], make: MakeHop) -> Procedure[Any]:
        """The connection of the last of ``hops``, each reached through the one before."""
        via = None
        for hop in hops:
            via = yield from self.connect(hop, via, make)
        return via

    def close(self) -> None:
        """Close every hop connection made here."""
        entries, self._hops = list(self._hops.values()), {}
        for entry in entries:
            if entry.done.is_set() and entry.error is None:
                entry.value.close()


def route(hops: Sequence[Hop]) -> str:
    """The hops as an error names them: ``host[:port], ...``."""
    return ", ".join(f"{host}:{port}" if port else host for _, host, port in hops)


def _closed(connection: Any) -> bool:
    closed = getattr(connection, "closed", None)
    if closed is None:
        return getattr(connection, "session", None) is None
    return closed() if callable(closed) else bool(closed)


__all__ = ["Hop", "JumpChain", "MakeHop", "route"]
