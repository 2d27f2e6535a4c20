// Agreement check between pkv-tokenize and an independent tokenizer implementation:
//   --reference transformers.js  @lenml/tokenizers, a fork of Hugging Face transformers.js'
//                                tokenizers (pure JavaScript; the default)
//   --reference hf-rust          Hugging Face tokenizers (Rust, Oniguruma regexes) through its
//                                native Node binding (npm "tokenizers-linux-x64-gnu", the binary
//                                the "tokenizers" 0.13 package loads); [a, b] merges are rewritten
//                                as "a b" strings first, the only form that version reads
//
//   node agree.mjs [--reference R] --tokenizer T.json [--config tokenizer_config.json] \
//                  --corpus C.jsonl [--ids pkv_ids.txt] [--add-special-tokens] [--decoded D.jsonl]
//
// Encodes every corpus line (a JSON string literal) with the reference loaded from the same
// tokenizer.json. With --ids, compares against the ids pkv-tokenize printed for the same corpus and
// exits 1 at the first mismatching line, printing both id lists and their tokens around the first
// differing position; without --ids, prints the reference ids (one line per sample). With --decoded
// (transformers.js only: pkv-tokenize --decode-out), also checks that pkv's Decode of each line's
// ids equals the reference's decode (special tokens kept), and counts the lines where the reference
// round-trips (decode(encode(x)) == x): pkv then round-trips too.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

function parseArgs(argv) {
  const args = { addSpecial: false, reference: "transformers.js" };
  for (let i = 2; i < argv.length; ++i) {
    const a = argv[i];
    if (a === "--add-special-tokens") args.addSpecial = true;
    else if (a === "--reference") args.reference = argv[++i];
    else if (a === "--tokenizer") args.tokenizer = argv[++i];
    else if (a === "--config") args.config = argv[++i];
    else if (a === "--corpus") args.corpus = argv[++i];
    else if (a === "--ids") args.ids = argv[++i];
    else if (a === "--decoded") args.decoded = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.tokenizer || !args.corpus) throw new Error("--tokenizer and --corpus are required");
  return args;
}

function readLines(path) {
  const lines = readFileSync(path, "utf8").split("\n");
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

// A reference is { encode(text) -> Promise<number[]>, token(id) -> string }.
async function loadTransformersJs(args) {
  const { TokenizerLoader } = await import("@lenml/tokenizers");
  const tokenizerJSON = JSON.parse(readFileSync(args.tokenizer, "utf8"));
  const tokenizerConfig = args.config ? JSON.parse(readFileSync(args.config, "utf8")) : {};
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  return {
    encode: async (text) => tok.encode(text, { add_special_tokens: args.addSpecial }),
    token: (id) => tok.model.vocab[id],
    decode: (ids) => tok.decode(ids, { skip_special_tokens: false }),
  };
}

async function loadHfRust(args) {
  const { Tokenizer } = createRequire(import.meta.url)("tokenizers-linux-x64-gnu");
  const json = JSON.parse(readFileSync(args.tokenizer, "utf8"));
  json.model.merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const tok = Tokenizer.fromString(JSON.stringify(json));
  return {
    encode: async (text) =>
      (await tok.encode(text, null, { addSpecialTokens: args.addSpecial })).getIds(),
    token: (id) => tok.idToToken(id),
  };
}

function show(ref, ids, from, to) {
  return ids
    .slice(from, to)
    .map((id) => `${id}:${JSON.stringify(ref.token(id) ?? "?")}`)
    .join(" ");
}

const args = parseArgs(process.argv);
const loaders = { "transformers.js": loadTransformersJs, "hf-rust": loadHfRust };
if (!loaders[args.reference]) throw new Error(`unknown reference ${args.reference}`);
const ref = await loaders[args.reference](args);
const samples = readLines(args.corpus).map((line) => JSON.parse(line));

if (!args.ids) {
  for (const s of samples) process.stdout.write((await ref.encode(s)).join(" ") + "\n");
  process.exit(0);
}

const theirs = readLines(args.ids).map((l) => (l === "" ? [] : l.split(" ").map(Number)));
if (theirs.length !== samples.length) {
  console.error(`line count differs: corpus ${samples.length}, pkv-tokenize ${theirs.length}`);
  process.exit(1);
}
const decoded = args.decoded ? readLines(args.decoded).map((l) => JSON.parse(l)) : null;
if (decoded && (!ref.decode || decoded.length !== samples.length)) {
  console.error(`--decoded: needs transformers.js and one line per sample`);
  process.exit(1);
}
let tokens = 0;
let roundTrips = 0;
for (let i = 0; i < samples.length; ++i) {
  const want = await ref.encode(samples[i]);
  const got = theirs[i];
  tokens += want.length;
  let k = 0;
  while (k < want.length && k < got.length && want[k] === got[k]) ++k;
  if (k === want.length && k === got.length) {
    if (!decoded) continue;
    const text = ref.decode(want);
    if (text === samples[i]) ++roundTrips;
    if (text === decoded[i]) continue;
    console.error(`DECODE MISMATCH vs ${args.reference} at ${args.corpus}:${i + 1}`);
    console.error(`  ref: ${JSON.stringify(text).slice(0, 300)}`);
    console.error(`  pkv: ${JSON.stringify(decoded[i]).slice(0, 300)}`);
    process.exit(1);
  }
  console.error(`MISMATCH vs ${args.reference} at ${args.corpus}:${i + 1}: ` +
                `${JSON.stringify(samples[i]).slice(0, 300)}`);
  console.error(`  first difference at token ${k} (reference ${want.length} tokens, pkv ${got.length})`);
  console.error(`  ref: ${show(ref, want, Math.max(0, k - 3), k + 6)}`);
  console.error(`  pkv: ${show(ref, got, Math.max(0, k - 3), k + 6)}`);
  process.exit(1);
}
console.log(`agree with ${args.reference} on ${args.corpus.split("/").pop()}: ` +
            `${samples.length} lines, ${tokens} tokens ` +
            `(${args.tokenizer.split("/").slice(-3).join("/")}${args.addSpecial ? ", special" : ""})` +
            (decoded ? `; decode agrees, ${roundTrips} lines round-trip` : ""));
