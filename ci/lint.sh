#!/usr/bin/env bash
# ruff (pyflakes, pycodestyle, bugbear) and mypy over the package, the ssh2 stubs, the
# tests, benchmarks and build scripts, as configured in pyproject.toml; exits non-zero
# on any finding. Needs the test extra installed (bash ci/setup.sh does that).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "[lint] ruff check"
.venv/bin/ruff check
echo "[lint] mypy"
.venv/bin/mypy
