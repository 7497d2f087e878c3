"""A network namespace whose loopback has a round-trip time, for WAN-like benchmarks.

This kernel has no ``sch_netem``, so ``tc ... netem delay`` is not available.
Instead every packet leaving on the namespace's ``lo`` goes to an NFQUEUE
queue, and ``nfqueue_delay`` (C, built here on first use) lets each one
through ``rtt / 2`` after it arrived; a packet crosses OUTPUT once per
direction. The program runs at real-time priority: under a benchmark's load
a normal process is scheduled late and adds delay of its own.

    with DelayedLoopback(rtt_ms=50) as ns:
        subprocess.run(ns.command(["python", "-m", "benchmarks.fanout"]))

Everything on 127.0.0.0/8 inside the namespace sees the delay; nothing
outside it is touched. Needs root, iproute2, iptables, gcc and
libnetfilter-queue-dev.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional

log = logging.getLogger("benchmarks.netns")

SOURCE = Path(__file__).resolve().parent / "nfqueue_delay.c"
QUEUE = 0
APT_PACKAGES = "iproute2 iptables gcc libnetfilter-queue-dev"


class NamespaceError(RuntimeError):
    pass


def _run(argv: List[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise NamespaceError(f"{' '.join(argv)}: {result.stderr.strip() or result.returncode}")


def build_delay_program(directory: Path) -> Path:
    """Compile nfqueue_delay.c into ``directory``."""
    if shutil.which("gcc") is None:
        raise NamespaceError(f"gcc not found (apt-get install {APT_PACKAGES})")
    binary = directory / "nfqueue_delay"
    result = subprocess.run(["gcc", "-O2", "-Wall", "-o", str(binary), str(SOURCE),
                             "-lnetfilter_queue", "-lnfnetlink"], capture_output=True, text=True)
    if result.returncode != 0:
        raise NamespaceError(f"building nfqueue_delay failed (apt-get install {APT_PACKAGES}): "
                             f"{result.stderr.strip()}")
    return binary


class DelayedLoopback:
    """Create (on enter) and remove (on exit) a namespace with ``rtt_ms`` on loopback."""

    def __init__(self, rtt_ms: float, name: Optional[str] = None) -> None:
        if rtt_ms <= 0:
            raise ValueError("rtt_ms must be positive")
        self.rtt_ms = rtt_ms
        self.name = name or f"pssh-bench-{os.getpid()}"
        self._scratch: Optional[tempfile.TemporaryDirectory] = None
        self._delay: Optional[subprocess.Popen] = None
        self.realtime = False

    def command(self, argv: List[str]) -> List[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def __enter__(self) -> "DelayedLoopback":
        if os.geteuid() != 0:
            raise NamespaceError("creating a network namespace needs root")
        for tool in ("ip", "iptables"):
            if shutil.which(tool) is None:
                raise NamespaceError(f"{tool} not found (apt-get install {APT_PACKAGES})")
        self._scratch = tempfile.TemporaryDirectory(prefix="pssh-netns-")
        binary = build_delay_program(Path(self._scratch.name))
        _run(["ip", "netns", "add", self.name])
        try:
            _run(self.command(["ip", "link", "set", "lo", "up"]))
            # --queue-bypass: should the program die, packets flow undelayed
            # instead of the namespace going dark.
            _run(self.command(["iptables", "-A", "OUTPUT", "-o", "lo", "-j", "NFQUEUE",
                               "--queue-num", str(QUEUE), "--queue-bypass"]))
            self._start_delay(binary)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        log.info("namespace %s: %.1f ms RTT on loopback%s", self.name, self.rtt_ms,
                 "" if self.realtime else " (NOT at real-time priority)")
        return self

    def _start_delay(self, binary: Path) -> None:
        one_way = str(self.rtt_ms / 2)
        argv = self.command([str(binary), str(QUEUE), one_way])
        for prefix in (["chrt", "-f", "50"], []):
            self._delay = subprocess.Popen(prefix + argv, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
            line = self._delay.stdout.readline().strip()
            if line == "ready":
                self.realtime = bool(prefix)
                return
            self._delay.wait()
            error = self._delay.stderr.read().strip()
            self._delay = None
            if prefix:
                log.warning("cannot run nfqueue_delay at real-time priority (%s); "
                            "running it at normal priority", error)
        raise NamespaceError(f"nfqueue_delay did not start: {error}")

    def __exit__(self, *exc_info) -> None:
        if self._delay is not None:
            self._delay.terminate()
            try:
                self._delay.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._delay.kill()
                self._delay.wait()
            self._delay = None
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
