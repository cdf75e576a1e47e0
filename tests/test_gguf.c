// Tests of the GGUF reader and writer (tests/gguf_writer.h): a round trip of every key/value
// type and several tensor types, hostile files (every truncation, thousands of random bit
// flips, hand-crafted bad headers), and files of another writer: llama.cpp's vocabularies
// (tests/fixtures.sh) and, when $LLM_GOLDEN_MODELS names a folder, its models.
#include "../llm.c"
#include "gguf_writer.h"
#include "test.h"

#include <glob.h>

// --- helpers ---

// A growable byte buffer for hand-crafted files.
struct buf { uint8_t *p; size_t n, cap; };

static void buf_put(struct buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void buf_u32(struct buf *b, uint32_t v) { buf_put(b, &v, 4); }
static void buf_u64(struct buf *b, uint64_t v) { buf_put(b, &v, 8); }
static void buf_str(struct buf *b, const char *s) { buf_u64(b, strlen(s)); buf_put(b, s, strlen(s)); }
static void buf_pad(struct buf *b, size_t align) {
    static const uint8_t zero[64];
    buf_put(b, zero, (align - b->n % align) % align);
}
static void buf_hdr(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    buf_put(b, "GGUF", 4);
    buf_u32(b, version);
    buf_u64(b, n_tensors);
    buf_u64(b, n_kv);
}
static void buf_kv_u32(struct buf *b, const char *key, uint32_t v) {
    buf_str(b, key);
    buf_u32(b, LLM__GGUF_U32);
    buf_u32(b, v);
}
static void buf_tensor(struct buf *b, const char *name, uint32_t n_dims, const int64_t *ne,
                       uint32_t type, uint64_t offset) {
    buf_str(b, name);
    buf_u32(b, n_dims);
    buf_put(b, ne, 8 * (size_t)n_dims);
    buf_u32(b, type);
    buf_u64(b, offset);
}

// An exact-size heap copy, so that ASan catches any read past the end.
static uint8_t *exact_copy(const void *p, size_t n) {
    uint8_t *c = malloc(n ? n : 1);
    if (!c) abort();
    memcpy(c, p, n);
    return c;
}

// Opens bytes from an exact-size copy; expects failure with a message containing `word`.
static void expect_bad(const char *what, const struct buf *b, const char *word, enum llm_status want) {
    uint8_t *copy = exact_copy(b->p, b->n);
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    enum llm_status st = llm__gguf_open_memory(&g, copy, b->n, &e);
    EXPECT(st != LLM_OK, "%s: opened", what);
    EXPECT(st == want, "%s: status %d (%s), expected %d", what, (int)st, e.msg, (int)want);
    EXPECT(strstr(e.msg, word) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, word);
    EXPECT(g.kv == NULL && g.tensors == NULL, "%s: not cleaned up", what);
    free(copy);
}

// Everything a successful open hands out lies inside the mapping.
static bool inside(const struct llm__gguf *g, const void *p, uint64_t n) {
    const uint8_t *base = g->map, *q = p;
    return q >= base && q <= base + g->size && n <= (uint64_t)(base + g->size - q);
}
static bool all_inside(const struct llm__gguf *g) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = &g->tensors[i];
        if (!inside(g, t->data, t->size)) return false;
        if (t->size != llm__row_bytes((int)t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]))
            return false;
    }
    for (int64_t i = 0; i < g->n_kv; i++) {
        const struct llm__gguf_kv *kv = &g->kv[i];
        if (!inside(g, kv->raw, kv->raw_len)) return false;
        if (kv->type == LLM__GGUF_STR && !inside(g, kv->v.str.ptr, kv->v.str.len)) return false;
        if (kv->type == LLM__GGUF_ARR && kv->arr_type == LLM__GGUF_STR)
            for (uint64_t j = 0; j < kv->arr_n; j++)
                if (!inside(g, kv->arr_str[j].ptr, kv->arr_str[j].len)) return false;
        if (kv->type == LLM__GGUF_ARR && kv->arr_type != LLM__GGUF_STR &&
            !inside(g, kv->arr_data, kv->arr_n * llm__gguf_type_size(kv->arr_type)))
            return false;
    }
    return true;
}

// Runs a writer into memory (open_memstream) and returns an exact-size copy.
static uint8_t *finish_to_memory(struct llm__gguf_writer *w, size_t *size,
                                 void (*write_data)(struct llm__gguf_writer *, struct llm__err *)) {
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(f != NULL, "open_memstream");
    enum llm_status st = llm__gguf_writer_begin(w, f, &e);
    EXPECT(st == LLM_OK, "begin: %s", e.msg);
    write_data(w, &e);
    st = llm__gguf_writer_finish(w, &e);
    EXPECT(st == LLM_OK, "finish: %s", e.msg);
    fclose(f);
    uint8_t *out = exact_copy(mem, len);
    free(mem);
    *size = len;
    return out;
}

// --- round trip ---

#define N_RT_TENSORS 6
static const struct { const char *name; uint32_t type; int n_dims; int64_t ne[4]; } rt_tensors[N_RT_TENSORS] = {
    {"a.weight", LLM__TYPE_F32, 2, {8, 3, 1, 1}},
    {"b.bias", LLM__TYPE_F16, 1, {64, 1, 1, 1}},
    {"blk.0.q8", LLM__TYPE_Q8_0, 2, {64, 2, 1, 1}},
    {"blk.0.q4k", LLM__TYPE_Q4_K, 4, {256, 2, 1, 2}},
    {"c.bf16", LLM__TYPE_BF16, 3, {5, 3, 2, 1}},
    {"d.q6k", LLM__TYPE_Q6_K, 2, {512, 1, 1, 1}},
};
static uint8_t *rt_data[N_RT_TENSORS];
static size_t rt_size[N_RT_TENSORS];

static void rt_make_data(void) {
    unsigned long long s = 42;
    for (int i = 0; i < N_RT_TENSORS; i++) {
        const int64_t *ne = rt_tensors[i].ne;
        rt_size[i] = llm__row_bytes((int)rt_tensors[i].type, ne[0]) * (size_t)(ne[1] * ne[2] * ne[3]);
        rt_data[i] = malloc(rt_size[i]);
        if (rt_tensors[i].type == LLM__TYPE_F32)   // real floats; the other types get any bytes
            for (size_t j = 0; j < rt_size[i] / 4; j++) ((float *)rt_data[i])[j] = (float)test_rng_normal(&s);
        else
            for (size_t j = 0; j < rt_size[i]; j++) rt_data[i][j] = (uint8_t)test_rng_next(&s);
    }
}

static void rt_write_whole(struct llm__gguf_writer *w, struct llm__err *e) {
    for (int i = 0; i < N_RT_TENSORS; i++) {
        enum llm_status st = llm__gguf_writer_tensor_data(w, i, rt_data[i], e);
        EXPECT(st == LLM_OK, "tensor_data %d: %s", i, e->msg);
    }
}

// The same bytes in odd chunks that cross tensor boundaries.
static void rt_write_chunked(struct llm__gguf_writer *w, struct llm__err *e) {
    size_t total = 0, done = 0;
    for (int i = 0; i < N_RT_TENSORS; i++) total += rt_size[i];
    uint8_t *all = malloc(total);
    for (int i = 0; i < N_RT_TENSORS; i++) memcpy(all + done, rt_data[i], rt_size[i]), done += rt_size[i];
    unsigned long long s = 7;
    for (done = 0; done < total;) {
        size_t n = 1 + (size_t)(test_rng_next(&s) % 300);
        if (n > total - done) n = total - done;
        enum llm_status st = llm__gguf_writer_write(w, all + done, n, e);
        EXPECT(st == LLM_OK, "write: %s", e->msg);
        done += n;
    }
    free(all);
}

static const uint8_t rt_u8s[] = {0, 1, 255};
static const int8_t rt_i8s[] = {-128, 0, 127};
static const uint16_t rt_u16s[] = {0, 65535};
static const int16_t rt_i16s[] = {-32768, 32767};
static const uint32_t rt_u32s[] = {0, 1, 4294967295u};
static const int32_t rt_i32s[] = {INT32_MIN, -1, INT32_MAX};
static const float rt_f32s[] = {1.5f, -0.0f, 3.4e38f, 1e-40f};
static const uint8_t rt_bools[] = {1, 0, 1};
static const uint64_t rt_u64s[] = {UINT64_MAX, 0};
static const int64_t rt_i64s[] = {INT64_MIN, INT64_MAX};
static const double rt_f64s[] = {3.141592653589793, -1e300};
static const char *const rt_strs[] = {"hello", "", "h\xc3\xa9llo w\xc3\xb6rld", "\xe4\xb8\xad\xe6\x96\x87"};

static void rt_fill(struct llm__gguf_writer *w, uint32_t alignment) {
    struct llm__err e = {{0}, LLM_OK};
    int bad = 0;
    llm__gguf_writer_init(w);
    if (alignment) bad += llm__gguf_writer_set_u32(w, "general.alignment", alignment, &e) != LLM_OK;
    bad += llm__gguf_writer_set_u8(w, "t.u8", 200, &e) != LLM_OK;
    bad += llm__gguf_writer_set_i8(w, "t.i8", -100, &e) != LLM_OK;
    bad += llm__gguf_writer_set_u16(w, "t.u16", 60000, &e) != LLM_OK;
    bad += llm__gguf_writer_set_i16(w, "t.i16", -30000, &e) != LLM_OK;
    bad += llm__gguf_writer_set_u32(w, "t.u32", 4000000000u, &e) != LLM_OK;
    bad += llm__gguf_writer_set_i32(w, "t.i32", -2000000000, &e) != LLM_OK;
    bad += llm__gguf_writer_set_u64(w, "t.u64", 18000000000000000000ull, &e) != LLM_OK;
    bad += llm__gguf_writer_set_i64(w, "t.i64", -9000000000000000000ll, &e) != LLM_OK;
    bad += llm__gguf_writer_set_f32(w, "t.f32", 0.15625f, &e) != LLM_OK;
    bad += llm__gguf_writer_set_f64(w, "t.f64", -2.5e-300, &e) != LLM_OK;
    bad += llm__gguf_writer_set_f64(w, "t.big", 1e300, &e) != LLM_OK;
    bad += llm__gguf_writer_set_bool(w, "t.bool", true, &e) != LLM_OK;
    bad += llm__gguf_writer_set_bool(w, "t.false", false, &e) != LLM_OK;
    bad += llm__gguf_writer_set_str(w, "t.str", "Hello, GGUF \xe2\x9c\x93", &e) != LLM_OK;
    bad += llm__gguf_writer_set_str(w, "t.empty", "", &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.u8", LLM__GGUF_U8, 3, rt_u8s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.i8", LLM__GGUF_I8, 3, rt_i8s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.u16", LLM__GGUF_U16, 2, rt_u16s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.i16", LLM__GGUF_I16, 2, rt_i16s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.u32", LLM__GGUF_U32, 3, rt_u32s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.i32", LLM__GGUF_I32, 3, rt_i32s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.f32", LLM__GGUF_F32, 4, rt_f32s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.bool", LLM__GGUF_BOOL, 3, rt_bools, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.u64", LLM__GGUF_U64, 2, rt_u64s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.i64", LLM__GGUF_I64, 2, rt_i64s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.f64", LLM__GGUF_F64, 2, rt_f64s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr(w, "a.empty", LLM__GGUF_U32, 0, rt_u32s, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr_str(w, "a.str", 4, rt_strs, &e) != LLM_OK;
    bad += llm__gguf_writer_set_arr_str(w, "a.str_empty", 0, rt_strs, &e) != LLM_OK;
    for (int i = 0; i < N_RT_TENSORS; i++)
        bad += llm__gguf_writer_add_tensor(w, rt_tensors[i].name, rt_tensors[i].type,
                                           rt_tensors[i].n_dims, rt_tensors[i].ne, &e) != LLM_OK;
    EXPECT(bad == 0, "setting up the writer: %d failures, last: %s", bad, e.msg);
}

static void rt_check(const uint8_t *file, size_t size, uint32_t alignment) {
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    enum llm_status st = llm__gguf_open_memory(&g, file, size, &e);
    EXPECT(st == LLM_OK, "round trip open: %s", e.msg);
    if (st != LLM_OK) return;
    size_t align = alignment ? alignment : 32;
    EXPECT(g.version == 3, "version %u", g.version);
    EXPECT(g.alignment == align, "alignment %zu", g.alignment);
    EXPECT(g.n_kv == 29 + (alignment != 0), "n_kv %lld", (long long)g.n_kv);
    EXPECT(g.n_tensors == N_RT_TENSORS, "n_tensors %lld", (long long)g.n_tensors);
    EXPECT(g.data_offset % align == 0, "data offset %zu", g.data_offset);

    // scalars, through the raw fields and the getters
    const struct llm__gguf_kv *kv;
#define KV(k) (kv = &g.kv[llm__gguf_find_key(&g, k) >= 0 ? llm__gguf_find_key(&g, k) : 0], \
               llm__gguf_find_key(&g, k) >= 0)
    EXPECT(KV("t.u8") && kv->type == LLM__GGUF_U8 && kv->v.u64 == 200, "u8");
    EXPECT(KV("t.i8") && kv->type == LLM__GGUF_I8 && kv->v.i64 == -100, "i8");
    EXPECT(KV("t.u16") && kv->type == LLM__GGUF_U16 && kv->v.u64 == 60000, "u16");
    EXPECT(KV("t.i16") && kv->type == LLM__GGUF_I16 && kv->v.i64 == -30000, "i16");
    EXPECT(KV("t.u32") && kv->type == LLM__GGUF_U32 && kv->v.u64 == 4000000000u, "u32");
    EXPECT(KV("t.i32") && kv->type == LLM__GGUF_I32 && kv->v.i64 == -2000000000, "i32");
    EXPECT(KV("t.u64") && kv->type == LLM__GGUF_U64 && kv->v.u64 == 18000000000000000000ull, "u64");
    EXPECT(KV("t.i64") && kv->type == LLM__GGUF_I64 && kv->v.i64 == -9000000000000000000ll, "i64");
    EXPECT(KV("t.f32") && kv->type == LLM__GGUF_F32 && kv->v.f64 == 0.15625, "f32");
    EXPECT(KV("t.f64") && kv->type == LLM__GGUF_F64 && kv->v.f64 == -2.5e-300, "f64");
    EXPECT(KV("t.bool") && kv->type == LLM__GGUF_BOOL && kv->v.u64 == 1, "bool");
    EXPECT(KV("t.false") && kv->type == LLM__GGUF_BOOL && kv->v.u64 == 0, "bool false");
    EXPECT(KV("t.str") && kv->type == LLM__GGUF_STR && llm__gguf_str_eq(kv->v.str, "Hello, GGUF \xe2\x9c\x93"), "str");
    EXPECT(KV("t.empty") && kv->type == LLM__GGUF_STR && kv->v.str.len == 0, "empty str");
#undef KV
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    float f32 = 0;
    bool b = false;
    struct llm__gguf_str s = {0};
    EXPECT(llm__gguf_get_u32(&g, "t.u8", &u32, &e) && u32 == 200, "get_u32 from u8: %s", e.msg);
    EXPECT(llm__gguf_get_u32(&g, "t.u32", &u32, &e) && u32 == 4000000000u, "get_u32: %s", e.msg);
    EXPECT(llm__gguf_get_i32(&g, "t.i16", &i32, &e) && i32 == -30000, "get_i32: %s", e.msg);
    EXPECT(llm__gguf_get_u64(&g, "t.u64", &u64, &e) && u64 == 18000000000000000000ull, "get_u64: %s", e.msg);
    EXPECT(llm__gguf_get_f32(&g, "t.f32", &f32, &e) && f32 == 0.15625f, "get_f32: %s", e.msg);
    EXPECT(llm__gguf_get_f32(&g, "t.i8", &f32, &e) && f32 == -100.0f, "get_f32 from i8: %s", e.msg);
    EXPECT(llm__gguf_get_bool(&g, "t.bool", &b, &e) && b, "get_bool: %s", e.msg);
    EXPECT(llm__gguf_get_str(&g, "t.str", &s, &e) && s.len == 15, "get_str: %s", e.msg);
    e.msg[0] = 0;
    EXPECT(!llm__gguf_get_u32(&g, "t.i8", &u32, &e) && strstr(e.msg, "range") && strstr(e.msg, "t.i8"),
           "negative to u32: '%s'", e.msg);
    EXPECT(!llm__gguf_get_u32(&g, "t.u64", &u32, &e) && strstr(e.msg, "range"), "u64 to u32: '%s'", e.msg);
    EXPECT(!llm__gguf_get_i32(&g, "t.u32", &i32, &e) && strstr(e.msg, "range"), "u32 to i32: '%s'", e.msg);
    EXPECT(!llm__gguf_get_u32(&g, "t.str", &u32, &e) && strstr(e.msg, "string") && strstr(e.msg, "t.str"),
           "str to u32: '%s'", e.msg);
    EXPECT(llm__gguf_get_f32(&g, "t.f64", &f32, &e), "tiny f64 to f32 is fine: '%s'", e.msg);
    EXPECT(!llm__gguf_get_f32(&g, "t.big", &f32, &e) && strstr(e.msg, "range"), "1e300 to f32: '%s'", e.msg);
    EXPECT(!llm__gguf_get_str(&g, "t.u8", &s, &e) && strstr(e.msg, "u8"), "u8 to str: '%s'", e.msg);
    EXPECT(!llm__gguf_get_bool(&g, "t.u8", &b, &e) && strstr(e.msg, "bool"), "u8 to bool: '%s'", e.msg);
    EXPECT(!llm__gguf_get_u32(&g, "no.such.key", &u32, &e) && strstr(e.msg, "missing") &&
           strstr(e.msg, "no.such.key"), "missing: '%s'", e.msg);
    EXPECT(llm__gguf_find_key(&g, "no.such.key") == -1, "find_key absent");

    // arrays
    static const struct { const char *key; uint32_t type; uint64_t n; const void *data; } arrs[] = {
        {"a.u8", LLM__GGUF_U8, 3, rt_u8s}, {"a.i8", LLM__GGUF_I8, 3, rt_i8s},
        {"a.u16", LLM__GGUF_U16, 2, rt_u16s}, {"a.i16", LLM__GGUF_I16, 2, rt_i16s},
        {"a.u32", LLM__GGUF_U32, 3, rt_u32s}, {"a.i32", LLM__GGUF_I32, 3, rt_i32s},
        {"a.f32", LLM__GGUF_F32, 4, rt_f32s}, {"a.bool", LLM__GGUF_BOOL, 3, rt_bools},
        {"a.u64", LLM__GGUF_U64, 2, rt_u64s}, {"a.i64", LLM__GGUF_I64, 2, rt_i64s},
        {"a.f64", LLM__GGUF_F64, 2, rt_f64s}, {"a.empty", LLM__GGUF_U32, 0, rt_u32s},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(arrs); i++) {
        uint32_t et = 99;
        uint64_t n = 99;
        const void *data = NULL;
        bool ok = llm__gguf_get_arr(&g, arrs[i].key, &et, &n, &data, &e);
        EXPECT(ok && et == arrs[i].type && n == arrs[i].n &&
               memcmp(data, arrs[i].data, (size_t)n * llm__gguf_type_size(et)) == 0,
               "array %s: %s", arrs[i].key, e.msg);
    }
    uint32_t et = 0;
    uint64_t n = 0;
    const void *data = NULL;
    EXPECT(llm__gguf_get_arr(&g, "a.str", &et, &n, &data, &e) && et == LLM__GGUF_STR && n == 4, "a.str");
    const struct llm__gguf_str *strs = data;
    for (uint64_t i = 0; i < n && i < 4; i++)
        EXPECT(llm__gguf_str_eq(strs[i], rt_strs[i]), "a.str[%d]", (int)i);
    EXPECT(llm__gguf_get_arr(&g, "a.str_empty", &et, &n, &data, &e) && et == LLM__GGUF_STR && n == 0,
           "a.str_empty");
    EXPECT(!llm__gguf_get_arr(&g, "t.u8", &et, &n, &data, &e) && strstr(e.msg, "array"), "u8 as array");

    // tensors
    for (int i = 0; i < N_RT_TENSORS; i++) {
        const struct llm__gguf_tensor *t = llm__gguf_find_tensor(&g, rt_tensors[i].name);
        EXPECT(t == &g.tensors[i], "tensor %s found in order", rt_tensors[i].name);
        if (!t) continue;
        EXPECT(t->type == rt_tensors[i].type && t->n_dims == rt_tensors[i].n_dims &&
               memcmp(t->ne, rt_tensors[i].ne, sizeof(t->ne)) == 0, "tensor %s shape", t->name);
        EXPECT(t->size == rt_size[i] && memcmp(t->data, rt_data[i], rt_size[i]) == 0,
               "tensor %s bytes", t->name);
        EXPECT(((const uint8_t *)t->data - (const uint8_t *)g.map) % align == 0, "tensor %s aligned",
               t->name);
    }
    EXPECT(llm__gguf_find_tensor(&g, "missing") == NULL, "find_tensor absent");
    EXPECT(all_inside(&g), "inside");
    llm__gguf_close(&g);
}

static void test_round_trip(void) {
    rt_make_data();
    uint32_t aligns[] = {0, 64, 1};
    for (int v = 0; v < 3; v++) {
        struct llm__gguf_writer w;
        size_t size;
        rt_fill(&w, aligns[v]);
        uint8_t *file = finish_to_memory(&w, &size, v == 1 ? rt_write_chunked : rt_write_whole);
        llm__gguf_writer_free(&w);
        rt_check(file, size, aligns[v]);

        // copy every key/value into a new file: the key/value bytes come out identical
        struct llm__gguf g;
        struct llm__err e = {{0}, LLM_OK};
        if (llm__gguf_open_memory(&g, file, size, &e) == LLM_OK) {
            llm__gguf_writer_init(&w);
            for (int64_t i = 0; i < g.n_kv; i++)
                EXPECT(llm__gguf_writer_copy_kv(&w, &g, i, &e) == LLM_OK, "copy_kv: %s", e.msg);
            for (int i = 0; i < N_RT_TENSORS; i++)
                llm__gguf_writer_add_tensor(&w, rt_tensors[i].name, rt_tensors[i].type,
                                            rt_tensors[i].n_dims, rt_tensors[i].ne, &e);
            size_t size2;
            uint8_t *file2 = finish_to_memory(&w, &size2, rt_write_whole);
            EXPECT(size2 == size && memcmp(file, file2, size) == 0, "copy_kv round trip identical");
            llm__gguf_writer_free(&w);
            free(file2);
            llm__gguf_close(&g);
        }
        free(file);
    }
    for (int i = 0; i < N_RT_TENSORS; i++) free(rt_data[i]);
}

// --- the writer refuses bad input ---

static void noop_data(struct llm__gguf_writer *w, struct llm__err *e) { (void)w; (void)e; }

static void test_writer_errors(void) {
    struct llm__gguf_writer w;
    struct llm__err e = {{0}, LLM_OK};
    int64_t ne[2] = {33, 2};
    llm__gguf_writer_init(&w);
    EXPECT(llm__gguf_writer_set_u32(&w, "k", 1, &e) == LLM_OK, "set");
    EXPECT(llm__gguf_writer_set_str(&w, "k", "x", &e) == LLM_ERR_INVALID_ARG && strstr(e.msg, "duplicate"),
           "duplicate key: %s", e.msg);
    EXPECT(llm__gguf_writer_set_u32(&w, "general.alignment", 3, &e) == LLM_ERR_INVALID_ARG, "alignment 3");
    EXPECT(llm__gguf_writer_set_u64(&w, "general.alignment", 32, &e) == LLM_ERR_INVALID_ARG, "alignment u64");
    EXPECT(llm__gguf_writer_set_str(&w, "", "x", &e) == LLM_ERR_INVALID_ARG, "empty key");
    EXPECT(llm__gguf_writer_add_tensor(&w, "q", LLM__TYPE_Q8_0, 2, ne, &e) == LLM_ERR_INVALID_ARG &&
           strstr(e.msg, "multiple"), "row not a multiple of the block: %s", e.msg);
    EXPECT(llm__gguf_writer_add_tensor(&w, "q", 99, 2, ne, &e) == LLM_ERR_INVALID_ARG, "type 99");
    EXPECT(llm__gguf_writer_add_tensor(&w, "q", LLM__TYPE_F32, 0, ne, &e) == LLM_ERR_INVALID_ARG, "n_dims 0");
    EXPECT(llm__gguf_writer_add_tensor(&w, "q", LLM__TYPE_F32, 2, ne, &e) == LLM_OK, "add");
    EXPECT(llm__gguf_writer_add_tensor(&w, "r", LLM__TYPE_F32, 1, ne, &e) == LLM_OK, "add");
    EXPECT(llm__gguf_writer_add_tensor(&w, "q", LLM__TYPE_F32, 1, ne, &e) == LLM_ERR_INVALID_ARG &&
           strstr(e.msg, "duplicate"), "duplicate tensor: %s", e.msg);
    FILE *f = fopen("/dev/null", "wb");
    EXPECT(llm__gguf_writer_begin(&w, f, &e) == LLM_OK, "begin");
    EXPECT(llm__gguf_writer_set_u32(&w, "late", 1, &e) == LLM_ERR_INVALID_ARG, "set after begin");
    float zeros[66] = {0};
    EXPECT(llm__gguf_writer_tensor_data(&w, 1, zeros, &e) == LLM_ERR_INVALID_ARG, "out of order");
    EXPECT(llm__gguf_writer_tensor_data(&w, 0, zeros, &e) == LLM_OK, "tensor 0");
    EXPECT(llm__gguf_writer_finish(&w, &e) == LLM_ERR_INVALID_ARG && strstr(e.msg, "'r'"),
           "finish with a tensor missing: %s", e.msg);
    EXPECT(llm__gguf_writer_write(&w, zeros, 33 * 4 + 1, &e) == LLM_ERR_INVALID_ARG, "past the end");
    fclose(f);
    llm__gguf_writer_free(&w);

    // no tensors at all (a vocabulary file): readable
    llm__gguf_writer_init(&w);
    llm__gguf_writer_set_str(&w, "tokenizer.ggml.model", "llama", &e);
    size_t size;
    uint8_t *file = finish_to_memory(&w, &size, noop_data);
    struct llm__gguf g;
    EXPECT(llm__gguf_open_memory(&g, file, size, &e) == LLM_OK && g.n_tensors == 0 && g.n_kv == 1,
           "vocabulary-only file: %s", e.msg);
    llm__gguf_close(&g);
    llm__gguf_writer_free(&w);
    free(file);
}

// --- hostile files ---

// Writes a byte pattern as the data of every declared tensor.
static void pattern_data(struct llm__gguf_writer *w, struct llm__err *e) {
    for (int64_t i = 0; i < w->n_tensors; i++)
        for (uint64_t j = 0; j < w->tensors[i].size; j++) {
            uint8_t byte = (uint8_t)(j * 7 + (uint64_t)i);
            EXPECT(llm__gguf_writer_write(w, &byte, 1, e) == LLM_OK, "write: %s", e->msg);
        }
}

// A small valid file: a few key/values (one a string array) and three tensors.
static uint8_t *small_file(size_t *size, size_t *data_start, size_t *data_end) {
    struct llm__gguf_writer w;
    struct llm__err e = {{0}, LLM_OK};
    static const char *const toks[] = {"<s>", "</s>", "a", "bc", "def"};
    static const float scores[] = {0, 0, -1, -2, -3};
    int64_t ne_a[2] = {16, 4}, ne_b[2] = {64, 3}, ne_c[2] = {32, 8};
    llm__gguf_writer_init(&w);
    llm__gguf_writer_set_str(&w, "general.architecture", "llama", &e);
    llm__gguf_writer_set_u32(&w, "llama.block_count", 2, &e);
    llm__gguf_writer_set_f32(&w, "llama.rope.freq_base", 10000.0f, &e);
    llm__gguf_writer_set_arr_str(&w, "tokenizer.ggml.tokens", 5, toks, &e);
    llm__gguf_writer_set_arr(&w, "tokenizer.ggml.scores", LLM__GGUF_F32, 5, scores, &e);
    llm__gguf_writer_add_tensor(&w, "token_embd.weight", LLM__TYPE_F32, 2, ne_a, &e);
    llm__gguf_writer_add_tensor(&w, "blk.0.attn_q.weight", LLM__TYPE_Q8_0, 2, ne_b, &e);
    llm__gguf_writer_add_tensor(&w, "output.weight", LLM__TYPE_F16, 2, ne_c, &e);
    uint8_t *file = finish_to_memory(&w, size, pattern_data);
    llm__gguf_writer_free(&w);
    struct llm__gguf g;
    EXPECT(llm__gguf_open_memory(&g, file, *size, &e) == LLM_OK, "small file: %s", e.msg);
    const struct llm__gguf_tensor *last = &g.tensors[g.n_tensors - 1];
    *data_start = g.data_offset;
    *data_end = (size_t)((const uint8_t *)last->data - file) + last->size;
    llm__gguf_close(&g);
    return file;
}

static void test_truncation(void) {
    size_t size, data_start, data_end;
    uint8_t *file = small_file(&size, &data_start, &data_end);
    int bad = 0, fails = 0;
    for (size_t len = 0; len <= size; len++) {
        uint8_t *copy = exact_copy(file, len);
        struct llm__gguf g;
        struct llm__err e = {{0}, LLM_OK};
        enum llm_status st = llm__gguf_open_memory(&g, copy, len, &e);
        if (len < data_end) {
            // every cut before the end of the last tensor's data must be caught, with a message
            if (st == LLM_OK || e.msg[0] == 0) bad++;
            fails += st != LLM_OK;
        } else if (st != LLM_OK || !all_inside(&g)) {
            bad++;   // only padding is missing: still a valid file
        }
        if (st == LLM_OK) llm__gguf_close(&g);
        free(copy);
    }
    EXPECT(bad == 0, "%d of %zu truncations misjudged", bad, size + 1);
    printf("truncation: %zu-byte file, %d cuts refused\n", size, fails);
    free(file);
}

static void test_bit_flips(void) {
    size_t size, data_start, data_end;
    uint8_t *file = small_file(&size, &data_start, &data_end);
    unsigned long long rng = 1234;
    int opened = 0, refused = 0, bad = 0;
    double t0 = llm__now();
    char last_msg[512] = "";
    for (int iter = 0; iter < 100000; iter++) {
        uint8_t *copy = exact_copy(file, size);
        // 1-4 changes, half of them in the header and tensor infos, where they matter; some
        // whole bytes, some single bits
        int n = 1 + (int)(test_rng_next(&rng) % 4);
        for (int k = 0; k < n; k++) {
            size_t range = test_rng_next(&rng) % 2 ? data_start : size;
            size_t at = (size_t)(test_rng_next(&rng) % range);
            uint64_t r = test_rng_next(&rng);
            if (r % 3 == 0) copy[at] = (uint8_t)(r >> 8);
            else copy[at] ^= (uint8_t)(1u << ((r >> 8) % 8));
        }
        struct llm__gguf g;
        struct llm__err e = {{0}, LLM_OK};
        enum llm_status st = llm__gguf_open_memory(&g, copy, size, &e);
        if (st == LLM_OK) {
            opened++;
            if (!all_inside(&g)) bad++;
            llm__gguf_close(&g);
        } else {
            refused++;
            if (e.msg[0] == 0 || strncmp(e.msg, "gguf: ", 6) != 0) bad++;
            memcpy(last_msg, e.msg, sizeof(last_msg));
        }
        free(copy);
    }
    EXPECT(bad == 0, "%d of 100000 bit-flipped files misjudged", bad);
    printf("bit flips: 100000 files in %.2f s, %d opened (checked inside), %d refused; e.g. \"%s\"\n",
           llm__now() - t0, opened, refused, last_msg);
    free(file);
}

// Hand-crafted bad files. Each starts from a small valid layout and breaks one thing.
static void craft(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    buf_hdr(b, version, n_tensors, n_kv);
}

static void test_crafted(void) {
    struct buf b = {0};
    const int64_t ne1[1] = {32}, ne2[2] = {32, 2}, ne_big[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
    const int64_t ne_over[2] = {1ll << 62, 4}, ne_zero[2] = {32, 0}, ne_neg[1] = {-32};
    const int64_t ne_q[1] = {33}, ne5[5] = {32, 1, 1, 1, 1};

    // the base: valid
    craft(&b, 3, 1, 1);
    buf_kv_u32(&b, "general.alignment", 32);
    buf_tensor(&b, "w", 2, ne2, LLM__TYPE_F32, 0);
    buf_pad(&b, 32);
    for (int i = 0; i < 64; i++) buf_u32(&b, 0x3f800000u);
    {
        uint8_t *copy = exact_copy(b.p, b.n);
        struct llm__gguf g;
        struct llm__err e = {{0}, LLM_OK};
        EXPECT(llm__gguf_open_memory(&g, copy, b.n, &e) == LLM_OK && g.n_tensors == 1 &&
               ((const float *)g.tensors[0].data)[63] == 1.0f, "crafted base: %s", e.msg);
        llm__gguf_close(&g);
        free(copy);
    }
    size_t valid_size = b.n;
    uint8_t *valid = exact_copy(b.p, b.n);

    // header
    b.n = 0;
    buf_put(&b, "GGML", 4);
    expect_bad("bad magic", &b, "magic", LLM_ERR_FORMAT);
    b.n = 0;
    buf_put(&b, "GG", 2);
    expect_bad("2 bytes", &b, "truncated", LLM_ERR_FORMAT);
    craft(&b, 1, 0, 0);
    expect_bad("v1", &b, "v1", LLM_ERR_UNSUPPORTED);
    craft(&b, 0x03000000u, 0, 0);
    expect_bad("big-endian", &b, "big-endian", LLM_ERR_UNSUPPORTED);
    craft(&b, 4, 0, 0);
    expect_bad("v4", &b, "version 4", LLM_ERR_UNSUPPORTED);
    craft(&b, 0, 0, 0);
    expect_bad("v0", &b, "version 0", LLM_ERR_FORMAT);
    craft(&b, 3, 1ull << 62, 0);
    expect_bad("huge n_tensors", &b, "tensor count", LLM_ERR_FORMAT);
    craft(&b, 3, 0, UINT64_MAX);
    expect_bad("huge n_kv", &b, "key/value count", LLM_ERR_FORMAT);
    craft(&b, 3, 1000, 1000);
    buf_kv_u32(&b, "a", 1);
    expect_bad("n_tensors + n_kv too many", &b, "count", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 2);
    buf_kv_u32(&b, "a", 1);
    expect_bad("one kv missing", &b, "count", LLM_ERR_FORMAT);

    // key/values
    craft(&b, 3, 0, 1);
    buf_u64(&b, 1ull << 40);
    buf_put(&b, "abcdefgh", 8);
    expect_bad("huge key length", &b, "limit", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_u64(&b, 60000);
    buf_put(&b, "abcdefgh", 8);
    expect_bad("key longer than the file", &b, "truncated", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "");
    buf_u32(&b, LLM__GGUF_U32);
    buf_u32(&b, 1);
    expect_bad("empty key", &b, "empty", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_u64(&b, 3);
    buf_put(&b, "a\0b", 3);
    buf_u32(&b, LLM__GGUF_U8);
    buf_put(&b, "x", 1);
    expect_bad("NUL in key", &b, "NUL", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "general.name");
    buf_u32(&b, LLM__GGUF_STR);
    buf_u64(&b, UINT64_MAX - 3);
    buf_put(&b, "abc", 3);
    expect_bad("huge string length", &b, "general.name", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "tokenizer.ggml.scores");
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u32(&b, LLM__GGUF_F32);
    buf_u64(&b, 1ull << 61);
    buf_u32(&b, 0);
    expect_bad("huge array count", &b, "array", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "tokenizer.ggml.tokens");
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u32(&b, LLM__GGUF_STR);
    buf_u64(&b, 1000);
    buf_str(&b, "a");
    expect_bad("string array count", &b, "tokenizer.ggml.tokens", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "tokenizer.ggml.tokens");
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u32(&b, LLM__GGUF_STR);
    buf_u64(&b, 2);
    buf_str(&b, "a");
    buf_u64(&b, 1u << 30);
    expect_bad("string in array too long", &b, "string 1 of key 'tokenizer.ggml.tokens'", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "nested");
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u64(&b, 1);
    buf_u32(&b, LLM__GGUF_U8);
    buf_u64(&b, 1);
    buf_put(&b, "x", 1);
    expect_bad("array of arrays", &b, "nested", LLM_ERR_UNSUPPORTED);
    craft(&b, 3, 0, 1);
    buf_str(&b, "odd");
    buf_u32(&b, 13);
    buf_u32(&b, 0);
    expect_bad("unknown kv type", &b, "type id 13", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "odd");
    buf_u32(&b, LLM__GGUF_ARR);
    buf_u32(&b, 77);
    buf_u64(&b, 0);
    expect_bad("unknown array element type", &b, "type id 77", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 2);
    buf_kv_u32(&b, "llama.block_count", 1);
    buf_kv_u32(&b, "llama.block_count", 2);
    expect_bad("duplicate key", &b, "duplicate key 'llama.block_count'", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_kv_u32(&b, "general.alignment", 0);
    expect_bad("alignment 0", &b, "power of two", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_kv_u32(&b, "general.alignment", 3);
    expect_bad("alignment 3", &b, "power of two", LLM_ERR_FORMAT);
    craft(&b, 3, 0, 1);
    buf_str(&b, "general.alignment");
    buf_u32(&b, LLM__GGUF_U64);
    buf_u64(&b, 32);
    expect_bad("alignment u64", &b, "u32", LLM_ERR_FORMAT);

    // tensor infos
#define TENSOR_CASE(what, word, name, nd, ne, type, off)                        \
    do {                                                                         \
        craft(&b, 3, 1, 0);                                                      \
        buf_tensor(&b, name, nd, ne, type, off);                                 \
        buf_pad(&b, 32);                                                         \
        for (int i_ = 0; i_ < 64; i_++) buf_u32(&b, 0);                          \
        expect_bad(what, &b, word, LLM_ERR_FORMAT);                              \
    } while (0)
    TENSOR_CASE("n_dims 0", "0 dimensions", "w", 0, ne1, LLM__TYPE_F32, 0);
    TENSOR_CASE("n_dims 5", "5 dimensions", "w", 5, ne5, LLM__TYPE_F32, 0);
    TENSOR_CASE("dim product overflow", "overflow", "w", 4, ne_big, LLM__TYPE_F32, 0);
    TENSOR_CASE("2^62 x 4", "overflow", "w", 2, ne_over, LLM__TYPE_F32, 0);
    TENSOR_CASE("byte size overflow", "overflow", "w", 1, ne_over, LLM__TYPE_F32, 0);
    TENSOR_CASE("zero dim", "must be >= 1", "w", 2, ne_zero, LLM__TYPE_F32, 0);
    TENSOR_CASE("negative dim", "must be >= 1", "w", 1, ne_neg, LLM__TYPE_F32, 0);
    TENSOR_CASE("row not a multiple of the block", "block size", "w", 1, ne_q, LLM__TYPE_Q4_0, 0);
    TENSOR_CASE("unknown type 99", "type id 99", "w", 1, ne1, 99, 0);
    TENSOR_CASE("removed type 4", "type id 4", "w", 1, ne1, 4, 0);
    TENSOR_CASE("offset past the end", "past the end", "blk.3.attn_q.weight", 1, ne1, LLM__TYPE_F32, 1024);
    TENSOR_CASE("offset huge", "past the end", "w", 1, ne1, LLM__TYPE_F32, UINT64_MAX - 31);
    TENSOR_CASE("data runs past the end", "past the end", "w", 2, ne_big, LLM__TYPE_F32, 0);
    TENSOR_CASE("misaligned offset", "alignment", "w", 1, ne1, LLM__TYPE_F32, 4);
    TENSOR_CASE("empty name", "empty", "", 1, ne1, LLM__TYPE_F32, 0);
    TENSOR_CASE("long name", "limit", "a.name.that.is.much.longer.than.sixty.three.bytes.which.ggml.refuses",
                1, ne1, LLM__TYPE_F32, 0);
#undef TENSOR_CASE
    craft(&b, 3, 2, 0);
    buf_tensor(&b, "w", 1, ne1, LLM__TYPE_F32, 0);
    buf_tensor(&b, "w", 1, ne1, LLM__TYPE_F32, 128);
    buf_pad(&b, 32);
    for (int i = 0; i < 64; i++) buf_u32(&b, 0);
    expect_bad("duplicate tensor name", &b, "duplicate tensor name 'w'", LLM_ERR_FORMAT);
    craft(&b, 3, 1, 0);
    buf_tensor(&b, "w", 1, ne1, LLM__TYPE_F32, 0);
    expect_bad("no data section", &b, "data section", LLM_ERR_FORMAT);

    // the valid base cut just before its last data byte, and its n_tensors raised by one
    b.n = 0;
    buf_put(&b, valid, valid_size - 1);
    expect_bad("last byte missing", &b, "past the end", LLM_ERR_FORMAT);
    b.n = 0;
    buf_put(&b, valid, valid_size);
    b.p[8] = 2;
    expect_bad("n_tensors one too many", &b, "tensor name 1", LLM_ERR_FORMAT);
    free(valid);
    free(b.p);
}

// --- files on disk ---

static void test_open_errors(void) {
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__gguf_open(&g, "/nonexistent/model.gguf", &e) == LLM_ERR_IO && strstr(e.msg, "cannot open") &&
           strstr(e.msg, "/nonexistent/model.gguf"), "missing file: %s", e.msg);
    EXPECT(llm__gguf_open(&g, "/tmp", &e) == LLM_ERR_IO && strstr(e.msg, "directory"), "directory: %s", e.msg);
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0, "mkstemp");
    if (fd < 0) return;
    EXPECT(llm__gguf_open(&g, path, &e) == LLM_ERR_FORMAT && strstr(e.msg, "empty"), "empty file: %s", e.msg);
    size_t size, data_start, data_end;
    uint8_t *file = small_file(&size, &data_start, &data_end);
    EXPECT(write(fd, file, 10) == 10, "write");
    EXPECT(llm__gguf_open(&g, path, &e) == LLM_ERR_FORMAT && strstr(e.msg, "truncated") && strstr(e.msg, path),
           "truncated file names the path: %s", e.msg);
    EXPECT(write(fd, file + 10, size - 10) == (ssize_t)(size - 10), "write");
    EXPECT(llm__gguf_open(&g, path, &e) == LLM_OK && g.owns_map && g.n_tensors == 3 && all_inside(&g),
           "file: %s", e.msg);
    llm__gguf_close(&g);
    close(fd);
    unlink(path);
    free(file);
}

// One file written by another GGUF writer (llama.cpp's): it opens, its token list is there
// (more than 1000 strings), every key/value and tensor lies inside the file; models: it has
// tensors. False when it does not open.
static bool check_real_file(const char *path, bool model) {
    struct llm__gguf g;
    struct llm__err e = {{0}, LLM_OK};
    enum llm_status st = llm__gguf_open(&g, path, &e);
    EXPECT(st == LLM_OK, "%s: %s", path, e.msg);
    if (st != LLM_OK) return false;
    uint32_t et;
    uint64_t n_tokens = 0;
    const void *data;
    EXPECT(llm__gguf_get_arr(&g, "tokenizer.ggml.tokens", &et, &n_tokens, &data, &e) && et == LLM__GGUF_STR &&
           n_tokens > 1000, "%s: tokens: %s", path, e.msg);
    EXPECT(all_inside(&g), "%s: data inside", path);
    if (model) EXPECT(g.n_tensors > 0, "%s: has tensors", path);
    size_t bytes = 0;
    for (int64_t t = 0; t < g.n_tensors; t++) bytes += g.tensors[t].size;
    printf("real file %s: v%u, %lld key/values, %lld tensors (%zu bytes), %llu tokens\n", path, g.version,
           (long long)g.n_kv, (long long)g.n_tensors, bytes, (unsigned long long)n_tokens);
    llm__gguf_close(&g);
    return true;
}

// llama.cpp's vocabulary files (fetched by tests/fixtures.sh; missing ones fail), and the
// models of $LLM_GOLDEN_MODELS when it is set (see test_golden.c).
static void test_real_files(void) {
    static const char *const vocabs[] = {"llama-spm", "llama-bpe", "qwen2", "gpt-2"};
    int n_files = 0;
    for (size_t i = 0; i < LLM__ARRAY_LEN(vocabs); i++) {
        char path[1100];
        snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", test_vocab_dir(), vocabs[i]);
        n_files += check_real_file(path, false);
    }
    EXPECT(n_files == (int)LLM__ARRAY_LEN(vocabs), "opened %d of the %d vocabulary files in %s (sh tests/fixtures.sh)",
           n_files, (int)LLM__ARRAY_LEN(vocabs), test_vocab_dir());
    const char *models = getenv("LLM_GOLDEN_MODELS");
    if (models && *models) {
        char pattern[1100];
        snprintf(pattern, sizeof(pattern), "%s/*.gguf", models);
        glob_t gl;
        const int found = glob(pattern, 0, NULL, &gl) == 0 ? (int)gl.gl_pathc : 0;
        EXPECT(found > 0, "LLM_GOLDEN_MODELS=%s: no .gguf files", models);
        for (int i = 0; i < found; i++) check_real_file(gl.gl_pathv[i], true);
        if (found) globfree(&gl);
    }
}

int main(void) {
    test_round_trip();
    test_writer_errors();
    test_truncation();
    test_bit_flips();
    test_crafted();
    test_open_errors();
    test_real_files();
    return test_summary("test_gguf");
}
