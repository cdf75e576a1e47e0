// GGUF model files: reader, name index, typed getters

#include "internal.h"

// === model files: GGUF ===
// GGUF v2/v3 (little-endian), the file format of llama.cpp. Layout:
//
//   "GGUF"  u32 version  u64 n_tensors  u64 n_kv
//   n_kv x      { str key, u32 type, value }       value: scalar, str, or
//                                                  { u32 elem_type, u64 n, n elements }
//   n_tensors x { str name, u32 n_dims, i64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to general.alignment (u32, default 32)
//   data section: each tensor at data_offset + offset, offset a multiple of the alignment
//
// A string is { u64 len, len bytes } with no terminator. v1 (u32 counts and lengths) is gone
// from the wild and not read; v2 and v3 only differ in that v3 may be big-endian, which this
// reader refuses (its integers would all read byte-swapped).
//
// The reader maps the whole file (or reads it into memory: no_mmap) and keeps pointers into it
// (tensor data, string values, array elements): nothing is copied but the key and tensor names,
// which get a NUL.
// The file is treated as hostile: every count, length, offset and size is checked against the
// bytes that remain before it is used or anything proportional to it is allocated, so a
// corrupt or malicious file gets a message naming what is wrong and where, never a crash.
//
// Decisions where ggml is looser:
// - n_dims must be 1..4 and every dimension >= 1. ggml accepts n_dims 0 and empty (0-sized)
//   dimensions, but no model uses them, and refusing them here spares every consumer a
//   division by zero or a zero-row special case.
// - arrays of arrays are refused (ggml refuses them too; the spec allows them).
// - tensor names are at most 63 bytes (ggml's GGML_MAX_NAME 64 with its NUL); keys at most
//   65535 bytes (the spec's limit); neither may be empty or contain a NUL byte.
// - tensor offsets need not be in order or contiguous (ggml's reader wants them contiguous, the
//   spec does not); each must be aligned and lie with its data inside the file. Overlaps are
//   not checked: they cannot make a read leave the file.
// - a tensor type id that is no ggml type is an error; a ggml type this build cannot compute
//   with is not (the model loader decides, and can then name the tensor and the type).
//
// The reader assumes a little-endian host (x86, ARM): GGUF integers are read with memcpy. The
// writers: tests/gguf_writer.h (the tests and the model generator) and llm_quantize's (src/quantize.c).
#define LLM__GGUF_MAX_KEY 65535   // bytes, the spec's limit
#define LLM__GGUF_MAX_DIMS 4

static const char *llm__gguf_type_name(uint32_t type) {
    static const char *const names[LLM__GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return type < LLM__GGUF_TYPE_COUNT ? names[type] : "unknown";
}

// Bytes of one scalar value; 0 for strings, arrays and unknown ids.
static size_t llm__gguf_type_size(uint32_t type) {
    static const uint8_t sizes[LLM__GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < LLM__GGUF_TYPE_COUNT ? sizes[type] : 0;
}

// A name from the file, made safe to print in a message: at most 80 bytes, non-printable
// bytes as '?', "..." when cut.
const char *llm__gguf_printable(char out[88], const char *p, uint64_t len) {
    size_t n = len > 80 ? 80 : (size_t)len, i;
    for (i = 0; i < n; i++) out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    if (len > 80) out[n++] = '.', out[n++] = '.', out[n++] = '.';
    out[n] = 0;
    return out;
}

static bool llm__gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Checked a * b for non-negative operands; false on overflow of INT64_MAX.
static bool llm__gguf_mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

// === GGUF: name index ===

// The index's hash: FNV-1a from the index's seed, mixed so that every bit of the state reaches
// the slot (its low bits).
static uint64_t llm__gguf_hash_keyed(const char *s, size_t n, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ h >> 33;
}

bool llm__gguf_index_init(struct llm__gguf_index *ix, int64_t n) {
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap *= 2;     // load factor <= 1/2
    ix->slots = malloc(cap * sizeof(int64_t));
    if (!ix->slots) return false;
    for (uint64_t i = 0; i < cap; i++) ix->slots[i] = -1;
    ix->mask = cap - 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = ((uint64_t)(uintptr_t)ix ^ (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec) * 0x9E3779B97F4A7C15ull;
    ix->seed = x ^ x >> 29;
    return true;
}

// Finds name in items (an array of structs of `stride` bytes whose first member is the
// char * name). Returns the item index, or -1 with *slot set to the empty slot where the
// name would go.
int64_t llm__gguf_index_find(const struct llm__gguf_index *ix, const void *items,
                             size_t stride, const char *name, uint64_t *slot) {
    if (!ix->slots) return -1;
    size_t n = strlen(name);
    uint64_t i = llm__gguf_hash_keyed(name, n, ix->seed) & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        int64_t at = ix->slots[i];
        if (at < 0) break;
        const char *other = *(char *const *)(const void *)((const char *)items + (size_t)at * stride);
        if (strcmp(other, name) == 0) return at;
    }
    if (slot) *slot = i;
    return -1;
}

// === GGUF: reader ===

// A read position in the mapping. The read functions check the bytes left, and on failure
// leave the message in e and the status in st and return false.
struct llm__gguf_cur {
    const uint8_t *base;
    size_t size, pos;
    enum llm_status st;
    struct llm__err *e;
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool llm__gguf_bad(struct llm__gguf_cur *c, enum llm_status st, const char *fmt, ...) {
    if (c->e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->e->msg, sizeof(c->e->msg), fmt, ap);
        va_end(ap);
    }
    c->st = st;
    return false;
}

static bool llm__gguf_need(struct llm__gguf_cur *c, uint64_t n, const char *what) {
    if (n <= c->size - c->pos) return true;
    return llm__gguf_bad(c, LLM_ERR_FORMAT,
                         "gguf: truncated file: %s at byte offset %zu needs %llu bytes, %zu left "
                         "(file is %zu bytes)", what, c->pos, (unsigned long long)n,
                         c->size - c->pos, c->size);
}

static bool llm__gguf_rd(struct llm__gguf_cur *c, void *out, size_t n, const char *what) {
    if (!llm__gguf_need(c, n, what)) return false;
    memcpy(out, c->base + c->pos, n);
    c->pos += n;
    return true;
}

// A string of at most max_len bytes. The length is checked against the bytes left, so a
// huge length is refused before anything is done with it.
static bool llm__gguf_rd_str(struct llm__gguf_cur *c, struct llm__gguf_str *s, uint64_t max_len,
                             const char *what) {
    size_t at = c->pos;
    uint64_t len;
    if (!llm__gguf_rd(c, &len, 8, what)) return false;
    if (len > max_len)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is %llu bytes long, "
                             "more than the limit of %llu", what, at, (unsigned long long)len,
                             (unsigned long long)max_len);
    if (len > c->size - c->pos)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: %s at byte offset %zu is "
                             "%llu bytes long, only %zu bytes left (file is %zu bytes)", what, at,
                             (unsigned long long)len, c->size - c->pos, c->size);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

// A key or tensor name: 1..max_len bytes, no NUL, copied with a terminator.
static bool llm__gguf_rd_name(struct llm__gguf_cur *c, char **out, uint64_t max_len,
                              const char *what, int64_t i) {
    size_t at = c->pos;
    struct llm__gguf_str s;
    char desc[64];
    snprintf(desc, sizeof(desc), "%s %lld", what, (long long)i);
    if (!llm__gguf_rd_str(c, &s, max_len, desc)) return false;
    if (s.len == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is empty", desc, at);
    if (memchr(s.ptr, 0, (size_t)s.len)) {
        char pr[88];
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s '%s' at byte offset %zu contains a NUL "
                             "byte", desc, llm__gguf_printable(pr, s.ptr, s.len), at);
    }
    *out = malloc((size_t)s.len + 1);
    if (!*out) return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory reading %s", desc);
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = 0;
    return true;
}

// An array value: element type, count, then the elements (strings are indexed; other elements
// are left in place, at arr_data).
static bool llm__gguf_rd_arr(struct llm__gguf_cur *c, struct llm__gguf_kv *kv, const char *key, const char *what) {
    char item[128];
    size_t elem_at = c->pos;
    if (!llm__gguf_rd(c, &kv->arr_type, 4, what) || !llm__gguf_rd(c, &kv->arr_n, 8, what)) return false;
    if (kv->arr_type == LLM__GGUF_ARR)
        return llm__gguf_bad(c, LLM_ERR_UNSUPPORTED, "gguf: key '%s' is an array of arrays "
                             "(byte offset %zu); nested arrays are not supported", key, elem_at);
    if (kv->arr_type >= LLM__GGUF_TYPE_COUNT)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown array element "
                             "type id %u at byte offset %zu", key, kv->arr_type, elem_at);
    // Each element takes at least 1 byte (8 for a string's length), so this bounds the
    // count, and the allocation below, by the file size.
    size_t esize = kv->arr_type == LLM__GGUF_STR ? 8 : llm__gguf_type_size(kv->arr_type);
    if (kv->arr_n > (c->size - c->pos) / esize)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: key '%s' is an array of "
                             "%llu %s at byte offset %zu, more than the %zu bytes left can "
                             "hold", key, (unsigned long long)kv->arr_n,
                             llm__gguf_type_name(kv->arr_type), elem_at, c->size - c->pos);
    kv->arr_data = c->base + c->pos;
    if (kv->arr_type != LLM__GGUF_STR) {
        c->pos += (size_t)kv->arr_n * esize;
        return true;
    }
    kv->arr_str = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof(*kv->arr_str));
    if (!kv->arr_str)
        return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory for the %llu strings "
                             "of key '%s'", (unsigned long long)kv->arr_n, key);
    for (uint64_t j = 0; j < kv->arr_n; j++) {
        snprintf(item, sizeof(item), "string %llu of key '%s'", (unsigned long long)j, key);
        if (!llm__gguf_rd_str(c, &kv->arr_str[j], UINT64_MAX, item)) return false;
    }
    return true;
}

// A number or bool value, widened into kv->v (u64, i64 or f64 by its type).
static bool llm__gguf_rd_scalar(struct llm__gguf_cur *c, struct llm__gguf_kv *kv, const char *what) {
    uint8_t b[8] = {0};
    if (!llm__gguf_rd(c, b, llm__gguf_type_size(kv->type), what)) return false;
    switch (kv->type) {
    case LLM__GGUF_U8: kv->v.u64 = b[0]; break;
    case LLM__GGUF_BOOL: kv->v.u64 = b[0] != 0; break;
    case LLM__GGUF_I8: { int8_t x; memcpy(&x, b, 1); kv->v.i64 = x; } break;
    case LLM__GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.u64 = x; } break;
    case LLM__GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i64 = x; } break;
    case LLM__GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.u64 = x; } break;
    case LLM__GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i64 = x; } break;
    case LLM__GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f64 = x; } break;
    case LLM__GGUF_U64: memcpy(&kv->v.u64, b, 8); break;
    case LLM__GGUF_I64: memcpy(&kv->v.i64, b, 8); break;
    case LLM__GGUF_F64: memcpy(&kv->v.f64, b, 8); break;
    default: break;
    }
    return true;
}

// One key/value pair, from its key to the end of its value.
static bool llm__gguf_rd_kv(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_kv *kv = &g->kv[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &kv->key, LLM__GGUF_MAX_KEY, "key", i)) return false;
    char pr[88], what[128];
    const char *key = llm__gguf_printable(pr, kv->key, strlen(kv->key));
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), kv->key, &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate key '%s' (key/value %lld at byte "
                             "offset %zu repeats key/value %lld)", key, (long long)i, at,
                             (long long)dup);
    g->kv_index.slots[slot] = i;

    kv->raw = c->base + c->pos;
    size_t type_at = c->pos;
    snprintf(what, sizeof(what), "the type of key '%s'", key);
    if (!llm__gguf_rd(c, &kv->type, 4, what)) return false;
    if (kv->type >= LLM__GGUF_TYPE_COUNT)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown value type id %u at "
                             "byte offset %zu", key, kv->type, type_at);

    snprintf(what, sizeof(what), "the value of key '%s'", key);
    bool ok = kv->type == LLM__GGUF_ARR ? llm__gguf_rd_arr(c, kv, key, what)
            : kv->type == LLM__GGUF_STR ? llm__gguf_rd_str(c, &kv->v.str, UINT64_MAX, what)
                                        : llm__gguf_rd_scalar(c, kv, what);
    if (!ok) return false;
    kv->raw_len = (size_t)(c->base + c->pos - kv->raw);
    return true;
}

// One tensor info: name, shape, type, offset. Sizes are computed with overflow checks.
static bool llm__gguf_rd_tensor(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_tensor *t = &g->tensors[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &t->name, UINT64_MAX, "tensor name", i)) return false;
    char pr[88];
    const char *name = llm__gguf_printable(pr, t->name, strlen(t->name));
    if (strlen(t->name) > LLM__GGUF_MAX_NAME)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor %lld name '%s' at byte offset %zu is "
                             "%zu bytes long, more than the limit of %d", (long long)i, name, at,
                             strlen(t->name), LLM__GGUF_MAX_NAME);
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), t->name,
                                       &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate tensor name '%s' (tensors %lld "
                             "and %lld, byte offset %zu)", name, (long long)dup, (long long)i, at);
    g->tensor_index.slots[slot] = i;

    char what[128];
    snprintf(what, sizeof(what), "the shape, type and offset of tensor '%s'", name);
    uint32_t n_dims;
    if (!llm__gguf_rd(c, &n_dims, 4, what)) return false;
    if (n_dims < 1 || n_dims > LLM__GGUF_MAX_DIMS)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has %u dimensions, must be 1..%d "
                             "(byte offset %zu)", name, n_dims, LLM__GGUF_MAX_DIMS, c->pos - 4);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if (!llm__gguf_rd(c, &t->ne[d], 8, what)) return false;
        if (t->ne[d] < 1)
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' dimension %d is %lld, must be "
                                 ">= 1 (byte offset %zu)", name, d, (long long)t->ne[d], c->pos - 8);
        if (!llm__gguf_mul_i64(nel, t->ne[d], &nel))
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' element count overflows "
                                 "(dimension %d is %lld)", name, d, (long long)t->ne[d]);
    }

    size_t type_at = c->pos;
    if (!llm__gguf_rd(c, &t->type, 4, what)) return false;
    const struct llm__type_info *ti = llm__type_info(t->type);
    int64_t blck = ti ? (int64_t)ti->blck : 0, bytes;
    if (!ti || ti->internal || blck <= 0 || ti->block_bytes == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has unknown tensor type id %u "
                             "(byte offset %zu)", name, t->type, type_at);
    if (t->ne[0] % blck != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' of type %s has rows of %lld "
                             "elements, not a multiple of the type's block size %lld", name,
                             ti->name, (long long)t->ne[0], (long long)blck);
    if (!llm__gguf_mul_i64(nel / blck, (int64_t)ti->block_bytes, &bytes) ||
        (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' byte size overflows "
                             "(%lld elements of type %s)", name, (long long)nel, ti->name);
    t->size = (size_t)bytes;

    if (!llm__gguf_rd(c, &t->offset, 8, what)) return false;
    if (t->offset % g->alignment != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' data offset %llu is not a "
                             "multiple of the alignment %zu (byte offset %zu)", name,
                             (unsigned long long)t->offset, g->alignment, c->pos - 8);
    return true;
}

// The header: magic, version (v2 and v3, little-endian), the tensor and key/value counts, which
// must fit in the bytes after it.
static enum llm_status llm__gguf_rd_header(struct llm__gguf_cur *c, struct llm__gguf *g, uint64_t *n_tensors,
                                           uint64_t *n_kv, struct llm__err *e) {
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian hosts are not supported");
    char magic[4];
    if (!llm__gguf_rd(c, magic, 4, "magic")) return c->st;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char pr[88];
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad magic '%s' (bytes %02x %02x %02x %02x), "
                         "expected 'GGUF': not a GGUF file", llm__gguf_printable(pr, magic, 4),
                         (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    }
    if (!llm__gguf_rd(c, &g->version, 4, "version")) return c->st;
    // A big-endian file's small version number reads as n << 24 here.
    if (g->version != 0 && (g->version & 0xffffu) == 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian GGUF is not supported (version "
                         "field 0x%08x)", g->version);
    if (g->version == 0)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad GGUF version 0");
    if (g->version == 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: GGUF v1 is not supported (convert the model "
                         "again with a current llama.cpp)");
    if (g->version > 3)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: unsupported GGUF version %u (this reader "
                         "knows v2 and v3)", g->version);

    if (!llm__gguf_rd(c, n_tensors, 8, "tensor count")) return c->st;
    if (!llm__gguf_rd(c, n_kv, 8, "key/value count")) return c->st;
    // Smallest serialized key/value: key length 8 + 1 byte of key + type 4 + a u8 value.
    // Smallest tensor info: name length 8 + 1 + n_dims 4 + one dimension 8 + type 4 + offset 8.
    // Counts that cannot fit are refused before the caller allocates arrays for them.
    size_t left = c->size - c->pos;
    if (*n_kv > left / 14)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key/value count %llu cannot fit in the %zu "
                         "bytes after the header", (unsigned long long)*n_kv, left);
    if (*n_tensors > left / 33 || *n_kv * 14 + *n_tensors * 33 > left)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: tensor count %llu cannot fit in the %zu bytes "
                         "after the header (with %llu key/values)", (unsigned long long)*n_tensors,
                         left, (unsigned long long)*n_kv);
    return LLM_OK;
}

// The tensor data alignment: general.alignment (a u32 power of two) or the default.
static enum llm_status llm__gguf_alignment(struct llm__gguf *g, struct llm__err *e) {
    g->alignment = LLM__GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), "general.alignment", NULL);
    if (ai < 0) return LLM_OK;
    const struct llm__gguf_kv *kv = &g->kv[ai];
    if (kv->type != LLM__GGUF_U32)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' has type %s, must be "
                         "u32", llm__gguf_type_name(kv->type));
    if (!llm__gguf_is_pow2(kv->v.u64))
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' is %llu, must be a "
                         "power of two", (unsigned long long)kv->v.u64);
    g->alignment = (size_t)kv->v.u64;
    return LLM_OK;
}

// Places the data section at the first multiple of the alignment after the tensor infos (which
// end at byte `end`) and every tensor's data in it, each checked to lie inside the file.
static enum llm_status llm__gguf_place_tensors(struct llm__gguf *g, size_t end, struct llm__err *e) {
    // A vocabulary-only file may end before the data section; then there is none.
    uint64_t data_offset = ((uint64_t)end + g->alignment - 1) / g->alignment * g->alignment;
    if (data_offset > g->size) {
        if (g->n_tensors > 0)
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: truncated file: the data section would start "
                             "at byte offset %llu, past the end of the file (%zu bytes)",
                             (unsigned long long)data_offset, g->size);
        data_offset = g->size;
    }
    g->data_offset = (size_t)data_offset;
    size_t data_size = g->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct llm__gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->size > data_size - t->offset) {
            char pr[88];
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: truncated file: tensor '%s' data [offset %llu, size %zu] "
                             "extends past the end of the file (%zu bytes, data section from "
                             "byte offset %zu)", llm__gguf_printable(pr, t->name, strlen(t->name)),
                             (unsigned long long)t->offset, t->size, g->size, g->data_offset);
        }
        t->data = (const uint8_t *)g->map + g->data_offset + t->offset;
    }
    return LLM_OK;
}

// Parses g->map[0 .. g->size): header, key/values, alignment, tensor infos, data placement. On
// failure the caller closes g (which frees what was built).
enum llm_status llm__gguf_parse(struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_cur c = {g->map, g->size, 0, LLM_OK, e};
    uint64_t n_tensors, n_kv;
    enum llm_status st = llm__gguf_rd_header(&c, g, &n_tensors, &n_kv, e);
    if (st) return st;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*g->kv));
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors || !llm__gguf_index_init(&g->kv_index, (int64_t)n_kv) ||
        !llm__gguf_index_init(&g->tensor_index, (int64_t)n_tensors))
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: out of memory for %llu key/values and %llu "
                         "tensors", (unsigned long long)n_kv, (unsigned long long)n_tensors);
    for (int64_t i = 0; i < (int64_t)n_kv; i++) {
        g->n_kv = i + 1;   // so that close frees what this entry allocated, even on failure
        if (!llm__gguf_rd_kv(&c, g, i)) return c.st;
    }
    if ((st = llm__gguf_alignment(g, e))) return st;
    for (int64_t i = 0; i < (int64_t)n_tensors; i++) {
        g->n_tensors = i + 1;
        if (!llm__gguf_rd_tensor(&c, g, i)) return c.st;
    }
    return llm__gguf_place_tensors(g, c.pos, e);
}

void llm__gguf_close(struct llm__gguf *g) {
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].arr_str);
        }
    if (g->tensors)
        for (int64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->owns_map && g->map) munmap(g->map, g->size);
    if (g->owns_buf) free(g->map);
    if (g->extra_free) g->extra_free(g->extra);
    memset(g, 0, sizeof(*g));
}

// Opens a GGUF file and parses it: mapped read-only (tensors are used in place from the page
// cache: the file must not change while it is mapped, or an access to a page that is gone ends
// the process with SIGBUS), or, with read_all, read into memory (as llama.cpp's --no-mmap:
// afterwards the file may change or go). Every open checks the tensors' extents against the
// file's size as it is then. Error messages end with the path.
enum llm_status llm__gguf_open_file(struct llm__gguf *g, const char *path, bool read_all, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    // O_NONBLOCK: opening a FIFO waits for a writer without it (forever); the file is checked
    // to be a regular one right after, and regular files ignore the flag
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is a directory, not a GGUF file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: '%s' is empty (0 bytes)", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: '%s' (%lld bytes) is too large to map", path,
                         (long long)st.st_size);
    }
    enum llm_status s = LLM_OK;
    if (read_all) {
        void *buf = llm__alloc((size_t)st.st_size);
        if (!buf)
            s = llm__fail(e, LLM_ERR_NOMEM, "gguf: no memory to read '%s' (%lld bytes)", path, (long long)st.st_size);
        else if ((s = llm__read_all(fd, buf, (size_t)st.st_size, path, e)) != LLM_OK) free(buf);
        close(fd);
        if (s != LLM_OK) return s;
        g->map = buf;
        g->owns_buf = true;
    } else {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        int err = errno;
        close(fd);   // the mapping stays valid
        if (map == MAP_FAILED)
            return llm__fail(e, LLM_ERR_IO, "gguf: cannot map '%s': %s", path, strerror(err));
        g->map = map;
        g->owns_map = true;
    }
    g->size = (size_t)st.st_size;
    s = llm__gguf_parse(g, e);
    if (s != LLM_OK) {
        llm__gguf_close(g);
        if (e) {
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof(e->msg) - n, " (in '%s')", path);
        }
    }
    return s;
}

int64_t llm__gguf_find_key(const struct llm__gguf *g, const char *key) {
    return llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), key, NULL);
}

const struct llm__gguf_tensor *llm__gguf_find_tensor(const struct llm__gguf *g,
                                                     const char *name) {
    int64_t i = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), name, NULL);
    return i < 0 ? NULL : &g->tensors[i];
}

// === GGUF: typed getters ===
// Each returns false with a message naming the key when the key is absent, has an
// incompatible type, or a value out of range. For an optional key, test llm__gguf_find_key first.

static const struct llm__gguf_kv *llm__gguf_get_kv(const struct llm__gguf *g, const char *key,
                                                   struct llm__err *e) {
    int64_t i = llm__gguf_find_key(g, key);
    if (i < 0) llm__fail(e, LLM_ERR_FORMAT, "gguf: missing key '%s'", key);
    return i < 0 ? NULL : &g->kv[i];
}

static bool llm__gguf_kv_is_int(const struct llm__gguf_kv *kv) {
    switch (kv->type) {
    case LLM__GGUF_U8: case LLM__GGUF_U16: case LLM__GGUF_U32: case LLM__GGUF_U64:
    case LLM__GGUF_I8: case LLM__GGUF_I16: case LLM__GGUF_I32: case LLM__GGUF_I64: return true;
    default: return false;
    }
}
static bool llm__gguf_kv_is_signed(const struct llm__gguf_kv *kv) {
    return kv->type == LLM__GGUF_I8 || kv->type == LLM__GGUF_I16 || kv->type == LLM__GGUF_I32 ||
           kv->type == LLM__GGUF_I64;
}

// A key of any integer type whose value lies in [lo, hi] (lo <= 0 compared as signed, hi as
// unsigned, so the range can reach from INT64_MIN to UINT64_MAX). The value goes to *out_i or
// *out_u, whichever is not NULL.
static bool llm__gguf_get_int(const struct llm__gguf *g, const char *key, int64_t lo, uint64_t hi,
                              const char *want, int64_t *out_i, uint64_t *out_u, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (!llm__gguf_kv_is_int(kv)) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                  llm__gguf_type_name(kv->type), want);
        return false;
    }
    bool neg = llm__gguf_kv_is_signed(kv) && kv->v.i64 < 0;
    if ((neg && kv->v.i64 < lo) || (!neg && kv->v.u64 > hi)) {
        if (neg)
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %lld, out of range for %s", key,
                      (long long)kv->v.i64, want);
        else
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %llu, out of range for %s", key,
                      (unsigned long long)kv->v.u64, want);
        return false;
    }
    if (out_i) *out_i = kv->v.i64;
    if (out_u) *out_u = kv->v.u64;
    return true;
}

bool llm__gguf_get_u32(const struct llm__gguf *g, const char *key, uint32_t *out,
                       struct llm__err *e) {
    uint64_t v;
    if (!llm__gguf_get_int(g, key, 0, UINT32_MAX, "an unsigned 32-bit integer", NULL, &v, e))
        return false;
    *out = (uint32_t)v;
    return true;
}

bool llm__gguf_get_f32(const struct llm__gguf *g, const char *key, float *out,
                       struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type == LLM__GGUF_F32 || kv->type == LLM__GGUF_F64) {
        if (isfinite(kv->v.f64) && fabs(kv->v.f64) > FLT_MAX) {
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %g, out of range for f32", key, kv->v.f64);
            return false;
        }
        *out = (float)kv->v.f64;
    } else if (llm__gguf_kv_is_int(kv)) {
        *out = llm__gguf_kv_is_signed(kv) ? (float)kv->v.i64 : (float)kv->v.u64;
    } else {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected a number", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    return true;
}

bool llm__gguf_get_bool(const struct llm__gguf *g, const char *key, bool *out,
                        struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_BOOL) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected bool", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.u64 != 0;
    return true;
}

bool llm__gguf_get_str(const struct llm__gguf *g, const char *key, struct llm__gguf_str *out,
                       struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_STR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected string", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.str;
    return true;
}

// An array of any element type: *data points at n packed elements in the mapping (read them
// with memcpy: they need not be aligned), or for string arrays at n struct llm__gguf_str.
bool llm__gguf_get_arr(const struct llm__gguf *g, const char *key, uint32_t *elem_type,
                       uint64_t *n, const void **data, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_ARR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected an array", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->arr_type == LLM__GGUF_STR ? (const void *)kv->arr_str : (const void *)kv->arr_data;
    return true;
}

bool llm__str_has(const struct llm__gguf_str *s, const char *z) {
    size_t n = strlen(z);
    return n <= s->len && llm__memmem(s->ptr, s->len, z, n) != NULL;
}
