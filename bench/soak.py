"""A soak of llm serve: many mixed requests through one server, then its books checked.

Usage: python3 bench/soak.py LLM MODEL [--requests N] [--clients C] [--seed S] [--warmup W]
(bench/soak.sh runs it on the ASan build with a tiny test model; the standard library only.)

The server runs with an API key on a free port of 127.0.0.1. C client threads send N requests
in all, each of a kind drawn at random (seeded):
  complete, complete_stream   /v1/completions, text prompts (1-3 of them), n 1-3, logprobs,
                              echo, stop strings, sampled or greedy; streamed with usage
  chat, chat_stream           /v1/chat/completions, n 1-4, logprobs + top_logprobs, stop strings
  tokens                      /v1/completions with token-id prompts
  abort_stream, abort_whole   a long generation whose client goes away (after its first event;
                              or after sending, while it runs)
  unauthorized                no key or a wrong one (a body sent, or a 100 kB body announced and
                              never sent): 401 at once
  bad                         invalid JSON, a field out of range, a token-id prompt longer than the
                              context: 400
  other                       /health, /metrics, /tokenize, /v1/models
Each answer is checked (status; whole answers: a choice per sequence with its finish_reason and
usage; streams: data events ending in [DONE], a finish per choice, the usage chunk when asked).
Resident memory (VmRSS) is sampled every N/20 requests: the end may exceed the sample after W
requests (the warm-up: a fifth by default) by 10% at most, checked when W is 2000 or more
(malloc's arenas, one per thread, and ASan's quarantine fill up over the first two thousand
requests or so; shorter runs print the figures only). At the end,
with nothing in flight: no KV block in use, no request running or waiting, no body held, the
only request in flight the /metrics one, the sequences the server ended (by any finish reason)
equal to those it admitted, and, once the server is stopped (SIGINT), exit status 0 and no
sanitizer report. Prints the figures; exit status 1 on any error.
"""
import argparse
import http.client
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

KEY = "soak-key"
WORDS = ["the", "a", "river", "stone", "light", "of", "and", "cat", "sings", "under", "blue", "north", "paper",
         "seven", "quiet", "engine", "over", "garden", "is", "to"]
STOPS = ["e", "th", "an", "o ", "zz", "\n"]


class Server:
    def __init__(self, llm, model, extra):
        self.proc = subprocess.Popen([llm, "serve", "-m", model, "--port", "0", "-t", "2", "--api-key", KEY, *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        m = None
        while not m:   # notices (e.g. that the model has no chat template), then the address
            line = self.proc.stderr.readline()
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)$", line.strip())
            if not line:
                self.proc.wait()
                sys.exit("soak: the server did not start: " + "".join(self.log))
        self.port = int(m.group(1))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in body.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        name = re.sub(r'model_name="[^"]*",?', "", name).replace("{}", "")
        out[name] = float(value)
    return out


class Books:
    """What the clients saw, under a lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.kinds = {}        # kind -> count
        self.status = {}       # kind -> {status: count}
        self.errors = []       # (kind, what)
        self.admitted = 0      # sequences of requests the server took (200, or aborted by us after sending)
        self.tokens = 0        # completion tokens of whole answers and streams with usage
        self.retried = 0       # a kept-alive connection the server had closed: sent again on a new one

    def add(self, kind, status, seqs=0, tokens=0, error=None):
        with self.lock:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            st = self.status.setdefault(kind, {})
            st[status] = st.get(status, 0) + 1
            self.admitted += seqs
            self.tokens += tokens
            if error:
                self.errors.append((kind, error))


class Client:
    """One thread's requests: a kept-alive connection for up to 8 of them, raw sockets for the
    clients that go away or misbehave."""

    def __init__(self, port, rng, books, n_ctx):
        self.port, self.rng, self.books, self.n_ctx = port, rng, books, n_ctx
        self.conn, self.uses = None, 0

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes) on the kept-alive connection."""
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        h = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}
        h.update(headers or {})
        for attempt in range(2):
            if self.conn is None or self.uses >= 8:
                if self.conn is not None:
                    self.conn.close()
                self.conn, self.uses = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300), 0
            reused = self.uses > 0
            self.uses += 1
            try:
                self.conn.request(method, path, body=data, headers=h)
                r = self.conn.getresponse()
                out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
                if r.getheader("Connection", "").lower() == "close" or r.will_close:
                    self.conn.close()
                    self.conn = None
                return out
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if not reused or attempt == 1:
                    raise
                with self.books.lock:
                    self.books.retried += 1
        raise AssertionError("unreachable")

    def raw(self, data, read_until=None, close_after=None):
        """A fresh connection: sends data; reads until read_until appears (then goes away), or
        for close_after seconds (then goes away), or to the end. Returns what came."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        got = b""
        try:
            s.sendall(data)
            t_end = time.time() + close_after if close_after is not None else None
            while True:
                if t_end is not None:
                    left = t_end - time.time()
                    if left <= 0:
                        break
                    s.settimeout(left)
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    break
                if not b:
                    break
                got += b
                if read_until and read_until in got:
                    break
        except OSError:
            pass
        s.close()
        return got

    # --- the requests' bodies ---

    def text(self, lo=2, hi=12):
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(lo, hi)))

    def sampling(self, body):
        r = self.rng
        if r.random() < 0.3:
            body["temperature"] = 0
        else:
            body["temperature"] = round(r.uniform(0.2, 1.5), 2)
            if r.random() < 0.5:
                body["top_p"] = round(r.uniform(0.5, 1.0), 2)
            if r.random() < 0.3:
                body["top_k"] = r.randint(1, 50)
            if r.random() < 0.5:
                body["seed"] = r.randint(0, 1 << 30)
        if r.random() < 0.2:
            body["presence_penalty"] = round(r.uniform(-1, 1), 2)
        if r.random() < 0.25:
            body["stop"] = r.sample(STOPS, r.randint(1, 3))
        body["max_tokens"] = r.randint(1, 24)
        return body

    # --- checks ---

    def check_whole(self, kind, st, b, n_seq, chat, logprobs):
        if st != 200:
            return self.books.add(kind, st, error="status %d: %r" % (st, b[:200]))
        a = json.loads(b)
        ch = a.get("choices", [])
        err = None
        if sorted(x["index"] for x in ch) != list(range(n_seq)):
            err = "choices %s, want %d" % ([x.get("index") for x in ch], n_seq)
        elif any(x.get("finish_reason") not in ("stop", "length") for x in ch):
            err = "finish reasons %s" % [x.get("finish_reason") for x in ch]
        elif logprobs and any(x.get("logprobs") is None for x in ch):
            err = "no logprobs"
        elif chat and any(x["message"]["role"] != "assistant" for x in ch):
            err = "a message without the assistant's role"
        u = a.get("usage") or {}
        if not err and u.get("completion_tokens") is None:
            err = "no usage"
        self.books.add(kind, st, seqs=n_seq, tokens=u.get("completion_tokens", 0), error=err)

    def check_stream(self, kind, st, b, n_seq, usage):
        if st != 200:
            return self.books.add(kind, st, error="status %d: %r" % (st, b[:200]))
        parts = b.split(b"\n\n")
        err = None
        if parts[-1] != b"" or parts[-2] != b"data: [DONE]":
            err = "does not end in data: [DONE]: %r" % b[-100:]
        fin, tokens, seen_usage = {}, 0, False
        for p in parts[:-2]:
            if err:
                break
            if not p.startswith(b"data: {"):
                err = "an event that is not data: {...}: %r" % p[:100]
                break
            e = json.loads(p[6:])
            if "error" in e:
                err = "an error event: %r" % p[:200]
                break
            for c in e.get("choices", []):
                if c.get("finish_reason"):
                    fin[c["index"]] = c["finish_reason"]
            if e.get("usage"):
                seen_usage = True
                tokens = e["usage"]["completion_tokens"]
        if not err and sorted(fin) != list(range(n_seq)):
            err = "finish reasons for %s, want %d choices" % (sorted(fin), n_seq)
        if not err and any(v not in ("stop", "length") for v in fin.values()):
            err = "finish reasons %s" % fin
        if not err and usage != seen_usage:
            err = "usage chunk %s, asked %s" % (seen_usage, usage)
        self.books.add(kind, st, seqs=n_seq, tokens=tokens, error=err)

    # --- the kinds ---

    def complete(self, kind, stream):
        r = self.rng
        n_prompts = 1 if r.random() < 0.7 else r.randint(2, 3)
        body = self.sampling({"prompt": self.text() if n_prompts == 1 else [self.text() for _ in range(n_prompts)]})
        body["n"] = r.randint(1, 3) if r.random() < 0.4 else 1
        lp = r.random() < 0.3
        if lp:
            body["logprobs"] = r.randint(0, 5)
        elif r.random() < 0.2:
            body["echo"] = True
        n_seq = n_prompts * body["n"]
        if stream:
            body["stream"] = True
            usage = r.random() < 0.5
            if usage:
                body["stream_options"] = {"include_usage": True}
            st, _, b = self.request("POST", "/v1/completions", body)
            self.check_stream(kind, st, b, n_seq, usage)
        else:
            st, _, b = self.request("POST", "/v1/completions", body)
            self.check_whole(kind, st, b, n_seq, False, lp)

    def chat(self, kind, stream):
        r = self.rng
        msgs = [{"role": "user", "content": self.text()}]
        if r.random() < 0.3:
            msgs = [{"role": "system", "content": self.text()}] + msgs + [
                {"role": "assistant", "content": self.text()}, {"role": "user", "content": self.text()}]
        body = self.sampling({"messages": msgs})
        body["n"] = r.randint(1, 4) if r.random() < 0.4 else 1
        lp = r.random() < 0.3
        if lp:
            body["logprobs"] = True
            body["top_logprobs"] = r.randint(0, 5)
        if stream:
            body["stream"] = True
            usage = r.random() < 0.5
            if usage:
                body["stream_options"] = {"include_usage": True}
            st, _, b = self.request("POST", "/v1/chat/completions", body)
            self.check_stream(kind, st, b, body["n"], usage)
        else:
            st, _, b = self.request("POST", "/v1/chat/completions", body)
            self.check_whole(kind, st, b, body["n"], True, lp)

    def tokens(self, kind):
        r = self.rng
        ids = [[r.randint(3, 255) for _ in range(r.randint(1, 40))] for _ in range(r.randint(1, 2))]
        body = self.sampling({"prompt": ids[0] if len(ids) == 1 else ids})
        st, _, b = self.request("POST", "/v1/completions", body)
        self.check_whole(kind, st, b, len(ids), False, False)

    def abort(self, kind):
        r = self.rng
        stream = kind == "abort_stream"
        body = {"prompt": self.text(), "max_tokens": 400, "ignore_eos": True, "stream": stream, "n": r.randint(1, 2)}
        path = "/v1/completions"
        if r.random() < 0.5:
            body = {"messages": [{"role": "user", "content": self.text()}], "max_tokens": 400, "ignore_eos": True,
                    "stream": stream, "n": body["n"]}
            path = "/v1/chat/completions"
        data = json.dumps(body).encode()
        req = (b"POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % (path.encode(), KEY.encode(), len(data))) + data
        if stream:
            got = self.raw(req, read_until=b"data: {")
            ok = got.startswith(b"HTTP/1.1 200") and b"data: {" in got
        else:
            got = self.raw(req, close_after=r.uniform(0.0, 0.2))
            ok = got == b"" or got.startswith(b"HTTP/1.1 200")   # gone before its answer, or it was quick
        st = int(got.split()[1]) if got.startswith(b"HTTP/1.") else 0
        self.books.add(kind, st, seqs=body["n"], error=None if ok else "went away: %r" % got[:200])

    def unauthorized(self, kind):
        r = self.rng
        x = r.random()
        if x < 0.4:   # no key, a whole body
            data = json.dumps({"prompt": self.text(), "max_tokens": 4}).encode()
            got = self.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                           % len(data) + data)
        elif x < 0.8:   # a wrong key, a body announced and never sent: answered at once
            t0 = time.time()
            got = self.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                           b"Content-Length: 100000\r\n\r\n", close_after=5)
            if time.time() - t0 > 4:
                got = b"(no answer before the body)"
        else:
            got = self.raw(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer nope\r\n\r\n")
        st = int(got.split()[1]) if got.startswith(b"HTTP/1.") else 0
        self.books.add(kind, st, error=None if st == 401 else "want 401: %r" % got[:200])

    def bad(self, kind):
        r = self.rng
        x = r.random()
        if x < 0.3:
            st, _, b = self.request("POST", "/v1/completions", b'{"prompt": "unfinished')
        elif x < 0.6:
            st, _, b = self.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                                     "temperature": -1})
        else:   # more ids than the context: refused as they arrive
            st, _, b = self.request("POST", "/v1/completions", {"prompt": [5] * (self.n_ctx + 1 + r.randint(0, 5000))})
        ok = st == 400 and json.loads(b).get("error", {}).get("type") == "invalid_request_error"
        self.books.add(kind, st, error=None if ok else "want 400: %d %r" % (st, b[:200]))

    def other(self, kind):
        x = self.rng.random()
        if x < 0.25:
            st, _, b = self.request("GET", "/health")
            ok = st == 200 and json.loads(b) == {"status": "ok"}
        elif x < 0.5:
            st, _, b = self.request("GET", "/metrics")
            ok = st == 200 and b"llm:kv_cache_blocks_used" in b
        elif x < 0.75:
            st, _, b = self.request("POST", "/tokenize", {"prompt": self.text()})
            ok = st == 200 and len(json.loads(b)["tokens"]) > 0
        else:
            st, _, b = self.request("GET", "/v1/models")
            ok = st == 200 and len(json.loads(b)["data"]) == 1
        self.books.add(kind, st, error=None if ok else "%d %r" % (st, b[:200]))

    def one(self):
        kind = self.rng.choices(KINDS, WEIGHTS)[0]
        try:
            if kind in ("complete", "complete_stream"):
                self.complete(kind, kind.endswith("stream"))
            elif kind in ("chat", "chat_stream"):
                self.chat(kind, kind.endswith("stream"))
            elif kind == "tokens":
                self.tokens(kind)
            elif kind.startswith("abort"):
                self.abort(kind)
            elif kind == "unauthorized":
                self.unauthorized(kind)
            elif kind == "bad":
                self.bad(kind)
            else:
                self.other(kind)
        except Exception as e:  # noqa: BLE001
            self.books.add(kind, -1, error="%s: %r" % (type(e).__name__, e))


KINDS = ["complete", "complete_stream", "chat", "chat_stream", "tokens", "abort_stream", "abort_whole",
         "unauthorized", "bad", "other"]
WEIGHTS = [20, 15, 15, 15, 8, 6, 6, 5, 4, 6]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("llm")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0, help="requests before memory is taken as warm (default a fifth)")
    args = ap.parse_args()
    warmup = args.warmup or max(1, args.requests // 5)
    S = Server(args.llm, args.model, [])
    books = Books()
    first = Client(S.port, random.Random(0), books, 0)
    n_ctx = json.loads(first.request("GET", "/v1/models")[2])["data"][0]["max_model_len"]
    first.conn.close()
    lock = threading.Lock()
    state = {"next": 0, "rss_warm": None, "samples": []}
    t0 = time.time()

    def worker(i):
        cl = Client(S.port, random.Random(args.seed * 1000 + i), books, n_ctx)
        while True:
            with lock:
                k = state["next"]
                if k >= args.requests:
                    break
                state["next"] += 1
            if k == warmup:
                state["rss_warm"] = S.rss_kb()
            if k % max(1, args.requests // 20) == 0:
                state["samples"].append((k, S.rss_kb()))
            cl.one()
        if cl.conn is not None:
            cl.conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.time() - t0
    # what the clients left: aborted requests end at the server's next step; then nothing is in flight
    idle = None
    for _ in range(600):
        m = metrics(S.port)
        if (m["llm:num_requests_running"] == 0 and m["llm:num_requests_waiting"] == 0 and m["llm:kv_cache_blocks_used"] == 0
                and m["llm:http_requests_in_flight"] == 1 and m["llm:http_body_bytes"] == 0):
            idle = m
            break
        time.sleep(0.1)
    m = idle or metrics(S.port)
    rss_end = S.rss_kb()
    ended = sum(v for k, v in m.items() if k.startswith("llm:request_success_total"))
    if idle is None:
        books.errors.append(("end", "still busy 60 s after the last request: running %d, waiting %d, KV blocks %d, "
                             "requests in flight %d, body bytes %d" % (m["llm:num_requests_running"], m["llm:num_requests_waiting"],
                                                                        m["llm:kv_cache_blocks_used"], m["llm:http_requests_in_flight"],
                                                                        m["llm:http_body_bytes"])))
    if ended != books.admitted:
        books.errors.append(("end", "the server ended %d sequences; the clients' requests had %d" % (ended, books.admitted)))
    warm = state["rss_warm"] or rss_end
    if warmup >= 2000 and rss_end > warm * 1.1:
        books.errors.append(("end", "resident memory grew from %d kB after the warm-up to %d kB" % (warm, rss_end)))
    S.proc.send_signal(signal.SIGINT)
    try:
        rc = S.proc.wait(120)
    except subprocess.TimeoutExpired:
        S.proc.kill()
        rc = None
    time.sleep(0.2)
    bad_log = [x for x in S.log if "Sanitizer" in x or "runtime error" in x]
    if rc != 0 or bad_log:
        books.errors.append(("end", "server exit status %s; sanitizer reports: %s" % (rc, "".join(bad_log[:20]) or "none")))

    print("soak: %d requests from %d clients in %.0f s (%.1f/s), %s" % (args.requests, args.clients, secs, args.requests / secs, args.model))
    print("%-16s %7s  statuses" % ("kind", "count"))
    for k in KINDS:
        if k in books.kinds:
            print("%-16s %7d  %s" % (k, books.kinds[k], " ".join("%s:%d" % (s, n) for s, n in sorted(books.status[k].items()))))
    print("sequences admitted %d, ended by the server %d (stop %d, length %d, abort %d, error %d, context %d); "
          "completion tokens in the answers %d" %
          (books.admitted, ended, m['llm:request_success_total{finished_reason="stop"}'],
           m['llm:request_success_total{finished_reason="length"}'], m['llm:request_success_total{finished_reason="abort"}'],
           m['llm:request_success_total{finished_reason="error"}'], m['llm:request_success_total{finished_reason="context"}'],
           books.tokens))
    after = [kb for k, kb in state["samples"] if k >= warmup] or [rss_end]
    print("resident memory: %d kB after %d requests (warm-up), %d kB at the end (%+.1f%%), %d-%d kB between; "
          "samples (requests:kB): %s" % (warm, warmup, rss_end, 100.0 * (rss_end - warm) / warm, min(after), max(after),
                                         " ".join("%d:%d" % s for s in state["samples"])))
    print("at the end: KV blocks in use %d of %d, requests running %d, waiting %d, HTTP requests in flight %d (this "
          "one), body bytes held %d, connections %d; kept-alive connections sent again %d" %
          (m["llm:kv_cache_blocks_used"], m["llm:kv_cache_blocks_total"], m["llm:num_requests_running"],
           m["llm:num_requests_waiting"], m["llm:http_requests_in_flight"], m["llm:http_body_bytes"],
           m["llm:http_connections"], books.retried))
    print("server exit status %s, sanitizer reports %d" % (rc, len(bad_log)))
    print("errors: %d" % len(books.errors))
    for kind, what in books.errors[:20]:
        print("  %s: %s" % (kind, what))
    sys.exit(1 if books.errors else 0)


if __name__ == "__main__":
    main()
