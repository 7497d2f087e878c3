"""The checkout the tests came from, and copies of its source.

A test that builds or runs the checkout works on a copy (:func:`copy_source`): a build
writes ``build/`` and ``*.egg-info`` into the tree it builds, and the checkout may be
read-only (tests run from a packaged source tree, or a CI cache) or somewhere else
entirely: the suite must pass wherever it is (tests/test_checkout_location.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

#: The checkout: the folder holding tests/.
REPO = Path(__file__).resolve().parent.parent

#: What builds, runs and tools leave in a checkout (.gitignore's), and git's own: never
#: copied. ``ssh2``'s generated C is left out apart (``ssh2/c`` holds declarations).
NOT_SOURCE = (".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", "*.so",
              "*.so.*", ".pytest_cache", ".mypy_cache", ".ruff_cache", "site")


def copy_source(destination: Path) -> Path:
    """The checkout's source, as it is in the working tree (uncommitted changes
    included), copied to ``destination`` (which must not exist yet); returns it."""
    skip = shutil.ignore_patterns(*NOT_SOURCE)

    def ignore(folder: str, names: list) -> set:
        skipped = set(skip(folder, names))
        if Path(folder) == REPO / "ssh2":
            skipped.update(name for name in names if name.endswith(".c"))
        return skipped

    shutil.copytree(REPO, destination, ignore=ignore, symlinks=True)
    return Path(destination)


__all__ = ["NOT_SOURCE", "REPO", "copy_source"]
