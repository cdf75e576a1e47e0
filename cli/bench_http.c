// bench_http.c — llm bench --base-url URL: the serving benchmark's workload sent to an
// OpenAI-compatible server (llm serve, llama.cpp's llama-server, vLLM) over HTTP with libcurl:
// POST URL/v1/completions with the prompt as token ids, greedy, max_tokens = --output-len,
// ignore_eos (under --json-schema/--json-object: llama-server's json_schema field, --grammar: its
// grammar field, and no ignore_eos: the text ends with the grammar's), streamed; --max-concurrency
// clients at most, requests arriving as in the in-process benchmark. The model file (-m) gives
// the vocabulary the random prompts are drawn from (only its vocabulary is loaded). TTFT: from
// sending a request to its first chunk with text; ITL: between its chunks with text; output
// tokens: the usage the server reports, or the chunks when it reports none.
#include "cli.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cli_hreq {              // one request's measurements
    double t_send, t_first, t_last;
    int n_chunks, n_tokens, n_prompt;   // n_tokens, n_prompt: the server's usage (-1: none)
    float *itl;
    int n_itl, cap_itl;
    bool done, failed;
    char error[256];
    struct cli_strbuf buf;     // what has arrived and is not yet a whole event
};

struct cli_hbench {
    const struct cli *c;
    const struct cli_bench_workload *w;
    struct cli_hreq *r;
    char url[1024];
    json_t *schema;            // --json-schema, --json-object: the schema every request sends
    atomic_int next;
    double t0;
};

static void cli_hreq_itl(struct cli_hreq *q, float ms) {
    if (q->n_itl == q->cap_itl) {
        q->cap_itl = q->cap_itl ? 2 * q->cap_itl : 256;
        if (!(q->itl = realloc(q->itl, (size_t)q->cap_itl * sizeof(float)))) cli_die("out of memory");
    }
    q->itl[q->n_itl++] = ms;
}

// One server-sent event's data.
static void cli_hreq_event(struct cli_hreq *q, const char *data, size_t n) {
    if (n == 6 && !memcmp(data, "[DONE]", 6)) { q->done = true; return; }
    json_error_t je;
    json_t *v = json_loadb(data, n, 0, &je);
    if (!v) return;
    json_t *err = json_object_get(v, "error");
    if (err) {
        q->failed = true;
        const char *msg = json_string_value(json_object_get(err, "message"));
        snprintf(q->error, sizeof(q->error), "%s", msg ? msg : "an error event");
    }
    json_t *ch = json_array_get(json_object_get(v, "choices"), 0);
    const char *text = json_string_value(json_object_get(ch, "text"));
    if (text && text[0]) {
        double now = cli_now();
        if (q->n_chunks == 0) q->t_first = now;
        else cli_hreq_itl(q, (float)((now - q->t_last) * 1e3));
        q->t_last = now;
        q->n_chunks++;
    }
    json_t *u = json_object_get(v, "usage");
    if (json_is_object(u)) {
        q->n_tokens = (int)json_integer_value(json_object_get(u, "completion_tokens"));
        q->n_prompt = (int)json_integer_value(json_object_get(u, "prompt_tokens"));
    }
    json_decref(v);
}

static size_t cli_hreq_write(char *p, size_t size, size_t nmemb, void *cls) {
    struct cli_hreq *q = cls;
    size_t n = size * nmemb;
    cli_sb_put(&q->buf, p, n);
    // whole events: lines "data: ..." ended by a blank line (\n\n or \r\n\r\n)
    size_t start = 0;
    for (;;) {
        char *end = q->buf.p ? strstr(q->buf.p + start, "\n\n") : NULL;
        char *end2 = q->buf.p ? strstr(q->buf.p + start, "\r\n\r\n") : NULL;
        if (end2 && (!end || end2 < end)) end = end2;
        if (!end) break;
        const char *ev = q->buf.p + start;
        size_t len = (size_t)(end - ev);
        if (len >= 5 && !memcmp(ev, "data:", 5)) {
            ev += 5;
            len -= 5;
            while (len && *ev == ' ') { ev++; len--; }
            while (len && (ev[len - 1] == '\r' || ev[len - 1] == '\n')) len--;
            cli_hreq_event(q, ev, len);
        }
        start = (size_t)(end - q->buf.p) + (end == end2 ? 4 : 2);
    }
    if (start) {
        memmove(q->buf.p, q->buf.p + start, q->buf.n - start + 1);
        q->buf.n -= start;
    }
    return n;
}

static void *cli_hbench_worker(void *arg) {
    struct cli_hbench *B = arg;
    const struct cli *c = B->c;
    CURL *h = curl_easy_init();
    if (!h) cli_die("bench: cannot start libcurl");
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (c->api_key) {
        char auth[512];
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->api_key);
        hdr = curl_slist_append(hdr, auth);
    }
    for (;;) {
        int i = atomic_fetch_add(&B->next, 1);
        if (i >= B->w->n) break;
        double wait = B->t0 + B->w->arrival[i] - cli_now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        json_t *body = cli_jcheck(json_object()), *ids = cli_jcheck(json_array()), *so = cli_jcheck(json_object());
        const int32_t *prompt = B->w->prompts + (size_t)i * (size_t)B->w->in_len;
        for (int t = 0; t < B->w->in_len; t++) cli_jpush(ids, cli_json_int(prompt[t]));
        cli_jset(body, "prompt", ids);
        cli_jset(body, "max_tokens", cli_json_int(c->output_len));
        cli_jset(body, "temperature", cli_jcheck(json_real(0.0)));
        if (B->schema) cli_jset(body, "json_schema", json_incref(B->schema));
        else if (c->grammar) cli_jset(body, "grammar", cli_json_cstr(c->grammar));
        else cli_jset(body, "ignore_eos", cli_jcheck(json_true()));
        cli_jset(body, "stream", cli_jcheck(json_true()));
        cli_jset(so, "include_usage", cli_jcheck(json_true()));
        cli_jset(body, "stream_options", so);
        char *s = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!s) cli_die("out of memory");
        struct cli_hreq *q = &B->r[i];
        q->n_tokens = q->n_prompt = -1;
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, B->url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, s);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cli_hreq_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        q->t_send = cli_now();
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK) {
            q->failed = true;
            snprintf(q->error, sizeof(q->error), "%s", curl_easy_strerror(rc));
        } else if (status != 200) {
            q->failed = true;
            snprintf(q->error, sizeof(q->error), "HTTP %ld: %.200s", status, q->buf.p ? q->buf.p : "");
        } else if (q->n_chunks == 0 && !q->failed) {
            q->failed = true;
            snprintf(q->error, sizeof(q->error), "no text came back");
        }
        free(s);
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return NULL;
}

int cli_cmd_bench_http(struct cli *c) {
    c->ep.load = LLM_LOAD_VOCAB;   // the prompts' vocabulary, no weights
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    struct cli_bench_workload w;
    cli_bench_workload(c, mi.n_vocab, mi.bos_id, &w);
    llm_engine_free(E);
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) cli_die("bench: cannot start libcurl");
    struct cli_hbench B;
    memset(&B, 0, sizeof(B));
    B.c = c;
    B.w = &w;
    size_t ul = strlen(c->base_url);
    while (ul && c->base_url[ul - 1] == '/') ul--;
    if (ul >= 3 && !memcmp(c->base_url + ul - 3, "/v1", 3)) ul -= 3;   // the OpenAI client's form
    snprintf(B.url, sizeof(B.url), "%.*s/v1/completions", (int)ul, c->base_url);
    if (!(B.r = calloc((size_t)w.n, sizeof(*B.r)))) cli_die("out of memory");
    if (c->json_schema || c->json_object) {
        json_error_t je;
        B.schema = c->json_schema ? json_loads(c->json_schema, 0, &je) : json_pack("{s:s}", "type", "object");
        if (!B.schema) cli_die("--json-schema %s: %s", c->json_schema_file, je.text);
    }
    int nt = c->max_concurrency > 0 ? CLI_MIN(c->max_concurrency, w.n) : w.n;
    pthread_t *th = malloc((size_t)nt * sizeof(pthread_t));
    if (!th) cli_die("out of memory");
    B.t0 = cli_now();
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, cli_hbench_worker, &B)) cli_die("bench: cannot start %d client threads", nt);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    struct cli_serve_result R;
    memset(&R, 0, sizeof(R));
    R.elapsed = cli_now() - B.t0;
    R.http = true;
    R.max_concurrency = nt;
    R.n_requests = w.n;
    float *ttft = malloc((size_t)w.n * sizeof(float));
    int n_itl = 0, n_ok = 0;
    for (int i = 0; i < w.n; i++) n_itl += B.r[i].n_itl;
    float *itl = malloc((size_t)CLI_MAX(n_itl, 1) * sizeof(float));
    if (!ttft || !itl) cli_die("out of memory");
    n_itl = 0;
    const char *first_error = NULL;
    for (int i = 0; i < w.n; i++) {
        struct cli_hreq *q = &B.r[i];
        if (q->failed) {
            R.n_failed++;
            if (!first_error) first_error = q->error;
            continue;
        }
        ttft[n_ok++] = (float)((q->t_first - q->t_send) * 1e3);
        if (q->n_itl) memcpy(itl + n_itl, q->itl, (size_t)q->n_itl * sizeof(float));   // (one chunk: none, NULL)
        n_itl += q->n_itl;
        R.n_output += q->n_tokens >= 0 ? q->n_tokens : q->n_chunks;
        R.n_prompt += q->n_prompt >= 0 ? q->n_prompt : w.in_len;
    }
    R.req_per_s = n_ok / R.elapsed;
    R.output_tps = (double)R.n_output / R.elapsed;
    R.total_tps = (double)(R.n_output + R.n_prompt) / R.elapsed;
    const double ps[3] = {50, 90, 99};
    for (int i = 0; i < 3; i++) {
        R.ttft[i] = cli_percentile(ttft, n_ok, ps[i]);
        R.itl[i] = cli_percentile(itl, n_itl, ps[i]);
    }
    cli_bench_print(c, &R, B.url);
    if (first_error)
        fprintf(stderr, "llm: bench: %d of %d requests failed; the first: %s\n", R.n_failed, w.n, first_error);
    for (int i = 0; i < w.n; i++) {
        free(B.r[i].itl);
        free(B.r[i].buf.p);
    }
    free(B.r);
    json_decref(B.schema);
    free(th);
    free(ttft);
    free(itl);
    free(w.prompts);
    free(w.arrival);
    curl_global_cleanup();
    return R.n_failed ? 1 : 0;
}
