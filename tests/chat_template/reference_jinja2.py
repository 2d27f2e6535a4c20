#!/usr/bin/env python3
"""Reference renderer: Python jinja2 configured as Hugging Face transformers configures it.

transformers (chat_template_utils._compile_jinja_template) renders chat templates with
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
a tojson filter that is json.dumps(x, ensure_ascii=False, indent, separators, sort_keys), and the
globals raise_exception and strftime_now. Here strftime_now sees a fixed time (--now).

    reference_jinja2.py [--now S] [--bos T] [--eos T] TEMPLATE CORPUS.jsonl
    reference_jinja2.py [--now S] --snippets SNIPPETS.txt CORPUS.jsonl
TEMPLATE is a .jinja file or a tokenizer_config.json. Prints one JSON value per corpus line: the
rendered string, or {"error": message}. With --snippets every line of SNIPPETS.txt is a template
(lines starting with "## " are comments), rendered with every corpus line in turn.
"""
import argparse
import datetime
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def token_text(v):
    if isinstance(v, dict):
        return v.get("content", "")
    return v or ""


def load(path, bos, eos):
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        template = config.get("chat_template")
        if isinstance(template, list):
            template = next(t["template"] for t in template if t.get("name") == "default")
        return template, token_text(config.get("bos_token")), token_text(config.get("eos_token"))
    with open(path, encoding="utf-8") as f:
        return f.read(), bos, eos


def make_env(now):
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_all(env, source, bos, eos, corpus):
    try:
        template = env.from_string(source)
        compile_error = None
    except Exception as e:  # noqa: BLE001 - any failure is an "error" result
        compile_error = str(e)
    for conv in corpus:
        if compile_error is not None:
            print(json.dumps({"error": compile_error}, ensure_ascii=False))
            continue
        context = {k: v for k, v in conv.items() if k not in ("messages", "add_generation_prompt")}
        context.setdefault("tools", None)
        context.setdefault("documents", None)
        context.update(messages=conv["messages"],
                       add_generation_prompt=bool(conv.get("add_generation_prompt")),
                       bos_token=bos, eos_token=eos)
        try:
            out = template.render(**context)
        except Exception as e:  # noqa: BLE001
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out, ensure_ascii=False))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--now", type=int, default=0)
    parser.add_argument("--bos", default="")
    parser.add_argument("--eos", default="")
    parser.add_argument("--snippets", help="every line is a template (## starts a comment)")
    parser.add_argument("paths", nargs="+", help="[TEMPLATE] CORPUS.jsonl")
    args = parser.parse_args()
    env = make_env(datetime.datetime.fromtimestamp(args.now))
    with open(args.paths[-1], encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    if args.snippets:
        with open(args.snippets, encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if line and not line.startswith("## "):
                    render_all(env, line, args.bos, args.eos, corpus)
        return 0
    source, bos, eos = load(args.paths[0], args.bos, args.eos)
    render_all(env, source, bos, eos, corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
