// gguf_writer.h — the GGUF writer and the few reader functions that only the tests and the
// model generator use (the engine reads files, it never writes them). Include it after
// "../llm.c": it uses the reader's structs and checks (struct llm__gguf, llm__type_info).
//
// The writer streams: key/values and tensor declarations are collected in memory (small),
// then the header goes out and tensor bytes follow in declaration order, in chunks of any
// size, so multi-GB files never sit in memory. It writes v3 with general.alignment (32 unless
// set), padding after every tensor including the last as ggml does. Like the reader it assumes
// a little-endian host.
#ifndef LLM_TESTS_GGUF_WRITER_H
#define LLM_TESTS_GGUF_WRITER_H

// Not every program uses every function here.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

// --- reader additions ---

// Parses a GGUF file held in memory (not copied: it must outlive g).
static enum llm_status llm__gguf_open_memory(struct llm__gguf *g, const void *data, size_t size,
                                             struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    g->map = (void *)(uintptr_t)data;
    g->size = size;
    enum llm_status st = llm__gguf_parse(g, e);
    if (st != LLM_OK) llm__gguf_close(g);
    return st;
}

// Maps a GGUF file and parses it (the engine opens through llm__gguf_open_file, which can also
// read the file into memory).
static enum llm_status llm__gguf_open(struct llm__gguf *g, const char *path, struct llm__err *e) {
    return llm__gguf_open_file(g, path, false, e);
}

// s holds exactly the bytes of cstr.
static bool llm__gguf_str_eq(struct llm__gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

// Typed getters as llm.c's (llm__gguf_get_u32, ...) for types the engine does not read.
static bool llm__gguf_get_i32(const struct llm__gguf *g, const char *key, int32_t *out,
                              struct llm__err *e) {
    int64_t v;
    if (!llm__gguf_get_int(g, key, INT32_MIN, INT32_MAX, "a signed 32-bit integer", &v, NULL, e))
        return false;
    *out = (int32_t)v;
    return true;
}

static bool llm__gguf_get_u64(const struct llm__gguf *g, const char *key, uint64_t *out,
                              struct llm__err *e) {
    return llm__gguf_get_int(g, key, 0, UINT64_MAX, "an unsigned integer", NULL, out, e);
}

// --- writer ---

struct llm__gguf_writer_tensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset, size;     // in the data section
};

struct llm__gguf_writer {
    uint8_t *kv;               // the serialized key/value pairs (kv_len bytes)
    size_t kv_len, kv_cap;
    char **keys;               // (n_kv) for duplicate checks
    int64_t n_kv, keys_cap;
    uint32_t alignment;        // general.alignment (32 unless set)
    struct llm__gguf_writer_tensor *tensors;   // (n_tensors), in declaration = file order
    int64_t n_tensors, tensors_cap;
    FILE *f;                   // set by begin
    int64_t cur;               // the tensor whose bytes come next
    uint64_t cur_done;         // bytes of it written so far
};

static void llm__gguf_writer_init(struct llm__gguf_writer *w) {
    memset(w, 0, sizeof(*w));
    w->alignment = LLM__GGUF_DEFAULT_ALIGNMENT;
}

static void llm__gguf_writer_free(struct llm__gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    memset(w, 0, sizeof(*w));
}

static bool llm__gguf_writer_put(struct llm__gguf_writer *w, const void *p, size_t n) {
    if (n > w->kv_cap - w->kv_len) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap - w->kv_len < n) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        uint8_t *kv = realloc(w->kv, cap);
        if (!kv) return false;
        w->kv = kv;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return true;
}

static bool llm__gguf_writer_put_str(struct llm__gguf_writer *w, const char *s, uint64_t len) {
    return llm__gguf_writer_put(w, &len, 8) && llm__gguf_writer_put(w, s, (size_t)len);
}

// Starts a key/value: checks the key, appends it and the value type. The caller appends
// the value; on failure it truncates back to *mark (llm__gguf_writer_kv_end).
static enum llm_status llm__gguf_writer_kv_begin(struct llm__gguf_writer *w, const char *key,
                                                 uint32_t type, size_t *mark, struct llm__err *e) {
    size_t len = strlen(key);
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s' set after begin", key);
    if (len == 0 || len > LLM__GGUF_MAX_KEY)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key length %zu is not in 1..%d", len,
                         LLM__GGUF_MAX_KEY);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: duplicate key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        int64_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **keys = realloc(w->keys, (size_t)cap * sizeof(*keys));
        if (!keys) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
        w->keys = keys;
        w->keys_cap = cap;
    }
    *mark = w->kv_len;
    if (!llm__gguf_writer_put_str(w, key, len) || !llm__gguf_writer_put(w, &type, 4))
        return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_kv_end(struct llm__gguf_writer *w, const char *key,
                                               bool ok, size_t mark, struct llm__err *e) {
    char *copy = ok ? malloc(strlen(key) + 1) : NULL;
    if (!copy) {
        w->kv_len = mark;
        return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
    }
    strcpy(copy, key);
    w->keys[w->n_kv++] = copy;
    return LLM_OK;
}

// A scalar of any type but string and array; value points at the C type of that GGUF type
// (uint8_t 0/1 for bool). general.alignment (u32, a power of two) sets the alignment.
static enum llm_status llm__gguf_writer_set(struct llm__gguf_writer *w, const char *key,
                                            uint32_t type, const void *value, struct llm__err *e) {
    size_t n = llm__gguf_type_size(type), mark;
    if (n == 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': type %s is no scalar",
                         key, llm__gguf_type_name(type));
    bool is_alignment = strcmp(key, "general.alignment") == 0;
    uint32_t alignment = 0;
    if (is_alignment && type == LLM__GGUF_U32) memcpy(&alignment, value, 4);
    if (is_alignment && !llm__gguf_is_pow2(alignment))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32 "
                         "power of two");
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, type, &mark, e);
    if (st != LLM_OK) return st;
    st = llm__gguf_writer_kv_end(w, key, llm__gguf_writer_put(w, value, n), mark, e);
    if (st == LLM_OK && is_alignment) w->alignment = alignment;   // tensor offsets use it at begin
    return st;
}

static enum llm_status llm__gguf_writer_set_u8(struct llm__gguf_writer *w, const char *k,
                                               uint8_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U8, &v, e);
}
static enum llm_status llm__gguf_writer_set_i8(struct llm__gguf_writer *w, const char *k,
                                               int8_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I8, &v, e);
}
static enum llm_status llm__gguf_writer_set_u16(struct llm__gguf_writer *w, const char *k,
                                                uint16_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U16, &v, e);
}
static enum llm_status llm__gguf_writer_set_i16(struct llm__gguf_writer *w, const char *k,
                                                int16_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I16, &v, e);
}
static enum llm_status llm__gguf_writer_set_u32(struct llm__gguf_writer *w, const char *k,
                                                uint32_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U32, &v, e);
}
static enum llm_status llm__gguf_writer_set_i32(struct llm__gguf_writer *w, const char *k,
                                                int32_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I32, &v, e);
}
static enum llm_status llm__gguf_writer_set_u64(struct llm__gguf_writer *w, const char *k,
                                                uint64_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U64, &v, e);
}
static enum llm_status llm__gguf_writer_set_i64(struct llm__gguf_writer *w, const char *k,
                                                int64_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I64, &v, e);
}
static enum llm_status llm__gguf_writer_set_f32(struct llm__gguf_writer *w, const char *k,
                                                float v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_F32, &v, e);
}
static enum llm_status llm__gguf_writer_set_f64(struct llm__gguf_writer *w, const char *k,
                                                double v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_F64, &v, e);
}
static enum llm_status llm__gguf_writer_set_bool(struct llm__gguf_writer *w, const char *k,
                                                 bool v, struct llm__err *e) {
    uint8_t b = v;
    return llm__gguf_writer_set(w, k, LLM__GGUF_BOOL, &b, e);
}

static enum llm_status llm__gguf_writer_set_str(struct llm__gguf_writer *w, const char *key,
                                                const char *value, struct llm__err *e) {
    size_t mark;
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_STR, &mark, e);
    if (st != LLM_OK) return st;
    return llm__gguf_writer_kv_end(w, key, llm__gguf_writer_put_str(w, value, strlen(value)), mark, e);
}

// An array of n scalars of elem_type, packed in data (the C type of elem_type).
static enum llm_status llm__gguf_writer_set_arr(struct llm__gguf_writer *w, const char *key,
                                                uint32_t elem_type, uint64_t n, const void *data,
                                                struct llm__err *e) {
    size_t esize = llm__gguf_type_size(elem_type), mark;
    if (esize == 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': arrays of %s are not "
                         "supported here", key, llm__gguf_type_name(elem_type));
    if (n > SIZE_MAX / esize)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': array too large", key);
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_ARR, &mark, e);
    if (st != LLM_OK) return st;
    bool ok = llm__gguf_writer_put(w, &elem_type, 4) && llm__gguf_writer_put(w, &n, 8) &&
              llm__gguf_writer_put(w, data, (size_t)n * esize);
    return llm__gguf_writer_kv_end(w, key, ok, mark, e);
}

// An array of n NUL-terminated strings.
static enum llm_status llm__gguf_writer_set_arr_str(struct llm__gguf_writer *w, const char *key,
                                                    uint64_t n, const char *const *strs,
                                                    struct llm__err *e) {
    size_t mark;
    uint32_t elem_type = LLM__GGUF_STR;
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_ARR, &mark, e);
    if (st != LLM_OK) return st;
    bool ok = llm__gguf_writer_put(w, &elem_type, 4) && llm__gguf_writer_put(w, &n, 8);
    for (uint64_t i = 0; ok && i < n; i++) ok = llm__gguf_writer_put_str(w, strs[i], strlen(strs[i]));
    return llm__gguf_writer_kv_end(w, key, ok, mark, e);
}

// Copies key/value `index` of an open reader, value bytes as they are in its file.
static enum llm_status llm__gguf_writer_copy_kv(struct llm__gguf_writer *w, const struct llm__gguf *g,
                                                int64_t index, struct llm__err *e) {
    if (index < 0 || index >= g->n_kv)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key/value index %lld out of range",
                         (long long)index);
    const struct llm__gguf_kv *kv = &g->kv[index];
    if (strcmp(kv->key, "general.alignment") == 0)   // goes through the checks of set()
        return llm__gguf_writer_set(w, kv->key, kv->type, kv->raw + 4, e);
    size_t mark;
    enum llm_status st = llm__gguf_writer_kv_begin(w, kv->key, kv->type, &mark, e);
    if (st != LLM_OK) return st;
    // raw starts with the 4-byte type id, already written by kv_begin
    return llm__gguf_writer_kv_end(w, kv->key, llm__gguf_writer_put(w, kv->raw + 4, kv->raw_len - 4),
            mark, e);
}

// Declares the next tensor (file order = declaration order). The same rules as the reader's.
static enum llm_status llm__gguf_writer_add_tensor(struct llm__gguf_writer *w, const char *name,
                                                   uint32_t type, int n_dims, const int64_t *ne,
                                                   struct llm__err *e) {
    size_t len = strlen(name);
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' added after begin", name);
    if (len == 0 || len > LLM__GGUF_MAX_NAME)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor name '%s' is not 1..%d bytes",
                         name, LLM__GGUF_MAX_NAME);
    if (n_dims < 1 || n_dims > LLM__GGUF_MAX_DIMS)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has %d dimensions", name,
                         n_dims);
    const struct llm__type_info *ti = llm__type_info(type);
    int64_t blck = ti ? (int64_t)ti->blck : 0;
    if (!ti || blck <= 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has unknown type id %u",
                         name, type);
    int64_t nel = 1, bytes;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1 || !llm__gguf_mul_i64(nel, ne[d], &nel))
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has a bad dimension "
      "%d (%lld)", name, d, (long long)ne[d]);
    if (ne[0] % blck != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' of type %s has rows of "
                         "%lld elements, not a multiple of %lld", name, ti->name, (long long)ne[0],
                         (long long)blck);
    if (!llm__gguf_mul_i64(nel / blck, (int64_t)ti->block_bytes, &bytes))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' is too large", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
    if (w->n_tensors == w->tensors_cap) {
        int64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
        struct llm__gguf_writer_tensor *t = realloc(w->tensors, (size_t)cap * sizeof(*t));
        if (!t) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
        w->tensors = t;
        w->tensors_cap = cap;
    }
    struct llm__gguf_writer_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = malloc(len + 1);
    if (!t->name) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
    memcpy(t->name, name, len + 1);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->size = (uint64_t)bytes;
    w->n_tensors++;
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_out(struct llm__gguf_writer *w, const void *p, size_t n,
                                            struct llm__err *e) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return llm__fail(e, LLM_ERR_IO, "gguf writer: write failed: %s", strerror(errno));
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_pad(struct llm__gguf_writer *w, uint64_t pos,
                                            struct llm__err *e) {
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - pos % w->alignment) % w->alignment;
    while (pad > 0) {
        size_t n = pad < sizeof(zeros) ? (size_t)pad : sizeof(zeros);
        enum llm_status st = llm__gguf_writer_out(w, zeros, n, e);
        if (st != LLM_OK) return st;
        pad -= n;
    }
    return LLM_OK;
}

// Writes the header, the key/values and the tensor infos to f (positioned at its start),
// padded to the alignment. Tensor bytes follow with llm__gguf_writer_write.
static enum llm_status llm__gguf_writer_begin(struct llm__gguf_writer *w, FILE *f,
                                              struct llm__err *e) {
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: begin called twice");
    w->f = f;
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        off += (w->tensors[i].size + w->alignment - 1) / w->alignment * w->alignment;
    }
    uint32_t version = 3;
    uint64_t n_tensors = (uint64_t)w->n_tensors, n_kv = (uint64_t)w->n_kv, pos = 24 + w->kv_len;
    enum llm_status st = llm__gguf_writer_out(w, "GGUF", 4, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &version, 4, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_tensors, 8, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_kv, 8, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, w->kv, w->kv_len, e);
    for (int64_t i = 0; st == LLM_OK && i < w->n_tensors; i++) {
        const struct llm__gguf_writer_tensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t n_dims = (uint32_t)t->n_dims;
        st = llm__gguf_writer_out(w, &len, 8, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, t->name, (size_t)len, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_dims, 4, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, t->ne, 8 * (size_t)t->n_dims, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &t->type, 4, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &t->offset, 8, e);
        pos += 8 + len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    // ggml's reader pads to the data section only when there are tensors
    if (st == LLM_OK && w->n_tensors > 0) st = llm__gguf_writer_pad(w, pos, e);
    return st;
}

// Appends n bytes of tensor data: the tensors' bytes in declaration order, in chunks of any
// size; padding between tensors is inserted here.
static enum llm_status llm__gguf_writer_write(struct llm__gguf_writer *w, const void *data,
                                              size_t n, struct llm__err *e) {
    const uint8_t *p = data;
    if (!w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor data before begin");
    while (n > 0) {
        if (w->cur >= w->n_tensors)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: %zu bytes of tensor data past "
      "the last tensor", n);
        const struct llm__gguf_writer_tensor *t = &w->tensors[w->cur];
        uint64_t left = t->size - w->cur_done;
        size_t k = left < n ? (size_t)left : n;
        enum llm_status st = llm__gguf_writer_out(w, p, k, e);
        if (st != LLM_OK) return st;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->size) {
            st = llm__gguf_writer_pad(w, t->size, e);
            if (st != LLM_OK) return st;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return LLM_OK;
}

// All bytes of tensor idx, which must be the next one.
static enum llm_status llm__gguf_writer_tensor_data(struct llm__gguf_writer *w, int64_t idx,
                                                    const void *data, struct llm__err *e) {
    if (idx < 0 || idx >= w->n_tensors || idx != w->cur || w->cur_done != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor %lld written out of order "
                         "(next is %lld)", (long long)idx, (long long)w->cur);
    return llm__gguf_writer_write(w, data, (size_t)w->tensors[idx].size, e);
}

// Checks that every tensor's bytes were written and flushes. Does not close the file.
static enum llm_status llm__gguf_writer_finish(struct llm__gguf_writer *w, struct llm__err *e) {
    if (!w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: finish before begin");
    if (w->cur < w->n_tensors)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' and %lld after it were "
                         "not written", w->tensors[w->cur].name,
                         (long long)(w->n_tensors - w->cur - 1));
    if (fflush(w->f) != 0 || ferror(w->f))
        return llm__fail(e, LLM_ERR_IO, "gguf writer: write failed: %s", strerror(errno));
    return LLM_OK;
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif
