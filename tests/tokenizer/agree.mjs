// Agreement check between pkv-tokenize and transformers.js (@lenml/tokenizers, a fork of
// Hugging Face transformers.js' tokenizers, written by neither us nor the model authors).
//
//   node agree.mjs --tokenizer T.json [--config tokenizer_config.json] --corpus C.jsonl \
//                  [--ids pkv_ids.txt] [--add-special-tokens]
//
// Encodes every corpus line (a JSON string literal) with the JS tokenizer loaded from the same
// tokenizer.json. With --ids, compares against the ids pkv-tokenize printed for the same corpus and
// exits 1 at the first mismatching line, printing both id lists and their tokens around the first
// differing position; without --ids, prints the JS ids (one line per sample).
import { readFileSync } from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";

function parseArgs(argv) {
  const args = { addSpecial: false };
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--add-special-tokens") args.addSpecial = true;
    else if (a === "--tokenizer") args.tokenizer = argv[++i];
    else if (a === "--config") args.config = argv[++i];
    else if (a === "--corpus") args.corpus = argv[++i];
    else if (a === "--ids") args.ids = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.tokenizer || !args.corpus) throw new Error("--tokenizer and --corpus are required");
  return args;
}

function readLines(path) {
  const text = readFileSync(path, "utf8");
  const lines = text.split("\n");
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

function show(tokenizer, ids, from, to) {
  return ids
    .slice(from, to)
    .map((id) => `${id}:${JSON.stringify(tokenizer.model.vocab[id] ?? "?")}`)
    .join(" ");
}

const args = parseArgs(process.argv);
const tokenizerJSON = JSON.parse(readFileSync(args.tokenizer, "utf8"));
const tokenizerConfig = args.config ? JSON.parse(readFileSync(args.config, "utf8")) : {};
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const samples = readLines(args.corpus).map((line) => JSON.parse(line));
const encode = (text) => tokenizer.encode(text, { add_special_tokens: args.addSpecial });

if (!args.ids) {
  for (const s of samples) process.stdout.write(encode(s).join(" ") + "\n");
  process.exit(0);
}

const theirs = readLines(args.ids).map((l) => (l === "" ? [] : l.split(" ").map(Number)));
if (theirs.length !== samples.length) {
  console.error(`line count differs: corpus ${samples.length}, pkv-tokenize ${theirs.length}`);
  process.exit(1);
}
let tokens = 0;
for (let i = 0; i < samples.length; ++i) {
  const want = encode(samples[i]);
  const got = theirs[i];
  tokens += want.length;
  let k = 0;
  while (k < want.length && k < got.length && want[k] === got[k]) ++k;
  if (k === want.length && k === got.length) continue;
  console.error(`MISMATCH at corpus line ${i + 1}: ${JSON.stringify(samples[i]).slice(0, 300)}`);
  console.error(`  first difference at token ${k} (js ${want.length} tokens, pkv ${got.length})`);
  console.error(`  js : ${show(tokenizer, want, Math.max(0, k - 3), k + 6)}`);
  console.error(`  pkv: ${show(tokenizer, got, Math.max(0, k - 3), k + 6)}`);
  process.exit(1);
}
console.log(`agree: ${samples.length} lines, ${tokens} tokens identical (${args.tokenizer})`);
