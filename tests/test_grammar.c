// Grammars (GBNF): parse errors name what is wrong and where; the matcher accepts exactly the
// texts of a grammar (against POSIX extended regular expressions for regular grammars, every
// string over a small alphabet up to 7 characters; a non-regular grammar; JSON); UTF-8 code
// points arrive byte by byte; the token mask of a state is the set of tokens the matcher accepts
// one by one (real vocabularies: byte-level BPE and SentencePiece with byte tokens), the
// end-of-generation tokens exactly when the text may end; cached masks equal computed ones.
#include "../llm.c"
#include <regex.h>
#include "test.h"

static struct llm__grammar *parse(const char *text, char *msg, size_t size) {
    struct llm__err e = {0};
    struct llm__grammar *g = llm__grammar_parse(text, NULL, &e);
    if (msg) snprintf(msg, size, "%s", e.msg);
    return g;
}

// Whether the grammar's matcher takes the whole of s as a complete text.
static bool matches(const struct llm__grammar *g, const char *s, size_t n) {
    struct llm__gmatch m;
    if (!llm__gmatch_init(&m, g)) return false;
    bool ok = llm__gmatch_accept(&m, s, n) && llm__gmatch_can_end(&m);
    llm__gmatch_free(&m);
    return ok;
}

static void check_errors(void) {
    static const struct { const char *gbnf, *want; } bad[] = {
        {"root ::= foo", "rule 'foo' is used but not defined"},
        {"root ::= \"a", "unterminated string"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"\\x4\"", "2 hexadecimal digits"},
        {"root ::= \"a\"{3,2}", "repetition's maximum"},
        {"root ::= \"a\"{99999}", "repetition count"},
        {"root ::= [z-a]", "below its start"},
        {"foo ::= \"a\"", "no rule 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice"},
        {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
        {"root ::= x\nx ::= y \"a\"\ny ::= \"\" | x", "left-recursive"},
        {"root ::= (\"a\"?)*", "repetition of something that can be empty"},
        {"root ::= \"a\" )", "unexpected ')'"},
        {"root := \"a\"", "'::=' expected"},
        {"root ::= <[1]>", "token references"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
        {"root ::= \"a\" b ::= \"c\"", "a new rule on the same line"},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(bad); i++) {
        char msg[512];
        struct llm__grammar *g = parse(bad[i].gbnf, msg, sizeof msg);
        EXPECT(g == NULL && strstr(msg, bad[i].want) && strstr(msg, "grammar: "), "'%s': '%s', want '%s'",
               bad[i].gbnf, msg, bad[i].want);
        llm__grammar_free(g);
    }
    // more than LLM__GRAMMAR_MAX_ELEMS elements
    char *big = malloc(16 * 110 + 16);
    strcpy(big, "root ::=");
    for (int i = 0; i < 110; i++) strcat(big, " \"a\"{10000}");
    char msg0[512];
    struct llm__grammar *g0 = parse(big, msg0, sizeof msg0);
    EXPECT(!g0 && strstr(msg0, "more than 1048576 elements"), "1.1 million elements: %s", msg0);
    free(big);
    // groups nested 101 deep
    char deep[512] = "root ::= ";
    for (int i = 0; i < 101; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 101; i++) strcat(deep, ")");
    char msg[512];
    struct llm__grammar *g = parse(deep, msg, sizeof msg);
    EXPECT(!g && strstr(msg, "nested deeper than 100"), "101 nested groups: %s", msg);
    llm__grammar_free(g);
    // where: line and column of the error
    g = parse("root ::= \"a\"\nx ::= \"b\" @", msg, sizeof msg);
    EXPECT(!g && strstr(msg, "line 2 column 11"), "position: %s", msg);
    llm__grammar_free(g);
}

// Each grammar against an equivalent extended regular expression, on every string over "abc" of
// up to 7 characters; and every prefix of a match can continue.
static void check_regular(void) {
    static const struct { const char *gbnf, *re; } pairs[] = {
        {"root ::= \"a\" \"b\"*", "^ab*$"},
        {"root ::= (\"a\" | \"bc\")+ \"c\"?", "^(a|bc)+c?$"},
        {"root ::= [ab]{2,4} \"c\"", "^[ab]{2,4}c$"},
        {"root ::= x x\nx ::= \"a\" | \"b\" x", "^(b*a){2}$"},
        {"root ::= [^a]* \"a\"", "^[^a]*a$"},
        {"root ::= (\"ab\"){3}", "^(ab){3}$"},
        {"root ::= \"a\"{0,3} (\"b\" | \"\") \"c\"{1,}", "^a{0,3}b?c+$"},
        {"root ::= [a-b]+ ([c] [a]?)*", "^[a-b]+(ca?)*$"},
        {"root ::= # a comment\n  a\n  | \"c\"\na ::= \"a\"{2}  # two\n", "^(aa|c)$"},
        {"root ::= .{2}", "^..$"},
        {"root ::= ((\"a\" \"b\"?)* \"c\")?", "^((ab?)*c)?$"},
        {"root ::= \"\\x61\" \"\\u0062\"? [\\x63]", "^ab?c$"},
        {"root ::= (\"a\" |\n   \"b\") \"c\"\n  | \"cc\"", "^((a|b)c|cc)$"},
        {"root ::= [abc]{2,} \"a\" | \"b\"{1,2}", "^([abc]{2,}a|b{1,2})$"},
    };
    for (size_t p = 0; p < LLM__ARRAY_LEN(pairs); p++) {
        char msg[512];
        struct llm__grammar *g = parse(pairs[p].gbnf, msg, sizeof msg);
        EXPECT(g != NULL, "'%s': %s", pairs[p].gbnf, msg);
        regex_t re;
        int rc = regcomp(&re, pairs[p].re, REG_EXTENDED | REG_NOSUB);
        EXPECT(rc == 0, "regcomp %s", pairs[p].re);
        if (!g || rc) { llm__grammar_free(g); continue; }
        int wrong = 0, n_match = 0, bad_prefix = 0;
        for (int len = 0; len <= 7; len++) {
            int total = 1;
            for (int i = 0; i < len; i++) total *= 3;
            for (int k = 0; k < total; k++) {
                char s[8];
                for (int i = 0, x = k; i < len; i++, x /= 3) s[i] = (char)('a' + x % 3);
                s[len] = 0;
                bool want = regexec(&re, s, 0, NULL, 0) == 0, got = matches(g, s, (size_t)len);
                wrong += want != got;
                n_match += want;
                if (want) {   // every prefix can continue
                    struct llm__gmatch m;
                    if (llm__gmatch_init(&m, g)) {
                        for (int i = 0; i < len; i++) bad_prefix += !llm__gmatch_ok(&m, s, (size_t)i);
                        llm__gmatch_free(&m);
                    }
                }
            }
        }
        EXPECT(wrong == 0 && n_match > 0 && bad_prefix == 0, "'%s' vs %s: %d strings judged otherwise, %d matches, "
               "%d prefixes refused", pairs[p].gbnf, pairs[p].re, wrong, n_match, bad_prefix);
        regfree(&re);
        llm__grammar_free(g);
    }
}

static const char json_gbnf[] =
    "root   ::= value\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "ws     ::= [ \\t\\n]*\n";

static const char json_text[] = "{\"a\": [1, 2.5e3, -0, true, null], \"b\": {\"c\": \"x\\u00e9\\n\xc3\xa9\xe2\x82\xac\"}}";

static void check_nonregular_and_json(void) {
    char msg[512];
    struct llm__grammar *g = parse("root ::= \"\" | \"a\" root \"b\"", msg, sizeof msg);
    EXPECT(g != NULL, "a^n b^n: %s", msg);
    if (g) {
        static const char *yes[] = {"", "ab", "aabb", "aaabbb"}, *no[] = {"a", "aab", "abb", "ba", "abab"};
        for (size_t i = 0; i < LLM__ARRAY_LEN(yes); i++) EXPECT(matches(g, yes[i], strlen(yes[i])), "a^n b^n: '%s'", yes[i]);
        for (size_t i = 0; i < LLM__ARRAY_LEN(no); i++) EXPECT(!matches(g, no[i], strlen(no[i])), "a^n b^n: '%s'", no[i]);
        char deep[401];
        memset(deep, 'a', 200);
        memset(deep + 200, 'b', 200);
        EXPECT(matches(g, deep, 400), "a^200 b^200");
        EXPECT(!matches(g, deep, 399), "a^200 b^199");
        llm__grammar_free(g);
    }
    g = parse(json_gbnf, msg, sizeof msg);
    EXPECT(g != NULL, "JSON grammar: %s", msg);
    if (!g) return;
    static const char *yes[] = {json_text, "[]", "\"\xc3\xa9\"", "123", "-0.5E+10", "{ }", "[[[[1]]], {\"\": \"\"}]"};
    static const char *no[] = {"{\"a\" 1}", "[1,]", "01", "\"\\x\"", "{\"a\":1}}", "\"a", "tru", "[1 2]", "\"\x01\""};
    for (size_t i = 0; i < LLM__ARRAY_LEN(yes); i++) EXPECT(matches(g, yes[i], strlen(yes[i])), "JSON: '%s'", yes[i]);
    for (size_t i = 0; i < LLM__ARRAY_LEN(no); i++) EXPECT(!matches(g, no[i], strlen(no[i])), "JSON not: '%s'", no[i]);
    // byte by byte: every prefix of the text goes on, bytes in the middle of a code point included;
    // a byte that breaks UTF-8 or the grammar is refused and leaves the state as it was
    struct llm__gmatch m;
    EXPECT(llm__gmatch_init(&m, g), "matcher");
    size_t n = strlen(json_text);
    int refused = 0, wrongly = 0;
    for (size_t i = 0; i < n; i++) {
        refused += !llm__gmatch_accept(&m, json_text + i, 1);
        wrongly += llm__gmatch_ok(&m, "\xff", 1) || (llm__gmatch_ok(&m, "\x80", 1) && m.need == 0);
    }
    EXPECT(refused == 0 && wrongly == 0, "byte by byte: %d refused, %d wrongly taken", refused, wrongly);
    EXPECT(llm__gmatch_must_end(&m), "after the whole object nothing can follow");
    llm__gmatch_free(&m);
    // a code point's first byte is taken only where one of its code points can follow
    g->root = g->root;   // (the same grammar)
    struct llm__grammar *digits = parse("root ::= [0-9] \"\xc3\xa9\"", msg, sizeof msg);
    EXPECT(digits != NULL, "%s", msg);
    if (digits && llm__gmatch_init(&m, digits)) {
        EXPECT(!llm__gmatch_ok(&m, "\xc3", 1), "a lead byte before a digit");
        EXPECT(llm__gmatch_accept(&m, "7\xc3", 2) && m.need == 1, "a digit and a lead byte");
        EXPECT(!llm__gmatch_can_end(&m), "a code point in progress cannot end the text");
        EXPECT(!llm__gmatch_ok(&m, "\xa8", 1) && llm__gmatch_ok(&m, "\xa9", 1), "the continuation byte decides");
        llm__gmatch_free(&m);
    }
    llm__grammar_free(digits);
    llm__grammar_free(g);
}

static int load_vocab(const char *name, llm_engine **out) {
    char path[1100], err[512] = "";
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", test_vocab_dir(), name);
    struct llm_engine_params params = llm_engine_params_default();
    params.model_path = path;
    params.n_threads = 1;
    params.load = LLM_LOAD_VOCAB;
    *out = llm_engine_create(&params, err, sizeof err);
    EXPECT(*out != NULL, "%s: %s (sh tests/fixtures.sh fetches it)", path, err);
    return *out != NULL;
}

// The mask of the matcher's state against each token checked alone; the same from the cache.
static int compare_mask(struct llm__gmatch *m, const struct llm__gtrie *t, const char *where) {
    size_t words = ((size_t)t->n_vocab + 63) / 64;
    uint64_t *mask = calloc(words, sizeof *mask), *again = calloc(words, sizeof *again);
    bool ok = llm__gmatch_mask(m, t, mask);
    EXPECT(ok, "%s: mask: %s", where, m->err.msg);
    int differ = 0, allowed = 0, first = -1;
    for (int id = 0; ok && id < t->n_vocab; id++) {
        bool want = llm__gmatch_token_ok(m, t, id), got = mask[id >> 6] >> (id & 63) & 1;
        if (want != got && first < 0) first = id;
        differ += want != got;
        allowed += got;
    }
    EXPECT(differ == 0, "%s: %d tokens differ between the mask and one-by-one checks (first %d)", where, differ, first);
    long hits = m->cache_hits;
    EXPECT(llm__gmatch_mask(m, t, again) && m->cache_hits == hits + 1 && !memcmp(mask, again, words * sizeof *mask),
           "%s: the cached mask", where);
    free(mask);
    free(again);
    return allowed;
}

static void check_masks(const char *vocab) {
    llm_engine *e;
    if (!load_vocab(vocab, &e)) return;
    struct llm__gtrie t;
    EXPECT(llm__gtrie_build(&t, &e->vocab), "%s: trie", vocab);
    // every token with text is in the trie once, under its bytes
    uint32_t placed = t.tok_off[t.n];
    int with_text = 0;
    for (int id = 0; id < t.n_vocab; id++) with_text += t.tb_off[id + 1] > t.tb_off[id];
    EXPECT((int)placed == with_text && t.n_eog > 0, "%s: %u tokens in the trie, %d with text, %d end-of-generation",
           vocab, placed, with_text, t.n_eog);
    char msg[512];
    struct llm__grammar *g = parse(json_gbnf, msg, sizeof msg);
    struct llm__gmatch m;
    if (g && llm__gmatch_init(&m, g)) {
        // states along the text: the start, inside keys, numbers, strings, after a lead byte
        static const size_t at[] = {0, 1, 3, 8, 12, 40, 47, 48, 52, 53, 56, 57, 59, 61};
        size_t done = 0;
        char where[64];
        for (size_t i = 0; i < LLM__ARRAY_LEN(at); i++) {
            EXPECT(llm__gmatch_accept(&m, json_text + done, at[i] - done), "%s: the text to %zu", vocab, at[i]);
            done = at[i];
            snprintf(where, sizeof where, "%s at byte %zu (need %u)", vocab, done, m.need);
            int allowed = compare_mask(&m, &t, where);
            bool in_string = done == 3 || done == 47 || done == 53 || done == 57;
            EXPECT(allowed > 0 && (in_string ? allowed > t.n_vocab / 2 : allowed < t.n_vocab / 2),
                   "%s: %d tokens allowed", where, allowed);
        }
        // the end: the end-of-generation tokens and nothing else
        EXPECT(llm__gmatch_accept(&m, json_text + done, strlen(json_text) - done), "%s: the rest", vocab);
        EXPECT(llm__gmatch_token(&m, &t, t.eog[0]) && !llm__gmatch_token(&m, &t, t.tok[0]), "%s: tokens at the end", vocab);
        size_t words = ((size_t)t.n_vocab + 63) / 64;
        uint64_t *mask = calloc(words, sizeof *mask);
        EXPECT(llm__gmatch_mask(&m, &t, mask), "%s: the last mask", vocab);
        int n = 0, eog = 0;
        for (int id = 0; id < t.n_vocab; id++) {
            n += mask[id >> 6] >> (id & 63) & 1;
            eog += (mask[id >> 6] >> (id & 63) & 1) && e->vocab.eog[id];
        }
        EXPECT(n == t.n_eog && eog == t.n_eog, "%s: at the end %d tokens allowed, %d of %d end-of-generation", vocab, n,
               eog, t.n_eog);
        free(mask);
        llm__gmatch_free(&m);
    }
    llm__grammar_free(g);
    llm__gtrie_free(&t);
    llm_engine_free(e);
}

int main(void) {
    check_errors();
    check_regular();
    check_nonregular_and_json();
    check_masks("llama-bpe");
    check_masks("llama-spm");
    return test_summary("test_grammar");
}
