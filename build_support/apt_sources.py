"""The Debian mirrors this machine's apt is configured with.

Builds that fetch Debian source packages (libssh2, OpenSSL) or make an older
Debian root with debootstrap take their mirror from here, never from a host
name written into the code: the machine's owner chose the mirror (a local
cache, a snapshot, a company proxy).

Both formats apt reads are understood: one-line ``sources.list`` files
(``/etc/apt/sources.list``, ``sources.list.d/*.list``) and deb822 stanzas
(``sources.list.d/*.sources``).

Command line (used by ci/wheels.sh)::

    python -m build_support.apt_sources archive     # the Debian archive's URI
    python -m build_support.apt_sources security    # the security archive's URI (if any)
    python -m build_support.apt_sources oldest-served buster bullseye bookworm
"""
from __future__ import annotations

import glob
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field

APT_DIR = "/etc/apt"
# Suite names Debian's archive uses; an entry for one of them is Debian's.
DEBIAN_CODENAMES = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                    "oldoldstable", "oldstable", "stable", "testing", "unstable"}


class NoDebianMirror(RuntimeError):
    """apt is not configured with a Debian mirror here."""


@dataclass
class SourceEntry:
    """One apt source: a URI with its suites (as in a deb822 stanza)."""

    types: list[str]
    uris: list[str]
    suites: list[str]
    components: list[str] = field(default_factory=list)
    signed_by: str = ""

    def debian_suites(self) -> list[str]:
        """The suites of this entry that are Debian's (``bookworm-security`` included)."""
        out = []
        for suite in self.suites:
            base = suite.split("/")[0].split("-")[0]
            if base in DEBIAN_CODENAMES or "debian-archive-keyring" in self.signed_by:
                out.append(suite)
        return out


def _one_line_entries(text: str) -> list[SourceEntry]:
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        kind, rest = words[0], words[1:]
        if kind not in ("deb", "deb-src") or not rest:
            continue
        options = {}
        if rest[0].startswith("["):
            # [ opt=value ... ] may span several words.
            opts = []
            while rest:
                word = rest.pop(0)
                opts.append(word)
                if word.endswith("]"):
                    break
            for opt in " ".join(opts).strip("[] ").split():
                key, _, value = opt.partition("=")
                options[key] = value
        if len(rest) < 2:
            continue
        entries.append(SourceEntry([kind], [rest[0]], [rest[1]], rest[2:],
                                   options.get("signed-by", "")))
    return entries


def _deb822_entries(text: str) -> list[SourceEntry]:
    entries = []
    for stanza in _stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        if "uris" not in stanza or "suites" not in stanza:
            continue
        entries.append(SourceEntry(stanza.get("types", "deb").split(), stanza["uris"].split(),
                                   stanza["suites"].split(), stanza.get("components", "").split(),
                                   stanza.get("signed-by", "")))
    return entries


def _stanzas(text: str) -> list[dict[str, str]]:
    stanzas, current, key = [], {}, None
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
        elif raw[0] in " \t" and key:
            # A continuation line (e.g. an inline Signed-By key block).
            current[key] += "\n" + raw.strip()
        else:
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            current[key] = value.strip()
    return stanzas


def entries(apt_dir: str = APT_DIR) -> list[SourceEntry]:
    """Every enabled source of apt's configuration under ``apt_dir``, in apt's order."""
    found = []
    main_list = os.path.join(apt_dir, "sources.list")
    if os.path.exists(main_list):
        found += _one_line_entries(_read(main_list))
    for path in sorted(glob.glob(os.path.join(apt_dir, "sources.list.d", "*"))):
        if path.endswith(".list"):
            found += _one_line_entries(_read(path))
        elif path.endswith(".sources"):
            found += _deb822_entries(_read(path))
    return found


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _first_uri(apt_dir: str, security: bool) -> str | None:
    for entry in entries(apt_dir):
        for suite in entry.debian_suites():
            is_security = suite.endswith("-security") or suite.endswith("/updates")
            if is_security == security:
                return entry.uris[0].rstrip("/")
    return None


def debian_archive(apt_dir: str = APT_DIR) -> str:
    """The URI of the Debian archive apt uses here (e.g. ``http://<mirror>/debian``)."""
    uri = _first_uri(apt_dir, security=False)
    if uri is None:
        raise NoDebianMirror(
            f"apt on this machine has no Debian mirror configured (looked in "
            f"{apt_dir}/sources.list and {apt_dir}/sources.list.d/*.list, *.sources)")
    return uri


def debian_security(apt_dir: str = APT_DIR) -> str | None:
    """The URI of Debian's security archive apt uses here, or None."""
    return _first_uri(apt_dir, security=True)


def serves(mirror: str, suite: str, timeout: float = 30) -> bool:
    """Whether ``mirror`` has ``suite`` (its ``dists/<suite>/Release`` file)."""
    request = urllib.request.Request(f"{mirror}/dists/{suite}/Release", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    try:
        if command == "archive":
            print(debian_archive())
        elif command == "security":
            uri = debian_security()
            if uri:
                print(uri)
        elif command == "oldest-served":
            mirror = debian_archive()
            served = [suite for suite in args if serves(mirror, suite)]
            if not served:
                print(f"error: {mirror} serves none of {', '.join(args)}", file=sys.stderr)
                return 1
            print(served[0])
        else:
            print(f"error: unknown command {command!r}\n{__doc__}", file=sys.stderr)
            return 2
    except NoDebianMirror as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
