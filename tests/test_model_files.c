// Bad model files at the engine level: a small valid model truncated at many offsets and with
// bytes flipped (the engine must refuse it with a message or, when the damage is in tensor
// data, load it and run without a crash or an out-of-bounds access; run under ASan), and
// hand-made files that are well-formed GGUF but wrong as models (unknown architecture, missing
// or misshapen tensors, unsupported tensor types, inconsistent hyper-parameters, ...), each of
// which must be refused with a message naming the problem.
#include "../llm.c"
#include "gguf_writer.h"
#include "test.h"

static char tmp_path[64];

static const char *models_dir(void) {
    const char *d = getenv("LLM_TEST_MODELS");
    return d ? d : "build/models";
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

// Creates an engine from path; if it loads, evaluates a few tokens. Returns true if it loaded.
static bool try_load(const char *path, char *err, size_t err_size) {
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = 2;
    p.max_model_len = 64;
    llm_engine *E = llm_engine_create(&p, err, err_size);
    if (!E) return false;
    int32_t toks[3] = {1, 2, 3};
    float *lg = malloc(sizeof(float) * (size_t)E->model.n_vocab);
    int seq = llm_seq_new(E);
    llm_seq_eval(E, seq, toks, 3, lg, 0);
    free(lg);
    llm_engine_free(E);
    return true;
}

// llm_model_info.unsupported of the file opened with LLM_LOAD_METADATA (NULL: it would run), in
// a static buffer; err gets the message when even that open fails.
static const char *metadata_unsupported(const char *path, char *err, size_t err_size) {
    static char why[512];
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.load = LLM_LOAD_METADATA;
    err[0] = 0;
    llm_engine *E = llm_engine_create(&p, err, err_size);
    if (!E) { snprintf(why, sizeof(why), "(open failed: %s)", err); return why; }
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    const char *r = mi.unsupported ? (snprintf(why, sizeof(why), "%s", mi.unsupported), why) : NULL;
    llm_engine_free(E);
    return r;
}

static void fuzz_file(const uint8_t *data, size_t size, const size_t header_end) {
    unsigned long long seed = 99;
    uint8_t *buf = malloc(size);
    char err[512];
    int refused = 0, loaded = 0, no_message = 0;
    // truncations: every 97th byte of the metadata, then a few hundred through the data
    for (size_t cut = 0; cut < size; cut += cut < header_end ? 97 : size / 300 + 1) {
        if (!write_file(tmp_path, data, cut)) { EXPECT(0, "cannot write %s", tmp_path); break; }
        err[0] = 0;
        if (try_load(tmp_path, err, sizeof(err))) loaded++;
        else { refused++; no_message += err[0] == 0; }
    }
    EXPECT(loaded == 0, "%d truncated files loaded", loaded);
    EXPECT(no_message == 0, "%d truncated files refused without a message", no_message);
    printf("  truncations: %d refused with a message\n", refused);
    // byte flips: 3 random bytes per file, 4 in 5 files in the metadata
    refused = loaded = no_message = 0;
    for (int it = 0; it < 400; it++) {
        memcpy(buf, data, size);
        for (int k = 0; k < 3; k++) {
            size_t at = test_rng_next(&seed) % 5 ? test_rng_next(&seed) % header_end : test_rng_next(&seed) % size;
            buf[at] ^= (uint8_t)(1 + test_rng_next(&seed) % 255);
        }
        if (!write_file(tmp_path, buf, size)) { EXPECT(0, "cannot write %s", tmp_path); break; }
        err[0] = 0;
        if (try_load(tmp_path, err, sizeof(err))) loaded++;
        else { refused++; no_message += err[0] == 0; }
    }
    EXPECT(no_message == 0, "%d damaged files refused without a message", no_message);
    printf("  byte flips: %d refused with a message, %d loaded and ran\n", refused, loaded);
    free(buf);
}

// --- hand-made variants of a valid model ---

struct variant {
    const char *name, *want;       // what is changed; a word the error message must contain
                                   // (the others show when the weights are loaded)
    const char *drop_key, *drop_tensor;
    const char *str_key, *str_val; // set a string key
    const char *u32_key;           // set a u32 key
    uint32_t u32_val;
    const char *f32_key;
    float f32_val;
    const char *retype_tensor;     // give this tensor another type (and a fitting size)
    uint32_t retype;
    const char *reshape_tensor;    // swap this tensor's two dimensions
    const char *poison_tensor;     // fill this f32 tensor with a value
    float poison;
    bool rename_byte_tokens;       // the vocabulary's <0xNN> tokens become [0xNN] (no byte tokens)
    const char *add_dim_tensor;    // this 2-D tensor [a, b] becomes [a, b, 2] (its data twice)
    const char *inf_scale_tensor;  // the first block scale of this Q8_0 tensor becomes fp16 infinity
};

// tokenizer.ggml.tokens of g with every <0xNN> renamed [0xNN].
static enum llm_status write_tokens_without_bytes(struct llm__gguf_writer *w, const struct llm__gguf *g, struct llm__err *e) {
    uint32_t et;
    uint64_t n;
    const void *data;
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, e)) return LLM_ERR_FORMAT;
    const struct llm__gguf_str *strs = data;
    char **texts = calloc((size_t)n, sizeof(char *));
    enum llm_status st = texts ? LLM_OK : LLM_ERR_NOMEM;
    for (uint64_t i = 0; st == LLM_OK && i < n; i++) {
        if (!(texts[i] = malloc((size_t)strs[i].len + 1))) { st = LLM_ERR_NOMEM; break; }
        memcpy(texts[i], strs[i].ptr, (size_t)strs[i].len);
        texts[i][strs[i].len] = 0;
        if (strs[i].len == 6 && !memcmp(texts[i], "<0x", 3) && texts[i][5] == '>') texts[i][0] = '[', texts[i][5] = ']';
    }
    if (st == LLM_OK) st = llm__gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", n, (const char *const *)texts, e);
    for (uint64_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    return st;
}

static bool write_variant(const struct llm__gguf *g, const struct variant *v, const char *path) {
    struct llm__err e;
    struct llm__gguf_writer w;
    llm__gguf_writer_init(&w);
    bool ok = true;
    for (int64_t i = 0; ok && i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if ((v->drop_key && !strcmp(k, v->drop_key)) || (v->str_key && !strcmp(k, v->str_key)) ||
            (v->u32_key && !strcmp(k, v->u32_key)) || (v->f32_key && !strcmp(k, v->f32_key)))
            continue;
        if (v->rename_byte_tokens && !strcmp(k, "tokenizer.ggml.tokens")) ok = write_tokens_without_bytes(&w, g, &e) == LLM_OK;
        else ok = llm__gguf_writer_copy_kv(&w, g, i, &e) == LLM_OK;
    }
    if (ok && v->str_key) ok = llm__gguf_writer_set_str(&w, v->str_key, v->str_val, &e) == LLM_OK;
    if (ok && v->u32_key) ok = llm__gguf_writer_set_u32(&w, v->u32_key, v->u32_val, &e) == LLM_OK;
    if (ok && v->f32_key) ok = llm__gguf_writer_set_f32(&w, v->f32_key, v->f32_val, &e) == LLM_OK;
    int64_t *keep = calloc((size_t)g->n_tensors, sizeof(int64_t));
    int64_t nk = 0;
    for (int64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = &g->tensors[i];
        if (v->drop_tensor && !strcmp(t->name, v->drop_tensor)) continue;
        uint32_t type = v->retype_tensor && !strcmp(t->name, v->retype_tensor) ? v->retype : t->type;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (v->reshape_tensor && !strcmp(t->name, v->reshape_tensor)) { ne[0] = t->ne[1]; ne[1] = t->ne[0]; }
        bool add_dim = v->add_dim_tensor && !strcmp(t->name, v->add_dim_tensor);
        if (add_dim) ne[2] = 2;
        ok = llm__gguf_writer_add_tensor(&w, t->name, type, add_dim ? 3 : t->n_dims, ne, &e) == LLM_OK;
        keep[nk++] = i;
    }
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && llm__gguf_writer_begin(&w, f, &e) == LLM_OK;
    for (int64_t k = 0; ok && k < nk; k++) {
        const struct llm__gguf_tensor *t = &g->tensors[keep[k]];
        uint32_t type = v->retype_tensor && !strcmp(t->name, v->retype_tensor) ? v->retype : t->type;
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        size_t bytes = llm__row_bytes((int)type, t->ne[0]) * (size_t)(n / t->ne[0]);
        uint8_t *data = calloc(1, bytes);
        if (type == t->type) memcpy(data, t->data, bytes);
        if (v->poison_tensor && !strcmp(t->name, v->poison_tensor))
            for (int64_t i = 0; i < n; i++) memcpy(data + 4 * i, &v->poison, 4);
        if (v->inf_scale_tensor && !strcmp(t->name, v->inf_scale_tensor) && type == LLM__TYPE_Q8_0) data[0] = 0x00, data[1] = 0x7c;
        ok = llm__gguf_writer_write(&w, data, bytes, &e) == LLM_OK;
        if (ok && v->add_dim_tensor && !strcmp(t->name, v->add_dim_tensor)) ok = llm__gguf_writer_write(&w, data, bytes, &e) == LLM_OK;
        free(data);
    }
    if (ok) ok = llm__gguf_writer_finish(&w, &e) == LLM_OK;
    if (f) fclose(f);
    llm__gguf_writer_free(&w);
    free(keep);
    EXPECT(ok, "%s: could not write the variant", v->name);
    return ok;
}

static void check_variants(const char *model) {
    struct llm__gguf g;
    struct llm__err e;
    if (llm__gguf_open(&g, model, &e) != LLM_OK) { EXPECT(0, "%s", e.msg); return; }
    const struct variant vs[] = {
        {.name = "unknown architecture", .want = "architecture", .str_key = "general.architecture", .str_val = "gptj"},
        {.name = "no architecture", .want = "general.architecture", .drop_key = "general.architecture"},
        {.name = "missing tensor", .want = "blk.1.ffn_up.weight", .drop_tensor = "blk.1.ffn_up.weight"},
        {.name = "missing embedding", .want = "token_embd.weight", .drop_tensor = "token_embd.weight"},
        {.name = "more layers than tensors", .want = "blk.2", .u32_key = "llama.block_count", .u32_val = 3},
        {.name = "heads do not divide the width", .want = "multiple", .u32_key = "llama.attention.head_count", .u32_val = 7},
        {.name = "KV heads do not divide heads", .want = "multiple", .u32_key = "llama.attention.head_count_kv", .u32_val = 3},
        {.name = "no layers", .want = "block_count", .u32_key = "llama.block_count", .u32_val = 0},
        {.name = "no context", .want = "context_length", .u32_key = "llama.context_length", .u32_val = 0},
        {.name = "rms epsilon 0", .want = "epsilon", .f32_key = "llama.attention.layer_norm_rms_epsilon", .f32_val = 0.0f},
        {.name = "rope base 0", .want = "freq_base", .f32_key = "llama.rope.freq_base", .f32_val = 0.0f},
        {.name = "unsupported rope scaling", .want = "scaling", .str_key = "llama.rope.scaling.type", .str_val = "longrope"},
        {.name = "rope attn_factor, no YaRN", .want = "attn_factor", .f32_key = "llama.rope.scaling.attn_factor",
         .f32_val = 2.0f},
        {.name = "unsupported tensor type", .want = "iq2_xxs", .retype_tensor = "blk.0.attn_q.weight", .retype = LLM__TYPE_IQ2_XXS},
        {.name = "tensor of the wrong shape", .want = "has shape [64, 256], expected [256, 64]",
         .reshape_tensor = "blk.0.attn_k.weight"},
        // a third dimension is named (it was "has shape [256, 4096], expected [256, 4096]")
        {.name = "3-D output matrix", .want = "'output.weight' has shape [256, 4096, 2], expected [256, 4096]",
         .add_dim_tensor = "output.weight"},
        {.name = "3-D norm", .want = "'output_norm.weight' has shape [256, 1, 2], expected [256]", .add_dim_tensor = "output_norm.weight"},
        {.name = "3-D embedding", .want = "'token_embd.weight' has shape [256, 4096, 2], expected [256, n_vocab]",
         .add_dim_tensor = "token_embd.weight"},
        {.name = "NaN in a norm", .want = "finite", .poison_tensor = "blk.0.ffn_norm.weight", .poison = NAN},
        {.name = "unknown tokenizer", .want = "tokenizer", .str_key = "tokenizer.ggml.model", .str_val = "bert"},
        {.name = "no vocabulary", .want = "tokenizer.ggml.tokens", .drop_key = "tokenizer.ggml.tokens"},
        // SentencePiece without byte tokens or an unknown token: text it cannot encode would
        // become id -1 (tokens of the variant below)
        {.name = "no byte tokens, no unknown", .want = "cannot encode byte 0x00", .drop_key = "tokenizer.ggml.unknown_token_id",
         .rename_byte_tokens = true},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(vs); i++) {
        if (!write_variant(&g, &vs[i], tmp_path)) continue;
        char err[512] = "";
        bool loaded = try_load(tmp_path, err, sizeof(err));
        EXPECT(!loaded, "%s: the model loaded", vs[i].name);
        EXPECT(strstr(err, vs[i].want) != NULL, "%s: message '%s' does not mention '%s'", vs[i].name, err, vs[i].want);
        printf("  %-30s -> %s\n", vs[i].name, err);
        // opened for its metadata only, the file says why it cannot run (values are read only by a
        // full load: the NaN is not seen)
        if (vs[i].poison_tensor) continue;
        const char *why = metadata_unsupported(tmp_path, err, sizeof(err));
        EXPECT(why && strstr(why, vs[i].want), "%s: LLM_LOAD_METADATA's unsupported is '%s', not about '%s'", vs[i].name,
               why ? why : "(none)", vs[i].want);
    }
    // the unchanged copy loads (so the writer is not the cause of the refusals)
    struct variant same = {.name = "unchanged"};
    char err[512] = "";
    if (write_variant(&g, &same, tmp_path)) {
        EXPECT(try_load(tmp_path, err, sizeof(err)), "unchanged copy: %s", err);
        const char *why = metadata_unsupported(tmp_path, err, sizeof(err));
        EXPECT(!why && !err[0], "unchanged copy, LLM_LOAD_METADATA: unsupported '%s' (%s)", why ? why : "", err);
    }
    llm__gguf_close(&g);
}

// The newer architectures' own tensors and keys: each missing or bad one refused by name (the
// same load path as above; the unchanged files load, as test_golden shows).
static void check_arch_variants(void) {
    static const struct { const char *model; struct variant v; } cases[] = {
        {"tiny-qwen3-f32", {.name = "qwen3: no q norm", .want = "blk.1.attn_q_norm.weight",
                            .drop_tensor = "blk.1.attn_q_norm.weight"}},
        {"tiny-phi3-f32", {.name = "phi3: no fused qkv", .want = "blk.1.attn_q.weight",
                           .drop_tensor = "blk.1.attn_qkv.weight"}},
        {"tiny-phi3-f32", {.name = "phi3: gate/up not fused", .want = "'blk.0.ffn_up.weight' has shape",
                           .reshape_tensor = "blk.0.ffn_up.weight"}},
        {"tiny-gemma3-f32", {.name = "gemma3: no post-FFN norm", .want = "blk.5.post_ffw_norm.weight",
                             .drop_tensor = "blk.5.post_ffw_norm.weight"}},
        {"tiny-gemma3-f32", {.name = "gemma3: no k norm", .want = "blk.0.attn_k_norm.weight",
                             .drop_tensor = "blk.0.attn_k_norm.weight"}},
        {"tiny-gemma3-f32", {.name = "gemma3: window pattern", .want = "sliding_window_pattern",
                             .u32_key = "gemma3.attention.sliding_window_pattern", .u32_val = 5000}},
        {"tiny-gemma2-f32", {.name = "gemma2: negative soft-cap", .want = "soft-capping",
                             .f32_key = "gemma2.attn_logit_softcapping", .f32_val = -1.0f}},
        {"tiny-gemma2-f32", {.name = "gemma2: no post-attention norm", .want = "blk.0.post_attention_norm.weight",
                             .drop_tensor = "blk.0.post_attention_norm.weight"}},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(cases); i++) {
        char path[512], err[512] = "";
        snprintf(path, sizeof(path), "%s/%s.gguf", models_dir(), cases[i].model);
        struct llm__gguf g;
        struct llm__err e;
        if (llm__gguf_open(&g, path, &e) != LLM_OK) { EXPECT(0, "%s (make models)", e.msg); continue; }
        bool written = write_variant(&g, &cases[i].v, tmp_path);
        llm__gguf_close(&g);
        if (!written) continue;
        bool loaded = try_load(tmp_path, err, sizeof(err));
        EXPECT(!loaded && strstr(err, cases[i].v.want), "%s: %s (expected a message about '%s')", cases[i].v.name,
               loaded ? "the model loaded" : err, cases[i].v.want);
        printf("  %-30s -> %s\n", cases[i].v.name, err);
    }
}

// A SentencePiece vocabulary without <0xNN> tokens: with an unknown token, bytes no piece covers
// become it; without one, the engine refuses the vocabulary (an id -1 would have read the
// embedding row before the table: generation from text with such bytes, under ASan).
static void check_unencodable_bytes(const char *model) {
    struct llm__gguf g;
    struct llm__err e;
    if (llm__gguf_open(&g, model, &e) != LLM_OK) { EXPECT(0, "%s", e.msg); return; }
    const struct variant with_unk = {.name = "no byte tokens", .rename_byte_tokens = true};
    const struct variant no_unk = {.name = "no byte tokens, no unknown", .rename_byte_tokens = true,
                                   .drop_key = "tokenizer.ggml.unknown_token_id"};
    const char *text = "a\x01b\xff";   // 0x01 and 0xff: no piece, no byte token
    for (int k = 0; k < 2; k++) {
        if (!write_variant(&g, k ? &no_unk : &with_unk, tmp_path)) continue;
        for (int load = 0; load < 2; load++) {
            struct llm_engine_params p = llm_engine_params_default();
            char err[512] = "";
            p.model_path = tmp_path;
            p.n_threads = 2;
            p.max_model_len = 64;
            p.load = load ? LLM_LOAD_VOCAB : LLM_LOAD_ALL;
            llm_engine *E = llm_engine_create(&p, err, sizeof(err));
            if (k) EXPECT(!E && strstr(err, "cannot encode byte 0x00") && strstr(err, "unknown_token_id"),
                          "a vocabulary that cannot encode every byte, load %d: %s", load, E ? "loaded" : err);
            else EXPECT(E != NULL, "no byte tokens, an unknown token, load %d: %s", load, err);
            if (!E) continue;
            int32_t ids[16];
            int n = llm_tokenize(E, text, strlen(text), 0, ids, 16), n_unk = 0;
            for (int i = 0; i < n && i < 16; i++) n_unk += ids[i] == E->vocab.unk;
            EXPECT(n > 0 && n <= 16 && (k || n_unk == 2), "tokenize: %d ids, %d unknown (want 2)", n, n_unk);
            for (int i = 0; i < n && i < 16; i++)
                EXPECT(ids[i] >= 0 && ids[i] < E->vocab.n, "tokenize: id %d of %d out of range", (int)ids[i], i);
            if (!load) {
                struct llm_prompt pr = {.text = text};
                struct llm_request_params rp = llm_request_params_default();
                rp.sampling.temperature = 0;
                rp.max_tokens = 2;
                struct llm_result res;
                EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK && res.finish_reason != LLM_FINISH_ERROR,
                       "generate from text with unencodable bytes: %s", res.error ? res.error : llm_last_error(E));
                llm_results_free(&res, 1);
            }
            llm_engine_free(E);
        }
    }
    llm__gguf_close(&g);
}

// A model whose activations overflow: an infinite block scale in the first row of the first
// layer's ffn_down (Q8_0) makes one element of the residual stream infinite, so the next layer's
// norm gives one NaN among zeros in its first block: the activation quantizer's block sum met
// the conversion of NaN there (signed overflow in the x16 AVX-512 path, which runs where the CPU
// has it; under UBSan it must stay quiet), and later products see NaN everywhere. The engine
// reports it once, clearly: the request ends with LLM_FINISH_ERROR and a message, llm_seq_eval
// fails; nothing is sampled from NaN.
static void check_overflowing_model(void) {
    char path[512];
    snprintf(path, sizeof(path), "%s/tiny-q8_0.gguf", models_dir());
    struct llm__gguf g;
    struct llm__err e;
    if (llm__gguf_open(&g, path, &e) != LLM_OK) { EXPECT(0, "%s", e.msg); return; }
    const struct variant v = {.name = "an infinite scale", .inf_scale_tensor = "blk.0.ffn_down.weight"};
    bool written = write_variant(&g, &v, tmp_path);
    llm__gguf_close(&g);
    if (!written) return;
    struct llm_engine_params p = llm_engine_params_default();
    char err[512] = "";
    p.model_path = tmp_path;
    p.n_threads = 2;
    p.max_model_len = 64;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "a model with infinite weights loads (values are seen when computed): %s", err);
    if (!E) return;
    const bool x16 = E->model.layers[1].wq.layout == LLM__LAYOUT_X16;
    EXPECT(x16 == (llm__simd_best() == LLM__SIMD_AVX512), "x16 layout %d, AVX-512 %d", x16,
           llm__simd_best() == LLM__SIMD_AVX512);
    printf("  infinite weights: %s\n", x16 ? "the x16 AVX-512 activation quantizers run on NaN"
                                           : "no AVX-512 on this CPU: the per-row kernels run on NaN");
    // llm_generate: an error result with the message, the engine's status, no token
    struct llm_prompt pr = {.text = "once upon a time"};
    struct llm_request_params rp = llm_request_params_default();
    rp.max_tokens = 8;
    struct llm_result res;
    EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK, "generate: %s", llm_last_error(E));
    EXPECT(res.finish_reason == LLM_FINISH_ERROR && res.n_tokens == 0 && res.error && strstr(res.error, "not finite") &&
           llm_last_status(E) == LLM_ERR_BACKEND, "generate: finish %s, %d tokens, error '%s'",
           llm_finish_reason_str(res.finish_reason), res.n_tokens, res.error ? res.error : "(none)");
    llm_results_free(&res, 1);
    // llm_step: two requests, each reported finished once, with LLM_FINISH_ERROR; blocks freed
    int ids[2] = {llm_add_request(E, &pr, &rp), llm_add_request(E, &pr, &rp)}, ends[2] = {0, 0}, other = 0;
    EXPECT(ids[0] >= 0 && ids[1] >= 0, "add_request: %s", llm_last_error(E));
    for (int steps = 0; llm_has_unfinished_requests(E) && steps < 32; steps++) {
        const struct llm_output *out;
        int k = llm_step(E, &out);
        EXPECT(k >= 0, "step: %s", llm_last_error(E));
        for (int i = 0; i < k; i++) {
            if (!out[i].finished) continue;
            int j = out[i].request_id == ids[1];
            ends[j]++;
            other += out[i].finish_reason != LLM_FINISH_ERROR || out[i].n_output_tokens != 0;
        }
    }
    const struct llm_output *out;
    EXPECT(llm_step(E, &out) == 0, "a finished request was reported again");
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    EXPECT(ends[0] == 1 && ends[1] == 1 && other == 0 && st.kv_blocks_used == 0 && st.kv_blocks_cached == 0,
           "step: ends reported %d and %d times, %d not an error with no token, %d blocks used, %d cached", ends[0], ends[1],
           other, st.kv_blocks_used, st.kv_blocks_cached);
    // llm_seq_eval with logits: an error
    int seq = llm_seq_new(E);
    int32_t toks[3] = {1, 300, 301};
    float *lg = malloc(sizeof(float) * 3 * (size_t)E->model.n_vocab);
    EXPECT(llm_seq_eval(E, seq, toks, 3, lg, 1) == LLM_ERR_BACKEND && strstr(llm_last_error(E), "not finite"),
           "seq_eval: %s", llm_last_error(E));
    free(lg);
    llm_seq_free(E, seq);
    llm_engine_free(E);
}

// llm_engine_params.quantize: micro-f16 quantized at load to each plain type has the bytes
// llama-quantize --pure wrote for it (tests/make_quantized.sh), tensor by tensor, and the same
// logits; a K-quant falls back where rows are not a multiple of 256; a bad name is refused.
static void check_quantize_at_load(void) {
    static const char *const types[] = {"q8_0", "q4_0", "Q4_1", "q5_0", "q5_1"};
    char path[512], pure[512];
    snprintf(path, sizeof(path), "%s/micro-f16.gguf", models_dir());
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char lower[8];
        for (size_t k = 0; k <= strlen(types[i]); k++) lower[k] = (char)tolower((unsigned char)types[i][k]);
        snprintf(pure, sizeof(pure), "%s/micro-pure-%s.gguf", models_dir(), lower);
        struct llm_engine_params p = llm_engine_params_default();
        p.model_path = path;
        p.n_threads = 2;
        p.max_model_len = 64;
        p.kv_cache_bytes = (size_t)4 << 20;
        p.quantize = types[i];
        char err[512] = "";
        llm_engine *A = llm_engine_create(&p, err, sizeof(err));
        EXPECT(A, "quantize %s: %s", types[i], err);
        p.model_path = pure;
        p.quantize = NULL;
        llm_engine *B = llm_engine_create(&p, err, sizeof(err));
        EXPECT(B, "%s: %s", pure, err);
        if (!A || !B) { llm_engine_free(A); llm_engine_free(B); continue; }
        int same = 0, n2 = 0;
        for (int64_t t = 0; t < A->model.gguf.n_tensors; t++) {
            const struct llm__gguf_tensor *a = &A->model.gguf.tensors[t], *b = llm__gguf_find_tensor(&B->model.gguf, a->name);
            if (a->n_dims != 2) continue;
            n2++;
            same += b && a->type == b->type && a->size == b->size && memcmp(a->data, b->data, a->size) == 0;
        }
        EXPECT(n2 > 3 && same == n2, "quantize %s: %d of %d matrices have llama-quantize's bytes", types[i], same, n2);
        const int32_t toks[6] = {1, 20, 33, 47, 120, 299};
        float la[6 * 300], lb[6 * 300];
        EXPECT(A->model.n_vocab == 300, "micro's vocabulary");
        int sa = llm_seq_new(A), sb = llm_seq_new(B);
        EXPECT(llm_seq_eval(A, sa, toks, 6, la, 1) == LLM_OK && llm_seq_eval(B, sb, toks, 6, lb, 1) == LLM_OK &&
                   memcmp(la, lb, sizeof(la)) == 0, "quantize %s: logits bit for bit as llama-quantize's file gives", types[i]);
        llm_engine_free(A);
        llm_engine_free(B);
    }
    // a K-quant on micro's rows (not multiples of 256): the fallback type; a name that is no type
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = 2;
    p.max_model_len = 64;
    p.kv_cache_bytes = (size_t)4 << 20;
    p.quantize = "q4_K";
    char err[512] = "";
    llm_engine *A = llm_engine_create(&p, err, sizeof(err));
    EXPECT(A, "quantize q4_K: %s", err);
    int64_t fallback = 0, k = 0;
    for (int64_t t = 0; A && t < A->model.gguf.n_tensors; t++) {
        const struct llm__gguf_tensor *a = &A->model.gguf.tensors[t];
        if (a->n_dims != 2) continue;
        fallback += a->ne[0] % 256 != 0 && a->type == LLM__TYPE_Q5_0;
        k += a->ne[0] % 256 == 0 && a->type == LLM__TYPE_Q4_K;
        EXPECT(a->type == (a->ne[0] % 256 ? LLM__TYPE_Q5_0 : LLM__TYPE_Q4_K), "%s: type %u", a->name, a->type);
    }
    EXPECT(fallback + k > 3, "q4_K at load: %lld fallbacks, %lld q4_K", (long long)fallback, (long long)k);
    llm_engine_free(A);
    static const char *const bad[] = {"q4", "int4_g128", "q8_K", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p.quantize = bad[i];
        err[0] = 0;
        A = llm_engine_create(&p, err, sizeof(err));
        EXPECT(!A && strstr(err, "is not a weight type"), "quantize '%s': %s", bad[i], err);
        llm_engine_free(A);
    }
}

int main(void) {
    snprintf(tmp_path, sizeof(tmp_path), "/tmp/llm-test-model-%d.gguf", (int)getpid());
    char path[512];
    snprintf(path, sizeof(path), "%s/tiny-q4_0.gguf", models_dir());
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "%s is missing (make models)", path);
    if (f) {
        fseek(f, 0, SEEK_END);
        size_t size = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *data = malloc(size);
        EXPECT(fread(data, 1, size, f) == size, "cannot read %s", path);
        fclose(f);
        struct llm__gguf g;
        struct llm__err e;
        EXPECT(llm__gguf_open(&g, path, &e) == LLM_OK, "%s", e.msg);
        size_t header_end = g.data_offset;
        llm__gguf_close(&g);
        fuzz_file(data, size, header_end);
        free(data);
        check_variants(path);
        check_unencodable_bytes(path);
    }
    check_arch_variants();
    check_overflowing_model();
    check_quantize_at_load();
    // files that are no model at all
    char err[512] = "";
    EXPECT(!try_load("/nonexistent/model.gguf", err, sizeof(err)) && strstr(err, "model.gguf"), "missing file: %s", err);
    EXPECT(!try_load("tests", err, sizeof(err)) && err[0], "a directory: %s", err);
    // a vocabulary-only file (fetched by tests/fixtures.sh)
    char vocab[1100];
    snprintf(vocab, sizeof(vocab), "%s/ggml-vocab-llama-spm.gguf", test_vocab_dir());
    const bool have_vocab = access(vocab, R_OK) == 0;
    EXPECT(have_vocab, "%s is missing (sh tests/fixtures.sh fetches it)", vocab);
    if (have_vocab)
        EXPECT(!try_load(vocab, err, sizeof(err)) && strstr(err, "vocabulary-only"), "vocabulary-only file: %s", err);
    remove(tmp_path);
    return test_summary("test_model_files");
}
