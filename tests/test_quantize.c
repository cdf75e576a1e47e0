// The calibrated quantizers of llm_quantize against references: GPTQ's factor U of the inverse
// Hessian (U^T U H = I in float64), GPTQ's rows (column by column in int4 groups, and block by
// block in llama.cpp types) against round-to-nearest on the outputs' error over the calibration
// inputs, act-order, AWQ's scale search on inputs with outlier channels, and the checkpoint
// packing (AWQ's nibble order, GPTQ's zeros less one) read back by the engine's loader.
#include "../llm.c"
#include "test.h"

static uint64_t rng_state = 88172645463325252ull;
static double rnd(void) {   // uniform in [0, 1)
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(1.0 - rnd())) * cos(6.283185307179586 * rnd())); }

// T tokens of n inputs, correlated (a few shared factors) and with some channels far larger.
static void make_inputs(float *x, int T, int n, int outliers) {
    float f[4];
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < 4; k++) f[k] = gauss();
        for (int i = 0; i < n; i++) {
            float v = 0.5f * gauss() + 0.8f * f[i % 4];
            if (i % 37 < outliers) v *= 12.0f;
            x[(size_t)t * n + i] = v;
        }
    }
}

// The sum over tokens of (w_r . x_t - q_r . x_t)^2 over rows.
static double out_err(const float *w, const float *q, const float *x, int rows, int n, int T) {
    double e = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            double d = 0;
            for (int i = 0; i < n; i++) d += ((double)w[(size_t)r * n + i] - q[(size_t)r * n + i]) * x[(size_t)t * n + i];
            e += d * d;
        }
    return e;
}

// A calibration input: H = X^T X as llm__calib_take accumulates it.
static void take(struct llm__calib *c, float *x, int T, int n) {
    struct llm__buf b = {x, sizeof(float) * (size_t)T * n, NULL, true};
    llm__calib_take(c, 0, LLM__CAL_ATTN_IN, (struct llm__tensor){&b, 0, LLM__TYPE_F32, n, T, sizeof(float) * (size_t)n});
}

static void test_factor(void) {
    const int n = 96, T = 400;
    float *x = malloc(sizeof(float) * T * n);
    make_inputs(x, T, n, 2);
    for (int t = 0; t < T; t++) x[(size_t)t * n + 5] = 0.0f;   // a dead input
    struct llm__err e;
    struct llm__calib c = {0};
    c.n_layer = 1, c.l1 = 1, c.want_h = true, c.stride = 1, c.max_xs = 8;
    c.in = calloc(LLM__CAL_SLOTS, sizeof(*c.in));
    c.pool = llm__pool_new(2, &e);
    c.dot = llm__vec_dot_kernel(LLM__TYPE_F32, llm__simd_best());
    take(&c, x, T / 2, n);
    take(&c, x + (size_t)(T / 2) * n, T - T / 2, n);
    const struct llm__cal_in *ci = &c.in[LLM__CAL_ATTN_IN];
    EXPECT(ci->tokens == T && ci->n_xs == 8, "tokens %lld, samples %d", (long long)ci->tokens, ci->n_xs);
    double herr = 0;   // H against float64
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) {
            double h = 0;
            for (int t = 0; t < T; t++) h += (double)x[(size_t)t * n + i] * x[(size_t)t * n + j];
            herr = fmax(herr, fabs(h - ci->h[i * n + j]) / (fabs(h) + 1.0));
        }
    EXPECT(herr < 1e-4, "H's largest relative error %g", herr);
    for (int act = 0; act < 2; act++) {
        float *U = malloc(sizeof(float) * n * n);
        int32_t order[96];
        uint8_t dead[96];
        EXPECT(llm__gptq_factor(ci, 0.01, act, order, dead, U), "factor");
        EXPECT(dead[5] && !dead[4], "the dead input found");
        // the processing order's H (dampened as the factor dampens it), then U^T U H - I
        const double scale = 2.0 / T;
        double mean = 0, worst = 0;
        for (int i = 0; i < n; i++) mean += dead[i] ? 1.0 : scale * ci->h[i * n + i];
        mean /= n;
        bool sorted = true;
        for (int k = 1; k < n; k++) sorted &= !act || ci->h[order[k - 1] * n + order[k - 1]] >= ci->h[order[k] * n + order[k]];
        EXPECT(sorted, "act-order: by decreasing diagonal");
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                double s = 0;   // (U^T U H)[a][b]
                for (int k = 0; k < n; k++) {
                    double uu = 0;   // (U^T U)[a][k]
                    for (int m = 0; m <= LLM__MIN(a, k); m++) uu += (double)U[m * n + a] * U[m * n + k];
                    const int i = order[k], j = order[b];
                    double h = i == j ? (dead[i] ? 1.0 : scale * ci->h[i * n + i]) + 0.01 * mean
                                      : scale * ci->h[LLM__MIN(i, j) * n + LLM__MAX(i, j)];
                    s += uu * h;
                }
                worst = fmax(worst, fabs(s - (a == b)));
            }
        EXPECT(worst < 2e-3, "act %d: U^T U H differs from I by %g", act, worst);
        bool upper = true;
        for (int a = 0; a < n; a++)
            for (int b = 0; b < a; b++) upper &= U[a * n + b] == 0.0f;
        EXPECT(upper, "U is upper triangular");
        free(U);
    }
    llm__calib_free(&c);
    free(x);
}

// GPTQ's rows against round-to-nearest with the same quantizer, on the outputs' error.
static void test_gptq_rows(void) {
    const int n = 512, rows = 24, T = 800;
    float *x = malloc(sizeof(float) * T * n), *w = malloc(sizeof(float) * rows * n), *U = malloc(sizeof(float) * n * n);
    float *q = malloc(sizeof(float) * rows * n), *r = malloc(sizeof(float) * rows * n), *wp = malloc(sizeof(float) * (n + 512));
    make_inputs(x, T, n, 1);
    for (int i = 0; i < rows * n; i++) w[i] = 0.05f * gauss();
    struct llm__err e;
    struct llm__calib c = {0};
    c.n_layer = 1, c.l1 = 1, c.want_h = true, c.stride = 1;
    c.in = calloc(LLM__CAL_SLOTS, sizeof(*c.in));
    c.pool = llm__pool_new(1, &e);
    c.dot = llm__vec_dot_kernel(LLM__TYPE_F32, llm__simd_best());
    take(&c, x, T, n);
    const struct llm__cal_in *ci = &c.in[LLM__CAL_ATTN_IN];
    for (int act = 0; act < 2; act++) {   // int4 groups of 64 (GPTQ's quantizer; zero points >= 1)
        int32_t order[512];
        uint8_t dead[512], codes[512];
        float sc[8];
        int32_t zr[8];
        EXPECT(llm__gptq_factor(ci, 0.01, act, order, dead, U), "factor");
        for (int row = 0; row < rows; row++) {
            for (int k = 0; k < n; k++) wp[k] = w[row * n + order[k]];
            llm__gptq_row(wp, U, n, 4, 64, false, 1, codes, sc, zr);
            for (int k = 0; k < n; k++) q[row * n + order[k]] = sc[k / 64] * (float)(codes[k] - zr[k / 64]);
            bool zok = true;
            for (int g = 0; g < 8; g++) zok &= zr[g] >= 1 && zr[g] <= 15 && sc[g] == llm__fp16_to_fp32(llm__fp32_to_fp16(sc[g]));
            EXPECT(zok, "zero points in [1, 15], scales fp16");
            for (int g0 = 0; g0 < n; g0 += 64) {   // round-to-nearest, the same quantizer, groups in column order
                float s;
                int z;
                llm__gq_params(w + row * n + g0, 64, 4, false, true, 1, &s, &z);
                for (int i = g0; i < g0 + 64; i++) r[row * n + i] = s * (float)(llm__gq_round(w[row * n + i], s, z, 15) - z);
            }
        }
        const double eg = out_err(w, q, x, rows, n, T), er = out_err(w, r, x, rows, n, T);
        EXPECT(eg < 0.7 * er, "act %d: GPTQ's output error %g, round-to-nearest's %g", act, eg, er);
    }
    // llama.cpp types, a block at a time
    int32_t order[512];
    uint8_t dead[512];
    EXPECT(llm__gptq_factor(ci, 0.01, false, order, dead, U), "factor");
    const int types[] = {LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q4_K, LLM__TYPE_Q8_0, LLM__TYPE_IQ4_NL};
    for (size_t ti = 0; ti < LLM__ARRAY_LEN(types); ti++) {
        const int t = types[ti];
        uint8_t *blk = malloc(llm__row_bytes(t, n));
        for (int row = 0; row < rows; row++) {
            memcpy(wp, w + row * n, sizeof(float) * n);
            llm__gptq_row_type(wp, U, n, t, blk, wp + n);
            llm__dequantize_row(t, blk, q + row * n, n);
            llm__quantize_row(t, w + row * n, blk, n);
            llm__dequantize_row(t, blk, r + row * n, n);
        }
        const double eg = out_err(w, q, x, rows, n, T), er = out_err(w, r, x, rows, n, T);
        // (q4_K's blocks of 256: half the row compensates the other half's errors)
        EXPECT(eg < (t == LLM__TYPE_Q4_K ? 0.95 : 0.85) * er, "%s: GPTQ's output error %g, round-to-nearest's %g",
               llm__type_info(t)->name, eg, er);
        free(blk);
    }
    llm__calib_free(&c);
    free(x), free(w), free(U), free(q), free(r), free(wp);
}

// AWQ's scales on inputs whose outlier channels dominate: a lower output error than no scaling.
static void test_awq_search(void) {
    const int n = 128, rows = 32, T = 256;
    float *x = malloc(sizeof(float) * T * n), *w = malloc(sizeof(float) * rows * n), *s = malloc(sizeof(float) * n);
    make_inputs(x, T, n, 2);
    for (int i = 0; i < rows * n; i++) w[i] = 0.05f * gauss();
    struct llm__err e;
    struct llm__pool *pool = llm__pool_new(2, &e);
    struct llm__cq c;
    memset(&c, 0, sizeof(c));
    c.hf = true, c.awq = true, c.bits = 4, c.group = 64;
    c.cal.dot = llm__vec_dot_kernel(LLM__TYPE_F32, llm__simd_best());
    struct llm__cal_in ci = {n, T, NULL, calloc(n, sizeof(double)), x, T};
    for (int t = 0; t < T; t++)
        for (int i = 0; i < n; i++) ci.abs_sum[i] += fabsf(x[(size_t)t * n + i]);
    struct llm__qmat mt = {.rows = rows, .n = n, .w = w, .type = -1};
    struct llm__qmat *lin[1] = {&mt};
    EXPECT(llm__awq_search(&c, pool, lin, 1, &ci, s), "search");
    bool fail = false;
    float *one = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) one[i] = 1.0f;
    const double l1 = llm__awq_loss(&c, pool, lin, 1, one, &ci, &fail), ls = llm__awq_loss(&c, pool, lin, 1, s, &ci, &fail);
    EXPECT(!fail && ls < 0.8 * l1, "AWQ's loss %g, unscaled %g", ls, l1);
    double big = 0, small = 0;   // the outlier channels get the larger scales
    for (int i = 0; i < n; i++) {
        if (i % 37 < 2) big += s[i] / 8.0;
        else small += s[i] / (double)(n - 8);
    }
    EXPECT(big > 1.5 * small, "outlier channels' mean scale %g, the others' %g", big, small);
    // clipping never raises a group's error over the samples
    float *w0 = malloc(sizeof(float) * rows * n);
    memcpy(w0, w, sizeof(float) * rows * n);
    struct llm__awq_job job = {&c, lin, 1, NULL, &ci, NULL, {0}, false};
    llm__pool_run(pool, llm__awq_clip_worker, &job);
    float *q0 = malloc(sizeof(float) * rows * n), *q1 = malloc(sizeof(float) * rows * n);
    for (int r = 0; r < rows; r++) {
        llm__awq_qdq(&c, -1, w0 + r * n, n, q0 + r * n, NULL);
        llm__awq_qdq(&c, -1, w + r * n, n, q1 + r * n, NULL);
    }
    const double e0 = out_err(w0, q0, x, rows, n, T), e1 = out_err(w0, q1, x, rows, n, T);
    EXPECT(e1 <= e0 * 1.0001, "clipped %g, unclipped %g", e1, e0);
    llm__pool_free(pool);
    free(ci.abs_sum), free(x), free(w), free(w0), free(s), free(one), free(q0), free(q1);
}

int main(void) {
    test_factor();
    test_gptq_rows();
    test_awq_search();
    return test_summary("test_quantize");
}
