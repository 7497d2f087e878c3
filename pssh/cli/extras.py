"""Optional extras the command line can reach, checked before a run starts: an option
that needs a package that is not installed ends the command with one line naming the
extra and how to install it (exit 2), never with a traceback half-way through a run."""
from __future__ import annotations

import importlib.util
from typing import Dict, Tuple

#: An extra of pyproject.toml's optional-dependencies -> the modules it installs that
#: the command line imports. (influxdb sinks speak plain HTTP, uvloop is pssh.aio's and
#: the benchmarks' packages are not reachable from ``pssh``: none of them is here.)
EXTRAS: Dict[str, Tuple[str, ...]] = {"dask": ("dask", "distributed")}


class MissingExtra(Exception):
    """An option needs an optional extra that is not installed (the message says which,
    and the install command)."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that cannot import, a broken spec
        return False


def require(extra: str, option: str) -> None:
    """:class:`MissingExtra` unless every module of ``extra`` (which ``option`` needs)
    can be imported."""
    absent = [m for m in EXTRAS[extra] if not installed(m)]
    if absent:
        raise MissingExtra(f"{option} needs the optional extra '{extra}' "
                           f"({' and '.join(EXTRAS[extra])}; missing: {', '.join(absent)}): "
                           f"pip install 'pssh2[{extra}]'")
