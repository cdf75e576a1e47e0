// A small JSON reader for test data (goldens made by llama.cpp). Parses a whole document into a
// tree; json_get(node, "a.b.c") walks object keys; arrays are indexed with json_at.
#ifndef LLM_TEST_JSON_H
#define LLM_TEST_JSON_H
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
    enum json_type type;
    double num;
    char *str;             // strings (escapes other than \uXXXX decoded; \uXXXX kept as '?')
    char *key;             // in an object: this member's key
    struct json *kids;     // arrays and objects
    int n;
};

struct json_p { const char *s, *end; int err; };

static void json_ws(struct json_p *p) { while (p->s < p->end && isspace((unsigned char)*p->s)) p->s++; }

static char *json_parse_str(struct json_p *p) {
    if (p->s >= p->end || *p->s != '"') { p->err = 1; return NULL; }
    p->s++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    while (p->s < p->end && *p->s != '"') {
        char c = *p->s++;
        if (c == '\\' && p->s < p->end) {
            c = *p->s++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': p->s += (p->end - p->s >= 4) ? 4 : (p->end - p->s); c = '?'; break;
            default: break;
            }
        }
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        out[n++] = c;
    }
    if (p->s >= p->end) { p->err = 1; free(out); return NULL; }
    p->s++;
    out[n] = 0;
    return out;
}

static void json_parse_value(struct json_p *p, struct json *v, int depth);

static void json_push(struct json *v, struct json *kid) {
    v->kids = realloc(v->kids, sizeof(struct json) * (size_t)(v->n + 1));
    v->kids[v->n++] = *kid;
}

static void json_parse_value(struct json_p *p, struct json *v, int depth) {
    memset(v, 0, sizeof(*v));
    json_ws(p);
    if (p->s >= p->end || depth > 64) { p->err = 1; return; }
    char c = *p->s;
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JSON_OBJ : JSON_ARR;
        p->s++;
        json_ws(p);
        if (p->s < p->end && *p->s == (c == '{' ? '}' : ']')) { p->s++; return; }
        for (;;) {
            struct json kid;
            char *key = NULL;
            if (v->type == JSON_OBJ) {
                json_ws(p);
                key = json_parse_str(p);
                json_ws(p);
                if (p->err || p->s >= p->end || *p->s != ':') { free(key); p->err = 1; return; }
                p->s++;
            }
            json_parse_value(p, &kid, depth + 1);
            kid.key = key;
            json_push(v, &kid);
            if (p->err) return;
            json_ws(p);
            if (p->s < p->end && *p->s == ',') { p->s++; continue; }
            if (p->s < p->end && *p->s == (v->type == JSON_OBJ ? '}' : ']')) { p->s++; return; }
            p->err = 1;
            return;
        }
    } else if (c == '"') {
        v->type = JSON_STR;
        v->str = json_parse_str(p);
    } else if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "false", 5)) {
        v->type = JSON_BOOL;
        v->num = *p->s == 't';
        p->s += *p->s == 't' ? 4 : 5;
    } else if (!strncmp(p->s, "null", 4)) {
        p->s += 4;
    } else {
        char *e;
        v->type = JSON_NUM;
        v->num = strtod(p->s, &e);
        if (e == p->s) p->err = 1;
        p->s = e;
    }
}

static void json_free(struct json *v) {
    for (int i = 0; i < v->n; i++) json_free(&v->kids[i]);
    free(v->kids);
    free(v->str);
    free(v->key);
}

// Parses a file; returns 0 on success.
static int json_load(const char *path, struct json *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(buf); return -1; }
    fclose(f);
    struct json_p p = {buf, buf + n, 0};
    json_parse_value(&p, out, 0);
    free(buf);
    if (p.err) { json_free(out); return -1; }
    return 0;
}

static const struct json *json_get(const struct json *v, const char *path) {
    char part[128];
    while (v && *path) {
        size_t l = strcspn(path, ".");
        if (l >= sizeof(part)) return NULL;
        memcpy(part, path, l);
        part[l] = 0;
        path += l + (path[l] == '.');
        const struct json *next = NULL;
        if (v->type == JSON_OBJ)
            for (int i = 0; i < v->n && !next; i++)
                if (v->kids[i].key && !strcmp(v->kids[i].key, part)) next = &v->kids[i];
        v = next;
    }
    return v;
}

static const struct json *json_at(const struct json *v, int i) {
    return v && v->type == JSON_ARR && i >= 0 && i < v->n ? &v->kids[i] : NULL;
}

// Integer array into out (up to cap); returns the count, -1 if not an array.
static int json_ints(const struct json *v, int32_t *out, int cap) {
    if (!v || v->type != JSON_ARR) return -1;
    for (int i = 0; i < v->n && i < cap; i++) out[i] = (int32_t)v->kids[i].num;
    return v->n;
}
#endif
