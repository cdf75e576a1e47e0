// fuzz_request: request lines of `llm generate` (JSON Lines) through the program's own parser
// (cli/serve.c, Jansson) and the engine's scheduler, on a micro model (build/models/micro-q8_0.gguf,
// made by make models: random weights, a SentencePiece vocabulary of 300 tokens, 256 of them
// bytes, so generated text is full of partial and invalid UTF-8).
// Input: byte 0 sets the engine (bit 0: prefix caching; bit 1: priority scheduling; bits 2-3: the
// KV cache, from a few blocks, which forces preemptions, to plenty; bit 4: blocks of 8 or 16
// tokens; bit 5: steps of 8 or 64 tokens) and the parser (bits 6-7: llm generate's lines, 1: llm
// serve's /v1/completions bodies, 2: its /v1/chat/completions bodies, rendered with ChatML); the
// rest is up to 8 request lines (the first prompt of a body runs).
// Each input runs on fresh engines: the valid lines added with llm_add_request and stepped with
// llm_step (the text collected as it streams); the same through llm_generate (what llm generate
// prints); the first valid line alone, without and then with a stop string taken from its text.
// Invariants:
//   - the parser accepts a line or gives a message (valid UTF-8: it goes into a JSON line); a
//     server body it accepts has 1..64 choices and prompts of text or ids (chat: the rendered
//     conversation, valid UTF-8);
//   - a request the engine refuses has a message; every added request is reported finished
//     exactly once, within a bounded number of steps, with a finish reason, no more tokens than
//     max_tokens, ids in [0, n_vocab);
//   - streamed text is whole characters (valid UTF-8) and holds no stop string; the streamed
//     tokens and text are llm_generate's, and so is the finish reason;
//   - a stop string that falls across two pieces of the text cuts it exactly before its first
//     occurrence, with finish reason "stop", the tokens before it unchanged;
//   - the result line (cli_result_json, with its log-probabilities) is built.
// max_tokens is capped at 8 and the context at 64 tokens, to keep each input fast.
// Seeds: tests/fuzz/corpus/request/; dictionary: tests/fuzz/request.dict.
#define FUZZ_NAME "request"
#include "../../cli/args.c"
#include "../../cli/request.c"
#include "../../cli/tools.c"
#include "../../cli/serve.c"
#include "fuzz.h"

// The program's usage text and help (cli/main.c, not linked here: it has main).
const char cli_usage[] = "";
void cli_print_command_help(const char *cmd) { (void)cmd; }

#define FUZZ_MAX_LINES 8
#define FUZZ_MAX_TOKENS 8

static char fuzz_model[1024];

static llm_engine *fuzz_engine(unsigned cfg) {
    if (!fuzz_model[0]) snprintf(fuzz_model, sizeof(fuzz_model), "%s/micro-q8_0.gguf", fuzz_models_dir());
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = fuzz_model;
    p.n_threads = 1;
    p.max_model_len = 64;
    p.max_num_seqs = 4;
    p.enable_prefix_caching = cfg & 1;
    p.scheduling_policy = cfg & 2 ? LLM_SCHED_PRIORITY : LLM_SCHED_FCFS;
    p.block_size = cfg & 16 ? 16 : 8;
    p.max_num_batched_tokens = cfg & 32 ? 64 : 8;
    // KV cache: room for 64, 96 or 256 tokens, or the default (4 full contexts); a micro model's
    // token takes 2 (K, V) x 1 layer x 1 KV head x 16 x 2 bytes (f16) = 64 bytes
    static const size_t kv_tokens[4] = {64, 96, 256, 0};
    p.kv_cache_bytes = kv_tokens[(cfg >> 2) & 3] * 64;
    char err[512];
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    if (!E) fuzz_setup_failed("%s (make models writes it)", err);
    return E;
}


struct fuzz_run {              // what a request produced, streamed
    int id;                    // llm_add_request's, -1: refused
    struct cli_strbuf text;
    size_t piece_end[FUZZ_MAX_TOKENS + 2];   // where each non-empty new_text ended in text
    int n_pieces;
    int32_t tokens[FUZZ_MAX_TOKENS];
    int n_tokens;
    bool finished;
    enum llm_finish_reason reason;
};

// Adds the requests to E and steps until they finish, checking each output; run[i] gets what
// request i produced (the text as it streamed).
static void fuzz_stream(llm_engine *E, int m, const struct llm_prompt *pr, const struct llm_request_params *rp,
                        struct fuzz_run *run) {
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    for (int r = 0; r < m; r++) {
        memset(&run[r], 0, sizeof(run[r]));
        run[r].id = llm_add_request(E, &pr[r], &rp[r]);
        if (run[r].id < 0) {
            const char *msg = llm_last_error(E);
            FUZZ_CHECK(msg[0] && fuzz_utf8_check(msg, strlen(msg)) == strlen(msg), "a refused request's message");
        }
    }
    int budget = 1000;   // steps: a few requests of at most 64 tokens, even preempted many times
    while (llm_has_unfinished_requests(E)) {
        FUZZ_CHECK(--budget > 0, "requests unfinished after 1000 steps");
        const struct llm_output *out;
        int k = llm_step(E, &out);
        FUZZ_CHECK(k >= 0, "step: %s", llm_last_error(E));
        for (int j = 0; j < k; j++) {
            const struct llm_output *o = &out[j];
            int r = 0;
            while (r < m && run[r].id != o->request_id) r++;
            FUZZ_CHECK(r < m && run[r].id >= 0, "an output of request %d, which was not added", o->request_id);
            struct fuzz_run *x = &run[r];
            FUZZ_CHECK(!x->finished, "request %d: an output after it finished", x->id);
            FUZZ_CHECK(o->n_new_tokens >= 0 && x->n_tokens + o->n_new_tokens <= rp[r].max_tokens,
                       "request %d: %d tokens, max_tokens %d", x->id, x->n_tokens + o->n_new_tokens, rp[r].max_tokens);
            for (int t = 0; t < o->n_new_tokens; t++) {
                FUZZ_CHECK(o->new_tokens[t] >= 0 && o->new_tokens[t] < mi.n_vocab, "generated id %d", o->new_tokens[t]);
                x->tokens[x->n_tokens++] = o->new_tokens[t];
            }
            size_t bad = fuzz_utf8_check(o->new_text, (size_t)o->n_new_text);
            FUZZ_CHECK(bad == (size_t)o->n_new_text, "request %d: new text not UTF-8 at byte %zu", x->id, bad);
            if (o->n_new_text > 0) {
                cli_sb_put(&x->text, o->new_text, (size_t)o->n_new_text);
                FUZZ_CHECK(x->n_pieces < FUZZ_MAX_TOKENS + 2, "request %d: more texts than tokens", x->id);
                x->piece_end[x->n_pieces++] = x->text.n;
            }
            if (o->finished) {
                x->finished = true;
                x->reason = o->finish_reason;
                FUZZ_CHECK(o->finish_reason == LLM_FINISH_STOP || o->finish_reason == LLM_FINISH_LENGTH ||
                               o->finish_reason == LLM_FINISH_CONTEXT,
                           "request %d: finish reason %d", x->id, (int)o->finish_reason);
                FUZZ_CHECK(o->n_output_tokens == x->n_tokens, "request %d: %d output tokens, %d streamed", x->id,
                           o->n_output_tokens, x->n_tokens);
            }
        }
    }
    for (int r = 0; r < m; r++) {
        struct fuzz_run *x = &run[r];
        if (x->id < 0) continue;
        FUZZ_CHECK(x->finished, "request %d was not reported finished", x->id);
        for (int s = 0; s < rp[r].n_stop; s++)
            FUZZ_CHECK(!fuzz_memmem(x->text.p ? x->text.p : "", x->text.n, rp[r].stop[s], strlen(rp[r].stop[s])),
                       "request %d: stop string %d in the text", x->id, s);
    }
}

// The length of the UTF-8 character that ends at s[n - 1] (s[0..n) is whole characters).
static size_t fuzz_last_char(const char *s, size_t n) {
    size_t k = 1;
    while (k < n && k < 4 && ((unsigned char)s[n - k] & 0xC0) == 0x80) k++;
    return k;
}

// A stop string made to fall across two pieces of streamed text: one request alone, run without
// its stop strings, then again with a stop string made of the last character of one piece and
// the first of the next (choice: the input's last byte). Its text must then be the first run's up
// to the first occurrence of that string, finished with "stop", its tokens a prefix of the first
// run's. (Alone, on an engine without prefix caching: both runs compute the same.)
static void fuzz_stop_across(unsigned cfg, const struct llm_prompt *pr, const struct llm_request_params *rp0,
                             unsigned choice) {
    llm_engine *E = fuzz_engine(cfg & ~1u);
    struct llm_request_params rp = *rp0;
    rp.stop = NULL;
    rp.n_stop = 0;
    struct fuzz_run a, b;
    fuzz_stream(E, 1, pr, &rp, &a);
    if (a.id >= 0 && a.n_pieces >= 2) {
        int i = (int)(choice % (unsigned)(a.n_pieces - 1));   // pieces i and i + 1
        size_t at = a.piece_end[i], l = fuzz_last_char(a.text.p, at);
        size_t r = (size_t)cli_utf8_char(a.text.p + at, a.text.n - at);
        char stop[9];
        memcpy(stop, a.text.p + at - l, l + r);
        stop[l + r] = 0;
        if (strlen(stop) == l + r) {   // no NUL in it (a C string)
            const char *stops[1] = {stop};
            rp.stop = stops;
            rp.n_stop = 1;
            fuzz_stream(E, 1, pr, &rp, &b);
            const char *hit = fuzz_memmem(a.text.p, a.text.n, stop, l + r);
            size_t want = (size_t)(hit - a.text.p);
            FUZZ_CHECK(b.reason == LLM_FINISH_STOP && b.text.n == want && !memcmp(b.text.p ? b.text.p : "", a.text.p, want),
                       "a stop string across pieces: %zu bytes, finish reason %d; %zu bytes expected", b.text.n,
                       (int)b.reason, want);
            FUZZ_CHECK(b.n_tokens <= a.n_tokens && !memcmp(b.tokens, a.tokens, (size_t)b.n_tokens * sizeof(int32_t)),
                       "a stop string changed the tokens before it");
            free(b.text.p);
        }
    }
    free(a.text.p);
    llm_engine_free(E);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned cfg = data[0];
    const char *in = (const char *)data + 1;
    size_t len = size - 1;

    // the lines, parsed as llm generate parses them (cli_cmd_generate)
    struct cli_jreq q[FUZZ_MAX_LINES];
    int n = 0;
    for (size_t off = 0; off < len && n < FUZZ_MAX_LINES;) {
        const char *nl = memchr(in + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - in) : len, l = end - off;
        const char *line = in + off;
        off = end + 1;
        size_t t = 0;
        while (t < l && strchr(" \t\r", line[t])) t++;
        if (t == l) continue;
        enum cli_jreq_kind kind = (cfg >> 6) == 1 ? CLI_JREQ_COMPLETION : (cfg >> 6) == 2 ? CLI_JREQ_CHAT : CLI_JREQ_GENERATE;
        cli_jreq_init(&q[n], kind);
        bool ok = cli_jreq_parse(line, l, &q[n], "chatml");
        FUZZ_CHECK(ok == (q[n].err == NULL), "line %d: parsed %d, message %s", n, ok, q[n].err ? q[n].err : "none");
        if (!ok) {
            size_t m = strlen(q[n].err), bad = fuzz_utf8_check(q[n].err, m);
            FUZZ_CHECK(m > 0 && bad == m, "line %d: the message is empty or not UTF-8 at byte %zu", n, bad);
        } else if (kind != CLI_JREQ_GENERATE) {
            FUZZ_CHECK(q[n].n >= 1 && q[n].n <= 64 && q[n].n_prompts >= 1, "line %d: n %d, %d prompts", n, q[n].n, q[n].n_prompts);
            for (int k = 0; k < q[n].n_prompts; k++)
                FUZZ_CHECK(!q[n].prompts[k].text != !q[n].prompts[k].tokens, "line %d: prompt %d is text and ids, or neither", n, k);
            if (kind == CLI_JREQ_CHAT)
                FUZZ_CHECK(q[n].chat_text && q[n].prompts[0].text == q[n].chat_text &&
                           fuzz_utf8_check(q[n].chat_text, strlen(q[n].chat_text)) == strlen(q[n].chat_text),
                           "line %d: the rendered conversation is missing or not UTF-8", n);
            // the first prompt runs as llm generate's line would
            q[n].has_prompt = q[n].prompts[0].text != NULL;
            q[n].has_tokens = !q[n].has_prompt;
            q[n].prompt = q[n].prompts[0].text;
            q[n].tokens = NULL;
            if (q[n].has_tokens && q[n].prompts[0].n_tokens > 0) {
                if (!(q[n].tokens = malloc((size_t)q[n].prompts[0].n_tokens * sizeof(int32_t)))) abort();
                memcpy(q[n].tokens, q[n].prompts[0].tokens, (size_t)q[n].prompts[0].n_tokens * sizeof(int32_t));
            }
            q[n].n_tokens = q[n].prompts[0].n_tokens;
            if (q[n].p.max_tokens > FUZZ_MAX_TOKENS) q[n].p.max_tokens = FUZZ_MAX_TOKENS;
        } else {
            FUZZ_CHECK(q[n].has_prompt != q[n].has_tokens, "line %d: a prompt and tokens", n);
            if (q[n].p.max_tokens > FUZZ_MAX_TOKENS) q[n].p.max_tokens = FUZZ_MAX_TOKENS;
        }
        n++;
    }

    // 1. added and stepped, the text collected as it streams
    struct llm_prompt pr[FUZZ_MAX_LINES];
    struct llm_request_params rp[FUZZ_MAX_LINES];
    int map[FUZZ_MAX_LINES], m = 0;   // the valid lines, in order
    for (int i = 0; i < n; i++) {
        if (q[i].err) continue;
        pr[m] = q[i].has_prompt ? (struct llm_prompt){q[i].prompt, NULL, 0} : (struct llm_prompt){NULL, q[i].tokens, q[i].n_tokens};
        rp[m] = q[i].p;
        map[m++] = i;
    }
    struct fuzz_run run[FUZZ_MAX_LINES];
    llm_engine *E = fuzz_engine(cfg);
    fuzz_stream(E, m, pr, rp, run);
    llm_engine_free(E);

    // 2. the same lines through llm_generate, on a fresh engine (the prefix cache starts empty
    // again, so the steps are the same), and the result lines
    E = fuzz_engine(cfg);
    struct llm_result res[FUZZ_MAX_LINES];
    memset(res, 0, sizeof(res));
    FUZZ_CHECK(llm_generate(E, pr, m, rp, res) == LLM_OK, "generate: %s", llm_last_error(E));
    for (int r = 0; r < m; r++) {
        struct fuzz_run *x = &run[r];
        if (x->id < 0) {
            FUZZ_CHECK(res[r].finish_reason == LLM_FINISH_ERROR && res[r].error, "line %d: refused once only", map[r]);
        } else {
            const char *text = x->text.p ? x->text.p : "";
            FUZZ_CHECK(res[r].finish_reason == x->reason, "line %d: finish reasons %d and %d", map[r],
                       (int)res[r].finish_reason, (int)x->reason);
            FUZZ_CHECK(res[r].n_tokens == x->n_tokens &&
                       !memcmp(res[r].tokens, x->tokens, (size_t)x->n_tokens * sizeof(int32_t)),
                       "line %d: generated other tokens (%d, %d streamed)", map[r], res[r].n_tokens, x->n_tokens);
            FUZZ_CHECK((size_t)res[r].n_text == x->text.n && !memcmp(res[r].text, text, x->text.n) &&
                       !res[r].text[x->text.n], "line %d: the final text is not the streamed text", map[r]);
        }
        json_t *o = cli_result_json(E, map[r], &res[r], q[map[r]].p.logprobs, res[r].error);
        char *s = json_dumps(o, JSON_COMPACT);
        FUZZ_CHECK(s, "line %d: the result line cannot be written", map[r]);
        free(s);
        json_decref(o);
        free(x->text.p);
    }
    llm_results_free(res, m);
    llm_engine_free(E);

    // 3. a stop string across two pieces of the first valid line's text
    if (m > 0) fuzz_stop_across(cfg, &pr[0], &rp[0], data[size - 1]);
    for (int i = 0; i < n; i++) cli_jreq_free(&q[i]);
    return 0;
}
