// fuzz_gguf: a model file's bytes, as a hostile file would bring them, through every load mode
// of llm_engine_create and, when a mode accepts the file, through what that mode allows:
//   LLM_LOAD_METADATA  every key and tensor listed (llm_model_meta, llm_model_tensor: llm info)
//   LLM_LOAD_VOCAB     a text tokenized and detokenized, whole and as a stream
//   LLM_LOAD_ALL       a text prompt and a token prompt generated a few tokens (tiny context)
// Invariants: no crash, leak or UB; a refused file has a message; ids from the tokenizer and the
// sampler are in [0, n_vocab); generated text is valid UTF-8; every request finishes.
// Seeds: tests/fuzz/corpus/gguf/ (micro models written by build/gen_model); dictionary:
// tests/fuzz/gguf.dict. LLM_FUZZ_VERBOSE=1 prints why each load mode refused an input.
#define FUZZ_NAME "gguf"
#include "../../llm.c"
#include "fuzz.h"

// The input as a file the engine can open: a memory file on Linux (memfd), else a temporary
// file; the same one for every input (truncated and rewritten), as the harness runs one input
// at a time.
static int fuzz_fd = -1;
static char fuzz_path[64];
#ifndef __linux__
static char fuzz_tmp[] = "/tmp/llm-fuzz-gguf.XXXXXX";
static void fuzz_tmp_remove(void) { unlink(fuzz_tmp); }
#endif

static const char *fuzz_write_input(const uint8_t *data, size_t size) {
    if (fuzz_fd < 0) {
#ifdef __linux__
        fuzz_fd = memfd_create("llm-fuzz-gguf", MFD_CLOEXEC);
        snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
#else
        fuzz_fd = mkstemp(fuzz_tmp);
        if (fuzz_fd >= 0) atexit(fuzz_tmp_remove);
        snprintf(fuzz_path, sizeof(fuzz_path), "%s", fuzz_tmp);
#endif
        if (fuzz_fd < 0) fuzz_setup_failed("cannot create a file for the input: %s", strerror(errno));
    }
    if (ftruncate(fuzz_fd, 0) != 0) fuzz_setup_failed("ftruncate: %s", strerror(errno));
    for (size_t off = 0; off < size;) {
        ssize_t k = pwrite(fuzz_fd, data + off, size - off, (off_t)off);
        if (k <= 0) fuzz_setup_failed("cannot write the input: %s", strerror(errno));
        off += (size_t)k;
    }
    return fuzz_path;
}

// Reads every byte of s[0..n) (ASan sees a read outside the file's mapping); returns a checksum
// so that the reads are not optimised away.
static unsigned fuzz_touch(const void *s, size_t n) {
    unsigned h = 0;
    for (size_t i = 0; i < n; i++) h = h * 31 + ((const unsigned char *)s)[i];
    return h;
}

static llm_engine *fuzz_open(const char *path, enum llm_load_mode load) {
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.load = load;
    p.n_threads = 1;
    p.max_model_len = 32;
    p.block_size = 8;
    p.max_num_seqs = 2;
    p.max_num_batched_tokens = 16;
    char err[512] = "";
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    FUZZ_CHECK(E || err[0], "a file was refused without a message");
    if (getenv("LLM_FUZZ_VERBOSE")) fprintf(stderr, "load mode %d: %s\n", (int)load, E ? "loaded" : err);
    return E;
}

static void fuzz_metadata(const char *path) {
    llm_engine *E = fuzz_open(path, LLM_LOAD_METADATA);
    if (!E) return;
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    FUZZ_CHECK(mi.arch && mi.name, "model info without arch or name");
    volatile unsigned h = fuzz_touch(mi.arch, strlen(mi.arch)) + fuzz_touch(mi.name, strlen(mi.name));
    if (mi.unsupported) h += fuzz_touch(mi.unsupported, strlen(mi.unsupported));
    for (int64_t i = 0; i < mi.n_metadata; i++) {
        struct llm_meta m;
        FUZZ_CHECK(llm_model_meta(E, i, &m) == LLM_OK, "key %lld of %lld: %s", (long long)i, (long long)mi.n_metadata,
                   llm_last_error(E));
        h += fuzz_touch(m.key, strlen(m.key));
        if (m.type == LLM_META_STRING) h += fuzz_touch(m.str, m.str_len);
    }
    FUZZ_CHECK(llm_model_meta(E, mi.n_metadata, &(struct llm_meta){0}) != LLM_OK, "a key past the last one");
    for (int64_t i = 0; i < mi.n_tensors; i++) {
        struct llm_tensor_info t;
        FUZZ_CHECK(llm_model_tensor(E, i, &t) == LLM_OK, "tensor %lld: %s", (long long)i, llm_last_error(E));
        FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= 4, "tensor %lld has %d dimensions", (long long)i, t.n_dims);
        h += fuzz_touch(t.name, strlen(t.name)) + fuzz_touch(t.type_name, strlen(t.type_name));
    }
    FUZZ_CHECK(llm_model_tensor(E, mi.n_tensors, &(struct llm_tensor_info){0}) != LLM_OK, "a tensor past the last one");
    (void)h;
    llm_engine_free(E);
}

// A text through the tokenizer and back: ids in range, every piece readable, the streamed text
// valid UTF-8 and, when the whole text is valid UTF-8, the same.
static void fuzz_text_round(llm_engine *E, int n_vocab) {
    static const char text[] = "Hello world! <s></s><|im_start|>user\n\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 123 \xf0\x9f\x98\x80\n";
    int32_t ids[512];
    int n = llm_tokenize(E, text, sizeof(text) - 1, LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL, ids, 512);
    if (n < 0) return;   // out of memory: reported
    FUZZ_CHECK(n <= 512, "%d tokens for %zu bytes", n, sizeof(text) - 1);
    for (int i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < n_vocab, "token %d of the text: id %d", i, ids[i]);
    char piece[256];
    for (int i = 0; i < n; i++) FUZZ_CHECK(llm_token_to_piece(E, ids[i], piece, sizeof(piece)) >= 0, "piece of %d", ids[i]);
    FUZZ_CHECK(llm_token_to_piece(E, n_vocab, piece, sizeof(piece)) == -1, "a piece of id n_vocab");
    int len = llm_detokenize(E, ids, n, LLM_DETOKENIZE_SPECIAL, NULL, 0);
    if (len < 0) return;
    // the stream writes at most 3 bytes per byte of the text (U+FFFD for each invalid one)
    size_t cap = 3 * (size_t)len + 16;
    char *whole = malloc((size_t)len + 1), *streamed = malloc(cap);
    FUZZ_CHECK(whole && streamed, "out of memory");
    FUZZ_CHECK(llm_detokenize(E, ids, n, LLM_DETOKENIZE_SPECIAL, whole, (size_t)len + 1) == len, "detokenize twice");
    struct llm_text_stream st;
    llm_text_stream_reset(&st);
    size_t m = 0;
    for (int i = 0; i < n; i++) {
        int k = llm_text_stream_push(E, &st, ids[i], LLM_DETOKENIZE_SPECIAL, streamed + m, cap - m);
        FUZZ_CHECK(k >= 0, "stream push: out of memory");
        m += (size_t)k;
    }
    FUZZ_CHECK(cap - m >= 13, "the stream wrote %zu bytes for %d", m, len);
    m += (size_t)llm_text_stream_flush(&st, streamed + m, cap - m);
    FUZZ_CHECK(fuzz_utf8_check(streamed, m) == m, "the streamed text is not UTF-8 at byte %zu", fuzz_utf8_check(streamed, m));
    if (fuzz_utf8_check(whole, (size_t)len) == (size_t)len)
        FUZZ_CHECK(m == (size_t)len && memcmp(whole, streamed, m) == 0, "the streamed text differs from the whole");
    free(whole);
    free(streamed);
}

static void fuzz_vocab(const char *path) {
    llm_engine *E = fuzz_open(path, LLM_LOAD_VOCAB);
    if (!E) return;
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    FUZZ_CHECK(mi.n_vocab > 0, "a vocabulary of %d tokens", mi.n_vocab);
    fuzz_text_round(E, mi.n_vocab);
    llm_engine_free(E);
}

static void fuzz_generate(const char *path) {
    llm_engine *E = fuzz_open(path, LLM_LOAD_ALL);
    if (!E) return;
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    FUZZ_CHECK(mi.n_vocab > 0, "a model of %d tokens", mi.n_vocab);
    fuzz_text_round(E, mi.n_vocab);
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 4;
    rp.logprobs = 2;
    const int32_t tokens[2] = {mi.n_vocab - 1, 0};
    const struct llm_prompt prompts[2] = {{"Hello world", NULL, 0}, {NULL, tokens, 2}};
    int ids[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = -1;
        ids[i] = llm_add_request(E, &prompts[i], &rp);
        FUZZ_CHECK(ids[i] >= 0 || llm_last_error(E)[0], "a request refused without a message");
    }
    int n_tokens[2] = {0, 0};
    bool done[2] = {ids[0] < 0, ids[1] < 0};
    for (int step = 0; llm_has_unfinished_requests(E); step++) {
        FUZZ_CHECK(step < 64, "2 requests of at most 4 tokens unfinished after 64 steps");
        const struct llm_output *out;
        int k = llm_step(E, &out);
        FUZZ_CHECK(k >= 0, "step: %s", llm_last_error(E));
        for (int j = 0; j < k; j++) {
            int i = out[j].request_id == ids[0] ? 0 : 1;
            FUZZ_CHECK(out[j].request_id == ids[i] && !done[i], "an output of request %d", out[j].request_id);
            for (int t = 0; t < out[j].n_new_tokens; t++)
                FUZZ_CHECK(out[j].new_tokens[t] >= 0 && out[j].new_tokens[t] < mi.n_vocab, "generated id %d",
                           out[j].new_tokens[t]);
            n_tokens[i] += out[j].n_new_tokens;
            FUZZ_CHECK(n_tokens[i] <= rp.max_tokens, "%d tokens generated, max_tokens %d", n_tokens[i], rp.max_tokens);
            size_t bad = fuzz_utf8_check(out[j].new_text, (size_t)out[j].n_new_text);
            FUZZ_CHECK(bad == (size_t)out[j].n_new_text, "new text not UTF-8 at byte %zu", bad);
            if (out[j].finished) done[i] = true;
        }
    }
    FUZZ_CHECK(done[0] && done[1], "a request was not reported finished");
    llm_engine_free(E);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_input(data, size);
    fuzz_metadata(path);
    fuzz_vocab(path);
    fuzz_generate(path);
    return 0;
}
