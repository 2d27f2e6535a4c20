#!/usr/bin/env python3
"""Compares pkv-chat-render's output with the two references, line by line.

    compare.py NAME OURS.jsonl JINJA2.jsonl HFJINJA.jsonl|- KNOWN_DIFFERENCES.txt

Every line must equal python jinja2's (what transformers uses): the same string, or an error on
both sides. @huggingface/jinja must agree too, except on the pairs listed in
KNOWN_DIFFERENCES.txt ("NAME LINE reason", or "NAME * reason" for every line), where it is known
to differ from jinja2; a listed pair on which it does agree with jinja2 is reported as stale (for
"*", when no line differs). Exit status 1 on any failure.
"""
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def same(a, b):
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict)  # error vs error
    return a == b


def show(v, other):
    """The value around its first difference from `other`, JSON-quoted."""
    if isinstance(v, dict) or isinstance(other, dict) or v == other:
        return json.dumps(v, ensure_ascii=False)[:300]
    at = next((i for i, (x, y) in enumerate(zip(v, other)) if x != y), min(len(v), len(other)))
    start = max(0, at - 60)
    return "[at char %d of %d] %s%s" % (at, len(v), "..." if start else "",
                                        json.dumps(v[start:at + 60], ensure_ascii=False))


def main():
    name, ours_path, py_path, js_path, known_path = sys.argv[1:6]
    ours, py = load(ours_path), load(py_path)
    js = py if js_path == "-" else load(js_path)  # "-": compared with jinja2 only
    if not len(ours) == len(py) == len(js):
        print("%s: line counts differ: ours %d jinja2 %d hf-jinja %d" % (name, len(ours), len(py), len(js)))
        return 1
    known = set()
    all_known = False
    with open(known_path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and not line.startswith("#") and parts[0] == name:
                if parts[1] == "*":
                    all_known = True
                else:
                    known.add(int(parts[1]))
    failures = 0
    for i, (o, p, j) in enumerate(zip(ours, py, js), start=1):
        if not same(o, p):
            failures += 1
            print("%s line %d: differs from jinja2\n  ours:   %s\n  jinja2: %s" % (name, i, show(o, p), show(p, o)))
        if all_known:
            continue
        if i in known:
            if same(j, p):
                failures += 1
                print("%s line %d: listed as a known hf-jinja difference but hf-jinja agrees" % (name, i))
        elif not same(o, j):
            failures += 1
            print("%s line %d: differs from @huggingface/jinja\n  ours:     %s\n  hf-jinja: %s" % (name, i, show(o, j), show(j, o)))
    if all_known and all(same(j, p) for j, p in zip(js, py)):
        failures += 1
        print("%s: listed as differing from hf-jinja on every line, but hf-jinja agrees" % name)
    errors = sum(1 for p in py if isinstance(p, dict))
    print("%s: %d pairs compared (%d where the reference raises), %s known hf-jinja differences, "
          "%d failures" % (name, len(ours), errors, "all" if all_known else len(known), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
