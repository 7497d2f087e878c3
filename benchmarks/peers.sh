#!/usr/bin/env bash
# Virtualenvs for the peer libraries measured by the benchmarks:
#   .venv-bench       paramiko, asyncssh, hussh (and this project)
#   .venv-ssh2python  ssh2-python (its module is also named ssh2)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-bench
.venv-bench/bin/pip install -q --upgrade pip
.venv-bench/bin/pip install -q "paramiko>=3" "asyncssh>=2.14" "hussh>=0.3"
python3 -m venv .venv-ssh2python
.venv-ssh2python/bin/pip install -q --upgrade pip
.venv-ssh2python/bin/pip install -q ssh2-python
for v in .venv-bench .venv-ssh2python; do $v/bin/pip list 2>/dev/null | grep -iE "paramiko|asyncssh|hussh|ssh2" ; done
# parallel-ssh's module is also named pssh: its own virtualenv.
python3 -m venv .venv-parallel-ssh
.venv-parallel-ssh/bin/pip install -q --upgrade pip
.venv-parallel-ssh/bin/pip install -q parallel-ssh
.venv-bench/bin/pip install -q fabric
.venv-parallel-ssh/bin/pip list 2>/dev/null | grep -iE "parallel-ssh|ssh2-python"
.venv-bench/bin/pip list 2>/dev/null | grep -iE "^fabric"
