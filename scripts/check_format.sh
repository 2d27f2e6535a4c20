#!/usr/bin/env bash
# The format check of `make test`: every tracked C++/CUDA file must be as clang-format (the
# repository's .clang-format, Google style at 100 columns) writes it. Fix with:
#   git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
#   scripts/check_format.sh [REPO_DIR]    (or one file: scripts/check_format.sh --file F)
set -euo pipefail
command -v clang-format >/dev/null || {
  echo "clang-format is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
if [ "${1:-}" = --file ]; then
  files=("$2")
else
  cd "${1:-$(dirname "$0")/..}"
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not clang-formatted (${#bad[@]} of ${#files[@]}):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i <file>..." >&2
  exit 1
fi
echo "format: ${#files[@]} files clang-formatted"
