#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run a command in parallel on
# an embedded set of local OpenSSH hosts (127.0.0.1..N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh >&2
cd /
exec "$OLDPWD/.venv/bin/python" -m pssh.demo "$@"
