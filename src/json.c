// JSON reader (config.json, tokenizer.json, safetensors headers)

#include "internal.h"

// === JSON ===
// Hugging Face model directories are JSON (config.json, tokenizer.json, the index of a sharded
// checkpoint) and so is a safetensors file's header. The reader parses a whole text (RFC 8259,
// UTF-8) into a flat array of nodes, each a value with its bytes in the text, in document order:
// an array's elements follow it, an object's members follow it as key, value, key, value; `next`
// is the node after a value and everything inside it, so a lookup walks siblings without
// descending. Strings stay undecoded in the text until asked for. The text is treated as
// hostile: nesting deeper than 64, bad UTF-8, control characters in strings, numbers outside
// the grammar, and trailing bytes are errors with the byte offset.

#define LLM__JSON_MAX_DEPTH 64
#define LLM__JSON_MAX_SIZE ((size_t)1 << 31)   // bytes of text (offsets are 32-bit)

struct llm__json_cur { struct llm__json *j; size_t pos; struct llm__err *e; const char *what; };

void llm__json_free(struct llm__json *j) {
    free(j->nodes);
    memset(j, 0, sizeof(*j));
}

static bool llm__json_bad(struct llm__json_cur *c, const char *msg) {
    llm__fail(c->e, LLM_ERR_FORMAT, "%s: bad JSON at byte %zu: %s", c->what, c->pos, msg);
    return false;
}

static void llm__json_ws(struct llm__json_cur *c) {
    const char *t = c->j->text;
    while (c->pos < c->j->size && (t[c->pos] == ' ' || t[c->pos] == '\t' || t[c->pos] == '\n' || t[c->pos] == '\r'))
        c->pos++;
}

static int32_t llm__json_node(struct llm__json_cur *c, enum llm__json_type type) {
    struct llm__json *j = c->j;
    if (j->n == j->cap) {
        int32_t cap = j->cap == 0 ? 64 : j->cap <= INT32_MAX / 2 ? j->cap * 2 : 0;
        struct llm__jnode *nodes = cap > 0 ? realloc(j->nodes, (size_t)cap * sizeof(*nodes)) : NULL;
        if (!nodes) {
            llm__fail(c->e, LLM_ERR_NOMEM, "%s: out of memory for %d JSON values", c->what, (int)j->n);
            return -1;
        }
        j->nodes = nodes;
        j->cap = cap;
    }
    j->nodes[j->n] = (struct llm__jnode){.type = (uint8_t)type, .start = (uint32_t)c->pos};
    return j->n++;
}

static int llm__json_hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static bool llm__json_string(struct llm__json_cur *c) {
    const char *t = c->j->text;
    int32_t i = llm__json_node(c, LLM__JSON_STR);
    if (i < 0) return false;
    size_t p = ++c->pos;
    bool esc = false;
    for (;;) {
        if (p >= c->j->size) { c->pos = p; return llm__json_bad(c, "a string does not end"); }
        unsigned char ch = (unsigned char)t[p];
        if (ch == '"') break;
        if (ch < 0x20) { c->pos = p; return llm__json_bad(c, "a control character in a string"); }
        if (ch == '\\') {
            esc = true;
            if (p + 1 >= c->j->size) { c->pos = p; return llm__json_bad(c, "a string does not end"); }
            char x = t[p + 1];
            if (x == 'u') {
                if (p + 6 > c->j->size || llm__json_hex4(t + p + 2) < 0) {
                    c->pos = p;
                    return llm__json_bad(c, "a bad \\u escape");
                }
                p += 6;
            } else if (x && strchr("\"\\/bfnrt", x)) {
                p += 2;
            } else {
                c->pos = p;
                return llm__json_bad(c, "an unknown escape in a string");
            }
            continue;
        }
        int len = llm__utf8_char((const uint8_t *)t + p, c->j->size - p);
        if (len <= 0) { c->pos = p; return llm__json_bad(c, "a string is not valid UTF-8"); }
        p += (size_t)len;
    }
    struct llm__jnode *nd = &c->j->nodes[i];
    nd->start = (uint32_t)c->pos;
    nd->len = (uint32_t)(p - c->pos);
    nd->esc = esc;
    nd->next = i + 1;
    c->pos = p + 1;
    return true;
}

static bool llm__json_number(struct llm__json_cur *c) {
    const char *t = c->j->text;
    const size_t n = c->j->size, s = c->pos;
    size_t p = s;
    int32_t i = llm__json_node(c, LLM__JSON_NUM);
    if (i < 0) return false;
    if (p < n && t[p] == '-') p++;
    if (p < n && t[p] == '0') p++;
    else if (p < n && t[p] >= '1' && t[p] <= '9') while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    else { c->pos = p; return llm__json_bad(c, "a number without digits"); }
    if (p < n && t[p] == '.') {
        if (++p >= n || t[p] < '0' || t[p] > '9') {
            c->pos = p;
            return llm__json_bad(c, "a number without digits after '.'");
        }
        while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    }
    if (p < n && (t[p] == 'e' || t[p] == 'E')) {
        if (++p < n && (t[p] == '+' || t[p] == '-')) p++;
        if (p >= n || t[p] < '0' || t[p] > '9') {
            c->pos = p;
            return llm__json_bad(c, "a number without exponent digits");
        }
        while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    }
    c->j->nodes[i].len = (uint32_t)(p - s);
    c->j->nodes[i].next = i + 1;
    c->pos = p;
    return true;
}

static bool llm__json_value(struct llm__json_cur *c, int depth) {
    const char *t = c->j->text;
    llm__json_ws(c);
    if (c->pos >= c->j->size) return llm__json_bad(c, "a value is missing");
    char ch = t[c->pos];
    if (ch == '"') return llm__json_string(c);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return llm__json_number(c);
    static const char *const words[3] = {"null", "false", "true"};
    for (int w = 0; w < 3; w++) {
        size_t wl = strlen(words[w]);
        if (c->j->size - c->pos >= wl && memcmp(t + c->pos, words[w], wl) == 0) {
            int32_t i = llm__json_node(c, (enum llm__json_type)(LLM__JSON_NULL + w));
            if (i < 0) return false;
            c->j->nodes[i].len = (uint32_t)wl;
            c->j->nodes[i].next = i + 1;
            c->pos += wl;
            return true;
        }
    }
    if (ch != '[' && ch != '{') return llm__json_bad(c, "not a JSON value");
    if (depth >= LLM__JSON_MAX_DEPTH) return llm__json_bad(c, "nested deeper than 64");
    const bool obj = ch == '{';
    int32_t i = llm__json_node(c, obj ? LLM__JSON_OBJ : LLM__JSON_ARR), n = 0;
    if (i < 0) return false;
    c->pos++;
    llm__json_ws(c);
    if (c->pos < c->j->size && t[c->pos] == (obj ? '}' : ']')) c->pos++;
    else
        for (;;) {
            if (obj) {
                llm__json_ws(c);
                if (c->pos >= c->j->size || t[c->pos] != '"')
                    return llm__json_bad(c, "an object key is not a string");
                if (!llm__json_string(c)) return false;
                llm__json_ws(c);
                if (c->pos >= c->j->size || t[c->pos] != ':')
                    return llm__json_bad(c, "':' expected after an object key");
                c->pos++;
            }
            if (!llm__json_value(c, depth + 1)) return false;
            if (n == INT32_MAX) return llm__json_bad(c, "too many elements");
            n++;
            llm__json_ws(c);
            if (c->pos < c->j->size && t[c->pos] == ',') { c->pos++; continue; }
            if (c->pos < c->j->size && t[c->pos] == (obj ? '}' : ']')) { c->pos++; break; }
            return llm__json_bad(c, obj ? "',' or '}' expected" : "',' or ']' expected");
        }
    struct llm__jnode *nd = &c->j->nodes[i];
    nd->n = n;
    nd->len = (uint32_t)(c->pos - nd->start);
    nd->next = c->j->n;
    return true;
}

// Parses text[0..size) (what: the file, for messages). On failure j is empty.
enum llm_status llm__json_parse(struct llm__json *j, const char *text, size_t size, const char *what,
                                struct llm__err *e) {
    memset(j, 0, sizeof(*j));
    if (size >= LLM__JSON_MAX_SIZE)
        return llm__fail(e, LLM_ERR_FORMAT, "%s: %zu bytes of JSON, more than this reader takes (2 GiB)", what, size);
    j->text = text;
    j->size = size;
    struct llm__json_cur c = {j, 0, e, what};
    if (size >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) c.pos = 3;   // a byte order mark, as some editors write
    bool ok = llm__json_value(&c, 0);
    if (ok) {
        llm__json_ws(&c);
        if (c.pos < size) ok = llm__json_bad(&c, "bytes after the value");
    }
    if (!ok) {
        enum llm_status st = e ? e->status : LLM_ERR_FORMAT;
        llm__json_free(j);
        return st;
    }
    return LLM_OK;
}

// String node i decoded (escapes, \u surrogate pairs as UTF-8) into out (at least len + 1 bytes:
// decoding never grows a string); its length. A lone surrogate becomes U+FFFD.
size_t llm__json_decode(const struct llm__json *j, int32_t i, char *out) {
    const struct llm__jnode *nd = &j->nodes[i];
    const char *s = j->text + nd->start;
    size_t n = nd->len, o = 0;
    if (!nd->esc) {
        memcpy(out, s, n);
        out[n] = 0;
        return n;
    }
    for (size_t p = 0; p < n;) {
        if (s[p] != '\\') { out[o++] = s[p++]; continue; }
        char x = s[p + 1];
        p += 2;
        if (x != 'u') {
            out[o++] = x == 'b' ? '\b' : x == 'f' ? '\f' : x == 'n' ? '\n' : x == 'r' ? '\r' : x == 't' ? '\t' : x;
            continue;
        }
        uint32_t cp = (uint32_t)llm__json_hex4(s + p);
        p += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && p + 6 <= n && s[p] == '\\' && s[p + 1] == 'u') {
            int lo = llm__json_hex4(s + p + 2);
            if (lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (uint32_t)(lo - 0xdc00);
                p += 6;
            }
        }
        if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;
        o += (size_t)llm__utf8_put(cp, out + o);   // (4 bytes at most for the 6 or 12 of text)
    }
    out[o] = 0;
    return o;
}

// String node i decoded into a new NUL-terminated string (*len: its bytes, which may include a
// NUL); NULL: not a string, or no memory.
char *llm__json_strdup(const struct llm__json *j, int32_t i, size_t *len) {
    if (i < 0 || j->nodes[i].type != LLM__JSON_STR) return NULL;
    char *s = malloc((size_t)j->nodes[i].len + 1);
    if (!s) return NULL;
    size_t n = llm__json_decode(j, i, s);
    if (len) *len = n;
    return s;
}

// Whether string node i is `s`.
bool llm__json_eq(const struct llm__json *j, int32_t i, const char *s) {
    const struct llm__jnode *nd = &j->nodes[i];
    size_t n = strlen(s);
    if (nd->type != LLM__JSON_STR) return false;
    if (!nd->esc) return nd->len == n && memcmp(j->text + nd->start, s, n) == 0;
    if (nd->len < n) return false;
    char stackbuf[256], *buf = nd->len < sizeof(stackbuf) ? stackbuf : malloc((size_t)nd->len + 1);
    if (!buf) return false;
    size_t m = llm__json_decode(j, i, buf);
    bool eq = m == n && memcmp(buf, s, n) == 0;
    if (buf != stackbuf) free(buf);
    return eq;
}

int32_t llm__json_get(const struct llm__json *j, int32_t o, const char *key) {
    if (o < 0 || j->nodes[o].type != LLM__JSON_OBJ) return -1;
    int32_t found = -1;
    for (int32_t m = 0, k = o + 1; m < j->nodes[o].n; m++) {
        if (llm__json_eq(j, k, key)) found = k + 1;   // the last of duplicate keys, as most readers take
        k = j->nodes[k + 1].next;
    }
    return found;
}

// Element x of array node a, or -1.
int32_t llm__json_at(const struct llm__json *j, int32_t a, int32_t x) {
    if (a < 0 || j->nodes[a].type != LLM__JSON_ARR || x < 0 || x >= j->nodes[a].n) return -1;
    int32_t k = a + 1;
    while (x-- > 0) k = j->nodes[k].next;
    return k;
}

// Number node i as a double: exact where the digits (at most 19 significant) and the power of
// ten are exactly representable, else within a rounding or two (configuration values need no
// more). Not strtod: its decimal point follows the program's locale.
bool llm__json_num(const struct llm__json *j, int32_t i, double *out) {
    if (i < 0 || j->nodes[i].type != LLM__JSON_NUM) return false;
    const char *s = j->text + j->nodes[i].start, *end = s + j->nodes[i].len;
    bool neg = *s == '-';
    s += neg;
    uint64_t m = 0;
    int digits = 0;
    long e10 = 0;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (digits < 19) { m = m * 10 + (uint64_t)(*s - '0'); digits += m > 0; }
        else e10++;
    }
    if (s < end && *s == '.')
        for (s++; s < end && *s >= '0' && *s <= '9'; s++)
            if (digits < 19) { m = m * 10 + (uint64_t)(*s - '0'); digits += m > 0; e10--; }
    if (s < end) {   // the exponent
        s++;
        bool eneg = *s == '-';
        s += *s == '-' || *s == '+';
        long x = 0;
        for (; s < end; s++) x = x < 100000 ? x * 10 + (*s - '0') : x;
        e10 += eneg ? -x : x;
    }
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double v = (double)m;
    if (m == 0) v = 0.0;
    else if (m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) v = e10 < 0 ? v / p10[-e10] : v * p10[e10];
    else v = e10 < -400 ? 0.0 : e10 > 400 ? HUGE_VAL : v * pow(10.0, (double)e10);
    *out = neg ? -v : v;
    return true;
}

// Number node i as an integer in [lo, hi]: false when it is not a number, has a fraction or an
// exponent that leaves one, or lies outside.
bool llm__json_int(const struct llm__json *j, int32_t i, int64_t lo, int64_t hi, int64_t *out) {
    double v;
    if (!llm__json_num(j, i, &v) || !(v >= (double)lo && v <= (double)hi) || v != floor(v)) return false;
    const char *s = j->text + j->nodes[i].start;
    if (!memchr(s, '.', j->nodes[i].len) && !memchr(s, 'e', j->nodes[i].len) && !memchr(s, 'E', j->nodes[i].len)) {
        // plain digits: exact (a double is not past 2^53)
        bool neg = *s == '-';
        uint64_t u = 0;
        for (uint32_t k = neg; k < j->nodes[i].len; k++) {
            if (u > (UINT64_MAX - 9) / 10) return false;
            u = u * 10 + (uint64_t)(s[k] - '0');
        }
        if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX) return false;
        int64_t x = neg ? (int64_t)(0 - u) : (int64_t)u;
        if (x < lo || x > hi) return false;
        *out = x;
        return true;
    }
    *out = (int64_t)v;
    return true;
}

// A whole file read into memory (a NUL after it), for JSON; *size its bytes.
enum llm_status llm__read_file(const char *path, size_t max, char **out, size_t *size, struct llm__err *e) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return llm__fail(e, LLM_ERR_FORMAT, "'%s' has %lld bytes, more than the %zu this file may have", path,
                         (long long)st.st_size, max);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return llm__fail(e, LLM_ERR_NOMEM, "no memory to read '%s'", path);
    }
    enum llm_status s = llm__read_all(fd, buf, (size_t)st.st_size, path, e);
    close(fd);
    if (s != LLM_OK) { free(buf); return s; }
    buf[st.st_size] = 0;
    *out = buf;
    *size = (size_t)st.st_size;
    return LLM_OK;
}
