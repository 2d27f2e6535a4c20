#!/usr/bin/env python3
"""Writes the corpora of the tokenizer agreement test: one JSON string literal per line.

corpus.jsonl is checked against every reference; corpus_hf_only.jsonl holds the characters where
transformers.js is known to differ from Hugging Face's own (Rust, Oniguruma) tokenizers, and is
checked against the Rust reference only; corpus_js_only.jsonl holds words whose encoding depends on
BPE ignore_merges (Llama-3), which the Rust reference (0.13) predates, and is checked against
transformers.js only.

Hand-written samples first (code, CJK, emoji with ZWJ sequences and skin tones, Arabic, Hindi,
whitespace runs, numbers, contractions, special tokens inside text, NFD/NFC accents, very long
words), then deterministic pseudo-random mixtures of the same material. Run it again after editing;
the output is deterministic (fixed seed).

Characters where the JS reference and Hugging Face's Rust tokenizers are known to disagree are kept
out of corpus.jsonl: U+0085 and U+FEFF (JS's \\s differs from Oniguruma's), U+017F (case folding
inside (?i:'s|...)); so are characters assigned after Unicode 14 (PCRE2 10.42's tables). U+180E is
here too: PCRE2's own \\s would match it, Oniguruma's (White_Space) does not.
"""
import json
import os
import random

HAND = [
    "Hello, world!",
    "Hello world",
    " Hello world",
    "  leading spaces and trailing spaces   ",
    "I'm sure you're right, they've said we'll see; it's John's and she'd know.",
    "I'M SURE YOU'RE RIGHT, THEY'VE SAID WE'LL SEE; IT'S JOHN'S AND SHE'D KNOW.",
    "don't can't won't shouldn't y'all o'clock rock'n'roll 'quoted' \"double\"",
    "The year 2024 had 366 days; 3.14159, 1,000,000 and 1e-9 are numbers. 007 agents.",
    "1234567890123456789012345678901234567890",
    "Phone: +1 (555) 012-3456, IPv4 192.168.0.1, v1.2.3-rc4, 0x7fff_ffff, 10**9",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "SELECT id, name FROM users WHERE age >= 21 AND name LIKE '%smith%' ORDER BY id DESC;",
    "const f = async (x) => { await Promise.all([a(), b()]); return x?.y ?? z; };",
    "<div class=\"note\"><p>Some &amp; HTML &lt;tags&gt;</p></div>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "if (a && b || !c) { x += 1; } else { x -= 1; } // comment /* block */",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "   \n\n\t\t  \r\n  mixed whitespace  \t \n",
    "line one\nline two\r\nline three\rline four\n\n\nafter blank lines",
    "tabs\tbetween\twords\t\tand\t\t\tmore",
    "\t\tindented with tabs\n    indented with spaces\n\t  mixed",
    "trailing newline\n",
    "\n",
    " ",
    "    ",
    "a",
    "!!!???...,,,;;;:::---___***",
    "email@example.com https://example.org/path?q=1&r=two#frag",
    "我喜欢自然语言处理。今天天气很好！",
    "日本語のテキストとカタカナ、ひらがな。東京タワー",
    "한국어 문장도 있습니다. 안녕하세요!",
    "中文English混合text，标点。",
    "Emoji: 😀😃😄 👍🏽👍🏿 🇺🇸🇯🇵 ❤️ ✨",
    "Family: 👨‍👩‍👧‍👦 and 👩🏽‍💻 and 🧑🏿‍🤝‍🧑🏻 and 🏳️‍🌈",
    "مرحبا بالعالم، هذا نص عربي.",
    "नमस्ते दुनिया, यह हिंदी पाठ है।",
    "Привет, мир! Ёжик в тумане.",
    "Γειά σου Κόσμε, αβγδε.",
    "שלום עולם",
    "ภาษาไทย ไม่มีช่องว่าง",
    "café naïve résumé Zürich São Paulo Ångström",
    "cafe\u0301 nai\u0308ve re\u0301sume\u0301 Zu\u0308rich Sa\u0303o Paulo A\u030angstro\u0308m",
    "\u1e9b\u0323 and \u0041\u030a and \u212b",
    "ﬁnance ﬂow ｆｕｌｌｗｉｄｔｈ ①②③ ½",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "text<|endoftext|>more text<|endoftext|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
    "not special: <|im_start and im_end|> <| |> <|endoftext",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "a" * 5000,
    "ab" * 2000,
    "Supercalifragilisticexpialidocious" * 50,
    "9" * 1000,
    " " * 1000,
    "\n" * 300,
    " \t" * 500,
    "漢" * 2000,
    "😀" * 500,
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "Ünïcödé wïth lötš öf dïäcrïtïcš",
    "x = [i for i in range(100) if i % 3 == 0]  # list comprehension",
    "$ ls -la | grep \"\\.txt$\" && echo done > /dev/null 2>&1",
    "C++ templates: std::vector<std::pair<int, std::string>> v;",
    "Math: ∀x ∈ ℝ, x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2 ≈ ∞?",
    "Currency: $100, €50, £30, ¥1000, ₹500, ₿0.01",
    "Quotes: “smart” ‘single’ «guillemets» „German“ — em dash – en dash …",
    "Zero width: a\u200bb c\u200cd e\u200df",
    "Non-breaking\u00a0space and thin\u2009space and ideographic\u3000space",
    "Line\u2028separator and paragraph\u2029separator",
    "Control chars: \u0001\u0002\u0007\u001b[31m red \u001b[0m",
    "NUL inside: a\u0000b",
    "Mixed 123abc456def 7.8.9 ab12cd34",
    "'s 't 're 've 'm 'll 'd at the start",
    "'S 'T 'RE 'VE 'M 'LL 'D upper",
    "it''s a''b '' '''",
    "   leading spaces before a word",
    "word   followed   by   runs    of     spaces",
    "trailing spaces then newline   \n   next",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " " * 8 + "\t\n\r",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "的一是不了人我在有他这为之大来以个中上们",
    "あいうえおカタカナ漢字",
    "😀👍🏽🇺🇸❤️✨🔥🎉",
    "\u200d\u200c\u0301\u0308\u0323",
    "éèêëàâäôöûüçñ",
    "مرحباعالم",
    "नमस्तेदुनिया",
    "привет",
]
# Whitespace-like and case-folding corner cases (see the module docstring).
HF_ONLY = [
    "a\u0085 b",
    "x  \u0085y",
    "\u0085\u0085b",
    "tab\t\u0085\nnext",
    "a \ufeffb",
    "\ufeffStart of file",
    "x\ufeff\ufeff y",
    "it'\u017f fine, IT'\u017f FINE",
    "a\u2028\u2028b and line\u2029 x",
    "a\u180e b",
    "\u180e\u180eb and x\u180e\u180e y",
    "x,,'s.x  \u180e",
    "  \u180ea",
    "1  ,\u180e's.a",
    "\u180e's\u180e\u180e\u180e",
    "zero\u200bwidth  \u200b spaces",
    "ogham\u1680mark and\u205fmath space",
    "mixed \u00a0\u0085\u2003\u3000 run\n",
]

# SentencePiece-style material (Llama 2, Gemma 3): leading/trailing spaces and runs ("▁" merges),
# text glued to special tokens (the Prepend normalizer and Metaspace "first" act per section),
# characters outside a 32k vocabulary (byte fallback to <0xNN>), literal "▁" and "<0x41>" text,
# control characters and combining marks. Appended after the older samples so they keep their lines.
SP_HAND = [
    "<s>Hello", "<s> Hello", "Hello</s>", "Hello </s> world", "</s></s>  <s>\n<s>x",
    "<s><s>", "<unk>", "a<unk>b", "<bos>Hi<eos>", "<start_of_turn>user\nHi<end_of_turn>\n",
    "<start_of_turn>model\n  indented<end_of_turn>", "<|begin_of_text|>hi<|eot_id|>",
    "<|im_start|>system\nYou are<|im_end|>", "x<think>y</think>z",
    " ", "  ", "   lead", "trail   ", " a b  c   d    e", "\t\ttabs", "\n\nnewlines\n\n\n",
    "\u2581", "\u2581\u2581x", "a\u2581b \u2581 c", "<0x41><0x0A>", "<0xZZ> <0x4>",
    "\U00020000\U0002A6D6\U0002F800 rare CJK", "\U0001F980\U0001F9A5\U0001FAE0 crab sloth",
    "\U0001D518\U0001D52B math fraktur", "\U00010348 gothic \U00013000 hieroglyph",
    "e\u0301\u0302\u0303 stacked \u0915\u094D\u0937 conjunct",
    "Z\u0351\u034b\u0308a\u0306\u0325l\u0359g\u0334o zalgo",
    "ctl\u0001\u0002\u0003\u0007\u0008\u000b\u000c\u000e\u001b[0m\u007f end",
    "nul\u0000byte", "bell\u0007 and del\u007f\u0080\u009f c1",
    "0 00 000 0000 12345678901234567890 3.14 -7 +8 1e10 0x1F",
    "\uac00\ud7a3 hangul \u3042\u30a2 kana \u4e00\u9fa5 han",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea rtl",
    "\U0001F468\u200D\U0001F469\u200D\U0001F467 \U0001F1E9\U0001F1EA \u2764\uFE0F",
    "\u00e9t\u00e9 vs e\u0301te\u0301", "\ufb01 ligature \u2460 circled \uff21 fullwidth",
]

SP_WORDS = ["<s>", "</s>", "<unk>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",
            "\u2581", " ", "  ", "   ", "\n", "\t", "\U0001F980", "\U00020000", "\u0301",
            "\u0007", "<0x41>", "2024", "\u4e2d\u6587"]


def sp_sample(rng):
    parts = []
    for _ in range(rng.randint(1, 25)):
        if rng.random() < 0.35:
            parts.append(rng.choice(SP_WORDS))
        else:
            pool = rng.choice(POOLS)
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
    return "".join(parts)


# Llama-3 vocabulary entries that plain BPE merging would not produce: with ignore_merges they
# are emitted whole.
JS_ONLY = [
    "vi\u1ec7c h\u1ee3p nhi\u1ec1u \u0111i\u1ec1u Vi\u1ec7t ngo\u00e0i nhi\u00ean bi\u1ec7t nhi\u1ec7m",
    "g\u00f6rmektedir edilmektedir yapt\u0131lardan de\u011fi\u015f \u0131ld\u0131",
    "jeho ka\u017ed\u00fd \u0430\u0440\u0430\u043a\u0442 \u0445\u0430\u0440\u0430\u043a\u0442\u0435\u0440 "
    "\u0432\u0438\u043a\u043e\u0440\u0438\u0441\u0442\u0430\u043d\u043d\u044f \u0627\u06cc\u0631\u0627\u0646",
]

WORDS = ["'s", "'ll", "'VE", "<|im_end|>", "<|endoftext|>", "<think>", "<|begin_of_text|>",
         "don't", "  ", "\n\n", "\t", "123", "4567", "https://x.y", "==", "->", "::"]


def random_sample(rng):
    parts = []
    for _ in range(rng.randint(1, 40)):
        if rng.random() < 0.15:
            parts.append(rng.choice(WORDS))
        else:
            pool = rng.choice(POOLS)
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
    return "".join(parts)


def write(path, samples, ascii_every):
    with open(path, "w", encoding="utf-8") as out:
        for i, s in enumerate(samples):
            # Some lines use \\u escapes (incl. surrogate pairs) to exercise the JSON readers.
            out.write(json.dumps(s, ensure_ascii=(i % ascii_every == 0)) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(20240607)
    samples = list(HAND)
    samples += [random_sample(rng) for _ in range(300)]
    sp_rng = random.Random(20261202)
    samples += SP_HAND + [sp_sample(sp_rng) for _ in range(160)]
    write(os.path.join(here, "corpus.jsonl"), samples, ascii_every=3)
    # All escaped: these characters are invisible or break lines in editors.
    write(os.path.join(here, "corpus_hf_only.jsonl"), HF_ONLY, ascii_every=1)
    write(os.path.join(here, "corpus_js_only.jsonl"), JS_ONLY, ascii_every=2)


if __name__ == "__main__":
    main()
