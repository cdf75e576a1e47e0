// The CPU backend's ops against simple references: matrix products (plain and repacked x16
// layouts, every weight type, 1..33 tokens) against the scalar dot product of the same quantized
// activations; paged attention (random block tables, ragged lengths, f16, f32 and q8_0 caches (its
// Walsh-Hadamard rotation against the matrix of its definition), AVX-512, AVX2 and scalar paths)
// against a float64 softmax; RoPE (both pair styles, frequency factors) and
// RMSNorm against float64. The backend contract: the check of required table entries, sync's
// failures reaching the caller, the device list and bandwidth probe of a CPU-only build. The
// thread pool: each part of a job runs exactly once, with more threads than cores; the tuner of
// its thread count settles on the fastest count and follows a change.
#include "../llm.c"
#include "test.h"

static unsigned long long seed = 7;

static struct llm_backend make_backend(int threads, int simd, bool repack) {
    struct llm_backend be;
    struct llm__err e;
    enum llm_status st = llm__cpu_backend_new(&be, threads, simd, &e);
    EXPECT(st == LLM_OK, "backend: %s", e.msg);
    struct llm__cpu *c = be.ctx;
    c->repack = repack;
    // Every op split `threads` ways whatever this machine's cores (the tuner off: one rung).
    c->pool->n_rungs = 1;
    llm__pool_set_active(c->pool, threads);
    return be;
}

static void reserve(struct llm_backend *be, int max_tokens, int64_t cols, int nh, int nkv, int hd, int bs) {
    struct llm__shape sh = {.max_tokens = max_tokens, .max_out = max_tokens, .max_seqs = 4, .max_blocks = 64,
                            .max_cols = cols, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .block_size = bs};
    struct llm__err e;
    EXPECT(be->iface->reserve(be->ctx, &sh, &e) == LLM_OK, "reserve: %s", e.msg);
}

// --- matmul ---

static void check_matmul_at(int simd, int type, int64_t K, int64_t N, int ntok, int threads, bool with_bias) {
    size_t rb = llm__row_bytes(type, K);
    float *wf = malloc(sizeof(float) * (size_t)K);
    uint8_t *w = malloc(rb * (size_t)N);
    for (int64_t r = 0; r < N; r++) {
        for (int64_t i = 0; i < K; i++) wf[i] = (float)test_rng_normal(&seed) * 0.05f;
        llm__quantize_row(type, wf, w + (size_t)r * rb, K);
    }
    float *x = malloc(sizeof(float) * (size_t)K * ntok), *bias = malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < K * ntok; i++) x[i] = (float)test_rng_normal(&seed);
    for (int64_t i = 0; i < N; i++) bias[i] = (float)test_rng_normal(&seed);
    // reference: scalar kernel on the plain layout, activations quantized the same way
    int vt = llm__type_info((uint32_t)type)->vec_dot_type;
    llm__vec_dot_fn dot = llm__vec_dot_kernel(type, LLM__SIMD_SCALAR);
    size_t ab = llm__row_bytes(vt, K);
    uint8_t *xq = malloc(ab * (size_t)ntok);
    double *want = malloc(sizeof(double) * (size_t)N * ntok);
    for (int t = 0; t < ntok; t++) llm__quantize_row(vt, x + (size_t)t * K, xq + (size_t)t * ab, K);
    for (int t = 0; t < ntok; t++)
        for (int64_t r = 0; r < N; r++) {
            float s;
            dot(K, &s, w + (size_t)r * rb, xq + (size_t)t * ab);
            want[(size_t)t * N + r] = (double)s + (with_bias ? bias[r] : 0.0);
        }
    float *plain = malloc(sizeof(float) * (size_t)N * ntok);   // pass 0's products
    // passes: plain layout, repacked, and (BF16 where the CPU has vdpbf16ps) repacked without it
    for (int pass = 0; pass < 3; pass++) {
        const bool repack = pass > 0;
        struct llm_backend be = make_backend(threads, simd, repack);
        struct llm__cpu *cpu = be.ctx;
        if (pass == 2 && !(type == LLM__TYPE_BF16 && cpu->dpbf16)) {
            be.iface->free(be.ctx);
            break;
        }
        if (pass == 2) cpu->dpbf16 = false;
        reserve(&be, ntok, K, 1, 1, 64, 16);
        struct llm__err e;
        struct llm__weight wt;
        EXPECT(be.iface->weight_load(be.ctx, &wt, type, K, N, w, &e) == LLM_OK, "weight_load: %s", e.msg);
        struct llm__buf xb, yb, bb;
        be.iface->buf_alloc(be.ctx, &xb, sizeof(float) * (size_t)K * ntok, &e);
        be.iface->buf_alloc(be.ctx, &yb, sizeof(float) * (size_t)N * ntok, &e);
        be.iface->buf_alloc(be.ctx, &bb, sizeof(float) * (size_t)N, &e);
        be.iface->upload(be.ctx, &xb, 0, x, sizeof(float) * (size_t)K * ntok);
        be.iface->upload(be.ctx, &bb, 0, bias, sizeof(float) * (size_t)N);
        struct llm__tensor xt = llm__vec_view(&xb, 0, K, ntok), yt = llm__vec_view(&yb, 0, N, ntok);
        struct llm__tensor bt = llm__vec_view(&bb, 0, N, 1);
        const struct llm__weight *ws[1] = {&wt};
        be.iface->matmul(be.ctx, 1, &yt, ws, with_bias ? &bt : NULL, xt);
        const float *y = yb.data;
        if (pass == 0) memcpy(plain, y, sizeof(float) * (size_t)N * ntok);
        // the x16 layouts that read Q8_K (K-quants but Q4_K, IQ4_XS) end each super-block as the plain
        // kernels do: the same bits
        if (wt.layout == LLM__LAYOUT_X16 && llm__x16_q8k(type))
            EXPECT(memcmp(plain, y, sizeof(float) * (size_t)N * ntok) == 0,
                   "matmul %s K=%lld N=%lld tokens=%d: x16 products differ from the plain kernel's bits",
                   llm__type_info((uint32_t)type)->name, (long long)K, (long long)N, ntok);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < (size_t)N * ntok; i++) scale = fmax(scale, fabs(want[i]));
        for (size_t i = 0; i < (size_t)N * ntok; i++) worst = fmax(worst, fabs((double)y[i] - want[i]) / scale);
        EXPECT(worst < 1e-5, "matmul simd=%d %s K=%lld N=%lld tokens=%d threads=%d layout=%s%s: relative error %.3g",
               simd, llm__type_info((uint32_t)type)->name, (long long)K, (long long)N, ntok, threads,
               wt.layout == LLM__LAYOUT_X16 ? "x16" : "plain", cpu->dpbf16 && type == LLM__TYPE_BF16 ? " vdpbf16ps" : "",
               worst);
        // batch invariance: each token's row equals, bit for bit, that token multiplied alone
        // (greedy decoding gives the same text whatever shares a step, speculative drafts included)
        if (ntok > 1) {
            float *alone = malloc(sizeof(float) * (size_t)N * ntok);
            for (int t = 0; t < ntok; t++) {
                struct llm__tensor x1 = llm__vec_view(&xb, sizeof(float) * (size_t)K * t, K, 1);
                be.iface->matmul(be.ctx, 1, &yt, ws, with_bias ? &bt : NULL, x1);
                memcpy(alone + (size_t)t * N, yb.data, sizeof(float) * (size_t)N);
            }
            be.iface->matmul(be.ctx, 1, &yt, ws, with_bias ? &bt : NULL, xt);
            int differ = 0;
            for (int t = 0; t < ntok; t++) differ += memcmp(alone + (size_t)t * N, (const float *)yb.data + (size_t)t * N, sizeof(float) * (size_t)N) != 0;
            EXPECT(differ == 0, "matmul simd=%d %s K=%lld N=%lld tokens=%d layout=%s: %d tokens differ from the token alone",
                   simd, llm__type_info((uint32_t)type)->name, (long long)K, (long long)N, ntok,
                   wt.layout == LLM__LAYOUT_X16 ? "x16" : "plain", differ);
            free(alone);
        }
        if (wt.layout == LLM__LAYOUT_X16) {
            // the embedding lookup of a repacked table gives the plain rows back
            float *got = malloc(sizeof(float) * (size_t)K), *ref = malloc(sizeof(float) * (size_t)K);
            int bad = 0;
            for (int64_t r = 0; r < N; r += N / 7 + 1) {
                llm__x16_row(type, wt.buf.data, r, got, K);
                llm__dequantize_row(type, w + (size_t)r * rb, ref, K);
                bad += memcmp(got, ref, sizeof(float) * (size_t)K) != 0;
            }
            EXPECT(bad == 0, "x16 row dequantization differs for %d rows", bad);
            free(got);
            free(ref);
        }
        be.iface->weight_free(be.ctx, &wt);
        be.iface->buf_free(be.ctx, &xb);
        be.iface->buf_free(be.ctx, &yb);
        be.iface->buf_free(be.ctx, &bb);
        be.iface->free(be.ctx);
    }
    free(wf); free(w); free(x); free(bias); free(xq); free(want); free(plain);
}

// MXFP4 weights are repacked (AVX-512) only when every block's scale fits fp16 exactly: one
// block of 2^22 keeps the matrix plain (whose products check_matmul checks, at AVX2).
static void check_mxfp4_layout(void) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() != LLM__SIMD_AVX512) { SKIP("no AVX-512: MXFP4 x16 layout not checked"); return; }
    enum { K = 64, N = 16 };
    struct llm__block_mxfp4 w[N * K / 32];
    for (int i = 0; i < N * K / 32; i++) {
        w[i].e = (uint8_t)(120 + i % 8);
        for (int j = 0; j < 16; j++) w[i].qs[j] = (uint8_t)test_rng_next(&seed);
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) w[5].e = 150;
        struct llm_backend be = make_backend(1, LLM__SIMD_AVX512, true);
        struct llm__err e;
        struct llm__weight wt;
        EXPECT(be.iface->weight_load(be.ctx, &wt, LLM__TYPE_MXFP4, K, N, w, &e) == LLM_OK, "weight_load: %s", e.msg);
        EXPECT((wt.layout == LLM__LAYOUT_X16) == (pass == 0), "MXFP4 pass %d: layout %d", pass, wt.layout);
        be.iface->weight_free(be.ctx, &wt);
        be.iface->free(be.ctx);
    }
#endif
}

// At the best SIMD level, and at AVX2 too where the best is AVX-512 (its kernels are what
// machines without AVX-512 run).
static void check_matmul(int type, int64_t K, int64_t N, int ntok, int threads, bool with_bias) {
    check_matmul_at(-1, type, K, N, ntok, threads, with_bias);
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() == LLM__SIMD_AVX512) check_matmul_at(LLM__SIMD_AVX2, type, K, N, ntok, threads, with_bias);
#endif
}

#if defined(LLM__X86_SIMD)
// The reference for the llm__kt_unpack_x16* functions: super-block sb of the 16 plain rows at w (rb bytes apart)
// from the scalar dequantizers' helpers (the bytes are w + off, w what the plain kernels multiply).
static void kt_unpack_ref(int type, const uint8_t *w, size_t rb, int64_t sb, struct llm__kt_tile *t) {
    const int off = type == LLM__TYPE_Q3_K ? 124 : type == LLM__TYPE_IQ4_XS ? 127 : type == LLM__TYPE_Q6_K ? 32 : 0;
    for (int r = 0; r < 16; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        int v[LLM__QK_K];
        if (type == LLM__TYPE_Q3_K) {   // sc * q, one scale per super-block (the tile of its x16 layout)
            const struct llm__block_q3_K *x = (const struct llm__block_q3_K *)row + sb;
            int8_t sc[16], q[LLM__QK_K];
            llm__q3_K_scales(x->scales, sc);
            llm__q3_K_quants(x, q);
            for (int e = 0; e < LLM__QK_K; e++) v[e] = sc[e / 16] * q[e];
            t->d[r] = llm__fp16_to_fp32(x->d);
        } else if (type == LLM__TYPE_Q2_K) {
            const struct llm__block_q2_K *x = (const struct llm__block_q2_K *)row + sb;
            uint8_t q[LLM__QK_K];
            llm__k23_low_quants(x->qs, q);
            for (int e = 0; e < LLM__QK_K; e++) v[e] = (x->scales[e / 16] & 15) * q[e];
            for (int s = 0; s < 16; s++) t->m[s / 2][r][s % 2] = (int16_t)(x->scales[s] >> 4);
            t->d[r] = llm__fp16_to_fp32(x->d);
            t->dmin[r] = llm__fp16_to_fp32(x->dmin);
        } else if (type == LLM__TYPE_Q6_K) {   // q - 32, scales per 16
            const struct llm__block_q6_K *x = (const struct llm__block_q6_K *)row + sb;
            int8_t q[LLM__QK_K];
            llm__q6_K_quants(x, q);
            for (int e = 0; e < LLM__QK_K; e++) v[e] = q[e];
            for (int g = 0; g < 16; g++) t->ls[g][r] = x->scales[g], t->ol[g / 2][r][g % 2] = (int16_t)(off * x->scales[g]);
            t->d[r] = llm__fp16_to_fp32(x->d);
        } else if (type == LLM__TYPE_Q5_K) {   // q, scales and mins per 32 (a min for each of its 2 bsums)
            const struct llm__block_q5_K *x = (const struct llm__block_q5_K *)row + sb;
            uint8_t sm[16], q[LLM__QK_K];
            llm__unpack_k4_scales(x->scales, sm);
            llm__k45_quants(x->qs, x->qh, q);
            for (int e = 0; e < LLM__QK_K; e++) v[e] = q[e];
            for (int s = 0; s < 8; s++) t->ls[s][r] = sm[s], t->m[s][r][0] = t->m[s][r][1] = sm[8 + s];
            t->d[r] = llm__fp16_to_fp32(x->d);
            t->dmin[r] = llm__fp16_to_fp32(x->dmin);
        } else {   // IQ4_XS: grid values, ls - 32 per 32
            const struct llm__block_iq4_xs *x = (const struct llm__block_iq4_xs *)row + sb;
            int8_t ls[8];
            llm__iq4_xs_scales(x, ls);
            for (int b = 0; b < 8; b++) {
                t->ls[b][r] = ls[b];
                t->ol[b][r][0] = t->ol[b][r][1] = (int16_t)(off * ls[b]);
                for (int l = 0; l < 16; l++) {
                    v[32 * b + l] = llm__iq4nl_values[x->qs[16 * b + l] & 15];
                    v[32 * b + 16 + l] = llm__iq4nl_values[x->qs[16 * b + l] >> 4];
                }
            }
            t->d[r] = llm__fp16_to_fp32(x->d);
        }
        for (int e = 0; e < LLM__QK_K; e++) t->q[e / 4][4 * r + e % 4] = (uint8_t)(v[e] + off);
    }
}

// Random bytes as blocks (every bit pattern is a block; the scales may be NaN, copied alike),
// repacked into x16 and unpacked from there (their d and dmin made finite: NaN payloads may
// convert differently).
static void check_kt_unpack(void) {
    const int types[] = {LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_Q6_K, LLM__TYPE_Q5_K, LLM__TYPE_IQ4_XS};
    int bad = 0, n = 0;
    for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++) {
        const int type = types[i];
        const size_t rb = llm__row_bytes(type, 512), bb = llm__type_table[type].block_bytes;
        uint8_t *w = malloc(rb * 16);
        for (size_t k = 0; k < rb * 16; k++) w[k] = (uint8_t)test_rng_next(&seed);
        for (int k = 0; k < 32; k++) {
            uint8_t *b = w + (size_t)k * bb;
            if (type == LLM__TYPE_Q3_K) ((struct llm__block_q3_K *)(void *)b)->d &= 0xbbff;
            if (type == LLM__TYPE_Q6_K) ((struct llm__block_q6_K *)(void *)b)->d &= 0xbbff;
            if (type == LLM__TYPE_IQ4_XS) ((struct llm__block_iq4_xs *)(void *)b)->d &= 0xbbff;
            if (type == LLM__TYPE_Q2_K) {
                ((struct llm__block_q2_K *)(void *)b)->d &= 0xbbff;
                ((struct llm__block_q2_K *)(void *)b)->dmin &= 0xbbff;
            }
            if (type == LLM__TYPE_Q5_K) {
                ((struct llm__block_q5_K *)(void *)b)->d &= 0xbbff;
                ((struct llm__block_q5_K *)(void *)b)->dmin &= 0xbbff;
            }
        }
        uint8_t *rec = aligned_alloc(64, llm__x16_group_bytes(type, 512));
        if (type == LLM__TYPE_Q3_K) llm__x16q3_repack(w, rec, 512, 0, 1);
        else llm__x16f_repack(type, w, rec, 512, 0, 1);
        for (int sb = 0; sb < 2; sb++) {
            struct llm__kt_tile want, got;
            memset(&want, 0, sizeof(want));
            memset(&got, 0, sizeof(got));
            kt_unpack_ref(type, w, rb, sb, &want);
            if (type == LLM__TYPE_Q3_K) llm__kt_unpack_x16q3(rec, 2, sb, &got);
            else if (type == LLM__TYPE_Q2_K) llm__kt_unpack_x16q2(rec, sb, &got);
            else if (type == LLM__TYPE_IQ4_XS) llm__kt_unpack_x16iq4(rec, sb, &got);
            else if (type == LLM__TYPE_Q6_K) llm__kt_unpack_x16q6(rec, sb, &got);
            else llm__kt_unpack_x16q5(rec, sb, &got);
            bad += memcmp(&want, &got, sizeof(want)) != 0;
            n++;
        }
        free(w);
        free(rec);
    }
    EXPECT(bad == 0, "K-quant tiles: %d of %d unpacked differently from the scalar reference", bad, n);
}
#endif

// --- attention ---

// y = H x, H the orthonormal Hadamard matrix of order n (Sylvester's: H[i][j] = (-1)^popcount(i & j)
// / sqrt(n)), in float64 from its definition
static void hadamard64(const double *x, double *y, int n) {
    for (int i = 0; i < n; i++) {
        double a = 0;
        for (int j = 0; j < n; j++) a += (__builtin_popcount((unsigned)(i & j)) % 2 ? -x[j] : x[j]);
        y[i] = a / sqrt((double)n);
    }
}

// A Q8_0 cache's head of hd values x as the attention sees it, into y (float64): rotated as the
// engine rotates it before quantizing (llm__kv_rotate: the same float bytes, so that the same
// roundings happen), quantized, and rotated back with the matrix of the definition (H = H^-1);
// without a rotation (hd % 64 != 0), just quantized.
static void q8_cache_head(const float *x, double *y, int hd, bool values) {
    float r[256];
    struct llm__block_q8_0 blk[8];
    const int n = llm__kv_rot(LLM__TYPE_Q8_0, hd, values);
    memcpy(r, x, sizeof(float) * (size_t)hd);
    llm__kv_rotate(r, hd, n);
    llm__quantize_row(LLM__TYPE_Q8_0, r, blk, hd);
    llm__dequantize_row(LLM__TYPE_Q8_0, blk, r, hd);
    double d[256];
    for (int i = 0; i < hd; i++) d[i] = r[i];
    if (n == 0) memcpy(y, d, sizeof(double) * (size_t)hd);
    for (int i = 0; n && i < hd; i += n) hadamard64(d + i, y + i, n);
}

// The rotation itself: the transform of the definition, and its own inverse.
static void check_kv_rotation(void) {
    EXPECT(llm__kv_rot(LLM__TYPE_Q8_0, 64, false) == 64 && llm__kv_rot(LLM__TYPE_Q8_0, 128, false) == 128 &&
           llm__kv_rot(LLM__TYPE_Q8_0, 192, false) == 64 && llm__kv_rot(LLM__TYPE_Q8_0, 256, true) == 64 &&
           llm__kv_rot(LLM__TYPE_Q8_0, 96, false) == 0 && llm__kv_rot(LLM__TYPE_F16, 128, false) == 0,
           "rotation sizes");
    for (int n = 64; n <= 256; n *= 2) {
        float x[256], r[256];
        double xd[256], want[256], worst = 0, back = 0;
        for (int i = 0; i < n; i++) { x[i] = r[i] = (float)test_rng_normal(&seed); xd[i] = x[i]; }
        llm__kv_rotate(r, n, n);
        hadamard64(xd, want, n);
        for (int i = 0; i < n; i++) worst = fmax(worst, fabs(r[i] - want[i]));
        llm__kv_rotate(r, n, n);
        for (int i = 0; i < n; i++) back = fmax(back, fabs(r[i] - x[i]));
        EXPECT(worst < 1e-5 && back < 1e-5, "Walsh-Hadamard transform of %d: error %.3g, twice %.3g", n, worst, back);
    }
}

// n_seqs sequences with random lengths; the batch holds the last `new` tokens of each (so some
// tokens attend to a long cached past, as in decode, and some to each other, as in prefill).
// window > 0: sliding-window attention (a token at p sees p - window + 1 .. p); softcap > 0:
// scores soft-capped (softcap * tanh(score / softcap)).
static void check_attention(int simd, int kv_type, int bs, int hd, int nh, int nkv, int threads, int window,
                            float softcap, bool sinks) {
    enum { S = 3 };
    int lens[S], news[S], T = 0;
    for (int i = 0; i < S; i++) {
        lens[i] = 1 + (int)(test_rng_next(&seed) % 70);
        news[i] = 1 + (int)(test_rng_next(&seed) % (unsigned)lens[i]);
        T += news[i];
    }
    int max_blocks = (70 + bs - 1) / bs, n_blocks = S * max_blocks;
    // a random permutation of block ids, handed out to the sequences
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n_blocks), *bt = calloc((size_t)S * max_blocks, sizeof(int32_t));
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = (int)(test_rng_next(&seed) % (unsigned)(i + 1));
        int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (int i = 0, k = 0; i < S; i++)
        for (int b = 0; b < (lens[i] + bs - 1) / bs; b++) bt[i * max_blocks + b] = perm[k++];
    const int KV = nkv * hd, Q = nh * hd, G = nh / nkv;
    // K/V of every position of every sequence, rounded to the cache type
    double *kk = malloc(sizeof(double) * S * 70 * KV), *vv = malloc(sizeof(double) * S * 70 * KV);
    float *kf = malloc(sizeof(float) * S * 70 * KV), *vf = malloc(sizeof(float) * S * 70 * KV);
    for (int i = 0; i < S * 70 * KV; i++) {
        kf[i] = (float)test_rng_normal(&seed);
        vf[i] = (float)test_rng_normal(&seed);
        if (kv_type == LLM__TYPE_F16) {
            kf[i] = llm__fp16_to_fp32(llm__fp32_to_fp16(kf[i]));
            vf[i] = llm__fp16_to_fp32(llm__fp32_to_fp16(vf[i]));
        }
    }
    for (int i = 0; i < S * 70 * KV; i++) {
        kk[i] = kf[i];
        vv[i] = vf[i];
    }
    if (kv_type == LLM__TYPE_Q8_0)   // what the cache holds of each head: see q8_cache_head
        for (int r = 0; r < S * 70; r++)
            for (int g = 0; g < nkv; g++) {
                q8_cache_head(kf + (size_t)r * KV + g * hd, kk + (size_t)r * KV + g * hd, hd, false);
                q8_cache_head(vf + (size_t)r * KV + g * hd, vv + (size_t)r * KV + g * hd, hd, true);
            }
    struct llm_backend be = make_backend(threads, simd, true);
    reserve(&be, LLM__MAX(T, 1), 64, nh, nkv, hd, bs);
    struct llm__err e;
    struct llm__buf kb, vb, qb, ob, nb;
    size_t row = llm__row_bytes(kv_type, KV);
    be.iface->buf_alloc(be.ctx, &kb, row * (size_t)n_blocks * bs, &e);
    be.iface->buf_alloc(be.ctx, &vb, row * (size_t)n_blocks * bs, &e);
    be.iface->buf_alloc(be.ctx, &qb, sizeof(float) * (size_t)T * Q, &e);
    be.iface->buf_alloc(be.ctx, &ob, sizeof(float) * (size_t)T * Q, &e);
    be.iface->buf_alloc(be.ctx, &nb, sizeof(float) * (size_t)KV * 2, &e);
    memset(kb.data, 0xFF, kb.size);   // unwritten slots hold NaNs: they must never be read
    memset(vb.data, 0xFF, vb.size);
    struct llm__tensor kc = {&kb, 0, kv_type, KV, (int64_t)n_blocks * bs, row};
    struct llm__tensor vc = {&vb, 0, kv_type, KV, (int64_t)n_blocks * bs, row};
    // store every position's K/V through kv_store, one token per step
    for (int i = 0; i < S; i++)
        for (int p = 0; p < lens[i]; p++) {
            int32_t tok = 0, pos = p, sq = 0, slot = bt[i * max_blocks + p / bs] * bs + p % bs;
            struct llm__step st = {.n_tokens = 1, .tokens = &tok, .positions = &pos, .seq_idx = &sq,
                                   .slot_mapping = &slot, .n_seqs = 1, .max_blocks = max_blocks,
                                   .block_tables = bt + i * max_blocks, .block_size = bs};
            float *kr = nb.data;
            memcpy(kr, kf + ((size_t)i * 70 + p) * KV, sizeof(float) * KV);
            memcpy(kr + KV, vf + ((size_t)i * 70 + p) * KV, sizeof(float) * KV);
            be.iface->begin_step(be.ctx, &st);
            be.iface->kv_store(be.ctx, kc, vc, llm__vec_view(&nb, 0, KV, 1), llm__vec_view(&nb, sizeof(float) * KV, KV, 1));
            be.iface->end_step(be.ctx, &e);
        }
    // one step: the last news[i] tokens of each sequence
    int32_t *pos = malloc(sizeof(int32_t) * T), *sq = malloc(sizeof(int32_t) * T), *tok = calloc((size_t)T, sizeof(int32_t));
    float *q = qb.data;
    for (int i = 0, t = 0; i < S; i++)
        for (int p = lens[i] - news[i]; p < lens[i]; p++, t++) { pos[t] = p; sq[t] = i; }
    for (int i = 0; i < T * Q; i++) q[i] = (float)test_rng_normal(&seed);
    struct llm__step st = {.n_tokens = T, .tokens = tok, .positions = pos, .seq_idx = sq, .n_seqs = S,
                           .max_blocks = max_blocks, .block_tables = bt, .block_size = bs};
    struct llm__buf skb;   // sinks: a logit per head (gpt-oss), about as large as the scores
    be.iface->buf_alloc(be.ctx, &skb, sizeof(float) * (size_t)nh, &e);
    float *sk = skb.data;
    for (int h = 0; h < nh; h++) sk[h] = (float)test_rng_normal(&seed) * 2.0f + (h == 0 ? 6.0f : 0.0f);
    struct llm__attn ap = {nh, nkv, hd, 1.0f / sqrtf((float)hd), window, softcap, {0}};
    if (sinks) ap.sinks = llm__vec_view(&skb, 0, nh, 1);
    be.iface->begin_step(be.ctx, &st);
    void (*attn)(void *, struct llm__tensor, struct llm__tensor, struct llm__tensor, struct llm__tensor,
                 const struct llm__attn *) = window || softcap > 0 || sinks ? be.iface->attention_window
                                                                            : be.iface->attention;
    attn(be.ctx, llm__vec_view(&ob, 0, Q, T), llm__vec_view(&qb, 0, Q, T), kc, vc, &ap);
    be.iface->end_step(be.ctx, &e);
    // float64 reference (queries rounded as the backend rounds them for a half cache)
    double worst = 0;
    const float *o = ob.data;
    double *sc = malloc(sizeof(double) * 70);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            int g = h / G, i = sq[t];
            double mx = -1e300, sum = 0;
            const int p0 = window > 0 ? LLM__MAX(0, pos[t] - window + 1) : 0;
            for (int p = p0; p <= pos[t]; p++) {
                double d = 0;
                for (int c = 0; c < hd; c++) {
                    double qc = q[(size_t)t * Q + h * hd + c];
                    if (kv_type == LLM__TYPE_F16) qc = llm__fp16_to_fp32(llm__fp32_to_fp16((float)qc));
                    d += qc * kk[((size_t)i * 70 + p) * KV + g * hd + c];
                }
                sc[p] = d / sqrt((double)hd);
                if (softcap > 0) sc[p] = softcap * tanh(sc[p] / softcap);
                mx = fmax(mx, sc[p]);
            }
            if (sinks) mx = fmax(mx, sk[h]);
            for (int p = p0; p <= pos[t]; p++) { sc[p] = exp(sc[p] - mx); sum += sc[p]; }
            if (sinks) sum += exp(sk[h] - mx);
            for (int c = 0; c < hd; c++) {
                double a = 0;
                for (int p = p0; p <= pos[t]; p++) a += sc[p] * vv[((size_t)i * 70 + p) * KV + g * hd + c];
                a /= sum;
                worst = fmax(worst, fabs(a - o[(size_t)t * Q + h * hd + c]));
            }
        }
    EXPECT(worst < 1e-5, "attention simd=%d kv=%s bs=%d hd=%d heads=%d/%d threads=%d window=%d softcap=%g sinks=%d: "
           "max error %.3g", simd, llm__type_info((uint32_t)kv_type)->name, bs, hd, nh, nkv, threads, window,
           (double)softcap, sinks, worst);
    be.iface->buf_free(be.ctx, &skb);
    be.iface->buf_free(be.ctx, &kb); be.iface->buf_free(be.ctx, &vb); be.iface->buf_free(be.ctx, &qb);
    be.iface->buf_free(be.ctx, &ob); be.iface->buf_free(be.ctx, &nb);
    be.iface->free(be.ctx);
    free(perm); free(bt); free(kk); free(vv); free(kf); free(vf); free(pos); free(sq); free(tok); free(sc);
}

// --- activation quantizers: the AVX2 and AVX-512 ones give the reference's bytes ---

static void check_act_quantizers(void) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() == LLM__SIMD_SCALAR) { SKIP("no AVX2: vectorized activation quantizers not run"); return; }
    const bool avx512 = llm__simd_best() == LLM__SIMD_AVX512;
    int bad0 = 0, badk = 0, bad2 = 0;
    float x[256];
    for (int it = 0; it < 2000; it++) {
        for (int i = 0; i < 256; i++) {
            switch (it % 4) {
            case 0: x[i] = (float)test_rng_normal(&seed); break;
            case 1: x[i] = (float)((int)(test_rng_next(&seed) % 255) - 127) + 0.5f; break;   // ties
            case 2: x[i] = i % 7 == 0 ? 0.0f : (float)test_rng_normal(&seed) * 1e-3f; break;
            default: x[i] = (float)(int)(test_rng_next(&seed) % 255) - 127.0f; break;
            }
        }
        if (it % 4 == 1) { x[0] = 127.0f; x[32] = -127.0f; x[64] = 127.0f; }   // d = 1: x * id lands on halves
        if (it % 50 == 0) memset(x, 0, sizeof(x));
        for (int b = 0; b < 8; b++) {
            struct llm__block_q8_0 ref;
            struct llm__block_q8_1 ref1;   // its s comes from the f32 scale (x16 Q4_1/Q5_1 activations)
            int8_t q[32];
            uint16_t dh;
            float df;
            llm__quantize_row(LLM__TYPE_Q8_0, x + 32 * b, &ref, 32);
            llm__quantize_row(LLM__TYPE_Q8_1, x + 32 * b, &ref1, 32);
            int32_t want = 0;
            for (int j = 0; j < 32; j++) want += ref.qs[j];
            if (avx512) {
                int32_t sum = llm__quantize_q8_0_block_avx512(x + 32 * b, q, &dh, &df);
                bad0 += dh != ref.d || memcmp(q, ref.qs, 32) != 0 || sum != want ||
                        llm__fp32_to_fp16((float)sum * df) != ref1.s;
            }
            int32_t sum = llm__quantize_q8_0_block_avx2(x + 32 * b, q, &dh, &df);
            bad2 += dh != ref.d || memcmp(q, ref.qs, 32) != 0 || sum != want || llm__fp32_to_fp16((float)sum * df) != ref1.s;
        }
        if (!avx512) continue;
        struct llm__block_q8_K rk, vk;
        llm__quantize_row(LLM__TYPE_Q8_K, x, &rk, 256);
        llm__quantize_q8_K_block_avx512(x, &vk);
        badk += memcmp(&rk, &vk, sizeof(rk)) != 0;
    }
    EXPECT(bad2 == 0, "AVX2 Q8_0 activation quantizer differs from the reference in %d blocks", bad2);
    if (!avx512) { SKIP("no AVX-512: its activation quantizers not run"); return; }
    EXPECT(bad0 == 0, "AVX-512 Q8_0 activation quantizer differs from the reference in %d blocks", bad0);
    EXPECT(badk == 0, "AVX-512 Q8_K activation quantizer differs from the reference in %d blocks", badk);
#else
    SKIP("not x86: vectorized activation quantizers not built");
#endif
}

// --- rope and rmsnorm ---

// yarn: YaRN's blend of interpolated and extrapolated angles over pairs 5..15, cos/sin scaled by 1.2
static void check_rope(bool neox, bool factors, bool yarn) {
    enum { hd = 64, nh = 3, T = 5, n_rot = 48 };
    struct llm_backend be = make_backend(2, -1, true);
    struct llm__err e;
    struct llm__buf xb, fb;
    be.iface->buf_alloc(be.ctx, &fb, sizeof(float) * n_rot / 2, &e);
    float *ff = fb.data;
    for (int i = 0; i < n_rot / 2; i++) ff[i] = 1.0f + (float)i / 4.0f;
    struct llm__rope r = {n_rot, neox, 10000.0f, 0.5f, {0}, yarn ? 1.0f : 0.0f, 1.2f, {5.0f, 15.0f}};
    if (factors) r.freq_factors = llm__vec_view(&fb, 0, n_rot / 2, 1);
    be.iface->buf_alloc(be.ctx, &xb, sizeof(float) * T * nh * hd, &e);
    float *x = xb.data, x0[T * nh * hd];
    for (int i = 0; i < T * nh * hd; i++) x0[i] = x[i] = (float)test_rng_normal(&seed);
    int32_t pos[T] = {0, 1, 7, 100, 2047};
    struct llm__step st = {.n_tokens = T, .positions = pos, .block_size = 16};
    be.iface->begin_step(be.ctx, &st);
    be.iface->rope(be.ctx, llm__vec_view(&xb, 0, nh * hd, T), nh, hd, &r);
    be.iface->end_step(be.ctx, &e);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            const float *a = x0 + (t * nh + h) * hd, *b = x + (t * nh + h) * hd;
            for (int i = 0; i < hd; i++) {
                double want = a[i];
                int pair = -1, first = 0;
                if (neox && i < n_rot) { pair = i % (n_rot / 2); first = i < n_rot / 2; }
                if (!neox && i < n_rot) { pair = i / 2; first = i % 2 == 0; }
                if (pair >= 0) {
                    const double ex = pos[t] * pow(10000.0, -2.0 * pair / n_rot) / (factors ? ff[pair] : 1.0);
                    double th = 0.5 * ex, ms = 1.0;
                    if (yarn) {
                        const double ramp = 1.0 - fmin(1.0, fmax(0.0, (pair - 5.0) / 10.0));
                        th = th * (1.0 - ramp) + ex * ramp, ms = 1.2;
                    }
                    int j0 = neox ? pair : 2 * pair, j1 = neox ? pair + n_rot / 2 : 2 * pair + 1;
                    want = ms * (first ? a[j0] * cos(th) - a[j1] * sin(th) : a[j0] * sin(th) + a[j1] * cos(th));
                }
                worst = fmax(worst, fabs(want - b[i]));
            }
        }
    // positions up to 2047 in float: the angle is exact to ~1e-4 rad
    EXPECT(worst < 1e-3, "rope neox=%d factors=%d yarn=%d: max error %.3g", neox, factors, yarn, worst);
    be.iface->buf_free(be.ctx, &xb);
    be.iface->buf_free(be.ctx, &fb);
    be.iface->free(be.ctx);
}

static void check_rmsnorm(void) {
    const int n = 4096, T = 3;
    struct llm_backend be = make_backend(2, -1, true);
    struct llm__err e;
    struct llm__buf b;
    be.iface->buf_alloc(be.ctx, &b, sizeof(float) * (size_t)(2 * T + 1) * n, &e);
    float *x = b.data, *w = x + T * n, *y = w + n;
    for (int i = 0; i < T * n; i++) x[i] = (float)test_rng_normal(&seed) * 3;
    for (int i = 0; i < n; i++) w[i] = (float)test_rng_uniform(&seed);
    struct llm__step st = {.n_tokens = T, .block_size = 16};
    be.iface->begin_step(be.ctx, &st);
    be.iface->rmsnorm(be.ctx, llm__vec_view(&b, sizeof(float) * (size_t)(T + 1) * n, n, T), llm__vec_view(&b, 0, n, T),
                      llm__vec_view(&b, sizeof(float) * (size_t)T * n, n, 1), 1e-5f);
    be.iface->end_step(be.ctx, &e);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)x[t * n + i] * x[t * n + i];
        double sc = 1.0 / sqrt(ss / n + 1e-5);
        for (int i = 0; i < n; i++) {
            const double want = x[t * n + i] * sc * w[i], err = fabs(want - y[t * n + i]) / (fabs(want) + 1e-3);
            if (err > worst || err != err) worst = err;   // (an fmax reduction here crashes aarch64 gcc 12)
        }
    }
    EXPECT(worst < 1e-5, "rmsnorm: relative error %.3g", worst);
    be.iface->buf_free(be.ctx, &b);
    be.iface->free(be.ctx);
}

// gelu_mul (Gemma's feed-forward): the table of half-precision inputs gives exactly what
// llm__gelu_ggml computes per element (around the +-10 cut-offs too), and that is the tanh GELU
// within half precision's rounding.
static void check_gelu_mul(void) {
    const int n = 3000, T = 2;
    struct llm_backend be = make_backend(2, -1, true);
    struct llm__err e;
    struct llm__buf b;
    be.iface->buf_alloc(be.ctx, &b, sizeof(float) * (size_t)(3 * T) * n, &e);
    float *g = b.data, *u = g + T * n, *y = u + T * n;
    for (int i = 0; i < T * n; i++) {
        g[i] = i % 5 == 0 ? (float)test_rng_uniform(&seed) * 24 - 12 : (float)test_rng_normal(&seed) * 3;
        u[i] = (float)test_rng_normal(&seed);
    }
    g[0] = 10.0f, g[1] = -10.0f, g[2] = 9.999f, g[3] = -9.999f, g[4] = 0.0f, g[5] = -0.0f;
    struct llm__step st = {.n_tokens = T, .block_size = 16};
    for (int pass = 0; pass < 2; pass++) {   // the first call makes the table
        be.iface->begin_step(be.ctx, &st);
        be.iface->gelu_mul(be.ctx, llm__vec_view(&b, sizeof(float) * (size_t)(2 * T) * n, n, T),
                           llm__vec_view(&b, 0, n, T), llm__vec_view(&b, sizeof(float) * (size_t)T * n, n, T));
        be.iface->end_step(be.ctx, &e);
        int differ = 0;
        double worst = 0;
        for (int i = 0; i < T * n; i++) {
            const float want = llm__gelu_ggml(g[i]) * u[i];
            differ += memcmp(&want, &y[i], sizeof(float)) != 0;
            const double x = g[i], ref = 0.5 * x * (1 + tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x))) * u[i];
            worst = fmax(worst, fabs(ref - y[i]) / (fabs(u[i]) * (fabs(x) + 1e-2)));
        }
        EXPECT(differ == 0, "gelu_mul pass %d: %d of %d values differ from llm__gelu_ggml's", pass, differ, T * n);
        EXPECT(worst < 2e-3, "gelu_mul pass %d: error %.3g against the float64 tanh GELU", pass, worst);
    }
    be.iface->buf_free(be.ctx, &b);
    be.iface->free(be.ctx);
}

// --- the backend contract ---

// Every entry of a table made NULL in turn: the required ones are refused by name when the table
// is checked, the optional ones (sync, device_name, bandwidth) are not. The scan over every
// pointer of the table also catches an entry added to the struct but not to llm__backend_check.
// --- mixtures of experts: moe_route, matmul_id, moe_sum against a scalar reference ---

// T tokens, each routed to k of n_expert experts of rows x K weights of type: the router's top-k
// (with a tie, which goes to the lower index) and weights against a float64 softmax; the experts'
// products of the tokens (x_per_slot off) and of a row per slot (on) against the scalar kernel with
// the activations quantized the same way, at relative error 1e-5; the weighted sum in float64.
// oss: gpt-oss's routing (a softmax over the k chosen logits, not normalised again) and biases
// added by expert (a table of n_expert rows) in every product.
static void check_moe(int type, int64_t K, int64_t rows, int n_expert, int k, int T, int threads, bool oss) {
    const size_t rb = llm__row_bytes(type, K), TK = (size_t)T * k;
    const int64_t N = rows * n_expert;
    float *wf = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * K * TK);
    float *bias = malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < N; i++) bias[i] = oss ? (float)test_rng_normal(&seed) : 0.0f;
    float *lg = malloc(sizeof(float) * (size_t)T * n_expert), *y = malloc(sizeof(float) * rows * TK);
    uint8_t *w = malloc(rb * (size_t)N);
    for (int64_t r = 0; r < N; r++) {
        for (int64_t i = 0; i < K; i++) wf[i] = (float)test_rng_normal(&seed) * 0.05f;
        llm__quantize_row(type, wf, w + (size_t)r * rb, K);
    }
    for (size_t i = 0; i < K * TK; i++) x[i] = (float)test_rng_normal(&seed);
    for (int i = 0; i < T * n_expert; i++) lg[i] = (float)test_rng_normal(&seed);
    lg[n_expert - 1] = lg[1] = 9.0f;   // token 0: a tie for first place, the lower index first
    for (size_t i = 0; i < rows * TK; i++) y[i] = (float)test_rng_normal(&seed);
    struct llm_backend be = make_backend(threads, -1, true);
    struct llm__shape sh = {.max_tokens = T, .max_out = T, .max_seqs = 4, .max_blocks = 4, .max_cols = LLM__MAX(K, rows),
                            .n_head = 1, .n_head_kv = 1, .head_dim = 64, .block_size = 16, .n_expert = n_expert,
                            .n_expert_used = k};
    struct llm__err e;
    EXPECT(be.iface->reserve(be.ctx, &sh, &e) == LLM_OK, "reserve: %s", e.msg);
    struct llm__weight wt;
    EXPECT(be.iface->weight_load_experts(be.ctx, &wt, type, K, N, n_expert, w, &e) == LLM_OK, "weight_load_experts: %s", e.msg);
    struct llm__buf b;
    const size_t fl = sizeof(float), o_lg = 0, o_ids = o_lg + fl * T * n_expert, o_w = o_ids + 4 * TK, o_x = o_w + fl * TK,
                 o_d1 = o_x + fl * K * TK, o_d2 = o_d1 + fl * rows * TK, o_y = o_d2 + fl * rows * TK,
                 o_s = o_y + fl * rows * TK, o_b = o_s + fl * rows * T, end = o_b + fl * (size_t)N;
    be.iface->buf_alloc(be.ctx, &b, end, &e);
    be.iface->upload(be.ctx, &b, o_lg, lg, fl * T * n_expert);
    be.iface->upload(be.ctx, &b, o_x, x, fl * K * TK);
    be.iface->upload(be.ctx, &b, o_y, y, fl * rows * TK);
    be.iface->upload(be.ctx, &b, o_b, bias, fl * (size_t)N);
    const struct llm__tensor tb[2] = {llm__vec_view(&b, o_b, rows, n_expert), llm__vec_view(&b, o_b, rows, n_expert)};
    const struct llm__tensor tl = llm__vec_view(&b, o_lg, n_expert, T), tw = llm__vec_view(&b, o_w, k, T);
    const struct llm__tensor ti = {&b, o_ids, LLM__TYPE_I32, k, T, (size_t)k * 4};
    const struct llm__tensor tx = llm__vec_view(&b, o_x, K, T), tx2 = llm__vec_view(&b, o_x, K, (int64_t)TK);
    const struct llm__tensor d1 = llm__vec_view(&b, o_d1, rows, (int64_t)TK), d2 = llm__vec_view(&b, o_d2, rows, (int64_t)TK);
    const struct llm__tensor ty = llm__vec_view(&b, o_y, rows, (int64_t)TK), ts = llm__vec_view(&b, o_s, rows, T);
    const struct llm__moe mp = {n_expert, k, !oss, 0.0f, oss};
    be.iface->begin_step(be.ctx, &(struct llm__step){.n_tokens = T});
    be.iface->moe_route(be.ctx, ti, tw, tl, &mp);
    const struct llm__weight *ws[2] = {&wt, &wt};
    const struct llm__tensor dd[2] = {d1, d2};
    be.iface->matmul_id(be.ctx, 2, dd, ws, oss ? tb : NULL, tx, ti, false);
    const int32_t *ids = (const int32_t *)(void *)((char *)b.data + o_ids);
    const float *wts = (const float *)(void *)((char *)b.data + o_w), *g1 = (const float *)(void *)((char *)b.data + o_d1);
    const float *g2 = (const float *)(void *)((char *)b.data + o_d2);
    // the reference: routing in float64
    int bad_ids = 0;
    double worst_w = 0, worst = 0, scale = 0;
    for (int t = 0; t < T; t++) {
        const float *l = lg + (size_t)t * n_expert;
        double mx = -INFINITY, sum = 0, chosen = 0, sum_k = 0;
        for (int i = 0; i < n_expert; i++) mx = fmax(mx, l[i]);
        for (int i = 0; i < n_expert; i++) sum += exp((double)l[i] - mx);
        int want[16];
        for (int s = 0; s < k; s++) {
            int best = -1;
            for (int i = 0; i < n_expert; i++) {
                bool used = false;
                for (int q = 0; q < s; q++) used |= want[q] == i;
                if (!used && (best < 0 || l[i] > l[best])) best = i;
            }
            want[s] = best;
            chosen += exp((double)l[best] - mx) / sum;
            sum_k += exp((double)l[best] - mx);
        }
        for (int s = 0; s < k; s++) {   // (oss: the softmax over the k; else normalised to sum 1 anyway)
            bad_ids += ids[t * k + s] != want[s];
            const double ref = oss ? exp((double)l[want[s]] - mx) / sum_k : exp((double)l[want[s]] - mx) / sum / chosen;
            worst_w = fmax(worst_w, fabs(wts[t * k + s] - ref));
        }
    }
    EXPECT(bad_ids == 0 && ids[0] == 1 && worst_w < 1e-6, "moe_route: %d experts differ, weight error %.3g", bad_ids,
           worst_w);
    // the products, against the scalar kernel on the same quantized activations
    const int vt = llm__type_info((uint32_t)type)->vec_dot_type;
    llm__vec_dot_fn dot = llm__vec_dot_kernel(type, LLM__SIMD_SCALAR);
    const size_t ab = llm__row_bytes(vt, K);
    uint8_t *xq = malloc(ab * TK);
    for (size_t t = 0; t < TK; t++) llm__quantize_row(vt, x + t * K, xq + t * ab, K);
    double *want = malloc(sizeof(double) * rows * TK);
    for (int pass = 0; pass < 2; pass++) {   // 0: the tokens' rows (gate/up), 1: a row per slot (down)
        if (pass == 1) be.iface->matmul_id(be.ctx, 1, &d1, ws, oss ? tb : NULL, tx2, ti, true);
        for (size_t q = 0; q < TK; q++)
            for (int64_t r = 0; r < rows; r++) {
                float v;
                dot(K, &v, w + ((size_t)ids[q] * rows + r) * rb, xq + (pass ? q : q / k) * ab);
                want[q * rows + r] = (double)v + bias[(size_t)ids[q] * rows + r];
                scale = fmax(scale, fabs(v));
            }
        for (size_t i = 0; i < rows * TK; i++) {
            worst = fmax(worst, fabs(g1[i] - want[i]));
            if (pass == 0) worst = fmax(worst, fabs(g2[i] - want[i]));
        }
    }
    EXPECT(worst <= 1e-5 * scale, "matmul_id %s K=%lld rows=%lld experts %d of %d, %d tokens, %s%s: error %.3g of %.3g",
           llm__type_info((uint32_t)type)->name, (long long)K, (long long)rows, k, n_expert, T,
           wt.layout == LLM__LAYOUT_X16 ? "x16" : "plain", oss ? " with biases" : "", worst, scale);
    const bool x16 = ((struct llm__cpu *)be.ctx)->simd == LLM__SIMD_AVX512 && rows % 16 == 0 &&
                     (type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0 || type == LLM__TYPE_Q5_1 || type == LLM__TYPE_Q4_K ||
                      type == LLM__TYPE_MXFP4);
    EXPECT((wt.layout == LLM__LAYOUT_X16) == x16, "%s experts of %lld rows: layout %d", llm__type_info((uint32_t)type)->name,
           (long long)rows, wt.layout);
    // the weighted sum, then with a shared expert (y's first T rows) scaled by sigmoid(its gate):
    // the gate logits are the first T logits (a column of T rows 4 bytes apart)
    const float *sm = (const float *)(void *)((char *)b.data + o_s);
    const struct llm__tensor tg = {&b, o_lg, LLM__TYPE_F32, 1, T, sizeof(float)};
    for (int shared = 0; shared < 2; shared++) {
        const struct llm__tensor none = {0};
        be.iface->moe_sum(be.ctx, ts, ty, tw, shared ? llm__vec_view(&b, o_y, rows, T) : none, shared ? tg : none);
        double worst_s = 0;
        for (int t = 0; t < T; t++)
            for (int64_t c = 0; c < rows; c++) {
                double ref = 0;
                for (int s = 0; s < k; s++) ref += (double)wts[t * k + s] * y[((size_t)t * k + s) * rows + c];
                if (shared) ref += 1.0 / (1.0 + exp(-(double)lg[t])) * y[(size_t)t * rows + c];
                worst_s = fmax(worst_s, fabs(sm[(size_t)t * rows + c] - ref));
            }
        EXPECT(worst_s < 1e-5, "moe_sum%s: error %.3g", shared ? " with a shared expert" : "", worst_s);
    }
    be.iface->end_step(be.ctx, &e);
    be.iface->weight_free(be.ctx, &wt);
    be.iface->buf_free(be.ctx, &b);
    be.iface->free(be.ctx);
    free(wf); free(x); free(lg); free(y); free(w); free(xq); free(want); free(bias);
}

// swiglu_oai (gpt-oss's experts) against float64, on values well past the clamp (+-7) on both sides.
static void check_swiglu_oai(void) {
    const int n = 1000, T = 3;
    struct llm_backend be = make_backend(2, -1, true);
    struct llm__err e;
    struct llm__buf b;
    be.iface->buf_alloc(be.ctx, &b, sizeof(float) * (size_t)(3 * T) * n, &e);
    float *g = b.data, *u = g + T * n, *y = u + T * n;
    for (int i = 0; i < T * n; i++) g[i] = (float)test_rng_normal(&seed) * 6, u[i] = (float)test_rng_normal(&seed) * 6;
    g[7] = NAN, u[8] = NAN;   // a NaN goes on (ggml's std::min / std::clamp), not clamped away
    be.iface->begin_step(be.ctx, &(struct llm__step){.n_tokens = T, .block_size = 16});
    be.iface->swiglu_oai(be.ctx, llm__vec_view(&b, sizeof(float) * (size_t)(2 * T) * n, n, T), llm__vec_view(&b, 0, n, T),
                         llm__vec_view(&b, sizeof(float) * (size_t)T * n, n, T), 1.702f, 7.0f);
    be.iface->end_step(be.ctx, &e);
    double worst = 0;
    int clamped = 0;
    EXPECT(isnan(y[7]) && isnan(y[8]), "swiglu_oai: a NaN input gave %g and %g", (double)y[7], (double)y[8]);
    for (int i = 0; i < T * n; i++) {
        if (i == 7 || i == 8) continue;
        const double x = fmin(g[i], 7.0), v = fmax(fmin(u[i], 7.0), -7.0);
        const double ref = x / (1 + exp(-1.702 * x)) * (v + 1);
        clamped += g[i] > 7 || fabs(u[i]) > 7;
        worst = fmax(worst, fabs(ref - y[i]) / (fabs(ref) + 1e-3));
    }
    EXPECT(worst < 1e-5 && clamped > 100, "swiglu_oai: relative error %.3g (%d inputs clamped)", worst, clamped);
    be.iface->buf_free(be.ctx, &b);
    be.iface->free(be.ctx);
}

static void check_contract_entries(const struct llm_backend_i *base) {
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__backend_check(base, &e) == LLM_OK, "%s: the full table: %s", base->name, e.msg);
#define REQUIRED(op)                                                                                 \
    do {                                                                                             \
        struct llm_backend_i b = *base;                                                              \
        b.op = NULL;                                                                                 \
        e = (struct llm__err){{0}, LLM_OK};                                                          \
        EXPECT(llm__backend_check(&b, &e) == LLM_ERR_BACKEND && strstr(e.msg, "required op '" #op "'"), \
               "%s without %s: %s", base->name, #op, e.msg);                                         \
    } while (0)
    REQUIRED(name);
    REQUIRED(free);
    REQUIRED(buf_alloc);
    REQUIRED(buf_free);
    REQUIRED(weight_load);
    REQUIRED(weight_free);
    REQUIRED(upload);
    REQUIRED(download);
    REQUIRED(reserve);
    REQUIRED(mem_free);
    REQUIRED(begin_step);
    REQUIRED(end_step);
    REQUIRED(embed);
    REQUIRED(rmsnorm);
    REQUIRED(matmul);
    REQUIRED(rope);
    REQUIRED(kv_store);
    REQUIRED(attention);
    REQUIRED(silu_mul);
    REQUIRED(add);
    REQUIRED(get_rows);
#undef REQUIRED
    // (the table holds pointers, and one word of capability flags: rope_yarn, attention_sinks)
    _Static_assert(sizeof(struct llm_backend_i) % sizeof(void *) == 0, "the table holds words only");
    _Static_assert(offsetof(struct llm_backend_i, attention_sinks) / sizeof(void *) ==
                   offsetof(struct llm_backend_i, rope_yarn) / sizeof(void *), "the flags share a word");
    const size_t optional[] = {offsetof(struct llm_backend_i, sync), offsetof(struct llm_backend_i, device_name),
                               offsetof(struct llm_backend_i, bandwidth), offsetof(struct llm_backend_i, compute_peak),
                               offsetof(struct llm_backend_i, scale),
                               offsetof(struct llm_backend_i, gelu_mul), offsetof(struct llm_backend_i, attention_window),
                               offsetof(struct llm_backend_i, gather_cols),
                               offsetof(struct llm_backend_i, weight_load_experts),
                               offsetof(struct llm_backend_i, moe_route), offsetof(struct llm_backend_i, matmul_id),
                               offsetof(struct llm_backend_i, moe_sum), offsetof(struct llm_backend_i, swiglu_oai),
                               offsetof(struct llm_backend_i, rope_yarn) / sizeof(void *) * sizeof(void *)};
    int refused = 0, accepted = 0;
    for (size_t off = 0; off < sizeof(struct llm_backend_i); off += sizeof(void *)) {
        struct llm_backend_i b = *base;
        memset((char *)&b + off, 0, sizeof(void *));
        bool opt = false;
        for (size_t i = 0; i < LLM__ARRAY_LEN(optional); i++) opt |= off == optional[i];
        e = (struct llm__err){{0}, LLM_OK};
        enum llm_status st = llm__backend_check(&b, &e);
        EXPECT(opt ? st == LLM_OK : st == LLM_ERR_BACKEND, "%s: entry at byte %zu made NULL: %s (%s)", base->name, off,
               llm_status_str(st), e.msg);
        refused += st != LLM_OK;
        accepted += st == LLM_OK;
    }
    EXPECT(refused == 21 && accepted == 14, "%s: %d entries required, %d optional", base->name, refused, accepted);
}

static const char *models_dir(void) {
    return getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
}

// A sync that succeeds, fails at call number sync_fail_at (0: never), and counts its calls.
static int sync_calls, sync_fail_at;
static enum llm_status counting_sync(void *ctx, struct llm__err *e) {
    (void)ctx;
    if (++sync_calls == sync_fail_at) return llm__fail(e, LLM_ERR_BACKEND, "sync: the device was lost");
    return LLM_OK;
}

// The CPU backend with a sync entry: profiling calls it after each op of a step (embed, 12 per
// layer, the logits), a forward pass without profiling never does, and a failure it reports
// ends the step and reaches the caller with its message.
static void check_sync_errors(void) {
    char path[512], err[512] = "";
    snprintf(path, sizeof(path), "%s/tiny-f32.gguf", models_dir());
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = 2;
    p.max_model_len = 64;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "%s: %s (make models)", path, err);
    if (!E) return;
    static struct llm_backend_i with_sync;
    with_sync = *E->be.iface;
    with_sync.sync = counting_sync;
    E->be.iface = &with_sync;
    const int32_t toks[4] = {1, 20, 30, 40};
    float *logits = malloc(sizeof(float) * (size_t)E->model.n_vocab);
    int seq = llm_seq_new(E);
    sync_calls = 0;
    sync_fail_at = 0;
    EXPECT(llm_seq_eval(E, seq, toks, 2, logits, 0) == LLM_OK && sync_calls == 0, "no profiling: %d syncs (%s)",
           sync_calls, llm_last_error(E));
    llm_set_profiling(E, 1);
    const int per_step = 1 + 12 * E->model.n_layer + 1;
    EXPECT(llm_seq_eval(E, seq, toks + 2, 1, logits, 0) == LLM_OK && sync_calls == per_step,
           "profiling: %d syncs, %d ops (%s)", sync_calls, per_step, llm_last_error(E));
    sync_calls = 0;
    sync_fail_at = 5;
    enum llm_status st = llm_seq_eval(E, seq, toks + 3, 1, logits, 0);
    EXPECT(st == LLM_ERR_BACKEND && llm_last_status(E) == LLM_ERR_BACKEND &&
           strstr(llm_last_error(E), "device was lost"), "a failing sync: %s: %s", llm_status_str(st), llm_last_error(E));
    EXPECT(sync_calls == 5, "the step ended at the failing sync: %d syncs", sync_calls);
    free(logits);
    llm_engine_free(E);
}

// A backend without the optional ops an architecture needs (Gemma: scale, gelu_mul,
// attention_window) gets the model refused at load, naming the op and the architecture.
static void check_missing_arch_ops(void) {
    char path[512];
    static const char *what[] = {"scale", "gelu_mul", "sliding-window", "mixture-of-experts", "swiglu_oai",
                                 "attention sinks", "YaRN RoPE"};
    for (int k = 0; k < 7; k++) {
        // gemma3 needs the first three; a mixture of experts (qwen3moe) the MoE ops (here matmul_id);
        // gpt-oss its SwiGLU, sinks and YaRN
        const char *arch = k < 3 ? "gemma3" : k == 3 ? "qwen3moe" : "gpt-oss";
        snprintf(path, sizeof(path), "%s/%s.gguf", models_dir(),
                 k < 3 ? "tiny-gemma3-f32" : k == 3 ? "tiny-qwen3moe-f32" : "tiny-gpt-oss-f32");
        struct llm_backend be = make_backend(1, -1, false);
        const struct llm_backend_i *cpu_iface = be.iface;
        struct llm_backend_i lacking = *cpu_iface;
        if (k == 0) lacking.scale = NULL;
        else if (k == 1) lacking.gelu_mul = NULL;
        else if (k == 2) lacking.attention_window = NULL;
        else if (k == 3) lacking.matmul_id = NULL;
        else if (k == 4) lacking.swiglu_oai = NULL;
        else if (k == 5) lacking.attention_sinks = false;
        else lacking.rope_yarn = false;
        be.iface = &lacking;
        struct llm__model m = {0};
        struct llm__err e = {{0}, LLM_OK};
        enum llm_status st = llm__gguf_open_file(&m.gguf, path, false, &e);
        EXPECT(st == LLM_OK, "%s: %s (make models)", path, e.msg);
        if (st == LLM_OK) {
            llm__model_names(&m);
            st = llm__model_hparams(&m, &e);
            if (st == LLM_OK) st = llm__model_load_tensors(&m, &be, false, &e);
            EXPECT(st == LLM_ERR_UNSUPPORTED && strstr(e.msg, what[k]) && strstr(e.msg, arch),
                   "a backend without %s: %s: %s", what[k], llm_status_str(st), e.msg);
        }
        llm__model_free(&m, &be);
        be.iface = cpu_iface;
        be.iface->free(be.ctx);
    }
}

// A CPU-only build lists no device (the GPU builds' lists are checked against Vulkan's and CUDA's
// own in test_vulkan and test_cuda); the CPU backend has no bandwidth probe.
static void check_devices_and_bandwidth(void) {
#if !defined(LLM_VULKAN) && !defined(LLM_CUDA)
    struct llm_device devs[4];
    char err[256] = "";
    EXPECT(llm_list_devices(devs, 4, err, sizeof(err)) == 0, "devices of a CPU-only build: %s", err);
    EXPECT(llm_list_devices(NULL, 0, err, sizeof(err)) == 0, "device count of a CPU-only build: %s", err);
#endif
    char path[512], err2[512] = "";
    snprintf(path, sizeof(path), "%s/tiny-f32.gguf", models_dir());
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = 1;
    p.max_model_len = 32;
    llm_engine *E = llm_engine_create(&p, err2, sizeof(err2));
    EXPECT(E != NULL, "%s: %s (make models)", path, err2);
    if (!E) return;
    double gbps = -1;
    EXPECT(llm_measure_bandwidth(E, &gbps) == LLM_ERR_UNSUPPORTED && gbps == 0.0 &&
           llm_last_status(E) == LLM_ERR_UNSUPPORTED && strstr(llm_last_error(E), "cpu"),
           "bandwidth on the CPU: %g GB/s, %s", gbps, llm_last_error(E));
    // the int8 compute peak: where the CPU has dot-product instructions, a rate no slower than one
    // instruction every 10 ns of AVX2's width (0.1 ns of AVX-512's is 64 per ns: at most 10,000
    // G/s a core)
    double g = -1;
    const enum llm_status st = llm_measure_compute(E, &g);
    if (llm__simd_best() == LLM__SIMD_SCALAR)
        EXPECT(st == LLM_ERR_UNSUPPORTED && g == 0.0, "compute peak without SIMD: %d, %g", st, g);
    else
        EXPECT(st == LLM_OK && g > 3.2 && g < 10000.0, "int8 compute peak on 1 thread: %d, %g G MAC/s (%s)", st, g,
               llm_last_error(E));
    // the multiply-adds of a token: tiny-f32's matrices (q, k, v, o, gate, up, down a layer; the output)
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    const int64_t kv = (int64_t)mi.n_head_kv * mi.head_dim, q = (int64_t)mi.n_head * mi.head_dim;
    const int64_t want = (int64_t)mi.n_layer * ((int64_t)mi.n_embd * (2 * q + 2 * kv) + 3 * (int64_t)mi.n_embd * mi.n_ff) +
                         (int64_t)mi.n_vocab * mi.n_embd;
    EXPECT(mi.macs_per_token == want, "macs_per_token %lld, want %lld", (long long)mi.macs_per_token, (long long)want);
    llm_engine_free(E);
}

// The step buffers cover llm_seq_eval's steps with all logits (up to LLM__MAX_STEP_OUT tokens)
// when max_num_batched_tokens is smaller: the logits of 20 tokens are those of a default engine.
static void check_small_batch_steps(void) {
    char path[512], err[512] = "";
    snprintf(path, sizeof(path), "%s/tiny-f32.gguf", models_dir());
    llm_engine *E[2];
    for (int k = 0; k < 2; k++) {
        struct llm_engine_params p = llm_engine_params_default();
        p.model_path = path;
        p.n_threads = 1;
        p.max_model_len = 64;
        p.max_num_batched_tokens = k ? 8 : 0;
        E[k] = llm_engine_create(&p, err, sizeof(err));
        EXPECT(E[k] != NULL, "%s: %s (make models)", path, err);
    }
    if (E[0] && E[1]) {
        const int n = 20, nv = E[0]->model.n_vocab;
        int32_t toks[20];
        for (int i = 0; i < n; i++) toks[i] = (int32_t)((i * 37 + 1) % nv);
        float *lg[2];
        for (int k = 0; k < 2; k++) {
            lg[k] = calloc((size_t)n * (size_t)nv, sizeof(float));
            enum llm_status st = llm_seq_eval(E[k], llm_seq_new(E[k]), toks, n, lg[k], 1);
            EXPECT(st == LLM_OK, "eval of %d tokens with all logits, max_num_batched_tokens %d: %s", n,
                   E[k]->params.max_num_batched_tokens, llm_last_error(E[k]));
        }
        double worst = 0;
        for (size_t i = 0; i < (size_t)n * (size_t)nv; i++) worst = fmax(worst, fabs((double)lg[0][i] - lg[1][i]));
        EXPECT(worst == 0, "logits with max_num_batched_tokens 8 against the default: max difference %g", worst);
        free(lg[0]);
        free(lg[1]);
    }
    llm_engine_free(E[0]);
    llm_engine_free(E[1]);
}

// The CPU backend's memory for the KV cache: what the system has free, known on Linux
// (MemAvailable) and never more than the physical memory.
static void check_mem_free(void) {
    struct llm_backend be = make_backend(1, -1, false);
    size_t avail = be.iface->mem_free(be.ctx);
    unsigned long long phys = (unsigned long long)sysconf(_SC_PHYS_PAGES) * (unsigned long long)sysconf(_SC_PAGESIZE);
    EXPECT(avail > 0 && (unsigned long long)avail <= phys, "mem_free %zu bytes, physical memory %llu", avail, phys);
    be.iface->free(be.ctx);
}


// --- the thread pool ---
//
// Parts are claimed, not tied to threads, and workers sleep between jobs: every part of [0, nth)
// must still run exactly once per job (nth: the active thread count), and the caller must see
// everything the parts wrote when llm__pool_run returns. More threads than this machine has cores (every run of the
// suite on a 2-core machine), jobs back to back (workers spinning), jobs after a pause longer
// than the spin budget (workers asleep, woken by the next job), parts that sleep (the caller
// waits asleep for a part another thread is running), and fewer active threads than parts (the
// others parked; with one, the caller runs every part).

struct pool_job {
    int nth;            // parts expected
    int *runs_of;       // [pool size]: per part, its runs in this job (plain writes, read by the caller)
    atomic_int runs;    // parts run in this job
    atomic_int bad;     // parts called with a wrong nth or ith
    pthread_t caller;
    atomic_int by_workers;   // parts run on another thread than the caller's (all jobs)
    atomic_int taken_over;   // parts other than 0 run by the caller
    bool sleepy;        // parts 0 and nth-1 sleep 2 ms
};

static void pool_part(void *arg, int ith, int nth) {
    struct pool_job *j = arg;
    if (nth != j->nth || ith < 0 || ith >= nth) { atomic_fetch_add(&j->bad, 1); return; }
    if (j->sleepy && (ith == 0 || ith == nth - 1)) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    j->runs_of[ith]++;
    if (!pthread_equal(pthread_self(), j->caller)) atomic_fetch_add(&j->by_workers, 1);
    else if (ith != 0) atomic_fetch_add(&j->taken_over, 1);
    atomic_fetch_add(&j->runs, 1);
}

static void check_pool(int nth) {
    struct llm__err e;
    struct llm__pool *pool = llm__pool_new(nth, &e);
    EXPECT(pool != NULL, "pool of %d threads: %s", nth, e.msg);
    if (!pool) return;
    struct pool_job j = {.runs_of = calloc((size_t)nth, sizeof(int)), .caller = pthread_self()};
    int wrong = 0, first_wrong = -1;
    // workers parked and unparked before any job: they must find nothing to run
    struct timespec ms = {0, 1000000};
    llm__pool_set_active(pool, 1);
    nanosleep(&ms, NULL);
    llm__pool_set_active(pool, nth);
    nanosleep(&ms, NULL);
    for (int k = 1; k <= 3000; k++) {
        atomic_store(&j.runs, 0);
        // every 100th job after a pause (the workers fall asleep), every 50th with slow parts
        if (k % 100 == 0) {
            struct timespec ts = {0, 3000000};
            nanosleep(&ts, NULL);
        }
        j.sleepy = k % 50 == 0;
        if (k % 10 == 0) llm__pool_set_active(pool, 1 + (k / 10) % nth);   // some workers parked
        j.nth = llm__pool_nth(pool);
        memset(j.runs_of, 0, sizeof(int) * (size_t)nth);
        llm__pool_run(pool, pool_part, &j);
        int ok = atomic_load(&j.runs) == j.nth && atomic_load(&j.bad) == 0;
        for (int i = 0; i < nth && ok; i++) ok = j.runs_of[i] == (i < j.nth);
        if (!ok && wrong++ == 0) first_wrong = k;
    }
    EXPECT(wrong == 0, "pool of %d threads: %d of 3000 jobs did not run each part once (first: job %d)", nth,
           wrong, first_wrong);
    // While a part sleeps 2 ms, a worker that was woken takes another part: none ever did means
    // the workers were never woken (they slept through the jobs, or stayed parked).
    EXPECT(atomic_load(&j.by_workers) > 0, "pool of %d threads: no part ran on a worker", nth);
    // 64 threads on this machine's cores: some workers were not running when their part was due,
    // and the caller took it over
    if (nth == 64) EXPECT(atomic_load(&j.taken_over) > 0, "pool of %d threads: the caller took over no part", nth);
    // Workers that were spinning when the active count dropped to 1 park; raised again, it must
    // wake them.
    llm__pool_set_active(pool, nth);
    j.sleepy = false;
    j.nth = nth;
    llm__pool_run(pool, pool_part, &j);
    llm__pool_set_active(pool, 1);
    nanosleep(&ms, NULL);
    llm__pool_set_active(pool, nth);
    atomic_store(&j.by_workers, 0);
    j.sleepy = true;
    for (int k = 0; k < 5; k++) llm__pool_run(pool, pool_part, &j);
    EXPECT(atomic_load(&j.by_workers) > 0, "pool of %d threads: no part ran on a worker after parking", nth);
    llm__pool_free(pool);
    free(j.runs_of);
}


// The thread-count tuner on made-up step times (no clock): a machine on which `best` active
// threads are fastest, each rung away 30% slower, with +-10% noise and now and then a step 5
// times as slow (a preemption). It must settle on the fastest rung, probe rarely once settled,
// follow the machine when the fastest count changes, and start a new step size where the last
// one is (a size seen before but not probed yet follows it too); a hopeless probe ends at once.
static int tuner_cliff = 1 << 30;   // above this many threads, steps are 10 times as slow
static double tuner_slope = 0.3;    // how much slower each rung away from the best is
static double tuner_noise = 0.1;    // +- this much

static double tuner_step_sec(struct llm__pool *pool, int n_tokens, int best, double base, unsigned long long *rng,
                             int *rung, bool *probe) {
    llm__pool_step_begin(pool, n_tokens);
    struct llm__tune *t = pool->step_tune;
    int k = atomic_load(&pool->active);
    *rung = pool->rungs[t->cur];
    *probe = pool->step_rung != t->cur;
    double d = fabs(log2((double)k / best));
    double sec = base * (1.0 + tuner_slope * d) * (1.0 - tuner_noise + 2.0 * tuner_noise * test_rng_uniform(rng));
    if (k > tuner_cliff) sec *= 10.0;   // workers preempted in their parts
    if (test_rng_next(rng) % 37 == 0) sec *= 5.0;
    llm__pool_step_record(pool, sec);
    return sec;
}

static double tuner_step(struct llm__pool *pool, int n_tokens, int best, unsigned long long *rng, int *rung,
                         bool *probe) {
    return tuner_step_sec(pool, n_tokens, best, 1e-3, rng, rung, probe);
}

// 8 threads on a machine of 8 cores or more: the ladder 1, 2, 4, 8, starting at 8.
static struct llm__pool *tuner_pool(void) {
    struct llm__err e;
    struct llm__pool *pool = llm__pool_new(8, &e);
    EXPECT(pool != NULL, "pool: %s", e.msg);
    if (!pool) return NULL;
    const int ladder[] = {1, 2, 4, 8};
    memcpy(pool->rungs, ladder, sizeof(ladder));
    pool->n_rungs = 4;
    pool->first_rung = 3;
    return pool;
}

static void check_tuner(void) {
    // The ladder stops at the cores this process may use (threads beyond them never take part).
    struct llm__err e;
    struct llm__pool *pool = llm__pool_new(64, &e);
    EXPECT(pool != NULL, "pool: %s", e.msg);
    if (!pool) return;
    const int top = LLM__MIN(64, llm__online_cpus());
    EXPECT(pool->rungs[0] == 1 && pool->rungs[pool->n_rungs - 1] == top && llm__pool_nth(pool) == top,
           "64 threads, %d cores: ladder up to %d, %d active", top, pool->rungs[pool->n_rungs - 1], llm__pool_nth(pool));
    llm__pool_free(pool);
    pool = tuner_pool();
    if (!pool) return;
    unsigned long long rng = 3;
    int rung, on_best = 0, probes = 0;
    bool probe;
    tuner_step(pool, 64, 4, &rng, &rung, &probe);   // a size seen once (a prompt)
    EXPECT(rung == 8, "the first size starts at %d threads", rung);
    // fastest at 4: settled within 200 steps, then on it (or probing) nearly always
    for (int s = 0; s < 2200; s++) {
        tuner_step(pool, 1, 4, &rng, &rung, &probe);
        if (s >= 200) on_best += rung == 4, probes += probe;
    }
    EXPECT(on_best >= 1960, "4 threads fastest: on 4 in %d of 2000 steps", on_best);
    EXPECT(probes <= 60, "4 threads fastest: %d probe steps in 2000 settled steps", probes);
    // the machine gets busy: 1 thread fastest, more 10 times as slow (workers preempted in their
    // parts); followed within 1000 steps
    on_best = 0;
    tuner_cliff = 1;
    for (int s = 0; s < 3000; s++) {
        tuner_step(pool, 1, 1, &rng, &rung, &probe);
        if (s >= 1000) on_best += rung == 1;
    }
    EXPECT(on_best >= 1960, "1 thread fastest: on 1 in %d of the last 2000 steps", on_best);
    // a new step size starts at 1 thread, where size 1 is; so does the size seen once before
    tuner_step(pool, 128, 1, &rng, &rung, &probe);
    EXPECT(rung == 1 && !probe, "a new step size starts at %d threads", rung);
    tuner_step(pool, 64, 1, &rng, &rung, &probe);
    EXPECT(rung == 1 && !probe, "a step size not probed yet runs at %d threads", rung);
    tuner_cliff = 1 << 30;
    llm__pool_free(pool);

    // Decode faster on 1 thread than on 2 by 30% (a tiny model on an idle machine: jobs of a
    // microsecond, the threads' synchronisation dominates): once the probes have put decode on 1,
    // a prompt's step (more tokens: more work per job) still starts at the top; it follows decode
    // down only where more threads were 2 times as slow (above: a busy machine).
    pool = tuner_pool();
    if (!pool) return;
    int on_one = 0;
    for (int s = 0; s < 4000 && on_one < 50; s++) {
        tuner_step(pool, 1, 1, &rng, &rung, &probe);
        on_one = rung == 1 ? on_one + 1 : 0;
    }
    EXPECT(on_one >= 50, "decode 30%% faster per rung down: never settled on 1 thread");
    tuner_step(pool, 64, 1, &rng, &rung, &probe);
    EXPECT(rung == 8 && !probe, "a prompt's step after decode settled on 1 (30%% faster than 2): %d threads", rung);
    tuner_step(pool, 1, 1, &rng, &rung, &probe);
    EXPECT(rung == 1, "decode after the prompt's step: %d threads", rung);
    llm__pool_free(pool);

    // Tiny steps (20 us) with +-30% noise and preemptions, 2 threads 10% faster than 1 and 4: the
    // probes compare at least LLM__TUNE_SPAN of steps, so noise seldom moves it off 2. Over 6
    // machines (seeds) of 50,000 steps: moved off 2 7 times, on 2 in 99% of the steps; with
    // windows of 5 steps, 29 times and 90%.
    tuner_slope = 0.1;
    tuner_noise = 0.3;
    int moves_off = 0, steps_on = 0, steps = 0;
    for (unsigned long long seed = 1; seed <= 6; seed++) {
        pool = tuner_pool();
        if (!pool) return;
        rng = seed;
        int prev = 8;
        for (int s = 0; s < 50000; s++) {
            tuner_step_sec(pool, 1, 2, 20e-6, &rng, &rung, &probe);
            if (s >= 2000) steps_on += rung == 2, steps++, moves_off += prev == 2 && rung != 2;
            prev = rung;
        }
        llm__pool_free(pool);
    }
    tuner_slope = 0.3;
    tuner_noise = 0.1;
    EXPECT(moves_off <= 20, "tiny steps, 2 threads 10%% faster: moved off 2 %d times", moves_off);
    EXPECT(steps_on >= 0.94 * steps, "tiny steps, 2 threads 10%% faster: on 2 in %d of %d steps", steps_on, steps);

    // A tiny model's steps (10 us): probes, warm-up included, stay rare once settled (they are
    // also spaced in time), and it still settles on the fastest count.
    pool = tuner_pool();
    if (!pool) return;
    on_best = probes = 0;
    for (int s = 0; s < 6000; s++) {
        tuner_step_sec(pool, 1, 2, 10e-6, &rng, &rung, &probe);
        if (s >= 2000) on_best += rung == 2, probes += probe;
    }
    EXPECT(on_best >= 3800, "tiny steps, 2 threads fastest: on 2 in %d of 4000 steps", on_best);
    EXPECT(probes <= 400, "tiny steps: %d probe steps in 4000 settled steps", probes);
    llm__pool_free(pool);

    // More threads than free cores: once settled on 2, a probe of 4 threads, 10 times as slow,
    // ends after its first step (the warm-up it would have skipped included).
    pool = tuner_pool();
    if (!pool) return;
    tuner_cliff = 2;
    int run = 0, longest = 0;
    for (int s = 0; s < 3000; s++) {
        tuner_step(pool, 1, 2, &rng, &rung, &probe);
        run = probe && atomic_load(&pool->active) > 2 ? run + 1 : 0;
        if (s >= 500) longest = LLM__MAX(longest, run);   // settled on 2 (from 8, as slow)
    }
    tuner_cliff = 1 << 30;
    EXPECT(longest == 1, "a hopeless probe ran %d steps in a row", longest);
    llm__pool_free(pool);

    // An idle machine of 8 cores or more: each rung down twice as slow (the threads parked had
    // cores of their own). A probe of fewer threads ends after its first step, which counts (no
    // thread to wake); it settles on 8 all the same.
    pool = tuner_pool();
    if (!pool) return;
    tuner_slope = 1.0;
    run = longest = on_best = 0;
    int n_probes = 0;
    for (int s = 0; s < 3000; s++) {
        tuner_step(pool, 1, 8, &rng, &rung, &probe);
        n_probes += probe && run == 0;
        run = probe ? run + 1 : 0;
        longest = LLM__MAX(longest, run);
        on_best += s >= 500 && rung == 8;
    }
    tuner_slope = 0.3;
    EXPECT(n_probes >= 3 && longest == 1, "fewer threads twice as slow: %d probes, up to %d steps each", n_probes,
           longest);
    EXPECT(on_best == 2500, "fewer threads twice as slow: on 8 threads in %d of 2500 steps", on_best);
    llm__pool_free(pool);
}

int main(void) {
    check_missing_arch_ops();
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() == LLM__SIMD_AVX512) check_kt_unpack();
#endif
    const int types[] = {LLM__TYPE_F32, LLM__TYPE_F16, LLM__TYPE_BF16, LLM__TYPE_Q8_0, LLM__TYPE_Q4_0,
                         LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1, LLM__TYPE_IQ4_NL, LLM__TYPE_MXFP4, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K, LLM__TYPE_Q3_K, LLM__TYPE_Q2_K,
                         LLM__TYPE_IQ4_XS, LLM__TYPE_G4_32, LLM__TYPE_G4_64, LLM__TYPE_G4_128, LLM__TYPE_G8_32,
                         LLM__TYPE_G8_64, LLM__TYPE_G8_128};
    const int toks[] = {1, 2, 3, 4, 5, 7, 13, 33};
    for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++)
        for (size_t j = 0; j < LLM__ARRAY_LEN(toks); j++)
            check_matmul(types[i], 512, 48, toks[j], 1 + (int)(j % 2), j % 3 == 0);
    // row lengths with an odd number of blocks, row counts that are not powers of two
    check_matmul(LLM__TYPE_Q8_0, 864, 48, 3, 2, true);
    // half-precision tiles: a row length that is no multiple of 16 (masked tail), row and token
    // counts that leave partial tiles
    check_matmul(LLM__TYPE_F16, 200, 22, 9, 2, true);
    check_matmul(LLM__TYPE_BF16, 200, 22, 6, 1, false);
    check_matmul(LLM__TYPE_F16, 204, 22, 9, 2, false);   // (AVX2: 4 columns after the last 8)
    check_matmul(LLM__TYPE_BF16, 197, 11, 5, 2, true);
    check_matmul(LLM__TYPE_F16, 99, 9, 1, 1, false);
    check_matmul(LLM__TYPE_F16, 200, 22, 16, 2, false);   // (AVX-512: tiles of 4 rows x 6 tokens)
    check_matmul(LLM__TYPE_F16, 200, 22, 8, 2, true);     // (AVX-512: 7 or 8 tokens, tiles of 3 rows)
    check_matmul(LLM__TYPE_F16, 576, 400, 8, 2, false);   // (and chunks of 48 rows: 8 of them, 16 rows left)
    check_matmul(LLM__TYPE_BF16, 197, 23, 7, 1, false);
    check_matmul(LLM__TYPE_BF16, 72, 22, 24, 1, true);
    check_matmul(LLM__TYPE_Q4_0, 608, 80, 9, 2, false);
    check_matmul(LLM__TYPE_Q4_0, 2048, 256, 1, 2, false);
    check_matmul(LLM__TYPE_Q8_0, 2048, 256, 40, 2, false);
    check_matmul(LLM__TYPE_Q4_1, 608, 80, 9, 2, true);
    check_matmul(LLM__TYPE_Q5_0, 608, 80, 9, 2, false);
    check_matmul(LLM__TYPE_Q5_1, 864, 48, 11, 2, false);
    check_matmul(LLM__TYPE_Q5_0, 2048, 256, 1, 2, false);
    check_matmul(LLM__TYPE_MXFP4, 2880, 64, 1, 2, true);   // (gpt-oss's rows: an odd number of blocks)
    check_matmul(LLM__TYPE_MXFP4, 608, 80, 9, 2, false);
    check_mxfp4_layout();
    // prompt steps of Q2_K/Q3_K/Q5_K/Q6_K/IQ4_XS weights: tiles unpacked per step (from 32 tokens)
    check_matmul(LLM__TYPE_Q3_K, 768, 48, 40, 2, true);
    check_matmul(LLM__TYPE_Q6_K, 768, 48, 45, 2, true);
    check_matmul(LLM__TYPE_Q5_K, 512, 32, 64, 2, false);
    check_matmul(LLM__TYPE_Q2_K, 768, 32, 64, 2, false);
    check_matmul(LLM__TYPE_IQ4_XS, 1024, 48, 37, 2, true);
    check_matmul(LLM__TYPE_Q3_K, 512, 40, 32, 2, false);   // (N not a multiple of 16: the plain kernels)
    check_matmul(LLM__TYPE_Q3_K, 768, 48, 5, 2, false);    // x16 Q3_K with an odd number of super-blocks
    check_matmul(LLM__TYPE_Q2_K, 768, 48, 5, 2, true);     // x16 Q2_K likewise
    check_matmul(LLM__TYPE_Q2_K, 768, 48, 40, 2, true);    // (and its prompt tiles unpacked from x16)
    check_matmul(LLM__TYPE_IQ4_XS, 768, 48, 9, 2, true);   // x16 IQ4_XS likewise
    check_matmul(LLM__TYPE_IQ4_XS, 768, 48, 33, 1, false);
    check_matmul(LLM__TYPE_Q6_K, 768, 48, 9, 2, true);     // x16 Q6_K likewise
    check_matmul(LLM__TYPE_Q6_K, 768, 48, 33, 1, false);
    check_matmul(LLM__TYPE_Q5_K, 768, 48, 9, 2, true);     // x16 Q5_K likewise
    check_matmul(LLM__TYPE_Q5_K, 768, 48, 33, 1, false);
    // N not a multiple of 16: the plain layout
    check_matmul(LLM__TYPE_Q4_0, 256, 10, 3, 2, false);
    // AWQ / GPTQ: x16 G4 records of several groups (576 inputs: 9 groups of 64), 8+ tokens a tile
    check_matmul(LLM__TYPE_G4_64, 576, 48, 11, 2, true);
    check_matmul(LLM__TYPE_G4_128, 1536, 32, 1, 2, false);
    check_matmul(LLM__TYPE_G4_32, 96, 16, 9, 1, false);
    check_matmul(LLM__TYPE_G4_128, 256, 10, 3, 2, false);   // (N not a multiple of 16: the plain kernels)

    // scalar, the best level, and AVX2 where the best is AVX-512 (what machines without it run)
    int simd_levels[3] = {LLM__SIMD_SCALAR, -1, -1}, n_levels = 2;
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() == LLM__SIMD_AVX512) simd_levels[n_levels++] = LLM__SIMD_AVX2;
#endif
    for (int s = 0; s < n_levels; s++)
        for (int kv = 0; kv < 3; kv++) {
            // (Q8_0: llm_engine_create refuses a head size that 32 does not divide)
            int kvt = kv == 2 ? LLM__TYPE_Q8_0 : kv ? LLM__TYPE_F16 : LLM__TYPE_F32;
            check_attention(simd_levels[s], kvt, 16, 64, 8, 2, 2, 0, 0.0f, false);
            check_attention(simd_levels[s], kvt, 32, 32, 4, 4, 1, 0, 0.0f, false);
            check_attention(simd_levels[s], kvt, 8, 64, 4, 1, 2, 0, 0.0f, false);
            check_attention(simd_levels[s], kvt, 16, 128, 2, 2, 2, 0, 0.0f, false);
            if (kvt != LLM__TYPE_Q8_0) check_attention(simd_levels[s], kvt, 16, 80, 2, 1, 2, 0, 0.0f, false);
            check_attention(simd_levels[s], kvt, 16, 64, 9, 3, 2, 0, 0.0f, false);   // (SmolLM2's heads: 3 per KV head)
            check_attention(simd_levels[s], kvt, 8, 64, 9, 3, 2, 0, 0.0f, false);
            // sliding windows: inside one block, across blocks, and of one token; soft-capping
            check_attention(simd_levels[s], kvt, 16, 64, 8, 2, 2, 5, 0.0f, false);
            check_attention(simd_levels[s], kvt, 32, 32, 4, 4, 1, 40, 0.0f, false);
            check_attention(simd_levels[s], kvt, 8, 64, 4, 1, 2, 19, 0.0f, false);
            check_attention(simd_levels[s], kvt, 16, 64, 4, 2, 2, 1, 0.0f, false);
            check_attention(simd_levels[s], kvt, 16, 64, 8, 2, 2, 0, 2.0f, false);
            check_attention(simd_levels[s], kvt, 16, 64, 8, 2, 2, 13, 1.5f, false);
            // gpt-oss's sinks: alone and with a window (heads of 64, 8 query heads a KV head)
            check_attention(simd_levels[s], kvt, 16, 64, 8, 1, 2, 0, 0.0f, true);
            check_attention(simd_levels[s], kvt, 16, 64, 4, 2, 2, 7, 0.0f, true);
        }
    check_kv_rotation();
    check_act_quantizers();
    check_rope(false, false, false);
    check_rope(true, false, false);
    check_rope(false, true, false);
    check_rope(true, false, true);
    check_rope(false, true, true);
    check_rmsnorm();
    check_gelu_mul();
    check_moe(LLM__TYPE_F32, 64, 48, 6, 2, 5, 2, false);
    check_moe(LLM__TYPE_Q8_0, 96, 40, 8, 3, 9, 2, false);
    check_moe(LLM__TYPE_Q4_0, 64, 33, 5, 2, 1, 1, false);
    check_moe(LLM__TYPE_Q4_K, 256, 64, 16, 4, 17, 2, false);
    check_moe(LLM__TYPE_F16, 64, 16, 4, 4, 3, 2, false);
    check_moe(LLM__TYPE_Q8_0, 128, 48, 8, 2, 12, 2, false);    // experts of whole groups of 16 rows: x16 on AVX-512
    check_moe(LLM__TYPE_Q4_0, 64, 32, 6, 3, 1, 2, false);
    check_moe(LLM__TYPE_Q5_1, 96, 16, 8, 2, 20, 2, false);
    // gpt-oss: its routing and the experts' biases, MXFP4 experts (x16 on AVX-512; 24 rows: plain)
    check_moe(LLM__TYPE_MXFP4, 128, 32, 8, 4, 9, 2, true);
    check_moe(LLM__TYPE_MXFP4, 96, 24, 4, 2, 7, 2, true);
    check_moe(LLM__TYPE_Q8_0, 64, 32, 6, 2, 11, 2, true);
    check_moe(LLM__TYPE_F32, 64, 24, 4, 2, 3, 1, true);
    check_swiglu_oai();
    check_contract_entries(&llm__cpu_iface);
#ifdef LLM_VULKAN
    check_contract_entries(&llm__vk_iface);
#endif
#ifdef LLM_CUDA
    check_contract_entries(&llm__cu_iface);
#endif
    check_sync_errors();
    check_devices_and_bandwidth();
    check_mem_free();
    check_small_batch_steps();
    const int pool_threads[] = {2, 3, 8, 64};
    for (size_t i = 0; i < LLM__ARRAY_LEN(pool_threads); i++) check_pool(pool_threads[i]);
    check_tuner();
    return test_summary("test_backend");
}
