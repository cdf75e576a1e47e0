// Stop strings: one automaton over all of a request's stop strings

#include "internal.h"

void llm__stops_free(struct llm__stops *a) {
    free(a->strs);
    free(a->node);
    free(a->key);
    free(a->child);
    memset(a, 0, sizeof(*a));
}

static uint32_t llm__stops_slot(struct llm__stops *a, uint32_t key) {
    uint64_t x = (uint64_t)key ^ a->mult;   // mixed with the automaton's own seed (a request cannot aim at a slot)
    x = (x ^ x >> 33) * 0xff51afd7ed558ccdull;
    x = (x ^ x >> 33) * 0xc4ceb9fe1a85ec53ull;
    uint32_t h = (uint32_t)((x ^ x >> 33) >> a->shift);
    for (a->probes++; a->key[h] && a->key[h] != key; a->probes++) h = (h + 1) & a->mask;
    return h;
}

static int32_t llm__stops_child(struct llm__stops *a, int32_t v, uint8_t c) {
    uint32_t h = llm__stops_slot(a, ((uint32_t)v << 8 | c) + 1);
    return a->key[h] ? a->child[h] : -1;
}

// Whether a's strings are stops[0..n).
bool llm__stops_same(const struct llm__stops *a, const char *const *stops, int n) {
    if (a->n_strs != n) return false;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t m = strlen(stops[i]) + 1;
        if (at + m > a->strs_len || memcmp(a->strs + at, stops[i], m)) return false;
        at += m;
    }
    return true;
}

// The automaton of stops[0..n) (non-empty strings, checked by the caller); false: out of memory.
bool llm__stops_build(struct llm__stops *a, const char *const *stops, int n) {
    memset(a, 0, sizeof(*a));
    size_t total = 0, with_nuls = 1;
    for (int i = 0; i < n; i++) total += strlen(stops[i]), with_nuls += strlen(stops[i]) + 1;
    if (!(a->strs = malloc(with_nuls))) return false;
    for (int i = 0; i < n; i++) {
        size_t m = strlen(stops[i]) + 1;
        memcpy(a->strs + a->strs_len, stops[i], m);
        a->strs_len += m;
    }
    a->n_strs = n;
    a->refs = 1;
    uint32_t cap = 16;
    int bits = 4;
    while (cap < total + total / 3 + 2) cap *= 2, bits++;   // at most three quarters full
    a->node = calloc(total + 1, sizeof(*a->node));
    a->key = calloc(cap, sizeof(*a->key));
    a->child = malloc(cap * sizeof(*a->child));
    if (!a->node || !a->key || !a->child) return llm__stops_free(a), false;
    a->mask = cap - 1;
    a->shift = 64 - bits;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)(uintptr_t)a ^ (uint64_t)ts.tv_nsec << 24 ^ (uint64_t)ts.tv_sec;
    for (int i = 0; i < 2; i++) x = (x ^ x >> 31) * 0xBF58476D1CE4E5B9ull;
    a->mult = x | 1;
    a->n_node = 1;
    for (int i = 0; i < n; i++) {
        int32_t v = 0;
        for (const uint8_t *p = (const uint8_t *)stops[i]; *p; p++) {
            uint32_t key = ((uint32_t)v << 8 | *p) + 1, h = llm__stops_slot(a, key);
            if (!a->key[h]) {
                struct llm__stop_node *w = &a->node[a->n_node];
                w->parent = v, w->byte = *p, w->depth = a->node[v].depth + 1;
                a->key[h] = key;
                a->child[h] = a->n_node++;
            }
            v = a->child[h];
        }
        a->node[v].final = true;
    }
    // fail links and outputs in order of depth (a node's fail link is shallower): nodes sorted
    // by depth with a counting sort
    int32_t *order = malloc((size_t)a->n_node * sizeof(int32_t)), *start = calloc(total + 2, sizeof(int32_t));
    if (!order || !start) return free(order), free(start), llm__stops_free(a), false;
    for (int v = 0; v < a->n_node; v++) start[a->node[v].depth + 1]++;
    for (size_t d = 1; d <= total + 1; d++) start[d] += start[d - 1];
    for (int v = 0; v < a->n_node; v++) order[start[a->node[v].depth]++] = v;
    for (int i = 1; i < a->n_node; i++) {
        struct llm__stop_node *w = &a->node[order[i]];
        int32_t f = -1;
        if (w->parent != 0)
            for (int32_t u = a->node[w->parent].fail; f < 0; u = a->node[u].fail) {
                f = llm__stops_child(a, u, w->byte);
                if (u == 0) break;
            }
        w->fail = f < 0 ? 0 : f;
        w->out = w->final ? w->depth : a->node[w->fail].out;
    }
    free(order);
    free(start);
    return true;
}

// Scans text[pos->scanned..n) (the text may only have grown since the last call at pos): the
// offset of the earliest stop string that ends in it, or -1; *hold: the length of the longest end
// of the text that could still become a stop string (not to be shown yet).
long llm__stops_scan(struct llm__stops *a, struct llm__stop_pos *pos, const char *text, size_t n, size_t *hold) {
    long best = -1;
    int32_t v = pos->state;
    for (size_t i = pos->scanned; i < n; i++) {
        uint8_t c = (uint8_t)text[i];
        int32_t w;
        while ((w = llm__stops_child(a, v, c)) < 0 && v != 0) { v = a->node[v].fail; a->steps++; }
        v = w < 0 ? 0 : w;
        a->steps++;
        // the longest stop string ending here starts earliest among those ending here
        long at = (long)(i + 1) - a->node[v].out;
        if (a->node[v].out && (best < 0 || at < best)) best = at;
    }
    pos->state = v;
    pos->scanned = n;
    *hold = (size_t)a->node[v].depth;
    return best;
}
