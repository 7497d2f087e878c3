"""Print the CPython interpreters this machine has that the project supports: one
per minor version >= pyproject's requires-python, the newest patch release of it,
from pyenv's versions (``pyenv root``) or else ``python3.N`` on PATH."""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def minimum_minor() -> int:
    with open(os.path.join(HERE, "..", "pyproject.toml"), encoding="utf-8") as fh:
        spec = re.search(r'^requires-python\s*=\s*">=\s*3\.(\d+)"', fh.read(), re.M)
    if not spec:
        sys.exit("pyproject.toml: requires-python is not of the form \">=3.N\"")
    return int(spec.group(1))


def pyenv_pythons() -> dict:
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = {}
    versions = os.path.join(root, "versions")
    names = os.listdir(versions) if os.path.isdir(versions) else []
    for name in names:
        match = re.fullmatch(r"3\.(\d+)\.(\d+)", name)  # CPython releases only
        if match:
            minor, patch = int(match.group(1)), int(match.group(2))
            python = os.path.join(versions, name, "bin", f"python3.{minor}")
            if os.access(python, os.X_OK) and patch >= found.get(minor, (-1, ""))[0]:
                found[minor] = (patch, python)
    return {minor: python for minor, (_, python) in found.items()}


def main() -> None:
    lowest = minimum_minor()
    found = {m: p for m, p in pyenv_pythons().items() if m >= lowest}
    for minor in range(lowest, lowest + 20):
        if minor not in found and shutil.which(f"python3.{minor}"):
            found[minor] = shutil.which(f"python3.{minor}")
    for minor in sorted(found):
        print(found[minor])


if __name__ == "__main__":
    main()
