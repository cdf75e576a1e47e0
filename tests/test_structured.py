"""Structured output on a real model, every output checked with the jsonschema package.

Usage: python test_structured.py LLM_BINARY MODEL.gguf
(tests/test_structured.sh runs it with the venv tests/fixtures.sh makes, on SmolLM2-135M-Instruct.)

tests/schemas/NAME.json: a JSON Schema each, its top-level "description" the question put to the
model. Checks:
  - llm serve: every schema twice, greedy (OpenAI's response_format json_schema on
    /v1/chat/completions) and sampled at temperature 0.8 with a seed (llama-server's json_schema
    field), some also on /v1/completions, all sent at once so that they are computed in the same
    batches: each answer ends with finish_reason "stop", parses, and jsonschema.validate accepts
    it (formats date, date-time, time and uuid checked too). n = 3 choices each follow the schema;
    a streamed answer's deltas make a valid one; response_format json_object gives an object; a
    GBNF grammar on /v1/completions; the errors (a keyword the converter refuses: 400 naming it,
    param the field; a grammar that does not compile: its line and column; two constraints;
    response_format's shapes).
  - the official openai client: response_format json_schema, and client.chat.completions.parse
    with pydantic models (nested, Literal, bounds, Optional), the parsed objects checked.
  - llm run / llm chat -p with --json-schema, --grammar, --json-object; llm generate's lines
    with grammar, json_schema, response_format, over the flags' default.
"""
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, time as dtime
from typing import List, Literal, Optional

import jsonschema
import openai
import pydantic

T0 = time.time()
LLM, MODEL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
passed = failed = 0


def section(name):
    print("[%.1f s] %s" % (time.time() - T0, name), flush=True)


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL test_structured: " + msg, flush=True)
    return cond


# formats: jsonschema checks date and uuid itself; date-time and time as RFC 3339 (Python 3.11's
# fromisoformat takes what the grammar writes: a "T", seconds, a fraction, Z or an offset)
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(s):
    return not isinstance(s, str) or (re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", s)
                                      is not None and datetime.fromisoformat(s) is not None)


@FORMATS.checks("time", raises=ValueError)
def _time(s):
    return not isinstance(s, str) or (re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", s) is not None
                                      and dtime.fromisoformat(s) is not None)


def loads(text):
    """The JSON value of text, or None when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def invalid(text, schema):
    """Why text is not a JSON value the schema accepts, or None."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return "not JSON (%s)" % e
    try:
        jsonschema.validate(value, schema, format_checker=FORMATS)
    except jsonschema.ValidationError as e:
        return "invalid: %s" % e.message
    return None


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([LLM, "serve", "-m", MODEL, "--port", "0", "-t", "2", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        line = self.proc.stderr.readline()
        m = re.search(r"on http://127\.0\.0\.1:(\d+)$", line.strip())
        if not m:
            raise SystemExit("FAIL test_structured: the server did not start: " + line + self.proc.stderr.read())
        self.base = "http://127.0.0.1:%s" % m.group(1)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def post(self, path, body):
        """(status, the answer's JSON)"""
        req = urllib.request.Request(self.base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        time.sleep(0.1)
        bad = [x for x in self.log if "Sanitizer" in x or "runtime error" in x]
        check(not bad, "the server's log has sanitizer reports: %s" % "".join(self.log[-60:]))


def chatml(prompt):
    return "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % prompt


SCHEMAS = []
for path in sorted(glob.glob(os.path.join(HERE, "schemas", "*.json"))):
    with open(path) as f:
        SCHEMAS.append((os.path.basename(path)[:-5], json.load(f), path))
check(len(SCHEMAS) >= 40, "tests/schemas/ has %d schemas, at least 40 expected" % len(SCHEMAS))
# under sanitizers (make test SAN=1 sets LLM_TEST_SAN=1), where a token costs ten times as much: a
# third of the schemas, greedy and sampled
SAN = os.environ.get("LLM_TEST_SAN") == "1"
BATCH = SCHEMAS[::3] if SAN else SCHEMAS
if SAN:
    print("SKIP test_structured: under sanitizers %d of the %d schemas are run through the server" % (
        len(BATCH), len(SCHEMAS)), flush=True)

S = Server("-c", "2048", "--max-num-seqs", "32")

# --- every schema, greedy and sampled, batched ---
section("%d schemas x greedy, sampled (and /v1/completions for some), all at once" % len(BATCH))
jobs = []
for i, (name, schema, _) in enumerate(BATCH):
    msgs = [{"role": "user", "content": schema["description"]}]
    jobs.append((name, "greedy, response_format", "/v1/chat/completions",
                 {"messages": msgs, "temperature": 0, "max_tokens": 400,
                  "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                                             "strict": True}}}, schema))
    jobs.append((name, "sampled, json_schema", "/v1/chat/completions",
                 {"messages": msgs, "temperature": 0.8, "seed": 1000 + i, "max_tokens": 400, "json_schema": schema},
                 schema))
    if i % 4 == 0 and not SAN:
        jobs.append((name, "completions, sampled", "/v1/completions",
                     {"prompt": chatml(schema["description"]), "temperature": 0.8, "seed": 2000 + i, "max_tokens": 400,
                      "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                                                 "strict": False}}}, schema))


def run_job(job):
    name, how, path, body, schema = job
    st, ans = S.post(path, body)
    return job, st, ans


t = time.time()
n_tokens = 0
with concurrent.futures.ThreadPoolExecutor(max_workers=24) as ex:
    for (name, how, path, body, schema), st, ans in ex.map(run_job, jobs):
        if not check(st == 200, "%s (%s): status %d: %s" % (name, how, st, ans)):
            continue
        ch = ans["choices"][0]
        text = ch["message"]["content"] if "message" in ch else ch["text"]
        n_tokens += ans["usage"]["completion_tokens"]
        check(ch["finish_reason"] == "stop", "%s (%s): finish_reason %s after %d tokens: %r" % (
            name, how, ch["finish_reason"], ans["usage"]["completion_tokens"], text[-200:]))
        why = invalid(text, schema)
        check(why is None, "%s (%s): %s: %r" % (name, how, why, text))
print("  %d requests, %d tokens generated in %.1f s" % (len(jobs), n_tokens, time.time() - t), flush=True)

# --- n choices, streaming, json_object, a grammar ---
section("n = 3, streamed, json_object, a GBNF grammar")
weather = next(s for n, s, _ in SCHEMAS if n == "weather")
st, ans = S.post("/v1/chat/completions", {
    "messages": [{"role": "user", "content": weather["description"]}], "n": 3, "temperature": 0.8, "seed": 7,
    "max_tokens": 400, "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": weather}}})
check(st == 200 and len(ans.get("choices", [])) == 3, "n = 3: %s %s" % (st, ans))
for ch in ans.get("choices", []):
    why = invalid(ch["message"]["content"], weather)
    check(ch["finish_reason"] == "stop" and why is None, "n = 3, choice %d: %s %s: %r" % (
        ch["index"], ch["finish_reason"], why, ch["message"]["content"]))
check(len({ch["message"]["content"] for ch in ans.get("choices", [])}) > 1, "n = 3: the choices are all the same")

client = openai.OpenAI(base_url=S.base + "/v1", api_key="none", max_retries=0, timeout=300)
model = client.models.list().data[0].id
recipe = next(s for n, s, _ in SCHEMAS if n == "recipe")
parts, finish = [], None
for chunk in client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": recipe["description"]}], stream=True, temperature=0.8,
        seed=3, max_tokens=400,
        response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": recipe}}):
    for c in chunk.choices:
        parts.append(c.delta.content or "")
        finish = c.finish_reason or finish
text = "".join(parts)
why = invalid(text, recipe)
check(finish == "stop" and why is None and len(parts) > 3, "streamed: %s %s (%d chunks): %r" % (
    finish, why, len(parts), text))

st, ans = S.post("/v1/chat/completions", {
    "messages": [{"role": "user", "content": "Give the name and age of a person as a JSON object."}],
    "temperature": 0, "max_tokens": 200, "response_format": {"type": "json_object"}})
text = ans["choices"][0]["message"]["content"] if st == 200 else ""
check(st == 200 and ans["choices"][0]["finish_reason"] == "stop" and isinstance(loads(text), dict),
      "json_object: %s %s" % (st, ans))
# llama-server's json_object with a schema beside it
st, ans = S.post("/v1/chat/completions", {
    "messages": [{"role": "user", "content": "Is Saturday part of the weekend?"}], "temperature": 0, "max_tokens": 100,
    "response_format": {"type": "json_object", "schema": {"type": "object", "properties": {"w": {"type": "boolean"}},
                                                          "required": ["w"]}}})
check(st == 200 and isinstance((loads(ans["choices"][0]["message"]["content"]) or {}).get("w"), bool),
      "json_object with a schema: %s %s" % (st, ans))
for i in range(4):
    st, ans = S.post("/v1/completions", {"prompt": chatml("Is the sea salty?"), "temperature": 1.0, "seed": i,
                                         "max_tokens": 50, "grammar": 'root ::= ("Yes" | "No") ", " [a-z ]{1,20} "."'})
    text = ans["choices"][0]["text"] if st == 200 else ""
    check(st == 200 and ans["choices"][0]["finish_reason"] == "stop" and
          re.fullmatch(r"(Yes|No), [a-z ]{1,20}\.", text),
          "grammar on /v1/completions: %s %s" % (st, ans))
# text (none) and null: what a request without the fields gets
st, ans = S.post("/v1/completions", {"prompt": "The sea is", "temperature": 0, "max_tokens": 5,
                                     "response_format": {"type": "text"}, "grammar": None, "json_schema": None})
st2, ans2 = S.post("/v1/completions", {"prompt": "The sea is", "temperature": 0, "max_tokens": 5})
check(st == st2 == 200 and ans["choices"][0]["text"] == ans2["choices"][0]["text"], "response_format text: %s %s" % (
    ans, ans2))

# --- errors ---
section("errors: the field and what is wrong")
chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
for path, extra, param, words in [
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"not": {"type": "string"}}}}}}}, "response_format",
     ['response_format.json_schema.schema: the keyword "not" is not supported']),
    ("/v1/chat/completions", {"json_schema": {"type": "string", "format": "email"}}, "json_schema",
     ['json_schema: format "email" is not supported']),
    ("/v1/chat/completions",
     {"response_format": {"type": "json_object", "schema": {"type": "array", "uniqueItems": True}}},
     "response_format", ["response_format.schema: uniqueItems is not supported"]),
    ("/v1/completions", {"grammar": 'root ::= "a" |\nx ::= ('}, "grammar", ["grammar: line 2 column", "expected"]),
    ("/v1/completions", {"grammar": 'x ::= "a"'}, "grammar", ["no rule 'root'"]),
    ("/v1/completions", {"grammar": 7}, "grammar", ["grammar: expected a string"]),
    ("/v1/chat/completions", {"grammar": 'root ::= "a"', "json_schema": {"type": "integer"}}, None,
     ["give one of grammar, json_schema and response_format"]),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {
        "schema": {"type": "integer"}}}, "grammar": 'root ::= "a"'}, None,
     ["give one of grammar, json_schema and response_format"]),
    ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "response_format",
     ["response_format.type: 'xml' is not supported"]),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema"}}, "response_format",
     ["response_format.json_schema: expected an object"]),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format", ["response_format.json_schema.schema: missing"]),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": "yes",
                                                                                         "schema": {}}}},
     "response_format", ["strict: expected true or false"]),
    ("/v1/chat/completions", {"response_format": "json"}, "response_format", ["response_format: expected"]),
    ("/v1/chat/completions", {"json_schema": "{\"type\": \"integer\"}"}, "json_schema",
     ["json_schema: expected an object"]),
    # tools run (tests/test_tools.py); a call held by a grammar and a schema's grammar at once: refused
    ("/v1/chat/completions", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                              "tool_choice": "required", "json_schema": {"type": "integer"}}, "tool_choice",
     ["cannot be combined with response_format's schema"]),
]:
    body = dict(chat) if path.endswith("chat/completions") else {"prompt": "x", "max_tokens": 5}
    body.update(extra)
    st, ans = S.post(path, body)
    err = ans.get("error", {})
    ok = st == 400 and err.get("type") == "invalid_request_error" and all(w in err.get("message", "") for w in words)
    check(ok and (param is None or err.get("param") == param), "%s %s: %s %s (want %s, param %s)" % (
        path, json.dumps(extra)[:80], st, ans, words, param))

# --- the official openai client: json_schema and parse() with pydantic ---
section("the openai client: response_format json_schema, chat.completions.parse with pydantic")
book = next(s for n, s, _ in SCHEMAS if n == "book")
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": book["description"]}], seed=5,
                                   temperature=0.8, max_tokens=400, response_format={
                                       "type": "json_schema", "json_schema": {"name": "book", "schema": book,
                                                                              "strict": True}})
why = invalid(r.choices[0].message.content, book)
check(r.choices[0].finish_reason == "stop" and why is None, "openai json_schema: %s %s: %r" % (
    r.choices[0].finish_reason, why, r.choices[0].message.content))


class Ingredient(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=15)
    grams: int = pydantic.Field(ge=1, le=500)


class Recipe(pydantic.BaseModel):   # a nested model: $defs and $ref in the schema the client sends
    title: str = pydantic.Field(max_length=30)
    vegetarian: bool
    difficulty: Literal["easy", "medium", "hard"]
    ingredients: List[Ingredient] = pydantic.Field(min_length=1, max_length=3)


class Pet(pydantic.BaseModel):   # Literal: an enum; Optional: anyOf with null
    name: str = pydantic.Field(max_length=15)
    species: Literal["dog", "cat", "bird", "fish"]
    age: int = pydantic.Field(ge=0, le=30)
    vaccinated: bool
    owner: Optional[str] = pydantic.Field(max_length=20)


for cls, prompt, seeds in [(Recipe, "Give me a recipe for a salad with two ingredients.", [0, 1, 2]),
                           (Pet, "Describe a pet: its name, species, age, and whether it is vaccinated; the owner is "
                                 "optional.", [0, 1, 2])]:
    for seed in seeds:
        try:
            r = client.chat.completions.parse(model=model, messages=[{"role": "user", "content": prompt}],
                                              response_format=cls, temperature=0 if seed == 0 else 0.8, seed=seed,
                                              max_tokens=400)
            p = r.choices[0].message.parsed
            check(isinstance(p, cls) and r.choices[0].finish_reason == "stop" and p == cls.model_validate_json(
                r.choices[0].message.content), "parse(%s), seed %d: %r" % (cls.__name__, seed, p))
        except Exception as e:  # noqa: BLE001 (what the client raised: the output did not parse, or was cut)
            check(False, "parse(%s), seed %d: %r" % (cls.__name__, seed, e))

# --- llm bench: the serving benchmark under a schema or grammar, in the process and over HTTP ---
section("llm bench --json-schema, --grammar: in the process (masking time) and --base-url (this server)")
TMP = os.environ.get("TMPDIR", "/tmp")
yes_no = os.path.join(TMP, "test_structured.%d.yes_no.json" % os.getpid())
with open(yes_no, "w") as f:
    json.dump({"enum": ["yes", "no"]}, f)
yes_gbnf = os.path.join(TMP, "test_structured.%d.yes.gbnf" % os.getpid())
with open(yes_gbnf, "w") as f:
    f.write('root ::= "yes" | "no"\n')


def bench(*args):
    p = subprocess.run([LLM, "bench", "-m", MODEL, "-t", "2", "--num-prompts", "4", "--input-len", "16", "--json",
                        *args], capture_output=True, text=True, timeout=600)
    return p.returncode, (loads(p.stdout) if p.returncode == 0 else None) or {}, p.stderr[-500:]


order = os.path.join(HERE, "schemas", "order.json")
rc, d, err = bench("--json-schema", order, "--output-len", "40")
g = d.get("grammar", {})
check(rc == 0 and d.get("output_tokens", 0) > 0 and g.get("tokens") == d["output_tokens"] and
      g.get("ms_per_token", 0) > 0 and 0 < g.get("share", 0) < 1 and g.get("masks", -1) + g.get("mask_hits", -1) > 0,
      "bench --json-schema: every token under the grammar, its time per token and share: %d %r %s" % (rc, d, err))
rc, d, err = bench("--grammar", yes_gbnf, "--output-len", "40")
check(rc == 0 and 4 <= d.get("output_tokens", 0) <= 12 and d.get("grammar", {}).get("tokens") == d["output_tokens"],
      "bench --grammar (yes or no): each text ends with the grammar's: %d %r %s" % (rc, d, err))
rc, d, err = bench("--output-len", "12")
check(rc == 0 and d.get("output_tokens") == 48 and "grammar" not in d, "bench without a grammar: %d %r %s" % (rc, d,
                                                                                                           err))
# over HTTP: without a grammar end-of-text is ignored (4 x 12 tokens); with one, llama-server's
# json_schema and grammar fields are sent, and the texts end with the grammar's ("yes" or "no": 3
# tokens at most, 5 with the quotes of JSON)
for args, lo, hi in [([], 48, 48), (["--json-schema", yes_no], 4, 20), (["--grammar", yes_gbnf], 4, 12),
                     (["--json-object"], 4, 48)]:
    rc, d, err = bench("--base-url", S.base + "/v1", "--output-len", "12", *args)
    check(rc == 0 and d.get("failed") == 0 and lo <= d.get("output_tokens", 0) <= hi,
          "bench --base-url %s: %d output tokens, %d..%d expected: %d %r %s" % (" ".join(args), d.get(
              "output_tokens", -1), lo, hi, rc, d, err))
rc, d, err = bench("--base-url", S.base, "--json-schema", os.path.join(HERE, "schemas", "no_such.json"))
check(rc != 0 and "no_such.json" in err, "bench --json-schema, a missing file: %d %s" % (rc, err))
os.unlink(yes_no)
os.unlink(yes_gbnf)
S.stop()

# --- the command line: llm run, llm chat -p, llm generate ---
section("llm run, llm chat -p: --json-schema, --grammar, --json-object; llm generate's lines")


def run(args, input=None):
    p = subprocess.run([LLM, *args, "-m", MODEL, "-t", "2"], input=input, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


for name in ["person", "recursive_list"] if SAN else ["person", "weather", "recursive_list", "order"]:
    schema, path = next((s, p) for n, s, p in SCHEMAS if n == name)
    for seed in [0, 1]:   # greedy, sampled
        rc, out, err = run(["chat", "-p", schema["description"], "--json-schema", path, "--temp", "0" if seed == 0 else
                            "0.8", "--seed", str(seed)])
        why = invalid(out, schema) if rc == 0 else err
        check(why is None, "chat -p --json-schema %s, seed %d: %s: %r" % (name, seed, why, out))
    rc, out, err = run(["run", "-p", chatml(schema["description"]), "--special", "--json-schema", path, "--temp", "0",
                        "-n", "400", "--json"])
    d = (loads(out) if rc == 0 else None) or {}
    why = invalid(d.get("text", ""), schema) if rc == 0 else err
    check(d.get("finish_reason") == "stop" and why is None, "run --json-schema %s: %s %r" % (name, why, d))
with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "test_structured.%d.gbnf" % os.getpid()), "w") as f:
    f.write('# a yes or a no, and why\nroot ::= answer ", because " [a-z ]{1,30} "."\nanswer ::= "yes" | "no"\n')
    gpath = f.name
for seed in [1, 2, 3]:
    rc, out, err = run(["run", "-p", chatml("Is the sky blue?"), "--special", "--grammar", gpath, "--seed", str(seed),
                        "-n", "100"])
    check(rc == 0 and re.fullmatch(r"(yes|no), because [a-z ]{1,30}\.\n", out), "run --grammar: %d %r %s" % (
        rc, out, err[-300:]))
rc, out, err = run(["chat", "-p", "Describe a dog as a JSON object with a name and an age.", "--json-object",
                    "--temp", "0"])
check(rc == 0 and isinstance(loads(out), dict), "chat --json-object: %d %r %s" % (rc, out, err[-300:]))

# llm generate: each line's own field, over the flags' default (--grammar); text: none. (Its
# prompts are text: control tokens' text is not parsed, so no chat template.)
def ask(q):
    return "Question: %s\nAnswer: " % q


lines = [
    {"prompt": ask("Is the sky blue?"), "max_tokens": 100, "seed": 1},                         # the default
    {"prompt": ask("Pick a number from 1 to 10."), "max_tokens": 100, "json_schema": {
        "type": "integer", "minimum": 1, "maximum": 10}},
    {"prompt": ask(book["description"]), "max_tokens": 400, "temperature": 0, "response_format": {
        "type": "json_schema", "json_schema": {"name": "book", "schema": book}}},
    {"prompt": ask("Describe a cat as JSON."), "max_tokens": 200, "temperature": 0,
     "response_format": {"type": "json_object", "schema": {"type": "object", "properties": {
         "name": {"type": "string", "maxLength": 10}}, "required": ["name"]}}},
    {"prompt": ask("Yes or no?"), "max_tokens": 20, "temperature": 0, "grammar": 'root ::= "maybe" | "perhaps"'},
    {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "response_format": {"type": "text"},
     "ignore_eos": True},
    {"prompt": "x", "json_schema": {"type": "object", "patternProperties": {}}},
    {"prompt": "x", "grammar": "root ::= [a-"},
]
rc, out, err = run(["generate", "--requests", "-", "--grammar", gpath, "--temp", "0.8", "-c", "1024"],
                   input="".join(json.dumps(x) + "\n" for x in lines))
res = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
check(rc == 0 and len(res) == len(lines), "generate: %d, %d lines: %s" % (rc, len(res), err[-300:]))
if len(res) == len(lines):
    check(res[0]["finish_reason"] == "stop" and re.fullmatch(r"(yes|no), because [a-z ]{1,30}\.", res[0]["text"]),
          "generate, the flags' grammar: %r" % res[0])
    check(res[1]["finish_reason"] == "stop" and invalid(res[1]["text"], lines[1]["json_schema"]) is None,
          "generate json_schema: %r" % res[1])
    check(res[2]["finish_reason"] == "stop" and invalid(res[2]["text"], book) is None, "generate response_format: %r" %
          res[2])
    check(res[3]["finish_reason"] == "stop" and invalid(res[3]["text"], lines[3]["response_format"]["schema"]) is None,
          "generate json_object with a schema: %r" % res[3])
    check(res[4]["finish_reason"] == "stop" and res[4]["text"] in ("maybe", "perhaps"), "generate grammar: %r" % res[4])
    check(res[5]["finish_reason"] == "length" and len(res[5]["tokens"]) == 8 and "because" not in res[5]["text"],
          "generate response_format text: %r" % res[5])
    check(res[6]["finish_reason"] == "error" and "json_schema: patternProperties is not supported" in res[6]["error"],
          "generate, a refused schema: %r" % res[6])
    check(res[7]["finish_reason"] == "error" and res[7]["error"].startswith("grammar: line 1 column"),
          "generate, a bad grammar: %r" % res[7])
os.unlink(gpath)

section("done")
print("test_structured: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
