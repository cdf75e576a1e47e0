#!/usr/bin/env python3
"""Prints what llama.cpp's llama_chat_apply_template renders for the conversations of
tests/test_chat.c, as C string literals for that file (its goldens come from this script).

Usage: python3 tests/chat_goldens.py
       python3 tests/chat_goldens.py --tools   (tests/test_tools.c's goldens of gpt-oss with tools)
  needs llama-cpp-python (pip install llama-cpp-python) and jinja2, and the llama-cpp-python
  source package that tests/fixtures.sh keeps in its cache ($LLM_FIXTURES, default
  ~/.cache/llm.c-tests): its vendor/llama.cpp/models/templates/ hold official Jinja templates.

Each template is given by llama.cpp's name for it ("gemma", "phi3", "chatml") and by an excerpt
with the markers llama.cpp recognises in a model file's tokenizer.chat_template; both must render
the same. Then the official Jinja templates of Qwen3 and Phi-3.5 are run with jinja2 (as
Hugging Face's tokenizers run them) on the same conversation and on conversations with
reasoning (<think>) in Qwen3's answers, which llama.cpp's "chatml" does not treat apart, and
gpt-oss's (harmony; its date written DATE).
"""
import ctypes
import json
import os
import sys
import tarfile

import jinja2

import llama_cpp

CONV = [("system", "You are terse."), ("user", "Hi there"), ("assistant", "Hello!"), ("user", "2+2?")]

# Excerpts that carry the markers llama.cpp looks for (the whole Jinja text is not needed: it is
# recognised, not run).
TEMPLATES = {
    "gemma": "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
    "phi3": "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{{ '<|assistant|>\\n' }}",
    "chatml": "{{'<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n'}}"
              "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}",
}


def render(tmpl, conv, add):
    arr = (llama_cpp.llama_chat_message * len(conv))()
    for i, (r, c) in enumerate(conv):
        arr[i].role = r.encode()
        arr[i].content = c.encode()
    buf = ctypes.create_string_buffer(4096)
    n = llama_cpp.llama_chat_apply_template(tmpl.encode(), arr, len(conv), add, buf, len(buf))
    if n < 0 or n > len(buf):
        sys.exit("llama_chat_apply_template(%r) failed: %d" % (tmpl[:40], n))
    return buf.raw[:n].decode()


def c_literal(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


for name, jinja in TEMPLATES.items() if "--tools" not in sys.argv else []:
    for conv, add, label in ((CONV, True, "conv, 4, 1"), ([("user", "  hi \n")], False, "padded, 1, 0")):
        a, b = render(name, conv, add), render(jinja, conv, add)
        if a != b:
            sys.exit("%s: the name and the Jinja text render differently:\n%r\n%r" % (name, a, b))
        print("%s (%s): %s" % (name, label, c_literal(a)))

cache = os.environ.get("LLM_FIXTURES") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "llm.c")
archive = os.path.join(cache, "llama_cpp_python-0.3.36.tar.gz")
members = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/"
with tarfile.open(archive) as tar:
    def jinja(name):
        text = tar.extractfile(members + name).read().decode()
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(text)
    harmony_env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    harmony_env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)   # (Hugging Face's tojson)
    harmony_tools = harmony_env.from_string(
        tar.extractfile(members + "openai-gpt-oss-120b.jinja").read().decode())
    official = {"qwen3": jinja("Qwen-Qwen3-0.6B.jinja"), "phi3": jinja("microsoft-Phi-3.5-mini-instruct.jinja"),
                "harmony": jinja("openai-gpt-oss-120b.jinja")}



def c_macro(name, s, width=100):
    """A #define of string s as C literals of at most width characters a line."""
    body = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    parts = []
    while body:
        cut = min(width, len(body))
        while cut < len(body) and body[cut - 1] == "\\":
            cut += 1
        parts.append('"' + body[:cut] + '"')
        body = body[cut:]
    return "#define %s \\\n    %s" % (name, " \\\n    ".join(parts))


if "--tools" in sys.argv:   # gpt-oss with tools: the tools as its namespace, a call and its result
    WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": [
            "celsius", "fahrenheit"]}}, "required": ["city"]}}}
    TIME = {"type": "function", "function": {"name": "get_time", "description": "The time"}}
    SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web", "parameters": {
        "type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "max_results": {"type": "integer", "default": 5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "filters": {"type": "object", "properties": {"lang": {"type": "string"}, "year": {"type": "integer"}},
                        "required": ["lang"]},
            "pages": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}}},
            "safe": {"type": "boolean", "default": True},
            "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
            "when": {"type": ["string", "null"]},
            "note": {"type": "string", "nullable": True},
            "id": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer"}]},
            "extra": {}}, "required": ["query"]}}}
    ROUND = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "", "tool_calls": [{"id": "abcDEF123", "type": "function", "function": {
                 "name": "get_weather", "arguments": {"city": "Paris"}}}]},
             {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 22}"}]
    ANSWERED = ROUND + [{"role": "assistant", "content": "22 degrees."}, {"role": "user", "content": "And Rome?"}]
    THINK = ROUND[:2] + [dict(ROUND[2], thinking="Need the weather.")] + ROUND[3:]   # (reasoning sent back)
    print(c_macro("HM_SEARCH", json.dumps(SEARCH)))
    for name, msgs, tools in (("HM_ROUND_WANT", ROUND, [WEATHER, TIME]),
                              ("HM_SEARCH_WANT", [{"role": "user", "content": "Find it"}], [SEARCH]),
                              ("HM_ANSWERED_WANT", ANSWERED, [WEATHER]), ("HM_THINK_WANT", THINK, [WEATHER])):
        out = harmony_tools.render(messages=msgs, tools=tools, add_generation_prompt=True,
                                   strftime_now=lambda fmt: "DATE")
        print(c_macro(name, out))
    sys.exit(0)

THINK = [("system", "You are terse."), ("user", "Hi there"),
         ("assistant", "<think>\nA greeting.\n</think>\n\nHello!"), ("user", "2+2?")]
THINK_LAST = THINK + [("assistant", "<think>\nAdd them.\n</think>\n\n4")]
NO_THINK_LAST = THINK + [("assistant", "4")]
TOOLS = [("user", "Weather?"), ("assistant", "<think>\nCall it.\n</think>\n\nCalling."), ("tool", "sunny"), ("tool", "20C")]
for name, tmpl in official.items():
    convs = [(CONV, True, "conv, 4, 1")]
    if name == "qwen3":
        convs += [(THINK, True, "think, 4, 1"), (THINK_LAST, False, "think_last, 5, 0"),
                  (NO_THINK_LAST, False, "no_think_last, 5, 0"), (TOOLS, True, "tools, 4, 1")]
    if name == "harmony":   # (gpt-oss: today's date in the system message; the test writes in its own)
        convs += [(CONV + [("assistant", "4")], False, "answered, 5, 0"), (CONV[1:], True, "no_system, 3, 1")]
    for conv, add, label in convs:
        out = tmpl.render(messages=[{"role": r, "content": c} for r, c in conv], add_generation_prompt=add,
                          bos_token="", eos_token="<|endoftext|>", strftime_now=lambda fmt: "DATE")
        print("%s official (%s): %s" % (name, label, c_literal(out)))
