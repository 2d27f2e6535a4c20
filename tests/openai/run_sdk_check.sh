#!/usr/bin/env bash
# Installs the pinned `openai` npm package into tests/openai/node_modules when missing
# (tests/harness/npm_deps.sh), then runs sdk_check.mjs with the arguments.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../harness/npm_deps.sh"
require_node
ensure_npm_packages "$here" openai
exec node "$here/sdk_check.mjs" "$@"
