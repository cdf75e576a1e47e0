// Tests of the JSON reader (config.json, tokenizer.json, safetensors headers) and the
// safetensors reader: values and their decoding, numbers against strtod, malformed texts, and
// hostile safetensors files (every truncation, bad header lengths, dtypes, shapes, offsets,
// overlaps, random bit flips), each refused with a message and no crash.
#include "../llm.c"
#include "test.h"

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

int main(void) {
    test_json_values();
    test_json_numbers();
    test_json_bad();
    test_st_good();
    test_st_bad();
    return test_summary("test_safetensors");
}
