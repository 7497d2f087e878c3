"""Packaging: typed stubs cover the compiled modules; libssh2 is new enough."""
import ast
import importlib
import inspect
import os

import pytest

import ssh2

PACKAGE_DIR = os.path.dirname(ssh2.__file__)
COMPILED = ["session", "channel", "sftp", "sftp_handle", "knownhost", "agent", "sftp_attributes",
            "listener", "fileinfo", "error_codes", "utils", "publickey", "handle"]


def stub_names(module_name):
    tree = ast.parse(open(os.path.join(PACKAGE_DIR, f"{module_name}.pyi")).read())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
                {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names, members


@pytest.mark.parametrize("module_name", COMPILED)
def test_stub_covers_public_api(module_name):
    module = importlib.import_module(f"ssh2.{module_name}")
    names, members = stub_names(module_name)
    public = {n for n in dir(module) if not n.startswith("_")
              and getattr(getattr(module, n), "__module__", module.__name__) == module.__name__
              and not inspect.ismodule(getattr(module, n))}
    public -= {"log"}
    assert public - names == set()
    for cls_name, stubbed in members.items():
        cls = getattr(module, cls_name)
        methods = {n for n, v in vars(cls).items() if not n.startswith("_")}
        assert methods - stubbed == set(), cls_name


def test_py_typed_and_bundled_library():
    assert os.path.exists(os.path.join(PACKAGE_DIR, "py.typed"))
    from ssh2.utils import version
    major, minor = (int(p) for p in version().split(".")[:2])
    assert (major, minor) >= (1, 11)


def test_importing_the_bindings_loads_nothing_they_do_not_need():
    # Start-up is part of every short-lived script: these stdlib modules cost
    # 5-30 ms each and the bindings use none of them at import.
    import subprocess
    import sys
    heavy = ["logging", "enum", "typing", "functools", "re", "tempfile", "secrets", "hashlib"]
    probe = ("import sys\nbefore = set(sys.modules)\nimport ssh2.session, ssh2.sftp, ssh2.channel\n"
             f"print(sorted(m for m in {heavy!r} if m in sys.modules and m not in before))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd="/",
                         check=True)
    assert out.stdout.strip() == "[]"


def test_importing_the_clients_leaves_transfer_only_modules_for_later():
    # tempfile (with shutil, random, bz2 and lzma behind it) is only needed by
    # a download: importing it for every command cost ~6 ms of start-up.
    import subprocess
    import sys
    probe = ("import sys\nimport pssh.clients\n"
             "print(sorted(m for m in ('tempfile', 'shutil', 'bz2', 'lzma') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd="/",
                         check=True)
    assert out.stdout.strip() == "[]"


def test_every_package_of_the_checkout_is_listed_for_installing():
    # A subpackage missing from pyproject's list works from a checkout, not installed.
    import tomllib
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "pyproject.toml"), "rb") as fh:
        listed = set(tomllib.load(fh)["tool"]["setuptools"]["packages"])
    found = {os.path.relpath(d, repo).replace(os.sep, ".")
             for top in ("pssh", "ssh2", "benchmarks")
             for d, _, files in os.walk(os.path.join(repo, top)) if "__init__.py" in files}
    assert found - listed == set(), "packages missing from pyproject.toml"
    # A package listed that is gone (moved or deleted) fails the build itself.
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"
