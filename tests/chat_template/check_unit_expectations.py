#!/usr/bin/env python3
"""Checks the expectations written in the C++ unit tests against python jinja2.

The unit tests (tests/unit/chat_template/*_test.cc) state expected renderings as literals:
EXPECT_EQ(R(template[, context]), expected). This script finds those calls, renders each template
with jinja2 configured as transformers configures it, and fails when jinja2 disagrees with an
expectation, so the hand-written unit tests cannot drift from the reference.
    check_unit_expectations.py TEST.cc...
"""
import json
import re
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception

LIT = r'(?:R"\((?:.|\n)*?\)"|"(?:[^"\\]|\\.)*")'
LITS = r"((?:\s*" + LIT + r")+)"
# R(template[, context]) where each is literals or the name of a `const char* name = ...;`.
ARG = r"(?:" + LITS + r"|(\w+))"
CALL = re.compile(r"EXPECT_EQ\(R\(\s*" + ARG + r"\s*(?:,\s*" + ARG + r")?\)"
                  r"(\.substr\(0, 6\))?,\s*" + LITS + r"\);")
NAMED = re.compile(r"const char\* (\w+) =\s*" + LITS + r";")
SIMPLE = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "0": "\0"}


def c_unescape(body):
    out, i = [], 0
    while i < len(body):
        if body[i] != "\\":
            out.append(body[i])
            i += 1
        elif body[i + 1] in "ux":
            width = 4 if body[i + 1] == "u" else 2
            out.append(chr(int(body[i + 2:i + 2 + width], 16)))
            i += 2 + width
        else:
            out.append(SIMPLE[body[i + 1]])
            i += 2
    return "".join(out)


def decode(literals):
    out = ""
    for t in re.findall(LIT, literals):
        out += t[3:-2] if t.startswith('R"(') else c_unescape(t[1:-1])
    return out


def check(path):
    src = open(path, encoding="utf-8").read()
    named = [(m.start(), m.group(1), decode(m.group(2))) for m in NAMED.finditer(src)]

    def value(lits, name, at):
        if name:  # the latest definition before the call
            return [text for pos, n, text in named if n == name and pos < at][-1]
        return decode(lits) if lits else None

    checked = bad = 0
    for m in CALL.finditer(src):
        t_lits, t_name, c_lits, c_name, prefix_only, expected = m.groups()
        template = value(t_lits, t_name, m.start())
        ctx = value(c_lits, c_name, m.start()) or "{}"
        expected = decode(expected)
        try:
            got = ENV.from_string(template).render(**json.loads(ctx))
        except Exception as e:  # noqa: BLE001 - an error is a result ("ERROR: ...")
            got = "ERROR: %s" % e
        if prefix_only:
            got = got[:6]
        checked += 1
        if got != expected:
            bad += 1
            print("%s: jinja2 disagrees with the expectation for %r\n  expected %r\n  jinja2   %r"
                  % (path, template, expected, got))
    calls = len(re.findall(r"EXPECT_EQ\(R\(", src))
    print("%s: %d of %d expectations checked against jinja2, %d disagree"
          % (path, checked, calls, bad))
    return checked == calls and bad == 0


if __name__ == "__main__":
    results = [check(p) for p in sys.argv[1:]]
    sys.exit(0 if results and all(results) else 1)
