// Dot products: the scalar kernels and the choice of a kernel by type and level

#include "internal.h"

// --- dot products: scalar twins ---
//
// All kernels share one signature. n: elements (a multiple of the weight type's block size);
// w: a weight row; a: an activation row of the weight type's vec_dot_type. Q8_0 activations must
// lie in [-127, 127], as llm__quantize_row produces them (the AVX2 kernel relies on it).

static void llm__vec_dot_f32_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(w[i] * a[i]);
    *s = (float)sum;
}

static void llm__vec_dot_f16_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(llm__fp16_to_fp32(w[i]) * llm__fp16_to_fp32(a[i]));
    *s = (float)sum;
}

static void llm__vec_dot_bf16_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]));
    *s = (float)sum;
}

static void llm__vec_dot_q8_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += w[i].qs[j] * a[i].qs[j];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

static void llm__vec_dot_q4_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((w[i].qs[j] & 15) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

// G4 / G8 x Q8_0: per sub-block of 32, the integer sum((q - z) * a) times d_w * d_a.
static inline float llm__vec_dot_gq_scalar(int type, int64_t n, const void *vw, const void *va) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type);
    const size_t bb = llm__type_table[type].block_bytes;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / g; i++) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);
        const float d = llm__fp16_to_fp32(b->d);
        for (int c = 0; c < g / 32; c++, a++) {
            int32_t sumi = 0;
            for (int j = 0; j < 32; j++) sumi += (llm__gq_quant(b, bits, 32 * c + j) - b->z) * a->qs[j];
            sum += (float)sumi * (d * llm__fp16_to_fp32(a->d));
        }
    }
    return sum;
}
LLM__GQ_KERNELS(scalar, , llm__vec_dot_gq_scalar)
// Q4_1 / Q5_1 x Q8_1: d_w * d_a * dot(q, a) + m * s (s = d_a * sum(a): the min's share).
static void llm__vec_dot_q4_1_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_1 *w = vw;
    const struct llm__block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) sumi += (w[i].qs[j] & 15) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
        sum += (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d)) * (float)sumi +
               llm__fp16_to_fp32(w[i].m) * llm__fp16_to_fp32(a[i].s);
    }
    *s = sum;
}

static void llm__vec_dot_q5_1_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_1 *w = vw;
    const struct llm__block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        uint8_t q[32];
        llm__b32_quants(w[i].qs, w[i].qh, q);
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += q[j] * a[i].qs[j];
        sum += (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d)) * (float)sumi +
               llm__fp16_to_fp32(w[i].m) * llm__fp16_to_fp32(a[i].s);
    }
    *s = sum;
}

static void llm__vec_dot_q5_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        uint8_t q[32];
        llm__b32_quants(w[i].qs, w[i].qh, q);
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += (q[j] - 16) * a[i].qs[j];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

// A block of 16 nibble bytes on a grid of 16 values (IQ4_NL, MXFP4) times 32 Q8_0 quants.
static int32_t llm__dot_grid_q8(const int8_t *values, const uint8_t *qs, const int8_t *a) {
    int32_t sumi = 0;
    for (int j = 0; j < 16; j++) sumi += values[qs[j] & 15] * a[j] + values[qs[j] >> 4] * a[j + 16];
    return sumi;
}

static void llm__vec_dot_iq4_nl_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_nl *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++)
        sum += (float)llm__dot_grid_q8(llm__iq4nl_values, w[i].qs, a[i].qs) *
               (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    *s = sum;
}

static void llm__vec_dot_mxfp4_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_mxfp4 *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++)
        sum += (float)llm__dot_grid_q8(llm__mxfp4_values, w[i].qs, a[i].qs) *
               (llm__e8m0_half(w[i].e) * llm__fp16_to_fp32(a[i].d));
    *s = sum;
}

// Q4_K and Q5_K: per super-block, sum_s sc[s] * dot(q, a) over the sub-blocks is one integer; the
// mins contribute dmin * sum_s m[s] * (sum of the activations of s), taken from bsums.
static inline float llm__vec_dot_k45_scalar(uint16_t d, uint16_t dmin, const uint8_t *scales,
                                            const uint8_t *qh, const uint8_t *qs, const struct llm__block_q8_K *a) {
    uint8_t sm[16], q[LLM__QK_K];
    llm__unpack_k4_scales(scales, sm);
    llm__k45_quants(qs, qh, q);
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 8; s++) {
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) dot += q[32 * s + l] * a->qs[32 * s + l];
        sumi += sm[s] * dot;
        summ += sm[8 + s] * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
    }
    return llm__fp16_to_fp32(d) * a->d * (float)sumi - llm__fp16_to_fp32(dmin) * a->d * (float)summ;
}

static void llm__vec_dot_q4_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++)
        sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, NULL, w[i].qs, &a[i]);
    *s = sum;
}

static void llm__vec_dot_q5_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++)
        sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, w[i].qh, w[i].qs, &a[i]);
    *s = sum;
}

static void llm__vec_dot_q6_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t q[LLM__QK_K];
        llm__q6_K_quants(&w[i], q);
        int32_t sumi = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += w[i].scales[g] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q3_K: per super-block sum_s (sc[s] - 32) * dot(q - 4, a) is one integer (|.| < 2^23).
static void llm__vec_dot_q3_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q3_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t sc[16], q[LLM__QK_K];
        llm__q3_K_scales(w[i].scales, sc);
        llm__q3_K_quants(&w[i], q);
        int32_t sumi = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += sc[g] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q2_K: as Q4_K with sub-blocks of 16; the mins take bsums[s] directly.
static void llm__vec_dot_q2_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q2_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        uint8_t q[LLM__QK_K];
        llm__k23_low_quants(w[i].qs, q);
        int32_t sumi = 0, summ = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += (w[i].scales[g] & 15) * dot;
            summ += (w[i].scales[g] >> 4) * a[i].bsums[g];
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi - llm__fp16_to_fp32(w[i].dmin) * a[i].d * (float)summ;
    }
    *s = sum;
}

// IQ4_XS: per super-block sum_b (ls[b] - 32) * dot(value[q], a) is one integer (|.| < 2^28).
static void llm__vec_dot_iq4_xs_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        int32_t sumi = 0;
        for (int b = 0; b < 8; b++) {
            const uint8_t *qs = w[i].qs + 16 * b;
            const int8_t *q8 = a[i].qs + 32 * b;
            int32_t dot = 0;
            for (int l = 0; l < 16; l++)
                dot += llm__iq4nl_values[qs[l] & 15] * q8[l] + llm__iq4nl_values[qs[l] >> 4] * q8[16 + l];
            sumi += ls[b] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// --- dispatch ---

// The kernels of this level by weight type, NULL for a type it has none for.
static llm__vec_dot_fn llm__vec_dot_kernel_scalar(int type) {
    switch (type) {
    case LLM__TYPE_F32: return llm__vec_dot_f32_scalar;
    case LLM__TYPE_F16: return llm__vec_dot_f16_scalar;
    case LLM__TYPE_BF16: return llm__vec_dot_bf16_scalar;
    case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_scalar;
    case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_scalar;
    case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_scalar;
    case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_scalar;
    case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_scalar;
    case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_scalar;
    case LLM__TYPE_MXFP4: return llm__vec_dot_mxfp4_scalar;
    case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_scalar;
    case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_scalar;
    case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_scalar;
    case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_scalar;
    case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_scalar;
    case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_scalar;
    LLM__GQ_CASES(scalar)
    default: return NULL;
    }
}

// The kernel of exactly `level` for weight type `type`, or NULL if that level has none in this
// build (the caller then tries a lower level). LLM__SIMD_SCALAR has one for every supported type.
llm__vec_dot_fn llm__vec_dot_kernel(int type, enum llm__simd level) {
    switch (level) {
    case LLM__SIMD_SCALAR: return llm__vec_dot_kernel_scalar(type);
#if defined(LLM__X86_SIMD)
    case LLM__SIMD_AVX2: return llm__vec_dot_kernel_avx2(type);
    case LLM__SIMD_AVX512: return llm__vec_dot_kernel_avx512(type);
#endif
#if defined(LLM__NEON) && defined(__aarch64__)
    case LLM__SIMD_NEON: return llm__vec_dot_kernel_neon(type);
#endif
    default: return NULL;
    }
}

// n elements of `type` (any supported type, or Q8_K / Q8_1) to floats; n a multiple of the block size.
void llm__dequantize_row(int type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp16_to_fp32_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = llm__bf16_to_fp32(((const uint16_t *)src)[i]);
        return;
    case LLM__TYPE_Q8_0: llm__dequantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__dequantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_1: llm__dequantize_q4_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_0: llm__dequantize_q5_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_1: llm__dequantize_q5_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_IQ4_NL: llm__dequantize_iq4_nl(src, dst, n / LLM__QK); return;
    case LLM__TYPE_MXFP4: llm__dequantize_mxfp4(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q8_1: llm__dequantize_q8_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__dequantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__dequantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__dequantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q3_K: llm__dequantize_q3_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q2_K: llm__dequantize_q2_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_IQ4_XS: llm__dequantize_iq4_xs(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__dequantize_q8_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:
    case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: llm__dequantize_gq(type, src, dst, n); return;
    default: assert(!"llm__dequantize_row: unsupported type"); memset(dst, 0, (size_t)n * sizeof(float)); return;
    }
}

// n floats to `type` (any supported type, or Q8_K / Q8_1); n a multiple of the block size. Q8_0,
// Q8_1 and Q8_K (the activation types) are bit-identical to ggml's reference quantizers, as are
// Q4_0, Q4_1, Q5_0, Q5_1 and MXFP4 (IQ4_NL is not: ggml searches for its scale).
void llm__quantize_row(int type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp32_to_fp16_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = llm__fp32_to_bf16(src[i]);
        return;
    case LLM__TYPE_Q8_0: llm__quantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__quantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_1: llm__quantize_q4_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_0: llm__quantize_q5_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_1: llm__quantize_q5_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_IQ4_NL: llm__quantize_iq4_nl(src, dst, n / LLM__QK); return;
    case LLM__TYPE_MXFP4: llm__quantize_mxfp4(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q8_1: llm__quantize_q8_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__quantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__quantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__quantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q3_K: llm__quantize_q3_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q2_K: llm__quantize_q2_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_IQ4_XS: llm__quantize_iq4_xs(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__quantize_q8_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:
    case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: llm__quantize_gq(type, src, dst, n); return;
    default: assert(!"llm__quantize_row: unsupported type"); return;
    }
}
