// CPU backend: the ops, paged attention, matrix products

#include "../src/internal.h"

// === CPU backend ===
//
// Every op is one job on the thread pool. Matrix products quantize the activations once to the
// weight's dot-product type (Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16, as
// llama.cpp does), then each thread takes chunks of weight rows. A step with many tokens (prefill)
// walks tiles of rows x tokens so a tile of weights stays in cache while it meets many tokens.

// --- row-wise ops: a job over the rows of a tensor ---

struct llm__cpu_rows_job {
    struct llm__cpu *c;
    struct llm__tensor dst, a, b;
    float eps, limit;
    const struct llm__weight *table;
    int64_t n_rows;
    void (*row)(const struct llm__cpu_rows_job *job, int64_t i);
};

static void llm__cpu_rows_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_rows_job *job = arg;
    int64_t lo, hi;
    llm__split(job->n_rows, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) job->row(job, i);
}

// Small ops on few rows are not worth waking the pool for.
static void llm__cpu_run_rows(struct llm__cpu_rows_job *job) {
    if (job->n_rows * job->dst.ne0 < 16384) llm__cpu_rows_worker(job, 0, 1);
    else llm__pool_run(job->c->pool, llm__cpu_rows_worker, job);
}

static void llm__cpu_embed_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const struct llm__weight *t = job->table;
    int32_t tok = job->c->step->tokens[i];
    if (t->layout == LLM__LAYOUT_X16) {
        llm__x16_row(t->type, t->buf.data, tok, (float *)llm__tensor_row(job->dst, i), t->ne0);
        return;
    }
    const char *src = (const char *)t->buf.data + (size_t)tok * llm__row_bytes(t->type, t->ne0);
    llm__dequantize_row(t->type, src, (float *)llm__tensor_row(job->dst, i), t->ne0);
}

static void llm__cpu_embed(void *ctx, struct llm__tensor dst, const struct llm__weight *table) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rows_job job = {.c = c, .dst = dst, .table = table,
                                    .n_rows = c->step->n_tokens, .row = llm__cpu_embed_row};
    llm__cpu_run_rows(&job);
}

#if defined(LLM__X86_SIMD)
// Sum of the squares (each squared in float) in double, 8 at a time.
LLM__AVX512 static double llm__sumsq_avx512(const float *x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(x + j), sq = _mm512_mul_ps(v, v);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
    }
    double ss = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    for (; j < n; j++) ss += (double)(x[j] * x[j]);
    return ss;
}
#endif

static void llm__cpu_rmsnorm_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *x = (const float *)llm__tensor_row(job->a, i);
    const float *w = (const float *)llm__tensor_row(job->b, 0);
    float *y = (float *)llm__tensor_row(job->dst, i);
    int64_t n = job->dst.ne0;
    double ss = 0.0;   // as llama.cpp: the sum of squares in double
#if defined(LLM__X86_SIMD)
    if (job->c->simd == LLM__SIMD_AVX512) ss = llm__sumsq_avx512(x, n);
    else
#endif
    for (int64_t j = 0; j < n; j++) ss += (double)(x[j] * x[j]);
    float scale = 1.0f / sqrtf((float)(ss / (double)n) + job->eps);
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] * scale) * w[j];
}

static void llm__cpu_rmsnorm(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor w,
                             float eps) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .b = w, .eps = eps,
                                    .n_rows = x.ne1, .row = llm__cpu_rmsnorm_row};
    llm__cpu_run_rows(&job);
}

#if defined(LLM__X86_SIMD)
LLM__AVX512 static void llm__silu_mul_avx512(const float *g, const float *u, float *y, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 gv = _mm512_loadu_ps(g + j);
        const __m512 e = llm__exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)),
                                              _mm512_loadu_ps(u + j)));
    }
    for (; j < n; j++) y[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}
#endif

static void llm__cpu_silu_mul_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *g = (const float *)llm__tensor_row(job->a, i);
    const float *u = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
#if defined(LLM__X86_SIMD)
    if (job->c->simd == LLM__SIMD_AVX512) {
        llm__silu_mul_avx512(g, u, y, job->dst.ne0);
        return;
    }
#endif
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}

static void llm__cpu_silu_mul(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = gate, .b = up,
                                    .n_rows = gate.ne1, .row = llm__cpu_silu_mul_row};
    llm__cpu_run_rows(&job);
}

// gpt-oss's SwiGLU (ggml's swiglu_oai): alpha in eps
static void llm__cpu_swiglu_oai_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *g = (const float *)llm__tensor_row(job->a, i);
    const float *u = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    const float alpha = job->eps, limit = job->limit;
    for (int64_t j = 0; j < job->dst.ne0; j++) {
        // (comparisons, not fminf/fmaxf: a NaN goes on as ggml's std::min/std::clamp let it)
        const float x = limit < g[j] ? limit : g[j];
        const float v = u[j] > limit ? limit : u[j] < -limit ? -limit : u[j];
        y[j] = x / (1.0f + expf(alpha * -x)) * (v + 1.0f);
    }
}

static void llm__cpu_swiglu_oai(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up,
                                float alpha, float limit) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = gate, .b = up, .eps = alpha, .limit = limit,
                                    .n_rows = gate.ne1, .row = llm__cpu_swiglu_oai_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_add_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *a = (const float *)llm__tensor_row(job->a, i);
    const float *b = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = a[j] + b[j];
}

static void llm__cpu_add(void *ctx, struct llm__tensor dst, struct llm__tensor a, struct llm__tensor b) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = a, .b = b,
                                    .n_rows = a.ne1, .row = llm__cpu_add_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_scale_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *a = (const float *)llm__tensor_row(job->a, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = a[j] * job->eps;
}

static void llm__cpu_scale(void *ctx, struct llm__tensor dst, struct llm__tensor x, float s) {
    // (eps carries the factor)
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .eps = s, .n_rows = x.ne1, .row = llm__cpu_scale_row};
    llm__cpu_run_rows(&job);
}

// GELU, tanh approximation, as llama.cpp's CPU backend computes it: the input rounded to half
// precision and the result read from a table of half-precision values (its GGML_GELU_FP16), so
// gelu(x) = fp16(gelu(fp16(x))) for |x| < 10; 0 below -10, x above 10.
static inline float llm__gelu_half(uint16_t x) {   // the table's entry for a half-precision x
    const float h = llm__fp16_to_fp32(x);
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)));
    return llm__fp16_to_fp32(llm__fp32_to_fp16(g));
}
static inline float llm__gelu_ggml(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return llm__gelu_half(llm__fp32_to_fp16(x));
}

// As llm__gelu_ggml, read from the table of its values at every half-precision input (the
// rounding to half precision is vectorized; tanhf per element was a tenth of Gemma's prefill).
static void llm__cpu_gelu_mul_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *g = (const float *)llm__tensor_row(job->a, i);
    const float *u = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    const float *tab = job->c->gelu;
    if (!tab) {   // (no memory for the table)
        for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = llm__gelu_ggml(g[j]) * u[j];
        return;
    }
    uint16_t h[256];
    for (int64_t j0 = 0; j0 < job->dst.ne0; j0 += 256) {
        const int64_t n = LLM__MIN(256, job->dst.ne0 - j0);
        llm__fp32_to_fp16_row(g + j0, h, n);
        for (int64_t j = 0; j < n; j++) {
            const float x = g[j0 + j];
            y[j0 + j] = (x <= -10.0f ? 0.0f : x >= 10.0f ? x : tab[h[j]]) * u[j0 + j];
        }
    }
}

static void llm__cpu_gelu_mul(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up) {
    struct llm__cpu *c = ctx;
    if (!c->gelu && (c->gelu = malloc(sizeof(float) * 65536)))
        for (uint32_t v = 0; v < 65536; v++) c->gelu[v] = llm__gelu_half((uint16_t)v);
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = gate, .b = up,
                                    .n_rows = gate.ne1, .row = llm__cpu_gelu_mul_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_gather_cols_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *x = (const float *)llm__tensor_row(job->a, i);
    const int32_t *perm = (const int32_t *)(const void *)llm__tensor_row(job->b, 0);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t k = 0; k < job->dst.ne0; k++) y[k] = x[perm[k]];
}

static void llm__cpu_gather_cols(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor perm) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .b = perm, .n_rows = x.ne1,
                                    .row = llm__cpu_gather_cols_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_get_rows_row(const struct llm__cpu_rows_job *job, int64_t i) {
    int32_t r = job->c->step->out_rows[i];
    memcpy(llm__tensor_row(job->dst, i), llm__tensor_row(job->a, r), (size_t)job->dst.ne0 * sizeof(float));
}

static void llm__cpu_get_rows(void *ctx, struct llm__tensor dst, struct llm__tensor src) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rows_job job = {.c = c, .dst = dst, .a = src,
                                    .n_rows = c->step->n_out, .row = llm__cpu_get_rows_row};
    llm__cpu_run_rows(&job);
}

// --- RoPE ---

struct llm__cpu_rope_job {
    struct llm__cpu *c;
    struct llm__tensor x;
    int n_head, head_dim;
    const struct llm__rope *rope;
};

// cos/sin of every rotated pair at position pos, computed as llama.cpp does (theta multiplied by
// theta_scale pair after pair, in float; YaRN as ggml's rope_yarn) so that results agree closely.
static void llm__rope_cache(const struct llm__rope *r, int32_t pos, float *cs) {
    float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    const float *ff = r->freq_factors.buf ? (const float *)llm__tensor_row(r->freq_factors, 0) : NULL;
    const bool yarn = r->ext_factor != 0.0f;
    const float mscale = yarn ? r->mscale : 1.0f, span = fmaxf(0.001f, r->corr_dims[1] - r->corr_dims[0]);
    float theta = (float)pos;
    for (int i = 0; i < r->n_rot / 2; i++) {
        const float extrap = ff ? theta / ff[i] : theta;
        float t = r->freq_scale * extrap;
        if (yarn) {
            const float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, ((float)i - r->corr_dims[0]) / span))) * r->ext_factor;
            t = t * (1.0f - ramp) + extrap * ramp;
        }
        cs[2 * i + 0] = cosf(t) * mscale;
        cs[2 * i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

static void llm__rope_apply(const struct llm__rope *r, const float *cs, float *x) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        int i0 = r->neox ? i : 2 * i;
        int i1 = r->neox ? i + half : 2 * i + 1;
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}

static void llm__cpu_rope_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_rope_job *job = arg;
    float cs[1024];   // head_dim <= 1024 is checked at load
    int64_t lo, hi;
    llm__split(job->x.ne1, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        llm__rope_cache(job->rope, job->c->step->positions[t], cs);
        float *row = (float *)llm__tensor_row(job->x, t);
        for (int h = 0; h < job->n_head; h++) llm__rope_apply(job->rope, cs, row + h * job->head_dim);
    }
}

static void llm__cpu_rope(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *rope) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rope_job job = {c, x, n_head, head_dim, rope};
    if (x.ne1 < 4) llm__cpu_rope_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_rope_worker, &job);
}

// --- KV store ---
//
// The CPU backend's cache layout, block by block (a block is block_size slots of the views the
// engine hands over, so its bytes are the same): V as rows, [slot][kv head][dim]; K transposed
// within the block, [kv head][dim][slot], so that the scores of one query against a block's
// keys are dim-by-dim multiply-adds of contiguous vectors (no horizontal sums).
// A Q8_0 cache (--kv-cache-dtype q8_0; head_dim % 32 == 0) keeps llama.cpp's blocks, each token's
// row quantized in groups of 32 values of a head with an fp16 scale: V rows as Q8_0 blocks; K
// within the block as [kv head][dim][slot] quants (int8), then every group's scales [group][slot]
// (fp16, groups of the whole row: head g's first at g * head_dim / 32): a block's bytes are
// those of its block_size Q8_0 rows.
// As llama.cpp does for a quantized cache, when head_dim % 64 == 0 the heads are rotated before
// they are quantized, by the orthonormal Walsh-Hadamard transform (its own inverse): keys and
// queries in pieces of the largest power of two (>= 64) dividing head_dim (dot products are
// unchanged), values in pieces of 64 and the attention's output rotated back. A few large
// channels then no longer set every group's scale: the rounding error of keys drops several
// times (SmolLM2 F16, mean KL divergence from exact arithmetic: 0.0022 unrotated, 0.00037 rotated).

// In-place orthonormal Walsh-Hadamard transform of n values (n a power of two).
static void llm__fwht(float *x, int n) {
    for (int h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    const float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= s;
}

// The size of the pieces a Q8_0 cache rotates (keys and queries, or values), 0: none.
static int llm__kv_rot(int type, int hd, bool values) {
    if (type != LLM__TYPE_Q8_0 || hd % 64 != 0) return 0;
    int n = 64;
    while (!values && hd % (2 * n) == 0) n *= 2;
    return n;
}

// x[0..hd) rotated in pieces of n (n = 0: unchanged)
static void llm__kv_rotate(float *x, int hd, int n) {
    for (int i = 0; n && i < hd; i += n) llm__fwht(x + i, n);
}

struct llm__cpu_kv_job { struct llm__cpu *c; struct llm__tensor k_cache, v_cache, k, v; };

// Tokens [lo, hi): values as rows, keys scattered into their block's [dim][slot] layout.
static void llm__cpu_kv_store_worker(void *arg, int ith, int nth) {
    struct llm__cpu_kv_job *j = arg;
    const struct llm__step *s = j->c->step;
    const int bs = s->block_size;
    const size_t esz = j->k_cache.type == LLM__TYPE_F32 ? 4 : 2;
    int64_t lo, hi;
    llm__split(s->n_tokens, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int32_t slot = s->slot_mapping[t];
        if (j->v_cache.type != LLM__TYPE_Q8_0)
            llm__quantize_row(j->v_cache.type, (const float *)llm__tensor_row(j->v, t),
                              llm__tensor_row(j->v_cache, slot), j->v.ne0);
        char *blk = llm__tensor_row(j->k_cache, (int64_t)(slot / bs) * bs);
        const float *kr = (const float *)llm__tensor_row(j->k, t);
        if (j->k_cache.type == LLM__TYPE_Q8_0) {   // head by head: rotated, quantized, K scattered (see above)
            const int hd = j->c->head_dim, rk = llm__kv_rot(LLM__TYPE_Q8_0, hd, false);
            assert(hd > 0 && hd % 32 == 0 && j->k.ne0 % hd == 0);   // (reserve sets it; llm_engine_create checks)
            const int rv = llm__kv_rot(LLM__TYPE_Q8_0, hd, true);
            struct llm__block_q8_0 qb[32];   // (head_dim <= 1024, checked at load)
            float x[1024];
            char *scales = blk + (size_t)j->k.ne0 * (size_t)bs, *vrow = llm__tensor_row(j->v_cache, slot);
            for (int64_t c0 = 0; c0 < j->k.ne0; c0 += hd) {
                memcpy(x, (const float *)llm__tensor_row(j->v, t) + c0, sizeof(float) * (size_t)hd);
                llm__kv_rotate(x, hd, rv);
                llm__quantize_row(LLM__TYPE_Q8_0, x, vrow + (size_t)(c0 / 32) * sizeof(qb[0]), hd);
                memcpy(x, kr + c0, sizeof(float) * (size_t)hd);
                llm__kv_rotate(x, hd, rk);
                llm__quantize_row(LLM__TYPE_Q8_0, x, qb, hd);
                for (int64_t b = 0; b < hd / 32; b++) {
                    const int64_t col = c0 + 32 * b;
                    for (int k = 0; k < 32; k++)
                        blk[(size_t)(col + k) * (size_t)bs + (size_t)(slot % bs)] = qb[b].qs[k];
                    memcpy(scales + ((size_t)(col / 32) * (size_t)bs + (size_t)(slot % bs)) * 2, &qb[b].d, 2);
                }
            }
            continue;
        }
        uint16_t h[1024];   // a row is converted 1024 values at a time, then scattered
        for (int64_t c0 = 0; c0 < j->k.ne0; c0 += 1024) {
            int64_t nc = LLM__MIN(1024, j->k.ne0 - c0);
            if (esz == 2) llm__fp32_to_fp16_row(kr + c0, h, nc);
            for (int64_t col = c0; col < c0 + nc; col++) {
                size_t at = ((size_t)col * (size_t)bs + (size_t)(slot % bs)) * esz;
                if (esz == 4) memcpy(blk + at, &kr[col], 4);
                else memcpy(blk + at, &h[col - c0], 2);
            }
        }
    }
}

static void llm__cpu_kv_store(void *ctx, struct llm__tensor k_cache, struct llm__tensor v_cache,
                              struct llm__tensor k, struct llm__tensor v) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_kv_job job = {c, k_cache, v_cache, k, v};
    if (c->step->n_tokens < 4) llm__cpu_kv_store_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_kv_store_worker, &job);
}

// --- paged attention ---
//
// One work item = one token and one KV head with its group of query heads (GQA). Keys are read
// block by block through the sequence's block table with an online softmax: per block, the
// scores of its keys, then the running max and sum are rescaled once and the values added. No
// score matrix is ever materialised. With a half-precision cache, queries are rounded to half
// precision before the dot product with the keys, as llama.cpp does.

struct llm__cpu_attn_job {
    struct llm__cpu *c;
    struct llm__tensor out, q, k_cache, v_cache;
    const struct llm__attn *p;
    atomic_int next;
    size_t scratch_per_thread;   // floats
};

// Per-thread scratch, in floats: q, acc [G][hd]; kt [hd][bs]; vb [bs][hd]; sc [G][max(32, bs, hd)];
// m, l [G]. (sc first holds q in half precision.)
static size_t llm__attn_scratch(int G, int hd, int bs) {
    return ((size_t)(2 * G * hd + 2 * hd * bs + G * LLM__MAX(32, LLM__MAX(bs, hd)) + 2 * G) + 15) & ~(size_t)15;
}

// Converts n cache elements (f16, f32, or a row of Q8_0 blocks) to f32.
static inline void llm__kv_to_f32(int type, const void *src, float *dst, int64_t n) {
    if (type == LLM__TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else if (type == LLM__TYPE_Q8_0) llm__dequantize_row(LLM__TYPE_Q8_0, src, dst, n);
    else llm__fp16_to_fp32_row((const uint16_t *)src, dst, n);
}

// A block's keys of one KV head as f32 [dim][slot]: kblk its quants or values ([dim][slot]),
// ks (Q8_0) the scales of its first group ([group][slot], bs apart).
static void llm__kv_keys_to_f32(int type, const char *kblk, const char *ks, float *kt, int hd, int bs) {
    if (type != LLM__TYPE_Q8_0) {
        llm__kv_to_f32(type, kblk, kt, (int64_t)hd * bs);
        return;
    }
    for (int g = 0; g < hd / 32; g++) {
        float d[32];
        llm__fp16_to_fp32_row((const uint16_t *)ks + (size_t)g * bs, d, bs);
        for (int i = 32 * g; i < 32 * g + 32; i++)
            for (int j = 0; j < bs; j++)
                kt[(size_t)i * bs + j] = (float)((const int8_t *)kblk)[(size_t)i * bs + j] * d[j];
    }
}

#if defined(LLM__X86_SIMD)

// e^x for 8 floats, as llm__exp_avx512 (x clamped to [-87, 88.3]; 2^n built in the exponent bits).
LLM__AVX2 static inline __m256 llm__exp_avx2(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

LLM__AVX2 static inline __m256 llm__kv_load8(const char *p, bool f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

// A Q8_0 cache's values: d[j] = the scale of key j's value block blk (j < nk; rows at v0, and at
// v1 for keys 16.., vstride bytes apart), once per key and 32 columns for the kernels below (not
// once per key and 8 or 16 columns). The kernels multiply each value by its scale before the
// score, as the scalar path does (scaling the scores instead, one multiply fewer, moved SmolLM2
// F16's mean KL divergence from float64 with a q8_0 cache from 0.00037 to 0.00051).
static void llm__q8v_scales(int nk, const char *v0, const char *v1, size_t vstride, int blk, float *d) {
    for (int j = 0; j < nk; j++) {
        const char *row = j < 16 ? v0 + (size_t)j * vstride : v1 + (size_t)(j - 16) * vstride;
        uint16_t dh;
        memcpy(&dh, row + (size_t)blk * sizeof(struct llm__block_q8_0), 2);
        d[j] = llm__fp16_to_fp32(dh);
    }
}

// llm__attn_block_avx512 on AVX2 (head_dim % 8 == 0): the 32 keys as 4 groups of 8 (the first
// two in kt0's 16 slots, the others in kt1's), scores of 2 heads at a time, values 8 columns at
// a time for up to 8 heads.
// 8 quants of a Q8_0 cache times their scales d
LLM__AVX2 static inline __m256 llm__kq8_load8(const char *p, __m256 d) {
    int64_t w;
    memcpy(&w, p, 8);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(w))), d);
}

LLM__AVX2 static void llm__attn_block_avx2(int G, int hd, int kstride, int nk, int skip, float scale, const float *q,
                                           const char *kt0, const char *kt1, const char *ks0, const char *ks1,
                                           const char *v0, const char *v1, size_t vstride, int kvt, float *sc,
                                           float *m, float *l, float *acc) {
    const bool f16 = kvt == LLM__TYPE_F16, q8 = kvt == LLM__TYPE_Q8_0;
    const size_t esz = q8 ? 1 : f16 ? 2 : 4;
    const int ngrp = (nk + 7) / 8;
    __m256 valid[4];   // keys at or past nk, or before skip: -inf scores, zero weights
    for (int g = 0; g < 4; g++) {
        const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * g));
        valid[g] = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(skip), idx),
                                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), idx)));
    }
    for (int h0 = 0; h0 < G; h0 += 2) {
        const int ng = LLM__MIN(2, G - h0);
        __m256 s[2][4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) s[0][g] = s[1][g] = _mm256_setzero_ps();
        __m256 d[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int i = 0; i < hd; i++) {
            __m256 kv[4];
            if (q8 && i % 32 == 0)   // (Q8_0: the scales of the next 32 dims)
                for (int g = 0; g < ngrp; g++)
                    d[g] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((g < 2 ? ks0 : ks1) +
                                                          ((size_t)(i / 32) * kstride + (size_t)(g & 1) * 8) * 2)));
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                const char *kp = (g < 2 ? kt0 : kt1) + ((size_t)i * kstride + (size_t)(g & 1) * 8) * esz;
                kv[g] = g >= ngrp ? _mm256_setzero_ps() : q8 ? llm__kq8_load8(kp, d[g]) : llm__kv_load8(kp, f16);
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                if (h >= ng) break;
                const __m256 qi = _mm256_set1_ps(q[(size_t)(h0 + h) * hd + i]);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) s[h][g] = _mm256_fmadd_ps(qi, kv[g], s[h][g]);
            }
        }
        for (int h = 0; h < ng; h++) {
            const int hh = h0 + h;
            __m256 a[4], mx = _mm256_set1_ps(-INFINITY);
            for (int g = 0; g < 4; g++) {
                a[g] = _mm256_mul_ps(s[h][g], _mm256_set1_ps(scale));
                mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), a[g], valid[g]));
            }
            const float bmax = llm__hmax_avx2(mx);
            const float mnew = fmaxf(m[hh], bmax);
            const float corr = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - mnew);
            const __m256 mv = _mm256_set1_ps(mnew);
            __m256 sum = _mm256_setzero_ps();
            for (int g = 0; g < 4; g++) {
                const __m256 p = _mm256_and_ps(valid[g], llm__exp_avx2(_mm256_sub_ps(a[g], mv)));
                _mm256_storeu_ps(sc + (size_t)hh * 32 + 8 * g, p);
                sum = _mm256_add_ps(sum, p);
            }
            l[hh] = l[hh] * corr + llm__hsum_avx2(sum);
            m[hh] = mnew;
            float *ah = acc + (size_t)hh * hd;
            const __m256 cv = _mm256_set1_ps(corr);
            for (int c = 0; c < hd; c += 8) _mm256_storeu_ps(ah + c, _mm256_mul_ps(_mm256_loadu_ps(ah + c), cv));
        }
    }
    // acc[h] += sum_j p[h][j] v[j], 8 columns at a time
    for (int h0 = 0; h0 < G; h0 += 8) {
        const int ng = LLM__MIN(8, G - h0);
        float vd[32];   // (Q8_0) the values' scales in block c / 32
        for (int c = 0; c < hd; c += 8) {
            __m256 a[8];
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                a[h] = h < ng ? _mm256_loadu_ps(acc + (size_t)(h0 + h) * hd + c) : _mm256_setzero_ps();
            if (q8 && c % 32 == 0) llm__q8v_scales(nk, v0, v1, vstride, c / 32, vd);
            for (int j = 0; j < nk; j++) {
                const char *vr = j < 16 ? v0 + (size_t)j * vstride : v1 + (size_t)(j - 16) * vstride;
                // Q8_0: columns c.. of block c / 32 (34 bytes: the fp16 scale, 32 quants)
                const __m256 v =
                    q8 ? llm__kq8_load8(vr + (size_t)(c / 32) * sizeof(struct llm__block_q8_0) + 2 + c % 32,
                                        _mm256_set1_ps(vd[j]))
                       : llm__kv_load8(vr + (size_t)c * esz, f16);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    if (h >= ng) break;
                    a[h] = _mm256_fmadd_ps(_mm256_set1_ps(sc[(size_t)(h0 + h) * 32 + j]), v, a[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                if (h < ng) _mm256_storeu_ps(acc + (size_t)(h0 + h) * hd + c, a[h]);
        }
    }
}

LLM__AVX512 static inline __m512 llm__kv_load16(const char *p, bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

// 16 quants of a Q8_0 cache times their scales d
LLM__AVX512 static inline __m512 llm__kq8_load16(const char *p, __m512 d) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))), d);
}

// The block part of the attention worker for head_dim % 16 == 0 and block size 16 or 32 (8 takes
// the scalar path), reading the cache directly, 32 keys at a time: one block of 32, or two
// blocks of 16 (keys nk <= 32). kt0, kt1 = this head's keys of the first and second 16 slots,
// [dim][slot] with kstride values between dims; v0, v1 = the value rows of their first slots
// for this head, rows vstride bytes apart. Scores of up to 8 heads at a time (each key vector
// converted once for all of them), the softmax update, then the values, 16 columns at a time.
// Keys before skip (< nk) are outside a sliding window: masked as those past nk. A Q8_0 cache
// (kvt): ks0, ks1 = the scales of kt0's and kt1's first group, [group][slot] with kstride between
// groups; each key vector is scaled as it is loaded, each value vector by its row's scale.
LLM__AVX512 static void llm__attn_block_avx512(int G, int hd, int kstride, int nk, int skip, float scale,
                                               const float *q, const char *kt0, const char *kt1, const char *ks0,
                                               const char *ks1, const char *v0, const char *v1, size_t vstride,
                                               int kvt, float *sc, float *m, float *l, float *acc) {
    const bool f16 = kvt == LLM__TYPE_F16, q8 = kvt == LLM__TYPE_Q8_0;
    const size_t esz = q8 ? 1 : f16 ? 2 : 4;
    const bool two = nk > 16;
    const __mmask16 tail = nk % 16 ? (__mmask16)((1u << (nk % 16)) - 1) : (__mmask16)0xFFFF;
    // keys past nk do not exist and keys before skip are out of the window: -inf scores, zero weights
    const __mmask16 lo0 = skip >= 16 ? (__mmask16)0 : (__mmask16)(0xFFFFu << skip);
    const __mmask16 lo1 = skip <= 16 ? (__mmask16)0xFFFF : (__mmask16)(0xFFFFu << (skip - 16));
    const __mmask16 k0 = (nk >= 16 ? (__mmask16)0xFFFF : tail) & lo0;
    const __mmask16 k1 = (nk >= 32 ? (__mmask16)0xFFFF : nk > 16 ? tail : 0) & lo1;
    for (int h0 = 0; h0 < G; h0 += 8) {
        const int ng = LLM__MIN(8, G - h0);
        __m512 s0[8], s1[8];
#pragma GCC unroll 8
        for (int h = 0; h < 8; h++) s0[h] = s1[h] = _mm512_setzero_ps();
        __m512 da = _mm512_setzero_ps(), db = da;
        for (int i = 0; i < hd; i++) {
            __m512 ka, kb;
            if (q8) {
                if (i % 32 == 0) {
                    const size_t at = (size_t)(i / 32) * (size_t)kstride * 2;
                    da = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ks0 + at)));
                    db = two ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ks1 + at))) : da;
                }
                ka = llm__kq8_load16(kt0 + (size_t)i * kstride, da);
                kb = two ? llm__kq8_load16(kt1 + (size_t)i * kstride, db) : ka;
            } else {
                ka = llm__kv_load16(kt0 + (size_t)i * kstride * esz, f16);
                kb = two ? llm__kv_load16(kt1 + (size_t)i * kstride * esz, f16) : ka;
            }
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) {
                if (h >= ng) break;
                const __m512 qi = _mm512_set1_ps(q[(size_t)(h0 + h) * hd + i]);
                s0[h] = _mm512_fmadd_ps(qi, ka, s0[h]);
                if (two) s1[h] = _mm512_fmadd_ps(qi, kb, s1[h]);
            }
        }
        for (int h = 0; h < ng; h++) {
            const int hh = h0 + h;
            const __m512 a = _mm512_mul_ps(s0[h], _mm512_set1_ps(scale)),
                         b = _mm512_mul_ps(s1[h], _mm512_set1_ps(scale));
            float bmax = k0 ? _mm512_mask_reduce_max_ps(k0, a) : -INFINITY;
            if (two && k1) bmax = fmaxf(bmax, _mm512_mask_reduce_max_ps(k1, b));
            const float mnew = fmaxf(m[hh], bmax);
            const float corr = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - mnew);
            const __m512 mv = _mm512_set1_ps(mnew);
            const __m512 p0 = _mm512_maskz_mov_ps(k0, llm__exp_avx512(_mm512_sub_ps(a, mv)));
            const __m512 p1 = two ? _mm512_maskz_mov_ps(k1, llm__exp_avx512(_mm512_sub_ps(b, mv)))
                                  : _mm512_setzero_ps();
            _mm512_storeu_ps(sc + (size_t)hh * 32, p0);
            _mm512_storeu_ps(sc + (size_t)hh * 32 + 16, p1);
            l[hh] = l[hh] * corr + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
            m[hh] = mnew;
            float *ah = acc + (size_t)hh * hd;
            const __m512 cv = _mm512_set1_ps(corr);
            for (int c = 0; c < hd; c += 16) _mm512_storeu_ps(ah + c, _mm512_mul_ps(_mm512_loadu_ps(ah + c), cv));
        }
        // acc[h] += sum_j p[h][j] v[j], 16 columns at a time
        float vd[32];   // (Q8_0) the values' scales in block c / 32
        for (int c = 0; c < hd; c += 16) {
            __m512 a[8];
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                a[h] = h < ng ? _mm512_loadu_ps(acc + (size_t)(h0 + h) * hd + c) : _mm512_setzero_ps();
            if (q8 && c % 32 == 0) llm__q8v_scales(nk, v0, v1, vstride, c / 32, vd);
            for (int j = 0; j < nk; j++) {
                const char *vr = j < 16 ? v0 + (size_t)j * vstride : v1 + (size_t)(j - 16) * vstride;
                // Q8_0: columns c.. of block c / 32 (34 bytes: the fp16 scale, 32 quants)
                const __m512 v =
                    q8 ? llm__kq8_load16(vr + (size_t)(c / 32) * sizeof(struct llm__block_q8_0) + 2 + c % 32,
                                         _mm512_set1_ps(vd[j]))
                       : llm__kv_load16(vr + (size_t)c * esz, f16);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    if (h >= ng) break;
                    a[h] = _mm512_fmadd_ps(_mm512_set1_ps(sc[(size_t)(h0 + h) * 32 + j]), v, a[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                if (h < ng) _mm512_storeu_ps(acc + (size_t)(h0 + h) * hd + c, a[h]);
        }
    }
}
#endif

// The same, one value at a time (any head_dim and block size).
// Keys before skip are outside a sliding window (at least one key, nk > skip, is inside).
// softcap > 0: scores become softcap * tanh(score / softcap), as llama.cpp computes it.
static void llm__attn_block_scalar(int G, int hd, int bs, int nk, int skip, float scale, float softcap,
                                   const float *q, const float *kt, const float *vb, float *sc, float *m, float *l,
                                   float *acc) {
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * hd;
        float *sh = sc + (size_t)h * bs, bmax = -INFINITY;
        for (int j = 0; j < nk; j++) {
            if (j < skip) { sh[j] = -INFINITY; continue; }
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d += qh[i] * kt[(size_t)i * bs + j];
            sh[j] = d * scale;
            if (softcap > 0.0f) sh[j] = softcap * tanhf(sh[j] * (1.0f / softcap));
            bmax = fmaxf(bmax, sh[j]);
        }
        const float mnew = fmaxf(m[h], bmax);
        const float corr = m[h] == -INFINITY ? 0.0f : expf(m[h] - mnew);
        float sum = 0.0f;
        for (int j = 0; j < nk; j++) {
            sh[j] = expf(sh[j] - mnew);
            sum += sh[j];
        }
        l[h] = l[h] * corr + sum;
        m[h] = mnew;
        float *ah = acc + (size_t)h * hd;
        for (int i = 0; i < hd; i++) ah[i] *= corr;
        for (int j = 0; j < nk; j++)
            for (int i = 0; i < hd; i++) ah[i] += sh[j] * vb[(size_t)j * hd + i];
    }
}

static void llm__cpu_attn_worker(void *arg, int ith, int nth) {
    (void)nth;
    struct llm__cpu_attn_job *job = arg;
    const struct llm__step *s = job->c->step;
    const struct llm__attn *p = job->p;
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv, bs = s->block_size;
    const int kvt = job->k_cache.type;
    const size_t esz = kvt == LLM__TYPE_F32 ? 4 : kvt == LLM__TYPE_Q8_0 ? 1 : 2;
    const int rot_k = llm__kv_rot(kvt, hd, false), rot_v = llm__kv_rot(kvt, hd, true);

    float *q = (float *)job->c->scratch + (size_t)ith * job->scratch_per_thread;
    float *acc = q + (size_t)G * hd, *kt = acc + (size_t)G * hd, *vb = kt + (size_t)hd * bs;
    float *sc = vb + (size_t)bs * hd, *m = sc + (size_t)G * LLM__MAX(32, LLM__MAX(bs, hd)), *l = m + G;
    bool simd = false;
#if defined(LLM__X86_SIMD)
    simd = (job->c->simd == LLM__SIMD_AVX512 && hd % 16 == 0 && bs % 16 == 0 && p->softcap == 0.0f) ||
           (job->c->simd == LLM__SIMD_AVX2 && hd % 8 == 0 && bs % 16 == 0 && p->softcap == 0.0f);
#endif
    int n_items = s->n_tokens * p->n_head_kv;
    for (int item; (item = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < n_items;) {
        int t = item / p->n_head_kv, g = item % p->n_head_kv;
        int n_ctx = s->positions[t] + 1;
        // a sliding window starts at key j_lo; the blocks before its block are not read
        const int j_lo = p->window > 0 && n_ctx > p->window ? n_ctx - p->window : 0;
        const int32_t *bt = s->block_tables + (size_t)s->seq_idx[t] * s->max_blocks;
        const float *qrow = (const float *)llm__tensor_row(job->q, t) + (size_t)g * G * hd;
        // head g's values in a row; Q8_0: its key scales in a block (after all the quants)
        const size_t voff = llm__row_bytes(kvt, (int64_t)g * hd);
        const size_t ks_off = (size_t)job->k_cache.ne0 * (size_t)bs + (size_t)g * (size_t)(hd / 32) * (size_t)bs * 2;
        if (kvt == LLM__TYPE_F16) {
            // round q to half precision (sc is free until the first block)
            llm__fp32_to_fp16_row(qrow, (uint16_t *)sc, (int64_t)G * hd);
            llm__fp16_to_fp32_row((const uint16_t *)sc, q, (int64_t)G * hd);
        } else {
            memcpy(q, qrow, sizeof(float) * (size_t)G * hd);
            for (int h = 0; h < G; h++) llm__kv_rotate(q + (size_t)h * hd, hd, rot_k);   // (Q8_0: as the keys)
        }
        memset(acc, 0, sizeof(float) * (size_t)G * hd);
        for (int h = 0; h < G; h++) { m[h] = -INFINITY; l[h] = 0.0f; }
        for (int j0 = j_lo / bs * bs; j0 < n_ctx; j0 += simd ? 32 : bs) {
            int nk = LLM__MIN(simd ? 32 : bs, n_ctx - j0), skip = LLM__MAX(0, j_lo - j0);
            int64_t slot0 = (int64_t)bt[j0 / bs] * bs;
            const char *kblk = llm__tensor_row(job->k_cache, slot0) + (size_t)g * hd * bs * esz;
            const char *ks0 = kblk - (size_t)g * hd * bs + ks_off;   // (Q8_0's key scales)
            const char *v0 = llm__tensor_row(job->v_cache, slot0) + voff;
#if defined(LLM__X86_SIMD)
            if (simd) {   // 32 keys: a block of 32, or two blocks of 16
                const char *kt1 = kblk + 16 * esz, *ks1 = ks0 + 16 * 2, *v1 = v0 + 16 * job->v_cache.nb1;
                if (bs == 16 && nk > 16) {
                    int64_t slot1 = (int64_t)bt[j0 / bs + 1] * bs;
                    kt1 = llm__tensor_row(job->k_cache, slot1) + (size_t)g * hd * bs * esz;
                    ks1 = kt1 - (size_t)g * hd * bs + ks_off;
                    v1 = llm__tensor_row(job->v_cache, slot1) + voff;
                }
                (job->c->simd == LLM__SIMD_AVX512 ? llm__attn_block_avx512 : llm__attn_block_avx2)(
                    G, hd, bs, nk, skip, p->scale, q, kblk, kt1, ks0, ks1, v0, v1, job->v_cache.nb1, kvt, sc, m, l,
                    acc);
                continue;
            }
#endif
            // this head's keys, [dim][slot], and its values, [slot][dim], as f32
            llm__kv_keys_to_f32(kvt, kblk, ks0, kt, hd, bs);
            for (int j = 0; j < nk; j++)
                llm__kv_to_f32(kvt, v0 + (size_t)j * job->v_cache.nb1, vb + (size_t)j * hd, hd);
            llm__attn_block_scalar(G, hd, bs, nk, skip, p->scale, p->softcap, q, kt, vb, sc, m, l, acc);
        }
        float *orow = (float *)llm__tensor_row(job->out, t) + (size_t)g * G * hd;
        const float *sinks = p->sinks.buf ? (const float *)llm__tensor_row(p->sinks, 0) + (size_t)g * G : NULL;
        for (int h = 0; h < G; h++) {
            float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
            if (sinks) {   // the sink's term joins the denominator (as if its logit were one more key's)
                const float mx = fmaxf(m[h], sinks[h]), a = expf(m[h] - mx), den = l[h] * a + expf(sinks[h] - mx);
                inv = a / den;
            }
            for (int i = 0; i < hd; i++) orow[h * hd + i] = acc[h * hd + i] * inv;
            llm__kv_rotate(orow + (size_t)h * hd, hd, rot_v);   // (Q8_0: the values' rotation undone)
        }
    }
}

static void llm__cpu_attention(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                               struct llm__tensor v_cache, const struct llm__attn *p) {
    struct llm__cpu *c = ctx;
    int G = p->n_head / p->n_head_kv;
    size_t per = llm__attn_scratch(G, p->head_dim, c->step->block_size);
    assert(per * sizeof(float) * (size_t)llm__pool_nth(c->pool) <= c->scratch_size);   // see llm__cpu_reserve_shape
    struct llm__cpu_attn_job job = {.c = c, .out = out, .q = q, .k_cache = k_cache, .v_cache = v_cache,
                                    .p = p, .scratch_per_thread = per};
    atomic_init(&job.next, 0);
    if (c->step->n_tokens * p->n_head_kv == 1) llm__cpu_attn_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_attn_worker, &job);
}

// --- matrix products ---

struct llm__cpu_mm_job {
    struct llm__cpu *c;
    int n;                                     // weights
    const struct llm__tensor *dst;
    const struct llm__weight *const *w;
    const struct llm__tensor *bias;
    struct llm__tensor x;                      // [ntok][ne0] f32
    int64_t ntok;
    const char *xq[LLM__MAX_MATMUL_WEIGHTS];   // activations of weight j in its dot type
    size_t xq_stride[LLM__MAX_MATMUL_WEIGHTS];
    int fmt[LLM__MAX_MATMUL_WEIGHTS];          // the activation format of weight j (as types[])
    int n_types;                               // distinct activation formats to quantize into
    int types[LLM__MAX_MATMUL_WEIGHTS];        // a dot type, LLM__X16_ACT/LLM__HALF_ACT + weight type, LLM__DPBF16_ACT
    char *xq_base[LLM__MAX_MATMUL_WEIGHTS];
    int64_t rows_per_chunk;
    int64_t chunk_start[LLM__MAX_MATMUL_WEIGHTS + 1];   // prefix sums of chunks per weight
};

#define LLM__SC_ACT 500      // from this up to 1000: Q8_0 or Q8_1 (id - 500) rows followed by their blocks'
                             // scales as floats (d of every block, then s: Q8_1), for llm__b32_tile
#define LLM__SC_OFF(n) (((size_t)(n) + 3) & ~(size_t)3)   // where the scales start: 4-byte aligned
#define LLM__X16_ACT 1000    // activation format ids from this up to 2000: x16 formats of type id - 1000
#define LLM__HALF_ACT 2000   // activation format ids from this up to 3000: floats rounded to half type id - 2000
#define LLM__DPBF16_ACT 3000 // BF16 values (for vdpbf16ps), rows padded to 4 bytes

// y = x rounded to F16 or BF16 (type) and widened back.
static void llm__round_half_row(int type, const float *x, float *y, int64_t n) {
    uint16_t h[256];
    for (int64_t i = 0; i < n; i += 256) {
        const int64_t m = LLM__MIN(256, n - i);
        if (type == LLM__TYPE_BF16) {
            for (int64_t k = 0; k < m; k++) y[i + k] = llm__bf16_to_fp32(llm__fp32_to_bf16(x[i + k]));
        } else {
            llm__fp32_to_fp16_row(x + i, h, m);
            llm__fp16_to_fp32_row(h, y + i, m);
        }
    }
}

static size_t llm__act_row_bytes(int fmt, int64_t K) {
    if (fmt == LLM__DPBF16_ACT) return ((size_t)K * sizeof(uint16_t) + 3) & ~(size_t)3;   // (<= 4 bytes an element)
    if (fmt >= LLM__HALF_ACT) return (size_t)K * sizeof(float);
    if (fmt >= LLM__SC_ACT && fmt < LLM__X16_ACT)
        return LLM__SC_OFF(llm__row_bytes(fmt - LLM__SC_ACT, K)) +
               (size_t)(K / LLM__QK) * (fmt - LLM__SC_ACT == LLM__TYPE_Q8_1 ? 8 : 4);
    return fmt >= LLM__X16_ACT ? llm__x16_act_stride(fmt - LLM__X16_ACT, K) : llm__row_bytes(fmt, K);
}

static void llm__cpu_mm_quantize(struct llm__cpu_mm_job *job, int64_t lo, int64_t hi) {
    int64_t K = job->x.ne0;
    for (int i = 0; i < job->n_types; i++) {
        int fmt = job->types[i];
        size_t stride = llm__act_row_bytes(fmt, K);
        for (int64_t t = lo; t < hi; t++) {
            const float *x = (const float *)llm__tensor_row(job->x, t);
            uint8_t *out = (uint8_t *)job->xq_base[i] + (size_t)t * stride;
            if (fmt == LLM__DPBF16_ACT) {
                for (int64_t k = 0; k < K; k++) ((uint16_t *)(void *)out)[k] = llm__fp32_to_bf16(x[k]);
            } else if (fmt >= LLM__HALF_ACT) llm__round_half_row(fmt - LLM__HALF_ACT, x, (float *)(void *)out, K);
            else if (fmt >= LLM__X16_ACT) llm__x16_quantize_act(fmt - LLM__X16_ACT, x, out, K);
            else if (fmt >= LLM__SC_ACT) {
                const int vt = fmt - LLM__SC_ACT;
                const int64_t nb = K / LLM__QK;
                const size_t bb =
                    vt == LLM__TYPE_Q8_1 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
                float *sc = (float *)(void *)(out + LLM__SC_OFF((size_t)nb * bb));
                for (int64_t i = 0; i < nb; i++) {   // the blocks as llm__quantize_row writes them
                    uint8_t *blk = out + (size_t)i * bb;
                    uint16_t h[2];
                    float df;
#if defined(LLM__X86_SIMD)   // (LLM__SC_ACT exists only there)
                    const int32_t sum = llm__quantize_q8_0_block_avx2(x + (size_t)i * LLM__QK,
                                                                      (int8_t *)(blk + bb - LLM__QK), &h[0], &df);
#else
                    int32_t sum = 0;
                    df = 0.0f;
                    assert(!"LLM__SC_ACT off x86");
#endif
                    h[1] = llm__fp32_to_fp16((float)sum * df);   // Q8_1's s, as llm__quantize_q8_1
                    memcpy(blk, h, vt == LLM__TYPE_Q8_1 ? 4 : 2);
                    sc[i] = llm__fp16_to_fp32(h[0]);
                    if (vt == LLM__TYPE_Q8_1) sc[nb + i] = llm__fp16_to_fp32(h[1]);
                }
            }
#if defined(LLM__X86_SIMD)
            else if (fmt == LLM__TYPE_Q8_K && job->c->simd == LLM__SIMD_AVX512)
                llm__quantize_q8_K_avx512(x, (struct llm__block_q8_K *)(void *)out, K / LLM__QK_K);
#endif
            else llm__quantize_row(fmt, x, out, K);
        }
    }
}

static void llm__cpu_mm_quantize_worker(void *arg, int ith, int nth) {
    int64_t lo, hi;
    struct llm__cpu_mm_job *job = arg;
    llm__split(job->ntok, ith, nth, &lo, &hi);
    llm__cpu_mm_quantize(job, lo, hi);
}

// Tokens per tile of a prefill product: their activations (a few KB each) stay in L2 while a
// chunk of weight rows is walked.
#define LLM__MM_TOKEN_TILE 32

#if defined(LLM__X86_SIMD)
static void llm__cpu_mm_kt(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias);

// Rows [r0, r1) of x16 weight j (r0, r1 multiples of 16) for every token: token blocks sized to
// stay in L2, then tiles of 16 rows x 8 tokens.
static void llm__cpu_mm_x16(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const size_t stride = job->xq_stride[j], rec_bytes = llm__x16_group_bytes(w->type, K);
    const int64_t tb = LLM__MAX(8, LLM__MIN(job->ntok, (int64_t)((512u << 10) / stride) & ~(int64_t)7));
    const bool q8k = llm__x16_q8k(w->type);   // Q8_K activations (kt tiles from LLM__KT_MIN_TOKENS on)
    const int tile = w->type == LLM__TYPE_Q3_K || w->type == LLM__TYPE_Q2_K ? 4 : 8;   // tokens per call
    const struct llm__tensor d = job->dst[j];
    if (q8k && job->ntok >= LLM__KT_MIN_TOKENS) {
        llm__cpu_mm_kt(job, j, r0, r1, bias);
        return;
    }
    for (int64_t t0 = 0; t0 < job->ntok; t0 += tb) {
        int64_t t1 = LLM__MIN(t0 + tb, job->ntok);
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *rec = (const uint8_t *)w->buf.data + (size_t)(r / 16) * rec_bytes;
            for (int64_t t = t0; t < t1; t += tile) {
                int nt = (int)LLM__MIN(tile, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                const uint8_t *act = (const uint8_t *)job->xq[j] + (size_t)t * stride;
                if (w->type == LLM__TYPE_Q4_K)
                    llm__x16k_tile_avx512(nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                else if (q8k) llm__x16q8k_tile_avx512(w->type, nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                else llm__x16_tile_avx512(w->type, nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                if (bias)
                    for (int i = 0; i < nt; i++)
                        for (int k = 0; k < 16; k++) out[(size_t)i * (d.nb1 / sizeof(float)) + k] += bias[r + k];
            }
        }
    }
}
#endif

#if defined(LLM__X86_SIMD)
// Rows [r0, r1) (multiples of 16) of x16 weight j of a type llm__x16_q8k names (Q2_K, Q3_K, Q5_K, Q6_K,
// IQ4_XS) for every token, a tile of 16 rows x one super-block at a time (see "K-quant tiles" in
// backends/cpu_tiles.c).
static void llm__cpu_mm_kt(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0, nsb = K / LLM__QK_K;
    const size_t stride = job->xq_stride[j], rec_bytes = llm__x16_group_bytes(w->type, K);
    const int type = w->type == LLM__TYPE_Q3_K ? LLM__KT_X16Q3 : w->type;
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    struct llm__kt_tile tile;
    for (int64_t r = r0; r < r1; r += 16) {
        for (int64_t sb = 0; sb < nsb; sb++) {
            const uint8_t *rec = (const uint8_t *)w->buf.data + (size_t)(r / 16) * rec_bytes;
            if (type == LLM__KT_X16Q3) llm__kt_unpack_x16q3(rec, nsb, sb, &tile);
            else if (type == LLM__TYPE_Q2_K) llm__kt_unpack_x16q2(rec, sb, &tile);
            else if (type == LLM__TYPE_IQ4_XS) llm__kt_unpack_x16iq4(rec, sb, &tile);
            else if (type == LLM__TYPE_Q6_K) llm__kt_unpack_x16q6(rec, sb, &tile);
            else llm__kt_unpack_x16q5(rec, sb, &tile);
            for (int64_t t = 0; t < job->ntok; t += 8) {
                const uint8_t *act =
                    (const uint8_t *)job->xq[j] + (size_t)t * stride + (size_t)sb * sizeof(struct llm__block_q8_K);
                llm__kt_tokens_avx512(type, (int)LLM__MIN(8, job->ntok - t), &tile, act, stride,
                                      (float *)llm__tensor_row(d, t) + r, os, sb == 0);
            }
        }
        if (bias)
            for (int64_t t = 0; t < job->ntok; t++)
                for (int k = 0; k < 16; k++) ((float *)llm__tensor_row(d, t))[r + k] += bias[r + k];
    }
}
#endif

#if defined(LLM__X86_SIMD)
// --- F16 and BF16 weights on AVX-512: a register tile of rows x tokens ---
//
// A row of half-precision weights is widened to floats once per tile and multiplied with up to
// 8 tokens (a verification step of speculative decoding, a prompt) instead of once per token.
// The activations are rounded to the weight's half type, as the per-row dot products (and
// ggml) do, but kept as floats so that the tile loads them without a conversion. Each (row,
// token) pair has one accumulator summed in column order and reduced the same way whatever the
// tile's shape, so a token's result does not depend on how many tokens share the step (greedy
// decoding with and without drafts is the same text).

#define LLM__HALF_NT 8   // tokens a tile at most (AVX-512; 7 and 8 with at most 3 rows)

// A step of 7 or 8 tokens (verifying 6 or 7 drafts): one tile of 3 rows (llm__cpu_mm_half), in
// chunks of 48 rows where they stay many enough (llm__cpu_matmul).
static inline bool llm__half_tile3(enum llm__simd simd, int64_t ntok) {
    return simd == LLM__SIMD_AVX512 && ntok > 6 && ntok <= LLM__HALF_NT;
}

LLM__AVX512 static inline __attribute__((always_inline)) __m512 llm__half16_to_ps(bool bf16, __m256i h) {
    return bf16 ? llm__bf16x16_to_ps(h) : _mm512_cvtph_ps(h);
}

// out[t * os + r] (r < NR, t < NT) = row r of w (ws elements apart) . token t of a (as floats apart) over K.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__half_tile(bool bf16, bool pf, int NR, int NT,
                                                                             const uint16_t *w, size_t ws,
                                                                             const float *a, size_t as, int64_t K,
                                                                             float *out, size_t os) {
    __m512 acc[4][LLM__HALF_NT];   // (all set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < LLM__HALF_NT; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wv[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        // the tile's rows are one block of memory (NR * K halves); the block two tiles ahead is
        // prefetched in address order, the bytes this step reads (NR * 32) at a time, as one
        // stream: the hardware prefetchers alone, or a prefetch of the same columns of the next
        // rows, leave the core waiting on these short rows (only in the first token tile of a
        // group: pf)
        if (pf) {
            const char *p = (const char *)(w + (size_t)2 * NR * ws) + (size_t)k * 2 * NR;
            _Pragma("GCC unroll 2")
            for (int r = 0; r < NR; r += 2) _mm_prefetch(p + 64 * (r / 2), _MM_HINT_T0);
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            wv[r] = llm__half16_to_ps(bf16, _mm256_loadu_si256((const __m256i *)(w + r * ws + k)));
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) {
            __m512 av = _mm512_loadu_ps(a + t * as + k);
            // 3 rows: a token's 16 columns loaded once for the rows (the asm keeps the compiler
            // from folding a load into each multiply-add instead: 3 rows x 7 tokens 3-5% faster)
            if (NR == 3) __asm__("" : "+v"(av));
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (k < K) {
        const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 wv[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) wv[r] = llm__half16_to_ps(bf16, _mm256_maskz_loadu_epi16(m, w + r * ws + k));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) {
            const __m512 av = _mm512_maskz_loadu_ps(m, a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) out[t * os + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// switch (nr, nt) over 1..4 x 1..LLM__HALF_NT, calling CALL(NR, NT) with constants (the
// accumulators stay in registers); LLM_GENERIC_TILES: once,
// with variables (see LLM__NT_SWITCH)
#if defined(LLM_GENERIC_TILES)
#define LLM__HALF_SWITCH(CALL) CALL(nr, nt);
#else
#define LLM__HALF_NR(CALL, NT)                                                                         \
    switch (nr) {                                                                                      \
    case 1: CALL(1, NT); return;                                                                       \
    case 2: CALL(2, NT); return;                                                                       \
    case 3: CALL(3, NT); return;                                                                       \
    default: CALL(4, NT); return;                                                                      \
    }
#define LLM__HALF_NR3(CALL, NT)                                                                        \
    switch (nr) {                                                                                      \
    case 1: CALL(1, NT); return;                                                                       \
    case 2: CALL(2, NT); return;                                                                       \
    default: CALL(3, NT); return;                                                                      \
    }
#define LLM__HALF_SWITCH(CALL)                                                                         \
    switch (nt) {                                                                                      \
    case 1: LLM__HALF_NR(CALL, 1)                                                                      \
    case 2: LLM__HALF_NR(CALL, 2)                                                                      \
    case 3: LLM__HALF_NR(CALL, 3)                                                                      \
    case 4: LLM__HALF_NR(CALL, 4)                                                                      \
    case 5: LLM__HALF_NR(CALL, 5)                                                                      \
    case 6: LLM__HALF_NR(CALL, 6)                                                                      \
    case 7: LLM__HALF_NR3(CALL, 7)                                                                     \
    default: LLM__HALF_NR3(CALL, 8)                                                                    \
    }
#endif
#define LLM__HALF_TILES(BF)                                                                            \
    LLM__AVX512 static void llm__half_tile_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const void *a, \
                                                size_t as, int64_t K, float *out, size_t os) {          \
        LLM__HALF_SWITCH(LLM__HALF_CALL_##BF)                                                          \
    }
#define LLM__HALF_CALL_false(NR, NT) llm__half_tile(false, pf, NR, NT, w, ws, a, as, K, out, os)
#define LLM__HALF_CALL_true(NR, NT) llm__half_tile(true, pf, NR, NT, w, ws, a, as, K, out, os)
LLM__HALF_TILES(false)
LLM__HALF_TILES(true)
#undef LLM__HALF_TILES
#undef LLM__HALF_CALL_false
#undef LLM__HALF_CALL_true

// BF16 weights where the CPU has AVX512-BF16: the activations rounded to BF16 as above but kept
// as BF16, and vdpbf16ps multiplies 32 columns of a row with a token's and adds each pair of
// products into one lane (2 columns a lane, a lane's pairs in column order). The products of
// two BF16 values are exact in f32, so a sum differs from the float tile's only in the order of
// its additions (and denormals flushed to zero). No conversion: twice the columns an
// instruction, as a decode step's one row reads the same bytes.
LLM__AVX512BF16 static inline __attribute__((always_inline)) void llm__dpbf16_tile(bool pf, int NR, int NT,
                                                                                    const uint16_t *w, size_t ws,
                                                                                    const uint16_t *a, size_t as,
                                                                                    int64_t K, float *out, size_t os) {
    __m512 acc[4][LLM__HALF_NT];   // (all set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 8")
        for (int t = 0; t < LLM__HALF_NT; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
        const __mmask32 m = K - k >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (K - k)) - 1);
        __m512i wv[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                         _mm512_setzero_si512()};
        if (pf) {   // as llm__half_tile: the block two tiles ahead, NR * 64 bytes a step
            const char *p = (const char *)(w + (size_t)2 * NR * ws) + (size_t)k * 2 * NR;
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) _mm_prefetch(p + 64 * r, _MM_HINT_T0);
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) wv[r] = _mm512_maskz_loadu_epi16(m, w + r * ws + k);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) {
            const __m512i av = _mm512_maskz_loadu_epi16(m, a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], (__m512bh)av);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) out[t * os + r] = _mm512_reduce_add_ps(acc[r][t]);
}

#define LLM__DPBF16_CALL(NR, NT) llm__dpbf16_tile(pf, NR, NT, w, ws, a, as, K, out, os)
LLM__AVX512BF16 static void llm__dpbf16_tiles(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const void *a,
                                              size_t as, int64_t K, float *out, size_t os) {
    LLM__HALF_SWITCH(LLM__DPBF16_CALL)
}
#undef LLM__DPBF16_CALL
#undef LLM__HALF_SWITCH
#undef LLM__HALF_NR
#undef LLM__HALF_NR3

// The same on AVX2: 8 columns a step, one accumulator per (row, token) pair, tiles of at most
// 8 pairs (16 registers); the columns after the last multiple of 8 come zero-padded. The rows
// two tiles ahead are prefetched (pf): 4 rows read at once defeat the hardware prefetcher
// (decode fell from 48 to 37 tokens/s on SmolLM2 F16 without it).
LLM__AVX2 static inline __attribute__((always_inline)) __m256 llm__half8_to_ps(bool bf16, const uint16_t *p) {
    return bf16 ? llm__load_bf16x8(p) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

LLM__AVX2 static inline __attribute__((always_inline)) void llm__half_tile8(bool bf16, bool pf, int NR, int NT,
                                                                            const uint16_t *w, size_t ws,
                                                                            const float *a, size_t as, int64_t K,
                                                                            float *out, size_t os) {
    __m256 acc[4][4];   // (all set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < 4; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            if (pf && (k & 31) == 0) _mm_prefetch((const char *)(w + (size_t)(2 * NR + r) * ws + k), _MM_HINT_T0);
            wv[r] = llm__half8_to_ps(bf16, w + r * ws + k);
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m256 av = _mm256_loadu_ps(a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (k < K) {
        const int m = (int)(K - k);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 wv[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            uint16_t h[8] = {0};
            memcpy(h, w + r * ws + k, (size_t)m * sizeof(uint16_t));
            wv[r] = llm__half8_to_ps(bf16, h);
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m256 av = _mm256_maskload_ps(a + t * as + k, mask);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) out[t * os + r] = llm__hsum_avx2(acc[r][t]);
}

#if defined(LLM_GENERIC_TILES)
#define LLM__HALF_TILES8(BF)                                                                           \
    LLM__AVX2 static void llm__half_tile8_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const void *a, \
                                               size_t as, int64_t K, float *out, size_t os) {           \
        llm__half_tile8(BF, pf, nr, nt, w, ws, a, as, K, out, os);                                     \
    }
#else
#define LLM__HALF_TILES8(BF)                                                                           \
    LLM__AVX2 static void llm__half_tile8_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const void *a, \
                                               size_t as, int64_t K, float *out, size_t os) {           \
        switch ((nr - 1) * 4 + nt - 1) {                                                               \
        case 0: llm__half_tile8(BF, pf, 1, 1, w, ws, a, as, K, out, os); return;                         \
        case 1: llm__half_tile8(BF, pf, 1, 2, w, ws, a, as, K, out, os); return;                         \
        case 2: llm__half_tile8(BF, pf, 1, 3, w, ws, a, as, K, out, os); return;                         \
        case 3: llm__half_tile8(BF, pf, 1, 4, w, ws, a, as, K, out, os); return;                         \
        case 4: llm__half_tile8(BF, pf, 2, 1, w, ws, a, as, K, out, os); return;                         \
        case 5: llm__half_tile8(BF, pf, 2, 2, w, ws, a, as, K, out, os); return;                         \
        case 6: llm__half_tile8(BF, pf, 2, 3, w, ws, a, as, K, out, os); return;                         \
        case 8: llm__half_tile8(BF, pf, 3, 1, w, ws, a, as, K, out, os); return;                         \
        case 12: llm__half_tile8(BF, pf, 4, 1, w, ws, a, as, K, out, os); return;                        \
        default: llm__half_tile8(BF, pf, 2, 4, w, ws, a, as, K, out, os); return;                        \
        }                                                                                              \
    }
#endif
LLM__HALF_TILES8(false)
LLM__HALF_TILES8(true)
#undef LLM__HALF_TILES8

// --- Block-32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) on AVX2: a row times up to 4 tokens ---
//
// The row's blocks are unpacked once for the tokens of the tile. Each token's arithmetic is the
// per-row dot product's (llm__vec_dot_*_avx2, which a decode step runs): the same integer sums,
// even blocks into one accumulator and odd ones into another, the same final sums; so a token's
// result does not depend on how many tokens share the step.

static bool llm__b32_tiled(int type) {
    return type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0 || type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_0 ||
           type == LLM__TYPE_Q5_1 || type == LLM__TYPE_IQ4_NL;
}

// Block i of a row of `type` times the tokens' blocks i into acc[t]; the tokens' activations
// are LLM__SC_ACT rows (their scales as floats after the blocks).
LLM__AVX2 static inline __attribute__((always_inline)) void llm__b32_tile_step(int type, int NT, const uint8_t *w,
                                                                               const uint8_t *a, size_t as, int64_t nb,
                                                                               int64_t i, __m256 *acc) {
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes,
                 ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);
    const uint8_t *wi = w + (size_t)i * wb;
    uint16_t wd;
    memcpy(&wd, wi, 2);
    // the weights as bytes: signed (Q8_0, IQ4_NL: |w| and the signs), else unsigned
    __m256i q, qa = _mm256_setzero_si256();
    if (type == LLM__TYPE_Q8_0)
        q = _mm256_loadu_si256((const __m256i *)((const struct llm__block_q8_0 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_Q4_0) q = llm__nibbles_avx2(((const struct llm__block_q4_0 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_Q4_1) q = llm__nibbles_avx2(((const struct llm__block_q4_1 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_IQ4_NL)
        q = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                llm__nibbles_avx2(((const struct llm__block_iq4_nl *)(const void *)wi)->qs));
    else {
        const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)(const void *)wi)->qs
                                                   : ((const struct llm__block_q5_1 *)(const void *)wi)->qs;
        const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)(const void *)wi)->qh
                                                   : ((const struct llm__block_q5_1 *)(const void *)wi)->qh;
        q = _mm256_or_si256(llm__nibbles_avx2(qs), _mm256_and_si256(llm__qh_bytes_avx2(qh), _mm256_set1_epi8(16)));
    }
    if (type == LLM__TYPE_Q8_0 || type == LLM__TYPE_IQ4_NL) qa = _mm256_sign_epi8(q, q);
    const __m256 wdv = _mm256_set1_ps(_cvtsh_ss(wd));
    const __m256i ones = _mm256_set1_epi16(1);
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++) {
        const uint8_t *at = a + (size_t)t * as;
        const __m256i av = _mm256_loadu_si256((const __m256i *)(at + (size_t)i * ab + qoff));
        __m256i p;
        if (type == LLM__TYPE_Q8_0 || type == LLM__TYPE_IQ4_NL) p = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(av, q));
        else if (type == LLM__TYPE_Q4_0)
            p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, av), _mm256_maddubs_epi16(_mm256_set1_epi8(8), av));
        else if (type == LLM__TYPE_Q5_0)
            p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, av), _mm256_maddubs_epi16(_mm256_set1_epi8(16), av));
        else p = _mm256_maddubs_epi16(q, av);
        p = _mm256_madd_epi16(p, ones);
        // d_w * d_a in every lane, as the dot product's scalar product
        const __m256 sc = _mm256_mul_ps(
            wdv, _mm256_broadcast_ss((const float *)(const void *)(at + LLM__SC_OFF((size_t)nb * ab)) + i));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc[t]);
    }
}

// out[t * os] = the row of nb blocks at w . token t of a (as bytes apart), t < NT.
LLM__AVX2 static inline __attribute__((always_inline)) void llm__b32_tile(int type, int NT, const uint8_t *w,
                                                                          const uint8_t *a, size_t as, int64_t nb,
                                                                          float *out, size_t os) {
    __m256 acc0[4], acc1[4];   // (all 4 set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int t = 0; t < 4; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        llm__b32_tile_step(type, NT, w, a, as, nb, i, acc0);
        llm__b32_tile_step(type, NT, w, a, as, nb, i + 1, acc1);
    }
    if (i < nb) llm__b32_tile_step(type, NT, w, a, as, nb, i, acc0);
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes,
                 ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    // as the dot products: the mins' terms (Q4_1, Q5_1) summed over even and odd blocks apart
    float summ0[4] = {0}, summ1[4] = {0};
    if (q81) {
        const float *ss[4];
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++)
            ss[t] = (const float *)(const void *)(a + (size_t)t * as + LLM__SC_OFF((size_t)nb * ab)) + nb;
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            uint16_t m0, m1;
            memcpy(&m0, w + (size_t)b * wb + 2, 2);
            memcpy(&m1, w + (size_t)(b + 1) * wb + 2, 2);
            const float f0 = _cvtsh_ss(m0), f1 = _cvtsh_ss(m1);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < NT; t++) {
                summ0[t] += f0 * ss[t][b];
                summ1[t] += f1 * ss[t][b + 1];
            }
        }
        if (b < nb) {
            uint16_t m0;
            memcpy(&m0, w + (size_t)b * wb + 2, 2);
            const float f0 = _cvtsh_ss(m0);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < NT; t++) summ0[t] += f0 * ss[t][b];
        }
    }
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++) {
        float s = llm__hsum_avx2(_mm256_add_ps(acc0[t], acc1[t]));
        if (type != LLM__TYPE_Q8_0 && type != LLM__TYPE_Q4_0) s += summ0[t] + summ1[t];
        out[(size_t)t * os] = s;
    }
}

#if defined(LLM_GENERIC_TILES)
#define LLM__B32_TILES(T, NAME)                                                                                  \
    LLM__AVX2 static void llm__b32_tile_##NAME(int nt, const uint8_t *w, const uint8_t *a, size_t as, int64_t nb, \
                                               float *out, size_t os) {                                          \
        llm__b32_tile(T, LLM__MIN(nt, 4), w, a, as, nb, out, os);                                                \
    }
#else
#define LLM__B32_TILES(T, NAME)                                                                                  \
    LLM__AVX2 static void llm__b32_tile_##NAME(int nt, const uint8_t *w, const uint8_t *a, size_t as, int64_t nb, \
                                               float *out, size_t os) {                                          \
        switch (nt) {                                                                                            \
        case 1: llm__b32_tile(T, 1, w, a, as, nb, out, os); return;                                              \
        case 2: llm__b32_tile(T, 2, w, a, as, nb, out, os); return;                                              \
        case 3: llm__b32_tile(T, 3, w, a, as, nb, out, os); return;                                              \
        default: llm__b32_tile(T, 4, w, a, as, nb, out, os); return;                                             \
        }                                                                                                        \
    }
#endif
LLM__B32_TILES(LLM__TYPE_Q8_0, q8_0)
LLM__B32_TILES(LLM__TYPE_Q4_0, q4_0)
LLM__B32_TILES(LLM__TYPE_Q4_1, q4_1)
LLM__B32_TILES(LLM__TYPE_Q5_0, q5_0)
LLM__B32_TILES(LLM__TYPE_Q5_1, q5_1)
LLM__B32_TILES(LLM__TYPE_IQ4_NL, iq4_nl)
#undef LLM__B32_TILES

// Rows [r0, r1) of block-32 weight j for every token, on AVX2: token blocks of
// LLM__MM_TOKEN_TILE, each row against 4 tokens at a time.
static void llm__cpu_mm_b32(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0, nb = K / LLM__QK;
    const size_t wrow = llm__row_bytes(w->type, K), as = job->xq_stride[j];
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    void (*tile)(int, const uint8_t *, const uint8_t *, size_t, int64_t, float *, size_t) =
        w->type == LLM__TYPE_Q8_0   ? llm__b32_tile_q8_0
        : w->type == LLM__TYPE_Q4_0 ? llm__b32_tile_q4_0
        : w->type == LLM__TYPE_Q4_1 ? llm__b32_tile_q4_1
        : w->type == LLM__TYPE_Q5_0 ? llm__b32_tile_q5_0
        : w->type == LLM__TYPE_Q5_1 ? llm__b32_tile_q5_1
                                    : llm__b32_tile_iq4_nl;
    for (int64_t t0 = 0; t0 < job->ntok; t0 += LLM__MM_TOKEN_TILE) {
        const int64_t t1 = LLM__MIN(t0 + LLM__MM_TOKEN_TILE, job->ntok);
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *wr = (const uint8_t *)w->buf.data + (size_t)r * wrow;
            for (int64_t t = t0; t < t1; t += 4) {
                const int nt = (int)LLM__MIN(4, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                tile(nt, wr, (const uint8_t *)job->xq[j] + (size_t)t * as, as, nb, out, os);
                if (bias)
                    for (int i = 0; i < nt; i++) out[(size_t)i * os] += bias[r];
            }
        }
    }
}

// Rows [r0, r1) of F16 or BF16 weight j for every token: token blocks whose activations stay in
// L2, then tiles of up to 4 rows x 6 tokens, or 3 rows x 7-8 (AVX2: 2 rows x 4 tokens).
static void llm__cpu_mm_half(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const bool dp = job->fmt[j] == LLM__DPBF16_ACT;
    const size_t as = job->xq_stride[j] / (dp ? sizeof(uint16_t) : sizeof(float)), ws = (size_t)K;
    const int64_t tb = LLM__MAX(8, LLM__MIN(job->ntok, (int64_t)((768u << 10) / job->xq_stride[j]) & ~(int64_t)7));
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    const bool bf16 = w->type == LLM__TYPE_BF16, wide = job->c->simd == LLM__SIMD_AVX512;
    void (*tile)(bool, int, int, const uint16_t *, size_t, const void *, size_t, int64_t, float *, size_t) =
        dp     ? llm__dpbf16_tiles
        : wide ? (bf16 ? llm__half_tile_true : llm__half_tile_false)
               : (bf16 ? llm__half_tile8_true : llm__half_tile8_false);
    // AVX-512: 1 row at a time for 1 token (a decode step: the weights read in address order;
    // SmolLM2-135M F16 decoded at 107 tokens/s instead of 69 with 4-row tiles on 2 Zen 4 cores),
    // else 4 rows x the token block in even tiles of at most 6 tokens (a verification step of 5
    // or 9 tokens in one or two tiles, each row widened once per tile; tiles of 3 rows x 8 tokens
    // made a 512-token prompt 15% slower), but a block of 7 or 8 tokens (verifying 6 or 7
    // drafts) in one tile of 3 rows (10% faster than 4 rows x 4 + 3 or 4 + 4 on SmolLM2 F16, 2
    // Zen 4 cores); AVX2: 4 rows x 1 token alone, else 2 rows x 4 tokens
    const int64_t tmax = wide ? 6 : 4;
    for (int64_t t0 = 0; t0 < job->ntok; t0 += tb) {
        const int64_t t1 = LLM__MIN(t0 + tb, job->ntok), ntiles = (t1 - t0 + tmax - 1) / tmax;
        const bool t8 = llm__half_tile3(job->c->simd, job->ntok);
        const int64_t tt = t8 ? t1 - t0 : (t1 - t0 + ntiles - 1) / ntiles;   // tokens a tile
        const int RS = wide ? (job->ntok == 1 ? 1 : t8 ? 3 : 4) : job->ntok == 1 ? 4 : 2;
        for (int64_t r = r0; r < r1; r += RS) {
            const int nr = (int)LLM__MIN(RS, r1 - r);
            const uint16_t *wr = (const uint16_t *)w->buf.data + (size_t)r * ws;
            for (int64_t t = t0; t < t1; t += tt) {
                const int nt = (int)LLM__MIN(tt, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                tile(t == t0 && r + 3 * RS <= w->ne1, nr, nt, wr, ws, job->xq[j] + (size_t)t * job->xq_stride[j], as,
                     K, out, os);
                if (bias)
                    for (int i = 0; i < nt; i++)
                        for (int k = 0; k < nr; k++) out[(size_t)i * os + k] += bias[r + k];
            }
        }
    }
}
#endif

static void llm__cpu_mm_worker(void *arg, int ith, int nth) {
    struct llm__cpu_mm_job *job = arg;
    const int64_t K = job->x.ne0;
    for (int64_t ch; (ch = llm__cursors_next(job->c, ith, nth)) >= 0;) {
        int j = 0;
        while (ch >= job->chunk_start[j + 1]) j++;
        const struct llm__weight *w = job->w[j];
        const llm__vec_dot_fn dot = job->c->vec_dot[w->type];
        const size_t wrow = llm__row_bytes(w->type, K);
        const int64_t r0 = (ch - job->chunk_start[j]) * job->rows_per_chunk;
        const int64_t r1 = LLM__MIN(r0 + job->rows_per_chunk, w->ne1);
        const struct llm__tensor d = job->dst[j];
        const float *bias = job->bias && job->bias[j].buf ? (const float *)llm__tensor_row(job->bias[j], 0) : NULL;
#if defined(LLM__X86_SIMD)
        if (w->layout == LLM__LAYOUT_X16) {
            llm__cpu_mm_x16(job, j, r0, r1, bias);
            continue;
        }
        if (job->fmt[j] >= LLM__HALF_ACT) {
            llm__cpu_mm_half(job, j, r0, r1, bias);
            continue;
        }
        if (job->fmt[j] >= LLM__SC_ACT && job->fmt[j] < LLM__X16_ACT) {
            llm__cpu_mm_b32(job, j, r0, r1, bias);
            continue;
        }
#endif
        for (int64_t t0 = 0; t0 < job->ntok; t0 += LLM__MM_TOKEN_TILE) {
            int64_t t1 = LLM__MIN(t0 + LLM__MM_TOKEN_TILE, job->ntok);
            for (int64_t r = r0; r < r1; r++) {
                const char *wr = (const char *)w->buf.data + (size_t)r * wrow;
                float b = bias ? bias[r] : 0.0f;
                for (int64_t t = t0; t < t1; t++) {
                    float s;
                    dot(K, &s, wr, job->xq[j] + (size_t)t * job->xq_stride[j]);
                    ((float *)llm__tensor_row(d, t))[r] = s + b;
                }
            }
        }
    }
}

static void llm__cpu_matmul(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                            const struct llm__tensor *bias, struct llm__tensor x) {
    struct llm__cpu *c = ctx;
    assert(n >= 1 && n <= LLM__MAX_MATMUL_WEIGHTS);
    struct llm__cpu_mm_job job = {.c = c, .n = n, .dst = dst, .w = w, .bias = bias, .x = x, .ntok = x.ne1};
    // Activations: one copy per distinct dot type, F32 read in place.
    char *scratch = c->scratch;
    for (int j = 0; j < n; j++) {
        int vt = llm__type_info((uint32_t)w[j]->type)->vec_dot_type;
        if (w[j]->layout == LLM__LAYOUT_X16 && !llm__x16_q8k(w[j]->type))
            vt = LLM__X16_ACT + w[j]->type;   // (x16 K-quants but Q4_K, and IQ4_XS, read Q8_K: their dot type)
#if defined(LLM__X86_SIMD)
        if (c->simd == LLM__SIMD_AVX2 && w[j]->layout == LLM__LAYOUT_PLAIN && llm__b32_tiled(w[j]->type))
            vt += LLM__SC_ACT;
#endif
        if ((c->simd == LLM__SIMD_AVX512 || c->simd == LLM__SIMD_AVX2) &&
            (w[j]->type == LLM__TYPE_F16 || w[j]->type == LLM__TYPE_BF16))
            vt = c->dpbf16 && w[j]->type == LLM__TYPE_BF16 ? LLM__DPBF16_ACT : LLM__HALF_ACT + w[j]->type;
        job.fmt[j] = vt;
        if (vt == LLM__TYPE_F32) {
            job.xq[j] = llm__tensor_row(x, 0);
            job.xq_stride[j] = x.nb1;
            continue;
        }
        int i = 0;
        while (i < job.n_types && job.types[i] != vt) i++;
        if (i == job.n_types) {
            job.types[i] = vt;
            job.xq_base[i] = scratch;
            scratch += ((llm__act_row_bytes(vt, x.ne0) * (size_t)x.ne1) + 63) & ~(size_t)63;
            job.n_types++;
        }
        job.xq[j] = job.xq_base[i];
        job.xq_stride[j] = llm__act_row_bytes(vt, x.ne0);
    }
    assert((size_t)(scratch - (char *)c->scratch) <= c->scratch_size);
    if (job.n_types) {
        if (job.ntok < 4) llm__cpu_mm_quantize(&job, 0, job.ntok);
        else llm__pool_run(c->pool, llm__cpu_mm_quantize_worker, &job);
    }
    // Chunks of rows: about 32 KB of weights each (a thread walks its share of them in order).
    size_t row_bytes = llm__row_bytes(w[0]->type, x.ne0);
    job.rows_per_chunk = LLM__MAX(16, LLM__MIN(256, (int64_t)((32u << 10) / row_bytes))) & ~(int64_t)15;
    // (F16/BF16 weights, 7 or 8 tokens: a multiple of the half tiles' 3 rows, llm__cpu_mm_half; a
    // 16-row chunk's last row alone took a tenth of the time: 4-6% faster on SmolLM2 F16; where
    // that leaves 4 chunks a thread or more)
#if defined(LLM__X86_SIMD)
    if (job.fmt[0] >= LLM__HALF_ACT && llm__half_tile3(c->simd, job.ntok) &&
        w[0]->ne1 / 48 >= 4 * (int64_t)llm__pool_nth(c->pool))
        job.rows_per_chunk = (job.rows_per_chunk + 47) / 48 * 48;
#endif
    job.chunk_start[0] = 0;
    for (int j = 0; j < n; j++)
        job.chunk_start[j + 1] = job.chunk_start[j] + (w[j]->ne1 + job.rows_per_chunk - 1) / job.rows_per_chunk;
    llm__cursors_init(c, job.chunk_start[n]);
    llm__pool_run(c->pool, llm__cpu_mm_worker, &job);
}

static enum llm_status llm__cpu_reserve_shape(void *ctx, const struct llm__shape *sh, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    // matmul: up to LLM__MAX_MATMUL_WEIGHTS quantized copies of the input (at most 4 bytes an element)
    size_t mm = (size_t)LLM__MAX_MATMUL_WEIGHTS * (((size_t)sh->max_tokens * (size_t)sh->max_cols * 4 + 64 * 4) + 64);
    size_t attn = llm__attn_scratch(sh->n_head / sh->n_head_kv, sh->head_dim, sh->block_size) * sizeof(float) *
                  (size_t)c->pool->n_threads;
    // matmul_id (backends/cpu_moe.c): two copies of max_tokens x n_expert_used input rows, the
    // slots grouped by expert
    const size_t slots = (size_t)sh->max_tokens * (size_t)sh->n_expert_used;
    size_t moe = 2 * ((slots * (size_t)sh->max_cols * 4) + 64) +
                 sizeof(int32_t) * (3 * (size_t)sh->n_expert + 1 + slots);
    c->head_dim = sh->head_dim;
    return llm__cpu_reserve(c, LLM__MAX(LLM__MAX(mm, attn), moe), e);
}

static const char *llm__cpu_device_name(void *ctx) {
    static const char *const names[] = {"scalar", "x86-64 AVX2", "x86-64 AVX-512 VNNI", "ARM NEON"};
    struct llm__cpu *c = ctx;
    return (size_t)c->simd < LLM__ARRAY_LEN(names) ? names[c->simd] : "cpu";
}
static size_t llm__cpu_mem_free(void *ctx) {
    (void)ctx;
    return llm__mem_available();
}

// --- the int8 compute peak (llm_measure_compute) ---
// Ten independent accumulator chains of the int8 dot instruction the CPU level's kernels use:
// AVX-512 VNNI's vpdpbusd (64 multiply-adds), AVX2's vpmaddubsw + vpmaddwd + vpaddd (32), NEON's
// sdot (16; without dot products smull + sadalp, 8). Each returns the multiply-adds done; *sink
// keeps the sums alive.

#define LLM__PEAK_CHAINS(T, init, step, sum)                                                       \
    T c0 = init(0), c1 = init(1), c2 = init(2), c3 = init(3), c4 = init(4), c5 = init(5), c6 = init(6),     \
      c7 = init(7), c8 = init(8), c9 = init(9);                                                       \
    for (int64_t i = 0; i < iters; i++) {                                                             \
        c0 = step(c0); c1 = step(c1); c2 = step(c2); c3 = step(c3); c4 = step(c4);                    \
        c5 = step(c5); c6 = step(c6); c7 = step(c7); c8 = step(c8); c9 = step(c9);                    \
    }                                                                                                 \
    T t = sum(sum(sum(sum(c0, c1), sum(c2, c3)), sum(sum(c4, c5), sum(c6, c7))), sum(c8, c9))

#if defined(LLM__X86_SIMD)
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__dpbusd_inplace(__m512i c, __m512i a, __m512i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
    return c;
}

LLM__AVX512 static int64_t llm__peak_avx512(int64_t iters, int32_t seed, int32_t *sink) {
    const __m512i a = _mm512_set1_epi8((char)(seed | 1)), b = _mm512_set1_epi8((char)(seed + 3));
    // (each step an in-place vpdpbusd: through the intrinsic GCC copies every accumulator each time)
#define LLM__STEP(x) llm__dpbusd_inplace(x, a, b)
    LLM__PEAK_CHAINS(__m512i, _mm512_set1_epi32, LLM__STEP, _mm512_add_epi32);
#undef LLM__STEP
    uint32_t v[16];   // (summed as unsigned: the chains wrap around, as the instruction does)
    _mm512_storeu_si512((void *)v, t);
    *sink = (int32_t)(v[0] + v[15]);
    return iters * 10 * 64;
}

LLM__AVX2 static int64_t llm__peak_avx2(int64_t iters, int32_t seed, int32_t *sink) {
    const __m256i a = _mm256_set1_epi8((char)(seed | 1)), b = _mm256_set1_epi8((char)(seed + 3)),
                  ones = _mm256_set1_epi16(1);
#define LLM__STEP(x) _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones))
    LLM__PEAK_CHAINS(__m256i, _mm256_set1_epi32, LLM__STEP, _mm256_add_epi32);
#undef LLM__STEP
    uint32_t v[8];
    _mm256_storeu_si256((__m256i *)(void *)v, t);
    *sink = (int32_t)(v[0] + v[7]);
    return iters * 10 * 32;
}
#endif

#if defined(LLM__NEON) && defined(__aarch64__)
static int64_t llm__peak_neon(int64_t iters, int32_t seed, int32_t *sink) {
    const int8x16_t a = vdupq_n_s8((int8_t)(seed | 1)), b = vdupq_n_s8((int8_t)(seed + 3));
#if defined(__ARM_FEATURE_DOTPROD)
#define LLM__STEP(x) vdotq_s32(x, a, b)
    const int64_t per = 16;
#else
#define LLM__STEP(x) vpadalq_s16(x, vmull_s8(vget_low_s8(a), vget_low_s8(b)))
    const int64_t per = 8;
#endif
    LLM__PEAK_CHAINS(int32x4_t, vdupq_n_s32, LLM__STEP, vaddq_s32);
#undef LLM__STEP
    *sink = vgetq_lane_s32(t, 0);
    return iters * 10 * per;
}
#endif
#undef LLM__PEAK_CHAINS

struct llm__peak_job {
    struct llm__cpu *c;
    int64_t iters;
    int64_t macs[64];
    int32_t sink[64];
};

static void llm__peak_worker(void *arg, int ith, int nth) {
    struct llm__peak_job *job = arg;
    (void)nth;
    int64_t m = 0;
    int32_t sink = 0;
#if defined(LLM__X86_SIMD)
    if (job->c->simd == LLM__SIMD_AVX512) m = llm__peak_avx512(job->iters, ith, &sink);
    else if (job->c->simd == LLM__SIMD_AVX2) m = llm__peak_avx2(job->iters, ith, &sink);
#endif
#if defined(LLM__NEON) && defined(__aarch64__)
    if (job->c->simd == LLM__SIMD_NEON) m = llm__peak_neon(job->iters, ith, &sink);
#endif
    if (ith < 64) job->macs[ith] = m, job->sink[ith] = sink;
}

// The best of 3 runs of about 50 ms each on every thread of the pool (after a warm-up run and
// one that sizes them).
static enum llm_status llm__cpu_compute_peak(void *ctx, double *gmacs, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    struct llm__peak_job job = {.c = c, .iters = 1 << 14};
    const int nth = LLM__MIN(llm__pool_nth(c->pool), 64);
    double best = 0;
    *gmacs = 0;
    for (int run = 0; run < 5; run++) {
        memset(job.macs, 0, sizeof(job.macs));
        const double t0 = llm__now();
        llm__pool_run(c->pool, llm__peak_worker, &job);
        const double t = llm__now() - t0;
        int64_t macs = 0;
        for (int i = 0; i < nth; i++) macs += job.macs[i];
        if (!macs)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "cpu: no int8 dot-product instructions to measure (a build or "
                             "CPU without AVX2, AVX-512 or NEON)");
        if (run >= 2) best = LLM__MAX(best, (double)macs / t / 1e9);
        if (run == 1) job.iters = LLM__MAX((int64_t)1, (int64_t)((double)job.iters * 0.05 / LLM__MAX(t, 1e-6)));
    }
    *gmacs = best;
    return LLM_OK;
}

LLM__INTERNAL const struct llm_backend_i llm__cpu_iface = {
    .name = "cpu",
    .free = llm__cpu_free,
    .buf_alloc = llm__cpu_buf_alloc,
    .buf_free = llm__cpu_buf_free,
    .weight_load = llm__cpu_weight_load,
    .weight_free = llm__cpu_weight_free,
    .upload = llm__cpu_upload,
    .download = llm__cpu_download,
    .reserve = llm__cpu_reserve_shape,
    .mem_free = llm__cpu_mem_free,
    .begin_step = llm__cpu_begin_step,
    .end_step = llm__cpu_end_step,
    .sync = NULL,   // each op returns when its pool job is done
    .embed = llm__cpu_embed,
    .rmsnorm = llm__cpu_rmsnorm,
    .matmul = llm__cpu_matmul,
    .rope = llm__cpu_rope,
    .kv_store = llm__cpu_kv_store,
    .attention = llm__cpu_attention,
    .silu_mul = llm__cpu_silu_mul,
    .add = llm__cpu_add,
    .get_rows = llm__cpu_get_rows,
    .scale = llm__cpu_scale,
    .gelu_mul = llm__cpu_gelu_mul,
    .swiglu_oai = llm__cpu_swiglu_oai,
    .rope_yarn = true,
    .attention_sinks = true,
    .attention_window = llm__cpu_attention,
    .gather_cols = llm__cpu_gather_cols,
    .weight_load_experts = llm__cpu_weight_load_experts,
    .moe_route = llm__cpu_moe_route,
    .matmul_id = llm__cpu_matmul_id,
    .moe_sum = llm__cpu_moe_sum,
    .device_name = llm__cpu_device_name,
    .bandwidth = NULL,   // no probe: a STREAM-like tool measures host memory better
    .compute_peak = llm__cpu_compute_peak,
};

// simd: the level to use, or -1 for the best this CPU runs.
static enum llm_status llm__cpu_backend_new(struct llm_backend *be, int n_threads, int simd, struct llm__err *e) {
    struct llm__cpu *c = calloc(1, sizeof(*c));
    if (!c) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    c->pool = llm__pool_new(n_threads, e);
    if (!c->pool) { free(c); return LLM_ERR_BACKEND; }
    c->cursors = llm__alloc(sizeof(struct llm__cursor) * (size_t)n_threads);
    if (!c->cursors) { llm__cpu_free(c); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    c->simd = simd < 0 ? llm__simd_best() : (enum llm__simd)simd;
    c->repack = true;
    c->dpbf16 = c->simd == LLM__SIMD_AVX512 && llm__cpu_has_avx512bf16();
    for (int t = 0; t < LLM__TYPE_COUNT; t++) {
        const struct llm__type_info *ti = llm__type_info((uint32_t)t);
        if (!ti || !ti->supported) continue;
        for (int lvl = (int)c->simd; lvl >= 0 && !c->vec_dot[t]; lvl--) {
            if (lvl == LLM__SIMD_NEON && c->simd != LLM__SIMD_NEON) continue;
            c->vec_dot[t] = llm__vec_dot_kernel(t, (enum llm__simd)lvl);
        }
    }
    be->iface = &llm__cpu_iface;
    be->ctx = c;
    return LLM_OK;
}

static enum llm_status llm__cpu_open(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e) {
    return llm__cpu_backend_new(be, p->n_threads, -1, e);
}

LLM__INTERNAL const struct llm__backend_desc llm__backend_cpu = {
    .kind = LLM_BACKEND_CPU, .name = "cpu", .open = llm__cpu_open, .list_devices = NULL,
};
