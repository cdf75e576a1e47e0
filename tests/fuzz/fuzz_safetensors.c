// fuzz_safetensors: a safetensors file's bytes, as a hostile file would bring them, through the
// reader (its JSON header included); then every string of the header decoded, and every number
// read; then the same bytes as a Hugging Face directory's JSON files: as config.json, as
// tokenizer.json (and, when that is accepted, its vocabulary loaded and a text tokenized), and as
// tokenizer_config.json and generation_config.json beside a small valid tokenizer.json; an
// accepted file also as the weights of a GPTQ or AWQ checkpoint (llm__hf_build).
// Invariants: no crash, leak or UB; a refused file has a message; an accepted file's tensors lie
// inside it, no two sharing a byte, each with the bytes its dtype and shape take.
// Seeds: tests/fuzz/corpus/safetensors/ (small files in the format's own layout, config.json and
// tokenizer.json texts).
#define FUZZ_NAME "safetensors"
#include "../../llm.c"
#include "fuzz.h"

// tokenizer.json text tok (with the other texts) into GGUF keys; when accepted, its vocabulary
// loaded and a text tokenized.
static void fuzz_tokenizer_json(const char *tok, size_t tok_len, const char *tok_cfg, size_t tok_cfg_len, int64_t n_vocab) {
    struct llm__hf_texts tx = {0};
    tx.tok = tok;
    tx.tok_len = tok_len;
    tx.tok_cfg = tok_cfg;
    tx.tok_cfg_len = tok_cfg_len;
    tx.gen_cfg = tok_cfg;
    tx.gen_cfg_len = tok_cfg_len;
    tx.cfg = "{\"bos_token_id\": 1}";
    tx.cfg_len = strlen(tx.cfg);
    struct llm__gbuf b = {0};
    char hdr[24] = "GGUF";
    llm__gbuf_put(&b, hdr, 24);
    struct llm__err e = {{0}, LLM_OK};
    if (llm__hf_tokenizer(&tx, n_vocab, &b, &e) != LLM_OK) {
        FUZZ_CHECK(e.msg[0], "tokenizer.json refused without a message");
        free(b.o.p);
        return;
    }
    llm__gbuf_seal(&b);
    struct llm__gguf g;
    memset(&g, 0, sizeof(g));
    g.map = b.o.p;
    g.size = b.o.n;
    g.owns_buf = true;
    FUZZ_CHECK(llm__gguf_parse(&g, &e) == LLM_OK, "the tokenizer's GGUF keys do not parse: %s", e.msg);
    g.version = 0;
    struct llm__vocab v;
    memset(&v, 0, sizeof(v));
    if (g.kv && llm__vocab_load(&v, &g, 0, &e) == LLM_OK) {
        int32_t ids[64];
        const char *text = "Hello world 123 <|im_start|> \xc3\xa9\xf0\x9f\x91\x8b";
        FUZZ_CHECK(llm__tokenize(&v, text, strlen(text), LLM_TOKENIZE_PARSE_SPECIAL, ids, 64, &e) >= 0 || e.msg[0],
                   "tokenize failed without a message");
    }
    llm__vocab_free(&v);
    llm__gguf_close(&g);
}

// The bytes as config.json, as tokenizer.json, and as tokenizer_config.json and
// generation_config.json beside a valid tokenizer.json.
static void fuzz_hf_json(const char *p, size_t n) {
    struct llm__gbuf b = {0};
    const char *arch = NULL;
    bool permute = false;
    int64_t hp[5] = {0};
    struct llm__hf_quant quant;
    struct llm__err e = {{0}, LLM_OK};
    if (llm__hf_config(p, n, &b, &arch, &permute, hp, &quant, &e) != LLM_OK) FUZZ_CHECK(e.msg[0], "config.json refused without a message");
    free(b.o.p);
    // as a model of 4,096 tokens or of 64 (padded: tokens beyond the file's, as vocab_size asks);
    // a real directory's vocab_size is its embedding's rows, so ids are bounded by what it holds
    fuzz_tokenizer_json(p, n, NULL, 0, n % 2 ? 4096 : 64);
    static const char tok[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}, "
                              "\"added_tokens\": [{\"id\": 3, \"content\": \"<s>\", \"special\": true}], "
                              "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, "
                              "{\"Sequence\": {\"id\": \"A\"}}]}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}";
    fuzz_tokenizer_json(tok, strlen(tok), p, n, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct llm__safetensors s;
    memset(&s, 0, sizeof(s));
    s.map = malloc(size ? size : 1);
    if (!s.map) return 0;
    if (size) memcpy(s.map, data, size);
    s.size = size;
    s.owns_buf = true;
    struct llm__err e = {{0}, LLM_OK};
    const bool parsed = llm__st_parse(&s, &e) == LLM_OK;
    if (!parsed) {
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
    // an accepted file as the weights of a GPTQ checkpoint (its qweight/qzeros/scales/g_idx
    // tensors made into G4 ones) or, for an odd size, of an AWQ one: refused with a message, or
    // every tensor there with the bytes of its shape and act-order permutations in range
    struct llm__hf_owned *o = parsed ? calloc(1, sizeof(*o)) : NULL;
    if (o && (o->files = calloc(1, sizeof(*o->files)))) {
        o->n_files = 1;
        o->files[0] = s;   // (the mapping and tensors move to o, which llm__hf_build frees)
        memset(&s, 0, sizeof(s));
        static const char *const qc[2] = {"{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32}",
                                          "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64}"};
        char cfg[512];
        snprintf(cfg, sizeof(cfg), "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"num_hidden_layers\": 1, "
                 "\"intermediate_size\": 64, \"num_attention_heads\": 2, \"vocab_size\": 10, \"quantization_config\": %s}", qc[size % 2]);
        struct llm__hf_texts tx = {0};
        tx.cfg = cfg;
        tx.cfg_len = strlen(cfg);
        struct llm__gguf g;
        if (llm__hf_build(&g, &tx, o, &e) != LLM_OK) {
            FUZZ_CHECK(e.msg[0], "a quantized checkpoint refused without a message");
        } else {
            for (int64_t i = 0; i < g.n_tensors; i++) {
                const struct llm__gguf_tensor *t = &g.tensors[i];
                FUZZ_CHECK(t->size == llm__row_bytes((int)t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]),
                           "tensor %lld: %zu bytes for its shape", (long long)i, t->size);
                for (int64_t k = 0; t->perm && k < t->ne[0]; k++)
                    FUZZ_CHECK(t->perm[k] >= 0 && t->perm[k] < t->ne[0], "act-order permutation out of range");
            }
            llm__gguf_close(&g);
        }
    } else free(o);
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
        fuzz_hf_json((const char *)data, size);
    }
    return 0;
}
