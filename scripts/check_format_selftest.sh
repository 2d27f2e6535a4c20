#!/usr/bin/env bash
# Proves the format check can fail: a misformatted file (under the repository's .clang-format) is
# refused, and the same file once clang-formatted passes.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$repo/.clang-format" "$dir/"
printf 'int  main( ){return 0;}\n' > "$dir/bad.cc"
if "$repo/scripts/check_format.sh" --file "$dir/bad.cc" 2>/dev/null; then
  echo "the format check accepted a misformatted file" >&2; exit 1
fi
clang-format -i "$dir/bad.cc"
"$repo/scripts/check_format.sh" --file "$dir/bad.cc"
echo "format check self-test: a misformatted file is refused, the formatted one accepted"
