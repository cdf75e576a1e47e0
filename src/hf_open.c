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
//     struct llm__hf_scores), since the engine's SentencePiece merger merges by score.
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

static bool llm__hf_is(const struct llm__json *j, int32_t o, const char *type) {
    return llm__hf_member_is(j, o, "type", type);
}

// A boolean member of o: its value, or def when absent (or not a boolean).
static bool llm__hf_flag(const struct llm__json *j, int32_t o, const char *key, bool def) {
    const int32_t v = llm__json_get(j, o, key);
    return v < 0 ? def : j->nodes[v].type == LLM__JSON_TRUE ? true : j->nodes[v].type == LLM__JSON_FALSE ? false : def;
}

// The engine's name (tokenizer.ggml.pre) for pre-tokenizer p of a byte-level BPE, or NULL.
static const char *llm__hf_pre_name(const struct llm__json *j, int32_t p) {
    static const struct { const char *re, *pre; } res[] = {
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "llama-bpe"},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2"},
        {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
         "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
         "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "tekken"},
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
    };
    int32_t st[3];
    const int n = llm__hf_steps(j, p, "pretokenizers", st, 3);
    if (n < 1 || n > 2) return NULL;
    const int32_t bl = st[n - 1];   // the last step maps bytes to GPT-2's code points
    if (!llm__hf_is(j, bl, "ByteLevel") || llm__hf_flag(j, bl, "add_prefix_space", true)) return NULL;
    const bool regex = llm__hf_flag(j, bl, "use_regex", true);
    if (n == 1) return regex ? "gpt-2" : NULL;
    if (llm__hf_is(j, st[0], "Digits"))
        return regex && llm__hf_flag(j, st[0], "individual_digits", false) ? "smollm" : NULL;
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
static const char *llm__hf_spm_style(const struct llm__json *j, int32_t norm, int32_t pre, bool *prefix,
                                     const char **scheme) {
    int32_t st[8];
    bool replaced = false;
    *prefix = false;
    *scheme = NULL;
    int n = llm__hf_steps(j, norm, "normalizers", st, 8);
    if (n < 0) return "a normalizer of more than 8 steps";
    for (int i = 0; i < n; i++) {
        if (llm__hf_is(j, st[i], "Replace") &&
            llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " ") &&
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
            if (!llm__hf_member_is(j, st[i], "replacement", "\xe2\x96\x81"))
                return "a Metaspace replacement other than U+2581";
            if (llm__hf_flag(j, st[i], "split", false))
                return "a Metaspace pre-tokenizer that splits the text into words";
            const int32_t sc = llm__json_get(j, st[i], "prepend_scheme");
            if (sc >= 0 && !llm__json_eq(j, sc, "always") && !llm__json_eq(j, sc, "first") &&
                !llm__json_eq(j, sc, "never"))
                return "a Metaspace prepend scheme other than always, first, never";
            *prefix = sc >= 0 ? !llm__json_eq(j, sc, "never") : llm__hf_flag(j, st[i], "add_prefix_space", true);
            *scheme = sc >= 0 && llm__json_eq(j, sc, "first") ? "first" : "always";
            replaced = true;
        } else if (!(replaced && llm__hf_is(j, st[i], "Split") &&
                     llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " "))) {
            // (a Split at spaces after they became U+2581 splits nothing)
            return "a pre-tokenizer other than Metaspace";
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
    // <｜...｜>, of full-width bars
    if (n >= 7 && !memcmp(t, "<\xef\xbd\x9c", 4) && !memcmp(t + n - 4, "\xef\xbd\x9c>", 4)) return true;
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

// tokenizer.json on its way to GGUF keys: the parsed files, and what each step finds for the next.
struct llm__hf_conv {
    const struct llm__hf_texts *tx;
    struct llm__json j, jc, jcfg, jg;   // tokenizer.json, tokenizer_config.json, config.json, generation_config.json
    int32_t model, vocab, merges, added;   // tokenizer.json's model, its vocab and merges; added_tokens (or -1)
    bool spm, space_prefix;   // SentencePiece style; whether U+2581 goes in front of the text
    const char *pre, *scheme;   // tokenizer.ggml.pre ("" for SentencePiece style); the prepend scheme, or NULL
    struct llm__hf_tokens t;
    char *buf;   // room for any string of tokenizer.json, decoded
    int64_t ids[4];   // the BOS, EOS, UNK and PAD tokens, or -1
    int64_t gen_eos[2];   // generation_config.json's other ends (EOT, EOM), or -1
};

// tokenizer.json's model and which of the two kinds of BPE it is (c->spm, else c->pre); an error
// for a model, normalizer, pre-tokenizer or ignore_merges setting the engine does not have.
static enum llm_status llm__hf_tok_kind(struct llm__hf_conv *c, struct llm__err *e) {
    const struct llm__json *j = &c->j;
    c->model = llm__json_get(j, 0, "model");
    const int32_t mtype = llm__json_get(j, c->model, "type");
    c->vocab = llm__json_get(j, c->model, "vocab");
    c->merges = llm__json_get(j, c->model, "merges");
    c->added = llm__json_get(j, 0, "added_tokens");
    if (c->model < 0 || j->nodes[c->model].type != LLM__JSON_OBJ)
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: no model object (with model.vocab and model.merges)");
    if (mtype >= 0 && !llm__json_eq(j, mtype, "BPE")) {
        char pr[88];
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the %s model is not supported (BPE only)",
                         j->nodes[mtype].type == LLM__JSON_STR
                             ? llm__gguf_printable(pr, j->text + j->nodes[mtype].start, j->nodes[mtype].len)
                             : "(not a string)");
    }
    if (c->vocab < 0 || j->nodes[c->vocab].type != LLM__JSON_OBJ || c->merges < 0 ||
        j->nodes[c->merges].type != LLM__JSON_ARR || (c->added >= 0 && j->nodes[c->added].type != LLM__JSON_ARR))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: model.vocab (an object), model.merges and added_tokens "
                         "(arrays) are needed");
    const int32_t pre_node = llm__json_get(j, 0, "pre_tokenizer"), norm = llm__json_get(j, 0, "normalizer");
    int32_t steps[8];
    bool byte_level = false;
    for (int i = 0, n = llm__hf_steps(j, pre_node, "pretokenizers", steps, 8); i < n; i++)
        byte_level |= llm__hf_is(j, steps[i], "ByteLevel");
    if (!byte_level) {
        const char *why = "neither a ByteLevel pre-tokenizer nor byte_fallback";
        if (llm__hf_flag(j, c->model, "byte_fallback", false))
            why = llm__hf_spm_style(j, norm, pre_node, &c->space_prefix, &c->scheme);
        if (why)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: %s; the engine reads byte-level BPE (GPT-2, "
                             "Llama 3, Qwen, SmolLM, Tekken) and SentencePiece-style BPE with byte_fallback (Llama 2, "
                             "Mistral, Gemma)", why);
        c->spm = true;
    }
    c->pre = c->spm ? "" : llm__hf_pre_name(j, pre_node);
    if (!c->pre)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the pre-tokenizer is not one the engine has: "
                         "ByteLevel alone (GPT-2), Digits then ByteLevel (SmolLM), or a Split by Llama 3's, Qwen 2's, "
                         "Tekken's or GPT-2's regex then ByteLevel, without add_prefix_space");
    if (!c->spm && norm >= 0 && j->nodes[norm].type != LLM__JSON_NULL && !llm__hf_is(j, norm, "NFC"))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: a byte-level tokenizer with a normalizer other "
                         "than NFC is not supported");
    const bool ignore = llm__hf_flag(j, c->model, "ignore_merges", false);
    if (c->spm && ignore)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges with byte_fallback is not supported");
    for (size_t k = 0; k < LLM__ARRAY_LEN(llm__pre_names); k++)
        if (!strcmp(llm__pre_names[k].name, c->pre) && llm__pre_names[k].ignore_merges != ignore)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges %s with the %s pre-tokenizer is "
                             "not supported", ignore ? "true" : "false", c->pre);
    return LLM_OK;
}

// Token id: the n bytes at s (appended to t's texts), of type `type`.
static void llm__hf_tok_set(struct llm__hf_tokens *t, int64_t id, const char *s, size_t n, int32_t type) {
    t->off[id] = t->text.n;
    t->len[id] = (uint32_t)n;
    t->type[id] = type;
    llm__outbuf_put(&t->text, s, n);
}

// The tokens by id: the vocab, then the added tokens over it, in two passes (0: the largest id;
// 1: the texts and types); ids with neither become "[PADn]", unused.
static enum llm_status llm__hf_tok_texts(struct llm__hf_conv *c, int64_t n_vocab, struct llm__err *e) {
    const struct llm__json *j = &c->j;
    struct llm__hf_tokens *t = &c->t;
    const int32_t vocab = c->vocab, added = c->added;
    int64_t max_id = -1;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            t->n = LLM__MAX(n_vocab, max_id + 1);
            if (n_vocab > 0 && max_id >= n_vocab)
                return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is beyond the model's vocab_size "
                                 "%lld", (long long)max_id, (long long)n_vocab);
            t->off = calloc((size_t)t->n + 1, sizeof(*t->off));
            t->len = calloc((size_t)t->n, sizeof(*t->len));
            t->type = calloc((size_t)t->n, sizeof(*t->type));
            c->buf = malloc(c->tx->tok_len + 1);
            if (!t->off || !t->len || !t->type || !c->buf) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        }
        for (int32_t m = 0, k = vocab + 1; m < j->nodes[vocab].n; m++, k = j->nodes[k + 1].next) {
            int64_t id;
            if (!llm__json_int(j, k + 1, 0, (1 << 24) - 1, &id))
                return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: the id of vocab entry %d is not an integer in "
                                 "[0, 2^24)", m);
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            if (t->type[id])
                return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is in the vocab twice",
                                 (long long)id);
            llm__hf_tok_set(t, id, c->buf, llm__json_decode(j, k, c->buf), LLM__TOK_NORMAL);
        }
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j->nodes[added].n; m++, k = j->nodes[k].next) {
            int64_t id;
            const int32_t ct = llm__json_get(j, k, "content");
            if (!llm__json_int(j, llm__json_get(j, k, "id"), 0, (1 << 24) - 1, &id) || ct < 0 ||
                j->nodes[ct].type != LLM__JSON_STR)
                return llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: added token %d needs an id in [0, 2^24) and a "
                                 "content string", m);
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            char *buf = c->buf;
            const size_t n = llm__json_decode(j, ct, buf);
            t->off[id] = t->text.n;   // over the vocab's entry, as the tokenizer's get_vocab() has it
            t->type[id] = llm__hf_flag(j, k, "special", false) || llm__hf_looks_special(buf, n) ? LLM__TOK_CONTROL
                                                                                                : LLM__TOK_USER;
            // SentencePiece style: user-defined tokens' U+2581 as spaces, as the converter has them
            for (size_t i = 0; i < n; i++) {
                const bool sp = c->spm && t->type[id] == LLM__TOK_USER && i + 3 <= n &&
                                !memcmp(buf + i, "\xe2\x96\x81", 3);
                llm__outbuf_put(&t->text, sp ? " " : buf + i, 1);
                i += sp ? 2 : 0;
            }
            t->len[id] = (uint32_t)(t->text.n - t->off[id]);
        }
    }
    for (int64_t i = 0; i < t->n; i++)
        if (!t->type[i]) {
            char pad[32];
            int n = snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)i);
            llm__hf_tok_set(t, i, pad, (size_t)n, LLM__TOK_UNUSED);
        }
    return t->text.fail ? llm__fail(e, LLM_ERR_NOMEM, "out of memory") : LLM_OK;
}

// Merge k of tokenizer.json ("a b", or ["a", "b"]) into o as "a b", spaces inside a pair's parts
// as U+0120 (buf: room to decode it); false when it is neither form.
static bool llm__hf_merge_text(const struct llm__json *j, int32_t k, char *buf, struct llm__outbuf *o) {
    const int32_t l = llm__json_at(j, k, 0), r = llm__json_at(j, k, 1);
    if (j->nodes[k].type != LLM__JSON_STR && (j->nodes[k].type != LLM__JSON_ARR || j->nodes[k].n != 2 ||
                                              j->nodes[l].type != LLM__JSON_STR || j->nodes[r].type != LLM__JSON_STR))
        return false;
    if (j->nodes[k].type == LLM__JSON_STR) llm__outbuf_put(o, buf, llm__json_decode(j, k, buf));
    for (int side = 0; j->nodes[k].type == LLM__JSON_ARR && side < 2; side++) {
        const size_t n = llm__json_decode(j, side ? r : l, buf);
        if (side) llm__outbuf_put(o, " ", 1);
        for (size_t i = 0; i < n; i++) llm__outbuf_put(o, buf[i] == ' ' ? "\xc4\xa0" : buf + i, buf[i] == ' ' ? 2 : 1);
    }
    return true;
}

// SentencePiece style: scores that merge as the merges' ranks do (a token's score is minus the
// rank of the first merge that makes it; the encoder merges the best-scoring pair that makes a
// token), and the table of the tokens' texts that finds the token a merge makes.
struct llm__hf_scores {
    float *score;
    struct llm__gguf_str *strs;
    uint32_t *ht, mask;
};

// The scores of t's tokens before any merge is read; byte tokens <0xNN> typed as such. False: out
// of memory (what was allocated is in s, to free).
static bool llm__hf_scores_init(struct llm__hf_scores *s, struct llm__hf_tokens *t) {
    s->score = malloc((size_t)t->n * sizeof(float));
    s->strs = malloc((size_t)t->n * sizeof(*s->strs));
    if (!s->score || !s->strs) return false;
    for (int64_t i = 0; i < t->n; i++) {
        s->strs[i] = (struct llm__gguf_str){t->text.p + t->off[i], t->len[i]};
        s->score[i] = -INFINITY;   // no merge makes it: never merged (as the tokenizers library)
        const char *p = t->text.p + t->off[i];   // <0xNN>, NN upper-case hexadecimal (not NUL-terminated)
        const bool hex = t->len[i] == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && strchr("0123456789ABCDEF", p[3]) &&
                         p[3] && strchr("0123456789ABCDEF", p[4]) && p[4];
        if (t->type[i] == LLM__TOK_NORMAL && hex) t->type[i] = LLM__TOK_BYTE;
    }
    return (s->ht = llm__strtab_build(s->strs, (int)t->n, &s->mask)) != NULL;
}

static void llm__hf_scores_free(struct llm__hf_scores *s) {
    free(s->score);
    free(s->strs);
    free(s->ht);
}

// The tokenizer's kind and pre-tokenizer (or SentencePiece's space prefix), the merges (byte-level:
// tokenizer.ggml.merges; SentencePiece style: the scores of the tokens they make), the tokens and
// their scores.
static enum llm_status llm__hf_tok_merges(struct llm__hf_conv *c, struct llm__gbuf *b, struct llm__err *e) {
    const struct llm__json *j = &c->j;
    const bool spm = c->spm;
    struct llm__hf_scores sc = {0};
    if (spm && !llm__hf_scores_init(&sc, &c->t)) {
        llm__hf_scores_free(&sc);
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    llm__gbuf_s(b, NULL, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!spm) llm__gbuf_s(b, NULL, "tokenizer.ggml.pre", c->pre);
    else llm__gbuf_bool(b, "tokenizer.ggml.add_space_prefix", c->space_prefix);
    if (spm && c->space_prefix && c->scheme) llm__gbuf_s(b, NULL, "tokenizer.ggml.prepend_scheme", c->scheme);
    if (!spm) llm__gbuf_arr(b, "tokenizer.ggml.merges", LLM__GGUF_STR, (uint64_t)j->nodes[c->merges].n);
    enum llm_status st = LLM_OK;
    for (int32_t m = 0, k = c->merges + 1; m < j->nodes[c->merges].n; m++, k = j->nodes[k].next) {
        struct llm__outbuf o = {0};   // "left right"
        if (!llm__hf_merge_text(j, k, c->buf, &o)) {
            st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [\"a\", \"b\"]", m);
            break;
        }
        if (!spm) llm__gbuf_str(b, o.p, o.n);
        char *sp = o.p ? memchr(o.p, ' ', o.n) : NULL;
        if (spm && sp) {   // the token the merge makes
            memmove(sp, sp + 1, o.n - (size_t)(sp - o.p) - 1);
            const int32_t id = llm__strtab_find(sc.ht, sc.mask, sc.strs, o.p, o.n - 1);
            if (id >= 0 && sc.score[id] == -INFINITY) sc.score[id] = -(float)m;
        }
        b->o.fail |= o.fail;
        free(o.p);
    }
    llm__gbuf_arr(b, "tokenizer.ggml.tokens", LLM__GGUF_STR, (uint64_t)c->t.n);
    for (int64_t i = 0; i < c->t.n; i++) llm__gbuf_str(b, c->t.text.p + c->t.off[i], c->t.len[i]);
    if (spm) {
        llm__gbuf_arr(b, "tokenizer.ggml.scores", LLM__GGUF_F32, (uint64_t)c->t.n);
        llm__gbuf_put(b, sc.score, (size_t)c->t.n * sizeof(float));
    }
    llm__hf_scores_free(&sc);
    return st;
}

// The special tokens (c->ids): tokenizer_config.json's bos_token, eos_token, unk_token, pad_token
// looked up among the added tokens, else config.json's ids, else the BPE model's unk_token and
// generation_config.json's (first) eos_token_id; up to two of its other eos_token_id values into
// c->gen_eos. SentencePiece style: the unknown token typed as such.
static enum llm_status llm__hf_tok_special(struct llm__hf_conv *c, struct llm__gbuf *b, struct llm__err *e) {
    static const char *const kinds[][3] = {
        {"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"},
        {"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "unk_token_id", "tokenizer.ggml.unknown_token_id"},
        {"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
    };
    const struct llm__json *j = &c->j, *jc = &c->jc, *jg = &c->jg;
    const int32_t added = c->added;
    const int64_t n = c->t.n;
    int64_t *ids = c->ids;
    for (int s = 0; s < 4; s++) {
        ids[s] = -1;
        const int32_t ct = c->tx->tok_cfg ? llm__hf_tok_content(jc, llm__json_get(jc, 0, kinds[s][0])) : -1;
        size_t cn = 0;
        char *cs = ct >= 0 ? llm__json_strdup(jc, ct, &cn) : NULL;
        if (ct >= 0 && !cs) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        for (int32_t m = 0, k = added + 1; cs && ids[s] < 0 && added >= 0 && m < j->nodes[added].n;
             m++, k = j->nodes[k].next) {
            int64_t id;
            if (strlen(cs) == cn && llm__json_eq(j, llm__json_get(j, k, "content"), cs) &&
                llm__json_int(j, llm__json_get(j, k, "id"), 0, n - 1, &id))
                ids[s] = id;
        }
        free(cs);
        if (ids[s] < 0) ids[s] = llm__hf_json_id(&c->jcfg, llm__json_get(&c->jcfg, 0, kinds[s][1]), n);
    }
    if (ids[2] < 0) {   // the BPE model's unk_token
        const int32_t u = llm__json_get(j, c->model, "unk_token");
        if (u >= 0 && j->nodes[u].type == LLM__JSON_STR)
            ids[2] = llm__hf_tok_find(&c->t, c->buf, llm__json_decode(j, u, c->buf));
    }
    c->gen_eos[0] = c->gen_eos[1] = -1;   // generation_config.json's other ends
    const int32_t ge = c->tx->gen_cfg ? llm__json_get(jg, 0, "eos_token_id") : -1;
    if (ids[1] < 0) ids[1] = llm__hf_json_id(jg, ge, n);
    const int32_t n_ge = ge >= 0 && jg->nodes[ge].type == LLM__JSON_ARR ? jg->nodes[ge].n : 0;
    for (int32_t i = 0, ng = 0, k = ge + 1; i < n_ge && ng < 2; i++, k = jg->nodes[k].next) {
        int64_t id;
        if (llm__json_int(jg, k, 0, n - 1, &id) && id != ids[1]) c->gen_eos[ng++] = id;
    }
    for (int s = 0; s < 4; s++)
        if (ids[s] >= 0) llm__gbuf_u32(b, NULL, kinds[s][2], (uint32_t)ids[s]);
    if (c->spm && ids[2] >= 0 && c->t.type[ids[2]] != LLM__TOK_CONTROL) c->t.type[ids[2]] = LLM__TOK_UNKNOWN;
    return LLM_OK;
}

// The added tokens that take the whitespace after them (rstrip) as tokenizer.ggml.rstrip_ids,
// the tokens' types, and generation_config.json's other ends as EOT and EOM.
static void llm__hf_tok_types(const struct llm__hf_conv *c, struct llm__gbuf *b) {
    const struct llm__json *j = &c->j;
    const int32_t added = c->added;
    int64_t n_rstrip = 0;
    for (int pass = 0; pass < 2; pass++) {   // 0: count them; 1: write them
        if (pass == 1 && n_rstrip) llm__gbuf_arr(b, "tokenizer.ggml.rstrip_ids", LLM__GGUF_I32, (uint64_t)n_rstrip);
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j->nodes[added].n; m++, k = j->nodes[k].next) {
            int64_t id;
            if (!llm__hf_flag(j, k, "rstrip", false) ||
                !llm__json_int(j, llm__json_get(j, k, "id"), 0, c->t.n - 1, &id))
                continue;
            if (pass == 0) n_rstrip++;
            else {
                const int32_t x = (int32_t)id;
                llm__gbuf_put(b, &x, 4);
            }
        }
        if (!n_rstrip) break;
    }
    llm__gbuf_arr(b, "tokenizer.ggml.token_type", LLM__GGUF_I32, (uint64_t)c->t.n);
    llm__gbuf_put(b, c->t.type, (size_t)c->t.n * 4);
    if (c->gen_eos[0] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eot_token_id", (uint32_t)c->gen_eos[0]);
    if (c->gen_eos[1] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eom_token_id", (uint32_t)c->gen_eos[1]);
}

// Whether BOS and EOS are added: the post-processor (ByteLevel: neither, unless a template says;
// a TemplateProcessing: whether its single template starts with BOS, ends with EOS), else
// tokenizer_config.json's add_bos_token / add_eos_token; no key when none says.
static void llm__hf_tok_add_bos_eos(const struct llm__hf_conv *c, struct llm__gbuf *b) {
    const struct llm__json *j = &c->j, *jc = &c->jc;
    int add[2] = {-1, -1};
    const int32_t pp = llm__json_get(j, 0, "post_processor");
    int32_t procs[8];
    const int32_t ppl = llm__json_get(j, pp, "processors");
    int np = 0;
    if (ppl >= 0 && j->nodes[ppl].type == LLM__JSON_ARR)
        for (int32_t i = 0, k = ppl + 1; i < j->nodes[ppl].n && np < 8; i++, k = j->nodes[k].next) procs[np++] = k;
    else if (pp >= 0 && j->nodes[pp].type == LLM__JSON_OBJ) procs[np++] = pp;
    for (int i = 0; i < np; i++) {
        if (llm__hf_is(j, procs[i], "ByteLevel")) {
            for (int s = 0; s < 2; s++) add[s] = add[s] < 0 ? 0 : add[s];
        } else if (llm__hf_is(j, procs[i], "TemplateProcessing")) {
            const int32_t single = llm__json_get(j, procs[i], "single");
            if (single < 0 || j->nodes[single].type != LLM__JSON_ARR || j->nodes[single].n < 2) continue;
            for (int s = 0; s < 2; s++) {
                const int32_t end = llm__json_at(j, single, s ? j->nodes[single].n - 1 : 0);
                const int32_t sp = llm__json_get(j, llm__json_get(j, end, "SpecialToken"), "id");
                const int64_t id = c->ids[s];
                add[s] = 0;
                if (sp >= 0 && j->nodes[sp].type == LLM__JSON_STR && id >= 0) {
                    const size_t n = llm__json_decode(j, sp, c->buf);
                    add[s] = n == c->t.len[id] && !memcmp(c->buf, c->t.text.p + c->t.off[id], n);
                }
            }
        }
    }
    for (int s = 0; s < 2; s++) {
        if (add[s] < 0 && c->tx->tok_cfg) {
            const int32_t v = llm__json_get(jc, 0, s ? "add_eos_token" : "add_bos_token");
            if (v >= 0 && (jc->nodes[v].type == LLM__JSON_TRUE || jc->nodes[v].type == LLM__JSON_FALSE))
                add[s] = jc->nodes[v].type == LLM__JSON_TRUE;
        }
        if (add[s] >= 0)
            llm__gbuf_bool(b, s ? "tokenizer.ggml.add_eos_token" : "tokenizer.ggml.add_bos_token", add[s] == 1);
    }
}

// The chat template: tokenizer_config.json's (of named templates, the default one), else
// chat_template.jinja's.
static enum llm_status llm__hf_tok_template(const struct llm__hf_conv *c, struct llm__gbuf *b, struct llm__err *e) {
    const struct llm__json *jc = &c->jc;
    int32_t ct = c->tx->tok_cfg ? llm__json_get(jc, 0, "chat_template") : -1;
    if (ct >= 0 && jc->nodes[ct].type == LLM__JSON_ARR) {   // named templates: the default one
        int32_t d = -1;
        for (int32_t i = 0, k = ct + 1; i < jc->nodes[ct].n; i++, k = jc->nodes[k].next)
            if (llm__hf_member_is(jc, k, "name", "default"))
                d = llm__json_get(jc, k, "template");
        ct = d;
    }
    if (ct >= 0 && jc->nodes[ct].type == LLM__JSON_STR) {
        char *s = llm__json_strdup(jc, ct, NULL);
        if (!s) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        llm__gbuf_s(b, NULL, "tokenizer.chat_template", s);
        free(s);
    } else if (c->tx->tmpl) {
        llm__gbuf_key(b, NULL, "tokenizer.chat_template", LLM__GGUF_STR);
        llm__gbuf_str(b, c->tx->tmpl, c->tx->tmpl_len);
    }
    return LLM_OK;
}

// A directory's tokenizer (tokenizer.json, with tokenizer_config.json, generation_config.json,
// config.json and chat_template.jinja) as GGUF keys into b; n_vocab: config.json's vocab_size.
static enum llm_status llm__hf_tokenizer(const struct llm__hf_texts *tx, int64_t n_vocab, struct llm__gbuf *b,
                                         struct llm__err *e) {
    struct llm__hf_conv c = {.tx = tx};
    enum llm_status st = llm__json_parse(&c.j, tx->tok, tx->tok_len, "tokenizer.json", e);
    if (st == LLM_OK && tx->tok_cfg)
        st = llm__json_parse(&c.jc, tx->tok_cfg, tx->tok_cfg_len, "tokenizer_config.json", e);
    if (st == LLM_OK && tx->gen_cfg)
        st = llm__json_parse(&c.jg, tx->gen_cfg, tx->gen_cfg_len, "generation_config.json", e);
    if (st == LLM_OK) st = llm__json_parse(&c.jcfg, tx->cfg, tx->cfg_len, "config.json", e);
    if (st == LLM_OK) st = llm__hf_tok_kind(&c, e);
    if (st == LLM_OK) st = llm__hf_tok_texts(&c, n_vocab, e);
    if (st == LLM_OK) st = llm__hf_tok_merges(&c, b, e);
    if (st == LLM_OK) st = llm__hf_tok_special(&c, b, e);
    if (st == LLM_OK) {
        llm__hf_tok_types(&c, b);
        llm__hf_tok_add_bos_eos(&c, b);
        st = llm__hf_tok_template(&c, b, e);
    }
    if (st == LLM_OK && b->o.fail) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    llm__json_free(&c.j);
    llm__json_free(&c.jc);
    llm__json_free(&c.jg);
    llm__json_free(&c.jcfg);
    free(c.t.text.p);
    free(c.t.off);
    free(c.t.len);
    free(c.t.type);
    free(c.buf);
    return st;
}

// Builds g from a directory's texts (config.json's required; without tokenizer.json, no
// tokenizer) and the opened safetensors files in o, which g then owns (on failure: everything
// freed, g empty).
static enum llm_status llm__hf_build(struct llm__gguf *g, const struct llm__hf_texts *tx, struct llm__hf_owned *o,
                                     struct llm__err *e) {
    struct llm__gbuf b = {0};
    const char *arch = NULL;
    bool permute = false;
    int64_t hp[5] = {0};
    struct llm__hf_quant quant = {0};
    char hdr[24] = "GGUF";
    llm__gbuf_put(&b, hdr, 24);   // magic, version, counts: filled in by llm__gbuf_seal
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
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: config.json's vocab_size is %lld, but model.embed_tokens.weight has "
                       "%lld rows", (long long)hp[4], (long long)emb->shape[0]);
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
        for (int i = 0; i < o->n_files && st == LLM_OK; i++)
            st = llm__hf_add_tensors(g, o, &o->files[i], permute, gemma, hp, &quant, e);
    }
    if (st) llm__gguf_close(g);
    else g->version = 0;   // (not a GGUF file: llm_model_info says so)
    return st;
}

// A shard's file name from model.safetensors.index.json, checked to name a file inside the
// directory: not empty, no '/', not "." or "..", at most 255 bytes, no control characters.
static bool llm__hf_shard_name_ok(const char *s, size_t n) {
    if (n == 0 || n > 255 || strlen(s) != n || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

// The shards that model.safetensors.index.json (its path: index) lists, opened into o, every
// tensor it names checked to be in its shard.
static enum llm_status llm__hf_open_shards(struct llm__hf_owned *o, const char *dir, const char *index, bool read_all,
                                           struct llm__err *e) {
    char path[4096], *idx = NULL;
    size_t idx_len = 0;
    struct llm__json j = {0};
    enum llm_status st = llm__read_file(index, (size_t)64 << 20, &idx, &idx_len, e);
    if (st == LLM_OK) st = llm__json_parse(&j, idx, idx_len, "model.safetensors.index.json", e);
    const int32_t wm = st ? -1 : llm__json_get(&j, 0, "weight_map");
    if (st == LLM_OK && (wm < 0 || j.nodes[wm].type != LLM__JSON_OBJ || j.nodes[wm].n == 0))
        st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: no weight_map object of tensor names and "
                       "files");
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
            st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: '%s' is not a file name in the "
                           "directory", file ? llm__gguf_printable(pr, file, fl) : "(not a string)");
        } else {
            uint64_t slot;   // the shard, opened on its first mention
            int64_t f = llm__gguf_index_find(&shard_ix, shard, sizeof(*shard), file, &slot);
            if (f < 0) {
                f = o->n_files;
                snprintf(path, sizeof(path), "%s/%s", dir, file);
                if ((st = llm__st_open(&o->files[f], path, read_all, e)) == LLM_OK) {
                    o->n_files++;
                    if (!(o->files[f].path_name = llm__strndup(file, fl)))
                        st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
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
    llm__json_free(&j);
    free(idx);
    return st;
}

// The weights of directory dir opened into o: model.safetensors, or the shards that
// model.safetensors.index.json lists.
static enum llm_status llm__hf_open_weights(struct llm__hf_owned *o, const char *dir, bool read_all,
                                            struct llm__err *e) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) == 0) return llm__hf_open_shards(o, dir, path, read_all, e);
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if (access(path, F_OK) != 0)
        return llm__fail(e, LLM_ERR_IO, "hf: '%s' has config.json but neither model.safetensors nor "
                         "model.safetensors.index.json", dir);
    if (!(o->files = calloc(1, sizeof(*o->files)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    enum llm_status st = llm__st_open(&o->files[0], path, read_all, e);
    if (st == LLM_OK) o->n_files = 1;
    return st;
}

// Opens a Hugging Face model directory as g: config.json, model.safetensors or the shards that
// model.safetensors.index.json lists (every tensor it names checked to be in its shard),
// tokenizer.json, and tokenizer_config.json, generation_config.json and chat_template.jinja when
// they are there.
static enum llm_status llm__hf_open_dir(struct llm__gguf *g, const char *dir, bool read_all, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    char path[4096], *cfg = NULL, *tok = NULL, *tok_cfg = NULL, *gen_cfg = NULL, *tmpl = NULL, *name = NULL;
    size_t cfg_len = 0;
    struct llm__hf_texts tx = {0};
    struct llm__hf_owned *o = calloc(1, sizeof(*o));
    if (!o) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    enum llm_status st = LLM_OK;
    // room for every name the directory's files may have (a shard's: up to 255 bytes), so that no
    // path made below is cut short into another file's
    if (strlen(dir) + 1 + 256 > sizeof(path) ||
        snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path))
        st = llm__fail(e, LLM_ERR_IO, "hf: directory path too long (%zu bytes; at most %zu)", strlen(dir),
                       sizeof(path) - 257);
    else if (access(path, F_OK) != 0)
        st = llm__fail(e, LLM_ERR_IO, "'%s' is a directory without config.json: a model is a GGUF file or a Hugging "
                       "Face model directory (config.json, model.safetensors, tokenizer.json)", dir);
    else st = llm__read_file(path, (size_t)16 << 20, &cfg, &cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "tokenizer.json", (size_t)1 << 30, true, &tok, &tx.tok_len, e);
    if (st == LLM_OK)
        st = llm__hf_read(dir, "tokenizer_config.json", (size_t)64 << 20, false, &tok_cfg, &tx.tok_cfg_len, e);
    if (st == LLM_OK)
        st = llm__hf_read(dir, "generation_config.json", (size_t)16 << 20, false, &gen_cfg, &tx.gen_cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "chat_template.jinja", (size_t)16 << 20, false, &tmpl, &tx.tmpl_len, e);
    if (st == LLM_OK) {   // the model's name: the directory's
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/') b--;
        if (!(name = llm__strndup(dir + b, n - b))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    if (st == LLM_OK) st = llm__hf_open_weights(o, dir, read_all, e);
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
