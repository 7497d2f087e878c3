"""Host lists for the command line: ``[user@]host[:port]``, ranges, host files."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, List, Optional

_RANGE = re.compile(r"\[([^\[\]]*)\]")
MAX_HOSTS = 100_000


class UsageError(ValueError):
    """Bad command-line input; the message is one sentence for the user."""


@dataclass(frozen=True)
class HostSpec:
    host: str
    user: Optional[str] = None
    port: Optional[int] = None

    def __str__(self) -> str:
        return self.host


def _range_values(body: str, token: str) -> List[str]:
    values: List[str] = []
    for part in body.split(","):
        start, dash, end = part.partition("-")
        if not dash:
            if not part:
                raise UsageError(f"empty item in range [{body}] of {token!r}")
            values.append(part)
            continue
        if not (start.isdigit() and end.isdigit()):
            raise UsageError(f"bad range [{body}] in {token!r}: use numbers, as in [01-20]")
        first, last = int(start), int(end)
        if first > last:
            raise UsageError(f"bad range [{body}] in {token!r}: {start} is after {end}")
        width = len(start) if start.startswith("0") else 0
        values.extend(str(n).zfill(width) for n in range(first, last + 1))
    return values


def expand(token: str) -> List[str]:
    """``web[01-03,7].example`` -> web01.example, web02..., web07.example."""
    match = _RANGE.search(token)
    if match is None:
        if "[" in token or "]" in token:
            raise UsageError(f"unbalanced brackets in {token!r}")
        return [token]
    head, tail = token[:match.start()], token[match.end():]
    names = [head + value + rest for value in _range_values(match.group(1), token)
             for rest in expand(tail)]
    if len(names) > MAX_HOSTS:
        raise UsageError(f"{token!r} expands to more than {MAX_HOSTS} hosts")
    return names


def parse_host(token: str) -> List[HostSpec]:
    """One ``[user@]host[:port]`` (host may hold ranges, IPv6 in ``[...]:port``)."""
    user, at, rest = token.rpartition("@")
    if at and not user:
        raise UsageError(f"empty user name in {token!r}")
    port: Optional[int] = None
    if rest.startswith("[") and "]:" in rest and ":" in rest[1:rest.index("]")]:
        rest, _, port_text = rest[1:].partition("]:")  # [::1]:2222
    elif rest.count(":") == 1:
        rest, port_text = rest.split(":")
    else:
        port_text = ""
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UsageError(f"bad port {port_text!r} in {token!r}")
        port = int(port_text)
    if not rest:
        raise UsageError(f"no host name in {token!r}")
    names = [rest] if ":" in rest else expand(rest)
    return [HostSpec(name, user or None, port) for name in names]


def parse_hosts(tokens: Iterable[str]) -> List[HostSpec]:
    hosts: List[HostSpec] = []
    for token in tokens:
        hosts.extend(parse_host(token))
    return hosts


def read_hosts_file(path: str) -> List[HostSpec]:
    """Hosts separated by blanks or lines; ``#`` starts a comment."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise UsageError(f"cannot read hosts file {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"hosts file {path} is not text") from None
    tokens = []
    for line in text.splitlines():
        tokens.extend(line.split("#", 1)[0].split())
    return parse_hosts(tokens)
