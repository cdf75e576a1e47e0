// === CUDA kernels ===
//
// The device half of the CUDA backend (the host half is backends/cuda.c; the two meet in
// backends/cuda.h). Compiled by nvcc for sm_80 and sm_90 (make CUDA=1), or by g++ against the CPU
// emulator of the tests (make CUDA_EMU=1: tests/cuda_emu/emu.h is included first).
//
// Weights. Quantized weights are repacked at load (llm__cu_layout): each block's quants go to a
// body plane, where a block's quants start on a 16-byte boundary and are read with 128-bit loads,
// the rest of the block (scales, mins, high bits) to a header plane. Every type is read through
// one function per type, decode<T>: 32 consecutive weights of a row as 8 words of int8 quants and
// a scale and an offset per 16 (w = d * q + m), which both the GEMV and the GEMM use.
// Products. Up to LLM__CU_MATVEC_MAX tokens: a warp per weight row, 4 rows a block, with
// activations rounded to 8 bits per 32 (k_quant_act) and __dp4a integer dot products for the
// quantized types, float products for F32/F16/BF16; split across the row's chunks, lanes
// reduced by shuffles. More tokens: a tensor-core GEMM (WMMA 16x16x16, f16 inputs, f32 sums) on
// tiles of 64 weight rows x 64 tokens, weights dequantized into shared memory a 32-column slice at
// a time; F32 weights take the same tiling with f32 multiply-adds (no rounding to f16).
// Attention reads K/V through the block table. Decode: a block per (head, token, split), its 4
// warps taking keys in turn with an online softmax, combined in shared memory; long contexts are
// split across blocks and the parts combined by k_attn_reduce (flash-decoding). Prefill: a block
// per (head, tile of up to 16 consecutive tokens of one sequence), key tiles of 32 in shared
// memory, scores of a query row per warp, online softmax, no score matrix in global memory,
// causal (and sliding-window) masking by position; key tiles past the tile's last query are
// never read. Mixtures of experts: k_moe_route routes each token, k_moe_group lists the step's
// slots by expert, k_matmul_id takes a warp per row of an expert over its slots 8 at a time (as the
// GEMV), k_moe_sum weighs the results together.

#ifndef LLM_CUDA_EMULATED
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#endif
#include <stdint.h>
#include <type_traits>
#include "cuda.h"

// LLM_CU_LAUNCH_FLAT: a kernel without barriers or shuffles (the emulator runs its threads one
// after the other instead of as fibers).
#ifdef LLM_CUDA_EMULATED
#define LLM_CU_LAUNCH(k, g, b, s, st, p) llm_emu_launch(g, b, s, (cudaStream_t)(st), true, [=] { k(p); })
#define LLM_CU_LAUNCH_FLAT(k, g, b, s, st, p) llm_emu_launch(g, b, s, (cudaStream_t)(st), false, [=] { k(p); })
#define LLM_CU_DYN_SMEM(T, name) T *name = (T *)llm_emu_dyn_smem()
#else
#define LLM_CU_LAUNCH(k, g, b, s, st, p) (k<<<g, b, s, (cudaStream_t)(st)>>>(p), cudaGetLastError())
#define LLM_CU_LAUNCH_FLAT LLM_CU_LAUNCH
#define LLM_CU_DYN_SMEM(T, name)                                  \
    extern __shared__ __align__(16) unsigned char llm_cu_smem_[]; \
    T *name = (T *)llm_cu_smem_
#endif

using namespace nvcuda;

// ggml's type numbers (llm.c, "tensor types")
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q2_K = 10, T_Q3_K = 11,
    T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30, T_MXFP4 = 39,
    T_G4_32 = 64, T_G4_64 = 65, T_G4_128 = 66, T_G8_32 = 67, T_G8_64 = 68, T_G8_128 = 69
};

// Per type: elements a block, bytes a block, where the quants (body) lie in it.
struct layout { int type, blck, bytes, body_off, body_len; };
static const layout layouts[] = {
    {T_Q4_0, 32, 18, 2, 16},     {T_Q4_1, 32, 20, 4, 16},     {T_Q5_0, 32, 22, 6, 16},    {T_Q5_1, 32, 24, 8, 16},
    {T_Q8_0, 32, 34, 2, 32},     {T_IQ4_NL, 32, 18, 2, 16},   {T_Q2_K, 256, 84, 16, 64},  {T_Q3_K, 256, 110, 0, 96},
    {T_Q4_K, 256, 144, 16, 128}, {T_Q5_K, 256, 176, 16, 160}, {T_Q6_K, 256, 210, 0, 192}, {T_IQ4_XS, 256, 136, 8, 128},
    {T_G4_32, 32, 20, 4, 16},    {T_G4_64, 64, 36, 4, 32},    {T_G4_128, 128, 68, 4, 64}, {T_G8_32, 32, 36, 4, 32},
    {T_G8_64, 64, 68, 4, 64},    {T_G8_128, 128, 132, 4, 128}, {T_MXFP4, 32, 17, 1, 16},
};

extern "C" int llm__cu_layout(int type, int *body_off, int *body_len, int *hdr_len) {
    if (type == T_F32 || type == T_F16 || type == T_BF16) {
        *body_off = 0, *body_len = 0, *hdr_len = 0;
        return 1;
    }
    for (const layout &l : layouts)
        if (l.type == type) {
            *body_off = l.body_off, *body_len = l.body_len, *hdr_len = l.bytes - l.body_len;
            return 1;
        }
    return 0;
}

// --- small helpers ---

static __device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
static __device__ __forceinline__ float bf2f(uint16_t h) { return __int_as_float((int)((uint32_t)h << 16)); }
// a GEMM tile's element type: f16, or bf16 for BF16 weights (their values and the CPU's bf16
// activations exactly); converted as the CPU converts (to nearest even, overflow to infinity)
template <class E> static __device__ __forceinline__ E to_elem(float f);
template <> __device__ __forceinline__ __half to_elem<__half>(float f) { return __float2half(f); }
template <> __device__ __forceinline__ __nv_bfloat16 to_elem<__nv_bfloat16>(float f) { return __float2bfloat16(f); }
// as the CPU backend rounds activations for BF16 weights: to nearest even (NaN kept a NaN)
static __device__ __forceinline__ float bf16_round(float f) {
    uint32_t u = (uint32_t)__float_as_int(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return f;
    u = (u + 0x7fffu + (u >> 16 & 1u)) & 0xffff0000u;
    return __int_as_float((int)u);
}
// an activation rounded as the CPU backend rounds it for a float weight type (f16 / bf16)
template <int T> static __device__ __forceinline__ float round_act(float x) {
    return T == T_F16 ? __half2float(__float2half(x)) : T == T_BF16 ? bf16_round(x) : x;
}
static __device__ __forceinline__ uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static __device__ __forceinline__ uint32_t ld32u(const uint8_t *p) {   // any alignment
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static __device__ __forceinline__ uint4 ld128(const uint8_t *p) { return *(const uint4 *)p; }   // 16-byte aligned
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// bits 0-3 of x to bit 4 of bytes 0-3
static __device__ __forceinline__ int spread4(uint32_t x) {
    return (int)(((x & 1u) << 4) | ((x & 2u) << 11) | ((x & 4u) << 18) | ((x & 8u) << 25));
}

// IQ4_NL's 16 levels (-127, -104, ..., 113; llm.c: llm__iq4nl_values) as bytes of 4 words: 4
// nibbles (one a byte) become their levels by two byte permutations and a select on bit 3, with
// no table in memory (a __constant__ one would serialise lanes reading different entries)
static __device__ __forceinline__ int iq4_word(uint32_t nib) {
    const uint32_t sel = (nib & 7u) | (nib >> 8 & 7u) << 4 | (nib >> 16 & 7u) << 8 | (nib >> 24 & 7u) << 12;
    const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, sel), hi = __byte_perm(0x26190D01u, 0x71594535u, sel);
    const uint32_t m = (nib >> 3 & 0x01010101u) * 0xFFu;
    return (int)((lo & ~m) | (hi & m));
}

// MXFP4's 16 levels (0, 1, 2, 3, 4, 6, 8, 12 and their negatives; llm.c: llm__mxfp4_values) as
// iq4_word makes IQ4_NL's
static __device__ __forceinline__ int mxfp4_word(uint32_t nib) {
    const uint32_t sel = (nib & 7u) | (nib >> 8 & 7u) << 4 | (nib >> 16 & 7u) << 8 | (nib >> 24 & 7u) << 12;
    const uint32_t lo = __byte_perm(0x03020100u, 0x0C080604u, sel), hi = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);
    const uint32_t m = (nib >> 3 & 0x01010101u) * 0xFFu;
    return (int)((lo & ~m) | (hi & m));
}
// MXFP4's E8M0 scale, halved (2^(e - 128); llm.c: llm__e8m0_half)
static __device__ __forceinline__ float e8m0_half(uint8_t e) {
    return __int_as_float((int)(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23));
}

// 32 consecutive weights of a row: w[i] = d[i / 16] * q[i] + m[i / 16], q[i] the int8 in byte i % 4
// of word i / 4
struct chunk { int q[8]; float d0, d1, m0, m1; };

template <int T> struct tinfo { enum { blck = 32, body = 0, hdr = 0 }; };   // float types: not read by decode
template <> struct tinfo<T_Q4_0> { enum { blck = 32, body = 16, hdr = 2 }; };
template <> struct tinfo<T_Q4_1> { enum { blck = 32, body = 16, hdr = 4 }; };
template <> struct tinfo<T_Q5_0> { enum { blck = 32, body = 16, hdr = 6 }; };
template <> struct tinfo<T_Q5_1> { enum { blck = 32, body = 16, hdr = 8 }; };
template <> struct tinfo<T_Q8_0> { enum { blck = 32, body = 32, hdr = 2 }; };
template <> struct tinfo<T_IQ4_NL> { enum { blck = 32, body = 16, hdr = 2 }; };
template <> struct tinfo<T_Q2_K> { enum { blck = 256, body = 64, hdr = 20 }; };
template <> struct tinfo<T_Q3_K> { enum { blck = 256, body = 96, hdr = 14 }; };
template <> struct tinfo<T_Q4_K> { enum { blck = 256, body = 128, hdr = 16 }; };
template <> struct tinfo<T_Q5_K> { enum { blck = 256, body = 160, hdr = 16 }; };
template <> struct tinfo<T_Q6_K> { enum { blck = 256, body = 192, hdr = 18 }; };
template <> struct tinfo<T_IQ4_XS> { enum { blck = 256, body = 128, hdr = 8 }; };
template <> struct tinfo<T_G4_32> { enum { blck = 32, body = 16, hdr = 4 }; };
template <> struct tinfo<T_G4_64> { enum { blck = 64, body = 32, hdr = 4 }; };
template <> struct tinfo<T_G4_128> { enum { blck = 128, body = 64, hdr = 4 }; };
template <> struct tinfo<T_G8_32> { enum { blck = 32, body = 32, hdr = 4 }; };
template <> struct tinfo<T_G8_64> { enum { blck = 64, body = 64, hdr = 4 }; };
template <> struct tinfo<T_G8_128> { enum { blck = 128, body = 128, hdr = 4 }; };
template <> struct tinfo<T_MXFP4> { enum { blck = 32, body = 16, hdr = 1 }; };

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4)
static __device__ __forceinline__ void scale_min_k4(int j, const uint8_t *s, int &sc, int &mn) {
    if (j < 4) {
        sc = s[j] & 63, mn = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
// Q3_K: the 6-bit scale of sub-block s (of 16), less 32
static __device__ __forceinline__ int scale_q3k(int s, const uint8_t *sc) {
    int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
    int hi = sc[8 + s % 4] >> (2 * (s / 4)) & 3;
    return (lo | hi << 4) - 32;
}

// Nibbles of 16 bytes: low ones are elements 0-15, high ones 16-31.
static __device__ __forceinline__ void nibbles16(uint4 v, chunk &o) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; i++) {
        o.q[i] = (int)(w[i] & 0x0F0F0F0Fu);
        o.q[4 + i] = (int)(w[i] >> 4 & 0x0F0F0F0Fu);
    }
}

// Weights 32c..32c+31 of block blk (counted over the whole weight).
template <int T>
static __device__ __forceinline__ void decode(const uint8_t *__restrict__ body, const uint8_t *__restrict__ hdr, int64_t blk,
                                              int c, chunk &o) {
    const uint8_t *b = body + blk * tinfo<T>::body;
    const uint8_t *h = hdr + blk * tinfo<T>::hdr;
    if (T == T_MXFP4) {
        nibbles16(ld128(b), o);
        for (int i = 0; i < 8; i++) o.q[i] = mxfp4_word((uint32_t)o.q[i]);
        o.d0 = o.d1 = e8m0_half(h[0]);
        o.m0 = o.m1 = 0.0f;
    } else if (T == T_Q4_0 || T == T_IQ4_NL || T == T_Q4_1) {
        nibbles16(ld128(b), o);
        const float d = h2f(ld16(h));
        if (T == T_IQ4_NL)
            for (int i = 0; i < 8; i++) o.q[i] = iq4_word((uint32_t)o.q[i]);
        o.d0 = o.d1 = d;
        o.m0 = o.m1 = T == T_Q4_0 ? -8.0f * d : T == T_Q4_1 ? h2f(ld16(h + 2)) : 0.0f;
    } else if (T == T_Q5_0 || T == T_Q5_1) {
        nibbles16(ld128(b), o);
        const uint32_t qh = ld32u(h + (T == T_Q5_0 ? 2 : 4));
        for (int i = 0; i < 4; i++) {
            o.q[i] |= spread4(qh >> 4 * i & 15);
            o.q[4 + i] |= spread4(qh >> (16 + 4 * i) & 15);
        }
        const float d = h2f(ld16(h));
        o.d0 = o.d1 = d;
        o.m0 = o.m1 = T == T_Q5_0 ? -16.0f * d : h2f(ld16(h + 2));
    } else if (T == T_Q8_0) {
        const uint4 v0 = ld128(b), v1 = ld128(b + 16);
        o.q[0] = (int)v0.x, o.q[1] = (int)v0.y, o.q[2] = (int)v0.z, o.q[3] = (int)v0.w;
        o.q[4] = (int)v1.x, o.q[5] = (int)v1.y, o.q[6] = (int)v1.z, o.q[7] = (int)v1.w;
        o.d0 = o.d1 = h2f(ld16(h));
        o.m0 = o.m1 = 0.0f;
    } else if (T == T_G4_32 || T == T_G4_64 || T == T_G4_128) {
        nibbles16(ld128(b + 16 * c), o);
        const float d = h2f(ld16(h));
        o.d0 = o.d1 = d;
        o.m0 = o.m1 = -(float)(int16_t)ld16(h + 2) * d;
    } else if (T == T_G8_32 || T == T_G8_64 || T == T_G8_128) {
        const uint4 v0 = ld128(b + 32 * c), v1 = ld128(b + 32 * c + 16);
        o.q[0] = (int)v0.x, o.q[1] = (int)v0.y, o.q[2] = (int)v0.z, o.q[3] = (int)v0.w;
        o.q[4] = (int)v1.x, o.q[5] = (int)v1.y, o.q[6] = (int)v1.z, o.q[7] = (int)v1.w;
        const float d = h2f(ld16(h));
        o.d0 = o.d1 = d;
        o.m0 = o.m1 = -(float)(int16_t)ld16(h + 2) * d;
    } else if (T == T_Q4_K || T == T_Q5_K) {
        const uint8_t *qs = b + (T == T_Q5_K ? 32 : 0) + 32 * (c / 2);
        const uint4 v0 = ld128(qs), v1 = ld128(qs + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        const int sh = 4 * (c & 1);
        for (int i = 0; i < 8; i++) o.q[i] = (int)(w[i] >> sh & 0x0F0F0F0Fu);
        if (T == T_Q5_K) {
            const uint4 h0 = ld128(b), h1 = ld128(b + 16);
            const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
            for (int i = 0; i < 8; i++) o.q[i] |= (int)((hw[i] >> c & 0x01010101u) << 4);
        }
        int sc, mn;
        scale_min_k4(c, h + 4, sc, mn);
        o.d0 = o.d1 = h2f(ld16(h)) * (float)sc;
        o.m0 = o.m1 = -h2f(ld16(h + 2)) * (float)mn;
    } else if (T == T_Q6_K) {
        const int hf = c / 4, j = c % 4;
        const uint8_t *ql = b + 64 * hf + 32 * (j & 1), *qh = b + 128 + 32 * hf;
        const uint4 l0 = ld128(ql), l1 = ld128(ql + 16), q0 = ld128(qh), q1 = ld128(qh + 16);
        const uint32_t lw[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
        const uint32_t hw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
        for (int i = 0; i < 8; i++)
            o.q[i] = (int)((lw[i] >> 4 * (j >> 1) & 0x0F0F0F0Fu) | (hw[i] >> 2 * j & 0x03030303u) << 4);
        const float d = h2f(ld16(h + 16));
        o.d0 = d * (float)(int8_t)h[2 * c];
        o.d1 = d * (float)(int8_t)h[2 * c + 1];
        o.m0 = -32.0f * o.d0;
        o.m1 = -32.0f * o.d1;
    } else if (T == T_Q3_K) {
        const int hf = c / 4, j = c % 4;
        const uint4 s0 = ld128(b + 32 + 32 * hf), s1 = ld128(b + 48 + 32 * hf), m0 = ld128(b), m1 = ld128(b + 16);
        const uint32_t sw[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        const uint32_t mw[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
        for (int i = 0; i < 8; i++)
            o.q[i] = (int)((sw[i] >> 2 * j & 0x03030303u) | (mw[i] >> (4 * hf + j) & 0x01010101u) << 2);
        const float d = h2f(ld16(h + 12));
        o.d0 = d * (float)scale_q3k(2 * c, h);
        o.d1 = d * (float)scale_q3k(2 * c + 1, h);
        o.m0 = -4.0f * o.d0;
        o.m1 = -4.0f * o.d1;
    } else if (T == T_Q2_K) {
        const int hf = c / 4, j = c % 4;
        const uint4 v0 = ld128(b + 32 * hf), v1 = ld128(b + 32 * hf + 16);
        const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        for (int i = 0; i < 8; i++) o.q[i] = (int)(w[i] >> 2 * j & 0x03030303u);
        const float d = h2f(ld16(h + 16)), dmin = h2f(ld16(h + 18));
        o.d0 = d * (float)(h[2 * c] & 15);
        o.d1 = d * (float)(h[2 * c + 1] & 15);
        o.m0 = -dmin * (float)(h[2 * c] >> 4);
        o.m1 = -dmin * (float)(h[2 * c + 1] >> 4);
    } else if (T == T_IQ4_XS) {
        nibbles16(ld128(b + 16 * c), o);
        for (int i = 0; i < 8; i++) o.q[i] = iq4_word((uint32_t)o.q[i]);
        const int ls = (h[4 + c / 2] >> 4 * (c % 2) & 15) | (ld16(h + 2) >> 2 * c & 3) << 4;
        o.d0 = o.d1 = h2f(ld16(h)) * (float)(ls - 32);
        o.m0 = o.m1 = 0.0f;
    } else {   // (float types never come here)
        for (int i = 0; i < 8; i++) o.q[i] = 0;
        o.d0 = o.d1 = o.m0 = o.m1 = 0.0f;
    }
}

static __device__ __forceinline__ float chunk_value(const chunk &w, int i) {
    const int q = (int)(int8_t)(w.q[i / 4] >> 8 * (i % 4));
    return i < 16 ? w.d0 * (float)q + w.m0 : w.d1 * (float)q + w.m1;
}

// --- element-wise ops ---

static __device__ __forceinline__ float gelu_ggml(float x) {   // as the CPU backend (llm.c): through half precision
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)));
    return __half2float(__float2half(g));
}

__global__ void k_eltwise(llm__cu_eltwise p) {
    const int64_t r = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= p.rows || c >= p.cols) return;
    const float a = p.a[r * p.sa + c];
    float y;
    switch (p.op) {
    case 0: y = a + p.b[r * p.sb + c]; break;
    case 1: y = a / (1.0f + expf(-a)) * p.b[r * p.sb + c]; break;
    case 2: y = gelu_ggml(a) * p.b[r * p.sb + c]; break;
    case 4: {   // (comparisons as the CPU backend's: a NaN goes on)
        const float g = p.limit < a ? p.limit : a, u0 = p.b[r * p.sb + c];
        const float u = u0 > p.limit ? p.limit : u0 < -p.limit ? -p.limit : u0;
        y = g / (1.0f + expf(p.s * -g)) * (u + 1.0f);
        break;
    }
    default: y = a * p.s; break;
    }
    p.d[r * p.sd + c] = y;
}

// a block of 256 per row; the sum of squares in double, as the CPU's
__global__ void __launch_bounds__(256) k_rmsnorm(llm__cu_rmsnorm p) {
    __shared__ double part[8];
    const int64_t r = blockIdx.x;
    const float *x = p.x + r * p.sx;
    double ss = 0;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) ss += (double)(x[c] * x[c]);
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    double t = 0;
    for (int i = 0; i < 8; i++) t += part[i];
    const float scale = 1.0f / sqrtf((float)(t / (double)p.cols) + p.eps);
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) p.d[r * p.sd + c] = (x[c] * scale) * p.w[c];
}

// one element of row `row` of a weight table, any type (embedding lookups)
template <int T> static __device__ float weight_value(const llm__cu_w &w, int64_t row, int64_t k) {
    if (T == T_F32) return ((const float *)w.body)[row * w.K + k];
    if (T == T_F16) return h2f(((const uint16_t *)w.body)[row * w.K + k]);
    if (T == T_BF16) return bf2f(((const uint16_t *)w.body)[row * w.K + k]);
    const int cpb = tinfo<T>::blck / 32;
    const int64_t ci = k / 32;
    chunk ch;
    decode<T>(w.body, w.hdr, row * (w.K / tinfo<T>::blck) + ci / cpb, (int)(ci % cpb), ch);
    return chunk_value(ch, (int)(k % 32));
}

template <int T> __global__ void k_rows(llm__cu_rows p) {
    const int64_t r = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= p.rows || c >= p.cols) return;
    float v;
    if (p.mode == 0) v = p.src[(int64_t)p.idx[r] * p.ssrc + c];
    else if (p.mode == 1) v = p.src[r * p.ssrc + p.idx[c]];
    else v = weight_value<T>(p.w, p.idx[r], c);
    p.d[r * p.sd + c] = v;
}

// pairs of each head rotated by the token's position: theta = freq_scale * pos * theta_scale^i
// (/ freq_factors[i]), theta_scale^i by repeated products in float as the CPU backend's
__global__ void k_rope(llm__cu_rope p) {
    const int half = p.n_rot / 2;
    const int e = blockIdx.x * blockDim.x + threadIdx.x, h = e / half, i = e % half;
    const int64_t t = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    if (h >= p.n_head || t >= p.rows) return;
    float theta = (float)p.positions[t];
    for (int j = 0; j < i; j++) theta *= p.freq_base;   // (freq_base carries theta_scale)
    const float extrap = p.freq_factors ? theta / p.freq_factors[i] : theta;
    float a = p.freq_scale * extrap, ms = 1.0f;
    if (p.ext_factor != 0.0f) {   // YaRN: the scaled and unscaled angles blended, cos and sin scaled
        const float span = fmaxf(0.001f, p.corr1 - p.corr0);
        const float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, ((float)i - p.corr0) / span))) * p.ext_factor;
        a = a * (1.0f - ramp) + extrap * ramp;
        ms = p.mscale;
    }
    const float c = cosf(a) * ms, s = sinf(a) * ms;
    float *x = p.x + t * p.sx + (int64_t)h * p.head_dim;
    const int i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half : 2 * i + 1;
    const float x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * c - x1 * s;
    x[i1] = x0 * s + x1 * c;
}

// x[r * hd + 0..hd) for rows r < rows rotated in pieces of n (the CPU backend's orthonormal
// Walsh-Hadamard butterflies, in its order), then scaled by s = 1 / sqrt(n); all the block's threads
static __device__ void fwht_rows(float *x, int rows, int hd, int n) {
    const int half = hd / 2;
    for (int h = 1; h < n; h <<= 1) {
        for (int e = threadIdx.x; e < rows * half; e += blockDim.x) {
            const int r = e / half, b = e % half, i = r * hd + (b / h) * 2 * h + b % h;
            const float a = x[i], c = x[i + h];
            x[i] = a + c;
            x[i + h] = a - c;
        }
        __syncthreads();
    }
    const float s = 1.0f / sqrtf((float)n);
    for (int e = threadIdx.x; e < rows * hd; e += blockDim.x) x[e] *= s;
    __syncthreads();
}

// The piece size of a q8_0 cache's rotation of keys (values: 64), 0: none (head_dim % 64 != 0)
static __device__ __forceinline__ int kv_rot_keys(int hd) {
    if (hd % 64 != 0) return 0;
    int n = 64;
    while (hd % (2 * n) == 0) n *= 2;
    return n;
}

// q8_0 (mode 2): a block per (KV head, token row): the head's keys and values rotated, then each
// group of 32 quantized as the CPU's Q8_0 (d = amax / 127, q = round(x / d) half away from 0)
static __device__ void kv_store_q8(const llm__cu_kv_store &p, int64_t t) {
    __shared__ float xs[2 * LLM__CU_MAX_HEAD_DIM];
    const int hd = p.head_dim, head = blockIdx.x, rk = kv_rot_keys(hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        xs[d] = p.k[t * p.sk + (int64_t)head * hd + d];
        xs[hd + d] = p.v[t * p.sv + (int64_t)head * hd + d];
    }
    __syncthreads();
    if (rk) {
        fwht_rows(xs, 1, hd, rk);
        fwht_rows(xs + hd, 1, hd, 64);
    }
    const int groups = hd / 32, g = threadIdx.x;
    if (g >= 2 * groups) return;
    const int which = g < groups ? 0 : 1, c0 = 32 * (g % groups);
    const float *x = xs + which * hd + c0;
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t *row = (uint8_t *)(which ? p.vc : p.kc) + p.slots[t] * (p.n_kv + p.n_kv / 16);
    for (int i = 0; i < 32; i++) {
        const float v = x[i] * id, c = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v == v ? v : 0.0f;
        row[(int64_t)head * hd + c0 + i] = (uint8_t)(int8_t)roundf(c);
    }
    ((__half *)(row + p.n_kv))[((int64_t)head * hd + c0) / 32] = __float2half(d);
}

__global__ void k_kv_store(llm__cu_kv_store p) {
    const int64_t t = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    if (t >= p.rows) return;
    if (p.mode == 2) {
        kv_store_q8(p, t);
        return;
    }
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= p.n_kv) return;
    const int64_t at = (int64_t)p.slots[t] * p.n_kv + c;
    const float k = p.k[t * p.sk + c], v = p.v[t * p.sv + c];
    if (p.mode == 1) {
        ((__half *)p.kc)[at] = __float2half(k);
        ((__half *)p.vc)[at] = __float2half(v);
    } else {
        ((float *)p.kc)[at] = k;
        ((float *)p.vc)[at] = v;
    }
}

// an activation rounded to 8 bits, q x d: as q (and the chunk's d, by its first lane), or (modes
// 4, 5: for cuBLAS) as the f16 of q d
static __device__ __forceinline__ void put_act(const llm__cu_quant_act &p, int64_t r, int64_t k, int q, float d) {
    if (p.mode >= 4) {   // (beyond f16's range: its largest value, as cuBLAS's f16 products cannot do better)
        ((__half *)p.q)[r * p.K + k] = __float2half(fminf(fmaxf((float)q * d, -65504.0f), 65504.0f));
        return;
    }
    p.q[r * p.K + k] = (int8_t)q;
    if (threadIdx.x % 32 == 0) p.dq[r * (p.K / 32) + k / 32] = d;
}

// Activations rounded to 8 bits as the CPU backend rounds them for the weight type (llm.c:
// llm__quantize_q8_0, llm__quantize_q8_K), or converted for cuBLAS (modes 2-5; see cuda.h). Mode
// 0 (Q8_0, for blocks of 32): a warp per 32, d = amax / 127 kept as f16, q = round(x / d) half
// away from zero. Mode 1 (Q8_K, for blocks of 256): a block per 256, iscale = -127 / (the element
// of largest magnitude, the first of equals), q = nearest (even) of x * iscale at most 127, d =
// 1 / iscale for each of its 8 chunks. Modes 4, 5: rounded as 0, 1, written as f16 values.
__global__ void __launch_bounds__(256) k_quant_act(llm__cu_quant_act p) {
    __shared__ float s_amax[8];
    __shared__ int s_idx[8];
    const int64_t r = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    if (r >= p.rows) return;   // (whole blocks)
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p.mode == 2 || p.mode == 3) {   // converted for cuBLAS: to f16 (2) or bf16 (3), as the CPU rounds them
        if (k < p.K) {
            const float x = p.x[r * p.sx + k];
            if (p.mode == 2) ((__half *)p.q)[r * p.K + k] = __float2half(x);
            else ((__nv_bfloat16 *)p.q)[r * p.K + k] = __float2bfloat16(x);
        }
        return;
    }
    const bool in = k < p.K;   // K is a multiple of 32 (mode 1: of 256): whole warps (blocks) are in or out
    if (!in) return;
    const float x = p.x[r * p.sx + k];
    if (p.mode == 0 || p.mode == 4) {
        const float amax = warp_max(fabsf(x));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const float v = fminf(fmaxf(x * id, -127.0f), 127.0f);
        put_act(p, r, k, (int)roundf(v), __half2float(__float2half(d)));
        return;
    }
    float a = fabsf(x);
    int idx = threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) {   // the largest magnitude, the lowest index among equals
        const float a2 = __shfl_xor_sync(0xffffffffu, a, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
        if (a2 > a || (a2 == a && i2 < idx)) a = a2, idx = i2;
    }
    if (threadIdx.x % 32 == 0) s_amax[threadIdx.x / 32] = a, s_idx[threadIdx.x / 32] = idx;
    __syncthreads();
    float am = s_amax[0];
    int im = s_idx[0];
    for (int w = 1; w < 8; w++)
        if (s_amax[w] > am) am = s_amax[w], im = s_idx[w];
    const float mx = p.x[r * p.sx + (k - threadIdx.x) + im];
    if (am == 0.0f) {
        put_act(p, r, k, 0, 0.0f);
        return;
    }
    const float iscale = -127.0f / mx;
    const float v = fminf(fmaxf(iscale * x, -127.0f), 127.0f);
    put_act(p, r, k, min(127, __float2int_rn(v)), 1.0f / iscale);
}

// --- products ---

// Float weights, up to 8 tokens: 8 weights a lane at a time (128-bit loads when rows allow).
template <int T> static __device__ __forceinline__ void load8(const uint8_t *row, int64_t k, bool vec, float w[8]) {
    if (T == T_F32) {
        const float *r = (const float *)row + k;
        if (vec) {
            const float4 a = *(const float4 *)r, b = *(const float4 *)(r + 4);
            w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
        } else {
            for (int i = 0; i < 8; i++) w[i] = r[i];
        }
    } else {
        const uint16_t *r = (const uint16_t *)row + k;
        uint16_t h[8];
        if (vec) {
            const uint4 v = *(const uint4 *)r;
            const uint32_t u[4] = {v.x, v.y, v.z, v.w};
            for (int i = 0; i < 4; i++) h[2 * i] = (uint16_t)u[i], h[2 * i + 1] = (uint16_t)(u[i] >> 16);
        } else {
            for (int i = 0; i < 8; i++) h[i] = r[i];
        }
        for (int i = 0; i < 8; i++) w[i] = T == T_F16 ? h2f(h[i]) : bf2f(h[i]);
    }
}

// Split-K: split blockIdx.y of nsplit takes units [s U / S, (s + 1) U / S) of U (a unit: what a warp
// reads in one step).
static __device__ __forceinline__ void split_range(const llm__cu_matmul &p, int64_t units, int64_t *lo, int64_t *hi) {
    const int64_t s = blockIdx.y, S = p.nsplit > 1 ? p.nsplit : 1;
    *lo = s * units / S;
    *hi = (s + 1) * units / S;
}

// A warp's sums of row n (lane 0 writes): to d, with the bias, or to the split's partial results.
static __device__ __forceinline__ void matvec_out(const llm__cu_matmul &p, int64_t n, const float acc[LLM__CU_MATVEC_MAX]) {
    const int lane = threadIdx.x % 32;
    for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
        if (t < p.ntok) {
            const float s = warp_sum(acc[t]);
            if (lane != 0) continue;
            if (p.nsplit > 1) p.part[((int64_t)blockIdx.y * p.ntok + t) * p.w.N + n] = s;
            else p.d[t * p.sd + n] = s + (p.bias ? p.bias[n] : 0.0f);
        }
}

template <int T> __global__ void __launch_bounds__(128) k_matvec_f(llm__cu_matmul p) {
    const int lane = threadIdx.x % 32;
    const int64_t n = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (n >= p.w.N) return;   // whole warps
    const int64_t K = p.w.K;
    const size_t esz = T == T_F32 ? 4 : 2;
    const uint8_t *row = p.w.body + (size_t)n * (size_t)K * esz;
    const bool vec = (K * (int64_t)esz) % 16 == 0;
    float acc[LLM__CU_MATVEC_MAX] = {0};
    const int64_t K8 = K / 8 * 8;
    int64_t lo, hi;
    split_range(p, (K8 + 255) / 256, &lo, &hi);
    const int64_t kend = hi * 256 < K8 ? hi * 256 : K8;
    for (int64_t k = lo * 256 + lane * 8; k < kend; k += 256) {
        float w[8];
        load8<T>(row, k, vec, w);
        for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
            if (t < p.ntok) {
                const float *x = p.x + t * p.sx + k;
                float s = 0;
                for (int i = 0; i < 8; i++) s += w[i] * round_act<T>(x[i]);
                acc[t] += s;
            }
    }
    for (int64_t k = K8 + lane; k < K && blockIdx.y + 1 == gridDim.y; k += 32) {   // a tail of fewer than 8 columns
        const float w = T == T_F32 ? ((const float *)row)[k] : T == T_F16 ? h2f(((const uint16_t *)row)[k])
                                                                          : bf2f(((const uint16_t *)row)[k]);
        for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
            if (t < p.ntok) acc[t] += w * round_act<T>(p.x[t * p.sx + k]);
    }
    matvec_out(p, n, acc);
}

// Quantized weights, up to 8 tokens: a lane per 32-weight chunk, integer dot products with the
// rounded activations, the scales applied per 16.
template <int T> __global__ void __launch_bounds__(128) k_matvec_q(llm__cu_matmul p) {
    const int lane = threadIdx.x % 32;
    const int64_t n = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (n >= p.w.N) return;   // whole warps
    const int64_t K = p.w.K, nc = K / 32, bpr = K / tinfo<T>::blck;
    const int cpb = tinfo<T>::blck / 32;
    float acc[LLM__CU_MATVEC_MAX] = {0};
    int64_t lo, hi;
    split_range(p, (nc + 31) / 32, &lo, &hi);
    const int64_t cend = hi * 32 < nc ? hi * 32 : nc;
    for (int64_t ci = lo * 32 + lane; ci < cend; ci += 32) {
        chunk w;
        decode<T>(p.w.body, p.w.hdr, n * bpr + ci / cpb, (int)(ci % cpb), w);
        for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
            if (t < p.ntok) {
                const int8_t *a = p.q + t * K + ci * 32;
                const uint4 a0 = *(const uint4 *)a, a1 = *(const uint4 *)(a + 16);
                const int av[8] = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w};
                int s0 = 0, s1 = 0, z0 = 0, z1 = 0;
                for (int i = 0; i < 4; i++) {
                    s0 = __dp4a(w.q[i], av[i], s0);
                    s1 = __dp4a(w.q[4 + i], av[4 + i], s1);
                    z0 = __dp4a(0x01010101, av[i], z0);
                    z1 = __dp4a(0x01010101, av[4 + i], z1);
                }
                acc[t] += p.dq[t * nc + ci] * (w.d0 * (float)s0 + w.m0 * (float)z0 + w.d1 * (float)s1 + w.m1 * (float)z1);
            }
    }
    matvec_out(p, n, acc);
}

// d[t][n] = the splits' partial sums of (t, n), in split order, + bias[n]: a thread per output
__global__ void k_matvec_reduce(llm__cu_matmul p) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.ntok * p.w.N) return;
    const int64_t t = i / p.w.N, n = i % p.w.N;
    float s = 0.0f;
    for (int j = 0; j < p.nsplit; j++) s += p.part[((int64_t)j * p.ntok + t) * p.w.N + n];
    p.d[t * p.sd + n] = s + (p.bias ? p.bias[n] : 0.0f);
}

// --- mixtures of experts ---

// a thread per token: its k experts of the largest logits (ties to the lower index), best first, and
// their weights, as the CPU backend's moe_route (backends/cpu_moe.c)
__global__ void k_moe_route(llm__cu_moe_route p) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.ntok) return;
    const float *lg = p.logits + t * p.sl;
    int32_t *id = p.ids + t * p.si;
    float *w = p.wts + t * p.sw;
    float mx = -INFINITY;
    for (int x = 0; x < p.n_expert; x++) mx = fmaxf(mx, lg[x]);
    float sum = 0.0f;
    for (int x = 0; x < p.n_expert; x++) sum += expf(lg[x] - mx);
    float chosen = 0.0f;
    for (int s = 0; s < p.k; s++) {
        int best = -1;
        for (int x = 0; x < p.n_expert; x++) {
            bool taken = false;
            for (int q = 0; q < s && !taken; q++) taken = id[q] == x;
            if (!taken && (best < 0 || lg[x] > lg[best])) best = x;
        }
        id[s] = best;
        w[s] = expf(lg[best] - mx) / sum;
        chosen += w[s];
    }
    if (p.softmax_weight) {   // a softmax over the k chosen logits alone (the first is the largest)
        float sk = 0.0f;
        for (int s = 0; s < p.k; s++) sk += expf(lg[id[s]] - lg[id[0]]);
        chosen = 0.0f;
        for (int s = 0; s < p.k; s++) chosen += w[s] = expf(lg[id[s]] - lg[id[0]]) / sk;
    }
    const float div = p.norm ? fmaxf(chosen, 6.103515625e-5f) : 1.0f;
    for (int s = 0; s < p.k; s++) {
        w[s] /= div;
        if (p.scale != 0.0f) w[s] *= p.scale;
    }
}

// one block of 256: per expert its count of slots, their offsets, then the slots in the list
__global__ void __launch_bounds__(256) k_moe_group(llm__cu_moe_group p) {
    __shared__ int cnt[LLM__CU_MAX_EXPERTS], fill[LLM__CU_MAX_EXPERTS];
    const int tid = threadIdx.x, E = p.n_expert;
    for (int e = tid; e < E; e += 256) cnt[e] = 0;
    __syncthreads();
    for (int64_t s = tid; s < p.nslots; s += 256) atomicAdd(&cnt[min(max(p.ids[(s / p.k) * p.si + s % p.k], 0), E - 1)], 1);
    __syncthreads();
    if (tid == 0) {
        int at = 0;
        for (int e = 0; e < E; e++) {
            p.out[e] = at;
            fill[e] = at;
            at += cnt[e];
        }
        p.out[E] = at;
    }
    __syncthreads();
    for (int64_t s = tid; s < p.nslots; s += 256)
        p.out[E + 1 + atomicAdd(&fill[min(max(p.ids[(s / p.k) * p.si + s % p.k], 0), E - 1)], 1)] = (int32_t)s;
}

// grid (N / 4 rows, n_expert), 4 warps: a warp per row of the block's expert, over its slots 8 at a
// time, as the GEMV: float weights with the activations rounded as the CPU's (round_act), quantized
// ones by integer dot products with the rounded activations.
template <int T> __global__ void __launch_bounds__(128) k_matmul_id(llm__cu_matmul_id p) {
    const int lane = threadIdx.x % 32, e = blockIdx.y;
    const int64_t r = (int64_t)blockIdx.x * 4 + threadIdx.x / 32, K = p.w.K;
    if (r >= p.w.N) return;   // whole warps
    const int32_t s0 = p.groups[e], s1 = p.groups[e + 1], *list = p.groups + p.n_expert + 1;
    const int64_t n = (int64_t)e * p.w.N + r;   // the row in the stacked weight
    const bool fl = T == T_F32 || T == T_F16 || T == T_BF16;
    for (int32_t c0 = s0; c0 < s1; c0 += LLM__CU_MATVEC_MAX) {
        const int ns = min(LLM__CU_MATVEC_MAX, s1 - c0);
        int64_t xs[LLM__CU_MATVEC_MAX];
        for (int t = 0; t < LLM__CU_MATVEC_MAX; t++) xs[t] = t < ns ? (p.x_per_slot ? list[c0 + t] : list[c0 + t] / p.k) : 0;
        float acc[LLM__CU_MATVEC_MAX] = {0};
        if (fl) {
            const size_t esz = T == T_F32 ? 4 : 2;
            const uint8_t *row = p.w.body + (size_t)n * (size_t)K * esz;
            for (int64_t k = lane; k < K; k += 32) {
                const float wv = T == T_F32 ? ((const float *)row)[k] : T == T_F16 ? h2f(((const uint16_t *)row)[k])
                                                                                   : bf2f(((const uint16_t *)row)[k]);
                for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
                    if (t < ns) acc[t] += wv * round_act<T>(p.x[xs[t] * p.sx + k]);
            }
        } else {
            const int64_t nc = K / 32, bpr = K / tinfo<T>::blck;
            const int cpb = tinfo<T>::blck / 32;
            for (int64_t ci = lane; ci < nc; ci += 32) {
                chunk w;
                decode<T>(p.w.body, p.w.hdr, n * bpr + ci / cpb, (int)(ci % cpb), w);
                for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
                    if (t < ns) {
                        const int8_t *a = p.q + xs[t] * K + ci * 32;
                        const uint4 a0 = *(const uint4 *)a, a1 = *(const uint4 *)(a + 16);
                        const int av[8] = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w};
                        int d0 = 0, d1 = 0, z0 = 0, z1 = 0;
                        for (int i = 0; i < 4; i++) {
                            d0 = __dp4a(w.q[i], av[i], d0);
                            d1 = __dp4a(w.q[4 + i], av[4 + i], d1);
                            z0 = __dp4a(0x01010101, av[i], z0);
                            z1 = __dp4a(0x01010101, av[4 + i], z1);
                        }
                        acc[t] += p.dq[xs[t] * nc + ci] *
                                  (w.d0 * (float)d0 + w.m0 * (float)z0 + w.d1 * (float)d1 + w.m1 * (float)z1);
                    }
            }
        }
        for (int t = 0; t < LLM__CU_MATVEC_MAX; t++)
            if (t < ns) {
                const float v = warp_sum(acc[t]);
                if (lane == 0) p.d[(int64_t)list[c0 + t] * p.sd + r] = v + (p.bias ? p.bias[(int64_t)e * p.sb + r] : 0.0f);
            }
    }
}

// a thread per output: the slots' rows weighted, in order, (+ the shared expert's, gated)
__global__ void k_moe_sum(llm__cu_moe_sum p) {
    const int64_t i = blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.rows || c >= p.cols) return;
    float a = 0.0f;
    for (int j = 0; j < p.k; j++) {
        const float v = p.wts[i * p.sw + j] * p.src[(i * p.k + j) * p.ss + c];
        a = j ? a + v : v;
    }
    if (p.shared) a += 1.0f / (1.0f + expf(-p.gate[i * p.sg])) * p.shared[i * p.ssh + c];
    p.d[i * p.sd + c] = a;
}

// The GEMM: a block of 4 warps computes 64 weight rows x 64 tokens, a 32-column slice of K at a
// time through shared memory: the weights dequantized (threads 0-63, a row each), the
// activations (all threads). TC: f16 (bf16 for BF16 weights) tiles and WMMA (each warp 32 x 32: 2 x 2 fragments); else
// f32 tiles and multiply-adds (each thread 4 rows x 8 tokens).
#define GB 64   // rows and tokens a block
#define GK 32   // columns a slice
#define GP 8    // padding of a tile's rows (f16 elements)

template <int T, bool TC> struct gemm_smem;
template <int T> using gemm_elem = typename std::conditional<T == T_BF16, __nv_bfloat16, __half>::type;
template <int T> struct __align__(128) gemm_smem<T, true> {
    gemm_elem<T> w[GB][GK + GP], x[GB][GK + GP];
    float c[GB][GB + 4];
};
template <int T> struct __align__(128) gemm_smem<T, false> {
    float w[GB][GK + 1], x[GB][GK + 1];
};

template <int T>
static __device__ __forceinline__ void gemm_load_w(const llm__cu_matmul &p, int64_t n0, int64_t k0, float out[GK], int64_t n) {
    if (n >= p.w.N) {
        for (int i = 0; i < GK; i++) out[i] = 0.0f;
        return;
    }
    if (T == T_F32 || T == T_F16 || T == T_BF16) {
        for (int i = 0; i < GK; i++) out[i] = k0 + i < p.w.K ? weight_value<T>(p.w, n, k0 + i) : 0.0f;
    } else {
        const int cpb = tinfo<T>::blck / 32;
        const int64_t ci = k0 / 32;
        chunk ch;
        decode<T>(p.w.body, p.w.hdr, n * (p.w.K / tinfo<T>::blck) + ci / cpb, (int)(ci % cpb), ch);
        for (int i = 0; i < GK; i++) out[i] = chunk_value(ch, i);
    }
    (void)n0;
}

template <int T, bool TC> __global__ void __launch_bounds__(128) k_matmul(llm__cu_matmul p) {
    __shared__ gemm_smem<T, TC> sm;
    const int tid = threadIdx.x, warp = tid / 32;
    const int64_t n0 = (int64_t)blockIdx.x * GB, t0 = (int64_t)blockIdx.y * GB;
    const int64_t K = p.w.K;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    float facc[4][8];
    if (TC) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    } else {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) facc[i][j] = 0.0f;
    }
    for (int64_t k0 = 0; k0 < K; k0 += GK) {
        if (tid < GB) {   // a weight row's 32 columns
            float w[GK];
            gemm_load_w<T>(p, n0, k0, w, n0 + tid);
            for (int i = 0; i < GK; i++) {
                if (TC) ((gemm_elem<T> *)sm.w[tid])[i] = to_elem<gemm_elem<T>>(w[i]);
                else ((float *)sm.w[tid])[i] = w[i];
            }
        }
        for (int e = tid; e < GB * GK; e += 128) {   // activations: token e / 32, column e % 32
            const int tt = e / GK, kk = e % GK;
            const int64_t t = t0 + tt, k = k0 + kk;
            const float v = t < p.ntok && k < K ? round_act<T>(p.x[t * p.sx + k]) : 0.0f;
            if (TC) ((gemm_elem<T> *)sm.x[tt])[kk] = to_elem<gemm_elem<T>>(v);
            else ((float *)sm.x[tt])[kk] = v;
        }
        __syncthreads();
        if (TC) {
            const int wr = (warp / 2) * 32, wt = (warp % 2) * 32;
            for (int ks = 0; ks < GK; ks += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, gemm_elem<T>, wmma::row_major> a[2];
                wmma::fragment<wmma::matrix_b, 16, 16, 16, gemm_elem<T>, wmma::col_major> b[2];
                for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], (const gemm_elem<T> *)&sm.w[wr + 16 * i][ks], GK + GP);
                for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], (const gemm_elem<T> *)&sm.x[wt + 16 * j][ks], GK + GP);
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
            }
        } else {
            const int rr = (tid / 8) * 4, tt = (tid % 8) * 8;   // 16 x 8 threads: 4 rows x 8 tokens each
            for (int kk = 0; kk < GK; kk++)
                for (int i = 0; i < 4; i++) {
                    const float wv = ((const float *)sm.w[rr + i])[kk];
                    for (int j = 0; j < 8; j++) facc[i][j] += wv * ((const float *)sm.x[tt + j])[kk];
                }
        }
        __syncthreads();
    }
    if constexpr (TC) {
        const int wr = (warp / 2) * 32, wt = (warp % 2) * 32;
        float *c = (float *)sm.c;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                wmma::store_matrix_sync(c + (wr + 16 * i) * (GB + 4) + wt + 16 * j, acc[i][j], GB + 4, wmma::mem_row_major);
        __syncthreads();
        for (int e = tid; e < GB * GB; e += 128) {   // token e / 64, row e % 64: rows contiguous in dst
            const int tt = e / GB, rr = e % GB;
            const int64_t t = t0 + tt, n = n0 + rr;
            if (t < p.ntok && n < p.w.N) p.d[t * p.sd + n] = c[rr * (GB + 4) + tt] + (p.bias ? p.bias[n] : 0.0f);
        }
    } else {
        const int rr = (tid / 8) * 4, tt = (tid % 8) * 8;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++) {
                const int64_t t = t0 + tt + j, n = n0 + rr + i;
                if (t < p.ntok && n < p.w.N) p.d[t * p.sd + n] = facc[i][j] + (p.bias ? p.bias[n] : 0.0f);
            }
    }
}

// The GEMM of the quantized types, with the CPU's integer sums: a block of 4 warps computes 64
// weight rows x 64 tokens, a 32-column chunk at a time. The chunk's weight quants (int8, decode<T>)
// and the rounded activations' quants (llm__cu_quant_act) meet in int8 tensor-core products
// (WMMA 16x16x16, int32 sums), one per half chunk (16 columns: the finest scale of any type), each
// warp 32 x 32 (2 x 2 fragments); the sums go through shared memory to be scaled, per row and
// token, as the GEMV scales its dp4a sums: acc += da (d0 S0 + m0 Z0 + d1 S1 + m1 Z1), Z the
// activations' quant sums per half.
#define QR 32   // bytes a row of an int8 half tile (16 quants, padded): WMMA wants 32-byte aligned tiles

struct __align__(128) qgemm_smem {
    signed char w[2][GB][QR], x[2][GB][QR];   // per half chunk: [row or token][16 quants]
    int s[2][GB][GB + 4];        // per half: [row][token] sums
    float wd[GB][4];             // per row: d0, d1, m0, m1
    float xd[GB][3];             // per token: da, Z0, Z1
};

template <int T> __global__ void __launch_bounds__(128) k_matmul_q(llm__cu_matmul p) {
    __shared__ qgemm_smem sm;
    const int tid = threadIdx.x, warp = tid / 32;
    const int64_t n0 = (int64_t)blockIdx.x * GB, t0 = (int64_t)blockIdx.y * GB;
    const int64_t K = p.w.K, nc = K / 32, bpr = K / tinfo<T>::blck;
    const int cpb = tinfo<T>::blck / 32;
    float acc[32];   // this thread's outputs: token tt = tid % 64, rows (tid / 64) * 32 ..
    for (int i = 0; i < 32; i++) acc[i] = 0.0f;
    const int wr = (warp / 2) * 32, wt = (warp % 2) * 32;
    for (int64_t ci = 0; ci < nc; ci++) {
        if (tid < GB) {   // a weight row's chunk
            const int64_t n = n0 + tid;
            chunk ch;
            if (n < p.w.N) {
                decode<T>(p.w.body, p.w.hdr, n * bpr + ci / cpb, (int)(ci % cpb), ch);
            } else {
                for (int i = 0; i < 8; i++) ch.q[i] = 0;
                ch.d0 = ch.d1 = ch.m0 = ch.m1 = 0.0f;
            }
            for (int i = 0; i < 8; i++) ((int *)sm.w[i / 4][tid])[i % 4] = ch.q[i];
            sm.wd[tid][0] = ch.d0, sm.wd[tid][1] = ch.d1, sm.wd[tid][2] = ch.m0, sm.wd[tid][3] = ch.m1;
        } else {          // a token's chunk of rounded activations, and its sums per half
            const int tt = tid - GB;
            const int64_t t = t0 + tt;
            int z0 = 0, z1 = 0;
            if (t < p.ntok) {
                const int *a = (const int *)(p.q + t * K + ci * 32);
                for (int i = 0; i < 8; i++) {
                    ((int *)sm.x[i / 4][tt])[i % 4] = a[i];
                    if (i < 4) z0 = __dp4a(0x01010101, a[i], z0);
                    else z1 = __dp4a(0x01010101, a[i], z1);
                }
                sm.xd[tt][0] = p.dq[t * nc + ci];
            } else {
                for (int i = 0; i < 8; i++) ((int *)sm.x[i / 4][tt])[i % 4] = 0;
                sm.xd[tt][0] = 0.0f;
            }
            sm.xd[tt][1] = (float)z0, sm.xd[tt][2] = (float)z1;
        }
        __syncthreads();
        for (int hf = 0; hf < 2; hf++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b[2];
            wmma::fragment<wmma::accumulator, 16, 16, 16, int> c[2][2];
            for (int i = 0; i < 2; i++) wmma::load_matrix_sync(a[i], &sm.w[hf][wr + 16 * i][0], QR);
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], &sm.x[hf][wt + 16 * j][0], QR);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    wmma::fill_fragment(c[i][j], 0);
                    wmma::mma_sync(c[i][j], a[i], b[j], c[i][j]);
                    wmma::store_matrix_sync(&sm.s[hf][wr + 16 * i][wt + 16 * j], c[i][j], GB + 4, wmma::mem_row_major);
                }
        }
        __syncthreads();
        {
            const int tt = tid % GB, r0 = (tid / GB) * 32;
            const float da = sm.xd[tt][0], z0 = sm.xd[tt][1], z1 = sm.xd[tt][2];
            for (int i = 0; i < 32; i++) {
                const int r = r0 + i;
                acc[i] += da * (sm.wd[r][0] * (float)sm.s[0][r][tt] + sm.wd[r][2] * z0 + sm.wd[r][1] * (float)sm.s[1][r][tt] +
                                sm.wd[r][3] * z1);
            }
        }
        __syncthreads();
    }
    const int tt = tid % GB, r0 = (tid / GB) * 32;
    const int64_t t = t0 + tt;
    if (t < p.ntok)
        for (int i = 0; i < 32; i++) {
            const int64_t n = n0 + r0 + i;
            if (n < p.w.N) p.d[t * p.sd + n] = acc[i] + (p.bias ? p.bias[n] : 0.0f);
        }
}

// --- attention ---

// the cache row of key/value position j of a sequence (its block table row bt)
static __device__ __forceinline__ int64_t kv_slot(const int32_t *bt, int bs, int j) {
    return (int64_t)bt[j / bs] * bs + j % bs;
}
// column col of cache row slot (rows of n_kv values; mode as struct llm__cu_kv_store's)
static __device__ __forceinline__ float kv_value(const void *c, int mode, int64_t slot, int64_t n_kv, int64_t col) {
    if (mode == 2) {
        const uint8_t *row = (const uint8_t *)c + slot * (n_kv + n_kv / 16);
        return (float)(int8_t)row[col] * __half2float(((const __half *)(row + n_kv))[col / 32]);
    }
    return mode ? __half2float(((const __half *)c)[slot * n_kv + col]) : ((const float *)c)[slot * n_kv + col];
}
static __device__ __forceinline__ float softcap(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }

#define AD_MAXD (LLM__CU_MAX_HEAD_DIM / 32)   // dimensions a lane holds

// What a head's unnormalised sum is multiplied by: 1 / l, or with a sink (gpt-oss) its share of
// the softmax once the sink's logit joins the denominator (m: the running max of the scores)
static __device__ __forceinline__ float sink_scale(const llm__cu_attn &p, int h, float m, float l) {
    if (!p.sinks) return l > 0.0f ? 1.0f / l : 0.0f;
    const float sk = p.sinks[h], mx = fmaxf(m, sk), a = expf(m - mx);
    return a / (l * a + expf(sk - mx));
}

// grid (n_tok, n_head, nsplit), 4 warps: warp w takes keys w, w + 4, ... of the split's range
__global__ void __launch_bounds__(128) k_attn_decode(llm__cu_attn p) {
    __shared__ float sm_acc[4][LLM__CU_MAX_HEAD_DIM];
    __shared__ float sm_ml[4][2];
    __shared__ float sm_rot[LLM__CU_MAX_HEAD_DIM];   // q8_0: the query, then the output, rotated
    const int h = blockIdx.y, s = blockIdx.z, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t i = blockIdx.x;
    const int hd = p.head_dim, kvh = h / (p.n_head / p.n_head_kv);
    const int pos = p.st.positions[i], seq = p.st.seq_idx[i];
    const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0, n = pos + 1 - lo;
    const int per = (n + p.nsplit - 1) / p.nsplit;
    const int j0 = lo + s * per, j1 = min(lo + n, j0 + per);
    const int32_t *bt = p.st.block_tables + (int64_t)seq * p.st.bt_stride;
    const int64_t row = (int64_t)p.n_head_kv * hd;
    float q[AD_MAXD], acc[AD_MAXD];
    const int rk = p.mode == 2 ? kv_rot_keys(hd) : 0;
    if (rk) {   // (q8_0: the query rotated as the keys were)
        for (int d = threadIdx.x; d < hd; d += blockDim.x) sm_rot[d] = p.q[i * p.sq + (int64_t)h * hd + d];
        __syncthreads();
        fwht_rows(sm_rot, 1, hd, rk);
    }
    for (int d = 0; d < AD_MAXD; d++) {
        const int dd = lane + 32 * d;
        q[d] = dd < hd ? (rk ? sm_rot[dd] : p.q[i * p.sq + (int64_t)h * hd + dd]) : 0.0f;
        if (p.mode == 1) q[d] = __half2float(__float2half(q[d]));   // (as the CPU backend: f16 queries for f16 keys)
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int j = j0 + warp; j < j1; j += 4) {
        const int64_t slot = kv_slot(bt, p.st.block_size, j), col = (int64_t)kvh * hd;
        float part = 0.0f;
        for (int d = 0; d < AD_MAXD; d++) {
            const int dd = lane + 32 * d;
            if (dd < hd) part += q[d] * kv_value(p.kc, p.mode, slot, row, col + dd);
        }
        const float sc = softcap(warp_sum(part) * p.scale, p.softcap);
        const float mn = fmaxf(m, sc), corr = expf(m - mn), e = expf(sc - mn);
        l = l * corr + e;
        for (int d = 0; d < AD_MAXD; d++) {
            const int dd = lane + 32 * d;
            acc[d] = acc[d] * corr + (dd < hd ? e * kv_value(p.vc, p.mode, slot, row, col + dd) : 0.0f);
        }
        m = mn;
    }
    for (int d = 0; d < AD_MAXD; d++)
        if (lane + 32 * d < hd) sm_acc[warp][lane + 32 * d] = acc[d];
    if (lane == 0) sm_ml[warp][0] = m, sm_ml[warp][1] = l;
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < 4; w++) M = fmaxf(M, sm_ml[w][0]);
    float L = 0.0f, f[4];
    for (int w = 0; w < 4; w++) {
        f[w] = sm_ml[w][1] > 0.0f ? expf(sm_ml[w][0] - M) : 0.0f;
        L += sm_ml[w][1] * f[w];
    }
    // q8_0: the output rotated back as the values were (a split's part before the reduction: it
    // is linear), after the normalisation as on the CPU
    const bool rot = p.mode == 2 && rk;
    if (rot) {
        __syncthreads();   // (every warp is done with sm_rot's query)
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < 4; w++) v += f[w] > 0.0f ? sm_acc[w][d] * f[w] : 0.0f;
            sm_rot[d] = p.nsplit == 1 ? v * sink_scale(p, h, M, L) : v;
        }
        __syncthreads();
        fwht_rows(sm_rot, 1, hd, 64);
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        if (rot) v = sm_rot[d];
        else
            for (int w = 0; w < 4; w++) v += f[w] > 0.0f ? sm_acc[w][d] * f[w] : 0.0f;
        if (p.nsplit == 1) {
            p.out[i * p.so + (int64_t)h * hd + d] = rot ? v : v * sink_scale(p, h, M, L);
        } else {
            float *pt = p.part + ((i * p.n_head + h) * p.nsplit + s) * (int64_t)(hd + 2);
            pt[d] = v;
            if (d == 0) pt[hd] = M, pt[hd + 1] = L;
        }
    }
}

// grid (n_tok, n_head): the splits' sums combined
__global__ void __launch_bounds__(128) k_attn_reduce(llm__cu_attn p) {
    const int h = blockIdx.y, hd = p.head_dim;
    const int64_t i = blockIdx.x;
    const float *pt = p.part + (i * p.n_head + h) * p.nsplit * (int64_t)(hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < p.nsplit; s++)
        if (pt[s * (hd + 2) + hd + 1] > 0.0f) M = fmaxf(M, pt[s * (hd + 2) + hd]);
    float L = 0.0f;
    for (int s = 0; s < p.nsplit; s++) {
        const float l = pt[s * (hd + 2) + hd + 1];
        if (l > 0.0f) L += l * expf(pt[s * (hd + 2) + hd] - M);
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        for (int s = 0; s < p.nsplit; s++) {
            const float l = pt[s * (hd + 2) + hd + 1];
            if (l > 0.0f) v += pt[s * (hd + 2) + d] * expf(pt[s * (hd + 2) + hd] - M);
        }
        p.out[i * p.so + (int64_t)h * hd + d] = v * sink_scale(p, h, M, L);
    }
}

// grid (n_tiles, n_head), 4 warps; tile = (first token, count <= 16) of one sequence, at
// st.tiles. Shared memory: the tile's queries (16 x hd) and a key tile's K and V (32 x (hd + 1)).
#define AP_TK 32
__global__ void __launch_bounds__(128) k_attn_prefill(llm__cu_attn p) {
    LLM_CU_DYN_SMEM(float, sm);
    const int hd = p.head_dim, ld = hd + 1, h = blockIdx.y, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int kvh = h / (p.n_head / p.n_head_kv);
    const int i0 = p.st.tiles[2 * blockIdx.x], cnt = p.st.tiles[2 * blockIdx.x + 1];
    float *Q = sm, *Ks = sm + LLM__CU_TILE_Q * hd, *Vs = Ks + AP_TK * ld;
    const int seq = p.st.seq_idx[i0];
    const int32_t *bt = p.st.block_tables + (int64_t)seq * p.st.bt_stride;
    const int64_t row = (int64_t)p.n_head_kv * hd;
    int pmin = 1 << 30, pmax = 0;
    for (int r = 0; r < cnt; r++) {
        const int pos = p.st.positions[i0 + r];
        pmin = min(pmin, p.window > 0 ? max(0, pos - p.window + 1) : 0);
        pmax = max(pmax, pos);
    }
    for (int e = threadIdx.x; e < LLM__CU_TILE_Q * hd; e += blockDim.x) {
        const int r = e / hd, d = e % hd;
        const float qv = r < cnt ? p.q[(i0 + r) * p.sq + (int64_t)h * hd + d] : 0.0f;
        Q[e] = p.mode == 1 ? __half2float(__float2half(qv)) : qv;
    }
    const int rk = p.mode == 2 ? kv_rot_keys(hd) : 0;
    if (rk) {   // (q8_0: the queries rotated as the keys were)
        __syncthreads();
        fwht_rows(Q, LLM__CU_TILE_Q, hd, rk);
    }
    // each warp: rows warp, warp + 4, warp + 8, warp + 12
    float m[4], l[4], acc[4][AD_MAXD];
    int rpos[4], rlo[4];
    for (int k = 0; k < 4; k++) {
        const int r = warp + 4 * k;
        m[k] = -INFINITY, l[k] = 0.0f;
        rpos[k] = r < cnt ? p.st.positions[i0 + r] : -1;
        rlo[k] = r < cnt && p.window > 0 ? max(0, rpos[k] - p.window + 1) : 0;
        for (int d = 0; d < AD_MAXD; d++) acc[k][d] = 0.0f;
    }
    for (int jt = pmin / AP_TK * AP_TK; jt <= pmax; jt += AP_TK) {
        __syncthreads();   // (the previous tile's reads are done)
        for (int e = threadIdx.x; e < AP_TK * hd; e += blockDim.x) {
            const int jj = e / hd, d = e % hd, j = jt + jj;
            float kv = 0.0f, vv = 0.0f;
            if (j <= pmax) {
                const int64_t slot = kv_slot(bt, p.st.block_size, j), col = (int64_t)kvh * hd + d;
                kv = kv_value(p.kc, p.mode, slot, row, col);
                vv = kv_value(p.vc, p.mode, slot, row, col);
            }
            Ks[jj * ld + d] = kv;
            Vs[jj * ld + d] = vv;
        }
        __syncthreads();
        for (int k = 0; k < 4; k++) {
            const int r = warp + 4 * k;
            if (r >= cnt) continue;   // (uniform over the warp)
            const int j = jt + lane;
            float sc = -INFINITY;
            if (j <= rpos[k] && j >= rlo[k]) {
                float s = 0.0f;
                for (int d = 0; d < hd; d++) s += Q[r * hd + d] * Ks[lane * ld + d];
                sc = softcap(s * p.scale, p.softcap);
            }
            const float mx = warp_max(sc);
            if (mx == -INFINITY) continue;   // no key of this tile for this row
            const float mn = fmaxf(m[k], mx), corr = expf(m[k] - mn), e = expf(sc - mn);
            l[k] = l[k] * corr + warp_sum(e);
            for (int d = 0; d < AD_MAXD; d++) acc[k][d] *= corr;
            for (int jj = 0; jj < AP_TK; jj++) {
                const float ej = __shfl_sync(0xffffffffu, e, jj);
                if (ej == 0.0f) continue;
                for (int d = 0; d < AD_MAXD; d++) {
                    const int dd = lane + 32 * d;
                    if (dd < hd) acc[k][d] += ej * Vs[jj * ld + dd];
                }
            }
            m[k] = mn;
        }
    }
    if (rk) {   // q8_0: the normalised outputs rotated back as the values were (in Q's place)
        __syncthreads();
        for (int k = 0; k < 4; k++) {
            const int r = warp + 4 * k;
            for (int d = 0; d < AD_MAXD; d++) {
                const int dd = lane + 32 * d;
                if (dd < hd) Q[r * hd + dd] = r < cnt ? acc[k][d] * sink_scale(p, h, m[k], l[k]) : 0.0f;
            }
        }
        __syncthreads();
        fwht_rows(Q, LLM__CU_TILE_Q, hd, 64);
    }
    for (int k = 0; k < 4; k++) {
        const int r = warp + 4 * k;
        if (r >= cnt) continue;
        for (int d = 0; d < AD_MAXD; d++) {
            const int dd = lane + 32 * d;
            if (dd < hd)
                p.out[(i0 + r) * p.so + (int64_t)h * hd + dd] = rk ? Q[r * hd + dd] : acc[k][d] * sink_scale(p, h, m[k], l[k]);
        }
    }
}

static size_t attn_prefill_smem(int hd) { return sizeof(float) * ((size_t)LLM__CU_TILE_Q * hd + 2 * AP_TK * (size_t)(hd + 1)); }

// a thread per 32-weight chunk: decoded, rounded to f16, stored as 4 x 16 bytes (K % 32 == 0, out
// 16-byte aligned)
template <int T> __global__ void k_dequant(llm__cu_dequant p) {
    const int64_t nc = p.w.K / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.rows * nc) return;
    const int64_t r = i / nc, ci = i % nc, n = p.row0 + r;
    const int cpb = tinfo<T>::blck / 32;
    chunk ch;
    decode<T>(p.w.body, p.w.hdr, n * (p.w.K / tinfo<T>::blck) + ci / cpb, (int)(ci % cpb), ch);
    uint4 *o = (uint4 *)((__half *)p.out + r * p.w.K + ci * 32);
    for (int v = 0; v < 4; v++) {
        uint32_t u[4];
        for (int j = 0; j < 4; j++) {
            const __half lo = __float2half(chunk_value(ch, v * 8 + 2 * j)), hi = __float2half(chunk_value(ch, v * 8 + 2 * j + 1));
            u[j] = (uint32_t)__half_as_ushort(lo) | (uint32_t)__half_as_ushort(hi) << 16;
        }
        o[v] = make_uint4(u[0], u[1], u[2], u[3]);
    }
}

__global__ void k_copy(llm__cu_copy p) {
    const uint4 *s = (const uint4 *)p.src;
    uint4 *d = (uint4 *)p.dst;
    const size_t n = p.n / 16;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}

// --- launches ---

// Rows split as (y, z) within the 65535 limit of those dimensions.
static dim3 rows_grid(unsigned gx, int64_t rows) {
    const unsigned gy = (unsigned)(rows < 65535 ? rows : 65535);
    return dim3(gx, gy, (unsigned)((rows + gy - 1) / gy));
}

#define LLM_CU_TYPES(X)                                                                                            \
    X(T_F32) X(T_F16) X(T_BF16) X(T_Q4_0) X(T_Q4_1) X(T_Q5_0) X(T_Q5_1) X(T_Q8_0) X(T_IQ4_NL) X(T_Q2_K) X(T_Q3_K) \
    X(T_Q4_K) X(T_Q5_K) X(T_Q6_K) X(T_IQ4_XS) X(T_G4_32) X(T_G4_64) X(T_G4_128) X(T_G8_32) X(T_G8_64) X(T_G8_128) \
    X(T_MXFP4)

template <int T> static cudaError_t launch_typed(int kernel, const llm__cu_params *u, cudaStream_t st) {
    const bool fl = T == T_F32 || T == T_F16 || T == T_BF16;
    switch (kernel) {
    case LLM__CU_ROWS: {
        const llm__cu_rows &p = u->rows;
        void (*k)(llm__cu_rows) = k_rows<T>;
        return LLM_CU_LAUNCH_FLAT(k, rows_grid((unsigned)((p.cols + 255) / 256), p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_MATVEC: {
        const llm__cu_matmul &p = u->matmul;
        const dim3 g((unsigned)((p.w.N + 3) / 4), (unsigned)(p.nsplit > 1 ? p.nsplit : 1));
        void (*k)(llm__cu_matmul) = fl ? k_matvec_f<(fl ? T : T_F32)> : k_matvec_q<(fl ? T_Q8_0 : T)>;
        return LLM_CU_LAUNCH(k, g, dim3(128), 0, st, p);
    }
    case LLM__CU_MATMUL: {
        const llm__cu_matmul &p = u->matmul;
        const dim3 g((unsigned)((p.w.N + GB - 1) / GB), (unsigned)((p.ntok + GB - 1) / GB));
        void (*k)(llm__cu_matmul) = T == T_F32 ? k_matmul<T_F32, false> : fl ? k_matmul<(fl ? T : T_F16), true>
                                                                               : k_matmul_q<(fl ? T_Q8_0 : T)>;
        return LLM_CU_LAUNCH(k, g, dim3(128), 0, st, p);
    }
    case LLM__CU_MATMUL_ID: {
        const llm__cu_matmul_id &p = u->matmul_id;
        void (*k)(llm__cu_matmul_id) = k_matmul_id<T>;
        return LLM_CU_LAUNCH(k, dim3((unsigned)((p.w.N + 3) / 4), (unsigned)p.n_expert), dim3(128), 0, st, p);
    }
    case LLM__CU_DEQUANT: {
        if (fl) return cudaErrorInvalidValue;
        const llm__cu_dequant &p = u->dequant;
        void (*k)(llm__cu_dequant) = k_dequant<(fl ? T_Q8_0 : T)>;
        return LLM_CU_LAUNCH_FLAT(k, dim3((unsigned)((p.rows * (p.w.K / 32) + 255) / 256)), dim3(256), 0, st, p);
    }
    default: return cudaErrorInvalidValue;
    }
}

extern "C" int llm__cu_launch(int kernel, const union llm__cu_params *u, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    switch (kernel) {
    case LLM__CU_ELTWISE: {
        const llm__cu_eltwise &p = u->eltwise;
        return (int)LLM_CU_LAUNCH_FLAT(k_eltwise, rows_grid((unsigned)((p.cols + 255) / 256), p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_RMSNORM: {
        const llm__cu_rmsnorm &p = u->rmsnorm;
        return (int)LLM_CU_LAUNCH(k_rmsnorm, dim3((unsigned)p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_ROPE: {
        const llm__cu_rope &p = u->rope;
        return (int)LLM_CU_LAUNCH_FLAT(k_rope, rows_grid((unsigned)(((int64_t)p.n_head * (p.n_rot / 2) + 63) / 64), p.rows),
                                       dim3(64), 0, st, p);
    }
    case LLM__CU_KV_STORE: {
        const llm__cu_kv_store &p = u->kv_store;
        if (p.mode == 2)   // (a block per KV head and token, with barriers)
            return (int)LLM_CU_LAUNCH(k_kv_store, rows_grid((unsigned)(p.n_kv / p.head_dim), p.rows), dim3(256), 0, st, p);
        return (int)LLM_CU_LAUNCH_FLAT(k_kv_store, rows_grid((unsigned)((p.n_kv + 255) / 256), p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_QUANT_ACT: {
        const llm__cu_quant_act &p = u->quant_act;
        return (int)LLM_CU_LAUNCH(k_quant_act, rows_grid((unsigned)((p.K + 255) / 256), p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_ATTN_DECODE: {
        const llm__cu_attn &p = u->attn;
        return (int)LLM_CU_LAUNCH(k_attn_decode, dim3((unsigned)p.n_tok, (unsigned)p.n_head, (unsigned)p.nsplit), dim3(128),
                                  0, st, p);
    }
    case LLM__CU_ATTN_REDUCE: {
        const llm__cu_attn &p = u->attn;
        return (int)LLM_CU_LAUNCH(k_attn_reduce, dim3((unsigned)p.n_tok, (unsigned)p.n_head), dim3(128), 0, st, p);
    }
    case LLM__CU_ATTN_PREFILL: {
        const llm__cu_attn &p = u->attn;
        return (int)LLM_CU_LAUNCH(k_attn_prefill, dim3((unsigned)p.st.n_tiles, (unsigned)p.n_head), dim3(128),
                                  attn_prefill_smem(p.head_dim), st, p);
    }
    case LLM__CU_MATVEC_REDUCE: {
        const llm__cu_matmul &p = u->matmul;
        return (int)LLM_CU_LAUNCH_FLAT(k_matvec_reduce, dim3((unsigned)((p.ntok * p.w.N + 255) / 256)), dim3(256), 0, st, p);
    }
    case LLM__CU_COPY: {
        const llm__cu_copy &p = u->copy;
        return (int)LLM_CU_LAUNCH_FLAT(k_copy, dim3(1024), dim3(256), 0, st, p);
    }
    case LLM__CU_MOE_ROUTE: {
        const llm__cu_moe_route &p = u->moe_route;
        return (int)LLM_CU_LAUNCH_FLAT(k_moe_route, dim3((unsigned)((p.ntok + 63) / 64)), dim3(64), 0, st, p);
    }
    case LLM__CU_MOE_GROUP: {
        const llm__cu_moe_group &p = u->moe_group;
        return (int)LLM_CU_LAUNCH(k_moe_group, dim3(1), dim3(256), 0, st, p);
    }
    case LLM__CU_MOE_SUM: {
        const llm__cu_moe_sum &p = u->moe_sum;
        return (int)LLM_CU_LAUNCH_FLAT(k_moe_sum, rows_grid((unsigned)((p.cols + 255) / 256), p.rows), dim3(256), 0, st, p);
    }
    case LLM__CU_ROWS: case LLM__CU_MATVEC: case LLM__CU_MATMUL: case LLM__CU_DEQUANT: case LLM__CU_MATMUL_ID: {
        const int type = kernel == LLM__CU_ROWS      ? u->rows.w.type
                         : kernel == LLM__CU_DEQUANT ? u->dequant.w.type
                         : kernel == LLM__CU_MATMUL_ID ? u->matmul_id.w.type
                                                       : u->matmul.w.type;
        if (kernel == LLM__CU_ROWS && u->rows.mode != 2) return (int)launch_typed<T_F32>(kernel, u, st);
        switch (type) {
#define LLM_CU_CASE(T) \
    case T: return (int)launch_typed<T>(kernel, u, st);
            LLM_CU_TYPES(LLM_CU_CASE)
#undef LLM_CU_CASE
        default: return (int)cudaErrorInvalidValue;
        }
    }
    default: return (int)cudaErrorInvalidValue;
    }
}

extern "C" int llm__cu_setup(void) {
#ifdef LLM_CUDA_EMULATED
    return 0;
#else
    return (int)cudaFuncSetAttribute(k_attn_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)attn_prefill_smem(LLM__CU_MAX_HEAD_DIM));
#endif
}
