"""Checks: what to run on every host, and how to read its output."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, Optional

from pssh.poll.buckets import Buckets
from pssh.poll.parsers import number, parser_from_spec
from pssh.poll.results import Value

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Check:
    """A command polled on every host, and the parser of its output.

    ``timeout``: the deadline of one poll (seconds; default: the interval of the bucket
    the host is in). ``buckets``: this check's own buckets (default: the poller's).
    """

    name: str
    command: str
    parser: Callable[[str], Dict[str, Value]] = number
    timeout: Optional[float] = None
    buckets: Optional[Buckets] = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"check name {self.name!r}: use letters, digits, _ . - "
                             "(starting with a letter or _)")
        if not self.command.strip():
            raise ValueError(f"check {self.name!r} has an empty command")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"check {self.name!r}: timeout must be positive")
        if not callable(self.parser):
            raise ValueError(f"check {self.name!r}: parser {self.parser!r} is not callable")

    @classmethod
    def from_spec(cls, text: str) -> "Check":
        """The command line's form: ``NAME=COMMAND`` (a :func:`~pssh.poll.parsers.number`)
        or ``NAME:PARSER=COMMAND`` (PARSER as :func:`~pssh.poll.parsers.parser_from_spec`
        takes it; the first ``=`` ends it, so a regex parser's pattern cannot hold one)."""
        head, sep, command = text.partition("=")
        if not sep:
            raise ValueError(f"check {text!r}: use NAME=COMMAND or NAME:PARSER=COMMAND")
        name, colon, parser_spec = head.partition(":")
        parser = parser_from_spec(parser_spec) if colon else number
        return cls(name.strip(), command.strip(), parser)

    def deadline(self, interval: float) -> float:
        """Seconds one poll may take when the host is in the bucket of ``interval``."""
        return self.timeout if self.timeout is not None else interval


__all__ = ["Check"]
