#!/usr/bin/env bash
# The test suite: sets up the machine, runs the static checks (ci/lint.sh), then runs pytest
# against real sshd servers that the tests start on loopback themselves. Without arguments it
# first builds the wheels and smoke-runs each where users install it
# (ci/wheels.sh); with arguments (pytest options) it skips the wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# Lint and type checks (settings in pyproject.toml): a finding fails the run within
# seconds, before the wheels and the suite.
bash ci/lint.sh
if [ $# -eq 0 ]; then
    # Before pytest, so that pytest's summary stays the run's last line.
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo bash ci/wheels.sh
fi
# From tests/ so that the installed package, not the source tree, is imported.
cd tests
# Three workers (pytest-xdist) on this two-core machine, each taking whole test files
# (their module fixtures are servers): most tests wait on servers and subprocesses, so a
# third worker shortens the run (the whole suite: 803 s with two, 618 s with three) without
# making the tests depend on load, which they must not. They share no loopback address
# (tests/loopback.py gives each worker its own /16), no marker and no fixed port.
# The slowest tests are listed before the summary: the whole CI run must stay under
# 20 minutes, and this shows where the time goes.
exec ../.venv/bin/python -m pytest -p no:cacheprovider -n 3 --dist loadfile --durations=30 "$@"
