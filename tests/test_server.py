"""llm serve against the official OpenAI Python client, curl and raw sockets.

Usage: python test_server.py LLM_BINARY MODEL.gguf
(tests/test_server.sh runs it with the venv tests/fixtures.sh makes, on SmolLM2-135M-Instruct.)

Each server runs on a free port of 127.0.0.1 (--port 0; the port is read from its first line).
Checks: chat and completions, streamed and whole; greedy answers equal to llm generate's; n;
logprobs; stop strings; seeds; usage equal to the token counts; errors with their status and
type; SSE framing byte for byte (curl); 64 concurrent streaming clients equal to each run alone,
with /metrics adding up; a client that disconnects is aborted and its KV blocks freed; hostile
clients (slowloris, a 100 MB body, invalid UTF-8, deep nesting, truncated requests, random bytes,
huge headers) do not crash or wedge it; the API key; a full queue; the idle timeout; SIGTERM
finishes what is in flight and exits 0; /ready (503 with --ready-max-waiting sequences waiting),
X-Replica-Id. Before a body is read: 401/404/405 from the headers, 503
beyond the budget for bodies in flight, token ids beyond the context refused while they arrive
(not parsed); the header deadline and the body's minimum rate; connections per address;
/health answered while slow clients from several loopback addresses fill the connections. The
request log: a line per request (rejected, aborted, streamed ones too) with its status, tokens
equal to the usage answered, TTFT, error message, as text and as JSON; --quiet.
"""
import calendar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import openai

T0 = time.time()


def section(name):
    print("[%.1f s] %s" % (time.time() - T0, name), flush=True)

LLM, MODEL = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL test_server: " + msg, flush=True)
    return cond


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([LLM, "serve", "-m", MODEL, "--port", "0", "-t", "2", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)$", line.strip())
        if not m:
            raise SystemExit("FAIL test_server: the server did not start: " + line + self.proc.stderr.read())
        self.port = int(m.group(1))
        self.base = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, key="none", retries=0):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=retries, timeout=120)

    def stop(self, sig=signal.SIGINT, timeout=30):
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        time.sleep(0.1)
        bad = [x for x in self.log if "Sanitizer" in x or "runtime error" in x]
        check(not bad, "the server's log has sanitizer reports: %s" % "".join(self.log[-60:]))
        return rc


def recv_all(s):
    """What the server sends until it closes the connection (or resets it)."""
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    return got


def http(port, method, path, body=None, headers=None, raw=None, timeout=60):
    """One request on a fresh connection: (status, headers, body bytes); status 0 when the
    server closed the connection without an answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if raw is None:
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
        h = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n" % (method, path, len(data))
        for k, v in (headers or {}).items():
            h += "%s: %s\r\n" % (k, v)
        raw = h.encode() + b"\r\n" + data
    try:
        s.sendall(raw)
    except OSError:
        pass
    got = recv_all(s)
    s.close()
    if not got.startswith(b"HTTP/1."):
        return 0, "", got
    head, _, rest = got.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        rest = out
    return status, head.decode("latin-1"), rest


def metrics(port):
    _, _, body = http(port, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        name = re.sub(r'model_name="[^"]*",?', "", name).replace("{}", "")
        out[name] = float(value)
    return out


def vm(pid, key):
    """A field of /proc/PID/status in kB (VmRSS, VmHWM)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def head_of(port, raw, secs=5, src="127.0.0.1"):
    """Sends raw bytes on a fresh connection from address src and reads until the end of an
    answer's headers: (what came, seconds it took); b"" when the server closed the connection
    without an answer or nothing came within secs."""
    s = socket.socket()
    s.settimeout(secs)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    t0 = time.time()
    got = b""
    try:
        s.sendall(raw)
        while b"\r\n\r\n" not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got, time.time() - t0


class Slow:
    """Clients that hold connections from the addresses src: each sends `start` and then a
    byte every `every` seconds and never finishes its request; a connection the server closes
    is opened again (when reopen). closed: how many the server closed; answers: the status
    lines it sent before closing them."""

    def __init__(self, port, srcs, start, every=0.5, reopen=True):
        self.port, self.start_bytes, self.every, self.reopen = port, start, every, reopen
        self.socks = [None] * len(srcs)
        self.srcs = srcs
        self.closed = 0
        self.closed_at = []   # seconds since the start
        self.t0 = time.time()
        self.answers = []
        self.stop_flag = False
        for i in range(len(srcs)):
            self._open(i)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self, i):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")   # closed with a reset: no TIME_WAIT
        try:
            s.bind((self.srcs[i], 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", self.port))
            s.sendall(self.start_bytes)
            s.settimeout(0)
            self.socks[i] = s
        except OSError:
            s.close()
            self.socks[i] = None

    def _run(self):
        while not self.stop_flag:
            for i, s in enumerate(self.socks):
                if s is None:
                    if self.reopen:
                        self._open(i)
                    continue
                gone = False
                try:
                    b = s.recv(4096)
                    if b:
                        self.answers.append(b.split(b"\r\n")[0])
                    gone = True
                except BlockingIOError:
                    try:
                        s.sendall(b"X")
                    except OSError:
                        gone = True
                except OSError:
                    gone = True
                if gone:
                    self.closed += 1
                    self.closed_at.append(time.time() - self.t0)
                    s.close()
                    self.socks[i] = None
            time.sleep(self.every)

    def stop(self):
        self.stop_flag = True
        self.thread.join(30)
        for s in self.socks:
            if s is not None:
                s.close()


def tokens_of(port, **body):
    st, _, b = http(port, "POST", "/tokenize", body)
    return json.loads(b)["tokens"] if st == 200 else None


def generate(lines):
    """llm generate's results for request lines (dicts)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    out = subprocess.run([LLM, "generate", "-m", MODEL, "--requests", f.name, "-t", "2"], capture_output=True, text=True)
    os.unlink(f.name)
    return [json.loads(x) for x in out.stdout.splitlines()]


PROMPTS = ["Once upon a time", "The quick brown fox", "def fibonacci(n):", "北京是中国的",
           "The three primary colors are", "Water boils at", "import numpy as np\n", "My favourite food is"]
# (with "... France?" alone the first token is nearly a tie: llama.cpp's own lead of "The" over
# "La" is 0.13, and a kernel summing in another order answers "La femme de France"; with "Answer
# in one sentence." every token of the answer leads by 1.2 or more in both engines)
MSGS = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]

S = Server()
c = S.client()

# --- models, health ---
section("models, health")
models = c.models.list()
check(len(models.data) == 1 and models.data[0].id == os.path.basename(MODEL)[:-5], "models: %s" % models)
check(getattr(models.data[0], "max_model_len", None) == 4096, "models: max_model_len %s" % models.data[0])
st, _, b = http(S.port, "GET", "/health")
check(st == 200 and json.loads(b) == {"status": "ok"}, "health: %d %s" % (st, b))

# --- bodies: what the headers decide is answered before a byte of the body is read ---
section("bodies: answered from the headers, a budget for bodies in flight, token ids beyond the context")
# 7 million token ids (14 MB) in one prompt of a 4096-token context: refused while it is read,
# not parsed (Jansson would hold some 300 MB for it)
try:
    with open("/proc/%d/clear_refs" % S.proc.pid, "w") as f:
        f.write("5")   # VmHWM from here
except OSError:
    pass
hwm0 = vm(S.proc.pid, "VmHWM")
t0 = time.time()
st, _, b = http(S.port, "POST", "/v1/completions", b'{"prompt":[' + b"1," * 7000000 + b'1],"max_tokens":1}')
grew = vm(S.proc.pid, "VmHWM") - hwm0
err = json.loads(b)["error"] if st == 400 else {}
check(st == 400 and err.get("param") == "prompt" and "max_model_len" in err.get("message", "") and grew < 32768,
      "7 million token ids: %d %s, peak resident memory grew by %d kB in %.1f s" % (st, b[:200], grew, time.time() - t0))
# 6 million stop token ids (12 MB): Jansson would hold some 300 MB for them; the parse is charged to
# --max-body-memory (256 MiB), so the body is refused whole (413) and never parsed
hwm0 = vm(S.proc.pid, "VmHWM")
st, _, b = http(S.port, "POST", "/v1/completions", b'{"prompt":"hi","max_tokens":1,"stop_token_ids":[' + b"1," * 6000000 + b'1]}')
grew = vm(S.proc.pid, "VmHWM") - hwm0
check(st == 413 and b"JSON values" in b and grew < 32768,
      "6 million stop ids: %d %s, peak resident memory grew by %d kB" % (st, b[:200], grew))
# 2.8 million empty objects (8 MB) in a field nothing reads: some 700 MB parsed; refused the same way
hwm0 = vm(S.proc.pid, "VmHWM")
st, _, b = http(S.port, "POST", "/v1/completions", b'{"prompt":"hi","max_tokens":1,"user":[' + b"{}," * 2800000 + b'{}]}')
grew = vm(S.proc.pid, "VmHWM") - hwm0
check(st == 413 and b"JSON values" in b and grew < 32768,
      "2.8 million objects: %d %s, peak resident memory grew by %d kB" % (st, b[:200], grew))
# an unknown path, a wrong method: answered at once, the body never sent
for raw, want_st in [(b"POST /v1/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", b"404"),
                     (b"GET /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", b"405"),
                     (b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", b"405")]:
    got, secs = head_of(S.port, raw)
    check(got.startswith(b"HTTP/1.1 " + want_st) and secs < 4, "%r: %r after %.1f s, want %s before the body" %
          (raw[:30], got[:60], secs, want_st.decode()))
# bodies in flight: --max-body-memory (256 MiB: sixteen of 16 MiB). An announced body takes 1 MiB
# of it at its headers, the rest as it comes: twenty that announce 16 MiB and send nothing hold
# 20 MiB, not the budget
held = []
for i in range(20):
    s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (16 << 20))
    held.append(s)
time.sleep(0.5)
m = metrics(S.port)
check(m.get("llm:http_body_bytes") == 20 * (1 << 20), "20 bodies announced, none sent: %s bytes held" % m.get("llm:http_body_bytes"))
for s in held:
    s.close()
t0 = time.time()
while time.time() - t0 < 10 and metrics(S.port).get("llm:http_body_bytes") != 0:
    time.sleep(0.05)
# sixteen that send all but a byte of 16 MiB fill it; the next four are refused at once with 503
# and Retry-After, before their body
held = []
for i in range(16):
    s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (16 << 20))
    s.sendall(b" " * ((16 << 20) - 1))
    held.append(s)
t0 = time.time()
while time.time() - t0 < 30 and metrics(S.port).get("llm:http_body_bytes") != 16 * (16 << 20):
    time.sleep(0.1)
late = []
for i in range(4):
    s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (16 << 20))
    late.append(s)
refused = []
t0 = time.time()
for s in held + late:
    s.settimeout(max(0.1, 2 - (time.time() - t0)))
    try:
        got = s.recv(4096)
    except OSError:
        got = None
    refused.append(got)
waiting = sum(1 for g in refused[:16] if g is None)
ok503 = sum(1 for g in refused[16:] if g and g.startswith(b"HTTP/1.1 503") and b"retry-after:" in g.lower())
check(waiting == 16 and ok503 == 4, "16 bodies of 16 MiB sent, 4 more announced: %d waited for the rest of their body, %d got "
      "503 with Retry-After: %r" % (waiting, ok503, [g[:40] if g else g for g in refused]))
m = metrics(S.port)
check(m.get("llm:http_body_bytes") == 16 * (16 << 20), "bodies in flight: %s bytes" % m.get("llm:http_body_bytes"))
held += late
for s in held:
    s.close()
t0 = time.time()
while time.time() - t0 < 10 and metrics(S.port).get("llm:http_body_bytes") != 0:
    time.sleep(0.05)
st, _, b = http(S.port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
check(st == 200 and metrics(S.port).get("llm:http_body_bytes") == 0, "after the bodies went away: %d %s, %s bytes held" %
      (st, b[:100], metrics(S.port).get("llm:http_body_bytes")))

# slow clients (checked later, they take 10 s): a request header a byte a second, closed at
# --header-timeout (10 s) although it never stops sending; a body a byte a second, closed at
# --header-timeout + its bytes at --body-min-rate (4096 bytes/s), with a 408
slow_header = Slow(S.port, ["127.0.0.1"], b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n", every=1.0, reopen=False)
slow_body = Slow(S.port, ["127.0.0.1"], b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{",
                 every=1.0, reopen=False)
slow_t0 = time.time()

# --- chat, whole: a real answer, usage equal to the token counts, logprobs ---
section("chat, whole: a real answer, usage equal to the token counts, logprobs")
r = c.chat.completions.create(model=models.data[0].id, messages=MSGS, temperature=0, max_tokens=32,
                              logprobs=True, top_logprobs=3)
ch = r.choices[0]
check("Paris" in ch.message.content, "chat: no Paris in '%s'" % ch.message.content)
check(ch.finish_reason == "stop" and ch.message.role == "assistant", "chat: finish %s role %s" % (ch.finish_reason, ch.message.role))
prompt_ids = tokens_of(S.port, messages=MSGS)
check(r.usage.prompt_tokens == len(prompt_ids), "chat usage: %d prompt tokens, /tokenize %d" % (r.usage.prompt_tokens, len(prompt_ids)))
lp = ch.logprobs.content
check(r.usage.completion_tokens == len(lp) and r.usage.total_tokens == r.usage.prompt_tokens + len(lp),
      "chat usage: %s, %d logprobs" % (r.usage, len(lp)))
check(all(e.logprob <= 0 and len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token and
          abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6 and
          e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob for e in lp),
      "chat logprobs: greedy tokens are not the best of their top 3, or unsorted")
check("".join(bytes(e.bytes).decode("utf-8", "replace") for e in lp).startswith(ch.message.content),
      "chat logprobs: the tokens' bytes do not spell the answer")
# greedy: the same as llm generate on the rendered prompt's ids
g = generate([{"tokens": prompt_ids, "max_tokens": 32, "temperature": 0}])[0]
check(g["text"] == ch.message.content, "chat '%s', llm generate '%s'" % (ch.message.content, g["text"]))

# --- chat, streamed: the same text, role first, finish last, usage ---
section("chat, streamed: the same text, role first, finish last, usage")
chunks = list(c.chat.completions.create(model=models.data[0].id, messages=MSGS, temperature=0, max_tokens=32, stream=True,
                                        stream_options={"include_usage": True}))
text = "".join(k.choices[0].delta.content or "" for k in chunks if k.choices)
check(text == ch.message.content, "streamed chat '%s', whole '%s'" % (text, ch.message.content))
check(chunks[0].choices[0].delta.role == "assistant", "streamed chat: the first chunk has no role")
fin = [k.choices[0].finish_reason for k in chunks if k.choices and k.choices[0].finish_reason]
check(fin == ["stop"], "streamed chat: finish reasons %s" % fin)
check(chunks[-1].choices == [] and chunks[-1].usage and chunks[-1].usage.completion_tokens == r.usage.completion_tokens and
      chunks[-1].usage.prompt_tokens == r.usage.prompt_tokens, "streamed chat: usage %s" % chunks[-1])
check(len({k.id for k in chunks}) == 1, "streamed chat: chunks with different ids")

# --- completions: greedy equal to llm generate, one request with all prompts, streamed too ---
section("completions: greedy equal to llm generate, one request with all prompts, streamed too")
want = generate([{"prompt": p, "max_tokens": 12, "temperature": 0} for p in PROMPTS])
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS, max_tokens=12, temperature=0)
check([x.index for x in r.choices] == list(range(len(PROMPTS))), "completions: indices %s" % [x.index for x in r.choices])
check([x.text for x in r.choices] == [w["text"] for w in want],
      "completions %s, llm generate %s" % ([x.text for x in r.choices], [w["text"] for w in want]))
check(r.usage.prompt_tokens == sum(len(w["prompt_tokens"]) for w in want) and
      r.usage.completion_tokens == sum(len(w["tokens"]) for w in want), "completions usage %s" % r.usage)
s = "".join(k.choices[0].text for k in c.completions.create(model=models.data[0].id, prompt=PROMPTS[3], max_tokens=12,
                                                             temperature=0, stream=True) if k.choices)
check(s == want[3]["text"], "streamed completion '%s', llm generate '%s'" % (s, want[3]["text"]))
# token prompts, echo
ids = want[0]["prompt_tokens"]
r = c.completions.create(model=models.data[0].id, prompt=ids, max_tokens=12, temperature=0, echo=True)
check(r.choices[0].text == PROMPTS[0] + want[0]["text"], "echo of a token prompt: '%s'" % r.choices[0].text)
r = c.completions.create(model=models.data[0].id, prompt=[ids, ids], max_tokens=12, temperature=0)
check([x.text for x in r.choices] == [want[0]["text"]] * 2, "a list of token prompts: %s" % [x.text for x in r.choices])

# --- logprobs of completions ---
section("logprobs of completions")
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[1], max_tokens=8, temperature=0, logprobs=3)
L = r.choices[0].logprobs
check(len(L.tokens) == r.usage.completion_tokens == len(L.token_logprobs) == len(L.top_logprobs) == len(L.text_offset),
      "completion logprobs: lengths %s" % L)
check(all(len(t) == 3 and abs(max(t.values()) - x) < 1e-6 and x <= 0 for t, x in zip(L.top_logprobs, L.token_logprobs)),
      "completion logprobs: the greedy token is not the best of the top 3")
check("".join(L.tokens) == r.choices[0].text and L.text_offset[0] == 0, "completion logprobs: tokens %s, text '%s'" % (L.tokens, r.choices[0].text))

# --- n: choices of one prompt, its KV blocks shared through the prefix cache ---
section("n: choices of one prompt, its KV blocks shared through the prefix cache")
long_prompt = "Here is a story about a small robot who wanted to learn how to paint. " * 4
m0 = metrics(S.port)
r = c.completions.create(model=models.data[0].id, prompt=long_prompt, max_tokens=8, temperature=0, n=4)
m1 = metrics(S.port)
check(len(r.choices) == 4 and len({x.text for x in r.choices}) == 1 and [x.index for x in r.choices] == [0, 1, 2, 3],
      "n=4 greedy: %s" % [x.text for x in r.choices])
n_prompt = len(tokens_of(S.port, prompt=long_prompt))
check(r.usage.prompt_tokens == n_prompt and r.usage.completion_tokens == 32, "n=4 usage %s (prompt %d tokens)" % (r.usage, n_prompt))
hits = m1["llm:prefix_cache_hits_total"] - m0["llm:prefix_cache_hits_total"]
check(hits >= 3 * (n_prompt // 16) * 16, "n=4: %d prompt tokens found in the prefix cache, want >= %d" % (hits, 3 * (n_prompt // 16) * 16))
r = c.chat.completions.create(model=models.data[0].id, messages=MSGS, max_tokens=16, temperature=1.0, seed=5, n=3)
check(len(r.choices) == 3 and len({x.message.content for x in r.choices}) > 1, "n=3 sampled: the choices are all equal")

# --- seeds ---
section("seeds")
def sampled(seed):
    return c.completions.create(model=models.data[0].id, prompt=PROMPTS[0], max_tokens=16, temperature=1.0, seed=seed).choices[0].text
a, b, d = sampled(42), sampled(42), sampled(43)
check(a == b, "seed 42 twice: '%s', '%s'" % (a, b))
check(a != d, "seeds 42 and 43 gave the same text '%s'" % a)

# --- stop strings ---
section("stop strings")
full = want[4]["text"]
word = full.strip().split()[1] if len(full.strip().split()) > 1 else full.strip()[:3]
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[4], max_tokens=12, temperature=0, stop=[word, "zzzz"])
check(r.choices[0].text == full[:full.index(word)] and r.choices[0].finish_reason == "stop",
      "stop '%s': '%s' (%s), full '%s'" % (word, r.choices[0].text, r.choices[0].finish_reason, full))
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[4], max_tokens=12, temperature=0, stop=word)
check(r.choices[0].text == full[:full.index(word)], "stop as a string: '%s'" % r.choices[0].text)
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[4], max_tokens=3, temperature=0)
check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3, "max_tokens 3: %s %s" % (r.choices[0].finish_reason, r.usage))

# --- errors: status, type, the field named ---
section("errors: status, type, the field named")
def error_of(fn, cls):
    try:
        fn()
    except cls as e:
        return e
    except Exception as e:  # noqa: BLE001
        check(False, "%s expected, got %r" % (cls.__name__, e))
        return None
    check(False, "%s expected, the request succeeded" % cls.__name__)
    return None

e = error_of(lambda: c.completions.create(model=models.data[0].id, prompt="x", temperature=-1), openai.BadRequestError)
check(e is not None and e.status_code == 400 and "temperature" in str(e) and e.body.get("type") == "invalid_request_error"
      and e.body.get("param") == "temperature", "temperature -1: %r" % (e and e.body))
e = error_of(lambda: c.completions.create(model="gpt-4", prompt="x"), openai.NotFoundError)
check(e is not None and "gpt-4" in str(e), "unknown model: %r" % e)
e = error_of(lambda: c.chat.completions.create(model=models.data[0].id, messages=MSGS, tools=[
    {"type": "function", "function": {"parameters": {"type": "object", "properties": {}}}}]), openai.BadRequestError)
check(e is not None and e.body.get("param") == "tools" and "name" in str(e), "a tool without a name: %r" % e)
# response_format: text, json_object and json_schema run (tests/test_structured.py); other types are refused
e = error_of(lambda: c.chat.completions.create(model=models.data[0].id, messages=MSGS, response_format={"type": "xml"}),
             openai.BadRequestError)
check(e is not None and "response_format" in str(e) and e.body.get("param") == "response_format",
      "response_format xml: %r" % e)
r = c.chat.completions.create(model=models.data[0].id, messages=MSGS, max_tokens=2, response_format={"type": "text"})
check(r.usage.completion_tokens == 2, "response_format text refused")
e = error_of(lambda: c.chat.completions.create(model=models.data[0].id, messages=[{"role": "function", "content": "x", "name": "f"}]),
             openai.BadRequestError)
check(e is not None and "role" in str(e), "a function message (OpenAI's older tool results): %r" % e)
e = error_of(lambda: c.chat.completions.create(model=models.data[0].id, messages=[]), openai.BadRequestError)
check(e is not None and "messages" in str(e), "no messages: %r" % e)
e = error_of(lambda: c.completions.create(model=models.data[0].id, prompt=[10**9]), openai.BadRequestError)
check(e is not None, "a token id out of range")
e = error_of(lambda: c.completions.create(model=models.data[0].id, prompt="x", n=0), openai.BadRequestError)
check(e is not None and "n:" in str(e), "n=0: %r" % e)
for body, word in [(b"{", "invalid JSON"), (b"[1]", "not a JSON object"), (b'{"prompt":"\xff"}', "UTF-8"),
                   (b'{"prompt":"a","prompt":"b"}', "duplicate"), (b'{"prompt":"a","max_tokens":1.5}', "max_tokens")]:
    st, _, b = http(S.port, "POST", "/v1/completions", body)
    ok = st == 400
    if ok:
        err = json.loads(b)["error"]
        ok = word in err["message"] and err["type"] == "invalid_request_error"
    check(ok, "body %r: %d %s" % (body, st, b[:200]))
st, _, b = http(S.port, "POST", "/v1/chat/completions", {"messages": [{"role": "user"}]})
check(st == 400 and b"content" in b, "a user message without content: %d %s" % (st, b[:200]))
# best_of equal to n is what is done anyway, in either key order; another best_of is refused
for body in [b'{"prompt":"a","max_tokens":1,"best_of":2,"n":2}', b'{"prompt":"a","max_tokens":1,"n":2,"best_of":2}']:
    st, _, b = http(S.port, "POST", "/v1/completions", body)
    check(st == 200 and len(json.loads(b)["choices"]) == 2, "body %r: %d %s" % (body, st, b[:200]))
st, _, b = http(S.port, "POST", "/v1/completions", b'{"prompt":"a","max_tokens":1,"best_of":3,"n":2}')
check(st == 400 and b"best_of" in b, "best_of 3 with n 2: %d %s" % (st, b[:200]))
r = c.chat.completions.create(model=models.data[0].id, messages=MSGS, max_completion_tokens=2, max_tokens=5)
check(r.usage.completion_tokens == 2, "max_completion_tokens 2 beside max_tokens 5: %d tokens" % r.usage.completion_tokens)
m = c.models.retrieve(models.data[0].id)
check(m.id == models.data[0].id, "models.retrieve: %s" % m)
e = error_of(lambda: c.models.retrieve("nope"), openai.NotFoundError)
check(e is not None, "models.retrieve of an unknown model")
st, head, b = http(S.port, "OPTIONS", "/v1/chat/completions", headers={"Origin": "http://example.com",
                                                                     "Access-Control-Request-Method": "POST"})
check(st == 204 and "access-control-allow-origin: *" in head.lower() and "authorization" in head.lower(),
      "CORS preflight: %d %s" % (st, head))
st, head, b = http(S.port, "GET", "/v1/models", headers={"Origin": "http://example.com"})
check(st == 200 and "access-control-allow-origin: *" in head.lower(), "CORS: %s" % head)
st, _, b = http(S.port, "POST", "/v1/completions", raw=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef")
check(st == 400, "two Content-Length headers: %d %s" % (st, b[:100]))
st, _, b = http(S.port, "POST", "/v1/completions", raw=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                b"Transfer-Encoding: gzip\r\n\r\nabcdef")
check(st == 501, "Transfer-Encoding gzip: %d %s" % (st, b[:100]))
st, _, b = http(S.port, "GET", "/v1/nothing")
check(st == 404 and json.loads(b)["error"]["type"] == "not_found_error", "an unknown path: %d %s" % (st, b))
st, _, b = http(S.port, "GET", "/v1/completions")
check(st == 405, "GET /v1/completions: %d" % st)
st, _, b = http(S.port, "POST", "/detokenize", {"tokens": want[2]["tokens"]})
check(st == 200 and json.loads(b)["prompt"] == want[2]["text"], "detokenize: %d %s" % (st, b))
st, _, b = http(S.port, "POST", "/tokenize", {"prompt": PROMPTS[2]})
check(st == 200 and json.loads(b)["tokens"] == want[2]["prompt_tokens"], "tokenize: %s, generate %s" % (b, want[2]["prompt_tokens"]))

# --- SSE framing, byte for byte, with curl ---
section("SSE framing, byte for byte, with curl")
for path, body in [("/v1/completions", {"prompt": PROMPTS[5], "max_tokens": 5, "temperature": 0, "stream": True}),
                   ("/v1/chat/completions", {"messages": MSGS, "max_tokens": 5, "temperature": 0, "stream": True,
                                             "stream_options": {"include_usage": True}})]:
    out = subprocess.run(["curl", "-sS", "-N", "-i", S.base + path, "-H", "Content-Type: application/json", "-d", json.dumps(body)],
                         capture_output=True)
    head, _, events = out.stdout.partition(b"\r\n\r\n")
    check(out.returncode == 0 and b"content-type: text/event-stream" in head.lower(), "curl %s: %s" % (path, head))
    parts = events.split(b"\n\n")
    ok = events.endswith(b"data: [DONE]\n\n") and parts[-1] == b"" and parts[-2] == b"data: [DONE]"
    for p in parts[:-2]:
        ok &= p.startswith(b"data: {") and b"\n" not in p
        if ok:
            json.loads(p[6:])
    check(ok and len(parts) >= 4, "curl %s: the events are not 'data: {...}\\n\\n' ending in [DONE]: %r" % (path, events[:400]))

# --- 64 concurrent streaming clients: each as it is alone; /metrics adds up ---
# 64 clients; 16 under sanitizers (make test SAN=1 sets LLM_TEST_SAN=1), where each token costs ten times as much
NCLI = 16 if os.environ.get("LLM_TEST_SAN") == "1" else 64
if NCLI < 64:
    print("SKIP test_server: %d concurrent clients, not 64, under sanitizers (make test runs 64)" % NCLI, flush=True)
section("%d concurrent streaming clients: each as it is alone; /metrics adds up" % NCLI)
alone = [c.completions.create(model=models.data[0].id, prompt=p, max_tokens=16, temperature=0).choices[0].text for p in PROMPTS]
m0 = metrics(S.port)
res = [None] * NCLI
usage = [None] * NCLI

def stream_one(i):
    try:
        cl = S.client()
        text, u = "", None
        for k in cl.completions.create(model=models.data[0].id, prompt=PROMPTS[i % 8], max_tokens=16, temperature=0, stream=True,
                                       stream_options={"include_usage": True}):
            if k.choices:
                text += k.choices[0].text
            if k.usage:
                u = k.usage
        res[i], usage[i] = text, u
    except Exception as e:  # noqa: BLE001
        res[i] = e

threads = [threading.Thread(target=stream_one, args=(i,)) for i in range(NCLI)]
for t in threads:
    t.start()
for t in threads:
    t.join(300)
m1 = metrics(S.port)
errs = [x for x in res if not isinstance(x, str)]
check(not errs, "%d clients: %d did not complete: %s" % (NCLI, len(errs), errs[:3]))
diff = [i for i in range(NCLI) if res[i] != alone[i % 8]]
check(not diff, "%d clients: %d differ from their prompt run alone, e.g. %s" % (NCLI, len(diff), [(res[i], alone[i % 8]) for i in diff[:2]]))
gen = sum(u.completion_tokens for u in usage if u)
done = sum(m1[k] - m0.get(k, 0) for k in m1 if k.startswith("llm:request_success_total"))
check(m1["llm:generation_tokens_total"] - m0["llm:generation_tokens_total"] == gen and done == NCLI,
      "%d clients: /metrics counts %d tokens and %d ended sequences; the answers %d tokens, %d requests" %
      (NCLI, m1["llm:generation_tokens_total"] - m0["llm:generation_tokens_total"], done, gen, NCLI))
check(m1['llm:time_to_first_token_seconds_count'] - m0['llm:time_to_first_token_seconds_count'] == NCLI,
      "%d clients: the TTFT histogram counts %d" % (NCLI, m1['llm:time_to_first_token_seconds_count'] - m0['llm:time_to_first_token_seconds_count']))


# --- a client that goes away is aborted, its KV blocks come back ---
section("a client that goes away is aborted, its KV blocks come back")
def wait_idle(port, key, before, secs=20):
    t = time.time() + secs
    m = metrics(port)
    while time.time() < t:
        m = metrics(port)
        if m[key] > before and m["llm:num_requests_running"] == 0 and m["llm:kv_cache_blocks_used"] == 0:
            break
        time.sleep(0.05)
    return m

abort_key = 'llm:request_success_total{finished_reason="abort"}'
for stream in (True, False):
    m0 = metrics(S.port)
    s = socket.create_connection(("127.0.0.1", S.port))
    data = json.dumps({"prompt": PROMPTS[0], "max_tokens": 4000, "ignore_eos": True, "stream": stream}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    if stream:
        got = b""
        while b"data: {" not in got:
            got += s.recv(4096)
    else:   # until it runs (a loaded machine may take a while to read and schedule it)
        t = time.time() + 30
        while time.time() < t and metrics(S.port)["llm:kv_cache_blocks_used"] == 0:
            time.sleep(0.05)
    mid = metrics(S.port)
    s.close()
    m = wait_idle(S.port, abort_key, m0[abort_key])
    check(mid["llm:kv_cache_blocks_used"] > 0, "disconnect (stream %s): no KV blocks in use while it ran" % stream)
    check(m[abort_key] == m0[abort_key] + 1 and m["llm:kv_cache_blocks_used"] == 0 and m["llm:num_requests_running"] == 0,
          "disconnect (stream %s): aborted %d, blocks in use %d, running %d" %
          (stream, m[abort_key] - m0[abort_key], m["llm:kv_cache_blocks_used"], m["llm:num_requests_running"]))

# --- hostile clients ---
section("hostile clients")
# the slow clients begun after the health check (a request header, a body, a byte a second)
time.sleep(max(0.0, 20 - (time.time() - slow_t0)))
slow_header.stop()
slow_body.stop()
check(slow_header.closed == 1 and 8 < slow_header.closed_at[0] < 16,
      "a request header a byte a second: closed %d times, at %s s (--header-timeout 10)" % (slow_header.closed, slow_header.closed_at))
check(slow_body.closed == 1 and 8 < slow_body.closed_at[0] < 16 and slow_body.answers[:1] == [b"HTTP/1.1 408 Request Timeout"],
      "a body a byte a second: closed %d times, at %s s, answers %s" % (slow_body.closed, slow_body.closed_at, slow_body.answers))
# a slow reader: a streaming answer it does not read (a tiny receive buffer) stalls no one else
m0 = metrics(S.port)
slow_reader = socket.socket()
slow_reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
slow_reader.connect(("127.0.0.1", S.port))
data = json.dumps({"prompt": PROMPTS[0], "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
slow_reader.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
# 300 tokens (60 kB of events) before the other request: the reader's buffers (a few kB) are full
for _ in range(600):
    if metrics(S.port)["llm:generation_tokens_total"] - m0["llm:generation_tokens_total"] >= 300:
        break
    time.sleep(0.1)
t0 = time.time()
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[1], max_tokens=12, temperature=0)
check(r.choices[0].text == want[1]["text"] and time.time() - t0 < 20,
      "a request beside a slow reader: '%s' in %.1f s" % (r.choices[0].text, time.time() - t0))
mid = metrics(S.port)
check(mid["llm:generation_tokens_total"] - m0["llm:generation_tokens_total"] >= 300,
      "the slow reader's request stopped generating (%d tokens)" % (mid["llm:generation_tokens_total"] - m0["llm:generation_tokens_total"]))
slow_reader.close()
m = wait_idle(S.port, abort_key, m0[abort_key], 30)
check(m[abort_key] == m0[abort_key] + 1 and m["llm:kv_cache_blocks_used"] == 0, "the slow reader, gone: aborted %d, blocks %d" %
      (m[abort_key] - m0[abort_key], m["llm:kv_cache_blocks_used"]))
slow = []
for i in range(8):  # slowloris: headers a byte at a time
    s = socket.create_connection(("127.0.0.1", S.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
for _ in range(3):
    for s in slow:
        try:
            s.sendall(b"X")
        except OSError:
            pass
    time.sleep(0.2)
t0 = time.time()
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[0], max_tokens=4, temperature=0)
check(r.choices[0].text == want[0]["text"][:len(r.choices[0].text)] and r.usage.completion_tokens == 4 and time.time() - t0 < 30,
      "a request among slowloris connections: '%s' in %.1f s" % (r.choices[0].text, time.time() - t0))
for s in slow:
    s.close()
# a 100 MB body: refused before it is read
s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n")
t0 = time.time()
try:
    chunk = b"a" * (1 << 20)
    for _ in range(100):
        s.sendall(chunk)
except OSError:
    pass
got = recv_all(s)
s.close()
check(got.startswith(b"HTTP/1.1 413"), "a 100 MB body: %r" % got[:100])
# the same without Content-Length (chunked)
s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n")
try:
    for _ in range(40):
        s.sendall(b"100000\r\n" + b"a" * 0x100000 + b"\r\n")
    s.sendall(b"0\r\n\r\n")
except OSError:
    pass
got = recv_all(s)
s.close()
check(got.startswith(b"HTTP/1.1 413"), "a 40 MB chunked body: %r" % got[:100])
section('st, _, b = http(S.port, "POST"')
st, _, b = http(S.port, "POST", "/v1/completions", b'{"prompt":' + b"[" * 100000 + b"]" * 100000 + b"}")
check(st == 400, "deep nesting: %d %s" % (st, b[:200]))
st, _, b = http(S.port, "POST", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xc3\x28"}]}')
check(st == 400 and b"UTF-8" in b, "invalid UTF-8: %d %s" % (st, b[:200]))
for n in (10, 1000):  # truncated requests: the client goes away in the middle
    s = socket.create_connection(("127.0.0.1", S.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"prompt\":\"ab" % n if n > 10 else b"POST /v1/comp")
    time.sleep(0.2)
    s.close()
st, _, b = http(S.port, "POST", "/v1/completions", raw=os.urandom(5000))
check(st in (0, 400), "random bytes: %d" % st)
st, _, b = http(S.port, "GET", "/health", raw=b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
check(st in (0, 413, 431, 400), "a 200 kB header: %d" % st)
st, _, b = http(S.port, "GET", "/health")
r = c.completions.create(model=models.data[0].id, prompt=PROMPTS[0], max_tokens=12, temperature=0)
check(st == 200 and r.choices[0].text == want[0]["text"], "after the hostile clients: health %d, '%s'" % (st, r.choices[0].text))
section('rc = S.stop(signal.SIGINT)\n')
rc = S.stop(signal.SIGINT)
check(rc == 0 and any("stopped" in x for x in S.log), "SIGINT: exit status %s, log %s" % (rc, S.log[-3:]))

# --- a second server: API key, context length, a full queue, the idle timeout, SIGTERM ---
section("a second server: API key, context length, a full queue, the idle timeout, SIGTERM")
S = Server("--api-key", "sekret", "-c", "128", "--max-num-seqs", "1", "--max-queued-requests", "0", "--timeout", "2",
           "--served-model-name", "smol", "--shutdown-timeout", "20")
e = error_of(lambda: S.client("wrong").models.list(), openai.AuthenticationError)
check(e is not None and e.status_code == 401, "a wrong key: %r" % e)
st, _, b = http(S.port, "GET", "/v1/models")
check(st == 401, "no key: %d" % st)
# the key is checked before the body is read: 401 at once, the megabyte never sent
got, secs = head_of(S.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                    b"Content-Length: 1000000\r\n\r\n")
check(got.startswith(b"HTTP/1.1 401") and secs < 1.5, "a wrong key and a body to come: %r after %.1f s" % (got[:60], secs))
st, _, b = http(S.port, "GET", "/health")
check(st == 200, "health needs no key: %d" % st)
c = S.client("sekret")
check(c.models.list().data[0].id == "smol", "--served-model-name")
e = error_of(lambda: c.completions.create(model="smol", prompt="hello " * 200, max_tokens=4), openai.BadRequestError)
check(e is not None and "max_model_len" in str(e), "a prompt longer than the context: %r" % e)
r = c.completions.create(model="smol", prompt=PROMPTS[0], max_tokens=500, temperature=0, extra_body={"ignore_eos": True})
check(r.choices[0].finish_reason == "length" and r.usage.prompt_tokens + r.usage.completion_tokens == 128,
      "to the context's end: %s %s" % (r.choices[0].finish_reason, r.usage))
holder = {}

model_id = "smol"


def long_stream(max_tokens=100):
    text = ""
    for k in c.completions.create(model=model_id, prompt=PROMPTS[1], max_tokens=max_tokens, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True}):
        if k.choices:
            text += k.choices[0].text
            holder["fin"] = k.choices[0].finish_reason or holder.get("fin")
        holder["started"] = True
    holder["text"] = text

t = threading.Thread(target=long_stream)
t.start()
while "started" not in holder:
    time.sleep(0.01)
e = error_of(lambda: c.completions.create(model="smol", prompt="x", max_tokens=2), openai.RateLimitError)
check(e is not None and e.status_code == 429, "a full queue: %r" % e)
e = error_of(lambda: c.completions.create(model="smol", prompt="x", max_tokens=2, n=2), openai.BadRequestError)
check(e is not None and e.body.get("param") == "n", "more choices than the server ever takes: %r" % e)
t.join(120)
check(holder.get("fin") == "length", "the request in flight: %s" % holder)
s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
t0 = time.time()
closed = s.recv(100) == b""
check(closed and 1.0 < time.time() - t0 < 10, "an idle connection: closed %s after %.1f s (--timeout 2)" % (closed, time.time() - t0))
s.close()
# SIGTERM with a request in flight: it finishes, then the server exits 0
holder = {}
t = threading.Thread(target=long_stream)
t.start()
while "started" not in holder:
    time.sleep(0.01)
rc = S.stop(signal.SIGTERM)
t.join(60)
check(rc == 0 and holder.get("fin") == "length" and len(holder.get("text", "")) > 0,
      "SIGTERM: exit status %s, the request in flight %s" % (rc, holder))

# --- readiness: /ready, --replica-id, --ready-max-waiting (tests/test_fleet.py: behind HAProxy) ---
section("readiness: /ready, --replica-id, --ready-max-waiting")
S = Server("--replica-id", "r7", "--max-num-seqs", "1", "--ready-max-waiting", "1")
st, hdr, b = http(S.port, "GET", "/ready")
check(st == 200 and json.loads(b) == {"status": "ready", "waiting": 0} and "X-Replica-Id: r7" in hdr,
      "/ready: %d %s %s" % (st, hdr, b))
st, hdr, b = http(S.port, "POST", "/ready")
check(st == 405 and "X-Replica-Id: r7" in hdr, "POST /ready: %d" % st)
long_body = {"prompt": PROMPTS[1], "max_tokens": 300, "temperature": 0, "ignore_eos": True, "stream": True}
streams = [threading.Thread(target=http, args=(S.port, "POST", "/v1/completions", long_body)) for _ in range(2)]
for x in streams:
    x.start()
seen = None
for _ in range(200):   # one runs, the other waits for the batch's one place: 1 waiting
    st, hdr, b = http(S.port, "GET", "/ready")
    if st == 503:
        seen = (st, hdr, b)
        break
    time.sleep(0.02)
check(seen is not None and "Retry-After: 1" in seen[1] and b"--ready-max-waiting" in seen[2],
      "/ready with a sequence waiting (--ready-max-waiting 1): %s" % (seen,))
for x in streams:
    x.join(120)
st, _, b = http(S.port, "GET", "/ready")
check(st == 200, "/ready once the queue is empty: %d %s" % (st, b))
check(S.stop(signal.SIGTERM) == 0, "SIGTERM")
bad = subprocess.run([LLM, "serve", "-m", MODEL, "--port", "0", "--replica-id", "a b"], capture_output=True, text=True,
                     timeout=60)
check(bad.returncode != 0 and "--replica-id" in bad.stderr, "--replica-id 'a b': %d %s" % (bad.returncode, bad.stderr))

# --- a server full of slow clients from several addresses (127.0.0.2.. are loopback too) ---
section("a server full of slow clients: connections per address, /health answered")
S = Server("--max-connections", "16")   # at most 4 from one address (a quarter)
# a fifth connection from one address is closed at once
mine = [socket.create_connection(("127.0.0.1", S.port), timeout=2, source_address=("127.0.0.9", 0)) for _ in range(5)]
try:
    fifth = mine[4].recv(100)
except OSError:
    fifth = None
check(fifth == b"", "a fifth connection from 127.0.0.9 (a quarter of --max-connections 16): %r, want it closed" % fifth)
try:
    first = mine[0].recv(100)
except socket.timeout:
    first = None
check(first is None, "the first four connections from 127.0.0.9 stay open: %r" % first)
for s in mine:
    s.close()
# slowloris from 7 addresses, 28 connections that send a byte of their request header every
# 0.5 s and come back when closed: GET /health answers at once all the same (the connections
# still waiting for their request header longest make room for new ones)
slow = Slow(S.port, ["127.0.0.%d" % (2 + i // 4) for i in range(28)], b"GET /health HTTP/1.1\r\nHost: x\r\n")
time.sleep(2)
for i in range(3):
    t0 = time.time()
    st, _, b = http(S.port, "GET", "/health", timeout=5)
    check(st == 200 and time.time() - t0 < 3, "/health among 28 slowloris connections (--max-connections 16): %d after %.1f s" %
          (st, time.time() - t0))
m = metrics(S.port)
slow.stop()
check(m.get('llm:http_connections_closed_total{reason="evicted"}', 0) > 0,
      "slowloris: no connection made room for another: %s" % {k: v for k, v in m.items() if "connections" in k})
# 16 slow bodies (not evicted: they are requests under way): GET /health still answers in the
# connections kept beyond --max-connections, where other requests get 503 with Retry-After
time.sleep(1)
slow = Slow(S.port, ["127.0.0.%d" % (2 + i // 4) for i in range(16)],
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{", reopen=False)
time.sleep(2)
t0 = time.time()
st, _, b = http(S.port, "GET", "/health", timeout=5)
check(st == 200 and time.time() - t0 < 3, "/health beside 16 slow bodies (--max-connections 16): %d after %.1f s" % (st, time.time() - t0))
t0 = time.time()
st, head, b = http(S.port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 1}, timeout=5)
check(st == 503 and "retry-after:" in head.lower() and time.time() - t0 < 3,
      "a completion beside 16 slow bodies (--max-connections 16): %d %s after %.1f s" % (st, b[:100], time.time() - t0))
check(slow.closed == 0, "the slow bodies: %d closed within 5 s" % slow.closed)
slow.stop()
rc = S.stop(signal.SIGINT)
check(rc == 0, "the server of slow clients: exit status %s" % rc)

# a second SIGINT aborts what is in flight at once
S = Server("--shutdown-timeout", "60")
c = S.client()
model_id = c.models.list().data[0].id
holder = {}
t = threading.Thread(target=long_stream, args=(3000,))
t.start()
while "started" not in holder:
    time.sleep(0.01)
S.proc.send_signal(signal.SIGINT)
time.sleep(0.3)
t0 = time.time()
rc = S.stop(signal.SIGINT)
t.join(60)
check(rc == 0 and time.time() - t0 < 10 and holder.get("fin") == "abort", "a second SIGINT: exit status %s after %.1f s, %s" %
      (rc, time.time() - t0, holder))

# --- the request log: a line per request on stderr, as text or JSON; --quiet ---
section("the request log: a line per request, text and JSON, --quiet")
LOG_TEXT = re.compile(r'^(\S+) (\S+) (\S+) (\S+) (\d{3}|-) prompt=(\d+|-) completion=(\d+|-) '
                      r'ttft=(?:(\d+\.\d)ms|-) total=(\d+\.\d)ms( aborted)?(?: error="((?:[^"\\]|\\.)*)")?$')
LOG_KEYS = ["time", "client", "method", "path", "status", "prompt_tokens", "completion_tokens", "ttft_ms", "total_ms",
            "aborted", "error"]


def log_unescape(s):
    """A text field as it was: \\n \\t \\r \\\\ \\" \\xHH \\u00HH undone."""
    plain = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}
    return re.sub(r'\\(x[0-9A-F]{2}|u[0-9A-F]{4}|.)',
                  lambda m: plain.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), s)


def log_entries(S, fmt):
    """The server's request lines, each as a dict of LOG_KEYS (None: a line that does not parse)."""
    out = []
    for line in [x.rstrip("\n") for x in list(S.log) if x[:1] == "{" or x[:1].isdigit()]:
        if fmt == "json":
            try:
                e = json.loads(line)
            except ValueError:
                e = None
            out.append(e if isinstance(e, dict) and list(e) == LOG_KEYS else None)
            continue
        m = LOG_TEXT.match(line)
        if not m:
            out.append(None)
            continue
        g = m.groups()
        num = lambda x, f=int: None if x in (None, "-") else f(x)
        out.append(dict(zip(LOG_KEYS, [g[0], g[1], g[2], log_unescape(g[3]), num(g[4]), num(g[5]), num(g[6]),
                                       num(g[7], float), float(g[8]), g[9] is not None,
                                       None if g[10] is None else log_unescape(g[10])])))
    return out


def log_wait(S, fmt, n, secs=30):
    t = time.time() + secs
    while len(log_entries(S, fmt)) < n and time.time() < t:
        time.sleep(0.02)


def log_session(fmt):
    """A server logging in fmt, one request after another (each line awaited before the next request):
    (what each request should log, what was logged)."""
    KEY = "k3y"
    auth = {"Authorization": "Bearer " + KEY}
    S = Server("--api-key", KEY, "--max-num-seqs", "1", "--max-queued-requests", "0", "--max-body-size", "4096",
               *(["--log-format", "json"] if fmt == "json" else []))
    want = []

    def expect(method, path, status, usage=None, error=None, aborted=False, gen=False):
        want.append(dict(method=method, path=path, status=status, usage=usage, error=error, aborted=aborted,
                         gen=gen or usage is not None))
        log_wait(S, fmt, len(want))

    def refused(method, path, body=None, headers=auth, raw=None, logged_path=None):
        st, _, b = http(S.port, method, path, body, headers, raw=raw)
        try:
            msg = json.loads(b)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            msg = "(no error body: %r)" % b[:100]
        expect(method, logged_path or path, st, error=msg)

    def idle():   # /metrics until nothing runs (each asks is a line too)
        for _ in range(200):
            _, _, b = http(S.port, "GET", "/metrics")
            expect("GET", "/metrics", 200)
            if re.search(rb"^llm:num_requests_running\{[^}]*\} 0$", b, re.M) and \
                    re.search(rb"^llm:kv_cache_blocks_used\{[^}]*\} 0$", b, re.M):
                return
            time.sleep(0.05)

    st, _, _ = http(S.port, "GET", "/health")
    expect("GET", "/health", st)
    c = S.client(KEY)
    mid = c.models.list().data[0].id
    expect("GET", "/v1/models", 200)
    r = c.chat.completions.create(model=mid, messages=MSGS, max_tokens=8, temperature=0)
    expect("POST", "/v1/chat/completions", 200, usage=(r.usage.prompt_tokens, r.usage.completion_tokens))
    usage = None
    for k in c.chat.completions.create(model=mid, messages=MSGS, max_tokens=6, temperature=0, stream=True,
                                       stream_options={"include_usage": True}):
        if k.usage:
            usage = (k.usage.prompt_tokens, k.usage.completion_tokens)
    expect("POST", "/v1/chat/completions", 200, usage=usage)
    r = c.completions.create(model=mid, prompt=PROMPTS[0], max_tokens=5, temperature=0)
    expect("POST", "/v1/completions", 200, usage=(r.usage.prompt_tokens, r.usage.completion_tokens))
    http(S.port, "GET", "/metrics")
    expect("GET", "/metrics", 200)
    refused("GET", "/nope")
    refused("GET", "/x%0Ay%20z", logged_path="/x\ny z")   # (decoded) a newline in it makes no second line
    refused("POST", "/v1/chat/completions", {"model": mid, "messages": MSGS}, {"Authorization": "Bearer wrong"})
    refused("POST", "/v1/chat/completions", b"{bad")
    refused("PUT", "/health", headers={})
    refused("POST", "/v1/completions", raw=b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + KEY.encode() + b"\r\nConnection: close\r\nContent-Length: 5000\r\n\r\n")
    # a stream holds the one sequence the server takes: another request gets 429; then its client goes
    s = socket.create_connection(("127.0.0.1", S.port), timeout=60)
    data = json.dumps({"prompt": PROMPTS[0], "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
              % (KEY.encode(), len(data)) + data)
    got = b""
    while got.count(b"data: {") < 2:
        got += s.recv(4096)
    refused("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    s.close()
    expect("POST", "/v1/completions", 200, aborted=True, gen=True)
    idle()
    # the client of a whole answer goes before it comes: no status was sent
    s = socket.create_connection(("127.0.0.1", S.port), timeout=60)
    data = json.dumps({"prompt": PROMPTS[0], "max_tokens": 3000, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
              % (KEY.encode(), len(data)) + data)
    time.sleep(1)
    s.close()
    expect("POST", "/v1/completions", None, aborted=True, gen=True)
    time.sleep(0.5)   # time for a line too many
    got = log_entries(S, fmt)
    rc = S.stop(signal.SIGINT)
    check(rc == 0 and any("stopped" in x for x in S.log), "log %s: the server's exit status %s" % (fmt, rc))
    return want, got


logged = {}
for fmt in ("text", "json"):
    want, got = log_session(fmt)
    logged[fmt] = got
    check(len(got) == len(want), "log %s: %d request lines for %d requests: %s" % (fmt, len(got), len(want), got))
    for i, (w, e) in enumerate(zip(want, got)):
        what = "log %s, line %d (%s %r): " % (fmt, i + 1, w["method"], w["path"])
        if not check(e is not None, what + "does not parse"):
            continue
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", e["time"]) is not None and
              abs(calendar.timegm(time.strptime(e["time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.time()) < 600,
              what + "time %s: not now in UTC (ISO 8601, milliseconds)" % e["time"])
        check(e["client"] == "127.0.0.1", what + "client %s" % e["client"])
        check((e["method"], e["path"], e["status"]) == (w["method"], w["path"], w["status"]),
              what + "%s %s %s, want status %s" % (e["method"], e["path"], e["status"], w["status"]))
        check(e["error"] == w["error"], what + "error %r, want %r" % (e["error"], w["error"]))
        check(e["aborted"] == w["aborted"], what + "aborted %s, want %s" % (e["aborted"], w["aborted"]))
        check(e["total_ms"] >= 0, what + "total %s" % e["total_ms"])
        if w["usage"] is not None:
            check((e["prompt_tokens"], e["completion_tokens"]) == w["usage"],
                  what + "tokens %s/%s, the usage answered %s" % (e["prompt_tokens"], e["completion_tokens"], w["usage"]))
        if w["gen"]:
            check(e["prompt_tokens"] is not None and e["prompt_tokens"] > 0 and e["completion_tokens"] is not None and
                  e["completion_tokens"] > 0, what + "no tokens: %s" % e)
            check(e["ttft_ms"] is not None and 0 <= e["ttft_ms"] <= e["total_ms"],
                  what + "ttft %s, total %s" % (e["ttft_ms"], e["total_ms"]))
        else:
            check(e["prompt_tokens"] is None and e["completion_tokens"] is None and e["ttft_ms"] is None,
                  what + "tokens or ttft for a request that generates none: %s" % e)
# the two formats say the same of the same requests (timings, an aborted request's tokens and the
# number of /metrics polls aside)
same = lambda e: e and (e["client"], e["method"], e["path"], e["status"], e["error"], e["aborted"],
                        None if e["aborted"] else (e["prompt_tokens"], e["completion_tokens"]))
check([same(e) for e in logged["text"] if e and e["path"] != "/metrics"] ==
      [same(e) for e in logged["json"] if e and e["path"] != "/metrics"],
      "log: text and JSON differ: %s\n%s" % (logged["text"], logged["json"]))

# --quiet: no request line; the first line and the last still come
S = Server("--quiet", "--log-format", "text")
c = S.client()
c.chat.completions.create(model=c.models.list().data[0].id, messages=MSGS, max_tokens=4, temperature=0)
http(S.port, "GET", "/health")
http(S.port, "GET", "/nope")
time.sleep(0.5)
lines = [x for x in S.log if x[:1] == "{" or x[:1].isdigit()]
rc = S.stop(signal.SIGINT)
check(not lines and rc == 0 and any("stopped" in x for x in S.log), "--quiet: exit %s, log %s" % (rc, S.log))

print("test_server: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
