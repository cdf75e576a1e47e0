// Dot products on x86: AVX2 (+FMA, F16C) and AVX-512 (VNNI)

#include "internal.h"

// --- dot products: AVX2 (+FMA, F16C) ---
//
// Integer products use vpmaddubsw (unsigned 8-bit x signed 8-bit -> pairs summed to 16 bits), so
// weights are brought to unsigned form first; vpmaddwd then sums pairs to 32 bits, optionally
// times a 16-bit scale. Each block's integer sums are converted to float and added into float
// accumulators with the block's scale; horizontal sums happen once per row.

#if defined(LLM__X86_SIMD)

static LLM__AVX2 void llm__vec_dot_f32_avx2(int64_t n, float *s, const void *vw, const void *va) {
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

static LLM__AVX2 void llm__vec_dot_f16_avx2(int64_t n, float *s, const void *vw, const void *va) {
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

static LLM__AVX2 void llm__vec_dot_bf16_avx2(int64_t n, float *s, const void *vw, const void *va) {
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

static LLM__AVX2 void llm__vec_dot_q8_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs),
                                            _mm256_loadu_si256((const __m256i *)a[i].qs));
        const __m256i p1 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i + 1].qs),
                                            _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                               _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs),
                                            _mm256_loadu_si256((const __m256i *)a[i].qs));
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
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nib, a),
                                       _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static LLM__AVX2 void llm__vec_dot_q4_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs), p1 = llm__dot_q4_0_avx2(w[i + 1].qs, a[i + 1].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1),
                               _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
    }
    *s = llm__hsum_avx2(_mm256_add_ps(acc0, acc1));
}

// The block-32 types with a fifth bit or a min (Q4_1, Q5_0, Q5_1) or a grid (IQ4_NL), block by
// block. The 32 quants are spread to bytes in element order (low nibbles, then high ones); bit j
// of qh adds 16 to byte j.

// One weight block of `type` times 32 activations as 8 int32 partial sums (without the min).
// Always inlined so `type` is a constant.
LLM__AVX2 static inline __attribute__((always_inline)) __m256i llm__dot_b32_avx2(int type, const void *blk,
                                                                                 const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), ones = _mm256_set1_epi16(1);
    if (type == LLM__TYPE_Q4_1)
        return _mm256_madd_epi16(
            _mm256_maddubs_epi16(llm__nibbles_avx2(((const struct llm__block_q4_1 *)blk)->qs), a), ones);
    if (type == LLM__TYPE_IQ4_NL || type == LLM__TYPE_MXFP4) {
        const int8_t *values = type == LLM__TYPE_IQ4_NL ? llm__iq4nl_values : llm__mxfp4_values;
        const uint8_t *qs = type == LLM__TYPE_IQ4_NL ? ((const struct llm__block_iq4_nl *)blk)->qs
                                                     : ((const struct llm__block_mxfp4 *)blk)->qs;
        const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values));
        return llm__dot_i8_avx2(_mm256_shuffle_epi8(grid, llm__nibbles_avx2(qs)), a);
    }
    const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qs
                                               : ((const struct llm__block_q5_1 *)blk)->qs;
    const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qh
                                               : ((const struct llm__block_q5_1 *)blk)->qh;
    const __m256i q = _mm256_or_si256(llm__nibbles_avx2(qs),
                                      _mm256_and_si256(llm__qh_bytes_avx2(qh), _mm256_set1_epi8(16)));
    __m256i p = _mm256_maddubs_epi16(q, a);
    if (type == LLM__TYPE_Q5_0) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(16), a));   // q - 16
    return _mm256_madd_epi16(p, ones);
}

// The block-32 dot products (Q4_1, Q5_0, Q5_1, IQ4_NL) at one SIMD level: ATTR its target
// attribute, SFX its suffix (llm__dot_b32_SFX does one block). Per block, llm__b32_step_SFX adds
// block i of the row into acc (and the min term into *summ: Q4_1, Q5_1); llm__vec_dot_b32_SFX is
// the common loop, two blocks per step into two accumulators: Q8_1 activations for the types
// with a min (Q4_1, Q5_1), Q8_0 for the others.
#define LLM__B32_DOTS(ATTR, SFX)                                                                                       \
ATTR static inline __attribute__((always_inline)) __m256 llm__b32_step_##SFX(int type, const void *vw, const void *va, \
                                                                          int64_t i, __m256 acc, float *summ) {        \
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;                                                 \
    const size_t wb = llm__type_table[type].block_bytes,                                                               \
                 ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);                           \
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);             \
    const uint8_t *w = (const uint8_t *)vw + (size_t)i * wb, *a = (const uint8_t *)va + (size_t)i * ab;                \
    uint16_t wd, ad;   /* d leads every block (MXFP4: its exponent) */                                                 \
    memcpy(&wd, w, 2), memcpy(&ad, a, 2);                                                                              \
    const float wf = type == LLM__TYPE_MXFP4 ? llm__e8m0_half(w[0]) : _cvtsh_ss(wd);                                   \
    const __m256i p = llm__dot_b32_##SFX(type, w, (const int8_t *)(a + qoff));                                         \
    if (q81) {   /* m (after d) times s (after d) */                                                                   \
        uint16_t wm, as;                                                                                               \
        memcpy(&wm, w + 2, 2), memcpy(&as, a + 2, 2);                                                                  \
        *summ += _cvtsh_ss(wm) * _cvtsh_ss(as);                                                                        \
    }                                                                                                                  \
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(wf * _cvtsh_ss(ad)), acc);                            \
}                                                                                                                      \
ATTR static inline __attribute__((always_inline)) float llm__vec_dot_b32_##SFX(int type, int64_t n, const void *vw,    \
                                                                            const void *va) {                          \
    const int64_t nb = n / LLM__QK;                                                                                    \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                                     \
    float summ0 = 0.0f, summ1 = 0.0f;                                                                                  \
    int64_t i = 0;                                                                                                     \
    for (; i + 2 <= nb; i += 2) {                                                                                      \
        acc0 = llm__b32_step_##SFX(type, vw, va, i, acc0, &summ0);                                                     \
        acc1 = llm__b32_step_##SFX(type, vw, va, i + 1, acc1, &summ1);                                                 \
    }                                                                                                                  \
    if (i < nb) acc0 = llm__b32_step_##SFX(type, vw, va, i, acc0, &summ0);                                             \
    return llm__hsum_avx2(_mm256_add_ps(acc0, acc1)) + (summ0 + summ1);                                                \
}                                                                                                                      \
ATTR static void llm__vec_dot_q4_1_##SFX(int64_t n, float *s, const void *vw, const void *va) {                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q4_1, n, vw, va);                                                            \
}                                                                                                                      \
ATTR static void llm__vec_dot_q5_0_##SFX(int64_t n, float *s, const void *vw, const void *va) {                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q5_0, n, vw, va);                                                            \
}                                                                                                                      \
ATTR static void llm__vec_dot_q5_1_##SFX(int64_t n, float *s, const void *vw, const void *va) {                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q5_1, n, vw, va);                                                            \
}                                                                                                                      \
ATTR static void llm__vec_dot_iq4_nl_##SFX(int64_t n, float *s, const void *vw, const void *va) {                      \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_IQ4_NL, n, vw, va);                                                          \
}                                                                                                                      \
ATTR static void llm__vec_dot_mxfp4_##SFX(int64_t n, float *s, const void *vw, const void *va) {                       \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_MXFP4, n, vw, va);                                                           \
}
LLM__B32_DOTS(LLM__AVX2, avx2)

// G4 / G8 x Q8_0 (AVX2 and AVX-512 VNNI, the sub-block dot given as DOT): per sub-block of 32,
// the integer sum((q - z) * a) as 8 int32 partial sums, into two float accumulators by turns.
#define LLM__GQ_DOTS(ATTR, SFX, DOT)                                                                                 \
ATTR static inline __attribute__((always_inline)) float llm__vec_dot_gq_##SFX(int type, int64_t n, const void *vw,   \
                                                                           const void *va) {                         \
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), nsub = g / 32;                                     \
    const size_t bb = llm__type_table[type].block_bytes;                                                             \
    const struct llm__block_q8_0 *a = va;                                                                            \
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                                      \
    for (int64_t i = 0; i < n / g; i++, a += nsub) {                                                                 \
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);                        \
        const float d = _cvtsh_ss(b->d);                                                                             \
        for (int c = 0; c < nsub; c++) {                                                                             \
            const __m256i p = DOT(bits, b->qs + (bits == 8 ? 32 : 16) * c, b->z, a[c].qs);                           \
            acc[c & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * _cvtsh_ss(a[c].d)), acc[c & 1]);  \
        }                                                                                                            \
    }                                                                                                                \
    return llm__hsum_avx2(_mm256_add_ps(acc[0], acc[1]));                                                            \
}                                                                                                                    \
LLM__GQ_KERNELS(SFX, ATTR, llm__vec_dot_gq_##SFX)

// sum((q - z) * a) of one sub-block: G4 as Q4_0 with z for 8; G8 as Q8_0, less z * sum(a).
LLM__AVX2 static inline __attribute__((always_inline)) __m256i llm__gq_sub_avx2(int bits, const uint8_t *qs, int z,
                                                                                const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), ones = _mm256_set1_epi16(1);
    if (bits == 4) {
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(llm__nibbles_avx2(qs), a),
                                           _mm256_maddubs_epi16(_mm256_set1_epi8((char)z), a));
        return _mm256_madd_epi16(p, ones);
    }
    const __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), ones);
    return _mm256_sub_epi32(llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)qs), a),
                            _mm256_mullo_epi32(sa, _mm256_set1_epi32(z)));
}
LLM__GQ_DOTS(LLM__AVX2, avx2, llm__gq_sub_avx2)

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
LLM__AVX2 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx2(int64_t n, const void *vw,
                                                                                   const struct llm__block_q8_K *a,
                                                                                   bool five) {
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
                const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c))),
                              bh = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
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

static LLM__AVX2 void llm__vec_dot_q4_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, false);
}

static LLM__AVX2 void llm__vec_dot_q5_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, true);
}

// Q6_K: quants used unsigned (0..63); the -32 offset is applied once per super-block as
// 32 * sum_s scale[s] * bsums[s]. Each 128-bit lane of a 32-quant vector is one sub-block of 16,
// so the scales are spread with vpshufb: lane L of quarter k gets scale 2k + L of the half.
static LLM__AVX2 void llm__vec_dot_q6_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
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
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                              : _mm256_castsi256_si128(sc16));
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            // 16-bit shifts leak bits across bytes only outside the 0x30 mask
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
            };
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i p =
                    _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * h + 32 * k)));
                const short lo = (short)(4 * k | (4 * k + 1) << 8), hi = (short)((4 * k + 2) | (4 * k + 3) << 8);
                const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, ctrl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(w[i].d) * a[i].d), acc);
    }
    *s = llm__hsum_avx2(acc);
}

// Q3_K (three = true) and Q2_K: the 2-bit fields of qs (plus Q3_K's hmask bit as bit 2) used
// unsigned; each 128-bit lane of a 32-quant vector is one sub-block of 16, its 16-bit scale spread
// with vpshufb as in the Q6_K kernel. Q3_K's -4 offset is 4 * sum_s sc[s] * bsums[s]; Q2_K's mins
// are sum_s m[s] * bsums[s], in a separate float accumulator.
LLM__AVX2 static inline __attribute__((always_inline)) float llm__vec_dot_k23_avx2(int64_t n, const void *vw,
                                                                                   const struct llm__block_q8_K *a,
                                                                                   bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m256i sc16, sumi = _mm256_setzero_si256(), hm = _mm256_setzero_si256();
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        float dd;
        if (three) {
            uint8_t raw[16];
            llm__q3_K_scales_raw(w3[i].scales, raw);
            sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)raw)), _mm256_set1_epi16(32));
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 2));
            hm = _mm256_loadu_si256((const __m256i *)w3[i].hmask);
            dd = _cvtsh_ss(w3[i].d) * a[i].d;
        } else {
            const __m128i sb = _mm_loadu_si128((const __m128i *)w2[i].scales);
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
            const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
            accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(m16, bsums)),
                                   _mm256_set1_ps(-_cvtsh_ss(w2[i].dmin) * a[i].d), accm);
            dd = _cvtsh_ss(w2[i].d) * a[i].d;
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                              : _mm256_castsi256_si128(sc16));
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                if (three) {   // bit 4h + j of hmask[l] to bit 2 (16-bit shifts: the mask keeps each byte's own bit)
                    const int b = 4 * h + j;
                    q = _mm256_or_si256(q, _mm256_and_si256(b >= 2 ? _mm256_srli_epi16(hm, b - 2)
                                                                   : _mm256_slli_epi16(hm, 2 - b), b4));
                }
                const __m256i p =
                    _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * h + 32 * j)));
                const short lo = (short)(4 * j | (4 * j + 1) << 8), hi = (short)((4 * j + 2) | (4 * j + 3) << 8);
                const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, ctrl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dd), acc);
    }
    return llm__hsum_avx2(_mm256_add_ps(acc, accm));
}

static LLM__AVX2 void llm__vec_dot_q3_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx2(n, vw, va, true);
}

static LLM__AVX2 void llm__vec_dot_q2_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx2(n, vw, va, false);
}

// IQ4_XS: a sub-block of 32 per vector (low nibbles of its 16 bytes, then the high ones), levels
// looked up with vpshufb, signed x signed as in llm__dot_i8_avx2 (levels and activations lie in
// [-127, 127], so vpmaddubsw's pair sums cannot saturate), times the sub-block's scale in vpmaddwd.
static LLM__AVX2 void llm__vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        __m256i sumi = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int b = 0; b < 8; b++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(w[i].qs + 16 * b));
            const __m256i v = _mm256_shuffle_epi8(table,
                                                  _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * b));
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(ls[b])));
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

static LLM__AVX512 void llm__vec_dot_f32_avx512(int64_t n, float *s, const void *vw, const void *va) {
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

static LLM__AVX512 void llm__vec_dot_f16_avx512(int64_t n, float *s, const void *vw, const void *va) {
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

static LLM__AVX512 void llm__vec_dot_bf16_avx512(int64_t n, float *s, const void *vw, const void *va) {
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
static LLM__AVX512 void llm__vec_dot_q8_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
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
        const __m256i wq = _mm256_loadu_si256((const __m256i *)w[i].qs),
                      aq = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i f = _mm256_set1_epi8((char)0x80), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, _mm256_xor_si256(wq, f), aq),
                                           _mm256_dpbusd_epi32(z, f, aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + llm__hsum_avx2(acc256);
}

// Q4_0 x Q8_0, 4 blocks per step. One register holds the 4 blocks' nibble bytes; its low nibbles
// are elements 0-15 of each block, its high nibbles elements 16-31. The activations are regrouped
// to match (first and second halves of each block), so 128-bit lane k belongs to block k.
static LLM__AVX512 void llm__vec_dot_q4_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    const __m512i m4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
    const __m512i first = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0),
                  second = _mm512_set_epi64(15, 14, 11, 10, 7, 6, 3, 2);
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
        const __m512i alo = _mm512_permutex2var_epi64(a01, first, a23),
                      ahi = _mm512_permutex2var_epi64(a01, second, a23);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, alo), hi, ahi);
        const __m512i c = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, alo), eight, ahi);
        // scales of blocks i..i+3, each repeated for its 4 lanes, gathered from 64-byte lines
        const __m512i wd = _mm512_permutexvar_epi16(wsel, _mm512_loadu_si512((const void *)&w[i]));
        const __m512i ad = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&a[i]), asel,
                                                     _mm512_loadu_si512((const void *)((const char *)&a[i] + 64)));
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(wd)),
                                       _mm512_cvtph_ps(_mm512_castsi512_si256(ad)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p, c)), d, acc);
    }
    __m256 acc256 = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)w[i].qs);
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
        const __m256i aq = _mm256_loadu_si256((const __m256i *)a[i].qs), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, nib, aq),
                                           _mm256_dpbusd_epi32(z, _mm256_set1_epi8(8), aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(acc) + llm__hsum_avx2(acc256);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL: the AVX2 loop with vpdpbusd on 256-bit registers. Quants are made
// unsigned (IQ4_NL: grid + 128), and the offset (16 for Q5_0, 128 for IQ4_NL) times the sum of
// the activations is subtracted; the fifth bits are a byte mask (vpmovm2b's k-register input).
LLM__AVX512 static inline __attribute__((always_inline)) __m256i llm__dot_b32_avx512(int type, const void *blk,
                                                                                     const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), z = _mm256_setzero_si256();
    if (type == LLM__TYPE_Q4_1)
        return _mm256_dpbusd_epi32(z, llm__nibbles_avx2(((const struct llm__block_q4_1 *)blk)->qs), a);
    if (type == LLM__TYPE_IQ4_NL || type == LLM__TYPE_MXFP4) {
        const int8_t *values = type == LLM__TYPE_IQ4_NL ? llm__iq4nl_values : llm__mxfp4_values;
        const uint8_t *qs = type == LLM__TYPE_IQ4_NL ? ((const struct llm__block_iq4_nl *)blk)->qs
                                                     : ((const struct llm__block_mxfp4 *)blk)->qs;
        const __m256i grid = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values)),
                                              _mm256_set1_epi8((char)0x80));
        const __m256i u = _mm256_shuffle_epi8(grid, llm__nibbles_avx2(qs));
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u, a), _mm256_dpbusd_epi32(z, _mm256_set1_epi8((char)0x80), a));
    }
    const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qs
                                               : ((const struct llm__block_q5_1 *)blk)->qs;
    const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qh
                                               : ((const struct llm__block_q5_1 *)blk)->qh;
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i nib = llm__nibbles_avx2(qs);
    const __m256i q = _mm256_mask_add_epi8(nib, (__mmask32)h, nib, _mm256_set1_epi8(16));
    const __m256i p = _mm256_dpbusd_epi32(z, q, a);
    return type == LLM__TYPE_Q5_0 ? _mm256_sub_epi32(p, _mm256_dpbusd_epi32(z, _mm256_set1_epi8(16), a)) : p;
}

LLM__B32_DOTS(LLM__AVX512, avx512)

// G8's quants less 128 become unsigned again for vpdpbusd: sum(q * a) - (z + 128) * sum(a).
LLM__AVX512 static inline __attribute__((always_inline)) __m256i llm__gq_sub_avx512(int bits, const uint8_t *qs, int z,
                                                                                    const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), zero = _mm256_setzero_si256();
    if (bits == 4)
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, llm__nibbles_avx2(qs), a),
                                _mm256_dpbusd_epi32(zero, _mm256_set1_epi8((char)z), a));
    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    const __m256i sa = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(1), a);
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, u, a), _mm256_mullo_epi32(sa, _mm256_set1_epi32(z + 128)));
}
LLM__GQ_DOTS(LLM__AVX512, avx512, llm__gq_sub_avx512)

// A vpshufb control that fills 128-bit lanes 0-1 with 16-bit element e0 and lanes 2-3 with e1 of
// a source whose 4 lanes are identical.
LLM__AVX512 static inline __m512i llm__spread2(int e0, int e1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(2 * e0 | (2 * e0 + 1) << 8))),
                              _mm256_set1_epi16((short)(2 * e1 | (2 * e1 + 1) << 8)), 1);
}

// A super-block's exact integer sums into a row's float sum, in the order of the tile kernels
// (llm__kt_tokens, backends/cpu_tiles.c) that multiply prompts: acc + isum * d, then (mins) +
// imin * dm. A token's result then does not depend on how many tokens share its step (greedy text
// is the same batched or alone, with or without drafts); the integer sums are the same in both.
LLM__AVX512 static inline float llm__sb_acc(float acc, int32_t isum, float d, bool mins, int32_t imin, float dm) {
    acc = fmaf((float)isum, d, acc);
    return mins ? fmaf((float)imin, dm, acc) : acc;
}

// Q4_K / Q5_K, half a super-block (2 x 32 quant bytes = sub-blocks 4h..4h+3) per step. The low
// nibbles of the 64 bytes are sub-blocks 4h and 4h+2, the high nibbles 4h+1 and 4h+3; activations
// are loaded in that order. Sub-block scales multiply the 16-bit pair sums (vpmaddwd).
LLM__AVX512 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx512(int64_t n, const void *vw,
                                                                                       const struct llm__block_q8_K *a,
                                                                                       bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const __m512i m4 = _mm512_set1_epi8(15), b16 = _mm512_set1_epi8(16);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *qs = five ? w5[i].qs : w4[i].qs;
        const __m128i sm = llm__k4_scales_sse(five ? w5[i].scales : w4[i].scales);
        const float dd = _cvtsh_ss(d) * a[i].d, dm = _cvtsh_ss(dmin) * a[i].d;
        const int32_t imin = llm__hsum_epi32_avx2(llm__k4_mins_dot(sm, a[i].bsums));
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
        const __m512i hb = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w5[i].qh))
                                : _mm512_setzero_si512();
        __m512i sumi = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (five) {   // bit s of qh[l] is bit 4 of quant l of sub-block s
                const __m512i bl = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))),
                                                      _mm256_set1_epi8((char)(1 << (4 * h + 2))), 1);
                const __m512i bh = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 1))),
                                                      _mm256_set1_epi8((char)(1 << (4 * h + 3))), 1);
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hb, bl), lo, b16);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hb, bh), hi, b16);
            }
            const int8_t *q8 = a[i].qs + 128 * h;
            const __m512i plo = _mm512_maddubs_epi16(lo, llm__load_2x256(q8, q8 + 64));
            const __m512i phi = _mm512_maddubs_epi16(hi, llm__load_2x256(q8 + 32, q8 + 96));
            sumi = _mm512_add_epi32(
                sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sc, llm__spread2(4 * h, 4 * h + 2))));
            sumi = _mm512_add_epi32(
                sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sc, llm__spread2(4 * h + 1, 4 * h + 3))));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), dd, true, imin, -dm);
    }
    return acc;
}

static LLM__AVX512 void llm__vec_dot_q4_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, false);
}

static LLM__AVX512 void llm__vec_dot_q5_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, true);
}

// Q6_K, a half super-block (128 quants) per step in two registers: elements 0-63 (low nibbles of
// ql[0..64) with qh bits 0-1 / 2-3) and 64-127 (high nibbles, qh bits 4-5 / 6-7). Each 128-bit
// lane is one sub-block of 16; the -32 offset comes from bsums as in the AVX2 kernel.
static LLM__AVX512 void llm__vec_dot_q6_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
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
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m512i sumi = _mm512_inserti64x4(_mm512_setzero_si512(),
                                          _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5)), 0);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1)
                                                         : _mm256_castsi256_si128(sc16));
            const __m512i ql = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h)));
            const __m512i qlo = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                                _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
            const __m512i qhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
            const __m512i plo = _mm512_maddubs_epi16(qlo, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h)));
            const __m512i phi = _mm512_maddubs_epi16(qhi, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sch, spread_lo)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sch, spread_hi)));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), _cvtsh_ss(w[i].d) * a[i].d, false, 0, 0.0f);
    }
    *s = acc;
}
// Q3_K / Q2_K, a half super-block (128 quants) per step in two registers: fields j = 0, 1 of the
// half's 32 qs bytes (elements 0-63) and j = 2, 3 (64-127), each 128-bit lane one sub-block of 16
// with its scale spread as in the Q6_K kernel; offsets and mins as in the AVX2 twin.
LLM__AVX512 static inline __attribute__((always_inline)) float llm__vec_dot_k23_avx512(int64_t n, const void *vw,
                                                                                       const struct llm__block_q8_K *a,
                                                                                       bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4);
    // per-16-bit-lane shift counts of field j: register 0 takes j = 0 | 1, register 1 j = 2 | 3
    const __m512i sh0 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const __m512i sh1 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i spread_lo = _mm512_set_epi32(0x07060706, 0x07060706, 0x07060706, 0x07060706, 0x05040504, 0x05040504,
                                               0x05040504, 0x05040504, 0x03020302, 0x03020302, 0x03020302, 0x03020302,
                                               0x01000100, 0x01000100, 0x01000100, 0x01000100);
    const __m512i spread_hi = _mm512_add_epi8(spread_lo, _mm512_set1_epi8(8));
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m256i sc16;
        __m512i sumi = _mm512_setzero_si512(), hm = _mm512_setzero_si512();
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        float dd, dm = 0.0f;
        int32_t imin = 0;
        if (three) {
            uint8_t raw[16];
            llm__q3_K_scales_raw(w3[i].scales, raw);
            sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)raw)), _mm256_set1_epi16(32));
            const __m256i offs = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 2);
            sumi = _mm512_inserti64x4(sumi, _mm256_sub_epi32(_mm256_setzero_si256(), offs), 0);
            hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w3[i].hmask));
            dd = _cvtsh_ss(w3[i].d) * a[i].d;
        } else {
            const __m128i sb = _mm_loadu_si128((const __m128i *)w2[i].scales);
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
            const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
            imin = llm__hsum_epi32_avx2(_mm256_madd_epi16(m16, bsums));
            dm = _cvtsh_ss(w2[i].dmin) * a[i].d;
            dd = _cvtsh_ss(w2[i].d) * a[i].d;
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1)
                                                         : _mm256_castsi256_si128(sc16));
            const __m512i qv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h)));
            __m512i q0 = _mm512_and_si512(_mm512_srlv_epi16(qv, sh0), m3),
                    q1 = _mm512_and_si512(_mm512_srlv_epi16(qv, sh1), m3);
            if (three) {   // bit 4h + j of hmask[l] adds 4
                const __m512i t0 = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))),
                                                      _mm256_set1_epi8((char)(1 << (4 * h + 1))), 1);
                const __m512i t1 = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 2))),
                                                      _mm256_set1_epi8((char)(1 << (4 * h + 3))), 1);
                q0 = _mm512_mask_add_epi8(q0, _mm512_test_epi8_mask(hm, t0), q0, b4);
                q1 = _mm512_mask_add_epi8(q1, _mm512_test_epi8_mask(hm, t1), q1, b4);
            }
            const __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h)));
            const __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p0, _mm512_shuffle_epi8(sch, spread_lo)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p1, _mm512_shuffle_epi8(sch, spread_hi)));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), dd, !three, imin, -dm);
    }
    return acc;
}

static LLM__AVX512 void llm__vec_dot_q3_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx512(n, vw, va, true);
}

static LLM__AVX512 void llm__vec_dot_q2_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx512(n, vw, va, false);
}

// IQ4_XS, two sub-blocks per register: lanes [low nibbles of b, high of b, low of b+1, high of
// b+1]. The levels are looked up plus 128 (1..241, unsigned) for vpdpbusd; the 128 * sum(a)
// this adds is taken off once per super-block from bsums, times the scales.
static LLM__AVX512 void llm__vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m512i table = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                          _mm512_set1_epi8(-128));
    const __m512i m4 = _mm512_set1_epi8(15);
    // dword selectors of the pair's two scales: elements 0-7 take sub-block 2k, 8-15 take 2k + 1
    const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    // lane b of the scales: bits 4b.. of scales_l and 2b.. of scales_h (see llm__iq4_xs_scales)
    const __m256i shl = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
                  shh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        uint32_t sl;
        memcpy(&sl, w[i].scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), shl), _mm256_set1_epi32(15));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w[i].scales_h), shh),
                                            _mm256_set1_epi32(3));
        const __m256i ls8 = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        const __m512i ls32 = _mm512_zextsi256_si512(ls8);
        // -128 * ls[b] * (the sub-block's activation sum), lane b
        const __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[i].bsums), _mm256_set1_epi16(1));
        __m512i sumi =
            _mm512_zextsi256_si512(_mm256_mullo_epi32(_mm256_mullo_epi32(ls8, sums), _mm256_set1_epi32(-128)));
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k)));
            const __m512i v = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0));
            // lanes 1, 3: high nibbles
            const __m512i idx = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xff00ff00u, v, 4), m4);
            const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(table, idx),
                                                   _mm512_loadu_si512((const void *)(a[i].qs + 64 * k)));
            const __m512i lsv = _mm512_permutexvar_epi32(_mm512_add_epi32(pair, _mm512_set1_epi32(2 * k)), ls32);
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp, lsv));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), _cvtsh_ss(w[i].d) * a[i].d, false, 0, 0.0f);
    }
    *s = acc;
}
// The kernels of this level by weight type, NULL for a type it has none for.
llm__vec_dot_fn llm__vec_dot_kernel_avx2(int type) {
    switch (type) {
    case LLM__TYPE_F32: return llm__vec_dot_f32_avx2;
    case LLM__TYPE_F16: return llm__vec_dot_f16_avx2;
    case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx2;
    case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx2;
    case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx2;
    case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_avx2;
    case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_avx2;
    case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_avx2;
    case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_avx2;
    case LLM__TYPE_MXFP4: return llm__vec_dot_mxfp4_avx2;
    case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx2;
    case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx2;
    case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx2;
    case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_avx2;
    case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_avx2;
    case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_avx2;
    LLM__GQ_CASES(avx2)
    default: return NULL;
    }
}

// The kernels of this level by weight type, NULL for a type it has none for.
llm__vec_dot_fn llm__vec_dot_kernel_avx512(int type) {
    switch (type) {
    case LLM__TYPE_F32: return llm__vec_dot_f32_avx512;
    case LLM__TYPE_F16: return llm__vec_dot_f16_avx512;
    case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx512;
    case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx512;
    case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx512;
    case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_avx512;
    case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_avx512;
    case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_avx512;
    case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_avx512;
    case LLM__TYPE_MXFP4: return llm__vec_dot_mxfp4_avx512;
    case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx512;
    case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx512;
    case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx512;
    case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_avx512;
    case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_avx512;
    case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_avx512;
    LLM__GQ_CASES(avx512)
    default: return NULL;
    }
}

#endif   // LLM__X86_SIMD
