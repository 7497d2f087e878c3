"""OpenSSH client configuration (``~/.ssh/config``), as ssh_config(5) reads it.

Supported: ``Host`` pattern lists with ``*``, ``?`` and ``!`` negation;
``Match`` with ``all``, ``host``, ``originalhost``, ``user``, ``localuser``
(a ``Match`` with any other criterion, such as ``exec``, never matches and is
logged once); ``Include`` with globs, relative paths resolved against
``~/.ssh``, nested up to 16 deep; ``keyword value`` and ``keyword=value``;
double-quoted arguments; the first value obtained for a keyword wins, except
``IdentityFile`` and ``CertificateFile`` which accumulate. ``%h %p %r %u %d %%`` and ``~`` are
expanded where OpenSSH expands them.

Only the keywords the clients use are interpreted (see :class:`HostOptions`);
the others are parsed and ignored.
"""
from __future__ import annotations

import fnmatch
import functools
import getpass
import glob
import logging
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from pssh.core import freshness

log = logging.getLogger("pssh.core.ssh_config")

DEFAULT_PATH = os.path.join("~", ".ssh", "config")


@functools.lru_cache(maxsize=None)
def local_user() -> str:
    """The local user's name (``getpass.getuser()``), looked up once per process:
    each lookup reads the environment and the passwd database, for every host."""
    return getpass.getuser()


MAX_INCLUDE_DEPTH = 16
_SINGLE = ("hostname", "user", "port", "identitiesonly", "proxyjump", "stricthostkeychecking",
           "userknownhostsfile", "connecttimeout", "serveraliveinterval",
           "serveralivecountmax", "compression", "forwardagent", "hostkeyalias",
           "ciphers", "macs", "kexalgorithms")
#: The keywords this module interprets (every other is parsed and ignored).
SUPPORTED_KEYWORDS = frozenset(_SINGLE + ("identityfile", "certificatefile"))
_KEYWORD = re.compile(r"([^\s=]+)(?:\s*=\s*|\s+|$)(.*)")
_POLICIES = {"yes": "strict", "ask": "strict", "accept-new": "accept-new", "no": "off",
             "off": "off"}


def host_key_policy_of(value: str) -> Optional[str]:
    """Our host key policy for ``StrictHostKeyChecking value`` (any case); None for a
    value OpenSSH does not take. ``ask`` is ``strict``: pssh never asks, and ssh with no
    terminal to ask on refuses as ``yes`` does (tests/test_host_key_oracle.py runs it)."""
    return _POLICIES.get(value.lower())


class SSHConfigError(ValueError):
    """A config file that cannot be read or has a bad value (names file and line)."""


@dataclass(frozen=True)
class HostOptions:
    """What the config says for one host; ``None`` where it says nothing."""

    hostname: Optional[str] = None
    user: Optional[str] = None
    port: Optional[int] = None
    identity_files: Tuple[str, ...] = ()
    certificate_files: Tuple[str, ...] = ()
    identities_only: Optional[bool] = None
    proxy_jump: Optional[str] = None
    host_key_policy: Optional[str] = None
    known_hosts: Optional[str] = None
    host_key_alias: Optional[str] = None
    connect_timeout: Optional[float] = None
    server_alive_interval: Optional[int] = None
    server_alive_count_max: Optional[int] = None
    compression: Optional[bool] = None
    forward_agent: Optional[bool] = None
    ciphers: Optional[str] = None
    macs: Optional[str] = None
    kex_algorithms: Optional[str] = None


@dataclass
class _Line:
    keyword: str
    args: List[str]
    origin: str  # "file:line", for error messages


@dataclass
class _Block:
    kind: str  # "host", "match" or "all" (before the first Host/Match)
    args: List[str]
    origin: str
    lines: List[_Line] = field(default_factory=list)


def _split(line: str, origin: str) -> Optional[Tuple[str, List[str]]]:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    match = _KEYWORD.match(line)
    if match is None:  # the line starts with "="
        raise SSHConfigError(f"{origin}: no keyword before '='")
    keyword, rest = match.group(1), match.group(2).strip()
    try:
        lexer = shlex.shlex(rest, posix=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        lexer.escape = ""
        args = list(lexer)
    except ValueError as err:
        raise SSHConfigError(f"{origin}: {err}") from None
    return keyword.lower(), args


def split_line(line: str, origin: str) -> Optional[Tuple[str, List[str]]]:
    """One config line as (keyword in lower case, arguments); None for a blank line or a
    comment. :class:`SSHConfigError` (naming ``origin``) for a line without a keyword."""
    return _split(line, origin)


class SSHConfig:
    """A parsed config; :meth:`lookup` resolves the options for one host."""

    def __init__(self, blocks: List[_Block], path: Optional[str] = None) -> None:
        self._blocks = blocks
        self.path = path
        self._warned: set = set()

    # -- reading ------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str = DEFAULT_PATH) -> "SSHConfig":
        """Parse ``path`` (a missing default file gives an empty config)."""
        full = os.path.expanduser(path)
        blocks: List[_Block] = [_Block("all", [], full)]
        if os.path.exists(full) or path != DEFAULT_PATH:
            cls._read(full, blocks, 0)
        return cls(blocks, full)

    @classmethod
    def from_text(cls, text: str, name: str = "<config>") -> "SSHConfig":
        blocks: List[_Block] = [_Block("all", [], name)]
        cls._parse(text.splitlines(), name, blocks, 0)
        return cls(blocks, None)

    @classmethod
    def layered(cls, first: Iterable[str], config: Optional["SSHConfig"] = None,
                last: Iterable[str] = (), origin: str = "command line") -> "SSHConfig":
        """``config`` with ``first`` lines before it and ``last`` lines after it, each a
        ``keyword value`` or ``keyword=value`` line applying to every host.

        ``first`` is what ``ssh -o`` gives: as if written at the top of the file, so it
        wins over the file (the first value obtained wins); ``last`` is a program's own
        defaults, which the file overrides. Errors name ``origin``."""
        def block(lines: Iterable[str]) -> _Block:
            made = _Block("all", [], origin)
            for text in lines:
                parsed = _split(text, origin)
                if parsed is not None:
                    made.lines.append(_Line(parsed[0], parsed[1], origin))
            return made
        middle = config._blocks if config is not None else []
        return cls([block(first), *middle, block(last)],
                   config.path if config is not None else None)

    @classmethod
    def _read(cls, path: str, blocks: List[_Block], depth: int) -> None:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.readlines()
        except OSError as err:
            raise SSHConfigError(f"cannot read ssh config {path}: {err.strerror}") from None
        cls._parse(lines, path, blocks, depth)

    @classmethod
    def _parse(cls, lines: Iterable[str], name: str, blocks: List[_Block], depth: int) -> None:
        for number, raw in enumerate(lines, 1):
            origin = f"{name}:{number}"
            parsed = _split(raw, origin)
            if parsed is None:
                continue
            keyword, args = parsed
            if keyword in ("host", "match"):
                if not args:
                    raise SSHConfigError(f"{origin}: {keyword.capitalize()} needs an argument")
                blocks.append(_Block(keyword, args, origin))
            elif keyword == "include":
                if depth >= MAX_INCLUDE_DEPTH:
                    raise SSHConfigError(f"{origin}: Include nested too deeply")
                # Each included file starts under the condition of the block that
                # includes it, and that block's later lines keep its condition.
                parent = blocks[-1]
                for pattern in args:
                    pattern = os.path.expanduser(pattern)
                    if not os.path.isabs(pattern):
                        pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
                    for path in sorted(glob.glob(pattern)):
                        blocks.append(_Block(parent.kind, parent.args, path))
                        cls._read(path, blocks, depth + 1)
                blocks.append(_Block(parent.kind, parent.args, origin))
            else:
                blocks[-1].lines.append(_Line(keyword, args, origin))

    # -- matching -----------------------------------------------------------------

    @staticmethod
    def _match_patterns(name: str, patterns: List[str]) -> bool:
        matched = False
        for pattern_list in patterns:
            for pattern in pattern_list.split(","):
                negated = pattern.startswith("!")
                if fnmatch.fnmatchcase(name.lower(), pattern.lstrip("!").lower()):
                    if negated:
                        return False
                    matched = True
        return matched

    def _block_applies(self, block: _Block, host: str, hostname: str, user: str) -> bool:
        if block.kind == "all":
            return True
        if block.kind == "host":
            return self._match_patterns(host, block.args)
        args = list(block.args)
        while args:
            criterion = args.pop(0).lower()
            negate = criterion.startswith("!")
            criterion = criterion.lstrip("!")
            if criterion in ("all", "canonical", "final"):
                result = criterion == "all"
            elif criterion in ("host", "originalhost", "user", "localuser") and args:
                value = {"host": hostname, "originalhost": host, "user": user,
                         "localuser": local_user()}[criterion]
                result = self._match_patterns(value, [args.pop(0)])
            else:
                if block.origin not in self._warned:
                    self._warned.add(block.origin)
                    log.warning("%s: Match %s is not supported; the block is skipped",
                                block.origin, criterion)
                return False
            if result == negate:
                return False
        return True

    def lookup(self, host: str, user: Optional[str] = None, port: Optional[int] = None
               ) -> HostOptions:
        """Resolve the options for ``host`` (the name the user gave)."""
        values: Dict[str, Tuple[str, str]] = {}
        identities: List[str] = []
        certificates: List[str] = []
        for block in self._blocks:
            hostname = values.get("hostname", (host, ""))[0]
            block_user = values.get("user", (user or local_user(), ""))[0]
            if not self._block_applies(block, host, hostname, block_user):
                continue
            for line in block.lines:
                if not line.args:
                    raise SSHConfigError(f"{line.origin}: {line.keyword} needs a value")
                if line.keyword == "identityfile":
                    identities.append(line.args[0])
                elif line.keyword == "certificatefile":
                    certificates.append(line.args[0])
                elif line.keyword in _SINGLE and line.keyword not in values:
                    values[line.keyword] = (line.args[0], line.origin)
        return self._options(host, user, port, values, identities, certificates)

    # -- interpreting ------------------------------------------------------------

    def _options(self, host: str, user: Optional[str], port: Optional[int],
                 values: Dict[str, Tuple[str, str]], identities: List[str],
                 certificates: List[str]) -> HostOptions:
        def get(key: str) -> Optional[str]:
            return values[key][0] if key in values else None

        def number(key: str, kind: Callable[[str], Any] = int) -> Any:  # kind's, or None
            if key not in values:
                return None
            value, origin = values[key]
            try:
                return kind(value)
            except ValueError:
                raise SSHConfigError(f"{origin}: {key} {value!r} is not a number") from None

        def flag(key: str) -> Optional[bool]:
            if key not in values:
                return None
            value, origin = values[key]
            if value.lower() not in ("yes", "no", "true", "false"):
                raise SSHConfigError(f"{origin}: {key} must be yes or no, not {value!r}")
            return value.lower() in ("yes", "true")

        hostname = (get("hostname") or host).replace("%h", host).replace("%%", "%")
        resolved_user = user or get("user") or local_user()
        resolved_port = port or number("port") or 22
        tokens = {"%h": hostname, "%p": str(resolved_port), "%r": resolved_user,
                  "%u": local_user(), "%d": os.path.expanduser("~"), "%%": "%"}

        def expand(path: str) -> str:
            for token, value in tokens.items():
                path = path.replace(token, value)
            return os.path.expanduser(path)

        policy = get("stricthostkeychecking")
        if policy is not None:
            ours = host_key_policy_of(policy)
            if ours is None:
                raise SSHConfigError(f"{values['stricthostkeychecking'][1]}: "
                                     f"StrictHostKeyChecking {policy!r} is not understood")
            policy = ours
        jump = get("proxyjump")
        known_hosts = get("userknownhostsfile")
        return HostOptions(
            hostname=get("hostname") and hostname,
            user=get("user"),
            port=number("port"),
            identity_files=tuple(expand(p) for p in identities if p.lower() != "none"),
            certificate_files=tuple(expand(p) for p in certificates if p.lower() != "none"),
            identities_only=flag("identitiesonly"),
            proxy_jump=None if jump is None or jump.lower() == "none" else jump,
            host_key_policy=policy,
            known_hosts=None if known_hosts is None
            else os.devnull if known_hosts.lower() == "none" else expand(known_hosts),
            host_key_alias=get("hostkeyalias"),
            connect_timeout=number("connecttimeout", float),
            server_alive_interval=number("serveraliveinterval"),
            server_alive_count_max=number("serveralivecountmax"),
            compression=flag("compression"),
            forward_agent=flag("forwardagent"),
            ciphers=get("ciphers"),
            macs=get("macs"),
            kex_algorithms=get("kexalgorithms"),
        )


_cache: Dict[str, Tuple[float, SSHConfig]] = {}


def load(path: Optional[str] = None) -> SSHConfig:
    """The config at ``path`` (default ``~/.ssh/config``), re-read when it changes."""
    path = path or DEFAULT_PATH
    full = os.path.expanduser(path)
    try:
        mtime = freshness.stat(full).st_mtime
    except OSError:
        mtime = -1.0
    cached = _cache.get(full)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    config = SSHConfig.from_file(path)
    _cache[full] = (mtime, config)
    return config


def parse_jump(spec: str) -> List[Tuple[Optional[str], str, Optional[int]]]:
    """``[user@]host[:port][,...]`` (ProxyJump syntax) as (user, host, port) hops."""
    hops = []
    for hop in spec.split(","):
        hop = hop.strip()
        if hop.startswith("ssh://"):
            hop = hop[len("ssh://"):]
        user, _, rest = hop.rpartition("@")
        host, port = rest, None
        if rest.startswith("["):
            host, _, tail = rest[1:].partition("]")
            port = tail[1:] if tail.startswith(":") else None
        elif rest.count(":") == 1:
            host, port = rest.split(":")
        if not host:
            raise SSHConfigError(f"bad jump host {hop!r} in {spec!r}")
        try:
            hops.append((user or None, host, int(port) if port else None))
        except ValueError:
            raise SSHConfigError(f"bad port in jump host {hop!r}") from None
    return hops


__all__ = ["DEFAULT_PATH", "SUPPORTED_KEYWORDS", "HostOptions", "SSHConfig", "SSHConfigError",
           "host_key_policy_of", "load", "local_user", "split_line", "parse_jump"]
