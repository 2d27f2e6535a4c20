// Writes variants of the real Llama 2 tokenizer.json / tokenizer_config.json that exercise the
// SentencePiece-style pipelines neither shipped file uses, for run_agreement.sh:
//   llama2_ms_always.json, llama2_ms_first.json, llama2_ms_never.json
//       no normalizer; Metaspace pre-tokenizer (prepend_scheme always / first / never, split false)
//       and Metaspace decoder (transformers.js: its Metaspace never splits)
//   llama2_ms_split.json
//       Metaspace with the pre-0.19 field add_prefix_space=true and the default split (true), the
//       form Hugging Face tokenizers 0.13 reads (hf-rust reference)
//   llama2_nonlegacy_config.json
//       tokenizer_config.json with legacy=false (transformers.js' LlamaTokenizer non-legacy path)
//   node make_variants.mjs LLAMA2_MODELS_DIR OUT_DIR
import { readFileSync, writeFileSync } from "node:fs";

const [dir, out] = process.argv.slice(2);
const base = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const config = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));

function metaspace(scheme, extra) {
  const t = structuredClone(base);
  t.normalizer = null;
  const prefix = scheme !== "never";
  t.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", add_prefix_space: prefix, ...extra };
  if (scheme) t.pre_tokenizer.prepend_scheme = scheme;
  t.decoder = { type: "Metaspace", replacement: "\u2581", add_prefix_space: prefix };
  if (scheme) t.decoder.prepend_scheme = scheme;
  return t;
}

for (const scheme of ["always", "first", "never"]) {
  writeFileSync(`${out}/llama2_ms_${scheme}.json`, JSON.stringify(metaspace(scheme, { split: false })));
}
writeFileSync(`${out}/llama2_ms_split.json`, JSON.stringify(metaspace(null, {})));
writeFileSync(`${out}/llama2_nonlegacy_config.json`, JSON.stringify({ ...config, legacy: false }));
