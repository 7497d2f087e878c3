#!/usr/bin/env bash
# The test suite: sets up the machine, then runs pytest against real sshd
# servers that the tests start on loopback themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# From tests/ so that the installed package, not the source tree, is imported.
cd tests
exec ../.venv/bin/python -m pytest -p no:cacheprovider "$@"
