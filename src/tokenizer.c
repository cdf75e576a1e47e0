// Tokenizer: vocabularies, pre-tokenizers, merges, detokenization

#include "internal.h"

// === tokenizer ===
//
// The vocabulary of the GGUF file (token texts, scores, types, special ids) and the two encoders
// common files use, written to give llama.cpp's token ids exactly:
//   - SentencePiece ("llama"): spaces become U+2581, a space in front of the text (and after each
//     special token), then the highest-scoring adjacent pair of symbols is merged while the merge
//     is a token; what remains unknown falls back to byte tokens <0xNN>.
//   - byte-level BPE ("gpt2"): the text is split into words by the pre-tokenizer the file names
//     (tokenizer.ggml.pre), each word's bytes are mapped to GPT-2's printable code points, and
//     the adjacent pair with the lowest merge rank (tokenizer.ggml.merges) is merged while any is.
// Before either, special tokens are cut out of the text: user-defined tokens always, control
// tokens when the caller asks (chat templates do). Token texts are looked up through an
// open-addressing hash table, merges through another.

static int32_t llm__vocab_find(const struct llm__vocab *v, const char *s, size_t n) {
    return llm__strtab_find(v->ht, v->ht_mask, v->text, s, n);
}

void llm__vocab_free(struct llm__vocab *v) {
    free(v->scores);
    free(v->attr);
    free(v->eog);
    free(v->ht);
    free(v->mht);
    free(v->special);
    free(v->rstrip);
    memset(v, 0, sizeof(*v));
}

static bool llm__gguf_opt_id(const struct llm__gguf *g, const char *key, int32_t *id, int n, struct llm__err *e,
                             bool *bad) {
    uint32_t u;
    if (llm__gguf_find_key(g, key) < 0) return false;
    if (!llm__gguf_get_u32(g, key, &u, e)) { *bad = true; return false; }
    if (u >= (uint32_t)n) {   // files carry -1 style values for "none" too: treat out of range as absent
        return false;
    }
    *id = (int32_t)u;
    return true;
}

static bool llm__str_is(const struct llm__gguf_str *s, const char *z) {
    return s->len == strlen(z) && memcmp(s->ptr, z, s->len) == 0;
}

// Token texts llama.cpp treats as control tokens whatever the file says: ends of turns and
// text, fill-in-the-middle markers. The first group also ends a generation.
static const char *const llm__eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>", "</s>", "<|fim_pad|>", "<|fim_repo|>", "<|file_sep|>",
};
static const char *const llm__control_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<fim-pad>", "<fim_pad>", "<PAD>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
};

static int llm__u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool llm__vocab_get_bool(const struct llm__gguf *g, const char *key, bool *out, struct llm__err *e) {
    if (llm__gguf_find_key(g, key) < 0) return true;
    return llm__gguf_get_bool(g, key, out, e);
}

// The tokenizer's kind and its tokens: texts (in place in the file), scores, attributes (from
// tokenizer.ggml.token_type; normal when absent), and the hash table of texts.
static enum llm_status llm__vocab_load_tokens(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                              struct llm__err *e) {
    struct llm__gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *data;
    if (!llm__gguf_get_str(g, "tokenizer.ggml.model", &s, e)) return LLM_ERR_FORMAT;
    if (llm__str_is(&s, "llama")) v->type = LLM__VOCAB_SPM;
    else if (llm__str_is(&s, "gpt2")) v->type = LLM__VOCAB_BPE;
    else
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer: model '%.*s' is not supported (llama, gpt2)",
                         (int)LLM__MIN(s.len, 32), s.ptr);
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, e)) return LLM_ERR_FORMAT;
    if (et != 8 /* string */ || n < 1 || n > (1u << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens must be a non-empty string array");
    if (n_vocab_model > 0 && (int64_t)n != n_vocab_model)
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: %llu tokens, but the embedding has %d rows",
                         (unsigned long long)n, n_vocab_model);
    v->n = (int)n;
    v->text = data;
    v->scores = calloc(n, sizeof(float));
    v->attr = malloc(n);
    v->eog = calloc(n, 1);
    v->ht = llm__strtab_build(v->text, v->n, &v->ht_mask);
    if (!v->scores || !v->attr || !v->eog || !v->ht) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memset(v->attr, LLM__TOK_NORMAL, n);
    if (llm__gguf_find_key(g, "tokenizer.ggml.scores") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if (et != 6 /* f32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores must be %d f32 values", v->n);
        memcpy(v->scores, data, n * sizeof(float));
    }
    if (llm__gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if ((et != 5 && et != 4) /* i32, u32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type must be %d i32 values", v->n);
        for (int i = 0; i < v->n; i++) {
            int32_t t;
            memcpy(&t, (const char *)data + 4 * (size_t)i, 4);
            v->attr[i] = (uint8_t)(t >= 1 && t <= 6 ? t : LLM__TOK_UNUSED);
        }
    }
    return LLM_OK;
}

// BPE only: the pre-tokenizer (tokenizer.ggml.pre, with the defaults it implies) and the merges.
static enum llm_status llm__vocab_load_bpe(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *data;
    v->pre = LLM__PRE_DEFAULT;   // what llama.cpp assumes for files without the key
    if (llm__gguf_find_key(g, "tokenizer.ggml.pre") >= 0) {
        if (!llm__gguf_get_str(g, "tokenizer.ggml.pre", &s, e)) return LLM_ERR_FORMAT;
        size_t i = 0;
        while (i < LLM__ARRAY_LEN(llm__pre_names) && !llm__str_is(&s, llm__pre_names[i].name)) i++;
        if (i == LLM__ARRAY_LEN(llm__pre_names))
            return llm__fail(e, LLM_ERR_UNSUPPORTED,
                             "tokenizer: pre-tokenizer '%.*s' is not supported (llama-bpe, qwen2, gpt-2, smollm, "
                             "tekken, gpt-4o, default and their aliases)", (int)LLM__MIN(s.len, 64), s.ptr);
        v->pre = llm__pre_names[i].pre;
        v->ignore_merges = llm__pre_names[i].ignore_merges;
        v->add_bos = llm__pre_names[i].add_bos;
    }
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n, &data, e))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: a gpt2 vocabulary needs tokenizer.ggml.merges");
    if (et != 8 || n > (1u << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges must be a string array");
    v->merges = data;
    v->n_merges = (int)n;
    v->mht = llm__strtab_build(v->merges, v->n_merges, &v->mht_mask);
    if (!v->mht) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return LLM_OK;
}

// The file's add_bos / add_eos / add_space_prefix over the defaults of the tokenizer's kind; no
// BOS or EOS to add when the vocabulary has none.
static enum llm_status llm__vocab_load_flags(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    bool b = v->add_bos;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_bos_token", &b, e)) return LLM_ERR_FORMAT;
    v->add_bos = b;
    b = v->add_eos;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_eos_token", &b, e)) return LLM_ERR_FORMAT;
    v->add_eos = b;
    b = v->add_space_prefix;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, e)) return LLM_ERR_FORMAT;
    v->add_space_prefix = b;
    struct llm__gguf_str ps;
    if (llm__gguf_find_key(g, "tokenizer.ggml.prepend_scheme") >= 0) {
        if (!llm__gguf_get_str(g, "tokenizer.ggml.prepend_scheme", &ps, e)) return LLM_ERR_FORMAT;
        v->prepend = llm__str_is(&ps, "always") ? 1 : llm__str_is(&ps, "first") ? 2 : 0;
        if (!v->prepend)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.prepend_scheme is neither always nor "
                             "first");
    }
    if (v->add_bos && v->bos < 0) v->add_bos = false;
    if (v->add_eos && v->eos < 0) v->add_eos = false;
    return LLM_OK;
}

static bool llm__vocab_is_special(const struct llm__vocab *v, int i) {
    uint8_t a = v->attr[i];
    return (a == LLM__TOK_CONTROL || a == LLM__TOK_USER || a == LLM__TOK_UNKNOWN) && v->text[i].len > 0;
}

// End of generation: EOS, EOT, EOM and the end-of-turn texts; those texts and the fill-in-the-
// middle markers are control tokens in GGUF files, as llama.cpp has them (in a Hugging Face
// directory, `exact`, the types its tokenizer.json gave: an end-of-turn text that is an
// ordinary token there stays one, as in the tokenizers library). Then
// the list of special tokens (control, user-defined, unknown), longest text first (ties: lower id
// first), which tokenization matches in that order.
static enum llm_status llm__vocab_mark_special(struct llm__vocab *v, int32_t eot, int32_t eom, bool exact,
                                               struct llm__err *e) {
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (eot >= 0) v->eog[eot] = 1;
    if (eom >= 0) v->eog[eom] = 1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__eog_texts); i++) {
        int32_t id = llm__vocab_find(v, llm__eog_texts[i], strlen(llm__eog_texts[i]));
        if (id >= 0 && (!exact || v->attr[id] == LLM__TOK_CONTROL)) { v->eog[id] = 1; v->attr[id] = LLM__TOK_CONTROL; }
    }
    // gpt-oss's harmony format (and Solar Open's): a message's <|end|> goes on to the next one;
    // <|return|> / <|call|> end the answer. <|end|> is then not an end and is rendered (llama.cpp).
    int32_t end = llm__vocab_find(v, "<|end|>", 7), ret = llm__vocab_find(v, "<|return|>", 10),
            call = llm__vocab_find(v, "<|call|>", 8), calls = llm__vocab_find(v, "<|calls|>", 9),
            flush = llm__vocab_find(v, "<|flush|>", 9);
#define LLM__EOG(id) ((id) >= 0 && v->eog[id])
    if (LLM__EOG(end) && ((LLM__EOG(ret) && (LLM__EOG(call) || LLM__EOG(calls))) ||
                          ((LLM__EOG(call) || LLM__EOG(calls)) && LLM__EOG(flush)))) {
        v->eog[end] = 0;
        v->attr[end] = LLM__TOK_USER;
    }
#undef LLM__EOG
    // (and harmony's markers are rendered in the text, for the reader of its channels: llama.cpp)
    static const char *const harmony[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < LLM__ARRAY_LEN(harmony); i++) {
        const int32_t id = llm__vocab_find(v, harmony[i], strlen(harmony[i]));
        if (id >= 0) v->attr[id] = LLM__TOK_USER;
    }
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__control_texts) && !exact; i++) {
        int32_t id = llm__vocab_find(v, llm__control_texts[i], strlen(llm__control_texts[i]));
        if (id >= 0) v->attr[id] = LLM__TOK_CONTROL;
    }
    for (int i = 0; i < v->n; i++) v->n_special += llm__vocab_is_special(v, i);
    // sorted by (longer text first, lower id first): keys of (~length, id)
    uint64_t *keys = malloc((size_t)LLM__MAX(v->n_special, 1) * sizeof(uint64_t));
    v->special = malloc((size_t)LLM__MAX(v->n_special, 1) * sizeof(int32_t));
    if (!keys || !v->special) { free(keys); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    v->n_special = 0;
    for (int i = 0; i < v->n; i++)
        if (llm__vocab_is_special(v, i)) {
            const uint32_t len = (uint32_t)LLM__MIN(v->text[i].len, UINT32_MAX);
            keys[v->n_special++] = (uint64_t)(UINT32_MAX - len) << 32 | (uint32_t)i;
        }
    qsort(keys, (size_t)v->n_special, sizeof(uint64_t), llm__u64_cmp);
    for (int i = 0; i < v->n_special; i++) v->special[i] = (int32_t)(uint32_t)keys[i];
    free(keys);
    return LLM_OK;
}

// llama.cpp strips the whitespace after the special tokens of models whose general.name has
// "phi-3" or "phi3" in it (case-insensitive), as Phi-3's tokenizer does: all special tokens and
// </s>, but not <unk>, <s> and <|endoftext|>.
static enum llm_status llm__vocab_rstrip(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_str name;
    if (g->version == 0) {   // a Hugging Face directory: tokenizer.json's rstrip flags (tokenizer.ggml.rstrip_ids)
        uint32_t et;
        uint64_t n;
        const void *data;
        if (llm__gguf_find_key(g, "tokenizer.ggml.rstrip_ids") < 0) return LLM_OK;
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.rstrip_ids", &et, &n, &data, e) || et != LLM__GGUF_I32)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.rstrip_ids must be an i32 array");
        if (!(v->rstrip = calloc((size_t)v->n, 1))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < n; i++) {
            int32_t id;
            memcpy(&id, (const char *)data + 4 * i, 4);
            if (id >= 0 && id < v->n) v->rstrip[id] = 1;
        }
        return LLM_OK;
    }
    if (llm__gguf_find_key(g, "general.name") < 0 || !llm__gguf_get_str(g, "general.name", &name, NULL)) return LLM_OK;
    char *low = malloc(name.len + 1);
    if (!low) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < name.len; i++) low[i] = (char)tolower((unsigned char)name.ptr[i]);
    bool phi3 = llm__memmem(low, name.len, "phi-3", 5) || llm__memmem(low, name.len, "phi3", 4);
    free(low);
    if (!phi3) return LLM_OK;
    if (!(v->rstrip = calloc((size_t)v->n, 1))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < v->n_special; i++) v->rstrip[v->special[i]] = 1;
    static const char *const on[] = {"</s>"}, *const off[] = {"<unk>", "<s>", "<|endoftext|>"};
    int32_t id = llm__vocab_find(v, on[0], strlen(on[0]));
    if (id >= 0) v->rstrip[id] = 1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(off); i++)
        if ((id = llm__vocab_find(v, off[i], strlen(off[i]))) >= 0) v->rstrip[id] = 0;
    return LLM_OK;
}

// How bytes become tokens: SentencePiece's <0xXX> byte tokens; GPT-2's byte-to-code-point map
// (the 188 printable bytes to themselves, the other 68 to U+0100 onwards) and its inverse.
static void llm__vocab_byte_tokens(struct llm__vocab *v) {
    if (v->type == LLM__VOCAB_SPM) {
        for (int i = 0; i < 256; i++) {
            char buf[8];
            snprintf(buf, sizeof(buf), "<0x%02X>", i);
            v->byte_tok[i] = llm__vocab_find(v, buf, 6);
        }
        return;
    }
    for (size_t i = 0; i < LLM__ARRAY_LEN(v->bpe_byte); i++) v->bpe_byte[i] = -1;
    int next = 256;
    for (int c = 0; c < 256; c++) {
        bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174);
        int cp = printable ? c : next++;
        v->bpe_byte[cp] = (int16_t)c;
        if (cp < 0x80) { v->bpe_enc[c][0] = (char)cp; v->bpe_enc_len[c] = 1; }
        else {
            v->bpe_enc[c][0] = (char)(0xC0 | (cp >> 6));
            v->bpe_enc[c][1] = (char)(0x80 | (cp & 0x3F));
            v->bpe_enc_len[c] = 2;
        }
    }
}

// Whether a text of n bytes can be known to need more than some number of tokens without
// tokenizing it: when every byte of any text ends up in a token, a token stands for at most as many
// bytes as its text has (SentencePiece writes a space as the 3 bytes of U+2581, byte-level BPE a byte
// as 1 or 2 bytes), so the text needs at least n / max_token_bytes tokens. Every byte ends up in a
// token when SentencePiece has a byte token for each byte or an unknown token (what no piece
// covers falls back to those), and when byte-level BPE has the token of each byte's code point and
// every merge makes a token (else a symbol that is no token falls back to single bytes, and those
// without a token are dropped, as llama.cpp drops them). Sets v->max_token_bytes, 0 otherwise.
static void llm__vocab_token_bound(struct llm__vocab *v) {
    v->max_token_bytes = 0;
    bool covered = true;
    if (v->type == LLM__VOCAB_SPM) {
        for (int b = 0; b < 256 && v->unk < 0; b++) covered &= v->byte_tok[b] >= 0;
    } else {
        for (int b = 0; b < 256 && covered; b++) covered = llm__vocab_find(v, v->bpe_enc[b], v->bpe_enc_len[b]) >= 0;
        size_t longest = 0;
        for (int i = 0; i < v->n_merges; i++) longest = LLM__MAX(longest, (size_t)v->merges[i].len);
        char *buf = covered ? malloc(longest + 1) : NULL;
        covered = buf != NULL;
        for (int i = 0; i < v->n_merges && covered; i++) {
            // "left right" with one space (the merger could cut one with more at any of them), and
            // left + right a token
            const struct llm__gguf_str *m = &v->merges[i];
            const char *sp = memchr(m->ptr, ' ', (size_t)m->len);
            size_t at = sp ? (size_t)(sp - m->ptr) : 0;
            covered = sp && !memchr(sp + 1, ' ', (size_t)m->len - at - 1);
            if (!covered) break;
            memcpy(buf, m->ptr, at);
            memcpy(buf + at, sp + 1, (size_t)m->len - at - 1);
            covered = llm__vocab_find(v, buf, (size_t)m->len - 1) >= 0;
        }
        free(buf);
    }
    if (!covered) return;
    for (int i = 0; i < v->n; i++) v->max_token_bytes = LLM__MAX(v->max_token_bytes, (size_t)v->text[i].len);
}

// A SentencePiece vocabulary encodes what no piece covers byte by byte: <0xNN> tokens, else the
// unknown token. One with neither for some byte could not tokenize text holding that byte (the
// id would be -1, an embedding row before the table). llama.cpp loads such a vocabulary and
// fails when such text comes (an exception out of its tokenizer); it is refused here, at load,
// with the byte named. Real SentencePiece models always have an unknown token.
static enum llm_status llm__vocab_check_bytes(const struct llm__vocab *v, struct llm__err *e) {
    if (v->type != LLM__VOCAB_SPM || v->unk >= 0) return LLM_OK;
    for (int b = 0; b < 256; b++)
        if (v->byte_tok[b] < 0)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: the SentencePiece vocabulary cannot encode byte 0x%02X: "
                             "it has no <0x%02X> token and no unknown token (tokenizer.ggml.unknown_token_id is "
                             "missing or out of range)", b, b);
    return LLM_OK;
}

// The vocabulary of a GGUF file (n_vocab_model > 0: it must have that many tokens): tokens,
// special ids, the tokenizer's settings, special tokens, byte tokens, the chat template.
enum llm_status llm__vocab_load(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                struct llm__err *e) {
    enum llm_status st;
    memset(v, 0, sizeof(*v));
    v->bos = v->eos = v->unk = -1;
    if ((st = llm__vocab_load_tokens(v, g, n_vocab_model, e))) return st;
    bool bad = false;
    llm__gguf_opt_id(g, "tokenizer.ggml.bos_token_id", &v->bos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eos_token_id", &v->eos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", &v->unk, v->n, e, &bad);
    int32_t eot = -1, eom = -1;
    llm__gguf_opt_id(g, "tokenizer.ggml.eot_token_id", &eot, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eom_token_id", &eom, v->n, e, &bad);
    if (bad) return LLM_ERR_FORMAT;
    if (v->type == LLM__VOCAB_SPM) {
        v->add_bos = true;
        v->add_space_prefix = true;
    } else if ((st = llm__vocab_load_bpe(v, g, e))) {
        return st;
    }
    if ((st = llm__vocab_load_flags(v, g, e))) return st;
    v->exact = g->version == 0;
    if ((st = llm__vocab_mark_special(v, eot, eom, v->exact, e))) return st;
    if ((st = llm__vocab_rstrip(v, g, e))) return st;
    llm__vocab_byte_tokens(v);
    llm__vocab_token_bound(v);
    if ((st = llm__vocab_check_bytes(v, e))) return st;
    llm__chat_template_recognise(v, g);
    return LLM_OK;
}

// --- pre-tokenizers: split code points into words ---
//
// A split is a list of word lengths (in code points) over the text. Each stage refines every
// word of the previous one, as llama.cpp applies its list of regular expressions; the regular
// expressions of the supported pre-tokenizers are written out as scanners.

static void llm__split_push(struct llm__split *s, size_t len) {
    if (len == 0) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        size_t *p = realloc(s->len, cap * sizeof(size_t));
        if (!p) { s->oom = true; return; }
        s->len = p;
        s->cap = cap;
    }
    s->len[s->n++] = len;
}

struct llm__scan {
    const uint32_t *cp;
    size_t a, b, prev;   // the word [a, b) being split; end of the last piece
    struct llm__split *out;
};
#define LLM__OUT_OF_RANGE 0xFFFFFFFFu
static uint32_t llm__scan_cp(const struct llm__scan *s, size_t p) {
    return p >= s->a && p < s->b ? s->cp[p] : LLM__OUT_OF_RANGE;
}
static int llm__scan_f(const struct llm__scan *s, size_t p) {
    return p >= s->a && p < s->b ? llm__cp_flags(s->cp[p]) : 0;
}
static size_t llm__scan_piece(struct llm__scan *s, size_t end) {
    size_t len = end - s->prev;
    llm__split_push(s->out, len);
    s->prev = end;
    return len;
}
static uint32_t llm__ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when fold): the length of a match at pos, or 0.
static size_t llm__scan_contraction(const struct llm__scan *s, size_t pos, bool fold) {
    if (s->cp[pos] != '\'' || pos + 1 >= s->b) return 0;
    uint32_t c1 = s->cp[pos + 1];
    if (fold) c1 = llm__ascii_lower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= s->b) return 0;
    uint32_t c2 = s->cp[pos + 2];
    if (fold) c2 = llm__ascii_lower(c2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
static void llm__scan_gpt2(struct llm__scan *s) {
    const int LNS = LLM__CP_LETTER | LLM__CP_NUMBER | LLM__CP_SPACE;
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        size_t m = llm__scan_contraction(s, pos, false);
        if (m) { pos += llm__scan_piece(s, pos + m); continue; }
        int f2 = c == ' ' ? llm__scan_f(s, pos + 1) : llm__scan_f(s, pos);
        if (f2 & (LLM__CP_LETTER | LLM__CP_NUMBER)) {
            int cls = f2 & LLM__CP_LETTER ? LLM__CP_LETTER : LLM__CP_NUMBER;
            pos += c == ' ';
            while (f2 & cls) f2 = llm__scan_f(s, ++pos);
            llm__scan_piece(s, pos);
            continue;
        }
        if (!(f2 & LNS) && f2) {
            pos += c == ' ';
            while (!(f2 & LNS) && f2) f2 = llm__scan_f(s, ++pos);
            llm__scan_piece(s, pos);
            continue;
        }
        size_t nws = 0;
        while (llm__scan_f(s, pos + nws) & LLM__CP_SPACE) nws++;
        if (nws > 1 && llm__scan_cp(s, pos + nws) != LLM__OUT_OF_RANGE) pos += nws - 1;
        else pos += nws > 0 ? nws : 1;
        llm__scan_piece(s, pos);
    }
}

// The alternatives Llama 3's and Tekken's expressions end with, matched at pos, where no earlier
// one matched: ` ?[^\s\p{L}\p{N}]+[\r\n]*` (Tekken, slash: `[\r\n/]*`), `\s*[\r\n]+`, `\s+(?!\S)`, `\s+`,
// else the one code point. The piece is pushed; its end returned.
static size_t llm__scan_punct_space(struct llm__scan *s, size_t pos, bool slash) {
    const int LNS = LLM__CP_LETTER | LLM__CP_NUMBER | LLM__CP_SPACE;
    const uint32_t c = s->cp[pos];
    const int f = llm__scan_f(s, pos);
    int f2 = c == ' ' ? llm__scan_f(s, pos + 1) : f;
    if (!(f2 & LNS) && f) {
        pos += c == ' ';
        while (!(f2 & LNS) && f2) f2 = llm__scan_f(s, ++pos);
        for (uint32_t c2 = llm__scan_cp(s, pos); c2 == '\r' || c2 == '\n' || (slash && c2 == '/');
             c2 = llm__scan_cp(s, ++pos)) {}
        llm__scan_piece(s, pos);
        return pos;
    }
    size_t nws = 0, last_rn = 0;
    while (llm__scan_f(s, pos + nws) & LLM__CP_SPACE) {
        uint32_t c2 = s->cp[pos + nws];
        if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
        nws++;
    }
    if (last_rn > 0) pos = last_rn;
    else if (nws > 1 && llm__scan_cp(s, pos + nws) != LLM__OUT_OF_RANGE) pos += nws - 1;
    else pos += nws > 0 ? nws : 1;
    llm__scan_piece(s, pos);
    return pos;
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
// | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
static void llm__scan_llama3(struct llm__scan *s, size_t max_digits) {
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        int f = llm__scan_f(s, pos);
        size_t m = llm__scan_contraction(s, pos, true);
        if (m) { pos += llm__scan_piece(s, pos + m); continue; }
        if (!(c == '\r' || c == '\n' || (f & LLM__CP_NUMBER)) &&
            ((f & LLM__CP_LETTER) || (llm__scan_f(s, pos + 1) & LLM__CP_LETTER))) {
            pos++;
            while (llm__scan_f(s, pos) & LLM__CP_LETTER) pos++;
            llm__scan_piece(s, pos);
            continue;
        }
        if (f & LLM__CP_NUMBER) {
            size_t ini = pos;
            while (llm__scan_f(s, pos) & LLM__CP_NUMBER) {
                if (++pos - ini >= max_digits) { llm__scan_piece(s, pos); ini = pos; }
            }
            llm__scan_piece(s, pos);
            continue;
        }
        pos = llm__scan_punct_space(s, pos, false);
    }
}

// Tekken (Mistral NeMo, Mistral Small 3), as llama.cpp writes its regular expression:
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|
// \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// llama.cpp runs it as a backtracking std::regex over the text with each non-ASCII code point
// replaced by one byte for its class, so an "upper" letter is any letter but a-z and a "lower"
// one any letter but A-Z: a non-ASCII letter is both.
static bool llm__tekken_upper(const struct llm__scan *s, size_t p) {
    return (llm__scan_f(s, p) & LLM__CP_LETTER) && !(s->cp[p] >= 'a' && s->cp[p] <= 'z');
}
static bool llm__tekken_lower(const struct llm__scan *s, size_t p) {
    return (llm__scan_f(s, p) & LLM__CP_LETTER) && !(s->cp[p] >= 'A' && s->cp[p] <= 'Z');
}
// GPT-4o's (o200k: gpt-oss, Llama 4) expression is Tekken's with an optional English contraction
// after each word, (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?, and \p{N}{1,3} for
// numbers: the end of the contraction at p, or p when none follows.
static size_t llm__gpt4o_contraction(const struct llm__scan *s, size_t p) {
    if (p >= s->b || s->cp[p] != '\'') return p;
    const uint32_t c1 = p + 1 < s->b ? s->cp[p + 1] | 0x20 : 0, c2 = p + 2 < s->b ? s->cp[p + 2] | 0x20 : 0;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return p + 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return p + 3;
    return p;
}
// The end of a match of upper* lower+ (lower_needed) or upper+ lower* at q; 0 when none. The
// greedy upper* gives letters back, last first, until a lower one follows.
static size_t llm__tekken_word(const struct llm__scan *s, size_t q, bool lower_needed) {
    size_t u = q;
    while (llm__tekken_upper(s, u)) u++;
    if (!lower_needed) {
        if (u == q) return 0;
        while (llm__tekken_lower(s, u)) u++;
        return u;
    }
    for (size_t k = u;; k--) {
        if (llm__tekken_lower(s, k)) {
            while (llm__tekken_lower(s, k)) k++;
            return k;
        }
        if (k == q) return 0;
    }
}
static void llm__scan_tekken(struct llm__scan *s, bool gpt4o) {
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        int f = llm__scan_f(s, pos);
        // the two word alternatives, each with the optional leading character first
        bool lead = c != '\r' && c != '\n' && !(f & (LLM__CP_LETTER | LLM__CP_NUMBER));
        size_t end = 0;
        for (int alt = 0; alt < 2 && !end; alt++) {
            if (lead) end = llm__tekken_word(s, pos + 1, alt == 0);
            if (!end) end = llm__tekken_word(s, pos, alt == 0);
        }
        if (end) {
            pos = gpt4o ? llm__gpt4o_contraction(s, end) : end;
            llm__scan_piece(s, pos);
            continue;
        }
        if (f & LLM__CP_NUMBER) {   // one number (GPT-4o: up to three)
            size_t k = pos + 1;
            while (gpt4o && k < s->b && k < pos + 3 && (llm__scan_f(s, k) & LLM__CP_NUMBER)) k++;
            llm__scan_piece(s, pos = k);
            continue;
        }
        pos = llm__scan_punct_space(s, pos, true);
    }
}

// Runs of code points of a class, as a regular expression "[class]+" (run 0), "[class]" (run 1)
// or exactly run code points ("[0-9][0-9][0-9]") finds them: matches and the text between.
enum { LLM__RUN_PUNCT, LLM__RUN_NUMBER, LLM__RUN_ASCII_DIGIT };
static bool llm__run_class(uint32_t c, int cls) {
    switch (cls) {
    case LLM__RUN_PUNCT: return (llm__cp_flags(c) & LLM__CP_PUNCT) || (c < 0x80 && strchr("$+<=>^~|", (int)c) && c);
    case LLM__RUN_NUMBER: return (llm__cp_flags(c) & LLM__CP_NUMBER) != 0;
    default: return c >= '0' && c <= '9';
    }
}
static void llm__scan_runs(struct llm__scan *s, int cls, size_t run) {
    for (size_t pos = s->a; pos < s->b;) {
        if (!llm__run_class(s->cp[pos], cls)) { pos++; continue; }
        size_t end = pos;
        while (end < s->b && llm__run_class(s->cp[end], cls)) end++;
        size_t k = end - pos;
        if (run == 0) { llm__scan_piece(s, pos); llm__scan_piece(s, end); }
        else if (k >= run) {
            llm__scan_piece(s, pos);
            for (size_t i = 0; i + run <= k; i += run) llm__scan_piece(s, pos + i + run);
        }
        pos = end;
    }
    llm__scan_piece(s, s->b);
}

enum { LLM__STAGE_GPT2, LLM__STAGE_LLAMA3, LLM__STAGE_QWEN2, LLM__STAGE_PUNCT_RUNS, LLM__STAGE_NUMBER_RUNS,
       LLM__STAGE_NUMBER_EACH, LLM__STAGE_DIGIT3, LLM__STAGE_TEKKEN, LLM__STAGE_GPT4O };

// Applies one stage to every word of in.
static bool llm__split_stage(const uint32_t *cp, const struct llm__split *in, int stage, struct llm__split *out) {
    size_t start = 0;
    out->n = 0;
    for (size_t w = 0; w < in->n; w++) {
        struct llm__scan s = {cp, start, start + in->len[w], start, out};
        switch (stage) {
        case LLM__STAGE_GPT2: llm__scan_gpt2(&s); break;
        case LLM__STAGE_LLAMA3: llm__scan_llama3(&s, 3); break;
        case LLM__STAGE_QWEN2: llm__scan_llama3(&s, 1); break;
        case LLM__STAGE_PUNCT_RUNS: llm__scan_runs(&s, LLM__RUN_PUNCT, 0); break;
        case LLM__STAGE_NUMBER_RUNS: llm__scan_runs(&s, LLM__RUN_NUMBER, 0); break;
        case LLM__STAGE_NUMBER_EACH: llm__scan_runs(&s, LLM__RUN_NUMBER, 1); break;
        case LLM__STAGE_TEKKEN: llm__scan_tekken(&s, false); break;
        case LLM__STAGE_GPT4O: llm__scan_tekken(&s, true); break;
        default: llm__scan_runs(&s, LLM__RUN_ASCII_DIGIT, 3); break;
        }
        start += in->len[w];
    }
    return !out->oom;
}

// --- merging adjacent symbols (SentencePiece by score, BPE by rank) ---

struct llm__sym { int prev, next; const char *text; int n; };
struct llm__bigram { int left, right; double score; int size; };

static bool llm__bigram_before(const struct llm__bigram *a, const struct llm__bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct llm__merger {
    const struct llm__vocab *v;
    struct llm__sym *sym;
    struct llm__bigram *heap;
    int n_heap;
    char *key;   // BPE: "left right"
};

static void llm__merger_push(struct llm__merger *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const struct llm__sym *l = &s->sym[left], *r = &s->sym[right];
    int n = l->n + r->n;
    double score;
    if (s->v->type == LLM__VOCAB_SPM) {
        int32_t id = llm__vocab_find(s->v, l->text, (size_t)n);
        if (id < 0 || (s->v->exact && s->v->scores[id] == -INFINITY)) return;
        score = s->v->scores[id];
    } else {
        memcpy(s->key, l->text, (size_t)l->n);
        s->key[l->n] = ' ';
        memcpy(s->key + l->n + 1, r->text, (size_t)r->n);
        int32_t rank = llm__strtab_find(s->v->mht, s->v->mht_mask, s->v->merges, s->key, (size_t)n + 1);
        if (rank < 0) return;
        score = -(double)rank;   // the lowest rank merges first
    }
    struct llm__bigram b = {left, right, score, n};
    int i = s->n_heap++;
    while (i > 0 && llm__bigram_before(&b, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = b;
}

static struct llm__bigram llm__merger_pop(struct llm__merger *s) {
    struct llm__bigram top = s->heap[0], last = s->heap[--s->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->n_heap) break;
        if (c + 1 < s->n_heap && llm__bigram_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!llm__bigram_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n_heap > 0) s->heap[i] = last;
    return top;
}

// Token ids appended through a bounded writer that still counts what did not fit.
struct llm__tokbuf { int32_t *ids; int cap, n; };
static void llm__tokbuf_push(struct llm__tokbuf *b, int32_t id) {
    if (b->n < b->cap) b->ids[b->n] = id;
    if (b->n < INT_MAX) b->n++;
}

// Encodes one piece of text: SentencePiece-escaped text, or one byte-encoded BPE word.
static bool llm__merge_encode(const struct llm__vocab *v, const char *text, size_t len, struct llm__tokbuf *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX / 4) return false;
    if (v->type == LLM__VOCAB_BPE && v->ignore_merges) {
        int32_t id = llm__vocab_find(v, text, len);
        if (id >= 0) { llm__tokbuf_push(out, id); return true; }
    }
    struct llm__merger s = {v, malloc(len * sizeof(struct llm__sym)), malloc(3 * len * sizeof(struct llm__bigram)), 0,
                            v->type == LLM__VOCAB_BPE ? malloc(len + 2) : NULL};
    if (!s.sym || !s.heap || (v->type == LLM__VOCAB_BPE && !s.key)) {
        free(s.sym);
        free(s.heap);
        free(s.key);
        return false;
    }
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = LLM__MIN(llm__utf8_len((uint8_t)text[off]), len - off);
        s.sym[n] = (struct llm__sym){n - 1, off + l == len ? -1 : n + 1, text + off, (int)l};
        off += l;
    }
    for (int i = 1; i < n; i++) llm__merger_push(&s, i - 1, i);
    while (s.n_heap > 0) {
        struct llm__bigram b = llm__merger_pop(&s);
        struct llm__sym *l = &s.sym[b.left], *r = &s.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   // stale
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        llm__merger_push(&s, l->prev, b.left);
        llm__merger_push(&s, b.left, l->next);
    }
    for (int i = 0; i != -1; i = s.sym[i].next) {
        int32_t id = llm__vocab_find(v, s.sym[i].text, (size_t)s.sym[i].n);
        if (id >= 0) { llm__tokbuf_push(out, id); continue; }
        for (int j = 0; j < s.sym[i].n; j++) {
            if (v->type == LLM__VOCAB_SPM) {
                int32_t bt = v->byte_tok[(uint8_t)s.sym[i].text[j]];
                llm__tokbuf_push(out, bt >= 0 ? bt : v->unk);
            } else {   // single bytes that are tokens; llama.cpp drops the others
                int32_t bt = llm__vocab_find(v, s.sym[i].text + j, 1);
                if (bt >= 0) llm__tokbuf_push(out, bt);
            }
        }
    }
    free(s.sym);
    free(s.heap);
    free(s.key);
    return true;
}

// Byte-level BPE over one fragment of text (no special tokens in it).
static bool llm__bpe_encode(const struct llm__vocab *v, const char *text, size_t len, struct llm__tokbuf *out) {
    if (len == 0) return true;
    uint32_t *cp = malloc(len * sizeof(uint32_t));
    char *word = malloc(8 * len + 8);   // a code point re-encoded: <= 4 bytes, each byte -> <= 2
    struct llm__split a = {0}, b = {0};
    bool ok = cp && word;
    size_t n = 0;
    for (size_t off = 0; ok && off < len;) cp[n++] = llm__utf8_next((const uint8_t *)text, len, &off);
    static const int stages[][4] = {
        [LLM__PRE_DEFAULT] = {LLM__STAGE_PUNCT_RUNS, LLM__STAGE_GPT2, LLM__STAGE_NUMBER_RUNS, LLM__STAGE_DIGIT3},
        [LLM__PRE_GPT2] = {LLM__STAGE_GPT2, -1, -1, -1},
        [LLM__PRE_LLAMA3] = {LLM__STAGE_LLAMA3, -1, -1, -1},
        [LLM__PRE_QWEN2] = {LLM__STAGE_QWEN2, -1, -1, -1},
        [LLM__PRE_SMOLLM] = {LLM__STAGE_NUMBER_EACH, LLM__STAGE_GPT2, -1, -1},
        [LLM__PRE_TEKKEN] = {LLM__STAGE_TEKKEN, -1, -1, -1},
        [LLM__PRE_GPT4O] = {LLM__STAGE_GPT4O, -1, -1, -1},
    };
    if (ok) llm__split_push(&a, n);
    ok = ok && !a.oom;
    for (int i = 0; ok && i < 4 && stages[v->pre][i] >= 0; i++) {
        ok = llm__split_stage(cp, &a, stages[v->pre][i], &b);
        struct llm__split t = a;
        a = b;
        b = t;
    }
    size_t start = 0;
    for (size_t w = 0; ok && w < a.n; w++) {
        size_t m = 0;
        for (size_t i = start; i < start + a.len[w]; i++) {
            char u[4];
            int k = llm__utf8_put(cp[i], u);
            for (int j = 0; j < k; j++) {
                uint8_t byte = (uint8_t)u[j];
                memcpy(word + m, v->bpe_enc[byte], v->bpe_enc_len[byte]);
                m += v->bpe_enc_len[byte];
            }
        }
        ok = llm__merge_encode(v, word, m, out);
        start += a.len[w];
    }
    free(cp);
    free(word);
    free(a.len);
    free(b.len);
    return ok;
}

// SentencePiece over one fragment: optional leading space, every ' ' becomes U+2581.
static bool llm__spm_encode(const struct llm__vocab *v, const char *text, size_t len, bool space_prefix,
                            struct llm__tokbuf *out) {
    size_t n = 0;
    char *esc = malloc(3 * len + 3);
    if (!esc) return false;
    if (space_prefix) { memcpy(esc, "\xe2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(esc + n, "\xe2\x96\x81", 3); n += 3; }
        else esc[n++] = text[i];
    }
    bool ok = llm__merge_encode(v, esc, n, out);
    free(esc);
    return ok;
}

// A piece of the text: raw bytes [off, off + len), or a special token when tok >= 0.
struct llm__frag { int32_t tok; size_t off, len; };

static int llm__frag_cmp(const void *a, const void *b) {
    size_t x = ((const struct llm__frag *)a)->off, y = ((const struct llm__frag *)b)->off;
    return (x > y) - (x < y);
}

// Cuts special tokens out of the text as llama.cpp does: token by token, longest text first
// (control and unknown tokens only when parse_special), each taking its leftmost non-overlapping
// occurrences in what the earlier ones left. The bytes taken are marked in taken[len] instead of
// splitting a list of fragments, which moved the whole list on every cut (quadratic in the
// occurrences): the work is one scan of the text per special token that occurs in it. An
// occurrence [p, p + L) is free when neither taken[p] nor taken[p + L - 1] is set: the earlier
// tokens are at least L bytes long, so one overlapping it without covering an end would lie
// strictly inside it. A token with v->rstrip takes the whitespace after it too (up to the next
// taken byte); such runs are shorter than later tokens, so then every byte of an occurrence is
// checked. Returns the fragments in text order (count in *n_frag), or NULL when out of memory.
static struct llm__frag *llm__special_split(const struct llm__vocab *v, const char *text, size_t len,
                                            bool parse_special, size_t *n_frag) {
    uint8_t *taken = NULL;
    struct llm__frag *hit = NULL, *f = NULL;   // the tokens found; then the fragments
    size_t n_hit = 0, cap_hit = 0;
    for (int k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        if (!parse_special && v->attr[id] != LLM__TOK_USER) continue;
        const char *s = v->text[id].ptr;
        size_t L = (size_t)v->text[id].len;   // >= 1 (llm__vocab_is_special)
        const char *at = llm__memmem(text, len, s, L);
        if (!at) continue;
        if (!taken && !(taken = calloc(len, 1))) goto oom;
        for (size_t p = (size_t)(at - text), next;; p = (size_t)(at - text)) {
            bool busy = taken[p] || taken[p + L - 1];
            for (size_t i = 1; v->rstrip && !busy && i + 1 < L; i++) busy = taken[p + i];
            if (busy) {
                // no occurrence starting before the end of this taken run is free
                next = taken[p + L - 1] ? p + L - 1 : taken[p] ? p : p + 1;
                while (next < len && taken[next]) next++;
            } else {
                if (n_hit == cap_hit) {
                    cap_hit = cap_hit ? 2 * cap_hit : 16;
                    struct llm__frag *g = realloc(hit, cap_hit * sizeof(*g));
                    if (!g) goto oom;
                    hit = g;
                }
                size_t end = p + L;   // the token and the whitespace it strips
                while (v->rstrip && v->rstrip[id] && end < len && !taken[end] && strchr(" \t\n\v\f\r", text[end]) &&
                       text[end])
                    end++;
                hit[n_hit++] = (struct llm__frag){id, p, end - p};
                memset(taken + p, 1, end - p);
                next = end;
            }
            if (next >= len || !(at = llm__memmem(text + next, len - next, s, L))) break;
        }
    }
    if (n_hit) qsort(hit, n_hit, sizeof(*hit), llm__frag_cmp);
    // the tokens with the raw bytes between them: at most 2 n_hit + 1 fragments
    if (!(f = malloc((2 * n_hit + 1) * sizeof(*f)))) goto oom;
    size_t n = 0, pos = 0;
    for (size_t i = 0; i < n_hit; i++) {
        if (hit[i].off > pos) f[n++] = (struct llm__frag){-1, pos, hit[i].off - pos};
        f[n++] = hit[i];
        pos = hit[i].off + hit[i].len;
    }
    if (pos < len || n == 0) f[n++] = (struct llm__frag){-1, pos, len - pos};
    free(taken);
    free(hit);
    *n_frag = n;
    return f;
oom:
    free(taken);
    free(hit);
    return NULL;
}

// Returns the number of tokens, or -1 (message in e).
int llm__tokenize(const struct llm__vocab *v, const char *text, size_t len, int flags, int32_t *ids, int cap,
                  struct llm__err *e) {
    struct llm__tokbuf out = {ids, cap, 0};
    bool add_special = flags & LLM_TOKENIZE_ADD_SPECIAL;
    if (add_special && v->add_bos) llm__tokbuf_push(&out, v->bos);
    size_t n_frag = 0;
    struct llm__frag *frag = len ? llm__special_split(v, text, len, flags & LLM_TOKENIZE_PARSE_SPECIAL, &n_frag) : NULL;
    if (len && !frag) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
    bool prev_special = true, ok = true;
    for (size_t i = 0; ok && i < n_frag; i++) {
        if (frag[i].tok >= 0) {
            llm__tokbuf_push(&out, frag[i].tok);
            prev_special = true;
        } else if (v->type == LLM__VOCAB_SPM) {
            const bool space = frag[i].len > 0 && text[frag[i].off] == ' ';
            const bool prefix = v->prepend == 0 ? prev_special : v->prepend == 1 ? !space : frag[i].off == 0 && !space;
            ok = llm__spm_encode(v, text + frag[i].off, frag[i].len, v->add_space_prefix && prefix, &out);
            prev_special = false;
        } else {
            ok = llm__bpe_encode(v, text + frag[i].off, frag[i].len, &out);
        }
    }
    free(frag);
    if (!ok) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
    if (add_special && v->add_eos) llm__tokbuf_push(&out, v->eos);
    if (out.n == INT_MAX) { llm__fail(e, LLM_ERR_INVALID_ARG, "tokenize: the text is too long"); return -1; }
    return out.n;
}

// --- detokenization ---

// Bytes of a token: special (control, unknown) tokens' text only when special. Returns the
// full length; writes at most size.
int llm__token_piece(const struct llm__vocab *v, int32_t id, bool special, char *buf, size_t size) {
    if (id < 0 || id >= v->n) return -1;
    const struct llm__gguf_str *t = &v->text[id];
    size_t n = 0;
#define LLM__PUT(c) do { if (n < size) buf[n] = (char)(c); n++; } while (0)
    switch (v->attr[id]) {
    case LLM__TOK_CONTROL:
    case LLM__TOK_UNKNOWN:
        if (special) for (size_t i = 0; i < t->len; i++) LLM__PUT(t->ptr[i]);
        break;
    case LLM__TOK_USER:
        for (size_t i = 0; i < t->len; i++) LLM__PUT(t->ptr[i]);
        break;
    case LLM__TOK_UNUSED:
        break;
    case LLM__TOK_BYTE:
        if (v->type == LLM__VOCAB_SPM) {
            unsigned b;
            char hex[3] = {t->len == 6 ? t->ptr[3] : 0, t->len == 6 ? t->ptr[4] : 0, 0};
            if (sscanf(hex, "%2x", &b) == 1) LLM__PUT(b);
            break;
        }
        /* fallthrough */
    default:
        if (v->type == LLM__VOCAB_SPM) {
            for (size_t i = 0; i < t->len; i++) {
                if (i + 2 < t->len && memcmp(t->ptr + i, "\xe2\x96\x81", 3) == 0) { LLM__PUT(' '); i += 2; }
                else LLM__PUT(t->ptr[i]);
            }
        } else {
            // each code point of the text stands for one byte
            for (size_t off = 0; off < t->len;) {
                size_t at = off;
                uint32_t cp = llm__utf8_next((const uint8_t *)t->ptr, t->len, &off);
                if (cp < LLM__ARRAY_LEN(v->bpe_byte) && v->bpe_byte[cp] >= 0)
                    LLM__PUT(v->bpe_byte[cp]);
                else
                    for (size_t k = at; k < off; k++) LLM__PUT(t->ptr[k]);
            }
        }
        break;
    }
#undef LLM__PUT
    return (int)LLM__MIN(n, (size_t)INT_MAX);
}

// Whether the first text of a detokenization loses its leading space: SentencePiece adds one.
static bool llm__piece_drop_space(const struct llm__vocab *v, int32_t id) {
    return v->type == LLM__VOCAB_SPM && v->add_space_prefix && v->attr[id] != LLM__TOK_CONTROL &&
           v->attr[id] != LLM__TOK_UNKNOWN && v->attr[id] != LLM__TOK_USER;
}

// Streams pieces as whole characters: valid UTF-8 goes out once complete, anything else as U+FFFD.
void llm__stream_feed(struct llm_text_stream *u, const char *s, size_t n, struct llm__outbuf *out, bool flush) {
    for (size_t i = 0; i < n || u->n_pending > 0;) {
        while (u->n_pending < 4 && i < n) u->pending[u->n_pending++] = (unsigned char)s[i++];
        if (u->n_pending == 0) break;
        int l = llm__utf8_char(u->pending, (size_t)u->n_pending);
        if (l == 0 && i == n && !flush) break;   // wait for the rest of the character
        if (l <= 0) { llm__outbuf_put(out, "\xEF\xBF\xBD", 3); l = 1; }
        else llm__outbuf_put(out, u->pending, (size_t)l);
        memmove(u->pending, u->pending + l, (size_t)(u->n_pending - l));
        u->n_pending -= l;
    }
}

// llm.h's truncation rule, for every function that hands out text: what fits of o into buf
// (NUL-terminated when size > 0), and the whole length; -1 when memory ran out. Frees o.
int llm__outbuf_emit(struct llm__outbuf *o, char *buf, size_t size) {
    bool ok = !o->fail && o->n < INT_MAX;
    if (ok && size) {
        size_t k = LLM__MIN(o->n, size - 1);
        if (k) memcpy(buf, o->p, k);
        buf[k] = 0;
    }
    free(o->p);
    return ok ? (int)o->n : -1;
}

// A token's bytes appended to o (special tokens' text only when special); false: out of memory.
static bool llm__piece_put(const struct llm__vocab *v, int32_t id, bool special, bool *first, struct llm__outbuf *o,
                           struct llm_text_stream *stream) {
    char small[64];
    int k = llm__token_piece(v, id, special, small, sizeof(small));
    char *piece = small;
    if (k > (int)sizeof(small)) {
        if (!(piece = malloc((size_t)k))) return false;
        llm__token_piece(v, id, special, piece, (size_t)k);
    }
    int skip = 0;   // the first text loses SentencePiece's space
    if (k > 0 && *first) {
        *first = false;
        skip = llm__piece_drop_space(v, id) && piece[0] == ' ';
    }
    if (stream) llm__stream_feed(stream, piece + skip, (size_t)(k - skip), o, false);
    else llm__outbuf_put(o, piece + skip, (size_t)(k - skip));
    if (piece != small) free(piece);
    return true;
}

// The text of ids appended to o; false when an id is out of range (o->fail: out of memory).
bool llm__detokenize(const struct llm__vocab *v, const int32_t *ids, int n, int flags, struct llm__outbuf *o) {
    bool first = true;
    if ((flags & LLM_DETOKENIZE_SKIP_BOS) && n > 0 && v->bos >= 0 && ids[0] == v->bos) { ids++; n--; }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n) return false;
        if (!llm__piece_put(v, ids[i], flags & LLM_DETOKENIZE_SPECIAL, &first, o, NULL)) o->fail = true;
    }
    return true;
}

// One token into a text stream: the whole characters it completes are appended to o. An id out
// of range adds nothing. st->n_tokens counts the tokens from the first one with text: that one
// loses SentencePiece's space, as in llm__detokenize (a BOS before it has no text).
void llm__stream_push(const struct llm__vocab *v, struct llm_text_stream *st, int32_t id, int flags,
                      struct llm__outbuf *o) {
    if (id < 0 || id >= v->n) return;
    bool first = st->n_tokens == 0;
    if (!llm__piece_put(v, id, flags & LLM_DETOKENIZE_SPECIAL, &first, o, st)) o->fail = true;
    if (!first) st->n_tokens++;
}

// Looks a string up in a table of ids + 1 into strs; -1 when absent.
int32_t llm__strtab_find(const uint32_t *ht, uint32_t mask, const struct llm__gguf_str *strs, const char *s,
                         size_t n) {
    for (uint32_t i = (uint32_t)llm__hash(s, n) & mask;; i = (i + 1) & mask) {
        uint32_t id = ht[i];
        if (!id) return -1;
        const struct llm__gguf_str *t = &strs[id - 1];
        if (t->len == n && memcmp(t->ptr, s, n) == 0) return (int32_t)(id - 1);
    }
}

// Builds such a table; of duplicate strings the first wins (as in llama.cpp). NULL: no memory.
uint32_t *llm__strtab_build(const struct llm__gguf_str *strs, int n, uint32_t *mask) {
    uint32_t cap = 2;
    while (cap < 2 * (uint32_t)n) cap <<= 1;
    uint32_t *ht = calloc(cap, sizeof(uint32_t));
    if (!ht) return NULL;
    *mask = cap - 1;
    for (int i = 0; i < n; i++) {
        const struct llm__gguf_str *t = &strs[i];
        uint32_t h = (uint32_t)llm__hash(t->ptr, t->len) & *mask;
        bool dup = false;
        for (; ht[h]; h = (h + 1) & *mask) {
            const struct llm__gguf_str *o = &strs[ht[h] - 1];
            if (o->len == t->len && memcmp(o->ptr, t->ptr, t->len) == 0) { dup = true; break; }
        }
        if (!dup) ht[h] = (uint32_t)i + 1;
    }
    return ht;
}

// tokenizer.ggml.pre values and the pre-tokenizer each stands for (the names llama.cpp gives
// the same splitting rules).
LLM__INTERNAL const struct llm__pre_name llm__pre_names[LLM__N_PRE_NAMES] = {
    {"default", LLM__PRE_DEFAULT, false, false},
    {"llama3", LLM__PRE_LLAMA3, true, true},     {"llama-v3", LLM__PRE_LLAMA3, true, true},
    {"llama-bpe", LLM__PRE_LLAMA3, true, true},  {"falcon3", LLM__PRE_LLAMA3, true, true},
    {"gpt-2", LLM__PRE_GPT2, false, false},      {"phi-2", LLM__PRE_GPT2, false, false},
    {"mpt", LLM__PRE_GPT2, false, false},        {"olmo", LLM__PRE_GPT2, false, false},
    {"qwen2", LLM__PRE_QWEN2, false, false},     {"stablelm2", LLM__PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", LLM__PRE_QWEN2, false, false},
    {"smollm", LLM__PRE_SMOLLM, false, false},   {"starcoder", LLM__PRE_SMOLLM, false, false},
    {"tekken", LLM__PRE_TEKKEN, true, true},     {"gpt-4o", LLM__PRE_GPT4O, false, false},
    {"llama4", LLM__PRE_GPT4O, false, false},
};
