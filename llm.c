// llm.c — a portable LLM inference engine in one C file. See llm.h for the interface.
//
// Contents (each section starts with a banner "// === name ===")
//   1. helpers: errors, memory
//   2. tensor types: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K (+ Q8_K activations), SIMD kernels
//   3. model files: GGUF reader (mmap, validated) and writer
//   4. thread pool
//   5. backend vtable and the CPU backend
//   6. the transformer
//   7. KV cache blocks
//   8. sampler
//   9. tokenizer
//  10. public API
//  11. command-line program (only with -DLLM_MAIN)
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "llm.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define LLM__X86 1
#include <immintrin.h>
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
#define LLM__NEON 1
#include <arm_neon.h>
#endif

// === helpers: errors, logging, memory ===

#define LLM__MIN(a, b) ((a) < (b) ? (a) : (b))
#define LLM__MAX(a, b) ((a) > (b) ? (a) : (b))
#define LLM__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

// An error message buffer. Every fallible internal function takes one and returns a status.
struct llm__err { char msg[512]; };

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static enum llm_status llm__fail(struct llm__err *e, enum llm_status st, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
    }
    return st;
}

static inline double llm__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// 64-byte aligned allocation (cache lines, AVX-512 loads). Large buffers (weights, KV cache) are
// 2 MB aligned and asked to be backed by huge pages where the kernel does that on request
// (Linux THP "madvise" mode): streaming hundreds of MB per token through 4 KB pages costs a TLB
// miss every 4 KB.
static void *llm__alloc(size_t size) {
    void *p = NULL;
    if (size == 0) size = 64;
    size_t align = size >= ((size_t)4 << 20) ? ((size_t)2 << 20) : 64;
    if (posix_memalign(&p, align, (size + align - 1) & ~(align - 1)) != 0) return NULL;
#if defined(MADV_HUGEPAGE)
    if (align > 64) madvise(p, (size + align - 1) & ~(align - 1), MADV_HUGEPAGE);
#endif
    return p;
}

// === tensor types ===
// Tensor element types, numbered and laid out exactly as ggml does, so GGUF files written by
// llama.cpp are used in place. A quantized row is a run of blocks; a block holds `blck` elements
// in `block_bytes` bytes: one or two scales (fp16; fp32 for Q8_K) and small integers.
//
// This section provides
//   - per-type facts (llm__type_info, llm__row_bytes),
//   - fp16 / bf16 conversions (scalar, and row versions using F16C / NEON),
//   - row dequantizers and quantizers,
//   - dot product kernels, the inner loop of every matmul: s = dot(weight row, activation row).
//     The activation row is first quantized to the weight type's vec_dot_type, the same pairing
//     llama.cpp's CPU backend uses (Q4_0 x Q8_0, Q4_K x Q8_K, F16 x F16, ...), so results agree
//     with llama.cpp's up to the order of float additions.
//
// Every kernel exists as a scalar twin (always compiled; it defines the result) and as SIMD
// versions (AVX2, AVX-512 VNNI, NEON) that compute the same integer sums per block and differ
// only in how the float partial sums are added up. The x86 versions are compiled with function
// target attributes and picked at run time, so `cc -c llm.c` needs no -march flag.

enum llm__type {
    LLM__TYPE_F32 = 0, LLM__TYPE_F16 = 1, LLM__TYPE_Q4_0 = 2, LLM__TYPE_Q4_1 = 3,
    LLM__TYPE_Q5_0 = 6, LLM__TYPE_Q5_1 = 7, LLM__TYPE_Q8_0 = 8, LLM__TYPE_Q8_1 = 9,
    LLM__TYPE_Q2_K = 10, LLM__TYPE_Q3_K = 11, LLM__TYPE_Q4_K = 12, LLM__TYPE_Q5_K = 13,
    LLM__TYPE_Q6_K = 14, LLM__TYPE_Q8_K = 15,
    LLM__TYPE_IQ2_XXS = 16, LLM__TYPE_IQ2_XS = 17, LLM__TYPE_IQ3_XXS = 18, LLM__TYPE_IQ1_S = 19,
    LLM__TYPE_IQ4_NL = 20, LLM__TYPE_IQ3_S = 21, LLM__TYPE_IQ2_S = 22, LLM__TYPE_IQ4_XS = 23,
    LLM__TYPE_I8 = 24, LLM__TYPE_I16 = 25, LLM__TYPE_I32 = 26, LLM__TYPE_I64 = 27,
    LLM__TYPE_F64 = 28, LLM__TYPE_IQ1_M = 29, LLM__TYPE_BF16 = 30,
    // 31-33 and 36-38 are ggml's former repacked Q4_0 / IQ4_NL layouts (removed from ggml, still
    // found in old files); 4 and 5 were dropped before GGUF existed.
    LLM__TYPE_Q4_0_4X4 = 31, LLM__TYPE_Q4_0_4X8 = 32, LLM__TYPE_Q4_0_8X8 = 33,
    LLM__TYPE_TQ1_0 = 34, LLM__TYPE_TQ2_0 = 35,
    LLM__TYPE_IQ4_NL_4X4 = 36, LLM__TYPE_IQ4_NL_4X8 = 37, LLM__TYPE_IQ4_NL_8X8 = 38,
    LLM__TYPE_MXFP4 = 39,
    LLM__TYPE_COUNT = 40
};

struct llm__type_info {
    const char *name;      // ggml's name: "f32", "q4_0", "q4_K", ...
    int64_t blck;          // elements per block (1 for plain float and integer types)
    size_t block_bytes;    // bytes per block
    bool supported;        // usable as a weight type by llm.c
    int vec_dot_type;      // activation type a weight row of this type is multiplied with; -1: none
};

static const struct llm__type_info llm__type_table[LLM__TYPE_COUNT] = {
    [LLM__TYPE_F32]        = {"f32",         1,   4, true,  LLM__TYPE_F32},
    [LLM__TYPE_F16]        = {"f16",         1,   2, true,  LLM__TYPE_F16},
    [LLM__TYPE_Q4_0]       = {"q4_0",       32,  18, true,  LLM__TYPE_Q8_0},
    [LLM__TYPE_Q4_1]       = {"q4_1",       32,  20, false, LLM__TYPE_Q8_1},
    [LLM__TYPE_Q5_0]       = {"q5_0",       32,  22, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_Q5_1]       = {"q5_1",       32,  24, false, LLM__TYPE_Q8_1},
    [LLM__TYPE_Q8_0]       = {"q8_0",       32,  34, true,  LLM__TYPE_Q8_0},
    [LLM__TYPE_Q8_1]       = {"q8_1",       32,  36, false, LLM__TYPE_Q8_1},
    [LLM__TYPE_Q2_K]       = {"q2_K",      256,  84, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_Q3_K]       = {"q3_K",      256, 110, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_Q4_K]       = {"q4_K",      256, 144, true,  LLM__TYPE_Q8_K},
    [LLM__TYPE_Q5_K]       = {"q5_K",      256, 176, true,  LLM__TYPE_Q8_K},
    [LLM__TYPE_Q6_K]       = {"q6_K",      256, 210, true,  LLM__TYPE_Q8_K},
    [LLM__TYPE_Q8_K]       = {"q8_K",      256, 292, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ2_XXS]    = {"iq2_xxs",   256,  66, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ2_XS]     = {"iq2_xs",    256,  74, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ3_XXS]    = {"iq3_xxs",   256,  98, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ1_S]      = {"iq1_s",     256,  50, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ4_NL]     = {"iq4_nl",     32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_IQ3_S]      = {"iq3_s",     256, 110, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ2_S]      = {"iq2_s",     256,  82, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ4_XS]     = {"iq4_xs",    256, 136, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_I8]         = {"i8",          1,   1, false, -1},
    [LLM__TYPE_I16]        = {"i16",         1,   2, false, -1},
    [LLM__TYPE_I32]        = {"i32",         1,   4, false, -1},
    [LLM__TYPE_I64]        = {"i64",         1,   8, false, -1},
    [LLM__TYPE_F64]        = {"f64",         1,   8, false, -1},
    [LLM__TYPE_IQ1_M]      = {"iq1_m",     256,  56, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_BF16]       = {"bf16",        1,   2, true,  LLM__TYPE_BF16},
    [LLM__TYPE_Q4_0_4X4]   = {"q4_0_4x4",   32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_Q4_0_4X8]   = {"q4_0_4x8",   32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_Q4_0_8X8]   = {"q4_0_8x8",   32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_TQ1_0]      = {"tq1_0",     256,  54, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_TQ2_0]      = {"tq2_0",     256,  66, false, LLM__TYPE_Q8_K},
    [LLM__TYPE_IQ4_NL_4X4] = {"iq4_nl_4x4", 32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_IQ4_NL_4X8] = {"iq4_nl_4x8", 32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_IQ4_NL_8X8] = {"iq4_nl_8x8", 32,  18, false, LLM__TYPE_Q8_0},
    [LLM__TYPE_MXFP4]      = {"mxfp4",      32,  17, false, LLM__TYPE_Q8_0},
};

// NULL when `type` is not a ggml type id at all (a loader reports "unknown type N"); otherwise the
// facts, including for types llm.c cannot compute with (supported == false).
static const struct llm__type_info *llm__type_info(uint32_t type) {
    if (type >= LLM__TYPE_COUNT || !llm__type_table[type].name) return NULL;
    return &llm__type_table[type];
}

// Bytes of a row of n elements; n must be a multiple of the block size. 0 for an unknown type.
static size_t llm__row_bytes(int type, int64_t n) {
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    if (!ti) return 0;
    assert(n % ti->blck == 0);
    return (size_t)(n / ti->blck) * ti->block_bytes;
}

// --- block layouts (ggml-common.h), byte for byte ---
//
// The structs are only ever read through pointers to rows ggml laid out; rows must be 2-byte
// aligned (4-byte for Q8_K), which GGUF's 32-byte tensor alignment and llm__alloc guarantee.

#define LLM__QK 32      // elements per block of Q4_0 / Q8_0
#define LLM__QK_K 256   // elements per super-block of the k-quants

struct llm__block_q8_0 {   // x[j] = d * qs[j]
    uint16_t d;            // fp16 scale
    int8_t qs[32];
};
struct llm__block_q4_0 {   // x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8), j < 16
    uint16_t d;
    uint8_t qs[16];
};
// Q4_K: 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and 6-bit min m[s]:
// x = d*sc[s]*q - dmin*m[s], q a 4-bit quant. Sub-blocks 2c and 2c+1 (c = 0..3) share the 32
// bytes qs[32c..32c+32): low nibbles hold 2c, high nibbles 2c+1. `scales` packs sc and m:
//   bytes 0-3:  sc[0..3] in bits 0-5, bits 4-5 of sc[4..7] in bits 6-7
//   bytes 4-7:  m[0..3]  in bits 0-5, bits 4-5 of m[4..7]  in bits 6-7
//   bytes 8-11: bits 0-3 of sc[4..7] in the low nibble, bits 0-3 of m[4..7] in the high nibble
struct llm__block_q4_K {
    uint16_t d, dmin;      // fp16 super-block scales of the scales and of the mins
    uint8_t scales[12];
    uint8_t qs[128];
};
// Q5_K: Q4_K plus a fifth bit: bit s of qh[l] is bit 4 of element l of sub-block s.
struct llm__block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales: x = d * scales[s] * (q - 32), q a 6-bit quant.
// In each half h (128 elements; ql += 64h, qh += 32h), for l < 32:
//   q[l]    = ql[l]    & 15 | (qh[l] >> 0 & 3) << 4      q[l+64] = ql[l]    >> 4 | (qh[l] >> 4 & 3) << 4
//   q[l+32] = ql[l+32] & 15 | (qh[l] >> 2 & 3) << 4      q[l+96] = ql[l+32] >> 4 | (qh[l] >> 6 & 3) << 4
struct llm__block_q6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// Q8_K: activations for the k-quants. bsums[g] = sum of qs[16g..16g+16), so a kernel gets the
// sums it needs for the mins (Q4_K/Q5_K) and the -32 offset (Q6_K) without touching qs again.
struct llm__block_q8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
_Static_assert(sizeof(struct llm__block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(struct llm__block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(struct llm__block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(struct llm__block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(struct llm__block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(struct llm__block_q8_K) == 292, "block_q8_K layout");

// --- fp16 and bf16 ---

// Exact; NaNs come out quiet with their payload, as F16C's vcvtph2ps does.
static float llm__fp16_to_fp32(uint16_t h) {
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
static uint16_t llm__fp32_to_fp16(float f) {
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

static float llm__bf16_to_fp32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// As ggml_compute_fp32_to_bf16: round to nearest even; NaN keeps its top bits and is made quiet.
static uint16_t llm__fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(x >> 16 | 64);
    return (uint16_t)((x + 0x7fffu + (x >> 16 & 1)) >> 16);
}

// --- CPU features ---

enum llm__simd { LLM__SIMD_SCALAR = 0, LLM__SIMD_AVX2 = 1, LLM__SIMD_AVX512 = 2, LLM__SIMD_NEON = 3 };

#if defined(LLM__X86) && (defined(__GNUC__) || defined(__clang__))
#define LLM__X86_SIMD 1
// AVX2 level: AVX2 + FMA + F16C. AVX-512 level: F, BW, VL, DQ and VNNI (Ice Lake, Zen 4 and later).
#define LLM__AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLM__AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#endif

// The best level this CPU runs. The x86 checks read what the compiler runtime found at start-up
// (including OS support for the AVX / AVX-512 register state), so this is cheap to call often.
static enum llm__simd llm__simd_best(void) {
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

static void llm__fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n) {
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

static void llm__fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
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

// Unpacks the 12 `scales` bytes of a Q4_K/Q5_K block into sm[0..8) = sc[0..8), sm[8..16) = m[0..8).
// Done on 32-bit words; every operation stays within its byte, so byte order does not matter.
static inline void llm__unpack_k4_scales(const uint8_t *scales, uint8_t sm[16]) {
    uint32_t w[3], o[4];
    memcpy(w, scales, 12);
    o[0] = w[0] & 0x3f3f3f3fu;
    o[1] = (w[2] & 0x0f0f0f0fu) | (w[0] >> 2 & 0x30303030u);
    o[2] = w[1] & 0x3f3f3f3fu;
    o[3] = (w[2] >> 4 & 0x0f0f0f0fu) | (w[1] >> 2 & 0x30303030u);
    memcpy(sm, o, 16);
}

static void llm__dequantize_q8_0(const struct llm__block_q8_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)x[i].qs[j];
    }
}

static void llm__dequantize_q4_0(const struct llm__block_q4_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((x[i].qs[j] & 15) - 8);
            y[j + 16] = d * (float)((x[i].qs[j] >> 4) - 8);
        }
    }
}

// The 256 quants of a Q4_K (qh = NULL: 0..15) or Q5_K (0..31) super-block, in element order.
static inline void llm__k45_quants(const uint8_t *qs, const uint8_t *qh, uint8_t q[LLM__QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
    if (qh)
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] |= (uint8_t)((qh[l] >> (2 * c) & 1) << 4);
                q[64 * c + 32 + l] |= (uint8_t)((qh[l] >> (2 * c + 1) & 1) << 4);
            }
}

// The 256 quants of a Q6_K super-block minus 32 (-32..31), in element order.
static inline void llm__q6_K_quants(const struct llm__block_q6_K *x, int8_t q[LLM__QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *qq = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            qq[l] = (int8_t)(((ql[l] & 15) | (qh[l] & 3) << 4) - 32);
            qq[l + 32] = (int8_t)(((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4) - 32);
            qq[l + 64] = (int8_t)(((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32);
            qq[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32);
        }
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

static void llm__dequantize_q4_K(const struct llm__block_q4_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, NULL, x[i].qs, y + LLM__QK_K * i);
}

static void llm__dequantize_q5_K(const struct llm__block_q5_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, x[i].qh, x[i].qs, y + LLM__QK_K * i);
}

// x = d * scales[g] * q for sub-block g of 16.
static void llm__dequantize_q6_K(const struct llm__block_q6_K *x, float *y, int64_t nb) {
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

static void llm__dequantize_q8_K(const struct llm__block_q8_K *x, float *y, int64_t nb) {
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

// As quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
static void llm__quantize_q8_0(const float *x, struct llm__block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = LLM__MAX(amax, fabsf(x[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) {
            // roundf(v) without a libm call: v +- 0.5 is exact in double, then truncate
            const double v = (double)(x[j] * id);
            y[i].qs[j] = (int8_t)(int)(v + (v < 0 ? -0.5 : 0.5));
        }
    }
}

// As quantize_row_q4_0_ref: the element of largest magnitude maps to -8, d = max / -8.
static void llm__quantize_q4_0(const float *x, struct llm__block_q4_0 *y, int64_t nb) {
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
            const int q0 = LLM__MIN(15, (int)(float)((double)v0 + 8.5)), q1 = LLM__MIN(15, (int)(float)((double)v1 + 8.5));
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// As quantize_row_q8_K_ref: iscale = -127 / max (max: the element of largest magnitude),
// q = nearest_int(iscale * x) capped at 127, d = 1 / iscale, and the 16 group sums.
static void llm__quantize_q8_K(const float *x, struct llm__block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < LLM__QK_K; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < LLM__QK_K; j++) {
            const float v = iscale * x[j];
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

static void llm__quantize_q4_K(const float *x, struct llm__block_q4_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        uint8_t q[LLM__QK_K];
        llm__quantize_k_super(x, 15, &y[i].d, &y[i].dmin, y[i].scales, q);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

static void llm__quantize_q5_K(const float *x, struct llm__block_q5_K *y, int64_t nb) {
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

static void llm__quantize_q6_K(const float *x, struct llm__block_q6_K *y, int64_t nb) {
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
                qh[l] = (uint8_t)(qq[l] >> 4 | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
            }
        }
    }
}

// --- dot products: scalar twins ---
//
// All kernels share one signature. n: elements (a multiple of the weight type's block size);
// w: a weight row; a: an activation row of the weight type's vec_dot_type. Q8_0 activations must
// lie in [-127, 127], as llm__quantize_row produces them (the AVX2 kernel relies on it).

typedef void (*llm__vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);

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
    for (int64_t i = 0; i < n / LLM__QK_K; i++) sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, NULL, w[i].qs, &a[i]);
    *s = sum;
}

static void llm__vec_dot_q5_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, w[i].qh, w[i].qs, &a[i]);
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

// --- dot products: AVX2 (+FMA, F16C) ---
//
// Integer products use vpmaddubsw (unsigned 8-bit x signed 8-bit -> pairs summed to 16 bits), so
// weights are brought to unsigned form first; vpmaddwd then sums pairs to 32 bits, optionally
// times a 16-bit scale. Each block's integer sums are converted to float and added into float
// accumulators with the block's scale; horizontal sums happen once per row.

#if defined(LLM__X86_SIMD)
LLM__AVX2 static inline float llm__hsum_avx2(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

LLM__AVX2 static void llm__vec_dot_f32_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(a + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(a + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

LLM__AVX2 static void llm__vec_dot_f16_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 16))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 16))), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 24))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 24))), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += _cvtsh_ss(w[i]) * _cvtsh_ss(a[i]);
    *s = sum;
}

// bf16 -> fp32 is a 16-bit left shift of the bits.
LLM__AVX2 static inline __m256 llm__load_bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

LLM__AVX2 static void llm__vec_dot_bf16_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(llm__load_bf16x8(w + i), llm__load_bf16x8(a + i), acc0);
        acc1 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 8), llm__load_bf16x8(a + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 16), llm__load_bf16x8(a + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 24), llm__load_bf16x8(a + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(llm__load_bf16x8(w + i), llm__load_bf16x8(a + i), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]);
    *s = sum;
}

// dot of 32 signed weights with 32 signed activations as 8 int32 partial sums: |w| times a with
// w's sign (vpsignb), so vpmaddubsw sees an unsigned first operand. Needs a != -128.
LLM__AVX2 static inline __m256i llm__dot_i8_avx2(__m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

LLM__AVX2 static void llm__vec_dot_q8_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        const __m256i p1 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i + 1].qs), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
    }
    *s = llm__hsum_avx2(_mm256_add_ps(acc0, acc1));
}

// One Q4_0 block times one Q8_0 block as 8 int32 partial sums: the 32 nibbles are spread to bytes
// in element order (16 low nibbles, then 16 high), and dot(q - 8, a) = dot(q, a) - dot(8, a).
LLM__AVX2 static inline __m256i llm__dot_q4_0_avx2(const uint8_t *qs, const int8_t *q8) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nib, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

LLM__AVX2 static void llm__vec_dot_q4_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs), p1 = llm__dot_q4_0_avx2(w[i + 1].qs, a[i + 1].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
    }
    *s = llm__hsum_avx2(_mm256_add_ps(acc0, acc1));
}

// llm__unpack_k4_scales in registers: the 12 scale bytes (read as 16; the 4 after them are still
// inside the block) become [sc0..sc7, m0..m7]. Dword lanes: w0 & 3f | w2 & 0f, (w0 >> 2) & 30 |
// w1 & 3f | (w2 >> 4) & 0f, (w1 >> 2) & 30.
LLM__AVX2 static inline __m128i llm__k4_scales_sse(const uint8_t *scales) {
    const __m128i v = _mm_loadu_si128((const __m128i *)scales);
    __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_set_epi32(4, 0, 0, 0));
    lo = _mm_and_si128(lo, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                     _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(lo, hi);
}

// The mins term of a Q4_K/Q5_K super-block as 8 int32 partial sums of m[s] * bsums[2s + {0,1}].
LLM__AVX2 static inline __m256i llm__k4_mins_dot(__m128i sm, const int16_t *bsums) {
    const __m128i dup = _mm_shuffle_epi8(sm, _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(dup), _mm256_loadu_si256((const __m256i *)bsums));
}

// vpshufb control giving every 16-bit lane the 16-bit element e of a 128-bit lane.
LLM__AVX2 static inline __m256i llm__spread1(int e) { return _mm256_set1_epi16((short)(2 * e | (2 * e + 1) << 8)); }

// Q4_K (five = false) and Q5_K: 4-bit (5-bit) unsigned quants times activations, per sub-block,
// times the sub-block's 6-bit scale, all in int32; the mins go to a separate accumulator.
// Always inlined so `five` is a constant in each kernel.
LLM__AVX2 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx2(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const __m256i m4 = _mm256_set1_epi8(15), b16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *qs = five ? w5[i].qs : w4[i].qs;
        const __m128i sm = llm__k4_scales_sse(five ? w5[i].scales : w4[i].scales);
        const float dd = _cvtsh_ss(d) * a[i].d, dm = _cvtsh_ss(dmin) * a[i].d;
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(llm__k4_mins_dot(sm, a[i].bsums)), _mm256_set1_ps(-dm), accm);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m256i hb = five ? _mm256_loadu_si256((const __m256i *)w5[i].qh) : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {   // bit 2c (2c+1) of each qh byte is bit 4 of the low (high) nibble quant
                const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c))), bh = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bl), bl), b16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bh), bh), b16));
            }
            const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c)));
            const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, llm__spread1(2 * c))));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, llm__spread1(2 * c + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dd), acc);
    }
    return llm__hsum_avx2(_mm256_add_ps(acc, accm));
}

LLM__AVX2 static void llm__vec_dot_q4_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, false);
}

LLM__AVX2 static void llm__vec_dot_q5_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, true);
}

// Q6_K: quants used unsigned (0..63); the -32 offset is applied once per super-block as
// 32 * sum_s scale[s] * bsums[s]. Each 128-bit lane of a 32-quant vector is one sub-block of 16,
// so the scales are spread with vpshufb: lane L of quarter k gets scale 2k + L of the half.
LLM__AVX2 static void llm__vec_dot_q6_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            // 16-bit shifts leak bits across bytes only outside the 0x30 mask
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
            };
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * h + 32 * k)));
                const short lo = (short)(4 * k | (4 * k + 1) << 8), hi = (short)((4 * k + 2) | (4 * k + 3) << 8);
                const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, ctrl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(w[i].d) * a[i].d), acc);
    }
    *s = llm__hsum_avx2(acc);
}

// --- dot products: AVX-512 (F, BW, VL, DQ, VNNI) ---
//
// 512-bit registers hold two 32-quant blocks (Q8_0), four 16-byte nibble blocks (Q4_0) or half a
// k-quant super-block. Signed x signed int8 dots use vpdpbusd on (w + 128) and subtract 128 * sum(a)
// (exact for every int8); nibbles are unsigned already.

LLM__AVX512 static inline __m512i llm__load_2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

// 16-bit lane selectors for vpermw / vpermt2w: lanes 4k..4k+3 select 16-bit word k*stride (k < 4).
// A 64-byte load at block i of a Q4_0 row holds the fp16 scales of blocks i..i+3 at words 0, 9,
// 18, 27; two loads at block i of a Q8_0 row hold them at words 0, 17, 34, 51.
LLM__AVX512 static inline __m512i llm__word_sel4(int stride) {
    const int s1 = stride * 0x10001, s2 = 2 * stride * 0x10001, s3 = 3 * stride * 0x10001;
    return _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, s3, s3, s2, s2, s1, s1, 0, 0);
}

LLM__AVX512 static void llm__vec_dot_f32_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(a + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(a + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

LLM__AVX512 static void llm__vec_dot_f16_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 32))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 32))), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 48))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 48))), acc3);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                               _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

LLM__AVX512 static inline __m512 llm__bf16x16_to_ps(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

LLM__AVX512 static void llm__vec_dot_bf16_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
        acc1 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), acc1);
        acc2 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 32))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 32))), acc2);
        acc3 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 48))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 48))), acc3);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                               llm__bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// Q8_0 x Q8_0, 4 blocks per step: two registers of two blocks each; 8 int32 lanes per block.
LLM__AVX512 static void llm__vec_dot_q8_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    const int64_t nb = n / LLM__QK;
    const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i blk01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i blk23 = _mm512_add_epi32(blk01, _mm512_set1_epi32(2));
    // 16-bit words 0, 17, 34, 51 of 128 bytes from block i: the fp16 scales of blocks i..i+3
    const __m512i sel = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 51 << 16 | 34, 17 << 16 | 0);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m512i w01 = llm__load_2x256(w[i].qs, w[i + 1].qs), w23 = llm__load_2x256(w[i + 2].qs, w[i + 3].qs);
        const __m512i a01 = llm__load_2x256(a[i].qs, a[i + 1].qs), a23 = llm__load_2x256(a[i + 2].qs, a[i + 3].qs);
        const __m512i p01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, _mm512_xor_si512(w01, flip), a01),
                                             _mm512_dpbusd_epi32(zero, flip, a01));
        const __m512i p23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, _mm512_xor_si512(w23, flip), a23),
                                             _mm512_dpbusd_epi32(zero, flip, a23));
        // d_w * d_a of the 4 blocks, spread to each block's 8 lanes
        const __m512i wd = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&w[i]), sel,
                                                     _mm512_loadu_si512((const void *)((const char *)&w[i] + 64)));
        const __m512i ad = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&a[i]), sel,
                                                     _mm512_loadu_si512((const void *)((const char *)&a[i] + 64)));
        const __m512 d4 = _mm512_castps128_ps512(_mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(wd)),
                                                            _mm_cvtph_ps(_mm512_castsi512_si128(ad))));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p01), _mm512_permutexvar_ps(blk01, d4), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p23), _mm512_permutexvar_ps(blk23, d4), acc1);
    }
    __m256 acc256 = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m256i wq = _mm256_loadu_si256((const __m256i *)w[i].qs), aq = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i f = _mm256_set1_epi8((char)0x80), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, _mm256_xor_si256(wq, f), aq), _mm256_dpbusd_epi32(z, f, aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + llm__hsum_avx2(acc256);
}

// Q4_0 x Q8_0, 4 blocks per step. One register holds the 4 blocks' nibble bytes; its low nibbles
// are elements 0-15 of each block, its high nibbles elements 16-31. The activations are regrouped
// to match (first and second halves of each block), so 128-bit lane k belongs to block k.
LLM__AVX512 static void llm__vec_dot_q4_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    const __m512i m4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
    const __m512i first = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0), second = _mm512_set_epi64(15, 14, 11, 10, 7, 6, 3, 2);
    const __m512i wsel = llm__word_sel4(9), asel = llm__word_sel4(17);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)w[i].qs));
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 1].qs), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 2].qs), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 3].qs), 3);
        const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        const __m512i a01 = llm__load_2x256(a[i].qs, a[i + 1].qs), a23 = llm__load_2x256(a[i + 2].qs, a[i + 3].qs);
        const __m512i alo = _mm512_permutex2var_epi64(a01, first, a23), ahi = _mm512_permutex2var_epi64(a01, second, a23);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, alo), hi, ahi);
        const __m512i c = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, alo), eight, ahi);
        // scales of blocks i..i+3, each repeated for its 4 lanes, gathered from 64-byte lines
        const __m512i wd = _mm512_permutexvar_epi16(wsel, _mm512_loadu_si512((const void *)&w[i]));
        const __m512i ad = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&a[i]), asel,
                                                     _mm512_loadu_si512((const void *)((const char *)&a[i] + 64)));
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(wd)), _mm512_cvtph_ps(_mm512_castsi512_si256(ad)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p, c)), d, acc);
    }
    __m256 acc256 = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)w[i].qs);
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
        const __m256i aq = _mm256_loadu_si256((const __m256i *)a[i].qs), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, nib, aq), _mm256_dpbusd_epi32(z, _mm256_set1_epi8(8), aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(acc) + llm__hsum_avx2(acc256);
}

// A vpshufb control that fills 128-bit lanes 0-1 with 16-bit element e0 and lanes 2-3 with e1 of
// a source whose 4 lanes are identical.
LLM__AVX512 static inline __m512i llm__spread2(int e0, int e1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(2 * e0 | (2 * e0 + 1) << 8))),
                              _mm256_set1_epi16((short)(2 * e1 | (2 * e1 + 1) << 8)), 1);
}

// Q4_K / Q5_K, half a super-block (2 x 32 quant bytes = sub-blocks 4h..4h+3) per step. The low
// nibbles of the 64 bytes are sub-blocks 4h and 4h+2, the high nibbles 4h+1 and 4h+3; activations
// are loaded in that order. Sub-block scales multiply the 16-bit pair sums (vpmaddwd).
LLM__AVX512 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx512(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const __m512i m4 = _mm512_set1_epi8(15), b16 = _mm512_set1_epi8(16);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *qs = five ? w5[i].qs : w4[i].qs;
        const __m128i sm = llm__k4_scales_sse(five ? w5[i].scales : w4[i].scales);
        const float dd = _cvtsh_ss(d) * a[i].d, dm = _cvtsh_ss(dmin) * a[i].d;
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(llm__k4_mins_dot(sm, a[i].bsums)), _mm256_set1_ps(-dm), accm);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
        const __m512i hb = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w5[i].qh)) : _mm512_setzero_si512();
        __m512i sumi = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (five) {   // bit s of qh[l] is bit 4 of quant l of sub-block s
                const __m512i bl = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))), _mm256_set1_epi8((char)(1 << (4 * h + 2))), 1);
                const __m512i bh = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 1))), _mm256_set1_epi8((char)(1 << (4 * h + 3))), 1);
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hb, bl), lo, b16);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hb, bh), hi, b16);
            }
            const int8_t *q8 = a[i].qs + 128 * h;
            const __m512i plo = _mm512_maddubs_epi16(lo, llm__load_2x256(q8, q8 + 64));
            const __m512i phi = _mm512_maddubs_epi16(hi, llm__load_2x256(q8 + 32, q8 + 96));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sc, llm__spread2(4 * h, 4 * h + 2))));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sc, llm__spread2(4 * h + 1, 4 * h + 3))));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(dd), acc);
    }
    return _mm512_reduce_add_ps(acc) + llm__hsum_avx2(accm);
}

LLM__AVX512 static void llm__vec_dot_q4_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, false);
}

LLM__AVX512 static void llm__vec_dot_q5_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, true);
}

// Q6_K, a half super-block (128 quants) per step in two registers: elements 0-63 (low nibbles of
// ql[0..64) with qh bits 0-1 / 2-3) and 64-127 (high nibbles, qh bits 4-5 / 6-7). Each 128-bit
// lane is one sub-block of 16; the -32 offset comes from bsums as in the AVX2 kernel.
LLM__AVX512 static void llm__vec_dot_q6_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    // per-16-bit-lane shift counts: first 256 bits, second 256 bits
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    // lane L takes 16-bit element L (first register) or 4 + L (second) of the half's 8 scales
    const __m512i spread_lo = _mm512_set_epi32(0x07060706, 0x07060706, 0x07060706, 0x07060706, 0x05040504, 0x05040504,
                                               0x05040504, 0x05040504, 0x03020302, 0x03020302, 0x03020302, 0x03020302,
                                               0x01000100, 0x01000100, 0x01000100, 0x01000100);
    const __m512i spread_hi = _mm512_add_epi8(spread_lo, _mm512_set1_epi8(8));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m512i sumi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5)), 0);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m512i ql = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h)));
            const __m512i qlo = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
            const __m512i qhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
            const __m512i plo = _mm512_maddubs_epi16(qlo, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h)));
            const __m512i phi = _mm512_maddubs_epi16(qhi, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sch, spread_lo)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sch, spread_hi)));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(_cvtsh_ss(w[i].d) * a[i].d), acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}
#endif   // LLM__X86_SIMD

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

// Q4_K / Q5_K: per sub-block an int32 dot, times its scale; mins from bsums as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_k45_neon(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
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
                const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k), hb = vld1q_u8(qh + 16 * k);
                const uint8x16_t u[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[j]), off);
                    sumi += sc[k + 2 * j] * vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * j + 16 * k)));
                }
            }
        }
        sum += llm__fp16_to_fp32_neon(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}
#endif   // LLM__NEON && __aarch64__

// --- dispatch ---

// The kernel of exactly `level` for weight type `type`, or NULL if that level has none in this
// build (the caller then tries a lower level). LLM__SIMD_SCALAR has one for every supported type.
static llm__vec_dot_fn llm__vec_dot_kernel(int type, enum llm__simd level) {
    switch (level) {
    case LLM__SIMD_SCALAR:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_scalar;
        case LLM__TYPE_F16: return llm__vec_dot_f16_scalar;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_scalar;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_scalar;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_scalar;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_scalar;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_scalar;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_scalar;
        default: return NULL;
        }
#if defined(LLM__X86_SIMD)
    case LLM__SIMD_AVX2:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_avx2;
        case LLM__TYPE_F16: return llm__vec_dot_f16_avx2;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx2;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx2;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx2;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx2;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx2;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx2;
        default: return NULL;
        }
    case LLM__SIMD_AVX512:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_avx512;
        case LLM__TYPE_F16: return llm__vec_dot_f16_avx512;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx512;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx512;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx512;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx512;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx512;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx512;
        default: return NULL;
        }
#endif
#if defined(LLM__NEON) && defined(__aarch64__)
    case LLM__SIMD_NEON:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_neon;
        case LLM__TYPE_F16: return llm__vec_dot_f16_neon;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_neon;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_neon;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_neon;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_neon;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_neon;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_neon;
        default: return NULL;
        }
#endif
    default:
        return NULL;
    }
}

// n elements of `type` (any supported type, or Q8_K) to floats; n a multiple of the block size.
static void llm__dequantize_row(int type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp16_to_fp32_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = llm__bf16_to_fp32(((const uint16_t *)src)[i]);
        return;
    case LLM__TYPE_Q8_0: llm__dequantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__dequantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__dequantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__dequantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__dequantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__dequantize_q8_K(src, dst, n / LLM__QK_K); return;
    default: assert(!"llm__dequantize_row: unsupported type"); memset(dst, 0, (size_t)n * sizeof(float)); return;
    }
}

// n floats to `type` (any supported type, or Q8_K); n a multiple of the block size. Q8_0 and Q8_K
// (the activation types) are bit-identical to ggml's reference quantizers, as is Q4_0.
static void llm__quantize_row(int type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp32_to_fp16_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = llm__fp32_to_bf16(src[i]);
        return;
    case LLM__TYPE_Q8_0: llm__quantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__quantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__quantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__quantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__quantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__quantize_q8_K(src, dst, n / LLM__QK_K); return;
    default: assert(!"llm__quantize_row: unsupported type"); return;
    }
}

// === model files: GGUF ===
// GGUF v2/v3 (little-endian), the file format of llama.cpp. Layout:
//
//   "GGUF"  u32 version  u64 n_tensors  u64 n_kv
//   n_kv x      { str key, u32 type, value }       value: scalar, str, or
//                                                  { u32 elem_type, u64 n, n elements }
//   n_tensors x { str name, u32 n_dims, i64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to general.alignment (u32, default 32)
//   data section: each tensor at data_offset + offset, offset a multiple of the alignment
//
// A string is { u64 len, len bytes } with no terminator. v1 (u32 counts and lengths) is gone
// from the wild and not read; v2 and v3 only differ in that v3 may be big-endian, which this
// reader refuses (its integers would all read byte-swapped).
//
// The reader maps the whole file and keeps pointers into the mapping (tensor data, string
// values, array elements): nothing is copied but the key and tensor names, which get a NUL.
// The file is treated as hostile: every count, length, offset and size is checked against the
// bytes that remain before it is used or anything proportional to it is allocated, so a
// corrupt or malicious file gets a message naming what is wrong and where, never a crash.
//
// Decisions where ggml is looser:
// - n_dims must be 1..4 and every dimension >= 1. ggml accepts n_dims 0 and empty (0-sized)
//   dimensions, but no model uses them, and refusing them here spares every consumer a
//   division by zero or a zero-row special case.
// - arrays of arrays are refused (ggml refuses them too; the spec allows them).
// - tensor names are at most 63 bytes (ggml's GGML_MAX_NAME 64 with its NUL); keys at most
//   65535 bytes (the spec's limit); neither may be empty or contain a NUL byte.
// - tensor offsets need not be in order or contiguous (ggml's reader wants them contiguous, the
//   spec does not); each must be aligned and lie with its data inside the file. Overlaps are
//   not checked: they cannot make a read leave the file.
// - a tensor type id that is no ggml type is an error; a ggml type this build cannot compute
//   with is not (the model loader decides, and can then name the tensor and the type).
//
// The writer streams: key/values and tensor declarations are collected in memory (small),
// then the header goes out and tensor bytes follow in declaration order, in chunks of any
// size, so multi-GB files never sit in memory. It writes v3 with general.alignment (32 unless
// set), padding after every tensor including the last as ggml does.
//
// Both assume a little-endian host (x86, ARM): GGUF integers are read with memcpy.

// The writer and several getters serve tools and tests rather than the engine: no warning
// when a program (llm.c alone, the CLI) leaves them unused. Popped at the end of the section.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

enum llm__gguf_type {
    LLM__GGUF_U8 = 0, LLM__GGUF_I8 = 1, LLM__GGUF_U16 = 2, LLM__GGUF_I16 = 3,
    LLM__GGUF_U32 = 4, LLM__GGUF_I32 = 5, LLM__GGUF_F32 = 6, LLM__GGUF_BOOL = 7,
    LLM__GGUF_STR = 8, LLM__GGUF_ARR = 9, LLM__GGUF_U64 = 10, LLM__GGUF_I64 = 11,
    LLM__GGUF_F64 = 12, LLM__GGUF_TYPE_COUNT
};

#define LLM__GGUF_DEFAULT_ALIGNMENT 32
#define LLM__GGUF_MAX_KEY 65535   // bytes, the spec's limit
#define LLM__GGUF_MAX_NAME 63     // bytes, ggml's GGML_MAX_NAME (64) less the NUL
#define LLM__GGUF_MAX_DIMS 4

// A string inside the mapping: not NUL-terminated.
struct llm__gguf_str { const char *ptr; uint64_t len; };

struct llm__gguf_kv {
    char *key;                 // NUL-terminated copy (first member: see llm__gguf_index_find)
    uint32_t type;             // enum llm__gguf_type
    union {                    // scalars: unsigned in u64, signed in i64, f32/f64 in f64,
        uint64_t u64;          // bool in u64 (0 or 1), string in str
        int64_t i64;
        double f64;
        struct llm__gguf_str str;
    } v;
    uint32_t arr_type;         // arrays: element type (never LLM__GGUF_ARR)
    uint64_t arr_n;            //         element count
    const uint8_t *arr_data;   //         elements, packed, in the mapping (strings: serialized)
    struct llm__gguf_str *arr_str; //     string arrays: arr_n strings (allocated)
    const uint8_t *raw;        // the type id and value as serialized (for the writer's copy)
    size_t raw_len;
};

struct llm__gguf_tensor {
    char *name;                // NUL-terminated copy (first member: see llm__gguf_index_find)
    uint32_t type;             // ggml type id (llm__type_info(type) != NULL)
    int n_dims;                // 1..4
    int64_t ne[4];             // elements per dimension, ne[0] the row length; unused ones 1
    uint64_t offset;           // from the start of the data section
    size_t size;               // bytes
    const void *data;          // in the mapping
};

// Open-addressing hash from names to item indices (-1: empty slot), for duplicate checks
// and O(1) lookups.
struct llm__gguf_index { int64_t *slots; uint64_t mask; };

struct llm__gguf {
    void *map;                 // the whole file
    size_t size;
    bool owns_map;             // munmap on close (false for llm__gguf_open_memory)
    uint32_t version;
    size_t alignment, data_offset;
    int64_t n_kv, n_tensors;
    struct llm__gguf_kv *kv;           // (n_kv)
    struct llm__gguf_tensor *tensors;  // (n_tensors), in file order
    struct llm__gguf_index kv_index, tensor_index;
};

static const char *llm__gguf_type_name(uint32_t type) {
    static const char *const names[LLM__GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return type < LLM__GGUF_TYPE_COUNT ? names[type] : "unknown";
}

// Bytes of one scalar value; 0 for strings, arrays and unknown ids.
static size_t llm__gguf_type_size(uint32_t type) {
    static const uint8_t sizes[LLM__GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < LLM__GGUF_TYPE_COUNT ? sizes[type] : 0;
}

static bool llm__gguf_str_eq(struct llm__gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

// A name from the file, made safe to print in a message: at most 80 bytes, non-printable
// bytes as '?', "..." when cut.
static const char *llm__gguf_printable(char out[88], const char *p, uint64_t len) {
    size_t n = len > 80 ? 80 : (size_t)len, i;
    for (i = 0; i < n; i++) out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    if (len > 80) out[n++] = '.', out[n++] = '.', out[n++] = '.';
    out[n] = 0;
    return out;
}

static bool llm__gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Checked a * b for non-negative operands; false on overflow of INT64_MAX.
static bool llm__gguf_mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

// === GGUF: name index ===

static uint64_t llm__gguf_hash(const char *s, size_t n) {   // FNV-1a
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static bool llm__gguf_index_init(struct llm__gguf_index *ix, int64_t n) {
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap *= 2;     // load factor <= 1/2
    ix->slots = malloc(cap * sizeof(int64_t));
    if (!ix->slots) return false;
    for (uint64_t i = 0; i < cap; i++) ix->slots[i] = -1;
    ix->mask = cap - 1;
    return true;
}

// Finds name in items (an array of structs of `stride` bytes whose first member is the
// char * name). Returns the item index, or -1 with *slot set to the empty slot where the
// name would go.
static int64_t llm__gguf_index_find(const struct llm__gguf_index *ix, const void *items,
                                    size_t stride, const char *name, uint64_t *slot) {
    if (!ix->slots) return -1;
    size_t n = strlen(name);
    uint64_t i = llm__gguf_hash(name, n) & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        int64_t at = ix->slots[i];
        if (at < 0) break;
        const char *other = *(char *const *)(const void *)((const char *)items + (size_t)at * stride);
        if (strcmp(other, name) == 0) return at;
    }
    if (slot) *slot = i;
    return -1;
}

// === GGUF: reader ===

// A read position in the mapping. The read functions check the bytes left, and on failure
// leave the message in e and the status in st and return false.
struct llm__gguf_cur {
    const uint8_t *base;
    size_t size, pos;
    enum llm_status st;
    struct llm__err *e;
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool llm__gguf_bad(struct llm__gguf_cur *c, enum llm_status st, const char *fmt, ...) {
    if (c->e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->e->msg, sizeof(c->e->msg), fmt, ap);
        va_end(ap);
    }
    c->st = st;
    return false;
}

static bool llm__gguf_need(struct llm__gguf_cur *c, uint64_t n, const char *what) {
    if (n <= c->size - c->pos) return true;
    return llm__gguf_bad(c, LLM_ERR_FORMAT,
                         "gguf: truncated file: %s at byte offset %zu needs %llu bytes, %zu left "
                         "(file is %zu bytes)", what, c->pos, (unsigned long long)n,
                         c->size - c->pos, c->size);
}

static bool llm__gguf_rd(struct llm__gguf_cur *c, void *out, size_t n, const char *what) {
    if (!llm__gguf_need(c, n, what)) return false;
    memcpy(out, c->base + c->pos, n);
    c->pos += n;
    return true;
}

// A string of at most max_len bytes. The length is checked against the bytes left, so a
// huge length is refused before anything is done with it.
static bool llm__gguf_rd_str(struct llm__gguf_cur *c, struct llm__gguf_str *s, uint64_t max_len,
                             const char *what) {
    size_t at = c->pos;
    uint64_t len;
    if (!llm__gguf_rd(c, &len, 8, what)) return false;
    if (len > max_len)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is %llu bytes long, "
                             "more than the limit of %llu", what, at, (unsigned long long)len,
                             (unsigned long long)max_len);
    if (len > c->size - c->pos)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: %s at byte offset %zu is "
                             "%llu bytes long, only %zu bytes left (file is %zu bytes)", what, at,
                             (unsigned long long)len, c->size - c->pos, c->size);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

// A key or tensor name: 1..max_len bytes, no NUL, copied with a terminator.
static bool llm__gguf_rd_name(struct llm__gguf_cur *c, char **out, uint64_t max_len,
                              const char *what, int64_t i) {
    size_t at = c->pos;
    struct llm__gguf_str s;
    char desc[64];
    snprintf(desc, sizeof(desc), "%s %lld", what, (long long)i);
    if (!llm__gguf_rd_str(c, &s, max_len, desc)) return false;
    if (s.len == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is empty", desc, at);
    if (memchr(s.ptr, 0, (size_t)s.len)) {
        char pr[88];
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s '%s' at byte offset %zu contains a NUL "
                             "byte", desc, llm__gguf_printable(pr, s.ptr, s.len), at);
    }
    *out = malloc((size_t)s.len + 1);
    if (!*out) return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory reading %s", desc);
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = 0;
    return true;
}

// One key/value pair, from its key to the end of its value.
static bool llm__gguf_rd_kv(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_kv *kv = &g->kv[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &kv->key, LLM__GGUF_MAX_KEY, "key", i)) return false;
    char pr[88], what[128];
    const char *key = llm__gguf_printable(pr, kv->key, strlen(kv->key));
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), kv->key, &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate key '%s' (key/value %lld at byte "
                             "offset %zu repeats key/value %lld)", key, (long long)i, at,
                             (long long)dup);
    g->kv_index.slots[slot] = i;

    kv->raw = c->base + c->pos;
    size_t type_at = c->pos;
    snprintf(what, sizeof(what), "the type of key '%s'", key);
    if (!llm__gguf_rd(c, &kv->type, 4, what)) return false;
    if (kv->type >= LLM__GGUF_TYPE_COUNT)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown value type id %u at "
                             "byte offset %zu", key, kv->type, type_at);

    snprintf(what, sizeof(what), "the value of key '%s'", key);
    if (kv->type == LLM__GGUF_ARR) {
        size_t elem_at = c->pos;
        if (!llm__gguf_rd(c, &kv->arr_type, 4, what) || !llm__gguf_rd(c, &kv->arr_n, 8, what))
            return false;
        if (kv->arr_type == LLM__GGUF_ARR)
            return llm__gguf_bad(c, LLM_ERR_UNSUPPORTED, "gguf: key '%s' is an array of arrays "
                                 "(byte offset %zu); nested arrays are not supported", key, elem_at);
        if (kv->arr_type >= LLM__GGUF_TYPE_COUNT)
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown array element "
                                 "type id %u at byte offset %zu", key, kv->arr_type, elem_at);
        // Each element takes at least 1 byte (8 for a string's length), so this bounds the
        // count, and the allocation below, by the file size.
        size_t esize = kv->arr_type == LLM__GGUF_STR ? 8 : llm__gguf_type_size(kv->arr_type);
        if (kv->arr_n > (c->size - c->pos) / esize)
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: key '%s' is an array of "
                                 "%llu %s at byte offset %zu, more than the %zu bytes left can "
                                 "hold", key, (unsigned long long)kv->arr_n,
                                 llm__gguf_type_name(kv->arr_type), elem_at, c->size - c->pos);
        kv->arr_data = c->base + c->pos;
        if (kv->arr_type == LLM__GGUF_STR) {
            kv->arr_str = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof(*kv->arr_str));
            if (!kv->arr_str)
                return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory for the %llu strings "
                                     "of key '%s'", (unsigned long long)kv->arr_n, key);
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                snprintf(what, sizeof(what), "string %llu of key '%s'", (unsigned long long)j, key);
                if (!llm__gguf_rd_str(c, &kv->arr_str[j], UINT64_MAX, what)) return false;
            }
        } else {
            c->pos += (size_t)kv->arr_n * esize;
        }
    } else if (kv->type == LLM__GGUF_STR) {
        if (!llm__gguf_rd_str(c, &kv->v.str, UINT64_MAX, what)) return false;
    } else {
        uint8_t b[8] = {0};
        if (!llm__gguf_rd(c, b, llm__gguf_type_size(kv->type), what)) return false;
        switch (kv->type) {
        case LLM__GGUF_U8: kv->v.u64 = b[0]; break;
        case LLM__GGUF_BOOL: kv->v.u64 = b[0] != 0; break;
        case LLM__GGUF_I8: { int8_t x; memcpy(&x, b, 1); kv->v.i64 = x; } break;
        case LLM__GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.u64 = x; } break;
        case LLM__GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i64 = x; } break;
        case LLM__GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.u64 = x; } break;
        case LLM__GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i64 = x; } break;
        case LLM__GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f64 = x; } break;
        case LLM__GGUF_U64: memcpy(&kv->v.u64, b, 8); break;
        case LLM__GGUF_I64: memcpy(&kv->v.i64, b, 8); break;
        case LLM__GGUF_F64: memcpy(&kv->v.f64, b, 8); break;
        default: break;
        }
    }
    kv->raw_len = (size_t)(c->base + c->pos - kv->raw);
    return true;
}

// One tensor info: name, shape, type, offset. Sizes are computed with overflow checks.
static bool llm__gguf_rd_tensor(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_tensor *t = &g->tensors[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &t->name, UINT64_MAX, "tensor name", i)) return false;
    char pr[88];
    const char *name = llm__gguf_printable(pr, t->name, strlen(t->name));
    if (strlen(t->name) > LLM__GGUF_MAX_NAME)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor %lld name '%s' at byte offset %zu is "
                             "%zu bytes long, more than the limit of %d", (long long)i, name, at,
                             strlen(t->name), LLM__GGUF_MAX_NAME);
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), t->name,
                                       &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate tensor name '%s' (tensors %lld "
                             "and %lld, byte offset %zu)", name, (long long)dup, (long long)i, at);
    g->tensor_index.slots[slot] = i;

    char what[128];
    snprintf(what, sizeof(what), "the shape, type and offset of tensor '%s'", name);
    uint32_t n_dims;
    if (!llm__gguf_rd(c, &n_dims, 4, what)) return false;
    if (n_dims < 1 || n_dims > LLM__GGUF_MAX_DIMS)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has %u dimensions, must be 1..%d "
                             "(byte offset %zu)", name, n_dims, LLM__GGUF_MAX_DIMS, c->pos - 4);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if (!llm__gguf_rd(c, &t->ne[d], 8, what)) return false;
        if (t->ne[d] < 1)
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' dimension %d is %lld, must be "
                                 ">= 1 (byte offset %zu)", name, d, (long long)t->ne[d], c->pos - 8);
        if (!llm__gguf_mul_i64(nel, t->ne[d], &nel))
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' element count overflows "
                                 "(dimension %d is %lld)", name, d, (long long)t->ne[d]);
    }

    size_t type_at = c->pos;
    if (!llm__gguf_rd(c, &t->type, 4, what)) return false;
    const struct llm__type_info *ti = llm__type_info(t->type);
    int64_t blck = ti ? (int64_t)ti->blck : 0, bytes;
    if (!ti || blck <= 0 || ti->block_bytes == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has unknown tensor type id %u "
                             "(byte offset %zu)", name, t->type, type_at);
    if (t->ne[0] % blck != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' of type %s has rows of %lld "
                             "elements, not a multiple of the type's block size %lld", name,
                             ti->name, (long long)t->ne[0], (long long)blck);
    if (!llm__gguf_mul_i64(nel / blck, (int64_t)ti->block_bytes, &bytes) ||
        (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' byte size overflows "
                             "(%lld elements of type %s)", name, (long long)nel, ti->name);
    t->size = (size_t)bytes;

    if (!llm__gguf_rd(c, &t->offset, 8, what)) return false;
    if (t->offset % g->alignment != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' data offset %llu is not a "
                             "multiple of the alignment %zu (byte offset %zu)", name,
                             (unsigned long long)t->offset, g->alignment, c->pos - 8);
    return true;
}

// Parses g->map[0 .. g->size). On failure the caller closes g (which frees what was built).
static enum llm_status llm__gguf_parse(struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_cur c = {g->map, g->size, 0, LLM_OK, e};
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian hosts are not supported");

    char magic[4];
    if (!llm__gguf_rd(&c, magic, 4, "magic")) return c.st;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char pr[88];
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad magic '%s' (bytes %02x %02x %02x %02x), "
                         "expected 'GGUF': not a GGUF file", llm__gguf_printable(pr, magic, 4),
                         (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    }
    if (!llm__gguf_rd(&c, &g->version, 4, "version")) return c.st;
    // A big-endian file's small version number reads as n << 24 here.
    if (g->version != 0 && (g->version & 0xffffu) == 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian GGUF is not supported (version "
                         "field 0x%08x)", g->version);
    if (g->version == 0)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad GGUF version 0");
    if (g->version == 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: GGUF v1 is not supported (convert the model "
                         "again with a current llama.cpp)");
    if (g->version > 3)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: unsupported GGUF version %u (this reader "
                         "knows v2 and v3)", g->version);

    uint64_t n_tensors, n_kv;
    if (!llm__gguf_rd(&c, &n_tensors, 8, "tensor count")) return c.st;
    if (!llm__gguf_rd(&c, &n_kv, 8, "key/value count")) return c.st;
    // Smallest serialized key/value: key length 8 + 1 byte of key + type 4 + a u8 value.
    // Smallest tensor info: name length 8 + 1 + n_dims 4 + one dimension 8 + type 4 + offset 8.
    // Counts that cannot fit are refused before the arrays below are allocated.
    size_t left = c.size - c.pos;
    if (n_kv > left / 14)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key/value count %llu cannot fit in the %zu "
                         "bytes after the header", (unsigned long long)n_kv, left);
    if (n_tensors > left / 33 || n_kv * 14 + n_tensors * 33 > left)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: tensor count %llu cannot fit in the %zu bytes "
                         "after the header (with %llu key/values)", (unsigned long long)n_tensors,
                         left, (unsigned long long)n_kv);

    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*g->kv));
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors || !llm__gguf_index_init(&g->kv_index, (int64_t)n_kv) ||
        !llm__gguf_index_init(&g->tensor_index, (int64_t)n_tensors))
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: out of memory for %llu key/values and %llu "
                         "tensors", (unsigned long long)n_kv, (unsigned long long)n_tensors);

    for (int64_t i = 0; i < (int64_t)n_kv; i++) {
        g->n_kv = i + 1;   // so that close frees what this entry allocated, even on failure
        if (!llm__gguf_rd_kv(&c, g, i)) return c.st;
    }

    g->alignment = LLM__GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), "general.alignment", NULL);
    if (ai >= 0) {
        const struct llm__gguf_kv *kv = &g->kv[ai];
        if (kv->type != LLM__GGUF_U32)
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' has type %s, must be "
                             "u32", llm__gguf_type_name(kv->type));
        if (!llm__gguf_is_pow2(kv->v.u64))
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' is %llu, must be a "
                             "power of two", (unsigned long long)kv->v.u64);
        g->alignment = (size_t)kv->v.u64;
    }

    for (int64_t i = 0; i < (int64_t)n_tensors; i++) {
        g->n_tensors = i + 1;
        if (!llm__gguf_rd_tensor(&c, g, i)) return c.st;
    }

    // The data section starts at the next multiple of the alignment. A vocabulary-only file
    // may end before it; then there is no data section.
    uint64_t data_offset = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (data_offset > g->size) {
        if (n_tensors > 0)
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: truncated file: the data section would start "
                             "at byte offset %llu, past the end of the file (%zu bytes)",
                             (unsigned long long)data_offset, g->size);
        data_offset = g->size;
    }
    g->data_offset = (size_t)data_offset;
    size_t data_size = g->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct llm__gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->size > data_size - t->offset) {
            char pr[88];
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: tensor '%s' data [offset %llu, size %zu] "
                             "extends past the end of the file (%zu bytes, data section from "
                             "byte offset %zu)", llm__gguf_printable(pr, t->name, strlen(t->name)),
                             (unsigned long long)t->offset, t->size, g->size, g->data_offset);
        }
        t->data = (const uint8_t *)g->map + g->data_offset + t->offset;
    }
    return LLM_OK;
}

static void llm__gguf_close(struct llm__gguf *g) {
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].arr_str);
        }
    if (g->tensors)
        for (int64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->owns_map && g->map) munmap(g->map, g->size);
    memset(g, 0, sizeof(*g));
}

// Parses a GGUF file held in memory (not copied: it must outlive g).
static enum llm_status llm__gguf_open_memory(struct llm__gguf *g, const void *data, size_t size,
                                             struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    g->map = (void *)(uintptr_t)data;
    g->size = size;
    enum llm_status st = llm__gguf_parse(g, e);
    if (st != LLM_OK) llm__gguf_close(g);
    return st;
}

// Maps a GGUF file read-only and parses it. Error messages end with the path.
static enum llm_status llm__gguf_open(struct llm__gguf *g, const char *path, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is a directory, not a GGUF file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: '%s' is empty (0 bytes)", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: '%s' (%lld bytes) is too large to map", path,
                         (long long)st.st_size);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);   // the mapping stays valid
    if (map == MAP_FAILED)
        return llm__fail(e, LLM_ERR_IO, "gguf: cannot map '%s': %s", path, strerror(err));
    g->map = map;
    g->size = (size_t)st.st_size;
    g->owns_map = true;
    enum llm_status s = llm__gguf_parse(g, e);
    if (s != LLM_OK) {
        llm__gguf_close(g);
        if (e) {
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof(e->msg) - n, " (in '%s')", path);
        }
    }
    return s;
}

static int64_t llm__gguf_find_key(const struct llm__gguf *g, const char *key) {
    return llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), key, NULL);
}

static const struct llm__gguf_tensor *llm__gguf_find_tensor(const struct llm__gguf *g,
                                                            const char *name) {
    int64_t i = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), name, NULL);
    return i < 0 ? NULL : &g->tensors[i];
}

// === GGUF: typed getters ===
// Each returns false with a message naming the key when the key is absent, has an
// incompatible type, or a value out of range. For an optional key, test llm__gguf_find_key first.

static const struct llm__gguf_kv *llm__gguf_get_kv(const struct llm__gguf *g, const char *key,
                                                   struct llm__err *e) {
    int64_t i = llm__gguf_find_key(g, key);
    if (i < 0) llm__fail(e, LLM_ERR_FORMAT, "gguf: missing key '%s'", key);
    return i < 0 ? NULL : &g->kv[i];
}

static bool llm__gguf_kv_is_int(const struct llm__gguf_kv *kv) {
    switch (kv->type) {
    case LLM__GGUF_U8: case LLM__GGUF_U16: case LLM__GGUF_U32: case LLM__GGUF_U64:
    case LLM__GGUF_I8: case LLM__GGUF_I16: case LLM__GGUF_I32: case LLM__GGUF_I64: return true;
    default: return false;
    }
}
static bool llm__gguf_kv_is_signed(const struct llm__gguf_kv *kv) {
    return kv->type == LLM__GGUF_I8 || kv->type == LLM__GGUF_I16 || kv->type == LLM__GGUF_I32 ||
           kv->type == LLM__GGUF_I64;
}

// A key of any integer type whose value lies in [lo, hi] (lo <= 0 compared as signed, hi as
// unsigned, so the range can reach from INT64_MIN to UINT64_MAX). The value goes to *out_i or
// *out_u, whichever is not NULL.
static bool llm__gguf_get_int(const struct llm__gguf *g, const char *key, int64_t lo, uint64_t hi,
                              const char *want, int64_t *out_i, uint64_t *out_u, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (!llm__gguf_kv_is_int(kv)) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                  llm__gguf_type_name(kv->type), want);
        return false;
    }
    bool neg = llm__gguf_kv_is_signed(kv) && kv->v.i64 < 0;
    if ((neg && kv->v.i64 < lo) || (!neg && kv->v.u64 > hi)) {
        if (neg)
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %lld, out of range for %s", key,
                      (long long)kv->v.i64, want);
        else
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %llu, out of range for %s", key,
                      (unsigned long long)kv->v.u64, want);
        return false;
    }
    if (out_i) *out_i = kv->v.i64;
    if (out_u) *out_u = kv->v.u64;
    return true;
}

static bool llm__gguf_get_u32(const struct llm__gguf *g, const char *key, uint32_t *out,
                              struct llm__err *e) {
    uint64_t v;
    if (!llm__gguf_get_int(g, key, 0, UINT32_MAX, "an unsigned 32-bit integer", NULL, &v, e))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool llm__gguf_get_i32(const struct llm__gguf *g, const char *key, int32_t *out,
                              struct llm__err *e) {
    int64_t v;
    if (!llm__gguf_get_int(g, key, INT32_MIN, INT32_MAX, "a signed 32-bit integer", &v, NULL, e))
        return false;
    *out = (int32_t)v;
    return true;
}

static bool llm__gguf_get_u64(const struct llm__gguf *g, const char *key, uint64_t *out,
                              struct llm__err *e) {
    return llm__gguf_get_int(g, key, 0, UINT64_MAX, "an unsigned integer", NULL, out, e);
}

static bool llm__gguf_get_f32(const struct llm__gguf *g, const char *key, float *out,
                              struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type == LLM__GGUF_F32 || kv->type == LLM__GGUF_F64) {
        if (isfinite(kv->v.f64) && fabs(kv->v.f64) > FLT_MAX) {
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %g, out of range for f32", key, kv->v.f64);
            return false;
        }
        *out = (float)kv->v.f64;
    } else if (llm__gguf_kv_is_int(kv)) {
        *out = llm__gguf_kv_is_signed(kv) ? (float)kv->v.i64 : (float)kv->v.u64;
    } else {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected a number", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    return true;
}

static bool llm__gguf_get_bool(const struct llm__gguf *g, const char *key, bool *out,
                               struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_BOOL) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected bool", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.u64 != 0;
    return true;
}

static bool llm__gguf_get_str(const struct llm__gguf *g, const char *key, struct llm__gguf_str *out,
                              struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_STR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected string", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.str;
    return true;
}

// An array of any element type: *data points at n packed elements in the mapping (read them
// with memcpy: they need not be aligned), or for string arrays at n struct llm__gguf_str.
static bool llm__gguf_get_arr(const struct llm__gguf *g, const char *key, uint32_t *elem_type,
                              uint64_t *n, const void **data, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_ARR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected an array", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->arr_type == LLM__GGUF_STR ? (const void *)kv->arr_str : (const void *)kv->arr_data;
    return true;
}

// === GGUF: writer ===

struct llm__gguf_writer_tensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset, size;     // in the data section
};

struct llm__gguf_writer {
    uint8_t *kv;               // the serialized key/value pairs (kv_len bytes)
    size_t kv_len, kv_cap;
    char **keys;               // (n_kv) for duplicate checks
    int64_t n_kv, keys_cap;
    uint32_t alignment;        // general.alignment (32 unless set)
    struct llm__gguf_writer_tensor *tensors;   // (n_tensors), in declaration = file order
    int64_t n_tensors, tensors_cap;
    FILE *f;                   // set by begin
    int64_t cur;               // the tensor whose bytes come next
    uint64_t cur_done;         // bytes of it written so far
};

static void llm__gguf_writer_init(struct llm__gguf_writer *w) {
    memset(w, 0, sizeof(*w));
    w->alignment = LLM__GGUF_DEFAULT_ALIGNMENT;
}

static void llm__gguf_writer_free(struct llm__gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    memset(w, 0, sizeof(*w));
}

static bool llm__gguf_writer_put(struct llm__gguf_writer *w, const void *p, size_t n) {
    if (n > w->kv_cap - w->kv_len) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap - w->kv_len < n) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        uint8_t *kv = realloc(w->kv, cap);
        if (!kv) return false;
        w->kv = kv;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return true;
}

static bool llm__gguf_writer_put_str(struct llm__gguf_writer *w, const char *s, uint64_t len) {
    return llm__gguf_writer_put(w, &len, 8) && llm__gguf_writer_put(w, s, (size_t)len);
}

// Starts a key/value: checks the key, appends it and the value type. The caller appends
// the value; on failure it truncates back to *mark (llm__gguf_writer_kv_end).
static enum llm_status llm__gguf_writer_kv_begin(struct llm__gguf_writer *w, const char *key,
                                                 uint32_t type, size_t *mark, struct llm__err *e) {
    size_t len = strlen(key);
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s' set after begin", key);
    if (len == 0 || len > LLM__GGUF_MAX_KEY)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key length %zu is not in 1..%d", len,
                         LLM__GGUF_MAX_KEY);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: duplicate key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        int64_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **keys = realloc(w->keys, (size_t)cap * sizeof(*keys));
        if (!keys) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
        w->keys = keys;
        w->keys_cap = cap;
    }
    *mark = w->kv_len;
    if (!llm__gguf_writer_put_str(w, key, len) || !llm__gguf_writer_put(w, &type, 4))
        return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_kv_end(struct llm__gguf_writer *w, const char *key,
                                               bool ok, size_t mark, struct llm__err *e) {
    char *copy = ok ? malloc(strlen(key) + 1) : NULL;
    if (!copy) {
        w->kv_len = mark;
        return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
    }
    strcpy(copy, key);
    w->keys[w->n_kv++] = copy;
    return LLM_OK;
}

// A scalar of any type but string and array; value points at the C type of that GGUF type
// (uint8_t 0/1 for bool). general.alignment (u32, a power of two) sets the alignment.
static enum llm_status llm__gguf_writer_set(struct llm__gguf_writer *w, const char *key,
                                            uint32_t type, const void *value, struct llm__err *e) {
    size_t n = llm__gguf_type_size(type), mark;
    if (n == 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': type %s is no scalar",
                         key, llm__gguf_type_name(type));
    bool is_alignment = strcmp(key, "general.alignment") == 0;
    uint32_t alignment = 0;
    if (is_alignment && type == LLM__GGUF_U32) memcpy(&alignment, value, 4);
    if (is_alignment && !llm__gguf_is_pow2(alignment))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32 "
                         "power of two");
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, type, &mark, e);
    if (st != LLM_OK) return st;
    st = llm__gguf_writer_kv_end(w, key, llm__gguf_writer_put(w, value, n), mark, e);
    if (st == LLM_OK && is_alignment) w->alignment = alignment;   // tensor offsets use it at begin
    return st;
}

static enum llm_status llm__gguf_writer_set_u8(struct llm__gguf_writer *w, const char *k,
                                               uint8_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U8, &v, e);
}
static enum llm_status llm__gguf_writer_set_i8(struct llm__gguf_writer *w, const char *k,
                                               int8_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I8, &v, e);
}
static enum llm_status llm__gguf_writer_set_u16(struct llm__gguf_writer *w, const char *k,
                                                uint16_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U16, &v, e);
}
static enum llm_status llm__gguf_writer_set_i16(struct llm__gguf_writer *w, const char *k,
                                                int16_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I16, &v, e);
}
static enum llm_status llm__gguf_writer_set_u32(struct llm__gguf_writer *w, const char *k,
                                                uint32_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U32, &v, e);
}
static enum llm_status llm__gguf_writer_set_i32(struct llm__gguf_writer *w, const char *k,
                                                int32_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I32, &v, e);
}
static enum llm_status llm__gguf_writer_set_u64(struct llm__gguf_writer *w, const char *k,
                                                uint64_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_U64, &v, e);
}
static enum llm_status llm__gguf_writer_set_i64(struct llm__gguf_writer *w, const char *k,
                                                int64_t v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_I64, &v, e);
}
static enum llm_status llm__gguf_writer_set_f32(struct llm__gguf_writer *w, const char *k,
                                                float v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_F32, &v, e);
}
static enum llm_status llm__gguf_writer_set_f64(struct llm__gguf_writer *w, const char *k,
                                                double v, struct llm__err *e) {
    return llm__gguf_writer_set(w, k, LLM__GGUF_F64, &v, e);
}
static enum llm_status llm__gguf_writer_set_bool(struct llm__gguf_writer *w, const char *k,
                                                 bool v, struct llm__err *e) {
    uint8_t b = v;
    return llm__gguf_writer_set(w, k, LLM__GGUF_BOOL, &b, e);
}

static enum llm_status llm__gguf_writer_set_str(struct llm__gguf_writer *w, const char *key,
                                                const char *value, struct llm__err *e) {
    size_t mark;
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_STR, &mark, e);
    if (st != LLM_OK) return st;
    return llm__gguf_writer_kv_end(w, key, llm__gguf_writer_put_str(w, value, strlen(value)), mark, e);
}

// An array of n scalars of elem_type, packed in data (the C type of elem_type).
static enum llm_status llm__gguf_writer_set_arr(struct llm__gguf_writer *w, const char *key,
                                                uint32_t elem_type, uint64_t n, const void *data,
                                                struct llm__err *e) {
    size_t esize = llm__gguf_type_size(elem_type), mark;
    if (esize == 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': arrays of %s are not "
                         "supported here", key, llm__gguf_type_name(elem_type));
    if (n > SIZE_MAX / esize)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key '%s': array too large", key);
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_ARR, &mark, e);
    if (st != LLM_OK) return st;
    bool ok = llm__gguf_writer_put(w, &elem_type, 4) && llm__gguf_writer_put(w, &n, 8) &&
              llm__gguf_writer_put(w, data, (size_t)n * esize);
    return llm__gguf_writer_kv_end(w, key, ok, mark, e);
}

// An array of n NUL-terminated strings.
static enum llm_status llm__gguf_writer_set_arr_str(struct llm__gguf_writer *w, const char *key,
                                                    uint64_t n, const char *const *strs,
                                                    struct llm__err *e) {
    size_t mark;
    uint32_t elem_type = LLM__GGUF_STR;
    enum llm_status st = llm__gguf_writer_kv_begin(w, key, LLM__GGUF_ARR, &mark, e);
    if (st != LLM_OK) return st;
    bool ok = llm__gguf_writer_put(w, &elem_type, 4) && llm__gguf_writer_put(w, &n, 8);
    for (uint64_t i = 0; ok && i < n; i++) ok = llm__gguf_writer_put_str(w, strs[i], strlen(strs[i]));
    return llm__gguf_writer_kv_end(w, key, ok, mark, e);
}

// Copies key/value `index` of an open reader, value bytes as they are in its file.
static enum llm_status llm__gguf_writer_copy_kv(struct llm__gguf_writer *w, const struct llm__gguf *g,
                                                int64_t index, struct llm__err *e) {
    if (index < 0 || index >= g->n_kv)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: key/value index %lld out of range",
                         (long long)index);
    const struct llm__gguf_kv *kv = &g->kv[index];
    if (strcmp(kv->key, "general.alignment") == 0)   // goes through the checks of set()
        return llm__gguf_writer_set(w, kv->key, kv->type, kv->raw + 4, e);
    size_t mark;
    enum llm_status st = llm__gguf_writer_kv_begin(w, kv->key, kv->type, &mark, e);
    if (st != LLM_OK) return st;
    // raw starts with the 4-byte type id, already written by kv_begin
    return llm__gguf_writer_kv_end(w, kv->key, llm__gguf_writer_put(w, kv->raw + 4, kv->raw_len - 4),
            mark, e);
}

// Declares the next tensor (file order = declaration order). The same rules as the reader's.
static enum llm_status llm__gguf_writer_add_tensor(struct llm__gguf_writer *w, const char *name,
                                                   uint32_t type, int n_dims, const int64_t *ne,
                                                   struct llm__err *e) {
    size_t len = strlen(name);
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' added after begin", name);
    if (len == 0 || len > LLM__GGUF_MAX_NAME)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor name '%s' is not 1..%d bytes",
                         name, LLM__GGUF_MAX_NAME);
    if (n_dims < 1 || n_dims > LLM__GGUF_MAX_DIMS)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has %d dimensions", name,
                         n_dims);
    const struct llm__type_info *ti = llm__type_info(type);
    int64_t blck = ti ? (int64_t)ti->blck : 0;
    if (!ti || blck <= 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has unknown type id %u",
                         name, type);
    int64_t nel = 1, bytes;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1 || !llm__gguf_mul_i64(nel, ne[d], &nel))
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' has a bad dimension "
      "%d (%lld)", name, d, (long long)ne[d]);
    if (ne[0] % blck != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' of type %s has rows of "
                         "%lld elements, not a multiple of %lld", name, ti->name, (long long)ne[0],
                         (long long)blck);
    if (!llm__gguf_mul_i64(nel / blck, (int64_t)ti->block_bytes, &bytes))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' is too large", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
    if (w->n_tensors == w->tensors_cap) {
        int64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
        struct llm__gguf_writer_tensor *t = realloc(w->tensors, (size_t)cap * sizeof(*t));
        if (!t) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
        w->tensors = t;
        w->tensors_cap = cap;
    }
    struct llm__gguf_writer_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof(*t));
    t->name = malloc(len + 1);
    if (!t->name) return llm__fail(e, LLM_ERR_NOMEM, "gguf writer: out of memory");
    memcpy(t->name, name, len + 1);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->size = (uint64_t)bytes;
    w->n_tensors++;
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_out(struct llm__gguf_writer *w, const void *p, size_t n,
                                            struct llm__err *e) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return llm__fail(e, LLM_ERR_IO, "gguf writer: write failed: %s", strerror(errno));
    return LLM_OK;
}

static enum llm_status llm__gguf_writer_pad(struct llm__gguf_writer *w, uint64_t pos,
                                            struct llm__err *e) {
    static const uint8_t zeros[256];
    uint64_t pad = (w->alignment - pos % w->alignment) % w->alignment;
    while (pad > 0) {
        size_t n = pad < sizeof(zeros) ? (size_t)pad : sizeof(zeros);
        enum llm_status st = llm__gguf_writer_out(w, zeros, n, e);
        if (st != LLM_OK) return st;
        pad -= n;
    }
    return LLM_OK;
}

// Writes the header, the key/values and the tensor infos to f (positioned at its start),
// padded to the alignment. Tensor bytes follow with llm__gguf_writer_write.
static enum llm_status llm__gguf_writer_begin(struct llm__gguf_writer *w, FILE *f,
                                              struct llm__err *e) {
    if (w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: begin called twice");
    w->f = f;
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        off += (w->tensors[i].size + w->alignment - 1) / w->alignment * w->alignment;
    }
    uint32_t version = 3;
    uint64_t n_tensors = (uint64_t)w->n_tensors, n_kv = (uint64_t)w->n_kv, pos = 24 + w->kv_len;
    enum llm_status st = llm__gguf_writer_out(w, "GGUF", 4, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &version, 4, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_tensors, 8, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_kv, 8, e);
    if (st == LLM_OK) st = llm__gguf_writer_out(w, w->kv, w->kv_len, e);
    for (int64_t i = 0; st == LLM_OK && i < w->n_tensors; i++) {
        const struct llm__gguf_writer_tensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t n_dims = (uint32_t)t->n_dims;
        st = llm__gguf_writer_out(w, &len, 8, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, t->name, (size_t)len, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &n_dims, 4, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, t->ne, 8 * (size_t)t->n_dims, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &t->type, 4, e);
        if (st == LLM_OK) st = llm__gguf_writer_out(w, &t->offset, 8, e);
        pos += 8 + len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    // ggml's reader pads to the data section only when there are tensors
    if (st == LLM_OK && w->n_tensors > 0) st = llm__gguf_writer_pad(w, pos, e);
    return st;
}

// Appends n bytes of tensor data: the tensors' bytes in declaration order, in chunks of any
// size; padding between tensors is inserted here.
static enum llm_status llm__gguf_writer_write(struct llm__gguf_writer *w, const void *data,
                                              size_t n, struct llm__err *e) {
    const uint8_t *p = data;
    if (!w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor data before begin");
    while (n > 0) {
        if (w->cur >= w->n_tensors)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: %zu bytes of tensor data past "
      "the last tensor", n);
        const struct llm__gguf_writer_tensor *t = &w->tensors[w->cur];
        uint64_t left = t->size - w->cur_done;
        size_t k = left < n ? (size_t)left : n;
        enum llm_status st = llm__gguf_writer_out(w, p, k, e);
        if (st != LLM_OK) return st;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->size) {
            st = llm__gguf_writer_pad(w, t->size, e);
            if (st != LLM_OK) return st;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return LLM_OK;
}

// All bytes of tensor idx, which must be the next one.
static enum llm_status llm__gguf_writer_tensor_data(struct llm__gguf_writer *w, int64_t idx,
                                                    const void *data, struct llm__err *e) {
    if (idx < 0 || idx >= w->n_tensors || idx != w->cur || w->cur_done != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor %lld written out of order "
                         "(next is %lld)", (long long)idx, (long long)w->cur);
    return llm__gguf_writer_write(w, data, (size_t)w->tensors[idx].size, e);
}

// Checks that every tensor's bytes were written and flushes. Does not close the file.
static enum llm_status llm__gguf_writer_finish(struct llm__gguf_writer *w, struct llm__err *e) {
    if (!w->f) return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: finish before begin");
    if (w->cur < w->n_tensors)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gguf writer: tensor '%s' and %lld after it were "
                         "not written", w->tensors[w->cur].name,
                         (long long)(w->n_tensors - w->cur - 1));
    if (fflush(w->f) != 0 || ferror(w->f))
        return llm__fail(e, LLM_ERR_IO, "gguf writer: write failed: %s", strerror(errno));
    return LLM_OK;
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// === thread pool ===
//
// A persistent pool of worker threads. llm__pool_run(pool, fn, arg) runs fn(arg, i, n) on all n
// threads (the caller is thread 0) and returns when every one has finished. Between jobs the
// workers spin for a short while (an engine step issues hundreds of small jobs in a row), then
// sleep on a condition variable so an idle engine uses no CPU.

typedef void (*llm__job_fn)(void *arg, int ith, int nth);

struct llm__pool {
    int n_threads;
    pthread_t *threads;
    struct llm__pool_worker *workers;
    atomic_uint generation;   // bumped once per job
    atomic_int pending;       // workers still running the current job
    atomic_int sleeping;      // workers blocked on cv
    atomic_bool stop;
    llm__job_fn fn;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct llm__pool_worker { struct llm__pool *pool; int ith; };

static inline void llm__cpu_relax(void) {
#if defined(LLM__X86)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void *llm__pool_main(void *p) {
    struct llm__pool_worker *wk = p;
    struct llm__pool *pool = wk->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (++spins < (1 << 16)) { llm__cpu_relax(); continue; }
            // Sleep. The generation is re-checked under the mutex after announcing ourselves,
            // and llm__pool_run broadcasts under the mutex, so a wake-up cannot be lost.
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleeping, 1);
            while (atomic_load(&pool->generation) == seen) pthread_cond_wait(&pool->cv, &pool->mu);
            atomic_fetch_sub(&pool->sleeping, 1);
            pthread_mutex_unlock(&pool->mu);
            spins = 0;
        }
        seen = gen;
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        pool->fn(pool->arg, wk->ith, pool->n_threads);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
    return NULL;
}

static void llm__pool_run(struct llm__pool *pool, llm__job_fn fn, void *arg) {
    if (pool->n_threads == 1) { fn(arg, 0, 1); return; }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, pool->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&pool->generation, 1);   // seq_cst: pairs with the worker's sleeping check
    if (atomic_load(&pool->sleeping) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
    fn(arg, 0, pool->n_threads);
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) > 0) llm__cpu_relax();
}

static void llm__pool_free(struct llm__pool *pool) {
    if (!pool) return;
    if (pool->threads) {
        atomic_store(&pool->stop, true);
        pthread_mutex_lock(&pool->mu);
        atomic_fetch_add(&pool->generation, 1);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
    }
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool->workers);
    free(pool);
}

static struct llm__pool *llm__pool_new(int n_threads, struct llm__err *e) {
    struct llm__pool *pool = calloc(1, sizeof(*pool));
    if (!pool) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return NULL; }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    if (n_threads == 1) return pool;
    pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    pool->workers = calloc((size_t)n_threads, sizeof(struct llm__pool_worker));
    if (!pool->threads || !pool->workers) {
        llm__pool_free(pool);
        llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        pool->workers[i] = (struct llm__pool_worker){pool, i};
        if (pthread_create(&pool->threads[i], NULL, llm__pool_main, &pool->workers[i]) != 0) {
            pool->n_threads = i;   // join only the ones that started
            llm__pool_free(pool);
            llm__fail(e, LLM_ERR_BACKEND, "cannot start worker thread %d", i);
            return NULL;
        }
    }
    return pool;
}

// Splits [0, n) into nth near-equal parts; part ith is [*lo, *hi).
static inline void llm__split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + LLM__MIN(ith, rem);
    *hi = *lo + per + (ith < rem);
}

// === backend vtable ===
//
// The transformer (section "transformer") calls only these ops; a backend fills the table.
// Ops take backend buffers (struct llm__buf), never host pointers, so the same layer loop runs
// on the CPU and on a GPU. Per-step arrays (positions, slot mapping, block tables, ...) are
// handed over once per step in begin_step. A NULL entry means "not supported here".

// Memory owned by a backend. The CPU backend's `data` is host memory; a GPU backend keeps its
// handles in `handle`.
struct llm__buf {
    void *data;
    size_t size;
    void *handle;
    bool borrowed;   // data belongs to someone else (e.g. the mapped model file)
};

// A 2-D view of a buffer: ne1 rows of ne0 elements, rows nb1 bytes apart.
struct llm__tensor {
    struct llm__buf *buf;
    size_t offs;
    int type;
    int64_t ne0, ne1;
    size_t nb1;
};

// A weight matrix of ne1 rows (output features) by ne0 columns (input features), in whatever
// layout the backend chose when loading it (it may repack).
struct llm__weight {
    int type;
    int64_t ne0, ne1;
    struct llm__buf buf;
    int layout;   // backend-specific
};

// Rotary position embedding settings of a model.
struct llm__rope {
    int n_rot;                 // rotated dimensions per head (<= head_dim)
    bool neox;                 // rotate pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    float freq_base;
    float freq_scale;          // linear scaling: positions are multiplied by this
    struct llm__tensor freq_factors;   // n_rot/2 divisors of the frequencies (Llama 3.1); no buffer: none
};

// What one engine step computes: n_tokens tokens of up to n_seqs sequences. Token i belongs to
// sequence seq_idx[i] (a row of block_tables) at position positions[i]; its K/V go to cache slot
// slot_mapping[i] (= block * block_size + offset). Attention of token i covers positions
// 0..positions[i] of its sequence. Logits are wanted for the out_rows[0..n_out) tokens.
struct llm__step {
    int n_tokens;
    const int32_t *tokens;        // [n_tokens]
    const int32_t *positions;     // [n_tokens]
    const int32_t *seq_idx;       // [n_tokens]
    const int32_t *slot_mapping;  // [n_tokens]
    int n_seqs;
    int max_blocks;               // columns of block_tables
    const int32_t *block_tables;  // [n_seqs][max_blocks]
    int block_size;
    int n_out;
    const int32_t *out_rows;      // [n_out]
};

// The largest step the engine will run, for llm_backend_i.reserve.
struct llm__shape {
    int max_tokens;      // tokens per step
    int64_t max_cols;    // longest matmul input row
    int n_head, n_head_kv, head_dim, block_size;
};

struct llm__attn {
    int n_head, n_head_kv, head_dim;
    float scale;
};

struct llm_backend_i {
    const char *name;
    void (*free)(void *ctx);
    enum llm_status (*buf_alloc)(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e);
    void (*buf_free)(void *ctx, struct llm__buf *buf);
    // Takes a weight from host memory (the mapped file; it stays mapped while the engine lives).
    enum llm_status (*weight_load)(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                   int64_t ne1, const void *data, struct llm__err *e);
    void (*weight_free)(void *ctx, struct llm__weight *w);
    void (*upload)(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n);
    void (*download)(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n);
    // Sizes the backend's scratch memory once, so that ops never allocate.
    enum llm_status (*reserve)(void *ctx, const struct llm__shape *shape, struct llm__err *e);
    void (*begin_step)(void *ctx, const struct llm__step *step);
    enum llm_status (*end_step)(void *ctx, struct llm__err *e);   // waits for the step
    void (*sync)(void *ctx);   // waits for the ops issued so far (profiling); NULL: ops are synchronous

    // dst[i] = table row step->tokens[i]                                  (n_tokens rows)
    void (*embed)(void *ctx, struct llm__tensor dst, const struct llm__weight *table);
    // dst = x / rms(x) * w, row by row
    void (*rmsnorm)(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor w,
                    float eps);
    // dst[j] = x @ w[j]^T (+ bias[j]) for j < n: several weights sharing one input
    void (*matmul)(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                   const struct llm__tensor *bias, struct llm__tensor x);
    // rotates each head of each row of x in place by its token's position
    void (*rope)(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *rope);
    // writes each token's k and v rows into the caches at its slot
    void (*kv_store)(void *ctx, struct llm__tensor k_cache, struct llm__tensor v_cache,
                     struct llm__tensor k, struct llm__tensor v);
    // paged causal attention of each token's q over its sequence's cached K/V
    void (*attention)(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                      struct llm__tensor v_cache, const struct llm__attn *p);
    void (*silu_mul)(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up);
    void (*add)(void *ctx, struct llm__tensor dst, struct llm__tensor a, struct llm__tensor b);
    // dst[i] = src[step->out_rows[i]]                                       (n_out rows)
    void (*get_rows)(void *ctx, struct llm__tensor dst, struct llm__tensor src);
};

struct llm_backend {
    const struct llm_backend_i *iface;
    void *ctx;
};

static inline char *llm__tensor_row(struct llm__tensor t, int64_t i) {
    return (char *)t.buf->data + t.offs + (size_t)i * t.nb1;
}

// === CPU backend ===
//
// Every op is one job on the thread pool. Matrix products quantize the activations once to the
// weight's dot-product type (Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16, as
// llama.cpp does), then each thread takes chunks of weight rows. A step with many tokens (prefill)
// walks tiles of rows x tokens so a tile of weights stays in cache while it meets many tokens.

#define LLM__CPU_MAX_MM 3       // weights sharing one input in a matmul call

// A thread's share of the chunks of a job: it takes them front to back from its own cursor,
// then helps the others from theirs. Contiguous shares keep each core on one stream through
// memory (chunks handed out round-robin made the hardware prefetchers restart at every chunk:
// 25 vs 45 GB/s measured); the stealing evens out a thread that fell behind.
struct llm__cursor {
    _Alignas(64) atomic_int_fast64_t next;
    int64_t end;
};

struct llm__cpu {
    struct llm__pool *pool;
    struct llm__cursor *cursors;   // [n_threads]
    enum llm__simd simd;
    bool repack;                // rewrite Q8_0/Q4_0 weights into the x16 layout (AVX-512)
    llm__vec_dot_fn vec_dot[LLM__TYPE_COUNT];
    const struct llm__step *step;
    void *scratch;              // quantized activations
    size_t scratch_size;
};

// --- repacked weights: 16 rows interleaved, for AVX-512 VNNI ---
//
// A matrix-vector product reads each weight once per token, so decode speed is how fast the
// weights stream from memory; a prompt multiplies each weight with many tokens, so prefill speed
// is how few instructions a multiply-add takes. The GGUF layout (34- or 18-byte blocks, one row
// after another) serves neither: unaligned loads, and per-row dot products that end in
// horizontal sums. At load time the CPU backend rewrites Q8_0 and Q4_0 matrices whose row count
// is a multiple of 16 into the "x16" layout: for each group of 16 rows and each block of 32
// columns, the rows' quants interleaved 4 bytes at a time, so one 64-byte vector holds the same
// 4 columns of 16 rows. vpdpbusd against 4 broadcast activation bytes then adds 4 products into
// each row's own lane; 8 of them finish a block of 16 rows, with no horizontal sum, and one
// multiply-add applies the 16 rows' scales times the token's. Per group of 16 rows, in units of
// two blocks (64-byte aligned; an odd last block gets 32 bytes of padding):
//
//   Q8_0: per block 8 chunks of 64 bytes, chunk c = columns 4c..4c+3 of rows 0..15, +128 each
//         (unsigned, for vpdpbusd)
//   Q4_0: per block 4 chunks of 64 bytes, chunk c = quant bytes 4c..4c+3 of rows 0..15 as stored
//         (low nibbles: columns 4c..4c+3; high nibbles: columns 16+4c..16+4c+3; values 0..15)
//   then the 2 x 16 fp16 scales of the unit's blocks, row by row
//
// Activations are quantized to Q8_0 exactly as for the plain kernels and laid out per token as K
// quant bytes, K/32 block scales (f32) and K/32 values -c * (sum of the block's quants), where c
// is the offset of the weight encoding (128 for Q8_0, 8 for Q4_0): a row's block sum starts from
// that value, so sum((w + c) * a) - c * sum(a) = sum(w * a), exactly. 1.25 bytes per column: a
// long row's activations stay in L1 while the weights stream past.

enum { LLM__LAYOUT_PLAIN = 0, LLM__LAYOUT_X16 = 1 };
#define LLM__X16_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 4)   // bytes per token of x16 activations

static bool llm__x16_supported(int type, int64_t ne0, int64_t ne1) {
    if (ne1 % 16 != 0) return false;
    return ((type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0) && ne0 % 32 == 0) || (type == LLM__TYPE_Q4_K && ne0 % 256 == 0);
}

// Bytes of quants per block of 16 rows; offsets of block b's quants and scales in a record of
// nb blocks; bytes of a record.
static size_t llm__x16_qbytes(int type) { return type == LLM__TYPE_Q8_0 ? 512 : 256; }
static size_t llm__x16_qoffs(int type, int64_t b) {
    return (size_t)(b / 2) * (2 * llm__x16_qbytes(type) + 64) + (size_t)(b % 2) * llm__x16_qbytes(type);
}
static size_t llm__x16_soffs(int type, int64_t b, int64_t nb) {
    size_t nq = b / 2 * 2 + 1 < nb ? 2 : 1;   // blocks in this unit
    return (size_t)(b / 2) * (2 * llm__x16_qbytes(type) + 64) + nq * llm__x16_qbytes(type) + (size_t)(b % 2) * 32;
}
static size_t llm__x16_group_bytes(int type, int64_t ne0) {
    if (type == LLM__TYPE_Q4_K) return (size_t)(ne0 / 256) * 2368;   // LLM__X16K_SB
    int64_t nb = ne0 / 32;
    return (size_t)(nb / 2) * (2 * llm__x16_qbytes(type) + 64) + (nb % 2 ? llm__x16_qbytes(type) + 64 : 0);
}

// Rewrites row groups [g0, g1) (16 rows each) of a plain Q8_0/Q4_0 matrix into x16 records.
static void llm__x16_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nb = ne0 / 32;
    const size_t rec_bytes = llm__x16_group_bytes(type, ne0);
    const size_t blk = type == LLM__TYPE_Q8_0 ? sizeof(struct llm__block_q8_0) : sizeof(struct llm__block_q4_0);
    memset((uint8_t *)dst + rec_bytes * (size_t)g0, 0, rec_bytes * (size_t)(g1 - g0));
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *rec = (uint8_t *)dst + rec_bytes * (size_t)g;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *q = rec + llm__x16_qoffs(type, b);
            uint16_t *sc = (uint16_t *)(rec + llm__x16_soffs(type, b, nb));
            for (int r = 0; r < 16; r++) {
                const uint8_t *x = (const uint8_t *)src + ((size_t)(16 * g + r) * (size_t)nb + (size_t)b) * blk;
                memcpy(&sc[r], x, 2);   // d comes first in both blocks
                if (type == LLM__TYPE_Q8_0)
                    for (int j = 0; j < 32; j++) q[(j / 4) * 64 + r * 4 + j % 4] = (uint8_t)(x[2 + j] ^ 0x80);
                else
                    for (int j = 0; j < 16; j++) q[(j / 4) * 64 + r * 4 + j % 4] = x[2 + j];
            }
        }
    }
}

// Row r of an x16 matrix as floats (the embedding lookup of a tied, repacked table).
static void llm__x16_dequantize_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nb = ne0 / 32;
    const uint8_t *rec = (const uint8_t *)w + (size_t)(r / 16) * llm__x16_group_bytes(type, ne0);
    const int ri = (int)(r % 16);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = rec + llm__x16_qoffs(type, b);
        const uint16_t *sc = (const uint16_t *)(rec + llm__x16_soffs(type, b, nb));
        float d = llm__fp16_to_fp32(sc[ri]);
        for (int j = 0; j < 32; j++) {
            int v;
            if (type == LLM__TYPE_Q8_0) v = (int8_t)(q[(j / 4) * 64 + ri * 4 + j % 4] ^ 0x80);
            else {
                int jj = j % 16;
                uint8_t byte = q[(jj / 4) * 64 + ri * 4 + jj % 4];
                v = (j < 16 ? byte & 15 : byte >> 4) - 8;
            }
            y[b * 32 + j] = d * (float)v;
        }
    }
}

#if defined(LLM__X86_SIMD)
// Q8_0 quantization of one block of 32, exactly as llm__quantize_q8_0: q = roundf(x / d) with
// d = max|x| / 127 (roundf: a truncation, then one more step away from zero when the dropped
// fraction is at least a half; both steps are exact in float). Returns the block's sum of quants.
LLM__AVX512 static int32_t llm__quantize_q8_0_block_avx512(const float *x, int8_t *q, uint16_t *dh) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    *dh = llm__fp32_to_fp16(d);
    const __m512 idv = _mm512_set1_ps(id), half = _mm512_set1_ps(0.5f);
    __m512i qi[2];
    for (int h = 0; h < 2; h++) {
        const __m512 v = _mm512_mul_ps(h ? x1 : x0, idv);
        const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m512 sgn = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
        qi[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, sgn));
    }
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(qi[0]));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(qi[1]));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
}

// Q8_K quantization of one super-block of 256, exactly as llm__quantize_q8_K: the element of
// largest magnitude (the first of equals) maps to -127, rounding to nearest even.
LLM__AVX512 static void llm__quantize_q8_K_block_avx512(const float *x, struct llm__block_q8_K *y) {
    __m512 am = _mm512_setzero_ps();
    for (int i = 0; i < 256; i += 16) am = _mm512_max_ps(am, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float amax = _mm512_reduce_max_ps(am);
    if (amax == 0.0f) {
        memset(y, 0, sizeof(*y));
        return;
    }
    float max = 0.0f;
    for (int i = 0; i < 256; i += 16) {
        __mmask16 k = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (k) { max = x[i + __builtin_ctz(k)]; break; }
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 256; i += 16) {
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + i)));   // nearest even
        v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
        _mm_storeu_si128((__m128i *)(y->qs + i), _mm512_cvtepi32_epi8(v));
        y->bsums[i / 16] = (int16_t)_mm512_reduce_add_epi32(v);
    }
    y->d = 1.0f / iscale;
}
#endif

// One token's activations (n floats) in the x16 format for weights of the given type.
static void llm__x16_quantize_act(int type, const float *x, uint8_t *out, int64_t n) {
    const int c = type == LLM__TYPE_Q8_0 ? 128 : 8;
    float *d = (float *)(out + n);
    int32_t *nc = (int32_t *)(out + n + n / 8);
    for (int64_t b = 0; b < n / 32; b++) {
#if defined(LLM__X86_SIMD)
        // (x16 weights exist only where AVX-512 runs)
        uint16_t dh;
        int32_t sum = llm__quantize_q8_0_block_avx512(x + 32 * b, (int8_t *)out + 32 * b, &dh);
        d[b] = llm__fp16_to_fp32(dh);
#else
        struct llm__block_q8_0 blk;
        llm__quantize_row(LLM__TYPE_Q8_0, x + 32 * b, &blk, 32);
        memcpy(out + 32 * b, blk.qs, 32);
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += blk.qs[j];
        d[b] = llm__fp16_to_fp32(blk.d);
#endif
        nc[b] = -c * sum;
    }
}

#if defined(LLM__X86_SIMD)
// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
// One block of 16 rows (quants q, scales ws) times NT tokens' block b, added to acc.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_block(
        int type, int NT, const uint8_t *q, __m512 ws, int64_t b, const uint8_t *act, size_t stride, int64_t K,
        __m512 *acc) {
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i wv[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        // Q4_0 high nibbles stay in place (16 x their value): one instruction instead of two,
        // and the sum is shifted back once per block
        if (type == LLM__TYPE_Q8_0) wv[c] = _mm512_loadu_si512((const void *)(q + 64 * c));
        else if (c < 4) wv[c] = _mm512_and_si512(_mm512_loadu_si512((const void *)(q + 64 * c)), m4);
        else wv[c] = _mm512_andnot_si512(m4, _mm512_loadu_si512((const void *)(q + 64 * (c - 4))));
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        const uint8_t *a = act + (size_t)t * stride;
        const int8_t *aq = (const int8_t *)a + 32 * b;
        int32_t nc;
        float d;
        memcpy(&nc, a + K + K / 8 + 4 * b, 4);
        memcpy(&d, a + K + 4 * b, 4);
        // two chains of 4 so consecutive vpdpbusd do not wait on each other (Q4_0: the low
        // nibbles' chain and the high nibbles', which is 16 x too large)
        __m512i s0 = _mm512_set1_epi32(nc), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            // Q8_0 chunk c: columns 4c..; Q4_0: low nibbles of chunk c (< 4), then high ones
            const int col = type == LLM__TYPE_Q8_0 ? 4 * c : (c < 4 ? 4 * c : 16 + 4 * (c - 4));
            int32_t a4;
            memcpy(&a4, aq + col, 4);
            const bool first = type == LLM__TYPE_Q8_0 ? c % 2 == 0 : c < 4;
            if (first) s0 = _mm512_dpbusd_epi32(s0, wv[c], _mm512_set1_epi32(a4));
            else s1 = _mm512_dpbusd_epi32(s1, wv[c], _mm512_set1_epi32(a4));
        }
        if (type == LLM__TYPE_Q4_0) s1 = _mm512_srai_epi32(s1, 4);
        const __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        acc[t] = _mm512_fmadd_ps(p, _mm512_mul_ps(ws, _mm512_set1_ps(d)), acc[t]);
    }
}

// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_tile(
        int type, int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const size_t qb = type == LLM__TYPE_Q8_0 ? 512 : 256, unit = 2 * qb + 64;
    const int64_t nb = K / 32;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    // whole units of two blocks: [quants b][quants b+1][scales b, b+1]
    for (int64_t b = 0; b + 1 < nb; b += 2, rec += unit) {
        if (NT == 1) {
            // Decode streams the weights once: ask for them 4 KB ahead (measured: +10-20% on top
            // of the hardware prefetcher, which alone leaves the core waiting on memory).
#pragma GCC unroll 17
            for (size_t pf = 0; pf < unit; pf += 64) _mm_prefetch((const char *)rec + 4096 + pf, _MM_HINT_T0);
        }
        const __m512 ws0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 2 * qb)));
        const __m512 ws1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 2 * qb + 32)));
        llm__x16_block(type, NT, rec, ws0, b, act, stride, K, acc);
        llm__x16_block(type, NT, rec + qb, ws1, b + 1, act, stride, K, acc);
    }
    if (nb % 2) {   // the last unit holds one block
        const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + qb)));
        llm__x16_block(type, NT, rec, ws, nb - 1, act, stride, K, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 static void llm__x16_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act, size_t stride,
                                             int64_t K, float *out, size_t ostride) {
    // Constant token counts let the compiler keep the accumulators in registers.
#define LLM__X16_CASE(TYPE)                                                                                  \
    switch (nt) {                                                                                            \
    case 1: llm__x16_tile(TYPE, 1, rec, act, stride, K, out, ostride); break;                               \
    case 2: llm__x16_tile(TYPE, 2, rec, act, stride, K, out, ostride); break;                               \
    case 3: llm__x16_tile(TYPE, 3, rec, act, stride, K, out, ostride); break;                               \
    case 4: llm__x16_tile(TYPE, 4, rec, act, stride, K, out, ostride); break;                               \
    case 5: llm__x16_tile(TYPE, 5, rec, act, stride, K, out, ostride); break;                               \
    case 6: llm__x16_tile(TYPE, 6, rec, act, stride, K, out, ostride); break;                               \
    case 7: llm__x16_tile(TYPE, 7, rec, act, stride, K, out, ostride); break;                               \
    default: llm__x16_tile(TYPE, 8, rec, act, stride, K, out, ostride); break;                              \
    }
    if (type == LLM__TYPE_Q8_0) { LLM__X16_CASE(LLM__TYPE_Q8_0) }
    else { LLM__X16_CASE(LLM__TYPE_Q4_0) }
#undef LLM__X16_CASE
}
#endif

// Q4_K in x16: per group of 16 rows and per super-block of 256 columns (2368 bytes, 64-byte
// aligned): the 128 quant bytes of the 16 rows interleaved 4 bytes at a time (32 chunks of 64
// bytes; chunk c holds quant bytes 4c..4c+3 of each row: low nibbles are sub-block 2(c/8), high
// nibbles sub-block 2(c/8)+1, columns 4(c%8)..), the 6-bit sub-block scales unpacked to bytes
// [sub-block][row] (128 bytes), the mins as byte pairs [pair of sub-blocks][row][2] (128 bytes),
// then d and dmin of the 16 rows (2 x 32 bytes of fp16). Activations are Q8_K, laid out per token
// as K quant bytes, K/256 scales (f32) and K/256 x 4 pairs of sub-block sums (int16 x 2).
#define LLM__X16K_SB 2368   // bytes of one super-block of 16 rows
#define LLM__X16K_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 256 * 20)

static void llm__x16k_repack(const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nsb = ne0 / 256;
    for (int64_t g = g0; g < g1; g++) {
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *o = (uint8_t *)dst + ((size_t)g * (size_t)nsb + (size_t)sb) * LLM__X16K_SB;
            for (int r = 0; r < 16; r++) {
                const struct llm__block_q4_K *x = (const struct llm__block_q4_K *)src + (16 * g + r) * nsb + sb;
                uint8_t sm[16];
                llm__unpack_k4_scales(x->scales, sm);
                for (int j = 0; j < 128; j++) o[(j / 4) * 64 + r * 4 + j % 4] = x->qs[j];
                for (int j = 0; j < 8; j++) {
                    o[2048 + j * 16 + r] = sm[j];
                    o[2176 + (j / 2) * 32 + r * 2 + j % 2] = sm[8 + j];
                }
                memcpy(o + 2304 + 2 * r, &x->d, 2);
                memcpy(o + 2336 + 2 * r, &x->dmin, 2);
            }
        }
    }
}

static void llm__x16k_dequantize_row(const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nsb = ne0 / 256;
    const int ri = (int)(r % 16);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = (const uint8_t *)w + ((size_t)(r / 16) * (size_t)nsb + (size_t)sb) * LLM__X16K_SB;
        uint16_t dh, mh;
        memcpy(&dh, o + 2304 + 2 * ri, 2);
        memcpy(&mh, o + 2336 + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh), dmin = llm__fp16_to_fp32(mh);
        for (int j = 0; j < 8; j++) {
            const float sc = d * o[2048 + j * 16 + ri], m = dmin * o[2176 + (j / 2) * 32 + ri * 2 + j % 2];
            for (int l = 0; l < 32; l++) {
                // column l of sub-block j: pair j/2, chunk 8(j/2) + l/4, byte l%4, nibble j%2
                uint8_t byte = o[(8 * (j / 2) + l / 4) * 64 + ri * 4 + l % 4];
                y[sb * 256 + j * 32 + l] = sc * (float)(j % 2 ? byte >> 4 : byte & 15) - m;
            }
        }
    }
}

static void llm__x16k_quantize_act(const float *x, uint8_t *out, int64_t n) {
    float *d = (float *)(out + n);
    uint8_t *bsp = out + n + n / 256 * 4;
    for (int64_t sb = 0; sb < n / 256; sb++) {
        struct llm__block_q8_K blk;
#if defined(LLM__X86_SIMD)
        llm__quantize_q8_K_block_avx512(x + 256 * sb, &blk);   // (x16 weights exist only where AVX-512 runs)
#else
        llm__quantize_row(LLM__TYPE_Q8_K, x + 256 * sb, &blk, 256);
#endif
        memcpy(out + 256 * sb, blk.qs, 256);
        d[sb] = blk.d;
        for (int j = 0; j < 8; j++) {
            int16_t s16 = (int16_t)(blk.bsums[2 * j] + blk.bsums[2 * j + 1]);
            memcpy(bsp + sb * 16 + j * 2, &s16, 2);
        }
    }
}

#if defined(LLM__X86_SIMD)
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16k_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const int64_t nsb = K / 256;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = rec + (size_t)sb * LLM__X16K_SB;
        if (NT == 1)
            for (int pf = 0; pf < LLM__X16K_SB; pf += 64) _mm_prefetch((const char *)o + 4096 + pf, _MM_HINT_T0);
        __m512i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 2048 + 16 * j)));
            __m512i wv[8];
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                // high nibbles stay in place (16 x their value); the sum is shifted back once
                const __m512i raw = _mm512_loadu_si512((const void *)(o + 64 * (8 * (j / 2) + c)));
                wv[c] = j % 2 ? _mm512_andnot_si512(m4, raw) : _mm512_and_si512(raw, m4);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const int8_t *aq = (const int8_t *)(act + (size_t)t * stride) + 256 * sb + 32 * j;
                __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    int32_t a4;
                    memcpy(&a4, aq + 4 * c, 4);
                    if (c % 2 == 0) s0 = _mm512_dpbusd_epi32(s0, wv[c], _mm512_set1_epi32(a4));
                    else s1 = _mm512_dpbusd_epi32(s1, wv[c], _mm512_set1_epi32(a4));
                }
                __m512i dot = _mm512_add_epi32(s0, s1);
                if (j % 2) dot = _mm512_srai_epi32(dot, 4);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot, sc));
            }
        }
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2304)));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2336)));
        __m512i mp[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) mp[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(o + 2176 + 32 * p)));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            const uint8_t *a = act + (size_t)t * stride;
            float da;
            memcpy(&da, a + K + 4 * sb, 4);
            __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                int32_t pair;
                memcpy(&pair, a + K + (K / 256) * 4 + 16 * sb + 4 * p, 4);
                msum = _mm512_dpwssd_epi32(msum, mp[p], _mm512_set1_epi32(pair));
            }
            const __m512 dav = _mm512_set1_ps(da);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d16, dav), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(m16, dav), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 static void llm__x16k_tile_avx512(int nt, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K,
                                              float *out, size_t ostride) {
    switch (nt) {
    case 1: llm__x16k_tile(1, rec, act, stride, K, out, ostride); break;
    case 2: llm__x16k_tile(2, rec, act, stride, K, out, ostride); break;
    case 3: llm__x16k_tile(3, rec, act, stride, K, out, ostride); break;
    default: llm__x16k_tile(4, rec, act, stride, K, out, ostride); break;
    }
}
#endif

// Splits chunks [0, n) into contiguous shares, one per thread.
static void llm__cursors_init(struct llm__cpu *c, int64_t n) {
    int nth = c->pool->n_threads;
    for (int i = 0; i < nth; i++) {
        int64_t lo, hi;
        llm__split(n, i, nth, &lo, &hi);
        atomic_store_explicit(&c->cursors[i].next, lo, memory_order_relaxed);
        c->cursors[i].end = hi;
    }
}

// The next chunk for thread ith: its own first, then the others'. -1 when all are taken.
static int64_t llm__cursors_next(struct llm__cpu *c, int ith, int nth) {
    for (int k = 0; k < nth; k++) {
        struct llm__cursor *cur = &c->cursors[(ith + k) % nth];
        if (atomic_load_explicit(&cur->next, memory_order_relaxed) >= cur->end) continue;
        int64_t ch = atomic_fetch_add_explicit(&cur->next, 1, memory_order_relaxed);
        if (ch < cur->end) return ch;
    }
    return -1;
}

static enum llm_status llm__cpu_reserve(struct llm__cpu *c, size_t size, struct llm__err *e) {
    if (size <= c->scratch_size) return LLM_OK;
    void *p = llm__alloc(size);
    if (!p) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes of scratch)", size);
    free(c->scratch);
    c->scratch = p;
    c->scratch_size = size;
    return LLM_OK;
}

static void llm__cpu_free(void *ctx) {
    struct llm__cpu *c = ctx;
    if (!c) return;
    llm__pool_free(c->pool);
    free(c->scratch);
    free(c->cursors);
    free(c);
}

static enum llm_status llm__cpu_buf_alloc(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e) {
    (void)ctx;
    memset(buf, 0, sizeof(*buf));
    buf->data = llm__alloc(size);
    if (!buf->data) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes)", size);
    buf->size = size;
    return LLM_OK;
}

static void llm__cpu_buf_free(void *ctx, struct llm__buf *buf) {
    (void)ctx;
    if (!buf->borrowed) free(buf->data);
    memset(buf, 0, sizeof(*buf));
}

struct llm__cpu_repack_job { struct llm__weight *w; const void *src; };

static void llm__cpu_repack_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_repack_job *job = arg;
    const struct llm__weight *w = job->w;
    int64_t g0, g1;
    llm__split(w->ne1 / 16, ith, nth, &g0, &g1);
    if (w->type == LLM__TYPE_Q4_K) llm__x16k_repack(job->src, w->buf.data, w->ne0, g0, g1);
    else llm__x16_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
}

static enum llm_status llm__cpu_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                            int64_t ne1, const void *data, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    memset(w, 0, sizeof(*w));
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->buf.size = llm__row_bytes(type, ne0) * (size_t)ne1;
    if (c->simd == LLM__SIMD_AVX512 && c->repack && llm__x16_supported(type, ne0, ne1)) {
        w->buf.size = llm__x16_group_bytes(type, ne0) * (size_t)(ne1 / 16);
        if (!(w->buf.data = llm__alloc(w->buf.size)))
            return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes for a weight)", w->buf.size);
        struct llm__cpu_repack_job job = {w, data};
        llm__pool_run(c->pool, llm__cpu_repack_worker, &job);
        w->layout = LLM__LAYOUT_X16;
        return LLM_OK;
    }
    // Zero-copy: the rows are used where the mapped file has them.
    w->buf.data = (void *)data;
    w->buf.borrowed = true;
    return LLM_OK;
}

static void llm__cpu_weight_free(void *ctx, struct llm__weight *w) {
    llm__cpu_buf_free(ctx, &w->buf);
}

static void llm__cpu_upload(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n) {
    (void)ctx;
    memcpy((char *)buf->data + offs, src, n);
}

static void llm__cpu_download(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n) {
    (void)ctx;
    memcpy(dst, (const char *)buf->data + offs, n);
}

static void llm__cpu_begin_step(void *ctx, const struct llm__step *step) {
    ((struct llm__cpu *)ctx)->step = step;
}

static enum llm_status llm__cpu_end_step(void *ctx, struct llm__err *e) {
    (void)e;
    ((struct llm__cpu *)ctx)->step = NULL;
    return LLM_OK;
}

#if defined(LLM__X86_SIMD)
// e^x for 16 floats, about 1 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-6 Taylor
// polynomial, times 2^n with vscalefps (which flushes to 0 far below the float range).
LLM__AVX512 static inline __m512 llm__exp_avx512(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

// --- row-wise ops: a job over the rows of a tensor ---

struct llm__cpu_rows_job {
    struct llm__cpu *c;
    struct llm__tensor dst, a, b;
    float eps;
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
        if (t->type == LLM__TYPE_Q4_K) llm__x16k_dequantize_row(t->buf.data, tok, (float *)llm__tensor_row(job->dst, i), t->ne0);
        else llm__x16_dequantize_row(t->type, t->buf.data, tok, (float *)llm__tensor_row(job->dst, i), t->ne0);
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
        _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(u + j)));
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
// theta_scale pair after pair, in float) so that results agree closely.
static void llm__rope_cache(const struct llm__rope *r, int32_t pos, float *cs) {
    float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    const float *ff = r->freq_factors.buf ? (const float *)llm__tensor_row(r->freq_factors, 0) : NULL;
    float theta = (float)pos;
    for (int i = 0; i < r->n_rot / 2; i++) {
        float t = r->freq_scale * (ff ? theta / ff[i] : theta);
        cs[2 * i + 0] = cosf(t);
        cs[2 * i + 1] = sinf(t);
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

static void llm__cpu_kv_store(void *ctx, struct llm__tensor k_cache, struct llm__tensor v_cache,
                              struct llm__tensor k, struct llm__tensor v) {
    struct llm__cpu *c = ctx;
    const struct llm__step *s = c->step;
    const int bs = s->block_size;
    const size_t esz = k_cache.type == LLM__TYPE_F32 ? 4 : 2;
    for (int t = 0; t < s->n_tokens; t++) {
        int32_t slot = s->slot_mapping[t];
        llm__quantize_row(v_cache.type, (const float *)llm__tensor_row(v, t), llm__tensor_row(v_cache, slot), v.ne0);
        char *blk = llm__tensor_row(k_cache, (int64_t)(slot / bs) * bs);
        const float *kr = (const float *)llm__tensor_row(k, t);
        uint16_t h[1024];   // a row is converted 1024 values at a time, then scattered
        for (int64_t c0 = 0; c0 < k.ne0; c0 += 1024) {
            int64_t nc = LLM__MIN(1024, k.ne0 - c0);
            if (esz == 2) llm__fp32_to_fp16_row(kr + c0, h, nc);
            for (int64_t col = c0; col < c0 + nc; col++) {
                size_t at = ((size_t)col * (size_t)bs + (size_t)(slot % bs)) * esz;
                if (esz == 4) memcpy(blk + at, &kr[col], 4);
                else memcpy(blk + at, &h[col - c0], 2);
            }
        }
    }
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

// Per-thread scratch, in floats: q, acc [G][hd]; kt [hd][bs]; vb [bs][hd]; sc [G][max(bs, hd)];
// m, l [G]. (sc first holds q in half precision.)
static size_t llm__attn_scratch(int G, int hd, int bs) {
    return ((size_t)(2 * G * hd + 2 * hd * bs + G * LLM__MAX(bs, hd) + 2 * G) + 15) & ~(size_t)15;
}

// Converts n cache elements (f16 or f32) to f32.
static inline void llm__kv_to_f32(int type, const void *src, float *dst, int64_t n) {
    if (type == LLM__TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else llm__fp16_to_fp32_row((const uint16_t *)src, dst, n);
}

#if defined(LLM__X86_SIMD)

// 16 cache values (f16 or f32) as floats.
LLM__AVX512 static inline __m512 llm__kv_load16(const char *p, bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

// The block part of the attention worker for head_dim % 16 == 0 and block size 16 or 32 (8 takes
// the scalar path), reading the cache directly: kt = this head's keys of the block, [dim][slot];
// v0 = the value row of the block's first slot for this head, rows vstride bytes apart. Scores
// of up to 8 heads at a time (each key vector converted once for all of them), the softmax
// update, then the values, 16 columns at a time for 8 heads.
LLM__AVX512 static void llm__attn_block_avx512(int G, int hd, int bs, int nk, float scale, const float *q,
                                               const char *kt, const char *v0, size_t vstride, bool f16,
                                               float *sc, float *m, float *l, float *acc) {
    const size_t esz = f16 ? 2 : 4;
    const bool two = bs == 32;
    const __mmask16 tail = nk % 16 ? (__mmask16)((1u << (nk % 16)) - 1) : (__mmask16)0xFFFF;
    // keys past nk do not exist: -inf scores, zero weights
    const __mmask16 k0 = nk >= 16 ? (__mmask16)0xFFFF : tail, k1 = nk >= 32 ? (__mmask16)0xFFFF : nk > 16 ? tail : 0;
    for (int h0 = 0; h0 < G; h0 += 8) {
        const int ng = LLM__MIN(8, G - h0);
        __m512 s0[8], s1[8];
#pragma GCC unroll 8
        for (int h = 0; h < 8; h++) s0[h] = s1[h] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i++) {
            const __m512 ka = llm__kv_load16(kt + (size_t)i * bs * esz, f16);
            const __m512 kb = two ? llm__kv_load16(kt + ((size_t)i * bs + 16) * esz, f16) : ka;
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
            const __m512 a = _mm512_mul_ps(s0[h], _mm512_set1_ps(scale)), b = _mm512_mul_ps(s1[h], _mm512_set1_ps(scale));
            float bmax = _mm512_mask_reduce_max_ps(k0, a);
            if (two && k1) bmax = fmaxf(bmax, _mm512_mask_reduce_max_ps(k1, b));
            const float mnew = fmaxf(m[hh], bmax);
            const float corr = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - mnew);
            const __m512 mv = _mm512_set1_ps(mnew);
            const __m512 p0 = _mm512_maskz_mov_ps(k0, llm__exp_avx512(_mm512_sub_ps(a, mv)));
            const __m512 p1 = two ? _mm512_maskz_mov_ps(k1, llm__exp_avx512(_mm512_sub_ps(b, mv))) : _mm512_setzero_ps();
            _mm512_storeu_ps(sc + (size_t)hh * bs, p0);
            if (two) _mm512_storeu_ps(sc + (size_t)hh * bs + 16, p1);
            l[hh] = l[hh] * corr + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
            m[hh] = mnew;
            float *ah = acc + (size_t)hh * hd;
            const __m512 cv = _mm512_set1_ps(corr);
            for (int c = 0; c < hd; c += 16) _mm512_storeu_ps(ah + c, _mm512_mul_ps(_mm512_loadu_ps(ah + c), cv));
        }
        // acc[h] += sum_j p[h][j] v[j], 16 columns at a time
        for (int c = 0; c < hd; c += 16) {
            __m512 a[8];
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) a[h] = h < ng ? _mm512_loadu_ps(acc + (size_t)(h0 + h) * hd + c) : _mm512_setzero_ps();
            for (int j = 0; j < nk; j++) {
                const __m512 v = llm__kv_load16(v0 + (size_t)j * vstride + (size_t)c * esz, f16);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    if (h >= ng) break;
                    a[h] = _mm512_fmadd_ps(_mm512_set1_ps(sc[(size_t)(h0 + h) * bs + j]), v, a[h]);
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
static void llm__attn_block_scalar(int G, int hd, int bs, int nk, float scale, const float *q, const float *kt,
                                   const float *vb, float *sc, float *m, float *l, float *acc) {
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * hd;
        float *sh = sc + (size_t)h * bs, bmax = -INFINITY;
        for (int j = 0; j < nk; j++) {
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d += qh[i] * kt[(size_t)i * bs + j];
            sh[j] = d * scale;
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
    const size_t esz = kvt == LLM__TYPE_F32 ? 4 : 2;
    float *q = (float *)job->c->scratch + (size_t)ith * job->scratch_per_thread;
    float *acc = q + (size_t)G * hd, *kt = acc + (size_t)G * hd, *vb = kt + (size_t)hd * bs;
    float *sc = vb + (size_t)bs * hd, *m = sc + (size_t)G * LLM__MAX(bs, hd), *l = m + G;
    bool simd = false;
#if defined(LLM__X86_SIMD)
    simd = job->c->simd == LLM__SIMD_AVX512 && hd % 16 == 0 && bs % 16 == 0;
#endif
    int n_items = s->n_tokens * p->n_head_kv;
    for (int item; (item = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < n_items;) {
        int t = item / p->n_head_kv, g = item % p->n_head_kv;
        int n_ctx = s->positions[t] + 1;
        const int32_t *bt = s->block_tables + (size_t)s->seq_idx[t] * s->max_blocks;
        const float *qrow = (const float *)llm__tensor_row(job->q, t) + (size_t)g * G * hd;
        if (kvt == LLM__TYPE_F16) {
            // round q to half precision (sc is free until the first block)
            llm__fp32_to_fp16_row(qrow, (uint16_t *)sc, (int64_t)G * hd);
            llm__fp16_to_fp32_row((const uint16_t *)sc, q, (int64_t)G * hd);
        } else {
            memcpy(q, qrow, sizeof(float) * (size_t)G * hd);
        }
        memset(acc, 0, sizeof(float) * (size_t)G * hd);
        for (int h = 0; h < G; h++) { m[h] = -INFINITY; l[h] = 0.0f; }
        for (int j0 = 0; j0 < n_ctx; j0 += bs) {
            int nk = LLM__MIN(bs, n_ctx - j0);
            int64_t slot0 = (int64_t)bt[j0 / bs] * bs;
            const char *kblk = llm__tensor_row(job->k_cache, slot0) + (size_t)g * hd * bs * esz;
            const char *v0 = llm__tensor_row(job->v_cache, slot0) + (size_t)g * hd * esz;
#if defined(LLM__X86_SIMD)
            if (simd) {
                llm__attn_block_avx512(G, hd, bs, nk, p->scale, q, kblk, v0, job->v_cache.nb1, kvt == LLM__TYPE_F16,
                                       sc, m, l, acc);
                continue;
            }
#endif
            // this head's keys, [dim][slot], and its values, [slot][dim], as f32
            llm__kv_to_f32(kvt, kblk, kt, (int64_t)hd * bs);
            for (int j = 0; j < nk; j++) llm__kv_to_f32(kvt, v0 + (size_t)j * job->v_cache.nb1, vb + (size_t)j * hd, hd);
            llm__attn_block_scalar(G, hd, bs, nk, p->scale, q, kt, vb, sc, m, l, acc);
        }
        float *orow = (float *)llm__tensor_row(job->out, t) + (size_t)g * G * hd;
        for (int h = 0; h < G; h++) {
            float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
            for (int i = 0; i < hd; i++) orow[h * hd + i] = acc[h * hd + i] * inv;
        }
    }
}

static void llm__cpu_attention(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                               struct llm__tensor v_cache, const struct llm__attn *p) {
    struct llm__cpu *c = ctx;
    int G = p->n_head / p->n_head_kv;
    size_t per = llm__attn_scratch(G, p->head_dim, c->step->block_size);
    assert(per * sizeof(float) * (size_t)c->pool->n_threads <= c->scratch_size);   // see llm__cpu_reserve_shape
    struct llm__cpu_attn_job job = {.c = c, .out = out, .q = q, .k_cache = k_cache, .v_cache = v_cache,
                                    .p = p, .scratch_per_thread = per};
    atomic_init(&job.next, 0);
    if (c->step->n_tokens * p->n_head_kv == 1) llm__cpu_attn_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_attn_worker, &job);
}

// --- matrix products ---

struct llm__cpu_mm_job {
    struct llm__cpu *c;
    int n;                                    // weights
    const struct llm__tensor *dst;
    const struct llm__weight *const *w;
    const struct llm__tensor *bias;
    struct llm__tensor x;                     // [ntok][ne0] f32
    int64_t ntok;
    const char *xq[LLM__CPU_MAX_MM];          // activations of weight j in its dot type
    size_t xq_stride[LLM__CPU_MAX_MM];
    int n_types;                              // distinct activation formats to quantize into
    int types[LLM__CPU_MAX_MM];               // a dot type, or LLM__X16_ACT + weight type
    char *xq_base[LLM__CPU_MAX_MM];
    int64_t rows_per_chunk;
    int64_t chunk_start[LLM__CPU_MAX_MM + 1]; // prefix sums of chunks per weight
};

#define LLM__X16_ACT 1000   // activation format ids above this are x16 formats of type id - 1000

static size_t llm__act_row_bytes(int fmt, int64_t K) {
    if (fmt == LLM__X16_ACT + LLM__TYPE_Q4_K) return LLM__X16K_ACT_STRIDE(K);
    return fmt >= LLM__X16_ACT ? LLM__X16_ACT_STRIDE(K) : llm__row_bytes(fmt, K);
}

static void llm__cpu_mm_quantize(struct llm__cpu_mm_job *job, int64_t lo, int64_t hi) {
    int64_t K = job->x.ne0;
    for (int i = 0; i < job->n_types; i++) {
        int fmt = job->types[i];
        size_t stride = llm__act_row_bytes(fmt, K);
        for (int64_t t = lo; t < hi; t++) {
            const float *x = (const float *)llm__tensor_row(job->x, t);
            uint8_t *out = (uint8_t *)job->xq_base[i] + (size_t)t * stride;
            if (fmt == LLM__X16_ACT + LLM__TYPE_Q4_K) llm__x16k_quantize_act(x, out, K);
            else if (fmt >= LLM__X16_ACT) llm__x16_quantize_act(fmt - LLM__X16_ACT, x, out, K);
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
// Rows [r0, r1) of x16 weight j (r0, r1 multiples of 16) for every token: token blocks sized to
// stay in L2, then tiles of 16 rows x 8 tokens.
static void llm__cpu_mm_x16(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const size_t stride = job->xq_stride[j], rec_bytes = llm__x16_group_bytes(w->type, K);
    const int64_t tb = LLM__MAX(8, LLM__MIN(job->ntok, (int64_t)((512u << 10) / stride) & ~(int64_t)7));
    const int tile = w->type == LLM__TYPE_Q4_K ? 4 : 8;   // tokens per kernel call
    const struct llm__tensor d = job->dst[j];
    for (int64_t t0 = 0; t0 < job->ntok; t0 += tb) {
        int64_t t1 = LLM__MIN(t0 + tb, job->ntok);
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *rec = (const uint8_t *)w->buf.data + (size_t)(r / 16) * rec_bytes;
            for (int64_t t = t0; t < t1; t += tile) {
                int nt = (int)LLM__MIN(tile, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                const uint8_t *act = (const uint8_t *)job->xq[j] + (size_t)t * stride;
                if (w->type == LLM__TYPE_Q4_K) llm__x16k_tile_avx512(nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                else llm__x16_tile_avx512(w->type, nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                if (bias)
                    for (int i = 0; i < nt; i++)
                        for (int k = 0; k < 16; k++) out[(size_t)i * (d.nb1 / sizeof(float)) + k] += bias[r + k];
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
    assert(n >= 1 && n <= LLM__CPU_MAX_MM);
    struct llm__cpu_mm_job job = {.c = c, .n = n, .dst = dst, .w = w, .bias = bias, .x = x, .ntok = x.ne1};
    // Activations: one copy per distinct dot type, F32 read in place.
    char *scratch = c->scratch;
    for (int j = 0; j < n; j++) {
        int vt = llm__type_info((uint32_t)w[j]->type)->vec_dot_type;
        if (w[j]->layout == LLM__LAYOUT_X16) vt = LLM__X16_ACT + w[j]->type;
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
    job.chunk_start[0] = 0;
    for (int j = 0; j < n; j++)
        job.chunk_start[j + 1] = job.chunk_start[j] + (w[j]->ne1 + job.rows_per_chunk - 1) / job.rows_per_chunk;
    llm__cursors_init(c, job.chunk_start[n]);
    llm__pool_run(c->pool, llm__cpu_mm_worker, &job);
}

static enum llm_status llm__cpu_reserve_shape(void *ctx, const struct llm__shape *sh, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    // matmul: up to LLM__CPU_MAX_MM quantized copies of the input (at most 3 bytes an element)
    size_t mm = (size_t)LLM__CPU_MAX_MM * (((size_t)sh->max_tokens * (size_t)sh->max_cols * 3 + 64 * 4) + 64);
    size_t attn = llm__attn_scratch(sh->n_head / sh->n_head_kv, sh->head_dim, sh->block_size) * sizeof(float) *
                  (size_t)c->pool->n_threads;
    return llm__cpu_reserve(c, LLM__MAX(mm, attn), e);
}

static const struct llm_backend_i llm__cpu_iface = {
    /* .name        = */ "cpu",
    /* .free        = */ llm__cpu_free,
    /* .buf_alloc   = */ llm__cpu_buf_alloc,
    /* .buf_free    = */ llm__cpu_buf_free,
    /* .weight_load = */ llm__cpu_weight_load,
    /* .weight_free = */ llm__cpu_weight_free,
    /* .upload      = */ llm__cpu_upload,
    /* .download    = */ llm__cpu_download,
    /* .reserve     = */ llm__cpu_reserve_shape,
    /* .begin_step  = */ llm__cpu_begin_step,
    /* .end_step    = */ llm__cpu_end_step,
    /* .sync        = */ NULL,
    /* .embed       = */ llm__cpu_embed,
    /* .rmsnorm     = */ llm__cpu_rmsnorm,
    /* .matmul      = */ llm__cpu_matmul,
    /* .rope        = */ llm__cpu_rope,
    /* .kv_store    = */ llm__cpu_kv_store,
    /* .attention   = */ llm__cpu_attention,
    /* .silu_mul    = */ llm__cpu_silu_mul,
    /* .add         = */ llm__cpu_add,
    /* .get_rows    = */ llm__cpu_get_rows,
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

// === the transformer ===
//
// Llama-family decoder: token embedding, n_layer x (RMSNorm, attention with RoPE and GQA,
// residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm, output projection. Qwen2 adds biases
// to q/k/v and rotates with NeoX pairs. The layer loop below is the only one; it calls backend
// ops and never touches memory itself.

enum llm__arch { LLM__ARCH_LLAMA, LLM__ARCH_QWEN2 };

struct llm__layer {
    struct llm__tensor attn_norm;    // (n_embd)
    struct llm__weight wq;           // (n_head*head_dim, n_embd): ne1 rows of ne0 inputs
    struct llm__weight wk;           // (n_head_kv*head_dim, n_embd)
    struct llm__weight wv;           // (n_head_kv*head_dim, n_embd)
    struct llm__tensor bq, bk, bv;   // qwen2 only: (n_head*head_dim), (n_head_kv*head_dim) x 2
    struct llm__weight wo;           // (n_embd, n_head*head_dim)
    struct llm__tensor ffn_norm;     // (n_embd)
    struct llm__weight w_gate;       // (n_ff, n_embd)
    struct llm__weight w_up;         // (n_ff, n_embd)
    struct llm__weight w_down;       // (n_embd, n_ff)
};

struct llm__model {
    struct llm__gguf gguf;
    enum llm__arch arch;
    char arch_name[32];
    char name[128];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float norm_eps;
    struct llm__rope rope;
    int64_t n_params;
    size_t weight_bytes;
    struct llm__weight tok_embd;     // (n_vocab, n_embd)
    struct llm__weight output;       // (n_vocab, n_embd); the same as tok_embd when tied
    bool tied_output;
    struct llm__tensor output_norm;  // (n_embd)
    struct llm__tensor rope_freqs;   // (n_rot/2) or no buffer
    struct llm__layer *layers;       // [n_layer]
    struct llm__buf small;           // every 1-D parameter (norms, biases, rope factors), f32
};

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

// Finds a tensor and checks its shape (ne0, ne1; ne1 = 0 for a vector) and that its type is usable.
static enum llm_status llm__model_tensor(const struct llm__model *m, const char *name, int64_t ne0, int64_t ne1,
                                         bool optional, const struct llm__gguf_tensor **out, struct llm__err *e) {
    const struct llm__gguf_tensor *t = llm__gguf_find_tensor(&m->gguf, name);
    *out = t;
    if (!t) return optional ? LLM_OK : llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor '%s'", name);
    int64_t want_ne1 = ne1 ? ne1 : 1;
    int64_t extra = 1;
    for (int d = 2; d < t->n_dims; d++) extra *= t->ne[d];
    if (t->ne[0] != ne0 || (t->n_dims > 1 ? t->ne[1] : 1) != want_ne1 || extra != 1)
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]",
                         name, (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1),
                         (long long)ne0, (long long)want_ne1);
    const struct llm__type_info *ti = llm__type_info(t->type);
    if (!ti || !ti->supported)
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "model: tensor '%s' has type %s, which llm.c does not support "
                         "(supported: f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K)",
                         name, ti ? ti->name : "unknown");
    return LLM_OK;
}

// Reads hyper-parameters and checks them; no tensors yet.
static enum llm_status llm__model_hparams(struct llm__model *m, struct llm__err *e) {
    struct llm__gguf_str s;
    enum llm_status st;
    if (!llm__gguf_get_str(&m->gguf, "general.architecture", &s, e)) return LLM_ERR_FORMAT;
    snprintf(m->arch_name, sizeof(m->arch_name), "%.*s", (int)LLM__MIN(s.len, 31), s.ptr);
    if (strcmp(m->arch_name, "llama") == 0) m->arch = LLM__ARCH_LLAMA;
    else if (strcmp(m->arch_name, "qwen2") == 0) m->arch = LLM__ARCH_QWEN2;
    else
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: architecture '%s' is not supported (supported: llama, qwen2)",
                         m->arch_name);
    if (llm__gguf_find_key(&m->gguf, "general.name") >= 0 && llm__gguf_get_str(&m->gguf, "general.name", &s, NULL))
        snprintf(m->name, sizeof(m->name), "%.*s", (int)LLM__MIN(s.len, 127), s.ptr);
    if ((st = llm__hparam_u32(m, "embedding_length", &m->n_embd, -1, 1, 65536, e))) return st;
    if ((st = llm__hparam_u32(m, "block_count", &m->n_layer, -1, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "feed_forward_length", &m->n_ff, -1, 1, 1 << 20, e))) return st;
    if ((st = llm__hparam_u32(m, "attention.head_count", &m->n_head, -1, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "attention.head_count_kv", &m->n_head_kv, m->n_head, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "context_length", &m->n_ctx_train, 2048, 1, 1u << 24, e))) return st;
    if (m->n_embd % m->n_head != 0 && llm__gguf_find_key(&m->gguf, "llama.attention.key_length") < 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: embedding length %d is not a multiple of the head count %d",
                         m->n_embd, m->n_head);
    if ((st = llm__hparam_u32(m, "attention.key_length", &m->head_dim, m->n_embd / m->n_head, 2, 1024, e))) return st;
    int vdim;
    if ((st = llm__hparam_u32(m, "attention.value_length", &vdim, m->head_dim, 2, 1024, e))) return st;
    if (vdim != m->head_dim)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: key length %d differs from value length %d", m->head_dim, vdim);
    if (m->n_head % m->n_head_kv != 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: head count %d is not a multiple of the KV head count %d",
                         m->n_head, m->n_head_kv);
    if ((st = llm__hparam_f32(m, "attention.layer_norm_rms_epsilon", &m->norm_eps, 1e-5f, e))) return st;
    if (!(m->norm_eps > 0.0f && m->norm_eps < 1.0f))
        return llm__fail(e, LLM_ERR_FORMAT, "model: RMS norm epsilon %g is out of range", (double)m->norm_eps);
    m->rope.neox = m->arch == LLM__ARCH_QWEN2;
    if ((st = llm__hparam_u32(m, "rope.dimension_count", &m->rope.n_rot, m->head_dim, 2, (uint32_t)m->head_dim, e)))
        return st;
    if (m->rope.n_rot % 2) return llm__fail(e, LLM_ERR_FORMAT, "model: odd rope dimension count %d", m->rope.n_rot);
    if ((st = llm__hparam_f32(m, "rope.freq_base", &m->rope.freq_base, 10000.0f, e))) return st;
    if (!(m->rope.freq_base > 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base must be > 1");
    m->rope.freq_scale = 1.0f;
    char key[128];
    llm__arch_key(m, "rope.scaling.type", key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) >= 0) {
        if (!llm__gguf_get_str(&m->gguf, key, &s, e)) return LLM_ERR_FORMAT;
        float factor = 1.0f;
        if ((st = llm__hparam_f32(m, "rope.scaling.factor", &factor, 1.0f, e))) return st;
        if (s.len == 6 && memcmp(s.ptr, "linear", 6) == 0) {
            if (!(factor >= 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope scaling factor %g", (double)factor);
            m->rope.freq_scale = 1.0f / factor;
        } else if (!(s.len == 4 && memcmp(s.ptr, "none", 4) == 0)) {
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: rope scaling '%.*s' is not supported (none, linear)",
                             (int)LLM__MIN(s.len, 32), s.ptr);
        }
    }
    const struct llm__gguf_tensor *te = llm__gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te) return llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1 << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor 'token_embd.weight' has a bad shape");
    m->n_vocab = (int)te->ne[1];
    return LLM_OK;
}

// Collects the 1-D parameters into one f32 backend buffer and the matrices into backend weights.
// progress: print a percentage to stderr while the weights are taken in (a terminal only).
static enum llm_status llm__model_load_tensors(struct llm__model *m, struct llm_backend *be, bool progress,
                                               struct llm__err *e) {
    enum llm_status st;
    const int E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    const bool bias = m->arch == LLM__ARCH_QWEN2;
    char name[96];
    m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers));
    if (!m->layers) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");

    // Pass 1: find and check every tensor, size the buffer of small parameters.
    struct vec { struct llm__tensor *dst; const struct llm__gguf_tensor *src; };
    size_t n_vecs = 0, cap_vecs = (size_t)m->n_layer * 5 + 2;
    struct vec *vecs = calloc(cap_vecs, sizeof(*vecs));
    if (!vecs) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    struct mat { struct llm__weight *dst; const struct llm__gguf_tensor *src; };
    size_t n_mats = 0;
    struct mat *mats = calloc((size_t)m->n_layer * 7 + 2, sizeof(*mats));
    if (!mats) { free(vecs); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    const struct llm__gguf_tensor *t;
#define LLM__VEC(field, nm, n, opt)                                                     \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, n, 0, opt, &t, e))) goto done;               \
        if (t) vecs[n_vecs++] = (struct vec){field, t};                                 \
    } while (0)
#define LLM__MAT(field, nm, cols, rows, opt)                                            \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, cols, rows, opt, &t, e))) goto done;         \
        if (t) mats[n_mats++] = (struct mat){field, t};                                 \
    } while (0)
    LLM__MAT(&m->tok_embd, "token_embd.weight", E, m->n_vocab, false);
    LLM__VEC(&m->output_norm, "output_norm.weight", E, false);
    LLM__MAT(&m->output, "output.weight", E, m->n_vocab, true);
    m->tied_output = t == NULL;
    LLM__VEC(&m->rope_freqs, "rope_freqs.weight", m->rope.n_rot / 2, true);
    for (int l = 0; l < m->n_layer; l++) {
        struct llm__layer *L = &m->layers[l];
#define LLM__NAME(s) (snprintf(name, sizeof(name), "blk.%d." s, l), name)
        LLM__VEC(&L->attn_norm, LLM__NAME("attn_norm.weight"), E, false);
        LLM__MAT(&L->wq, LLM__NAME("attn_q.weight"), E, Q, false);
        LLM__MAT(&L->wk, LLM__NAME("attn_k.weight"), E, KV, false);
        LLM__MAT(&L->wv, LLM__NAME("attn_v.weight"), E, KV, false);
        LLM__MAT(&L->wo, LLM__NAME("attn_output.weight"), Q, E, false);
        LLM__VEC(&L->ffn_norm, LLM__NAME("ffn_norm.weight"), E, false);
        LLM__MAT(&L->w_gate, LLM__NAME("ffn_gate.weight"), E, m->n_ff, false);
        LLM__MAT(&L->w_up, LLM__NAME("ffn_up.weight"), E, m->n_ff, false);
        LLM__MAT(&L->w_down, LLM__NAME("ffn_down.weight"), m->n_ff, E, false);
        if (bias) {
            LLM__VEC(&L->bq, LLM__NAME("attn_q.bias"), Q, false);
            LLM__VEC(&L->bk, LLM__NAME("attn_k.bias"), KV, false);
            LLM__VEC(&L->bv, LLM__NAME("attn_v.bias"), KV, false);
        }
#undef LLM__NAME
    }
#undef LLM__VEC
#undef LLM__MAT

    // Pass 2: the small parameters, converted to f32, in one buffer.
    size_t total = 0;
    for (size_t i = 0; i < n_vecs; i++) total += ((size_t)vecs[i].src->ne[0] * sizeof(float) + 63) & ~(size_t)63;
    if ((st = be->iface->buf_alloc(be->ctx, &m->small, total, e))) goto done;
    float *tmp = malloc((size_t)LLM__MAX(E, LLM__MAX(Q, m->n_ff)) * sizeof(float));
    if (!tmp) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
    size_t offs = 0;
    for (size_t i = 0; i < n_vecs; i++) {
        int64_t n = vecs[i].src->ne[0];
        llm__dequantize_row((int)vecs[i].src->type, vecs[i].src->data, tmp, n);
        for (int64_t j = 0; j < n; j++) {
            if (vecs[i].dst == &m->rope_freqs && !(tmp[j] > 0.0f)) {
                free(tmp);
                st = llm__fail(e, LLM_ERR_FORMAT, "model: rope_freqs.weight holds a factor that is not > 0");
                goto done;
            }
            if (!isfinite(tmp[j])) {
                free(tmp);
                st = llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' holds a value that is not finite",
                               vecs[i].src->name);
                goto done;
            }
        }
        be->iface->upload(be->ctx, &m->small, offs, tmp, (size_t)n * sizeof(float));
        *vecs[i].dst = llm__vec_view(&m->small, offs, n, 1);
        offs += ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    }
    free(tmp);
    m->rope.freq_factors = m->rope_freqs;   // (no buffer when the model has none)

    // Pass 3: matrices.
    size_t total_bytes = 0, done_bytes = 0;
    int shown = -1;
    for (size_t i = 0; i < n_mats; i++) total_bytes += mats[i].src->size;
    for (size_t i = 0; i < n_mats; i++) {
        const struct llm__gguf_tensor *src = mats[i].src;
        int64_t rows = src->n_dims > 1 ? src->ne[1] : 1;
        if ((st = be->iface->weight_load(be->ctx, mats[i].dst, (int)src->type, src->ne[0], rows, src->data, e)))
            goto done;
        if (!mats[i].dst->buf.borrowed && m->gguf.owns_map) {
            // The backend made its own copy: the file's pages of this tensor are not needed again
            // (dropping them keeps the resident memory at one copy of the weights).
            uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)src->data + pg - 1) & ~(pg - 1);
            uintptr_t hi = ((uintptr_t)src->data + src->size) & ~(pg - 1);
            if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        }
        done_bytes += src->size;
        int pct = (int)(100.0 * (double)done_bytes / (double)(total_bytes ? total_bytes : 1));
        if (progress && pct != shown) {
            fprintf(stderr, "\rllm: loading weights %3d%%", pct);
            shown = pct;
        }
    }
    if (progress) fprintf(stderr, "\r%40s\r", "");
    if (m->tied_output) m->output = m->tok_embd;
    m->n_params = 0;
    m->weight_bytes = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        int64_t n = 1;
        for (int d = 0; d < m->gguf.tensors[i].n_dims; d++) n *= m->gguf.tensors[i].ne[d];
        m->n_params += n;
        m->weight_bytes += m->gguf.tensors[i].size;
    }
    st = LLM_OK;
done:
    free(vecs);
    free(mats);
    return st;
}

// Bytes of weights one decode step reads: every matrix once, the embedding table only as the
// output projection of a tied model (a lookup reads one row). The roofline of decode speed is
// memory bandwidth divided by this.
static size_t llm__model_bytes_per_token(const struct llm__model *m) {
    size_t n = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        const struct llm__gguf_tensor *t = &m->gguf.tensors[i];
        if (t->n_dims < 2) continue;
        if (strcmp(t->name, "token_embd.weight") == 0 && !m->tied_output) continue;
        n += t->size;
    }
    return n;
}

static void llm__model_free(struct llm__model *m, struct llm_backend *be) {
    if (be->iface) {
        if (m->layers) {
            for (int l = 0; l < m->n_layer; l++) {
                struct llm__layer *L = &m->layers[l];
                struct llm__weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
                for (size_t i = 0; i < LLM__ARRAY_LEN(ws); i++)
                    if (ws[i]->buf.data || ws[i]->buf.handle) be->iface->weight_free(be->ctx, ws[i]);
            }
        }
        if (!m->tied_output && (m->output.buf.data || m->output.buf.handle)) be->iface->weight_free(be->ctx, &m->output);
        if (m->tok_embd.buf.data || m->tok_embd.buf.handle) be->iface->weight_free(be->ctx, &m->tok_embd);
        if (m->small.data || m->small.handle) be->iface->buf_free(be->ctx, &m->small);
    }
    free(m->layers);
    llm__gguf_close(&m->gguf);
    memset(m, 0, sizeof(*m));
}

// Activations of one step, views into one backend buffer sized for max_tokens rows.
struct llm__acts {
    struct llm__buf buf;
    int max_tokens, max_out;
    size_t off_x, off_xb, off_q, off_k, off_v, off_att, off_xb2, off_gate, off_up, off_xo, off_logits;
};

static enum llm_status llm__acts_init(struct llm__acts *a, const struct llm__model *m, struct llm_backend *be,
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
    LLM__ALLOC(off_gate, T * (size_t)m->n_ff);
    LLM__ALLOC(off_up, T * (size_t)m->n_ff);
    LLM__ALLOC(off_xo, (size_t)max_out * E);
    LLM__ALLOC(off_logits, (size_t)max_out * (size_t)m->n_vocab);
#undef LLM__ALLOC
    a->max_tokens = max_tokens;
    a->max_out = max_out;
    return be->iface->buf_alloc(be->ctx, &a->buf, off, e);
}

// Time spent per module of the model, when profiling (llm profile).
enum llm__prof_op { LLM__PROF_EMBED, LLM__PROF_NORM, LLM__PROF_QKV, LLM__PROF_ROPE, LLM__PROF_KV_STORE,
                    LLM__PROF_ATTN, LLM__PROF_O_PROJ, LLM__PROF_MLP_UP, LLM__PROF_SILU, LLM__PROF_MLP_DOWN,
                    LLM__PROF_ADD, LLM__PROF_LOGITS, LLM__PROF_N };
__attribute__((unused)) static const char *const llm__prof_names[LLM__PROF_N] = {
    "embedding", "rmsnorm", "attention q/k/v", "rope", "kv store", "attention", "attention output",
    "mlp gate/up", "mlp silu*up", "mlp down", "residual add", "logits"};
struct llm__prof { double t[LLM__PROF_N]; };

// Runs the model over one step; logits (n_out rows of n_vocab) are copied to host memory. With
// prof, each op is timed (a backend whose ops run asynchronously is synchronized after each).
static enum llm_status llm__forward(const struct llm__model *m, struct llm_backend *be, struct llm__acts *a,
                                    const struct llm__tensor *k_cache, const struct llm__tensor *v_cache,
                                    const struct llm__step *s, float *logits, struct llm__prof *prof,
                                    struct llm__err *e) {
    const struct llm_backend_i *B = be->iface;
    void *ctx = be->ctx;
#define LLM__OP(cat, call)                                            \
    do {                                                              \
        double t0_ = prof ? llm__now() : 0.0;                         \
        call;                                                         \
        if (prof) {                                                   \
            if (B->sync) B->sync(ctx);                                \
            prof->t[cat] += llm__now() - t0_;                         \
        }                                                             \
    } while (0)
    const int T = s->n_tokens, E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    assert(T >= 1 && T <= a->max_tokens && s->n_out <= a->max_out);
    struct llm__tensor x = llm__vec_view(&a->buf, a->off_x, E, T);
    struct llm__tensor xb = llm__vec_view(&a->buf, a->off_xb, E, T);
    struct llm__tensor q = llm__vec_view(&a->buf, a->off_q, Q, T);
    struct llm__tensor k = llm__vec_view(&a->buf, a->off_k, KV, T);
    struct llm__tensor v = llm__vec_view(&a->buf, a->off_v, KV, T);
    struct llm__tensor att = llm__vec_view(&a->buf, a->off_att, Q, T);
    struct llm__tensor xb2 = llm__vec_view(&a->buf, a->off_xb2, E, T);
    struct llm__tensor gate = llm__vec_view(&a->buf, a->off_gate, m->n_ff, T);
    struct llm__tensor up = llm__vec_view(&a->buf, a->off_up, m->n_ff, T);
    struct llm__tensor xo = llm__vec_view(&a->buf, a->off_xo, E, s->n_out);
    struct llm__tensor lg = llm__vec_view(&a->buf, a->off_logits, m->n_vocab, s->n_out);
    const struct llm__attn ap = {m->n_head, m->n_head_kv, m->head_dim, 1.0f / sqrtf((float)m->head_dim)};

    B->begin_step(ctx, s);
    LLM__OP(LLM__PROF_EMBED, B->embed(ctx, x, &m->tok_embd));
    for (int l = 0; l < m->n_layer; l++) {
        const struct llm__layer *L = &m->layers[l];
        LLM__OP(LLM__PROF_NORM, B->rmsnorm(ctx, xb, x, L->attn_norm, m->norm_eps));
        const struct llm__tensor qkv[3] = {q, k, v}, bqkv[3] = {L->bq, L->bk, L->bv};
        const struct llm__weight *wqkv[3] = {&L->wq, &L->wk, &L->wv};
        LLM__OP(LLM__PROF_QKV, B->matmul(ctx, 3, qkv, wqkv, bqkv, xb));
        LLM__OP(LLM__PROF_ROPE, B->rope(ctx, q, m->n_head, m->head_dim, &m->rope);
                                B->rope(ctx, k, m->n_head_kv, m->head_dim, &m->rope));
        LLM__OP(LLM__PROF_KV_STORE, B->kv_store(ctx, k_cache[l], v_cache[l], k, v));
        LLM__OP(LLM__PROF_ATTN, B->attention(ctx, att, q, k_cache[l], v_cache[l], &ap));
        const struct llm__weight *wo[1] = {&L->wo};
        LLM__OP(LLM__PROF_O_PROJ, B->matmul(ctx, 1, &xb2, wo, NULL, att));
        LLM__OP(LLM__PROF_ADD, B->add(ctx, x, x, xb2));
        LLM__OP(LLM__PROF_NORM, B->rmsnorm(ctx, xb, x, L->ffn_norm, m->norm_eps));
        const struct llm__tensor gu[2] = {gate, up};
        const struct llm__weight *wgu[2] = {&L->w_gate, &L->w_up};
        LLM__OP(LLM__PROF_MLP_UP, B->matmul(ctx, 2, gu, wgu, NULL, xb));
        LLM__OP(LLM__PROF_SILU, B->silu_mul(ctx, gate, gate, up));
        const struct llm__weight *wd[1] = {&L->w_down};
        LLM__OP(LLM__PROF_MLP_DOWN, B->matmul(ctx, 1, &xb2, wd, NULL, gate));
        LLM__OP(LLM__PROF_ADD, B->add(ctx, x, x, xb2));
    }
    if (s->n_out > 0) {
        LLM__OP(LLM__PROF_LOGITS, B->get_rows(ctx, xo, x);
                                  B->rmsnorm(ctx, xo, xo, m->output_norm, m->norm_eps);
                                  const struct llm__weight *wout[1] = {&m->output};
                                  B->matmul(ctx, 1, &lg, wout, NULL, xo));
    }
#undef LLM__OP
    enum llm_status st = B->end_step(ctx, e);
    if (st == LLM_OK && s->n_out > 0)
        B->download(ctx, &a->buf, a->off_logits, logits, (size_t)s->n_out * (size_t)m->n_vocab * sizeof(float));
    return st;
}

// === KV cache blocks ===
//
// The K and V caches are pools of fixed-size blocks: [n_layer][n_blocks * block_size][n_head_kv *
// head_dim] values each, in half precision (or f32 on request). A sequence owns a list of blocks (its block table) and grows it one block
// at a time; its token at position p lives in slot blocks[p / block_size] * block_size + p % block_size.

struct llm__kv {
    int type;                      // LLM__TYPE_F16 (default) or LLM__TYPE_F32
    int block_size, n_blocks;
    size_t row_bytes;              // one token of one layer: n_head_kv * head_dim values
    struct llm__buf k, v;
    struct llm__tensor *k_layer;   // [n_layer] views of k
    struct llm__tensor *v_layer;
    int32_t *free_ids;             // stack of free block ids
    int n_free;
};

static enum llm_status llm__kv_init(struct llm__kv *kv, const struct llm__model *m, struct llm_backend *be,
                                    int type, int block_size, size_t bytes, struct llm__err *e) {
    enum llm_status st;
    kv->type = type;
    kv->block_size = block_size;
    kv->row_bytes = llm__row_bytes(type, (int64_t)m->n_head_kv * m->head_dim);
    size_t per_block = kv->row_bytes * (size_t)block_size * (size_t)m->n_layer * 2;
    size_t nb = bytes / per_block;
    if (nb < 1)
        return llm__fail(e, LLM_ERR_NOMEM, "KV cache memory of %zu bytes holds no block of %d tokens (%zu bytes)",
                         bytes, block_size, per_block);
    if (nb > (size_t)INT32_MAX / (size_t)block_size) nb = (size_t)INT32_MAX / (size_t)block_size;
    kv->n_blocks = (int)nb;
    size_t layer = kv->row_bytes * (size_t)block_size * nb;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->k, layer * (size_t)m->n_layer, e))) return st;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->v, layer * (size_t)m->n_layer, e))) return st;
    kv->k_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    kv->v_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    kv->free_ids = malloc(nb * sizeof(int32_t));
    if (!kv->k_layer || !kv->v_layer || !kv->free_ids) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layer; l++) {
        int64_t rows = (int64_t)nb * block_size, cols = (int64_t)m->n_head_kv * m->head_dim;
        kv->k_layer[l] = (struct llm__tensor){&kv->k, layer * (size_t)l, type, cols, rows, kv->row_bytes};
        kv->v_layer[l] = (struct llm__tensor){&kv->v, layer * (size_t)l, type, cols, rows, kv->row_bytes};
    }
    // Hand out low ids first.
    kv->n_free = (int)nb;
    for (int i = 0; i < (int)nb; i++) kv->free_ids[i] = (int32_t)(nb - 1 - (size_t)i);
    return LLM_OK;
}

static void llm__kv_free(struct llm__kv *kv, struct llm_backend *be) {
    if (be->iface) {
        if (kv->k.data || kv->k.handle) be->iface->buf_free(be->ctx, &kv->k);
        if (kv->v.data || kv->v.handle) be->iface->buf_free(be->ctx, &kv->v);
    }
    free(kv->k_layer);
    free(kv->v_layer);
    free(kv->free_ids);
    memset(kv, 0, sizeof(*kv));
}

struct llm__seq {
    bool used;
    int len;                 // tokens in the cache
    int32_t *blocks;         // block table
    int n_blocks, cap_blocks;
};

// Makes room for n more tokens: capacity check first, then allocation, so a failure changes nothing.
static enum llm_status llm__seq_reserve(struct llm__kv *kv, struct llm__seq *sq, int n, struct llm__err *e) {
    int need = (sq->len + n + kv->block_size - 1) / kv->block_size - sq->n_blocks;
    if (need <= 0) return LLM_OK;
    if (need > kv->n_free)
        return llm__fail(e, LLM_ERR_CONTEXT, "KV cache is full: %d more blocks of %d tokens needed, %d free of %d",
                         need, kv->block_size, kv->n_free, kv->n_blocks);
    if (sq->n_blocks + need > sq->cap_blocks) {
        int cap = LLM__MAX(sq->n_blocks + need, 2 * sq->cap_blocks);
        int32_t *b = realloc(sq->blocks, (size_t)cap * sizeof(int32_t));
        if (!b) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        sq->blocks = b;
        sq->cap_blocks = cap;
    }
    for (int i = 0; i < need; i++) sq->blocks[sq->n_blocks++] = kv->free_ids[--kv->n_free];
    return LLM_OK;
}

static void llm__seq_release(struct llm__kv *kv, struct llm__seq *sq) {
    for (int i = sq->n_blocks - 1; i >= 0; i--) kv->free_ids[kv->n_free++] = sq->blocks[i];
    free(sq->blocks);
    memset(sq, 0, sizeof(*sq));
}

// === sampler ===

struct llm_sampler {
    struct llm_sampling_params p;
    int n_vocab;
    uint64_t rng[4];          // xoshiro256**
    float *probs;             // [n_vocab]
    int32_t *idx;             // [n_vocab]
};

static uint64_t llm__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t llm__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t llm__xoshiro(uint64_t s[4]) {
    uint64_t r = llm__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = llm__rotl(s[3], 45);
    return r;
}

static double llm__rng_uniform(uint64_t s[4]) {   // [0, 1)
    return (double)(llm__xoshiro(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct llm_sampling_params llm_sampling_params_default(void) {
    struct llm_sampling_params p = {0};
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.seed = 0;
    return p;
}

llm_sampler *llm_sampler_create(const struct llm_sampling_params *params, int n_vocab) {
    if (!params || n_vocab < 1) return NULL;
    llm_sampler *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->p = *params;
    s->n_vocab = n_vocab;
    s->probs = malloc((size_t)n_vocab * sizeof(float));
    s->idx = malloc((size_t)n_vocab * sizeof(int32_t));
    if (!s->probs || !s->idx) { llm_sampler_free(s); return NULL; }
    uint64_t seed = params->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = llm__splitmix64(&seed);
    return s;
}

void llm_sampler_free(llm_sampler *s) {
    if (!s) return;
    free(s->probs);
    free(s->idx);
    free(s);
}

static int32_t llm__argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

// Sorts idx[0..n) by descending key[idx[i]], ties by ascending id.
static void llm__sort_desc(int32_t *idx, int n, const float *key) {
    // Heap sort: no recursion, no allocation, O(n log n) worst case.
#define LLM__BEFORE(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) > (b)))   // a sorts after b
    for (int start = n / 2 - 1; start >= 0; start--) {
        for (int r = start;;) {
            int c = 2 * r + 1;
            if (c >= n) break;
            if (c + 1 < n && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            int32_t t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
    for (int end = n - 1; end > 0; end--) {
        int32_t t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        for (int r = 0;;) {
            int c = 2 * r + 1;
            if (c >= end) break;
            if (c + 1 < end && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
#undef LLM__BEFORE
}

// Keeps the k best of idx[0..n) in idx[0..k), sorted best first.
static int llm__top_k(int32_t *idx, int n, int k, const float *key) {
    if (k <= 0 || k >= n) { llm__sort_desc(idx, n, key); return n; }
    // One pass with a small sorted buffer when k is small relative to n.
    int m = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = idx[i];
        if (m == k && !(key[id] > key[idx[k - 1]])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && key[idx[j - 1]] < key[id]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = id;
    }
    return m;
}

int32_t llm_sampler_sample(llm_sampler *s, const float *logits) {
    const int n = s->n_vocab;
    if (!(s->p.temperature > 0.0f)) return llm__argmax(logits, n);
    for (int i = 0; i < n; i++) s->idx[i] = i;
    int m = n;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        m = llm__top_k(s->idx, n, s->p.top_k, logits);
    } else if (s->p.top_p < 1.0f) {
        llm__sort_desc(s->idx, n, logits);
    }
    float mx = logits[s->idx[0]];
    if (m == n && !(s->p.top_p < 1.0f)) mx = logits[llm__argmax(logits, n)];
    double sum = 0.0;
    for (int i = 0; i < m; i++) {
        float p = expf((logits[s->idx[i]] - mx) / s->p.temperature);
        s->probs[i] = p;
        sum += p;
    }
    if (s->p.top_p < 1.0f) {
        double cum = 0.0, lim = (double)s->p.top_p * sum;
        int keep = m;
        for (int i = 0; i < m; i++) {
            cum += s->probs[i];
            if (cum >= lim) { keep = i + 1; break; }
        }
        m = keep;
        sum = cum;
    }
    double r = llm__rng_uniform(s->rng) * sum, acc = 0.0;
    for (int i = 0; i < m; i++) {
        acc += s->probs[i];
        if (r < acc) return s->idx[i];
    }
    return s->idx[m - 1];
}

void llm_top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out) {
    if (k <= 0 || n_vocab <= 0) return;
    k = LLM__MIN(k, n_vocab);
    float mx = logits[llm__argmax(logits, n_vocab)];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)mx);
    double lse = (double)mx + log(sum);
    // best k by insertion into a sorted list (k is small)
    int m = 0;
    for (int i = 0; i < n_vocab; i++) {
        if (m == k && !(logits[i] > logits[out[k - 1].id])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && logits[out[j - 1].id] < logits[i]) { out[j] = out[j - 1]; j--; }
        out[j].id = i;
    }
    for (int i = 0; i < k; i++) out[i].logprob = (float)((double)logits[out[i].id] - lse);
}

// === tokenizer ===
//
// The vocabulary of the GGUF file: token texts, scores and types, special ids. Texts are looked
// up through an open-addressing hash table. SentencePiece ("llama") vocabularies encode as
// llama.cpp does: spaces become U+2581, an optional leading space, then the highest-scoring
// adjacent pair of symbols is merged while the merge is a token; what remains unknown falls back
// to byte tokens <0xNN>. Byte-level BPE ("gpt2") vocabularies decode here; their encoder is
// not written yet.

enum llm__vocab_type { LLM__VOCAB_SPM = 1, LLM__VOCAB_BPE = 2 };
enum llm__tok_attr { LLM__TOK_NORMAL = 1, LLM__TOK_UNKNOWN = 2, LLM__TOK_CONTROL = 3, LLM__TOK_USER = 4,
                     LLM__TOK_UNUSED = 5, LLM__TOK_BYTE = 6 };

struct llm__vocab {
    enum llm__vocab_type type;
    int n;
    const struct llm__gguf_str *text;   // [n] into the mapped file
    float *scores;                      // [n]
    uint8_t *attr;                      // [n] enum llm__tok_attr
    uint8_t *eog;                       // [n] ends a generation
    int32_t bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix;
    uint32_t *ht;                       // id + 1, 0 = empty
    uint32_t ht_mask;
    int32_t byte_tok[256];              // SPM: id of <0xNN>
    uint8_t bpe_byte[324];              // BPE: code point -> byte (GPT-2's byte-to-unicode, inverted)
};

static uint64_t llm__hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;   // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static int32_t llm__vocab_find(const struct llm__vocab *v, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)llm__hash(s, n) & v->ht_mask;; i = (i + 1) & v->ht_mask) {
        uint32_t id = v->ht[i];
        if (!id) return -1;
        const struct llm__gguf_str *t = &v->text[id - 1];
        if (t->len == n && memcmp(t->ptr, s, n) == 0) return (int32_t)(id - 1);
    }
}

static void llm__vocab_free(struct llm__vocab *v) {
    free(v->scores);
    free(v->attr);
    free(v->eog);
    free(v->ht);
    memset(v, 0, sizeof(*v));
}

static bool llm__gguf_opt_id(const struct llm__gguf *g, const char *key, int32_t *id, int n, struct llm__err *e,
                             bool *bad) {
    uint32_t u;
    if (llm__gguf_find_key(g, key) < 0) return false;
    if (!llm__gguf_get_u32(g, key, &u, e)) { *bad = true; return false; }
    if (u >= (uint32_t)n) {   // files carry -1 style values for "none" too: treat out of range as absent
        return false;
    }
    *id = (int32_t)u;
    return true;
}

static enum llm_status llm__vocab_load(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                       struct llm__err *e) {
    struct llm__gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *data;
    memset(v, 0, sizeof(*v));
    v->bos = v->eos = v->unk = -1;
    if (!llm__gguf_get_str(g, "tokenizer.ggml.model", &s, e)) return LLM_ERR_FORMAT;
    if (s.len == 5 && memcmp(s.ptr, "llama", 5) == 0) v->type = LLM__VOCAB_SPM;
    else if (s.len == 4 && memcmp(s.ptr, "gpt2", 4) == 0) v->type = LLM__VOCAB_BPE;
    else
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer: model '%.*s' is not supported (llama, gpt2)",
                         (int)LLM__MIN(s.len, 32), s.ptr);
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, e)) return LLM_ERR_FORMAT;
    if (et != 8 /* string */ || n < 1 || n > (1u << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens must be a non-empty string array");
    if (n_vocab_model > 0 && (int64_t)n != n_vocab_model)
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: %llu tokens, but the embedding has %d rows",
                         (unsigned long long)n, n_vocab_model);
    v->n = (int)n;
    v->text = data;
    v->scores = calloc(n, sizeof(float));
    v->attr = malloc(n);
    v->eog = calloc(n, 1);
    uint32_t cap = 1;
    while (cap < 2 * n) cap <<= 1;
    v->ht = calloc(cap, sizeof(uint32_t));
    v->ht_mask = cap - 1;
    if (!v->scores || !v->attr || !v->eog || !v->ht) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memset(v->attr, LLM__TOK_NORMAL, n);
    if (llm__gguf_find_key(g, "tokenizer.ggml.scores") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if (et != 6 /* f32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores must be %d f32 values", v->n);
        memcpy(v->scores, data, n * sizeof(float));
    }
    if (llm__gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if ((et != 5 && et != 4) /* i32, u32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type must be %d i32 values", v->n);
        for (int i = 0; i < v->n; i++) {
            int32_t t;
            memcpy(&t, (const char *)data + 4 * (size_t)i, 4);
            v->attr[i] = (uint8_t)(t >= 1 && t <= 6 ? t : LLM__TOK_NORMAL);
        }
    }
    for (int i = 0; i < v->n; i++) {
        const struct llm__gguf_str *t = &v->text[i];
        uint32_t h = (uint32_t)llm__hash(t->ptr, t->len) & v->ht_mask;
        bool dup = false;
        for (; v->ht[h]; h = (h + 1) & v->ht_mask) {
            const struct llm__gguf_str *o = &v->text[v->ht[h] - 1];
            if (o->len == t->len && memcmp(o->ptr, t->ptr, t->len) == 0) { dup = true; break; }
        }
        if (!dup) v->ht[h] = (uint32_t)i + 1;   // the first of duplicates wins, as in llama.cpp
    }
    bool bad = false;
    llm__gguf_opt_id(g, "tokenizer.ggml.bos_token_id", &v->bos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eos_token_id", &v->eos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", &v->unk, v->n, e, &bad);
    int32_t eot = -1, eom = -1;
    llm__gguf_opt_id(g, "tokenizer.ggml.eot_token_id", &eot, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eom_token_id", &eom, v->n, e, &bad);
    if (bad) return LLM_ERR_FORMAT;
    v->add_bos = v->type == LLM__VOCAB_SPM;
    v->add_space_prefix = v->type == LLM__VOCAB_SPM;
    bool b;
    if (llm__gguf_find_key(g, "tokenizer.ggml.add_bos_token") >= 0) {
        if (!llm__gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, e)) return LLM_ERR_FORMAT;
        v->add_bos = b;
    }
    if (llm__gguf_find_key(g, "tokenizer.ggml.add_eos_token") >= 0) {
        if (!llm__gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b, e)) return LLM_ERR_FORMAT;
        v->add_eos = b;
    }
    if (llm__gguf_find_key(g, "tokenizer.ggml.add_space_prefix") >= 0) {
        if (!llm__gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, e)) return LLM_ERR_FORMAT;
        v->add_space_prefix = b;
    }
    if (v->add_bos && v->bos < 0) v->add_bos = false;
    // End of generation: EOS, EOT, EOM, and the end-of-turn control tokens of common chat formats.
    static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                            "<|endoftext|>", "<|eom_id|>", "<EOT>", "<|end_of_text|>"};
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (eot >= 0) v->eog[eot] = 1;
    if (eom >= 0) v->eog[eom] = 1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(eog_texts); i++) {
        int32_t id = llm__vocab_find(v, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0 && v->attr[id] == LLM__TOK_CONTROL) v->eog[id] = 1;
    }
    if (v->type == LLM__VOCAB_SPM) {
        for (int i = 0; i < 256; i++) {
            char buf[8];
            snprintf(buf, sizeof(buf), "<0x%02X>", i);
            v->byte_tok[i] = llm__vocab_find(v, buf, 6);
        }
    } else {
        // GPT-2 maps the 188 printable bytes to themselves and the other 68 to U+0100 onwards.
        memset(v->bpe_byte, 0, sizeof(v->bpe_byte));
        int next = 256;
        for (int c = 0; c < 256; c++) {
            bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174);
            v->bpe_byte[printable ? c : next++] = (uint8_t)c;
        }
    }
    return LLM_OK;
}

// Length of the UTF-8 sequence a lead byte starts, as llama.cpp counts it (a stray continuation
// byte counts as one).
static size_t llm__utf8_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

struct llm__spm_sym { int prev, next; const char *text; int n; };
struct llm__spm_bigram { int left, right; float score; int size; };

static bool llm__bigram_before(const struct llm__spm_bigram *a, const struct llm__spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct llm__spm {
    const struct llm__vocab *v;
    struct llm__spm_sym *sym;
    struct llm__spm_bigram *heap;
    int n_heap;
};

static void llm__spm_push(struct llm__spm *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const char *text = s->sym[left].text;
    int n = s->sym[left].n + s->sym[right].n;
    int32_t id = llm__vocab_find(s->v, text, (size_t)n);
    if (id < 0) return;
    struct llm__spm_bigram b = {left, right, s->v->scores[id], n};
    int i = s->n_heap++;
    while (i > 0 && llm__bigram_before(&b, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = b;
}

static struct llm__spm_bigram llm__spm_pop(struct llm__spm *s) {
    struct llm__spm_bigram top = s->heap[0], last = s->heap[--s->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->n_heap) break;
        if (c + 1 < s->n_heap && llm__bigram_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!llm__bigram_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n_heap > 0) s->heap[i] = last;
    return top;
}

// Token ids appended through a bounded writer that still counts what did not fit.
struct llm__tokbuf { int32_t *ids; int cap, n; };
static void llm__tokbuf_push(struct llm__tokbuf *b, int32_t id) {
    if (b->n < b->cap) b->ids[b->n] = id;
    b->n++;
}

// Encodes already escaped text (spaces as U+2581).
static bool llm__spm_encode(const struct llm__vocab *v, const char *text, size_t len, struct llm__tokbuf *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX / 4) return false;
    struct llm__spm s = {v, malloc(len * sizeof(struct llm__spm_sym)), malloc(3 * len * sizeof(struct llm__spm_bigram)), 0};
    if (!s.sym || !s.heap) { free(s.sym); free(s.heap); return false; }
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = LLM__MIN(llm__utf8_len((uint8_t)text[off]), len - off);
        s.sym[n] = (struct llm__spm_sym){n - 1, off + l == len ? -1 : n + 1, text + off, (int)l};
        off += l;
    }
    for (int i = 1; i < n; i++) llm__spm_push(&s, i - 1, i);
    while (s.n_heap > 0) {
        struct llm__spm_bigram b = llm__spm_pop(&s);
        struct llm__spm_sym *l = &s.sym[b.left], *r = &s.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   // stale
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        llm__spm_push(&s, l->prev, b.left);
        llm__spm_push(&s, b.left, l->next);
    }
    for (int i = 0; i != -1; i = s.sym[i].next) {
        int32_t id = llm__vocab_find(v, s.sym[i].text, (size_t)s.sym[i].n);
        if (id >= 0) { llm__tokbuf_push(out, id); continue; }
        for (int j = 0; j < s.sym[i].n; j++) {
            int32_t bt = v->byte_tok[(uint8_t)s.sym[i].text[j]];
            llm__tokbuf_push(out, bt >= 0 ? bt : v->unk);
        }
    }
    free(s.sym);
    free(s.heap);
    return true;
}

// Returns the number of tokens, or -1 (message in e).
static int llm__tokenize(const struct llm__vocab *v, const char *text, size_t len, bool add_bos, int32_t *ids,
                         int cap, struct llm__err *e) {
    struct llm__tokbuf out = {ids, cap, 0};
    if (add_bos && v->add_bos) llm__tokbuf_push(&out, v->bos);
    if (v->type != LLM__VOCAB_SPM) {
        llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer: byte-level BPE (gpt2) encoding is not implemented yet; "
                                          "pass token ids instead");
        return -1;
    }
    if (len > 0) {
        // escape: optional leading space, every ' ' becomes U+2581 (3 bytes)
        size_t cap_esc = 3 * len + 3, n = 0;
        char *esc = malloc(cap_esc);
        if (!esc) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
        if (v->add_space_prefix) { memcpy(esc, "\xe2\x96\x81", 3); n = 3; }
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') { memcpy(esc + n, "\xe2\x96\x81", 3); n += 3; }
            else esc[n++] = text[i];
        }
        bool ok = llm__spm_encode(v, esc, n, &out);
        free(esc);
        if (!ok) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
    }
    if (add_bos && v->add_eos && v->eos >= 0) llm__tokbuf_push(&out, v->eos);
    return out.n;
}

// Bytes of a token (without special tokens' text). Returns the full length; writes at most size.
static int llm__token_piece(const struct llm__vocab *v, int32_t id, char *buf, size_t size) {
    if (id < 0 || id >= v->n) return -1;
    const struct llm__gguf_str *t = &v->text[id];
    size_t n = 0;
#define LLM__PUT(c) do { if (n < size) buf[n] = (char)(c); n++; } while (0)
    switch (v->attr[id]) {
    case LLM__TOK_CONTROL:
    case LLM__TOK_UNUSED:
        break;
    case LLM__TOK_USER:
        for (size_t i = 0; i < t->len; i++) LLM__PUT(t->ptr[i]);
        break;
    case LLM__TOK_BYTE:
        if (v->type == LLM__VOCAB_SPM && t->len == 6) {
            unsigned b;
            char hex[3] = {t->ptr[3], t->ptr[4], 0};
            if (sscanf(hex, "%2x", &b) == 1) LLM__PUT(b);
            break;
        }
        /* fallthrough */
    case LLM__TOK_UNKNOWN:
        if (v->type == LLM__VOCAB_SPM && v->attr[id] == LLM__TOK_UNKNOWN) {
            const char *u = "\xe2\x96\x85";
            for (int i = 0; i < 3; i++) LLM__PUT(u[i]);
            break;
        }
        /* fallthrough */
    default:
        if (v->type == LLM__VOCAB_SPM) {
            for (size_t i = 0; i < t->len; i++) {
                if (i + 2 < t->len && memcmp(t->ptr + i, "\xe2\x96\x81", 3) == 0) { LLM__PUT(' '); i += 2; }
                else LLM__PUT(t->ptr[i]);
            }
        } else {
            // each code point of the text stands for one byte
            for (size_t i = 0; i < t->len;) {
                uint8_t c = (uint8_t)t->ptr[i];
                uint32_t cp = c;
                size_t l = 1;
                if (c >= 0xC0 && c < 0xE0 && i + 1 < t->len) { cp = ((c & 0x1Fu) << 6) | (t->ptr[i + 1] & 0x3F); l = 2; }
                else if (c >= 0xE0 && c < 0xF0 && i + 2 < t->len) {
                    cp = ((c & 0x0Fu) << 12) | ((t->ptr[i + 1] & 0x3Fu) << 6) | (t->ptr[i + 2] & 0x3F);
                    l = 3;
                }
                if (cp < LLM__ARRAY_LEN(v->bpe_byte)) LLM__PUT(v->bpe_byte[cp]);
                else for (size_t k = 0; k < l; k++) LLM__PUT(t->ptr[i + k]);
                i += l;
            }
        }
        break;
    }
#undef LLM__PUT
    return (int)n;
}

// === public API ===

struct llm_engine {
    struct llm_engine_params params;
    struct llm__err err;
    struct llm__model model;
    struct llm__vocab vocab;
    struct llm_backend be;
    struct llm__kv kv;
    struct llm__acts acts;
    int max_model_len;
    struct llm__seq *seqs;
    int n_seqs;
    // host arrays of one step, sized for acts.max_tokens
    int32_t *st_tokens, *st_pos, *st_seq, *st_slot, *st_out;
    struct llm__prof *prof;   // per-module times when profiling, else NULL
};

const char *llm_status_str(enum llm_status status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_ERR_INVALID_ARG: return "invalid argument";
    case LLM_ERR_IO: return "i/o error";
    case LLM_ERR_FORMAT: return "bad model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_NOMEM: return "out of memory";
    case LLM_ERR_CONTEXT: return "context full";
    case LLM_ERR_BACKEND: return "backend error";
    }
    return "unknown status";
}

struct llm_engine_params llm_engine_params_default(void) {
    struct llm_engine_params p = {0};
    p.backend = "cpu";
    p.block_size = 16;
    p.kv_cache_dtype = "f16";
    return p;
}

static int llm__online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

// Tokens per step: prompts longer than this are evaluated in several steps.
#define LLM__MAX_STEP_TOKENS 512
// Logit rows per step (each is n_vocab floats).
#define LLM__MAX_STEP_OUT 64

llm_engine *llm_engine_create(const struct llm_engine_params *params, char *err, size_t err_size) {
    struct llm__err e = {{0}};
    enum llm_status st = LLM_OK;
    llm_engine *E = calloc(1, sizeof(*E));
    if (!E) { if (err && err_size) snprintf(err, err_size, "out of memory"); return NULL; }
    struct llm_engine_params p = params ? *params : llm_engine_params_default();
    if (!p.backend) p.backend = "cpu";
    if (!p.block_size) p.block_size = 16;
    if (!p.kv_cache_dtype) p.kv_cache_dtype = "f16";
    if (p.n_threads <= 0) p.n_threads = llm__online_cpus();
    E->params = p;
    if (!p.model_path) { st = llm__fail(&e, LLM_ERR_INVALID_ARG, "no model file given"); goto fail; }
    if (p.block_size != 8 && p.block_size != 16 && p.block_size != 32) {
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "block size must be 8, 16 or 32 (got %d)", p.block_size);
        goto fail;
    }
    if (strcmp(p.kv_cache_dtype, "f16") != 0 && strcmp(p.kv_cache_dtype, "f32") != 0) {
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "KV cache type must be f16 or f32 (got '%s')", p.kv_cache_dtype);
        goto fail;
    }
    if (p.n_threads > 512) { st = llm__fail(&e, LLM_ERR_INVALID_ARG, "too many threads (%d)", p.n_threads); goto fail; }
    if (p.max_model_len < 0) { st = llm__fail(&e, LLM_ERR_INVALID_ARG, "negative max_model_len"); goto fail; }
    if (strcmp(p.backend, "cpu") != 0) {
        st = llm__fail(&e, LLM_ERR_UNSUPPORTED, "backend '%s' is not available in this build (available: cpu)", p.backend);
        goto fail;
    }
    if ((st = llm__gguf_open(&E->model.gguf, p.model_path, &e))) goto fail;
    if ((st = llm__model_hparams(&E->model, &e))) goto fail;
    if ((st = llm__vocab_load(&E->vocab, &E->model.gguf, E->model.n_vocab, &e))) goto fail;
    if ((st = llm__cpu_backend_new(&E->be, p.n_threads, -1, &e))) goto fail;
    if ((st = llm__model_load_tensors(&E->model, &E->be, p.verbose > 0 && isatty(2), &e))) goto fail;

    const struct llm__model *m = &E->model;
    E->max_model_len = p.max_model_len ? p.max_model_len : LLM__MIN(m->n_ctx_train, 4096);
    size_t kv_bytes = p.kv_cache_bytes;
    int kv_type = strcmp(p.kv_cache_dtype, "f32") == 0 ? LLM__TYPE_F32 : LLM__TYPE_F16;
    size_t per_token = 2 * (size_t)m->n_layer * llm__row_bytes(kv_type, (int64_t)m->n_head_kv * m->head_dim);
    if (!kv_bytes) kv_bytes = per_token * (size_t)((E->max_model_len + p.block_size - 1) / p.block_size * p.block_size);
    if ((st = llm__kv_init(&E->kv, m, &E->be, kv_type, p.block_size, kv_bytes, &e))) goto fail;
    if ((st = llm__acts_init(&E->acts, m, &E->be, LLM__MAX_STEP_TOKENS, LLM__MAX_STEP_OUT, &e))) goto fail;
    struct llm__shape shape = {LLM__MAX_STEP_TOKENS, LLM__MAX(m->n_embd, LLM__MAX(m->n_ff, m->n_head * m->head_dim)),
                               m->n_head, m->n_head_kv, m->head_dim, p.block_size};
    if ((st = E->be.iface->reserve(E->be.ctx, &shape, &e))) goto fail;
    size_t T = LLM__MAX_STEP_TOKENS;
    E->st_tokens = malloc(T * sizeof(int32_t));
    E->st_pos = malloc(T * sizeof(int32_t));
    E->st_seq = malloc(T * sizeof(int32_t));
    E->st_slot = malloc(T * sizeof(int32_t));
    E->st_out = malloc(T * sizeof(int32_t));
    if (!E->st_tokens || !E->st_pos || !E->st_seq || !E->st_slot || !E->st_out) {
        st = llm__fail(&e, LLM_ERR_NOMEM, "out of memory");
        goto fail;
    }
    return E;
fail:
    if (err && err_size) snprintf(err, err_size, "%s", e.msg[0] ? e.msg : llm_status_str(st));
    llm_engine_free(E);
    return NULL;
}

void llm_engine_free(llm_engine *E) {
    if (!E) return;
    for (int i = 0; i < E->n_seqs; i++) if (E->seqs[i].used) llm__seq_release(&E->kv, &E->seqs[i]);
    free(E->seqs);
    if (E->be.iface && (E->acts.buf.data || E->acts.buf.handle)) E->be.iface->buf_free(E->be.ctx, &E->acts.buf);
    llm__kv_free(&E->kv, &E->be);
    llm__model_free(&E->model, &E->be);
    llm__vocab_free(&E->vocab);
    if (E->be.iface) E->be.iface->free(E->be.ctx);
    free(E->st_tokens);
    free(E->st_pos);
    free(E->st_seq);
    free(E->st_slot);
    free(E->st_out);
    free(E);
}

const char *llm_last_error(const llm_engine *E) {
    return E ? E->err.msg : "no engine";
}

void llm_model_info(const llm_engine *E, struct llm_model_info *info) {
    const struct llm__model *m = &E->model;
    memset(info, 0, sizeof(*info));
    info->arch = m->arch_name;
    info->name = m->name;
    info->n_vocab = m->n_vocab;
    info->n_embd = m->n_embd;
    info->n_layer = m->n_layer;
    info->n_head = m->n_head;
    info->n_head_kv = m->n_head_kv;
    info->head_dim = m->head_dim;
    info->n_ff = m->n_ff;
    info->n_ctx_train = m->n_ctx_train;
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    info->bytes_per_token = llm__model_bytes_per_token(m);
    info->kv_tokens = E->kv.n_blocks * E->kv.block_size;
    info->bos_id = E->vocab.bos;
    info->eos_id = E->vocab.eos;
    info->add_bos = E->vocab.add_bos;
}

int llm_tokenize(llm_engine *E, const char *text, size_t len, int add_bos, int32_t *tokens, int max_tokens) {
    if (!text && len) { llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: NULL text"); return -1; }
    if (max_tokens < 0 || (!tokens && max_tokens > 0)) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: bad output buffer");
        return -1;
    }
    return llm__tokenize(&E->vocab, text, len, add_bos != 0, tokens, max_tokens, &E->err);
}

int llm_token_to_piece(const llm_engine *E, int32_t token, char *buf, size_t size) {
    return llm__token_piece(&E->vocab, token, buf, size);
}

int llm_token_is_eog(const llm_engine *E, int32_t token) {
    return token >= 0 && token < E->vocab.n && E->vocab.eog[token];
}

int llm_seq_new(llm_engine *E) {
    int i = 0;
    while (i < E->n_seqs && E->seqs[i].used) i++;
    if (i == E->n_seqs) {
        struct llm__seq *s = realloc(E->seqs, (size_t)(E->n_seqs + 1) * sizeof(*s));
        if (!s) { llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"); return -1; }
        E->seqs = s;
        E->n_seqs++;
    }
    memset(&E->seqs[i], 0, sizeof(E->seqs[i]));
    E->seqs[i].used = true;
    return i;
}

static struct llm__seq *llm__seq_get(const llm_engine *E, int seq) {
    return seq >= 0 && seq < E->n_seqs && E->seqs[seq].used ? &E->seqs[seq] : NULL;
}

void llm_seq_free(llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    if (s) llm__seq_release(&E->kv, s);
}

int llm_seq_len(const llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    return s ? s->len : -1;
}

enum llm_status llm_seq_eval(llm_engine *E, int seq, const int32_t *tokens, int n, float *logits, int all_logits) {
    struct llm__seq *s = llm__seq_get(E, seq);
    const struct llm__model *m = &E->model;
    enum llm_status st;
    if (!s) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no sequence %d", seq);
    if (n < 1 || !tokens) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no tokens to evaluate");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab)
            return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "token id %d is out of range [0, %d)", tokens[i], m->n_vocab);
    if ((int64_t)s->len + n > E->max_model_len)
        return llm__fail(&E->err, LLM_ERR_CONTEXT, "%d tokens do not fit in the context: %d used of %d",
                         n, s->len, E->max_model_len);
    if ((st = llm__seq_reserve(&E->kv, s, n, &E->err))) return st;
    const int chunk = all_logits ? LLM__MAX_STEP_OUT : LLM__MAX_STEP_TOKENS;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int T = LLM__MIN(chunk, n - i0);
        bool last = i0 + T == n;
        for (int i = 0; i < T; i++) {
            int32_t pos = s->len + i;
            E->st_tokens[i] = tokens[i0 + i];
            E->st_pos[i] = pos;
            E->st_seq[i] = 0;
            E->st_slot[i] = s->blocks[pos / E->kv.block_size] * E->kv.block_size + pos % E->kv.block_size;
        }
        int n_out = 0;
        if (logits && all_logits) for (int i = 0; i < T; i++) E->st_out[n_out++] = i;
        else if (logits && last) E->st_out[n_out++] = T - 1;
        struct llm__step step = {
            .n_tokens = T, .tokens = E->st_tokens, .positions = E->st_pos, .seq_idx = E->st_seq,
            .slot_mapping = E->st_slot, .n_seqs = 1, .max_blocks = s->n_blocks, .block_tables = s->blocks,
            .block_size = E->kv.block_size, .n_out = n_out, .out_rows = E->st_out,
        };
        float *out = logits ? logits + (all_logits ? (size_t)i0 * (size_t)m->n_vocab : 0) : NULL;
        if ((st = llm__forward(m, &E->be, &E->acts, E->kv.k_layer, E->kv.v_layer, &step, out, E->prof, &E->err)))
            return st;
        s->len += T;
    }
    return LLM_OK;
}

// === command-line program ===
#ifdef LLM_MAIN

// --- UTF-8 for terminals and JSON: complete characters only, U+FFFD for invalid bytes ---

// Length of the valid UTF-8 character at s (n bytes available): >0 valid, 0 incomplete but
// possibly valid if more bytes come, -1 invalid (one byte to replace).
static int llm__utf8_char(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    int len;
    uint32_t min;
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
    else return -1;
    uint32_t cp = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
        // reject overlong, surrogate and too-large forms as soon as the second byte tells
        if (i == 1) {
            if (len == 3 && c == 0xE0 && s[1] < 0xA0) return -1;
            if (len == 3 && c == 0xED && s[1] >= 0xA0) return -1;
            if (len == 4 && c == 0xF0 && s[1] < 0x90) return -1;
            if (len == 4 && c == 0xF4 && s[1] >= 0x90) return -1;
        }
    }
    (void)min;
    return len;
}

struct llm__utf8_stream { uint8_t pend[4]; int n; };

// Appends the valid characters of pend + s to out (a growing buffer); keeps an incomplete tail.
struct llm__strbuf { char *p; size_t n, cap; };
static void llm__sb_put(struct llm__strbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = LLM__MAX(b->cap * 2, b->n + n + 64);
        char *p = realloc(b->p, cap);
        if (!p) { fprintf(stderr, "llm: out of memory\n"); exit(1); }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void llm__utf8_feed(struct llm__utf8_stream *u, const char *s, size_t n, struct llm__strbuf *out, bool flush) {
    for (size_t i = 0; i < n || u->n > 0;) {
        while (u->n < 4 && i < n) u->pend[u->n++] = (uint8_t)s[i++];
        if (u->n == 0) break;
        int l = llm__utf8_char(u->pend, (size_t)u->n);
        if (l == 0 && i == n && !flush) break;   // wait for the rest of the character
        if (l <= 0) { llm__sb_put(out, "\xEF\xBF\xBD", 3); l = 1; }
        else llm__sb_put(out, (const char *)u->pend, (size_t)l);
        memmove(u->pend, u->pend + l, (size_t)(u->n - l));
        u->n -= l;
    }
}

static void llm__json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
    fputc('"', f);
}

// --- flags ---

static void llm__die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("llm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static long long llm__parse_int(const char *flag, const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi)
        llm__die("%s expects an integer in [%lld, %lld], got '%s'", flag, lo, hi, s ? s : "");
    return v;
}

static double llm__parse_float(const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v >= lo && v <= hi))
        llm__die("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s ? s : "");
    return v;
}

static char *llm__read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) llm__die("cannot open '%s': %s", path, strerror(errno));
    struct llm__strbuf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) llm__sb_put(&b, tmp, n);
    if (ferror(f)) llm__die("cannot read '%s'", path);
    fclose(f);
    if (!b.p) llm__sb_put(&b, "", 0);
    *len = b.n;
    return b.p;
}

struct llm__cli {
    struct llm_engine_params ep;
    struct llm_sampling_params sp;
    const char *prompt, *prompt_file, *tokens;
    int n_predict, logprobs, reps;
    bool json, ignore_eos, no_bos, n_predict_set;
};

static const char *llm__usage =
    "usage: llm COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run     generate text from a prompt\n"
    "  info    print a model's metadata and tensors\n"
    "  bench   prefill and decode speed (as llama-bench: -p N prompt tokens, -n N generated,\n"
    "          -r N repetitions; defaults 512, 128, 5)\n"
    "\n"
    "model and engine options:\n"
    "  -m, --model FILE          GGUF model file (required)\n"
    "  -t, --threads N           CPU threads (default: number of cores)\n"
    "  -c, --max-model-len N     context length in tokens (default: the model's, at most 4096)\n"
    "      --block-size N        KV cache block size: 8, 16 or 32 (default 16)\n"
    "      --kv-cache-memory B   KV cache bytes (default: enough for the context)\n"
    "      --kv-cache-dtype T    KV cache precision: f16 or f32 (default f16)\n"
    "\n"
    "run options:\n"
    "  -p, --prompt TEXT         prompt text\n"
    "  -f, --file FILE           read the prompt from a file\n"
    "      --tokens IDS          prompt as token ids, comma-separated (e.g. 1,15043)\n"
    "      --no-bos              do not add the BOS token to a text prompt\n"
    "  -n, --n-predict N         tokens to generate (default 64)\n"
    "      --ignore-eos          keep generating after an end-of-generation token\n"
    "      --temp T              temperature, 0 = greedy (default 0.8)\n"
    "      --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
    "      --top-p P             nucleus sampling, 1 = off (default 0.95)\n"
    "      --seed S              random seed (default 0)\n"
    "      --json                print one JSON object instead of the text stream\n"
    "      --logprobs K          with --json: top-K log-probabilities of every generated position\n"
    "\n"
    "  -h, --help                this help\n"
    "      --version             print the version\n";

static void llm__parse_args(int argc, char **argv, struct llm__cli *c) {
    c->ep = llm_engine_params_default();
    c->sp = llm_sampling_params_default();
    c->n_predict = 64;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define LLM__ARG() (i + 1 < argc ? argv[++i] : (llm__die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->ep.model_path = LLM__ARG();
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) c->ep.n_threads = (int)llm__parse_int(a, LLM__ARG(), 1, 512);
        else if (!strcmp(a, "-c") || !strcmp(a, "--max-model-len") || !strcmp(a, "--ctx-size"))
            c->ep.max_model_len = (int)llm__parse_int(a, LLM__ARG(), 1, 1 << 24);
        else if (!strcmp(a, "--block-size")) c->ep.block_size = (int)llm__parse_int(a, LLM__ARG(), 8, 32);
        else if (!strcmp(a, "--kv-cache-dtype")) c->ep.kv_cache_dtype = LLM__ARG();
        else if (!strcmp(a, "--kv-cache-memory")) c->ep.kv_cache_bytes = (size_t)llm__parse_int(a, LLM__ARG(), 1, LLONG_MAX);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) c->prompt = LLM__ARG();
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) c->prompt_file = LLM__ARG();
        else if (!strcmp(a, "--tokens")) c->tokens = LLM__ARG();
        else if (!strcmp(a, "--no-bos")) c->no_bos = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--n-gen")) {
            c->n_predict = (int)llm__parse_int(a, LLM__ARG(), 0, 1 << 24);
            c->n_predict_set = true;
        }
        else if (!strcmp(a, "--n-prompt")) c->prompt = LLM__ARG();
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) c->reps = (int)llm__parse_int(a, LLM__ARG(), 1, 1000);
        else if (!strcmp(a, "--ignore-eos")) c->ignore_eos = true;
        else if (!strcmp(a, "--temp")) c->sp.temperature = (float)llm__parse_float(a, LLM__ARG(), 0.0, 100.0);
        else if (!strcmp(a, "--top-k")) c->sp.top_k = (int)llm__parse_int(a, LLM__ARG(), 0, INT_MAX);
        else if (!strcmp(a, "--top-p")) c->sp.top_p = (float)llm__parse_float(a, LLM__ARG(), 0.0, 1.0);
        else if (!strcmp(a, "--seed")) c->sp.seed = (uint64_t)llm__parse_int(a, LLM__ARG(), 0, LLONG_MAX);
        else if (!strcmp(a, "--json")) c->json = true;
        else if (!strcmp(a, "--logprobs")) c->logprobs = (int)llm__parse_int(a, LLM__ARG(), 0, 100);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(llm__usage, stdout); exit(0); }
        else llm__die("unknown option '%s' (see llm --help)", a);
#undef LLM__ARG
    }
    if (!c->ep.model_path) llm__die("no model given: use -m FILE (see llm --help)");
}

static llm_engine *llm__cli_engine(struct llm__cli *c) {
    char err[512];
    c->ep.verbose = 1;   // progress while loading, on a terminal only
    llm_engine *E = llm_engine_create(&c->ep, err, sizeof(err));
    if (!E) llm__die("%s: %s", c->ep.model_path, err);
    return E;
}

static int llm__cmd_info(struct llm__cli *c) {
    llm_engine *E = llm__cli_engine(c);
    const struct llm__gguf *g = &E->model.gguf;
    struct llm_model_info mi;
    llm_model_info(E, &mi);
    printf("file:          %s (GGUF v%u, %lld tensors, %lld keys)\n", c->ep.model_path, g->version,
           (long long)g->n_tensors, (long long)g->n_kv);
    printf("architecture:  %s%s%s\n", mi.arch, mi.name[0] ? ", " : "", mi.name);
    printf("parameters:    %.3f B, %.2f GiB of weights\n", (double)mi.n_params / 1e9, (double)mi.weight_bytes / (1 << 30));
    printf("shape:         %d layers, embedding %d, %d heads (%d KV) of %d, FFN %d, vocabulary %d\n",
           mi.n_layer, mi.n_embd, mi.n_head, mi.n_head_kv, mi.head_dim, mi.n_ff, mi.n_vocab);
    printf("context:       %d trained, %d in use; KV cache holds %d tokens\n", mi.n_ctx_train, E->max_model_len,
           mi.kv_tokens);
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < g->n_kv; i++) {
        const struct llm__gguf_kv *kv = &g->kv[i];
        printf("  %-44s ", kv->key);
        switch (kv->type) {
        case 8: printf("\"%.*s\"", (int)LLM__MIN(kv->v.str.len, 120), kv->v.str.ptr);
                if (kv->v.str.len > 120) printf("... (%llu bytes)", (unsigned long long)kv->v.str.len);
                break;
        case 9: printf("[array of %llu]", (unsigned long long)kv->arr_n); break;
        case 6: case 12: printf("%g", kv->v.f64); break;
        case 7: printf("%s", kv->v.u64 ? "true" : "false"); break;
        case 1: case 3: case 5: case 11: printf("%lld", (long long)kv->v.i64); break;
        default: printf("%llu", (unsigned long long)kv->v.u64); break;
        }
        printf("\n");
    }
    // tensor summary: count and bytes per type
    printf("\ntensors:\n");
    for (int t = 0; t < LLM__TYPE_COUNT; t++) {
        int64_t count = 0;
        size_t bytes = 0;
        for (int64_t i = 0; i < g->n_tensors; i++)
            if ((int)g->tensors[i].type == t) { count++; bytes += g->tensors[i].size; }
        if (count) printf("  %-6s %5lld tensors %10.2f MiB\n", llm__type_info((uint32_t)t)->name, (long long)count,
                          (double)bytes / (1 << 20));
    }
    llm_engine_free(E);
    return 0;
}

static int32_t *llm__parse_tokens(const char *s, int *n) {
    int cap = 16;
    int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
    *n = 0;
    for (const char *p = s; ids;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) llm__die("--tokens: bad token id list '%s'", s);
        if (*n == cap) ids = realloc(ids, (size_t)(cap *= 2) * sizeof(int32_t));
        if (ids) ids[(*n)++] = (int32_t)v;
        if (*end == 0) break;
        if (*end != ',') llm__die("--tokens: bad token id list '%s'", s);
        p = end + 1;
    }
    if (!ids) llm__die("out of memory");
    return ids;
}

static int llm__cmd_run(struct llm__cli *c) {
    int n_prompt = 0;
    int32_t *prompt = NULL;
    if (!!c->prompt + !!c->prompt_file + !!c->tokens != 1) llm__die("run: give exactly one of -p, -f or --tokens");
    if (c->logprobs && !c->json) llm__die("--logprobs needs --json");
    llm_engine *E = llm__cli_engine(c);
    struct llm_model_info mi;
    llm_model_info(E, &mi);
    if (c->tokens) {
        prompt = llm__parse_tokens(c->tokens, &n_prompt);
    } else {
        size_t len;
        char *text = c->prompt_file ? llm__read_file(c->prompt_file, &len) : NULL;
        if (!text) { text = strdup(c->prompt); len = strlen(c->prompt); }
        n_prompt = llm_tokenize(E, text, len, !c->no_bos, NULL, 0);
        if (n_prompt < 0) llm__die("%s", llm_last_error(E));
        prompt = malloc((size_t)LLM__MAX(n_prompt, 1) * sizeof(int32_t));
        if (!prompt || llm_tokenize(E, text, len, !c->no_bos, prompt, n_prompt) != n_prompt) llm__die("tokenize failed");
        free(text);
    }
    if (n_prompt == 0) llm__die("run: the prompt is empty (no tokens)");
    float *logits = malloc((size_t)mi.n_vocab * sizeof(float));
    llm_sampler *smp = llm_sampler_create(&c->sp, mi.n_vocab);
    int32_t *out = malloc((size_t)LLM__MAX(c->n_predict, 1) * sizeof(int32_t));
    struct llm_logprob *lp = c->logprobs ? malloc((size_t)c->logprobs * (size_t)LLM__MAX(c->n_predict, 1) * sizeof(*lp)) : NULL;
    if (!logits || !smp || !out || (c->logprobs && !lp)) llm__die("out of memory");
    int seq = llm_seq_new(E);
    double t0 = llm__now();
    enum llm_status st = llm_seq_eval(E, seq, prompt, n_prompt, logits, 0);
    if (st) llm__die("%s", llm_last_error(E));
    double t_prompt = llm__now() - t0, t_decode = 0.0;
    int n_out = 0, n_decode = 0;
    struct llm__utf8_stream u = {{0}, 0};
    struct llm__strbuf text = {0}, chunk = {0};
    const char *finish = "length";
    while (n_out < c->n_predict) {
        if (lp) llm_top_logprobs(logits, mi.n_vocab, c->logprobs, lp + (size_t)n_out * (size_t)c->logprobs);
        int32_t tok = llm_sampler_sample(smp, logits);
        out[n_out++] = tok;
        if (llm_token_is_eog(E, tok) && !c->ignore_eos) { finish = "stop"; break; }
        char piece[256];
        int pn = llm_token_to_piece(E, tok, piece, sizeof(piece));
        chunk.n = 0;
        llm__utf8_feed(&u, piece, (size_t)LLM__MIN(LLM__MAX(pn, 0), (int)sizeof(piece)), &chunk, false);
        if (chunk.n) {
            llm__sb_put(&text, chunk.p, chunk.n);
            if (!c->json) { fwrite(chunk.p, 1, chunk.n, stdout); fflush(stdout); }
        }
        if (n_out == c->n_predict) break;
        double t1 = llm__now();
        st = llm_seq_eval(E, seq, &tok, 1, logits, 0);
        t_decode += llm__now() - t1;
        if (st) {
            fprintf(stderr, "\nllm: generation stopped: %s\n", llm_last_error(E));
            finish = "context";
            break;
        }
        n_decode++;
    }
    chunk.n = 0;
    llm__utf8_feed(&u, "", 0, &chunk, true);
    if (chunk.n) {
        llm__sb_put(&text, chunk.p, chunk.n);
        if (!c->json) fwrite(chunk.p, 1, chunk.n, stdout);
    }
    double prompt_tps = n_prompt / (t_prompt > 0 ? t_prompt : 1e-9);
    double decode_tps = n_decode ? n_decode / (t_decode > 0 ? t_decode : 1e-9) : 0.0;
    if (c->json) {
        printf("{\"prompt_tokens\":[");
        for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? "," : "", prompt[i]);
        printf("],\"tokens\":[");
        for (int i = 0; i < n_out; i++) printf("%s%d", i ? "," : "", out[i]);
        printf("],\"text\":");
        llm__json_str(stdout, text.p ? text.p : "", text.n);
        printf(",\"finish_reason\":\"%s\",\"prompt_tps\":%.3f,\"decode_tps\":%.3f", finish, prompt_tps, decode_tps);
        if (lp) {
            printf(",\"logprobs\":[");
            for (int i = 0; i < n_out; i++) {
                printf("%s[", i ? "," : "");
                for (int k = 0; k < c->logprobs; k++) {
                    const struct llm_logprob *x = &lp[(size_t)i * (size_t)c->logprobs + (size_t)k];
                    printf("%s{\"id\":%d,\"logprob\":%.6f}", k ? "," : "", x->id, (double)x->logprob);
                }
                printf("]");
            }
            printf("]");
        }
        printf("}\n");
    } else {
        printf("\n");
    }
    fprintf(stderr, "prompt: %d tokens, %.2f tokens/s | decode: %d tokens, %.2f tokens/s\n", n_prompt, prompt_tps,
            n_decode, decode_tps);
    free(text.p);
    free(chunk.p);
    free(lp);
    free(out);
    free(logits);
    free(prompt);
    llm_sampler_free(smp);
    llm_engine_free(E);
    return 0;
}

// llm bench: prefill and decode speed of one sequence, as llama.cpp's llama-bench measures them
// (pp: a prompt of -p random tokens in one go; tg: -n tokens decoded one at a time after a
// BOS), medians over -r repetitions after a warm-up.
static int llm__cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double llm__median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), llm__cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int llm__cmd_bench(struct llm__cli *c) {
    int n_prompt = c->prompt ? (int)llm__parse_int("-p", c->prompt, 0, 1 << 20) : 512;
    int n_gen = c->n_predict_set ? c->n_predict : 128, reps = c->reps ? c->reps : 5;
    if (c->ep.max_model_len < n_prompt + n_gen + 1) c->ep.max_model_len = n_prompt + n_gen + 1;
    llm_engine *E = llm__cli_engine(c);
    struct llm_model_info mi;
    llm_model_info(E, &mi);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)LLM__MAX(n_prompt, 1));
    float *logits = malloc(sizeof(float) * (size_t)mi.n_vocab);
    double *pp = calloc((size_t)reps, sizeof(double)), *tg = calloc((size_t)reps, sizeof(double));
    if (!toks || !logits || !pp || !tg) llm__die("out of memory");
    uint64_t rng = 12345;
    for (int i = 0; i < n_prompt; i++) toks[i] = (int32_t)(llm__splitmix64(&rng) % (uint64_t)mi.n_vocab);
    if (n_prompt > 0 && mi.bos_id >= 0) toks[0] = mi.bos_id;
    int32_t first = mi.bos_id >= 0 ? mi.bos_id : 0;
    for (int r = -1; r < reps; r++) {   // r = -1: warm-up, not counted
        if (n_prompt > 0) {
            int seq = llm_seq_new(E);
            double t0 = llm__now();
            if (llm_seq_eval(E, seq, toks, n_prompt, logits, 0)) llm__die("%s", llm_last_error(E));
            if (r >= 0) pp[r] = n_prompt / (llm__now() - t0);
            llm_seq_free(E, seq);
        }
        if (n_gen > 0) {
            int seq = llm_seq_new(E);
            int32_t tok = first;
            double t0 = llm__now();
            for (int i = 0; i < n_gen; i++) {
                if (llm_seq_eval(E, seq, &tok, 1, logits, 0)) llm__die("%s", llm_last_error(E));
                tok = llm__argmax(logits, mi.n_vocab);
            }
            if (r >= 0) tg[r] = n_gen / (llm__now() - t0);
            llm_seq_free(E, seq);
        }
    }
    size_t bpt = mi.bytes_per_token;
    double pp_med = n_prompt ? llm__median(pp, reps) : 0, tg_med = n_gen ? llm__median(tg, reps) : 0;
    if (c->json) {
        printf("{\"model\":");
        llm__json_str(stdout, c->ep.model_path, strlen(c->ep.model_path));
        printf(",\"threads\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"reps\":%d,\"pp_tps\":%.3f,\"tg_tps\":%.3f,"
               "\"bytes_per_token\":%zu}\n", E->params.n_threads, n_prompt, n_gen, reps, pp_med, tg_med, bpt);
    } else {
        printf("%s: %d threads, weights read per token %.1f MB\n", c->ep.model_path, E->params.n_threads, bpt / 1e6);
        if (n_prompt) printf("  pp%-5d %10.2f tokens/s (median of %d)\n", n_prompt, pp_med, reps);
        if (n_gen) printf("  tg%-5d %10.2f tokens/s (median of %d)\n", n_gen, tg_med, reps);
    }
    free(toks);
    free(logits);
    free(pp);
    free(tg);
    llm_engine_free(E);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(llm__usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("llm %s\n", LLM_VERSION); return 0; }
    struct llm__cli c;
    memset(&c, 0, sizeof(c));
    if (!strcmp(argv[1], "run")) { llm__parse_args(argc, argv, &c); return llm__cmd_run(&c); }
    if (!strcmp(argv[1], "info")) { llm__parse_args(argc, argv, &c); return llm__cmd_info(&c); }
    if (!strcmp(argv[1], "bench")) { llm__parse_args(argc, argv, &c); return llm__cmd_bench(&c); }
    llm__die("unknown command '%s' (see llm --help)", argv[1]);
    return 1;
}

#endif // LLM_MAIN
