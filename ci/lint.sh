#!/usr/bin/env bash
# The static checks, configured in pyproject.toml: ruff (pyflakes, pycodestyle, bugbear)
# over the package, the ssh2 stubs, the tests, benchmarks and build scripts; mypy over pssh
# and the stubs; stubtest, the stubs against the compiled ssh2 installed in .venv. Exits
# non-zero on any finding. Needs the test extra installed (bash ci/setup.sh does that).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
echo "[lint] ruff check"
.venv/bin/ruff check
echo "[lint] mypy"
.venv/bin/mypy
echo "[lint] stubtest: ssh2's stubs against its compiled modules"
# From / so that the installed, compiled ssh2 is imported; MYPYPATH makes the checkout's
# stubs the ones checked. The allowlist names the differences that are meant.
(cd / && MYPYPATH="$root" "$root/.venv/bin/python" -m mypy.stubtest ssh2 --ignore-missing-stub \
    --allowlist "$root/ci/stubtest-allowlist.txt")
