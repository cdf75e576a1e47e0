// The rules llm.h states for every function, checked through the public API: truncation (the
// whole length returned; what fits written, NUL-terminated; a text stream consumes nothing that
// does not fit), errors recorded in the engine, parameters refused before anything loads,
// profiling counters, engines opened for their metadata only, and llm_generate on a busy engine.
#include "../llm.c"
#include "test.h"

static const char *model(const char *name) {
    static char path[512];
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, name);
    return path;
}

static llm_engine *open_model(const char *name, enum llm_load_mode load) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = model(name);
    p.n_threads = 2;
    p.max_model_len = 128;
    p.load = load;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "%s: %s", name, err);
    return E;
}

static void test_truncation(llm_engine *E) {
    int32_t ids[64];
    const char *text = "Hello there, general truncation";
    int n = llm_tokenize(E, text, strlen(text), 0, ids, 64);
    EXPECT(n > 3 && n <= 64, "tokenize: %d", n);
    char full[256], small[5];
    int len = llm_detokenize(E, ids, n, 0, full, sizeof(full));
    memset(small, 'x', sizeof(small));
    int cut = llm_detokenize(E, ids, n, 0, small, sizeof(small));
    EXPECT(len > 5 && cut == len && small[4] == 0 && !strncmp(small, full, 4),
           "detokenize into 5 bytes: returned %d of %d, '%.5s'", cut, len, small);
    EXPECT(llm_detokenize(E, ids, n, 0, NULL, 0) == len, "detokenize's length alone");

    struct llm_chat_message m = {"user", "a message longer than the buffer"};
    char chat[256], chat5[5];
    int cl = llm_chat_apply("chatml", &m, 1, 1, chat, sizeof(chat));
    memset(chat5, 'x', sizeof(chat5));
    EXPECT(cl > 5 && llm_chat_apply("chatml", &m, 1, 1, chat5, sizeof(chat5)) == cl && chat5[4] == 0 &&
           !strncmp(chat5, chat, 4), "chat_apply into 5 bytes: '%.5s'", chat5);

    char piece[2];
    int pl = llm_token_to_piece(E, ids[1], piece, sizeof(piece));
    EXPECT(pl >= 0 && piece[pl < 1 ? pl : 1] == 0, "token_to_piece: %d, no NUL", pl);

    // a stream: a token whose text does not fit is neither written nor consumed
    struct llm_text_stream st = {0}, before;
    char out[64], tiny[1] = {'x'};
    int k = 0;
    for (int i = 0; i < n && k <= 0; i++) {
        before = st;
        k = llm_text_stream_push(E, &st, ids[i], 0, tiny, sizeof(tiny));
        if (k > 0) {
            EXPECT(!memcmp(&st, &before, sizeof(st)) && tiny[0] == 'x', "a push that did not fit changed the stream");
            EXPECT(llm_text_stream_push(E, &st, ids[i], 0, out, sizeof(out)) == k, "the same push with room");
        }
    }
    EXPECT(k > 0, "no token of the text produced text");
    // flush: what fits, NUL-terminated; the stream keeps what was not written
    struct llm_text_stream pend = {{0xE2, 0x82}, 2, 1};
    char two[2] = {'x', 'x'};
    int fl = llm_text_stream_flush(&pend, two, sizeof(two));
    EXPECT(fl == 6 && two[1] == 0 && (unsigned char)two[0] == 0xEF && pend.n_pending == 2,
           "flush into 2 bytes: %d, pending %d", fl, pend.n_pending);
    EXPECT(llm_text_stream_flush(&pend, out, sizeof(out)) == 6 && !strcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD") &&
           pend.n_pending == 0, "flush with room");
}

static void test_errors(llm_engine *E) {
    EXPECT(llm_seq_len(E, 4242) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG && strstr(llm_last_error(E), "4242"),
           "seq_len of no sequence: %d, %s", (int)llm_last_status(E), llm_last_error(E));
    int32_t bad = 1 << 30;
    EXPECT(llm_detokenize(E, &bad, 1, 0, NULL, 0) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG,
           "detokenize of an id out of range: %s", llm_last_error(E));
    struct llm_meta meta;
    EXPECT(llm_model_meta(E, -1, &meta) == LLM_ERR_INVALID_ARG && llm_last_status(E) == LLM_ERR_INVALID_ARG,
           "metadata index -1");

    struct llm_sampling_params sp = llm_sampling_params_default();
    llm_sampler *ok = llm_sampler_create(&sp, 16);
    EXPECT(ok != NULL, "default sampler");
    llm_sampler_free(ok);
    struct { const char *what; struct llm_sampling_params p; } bad_p[6];
    for (int i = 0; i < 6; i++) bad_p[i].p = sp;
    bad_p[0].what = "top_k -5", bad_p[0].p.top_k = -5;
    bad_p[1].what = "temperature inf", bad_p[1].p.temperature = INFINITY;
    bad_p[2].what = "frequency_penalty NaN", bad_p[2].p.frequency_penalty = NAN;
    bad_p[3].what = "repeat_penalty 0", bad_p[3].p.repeat_penalty = 0;
    bad_p[4].what = "top_p 1.5", bad_p[4].p.top_p = 1.5f;
    bad_p[5].what = "presence_penalty inf", bad_p[5].p.presence_penalty = -INFINITY;
    for (int i = 0; i < 6; i++) {
        llm_sampler *s = llm_sampler_create(&bad_p[i].p, 16);
        EXPECT(!s, "sampler accepted %s", bad_p[i].what);
        llm_sampler_free(s);
    }

    // parameters are checked before the file is even opened
    const int lens[] = {-1, INT_MAX, (1 << 24) + 1};
    for (int i = 0; i < 3; i++) {
        struct llm_engine_params p = llm_engine_params_default();
        char err[256] = "";
        p.model_path = "/nonexistent/model.gguf";
        p.max_model_len = lens[i];
        llm_engine *X = llm_engine_create(&p, err, sizeof(err));
        EXPECT(!X && strstr(err, "max_model_len"), "max_model_len %d: %s", lens[i], err);
        llm_engine_free(X);
    }
    const float utils[] = {-0.5f, 1.5f, NAN};
    for (int i = 0; i < 3; i++) {
        struct llm_engine_params p = llm_engine_params_default();
        char err[256] = "";
        p.model_path = "/nonexistent/model.gguf";
        p.gpu_memory_utilization = utils[i];
        llm_engine *X = llm_engine_create(&p, err, sizeof(err));
        EXPECT(!X && strstr(err, "gpu_memory_utilization"), "gpu_memory_utilization %g: %s", (double)utils[i], err);
        llm_engine_free(X);
    }
}

// Token ids -1 and n_vocab, wherever ids enter: refused with LLM_ERR_INVALID_ARG and a message
// naming the id, nothing queued; the functions that only look at an id say "none" (under ASan:
// nothing read outside the vocabulary or the embedding table).
static void test_token_ids_out_of_range(llm_engine *E) {
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    const int32_t bad_ids[2] = {-1, mi.n_vocab};
    for (int b = 0; b < 2; b++) {
        const int32_t bad = bad_ids[b];
        char want[32], buf[16];
        snprintf(want, sizeof(want), "token id %d", (int)bad);
        int32_t prompt[3] = {1, bad, 2};
        struct llm_prompt pr = {NULL, prompt, 3};
        struct llm_request_params rp = llm_request_params_default();
        rp.max_tokens = 2;
        EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG &&
               strstr(llm_last_error(E), want), "add_request, prompt id %d: %s", (int)bad, llm_last_error(E));
        int32_t good[2] = {1, 2};
        struct llm_prompt ok_pr = {NULL, good, 2};
        rp.stop_token_ids = &bad;
        rp.n_stop_token_ids = 1;
        EXPECT(llm_add_request(E, &ok_pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG &&
               strstr(llm_last_error(E), "stop_token_ids") && strstr(llm_last_error(E), want),
               "add_request, stop token id %d: %s", (int)bad, llm_last_error(E));
        EXPECT(!llm_has_unfinished_requests(E), "a refused request was queued");
        struct llm_result res;
        EXPECT(llm_generate(E, &pr, 1, NULL, &res) == LLM_OK && res.finish_reason == LLM_FINISH_ERROR && res.error &&
               strstr(res.error, want), "generate, prompt id %d: %s", (int)bad, res.error ? res.error : "(no error)");
        llm_results_free(&res, 1);
        int seq = llm_seq_new(E);
        EXPECT(llm_seq_eval(E, seq, prompt, 3, NULL, 0) == LLM_ERR_INVALID_ARG && strstr(llm_last_error(E), want) &&
               llm_seq_len(E, seq) == 0, "seq_eval, id %d: %s", (int)bad, llm_last_error(E));
        llm_seq_free(E, seq);
        EXPECT(llm_token_to_piece(E, bad, buf, sizeof(buf)) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG,
               "token_to_piece(%d)", (int)bad);
        EXPECT(llm_detokenize(E, prompt, 3, 0, buf, sizeof(buf)) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG,
               "detokenize with id %d", (int)bad);
        struct llm_text_stream ts = {0};
        EXPECT(llm_text_stream_push(E, &ts, bad, 0, buf, sizeof(buf)) == 0 && ts.n_tokens == 0 && ts.n_pending == 0,
               "text_stream_push(%d) added something", (int)bad);
        EXPECT(!llm_token_is_eog(E, bad) && !llm_token_is_control(E, bad), "id %d is an end of generation or control",
               (int)bad);
    }
}

static void test_profile_and_generate(llm_engine *E) {
    struct llm_prompt pr[2] = {{.text = "one two"}, {.text = "three"}};
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 6;
    struct llm_result res[2];
    struct llm_profile prof;

    EXPECT(llm_generate(E, pr, 2, NULL, res) == LLM_OK, "generate: %s", llm_last_error(E));   // not profiled
    llm_results_free(res, 2);
    llm_set_profiling(E, 1);
    llm_get_profile(E, &prof);
    EXPECT(prof.n_steps == 0 && prof.seconds[LLM_PROF_QKV] == 0, "profiling starts from zero: %lld steps", prof.n_steps);
    struct llm_request_params two[2] = {rp, rp};
    EXPECT(llm_generate(E, pr, 2, two, res) == LLM_OK, "profiled generate: %s", llm_last_error(E));
    for (int i = 0; i < 2; i++)
        EXPECT(res[i].finish_reason == LLM_FINISH_LENGTH && res[i].n_tokens == 6 && res[i].n_itl == 5,
               "result %d: %s, %d tokens, %d latencies", i, llm_finish_reason_str(res[i].finish_reason), res[i].n_tokens,
               res[i].n_itl);
    llm_results_free(res, 2);
    int seq = llm_seq_new(E);
    int32_t toks[3] = {1, 2, 3};
    EXPECT(llm_seq_eval(E, seq, toks, 3, NULL, 0) == LLM_OK, "seq_eval");
    llm_seq_free(E, seq);
    llm_set_profiling(E, 0);
    struct llm_engine_stats stats;
    llm_get_stats(E, &stats);
    llm_get_profile(E, &prof);
    // 6 tokens each, the prompts prefilled in the first step: 6 steps, and the seq_eval's one
    EXPECT(prof.n_steps == 7, "profiled steps: %lld (llm_step's 6 + llm_seq_eval's 1)", prof.n_steps);
    EXPECT(prof.seconds[LLM_PROF_QKV] > 0 && prof.seconds[LLM_PROF_ATTN] > 0 && prof.seconds[LLM_PROF_SAMPLING] > 0,
           "a stopped profile keeps its times");
    EXPECT(llm_generate(E, pr, 1, NULL, res) == LLM_OK, "generate after profiling");
    llm_results_free(res, 1);
    struct llm_profile after;
    llm_get_profile(E, &after);
    EXPECT(after.n_steps == prof.n_steps, "steps counted while profiling was off: %lld", after.n_steps);

    // llm_generate refuses a busy engine (it would lose the other requests' outputs)
    int id = llm_add_request(E, &pr[0], &rp);
    EXPECT(id >= 0, "add_request: %s", llm_last_error(E));
    EXPECT(llm_generate(E, pr, 1, NULL, res) == LLM_ERR_INVALID_ARG && strstr(llm_last_error(E), "unfinished"),
           "generate on a busy engine: %s", llm_last_error(E));
    const struct llm_output *out;
    int done = 0;
    while (llm_has_unfinished_requests(E) && !done) {
        int k = llm_step(E, &out);
        for (int i = 0; i < k; i++) if (out[i].request_id == id && out[i].finished) {
            done = 1;
            EXPECT(out[i].n_itl == out[i].n_output_tokens - 1, "n_itl %d of %d tokens", out[i].n_itl, out[i].n_output_tokens);
        }
    }
    EXPECT(done, "the request added before finished");
}

// Text held back while it may start a stop string is reported when the request is aborted.
static void test_abort_releases_held_text(llm_engine *E) {
    struct llm_prompt pr = {.text = "four words of prompt"};
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 4;
    rp.ignore_eos = 1;
    struct llm_result r4;
    if (llm_generate(E, &pr, 1, &rp, &r4) != LLM_OK || !r4.text || !r4.text[0]) {
        EXPECT(0, "a text of 4 tokens to start from: %s", llm_last_error(E));
        llm_results_free(&r4, 1);
        return;
    }
    char stop[8] = {r4.text[strlen(r4.text) - 1], 1, 2, 0};   // its last byte may start it: held
    const char *stops[1] = {stop};
    rp.max_tokens = 12;
    rp.stop = stops;
    rp.n_stop = 1;
    int id = llm_add_request(E, &pr, &rp);
    char got[1024] = "";
    const struct llm_output *out;
    bool aborted = false, finished = false;
    for (int steps = 0; !finished && steps < 64; steps++) {   // the aborted request reports once more
        int k = llm_step(E, &out);
        EXPECT(k >= 0, "step: %s", llm_last_error(E));
        if (k < 0) break;
        for (int i = 0; i < k; i++) {
            if (out[i].request_id != id) continue;
            strncat(got, out[i].new_text, sizeof(got) - strlen(got) - 1);
            finished = out[i].finished;
            if (!aborted && out[i].n_output_tokens == 4) {
                EXPECT(strlen(got) < strlen(r4.text), "nothing held back after 4 tokens: '%s'", got);
                EXPECT(llm_abort_request(E, id) == LLM_OK, "abort: %s", llm_last_error(E));
                aborted = true;
            }
        }
    }
    EXPECT(aborted && finished && !strcmp(got, r4.text), "aborted after 4 tokens: '%s', want '%s'", got, r4.text);
    llm_results_free(&r4, 1);
}

// max_tokens 0: an empty completion, through llm_add_request / llm_step and llm_generate alike:
// reported by the next step, finished, LLM_FINISH_LENGTH, no tokens, no text, the prompt
// tokenized; the same request with max_tokens 1 gets one token. A negative one is refused.
static void test_max_tokens_zero(llm_engine *E) {
    struct llm_prompt pr = {.text = "some words"};
    struct llm_request_params rp = llm_request_params_default();
    rp.max_tokens = 0;
    int id = llm_add_request(E, &pr, &rp);
    EXPECT(id >= 0, "max_tokens 0 refused: %s", llm_last_error(E));
    const struct llm_output *out;
    int n = llm_step(E, &out);
    EXPECT(n == 1 && out[0].request_id == id && out[0].finished && out[0].finish_reason == LLM_FINISH_LENGTH &&
           out[0].n_new_tokens == 0 && out[0].n_output_tokens == 0 && out[0].n_new_text == 0 && out[0].n_prompt_tokens > 0,
           "max_tokens 0 through llm_step: %d outputs, finished %d (%s), %d tokens", n, n > 0 ? out[0].finished : -1,
           n > 0 ? llm_finish_reason_str(out[0].finish_reason) : "", n > 0 ? out[0].n_output_tokens : -1);
    EXPECT(!llm_has_unfinished_requests(E), "an empty completion is still unfinished");
    struct llm_result res[2];
    struct llm_request_params rps[2] = {rp, rp};
    rps[1].max_tokens = 1;
    struct llm_prompt prs[2] = {pr, pr};
    EXPECT(llm_generate(E, prs, 2, rps, res) == LLM_OK, "generate: %s", llm_last_error(E));
    EXPECT(res[0].finish_reason == LLM_FINISH_LENGTH && res[0].n_tokens == 0 && res[0].text && !res[0].text[0] &&
           res[0].n_prompt_tokens == res[1].n_prompt_tokens && res[0].n_prompt_tokens > 0,
           "llm_generate, max_tokens 0: %s, %d tokens, %d prompt tokens", llm_finish_reason_str(res[0].finish_reason),
           res[0].n_tokens, res[0].n_prompt_tokens);
    EXPECT(res[1].n_tokens == 1, "max_tokens 1: %d tokens", res[1].n_tokens);
    llm_results_free(res, 2);
    rp.max_tokens = -1;
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "max_tokens -1 accepted");
}

// Copies a file; false when it cannot.
static bool copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[1 << 16];
    size_t n;
    bool ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof(buf), a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

// A greedy generation with log-probabilities (its tokens and their top 5, as bytes).
static bool generate_ref(llm_engine *E, struct llm_result *res) {
    struct llm_prompt pr = {.text = "The file is read into memory"};
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 12;
    rp.ignore_eos = 1;
    rp.logprobs = 5;
    return llm_generate(E, &pr, 1, &rp, res) == LLM_OK && res->finish_reason == LLM_FINISH_LENGTH && res->n_tokens == 12;
}

static bool same_result(const struct llm_result *a, const struct llm_result *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int32_t)) &&
           !memcmp(a->logprobs, b->logprobs, (size_t)a->n_tokens * 5 * sizeof(struct llm_logprob)) && !strcmp(a->text, b->text);
}

// no_mmap: the file read into memory gives the mapped run's output byte for byte, and the engine
// keeps working after the file is truncated and removed (mapped, that is SIGBUS: documented, not
// caught). A new engine on the truncated file is refused with a clear message. Two models: one
// whose weights are used in place (q6_K) and one the CPU repacks where AVX-512 runs (q4_0).
static void test_no_mmap(void) {
    const char *names[2] = {"tiny-q6_k", "tiny-q4_0"};
    char path[64];
    snprintf(path, sizeof(path), "/tmp/llm-test-nommap-%d.gguf", (int)getpid());
    for (int k = 0; k < 2; k++) {
        if (!copy_file(model(names[k]), path)) { EXPECT(0, "cannot copy %s to %s", model(names[k]), path); continue; }
        struct llm_engine_params p = llm_engine_params_default();
        char err[512] = "";
        p.model_path = path;
        p.n_threads = 2;
        p.max_model_len = 64;
        struct llm_result mapped, read, after;
        llm_engine *M = llm_engine_create(&p, err, sizeof(err));
        EXPECT(M && generate_ref(M, &mapped), "%s mapped: %s", names[k], M ? llm_last_error(M) : err);
        llm_engine_free(M);
        p.no_mmap = 1;
        llm_engine *R = llm_engine_create(&p, err, sizeof(err));
        EXPECT(R && R->model.gguf.owns_buf && !R->model.gguf.owns_map, "%s no_mmap: %s", names[k], R ? "mapped" : err);
        if (!R) { llm_results_free(&mapped, 1); continue; }
        EXPECT(generate_ref(R, &read) && same_result(&mapped, &read), "%s: no_mmap's output differs from the mapped one's",
               names[k]);
        // the file cut to three quarters (in the tensors' data), then gone: the engine that read
        // it is not affected
        struct stat sb;
        EXPECT(stat(path, &sb) == 0 && truncate(path, sb.st_size / 4 * 3) == 0, "truncate %s", path);
        char err2[512] = "";
        struct llm_engine_params p2 = p;
        for (int mode = 0; mode < 2; mode++) {   // a new engine, read or mapped: a clear error
            p2.no_mmap = mode;
            llm_engine *X = llm_engine_create(&p2, err2, sizeof(err2));
            EXPECT(!X && strstr(err2, "truncated file") && strstr(err2, path), "%s cut short, no_mmap %d: %s",
                   names[k], mode, X ? "loaded" : err2);
            llm_engine_free(X);
        }
        remove(path);
        EXPECT(generate_ref(R, &after) && same_result(&read, &after), "%s: output after the file was truncated and removed",
               names[k]);
        int32_t ids[16];
        EXPECT(llm_tokenize(R, "still here", 10, LLM_TOKENIZE_ADD_SPECIAL, ids, 16) > 1, "tokenize after the file went");
        llm_results_free(&mapped, 1);
        llm_results_free(&read, 1);
        llm_results_free(&after, 1);
        llm_engine_free(R);
    }
}

static void test_metadata_engine(void) {
    llm_engine *M = open_model("tiny-qwen2-chat", LLM_LOAD_METADATA);
    if (!M) return;
    const char *t = llm_chat_template_detect(M);
    EXPECT(t && !strcmp(t, "chatml"), "LLM_LOAD_METADATA: chat template %s", t ? t : "(none)");
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(M, &mi);
    llm_get_engine_info(M, &ei);
    EXPECT(!mi.unsupported && !strcmp(mi.arch, "qwen2") && !strcmp(ei.backend_name, "none"),
           "metadata engine: unsupported %s, arch %s, backend %s", mi.unsupported ? mi.unsupported : "-", mi.arch,
           ei.backend_name);
    EXPECT(llm_seq_new(M) == -1 && llm_last_status(M) == LLM_ERR_INVALID_ARG, "seq_new on a metadata engine");
    llm_engine_free(M);
}

int main(void) {
    llm_engine *E = open_model("tiny-qwen2-chat", LLM_LOAD_ALL);
    if (E) {
        test_truncation(E);
        test_errors(E);
        test_token_ids_out_of_range(E);
        test_profile_and_generate(E);
        test_abort_releases_held_text(E);
        test_max_tokens_zero(E);
        llm_engine_free(E);
    }
    test_metadata_engine();
    test_no_mmap();
    return test_summary("test_api");
}
