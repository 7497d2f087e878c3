"""Host lists for the command line: ``[user@]host[:port]`` nodes of ClusterShell's
node-set grammar (:mod:`pssh.cli.nodeset`), host files, exclusions, labels, folding.

``-H "web[1-3,7],db1 u@rack[1-2]-n[01-02]:2222"`` is nine hosts: commas and blanks
separate nodes (``!`` and ``&`` take away and intersect, as ClusterShell's), and a
node's user and port go with every name its brackets stand for (``u@rack1-n01:2222``,
...). ``[::1]:2222`` and a bare ``fe80::1`` are IPv6 addresses.
"""
from __future__ import annotations

import fnmatch
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from pssh.cli import nodeset

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


def parse_host(token: str) -> List[HostSpec]:
    """One node ``[user@]host[:port]``: ``host`` may hold bracket groups (``web[1-3]``),
    the user and port then go with each name; IPv6 as ``[::1]:2222`` or a bare ``::1``."""
    user, at, rest = token.rpartition("@")
    if at and not user:
        raise UsageError(f"empty user name in {token!r}")
    port_text = ""
    ipv6 = rest.startswith("[") and ":" in rest[1:rest.find("]")]
    if ipv6:  # [::1] or [::1]:2222
        rest, _, after = rest[1:].partition("]")
        if after and not after.startswith(":"):
            raise UsageError(f"bad IPv6 address in {token!r}: write [ADDRESS]:PORT")
        port_text = after[1:]
        if after and not port_text:
            raise UsageError(f"bad port '' in {token!r}")
    elif rest.count(":") == 1:
        rest, port_text = rest.split(":")
        if not port_text:
            raise UsageError(f"bad port '' in {token!r}")
    port: Optional[int] = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UsageError(f"bad port {port_text!r} in {token!r}")
        port = int(port_text)
    if not rest:
        raise UsageError(f"no host name in {token!r}")
    try:
        names = [rest] if ":" in rest else nodeset.expand(rest)
    except nodeset.NodeSetError as err:
        raise UsageError(str(err)) from None
    return [HostSpec(name, user or None, port) for name in names]


def parse_hosts(expressions: Iterable[str],
                _reading: Tuple[str, ...] = ()) -> List[HostSpec]:
    """Hosts of node-set ``expressions`` (``"web[1-40]!web13,db1 db2"``), in the order
    written; a node ``^FILE`` reads a hosts file (as clush's ``-w ^file``). ``!`` and
    ``&`` act within their expression, matching as ``-x`` does (:func:`exclude`)."""
    hosts: List[HostSpec] = []
    for expression in expressions:
        try:
            terms = nodeset.terms(expression)
        except nodeset.NodeSetError as err:
            raise UsageError(str(err)) from None
        these: List[HostSpec] = []
        for operator, node in terms:
            named = read_hosts_file(node[1:], _reading) if node.startswith("^") \
                else parse_host(node)
            if operator == ",":
                these.extend(named)
            else:  # "!" takes away the hosts a node names, "&" keeps only those
                keep = operator == "&"
                these = [h for h in these if any(_matches(h, n) for n in named) == keep]
        hosts.extend(these)
        if len(hosts) > nodeset.MAX_NODES:
            raise UsageError(f"more than {nodeset.MAX_NODES} hosts")
    return hosts


def unique(hosts: Iterable[HostSpec], user: Optional[str] = None,
           port: Optional[int] = None) -> List[HostSpec]:
    """``hosts`` with each (user, host, port) once, where it first came: a host written
    twice (``web1 web[1-2]``, or ``web1:2222`` with ``--port 2222``) is worked on once,
    as a node set holds each node once. ``user``, ``port``: the run's own (``-l``,
    ``--port``), for entries without one."""
    seen: Dict[Tuple[Optional[str], str, Optional[int]], HostSpec] = {}
    for host in hosts:
        key = (host.user or user, host.host, host.port if host.port is not None else port)
        seen.setdefault(key, host)
    return list(seen.values())


def exclude(hosts: Sequence[HostSpec], patterns: Iterable[str]) -> List[HostSpec]:
    """``hosts`` without those matching any pattern: a node set (``web[01-04],db1``) or a
    shell glob (``db*``; brackets are the node set's). A pattern's user or port, when it
    has one, must match too (``-x web1:2222`` leaves ``web1:22`` in)."""
    excluded = parse_hosts(patterns)
    return [h for h in hosts if not any(_matches(h, pattern) for pattern in excluded)]


def _matches(host: HostSpec, pattern: HostSpec) -> bool:
    if pattern.user is not None and pattern.user != host.user:
        return False
    if pattern.port is not None and pattern.port != host.port:
        return False
    if any(c in pattern.host for c in "*?"):
        return fnmatch.fnmatchcase(host.host, pattern.host)
    return host.host == pattern.host


def labels(hosts: Sequence[HostSpec], port: Optional[int] = None) -> List[str]:
    """How each of ``hosts`` is named in output, errors, JSON and files: ``host``;
    ``host:port`` when a port was written with it, or when another entry has the same
    address on another port (``port``: the run's own, for entries without one); and
    ``user@...`` when only the user tells two entries apart."""
    ports: Dict[str, Set[Optional[int]]] = defaultdict(set)
    users: Dict[Tuple[str, Optional[int]], Set[Optional[str]]] = defaultdict(set)
    for host in hosts:
        ports[host.host].add(host.port if host.port is not None else port)
        users[host.host, host.port if host.port is not None else port].add(host.user)
    named = []
    for host in hosts:
        shown = host.port
        if shown is None and len(ports[host.host]) > 1:
            shown = port
        label = HostSpec(host.host, port=shown).label
        effective = host.port if host.port is not None else port
        if host.user and len(users[host.host, effective]) > 1:
            label = f"{host.user}@{label}"
        named.append(label)
    return named


def address_of(label: str) -> str:
    """The host name or address in a label (``u@[::1]:22`` -> ``::1``)."""
    rest = label.rpartition("@")[2]
    if rest.startswith("[") and "]" in rest:
        return rest[1:rest.index("]")]
    return rest.rpartition(":")[0] if rest.count(":") == 1 else rest


def fold(labels: Iterable[str]) -> str:
    """Host labels folded into a node set (``web[01-05,07],db1``) that
    :func:`parse_hosts` reads back to the same hosts: a user or port goes with the
    names folded beside it (``u@web[1-3]:2222``); IPv6 addresses stay as they are."""
    groups: Dict[Tuple[str, str], List[str]] = {}
    for label in dict.fromkeys(labels):
        user, at, rest = label.rpartition("@")
        head = user + at
        if rest.startswith("[") or rest.count(":") > 1 or rest.count(":") == 1 and \
                not rest.rpartition(":")[2].isdigit():  # IPv6, or not a label we made
            groups.setdefault((label, ""), [])
            continue
        name, colon, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
        groups.setdefault((head, colon + port), []).append(name)
    parts = []
    for (head, tail), names in groups.items():
        if not names:  # kept whole
            parts.append(head)
        else:
            parts.extend(f"{head}{part}{tail}" for part in nodeset.fold_parts(names))
    return ",".join(parts)


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
        tokens.append(line.split("#", 1)[0])
    return parse_hosts(tokens, (*_reading, real))


def print_hosts(args) -> int:
    """``pssh hosts``: the hosts of the expressions (positional and ``-H``/``-w``), each
    once, less the exclusions."""
    try:
        hosts = exclude(unique(parse_hosts([*args.expressions, *args.host_specs])),
                        args.exclude)
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
