#!/usr/bin/env bash
# Installs the pinned `openai` npm package into tests/openai/node_modules when missing (under a
# lock: several build trees may run this at once), then runs sdk_check.mjs with the arguments.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v node >/dev/null || { echo "node is not installed (make setup installs it)" >&2; exit 1; }
if [[ ! -f "$here/node_modules/openai/package.json" ]]; then
  (
    flock 9
    if [[ ! -f "$here/node_modules/openai/package.json" ]]; then
      cd "$here" && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund; } >&2
    fi
  ) 9<"$here/package.json"
fi
exec node "$here/sdk_check.mjs" "$@"
