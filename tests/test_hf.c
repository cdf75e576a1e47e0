// Hugging Face model directories: tokenizer.json read as the GGUF tokenizer keys (small texts,
// good and refused), then the fixtures tests/fixtures.sh makes with tests/hf/gguf_to_hf.py in
// $LLM_HF_DIR:
//   tok-NAME/     tokenizer.json made by PyPI's tokenizers library from a real vocabulary (GPT-2,
//                 Llama 3, Qwen 2, SmolLM2; Llama 2 as transformers converts SentencePiece) with its
//                 model's pre-tokenizer, and corpus.jsonl: texts and the ids that library gives;
//                 the engine must give the same ids for every text (Gemma 3's too)
//   smollm2-bf16/ (one safetensors file, BF16) and smollm2-f16/ (F16, three shards and an index):
//                 the real SmolLM2-135M-Instruct as its Hugging Face checkpoint; gemma3-bf16/ the
//                 real Gemma 3 270M (Gemma3ForCausalLM: norms without the converter's + 1,
//                 layer_types); next to each NAME.gguf, the same weights as llama.cpp's converter
//                 lays them out. The engine must give bit-identical logits, the same tokens and
//                 the same chat template from the directory and from the GGUF file.
//   $LLM_TEST_MODELS/hf/tiny-*/ the same for the tiny random models of qwen2 (biases, Qwen 2's
//                 vocabulary), qwen3, phi3 (fused projections), gemma2 and gemma3 (tests/make_models.sh).
#include "../llm.c"
#include "test.h"

// tokenizer.json (with tokenizer_config.json, generation_config.json and config.json texts,
// NULL: absent) as a GGUF header in g, and its vocabulary in v (when v is not NULL).
static enum llm_status tok_load(struct llm__gguf *g, struct llm__vocab *v, const char *tok, size_t tok_len, const char *tok_cfg,
                                const char *gen, const char *cfg, int64_t n_vocab, struct llm__err *e) {
    struct llm__hf_texts tx = {0};
    tx.tok = tok;
    tx.tok_len = tok_len;
    tx.tok_cfg = tok_cfg;
    tx.tok_cfg_len = tok_cfg ? strlen(tok_cfg) : 0;
    tx.gen_cfg = gen;
    tx.gen_cfg_len = gen ? strlen(gen) : 0;
    tx.cfg = cfg ? cfg : "{}";
    tx.cfg_len = strlen(tx.cfg);
    struct llm__gbuf b = {0};
    char hdr[24] = "GGUF";
    llm__gbuf_put(&b, hdr, 24);
    memset(g, 0, sizeof(*g));
    enum llm_status st = llm__hf_tokenizer(&tx, n_vocab, &b, e);
    if (st) {
        free(b.o.p);
        return st;
    }
    llm__gbuf_seal(&b);
    g->map = b.o.p;
    g->size = b.o.n;
    g->owns_buf = true;
    if ((st = llm__gguf_parse(g, e)) == LLM_OK) g->version = 0;   // (a directory's, as llm__hf_build marks it)
    if (st == LLM_OK && v) st = llm__vocab_load(v, g, 0, e);
    return st;
}

static bool key_str(const struct llm__gguf *g, const char *key, const char *want) {
    struct llm__gguf_str s = {0};
    struct llm__err e = {{0}, LLM_OK};
    return llm__gguf_find_key(g, key) >= 0 && llm__gguf_get_str(g, key, &s, &e) && llm__str_is(&s, want);
}

static int64_t key_u32(const struct llm__gguf *g, const char *key) {
    uint32_t u = 0;
    struct llm__err e = {{0}, LLM_OK};
    return llm__gguf_find_key(g, key) >= 0 && llm__gguf_get_u32(g, key, &u, &e) ? (int64_t)u : -1;
}

static int key_bool(const struct llm__gguf *g, const char *key) {
    bool b = false;
    struct llm__err e = {{0}, LLM_OK};
    return llm__gguf_find_key(g, key) >= 0 && llm__gguf_get_bool(g, key, &b, &e) ? b : -1;
}

static int tokenize(const struct llm__vocab *v, const char *text, int32_t *ids, int cap) {
    struct llm__err e = {{0}, LLM_OK};
    return llm__tokenize(v, text, strlen(text), LLM_TOKENIZE_PARSE_SPECIAL, ids, cap, &e);
}

// --- small tokenizer.json texts ---

#define BYTE_LEVEL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": %s}"
#define LLAMA3_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

// A tokenizer.json of vocabulary "a" "b" "ab" "Ġa" "Ġ" (ids 0-4), merges given, added tokens
// <|endoftext|> (5, special), <|im_start|> (6, not marked special), "hi there" (7); pre-tokenizer
// pre, model flags extra ("" or ", \"ignore_merges\": true").
static char *tok_json(const char *pre, const char *merges, const char *extra, const char *post) {
    const char *fmt = "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 5, \"content\": \"<|endoftext|>\", \"special\": true}, "
                      "{\"id\": 6, \"content\": \"<|im_start|>\", \"special\": false, \"rstrip\": true}, {\"id\": 7, \"content\": \"hi there\", \"special\": false}], "
                      "\"normalizer\": null, \"pre_tokenizer\": %s, \"post_processor\": %s, \"decoder\": {\"type\": \"ByteLevel\"}, "
                      "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120a\": 3, \"\\u0120\": 4}, "
                      "\"merges\": %s%s}}";
    size_t n = strlen(fmt) + strlen(pre) + strlen(merges) + strlen(extra) + strlen(post) + 1;
    char *s = malloc(n);
    snprintf(s, n, fmt, pre, post, merges, extra);
    return s;
}

static void test_tokenizer_json(void) {
    struct llm__gguf g;
    struct llm__vocab v;
    struct llm__err e = {{0}, LLM_OK};
    char pre[1024];
    snprintf(pre, sizeof(pre), BYTE_LEVEL, "true");
    char *t = tok_json(pre, "[\"a b\", [\"\\u0120\", \"a\"], [\" a\", \"b\"]]", "",
                       "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|endoftext|>\", \"type_id\": 0}}, "
                       "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}");
    const char *tc = "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": {\"content\": \"<|im_start|>\"}, "
                     "\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": \"{{ messages }}\"}]}";
    const char *gen = "{\"eos_token_id\": [6, 7, 5]}";
    memset(&v, 0, sizeof(v));
    EXPECT(tok_load(&g, &v, t, strlen(t), tc, gen, "{\"vocab_size\": 10}", 10, &e) == LLM_OK, "%s", e.msg);
    EXPECT(key_str(&g, "tokenizer.ggml.model", "gpt2") && key_str(&g, "tokenizer.ggml.pre", "gpt-2"), "gpt2, gpt-2");
    EXPECT(v.n == 10, "tokens %d: padded to the model's vocab_size", v.n);
    EXPECT(v.n == 10 && v.text[8].len == 6 && memcmp(v.text[8].ptr, "[PAD8]", 6) == 0 && v.attr[8] == LLM__TOK_UNUSED, "[PAD8]");
    EXPECT(v.n == 10 && v.attr[0] == LLM__TOK_NORMAL && v.attr[5] == LLM__TOK_CONTROL, "normal, control");
    EXPECT(v.n == 10 && v.attr[6] == LLM__TOK_CONTROL && v.attr[7] == LLM__TOK_USER, "<|im_start|> looks special; 'hi there' is user-defined");
    EXPECT(v.n_merges == 3 && v.merges[1].len == 4 && memcmp(v.merges[1].ptr, "\xc4\xa0 a", 4) == 0 && v.merges[2].len == 5 &&
               memcmp(v.merges[2].ptr, "\xc4\xa0" "a b", 5) == 0,
           "merge pairs joined, their spaces as U+0120");
    EXPECT(key_u32(&g, "tokenizer.ggml.bos_token_id") == 5 && key_u32(&g, "tokenizer.ggml.eos_token_id") == 6, "bos 5, eos 6");
    EXPECT(key_u32(&g, "tokenizer.ggml.eot_token_id") == 7 && key_u32(&g, "tokenizer.ggml.eom_token_id") == 5,
           "generation_config's other ends");
    EXPECT(key_bool(&g, "tokenizer.ggml.add_bos_token") == 1 && key_bool(&g, "tokenizer.ggml.add_eos_token") == 0,
           "the template adds BOS, not EOS");
    EXPECT(key_str(&g, "tokenizer.chat_template", "{{ messages }}"), "the default chat template");
    int32_t ids[16];
    int n = tokenize(&v, "ab a hi there<|endoftext|>", ids, 16);
    EXPECT(n == 5 && ids[0] == 2 && ids[1] == 3 && ids[2] == 4 && ids[3] == 7 && ids[4] == 5, "ab Ġa Ġ 'hi there' <|endoftext|> (n %d)", n);
    n = tokenize(&v, "<|im_start|>  \n a<|endoftext|> a", ids, 16);   // rstrip: <|im_start|> takes the whitespace after it
    EXPECT(n == 4 && ids[0] == 6 && ids[1] == 0 && ids[2] == 5 && ids[3] == 3, "rstrip (n %d)", n);
    llm__vocab_free(&v);
    llm__gguf_close(&g);
    free(t);

    // the BOS of config.json, add_bos_token of tokenizer_config.json when there is no post-processor
    t = tok_json(pre, "[\"a b\"]", "", "null");
    memset(&v, 0, sizeof(v));
    EXPECT(tok_load(&g, NULL, t, strlen(t), "{\"add_bos_token\": true, \"chat_template\": \"X\"}", NULL,
                    "{\"bos_token_id\": 6, \"eos_token_id\": [5, 7]}", 8, &e) == LLM_OK, "%s", e.msg);
    EXPECT(key_u32(&g, "tokenizer.ggml.bos_token_id") == 6 && key_u32(&g, "tokenizer.ggml.eos_token_id") == 5, "config.json's ids");
    EXPECT(key_bool(&g, "tokenizer.ggml.add_bos_token") == 1 && key_str(&g, "tokenizer.chat_template", "X"), "add_bos_token, template");
    llm__gguf_close(&g);
    free(t);

    // the pre-tokenizers the engine has
    struct { const char *pre, *extra, *name; } good[] = {
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, " BYTE_LEVEL "]}", "", "smollm"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" LLAMA3_RE "\"}, "
         "\"behavior\": \"Isolated\", \"invert\": false}, " BYTE_LEVEL "]}", ", \"ignore_merges\": true", "llama-bpe"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" QWEN2_RE "\"}, "
         "\"behavior\": \"Isolated\", \"invert\": false}, " BYTE_LEVEL "]}", "", "qwen2"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(pre, sizeof(pre), good[i].pre, i == 0 ? "true" : "false");
        t = tok_json(pre, "[]", good[i].extra, "null");
        EXPECT(tok_load(&g, NULL, t, strlen(t), NULL, NULL, NULL, 0, &e) == LLM_OK && key_str(&g, "tokenizer.ggml.pre", good[i].name),
               "%s: %s", good[i].name, e.msg);
        llm__gguf_close(&g);
        free(t);
    }

    // refused, with a message
    struct { const char *pre, *merges, *extra, *want; int use_regex; } bad[] = {
        {BYTE_LEVEL, "[]", ", \"ignore_merges\": true", "ignore_merges true with the gpt-2", 1},
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "[]", "", "pre-tokenizer is not one", 1},
        {"{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\"}", "[]", "", "neither a ByteLevel pre-tokenizer nor byte_fallback", 1},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\\\\\w+\"}, "
         "\"behavior\": \"Isolated\", \"invert\": false}, " BYTE_LEVEL "]}", "[]", "", "pre-tokenizer is not one", 0},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": false}, " BYTE_LEVEL "]}", "[]", "",
         "pre-tokenizer is not one", 1},
        {BYTE_LEVEL, "[[\"a\"]]", "", "merge 0 is neither", 1},
        {BYTE_LEVEL, "[3]", "", "merge 0 is neither", 1},
        {BYTE_LEVEL, "{}", "", "model.merges", 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(pre, sizeof(pre), bad[i].pre, bad[i].use_regex ? "true" : "false");
        t = tok_json(pre, bad[i].merges, bad[i].extra, "null");
        EXPECT(tok_load(&g, NULL, t, strlen(t), NULL, NULL, NULL, 0, &e) != LLM_OK && strstr(e.msg, bad[i].want) && !g.map,
               "%zu: want '%s', got '%s'", i, bad[i].want, e.msg);
        free(t);
    }
    snprintf(pre, sizeof(pre), BYTE_LEVEL, "true");
    t = tok_json(pre, "[]", "", "null");
    EXPECT(tok_load(&g, NULL, t, strlen(t), NULL, NULL, NULL, 6, &e) != LLM_OK && strstr(e.msg, "beyond the model's vocab_size 6"),
           "%s", e.msg);
    free(t);
    // SentencePiece style (byte_fallback): spaces as U+2581, one in front or not; byte tokens
    const char *spm_fmt = "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"unk_token\": \"<unk>\", \"vocab\": "
                          "{\"<unk>\": 0, \"<0x41>\": 1, \"\\u2581\": 2, \"a\": 3, \"\\u2581a\": 4, \"<0x4g>\": 5, \"aa\": 6}, "
                          "\"merges\": [[\"\\u2581\", \"a\"]]}, \"normalizer\": %s, \"pre_tokenizer\": %s}";
    const char *spm_ok[][3] = {
        {"{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"}, "
         "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]}", "null", "1"},
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\", \"split\": false}", "1"},
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"never\", \"split\": false}", "0"},
        {"{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}",
         "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithPrevious\"}", "0"},
    };
    for (size_t i = 0; i < sizeof(spm_ok) / sizeof(spm_ok[0]); i++) {
        char js[2048];
        snprintf(js, sizeof(js), spm_fmt, spm_ok[i][0], spm_ok[i][1]);
        memset(&v, 0, sizeof(v));
        EXPECT(tok_load(&g, &v, js, strlen(js), NULL, NULL, NULL, 0, &e) == LLM_OK && key_str(&g, "tokenizer.ggml.model", "llama") &&
                   key_bool(&g, "tokenizer.ggml.add_space_prefix") == (spm_ok[i][2][0] == '1'),
               "SentencePiece style %zu: %s", i, e.msg);
        if (v.n == 7) {
            EXPECT(v.attr[1] == LLM__TOK_BYTE && v.attr[5] == LLM__TOK_NORMAL && v.attr[0] == LLM__TOK_UNKNOWN && v.unk == 0,
                   "byte token <0x41>, not <0x4g>; <unk>");
            EXPECT(v.scores[4] == 0.0f && v.scores[3] == -INFINITY, "scores: merge 0 makes U+2581 a");
            n = tokenize(&v, "aa", ids, 16);   // "aa" is a token, but no merge makes it
            EXPECT(n == 2 && ids[0] == (spm_ok[i][2][0] == '1' ? 4 : 3) && ids[1] == 3, "%zu: aa is (U+2581)a a (%d tokens)", i, n);
        n = tokenize(&v, "a aA", ids, 16);
            EXPECT(spm_ok[i][2][0] == '1' ? n == 3 && ids[0] == 4 && ids[1] == 4 && ids[2] == 1 : n == 3 && ids[0] == 3 && ids[1] == 4 && ids[2] == 1,
                   "%zu: a aA: %d tokens", i, n);
        }
        EXPECT(v.n == 7, "%zu: 7 tokens", i);
        llm__vocab_free(&v);
        llm__gguf_close(&g);
    }
    const char *spm_bad[][3] = {
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"split\": true}", "splits the text into words"},
        {"{\"type\": \"Lowercase\"}", "null", "a normalizer step other than"},
        {"null", "null", "spaces not replaced"},
        {"null", "{\"type\": \"Whitespace\"}", "a pre-tokenizer other than Metaspace"},
        {"null", "{\"type\": \"Metaspace\", \"replacement\": \"_\"}", "replacement other than U+2581"},
    };
    for (size_t i = 0; i < sizeof(spm_bad) / sizeof(spm_bad[0]); i++) {
        char js[2048];
        snprintf(js, sizeof(js), spm_fmt, spm_bad[i][0], spm_bad[i][1]);
        EXPECT(tok_load(&g, NULL, js, strlen(js), NULL, NULL, NULL, 0, &e) != LLM_OK && strstr(e.msg, spm_bad[i][2]),
               "SentencePiece style: want '%s', got '%s'", spm_bad[i][2], e.msg);
    }
    const char *whole[][2] = {
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "the WordPiece model is not supported"},
        {"{\"model\": {\"type\": \"Unigram\"}}", "the Unigram model is not supported"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}, \"pre_tokenizer\": "
         "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}}", "token id 0 is in the vocab twice"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}, \"pre_tokenizer\": "
         "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}}", "not an integer in [0, 2^24)"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"id\": 1}], \"pre_tokenizer\": "
         "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}}", "added token 0 needs"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"Lowercase\"}, "
         "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}", "normalizer other than NFC"},
        {"[]", "no model object"},
        {"{\"model\": ", "bad JSON"},
    };
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        EXPECT(tok_load(&g, NULL, whole[i][0], strlen(whole[i][0]), NULL, NULL, NULL, 0, &e) != LLM_OK && strstr(e.msg, whole[i][1]),
               "%s: want '%s', got '%s'", whole[i][0], whole[i][1], e.msg);
}

// --- the fixtures ---

static const char *hf_dir(void) {
    const char *d = getenv("LLM_HF_DIR");
    return d && *d ? d : NULL;
}

static char *read_all(const char *path, size_t *n) {
    char *p = NULL;
    struct llm__err e = {{0}, LLM_OK};
    if (llm__read_file(path, (size_t)1 << 30, &p, n, &e) != LLM_OK) return NULL;
    return p;
}

// tok-NAME: every text of corpus.jsonl tokenized as the tokenizers library did.
static void test_corpus(const char *name, int min_texts) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/tok-%s/tokenizer.json", hf_dir(), name);
    size_t tn = 0, cn = 0;
    char *tok = read_all(path, &tn);
    snprintf(path, sizeof(path), "%s/tok-%s/corpus.jsonl", hf_dir(), name);
    char *corpus = read_all(path, &cn);
    EXPECT(tok && corpus, "%s: tokenizer.json and corpus.jsonl", name);
    struct llm__gguf g;
    struct llm__vocab v;
    memset(&v, 0, sizeof(v));
    struct llm__err e = {{0}, LLM_OK};
    if (!tok || !corpus || tok_load(&g, &v, tok, tn, NULL, NULL, NULL, 0, &e) != LLM_OK) {
        EXPECT(0, "%s: %s", name, e.msg);
        free(tok);
        free(corpus);
        return;
    }
    int texts = 0, same = 0, tokens = 0;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)1 << 20);
    for (char *line = corpus, *end; line < corpus + cn; line = end + 1) {
        end = memchr(line, '\n', (size_t)(corpus + cn - line));
        if (!end) end = corpus + cn;
        if (end == line) continue;
        struct llm__json j;
        if (llm__json_parse(&j, line, (size_t)(end - line), "corpus.jsonl", &e) != LLM_OK) { EXPECT(0, "%s", e.msg); break; }
        const int32_t tx = llm__json_get(&j, 0, "text"), a = llm__json_get(&j, 0, "ids");
        size_t len = 0;
        char *text = llm__json_strdup(&j, tx, &len);
        if (!text || a < 0 || j.nodes[a].type != LLM__JSON_ARR) {
            EXPECT(0, "%s: corpus.jsonl line %d has no text and ids", name, texts);
            free(text);
            llm__json_free(&j);
            break;
        }
        int n = llm__tokenize(&v, text, len, LLM_TOKENIZE_PARSE_SPECIAL, ids, 1 << 20, &e);
        bool ok = n == j.nodes[a].n;
        for (int i = 0, k = a + 1; ok && i < n; i++, k = j.nodes[k].next) {
            int64_t want = -1;
            ok = llm__json_int(&j, k, 0, v.n - 1, &want) && want == ids[i];
        }
        if (!ok && texts - same < 3) {
            fprintf(stderr, "%s: text %d (%.40s...) differs: %d tokens, tokenizers %d\n  engine:", name, texts, text, n, j.nodes[a].n);
            for (int i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n  tokenizers: %.*s\n", (int)LLM__MIN(j.nodes[a].len, 400), j.text + j.nodes[a].start);
        }
        texts++;
        same += ok;
        tokens += n > 0 ? n : 0;
        free(text);
        llm__json_free(&j);
    }
    EXPECT(texts >= min_texts && same == texts, "%s: %d of %d texts (%d tokens) as the tokenizers library", name, same, texts, tokens);
    free(ids);
    llm__vocab_free(&v);
    llm__gguf_close(&g);
    free(tok);
    free(corpus);
}

static llm_engine *open_engine(const char *path) {
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = 2;
    p.max_model_len = 256;
    p.kv_cache_bytes = (size_t)64 << 20;
    char err[512] = "";
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E, "%s: %s", path, err);
    return E;
}

// The directory base/name and the GGUF file of the same weights: the same metadata, tokens and
// logits.
static void test_model(const char *base, const char *name) {
    char dir[1024], file[1024];
    snprintf(dir, sizeof(dir), "%s/%s", base, name);
    snprintf(file, sizeof(file), "%s/%s.gguf", base, name);
    llm_engine *A = open_engine(dir), *B = open_engine(file);
    if (!A || !B) {
        if (A) llm_engine_free(A);
        if (B) llm_engine_free(B);
        return;
    }
    struct llm_model_info a, b;
    llm_get_model_info(A, &a);
    llm_get_model_info(B, &b);
    EXPECT(a.gguf_version == 0 && b.gguf_version == 3, "versions %u %u", a.gguf_version, b.gguf_version);
    EXPECT(a.n_vocab == b.n_vocab && a.n_embd == b.n_embd && a.n_layer == b.n_layer && a.n_head == b.n_head &&
               a.n_head_kv == b.n_head_kv && a.head_dim == b.head_dim && a.n_ff == b.n_ff && a.n_ctx_train == b.n_ctx_train &&
               a.n_params == b.n_params,
           "%s: the same shape", name);
    EXPECT(a.bos_id == b.bos_id && a.eos_id == b.eos_id && a.add_bos == b.add_bos && a.max_token_bytes == b.max_token_bytes,
           "%s: bos %d/%d eos %d/%d add_bos %d/%d", name, a.bos_id, b.bos_id, a.eos_id, b.eos_id, a.add_bos, b.add_bos);
    const char *ta = llm_chat_template_detect(A), *tb = llm_chat_template_detect(B);
    EXPECT(ta && tb ? strcmp(ta, tb) == 0 : !ta && !tb, "%s: chat templates %s and %s", name, ta ? ta : "none", tb ? tb : "none");
    const struct llm_chat_message msgs[] = {{"system", "You are a helpful assistant."},
                                            {"user", "Write the numbers 1 to 12 in French, then explain why 7 * 8 = 56."}};
    char text[1024];
    int tl = llm_chat_apply(ta ? ta : "chatml", msgs, 2, 1, text, sizeof(text));
    int32_t ia[512], ib[512];
    const int flags = LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL;
    int na = llm_tokenize(A, text, (size_t)tl, flags, ia, 512), nb = llm_tokenize(B, text, (size_t)tl, flags, ib, 512);
    EXPECT(na > 20 && na == nb && memcmp(ia, ib, sizeof(int32_t) * (size_t)na) == 0, "%s: the same %d tokens", name, na);
    // logits of the prompt (a batch), then of 8 greedy decode steps, bit for bit
    const size_t nv = (size_t)a.n_vocab;
    float *la = malloc(sizeof(float) * nv * (size_t)na), *lb = malloc(sizeof(float) * nv * (size_t)na);
    int sa = llm_seq_new(A), sb = llm_seq_new(B);
    EXPECT(llm_seq_eval(A, sa, ia, na, la, 1) == LLM_OK && llm_seq_eval(B, sb, ib, nb, lb, 1) == LLM_OK, "eval");
    EXPECT(memcmp(la, lb, sizeof(float) * nv * (size_t)na) == 0, "%s: the prompt's logits, bit for bit", name);
    int same_steps = 0;
    for (int s = 0; s < 8; s++) {
        int32_t t = 0;
        for (size_t i = 1; i < nv; i++) if (lb[(size_t)(na - 1) * nv + i] > lb[(size_t)(na - 1) * nv + (size_t)t]) t = (int32_t)i;
        if (llm_seq_eval(A, sa, &t, 1, la + (size_t)(na - 1) * nv, 0) != LLM_OK ||
            llm_seq_eval(B, sb, &t, 1, lb + (size_t)(na - 1) * nv, 0) != LLM_OK)
            break;
        same_steps += memcmp(la + (size_t)(na - 1) * nv, lb + (size_t)(na - 1) * nv, sizeof(float) * nv) == 0;
    }
    EXPECT(same_steps == 8, "%s: %d of 8 decode steps with the same logits", name, same_steps);
    free(la);
    free(lb);
    llm_engine_free(A);
    llm_engine_free(B);
}

// A quantized directory base/name (AWQ or GPTQ, tests/hf/awq_gptq.py pack) and base/name-ref,
// its reference dequantization (awq_gptq.py dequant: F32, w = (q - z) * s by the formats'
// documented packing): every quantized weight, taken back to floats in the checkpoint's input
// order, is the reference's bit for bit (want_type: the engine layout they must have become), and
// the logits of a prompt agree (the quantized products round their inputs to 8 bits: the mean
// KL divergence below kl_bound, the top token the same at 80% of positions or more).
static void test_quantized(const char *base, const char *name, const char *want_type, double kl_bound) {
    char dir[1024], ref[1024];
    snprintf(dir, sizeof(dir), "%s/%s", base, name);
    snprintf(ref, sizeof(ref), "%s/%s-ref", base, name);
    struct llm__gguf q, r;
    struct llm__err e = {{0}, LLM_OK};
    if (llm__model_open(&q, dir, false, &e) != LLM_OK) {
        EXPECT(0, "%s: %s", dir, e.msg);
        return;
    }
    if (llm__model_open(&r, ref, false, &e) != LLM_OK) {
        EXPECT(0, "%s: %s", ref, e.msg);
        llm__gguf_close(&q);
        return;
    }
    int n_quant = 0, n_wrong = 0, n_perm = 0;
    for (int64_t i = 0; i < q.n_tensors; i++) {
        const struct llm__gguf_tensor *t = &q.tensors[i], *u = llm__gguf_find_tensor(&r, t->name);
        if (!llm__is_gq((int)t->type)) continue;
        n_quant++;
        n_perm += t->perm != NULL;
        if (!u || u->type != LLM__TYPE_F32 || u->ne[0] != t->ne[0] || u->ne[1] != t->ne[1] ||
            strncmp(llm__type_info(t->type)->name, want_type, strlen(want_type)) != 0) {
            EXPECT(0, "%s: %s is %s, its reference %s", name, t->name, llm__type_info(t->type)->name, u ? "of another shape or type" : "missing");
            continue;
        }
        const size_t row = llm__row_bytes((int)t->type, t->ne[0]);
        float *w = malloc(sizeof(float) * (size_t)t->ne[0]);
        int64_t wrong = 0;
        for (int64_t o = 0; o < t->ne[1]; o++) {
            llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)o * row, w, t->ne[0]);
            const float *want = (const float *)u->data + (size_t)o * (size_t)t->ne[0];
            for (int64_t k = 0; k < t->ne[0]; k++) wrong += w[k] != want[t->perm ? t->perm[k] : k];
        }
        n_wrong += wrong != 0;
        EXPECT(wrong == 0, "%s: %s: %lld weights differ from the reference dequantization", name, t->name, (long long)wrong);
        free(w);
    }
    EXPECT(n_quant >= 7, "%s: %d quantized weights", name, n_quant);
    printf("  %s: %d weights (%s, %d with act-order) equal to the reference dequantization\n", name, n_quant - n_wrong, want_type, n_perm);
    llm__gguf_close(&q);
    llm__gguf_close(&r);
    llm_engine *A = open_engine(dir), *B = open_engine(ref);
    if (!A || !B) {
        if (A) llm_engine_free(A);
        if (B) llm_engine_free(B);
        return;
    }
    struct llm_model_info mi;
    llm_get_model_info(A, &mi);
    static const char text[] = "The quick brown fox jumps over the lazy dog. In the beginning was the word, and the word was "
                               "with the model; 1 2 3 4 5 6 7 8 9 10, and then the rest of the numbers.";
    int32_t ids[256];
    const int n = llm_tokenize(A, text, strlen(text), LLM_TOKENIZE_ADD_SPECIAL, ids, 256);
    const size_t nv = (size_t)mi.n_vocab;
    float *la = malloc(sizeof(float) * nv * (size_t)n), *lb = malloc(sizeof(float) * nv * (size_t)n);
    int sa = llm_seq_new(A), sb = llm_seq_new(B);
    EXPECT(n > 20 && llm_seq_eval(A, sa, ids, n, la, 1) == LLM_OK && llm_seq_eval(B, sb, ids, n, lb, 1) == LLM_OK, "%s: eval", name);
    double kl = 0, kl_max = 0;
    int agree = 0;
    for (int i = 0; i < n; i++) {
        const float *x = la + (size_t)i * nv, *y = lb + (size_t)i * nv;
        double mx = -INFINITY, my = -INFINITY, sx = 0, sy = 0, k = 0;
        size_t ax = 0, ay = 0;
        for (size_t v = 0; v < nv; v++) {
            if (x[v] > mx) mx = x[v], ax = v;
            if (y[v] > my) my = y[v], ay = v;
        }
        for (size_t v = 0; v < nv; v++) sx += exp(x[v] - mx), sy += exp(y[v] - my);
        for (size_t v = 0; v < nv; v++) {   // KL(reference || quantized)
            const double py = exp(y[v] - my) / sy;
            k += py * ((y[v] - my - log(sy)) - (x[v] - mx - log(sx)));
        }
        kl += k / n;
        kl_max = k > kl_max ? k : kl_max;
        agree += ax == ay;
    }
    printf("  %s: %d positions, top token the same at %d, KL divergence mean %.2e max %.2e\n", name, n, agree, kl, kl_max);
    EXPECT(kl < kl_bound && agree * 100 >= n * 80, "%s: mean KL %.3g (bound %.3g), top token the same at %d of %d", name, kl,
           kl_bound, agree, n);
    free(la);
    free(lb);
    llm_engine_free(A);
    llm_engine_free(B);
}

// A directory whose path leaves no room for its files' names is refused, not opened through
// paths cut short (which could name another file).
static void test_long_dir(void) {
    char dir[4000];
    memset(dir, 'd', sizeof(dir) - 1);
    dir[0] = '/';
    dir[sizeof(dir) - 1] = 0;
    struct llm__gguf g;
    memset(&g, 0, sizeof(g));
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__hf_open_dir(&g, dir, false, &e) == LLM_ERR_IO && strstr(e.msg, "directory path too long"),
           "a 3,999-byte directory path: %s", e.msg);
}

int main(void) {
    test_tokenizer_json();
    test_long_dir();
    EXPECT(hf_dir(), "LLM_HF_DIR is not set: it names the folder tests/fixtures.sh makes the Hugging Face fixtures in (make test sets it)");
    if (hf_dir()) {
        test_corpus("gpt-2", 30);
        test_corpus("llama-bpe", 30);
        test_corpus("qwen2", 30);
        test_corpus("smollm", 30);
        test_corpus("llama-spm", 30);
        if (!TEST_SANITIZED) test_corpus("gemma", 30);
        test_corpus("llama-spm-first", 30);
        test_corpus("llama-spm-always", 30);
        test_model(hf_dir(), "smollm2-bf16");
        if (TEST_SANITIZED) {
            SKIP("under sanitizers: not the F16 SmolLM2 and Gemma 3 directories, nor Gemma 3's 262,144-token vocabulary (make test checks them)");
        } else {
            test_model(hf_dir(), "smollm2-f16");
            test_model(hf_dir(), "gemma3-bf16");
        }
        if (TEST_SANITIZED) SKIP("under sanitizers: not the GPTQ SmolLM2 directory (make test checks it; the tiny ones below have its layouts)");
        else test_quantized(hf_dir(), "smollm2-gptq", "int4", 0.02);   // (576 inputs: int4_g64 blocks; 1536: int4_g128)
    }
    // the tiny random models of the other architectures (tests/make_models.sh)
    const char *models = getenv("LLM_TEST_MODELS");
    EXPECT(models && *models, "LLM_TEST_MODELS is not set (make test sets it)");
    char base[1024];
    snprintf(base, sizeof(base), "%s/hf", models && *models ? models : "build/models");
    const char *tiny[] = {"tiny-qwen2-chat", "tiny-qwen3-f32", "tiny-phi3-f32", "tiny-gemma2-f32", "tiny-gemma3-f32"};
    for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) test_model(base, tiny[i]);
    test_quantized(base, "tiny-qwen3-awq", "int4_g128", 0.02);
    test_quantized(base, "tiny-phi3-gptq", "int4_g32", 0.02);
    test_quantized(base, "tiny-gemma2-gptq8", "int8_g64", 0.02);
    test_quantized(base, "tiny-gemma3-gptq", "int4_g128", 0.02);
    return test_summary("test_hf");
}
