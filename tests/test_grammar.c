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
    // llm_grammar_check: the same verdict and message, without an engine
    EXPECT(llm_grammar_check("root ::= [a-z]+ \"!\"", msg, sizeof msg) == LLM_OK, "a good grammar: %s", msg);
    EXPECT(llm_grammar_check("root ::= \"a\"\nx ::= \"b\" @", msg, sizeof msg) == LLM_ERR_INVALID_ARG &&
           strstr(msg, "grammar: line 2 column 11"), "llm_grammar_check: %s", msg);
    EXPECT(llm_grammar_check("x ::= \"a\"", msg, sizeof msg) == LLM_ERR_INVALID_ARG && strstr(msg, "no rule 'root'"),
           "no root: %s", msg);
    EXPECT(llm_grammar_check(NULL, msg, sizeof msg) == LLM_ERR_INVALID_ARG, "NULL");
    EXPECT(llm_grammar_check("root ::= (", NULL, 0) == LLM_ERR_INVALID_ARG, "no buffer for the message");
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
    // overlong forms, surrogates and code points beyond U+10FFFF are not UTF-8 (an overlong '{'
    // must not open an object)
    digits = parse("root ::= \"{\" | [^a]", msg, sizeof msg);
    if (digits && llm__gmatch_init(&m, digits)) {
        static const char *bad[] = {"\xc1\xbb", "\xe0\x81\xbb", "\xf0\x80\x81\xbb", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                    "\xe0\x81", "\xf0\x8f"};
        for (size_t i = 0; i < LLM__ARRAY_LEN(bad); i++) EXPECT(!llm__gmatch_ok(&m, bad[i], strlen(bad[i])), "bad UTF-8 %zu", i);
        static const char *good[] = {"{", "\xc2\x80", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
        for (size_t i = 0; i < LLM__ARRAY_LEN(good); i++) EXPECT(matches(digits, good[i], strlen(good[i])), "UTF-8 %zu", i);
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
        // the token alone through the pushdown automaton itself (not the DFA the mask and the
        // token checks share)
        uint32_t len = t->tb_off[id + 1] - t->tb_off[id];
        struct llm__gstate st;
        bool want = len ? llm__gmatch_run(m, t->tb + t->tb_off[id], len, &st) : llm__gmatch_token_ok(m, t, id);
        bool got = mask[id >> 6] >> (id & 63) & 1;
        differ += want != llm__gmatch_token_ok(m, t, id);
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


// Chi-square statistic of counts against expected probabilities (cells with p > 0).
static double chi2(const int *count, const double *p, int n, int draws) {
    double x = 0;
    for (int i = 0; i < n; i++)
        if (p[i] > 0) x += (count[i] - draws * p[i]) * (count[i] - draws * p[i]) / (draws * p[i]);
    return x;
}

// Sampling under a grammar on a real vocabulary and random logits: greedy is the best allowed
// token; draws follow the softmax of the allowed tokens' logits (chi-square), both by rejection
// (temperature alone, the allowed tokens likely) and by the whole mask (top-k, or unlikely tokens).
static void check_sampling(void) {
    llm_engine *e;
    if (!load_vocab("llama-bpe", &e)) return;
    struct llm__gtrie t;
    if (!llm__gtrie_build(&t, &e->vocab)) { EXPECT(0, "trie"); llm_engine_free(e); return; }
    char msg[512];
    struct llm__grammar *g = parse("root ::= (\"a\" | \"b\" | \"c\" | \"ab\" | \"ba\" | \"abc\") \"!\"", msg, sizeof msg);
    EXPECT(g != NULL, "%s", msg);
    const int n = t.n_vocab;
    float *logits = malloc((size_t)n * sizeof *logits), *row = malloc((size_t)n * sizeof *row);
    uint64_t *mask = calloc(((size_t)n + 63) / 64, sizeof *mask);
    int32_t allowed[16];
    int n_allowed = 0;
    struct llm__gmatch m;
    if (g && llm__gmatch_init(&m, g)) {
        for (int id = 0; id < n; id++)
            if (llm__gmatch_token_ok(&m, &t, id) && n_allowed < 16) allowed[n_allowed++] = id;
        EXPECT(n_allowed >= 5 && n_allowed < 16, "%d tokens allowed at the start", n_allowed);
        unsigned long long seed = 11;
        static const struct { float temp, boost; int top_k; float top_p, min_p; const char *what; } cases[] = {
            {1.0f, 9.0f, 0, 1.0f, 0.0f, "temperature alone, allowed tokens likely (rejection)"},
            {0.7f, 0.0f, 0, 1.0f, 0.0f, "temperature alone, allowed tokens unlikely (the whole mask)"},
            {1.0f, 9.0f, 50, 1.0f, 0.0f, "top-k 50 (allowed tokens checked best first)"},
            {1.0f, 3.0f, 4, 1.0f, 0.0f, "top-k 4, allowed tokens below refused ones"},
            {1.0f, 9.0f, 0, 0.8f, 0.0f, "top-p 0.8"},
            {1.3f, 2.0f, 0, 0.95f, 0.0f, "top-p 0.95, allowed tokens not the best"},
            {0.9f, 9.0f, 0, 1.0f, 0.1f, "min-p 0.1"},
            {1.0f, 9.0f, 8, 0.7f, 0.05f, "top-k 8, top-p 0.7, min-p 0.05"},
        };
        for (size_t c = 0; c < LLM__ARRAY_LEN(cases); c++) {
            for (int i = 0; i < n; i++) logits[i] = (float)test_rng_normal(&seed) * 2.0f;
            for (int i = 0; i < n_allowed; i++) logits[allowed[i]] += cases[c].boost + (float)i * 0.3f;
            struct llm_sampling_params sp = llm_sampling_params_default();
            sp.temperature = cases[c].temp;
            sp.top_k = cases[c].top_k;
            sp.top_p = cases[c].top_p;
            sp.min_p = cases[c].min_p;
            sp.seed = 5 + c;
            llm_sampler *smp = llm_sampler_create(&sp, n);
            // expected, in double: the chain on the allowed tokens alone (top-k, top-p on the
            // probabilities before temperature, min-p against the best, temperature)
            int order[16];
            for (int i = 0; i < n_allowed; i++) order[i] = i;
            for (int i = 0; i < n_allowed; i++)
                for (int k = i + 1; k < n_allowed; k++)
                    if (logits[allowed[order[k]]] > logits[allowed[order[i]]]) { int x = order[i]; order[i] = order[k]; order[k] = x; }
            int keep = sp.top_k > 0 && sp.top_k < n_allowed ? sp.top_k : n_allowed;
            double mx = logits[allowed[order[0]]], z = 0, cum = 0, p[16] = {0};
            for (int i = 0; i < keep; i++) z += exp(logits[allowed[order[i]]] - mx);
            if (sp.top_p < 1.0f)
                for (int i = 0; i < keep; i++)
                    if ((cum += exp(logits[allowed[order[i]]] - mx)) >= sp.top_p * z) { keep = i + 1; break; }
            if (sp.min_p > 0.0f)
                for (int i = 1; i < keep; i++)
                    if (logits[allowed[order[i]]] < mx + log(sp.min_p)) { keep = i; break; }
            z = 0;
            for (int i = 0; i < keep; i++) z += p[order[i]] = exp((logits[allowed[order[i]]] - mx) / sp.temperature);
            for (int i = 0; i < n_allowed; i++) p[i] /= z;
            int count[16] = {0}, outside = 0, draws = TEST_SANITIZED ? 2000 : 5000;   // (the bound holds for both)
            for (int d = 0; d < draws; d++) {
                int32_t tok = llm__grammar_sample(smp, &m, &t, logits, mask, row);
                int k = 0;
                while (k < n_allowed && allowed[k] != tok) k++;
                if (k == n_allowed) outside++;
                else count[k]++;
            }
            // n_allowed - 1 degrees of freedom (< 15): 99.9% quantile below 40
            double x = chi2(count, p, n_allowed, draws);
            int outside_chain = 0;   // draws of allowed tokens the chain drops
            for (int i = 0; i < n_allowed; i++) outside_chain += p[i] == 0 ? count[i] : 0;
            EXPECT(outside == 0 && outside_chain == 0 && x < 40.0, "%s: %d draws outside the grammar, %d outside the "
                   "chain, chi-square %.1f", cases[c].what, outside, outside_chain, x);
            llm_sampler_free(smp);
        }
        // greedy: the best allowed token, though a refused one is better
        struct llm_sampling_params sp = llm_sampling_params_default();
        sp.temperature = 0.0f;
        llm_sampler *smp = llm_sampler_create(&sp, n);
        for (int i = 0; i < n; i++) logits[i] = (float)test_rng_normal(&seed);
        int best = allowed[2];
        logits[best] = 50.0f;
        logits[allowed[0] == 0 ? 1 : 0] = 100.0f;   // refused, and the best of all
        EXPECT(llm__grammar_sample(smp, &m, &t, logits, mask, row) == best, "greedy: the best allowed token");
        logits[best] = 200.0f;   // allowed and the best of all: the argmax alone (no mask computed)
        long misses = m.cache_misses, hits = m.cache_hits;
        EXPECT(llm__grammar_sample(smp, &m, &t, logits, mask, row) == best && m.cache_misses == misses &&
               m.cache_hits == hits, "greedy: an allowed argmax needs no mask");
        llm_sampler_free(smp);
        llm__gmatch_free(&m);
    }
    free(logits);
    free(row);
    free(mask);
    llm__grammar_free(g);
    llm__gtrie_free(&t);
    llm_engine_free(e);
}

// Writes s as a GBNF string literal's contents (every byte below 0x80 but letters and digits as
// \xHH, UTF-8 as it is).
static void gbnf_escape(const char *s, char *out) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) *out++ = (char)c;
        else out += sprintf(out, "\\x%02x", c);
    }
    *out = 0;
}

static llm_engine *real_engine(int ngram) {
    const char *dir = getenv("LLM_REAL_MODELS");
    EXPECT(dir && *dir, "LLM_REAL_MODELS is not set: it names the folder of the real models (make test sets it)");
    if (!dir || !*dir) return NULL;
    char path[1100], err[512] = "";
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    struct llm_engine_params ep = llm_engine_params_default();
    ep.model_path = path;
    ep.n_threads = 2;
    ep.max_model_len = 512;
    if (ngram) {
        ep.speculative_ngram = 1;
        ep.num_speculative_tokens = 4;
    }
    llm_engine *e = llm_engine_create(&ep, err, sizeof err);
    EXPECT(e != NULL, "%s: %s", path, err);
    return e;
}

// Generation under grammars on the real SmolLM2: a grammar that admits the unconstrained greedy
// text leaves it unchanged (and ends the request when it is complete); JSON under greedy and
// sampling, batched, parses (the engine's own JSON reader, not the grammar's matcher); with
// n-gram drafts the greedy texts are the same; a bad grammar refuses the request.
static void check_generation(void) {
    llm_engine *e = real_engine(0), *spec = e ? real_engine(1) : NULL;
    if (!e || !spec) { llm_engine_free(e); return; }
    struct llm_prompt prompt = {"The three primary colors are", NULL, 0};
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0.0f;
    rp.max_tokens = 24;
    struct llm_result free_run, bound;
    EXPECT(llm_generate(e, &prompt, 1, &rp, &free_run) == LLM_OK, "unconstrained: %s", llm_last_error(e));
    char *gbnf = malloc(strlen(free_run.text) * 4 + 64), *esc = malloc(strlen(free_run.text) * 4 + 1);
    gbnf_escape(free_run.text, esc);
    sprintf(gbnf, "root ::= \"%s\"", esc);
    rp.grammar = gbnf;
    EXPECT(llm_generate(e, &prompt, 1, &rp, &bound) == LLM_OK, "the text as a grammar: %s", llm_last_error(e));
    EXPECT(!strcmp(free_run.text, bound.text) && bound.finish_reason == LLM_FINISH_STOP,
           "a grammar admitting the greedy text: '%s' (%s), unconstrained '%s'", bound.text,
           llm_finish_reason_str(bound.finish_reason), free_run.text);
    llm_results_free(&free_run, 1);
    llm_results_free(&bound, 1);
    free(gbnf);
    free(esc);

    // JSON, 6 prompts at once: 3 greedy (one engine with drafts, one without), 3 sampled
    static const char *asks[] = {"A JSON object describing a cat: ", "The user record as JSON: ",
                                 "{\"name\": \"Alice\", \"age\": 30}\nAnother person as JSON: "};
    struct llm_prompt prompts[6];
    for (int i = 0; i < 6; i++) prompts[i] = (struct llm_prompt){asks[i % 3], NULL, 0};
    rp = llm_request_params_default();
    char *object = malloc(sizeof json_gbnf + 32);   // an object at the top
    sprintf(object, "root ::= object\n%s", strstr(json_gbnf, "value  ::="));
    rp.grammar = object;
    rp.max_tokens = 160;
    struct llm_result res[3], sres[3], spres[3];
    struct llm_request_params rps[3];   // (one per prompt)
    rp.sampling.temperature = 0.0f;
    for (int i = 0; i < 3; i++) rps[i] = rp;
    EXPECT(llm_generate(e, prompts, 3, rps, res) == LLM_OK, "JSON greedy: %s", llm_last_error(e));
    EXPECT(llm_generate(spec, prompts, 3, rps, spres) == LLM_OK, "JSON greedy with drafts: %s", llm_last_error(spec));
    for (int i = 0; i < 3; i++) {
        rps[i].sampling.temperature = 0.9f;
        rps[i].sampling.seed = 7 + (uint64_t)i;
    }
    EXPECT(llm_generate(e, prompts + 3, 3, rps, sres) == LLM_OK, "JSON sampled: %s", llm_last_error(e));
    int n_stop = 0;
    for (int i = 0; i < 3; i++) {
        const struct llm_result *r[2] = {&res[i], &sres[i]};
        for (int k = 0; k < 2; k++) {
            // ended by the grammar: a JSON object; cut at max_tokens (a small model may repeat
            // itself inside a string): a text the grammar's matcher takes
            struct llm__json j = {0};
            struct llm__err err = {0};
            bool ok = false, stop = r[k]->finish_reason == LLM_FINISH_STOP;
            if (stop) ok = llm__json_parse(&j, r[k]->text, (size_t)r[k]->n_text, "output", &err) == LLM_OK &&
                           j.nodes[0].type == LLM__JSON_OBJ;
            else if (r[k]->finish_reason == LLM_FINISH_LENGTH) {
                struct llm__gmatch m;
                struct llm__grammar *g = parse(object, NULL, 0);
                ok = g && llm__gmatch_init(&m, g) && llm__gmatch_accept(&m, r[k]->text, (size_t)r[k]->n_text);
                if (g && m.g) llm__gmatch_free(&m);
                llm__grammar_free(g);
            }
            n_stop += stop;
            EXPECT(ok, "%s JSON %d: %s, '%s' %s %s", k ? "sampled" : "greedy", i,
                   llm_finish_reason_str(r[k]->finish_reason), r[k]->text ? r[k]->text : "", err.msg,
                   r[k]->error ? r[k]->error : "");
            llm__json_free(&j);
        }
        EXPECT(res[i].text && spres[i].text && !strcmp(res[i].text, spres[i].text), "with drafts %d: '%s', without '%s'", i, spres[i].text, res[i].text);
    }
    llm_results_free(res, 3);
    llm_results_free(sres, 3);
    EXPECT(n_stop >= 4, "%d of 6 JSON outputs complete", n_stop);
    llm_results_free(spres, 3);
    free(object);
    // a bad grammar: the request is refused, the message says where
    rp.grammar = "root ::= \"a\" | )";
    EXPECT(llm_add_request(e, &prompt, &rp) < 0 && strstr(llm_last_error(e), "grammar: line 1 column 16"),
           "a bad grammar: %s", llm_last_error(e));
    llm_engine_free(e);
    llm_engine_free(spec);
}

// JSON Schemas as grammars: for each, texts its grammar must take and texts it must refuse (what
// the schema accepts and refuses, by JSON Schema's rules); schemas with what cannot be held
// exactly are refused naming the keyword.
static void check_schemas(void) {
    static const struct { const char *schema, *yes[5], *no[6]; } cases[] = {
        {"{\"type\":\"integer\"}", {"0", "-12", "1234567"}, {"01", "1.5", "\"1\"", "-", ""}},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", {"-5", "0", "7", "99", "120"}, {"-6", "121", "200", "-10", "1000"}},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", {"1", "10", "987654"}, {"0", "-1", "-0"}},
        {"{\"type\":\"integer\",\"minimum\":15,\"exclusiveMaximum\":1000}", {"15", "99", "100", "999"}, {"14", "1000", "9", "0"}},
        {"{\"type\":\"number\"}", {"0", "-1.5", "2e10", "3.25E-3"}, {"1.", ".5", "+1", "NaN"}},
        {"{\"type\":\"number\",\"minimum\":0}", {"0", "1.5", "2e3"}, {"-1", "-0.5"}},
        {"{\"type\":\"string\"}", {"\"\"", "\"a b\"", "\"\\\"q\\\"\"", "\"\\u00e9\"", "\"\xc3\xa9\""}, {"a", "\"\n\"", "\"\\x\""}},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"abc\"", "\"\\n\\t\""}, {"\"a\"", "\"abcd\""}},
        {"{\"type\":\"boolean\"}", {"true", "false"}, {"True", "1", "null"}},
        {"{\"type\":\"null\"}", {"null"}, {"nil", "\"null\""}},
        {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1]}]}", {"\"red\"", "\"green\"", "1", "null", "{\"a\":[1]}"}, {"\"blue\"", "2", "\"Red\""}},
        {"{\"const\":\"fixed\"}", {"\"fixed\""}, {"\"other\""}},
        {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", {"[]", "[1]", "[1, 2,3]", "[ 4 ]"}, {"[1,]", "[\"a\"]", "[1 2]"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":2,\"maxItems\":3}", {"[true,false]", "[true,true,true]"}, {"[]", "[true]", "[true,true,true,true]"}},
        {"{\"type\":\"array\",\"maxItems\":0}", {"[]"}, {"[1]"}},
        {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"]}",
         {"{\"name\":\"Al\",\"age\":3}", "{ \"name\": \"B\", \"age\": 40 }"}, {"{\"age\":3,\"name\":\"Al\"}", "{\"name\":\"Al\"}", "{}", "{\"name\":\"Al\",\"age\":3,\"x\":1}"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},\"required\":[\"b\"]}",
         {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}"}, {"{}", "{\"a\":1}", "{\"a\":1,\"c\":3}", "{\"c\":3,\"b\":2}"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}",
         {"{}", "{\"a\":1}", "{\"b\":2}", "{\"a\":1,\"b\":2}"}, {"{,}", "{\"b\":2,\"a\":1}", "{\"a\":1,}", "{\"c\":1}"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
         {"{}", "{\"a\":1}", "{\"a\":1,\"z\":[true]}", "{\"z\":\"w\"}", "{\"ab\":\"x\",\"\":1}"}, {"{\"a\":\"s\"}", "{\"z\":}", "{\"ab\":1,\"a\":\"s\"}"}},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}", {"{}", "{\"x\":1}", "{\"x\":1,\"y\":2.5}"}, {"{\"x\":\"1\"}"}},
        {"{\"type\":\"object\"}", {"{}", "{\"k\":{\"n\":[1,{}]}}"}, {"[]", "{\"k\"}"}},
        {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", {"5", "\"a\""}, {"\"ab\"", "true"}},
        {"{\"oneOf\":[{\"const\":1},{\"const\":2}]}", {"1", "2"}, {"3"}},
        {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
         {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"}, {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"}},
        {"{\"definitions\":{\"p\":{\"type\":\"integer\",\"minimum\":0}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/p\"}}", {"[0,5]"}, {"[-1]"}},
        {"{\"type\":\"string\",\"format\":\"date\"}", {"\"2026-12-06\"", "\"1999-01-31\""}, {"\"2026-13-01\"", "\"2026-1-01\"", "\"26-12-06\""}},
        {"{\"type\":\"string\",\"format\":\"time\"}", {"\"10:04:44Z\"", "\"23:59:59.123+02:00\""}, {"\"24:00:00Z\"", "\"10:04\"", "\"10:04:44\""}},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2026-12-06T10:04:44Z\""}, {"\"2026-12-06 10:04:44Z\""}},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567e89b12d3a456426614174000\""}},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]+ \\\\d{2,3}$\"}", {"\"Ab 12\"", "\"Xyz 999\""}, {"\"ab 12\"", "\"Ab 1\"", "\"Ab 1234\"", "\"A 12\""}},
        {"{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", {"\"cat\"", "\"dogs\""}, {"\"cats!\"", "\"bird\""}},
        {"{\"type\":\"string\",\"pattern\":\"ab\"}", {"\"ab\"", "\"xxabyy\""}, {"\"a b\"", "\"\""}},
        {"{\"type\":\"string\",\"pattern\":\"^[^a-z]*$\"}", {"\"ABC 1\"", "\"\\\"\"", "\"\\n\""}, {"\"aB\""}},
        {"{\"type\":\"string\",\"pattern\":\"^a\\\\.b\\\\\\\\c\\\"$\"}", {"\"a.b\\\\c\\\"\""}, {"\"aXb\\\\c\\\"\""}},
        {"{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":2},\"id\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":9}},\"required\":[\"id\"],\"title\":\"t\",\"description\":\"d\"}",
         {"{\"tags\":[\"x\"],\"id\":3}", "{\"id\":9}"}, {"{\"tags\":[\"z\"],\"id\":3}", "{\"id\":10}", "{\"tags\":[\"x\",\"y\",\"x\"],\"id\":1}"}},
        {"true", {"1", "{\"a\":[null]}"}, {"{"}},
        // maxProperties: additional properties up to the bound (every listed one required)
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"maxProperties\":2}",
         {"{}", "{\"a\":1}", "{\"a\":1,\"b\":2}"}, {"{\"a\":1,\"b\":2,\"c\":3}", "{\"a\":\"x\"}"}},
        {"{\"type\":\"object\",\"maxProperties\":1}", {"{}", "{\"a\":[1,2]}"}, {"{\"a\":1,\"b\":2}"}},
        {"{\"type\":\"object\",\"maxProperties\":0}", {"{}", "{ }"}, {"{\"a\":1}"}},
        {"{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"}},\"required\":[\"s\"],"
         "\"additionalProperties\":{\"type\":\"integer\"},\"maxProperties\":3}",
         {"{\"s\":\"x\"}", "{\"s\":\"x\",\"a\":1}", "{\"s\":\"x\",\"a\":1,\"b\":2}"},
         {"{\"s\":\"x\",\"a\":1,\"b\":2,\"c\":3}", "{\"a\":1}", "{\"s\":\"x\",\"s\":\"y\"}"}},
        {"{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"}},\"required\":[\"s\"],"
         "\"additionalProperties\":true,\"maxProperties\":1}", {"{\"s\":\"x\"}"}, {"{\"s\":\"x\",\"a\":1}"}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"maxProperties\":1}", {"{}", "{\"a\":1}"},
         {"{\"b\":1}"}},
    };
    char msg[512];
    for (size_t c = 0; c < LLM__ARRAY_LEN(cases); c++) {
        char err[512] = "";
        int n = llm_json_schema_to_grammar(cases[c].schema, NULL, 0, err, sizeof err);
        EXPECT(n > 0, "schema %zu %s: %s", c, cases[c].schema, err);
        if (n <= 0) continue;
        char *gbnf = malloc((size_t)n + 1);
        EXPECT(llm_json_schema_to_grammar(cases[c].schema, gbnf, (size_t)n + 1, err, sizeof err) == n && (int)strlen(gbnf) == n,
               "schema %zu: the second call", c);
        struct llm__grammar *g = parse(gbnf, msg, sizeof msg);
        EXPECT(g != NULL, "schema %zu %s: its grammar does not parse: %s\n%s", c, cases[c].schema, msg, gbnf);
        for (int i = 0; g && i < 5 && cases[c].yes[i]; i++)
            EXPECT(matches(g, cases[c].yes[i], strlen(cases[c].yes[i])), "schema %zu %s: refuses %s\n%s", c, cases[c].schema,
                   cases[c].yes[i], gbnf);
        for (int i = 0; g && i < 6 && cases[c].no[i]; i++)
            EXPECT(!matches(g, cases[c].no[i], strlen(cases[c].no[i])), "schema %zu %s: takes %s\n%s", c, cases[c].schema,
                   cases[c].no[i], gbnf);
        llm__grammar_free(g);
        free(gbnf);
    }
    // refused, naming what
    static const struct { const char *schema, *want; } bad[] = {
        {"{\"type\":\"integer\",\"multipleOf\":3}", "\"multipleOf\" is not supported"},
        {"{\"not\":{\"type\":\"string\"}}", "\"not\" is not supported"},
        {"{\"type\":\"object\",\"patternProperties\":{\"^x\":{}}}", "patternProperties is not supported"},
        {"{\"type\":\"object\",\"minProperties\":1}", "minProperties is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":true,\"maxProperties\":2}",
         "maxProperties is supported when every listed property is required"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\",\"b\"],\"maxProperties\":1}",
         "maxProperties is below the required properties"},
        {"{\"type\":\"object\",\"maxProperties\":-1}", "maxProperties must be an integer from 0 to 1000"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems is not supported"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "format \"email\" is not supported"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back-references"},
        {"{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "word boundaries"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "^ and $"},
        {"{\"type\":\"number\",\"maximum\":3}", "maximum on a number"},
        {"{\"$ref\":\"#/$defs/missing\"}", "$ref \"#/$defs/missing\""},
        {"{\"$ref\":\"http://example.com/s.json\"}", "is not #"},
        {"{\"type\":\"strnig\"}", "unknown type"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property is not in properties"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer between"},
        {"{\"type\":\"array\",\"minItems\":5000}", "minItems must be an integer from 0 to 1000"},
        {"{\"allOf\":[{},{}]}", "allOf is supported with one schema only"},
        {"false", "false accepts no value"},
        {"{\"type\":", "json schema: bad JSON"},
        {"[1]", "a schema must be an object"},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(bad); i++) {
        char err[512] = "";
        int n = llm_json_schema_to_grammar(bad[i].schema, NULL, 0, err, sizeof err);
        EXPECT(n < 0 && strstr(err, bad[i].want), "%s: %d, '%s', want '%s'", bad[i].schema, n, err, bad[i].want);
    }
    // nested deeper than 64: refused, not a stack overflow
    char deep[2048] = "";
    for (int i = 0; i < 100; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 100; i++) strcat(deep, "}");
    char err[512] = "";
    EXPECT(llm_json_schema_to_grammar(deep, NULL, 0, err, sizeof err) < 0 && strstr(err, "nested deeper than 64"),
           "100 nested schemas: %s", err);
}

int main(void) {
    check_errors();
    check_regular();
    check_nonregular_and_json();
    // under the sanitizers (ten times slower) the masks on SentencePiece's 32,000 tokens only
    if (TEST_SANITIZED) SKIP("test_grammar: masks on Llama 3's 128,256 tokens not checked under sanitizers (make test does)");
    else check_masks("llama-bpe");
    check_masks("llama-spm");
    check_schemas();
    check_sampling();
    check_generation();
    return test_summary("test_grammar");
}
