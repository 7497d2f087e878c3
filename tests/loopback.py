"""Loopback addresses for the tests' servers, handed out from one place:
:func:`addresses`, for module fixtures and for the constants of a module that needs an
address before any server starts (a known_hosts line, an ssh_config written ahead).

Every address a test listens on, or counts on nobody listening on, comes from here, so
that no two modules ever share one (a server of one module taken for another's, a
"refused" address that answers). The tests run servers on 127.0.0.0/8, all of it
loopback on Linux. This run takes the /16 ``127.<100 + worker>.0.0``, where ``worker``
is pytest-xdist's worker number (0 without xdist), so that a run split over processes
cannot collide either. ``PSSH_TESTS_SECOND_OCTET`` moves the first /16 (another checkout's
run beside this one, say); ``PSSH_TESTS_FIRST_NETWORK`` the first /24 within it (a run
nested in another, in the same /16: tests/test_checkout_location.py). 127.0.0.0/24 stays
to the defaults of pssh itself (``pssh --embedded``, ``ServerGroup()``) and 127.0.1.0/24
to the machine (its own name).

A block of addresses never crosses a /24: its hosts can be written as a range
(``127.100.3.[1-5]``) and told apart by their last number.
"""
from __future__ import annotations

import os
import threading
from typing import List

#: Addresses per /24 a block may take: .1 to .254.
PER_NETWORK = 254
#: The second number of worker 0's addresses.
FIRST_SECOND_OCTET = int(os.environ.get("PSSH_TESTS_SECOND_OCTET", "100"))
#: The third number of the first block (a whole run takes a few /24s from here on).
FIRST_NETWORK = int(os.environ.get("PSSH_TESTS_FIRST_NETWORK", "1"))


def worker_number(worker_id: str = "") -> int:
    """pytest-xdist's worker number (``gw3`` -> 3), 0 without xdist."""
    worker_id = worker_id or os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker_id[2:]) if worker_id.startswith("gw") else 0


class LoopbackAddresses:
    """Hands out addresses of ``127.<second>.0.0/16``, each once."""

    def __init__(self, second_octet: int, first_network: int = 1) -> None:
        if not 0 < second_octet < 256:
            raise ValueError(f"no 127.{second_octet}.0.0/16")
        if not 0 < first_network < 256:
            raise ValueError(f"no 127.{second_octet}.{first_network}.0/24")
        self.second = second_octet
        self._network = first_network  # the third number; 127.x.0.0/24 is left out
        self._next = 1     # the last number
        self._lock = threading.Lock()

    def take(self, count: int = 1) -> List[str]:
        """``count`` addresses never handed out before, in one /24, consecutive."""
        if not 1 <= count <= PER_NETWORK:
            raise ValueError(f"a block holds 1 to {PER_NETWORK} addresses, not {count}")
        with self._lock:
            if self._next + count - 1 > PER_NETWORK:
                self._network, self._next = self._network + 1, 1
            if self._network > 255:
                raise RuntimeError(f"127.{self.second}.0.0/16 is used up")
            first = self._next
            self._next += count
            return [f"127.{self.second}.{self._network}.{first + i}" for i in range(count)]


def for_this_worker(worker_id: str = "") -> LoopbackAddresses:
    """The allocator of this test process (its xdist worker's /16)."""
    return LoopbackAddresses(FIRST_SECOND_OCTET + worker_number(worker_id), FIRST_NETWORK)


_this_run = None


def addresses(count: int = 1) -> List[str]:
    """``count`` consecutive loopback addresses that nothing else in this test run gets."""
    global _this_run
    if _this_run is None:
        _this_run = for_this_worker()
    return _this_run.take(count)


def address() -> str:
    """One loopback address that nothing else in this test run gets."""
    return addresses(1)[0]
