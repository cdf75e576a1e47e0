// server.c — llm serve: an OpenAI-compatible HTTP server on the engine's continuous batching.
//
// HTTP is libmicrohttpd's (Debian: libmicrohttpd-dev), JSON Jansson's, the request fields
// request.c's. Endpoints: POST /v1/chat/completions and /v1/completions (streamed as server-sent
// events or whole), GET /v1/models, /health (alive), /ready (taking requests: what a load
// balancer or Kubernetes routes on), /metrics (Prometheus), POST /tokenize, /detokenize. Every
// answer names the replica (X-Replica-Id, --replica-id) when one is given.
//
// Threads:
//   - libmicrohttpd's: one accepting connections, one per connection (a slow reader or a long
//     answer holds only its own thread);
//   - the engine thread: llm_step while requests are unfinished, each step's outputs handed to
//     the requests' buffers;
//   - the main thread: waits for SIGINT or SIGTERM, then drains: /ready fails at once, new
//     requests get 503 with Retry-After (a load balancer retries them elsewhere), the requests in
//     flight finish within --shutdown-timeout, the rest is aborted, and it exits 0.
// Locks: S->emu guards the engine (llm.h: one thread at a time): the engine thread holds it while
// it steps, a connection takes it to add, abort, tokenize. S->mu guards the requests' buffers and
// the metrics. Order: emu, then mu. S->cmu guards the connections' list and the bodies' budget;
// no other lock is taken while it is held.
//
// Hostile clients. What the request line and headers decide (the route, the method, the API
// key, a Content-Length over --max-body-size, the budget for bodies in flight) is answered
// before a byte of the body is read. The main thread looks at every connection five times a
// second (srv_watch): a request header not complete within --header-timeout, or a body that
// falls behind --body-min-rate, closes its connection however steadily it trickles in (the idle
// timeout restarts with every byte). libmicrohttpd limits the connections per address. When
// --max-connections are open, a new one makes room by closing the connection that has waited
// longest for its request header (a slowloris, or an idle keep-alive connection), and when none
// waits, up to SRV_RESERVE_CONNS more are taken for GET /health, /ready and /metrics alone
// (others get 503), so that a monitor gets its answer however the connections are held.
#include "cli.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// --- metrics ---

// A Prometheus histogram: counts per upper bound (the last, +Inf, is count).
#define SRV_HIST_MAX 20
struct srv_hist { const double *bound; int n; long long c[SRV_HIST_MAX]; double sum; long long count; };
// vLLM's buckets (seconds)
static const double srv_ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                         0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double srv_itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                        0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double srv_e2e_bounds[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
                                        20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

static void srv_hist_add(struct srv_hist *h, double x) {
    for (int i = 0; i < h->n; i++)
        if (x <= h->bound[i]) h->c[i]++;
    h->sum += x;
    h->count++;
}

// --- requests ---

struct srv_call;

// One sequence the engine computes: a choice of a request.
struct srv_seq {
    int id;                    // the engine's request id; -1 while it waits for its leader
    int index;                 // the choice's index in the answer
    int prompt;                // its prompt (completions may have several)
    struct srv_call *call;
    struct srv_seq *leader;    // n > 1: choice 0 of the same prompt, added first (its prompt's
                               // KV blocks are then in the prefix cache for the others); or NULL
    struct llm_request_params p;
    // what the engine produced (under mu)
    struct cli_strbuf text;
    int n_tok;
    json_t *lp;                // logprobs: per token {token, logprob, bytes, top_logprobs}
    bool first, finished;
    enum llm_finish_reason finish;
    char *error;
    int n_prompt, n_cached;
    // what the connection has sent (its thread only)
    size_t text_sent, lp_sent;
    struct cli_tool_stream ts; // chat: the content and tool calls sent (cli_chat_deltas)
    struct cli_harmony hm;     // chat in gpt-oss's harmony format: the text read into its channels
    size_t reasoning_sent;
    bool started, ended;
};

// One HTTP request that runs the model.
struct srv_call {
    struct srv *S;
    struct MHD_Connection *conn;
    struct cli_jreq q;
    bool chat;
    int n_seq;
    struct srv_seq *seq;
    int show_logprobs;         // top log-probabilities shown per token
    char **echo;               // completions with echo: each prompt's text
    int refs;                  // under mu: the connection, and each unfinished sequence
    char id[48];
    long long created;
    double t_first;            // under mu: when its first token came (cli_now; 0: not yet)
    // streaming (the connection's thread)
    struct cli_strbuf out;
    size_t out_off;
    bool done_sent;
};

// The bodies' budget a request with a Content-Length takes at its headers (more as its body comes).
#define SRV_BODY_FIRST (1ll << 20)

// Connections beyond --max-connections, for GET /health and /metrics while all are held.
#define SRV_RESERVE_CONNS 16

// What a connection waits for, for srv_watch's deadlines.
enum srv_phase {
    SRV_HEADER,                // a request line and headers (a new connection, or keep-alive)
    SRV_BODY,                  // the request's body
    SRV_ANSWER,                // the request is read: its answer is computed or sent
};

// One connection (libmicrohttpd's socket context), in S->socks from its start to its close.
struct srv_sock {
    struct srv_sock *prev, *next;
    int fd;
    enum srv_phase phase;      // under cmu
    double since;              // under cmu: when the phase began
    long long received;        // under cmu: body bytes received in SRV_BODY
    bool reserve;              // under cmu: beyond --max-connections: /health and /metrics only
    bool closing;              // under cmu: shut down by srv_watch or to make room
    bool late;                 // under cmu: answered 408 by srv_watch (SRV_LATE: its body came too slowly)
};

#define SRV_LATE "the request body came slower than --body-min-rate allows"   // srv_watch's 408

// The endpoints.
enum srv_route { SRV_R_NONE, SRV_R_HEALTH, SRV_R_READY, SRV_R_METRICS, SRV_R_OPTIONS, SRV_R_MODELS, SRV_R_MODEL,
                 SRV_R_CHAT, SRV_R_COMPLETIONS, SRV_R_TOKENIZE, SRV_R_DETOKENIZE };

struct srv_conn {              // one HTTP request, as it arrives
    struct srv_sock *sock;     // its connection (NULL: libmicrohttpd gave none)
    enum srv_route route;      // decided from the request line and headers
    struct cli_strbuf body;
    long long reserved;        // bytes of the bodies' budget it holds (the body's capacity, then its parse)
    long long expect;          // its Content-Length (0: none, or chunked)
    bool too_big;
    int refuse;                // a status found while the body came (its message: refuse_msg)
    const char *refuse_param;
    char *refuse_msg;
    struct cli_scan scan;
    bool has_body;             // a Content-Length above 0, or chunked
    bool answered_early;       // answered from its headers (a body it has is then not read)
    int status;                // the answer's, for the log (0: none)
    double t0;
    char *method, *path, *error;   // for the log: its request line's, its error body's message
    struct srv_call *call;     // the call it started (a reference, for the log's tokens), or NULL
};

struct srv {
    llm_engine *E;
    pthread_mutex_t emu, mu;
    pthread_cond_t ework;      // with emu: the engine thread waits for requests
    pthread_cond_t cv;         // with mu: new outputs
    atomic_int emu_wanted;     // connections waiting for emu
    bool quit;                 // under emu: the engine thread ends when nothing is left
    atomic_bool draining;      // shutting down: new requests get 503
    atomic_int n_open;         // requests begun and not completed (their answers not all sent)
    struct srv_seq **active;   // under mu: sequences added and not finished
    int n_active, cap_active;
    struct srv_seq **pending;  // under mu: sequences waiting for their leader
    int n_pending, cap_pending;
    uint64_t rng;              // under emu: seeds and ids
    // configuration
    char *model_name;          // --served-model-name, or the model file's name
    const char *api_key, *tmpl;
    const char *replica_id;    // --replica-id (NULL: no X-Replica-Id header)
    int max_model_len, n_vocab, max_num_seqs, max_queued;
    int ready_max_waiting;     // /ready fails with this many sequences waiting beyond max_num_seqs
    long long max_body;
    int max_prompt_ids;        // the most ids a prompt can have (max_model_len, the KV cache)
    int max_connections;
    double header_timeout;     // --header-timeout: seconds for a request line and headers
    long long body_min_rate;   // --body-min-rate: bytes per second after header_timeout (0: none)
    // connections and bodies (under cmu)
    pthread_mutex_t cmu;
    struct srv_sock *socks, *socks_tail;   // open connections, oldest first
    int n_socks, n_closing;
    long long body_bytes, max_body_memory;   // bodies' budget: held, at most (--max-body-memory)
    long long closed_header, closed_body, evicted;
    struct llm_sampling_params sp;   // defaults of a request's sampling
    struct cli_reqlog log;     // --log-format, --quiet
    bool prefix_caching;
    // metrics (under mu)
    long long finished[8], prompt_tokens, generation_tokens, cached_tokens, rejected;
    long long http[6];         // answers by class: 1xx .. 5xx (index 1..5), 0: none
    struct srv_hist ttft, itl, e2e;
    struct llm_engine_stats stats;
};

static uint64_t srv_rand(struct srv *S) {   // splitmix64 (under emu)
    uint64_t z = (S->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// emu for a connection: the engine thread lets waiting connections in between steps.
static void srv_engine_lock(struct srv *S) {
    atomic_fetch_add(&S->emu_wanted, 1);
    pthread_mutex_lock(&S->emu);
    atomic_fetch_sub(&S->emu_wanted, 1);
}

static void srv_list_add(struct srv_seq ***list, int *n, int *cap, struct srv_seq *s) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        if (!(*list = realloc(*list, (size_t)*cap * sizeof(**list)))) cli_die("out of memory");
    }
    (*list)[(*n)++] = s;
}

static void srv_list_remove(struct srv_seq **list, int *n, struct srv_seq *s) {
    for (int i = 0; i < *n; i++)
        if (list[i] == s) { list[i] = list[--*n]; return; }
}

static void srv_call_free(struct srv_call *c) {
    for (int i = 0; i < c->n_seq; i++) {
        free(c->seq[i].text.p);
        cli_harmony_free(&c->seq[i].hm);
        json_decref(c->seq[i].lp);
        free(c->seq[i].error);
    }
    if (c->echo) for (int i = 0; i < c->q.n_prompts; i++) free(c->echo[i]);
    free(c->echo);
    free(c->seq);
    free(c->out.p);
    cli_jreq_free(&c->q);
    free(c);
}

// Under mu: one reference less; the last frees the call.
static void srv_call_unref(struct srv_call *c) {
    if (--c->refs == 0) srv_call_free(c);
}

// Under mu: s ended (reason); its reference goes.
static void srv_seq_end(struct srv *S, struct srv_seq *s, enum llm_finish_reason reason, const char *error) {
    if (s->finished) return;
    s->finished = true;
    s->finish = reason;
    if (error && !(s->error = strdup(error))) cli_die("out of memory");
    if (s->id >= 0) srv_list_remove(S->active, &S->n_active, s);
    else srv_list_remove(S->pending, &S->n_pending, s);
    S->finished[reason]++;
    srv_call_unref(s->call);
}

// The log-probability entry of a token, OpenAI's: token (its text), logprob, bytes.
static json_t *srv_lp_entry(llm_engine *E, int32_t tok, double lp, struct cli_strbuf *b) {
    json_t *e = cli_jcheck(json_object()), *bytes = cli_jcheck(json_array());
    int n = cli_token_text(E, tok, b);
    if (n < 0) n = 0;
    cli_jset(e, "token", cli_json_bytes(b->p ? b->p : "", (size_t)n));
    cli_jset(e, "logprob", cli_jcheck(json_real(isfinite(lp) ? lp : -9999.0)));   // OpenAI's -inf
    for (int i = 0; i < n; i++) cli_jpush(bytes, cli_json_int((unsigned char)b->p[i]));
    cli_jset(e, "bytes", bytes);
    return e;
}

static struct srv_seq *srv_find(struct srv *S, int id) {
    for (int i = 0; i < S->n_active; i++)
        if (S->active[i]->id == id) return S->active[i];
    return NULL;
}

// Under emu and mu: a step's output into its sequence.
static void srv_deliver(struct srv *S, const struct llm_output *o, struct cli_strbuf *piece) {
    struct srv_seq *s = srv_find(S, o->request_id);
    if (!s) return;   // aborted and already ended (the engine failed)
    if (o->n_new_text > 0) cli_sb_put(&s->text, o->new_text, (size_t)o->n_new_text);
    int k = s->p.logprobs;
    if (k > 0 && o->new_logprobs && o->new_token_logprobs) {
        int show = s->call->show_logprobs;
        if (!s->lp) s->lp = cli_jcheck(json_array());
        for (int t = 0; t < o->n_new_tokens; t++) {
            json_t *e = srv_lp_entry(S->E, o->new_tokens[t], o->new_token_logprobs[t], piece);
            json_t *top = cli_jcheck(json_array());
            for (int j = 0; j < CLI_MIN(show, k); j++) {
                const struct llm_logprob *x = &o->new_logprobs[(size_t)t * (size_t)k + (size_t)j];
                cli_jpush(top, srv_lp_entry(S->E, x->id, x->logprob, piece));
            }
            cli_jset(e, "top_logprobs", top);
            cli_jpush(s->lp, e);
        }
    }
    s->n_tok += o->n_new_tokens;
    s->n_prompt = o->n_prompt_tokens;
    s->n_cached = o->n_cached_tokens;
    S->generation_tokens += o->n_new_tokens;
    if (o->n_new_tokens > 0 && !s->first) {
        s->first = true;
        if (!s->call->t_first) s->call->t_first = cli_now();
        srv_hist_add(&S->ttft, o->ttft_ms / 1e3);
    }
    if (o->finished) {
        for (int i = 0; i < o->n_itl; i++) srv_hist_add(&S->itl, o->itl_ms[i] / 1e3);
        srv_hist_add(&S->e2e, o->e2e_ms / 1e3);
        S->prompt_tokens += o->n_prompt_tokens;
        S->cached_tokens += o->n_cached_tokens;
        s->first = true;
        srv_seq_end(S, s, o->finish_reason, o->finish_reason == LLM_FINISH_ERROR ? llm_last_error(S->E) : NULL);
    }
}

// Under emu and mu: the choices whose leader has its prompt computed (or has ended) go in.
static void srv_add_pending(struct srv *S) {
    for (int i = 0; i < S->n_pending;) {
        struct srv_seq *s = S->pending[i];
        if (!s->leader->first && !s->leader->finished) { i++; continue; }
        struct llm_prompt pr = s->call->q.prompts[s->prompt];
        int id = llm_add_request(S->E, &pr, &s->p);
        srv_list_remove(S->pending, &S->n_pending, s);   // i now holds the next one
        if (id < 0) {
            srv_seq_end(S, s, LLM_FINISH_ERROR, llm_last_error(S->E));   // (in no list now; its id stays -1)
        } else {
            s->id = id;
            srv_list_add(&S->active, &S->n_active, &S->cap_active, s);
        }
    }
}

static void *srv_engine_main(void *arg) {
    struct srv *S = arg;
    struct cli_strbuf piece = {0};
    pthread_mutex_lock(&S->emu);
    for (;;) {
        while (!S->quit && !llm_has_unfinished_requests(S->E)) pthread_cond_wait(&S->ework, &S->emu);
        if (S->quit && !llm_has_unfinished_requests(S->E)) break;
        const struct llm_output *out;
        int n = llm_step(S->E, &out);
        pthread_mutex_lock(&S->mu);
        if (n < 0) {   // the backend failed or memory ran out: what runs ends with the message
            fprintf(stderr, "llm serve: the engine failed: %s\n", llm_last_error(S->E));
            char *msg = strdup(llm_last_error(S->E));
            while (S->n_active > 0) {
                struct srv_seq *s = S->active[0];
                llm_abort_request(S->E, s->id);
                srv_seq_end(S, s, LLM_FINISH_ERROR, msg ? msg : "the engine failed");
            }
            free(msg);
        }
        for (int i = 0; i < n; i++) srv_deliver(S, &out[i], &piece);
        srv_add_pending(S);
        llm_get_stats(S->E, &S->stats);
        pthread_cond_broadcast(&S->cv);
        pthread_mutex_unlock(&S->mu);
        if (atomic_load(&S->emu_wanted) > 0) {   // let the connections waiting for the engine in
            pthread_mutex_unlock(&S->emu);
            for (int spin = 0; atomic_load(&S->emu_wanted) > 0 && spin < 10000; spin++) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
            pthread_mutex_lock(&S->emu);
        }
    }
    pthread_mutex_unlock(&S->emu);
    free(piece.p);
    return NULL;
}

// --- connections: deadlines, room, the bodies' budget ---

// libmicrohttpd's notices of a connection's start and close (S->socks). A connection beyond
// --max-connections makes room by shutting down the one that has waited longest for a request
// header; when none waits, it is one of the reserve (/health and /metrics only).
static void srv_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                                  enum MHD_ConnectionNotificationCode code) {
    struct srv *S = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct srv_sock *k = calloc(1, sizeof(*k));
        if (!k) cli_die("out of memory");
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        k->phase = SRV_HEADER;
        k->since = cli_now();
        pthread_mutex_lock(&S->cmu);
        k->prev = S->socks_tail;
        if (S->socks_tail) S->socks_tail->next = k;
        else S->socks = k;
        S->socks_tail = k;
        S->n_socks++;
        if (S->n_socks - S->n_closing > S->max_connections) {
            struct srv_sock *old = NULL;
            for (struct srv_sock *x = S->socks; x; x = x->next)
                if (x != k && !x->closing && x->fd >= 0 && x->phase == SRV_HEADER && (!old || x->since < old->since))
                    old = x;
            if (old) {
                // its thread sees the end of the stream and closes it (the socket stays
                // libmicrohttpd's: it is closed only after this list has let go of it)
                shutdown(old->fd, SHUT_RDWR);
                old->closing = true;
                S->n_closing++;
                S->evicted++;
            } else {
                k->reserve = true;
            }
        }
        pthread_mutex_unlock(&S->cmu);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        struct srv_sock *k = *socket_context;
        pthread_mutex_lock(&S->cmu);
        if (k->prev) k->prev->next = k->next;
        else S->socks = k->next;
        if (k->next) k->next->prev = k->prev;
        else S->socks_tail = k->prev;
        S->n_socks--;
        if (k->closing) S->n_closing--;
        pthread_mutex_unlock(&S->cmu);
        free(k);
        *socket_context = NULL;
    }
}

// A request of connection k has its headers (SRV_BODY: its body comes) or is read (SRV_ANSWER).
// Returns whether the connection is one of the reserve (beyond --max-connections, and still no
// room).
static bool srv_phase(struct srv *S, struct srv_sock *k, enum srv_phase phase) {
    if (!k) return false;
    pthread_mutex_lock(&S->cmu);
    k->phase = phase;
    k->since = cli_now();
    k->received = 0;
    if (k->reserve && S->n_socks - S->n_closing <= S->max_connections) k->reserve = false;
    bool reserve = k->reserve;
    pthread_mutex_unlock(&S->cmu);
    return reserve;
}

// A request of connection k has ended: the next one's header is awaited (SRV_HEADER), or the
// connection is closing. Returns whether srv_watch answered it 408.
static bool srv_ended(struct srv *S, struct srv_sock *k, bool closes) {
    if (!k) return false;
    pthread_mutex_lock(&S->cmu);
    bool late = k->late;
    k->phase = SRV_HEADER;
    k->since = cli_now();
    k->received = 0;
    if (closes && !k->closing) {
        k->closing = true;
        S->n_closing++;
    }
    pthread_mutex_unlock(&S->cmu);
    return late;
}

// Whether a Connection header's list has the token "close".
static bool srv_has_close(const char *h) {
    for (const char *p = h; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        size_t n = strcspn(p, " \t,");
        if (n == 5 && !strncasecmp(p, "close", 5)) return true;
        p += n;
    }
    return false;
}

// The deadlines, from the main thread five times a second: a request header not complete
// --header-timeout seconds after it was awaited, or a body behind --body-min-rate after that
// long (its client gets a 408 first), has its connection shut down; the connection's thread
// then sees the end of the stream and closes it.
static void srv_watch(struct srv *S) {
    static const char body[] = "{\"error\":{\"message\":\"" SRV_LATE "\","
                               "\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"request_timeout\"}}";
    char answer[768];
    int len = snprintf(answer, sizeof(answer), "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                       "Content-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\n%s%s%s"
                       "Content-Length: %zu\r\n\r\n%s", S->replica_id ? "X-Replica-Id: " : "",
                       S->replica_id ? S->replica_id : "", S->replica_id ? "\r\n" : "", sizeof(body) - 1, body);
    double now = cli_now();
    int n408 = 0;
    pthread_mutex_lock(&S->cmu);
    for (struct srv_sock *k = S->socks; k; k = k->next) {
        if (k->closing || k->fd < 0) continue;
        bool header = k->phase == SRV_HEADER && now - k->since > S->header_timeout;
        bool body_late = k->phase == SRV_BODY && S->body_min_rate > 0 &&
                         now - k->since > S->header_timeout + (double)k->received / (double)S->body_min_rate;
        if (!header && !body_late) continue;
        if (body_late) {   // nothing else writes to it while its body is read
            if (send(k->fd, answer, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) { n408++; k->late = true; }
            S->closed_body++;
        } else {
            S->closed_header++;
        }
        shutdown(k->fd, SHUT_RDWR);
        k->closing = true;
        S->n_closing++;
    }
    pthread_mutex_unlock(&S->cmu);
    if (n408) {
        pthread_mutex_lock(&S->mu);
        S->http[4] += n408;
        pthread_mutex_unlock(&S->mu);
    }
}

// n more bytes of the bodies' budget for request k; false when they are not there (*held: the
// bytes the bodies in flight hold).
static bool srv_budget_take(struct srv *S, struct srv_conn *k, long long n, long long *held) {
    pthread_mutex_lock(&S->cmu);
    bool ok = S->body_bytes + n <= S->max_body_memory;
    if (ok) {
        S->body_bytes += n;
        k->reserved += n;
    }
    *held = S->body_bytes;
    pthread_mutex_unlock(&S->cmu);
    return ok;
}

// k's body is dropped, its share of the budget given back.
static void srv_body_drop(struct srv *S, struct srv_conn *k) {
    free(k->body.p);
    k->body = (struct cli_strbuf){0};
    pthread_mutex_lock(&S->cmu);
    S->body_bytes -= k->reserved;
    pthread_mutex_unlock(&S->cmu);
    k->reserved = 0;
}

// n more bytes of k's body (at most --max-body-size in all), in room taken from the budget as its
// buffer doubles, up to its Content-Length (the first SRV_BODY_FIRST bytes were taken at its
// headers); false when the budget is spent (*held: what the bodies in flight hold). (The budget
// counts the body's bytes, not the NUL after them.)
static bool srv_body_put(struct srv *S, struct srv_conn *k, const char *p, size_t n, long long *held) {
    size_t need = k->body.n + n;
    if (need + 1 > k->body.cap) {
        size_t room = CLI_MAX(need, CLI_MAX(k->body.cap ? 2 * (k->body.cap - 1) : 0, (size_t)k->reserved));
        room = CLI_MAX(need, CLI_MIN(room, (size_t)(k->expect > 0 ? k->expect : S->max_body)));
        if ((long long)room > k->reserved && !srv_budget_take(S, k, (long long)room - k->reserved, held)) return false;
        char *q = realloc(k->body.p, room + 1);
        if (!q) cli_die("out of memory");
        k->body.p = q;
        k->body.cap = room + 1;
    }
    cli_sb_put(&k->body, p, n);
    return true;
}

// --- HTTP answers ---

// The headers of every answer: CORS (any origin, as vLLM and llama-server), the replica's name.
static void srv_common_headers(const struct srv *S, struct MHD_Response *r) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    if (S->replica_id) {
        MHD_add_response_header(r, "X-Replica-Id", S->replica_id);
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "X-Replica-Id");   // (readable by a page)
    }
}

static enum MHD_Result srv_send(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, int status,
                                const char *type, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    srv_common_headers(S, r);
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    // a full queue, a full budget for bodies, every connection held: a second later may do
    if (status == 429 || status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (k) srv_phase(S, k->sock, SRV_ANSWER);   // no deadline while it is sent (one answered from the headers too)
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (k) k->status = status;
    pthread_mutex_lock(&S->mu);
    S->http[status / 100 % 6]++;
    if (k && (k->route == SRV_R_CHAT || k->route == SRV_R_COMPLETIONS) && status >= 400) S->rejected++;
    pthread_mutex_unlock(&S->mu);
    return ret;
}

static enum MHD_Result srv_json(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, int status, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(v);
    if (!s) cli_die("out of memory");
    return srv_send(S, conn, k, status, "application/json", s, strlen(s));
}

static const char *srv_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
static json_t *srv_error_json(int status, const char *param, const char *code, const char *msg) {
    json_t *o = cli_jcheck(json_object()), *e = cli_jcheck(json_object());
    cli_jset(e, "message", cli_json_cstr(msg));
    cli_jset(e, "type", cli_json_cstr(srv_error_type(status)));
    cli_jset(e, "param", cli_json_cstr(param));
    cli_jset(e, "code", cli_json_cstr(code));   // OpenAI's: a string naming the error, or null
    cli_jset(o, "error", e);
    return o;
}

#if defined(__GNUC__)
__attribute__((format(printf, 7, 8)))
#endif
static enum MHD_Result srv_error(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, int status,
                                 const char *param, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (k && !k->error && !(k->error = strdup(msg))) cli_die("out of memory");
    // a cut message may end in part of a character: JSON text is UTF-8 (cli_json_cstr mends it)
    return srv_json(S, conn, k, status, srv_error_json(status, param, code, msg));
}

// Whether the client has gone (closed or reset its end); data it sent (a pipelined request) is
// not read.
static bool srv_client_gone(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd pf = {ci->connect_fd, POLLIN, 0};
    if (poll(&pf, 1, 0) <= 0) return false;
    if (pf.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Ends the call's unfinished sequences (the client went away, or the server is stopping).
static void srv_call_abort(struct srv *S, struct srv_call *c) {
    srv_engine_lock(S);
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < c->n_seq; i++) {
        struct srv_seq *s = &c->seq[i];
        if (s->finished) continue;
        if (s->id >= 0) llm_abort_request(S->E, s->id);   // reported by the next step
        else srv_seq_end(S, s, LLM_FINISH_ABORT, NULL);
    }
    pthread_mutex_unlock(&S->mu);
    pthread_cond_signal(&S->ework);
    pthread_mutex_unlock(&S->emu);
}

// --- the completion endpoints ---

static const char *srv_finish_str(enum llm_finish_reason r) {
    return r == LLM_FINISH_CONTEXT ? "length" : llm_finish_reason_str(r);
}

// The completions API's logprobs object from a sequence's entries (text offsets from base).
static json_t *srv_completion_logprobs(json_t *lp, size_t from, size_t to, size_t base) {
    json_t *o = cli_jcheck(json_object()), *tokens = cli_jcheck(json_array()), *tlp = cli_jcheck(json_array()),
           *top = cli_jcheck(json_array()), *off = cli_jcheck(json_array());
    for (size_t i = 0; i < from && i < json_array_size(lp); i++)
        base += json_array_size(json_object_get(json_array_get(lp, i), "bytes"));
    for (size_t i = from; i < to; i++) {
        json_t *e = json_array_get(lp, i), *t = json_object_get(e, "top_logprobs"), *m = cli_jcheck(json_object());
        cli_jpush(tokens, json_incref(json_object_get(e, "token")));
        cli_jpush(tlp, json_incref(json_object_get(e, "logprob")));
        for (size_t j = 0; j < json_array_size(t); j++) {
            json_t *x = json_array_get(t, j);
            json_object_set(m, json_string_value(json_object_get(x, "token")), json_object_get(x, "logprob"));
        }
        cli_jpush(top, m);
        cli_jpush(off, cli_json_int((long long)base));
        base += json_array_size(json_object_get(e, "bytes"));
    }
    cli_jset(o, "tokens", tokens);
    cli_jset(o, "token_logprobs", tlp);
    cli_jset(o, "top_logprobs", top);
    cli_jset(o, "text_offset", off);
    return o;
}

static json_t *srv_usage(const struct srv_call *c) {
    long long prompt = 0, gen = 0, cached = 0;
    for (int i = 0; i < c->n_seq; i++) {
        const struct srv_seq *s = &c->seq[i];
        gen += s->n_tok;
        if (i % c->q.n == 0) { prompt += s->n_prompt; cached += s->n_cached; }   // each prompt once
    }
    json_t *u = cli_jcheck(json_object()), *d = cli_jcheck(json_object());
    cli_jset(u, "prompt_tokens", cli_json_int(prompt));
    cli_jset(u, "completion_tokens", cli_json_int(gen));
    cli_jset(u, "total_tokens", cli_json_int(prompt + gen));
    cli_jset(d, "cached_tokens", cli_json_int(cached));
    cli_jset(u, "prompt_tokens_details", d);
    return u;
}

static json_t *srv_head(const struct srv_call *c, const char *object) {
    json_t *o = cli_jcheck(json_object());
    cli_jset(o, "id", cli_json_cstr(c->id));
    cli_jset(o, "object", cli_json_cstr(object));
    cli_jset(o, "created", cli_json_int(c->created));
    cli_jset(o, "model", cli_json_cstr(c->S->model_name));
    return o;
}

static bool srv_harmony(const struct srv_call *c) { return c->chat && !strcmp(c->S->tmpl, "harmony"); }

// The whole answer of a finished call.
static json_t *srv_answer(struct srv_call *c) {
    json_t *o = srv_head(c, c->chat ? "chat.completion" : "text_completion"), *choices = cli_jcheck(json_array());
    for (int i = 0; i < c->n_seq; i++) {
        struct srv_seq *s = &c->seq[i];
        json_t *ch = cli_jcheck(json_object());
        cli_jset(ch, "index", cli_json_int(s->index));
        const char *text = s->text.p ? s->text.p : "";
        if (c->chat) {
            json_t *m = cli_jcheck(json_object());
            cli_jset(m, "role", cli_json_cstr("assistant"));
            if (srv_harmony(c)) {   // gpt-oss: the final channel's text, its reasoning apart (as llama-server)
                s->hm.calls = c->q.tools.active;
                cli_harmony_feed(&s->hm, text, s->text.n, true);
                const struct cli_strbuf *ct = &s->hm.content;
                cli_tools_message(&c->q.tools, c->id, s->index, ct->p ? ct->p : "", ct->n, m);
                if (s->hm.reasoning.n)
                    cli_jset(m, "reasoning_content", cli_json_bytes(s->hm.reasoning.p, s->hm.reasoning.n));
            } else {
                cli_tools_message(&c->q.tools, c->id, s->index, text, s->text.n, m);   // content, tool_calls
            }
            cli_jset(ch, "message", m);
            json_t *lp = NULL;
            if (s->lp) {
                lp = cli_jcheck(json_object());
                cli_jset(lp, "content", json_incref(s->lp));
            }
            cli_jset(ch, "logprobs", lp ? lp : cli_jcheck(json_null()));
        } else {
            struct cli_strbuf b = {0};
            const char *echo = c->echo ? c->echo[s->prompt] : "";
            cli_sb_put(&b, echo, strlen(echo));
            cli_sb_put(&b, text, s->text.n);
            cli_jset(ch, "text", cli_json_bytes(b.p, b.n));
            free(b.p);
            cli_jset(ch, "logprobs", s->lp ? srv_completion_logprobs(s->lp, 0, json_array_size(s->lp), strlen(echo))
                                           : cli_jcheck(json_null()));
        }
        cli_jset(ch, "finish_reason", cli_json_cstr(cli_tools_finish(ch, 0, srv_finish_str(s->finish))));
        cli_jpush(choices, ch);
    }
    cli_jset(o, "choices", choices);
    cli_jset(o, "usage", srv_usage(c));
    return o;
}

static void srv_event(struct srv_call *c, json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(v);
    if (!s) cli_die("out of memory");
    cli_sb_put(&c->out, "data: ", 6);
    cli_sb_put(&c->out, s, strlen(s));
    cli_sb_put(&c->out, "\n\n", 2);
    free(s);
}

// A streamed chunk of one choice.
static json_t *srv_chunk(struct srv_call *c, const struct srv_seq *s, json_t *delta_or_text, json_t *logprobs,
                         const char *finish) {
    json_t *o = srv_head(c, c->chat ? "chat.completion.chunk" : "text_completion"), *choices = cli_jcheck(json_array()),
           *ch = cli_jcheck(json_object());
    cli_jset(ch, "index", cli_json_int(s->index));
    cli_jset(ch, c->chat ? "delta" : "text", delta_or_text);
    cli_jset(ch, "logprobs", logprobs ? logprobs : cli_jcheck(json_null()));
    cli_jset(ch, "finish_reason", finish ? cli_json_cstr(finish) : cli_jcheck(json_null()));
    cli_jpush(choices, ch);
    cli_jset(o, "choices", choices);
    return o;
}

// Under mu: the events of what is new into c->out; returns whether there were any.
static bool srv_stream_collect(struct srv_call *c) {
    size_t before = c->out.n;
    bool all_ended = true;
    for (int i = 0; i < c->n_seq; i++) {
        struct srv_seq *s = &c->seq[i];
        if (!s->started) {   // the first chunk: the role (chat), the prompt (completions with echo)
            s->started = true;
            if (c->chat) {
                json_t *d = cli_jcheck(json_object());
                cli_jset(d, "role", cli_json_cstr("assistant"));
                cli_jset(d, "content", cli_json_cstr(""));
                srv_event(c, srv_chunk(c, s, d, NULL, NULL));
            } else if (c->echo) {
                srv_event(c, srv_chunk(c, s, cli_json_cstr(c->echo[s->prompt]), NULL, NULL));
            }
        }
        size_t n_lp = s->lp ? json_array_size(s->lp) : 0;
        const struct cli_strbuf *content = &s->text;
        if (srv_harmony(c)) {   // gpt-oss: the final channel's text is the content, the analysis the reasoning
            s->hm.calls = c->q.tools.active;
            cli_harmony_feed(&s->hm, s->text.p ? s->text.p : "", s->text.n, s->finished);
            content = &s->hm.content;
            if (s->hm.reasoning.n > s->reasoning_sent) {
                json_t *d = cli_jcheck(json_object());
                cli_jset(d, "reasoning_content", cli_json_bytes(s->hm.reasoning.p + s->reasoning_sent,
                                                                s->hm.reasoning.n - s->reasoning_sent));
                srv_event(c, srv_chunk(c, s, d, NULL, NULL));
                s->reasoning_sent = s->hm.reasoning.n;
            }
        }
        json_t *ds = c->chat ? cli_chat_deltas(&c->q.tools, &s->ts, c->id, s->index, content, n_lp > s->lp_sent,
                                               s->finished) : NULL;   // content (with tools: calls too)
        if (c->chat ? json_array_size(ds) > 0 : s->text.n > s->text_sent || n_lp > s->lp_sent) {
            json_t *lp = NULL;
            if (n_lp > s->lp_sent) {
                if (c->chat) {
                    json_t *a = cli_jcheck(json_array());
                    for (size_t t = s->lp_sent; t < n_lp; t++) cli_jpush(a, json_incref(json_array_get(s->lp, t)));
                    lp = cli_jcheck(json_object());
                    cli_jset(lp, "content", a);
                } else {
                    lp = srv_completion_logprobs(s->lp, s->lp_sent, n_lp, c->echo ? strlen(c->echo[s->prompt]) : 0);
                }
            }
            for (size_t j = 0; j < json_array_size(ds); j++)   // (the log-probabilities with the first)
                srv_event(c, srv_chunk(c, s, json_incref(json_array_get(ds, j)), j ? NULL : lp, NULL));
            if (!c->chat) srv_event(c, srv_chunk(c, s, cli_json_bytes(s->text.p ? s->text.p + s->text_sent : "",
                                                                      s->text.n - s->text_sent), lp, NULL));
            s->text_sent = s->text.n;
            s->lp_sent = n_lp;
        }
        json_decref(ds);
        if (s->finished && !s->ended) {
            s->ended = true;
            if (s->finish == LLM_FINISH_ERROR) {
                srv_event(c, srv_error_json(500, NULL, NULL, s->error ? s->error : "the engine failed"));
            } else {
                srv_event(c, srv_chunk(c, s, c->chat ? cli_jcheck(json_object()) : cli_json_cstr(""), NULL,
                                       cli_tools_finish(NULL, s->ts.calls_sent, srv_finish_str(s->finish))));
            }
        }
        all_ended &= s->ended;
    }
    if (all_ended && !c->done_sent) {
        if (c->q.include_usage) {
            json_t *o = srv_head(c, c->chat ? "chat.completion.chunk" : "text_completion");
            cli_jset(o, "choices", cli_jcheck(json_array()));
            cli_jset(o, "usage", srv_usage(c));
            srv_event(c, o);
        }
        cli_sb_put(&c->out, "data: [DONE]\n\n", 14);
        c->done_sent = true;
    }
    return c->out.n > before;
}

// Waits (under mu) up to ms milliseconds for new outputs.
static void srv_wait(struct srv *S, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&S->cv, &S->mu, &ts);
}

static ssize_t srv_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct srv_call *c = cls;
    struct srv *S = c->S;
    for (;;) {
        if (c->out.n > c->out_off) {
            size_t n = CLI_MIN(max, c->out.n - c->out_off);
            memcpy(buf, c->out.p + c->out_off, n);
            c->out_off += n;
            if (c->out_off == c->out.n) c->out.n = c->out_off = 0;
            return (ssize_t)n;
        }
        if (c->done_sent) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&S->mu);
        bool any = srv_stream_collect(c);
        if (!any) srv_wait(S, 100);
        pthread_mutex_unlock(&S->mu);
        if (!any && srv_client_gone(c->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

// The response is done with (sent, or the connection closed): what still runs is aborted.
static void srv_stream_free(void *cls) {
    struct srv_call *c = cls;
    struct srv *S = c->S;
    srv_call_abort(S, c);
    pthread_mutex_lock(&S->mu);
    srv_call_unref(c);
    pthread_mutex_unlock(&S->mu);
}

static int srv_status_of(enum llm_status st) {
    return st == LLM_ERR_NOMEM ? 503 : st == LLM_ERR_BACKEND ? 500 : 400;
}

// A call of a completion request, over the server's defaults.
static struct srv_call *srv_call_new(struct srv *S, struct MHD_Connection *conn, bool chat) {
    struct srv_call *c = calloc(1, sizeof(*c));
    if (!c) cli_die("out of memory");
    c->S = S;
    c->conn = conn;
    c->chat = chat;
    c->created = (long long)time(NULL);
    cli_jreq_init(&c->q, chat ? CLI_JREQ_CHAT : CLI_JREQ_COMPLETION);
    c->q.p.sampling = S->sp;
    c->q.p.max_tokens = S->max_model_len;   // OpenAI's: up to the context's end
    // control tokens' text is those tokens (the chat template's, as vLLM and llama-server)
    c->q.p.parse_special = 1;
    return c;
}

// The call's body parsed and checked, its sequences (a prompt's choices) allocated; false when
// it is refused (*r: the answer).
static bool srv_call_parse(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, struct srv_call *c,
                           enum MHD_Result *r) {
    if (!cli_jreq_parse(k->body.p ? k->body.p : "", k->body.n, &c->q, S->tmpl)) {
        *r = srv_error(S, conn, k, 400, c->q.err_param, NULL, "%s", c->q.err);
        return false;
    }
    if (c->q.model && strcmp(c->q.model, S->model_name)) {
        *r = srv_error(S, conn, k, 404, "model", "model_not_found",
                       "the model '%.200s' does not exist: this server has '%s' (GET /v1/models)", c->q.model,
                       S->model_name);
        return false;
    }
    if (c->q.echo && c->q.logprobs_set) {
        *r = srv_error(S, conn, k, 400, "echo", NULL,
                       "echo with logprobs (the prompt's log-probabilities) is not supported");
        return false;
    }
    c->show_logprobs = c->chat ? c->q.top_logprobs : c->q.p.logprobs;
    if (!c->chat && c->q.logprobs_set) c->q.p.logprobs = CLI_MAX(c->q.p.logprobs, 1);   // the tokens' own, at least
    c->n_seq = c->q.n * c->q.n_prompts;
    if (!(c->seq = calloc((size_t)c->n_seq, sizeof(*c->seq)))) cli_die("out of memory");
    return true;
}

// Under emu: 0 when the server can take the call's sequences now, else the status that refuses
// it (shutting down, more than it ever takes, busy), with its message in msg.
static int srv_call_admit(struct srv *S, const struct srv_call *c, char *msg, size_t size) {
    pthread_mutex_lock(&S->mu);
    int busy = S->n_active + S->n_pending;
    pthread_mutex_unlock(&S->mu);
    if (atomic_load(&S->draining)) {
        snprintf(msg, size, "the server is shutting down");
        return 503;
    }
    if (c->n_seq > S->max_num_seqs + S->max_queued) {
        snprintf(msg, size, "the request asks for %d sequences (prompts x n); this server takes at most %d at once "
                 "(--max-num-seqs %d + --max-queued-requests %d)", c->n_seq, S->max_num_seqs + S->max_queued,
                 S->max_num_seqs, S->max_queued);
        return 400;
    }
    if (busy + c->n_seq > S->max_num_seqs + S->max_queued) {
        snprintf(msg, size, "the server is busy: %d sequences running or queued, at most %d + %d (--max-num-seqs, "
                 "--max-queued-requests); try again later", busy, S->max_num_seqs, S->max_queued);
        return 429;
    }
    return 0;
}

// Under emu: the prompts' text for echo (token prompts detokenized); 0, or 400 with its message
// in msg when a token id is out of the vocabulary.
static int srv_call_echo(struct srv *S, struct srv_call *c, char *msg, size_t size) {
    int np = c->q.n_prompts;
    if (!(c->echo = calloc((size_t)np, sizeof(char *)))) cli_die("out of memory");
    for (int p = 0; p < np; p++) {
        const struct llm_prompt *pr = &c->q.prompts[p];
        if (pr->text) {
            if (!(c->echo[p] = strdup(pr->text))) cli_die("out of memory");
            continue;
        }
        int len = llm_detokenize(S->E, pr->tokens, pr->n_tokens, LLM_DETOKENIZE_SPECIAL, NULL, 0);
        if (len < 0) {
            snprintf(msg, size, "prompt[%d]: a token id is out of range [0, %d)", p, S->n_vocab);
            return 400;
        }
        if (!(c->echo[p] = malloc((size_t)len + 1))) cli_die("out of memory");
        llm_detokenize(S->E, pr->tokens, pr->n_tokens, LLM_DETOKENIZE_SPECIAL, c->echo[p], (size_t)len + 1);
    }
    return 0;
}

// Under emu: the call's sequences go to the engine, choice i with seed + i; with the prefix
// cache, a prompt's later choices wait for its first (srv_add_pending). 0, or the status of the
// engine's refusal with its message in msg.
static int srv_call_add(struct srv *S, struct srv_call *c, uint64_t seed, char *msg, size_t size) {
    int n = c->q.n, np = c->q.n_prompts;
    for (int p = 0; p < np; p++) {
        for (int j = 0; j < n; j++) {
            struct srv_seq *s = &c->seq[p * n + j];
            s->index = p * n + j;
            s->prompt = p;
            s->call = c;
            s->p = c->q.p;
            s->p.sampling.seed = seed + (uint64_t)s->index;
            s->id = -1;
            if (j > 0 && S->prefix_caching) { s->leader = &c->seq[p * n]; continue; }
            s->id = llm_add_request(S->E, &c->q.prompts[p], &s->p);
            if (s->id < 0) {
                if (np > 1) snprintf(msg, size, "prompt[%d]: %s", p, llm_last_error(S->E));
                else snprintf(msg, size, "%s", llm_last_error(S->E));
                return srv_status_of(llm_last_status(S->E));
            }
        }
    }
    return 0;
}

// The call's sequences go in (the engine thread woken for them) and it holds a reference for the
// connection and one for each sequence; or none goes in and the call is refused (false, *r: the
// answer).
static bool srv_call_start(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, struct srv_call *c,
                           enum MHD_Result *r) {
    char msg[1024];
    srv_engine_lock(S);
    int status = srv_call_admit(S, c, msg, sizeof(msg));
    uint64_t seed = c->q.seed_set ? c->q.p.sampling.seed : srv_rand(S);
    snprintf(c->id, sizeof(c->id), "%s-%016llx", c->chat ? "chatcmpl" : "cmpl", (unsigned long long)srv_rand(S));
    if (!status && c->q.echo) status = srv_call_echo(S, c, msg, sizeof(msg));
    if (!status) status = srv_call_add(S, c, seed, msg, sizeof(msg));
    if (status) {
        for (int i = 0; i < c->n_seq; i++)   // what went in before the failure comes out again
            if (c->seq[i].call && c->seq[i].id >= 0) llm_abort_request(S->E, c->seq[i].id);
        pthread_cond_signal(&S->ework);
        pthread_mutex_unlock(&S->emu);
        // the aborted ones are reported by a step and found in no list: nothing refers to c
        const char *param = status != 400 ? NULL
                            : c->n_seq > S->max_num_seqs + S->max_queued ? "n" : c->chat ? "messages" : "prompt";
        *r = srv_error(S, conn, k, status, param, status == 429 ? "rate_limit_exceeded" : NULL, "%s", msg);
        return false;
    }
    pthread_mutex_lock(&S->mu);
    c->refs = 2 + c->n_seq;   // and the log's (k->call)
    k->call = c;
    for (int i = 0; i < c->n_seq; i++) {
        struct srv_seq *s = &c->seq[i];
        if (s->id >= 0) srv_list_add(&S->active, &S->n_active, &S->cap_active, s);
        else srv_list_add(&S->pending, &S->n_pending, &S->cap_pending, s);
    }
    pthread_mutex_unlock(&S->mu);
    pthread_cond_signal(&S->ework);
    pthread_mutex_unlock(&S->emu);
    return true;
}

// The streamed answer: its headers now, its events as the sequences produce them
// (srv_stream_read); the response holds the connection's reference to the call.
static enum MHD_Result srv_call_stream(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k,
                                       struct srv_call *c) {
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, srv_stream_read, c,
                                                               srv_stream_free);
    if (!r) cli_die("out of memory");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    srv_common_headers(S, r);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    k->status = 200;
    pthread_mutex_lock(&S->mu);
    S->http[2]++;
    pthread_mutex_unlock(&S->mu);
    return ret;
}

// Waits for every choice of the call; false when the client went away first: then what still
// runs is aborted and the connection's reference to the call given back.
static bool srv_call_wait(struct srv *S, struct MHD_Connection *conn, struct srv_call *c) {
    pthread_mutex_lock(&S->mu);
    for (;;) {
        bool all = true;
        for (int i = 0; i < c->n_seq; i++) all &= c->seq[i].finished;
        if (all) break;
        srv_wait(S, 100);
        pthread_mutex_unlock(&S->mu);
        if (srv_client_gone(conn)) {
            srv_call_abort(S, c);
            pthread_mutex_lock(&S->mu);
            srv_call_unref(c);
            pthread_mutex_unlock(&S->mu);
            return false;
        }
        pthread_mutex_lock(&S->mu);
    }
    pthread_mutex_unlock(&S->mu);
    return true;
}

// The whole answer of a finished call (500 when a choice failed); the connection's reference to
// the call goes.
static enum MHD_Result srv_call_answer(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k,
                                       struct srv_call *c) {
    enum MHD_Result r;
    const struct srv_seq *err = NULL;
    for (int i = 0; i < c->n_seq && !err; i++)
        if (c->seq[i].finish == LLM_FINISH_ERROR) err = &c->seq[i];
    if (err) {
        r = srv_error(S, conn, k, 500, NULL, NULL, "%s", err->error ? err->error : "the engine failed");
    } else {
        r = srv_json(S, conn, k, 200, srv_answer(c));
    }
    pthread_mutex_lock(&S->mu);
    srv_call_unref(c);
    pthread_mutex_unlock(&S->mu);
    return r;
}

// POST /v1/chat/completions (chat) or /v1/completions: the request's sequences run in the
// engine; its answer streams as they do, or comes whole when all have finished.
static enum MHD_Result srv_complete(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, bool chat) {
    struct srv_call *c = srv_call_new(S, conn, chat);
    enum MHD_Result r;
    if (!srv_call_parse(S, conn, k, c, &r) || !srv_call_start(S, conn, k, c, &r)) {
        srv_call_free(c);
        return r;
    }
    // no idle timeout while the model runs (a long prompt may take a while before the first byte)
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    if (c->q.stream) return srv_call_stream(S, conn, k, c);
    // the whole answer: wait for every choice (the client may go: then it is aborted)
    if (!srv_call_wait(S, conn, c)) return MHD_NO;
    return srv_call_answer(S, conn, k, c);
}

// --- the other endpoints ---

// GET /v1/models (one: NULL), or GET /v1/models/ID (the model object alone).
static enum MHD_Result srv_models(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, const char *one) {
    json_t *o = cli_jcheck(json_object()), *data = cli_jcheck(json_array()), *m = cli_jcheck(json_object());
    cli_jset(m, "id", cli_json_cstr(S->model_name));
    cli_jset(m, "object", cli_json_cstr("model"));
    cli_jset(m, "created", cli_json_int((long long)time(NULL)));
    cli_jset(m, "owned_by", cli_json_cstr("llm.c"));
    cli_jset(m, "max_model_len", cli_json_int(S->max_model_len));
    if (one) {
        json_decref(o);
        json_decref(data);
        return srv_json(S, conn, k, 200, m);
    }
    cli_jpush(data, m);
    cli_jset(o, "object", cli_json_cstr("list"));
    cli_jset(o, "data", data);
    return srv_json(S, conn, k, 200, o);
}

// POST /tokenize: vLLM's {"prompt", "add_special_tokens" (default true)} or {"messages"}, and
// llama-server's {"content", "add_special" (default false), "with_pieces"}.
static enum MHD_Result srv_tokenize(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k) {
    json_error_t je;
    json_t *root = k->body.n && cli_utf8_check(k->body.p, k->body.n) == k->body.n
                       ? json_loadb(k->body.p, k->body.n, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return srv_error(S, conn, k, 400, NULL, NULL, "the body is not a JSON object in UTF-8");
    }
    json_t *prompt = json_object_get(root, "prompt"), *content = json_object_get(root, "content"),
           *messages = json_object_get(root, "messages"), *add = json_object_get(root, "add_special_tokens"),
           *add2 = json_object_get(root, "add_special"), *pieces = json_object_get(root, "with_pieces");
    bool add_special = content ? false : true, with_pieces = json_is_true(pieces);
    if (add && json_is_boolean(add)) add_special = json_is_true(add);
    if (add2 && json_is_boolean(add2)) add_special = json_is_true(add2);
    const char *text = NULL;
    char *rendered = NULL;
    struct cli_jreq q;
    cli_jreq_init(&q, CLI_JREQ_CHAT);
    if (messages) {   // rendered as /v1/chat/completions renders them
        json_t *mo = cli_jcheck(json_object());
        cli_jset(mo, "messages", json_incref(messages));
        char *body = json_dumps(mo, JSON_COMPACT);
        json_decref(mo);
        if (!body) cli_die("out of memory");
        bool ok = cli_jreq_parse(body, strlen(body), &q, S->tmpl);
        free(body);
        if (!ok) {
            enum MHD_Result r = srv_error(S, conn, k, 400, q.err_param, NULL, "%s", q.err);
            cli_jreq_free(&q);
            json_decref(root);
            return r;
        }
        rendered = q.chat_text;
        text = rendered;
        if (!add && !add2) add_special = true;
    } else {
        json_t *t = prompt ? prompt : content;
        if (!json_is_string(t) || strlen(json_string_value(t)) != json_string_length(t)) {
            cli_jreq_free(&q);
            json_decref(root);
            return srv_error(S, conn, k, 400, prompt ? "prompt" : "content", NULL,
                             "give \"prompt\" (or \"content\") as a string without NUL, or \"messages\"");
        }
        text = json_string_value(t);
    }
    size_t len = strlen(text);
    int flags = LLM_TOKENIZE_PARSE_SPECIAL | (add_special ? LLM_TOKENIZE_ADD_SPECIAL : 0);
    srv_engine_lock(S);
    int n = llm_tokenize(S->E, text, len, flags, NULL, 0);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof(int32_t)) : NULL;
    if (n > 0 && !ids) cli_die("out of memory");
    if (n > 0) llm_tokenize(S->E, text, len, flags, ids, n);
    json_t *o = cli_jcheck(json_object()), *a = cli_jcheck(json_array());
    struct cli_strbuf b = {0};
    for (int i = 0; i < n; i++) {
        if (!with_pieces) { cli_jpush(a, cli_json_int(ids[i])); continue; }
        json_t *e = cli_jcheck(json_object());
        int pl = cli_token_text(S->E, ids[i], &b);
        cli_jset(e, "id", cli_json_int(ids[i]));
        cli_jset(e, "piece", cli_json_bytes(b.p ? b.p : "", pl > 0 ? (size_t)pl : 0));
        cli_jpush(a, e);
    }
    pthread_mutex_unlock(&S->emu);
    free(b.p);
    free(ids);
    cli_jreq_free(&q);
    json_decref(root);
    if (n < 0) {
        json_decref(o);
        json_decref(a);
        return srv_error(S, conn, k, 400, NULL, NULL, "the text cannot be tokenized");
    }
    cli_jset(o, "tokens", a);
    cli_jset(o, "count", cli_json_int(n));
    cli_jset(o, "max_model_len", cli_json_int(S->max_model_len));
    return srv_json(S, conn, k, 200, o);
}

// POST /detokenize: {"tokens": [ids]} -> {"prompt": text} (vLLM's) and "content" (llama-server's).
static enum MHD_Result srv_detokenize(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k) {
    json_error_t je;
    json_t *root = k->body.n && cli_utf8_check(k->body.p, k->body.n) == k->body.n
                       ? json_loadb(k->body.p, k->body.n, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_t *t = json_object_get(root, "tokens");
    size_t n = json_array_size(t);
    if (!json_is_array(t) || n > (size_t)INT_MAX / 8) {
        json_decref(root);
        return srv_error(S, conn, k, 400, "tokens", NULL, "give {\"tokens\": [token ids]}");
    }
    int32_t *ids = malloc(CLI_MAX(n, 1) * sizeof(int32_t));
    if (!ids) cli_die("out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(t, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= S->n_vocab) {
            free(ids);
            json_decref(root);
            return srv_error(S, conn, k, 400, "tokens", NULL, "tokens[%zu]: not a token id in [0, %d)", i, S->n_vocab);
        }
        ids[i] = (int32_t)json_integer_value(x);
    }
    json_decref(root);
    srv_engine_lock(S);
    int len = llm_detokenize(S->E, ids, (int)n, 0, NULL, 0);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (len >= 0 && !text) cli_die("out of memory");
    if (len >= 0) llm_detokenize(S->E, ids, (int)n, 0, text, (size_t)len + 1);
    pthread_mutex_unlock(&S->emu);
    free(ids);
    if (len < 0) return srv_error(S, conn, k, 400, "tokens", NULL, "a token id is out of range");
    json_t *o = cli_jcheck(json_object());
    cli_jset(o, "prompt", cli_json_bytes(text, (size_t)len));
    cli_jset(o, "content", cli_json_bytes(text, (size_t)len));
    free(text);
    return srv_json(S, conn, k, 200, o);
}

static void srv_metric(struct cli_strbuf *b, const char *name, const char *type, const char *help, const char *model,
                       const char *labels, double v) {
    char line[512];
    if (type) {
        snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
        cli_sb_put(b, line, strlen(line));
    }
    snprintf(line, sizeof(line), "%s{model_name=\"%s\"%s%s} %.17g\n", name, model, labels ? "," : "",
             labels ? labels : "", v);
    cli_sb_put(b, line, strlen(line));
}

static void srv_metric_hist(struct cli_strbuf *b, const char *name, const char *help, const char *model,
                            const struct srv_hist *h) {
    char lab[64];
    for (int i = 0; i <= h->n; i++) {
        if (i < h->n) snprintf(lab, sizeof(lab), "le=\"%g\"", h->bound[i]);
        else snprintf(lab, sizeof(lab), "le=\"+Inf\"");
        char full[128];
        snprintf(full, sizeof(full), "%s_bucket", name);
        if (i == 0) {
            char line[512];
            snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
            cli_sb_put(b, line, strlen(line));
        }
        srv_metric(b, full, NULL, NULL, model, lab, (double)(i < h->n ? h->c[i] : h->count));
    }
    char full[128];
    snprintf(full, sizeof(full), "%s_sum", name);
    srv_metric(b, full, NULL, NULL, model, NULL, h->sum);
    snprintf(full, sizeof(full), "%s_count", name);
    srv_metric(b, full, NULL, NULL, model, NULL, (double)h->count);
}

// GET /metrics: Prometheus' text format, vLLM's names under llm:.
static enum MHD_Result srv_metrics(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k) {
    struct cli_strbuf b = {0};
    const char *m = S->model_name;
    pthread_mutex_lock(&S->cmu);   // (before mu: no lock is taken while cmu is held)
    long long conns = S->n_socks, body_bytes = S->body_bytes;
    long long closed[3] = {S->closed_header, S->closed_body, S->evicted};
    pthread_mutex_unlock(&S->cmu);
    pthread_mutex_lock(&S->mu);
    const struct llm_engine_stats *st = &S->stats;
    srv_metric(&b, "llm:num_requests_running", "gauge", "Requests in the engine's running batch.", m, NULL,
               st->n_running);
    srv_metric(&b, "llm:num_requests_waiting", "gauge", "Requests waiting for the engine.", m, NULL,
               st->n_waiting + S->n_pending);
    srv_metric(&b, "llm:kv_cache_usage_perc", "gauge", "Share of the KV cache blocks in use (1 = all).", m, NULL,
               st->kv_blocks_total ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0);
    srv_metric(&b, "llm:kv_cache_blocks_used", "gauge", "KV cache blocks held by requests.", m, NULL,
               st->kv_blocks_used);
    srv_metric(&b, "llm:kv_cache_blocks_total", "gauge", "KV cache blocks.", m, NULL, st->kv_blocks_total);
    srv_metric(&b, "llm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", m, NULL,
               (double)st->prefix_query_tokens);
    srv_metric(&b, "llm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", m, NULL,
               (double)st->prefix_hit_tokens);
    srv_metric(&b, "llm:num_preemptions_total", "counter", "Requests preempted (KV memory ran out).", m, NULL,
               (double)st->n_preemptions);
    srv_metric(&b, "llm:prompt_tokens_total", "counter", "Prompt tokens of finished requests.", m, NULL,
               (double)S->prompt_tokens);
    srv_metric(&b, "llm:generation_tokens_total", "counter", "Tokens generated.", m, NULL,
               (double)S->generation_tokens);
    static const char *const reasons[] = {"stop", "length", "abort", "error", "context"};
    static const enum llm_finish_reason rv[] = {LLM_FINISH_STOP, LLM_FINISH_LENGTH, LLM_FINISH_ABORT, LLM_FINISH_ERROR,
                                                LLM_FINISH_CONTEXT};
    for (size_t i = 0; i < CLI_ARRAY_LEN(reasons); i++) {
        char lab[64];
        snprintf(lab, sizeof(lab), "finished_reason=\"%s\"", reasons[i]);
        srv_metric(&b, "llm:request_success_total", i == 0 ? "counter" : NULL,
                   "Sequences (choices) that ended, by why (context: the context or the KV cache cut them short).", m,
                   lab, (double)S->finished[rv[i]]);
    }
    srv_metric(&b, "llm:requests_rejected_total", "counter",
               "Completion requests answered with an error status (4xx, 5xx).", m, NULL, (double)S->rejected);
    for (int i = 1; i <= 5; i++) {
        char lab[64];
        snprintf(lab, sizeof(lab), "status=\"%dxx\"", i);
        srv_metric(&b, "llm:http_responses_total", i == 1 ? "counter" : NULL, "HTTP answers by status class.", m, lab,
                   (double)S->http[i]);
    }
    srv_metric(&b, "llm:http_connections", "gauge", "HTTP connections open.", m, NULL, (double)conns);
    srv_metric(&b, "llm:http_requests_in_flight", "gauge", "HTTP requests begun and not yet completed (this one too).",
               m, NULL, (double)atomic_load(&S->n_open));
    srv_metric(&b, "llm:http_body_bytes", "gauge", "Bytes of the request bodies' budget in use (--max-body-memory).", m,
               NULL, (double)body_bytes);
    static const char *const why[] = {"header_timeout", "body_timeout", "evicted"};
    for (int i = 0; i < 3; i++) {
        char lab[64];
        snprintf(lab, sizeof(lab), "reason=\"%s\"", why[i]);
        srv_metric(&b, "llm:http_connections_closed_total", i == 0 ? "counter" : NULL,
                   "Connections closed by the server: a request header not complete within --header-timeout, a body "
                   "slower than --body-min-rate, room made for a new connection beyond --max-connections.", m, lab,
                   (double)closed[i]);
    }
    long long drafts = 0, kept = 0;
    for (int i = 0; i < 16; i++) { drafts += st->spec_proposed[i]; kept += st->spec_accepted[i]; }
    srv_metric(&b, "llm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed (speculative decoding).",
               m, NULL, (double)drafts);
    srv_metric(&b, "llm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens kept.", m, NULL, (double)kept);
    srv_metric(&b, "llm:spec_decode_num_verifications_total", "counter", "Requests' drafts verified in a step.", m,
               NULL, (double)st->spec_verifications);
    srv_metric(&b, "llm:spec_decode_draft_seconds_total", "counter", "Seconds spent proposing drafts.", m, NULL,
               st->spec_draft_seconds);
    srv_metric(&b, "llm:spec_decode_verify_seconds_total", "counter",
               "Seconds of the forward passes that verified drafts.", m, NULL, st->spec_verify_seconds);
    for (int i = 0; i < 16 && st->spec_proposed[i]; i++) {
        char lab[64];
        snprintf(lab, sizeof(lab), "position=\"%d\"", i);
        srv_metric(&b, "llm:spec_decode_num_accepted_tokens_per_pos", i == 0 ? "counter" : NULL,
                   "Draft tokens kept, by their position among a step's drafts.", m, lab, (double)st->spec_accepted[i]);
    }
    srv_metric_hist(&b, "llm:time_to_first_token_seconds", "Time to the first token.", m, &S->ttft);
    srv_metric_hist(&b, "llm:inter_token_latency_seconds", "Time between tokens.", m, &S->itl);
    srv_metric_hist(&b, "llm:e2e_request_latency_seconds", "Arrival to the end of a sequence.", m, &S->e2e);
    pthread_mutex_unlock(&S->mu);
    return srv_send(S, conn, k, 200, "text/plain; version=0.0.4", b.p ? b.p : strdup(""), b.n);
}

static bool srv_authorized(struct srv *S, struct MHD_Connection *conn) {
    if (!S->api_key) return true;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    // the key's comparison takes the same time wherever the first difference is
    const char *g = h + 7, *w = S->api_key;
    size_t gl = strlen(g), wl = strlen(w);
    unsigned d = gl != wl;
    for (size_t i = 0; i < wl; i++) d |= (unsigned)(w[i] ^ (i < gl ? g[i] : 0));
    return d == 0;
}

static enum MHD_Result srv_count_content_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                                const char *value) {
    (void)kind;
    (void)value;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) ++*(int *)cls;
    return MHD_YES;
}

// A status for k found while its body came, answered when the body is read (libmicrohttpd
// answers only then); the body is not kept.
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void srv_refuse(struct srv *S, struct srv_conn *k, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    k->refuse = status;
    if (!(k->refuse_msg = strdup(msg))) cli_die("out of memory");
    srv_body_drop(S, k);
}

// --- routes ---

// A request's route from its line and headers, and what they decide answered at once, before a
// byte of the body is read: 405, 404, 401, a reserve connection's 503, 503 while shutting down
// or beyond the bodies' budget. Else MHD_YES: the body (if any) comes, then srv_access answers.
static enum MHD_Result srv_route(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, const char *url,
                                 const char *method, bool reserve) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") || !strcmp(url, "/ready") || !strcmp(url, "/metrics")) {
        if (!get) return srv_error(S, conn, k, 405, NULL, NULL, "use GET %s", url);
        k->route = !strcmp(url, "/health") ? SRV_R_HEALTH : !strcmp(url, "/ready") ? SRV_R_READY : SRV_R_METRICS;
        return MHD_YES;
    }
    if (reserve)
        return srv_error(S, conn, k, 503, NULL, NULL, "all %d connections (--max-connections) are in use; one beyond "
                         "them may only ask GET /health, /ready or /metrics", S->max_connections);
    if (!strcmp(method, "OPTIONS")) {   // a browser's CORS preflight, of any path
        k->route = SRV_R_OPTIONS;
        return MHD_YES;
    }
    static const struct { const char *url; enum srv_route route; } posts[] = {
        {"/v1/chat/completions", SRV_R_CHAT}, {"/v1/completions", SRV_R_COMPLETIONS},
        {"/tokenize", SRV_R_TOKENIZE}, {"/detokenize", SRV_R_DETOKENIZE}};
    for (size_t i = 0; i < CLI_ARRAY_LEN(posts); i++)
        if (!strcmp(url, posts[i].url)) k->route = posts[i].route;
    if (!strcmp(url, "/v1/models")) k->route = SRV_R_MODELS;
    else if (!strncmp(url, "/v1/models/", 11)) k->route = SRV_R_MODEL;
    if (k->route == SRV_R_NONE)
        return srv_error(S, conn, k, 404, NULL, "not_found", "no such endpoint: %.200s %.200s", method, url);
    if (!srv_authorized(S, conn))
        return srv_error(S, conn, k, 401, NULL, "invalid_api_key",
                         "a valid API key is needed (Authorization: Bearer KEY)");
    if (atomic_load(&S->draining))   // (every route but the probes, /metrics and OPTIONS: returned above)
        return srv_error(S, conn, k, 503, NULL, NULL, "the server is shutting down");
    if (k->route == SRV_R_MODELS || k->route == SRV_R_MODEL)
        return get ? MHD_YES : srv_error(S, conn, k, 405, NULL, NULL, "use GET %.200s", url);
    if (!post) return srv_error(S, conn, k, 405, NULL, NULL, "use POST %s", url);
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    long long n = cl ? (long long)strtoull(cl, NULL, 10) : 0, held = 0;   // (at most --max-body-size: checked)
    // the budget is taken as the bytes come (the buffer doubling up to the Content-Length), the
    // first SRV_BODY_FIRST at once: a client that announces a large body and trickles it holds
    // no more than it sent
    k->expect = n;
    if (n > 0 && !srv_budget_take(S, k, CLI_MIN(n, SRV_BODY_FIRST), &held))
        return srv_error(S, conn, k, 503, NULL, NULL, "request bodies in flight hold %lld bytes of the %lld that "
                         "--max-body-memory allows; try again later", held, S->max_body_memory);
    return MHD_YES;
}

// A request's line and headers are in (its body, if any, is still to come): its context, and
// what they decide answered at once: framing libmicrohttpd lets through (Content-Length twice, a
// transfer coding other than chunked), a Content-Length over --max-body-size, then srv_route's.
static enum MHD_Result srv_headers(struct srv *S, struct MHD_Connection *conn, const char *url, const char *method,
                                   void **ctx) {
    struct srv_conn *k = calloc(1, sizeof(*k));
    if (!k) return MHD_NO;
    k->t0 = cli_now();
    *ctx = k;
    if (!(k->method = strdup(method)) || !(k->path = strdup(url))) cli_die("out of memory");
    atomic_fetch_add(&S->n_open, 1);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    k->sock = ci ? ci->socket_context : NULL;
    bool reserve = srv_phase(S, k->sock, SRV_BODY);
    int n_cl = 0;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, srv_count_content_length, &n_cl);
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    k->has_body = te || (cl && strtoull(cl, NULL, 10) > 0);
    k->answered_early = true;
    if (n_cl > 1) return srv_error(S, conn, k, 400, NULL, NULL, "the request has %d Content-Length headers", n_cl);
    if (te && strcasecmp(te, "chunked"))
        return srv_error(S, conn, k, 501, NULL, NULL, "Transfer-Encoding '%.100s' is not supported (only chunked)", te);
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)S->max_body) {
        k->too_big = true;
        return srv_error(S, conn, k, 413, NULL, NULL, "the request body is larger than %lld bytes (--max-body-size)",
                         S->max_body);
    }
    enum MHD_Result r = srv_route(S, conn, k, url, method, reserve);
    k->answered_early = k->status != 0;
    return r;
}

// n more bytes of k's body: counted for --body-min-rate; kept when its endpoint reads it (within
// --max-body-size and the bodies' budget, else refused) and scanned: a completions prompt of more
// ids than the server takes is refused before the rest comes.
static void srv_upload(struct srv *S, struct srv_conn *k, const char *upload, size_t n) {
    if (k->sock) {
        pthread_mutex_lock(&S->cmu);
        k->sock->received += (long long)n;
        pthread_mutex_unlock(&S->cmu);
    }
    bool reads = k->route == SRV_R_CHAT || k->route == SRV_R_COMPLETIONS || k->route == SRV_R_TOKENIZE ||
                 k->route == SRV_R_DETOKENIZE;
    bool keep = reads && !k->refuse && !k->too_big;
    if (!keep) return;   // read and dropped: a body no endpoint reads, or refused already
    if (k->body.n + n > (size_t)S->max_body) {   // a body without Content-Length that grew too big
        k->too_big = true;
        srv_body_drop(S, k);
        return;
    }
    long long held = 0;
    if (!srv_body_put(S, k, upload, n, &held)) {
        srv_refuse(S, k, 503, "request bodies in flight hold %lld bytes of the %lld that --max-body-memory allows; try "
                   "again later", held, S->max_body_memory);
        return;
    }
    long long most_ids = cli_scan(&k->scan, upload, n);
    if (k->route == SRV_R_COMPLETIONS && most_ids > S->max_prompt_ids) {
        k->refuse_param = "prompt";
        if (S->max_prompt_ids == S->max_model_len)
            srv_refuse(S, k, 400, "prompt: more than %d token ids in one prompt, more than max_model_len (%d) allows",
                       S->max_prompt_ids, S->max_model_len);
        else
            srv_refuse(S, k, 400, "prompt: more than %d token ids in one prompt, more than the KV cache holds with the "
                       "first output token (%d tokens)", S->max_prompt_ids, S->max_prompt_ids + 1);
    }
}

// The request is read: a body refused as it came (too big, beyond the bodies' budget, a prompt
// too long), or one whose parse the budget cannot hold, is answered here (true, *r: the answer).
static bool srv_body_refused(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, enum MHD_Result *r) {
    if (k->too_big) {   // a body without Content-Length that grew too big: read, dropped, refused
        *r = srv_error(S, conn, k, 413, NULL, NULL, "the request body is larger than %lld bytes (--max-body-size)",
                       S->max_body);
        return true;
    }
    if (k->refuse) {
        *r = srv_error(S, conn, k, k->refuse, k->refuse_param, NULL, "%s", k->refuse_msg);
        return true;
    }
    if (!k->body.n) return false;
    // what parsing the body will hold, from the bodies' budget (given back with the body's)
    long long parse = k->scan.parse_bytes, held = 0;
    if (parse > S->max_body_memory) {
        *r = srv_error(S, conn, k, 413, NULL, NULL, "the request body has %lld JSON values, which would take some %lld "
                       "bytes to parse, more than --max-body-memory (%lld)", k->scan.values, parse, S->max_body_memory);
        return true;
    }
    if (!srv_budget_take(S, k, parse, &held)) {
        *r = srv_error(S, conn, k, 503, NULL, NULL, "request bodies in flight hold %lld bytes of the %lld that "
                       "--max-body-memory allows (this one needs %lld to be parsed); try again later", held,
                       S->max_body_memory, parse);
        return true;
    }
    return false;
}

// OPTIONS: a browser's CORS preflight, any origin allowed, as vLLM and llama-server do.
static enum MHD_Result srv_options(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    srv_common_headers(S, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(conn, 204, r);
    MHD_destroy_response(r);
    k->status = 204;
    return ret;
}

// GET /ready: 200 while the server takes requests; 503 with Retry-After while it drains or while
// --ready-max-waiting sequences or more wait for a place in the running batch (by default: while
// the queue is full; a readiness probe, or a load balancer's health check, then sends the next
// requests elsewhere).
static enum MHD_Result srv_ready(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k) {
    pthread_mutex_lock(&S->mu);
    int waiting = CLI_MAX(0, S->n_active + S->n_pending - S->max_num_seqs);
    pthread_mutex_unlock(&S->mu);
    if (atomic_load(&S->draining)) return srv_error(S, conn, k, 503, NULL, NULL, "the server is shutting down");
    if (waiting >= S->ready_max_waiting)
        return srv_error(S, conn, k, 503, NULL, NULL,
                         "%d sequences wait for the running batch (--ready-max-waiting %d)", waiting,
                         S->ready_max_waiting);
    json_t *o = cli_jcheck(json_object());
    cli_jset(o, "status", cli_json_cstr("ready"));
    cli_jset(o, "waiting", cli_jcheck(json_integer(waiting)));
    return srv_json(S, conn, k, 200, o);
}

// The answer of a request that is read, by its route.
static enum MHD_Result srv_dispatch(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, const char *url,
                                    const char *method) {
    switch (k->route) {
    case SRV_R_HEALTH: {   // alive (a liveness probe): 200 while draining too
        json_t *o = cli_jcheck(json_object());
        cli_jset(o, "status", cli_json_cstr(atomic_load(&S->draining) ? "draining" : "ok"));
        return srv_json(S, conn, k, 200, o);
    }
    case SRV_R_READY:
        return srv_ready(S, conn, k);
    case SRV_R_METRICS:
        return srv_metrics(S, conn, k);
    case SRV_R_OPTIONS:
        return srv_options(S, conn, k);
    case SRV_R_MODELS:
        return srv_models(S, conn, k, NULL);
    case SRV_R_MODEL:
        if (strcmp(url + 11, S->model_name))
            return srv_error(S, conn, k, 404, "model", "model_not_found",
                             "the model '%.200s' does not exist: this server has '%s'", url + 11, S->model_name);
        return srv_models(S, conn, k, url + 11);
    case SRV_R_TOKENIZE:
        return srv_tokenize(S, conn, k);
    case SRV_R_DETOKENIZE:
        return srv_detokenize(S, conn, k);
    case SRV_R_CHAT:
    case SRV_R_COMPLETIONS:
        return srv_complete(S, conn, k, k->route == SRV_R_CHAT);
    case SRV_R_NONE:
        break;
    }
    return srv_error(S, conn, k, 404, NULL, "not_found", "no such endpoint: %.200s %.200s", method, url);
}

// libmicrohttpd's handler of a request: called at its headers, with each piece of its body, and
// once the body is read (the answer, unless its headers had one).
static enum MHD_Result srv_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx) {
    (void)version;
    struct srv *S = cls;
    struct srv_conn *k = *ctx;
    if (!k) return srv_headers(S, conn, url, method, ctx);
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        srv_upload(S, k, upload, n);
        return MHD_YES;
    }
    srv_phase(S, k->sock, SRV_ANSWER);
    if (k->status) return MHD_YES;   // answered from the headers
    enum MHD_Result r;
    if (srv_body_refused(S, conn, k, &r)) return r;
    return srv_dispatch(S, conn, k, url, method);
}

// The request's line in the log; the reference of the call it started goes.
static void srv_log(struct srv *S, struct MHD_Connection *conn, struct srv_conn *k, bool aborted, bool late) {
    struct cli_reqlog_entry e = {.method = k->method, .path = k->path, .status = k->status, .prompt = -1,
                                 .completion = -1, .ttft_ms = -1, .total_ms = (cli_now() - k->t0) * 1e3,
                                 .aborted = aborted, .error = k->error};
    if (late && e.status <= 0) e.status = 408, e.error = SRV_LATE;   // srv_watch's answer
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    cli_reqlog_client(ci ? ci->client_addr : NULL, e.client, sizeof(e.client));
    if (k->call) {   // its tokens as its usage counts them (so far, when it was cut short)
        pthread_mutex_lock(&S->mu);
        json_t *u = srv_usage(k->call);
        e.prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        e.completion = json_integer_value(json_object_get(u, "completion_tokens"));
        json_decref(u);
        if (k->call->t_first > 0) e.ttft_ms = (k->call->t_first - k->t0) * 1e3;
        srv_call_unref(k->call);
        pthread_mutex_unlock(&S->mu);
    }
    cli_reqlog_write(&S->log, &e);
}

static void srv_completed(void *cls, struct MHD_Connection *conn, void **ctx, enum MHD_RequestTerminationCode why) {
    struct srv *S = cls;
    struct srv_conn *k = *ctx;
    if (!k) return;
    atomic_fetch_sub(&S->n_open, 1);
    srv_body_drop(S, k);
    // a keep-alive connection's next request header is awaited; one that libmicrohttpd closes now
    // (an error, the client's "Connection: close", a body not read) makes no room for another
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);
    bool late = srv_ended(S, k->sock, why != MHD_REQUEST_TERMINATED_COMPLETED_OK || (h && srv_has_close(h)) ||
                                          (k->answered_early && k->has_body));
    srv_log(S, conn, k, why != MHD_REQUEST_TERMINATED_COMPLETED_OK, late);
    free(k->refuse_msg);
    free(k->method);
    free(k->path);
    free(k->error);
    free(k);
    *ctx = NULL;
}

// --- llm serve ---

// A listening socket on host:port, or cli_die with the reason.
static int srv_listen(const char *host, int port, int *bound_port) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) cli_die("--host %s: %s", host, gai_strerror(rc));
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 128)) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    bool v6 = strchr(host, ':') != NULL;
    if (fd < 0) cli_die("cannot listen on %s%s%s:%d: %s", v6 ? "[" : "", host, v6 ? "]" : "", port, strerror(err));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    *bound_port = port;
    if (!getsockname(fd, (struct sockaddr *)&ss, &sl))
        *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                               : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

// --replica-id: printable ASCII without spaces (an HTTP header's value), at most 128 characters.
static void srv_replica_id(const char *id) {
    if (!id) return;
    size_t n = strlen(id);
    bool ok = n > 0 && n <= 128;
    for (size_t i = 0; ok && i < n; i++) ok = id[i] > 32 && id[i] < 127;
    if (!ok) cli_die("--replica-id '%.200s': 1 to 128 printable ASCII characters without spaces", id);
}

// SIGINT and SIGTERM are taken by sigtimedwait in this thread (sigs); every thread started from
// here on blocks them. A write to a closed connection is an error, not a signal.
static void srv_block_signals(sigset_t *sigs) {
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

// The model's name: --served-model-name, else the file's (or directory's) name without .gguf.
static char *srv_model_name(const struct cli *c) {
    char *name = NULL;
    if (c->served_model_name) {
        name = strdup(c->served_model_name);
    } else {
        const char *p = c->ep.model_path;
        size_t end = strlen(p);
        while (end > 1 && p[end - 1] == '/') end--;   // a directory given as DIR/
        size_t start = end;
        while (start > 0 && p[start - 1] != '/') start--;
        size_t n = end - start;
        if (n > 5 && !strncmp(p + end - 5, ".gguf", 5)) n -= 5;
        name = strndup(p + start, n);
    }
    if (!name) cli_die("out of memory");
    return name;
}

// The defaults of a request's sampling: OpenAI's (temperature 1, nothing cut), or the flags given.
static struct llm_sampling_params srv_sampling(const struct cli *c) {
    struct llm_sampling_params def = llm_sampling_params_default(), sp = def;
    sp.temperature = c->sp.temperature != def.temperature ? c->sp.temperature : 1.0f;
    sp.top_k = c->sp.top_k != def.top_k ? c->sp.top_k : 0;
    sp.top_p = c->sp.top_p != def.top_p ? c->sp.top_p : 1.0f;
    sp.min_p = c->sp.min_p != def.min_p ? c->sp.min_p : 0.0f;
    sp.repeat_penalty = c->sp.repeat_penalty != def.repeat_penalty ? c->sp.repeat_penalty : 1.0f;
    return sp;
}

// The server over its engine S->E: its configuration from the engine (*ei: the engine's facts,
// for the log) and the flags, its locks and metrics.
static void srv_setup(struct srv *S, const struct cli *c, struct llm_engine_info *ei) {
    struct llm_model_info mi;
    llm_get_model_info(S->E, &mi);
    llm_get_engine_info(S->E, ei);
    S->n_vocab = mi.n_vocab;
    S->max_model_len = ei->max_model_len;
    S->max_num_seqs = ei->max_num_seqs;
    S->prefix_caching = ei->enable_prefix_caching;
    S->max_queued = c->max_queued;
    S->ready_max_waiting = c->ready_max_waiting > 0 ? c->ready_max_waiting : CLI_MAX(1, c->max_queued);
    S->replica_id = c->replica_id;   // (checked by srv_replica_id before the model loaded)
    S->max_body = c->max_body;
    // a prompt of more ids than this is refused by the engine: the context, or the KV cache
    // with the prompt's first output token
    S->max_prompt_ids = CLI_MIN(ei->max_model_len, ei->kv_tokens - 1);
    S->max_connections = c->max_connections;
    S->header_timeout = c->header_timeout_s;
    S->body_min_rate = c->body_min_rate;
    // 256 MiB: sixteen bodies of the default --max-body-size at once, or one of a larger one
    S->max_body_memory = c->max_body_memory >= 0 ? c->max_body_memory : CLI_MAX(256ll << 20, c->max_body);
    if (S->max_body_memory < c->max_body)
        cli_die("--max-body-memory %lld is less than --max-body-size %lld: a body of that size could never be read",
                S->max_body_memory, c->max_body);
    S->api_key = c->api_key && c->api_key[0] ? c->api_key : NULL;
    S->model_name = srv_model_name(c);
    S->tmpl = c->chat_template ? c->chat_template : llm_chat_template_detect(S->E);
    if (!S->tmpl) {
        S->tmpl = "chatml";
        fprintf(stderr, "llm serve: the model has no chat template llm knows; /v1/chat/completions uses chatml "
                "(--chat-template NAME)\n");
    }
    S->sp = srv_sampling(c);
    S->log = (struct cli_reqlog){stderr, c->log_format == CLI_LOG_JSON ? CLI_LOG_JSON : CLI_LOG_TEXT, c->quiet};
    S->rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)S;
    S->ttft = (struct srv_hist){srv_ttft_bounds, (int)CLI_ARRAY_LEN(srv_ttft_bounds), {0}, 0, 0};
    S->itl = (struct srv_hist){srv_itl_bounds, (int)CLI_ARRAY_LEN(srv_itl_bounds), {0}, 0, 0};
    S->e2e = (struct srv_hist){srv_e2e_bounds, (int)CLI_ARRAY_LEN(srv_e2e_bounds), {0}, 0, 0};
    pthread_mutex_init(&S->emu, NULL);
    pthread_mutex_init(&S->mu, NULL);
    pthread_mutex_init(&S->cmu, NULL);
    pthread_cond_init(&S->ework, NULL);
    pthread_cond_init(&S->cv, NULL);
    llm_get_stats(S->E, &S->stats);
}

// libmicrohttpd's daemon on the listening socket lfd (bound to port): a thread per connection,
// within the flags' limits of connections (and the reserve) and of connections from one address.
static struct MHD_Daemon *srv_start_http(struct srv *S, const struct cli *c, int lfd, int port) {
    // a quarter of the connections from one address, by default
    int per_ip = c->max_connections_per_ip >= 0 ? c->max_connections_per_ip : CLI_MAX(1, c->max_connections / 4);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC, 0, NULL, NULL,
        srv_access, S, MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(c->max_connections + SRV_RESERVE_CONNS),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)per_ip, MHD_OPTION_NOTIFY_COMPLETED, srv_completed, S,
        MHD_OPTION_NOTIFY_CONNECTION, srv_notify_connection, S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 << 10), MHD_OPTION_END);
    if (!d) cli_die("cannot start the HTTP server (libmicrohttpd) on %s:%d", c->host, port);
    return d;
}

// Watches the connections' deadlines five times a second until SIGINT or SIGTERM; returns it.
static int srv_wait_signal(struct srv *S, const sigset_t *sigs) {
    int sig = 0;
    while (sig <= 0) {
        struct timespec ts = {0, 200000000};
        sig = sigtimedwait(sigs, NULL, &ts);
        srv_watch(S);
    }
    return sig;
}

// After signal sig: /ready fails and new requests get 503 with Retry-After (the socket still
// listens: a load balancer learns of the drain from answers, not from refused connections);
// those in flight may finish within timeout_s seconds (a second signal cuts that short).
static void srv_drain(struct srv *S, const sigset_t *sigs, int sig, int timeout_s) {
    fprintf(stderr, "llm serve: %s: no new requests; finishing those in flight (at most %d s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", timeout_s);
    atomic_store(&S->draining, true);   // (/ready and new requests see it at once)
    srv_engine_lock(S);   // calls are admitted under emu: one admitted before the store is now counted busy
    pthread_mutex_unlock(&S->emu);
    double t_end = cli_now() + timeout_s;
    for (;;) {
        pthread_mutex_lock(&S->mu);
        int busy = S->n_active + S->n_pending;
        pthread_mutex_unlock(&S->mu);
        if (!busy || cli_now() >= t_end) break;
        srv_watch(S);
        struct timespec ts = {0, 50000000};
        if (sigtimedwait(sigs, NULL, &ts) > 0) {   // a second SIGINT/SIGTERM: abort now
            fprintf(stderr, "llm serve: a second signal: aborting what is in flight\n");
            break;
        }
    }
}

// What is left is aborted: its clients get their answers with finish_reason "abort".
static void srv_abort_rest(struct srv *S) {
    srv_engine_lock(S);
    pthread_mutex_lock(&S->mu);
    int left = S->n_active + S->n_pending;
    for (int i = 0; i < S->n_active; i++) llm_abort_request(S->E, S->active[i]->id);
    while (S->n_pending > 0) srv_seq_end(S, S->pending[0], LLM_FINISH_ABORT, NULL);
    pthread_mutex_unlock(&S->mu);
    pthread_cond_signal(&S->ework);
    pthread_mutex_unlock(&S->emu);
    if (left) fprintf(stderr, "llm serve: unfinished sequences aborted: %d\n", left);
    // the aborts are reported by the next step, then the answers' last chunks are sent (stopping
    // the daemon closes the connections: a client could miss its finish_reason "abort")
    for (double t = cli_now() + 5.0; cli_now() < t;) {
        pthread_mutex_lock(&S->mu);
        int busy = S->n_active;
        pthread_mutex_unlock(&S->mu);
        if (!busy && atomic_load(&S->n_open) == 0) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
}

// The engine thread ends, then the engine and the server are freed.
static void srv_free(struct srv *S, pthread_t engine_thread) {
    pthread_mutex_lock(&S->emu);
    S->quit = true;
    pthread_cond_signal(&S->ework);
    pthread_mutex_unlock(&S->emu);
    pthread_join(engine_thread, NULL);
    llm_engine_free(S->E);
    fprintf(stderr, "llm serve: stopped\n");
    free(S->active);
    free(S->pending);
    free(S->model_name);
    pthread_mutex_destroy(&S->emu);
    pthread_mutex_destroy(&S->mu);
    pthread_mutex_destroy(&S->cmu);
    pthread_cond_destroy(&S->ework);
    pthread_cond_destroy(&S->cv);
    free(S);
}

int cli_cmd_serve(struct cli *c) {
    sigset_t sigs;
    srv_block_signals(&sigs);
    srv_replica_id(c->replica_id);
    struct srv *S = calloc(1, sizeof(*S));
    if (!S) cli_die("out of memory");
    int port = 0;
    int lfd = srv_listen(c->host, c->port, &port);
    S->E = cli_engine(c);
    struct llm_engine_info ei;
    srv_setup(S, c, &ei);
    pthread_t engine_thread;
    if (pthread_create(&engine_thread, NULL, srv_engine_main, S)) cli_die("cannot start the engine thread");
    struct MHD_Daemon *d = srv_start_http(S, c, lfd, port);
    bool v6 = strchr(c->host, ':') != NULL;
    fprintf(stderr, "llm serve: %s (%s, %d tokens of context, chat template %s) on http://%s%s%s:%d\n", S->model_name,
            ei.backend_name, S->max_model_len, S->tmpl, v6 ? "[" : "", c->host, v6 ? "]" : "", port);
    fflush(stderr);
    int sig = srv_wait_signal(S, &sigs);
    srv_drain(S, &sigs, sig, c->shutdown_timeout_s);
    MHD_socket q = MHD_quiesce_daemon(d);   // no new connections from here
    srv_abort_rest(S);
    MHD_stop_daemon(d);   // the connections end (their answers are complete) and are joined
    if (q != MHD_INVALID_SOCKET) close(q);   // (libmicrohttpd: only after MHD_stop_daemon)
    srv_free(S, engine_thread);
    return 0;
}
