#!/usr/bin/env bash
# The documentation site: sets up the machine, then builds site/ from docs/ and mkdocs.yml
# with warnings as errors (broken links and references fail). Open site/index.html, or serve
# it: .venv/bin/python -m http.server -d site 8000 --bind 127.0.0.1
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
root=$PWD
# From / so that the installed packages (ssh2 compiled, with its stubs) are documented.
cd / && NO_MKDOCS_2_WARNING=1 "$root/.venv/bin/python" -m mkdocs build --strict \
    -f "$root/mkdocs.yml" -d "$root/site"
echo "[docs] built $root/site/index.html"
