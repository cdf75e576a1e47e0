// json_schema.c — a JSON Schema as a grammar (GBNF) whose texts are the JSON values the schema
// accepts: llm_json_schema_to_grammar, for response_format / --json-schema.
//
// Each schema (and sub-schema) becomes a rule; $ref to #/$defs/NAME or #/definitions/NAME becomes
// a reference to that definition's rule (so recursive schemas work). What the grammar cannot
// hold exactly is refused with the keyword's name, never turned into a weaker constraint; the
// exceptions are documented (docs/structured-output.md): oneOf is taken as anyOf, a regular
// expression's `.` takes any character of a JSON string, a name written with escapes (\u0061 for
// a) counts as other than the listed properties' names. Objects list their properties in the
// schema's order; when the schema lists properties and says nothing of additionalProperties, no
// others are produced (as llama.cpp, xgrammar and OpenAI's strict mode do). maxProperties bounds
// the additional properties when every listed one is required (the count is exact then).

#include "internal.h"

#define LLM__JS_MAX_DEPTH 64       // nested schemas, at most
#define LLM__JS_MAX_RULES 20000    // rules made, at most
#define LLM__JS_MAX_ITEMS 1000     // minItems / maxItems / minLength / maxLength bounds, at most

// The shared rules, emitted when used.
enum {
    LLM__JS_WS = 1, LLM__JS_STRING = 2, LLM__JS_CHAR = 4, LLM__JS_NUMBER = 8, LLM__JS_INTEGER = 16,
    LLM__JS_VALUE = 32, LLM__JS_DATE = 64, LLM__JS_TIME = 128, LLM__JS_UUID = 256
};

static const char *const llm__js_prims[] = {
    "ws ::= \"\" | \" \" | \"\\n\" [ \\t]{0,20}\n",
    "string ::= \"\\\"\" char* \"\\\"\"\n",
    "char ::= [^\"\\\\\\x7f\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n",
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n",
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n",
    ("value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
     "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\"\n"
     "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\"\n"),
    "date ::= [0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])\n",
    ("time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? "
     "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"),
    "uuid ::= [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}\n",
};

struct llm__js {
    const struct llm__json *j;
    struct llm__outbuf out;    // the rules made so far
    struct llm__err *e;
    int n_rules, depth;
    unsigned prims;            // LLM__JS_* used
    int32_t *defs;             // $ref targets given a rule: their nodes, and the rule numbers
    int *def_rule;
    int n_defs, cap_defs;
};

static void llm__js_puts(struct llm__outbuf *o, const char *s) { llm__outbuf_put(o, s, strlen(s)); }

static void llm__js_printf(struct llm__outbuf *o, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    llm__outbuf_put(o, buf, n < 0 ? 0 : (size_t)LLM__MIN(n, (int)sizeof(buf) - 1));
}

// Bytes s[0..n) as a GBNF string literal.
static void llm__js_lit(struct llm__outbuf *o, const char *s, size_t n) {
    llm__js_puts(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') llm__js_printf(o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) llm__js_printf(o, "\\x%02x", c);
        else llm__outbuf_put(o, &s[i], 1);
    }
    llm__js_puts(o, "\"");
}

static bool llm__js_fail(struct llm__js *s, const char *fmt, const char *arg) {
    if (s->e->status == LLM_OK) llm__fail(s->e, LLM_ERR_INVALID_ARG, fmt, arg);
    return false;
}

// The JSON text of node i, compact (keys and strings as the schema wrote them).
static void llm__js_compact(const struct llm__json *j, int32_t i, struct llm__outbuf *o) {
    const struct llm__jnode *nd = &j->nodes[i];
    if (nd->type == LLM__JSON_STR) {
        llm__outbuf_put(o, j->text + nd->start - 1, (size_t)nd->len + 2);
    } else if (nd->type == LLM__JSON_ARR || nd->type == LLM__JSON_OBJ) {
        bool obj = nd->type == LLM__JSON_OBJ;
        llm__js_puts(o, obj ? "{" : "[");
        for (int32_t m = 0, k = i + 1; m < nd->n; m++) {
            if (m) llm__js_puts(o, ",");
            if (obj) {
                llm__js_compact(j, k, o);
                llm__js_puts(o, ":");
                k++;
            }
            llm__js_compact(j, k, o);
            k = j->nodes[k].next;
        }
        llm__js_puts(o, obj ? "}" : "]");
    } else {
        llm__outbuf_put(o, j->text + nd->start, nd->len);
    }
}

// A new rule number.
static int llm__js_new(struct llm__js *s) {
    if (s->n_rules >= LLM__JS_MAX_RULES) return llm__js_fail(s, "json schema: more than %s rules", "20000"), -1;
    return s->n_rules++;
}

// Adds "rN ::= body".
static void llm__js_emit(struct llm__js *s, int r, const struct llm__outbuf *body) {
    llm__js_printf(&s->out, "r%d ::= ", r);
    llm__outbuf_put(&s->out, body->p, body->n);
    llm__js_puts(&s->out, "\n");
}

static bool llm__js_schema(struct llm__js *s, int32_t node, struct llm__outbuf *o);

// A reference to the rule of schema node `node` into o (the rule made now).
static bool llm__js_sub(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    int r = llm__js_new(s);
    if (r < 0) return false;
    struct llm__outbuf body = {0};
    bool ok = llm__js_schema(s, node, &body) && !body.fail;
    if (ok) llm__js_emit(s, r, &body);
    free(body.p);
    if (ok) llm__js_printf(o, "r%d", r);
    return ok || llm__js_fail(s, "json schema: out of memory%s", "");
}

// --- numbers: integer ranges digit by digit ---

// Decimal strings a <= b of the same length: the numbers between them.
static void llm__js_digits(struct llm__outbuf *o, const char *a, const char *b, int n) {
    if (n == 0) return;
    if (n == 1) { llm__js_printf(o, "[%c-%c]", a[0], b[0]); return; }
    if (a[0] == b[0]) {
        llm__js_printf(o, "\"%c\" ", a[0]);
        llm__js_digits(o, a + 1, b + 1, n - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof(nines));
    memset(zeros, '0', sizeof(zeros));
    llm__js_printf(o, "(\"%c\" (", a[0]);
    llm__js_digits(o, a + 1, nines, n - 1);
    llm__js_puts(o, ")");
    if (b[0] - a[0] > 1) llm__js_printf(o, " | [%c-%c] [0-9]{%d}", a[0] + 1, b[0] - 1, n - 1);
    llm__js_printf(o, " | \"%c\" (", b[0]);
    llm__js_digits(o, zeros, b + 1, n - 1);
    llm__js_puts(o, "))");
}

// The non-negative integers in [lo, hi] (hi < 0: no upper bound), without leading zeros.
static void llm__js_uint_range(struct llm__outbuf *o, long long lo, long long hi) {
    char a[24], b[24];
    int la = snprintf(a, sizeof(a), "%lld", lo);
    bool first = true;
    llm__js_puts(o, "(");
    for (int len = la; len <= 19; len++) {
        long long top = len == 19 ? LLONG_MAX : 1;
        for (int k = 0; k < len && len < 19; k++) top *= 10;
        if (len < 19) top -= 1;   // the largest number of len digits
        long long from = len == la ? lo : top / 10 + 1, to = hi >= 0 && hi < top ? hi : top;
        if (from > to) break;
        if (!first) llm__js_puts(o, " | ");
        first = false;
        if (hi < 0 && len > la && len < 19) {   // every longer number
            llm__js_printf(o, "[1-9] [0-9]{%d,18}", len - 1);
            break;
        }
        snprintf(a, sizeof(a), "%lld", from);
        snprintf(b, sizeof(b), "%lld", to);
        llm__js_puts(o, "(");
        llm__js_digits(o, a, b, (int)strlen(a));
        llm__js_puts(o, ")");
        if (to == hi) break;
    }
    llm__js_puts(o, ")");
}

// Integers in [lo, hi] (has_lo / has_hi: whether bounded).
static void llm__js_int_range(struct llm__outbuf *o, bool has_lo, long long lo, bool has_hi, long long hi) {
    bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
    llm__js_puts(o, "(");
    if (neg) {   // -x for x in [max(1, -hi), -lo]
        long long nlo = has_hi && hi < 0 ? -hi : 1, nhi = has_lo ? -lo : -1;
        llm__js_puts(o, "\"-\" ");
        llm__js_uint_range(o, nlo, nhi);
    }
    if (neg && pos) llm__js_puts(o, " | ");
    if (pos) llm__js_uint_range(o, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    llm__js_puts(o, ")");
}

static bool llm__js_bound(struct llm__js *s, int32_t node, const char *key, double *v) {
    int32_t i = llm__json_get(s->j, node, key);
    if (i < 0) return false;
    if (!llm__json_num(s->j, i, v)) return llm__js_fail(s, "json schema: %s must be a number", key);
    return true;
}

static bool llm__js_integer(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    double v;
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    const double lim = 9e17;
    if (llm__js_bound(s, node, "minimum", &v)) { has_lo = true; lo = (long long)ceil(v); }
    if (llm__js_bound(s, node, "exclusiveMinimum", &v)) {
        long long x = (long long)floor(v) + 1;
        if (!has_lo || x > lo) lo = x;
        has_lo = true;
    }
    if (llm__js_bound(s, node, "maximum", &v)) { has_hi = true; hi = (long long)floor(v); }
    if (llm__js_bound(s, node, "exclusiveMaximum", &v)) {
        long long x = (long long)ceil(v) - 1;
        if (!has_hi || x < hi) hi = x;
        has_hi = true;
    }
    if (s->e->status != LLM_OK) return false;
    if ((has_lo && fabs((double)lo) > lim) || (has_hi && fabs((double)hi) > lim))
        return llm__js_fail(s, "json schema: integer bounds beyond %s", "9e17");
    if (has_lo && has_hi && lo > hi)
        return llm__js_fail(s, "json schema: no integer between minimum and maximum%s", "");
    if (!has_lo && !has_hi) {
        s->prims |= LLM__JS_INTEGER;
        llm__js_puts(o, "integer");
    } else {
        llm__js_int_range(o, has_lo, lo, has_hi, hi);
    }
    return true;
}

static bool llm__js_number(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    double v;
    bool lo0 = false;
    if (llm__js_bound(s, node, "minimum", &v)) {
        if (v != 0.0) return llm__js_fail(s, "json schema: minimum on a number is supported as 0 only (got %s)",
                                          "another value");
        lo0 = true;
    }
    static const char *const unsupported[] = {"maximum", "exclusiveMinimum", "exclusiveMaximum"};
    for (size_t i = 0; i < LLM__ARRAY_LEN(unsupported); i++)
        if (llm__json_get(s->j, node, unsupported[i]) >= 0)
            return llm__js_fail(s, "json schema: %s on a number is not supported (on an integer it is)",
                                unsupported[i]);
    if (s->e->status != LLM_OK) return false;
    if (lo0) llm__js_puts(o, "(\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?");
    else {
        s->prims |= LLM__JS_NUMBER;
        llm__js_puts(o, "number");
    }
    return true;
}

// --- strings ---

static bool llm__js_pattern(struct llm__js *s, const char *re, struct llm__outbuf *o);

static bool llm__js_count(struct llm__js *s, int32_t node, const char *key, long long *out) {
    int32_t i = llm__json_get(s->j, node, key);
    if (i < 0) return false;
    int64_t v;
    if (!llm__json_int(s->j, i, 0, LLM__JS_MAX_ITEMS, &v))
        return llm__js_fail(s, "json schema: %s must be an integer from 0 to 1000", key);
    *out = v;
    return true;
}

static bool llm__js_string(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    int32_t fmt = llm__json_get(j, node, "format"), pat = llm__json_get(j, node, "pattern");
    long long lo = 0, hi = -1;
    bool has_lo = llm__js_count(s, node, "minLength", &lo), has_hi = llm__js_count(s, node, "maxLength", &hi);
    if (s->e->status != LLM_OK) return false;
    if ((fmt >= 0 || pat >= 0) && (has_lo || has_hi))
        return llm__js_fail(s, "json schema: minLength/maxLength together with %s is not supported",
                            fmt >= 0 ? "format" : "pattern");
    if (fmt >= 0 && pat >= 0)
        return llm__js_fail(s, "json schema: format together with pattern is not supported%s", "");
    if (has_lo && has_hi && lo > hi) return llm__js_fail(s, "json schema: minLength is above maxLength%s", "");
    if (fmt >= 0) {
        static const struct { const char *name, *rule; unsigned prim; } fmts[] = {
            {"date", "date", LLM__JS_DATE}, {"time", "time", LLM__JS_TIME},
            {"date-time", "date \"T\" time", LLM__JS_DATE | LLM__JS_TIME}, {"uuid", "uuid", LLM__JS_UUID},
        };
        for (size_t i = 0; i < LLM__ARRAY_LEN(fmts); i++)
            if (llm__json_eq(j, fmt, fmts[i].name)) {
                s->prims |= fmts[i].prim;
                llm__js_printf(o, "\"\\\"\" %s \"\\\"\"", fmts[i].rule);
                return true;
            }
        char *f = llm__json_strdup(j, fmt, NULL);
        llm__js_fail(s, "json schema: format \"%s\" is not supported (date, time, date-time and uuid are)",
                     f ? f : "?");
        free(f);
        return false;
    }
    if (pat >= 0) {
        char *re = llm__json_strdup(j, pat, NULL);
        if (!re) return llm__js_fail(s, "json schema: pattern must be a string%s", "");
        llm__js_puts(o, "\"\\\"\" (");
        bool ok = llm__js_pattern(s, re, o);
        free(re);
        llm__js_puts(o, ") \"\\\"\"");
        return ok;
    }
    s->prims |= LLM__JS_STRING | LLM__JS_CHAR;
    if (!has_lo && !has_hi) llm__js_puts(o, "string");
    else if (has_hi) llm__js_printf(o, "\"\\\"\" char{%lld,%lld} \"\\\"\"", lo, hi);
    else llm__js_printf(o, "\"\\\"\" char{%lld,} \"\\\"\"", lo);
    return true;
}

// --- arrays and objects ---

static bool llm__js_array(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    long long lo = 0, hi = -1;
    llm__js_count(s, node, "minItems", &lo);
    llm__js_count(s, node, "maxItems", &hi);
    if (s->e->status != LLM_OK) return false;
    if (hi >= 0 && lo > hi) return llm__js_fail(s, "json schema: minItems is above maxItems%s", "");
    int32_t items = llm__json_get(j, node, "items"), u = llm__json_get(j, node, "uniqueItems");
    if (u >= 0 && j->nodes[u].type != LLM__JSON_FALSE)
        return llm__js_fail(s, "json schema: %s is not supported", "uniqueItems");
    if (llm__json_get(j, node, "prefixItems") >= 0)
        return llm__js_fail(s, "json schema: %s is not supported", "prefixItems");
    if (llm__json_get(j, node, "contains") >= 0) return llm__js_fail(s, "json schema: %s is not supported", "contains");
    struct llm__outbuf item = {0};
    bool ok = true;
    if (items >= 0 && j->nodes[items].type != LLM__JSON_TRUE) ok = llm__js_sub(s, items, &item);
    else {
        s->prims |= LLM__JS_VALUE | LLM__JS_STRING | LLM__JS_CHAR | LLM__JS_NUMBER | LLM__JS_WS;
        llm__js_puts(&item, "value");
    }
    if (ok && !item.fail) {
        s->prims |= LLM__JS_WS;
        llm__js_puts(o, "\"[\" ws ");
        if (hi == 0) {
        } else if (lo == 0) {
            llm__js_printf(o, "(%.*s ws (\",\" ws %.*s ws)", (int)item.n, item.p, (int)item.n, item.p);
            if (hi < 0) llm__js_puts(o, "*)? ");
            else llm__js_printf(o, "{0,%lld})? ", hi - 1);
        } else {
            llm__js_printf(o, "%.*s ws (\",\" ws %.*s ws)", (int)item.n, item.p, (int)item.n, item.p);
            if (hi < 0) llm__js_printf(o, "{%lld,} ", lo - 1);
            else llm__js_printf(o, "{%lld,%lld} ", lo - 1, hi - 1);
        }
        llm__js_puts(o, "\"]\"");
    }
    free(item.p);
    return ok;
}

// The rest of a JSON string (after its opening quote) that is none of the keys[0..n) (code
// points; they share their first `depth`): a rule made now, its name into o. A character written
// as an escape counts as other than the keys' (keys are compared as they are written).
static bool llm__js_not_keys(struct llm__js *s, uint32_t **keys, const int *lens, int n, int depth,
                             struct llm__outbuf *o) {
    int r = llm__js_new(s);
    if (r < 0) return false;
    struct llm__outbuf body = {0};
    bool ends = false;
    for (int i = 0; i < n; i++) ends |= lens[i] == depth;
    if (!ends) llm__js_puts(&body, "\"\\\"\" | ");
    llm__js_puts(&body, "([^\"\\\\\\x7f\\x00-\\x1f");
    for (int i = 0; i < n; i++)
        if (lens[i] > depth && (i == 0 || lens[i - 1] <= depth || keys[i - 1][depth] != keys[i][depth]))
            llm__js_printf(&body, "\\U%08x", keys[i][depth]);
    llm__js_puts(&body, "] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) char* \"\\\"\"");
    s->prims |= LLM__JS_CHAR;
    bool ok = true;
    for (int i = 0; ok && i < n;) {
        if (lens[i] <= depth) { i++; continue; }
        int k = i;
        while (k < n && lens[k] > depth && keys[k][depth] == keys[i][depth]) k++;
        llm__js_printf(&body, " | [\\U%08x] ", keys[i][depth]);
        ok = llm__js_not_keys(s, keys + i, lens + i, k - i, depth + 1, &body);
        i = k;
    }
    if (ok && !body.fail) llm__js_emit(s, r, &body);
    free(body.p);
    if (ok) llm__js_printf(o, "r%d", r);
    return ok;
}

struct llm__js_key { uint32_t *cp; int len; };

static int llm__js_key_cmp(const void *a, const void *b) {
    const struct llm__js_key *x = a, *y = b;
    for (int i = 0; i < x->len && i < y->len; i++)
        if (x->cp[i] != y->cp[i]) return x->cp[i] < y->cp[i] ? -1 : 1;
    return (x->len > y->len) - (x->len < y->len);
}

// A JSON string that is not one of the property names of object `props`, into o.
static bool llm__js_other_key(struct llm__js *s, int32_t props, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    int n = j->nodes[props].n;
    struct llm__js_key *keys = calloc((size_t)n + 1, sizeof(*keys));
    uint32_t **cps = calloc((size_t)n + 1, sizeof(*cps));
    int *lens = calloc((size_t)n + 1, sizeof(*lens));
    bool ok = keys && cps && lens;
    for (int32_t m = 0, k = props + 1; ok && m < n; m++) {
        size_t len;
        char *key = llm__json_strdup(j, k, &len);
        ok = key && (keys[m].cp = malloc((len + 1) * sizeof(uint32_t)));
        for (size_t off = 0; ok && off < len;)
            keys[m].cp[keys[m].len++] = llm__utf8_next((const uint8_t *)key, len, &off);
        free(key);
        k = j->nodes[k + 1].next;
    }
    if (ok) {
        qsort(keys, (size_t)n, sizeof(*keys), llm__js_key_cmp);
        for (int m = 0; m < n; m++) {
            cps[m] = keys[m].cp;
            lens[m] = keys[m].len;
        }
        llm__js_puts(o, "\"\\\"\" ");
        ok = llm__js_not_keys(s, cps, lens, n, 0, o);
    } else llm__js_fail(s, "json schema: out of memory%s", "");
    for (int m = 0; keys && m < n; m++) free(keys[m].cp);
    free(keys);
    free(cps);
    free(lens);
    return ok;
}

// maxProperties of an object with n listed properties, n_req of them required: how many additional
// ones it leaves (-1: no bound; -2: refused, the message set). Exact when every listed property is
// required (an object has those n and the additional ones; a name written twice counts twice in
// the grammar and once in the object, which only lowers the count); otherwise refused, unless it
// bounds nothing. (minProperties is not: a repeated name would make an object short of it.)
static long long llm__js_max_extra(struct llm__js *s, int32_t node, int n, int n_req, bool more) {
    long long max;
    if (!llm__js_count(s, node, "maxProperties", &max)) return s->e->status == LLM_OK ? -1 : -2;
    if (max < n_req) return llm__js_fail(s, "json schema: maxProperties is below the required properties%s", ""), -2;
    if (!more && max >= n) return -1;
    if (n_req < n)
        return llm__js_fail(s, "json schema: maxProperties is supported when every listed property is required%s",
                            ""), -2;
    return more ? max - n : -1;
}

static bool llm__js_object(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    static const char *const unsupported[] = {"patternProperties", "propertyNames", "minProperties",
                                              "dependentRequired", "dependentSchemas", "unevaluatedProperties"};
    for (size_t i = 0; i < LLM__ARRAY_LEN(unsupported); i++)
        if (llm__json_get(j, node, unsupported[i]) >= 0)
            return llm__js_fail(s, "json schema: %s is not supported", unsupported[i]);
    int32_t props = llm__json_get(j, node, "properties"), req = llm__json_get(j, node, "required"),
            add = llm__json_get(j, node, "additionalProperties");
    if (props >= 0 && j->nodes[props].type != LLM__JSON_OBJ)
        return llm__js_fail(s, "json schema: %s must be an object", "properties");
    if (req >= 0 && j->nodes[req].type != LLM__JSON_ARR)
        return llm__js_fail(s, "json schema: %s must be an array", "required");
    int n = props >= 0 ? j->nodes[props].n : 0;
    s->prims |= LLM__JS_WS;
    // additional properties: none when properties are listed and additionalProperties is absent
    bool more = add >= 0 ? j->nodes[add].type != LLM__JSON_FALSE : n == 0;
    struct llm__outbuf extra = {0};
    if (more) {
        s->prims |= LLM__JS_STRING | LLM__JS_CHAR;
        if (n > 0 && !llm__js_other_key(s, props, &extra)) { free(extra.p); return false; }
        llm__js_puts(&extra, n > 0 ? " ws \":\" ws " : "string \":\" ws ");
        if (add >= 0 && j->nodes[add].type == LLM__JSON_OBJ) {
            if (!llm__js_sub(s, add, &extra)) { free(extra.p); return false; }
        } else {
            s->prims |= LLM__JS_VALUE | LLM__JS_NUMBER;
            llm__js_puts(&extra, "value");
        }
        llm__js_puts(&extra, " ws");
    }
    // each property: "key" ws ":" ws value ws, required or not
    struct llm__outbuf *kv = calloc((size_t)n + 1, sizeof(*kv));
    bool *required = calloc((size_t)n + 1, sizeof(*required));
    bool ok = kv && required;
    int n_req = 0;
    for (int32_t m = 0, k = props + 1; ok && m < n; m++) {
        llm__js_lit(&kv[m], j->text + j->nodes[k].start - 1, (size_t)j->nodes[k].len + 2);
        llm__js_puts(&kv[m], " ws \":\" ws ");
        ok = llm__js_sub(s, k + 1, &kv[m]);
        llm__js_puts(&kv[m], " ws");
        for (int32_t x = 0; ok && req >= 0 && x < j->nodes[req].n; x++) {
            int32_t r = llm__json_at(j, req, x);
            if (j->nodes[r].type == LLM__JSON_STR && j->nodes[r].len == j->nodes[k].len &&
                !memcmp(j->text + j->nodes[r].start, j->text + j->nodes[k].start, j->nodes[k].len))
                required[m] = true;
        }
        n_req += required[m];
        k = j->nodes[k + 1].next;
    }
    if (ok && req >= 0 && j->nodes[req].n > n_req)
        ok = llm__js_fail(s, "json schema: a required property is not in properties%s", "");
    long long max_extra = ok ? llm__js_max_extra(s, node, n, n_req, more) : -1;
    char reps[48] = "*";   // how many additional properties: any, or maxProperties' bound
    if (max_extra == -2) ok = false;
    else if (max_extra == 0) more = false;
    else if (max_extra > 0) snprintf(reps, sizeof(reps), "{0,%lld}", n == 0 ? max_extra - 1 : max_extra);
    // O_i: the properties from i on, i the first present: kv_i T_(i+1) | O_(i+1) (i optional);
    // T_i: ("," ws kv_i) for each later one, optional ones in ( )?; then the additional ones
    if (ok) {
        struct llm__outbuf body = {0};
        int first_req = 0;
        while (first_req < n && !required[first_req]) first_req++;
        llm__js_puts(o, "\"{\" ws ");
        if (n == 0 && more)
            llm__js_printf(o, "(%.*s (\",\" ws %.*s)%s)? ", (int)extra.n, extra.p, (int)extra.n, extra.p, reps);
        else if (n > 0) {
            llm__js_puts(o, first_req < n ? "(" : "((");
            for (int i = 0; i <= first_req && i < n; i++) {
                if (i) llm__js_puts(o, " | ");
                llm__outbuf_put(o, kv[i].p, kv[i].n);
                for (int k = i + 1; k < n; k++) {
                    llm__js_puts(o, required[k] ? " \",\" ws " : " (\",\" ws ");
                    llm__outbuf_put(o, kv[k].p, kv[k].n);
                    if (!required[k]) llm__js_puts(o, ")?");
                }
                if (more) llm__js_printf(o, " (\",\" ws %.*s)%s", (int)extra.n, extra.p, reps);
            }
            llm__js_puts(o, first_req < n ? ") " : ")");
            if (first_req == n && more)   // nothing listed present: the additional ones alone
                llm__js_printf(o, " | %.*s (\",\" ws %.*s)*", (int)extra.n, extra.p, (int)extra.n, extra.p);
            if (first_req == n) llm__js_puts(o, ")? ");
        }
        llm__js_puts(o, "\"}\"");
        free(body.p);
    }
    for (int m = 0; kv && m < n; m++) free(kv[m].p);
    free(kv);
    free(required);
    free(extra.p);
    return ok || llm__js_fail(s, "json schema: out of memory%s", "");
}

// --- the schema ---

// The rule of a $ref's target (made the first time; a recursive schema refers to it before its
// body is done).
static bool llm__js_ref(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    int32_t ref = llm__json_get(j, node, "$ref");
    char *path = llm__json_strdup(j, ref, NULL);
    if (!path) return llm__js_fail(s, "json schema: $ref must be a string%s", "");
    int32_t target = -1;
    const char *name = NULL;
    if (!strcmp(path, "#")) target = 0;
    else if (!strncmp(path, "#/$defs/", 8))
        name = path + 8, target = llm__json_get(j, llm__json_get(j, 0, "$defs"), name);
    else if (!strncmp(path, "#/definitions/", 14))
        name = path + 14, target = llm__json_get(j, llm__json_get(j, 0, "definitions"), name);
    if (target < 0) {
        llm__js_fail(s, "json schema: $ref \"%s\" is not #, #/$defs/NAME or #/definitions/NAME of this schema", path);
        free(path);
        return false;
    }
    free(path);
    for (int i = 0; i < s->n_defs; i++)
        if (s->defs[i] == target) {
            llm__js_printf(o, "r%d", s->def_rule[i]);
            return true;
        }
    if (s->n_defs == s->cap_defs) {
        int cap = s->cap_defs ? 2 * s->cap_defs : 16;
        int32_t *d = realloc(s->defs, (size_t)cap * sizeof(*d));
        if (d) s->defs = d;
        int *r = realloc(s->def_rule, (size_t)cap * sizeof(*r));
        if (r) s->def_rule = r;
        if (!d || !r) return llm__js_fail(s, "json schema: out of memory%s", "");
        s->cap_defs = cap;
    }
    int r = llm__js_new(s);
    if (r < 0) return false;
    s->defs[s->n_defs] = target;
    s->def_rule[s->n_defs++] = r;
    struct llm__outbuf body = {0};
    bool ok = llm__js_schema(s, target, &body) && !body.fail;
    if (ok) llm__js_emit(s, r, &body);
    free(body.p);
    if (ok) llm__js_printf(o, "r%d", r);
    return ok;
}

// Alternatives: each element of array `arr` a schema.
static bool llm__js_any_of(struct llm__js *s, int32_t arr, const char *key, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    if (j->nodes[arr].type != LLM__JSON_ARR || j->nodes[arr].n == 0)
        return llm__js_fail(s, "json schema: %s must be a non-empty array", key);
    llm__js_puts(o, "(");
    for (int32_t x = 0; x < j->nodes[arr].n; x++) {
        if (x) llm__js_puts(o, " | ");
        if (!llm__js_sub(s, llm__json_at(j, arr, x), o)) return false;
    }
    llm__js_puts(o, ")");
    return true;
}

// One type of a schema ("string", "object", ...).
static bool llm__js_type(struct llm__js *s, int32_t node, int32_t t, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    if (llm__json_eq(j, t, "string")) return llm__js_string(s, node, o);
    if (llm__json_eq(j, t, "integer")) return llm__js_integer(s, node, o);
    if (llm__json_eq(j, t, "number")) return llm__js_number(s, node, o);
    if (llm__json_eq(j, t, "object")) return llm__js_object(s, node, o);
    if (llm__json_eq(j, t, "array")) return llm__js_array(s, node, o);
    if (llm__json_eq(j, t, "boolean")) return llm__js_puts(o, "(\"true\" | \"false\")"), true;
    if (llm__json_eq(j, t, "null")) return llm__js_puts(o, "\"null\""), true;
    return llm__js_fail(s, "json schema: unknown type%s (string, integer, number, object, array, boolean, null)", "");
}

// The keywords a schema may have; the others are refused by name.
static const char *const llm__js_known[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "nullable", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "prefixItems",
    "contains", "unevaluatedProperties",
    // annotations, no constraint
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "strict", "name",
};

static bool llm__js_keywords(struct llm__js *s, int32_t node) {
    const struct llm__json *j = s->j;
    for (int32_t m = 0, k = node + 1; m < j->nodes[node].n; m++) {
        bool known = false;
        for (size_t i = 0; i < LLM__ARRAY_LEN(llm__js_known) && !known; i++)
            known = llm__json_eq(j, k, llm__js_known[i]);
        if (!known) {
            char *key = llm__json_strdup(j, k, NULL);
            llm__js_fail(s, "json schema: the keyword \"%s\" is not supported", key ? key : "?");
            free(key);
            return false;
        }
        k = j->nodes[k + 1].next;
    }
    return true;
}

static bool llm__js_schema_body(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    const struct llm__json *j = s->j;
    if (j->nodes[node].type == LLM__JSON_TRUE) {
        s->prims |= LLM__JS_VALUE | LLM__JS_STRING | LLM__JS_CHAR | LLM__JS_NUMBER | LLM__JS_WS;
        llm__js_puts(o, "value");
        return true;
    }
    if (j->nodes[node].type == LLM__JSON_FALSE) return llm__js_fail(s, "json schema: false accepts no value%s", "");
    if (j->nodes[node].type != LLM__JSON_OBJ) return llm__js_fail(s, "json schema: a schema must be an object%s", "");
    if (!llm__js_keywords(s, node)) return false;
    int32_t x;
    if ((x = llm__json_get(j, node, "$ref")) >= 0) return llm__js_ref(s, node, o);
    if ((x = llm__json_get(j, node, "const")) >= 0) {
        struct llm__outbuf v = {0};
        llm__js_compact(j, x, &v);
        llm__js_lit(o, v.p ? v.p : "", v.n);
        free(v.p);
        return true;
    }
    if ((x = llm__json_get(j, node, "enum")) >= 0) {
        if (j->nodes[x].type != LLM__JSON_ARR || j->nodes[x].n == 0)
            return llm__js_fail(s, "json schema: %s must be a non-empty array", "enum");
        llm__js_puts(o, "(");
        for (int32_t i = 0; i < j->nodes[x].n; i++) {
            struct llm__outbuf v = {0};
            llm__js_compact(j, llm__json_at(j, x, i), &v);
            if (i) llm__js_puts(o, " | ");
            llm__js_lit(o, v.p ? v.p : "", v.n);
            free(v.p);
        }
        llm__js_puts(o, ")");
        return true;
    }
    if ((x = llm__json_get(j, node, "anyOf")) >= 0) return llm__js_any_of(s, x, "anyOf", o);
    if ((x = llm__json_get(j, node, "oneOf")) >= 0) return llm__js_any_of(s, x, "oneOf", o);
    if ((x = llm__json_get(j, node, "allOf")) >= 0) {
        if (j->nodes[x].type != LLM__JSON_ARR || j->nodes[x].n != 1)
            return llm__js_fail(s, "json schema: %s is supported with one schema only", "allOf");
        return llm__js_sub(s, llm__json_at(j, x, 0), o);
    }
    int32_t t = llm__json_get(j, node, "type"), nullable = llm__json_get(j, node, "nullable");
    bool or_null = nullable >= 0 && j->nodes[nullable].type == LLM__JSON_TRUE;
    if (t < 0) {   // no type: what the keywords say, else any value
        if (llm__json_get(j, node, "properties") >= 0) t = -2;
        else if (llm__json_get(j, node, "items") >= 0) t = -3;
        else {
            s->prims |= LLM__JS_VALUE | LLM__JS_STRING | LLM__JS_CHAR | LLM__JS_NUMBER | LLM__JS_WS;
            llm__js_puts(o, "value");
            return true;
        }
    }
    llm__js_puts(o, "(");
    bool ok;
    if (t == -2) ok = llm__js_object(s, node, o);
    else if (t == -3) ok = llm__js_array(s, node, o);
    else if (j->nodes[t].type == LLM__JSON_ARR) {
        ok = j->nodes[t].n > 0 || llm__js_fail(s, "json schema: an empty list of types%s", "");
        for (int32_t i = 0; ok && i < j->nodes[t].n; i++) {
            if (i) llm__js_puts(o, " | ");
            ok = llm__js_type(s, node, llm__json_at(j, t, i), o);
        }
    } else ok = llm__js_type(s, node, t, o);
    if (or_null) llm__js_puts(o, " | \"null\"");
    llm__js_puts(o, ")");
    return ok;
}

static bool llm__js_schema(struct llm__js *s, int32_t node, struct llm__outbuf *o) {
    if (++s->depth > LLM__JS_MAX_DEPTH) return llm__js_fail(s, "json schema: nested deeper than %s", "64");
    bool ok = llm__js_schema_body(s, node, o);
    s->depth--;
    return ok;
}

// --- pattern: a regular expression (ECMA-262's common subset) over a JSON string's characters ---
//
// The expression matches the string's value; the grammar writes its JSON text: '"', '\' and
// control characters escaped. Supported: literals, ., classes ([a-z], [^...], \d \w \s and their
// negations, \n \t \r \f \v \0 \xHH \uHHHH, escaped punctuation), groups ((...), (?:...),
// (?<name>...)), alternation, * + ? {n} {n,} {n,m} (lazy forms taken as greedy: the set of
// strings is the same), ^ and $ at the ends (without them the match may be anywhere, as JSON
// Schema says). Back-references, lookaround and \b are refused.

struct llm__re {
    struct llm__js *s;
    const char *p;
    uint32_t rng[512];         // a class's ranges: lo, hi pairs
    int n;
};

static bool llm__re_fail(struct llm__re *r, const char *what) {
    return llm__js_fail(r->s, "json schema: pattern: %s", what);
}

static bool llm__re_add(struct llm__re *r, uint32_t lo, uint32_t hi) {
    if (r->n >= 256) return llm__re_fail(r, "a class of more than 256 ranges");
    r->rng[2 * r->n] = lo;
    r->rng[2 * r->n + 1] = hi;
    r->n++;
    return true;
}

static int llm__re_rng_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// Sorts and merges r's ranges; complements them when negate.
static void llm__re_norm(struct llm__re *r, bool negate) {
    qsort(r->rng, (size_t)r->n, 2 * sizeof(uint32_t), llm__re_rng_cmp);
    int m = 0;
    for (int i = 0; i < r->n; i++) {
        if (m && r->rng[2 * i] <= r->rng[2 * m - 1] + 1) {
            if (r->rng[2 * i + 1] > r->rng[2 * m - 1]) r->rng[2 * m - 1] = r->rng[2 * i + 1];
        } else {
            r->rng[2 * m] = r->rng[2 * i];
            r->rng[2 * m + 1] = r->rng[2 * i + 1];
            m++;
        }
    }
    r->n = m;
    if (!negate) return;
    uint32_t old[512], lo = 0;
    memcpy(old, r->rng, (size_t)(2 * m) * sizeof(*old));
    r->n = 0;
    for (int i = 0; i < m; i++) {
        if (old[2 * i] > lo) llm__re_add(r, lo, old[2 * i] - 1);
        lo = old[2 * i + 1] + 1;
    }
    if (lo <= LLM__CP_MAX) llm__re_add(r, lo, LLM__CP_MAX);
}

// The set r->rng as JSON string text: the characters written as they are, and the escapes of
// '"', '\' and control characters for those in the set.
static void llm__re_emit_set(struct llm__re *r, struct llm__outbuf *o) {
    bool first = true, any_plain = false;
    llm__js_puts(o, "(");
    struct llm__outbuf cls = {0};
    for (int i = 0; i < r->n; i++) {
        uint32_t lo = r->rng[2 * i], hi = r->rng[2 * i + 1];
        for (uint32_t c = lo; c <= hi && c < 0x20; c++) {   // control characters: escaped
            static const char short_esc[] = {'b', 't', 'n', 0, 'f', 'r'};
            if (!first) llm__js_puts(o, " | ");
            first = false;
            if (c >= 8 && c <= 13 && short_esc[c - 8]) llm__js_printf(o, "\"\\\\%c\"", short_esc[c - 8]);
            else llm__js_printf(o, "\"\\\\u00%02x\"", c);
        }
        if (lo < 0x20) lo = 0x20;
        for (uint32_t c = '"'; c <= '\\'; c += '\\' - '"') {   // '"' and '\': escaped, cut out of the range
            if (c < lo || c > hi) continue;
            if (!first) llm__js_puts(o, " | ");
            first = false;
            llm__js_puts(o, c == '"' ? "\"\\\\\\\"\"" : "\"\\\\\\\\\"");
        }
        uint32_t pieces[3][2] = {{lo, hi}, {1, 0}, {1, 0}};
        int np = 1;
        for (uint32_t c = '"'; c <= '\\'; c += '\\' - '"') {
            int k = np - 1;
            if (pieces[k][0] <= c && c <= pieces[k][1]) {
                pieces[np][0] = c + 1;
                pieces[np][1] = pieces[k][1];
                pieces[k][1] = c - 1;
                np++;
            }
        }
        for (int k = 0; k < np; k++) {
            if (pieces[k][0] > pieces[k][1] || pieces[k][1] < 0x20 || pieces[k][1] == UINT32_MAX) continue;
            llm__js_printf(&cls, "\\U%08x-\\U%08x", pieces[k][0], pieces[k][1]);
            any_plain = true;
        }
    }
    if (any_plain) {
        if (!first) llm__js_puts(o, " | ");
        first = false;
        llm__js_puts(o, "[");
        llm__outbuf_put(o, cls.p, cls.n);
        llm__js_puts(o, "]");
    }
    free(cls.p);
    if (first) llm__js_puts(o, "[^\\x00-\\U0010ffff]");   // the empty set
    llm__js_puts(o, ")");
}

static int llm__re_hex(const char *p, int n, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        int h = p[i] >= '0' && p[i] <= '9' ? p[i] - '0' : p[i] >= 'a' && p[i] <= 'f' ? p[i] - 'a' + 10
              : p[i] >= 'A' && p[i] <= 'F' ? p[i] - 'A' + 10 : -1;
        if (h < 0) return 0;
        *v = *v << 4 | (uint32_t)h;
    }
    return n;
}

// An escape after '\' into ranges (a class escape adds its ranges; a character one, its code point).
static bool llm__re_escape(struct llm__re *r, bool in_class) {
    char c = *r->p++;
    uint32_t v;
    switch (c) {
    case 'd': return llm__re_add(r, '0', '9');
    case 'w': return llm__re_add(r, '0', '9') && llm__re_add(r, 'A', 'Z') && llm__re_add(r, '_', '_') &&
                     llm__re_add(r, 'a', 'z');
    case 's': return llm__re_add(r, '\t', '\r') && llm__re_add(r, ' ', ' ');
    case 'D': case 'W': case 'S': {
        if (in_class) return llm__re_fail(r, "\\D, \\W or \\S inside a class is not supported");
        char lower[2] = {(char)(c - 'A' + 'a'), 0};
        struct llm__re t = {.s = r->s, .p = lower};
        llm__re_escape(&t, false);
        llm__re_norm(&t, true);
        for (int i = 0; i < t.n; i++) if (!llm__re_add(r, t.rng[2 * i], t.rng[2 * i + 1])) return false;
        return true;
    }
    case 'n': return llm__re_add(r, '\n', '\n');
    case 't': return llm__re_add(r, '\t', '\t');
    case 'r': return llm__re_add(r, '\r', '\r');
    case 'f': return llm__re_add(r, '\f', '\f');
    case 'v': return llm__re_add(r, '\v', '\v');
    case '0': return llm__re_add(r, 0, 0);
    case 'x':
        if (!llm__re_hex(r->p, 2, &v)) return llm__re_fail(r, "\\x needs 2 hexadecimal digits");
        r->p += 2;
        return llm__re_add(r, v, v);
    case 'u':
        if (!llm__re_hex(r->p, 4, &v)) return llm__re_fail(r, "\\u needs 4 hexadecimal digits");
        r->p += 4;
        return llm__re_add(r, v, v);
    case 'b': case 'B': return llm__re_fail(r, in_class ? "\\b inside a class is not supported"
                                                         : "word boundaries (\\b, \\B) are not supported");
    case 0: return llm__re_fail(r, "a '\\' at the end");
    default:
        if (c >= '1' && c <= '9') return llm__re_fail(r, "back-references are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return llm__re_fail(r, "an unknown escape");
        return llm__re_add(r, (uint8_t)c, (uint8_t)c);
    }
}

// One character of the expression (UTF-8) as a code point.
static bool llm__re_char(struct llm__re *r, uint32_t *cp) {
    size_t len = strnlen(r->p, 4);
    if (llm__utf8_char((const uint8_t *)r->p, len) <= 0) return llm__re_fail(r, "invalid UTF-8");
    size_t off = 0;
    *cp = llm__utf8_next((const uint8_t *)r->p, len, &off);
    r->p += off;
    return true;
}

static bool llm__re_class(struct llm__re *r, struct llm__outbuf *o) {
    r->p++;
    bool negate = *r->p == '^';
    if (negate) r->p++;
    r->n = 0;
    bool first = true;
    while (*r->p != ']' || first) {
        first = false;
        if (!*r->p) return llm__re_fail(r, "an unterminated class");
        uint32_t lo, hi;
        if (*r->p == '\\') {
            r->p++;
            int before = r->n;
            if (!llm__re_escape(r, true)) return false;
            if (r->n != before + 1 || r->rng[2 * before] != r->rng[2 * before + 1]) continue;   // a class escape
            lo = r->rng[2 * before];
            r->n = before;
        } else if (!llm__re_char(r, &lo)) return false;
        hi = lo;
        if (r->p[0] == '-' && r->p[1] && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                int before = r->n;
                if (!llm__re_escape(r, true)) return false;
                if (r->n != before + 1 || r->rng[2 * before] != r->rng[2 * before + 1])
                    return llm__re_fail(r, "a class escape ends a range");
                hi = r->rng[2 * before];
                r->n = before;
            } else if (!llm__re_char(r, &hi)) return false;
            if (hi < lo) return llm__re_fail(r, "a range's end is below its start");
        }
        if (!llm__re_add(r, lo, hi)) return false;
    }
    r->p++;
    llm__re_norm(r, negate);
    llm__re_emit_set(r, o);
    return true;
}

static bool llm__re_alt(struct llm__re *r, struct llm__outbuf *o, int depth);

// One atom into o.
static bool llm__re_atom(struct llm__re *r, struct llm__outbuf *o, int depth) {
    char c = *r->p;
    if (c == '(') {
        r->p++;
        if (r->p[0] == '?') {
            if (r->p[1] == ':') r->p += 2;
            else if (r->p[1] == '<' && r->p[2] != '=' && r->p[2] != '!') {   // (?<name>
                const char *end = strchr(r->p, '>');
                if (!end) return llm__re_fail(r, "an unterminated group name");
                r->p = end + 1;
            } else if (r->p[1] == 'P' && r->p[2] == '<') {
                const char *end = strchr(r->p, '>');
                if (!end) return llm__re_fail(r, "an unterminated group name");
                r->p = end + 1;
            } else return llm__re_fail(r, "lookaround ((?=, (?!, (?<=, (?<!) and other (? groups are not supported");
        }
        if (depth >= 50) return llm__re_fail(r, "groups nested deeper than 50");
        llm__js_puts(o, "(");
        if (!llm__re_alt(r, o, depth + 1)) return false;
        if (*r->p != ')') return llm__re_fail(r, "an unterminated group");
        r->p++;
        llm__js_puts(o, ")");
        return true;
    }
    if (c == '[') return llm__re_class(r, o);
    if (c == '.') {
        r->p++;
        r->s->prims |= LLM__JS_CHAR;
        llm__js_puts(o, "char");
        return true;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return llm__re_fail(r, "a quantifier with nothing to repeat");
    if (c == '^' || c == '$') return llm__re_fail(r, "^ and $ are supported at the ends of the pattern only");
    r->n = 0;
    if (c == '\\') {
        r->p++;
        if (!llm__re_escape(r, false)) return false;
    } else {
        uint32_t cp;
        if (!llm__re_char(r, &cp) || !llm__re_add(r, cp, cp)) return false;
    }
    llm__re_norm(r, false);
    llm__re_emit_set(r, o);
    return true;
}

static bool llm__re_seq(struct llm__re *r, struct llm__outbuf *o, int depth) {
    bool empty = true;
    for (;;) {
        char c = *r->p;
        if (!c || c == '|' || c == ')') break;
        if (c == '$' && !r->p[1]) break;   // the end anchor
        if (!empty) llm__js_puts(o, " ");
        empty = false;
        size_t at = o->n;
        if (!llm__re_atom(r, o, depth)) return false;
        c = *r->p;
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            // the atom as a group, then its quantifier
            struct llm__outbuf atom = {0};
            llm__outbuf_put(&atom, o->p + at, o->n - at);
            o->n = at;
            llm__js_puts(o, "(");
            llm__outbuf_put(o, atom.p, atom.n);
            llm__js_puts(o, ")");
            free(atom.p);
            if (c == '{') {
                char *end;
                long lo = strtol(r->p + 1, &end, 10), hi = lo;
                if (end == r->p + 1 || lo < 0 || lo > LLM__JS_MAX_ITEMS) return llm__re_fail(r, "a bad {n,m}");
                if (*end == ',') {
                    const char *q = end + 1;
                    hi = *q == '}' ? -1 : strtol(q, &end, 10);
                    if (*q == '}') end = (char *)q;
                    else if (end == q || hi < lo || hi > LLM__JS_MAX_ITEMS) return llm__re_fail(r, "a bad {n,m}");
                }
                if (*end != '}') return llm__re_fail(r, "a bad {n,m}");
                if (hi < 0) llm__js_printf(o, "{%ld,}", lo);
                else llm__js_printf(o, "{%ld,%ld}", lo, hi);
                r->p = end + 1;
            } else {
                llm__outbuf_put(o, &c, 1);
                r->p++;
            }
            if (*r->p == '?') r->p++;   // lazy: the same set of strings
            else if (*r->p == '+') return llm__re_fail(r, "possessive quantifiers are not supported");
            c = *r->p;
            if (c == '*' || c == '+' || c == '{') return llm__re_fail(r, "a quantifier after a quantifier");
        }
    }
    if (empty) llm__js_puts(o, "\"\"");
    return true;
}

static bool llm__re_alt(struct llm__re *r, struct llm__outbuf *o, int depth) {
    if (!llm__re_seq(r, o, depth)) return false;
    while (*r->p == '|') {
        r->p++;
        llm__js_puts(o, " | ");
        if (!llm__re_seq(r, o, depth)) return false;
    }
    return true;
}

static bool llm__js_pattern(struct llm__js *s, const char *re, struct llm__outbuf *o) {
    struct llm__re r = {.s = s, .p = re};
    bool start = *r.p == '^';
    if (start) r.p++;
    s->prims |= LLM__JS_CHAR;
    if (!start) llm__js_puts(o, "char* ");
    llm__js_puts(o, "(");
    if (!llm__re_alt(&r, o, 0)) return false;
    llm__js_puts(o, ")");
    bool end = *r.p == '$';
    if (end) r.p++;
    if (*r.p == ')') return llm__re_fail(&r, "an unmatched ')'");
    if (*r.p) return llm__re_fail(&r, "$ is supported at the end only");
    if (!end) llm__js_puts(o, " char*");
    return true;
}

// --- the whole ---

int llm_json_schema_to_grammar(const char *schema, char *buf, size_t size, char *err, size_t err_size) {
    struct llm__err e = {0};
    struct llm__json j;
    struct llm__js s = {.j = &j, .e = &e};
    int n = -1;
    if (!schema) llm__fail(&e, LLM_ERR_INVALID_ARG, "json schema: none given");
    else if (llm__json_parse(&j, schema, strlen(schema), "json schema", &e) == LLM_OK) {
        int r = llm__js_new(&s);
        struct llm__outbuf body = {0};
        if (r >= 0 && llm__js_schema(&s, 0, &body) && !body.fail) {
            llm__js_printf(&s.out, "root ::= r%d\n", r);
            llm__js_emit(&s, r, &body);
            for (size_t i = 0; i < LLM__ARRAY_LEN(llm__js_prims); i++)
                if (s.prims & (1u << i)) llm__js_puts(&s.out, llm__js_prims[i]);
            if (s.out.fail) llm__fail(&e, LLM_ERR_NOMEM, "json schema: out of memory");
            else if (s.out.n > INT32_MAX - 1)
                llm__fail(&e, LLM_ERR_INVALID_ARG, "json schema: its grammar is over 2 GB");
            else n = (int)s.out.n;
        } else if (e.status == LLM_OK) llm__fail(&e, LLM_ERR_NOMEM, "json schema: out of memory");
        free(body.p);
        llm__json_free(&j);
    }
    if (n >= 0 && size) {
        size_t k = LLM__MIN((size_t)n, size - 1);
        memcpy(buf, s.out.p, k);
        buf[k] = 0;
    }
    if (n < 0 && err && err_size) snprintf(err, err_size, "%s", e.msg);
    free(s.out.p);
    free(s.defs);
    free(s.def_rule);
    return n;
}
