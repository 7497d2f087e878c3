"""Host lists for the command line: ``[user@]host[:port]``, ranges, host files, folding.

Ranges expand as clush and pdsh write them: ``web[01-20]``, ``rack[1-2]-n[1-3]``;
:func:`fold` writes a list of names back in that form (``web[01-05,07]``), on
the last number of each name.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

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

    @property
    def label(self) -> str:
        """How the host is named in output and files: ``host``, or ``host:port`` when a
        port was given with it (two ports of one address are two hosts)."""
        if self.port is None:
            return self.host
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def file_name(label: str) -> str:
    """A host's label as one local path component, distinct per label: ``/``, NUL and
    ``%`` percent-encoded, ``.`` and ``..`` (and the empty name) made harmless. A hosts
    file naming ``../../x`` or ``/abs/x`` writes nothing outside the chosen directory."""
    name = label.replace("%", "%25").replace("/", "%2F").replace("\0", "%00")
    if name in ("", ".", ".."):
        name = name.replace(".", "%2E") or "%"
    return name


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


def parse_hosts(tokens: Iterable[str], _reading: Tuple[str, ...] = ()) -> List[HostSpec]:
    """Hosts of ``tokens``; ``^FILE`` reads a hosts file (as clush's ``-w ^file``)."""
    hosts: List[HostSpec] = []
    for token in tokens:
        if token.startswith("^"):
            hosts.extend(read_hosts_file(token[1:], _reading))
        else:
            hosts.extend(parse_host(token))
    return hosts


def exclude(hosts: Sequence[HostSpec], patterns: Iterable[str]) -> List[HostSpec]:
    """``hosts`` without those matching any pattern: a host set (``web[01-04]``) or a
    shell glob (``db*``)."""
    names: Set[str] = set()
    globs: List[str] = []
    for pattern in patterns:
        for token in pattern.replace(",", " ").split():
            if any(c in token for c in "*?") and "[" not in token:
                globs.append(token)
            else:
                names.update(spec.host for spec in parse_hosts([token]))
    return [h for h in hosts if h.host not in names
            and not any(fnmatch.fnmatchcase(h.host, g) for g in globs)]


_NUMBER_OR_RANGE = re.compile(r"\[[^\]]*\]|\d+")


def fold(names: Iterable[str]) -> str:
    """Names folded into ranges: ``web[01-05,07],db1``, ``rack[1-2]-n[1-3]``.

    Folds on the last number of each name, then again on the last number left
    outside brackets, until nothing more folds. Each distinct name counts once;
    zero-padded numbers keep their width (``01-10``); names without a number
    stay as they are.
    """
    parts = list(dict.fromkeys(names))
    while True:
        folded = _fold_once(parts)
        if folded == parts:
            return ",".join(parts)
        parts = folded


def _fold_once(names: List[str]) -> List[str]:
    groups: Dict[Tuple[str, str, int], List[Tuple[int, str]]] = defaultdict(list)
    order: List[Union[str, Tuple[str, str, int]]] = []
    for name in names:
        numbers = [m for m in _NUMBER_OR_RANGE.finditer(name) if m.group().isdigit()]
        if not numbers:
            order.append(name)
            continue
        last = numbers[-1]
        head, digits, tail = name[:last.start()], last.group(), name[last.end():]
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        key = (head, tail, width)
        if not groups[key]:
            order.append(key)
        groups[key].append((int(digits), digits))
    # An unpadded number as wide as a padded group (the 10 of 01-10) joins that group.
    for key in [k for k in groups if k[2] == 0]:
        for value, digits in list(groups[key]):
            padded = (key[0], key[1], len(digits))
            if padded in groups:
                groups[padded].append((value, digits))
                groups[key].remove((value, digits))
    parts = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
        elif groups[item]:
            head, tail, width = item
            values = sorted({value for value, _ in groups[item]})
            if len(values) == 1:
                parts.append(f"{head}{str(values[0]).zfill(width)}{tail}")
            else:
                parts.append(f"{head}[{_ranges(values, width)}]{tail}")
    return parts


def _ranges(values: List[int], width: int) -> str:
    spans, start = [], values[0]
    following: List[Optional[int]] = [*values[1:], None]
    for previous, value in zip(values, following):
        if value is None or value != previous + 1:
            spans.append(str(start).zfill(width) if start == previous
                         else f"{str(start).zfill(width)}-{str(previous).zfill(width)}")
            if value is not None:
                start = value
    return ",".join(spans)


#: Hosts files read within one another (``^FILE`` in a hosts file) at most.
MAX_INCLUDE_DEPTH = 16


def read_hosts_file(path: str, _reading: Tuple[str, ...] = ()) -> List[HostSpec]:
    """Hosts separated by blanks or lines; ``#`` starts a comment; ``^FILE`` includes."""
    real = os.path.realpath(path)
    if real in _reading:
        raise UsageError(f"hosts file {path} includes itself")
    if len(_reading) >= MAX_INCLUDE_DEPTH:
        raise UsageError(f"hosts file {path}: files included more than {MAX_INCLUDE_DEPTH} "
                         f"deep")
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
    return parse_hosts(tokens, (*_reading, real))


def print_hosts(args) -> int:
    """``pssh hosts``: the expansion of the expressions, less the exclusions."""
    try:
        hosts = exclude(parse_hosts(args.expressions), args.exclude)
    except UsageError as err:
        args.error(str(err))
    names = [f"{h.user + '@' if h.user else ''}{h.label}" for h in hosts]
    if args.count:
        print(len(names))
    elif args.fold:
        print(fold(names))
    else:
        print("\n".join(names))
    return 0
