// Quantizing model files (llm_quantize: llama-quantize's types, mixes and files)

#include "internal.h"

// === quantizing model files ===
// llm_quantize (llm quantize): a model's matrices to a llama-quantize file type, written as GGUF
// the way llama-quantize writes it, so that where the quantizers agree the files agree byte for
// byte:
// - the tensors in llama.cpp's loader order: those outside the blocks first, then block by block
//   (blk.N. numerically), by name within each;
// - the metadata: the input's keys in their order, less general.quantization_version,
//   general.file_type and split.*, then those two appended (quantization version 2, the ftype);
// - each tensor's data padded with zeros to the alignment; 1-D tensors, norms and the tensors
//   whose type does not change copied as they are;
// - the types: llama_tensor_get_type's rules for the file types offered here (the output
//   projection, or a tied embedding, at q6_K or q8_0; attn_v and ffn_down of some layers at more
//   bits in the _M/_L mixes; rows a K-quant's 256 does not divide at the fallback type).

enum {   // llama.cpp's llama_ftype values (general.file_type)
    LLM__FT_F32 = 0, LLM__FT_F16 = 1, LLM__FT_Q4_0 = 2, LLM__FT_Q4_1 = 3, LLM__FT_Q8_0 = 7,
    LLM__FT_Q5_0 = 8, LLM__FT_Q5_1 = 9, LLM__FT_Q2_K = 10, LLM__FT_Q3_K_S = 11, LLM__FT_Q3_K_M = 12,
    LLM__FT_Q3_K_L = 13, LLM__FT_Q4_K_S = 14, LLM__FT_Q4_K_M = 15, LLM__FT_Q5_K_S = 16,
    LLM__FT_Q5_K_M = 17, LLM__FT_Q6_K = 18, LLM__FT_IQ4_NL = 25, LLM__FT_IQ4_XS = 30, LLM__FT_BF16 = 32,
    LLM__FT_MXFP4_MOE = 38,
};

static const struct llm__ftype llm__ftypes[] = {
    {"q4_0", LLM__FT_Q4_0, LLM__TYPE_Q4_0},       {"q4_1", LLM__FT_Q4_1, LLM__TYPE_Q4_1},
    {"q5_0", LLM__FT_Q5_0, LLM__TYPE_Q5_0},       {"q5_1", LLM__FT_Q5_1, LLM__TYPE_Q5_1},
    {"q8_0", LLM__FT_Q8_0, LLM__TYPE_Q8_0},       {"iq4_nl", LLM__FT_IQ4_NL, LLM__TYPE_IQ4_NL},
    {"iq4_xs", LLM__FT_IQ4_XS, LLM__TYPE_IQ4_XS}, {"q2_K", LLM__FT_Q2_K, LLM__TYPE_Q2_K},
    {"q3_K_S", LLM__FT_Q3_K_S, LLM__TYPE_Q3_K},   {"q3_K_M", LLM__FT_Q3_K_M, LLM__TYPE_Q3_K},
    {"q3_K", LLM__FT_Q3_K_M, LLM__TYPE_Q3_K},     {"q3_K_L", LLM__FT_Q3_K_L, LLM__TYPE_Q3_K},
    {"q4_K_S", LLM__FT_Q4_K_S, LLM__TYPE_Q4_K},   {"q4_K_M", LLM__FT_Q4_K_M, LLM__TYPE_Q4_K},
    {"q4_K", LLM__FT_Q4_K_M, LLM__TYPE_Q4_K},     {"q5_K_S", LLM__FT_Q5_K_S, LLM__TYPE_Q5_K},
    {"q5_K_M", LLM__FT_Q5_K_M, LLM__TYPE_Q5_K},   {"q5_K", LLM__FT_Q5_K_M, LLM__TYPE_Q5_K},
    {"q6_K", LLM__FT_Q6_K, LLM__TYPE_Q6_K},       {"f16", LLM__FT_F16, LLM__TYPE_F16},
    {"bf16", LLM__FT_BF16, LLM__TYPE_BF16},       {"f32", LLM__FT_F32, LLM__TYPE_F32},
    {"mxfp4_moe", LLM__FT_MXFP4_MOE, LLM__TYPE_MXFP4},
};

const struct llm__ftype *llm__ftype_by_name(const char *name) {
    for (size_t i = 0; name && i < LLM__ARRAY_LEN(llm__ftypes); i++) {
        const char *a = llm__ftypes[i].name, *b = name;
        while (*a && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return &llm__ftypes[i];
    }
    return NULL;
}

// ggml_n_dims: the dimensions up to the last one above 1 (at least 1).
static int llm__tensor_dims(const struct llm__gguf_tensor *t) {
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

// What llama-quantize may quantize: matrices named *weight, but not norms, position or token-type
// embeddings, a MoE router, or Gemma 3n's small side tables.
static bool llm__qmix_allows(const struct llm__gguf_tensor *t) {
    static const char *const never[] = {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel",
                                        "per_layer_model_proj"};
    const size_t n = strlen(t->name);
    if (llm__tensor_dims(t) < 2 || n < 6 || strcmp(t->name + n - 6, "weight") != 0) return false;
    for (size_t i = 0; i < LLM__ARRAY_LEN(never); i++)
        if (strstr(t->name, never[i])) return false;
    return strcmp(t->name, "position_embd.weight") != 0 && strcmp(t->name, "token_types.weight") != 0;
}

// The hyper-parameters of g that the mixes look at, into q.
enum llm_status llm__qmix_init(const struct llm__gguf *g, struct llm__qmix *q, struct llm__err *e) {
    char arch[64] = "", key[128];
    const int64_t ak = llm__gguf_find_key(g, "general.architecture");
    if (ak >= 0 && g->kv[ak].type == LLM__GGUF_STR && g->kv[ak].v.str.len < sizeof(arch))
        memcpy(arch, g->kv[ak].v.str.ptr, (size_t)g->kv[ak].v.str.len), arch[g->kv[ak].v.str.len] = 0;
    uint32_t v[4] = {0, 0, 0, 0};
    static const char *const keys[4] = {"block_count", "attention.head_count", "attention.head_count_kv",
                                        "expert_count"};
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "%s.%s", arch, keys[i]);
        if (llm__gguf_find_key(g, key) >= 0 && !llm__gguf_get_u32(g, key, &v[i], e)) return LLM_ERR_FORMAT;
    }
    const uint32_t n_layer = v[0], n_head = v[1], n_head_kv = v[2] ? v[2] : v[1];
    q->n_layer = (int)n_layer;
    q->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 1;
    q->n_expert = (int)LLM__MIN(v[3], 1u << 20);
    q->is_70b = n_layer == 80 && ((!strcmp(arch, "llama") && n_head != n_head_kv) || !strcmp(arch, "qwen2"));
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        if (!strcmp(name, "output.weight")) q->tied = false;
        if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight"))
            q->n_attn_v++;
    }
    return LLM_OK;
}

static bool llm__qmix_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type tensor t gets (llama_tensor_get_type for these file types).
int llm__qmix_type(struct llm__qmix *q, const struct llm__gguf_tensor *t) {
    if (!llm__qmix_allows(t)) return (int)t->type;
    int nt = q->type;
    const int ft = q->ftype;
    if (llm__type_info((uint32_t)nt)->blck == 1) return nt;   // f32, f16, bf16: no mix, no fallback
    const char *name = t->name;
    const bool out = !strcmp(name, "output.weight");
    const bool embd = !strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight");
    if (q->pure) {
    } else if (ft == LLM__FT_MXFP4_MOE) {   // a mixture of experts' stacked experts MXFP4, every other matrix Q8_0
        nt = t->ne[2] > 1 && !out && !(q->tied && embd) ? LLM__TYPE_MXFP4 : LLM__TYPE_Q8_0;
    } else if (out || (q->tied && embd)) {
        if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) nt = LLM__TYPE_Q8_0;
        else if (nt != LLM__TYPE_Q8_0) nt = LLM__TYPE_Q6_K;
    } else if (embd) {
        // the base type, for every file type offered here
    } else if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight")) {
        if (ft == LLM__FT_Q2_K) nt = q->n_gqa >= 4 ? LLM__TYPE_Q4_K : LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = q->i_attn_v < 2 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_IQ4_NL || ft == LLM__FT_IQ4_XS) && q->n_gqa >= 4) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_Q4_K_M || ft == LLM__FT_Q5_K_M) && llm__qmix_more_bits(q->i_attn_v, q->n_attn_v))
            nt = LLM__TYPE_Q6_K;
        else if (ft == LLM__FT_Q4_K_S && q->i_attn_v < 4) nt = LLM__TYPE_Q5_K;
        if (q->is_70b && (nt == LLM__TYPE_Q3_K || nt == LLM__TYPE_Q4_K)) nt = LLM__TYPE_Q5_K;
        if (q->n_expert == 8) nt = LLM__TYPE_Q8_0;   // (Mixtral-like: llama.cpp's "trades just ~128MB")
        q->i_attn_v++;
    } else if (strstr(name, "attn_k.weight")) {
        if (q->n_expert == 8) nt = LLM__TYPE_Q8_0;
    } else if (strstr(name, "attn_q.weight")) {
        // changed only for file types not offered here
    } else if (strstr(name, "attn_output.weight")) {
        if (q->n_expert == 8) {
            if (ft == LLM__FT_Q2_K || ft == LLM__FT_Q3_K_S || ft == LLM__FT_Q3_K_M || ft == LLM__FT_IQ4_NL ||
                ft == LLM__FT_Q4_K_S || ft == LLM__FT_Q4_K_M || ft == LLM__FT_IQ4_XS)
                nt = LLM__TYPE_Q5_K;
        } else if (ft == LLM__FT_Q2_K) nt = LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
    } else if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) {
        // changed only for file types not offered here
    } else if (strstr(name, "ffn_down")) {
        // (with experts the layer comes from the name: a layer may have several, qwen2moe's shared one)
        const int i = q->n_expert > 1 ? llm__tensor_layer(name) : q->i_ffn_down, n = q->n_layer;
        q->i_ffn_down++;
        if (ft == LLM__FT_Q2_K) nt = LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = i < n / 16 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_Q4_K_M || ft == LLM__FT_Q5_K_M) && llm__qmix_more_bits(i, n)) nt = LLM__TYPE_Q6_K;
        else if ((ft == LLM__FT_IQ4_NL || ft == LLM__FT_IQ4_XS) && i < n / 8) nt = LLM__TYPE_Q5_K;
        else if (ft == LLM__FT_Q4_K_S && i < n / 8) nt = LLM__TYPE_Q5_K;
    }
    if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) {
        q->n_fallback++;
        nt = llm__quant_fallback(nt);
        if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) nt = LLM__TYPE_F16;
    }
    return nt;
}

// The layer a tensor's name (blk.N.) puts it in; -1 outside the blocks.
int llm__tensor_layer(const char *name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

// llama.cpp's loader order: tensors outside the blocks (layer -1) first, then by layer, then by name.
int llm__tensor_order(const void *a, const void *b) {
    const struct llm__gguf_tensor *x = *(const struct llm__gguf_tensor *const *)a;
    const struct llm__gguf_tensor *y = *(const struct llm__gguf_tensor *const *)b;
    const int lx = llm__tensor_layer(x->name), ly = llm__tensor_layer(y->name);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->name, y->name);
}

static void llm__gguf_put_str(struct llm__outbuf *o, const char *s) {
    const uint64_t n = strlen(s);
    llm__outbuf_put(o, &n, 8);
    llm__outbuf_put(o, s, (size_t)n);
}

// Writes n bytes to f; false on an error (errno set).
bool llm__fwrite(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

// A GGUF file being written by llm__quantize_gguf: g's tensors in llama.cpp's loader order, each
// with its replacement (or NULL) and its type in the file.
struct llm__qgguf {
    struct llm__gguf *g;
    const struct llm_quantize_params *params;
    const struct llm__gguf_tensor **order;
    const struct llm__qrepl **orepl;
    int *types;
    size_t align;
    size_t total;              // the input's bytes of all tensors (progress)
    struct llm_quantize_stats *st;
};

// The header's start and the metadata: the input's keys in their order, less
// general.quantization_version, general.file_type and split.*, then those two appended. Returns
// the number of keys, which the caller writes over the count's place (offset 16).
static uint64_t llm__qgguf_put_kv(const struct llm__gguf *g, const struct llm__ftype *ft, struct llm__outbuf *hdr) {
    const uint32_t version = 3;
    const uint64_t n_tensors = (uint64_t)g->n_tensors;
    uint64_t n_kv = 0;
    llm__outbuf_put(hdr, "GGUF", 4);
    llm__outbuf_put(hdr, &version, 4);
    llm__outbuf_put(hdr, &n_tensors, 8);
    llm__outbuf_put(hdr, &n_kv, 8);   // counted here
    for (int64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if (!strcmp(k, "general.quantization_version") || !strcmp(k, "general.file_type") || !strncmp(k, "split.", 6))
            continue;
        llm__gguf_put_str(hdr, k);
        llm__outbuf_put(hdr, g->kv[i].raw, g->kv[i].raw_len);
        n_kv++;
    }
    const uint32_t u32 = LLM__GGUF_U32, qversion = 2, ftype = (uint32_t)ft->ftype;
    llm__gguf_put_str(hdr, "general.quantization_version");
    llm__outbuf_put(hdr, &u32, 4);
    llm__outbuf_put(hdr, &qversion, 4);
    llm__gguf_put_str(hdr, "general.file_type");
    llm__outbuf_put(hdr, &u32, 4);
    llm__outbuf_put(hdr, &ftype, 4);
    return n_kv + 2;
}

// The tensors' entries of the header (names, shapes, types, offsets), each tensor's type decided
// on the way (its replacement's, or the mix's); counts the parameters and the quantized tensors.
// LLM_ERR_UNSUPPORTED: a tensor that would need requantizing, an unreadable type, or an internal one.
static enum llm_status llm__qgguf_put_tensors(struct llm__qgguf *w, struct llm__qmix *q, struct llm__outbuf *hdr,
                                              struct llm__err *e) {
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = w->order[i];
        const struct llm__qrepl *r = w->orepl[i];
        const int mixed = llm__qmix_type(q, t);   // (counts the mix's layers also for replaced tensors)
        const int nt = w->types[i] = r ? r->type : mixed;
        const struct llm__type_info *ti = llm__type_info(t->type);
        if (!r && (uint32_t)nt != t->type && ti->blck > 1 && !w->params->allow_requantize)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s already: requantizing it to %s needs "
                             "--allow-requantize (quality suffers; quantize the F16/BF16/F32 model instead)",
                             t->name, ti->name, llm__type_info((uint32_t)nt)->name);
        if (!r && (uint32_t)nt != t->type && !ti->supported)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s, which this build cannot read", t->name,
                             ti->name);
        if (llm__type_info((uint32_t)nt)->internal)   // no internal type may reach the file
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' would be %s (an AWQ/GPTQ layout), which GGUF "
                             "cannot hold", t->name, llm__type_info((uint32_t)nt)->name);
        const int nd = llm__tensor_dims(t);
        const uint32_t tt = (uint32_t)nt;
        llm__gguf_put_str(hdr, t->name);
        llm__outbuf_put(hdr, &(uint32_t){(uint32_t)nd}, 4);
        llm__outbuf_put(hdr, t->ne, 8 * (size_t)nd);
        llm__outbuf_put(hdr, &tt, 4);
        llm__outbuf_put(hdr, &offset, 8);
        const size_t size = llm__row_bytes(nt, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        assert(!r || r->size == size);
        offset += (size + w->align - 1) / w->align * w->align;
        w->total += t->size;
        w->st->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        w->st->n_quantized += (uint32_t)nt != t->type;
    }
    return LLM_OK;
}

// The tensors' data after the header (ok: whether the header was written), in the header's order:
// each as it is, its replacement, or quantized on the pool, padded with zeros to the alignment.
static enum llm_status llm__qgguf_write_data(struct llm__qgguf *w, FILE *f, const char *part, bool ok,
                                             struct llm__pool *pool, struct llm__err *e) {
    static const char zeros[64];
    const size_t align = w->align;
    size_t done = 0;
    enum llm_status st = LLM_OK;
    for (int64_t i = 0; i < w->g->n_tensors && ok; i++) {
        const struct llm__gguf_tensor *t = w->order[i];
        const int nt = w->types[i];
        size_t size = t->size;
        if (w->orepl[i]) {
            size = w->orepl[i]->size;
            ok = llm__fwrite(f, w->orepl[i]->data, size);
        } else if ((uint32_t)nt == t->type) {
            ok = llm__fwrite(f, t->data, t->size);
        } else {
            size = llm__row_bytes(nt, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            struct llm__quant_job job = {t, nt, llm__alloc(size), false};
            if (!job.dst) {
                st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory (%zu bytes for '%s')", size, t->name);
                break;
            }
            llm__pool_run(pool, llm__quant_worker, &job);
            if (!job.fail) ok = llm__fwrite(f, job.dst, size);
            free(job.dst);
            if (job.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
        }
        for (size_t pad = (align - size % align) % align; ok && pad; pad -= LLM__MIN(pad, sizeof(zeros)))
            ok = llm__fwrite(f, zeros, LLM__MIN(pad, sizeof(zeros)));
        if (w->g->owns_map) llm__map_release(t->data, t->size);
        w->st->bytes_in += t->size;
        w->st->bytes_out += size;
        done += t->size;
        if (w->params->progress)
            w->params->progress(w->params->progress_user, (double)done / (double)(w->total ? w->total : 1), t->name);
    }
    if (!st && !ok) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", part, strerror(errno));
    return st;
}

// The model g (a GGUF file or a directory) as a GGUF file of file type ft at params->output (see
// the head of src/quantize.c); repl: NULL, or for each of g's tensors a replacement (data NULL:
// none), whose type and bytes are written as they are.
enum llm_status llm__quantize_gguf(struct llm__gguf *g, const struct llm_quantize_params *params,
                                   const struct llm__ftype *ft, const struct llm__qrepl *repl,
                                   struct llm_quantize_stats *st_, struct llm__err *e) {
    struct llm__qgguf w = {.g = g, .params = params, .st = st_};
    struct llm__outbuf hdr = {0};
    struct llm__pool *pool = NULL;
    FILE *f = NULL;
    char *part = NULL;
    enum llm_status st = LLM_OK;

    struct llm__qmix q = {.ftype = ft->ftype, .type = ft->type, .pure = params->pure != 0, .tied = true};
    if ((st = llm__qmix_init(g, &q, e))) return st;
    w.order = malloc(sizeof(*w.order) * (size_t)(g->n_tensors + 1));
    w.orepl = malloc(sizeof(*w.orepl) * (size_t)(g->n_tensors + 1));
    w.types = malloc(sizeof(*w.types) * (size_t)(g->n_tensors + 1));
    if (!w.order || !w.types || !w.orepl) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    for (int64_t i = 0; i < g->n_tensors; i++) w.order[i] = &g->tensors[i];
    qsort(w.order, (size_t)g->n_tensors, sizeof(*w.order), llm__tensor_order);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const int64_t k = w.order[i] - g->tensors;
        w.orepl[i] = repl && repl[k].data ? &repl[k] : NULL;
    }

    // the types, and the header: metadata, then the tensors' names, shapes, types and offsets
    w.align = g->alignment ? g->alignment : LLM__GGUF_DEFAULT_ALIGNMENT;
    const uint64_t n_kv = llm__qgguf_put_kv(g, ft, &hdr);
    if ((st = llm__qgguf_put_tensors(&w, &q, &hdr, e))) goto out;
    st_->n_fallback = q.n_fallback;
    st_->n_tensors = (int)g->n_tensors;
    while (hdr.n % w.align) llm__outbuf_put(&hdr, "", 1);
    if (hdr.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    memcpy(hdr.p + 16, &n_kv, 8);

    // the data, tensor by tensor, to OUTPUT.part
    const size_t plen = strlen(params->output);
    if (!(part = malloc(plen + 6))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    memcpy(part, params->output, plen);
    memcpy(part + plen, ".part", 6);
    if (!(pool = llm__pool_new(params->n_threads > 0 ? params->n_threads : llm__online_cpus(), e))) {
        st = LLM_ERR_BACKEND;
        goto out;
    }
    if (!(f = fopen(part, "wb"))) {
        st = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", part, strerror(errno));
        goto out;
    }
    st = llm__qgguf_write_data(&w, f, part, llm__fwrite(f, hdr.p, hdr.n), pool, e);
    if (fclose(f) != 0 && !st) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", part, strerror(errno));
    f = NULL;
    if (!st && rename(part, params->output) != 0)
        st = llm__fail(e, LLM_ERR_IO, "quantize: cannot rename '%s' to '%s': %s", part, params->output,
                       strerror(errno));
    if (st) remove(part);
out:
    if (f) { fclose(f); remove(part); }
    free(part);
    llm__pool_free(pool);
    free(hdr.p);
    free(w.order);
    free(w.orepl);
    free(w.types);
    return st;
}

struct llm_quantize_params llm_quantize_params_default(void) {
    struct llm_quantize_params p;
    memset(&p, 0, sizeof(p));
    p.type = "q4_K_M";
    return p;
}
