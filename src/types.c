// Tensor types: block layouts, fp16/bf16, CPU features, (de)quantization

#include "internal.h"

// === tensor types ===
// Tensor element types, numbered and laid out exactly as ggml does, so GGUF files written by
// llama.cpp are used in place. A quantized row is a run of blocks; a block holds `blck` elements
// in `block_bytes` bytes: one or two scales (fp16; fp32 for Q8_K) and small integers.
//
// This file provides
//   - per-type facts (llm__type_info, llm__row_bytes),
//   - fp16 / bf16 conversions (scalar, and row versions using F16C / NEON),
//   - each type's dequantizer and quantizer (src/dot.c's llm__dequantize_row and
//     llm__quantize_row pick one by type).
// The dot product kernels, the inner loop of every matmul: s = dot(weight row, activation row),
// are in src/dot.c (the scalar ones and the choice of a kernel), src/dot_x86.c and
// src/dot_neon.c. The activation row is first quantized to the weight type's vec_dot_type, the
// same pairing llama.cpp's CPU backend uses (Q4_0 x Q8_0, Q4_K x Q8_K, F16 x F16, ...), so results
// agree with llama.cpp's up to the order of float additions.
//
// Every kernel exists as a scalar twin (always compiled; it defines the result) and as SIMD
// versions (AVX2, AVX-512 VNNI, NEON) that compute the same integer sums per block and differ
// only in how the float partial sums are added up. The x86 versions are compiled with function
// target attributes and picked at run time, so neither src/dot_x86.c nor llm.c needs a -march
// flag.

LLM__INTERNAL const struct llm__type_info llm__type_table[LLM__TYPE_COUNT] = {
    [LLM__TYPE_F32]        = {"f32",         1,   4, true,  LLM__TYPE_F32, false},
    [LLM__TYPE_F16]        = {"f16",         1,   2, true,  LLM__TYPE_F16, false},
    [LLM__TYPE_Q4_0]       = {"q4_0",       32,  18, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_1]       = {"q4_1",       32,  20, true,  LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q5_0]       = {"q5_0",       32,  22, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q5_1]       = {"q5_1",       32,  24, true,  LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q8_0]       = {"q8_0",       32,  34, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q8_1]       = {"q8_1",       32,  36, false, LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q2_K]       = {"q2_K",      256,  84, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q3_K]       = {"q3_K",      256, 110, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q4_K]       = {"q4_K",      256, 144, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q5_K]       = {"q5_K",      256, 176, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q6_K]       = {"q6_K",      256, 210, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q8_K]       = {"q8_K",      256, 292, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_XXS]    = {"iq2_xxs",   256,  66, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_XS]     = {"iq2_xs",    256,  74, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ3_XXS]    = {"iq3_xxs",   256,  98, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ1_S]      = {"iq1_s",     256,  50, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_NL]     = {"iq4_nl",     32,  18, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ3_S]      = {"iq3_s",     256, 110, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_S]      = {"iq2_s",     256,  82, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_XS]     = {"iq4_xs",    256, 136, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_I8]         = {"i8",          1,   1, false, -1, false},
    [LLM__TYPE_I16]        = {"i16",         1,   2, false, -1, false},
    [LLM__TYPE_I32]        = {"i32",         1,   4, false, -1, false},
    [LLM__TYPE_I64]        = {"i64",         1,   8, false, -1, false},
    [LLM__TYPE_F64]        = {"f64",         1,   8, false, -1, false},
    [LLM__TYPE_IQ1_M]      = {"iq1_m",     256,  56, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_BF16]       = {"bf16",        1,   2, true,  LLM__TYPE_BF16, false},
    [LLM__TYPE_Q4_0_4X4]   = {"q4_0_4x4",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_0_4X8]   = {"q4_0_4x8",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_0_8X8]   = {"q4_0_8x8",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_TQ1_0]      = {"tq1_0",     256,  54, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_TQ2_0]      = {"tq2_0",     256,  66, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_NL_4X4] = {"iq4_nl_4x4", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ4_NL_4X8] = {"iq4_nl_4x8", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ4_NL_8X8] = {"iq4_nl_8x8", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_MXFP4]      = {"mxfp4",      32,  17, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_G4_32]      = {"int4_g32",   32,  20, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G4_64]      = {"int4_g64",   64,  36, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G4_128]     = {"int4_g128", 128,  68, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_32]      = {"int8_g32",   32,  36, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_64]      = {"int8_g64",   64,  68, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_128]     = {"int8_g128", 128, 132, true,  LLM__TYPE_Q8_0, true},
};

// NULL when `type` is not a ggml type id at all (a loader reports "unknown type N"); otherwise the
// facts, including for types llm.c cannot compute with (supported == false).
const struct llm__type_info *llm__type_info(uint32_t type) {
    if (type >= LLM__TYPE_COUNT || !llm__type_table[type].name) return NULL;
    return &llm__type_table[type];
}

// Bytes of a row of n elements; n must be a multiple of the block size. 0 for an unknown type.
size_t llm__row_bytes(int type, int64_t n) {
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    if (!ti) return 0;
    assert(n % ti->blck == 0);
    return (size_t)(n / ti->blck) * ti->block_bytes;
}

// --- block layouts (ggml-common.h), byte for byte ---
//
// The structs are only ever read through pointers to rows ggml laid out; rows must be 2-byte
// aligned (4-byte for Q8_K), which GGUF's 32-byte tensor alignment and llm__alloc guarantee.
LLM__INTERNAL const int8_t llm__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};
LLM__INTERNAL const int8_t llm__mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
bool llm__is_gq(int type) { return type >= LLM__TYPE_G4_32 && type <= LLM__TYPE_G8_128; }
int llm__gq_bits(int type) { return type <= LLM__TYPE_G4_128 ? 4 : 8; }
int llm__gq_group(int type) { return 32 << ((type - LLM__TYPE_G4_32) % 3); }

_Static_assert(sizeof(struct llm__block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(struct llm__block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(struct llm__block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(struct llm__block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(struct llm__block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(struct llm__block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(struct llm__block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(struct llm__block_mxfp4) == 17, "block_mxfp4 layout");
_Static_assert(sizeof(struct llm__block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(struct llm__block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(struct llm__block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(struct llm__block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(struct llm__block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(struct llm__block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(struct llm__block_q8_K) == 292, "block_q8_K layout");

// --- fp16 and bf16 ---

// Exact; NaNs come out quiet with their payload, as F16C's vcvtph2ps does.
float llm__fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    float f;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | mant << 13 | (mant ? 0x00400000u : 0);
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | mant << 13;   // rebias the exponent: 15 -> 127
    } else {
        f = (float)mant * 0x1p-24f;                     // zero or subnormal: mant * 2^-24, exact
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest, ties to even, like F16C's vcvtps2ph (and so ggml): overflow gives infinity,
// NaNs stay NaN (quiet, the top 10 payload bits kept).
uint16_t llm__fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | (ax >> 13 & 0x3ff));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);   // >= 65520 rounds to infinity
    uint32_t h, rest, half;
    if (ax >= 0x38800000u) {   // a normal half (>= 2^-14): keep 10 of the 23 mantissa bits
        h = (ax - 0x38000000u) >> 13;
        rest = ax & 0x1fff;
        half = 0x1000;
    } else {                   // a subnormal half: a multiple of 2^-24
        const uint32_t e = ax >> 23;
        if (e < 102) return sign;   // below 2^-25 (or exactly it: a tie, to even 0)
        const uint32_t mant = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
        h = mant >> shift;
        rest = mant & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    }
    if (rest > half || (rest == half && (h & 1))) h++;   // a carry into the exponent is correct
    return (uint16_t)(sign | h);
}

float llm__bf16_to_fp32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// As ggml_compute_fp32_to_bf16: round to nearest even; NaN keeps its top bits and is made quiet.
uint16_t llm__fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(x >> 16 | 64);
    return (uint16_t)((x + 0x7fffu + (x >> 16 & 1)) >> 16);
}

// --- CPU features ---

// LLM_NO_SIMD leaves the x86 SIMD kernels out (scalar kernels only; LLM__X86_SIMD is then not
// defined, src/internal.h): the fuzzers' builds, whose instrumentation of those kernels took clang
// over 2 minutes per harness.

// The best level this CPU runs. The x86 checks read what the compiler runtime found at start-up
// (including OS support for the AVX / AVX-512 register state), so this is cheap to call often.
enum llm__simd llm__simd_best(void) {
#if defined(LLM__X86_SIMD)
    __builtin_cpu_init();
#if defined(__clang__)
    // clang's __builtin_cpu_supports has no "f16c" (before clang 16); every AVX2 CPU has F16C.
    const bool f16c = true;
#else
    const bool f16c = __builtin_cpu_supports("f16c");
#endif
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)) return LLM__SIMD_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return LLM__SIMD_AVX512;
    return LLM__SIMD_AVX2;
#elif defined(LLM__NEON) && defined(__aarch64__)
    return LLM__SIMD_NEON;
#else
    return LLM__SIMD_SCALAR;
#endif
}

// Whether the CPU has AVX512-BF16 (vdpbf16ps) beside the AVX-512 level.
bool llm__cpu_has_avx512bf16(void) {
#if defined(LLM__X86_SIMD)
    __builtin_cpu_init();
    return llm__simd_best() == LLM__SIMD_AVX512 && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

// --- fp16 rows: the same results as the scalar conversions, faster ---

#if defined(LLM__X86_SIMD)
LLM__AVX2 static void llm__fp16_to_fp32_row_f16c(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}
LLM__AVX2 static void llm__fp32_to_fp16_row_f16c(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif

void llm__fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() != LLM__SIMD_SCALAR) {
        llm__fp16_to_fp32_row_f16c(x, y, n);
        return;
    }
#elif defined(LLM__NEON) && defined(__aarch64__)
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) y[i] = llm__fp16_to_fp32(x[i]);
    return;
#endif
    for (int64_t i = 0; i < n; i++) y[i] = llm__fp16_to_fp32(x[i]);
}

void llm__fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() != LLM__SIMD_SCALAR) {
        llm__fp32_to_fp16_row_f16c(x, y, n);
        return;
    }
#elif defined(LLM__NEON) && defined(__aarch64__)
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = llm__fp32_to_fp16(x[i]);
    return;
#endif
    for (int64_t i = 0; i < n; i++) y[i] = llm__fp32_to_fp16(x[i]);
}

// --- dequantization (scalar; off the hot path: embeddings, tests, debugging) ---

void llm__dequantize_q8_0(const struct llm__block_q8_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)x[i].qs[j];
    }
}

void llm__dequantize_gq(int type, const void *x, float *y, int64_t n) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type);
    const size_t bb = llm__type_table[type].block_bytes;
    for (int64_t i = 0; i < n / g; i++) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)x + (size_t)i * bb);
        const float d = llm__fp16_to_fp32(b->d);
        for (int j = 0; j < g; j++) y[i * g + j] = (float)(llm__gq_quant(b, bits, j) - b->z) * d;
    }
}

void llm__dequantize_q4_0(const struct llm__block_q4_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((x[i].qs[j] & 15) - 8);
            y[j + 16] = d * (float)((x[i].qs[j] >> 4) - 8);
        }
    }
}

void llm__dequantize_q4_1(const struct llm__block_q4_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d), m = llm__fp16_to_fp32(x[i].m);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, NULL, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

void llm__dequantize_q5_0(const struct llm__block_q5_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

void llm__dequantize_q5_1(const struct llm__block_q5_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d), m = llm__fp16_to_fp32(x[i].m);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

// 32 elements of 16 nibble bytes on a grid of 16 values (IQ4_NL, MXFP4), times d.
static void llm__dequantize_grid(float d, const int8_t *values, const uint8_t *qs, float *y) {
    uint8_t q[32];
    llm__b32_quants(qs, NULL, q);
    for (int j = 0; j < 32; j++) y[j] = d * (float)values[q[j]];
}

void llm__dequantize_iq4_nl(const struct llm__block_iq4_nl *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK)
        llm__dequantize_grid(llm__fp16_to_fp32(x[i].d), llm__iq4nl_values, x[i].qs, y);
}

void llm__dequantize_mxfp4(const struct llm__block_mxfp4 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK)
        llm__dequantize_grid(llm__e8m0_half(x[i].e), llm__mxfp4_values, x[i].qs, y);
}

void llm__dequantize_q8_1(const struct llm__block_q8_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)x[i].qs[j];
    }
}

// Q4_K and Q5_K: x = d * sc[s] * q - dmin * m[s] for sub-block s of 32.
static void llm__dequantize_k45(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qh,
                                const uint8_t *qs, float *y) {
    const float d = llm__fp16_to_fp32(d16), dmin = llm__fp16_to_fp32(dmin16);
    uint8_t sm[16], q[LLM__QK_K];
    llm__unpack_k4_scales(scales, sm);
    llm__k45_quants(qs, qh, q);
    for (int s = 0; s < 8; s++) {
        const float ds = d * sm[s], dm = dmin * sm[8 + s];
        for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)q[32 * s + l] - dm;
    }
}

void llm__dequantize_q4_K(const struct llm__block_q4_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++)
        llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, NULL, x[i].qs, y + LLM__QK_K * i);
}

void llm__dequantize_q5_K(const struct llm__block_q5_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++)
        llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, x[i].qh, x[i].qs, y + LLM__QK_K * i);
}

// x = d * scales[g] * q for sub-block g of 16.
void llm__dequantize_q6_K(const struct llm__block_q6_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t q[LLM__QK_K];
        llm__q6_K_quants(&x[i], q);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)x[i].scales[g];
            for (int l = 0; l < 16; l++) y[16 * g + l] = dg * (float)q[16 * g + l];
        }
    }
}

// x = d * (sc[s] - 32) * (q - 4) for sub-block s of 16.
void llm__dequantize_q3_K(const struct llm__block_q3_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t sc[16], q[LLM__QK_K];
        llm__q3_K_scales(x[i].scales, sc);
        llm__q3_K_quants(&x[i], q);
        for (int s = 0; s < 16; s++) {
            const float ds = d * (float)sc[s];
            for (int l = 0; l < 16; l++) y[16 * s + l] = ds * (float)q[16 * s + l];
        }
    }
}

// x = d * sc[s] * q - dmin * m[s] for sub-block s of 16.
void llm__dequantize_q2_K(const struct llm__block_q2_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d), dmin = llm__fp16_to_fp32(x[i].dmin);
        uint8_t q[LLM__QK_K];
        llm__k23_low_quants(x[i].qs, q);
        for (int s = 0; s < 16; s++) {
            const float ds = d * (float)(x[i].scales[s] & 15), dm = dmin * (float)(x[i].scales[s] >> 4);
            for (int l = 0; l < 16; l++) y[16 * s + l] = ds * (float)q[16 * s + l] - dm;
        }
    }
}

// x = d * (ls[b] - 32) * value[q] for sub-block b of 32.
void llm__dequantize_iq4_xs(const struct llm__block_iq4_xs *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t ls[8];
        llm__iq4_xs_scales(&x[i], ls);
        for (int b = 0; b < 8; b++) {
            const float db = d * (float)ls[b];
            const uint8_t *qs = x[i].qs + 16 * b;
            for (int l = 0; l < 16; l++) {
                y[32 * b + l] = db * (float)llm__iq4nl_values[qs[l] & 15];
                y[32 * b + 16 + l] = db * (float)llm__iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

void llm__dequantize_q8_K(const struct llm__block_q8_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K)
        for (int j = 0; j < LLM__QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

// --- quantization ---

// Round to nearest, ties to even (for |f| < 2^51), as ggml's nearest_int does for |f| < 2^22.
// Adding 1.5 * 2^52 leaves the integer in the low mantissa bits. The add is done in double on
// the already rounded float: a compiler cannot fuse it with the multiply that produced f into an
// FMA (gcc does that in GNU C mode), which would round differently from ggml's reference code.
static inline int llm__nearest_int(float f) {
    const double v = (double)f + 6755399441055744.0;
    int64_t bits;
    memcpy(&bits, &v, 8);
    return (int)(bits - 0x4338000000000000);
}

// Activations that are not finite (a model whose weights overflow) must quantize without
// undefined behaviour and stay not finite, so that the logits show it (the engine checks the
// rows it samples from, not every activation):
//   - a block with a NaN gets the scale NaN (every product with it is NaN); the maximum alone
//     could miss it (comparisons with NaN are false) and turn it into a 0;
//   - a block with an infinity gets the scale infinity (amax / 127), so id = 0;
//   - x * id is then NaN for such elements, and beyond +-127 only when id overflowed (a subnormal
//     amax): such a value is clamped before it is converted, NaN to 0, the others to +-127.
// Finite blocks never reach the clamp (|x * id| <= 127 up to rounding, which rounds to 127
// either way): their bytes stay ggml's. The AVX-512 quantizers do the same: on every path the
// quants lie in [-127, 127] and block sums are bounded (the x16 layouts store -c x the sum of 32
// quants in an int32).
static inline float llm__clamp_q127(float v) {
    return v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v == v ? v : 0.0f;
}

// As quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
void llm__quantize_q8_0(const float *x, struct llm__block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        bool nan = false;
        for (int j = 0; j < 32; j++) amax = LLM__MAX(amax, fabsf(x[j])), nan |= x[j] != x[j];
        const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) {
            // roundf(v) without a libm call: v +- 0.5 is exact in double, then truncate
            const double v = (double)llm__clamp_q127(x[j] * id);
            y[i].qs[j] = (int8_t)(int)(v + (v < 0 ? -0.5 : 0.5));
        }
    }
}

// As quantize_row_q4_0_ref: the element of largest magnitude maps to -8, d = max / -8.
// G4 / G8 by rounding to nearest, group by group (the tests' and --quantize's; AWQ and GPTQ
// checkpoints bring their own quants): the group's range [min(x, 0), max(x, 0)] over 2^bits - 1
// steps, z the step where 0 falls, q = clamp(round(x / d) + z).
void llm__quantize_gq(int type, const float *x, void *y, int64_t n) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), qmax = (1 << bits) - 1, off = bits == 8 ? 128 : 0;
    const size_t bb = llm__type_table[type].block_bytes;
    for (int64_t i = 0; i < n / g; i++) {
        struct llm__block_gq *b = (void *)((uint8_t *)y + (size_t)i * bb);
        const float *v = x + i * g;
        float lo = 0.0f, hi = 0.0f;
        for (int j = 0; j < g; j++) lo = v[j] < lo ? v[j] : lo, hi = v[j] > hi ? v[j] : hi;
        b->d = llm__fp32_to_fp16((hi - lo) / (float)qmax);
        const float d = llm__fp16_to_fp32(b->d), id = d > 0.0f ? 1.0f / d : 0.0f;
        const int z = (int)LLM__MIN((float)qmax, LLM__MAX(0.0f, nearbyintf(-lo * id)));
        b->z = (int16_t)(z - off);
        memset(b->qs, 0, (size_t)(bits == 8 ? g : g / 2));
        for (int j = 0; j < g; j++) {
            const int q = (int)LLM__MIN((float)qmax, LLM__MAX(0.0f, nearbyintf(v[j] * id) + (float)z));
            if (bits == 8) b->qs[j] = (uint8_t)(q - off);
            else b->qs[16 * (j / 32) + j % 16] |= (uint8_t)(q << (j % 32 < 16 ? 0 : 4));
        }
    }
}

void llm__quantize_q4_0(const float *x, struct llm__block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            // ggml truncates v + 8.5f; the float sum is formed in double (exact) and rounded to
            // float, so it cannot be fused with the multiply (see llm__nearest_int)
            const float v0 = x[j] * id, v1 = x[j + 16] * id;
            const int q0 = LLM__MIN(15, (int)(float)((double)v0 + 8.5)),
                      q1 = LLM__MIN(15, (int)(float)((double)v1 + 8.5));
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// As quantize_row_q8_1_ref: Q8_0's quants and scale, and s = fp16(d * sum of the quants) (d before
// its rounding to fp16, as ggml). Not finite: as Q8_0 (s is then NaN or infinite too).
void llm__quantize_q8_1(const float *x, struct llm__block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        bool nan = false;
        for (int j = 0; j < 32; j++) amax = LLM__MAX(amax, fabsf(x[j])), nan |= x[j] != x[j];
        const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const double v = (double)llm__clamp_q127(x[j] * id);   // roundf, as in llm__quantize_q8_0
            y[i].qs[j] = (int8_t)(int)(v + (v < 0 ? -0.5 : 0.5));
            sum += y[i].qs[j];
        }
        y[i].s = llm__fp32_to_fp16((float)sum * d);
    }
}

// Min and max of a block of 32 (quantize_row_q4_1_ref / q5_1_ref start from FLT_MAX / -FLT_MAX).
static void llm__block_min_max(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) *min = LLM__MIN(*min, x[j]), *max = LLM__MAX(*max, x[j]);
}

// Packs 32 quants (element order, < 32) into nibbles and, when qh is given, fifth bits.
static void llm__b32_pack(const uint8_t q[32], uint8_t qs[16], uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)(q[j] >> 4 & 1) << j | (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    if (qh) memcpy(qh, &h, 4);
}

// As quantize_row_q4_1_ref (bits 4) and quantize_row_q5_1_ref (bits 5): d = (max - min) / (2^bits
// - 1), m = min, q = (x - min) / d + 0.5 truncated (capped at 15 for Q4_1, as ggml). The sums are
// formed in double and rounded to float, so they cannot be fused (see llm__nearest_int).
static void llm__quantize_min_block(const float *x, int bits, uint16_t *d_out, uint16_t *m_out, uint8_t q[32]) {
    float min, max;
    llm__block_min_max(x, &min, &max);
    const float d = (max - min) / (float)((1 << bits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = llm__fp32_to_fp16(d);
    *m_out = llm__fp32_to_fp16(min);
    for (int j = 0; j < 32; j++) {
        const float v = (float)((double)x[j] - min) * id;
        const int qi = (int)(float)((double)v + 0.5);
        q[j] = (uint8_t)(bits == 4 ? LLM__MIN(15, qi) : qi);
    }
}

void llm__quantize_q4_1(const float *x, struct llm__block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        uint8_t q[32];
        llm__quantize_min_block(x, 4, &y[i].d, &y[i].m, q);
        llm__b32_pack(q, y[i].qs, NULL);
    }
}

void llm__quantize_q5_1(const float *x, struct llm__block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        uint8_t q[32];
        llm__quantize_min_block(x, 5, &y[i].d, &y[i].m, q);
        llm__b32_pack(q, y[i].qs, y[i].qh);
    }
}

// As quantize_row_q5_0_ref: the element of largest magnitude maps to -16, d = max / -16.
void llm__quantize_q5_0(const float *x, struct llm__block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)LLM__MIN(31, (int)(float)((double)(x[j] * id) + 16.5));
        llm__b32_pack(q, y[i].qs, y[i].qh);
    }
}

// The grid value of llm__iq4nl_values nearest to v (the grid is sorted).
static int llm__iq4nl_index(float v) {
    int k = 0;
    while (k < 15 && v > 0.5f * (float)(llm__iq4nl_values[k] + llm__iq4nl_values[k + 1])) k++;
    return k;
}

// The scale of 32 elements on the IQ4_NL grid: for 15 trial scales around the one that puts the
// element of largest magnitude on the grid's end, each element takes the nearest grid value and the
// scale is refitted to those by least squares; the fit of least squared error is kept (0: all zero).
// ggml searches the same trials but weighs each element by its square; unweighted fits the values
// closer (tests/test_quantize.sh compares the errors with llama-quantize's).
static float llm__iq4nl_fit(const float *xb) {
    float amax = 0.0f, max = 0.0f, best_s = 0.0f;
    for (int l = 0; l < 32; l++)
        if (fabsf(xb[l]) > amax) amax = fabsf(xb[l]), max = xb[l];
    if (amax == 0.0f) return 0.0f;
    double best = INFINITY;
    for (int t = -7; t <= 7; t++) {
        const float id = ((float)t - 127.0f) / max;
        double sqq = 0, sqx = 0;
        for (int l = 0; l < 32; l++) {
            const int v = llm__iq4nl_values[llm__iq4nl_index(id * xb[l])];
            sqq += (double)v * v, sqx += (double)v * xb[l];
        }
        if (sqq == 0) continue;
        const double sc = sqx / sqq;
        double err = 0;
        for (int l = 0; l < 32; l++) {
            const int v = llm__iq4nl_values[llm__iq4nl_index(id * xb[l])];
            err += (sc * v - xb[l]) * (sc * v - xb[l]);
        }
        if (err < best) best = err, best_s = (float)sc;
    }
    return best_s;
}

// IQ4_NL: the scale of llm__iq4nl_fit in fp16, each element the nearest grid value against it.
void llm__quantize_iq4_nl(const float *x, struct llm__block_iq4_nl *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        y[i].d = llm__fp32_to_fp16(llm__iq4nl_fit(x));
        const float d = llm__fp16_to_fp32(y[i].d), id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t q[32];
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)llm__iq4nl_index(x[j] * id);
        llm__b32_pack(q, y[i].qs, NULL);
    }
}

// MXFP4 as quantize_row_mxfp4_ref: the exponent puts the block's largest magnitude in the grid's
// top octave, e = floor(log2(amax)) - 2 + 127 (kept in 0..254 here, where ggml's cast would wrap:
// below 2^-125 and for infinities; 0 for an all-zero block), each element the grid value nearest to
// it (the first of a tie).
void llm__quantize_mxfp4(const float *x, struct llm__block_mxfp4 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        int e = 0;
        if (amax > 0.0f && isfinite(amax)) e = LLM__MAX(0, LLM__MIN(254, (int)floorf(log2f(amax)) - 2 + 127));
        else if (amax > 0.0f) e = 254;
        y[i].e = (uint8_t)e;
        const float d = llm__e8m0_half(y[i].e);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            int best = 0;
            float best_err = fabsf((float)llm__mxfp4_values[0] * d - x[j]);
            for (int k = 1; k < 16; k++) {
                const float err = fabsf((float)llm__mxfp4_values[k] * d - x[j]);
                if (err < best_err) best = k, best_err = err;
            }
            q[j] = (uint8_t)best;
        }
        llm__b32_pack(q, y[i].qs, NULL);
    }
}

// As quantize_row_q8_K_ref: iscale = -127 / max (max: the element of largest magnitude),
// q = nearest_int(iscale * x) capped at 127, d = 1 / iscale, and the 16 group sums.
void llm__quantize_q8_K(const float *x, struct llm__block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float amax = 0.0f, max = 0.0f;
        bool nan = false;
        for (int j = 0; j < LLM__QK_K; j++) {
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
            nan |= x[j] != x[j];
        }
        if (amax == 0.0f || nan) {   // (a NaN: quants 0, the scale NaN; see llm__clamp_q127)
            memset(&y[i], 0, sizeof(y[i]));
            if (nan) y[i].d = NAN;
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < LLM__QK_K; j++) {
            const float v = llm__clamp_q127(iscale * x[j]);   // (not finite: see llm__clamp_q127)
            y[i].qs[j] = (int8_t)LLM__MIN(127, llm__nearest_int(v));
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

// Fits x[0..n) ~ scale * q - offset with integer q in [0, qmax], scale >= 0 and offset >= 0 (the
// k-quant formats store a non-negative min that is subtracted, so the range always includes 0).
// Tries ranges slightly narrower and wider than [min(x, 0), max(x)]; for each, assigns q and
// refits (scale, offset) by least squares; keeps the pair with the smallest squared error.
static void llm__fit_scale_min(const float *x, int n, int qmax, float *scale, float *offset) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) lo = LLM__MIN(lo, x[i]), hi = LLM__MAX(hi, x[i]);
    *scale = (hi - lo) / (float)qmax;
    *offset = -lo;
    if (hi <= lo) {
        *scale = 0.0f;
        return;
    }
    double sum_x = 0;
    for (int i = 0; i < n; i++) sum_x += x[i];
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = ((float)qmax + 0.1f * (float)t) / (hi - lo);
        double sq = 0, sqq = 0, sqx = 0;
        int q[LLM__QK];
        for (int i = 0; i < n; i++) {
            q[i] = LLM__MAX(0, LLM__MIN(qmax, llm__nearest_int(iscale * (x[i] - lo))));
            sq += q[i], sqq += (double)q[i] * q[i], sqx += (double)q[i] * x[i];
        }
        // minimize sum (s*q + b - x)^2 over s and b; the format needs b = -offset <= 0
        const double det = n * sqq - sq * sq;
        if (det <= 0) continue;
        double s = (n * sqx - sq * sum_x) / det, b = (sum_x - s * sq) / n;
        if (b > 0) b = 0, s = sqx / sqq;
        if (s <= 0) continue;
        double err = 0;
        for (int i = 0; i < n; i++) err += (s * q[i] + b - x[i]) * (s * q[i] + b - x[i]);
        if (err < best) best = err, *scale = (float)s, *offset = (float)-b;
    }
}

// Fits x[0..n) ~ scale * q with integer q in [-32, 31] (scale may be negative so the element of
// largest magnitude can use -32). Tries scales around max / -32 and refits each by least squares.
static float llm__fit_scale_sym(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax == 0.0f) return 0.0f;
    float best_scale = max / -32.0f;
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = (-32.0f + 0.1f * (float)t) / max;
        double sqq = 0, sqx = 0;
        int q[16];
        for (int i = 0; i < n; i++) {
            q[i] = LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(iscale * x[i])));
            sqq += (double)q[i] * q[i], sqx += (double)q[i] * x[i];
        }
        if (sqq == 0) continue;
        const double s = sqx / sqq;
        double err = 0;
        for (int i = 0; i < n; i++) err += (s * q[i] - x[i]) * (s * q[i] - x[i]);
        if (err < best) best = err, best_scale = (float)s;
    }
    return best_scale;
}

// Q4_K (qmax 15) and Q5_K (qmax 31): fit each sub-block of 32, quantize the 8 scales and 8 mins
// to 6 bits against fp16 super-block scales, then requantize every element against the scale
// and min it will really be decoded with. q[0..256) receives the quants.
static void llm__quantize_k_super(const float *x, int qmax, uint16_t *d_out, uint16_t *dmin_out,
                                  uint8_t scales[12], uint8_t q[LLM__QK_K]) {
    float sub_scale[8], sub_min[8], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; s++) {
        llm__fit_scale_min(x + 32 * s, 32, qmax, &sub_scale[s], &sub_min[s]);
        max_scale = LLM__MAX(max_scale, sub_scale[s]);
        max_min = LLM__MAX(max_min, sub_min[s]);
    }
    *d_out = llm__fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = llm__fp32_to_fp16(max_min / 63.0f);
    const float d = llm__fp16_to_fp32(*d_out), dmin = llm__fp16_to_fp32(*dmin_out);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = (uint8_t)(d > 0.0f ? LLM__MAX(0, LLM__MIN(63, llm__nearest_int(sub_scale[s] / d))) : 0);
        m[s] = (uint8_t)(dmin > 0.0f ? LLM__MAX(0, LLM__MIN(63, llm__nearest_int(sub_min[s] / dmin))) : 0);
    }
    for (int j = 0; j < 4; j++) {   // the packing described at struct llm__block_q4_K
        scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    for (int s = 0; s < 8; s++) {
        const float ds = d * sc[s], dm = dmin * m[s];
        for (int l = 0; l < 32; l++) {
            const int v = ds > 0.0f ? llm__nearest_int((x[32 * s + l] + dm) / ds) : 0;
            q[32 * s + l] = (uint8_t)LLM__MAX(0, LLM__MIN(qmax, v));
        }
    }
}

void llm__quantize_q4_K(const float *x, struct llm__block_q4_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        uint8_t q[LLM__QK_K];
        llm__quantize_k_super(x, 15, &y[i].d, &y[i].dmin, y[i].scales, q);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

void llm__quantize_q5_K(const float *x, struct llm__block_q5_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        uint8_t q[LLM__QK_K];
        llm__quantize_k_super(x, 31, &y[i].d, &y[i].dmin, y[i].scales, q);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
                y[i].qs[32 * c + l] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
                y[i].qh[l] |= (uint8_t)((q0 >> 4) << (2 * c) | (q1 >> 4) << (2 * c + 1));
            }
    }
}

void llm__quantize_q6_K(const float *x, struct llm__block_q6_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], amax = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub_scale[s] = llm__fit_scale_sym(x + 16 * s, 16);
            amax = LLM__MAX(amax, fabsf(sub_scale[s]));
        }
        y[i].d = llm__fp32_to_fp16(amax / 127.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        uint8_t q[LLM__QK_K];   // quant + 32, in [0, 64)
        for (int s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? LLM__MAX(-127, LLM__MIN(127, llm__nearest_int(sub_scale[s] / d))) : 0;
            y[i].scales[s] = (int8_t)sc;
            const float ds = d * (float)sc;
            for (int l = 0; l < 16; l++) {
                const int v = ds != 0.0f ? llm__nearest_int(x[16 * s + l] / ds) : 0;
                q[16 * s + l] = (uint8_t)(LLM__MAX(-32, LLM__MIN(31, v)) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {   // the packing described at struct llm__block_q6_K
            const uint8_t *qq = q + 128 * h;
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((qq[l] & 15) | (qq[l + 64] & 15) << 4);
                ql[l + 32] = (uint8_t)((qq[l + 32] & 15) | (qq[l + 96] & 15) << 4);
                qh[l] = (uint8_t)(qq[l] >> 4 | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 |
                                  (qq[l + 96] >> 4) << 6);
            }
        }
    }
}

// Fits x[0..n) ~ scale * q with integer q in [-nmax, nmax) (scale may be negative so the element
// of largest magnitude can use -nmax). Tries scales around max / -nmax, refits each by least squares.
static float llm__fit_scale_sym_n(const float *x, int n, int nmax) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax == 0.0f) return 0.0f;
    float best_scale = max / (float)-nmax;
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = ((float)-nmax + 0.05f * (float)(nmax * t)) / max;
        double sqq = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            const int q = LLM__MAX(-nmax, LLM__MIN(nmax - 1, llm__nearest_int(iscale * x[i])));
            sqq += (double)q * q, sqx += (double)q * x[i];
        }
        if (sqq == 0) continue;
        const double s = sqx / sqq;
        double err = 0;
        for (int i = 0; i < n; i++) {
            const int q = LLM__MAX(-nmax, LLM__MIN(nmax - 1, llm__nearest_int(iscale * x[i])));
            err += (s * q - x[i]) * (s * q - x[i]);
        }
        if (err < best) best = err, best_scale = (float)s;
    }
    return best_scale;
}

// Packs 256 quants 0..3 into the Q2_K/Q3_K qs layout (the inverse of llm__k23_low_quants).
static void llm__pack_k23_low(const uint8_t q[LLM__QK_K], uint8_t qs[64]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *qq = q + 128 * h + l;
            qs[32 * h + l] = (uint8_t)((qq[0] & 3) | (qq[32] & 3) << 2 | (qq[64] & 3) << 4 | (qq[96] & 3) << 6);
        }
}

// Q3_K: a symmetric scale per sub-block of 16 (quants -4..3), the 16 scales to 6 bits against an
// fp16 super-block scale, then every element requantized against the scale it will be decoded with.
void llm__quantize_q3_K(const float *x, struct llm__block_q3_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], amax = 0.0f, max = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub_scale[s] = llm__fit_scale_sym_n(x + 16 * s, 16, 4);
            if (fabsf(sub_scale[s]) > amax) amax = fabsf(sub_scale[s]), max = sub_scale[s];
        }
        y[i].d = llm__fp32_to_fp16(max / -32.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        uint8_t q[LLM__QK_K], lo[LLM__QK_K];
        memset(y[i].scales, 0, sizeof(y[i].scales));
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int s = 0; s < 16; s++) {
            const int sc = d != 0.0f ? LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(sub_scale[s] / d))) : 0;
            const int u = sc + 32;   // the packing described at struct llm__block_q3_K
            y[i].scales[s % 8] |= (uint8_t)((u & 15) << (4 * (s / 8)));
            y[i].scales[8 + s % 4] |= (uint8_t)((u >> 4) << (2 * (s / 4)));
            const float ds = d * (float)sc;
            for (int l = 0; l < 16; l++) {
                const int v = ds != 0.0f ? llm__nearest_int(x[16 * s + l] / ds) : 0;
                q[16 * s + l] = (uint8_t)(LLM__MAX(-4, LLM__MIN(3, v)) + 4);
            }
        }
        for (int e = 0; e < LLM__QK_K; e++) {
            lo[e] = q[e] & 3;
            y[i].hmask[e % 32] |= (uint8_t)((q[e] >> 2) << (e / 32));
        }
        llm__pack_k23_low(lo, y[i].qs);
    }
}

// Q2_K: scale and min per sub-block of 16 (quants 0..3), both to 4 bits against fp16 super-block
// scales, then every element requantized against the scale and min it will be decoded with.
void llm__quantize_q2_K(const float *x, struct llm__block_q2_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], sub_min[16], max_scale = 0.0f, max_min = 0.0f;
        for (int s = 0; s < 16; s++) {
            llm__fit_scale_min(x + 16 * s, 16, 3, &sub_scale[s], &sub_min[s]);
            max_scale = LLM__MAX(max_scale, sub_scale[s]);
            max_min = LLM__MAX(max_min, sub_min[s]);
        }
        y[i].d = llm__fp32_to_fp16(max_scale / 15.0f);
        y[i].dmin = llm__fp32_to_fp16(max_min / 15.0f);
        const float d = llm__fp16_to_fp32(y[i].d), dmin = llm__fp16_to_fp32(y[i].dmin);
        uint8_t q[LLM__QK_K];
        for (int s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? LLM__MAX(0, LLM__MIN(15, llm__nearest_int(sub_scale[s] / d))) : 0;
            const int m = dmin > 0.0f ? LLM__MAX(0, LLM__MIN(15, llm__nearest_int(sub_min[s] / dmin))) : 0;
            y[i].scales[s] = (uint8_t)(sc | m << 4);
            const float ds = d * (float)sc, dm = dmin * (float)m;
            for (int l = 0; l < 16; l++) {
                const int v = ds > 0.0f ? llm__nearest_int((x[16 * s + l] + dm) / ds) : 0;
                q[16 * s + l] = (uint8_t)LLM__MAX(0, LLM__MIN(3, v));
            }
        }
        llm__pack_k23_low(q, y[i].qs);
    }
}

// The index of the IQ4_NL level nearest to v (in units of the sub-block's scale).
static inline int llm__iq4nl_nearest(float v) {
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf(v - (float)llm__iq4nl_values[k]) < fabsf(v - (float)llm__iq4nl_values[best])) best = k;
    return best;
}

// IQ4_XS: per sub-block of 32, scales around max / -127 (the largest magnitude on the level -127)
// each assigned and refit by least squares; the 8 scales to 6 bits against an fp16 super-block
// scale; then every element gets the level nearest to it under the scale it will be decoded with.
void llm__quantize_iq4_xs(const float *x, struct llm__block_iq4_xs *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[8], amax_s = 0.0f, max_s = 0.0f;
        for (int b = 0; b < 8; b++) {
            sub_scale[b] = llm__iq4nl_fit(x + 32 * b);
            if (fabsf(sub_scale[b]) > amax_s) amax_s = fabsf(sub_scale[b]), max_s = sub_scale[b];
        }
        y[i].d = llm__fp32_to_fp16(max_s / -32.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
        for (int b = 0; b < 8; b++) {
            const int ls = d != 0.0f ? LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(sub_scale[b] / d))) : 0;
            const int u = ls + 32;   // the packing described at struct llm__block_iq4_xs
            y[i].scales_l[b / 2] |= (uint8_t)((u & 15) << (4 * (b % 2)));
            y[i].scales_h |= (uint16_t)((u >> 4) << (2 * b));
            const float db = d * (float)ls, idb = db != 0.0f ? 1.0f / db : 0.0f;
            for (int l = 0; l < 16; l++) {
                const int q0 = llm__iq4nl_nearest(x[32 * b + l] * idb),
                          q1 = llm__iq4nl_nearest(x[32 * b + 16 + l] * idb);
                y[i].qs[16 * b + l] = (uint8_t)(q0 | q1 << 4);
            }
        }
    }
}
