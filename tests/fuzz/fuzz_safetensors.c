// fuzz_safetensors: a safetensors file's bytes, as a hostile file would bring them, through the
// reader (its JSON header included); then every string of the header decoded, and every number
// read, as the Hugging Face loaders will read config.json and tokenizer.json.
// Invariants: no crash, leak or UB; a refused file has a message; an accepted file's tensors lie
// inside it, no two sharing a byte, each with the bytes its dtype and shape take.
// Seeds: tests/fuzz/corpus/safetensors/ (small files in the format's own layout).
#define FUZZ_NAME "safetensors"
#include "../../llm.c"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct llm__safetensors s;
    memset(&s, 0, sizeof(s));
    s.map = malloc(size ? size : 1);
    if (!s.map) return 0;
    if (size) memcpy(s.map, data, size);
    s.size = size;
    s.owns_buf = true;
    struct llm__err e = {{0}, LLM_OK};
    if (llm__st_parse(&s, &e) != LLM_OK) {
        FUZZ_CHECK(e.msg[0], "refused without a message");
    } else {
        const uint8_t *lo = s.map, *hi = lo + size;
        for (int64_t i = 0; i < s.n; i++) {
            const struct llm__st_tensor *t = &s.t[i];
            FUZZ_CHECK(t->size == 0 || (t->data >= lo && t->data + t->size <= hi), "tensor %lld outside the file", (long long)i);
            for (int64_t k = 0; k < i; k++)
                FUZZ_CHECK(!t->size || !s.t[k].size || t->data >= s.t[k].data + s.t[k].size || s.t[k].data >= t->data + t->size,
                           "tensors %lld and %lld overlap", (long long)k, (long long)i);
        }
    }
    llm__st_close(&s);
    // the same bytes as a JSON text: every string decoded, every number read
    struct llm__json j;
    if (llm__json_parse(&j, (const char *)data, size, "fuzz", &e) == LLM_OK) {
        for (int32_t i = 0; i < j.n; i++) {
            if (j.nodes[i].type == LLM__JSON_STR) {
                size_t n;
                char *str = llm__json_strdup(&j, i, &n);
                FUZZ_CHECK(str && n <= j.nodes[i].len, "decoded string longer than its text");
                FUZZ_CHECK(fuzz_utf8_check(str, n) == n || memchr(j.text + j.nodes[i].start, '\\', j.nodes[i].len),
                           "a string without escapes decoded to invalid UTF-8");
                free(str);
            } else if (j.nodes[i].type == LLM__JSON_NUM) {
                double d;
                int64_t x;
                FUZZ_CHECK(llm__json_num(&j, i, &d), "a number node that does not read");
                (void)llm__json_int(&j, i, INT64_MIN, INT64_MAX, &x);
            }
            FUZZ_CHECK(j.nodes[i].next > i && j.nodes[i].next <= j.n, "next out of order");
        }
        llm__json_free(&j);
    }
    return 0;
}
