// Hugging Face model directories: config.json, weights, AWQ and GPTQ checkpoints

#include "internal.h"

// === Hugging Face model directories ===
// A directory of config.json and model.safetensors (or shards listed by
// model.safetensors.index.json) becomes the same struct llm__gguf a GGUF file gives: the
// configuration as the GGUF keys llama.cpp's converter writes (serialized into a small GGUF
// header in memory and parsed by the GGUF reader, so that every consumer and check is the same),
// the tensors under their GGUF names, pointing into the mapped safetensors files. Where the
// converter changes data, so does this: llama-style q and k rows are permuted from Hugging
// Face's rotate-half layout to GGUF's interleaved pairs; tensors not aligned to 32 bytes are
// copied (the kernels read aligned rows). Architectures: LlamaForCausalLM, MistralForCausalLM
// (llama), Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM,
// Gemma3ForCausalLM; tokenizer.json is read in src/hf_open.c.

void llm__gbuf_put(struct llm__gbuf *b, const void *p, size_t n) { llm__outbuf_put(&b->o, p, n); }
// The header's first 24 bytes (magic, version 3, no tensors, the keys written): put 24 bytes
// first, call this last.
void llm__gbuf_seal(struct llm__gbuf *b) {
    if (b->o.fail || b->o.n < 24) return;
    const uint32_t version = 3;
    const uint64_t nt = 0, nkv = (uint64_t)b->n_kv;
    memcpy(b->o.p, "GGUF", 4);
    memcpy(b->o.p + 4, &version, 4);
    memcpy(b->o.p + 8, &nt, 8);
    memcpy(b->o.p + 16, &nkv, 8);
}
void llm__gbuf_str(struct llm__gbuf *b, const char *s, size_t n) {
    uint64_t len = n;
    llm__gbuf_put(b, &len, 8);
    llm__gbuf_put(b, s, n);
}
void llm__gbuf_key(struct llm__gbuf *b, const char *arch, const char *key, uint32_t type) {
    char k[160];
    int n = arch ? snprintf(k, sizeof(k), "%s.%s", arch, key) : snprintf(k, sizeof(k), "%s", key);
    llm__gbuf_str(b, k, (size_t)n);
    llm__gbuf_put(b, &type, 4);
    b->n_kv++;
}
void llm__gbuf_u32(struct llm__gbuf *b, const char *arch, const char *key, uint32_t v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_U32);
    llm__gbuf_put(b, &v, 4);
}
static void llm__gbuf_f32(struct llm__gbuf *b, const char *arch, const char *key, float v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_F32);
    llm__gbuf_put(b, &v, 4);
}
void llm__gbuf_s(struct llm__gbuf *b, const char *arch, const char *key, const char *v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_STR);
    llm__gbuf_str(b, v, strlen(v));
}

void llm__hf_owned_free(void *p) {
    struct llm__hf_owned *o = p;
    if (!o) return;
    for (int i = 0; i < o->n_files; i++) llm__st_close(&o->files[i]);
    for (int64_t i = 0; i < o->n_copies; i++) free(o->copies[i]);
    free(o->files);
    free(o->copies);
    free(o->names);
    free(o->names_ix.slots);
    free(o);
}

// Indexes the tensors of all of o's files by name (of a name in several files, the first file's).
enum llm_status llm__hf_index(struct llm__hf_owned *o, struct llm__err *e) {
    int64_t n = 0, k = 0;
    for (int f = 0; f < o->n_files; f++) n += o->files[f].n;
    if (!(o->names = malloc((size_t)(n + 1) * sizeof(*o->names))) || !llm__gguf_index_init(&o->names_ix, n))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory for the names of %lld tensors", (long long)n);
    for (int f = 0; f < o->n_files; f++)
        for (int64_t i = 0; i < o->files[f].n; i++) {
            uint64_t slot;
            const struct llm__st_tensor *t = &o->files[f].t[i];
            if (llm__gguf_index_find(&o->names_ix, o->names, sizeof(*o->names), t->name, &slot) >= 0) continue;
            o->names[k] = (struct llm__hf_name){t->name, t};
            o->names_ix.slots[slot] = k++;
        }
    return LLM_OK;
}

// A config.json integer in [lo, hi] into *out (left as it is when absent and not required), or an
// error naming the key.
static enum llm_status llm__hf_cfg_int(const struct llm__json *j, const char *key, int64_t lo, int64_t hi,
                                       bool required, int64_t *out, struct llm__err *e) {
    int32_t v = llm__json_get(j, 0, key);
    if (v < 0 || j->nodes[v].type == LLM__JSON_NULL) {
        if (required) return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is missing", key);
        return LLM_OK;
    }
    if (!llm__json_int(j, v, lo, hi, out))
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is not an integer in [%lld, %lld]", key, (long long)lo,
                         (long long)hi);
    return LLM_OK;
}

static enum llm_status llm__hf_cfg_num(const struct llm__json *j, const char *key, double *out, struct llm__err *e) {
    int32_t v = llm__json_get(j, 0, key);
    if (v < 0 || j->nodes[v].type == LLM__JSON_NULL) return LLM_OK;
    if (!llm__json_num(j, v, out) || !isfinite(*out) || fabs(*out) > FLT_MAX)
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is not a finite number", key);
    return LLM_OK;
}

// --- AWQ and GPTQ checkpoints ---
// config.json's quantization_config says how the linear layers' weights are stored; each such
// weight W (out x in) is then the tensors X.qweight, X.qzeros, X.scales (and for GPTQ X.g_idx)
// in place of X.weight, with w[o][i] = s[g][o] * (q[i][o] - z[g][o]) for input i of group g:
//   AWQ (AutoAWQ's GEMM format, 4 bits): qweight int32 [in, out/8] and qzeros int32
//     [in/group, out/8], both with 8 nibbles a word along the output: nibble k (bits 4k..4k+3) of
//     word c holds output 8c + {0, 2, 4, 6, 1, 3, 5, 7}[k]; scales fp16 [in/group, out].
//   GPTQ (AutoGPTQ / GPTQModel, 4 or 8 bits): qweight int32 [in * bits / 32, out] packed along the
//     input (input 8r + k of 4-bit row r in nibble k), qzeros int32 [in/group, out * bits / 32]
//     packed along the output, stored less one in the original ("v1", checkpoint_format "gptq")
//     layout and as they are in "gptq_v2"; scales [in/group, out]; g_idx int32 [in], each input's
//     group: with act-order (desc_act) the groups are not runs of inputs.
// A group of -1 is the whole row. Every such weight becomes a G4 / G8 tensor (struct llm__block_gq)
// of 32, 64 or 128 inputs a block, the largest that divides the group (a block repeats its group's
// scale and zero); act-order inputs are sorted by group, and the tensor's perm tells the products
// to gather their activations the same way.

enum { LLM__HF_AWQ = 1, LLM__HF_GPTQ = 2 };

// quantization_config (member q of config.json's object) into *out.
static enum llm_status llm__hf_quant_config(const struct llm__json *j, int32_t q, struct llm__hf_quant *out,
                                            struct llm__err *e) {
    memset(out, 0, sizeof(*out));
    if (q < 0 || j->nodes[q].type == LLM__JSON_NULL) return LLM_OK;
    if (j->nodes[q].type != LLM__JSON_OBJ)
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: quantization_config is not an object");
    const int32_t m = llm__json_get(j, q, "quant_method");
    char pr[88] = "(none)";
    if (m >= 0 && j->nodes[m].type == LLM__JSON_STR)
        llm__gguf_printable(pr, j->text + j->nodes[m].start, j->nodes[m].len);
    out->method = m >= 0 && llm__json_eq(j, m, "awq")    ? LLM__HF_AWQ
                  : m >= 0 && llm__json_eq(j, m, "gptq") ? LLM__HF_GPTQ
                                                         : 0;
    if (!out->method)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config's quant_method %s is not supported "
                         "(awq, gptq)", pr);
    const bool awq = out->method == LLM__HF_AWQ;
    int64_t bits = 0, group = 0;
    const int32_t bv = llm__json_get(j, q, "bits"), gv = llm__json_get(j, q, "group_size");
    if (bv < 0 || !llm__json_int(j, bv, 1, 64, &bits) || (bits != 4 && (awq || bits != 8))) {
        char pb[88] = "unknown";
        if (bv >= 0) llm__gguf_printable(pb, j->text + j->nodes[bv].start, j->nodes[bv].len);
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: %s weights of %s bits are not "
                         "supported (AWQ: 4; GPTQ: 4 or 8)", pr, pb);
    }
    if (gv < 0 || !llm__json_int(j, gv, -1, 1 << 20, &group) || group == 0 || (group > 0 && group % 32))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: group_size must be -1 or a "
                         "multiple of 32");
    out->bits = (int)bits;
    out->group = group;
    // the layout: AWQ's "version" (GEMM only: GEMV and the others pack differently), GPTQ's
    // gptq (v1) or gptq_v2; GPTQModel writes "checkpoint_format" and "format" for both
    static const char *const keys[3] = {"version", "checkpoint_format", "format"};
    int32_t v = -1;
    for (int k = awq ? 0 : 1; k < 3 && (v < 0 || j->nodes[v].type == LLM__JSON_NULL); k++)
        v = llm__json_get(j, q, keys[k]);
    if (v >= 0 && j->nodes[v].type != LLM__JSON_NULL) {
        char name[16] = "";
        if (j->nodes[v].type == LLM__JSON_STR && (size_t)j->nodes[v].len < sizeof(name))
            for (uint32_t k = 0; k < (uint32_t)j->nodes[v].len; k++)
                name[k] = (char)tolower((unsigned char)j->text[j->nodes[v].start + k]);
        llm__gguf_printable(pr, j->text + j->nodes[v].start, j->nodes[v].len);
        if (awq ? strcmp(name, "gemm") != 0 : strcmp(name, "gptq") != 0 && strcmp(name, "gptq_v2") != 0)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: the %s layout \"%s\" is not "
                             "supported (%s)", awq ? "AWQ" : "GPTQ", pr, awq ? "gemm" : "gptq, gptq_v2");
        out->zeros_less_one = !awq && strcmp(name, "gptq") == 0;
    } else out->zeros_less_one = !awq;
    const int32_t zp = llm__json_get(j, q, "zero_point"), mf = llm__json_get(j, q, "is_marlin_format");
    if (awq && zp >= 0 && j->nodes[zp].type == LLM__JSON_FALSE)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: AWQ without zero points is not "
                         "supported");
    if (mf >= 0 && j->nodes[mf].type == LLM__JSON_TRUE)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: GPTQ's Marlin layout is not "
                         "supported");
    return LLM_OK;
}

// What config.json says of the model, before it becomes GGUF keys.
struct llm__hf_params {
    int64_t embd, layers, ff, heads, kv_heads, head_dim, ctx, vocab;
    int64_t window, pattern, qpas;   // Gemma: sliding_window, sliding_window_pattern, query_pre_attn_scalar
    double eps, theta, factor, theta_local, attn_cap, final_cap, rot_pct;
};

// Whether the engine's architecture arch is Gemma's (2 or 3).
static bool llm__hf_gemma(const char *arch) { return !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3"); }

// config.json's architecture as the engine's (*arch, a static name) and whether its q and k rows
// are permuted (llama's).
static enum llm_status llm__hf_cfg_arch(const struct llm__json *j, const char **arch, bool *permute,
                                        struct llm__err *e) {
    static const struct { const char *hf, *arch; bool permute; } archs[] = {
        {"LlamaForCausalLM", "llama", true}, {"MistralForCausalLM", "llama", true},
        {"Qwen2ForCausalLM", "qwen2", false}, {"Qwen3ForCausalLM", "qwen3", false},
        {"Phi3ForCausalLM", "phi3", false}, {"Gemma2ForCausalLM", "gemma2", false},
        {"Gemma3ForCausalLM", "gemma3", false},
    };
    const int32_t av = llm__json_at(j, llm__json_get(j, 0, "architectures"), 0);
    *arch = NULL;
    for (size_t k = 0; av >= 0 && k < LLM__ARRAY_LEN(archs); k++)
        if (llm__json_eq(j, av, archs[k].hf)) { *arch = archs[k].arch; *permute = archs[k].permute; }
    if (*arch) return LLM_OK;
    char pr[88] = "(none)";
    if (av >= 0 && j->nodes[av].type == LLM__JSON_STR)
        llm__gguf_printable(pr, j->text + j->nodes[av].start, j->nodes[av].len);
    return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: architecture %s is not supported in Hugging Face format "
                     "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
                     "Gemma2ForCausalLM, Gemma3ForCausalLM; others as GGUF files)", pr);
}

// config.json's numbers into p, over their defaults, in the order they are checked.
static enum llm_status llm__hf_cfg_read(const struct llm__json *j, struct llm__hf_params *p, struct llm__err *e) {
    *p = (struct llm__hf_params){.kv_heads = -1, .head_dim = -1, .ctx = 2048, .window = -1, .pattern = -1,
                                 .qpas = -1, .eps = 1e-6, .theta = 10000.0, .factor = 1.0, .theta_local = -1.0,
                                 .attn_cap = -1.0, .final_cap = -1.0, .rot_pct = 1.0};
    // an integer in [lo, hi] into i (required: an error when absent), or a number into d
    const struct {
        const char *key;
        int64_t *i;
        int64_t lo, hi;
        bool required;
        double *d;
    } keys[] = {
        {"hidden_size", &p->embd, 1, 65536, true, NULL},
        {"num_hidden_layers", &p->layers, 1, 1024, true, NULL},
        {"intermediate_size", &p->ff, 1, 1 << 20, true, NULL},
        {"num_attention_heads", &p->heads, 1, 1024, true, NULL},
        {"num_key_value_heads", &p->kv_heads, 1, 1024, false, NULL},
        {"head_dim", &p->head_dim, 2, 1024, false, NULL},
        {"max_position_embeddings", &p->ctx, 1, 1 << 24, false, NULL},
        {"vocab_size", &p->vocab, 1, 1 << 24, true, NULL},
        {"rms_norm_eps", NULL, 0, 0, false, &p->eps},
        {"rope_theta", NULL, 0, 0, false, &p->theta},
        {"sliding_window", &p->window, 0, 1 << 24, false, NULL},
        {"sliding_window_pattern", &p->pattern, 0, 1024, false, NULL},
        {"query_pre_attn_scalar", &p->qpas, 1, 1 << 20, false, NULL},
        {"rope_local_base_freq", NULL, 0, 0, false, &p->theta_local},
        {"attn_logit_softcapping", NULL, 0, 0, false, &p->attn_cap},
        {"final_logit_softcapping", NULL, 0, 0, false, &p->final_cap},
        {"partial_rotary_factor", NULL, 0, 0, false, &p->rot_pct},
    };
    for (size_t k = 0; k < LLM__ARRAY_LEN(keys); k++) {
        const enum llm_status st = keys[k].i ? llm__hf_cfg_int(j, keys[k].key, keys[k].lo, keys[k].hi,
                                                               keys[k].required, keys[k].i, e)
                                             : llm__hf_cfg_num(j, keys[k].key, keys[k].d, e);
        if (st) return st;
    }
    return LLM_OK;
}

// RoPE's bases (transformers 5 writes rope_parameters, per layer type for Gemma 3, instead of
// rope_theta and rope_scaling), checked; *rope: the node of the scaling, rope_scaling else
// rope_parameters.
static enum llm_status llm__hf_cfg_rope(const struct llm__json *j, const char *arch, struct llm__hf_params *p,
                                        int32_t *rope, struct llm__err *e) {
    const int32_t rp = llm__json_get(j, 0, "rope_parameters");
    *rope = llm__json_get(j, 0, "rope_scaling");
    if (rp >= 0 && j->nodes[rp].type == LLM__JSON_OBJ) {
        const int32_t full = llm__json_get(j, rp, "full_attention"), slide = llm__json_get(j, rp, "sliding_attention");
        const int32_t main = full >= 0 ? full : rp;
        if (llm__json_get(j, 0, "rope_theta") < 0 && llm__json_get(j, main, "rope_theta") >= 0 &&
            !llm__json_num(j, llm__json_get(j, main, "rope_theta"), &p->theta))
            p->theta = -1.0;
        if (slide >= 0 && p->theta_local < 0.0 && llm__json_get(j, slide, "rope_theta") >= 0 &&
            !llm__json_num(j, llm__json_get(j, slide, "rope_theta"), &p->theta_local))
            p->theta = -1.0;
        if (*rope < 0 || j->nodes[*rope].type == LLM__JSON_NULL) *rope = main;
    } else if (!strcmp(arch, "gemma3") && llm__json_get(j, 0, "rope_theta") < 0) {
        p->theta = 1000000.0;   // Gemma 3's default (transformers, llama.cpp's converter)
    }
    if (!(p->theta > 1.0 && p->theta < 1e30))
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: the RoPE base (rope_theta) must be a number > 1");
    return LLM_OK;
}

// Gemma's soft-capping, the heads' defaults, and what the engine cannot run: refused.
static enum llm_status llm__hf_cfg_check(const struct llm__json *j, const char *arch, bool permute,
                                         struct llm__hf_params *p, struct llm__err *e) {
    const bool gemma = llm__hf_gemma(arch);
    // Gemma: null soft-capping means none (0 for the engine, whose Gemma 2 default is 50 and 30)
    if (gemma && llm__json_get(j, 0, "attn_logit_softcapping") >= 0 && p->attn_cap < 0.0) p->attn_cap = 0.0;
    if (gemma && llm__json_get(j, 0, "final_logit_softcapping") >= 0 && p->final_cap < 0.0) p->final_cap = 0.0;
    if (!strcmp(arch, "gemma3") && p->attn_cap > 0.0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: attention soft-capping with Gemma 3 is not supported");
    if (p->kv_heads < 0) p->kv_heads = p->heads;
    if (p->head_dim < 0 && p->embd % p->heads == 0) p->head_dim = p->embd / p->heads;
    // the engine scales attention by 1/sqrt(head_dim), Gemma 2 27B and Gemma 3 27B by
    // 1/sqrt(n_embd/n_head), as llama.cpp does: a config asking otherwise is refused
    const bool big = (!strcmp(arch, "gemma2") && p->layers == 46) || (!strcmp(arch, "gemma3") && p->layers == 62);
    const int64_t want_qpas = big ? p->embd / p->heads : p->head_dim;
    const char *bad = NULL;
    if (p->head_dim < 0) bad = "hidden_size is not a multiple of num_attention_heads (and no head_dim)";
    else if (permute && p->head_dim % 2) bad = "the head dimension is odd";
    else if (gemma && p->qpas > 0 && p->qpas != want_qpas)
        bad = "query_pre_attn_scalar is not the one llama.cpp assumes for this model";
    else if (!(p->rot_pct > 0.0 && p->rot_pct <= 1.0)) bad = "partial_rotary_factor is not in (0, 1]";
    return bad ? llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: %s", bad) : LLM_OK;
}

// Gemma: which of the layers are local (layer_types, as sliding_window_pattern's array form) into
// *local (NULL: no layer_types).
static enum llm_status llm__hf_cfg_local(const struct llm__json *j, int64_t layers, uint8_t **local,
                                         struct llm__err *e) {
    const int32_t lt = llm__json_get(j, 0, "layer_types");
    *local = NULL;
    if (lt < 0 || j->nodes[lt].type != LLM__JSON_ARR) return LLM_OK;
    if (j->nodes[lt].n != layers || !(*local = calloc((size_t)layers, 1)))
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: layer_types does not have num_hidden_layers entries");
    for (int32_t i = 0, k = lt + 1; i < j->nodes[lt].n; i++, k = j->nodes[k].next) {
        (*local)[i] = llm__json_eq(j, k, "sliding_attention");
        if (!(*local)[i] && !llm__json_eq(j, k, "full_attention"))
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: layer_types other than sliding_attention and "
                             "full_attention");
    }
    return LLM_OK;
}

// RoPE scaling (node rs): none, "default" or linear with a factor >= 1 (into *factor).
static enum llm_status llm__hf_cfg_scaling(const struct llm__json *j, int32_t rs, double *factor, struct llm__err *e) {
    int32_t ty = llm__json_get(j, rs, "rope_type");
    if (ty < 0) ty = llm__json_get(j, rs, "type");
    if (rs < 0 || j->nodes[rs].type == LLM__JSON_NULL || (ty >= 0 && llm__json_eq(j, ty, "default"))) return LLM_OK;
    if (ty < 0 || !llm__json_eq(j, ty, "linear") || !llm__json_num(j, llm__json_get(j, rs, "factor"), factor) ||
        !(*factor >= 1.0))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: rope_scaling other than linear with a factor >= 1 is "
                         "not supported");
    return LLM_OK;
}

// p (and Gemma's local layers, or NULL) as the GGUF keys of arch into b.
static void llm__hf_cfg_write(struct llm__gbuf *b, const char *arch, const struct llm__hf_params *p,
                              const uint8_t *local) {
    const struct { const char *key; int64_t v; } u32s[] = {
        {"embedding_length", p->embd},
        {"block_count", p->layers},
        {"feed_forward_length", p->ff},
        {"attention.head_count", p->heads},
        {"attention.head_count_kv", p->kv_heads},
        {"attention.key_length", p->head_dim},
        {"attention.value_length", p->head_dim},
        {"context_length", p->ctx},
        {"vocab_size", p->vocab},
    };
    llm__gbuf_s(b, NULL, "general.architecture", arch);
    for (size_t k = 0; k < LLM__ARRAY_LEN(u32s); k++) llm__gbuf_u32(b, arch, u32s[k].key, (uint32_t)u32s[k].v);
    llm__gbuf_f32(b, arch, "attention.layer_norm_rms_epsilon", (float)p->eps);
    llm__gbuf_f32(b, arch, "rope.freq_base", (float)p->theta);
    if (p->factor > 1.0) {
        llm__gbuf_s(b, arch, "rope.scaling.type", "linear");
        llm__gbuf_f32(b, arch, "rope.scaling.factor", (float)p->factor);
    }
    if (p->rot_pct < 1.0) llm__gbuf_u32(b, arch, "rope.dimension_count", (uint32_t)((double)p->head_dim * p->rot_pct));
    if (!llm__hf_gemma(arch)) return;
    if (p->window >= 0) llm__gbuf_u32(b, arch, "attention.sliding_window", (uint32_t)p->window);
    if (local) {
        llm__gbuf_key(b, arch, "attention.sliding_window_pattern", LLM__GGUF_ARR);
        const uint32_t bt = LLM__GGUF_BOOL;
        const uint64_t n = (uint64_t)p->layers;
        llm__gbuf_put(b, &bt, 4);
        llm__gbuf_put(b, &n, 8);
        llm__gbuf_put(b, local, (size_t)p->layers);
    } else if (p->pattern >= 0) {
        llm__gbuf_u32(b, arch, "attention.sliding_window_pattern", (uint32_t)p->pattern);
    }
    if (p->theta_local > 0.0) llm__gbuf_f32(b, arch, "rope.freq_base_swa", (float)p->theta_local);
    if (p->attn_cap >= 0.0) llm__gbuf_f32(b, arch, "attn_logit_softcapping", (float)p->attn_cap);
    if (p->final_cap >= 0.0) llm__gbuf_f32(b, arch, "final_logit_softcapping", (float)p->final_cap);
}

// The GGUF keys of config.json (its text cfg[0..n)): *arch (a static name) and the header in b.
enum llm_status llm__hf_config(const char *cfg, size_t n, struct llm__gbuf *b, const char **arch_out, bool *permute_qk,
                               int64_t hp[5], struct llm__hf_quant *quant, struct llm__err *e) {
    struct llm__json j;
    enum llm_status st = llm__json_parse(&j, cfg, n, "config.json", e);
    if (st) return st;
    const char *arch = NULL;
    bool permute = false;
    struct llm__hf_params p;
    int32_t rope = -1;
    uint8_t *local = NULL;
    if (j.nodes[0].type != LLM__JSON_OBJ) st = llm__fail(e, LLM_ERR_FORMAT, "config.json: not a JSON object");
    if (st == LLM_OK) st = llm__hf_cfg_arch(&j, &arch, &permute, e);
    if (st == LLM_OK) st = llm__hf_quant_config(&j, llm__json_get(&j, 0, "quantization_config"), quant, e);
    if (st == LLM_OK) st = llm__hf_cfg_read(&j, &p, e);
    if (st == LLM_OK) st = llm__hf_cfg_rope(&j, arch, &p, &rope, e);
    if (st == LLM_OK) st = llm__hf_cfg_check(&j, arch, permute, &p, e);
    if (st == LLM_OK && llm__hf_gemma(arch)) st = llm__hf_cfg_local(&j, p.layers, &local, e);
    if (st == LLM_OK) st = llm__hf_cfg_scaling(&j, rope, &p.factor, e);
    llm__json_free(&j);
    if (st == LLM_OK) {
        llm__hf_cfg_write(b, arch, &p, local);
        *arch_out = arch;
        *permute_qk = permute;
        hp[0] = p.heads;
        hp[1] = p.kv_heads;
        hp[2] = p.head_dim;
        hp[3] = p.layers;
        hp[4] = p.vocab;
    }
    free(local);
    if (st == LLM_OK && b->o.fail) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return st;
}

// A Hugging Face tensor name as GGUF's (out), or false for a name this loader does not know.
// *qk: 1 for a q projection, 2 for a k projection (the rows llama's permutation moves).
bool llm__hf_name(const char *hf, bool gemma, char *out, size_t size, int *qk) {
    static const struct { const char *hf, *gguf; int qk; } glob[] = {
        {"model.embed_tokens.weight", "token_embd.weight", 0}, {"model.norm.weight", "output_norm.weight", 0},
        {"lm_head.weight", "output.weight", 0},
    };
    static const struct { const char *hf, *gguf; int qk; } per_layer[] = {
        {"input_layernorm.weight", "attn_norm.weight", 0}, {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
        {"self_attn.q_proj.weight", "attn_q.weight", 1}, {"self_attn.k_proj.weight", "attn_k.weight", 2},
        {"self_attn.v_proj.weight", "attn_v.weight", 0}, {"self_attn.o_proj.weight", "attn_output.weight", 0},
        {"self_attn.q_proj.bias", "attn_q.bias", 1}, {"self_attn.k_proj.bias", "attn_k.bias", 2},
        {"self_attn.v_proj.bias", "attn_v.bias", 0}, {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", 0}, {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
        {"mlp.up_proj.weight", "ffn_up.weight", 0}, {"mlp.down_proj.weight", "ffn_down.weight", 0},
        {"self_attn.qkv_proj.weight", "attn_qkv.weight", 0}, {"mlp.gate_up_proj.weight", "ffn_up.weight", 0},   // phi3
    };
    static const struct { const char *hf, *gguf; int qk; } gemma_norms[] = {   // gemma's four norms a layer
        {"post_attention_layernorm.weight", "post_attention_norm.weight", 0},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight", 0},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", 0},
    };
    *qk = 0;
    for (size_t k = 0; k < LLM__ARRAY_LEN(glob); k++)
        if (strcmp(hf, glob[k].hf) == 0) return snprintf(out, size, "%s", glob[k].gguf) < (int)size;
    const char *pre = "model.layers.";
    if (strncmp(hf, pre, strlen(pre)) != 0) return false;
    const char *p = hf + strlen(pre);
    long l = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 5; p++, digits++) l = l * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && hf[strlen(pre)] == '0')) return false;
    p++;
    for (size_t k = 0; gemma && k < LLM__ARRAY_LEN(gemma_norms); k++)
        if (strcmp(p, gemma_norms[k].hf) == 0)
            return snprintf(out, size, "blk.%ld.%s", l, gemma_norms[k].gguf) < (int)size;
    for (size_t k = 0; k < LLM__ARRAY_LEN(per_layer); k++)
        if (strcmp(p, per_layer[k].hf) == 0) {
            *qk = per_layer[k].qk;
            return snprintf(out, size, "blk.%ld.%s", l, per_layer[k].gguf) < (int)size;
        }
    return false;
}

// Copies src (rows of `row` bytes, n_head heads of head_dim rows) permuted as llama.cpp's
// converter does for llama-style q and k: within each head, row i of the first half and row i
// of the second half become rows 2i and 2i + 1.
static void llm__hf_permute_rows(uint8_t *dst, const uint8_t *src, size_t row, int64_t n_head, int64_t head_dim) {
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * head_dim + 2 * i + j) * row,
                       src + (size_t)(h * head_dim + j * half + i) * row, row);
}

// The tensor `name` in any file of the directory (the first file that has it), or NULL.
const struct llm__st_tensor *llm__hf_find(const struct llm__hf_owned *o, const char *name) {
    int64_t i = llm__gguf_index_find(&o->names_ix, o->names, sizeof(*o->names), name, NULL);
    return i < 0 ? NULL : o->names[i].t;
}

// Element (r, c) of a 2-D int32 tensor of `cols` columns (little-endian, maybe unaligned).
static inline uint32_t llm__hf_u32(const struct llm__st_tensor *t, int64_t r, int64_t c, int64_t cols) {
    uint32_t v;
    memcpy(&v, t->data + 4 * ((size_t)r * (size_t)cols + (size_t)c), 4);
    return v;
}

// GPTQ's act-order: *perm NULL when g_idx gi (NULL: none) keeps the in inputs in runs of G (ng
// groups, the last maybe shorter), else the inputs sorted by group (stable; kept in o), each group
// checked to be exactly G of them (the last: the rest).
static enum llm_status llm__hf_act_order(const struct llm__st_tensor *gi, int64_t in, int64_t G, int64_t ng,
                                         struct llm__hf_owned *o, int32_t **perm, const char *pr, struct llm__err *e) {
    const int64_t tail = in % G ? in % G : G;
    bool identity = true;
    for (int64_t i = 0; gi && i < in && identity; i++) identity = (int64_t)llm__hf_u32(gi, 0, i, in) == i / G;
    *perm = NULL;
    if (identity) return LLM_OK;
    int64_t *fill = calloc((size_t)ng, sizeof(int64_t));
    int32_t *p = llm__alloc((size_t)in * sizeof(int32_t));
    if (!fill || !p) { free(fill); free(p); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    o->copies[o->n_copies++] = p;
    *perm = p;
    bool ok = true;
    for (int64_t i = 0; i < in && ok; i++) {
        const uint32_t gr = llm__hf_u32(gi, 0, i, in);
        if ((ok = gr < (uint64_t)ng && fill[gr] < ((int64_t)gr == ng - 1 ? tail : G)))
            p[(int64_t)gr * G + fill[gr]++] = (int32_t)i;
    }
    free(fill);   // (ng groups, in inputs, none over its size: all full)
    if (!ok)
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': g_idx does not put %lld inputs in each of %lld groups", pr,
                         (long long)G, (long long)ng);
    return LLM_OK;
}

// The AWQ / GPTQ weight `base` (base.qweight qw, base.qzeros, base.scales, base.g_idx) as a G4 /
// G8 tensor into t (type, shape, data: a copy kept in o; perm: act-order's, also in o).
static enum llm_status llm__hf_gq_tensor(const struct llm__hf_quant *qc, struct llm__hf_owned *o, const char *base,
                                         const struct llm__st_tensor *qw, struct llm__gguf_tensor *t,
                                         struct llm__err *e) {
    char name[LLM__GGUF_MAX_NAME + 16], pr[88];
    llm__gguf_printable(pr, base, strlen(base));
    const struct llm__st_tensor *part[3];
    static const char *const sfx[3] = {"qzeros", "scales", "g_idx"};
    for (int k = 0; k < 3; k++) {
        const bool fits = snprintf(name, sizeof(name), "%s.%s", base, sfx[k]) < (int)sizeof(name);
        part[k] = fits ? llm__hf_find(o, name) : NULL;
        if (!part[k] && k < 2) return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s' has a qweight but no %s", pr, sfx[k]);
    }
    const struct llm__st_tensor *qz = part[0], *sc = part[1], *gi = qc->method == LLM__HF_GPTQ ? part[2] : NULL;
    if (qw->type != 26 || qz->type != 26 || (gi && gi->type != 26) ||
        (sc->type != 1 && sc->type != 30 && sc->type != 0))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': qweight, qzeros and g_idx must be I32 and scales F16, BF16 or "
                         "F32", pr);
    if (qw->n_dims != 2 || qz->n_dims != 2 || sc->n_dims != 2 || (gi && gi->n_dims != 1))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': qweight, qzeros and scales must be matrices, g_idx a vector",
                         pr);
    const bool awq = qc->method == LLM__HF_AWQ;
    const int bits = qc->bits, pack = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t in = awq ? qw->shape[0] : qw->shape[0] * pack, out = awq ? qw->shape[1] * pack : qw->shape[1];
    // groups of G inputs, the last one shorter when G does not divide the inputs (as GPTQ makes them)
    const int64_t G = qc->group > 0 ? qc->group : in, ng = G ? (in + G - 1) / G : 0;
    if (in == 0 || out == 0 || in % 32 || G % 32 || out % pack || qz->shape[0] != ng || qz->shape[1] != out / pack ||
        sc->shape[0] != ng || sc->shape[1] != out || (gi && gi->shape[0] != in))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': shapes qweight [%lld, %lld], qzeros [%lld, %lld], scales "
                         "[%lld, %lld] do not fit a %lld x %lld weight of %d bits in groups of %lld (its inputs a "
                         "multiple of 32)", pr, (long long)qw->shape[0], (long long)qw->shape[1],
                         (long long)qz->shape[0], (long long)qz->shape[1], (long long)sc->shape[0],
                         (long long)sc->shape[1], (long long)out, (long long)in, bits, (long long)G);
    const int64_t tail = in % G ? in % G : G;   // (blocks divide every group)
    const int type = (bits == 4 ? LLM__TYPE_G4_32 : LLM__TYPE_G8_32) +
                     (G % 128 == 0 && tail % 128 == 0 ? 2 : G % 64 == 0 && tail % 64 == 0);
    const int64_t g = llm__gq_group(type);
    int32_t *perm = NULL;
    const enum llm_status st = llm__hf_act_order(gi, in, G, ng, o, &perm, pr, e);
    if (st) return st;
    const size_t row = llm__row_bytes(type, in), bb = llm__type_table[type].block_bytes;
    uint8_t *dst = llm__alloc(row * (size_t)out);
    if (!dst) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
    o->copies[o->n_copies++] = dst;
    memset(dst, 0, row * (size_t)out);
    static const int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};   // output 8c + r is in nibble awq_nibble[r] of word c
    for (int64_t r = 0; r < out; r++) {
        const int zshift = awq ? 4 * awq_nibble[r % 8] : bits * (int)(r % pack);
        for (int64_t b = 0; b < in / g; b++) {
            struct llm__block_gq *blk = (void *)(dst + (size_t)r * row + (size_t)b * bb);
            const int64_t gr = b * g / G;
            int z = (int)(llm__hf_u32(qz, gr, r / pack, out / pack) >> zshift & mask) + qc->zeros_less_one;
            if (sc->type == 1) memcpy(&blk->d, sc->data + 2 * ((size_t)gr * (size_t)out + (size_t)r), 2);
            else {
                float f;
                uint16_t h;
                if (sc->type == 0) memcpy(&f, sc->data + 4 * ((size_t)gr * (size_t)out + (size_t)r), 4);
                else memcpy(&h, sc->data + 2 * ((size_t)gr * (size_t)out + (size_t)r), 2), f = llm__bf16_to_fp32(h);
                blk->d = llm__fp32_to_fp16(f);
            }
            blk->z = (int16_t)(bits == 8 ? z - 128 : z);
            for (int64_t j = 0; j < g; j++) {
                const int64_t i = perm ? perm[b * g + j] : b * g + j;
                const uint32_t q = awq ? llm__hf_u32(qw, i, r / 8, out / 8) >> (4 * awq_nibble[r % 8]) & 15
                                       : llm__hf_u32(qw, i / pack, r, out) >> (bits * (int)(i % pack)) & mask;
                if (bits == 8) blk->qs[j] = (uint8_t)(q - 128);
                else blk->qs[16 * (j / 32) + j % 16] |= (uint8_t)(q << (j % 32 < 16 ? 0 : 4));
            }
        }
    }
    t->type = (uint32_t)type;
    t->n_dims = 2;
    t->ne[0] = in, t->ne[1] = out, t->ne[2] = t->ne[3] = 1;
    t->size = row * (size_t)out;
    t->data = dst;
    t->perm = perm;
    return LLM_OK;
}

// Gemma's RMSNorm multiplies by 1 + w: norm t (safetensors tensor s) becomes F32 w + 1, as
// llama.cpp's converter stores it (the sum in F32, as transformers computes it; the converter adds
// in the checkpoint's type, which rounds BF16 and F16 sums); the copy is kept in o. False: out of
// memory.
static bool llm__hf_gemma_norm(struct llm__hf_owned *o, const struct llm__st_tensor *s, struct llm__gguf_tensor *t) {
    const int64_t n = t->ne[0] * t->ne[1];
    float *c = llm__alloc((size_t)n * sizeof(float));
    if (!c) return false;
    o->copies[o->n_copies++] = c;
    const uint16_t *h = (const uint16_t *)s->data;
    for (int64_t i = 0; i < n; i++) {
        float w;
        if (s->type == 0) memcpy(&w, (const char *)s->data + 4 * i, 4);
        else {
            uint16_t x;
            memcpy(&x, h + i, 2);
            w = s->type == 1 ? llm__fp16_to_fp32(x) : llm__bf16_to_fp32(x);
        }
        c[i] = w + 1.0f;
    }
    t->type = 0;
    t->size = (size_t)n * sizeof(float);
    t->data = c;
    return true;
}

// Adds the tensors of safetensors file f to g under their GGUF names (copies in o).
enum llm_status llm__hf_add_tensors(struct llm__gguf *g, struct llm__hf_owned *o, const struct llm__safetensors *f,
                                    bool permute, bool gemma, const int64_t hp[5], const struct llm__hf_quant *quant,
                                    struct llm__err *e) {
    struct llm__gguf_tensor *t2 = realloc(g->tensors, (size_t)(g->n_tensors + f->n + 1) * sizeof(*t2));
    void **c2 = realloc(o->copies, (size_t)(o->n_copies + 3 * f->n + 1) * sizeof(*c2));   // (a quantized one: 3)
    if (t2) g->tensors = t2;
    if (c2) o->copies = c2;
    if (!t2 || !c2) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for the tensors");
    for (int64_t i = 0; i < f->n; i++) {
        const struct llm__st_tensor *s = &f->t[i];
        char name[LLM__GGUF_MAX_NAME + 1], pr[88];
        int qk;
        llm__gguf_printable(pr, s->name, strlen(s->name));
        if (strstr(s->name, "rotary_emb.inv_freq")) continue;   // recomputed from rope_theta, as the converter skips it
        // a quantized weight: its qweight stands for it (the other parts are read with it)
        const char *dot = strrchr(s->name, '.');
        const bool qweight = quant->method && dot && strcmp(dot, ".qweight") == 0;
        if (quant->method && dot && !qweight &&
            (!strcmp(dot, ".qzeros") || !strcmp(dot, ".scales") || !strcmp(dot, ".g_idx"))) {
            char qn[LLM__GGUF_MAX_NAME + 16];
            if (snprintf(qn, sizeof(qn), "%.*s.qweight", (int)(dot - s->name), s->name) < (int)sizeof(qn) &&
                llm__hf_find(o, qn))
                continue;
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' belongs to no qweight", pr);
        }
        char hfname[LLM__GGUF_MAX_NAME + 16];
        if (snprintf(hfname, sizeof(hfname), "%.*s%s", qweight ? (int)(dot - s->name) : (int)strlen(s->name), s->name,
                     qweight ? ".weight" : "") >= (int)sizeof(hfname) ||
            !llm__hf_name(hfname, gemma, name, sizeof(name), &qk))
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "hf: tensor '%s' is not one this loader knows", pr);
        if (!qweight && s->type != 0 && s->type != 1 && s->type != 30)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "hf: tensor '%s' is not F32, F16 or BF16", pr);
        if (s->n_dims < 1 || s->n_dims > 2)
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' has %d dimensions, expected 1 or 2", pr, s->n_dims);
        struct llm__gguf_tensor *t = &g->tensors[g->n_tensors];
        memset(t, 0, sizeof(*t));
        t->type = s->type;
        t->n_dims = s->n_dims;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (int d = 0; d < s->n_dims; d++) t->ne[d] = s->shape[s->n_dims - 1 - d];
        if (t->ne[0] == 0 || t->ne[1] == 0) return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' is empty", pr);
        t->size = s->size;
        t->data = s->data;
        if (qweight) {
            hfname[strlen(hfname) - strlen(".weight")] = 0;
            enum llm_status st = llm__hf_gq_tensor(quant, o, hfname, s, t, e);
            if (st) return st;
            llm__map_release(s->data, s->size);
        }
        const int64_t heads = qk == 1 ? hp[0] : hp[1], rows = s->n_dims == 2 ? t->ne[1] : t->ne[0];
        const bool perm = permute && qk && rows == heads * hp[2];
        if (permute && qk && !perm)
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' has %lld rows, expected %lld heads x %lld", pr,
                             (long long)rows, (long long)heads, (long long)hp[2]);
        const size_t nl = strlen(name);
        if (gemma && nl >= 11 && !strcmp(name + nl - 11, "norm.weight")) {
            if (!llm__hf_gemma_norm(o, s, t)) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
        } else if (perm || ((uintptr_t)t->data % 32) != 0) {
            uint8_t *c = llm__alloc(t->size);
            if (!c) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
            o->copies[o->n_copies++] = c;
            if (perm) llm__hf_permute_rows(c, t->data, t->size / (size_t)rows, heads, hp[2]);
            else memcpy(c, t->data, t->size);
            if (t->data == s->data) llm__map_release(s->data, s->size);   // (the file's pages are not read again)
            t->data = c;
        }
        if (!(t->name = llm__strndup(name, strlen(name)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        uint64_t slot = 0;
        if (llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), t->name, &slot) >= 0) {
            free(t->name);
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' is in the checkpoint twice", pr);
        }
        g->tensor_index.slots[slot] = g->n_tensors++;
    }
    return LLM_OK;
}

// The text of file `name` of the directory into *out (NULL and LLM_OK when it is absent and not
// required).
enum llm_status llm__hf_read(const char *dir, const char *name, size_t max, bool required, char **out, size_t *len,
                             struct llm__err *e) {
    char path[4096];
    *out = NULL;
    *len = 0;
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return llm__fail(e, LLM_ERR_IO, "hf: directory path too long");
    if (!required && access(path, F_OK) != 0) return LLM_OK;
    if (required && access(path, F_OK) != 0)
        return llm__fail(e, LLM_ERR_IO, "hf: '%s' has no %s%s", dir, name,
                         strcmp(name, "tokenizer.json") == 0 ? " (the tokenizer; the engine reads no other form of it)"
                                                             : "");
    return llm__read_file(path, max, out, len, e);
}
