// gen_model: writes a random-weight GGUF model of a real model's shape, with the tokenizer of a
// real vocabulary file (or a synthetic one), that llama.cpp loads. Test models for llm.c of any size without a
// download:
//
//   gen_model --shape tiny --type q4_k_m --vocab ~/.cache/llm.c-tests/vocab/ggml-vocab-llama-spm.gguf
//             --seed 1 -o tiny-q4_k_m.gguf [--layers N] [--ctx N] [--threads N]
//
// Every tokenizer.* key is copied from the vocabulary file; the vocabulary size is its token
// count. 1-D tensors (norms, biases, rope_freqs) are F32; the 2-D weights all get --type, except
// in the q4_k_m / q5_k_m / q3_k_m / q2_k_m mixes, which follow llama.cpp's Q4_K_M / Q5_K_M /
// Q3_K_M / Q2_K rules. Weights are generated and quantized row by row by a few threads and
// streamed to disk, so multi-GB models need little memory (about 20 MB). The output depends only
// on the arguments, not on the thread count (each row has its own random stream, seeded by seed,
// tensor name and row).
#include "../llm.c"
#include "gguf_writer.h"

// --- model shapes, with ggml/GGUF's names ---

struct gm_shape {
    const char *name, *arch;
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    float rope_base, eps;
    bool tied;         // no output.weight: the output projection is token_embd.weight
    bool qkv_bias;     // blk.N.attn_{q,k,v}.bias (qwen2)
    bool rope_freqs;   // rope_freqs.weight: Llama 3.1 RoPE scaling factors
    // the other architectures (zero: as llama)
    int head_dim;      // attention.key_length / value_length; 0: n_embd / n_head (not written)
    bool qk_norm;      // blk.N.attn_{q,k}_norm.weight, (head_dim) (qwen3, gemma3)
    bool post_norms;   // blk.N.post_attention_norm / post_ffw_norm.weight (gemma2, gemma3)
    bool fused;        // blk.N.attn_qkv.weight and a gate+up ffn_up.weight (phi3)
    int window;        // attention.sliding_window; 0: not written
    float attn_softcap, final_softcap;   // attn_logit_softcapping, final_logit_softcapping; 0: not written
    // a mixture of experts in every layer (0: a dense MLP): expert_count, expert_used_count,
    // expert_feed_forward_length (0: not written; Mixtral, llama with experts, uses n_ff)
    int n_expert, n_expert_used, n_ff_exp;
};

// Tiny shapes of the newer architectures keep a window of 8 tokens, so that the test prompts
// (about 20 tokens, 32 more generated) reach past it; tiny-gemma3 has the 6 layers of one
// local/global period (layers 0-4 local, 5 global), tiny-gemma2 the 2 of its period (0 local,
// 1 global), and caps low enough (attention 5, logits 8) that soft-capping changes the result.
static const struct gm_shape gm_shapes[] = {
    {"tiny", "llama", 256, 2, 8, 2, 768, 512, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"tiny-qwen2", "qwen2", 256, 2, 8, 2, 768, 512, 1e6f, 1e-6f, false, true, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"tiny-llama3", "llama", 256, 2, 4, 1, 768, 512, 5e5f, 1e-5f, true, false, true, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"tiny-qwen3", "qwen3", 256, 2, 4, 2, 768, 512, 1e6f, 1e-6f, true, false, false, 96, true, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"tiny-gemma3", "gemma3", 256, 6, 4, 1, 768, 512, 1e6f, 1e-6f, true, false, false, 128, true, true, false, 8, 0.0f, 0.0f, 0, 0, 0},
    {"tiny-gemma2", "gemma2", 256, 2, 4, 2, 768, 512, 10000.0f, 1e-6f, true, false, false, 64, false, true, false, 8, 5.0f, 8.0f, 0, 0, 0},
    {"tiny-phi3", "phi3", 256, 2, 8, 4, 768, 512, 10000.0f, 1e-5f, false, false, false, 0, false, false, true, 0, 0.0f, 0.0f, 0, 0, 0},
    // SmolLM2-135M's layer shape (rows of 576: not a multiple of 256, so k-quant files fall back
    // to block-32 types as llama.cpp's do) with two layers
    {"tiny-576", "llama", 576, 2, 9, 3, 1536, 512, 100000.0f, 1e-5f, true, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    // a few KB of weights: the seed models of the fuzzers (tests/fuzz/), fast to run under ASan
    {"micro", "llama", 32, 1, 2, 1, 64, 256, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"micro-qwen2", "qwen2", 32, 1, 2, 1, 64, 256, 1e6f, 1e-6f, true, true, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    // the smallest shape whose rows are whole 256-element super-blocks: llama-quantize's outputs of
    // it are committed (tests/models/), so they must be small
    {"nano-k", "llama", 256, 1, 4, 1, 256, 256, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    // eight layers of whole super-blocks with 4 query heads a KV head: every rule of llama-quantize's
    // mixes (layers 0, 3, 6, 7 of 8 get more bits in the _M types) shows (tests/golden/quantize_mix.txt)
    {"nano-k8", "llama", 256, 8, 4, 1, 256, 256, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 2048, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"llama-2-7b", "llama", 4096, 32, 32, 32, 11008, 4096, 10000.0f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"qwen2-0.5b", "qwen2", 896, 24, 14, 2, 4864, 32768, 1e6f, 1e-6f, true, true, false, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 131072, 5e5f, 1e-5f, true, false, true, 0, false, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    // real shapes of the newer architectures (for benchmarks), as their config.json files say
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 40960, 1e6f, 1e-6f, true, false, false, 128, true, false, false, 0, 0.0f, 0.0f, 0, 0, 0},
    {"gemma3-270m", "gemma3", 640, 18, 4, 1, 2048, 32768, 1e6f, 1e-6f, true, false, false, 256, true, true, false, 512, 0.0f, 0.0f, 0, 0, 0},
    {"gemma2-2b", "gemma2", 2304, 26, 8, 4, 9216, 8192, 10000.0f, 1e-6f, true, false, false, 256, false, true, false, 4096, 50.0f, 30.0f, 0, 0, 0},
    {"phi3-mini", "phi3", 3072, 32, 32, 32, 8192, 4096, 10000.0f, 1e-5f, false, false, false, 0, false, false, true, 0, 0.0f, 0.0f, 0, 0, 0},
    // mixtures of experts: tiny ones for the tests (qwen3moe: 8 experts of which 2 a token; Mixtral's,
    // llama with experts of n_ff: 4 of which 2), rows of 256 for the k-quants, and for the benchmarks Qwen3-30B-A3B's layer (2048 wide, 32
    // heads of 128, 4 KV heads, experts of 768) with 32 experts, 8 a token, in 24 layers (~4.1 B
    // parameters, ~1.2 B of them a token's: fits 8 GB at Q8_0)
    {"tiny-qwen3moe", "qwen3moe", 256, 2, 4, 2, 768, 512, 1e6f, 1e-6f, true, false, false, 96, true, false, false, 0, 0.0f,
     0.0f, 8, 2, 256},
    {"tiny-mixtral", "llama", 256, 2, 8, 2, 256, 512, 1e6f, 1e-5f, false, false, false, 0, false, false, false, 0, 0.0f,
     0.0f, 4, 2, 0},
    // qwen2moe: qwen2's attention (biases), 8 experts of 256, 2 a token, and a shared expert of n_ff
    {"tiny-qwen2moe", "qwen2moe", 256, 2, 8, 2, 512, 512, 1e6f, 1e-6f, false, true, false, 0, false, false, false, 0, 0.0f,
     0.0f, 8, 2, 256},
    {"qwen3moe-4b-a1b", "qwen3moe", 2048, 24, 32, 4, 6144, 40960, 1e6f, 1e-6f, false, false, false, 128, true, false, false,
     0, 0.0f, 0.0f, 32, 8, 768},
    // gpt-oss (the architecture sets the rest: biases on o, the router and the experts, sinks,
    // YaRN of factor 32 over 4096 positions, the MLP's norm named post_attention_norm): heads of
    // 64, a window of 8 on even layers, 8 experts of 256, 2 a token; and for the benchmarks
    // gpt-oss-20b's layer (2880 wide, 64 heads, 8 KV heads, 32 experts of 2880, 4 a token, window
    // 128) in 24 layers, 32 experts as the real model: its 21 B parameters, 3.6 B a token's
    {"tiny-gpt-oss", "gpt-oss", 256, 2, 4, 2, 256, 512, 150000.0f, 1e-5f, false, true, false, 64, false, false, false, 8,
     0.0f, 0.0f, 8, 2, 256},
    // olmoe: q/k norms over all heads, 8 experts of n_ff (256), 2 a token
    {"tiny-olmoe", "olmoe", 256, 2, 4, 4, 256, 512, 10000.0f, 1e-5f, false, false, false, 0, true, false, false, 0, 0.0f,
     0.0f, 8, 2, 0},
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 131072, 150000.0f, 1e-5f, false, true, false, 64, false, false,
     false, 128, 0.0f, 0.0f, 32, 4, 2880},
};

// --- weight types: llama.cpp's file types ---

struct gm_ftype {
    const char *name;
    int type;          // of the 2-D weights
    int llama_ftype;   // general.file_type (llama.cpp's LLAMA_FTYPE_*)
    bool k_mix;        // Q4_K_M / Q5_K_M: some tensors get more bits (llama.cpp's rule)
};

static const struct gm_ftype gm_ftypes[] = {
    {"f32", LLM__TYPE_F32, 0, false},
    {"f16", LLM__TYPE_F16, 1, false},
    {"bf16", LLM__TYPE_BF16, 32, false},
    {"q8_0", LLM__TYPE_Q8_0, 7, false},
    {"q4_0", LLM__TYPE_Q4_0, 2, false},
    {"q4_1", LLM__TYPE_Q4_1, 3, false},
    {"q5_0", LLM__TYPE_Q5_0, 8, false},
    {"q5_1", LLM__TYPE_Q5_1, 9, false},
    {"iq4_nl", LLM__TYPE_IQ4_NL, 25, false},
    {"q4_k", LLM__TYPE_Q4_K, 14, false},   // all Q4_K ("pure"); labelled Q4_K_S, the nearest
    {"q5_k", LLM__TYPE_Q5_K, 16, false},   // all Q5_K; labelled Q5_K_S
    {"q6_k", LLM__TYPE_Q6_K, 18, false},
    {"q4_k_m", LLM__TYPE_Q4_K, 15, true},
    {"q5_k_m", LLM__TYPE_Q5_K, 17, true},
    {"q3_k", LLM__TYPE_Q3_K, 11, false},   // all Q3_K; labelled Q3_K_S
    {"q2_k", LLM__TYPE_Q2_K, 10, false},   // all Q2_K; labelled Q2_K (which is a mix in llama.cpp: q2_k_m)
    {"iq4_xs", LLM__TYPE_IQ4_XS, 30, false},
    {"q3_k_m", LLM__TYPE_Q3_K, 12, true},
    {"q2_k_m", LLM__TYPE_Q2_K, 10, true},   // llama.cpp's Q2_K file type
    // llama.cpp's MXFP4_MOE: the experts MXFP4, every other matrix Q8_0 (llama_tensor_get_type)
    {"mxfp4", LLM__TYPE_MXFP4, 38, false},
};

// llama.cpp's choice of layers that get more bits in the _M mixes: the first and last eighth
// and every third layer in between.
static bool gm_use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

// --- random numbers ---

static uint64_t gm_fnv1a(const char *s) {   // a tensor's seed from its name (FNV-1a)
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t gm_mix(uint64_t z) {   // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Approximately standard normal: the sum of four 16-bit uniforms from one splitmix64 step,
// centred and scaled to unit variance (Irwin-Hall, bell-shaped, tails cut at +-3.46).
// Ten times cheaper than Box-Muller, which matters at billions of weights; random test
// weights need no exact Gaussian.
static float gm_normal(uint64_t *s) {
    uint64_t r = gm_mix(*s += 0x9E3779B97F4A7C15ull);
    uint32_t sum = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) +
                   (uint32_t)((r >> 32) & 0xffff) + (uint32_t)(r >> 48);
    // sum has mean 4 * 32767.5 and variance 4 * (65536^2 - 1) / 12
    return ((float)sum - 131070.0f) * (1.0f / 37837.23f);
}

// --- the tensors of a model ---

enum gm_fill { GM_NORMAL, GM_ROPE_FREQS };

struct gm_tensor {
    char name[64];
    int type, n_dims;
    int64_t ne[4];
    enum gm_fill fill;
    float mean, std;   // GM_NORMAL: mean + std * normal
};

struct gm_model {
    const struct gm_shape *s;
    const struct gm_ftype *ft;
    int n_layer, n_ctx, n_vocab, head_dim;
    struct gm_tensor *t;
    int n_t;
    const char *pre;   // tokenizer.ggml.pre to write instead of the vocabulary's, or NULL
};

// llama.cpp's Q3_K_M and Q2_K mixes (llama_tensor_get_type, non-MoE, not Falcon): the output
// projection Q6_K; attn_v Q5_K in the first two layers then Q4_K (Q3_K_M), Q4_K with 4 or more
// query heads per KV head else Q3_K (Q2_K); ffn_down Q5_K in the first sixteenth of the layers
// then Q4_K (Q3_K_M), Q3_K (Q2_K); attn_output Q4_K (Q3_K_M), Q3_K (Q2_K).
static int gm_low_k_mix_type(const struct gm_model *m, const char *role, int layer, int64_t ne0) {
    const bool q3 = m->ft->type == LLM__TYPE_Q3_K;
    if (strcmp(role, "output") == 0 || (m->s->tied && strcmp(role, "token_embd") == 0))
        return ne0 % 256 == 0 ? LLM__TYPE_Q6_K : LLM__TYPE_Q8_0;
    if (strcmp(role, "attn_v") == 0)
        return q3 ? (layer < 2 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K)
                  : (m->s->n_head >= 4 * m->s->n_head_kv ? LLM__TYPE_Q4_K : LLM__TYPE_Q3_K);
    if (strcmp(role, "ffn_down") == 0) return q3 ? (layer < m->n_layer / 16 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K) : LLM__TYPE_Q3_K;
    if (strcmp(role, "attn_output") == 0) return q3 ? LLM__TYPE_Q4_K : LLM__TYPE_Q3_K;
    return m->ft->type;
}

// llama.cpp's type for rows that are not a multiple of a k-quant's block of 256
// (tensor_type_fallback in llama-quant.cpp): a block-32 type of about as many bits.
static int gm_fallback_type(int type) {
    switch (type) {
    case LLM__TYPE_Q2_K: case LLM__TYPE_Q3_K: return LLM__TYPE_Q4_0;
    case LLM__TYPE_IQ4_XS: return LLM__TYPE_IQ4_NL;
    case LLM__TYPE_Q4_K: return LLM__TYPE_Q5_0;
    case LLM__TYPE_Q5_K: return LLM__TYPE_Q5_1;
    case LLM__TYPE_Q6_K: return LLM__TYPE_Q8_0;
    default: return type;   // a block-32 type has nothing smaller: F16 below
    }
}

// The type of a 2-D weight under the file type, as llama.cpp's quantizer picks it, then the
// fallback for rows that are not a multiple of the type's block, as llama-quantize falls back
// (gm_fallback_type, then F16 if that does not fit either), reported on stderr.
static int gm_pick_type(const struct gm_model *m, const char *name, const char *role, int layer,
                        int64_t ne0) {
    int type = m->ft->type;
    if (type == LLM__TYPE_MXFP4 && !strstr(role, "_exps")) type = LLM__TYPE_Q8_0;
    if (m->ft->k_mix && (type == LLM__TYPE_Q3_K || type == LLM__TYPE_Q2_K)) {
        type = gm_low_k_mix_type(m, role, layer, ne0);
    } else if (m->ft->k_mix) {
        bool is_output = strcmp(role, "output") == 0 || (m->s->tied && strcmp(role, "token_embd") == 0);
        if (is_output)
            type = ne0 % 256 == 0 ? LLM__TYPE_Q6_K : LLM__TYPE_Q8_0;
        else if ((strcmp(role, "attn_v") == 0 || strcmp(role, "ffn_down") == 0) &&
                 gm_use_more_bits(layer, m->n_layer))
            type = LLM__TYPE_Q6_K;
    }
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    if (ne0 % ti->blck != 0) {
        int fallback = gm_fallback_type(type);
        if (ne0 % llm__type_info((uint32_t)fallback)->blck != 0) fallback = LLM__TYPE_F16;
        fprintf(stderr, "gen_model: %s: rows of %lld are not a multiple of %s's block of %d, "
                "using %s\n", name, (long long)ne0, ti->name, (int)ti->blck,
                llm__type_info((uint32_t)fallback)->name);
        type = fallback;
    }
    return type;
}

static struct gm_tensor *gm_add(struct gm_model *m, const char *role, int layer, const char *suffix,
                                int n_dims, int64_t ne0, int64_t ne1, enum gm_fill fill, float mean, float std) {
    struct gm_tensor *t = &m->t[m->n_t++];
    if (layer >= 0) snprintf(t->name, sizeof(t->name), "blk.%d.%s.%s", layer, role, suffix);
    else snprintf(t->name, sizeof(t->name), "%s.%s", role, suffix);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims > 1 ? ne1 : 1;
    t->ne[2] = t->ne[3] = 1;
    // (the router of a mixture of experts stays F32, as llama-quantize leaves it)
    // (and the experts' biases, 2-D, are F32 too)
    t->type = n_dims == 1 || !strcmp(role, "ffn_gate_inp") || !strcmp(suffix, "bias") ? LLM__TYPE_F32
                                                                                      : gm_pick_type(m, t->name, role, layer, ne0);
    t->fill = fill;
    t->mean = mean;
    t->std = std;
    return t;
}

// A layer's experts, stacked: n_expert matrices of rows x cols ([cols, rows, n_expert]).
static void gm_add_experts(struct gm_model *m, const char *role, int layer, int64_t cols, int64_t rows) {
    struct gm_tensor *t = gm_add(m, role, layer, "weight", 2, cols, rows, GM_NORMAL, 0, 1.0f / sqrtf((float)cols));
    t->n_dims = 3;
    t->ne[2] = m->s->n_expert;
}

// Scales. Inputs to every matmul are RMS-normalized (unit RMS), so a weight with std
// gain/sqrt(fan_in) gives outputs of RMS ~gain. Q and K get gain 1.5 each, so attention scores
// have std ~2 and attention is peaked enough for the context to matter. Embeddings and the
// output projection have std 1/sqrt(n_embd) and output_norm.weight ~2, so logits have std ~2:
// distributions are far from flat, yet a small change of the hidden state (8-bit rounding of an
// activation) moves log-probabilities by little, so engines can be compared closely. The scale
// sits in the norm rather than in the projection because tied shapes use the embedding as the
// projection: with embeddings of RMS 1/sqrt(n_embd), the last token's own embedding is small
// next to what the layers add to the residual stream, so its own logit gets no large bonus
// and the output does not just repeat the input token (it did with embeddings of std ~1).
static void gm_plan(struct gm_model *m) {
    const struct gm_shape *s = m->s;
    int64_t d = s->n_embd, q = (int64_t)s->n_head * m->head_dim, kv = (int64_t)s->n_head_kv * m->head_dim;
    float emb_std = 1.0f / sqrtf((float)d), out_gain = 2.0f;
    // Gemma multiplies embeddings by sqrt(n_embd) (its models have post-norms): embeddings of std
    // 1/n_embd keep the scaled ones at RMS 1/sqrt(n_embd) as above, and output_norm.weight
    // ~2 sqrt(n_embd) gives the tied projection logits of std ~2 again.
    if (s->post_norms) emb_std = 1.0f / (float)d, out_gain = 2.0f * sqrtf((float)d);
    const bool oss = !strcmp(s->arch, "gpt-oss");
    m->t = calloc((size_t)(m->n_layer * 24 + 4), sizeof(*m->t));
    if (!m->t) abort();
    gm_add(m, "token_embd", -1, "weight", 2, d, m->n_vocab, GM_NORMAL, 0, emb_std);
    if (s->rope_freqs) gm_add(m, "rope_freqs", -1, "weight", 1, m->head_dim / 2, 1, GM_ROPE_FREQS, 0, 0);
    for (int l = 0; l < m->n_layer; l++) {
        gm_add(m, "attn_norm", l, "weight", 1, d, 1, GM_NORMAL, 1.0f, 0.1f);
        if (s->fused) {   // phi3: q, k, v rows in one matrix (q and k at gain 1.5, as below; v at 1)
            gm_add(m, "attn_qkv", l, "weight", 2, d, q + 2 * kv, GM_NORMAL, 0, 1.25f / sqrtf((float)d));
        } else {
            gm_add(m, "attn_q", l, "weight", 2, d, q, GM_NORMAL, 0, 1.5f / sqrtf((float)d));
            if (s->qkv_bias) gm_add(m, "attn_q", l, "bias", 1, q, 1, GM_NORMAL, 0, 0.2f);
            gm_add(m, "attn_k", l, "weight", 2, d, kv, GM_NORMAL, 0, 1.5f / sqrtf((float)d));
            if (s->qkv_bias) gm_add(m, "attn_k", l, "bias", 1, kv, 1, GM_NORMAL, 0, 0.2f);
            gm_add(m, "attn_v", l, "weight", 2, d, kv, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
            if (s->qkv_bias) gm_add(m, "attn_v", l, "bias", 1, kv, 1, GM_NORMAL, 0, 0.2f);
        }
        if (s->qk_norm) {   // q and k come out of these at unit RMS per head (olmoe: per token); gain 1.5 as above
            const bool full = !strcmp(s->arch, "olmoe");
            gm_add(m, "attn_q_norm", l, "weight", 1, full ? q : m->head_dim, 1, GM_NORMAL, 1.5f, 0.15f);
            gm_add(m, "attn_k_norm", l, "weight", 1, full ? kv : m->head_dim, 1, GM_NORMAL, 1.5f, 0.15f);
        }
        gm_add(m, "attn_output", l, "weight", 2, q, d, GM_NORMAL, 0, 1.0f / sqrtf((float)q));
        if (oss) {   // the output's bias, a sink logit per head
            gm_add(m, "attn_output", l, "bias", 1, d, 1, GM_NORMAL, 0, 0.2f);
            gm_add(m, "attn_sinks", l, "weight", 1, s->n_head, 1, GM_NORMAL, 0, 1.0f);
        }
        if (s->post_norms) gm_add(m, "post_attention_norm", l, "weight", 1, d, 1, GM_NORMAL, 1.0f, 0.1f);
        gm_add(m, oss ? "post_attention_norm" : "ffn_norm", l, "weight", 1, d, 1, GM_NORMAL, 1.0f, 0.1f);
        if (s->n_expert) {   // the router (logits of std ~1), the experts
            const int64_t f = s->n_ff_exp ? s->n_ff_exp : s->n_ff;
            gm_add(m, "ffn_gate_inp", l, "weight", 2, d, s->n_expert, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
            if (oss) gm_add(m, "ffn_gate_inp", l, "bias", 1, s->n_expert, 1, GM_NORMAL, 0, 0.5f);
            gm_add_experts(m, "ffn_gate_exps", l, d, f);
            gm_add_experts(m, "ffn_up_exps", l, d, f);
            gm_add_experts(m, "ffn_down_exps", l, f, d);
            if (oss) {   // each expert's biases, a row per expert
                gm_add(m, "ffn_gate_exps", l, "bias", 2, f, s->n_expert, GM_NORMAL, 0, 0.2f);
                gm_add(m, "ffn_up_exps", l, "bias", 2, f, s->n_expert, GM_NORMAL, 0, 0.2f);
                gm_add(m, "ffn_down_exps", l, "bias", 2, d, s->n_expert, GM_NORMAL, 0, 0.2f);
            }
            if (!strcmp(s->arch, "qwen2moe")) {   // the shared expert (n_ff long) and its gate (a vector)
                gm_add(m, "ffn_gate_inp_shexp", l, "weight", 1, d, 1, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
                gm_add(m, "ffn_gate_shexp", l, "weight", 2, d, s->n_ff, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
                gm_add(m, "ffn_up_shexp", l, "weight", 2, d, s->n_ff, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
                gm_add(m, "ffn_down_shexp", l, "weight", 2, s->n_ff, d, GM_NORMAL, 0, 1.0f / sqrtf((float)s->n_ff));
            }
        } else if (s->fused) {   // phi3: gate rows, then up rows
            gm_add(m, "ffn_up", l, "weight", 2, d, 2 * (int64_t)s->n_ff, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
        } else {
            gm_add(m, "ffn_gate", l, "weight", 2, d, s->n_ff, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
            gm_add(m, "ffn_up", l, "weight", 2, d, s->n_ff, GM_NORMAL, 0, 1.0f / sqrtf((float)d));
        }
        if (!s->n_expert) gm_add(m, "ffn_down", l, "weight", 2, s->n_ff, d, GM_NORMAL, 0, 1.0f / sqrtf((float)s->n_ff));
        if (s->post_norms) gm_add(m, "post_ffw_norm", l, "weight", 1, d, 1, GM_NORMAL, 1.0f, 0.1f);
    }
    gm_add(m, "output_norm", -1, "weight", 1, d, 1, GM_NORMAL, out_gain, 0.1f * out_gain);
    if (!s->tied) gm_add(m, "output", -1, "weight", 2, d, m->n_vocab, GM_NORMAL, 0, emb_std);
}

// Llama 3.1's RoPE scaling as llama.cpp's converter computes it (factor 32 as in Llama 3.2,
// low_freq_factor 1, high_freq_factor 4, original context 8192): one factor per rotated pair,
// 1 for high frequencies, `factor` for low ones, a smooth blend between.
static void gm_rope_freqs(float *out, int head_dim, float base) {
    const float factor = 32.0f, low_freq_factor = 1.0f, high_freq_factor = 4.0f, old_ctx = 8192.0f;
    const float low_freq_wavelen = old_ctx / low_freq_factor, high_freq_wavelen = old_ctx / high_freq_factor;
    for (int i = 0; i < head_dim / 2; i++) {
        float freq = 1.0f / powf(base, (float)(2 * i) / (float)head_dim);
        float wavelen = 2.0f * 3.14159265358979f / freq;
        if (wavelen < high_freq_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_freq_wavelen) {
            out[i] = factor;
        } else {
            float smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            out[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

// --- generating and quantizing rows on a few threads ---

struct gm_job {
    const struct gm_tensor *t;
    uint64_t seed;
    int64_t row0, n_rows;      // this worker's rows
    size_t row_bytes;
    uint8_t *out;              // row row0 goes to out[0]
    float *buf;                // (ne[0]) scratch
};

static void *gm_worker(void *arg) {
    struct gm_job *j = arg;
    const struct gm_tensor *t = j->t;
    for (int64_t r = 0; r < j->n_rows; r++) {
        if (t->fill == GM_NORMAL) {
            uint64_t s = gm_mix(j->seed ^ gm_mix((uint64_t)(j->row0 + r) + 0x632BE59BD9B4E019ull));
            for (int64_t i = 0; i < t->ne[0]; i++) j->buf[i] = t->mean + t->std * gm_normal(&s);
        }
        llm__quantize_row(t->type, j->buf, j->out + (size_t)r * j->row_bytes, t->ne[0]);
    }
    return NULL;
}

// Writes one tensor's rows, in batches of about 16 MB split among n_threads.
static enum llm_status gm_write_tensor(struct llm__gguf_writer *w, const struct gm_model *m,
                                       const struct gm_tensor *t, uint64_t seed, int n_threads,
                                       uint8_t *batch, size_t batch_cap, float **bufs,
                                       struct llm__err *e) {
    size_t row_bytes = llm__row_bytes(t->type, t->ne[0]);
    int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    int64_t rows_per_batch = (int64_t)(batch_cap / row_bytes);
    if (rows_per_batch < 1) rows_per_batch = 1;
    uint64_t tseed = gm_mix(seed ^ gm_mix(gm_fnv1a(t->name)));
    if (t->fill == GM_ROPE_FREQS) gm_rope_freqs(bufs[0], m->head_dim, m->s->rope_base);
    for (int64_t r0 = 0; r0 < n_rows; r0 += rows_per_batch) {
        int64_t nb = LLM__MIN(rows_per_batch, n_rows - r0);
        int nt = nb < 4 * n_threads ? 1 : n_threads;   // threads only for big batches
        struct gm_job jobs[64];
        pthread_t tids[64];
        for (int k = 0; k < nt; k++) {
            int64_t a = nb * k / nt, b = nb * (k + 1) / nt;
            jobs[k] = (struct gm_job){t, tseed, r0 + a, b - a, row_bytes, batch + (size_t)a * row_bytes, bufs[k]};
        }
        for (int k = 1; k < nt; k++)
            if (pthread_create(&tids[k], NULL, gm_worker, &jobs[k]) != 0) abort();
        gm_worker(&jobs[0]);
        for (int k = 1; k < nt; k++) pthread_join(tids[k], NULL);
        enum llm_status st = llm__gguf_writer_write(w, batch, (size_t)nb * row_bytes, e);
        if (st != LLM_OK) return st;
    }
    return LLM_OK;
}

// The key/values: general.*, the architecture's hyperparameters, then every tokenizer.* key
// of the vocabulary file; then the tensor declarations.
static enum llm_status gm_declare(struct llm__gguf_writer *w, const struct gm_model *m,
                                  const struct llm__gguf *vocab, struct llm__err *e) {
    const char *arch = m->s->arch;
    char key[128], name[128];
    bool quantized = false;
    for (int i = 0; i < m->n_t; i++) quantized |= llm__type_info((uint32_t)m->t[i].type)->blck > 1;
    // llama.cpp gives Phi-3's special tokens attributes when general.name contains "phi3" and
    // fails on a vocabulary without them, so a phi3 shape is named without it
    const char *phi3 = strstr(m->s->name, "phi3");
    snprintf(name, sizeof(name), "random %.*s%s%s %s", phi3 ? (int)(phi3 - m->s->name) : (int)strlen(m->s->name),
             m->s->name, phi3 ? "phi-three" : "", phi3 ? phi3 + 4 : "", m->ft->name);
    const struct { const char *key; bool is_f32; double value; } hparams[] = {
        {"vocab_size", false, m->n_vocab},
        {"context_length", false, m->n_ctx},
        {"embedding_length", false, m->s->n_embd},
        {"block_count", false, m->n_layer},
        {"feed_forward_length", false, m->s->n_ff},
        {"attention.head_count", false, m->s->n_head},
        {"attention.head_count_kv", false, m->s->n_head_kv},
        {"rope.freq_base", true, m->s->rope_base},
        {"attention.layer_norm_rms_epsilon", true, m->s->eps},
        {"rope.dimension_count", false, m->head_dim},
    };
    const struct { const char *key; bool is_f32; double value; } extra[] = {
        {"attention.key_length", false, m->head_dim},
        {"attention.value_length", false, m->head_dim},
        {"attention.sliding_window", false, m->s->window},
        {"attn_logit_softcapping", true, m->s->attn_softcap},
        {"final_logit_softcapping", true, m->s->final_softcap},
        {"expert_count", false, m->s->n_expert},
        {"expert_used_count", false, m->s->n_expert_used},
        {"expert_feed_forward_length", false, m->s->n_ff_exp},
    };
    const bool extra_on[] = {m->s->head_dim > 0, m->s->head_dim > 0, m->s->window > 0, m->s->attn_softcap > 0,
                             m->s->final_softcap > 0, m->s->n_expert > 0, m->s->n_expert > 0, m->s->n_ff_exp > 0};
    enum llm_status st = llm__gguf_writer_set_str(w, "general.architecture", arch, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_str(w, "general.name", name, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_u32(w, "general.file_type", (uint32_t)m->ft->llama_ftype, e);
    if (st == LLM_OK && quantized) st = llm__gguf_writer_set_u32(w, "general.quantization_version", 2, e);
    for (size_t i = 0; st == LLM_OK && i < LLM__ARRAY_LEN(hparams); i++) {
        snprintf(key, sizeof(key), "%s.%s", arch, hparams[i].key);
        st = hparams[i].is_f32 ? llm__gguf_writer_set_f32(w, key, (float)hparams[i].value, e)
                               : llm__gguf_writer_set_u32(w, key, (uint32_t)hparams[i].value, e);
    }
    for (size_t i = 0; st == LLM_OK && i < LLM__ARRAY_LEN(extra); i++) {
        if (!extra_on[i]) continue;
        snprintf(key, sizeof(key), "%s.%s", arch, extra[i].key);
        st = extra[i].is_f32 ? llm__gguf_writer_set_f32(w, key, (float)extra[i].value, e)
                             : llm__gguf_writer_set_u32(w, key, (uint32_t)extra[i].value, e);
    }
    if (st == LLM_OK && !strcmp(arch, "gpt-oss")) {   // gpt-oss's RoPE: YaRN, factor 32 over 4096 positions
        snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
        st = llm__gguf_writer_set_str(w, key, "yarn", e);
        snprintf(key, sizeof(key), "%s.rope.scaling.factor", arch);
        if (st == LLM_OK) st = llm__gguf_writer_set_f32(w, key, 32.0f, e);
        snprintf(key, sizeof(key), "%s.rope.scaling.original_context_length", arch);
        if (st == LLM_OK) st = llm__gguf_writer_set_u32(w, key, 4096, e);
    }
    for (int64_t i = 0; st == LLM_OK && i < vocab->n_kv; i++)
        if (strncmp(vocab->kv[i].key, "tokenizer.", 10) == 0 && !(m->pre && !strcmp(vocab->kv[i].key, "tokenizer.ggml.pre")))
            st = llm__gguf_writer_copy_kv(w, vocab, i, e);
    if (st == LLM_OK && m->pre) st = llm__gguf_writer_set_str(w, "tokenizer.ggml.pre", m->pre, e);
    for (int i = 0; st == LLM_OK && i < m->n_t; i++)
        st = llm__gguf_writer_add_tensor(w, m->t[i].name, (uint32_t)m->t[i].type, m->t[i].n_dims,
                                         m->t[i].ne, e);
    return st;
}

// Writes the model to out_path; on failure a partial regular file is removed (a device such
// as /dev/null or /dev/full is left alone).
static enum llm_status gm_write_model(const struct gm_model *m, const struct llm__gguf *vocab,
                                      const char *out_path, uint64_t seed, int n_threads,
                                      struct llm__err *e) {
    struct llm__gguf_writer w;
    llm__gguf_writer_init(&w);
    enum llm_status st = gm_declare(&w, m, vocab, e);
    if (st != LLM_OK) {
        llm__gguf_writer_free(&w);
        return st;
    }
    FILE *f = fopen(out_path, "wb");
    if (!f) {
        llm__gguf_writer_free(&w);
        return llm__fail(e, LLM_ERR_IO, "cannot create '%s': %s", out_path, strerror(errno));
    }
    struct stat fst;
    bool regular = fstat(fileno(f), &fst) == 0 && S_ISREG(fst.st_mode);
    setvbuf(f, NULL, _IOFBF, 4u << 20);
    size_t batch_cap = 16u << 20;
    uint8_t *batch = malloc(batch_cap);
    float *bufs[64] = {0};
    int64_t max_row = 1;
    for (int i = 0; i < m->n_t; i++) max_row = LLM__MAX(max_row, m->t[i].ne[0]);
    bool ok = batch != NULL;
    for (int k = 0; k < n_threads; k++) ok &= (bufs[k] = malloc((size_t)max_row * sizeof(float))) != NULL;
    st = ok ? llm__gguf_writer_begin(&w, f, e) : llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int i = 0; st == LLM_OK && i < m->n_t; i++)
        st = gm_write_tensor(&w, m, &m->t[i], seed, n_threads, batch, batch_cap, bufs, e);
    if (st == LLM_OK) st = llm__gguf_writer_finish(&w, e);
    if (fclose(f) != 0 && st == LLM_OK)
        st = llm__fail(e, LLM_ERR_IO, "writing '%s' failed: %s", out_path, strerror(errno));
    if (st != LLM_OK && regular) remove(out_path);
    for (int k = 0; k < n_threads; k++) free(bufs[k]);
    free(batch);
    llm__gguf_writer_free(&w);
    return st;
}

// --- a synthetic SentencePiece vocabulary ---
//
// "--vocab synthetic:N" makes the models self-contained (no vocabulary file needed): N tokens in
// the layout of Llama 2's: <unk>, <s>, </s>, the 256 byte tokens <0xNN>, then single letters,
// digits and punctuation, then pieces made of U+2581 (a space) and lowercase letters, scored so
// that earlier pieces merge first. Below 259 tokens the list is cut short (synthetic:3 is only
// <unk>, <s>, </s>: every text becomes unknown tokens), for the edge cases of tiny vocabularies.
// It is written to a temporary GGUF file and read back like any vocabulary file.
// The file's bytes stay in *keep (the reader points into them) until the caller frees them.
static enum llm_status gm_vocab_read_back(struct llm__gguf_writer *w, enum llm_status st, struct llm__gguf *out,
                                          char **keep, struct llm__err *e);

static enum llm_status gm_synthetic_vocab(int n, struct llm__gguf *out, char **keep, struct llm__err *e) {
    if (n < 3 || n > 1000000) return llm__fail(e, LLM_ERR_INVALID_ARG, "synthetic vocabulary size %d not in [3, 1000000]", n);
    char **text = calloc((size_t)n, sizeof(char *));
    float *score = malloc((size_t)n * sizeof(float));
    int32_t *type = malloc((size_t)n * sizeof(int32_t));
    if (!text || !score || !type) { free(text); free(score); free(type); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    const char *special[3] = {"<unk>", "<s>", "</s>"};
    int k = 0;
    for (; k < 3; k++) { text[k] = strdup(special[k]); score[k] = 0.0f; type[k] = k == 0 ? 2 : 3; }
    for (int b = 0; b < 256 && k < n; b++, k++) {
        text[k] = malloc(8);
        snprintf(text[k], 8, "<0x%02X>", b);
        score[k] = 0.0f;
        type[k] = 6;
    }
    // Pieces: "▁", then "▁a".."▁z", "a".."z", then two-, three-, ... letter pieces with and
    // without the leading "▁", in a fixed pseudo-random order (deterministic).
    uint64_t s = 0x5EED;
    int len = 2;
    while (k < n) {
        char buf[64];
        int p = 0;
        int f = k - 259;   // fixed pieces first: "▁", "▁a".."▁z", "a".."z", "0".."9", "." "," "'"
        if (f == 0) {
            memcpy(buf, "\xe2\x96\x81", 3);
            p = 3;
        } else if (f <= 26) {
            memcpy(buf, "\xe2\x96\x81", 3);
            buf[3] = (char)('a' + f - 1);
            p = 4;
        } else if (f <= 52) {
            buf[p++] = (char)('a' + f - 27);
        } else if (f <= 62) {
            buf[p++] = (char)('0' + f - 53);
        } else if (f <= 65) {
            buf[p++] = ".,'"[f - 63];
        } else {
            bool space = (gm_mix(s++) & 1) != 0;
            if (space) { memcpy(buf, "\xe2\x96\x81", 3); p = 3; }
            for (int i = 0; i < len; i++) buf[p++] = (char)('a' + gm_mix(s++) % 26);
        }
        buf[p] = 0;
        bool dup = false;
        for (int i = 259; i < k && !dup; i++) dup = strcmp(text[i], buf) == 0;
        if (dup) {
            if (++len > 8) len = 1;   // try longer pieces when short ones run out
            continue;
        }
        text[k] = strdup(buf);
        score[k] = -(float)(k - 259) / 16.0f;
        type[k] = 1;
        k++;
        if (gm_mix(s++) % 8 == 0 && len < 6) len++;
    }
    struct llm__gguf_writer w;
    llm__gguf_writer_init(&w);
    enum llm_status st = llm__gguf_writer_set_str(&w, "tokenizer.ggml.model", "llama", e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr_str(&w, "tokenizer.ggml.tokens", (uint64_t)n, (const char *const *)text, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr(&w, "tokenizer.ggml.scores", LLM__GGUF_F32, (uint64_t)n, score, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr(&w, "tokenizer.ggml.token_type", LLM__GGUF_I32, (uint64_t)n, type, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_u32(&w, "tokenizer.ggml.bos_token_id", 1, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_u32(&w, "tokenizer.ggml.eos_token_id", 2, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_u32(&w, "tokenizer.ggml.unknown_token_id", 0, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_bool(&w, "tokenizer.ggml.add_bos_token", true, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_bool(&w, "tokenizer.ggml.add_eos_token", false, e);
    for (int i = 0; i < n; i++) free(text[i]);
    free(text);
    free(score);
    free(type);
    return gm_vocab_read_back(&w, st, out, keep, e);
}

// --- a vocabulary of every piece of some texts ---
//
// "--vocab substrings:FILE" (a file of cases as llama.cpp's .inp files) makes a byte-level BPE
// vocabulary with no merges whose tokens are <s> (BOS) and every run of whole code points of
// every case (GPT-2's byte-to-code-point map applied), which takes in the 256 single bytes too.
// With a pre-tokenizer that takes a word that is a token whole (tekken), each word of a case
// is one token: the ids show where the pre-tokenizer split the text.
static int gm_strcmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static enum llm_status gm_substring_vocab(const char *path, struct llm__gguf *out, char **keep, struct llm__err *e) {
    FILE *in = fopen(path, "rb");
    if (!in) return llm__fail(e, LLM_ERR_IO, "cannot open %s", path);
    static char buf[1 << 16];
    size_t size = fread(buf, 1, sizeof(buf) - 1, in);
    bool more = fgetc(in) != EOF;
    fclose(in);
    if (more) return llm__fail(e, LLM_ERR_INVALID_ARG, "%s: more than %zu bytes", path, sizeof(buf) - 1);
    buf[size] = 0;
    // GPT-2's byte-to-code-point map, as UTF-8
    char enc[256][3];
    for (int c = 0, next = 256; c < 256; c++) {
        bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174);
        int cp = printable ? c : next++;
        if (cp < 0x80) { enc[c][0] = (char)cp; enc[c][1] = 0; }
        else { enc[c][0] = (char)(0xC0 | (cp >> 6)); enc[c][1] = (char)(0x80 | (cp & 0x3F)); enc[c][2] = 0; }
    }
    size_t cap = 1024, n = 0;
    char **text = malloc(cap * sizeof(char *));
    for (int c = 0; text && c < 256; c++) text[n++] = strdup(enc[c]);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    for (char *p = buf, *end; text && *p && (end = strstr(p, sep)) != NULL; p = end + strlen(sep)) {
        for (char *a = p; a < end; a += llm__utf8_len((uint8_t)*a)) {
            char t[1024];
            size_t k = 0;
            for (char *b = a; b < end && k + 8 < sizeof(t);) {
                for (size_t l = llm__utf8_len((uint8_t)*b); l > 0 && b < end; l--, b++) {
                    memcpy(t + k, enc[(uint8_t)*b], strlen(enc[(uint8_t)*b]));
                    k += strlen(enc[(uint8_t)*b]);
                }
                t[k] = 0;
                if (n == cap) {
                    char **g = realloc(text, (cap *= 2) * sizeof(char *));
                    if (!g) { for (size_t i = 0; i < n; i++) free(text[i]); free(text); text = NULL; break; }
                    text = g;
                }
                text[n++] = strdup(t);
            }
            if (!text) break;
        }
    }
    if (!text) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    qsort(text, n, sizeof(char *), gm_strcmp);
    size_t m = 1;   // [0] stays for <s>: the unique texts from 1 on
    char **tok = malloc((n + 1) * sizeof(char *));
    int32_t *type = malloc((n + 1) * sizeof(int32_t));
    enum llm_status st = tok && type ? LLM_OK : llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == LLM_OK && i < n; i++)
        if (i == 0 || strcmp(text[i], text[i - 1]) != 0) { type[m] = 1; tok[m++] = text[i]; }
    if (st == LLM_OK) { tok[0] = "<s>"; type[0] = 3; }
    struct llm__gguf_writer w;
    llm__gguf_writer_init(&w);
    if (st == LLM_OK) st = llm__gguf_writer_set_str(&w, "tokenizer.ggml.model", "gpt2", e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr_str(&w, "tokenizer.ggml.tokens", (uint64_t)m, (const char *const *)tok, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr(&w, "tokenizer.ggml.token_type", LLM__GGUF_I32, (uint64_t)m, type, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_arr_str(&w, "tokenizer.ggml.merges", 0, (const char *const *)tok, e);
    if (st == LLM_OK) st = llm__gguf_writer_set_u32(&w, "tokenizer.ggml.bos_token_id", 0, e);
    for (size_t i = 0; i < n; i++) free(text[i]);
    free(text);
    free(tok);
    free(type);
    return gm_vocab_read_back(&w, st, out, keep, e);
}

// Writes the keys of w (when st is LLM_OK) to a temporary file and opens it as *out; the file's
// bytes stay in *keep. Frees w.
static enum llm_status gm_vocab_read_back(struct llm__gguf_writer *w, enum llm_status st, struct llm__gguf *out,
                                          char **keep, struct llm__err *e) {
    FILE *f = st == LLM_OK ? tmpfile() : NULL;
    if (st == LLM_OK && !f) st = llm__fail(e, LLM_ERR_IO, "cannot create a temporary file");
    if (st == LLM_OK) st = llm__gguf_writer_begin(w, f, e);
    if (st == LLM_OK) st = llm__gguf_writer_finish(w, e);
    llm__gguf_writer_free(w);
    if (st == LLM_OK) {
        long size = (fflush(f), fseek(f, 0, SEEK_END), ftell(f));
        char *data = size > 0 ? malloc((size_t)size) : NULL;
        rewind(f);
        if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) st = llm__fail(e, LLM_ERR_IO, "cannot read back the vocabulary");
        else st = llm__gguf_open_memory(out, data, (size_t)size, e);
        if (st == LLM_OK) *keep = data;
        else free(data);
    }
    if (f) fclose(f);
    return st;
}

// --- main ---

static void gm_usage(void) {
    fprintf(stderr,
            "usage: gen_model --shape NAME --type TYPE --vocab VOCAB.gguf --seed N -o OUT.gguf\n"
            "                 [--layers N] [--ctx N] [--threads N] [--pre NAME]\n"
            "--pre NAME sets tokenizer.ggml.pre (the pre-tokenizer of a byte-level BPE vocabulary)\n"
            "shapes:");
    for (size_t i = 0; i < LLM__ARRAY_LEN(gm_shapes); i++) fprintf(stderr, " %s", gm_shapes[i].name);
    fprintf(stderr, "\ntypes:");
    for (size_t i = 0; i < LLM__ARRAY_LEN(gm_ftypes); i++) fprintf(stderr, " %s", gm_ftypes[i].name);
    fprintf(stderr, "\nvocabularies: a GGUF file with tokenizer.* keys (e.g. the ggml-vocab-*.gguf files\n"
                    "              that tests/fixtures.sh fetches into ~/.cache/llm.c-tests/vocab),\n"
                    "              or synthetic:N for a made-up SentencePiece vocabulary of N tokens,\n"
                    "              or substrings:FILE for a BPE vocabulary of every piece of the cases of FILE\n");
}

static bool gm_parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    const char *shape_name = NULL, *type_name = NULL, *vocab_path = NULL, *out_path = NULL, *pre = NULL;
    long long seed = -1, layers = 0, ctx = 0, threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    for (int i = 1; i < argc; i += 2) {   // every option takes a value
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        if (strcmp(a, "--shape") == 0) shape_name = v;
        else if (strcmp(a, "--type") == 0) type_name = v;
        else if (strcmp(a, "--vocab") == 0) vocab_path = v;
        else if (strcmp(a, "-o") == 0) out_path = v;
        else if (strcmp(a, "--seed") == 0) ok = ok && gm_parse_int(v, 0, LLONG_MAX, &seed);
        else if (strcmp(a, "--layers") == 0) ok = ok && gm_parse_int(v, 1, 1000, &layers);
        else if (strcmp(a, "--ctx") == 0) ok = ok && gm_parse_int(v, 1, 1 << 24, &ctx);
        else if (strcmp(a, "--threads") == 0) ok = ok && gm_parse_int(v, 1, 64, &threads);
        else if (strcmp(a, "--pre") == 0) pre = v;
        else ok = false;
        if (!ok) {
            fprintf(stderr, "gen_model: bad argument '%s%s%s'\n", a, v ? " " : "", v ? v : "");
            gm_usage();
            return 2;
        }
    }
    if (!shape_name || !type_name || !vocab_path || !out_path || seed < 0) {
        gm_usage();
        return 2;
    }
    struct gm_model m = {0};
    for (size_t i = 0; i < LLM__ARRAY_LEN(gm_shapes); i++)
        if (strcmp(shape_name, gm_shapes[i].name) == 0) m.s = &gm_shapes[i];
    for (size_t i = 0; i < LLM__ARRAY_LEN(gm_ftypes); i++)
        if (strcmp(type_name, gm_ftypes[i].name) == 0) m.ft = &gm_ftypes[i];
    if (!m.s || !m.ft) {
        fprintf(stderr, "gen_model: unknown %s '%s'\n", m.s ? "type" : "shape", m.s ? type_name : shape_name);
        gm_usage();
        return 2;
    }
    m.pre = pre;
    m.n_layer = layers ? (int)layers : m.s->n_layer;
    m.n_ctx = ctx ? (int)ctx : m.s->n_ctx;
    m.head_dim = m.s->head_dim ? m.s->head_dim : m.s->n_embd / m.s->n_head;

    double t0 = llm__now();
    struct llm__err e = {{0}, LLM_OK};
    struct llm__gguf vocab;
    long long n_synth = 0;
    char *synth_data = NULL;
    if (strncmp(vocab_path, "synthetic:", 10) == 0 && !gm_parse_int(vocab_path + 10, 3, 1000000, &n_synth)) {
        fprintf(stderr, "gen_model: bad vocabulary '%s' (synthetic:N wants N in [3, 1000000])\n", vocab_path);
        return 2;
    }
    bool substrings = strncmp(vocab_path, "substrings:", 11) == 0;
    if ((n_synth      ? gm_synthetic_vocab((int)n_synth, &vocab, &synth_data, &e)
         : substrings ? gm_substring_vocab(vocab_path + 11, &vocab, &synth_data, &e)
                      : llm__gguf_open(&vocab, vocab_path, &e)) != LLM_OK) {
        fprintf(stderr, "gen_model: %s\n", e.msg);
        return 1;
    }
    uint32_t et;
    uint64_t n_vocab;
    const void *tokens;
    if (!llm__gguf_get_arr(&vocab, "tokenizer.ggml.tokens", &et, &n_vocab, &tokens, &e) ||
        et != LLM__GGUF_STR || n_vocab == 0 || n_vocab > INT32_MAX) {
        fprintf(stderr, "gen_model: %s: no usable tokenizer.ggml.tokens (%s)\n", vocab_path, e.msg);
        llm__gguf_close(&vocab);
        return 1;
    }
    m.n_vocab = (int)n_vocab;
    gm_plan(&m);
    enum llm_status st = gm_write_model(&m, &vocab, out_path, (uint64_t)seed, (int)threads, &e);
    if (st == LLM_OK) {
        int64_t n_params = 0;
        size_t bytes = 0;
        for (int i = 0; i < m.n_t; i++) {
            n_params += m.t[i].ne[0] * m.t[i].ne[1] * m.t[i].ne[2];
            bytes += llm__row_bytes(m.t[i].type, m.t[i].ne[0]) * (size_t)(m.t[i].ne[1] * m.t[i].ne[2]);
        }
        fprintf(stderr, "gen_model: wrote %s: %s %s, %d layers, vocab %d, %.1f M params, %d tensors, "
                "%.1f MB of weights, in %.2f s\n", out_path, m.s->name, m.ft->name, m.n_layer,
                m.n_vocab, (double)n_params / 1e6, m.n_t, (double)bytes / 1e6, llm__now() - t0);
    } else {
        fprintf(stderr, "gen_model: %s\n", e.msg);
    }
    free(m.t);
    llm__gguf_close(&vocab);
    free(synth_data);
    return st == LLM_OK ? 0 : 1;
}
