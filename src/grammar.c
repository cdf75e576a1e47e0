// grammar.c — grammars in llama.cpp's GBNF syntax, compiled to a pushdown automaton over code
// points, and a request's matcher over it: which tokens can continue a valid text (a mask for the
// sampler), and the state after a token.
//
// A compiled grammar (struct llm__grammar) is read-only: rules of alternatives, each a run of
// elements ending in END; an element is a set of code points (CHARS: sorted disjoint ranges) or a
// reference to a rule (REF). Repetitions and groups become rules of their own: x* is R ::= x R | "",
// x+ is x R, x? is R ::= x | "", x{m,n} is m copies of x and n-m nested optionals.
//
// A matcher's state is a set of stacks. A stack is a node (pos, parent): pos the element where the
// innermost rule goes on, parent the stack to return to when it ends (node 0: the empty stack,
// the text may end here). Nodes are interned, so a stack is one number and stacks share their
// tails. The stacks of a state are expanded: each top element is a CHARS (or the stack is 0).
// Left recursion is refused when compiling, so an expansion ends.
//
// The mask of a state walks the vocabulary's token trie depth first, advancing the stacks byte by
// byte (UTF-8 decoded: a code point in progress is kept, and must be the start of one some stack
// accepts); a subtree whose state is empty is skipped. Masks are cached per state.

#include "internal.h"

enum { LLM__G_END = 0, LLM__G_CHARS = 1, LLM__G_REF = 2 };
#define LLM__G_KIND(x) ((x) & 3u)
#define LLM__G_ARG(x) ((x) >> 2)
#define LLM__G_MK(kind, arg) ((uint32_t)(arg) << 2 | (uint32_t)(kind))


// --- building: rules and code point sets while parsing ---

struct llm__gvec { uint32_t *v; int n, cap; };

struct llm__gbuild {
    const char *src, *p;
    struct llm__err *e;
    char **names;               // [n_rules]: a name, or NULL for a rule made by a group or repetition
    struct llm__gvec *body;     // [n_rules]: alternatives, each ending in END
    bool *defined;
    int n_rules, cap_rules;
    struct llm__gvec rng;       // code point ranges: lo, hi pairs
    struct llm__gvec cs_off;    // set i: ranges [cs_off[i], cs_off[i + 1]) (pairs)
    long n_elems;
    int depth;
};

static bool llm__gvec_push(struct llm__gvec *v, uint32_t x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        uint32_t *p = realloc(v->v, (size_t)cap * sizeof(*p));
        if (!p) return false;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

static bool llm__gb_fail(struct llm__gbuild *b, const char *fmt, const char *arg) {
    if (b->e->status != LLM_OK) return false;   // the first error stands
    int line = 1, col = 1;
    for (const char *q = b->src; q < b->p && *q; q++) {
        if (*q == '\n') { line++; col = 1; } else col++;
    }
    char what[256];
    snprintf(what, sizeof(what), fmt, arg ? arg : "");
    llm__fail(b->e, LLM_ERR_INVALID_ARG, "grammar: line %d column %d: %s", line, col, what);
    return false;
}

static bool llm__gb_oom(struct llm__gbuild *b) {
    if (b->e->status == LLM_OK) llm__fail(b->e, LLM_ERR_NOMEM, "grammar: out of memory");
    return false;
}

// A new rule (name NULL: made by a group or repetition); -1: out of memory or too many.
static int llm__gb_rule(struct llm__gbuild *b, const char *name, size_t len) {
    if (b->n_rules >= LLM__GRAMMAR_MAX_RULES) {
        llm__gb_fail(b, "more than %s rules (with those made for groups and repetitions)", "65536");
        return -1;
    }
    if (b->n_rules == b->cap_rules) {
        int cap = b->cap_rules ? b->cap_rules * 2 : 32;
        char **names = realloc(b->names, (size_t)cap * sizeof(*names));
        if (names) b->names = names;
        struct llm__gvec *body = realloc(b->body, (size_t)cap * sizeof(*body));
        if (body) b->body = body;
        bool *defined = realloc(b->defined, (size_t)cap * sizeof(*defined));
        if (defined) b->defined = defined;
        if (!names || !body || !defined) { llm__gb_oom(b); return -1; }
        b->cap_rules = cap;
    }
    int r = b->n_rules;
    b->names[r] = NULL;
    if (name && !(b->names[r] = llm__strndup(name, len))) { llm__gb_oom(b); return -1; }
    memset(&b->body[r], 0, sizeof(b->body[r]));
    b->defined[r] = name == NULL;
    b->n_rules++;
    return r;
}

// The rule named name[0..len), made (undefined yet) when it is new; -1: out of memory.
static int llm__gb_named(struct llm__gbuild *b, const char *name, size_t len) {
    for (int r = 0; r < b->n_rules; r++)
        if (b->names[r] && strlen(b->names[r]) == len && !memcmp(b->names[r], name, len)) return r;
    return llm__gb_rule(b, name, len);
}

static bool llm__gb_put(struct llm__gbuild *b, int r, uint32_t x) {
    if (++b->n_elems > LLM__GRAMMAR_MAX_ELEMS)
        return llm__gb_fail(b, "more than %s elements (repetition counts multiply them)", "1048576");
    return llm__gvec_push(&b->body[r], x) || llm__gb_oom(b);
}

static int llm__gr_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// Closes the code point set whose ranges start at pair `from`: sorted, merged, complemented when
// negated; returns its element, 0 when out of memory.
static uint32_t llm__gb_set(struct llm__gbuild *b, int from, bool negate) {
    int n = b->rng.n / 2 - from;
    uint32_t *r = n ? b->rng.v + 2 * from : NULL;   // ([] is the empty set)
    if (n) qsort(r, (size_t)n, 2 * sizeof(uint32_t), llm__gr_cmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (m - 1) + 1]) r[2 * (m - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * m] = r[2 * i];
            r[2 * m + 1] = r[2 * i + 1];
            m++;
        }
    }
    b->rng.n = 2 * (from + m);
    if (negate) {
        uint32_t *old = malloc((size_t)(2 * m + 1) * sizeof(*old));
        if (!old) return llm__gb_oom(b), 0;
        if (m) memcpy(old, r, (size_t)(2 * m) * sizeof(*old));
        b->rng.n = 2 * from;
        uint32_t lo = 0;
        bool ok = true;
        for (int i = 0; i < m && ok; i++) {
            if (old[2 * i] > lo) ok = llm__gvec_push(&b->rng, lo) && llm__gvec_push(&b->rng, old[2 * i] - 1);
            lo = old[2 * i + 1] + 1;
        }
        if (ok && lo <= LLM__CP_MAX) ok = llm__gvec_push(&b->rng, lo) && llm__gvec_push(&b->rng, LLM__CP_MAX);
        free(old);
        if (!ok) return llm__gb_oom(b), 0;
    }
    if (!b->cs_off.n && !llm__gvec_push(&b->cs_off, 0)) return llm__gb_oom(b), 0;
    if (!llm__gvec_push(&b->cs_off, (uint32_t)(b->rng.n / 2))) return llm__gb_oom(b), 0;
    return LLM__G_MK(LLM__G_CHARS, b->cs_off.n - 2);
}

static bool llm__gb_range(struct llm__gbuild *b, uint32_t lo, uint32_t hi) {
    return (llm__gvec_push(&b->rng, lo) && llm__gvec_push(&b->rng, hi)) || llm__gb_oom(b);
}

// --- parsing GBNF ---

static bool llm__gb_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Skips spaces and comments; newlines too when nl.
static void llm__gb_space(struct llm__gbuild *b, bool nl) {
    for (;;) {
        char c = *b->p;
        if (c == ' ' || c == '\t' || (nl && (c == '\n' || c == '\r'))) b->p++;
        else if (c == '#') while (*b->p && *b->p != '\n' && *b->p != '\r') b->p++;
        else return;
    }
}

static int llm__gb_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// One character of a literal or class (an escape or a UTF-8 sequence); false: the error is set.
static bool llm__gb_char(struct llm__gbuild *b, uint32_t *cp) {
    const char *p = b->p;
    if (*p == '\\') {
        int ndig = 0;
        switch (p[1]) {
        case 'x': ndig = 2; break;
        case 'u': ndig = 4; break;
        case 'U': ndig = 8; break;
        case 'n': *cp = '\n'; b->p += 2; return true;
        case 'r': *cp = '\r'; b->p += 2; return true;
        case 't': *cp = '\t'; b->p += 2; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'':
            *cp = (uint8_t)p[1]; b->p += 2; return true;
        default: return llm__gb_fail(b, "unknown escape '\\%s'", p[1] ? (char[]){p[1], 0} : "");
        }
        uint32_t v = 0;
        for (int i = 0; i < ndig; i++) {
            int h = llm__gb_hex(p[2 + i]);
            if (h < 0) return llm__gb_fail(b, "an escape needs %s hexadecimal digits", ndig == 2 ? "2" :
                                           ndig == 4 ? "4" : "8");
            v = v << 4 | (uint32_t)h;
        }
        if (v > LLM__CP_MAX) return llm__gb_fail(b, "escape beyond U+10FFFF%s", "");
        *cp = v;
        b->p += 2 + ndig;
        return true;
    }
    size_t len = strnlen(p, 4);
    if (llm__utf8_char((const uint8_t *)p, len) <= 0) return llm__gb_fail(b, "invalid UTF-8%s", "");
    size_t off = 0;
    *cp = llm__utf8_next((const uint8_t *)p, len, &off);
    b->p += off;
    return true;
}

static bool llm__gb_alternates(struct llm__gbuild *b, int r, bool nested);

// A repetition {m}, {m,}, {m,n} after an item: m and n (-1: unbounded).
static bool llm__gb_braces(struct llm__gbuild *b, long *m, long *n) {
    b->p++;
    llm__gb_space(b, true);
    char *end;
    *m = strtol(b->p, &end, 10);
    if (end == b->p || *m < 0 || *m > LLM__GRAMMAR_MAX_REPEAT)
        return llm__gb_fail(b, "a repetition count from 0 to %s is expected", "10000");
    b->p = end;
    llm__gb_space(b, true);
    *n = *m;
    if (*b->p == ',') {
        b->p++;
        llm__gb_space(b, true);
        *n = -1;
        if (*b->p != '}') {
            *n = strtol(b->p, &end, 10);
            if (end == b->p || *n < *m || *n > LLM__GRAMMAR_MAX_REPEAT)
                return llm__gb_fail(b, "a repetition's maximum from its minimum to %s is expected", "10000");
            b->p = end;
            llm__gb_space(b, true);
        }
    }
    if (*b->p != '}') return llm__gb_fail(b, "'}' expected%s", "");
    b->p++;
    return true;
}

// Applies a postfix operator to the elements body[r][start..) (one item).
static bool llm__gb_postfix(struct llm__gbuild *b, int r, int start) {
    char op = *b->p;
    long m = 0, n = -1;
    if (op == '{') {
        if (!llm__gb_braces(b, &m, &n)) return false;
    } else {
        b->p++;
        if (op == '+') m = 1;
        if (op == '?') n = 1;
    }
    // the item as one element: itself, or a rule holding it
    uint32_t item;
    if (b->body[r].n - start == 1) item = b->body[r].v[start];
    else {
        int s = llm__gb_rule(b, NULL, 0);
        if (s < 0) return false;
        for (int i = start; i < b->body[r].n; i++)
            if (!llm__gvec_push(&b->body[s], b->body[r].v[i])) return llm__gb_oom(b);
        if (!llm__gvec_push(&b->body[s], LLM__G_END)) return llm__gb_oom(b);
        item = LLM__G_MK(LLM__G_REF, s);
    }
    b->body[r].n = start;
    for (long i = 0; i < m; i++) if (!llm__gb_put(b, r, item)) return false;
    if (n == m) return true;
    int tail = -1;   // the rule of what may follow the m copies
    if (n < 0) {     // R ::= item R | ""
        if ((tail = llm__gb_rule(b, NULL, 0)) < 0) return false;
        if (!llm__gb_put(b, tail, item) || !llm__gb_put(b, tail, LLM__G_MK(LLM__G_REF, tail)) ||
            !llm__gb_put(b, tail, LLM__G_END) || !llm__gb_put(b, tail, LLM__G_END)) return false;
    } else {         // O_k ::= item O_k-1 | "", n - m times
        for (long k = 0; k < n - m; k++) {
            int o = llm__gb_rule(b, NULL, 0);
            if (o < 0 || !llm__gb_put(b, o, item)) return false;
            if (tail >= 0 && !llm__gb_put(b, o, LLM__G_MK(LLM__G_REF, tail))) return false;
            if (!llm__gb_put(b, o, LLM__G_END) || !llm__gb_put(b, o, LLM__G_END)) return false;
            tail = o;
        }
    }
    return llm__gb_put(b, r, LLM__G_MK(LLM__G_REF, tail));
}

// A string literal "..." into rule r (one CHARS per code point).
static bool llm__gb_literal(struct llm__gbuild *b, int r) {
    b->p++;
    while (*b->p != '"') {
        if (!*b->p || *b->p == '\n' || *b->p == '\r') return llm__gb_fail(b, "unterminated string%s", "");
        uint32_t cp;
        if (!llm__gb_char(b, &cp)) return false;
        int from = b->rng.n / 2;
        if (!llm__gb_range(b, cp, cp)) return false;
        uint32_t x = llm__gb_set(b, from, false);
        if (!x || !llm__gb_put(b, r, x)) return false;
    }
    b->p++;
    return true;
}

// A class [...] or [^...] into rule r.
static bool llm__gb_class(struct llm__gbuild *b, int r) {
    b->p++;
    bool negate = *b->p == '^';
    if (negate) b->p++;
    int from = b->rng.n / 2;
    while (*b->p != ']') {
        if (!*b->p || *b->p == '\n' || *b->p == '\r') return llm__gb_fail(b, "unterminated character class%s", "");
        uint32_t lo, hi;
        if (!llm__gb_char(b, &lo)) return false;
        hi = lo;
        if (b->p[0] == '-' && b->p[1] && b->p[1] != ']') {
            b->p++;
            if (!llm__gb_char(b, &hi)) return false;
            if (hi < lo) return llm__gb_fail(b, "a range's end is below its start%s", "");
        }
        if (!llm__gb_range(b, lo, hi)) return false;
    }
    b->p++;
    uint32_t x = llm__gb_set(b, from, negate);
    return x && llm__gb_put(b, r, x);
}

// One item (without its postfix) into rule r.
static bool llm__gb_primary(struct llm__gbuild *b, int r, bool nested) {
    char c = *b->p;
    if (c == '"') return llm__gb_literal(b, r);
    if (c == '[') return llm__gb_class(b, r);
    if (c == '.') {
        b->p++;
        int from = b->rng.n / 2;
        if (!llm__gb_range(b, 0, LLM__CP_MAX)) return false;
        uint32_t x = llm__gb_set(b, from, false);
        return x && llm__gb_put(b, r, x);
    }
    if (c == '(') {
        if (++b->depth > LLM__GRAMMAR_MAX_DEPTH) return llm__gb_fail(b, "groups nested deeper than %s", "100");
        b->p++;
        llm__gb_space(b, true);
        int g = llm__gb_rule(b, NULL, 0);
        if (g < 0 || !llm__gb_alternates(b, g, true)) return false;
        if (*b->p != ')') return llm__gb_fail(b, "')' expected%s", "");
        b->p++;
        b->depth--;
        return llm__gb_put(b, r, LLM__G_MK(LLM__G_REF, g));
    }
    if (llm__gb_word_char(c)) {
        const char *s = b->p;
        while (llm__gb_word_char(*b->p)) b->p++;
        int ref = llm__gb_named(b, s, (size_t)(b->p - s));
        return ref >= 0 && llm__gb_put(b, r, LLM__G_MK(LLM__G_REF, ref));
    }
    (void)nested;
    if (c == '<') return llm__gb_fail(b, "token references (<...>) are not supported%s", "");
    return llm__gb_fail(b, "unexpected '%s'", (char[]){c, 0});
}

// A sequence of items into rule r, then END.
static bool llm__gb_sequence(struct llm__gbuild *b, int r, bool nested) {
    for (;;) {
        char c = *b->p;
        if (!c || c == '|' || c == ')' || c == '\n' || c == '\r') break;
        int start = b->body[r].n;
        if (!llm__gb_primary(b, r, nested)) return false;
        llm__gb_space(b, nested);
        c = *b->p;
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (b->body[r].n == start) return llm__gb_fail(b, "a repetition of nothing%s", "");
            if (!llm__gb_postfix(b, r, start)) return false;
            llm__gb_space(b, nested);
        }
        if (!nested && llm__gb_word_char(*b->p)) {   // the next rule's "name ::=" ends this one
            const char *q = b->p;
            while (llm__gb_word_char(*q)) q++;
            while (*q == ' ' || *q == '\t') q++;
            if (q[0] == ':' && q[1] == ':' && q[2] == '=') return llm__gb_fail(b, "a new rule on the same line%s", "");
        }
    }
    return llm__gb_put(b, r, LLM__G_END);
}

static bool llm__gb_alternates(struct llm__gbuild *b, int r, bool nested) {
    for (;;) {
        if (!llm__gb_sequence(b, r, nested)) return false;
        const char *at = b->p;
        llm__gb_space(b, true);
        if (*b->p != '|') {
            if (!nested) b->p = at;
            return true;
        }
        b->p++;
        llm__gb_space(b, true);
    }
}

static bool llm__gb_parse(struct llm__gbuild *b) {
    for (;;) {
        llm__gb_space(b, true);
        if (!*b->p) return true;
        const char *s = b->p;
        while (llm__gb_word_char(*b->p)) b->p++;
        if (b->p == s) return llm__gb_fail(b, "a rule name is expected%s", "");
        size_t len = (size_t)(b->p - s);
        llm__gb_space(b, false);
        if (strncmp(b->p, "::=", 3)) return llm__gb_fail(b, "'::=' expected%s", "");
        b->p += 3;
        int r = llm__gb_named(b, s, len);
        if (r < 0) return false;
        if (b->defined[r]) {
            b->p = s;
            return llm__gb_fail(b, "rule '%s' is defined twice", b->names[r]);
        }
        b->defined[r] = true;
        llm__gb_space(b, true);
        if (!llm__gb_alternates(b, r, false)) return false;
        if (*b->p && *b->p != '\n' && *b->p != '\r') return llm__gb_fail(b, "unexpected '%s'", (char[]){*b->p, 0});
    }
}

// --- checks: every rule defined, no left recursion ---

// nullable[r]: rule r can match the empty text.
static void llm__gb_nullable(const struct llm__gbuild *b, bool *nullable) {
    memset(nullable, 0, (size_t)b->n_rules * sizeof(*nullable));
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < b->n_rules; r++) {
            if (nullable[r]) continue;
            bool alt_ok = true;
            for (int i = 0; i < b->body[r].n; i++) {
                uint32_t x = b->body[r].v[i];
                if (LLM__G_KIND(x) == LLM__G_END) {
                    if (alt_ok) { nullable[r] = changed = true; break; }
                    alt_ok = true;
                } else if (LLM__G_KIND(x) == LLM__G_CHARS || !nullable[LLM__G_ARG(x)]) alt_ok = false;
            }
        }
    }
}

// A rule that can reach itself without consuming a character: its name (or "a group or repetition
// in rule N"), else NULL. state: 0 unseen, 1 on the path, 2 done.
static int llm__gb_left_cycle(const struct llm__gbuild *b, const bool *nullable, uint8_t *state, int *work, int r) {
    // an explicit depth-first search: work holds (rule, element index) pairs
    int top = 0;
    work[top++] = r;
    work[top++] = 0;
    state[r] = 1;
    while (top) {
        int rr = work[top - 2], i = work[top - 1];
        const struct llm__gvec *v = &b->body[rr];
        bool pushed = false;
        while (i < v->n && !pushed) {
            uint32_t x = v->v[i];
            // is element i at a left position? (every element before it in its alternative nullable)
            bool left = true;
            for (int j = i - 1; j >= 0 && LLM__G_KIND(v->v[j]) != LLM__G_END; j--)
                if (LLM__G_KIND(v->v[j]) == LLM__G_CHARS || !nullable[LLM__G_ARG(v->v[j])]) { left = false; break; }
            i++;
            if (!left || LLM__G_KIND(x) != LLM__G_REF) continue;
            int s = (int)LLM__G_ARG(x);
            if (state[s] == 1) return s;
            if (state[s] == 0) {
                work[top - 1] = i;
                state[s] = 1;
                work[top++] = s;
                work[top++] = 0;
                pushed = true;
            }
        }
        if (!pushed) {
            state[rr] = 2;
            top -= 2;
        }
    }
    return -1;
}

static bool llm__gb_check(struct llm__gbuild *b) {
    for (int r = 0; r < b->n_rules; r++) {
        if (!b->defined[r]) {
            b->p = b->src + strlen(b->src);
            return llm__gb_fail(b, "rule '%s' is used but not defined", b->names[r]);
        }
    }
    bool *nullable = malloc((size_t)b->n_rules * sizeof(*nullable));
    uint8_t *state = calloc((size_t)b->n_rules, 1);
    int *work = malloc((size_t)b->n_rules * 2 * sizeof(*work));
    if (!nullable || !state || !work) {
        free(nullable); free(state); free(work);
        return llm__gb_oom(b);
    }
    llm__gb_nullable(b, nullable);
    int bad = -1;
    for (int r = 0; r < b->n_rules && bad < 0; r++)
        if (!state[r]) bad = llm__gb_left_cycle(b, nullable, state, work, r);
    free(nullable); free(state); free(work);
    if (bad < 0) return true;
    b->p = b->src + strlen(b->src);
    if (b->names[bad]) return llm__gb_fail(b, "rule '%s' is left-recursive (it can reach itself before a "
                                           "character)", b->names[bad]);
    return llm__gb_fail(b, "a repetition of something that can be empty, or a left-recursive group%s", "");
}

// --- the compiled grammar ---

void llm__grammar_free(struct llm__grammar *g) {
    if (!g) return;
    free(g->elem);
    free(g->alt);
    free(g->rule_alt);
    free(g->cs_off);
    free(g->rng);
    free(g->cs_ascii);
    free(g->text);
    free(g);
}

// Flattens the builder's rules into g.
static bool llm__gb_flatten(struct llm__gbuild *b, struct llm__grammar *g, int root) {
    long n_alt = 0;
    for (int r = 0; r < b->n_rules; r++)
        for (int i = 0; i < b->body[r].n; i++) n_alt += LLM__G_KIND(b->body[r].v[i]) == LLM__G_END;
    int n_cs = b->cs_off.n ? b->cs_off.n - 1 : 0;
    g->elem = malloc((size_t)(b->n_elems + b->n_rules + 1) * sizeof(*g->elem));
    g->alt = malloc((size_t)(n_alt + 1) * sizeof(*g->alt));
    g->rule_alt = malloc((size_t)(b->n_rules + 1) * sizeof(*g->rule_alt));
    g->cs_off = malloc((size_t)(n_cs + 1) * sizeof(*g->cs_off));
    g->rng = malloc((size_t)(b->rng.n + 1) * sizeof(*g->rng));
    g->cs_ascii = calloc((size_t)n_cs + 1, sizeof(*g->cs_ascii));
    if (!g->elem || !g->alt || !g->rule_alt || !g->cs_off || !g->rng || !g->cs_ascii) return llm__gb_oom(b);
    int ne = 0, na = 0;
    for (int r = 0; r < b->n_rules; r++) {
        g->rule_alt[r] = (uint32_t)na;
        bool start = true;
        for (int i = 0; i < b->body[r].n; i++) {
            if (start) g->alt[na++] = (uint32_t)ne;
            uint32_t x = b->body[r].v[i];
            g->elem[ne++] = x;
            start = LLM__G_KIND(x) == LLM__G_END;
        }
    }
    g->rule_alt[b->n_rules] = (uint32_t)na;
    g->n_elem = ne;
    g->n_rule = b->n_rules;
    g->root = root;
    if (n_cs) memcpy(g->cs_off, b->cs_off.v, (size_t)(n_cs + 1) * sizeof(*g->cs_off));
    else g->cs_off[0] = 0;
    if (b->rng.n) memcpy(g->rng, b->rng.v, (size_t)b->rng.n * sizeof(*g->rng));
    g->n_cs = n_cs;
    for (int s = 0; s < n_cs; s++)
        for (uint32_t k = g->cs_off[s]; k < g->cs_off[s + 1]; k++)
            for (uint32_t c = g->rng[2 * k]; c <= g->rng[2 * k + 1] && c < 128; c++)
                g->cs_ascii[s][c >> 6] |= 1ull << (c & 63);
    return true;
}

static void llm__gb_free(struct llm__gbuild *b) {
    for (int r = 0; r < b->n_rules; r++) {
        free(b->names[r]);
        free(b->body[r].v);
    }
    free(b->names);
    free(b->body);
    free(b->defined);
    free(b->rng.v);
    free(b->cs_off.v);
}

struct llm__grammar *llm__grammar_parse(const char *text, const char *root, struct llm__err *err) {
    struct llm__err own = {0}, *e = &own;   // (err may hold an earlier failure: the first error here stands)
    struct llm__gbuild b = {.src = text, .p = text, .e = e};
    struct llm__grammar *g = NULL;
    if (!root) root = "root";
    bool ok = llm__gb_parse(&b) && llm__gb_check(&b);
    int r = -1;
    if (ok) {
        for (int i = 0; i < b.n_rules && r < 0; i++) if (b.names[i] && !strcmp(b.names[i], root)) r = i;
        if (r < 0) ok = llm__fail(e, LLM_ERR_INVALID_ARG, "grammar: no rule '%s' (the start)", root) == LLM_OK;
    }
    if (ok && (!(g = calloc(1, sizeof(*g))) || !(g->text = llm__strndup(text, strlen(text))))) ok = llm__gb_oom(&b);
    if (ok) g->refs = 1;
    if (ok && !llm__gb_flatten(&b, g, r)) ok = false;
    llm__gb_free(&b);
    if (!ok) {
        llm__grammar_free(g);
        *err = own;
        return NULL;
    }
    return g;
}

static bool llm__gcs_has(const struct llm__grammar *g, uint32_t s, uint32_t c) {
    if (c < 128) return g->cs_ascii[s][c >> 6] >> (c & 63) & 1;
    uint32_t lo = g->cs_off[s], hi = g->cs_off[s + 1];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (c < g->rng[2 * mid]) hi = mid;
        else if (c > g->rng[2 * mid + 1]) lo = mid + 1;
        else return true;
    }
    return false;
}

// Whether set s holds a code point in [lo, hi].
static bool llm__gcs_meets(const struct llm__grammar *g, uint32_t s, uint32_t lo, uint32_t hi) {
    for (uint32_t k = g->cs_off[s]; k < g->cs_off[s + 1]; k++)
        if (g->rng[2 * k] <= hi && g->rng[2 * k + 1] >= lo) return true;
    return false;
}

// --- a request's matcher ---

#define LLM__GNONE UINT32_MAX

static uint32_t llm__gnode_hash(uint32_t pos, uint32_t parent) {
    uint64_t x = (uint64_t)pos << 32 | parent;
    x = (x ^ x >> 33) * 0xff51afd7ed558ccdull;
    x = (x ^ x >> 33) * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(x ^ x >> 33);
}

static bool llm__gmatch_grow(struct llm__gmatch *m) {
    if (m->n_nodes >= LLM__GRAMMAR_MAX_NODES) { m->full = true; return false; }
    uint32_t cap = m->cap_nodes ? m->cap_nodes * 2 : 1024;
    uint32_t *pos = realloc(m->npos, cap * sizeof(*pos));
    if (pos) m->npos = pos;
    uint32_t *par = realloc(m->npar, cap * sizeof(*par));
    if (par) m->npar = par;
    uint32_t *mark = realloc(m->mark, cap * sizeof(*mark));
    if (mark) m->mark = mark;
    uint32_t *ht = calloc((size_t)cap * 2, sizeof(*ht));
    if (!pos || !par || !mark || !ht) { free(ht); m->oom = true; return false; }
    memset(m->mark + m->cap_nodes, 0, (cap - m->cap_nodes) * sizeof(*m->mark));
    free(m->ht);
    m->ht = ht;
    m->ht_mask = cap * 2 - 1;
    for (uint32_t n = 1; n < m->n_nodes; n++) {
        uint32_t h = llm__gnode_hash(m->npos[n], m->npar[n]) & m->ht_mask;
        while (m->ht[h]) h = (h + 1) & m->ht_mask;
        m->ht[h] = n + 1;
    }
    m->cap_nodes = cap;
    return true;
}

// The node (pos, parent), made when new; LLM__GNONE: out of memory or beyond the limit.
static uint32_t llm__gnode(struct llm__gmatch *m, uint32_t pos, uint32_t parent) {
    uint32_t h = llm__gnode_hash(pos, parent) & m->ht_mask;
    for (; m->ht[h]; h = (h + 1) & m->ht_mask) {
        uint32_t n = m->ht[h] - 1;
        if (m->npos[n] == pos && m->npar[n] == parent) return n;
    }
    if (m->n_nodes == m->cap_nodes) {
        if (!llm__gmatch_grow(m)) return LLM__GNONE;
        return llm__gnode(m, pos, parent);
    }
    uint32_t n = m->n_nodes++;
    m->npos[n] = pos;
    m->npar[n] = parent;
    m->ht[h] = n + 1;
    return n;
}

// Appends x to a growing array (*v, *n of *cap); false: out of memory (m->oom).
static bool llm__gu32_push(struct llm__gmatch *m, uint32_t **v, size_t *n, size_t *cap, uint32_t x) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        uint32_t *p = realloc(*v, c * sizeof(*p));
        if (!p) { m->oom = true; return false; }
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

static bool llm__gpool_push(struct llm__gmatch *m, uint32_t x) {
    return llm__gu32_push(m, &m->pool, &m->pool_n, &m->pool_cap, x);
}

static bool llm__gwork_push(struct llm__gmatch *m, uint32_t x) {
    return llm__gu32_push(m, &m->work, &m->work_n, &m->work_cap, x);
}

// Appends to the pool the expanded stacks of the nodes on the work list (each top a CHARS, or 0),
// none twice (marked with m->gen).
static bool llm__gexpand(struct llm__gmatch *m) {
    const struct llm__grammar *g = m->g;
    while (m->work_n) {
        uint32_t n = m->work[--m->work_n];
        if (m->mark[n] == m->gen) continue;
        m->mark[n] = m->gen;
        if (n == 0) {
            if (!llm__gpool_push(m, 0)) return false;
            continue;
        }
        uint32_t pos = m->npos[n], x = g->elem[pos];
        if (LLM__G_KIND(x) == LLM__G_CHARS) {
            if (!llm__gpool_push(m, n)) return false;
        } else if (LLM__G_KIND(x) == LLM__G_END) {
            if (!llm__gwork_push(m, m->npar[n])) return false;
        } else {
            // where to go on after the rule: nowhere new when the reference ends its alternative
            uint32_t cont = LLM__G_KIND(g->elem[pos + 1]) == LLM__G_END ? m->npar[n]
                                                                      : llm__gnode(m, pos + 1, m->npar[n]);
            if (cont == LLM__GNONE) return false;
            uint32_t r = LLM__G_ARG(x);
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                uint32_t s = llm__gnode(m, g->alt[a], cont);
                if (s == LLM__GNONE || !llm__gwork_push(m, s)) return false;
            }
        }
    }
    return true;
}

static void llm__gnext_gen(struct llm__gmatch *m) {
    if (++m->gen == 0) {   // wrapped: forget every mark
        memset(m->mark, 0, m->cap_nodes * sizeof(*m->mark));
        m->gen = 1;
    }
}

// Appends to the pool the stacks after code point c from the stacks pool[off .. off + n).
static bool llm__gadvance_cp(struct llm__gmatch *m, size_t off, int n, uint32_t c) {
    const struct llm__grammar *g = m->g;
    llm__gnext_gen(m);
    for (int i = 0; i < n; i++) {
        uint32_t s = m->pool[off + (size_t)i];
        if (s == 0 || !llm__gcs_has(g, LLM__G_ARG(g->elem[m->npos[s]]), c)) continue;
        uint32_t next = llm__gnode(m, m->npos[s] + 1, m->npar[s]);
        if (next == LLM__GNONE || !llm__gwork_push(m, next)) return false;
        if (!llm__gexpand(m)) return false;
    }
    return true;
}

// Whether a stack of ids[0..n) accepts a code point in [lo, hi].
static bool llm__gviable_ids(const struct llm__gmatch *m, const uint32_t *ids, int n, uint32_t lo, uint32_t hi) {
    const struct llm__grammar *g = m->g;
    for (int i = 0; i < n; i++)
        if (ids[i] && llm__gcs_meets(g, LLM__G_ARG(g->elem[m->npos[ids[i]]]), lo, hi)) return true;
    return false;
}

// Whether a stack of pool[off .. off + n) accepts a code point in [lo, hi].
static bool llm__gviable(const struct llm__gmatch *m, size_t off, int n, uint32_t lo, uint32_t hi) {
    const struct llm__grammar *g = m->g;
    for (int i = 0; i < n; i++) {
        uint32_t s = m->pool[off + (size_t)i];
        if (s && llm__gcs_meets(g, LLM__G_ARG(g->elem[m->npos[s]]), lo, hi)) return true;
    }
    return false;
}

// The code point of a complete UTF-8 sequence kept as raw bits (its lead byte, then 6 bits per
// continuation byte): the lead's length marker dropped.
static uint32_t llm__gcp_value(uint32_t raw) {
    return raw & (raw < 1u << 14 ? 0x7FFu : raw < 1u << 20 ? 0xFFFFu : 0x1FFFFFu);
}

// One byte from state *in into *out (its stacks appended to the pool, or *in's own when the byte
// only goes on with a code point); false: no stack accepts it (or out of memory: m->oom, m->full).
// A code point in progress is kept raw (cp: its lead byte and continuation bits; need: the bytes
// still to come); overlong forms, surrogates and values beyond U+10FFFF are refused by the lead's
// limits on the next byte, as UTF-8 requires, so the code points it can still become are a range.
static bool llm__gadvance_byte(struct llm__gmatch *m, const struct llm__gstate *in, uint8_t b,
                               struct llm__gstate *out) {
    uint32_t cp = in->cp, need = in->need;
    if (need == 0) {
        if (b < 0x80) {
            out->off = m->pool_n;
            if (!llm__gadvance_cp(m, in->off, in->n, b)) return false;
            out->n = (int)(m->pool_n - out->off);
            out->cp = out->need = 0;
            return out->n > 0;
        }
        if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b >= 0xE0 && b <= 0xEF) need = 2;
        else if (b >= 0xF0 && b <= 0xF4) need = 3;
        else return false;
        cp = b;
    } else {
        if ((b & 0xC0) != 0x80) return false;
        if (cp < 0x100 && ((cp == 0xE0 && b < 0xA0) || (cp == 0xED && b >= 0xA0) || (cp == 0xF0 && b < 0x90) ||
                           (cp == 0xF4 && b >= 0x90)))
            return false;   // overlong, a surrogate, or beyond U+10FFFF
        cp = cp << 6 | (b & 0x3Fu);
        need--;
        if (need == 0) {
            out->off = m->pool_n;
            if (!llm__gadvance_cp(m, in->off, in->n, llm__gcp_value(cp))) return false;
            out->n = (int)(m->pool_n - out->off);
            out->cp = out->need = 0;
            return out->n > 0;
        }
    }
    // the code points it can become: at least the smallest of its length (the lead's limits keep out
    // the rest of the overlong forms), at most U+10FFFF
    uint32_t full = cp << (6 * need), lo = llm__gcp_value(full), hi = lo | ((1u << (6 * need)) - 1);
    uint32_t least = full < 1u << 14 ? 0x80u : full < 1u << 20 ? 0x800u : 0x10000u;
    if (lo < least) lo = least;
    if (hi > LLM__CP_MAX) hi = LLM__CP_MAX;
    if (!llm__gviable(m, in->off, in->n, lo, hi)) return false;
    *out = *in;
    out->cp = cp;
    out->need = need;
    return true;
}

static int llm__gu32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// The current state from pool[off .. off + n) and the code point in progress (sorted: the same
// stacks are the same state).
static bool llm__gset_cur(struct llm__gmatch *m, size_t off, int n, uint32_t cp, uint32_t need) {
    if (n > m->cur_cap) {
        uint32_t *c = realloc(m->cur, (size_t)n * sizeof(*c));
        if (!c) { m->oom = true; return false; }
        m->cur = c;
        m->cur_cap = n;
    }
    memmove(m->cur, m->pool + off, (size_t)n * sizeof(*m->cur));
    qsort(m->cur, (size_t)n, sizeof(*m->cur), llm__gu32_cmp);
    m->n_cur = n;
    m->cp = cp;
    m->need = need;
    m->cur_dset = -1;
    return true;
}

// --- states as a DFA: interned sets of stacks and their transitions, built as walked ---
//
// Masks and token checks run the same few transitions again and again (inside a string, every
// letter leads to the same state), so each transition is computed once, by the pushdown
// automaton, and then looked up. A DFA state is a set of stacks between code points; a position
// of a walk is a DFA state and the code point in progress. An ASCII byte's transition, and whether
// a lead byte can start a code point some stack takes, are in the state's next[256]; a code point
// completed from several bytes, and the continuation bytes before it, go through a hash table
// keyed by (state, bits so far). At most LLM__GRAMMAR_DSETS states are kept; beyond, they are
// forgotten between walks and met again.

struct llm__gpos { int32_t d; uint32_t cp, need; };

static uint64_t llm__gds_hash(const uint32_t *ids, int n) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) h = (h ^ ids[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

static void llm__gds_reset(struct llm__gmatch *m) {
    for (int i = 0; i < m->n_dsets; i++) free(m->dsets[i].next);
    m->n_dsets = 0;
    m->dset_ids_n = 0;
    if (m->dset_ht) memset(m->dset_ht, 0, ((size_t)m->dset_ht_mask + 1) * sizeof(*m->dset_ht));
    if (m->cp_key) memset(m->cp_key, 0, ((size_t)m->cp_mask + 1) * sizeof(*m->cp_key));
    m->n_cp = 0;
    m->cur_dset = -1;
}

// The DFA state of stacks ids[0..n) (sorted), made when new; -1: beyond LLM__GRAMMAR_DSETS, or out
// of memory (m->oom).
static int32_t llm__gds_intern(struct llm__gmatch *m, const uint32_t *ids, int n) {
    if (!m->dset_ht) {
        if (!(m->dset_ht = calloc(2 * LLM__GRAMMAR_DSETS, sizeof(*m->dset_ht)))) { m->oom = true; return -1; }
        m->dset_ht_mask = 2 * LLM__GRAMMAR_DSETS - 1;
    }
    uint64_t h = llm__gds_hash(ids, n);
    uint32_t slot = (uint32_t)h & m->dset_ht_mask;
    for (; m->dset_ht[slot]; slot = (slot + 1) & m->dset_ht_mask) {
        const struct llm__gdset *d = &m->dsets[m->dset_ht[slot] - 1];
        if (d->hash == h && d->n == n && !memcmp(m->dset_ids + d->off, ids, (size_t)n * sizeof(*ids)))
            return (int32_t)m->dset_ht[slot] - 1;
    }
    if (m->n_dsets >= LLM__GRAMMAR_DSETS) return -1;
    if (m->n_dsets == m->cap_dsets) {
        int cap = m->cap_dsets ? 2 * m->cap_dsets : 64;
        struct llm__gdset *d = realloc(m->dsets, (size_t)cap * sizeof(*d));
        if (!d) { m->oom = true; return -1; }
        m->dsets = d;
        m->cap_dsets = cap;
    }
    if (m->dset_ids_n + (size_t)n > m->dset_ids_cap) {
        size_t cap = LLM__MAX(2 * m->dset_ids_cap, m->dset_ids_n + (size_t)n + 1024);
        uint32_t *p = realloc(m->dset_ids, cap * sizeof(*p));
        if (!p) { m->oom = true; return -1; }
        m->dset_ids = p;
        m->dset_ids_cap = cap;
    }
    memcpy(m->dset_ids + m->dset_ids_n, ids, (size_t)n * sizeof(*ids));
    m->dsets[m->n_dsets] = (struct llm__gdset){.off = m->dset_ids_n, .n = n, .hash = h};
    m->dset_ids_n += (size_t)n;
    m->dset_ht[slot] = (uint32_t)++m->n_dsets;
    return m->n_dsets - 1;
}

// The hash table slot of key (state d, bits so far with need below them); found or empty.
static uint32_t llm__gcp_slot(const struct llm__gmatch *m, uint64_t key) {
    uint64_t x = key * 0x9e3779b97f4a7c15ull;
    uint32_t slot = (uint32_t)(x >> 40) & m->cp_mask;
    while (m->cp_key[slot] && m->cp_key[slot] != key) slot = (slot + 1) & m->cp_mask;
    return slot;
}

// The state after code point c from DFA state d: a state, -1 none takes c, -3 not known.
static int32_t llm__gds_apply(struct llm__gmatch *m, int32_t d, uint32_t c) {
    const struct llm__gdset *s = &m->dsets[d];
    m->pool_n = 0;
    for (int i = 0; i < s->n; i++) if (!llm__gpool_push(m, m->dset_ids[s->off + (size_t)i])) return -3;
    size_t off = m->pool_n;
    if (!llm__gadvance_cp(m, 0, s->n, c)) return -3;
    int n = (int)(m->pool_n - off);
    if (n == 0) return -1;
    qsort(m->pool + off, (size_t)n, sizeof(*m->pool), llm__gu32_cmp);
    int32_t to = llm__gds_intern(m, m->pool + off, n);
    return to < 0 ? -3 : to;
}

// Byte b from position *p (changed); 1: it can come, 0: it cannot, -3: not known (the pushdown
// automaton decides).
static int llm__gds_step(struct llm__gmatch *m, struct llm__gpos *p, uint8_t b) {
    struct llm__gdset *s = &m->dsets[p->d];
    if (p->need == 0) {
        if (!s->next) {
            if (!(s->next = malloc(256 * sizeof(*s->next)))) { m->oom = true; return -3; }
            for (int i = 0; i < 256; i++) s->next[i] = -2;
        }
        int32_t to = s->next[b];
        if (to == -2) {
            if (b < 0x80) to = llm__gds_apply(m, p->d, b);
            else {   // a lead byte: whether a stack takes a code point it can start
                int need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
                uint32_t lo = need ? llm__gcp_value((uint32_t)b << (6 * need)) : 0, hi = lo | ((1u << (6 * need)) - 1);
                static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
                s = &m->dsets[p->d];
                to = need && llm__gviable_ids(m, m->dset_ids + s->off, s->n, LLM__MAX(lo, least[need]),
                                               LLM__MIN(hi, LLM__CP_MAX)) ? 0 : -1;
            }
            if (to == -3) return -3;
            m->dsets[p->d].next[b] = to;
        }
        if (to < 0) return 0;
        if (b < 0x80) p->d = to;
        else {
            p->cp = b;
            p->need = b <= 0xDF ? 1 : b <= 0xEF ? 2 : 3;
        }
        return 1;
    }
    if ((b & 0xC0) != 0x80) return 0;
    uint32_t cp = p->cp;
    if (cp < 0x100 && ((cp == 0xE0 && b < 0xA0) || (cp == 0xED && b >= 0xA0) || (cp == 0xF0 && b < 0x90) ||
                       (cp == 0xF4 && b >= 0x90)))
        return 0;
    cp = cp << 6 | (b & 0x3Fu);
    uint32_t need = p->need - 1;
    if (!m->cp_key) {
        if (!(m->cp_key = calloc(LLM__GRAMMAR_CPS, sizeof(*m->cp_key))) ||
            !(m->cp_val = malloc(LLM__GRAMMAR_CPS * sizeof(*m->cp_val)))) { m->oom = true; return -3; }
        m->cp_mask = LLM__GRAMMAR_CPS - 1;
    }
    uint64_t key = ((uint64_t)(uint32_t)p->d << 32 | (uint64_t)cp << 2 | need) + 1;
    uint32_t slot = llm__gcp_slot(m, key);
    int32_t to;
    if (m->cp_key[slot]) to = m->cp_val[slot];
    else {
        if (need == 0) to = llm__gds_apply(m, p->d, llm__gcp_value(cp));
        else {   // the code points it can still become: at least the smallest of its length
            uint32_t full = cp << (6 * need), lo = llm__gcp_value(full), hi = lo | ((1u << (6 * need)) - 1);
            uint32_t least = full < 1u << 14 ? 0x80u : full < 1u << 20 ? 0x800u : 0x10000u;
            const struct llm__gdset *s2 = &m->dsets[p->d];
            lo = LLM__MAX(lo, least);
            hi = LLM__MIN(hi, LLM__CP_MAX);
            to = llm__gviable_ids(m, m->dset_ids + s2->off, s2->n, lo, hi) ? 0 : -1;
        }
        if (to == -3) return -3;
        if (m->n_cp < LLM__GRAMMAR_CPS / 2) {   // (kept at most half full: a full one is forgotten with the states)
            slot = llm__gcp_slot(m, key);
            m->cp_key[slot] = key;
            m->cp_val[slot] = to;
            m->n_cp++;
        }
    }
    if (to < 0) return 0;
    if (need == 0) {
        p->d = to;
        p->cp = p->need = 0;
    } else {
        p->cp = cp;
        p->need = need;
    }
    return 1;
}

// The current position; false: no DFA state for it (beyond the limit or out of memory).
static bool llm__gds_cur(struct llm__gmatch *m, struct llm__gpos *p) {
    if (m->cur_dset < 0) m->cur_dset = llm__gds_intern(m, m->cur, m->n_cur);
    *p = (struct llm__gpos){m->cur_dset, m->cp, m->need};
    return m->cur_dset >= 0;
}

// Runs bytes s[0..n) through the DFA from the current position into *p: 1 they can come, 0 they
// cannot, -3 the DFA could not say (then the pushdown automaton decides).
static int llm__gds_run(struct llm__gmatch *m, const uint8_t *s, size_t n, struct llm__gpos *p) {
    if (!llm__gds_cur(m, p)) return -3;
    for (size_t i = 0; i < n; i++) {
        int r = llm__gds_step(m, p, s[i]);
        if (r != 1) return r;
    }
    return 1;
}

void llm__gmatch_free(struct llm__gmatch *m) {
    free(m->npos);
    free(m->npar);
    free(m->mark);
    free(m->ht);
    free(m->pool);
    free(m->work);
    free(m->cur);
    for (int i = 0; i < LLM__GRAMMAR_CACHE; i++) free(m->cache[i].key);
    free(m->cache_mask);
    for (int i = 0; i < m->n_dsets; i++) free(m->dsets[i].next);
    free(m->dsets);
    free(m->dset_ids);
    free(m->dset_ht);
    free(m->cp_key);
    free(m->cp_val);
    memset(m, 0, sizeof(*m));
}

// A matcher at the start of g's root rule; false: out of memory (m is freed).
bool llm__gmatch_init(struct llm__gmatch *m, const struct llm__grammar *g) {
    memset(m, 0, sizeof(*m));
    m->g = g;
    m->cur_dset = -1;
    bool ok = llm__gmatch_grow(m);
    if (ok) {
        m->npos[0] = m->npar[0] = 0;   // node 0: the empty stack (not in the hash table)
        m->n_nodes = 1;
        m->pool_n = 0;
        llm__gnext_gen(m);
        for (uint32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1] && ok; a++) {
            uint32_t s = llm__gnode(m, g->alt[a], 0);
            ok = s != LLM__GNONE && llm__gwork_push(m, s);
        }
        ok = ok && llm__gexpand(m) && llm__gset_cur(m, 0, (int)m->pool_n, 0, 0);
    }
    if (!ok) llm__gmatch_free(m);
    return ok;
}

// Runs bytes s[0..n) from the current state; the final state in *st (its stacks in the pool).
static bool llm__gmatch_run(struct llm__gmatch *m, const uint8_t *s, size_t n, struct llm__gstate *st) {
    m->pool_n = 0;
    for (int i = 0; i < m->n_cur; i++) if (!llm__gpool_push(m, m->cur[i])) return false;
    *st = (struct llm__gstate){.off = 0, .n = m->n_cur, .cp = m->cp, .need = m->need};
    for (size_t i = 0; i < n; i++) {
        struct llm__gstate next;
        if (!llm__gadvance_byte(m, st, s[i], &next)) return false;
        *st = next;
    }
    return true;
}

// Whether bytes s[0..n) can continue the text (the state does not change).
bool llm__gmatch_ok(struct llm__gmatch *m, const void *s, size_t n) {
    struct llm__gpos p;
    int r = llm__gds_run(m, s, n, &p);
    if (r != -3) return r == 1;
    struct llm__gstate st;
    return llm__gmatch_run(m, s, n, &st);
}

// Goes on with bytes s[0..n); false (the state unchanged): they cannot continue the text.
bool llm__gmatch_accept(struct llm__gmatch *m, const void *s, size_t n) {
    struct llm__gpos p;
    int r = llm__gds_run(m, s, n, &p);
    if (r == 0) return false;
    if (r == 1) {
        const struct llm__gdset *ds = &m->dsets[p.d];
        m->pool_n = 0;
        for (int i = 0; i < ds->n; i++) if (!llm__gpool_push(m, m->dset_ids[ds->off + (size_t)i])) return false;
        if (!llm__gset_cur(m, 0, ds->n, p.cp, p.need)) return false;
        m->cur_dset = p.d;
        return true;
    }
    struct llm__gstate st;
    return llm__gmatch_run(m, s, n, &st) && llm__gset_cur(m, st.off, st.n, st.cp, st.need);
}

// Whether the text may end here; and whether it must (nothing can follow).
bool llm__gmatch_can_end(const struct llm__gmatch *m) { return m->need == 0 && m->n_cur && m->cur[0] == 0; }
bool llm__gmatch_must_end(const struct llm__gmatch *m) { return m->need == 0 && m->n_cur == 1 && m->cur[0] == 0; }

// --- the token trie and masks ---

void llm__gtrie_free(struct llm__gtrie *t) {
    free(t->byte);
    free(t->depth);
    free(t->skip);
    free(t->tok_off);
    free(t->tok);
    free(t->tb_off);
    free(t->tb);
    free(t->eog);
    memset(t, 0, sizeof(*t));
}

struct llm__gtok { const uint8_t *p; uint32_t len; int32_t id; };

static int llm__gtok_cmp(const void *a, const void *b) {
    const struct llm__gtok *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// Each token's bytes (its text without special tokens' text); t->eog: the end-of-generation ids.
static bool llm__gtrie_bytes(struct llm__gtrie *t, const struct llm__vocab *v) {
    size_t total = 0;
    for (int id = 0; id < v->n; id++) {
        int k = llm__token_piece(v, id, false, NULL, 0);
        total += k > 0 && !v->eog[id] ? (size_t)k : 0;
        t->n_eog += v->eog[id] != 0;
    }
    t->tb_off = malloc(((size_t)v->n + 1) * sizeof(*t->tb_off));
    t->tb = malloc(total + 1);
    t->eog = malloc(((size_t)t->n_eog + 1) * sizeof(*t->eog));
    if (!t->tb_off || !t->tb || !t->eog || total > UINT32_MAX) return false;
    uint32_t at = 0;
    t->n_eog = 0;
    for (int id = 0; id < v->n; id++) {
        t->tb_off[id] = at;
        if (v->eog[id]) { t->eog[t->n_eog++] = id; continue; }
        int k = llm__token_piece(v, id, false, (char *)t->tb + at, total - at);
        if (k > 0) at += (uint32_t)k;
    }
    t->tb_off[v->n] = at;
    t->n_vocab = v->n;
    return true;
}

// The trie of v's tokens by their bytes; false: out of memory.
bool llm__gtrie_build(struct llm__gtrie *t, const struct llm__vocab *v) {
    memset(t, 0, sizeof(*t));
    struct llm__gtok *toks = NULL;
    uint32_t *stk = NULL;
    bool ok = llm__gtrie_bytes(t, v);
    int nt = 0;
    size_t max_nodes = (size_t)t->tb_off[v->n] + 1, max_len = 1;
    if (ok) ok = (toks = malloc(((size_t)v->n + 1) * sizeof(*toks))) != NULL;
    for (int id = 0; ok && id < v->n; id++) {
        uint32_t len = t->tb_off[id + 1] - t->tb_off[id];
        if (!len) continue;
        toks[nt++] = (struct llm__gtok){t->tb + t->tb_off[id], len, id};
        if (len > max_len) max_len = len;
    }
    if (ok) {
        qsort(toks, (size_t)nt, sizeof(*toks), llm__gtok_cmp);
        t->byte = malloc(max_nodes);
        t->depth = malloc(max_nodes * sizeof(*t->depth));
        t->skip = malloc(max_nodes * sizeof(*t->skip));
        t->tok_off = malloc((max_nodes + 1) * sizeof(*t->tok_off));
        t->tok = malloc(((size_t)nt + 1) * sizeof(*t->tok));
        stk = malloc((max_len + 1) * sizeof(*stk));
        ok = t->byte && t->depth && t->skip && t->tok_off && t->tok && stk && max_len <= 65535;
    }
    uint32_t n = 0, len = 0, ntok = 0;   // nodes, the current path's length, tokens placed
    for (int k = 0; ok && k < nt; k++) {
        const struct llm__gtok *s = &toks[k];
        uint32_t common = 0;
        while (common < len && common < s->len && t->byte[stk[common + 1]] == s->p[common]) common++;
        for (; len > common; len--) t->skip[stk[len]] = n;
        for (; len < s->len; len++) {
            t->byte[n] = s->p[len];
            t->depth[n] = (uint16_t)(len + 1);
            t->tok_off[n] = ntok;
            stk[len + 1] = n++;
        }
        t->tok[ntok++] = s->id;
    }
    for (; ok && len > 0; len--) t->skip[stk[len]] = n;
    if (ok) {
        t->tok_off[n] = ntok;
        t->n = n;
        t->max_depth = (int)max_len;
    }
    free(toks);
    free(stk);
    if (!ok) llm__gtrie_free(t);
    return ok;
}

static uint64_t llm__gstate_hash(const struct llm__gmatch *m) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)m->cp << 8 ^ m->need;
    for (int i = 0; i < m->n_cur; i++) h = (h ^ m->cur[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

// The cache slot that holds the current state's mask, or -1.
static int llm__gcache_find(const struct llm__gmatch *m, uint64_t h) {
    for (int i = 0; i < LLM__GRAMMAR_CACHE; i++) {
        const struct llm__gcache *c = &m->cache[i];
        if (c->key && c->hash == h && c->n == m->n_cur && c->cp == m->cp && c->need == m->need &&
            !memcmp(c->key, m->cur, (size_t)m->n_cur * sizeof(*m->cur)))
            return i;
    }
    return -1;
}

// Sets m->err from why the matcher failed (unless set); false.
static bool llm__gmatch_error(struct llm__gmatch *m) {
    if (m->err.status != LLM_OK) return false;
    if (m->full) llm__fail(&m->err, LLM_ERR_INVALID_ARG, "grammar: the matcher's state grew beyond %u stack nodes",
                           LLM__GRAMMAR_MAX_NODES);
    else llm__fail(&m->err, LLM_ERR_NOMEM, "grammar: out of memory");
    return false;
}

// The walk of the trie from the current state through the DFA; false: it could not say (the walk
// below decides).
static bool llm__gmask_walk_dfa(struct llm__gmatch *m, const struct llm__gtrie *t, uint64_t *mask) {
    struct llm__gpos lvl[LLM__GRAMMAR_MAX_TOKEN + 1];
    if (t->max_depth > LLM__GRAMMAR_MAX_TOKEN) return false;
    if (m->n_dsets > LLM__GRAMMAR_DSETS / 2 || m->n_cp >= LLM__GRAMMAR_CPS / 4) llm__gds_reset(m);
    if (!llm__gds_cur(m, &lvl[0])) return false;
    for (uint32_t i = 0; i < t->n;) {
        int d = t->depth[i];
        lvl[d] = lvl[d - 1];
        int r = llm__gds_step(m, &lvl[d], t->byte[i]);
        if (r == -3) return false;
        if (r == 0) {
            i = t->skip[i];
            continue;
        }
        for (uint32_t k = t->tok_off[i]; k < t->tok_off[i + 1]; k++) mask[t->tok[k] >> 6] |= 1ull << (t->tok[k] & 63);
        i++;
    }
    return true;
}

// The walk of the trie from the current state: the bits of the tokens that can continue the text.
static bool llm__gmask_walk(struct llm__gmatch *m, const struct llm__gtrie *t, uint64_t *mask) {
    struct llm__gstate lvl[LLM__GRAMMAR_MAX_TOKEN + 1];
    size_t top[LLM__GRAMMAR_MAX_TOKEN + 1];
    if (t->max_depth > LLM__GRAMMAR_MAX_TOKEN) {
        llm__fail(&m->err, LLM_ERR_INVALID_ARG, "grammar: a token of more than %d bytes", LLM__GRAMMAR_MAX_TOKEN);
        return false;
    }
    m->pool_n = 0;
    for (int i = 0; i < m->n_cur; i++) if (!llm__gpool_push(m, m->cur[i])) return false;
    lvl[0] = (struct llm__gstate){.off = 0, .n = m->n_cur, .cp = m->cp, .need = m->need};
    top[0] = m->pool_n;
    for (uint32_t i = 0; i < t->n;) {
        int d = t->depth[i];
        m->pool_n = top[d - 1];
        if (!llm__gadvance_byte(m, &lvl[d - 1], t->byte[i], &lvl[d])) {
            if (m->oom || m->full) return false;
            i = t->skip[i];
            continue;
        }
        top[d] = m->pool_n;
        for (uint32_t k = t->tok_off[i]; k < t->tok_off[i + 1]; k++) mask[t->tok[k] >> 6] |= 1ull << (t->tok[k] & 63);
        i++;
    }
    return true;
}

// mask (n_vocab bits) = the tokens that can continue the text: those whose bytes some stack
// accepts, and the end-of-generation ones when the text may end. false: out of memory or the
// matcher's state beyond its limits (the message in m->err).
bool llm__gmatch_mask(struct llm__gmatch *m, const struct llm__gtrie *t, uint64_t *mask) {
    size_t words = ((size_t)t->n_vocab + 63) / 64;
    if (!m->cache_mask) {
        if (!(m->cache_mask = malloc(LLM__GRAMMAR_CACHE * words * sizeof(*m->cache_mask)))) m->oom = true;
    }
    uint64_t h = llm__gstate_hash(m);
    int slot = m->cache_mask ? llm__gcache_find(m, h) : -1;
    if (slot >= 0) {
        memcpy(mask, m->cache_mask + (size_t)slot * words, words * sizeof(*mask));
        m->cache_hits++;
        return true;
    }
    memset(mask, 0, words * sizeof(*mask));
    if (!m->oom && !llm__gmask_walk_dfa(m, t, mask)) {
        if (m->oom || m->full) return llm__gmatch_error(m);
        memset(mask, 0, words * sizeof(*mask));
        if (!llm__gmask_walk(m, t, mask)) return llm__gmatch_error(m);
    }
    if (m->oom) return llm__gmatch_error(m);
    if (llm__gmatch_can_end(m))
        for (int k = 0; k < t->n_eog; k++) mask[t->eog[k] >> 6] |= 1ull << (t->eog[k] & 63);
    m->cache_misses++;
    // into the cache, round robin
    struct llm__gcache *c = &m->cache[m->cache_next];
    uint32_t *key = realloc(c->key, ((size_t)m->n_cur + 1) * sizeof(*key));
    if (key) {
        memcpy(key, m->cur, (size_t)m->n_cur * sizeof(*key));
        *c = (struct llm__gcache){.key = key, .hash = h, .n = m->n_cur, .cp = m->cp, .need = m->need};
        memcpy(m->cache_mask + (size_t)m->cache_next * words, mask, words * sizeof(*mask));
        m->cache_next = (m->cache_next + 1) % LLM__GRAMMAR_CACHE;
    }
    return true;
}

// Whether token id can continue the text (the state does not change).
bool llm__gmatch_token_ok(struct llm__gmatch *m, const struct llm__gtrie *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return false;
    uint32_t len = t->tb_off[id + 1] - t->tb_off[id];
    if (!len) {
        for (int k = 0; k < t->n_eog; k++) if (t->eog[k] == id) return llm__gmatch_can_end(m);
        return false;
    }
    return llm__gmatch_ok(m, t->tb + t->tb_off[id], len);
}

// Goes on with token id (an end-of-generation token: when the text may end); false: it cannot
// continue the text (the state unchanged).
bool llm__gmatch_token(struct llm__gmatch *m, const struct llm__gtrie *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return false;
    uint32_t len = t->tb_off[id + 1] - t->tb_off[id];
    if (!len) return llm__gmatch_token_ok(m, t, id);
    return llm__gmatch_accept(m, t->tb + t->tb_off[id], len);
}

// --- sampling under a grammar ---

#define LLM__GRAMMAR_TRIES 8   // unconstrained draws tried before the whole mask

// row = logits with the tokens m refuses at -inf (mask: the allowed ones); false: none is allowed,
// or the mask failed (m->err says why).
bool llm__grammar_row(struct llm__gmatch *m, const struct llm__gtrie *t, const float *logits, int n,
                      uint64_t *mask, float *row) {
    if (!llm__gmatch_mask(m, t, mask)) return false;
    bool any = false;
    for (int i = 0; i < n; i++) {
        bool ok = i < t->n_vocab && (mask[i >> 6] >> (i & 63) & 1);
        row[i] = ok ? logits[i] : -INFINITY;
        any |= ok;
    }
    if (!any) llm__fail(&m->err, LLM_ERR_INVALID_ARG, "grammar: no token of the vocabulary can continue the text");
    return any;
}

struct llm__gok { struct llm__gmatch *m; const struct llm__gtrie *t; };

static bool llm__gok(void *ctx, int32_t id) {
    struct llm__gok *c = ctx;
    return llm__gmatch_token_ok(c->m, c->t, id);
}

// A token drawn from logits as if those the grammar refuses had -inf logits before every sampler
// stage: greedy takes the best allowed token, sampling follows the chain's distribution over the
// allowed ones. Without computing the whole mask where that gives the same law: greedy, top-k,
// top-p and min-p check tokens best first (llm__sampler_sample_checked); temperature alone draws
// and removes refused draws (rejection sampling), at most LLM__GRAMMAR_TRIES times. Otherwise the
// whole mask (row: [n_vocab] scratch, mask: n_vocab bits). The token is accepted into the
// sampler's history, not into the matcher. -1: no token can continue the text (m->err says why).
int32_t llm__grammar_sample(llm_sampler *s, struct llm__gmatch *m, const struct llm__gtrie *t,
                            const float *logits, uint64_t *mask, float *row) {
    const int n = s->n_vocab;
    const bool plain = s->p.temperature > 0.0f && (s->p.top_k <= 0 || s->p.top_k >= n) && s->p.top_p >= 1.0f &&
                       s->p.min_p <= 0.0f;
    double sum;
    if (plain) {
        int k = llm__sampler_dist(s, logits, &sum);
        for (int tries = 0; tries < LLM__GRAMMAR_TRIES && sum > 0.0; tries++) {
            int32_t tok = llm__sampler_draw(s, k, sum, -1, 0.0);
            if (llm__gmatch_token_ok(m, t, tok)) {
                llm_sampler_accept(s, tok);
                return tok;
            }
            if (m->oom || m->full) break;
            for (int i = 0; i < k; i++)
                if (s->idx[i] == tok) {
                    sum -= s->probs[i];
                    s->probs[i] = 0.0f;
                    break;
                }
        }
    } else {
        struct llm__gok ctx = {m, t};
        int32_t tok = llm__sampler_sample_checked(s, logits, llm__gok, &ctx);
        if (tok >= 0) return tok;
        if (tok == -2) {
            llm__fail(&m->err, LLM_ERR_INVALID_ARG, "grammar: no token of the vocabulary can continue the text");
            return -1;
        }
    }
    const bool greedy = !(s->p.temperature > 0.0f);
    if (!llm__grammar_row(m, t, logits, n, mask, row)) return -1;
    int k = llm__sampler_dist(s, row, &sum);
    int32_t tok = greedy ? s->idx[0] : llm__sampler_draw(s, k, sum, -1, 0.0);
    if (!(tok >= 0 && tok < t->n_vocab && (mask[tok >> 6] >> (tok & 63) & 1))) {
        // rounding carried the draw past the last allowed candidate: the most likely allowed one
        float best = -INFINITY;
        for (int i = 0; i < k; i++)
            if (row[s->idx[i]] > best) { best = row[s->idx[i]]; tok = s->idx[i]; }
    }
    llm_sampler_accept(s, tok);
    return tok;
}

// --- checking a grammar alone ---

enum llm_status llm_grammar_check(const char *grammar, char *err, size_t err_size) {
    struct llm__err e = {0};
    struct llm__grammar *g = NULL;
    if (!grammar) llm__fail(&e, LLM_ERR_INVALID_ARG, "grammar: none given");
    else g = llm__grammar_parse(grammar, NULL, &e);
    llm__grammar_free(g);
    if (g) return LLM_OK;
    if (err && err_size) snprintf(err, err_size, "%s", e.msg);
    return e.status;
}
