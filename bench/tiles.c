// The CPU backend's int8 prompt tiles against the int8 peak, on one thread (AVX-512 VNNI only).
//
//   cc -O2 -std=c11 -I. bench/tiles.c -o build/tiles -lm -lpthread && build/tiles [ROWS]
//
// For Q8_0, Q4_0, Q4_1, Q5_0 and Q4_K (the x16 layouts): a matrix of ROWS x 2048 (default 2048,
// 4 MB of Q8_0: the weights come from L2 and memory as in a real product; 16: one group, from L1)
// times 200 tokens in the order llm__cpu_mm_x16 takes them (16 rows x 8 tokens a call), the best
// of 5 passes, as multiply-adds a second and as a share of the peak llm bench --peak measures
// (ten independent vpdpbusd chains) on this thread just before. Then the same Q8_0 product with
// its integer sums alone (no block scales applied, the results wrong): what the tile's float
// work costs. Includes llm.c (the amalgamation) to reach the internal kernels.
#include "llm.c"
#include <stdio.h>
#include <time.h>

#if defined(LLM__X86_SIMD)
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// The Q8_0 tile's integer work alone: per block, 8 vpdpbusd a token and nothing else.
LLM__AVX512 static void ints_only(const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out,
                                  size_t os) {
    __m512i acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_si512();
    for (int64_t b = 0; b < K / 32; b++) {
        const uint8_t *q = rec + (b / 2) * 1088 + (b % 2) * 512;   // (the x16 Q8_0 unit: 2 x 512 + 64)
        __m512i wv[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) wv[c] = _mm512_loadu_si512((const void *)(q + 64 * c));
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++)
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) acc[t] = llm__dpbusd_bcast(acc[t], wv[c], act + t * stride + 32 * b + 4 * c);
    }
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) _mm512_storeu_ps(out + t * os, _mm512_cvtepi32_ps(acc[t]));
}

LLM__AVX512 static double run(int type, int64_t M, bool ints, double peak) {
    const int64_t K = 2048, T = 200;
    const size_t rb = llm__row_bytes(type, K), gb = llm__x16_group_bytes(type, K), stride = llm__x16_act_stride(type, K);
    float *x = malloc(sizeof(float) * (size_t)(K * LLM__MAX(M, T)));
    uint64_t s = 1;
    for (int64_t i = 0; i < K * LLM__MAX(M, T); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int64_t)(s >> 33) % 2001 - 1000) / 1000.0f;
    }
    uint8_t *q = malloc(rb * (size_t)M), *w = aligned_alloc(64, gb * (size_t)(M / 16));
    uint8_t *act = aligned_alloc(64, (stride * (size_t)T + 63) & ~(size_t)63);
    float *out = malloc(sizeof(float) * (size_t)(M * T));
    for (int64_t r = 0; r < M; r++) llm__quantize_row(type, x + r * K, q + r * rb, K);
    if (type == LLM__TYPE_Q4_K) llm__x16k_repack(q, w, K, 0, M / 16);
    else llm__x16_repack(type, q, w, K, 0, M / 16);
    for (int64_t t = 0; t < T; t++) llm__x16_quantize_act(type, x + (t * 7 % M) * K, act + (size_t)t * stride, K);
    double best = 1e30;
    for (int pass = 0; pass < 5; pass++) {
        const double t0 = now();
        for (int64_t r = 0; r < M; r += 16)
            for (int64_t t = 0; t < T; t += 8) {
                const uint8_t *rec = w + (size_t)(r / 16) * gb, *a = act + (size_t)t * stride;
                float *o = out + t * M + r;
                if (ints) ints_only(rec, a, stride, K, o, (size_t)M);
                else if (type == LLM__TYPE_Q4_K) llm__x16k_tile_avx512(8, rec, a, stride, K, o, (size_t)M);
                else llm__x16_tile_avx512(type, 8, rec, a, stride, K, o, (size_t)M);
            }
        best = LLM__MIN(best, now() - t0);
    }
    const double macs = (double)M * (double)T * (double)K / best;
    printf("  %-6s %s %6.1f G multiply-adds/s  %3.0f%% of the peak\n", llm__type_info((uint32_t)type)->name,
           ints ? "integer sums only" : "tile             ", macs / 1e9, 100.0 * macs / peak);
    free(x);
    free(q);
    free(w);
    free(act);
    free(out);
    return macs;
}

int main(int argc, char **argv) {
    const int64_t M = argc > 1 ? (atoll(argv[1]) + 15) / 16 * 16 : 2048;
    if (llm__simd_best() != LLM__SIMD_AVX512 || M < 16) {
        fprintf(stderr, "tiles: needs AVX-512 VNNI (the x16 tiles) and ROWS >= 16\n");
        return 1;
    }
    double peak = 0;
    int32_t sink = 0;
    for (int i = 0; i < 5; i++) {
        const double t0 = now();
        const int64_t m = llm__peak_avx512(1 << 20, i, &sink);
        peak = LLM__MAX(peak, (double)m / (now() - t0));
    }
    printf("one thread, %lld rows x 2048 columns x 200 tokens; int8 peak %.1f G multiply-adds/s (sink %d)\n",
           (long long)M, peak / 1e9, (int)sink);
    const int types[] = {LLM__TYPE_Q8_0, LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q4_K};
    for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++) run(types[i], M, false, peak);
    run(LLM__TYPE_Q8_0, M, true, peak);
    return 0;
}
#else
int main(void) {
    fprintf(stderr, "tiles: x86 only (AVX-512 VNNI)\n");
    return 1;
}
#endif
