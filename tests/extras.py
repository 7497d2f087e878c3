"""What the tests need beyond pssh itself: each optional module, with the extra of
pyproject.toml that installs it.

A test that needs a missing one fails at once, saying what to install: it never skips
(a skipped test passes CI while testing nothing), and never waits for something the
missing module was to do (a command line that exits at once, awaited for minutes).
"""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

import pytest

#: Importable name -> the extra of pyproject.toml's optional-dependencies holding it.
EXTRA_OF = {
    "dask": "dask", "distributed": "dask",
    "uvloop": "aio",
    "asyncssh": "test", "grafana_foundation_sdk": "test", "ClusterShell": "test",
    "mkdocs": "docs", "selenium": "docs",
    "paramiko": "bench", "hussh": "bench", "influxdb_client": "bench", "matplotlib": "bench",
    "pytest_benchmark": "bench",
}


def install_command(*modules: str) -> str:
    """The pip command that installs ``modules``."""
    extras = sorted({EXTRA_OF[m.split(".")[0]] for m in modules})
    return f"pip install 'pssh2[{','.join(extras)}]'"


def missing(*modules: str) -> list:
    """Those of ``modules`` that cannot be imported here."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(*modules: str) -> None:
    """Fail the test now (or the module's collection) unless ``modules`` can be imported,
    naming the install command."""
    absent = missing(*modules)
    if absent:
        pytest.fail(f"this test needs {', '.join(absent)}, not installed: "
                    f"{install_command(*absent)}", pytrace=False)


def imported(module: str) -> ModuleType:
    """``import module``, failing as :func:`require` when it is missing."""
    require(module)
    return importlib.import_module(module)


#: For parameters and tests: ``@needs("dask", "distributed")`` (checked by conftest.py
#: before the test runs).
needs = pytest.mark.needs
