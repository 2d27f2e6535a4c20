#!/usr/bin/env python3
"""Writes conversations.jsonl, the corpus of the chat-template agreement test.

Each line: {"messages": [...], "add_generation_prompt": bool, ...extra template variables}.
Deterministic (no randomness), so the committed file is reproducible:
    python3 tests/chat_template/make_conversations.py > tests/chat_template/conversations.jsonl
"""
import json

SYS = {"role": "system", "content": "You are a helpful assistant."}


def u(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city — 天气",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": []},
    },
}


# Nested schema: arrays of objects, enums with defaults, unions, nullable strings.
BOOKING_TOOL = {
    "type": "function",
    "function": {
        "name": "book_trip",
        "description": "Book a trip with several legs.",
        "parameters": {
            "type": "object",
            "properties": {
                "legs": {"type": "array", "description": "Each leg of the trip.",
                         "items": {"type": "object",
                                   "properties": {"from": {"type": "string"},
                                                  "to": {"type": "string"},
                                                  "date": {"type": "string", "nullable": True}},
                                   "required": ["from", "to"]}},
                "class": {"type": "string", "enum": ["economy", "business"], "default": "economy"},
                "passengers": {"type": "integer", "default": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "budget": {"oneOf": [{"type": "number"}, {"type": "string"}]},
                "notes": {"type": ["string", "null"]},
                "flexible": {"type": "boolean"},
            },
            "required": ["legs"],
        },
    },
}


def call(name, arguments, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def conversations():
    out = []

    def add(messages, agp=True, **extra):
        line = {"messages": messages, "add_generation_prompt": agp}
        line.update(extra)
        out.append(line)

    # Plain turns, with and without system, with and without the generation prompt.
    add([u("Hello!")])
    add([u("Hello!")], agp=False)
    add([SYS, u("What is 2+2?")])
    add([SYS, u("What is 2+2?")], agp=False)
    add([u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")])
    add([SYS, u("Hi"), a("Hello!"), u("Bye"), a("Goodbye!")], agp=False)
    add([SYS, u("Hi"), a("Hello!"), u("Bye"), a("Goodbye!")], agp=True)
    add([u("one"), a("two"), u("three"), a("four"), u("five"), a("six"), u("seven")])
    add([{"role": "system", "content": "Answer in French."}, u("Good morning")])
    # Unicode: CJK, emoji (astral plane, ZWJ sequences), combining marks, RTL, NBSP.
    add([u("你好，世界！今天天气怎么样？")])
    add([u("こんにちは"), a("こんにちは！元気ですか？"), u("はい、元気です 😀")])
    add([u("Family: 👨‍👩‍👧‍👦 flags: 🇫🇷🇯🇵 skin: 👍🏽")])
    add([u("Combining: e\u0301 a\u0308 n\u0303 and precomposed: é ä ñ")])
    add([u("مرحبا بالعالم"), a("שלום עולם")])
    add([SYS, u("Ελληνικά και кириллица")])
    # Whitespace that trim/strip must treat like Python.
    add([u("  padded with spaces  ")])
    add([u("\n\nleading and trailing newlines\n\n")])
    add([u("\ttabs\tinside\t")])
    add([u("line one\r\nline two\r\n")])
    add([{"role": "system", "content": "  system with spaces \n"}, u("ok")])
    # Empty content.
    add([u("")])
    add([u(""), a(""), u("")])
    add([SYS, u("Say nothing."), a("")], agp=False)
    # Long content.
    add([u("lorem ipsum dolor sit amet " * 400)])
    add([SYS, u("x" * 5000), a("y" * 3000), u("z")])
    # Template-looking and special characters in content (data, never template code).
    add([u("{{ not a tag }} {% if x %} {# nor a comment #}")])
    add([u("quotes ' \" and backslashes \\ \\n literal")])
    add([u("<|im_start|>user\nfake turn<|im_end|>")])
    # Assistant last, with and without the generation prompt.
    add([u("Continue this: once upon"), a("a time")], agp=False)
    add([u("Continue this: once upon"), a("a time")], agp=True)
    # Reasoning (Qwen3 / DeepSeek-R1 style).
    add([u("Think first."), a("<think>\nLet me think.\n</think>\n\nThe answer is 4."), u("And 3+3?")])
    add([u("Think first."), a("<think>\nplan\n</think>\n\nDone.")], agp=False)
    add([u("Q"), {"role": "assistant", "content": "A", "reasoning_content": "hidden reasoning"},
         u("Q2")])
    add([u("No thinking please.")], enable_thinking=False)
    add([u("Thinking is fine.")], enable_thinking=True)
    # Content as a list of parts.
    add([{"role": "user", "content": [{"type": "text", "text": "Describe this."}]}])
    add([{"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
         {"role": "user", "content": [{"type": "text", "text": "Part one. "},
                                      {"type": "text", "text": "Part two."}]}])
    # Tools: definitions, calls with dict and string arguments, tool results.
    add([u("Weather in Paris?")], tools=[WEATHER_TOOL])
    add([SYS, u("Weather in Paris?")], tools=[WEATHER_TOOL, SEARCH_TOOL])
    add([u("Weather in Paris?"),
         {"role": "assistant", "content": "",
          "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius", "days": 3})]},
         {"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call_1"}],
        tools=[WEATHER_TOOL])
    add([u("Weather in 東京?"),
         {"role": "assistant", "content": "",
          "tool_calls": [call("get_weather", {"city": "東京", "flags": [True, False, None]})]},
         {"role": "tool", "content": "晴れ", "tool_call_id": "call_1"},
         a("It is sunny in Tokyo.")], tools=[WEATHER_TOOL], agp=False)
    add([u("Search twice"),
         {"role": "assistant", "content": "Let me search.",
          "tool_calls": [call("search", {"q": "a"}, "c1"), call("search", {"q": "b"}, "c2")]},
         {"role": "tool", "content": "result a", "tool_call_id": "c1"},
         {"role": "tool", "content": "result b", "tool_call_id": "c2"}],
        tools=[SEARCH_TOOL])
    add([u("String arguments"),
         {"role": "assistant", "content": None,
          "tool_calls": [call("search", "{\"q\": \"string args\"}")]},
         {"role": "tool", "content": "ok"}], tools=[SEARCH_TOOL])
    add([u("Nested arguments"),
         {"role": "assistant", "content": "",
          "tool_calls": [call("search", {"q": {"nested": {"deep": [1, 2, {"k": "v"}]}},
                                         "empty": {}, "list": []})]}],
        tools=[SEARCH_TOOL], agp=False)
    # Role order templates reject (Gemma, Llama 2, Mistral raise; others render).
    add([u("first"), u("second")])
    add([a("assistant first"), u("then user")])
    add([SYS, SYS, u("two systems")])
    add([{"role": "tool", "content": "orphan tool result"}, u("hi")])
    # System only, and no messages at all.
    add([SYS])
    add([SYS], agp=False)
    # Extra message keys templates ignore.
    add([{"role": "user", "content": "named", "name": "alice"}, a("hi alice")], agp=False)
    # Many turns.
    add([m for i in range(20) for m in (u("question %d" % i), a("answer %d" % i))] + [u("last")])
    # Appended last so earlier line numbers (known_hf_jinja_differences.txt) stay put.
    add([{"role": "developer", "content": "Plan trips."}, u("Paris to Rome, then Rome to Oslo."),
         {"role": "assistant", "content": "", "thinking": "Two legs; book both.",
          "tool_calls": [call("book_trip", {"legs": [{"from": "Paris", "to": "Rome"},
                                                     {"from": "Rome", "to": "Oslo"}],
                                            "passengers": 2, "budget": 1500.5})]},
         {"role": "tool", "content": "{\"booking\": \"B-42\"}"}],
        tools=[BOOKING_TOOL, WEATHER_TOOL], reasoning_effort="high")
    add([u("Why is the sky blue?"),
         {"role": "assistant", "content": "Rayleigh scattering.", "thinking": "Physics."}],
        agp=False, model_identity="You are a physics tutor.", builtin_tools=["browser", "python"])
    return out


if __name__ == "__main__":
    for line in conversations():
        print(json.dumps(line, ensure_ascii=False))
