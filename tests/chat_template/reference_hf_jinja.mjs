// Reference renderer: @huggingface/jinja, the Jinja implementation of transformers.js.
//   node reference_hf_jinja.mjs [--now S] [--bos T] [--eos T] TEMPLATE CORPUS.jsonl
// TEMPLATE is a .jinja file or a tokenizer_config.json. Prints one JSON value per corpus line:
// the rendered string, or {"error": message}. strftime_now sees the fixed time --now (the
// library reads `new Date()`, so Date's no-argument constructor is pinned).
import fs from "node:fs";
import { Template } from "@huggingface/jinja";

const args = process.argv.slice(2);
const opts = { now: 0, bos: "", eos: "" };
while (args.length > 2 && args[0].startsWith("--")) {
  opts[args[0].slice(2)] = args[1];
  args.splice(0, 2);
}
const [templatePath, corpusPath] = args;

const RealDate = Date;
const fixedMs = Number(opts.now) * 1000;
globalThis.Date = class extends RealDate {
  constructor(...a) {
    super(...(a.length ? a : [fixedMs]));
  }
  static now() {
    return fixedMs;
  }
};

const tokenText = (v) => (v && typeof v === "object" ? (v.content ?? "") : (v ?? ""));
let source, bos = opts.bos, eos = opts.eos;
if (templatePath.endsWith(".json")) {
  const config = JSON.parse(fs.readFileSync(templatePath, "utf8"));
  source = config.chat_template;
  if (Array.isArray(source)) source = source.find((t) => t.name === "default").template;
  bos = tokenText(config.bos_token);
  eos = tokenText(config.eos_token);
} else {
  source = fs.readFileSync(templatePath, "utf8");
}

let template, compileError = null;
try {
  template = new Template(source);
} catch (e) {
  compileError = String(e.message ?? e);
}
const out = [];
for (const line of fs.readFileSync(corpusPath, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const conv = JSON.parse(line);
  if (compileError !== null) {
    out.push(JSON.stringify({ error: compileError }));
    continue;
  }
  const context = { tools: null, documents: null };
  for (const [k, v] of Object.entries(conv)) {
    if (k !== "messages" && k !== "add_generation_prompt") context[k] = v;
  }
  Object.assign(context, {
    messages: conv.messages,
    add_generation_prompt: Boolean(conv.add_generation_prompt),
    bos_token: bos,
    eos_token: eos,
  });
  try {
    out.push(JSON.stringify(template.render(context)));
  } catch (e) {
    out.push(JSON.stringify({ error: String(e.message ?? e) }));
  }
}
process.stdout.write(out.join("\n") + "\n");
