// The transformer: loading a model, the layer loop, quantization at load

#include "internal.h"

// === the transformer ===
//
// Llama-family decoder: token embedding, n_layer x (RMSNorm, attention with RoPE and GQA,
// residual, RMSNorm, gated MLP, residual), final RMSNorm, output projection. The layer loop
// below is the only one; it calls backend ops and never touches memory itself. The architectures
// differ, as llama.cpp computes them, in:
//   qwen2   biases on q/k/v; NeoX RoPE (pairs (i, i + n_rot/2))
//   qwen3   per-head RMSNorm of q and k (weights of head_dim) before RoPE; NeoX RoPE
//   phi3    q/k/v fused into one matrix (attn_qkv) and gate/up into one (ffn_up, gate first):
//           split into separate weights at load; NeoX RoPE
//   gemma2  embeddings scaled by sqrt(n_embd); RMSNorm also after attention and after the MLP
//           (before each residual add); GELU-gated MLP; sliding-window attention on even layers;
//           attention scores and final logits soft-capped (cap * tanh(x / cap)); NeoX RoPE
//   gemma3  gemma2's layout with per-head q/k RMSNorm, no attention soft-capping, five local
//           (sliding-window) layers to one global, local layers with their own RoPE base
//   qwen3moe  qwen3's attention; the MLP a mixture of experts (below)
//   qwen2moe  qwen2's attention; a mixture of experts (weights not normalised) plus a shared
//           expert on every token, scaled by the sigmoid of its own gate's logit
//   olmoe   RMSNorm of each token's whole q and k (weights of n_head*head_dim, n_head_kv*head_dim)
//           before RoPE (NeoX); a mixture of experts of n_ff each, weights not normalised
//   gpt-oss biases on q/k/v/o, the router and the experts; a sink per head (a logit in each
//           softmax's denominator); sliding-window attention on even layers; YaRN RoPE (NeoX);
//           the experts' weights a softmax over the k chosen logits, their SwiGLU clamped
//           (swiglu_oai); the MLP's norm is named post_attention_norm
// A mixture of experts (qwen3moe; llama with expert_count: Mixtral) replaces the gated MLP: a
// router's logits per token, its k best experts weighted by their softmax probabilities
// normalised to sum 1, each expert a gated MLP, their outputs summed with those weights.
// Gemma's RMSNorm multiplies by (1 + w): llama.cpp's converter stores w + 1 in the file, so every
// architecture here multiplies by the stored weight.

static struct llm__tensor llm__vec_view(struct llm__buf *buf, size_t offs, int64_t ne0, int64_t ne1) {
    return (struct llm__tensor){buf, offs, LLM__TYPE_F32, ne0, ne1, (size_t)ne0 * sizeof(float)};
}

// Key of the model's architecture, e.g. "llama.block_count".
static const char *llm__arch_key(const struct llm__model *m, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", m->arch_name, suffix);
    return buf;
}

static enum llm_status llm__hparam_u32(const struct llm__model *m, const char *suffix, int *out, int def,
                                       uint32_t lo, uint32_t hi, struct llm__err *e) {
    char key[128];
    uint32_t v;
    llm__arch_key(m, suffix, key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) < 0) {
        if (def < 0) return llm__fail(e, LLM_ERR_FORMAT, "model: missing key '%s'", key);
        *out = def;
        return LLM_OK;
    }
    if (!llm__gguf_get_u32(&m->gguf, key, &v, e)) return LLM_ERR_FORMAT;
    if (v < lo || v > hi)
        return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' = %u is out of range [%u, %u]", key, v, lo, hi);
    *out = (int)v;
    return LLM_OK;
}

static enum llm_status llm__hparam_f32(const struct llm__model *m, const char *suffix, float *out, float def,
                                       struct llm__err *e) {
    char key[128];
    llm__arch_key(m, suffix, key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) < 0) { *out = def; return LLM_OK; }
    if (!llm__gguf_get_f32(&m->gguf, key, out, e)) return LLM_ERR_FORMAT;
    if (!isfinite(*out)) return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' is not a finite number", key);
    return LLM_OK;
}

// A tensor's shape as "[ne0, ne1, ...]", every dimension it has (a shape error shows them all).
static const char *llm__shape_str(char buf[96], int n_dims, const int64_t *ne) {
    int n = snprintf(buf, 96, "[");
    for (int d = 0; d < n_dims && n < 96; d++)
        n += snprintf(buf + n, (size_t)(96 - n), "%s%lld", d ? ", " : "", (long long)ne[d]);
    if (n < 96) snprintf(buf + n, (size_t)(96 - n), "]");
    return buf;
}

// Finds a tensor and checks its shape (ne0, ne1, ne2; ne1 = 0 for a vector, ne2 = 1 for a matrix)
// and that its type is usable.
static enum llm_status llm__model_tensor3(const struct llm__model *m, const char *name, int64_t ne0, int64_t ne1,
                                          int64_t ne2, bool optional, const struct llm__gguf_tensor **out,
                                          struct llm__err *e) {
    const struct llm__gguf_tensor *t = llm__gguf_find_tensor(&m->gguf, name);
    *out = t;
    if (!t) return optional ? LLM_OK : llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor '%s'", name);
    // (unused dimensions are 1: a [n, 1] file tensor is a vector, a [n, m, 1] one a matrix)
    int64_t want[3] = {ne0, ne1 ? ne1 : 1, ne2};
    bool same = t->ne[0] == want[0] && t->ne[1] == want[1] && t->ne[2] == want[2] && t->ne[3] == 1;
    if (!same) {
        char got_s[96], want_s[96];
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' has shape %s, expected %s", name,
                         llm__shape_str(got_s, t->n_dims, t->ne), llm__shape_str(want_s, ne2 > 1 ? 3 : ne1 ? 2 : 1,
                                                                                want));
    }
    const struct llm__type_info *ti = llm__type_info(t->type);
    if (!ti || !ti->supported)
        return llm__fail(
            e, LLM_ERR_UNSUPPORTED,
            "model: tensor '%s' has type %s, which llm.c does not support "
            "(supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, "
            "iq4_xs)",
            name, ti ? ti->name : "unknown");
    return LLM_OK;
}

static enum llm_status llm__model_tensor(const struct llm__model *m, const char *name, int64_t ne0, int64_t ne1,
                                         bool optional, const struct llm__gguf_tensor **out, struct llm__err *e) {
    return llm__model_tensor3(m, name, ne0, ne1, 1, optional, out, e);
}

// Reads hyper-parameters and checks them; no tensors yet.
// The file's architecture and name (general.architecture, general.name), whatever the load mode.
void llm__model_names(struct llm__model *m) {
    struct llm__gguf_str s;
    if (llm__gguf_find_key(&m->gguf, "general.architecture") >= 0 &&
        llm__gguf_get_str(&m->gguf, "general.architecture", &s, NULL))
        snprintf(m->arch_name, sizeof(m->arch_name), "%.*s", (int)LLM__MIN(s.len, 31), s.ptr);
    if (llm__gguf_find_key(&m->gguf, "general.name") >= 0 && llm__gguf_get_str(&m->gguf, "general.name", &s, NULL))
        snprintf(m->name, sizeof(m->name), "%.*s", (int)LLM__MIN(s.len, 127), s.ptr);
}

// Which layers are local (sliding-window) ones: the key sliding_window_pattern as an array of
// bools (one per layer) or a number n (layer l is local unless l % n == n - 1; 0: all local),
// else the architecture's n, as llama.cpp's set_swa_pattern.
static enum llm_status llm__model_swa_pattern(struct llm__model *m, int n_pattern, struct llm__err *e) {
    char key[128];
    llm__arch_key(m, "attention.sliding_window_pattern", key, sizeof(key));
    int64_t ki = llm__gguf_find_key(&m->gguf, key);
    if (ki >= 0 && m->gguf.kv[ki].type == LLM__GGUF_ARR) {
        const struct llm__gguf_kv *kv = &m->gguf.kv[ki];
        if (kv->arr_type != LLM__GGUF_BOOL || kv->arr_n != (uint64_t)m->n_layer)
            return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' is not an array of %d bools", key, m->n_layer);
        for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = kv->arr_data[l] != 0;
        return LLM_OK;
    }
    enum llm_status st = llm__hparam_u32(m, "attention.sliding_window_pattern", &n_pattern, n_pattern, 0, 1024, e);
    if (st) return st;
    for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = n_pattern == 0 || l % n_pattern < n_pattern - 1;
    return LLM_OK;
}

// What sets the architectures apart (see the top of this file), from their keys as llama.cpp
// reads them, with its defaults; allocates m->layers (which holds the local/global pattern).
static enum llm_status llm__model_arch_hparams(struct llm__model *m, struct llm__err *e) {
    enum llm_status st;
    const bool gemma = m->arch == LLM__ARCH_GEMMA2 || m->arch == LLM__ARCH_GEMMA3;
    m->attn_scale = 1.0f / sqrtf((float)m->head_dim);
    m->rope_swa = m->rope;
    m->qk_norm = m->arch == LLM__ARCH_QWEN3 || m->arch == LLM__ARCH_QWEN3MOE || m->arch == LLM__ARCH_GEMMA3;
    m->qk_norm_full = m->arch == LLM__ARCH_OLMOE;
    if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    if (m->arch == LLM__ARCH_GPTOSS) {   // a window on even layers, each layer the same RoPE unless a local base
        m->swiglu_oai = true;
        if ((st = llm__hparam_u32(m, "attention.sliding_window", &m->n_swa, -1, 0, 1u << 24, e)) ||
            (st = llm__model_swa_pattern(m, 2, e)) ||
            (st = llm__hparam_f32(m, "rope.freq_base_swa", &m->rope_swa.freq_base, m->rope.freq_base, e)))
            return st;
        if (!(m->rope_swa.freq_base > 1.0f))
            return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base_swa must be > 1");
        if (m->n_swa == 0)
            for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = false;
        return LLM_OK;
    }
    if (!gemma) return LLM_OK;
    m->embd_scale = sqrtf((float)m->n_embd);
    m->gelu = m->post_norms = true;
    // Gemma 2 27B and Gemma 3 27B scale by n_embd / n_head instead of the head size (llama.cpp
    // tells them by their layer count)
    if ((m->arch == LLM__ARCH_GEMMA2 && m->n_layer == 46) || (m->arch == LLM__ARCH_GEMMA3 && m->n_layer == 62))
        m->attn_scale = 1.0f / sqrtf((float)(m->n_embd / m->n_head));
    char key[128];
    bool has_window = llm__gguf_find_key(&m->gguf, llm__arch_key(m, "attention.sliding_window", key, sizeof(key))) >= 0;
    if ((st = llm__hparam_u32(m, "attention.sliding_window", &m->n_swa, m->arch == LLM__ARCH_GEMMA2 ? 4096 : 0, 0,
                              1u << 24, e)))
        return st;
    if (m->arch == LLM__ARCH_GEMMA2) {
        if ((st = llm__hparam_f32(m, "attn_logit_softcapping", &m->attn_softcap, 50.0f, e))) return st;
        if ((st = llm__hparam_f32(m, "final_logit_softcapping", &m->final_softcap, 30.0f, e))) return st;
        if ((st = llm__model_swa_pattern(m, 2, e))) return st;
    } else {
        if ((st = llm__hparam_f32(m, "final_logit_softcapping", &m->final_softcap, 0.0f, e))) return st;
        // without a window every layer is global (llama.cpp: swa_type none)
        if (has_window && m->n_swa > 0 && (st = llm__model_swa_pattern(m, 6, e))) return st;
        m->rope_swa.freq_base = 10000.0f;   // llama.cpp's default local base
        m->rope_swa.freq_scale = 1.0f;      // (rope scaling is for the global layers)
    }
    if ((st = llm__hparam_f32(m, "rope.freq_base_swa", &m->rope_swa.freq_base, m->rope_swa.freq_base, e))) return st;
    if (!(m->rope_swa.freq_base > 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base_swa must be > 1");
    if (!(m->attn_softcap >= 0.0f) || !(m->final_softcap >= 0.0f))
        return llm__fail(e, LLM_ERR_FORMAT, "model: a soft-capping value is negative");
    if (m->n_swa == 0)
        for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = false;
    return LLM_OK;
}

// A mixture of experts (llama.cpp's keys): expert_count experts in every layer's MLP, of which a
// token uses expert_used_count, each of expert_feed_forward_length (default: Mixtral, which is
// llama with experts, the model's feed_forward_length; qwen3moe as llama.cpp, feed_forward_length /
// expert_used_count). Routing: a softmax, the weights of the k chosen normalised (llama.cpp's choice
// for both).
static enum llm_status llm__model_moe_hparams(struct llm__model *m, struct llm__err *e) {
    enum llm_status st;
    if ((st = llm__hparam_u32(m, "expert_count", &m->n_expert, 0, 0, 4096, e))) return st;
    const bool moe_arch = m->arch == LLM__ARCH_QWEN3MOE || m->arch == LLM__ARCH_QWEN2MOE ||
                          m->arch == LLM__ARCH_GPTOSS || m->arch == LLM__ARCH_OLMOE;
    // (llama.cpp's llama and olmoe: the experts are n_ff long, whatever expert_feed_forward_length says)
    const bool n_ff_long = m->arch == LLM__ARCH_LLAMA || m->arch == LLM__ARCH_OLMOE;
    if (!m->n_expert) {
        if (moe_arch)
            return llm__fail(e, LLM_ERR_FORMAT, "model: %s without %s.expert_count", m->arch_name, m->arch_name);
        return LLM_OK;
    }
    if (m->arch != LLM__ARCH_LLAMA && !moe_arch)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: experts (expert_count) in architecture '%s' are not "
                         "supported (llama, qwen2moe, qwen3moe, olmoe, gpt-oss)", m->arch_name);
    if ((st = llm__hparam_u32(m, "expert_used_count", &m->n_expert_used, -1, 1, (uint32_t)m->n_expert, e)) ||
        (!n_ff_long && (st = llm__hparam_u32(m, "expert_feed_forward_length", &m->n_ff_exp, 0, 1, 1 << 20, e)))) {
        m->n_expert = m->n_expert_used = 0;
        return st;
    }
    // qwen2moe: a shared expert too (expert_shared_feed_forward_length; default feed_forward_length),
    // and the k weights are not normalised (llama.cpp)
    if (m->arch == LLM__ARCH_QWEN2MOE &&
        (st = llm__hparam_u32(m, "expert_shared_feed_forward_length", &m->n_ff_shexp, 0, 1, 1 << 20, e))) {
        m->n_expert = m->n_expert_used = 0;
        return st;
    }
    // gpt-oss: a softmax over the k chosen logits, not normalised again (llama.cpp's SOFTMAX_WEIGHT)
    const bool oss = m->arch == LLM__ARCH_GPTOSS;
    const bool norm = m->arch != LLM__ARCH_QWEN2MOE && m->arch != LLM__ARCH_OLMOE && !oss;
    m->moe = (struct llm__moe){m->n_expert, m->n_expert_used, norm, 0.0f, oss};
    return LLM_OK;
}

// YaRN as llama.cpp sets it up (llama-context.cpp): the original context
// (rope.scaling.original_context_length, default the trained one), ext_factor 1, beta_fast 32,
// beta_slow 1, and the attention factor (1 + 0.1 ln f) / (1 + 0.1 ln f) x attn_factor, which each
// layer's RoPE then multiplies by 1 + 0.1 ln(1 / its freq_scale) (ggml's rope_yarn): 1 + 0.1 ln f
// on layers scaled by f, 1 on unscaled ones (Gemma 3's local layers). The correction dimensions
// and scales wait for the final frequency bases and scales (llm__rope_yarn_finish).
static enum llm_status llm__model_yarn(struct llm__model *m, float factor, struct llm__err *e) {
    enum llm_status st = llm__hparam_u32(m, "rope.scaling.original_context_length", &m->yarn_n_ctx_orig, 0, 1,
                                         1u << 24, e);
    m->yarn_attn = factor > 1.0f ? 0.1f * logf(factor) + 1.0f : 1.0f;   // (llama.cpp's order of operations)
    m->yarn_attn *= 1.0f / (1.0f + 0.1f * logf(factor));
    m->rope.ext_factor = 1.0f;
    return st;
}

// ggml_rope_yarn_corr_dims: the pairs below corr_dims[0] rotate as trained (extrapolated), those
// above corr_dims[1] interpolated, for n_ctx_orig positions and the rotations beta_fast/slow; and
// the RoPE's scale of cos and sin (llm__model_yarn).
static void llm__rope_yarn_finish(struct llm__rope *r, int n_ctx_orig, float attn) {
    const float beta_fast = 32.0f, beta_slow = 1.0f, n = (float)r->n_rot, lb = 2.0f * logf(r->freq_base);
    r->mscale = attn * (1.0f + 0.1f * logf(1.0f / r->freq_scale));
    const float lo = floorf(n * logf((float)n_ctx_orig / (beta_fast * 2.0f * 3.14159265358979323846f)) / lb);
    const float hi = ceilf(n * logf((float)n_ctx_orig / (beta_slow * 2.0f * 3.14159265358979323846f)) / lb);
    r->corr_dims[0] = fmaxf(0.0f, lo);
    r->corr_dims[1] = fminf(n - 1.0f, hi);
}

// RoPE's settings: the rotated dimensions, the base, the scaling (none, linear, YaRN).
static enum llm_status llm__model_rope(struct llm__model *m, struct llm__err *e) {
    enum llm_status st;
    struct llm__gguf_str s;
    char key[128];
    m->rope.neox = m->arch != LLM__ARCH_LLAMA;   // llama.cpp: LLAMA_ROPE_TYPE_NEOX for all the others
    if ((st = llm__hparam_u32(m, "rope.dimension_count", &m->rope.n_rot, m->head_dim, 2, (uint32_t)m->head_dim, e)))
        return st;
    if (m->rope.n_rot % 2) return llm__fail(e, LLM_ERR_FORMAT, "model: odd rope dimension count %d", m->rope.n_rot);
    if ((st = llm__hparam_f32(m, "rope.freq_base", &m->rope.freq_base, 10000.0f, e))) return st;
    if (!(m->rope.freq_base > 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base must be > 1");
    m->rope.freq_scale = 1.0f;
    // the scaling: rope.scaling.type (default linear, as llama.cpp), .factor (0 or none: 1) and
    // .attn_factor (llama.cpp multiplies any RoPE's cos and sin by it; the backends do it with YaRN)
    float factor = 1.0f, attn = 1.0f;
    if ((st = llm__hparam_f32(m, "rope.scaling.factor", &factor, 1.0f, e)) ||
        (st = llm__hparam_f32(m, "rope.scaling.attn_factor", &attn, 1.0f, e)))
        return st;
    if (factor == 0.0f) factor = 1.0f;
    s = (struct llm__gguf_str){"linear", 6};
    llm__arch_key(m, "rope.scaling.type", key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) >= 0 && !llm__gguf_get_str(&m->gguf, key, &s, e)) return LLM_ERR_FORMAT;
    const bool yarn = s.len == 4 && memcmp(s.ptr, "yarn", 4) == 0;
    if (!yarn && attn != 1.0f)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: rope.scaling.attn_factor %g without YaRN is not supported",
                         (double)attn);
    if (!(attn > 0.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.scaling.attn_factor %g", (double)attn);
    if ((s.len == 6 && memcmp(s.ptr, "linear", 6) == 0) || yarn) {
        if (!(factor >= 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope scaling factor %g", (double)factor);
        m->rope.freq_scale = 1.0f / factor;
        if (yarn) {
            if ((st = llm__model_yarn(m, factor, e))) return st;
            m->yarn_attn *= attn;
        }
    } else if (!(s.len == 4 && memcmp(s.ptr, "none", 4) == 0)) {
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: rope scaling '%.*s' is not supported (none, linear, yarn)",
                         (int)LLM__MIN(s.len, 32), s.ptr);
    }
    return LLM_OK;
}

enum llm_status llm__model_hparams(struct llm__model *m, struct llm__err *e) {
    struct llm__gguf_str s;
    enum llm_status st;
    if (!llm__gguf_get_str(&m->gguf, "general.architecture", &s, e)) return LLM_ERR_FORMAT;
    static const struct { const char *name; enum llm__arch arch; } archs[] = {
        {"llama", LLM__ARCH_LLAMA}, {"qwen2", LLM__ARCH_QWEN2}, {"qwen3", LLM__ARCH_QWEN3},
        {"phi3", LLM__ARCH_PHI3}, {"gemma2", LLM__ARCH_GEMMA2}, {"gemma3", LLM__ARCH_GEMMA3},
        {"qwen3moe", LLM__ARCH_QWEN3MOE}, {"qwen2moe", LLM__ARCH_QWEN2MOE}, {"gpt-oss", LLM__ARCH_GPTOSS},
        {"olmoe", LLM__ARCH_OLMOE},
    };
    size_t ai = 0;
    while (ai < LLM__ARRAY_LEN(archs) && strcmp(m->arch_name, archs[ai].name) != 0) ai++;
    if (ai == LLM__ARRAY_LEN(archs))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: architecture '%s' is not supported "
                         "(supported: llama (Mixtral too), qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, gemma3, "
                         "olmoe, gpt-oss)",
                         m->arch_name);
    m->arch = archs[ai].arch;
    if ((st = llm__hparam_u32(m, "embedding_length", &m->n_embd, -1, 1, 65536, e))) return st;
    if ((st = llm__hparam_u32(m, "block_count", &m->n_layer, -1, 1, 1024, e))) return st;
    if ((st = llm__model_moe_hparams(m, e))) return st;
    // (optional in a mixture of experts, as llama.cpp reads it)
    if ((st = llm__hparam_u32(m, "feed_forward_length", &m->n_ff, m->n_expert ? 0 : -1, m->n_expert ? 0 : 1, 1 << 20,
                              e)))
        return st;
    if (m->n_expert && !m->n_ff_exp)
        m->n_ff_exp = m->arch == LLM__ARCH_LLAMA || m->arch == LLM__ARCH_OLMOE ? m->n_ff : m->n_ff / m->n_expert_used;
    if (m->arch == LLM__ARCH_QWEN2MOE && !m->n_ff_shexp) m->n_ff_shexp = m->n_ff;
    if (m->n_expert && !m->n_ff_exp)
        return llm__fail(e, LLM_ERR_FORMAT, "model: the experts have no feed-forward length");
    if ((st = llm__hparam_u32(m, "attention.head_count", &m->n_head, -1, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "attention.head_count_kv", &m->n_head_kv, m->n_head, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "context_length", &m->n_ctx_train, 2048, 1, 1u << 24, e))) return st;
    char key[128];
    if (m->n_embd % m->n_head != 0 &&
        llm__gguf_find_key(&m->gguf, llm__arch_key(m, "attention.key_length", key, sizeof(key))) < 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: embedding length %d is not a multiple of the head count %d",
                         m->n_embd, m->n_head);
    if ((st = llm__hparam_u32(m, "attention.key_length", &m->head_dim, m->n_embd / m->n_head, 2, 1024, e))) return st;
    int vdim;
    if ((st = llm__hparam_u32(m, "attention.value_length", &vdim, m->head_dim, 2, 1024, e))) return st;
    if (vdim != m->head_dim)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: key length %d differs from value length %d", m->head_dim,
                         vdim);
    if (m->n_head % m->n_head_kv != 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: head count %d is not a multiple of the KV head count %d",
                         m->n_head, m->n_head_kv);
    if ((st = llm__hparam_f32(m, "attention.layer_norm_rms_epsilon", &m->norm_eps, 1e-5f, e))) return st;
    if (!(m->norm_eps > 0.0f && m->norm_eps < 1.0f))
        return llm__fail(e, LLM_ERR_FORMAT, "model: RMS norm epsilon %g is out of range", (double)m->norm_eps);
    if ((st = llm__model_rope(m, e))) return st;
    const struct llm__gguf_tensor *te = llm__gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te) return llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1 << 24)) {
        char got_s[96];
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor 'token_embd.weight' has shape %s, expected [%d, n_vocab] "
                         "with n_vocab in [1, %d]", llm__shape_str(got_s, te->n_dims, te->ne), m->n_embd, 1 << 24);
    }
    m->n_vocab = (int)te->ne[1];
    if ((st = llm__model_arch_hparams(m, e))) return st;
    if (m->rope.ext_factor != 0.0f) {   // (the local layers' RoPE is YaRN too, with its own base)
        const int orig = m->yarn_n_ctx_orig ? m->yarn_n_ctx_orig : m->n_ctx_train;
        llm__rope_yarn_finish(&m->rope, orig, m->yarn_attn);
        llm__rope_yarn_finish(&m->rope_swa, orig, m->yarn_attn);
    }
    return LLM_OK;
}

// The plan's entries: a vector (or a table of biases), a matrix or part of one, stacked experts.
#define LLM__VEC(field, nm, n, opt)                                                     \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, n, 0, opt, &t, e))) return st;               \
        if (t) pl->vecs[pl->n_vecs].dst = field, pl->vecs[pl->n_vecs++].src = t;        \
    } while (0)
#define LLM__VEC2(field, nm, n0, n1)   /* a 2-D table of biases, a row per expert */      \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, n0, n1, false, &t, e))) return st;           \
        pl->vecs[pl->n_vecs].dst = field, pl->vecs[pl->n_vecs++].src = t;               \
    } while (0)
#define LLM__PART(field, r0, nr)                                                        \
    (pl->mats[pl->n_mats].dst = field, pl->mats[pl->n_mats].src = t, pl->mats[pl->n_mats].row0 = r0, \
     pl->mats[pl->n_mats].experts = false, pl->mats[pl->n_mats++].rows = nr)
#define LLM__EXPERTS(field, nr) (LLM__PART(field, 0, nr), pl->mats[pl->n_mats - 1].experts = true)
#define LLM__MAT(field, nm, cols, rows, opt)                                            \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, cols, rows, opt, &t, e))) return st;         \
        if (t) LLM__PART(field, 0, rows);                                               \
    } while (0)
#define LLM__NAME(s) (snprintf(name, sizeof(name), "blk.%d." s, l), name)

// Layer l's mixture of experts: the router, then each expert weight of all experts stacked (and
// gpt-oss's biases, qwen2moe's shared expert).
static enum llm_status llm__model_plan_experts(struct llm__model *m, struct llm__model_plan *pl,
                                               struct llm__layer *L, int l, struct llm__err *e) {
    const int E = m->n_embd;
    const bool oss = m->arch == LLM__ARCH_GPTOSS;
    enum llm_status st;
    char name[96];
    const struct llm__gguf_tensor *t;
    const int64_t X = m->n_expert, F = m->n_ff_exp;
    LLM__MAT(&L->gate_inp, LLM__NAME("ffn_gate_inp.weight"), E, X, false);
    if ((st = llm__model_tensor3(m, LLM__NAME("ffn_gate_exps.weight"), E, F, X, false, &t, e))) return st;
    LLM__EXPERTS(&L->exp_gate, F * X);
    if ((st = llm__model_tensor3(m, LLM__NAME("ffn_up_exps.weight"), E, F, X, false, &t, e))) return st;
    LLM__EXPERTS(&L->exp_up, F * X);
    if ((st = llm__model_tensor3(m, LLM__NAME("ffn_down_exps.weight"), F, E, X, false, &t, e))) return st;
    LLM__EXPERTS(&L->exp_down, E * X);
    if (oss) {
        LLM__VEC(&L->gate_inp_b, LLM__NAME("ffn_gate_inp.bias"), X, false);
        LLM__VEC2(&L->exp_gate_b, LLM__NAME("ffn_gate_exps.bias"), F, X);
        LLM__VEC2(&L->exp_up_b, LLM__NAME("ffn_up_exps.bias"), F, X);
        LLM__VEC2(&L->exp_down_b, LLM__NAME("ffn_down_exps.bias"), E, X);
    }
    if (m->n_ff_shexp) {   // qwen2moe's shared expert, and its gate (one row: a vector in the file)
        LLM__MAT(&L->gate_inp_shexp, LLM__NAME("ffn_gate_inp_shexp.weight"), E, 1, false);
        LLM__MAT(&L->shexp_gate, LLM__NAME("ffn_gate_shexp.weight"), E, m->n_ff_shexp, false);
        LLM__MAT(&L->shexp_up, LLM__NAME("ffn_up_shexp.weight"), E, m->n_ff_shexp, false);
        LLM__MAT(&L->shexp_down, LLM__NAME("ffn_down_shexp.weight"), m->n_ff_shexp, E, false);
    }
    return LLM_OK;
}

// Finds every tensor the architecture uses and checks its shape and type (llm__model_tensor);
// the optional output matrix decides tied_output.
enum llm_status llm__model_plan(struct llm__model *m, struct llm__model_plan *pl, struct llm__err *e) {
    const int E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    const bool bias = m->arch == LLM__ARCH_QWEN2 || m->arch == LLM__ARCH_QWEN2MOE || m->arch == LLM__ARCH_GPTOSS;
    const bool oss = m->arch == LLM__ARCH_GPTOSS;
    enum llm_status st;
    char name[96];
    pl->vecs = calloc((size_t)m->n_layer * 16 + 2, sizeof(*pl->vecs));
    pl->mats = calloc((size_t)m->n_layer * 12 + 2, sizeof(*pl->mats));
    if (!pl->vecs || !pl->mats) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    const struct llm__gguf_tensor *t;
    LLM__MAT(&m->tok_embd, "token_embd.weight", E, m->n_vocab, false);
    LLM__VEC(&m->output_norm, "output_norm.weight", E, false);
    if (m->arch != LLM__ARCH_GEMMA2) LLM__MAT(&m->output, "output.weight", E, m->n_vocab, true);
    else t = NULL;   // llama.cpp always ties gemma2's output to the embeddings
    m->tied_output = t == NULL;
    LLM__VEC(&m->rope_freqs, "rope_freqs.weight", m->rope.n_rot / 2, true);
    if (m->arch == LLM__ARCH_PHI3 && (llm__gguf_find_tensor(&m->gguf, "rope_factors_long.weight") ||
                                      llm__gguf_find_tensor(&m->gguf, "rope_factors_short.weight")))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: phi3 with long-context RoPE factors (rope_factors_long/short, "
                         "LongRoPE) is not supported");
    for (int l = 0; l < m->n_layer; l++) {
        struct llm__layer *L = &m->layers[l];
        LLM__VEC(&L->attn_norm, LLM__NAME("attn_norm.weight"), E, false);
        // phi3 may fuse q/k/v into attn_qkv (rows: Q of q, KV of k, KV of v)
        if (m->arch == LLM__ARCH_PHI3 && llm__gguf_find_tensor(&m->gguf, LLM__NAME("attn_qkv.weight"))) {
            if ((st = llm__model_tensor(m, name, E, Q + 2 * KV, false, &t, e))) return st;
            LLM__PART(&L->wq, 0, Q);
            LLM__PART(&L->wk, Q, KV);
            LLM__PART(&L->wv, Q + KV, KV);
        } else {
            LLM__MAT(&L->wq, LLM__NAME("attn_q.weight"), E, Q, false);
            LLM__MAT(&L->wk, LLM__NAME("attn_k.weight"), E, KV, false);
            LLM__MAT(&L->wv, LLM__NAME("attn_v.weight"), E, KV, false);
        }
        LLM__MAT(&L->wo, LLM__NAME("attn_output.weight"), Q, E, false);
        LLM__VEC(&L->ffn_norm, oss ? LLM__NAME("post_attention_norm.weight") : LLM__NAME("ffn_norm.weight"), E, false);
        if (oss) {
            LLM__VEC(&L->bo, LLM__NAME("attn_output.bias"), E, false);
            LLM__VEC(&L->sinks, LLM__NAME("attn_sinks.weight"), m->n_head, false);
        }
        if (m->n_expert) {
            if ((st = llm__model_plan_experts(m, pl, L, l, e))) return st;
        } else if (m->arch == LLM__ARCH_PHI3) {   // gate and up fused in ffn_up: n_ff rows of gate, then up
            if ((st = llm__model_tensor(m, LLM__NAME("ffn_up.weight"), E, 2 * (int64_t)m->n_ff, false, &t, e)))
                return st;
            LLM__PART(&L->w_gate, 0, m->n_ff);
            LLM__PART(&L->w_up, m->n_ff, m->n_ff);
        } else {
            LLM__MAT(&L->w_gate, LLM__NAME("ffn_gate.weight"), E, m->n_ff, false);
            LLM__MAT(&L->w_up, LLM__NAME("ffn_up.weight"), E, m->n_ff, false);
        }
        if (!m->n_expert) LLM__MAT(&L->w_down, LLM__NAME("ffn_down.weight"), m->n_ff, E, false);
        if (bias) {
            LLM__VEC(&L->bq, LLM__NAME("attn_q.bias"), Q, false);
            LLM__VEC(&L->bk, LLM__NAME("attn_k.bias"), KV, false);
            LLM__VEC(&L->bv, LLM__NAME("attn_v.bias"), KV, false);
        }
        if (m->qk_norm || m->qk_norm_full) {
            LLM__VEC(&L->q_norm, LLM__NAME("attn_q_norm.weight"), m->qk_norm ? m->head_dim : Q, false);
            LLM__VEC(&L->k_norm, LLM__NAME("attn_k_norm.weight"), m->qk_norm ? m->head_dim : KV, false);
        }
        if (m->post_norms) {
            LLM__VEC(&L->attn_post_norm, LLM__NAME("post_attention_norm.weight"), E, false);
            LLM__VEC(&L->ffn_post_norm, LLM__NAME("post_ffw_norm.weight"), E, false);
        }
    }
#undef LLM__VEC
#undef LLM__VEC2
#undef LLM__MAT
#undef LLM__PART
#undef LLM__EXPERTS
#undef LLM__NAME
    return LLM_OK;
}

// The 1-D parameters, converted to f32 and checked (finite; rope factors > 0), into one backend
// buffer (m->small), each 64-byte aligned; the model's fields become views of it.
static enum llm_status llm__model_load_vectors(struct llm__model *m, struct llm_backend *be,
                                               const struct llm__model_plan *pl, struct llm__err *e) {
    size_t total = 0, longest = 1;   // (a vector, or a 2-D table of ne[1] rows: the experts' biases)
    for (size_t i = 0; i < pl->n_vecs; i++) {
        const size_t n = (size_t)(pl->vecs[i].src->ne[0] * pl->vecs[i].src->ne[1]);
        total += (n * sizeof(float) + 63) & ~(size_t)63;
        longest = LLM__MAX(longest, n);
    }
    enum llm_status st = be->iface->buf_alloc(be->ctx, &m->small, total, e);
    if (st) return st;
    float *tmp = malloc(longest * sizeof(float));
    if (!tmp) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    size_t offs = 0;
    for (size_t i = 0; i < pl->n_vecs && !st; i++) {
        const struct llm__gguf_tensor *src = pl->vecs[i].src;
        int64_t n = src->ne[0] * src->ne[1];
        llm__dequantize_row((int)src->type, src->data, tmp, n);
        for (int64_t j = 0; j < n && !st; j++) {
            if (pl->vecs[i].dst == &m->rope_freqs && !(tmp[j] > 0.0f))
                st = llm__fail(e, LLM_ERR_FORMAT, "model: rope_freqs.weight holds a factor that is not > 0");
            else if (!isfinite(tmp[j]))
                st = llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' holds a value that is not finite", src->name);
        }
        if (st) break;
        be->iface->upload(be->ctx, &m->small, offs, tmp, (size_t)n * sizeof(float));
        *pl->vecs[i].dst = llm__vec_view(&m->small, offs, src->ne[0], src->ne[1]);
        offs += ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    }
    free(tmp);
    m->rope.freq_factors = m->rope_freqs;   // (no buffer when the model has none)
    return st;
}

// The act-order weights' input permutations (a directory's GPTQ weights with g_idx), each
// distinct one once, into m->perms; each weight's perm a view of its own.
static enum llm_status llm__model_load_perms(struct llm__model *m, struct llm_backend *be,
                                             const struct llm__model_plan *pl, struct llm__err *e) {
    size_t total = 0;
    for (size_t i = 0; i < pl->n_mats; i++)
        if (pl->mats[i].src->perm) total += ((size_t)pl->mats[i].src->ne[0] * 4 + 63) & ~(size_t)63;
    if (!total) return LLM_OK;
    if (!be->iface->gather_cols)
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "model: the %s backend cannot run GPTQ act-order (desc_act) weights yet; "
                         "the CPU backend can",
                         be->iface->name);
    enum llm_status st = be->iface->buf_alloc(be->ctx, &m->perms, total, e);
    size_t offs = 0;
    for (size_t i = 0; i < pl->n_mats && !st; i++) {
        const struct llm__gguf_tensor *src = pl->mats[i].src;
        if (!src->perm) continue;
        size_t at = offs;
        for (size_t k = 0; k < i && at == offs; k++)   // the same permutation as an earlier weight's
            if (pl->mats[k].src->perm && pl->mats[k].src->ne[0] == src->ne[0] &&
                (pl->mats[k].src->perm == src->perm ||
                 !memcmp(pl->mats[k].src->perm, src->perm, (size_t)src->ne[0] * 4)))
                at = pl->mats[k].dst->perm.offs;
        if (at == offs) {
            be->iface->upload(be->ctx, &m->perms, offs, src->perm, (size_t)src->ne[0] * 4);
            offs += ((size_t)src->ne[0] * 4 + 63) & ~(size_t)63;
        }
        pl->mats[i].dst->perm =
            (struct llm__tensor){ &m->perms, at, LLM__TYPE_I32, src->ne[0], 1, (size_t)src->ne[0] * 4 };
        m->max_perm = LLM__MAX(m->max_perm, src->ne[0]);
    }
    return st;
}

// --- quantization at load (llm_engine_params.quantize) ---

// The type a name gives (ggml's names, any case), or -1: a supported GGUF type.
static int llm__type_by_name(const char *name) {
    for (int t = 0; t < LLM__TYPE_COUNT; t++) {
        const struct llm__type_info *ti = llm__type_info((uint32_t)t);
        size_t k = 0;
        while (ti && ti->name[k] && tolower((unsigned char)ti->name[k]) == tolower((unsigned char)name[k])) k++;
        if (ti && ti->supported && !ti->internal && !ti->name[k] && !name[k]) return t;
    }
    return -1;
}

// llama-quantize's fallback for rows a K-quant's super-block does not divide.
int llm__quant_fallback(int type) {
    switch (type) {
    case LLM__TYPE_Q2_K: case LLM__TYPE_Q3_K: return LLM__TYPE_Q4_0;
    case LLM__TYPE_IQ4_XS: return LLM__TYPE_IQ4_NL;
    case LLM__TYPE_Q4_K: return LLM__TYPE_Q5_0;
    case LLM__TYPE_Q5_K: return LLM__TYPE_Q5_1;
    case LLM__TYPE_Q6_K: return LLM__TYPE_Q8_0;
    default: return type;
    }
}

void llm__quant_worker(void *arg, int ith, int nth) {
    struct llm__quant_job *job = arg;
    const struct llm__gguf_tensor *t = job->src;
    const int64_t n = t->ne[0];
    const size_t sb = llm__row_bytes((int)t->type, n), db = llm__row_bytes(job->type, n);
    int64_t r0, r1;
    llm__split(t->ne[1] * t->ne[2] * t->ne[3], ith, nth, &r0, &r1);
    float *tmp = malloc(sizeof(float) * (size_t)n * 2);
    if (!tmp) { job->fail = true; return; }
    for (int64_t r = r0; r < r1; r++) {
        llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)r * sb, tmp, n);
        if (t->perm)   // GPTQ act-order: column k holds input perm[k]
            for (int64_t k = 0; k < n; k++) tmp[n + t->perm[k]] = tmp[k];
        llm__quantize_row(job->type, t->perm ? tmp + n : tmp, (uint8_t *)job->dst + (size_t)r * db, n);
    }
    free(tmp);
}

// Every F32/F16/BF16 matrix of the model's file quantized to the type named `name` (see
// llm_engine_params.quantize), in place of the file's: the tensor then points to the new data
// (m->qbufs), and the mapped file's pages are given back.
enum llm_status llm__model_quantize(struct llm__model *m, const char *name, int n_threads, bool progress,
                                    struct llm__err *e) {
    const int type = llm__type_by_name(name);
    if (type < 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG,
                         "quantize: '%s' is not a weight type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, "
                         "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, f16, bf16, f32)",
                         name);
    struct llm__gguf *g = &m->gguf;
    if (!(m->qbufs = calloc((size_t)g->n_tensors + 1, sizeof(void *))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    struct llm__pool *pool = llm__pool_new(n_threads, e);
    if (!pool) return LLM_ERR_BACKEND;
    enum llm_status st = LLM_OK;
    size_t total = 0, done = 0;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int64_t i = 0; i < g->n_tensors && !st; i++) {
            struct llm__gguf_tensor *t = &g->tensors[i];
            // matrices and stacked experts, not a mixture of experts' router (as llama-quantize)
            if (t->n_dims < 2 || t->n_dims > 3 || strstr(t->name, "ffn_gate_inp.") ||
                (t->type != LLM__TYPE_F32 && t->type != LLM__TYPE_F16 && t->type != LLM__TYPE_BF16))
                continue;
            int tt = t->ne[0] % llm__type_info((uint32_t)type)->blck == 0 ? type : llm__quant_fallback(type);
            if (t->ne[0] % llm__type_info((uint32_t)tt)->blck != 0 || (uint32_t)tt == t->type) continue;
            if (pass == 0) { total += t->size; continue; }
            const size_t size = llm__row_bytes(tt, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            struct llm__quant_job job = {t, tt, llm__alloc(size), false};
            if (!job.dst) {
                st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory (%zu bytes for '%s')", size, t->name);
                break;
            }
            m->qbufs[m->n_qbufs++] = job.dst;
            llm__pool_run(pool, llm__quant_worker, &job);
            if (job.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
            // the old data's pages given back: a mapped file's, or a directory's copy (permuted or
            // aligned), which is freed too (its whole pages first: the allocator may keep them)
            if (g->owns_map || g->owns_buf) llm__map_release(t->data, t->size);
            if (g->extra_free == llm__hf_owned_free) {
                struct llm__hf_owned *o = g->extra;
                for (int64_t c = 0; c < o->n_copies; c++)
                    if (o->copies[c] == t->data) { free(o->copies[c]); o->copies[c] = NULL; break; }
            }
            done += t->size;
            t->type = (uint32_t)tt;
            t->data = job.dst;
            t->size = size;
            if (progress) fprintf(stderr, "\rllm: quantizing to %s %3d%%", llm__type_info((uint32_t)type)->name,
                                  (int)(100.0 * (double)done / (double)(total ? total : 1)));
        }
    if (progress) fprintf(stderr, "\r%40s\r", "");
    llm__pool_free(pool);
    return st;
}

// The matrices, into backend weights (weight_load: copied, repacked or borrowed from the map).
// progress: a percentage on stderr while they are taken in.
static enum llm_status llm__model_load_matrices(struct llm__model *m, struct llm_backend *be,
                                                const struct llm__model_plan *pl, bool progress, struct llm__err *e) {
    size_t total_bytes = 0, done_bytes = 0;
    int shown = -1;
    for (size_t i = 0; i < pl->n_mats; i++)
        total_bytes += (size_t)pl->mats[i].rows * llm__row_bytes((int)pl->mats[i].src->type, pl->mats[i].src->ne[0]);
    for (size_t i = 0; i < pl->n_mats; i++) {
        const struct llm__gguf_tensor *src = pl->mats[i].src;
        const size_t row_bytes = llm__row_bytes((int)src->type, src->ne[0]);
        const char *data = (const char *)src->data + (size_t)pl->mats[i].row0 * row_bytes;
        const size_t size = (size_t)pl->mats[i].rows * row_bytes;
        enum llm_status st =
            pl->mats[i].experts
                ? be->iface->weight_load_experts(be->ctx, pl->mats[i].dst, (int)src->type, src->ne[0],
                                                 pl->mats[i].rows, m->n_expert, data, e)
                : be->iface->weight_load(be->ctx, pl->mats[i].dst, (int)src->type, src->ne[0], pl->mats[i].rows,
                                         data, e);
        if (st) return st;
        if (!pl->mats[i].dst->buf.borrowed && (m->gguf.owns_map || m->gguf.owns_buf)) llm__map_release(data, size);
        done_bytes += size;
        int pct = (int)(100.0 * (double)done_bytes / (double)(total_bytes ? total_bytes : 1));
        if (progress && pct != shown) {
            fprintf(stderr, "\rllm: loading weights %3d%%", pct);
            shown = pct;
        }
    }
    if (progress) fprintf(stderr, "\r%40s\r", "");
    if (m->tied_output) m->output = m->tok_embd;
    return LLM_OK;
}

// Collects the 1-D parameters into one f32 backend buffer and the matrices into backend weights.
// progress: print a percentage to stderr while the weights are taken in (a terminal only).
enum llm_status llm__model_load_tensors(struct llm__model *m, struct llm_backend *be, bool progress,
                                        struct llm__err *e) {
    if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    const struct llm_backend_i *B = be->iface;
    bool windowed = m->attn_softcap > 0.0f;
    for (int l = 0; l < m->n_layer; l++) windowed |= m->layers[l].swa;
    const bool moe_ops = B->weight_load_experts && B->moe_route && B->matmul_id && B->moe_sum;
    const bool sinks = m->arch == LLM__ARCH_GPTOSS;
    const char *missing = m->embd_scale > 0.0f && !B->scale ? "scale" : m->gelu && !B->gelu_mul ? "gelu_mul"
                          : (windowed || sinks) && !B->attention_window ? "sliding-window or soft-capped attention"
                          : m->n_expert && !moe_ops ? "mixture-of-experts ops"
                          : m->swiglu_oai && !B->swiglu_oai ? "swiglu_oai"
                          : sinks && !B->attention_sinks ? "attention sinks"
                          : m->rope.ext_factor != 0.0f && !B->rope_yarn ? "YaRN RoPE"
                          : NULL;
    if (missing)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: the %s backend cannot run architecture '%s' yet (no %s); "
                         "the CPU backend can", B->name, m->arch_name, missing);
    struct llm__model_plan pl = {0};
    enum llm_status st = llm__model_plan(m, &pl, e);
    if (!st) st = llm__model_load_vectors(m, be, &pl, e);
    if (!st) st = llm__model_load_matrices(m, be, &pl, progress, e);
    if (!st) st = llm__model_load_perms(m, be, &pl, e);
    free(pl.vecs);
    free(pl.mats);
    return st;
}

// Bytes of weights one decode step reads: every matrix once (of a mixture of experts, the experts
// one token uses), the embedding table only as the output projection of a tied model (a lookup
// reads one row). The roofline of decode speed is
// memory bandwidth divided by this.
// (macs: the multiply-adds of those matrices, their elements, instead of their bytes)
static int64_t llm__model_per_token(const struct llm__model *m, bool macs) {
    int64_t n = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        const struct llm__gguf_tensor *t = &m->gguf.tensors[i];
        if (t->n_dims < 2) continue;
        if (strcmp(t->name, "token_embd.weight") == 0 && !m->tied_output) continue;
        int64_t x = macs ? 1 : (int64_t)t->size;
        for (int d = 0; macs && d < t->n_dims; d++) x *= t->ne[d];
        // a mixture of experts: a token reads its n_expert_used experts of the n_expert
        n += strstr(t->name, "_exps.") && m->n_expert ? x / m->n_expert * m->n_expert_used : x;
    }
    return n;
}

size_t llm__model_bytes_per_token(const struct llm__model *m) { return (size_t)llm__model_per_token(m, false); }

int64_t llm__model_macs_per_token(const struct llm__model *m) { return llm__model_per_token(m, true); }

void llm__model_free(struct llm__model *m, struct llm_backend *be) {
    if (be->iface) {
        if (m->layers) {
            for (int l = 0; l < m->n_layer; l++) {
                struct llm__layer *L = &m->layers[l];
                struct llm__weight *ws[] = {&L->wq,         &L->wk,        &L->wv,         &L->wo,
                                            &L->w_gate,     &L->w_up,      &L->w_down,     &L->gate_inp,
                                            &L->exp_gate,   &L->exp_up,    &L->exp_down,   &L->gate_inp_shexp,
                                            &L->shexp_gate, &L->shexp_up,  &L->shexp_down};
                for (size_t i = 0; i < LLM__ARRAY_LEN(ws); i++)
                    if (ws[i]->buf.data || ws[i]->buf.handle) be->iface->weight_free(be->ctx, ws[i]);
            }
        }
        if (!m->tied_output && (m->output.buf.data || m->output.buf.handle))
            be->iface->weight_free(be->ctx, &m->output);
        if (m->tok_embd.buf.data || m->tok_embd.buf.handle) be->iface->weight_free(be->ctx, &m->tok_embd);
        if (m->small.data || m->small.handle) be->iface->buf_free(be->ctx, &m->small);
        if (m->perms.data || m->perms.handle) be->iface->buf_free(be->ctx, &m->perms);
    }
    for (int64_t i = 0; i < m->n_qbufs; i++) free(m->qbufs[i]);
    free(m->qbufs);
    free(m->layers);
    llm__gguf_close(&m->gguf);
    memset(m, 0, sizeof(*m));
}

enum llm_status llm__acts_init(struct llm__acts *a, const struct llm__model *m, struct llm_backend *be,
                               int max_tokens, int max_out, struct llm__err *e) {
    size_t T = (size_t)max_tokens, off = 0;
    const size_t E = (size_t)m->n_embd, Q = (size_t)m->n_head * m->head_dim, KV = (size_t)m->n_head_kv * m->head_dim;
#define LLM__ALLOC(field, n) (a->field = off, off += (((n) * sizeof(float)) + 63) & ~(size_t)63)
    LLM__ALLOC(off_x, T * E);
    LLM__ALLOC(off_xb, T * E);
    LLM__ALLOC(off_q, T * Q);
    LLM__ALLOC(off_k, T * KV);
    LLM__ALLOC(off_v, T * KV);
    LLM__ALLOC(off_att, T * Q);
    LLM__ALLOC(off_xb2, T * E);
    const size_t F = (size_t)(m->n_expert ? m->n_ff_shexp : m->n_ff);   // (experts: the shared one's, if any)
    LLM__ALLOC(off_gate, T * F);
    LLM__ALLOC(off_up, T * F);
    LLM__ALLOC(off_xo, (size_t)max_out * E);
    LLM__ALLOC(off_logits, (size_t)max_out * (size_t)m->n_vocab);
    LLM__ALLOC(off_gather, T * (size_t)m->max_perm);
    const size_t TK = T * (size_t)m->n_expert_used;   // (0 without experts: empty regions)
    LLM__ALLOC(off_rlogits, T * (size_t)m->n_expert);
    LLM__ALLOC(off_ids, TK);
    LLM__ALLOC(off_wts, TK);
    LLM__ALLOC(off_egate, TK * (size_t)m->n_ff_exp);
    LLM__ALLOC(off_eup, TK * (size_t)m->n_ff_exp);
    LLM__ALLOC(off_edown, TK * E);
    LLM__ALLOC(off_shared, m->n_ff_shexp ? T * E : 0);
    LLM__ALLOC(off_sgate, m->n_ff_shexp ? T : 0);
#undef LLM__ALLOC
    a->max_tokens = max_tokens;
    a->max_out = max_out;
    return be->iface->buf_alloc(be->ctx, &a->buf, off, e);
}

// The products of n weights sharing input x: one matmul call for each run of weights with the same
// input permutation (act-order GPTQ), the input gathered into g first where they have one.
static void llm__forward_matmul(const struct llm_backend_i *B, void *ctx, int n, const struct llm__tensor *dst,
                                const struct llm__weight *const *w, const struct llm__tensor *bias,
                                struct llm__tensor x, struct llm__tensor g) {
    for (int j = 0, k; j < n; j = k) {
        const struct llm__tensor p = w[j]->perm;
        for (k = j + 1; k < n && w[k]->perm.buf == p.buf && (!p.buf || w[k]->perm.offs == p.offs); k++) {}
        struct llm__tensor in = x;
        if (p.buf) {
            assert(p.ne0 == x.ne0 && llm__is_gq(w[j]->type));
            in = (struct llm__tensor){g.buf, g.offs, LLM__TYPE_F32, x.ne0, x.ne1, (size_t)x.ne0 * sizeof(float)};
            B->gather_cols(ctx, in, x, p);
        }
        B->matmul(ctx, k - j, dst + j, w + j, bias ? bias + j : NULL, in);
    }
}

// One op of the forward, timed into prof when profiling (each op waited for: B->sync).
#define LLM__OP(cat, call)                                                          \
    do {                                                                            \
        double t0_ = prof ? llm__now() : 0.0;                                       \
        call;                                                                       \
        if (prof) {                                                                 \
            if (B->sync && (st = B->sync(ctx, e)) != LLM_OK) goto finish;           \
            prof->t[cat] += llm__now() - t0_;                                       \
        }                                                                           \
    } while (0)

// Layer L's MLP, from xb (its normed input) into xb2: the gated MLP, or a mixture of experts (the
// router's logits, each token's experts and weights, the experts' gated MLPs on the tokens routed
// to them, their weighted sum). Ops timed into prof as llm__forward's.
static enum llm_status llm__forward_mlp(const struct llm__model *m, const struct llm__layer *L, struct llm__acts *a,
                                        const struct llm_backend_i *B, void *ctx, int l, int T, struct llm__tensor xb,
                                        struct llm__tensor xb2, struct llm__tensor gx, struct llm__prof *prof,
                                        struct llm__err *e) {
    enum llm_status st = LLM_OK;
    if (!m->n_expert) {
        struct llm__tensor gate = llm__vec_view(&a->buf, a->off_gate, m->n_ff, T);
        struct llm__tensor up = llm__vec_view(&a->buf, a->off_up, m->n_ff, T);
        const struct llm__tensor gu[2] = {gate, up};
        const struct llm__weight *wgu[2] = {&L->w_gate, &L->w_up};
        if (m->capture) m->capture(m->capture_ctx, l, LLM__CAL_FFN_IN, xb);
        LLM__OP(LLM_PROF_MLP_UP, llm__forward_matmul(B, ctx, 2, gu, wgu, NULL, xb, gx));
        if (m->gelu) LLM__OP(LLM_PROF_SILU, B->gelu_mul(ctx, gate, gate, up));
        else LLM__OP(LLM_PROF_SILU, B->silu_mul(ctx, gate, gate, up));
        const struct llm__weight *wd[1] = {&L->w_down};
        if (m->capture) m->capture(m->capture_ctx, l, LLM__CAL_FFN_ACT, gate);
        LLM__OP(LLM_PROF_MLP_DOWN, llm__forward_matmul(B, ctx, 1, &xb2, wd, NULL, gate, gx));
        return st;
    }
    const int K = m->n_expert_used;
    const int64_t TK = (int64_t)T * K;
    const struct llm__tensor rl = llm__vec_view(&a->buf, a->off_rlogits, m->n_expert, T);
    const struct llm__tensor ids = {&a->buf, a->off_ids, LLM__TYPE_I32, K, T, (size_t)K * sizeof(int32_t)};
    const struct llm__tensor wts = llm__vec_view(&a->buf, a->off_wts, K, T);
    const struct llm__tensor eg = llm__vec_view(&a->buf, a->off_egate, m->n_ff_exp, TK);
    const struct llm__tensor eu = llm__vec_view(&a->buf, a->off_eup, m->n_ff_exp, TK);
    const struct llm__tensor ed = llm__vec_view(&a->buf, a->off_edown, m->n_embd, TK);
    const struct llm__tensor egu[2] = {eg, eu};
    const struct llm__weight *wr[1] = {&L->gate_inp}, *wgu[2] = {&L->exp_gate, &L->exp_up}, *wd[1] = {&L->exp_down};
    // (biases: gpt-oss's; without them no buffer, none added)
    const struct llm__tensor bgu[2] = {L->exp_gate_b, L->exp_up_b};
    LLM__OP(LLM_PROF_MLP_UP, llm__forward_matmul(B, ctx, 1, &rl, wr, &L->gate_inp_b, xb, gx);
                             B->moe_route(ctx, ids, wts, rl, &m->moe);
                             B->matmul_id(ctx, 2, egu, wgu, bgu, xb, ids, false));
    if (m->swiglu_oai) LLM__OP(LLM_PROF_SILU, B->swiglu_oai(ctx, eg, eg, eu, 1.702f, 7.0f));   // (llama.cpp's)
    else LLM__OP(LLM_PROF_SILU, B->silu_mul(ctx, eg, eg, eu));
    LLM__OP(LLM_PROF_MLP_DOWN, B->matmul_id(ctx, 1, &ed, wd, &L->exp_down_b, eg, ids, true));
    struct llm__tensor sh = {0}, sg = {0};
    if (m->n_ff_shexp) {   // the shared expert, on every token, and its gate's logit
        const struct llm__tensor g = llm__vec_view(&a->buf, a->off_gate, m->n_ff_shexp, T);
        const struct llm__tensor u = llm__vec_view(&a->buf, a->off_up, m->n_ff_shexp, T), su[2] = {g, u};
        const struct llm__weight *ws[2] = {&L->shexp_gate, &L->shexp_up}, *wsd[1] = {&L->shexp_down},
                                 *wsg[1] = {&L->gate_inp_shexp};
        sh = llm__vec_view(&a->buf, a->off_shared, m->n_embd, T);
        sg = llm__vec_view(&a->buf, a->off_sgate, 1, T);
        LLM__OP(LLM_PROF_MLP_UP, llm__forward_matmul(B, ctx, 2, su, ws, NULL, xb, gx));
        LLM__OP(LLM_PROF_SILU, B->silu_mul(ctx, g, g, u));
        LLM__OP(LLM_PROF_MLP_DOWN, llm__forward_matmul(B, ctx, 1, &sh, wsd, NULL, g, gx);
                                   llm__forward_matmul(B, ctx, 1, &sg, wsg, NULL, xb, gx));
    }
    LLM__OP(LLM_PROF_MLP_DOWN, B->moe_sum(ctx, xb2, ed, wts, sh, sg));
finish:
    return st;
}

// Runs the model over one step; logits (n_out rows of n_vocab) are copied to host memory. With
// prof, each op is timed (a backend whose ops run asynchronously is synchronized after each; a
// failure there ends the step early and is returned).
enum llm_status llm__forward(const struct llm__model *m, struct llm_backend *be, struct llm__acts *a,
                             const struct llm__tensor *k_cache, const struct llm__tensor *v_cache,
                             const struct llm__step *s, float *logits, struct llm__prof *prof,
                             struct llm__err *e) {
    const struct llm_backend_i *B = be->iface;
    void *ctx = be->ctx;
    enum llm_status st = LLM_OK;
    _Static_assert(LLM__MAX_MATMUL_WEIGHTS >= 3, "the q/k/v projections share one matmul call");
    const int T = s->n_tokens, E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    assert(T >= 1 && T <= a->max_tokens && s->n_out <= a->max_out);
    struct llm__tensor x = llm__vec_view(&a->buf, a->off_x, E, T);
    struct llm__tensor xb = llm__vec_view(&a->buf, a->off_xb, E, T);
    struct llm__tensor q = llm__vec_view(&a->buf, a->off_q, Q, T);
    struct llm__tensor k = llm__vec_view(&a->buf, a->off_k, KV, T);
    struct llm__tensor v = llm__vec_view(&a->buf, a->off_v, KV, T);
    struct llm__tensor att = llm__vec_view(&a->buf, a->off_att, Q, T);
    struct llm__tensor xb2 = llm__vec_view(&a->buf, a->off_xb2, E, T);
    struct llm__tensor xo = llm__vec_view(&a->buf, a->off_xo, E, s->n_out);
    struct llm__tensor lg = llm__vec_view(&a->buf, a->off_logits, m->n_vocab, s->n_out);
    const struct llm__tensor gx = llm__vec_view(&a->buf, a->off_gather, m->max_perm, T);
    struct llm__attn ap = {m->n_head, m->n_head_kv, m->head_dim, m->attn_scale, 0, m->attn_softcap, {0}};
    struct llm__attn ap_swa = ap;
    ap_swa.window = m->n_swa;
    // q and k as one row per head, (head_dim, T * heads), for the per-head norms
    const struct llm__tensor qh = llm__vec_view(&a->buf, a->off_q, m->head_dim, (int64_t)T * m->n_head);
    const struct llm__tensor kh = llm__vec_view(&a->buf, a->off_k, m->head_dim, (int64_t)T * m->n_head_kv);

    B->begin_step(ctx, s);
    LLM__OP(LLM_PROF_EMBED, B->embed(ctx, x, &m->tok_embd));
    if (m->embd_scale > 0.0f) LLM__OP(LLM_PROF_EMBED, B->scale(ctx, x, x, m->embd_scale));
    for (int l = 0; l < m->n_layer; l++) {
        const struct llm__layer *L = &m->layers[l];
        const struct llm__rope *rope = L->swa ? &m->rope_swa : &m->rope;
        LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb, x, L->attn_norm, m->norm_eps));
        const struct llm__tensor qkv[3] = {q, k, v}, bqkv[3] = {L->bq, L->bk, L->bv};
        const struct llm__weight *wqkv[3] = {&L->wq, &L->wk, &L->wv};
        if (m->capture) m->capture(m->capture_ctx, l, LLM__CAL_ATTN_IN, xb);
        LLM__OP(LLM_PROF_QKV, llm__forward_matmul(B, ctx, 3, qkv, wqkv, bqkv, xb, gx));
        if (m->qk_norm)
            LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, qh, qh, L->q_norm, m->norm_eps);
                                    B->rmsnorm(ctx, kh, kh, L->k_norm, m->norm_eps));
        if (m->qk_norm_full)
            LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, q, q, L->q_norm, m->norm_eps);
                                    B->rmsnorm(ctx, k, k, L->k_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ROPE, B->rope(ctx, q, m->n_head, m->head_dim, rope);
                                B->rope(ctx, k, m->n_head_kv, m->head_dim, rope));
        LLM__OP(LLM_PROF_KV_STORE, B->kv_store(ctx, k_cache[l], v_cache[l], k, v));
        ap.sinks = ap_swa.sinks = L->sinks;   // (gpt-oss's; no buffer: none)
        if (L->swa || m->attn_softcap > 0.0f || L->sinks.buf)
            LLM__OP(LLM_PROF_ATTN, B->attention_window(ctx, att, q, k_cache[l], v_cache[l], L->swa ? &ap_swa : &ap));
        else
            LLM__OP(LLM_PROF_ATTN, B->attention(ctx, att, q, k_cache[l], v_cache[l], &ap));
        const struct llm__weight *wo[1] = {&L->wo};
        if (m->capture) m->capture(m->capture_ctx, l, LLM__CAL_ATTN_OUT, att);
        LLM__OP(LLM_PROF_O_PROJ, llm__forward_matmul(B, ctx, 1, &xb2, wo, &L->bo, att, gx));
        if (m->post_norms) LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb2, xb2, L->attn_post_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ADD, B->add(ctx, x, x, xb2));
        LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb, x, L->ffn_norm, m->norm_eps));
        if ((st = llm__forward_mlp(m, L, a, B, ctx, l, T, xb, xb2, gx, prof, e)) != LLM_OK) goto finish;
        if (m->post_norms) LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb2, xb2, L->ffn_post_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ADD, B->add(ctx, x, x, xb2));
    }
    if (s->n_out > 0) {
        const struct llm__weight *wout[1] = {&m->output};
        LLM__OP(LLM_PROF_LOGITS, B->get_rows(ctx, xo, x);
                                  B->rmsnorm(ctx, xo, xo, m->output_norm, m->norm_eps);
                                  llm__forward_matmul(B, ctx, 1, &lg, wout, NULL, xo, gx));
    }
#undef LLM__OP
finish:
    if (st != LLM_OK) {   // a failed sync: the step is still ended; its error is the one returned
        struct llm__err ignored;
        B->end_step(ctx, &ignored);
        return st;
    }
    st = B->end_step(ctx, e);
    if (st == LLM_OK && s->n_out > 0) {
        const size_t n = (size_t)s->n_out * (size_t)m->n_vocab;
        B->download(ctx, &a->buf, a->off_logits, logits, n * sizeof(float));
        if (m->final_softcap > 0.0f) {   // gemma2: cap * tanh(logit / cap), on the host for every backend
            const float cap = m->final_softcap, inv = 1.0f / cap;
            for (size_t i = 0; i < n; i++) logits[i] = tanhf(logits[i] * inv) * cap;
        }
    }
    return st;
}
