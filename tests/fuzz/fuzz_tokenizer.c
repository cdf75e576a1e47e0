// fuzz_tokenizer: any text through the tokenizers of four real vocabularies (llama.cpp's files,
// fetched by tests/fixtures.sh, each loaded once with LLM_LOAD_VOCAB): Llama 2's SentencePiece,
// and the byte-level BPE of Llama 3, Qwen2 and GPT-2.
// Input: byte 0 chooses the vocabulary (bits 0-1) and the flags (bit 2: LLM_TOKENIZE_PARSE_SPECIAL,
// bit 3: LLM_TOKENIZE_ADD_SPECIAL); the rest is the text, any bytes.
// Invariants:
//   - the count does not depend on the room given, and a short buffer holds a prefix of the ids
//     (llm.h's truncation rule); the same for the detokenized text;
//   - every id is in [0, n_vocab);
//   - the streamed text (llm_text_stream_push) is valid UTF-8, and equals llm_detokenize's text
//     when that is valid UTF-8;
//   - detokenize(tokenize(x)) == x where the vocabulary guarantees it: x valid UTF-8 and
//       byte-level BPE (every byte has a token): always (control tokens written back with
//         LLM_DETOKENIZE_SPECIAL when they were parsed);
//       SentencePiece with byte fallback (the 256 <0xNN> tokens): when x has no U+2581 (the
//         tokenizer's own space: it detokenizes as ' ') and no special token was cut out of it
//         (SentencePiece puts a space after each);
//     BOS / EOS added by LLM_TOKENIZE_ADD_SPECIAL are left out of the comparison.
// Dictionary: tests/fuzz/tokenizer.dict.
#define FUZZ_NAME "tokenizer"
#include "../../llm.c"
#include "fuzz.h"

static const char *const fuzz_vocab_files[4] = {
    "ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf", "ggml-vocab-gpt-2.gguf",
};
static llm_engine *fuzz_engines[4];
static bool fuzz_bytes_complete[4];   // every byte can be encoded by a token of its own

static void fuzz_init(void) {
    for (int i = 0; i < 4; i++) {
        char path[1024], err[512];
        fuzz_vocab_path(fuzz_vocab_files[i], path, sizeof(path));
        struct llm_engine_params p = llm_engine_params_default();
        p.model_path = path;
        p.load = LLM_LOAD_VOCAB;
        p.n_threads = 1;
        if (!(fuzz_engines[i] = llm_engine_create(&p, err, sizeof(err))))
            fuzz_setup_failed("%s (make fixtures fetches the vocabularies)", err);
        const struct llm__vocab *v = &fuzz_engines[i]->vocab;
        bool all = true;
        for (int b = 0; b < 256; b++)
            all = all && (v->type == LLM__VOCAB_SPM ? v->byte_tok[b] >= 0 : llm__vocab_find(v, v->bpe_enc[b], v->bpe_enc_len[b]) >= 0);
        fuzz_bytes_complete[i] = all;
    }
    // the round trip is checked on every vocabulary (all four have byte tokens)
    for (int i = 0; i < 4; i++) FUZZ_CHECK(fuzz_bytes_complete[i], "%s: a byte without a token", fuzz_vocab_files[i]);
}

static int32_t *fuzz_tokenize(llm_engine *E, const char *text, size_t len, int flags, int *n_out) {
    int n = llm_tokenize(E, text, len, flags, NULL, 0);
    FUZZ_CHECK(n >= 0, "tokenize: %s", llm_last_error(E));
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof(int32_t)), *half = malloc((size_t)(n / 2 + 1) * sizeof(int32_t));
    FUZZ_CHECK(ids && half, "out of memory");
    FUZZ_CHECK(llm_tokenize(E, text, len, flags, ids, n) == n, "the count changed with room for the ids");
    FUZZ_CHECK(llm_tokenize(E, text, len, flags, half, n / 2) == n, "the count changed with room for half");
    FUZZ_CHECK(memcmp(ids, half, (size_t)(n / 2) * sizeof(int32_t)) == 0, "a short buffer does not hold the first ids");
    free(half);
    *n_out = n;
    return ids;
}

static char *fuzz_detokenize(llm_engine *E, const int32_t *ids, int n, int flags, int *len_out) {
    int len = llm_detokenize(E, ids, n, flags, NULL, 0);
    FUZZ_CHECK(len >= 0, "detokenize: %s", llm_last_error(E));
    char *text = malloc((size_t)len + 1), *half = malloc((size_t)len / 2 + 1);
    FUZZ_CHECK(text && half, "out of memory");
    FUZZ_CHECK(llm_detokenize(E, ids, n, flags, text, (size_t)len + 1) == len, "the length changed with room for it");
    FUZZ_CHECK(llm_detokenize(E, ids, n, flags, half, (size_t)len / 2 + 1) == len, "the length changed with half");
    FUZZ_CHECK(memcmp(text, half, (size_t)len / 2) == 0 && half[len / 2] == 0, "a short buffer does not hold the start");
    free(half);
    *len_out = len;
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fuzz_engines[0]) fuzz_init();
    if (size == 0) return 0;
    int which = data[0] & 3;
    bool special = data[0] & 4, add = data[0] & 8;
    int flags = (special ? LLM_TOKENIZE_PARSE_SPECIAL : 0) | (add ? LLM_TOKENIZE_ADD_SPECIAL : 0);
    int dflags = special ? LLM_DETOKENIZE_SPECIAL : 0;
    llm_engine *E = fuzz_engines[which];
    const struct llm__vocab *v = &E->vocab;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int n;
    int32_t *ids = fuzz_tokenize(E, text, len, flags, &n);
    for (int i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < v->n, "id %d of %d is %d", i, n, ids[i]);

    // the text of the ids, whole and streamed
    int dlen;
    char *back = fuzz_detokenize(E, ids, n, dflags, &dlen);
    size_t cap = 3 * (size_t)dlen + 16, m = 0;   // at most U+FFFD (3 bytes) per byte, and a flush
    char *streamed = malloc(cap);
    FUZZ_CHECK(streamed, "out of memory");
    struct llm_text_stream st;
    llm_text_stream_reset(&st);
    for (int i = 0; i < n; i++) {
        int k = llm_text_stream_push(E, &st, ids[i], dflags, streamed + m, cap - m);
        FUZZ_CHECK(k >= 0 && (size_t)k < cap - m, "stream push: %d for room %zu", k, cap - m);
        m += (size_t)k;
    }
    FUZZ_CHECK(cap - m >= 13, "the stream wrote %zu bytes for %d", m, dlen);
    m += (size_t)llm_text_stream_flush(&st, streamed + m, cap - m);
    size_t bad = fuzz_utf8_check(streamed, m);
    FUZZ_CHECK(bad == m, "the streamed text is not UTF-8 at byte %zu", bad);
    if (fuzz_utf8_check(back, (size_t)dlen) == (size_t)dlen)
        FUZZ_CHECK(m == (size_t)dlen && memcmp(streamed, back, m) == 0, "streamed text differs from detokenize's");
    free(back);
    free(streamed);

    // the round trip, where the vocabulary guarantees it
    int lo = 0, hi = n;   // the ids of the text, without an added BOS / EOS
    if (add && v->add_bos && hi > lo && ids[lo] == v->bos) lo++;
    if (add && v->add_eos && hi > lo && ids[hi - 1] == v->eos) hi--;
    bool exact = fuzz_bytes_complete[which] && fuzz_utf8_check(text, len) == len;
    if (v->type == LLM__VOCAB_SPM) {
        exact = exact && !llm__memmem(text, len, "\xe2\x96\x81", 3);
        for (int i = lo; exact && i < hi; i++) exact = v->attr[ids[i]] == LLM__TOK_NORMAL || v->attr[ids[i]] == LLM__TOK_BYTE;
    }
    if (exact) {
        back = fuzz_detokenize(E, ids + lo, hi - lo, dflags, &dlen);
        FUZZ_CHECK((size_t)dlen == len && memcmp(back, text, len) == 0, "%s: detokenize(tokenize(x)) != x (%d bytes for %zu)",
                   fuzz_vocab_files[which], dlen, len);
        free(back);
    }
    free(ids);
    return 0;
}
