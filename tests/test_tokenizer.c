// Tokenization of real vocabularies (llama.cpp's vocab-only GGUF files, fetched by
// tests/fixtures.sh into $LLM_VOCAB_DIR): llama-spm (Llama 2, SentencePiece), llama-bpe
// (Llama 3), qwen2 (Qwen2 and Qwen3: the same pre-tokenizer), gpt-2, phi-3 (SentencePiece, and
// the whitespace after special tokens dropped); and the vocabulary of a real model, Gemma 3's
// SentencePiece of 262,144 tokens ($LLM_REAL_MODELS/gemma-3-270m-q4_k_m.gguf, only its vocabulary
// read). A missing file or variable is a failure.
//   a. llama.cpp's own test vectors (the .inp/.out files beside each vocabulary), flags 0;
//   b. the corpus of tests/tokenizer against llama.cpp's llama-tokenize (goldens made by
//      tests/tokenizer/make_goldens.sh): ADD_SPECIAL, and ADD_SPECIAL | PARSE_SPECIAL;
//   c. round trips text -> ids -> text -> ids of valid UTF-8 text;
//   d. streaming detokenization: valid UTF-8 always, the text of llm_detokenize;
//   e. control-token text with and without PARSE_SPECIAL, and detokenized with and without
//      DETOKENIZE_SPECIAL;
//   f. BOS with ADD_SPECIAL (SentencePiece);
//   g. special tokens cut out of random texts as the former (and llama.cpp's) splitting of a
//      list of fragments cuts them;
//   h. that cutting is linear in the occurrences of special tokens (a ratio of two times);
//   i. the bound on the bytes one token stands for: sound on the corpus, absent when a byte can
//      be dropped.
#include "../llm.c"
#include "test.h"

static const char *const vocab_names[] = {"llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3"};

// ---- files -------------------------------------------------------------------------------

// The whole file, NUL-terminated (not counted in *len); NULL when it cannot be read.
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap + 1);
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

// The cases of an .inp file: each is followed by "\n__ggml_vocab_test__\n" (split as llama.cpp's
// tests/test-tokenizer-0.cpp splits them). The texts point into the file's buffer.
struct cases {
    char *buf;
    int n;
    const char **text;
    size_t *len;
};

static int cases_load(struct cases *c, const char *path) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t size;
    memset(c, 0, sizeof *c);
    if (!(c->buf = read_file(path, &size))) return 0;
    size_t cap = 16;
    c->text = malloc(cap * sizeof *c->text);
    c->len = malloc(cap * sizeof *c->len);
    for (size_t pos = 0; pos < size;) {
        const char *next = NULL;
        for (size_t i = pos; i + sep_len <= size && !next; i++)
            if (memcmp(c->buf + i, sep, sep_len) == 0) next = c->buf + i;
        size_t end = next ? (size_t)(next - c->buf) : size;
        if ((size_t)c->n == cap) {
            cap *= 2;
            c->text = realloc(c->text, cap * sizeof *c->text);
            c->len = realloc(c->len, cap * sizeof *c->len);
        }
        c->text[c->n] = c->buf + pos;
        c->len[c->n++] = end - pos;
        pos = end + sep_len;
    }
    return 1;
}

static void cases_free(struct cases *c) {
    free(c->buf);
    free(c->text);
    free(c->len);
}

// Token ids, one line per case, separated by spaces (llama.cpp's .out files have a leading one).
struct golden {
    int n;
    int32_t **ids;
    int *n_ids;
};

static int golden_load(struct golden *g, const char *path) {
    size_t size;
    char *buf = read_file(path, &size);
    memset(g, 0, sizeof *g);
    if (!buf) return 0;
    int lines = 0;
    for (size_t i = 0; i < size; i++) lines += buf[i] == '\n';
    if (size && buf[size - 1] != '\n') lines++;
    g->ids = calloc(lines ? lines : 1, sizeof *g->ids);
    g->n_ids = calloc(lines ? lines : 1, sizeof *g->n_ids);
    char *p = buf;
    for (int l = 0; l < lines; l++) {
        char *eol = strchr(p, '\n');
        if (eol) *eol = 0;
        g->ids[l] = malloc((strlen(p) / 2 + 1) * sizeof **g->ids);   // a digit and a space per id at least
        char *q = p, *end;
        for (long v; (v = strtol(q, &end, 10)), end != q; q = end) g->ids[l][g->n_ids[l]++] = (int32_t)v;
        p = eol ? eol + 1 : p + strlen(p);
    }
    g->n = lines;
    free(buf);
    return 1;
}

static void golden_free(struct golden *g) {
    for (int i = 0; i < g->n; i++) free(g->ids[i]);
    free(g->ids);
    free(g->n_ids);
}

// ---- the API, with buffers that grow -------------------------------------------------------

// The ids of text (*n of them), or NULL with *n = -1 when llm_tokenize fails.
static int32_t *tokenize(llm_engine *e, const char *text, size_t len, int flags, int *n) {
    int cap = (int)len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    int k = llm_tokenize(e, text, len, flags, ids, cap);
    if (k > cap) {
        free(ids);
        ids = malloc(k * sizeof *ids);
        cap = k;
        k = llm_tokenize(e, text, len, flags, ids, cap);
    }
    if (k < 0 || k > cap) {
        free(ids);
        *n = -1;
        return NULL;
    }
    *n = k;
    return ids;
}

// The text of ids (*len bytes, NUL-terminated), or NULL with *len = -1.
static char *detokenize(llm_engine *e, const int32_t *ids, int n, int flags, int *len) {
    size_t cap = 64 + (size_t)n * 16;
    char *buf = malloc(cap + 1);
    int k = llm_detokenize(e, ids, n, flags, buf, cap);
    if (k >= 0 && (size_t)k > cap) {
        free(buf);
        cap = (size_t)k;
        buf = malloc(cap + 1);
        k = llm_detokenize(e, ids, n, flags, buf, cap);
    }
    if (k < 0 || (size_t)k > cap) {
        free(buf);
        *len = -1;
        return NULL;
    }
    buf[k] = 0;
    *len = k;
    return buf;
}

// The text of ids fed one at a time through llm_text_stream_push (flags 0), then flushed; NULL
// with *len = -1 when a call fails or writes more than the header says it needs.
static char *stream_text(llm_engine *e, const int32_t *ids, int n, int *len) {
    struct llm_text_stream st;
    llm_text_stream_reset(&st);
    size_t cap = 256, used = 0;
    char *out = malloc(cap);
    for (int i = 0; i <= n; i++) {
        char piece[8];
        int plen = i < n ? llm_token_to_piece(e, ids[i], piece, sizeof piece) : 0;
        size_t room = 4 * (size_t)(plen > 0 ? plen : 0) + 16;
        if (plen < 0) goto fail;
        if (cap - used < room) {
            cap = 2 * cap + room;
            char *bigger = realloc(out, cap);
            if (!bigger) goto fail;
            out = bigger;
        }
        int k = i < n ? llm_text_stream_push(e, &st, ids[i], 0, out + used, cap - used)
                      : llm_text_stream_flush(&st, out + used, cap - used);
        if (k < 0 || (size_t)k >= room) goto fail;
        used += (size_t)k;
    }
    out[used] = 0;
    *len = (int)used;
    return out;
fail:
    free(out);
    *len = -1;
    return NULL;
}

// ---- UTF-8 -------------------------------------------------------------------------------

// The length of the UTF-8 character at s (n bytes left), or 0 when none starts there:
// no overlong forms, no surrogates, nothing above U+10FFFF.
static int utf8_char(const unsigned char *s, size_t n) {
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (s[0] < 0x80) return 1;
    int len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!len || s[0] > 0xF4 || (size_t)len > n) return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return len;
}

static int utf8_valid(const char *s, size_t n) {
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = (size_t)utf8_char((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

static int contains(const char *s, size_t n, const char *part) {
    size_t m = strlen(part);
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s + i, part, m) == 0) return 1;
    return 0;
}

// The characters of s other than U+FFFD, without the bytes that form none (written to out,
// which has room for n bytes; returns the length).
static size_t utf8_clean(const char *s, size_t n, char *out) {
    size_t m = 0;
    for (size_t i = 0, k; i < n; i += k ? k : 1) {
        k = (size_t)utf8_char((const unsigned char *)s + i, n - i);
        if (k && !(k == 3 && memcmp(s + i, "\xEF\xBF\xBD", 3) == 0)) memcpy(out + m, s + i, k), m += k;
    }
    return m;
}

// ---- messages ----------------------------------------------------------------------------

enum { SHOW = 200 };

static const char *show_text(const char *s, size_t n, char buf[SHOW + 8]) {
    int raw = utf8_valid(s, n);   // UTF-8 text is shown as it is, other bytes as \xNN
    size_t m = 0;
    for (size_t i = 0; i < n && m < SHOW; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') m += (size_t)snprintf(buf + m, 8, "\\n");
        else if (c == '\t') m += (size_t)snprintf(buf + m, 8, "\\t");
        else if (c == '\r') m += (size_t)snprintf(buf + m, 8, "\\r");
        else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !raw)) m += (size_t)snprintf(buf + m, 8, "\\x%02x", c);
        else buf[m++] = (char)c;
    }
    if (m >= SHOW) memcpy(buf + m, "...", 3), m += 3;
    buf[m] = 0;
    return buf;
}

static const char *show_ids(const int32_t *ids, int n, char buf[SHOW + 8]) {
    size_t m = 0;
    buf[0] = 0;
    if (n < 0) return "(error)";
    for (int i = 0; i < n && m < SHOW; i++) m += (size_t)snprintf(buf + m, SHOW + 8 - m, "%s%d", i ? " " : "", ids[i]);
    if (m >= SHOW) strcpy(buf + SHOW, "...");
    return buf;
}

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && na >= 0 && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

// ---- the checks --------------------------------------------------------------------------

// a/b: the ids of every case with flags equal the golden lines.
static void check_golden(llm_engine *e, const char *what, const struct cases *c, const struct golden *g, int flags) {
    EXPECT(c->n == g->n, "%s: %d cases, %d golden lines", what, c->n, g->n);
    for (int i = 0; i < c->n && i < g->n; i++) {
        int n;
        int32_t *ids = tokenize(e, c->text[i], c->len[i], flags, &n);
        char t[SHOW + 8], a[SHOW + 8], b[SHOW + 8];
        EXPECT(same_ids(ids, n, g->ids[i], g->n_ids[i]), "%s case %d '%s': got [%s], llama.cpp [%s]", what, i,
               show_text(c->text[i], c->len[i], t), show_ids(ids, n, a), show_ids(g->ids[i], g->n_ids[i], b));
        free(ids);
    }
}

// c/d: round trips of valid UTF-8 text; the streamed text of every case.
static void check_text(llm_engine *e, const char *name, int spm, const struct cases *c, int n_valid) {
    for (int i = 0; i < c->n; i++) {
        const char *text = c->text[i];
        size_t len = c->len[i];
        char t[SHOW + 8], a[SHOW + 8], b[SHOW + 8];
        int n, n2, dlen = -1, slen = -1;
        int32_t *ids = tokenize(e, text, len, 0, &n);
        char *dt = ids ? detokenize(e, ids, n, 0, &dlen) : NULL;
        char *st = ids ? stream_text(e, ids, n, &slen) : NULL;
        EXPECT(ids && dt && st, "%s case %d '%s': tokenize %d, detokenize %s, stream %s", name, i,
               show_text(text, len, t), n, dt ? "ok" : "failed", st ? "ok" : "failed");
        if (!ids || !dt || !st) goto next;

        // c. Byte-level BPE gives every valid UTF-8 text back exactly. SentencePiece (add_space_prefix)
        // puts a space in front of the text and detokenization drops it again, so leading spaces
        // come back too; but it turns spaces into U+2581 before it looks up pieces, so a U+2581
        // of the text itself comes back as a space.
        int roundtrip = i < n_valid && !(spm && contains(text, len, "\xE2\x96\x81"));
        if (roundtrip) {
            EXPECT((size_t)dlen == len && memcmp(dt, text, len) == 0, "%s case %d: '%s' detokenizes to '%s'",
                   name, i, show_text(text, len, t), show_text(dt, (size_t)dlen, a));
            int32_t *ids2 = tokenize(e, dt, (size_t)dlen, 0, &n2);
            EXPECT(same_ids(ids, n, ids2, n2), "%s case %d '%s': [%s], then [%s] from the detokenized text", name, i,
                   show_text(text, len, t), show_ids(ids, n, a), show_ids(ids2, n2, b));
            free(ids2);
        }

        // d. The stream is whole, valid UTF-8 and is the text of llm_detokenize: its characters
        // where that is valid UTF-8; where it is not, U+FFFD in place of the bytes that form no
        // character (how many U+FFFD is the stream's choice). llama.cpp's byte-level BPE turns
        // invalid input into U+FFFD before it tokenizes (and reads the overlong C0 AF as "/"), so
        // its ids often detokenize to valid text; SentencePiece keeps the bytes as byte tokens.
        EXPECT(utf8_valid(st, (size_t)slen), "%s case %d '%s': the stream is not valid UTF-8: '%s'", name, i,
               show_text(text, len, t), show_text(st, (size_t)slen, a));
        if (utf8_valid(dt, (size_t)dlen)) {
            // The header promises the stream is llm_detokenize's text (both drop the space
            // SentencePiece puts in front of the first word).
            int same = slen == dlen && memcmp(st, dt, (size_t)dlen) == 0;
            EXPECT(same, "%s case %d '%s': streamed '%s', detokenized '%s'", name, i, show_text(text, len, t),
                   show_text(st, (size_t)slen, a), show_text(dt, (size_t)dlen, b));
            // The same behind a BOS, which has no text: the first text is still the one that loses
            // SentencePiece's space (the stream took the first token for it; found by fuzz_tokenizer).
            int nb, blen = -1, bslen = -1;
            int32_t *bids = tokenize(e, text, len, LLM_TOKENIZE_ADD_SPECIAL, &nb);
            char *bdt = bids ? detokenize(e, bids, nb, 0, &blen) : NULL, *bst = bids ? stream_text(e, bids, nb, &bslen) : NULL;
            EXPECT(bdt && bst && bslen == blen && memcmp(bst, bdt, (size_t)blen) == 0,
                   "%s case %d '%s' with BOS: streamed '%s', detokenized '%s'", name, i, show_text(text, len, t),
                   bst ? show_text(bst, (size_t)bslen, a) : "(failed)", bdt ? show_text(bdt, (size_t)blen, b) : "(failed)");
            free(bids);
            free(bdt);
            free(bst);
        } else {
            EXPECT(contains(st, (size_t)slen, "\xEF\xBF\xBD"), "%s case %d '%s': no U+FFFD in the stream '%s'", name, i,
                   show_text(text, len, t), show_text(st, (size_t)slen, a));
            char *c1 = malloc((size_t)dlen + 1), *c2 = malloc((size_t)slen + 1);
            size_t m1 = utf8_clean(dt, (size_t)dlen, c1), m2 = utf8_clean(st, (size_t)slen, c2);
            EXPECT(m1 == m2 && memcmp(c1, c2, m1) == 0, "%s case %d: streamed '%s', detokenized '%s'", name, i,
                   show_text(st, (size_t)slen, a), show_text(dt, (size_t)dlen, b));
            free(c1);
            free(c2);
        }
    next:
        free(ids);
        free(dt);
        free(st);
    }
}

// e. Control-token text: one control token with PARSE_SPECIAL where the vocabulary has it
// (ids as llama.cpp gives them), otherwise several ids none of which is a control token.
static void check_special(llm_engine *e, const char *name) {
    static const struct { const char *vocab, *text; int32_t id; } cases[] = {
        {"llama-bpe", "<|begin_of_text|>", 128000}, {"llama-bpe", "<|eot_id|>", 128009},
        {"llama-bpe", "<|im_start|>", -1},          {"qwen2", "<|im_start|>", 151644},
        {"qwen2", "<|im_end|>", 151645},            {"qwen2", "<|begin_of_text|>", -1},
        {"phi-3", "<|end|>", 32007},                {"phi-3", "<|user|>", 32010},
        {"phi-3", "<|im_start|>", -1},              {"gemma-3", "<start_of_turn>", 105},
        {"gemma-3", "<end_of_turn>", 106},          {"gemma-3", "<|im_start|>", -1},
    };
    char a[SHOW + 8];
    for (size_t i = 0; i < LLM__ARRAY_LEN(cases); i++) {
        if (strcmp(cases[i].vocab, name) != 0) continue;
        for (int parse = 0; parse <= 1; parse++) {
            int n, controls = 0;
            int32_t *ids = tokenize(e, cases[i].text, strlen(cases[i].text), parse ? LLM_TOKENIZE_PARSE_SPECIAL : 0, &n);
            for (int k = 0; k < n; k++) controls += llm_token_is_control(e, ids[k]) != 0;
            if (parse && cases[i].id >= 0)
                EXPECT(n == 1 && ids[0] == cases[i].id && controls == 1, "%s: '%s' with PARSE_SPECIAL: [%s], not the control token %d",
                       name, cases[i].text, show_ids(ids, n, a), cases[i].id);
            else
                EXPECT(n > 1 && controls == 0, "%s: '%s' with flags %d: [%s], %d control tokens", name, cases[i].text,
                       parse ? LLM_TOKENIZE_PARSE_SPECIAL : 0, show_ids(ids, n, a), controls);
            free(ids);
        }
    }

    // A chat turn: its control tokens are written back with DETOKENIZE_SPECIAL only.
    const char *turn = strcmp(name, "qwen2") == 0       ? "<|im_start|>user\nhi<|im_end|>"
                       : strcmp(name, "llama-bpe") == 0 ? "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                       : strcmp(name, "gemma-3") == 0   ? "<start_of_turn>user\nhi<end_of_turn>"
                                                        : NULL;
    const char *plain = strcmp(name, "llama-bpe") == 0 ? "user\n\nhi" : "user\nhi";
    if (turn) {
        int n, len1, len2;
        int32_t *ids = tokenize(e, turn, strlen(turn), LLM_TOKENIZE_PARSE_SPECIAL, &n);
        char *with = ids ? detokenize(e, ids, n, LLM_DETOKENIZE_SPECIAL, &len1) : NULL;
        char *without = ids ? detokenize(e, ids, n, 0, &len2) : NULL;
        EXPECT(with && strcmp(with, turn) == 0, "%s: '%s' detokenized with DETOKENIZE_SPECIAL: '%s'", name, turn, with ? with : "(error)");
        EXPECT(without && strcmp(without, plain) == 0, "%s: '%s' detokenized without: '%s'", name, turn, without ? without : "(error)");
        free(ids);
        free(with);
        free(without);
    }
}

// f. SentencePiece asks for BOS: ADD_SPECIAL puts it first, flags 0 do not; DETOKENIZE_SKIP_BOS
// drops it again.
static void check_bos(llm_engine *e, const char *name) {
    struct llm_model_info info;
    llm_get_model_info(e, &info);
    EXPECT(info.bos_id >= 0 && info.add_bos, "%s: bos_id %d, add_bos %d", name, info.bos_id, info.add_bos);
    const char *text = "Hello world";
    int n0, n1, len;
    int32_t *ids0 = tokenize(e, text, strlen(text), 0, &n0);
    int32_t *ids1 = tokenize(e, text, strlen(text), LLM_TOKENIZE_ADD_SPECIAL, &n1);
    char a[SHOW + 8];
    EXPECT(n1 > 0 && ids1[0] == info.bos_id, "%s: '%s' with ADD_SPECIAL: [%s]", name, text, show_ids(ids1, n1, a));
    EXPECT(n0 > 0 && ids0[0] != info.bos_id, "%s: '%s' with flags 0: [%s]", name, text, show_ids(ids0, n0, a));
    EXPECT(n1 == n0 + 1 && same_ids(ids0, n0, ids1 + 1, n1 - 1), "%s: ADD_SPECIAL adds more than BOS", name);
    char *dt = ids1 ? detokenize(e, ids1, n1, LLM_DETOKENIZE_SKIP_BOS, &len) : NULL;
    EXPECT(dt && strcmp(dt, text) == 0, "%s: [%s] with SKIP_BOS: '%s'", name, show_ids(ids1, n1, a), dt ? dt : "(error)");
    free(ids0);
    free(ids1);
    free(dt);
}

// g. Cutting special tokens out of the text against the way it was first written (and is still
// written in llama.cpp): a list of fragments, each token splitting the raw ones it occurs in.
// Random texts over a small alphabet and overlapping special tokens (longest first, ties by id,
// as llm__vocab_mark_special orders them), parse_special on and off.
static struct llm__frag *ref_special_split(const struct llm__vocab *v, const char *text, size_t len, bool parse_special,
                                           size_t *n_frag) {
    size_t n = 1;
    struct llm__frag *f = malloc((2 * len + 1) * sizeof(*f));
    f[0] = (struct llm__frag){-1, 0, len};
    for (int k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        if (!parse_special && v->attr[id] != LLM__TOK_USER) continue;
        const struct llm__gguf_str *t = &v->text[id];
        for (size_t i = 0; i < n; i++) {
            if (f[i].tok >= 0) continue;
            const char *hit = llm__memmem(text + f[i].off, f[i].len, t->ptr, t->len);
            if (!hit) continue;
            size_t at = (size_t)(hit - text), end = f[i].off + f[i].len;
            struct llm__frag left = {-1, f[i].off, at - f[i].off}, tok = {id, at, t->len},
                             right = {-1, at + t->len, end - at - t->len};
            size_t add = (left.len > 0) + 1 + (right.len > 0), j = i;
            memmove(&f[i + add], &f[i + 1], (n - i - 1) * sizeof(*f));
            if (left.len > 0) f[j++] = left;
            f[j++] = tok;
            if (right.len > 0) f[j] = right;
            n += add - 1;
            i = j - 1;
        }
    }
    *n_frag = n;
    return f;
}

static void check_special_split_reference(void) {
    static const char *const texts[] = {"ab", "aba", "ba", "bab", "abab", "b", "aa", "cab", "abc", "bcb", "aab", "c"};
    enum { NT = sizeof(texts) / sizeof(texts[0]) };
    struct llm__gguf_str text[NT];
    uint8_t attr[NT];
    int32_t special[NT];
    for (int i = 0; i < NT; i++) {
        text[i] = (struct llm__gguf_str){texts[i], strlen(texts[i])};
        attr[i] = i % 3 == 0 ? LLM__TOK_CONTROL : LLM__TOK_USER;
        special[i] = i;
    }
    for (int i = 1; i < NT; i++)   // longest first, then lower id
        for (int j = i; j > 0 && (text[special[j]].len > text[special[j - 1]].len ||
                                  (text[special[j]].len == text[special[j - 1]].len && special[j] < special[j - 1])); j--) {
            int32_t t = special[j];
            special[j] = special[j - 1];
            special[j - 1] = t;
        }
    struct llm__vocab v = {0};
    v.n = NT;
    v.text = text;
    v.attr = attr;
    v.special = special;
    v.n_special = NT;
    unsigned long long s = 7;
    int same = 0, cases = 0;
    char buf[64], a[SHOW + 8];
    for (int c = 0; c < 4000; c++) {
        size_t len = 1 + test_rng_next(&s) % 48;
        for (size_t i = 0; i < len; i++) buf[i] = "abc"[test_rng_next(&s) % 3];
        for (int parse = 0; parse <= 1; parse++) {
            size_t n1 = 0, n2 = 0;
            struct llm__frag *f1 = llm__special_split(&v, buf, len, parse, &n1), *f2 = ref_special_split(&v, buf, len, parse, &n2);
            bool eq = f1 && n1 == n2;
            for (size_t i = 0; eq && i < n1; i++) eq = f1[i].tok == f2[i].tok && f1[i].off == f2[i].off && f1[i].len == f2[i].len;
            if (!eq && cases - same < 3) EXPECT(eq, "special tokens cut out of '%s' (parse_special %d) differ from the reference",
                                                show_text(buf, len, a), parse);
            same += eq;
            cases++;
            free(f1);
            free(f2);
        }
    }
    EXPECT(same == cases, "%d of %d texts cut as the reference cuts them", same, cases);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The least time of 3 tokenizations (other work on the machine only adds time); *n: the ids.
static double tokenize_time(llm_engine *e, const char *text, size_t len, int *n) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        *n = llm_tokenize(e, text, len, LLM_TOKENIZE_PARSE_SPECIAL, NULL, 0);
        best = fmin(best, now_s() - t0);
    }
    return best;
}

// h. Cutting special tokens is linear in their occurrences: N and 4N groups
// "<|im_start|>a<|im_end|>b" (Qwen2's control tokens, PARSE_SPECIAL; user-defined tokens, always
// recognised, go through the same cutting). Linear work takes about 4 times as long for 4N; the
// former list splitting moved the whole list on every cut, 16 times as long. The bound, 8, leaves
// room for noise; nothing absolute is timed. Both texts (0.8 and 3 MB) are larger than the caches,
// so that the ratio is not one of a text that fits in them and one that does not.
static void check_special_split_linear(llm_engine *e) {
    const char group[] = "<|im_start|>a<|im_end|>b";
    const size_t glen = sizeof(group) - 1, n_groups = 32000;
    char *text = malloc(4 * n_groups * glen);
    for (size_t i = 0; i < 4 * n_groups; i++) memcpy(text + i * glen, group, glen);
    int n1 = 0, n4 = 0;
    double t1 = tokenize_time(e, text, n_groups * glen, &n1), t4 = tokenize_time(e, text, 4 * n_groups * glen, &n4);
    EXPECT(n1 == 4 * (int)n_groups && n4 == 16 * (int)n_groups, "qwen2: %d and %d tokens for %zu and %zu groups of 4",
           n1, n4, n_groups, 4 * n_groups);
    EXPECT(t4 < 8 * t1, "qwen2: 4 times the special tokens took %.1f times as long (%.4f s, %.4f s): not linear", t4 / t1,
           t1, t4);
    free(text);
}

// i. The bound on the bytes a token stands for (llm__vocab_token_bound), which lets a request
// with too long a text be refused before it is tokenized: every real vocabulary has one, and
// no text of the corpus has fewer tokens than it allows. A vocabulary in which a byte can be
// dropped has none: a byte-level BPE one without a byte's token or with a merge that makes no
// token, a SentencePiece one with neither a byte token for every byte nor an unknown token.
static void check_token_bound(llm_engine *e, const char *name, const struct cases *all) {
    const struct llm__vocab *v = &e->vocab;
    size_t k = v->max_token_bytes;
    EXPECT(k > 0, "%s: no bound on the bytes of a token", name);
    if (!k) return;
    int below = 0;
    for (int c = 0; c < all->n; c++)
        for (int parse = 0; parse <= 1; parse++) {
            int n = llm_tokenize(e, all->text[c], all->len[c], parse ? LLM_TOKENIZE_PARSE_SPECIAL : 0, NULL, 0);
            if ((size_t)n * k < all->len[c] && below++ < 3)
                EXPECT(0, "%s: corpus case %d: %d tokens for %zu bytes, at most %zu bytes a token", name, c, n, all->len[c], k);
        }
    EXPECT(below == 0, "%s: %d texts with fewer tokens than the bound allows", name, below);
    // the text of the token that stands for the most bytes is one token: the bound is not below it
    int32_t best = -1;
    int best_len = 0;
    char piece[1024], a[SHOW + 8];
    for (int32_t id = 0; id < v->n; id++) {
        int l = llm_token_to_piece(e, id, piece, sizeof piece);
        if (l > best_len && l < (int)sizeof piece) { best = id; best_len = l; }
    }
    llm_token_to_piece(e, best, piece, sizeof piece);
    int n = llm_tokenize(e, piece, (size_t)best_len, 0, NULL, 0);
    EXPECT(best >= 0 && n >= 1 && (size_t)n * k >= (size_t)best_len, "%s: '%s' (token %d) is %d tokens for %d bytes, at most "
           "%zu bytes a token", name, show_text(piece, (size_t)best_len, a), best, n, best_len, k);
    struct llm__vocab w = *v;
    if (v->type == LLM__VOCAB_SPM) {
        w.unk = -1;
        llm__vocab_token_bound(&w);
        EXPECT(w.max_token_bytes == k, "%s: every byte has a byte token, yet no bound without <unk>", name);
        w.byte_tok['A'] = -1;
        llm__vocab_token_bound(&w);
        EXPECT(w.max_token_bytes == 0, "%s: a bound without <0x41> and without <unk>", name);
        w.unk = v->unk;
        llm__vocab_token_bound(&w);
        EXPECT(w.max_token_bytes == k, "%s: no bound with <unk> for the missing byte token", name);
        return;
    }
    // the token of 'A' renamed: the lookup of "A" finds nothing
    struct llm__gguf_str *text = malloc((size_t)v->n * sizeof(*text));
    memcpy(text, v->text, (size_t)v->n * sizeof(*text));
    int32_t tok_a = llm__vocab_find(v, "A", 1);
    EXPECT(tok_a >= 0, "%s: no token 'A'", name);
    if (tok_a >= 0) text[tok_a] = (struct llm__gguf_str){"\x01\x02\x03", 3};
    w.text = text;
    llm__vocab_token_bound(&w);
    EXPECT(w.max_token_bytes == 0, "%s: a bound without the token of byte 'A'", name);
    w.text = v->text;
    // a merge whose result is no token
    struct llm__gguf_str *merges = malloc((size_t)v->n_merges * sizeof(*merges));
    memcpy(merges, v->merges, (size_t)v->n_merges * sizeof(*merges));
    merges[v->n_merges / 2] = (struct llm__gguf_str){"\x01 \x02", 3};
    w.merges = merges;
    llm__vocab_token_bound(&w);
    EXPECT(w.max_token_bytes == 0, "%s: a bound with a merge that makes no token", name);
    w.merges = v->merges;
    llm__vocab_token_bound(&w);
    EXPECT(w.max_token_bytes == k, "%s: the bound is not the same again (%zu, %zu)", name, w.max_token_bytes, k);
    free(text);
    free(merges);
}

// Everything above for one vocabulary (a vocab-only file or a model); own_vectors: it has
// llama.cpp's .inp/.out beside it.
static void check_vocab(const char *name, const char *path, const struct cases *all, int n_valid, int own_vectors) {
    char err[512] = "";
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "%s: no such file (%s)", path, strncmp(name, "pre-", 4) ? "sh tests/fixtures.sh fetches it" : "make models");
    if (!f) return;
    fclose(f);
    struct llm_engine_params params = llm_engine_params_default();
    params.model_path = path;
    params.n_threads = 1;
    params.load = LLM_LOAD_VOCAB;
    llm_engine *e = llm_engine_create(&params, err, sizeof err);
    EXPECT(e != NULL, "%s: %s", path, err);
    if (!e) return;
    int spm = strcmp(name, "llama-spm") == 0 || strcmp(name, "phi-3") == 0 || strcmp(name, "gemma-3") == 0;

    // a. llama.cpp's own vectors
    char inp[1100], out[1100];
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(out, sizeof out, "%s.out", path);
    struct cases own;
    struct golden g;
    if (own_vectors && cases_load(&own, inp)) {
        if (golden_load(&g, out)) {
            check_golden(e, inp, &own, &g, 0);
            golden_free(&g);
        } else {
            EXPECT(0, "%s: no such file", out);
        }
        check_text(e, name, spm, &own, own.n);
        cases_free(&own);
    } else if (own_vectors) {
        EXPECT(0, "%s: no such file", inp);
    }

    // b, c, d. The corpus
    if (all->n) {
        static const struct { const char *mode; int flags; } modes[] = {
            {"plain", LLM_TOKENIZE_ADD_SPECIAL},
            {"special", LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL},
        };
        for (size_t m = 0; m < LLM__ARRAY_LEN(modes); m++) {
            snprintf(out, sizeof out, "tests/tokenizer/%s.%s.out", name, modes[m].mode);
            if (golden_load(&g, out)) {
                check_golden(e, out, all, &g, modes[m].flags);
                golden_free(&g);
            } else {
                EXPECT(0, "%s: no such file", out);
            }
        }
        check_text(e, name, spm, all, n_valid);
    }

    // e, f
    check_special(e, name);
    if (spm) check_bos(e, name);
    // h, i
    if (strcmp(name, "qwen2") == 0) check_special_split_linear(e);
    if (own_vectors) check_token_bound(e, name, all);
    llm_engine_free(e);
}

int main(void) {
    const char *dir = test_vocab_dir();

    // The corpus: valid UTF-8 cases, then invalid ones, in the order of the golden lines.
    struct cases corpus, invalid;
    int have_corpus = cases_load(&corpus, "tests/tokenizer/corpus.inp");
    int have_invalid = cases_load(&invalid, "tests/tokenizer/corpus_invalid.inp");
    EXPECT(have_corpus && have_invalid, "tests/tokenizer/corpus.inp or corpus_invalid.inp is missing");
    struct cases all = {NULL, 0, NULL, NULL};
    int n_valid = have_corpus ? corpus.n : 0;
    if (have_corpus && have_invalid) {
        all.n = corpus.n + invalid.n;
        all.text = malloc((size_t)all.n * sizeof *all.text);
        all.len = malloc((size_t)all.n * sizeof *all.len);
        for (int i = 0; i < all.n; i++) {
            all.text[i] = i < n_valid ? corpus.text[i] : invalid.text[i - n_valid];
            all.len[i] = i < n_valid ? corpus.len[i] : invalid.len[i - n_valid];
        }
        for (int i = 0; i < n_valid; i++)
            EXPECT(utf8_valid(corpus.text[i], corpus.len[i]), "corpus case %d is not valid UTF-8", i);
        for (int i = 0; i < invalid.n; i++)
            EXPECT(!utf8_valid(invalid.text[i], invalid.len[i]), "corpus_invalid case %d is valid UTF-8", i);
    }

    check_special_split_reference();
    for (size_t v = 0; v < LLM__ARRAY_LEN(vocab_names); v++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, vocab_names[v]);
        check_vocab(vocab_names[v], path, &all, n_valid, 1);
    }
    // The pre-tokenizers no vocabulary file here uses ("default", "smollm", "tekken", "gpt-4o"): test
    // models with GPT-2's vocabulary and that tokenizer.ggml.pre (tests/models.txt).
    const char *models = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    static const char *const pre_names[] = {"pre-default", "pre-smollm", "pre-tekken", "pre-gpt-4o"};
    for (size_t v = 0; v < LLM__ARRAY_LEN(pre_names); v++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/tiny-%s.gguf", models, pre_names[v]);
        check_vocab(pre_names[v], path, &all, n_valid, 0);
    }
    // tekken: cases of upper and lower case letters, ASCII and not, and of '/' after newlines, on
    // a vocabulary whose tokens are every piece of them (one token per word: the ids show the split)
    struct cases tekken;
    struct golden g;
    char path[1100];
    snprintf(path, sizeof path, "%s/tiny-tekken-split.gguf", models);
    EXPECT(cases_load(&tekken, "tests/tokenizer/corpus_tekken.inp"), "tests/tokenizer/corpus_tekken.inp is missing");
    EXPECT(golden_load(&g, "tests/tokenizer/tekken-split.out"), "tests/tokenizer/tekken-split.out is missing");
    struct llm_engine_params params = llm_engine_params_default();
    params.model_path = path;
    params.n_threads = 1;
    params.load = LLM_LOAD_VOCAB;
    char err[512] = "";
    llm_engine *te = llm_engine_create(&params, err, sizeof err);
    EXPECT(te != NULL, "%s: %s", path, err);
    if (te && tekken.n && g.n) check_golden(te, "tests/tokenizer/tekken-split.out", &tekken, &g, LLM_TOKENIZE_ADD_SPECIAL);
    llm_engine_free(te);
    cases_free(&tekken);
    golden_free(&g);

    // gpt-oss's harmony markers (tiny-harmony-vocab: every piece of them a token, as llama.cpp
    // reads it: <|return|> and <|call|> end a generation, <|end|> does not and, as <|channel|>,
    // <|message|> and <|start|>, is rendered in the text)
    {
        snprintf(path, sizeof path, "%s/tiny-harmony-vocab.gguf", models);
        params.model_path = path;
        llm_engine *he = llm_engine_create(&params, err, sizeof err);
        EXPECT(he != NULL, "%s: %s", path, err);
        static const struct { const char *text; int eog; } marks[] = {
            {"<|end|>", 0}, {"<|return|>", 1}, {"<|call|>", 1}, {"<|channel|>", 0}, {"<|message|>", 0}, {"<|start|>", 0},
        };
        for (size_t i = 0; he && i < LLM__ARRAY_LEN(marks); i++) {
            int32_t id[4];
            const int n = llm_tokenize(he, marks[i].text, (int)strlen(marks[i].text), LLM_TOKENIZE_PARSE_SPECIAL, id, 4);
            char piece[64] = "";
            const int k = n == 1 ? llm_detokenize(he, id, 1, 0, piece, sizeof piece) : -1;
            EXPECT(n == 1 && llm_token_is_eog(he, id[0]) == marks[i].eog && k >= 0 &&
                       (marks[i].eog || strcmp(piece, marks[i].text) == 0),
                   "%s: %d tokens, end of generation %d (want %d), rendered '%s'", marks[i].text, n,
                   n == 1 ? llm_token_is_eog(he, id[0]) : -1, marks[i].eog, piece);
        }
        llm_engine_free(he);
    }

    // Gemma 3's vocabulary, from the real model (the goldens: tests/tokenizer/make_goldens.sh)
    const char *real = getenv("LLM_REAL_MODELS");
    EXPECT(real && *real, "LLM_REAL_MODELS is not set: it names the folder of the real models "
                          "(make test sets it to the models/ folder of tests/fixtures.sh's cache)");
    if (real && *real) {
        char path[1100];
        snprintf(path, sizeof path, "%s/gemma-3-270m-q4_k_m.gguf", real);
        check_vocab("gemma-3", path, &all, n_valid, 0);
    }
    // a real tekken vocabulary (Mistral NeMo, Mistral Small 3), converted by tests/fixtures.sh
    // from mistral_common's tekken.json as llama.cpp's converter does, beside the vocabularies
    {
        char path[1100];
        snprintf(path, sizeof path, "%s/../tekken/ggml-vocab-tekken.gguf", dir);
        check_vocab("tekken", path, &all, n_valid, 0);
    }

    if (have_corpus) cases_free(&corpus);
    if (have_invalid) cases_free(&invalid);
    free(all.text);
    free(all.len);
    return test_summary("test_tokenizer");
}
