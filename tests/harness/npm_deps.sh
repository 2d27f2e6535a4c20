# Sourced by the test scripts that run a reference nobody here wrote on Node (chat templates,
# tokenizers, the openai SDK): the node check and the pinned npm install, in one place.
#   require_node                       fails with what to do when node/npm are missing
#   ensure_npm_packages DIR PKG...     `npm ci` in DIR (its package.json/lock pin the versions)
#                                      unless every PKG is already in DIR/node_modules
# The install runs under flock on DIR/package.json: several build trees may run these tests at
# once and must not race on one node_modules.

require_node() {
  local tool
  for tool in node npm; do
    command -v "$tool" >/dev/null ||
      { echo "$tool is not installed (scripts/setup.sh installs it)" >&2; return 1; }
  done
}

npm_packages_present() {
  local dir="$1" pkg
  shift
  for pkg in "$@"; do
    [[ -f "$dir/node_modules/$pkg/package.json" ]] || return 1
  done
}

ensure_npm_packages() {
  local dir="$1"
  npm_packages_present "$@" && return 0
  (
    flock 9
    if ! npm_packages_present "$@"; then
      cd "$dir" && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund; } >&2
    fi
  ) 9<"$dir/package.json"
}
