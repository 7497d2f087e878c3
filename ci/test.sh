#!/usr/bin/env bash
# The test suite: sets up the machine, runs the static checks (ci/lint.sh), then runs pytest
# against real sshd servers that the tests start on loopback themselves. Without arguments it
# also builds the wheels and smoke-runs each where users install it (ci/wheels.sh), beside
# the suite; with arguments (pytest options) it skips the wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
phase() { echo "[ci] $* at $((SECONDS - started)) s"; }
bash ci/setup.sh system
phase "system packages ready"
if [ $# -eq 0 ]; then
    # The wheels build beside the rest: the set-up below (downloads, one build), the
    # static checks and the suite (most of it waits on servers and subprocesses, most of
    # the build on the compiler; the whole run was 21 minutes one after the other).
    # Started before the set-up, its first minutes (debootstrap, downloads) fill the
    # CPU the set-up leaves idle. tests/test_wheels.py waits for the build's end and
    # fails with its log if it failed, so that its result is in pytest's summary, the
    # run's last line.
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    mkdir -p build
    export PSSH_TESTS_WHEELS_LOG=$PWD/build/wheels.log
    # The wheel of the newest supported Python, built in the old root and smoke-run here:
    # the others are the same C built against other headers, and each costs one to two
    # minutes of CPU on a machine that the build and the suite keep fully busy (the whole
    # run must stay under 20 minutes: with the oldest's too, or with the smoke run in the
    # old root and the Python built there for it, about 2.5 CPU-minutes, it took just over
    # 20). The oldest Python's syntax and library are checked by ruff and mypy (target
    # 3.10, ci/lint.sh); the wheel's glibc needs by auditwheel. `bash ci/wheels.sh` on its
    # own (as users build the wheels) builds them all and smoke-runs them in the root too.
    mapfile -t supported < <(python3 ci/supported_pythons.py)
    export WHEEL_PYTHONS="$(basename "${supported[-1]}" | sed 's/^python//')"
    rm -f "$PSSH_TESTS_WHEELS_LOG" "$PSSH_TESTS_WHEELS_LOG.status"
    # In a session of its own, so that it can be ended as a whole. The status file is
    # written last and whole (renamed into place): its presence is the build's end.
    $sudo env WHEEL_PYTHONS="$WHEEL_PYTHONS" WHEEL_ROOT_SMOKE=0 setsid bash -c \
        'bash ci/wheels.sh >"$1" 2>&1; echo $? >"$1.part"; mv "$1.part" "$1.status"' \
        wheels "$PSSH_TESTS_WHEELS_LOG" &
    wheels=$!
    # A run cut short ends the build too (wheels.sh's mounts are in a namespace of its
    # own: they go with it).
    trap '$sudo kill -TERM -- -"$wheels" 2>/dev/null || true' EXIT
fi
bash ci/setup.sh
phase "package built and installed"
# Lint and type checks (settings in pyproject.toml): a finding fails the run within
# seconds, before the suite.
bash ci/lint.sh
phase "static checks passed"
# From tests/ so that the installed package, not the source tree, is imported.
cd tests
# Three workers (pytest-xdist) on this two-core machine, each taking whole test files
# (their module fixtures are servers): most tests wait on servers and subprocesses, so a
# third worker shortened the run (803 s with two, 618 s with three, on a smaller suite)
# without making the tests depend on load, which they must not. Today the suite alone
# takes about 750 s with three and keeps both cores busy: what shortens it now is less
# CPU per test, not more workers. They share no loopback address
# (tests/loopback.py gives each worker its own /16), no marker and no fixed port.
# The slowest tests are listed before the summary: the whole CI run must stay under
# 20 minutes, and this shows where the time goes.
../.venv/bin/python -m pytest -p no:cacheprovider -n 3 --dist loadfile --durations=30 "$@"
