// serve.c — many requests through the engine's scheduler: llm generate (requests from a JSON
// Lines file, results in order), llm bench (one sequence's prefill and decode speed, or with
// the serving flags a serving benchmark), llm profile (time per module over a serving run).
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
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

// --- llm generate: requests from a JSON Lines file (parsed by request.c) ---

// A result line: index, prompt_tokens, tokens, text, finish_reason, ttft_ms, and logprobs (per
// generated position the top K as {id, token, logprob}) when asked for, error when it failed.
static json_t *cli_result_json(llm_engine *E, int index, const struct llm_result *r, int logprobs, const char *err) {
    json_t *o = cli_jcheck(json_object()), *a;
    cli_jset(o, "index", cli_json_int(index));
    cli_jset(o, "prompt_tokens", a = cli_jcheck(json_array()));
    for (int t = 0; t < r->n_prompt_tokens; t++) cli_jpush(a, cli_json_int(r->prompt_tokens[t]));
    cli_jset(o, "tokens", a = cli_jcheck(json_array()));
    for (int t = 0; t < r->n_tokens; t++) cli_jpush(a, cli_json_int(r->tokens[t]));
    cli_jset(o, "text", cli_json_bytes(r->text ? r->text : "", r->text ? (size_t)r->n_text : 0));
    if (err) cli_jset(o, "finish_reason", cli_json_cstr("error"));
    else cli_json_finish(o, r->finish_reason);
    cli_jset(o, "ttft_ms", cli_json_num(r->ttft_ms, 3));
    if (logprobs > 0 && r->logprobs) cli_jset(o, "logprobs", cli_json_logprobs(E, r->logprobs, r->n_tokens, logprobs));
    if (err) cli_jset(o, "error", cli_json_cstr(err));
    return o;
}

int cli_cmd_generate(struct cli *c) {
    if (!c->requests)
        cli_die("generate: give --requests FILE.jsonl (one JSON request per line; - reads standard input)");
    bool is_stdin = !strcmp(c->requests, "-");
    const char *name = is_stdin ? "standard input" : c->requests;
    FILE *f = is_stdin ? stdin : fopen(c->requests, "rb");
    if (!f) cli_die("cannot open '%s': %s", c->requests, strerror(errno));
    llm_engine *E = cli_engine(c);
    // one request per line that is not blank, within the limits of cli.h
    int n = 0, cap = 0;
    struct cli_jreq *q = NULL;
    struct cli_strbuf lb = {0};
    size_t total = 0;
    for (long long got, n_line = 1; (got = cli_getline(f, &lb, CLI_MAX_LINE)) != -1; n_line++) {
        if (got == -2) cli_die("'%s': line %lld is longer than %zu MiB, the most a request line may have", name, n_line,
                               CLI_MAX_LINE >> 20);
        if ((total += (size_t)got + 1) > CLI_MAX_INPUT)
            cli_die("'%s' holds more than %zu GiB, the most llm reads from it", name, CLI_MAX_INPUT >> 30);
        const char *line = lb.p;
        size_t t = 0, l = (size_t)got;
        while (t < l && strchr(" \t\r", line[t])) t++;
        if (t == l) continue;
        if (n == CLI_MAX_REQUESTS)
            cli_die("'%s' holds more than %d requests, the most llm generate runs at once", name, n);
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            if (!(q = realloc(q, (size_t)cap * sizeof(*q)))) cli_die("out of memory");
        }
        cli_jreq_init(&q[n], CLI_JREQ_GENERATE);
        q[n].p.sampling = c->sp;
        // -n -1: to the context's end
        q[n].p.max_tokens = !c->n_predict_set ? 16 : c->n_predict < 0 ? INT_MAX : c->n_predict;
        q[n].p.ignore_eos = c->ignore_eos;
        q[n].p.grammar = c->grammar;   // the flags' grammar, unless the line has its own
        cli_jreq_parse(line, l, &q[n], NULL);
        n++;
    }
    if (ferror(f)) cli_die("cannot read '%s': %s", name, strerror(errno));
    if (!is_stdin) fclose(f);
    free(lb.p);
    struct llm_prompt *pr = calloc((size_t)CLI_MAX(n, 1), sizeof(*pr));
    struct llm_request_params *rp = calloc((size_t)CLI_MAX(n, 1), sizeof(*rp));
    struct llm_result *res = calloc((size_t)CLI_MAX(n, 1), sizeof(*res));
    int *map = calloc((size_t)CLI_MAX(n, 1), sizeof(int));
    if (!pr || !rp || !res || !map) cli_die("out of memory");
    int m = 0;   // the valid lines go to the engine
    for (int i = 0; i < n; i++) {
        if (q[i].err) continue;
        pr[m] = q[i].has_prompt ? (struct llm_prompt){q[i].prompt, NULL, 0}
                                : (struct llm_prompt){NULL, q[i].tokens, q[i].n_tokens};
        rp[m] = q[i].p;
        map[m++] = i;
    }
    struct llm_result *rm = calloc((size_t)CLI_MAX(m, 1), sizeof(*rm));
    if (!rm) cli_die("out of memory");
    if (llm_generate(E, pr, m, rp, rm) != LLM_OK) fprintf(stderr, "llm: generate: %s\n", llm_last_error(E));
    for (int k = 0; k < m; k++) res[map[k]] = rm[k];
    for (int i = 0; i < n; i++)
        cli_json_print(stdout, cli_result_json(E, i, &res[i], q[i].p.logprobs, q[i].err ? q[i].err : res[i].error));
    llm_results_free(res, n);
    for (int i = 0; i < n; i++) cli_jreq_free(&q[i]);
    free(q);
    free(pr);
    free(rp);
    free(res);
    free(rm);
    free(map);
    llm_engine_free(E);
    return 0;
}

// --- llm bench (serving) and llm profile ---

static int cli_cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

// The p-th percentile (0..100) of v[0..n), linear between ranks; v gets sorted.
double cli_percentile(float *v, int n, double p) {
    if (n == 0) return 0.0;
    qsort(v, (size_t)n, sizeof(float), cli_cmp_float);
    double x = p / 100.0 * (n - 1);
    int i = (int)x;
    return i + 1 < n ? v[i] + (x - i) * (v[i + 1] - v[i]) : v[n - 1];
}

void cli_bench_workload(const struct cli *c, int n_vocab, int bos_id, struct cli_bench_workload *w) {
    int n = w->n = c->rag ? c->questions : c->num_prompts;
    int in_len = w->in_len = c->rag ? c->context_len + c->question_len : c->input_len;
    uint64_t rng = c->seed ^ 0x5851f42d4c957f2dull;
    w->prompts = malloc((size_t)n * (size_t)in_len * sizeof(int32_t));
    w->arrival = malloc((size_t)n * sizeof(double));
    if (!w->prompts || !w->arrival) cli_die("out of memory");
    // random ids past the first three (<unk>, <s>, </s> in SentencePiece vocabularies), from all
    // of a vocabulary that has no more (n_vocab >= 1)
    const int id_lo = n_vocab > 3 ? 3 : 0;
    for (int i = 0; i < n; i++) {
        int32_t *p = w->prompts + (size_t)i * (size_t)in_len;
        for (int t = 0; t < in_len; t++) p[t] = id_lo + (int32_t)(cli_splitmix64(&rng) % (uint64_t)(n_vocab - id_lo));
        if (c->rag && i > 0) memcpy(p, w->prompts, (size_t)c->context_len * sizeof(int32_t));   // the shared context
        if (bos_id >= 0) p[0] = bos_id;
    }
    double t = 0.0;
    for (int i = 0; i < n; i++) {
        if (c->request_rate > 0)
            t += -log(1.0 - (double)(cli_splitmix64(&rng) >> 11) / 9007199254740992.0) / c->request_rate;
        w->arrival[i] = c->request_rate > 0 ? t : 0.0;
    }
}

// Sleeps s seconds (s > 0).
static void cli_serve_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// The progress bar of a serving run on standard error: done of n requests.
static void cli_serve_bar(int done, int n) {
    int w = 40, f = done * w / n;
    fprintf(stderr, "\r[%.*s%*s] %d/%d requests", f, "========================================", w - f, "", done, n);
}

// Runs the benchmark's requests: random prompts (or a shared context + questions), greedy,
// exactly output_len tokens each, all at once or arriving at request_rate per second (Poisson).
static void cli_serve_run(llm_engine *E, const struct cli *c, struct cli_serve_result *R) {
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    struct cli_bench_workload w;
    cli_bench_workload(c, mi.n_vocab, mi.bos_id, &w);
    int n = w.n, in_len = w.in_len;
    if (in_len + c->output_len > ei.max_model_len)
        cli_die("bench: prompts of %d tokens + %d generated exceed the context length %d (-c)", in_len, c->output_len,
                ei.max_model_len);
    int32_t *prompts = w.prompts;
    double *arrival = w.arrival;
    int *ids = malloc((size_t)n * sizeof(int));
    float *ttft = malloc((size_t)n * sizeof(float));
    uint64_t *hashes = malloc((size_t)n * sizeof(uint64_t));   // of each request's output tokens
    if (!ids || !ttft || !hashes) cli_die("out of memory");
    for (int i = 0; i < n; i++) hashes[i] = CLI_HASH_INIT;
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = c->output_len;
    // under a grammar the text ends where the grammar's does (llama-server ends it there too,
    // with the end-of-text token its grammar then allows: ignore_eos would forbid it)
    rp.grammar = c->grammar;
    rp.ignore_eos = !c->grammar;
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
            if (wait > 0) cli_serve_sleep(wait);
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
            for (int x = 0; x < out[j].n_new_tokens; x++)
                hashes[i] = cli_hash_u32(hashes[i], (uint32_t)out[j].new_tokens[x]);
            if (!out[j].finished) continue;
            if (out[j].finish_reason == LLM_FINISH_ERROR) cli_die("bench: %s", llm_last_error(E));
            ttft[i] = (float)out[j].ttft_ms;
            R->n_output += out[j].n_output_tokens;
            R->n_prompt += out[j].n_prompt_tokens;
            for (int x = 0; x + 1 < out[j].n_output_tokens; x++) {
                if (n_itl == cap_itl && !(itl = realloc(itl, (size_t)(cap_itl *= 2) * sizeof(float))))
                    cli_die("out of memory");
                itl[n_itl++] = out[j].itl_ms[x];
            }
            done++;
        }
        if (bar) cli_serve_bar(done, n);
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
    for (int i = 0; i < 3; i++) {
        R->ttft[i] = cli_percentile(ttft, n, ps[i]);
        R->itl[i] = cli_percentile(itl, n_itl, ps[i]);
    }
    R->kv_utilization = util_n ? util / util_n : 0.0;
    R->prefix_hit_rate = st.prefix_query_tokens ? (double)st.prefix_hit_tokens / (double)st.prefix_query_tokens : 0.0;
    R->n_preemptions = st.n_preemptions;
    R->stats = st;
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
    cli_bench_print(c, &R, c->ep.model_path);
    llm_engine_free(E);
    return 0;
}

// What the grammar cost (bench --grammar, --json-schema, --json-object): tokens chosen under it,
// the milliseconds per token spent on it (masks, checks, following the text), its share of the
// run's time, the masks computed and those taken from the cache.
static double cli_grammar_ms(const struct llm_engine_stats *s) {
    return s->grammar_tokens ? 1e3 * s->grammar_seconds / (double)s->grammar_tokens : 0.0;
}

static json_t *cli_grammar_json(const struct cli_serve_result *R) {
    const struct llm_engine_stats *s = &R->stats;
    json_t *g = cli_jcheck(json_object());
    cli_jset(g, "tokens", cli_json_int(s->grammar_tokens));
    cli_jset(g, "ms_per_token", cli_json_num(cli_grammar_ms(s), 5));
    cli_jset(g, "seconds", cli_json_num(s->grammar_seconds, 4));
    cli_jset(g, "share", cli_json_num(R->elapsed > 0 ? s->grammar_seconds / R->elapsed : 0.0, 4));
    cli_jset(g, "masks", cli_json_int(s->grammar_masks));
    cli_jset(g, "mask_hits", cli_json_int(s->grammar_mask_hits));
    return g;
}

// What the serving benchmark measured: JSON (--json) or lines for people. HTTP runs (R->http) have
// no engine figures (KV, prefix cache, preemptions, outputs hash) and count failed requests.
void cli_bench_print(const struct cli *c, const struct cli_serve_result *Rp, const char *what) {
    struct cli_serve_result R = *Rp;
    if (c->json) {
        json_t *o = cli_jcheck(json_object()), *t = cli_jcheck(json_object()), *l = cli_jcheck(json_object());
        cli_jset(o, "requests", cli_json_int(R.n_requests));
        cli_jset(o, "elapsed_s", cli_json_num(R.elapsed, 4));
        cli_jset(o, "request_throughput", cli_json_num(R.req_per_s, 4));
        cli_jset(o, "output_tps", cli_json_num(R.output_tps, 3));
        cli_jset(o, "total_tps", cli_json_num(R.total_tps, 3));
        static const char *const pct[3] = {"p50", "p90", "p99"};
        for (int i = 0; i < 3; i++) {
            cli_jset(t, pct[i], cli_json_num(R.ttft[i], 3));
            cli_jset(l, pct[i], cli_json_num(R.itl[i], 3));
        }
        cli_jset(o, "ttft_ms", t);
        cli_jset(o, "itl_ms", l);
        cli_jset(o, "output_tokens", cli_json_int(R.n_output));
        cli_jset(o, "prompt_tokens", cli_json_int(R.n_prompt));
        if (R.http) {
            cli_jset(o, "failed", cli_json_int(R.n_failed));
            cli_jset(o, "max_concurrency", cli_json_int(R.max_concurrency));
        } else {
            cli_jset(o, "kv_utilization", cli_json_num(R.kv_utilization, 4));
            cli_jset(o, "prefix_hit_rate", cli_json_num(R.prefix_hit_rate, 4));
            cli_jset(o, "preemptions", cli_json_int(R.n_preemptions));
            cli_jset(o, "kv_tokens", cli_json_int(R.kv_tokens));
            cli_jset(o, "threads", cli_json_int(R.n_threads));
            char hash[17];
            snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)R.outputs_hash);
            cli_jset(o, "outputs_hash", cli_json_cstr(hash));
            if (cli_spec_used(&R.stats)) cli_jset(o, "speculation", cli_spec_json(&R.stats));
            if (c->grammar) cli_jset(o, "grammar", cli_grammar_json(&R));
        }
        cli_json_print(stdout, o);
        return;
    }
    if (R.http)
        printf("%s: %d requests%s in %.2f s over HTTP (at most %d at once; %d failed)\n", what, R.n_requests,
               c->rag ? " (RAG: shared context)" : "", R.elapsed, R.max_concurrency, R.n_failed);
    else
        printf("%s: %d requests%s in %.2f s (%d threads; KV cache holds %d tokens)\n", what, R.n_requests,
               c->rag ? " (RAG: shared context)" : "", R.elapsed, R.n_threads, R.kv_tokens);
    printf("  requests/s        %10.2f\n  output tokens/s   %10.2f\n  total tokens/s    %10.2f\n", R.req_per_s,
           R.output_tps, R.total_tps);
    printf("  TTFT ms           p50 %.1f  p90 %.1f  p99 %.1f\n", R.ttft[0], R.ttft[1], R.ttft[2]);
    printf("  ITL ms            p50 %.2f  p90 %.2f  p99 %.2f\n", R.itl[0], R.itl[1], R.itl[2]);
    if (R.http) return;
    printf("  KV utilisation    %10.1f%% of the tokens of used blocks\n", 100 * R.kv_utilization);
    printf("  prefix hit rate   %10.1f%% of prompt tokens\n", 100 * R.prefix_hit_rate);
    printf("  preemptions       %10lld\n", R.n_preemptions);
    if (cli_spec_used(&R.stats)) cli_spec_print(stdout, "  ", &R.stats);
    if (c->grammar) {
        const struct llm_engine_stats *s = &R.stats;
        long long n = s->grammar_masks + s->grammar_mask_hits;
        printf("  grammar           %.4f ms/token (%lld tokens), %.1f%% of the run; masks %lld, %.1f%% from the "
               "cache\n", cli_grammar_ms(s), s->grammar_tokens, 100 * s->grammar_seconds / R.elapsed, n,
               n ? 100.0 * (double)s->grammar_mask_hits / (double)n : 0.0);
    }
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
    int in_len = c->rag ? c->context_len + c->question_len : c->input_len;
    if (c->json) {
        // one object: the run, then per module its time and its share of the elapsed time
        json_t *o = cli_jcheck(json_object()), *mods = cli_jcheck(json_array()), *tot = cli_jcheck(json_object());
        cli_jset(o, "model", cli_json_cstr(c->ep.model_path));
        cli_jset(o, "requests", cli_json_int(R.n_requests));
        cli_jset(o, "prompt_tokens_each", cli_json_int(in_len));
        cli_jset(o, "output_tokens_each", cli_json_int(c->output_len));
        cli_jset(o, "shared_context", cli_jcheck(json_boolean(c->rag)));
        cli_jset(o, "steps", cli_json_int(prof.n_steps));
        cli_jset(o, "threads", cli_json_int(R.n_threads));
        for (size_t i = 0; i <= CLI_ARRAY_LEN(rows); i++) {
            double sec = i < CLI_ARRAY_LEN(rows) ? prof.seconds[rows[i]] : other;
            json_t *m = cli_jcheck(json_object());
            cli_jset(m, "module", cli_json_cstr(i < CLI_ARRAY_LEN(rows) ? llm_prof_op_name(rows[i]) : "other"));
            cli_jset(m, "ms", cli_json_num(sec * 1e3, 3));
            cli_jset(m, "share", cli_json_num(sec / R.elapsed, 4));
            cli_jpush(mods, m);
        }
        cli_jset(o, "modules", mods);
        // the groups of the text's last line, and the whole run
        const char *const gname[5] = {"attention", "mlp", "sampling", "scheduling", "total"};
        const double gsec[5] = {attn, mlp, prof.seconds[LLM_PROF_SAMPLING], prof.seconds[LLM_PROF_SCHEDULING],
                                R.elapsed};
        for (int g = 0; g < 5; g++) {
            json_t *x = cli_jcheck(json_object());
            cli_jset(x, "ms", cli_json_num(gsec[g] * 1e3, 3));
            cli_jset(x, "share", cli_json_num(gsec[g] / R.elapsed, 4));
            cli_jset(tot, gname[g], x);
        }
        cli_jset(o, "totals", tot);
        if (cli_spec_used(&R.stats)) cli_jset(o, "speculation", cli_spec_json(&R.stats));
        cli_json_print(stdout, o);
        llm_set_profiling(E, 0);
        llm_engine_free(E);
        return 0;
    }
    printf("%s: %d requests (%d prompt + %d output tokens each%s), %lld steps, %.3f s, %d threads\n\n",
           c->ep.model_path, R.n_requests, in_len, c->output_len,
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
    if (cli_spec_used(&R.stats)) cli_spec_print(stdout, "", &R.stats);
    llm_set_profiling(E, 0);
    llm_engine_free(E);
    return 0;
}

// --- llm bench: one sequence ---

static int cli_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cli_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cli_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// llm bench --peak: the int8 multiply-adds a second the engine's device reaches (llm_measure_compute).
static int cli_bench_peak(struct cli *c) {
    llm_engine *E = cli_engine(c);
    struct llm_engine_info ei;
    llm_get_engine_info(E, &ei);
    double g = 0;
    if (llm_measure_compute(E, &g) != LLM_OK) cli_die("%s", llm_last_error(E));
    if (c->json) {
        json_t *o = cli_jcheck(json_object());
        cli_jset(o, "backend", cli_json_cstr(ei.backend_name));
        cli_jset(o, "threads", cli_json_int(ei.n_threads));
        cli_jset(o, "peak_gmacs", cli_json_num(g, 1));
        cli_json_print(stdout, o);
    } else {
        printf("int8 peak: %.1f G multiply-adds/s (%s backend, %d thread%s: independent chains of its int8 dot "
               "instruction)\n", g, ei.backend_name, ei.n_threads, ei.n_threads == 1 ? "" : "s");
    }
    llm_engine_free(E);
    return 0;
}

// llm bench: prefill and decode speed of one sequence, as llama.cpp's llama-bench measures them
// (pp: a prompt of -p random tokens in one go; tg: -n tokens decoded one at a time after a
// BOS), medians over -r repetitions after a warm-up.
int cli_cmd_bench(struct cli *c) {
    if (c->peak) return cli_bench_peak(c);
    int n_prompt = c->prompt ? (int)cli_parse_int("-p", c->prompt, 0, 1 << 20) : 512;
    int n_gen = c->n_predict_set ? c->n_predict : 128, reps = c->reps ? c->reps : 5;
    const int depth = c->depth;   // -d: a context of that many tokens first (not timed)
    if (c->ep.max_model_len < depth + n_prompt + n_gen + 1) c->ep.max_model_len = depth + n_prompt + n_gen + 1;
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)CLI_MAX(n_prompt + depth, 1));
    float *logits = malloc(sizeof(float) * (size_t)mi.n_vocab);
    double *pp = calloc((size_t)reps, sizeof(double)), *tg = calloc((size_t)reps, sizeof(double));
    if (!toks || !logits || !pp || !tg) cli_die("out of memory");
    uint64_t rng = 12345;
    for (int i = 0; i < n_prompt + depth; i++) toks[i] = (int32_t)(cli_splitmix64(&rng) % (uint64_t)mi.n_vocab);
    if (n_prompt + depth > 0 && mi.bos_id >= 0) toks[0] = mi.bos_id;
    int32_t first = mi.bos_id >= 0 ? mi.bos_id : 0;
    for (int r = -1; r < reps; r++) {   // r = -1: warm-up, not counted
        if (n_prompt > 0) {
            int seq = llm_seq_new(E);
            if (depth && llm_seq_eval(E, seq, toks, depth, logits, 0)) cli_die("%s", llm_last_error(E));
            double t0 = cli_now();
            if (llm_seq_eval(E, seq, toks + depth, n_prompt, logits, 0)) cli_die("%s", llm_last_error(E));
            if (r >= 0) pp[r] = n_prompt / (cli_now() - t0);
            llm_seq_free(E, seq);
        }
        if (n_gen > 0) {
            int seq = llm_seq_new(E);
            int32_t tok = first;
            if (depth) {
                if (llm_seq_eval(E, seq, toks, depth, logits, 0)) cli_die("%s", llm_last_error(E));
                tok = cli_argmax(logits, mi.n_vocab);
            }
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
    double peak = 0;   // the int8 compute peak, for prefill's share of it
    if (!n_prompt || llm_measure_compute(E, &peak) != LLM_OK) peak = 0;
    const double pp_gmacs = pp_med * (double)mi.macs_per_token / 1e9;
    if (c->json) {
        json_t *o = cli_jcheck(json_object());
        cli_jset(o, "model", cli_json_cstr(c->ep.model_path));
        cli_jset(o, "backend", cli_json_cstr(bname));
        cli_jset(o, "device", cli_json_cstr(ei.device_name ? ei.device_name : ""));
        cli_jset(o, "threads", cli_json_int(ei.n_threads));
        cli_jset(o, "n_prompt", cli_json_int(n_prompt));
        cli_jset(o, "n_gen", cli_json_int(n_gen));
        cli_jset(o, "depth", cli_json_int(depth));
        cli_jset(o, "reps", cli_json_int(reps));
        cli_jset(o, "pp_tps", cli_json_num(pp_med, 3));
        cli_jset(o, "tg_tps", cli_json_num(tg_med, 3));
        cli_jset(o, "bytes_per_token", cli_json_int((long long)bpt));
        cli_jset(o, "copy_gbps", cli_json_num(gbps, 1));
        cli_jset(o, "macs_per_token", cli_json_int((long long)mi.macs_per_token));
        cli_jset(o, "pp_gmacs", cli_json_num(pp_gmacs, 1));
        cli_jset(o, "peak_gmacs", cli_json_num(peak, 1));
        cli_json_print(stdout, o);
    } else {
        printf("%s: %s backend, %d threads, weights read per token %.1f MB\n", c->ep.model_path, bname,
               ei.n_threads, bpt / 1e6);
        char at[32] = "";   // (llama-bench's label for a depth)
        if (depth) snprintf(at, sizeof(at), " @ d%d", depth);
        if (n_prompt) printf("  pp%-5d%s %10.2f tokens/s (median of %d)\n", n_prompt, at, pp_med, reps);
        if (n_prompt && peak > 0)
            printf("  prefill multiplies %.1f G multiply-adds/s: %.0f%% of the int8 peak measured now (%.1f G/s)\n",
                   pp_gmacs, 100.0 * pp_gmacs / peak, peak);
        if (n_gen) printf("  tg%-5d%s %10.2f tokens/s (median of %d)\n", n_gen, at, tg_med, reps);
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
