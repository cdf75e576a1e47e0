"""Tool calling through llm serve with the official OpenAI Python client, on a real model.

Usage: python test_tools.py LLM_BINARY MODEL.gguf
(tests/test_tools.sh runs it with the venv tests/fixtures.sh makes, on SmolLM2-135M-Instruct,
whose ChatML template gets the generic Hermes format: <tool_call> blocks.)

Checks: tool_choice "required" and a named function give calls that parse, of the tools offered,
whose arguments validate against the function's JSON Schema, with finish_reason "tool_calls",
content null and unique ids; parallel_tool_calls false gives one call; the round trip (the
assistant's calls and the tool's result sent back) ends in an answer with finish_reason "stop";
a streamed answer at temperature 0, its deltas put together, equals the whole one (a call's first
delta has its id, type, name and empty arguments, the others argument pieces; no call markup in
the content); n choices each with their own ids; tool_choice "none"; requests that are refused
with 400 and the field named. With a third argument (tests/test_tools.sh: tiny-harmony-vocab),
gpt-oss's harmony format: answers split into content and reasoning_content with no marker left,
streamed deltas equal to the whole answers.
"""
import atexit
import json
import re
import signal
import subprocess
import sys
import threading
import time

import openai

LLM, MODEL = sys.argv[1], sys.argv[2]
HARMONY = sys.argv[3] if len(sys.argv) > 3 else None   # a model for --chat-template harmony
passed = failed = 0
T0 = time.time()


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL test_tools_server: " + msg, flush=True)
    return cond


def section(name):
    print("[%.1f s] %s" % (time.time() - T0, name), flush=True)


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([LLM, "serve", "-m", MODEL, "--port", "0", "-t", "2", "--quiet", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        seen = ""   # (warnings may come before the line that says where it listens)
        for _ in range(20):
            line = self.proc.stderr.readline()
            seen += line
            m = re.search(r"on http://127\.0\.0\.1:(\d+)$", line.strip())
            if m or not line:
                break
        if not m:
            self.proc.kill()
            raise SystemExit("FAIL test_tools_server: the server did not start: " + seen)
        self.base = "http://127.0.0.1:%s" % m.group(1)
        atexit.register(lambda: self.proc.poll() is None and self.proc.kill())   # a test that broke off
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(30)
        time.sleep(0.1)
        bad = [x for x in self.log if "Sanitizer" in x or "runtime error" in x]
        check(rc == 0 and not bad, "the server exited %s; sanitizer reports: %s" % (rc, "".join(self.log[-40:])))


def valid(schema, v, path="arguments"):
    """v against the JSON Schema subset the tests' tools use (type, properties, required, enum,
    additionalProperties): a list of what is wrong. (The jsonschema package is not in the test venv.)"""
    types = {"object": dict, "string": str, "boolean": bool, "array": list}
    t = schema.get("type")
    if t in types and not isinstance(v, types[t]):
        return ["%s: not a %s: %r" % (path, t, v)]
    if t == "integer" and (not isinstance(v, int) or isinstance(v, bool)):
        return ["%s: not an integer: %r" % (path, v)]
    if t == "number" and (not isinstance(v, (int, float)) or isinstance(v, bool)):
        return ["%s: not a number: %r" % (path, v)]
    if "enum" in schema and v not in schema["enum"]:
        return ["%s: %r not in %r" % (path, v, schema["enum"])]
    bad = []
    if t == "object":
        props = schema.get("properties", {})
        bad += ["%s: %s missing" % (path, k) for k in schema.get("required", []) if k not in v]
        if schema.get("additionalProperties", True) is False or ("properties" in schema and "additionalProperties" not in schema):
            bad += ["%s: %s is not a property" % (path, k) for k in v if k not in props]
        for k, x in v.items():
            if k in props:
                bad += valid(props[k], x, path + "." + k)
    return bad


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MSGS = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather like in Paris today?"}]


def check_calls(r, what, names=None, count=None):
    """The choice's calls: parsed, of the tools, arguments valid; returns them."""
    ch = r.choices[0]
    calls = ch.message.tool_calls or []
    check(ch.finish_reason == "tool_calls" and ch.message.content is None and calls,
          "%s: finish %s, content %r, calls %s" % (what, ch.finish_reason, ch.message.content, calls))
    if count is not None:
        check(len(calls) == count, "%s: %d calls, want %d" % (what, len(calls), count))
    check(len({x.id for x in calls}) == len(calls) and all(re.fullmatch(r"call_[0-9a-f]{24}", x.id) for x in calls),
          "%s: ids %s" % (what, [x.id for x in calls]))
    for x in calls:
        name = x.function.name
        check(x.type == "function" and name in (names or SCHEMAS), "%s: a call of %s" % (what, name))
        try:
            args = json.loads(x.function.arguments)
        except ValueError:
            check(False, "%s: arguments are not JSON: %r" % (what, x.function.arguments))
            continue
        bad = valid(SCHEMAS.get(name, {}), args)
        check(not bad, "%s: %s(%s): %s" % (what, name, x.function.arguments, bad))
    return calls


def streamed(c, **kw):
    """A streamed answer put together: (content, [(id, name, arguments)], finish), and what is
    wrong with its deltas."""
    content, calls, finish, bad = "", [], None, []
    for k in c.chat.completions.create(stream=True, **kw):
        if not k.choices:
            continue
        d = k.choices[0].delta
        if d.content:
            if calls:
                bad.append("content after a call: %r" % d.content)
            content += d.content
        for tc in d.tool_calls or []:
            if tc.id is not None:
                if tc.index != len(calls) or tc.type != "function" or tc.function.arguments != "":
                    bad.append("a call's first delta: %s" % tc)
                calls.append([tc.id, tc.function.name, ""])
            elif tc.index != len(calls) - 1 or tc.function.name is not None:
                bad.append("an arguments delta: %s" % tc)
            else:
                calls[tc.index][2] += tc.function.arguments or ""
        finish = k.choices[0].finish_reason or finish
    if "<tool_call" in content or "</tool_call" in content:
        bad.append("call markup in the content: %r" % content)
    return content, calls, finish, bad


S = Server()
c = S.client = openai.OpenAI(base_url=S.base + "/v1", api_key="none", max_retries=0, timeout=120)
model = c.models.list().data[0].id
base = dict(model=model, messages=MSGS, tools=TOOLS, temperature=0, max_tokens=160)

section("tool_choice required, a named function, parallel_tool_calls false")
r = c.chat.completions.create(tool_choice="required", **dict(base, max_tokens=800))   # up to 16 calls
check_calls(r, "required")
required_prompt = r.usage.prompt_tokens
check(len(r.choices[0].message.tool_calls) <= 16, "required: %d calls" % len(r.choices[0].message.tool_calls))
r = c.chat.completions.create(tool_choice="required", parallel_tool_calls=False, **base)
check_calls(r, "required, parallel_tool_calls false", count=1)
named = dict(base, tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False)
r = c.chat.completions.create(**named)
calls = check_calls(r, "named get_time", names=["get_time"], count=1)

section("the round trip: the calls and the tool's result sent back, an answer")
r = c.chat.completions.create(tool_choice={"type": "function", "function": {"name": "get_weather"}},
                              parallel_tool_calls=False, **base)
call = (check_calls(r, "named get_weather", names=["get_weather"], count=1) or [None])[0]
if call is None:
    raise SystemExit("test_tools_server: %d passed, %d failed (no call to send back)" % (passed, failed))
msgs = MSGS + [r.choices[0].message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
r2 = c.chat.completions.create(**dict(base, messages=msgs, max_tokens=60))
ch = r2.choices[0]
check(ch.finish_reason == "stop" and ch.message.content and not ch.message.tool_calls,
      "the answer after the tool's result: %s %r %s" % (ch.finish_reason, ch.message.content, ch.message.tool_calls))
# the prompt holds the call and the result: more prompt tokens than the request alone
check(r2.usage.prompt_tokens > r.usage.prompt_tokens + 20, "round trip: %d prompt tokens, the first request %d" %
      (r2.usage.prompt_tokens, r.usage.prompt_tokens))

section("streamed answers put together equal the whole ones (temperature 0)")
for what, kw in [("required", dict(base, tool_choice="required", seed=7)),
                 ("named", dict(named, seed=7)),
                 ("auto", dict(base, seed=7, max_tokens=40))]:
    w = c.chat.completions.create(**kw).choices[0]
    content, scalls, finish, bad = streamed(c, **kw)
    wcalls = [(x.function.name, x.function.arguments) for x in w.message.tool_calls or []]
    check(not bad, "%s, streamed: %s" % (what, bad))
    check((content or None) == w.message.content and [(n, a) for _, n, a in scalls] == wcalls and finish == w.finish_reason,
          "%s: streamed %r %s %s, whole %r %s %s" % (what, content, scalls, finish, w.message.content, wcalls, w.finish_reason))
    check(all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i, _, _ in scalls), "%s, streamed: ids %s" % (what, scalls))

section("n choices, tool_choice none")
r = c.chat.completions.create(n=2, **dict(named, temperature=0.8, seed=3))
ids = [x.id for ch in r.choices for x in ch.message.tool_calls or []]
check(len(r.choices) == 2 and all(ch.finish_reason == "tool_calls" for ch in r.choices) and len(set(ids)) == len(ids) == 2,
      "n=2: %s" % [(ch.finish_reason, ch.message.tool_calls) for ch in r.choices])
r = c.chat.completions.create(tool_choice="none", **dict(base, max_tokens=24))
check(r.choices[0].message.tool_calls is None and r.choices[0].finish_reason in ("stop", "length") and
      r.choices[0].message.content, "tool_choice none: %s" % r.choices[0])
# the tools are in the prompt (their JSON: some 100 tokens), and with "none" they are not
check(required_prompt > r.usage.prompt_tokens + 100, "the prompt with the tools shown: %d tokens, with none: %d" %
      (required_prompt, r.usage.prompt_tokens))

section("errors: 400 naming the field")


def error_of(fn):
    try:
        fn()
    except openai.BadRequestError as e:
        return e
    except Exception as e:  # noqa: BLE001
        check(False, "400 expected, got %r" % e)
        return None
    check(False, "400 expected, the request succeeded")
    return None


for what, kw, param, words in [
        ("a tool without a name", dict(tools=[{"type": "function", "function": {"parameters": {}}}]), "tools",
         "tools[0].function.name"),
        ("parameters not an object", dict(tools=[WEATHER, {"type": "function", "function": {"name": "f", "parameters": 3}}]),
         "tools", "tools[1].function.parameters"),
        ("a schema the converter refuses", dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}}}]), "tools",
         "tools[0].function.parameters"),
        ("an unknown function", dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_news"}}),
         "tool_choice", "get_news"),
        ("required without tools", dict(tool_choice="required"), "tool_choice", "needs tools"),
        ("arguments that are not JSON", dict(messages=MSGS + [{"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{city"}}]}]),
         "messages", "not JSON")]:
    e = error_of(lambda: c.chat.completions.create(**dict(dict(model=model, messages=MSGS, max_tokens=4), **kw)))
    check(e is not None and e.status_code == 400 and e.body.get("param") == param and words in e.body.get("message", "") and
          e.body.get("type") == "invalid_request_error", "%s: %r" % (what, e and e.body))

S.stop()

if HARMONY:
    # gpt-oss's harmony format (--chat-template harmony) on a vocabulary whose tokens are the pieces
    # of harmony's markers (a random model writes them in any order): the answer's content and
    # reasoning_content carry no marker, and a streamed answer's deltas put together equal them
    section("harmony: content and reasoning_content, whole and streamed")
    H = Server("-m", HARMONY, "--chat-template", "harmony", "-c", "1024")   # (its vocabulary's tokens are short)
    hc = openai.OpenAI(base_url=H.base + "/v1", api_key="none", max_retries=0, timeout=120)
    hm = hc.models.list().data[0].id
    for q in ["Hi there", "Once upon a time", "What is the weather?"]:
        kw = dict(model=hm, messages=[{"role": "user", "content": q}], temperature=0, max_tokens=64)
        msg = hc.chat.completions.create(**kw).choices[0].message.model_dump()
        content, reasoning = msg.get("content") or "", msg.get("reasoning_content") or ""
        marks = [x for x in ("<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|return|>")
                 if x in content or x in reasoning]
        check(not marks, "harmony %r: markers in the answer: %s (%r / %r)" % (q, marks, content, reasoning))
        sc, sr = "", ""
        for k in hc.chat.completions.create(stream=True, **kw):
            if k.choices:
                d = k.choices[0].delta.model_dump()
                sc += d.get("content") or ""
                sr += d.get("reasoning_content") or ""
        check(sc == content and sr == reasoning, "harmony %r: streamed %r / %r, whole %r / %r" %
              (q, sc, sr, content, reasoning))
    # with tools, and a round of a call and its result (rendered as gpt-oss's template renders them:
    # test_tools.c): answered, no marker in the answer, the stream equal to it; tool_choice
    # "required" refused by name (no grammar for harmony's control tokens yet)
    section("harmony: tools")
    rounds = [{"role": "user", "content": "Time?"},
              {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                  "name": "get_time", "arguments": "{\"zone\": \"CET\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "noon"}]
    for msgs in ([{"role": "user", "content": "Time?"}], rounds):
        kw = dict(model=hm, messages=msgs, tools=[TIME], temperature=0, max_tokens=48)
        r = hc.chat.completions.create(**kw)
        msg = r.choices[0].message.model_dump()
        content, reasoning = msg.get("content") or "", msg.get("reasoning_content") or ""
        calls = [(x["function"]["name"], x["function"]["arguments"]) for x in msg.get("tool_calls") or []]
        marks = [x for x in ("<|channel|>", "<|message|>", "<|start|>", "<|call|>", "<tool_call>") if x in content]
        check(not marks, "harmony with tools: markers in the content: %s (%r)" % (marks, content))
        sc, sr, sk = "", "", {}
        for k in hc.chat.completions.create(stream=True, **kw):
            if k.choices:
                d = k.choices[0].delta.model_dump()
                sc += d.get("content") or ""
                sr += d.get("reasoning_content") or ""
                for tc in d.get("tool_calls") or []:
                    e = sk.setdefault(tc["index"], ["", ""])
                    e[0] += (tc.get("function") or {}).get("name") or ""
                    e[1] += (tc.get("function") or {}).get("arguments") or ""
        check(sc == content and sr == reasoning and [tuple(sk[i]) for i in sorted(sk)] == calls,
              "harmony with tools: streamed %r / %r / %r, whole %r / %r / %r" % (sc, sr, sk, content, reasoning, calls))
    e = error_of(lambda: hc.chat.completions.create(model=hm, messages=MSGS, tools=TOOLS, tool_choice="required",
                                                    max_tokens=4))
    check(e is not None and e.status_code == 400 and e.body.get("param") == "tool_choice" and
          "harmony" in e.body.get("message", ""), "harmony, tool_choice required: %r" % (e and e.body))
    H.stop()
print("[%.1f s] done" % (time.time() - T0))
print("test_tools_server: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
