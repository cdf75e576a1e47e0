"""Three llm serve replicas behind HAProxy (docs/deploy/haproxy.cfg), driven by the official
OpenAI client with multi-turn conversations.

Usage: python test_fleet.py LLM_BINARY MODEL.gguf HAPROXY_CFG
(tests/test_fleet.sh runs it with the venv tests/fixtures.sh makes, on SmolLM2-135M-Instruct.)

Everything listens on 127.0.0.1. Each replica runs `llm serve --replica-id rN -t 1`; HAProxy runs
the shipped configuration with the addresses in its environment. A conversation is a unique
system prompt (about 150 tokens) and three user turns; each turn sends the whole conversation so
far (greedy, 8 tokens, every fourth turn streamed with 40), keyed by X-Session-Id.
Checks:
  - routing: every answer names its replica (X-Replica-Id); a conversation's turns all reach one
    replica under consistent hashing;
  - prefix caching: the prompt tokens found in the replicas' prefix caches over those looked up
    (their /metrics), for 40 conversations hashed on their key and again for 40 under round robin
    (the same file with `balance roundrobin`), each on fresh replicas: hashing must be higher;
  - failures: 200 conversations (600 turns) while one replica is killed with SIGKILL and, later,
    another is drained with SIGTERM while it streams a long answer: every turn completes
    (HAProxy's retries, then the test's own for what reaches the client: the client library's
    retries are off, so that every failed attempt it sees is counted), none hangs (each turn's
    attempts within a deadline), the drained replica's streams in flight at its SIGTERM end
    with a finish_reason (its long one at its length), it exits 0;
  - on the draining replica /health stays 200, /ready and a new request answer 503 with
    Retry-After (and X-Replica-Id); GET /ready through HAProxy answers while one replica is left.
The figures (hit rates, turns retried, streams finished by the drained replica) are printed.
"""
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

LLM, MODEL, CFG = sys.argv[1], sys.argv[2], sys.argv[3]
T0 = time.time()
passed = failed = 0
lock = threading.Lock()


def section(name):
    print("[%.1f s] %s" % (time.time() - T0, name), flush=True)


def check(cond, msg):
    global passed, failed
    with lock:
        if cond:
            passed += 1
        else:
            failed += 1
            print("FAIL test_fleet: " + msg, flush=True)
    return cond


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url, timeout=10):
    """(status, headers, body) of a GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except OSError:
        return 0, {}, b""


class Replica:
    def __init__(self, name):
        self.name = name
        self.proc = subprocess.Popen([LLM, "serve", "-m", MODEL, "--port", "0", "-t", "1", "--replica-id", name,
                                      "--shutdown-timeout", "60", "--served-model-name", "smol", "--max-connections-per-ip", "0",
                                      "--quiet"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = [self.proc.stderr.readline()]
        m = re.search(r"on http://127\.0\.0\.1:(\d+)$", self.log[0].strip())
        if not m:
            raise SystemExit("FAIL test_fleet: replica %s did not start: %s" % (name, self.log[0]))
        self.port = int(m.group(1))
        self.addr = "127.0.0.1:%d" % self.port
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def metrics(self):
        _, _, body = get("http://%s/metrics" % self.addr)
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[re.sub(r"\{.*\}", "", name)] = out.get(re.sub(r"\{.*\}", "", name), 0) + float(value)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        time.sleep(0.1)
        bad = [x for x in self.log if "Sanitizer" in x or "runtime error" in x]
        check(not bad, "replica %s's log has sanitizer reports: %s" % (self.name, "".join(self.log[-40:])))
        return rc


class Fleet:
    """Three replicas and HAProxy in front of them (cfg: the configuration's text)."""

    def __init__(self, cfg):
        self.replicas = [Replica("r%d" % (i + 1)) for i in range(3)]
        self.port = free_port()
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "llm-fleet-%d.cfg" % os.getpid())
        with open(path, "w") as f:
            f.write(cfg)
        env = dict(os.environ, LLM_LB_ADDR="127.0.0.1:%d" % self.port,
                   **{"LLM_R%d" % (i + 1): r.addr for i, r in enumerate(self.replicas)})
        self.lb = subprocess.Popen(["haproxy", "-db", "-f", path], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        self.lb_log = []
        threading.Thread(target=lambda: self.lb_log.extend(self.lb.stderr), daemon=True).start()
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 20
        while get(self.base + "/ready", 2)[0] != 200 and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(2.5)   # every replica through its first checks
        os.unlink(path)

    def hit_rate(self):
        q = h = 0.0
        for r in self.replicas:
            m = r.metrics()
            q += m.get("llm:prefix_cache_queries_total", 0)
            h += m.get("llm:prefix_cache_hits_total", 0)
        return h / q if q else 0.0, q

    def close(self):
        for r in self.replicas:
            r.stop()
        self.lb.terminate()
        self.lb.wait(10)


WORDS = ("river stone lantern copper meadow violet harbor falcon ember quartz willow saffron glacier thistle "
         "marble orchard cinder pepper cobalt juniper ivory canyon tundra maple amber drift beacon sparrow "
         "tide velvet orbit prairie walnut crimson summit garnet lagoon").split()
QUESTIONS = ["Summarise the notes in one sentence.", "Which word in the notes comes first?",
             "Name a colour from the notes."]


def system_prompt(i):
    rng = random.Random(1000 + i)
    notes = " ".join(rng.choice(WORDS) for _ in range(110))
    return "You are a helpful assistant. Conversation %d. The notes for this chat: %s." % (i, notes)


class Turn:
    def __init__(self, conv, k, stream):
        self.conv, self.k, self.stream = conv, k, stream
        self.attempts = 0
        self.errors = []
        self.replica = None
        self.finish = None
        self.start = self.end = None   # of the attempt that completed
        self.first_byte = None
        self.streams = []   # (replica, time of its headers) of each streamed attempt


def ask(client, messages, session, turn, deadline):
    """One turn, retried by the client (openai's own retries, then ours for what those do not
    cover: a stream cut after its first bytes). Returns the answer's text or None."""
    while time.time() < deadline:
        turn.attempts += 1
        t0 = time.time()
        try:
            raw = client.chat.completions.with_raw_response.create(
                model="smol", messages=messages, temperature=0, max_tokens=40 if turn.stream else 8,
                stream=turn.stream, extra_headers={"X-Session-Id": session})
            replica = raw.headers.get("x-replica-id")
            if turn.stream:
                text, finish = "", None
                turn.replica = replica   # (known from the headers, before the stream's end)
                turn.first_byte = time.time()
                with lock:
                    turn.streams.append((replica, turn.first_byte))
                for chunk in raw.parse():
                    if chunk.choices:
                        text += chunk.choices[0].delta.content or ""
                        finish = chunk.choices[0].finish_reason or finish
            else:
                r = raw.parse()
                text, finish = r.choices[0].message.content, r.choices[0].finish_reason
            if finish is None:
                raise RuntimeError("the stream ended without a finish_reason")
            turn.replica, turn.finish, turn.start, turn.end = replica, finish, t0, time.time()
            return text
        except openai.APIStatusError as e:
            turn.errors.append("status %d" % e.status_code)
            if e.status_code < 500 and e.status_code not in (408, 429):
                return None   # not retryable: lost
        except Exception as e:   # a refused connection, a timeout, a cut stream
            turn.errors.append(type(e).__name__)
        time.sleep(0.5)
    return None


def run_conversations(fleet, ids, threads, turns_out, on_progress=None, arrival=0.0, think=0.0):
    """The conversations ids on threads workers: conversation n begins arrival x n seconds after the
    first (as users arrive, not all at once), a user thinks think seconds before each next turn."""
    # (no retries by the client library: every failed attempt that reaches the client is counted
    # and retried by ask())
    client = openai.OpenAI(base_url=fleet.base + "/v1", api_key="none", max_retries=0, timeout=60)
    todo = list(enumerate(ids))
    qlock = threading.Lock()
    t0 = time.time()

    def worker():
        while True:
            with qlock:
                if not todo:
                    return
                n, i = todo.pop(0)
            time.sleep(max(0.0, t0 + arrival * n - time.time()))
            messages = [{"role": "system", "content": system_prompt(i)}]
            for k, q in enumerate(QUESTIONS):
                if k:
                    time.sleep(think)
                turn = Turn(i, k, (i + k) % 4 == 0)
                with lock:
                    turns_out.append(turn)
                messages.append({"role": "user", "content": q})
                text = ask(client, messages, "conv-%d" % i, turn, time.time() + 120)
                if text is None:
                    break
                messages.append({"role": "assistant", "content": text})
                if on_progress:
                    on_progress()

    ws = [threading.Thread(target=worker) for _ in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join(900)
    return not any(w.is_alive() for w in ws)


# under sanitizers (make test SAN=1 sets LLM_TEST_SAN=1) a token costs ten times as much: fewer
# conversations, the same checks
SAN = os.environ.get("LLM_TEST_SAN") == "1"
N_HIT, N_FAIL = (8, 40) if SAN else (40, 200)
# the 200 conversations of the failure run arrive over 150 seconds (a user pausing a second
# between turns): the run spans minutes, the kill and the drain fall in its middle
ARRIVAL, THINK = (0.0, 0.0) if SAN else (0.75, 1.0)
if SAN:
    print("SKIP test_fleet: %d and %d conversations, not 40 and 200 arriving over 150 s, under sanitizers "
          "(make test runs those)" % (N_HIT, N_FAIL), flush=True)

with open(CFG) as f:
    CFG_TEXT = f.read()
check("balance hdr(X-Session-Id)" in CFG_TEXT, "the configuration hashes on X-Session-Id")

# --- prefix-cache hit rates: hashing, then round robin, each on fresh replicas ---
rates = {}
for name, cfg in [("hashing", CFG_TEXT),
                  ("round robin", CFG_TEXT.replace("balance hdr(X-Session-Id)", "balance roundrobin"))]:
    section("%d conversations, %s" % (N_HIT, name))
    fleet = Fleet(cfg)
    turns = []
    done = run_conversations(fleet, range(N_HIT), 6, turns)
    ok = [t for t in turns if t.finish]
    check(done and len(ok) == 3 * N_HIT, "%s: %d of %d turns completed" % (name, len(ok), 3 * N_HIT))
    check(all(t.replica in ("r1", "r2", "r3") for t in ok), "%s: every answer names its replica" % name)
    by_conv = {}
    for t in ok:
        by_conv.setdefault(t.conv, set()).add(t.replica)
    spread = sum(len(v) > 1 for v in by_conv.values())
    if name == "hashing":
        check(spread == 0, "hashing: %d conversations reached more than one replica" % spread)
        check(len({t.replica for t in ok}) == 3, "hashing: the conversations spread over the 3 replicas")
    rates[name], queried = fleet.hit_rate()
    print("FLEET %s: prefix cache hit rate %.3f (%d prompt tokens looked up), %d conversations on more than one "
          "replica" % (name, rates[name], queried, spread), flush=True)
    fleet.close()
check(rates["hashing"] > rates["round robin"] + 0.1,
      "prefix cache hit rate: hashing %.3f, round robin %.3f" % (rates["hashing"], rates["round robin"]))

# --- 200 conversations; a replica killed (SIGKILL), another drained (SIGTERM) ---
section("%d conversations; r3 killed, then r2 drained while it streams" % N_FAIL)
fleet = Fleet(CFG_TEXT)
r1, r2, r3 = fleet.replicas
turns = []
progress = {"n": 0}
events = {}


def on_progress():
    with lock:
        progress["n"] += 1


def wait_progress(n, deadline):
    while progress["n"] < n and time.time() < deadline:
        time.sleep(0.05)
    return progress["n"] >= n


def chaos():
    if not wait_progress(3 * N_FAIL // 4, time.time() + 600):
        return
    events["kill"] = time.time()
    r3.proc.send_signal(signal.SIGKILL)
    if not wait_progress(3 * N_FAIL // 2, time.time() + 600):
        return
    # the drain begins while r2 streams a long answer of its own (and whatever turns it serves)
    direct = openai.OpenAI(base_url="http://%s/v1" % r2.addr, api_key="none", max_retries=0, timeout=120)
    long_stream = {}

    def stream_on_r2():
        try:
            for chunk in direct.completions.create(model="smol", prompt="Once upon a time", max_tokens=150,
                                                   temperature=0, stream=True, extra_body={"ignore_eos": True}):
                long_stream["first"] = True
                if chunk.choices and chunk.choices[0].finish_reason:
                    long_stream["finish"] = chunk.choices[0].finish_reason
        except Exception as e:
            long_stream["error"] = repr(e)

    st = threading.Thread(target=stream_on_r2, daemon=True)
    st.start()
    deadline = time.time() + 60
    while "first" not in long_stream and "error" not in long_stream and time.time() < deadline:
        time.sleep(0.01)

    def r2_streaming():   # a conversation's streamed turn whose attempt on r2 began a moment ago
        now = time.time()
        with lock:
            return any(t.streams and t.streams[-1][0] == "r2" and now - t.streams[-1][1] < 0.3 and not t.end
                       for t in turns)
    deadline = time.time() + 30
    while not r2_streaming() and time.time() < deadline:
        time.sleep(0.01)
    events["r2_streaming"] = r2_streaming()
    events["term"] = time.time()
    r2.proc.send_signal(signal.SIGTERM)
    for _ in range(100):   # (the signal is taken within moments; a sanitizer build's are long)
        events["r2_ready"] = get("http://%s/ready" % r2.addr)
        if events["r2_ready"][0] != 200:
            break
        time.sleep(0.05)
    events["r2_health"] = get("http://%s/health" % r2.addr)[0]
    req = urllib.request.Request("http://%s/v1/completions" % r2.addr, data=b'{"prompt": "x", "max_tokens": 2}',
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            events["r2_post"] = (r.status, r.headers)
    except urllib.error.HTTPError as e:
        events["r2_post"] = (e.code, e.headers)
    except OSError as e:
        events["r2_post"] = (0, repr(e))
    events["r2_rc"] = r2.proc.wait(90)
    st.join(30)
    events["long_stream"] = dict(long_stream)
    events["lb_ready"] = get(fleet.base + "/ready")[0]


ct = threading.Thread(target=chaos, daemon=True)
ct.start()
t_start = time.time()
done = run_conversations(fleet, range(100, 100 + N_FAIL), 32 if ARRIVAL else 8, turns, on_progress, ARRIVAL, THINK)
ct.join(120)
elapsed = time.time() - t_start
ok = [t for t in turns if t.finish]
retried = [t for t in turns if t.finish and t.attempts > 1]
lost = [t for t in turns if not t.finish]
check(done, "the conversations did not all end within 15 minutes (a turn hangs)")
check(len(turns) == 3 * N_FAIL and not lost, "%d turns begun of %d, %d lost: %s" %
      (len(turns), 3 * N_FAIL, len(lost), [(t.conv, t.k, t.errors) for t in lost][:5]))
check("kill" in events and "term" in events, "the kill and the drain happened: %s" % sorted(events))
check(events.get("r2_health") == 200, "a draining replica's /health: %s" % events.get("r2_health"))
st, hdr, body = events.get("r2_ready", (0, {}, b""))
check(st == 503 and hdr.get("Retry-After") == "1", "a draining replica's /ready: %s %s" % (st, body[:200]))
st, hdr = events.get("r2_post", (0, {}))
check(st == 503 and hdr.get("Retry-After") == "1" and hdr.get("X-Replica-Id") == "r2",
      "a new request to a draining replica: %s %s" % (st, hdr))
check(events.get("long_stream", {}).get("finish") == "length",
      "the drained replica's own long stream: %s" % events.get("long_stream"))
check(events.get("r2_rc") == 0, "the drained replica's exit status: %s" % events.get("r2_rc"))
check(events.get("lb_ready") == 200, "GET /ready through HAProxy with one replica left: %s" % events.get("lb_ready"))
term = events.get("term", 0)
# the turns with a stream on r2 begun before its SIGTERM and not ended then: each must complete
# in that attempt (on r2: a cut stream would be retried through HAProxy, on r1)
in_flight = [t for t in turns if any(rep == "r2" and fb < term for rep, fb in t.streams) and
             not (t.end and t.end < term)]
check(events.get("r2_streaming") and in_flight and
      all(t.finish in ("stop", "length") and t.replica == "r2" and t.streams[-1][0] == "r2" and t.streams[-1][1] < term
          for t in in_flight),
      "the drained replica's streams in flight at its SIGTERM (a conversation streaming there: %s): %s" %
      (events.get("r2_streaming"), [(t.conv, t.k, t.finish, t.replica, t.streams, t.errors) for t in in_flight]))
after = [t for t in ok if t.start and t.start > term + 2]
check(after and all(t.replica == "r1" for t in after), "after the drain every answer comes from r1: %s" %
      sorted({t.replica for t in after}))
errs = {}
for t in turns:
    for e in t.errors:
        errs[e] = errs.get(e, 0) + 1
print("FLEET failures: %d turns in %.0f s, %d completed, %d of them after failed attempts (%s), %d lost; "
      "%d streams in flight on the drained replica finished" %
      (len(turns), elapsed, len(ok), len(retried), ", ".join("%s x%d" % kv for kv in sorted(errs.items())) or "none",
       len(lost), len(in_flight)), flush=True)
r2.stop()
r3.stop(timeout=5)
fleet.replicas = [r1]
fleet.close()
print("test_fleet: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
