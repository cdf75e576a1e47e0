// safetensors files

#include "internal.h"

// === safetensors ===
// Hugging Face's weight files: u64 (little-endian) N, N bytes of a JSON object, the data. Each
// member but "__metadata__" (an object of strings) describes a tensor:
//   "name": {"dtype": "F16", "shape": [out, in], "data_offsets": [begin, end]}
// with begin and end counted from the first byte after the header, the shape outermost first
// (GGUF's ne[] the other way round), the data row-major and little-endian. The file is hostile:
// the header's length (at most 100 MB, as the format's own reader allows), every dtype, shape
// and offset pair (its bytes must be the shape's; inside the data; no two tensors overlapping)
// are checked before anything points into the data.

#define LLM__ST_U8 0x10000u     // safetensors dtypes with no ggml type
#define LLM__ST_BOOL 0x10001u
#define LLM__ST_MAX_HEADER ((uint64_t)100000000)

void llm__st_close(struct llm__safetensors *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->t);
    free(s->ix.slots);
    free(s->path_name);
    if (s->owns_map && s->map) munmap(s->map, s->size);
    if (s->owns_buf) free(s->map);
    memset(s, 0, sizeof(*s));
}

// The tensor `name` of s, or NULL.
const struct llm__st_tensor *llm__st_find(const struct llm__safetensors *s, const char *name) {
    int64_t i = llm__gguf_index_find(&s->ix, s->t, sizeof(*s->t), name, NULL);
    return i < 0 ? NULL : &s->t[i];
}

// A safetensors dtype: the type id and the element size in bytes (0: unknown).
static size_t llm__st_dtype(const struct llm__json *j, int32_t i, uint32_t *type) {
    static const struct { const char *name; uint32_t type; size_t size; } dt[] = {
        {"F32", 0, 4}, {"F16", 1, 2}, {"BF16", 30, 2}, {"F64", 28, 8}, {"I8", 24, 1}, {"I16", 25, 2},
        {"I32", 26, 4}, {"I64", 27, 8}, {"U8", LLM__ST_U8, 1}, {"BOOL", LLM__ST_BOOL, 1},
    };
    for (size_t k = 0; k < LLM__ARRAY_LEN(dt); k++)
        if (llm__json_eq(j, i, dt[k].name)) { *type = dt[k].type; return dt[k].size; }
    return 0;
}

struct llm__st_span { uint64_t begin, end; int64_t i; };
static int llm__st_span_cmp(const void *a, const void *b) {
    const struct llm__st_span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

// A safetensors header being parsed: its JSON, the data after it, and the spans of the tensors'
// data so far (the empty ones left out).
struct llm__st_header {
    struct llm__json j;
    const uint8_t *data;
    uint64_t dsize;
    struct llm__st_span *spans;
    int64_t n_spans;
};

// The shape of tensor t (pr: its name, printable) from JSON array sh: at most 8 non-negative
// sizes, into t; *nel their product, checked not to overflow in bytes.
static enum llm_status llm__st_shape(const struct llm__json *j, int32_t sh, struct llm__st_tensor *t, uint64_t *nel,
                                     const char *pr, struct llm__err *e) {
    if (j->nodes[sh].type != LLM__JSON_ARR || j->nodes[sh].n > 8)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': shape is not an array of at most 8 sizes", pr);
    t->n_dims = j->nodes[sh].n;
    *nel = 1;
    for (int d = 0; d < t->n_dims; d++) {
        int64_t x;
        if (!llm__json_int(j, llm__json_at(j, sh, d), 0, INT64_MAX, &x))
            return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': dimension %d is not a non-negative integer",
                             pr, d);
        if (x > 0 && *nel > UINT64_MAX / 8 / (uint64_t)x)
            return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': its element count overflows", pr);
        t->shape[d] = x;
        *nel *= (uint64_t)x;
    }
    return LLM_OK;
}

// The header's member at node k (its name; its value at k + 1): __metadata__, checked, or the next
// tensor of s, its dtype, shape and data (inside the data, as many bytes as the shape's) checked.
static enum llm_status llm__st_member(struct llm__safetensors *s, struct llm__st_header *h, int32_t k,
                                      struct llm__err *e) {
    const struct llm__json *j = &h->j;
    const int32_t v = k + 1;
    size_t nlen;
    char pr[88], *name = llm__json_strdup(j, k, &nlen);
    if (!name) return llm__fail(e, LLM_ERR_NOMEM, "safetensors: out of memory");
    llm__gguf_printable(pr, name, nlen);
    if (strcmp(name, "__metadata__") == 0) {
        free(name);
        bool ok = j->nodes[v].type == LLM__JSON_OBJ;
        for (int32_t q = 0, x = v + 1; ok && q < j->nodes[v].n; q++, x = j->nodes[x + 1].next)
            ok = j->nodes[x + 1].type == LLM__JSON_STR;
        return ok ? LLM_OK : llm__fail(e, LLM_ERR_FORMAT, "safetensors: __metadata__ is not an object of strings");
    }
    struct llm__st_tensor *t = &s->t[s->n];
    t->name = name;
    s->n++;
    if (nlen == 0 || strlen(name) != nlen)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: a tensor name is empty or holds a NUL byte");
    uint64_t slot;
    if (llm__gguf_index_find(&s->ix, s->t, sizeof(*s->t), name, &slot) >= 0)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s' is named twice", pr);
    s->ix.slots[slot] = s->n - 1;
    const int32_t dt = llm__json_get(j, v, "dtype"), sh = llm__json_get(j, v, "shape");
    const int32_t of = llm__json_get(j, v, "data_offsets");
    if (dt < 0 || sh < 0 || of < 0)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s' lacks dtype, shape or data_offsets", pr);
    const size_t esize = llm__st_dtype(j, dt, &t->type);
    if (!esize) {
        char dname[88] = "?";
        if (j->nodes[dt].type == LLM__JSON_STR)
            llm__gguf_printable(dname, j->text + j->nodes[dt].start, LLM__MIN(j->nodes[dt].len, 40u));
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "safetensors: tensor '%s' has dtype %s, which this reader does not "
                         "know (F32, F16, BF16, F64, I8-I64, U8, BOOL)", pr, dname);
    }
    uint64_t nel = 1;
    enum llm_status st = llm__st_shape(j, sh, t, &nel, pr, e);
    if (st) return st;
    int64_t ob, oe;
    if (j->nodes[of].type != LLM__JSON_ARR || j->nodes[of].n != 2 ||
        !llm__json_int(j, llm__json_at(j, of, 0), 0, INT64_MAX, &ob) ||
        !llm__json_int(j, llm__json_at(j, of, 1), 0, INT64_MAX, &oe) || ob > oe)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': data_offsets is not [begin, end] with begin <= "
                         "end", pr);
    if ((uint64_t)oe > h->dsize)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': data [%lld, %lld) runs past the data (%llu "
                         "bytes): truncated file?", pr, (long long)ob, (long long)oe, (unsigned long long)h->dsize);
    if ((uint64_t)(oe - ob) != nel * esize)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': %lld bytes of data for %llu elements of %zu "
                         "bytes", pr, (long long)(oe - ob), (unsigned long long)nel, esize);
    t->data = h->data + ob;
    t->size = (size_t)(oe - ob);
    if (oe > ob) h->spans[h->n_spans++] = (struct llm__st_span){(uint64_t)ob, (uint64_t)oe, s->n - 1};
    return LLM_OK;
}

// No two tensors of s share a byte of data (spans: theirs, sorted here).
static enum llm_status llm__st_check_overlap(const struct llm__safetensors *s, struct llm__st_span *spans, int64_t n,
                                             struct llm__err *e) {
    if (n < 2) return LLM_OK;
    qsort(spans, (size_t)n, sizeof(*spans), llm__st_span_cmp);
    for (int64_t q = 1; q < n; q++)
        if (spans[q].begin < spans[q - 1].end) {
            char pr[88], pr2[88];
            llm__gguf_printable(pr, s->t[spans[q - 1].i].name, strlen(s->t[spans[q - 1].i].name));
            llm__gguf_printable(pr2, s->t[spans[q].i].name, strlen(s->t[spans[q].i].name));
            return llm__fail(e, LLM_ERR_FORMAT, "safetensors: the data of tensors '%s' and '%s' overlap", pr, pr2);
        }
    return LLM_OK;
}

// Parses s->map[0 .. s->size). On failure the caller closes s.
static enum llm_status llm__st_parse(struct llm__safetensors *s, struct llm__err *e) {
    const uint8_t *b = s->map;
    uint64_t hlen;
    if (s->size < 8)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: %zu bytes, too short for the header length", s->size);
    memcpy(&hlen, b, 8);
    if (hlen > LLM__ST_MAX_HEADER)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: header length %llu is more than the format allows "
                         "(100000000)", (unsigned long long)hlen);
    if (hlen > s->size - 8)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: header length %llu runs past the end of the file (%zu bytes)",
                         (unsigned long long)hlen, s->size);
    struct llm__st_header h = {.data = b + 8 + hlen, .dsize = s->size - 8 - hlen};
    enum llm_status st = llm__json_parse(&h.j, (const char *)b + 8, (size_t)hlen, "safetensors header", e);
    if (st) return st;
    if (h.j.nodes[0].type != LLM__JSON_OBJ) {
        llm__json_free(&h.j);
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: the header is not a JSON object");
    }
    const int32_t n = h.j.nodes[0].n;
    s->t = calloc((size_t)n + 1, sizeof(*s->t));
    h.spans = calloc((size_t)n + 1, sizeof(*h.spans));
    if (!s->t || !h.spans || !llm__gguf_index_init(&s->ix, n)) {
        free(h.spans);
        llm__json_free(&h.j);
        return llm__fail(e, LLM_ERR_NOMEM, "safetensors: out of memory for %d tensors", (int)n);
    }
    for (int32_t m = 0, k = 1; m < n && st == LLM_OK; m++, k = h.j.nodes[k + 1].next)
        st = llm__st_member(s, &h, k, e);
    llm__json_free(&h.j);
    if (st == LLM_OK) st = llm__st_check_overlap(s, h.spans, h.n_spans, e);
    free(h.spans);
    return st;
}

// Opens a safetensors file: mapped (or read into memory: read_all) and parsed. Messages end with
// the path.
enum llm_status llm__st_open(struct llm__safetensors *s, const char *path, bool read_all, struct llm__err *e) {
    memset(s, 0, sizeof(*s));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "safetensors: cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "safetensors: '%s' is not a regular, non-empty file", path);
    }
    enum llm_status st = LLM_OK;
    if (read_all) {
        void *buf = llm__alloc((size_t)sb.st_size);
        if (!buf) st = llm__fail(e, LLM_ERR_NOMEM, "safetensors: no memory to read '%s'", path);
        else if ((st = llm__read_all(fd, buf, (size_t)sb.st_size, path, e)) != LLM_OK) free(buf);
        else { s->map = buf; s->owns_buf = true; }
    } else {
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) st = llm__fail(e, LLM_ERR_IO, "safetensors: cannot map '%s': %s", path, strerror(errno));
        else { s->map = map; s->owns_map = true; }
    }
    close(fd);
    if (st) return st;
    s->size = (size_t)sb.st_size;
    if ((st = llm__st_parse(s, e)) != LLM_OK) {
        llm__st_close(s);
        if (e) {
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof(e->msg) - n, " (in '%s')", path);
        }
    }
    return st;
}
