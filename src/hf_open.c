// Hugging Face directories opened as models: tokenizer.json, the GGUF view of a directory

#include "internal.h"

// --- tokenizer.json ---
// A directory's tokenizer as the GGUF keys llama.cpp's converter writes, which the engine's
// tokenizer then reads as from any GGUF file. tokenizer.json's BPE model, of two kinds:
//   - byte-level (GPT-2, Llama 3, Qwen 2, SmolLM, Tekken): the merges (pairs joined by a space,
//     spaces inside them written as U+0120 as the converter does) and the pre-tokenizer's name
//     for what the file's pre_tokenizer does: ByteLevel alone is GPT-2's, Digits (each) then
//     ByteLevel SmolLM's, a Split by Llama 3's, Qwen 2's, Tekken's or GPT-2's regex then
//     ByteLevel theirs. Anything else is refused: the engine's scanners are written for those
//     rules. The normalizer must be none or NFC (text is taken as already NFC, as llama.cpp
//     takes it).
//   - SentencePiece style, with byte_fallback (Llama 2, Mistral, Gemma; llm__hf_spm_style):
//     tokenizer.ggml.model "llama", byte tokens <0xNN>, and scores from the merges' ranks (see
//     below), since the engine's SentencePiece merger merges by score.
// Both: the tokens by id (vocab, then added_tokens over it; ids without one become "[PADn]",
// unused), their types (an added token is a control token when special or shaped like one,
// "<|...|>", else user-defined, as the converter decides; the rest normal), the added tokens
// that take the whitespace after them (rstrip). The special tokens: tokenizer_config.json's
// bos_token, eos_token, unk_token, pad_token looked up among the added tokens, else config.json's
// ids; whether BOS and EOS are added: the post-processor's template, else tokenizer_config.json's
// add_bos_token / add_eos_token (llama.cpp's converter's order); the chat template:
// tokenizer_config.json's, else chat_template.jinja; up to two of generation_config.json's other
// eos_token_id values end generations too (as EOT and EOM).

// A directory's texts (NULL: the file is absent).
struct llm__hf_texts {
    const char *cfg, *tok, *tok_cfg, *gen_cfg, *tmpl;
    size_t cfg_len, tok_len, tok_cfg_len, gen_cfg_len, tmpl_len;
    const char *name;   // general.name, or NULL
};

static void llm__gbuf_bool(struct llm__gbuf *b, const char *key, bool v) {
    llm__gbuf_key(b, NULL, key, LLM__GGUF_BOOL);
    uint8_t x = v;
    llm__gbuf_put(b, &x, 1);
}
static void llm__gbuf_arr(struct llm__gbuf *b, const char *key, uint32_t type, uint64_t n) {
    llm__gbuf_key(b, NULL, key, LLM__GGUF_ARR);
    llm__gbuf_put(b, &type, 4);
    llm__gbuf_put(b, &n, 8);
}

// The steps of a pre-tokenizer or normalizer (a Sequence's, under `key`, or itself): at most
// max, their count (-1: more).
static int llm__hf_steps(const struct llm__json *j, int32_t p, const char *key, int32_t *out, int max) {
    if (p < 0 || j->nodes[p].type != LLM__JSON_OBJ) return 0;
    const int32_t ty = llm__json_get(j, p, "type");
    if (ty < 0 || !llm__json_eq(j, ty, "Sequence")) { out[0] = p; return 1; }
    const int32_t a = llm__json_get(j, p, key);
    if (a < 0 || j->nodes[a].type != LLM__JSON_ARR || j->nodes[a].n > max) return -1;
    for (int32_t i = 0, k = a + 1; i < j->nodes[a].n; i++, k = j->nodes[k].next) out[i] = k;
    return j->nodes[a].n;
}

// Whether member key of object o is the string s.
static bool llm__hf_member_is(const struct llm__json *j, int32_t o, const char *key, const char *s) {
    const int32_t v = llm__json_get(j, o, key);
    return v >= 0 && llm__json_eq(j, v, s);
}

static bool llm__hf_is(const struct llm__json *j, int32_t o, const char *type) { return llm__hf_member_is(j, o, "type", type); }

// A boolean member of o: its value, or def when absent (or not a boolean).
static bool llm__hf_flag(const struct llm__json *j, int32_t o, const char *key, bool def) {
    const int32_t v = llm__json_get(j, o, key);
    return v < 0 ? def : j->nodes[v].type == LLM__JSON_TRUE ? true : j->nodes[v].type == LLM__JSON_FALSE ? false : def;
}

// The engine's name (tokenizer.ggml.pre) for pre-tokenizer p of a byte-level BPE, or NULL.
static const char *llm__hf_pre_name(const struct llm__json *j, int32_t p) {
    static const struct { const char *re, *pre; } res[] = {
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         "\\s+(?!\\S)|\\s+", "llama-bpe"},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         "\\s+(?!\\S)|\\s+", "qwen2"},
        {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"
         "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "tekken"},
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
    };
    int32_t st[3];
    const int n = llm__hf_steps(j, p, "pretokenizers", st, 3);
    if (n < 1 || n > 2) return NULL;
    const int32_t bl = st[n - 1];   // the last step maps bytes to GPT-2's code points
    if (!llm__hf_is(j, bl, "ByteLevel") || llm__hf_flag(j, bl, "add_prefix_space", true)) return NULL;
    const bool regex = llm__hf_flag(j, bl, "use_regex", true);
    if (n == 1) return regex ? "gpt-2" : NULL;
    if (llm__hf_is(j, st[0], "Digits")) return regex && llm__hf_flag(j, st[0], "individual_digits", false) ? "smollm" : NULL;
    if (regex || !llm__hf_is(j, st[0], "Split") || llm__hf_flag(j, st[0], "invert", false) ||
        !llm__hf_member_is(j, st[0], "behavior", "Isolated"))
        return NULL;
    const int32_t re = llm__json_get(j, llm__json_get(j, st[0], "pattern"), "Regex");
    for (size_t k = 0; re >= 0 && k < LLM__ARRAY_LEN(res); k++)
        if (llm__json_eq(j, re, res[k].re)) return res[k].pre;
    return NULL;
}

// SentencePiece-style BPE (byte_fallback: Llama 2, Mistral, Gemma): whether spaces become U+2581
// (by the normalizer's Replace, or by a Metaspace pre-tokenizer that does not split) and
// *prefix, whether one goes in front of the text (Prepend: in front of every text between
// special tokens; Metaspace's *scheme "always": the same unless the text starts with a space,
// "first": only at the start of the whole text); NULL, or what is not supported.
static const char *llm__hf_spm_style(const struct llm__json *j, int32_t norm, int32_t pre, bool *prefix, const char **scheme) {
    int32_t st[8];
    bool replaced = false;
    *prefix = false;
    *scheme = NULL;
    int n = llm__hf_steps(j, norm, "normalizers", st, 8);
    if (n < 0) return "a normalizer of more than 8 steps";
    for (int i = 0; i < n; i++) {
        if (llm__hf_is(j, st[i], "Replace") && llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " ") &&
            llm__hf_member_is(j, st[i], "content", "\xe2\x96\x81"))
            replaced = true;
        else if (llm__hf_is(j, st[i], "Prepend") && llm__hf_member_is(j, st[i], "prepend", "\xe2\x96\x81"))
            *prefix = true;
        else
            return "a normalizer step other than Replace(' ', U+2581) and Prepend(U+2581)";
    }
    n = llm__hf_steps(j, pre, "pretokenizers", st, 8);
    if (n < 0) return "a pre-tokenizer of more than 8 steps";
    for (int i = 0; i < n; i++) {
        if (llm__hf_is(j, st[i], "Metaspace")) {
            if (!llm__hf_member_is(j, st[i], "replacement", "\xe2\x96\x81")) return "a Metaspace replacement other than U+2581";
            if (llm__hf_flag(j, st[i], "split", false)) return "a Metaspace pre-tokenizer that splits the text into words";
            const int32_t sc = llm__json_get(j, st[i], "prepend_scheme");
            if (sc >= 0 && !llm__json_eq(j, sc, "always") && !llm__json_eq(j, sc, "first") && !llm__json_eq(j, sc, "never"))
                return "a Metaspace prepend scheme other than always, first, never";
            *prefix = sc >= 0 ? !llm__json_eq(j, sc, "never") : llm__hf_flag(j, st[i], "add_prefix_space", true);
            *scheme = sc >= 0 && llm__json_eq(j, sc, "first") ? "first" : "always";
            replaced = true;
        } else if (!(replaced && llm__hf_is(j, st[i], "Split") && llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " "))) {
            return "a pre-tokenizer other than Metaspace";   // (a Split at spaces after they became U+2581 splits nothing)
        }
    }
    return replaced ? NULL : "spaces not replaced by U+2581";
}

// The content of a tokenizer_config.json entry (a string, or an object with "content"), or -1.
static int32_t llm__hf_tok_content(const struct llm__json *j, int32_t v) {
    if (v >= 0 && j->nodes[v].type == LLM__JSON_OBJ) v = llm__json_get(j, v, "content");
    return v >= 0 && j->nodes[v].type == LLM__JSON_STR ? v : -1;
}

// An id of config.json or generation_config.json (a number, or the first of an array), or -1.
static int64_t llm__hf_json_id(const struct llm__json *j, int32_t v, int64_t n) {
    int64_t id = -1;
    if (v >= 0 && j->nodes[v].type == LLM__JSON_ARR) v = llm__json_at(j, v, 0);
    return v >= 0 && llm__json_int(j, v, 0, n - 1, &id) ? id : -1;
}

// Whether added token text t looks like a control token, as the converter decides.
static bool llm__hf_looks_special(const char *t, size_t n) {
    static const char *const named[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    for (size_t i = 0; i < LLM__ARRAY_LEN(named); i++)
        if (n == strlen(named[i]) && !memcmp(t, named[i], n)) return true;
    if (n >= 3 && !memcmp(t, "<|", 2) && !memcmp(t + n - 2, "|>", 2)) return true;   // (<|> too, as in Python)
    if (n >= 7 && !memcmp(t, "<\xef\xbd\x9c", 4) && !memcmp(t + n - 4, "\xef\xbd\x9c>", 4)) return true;   // <｜...｜>
    return n >= 8 && !memcmp(t, "<unused", 7) && t[n - 1] == '>';
}

struct llm__hf_tokens {
    struct llm__outbuf text;   // every token's text, back to back
    uint64_t *off;             // [n + 1]: token i is text.p[off[i] .. off[i] + len[i])
    uint32_t *len;             // [n]
    int32_t *type;             // [n] enum llm__tok_attr
    int64_t n;
};

// Id of the token with text s, or -1 (a linear search: a few lookups per directory).
static int64_t llm__hf_tok_find(const struct llm__hf_tokens *t, const char *s, size_t n) {
    for (int64_t i = 0; i < t->n; i++)
        if (t->len[i] == n && memcmp(t->text.p + t->off[i], s, n) == 0) return i;
    return -1;
}

static enum llm_status llm__hf_tokenizer(const struct llm__hf_texts *tx, int64_t n_vocab, struct llm__gbuf *b,
                                         struct llm__err *e) {
    struct llm__json j = {0}, jc = {0}, jcfg = {0}, jg = {0};
    struct llm__hf_tokens t = {0};
    char *buf = NULL, pr[88];
    enum llm_status st = llm__json_parse(&j, tx->tok, tx->tok_len, "tokenizer.json", e);
    if (st == LLM_OK && tx->tok_cfg) st = llm__json_parse(&jc, tx->tok_cfg, tx->tok_cfg_len, "tokenizer_config.json", e);
    if (st == LLM_OK && tx->gen_cfg) st = llm__json_parse(&jg, tx->gen_cfg, tx->gen_cfg_len, "generation_config.json", e);
    if (st == LLM_OK) st = llm__json_parse(&jcfg, tx->cfg, tx->cfg_len, "config.json", e);
    if (st) goto done;
    const int32_t model = llm__json_get(&j, 0, "model"), mtype = llm__json_get(&j, model, "type");
    const int32_t vocab = llm__json_get(&j, model, "vocab"), merges = llm__json_get(&j, model, "merges");
    const int32_t added = llm__json_get(&j, 0, "added_tokens");
    if (model < 0 || j.nodes[model].type != LLM__JSON_OBJ) {
        st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: no model object (with model.vocab and model.merges)");
        goto done;
    }
    if (mtype >= 0 && !llm__json_eq(&j, mtype, "BPE")) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the %s model is not supported (BPE only)",
                       j.nodes[mtype].type == LLM__JSON_STR ? llm__gguf_printable(pr, j.text + j.nodes[mtype].start, j.nodes[mtype].len)
                                                            : "(not a string)");
        goto done;
    }
    if (vocab < 0 || j.nodes[vocab].type != LLM__JSON_OBJ || merges < 0 || j.nodes[merges].type != LLM__JSON_ARR ||
        (added >= 0 && j.nodes[added].type != LLM__JSON_ARR)) {
        st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: model.vocab (an object), model.merges and added_tokens (arrays) are needed");
        goto done;
    }
    const int32_t pre_node = llm__json_get(&j, 0, "pre_tokenizer"), norm = llm__json_get(&j, 0, "normalizer");
    int32_t steps[8];
    bool byte_level = false, spm = false, space_prefix = false;
    const char *scheme = NULL;
    for (int i = 0, n = llm__hf_steps(&j, pre_node, "pretokenizers", steps, 8); i < n; i++)
        byte_level |= llm__hf_is(&j, steps[i], "ByteLevel");
    if (!byte_level) {
        const char *why = "neither a ByteLevel pre-tokenizer nor byte_fallback";
        if (llm__hf_flag(&j, model, "byte_fallback", false)) why = llm__hf_spm_style(&j, norm, pre_node, &space_prefix, &scheme);
        if (why) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: %s; the engine reads byte-level BPE (GPT-2, Llama 3, Qwen, "
                           "SmolLM, Tekken) and SentencePiece-style BPE with byte_fallback (Llama 2, Mistral, Gemma)", why);
            goto done;
        }
        spm = true;
    }
    const char *pre = spm ? "" : llm__hf_pre_name(&j, pre_node);
    if (!pre) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the pre-tokenizer is not one the engine has: ByteLevel alone "
                       "(GPT-2), Digits then ByteLevel (SmolLM), or a Split by Llama 3's, Qwen 2's, Tekken's or GPT-2's regex then "
                       "ByteLevel, without add_prefix_space");
        goto done;
    }
    if (!spm && norm >= 0 && j.nodes[norm].type != LLM__JSON_NULL && !llm__hf_is(&j, norm, "NFC")) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: a byte-level tokenizer with a normalizer other than NFC is not supported");
        goto done;
    }
    const bool ignore = llm__hf_flag(&j, model, "ignore_merges", false);
    if (spm && ignore) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges with byte_fallback is not supported");
        goto done;
    }
    for (size_t k = 0; k < LLM__ARRAY_LEN(llm__pre_names); k++)
        if (!strcmp(llm__pre_names[k].name, pre) && llm__pre_names[k].ignore_merges != ignore) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges %s with the %s pre-tokenizer is not supported",
                           ignore ? "true" : "false", pre);
            goto done;
        }
    // the tokens by id
    int64_t max_id = -1;
    for (int pass = 0; pass < 2; pass++) {   // 0: the largest id; 1: the texts
        if (pass == 1) {
            t.n = LLM__MAX(n_vocab, max_id + 1);
            if (n_vocab > 0 && max_id >= n_vocab) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is beyond the model's vocab_size %lld",
                               (long long)max_id, (long long)n_vocab);
                goto done;
            }
            t.off = calloc((size_t)t.n + 1, sizeof(*t.off));
            t.len = calloc((size_t)t.n, sizeof(*t.len));
            t.type = calloc((size_t)t.n, sizeof(*t.type));
            buf = malloc(tx->tok_len + 1);
            if (!t.off || !t.len || !t.type || !buf) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        }
        for (int32_t m = 0, k = vocab + 1; m < j.nodes[vocab].n; m++, k = j.nodes[k + 1].next) {
            int64_t id;
            if (!llm__json_int(&j, k + 1, 0, (1 << 24) - 1, &id)) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: the id of vocab entry %d is not an integer in [0, 2^24)", m);
                goto done;
            }
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            if (t.type[id]) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is in the vocab twice", (long long)id);
                goto done;
            }
            size_t n = llm__json_decode(&j, k, buf);
            t.off[id] = t.text.n;
            t.len[id] = (uint32_t)n;
            t.type[id] = LLM__TOK_NORMAL;
            llm__outbuf_put(&t.text, buf, n);
        }
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            int64_t id;
            const int32_t c = llm__json_get(&j, k, "content");
            if (!llm__json_int(&j, llm__json_get(&j, k, "id"), 0, (1 << 24) - 1, &id) || c < 0 || j.nodes[c].type != LLM__JSON_STR) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: added token %d needs an id in [0, 2^24) and a content string", m);
                goto done;
            }
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            size_t n = llm__json_decode(&j, c, buf);
            t.off[id] = t.text.n;   // over the vocab's entry, as the tokenizer's get_vocab() has it
            t.type[id] = llm__hf_flag(&j, k, "special", false) || llm__hf_looks_special(buf, n) ? LLM__TOK_CONTROL : LLM__TOK_USER;
            for (size_t i = 0; i < n; i++) {   // SentencePiece style: user-defined tokens' U+2581 as spaces, as the converter has them
                const bool sp = spm && t.type[id] == LLM__TOK_USER && i + 3 <= n && !memcmp(buf + i, "\xe2\x96\x81", 3);
                llm__outbuf_put(&t.text, sp ? " " : buf + i, 1);
                i += sp ? 2 : 0;
            }
            t.len[id] = (uint32_t)(t.text.n - t.off[id]);
        }
    }
    for (int64_t i = 0; i < t.n; i++)
        if (!t.type[i]) {
            char pad[32];
            int n = snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)i);
            t.off[i] = t.text.n;
            t.len[i] = (uint32_t)n;
            t.type[i] = LLM__TOK_UNUSED;
            llm__outbuf_put(&t.text, pad, (size_t)n);
        }
    if (t.text.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
    // SentencePiece style: scores that merge as the merges' ranks do (a token's score is minus
    // the rank of the first merge that makes it; the encoder merges the best-scoring pair that
    // makes a token); byte tokens <0xNN>
    float *scores = NULL;
    uint32_t *ht = NULL, mask = 0;
    struct llm__gguf_str *strs = NULL;
    if (spm) {
        scores = malloc((size_t)t.n * sizeof(float));
        strs = malloc((size_t)t.n * sizeof(*strs));
        if (!scores || !strs) { free(scores); free(strs); st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        for (int64_t i = 0; i < t.n; i++) {
            strs[i] = (struct llm__gguf_str){t.text.p + t.off[i], t.len[i]};
            scores[i] = -INFINITY;   // no merge makes it: never merged (as the tokenizers library)
            const char *p = t.text.p + t.off[i];   // <0xNN>, NN upper-case hexadecimal (not NUL-terminated)
            const bool hex = t.len[i] == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && strchr("0123456789ABCDEF", p[3]) && p[3] &&
                             strchr("0123456789ABCDEF", p[4]) && p[4];
            if (t.type[i] == LLM__TOK_NORMAL && hex) t.type[i] = LLM__TOK_BYTE;
        }
        if (!(ht = llm__strtab_build(strs, (int)t.n, &mask))) {
            free(scores);
            free(strs);
            st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    llm__gbuf_s(b, NULL, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!spm) llm__gbuf_s(b, NULL, "tokenizer.ggml.pre", pre);
    else llm__gbuf_bool(b, "tokenizer.ggml.add_space_prefix", space_prefix);
    if (spm && space_prefix && scheme) llm__gbuf_s(b, NULL, "tokenizer.ggml.prepend_scheme", scheme);
    if (!spm) llm__gbuf_arr(b, "tokenizer.ggml.merges", LLM__GGUF_STR, (uint64_t)j.nodes[merges].n);
    for (int32_t m = 0, k = merges + 1; st == LLM_OK && m < j.nodes[merges].n; m++, k = j.nodes[k].next) {
        const int32_t l = llm__json_at(&j, k, 0), r = llm__json_at(&j, k, 1);
        if (j.nodes[k].type != LLM__JSON_STR && (j.nodes[k].type != LLM__JSON_ARR || j.nodes[k].n != 2 ||
                                                 j.nodes[l].type != LLM__JSON_STR || j.nodes[r].type != LLM__JSON_STR)) {
            st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [\"a\", \"b\"]", m);
            break;
        }
        struct llm__outbuf o = {0};   // "left right", spaces inside a pair's parts as U+0120
        if (j.nodes[k].type == LLM__JSON_STR) llm__outbuf_put(&o, buf, llm__json_decode(&j, k, buf));
        for (int side = 0; j.nodes[k].type == LLM__JSON_ARR && side < 2; side++) {
            const size_t n = llm__json_decode(&j, side ? r : l, buf);
            if (side) llm__outbuf_put(&o, " ", 1);
            for (size_t i = 0; i < n; i++) llm__outbuf_put(&o, buf[i] == ' ' ? "\xc4\xa0" : buf + i, buf[i] == ' ' ? 2 : 1);
        }
        if (!spm) llm__gbuf_str(b, o.p, o.n);
        char *sp = o.p ? memchr(o.p, ' ', o.n) : NULL;
        if (spm && sp) {   // the token the merge makes
            memmove(sp, sp + 1, o.n - (size_t)(sp - o.p) - 1);
            const int32_t id = llm__strtab_find(ht, mask, strs, o.p, o.n - 1);
            if (id >= 0 && scores[id] == -INFINITY) scores[id] = -(float)m;
        }
        b->o.fail |= o.fail;
        free(o.p);
    }
    llm__gbuf_arr(b, "tokenizer.ggml.tokens", LLM__GGUF_STR, (uint64_t)t.n);
    for (int64_t i = 0; i < t.n; i++) llm__gbuf_str(b, t.text.p + t.off[i], t.len[i]);
    if (spm) {
        llm__gbuf_arr(b, "tokenizer.ggml.scores", LLM__GGUF_F32, (uint64_t)t.n);
        llm__gbuf_put(b, scores, (size_t)t.n * sizeof(float));
    }
    free(scores);
    free(strs);
    free(ht);
    if (st) goto done;
    // special tokens
    static const char *const kinds[][3] = {
        {"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"}, {"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "unk_token_id", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
    };
    int64_t ids[4];
    for (int s = 0; s < 4; s++) {
        ids[s] = -1;
        const int32_t c = tx->tok_cfg ? llm__hf_tok_content(&jc, llm__json_get(&jc, 0, kinds[s][0])) : -1;
        size_t cn = 0;
        char *cs = c >= 0 ? llm__json_strdup(&jc, c, &cn) : NULL;
        if (c >= 0 && !cs) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        for (int32_t m = 0, k = added + 1; cs && ids[s] < 0 && added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            const int32_t ct = llm__json_get(&j, k, "content");
            int64_t id;
            if (strlen(cs) == cn && llm__json_eq(&j, ct, cs) && llm__json_int(&j, llm__json_get(&j, k, "id"), 0, t.n - 1, &id))
                ids[s] = id;
        }
        free(cs);
        if (ids[s] < 0) ids[s] = llm__hf_json_id(&jcfg, llm__json_get(&jcfg, 0, kinds[s][1]), t.n);
    }
    if (ids[2] < 0) {   // the BPE model's unk_token
        const int32_t u = llm__json_get(&j, model, "unk_token");
        if (u >= 0 && j.nodes[u].type == LLM__JSON_STR) ids[2] = llm__hf_tok_find(&t, buf, llm__json_decode(&j, u, buf));
    }
    int64_t gen_eos[2] = {-1, -1};   // generation_config.json's other ends
    const int32_t ge = tx->gen_cfg ? llm__json_get(&jg, 0, "eos_token_id") : -1;
    if (ids[1] < 0) ids[1] = llm__hf_json_id(&jg, ge, t.n);
    for (int32_t i = 0, ng = 0, k = ge + 1; ge >= 0 && jg.nodes[ge].type == LLM__JSON_ARR && i < jg.nodes[ge].n && ng < 2;
         i++, k = jg.nodes[k].next) {
        int64_t id;
        if (llm__json_int(&jg, k, 0, t.n - 1, &id) && id != ids[1]) gen_eos[ng++] = id;
    }
    for (int s = 0; s < 4; s++)
        if (ids[s] >= 0) llm__gbuf_u32(b, NULL, kinds[s][2], (uint32_t)ids[s]);
    if (spm && ids[2] >= 0 && t.type[ids[2]] != LLM__TOK_CONTROL) t.type[ids[2]] = LLM__TOK_UNKNOWN;
    // added tokens that take the whitespace after them (rstrip), as tokenizer.ggml.rstrip_ids
    int64_t n_rstrip = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && n_rstrip) llm__gbuf_arr(b, "tokenizer.ggml.rstrip_ids", LLM__GGUF_I32, (uint64_t)n_rstrip);
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            int64_t id;
            if (!llm__hf_flag(&j, k, "rstrip", false) || !llm__json_int(&j, llm__json_get(&j, k, "id"), 0, t.n - 1, &id)) continue;
            if (pass == 0) n_rstrip++;
            else {
                const int32_t x = (int32_t)id;
                llm__gbuf_put(b, &x, 4);
            }
        }
        if (!n_rstrip) break;
    }
    llm__gbuf_arr(b, "tokenizer.ggml.token_type", LLM__GGUF_I32, (uint64_t)t.n);
    llm__gbuf_put(b, t.type, (size_t)t.n * 4);
    if (gen_eos[0] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eot_token_id", (uint32_t)gen_eos[0]);
    if (gen_eos[1] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eom_token_id", (uint32_t)gen_eos[1]);
    // whether BOS / EOS are added: the post-processor, else tokenizer_config.json
    int add[2] = {-1, -1};
    const int32_t pp = llm__json_get(&j, 0, "post_processor");
    int32_t procs[8];
    const int32_t ppl = llm__json_get(&j, pp, "processors");
    int np = 0;
    if (ppl >= 0 && j.nodes[ppl].type == LLM__JSON_ARR)
        for (int32_t i = 0, k = ppl + 1; i < j.nodes[ppl].n && np < 8; i++, k = j.nodes[k].next) procs[np++] = k;
    else if (pp >= 0 && j.nodes[pp].type == LLM__JSON_OBJ) procs[np++] = pp;
    for (int i = 0; i < np; i++) {
        if (llm__hf_is(&j, procs[i], "ByteLevel")) {
            for (int s = 0; s < 2; s++) add[s] = add[s] < 0 ? 0 : add[s];
        } else if (llm__hf_is(&j, procs[i], "TemplateProcessing")) {
            const int32_t single = llm__json_get(&j, procs[i], "single");
            if (single < 0 || j.nodes[single].type != LLM__JSON_ARR || j.nodes[single].n < 2) continue;
            for (int s = 0; s < 2; s++) {
                const int32_t end = llm__json_at(&j, single, s ? j.nodes[single].n - 1 : 0);
                const int32_t sp = llm__json_get(&j, llm__json_get(&j, end, "SpecialToken"), "id");
                add[s] = 0;
                if (sp >= 0 && j.nodes[sp].type == LLM__JSON_STR && ids[s] >= 0) {
                    const size_t n = llm__json_decode(&j, sp, buf);
                    add[s] = n == t.len[ids[s]] && !memcmp(buf, t.text.p + t.off[ids[s]], n);
                }
            }
        }
    }
    for (int s = 0; s < 2; s++) {
        if (add[s] < 0 && tx->tok_cfg) {
            const int32_t v = llm__json_get(&jc, 0, s ? "add_eos_token" : "add_bos_token");
            if (v >= 0 && (jc.nodes[v].type == LLM__JSON_TRUE || jc.nodes[v].type == LLM__JSON_FALSE)) add[s] = jc.nodes[v].type == LLM__JSON_TRUE;
        }
        if (add[s] >= 0) llm__gbuf_bool(b, s ? "tokenizer.ggml.add_eos_token" : "tokenizer.ggml.add_bos_token", add[s] == 1);
    }
    // the chat template
    int32_t ct = tx->tok_cfg ? llm__json_get(&jc, 0, "chat_template") : -1;
    if (ct >= 0 && jc.nodes[ct].type == LLM__JSON_ARR) {   // named templates: the default one
        int32_t d = -1;
        for (int32_t i = 0, k = ct + 1; i < jc.nodes[ct].n; i++, k = jc.nodes[k].next)
            if (llm__hf_member_is(&jc, k, "name", "default"))
                d = llm__json_get(&jc, k, "template");
        ct = d;
    }
    if (ct >= 0 && jc.nodes[ct].type == LLM__JSON_STR) {
        char *s = llm__json_strdup(&jc, ct, NULL);
        if (!s) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        llm__gbuf_s(b, NULL, "tokenizer.chat_template", s);
        free(s);
    } else if (tx->tmpl) {
        llm__gbuf_key(b, NULL, "tokenizer.chat_template", LLM__GGUF_STR);
        llm__gbuf_str(b, tx->tmpl, tx->tmpl_len);
    }
    if (b->o.fail) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
done:
    llm__json_free(&j);
    llm__json_free(&jc);
    llm__json_free(&jg);
    llm__json_free(&jcfg);
    free(t.text.p);
    free(t.off);
    free(t.len);
    free(t.type);
    free(buf);
    return st;
}

// Builds g from a directory's texts (config.json's required; without tokenizer.json, no
// tokenizer) and the opened safetensors files in o, which g then owns (on failure: everything
// freed, g empty).
enum llm_status llm__hf_build(struct llm__gguf *g, const struct llm__hf_texts *tx, struct llm__hf_owned *o,
                                     struct llm__err *e) {
    struct llm__gbuf b = {0};
    const char *arch = NULL;
    bool permute = false;
    int64_t hp[5] = {0};
    struct llm__hf_quant quant = {0};
    char hdr[24] = "GGUF";
    llm__gbuf_put(&b, hdr, 24);   // magic, version, counts: filled in below
    enum llm_status st = llm__hf_index(o, e);
    if (st == LLM_OK) st = llm__hf_config(tx->cfg, tx->cfg_len, &b, &arch, &permute, hp, &quant, e);
    const bool gemma = st == LLM_OK && (!strcmp(arch, "gemma2") || !strcmp(arch, "gemma3"));
    if (st == LLM_OK && tx->name) llm__gbuf_s(&b, NULL, "general.name", tx->name);
    // the vocabulary is as large as the embedding's rows, checked before the tokenizer makes a
    // token for every id below vocab_size: memory in proportion to what the files hold
    const struct llm__st_tensor *emb = st == LLM_OK && tx->tok ? llm__hf_find(o, "model.embed_tokens.weight") : NULL;
    if (st == LLM_OK && tx->tok && !emb)
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: no tensor model.embed_tokens.weight (the token embeddings)");
    else if (emb && (emb->n_dims != 2 || emb->shape[1] < 1))
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: model.embed_tokens.weight is not a matrix of at least one column");
    else if (emb && emb->shape[0] != hp[4])
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: config.json's vocab_size is %lld, but model.embed_tokens.weight has %lld rows",
                       (long long)hp[4], (long long)emb->shape[0]);
    if (st == LLM_OK && tx->tok) st = llm__hf_tokenizer(tx, hp[4], &b, e);
    if (st) {
        free(b.o.p);
        llm__hf_owned_free(o);
        memset(g, 0, sizeof(*g));
        return st;
    }
    int64_t n_tensors = 0;
    for (int i = 0; i < o->n_files; i++) n_tensors += o->files[i].n;
    llm__gbuf_seal(&b);
    memset(g, 0, sizeof(*g));
    g->map = b.o.p;
    g->size = b.o.n;
    g->owns_buf = true;
    g->extra = o;
    g->extra_free = llm__hf_owned_free;
    if ((st = llm__gguf_parse(g, e)) == LLM_OK) {
        free(g->tensor_index.slots);
        g->tensor_index.slots = NULL;
        if (!llm__gguf_index_init(&g->tensor_index, n_tensors)) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        o->permute = permute, o->gemma = gemma, o->quantized = quant.method != 0;
        memcpy(o->hp, hp, sizeof(o->hp));
        for (int i = 0; i < o->n_files && st == LLM_OK; i++) st = llm__hf_add_tensors(g, o, &o->files[i], permute, gemma, hp, &quant, e);
    }
    if (st) llm__gguf_close(g);
    else g->version = 0;   // (not a GGUF file: llm_model_info says so)
    return st;
}

// A shard's file name from model.safetensors.index.json, checked to name a file inside the
// directory: not empty, no '/', not "." or "..", at most 255 bytes, no control characters.
bool llm__hf_shard_name_ok(const char *s, size_t n) {
    if (n == 0 || n > 255 || strlen(s) != n || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

// Opens a Hugging Face model directory as g: config.json, model.safetensors or the shards that
// model.safetensors.index.json lists (every tensor it names checked to be in its shard),
// tokenizer.json, and tokenizer_config.json, generation_config.json and chat_template.jinja when
// they are there.
static enum llm_status llm__hf_open_dir(struct llm__gguf *g, const char *dir, bool read_all, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    char path[4096], *cfg = NULL, *idx = NULL, *tok = NULL, *tok_cfg = NULL, *gen_cfg = NULL, *tmpl = NULL, *name = NULL;
    size_t cfg_len = 0, idx_len = 0;
    struct llm__hf_texts tx = {0};
    struct llm__hf_owned *o = calloc(1, sizeof(*o));
    if (!o) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    enum llm_status st = LLM_OK;
    struct llm__json j = {0};
    if (snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path)) st = llm__fail(e, LLM_ERR_IO, "hf: directory path too long");
    else if (access(path, F_OK) != 0)
        st = llm__fail(e, LLM_ERR_IO, "'%s' is a directory without config.json: a model is a GGUF file or a Hugging Face model "
                       "directory (config.json, model.safetensors, tokenizer.json)", dir);
    else st = llm__read_file(path, (size_t)16 << 20, &cfg, &cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "tokenizer.json", (size_t)1 << 30, true, &tok, &tx.tok_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "tokenizer_config.json", (size_t)64 << 20, false, &tok_cfg, &tx.tok_cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "generation_config.json", (size_t)16 << 20, false, &gen_cfg, &tx.gen_cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "chat_template.jinja", (size_t)16 << 20, false, &tmpl, &tx.tmpl_len, e);
    if (st == LLM_OK) {   // the model's name: the directory's
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/') b--;
        if (!(name = llm__strndup(dir + b, n - b))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    if (st == LLM_OK) {
        snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
        if (access(path, F_OK) == 0) {
            if ((st = llm__read_file(path, (size_t)64 << 20, &idx, &idx_len, e)) == LLM_OK)
                st = llm__json_parse(&j, idx, idx_len, "model.safetensors.index.json", e);
            const int32_t wm = st ? -1 : llm__json_get(&j, 0, "weight_map");
            if (st == LLM_OK && (wm < 0 || j.nodes[wm].type != LLM__JSON_OBJ || j.nodes[wm].n == 0))
                st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: no weight_map object of tensor names and files");
            // the shards' names, indexed (a weight_map of many tensors names its few files again and again)
            struct llm__gguf_index shard_ix = {0};
            const char **shard = NULL;
            if (st == LLM_OK && (!(o->files = calloc((size_t)j.nodes[wm].n, sizeof(*o->files))) ||
                                 !(shard = malloc((size_t)j.nodes[wm].n * sizeof(*shard))) ||
                                 !llm__gguf_index_init(&shard_ix, j.nodes[wm].n)))
                st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            for (int32_t m = 0, k = wm + 1; st == LLM_OK && m < j.nodes[wm].n; m++, k = j.nodes[k + 1].next) {
                size_t fl = 0, tl = 0;
                char *file = llm__json_strdup(&j, k + 1, &fl), *tname = llm__json_strdup(&j, k, &tl), pr[88];
                if (!file || !llm__hf_shard_name_ok(file, fl)) {
                    st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: '%s' is not a file name in the directory",
                                   file ? llm__gguf_printable(pr, file, fl) : "(not a string)");
                } else {
                    uint64_t slot;   // the shard, opened on its first mention
                    int64_t f = llm__gguf_index_find(&shard_ix, shard, sizeof(*shard), file, &slot);
                    if (f < 0) {
                        f = o->n_files;
                        snprintf(path, sizeof(path), "%s/%s", dir, file);
                        if ((st = llm__st_open(&o->files[f], path, read_all, e)) == LLM_OK) {
                            o->n_files++;
                            if (!(o->files[f].path_name = llm__strndup(file, fl))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
                            else shard[f] = o->files[f].path_name, shard_ix.slots[slot] = f;
                        }
                    }
                    if (st == LLM_OK && !llm__st_find(&o->files[f], tname))
                        st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: tensor '%s' is not in %s",
                                       llm__gguf_printable(pr, tname, tl), file);
                }
                free(file);
                free(tname);
            }
            free(shard);
            free(shard_ix.slots);
        } else {
            snprintf(path, sizeof(path), "%s/model.safetensors", dir);
            if (access(path, F_OK) != 0)
                st = llm__fail(e, LLM_ERR_IO, "hf: '%s' has config.json but neither model.safetensors nor model.safetensors.index.json", dir);
            else if (!(o->files = calloc(1, sizeof(*o->files)))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            else if ((st = llm__st_open(&o->files[0], path, read_all, e)) == LLM_OK) o->n_files = 1;
        }
    }
    llm__json_free(&j);
    free(idx);
    tx.cfg = cfg;
    tx.cfg_len = cfg_len;
    tx.tok = tok;
    tx.tok_cfg = tok_cfg;
    tx.gen_cfg = gen_cfg;
    tx.tmpl = tmpl;
    tx.name = name;
    if (st == LLM_OK) st = llm__hf_build(g, &tx, o, e);   // (owns o now)
    else llm__hf_owned_free(o);
    free(cfg);
    free(tok);
    free(tok_cfg);
    free(gen_cfg);
    free(tmpl);
    free(name);
    return st;
}

// A model: a GGUF file, or a Hugging Face model directory.
enum llm_status llm__model_open(struct llm__gguf *g, const char *path, bool read_all, struct llm__err *e) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return llm__hf_open_dir(g, path, read_all, e);
    return llm__gguf_open_file(g, path, read_all, e);
}
