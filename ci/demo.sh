#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run a command in parallel on
# 20 embedded local OpenSSH hosts (127.0.0.1..20) with the pssh command line.
# Arguments, if any, replace the default: bash ci/demo.sh run -H "h1 h2" -- uptime
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh >&2
cd /
if [ $# -eq 0 ]; then
    set -- run --embedded 20 -- 'uname -sr; echo "$SSH_CONNECTION" | cut -d" " -f3'
fi
exec "$OLDPWD/.venv/bin/pssh" "$@"
