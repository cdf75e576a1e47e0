// serve.c — many requests through the engine's scheduler: llm generate (requests from a JSON
// Lines file, results in order), llm bench (one sequence's prefill and decode speed, or with
// the serving flags a serving benchmark), llm profile (time per module over a serving run).
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// splitmix64: the random prompts and arrival times of the benchmarks.
static uint64_t cli_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// FNV-1a, continued from h, over the 4 bytes of v (least significant first): bench's
// outputs_hash, which says whether two runs generated the same tokens.
#define CLI_HASH_INIT 0xcbf29ce484222325ull
static uint64_t cli_hash_u32(uint64_t h, uint32_t v) {
    for (int b = 0; b < 4; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
    return h;
}

// The first index of the largest value (NaN never wins; 0 when all are NaN).
static int32_t cli_argmax(const float *x, int n) {
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (best < 0 ? x[i] == x[i] : x[i] > x[best]) best = i;
    return best < 0 ? 0 : best;
}

// A code point as UTF-8 (U+FFFD for one beyond U+10FFFF); returns the bytes written (1..4).
static int cli_utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// --- llm generate: requests from a JSON Lines file ---

// A tiny JSON reader for one request line: a flat object whose values are strings, numbers,
// booleans, null or arrays of them (others are skipped).
struct cli_jp { const char *s, *end; char err[128]; };

static void cli_jp_ws(struct cli_jp *j) { while (j->s < j->end && isspace((unsigned char)*j->s)) j->s++; }
static bool cli_jp_fail(struct cli_jp *j, const char *what) {
    if (!j->err[0]) snprintf(j->err, sizeof(j->err), "%s", what);
    return false;
}

static int cli_hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// A string value into out (a fresh buffer, NUL-terminated; *n its length).
static bool cli_jp_str(struct cli_jp *j, struct cli_strbuf *out) {
    if (j->s >= j->end || *j->s != '"') return cli_jp_fail(j, "expected a string");
    j->s++;
    cli_sb_put(out, "", 0);
    while (j->s < j->end && *j->s != '"') {
        char c = *j->s++;
        if ((unsigned char)c < 0x20) return cli_jp_fail(j, "control character in a string");
        if (c != '\\') { cli_sb_put(out, &c, 1); continue; }
        if (j->s >= j->end) break;
        c = *j->s++;
        const char *simple = strchr("\"\\/bfnrt", c);
        if (simple && c) { static const char map[] = "\"\\/\b\f\n\r\t"; cli_sb_put(out, &map[simple - "\"\\/bfnrt"], 1); continue; }
        if (c != 'u') return cli_jp_fail(j, "bad escape in a string");
        uint32_t cp = 0;
        for (int pass = 0; pass < 2; pass++) {
            uint32_t u = 0;
            for (int k = 0; k < 4; k++) {
                int h = j->s < j->end ? cli_hexval(*j->s++) : -1;
                if (h < 0) return cli_jp_fail(j, "bad \\u escape");
                u = u << 4 | (uint32_t)h;
            }
            if (pass == 0 && u >= 0xD800 && u < 0xDC00 && j->end - j->s >= 6 && j->s[0] == '\\' && j->s[1] == 'u') {
                cp = u;
                j->s += 2;
                continue;
            }
            if (pass == 1) cp = u >= 0xDC00 && u < 0xE000 ? 0x10000 + ((cp - 0xD800) << 10) + (u - 0xDC00) : 0xFFFD;
            else cp = u >= 0xD800 && u < 0xE000 ? 0xFFFD : u;
            break;
        }
        char u8[4];
        cli_sb_put(out, u8, (size_t)cli_utf8_put(cp, u8));
    }
    if (j->s >= j->end) return cli_jp_fail(j, "unterminated string");
    j->s++;
    return true;
}

static bool cli_jp_skip(struct cli_jp *j, int depth) {
    cli_jp_ws(j);
    if (j->s >= j->end) return cli_jp_fail(j, "unexpected end");
    if (depth > 32) return cli_jp_fail(j, "nested too deeply");
    char c = *j->s;
    if (c == '"') { struct cli_strbuf t = {0}; bool ok = cli_jp_str(j, &t); free(t.p); return ok; }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        j->s++;
        cli_jp_ws(j);
        if (j->s < j->end && *j->s == close) { j->s++; return true; }
        for (;;) {
            if (c == '{') {
                struct cli_strbuf t = {0};
                bool ok = cli_jp_str(j, &t);
                free(t.p);
                cli_jp_ws(j);
                if (!ok || j->s >= j->end || *j->s++ != ':') return cli_jp_fail(j, "expected a key");
            }
            if (!cli_jp_skip(j, depth + 1)) return false;
            cli_jp_ws(j);
            if (j->s < j->end && *j->s == ',') { j->s++; cli_jp_ws(j); continue; }
            if (j->s < j->end && *j->s == close) { j->s++; return true; }
            return cli_jp_fail(j, "expected , or a closing bracket");
        }
    }
    const char *start = j->s;
    while (j->s < j->end && (isalnum((unsigned char)*j->s) || strchr("+-.", *j->s))) j->s++;
    if (j->s == start) return cli_jp_fail(j, "unexpected character");
    return true;
}

static bool cli_jp_num(struct cli_jp *j, double *v) {
    cli_jp_ws(j);
    char *endp;
    errno = 0;
    *v = strtod(j->s, &endp);
    if (endp == j->s || endp > j->end || errno || !isfinite(*v)) return cli_jp_fail(j, "expected a number");
    j->s = endp;
    return true;
}

struct cli_jreq {
    struct cli_strbuf prompt;
    bool has_prompt, has_tokens;
    int32_t *tokens;
    int n_tokens;
    char **stop;
    int n_stop;
    struct llm_request_params p;
    char err[160];
};

static void cli_jreq_free(struct cli_jreq *q) {
    free(q->prompt.p);
    free(q->tokens);
    for (int i = 0; i < q->n_stop; i++) free(q->stop[i]);
    free(q->stop);
}

// Parses a request line over defaults; false with q->err on a bad line.
static bool cli_jreq_parse(const char *line, size_t len, struct cli_jreq *q) {
    struct cli_jp j = {line, line + len, ""};
    cli_jp_ws(&j);
    if (j.s >= j.end || *j.s++ != '{') { snprintf(q->err, sizeof(q->err), "not a JSON object"); return false; }
    cli_jp_ws(&j);
    bool ok = true, first = true;
    while (ok && j.s < j.end && *j.s != '}') {
        if (!first) { if (*j.s++ != ',') { ok = cli_jp_fail(&j, "expected ,"); break; } cli_jp_ws(&j); }
        first = false;
        struct cli_strbuf key = {0};
        ok = cli_jp_str(&j, &key);
        cli_jp_ws(&j);
        if (ok && (j.s >= j.end || *j.s++ != ':')) ok = cli_jp_fail(&j, "expected :");
        cli_jp_ws(&j);
        const char *k = key.p ? key.p : "";
        double v;
        if (!ok) {
        } else if (!strcmp(k, "prompt")) {
            free(q->prompt.p);
            memset(&q->prompt, 0, sizeof(q->prompt));
            ok = cli_jp_str(&j, &q->prompt);
            q->has_prompt = true;
        } else if (!strcmp(k, "tokens") || !strcmp(k, "stop") || !strcmp(k, "stop_token_ids")) {
            bool strs = !strcmp(k, "stop");
            if (j.s >= j.end || *j.s++ != '[') { ok = cli_jp_fail(&j, "expected an array"); free(key.p); break; }
            int cap = 0, n = 0;
            int32_t *ids = NULL;
            char **ss = NULL;
            cli_jp_ws(&j);
            while (ok && j.s < j.end && *j.s != ']') {
                if (n == cap) {
                    cap = cap ? 2 * cap : 16;
                    if (strs) ss = realloc(ss, (size_t)cap * sizeof(char *));
                    else ids = realloc(ids, (size_t)cap * sizeof(int32_t));
                    if (strs ? !ss : !ids) cli_die("out of memory");
                }
                if (strs) { struct cli_strbuf t = {0}; ok = cli_jp_str(&j, &t); ss[n++] = t.p; }
                else if ((ok = cli_jp_num(&j, &v))) {
                    if (v != floor(v) || v < 0 || v > INT32_MAX) ok = cli_jp_fail(&j, "token ids are integers >= 0");
                    else ids[n++] = (int32_t)v;
                }
                cli_jp_ws(&j);
                if (ok && j.s < j.end && *j.s == ',') { j.s++; cli_jp_ws(&j); }
            }
            if (ok && (j.s >= j.end || *j.s++ != ']')) ok = cli_jp_fail(&j, "unterminated array");
            if (strs) {
                for (int i = 0; i < q->n_stop; i++) free(q->stop[i]);
                free(q->stop);
                q->stop = ss;
                q->n_stop = n;
                for (int i = 0; ok && i < n; i++) if (!ss[i] || !ss[i][0]) ok = cli_jp_fail(&j, "empty stop string");
            } else if (!strcmp(k, "tokens")) {
                free(q->tokens);
                q->tokens = ids;
                q->n_tokens = n;
                q->has_tokens = true;
            } else {
                free((void *)q->p.stop_token_ids);
                q->p.stop_token_ids = ids;
                q->p.n_stop_token_ids = n;
            }
        } else if (!strcmp(k, "max_tokens") || !strcmp(k, "seed") || !strcmp(k, "priority") || !strcmp(k, "top_k")) {
            if ((ok = cli_jp_num(&j, &v))) {
                if (v != floor(v) || fabs(v) > 1e15) ok = cli_jp_fail(&j, "expected an integer");
                else if (!strcmp(k, "max_tokens")) { if (v < 0 || v > (1 << 24)) ok = cli_jp_fail(&j, "max_tokens out of range"); q->p.max_tokens = (int)v; }
                else if (!strcmp(k, "seed")) { if (v < 0) ok = cli_jp_fail(&j, "seed must be >= 0"); q->p.sampling.seed = (uint64_t)v; }
                else if (!strcmp(k, "priority")) { if (fabs(v) > INT_MAX) ok = cli_jp_fail(&j, "priority out of range"); q->p.priority = (int)v; }
                else { if (v < 0 || v > INT_MAX) ok = cli_jp_fail(&j, "top_k out of range"); q->p.sampling.top_k = (int)v; }
            }
        } else if (!strcmp(k, "temperature") || !strcmp(k, "top_p") || !strcmp(k, "min_p")) {
            if ((ok = cli_jp_num(&j, &v))) {
                if (!strcmp(k, "temperature")) { if (v < 0 || v > 100) ok = cli_jp_fail(&j, "temperature out of range"); q->p.sampling.temperature = (float)v; }
                else if (v < 0 || v > 1) ok = cli_jp_fail(&j, "probability out of [0, 1]");
                else if (!strcmp(k, "top_p")) q->p.sampling.top_p = (float)v;
                else q->p.sampling.min_p = (float)v;
            }
        } else if (!strcmp(k, "ignore_eos")) {
            if (j.end - j.s >= 4 && !strncmp(j.s, "true", 4)) { q->p.ignore_eos = 1; j.s += 4; }
            else if (j.end - j.s >= 5 && !strncmp(j.s, "false", 5)) { q->p.ignore_eos = 0; j.s += 5; }
            else ok = cli_jp_fail(&j, "ignore_eos must be true or false");
        } else {
            ok = cli_jp_skip(&j, 0);   // keys this program does not know are ignored
        }
        if (!ok && !j.err[0]) cli_jp_fail(&j, "bad value");
        if (!ok) snprintf(q->err, sizeof(q->err), "\"%.40s\": %s", k, j.err);
        free(key.p);
        cli_jp_ws(&j);
    }
    if (ok && (j.s >= j.end || *j.s++ != '}')) { ok = false; snprintf(q->err, sizeof(q->err), "%s", j.err[0] ? j.err : "expected }"); }
    cli_jp_ws(&j);
    if (ok && j.s != j.end) { ok = false; snprintf(q->err, sizeof(q->err), "text after the object"); }
    if (ok && q->has_prompt == q->has_tokens) { ok = false; snprintf(q->err, sizeof(q->err), "give one of \"prompt\" or \"tokens\""); }
    q->p.stop = (const char *const *)q->stop;
    q->p.n_stop = q->n_stop;
    return ok;
}

int cli_cmd_generate(struct cli *c) {
    if (!c->requests) cli_die("generate: give --requests FILE.jsonl (one JSON request per line)");
    size_t len;
    char *data = cli_read_file(c->requests, &len);
    llm_engine *E = cli_engine(c);
    // one request per non-empty line
    int n = 0, cap = 0;
    struct cli_jreq *q = NULL;
    for (size_t off = 0; off < len;) {
        const char *nl = memchr(data + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - data) : len, l = end - off;
        const char *line = data + off;
        off = end + 1;
        size_t t = 0;
        while (t < l && isspace((unsigned char)line[t])) t++;
        if (t == l) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            if (!(q = realloc(q, (size_t)cap * sizeof(*q)))) cli_die("out of memory");
        }
        memset(&q[n], 0, sizeof(q[n]));
        q[n].p = llm_request_params_default();
        q[n].p.sampling = c->sp;
        q[n].p.max_tokens = c->n_predict_set ? c->n_predict : 16;
        q[n].p.ignore_eos = c->ignore_eos;
        if (!cli_jreq_parse(line, l, &q[n])) q[n].has_prompt = q[n].has_tokens = false;
        n++;
    }
    struct llm_prompt *pr = calloc((size_t)CLI_MAX(n, 1), sizeof(*pr));
    struct llm_request_params *rp = calloc((size_t)CLI_MAX(n, 1), sizeof(*rp));
    struct llm_result *res = calloc((size_t)CLI_MAX(n, 1), sizeof(*res));
    int *map = calloc((size_t)CLI_MAX(n, 1), sizeof(int));
    if (!pr || !rp || !res || !map) cli_die("out of memory");
    int m = 0;   // the valid lines go to the engine
    for (int i = 0; i < n; i++) {
        if (q[i].err[0]) continue;
        pr[m] = q[i].has_prompt ? (struct llm_prompt){q[i].prompt.p, NULL, 0} : (struct llm_prompt){NULL, q[i].tokens, q[i].n_tokens};
        if (q[i].has_tokens && q[i].n_tokens == 0) pr[m].tokens = NULL;
        rp[m] = q[i].p;
        map[m++] = i;
    }
    struct llm_result *rm = calloc((size_t)CLI_MAX(m, 1), sizeof(*rm));
    if (!rm) cli_die("out of memory");
    if (llm_generate(E, pr, m, rp, rm) != LLM_OK) fprintf(stderr, "llm: generate: %s\n", llm_last_error(E));
    for (int k = 0; k < m; k++) res[map[k]] = rm[k];
    for (int i = 0; i < n; i++) {
        printf("{\"index\":%d,\"prompt_tokens\":[", i);
        for (int t = 0; t < res[i].n_prompt_tokens; t++) printf("%s%d", t ? "," : "", res[i].prompt_tokens[t]);
        printf("],\"tokens\":[");
        for (int t = 0; t < res[i].n_tokens; t++) printf("%s%d", t ? "," : "", res[i].tokens[t]);
        printf("],\"text\":");
        cli_json_str(stdout, res[i].text ? res[i].text : "", res[i].text ? strlen(res[i].text) : 0);
        const char *err = q[i].err[0] ? q[i].err : res[i].error;
        printf(",\"finish_reason\":\"%s\",\"ttft_ms\":%.3f", err ? "error" : llm_finish_reason_str(res[i].finish_reason), res[i].ttft_ms);
        if (err) {
            printf(",\"error\":");
            cli_json_str(stdout, err, strlen(err));
        }
        printf("}\n");
    }
    llm_results_free(res, n);
    for (int i = 0; i < n; i++) cli_jreq_free(&q[i]);
    for (int i = 0; i < n; i++) free((void *)q[i].p.stop_token_ids);
    free(q);
    free(pr);
    free(rp);
    free(res);
    free(rm);
    free(map);
    free(data);
    llm_engine_free(E);
    return 0;
}

// --- llm bench (serving) and llm profile ---

static int cli_cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

// The p-th percentile (0..100) of v[0..n), linear between ranks; v gets sorted.
static double cli_percentile(float *v, int n, double p) {
    if (n == 0) return 0.0;
    qsort(v, (size_t)n, sizeof(float), cli_cmp_float);
    double x = p / 100.0 * (n - 1);
    int i = (int)x;
    return i + 1 < n ? v[i] + (x - i) * (v[i + 1] - v[i]) : v[n - 1];
}

struct cli_serve_result {
    int n_requests;
    double elapsed, output_tps, total_tps, req_per_s;
    double ttft[3], itl[3];           // p50, p90, p99 in ms
    double kv_utilization, prefix_hit_rate;
    long long n_output, n_prompt, n_preemptions;
    int kv_tokens, n_threads;
    uint64_t outputs_hash;            // of every request's output tokens, in request order
};

// Runs the benchmark's requests: random prompts (or a shared context + questions), greedy,
// exactly output_len tokens each, all at once or arriving at request_rate per second (Poisson).
static void cli_serve_run(llm_engine *E, const struct cli *c, struct cli_serve_result *R) {
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    int n = c->rag ? c->questions : c->num_prompts;
    int in_len = c->rag ? c->context_len + c->question_len : c->input_len;
    if (in_len + c->output_len > ei.max_model_len)
        cli_die("bench: prompts of %d tokens + %d generated exceed the context length %d (-c)", in_len, c->output_len,
                ei.max_model_len);
    uint64_t rng = c->seed ^ 0x5851f42d4c957f2dull;
    int32_t *prompts = malloc((size_t)n * (size_t)in_len * sizeof(int32_t));
    double *arrival = malloc((size_t)n * sizeof(double));
    int *ids = malloc((size_t)n * sizeof(int));
    float *ttft = malloc((size_t)n * sizeof(float));
    uint64_t *hashes = malloc((size_t)n * sizeof(uint64_t));   // of each request's output tokens
    if (!prompts || !arrival || !ids || !ttft || !hashes) cli_die("out of memory");
    for (int i = 0; i < n; i++) hashes[i] = CLI_HASH_INIT;
    for (int i = 0; i < n; i++) {
        int32_t *p = prompts + (size_t)i * (size_t)in_len;
        for (int t = 0; t < in_len; t++) p[t] = 3 + (int32_t)(cli_splitmix64(&rng) % (uint64_t)(mi.n_vocab - 3));
        if (c->rag && i > 0) memcpy(p, prompts, (size_t)c->context_len * sizeof(int32_t));   // the shared context
        if (mi.bos_id >= 0) p[0] = mi.bos_id;
    }
    double t = 0.0;
    for (int i = 0; i < n; i++) {
        if (c->request_rate > 0) t += -log(1.0 - (double)(cli_splitmix64(&rng) >> 11) / 9007199254740992.0) / c->request_rate;
        arrival[i] = c->request_rate > 0 ? t : 0.0;
    }
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = c->output_len;
    rp.ignore_eos = 1;
    int cap_itl = 1024, n_itl = 0, added = 0, done = 0, util_n = 0;
    float *itl = malloc((size_t)cap_itl * sizeof(float));
    double util = 0.0;
    bool bar = isatty(2);
    double t0 = cli_now();
    memset(R, 0, sizeof(*R));
    while (done < n) {
        double now = cli_now() - t0;
        while (added < n && arrival[added] <= now) {
            struct llm_prompt pr = {NULL, prompts + (size_t)added * (size_t)in_len, in_len};
            if ((ids[added] = llm_add_request(E, &pr, &rp)) < 0) cli_die("bench: %s", llm_last_error(E));
            added++;
        }
        if (!llm_has_unfinished_requests(E)) {
            double wait = arrival[added] - (cli_now() - t0);
            if (wait > 0) { struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)}; nanosleep(&ts, NULL); }
            continue;
        }
        const struct llm_output *out;
        int k = llm_step(E, &out);
        if (k < 0) cli_die("bench: %s", llm_last_error(E));
        struct llm_engine_stats st;
        llm_get_stats(E, &st);
        if (st.n_running) { util += st.kv_utilization; util_n++; }
        for (int j = 0; j < k; j++) {
            int i = 0;
            while (i < added && ids[i] != out[j].request_id) i++;
            if (i == added) continue;
            for (int x = 0; x < out[j].n_new_tokens; x++) hashes[i] = cli_hash_u32(hashes[i], (uint32_t)out[j].new_tokens[x]);
            if (!out[j].finished) continue;
            ttft[i] = (float)out[j].ttft_ms;
            R->n_output += out[j].n_output_tokens;
            R->n_prompt += out[j].n_prompt_tokens;
            for (int x = 0; x + 1 < out[j].n_output_tokens; x++) {
                if (n_itl == cap_itl && !(itl = realloc(itl, (size_t)(cap_itl *= 2) * sizeof(float)))) cli_die("out of memory");
                itl[n_itl++] = out[j].itl_ms[x];
            }
            done++;
        }
        if (bar) {
            int w = 40, f = done * w / n;
            fprintf(stderr, "\r[%.*s%*s] %d/%d requests", f, "========================================", w - f, "", done, n);
        }
    }
    R->elapsed = cli_now() - t0;
    if (bar) fprintf(stderr, "\r%*s\r", 70, "");
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    R->n_requests = n;
    R->req_per_s = n / R->elapsed;
    R->output_tps = (double)R->n_output / R->elapsed;
    R->total_tps = (double)(R->n_output + R->n_prompt) / R->elapsed;
    const double ps[3] = {50, 90, 99};
    for (int i = 0; i < 3; i++) { R->ttft[i] = cli_percentile(ttft, n, ps[i]); R->itl[i] = cli_percentile(itl, n_itl, ps[i]); }
    R->kv_utilization = util_n ? util / util_n : 0.0;
    R->prefix_hit_rate = st.prefix_query_tokens ? (double)st.prefix_hit_tokens / (double)st.prefix_query_tokens : 0.0;
    R->n_preemptions = st.n_preemptions;
    R->kv_tokens = ei.kv_tokens;
    R->n_threads = ei.n_threads;
    uint64_t h = CLI_HASH_INIT;
    for (int i = 0; i < n; i++) h = cli_hash_u32(cli_hash_u32(h, (uint32_t)hashes[i]), (uint32_t)(hashes[i] >> 32));
    R->outputs_hash = h;
    free(prompts);
    free(arrival);
    free(ids);
    free(ttft);
    free(hashes);
    free(itl);
}

int cli_cmd_bench_serve(struct cli *c) {
    llm_engine *E = cli_engine(c);
    struct cli_serve_result R;
    cli_serve_run(E, c, &R);
    if (c->json) {
        printf("{\"requests\":%d,\"elapsed_s\":%.4f,\"request_throughput\":%.4f,\"output_tps\":%.3f,\"total_tps\":%.3f,"
               "\"ttft_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f},\"itl_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f},"
               "\"kv_utilization\":%.4f,\"prefix_hit_rate\":%.4f,\"output_tokens\":%lld,\"prompt_tokens\":%lld,"
               "\"preemptions\":%lld,\"kv_tokens\":%d,\"threads\":%d,\"outputs_hash\":\"%016llx\"}\n",
               R.n_requests, R.elapsed, R.req_per_s, R.output_tps, R.total_tps, R.ttft[0], R.ttft[1], R.ttft[2], R.itl[0],
               R.itl[1], R.itl[2], R.kv_utilization, R.prefix_hit_rate, R.n_output, R.n_prompt, R.n_preemptions,
               R.kv_tokens, R.n_threads, (unsigned long long)R.outputs_hash);
    } else {
        printf("%s: %d requests%s in %.2f s (%d threads; KV cache holds %d tokens)\n", c->ep.model_path, R.n_requests,
               c->rag ? " (RAG: shared context)" : "", R.elapsed, R.n_threads, R.kv_tokens);
        printf("  requests/s        %10.2f\n  output tokens/s   %10.2f\n  total tokens/s    %10.2f\n", R.req_per_s,
               R.output_tps, R.total_tps);
        printf("  TTFT ms           p50 %.1f  p90 %.1f  p99 %.1f\n", R.ttft[0], R.ttft[1], R.ttft[2]);
        printf("  ITL ms            p50 %.2f  p90 %.2f  p99 %.2f\n", R.itl[0], R.itl[1], R.itl[2]);
        printf("  KV utilisation    %10.1f%% of the tokens of used blocks\n", 100 * R.kv_utilization);
        printf("  prefix hit rate   %10.1f%% of prompt tokens\n", 100 * R.prefix_hit_rate);
        printf("  preemptions       %10lld\n", R.n_preemptions);
    }
    llm_engine_free(E);
    return 0;
}

int cli_cmd_profile(struct cli *c) {
    llm_engine *E = cli_engine(c);
    llm_set_profiling(E, 1);
    struct cli_serve_result R;
    cli_serve_run(E, c, &R);
    struct llm_profile prof;
    llm_get_profile(E, &prof);
    // the table's order: the attention rows (1..5), then the MLP rows (6..8)
    static const enum llm_prof_op rows[] = {
        LLM_PROF_EMBED, LLM_PROF_QKV, LLM_PROF_ROPE, LLM_PROF_KV_STORE, LLM_PROF_ATTN, LLM_PROF_O_PROJ,
        LLM_PROF_MLP_UP, LLM_PROF_SILU, LLM_PROF_MLP_DOWN, LLM_PROF_NORM, LLM_PROF_ADD, LLM_PROF_LOGITS,
        LLM_PROF_SAMPLING, LLM_PROF_SCHEDULING,
    };
    double sum = 0, attn = 0, mlp = 0;
    for (size_t i = 0; i < CLI_ARRAY_LEN(rows); i++) sum += prof.seconds[rows[i]];
    for (size_t i = 1; i <= 5; i++) attn += prof.seconds[rows[i]];
    for (size_t i = 6; i <= 8; i++) mlp += prof.seconds[rows[i]];
    double other = R.elapsed > sum ? R.elapsed - sum : 0.0;
    printf("%s: %d requests (%d prompt + %d output tokens each%s), %lld steps, %.3f s, %d threads\n\n",
           c->ep.model_path, R.n_requests, c->rag ? c->context_len + c->question_len : c->input_len, c->output_len,
           c->rag ? ", shared context" : "", prof.n_steps, R.elapsed, R.n_threads);
    printf("| module | ms | share |\n|---|---:|---:|\n");
    for (size_t i = 0; i < CLI_ARRAY_LEN(rows); i++)
        printf("| %s | %.1f | %.1f%% |\n", llm_prof_op_name(rows[i]), prof.seconds[rows[i]] * 1e3,
               100 * prof.seconds[rows[i]] / R.elapsed);
    printf("| other (engine API, bookkeeping) | %.1f | %.1f%% |\n", other * 1e3, 100 * other / R.elapsed);
    printf("| **total** | %.1f | 100%% |\n\n", R.elapsed * 1e3);
    printf("attention %.1f%%, MLP %.1f%%, sampling %.1f%%, scheduling %.1f%%\n", 100 * attn / R.elapsed,
           100 * mlp / R.elapsed, 100 * prof.seconds[LLM_PROF_SAMPLING] / R.elapsed,
           100 * prof.seconds[LLM_PROF_SCHEDULING] / R.elapsed);
    llm_set_profiling(E, 0);
    llm_engine_free(E);
    return 0;
}

// llm bench: prefill and decode speed of one sequence, as llama.cpp's llama-bench measures them
// (pp: a prompt of -p random tokens in one go; tg: -n tokens decoded one at a time after a
// BOS), medians over -r repetitions after a warm-up.
static int cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cli_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cli_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int cli_cmd_bench(struct cli *c) {
    int n_prompt = c->prompt ? (int)cli_parse_int("-p", c->prompt, 0, 1 << 20) : 512;
    int n_gen = c->n_predict_set ? c->n_predict : 128, reps = c->reps ? c->reps : 5;
    if (c->ep.max_model_len < n_prompt + n_gen + 1) c->ep.max_model_len = n_prompt + n_gen + 1;
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)CLI_MAX(n_prompt, 1));
    float *logits = malloc(sizeof(float) * (size_t)mi.n_vocab);
    double *pp = calloc((size_t)reps, sizeof(double)), *tg = calloc((size_t)reps, sizeof(double));
    if (!toks || !logits || !pp || !tg) cli_die("out of memory");
    uint64_t rng = 12345;
    for (int i = 0; i < n_prompt; i++) toks[i] = (int32_t)(cli_splitmix64(&rng) % (uint64_t)mi.n_vocab);
    if (n_prompt > 0 && mi.bos_id >= 0) toks[0] = mi.bos_id;
    int32_t first = mi.bos_id >= 0 ? mi.bos_id : 0;
    for (int r = -1; r < reps; r++) {   // r = -1: warm-up, not counted
        if (n_prompt > 0) {
            int seq = llm_seq_new(E);
            double t0 = cli_now();
            if (llm_seq_eval(E, seq, toks, n_prompt, logits, 0)) cli_die("%s", llm_last_error(E));
            if (r >= 0) pp[r] = n_prompt / (cli_now() - t0);
            llm_seq_free(E, seq);
        }
        if (n_gen > 0) {
            int seq = llm_seq_new(E);
            int32_t tok = first;
            double t0 = cli_now();
            for (int i = 0; i < n_gen; i++) {
                if (llm_seq_eval(E, seq, &tok, 1, logits, 0)) cli_die("%s", llm_last_error(E));
                tok = cli_argmax(logits, mi.n_vocab);
            }
            if (r >= 0) tg[r] = n_gen / (cli_now() - t0);
            llm_seq_free(E, seq);
        }
    }
    size_t bpt = mi.bytes_per_token;
    double pp_med = n_prompt ? cli_median(pp, reps) : 0, tg_med = n_gen ? cli_median(tg, reps) : 0;
    const char *bname = ei.backend_name;
    double gbps = 0;   // a GPU's copy bandwidth, for the roofline share of decode
    if (llm_measure_bandwidth(E, &gbps) != LLM_OK) gbps = 0;
    if (c->json) {
        printf("{\"model\":");
        cli_json_str(stdout, c->ep.model_path, strlen(c->ep.model_path));
        printf(",\"backend\":\"%s\",\"threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,\"pp_tps\":%.3f,"
               "\"tg_tps\":%.3f,\"bytes_per_token\":%zu,\"copy_gbps\":%.1f}\n", bname, ei.n_threads, n_prompt,
               n_gen, reps, pp_med, tg_med, bpt, gbps);
    } else {
        printf("%s: %s backend, %d threads, weights read per token %.1f MB\n", c->ep.model_path, bname,
               ei.n_threads, bpt / 1e6);
        if (n_prompt) printf("  pp%-5d %10.2f tokens/s (median of %d)\n", n_prompt, pp_med, reps);
        if (n_gen) printf("  tg%-5d %10.2f tokens/s (median of %d)\n", n_gen, tg_med, reps);
        if (n_gen && gbps > 0)
            printf("  device copy bandwidth %.1f GB/s: decode reads weights at %.0f%% of it\n", gbps,
                   100.0 * (double)bpt * tg_med / 1e9 / gbps);
    }
    free(toks);
    free(logits);
    free(pp);
    free(tg);
    llm_engine_free(E);
    return 0;
}
