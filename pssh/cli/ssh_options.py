"""``-O OPTION``: OpenSSH client options on the command line, as ``ssh -o`` takes them.

Each is an ssh_config(5) line (``Key=Value`` or ``Key Value``) read as if it were at
the top of the ssh config, before ``~/.ssh/config`` (or ``-F FILE``): the first value
obtained for a keyword wins, so an earlier ``-O`` wins over a later one and over the
file. The flags that say the same thing (``--port``, ``-l``, ``--known-hosts``,
``--host-key-policy``, ``-J``, ``--connect-timeout``...) win over ``-O``: a
setting given by its own flag is the most specific thing said.

A keyword OpenSSH does not know is an error, as it is for ``ssh -o``. One that
OpenSSH knows and pssh does not use is ignored with a warning, as ssh does with the
options it cannot honour, except those whose being ignored would connect by
another route than the one asked for: those are refused.
"""
from __future__ import annotations

import sys
from typing import List

from pssh.cli.hosts import UsageError
from pssh.core.openssh_keywords import OPENSSH_KEYWORDS
from pssh.core.ssh_config import SUPPORTED_KEYWORDS, SSHConfig, SSHConfigError, split_line

#: How a config file's blocks and inclusions are made: meaningless on one line.
_FILE_STRUCTURE = frozenset({"host", "match", "include"})
#: Known to OpenSSH, not to pssh, and ignoring them would connect another way (through
#: no proxy, from another local address) than the user asked for.
_REFUSED = frozenset({"proxycommand", "proxyusefdpass", "bindaddress", "bindinterface"})

ORIGIN = "-O"


def checked(texts: List[str]) -> List[str]:
    """The ``-O`` lines pssh uses, from those given: :class:`UsageError` for a keyword
    that does not exist, a value that is wrong or a keyword refused; a warning on stderr
    for each keyword ignored."""
    kept: List[str] = []
    for text in texts:
        try:
            parsed = split_line(text, f"{ORIGIN} {text}")
        except SSHConfigError as err:
            raise UsageError(str(err)) from None
        if parsed is None:
            raise UsageError(f"{ORIGIN} {text!r}: expected an ssh_config option, "
                             f"as in -O StrictHostKeyChecking=no")
        keyword = parsed[0]
        name = text.strip().split("=")[0].split()[0]
        if keyword not in OPENSSH_KEYWORDS:
            raise UsageError(f"{ORIGIN} {name}: no such ssh_config option")
        if keyword in _FILE_STRUCTURE:
            raise UsageError(f"{ORIGIN} {name}: a config file's structure, not an option: "
                             f"use -F FILE")
        if keyword in _REFUSED:
            raise UsageError(f"{ORIGIN} {name}: not supported by pssh (it would connect "
                             f"without it); -J HOST gives jump hosts")
        if keyword not in SUPPORTED_KEYWORDS:
            sys.stderr.write(f"pssh: warning: {ORIGIN} {name}: an OpenSSH option pssh does "
                             f"not use: ignored\n")
            continue
        kept.append(text)
    try:  # every value checked now, rather than once per host when it connects
        SSHConfig.layered(kept, origin=ORIGIN).lookup("localhost")
    except SSHConfigError as err:
        raise UsageError(str(err)) from None
    return kept
