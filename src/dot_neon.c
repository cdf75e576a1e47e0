// Dot products on aarch64: NEON (+dotprod)

#include "internal.h"

// --- dot products: NEON (aarch64) ---
//
// Signed 8-bit dots use sdot (vdotq_s32) where the compiler targets it (-march=armv8.2-a+dotprod
// or later), else widening multiplies with pairwise accumulation; both give exact int32 sums.

#if defined(LLM__NEON) && defined(__aarch64__)
static inline int32x4_t llm__dot_s8_neon(int32x4_t acc, int8x16_t x, int8x16_t y) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, x, y);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
#endif
}

// One fp16 value by the hardware conversion (the same result as llm__fp16_to_fp32).
static inline float llm__fp16_to_fp32_neon(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static void llm__vec_dot_f32_neon(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(w + i), vld1q_f32(a + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(w + i + 4), vld1q_f32(a + i + 4));
        acc2 = vfmaq_f32(acc2, vld1q_f32(w + i + 8), vld1q_f32(a + i + 8));
        acc3 = vfmaq_f32(acc3, vld1q_f32(w + i + 12), vld1q_f32(a + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

static void llm__vec_dot_f16_neon(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i))));
        acc1 = vfmaq_f32(acc1, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 4))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4))));
        acc2 = vfmaq_f32(acc2, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 8))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 8))));
        acc3 = vfmaq_f32(acc3, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 12))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 12))));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += llm__fp16_to_fp32_neon(w[i]) * llm__fp16_to_fp32_neon(a[i]);
    *s = sum;
}

static void llm__vec_dot_bf16_neon(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i), 16)));
        acc1 = vfmaq_f32(acc1, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 4), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 4), 16)));
        acc2 = vfmaq_f32(acc2, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 8), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 8), 16)));
        acc3 = vfmaq_f32(acc3, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 12), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 12), 16)));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]);
    *s = sum;
}

static void llm__vec_dot_q8_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(a[i].qs));
        p = llm__dot_s8_neon(p, vld1q_s8(w[i].qs + 16), vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), llm__fp16_to_fp32_neon(w[i].d) * llm__fp16_to_fp32_neon(a[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void llm__vec_dot_q4_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), lo, vld1q_s8(a[i].qs));
        p = llm__dot_s8_neon(p, hi, vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), llm__fp16_to_fp32_neon(w[i].d) * llm__fp16_to_fp32_neon(a[i].d));
    }
    *s = vaddvq_f32(acc);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: quants as signed bytes (Q5_0 less 16, IQ4_NL and MXFP4 through
// their grids with vqtbl1q), two 16-byte dots per block; the min term as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_b32_neon(int type, int64_t n, const void *vw,
                                                                         const void *va) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes,
                 ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);
    const size_t qsoff = type == LLM__TYPE_Q4_1 ? 4 : type == LLM__TYPE_Q5_0 ? 6 : type == LLM__TYPE_Q5_1 ? 8
                         : type == LLM__TYPE_MXFP4 ? 1 : 2;
    const size_t qhoff = type == LLM__TYPE_Q5_0 ? 2 : 4;
    const uint8x16_t m4 = vdupq_n_u8(15), b16 = vdupq_n_u8(16), bit = vld1q_u8(bits);
    const int8x16_t grid = vld1q_s8(type == LLM__TYPE_MXFP4 ? llm__mxfp4_values : llm__iq4nl_values);
    float32x4_t acc = vdupq_n_f32(0);
    float summ = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        const uint8_t *w = (const uint8_t *)vw + (size_t)i * wb, *a = (const uint8_t *)va + (size_t)i * ab;
        const uint8x16_t q = vld1q_u8(w + qsoff);
        uint8x16_t lo = vandq_u8(q, m4), hi = vshrq_n_u8(q, 4);
        int8x16_t slo, shi;
        if (type == LLM__TYPE_IQ4_NL || type == LLM__TYPE_MXFP4) {
            slo = vqtbl1q_s8(grid, lo), shi = vqtbl1q_s8(grid, hi);
        } else {
            if (type != LLM__TYPE_Q4_1) {   // bit j of qh: 16 more for quant j
                uint32_t h;
                memcpy(&h, w + qhoff, 4);
                const uint8x16_t h0 = vcombine_u8(vdup_n_u8((uint8_t)h), vdup_n_u8((uint8_t)(h >> 8)));
                const uint8x16_t h1 = vcombine_u8(vdup_n_u8((uint8_t)(h >> 16)), vdup_n_u8((uint8_t)(h >> 24)));
                lo = vorrq_u8(lo, vandq_u8(vtstq_u8(h0, bit), b16));
                hi = vorrq_u8(hi, vandq_u8(vtstq_u8(h1, bit), b16));
            }
            slo = vreinterpretq_s8_u8(lo), shi = vreinterpretq_s8_u8(hi);
            if (type == LLM__TYPE_Q5_0)
                slo = vsubq_s8(slo, vreinterpretq_s8_u8(b16)), shi = vsubq_s8(shi, vreinterpretq_s8_u8(b16));
        }
        const int8_t *q8 = (const int8_t *)(a + qoff);
        const int32x4_t p = llm__dot_s8_neon(llm__dot_s8_neon(vdupq_n_s32(0), slo, vld1q_s8(q8)), shi,
                                             vld1q_s8(q8 + 16));
        uint16_t wd, ad;
        memcpy(&wd, w, 2), memcpy(&ad, a, 2);
        const float wf = type == LLM__TYPE_MXFP4 ? llm__e8m0_half(w[0]) : llm__fp16_to_fp32_neon(wd);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), wf * llm__fp16_to_fp32_neon(ad));
        if (q81) {
            uint16_t wm, as;
            memcpy(&wm, w + 2, 2), memcpy(&as, a + 2, 2);
            summ += llm__fp16_to_fp32_neon(wm) * llm__fp16_to_fp32_neon(as);
        }
    }
    return vaddvq_f32(acc) + summ;
}

static void llm__vec_dot_q4_1_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q4_1, n, vw, va);
}
static void llm__vec_dot_q5_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q5_0, n, vw, va);
}
static void llm__vec_dot_q5_1_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q5_1, n, vw, va);
}
static void llm__vec_dot_iq4_nl_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_IQ4_NL, n, vw, va);
}
static void llm__vec_dot_mxfp4_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_MXFP4, n, vw, va);
}

// G4 / G8: per sub-block, G4's quants less z as signed bytes (-16..15); G8's dot less z * sum(a).
static inline __attribute__((always_inline)) float llm__vec_dot_gq_neon(int type, int64_t n, const void *vw,
                                                                        const void *va) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), nsub = g / 32;
    const size_t bb = llm__type_table[type].block_bytes;
    const struct llm__block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / g; i++, a += nsub) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);
        const float d = llm__fp16_to_fp32_neon(b->d);
        for (int c = 0; c < nsub; c++) {
            const int8x16_t a0 = vld1q_s8(a[c].qs), a1 = vld1q_s8(a[c].qs + 16);
            int32x4_t p;
            if (bits == 4) {
                const uint8x16_t q = vld1q_u8(b->qs + 16 * c);
                const int8x16_t z = vdupq_n_s8((int8_t)b->z);
                p = llm__dot_s8_neon(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), z), a0);
                p = llm__dot_s8_neon(p, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), z), a1);
            } else {
                const int8x16_t one = vdupq_n_s8(1);
                p = llm__dot_s8_neon(vdupq_n_s32(0), vld1q_s8((const int8_t *)b->qs + 32 * c), a0);
                p = llm__dot_s8_neon(p, vld1q_s8((const int8_t *)b->qs + 32 * c + 16), a1);
                p = vmlsq_n_s32(p, llm__dot_s8_neon(llm__dot_s8_neon(vdupq_n_s32(0), one, a0), one, a1), b->z);
            }
            acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), d * llm__fp16_to_fp32_neon(a[c].d));
        }
    }
    return vaddvq_f32(acc);
}
LLM__GQ_KERNELS(neon, , llm__vec_dot_gq_neon)

// Q4_K / Q5_K: per sub-block an int32 dot, times its scale; mins from bsums as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_k45_neon(int64_t n, const void *vw,
                                                                         const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const uint8x16_t m4 = vdupq_n_u8(15), b16 = vdupq_n_u8(16);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *scales = five ? w5[i].scales : w4[i].scales, *qs = five ? w5[i].qs : w4[i].qs;
        const uint8_t *qh = five ? w5[i].qh : NULL;
        uint8_t sm[16];
        llm__unpack_k4_scales(scales, sm);
        const uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : vdupq_n_u8(0);
        int32_t sumi = 0, summ = 0;
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
            uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4), hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
            if (qh) {
                const uint8x16_t bl = vdupq_n_u8((uint8_t)(1 << (2 * c))), bh = vdupq_n_u8((uint8_t)(1 << (2 * c + 1)));
                lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(h0, bl), b16));
                lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(h1, bl), b16));
                hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(h0, bh), b16));
                hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(h1, bh), b16));
            }
            const int8_t *q8 = a[i].qs + 64 * c;
            int32x4_t plo = llm__dot_s8_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(lo0), vld1q_s8(q8));
            plo = llm__dot_s8_neon(plo, vreinterpretq_s8_u8(lo1), vld1q_s8(q8 + 16));
            int32x4_t phi = llm__dot_s8_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(hi0), vld1q_s8(q8 + 32));
            phi = llm__dot_s8_neon(phi, vreinterpretq_s8_u8(hi1), vld1q_s8(q8 + 48));
            sumi += sm[2 * c] * vaddvq_s32(plo) + sm[2 * c + 1] * vaddvq_s32(phi);
        }
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        sum += llm__fp16_to_fp32_neon(d) * a[i].d * (float)sumi - llm__fp16_to_fp32_neon(dmin) * a[i].d * (float)summ;
    }
    return sum;
}

static void llm__vec_dot_q4_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_neon(n, vw, va, false);
}

static void llm__vec_dot_q5_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_neon(n, vw, va, true);
}

static void llm__vec_dot_q6_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int32_t sumi = 0;
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *q8 = a[i].qs + 128 * h, *sc = w[i].scales + 8 * h;
            #pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {   // l in [16k, 16k + 16): sub-blocks k, k+2, k+4, k+6
                const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k),
                                 hb = vld1q_u8(qh + 16 * k);
                const uint8x16_t u[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[j]), off);
                    sumi += sc[k + 2 * j] *
                            vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * j + 16 * k)));
                }
            }
        }
        sum += llm__fp16_to_fp32_neon(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q3_K (three = true) and Q2_K: per sub-block of 16 an int32 dot, times its scale; Q3_K's quants
// are made signed (q - 4) in registers, Q2_K's mins come from bsums as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_k23_neon(int64_t n, const void *vw,
                                                                         const struct llm__block_q8_K *a, bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const uint8x16_t m3 = vdupq_n_u8(3), b4 = vdupq_n_u8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t sc[16];
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        int32_t summ = 0;
        if (three) {
            llm__q3_K_scales(w3[i].scales, sc);
        } else {
            for (int g = 0; g < 16; g++)
                sc[g] = (int8_t)(w2[i].scales[g] & 15), summ += (w2[i].scales[g] >> 4) * a[i].bsums[g];
        }
        const uint8x16_t hm0 = three ? vld1q_u8(w3[i].hmask) : vdupq_n_u8(0),
                         hm1 = three ? vld1q_u8(w3[i].hmask + 16) : vdupq_n_u8(0);
        int32_t sumi = 0;
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * h), q1 = vld1q_u8(qs + 32 * h + 16);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * j));
                uint8x16_t u0 = vandq_u8(vshlq_u8(q0, sh), m3), u1 = vandq_u8(vshlq_u8(q1, sh), m3);
                int8x16_t v0, v1;
                if (three) {   // q - 4 + 4 * hbit
                    const uint8x16_t bit = vdupq_n_u8((uint8_t)(1 << (4 * h + j)));
                    u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(hm0, bit), b4));
                    u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(hm1, bit), b4));
                    v0 = vsubq_s8(vreinterpretq_s8_u8(u0), vreinterpretq_s8_u8(b4));
                    v1 = vsubq_s8(vreinterpretq_s8_u8(u1), vreinterpretq_s8_u8(b4));
                } else {
                    v0 = vreinterpretq_s8_u8(u0), v1 = vreinterpretq_s8_u8(u1);
                }
                const int8_t *q8 = a[i].qs + 128 * h + 32 * j;
                const int32_t d0 = vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), v0, vld1q_s8(q8)));
                const int32_t d1 = vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), v1, vld1q_s8(q8 + 16)));
                sumi += sc[8 * h + 2 * j] * d0 + sc[8 * h + 2 * j + 1] * d1;
            }
        }
        if (three) sum += llm__fp16_to_fp32_neon(w3[i].d) * a[i].d * (float)sumi;
        else sum += llm__fp16_to_fp32_neon(w2[i].d) * a[i].d * (float)sumi -
                    llm__fp16_to_fp32_neon(w2[i].dmin) * a[i].d * (float)summ;
    }
    return sum;
}

static void llm__vec_dot_q3_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_neon(n, vw, va, true);
}

static void llm__vec_dot_q2_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_neon(n, vw, va, false);
}

// IQ4_XS: levels looked up with tbl, a signed dot per sub-block of 32, times its scale.
static void llm__vec_dot_iq4_xs_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const int8x16_t table = vld1q_s8(llm__iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(15);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        int32_t sumi = 0;
        #pragma GCC unroll 8
        for (int b = 0; b < 8; b++) {
            const uint8x16_t q = vld1q_u8(w[i].qs + 16 * b);
            int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(q, m4)),
                                           vld1q_s8(a[i].qs + 32 * b));
            p = llm__dot_s8_neon(p, vqtbl1q_s8(table, vshrq_n_u8(q, 4)), vld1q_s8(a[i].qs + 32 * b + 16));
            sumi += ls[b] * vaddvq_s32(p);
        }
        sum += llm__fp16_to_fp32_neon(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}
// The kernels of this level by weight type, NULL for a type it has none for.
llm__vec_dot_fn llm__vec_dot_kernel_neon(int type) {
    switch (type) {
    case LLM__TYPE_F32: return llm__vec_dot_f32_neon;
    case LLM__TYPE_F16: return llm__vec_dot_f16_neon;
    case LLM__TYPE_BF16: return llm__vec_dot_bf16_neon;
    case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_neon;
    case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_neon;
    case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_neon;
    case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_neon;
    case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_neon;
    case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_neon;
    case LLM__TYPE_MXFP4: return llm__vec_dot_mxfp4_neon;
    case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_neon;
    case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_neon;
    case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_neon;
    case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_neon;
    case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_neon;
    case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_neon;
    LLM__GQ_CASES(neon)
    default: return NULL;
    }
}

#endif   // LLM__NEON && __aarch64__
