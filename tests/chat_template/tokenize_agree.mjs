// Chat tokenization agreement: the prompt ids pkv-chat-render --tokenize printed (the worker's
// ChatPromptRenderer: our Jinja renderer, then our tokenizer with special tokens recognized and
// none added) against transformers.js (@lenml/tokenizers, a fork of Hugging Face transformers.js'
// tokenizers) loaded from the same tokenizer.json and tokenizer_config.json, two ways:
//   apply_chat_template   tokenizer.apply_chat_template(messages, {add_generation_prompt,
//                         tokenize: true, return_tensor: false, ...kwargs}) as shipped: it renders
//                         with the @huggingface/jinja bundled in @lenml/tokenizers 3.7.2, an old
//                         one (no slicing, no `is string`, no tojson: it refuses Qwen3's and
//                         Gemma 3's templates outright);
//   hf-jinja-0.5          the same steps as apply_chat_template's source (template picked by
//                         get_chat_template, variables messages, add_generation_prompt, tools,
//                         documents, the seven special tokens, kwargs; then the tokenizer called
//                         with add_special_tokens=false) on @huggingface/jinja 0.5.11, the renderer
//                         upstream transformers.js 3.7 depends on.
//
//   node tokenize_agree.mjs --name NAME --model MODEL_DIR --corpus C.jsonl --ids OURS.jsonl \
//        --known KNOWN_DIFFERENCES.txt [--single-bos TOKEN]
//
// Each corpus line is {"messages": [...], "add_generation_prompt": bool, ...}; its other members
// (tools, enable_thinking, ...) are passed as apply_chat_template's kwargs. Each OURS line is a
// JSON array of ids or {"error": "..."}. Per line and reference:
//   - pairs listed for NAME in KNOWN_DIFFERENCES.txt ("NAME LINE reason" or "NAME * reason"; the
//     pairs on which @huggingface/jinja renders differently from jinja2, which we follow) are
//     skipped, whatever either side gives;
//   - both give ids: they must be identical (a mismatch prints both around the first difference);
//   - the reference refuses the conversation (its template raises, or its renderer lacks a
//     feature): skipped and counted; both refuse: likewise;
//   - we refuse and the reference does not: a failure.
// --single-bos TOKEN: every line we compared must start with exactly one TOKEN and hold no other,
// on both sides; also counted: the lines on which the reference's own encode of the rendered text
// with add_special_tokens=true would start with two (what the check is there to catch).
// Exit status 1 on any failure, or when no reference could compare a single line.
import { readFileSync } from "node:fs";

function parseArgs(argv) {
  const args = {};
  const names = { "--name": "name", "--model": "model", "--corpus": "corpus", "--ids": "ids",
                  "--known": "known", "--single-bos": "singleBos" };
  for (let i = 2; i < argv.length; i += 2) {
    if (!names[argv[i]] || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    args[names[argv[i]]] = argv[i + 1];
  }
  for (const k of ["name", "model", "corpus", "ids", "known"]) {
    if (!args[k]) throw new Error(`--${k} is required`);
  }
  return args;
}

function readLines(path) {
  return readFileSync(path, "utf8").split("\n").filter((l) => l !== "");
}

// Line numbers (1-based) listed for `name`; "*" lists them all.
function knownDifferences(path, name) {
  const lines = new Set();
  let all = false;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const parts = line.trim().split(/\s+/);
    if (line.startsWith("#") || parts.length < 2 || parts[0] !== name) continue;
    if (parts[1] === "*") all = true;
    else lines.add(Number(parts[1]));
  }
  return { has: (n) => all || lines.has(n) };
}

const SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
  "cls_token", "mask_token"];

// apply_chat_template(messages, {tokenize: true, ...options}) with `Template` as the renderer: the
// steps of transformers.js' PreTrainedTokenizer.apply_chat_template.
function applyChatTemplateOn(Template, tok, messages, options) {
  const { tools = null, documents = null, add_generation_prompt = false, ...kwargs } = options;
  const source = tok.get_chat_template({ chat_template: null, tools });
  const specials = Object.create(null);
  for (const key of SPECIAL_TOKENS) {
    const value = tok.getToken(key);
    if (value) specials[key] = value;
  }
  const text = new Template(source).render({ messages, add_generation_prompt, tools, documents,
                                             ...specials, ...kwargs });
  return tok._call(text, { add_special_tokens: false, return_tensor: false }).input_ids;
}

// {ids} or {error} for one conversation from `apply`, a function (messages, options) -> ids.
function reference(apply, conv) {
  const { messages, add_generation_prompt, ...kwargs } = conv;
  try {
    const ids = apply(messages, { ...kwargs, add_generation_prompt: add_generation_prompt === true,
                                  tokenize: true, return_tensor: false });
    return { ids: Array.from(ids, Number) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e).split("\n")[0] };
  }
}

function show(tok, ids, from, to) {
  return ids
    .slice(from, to)
    .map((id) => `${id}:${JSON.stringify(tok.model.vocab[id] ?? "?")}`)
    .join(" ");
}

function mismatch(tok, n, ours, theirs) {
  let at = 0;
  while (at < ours.length && at < theirs.length && ours[at] === theirs[at]) ++at;
  const from = Math.max(0, at - 4);
  return `line ${n}: ids differ at position ${at} (ours ${ours.length} ids, ` +
    `transformers.js ${theirs.length})\n  ours:            ${show(tok, ours, from, at + 6)}\n` +
    `  transformers.js: ${show(tok, theirs, from, at + 6)}`;
}

// Failures of the one-BOS rule in `ids` (empty when it holds).
function bosProblem(ids, bosId) {
  if (ids.length === 0 || ids[0] !== bosId) return "does not start with BOS";
  if (ids.length > 1 && ids[1] === bosId) return "starts with a doubled BOS";
  if (ids.indexOf(bosId, 1) !== -1) return `BOS again at position ${ids.indexOf(bosId, 1)}`;
  return "";
}

// Compares `ours` with one reference over the corpus; returns its summary line and failures.
function compareWith(refName, apply, ctx) {
  const { tok, corpus, ours, known, bosId, name } = ctx;
  const counts = { compared: 0, known: [], refusedByReference: [], refusedByBoth: [], doubled: 0 };
  const failures = [];
  corpus.forEach((line, i) => {
    const n = i + 1;
    const conv = JSON.parse(line);
    if (known.has(n)) return counts.known.push(n);
    const theirs = reference(apply, conv);
    const mine = ours[i];
    if (!Array.isArray(mine)) {
      if (theirs.error !== undefined) return counts.refusedByBoth.push(n);
      return failures.push(`line ${n}: we refuse (${mine.error}), ${refName} does not`);
    }
    if (theirs.error !== undefined) return counts.refusedByReference.push([n, theirs.error]);
    ++counts.compared;
    const same = mine.length === theirs.ids.length && mine.every((id, k) => id === theirs.ids[k]);
    if (!same) failures.push(mismatch(tok, n, mine, theirs.ids));
    if (bosId === null) return;
    for (const [who, ids] of [["ours", mine], [refName, theirs.ids]]) {
      const problem = bosProblem(ids, bosId);
      if (problem) failures.push(`line ${n}: ${who} ${problem}`);
    }
    const doubled = tok.encode(tok.decode(theirs.ids), { add_special_tokens: true });
    if (doubled[0] === bosId && doubled[1] === bosId) ++counts.doubled;
  });
  return { compared: counts.compared,
           summary: summarize(refName, counts, corpus.length, failures.length, bosId !== null),
           failures: failures.map((f) => `${name} vs ${refName} ${f}`) };
}

// "llama3 vs R: 51 of 54 compared, all identical; ...; skipped: ..."
function summarize(refName, counts, total, numFailures, checkedBos) {
  const reasons = new Map();  // refusal message -> lines
  for (const [n, error] of counts.refusedByReference) {
    const key = error.slice(0, 90);
    reasons.set(key, [...(reasons.get(key) ?? []), n]);
  }
  const refused = [...reasons].map(([why, lines]) => `${lines.join(",")}: ${why}`).join("; ");
  const bos = checkedBos ? `, BOS checked on each (add_special_tokens=true would double it on ` +
    `${counts.doubled})` : "";
  return `vs ${refName}: ${counts.compared} of ${total} compared, ` +
    `${numFailures ? `${numFailures} FAILURES` : "all identical"}${bos}; skipped ` +
    `${counts.known.length} known renderer differences [${counts.known.join(",")}], ` +
    `${counts.refusedByBoth.length} refused by both [${counts.refusedByBoth.join(",")}], ` +
    `${counts.refusedByReference.length} refused by the reference only` +
    (refused ? ` [${refused}]` : "");
}

const args = parseArgs(process.argv);
const { TokenizerLoader } = await import("@lenml/tokenizers");
const { Template } = await import("@huggingface/jinja");
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(`${args.model}/tokenizer.json`, "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(`${args.model}/tokenizer_config.json`, "utf8")),
});
const ctx = { tok, name: args.name, corpus: readLines(args.corpus), bosId: null,
              ours: readLines(args.ids).map((l) => JSON.parse(l)),
              known: knownDifferences(args.known, args.name) };
if (ctx.ours.length !== ctx.corpus.length) {
  console.log(`${args.name}: ${ctx.ours.length} lines of ids for ${ctx.corpus.length} conversations`);
  process.exit(1);
}
if (args.singleBos) {
  ctx.bosId = tok.model.tokens_to_ids.get(args.singleBos) ?? null;
  if (ctx.bosId === null) throw new Error(`${args.singleBos} is not a token of ${args.model}`);
}
const results = [
  compareWith("apply_chat_template", (m, o) => tok.apply_chat_template(m, o), ctx),
  compareWith("hf-jinja-0.5", (m, o) => applyChatTemplateOn(Template, tok, m, o), ctx),
];
if (results.every((r) => r.compared === 0)) {
  results[0].failures.push(`${args.name}: no conversation compared with any reference`);
}
for (const r of results) for (const f of r.failures) console.log(f);
for (const r of results) console.log(`${args.name} ${r.summary}`);
process.exit(results.some((r) => r.failures.length) ? 1 : 0);
