#!/usr/bin/env bash
# Set up a fresh Debian machine: system packages, a virtualenv in .venv, and
# this project installed into it (libssh2 1.11.1 is built from Debian's
# source package when the system's is older than 1.11).
#   bash ci/setup.sh           all of it
#   bash ci/setup.sh system    the system packages only (ci/test.sh starts the wheels' build
#                              after them, beside the rest)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential dpkg-dev pkg-config libssl-dev zlib1g-dev
          openssh-server openssh-client python3-venv python3-dev
          influxdb victoria-metrics
          iproute2 iptables libnetfilter-queue-dev  # the delayed-loopback benchmark
          chromium chromium-driver                  # the docs site checked in a browser
          bc                                        # asyncssh's math_client example, run by the tests
          strace linux-perf                         # system calls counted, CPU sampled by part
          debootstrap patch)                        # ci/wheels.sh's old Debian root
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "[setup] installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = system ]; then
    exit 0
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip
# Every extra the tests use, named (tests/extras.py says which module comes from which):
# a test needing a missing one fails, it is never skipped.
echo "[setup] building and installing (pip install .[test,aio,dask,bench,docs])"
.venv/bin/pip install -q ".[test,aio,dask,bench,docs]"
# From / so that the installed package, not the source tree, is imported.
(cd / && "$OLDPWD/.venv/bin/python" -c "import ssh2.utils; print('[setup] ssh2 with libssh2', ssh2.utils.version())")
