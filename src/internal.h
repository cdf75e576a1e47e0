// What the modules share: types, small inline helpers, the functions each exports
//
// In the order of the modules (docs/architecture.md), each part under a banner naming its files:
// the module's types and inline helpers, and the functions and tables other modules call
// (LLM__INTERNAL, LLM__EXTERN; everything else in a module is static). A module's functions are
// described where they are defined.

// LLM__INTERNAL marks a function or table that several modules share; LLM__EXTERN declares such a
// table. Compiled module by module they have external linkage (hidden in the shared library); the
// amalgamation (tools/amalgamate.sh) defines both as static before this header.
#ifndef LLM__INTERNAL
#define LLM__INTERNAL
#define LLM__EXTERN extern
#endif

#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "../llm.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
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
#include <sched.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define LLM__X86 1
#include <immintrin.h>
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
#define LLM__NEON 1
#include <arm_neon.h>
#endif


#define LLM__MIN(a, b) ((a) < (b) ? (a) : (b))

#define LLM__MAX(a, b) ((a) > (b) ? (a) : (b))

#define LLM__MAX_SPEC 16   // speculative decoding: drafts per request and step, at most

#define LLM__TSTEP 128     // step times are measured per token count up to this many

#define LLM__SPEC_REQS 64  // draft model: requests that speculate in one step, at most

#define LLM__SPEC_MARGIN 1.1   // drafts are verified when the expected rate beats none by 10%

// a draft model's: 25% (its sampling and a step's other work are not in the times)
#define LLM__SPEC_MARGIN_DRAFT 1.25

#define LLM__SPEC_PROBE_SHARE 0.02   // a draft model's forced drafts (the first, probes): at most 2% of the steps' time

#define LLM__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define LLM__MAX_THREADS_AWQ 256   // llm_quantize's threads, at most

// === src/util.c: errors, memory, byte buffers, hashing, files ===

// An error message buffer. Every fallible internal function takes one and returns a status.
struct llm__err { char msg[512]; enum llm_status status; };

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
LLM__INTERNAL enum llm_status llm__fail(struct llm__err *e, enum llm_status st, const char *fmt, ...);

LLM__INTERNAL const void *llm__memmem(const void *h, size_t hn, const void *needle, size_t n);

LLM__INTERNAL char *llm__strndup(const char *s, size_t n);
LLM__INTERNAL enum llm_status llm__read_all(int fd, void *buf, size_t size, const char *path, struct llm__err *e);
LLM__INTERNAL void llm__map_release(const void *p, size_t n);
LLM__INTERNAL size_t llm__mem_available(void);
LLM__INTERNAL uint64_t llm__splitmix64(uint64_t *x);
LLM__INTERNAL void llm__time_update(double *m, double t);
LLM__INTERNAL uint64_t llm__hash(const char *s, size_t n);

// A growable byte buffer: text being streamed, a header being written. A failed allocation is
// kept in fail (later puts do nothing).
struct llm__outbuf { char *p; size_t n, cap; bool fail; };

LLM__INTERNAL void llm__outbuf_put(struct llm__outbuf *o, const void *s, size_t n);

static inline double llm__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

LLM__INTERNAL void *llm__alloc(size_t size);

// === src/types.c, src/dot.c, src/dot_x86.c, src/dot_neon.c: tensor types and their kernels ===

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
    // The engine's own layouts for AWQ and GPTQ weights (made at load from a Hugging Face
    // checkpoint; never in a GGUF file, whose reader refuses these ids): see struct llm__block_gq.
    LLM__TYPE_G4_32 = 64, LLM__TYPE_G4_64 = 65, LLM__TYPE_G4_128 = 66,
    LLM__TYPE_G8_32 = 67, LLM__TYPE_G8_64 = 68, LLM__TYPE_G8_128 = 69,
    LLM__TYPE_COUNT = 70
};

struct llm__type_info {
    const char *name;      // ggml's name: "f32", "q4_0", "q4_K", ...
    int64_t blck;          // elements per block (1 for plain float and integer types)
    size_t block_bytes;    // bytes per block
    bool supported;        // usable as a weight type by llm.c
    int vec_dot_type;      // activation type a weight row of this type is multiplied with; -1: none
    bool internal;         // the engine's own layout, not a ggml type (GGUF files cannot hold it)
};

LLM__EXTERN const struct llm__type_info llm__type_table[LLM__TYPE_COUNT];

LLM__INTERNAL const struct llm__type_info *llm__type_info(uint32_t type);

LLM__INTERNAL size_t llm__row_bytes(int type, int64_t n);

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

// Q8_1: Q8_0 plus s = fp16(d * sum of qs), the activations of Q4_1/Q5_1 weights (their min
// times s is the min's share of a block's dot product).
struct llm__block_q8_1 {   // x[j] = d * qs[j]
    uint16_t d, s;
    int8_t qs[32];
};

struct llm__block_q4_1 {   // x[j] = d * (qs[j] & 15) + m, x[j+16] = d * (qs[j] >> 4) + m, j < 16
    uint16_t d, m;
    uint8_t qs[16];
};

// Q5_0 / Q5_1: Q4_0 / Q4_1 nibbles plus a fifth bit: bit j of qh (read as a little-endian u32) is
// bit 4 of quant j. Q5_0: x = d * (q - 16); Q5_1: x = d * q + m.
struct llm__block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};

struct llm__block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};

// IQ4_NL: Q4_0's layout; a nibble indexes a fixed non-uniform grid: x = d * llm__iq4nl_values[q].
struct llm__block_iq4_nl {
    uint16_t d;
    uint8_t qs[16];
};

LLM__EXTERN const int8_t llm__iq4nl_values[16];

// MXFP4 (OCP microscaling FP4, gpt-oss's experts): Q4_0's nibble order; a nibble is an E2M1 value
// (sign, 2 exponent bits, 1 mantissa bit) held doubled as an integer in llm__mxfp4_values, and the
// block's scale an E8M0 exponent e, so x = 2^(e - 128) * llm__mxfp4_values[q] (ggml's convention).
struct llm__block_mxfp4 {
    uint8_t e;
    uint8_t qs[16];
};

LLM__EXTERN const int8_t llm__mxfp4_values[16];

// 2^(e - 128), exactly (e < 2: the subnormals 2^-128 and 2^-127), as ggml_e8m0_to_fp32_half.
static inline float llm__e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

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

// Q3_K: 16 sub-blocks of 16 with 6-bit scales: x = d * (sc[s] - 32) * (q - 4), q a 3-bit quant.
// Element e (half h = e / 128, j = e % 128 / 32, l = e % 32): bits 0-1 of q are qs[32h + l] >> 2j & 3,
// bit 2 is hmask[l] >> (4h + j) & 1. sc[s]: bits 0-3 are scales[s] & 15 (s < 8) or scales[s - 8] >> 4,
// bits 4-5 are scales[8 + s % 4] >> 2(s / 4) & 3.
struct llm__block_q3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};

// Q2_K: 16 sub-blocks of 16 with 4-bit scales and mins: x = d * (scales[s] & 15) * q - dmin *
// (scales[s] >> 4), q a 2-bit quant stored as Q3_K's low 2 bits.
struct llm__block_q2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};

// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales ls: x = d * (ls - 32) * llm__iq4nl_values[q], q a
// 4-bit index. Sub-block b: ls = scales_l[b / 2] >> 4(b % 2) & 15 | (scales_h >> 2b & 3) << 4;
// its elements l < 16 are the low nibbles of qs[16b + l], elements 16 + l the high nibbles.
struct llm__block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};

// (IQ4_XS's 16 non-linear levels are IQ4_NL's, llm__iq4nl_values, above.)
// Q8_K: activations for the k-quants. bsums[g] = sum of qs[16g..16g+16), so a kernel gets the
// sums it needs for the mins (Q2_K/Q4_K/Q5_K) and the -32 offset (Q6_K) without touching qs again.
struct llm__block_q8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};

// The AWQ / GPTQ layouts (LLM__TYPE_G4_* and G8_*, the engine's own): a block is one
// quantization group of g = 32, 64 or 128 inputs with one fp16 scale d and one zero point z,
// x = d * (q - z), as the checkpoints define their weights. G4 (4.25 bits a weight at g = 128):
// q is a 4-bit unsigned quant and sub-block c (elements 32c..32c+31) keeps its nibbles in
// qs[16c..16c+16) as Q4_0 does (element 32c + j in the low nibble of byte 16c + j, 32c + 16 + j in
// the high one); z is 0..16 (GPTQ's v1 zeros, stored less one, can make 16). G8: qs[j] is the 8-bit
// quant less 128 (int8) and z the zero point less 128 (-128..128). Products are taken against
// Q8_0 activations with exact integer sums per sub-block: sum((q - z) * a).
struct llm__block_gq {
    uint16_t d;
    int16_t z;
    uint8_t qs[];          // g / 2 (G4) or g (G8) bytes
};

LLM__INTERNAL bool llm__is_gq(int type);

LLM__INTERNAL int llm__gq_bits(int type);

LLM__INTERNAL int llm__gq_group(int type);

LLM__INTERNAL float llm__fp16_to_fp32(uint16_t h);

LLM__INTERNAL uint16_t llm__fp32_to_fp16(float f);

LLM__INTERNAL float llm__bf16_to_fp32(uint16_t h);

LLM__INTERNAL uint16_t llm__fp32_to_bf16(float f);

enum llm__simd { LLM__SIMD_SCALAR = 0, LLM__SIMD_AVX2 = 1, LLM__SIMD_AVX512 = 2, LLM__SIMD_NEON = 3 };

#if defined(LLM__X86) && (defined(__GNUC__) || defined(__clang__)) && !defined(LLM_NO_SIMD)
#define LLM__X86_SIMD 1

// AVX2 level: AVX2 + FMA + F16C. AVX-512 level: F, BW, VL, DQ and VNNI (Ice Lake, Zen 4 and later).
#define LLM__AVX2 __attribute__((target("avx2,fma,f16c")))

#define LLM__AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

// The AVX-512 level with AVX512-BF16 (vdpbf16ps: Cooper Lake, Sapphire Rapids, Zen 4 and later).
#define LLM__AVX512BF16 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c")))

#endif
LLM__INTERNAL enum llm__simd llm__simd_best(void);

LLM__INTERNAL bool llm__cpu_has_avx512bf16(void);

LLM__INTERNAL void llm__fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n);

LLM__INTERNAL void llm__fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n);

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

LLM__INTERNAL void llm__dequantize_q8_0(const struct llm__block_q8_0 *x, float *y, int64_t nb);

// The quant j of a G4 / G8 block (as stored: G8's less 128).
static inline int llm__gq_quant(const struct llm__block_gq *b, int bits, int j) {
    if (bits == 8) return (int8_t)b->qs[j];
    const uint8_t q = b->qs[16 * (j / 32) + j % 16];
    return j % 32 < 16 ? q & 15 : q >> 4;
}

LLM__INTERNAL void llm__dequantize_gq(int type, const void *x, float *y, int64_t n);

LLM__INTERNAL void llm__dequantize_q4_0(const struct llm__block_q4_0 *x, float *y, int64_t nb);

// The 32 quants (0..15, or 0..31 with qh) of a Q4_1/Q5_0/Q5_1/IQ4_NL block, in element order.
static inline void llm__b32_quants(const uint8_t *qs, const uint8_t *qh, uint8_t q[32]) {
    uint32_t h = 0;
    if (qh) memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 15) | (h >> j & 1) << 4);
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (h >> (j + 16) & 1) << 4);
    }
}

LLM__INTERNAL void llm__dequantize_q4_1(const struct llm__block_q4_1 *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q5_0(const struct llm__block_q5_0 *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q5_1(const struct llm__block_q5_1 *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_iq4_nl(const struct llm__block_iq4_nl *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_mxfp4(const struct llm__block_mxfp4 *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q8_1(const struct llm__block_q8_1 *x, float *y, int64_t nb);

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

LLM__INTERNAL void llm__dequantize_q4_K(const struct llm__block_q4_K *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q5_K(const struct llm__block_q5_K *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q6_K(const struct llm__block_q6_K *x, float *y, int64_t nb);

// The 256 2-bit fields of a Q2_K/Q3_K qs array (0..3), in element order.
static inline void llm__k23_low_quants(const uint8_t qs[64], uint8_t q[LLM__QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = qs[32 * h + l] >> (2 * j) & 3;
}

// The 16 6-bit scales of a Q3_K block (0..63, before the -32), unpacked on 32-bit words as
// described at struct llm__block_q3_K; every operation stays within its byte, so byte order does
// not matter.
static inline void llm__q3_K_scales_raw(const uint8_t scales[12], uint8_t sc[16]) {
    uint32_t w[3], o[4];
    memcpy(w, scales, 12);
    o[0] = (w[0] & 0x0f0f0f0fu) | (w[2] & 0x03030303u) << 4;
    o[1] = (w[1] & 0x0f0f0f0fu) | (w[2] >> 2 & 0x03030303u) << 4;
    o[2] = (w[0] >> 4 & 0x0f0f0f0fu) | (w[2] >> 4 & 0x03030303u) << 4;
    o[3] = (w[1] >> 4 & 0x0f0f0f0fu) | (w[2] >> 6 & 0x03030303u) << 4;
    memcpy(sc, o, 16);
}

// The 16 scales of a Q3_K block minus 32 (-32..31).
static inline void llm__q3_K_scales(const uint8_t scales[12], int8_t sc[16]) {
    uint8_t raw[16];
    llm__q3_K_scales_raw(scales, raw);
    for (int s = 0; s < 16; s++) sc[s] = (int8_t)(raw[s] - 32);
}

// The 256 quants of a Q3_K block minus 4 (-4..3), in element order.
static inline void llm__q3_K_quants(const struct llm__block_q3_K *x, int8_t q[LLM__QK_K]) {
    uint8_t lo[LLM__QK_K];
    llm__k23_low_quants(x->qs, lo);
    for (int e = 0; e < LLM__QK_K; e++) q[e] = (int8_t)((lo[e] | (x->hmask[e % 32] >> (e / 32) & 1) << 2) - 4);
}

// The 8 scales of an IQ4_XS block minus 32 (-32..31).
static inline void llm__iq4_xs_scales(const struct llm__block_iq4_xs *x, int8_t ls[8]) {
    for (int b = 0; b < 8; b++)
        ls[b] = (int8_t)(((x->scales_l[b / 2] >> (4 * (b % 2)) & 15) | (x->scales_h >> (2 * b) & 3) << 4) - 32);
}

LLM__INTERNAL void llm__dequantize_q3_K(const struct llm__block_q3_K *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q2_K(const struct llm__block_q2_K *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_iq4_xs(const struct llm__block_iq4_xs *x, float *y, int64_t nb);

LLM__INTERNAL void llm__dequantize_q8_K(const struct llm__block_q8_K *x, float *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q8_0(const float *x, struct llm__block_q8_0 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_gq(int type, const float *x, void *y, int64_t n);

LLM__INTERNAL void llm__quantize_q4_0(const float *x, struct llm__block_q4_0 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q8_1(const float *x, struct llm__block_q8_1 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q4_1(const float *x, struct llm__block_q4_1 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q5_1(const float *x, struct llm__block_q5_1 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q5_0(const float *x, struct llm__block_q5_0 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_iq4_nl(const float *x, struct llm__block_iq4_nl *y, int64_t nb);

LLM__INTERNAL void llm__quantize_mxfp4(const float *x, struct llm__block_mxfp4 *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q8_K(const float *x, struct llm__block_q8_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q4_K(const float *x, struct llm__block_q4_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q5_K(const float *x, struct llm__block_q5_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q6_K(const float *x, struct llm__block_q6_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q3_K(const float *x, struct llm__block_q3_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_q2_K(const float *x, struct llm__block_q2_K *y, int64_t nb);

LLM__INTERNAL void llm__quantize_iq4_xs(const float *x, struct llm__block_iq4_xs *y, int64_t nb);

typedef void (*llm__vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);

// The dot product kernels by level (src/dot.c: scalar and the dispatch; dot_x86.c; dot_neon.c).
#if defined(LLM__X86_SIMD)
LLM__INTERNAL llm__vec_dot_fn llm__vec_dot_kernel_avx2(int type);
LLM__INTERNAL llm__vec_dot_fn llm__vec_dot_kernel_avx512(int type);
#endif
#if defined(LLM__NEON) && defined(__aarch64__)
LLM__INTERNAL llm__vec_dot_fn llm__vec_dot_kernel_neon(int type);
#endif

#define LLM__GQ_KERNELS(SFX, ATTR, IMPL)                                                               \
    ATTR static void llm__vec_dot_int4_g32_##SFX(int64_t n, float *s, const void *w, const void *a) {  \
        *s = IMPL(LLM__TYPE_G4_32, n, w, a);                                                           \
    }                                                                                                  \
    ATTR static void llm__vec_dot_int4_g64_##SFX(int64_t n, float *s, const void *w, const void *a) {  \
        *s = IMPL(LLM__TYPE_G4_64, n, w, a);                                                           \
    }                                                                                                  \
    ATTR static void llm__vec_dot_int4_g128_##SFX(int64_t n, float *s, const void *w, const void *a) { \
        *s = IMPL(LLM__TYPE_G4_128, n, w, a);                                                          \
    }                                                                                                  \
    ATTR static void llm__vec_dot_int8_g32_##SFX(int64_t n, float *s, const void *w, const void *a) {  \
        *s = IMPL(LLM__TYPE_G8_32, n, w, a);                                                           \
    }                                                                                                  \
    ATTR static void llm__vec_dot_int8_g64_##SFX(int64_t n, float *s, const void *w, const void *a) {  \
        *s = IMPL(LLM__TYPE_G8_64, n, w, a);                                                           \
    }                                                                                                  \
    ATTR static void llm__vec_dot_int8_g128_##SFX(int64_t n, float *s, const void *w, const void *a) { \
        *s = IMPL(LLM__TYPE_G8_128, n, w, a);                                                          \
    }

// The kernel of G type t at one level (the dispatch's case lines).
#define LLM__GQ_CASES(SFX)                                                          \
    case LLM__TYPE_G4_32: return llm__vec_dot_int4_g32_##SFX;                       \
    case LLM__TYPE_G4_64: return llm__vec_dot_int4_g64_##SFX;                       \
    case LLM__TYPE_G4_128: return llm__vec_dot_int4_g128_##SFX;                     \
    case LLM__TYPE_G8_32: return llm__vec_dot_int8_g32_##SFX;                       \
    case LLM__TYPE_G8_64: return llm__vec_dot_int8_g64_##SFX;                       \
    case LLM__TYPE_G8_128: return llm__vec_dot_int8_g128_##SFX;

#if defined(LLM__X86_SIMD)
LLM__AVX2 static inline float llm__hsum_avx2(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

LLM__AVX2 static inline float llm__hmax_avx2(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

LLM__AVX2 static inline int32_t llm__hsum_epi32_avx2(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    return _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32(x, 1)));
}

// bf16 -> fp32 is a 16-bit left shift of the bits.
LLM__AVX2 static inline __m256 llm__load_bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

// 0xff in byte j where bit j of the 32 bits at qh is set.
LLM__AVX2 static inline __m256i llm__qh_bytes_avx2(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i v =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                            _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

LLM__AVX2 static inline __m256i llm__nibbles_avx2(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

// s + vpdpbusd(w, the 4 bytes at a broadcast to 16 lanes), the broadcast done by the instruction's
// memory operand (the intrinsic with _mm512_set1_epi32 costs a separate broadcast load)
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__dpbusd_bcast(__m512i s, __m512i w,
                                                                                  const void *a) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(w), "m"(*(const int32_t *)a));
    return s;
}

LLM__AVX512 static inline __m512 llm__bf16x16_to_ps(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#endif
#if defined(LLM__NEON) && defined(__aarch64__)
#endif
LLM__INTERNAL llm__vec_dot_fn llm__vec_dot_kernel(int type, enum llm__simd level);

LLM__INTERNAL void llm__dequantize_row(int type, const void *src, float *dst, int64_t n);

LLM__INTERNAL void llm__quantize_row(int type, const float *src, void *dst, int64_t n);

// === src/gguf.c: GGUF files ===

enum llm__gguf_type {
    LLM__GGUF_U8 = 0, LLM__GGUF_I8 = 1, LLM__GGUF_U16 = 2, LLM__GGUF_I16 = 3,
    LLM__GGUF_U32 = 4, LLM__GGUF_I32 = 5, LLM__GGUF_F32 = 6, LLM__GGUF_BOOL = 7,
    LLM__GGUF_STR = 8, LLM__GGUF_ARR = 9, LLM__GGUF_U64 = 10, LLM__GGUF_I64 = 11,
    LLM__GGUF_F64 = 12, LLM__GGUF_TYPE_COUNT
};

#define LLM__GGUF_DEFAULT_ALIGNMENT 32

#define LLM__GGUF_MAX_NAME 63     // bytes, ggml's GGML_MAX_NAME (64) less the NUL

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
    const int32_t *perm;       // GPTQ act-order (directories only): column k holds input perm[k]; NULL: none
};

// Open-addressing hash from names to item indices (-1: empty slot), for duplicate checks
// and O(1) lookups. The hash is keyed with a seed of each index's own (its address and the
// clock), so that a hostile file cannot name its tensors to collide and make the probes quadratic.
struct llm__gguf_index { int64_t *slots; uint64_t mask, seed; };

struct llm__gguf {
    void *map;                 // the whole file
    size_t size;
    bool owns_map;             // munmap on close (false for a file in memory)
    bool owns_buf;             // free on close: the file was read into memory (llm__alloc)
    uint32_t version;
    size_t alignment, data_offset;
    int64_t n_kv, n_tensors;
    struct llm__gguf_kv *kv;           // (n_kv)
    struct llm__gguf_tensor *tensors;  // (n_tensors), in file order
    struct llm__gguf_index kv_index, tensor_index;
    void *extra;                       // what else the tensors point into (a Hugging Face directory's
    void (*extra_free)(void *);        // files), freed on close
};

LLM__INTERNAL const char *llm__gguf_printable(char out[88], const char *p, uint64_t len);

LLM__INTERNAL bool llm__gguf_index_init(struct llm__gguf_index *ix, int64_t n);

LLM__INTERNAL int64_t llm__gguf_index_find(const struct llm__gguf_index *ix, const void *items,
                                           size_t stride, const char *name, uint64_t *slot);

LLM__INTERNAL enum llm_status llm__gguf_parse(struct llm__gguf *g, struct llm__err *e);

LLM__INTERNAL void llm__gguf_close(struct llm__gguf *g);

LLM__INTERNAL enum llm_status llm__gguf_open_file(struct llm__gguf *g, const char *path, bool read_all,
                                                  struct llm__err *e);
LLM__INTERNAL bool llm__str_has(const struct llm__gguf_str *s, const char *z);

LLM__INTERNAL int64_t llm__gguf_find_key(const struct llm__gguf *g, const char *key);

LLM__INTERNAL const struct llm__gguf_tensor *llm__gguf_find_tensor(const struct llm__gguf *g,
                                                                   const char *name);

LLM__INTERNAL bool llm__gguf_get_u32(const struct llm__gguf *g, const char *key, uint32_t *out,
                                     struct llm__err *e);

LLM__INTERNAL bool llm__gguf_get_f32(const struct llm__gguf *g, const char *key, float *out,
                                     struct llm__err *e);

LLM__INTERNAL bool llm__gguf_get_bool(const struct llm__gguf *g, const char *key, bool *out,
                                      struct llm__err *e);

LLM__INTERNAL bool llm__gguf_get_str(const struct llm__gguf *g, const char *key, struct llm__gguf_str *out,
                                     struct llm__err *e);

LLM__INTERNAL bool llm__gguf_get_arr(const struct llm__gguf *g, const char *key, uint32_t *elem_type,
                                     uint64_t *n, const void **data, struct llm__err *e);

// === src/json.c, src/unicode.c: JSON, UTF-8 ===

enum llm__json_type {
    LLM__JSON_NULL, LLM__JSON_FALSE, LLM__JSON_TRUE, LLM__JSON_NUM, LLM__JSON_STR, LLM__JSON_ARR, LLM__JSON_OBJ
};

struct llm__jnode {
    uint8_t type;      // enum llm__json_type
    bool esc;          // a string with backslash escapes
    uint32_t start;    // the value's first byte (a string: after its opening quote)
    uint32_t len;      // its bytes (a string: up to its closing quote)
    int32_t n;         // an array's elements, an object's members
    int32_t next;      // the node after this value and all that it holds
};

struct llm__json {
    const char *text;
    size_t size;
    struct llm__jnode *nodes;   // (n), nodes[0] the document's value
    int32_t n, cap;
};

LLM__INTERNAL void llm__json_free(struct llm__json *j);

LLM__INTERNAL int llm__utf8_char(const uint8_t *s, size_t n);

LLM__INTERNAL int llm__utf8_put(uint32_t cp, char *out);

LLM__INTERNAL enum llm_status llm__json_parse(struct llm__json *j, const char *text, size_t size, const char *what,
                                              struct llm__err *e);

LLM__INTERNAL int32_t llm__json_get(const struct llm__json *j, int32_t o, const char *key);

LLM__INTERNAL size_t llm__json_decode(const struct llm__json *j, int32_t i, char *out);

LLM__INTERNAL char *llm__json_strdup(const struct llm__json *j, int32_t i, size_t *len);

LLM__INTERNAL bool llm__json_eq(const struct llm__json *j, int32_t i, const char *s);

LLM__INTERNAL int32_t llm__json_at(const struct llm__json *j, int32_t a, int32_t x);

LLM__INTERNAL bool llm__json_num(const struct llm__json *j, int32_t i, double *out);

LLM__INTERNAL bool llm__json_int(const struct llm__json *j, int32_t i, int64_t lo, int64_t hi, int64_t *out);

LLM__INTERNAL enum llm_status llm__read_file(const char *path, size_t max, char **out, size_t *size,
                                             struct llm__err *e);

// === src/safetensors.c ===

struct llm__st_tensor {
    char *name;                 // NUL-terminated copy
    uint32_t type;              // a ggml type id (F32, F16, BF16, I8/I16/I32/I64, F64), or LLM__ST_U8 / LLM__ST_BOOL
    int n_dims;                 // 0..8
    int64_t shape[8];           // outermost first, as in the file
    const uint8_t *data;        // in the mapping
    size_t size;                // bytes
};

struct llm__safetensors {
    void *map;
    size_t size;
    bool owns_map, owns_buf;
    int64_t n;                  // tensors
    struct llm__st_tensor *t;   // (n), in header order
    struct llm__gguf_index ix;  // their names (duplicates refused, lookups in O(1))
    char *path_name;            // a shard's file name (Hugging Face directories), or NULL
};

LLM__INTERNAL void llm__st_close(struct llm__safetensors *s);

LLM__INTERNAL const struct llm__st_tensor *llm__st_find(const struct llm__safetensors *s, const char *name);

LLM__INTERNAL enum llm_status llm__st_open(struct llm__safetensors *s, const char *path, bool read_all,
                                           struct llm__err *e);

// === src/hf.c, src/hf_open.c: Hugging Face directories ===

// A GGUF header under construction (keys and values only).
struct llm__gbuf { struct llm__outbuf o; int64_t n_kv; };

LLM__INTERNAL void llm__gbuf_put(struct llm__gbuf *b, const void *p, size_t n);

LLM__INTERNAL void llm__gbuf_seal(struct llm__gbuf *b);

LLM__INTERNAL void llm__gbuf_str(struct llm__gbuf *b, const char *s, size_t n);

LLM__INTERNAL void llm__gbuf_key(struct llm__gbuf *b, const char *arch, const char *key, uint32_t type);

LLM__INTERNAL void llm__gbuf_u32(struct llm__gbuf *b, const char *arch, const char *key, uint32_t v);

LLM__INTERNAL void llm__gbuf_s(struct llm__gbuf *b, const char *arch, const char *key, const char *v);

// What a directory owns besides the GGUF header: its safetensors files and the tensors copied
// (permuted or aligned).
struct llm__hf_owned {
    struct llm__safetensors *files;   // (n_files)
    int n_files;
    void **copies;                    // (n_copies), llm__alloc'd
    int64_t n_copies;
    // how the tensors were mapped (for llm_quantize's checkpoints): q/k rows permuted (of
    // hp[0] / hp[1] heads of hp[2] rows), Gemma's norms stored as 1 + w, AWQ/GPTQ weights
    bool permute, gemma, quantized;
    int64_t hp[3];
    // every tensor of every file by name (llm__hf_index): lookups in O(1) however many files
    struct llm__hf_name { const char *name; const struct llm__st_tensor *t; } *names;
    struct llm__gguf_index names_ix;
};

LLM__INTERNAL void llm__hf_owned_free(void *p);

LLM__INTERNAL enum llm_status llm__hf_index(struct llm__hf_owned *o, struct llm__err *e);

struct llm__hf_quant {
    int method;            // 0: none, LLM__HF_AWQ, LLM__HF_GPTQ
    int bits;              // 4 (AWQ, GPTQ) or 8 (GPTQ)
    int64_t group;         // inputs a group; -1: the whole row
    bool zeros_less_one;   // GPTQ v1: a stored zero point is the zero point less one
};

LLM__INTERNAL enum llm_status llm__hf_config(const char *cfg, size_t n, struct llm__gbuf *b, const char **arch_out,
                                             bool *permute_qk, int64_t hp[5], struct llm__hf_quant *quant,
                                             struct llm__err *e);

LLM__INTERNAL bool llm__hf_name(const char *hf, bool gemma, char *out, size_t size, int *qk);

LLM__INTERNAL const struct llm__st_tensor *llm__hf_find(const struct llm__hf_owned *o, const char *name);

LLM__INTERNAL enum llm_status llm__hf_add_tensors(struct llm__gguf *g, struct llm__hf_owned *o,
                                                  const struct llm__safetensors *f, bool permute, bool gemma,
                                                  const int64_t hp[5], const struct llm__hf_quant *quant,
                                                  struct llm__err *e);

// The tokenizer's kinds, pre-tokenizers and token types (tokenizer.ggml.token_type's values),
// here since a Hugging Face directory's tokenizer is written into those keys.
enum llm__vocab_type { LLM__VOCAB_SPM = 1, LLM__VOCAB_BPE = 2 };

enum llm__pre_type { LLM__PRE_DEFAULT = 1, LLM__PRE_GPT2, LLM__PRE_LLAMA3, LLM__PRE_QWEN2, LLM__PRE_SMOLLM,
                     LLM__PRE_TEKKEN, LLM__PRE_GPT4O };

enum llm__tok_attr { LLM__TOK_NORMAL = 1, LLM__TOK_UNKNOWN = 2, LLM__TOK_CONTROL = 3, LLM__TOK_USER = 4,
                     LLM__TOK_UNUSED = 5, LLM__TOK_BYTE = 6 };

struct llm__pre_name { const char *name; enum llm__pre_type pre; bool ignore_merges, add_bos; };
#define LLM__N_PRE_NAMES 17
LLM__EXTERN const struct llm__pre_name llm__pre_names[LLM__N_PRE_NAMES];

LLM__INTERNAL int32_t llm__strtab_find(const uint32_t *ht, uint32_t mask, const struct llm__gguf_str *strs,
                                       const char *s, size_t n);

LLM__INTERNAL uint32_t *llm__strtab_build(const struct llm__gguf_str *strs, int n, uint32_t *mask);

LLM__INTERNAL enum llm_status llm__hf_read(const char *dir, const char *name, size_t max, bool required, char **out,
                                           size_t *len, struct llm__err *e);

LLM__INTERNAL enum llm_status llm__model_open(struct llm__gguf *g, const char *path, bool read_all, struct llm__err *e);

// === src/threads.c: the thread pool ===

typedef void (*llm__job_fn)(void *arg, int ith, int nth);

// The step-time tuner's state for steps of one size (n_tokens); see llm__pool_step_begin.
#define LLM__TUNE_RUNGS 11   // active thread counts tried: 1, 2, 4, ..., 512 (and n itself)

#define LLM__TUNE_SIZES 4

#define LLM__TUNE_RING 32    // and at most: the steps at cur kept to compare with

struct llm__tune {
    int n_tokens;                  // the step size this entry is for (0: unused)
    unsigned long long last_use;
    int cur;                       // rung in use
    int probe;                     // rung being probed (-1: none)
    int dir;                       // the next probe's direction: -1 or +1
    int until_probe, interval;     // steps at cur before the next probe; steps between probes
    double probe_after;            // and the step clock's time before which none starts
    double last[LLM__TUNE_RING];   // the last steps at cur (seconds), a ring
    int cur_n, cur_pos;            // steps in it
    double probe_sum, probe_max;   // the probe's steps so far, and the slowest of them
    int probe_n;
    bool skip;                     // the next step does not count; nor do steps begun before
    double warm_until;             // this time (on the pool's step clock): threads waking up
    bool decided;                  // a probe has ended
    double more_cost;              // at the last probe's end: the higher rung's step time over the
                                   // lower one's (0: none yet)
};

struct llm__pool {
    int n_threads;
    pthread_t *threads;
    struct llm__pool_worker *workers;
    struct llm__pool_part *parts;   // [n_threads]
    uint64_t n_jobs;                // jobs published (the caller's count)
    // The current job, in one cache line: what a worker reads when woken. fn and arg are written
    // before cur, [job number: 54 bits][parts: 10], which is published before job, its number's
    // low 32 bits (the word idle workers sleep on).
    _Alignas(64) atomic_uint job;
    _Atomic uint64_t cur;
    llm__job_fn fn;
    void *arg;
    _Alignas(64) atomic_int sleepers;   // workers asleep on job (or about to be)
    atomic_int active;              // threads that take part in jobs
    atomic_uint park;               // bumped when active grows: the word parked workers sleep on
    atomic_bool stop;
    _Alignas(64) atomic_uint left;  // parts of the current job not finished: the caller's word
    atomic_int caller_sleeps;
#if !defined(__linux__)
    pthread_mutex_t mu;             // the fallback of the futex calls (llm__futex_*)
    pthread_cond_t cv;
#endif
    // the tuner (the caller's thread only)
    int rungs[LLM__TUNE_RUNGS], n_rungs, first_rung;
    struct llm__tune tune[LLM__TUNE_SIZES], *step_tune;
    int step_rung;
    unsigned long long n_steps;
    double step_t0;
    double step_clock;              // seconds of all steps timed so far (the tuner's clock)
};

struct llm__pool_worker { struct llm__pool *pool; int index; };

// Part i (i >= 1) of a job is worker i's; the caller takes it over when the worker has not
// claimed it soon enough. claimed, in the part's own cache line (the worker's alone as long as
// it keeps up), is the last job number that claimed the part: a compare-and-swap from a smaller
// number claims it, so a part is claimed once per job, and a thread still on an earlier job
// (every part of which was claimed) cannot claim a part of a later one.
struct llm__pool_part { _Alignas(64) _Atomic uint64_t claimed; };

// Parts of the next job: the active thread count (what a job that sizes per-part state before
// llm__pool_run must use).
static inline int llm__pool_nth(const struct llm__pool *pool) {
    return atomic_load_explicit(&pool->active, memory_order_relaxed);
}

LLM__INTERNAL void llm__pool_run(struct llm__pool *pool, llm__job_fn fn, void *arg);

LLM__INTERNAL void llm__pool_step_begin(struct llm__pool *pool, int n_tokens);

LLM__INTERNAL void llm__pool_step_end(struct llm__pool *pool);

LLM__INTERNAL int llm__online_cpus(void);

LLM__INTERNAL void llm__pool_free(struct llm__pool *pool);

LLM__INTERNAL struct llm__pool *llm__pool_new(int n_threads, struct llm__err *e);

// Splits [0, n) into nth near-equal parts; part ith is [*lo, *hi).
static inline void llm__split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + LLM__MIN(ith, rem);
    *hi = *lo + per + (ith < rem);
}

// === backends/backend.h (the backend contract), src/backend.c, backends/cpu.c, cpu_tiles.c ===

#include "../backends/backend.h"

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
    bool repack;                // rewrite weights into the x16 layouts (AVX-512; backends/cpu_tiles.c)
    bool dpbf16;                // BF16 weights multiplied by vdpbf16ps (AVX-512 with AVX512-BF16)
    llm__vec_dot_fn vec_dot[LLM__TYPE_COUNT];
    const struct llm__step *step;
    void *scratch;              // quantized activations
    size_t scratch_size;
    float *gelu;                // [65536]: llm__gelu_ggml of each half-precision input (made on first use)
    int head_dim;               // the model's (reserve): a Q8_0 cache's rotations (backends/cpu.c)
};

enum { LLM__LAYOUT_PLAIN = 0, LLM__LAYOUT_X16 = 1 };

#define LLM__X16_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 4)   // bytes per token of x16 activations

LLM__INTERNAL size_t llm__x16q3_group_bytes(int64_t ne0);

LLM__INTERNAL size_t llm__x16f_group_bytes(int type, int64_t ne0);

// The x16 layouts whose tiles read Q8_K activations (the types' own dot type), not an x16 format.
static inline bool llm__x16_q8k(int type) {
    return type == LLM__TYPE_Q3_K || type == LLM__TYPE_Q2_K || type == LLM__TYPE_IQ4_XS || type == LLM__TYPE_Q6_K ||
           type == LLM__TYPE_Q5_K;
}

LLM__INTERNAL size_t llm__x16_group_bytes(int type, int64_t ne0);

#if defined(LLM__X86_SIMD)
LLM__INTERNAL LLM__AVX2 int32_t llm__quantize_q8_0_block_avx2(const float *x, int8_t *q, uint16_t *dh, float *df);

#endif
LLM__INTERNAL size_t llm__x16_act_stride(int type, int64_t K);

LLM__INTERNAL void llm__x16_quantize_act(int type, const float *x, uint8_t *out, int64_t n);

#if defined(LLM__X86_SIMD)
LLM__INTERNAL LLM__AVX512 void llm__x16_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act,
                                                    size_t stride, int64_t K, float *out, size_t ostride);
LLM__INTERNAL LLM__AVX512 void llm__quantize_q8_K_avx512(const float *x, struct llm__block_q8_K *y, int64_t nb);

#endif
#define LLM__X16K_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 256 * 20)

LLM__INTERNAL void llm__x16k_quantize_act(const float *x, uint8_t *out, int64_t n);

#if defined(LLM__X86_SIMD)
LLM__INTERNAL LLM__AVX512 void llm__x16k_tile_avx512(int nt, const uint8_t *rec, const uint8_t *act, size_t stride,
                                                     int64_t K, float *out, size_t ostride);

#endif
LLM__INTERNAL void llm__x16_row(int type, const void *w, int64_t r, float *y, int64_t ne0);

#if defined(LLM__X86_SIMD)
LLM__INTERNAL LLM__AVX512 void llm__x16q8k_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act,
                                                       size_t stride, int64_t K, float *out, size_t ostride);

#define LLM__KT_MIN_TOKENS 32

#define LLM__KT_X16Q3 (-1)   // the tile type of Q3_K weights in x16

struct llm__kt_tile {
    _Alignas(64) uint8_t q[64][64];   // chunk c: columns 4c..4c+3 of rows 0..15
    int32_t ls[16][16];               // the scale of each group of columns, per row (not Q3_K, Q2_K)
    int16_t m[8][16][2];              // Q2_K, Q5_K: the mins of bsums 2p and 2p + 1, per row
    int16_t ol[8][16][2];             // Q6_K, IQ4_XS: the bytes' offset x the scales of bsums 2p, 2p + 1
    float d[16], dmin[16];
};

LLM__INTERNAL LLM__AVX512 void llm__kt_unpack_x16q3(const uint8_t *rec, int64_t nsb, int64_t sb,
                                                    struct llm__kt_tile *t);

LLM__INTERNAL LLM__AVX512 void llm__kt_unpack_x16q2(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t);

LLM__INTERNAL LLM__AVX512 void llm__kt_unpack_x16iq4(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t);

LLM__INTERNAL LLM__AVX512 void llm__kt_unpack_x16q6(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t);

LLM__INTERNAL LLM__AVX512 void llm__kt_unpack_x16q5(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t);

LLM__INTERNAL LLM__AVX512 void llm__kt_tokens_avx512(int type, int nt, const struct llm__kt_tile *tl,
                                                     const uint8_t *act, size_t stride, float *out, size_t ostride,
                                                     bool first);

#endif
LLM__INTERNAL void llm__cursors_init(struct llm__cpu *c, int64_t n);

LLM__INTERNAL int64_t llm__cursors_next(struct llm__cpu *c, int ith, int nth);

LLM__INTERNAL enum llm_status llm__cpu_reserve(struct llm__cpu *c, size_t size, struct llm__err *e);

LLM__INTERNAL void llm__cpu_free(void *ctx);

LLM__INTERNAL enum llm_status llm__cpu_buf_alloc(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e);

LLM__INTERNAL void llm__cpu_buf_free(void *ctx, struct llm__buf *buf);

LLM__INTERNAL enum llm_status llm__cpu_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                                   int64_t ne1, const void *data, struct llm__err *e);

LLM__INTERNAL void llm__cpu_weight_free(void *ctx, struct llm__weight *w);

// backends/cpu_moe.c: the mixture-of-experts ops of the CPU backend (struct llm_backend_i's)
LLM__INTERNAL enum llm_status llm__cpu_weight_load_experts(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                                           int64_t ne1, int n_expert, const void *data,
                                                           struct llm__err *e);

LLM__INTERNAL void llm__cpu_moe_route(void *ctx, struct llm__tensor ids, struct llm__tensor wts,
                                      struct llm__tensor logits, const struct llm__moe *p);

LLM__INTERNAL void llm__cpu_matmul_id(void *ctx, int n, const struct llm__tensor *dst,
                                      const struct llm__weight *const *w, const struct llm__tensor *bias,
                                      struct llm__tensor x, struct llm__tensor ids, bool x_per_slot);

LLM__INTERNAL void llm__cpu_moe_sum(void *ctx, struct llm__tensor dst, struct llm__tensor src, struct llm__tensor wts,
                                    struct llm__tensor shared, struct llm__tensor gate);

LLM__INTERNAL void llm__cpu_upload(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n);

LLM__INTERNAL void llm__cpu_download(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n);

LLM__INTERNAL void llm__cpu_begin_step(void *ctx, const struct llm__step *step);

LLM__INTERNAL enum llm_status llm__cpu_end_step(void *ctx, struct llm__err *e);

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
LLM__EXTERN const struct llm_backend_i llm__cpu_iface;

// === src/model.c: the transformer ===

enum llm__arch {
    LLM__ARCH_LLAMA,
    LLM__ARCH_QWEN2,
    LLM__ARCH_QWEN3,
    LLM__ARCH_PHI3,
    LLM__ARCH_GEMMA2,
    LLM__ARCH_GEMMA3,
    LLM__ARCH_QWEN3MOE,
    LLM__ARCH_QWEN2MOE,
    LLM__ARCH_GPTOSS,
    LLM__ARCH_OLMOE
};

struct llm__layer {
    struct llm__tensor attn_norm;    // (n_embd)
    struct llm__weight wq;           // (n_head*head_dim, n_embd): ne1 rows of ne0 inputs
    struct llm__weight wk;           // (n_head_kv*head_dim, n_embd)
    struct llm__weight wv;           // (n_head_kv*head_dim, n_embd)
    struct llm__tensor bq, bk, bv;   // qwen2, gpt-oss: (n_head*head_dim), (n_head_kv*head_dim) x 2
    struct llm__tensor bo;           // gpt-oss: (n_embd), the attention output's bias
    struct llm__tensor sinks;        // gpt-oss: (n_head), attention sinks (struct llm__attn)
    struct llm__tensor q_norm, k_norm;   // qwen3, gemma3: (head_dim), applied to every head; olmoe: (Q), (KV)
    struct llm__weight wo;           // (n_embd, n_head*head_dim)
    struct llm__tensor attn_post_norm;   // gemma2/3: (n_embd), on the attention's output
    struct llm__tensor ffn_norm;     // (n_embd)
    struct llm__weight w_gate;       // (n_ff, n_embd)
    struct llm__weight w_up;         // (n_ff, n_embd)
    struct llm__weight w_down;       // (n_embd, n_ff)
    struct llm__tensor ffn_post_norm;    // gemma2/3: (n_embd), on the MLP's output
    // a mixture of experts (n_expert > 0) in place of w_gate/w_up/w_down: the router (n_expert,
    // n_embd) and the experts stacked, n_expert x (n_ff_exp, n_embd) / (n_embd, n_ff_exp)
    struct llm__weight gate_inp, exp_gate, exp_up, exp_down;
    // gpt-oss: the router's bias (n_expert) and the experts' (n_expert rows of n_ff_exp / n_embd)
    struct llm__tensor gate_inp_b, exp_gate_b, exp_up_b, exp_down_b;
    // qwen2moe's shared expert: a gated MLP of n_ff_shexp, its output scaled by the sigmoid of
    // gate_inp_shexp (one row) . x
    struct llm__weight gate_inp_shexp, shexp_gate, shexp_up, shexp_down;
    bool swa;                        // a local layer: sliding-window attention, rope_swa
};

struct llm__model {
    struct llm__gguf gguf;
    enum llm__arch arch;
    char arch_name[32];
    char name[128];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float norm_eps;
    struct llm__rope rope;
    struct llm__rope rope_swa;       // the local (sliding-window) layers' RoPE
    int n_swa;                       // sliding window of the local layers, in tokens; 0: none
    float attn_scale;                // attention scores are q.k * attn_scale
    float attn_softcap, final_softcap;   // soft-capping of attention scores / logits; 0: none
    float embd_scale;                // embeddings are multiplied by this; 0: not scaled
    bool gelu;                       // the MLP's gate is GELU (tanh approximation), else SiLU
    bool qk_norm, post_norms;        // per-head q/k RMSNorm; RMSNorm after attention and MLP
    bool qk_norm_full;               // olmoe: q/k RMSNorm over each token's whole q / k (all heads)
    bool swiglu_oai;                 // gpt-oss: the experts' clamped SwiGLU (swiglu_oai), else SiLU
    // a mixture of experts in every layer's MLP (n_expert 0: none): experts, those a token uses,
    // an expert's feed-forward length, the routing (struct llm__moe)
    int n_expert, n_expert_used, n_ff_exp;
    int n_ff_shexp;                  // qwen2moe's shared expert's feed-forward length (0: none)
    int yarn_n_ctx_orig;             // YaRN (rope.ext_factor != 0): its original context (0: n_ctx_train)
    float yarn_attn;                 // and llama.cpp's yarn_attn_factor (llm__model_yarn)
    struct llm__moe moe;
    struct llm__weight tok_embd;     // (n_vocab, n_embd)
    struct llm__weight output;       // (n_vocab, n_embd); the same as tok_embd when tied
    bool tied_output;
    struct llm__tensor output_norm;  // (n_embd)
    struct llm__tensor rope_freqs;   // (n_rot/2) or no buffer
    struct llm__layer *layers;       // [n_layer]
    struct llm__buf small;           // every 1-D parameter (norms, biases, rope factors), f32
    struct llm__buf perms;           // the act-order weights' distinct input permutations, int32
    int64_t max_perm;                // the longest of them (0: none)
    void **qbufs;                    // (n_qbufs) matrices quantized at load (llm_engine_params.quantize)
    int64_t n_qbufs;
    // The forward's one hook (calibrated quantization's, on the CPU backend): when set, it is
    // handed every linear layer's input (slot: LLM__CAL_*) before the product; NULL otherwise.
    void (*capture)(void *ctx, int layer, int slot, struct llm__tensor x);
    void *capture_ctx;
};

// The inputs of a layer's linear layers, as the forward hands them to llm__model.capture.
enum { LLM__CAL_ATTN_IN, LLM__CAL_ATTN_OUT, LLM__CAL_FFN_IN, LLM__CAL_FFN_ACT, LLM__CAL_SLOTS };

LLM__INTERNAL void llm__model_names(struct llm__model *m);

LLM__INTERNAL enum llm_status llm__model_hparams(struct llm__model *m, struct llm__err *e);

// The model's tensors, found and checked, before any is loaded: the 1-D parameters (norms,
// biases, rope factors) and the matrices, each with the field it goes to.
struct llm__model_plan {
    struct { struct llm__tensor *dst; const struct llm__gguf_tensor *src; } *vecs;
    // a matrix is rows [row0, row0 + rows) of its file tensor (a part of a fused one, phi3's)
    // (experts: a mixture of experts' stacked experts, loaded by weight_load_experts)
    struct { struct llm__weight *dst; const struct llm__gguf_tensor *src; int64_t row0, rows; bool experts; } *mats;
    size_t n_vecs, n_mats;
};

LLM__INTERNAL enum llm_status llm__model_plan(struct llm__model *m, struct llm__model_plan *pl, struct llm__err *e);

LLM__INTERNAL int llm__quant_fallback(int type);

struct llm__quant_job { const struct llm__gguf_tensor *src; int type; void *dst; bool fail; };

LLM__INTERNAL void llm__quant_worker(void *arg, int ith, int nth);

LLM__INTERNAL enum llm_status llm__model_quantize(struct llm__model *m, const char *name, int n_threads, bool progress,
                                                  struct llm__err *e);

LLM__INTERNAL enum llm_status llm__model_load_tensors(struct llm__model *m, struct llm_backend *be, bool progress,
                                                      struct llm__err *e);

LLM__INTERNAL size_t llm__model_bytes_per_token(const struct llm__model *m);

// The multiply-adds of one token's matrix products (llm_model_info.macs_per_token).
LLM__INTERNAL int64_t llm__model_macs_per_token(const struct llm__model *m);

LLM__INTERNAL void llm__model_free(struct llm__model *m, struct llm_backend *be);

// Activations of one step, views into one backend buffer sized for max_tokens rows.
struct llm__acts {
    struct llm__buf buf;
    int max_tokens, max_out;
    size_t off_x, off_xb, off_q, off_k, off_v, off_att, off_xb2, off_gate, off_up, off_xo, off_logits;
    size_t off_gather;   // act-order weights' gathered inputs (max_tokens x m->max_perm)
    // a mixture of experts: the router's logits (max_tokens x n_expert), the experts of each token
    // and their weights (x n_expert_used), the experts' gate/up and down outputs (max_tokens x
    // n_expert_used rows of n_ff_exp, of n_embd)
    size_t off_rlogits, off_ids, off_wts, off_egate, off_eup, off_edown;
    size_t off_shared, off_sgate;   // a shared expert's output (max_tokens x n_embd) and gate logits
};

LLM__INTERNAL enum llm_status llm__acts_init(struct llm__acts *a, const struct llm__model *m, struct llm_backend *be,
                                             int max_tokens, int max_out, struct llm__err *e);

// Time spent per module of the model (enum llm_prof_op), when profiling (llm_set_profiling).
struct llm__prof { double t[LLM_PROF_COUNT]; long long steps; };

LLM__INTERNAL enum llm_status llm__forward(const struct llm__model *m, struct llm_backend *be, struct llm__acts *a,
                                           const struct llm__tensor *k_cache, const struct llm__tensor *v_cache,
                                           const struct llm__step *s, float *logits, struct llm__prof *prof,
                                           struct llm__err *e);

// === src/blocks.c: KV cache blocks ===

// One sequence's tokens in the cache: its block table.
struct llm__seq {
    bool used;               // llm_seq_new's sequences: the id is taken
    int len;                 // tokens whose K and V are in the cache
    int32_t *blocks;         // [cap_blocks] block table: blocks[i] holds positions [i * bs, (i + 1) * bs)
    int n_blocks, cap_blocks;
    int n_committed;         // leading full blocks entered in the prefix cache
    uint64_t last_hash;      // the hash of the last of them (0: none)
};

struct llm__blocks {
    int block_size, n_blocks;
    int32_t *free_ids;             // [n_blocks] stack of free blocks that hold nothing cached
    int n_free;
    int32_t *ref;                  // [n_blocks] sequences using the block
    // prefix cache
    bool caching;
    uint8_t *hashed;               // [n_blocks] the block is in the hash table
    uint64_t *hash, *parent;       // [n_blocks]
    int32_t *content;              // [n_blocks][block_size] token ids of hashed blocks
    int32_t *bucket, *bnext;       // hash table: chains of block ids, -1 ends
    uint32_t bucket_mask;
    int32_t *lru_prev, *lru_next;  // [n_blocks] cached blocks nobody uses, least recently used first
    int32_t lru_head, lru_tail;
    int n_lru;
};

LLM__INTERNAL void llm__blocks_free(struct llm__blocks *bm);

LLM__INTERNAL enum llm_status llm__blocks_init(struct llm__blocks *bm, int n_blocks, int block_size, bool caching,
                                               struct llm__err *e);

LLM__INTERNAL int llm__blocks_available(const struct llm__blocks *bm);

// The KV slot of a sequence's position (its blocks cover it).
static inline int32_t llm__seq_slot(const struct llm__seq *sq, int block_size, int pos) {
    return sq->blocks[pos / block_size] * block_size + pos % block_size;
}

LLM__INTERNAL int64_t llm__blocks_needed(const struct llm__blocks *bm, const struct llm__seq *sq, int n);

LLM__INTERNAL bool llm__blocks_can_allocate(const struct llm__blocks *bm, const struct llm__seq *sq, int n);

LLM__INTERNAL bool llm__blocks_can_allocate_free(const struct llm__blocks *bm, const struct llm__seq *sq, int n);

LLM__INTERNAL bool llm__blocks_allocate(struct llm__blocks *bm, struct llm__seq *sq, int n);

LLM__INTERNAL int llm__blocks_take_prefix(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens, int n);

LLM__INTERNAL void llm__blocks_commit(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens);

LLM__INTERNAL void llm__blocks_truncate(struct llm__blocks *bm, struct llm__seq *sq, int len);

LLM__INTERNAL void llm__blocks_release(struct llm__blocks *bm, struct llm__seq *sq);

// The backend's KV memory: block b's rows of layer l are rows [b * block_size, (b + 1) *
// block_size) of k_layer[l] and v_layer[l].
struct llm__kv_cache {
    int type;                      // LLM__TYPE_F16 (default) or LLM__TYPE_F32
    int block_size, n_blocks;
    size_t row_bytes;              // one token of one layer: n_head_kv * head_dim values
    struct llm__buf k, v;          // [n_layer][n_blocks * block_size][n_head_kv * head_dim] each
    struct llm__tensor *k_layer;   // [n_layer] views of k
    struct llm__tensor *v_layer;
};

LLM__INTERNAL enum llm_status llm__kv_cache_init(struct llm__kv_cache *kv, const struct llm__model *m,
                                                 struct llm_backend *be, int type, int block_size, size_t bytes,
                                                 struct llm__err *e);

LLM__INTERNAL void llm__kv_cache_free(struct llm__kv_cache *kv, struct llm_backend *be);

// === src/sampler.c ===

struct llm_sampler {
    struct llm_sampling_params p;
    int n_vocab;
    uint64_t rng[4];          // xoshiro256**
    float *probs;             // [n_vocab]
    int32_t *idx;             // [n_vocab]
    float *work;              // [n_vocab] penalised logits
    int32_t *hist;            // the last penalty_last_n tokens, a ring
    int n_hist, hist_pos;
    int32_t *count;           // [n_vocab] zeros, but while the penalties count occurrences
};

LLM__INTERNAL bool llm__sampling_params_ok(const struct llm_sampling_params *p);

LLM__INTERNAL bool llm__all_finite(const float *x, size_t n);

LLM__INTERNAL int llm__cmp_i32(const void *a, const void *b);

LLM__INTERNAL int llm__sampler_dist(llm_sampler *s, const float *logits_in, double *sum_out);

LLM__INTERNAL int32_t llm__sampler_draw(llm_sampler *s, int m, double sum, int32_t skip, double w_skip);

LLM__INTERNAL int32_t llm__sampler_sample_checked(llm_sampler *s, const float *logits_in, bool (*ok)(void *, int32_t),
                                                  void *ctx);

LLM__INTERNAL int32_t llm__sampler_verify(llm_sampler *s, const float *logits, int32_t draft, const float *q,
                                          bool *accepted);

LLM__INTERNAL double llm__top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out);

// === src/tokenizer.c, src/chat.c: vocabularies, tokenization, chat templates ===

struct llm__vocab {
    enum llm__vocab_type type;
    enum llm__pre_type pre;
    int n;
    const struct llm__gguf_str *text;   // [n] into the mapped file
    float *scores;                      // [n]
    uint8_t *attr;                      // [n] enum llm__tok_attr
    uint8_t *eog;                       // [n] ends a generation
    int32_t bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    bool exact;                         // a Hugging Face directory's: token types as tokenizer.json
                                        // has them; SPM tokens scored -inf are never merged
    uint8_t prepend;                    // SPM: where the space in front goes: 0 every text after a
                                        // special token (llama.cpp's rule); a Hugging Face
                                        // Metaspace's (tokenizer.ggml.prepend_scheme, only in
                                        // directories): 1 "always", the same unless the text
                                        // starts with a space; 2 "first", only at the start
    uint32_t *ht;                       // token text -> id + 1, 0 = empty
    uint32_t ht_mask;
    const struct llm__gguf_str *merges; // BPE: "left right", by rank
    int n_merges;
    uint32_t *mht;                      // merge text -> rank + 1
    uint32_t mht_mask;
    int32_t *special;                   // control, user-defined and unknown tokens, longest text first
    int n_special;
    uint8_t *rstrip;                    // [n] or NULL: the whitespace after this special token is
                                        // dropped (llama.cpp's RSTRIP, given to Phi-3's tokens)
    size_t max_token_bytes;             // the most bytes of text a token stands for, when every byte
                                        // becomes part of a token (0: some can be dropped); see
                                        // llm__vocab_token_bound
    int32_t byte_tok[256];              // SPM: id of <0xNN>
    int16_t bpe_byte[324];              // BPE: code point -> byte (GPT-2's byte-to-unicode, inverted), -1: none
    char bpe_enc[256][2];               // BPE: byte -> UTF-8 of its code point (1 or 2 bytes)
    uint8_t bpe_enc_len[256];
    char chat_template[16];             // recognised tokenizer.chat_template, "" when none
};

LLM__INTERNAL void llm__vocab_free(struct llm__vocab *v);

LLM__INTERNAL void llm__chat_template_recognise(struct llm__vocab *v, const struct llm__gguf *g);

LLM__INTERNAL enum llm_status llm__vocab_load(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                              struct llm__err *e);

enum { LLM__CP_LETTER = 1, LLM__CP_NUMBER = 2, LLM__CP_PUNCT = 4, LLM__CP_SPACE = 8, LLM__CP_ANY = 16 };

LLM__INTERNAL int llm__cp_flags(uint32_t cp);

LLM__INTERNAL size_t llm__utf8_len(uint8_t c);

LLM__INTERNAL uint32_t llm__utf8_next(const uint8_t *s, size_t n, size_t *off);

struct llm__split { size_t *len; size_t n, cap; bool oom; };

LLM__INTERNAL int llm__tokenize(const struct llm__vocab *v, const char *text, size_t len, int flags, int32_t *ids,
                                int cap, struct llm__err *e);

LLM__INTERNAL int llm__token_piece(const struct llm__vocab *v, int32_t id, bool special, char *buf, size_t size);

LLM__INTERNAL void llm__stream_feed(struct llm_text_stream *u, const char *s, size_t n, struct llm__outbuf *out,
                                    bool flush);

LLM__INTERNAL int llm__outbuf_emit(struct llm__outbuf *o, char *buf, size_t size);

LLM__INTERNAL bool llm__detokenize(const struct llm__vocab *v, const int32_t *ids, int n, int flags,
                                   struct llm__outbuf *o);

LLM__INTERNAL void llm__stream_push(const struct llm__vocab *v, struct llm_text_stream *st, int32_t id, int flags,
                                    struct llm__outbuf *o);

LLM__INTERNAL int llm__chat_apply(const char *name, const struct llm_chat_message *msg, int n, bool add_assistant,
                                  struct llm__outbuf *o);

// === src/grammar.c: GBNF grammars, a request's matcher, token masks ===

#define LLM__CP_MAX 0x10FFFFu             // the largest code point
#define LLM__GRAMMAR_MAX_RULES 65536     // rules, with those made for groups and repetitions
#define LLM__GRAMMAR_MAX_ELEMS (1 << 20) // elements of all rules
#define LLM__GRAMMAR_MAX_REPEAT 10000    // x{m,n}: m and n at most
#define LLM__GRAMMAR_MAX_DEPTH 100       // groups in groups
#define LLM__GRAMMAR_MAX_NODES (1u << 21)  // a matcher's stack nodes
#define LLM__GRAMMAR_MAX_TOKEN 1024      // bytes of a token, at most
#define LLM__GRAMMAR_CACHE 64            // a matcher's cached masks

// A compiled grammar (read-only: requests share it). Element: kind in the low 2 bits (END, CHARS,
// REF), its argument above (CHARS: a code point set, REF: a rule).
struct llm__grammar {
    uint32_t *elem;            // [n_elem] every rule's alternatives, each ending in END
    uint32_t *alt;             // each alternative's first element
    uint32_t *rule_alt;        // [n_rule + 1] rule r's alternatives: alt[rule_alt[r] .. rule_alt[r + 1])
    int n_elem, n_rule, root;
    uint32_t *cs_off;          // [n_cs + 1] set s: ranges rng[2k], rng[2k + 1] for k in [cs_off[s], cs_off[s + 1])
    uint32_t *rng;
    uint64_t (*cs_ascii)[2];   // [n_cs] the set's code points below 128, as bits
    int n_cs;
    char *text;                // its source
    int refs;                  // requests using it
};

// A vocabulary's tokens by their bytes: trie nodes in depth-first order.
struct llm__gtrie {
    uint8_t *byte;             // [n] the node's byte
    uint16_t *depth;           // [n] 1 for the first byte of a token
    uint32_t *skip;            // [n] the node after its subtree
    uint32_t *tok_off;         // [n + 1] the tokens whose bytes end at node i: tok[tok_off[i] .. tok_off[i + 1])
    int32_t *tok;
    uint32_t n;
    int max_depth;
    uint32_t *tb_off;          // [n_vocab + 1] token id's bytes: tb[tb_off[id] .. tb_off[id + 1]) (none:
    uint8_t *tb;               // a special or end-of-generation token)
    int32_t *eog;              // [n_eog] the end-of-generation tokens
    int n_eog, n_vocab;
};

// A state being computed: stacks pool[off .. off + n), and a code point in progress (need bytes
// still to come, its bits so far in cp).
struct llm__gstate { size_t off; int n; uint32_t cp, need; };

struct llm__gcache { uint32_t *key; uint64_t hash; int n; uint32_t cp, need; };

// A state as a DFA state: its stacks (dset_ids[off .. off + n), sorted) and code point in progress,
// and where each byte leads (next[b]: a state, -1 none, -2 not known yet; NULL: none known).
// A set of stacks between code points as a DFA state: its stacks (dset_ids[off .. off + n),
// sorted) and where each byte leads (next[b]: ASCII: a state, -1 none, -2 not known yet; a lead
// byte: 0 a code point it starts can come, -1 none can; NULL: nothing known).
struct llm__gdset { size_t off; int n; uint64_t hash; int32_t *next; };
#define LLM__GRAMMAR_DSETS 16384          // DFA states a matcher keeps (then it starts again)
#define LLM__GRAMMAR_CPS (1 << 16)        // its table of multi-byte transitions (slots)

// A request's matcher: its stacks (interned nodes), its state, scratch space and cached masks.
struct llm__gmatch {
    const struct llm__grammar *g;
    uint32_t *npos, *npar;     // node n: the element where it goes on, the node it returns to
    uint32_t *mark;            // per node: the expansion that saw it last
    uint32_t *ht;              // (pos, parent) -> node + 1, 0 = empty
    uint32_t n_nodes, cap_nodes, ht_mask, gen;
    uint32_t *cur;             // the current state: its stacks, sorted (0: the text may end here)
    int n_cur, cur_cap;
    uint32_t cp, need;         // and the code point in progress
    uint32_t *pool, *work;     // scratch: states, nodes to expand
    size_t pool_n, pool_cap, work_n, work_cap;
    struct llm__gcache cache[LLM__GRAMMAR_CACHE];
    uint64_t *cache_mask;      // [LLM__GRAMMAR_CACHE][words of n_vocab bits]
    int cache_next;
    long cache_hits, cache_misses;
    struct llm__gdset *dsets;  // the states met, as a DFA built as it is walked
    int n_dsets, cap_dsets, cur_dset;   // cur_dset: the current state's, -1 when not known
    uint32_t *dset_ids, *dset_ht, dset_ht_mask;
    size_t dset_ids_n, dset_ids_cap;
    uint64_t *cp_key;          // (state, bits so far) + 1 -> cp_val: a state (a code point completed),
    int32_t *cp_val;           // 0 (more bytes can come), -1 (none can)
    uint32_t cp_mask;
    int n_cp;
    bool oom, full;            // out of memory; more than LLM__GRAMMAR_MAX_NODES nodes
    struct llm__err err;
};

LLM__INTERNAL struct llm__grammar *llm__grammar_parse(const char *text, const char *root, struct llm__err *e);
LLM__INTERNAL void llm__grammar_free(struct llm__grammar *g);
LLM__INTERNAL bool llm__gmatch_init(struct llm__gmatch *m, const struct llm__grammar *g);
LLM__INTERNAL void llm__gmatch_free(struct llm__gmatch *m);
LLM__INTERNAL bool llm__gmatch_ok(struct llm__gmatch *m, const void *s, size_t n);
LLM__INTERNAL bool llm__gmatch_accept(struct llm__gmatch *m, const void *s, size_t n);
LLM__INTERNAL bool llm__gmatch_can_end(const struct llm__gmatch *m);
LLM__INTERNAL bool llm__gmatch_must_end(const struct llm__gmatch *m);
LLM__INTERNAL bool llm__gtrie_build(struct llm__gtrie *t, const struct llm__vocab *v);
LLM__INTERNAL void llm__gtrie_free(struct llm__gtrie *t);
LLM__INTERNAL bool llm__gmatch_mask(struct llm__gmatch *m, const struct llm__gtrie *t, uint64_t *mask);
LLM__INTERNAL bool llm__gmatch_token_ok(struct llm__gmatch *m, const struct llm__gtrie *t, int32_t id);
LLM__INTERNAL bool llm__gmatch_token(struct llm__gmatch *m, const struct llm__gtrie *t, int32_t id);
LLM__INTERNAL int32_t llm__grammar_sample(llm_sampler *s, struct llm__gmatch *m, const struct llm__gtrie *t,
                                          const float *logits, uint64_t *mask, float *row);
LLM__INTERNAL bool llm__grammar_row(struct llm__gmatch *m, const struct llm__gtrie *t, const float *logits, int n,
                                    uint64_t *mask, float *row);

// === src/quantize.c: quantizing model files ===

struct llm__ftype { const char *name; int ftype, type; };

LLM__INTERNAL const struct llm__ftype *llm__ftype_by_name(const char *name);

// The state of llama-quantize's type choice across a file's tensors (taken in file order).
struct llm__qmix {
    int ftype, type;          // the file type and its base tensor type
    bool pure, tied;          // tied: no output.weight (the embedding is the output projection)
    bool is_70b;              // llama.cpp's LLM_TYPE_70B: 80 layers of llama (with GQA) or qwen2
    int n_layer, n_gqa, n_attn_v, i_attn_v, i_ffn_down, n_fallback;
    int n_expert;             // expert_count (0: none); llama.cpp's rules for exactly 8 experts
};

LLM__INTERNAL enum llm_status llm__qmix_init(const struct llm__gguf *g, struct llm__qmix *q, struct llm__err *e);

LLM__INTERNAL int llm__qmix_type(struct llm__qmix *q, const struct llm__gguf_tensor *t);

LLM__INTERNAL int llm__tensor_layer(const char *name);

LLM__INTERNAL int llm__tensor_order(const void *a, const void *b);

LLM__INTERNAL bool llm__fwrite(FILE *f, const void *p, size_t n);

// A tensor's data decided before the file is written (calibrated quantization): its type and bytes.
struct llm__qrepl { int type; const void *data; size_t size; };

LLM__INTERNAL enum llm_status llm__quantize_gguf(struct llm__gguf *g, const struct llm_quantize_params *params,
                                                 const struct llm__ftype *ft, const struct llm__qrepl *repl,
                                                 struct llm_quantize_stats *st_, struct llm__err *e);

// === src/api.c (the engine), src/scheduler.c, step.c, stops.c, speculative.c: serving ===

// Serving (src/scheduler.c): requests, the step's plan, their memory.
struct llm__req;

struct llm__plan_entry;

LLM__INTERNAL enum llm_status llm__serving_init(llm_engine *E, struct llm__err *e);

LLM__INTERNAL void llm__serving_free(llm_engine *E);

LLM__INTERNAL enum llm_status llm__seq_eval_chunk(llm_engine *E, struct llm__seq *s, const int32_t *tokens, int n,
                                                  int n_logits, float *logits);

// The serving queue of an engine (src/scheduler.c): its requests, a step's plan, its outputs.
struct llm__sched {
    struct llm__req **reqs, **q_run, **q_wait;   // [cap_reqs]; q_wait: a heap (see llm__wait_push)
    struct llm__plan_entry *plan;                // [cap_reqs] a step's plan
    int n_reqs, cap_reqs, next_id, n_wait;
    long long n_arrivals, n_preemptions, n_steps;
    long long prefix_query_tokens, prefix_hit_tokens;   // prompt tokens looked up in the prefix cache, found
    struct llm_output *outs;
    size_t *out_off;
    int cap_outs;
    struct llm__outbuf arena;  // the new text of a step's outputs
};

// Speculative decoding's state (src/speculative.c): its counters (llm_engine_stats), the step
// times its cost model decides from, the draft model.
struct llm__spec {
    long long proposed[LLM__MAX_SPEC], accepted[LLM__MAX_SPEC], verifications, emitted;
    double draft_seconds, verify_seconds;
    double t_step[LLM__TSTEP + 1];   // measured forward-pass seconds of steps of T tokens (decayed mean; 0: none yet)
    bool t_step_warm[LLM__TSTEP + 1];   // a step of T tokens has run (the first is not measured)
    bool always;               // tests: every proposed draft is verified (no cost model)
    llm_engine *draft;         // speculative_model's engine (its requests' sequences are the requests')
    float *q;                  // [LLM__SPEC_REQS][K][n_vocab] the draft's distributions of a step's drafts
    double t_draft;            // measured seconds of a draft round of one token per request (llm__time_update)
    double t_draft0;           // the same for a first round, which also catches up (usually 1-3 tokens)
    double t_busy;             // seconds of the steps that computed something (llm_step: schedule to execute)
    double t_forced;           // seconds of the draft model's forced rounds (the first drafts, probes)
    struct llm__plan_entry *de;   // [2 * LLM__SPEC_REQS] a draft round's plan (speculative_model)
};

struct llm_engine {
    struct llm_engine_params params;
    struct llm__err err;
    struct llm__model model;
    struct llm__vocab vocab;
    struct llm_backend be;
    struct llm__kv_cache kv;   // the KV memory (backend buffers)
    struct llm__blocks blocks; // which tokens its blocks hold (host bookkeeping)
    struct llm__acts acts;
    int max_model_len;
    struct llm__seq *seqs;     // llm_seq_new's sequences
    int n_seqs;
    // host arrays of one step (llm__prepare): [acts.max_tokens] each; block tables
    // [max_num_seqs][cap_tables]
    int32_t *st_tokens, *st_pos, *st_seq, *st_slot, *st_out, *st_tables;
    int cap_tables;
    float *step_logits;        // [acts.max_out][n_vocab] llm_step's logit rows
    struct llm__prof *prof;   // per-module times when profiling (&prof_data), else NULL
    struct llm__prof prof_data;
    char unsupported[512];    // LLM_LOAD_METADATA: why a full load would fail
    struct llm__sched sched;   // serving: the requests, their queues, a step's plan and outputs
    struct llm__spec spec;     // speculative decoding
    struct llm__gtrie gtrie;   // grammars: the vocabulary's token trie (made by the first request with one)
    bool gtrie_built;
    long long g_tokens, g_masks, g_hits;   // grammars: tokens chosen under one, masks computed, cache hits
    double g_seconds;          // and the time spent on them
    float *g_row;              // [n_vocab] a logit row with the tokens a grammar refuses at -inf
    uint64_t *g_mask;          // [n_vocab bits] the tokens it allows
};

LLM__INTERNAL bool llm__ids_ok(llm_engine *E, const int32_t *ids, int n, const char *what);

enum llm__req_state { LLM__REQ_WAITING, LLM__REQ_RUNNING, LLM__REQ_DONE };

// --- stop strings: one automaton over all of a request's stop strings (Aho-Corasick) ---
//
// The trie of the strings, each node a prefix of some string; a node's fail link is the node of
// the longest proper suffix of its prefix that is also a prefix of some string. Children are found
// in a hash table keyed by (node, byte). Scanning the text byte by byte keeps the node of the
// longest end of the text that is a prefix of a stop string: every byte moves down one edge or
// follows fail links up (each step up shortens that end, which only moves down one byte per byte
// read), so the whole text costs O(its length) however many or long the strings are, and each
// new token costs only what its bytes can complete.
#define LLM__MAX_STOP 64            // stop strings per request, at most

#define LLM__MAX_STOP_BYTES 16384   // their bytes in all, at most

struct llm__stop_node {
    int32_t parent, fail;
    int32_t depth;     // the prefix's length
    int32_t out;       // the longest stop string that ends the prefix (0: none)
    uint8_t byte;      // the edge from the parent
    bool final;        // the prefix is a whole stop string
};

struct llm__stops {
    struct llm__stop_node *node;   // [n_node]; node 0 is the empty prefix
    int n_node;
    uint32_t *key;     // [mask + 1] hash table: (node << 8 | byte) + 1, 0 for an empty slot
    int32_t *child;    // [mask + 1] the child of that key
    uint32_t mask;
    int shift;         // 64 - log2(mask + 1)
    uint64_t mult;     // the hash's seed, drawn for each automaton: the request chooses every key (its
                       // bytes), so a fixed hash could be steered to put them in one run of slots
    uint64_t steps;    // edges and fail links taken (the tests check it stays linear)
    uint64_t probes;   // hash table slots looked at (the tests check they stay few)
    // the n choices of a request (added one after the other with the same strings) share one
    // automaton: its strings, to compare, and how many requests hold it
    char *strs;        // the strings, each with its NUL
    size_t strs_len;
    int n_strs, refs;
    struct llm__stop_pos { int32_t state; size_t scanned; } pos;   // the tests' own text (a request has its own)
};

LLM__INTERNAL bool llm__stops_same(const struct llm__stops *a, const char *const *stops, int n);

LLM__INTERNAL bool llm__stops_build(struct llm__stops *a, const char *const *stops, int n);

LLM__INTERNAL long llm__stops_scan(struct llm__stops *a, struct llm__stop_pos *pos, const char *text, size_t n,
                                   size_t *hold);

struct llm__req {
    int id;
    enum llm__req_state state;
    int32_t *tokens;            // [cap_tokens] the prompt, then the output
    int n_tokens, cap_tokens, n_prompt;
    struct llm_logprob *logprobs;   // [cap_tokens - n_prompt][p.logprobs] per output token (p.logprobs > 0)
    float *token_logprobs;      // [cap_tokens - n_prompt]: each output token's own (p.logprobs > 0)
    int n_computed;             // tokens whose K and V are in the cache
    int n_cached;               // prompt tokens found in the prefix cache at first admission
    bool admitted_once;
    struct llm__seq seq;
    llm_sampler *smp;
    struct llm_request_params p;   // n_stop / n_stop_token_ids: of the copies below
    struct llm__stops *stops;   // the automaton of the stop strings (p.n_stop of them), maybe shared
    struct llm__stop_pos stop_pos;   // where this request's text is in it
    int32_t *stop_ids;          // a copy, sorted, without repeats (p.n_stop_token_ids of them)
    long long arrival;          // order of arrival
    double t_arrival, t_first, t_last;
    float *itl;
    int n_itl, cap_itl;
    struct llm_text_stream ts;
    struct llm__outbuf text;    // text so far (a stop string cut off)
    size_t text_sent;           // bytes of it reported
    size_t text_hold;           // bytes at its end that may start a stop string (not reported yet)
    int out_sent;               // tokens reported
    enum llm_finish_reason finish;   // LLM_FINISH_NONE while running
    char *error;                // LLM_FINISH_ERROR: why (NULL when there was no memory for it)
    int n_preempt;
    struct llm__seq dseq;       // draft model: the KV of its tokens in the draft's cache
    llm_sampler *dsmp;          // draft model: the request's sampling on the draft's logits
    int spec_q;                 // draft model, this step: its rows of E->spec.q (-1: none)
    double spec_kept, spec_missed;   // speculation: drafts kept, and verifications that rejected one
                                     // (decayed counts; the acceptance estimate)
    bool reported_done;
    int wait_pos;               // its index in the waiting heap E->q_wait, -1 when not waiting
    uint64_t ngram_steps;       // tokens compared by its n-gram lookups (the tests check the bound)
    struct llm__grammar *grammar;   // p.grammar compiled (maybe shared), or NULL
    struct llm__gmatch *gm;     // its matcher: where the text is in it
};

LLM__INTERNAL void llm__req_free(llm_engine *E, struct llm__req *r);

LLM__INTERNAL struct llm__req *llm__req_find(const llm_engine *E, int id);

LLM__INTERNAL void llm__wait_push(llm_engine *E, struct llm__req *r);

LLM__INTERNAL void llm__wait_remove(llm_engine *E, struct llm__req *r);

// What one step computes: the scheduler's decisions as plain data, in the order of the step's
// sequences (their logit rows come in the same order).
//
// Each entry computes n_compute tokens of a sequence from position `start` and wants the logits
// of its last n_logits tokens. Today n_logits is 0 (a prompt chunk that does not reach the end)
// or 1 (the next token is sampled from the last row). Speculative decoding fits in as it is:
// the request's tokens end with k draft tokens, the entry computes them with the last accepted
// token (n_compute = 1 + k) and wants all their rows (n_logits = 1 + k); postprocess verifies the
// drafts row by row and gives back the KV of the rejected ones with llm__blocks_truncate before
// the full blocks are committed.
struct llm__plan_entry {
    struct llm__req *r;         // NULL in llm_seq_eval's plans
    struct llm__seq *seq;       // its blocks already hold start + n_compute tokens
    const int32_t *tokens;      // [n_compute] the tokens to compute, at positions start, start + 1, ...
    int start;                  // tokens whose K and V are in the cache before the step
    int n_compute;              // a prompt chunk, 1 for a decode, 1 + k to verify k drafts
    int n_logits;               // rows wanted: those of the last n_logits computed tokens
    int n_draft;                // k: the drafts among the computed tokens (after the first)
};

struct llm__plan {
    struct llm__plan_entry *e;  // [n] (at most max_num_seqs)
    int n;
    int n_tokens;               // sum of n_compute (at most max_num_batched_tokens)
    int n_logits;               // sum of n_logits (at most acts.max_out)
    int n_preempted;            // requests preempted to make room (freed, waiting again)
    int n_drafts;               // sum of n_draft: rows beyond one per sequence
};

LLM__INTERNAL bool llm__req_reserve_tokens(struct llm__req *r, int cap);

LLM__INTERNAL enum llm_status llm__prepare(llm_engine *E, const struct llm__plan *plan, struct llm__step *step);

LLM__INTERNAL enum llm_status llm__execute(llm_engine *E, const struct llm__step *step, float *logits);

// === src/calib.c, src/calib_write.c: calibrated quantization ===

struct llm__cal_in {           // one input of a layer's linear layers
    int64_t n, tokens;         // width; tokens seen
    float *h;                  // (n, n) sum of x x^T, upper triangle (GPTQ)
    double *abs_sum;           // (n) sum of |x|
    float *xs;                 // (max_xs, n) every stride-th token (AWQ's losses)
    int n_xs;
};

struct llm__calib {
    struct llm__cal_in *in;    // (n_layer x LLM__CAL_SLOTS)
    int n_layer, max_xs;
    int l0, l1;                // the layers taken in this pass (the others' inputs are passed over)
    bool want_h, fail;         // fail: out of memory
    int64_t stride;
    struct llm__pool *pool;
    llm__vec_dot_fn dot;       // f32 x f32
    float *xt;                 // an input transposed, (n, T)
    size_t xt_cap;
};

LLM__INTERNAL void llm__calib_free(struct llm__calib *c);
LLM__INTERNAL void llm__calib_take(void *calib, int layer, int slot, struct llm__tensor x);

// A layer's matrix being quantized (a 2-D tensor of the model's GGUF view).
struct llm__qmat {
    int64_t tensor;            // index in the model's tensors
    int layer, slot;           // its input: LLM__CAL_*
    bool qk;                   // attn_q / attn_k (AWQ does not clip them)
    int64_t rows, n;
    float *w;                  // (rows, n) its values (AWQ: scaled, clipped); freed once quantized
    int type;                  // GGUF: the llama.cpp type; hf: -1
    uint8_t *data;             // GGUF: the quantized rows
    uint8_t *q;                // hf: (rows, n) codes, columns in the input's order
    float *scale;              // hf: (rows, n_groups)
    int32_t *zero;             // hf: (rows, n_groups)
    int32_t *g_idx;            // hf act-order: (n) each input's group; NULL: input / group
};

struct llm__cq {
    const struct llm_quantize_params *p;
    llm_engine *E;
    struct llm__gguf *g;
    struct llm__calib cal;
    bool hf, awq;
    int bits;
    int64_t group;             // hf: inputs a group (a row: n)
    struct llm__qmat *mats;    // (n_mats)
    int n_mats;
    float **vecs;              // AWQ: per tensor, new f32 values of a norm or bias, or NULL
    int *types;                // GGUF: per tensor, the mix's type
    double done, total;        // progress (matrix elements)
    char *outdir;              // hf: OUTPUT.part, the directory written, renamed OUTPUT when complete
};

LLM__INTERNAL void llm__rm_dir(const char *d);

LLM__INTERNAL int llm__cq_slot(const char *name, bool *qk);

LLM__INTERNAL bool llm__cq_load(struct llm__cq *c, struct llm__qmat *mt);

LLM__INTERNAL void llm__cq_progress(struct llm__cq *c, const struct llm__qmat *mt);

LLM__INTERNAL enum llm_status llm__cq_gptq_layer(struct llm__cq *c, int layer, struct llm__pool *pool,
                                                 struct llm__err *e);

LLM__INTERNAL bool llm__cq_round(struct llm__cq *c, struct llm__qmat *mt, int zmin);

LLM__INTERNAL enum llm_status llm__cq_awq_layer(struct llm__cq *c, int layer, struct llm__pool *pool,
                                                struct llm__err *e);
LLM__INTERNAL int llm__spec_draft_model(llm_engine *E, struct llm__plan *plan);
LLM__INTERNAL int llm__spec_choose(const llm_engine *E, double G, int T, double a, int m, double *gain_out);
LLM__INTERNAL int llm__spec_propose(llm_engine *E, const struct llm__plan *plan, struct llm__req *r);
LLM__INTERNAL void llm__plan_add_drafts(struct llm__plan *plan, struct llm__plan_entry *pe, int k);
LLM__INTERNAL void llm__stops_free(struct llm__stops *a);
