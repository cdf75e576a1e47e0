// Tests of the JSON reader (config.json, tokenizer.json, safetensors headers) and the
// safetensors reader: values and their decoding, numbers against strtod, malformed texts, and
// hostile safetensors files (every truncation, bad header lengths, dtypes, shapes, offsets,
// overlaps, random bit flips), each refused with a message and no crash.
#include "../llm.c"
#include "test.h"
#include <sys/resource.h>
#include <time.h>

// --- JSON ---

static bool parses(const char *text) {
    struct llm__json j;
    struct llm__err e = {{0}, LLM_OK};
    enum llm_status st = llm__json_parse(&j, text, strlen(text), "test", &e);
    if (st == LLM_OK) llm__json_free(&j);
    return st == LLM_OK;
}

static void test_json_values(void) {
    const char *t = "{\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\n\\ud83d\\ude00\"], \"b\": {\"c\": {}}, \"d\": [], "
                    "\"k\\u0065y\": 0.00001, \"big\": 12345678901234567, \"a\": 7}";
    struct llm__json j;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__json_parse(&j, t, strlen(t), "test", &e) == LLM_OK, "%s", e.msg);
    if (!j.nodes) return;
    EXPECT(j.nodes[0].type == LLM__JSON_OBJ && j.nodes[0].n == 6, "members %d", j.nodes[0].n);
    // the last of duplicate keys
    int64_t v = 0;
    EXPECT(llm__json_int(&j, llm__json_get(&j, 0, "a"), 0, 100, &v) && v == 7, "a = %lld", (long long)v);
    int32_t a = llm__json_at(&j, llm__json_get(&j, 0, "b") - 0, 0);
    EXPECT(a < 0, "b is an object, not an array");
    // the first "a" member: the array, reached through the siblings
    int32_t arr = 2;
    EXPECT(j.nodes[arr].type == LLM__JSON_ARR && j.nodes[arr].n == 6, "the array");
    double d = 0;
    EXPECT(llm__json_num(&j, llm__json_at(&j, arr, 1), &d) && d == -2500.0, "%g", d);
    EXPECT(j.nodes[llm__json_at(&j, arr, 2)].type == LLM__JSON_TRUE && j.nodes[llm__json_at(&j, arr, 3)].type == LLM__JSON_FALSE &&
               j.nodes[llm__json_at(&j, arr, 4)].type == LLM__JSON_NULL, "literals");
    size_t n = 0;
    char *s = llm__json_strdup(&j, llm__json_at(&j, arr, 5), &n);
    EXPECT(s && n == 8 && memcmp(s, "x\xc3\xa9\n\xf0\x9f\x98\x80", 8) == 0, "decoded string (%zu bytes)", n);
    free(s);
    EXPECT(llm__json_at(&j, arr, 6) < 0 && llm__json_at(&j, arr, -1) < 0, "out of range");
    EXPECT(llm__json_num(&j, llm__json_get(&j, 0, "key"), &d) && d == 1e-5, "escaped key, 1e-5: %.17g", d);
    EXPECT(llm__json_int(&j, llm__json_get(&j, 0, "big"), 0, INT64_MAX, &v) && v == 12345678901234567LL, "exact: %lld", (long long)v);
    EXPECT(llm__json_get(&j, llm__json_get(&j, llm__json_get(&j, 0, "b"), "c"), "x") < 0, "nothing in {}");
    EXPECT(j.nodes[llm__json_get(&j, 0, "d")].n == 0, "[]");
    EXPECT(llm__json_get(&j, 0, "nope") < 0, "absent key");
    EXPECT(!llm__json_int(&j, llm__json_get(&j, 0, "key"), 0, 10, &v), "a fraction is no integer");
    llm__json_free(&j);
}

static void test_json_numbers(void) {
    // against strtod (the C locale here) on numbers a config holds
    const char *nums[] = {"0", "-0", "1", "1e-05", "1e-6", "0.02", "10000.0", "500000", "1000000.0", "3.14159265358979",
                          "-123.456e-7", "6e-05", "1E+2", "0.0001220703125", "2.5e-10", "123456789012345678", "1e22", "7.5e21"};
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        struct llm__json j;
        struct llm__err e = {{0}, LLM_OK};
        EXPECT(llm__json_parse(&j, nums[i], strlen(nums[i]), "test", &e) == LLM_OK, "%s: %s", nums[i], e.msg);
        double d = -1;
        EXPECT(llm__json_num(&j, 0, &d) && d == strtod(nums[i], NULL), "%s -> %.17g, strtod %.17g", nums[i], d, strtod(nums[i], NULL));
        llm__json_free(&j);
    }
}

static void test_json_bad(void) {
    const char *bad[] = {"", " ", "{", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\":}", "{1: 2}", "01", "1.", ".5", "-", "1e", "+1",
                         "\"abc", "\"a\\x\"", "\"\\u12g4\"", "\"tab\there\"", "nul", "tru", "[1] x", "{\"a\":1,}", "\"\xff\"",
                         "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "'a'", "[NaN]", "[Infinity]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) EXPECT(!parses(bad[i]), "accepted bad JSON '%s'", bad[i]);
    const char *good[] = {"0", "[]", "{}", " [ 1 , {\"a\" : [ ] } ] ", "\"\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\xef\xbb\xbf{}",
                          "\"\xe2\x82\xac \xf0\x9f\x98\x80\"", "-0.0e+0", "null"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) EXPECT(parses(good[i]), "refused good JSON '%s'", good[i]);
    // nesting: 64 levels parse, 65 do not
    char deep[200];
    for (int d = 64; d <= 65; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        deep[2 * d] = 0;
        EXPECT(parses(deep) == (d == 64), "nesting %d", d);
    }
    struct llm__json j;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__json_parse(&j, "[1, 2 x]", 8, "cfg.json", &e) != LLM_OK && strstr(e.msg, "cfg.json") && strstr(e.msg, "byte 6"),
           "message names the file and the byte: %s", e.msg);
    // a lone surrogate decodes as U+FFFD
    EXPECT(llm__json_parse(&j, "\"\\ud800x\"", 9, "t", &e) == LLM_OK, "%s", e.msg);
    char *s = llm__json_strdup(&j, 0, NULL);
    EXPECT(s && strcmp(s, "\xef\xbf\xbdx") == 0, "lone surrogate");
    free(s);
    llm__json_free(&j);
}

// --- safetensors ---

struct st_file { char *p; size_t n; };

// A file of header text h (padded with spaces to a multiple of 8) and data bytes 0, 1, 2, ...
static struct st_file st_make(const char *h, size_t data) {
    size_t hl = strlen(h), pad = (8 - hl % 8) % 8;
    struct st_file f;
    f.n = 8 + hl + pad + data;
    f.p = malloc(f.n);
    uint64_t len = hl + pad;
    memcpy(f.p, &len, 8);
    memcpy(f.p + 8, h, hl);
    memset(f.p + 8 + hl, ' ', pad);
    for (size_t i = 0; i < data; i++) f.p[8 + hl + pad + i] = (char)i;
    return f;
}

static enum llm_status st_parse_mem(const char *p, size_t n, struct llm__safetensors *s, struct llm__err *e) {
    memset(s, 0, sizeof(*s));
    s->map = malloc(n ? n : 1);
    memcpy(s->map, p, n);
    s->size = n;
    s->owns_buf = true;
    enum llm_status st = llm__st_parse(s, e);
    return st;
}

static void st_expect_bad(const char *h, size_t data, const char *want) {
    struct st_file f = st_make(h, data);
    struct llm__safetensors s;
    struct llm__err e = {{0}, LLM_OK};
    enum llm_status st = st_parse_mem(f.p, f.n, &s, &e);
    EXPECT(st != LLM_OK && strstr(e.msg, want), "header %s: want '%s', got %d '%s'", h, want, (int)st, e.msg);
    llm__st_close(&s);
    free(f.p);
}

static void test_st_good(void) {
    const char *h = "{\"__metadata__\": {\"format\": \"pt\"}, \"w\": {\"dtype\": \"F16\", \"shape\": [2, 3], \"data_offsets\": [0, 12]}, "
                    "\"b\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [12, 24]}, \"s\": {\"dtype\": \"BF16\", \"shape\": [], "
                    "\"data_offsets\": [24, 26]}, \"z\": {\"dtype\": \"I32\", \"shape\": [0, 4], \"data_offsets\": [26, 26]}}";
    struct st_file f = st_make(h, 26);
    char path[] = "/tmp/llm_test_st_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0 && write(fd, f.p, f.n) == (ssize_t)f.n, "temp file");
    close(fd);
    for (int ra = 0; ra < 2; ra++) {
        struct llm__safetensors s;
        struct llm__err e = {{0}, LLM_OK};
        EXPECT(llm__st_open(&s, path, ra, &e) == LLM_OK, "%s", e.msg);
        EXPECT(s.n == 4, "tensors %lld", (long long)s.n);
        if (s.n == 4) {
            const size_t d0 = f.n - 26;
            EXPECT(strcmp(s.t[0].name, "w") == 0 && s.t[0].type == 1 && s.t[0].n_dims == 2 && s.t[0].shape[0] == 2 &&
                       s.t[0].shape[1] == 3 && s.t[0].size == 12 && s.t[0].data == (const uint8_t *)s.map + d0,
                   "w");
            EXPECT(s.t[1].type == 0 && s.t[1].size == 12 && s.t[1].data[0] == 12, "b");
            EXPECT(s.t[2].type == 30 && s.t[2].n_dims == 0 && s.t[2].size == 2, "scalar s");
            EXPECT(s.t[3].type == 26 && s.t[3].size == 0, "empty z");
        }
        llm__st_close(&s);
    }
    unlink(path);
    // every truncation of the file is refused, with a message
    int refused = 0;
    for (size_t n = 0; n < f.n; n++) {
        struct llm__safetensors s;
        struct llm__err e = {{0}, LLM_OK};
        refused += st_parse_mem(f.p, n, &s, &e) != LLM_OK && e.msg[0];
        llm__st_close(&s);
    }
    EXPECT(refused == (int)f.n, "%d of %zu truncations refused", refused, f.n);
    // random bit flips: parsed or refused, never a crash (ASan/UBSan watch the reads)
    uint64_t rng = 12345;
    int ok = 0;
    for (int it = 0; it < 20000; it++) {
        char *g = malloc(f.n);
        memcpy(g, f.p, f.n);
        for (int k = 0; k < 1 + it % 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(rng >> 33) % f.n;
            g[at] ^= (char)(1u << ((rng >> 20) & 7));
        }
        struct llm__safetensors s;
        struct llm__err e = {{0}, LLM_OK};
        if (st_parse_mem(g, f.n, &s, &e) == LLM_OK) {
            ok++;
            for (int64_t i = 0; i < s.n; i++)   // every tensor inside the data
                if (s.t[i].size && (s.t[i].data < (const uint8_t *)s.map || s.t[i].data + s.t[i].size > (const uint8_t *)s.map + s.size))
                    EXPECT(0, "tensor %lld outside the file", (long long)i);
        } else if (!e.msg[0]) {
            EXPECT(0, "refused without a message");
        }
        llm__st_close(&s);
        free(g);
    }
    EXPECT(ok > 0 && ok < 20000, "bit flips: %d parsed", ok);
    free(f.p);
}

static void test_st_bad(void) {
    st_expect_bad("[1]", 0, "not a JSON object");
    st_expect_bad("{\"w\": {\"dtype\": \"F8_E4M3\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 2, "dtype F8_E4M3");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 2, "2 bytes of data for 2 elements");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 2, "runs past the data");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [-2], \"data_offsets\": [0, 4]}}", 4, "dimension 0");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4, "dimension 0");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 4]}}", 4, "overflows");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 2]}}", 2, "at most 8");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [4, 0]}}", 4, "begin <= end");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0]}}", 4, "begin <= end");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2]}}", 4, "lacks");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}, \"w\": {\"dtype\": \"F16\", \"shape\": [2], "
                  "\"data_offsets\": [4, 8]}}", 8, "named twice");
    st_expect_bad("{\"a\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}, \"b\": {\"dtype\": \"F32\", \"shape\": [1], "
                  "\"data_offsets\": [2, 6]}}", 8, "overlap");
    st_expect_bad("{\"\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "empty");
    st_expect_bad("{\"a\\u0000b\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, "NUL");
    st_expect_bad("{\"__metadata__\": {\"a\": 1}}", 0, "__metadata__");
    st_expect_bad("{\"w\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]", 4, "bad JSON");
    // header lengths: past the file, past the format's limit
    struct llm__safetensors s;
    struct llm__err e = {{0}, LLM_OK};
    char buf[16] = {0};
    uint64_t len = 9;
    memcpy(buf, &len, 8);
    EXPECT(st_parse_mem(buf, 16, &s, &e) != LLM_OK && strstr(e.msg, "runs past the end"), "%s", e.msg);
    llm__st_close(&s);
    len = 100000001;
    memcpy(buf, &len, 8);
    EXPECT(st_parse_mem(buf, 16, &s, &e) != LLM_OK && strstr(e.msg, "more than the format allows"), "%s", e.msg);
    llm__st_close(&s);
    EXPECT(llm__st_open(&s, "/nonexistent/model.safetensors", false, &e) == LLM_ERR_IO && strstr(e.msg, "cannot open"), "%s", e.msg);
    EXPECT(llm__st_open(&s, "/tmp", false, &e) == LLM_ERR_IO && strstr(e.msg, "not a regular"), "%s", e.msg);
}

// --- Hugging Face directories: config.json and tensors as the GGUF view ---

// llm__hf_build over the safetensors file f (freed) with config text cfg.
static enum llm_status hf_build_file(struct llm__gguf *g, struct st_file f, const char *cfg, struct llm__err *e) {
    struct llm__hf_owned *o = calloc(1, sizeof(*o));
    o->files = calloc(1, sizeof(*o->files));
    o->n_files = 1;
    enum llm_status st = st_parse_mem(f.p, f.n, &o->files[0], e);
    free(f.p);
    if (st) { llm__hf_owned_free(o); return st; }
    struct llm__hf_texts tx = {0};
    tx.cfg = cfg;
    tx.cfg_len = strlen(cfg);
    return llm__hf_build(g, &tx, o, e);
}

// A safetensors file in memory of F32 tensors (names[i], rows[i] x cols[i], value = 1000 * i +
// element index), and llm__hf_build over it with config text cfg.
static enum llm_status hf_build(struct llm__gguf *g, const char *cfg, int n, const char *const *names, const int *rows,
                                const int *cols, struct llm__err *e) {
    char h[4096];
    size_t hn = 0, off = 0;
    hn += (size_t)snprintf(h + hn, sizeof(h) - hn, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)rows[i] * (size_t)(cols[i] ? cols[i] : 1) * 4;
        if (cols[i]) hn += (size_t)snprintf(h + hn, sizeof(h) - hn, "%s\"%s\": {\"dtype\": \"F32\", \"shape\": [%d, %d], \"data_offsets\": [%zu, %zu]}",
                                            i ? ", " : "", names[i], rows[i], cols[i], off, off + bytes);
        else hn += (size_t)snprintf(h + hn, sizeof(h) - hn, "%s\"%s\": {\"dtype\": \"F32\", \"shape\": [%d], \"data_offsets\": [%zu, %zu]}",
                                    i ? ", " : "", names[i], rows[i], off, off + bytes);
        off += bytes;
    }
    snprintf(h + hn, sizeof(h) - hn, "}");
    struct st_file f = st_make(h, 0);
    f.p = realloc(f.p, f.n + off);
    float *d = (float *)(void *)(f.p + f.n);
    for (int i = 0, k = 0; i < n; i++)
        for (int x = 0; x < rows[i] * (cols[i] ? cols[i] : 1); x++) { float v = (float)(1000 * i + x); memcpy((char *)d + 4 * (size_t)k++, &v, 4); }
    f.n += off;
    return hf_build_file(g, f, cfg, e);
}

static void test_hf_build(void) {
    const char *cfg = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, \"intermediate_size\": 16, "
                      "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"vocab_size\": 10, \"rms_norm_eps\": 1e-05, "
                      "\"max_position_embeddings\": 512, \"tie_word_embeddings\": true, \"rope_scaling\": null}";
    const char *names[] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                           "model.norm.weight", "model.layers.0.rotary_emb.inv_freq", "model.layers.0.mlp.down_proj.weight"};
    const int rows[] = {10, 8, 4, 8, 2, 8}, cols[] = {8, 8, 8, 0, 0, 16};
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(hf_build(&g, cfg, 6, names, rows, cols, &e) == LLM_OK, "%s", e.msg);
    if (!g.map) return;
    struct llm__gguf_str a = {0};
    uint32_t u = 0;
    float f = 0;
    EXPECT(llm__gguf_get_str(&g, "general.architecture", &a, &e) && a.len == 5 && memcmp(a.ptr, "llama", 5) == 0, "architecture");
    EXPECT(llm__gguf_get_u32(&g, "llama.attention.head_count_kv", &u, &e) && u == 1, "head_count_kv %u", u);
    EXPECT(llm__gguf_get_u32(&g, "llama.attention.key_length", &u, &e) && u == 4, "key_length %u", u);
    EXPECT(llm__gguf_get_u32(&g, "llama.context_length", &u, &e) && u == 512, "context_length %u", u);
    EXPECT(llm__gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f, &e) && f == 1e-5f, "eps %g", (double)f);
    EXPECT(llm__gguf_get_f32(&g, "llama.rope.freq_base", &f, &e) && f == 10000.0f, "default rope base %g", (double)f);
    EXPECT(g.n_tensors == 5, "tensors %lld (inv_freq left out)", (long long)g.n_tensors);
    const struct llm__gguf_tensor *te = llm__gguf_find_tensor(&g, "token_embd.weight");
    EXPECT(te && te->ne[0] == 8 && te->ne[1] == 10 && te->type == 0 && te->n_dims == 2, "token_embd");
    const struct llm__gguf_tensor *dn = llm__gguf_find_tensor(&g, "blk.0.ffn_down.weight");
    EXPECT(dn && dn->ne[0] == 16 && dn->ne[1] == 8, "ffn_down [16, 8]");
    const struct llm__gguf_tensor *nm = llm__gguf_find_tensor(&g, "output_norm.weight");
    EXPECT(nm && nm->n_dims == 1 && nm->ne[0] == 8 && ((const float *)nm->data)[3] == 3003.0f, "output_norm");
    // q (2 heads of 4 rows) and k (1 head): within a head, rows 0 2 1 3 of Hugging Face's order
    const int order[4] = {0, 2, 1, 3};
    const struct llm__gguf_tensor *q = llm__gguf_find_tensor(&g, "blk.0.attn_q.weight"), *k = llm__gguf_find_tensor(&g, "blk.0.attn_k.weight");
    EXPECT(q && k, "q and k");
    for (int r = 0; q && k && r < 8; r++) {
        const int src = (r / 4) * 4 + order[r % 4];
        EXPECT(((const float *)q->data)[r * 8] == (float)(1000 + src * 8), "q row %d from row %d", r, src);
        if (r < 4) EXPECT(((const float *)k->data)[r * 8 + 1] == (float)(2000 + order[r] * 8 + 1), "k row %d", r);
    }
    for (int64_t i = 0; i < g.n_tensors; i++) EXPECT((uintptr_t)g.tensors[i].data % 32 == 0, "tensor %lld aligned", (long long)i);
    llm__gguf_close(&g);

    // Qwen2: no permutation
    char cfg2[600];
    snprintf(cfg2, sizeof(cfg2), "%s", cfg);
    memcpy(strstr(cfg2, "LlamaForCausalLM"), "Qwen2ForCausalLM", 16);
    EXPECT(hf_build(&g, cfg2, 3, names, rows, cols, &e) == LLM_OK, "%s", e.msg);
    q = llm__gguf_find_tensor(&g, "blk.0.attn_q.weight");
    EXPECT(q && ((const float *)q->data)[8] == 1008.0f && llm__gguf_get_str(&g, "general.architecture", &a, &e) && a.len == 5, "qwen2 rows as stored");
    llm__gguf_close(&g);

    // Gemma 3: its norms + 1 (as F32), its four norms a layer, layer_types, the local RoPE base
    const char *gcfg = "{\"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 2, "
                       "\"intermediate_size\": 16, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, "
                       "\"vocab_size\": 10, \"sliding_window\": 512, \"layer_types\": [\"sliding_attention\", \"full_attention\"], "
                       "\"rope_local_base_freq\": 10000.0, \"rope_theta\": 1000000.0, \"query_pre_attn_scalar\": 4, "
                       "\"final_logit_softcapping\": null}";
    const char *gnames[] = {"model.layers.1.pre_feedforward_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                            "model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.q_proj.weight"};
    const int grows[] = {8, 8, 4, 8}, gcols[] = {0, 0, 0, 8};
    EXPECT(hf_build(&g, gcfg, 4, gnames, grows, gcols, &e) == LLM_OK, "gemma3: %s", e.msg);
    if (g.map) {
        const struct llm__gguf_tensor *fn = llm__gguf_find_tensor(&g, "blk.1.ffn_norm.weight"),
                                      *pn = llm__gguf_find_tensor(&g, "blk.0.post_attention_norm.weight"),
                                      *qn = llm__gguf_find_tensor(&g, "blk.0.attn_q_norm.weight"),
                                      *wq = llm__gguf_find_tensor(&g, "blk.1.attn_q.weight");
        EXPECT(fn && pn && qn && wq, "gemma's names");
        EXPECT(fn && ((const float *)fn->data)[2] == 3.0f && pn && ((const float *)pn->data)[0] == 1001.0f && qn &&
                   ((const float *)qn->data)[3] == 2004.0f, "norms + 1");
        EXPECT(wq && ((const float *)wq->data)[8] == 3008.0f, "gemma's q not permuted, not shifted");
        EXPECT(llm__gguf_get_f32(&g, "gemma3.rope.freq_base_swa", &f, &e) && f == 10000.0f, "local base");
        EXPECT(llm__gguf_get_u32(&g, "gemma3.attention.sliding_window", &u, &e) && u == 512, "window");
        int64_t ki = llm__gguf_find_key(&g, "gemma3.attention.sliding_window_pattern");
        EXPECT(ki >= 0 && g.kv[ki].type == LLM__GGUF_ARR && g.kv[ki].arr_n == 2 && g.kv[ki].arr_data[0] == 1 && g.kv[ki].arr_data[1] == 0,
               "layer_types as the pattern");
        EXPECT(llm__gguf_get_f32(&g, "gemma3.final_logit_softcapping", &f, &e) && f == 0.0f, "null soft-capping: none (0)");
        llm__gguf_close(&g);
    }
    char gbad[1024];
    snprintf(gbad, sizeof(gbad), "%s", gcfg);
    memcpy(strstr(gbad, "\"full_attention\""), "\"fuzz_attention\"", 16);
    EXPECT(hf_build(&g, gbad, 1, gnames, grows, gcols, &e) != LLM_OK && strstr(e.msg, "layer_types other"), "%s", e.msg);
    snprintf(gbad, sizeof(gbad), "%s", gcfg);
    memcpy(strstr(gbad, "\"query_pre_attn_scalar\": 4"), "\"query_pre_attn_scalar\": 8", 26);
    EXPECT(hf_build(&g, gbad, 1, gnames, grows, gcols, &e) != LLM_OK && strstr(e.msg, "query_pre_attn_scalar"), "%s", e.msg);
    snprintf(gbad, sizeof(gbad), "%s", gcfg);
    memcpy(strstr(gbad, "\"num_hidden_layers\": 2"), "\"num_hidden_layers\": 3", 22);
    EXPECT(hf_build(&g, gbad, 1, gnames, grows, gcols, &e) != LLM_OK && strstr(e.msg, "layer_types does not have"), "%s", e.msg);
    // transformers 5's rope_parameters, per layer type for Gemma 3; "default" is no scaling
    const char *v5 = "{\"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, "
                     "\"intermediate_size\": 16, \"num_attention_heads\": 2, \"head_dim\": 4, \"vocab_size\": 10, "
                     "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, \"rope_theta\": 1000000.0}, "
                     "\"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}}";
    EXPECT(hf_build(&g, v5, 1, gnames, grows, gcols, &e) == LLM_OK && llm__gguf_get_f32(&g, "gemma3.rope.freq_base", &f, &e) &&
               f == 1e6f && llm__gguf_get_f32(&g, "gemma3.rope.freq_base_swa", &f, &e) && f == 1e4f &&
               llm__gguf_get_f32(&g, "gemma3.rope.scaling.factor", &f, &e) && f == 8.0f,
           "rope_parameters: %s", e.msg);
    llm__gguf_close(&g);
    const char *v5q = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, "
                      "\"intermediate_size\": 16, \"num_attention_heads\": 2, \"vocab_size\": 10, \"rope_scaling\": {\"rope_type\": \"default\"}, "
                      "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}}";
    EXPECT(hf_build(&g, v5q, 1, names, rows, cols, &e) == LLM_OK && llm__gguf_get_f32(&g, "qwen3.rope.freq_base", &f, &e) && f == 1e6f &&
               llm__gguf_find_key(&g, "qwen3.rope.scaling.type") < 0,
           "qwen3 rope_parameters: %s", e.msg);
    llm__gguf_close(&g);
    snprintf(gbad, sizeof(gbad), "%s", gcfg);
    memcpy(strstr(gbad, "\"final_logit_softcapping\": null"), "\"attn_logit_softcapping\": 50.00", 31);
    EXPECT(hf_build(&g, gbad, 1, gnames, grows, gcols, &e) != LLM_OK && strstr(e.msg, "soft-capping with Gemma 3"), "%s", e.msg);
    snprintf(gbad, sizeof(gbad), "%s", gcfg);
    memcpy(strstr(gbad, "\"rope_theta\": 1000000.0"), "\"rope_theta\": 0.0000000", 23);
    EXPECT(hf_build(&g, gbad, 1, gnames, grows, gcols, &e) != LLM_OK && strstr(e.msg, "RoPE base"), "%s", e.msg);
    // Phi-3's fused projections
    char pcfg[600];
    snprintf(pcfg, sizeof(pcfg), "%s", cfg);
    memcpy(strstr(pcfg, "\"LlamaForCausalLM\""), "\"Phi3ForCausalLM\" ", 18);
    const char *pnames[] = {"model.layers.0.self_attn.qkv_proj.weight", "model.layers.0.mlp.gate_up_proj.weight"};
    const int prows[] = {16, 32}, pcols[] = {8, 8};
    EXPECT(hf_build(&g, pcfg, 2, pnames, prows, pcols, &e) == LLM_OK && llm__gguf_find_tensor(&g, "blk.0.attn_qkv.weight") &&
               llm__gguf_find_tensor(&g, "blk.0.ffn_up.weight") && llm__gguf_get_str(&g, "general.architecture", &a, &e) && a.len == 4,
           "phi3: %s", e.msg);
    llm__gguf_close(&g);

    // refused, with a message
    const char *bad_cfg[][2] = {
        {"{\"architectures\": [\"GPT2LMHeadModel\"]}", "GPT2LMHeadModel"},
        {"[1]", "not a JSON object"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8}", "'num_hidden_layers' is missing"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8.5, \"num_hidden_layers\": 1}", "'hidden_size' is not an integer"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"quantization_config\": {\"quant_method\": \"awq\"}}", "quantization_config"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, \"intermediate_size\": 16, "
         "\"num_attention_heads\": 3, \"vocab_size\": 10}", "not a multiple"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, \"intermediate_size\": 16, "
         "\"num_attention_heads\": 2, \"vocab_size\": 10, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}", "rope_scaling"},
    };
    for (size_t i = 0; i < sizeof(bad_cfg) / sizeof(bad_cfg[0]); i++) {
        EXPECT(hf_build(&g, bad_cfg[i][0], 3, names, rows, cols, &e) != LLM_OK && strstr(e.msg, bad_cfg[i][1]) && !g.map,
               "config %s: want '%s', got '%s'", bad_cfg[i][0], bad_cfg[i][1], e.msg);
    }
    const char *bad_names[] = {"model.layers.0.self_attn.rotary.weight"};
    const int br[] = {4}, bc[] = {4};
    EXPECT(hf_build(&g, cfg, 1, bad_names, br, bc, &e) != LLM_OK && strstr(e.msg, "not one this loader knows"), "%s", e.msg);
    const char *q_names[] = {"model.layers.0.self_attn.q_proj.weight"};
    const int qr[] = {6}, qc[] = {8};
    EXPECT(hf_build(&g, cfg, 1, q_names, qr, qc, &e) != LLM_OK && strstr(e.msg, "expected 2 heads x 4"), "%s", e.msg);
    // names: layer numbers as written, nothing else
    char out[80];
    int qk;
    EXPECT(llm__hf_name("model.layers.12.mlp.up_proj.weight", false, out, sizeof(out), &qk) && strcmp(out, "blk.12.ffn_up.weight") == 0, "%s", out);
    EXPECT(!llm__hf_name("model.layers.012.mlp.up_proj.weight", false, out, sizeof(out), &qk), "leading zero");
    EXPECT(!llm__hf_name("model.layers.x.mlp.up_proj.weight", false, out, sizeof(out), &qk), "no number");
    EXPECT(!llm__hf_name("model.layers.1.mlp.up_proj.weightx", false, out, sizeof(out), &qk), "suffix");
}

// The name index against names made to collide: 2,000 names whose FNV-1a hashes (unkeyed) share
// their low 12 bits would fill one run of slots (2,000 probes a lookup); with the index's seed
// their slots spread, and the longest run of taken slots stays short.
static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static void test_index_collisions(void) {
    enum { N = 2000 };
    static char names[N][16];
    static struct { char *name; } items[N];
    int n = 0;
    for (unsigned i = 0; n < N; i++) {
        char s[16];
        snprintf(s, sizeof(s), "w%u", i);
        if ((fnv1a(s) & 4095) != 0) continue;
        memcpy(names[n], s, sizeof(s));
        items[n].name = names[n];
        n++;
    }
    struct llm__gguf_index ix;
    EXPECT(llm__gguf_index_init(&ix, N), "init");
    for (int i = 0; i < N; i++) {
        uint64_t slot;
        EXPECT(llm__gguf_index_find(&ix, items, sizeof(items[0]), items[i].name, &slot) < 0, "%s found before it was added",
               items[i].name);
        ix.slots[slot] = i;
    }
    int longest = 0, run = 0, found = 0;
    for (uint64_t s = 0; s <= 2 * ix.mask + 1; s++) {   // twice round: a run may wrap
        run = ix.slots[s & ix.mask] >= 0 ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    for (int i = 0; i < N; i++) found += llm__gguf_index_find(&ix, items, sizeof(items[0]), items[i].name, NULL) == i;
    EXPECT(found == N, "%d of %d names found", found, N);
    EXPECT(longest < 100, "names that collide without the seed: a run of %d taken slots", longest);
    free(ix.slots);
}

static void write_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    EXPECT(f && fwrite(p, 1, n, f) == n, "write %s", path);
    if (f) fclose(f);
}

static void test_hf_many(const char *dir);

static void test_hf_dir(void) {
    char dir[] = "/tmp/llm_test_hf_XXXXXX";
    EXPECT(mkdtemp(dir) != NULL, "mkdtemp");
    const char *cfg = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, \"intermediate_size\": 16, "
                      "\"num_attention_heads\": 2, \"vocab_size\": 4, \"head_dim\": 4, \"rope_theta\": 1000000.0}";
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__hf_open_dir(&g, dir, false, &e) == LLM_ERR_IO && strstr(e.msg, "config.json"), "%s", e.msg);
    write_file(dir, "config.json", cfg, strlen(cfg));
    EXPECT(llm__hf_open_dir(&g, dir, false, &e) == LLM_ERR_IO && strstr(e.msg, "no tokenizer.json"), "%s", e.msg);
    const char *tok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}, "
                      "\"added_tokens\": [{\"id\": 3, \"content\": \"<|endoftext|>\", \"special\": true}], "
                      "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
    write_file(dir, "tokenizer.json", tok, strlen(tok));
    EXPECT(llm__hf_open_dir(&g, dir, false, &e) == LLM_ERR_IO && strstr(e.msg, "neither model.safetensors"), "%s", e.msg);
    // two shards and their index
    struct st_file a = st_make("{\"model.embed_tokens.weight\": {\"dtype\": \"F16\", \"shape\": [4, 8], \"data_offsets\": [0, 64]}}", 64);
    struct st_file b = st_make("{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\": [0, 32]}, "
                               "\"lm_head.weight\": {\"dtype\": \"BF16\", \"shape\": [4, 8], \"data_offsets\": [32, 96]}}", 96);
    write_file(dir, "model-00001-of-00002.safetensors", a.p, a.n);
    write_file(dir, "model-00002-of-00002.safetensors", b.p, b.n);
    const char *idx = "{\"metadata\": {\"total_size\": 160}, \"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\", "
                      "\"model.norm.weight\": \"model-00002-of-00002.safetensors\", \"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}";
    write_file(dir, "model.safetensors.index.json", idx, strlen(idx));
    for (int ra = 0; ra < 2; ra++) {
        EXPECT(llm__hf_open_dir(&g, dir, ra, &e) == LLM_OK, "%s", e.msg);
        struct llm__gguf_str s = {0};
        float f = 0;
        EXPECT(llm__gguf_get_str(&g, "general.architecture", &s, &e) && s.len == 5 && memcmp(s.ptr, "qwen3", 5) == 0, "qwen3");
        EXPECT(llm__gguf_get_f32(&g, "qwen3.rope.freq_base", &f, &e) && f == 1e6f, "rope base %g", (double)f);
        EXPECT(llm__gguf_get_str(&g, "general.name", &s, &e) && s.len == strlen(dir) - 5 && memcmp(s.ptr, dir + 5, s.len) == 0,
               "the directory's name");
        EXPECT(llm__gguf_get_str(&g, "tokenizer.ggml.pre", &s, &e) && s.len == 5 && memcmp(s.ptr, "gpt-2", 5) == 0, "the tokenizer");
        EXPECT(g.version == 0, "version 0: not a GGUF file");
        EXPECT(g.n_tensors == 3 && llm__gguf_find_tensor(&g, "output.weight") && llm__gguf_find_tensor(&g, "output.weight")->type == 30 &&
                   llm__gguf_find_tensor(&g, "token_embd.weight")->type == 1,
               "3 tensors from 2 shards");
        llm__gguf_close(&g);
    }
    // config.json's vocab_size against the embedding's rows, before the tokenizer makes a token for
    // every id below it: 2^24 with an added token of id 2^24 - 1 (16.7 million placeholder tokens,
    // 1.4 GB, were made from a few bytes of text) is refused, and the memory stays small
    {
        const char *big_cfg = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 8, \"num_hidden_layers\": 1, "
                              "\"intermediate_size\": 16, \"num_attention_heads\": 2, \"vocab_size\": 16777216, \"head_dim\": 4}";
        const char *big_tok = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}, "
                              "\"added_tokens\": [{\"id\": 16777215, \"content\": \"<|x|>\", \"special\": true}], "
                              "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
        write_file(dir, "config.json", big_cfg, strlen(big_cfg));
        write_file(dir, "tokenizer.json", big_tok, strlen(big_tok));
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        enum llm_status st = llm__hf_open_dir(&g, dir, false, &e);
        getrusage(RUSAGE_SELF, &ru1);
        EXPECT(st == LLM_ERR_FORMAT && strstr(e.msg, "vocab_size is 16777216, but model.embed_tokens.weight has 4 rows"),
               "vocab_size 2^24, 4 embedding rows: %s", e.msg);
        if (st == LLM_OK) llm__gguf_close(&g);
        EXPECT(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024, "vocab_size 2^24: the peak memory grew by %ld MB",
               (ru1.ru_maxrss - ru0.ru_maxrss) / 1024);
        write_file(dir, "config.json", cfg, strlen(cfg));
        write_file(dir, "tokenizer.json", tok, strlen(tok));
        // the embedding's rows must be vocab_size's, and it must be there
        // an embedding of vocab_size rows and no column (no bytes) stands for nothing
        struct st_file empty = st_make("{\"model.embed_tokens.weight\": {\"dtype\": \"F16\", \"shape\": [16777216, 0], "
                                       "\"data_offsets\": [0, 0]}}", 0);
        write_file(dir, "empty.safetensors", empty.p, empty.n);
        free(empty.p);
        write_file(dir, "config.json", big_cfg, strlen(big_cfg));
        write_file(dir, "tokenizer.json", big_tok, strlen(big_tok));
        const char *idx4 = "{\"weight_map\": {\"model.embed_tokens.weight\": \"empty.safetensors\"}}";
        write_file(dir, "model.safetensors.index.json", idx4, strlen(idx4));
        getrusage(RUSAGE_SELF, &ru0);
        st = llm__hf_open_dir(&g, dir, false, &e);
        getrusage(RUSAGE_SELF, &ru1);
        EXPECT(st == LLM_ERR_FORMAT && strstr(e.msg, "not a matrix of at least one column"), "an empty embedding: %s", e.msg);
        if (st == LLM_OK) llm__gguf_close(&g);
        EXPECT(ru1.ru_maxrss - ru0.ru_maxrss < 256 * 1024, "an empty embedding: the peak memory grew by %ld MB",
               (ru1.ru_maxrss - ru0.ru_maxrss) / 1024);
        char ep[512];
        snprintf(ep, sizeof(ep), "%s/empty.safetensors", dir);
        unlink(ep);
        write_file(dir, "config.json", cfg, strlen(cfg));
        write_file(dir, "tokenizer.json", tok, strlen(tok));
        const char *idx3 = "{\"weight_map\": {\"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
        write_file(dir, "model.safetensors.index.json", idx3, strlen(idx3));
        EXPECT(llm__hf_open_dir(&g, dir, false, &e) == LLM_ERR_FORMAT && strstr(e.msg, "no tensor model.embed_tokens.weight"),
               "no embedding: %s", e.msg);
    }
    // an index that names a file outside the directory, a missing shard, a tensor not in its shard
    const char *bad[][2] = {
        {"{\"weight_map\": {\"model.norm.weight\": \"../model-00002-of-00002.safetensors\"}}", "not a file name"},
        {"{\"weight_map\": {\"model.norm.weight\": \"..\"}}", "not a file name"},
        {"{\"weight_map\": {\"model.norm.weight\": 3}}", "not a string"},
        {"{\"weight_map\": {\"model.norm.weight\": \"model-00003-of-00002.safetensors\"}}", "cannot open"},
        {"{\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}", "is not in"},
        {"{\"weight_map\": {}}", "no weight_map"},
        {"{\"weights\": 1}", "no weight_map"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(dir, "model.safetensors.index.json", bad[i][0], strlen(bad[i][0]));
        EXPECT(llm__hf_open_dir(&g, dir, false, &e) != LLM_OK && strstr(e.msg, bad[i][1]) && !g.map, "index %s: want '%s', got '%s'",
               bad[i][0], bad[i][1], e.msg);
    }
    test_hf_many(dir);
    char path[512];
    const char *files[] = {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                           "tokenizer.json"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(a.p);
    free(b.p);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Many tensors: a header of 200,000 (empty) tensors parses in time linear in its size (the
// duplicate check is a hash set: a pairwise check takes minutes here), and a name repeated at its
// end is found. A directory whose index maps 200,000 tensors to two shards of 100,000 each is
// read as fast (the shards and each tensor's shard are looked up by name, not searched).
// The bound of 10 s is far above the linear time (well under a second, ASan included) and far
// below the quadratic one.
enum { MANY = 200000 };
static char *many_header(int from, int to, const char *extra) {
    size_t cap = (size_t)(to - from) * 96 + 256, n = 0;
    char *h = malloc(cap);
    n += (size_t)snprintf(h + n, cap - n, "{");
    for (int i = from; i < to; i++)
        n += (size_t)snprintf(h + n, cap - n, "%s\"t%06d\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}",
                              i > from ? ", " : "", i);
    snprintf(h + n, cap - n, "%s}", extra);
    return h;
}

static void test_st_many(void) {
    char *h = many_header(0, MANY, "");
    struct st_file f = st_make(h, 0);
    struct llm__safetensors s;
    struct llm__err e = {{0}, LLM_OK};
    double t0 = now_s();
    enum llm_status st = st_parse_mem(f.p, f.n, &s, &e);
    double dt = now_s() - t0;
    EXPECT(st == LLM_OK && s.n == MANY && llm__st_find(&s, "t123456") == &s.t[123456] && !llm__st_find(&s, "t1234567"),
           "%d tensors: %s", MANY, e.msg);
    EXPECT(dt < 10.0, "%d tensors: %.1f s (not linear)", MANY, dt);
    printf("  a header of %d tensors: %.3f s\n", MANY, dt);
    llm__st_close(&s);
    free(f.p);
    free(h);
    h = many_header(0, MANY, ", \"t000007\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}");
    f = st_make(h, 0);
    t0 = now_s();
    st = st_parse_mem(f.p, f.n, &s, &e);
    dt = now_s() - t0;
    EXPECT(st == LLM_ERR_FORMAT && strstr(e.msg, "'t000007' is named twice"), "a repeated name: %s", e.msg);
    EXPECT(dt < 10.0, "a repeated name among %d: %.1f s (not linear)", MANY, dt);
    llm__st_close(&s);
    free(f.p);
    free(h);
}

static void test_hf_many(const char *dir) {
    for (int k = 0; k < 2; k++) {
        char *h = many_header(k * MANY / 2, (k + 1) * MANY / 2, "");
        struct st_file f = st_make(h, 0);
        char name[64];
        snprintf(name, sizeof(name), "model-%05d-of-00002.safetensors", k + 1);
        write_file(dir, name, f.p, f.n);
        free(f.p);
        free(h);
    }
    size_t cap = (size_t)MANY * 64 + 64, n = 0;
    char *idx = malloc(cap);
    n += (size_t)snprintf(idx + n, cap - n, "{\"weight_map\": {");
    for (int i = 0; i < MANY; i++)
        n += (size_t)snprintf(idx + n, cap - n, "%s\"t%06d\": \"model-%05d-of-00002.safetensors\"", i ? ", " : "", i, 1 + i / (MANY / 2));
    n += (size_t)snprintf(idx + n, cap - n, "}}");
    write_file(dir, "model.safetensors.index.json", idx, n);
    free(idx);
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    double t0 = now_s();
    enum llm_status st = llm__hf_open_dir(&g, dir, false, &e);
    double dt = now_s() - t0;
    // every shard and tensor found; then refused for what the model lacks
    EXPECT(st == LLM_ERR_FORMAT && strstr(e.msg, "no tensor model.embed_tokens.weight"), "%d tensors in 2 shards: %s", MANY, e.msg);
    EXPECT(dt < 10.0, "%d tensors in 2 shards: %.1f s (not linear)", MANY, dt);
    printf("  a directory of %d tensors in 2 shards: %.3f s\n", MANY, dt);
}

// --- AWQ / GPTQ: quantization_config and quantized tensors ---

// A quantized down projection (32 inputs -> 32 outputs, group 32) as safetensors tensors named
// P.qweight / P.qzeros / P.scales (/ P.g_idx) with the data given (n words each; scales fp16
// bits), built with config.json cfg + "quantization_config": qc. Tensors listed in `drop` (a
// suffix) are left out; `qw_type` replaces the qweight's dtype.
static enum llm_status hf_quant_build(struct llm__gguf *g, const char *qc, bool gptq, const uint32_t *qw, const uint32_t *qz,
                                      const uint16_t *sc, const int32_t *gidx, const char *drop, const char *qw_type,
                                      struct llm__err *e) {
    const char *P = "model.layers.0.mlp.down_proj";
    // AWQ: qweight [32, 4], qzeros [1, 4]; GPTQ: qweight [4, 32], qzeros [1, 4], g_idx [32]; scales [1, 32]
    char h[2048];
    size_t hn = (size_t)snprintf(h, sizeof(h), "{");
    size_t off = 0, bytes[4] = {512, 16, 64, 128};
    const char *sfx[4] = {"qweight", "qzeros", "scales", "g_idx"}, *dt[4] = {qw_type, "I32", "F16", "I32"};
    const char *shape[4] = {gptq ? "[4, 32]" : "[32, 4]", "[1, 4]", "[1, 32]", "[32]"};
    size_t at[4] = {0};
    for (int k = 0; k < (gptq ? 4 : 3); k++) {
        if (drop && strcmp(drop, sfx[k]) == 0) continue;
        at[k] = off;
        hn += (size_t)snprintf(h + hn, sizeof(h) - hn, "%s\"%s.%s\": {\"dtype\": \"%s\", \"shape\": %s, \"data_offsets\": [%zu, %zu]}",
                               hn > 1 ? ", " : "", P, sfx[k], dt[k], strcmp(dt[k], "F16") == 0 && k == 0 ? "[32, 8]" : shape[k],
                               off, off + bytes[k]);
        off += bytes[k];
    }
    snprintf(h + hn, sizeof(h) - hn, "}");
    struct st_file f = st_make(h, off);
    char *d = f.p + f.n - off;
    if (!(drop && !strcmp(drop, "qweight"))) memcpy(d + at[0], qw, 512);
    if (!(drop && !strcmp(drop, "qzeros"))) memcpy(d + at[1], qz, 16);
    if (!(drop && !strcmp(drop, "scales"))) memcpy(d + at[2], sc, 64);
    if (gptq && !(drop && !strcmp(drop, "g_idx"))) memcpy(d + at[3], gidx, 128);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32, \"num_hidden_layers\": 1, "
             "\"intermediate_size\": 32, \"num_attention_heads\": 2, \"vocab_size\": 10%s%s}", qc ? ", \"quantization_config\": " : "",
             qc ? qc : "");
    return hf_build_file(g, f, cfg, e);
}

static void test_hf_quant(void) {
    // the data: quant of (input i, output o) = (3i + 5o) % 16, zero of output o = o % 16 (GPTQ v1:
    // stored less one), scale of output o = 0.5 + o / 64 (exact in fp16): w = s (q - z)
    uint32_t awq_w[128] = {0}, gptq_w[128] = {0}, awq_z[4] = {0}, gptq_z[4] = {0};
    uint16_t sc[32];
    int32_t gidx[32];
    static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};   // AWQ: nibble k of word c is output 8c + order[k]
    for (int o = 0; o < 32; o++) {
        sc[o] = llm__fp32_to_fp16(0.5f + (float)o / 64.0f);
        for (int i = 0; i < 32; i++) gptq_w[(i / 8) * 32 + o] |= (uint32_t)((3 * i + 5 * o) % 16) << (4 * (i % 8));
        gptq_z[o / 8] |= (uint32_t)((o % 16 + 15) % 16) << (4 * (o % 8));
    }
    for (int c = 0; c < 4; c++)
        for (int k = 0; k < 8; k++) {
            const int o = 8 * c + order[k];
            awq_z[c] |= (uint32_t)(o % 16) << (4 * k);
            for (int i = 0; i < 32; i++) awq_w[i * 4 + c] |= (uint32_t)((3 * i + 5 * o) % 16) << (4 * k);
        }
    for (int i = 0; i < 32; i++) gidx[i] = 0;
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    const char *awq = "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"zero_point\": true, \"version\": \"GEMM\"}";
    const char *gptq = "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"sym\": false, \"desc_act\": false}";
    for (int m = 0; m < 2; m++) {
        EXPECT(hf_quant_build(&g, m ? gptq : awq, m, m ? gptq_w : awq_w, m ? gptq_z : awq_z, sc, gidx, NULL, "I32", &e) == LLM_OK,
               "%s: %s", m ? "gptq" : "awq", e.msg);
        const struct llm__gguf_tensor *t = g.map ? llm__gguf_find_tensor(&g, "blk.0.ffn_down.weight") : NULL;
        EXPECT(t && t->type == LLM__TYPE_G4_32 && t->ne[0] == 32 && t->ne[1] == 32 && !t->perm, "%s: an int4_g32 tensor", m ? "gptq" : "awq");
        int wrong = 0;
        for (int o = 0; t && o < 32; o++) {
            float w[32];
            llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)o * 20, w, 32);
            // (GPTQ v1 reads a stored zero z - 1 as z: a zero of 0, stored as 15, is read as 16, as GPTQ's kernels do)
            const int z = m && o % 16 == 0 ? 16 : o % 16;
            for (int i = 0; i < 32; i++) wrong += w[i] != (0.5f + (float)o / 64.0f) * (float)((3 * i + 5 * o) % 16 - z);
        }
        EXPECT(wrong == 0, "%s: %d weights decode wrong", m ? "gptq" : "awq", wrong);
        if (g.map) llm__gguf_close(&g);
    }
    // act-order: input i in group i % 2 (with group 16: two groups) -> columns sorted by group
    const char *gptq16 = "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 16, \"checkpoint_format\": \"gptq\"}";
    EXPECT(hf_quant_build(&g, gptq16, true, gptq_w, gptq_z, sc, gidx, NULL, "I32", &e) == LLM_ERR_UNSUPPORTED &&
               strstr(e.msg, "multiple of 32"), "group 16: %s", e.msg);
    // (groups of 32 with 32 inputs: one group; every g_idx 0 is the identity; a 1 is out of range)
    gidx[5] = 1;
    EXPECT(hf_quant_build(&g, gptq, true, gptq_w, gptq_z, sc, gidx, NULL, "I32", &e) == LLM_ERR_FORMAT && strstr(e.msg, "g_idx"),
           "g_idx out of range: %s", e.msg);
    gidx[5] = 0;
    // refused configurations and tensors, each with its message
    static const struct { const char *qc, *want; } bad_qc[] = {
        {"{\"quant_method\": \"bitsandbytes\", \"bits\": 4, \"group_size\": 32}", "(awq, gptq)"},
        {"{\"quant_method\": \"gptq\", \"bits\": 3, \"group_size\": 32}", "3 bits"},
        {"{\"quant_method\": \"awq\", \"bits\": 8, \"group_size\": 32}", "8 bits"},
        {"{\"quant_method\": \"gptq\", \"group_size\": 32}", "unknown bits"},
        {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 0}", "group_size"},
        {"{\"quant_method\": \"gptq\", \"bits\": 4}", "group_size"},
        {"{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"version\": \"gemv\"}", "layout \"gemv\""},
        {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"checkpoint_format\": \"marlin\"}", "layout \"marlin\""},
        {"{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"format\": \"gemv_fast\"}", "layout \"gemv_fast\""},
        {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"format\": \"bitblas\"}", "layout \"bitblas\""},
        {"{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"zero_point\": false}", "without zero points"},
        {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"is_marlin_format\": true}", "Marlin"},
        {"[1]", "not an object"},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(bad_qc); i++) {
        e.msg[0] = 0;
        EXPECT(hf_quant_build(&g, bad_qc[i].qc, true, gptq_w, gptq_z, sc, gidx, NULL, "I32", &e) != LLM_OK && strstr(e.msg, bad_qc[i].want),
               "%s: %s", bad_qc[i].qc, e.msg);
    }
    static const struct { const char *drop, *type, *want; } bad_t[] = {
        {"scales", "I32", "no scales"}, {"qzeros", "I32", "no qzeros"}, {"qweight", "I32", "belongs to no qweight"},
        {NULL, "F16", "must be I32"},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(bad_t); i++) {
        e.msg[0] = 0;
        EXPECT(hf_quant_build(&g, gptq, true, gptq_w, gptq_z, sc, gidx, bad_t[i].drop, bad_t[i].type, &e) != LLM_OK &&
                   strstr(e.msg, bad_t[i].want), "%s %s: %s", bad_t[i].drop ? bad_t[i].drop : "-", bad_t[i].type, e.msg);
    }
    // AWQ's tensors read as GPTQ's: the shapes do not fit
    EXPECT(hf_quant_build(&g, gptq, false, awq_w, awq_z, sc, gidx, NULL, "I32", &e) == LLM_ERR_FORMAT && strstr(e.msg, "do not fit"),
           "%s", e.msg);
    // quantized tensors without quantization_config
    EXPECT(hf_quant_build(&g, NULL, false, awq_w, awq_z, sc, gidx, NULL, "I32", &e) == LLM_ERR_UNSUPPORTED &&
               strstr(e.msg, "not one this loader knows"), "%s", e.msg);
}

int main(void) {
    test_json_values();
    test_json_numbers();
    test_json_bad();
    test_st_good();
    test_st_bad();
    test_st_many();
    test_index_collisions();
    test_hf_build();
    test_hf_dir();
    test_hf_quant();
    return test_summary("test_safetensors");
}
