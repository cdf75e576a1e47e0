// CPU backend: repacked weights and the register-tiled prompt kernels

#include "../src/internal.h"

// --- repacked weights: 16 rows interleaved, for AVX-512 VNNI ---
//
// A matrix-vector product reads each weight once per token, so decode speed is how fast the
// weights stream from memory; a prompt multiplies each weight with many tokens, so prefill speed
// is how few instructions a multiply-add takes. The GGUF layout (34- or 18-byte blocks, one row
// after another) serves neither: unaligned loads, and per-row dot products that end in
// horizontal sums. At load time the CPU backend rewrites Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 matrices
// whose row count is a multiple of 16 (and Q4_K, Q3_K, Q2_K, IQ4_XS, Q6_K and Q5_K ones, in layouts of their
// own, below)
// into the "x16" layout: for each group of 16 rows and each block of 32 columns, the rows' quants
// interleaved 4 bytes at a time, so one 64-byte vector holds the same 4 columns of 16 rows.
// vpdpbusd against 4 broadcast activation bytes then adds 4 products into each row's own lane; 8
// of them finish a block of 16 rows, with no horizontal sum, and one multiply-add applies the 16
// rows' scales times the token's. Per group of 16 rows, in units of two blocks (64-byte aligned;
// an odd last block gets 32 bytes of padding):
//
//   Q8_0: per block 8 chunks of 64 bytes, chunk c = columns 4c..4c+3 of rows 0..15, +128 each
//         (unsigned, for vpdpbusd)
//   Q4_0, Q4_1: per block 4 chunks of 64 bytes, chunk c = quant bytes 4c..4c+3 of rows 0..15 as
//         stored (low nibbles: columns 4c..4c+3; high nibbles: columns 16+4c..16+4c+3; 0..15)
//   Q5_0, Q5_1: the 4 chunks of nibbles, then the fifth bits as 16 words, one per row, arranged
//         for the kernel: bit c of byte k is column 4c+k's, bit 4+c column 16+4c+k's (c, k < 4),
//         so that one shift and a mask put chunk c's bits at bit 4 of each byte
//   then the 2 x 16 fp16 scales of the unit's blocks, row by row; Q4_1, Q5_1: then their mins
//
// Activations are quantized to Q8_0 exactly as for the plain kernels and laid out per token as K
// quant bytes, K/32 block scales (f32) and K/32 values -c * (sum of the block's quants), where c
// is the offset of the weight encoding (128 for Q8_0, 8 for Q4_0, 16 for Q5_0): a row's block sum
// starts from that value, so sum((w + c) * a) - c * sum(a) = sum(w * a), exactly. For Q4_1 and
// Q5_1 (x = d * q + m) that last value is instead the f32 s of their Q8_1 activations, fp16(d *
// sum of the quants), and the min's share m * s is added per block as the plain kernels do. 1.25
// bytes per column: a long row's activations stay in L1 while the weights stream past.

static bool llm__x16_five(int type) { return type == LLM__TYPE_Q5_0 || type == LLM__TYPE_Q5_1; }
static bool llm__x16_min(int type) { return type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1; }

// MXFP4 in x16 (Q4_0's chunks of nibbles; each block's scale 2^(e - 128) as fp16, which holds it
// exactly for e in 104..143: a matrix with a scale outside that stays plain): the tile looks each
// nibble up as its value + 12 (0..24, unsigned for vpdpbusd), and c = 12 for the activations.
static bool llm__x16_mxfp4_fits(const void *data, int64_t ne0, int64_t ne1) {
    const struct llm__block_mxfp4 *b = data;
    for (int64_t i = 0; i < ne0 / 32 * ne1; i++)
        if (b[i].e < 104 || b[i].e > 143) return false;
    return true;
}

static bool llm__x16_supported(int type, int64_t ne0, int64_t ne1) {
    if (ne1 % 16 != 0) return false;
    switch (type) {
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128: return true;
    case LLM__TYPE_Q8_0: case LLM__TYPE_Q4_0: case LLM__TYPE_Q4_1: case LLM__TYPE_Q5_0: case LLM__TYPE_Q5_1:
    case LLM__TYPE_MXFP4:
        return ne0 % 32 == 0;
    case LLM__TYPE_Q4_K: case LLM__TYPE_Q3_K: case LLM__TYPE_Q2_K: case LLM__TYPE_IQ4_XS: case LLM__TYPE_Q6_K:
    case LLM__TYPE_Q5_K:
        return ne0 % 256 == 0;
    default: return false;
    }
}

// Bytes of quants per block of 16 rows; of scales (and mins) per unit; offsets of block b's
// quants, scales and mins in a record of nb blocks; bytes of a record.
static size_t llm__x16_qbytes(int type) { return type == LLM__TYPE_Q8_0 ? 512 : llm__x16_five(type) ? 320 : 256; }
static size_t llm__x16_sbytes(int type) { return llm__x16_min(type) ? 128 : 64; }
static size_t llm__x16_unit(int type) { return 2 * llm__x16_qbytes(type) + llm__x16_sbytes(type); }
static size_t llm__x16_qoffs(int type, int64_t b) {
    return (size_t)(b / 2) * llm__x16_unit(type) + (size_t)(b % 2) * llm__x16_qbytes(type);
}
static size_t llm__x16_soffs(int type, int64_t b, int64_t nb) {
    size_t nq = b / 2 * 2 + 1 < nb ? 2 : 1;   // blocks in this unit
    return (size_t)(b / 2) * llm__x16_unit(type) + nq * llm__x16_qbytes(type) + (size_t)(b % 2) * 32;
}
// G4 (AWQ / GPTQ 4-bit) records: per quantization group of g inputs (g / 32 blocks), the blocks'
// quants in Q4_0's chunks (256 bytes each), then the 16 rows' fp16 scales d and int16 zero points
// z (64 bytes): 4.25 bits a weight at g = 128, as the plain layout. Their activations are Q4_1's
// x16 format with s = d_a * (sum of the block's quants) exact in f32 (no fp16 rounding), and a
// block adds d * d_a * sum(q * a) - (d * z) * s, d * z exact in f32.
static size_t llm__x16g_unit(int type) { return (size_t)(llm__gq_group(type) / 32) * 256 + 64; }
size_t llm__x16_group_bytes(int type, int64_t ne0) {
    if (llm__is_gq(type)) return (size_t)(ne0 / llm__gq_group(type)) * llm__x16g_unit(type);
    if (type == LLM__TYPE_Q4_K) return (size_t)(ne0 / 256) * 2368;   // LLM__X16K_SB
    if (type == LLM__TYPE_Q3_K) return llm__x16q3_group_bytes(ne0);
    if (llm__x16_q8k(type)) return llm__x16f_group_bytes(type, ne0);   // Q2_K, IQ4_XS, Q6_K, Q5_K
    int64_t nb = ne0 / 32;
    return (size_t)(nb / 2) * llm__x16_unit(type) + (nb % 2 ? llm__x16_qbytes(type) + llm__x16_sbytes(type) : 0);
}

// A Q5 block's fifth bits (bit j: column j's) in the x16 word order above.
static uint32_t llm__x16_five_word(uint32_t h) {
    uint32_t w = 0;
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 4; c++)
            w |= (h >> (4 * c + k) & 1) << (8 * k + c) | (h >> (16 + 4 * c + k) & 1) << (8 * k + 4 + c);
    return w;
}

// Rewrites row groups [g0, g1) (16 rows each) of a plain G4 matrix into x16 records.
static void llm__x16g_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int g = llm__gq_group(type), nsub = g / 32;
    const size_t rb = llm__row_bytes(type, ne0), bb = llm__type_table[type].block_bytes, unit = llm__x16g_unit(type);
    const size_t rec_bytes = llm__x16_group_bytes(type, ne0);
    for (int64_t gr = g0; gr < g1; gr++) {
        uint8_t *rec = (uint8_t *)dst + rec_bytes * (size_t)gr;
        for (int64_t k = 0; k < ne0 / g; k++) {
            uint8_t *u = rec + (size_t)k * unit;
            for (int r = 0; r < 16; r++) {
                const struct llm__block_gq *b =
                    (const void *)((const uint8_t *)src + (size_t)(16 * gr + r) * rb + (size_t)k * bb);
                memcpy(u + 256 * nsub + 2 * r, &b->d, 2);
                memcpy(u + 256 * nsub + 32 + 2 * r, &b->z, 2);
                for (int c = 0; c < nsub; c++)
                    for (int j = 0; j < 16; j++) u[256 * c + (j / 4) * 64 + r * 4 + j % 4] = b->qs[16 * c + j];
            }
        }
    }
}

// Rewrites row groups [g0, g1) (16 rows each) of a plain matrix of a block-32 type into x16 records.
static void llm__x16_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nb = ne0 / 32;
    const size_t rec_bytes = llm__x16_group_bytes(type, ne0);
    const size_t blk = llm__type_table[type].block_bytes;
    const bool five = llm__x16_five(type), min = llm__x16_min(type);
    // where a block keeps its nibbles (or Q8_0's quants) and its fifth bits
    const size_t qs_at = type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0 ? 2 : type == LLM__TYPE_Q4_1 ? 4
                         : type == LLM__TYPE_Q5_0 ? 6 : type == LLM__TYPE_MXFP4 ? 1 : 8;
    const size_t qh_at = min ? 4 : 2;
    memset((uint8_t *)dst + rec_bytes * (size_t)g0, 0, rec_bytes * (size_t)(g1 - g0));
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *rec = (uint8_t *)dst + rec_bytes * (size_t)g;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *q = rec + llm__x16_qoffs(type, b);
            uint8_t *sc = rec + llm__x16_soffs(type, b, nb);
            for (int r = 0; r < 16; r++) {
                const uint8_t *x = (const uint8_t *)src + ((size_t)(16 * g + r) * (size_t)nb + (size_t)b) * blk;
                if (type == LLM__TYPE_MXFP4) {   // (exact: llm__x16_mxfp4_fits)
                    const uint16_t h = llm__fp32_to_fp16(llm__e8m0_half(x[0]));
                    memcpy(sc + 2 * r, &h, 2);
                } else {
                    memcpy(sc + 2 * r, x, 2);   // d comes first in every block
                }
                if (min) memcpy(sc + 64 + 2 * r, x + 2, 2);   // then m
                if (type == LLM__TYPE_Q8_0)
                    for (int j = 0; j < 32; j++) q[(j / 4) * 64 + r * 4 + j % 4] = (uint8_t)(x[qs_at + j] ^ 0x80);
                else
                    for (int j = 0; j < 16; j++) q[(j / 4) * 64 + r * 4 + j % 4] = x[qs_at + j];
                if (five) {
                    uint32_t h;
                    memcpy(&h, x + qh_at, 4);
                    h = llm__x16_five_word(h);
                    memcpy(q + 256 + 4 * r, &h, 4);
                }
            }
        }
    }
}

// Row r of an x16 matrix as floats (the embedding lookup of a tied, repacked table), computed as
// the plain dequantizers do.
static void llm__x16_dequantize_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nb = ne0 / 32;
    const uint8_t *rec = (const uint8_t *)w + (size_t)(r / 16) * llm__x16_group_bytes(type, ne0);
    const int ri = (int)(r % 16);
    if (llm__is_gq(type)) {
        const int nsub = llm__gq_group(type) / 32;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *u = rec + (size_t)(b / nsub) * llm__x16g_unit(type), *q = u + 256 * (b % nsub);
            uint16_t dh;
            int16_t z;
            memcpy(&dh, u + 256 * nsub + 2 * ri, 2);
            memcpy(&z, u + 256 * nsub + 32 + 2 * ri, 2);
            for (int j = 0; j < 32; j++) {
                const uint8_t byte = q[(j % 16 / 4) * 64 + ri * 4 + j % 4];
                y[b * 32 + j] = (float)((j < 16 ? byte & 15 : byte >> 4) - z) * llm__fp16_to_fp32(dh);
            }
        }
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = rec + llm__x16_qoffs(type, b);
        const uint8_t *sc = rec + llm__x16_soffs(type, b, nb);
        uint16_t dh, mh = 0;
        memcpy(&dh, sc + 2 * ri, 2);
        if (llm__x16_min(type)) memcpy(&mh, sc + 64 + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh), m = llm__fp16_to_fp32(mh);
        uint32_t h = 0;
        if (llm__x16_five(type)) memcpy(&h, q + 256 + 4 * ri, 4);
        for (int j = 0; j < 32; j++) {
            if (type == LLM__TYPE_Q8_0) {
                y[b * 32 + j] = d * (float)(int8_t)(q[(j / 4) * 64 + ri * 4 + j % 4] ^ 0x80);
                continue;
            }
            const int jj = j % 16, hi = j >= 16;
            const uint8_t byte = q[(jj / 4) * 64 + ri * 4 + jj % 4];
            // column j's fifth bit: byte jj % 4 of the word, bit jj / 4 (+4 for the high half)
            const int u = (hi ? byte >> 4 : byte & 15) | (int)(h >> (8 * (jj % 4) + 4 * hi + jj / 4) & 1) << 4;
            switch (type) {
            case LLM__TYPE_Q4_0: y[b * 32 + j] = d * (float)(u - 8); break;
            case LLM__TYPE_MXFP4: y[b * 32 + j] = d * (float)llm__mxfp4_values[u]; break;
            case LLM__TYPE_Q5_0: y[b * 32 + j] = (float)(u - 16) * d; break;
            default: y[b * 32 + j] = (float)u * d + m; break;   // Q4_1, Q5_1
            }
        }
    }
}

#if defined(LLM__X86_SIMD)
// Q8_0 quantization of one block of 32, exactly as llm__quantize_q8_0: q = roundf(x / d) with
// d = max|x| / 127 (roundf: a truncation, then one more step away from zero when the dropped
// fraction is at least a half; both steps are exact in float). Returns the block's sum of quants.
LLM__AVX512 static int32_t llm__quantize_q8_0_block_avx512(const float *x, int8_t *q, uint16_t *dh, float *df) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const bool nan = (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
    const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;   // (see llm__clamp_q127)
    *dh = llm__fp32_to_fp16(d);
    *df = d;
    const __m512 idv = _mm512_set1_ps(id), half = _mm512_set1_ps(0.5f), lim = _mm512_set1_ps(127.0f);
    __m512i qi[2];
    for (int h = 0; h < 2; h++) {
        // clamped as llm__clamp_q127 does: NaN to 0, then to [-127, 127] (a no-op when finite)
        __m512 v = _mm512_mul_ps(h ? x1 : x0, idv);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m512 sgn = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
        qi[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, sgn));
    }
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(qi[0]));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(qi[1]));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
}

// The same on AVX2: 4 vectors of 8, the quants packed to bytes in element order.
LLM__AVX2 int32_t llm__quantize_q8_0_block_avx2(const float *x, int8_t *q, uint16_t *dh, float *df) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 xv[4], am = _mm256_setzero_ps(), un = _mm256_setzero_ps();
    for (int h = 0; h < 4; h++) {
        xv[h] = _mm256_loadu_ps(x + 8 * h);
        am = _mm256_max_ps(am, _mm256_andnot_ps(sign, xv[h]));
        un = _mm256_or_ps(un, _mm256_cmp_ps(xv[h], xv[h], _CMP_UNORD_Q));
    }
    const bool nan = _mm256_movemask_ps(un) != 0;
    const float amax = llm__hmax_avx2(am);
    const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;   // (see llm__clamp_q127)
    *dh = llm__fp32_to_fp16(d);
    *df = d;
    const __m256 idv = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), lim = _mm256_set1_ps(127.0f);
    __m256i qi[4];
    for (int h = 0; h < 4; h++) {
        __m256 v = _mm256_mul_ps(xv[h], idv);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));   // NaN to 0
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m256 sgn = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
        qi[h] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, sgn)));
    }
    // int32 x 32 -> int8 x 32: the packs work per 128-bit lane; a dword permutation restores the order
    const __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return llm__hsum_epi32_avx2(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
}

// Q8_K quantization of one super-block of 256, exactly as llm__quantize_q8_K: the element of
// largest magnitude (the first of equals) maps to -127, rounding to nearest even.
LLM__AVX512 static void llm__quantize_q8_K_block_avx512(const float *x, struct llm__block_q8_K *y) {
    __m512 am = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int i = 0; i < 256; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        am = _mm512_max_ps(am, _mm512_abs_ps(v));
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    const float amax = _mm512_reduce_max_ps(am);
    if (amax == 0.0f || nan) {   // (a NaN: quants 0, the scale NaN; see llm__clamp_q127)
        memset(y, 0, sizeof(*y));
        if (nan) y->d = NAN;
        return;
    }
    float max = 0.0f;
    for (int i = 0; i < 256; i += 16) {
        __mmask16 k = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (k) { max = x[i + __builtin_ctz(k)]; break; }
    }
    const float iscale = -127.0f / max;
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f);
    for (int i = 0; i < 256; i += 16) {
        __m512 f = _mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + i));
        f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);   // as llm__clamp_q127
        f = _mm512_min_ps(_mm512_max_ps(f, nlim), lim);
        __m512i v = _mm512_cvtps_epi32(f);   // nearest even
        v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
        _mm_storeu_si128((__m128i *)(y->qs + i), _mm512_cvtepi32_epi8(v));
        y->bsums[i / 16] = (int16_t)_mm512_reduce_add_epi32(v);
    }
    y->d = 1.0f / iscale;
}
#endif

// Bytes per token of the x16 activations of weights of the given type (K columns).
size_t llm__x16_act_stride(int type, int64_t K) {
    return type == LLM__TYPE_Q4_K ? LLM__X16K_ACT_STRIDE(K) : LLM__X16_ACT_STRIDE(K);
}

// One token's activations (n floats) in the x16 format for weights of the given type (Q4_K's:
// llm__x16k_quantize_act's).
void llm__x16_quantize_act(int type, const float *x, uint8_t *out, int64_t n) {
    if (type == LLM__TYPE_Q4_K) {
        llm__x16k_quantize_act(x, out, n);
        return;
    }
    const int c = type == LLM__TYPE_Q8_0 ? 128 : type == LLM__TYPE_Q4_0 ? 8 : type == LLM__TYPE_MXFP4 ? 12 : 16;
    const bool gq = llm__is_gq(type), min = llm__x16_min(type) || gq;
    float *d = (float *)(out + n);
    uint8_t *nc = out + n + n / 8;
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t sum = 0;
        float s;   // Q4_1, Q5_1: Q8_1's s
#if defined(LLM__X86_SIMD)
        // (x16 weights exist only where AVX-512 runs)
        uint16_t dh;
        float df;
        sum = llm__quantize_q8_0_block_avx512(x + 32 * b, (int8_t *)out + 32 * b, &dh, &df);
        d[b] = llm__fp16_to_fp32(dh);
        s = llm__fp16_to_fp32(llm__fp32_to_fp16((float)sum * df));   // as llm__quantize_q8_1
#else
        struct llm__block_q8_1 blk;   // Q8_0's quants and scale, and s
        llm__quantize_row(LLM__TYPE_Q8_1, x + 32 * b, &blk, 32);
        memcpy(out + 32 * b, blk.qs, 32);
        for (int j = 0; j < 32; j++) sum += blk.qs[j];
        d[b] = llm__fp16_to_fp32(blk.d);
        s = llm__fp16_to_fp32(blk.s);
#endif
        const int32_t v = -c * sum;
        if (gq) s = (float)sum * d[b];   // (exact: |sum| < 2^12, d an fp16 value)
        if (min) memcpy(nc + 4 * b, &s, 4);
        else memcpy(nc + 4 * b, &v, 4);
    }
}

#if defined(LLM__X86_SIMD)
// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
// One block of 16 rows (quants q, scales ws, mins ms) times NT tokens' block b, added to acc.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_block(
        int type, int NT, const uint8_t *q, __m512 ws, __m512 ms, int64_t b, const uint8_t *act, size_t stride,
        int64_t K, __m512 *acc) {
    const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
    const bool five = llm__x16_five(type), min = llm__x16_min(type);
    const __m512i h = five ? _mm512_loadu_si512((const void *)(q + 256)) : _mm512_setzero_si512();
    const __m512i fp4 = _mm512_broadcast_i32x4(   // MXFP4: each nibble's value + 12
        _mm_add_epi8(_mm_loadu_si128((const __m128i *)llm__mxfp4_values), _mm_set1_epi8(12)));
    __m512i wv[8];
    if (type == LLM__TYPE_MXFP4) {   // each nibble looked up as its value + 12
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(q + 64 * c));
            wv[c] = _mm512_shuffle_epi8(fp4, _mm512_and_si512(v, m4));
            wv[c + 4] = _mm512_shuffle_epi8(fp4, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8 && type != LLM__TYPE_MXFP4; c++) {
        // Q4_0/Q4_1 high nibbles stay in place (16 x their value): one instruction instead of
        // two, and the sum is shifted back once per block. Q5: each chunk's fifth bits are moved
        // to bit 4 of their bytes (see the layout).
        if (type == LLM__TYPE_Q8_0) wv[c] = _mm512_loadu_si512((const void *)(q + 64 * c));
        else if (c < 4) {
            wv[c] = _mm512_and_si512(_mm512_loadu_si512((const void *)(q + 64 * c)), m4);
            if (five) wv[c] = _mm512_or_si512(wv[c], _mm512_and_si512(_mm512_slli_epi32(h, 4 - c), b4));
        } else if (!five) wv[c] = _mm512_andnot_si512(m4, _mm512_loadu_si512((const void *)(q + 64 * (c - 4))));
        else
            wv[c] = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512((const void *)(q + 64 * (c - 4))), 4), m4),
                _mm512_and_si512(_mm512_srli_epi32(h, c - 4), b4));
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        const uint8_t *a = act + (size_t)t * stride;
        const int8_t *aq = (const int8_t *)a + 32 * b;
        int32_t nc;
        float d, s;
        memcpy(&nc, a + K + K / 8 + 4 * b, 4);   // -c * sum, or (Q4_1, Q5_1) the f32 s
        memcpy(&s, a + K + K / 8 + 4 * b, 4);
        memcpy(&d, a + K + 4 * b, 4);
        // two chains of 4 so consecutive vpdpbusd do not wait on each other (Q4_0/Q4_1: the low
        // nibbles' chain and the high nibbles', which is 16 x too large)
        __m512i s0 = min ? _mm512_setzero_si512() : _mm512_set1_epi32(nc), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            // Q8_0 chunk c: columns 4c..; the others: low nibbles of chunk c (< 4), then high ones
            const int col = type == LLM__TYPE_Q8_0 ? 4 * c : (c < 4 ? 4 * c : 16 + 4 * (c - 4));
            const bool first = type == LLM__TYPE_Q8_0 ? c % 2 == 0 : c < 4;
            if (first) s0 = llm__dpbusd_bcast(s0, wv[c], aq + col);
            else s1 = llm__dpbusd_bcast(s1, wv[c], aq + col);
        }
        if (type == LLM__TYPE_Q4_0 || type == LLM__TYPE_Q4_1) s1 = _mm512_srai_epi32(s1, 4);
        const __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        acc[t] = _mm512_fmadd_ps(p, _mm512_mul_ps(ws, _mm512_set1_ps(d)), acc[t]);
        if (min) acc[t] = _mm512_fmadd_ps(ms, _mm512_set1_ps(s), acc[t]);
    }
}

// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_tile(
        int type, int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out,
        size_t ostride) {
    const size_t qb = llm__x16_qbytes(type), unit = llm__x16_unit(type);
    const bool min = llm__x16_min(type);
    const int64_t nb = K / 32;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    // whole units of two blocks: [quants b][quants b+1][scales b, b+1]([mins b, b+1])
    for (int64_t b = 0; b + 1 < nb; b += 2, rec += unit) {
        if (NT == 1) {
            // Decode streams the weights once: ask for them 4 KB ahead (measured: +10-20% on top
            // of the hardware prefetcher, which alone leaves the core waiting on memory).
#pragma GCC unroll 18
            for (size_t pf = 0; pf < unit; pf += 64) _mm_prefetch((const char *)rec + 4096 + pf, _MM_HINT_T0);
        }
        const uint8_t *sc = rec + 2 * qb;
        const __m512 ws0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
        const __m512 ws1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32)));
        const __m512 ms0 = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 64))) : ws0;
        const __m512 ms1 = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 96))) : ws1;
        llm__x16_block(type, NT, rec, ws0, ms0, b, act, stride, K, acc);
        llm__x16_block(type, NT, rec + qb, ws1, ms1, b + 1, act, stride, K, acc);
    }
    if (nb % 2) {   // the last unit holds one block
        const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + qb)));
        const __m512 ms = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + qb + 64))) : ws;
        llm__x16_block(type, NT, rec, ws, ms, nb - 1, act, stride, K, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

// switch (nt) over 1..8 (8 and more: 8), calling CALL(TYPE, constant count): the tile kernels
// are inlined once per count. Built with LLM_GENERIC_TILES defined, they are inlined once per type
// with the count as a variable instead: the same results, slower, and compiled in under half the
// time (the fuzzers, and the test programs other than test_backend, which checks these kernels
// as the program and the library build them).
#if defined(LLM_GENERIC_TILES)
#define LLM__NT_SWITCH(CALL, TYPE) CALL(TYPE, LLM__MIN(nt, 8));
#else
#define LLM__NT_SWITCH(CALL, TYPE)                                                              \
    switch (nt) {                                                                               \
    case 1: CALL(TYPE, 1); break;                                                               \
    case 2: CALL(TYPE, 2); break;                                                               \
    case 3: CALL(TYPE, 3); break;                                                               \
    case 4: CALL(TYPE, 4); break;                                                               \
    case 5: CALL(TYPE, 5); break;                                                               \
    case 6: CALL(TYPE, 6); break;                                                               \
    case 7: CALL(TYPE, 7); break;                                                               \
    default: CALL(TYPE, 8); break;                                                              \
    }
#endif
// The same over 1..4 (4 and more: 4) for the x16 Q3_K and Q2_K kernels (4 tokens per call).
#if defined(LLM_GENERIC_TILES)
#define LLM__NT4_SWITCH(CALL) CALL(LLM__MIN(nt, 4));
#else
#define LLM__NT4_SWITCH(CALL) \
    switch (nt) {             \
    case 1: CALL(1); break;   \
    case 2: CALL(2); break;   \
    case 3: CALL(3); break;   \
    default: CALL(4); break;  \
    }
#endif

// The same for G4 records: per group, its scales and d * z, then its blocks as Q4_1's (min -d * z).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16g_tile(
        int type, int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out,
        size_t ostride) {
    const int g = llm__gq_group(type), nsub = g / 32;
    const size_t unit = llm__x16g_unit(type);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K / g; k++, rec += unit) {
        if (NT == 1)
            for (size_t pf = 0; pf < unit; pf += 64) _mm_prefetch((const char *)rec + 4096 + pf, _MM_HINT_T0);
        const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256 * nsub)));
        const __m512 zs =
            _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(rec + 256 * nsub + 32))));
        const __m512 ms = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(ws, zs));
        for (int c = 0; c < nsub; c++)
            llm__x16_block(LLM__TYPE_Q4_1, NT, rec + 256 * c, ws, ms, k * nsub + c, act, stride, K, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 void llm__x16_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act, size_t stride,
                                             int64_t K, float *out, size_t ostride) {
    // Constant token counts let the compiler keep the accumulators in registers.
#define LLM__X16_CALL(TYPE, N) llm__x16_tile(TYPE, N, rec, act, stride, K, out, ostride)
#define LLM__X16_CASE(TYPE) LLM__NT_SWITCH(LLM__X16_CALL, TYPE)
#define LLM__X16G_CALL(TYPE, N) llm__x16g_tile(TYPE, N, rec, act, stride, K, out, ostride)
    switch (type) {
    case LLM__TYPE_G4_32: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_32) break;
    case LLM__TYPE_G4_64: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_64) break;
    case LLM__TYPE_G4_128: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_128) break;
    case LLM__TYPE_Q8_0: LLM__X16_CASE(LLM__TYPE_Q8_0) break;
    case LLM__TYPE_Q4_1: LLM__X16_CASE(LLM__TYPE_Q4_1) break;
    case LLM__TYPE_Q5_0: LLM__X16_CASE(LLM__TYPE_Q5_0) break;
    case LLM__TYPE_Q5_1: LLM__X16_CASE(LLM__TYPE_Q5_1) break;
    case LLM__TYPE_MXFP4: LLM__X16_CASE(LLM__TYPE_MXFP4) break;
    default: LLM__X16_CASE(LLM__TYPE_Q4_0) break;
    }
#undef LLM__X16_CASE
#undef LLM__X16_CALL
#undef LLM__X16G_CALL
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

#if defined(LLM__X86_SIMD)
// Q8_K rows (nb super-blocks) with the AVX-512 quantizer: the same bytes as llm__quantize_q8_K.
LLM__AVX512 void llm__quantize_q8_K_avx512(const float *x, struct llm__block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) llm__quantize_q8_K_block_avx512(x + 256 * i, y + i);
}
#endif

void llm__x16k_quantize_act(const float *x, uint8_t *out, int64_t n) {
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
    __m512 acc[8];   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = rec + (size_t)sb * LLM__X16K_SB;
        // Decode: the super-block's 37 lines asked for at once, before its loads (not 4 KB ahead
        // as the other x16 tiles: TinyLlama-shape Q4_K_M decode on 2 Zen 4 cores, medians of 5
        // alternating runs, 50.5 tokens/s against 43.7 at 4 KB ahead and 48.8 with none)
        if (NT == 1)
            for (int pf = 0; pf < LLM__X16K_SB; pf += 64) _mm_prefetch((const char *)o + pf, _MM_HINT_T0);
        __m512i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            // High nibbles stay in place (16 x their value), so the sums of the sub-blocks of low
            // nibbles are scaled by 16 x their scale instead, and the super-block's sum by d / 16
            // (exact: a power of two; |isum| < 8 x 32 x 15 x 16 x 127 x 63 < 2^31).
            __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 2048 + 16 * j)));
            if (j % 2 == 0) sc = _mm512_slli_epi32(sc, 4);
            __m512i wv[8];
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m512i raw = _mm512_loadu_si512((const void *)(o + 64 * (8 * (j / 2) + c)));
                wv[c] = j % 2 ? _mm512_andnot_si512(m4, raw) : _mm512_and_si512(raw, m4);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                // one chain a token (the tokens' chains are independent), the activations'
                // 4 bytes broadcast from memory by the instruction itself
                const int8_t *aq = (const int8_t *)(act + (size_t)t * stride) + 256 * sb + 32 * j;
                __m512i dot = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) dot = llm__dpbusd_bcast(dot, wv[c], aq + 4 * c);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot, sc));
            }
        }
        const __m512 d16 = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2304))),
                                         _mm512_set1_ps(1.0f / 16));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2336)));
        __m512i mp[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            mp[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(o + 2176 + 32 * p)));
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

LLM__AVX512 void llm__x16k_tile_avx512(int nt, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K,
                                              float *out, size_t ostride) {
#define LLM__X16K_CALL(TYPE, N) llm__x16k_tile(N, rec, act, stride, K, out, ostride)
    LLM__NT_SWITCH(LLM__X16K_CALL, 0)
#undef LLM__X16K_CALL
}
#endif

// Q3_K in x16, at the file's own size (110 bytes per row and super-block). Per group of 16 rows,
// in units of two super-blocks (3520 bytes: both quants, both high bits, both scales, both d, so
// that every part is 64-byte aligned; an odd last super-block is a unit of its own, padded by 32
// bytes), per super-block:
//   quants  1024 bytes: 16 chunks of 64 bytes, chunk c = qs bytes
//           32 (c / 8) + 4 (c % 8) .. +3 of rows 0..15 as stored (2 bits each of 4 elements)
//   hmask    512 bytes: the high bits as one 64-bit mask per chunk c and shift j
//           (at 8 (4c + j)): bit 4r + b is element 128 (c / 8) + 32 j + 4 (c % 8) + b of row r,
//           so that one masked add puts them into the chunk's bytes
//   scales   192 bytes: the 6-bit scales v of 16 sub-blocks x 16 rows, split so
//           that four vectors of bytes come out in the kernel's order, byte i of vector k being
//           sub-block 2p + i % 2 of row (i % 32) / 2, p = 2k + i / 32: low nibbles in two
//           vectors (k = 0, 1 low, k = 2, 3 high nibbles), then the top 2 bits (bits 2k, 2k + 1)
//   d         32 bytes: the 16 rows' fp16 d
// The kernel adds u = q + 4 (0..7) times the Q8_K activations per sub-block of 16 columns, starting
// from -4 times the activations' sum there, so each sub-block's sum is exactly the plain
// kernel's; two sub-blocks' sums as 16-bit pairs then meet their scales in one vpdpwssd.
#define LLM__X16Q3_SB 1760   // bytes of one super-block of 16 rows

size_t llm__x16q3_group_bytes(int64_t ne0) { return ((size_t)(ne0 / 256) * LLM__X16Q3_SB + 63) & ~(size_t)63; }
// Part 0 (quants), 1 (high bits), 2 (scales) or 3 (d) of super-block sb in a group of nsb.
static const uint8_t *llm__x16q3_part(const uint8_t *g, int64_t nsb, int64_t sb, int part) {
    static const size_t size[4] = {1024, 512, 192, 32};
    const size_t k = (size_t)(sb % 2), n = sb / 2 * 2 + 1 < nsb ? 2 : 1;   // super-blocks in this unit
    size_t o = (size_t)(sb / 2) * 2 * LLM__X16Q3_SB;
    for (int i = 0; i < part; i++) o += n * size[i];
    return g + o + k * size[part];
}
static const uint8_t *llm__x16q3_hm(const uint8_t *g, int64_t nsb, int64_t sb) {
    return llm__x16q3_part(g, nsb, sb, 1);
}
static const uint8_t *llm__x16q3_sc(const uint8_t *g, int64_t nsb, int64_t sb) {
    return llm__x16q3_part(g, nsb, sb, 2);
}
static const uint8_t *llm__x16q3_d(const uint8_t *g, int64_t nsb, int64_t sb) { return llm__x16q3_part(g, nsb, sb, 3); }

// Where the 6-bit scale of sub-block s of row r lies: vector k, byte i.
static void llm__x16q3_scale_pos(int s, int r, int *k, int *i) {
    const int p = s / 2;
    *k = p / 2;
    *i = 32 * (p % 2) + 2 * r + s % 2;
}

static int llm__x16q3_scale(const uint8_t *sc, int s, int r) {
    int k, i;
    llm__x16q3_scale_pos(s, r, &k, &i);
    return (sc[64 * (k % 2) + i] >> (4 * (k / 2)) & 15) | (sc[128 + i] >> (2 * k) & 3) << 4;
}

static void llm__x16q3_repack(const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nsb = ne0 / 256;
    const size_t gb = llm__x16q3_group_bytes(ne0);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *o = (uint8_t *)dst + (size_t)g * gb;
        memset(o, 0, gb);
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *qs = (uint8_t *)llm__x16q3_part(o, nsb, sb, 0), *hm = (uint8_t *)llm__x16q3_hm(o, nsb, sb);
            uint8_t *sc = (uint8_t *)llm__x16q3_sc(o, nsb, sb), *d = (uint8_t *)llm__x16q3_d(o, nsb, sb);
            uint64_t masks[64] = {0};
            for (int r = 0; r < 16; r++) {
                const struct llm__block_q3_K *x = (const struct llm__block_q3_K *)src + (16 * g + r) * nsb + sb;
                for (int c = 0; c < 16; c++) {
                    memcpy(qs + 64 * c + 4 * r, x->qs + 32 * (c / 8) + 4 * (c % 8), 4);
                    uint32_t h;
                    memcpy(&h, x->hmask + 4 * (c % 8), 4);
                    for (int j = 0; j < 4; j++) {
                        // bit 4n + j of the 4 bytes (bits 0, 8, 16, 24 after the shift) gathered into bits 24..27
                        const uint64_t nib =
                            ((uint64_t)(h >> (4 * (c / 8) + j) & 0x01010101u) * 0x01020408u) >> 24 & 15;
                        masks[4 * c + j] |= nib << (4 * r);
                    }
                }
                uint8_t v[16];
                llm__q3_K_scales_raw(x->scales, v);
                for (int s = 0; s < 16; s++) {
                    int k, i;
                    llm__x16q3_scale_pos(s, r, &k, &i);
                    sc[64 * (k % 2) + i] |= (uint8_t)((v[s] & 15) << (4 * (k / 2)));
                    sc[128 + i] |= (uint8_t)((v[s] >> 4) << (2 * k));
                }
                memcpy(d + 2 * r, &x->d, 2);
            }
            for (int m = 0; m < 64; m++)   // (bit i of mask m: byte i / 8, bit i % 8)
                for (int i = 0; i < 8; i++) hm[8 * m + i] = (uint8_t)(masks[m] >> (8 * i));
        }
    }
}

// Row r as floats, as llm__dequantize_row computes it from the plain block.
static void llm__x16q3_dequantize_row(const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nsb = ne0 / 256;
    const int ri = (int)(r % 16);
    const uint8_t *g = (const uint8_t *)w + (size_t)(r / 16) * llm__x16q3_group_bytes(ne0);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *qs = llm__x16q3_part(g, nsb, sb, 0), *hm = llm__x16q3_hm(g, nsb, sb),
                      *sc = llm__x16q3_sc(g, nsb, sb);
        uint16_t dh;
        memcpy(&dh, llm__x16q3_d(g, nsb, sb) + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh);
        for (int e = 0; e < 256; e++) {
            const int n = e / 128, j = e % 128 / 32, l = e % 32, c = 8 * n + l / 4, bit = 4 * ri + l % 4;
            const int q = (qs[64 * c + 4 * ri + l % 4] >> (2 * j) & 3) +
                          4 * (hm[8 * (4 * c + j) + bit / 8] >> (bit % 8) & 1) - 4;
            const float dl = d * (float)(llm__x16q3_scale(sc, e / 16, ri) - 32);
            y[sb * 256 + e] = dl * (float)q;
        }
    }
}

// --- Q2_K in x16 ---
//
// Per group of 16 rows, per super-block (1344 bytes, the plain size; 64-byte aligned):
//   quants   16 chunks of 64 bytes, Q3_K's: chunk c = qs bytes 32 (c / 8) + 4 (c % 8) .. +3 of
//           rows 0..15 as stored; field j (bits 2j, 2j + 1) of byte b is element
//           128 (c / 8) + 32 j + 4 (c % 8) + b, of sub-block 8 (c / 8) + 2 j + (c % 8) / 4
//   scales   256 bytes: the scales byte (low nibble the scale, high the min) of sub-block
//           2p + k of row r at 32 p + 2 r + k: widened to 16 bits, a pair's two sub-block sums
//           of each row meet their scales in one vpdpwssd, and the mins the activations' bsums
//   d, dmin  2 x 32 bytes: the 16 rows' fp16 d, then their dmin
// The kernel's integers are the plain kernel's (q is 0..3: no offset), and a super-block ends as
// every Q2_K kernel ends it: acc += isum * (d * d_a), then acc += imin * (dmin * -d_a).
#define LLM__X16Q2_SB 1344   // bytes of one super-block of 16 rows

// --- IQ4_XS in x16 ---
//
// Per group of 16 rows, per super-block (2176 bytes, the plain size; 64-byte aligned):
//   quants    32 chunks of 64 bytes: chunk c = qs bytes 4c..4c+3 of rows 0..15 as stored; sub-block
//            c / 4, the low nibble of byte j its element 4 (c % 4) + j, the high one 16 + 4 (c % 4) + j
//   scales_l  64 bytes: each row's 4 bytes (the 8 sub-blocks' low 4 bits of ls, 4 bits apart)
//   scales_h  32 bytes: each row's 16 bits (their high 2 bits, 2 bits apart)
//   d         32 bytes: the 16 rows' fp16 d
// The kernel looks each nibble up as its grid value + 128 (unsigned, for vpdpbusd), takes the 128
// times the activations' sum back out per sub-block, and multiplies the sub-block's sum by its
// ls - 32: the plain kernel's integers; a super-block ends as it does, acc += isum * (d * d_a).
#define LLM__X16IQ4_SB 2176   // bytes of one super-block of 16 rows

// --- Q6_K in x16 ---
//
// Per group of 16 rows, per super-block (3392 bytes: the plain 3360 and 32 of padding, so that
// every super-block starts a cache line):
//   quants  4 units of 768 bytes, one per half h and k / 4 (below): the qh chunks of k = 4 (k / 4)
//           .. + 3, then the ql chunks of those k with g % 2 = 0, then with g % 2 = 1; a chunk is
//           64 bytes, bytes 4c..4c+3 of ql (c = 16 h + 8 (g % 2) + k) or of qh (c = 8 h + k) of rows
//           0..15 as stored
//   scales  256 bytes: sub-block s's int8 scale of row r at 3072 + 16 s + r
//   d       32 bytes at 3328: the 16 rows' fp16 d
// Element 128 h + 32 g + 4 k + b (h < 2, g < 4, k < 8, b < 4) is the low (g < 2) or high nibble of
// byte b of its ql chunk with bits 2g, 2g + 1 of byte b of its qh chunk as bits 4-5: q, 0..63, in
// sub-block 8 h + 2 g + k / 4. The kernel reads the units in address order, starts each
// sub-block's sum at -32 x its bsum, takes sum(q * a) by vpdpbusd, multiplies it by the scale (an
// integer multiply) and ends the super-block as the plain kernel does, acc += isum * (d * d_a):
// the same bits.
#define LLM__X16Q6_SB 3392   // bytes of one super-block of 16 rows
// where the chunks of half h, k (and g % 2) are
static inline int llm__x16q6_qh(int h, int k) { return 768 * (2 * h + k / 4) + 64 * (k % 4); }
static inline int llm__x16q6_ql(int h, int g2, int k) { return llm__x16q6_qh(h, k) + 256 + 256 * g2; }

// --- Q5_K in x16 ---
//
// Per group of 16 rows, per super-block (2816 bytes, the plain size; 64-byte aligned):
//   scales  3 x 64 bytes: word w (bytes 4w..4w+3 of the 12 packed 6-bit scales and mins) of row r
//           at 64 w + 4 r, unpacked for 16 rows at once as llm__unpack_k4_scales does for one
//   d, dmin 2 x 32 bytes at 192: the 16 rows' fp16 d, then their dmin
//   qh      8 chunks of 64 bytes at 256: chunk k = qh bytes 4k..4k+3 of rows 0..15
//   qs      32 chunks of 64 bytes at 768: chunk c = qs bytes 4c..4c+3 of rows 0..15
// Element 64 j + 4 k + b (j < 4, k < 8, b < 4) is the low nibble of byte b of qs chunk 8 j + k with
// bit 2j of byte b of qh chunk k as its bit 4 (sub-block 2j); element 64 j + 32 + 4 k + b the high
// nibble with bit 2j + 1 (sub-block 2j + 1): q, 0..31. The kernel's sums are the plain kernel's
// (isum = sum of scale x sum(q * a), imin = sum of min x the sub-block's bsums) and a super-block
// ends as it does: acc += isum * (d * d_a), then acc += imin * (dmin * -d_a).
#define LLM__X16Q5_SB 2816   // bytes of one super-block of 16 rows

// Where the fields of a Q2_K, IQ4_XS, Q6_K or Q5_K block go in its x16 super-block (above): len bytes at src
// in row r's block to dst + r * rstride in the 16 rows' record of 16 x the block's size.
struct llm__x16f_field { uint16_t src, dst, len, rstride; };
#define LLM__X16F_MAX_FIELDS 65   // (Q6_K's)

static int llm__x16f_fields(int type, struct llm__x16f_field *f) {
    int n = 0;
    if (type == LLM__TYPE_Q2_K) {
        const uint16_t qs = offsetof(struct llm__block_q2_K, qs), sc = offsetof(struct llm__block_q2_K, scales);
        for (int c = 0; c < 16; c++) f[n++] = (struct llm__x16f_field){(uint16_t)(qs + 32 * (c / 8) + 4 * (c % 8)),
                                                                       (uint16_t)(64 * c), 4, 4};
        for (int k = 0; k < 16; k++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(sc + k), (uint16_t)(1024 + 32 * (k / 2) + k % 2), 1, 2};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_q2_K, d), 1280, 2, 2};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_q2_K, dmin), 1312, 2, 2};
    } else if (type == LLM__TYPE_Q6_K) {
        for (int c = 0; c < 32; c++)   // ql chunk c: h = c / 16, g % 2 = c % 16 / 8, k = c % 8
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q6_K, ql) + 4 * c),
                                              (uint16_t)llm__x16q6_ql(c / 16, c % 16 / 8, c % 8), 4, 4};
        for (int c = 0; c < 16; c++)   // qh chunk c: h = c / 8, k = c % 8
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q6_K, qh) + 4 * c),
                                              (uint16_t)llm__x16q6_qh(c / 8, c % 8), 4, 4};
        for (int s = 0; s < 16; s++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q6_K, scales) + s),
                                              (uint16_t)(3072 + 16 * s), 1, 1};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_q6_K, d), 3328, 2, 2};
    } else if (type == LLM__TYPE_Q5_K) {
        for (int w = 0; w < 3; w++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q5_K, scales) + 4 * w),
                                              (uint16_t)(64 * w), 4, 4};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_q5_K, d), 192, 2, 2};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_q5_K, dmin), 224, 2, 2};
        for (int k = 0; k < 8; k++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q5_K, qh) + 4 * k),
                                              (uint16_t)(256 + 64 * k), 4, 4};
        for (int c = 0; c < 32; c++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(offsetof(struct llm__block_q5_K, qs) + 4 * c),
                                              (uint16_t)(768 + 64 * c), 4, 4};
    } else {   // IQ4_XS
        const uint16_t qs = offsetof(struct llm__block_iq4_xs, qs);
        for (int c = 0; c < 32; c++)
            f[n++] = (struct llm__x16f_field){(uint16_t)(qs + 4 * c), (uint16_t)(64 * c), 4, 4};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_iq4_xs, scales_l), 2048, 4, 4};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_iq4_xs, scales_h), 2112, 2, 2};
        f[n++] = (struct llm__x16f_field){offsetof(struct llm__block_iq4_xs, d), 2144, 2, 2};
    }
    return n;
}

// Bytes of one super-block of 16 rows: 16 blocks, rounded up to whole cache lines (Q6_K: 3392).
static size_t llm__x16f_sb_bytes(int type) { return (16 * llm__type_table[type].block_bytes + 63) / 64 * 64; }

// Bytes of a group of 16 rows of a Q2_K, IQ4_XS, Q6_K or Q5_K matrix in x16 (the plain size; Q6_K 1% more).
size_t llm__x16f_group_bytes(int type, int64_t ne0) {
    return (size_t)(ne0 / 256) * llm__x16f_sb_bytes(type);
}

// Rewrites row groups [g0, g1) of a plain Q2_K, IQ4_XS, Q6_K or Q5_K matrix into x16 records.
static void llm__x16f_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    struct llm__x16f_field f[LLM__X16F_MAX_FIELDS];
    const int nf = llm__x16f_fields(type, f);
    const int64_t nsb = ne0 / 256;
    const size_t bb = llm__type_table[type].block_bytes, sbb = llm__x16f_sb_bytes(type);
    for (int64_t g = g0; g < g1; g++)
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *o = (uint8_t *)dst + ((size_t)g * (size_t)nsb + (size_t)sb) * sbb;
            memset(o + 16 * bb, 0, sbb - 16 * bb);   // (the padding)
            for (int r = 0; r < 16; r++) {
                const uint8_t *x = (const uint8_t *)src + ((size_t)(16 * g + r) * (size_t)nsb + (size_t)sb) * bb;
                for (int i = 0; i < nf; i++) memcpy(o + f[i].dst + r * f[i].rstride, x + f[i].src, f[i].len);
            }
        }
}

// Row r as floats: its plain blocks put back together and dequantized as they are.
static void llm__x16f_dequantize_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    struct llm__x16f_field f[LLM__X16F_MAX_FIELDS];
    const int nf = llm__x16f_fields(type, f);
    const int64_t nsb = ne0 / 256;
    const int ri = (int)(r % 16);
    const size_t sbb = llm__x16f_sb_bytes(type);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = (const uint8_t *)w + ((size_t)(r / 16) * (size_t)nsb + (size_t)sb) * sbb;
        _Alignas(8) uint8_t x[sizeof(struct llm__block_q6_K)];   // (the largest of the four)
        for (int i = 0; i < nf; i++) memcpy(x + f[i].src, o + f[i].dst + ri * f[i].rstride, f[i].len);
        llm__dequantize_row(type, x, y + sb * 256, 256);
    }
}

// Row r of any x16 matrix as floats (the embedding lookup of a tied, repacked table).
void llm__x16_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    if (type == LLM__TYPE_Q4_K) llm__x16k_dequantize_row(w, r, y, ne0);
    else if (type == LLM__TYPE_Q3_K) llm__x16q3_dequantize_row(w, r, y, ne0);
    else if (llm__x16_q8k(type)) llm__x16f_dequantize_row(type, w, r, y, ne0);   // Q2_K, IQ4_XS, Q6_K, Q5_K
    else llm__x16_dequantize_row(type, w, r, y, ne0);
}

#if defined(LLM__X86_SIMD)
// The four vectors of signed scales (v - 32) of one super-block (see the layout above).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q3_scales(const uint8_t *sc, __m512i s[4]) {
    const __m512i m15 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), b32 = _mm512_set1_epi8(32);
    const __m512i l0 = _mm512_load_si512((const void *)sc), l1 = _mm512_load_si512((const void *)(sc + 64));
    const __m512i h = _mm512_load_si512((const void *)(sc + 128));
    // (16-bit shifts move bits across bytes only outside the masks)
    s[0] = _mm512_or_si512(_mm512_and_si512(l0, m15), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    s[1] = _mm512_or_si512(_mm512_and_si512(l1, m15), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
    s[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m15), _mm512_and_si512(h, m30));
    s[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m15),
                           _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
    for (int k = 0; k < 4; k++) s[k] = _mm512_sub_epi8(s[k], b32);
}

// u = q + 4 (0..7) of chunk c (raw: its quant bytes) at shift j.
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__x16q3_chunk(__m512i raw, const uint8_t *hm, int c,
                                                                                  int j) {
    uint64_t bits;
    memcpy(&bits, hm + 8 * (4 * c + j), 8);
    const __m512i lo = _mm512_and_si512(j ? _mm512_srli_epi16(raw, 2 * j) : raw, _mm512_set1_epi8(3));
    return _mm512_mask_add_epi8(lo, _cvtu64_mask64(bits), lo, _mm512_set1_epi8(4));
}

// The end of a super-block of the x16 layouts that read Q8_K, as every plain kernel of these types
// ends it: acc += isum * (d * d_a), then (mins: dmin not NULL) acc += imin * (dmin * -d_a); d and
// dmin the 16 rows' fp16 values.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__q8k_sb_end(
        int NT, __m512 *acc, const __m512i *isum, const __m512i *imin, const void *d, const void *dmin,
        const struct llm__block_q8_K *const *a) {
    const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)d));
    const __m512 m16 = dmin ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)dmin)) : d16;
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d16, _mm512_set1_ps(a[t]->d)), acc[t]);
        if (dmin)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin[t]), _mm512_mul_ps(m16, _mm512_set1_ps(-a[t]->d)), acc[t]);
    }
}

// out[t][0..16) = the 16 rows of one x16 Q3_K group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q3_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *qs = llm__x16q3_part(rec, nsb, sb, 0), *hm = llm__x16q3_hm(rec, nsb, sb);
        if (NT == 1)   // (as the other x16 kernels: the hardware prefetcher alone leaves the core waiting)
            for (int pf = 0; pf < LLM__X16Q3_SB; pf += 64)
                _mm_prefetch((const char *)rec + (size_t)sb * LLM__X16Q3_SB + 4096 + pf, _MM_HINT_T0);
        const struct llm__block_q8_K *a[4] = {0};   // (all 4 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[4], s[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        llm__x16q3_scales(llm__x16q3_sc(rec, nsb, sb), s);
        for (int n = 0; n < 2; n++) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {   // sub-blocks 8n + 2j (chunks 8n..8n+3) and 8n + 2j + 1
                const int p = 4 * n + j;
                __m512i d0[4], d1[4];
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) d0[t] = d1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    d0[t] = _mm512_set1_epi32(-4 * a[t]->bsums[2 * p]);
                    d1[t] = _mm512_set1_epi32(-4 * a[t]->bsums[2 * p + 1]);
                }
#pragma GCC unroll 8
                for (int c4 = 0; c4 < 8; c4++) {
                    const int c = 8 * n + c4;
                    const __m512i u = llm__x16q3_chunk(_mm512_load_si512((const void *)(qs + 64 * c)), hm, c, j);
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) {
                        int32_t a4;
                        memcpy(&a4, a[t]->qs + 128 * n + 32 * j + 4 * c4, 4);
                        if (c4 < 4) d0[t] = _mm512_dpbusd_epi32(d0[t], u, _mm512_set1_epi32(a4));
                        else d1[t] = _mm512_dpbusd_epi32(d1[t], u, _mm512_set1_epi32(a4));
                    }
                }
                // the pair's sums (each within +-8192) as 16-bit halves, times the scale pairs
                const __m512i sp = _mm512_cvtepi8_epi16(p % 2 ? _mm512_extracti64x4_epi64(s[p / 2], 1)
                                                              : _mm512_castsi512_si256(s[p / 2]));
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const __m512i v = _mm512_mask_blend_epi16(0xAAAAAAAAu, d0[t], _mm512_slli_epi32(d1[t], 16));
                    isum[t] = _mm512_dpwssd_epi32(isum[t], v, sp);
                }
            }
        }
        llm__q8k_sb_end(NT, acc, isum, NULL, llm__x16q3_d(rec, nsb, sb), NULL, a);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

#endif

#if defined(LLM__X86_SIMD)
// out[t][0..16) = the 16 rows of one x16 Q2_K group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q2_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    const __m512i m3 = _mm512_set1_epi8(3), m15 = _mm512_set1_epi16(15);
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q2_SB;
        if (NT == 1)   // (as the other x16 kernels: the hardware prefetcher alone leaves the core waiting)
            for (int pf = 0; pf < LLM__X16Q2_SB; pf += 64) _mm_prefetch((const char *)p0 + 4096 + pf, _MM_HINT_T0);
        const struct llm__block_q8_K *a[4] = {0};   // (all 4 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[4], imin[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) isum[t] = imin[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        for (int n = 0; n < 2; n++) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {   // sub-blocks 2p (chunks 8n..8n+3) and 2p + 1, p = 4n + j
                const int p = 4 * n + j;
                __m512i d0[4], d1[4];
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) d0[t] = d1[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int c4 = 0; c4 < 8; c4++) {
                    const __m512i raw = _mm512_load_si512((const void *)(p0 + 64 * (8 * n + c4)));
                    const __m512i u = _mm512_and_si512(j ? _mm512_srli_epi16(raw, 2 * j) : raw, m3);
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) {
                        int32_t a4;
                        memcpy(&a4, a[t]->qs + 128 * n + 32 * j + 4 * c4, 4);
                        if (c4 < 4) d0[t] = _mm512_dpbusd_epi32(d0[t], u, _mm512_set1_epi32(a4));
                        else d1[t] = _mm512_dpbusd_epi32(d1[t], u, _mm512_set1_epi32(a4));
                    }
                }
                // the pair's sums (each within +-6144) as 16-bit halves, times the scale pairs;
                // the mins times the pair's bsums
                const __m512i sm = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(p0 + 1024 + 32 * p)));
                const __m512i sc = _mm512_and_si512(sm, m15), mn = _mm512_srli_epi16(sm, 4);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const __m512i v = _mm512_mask_blend_epi16(0xAAAAAAAAu, d0[t], _mm512_slli_epi32(d1[t], 16));
                    int32_t pair;
                    memcpy(&pair, a[t]->bsums + 2 * p, 4);
                    isum[t] = _mm512_dpwssd_epi32(isum[t], v, sc);
                    imin[t] = _mm512_dpwssd_epi32(imin[t], mn, _mm512_set1_epi32(pair));
                }
            }
        }
        llm__q8k_sb_end(NT, acc, isum, imin, p0 + 1280, p0 + 1312, a);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

#endif

#if defined(LLM__X86_SIMD)
// ls - 32 of sub-block b of the 16 rows of an x16 IQ4_XS super-block (p0), as 32-bit lanes.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16iq4_scales(const uint8_t *p0, __m512i ls[8]) {
    const __m512i sl = _mm512_load_si512((const void *)(p0 + 2048));
    const __m512i sh = _mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(p0 + 2112)));
#pragma GCC unroll 8
    for (int b = 0; b < 8; b++) {
        const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * b), _mm512_set1_epi32(15));
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * b), _mm512_set1_epi32(3));
        ls[b] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
    }
}

// out[t][0..16) = the 16 rows of one x16 IQ4_XS group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16iq4_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i table = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                          _mm512_set1_epi8(-128));   // (value + 128, unsigned)
    __m512 acc[8];   // (all 8 set, as dot below: LLM_GENERIC_TILES builds warn otherwise)
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p0 = rec + (size_t)sb * LLM__X16IQ4_SB;
        if (NT == 1)   // (as the other x16 kernels: the hardware prefetcher alone leaves the core waiting)
            for (int pf = 0; pf < LLM__X16IQ4_SB; pf += 64) _mm_prefetch((const char *)p0 + 4096 + pf, _MM_HINT_T0);
        const struct llm__block_q8_K *a[8] = {0};   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[8], ls[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        llm__x16iq4_scales(p0, ls);
        for (int b = 0; b < 8; b++) {
            __m512i dot[8];
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++)   // -128 x the sub-block's activations, taken back out
                dot[t] = _mm512_set1_epi32(-128 * (a[t]->bsums[2 * b] + a[t]->bsums[2 * b + 1]));
#pragma GCC unroll 4
            for (int c4 = 0; c4 < 4; c4++) {
                const __m512i raw = _mm512_load_si512((const void *)(p0 + 64 * (4 * b + c4)));
                const __m512i ulo = _mm512_shuffle_epi8(table, _mm512_and_si512(raw, m4));
                const __m512i uhi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++) {
                    dot[t] = llm__dpbusd_bcast(dot[t], ulo, a[t]->qs + 32 * b + 4 * c4);
                    dot[t] = llm__dpbusd_bcast(dot[t], uhi, a[t]->qs + 32 * b + 16 + 4 * c4);
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], ls[b]));
        }
        llm__q8k_sb_end(NT, acc, isum, NULL, p0 + 2144, NULL, a);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

#endif
#if defined(LLM__X86_SIMD)
// q (0..63) of columns 128 h + 32 g + 4 k .. + 3 of the 16 rows of an x16 Q6_K super-block (p0).
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__x16q6_chunk(const uint8_t *p0, int h, int g,
                                                                                int k) {
    const __m512i ql = _mm512_loadu_si512((const void *)(p0 + llm__x16q6_ql(h, g % 2, k)));
    const __m512i qh = _mm512_loadu_si512((const void *)(p0 + llm__x16q6_qh(h, k)));
    // (16-bit shifts leak bits across bytes only outside the masks)
    const __m512i lo = g < 2 ? ql : _mm512_srli_epi16(ql, 4);
    const __m512i hi = g == 0 ? _mm512_slli_epi16(qh, 4) : g == 1 ? _mm512_slli_epi16(qh, 2)
                       : g == 2 ? qh : _mm512_srli_epi16(qh, 2);
    return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(15)), _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

// out[t][0..16) = the 16 rows of one x16 Q6_K group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q6_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    __m512 acc[8];   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q6_SB;
        // (no software prefetch: read in address order, the hardware prefetcher alone keeps up, and 4 KB
        // ahead as the other x16 kernels took decode from 29-30 to 25.5 tokens/s on the TinyLlama shape)
        const struct llm__block_q8_K *a[8] = {0};   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int kh = 0; kh < 2; kh++)   // one unit of chunks
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {   // sub-block s: chunks k = 4 kh .. 4 kh + 3
                    const int s = 8 * h + 2 * g + kh;
                    __m512i dot[8];
#pragma GCC unroll 8
                    for (int t = 0; t < 8; t++) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++) dot[t] = _mm512_set1_epi32(-32 * a[t]->bsums[s]);
#pragma GCC unroll 4
                    for (int k = 4 * kh; k < 4 * kh + 4; k++) {
                        const __m512i u = llm__x16q6_chunk(p0, h, g, k);
#pragma GCC unroll 8
                        for (int t = 0; t < NT; t++)
                            dot[t] = llm__dpbusd_bcast(dot[t], u, a[t]->qs + 128 * h + 32 * g + 4 * k);
                    }
                    const __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(p0 + 3072 + 16 * s)));
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], sc));
                }
        llm__q8k_sb_end(NT, acc, isum, NULL, p0 + 3328, NULL, a);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

#endif
#if defined(LLM__X86_SIMD)
// The 8 scales (sc) and the 8 mins, each in both 16-bit halves (mp), of the 16 rows of an x16 Q5_K
// super-block (p0), as 32-bit lanes.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q5_scales(const uint8_t *p0, __m512i sc[8],
                                                                               __m512i mp[8]) {
    const __m512i w0 = _mm512_load_si512((const void *)p0), w1 = _mm512_load_si512((const void *)(p0 + 64));
    const __m512i w2 = _mm512_load_si512((const void *)(p0 + 128));
    const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i m30 = _mm512_set1_epi32(0x30303030), ff = _mm512_set1_epi32(0xff);
    const __m512i o[4] = {   // bytes s % 4 of: scales 0-3, scales 4-7, mins 0-3, mins 4-7
        _mm512_and_si512(w0, m6),
        _mm512_or_si512(_mm512_and_si512(w2, m4), _mm512_and_si512(_mm512_srli_epi32(w0, 2), m30)),
        _mm512_and_si512(w1, m6),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4),
                        _mm512_and_si512(_mm512_srli_epi32(w1, 2), m30))};
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        sc[s] = _mm512_and_si512(_mm512_srli_epi32(o[s / 4], 8 * (s % 4)), ff);
        const __m512i m = _mm512_and_si512(_mm512_srli_epi32(o[2 + s / 4], 8 * (s % 4)), ff);
        mp[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    }
}

// Bit b of each byte of v at bit 4 (16-bit shifts: what crosses bytes is masked off).
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__bit_to4(__m512i v, int b) {
    const __m512i x = b < 4   ? _mm512_slli_epi16(v, (unsigned)(4 - b))
                      : b > 4 ? _mm512_srli_epi16(v, (unsigned)(b - 4))
                              : v;
    return _mm512_and_si512(x, _mm512_set1_epi8(16));
}

// q (0..31) of columns 64 j + 32 hi + 4 k .. + 3 of the 16 rows of an x16 Q5_K super-block (p0).
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__x16q5_chunk(const uint8_t *p0, int j, int hi,
                                                                                int k) {
    const __m512i qs = _mm512_load_si512((const void *)(p0 + 768 + 64 * (8 * j + k)));
    const __m512i qh = _mm512_load_si512((const void *)(p0 + 256 + 64 * k));
    const __m512i n = _mm512_and_si512(hi ? _mm512_srli_epi16(qs, 4) : qs, _mm512_set1_epi8(15));
    return _mm512_or_si512(n, llm__bit_to4(qh, 2 * j + hi));
}

// out[t][0..16) = the 16 rows of one x16 Q5_K group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q5_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    __m512 acc[8];   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q5_SB;
        // (no software prefetch: read in address order, as Q6_K's)
        const struct llm__block_q8_K *a[8] = {0};   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[8], imin[8], sc[8], mp[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) isum[t] = imin[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        llm__x16q5_scales(p0, sc, mp);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++)
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++) {
                int32_t pair;
                memcpy(&pair, a[t]->bsums + 2 * s, 4);
                imin[t] = _mm512_dpwssd_epi32(imin[t], mp[s], _mm512_set1_epi32(pair));
            }
        for (int j = 0; j < 4; j++) {
#pragma GCC unroll 2
            for (int hi = 0; hi < 2; hi++) {   // sub-block 2 j + hi
                __m512i dot[8];
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    const __m512i u = llm__x16q5_chunk(p0, j, hi, k);
#pragma GCC unroll 8
                    for (int t = 0; t < NT; t++)
                        dot[t] = llm__dpbusd_bcast(dot[t], u, a[t]->qs + 64 * j + 32 * hi + 4 * k);
                }
#pragma GCC unroll 8
                for (int t = 0; t < NT; t++)
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], sc[2 * j + hi]));
            }
        }
        llm__q8k_sb_end(NT, acc, isum, imin, p0 + 192, p0 + 224, a);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}


// out[t][0..16) = the 16 rows of one x16 group of a type llm__x16_q8k names times nt tokens' Q8_K
// rows (act + t * stride): 4 tokens a call at most for Q3_K and Q2_K, 8 for the others.
LLM__AVX512 void llm__x16q8k_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act, size_t stride,
                                         int64_t K, float *out, size_t ostride) {
#define LLM__Q8K_CALL4(N) LLM__Q8K_KERNEL(N, rec, act, stride, K, out, ostride)
#define LLM__Q8K_CALL(TYPE, N) LLM__Q8K_KERNEL(N, rec, act, stride, K, out, ostride)
    switch (type) {
#define LLM__Q8K_KERNEL(...) llm__x16q3_tile(__VA_ARGS__)
    case LLM__TYPE_Q3_K: LLM__NT4_SWITCH(LLM__Q8K_CALL4) break;
#undef LLM__Q8K_KERNEL
#define LLM__Q8K_KERNEL(...) llm__x16q2_tile(__VA_ARGS__)
    case LLM__TYPE_Q2_K: LLM__NT4_SWITCH(LLM__Q8K_CALL4) break;
#undef LLM__Q8K_KERNEL
#define LLM__Q8K_KERNEL(...) llm__x16iq4_tile(__VA_ARGS__)
    case LLM__TYPE_IQ4_XS: LLM__NT_SWITCH(LLM__Q8K_CALL, 0) break;
#undef LLM__Q8K_KERNEL
#define LLM__Q8K_KERNEL(...) llm__x16q6_tile(__VA_ARGS__)
    case LLM__TYPE_Q6_K: LLM__NT_SWITCH(LLM__Q8K_CALL, 0) break;
#undef LLM__Q8K_KERNEL
#define LLM__Q8K_KERNEL(...) llm__x16q5_tile(__VA_ARGS__)
    default: LLM__NT_SWITCH(LLM__Q8K_CALL, 0) break;   // Q5_K
#undef LLM__Q8K_KERNEL
    }
#undef LLM__Q8K_CALL
#undef LLM__Q8K_CALL4
}
#endif
// --- K-quant tiles: prompt products of Q2_K, Q3_K, Q5_K, Q6_K and IQ4_XS weights (AVX-512) ---
//
// The x16 layouts of these types keep the file's packing (unpacked to bytes they would grow
// 1.3-3x, and decode reads them as stored). A step of at least LLM__KT_MIN_TOKENS tokens unpacks
// 16 rows x one super-block at a time into bytes in x16's chunk order (64 bytes = 4 columns of 16
// rows) and multiplies them with every token's Q8_K activations by vpdpbusd, so the unpacking is
// paid once per step rather than once per token. A byte is u = w + off >= 0, w the integer the
// plain kernels multiply by the activations:
//   Q3_K  sc * q (-124..128, off 124): the sub-block scale folds in, one sum per super-block
//   Q2_K  sc * q (0..45), the sub-block scale folded in; the mins' sum m[s] * bsums[s] by vpdpwssd
//   Q6_K  q - 32 (off 32), its scale per group of 16 columns applied by an integer multiply
//   Q5_K  q (0..31), the scale per group of 32 by an integer multiply, the mins as Q2_K's
//   IQ4_XS the grid value (-127..113, off 127), ls - 32 per group of 32 by an integer multiply
// The offset comes back out through the activations' group sums. The integer sums are the plain
// kernels', so results differ from theirs only in float rounding (test_backend has a scalar
// version of each unpacking to compare with).
#if defined(LLM__X86_SIMD)

static int llm__kt_off(int type) {
    return type == LLM__KT_X16Q3 ? 124 : type == LLM__TYPE_IQ4_XS ? 127 : type == LLM__TYPE_Q6_K ? 32 : 0;
}
// Chunks (of 4 columns) per scale group: 64 where the scales fold into the bytes.
static int llm__kt_group(int type) {
    return type == LLM__TYPE_Q6_K ? 4 : type == LLM__KT_X16Q3 || type == LLM__TYPE_Q2_K ? 64 : 8;
}

// Super-block sb of an x16 Q3_K group (rec, nsb super-blocks) into a tile of type LLM__KT_X16Q3.
LLM__AVX512 void llm__kt_unpack_x16q3(const uint8_t *rec, int64_t nsb, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *qs = llm__x16q3_part(rec, nsb, sb, 0), *hm = llm__x16q3_hm(rec, nsb, sb),
                  *sc = llm__x16q3_sc(rec, nsb, sb);
    // the scales as bytes [sub-block][row] (from the kernel's order: vector k, byte i)
    _Alignas(64) int8_t v[4][64], ls[16][16];
    __m512i s[4];
    llm__x16q3_scales(sc, s);
    for (int k = 0; k < 4; k++) _mm512_store_si512((void *)v[k], s[k]);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) ls[4 * k + 2 * (i / 32) + i % 2][(i % 32) / 2] = v[k][i];
    const __m512i even = _mm512_set1_epi16(0x00ff), odd = _mm512_set1_epi16((short)0xff00);
    __m512i sc8[16], bias[16];   // per sub-block: each row's scale in its 4 bytes; 124 - 4 * scale in 16 bits
    for (int g = 0; g < 16; g++) {
        const __m512i l32 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)ls[g]));
        sc8[g] = _mm512_mullo_epi32(_mm512_and_si512(l32, _mm512_set1_epi32(0xff)), _mm512_set1_epi32(0x01010101));
        bias[g] = _mm512_sub_epi16(_mm512_set1_epi16(124),
                                   _mm512_slli_epi16(_mm512_srai_epi16(_mm512_slli_epi16(sc8[g], 8), 8), 2));
    }
    for (int c = 0; c < 16; c++) {
        const __m512i raw = _mm512_load_si512((const void *)(qs + 64 * c));
        // columns 128 (c / 8) + 32 j + 4 (c % 8) .., sub-block 8 (c / 8) + 2 j + (c % 8) / 4
        for (int j = 0; j < 4; j++) {
            const int nc = 32 * (c / 8) + 8 * j + c % 8, g = nc / 4;
            const __m512i u = llm__x16q3_chunk(raw, hm, c, j);   // q + 4, 0..7
            // sc * (u - 4) + 124 = u * sc + (124 - 4 sc), 0..252, in 16 bits: even bytes, then odd
            const __m512i lo = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_and_si512(u, even), sc8[g]), bias[g]);
            const __m512i hi = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_and_si512(u, odd), sc8[g]), bias[g]);
            _mm512_store_si512((void *)t->q[nc], _mm512_or_si512(lo, _mm512_slli_epi16(hi, 8)));
        }
    }
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)llm__x16q3_d(rec, nsb, sb))));
}

// Super-block sb of an x16 Q2_K group (rec) into a tile of the plain blocks (type LLM__TYPE_Q2_K).
LLM__AVX512 void llm__kt_unpack_x16q2(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q2_SB;
    const __m512i even = _mm512_set1_epi16(0x00ff), odd = _mm512_set1_epi16((short)0xff00);
    __m512i sc8[16];   // per sub-block: each row's scale in its 4 bytes
    for (int p = 0; p < 8; p++) {
        // 16-bit lane 2r + k: the scales byte of sub-block 2p + k of row r
        const __m512i sm = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(p0 + 1024 + 32 * p)));
        _mm512_storeu_si512((void *)t->m[p], _mm512_srli_epi16(sm, 4));
        const __m512i rep = _mm512_set1_epi32(0x01010101), m15 = _mm512_set1_epi32(15);
        sc8[2 * p] = _mm512_mullo_epi32(_mm512_and_si512(sm, m15), rep);
        sc8[2 * p + 1] = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(sm, 16), m15), rep);
    }
    for (int c = 0; c < 16; c++) {
        const __m512i raw = _mm512_load_si512((const void *)(p0 + 64 * c));
        for (int j = 0; j < 4; j++) {   // columns 128 (c / 8) + 32 j + 4 (c % 8) ..
            const int nc = 32 * (c / 8) + 8 * j + c % 8, g = nc / 4;
            const __m512i u = _mm512_and_si512(_mm512_srli_epi16(raw, 2 * j), _mm512_set1_epi8(3));
            // sc * q (0..45) in 16 bits: even bytes, then odd
            const __m512i lo = _mm512_maddubs_epi16(_mm512_and_si512(u, even), sc8[g]);
            const __m512i hi = _mm512_maddubs_epi16(_mm512_and_si512(u, odd), sc8[g]);
            _mm512_store_si512((void *)t->q[nc], _mm512_or_si512(lo, _mm512_slli_epi16(hi, 8)));
        }
    }
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 1280))));
    _mm512_storeu_ps(t->dmin, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 1312))));
}

// Super-block sb of an x16 IQ4_XS group (rec) into a tile of the plain blocks (type LLM__TYPE_IQ4_XS).
LLM__AVX512 void llm__kt_unpack_x16iq4(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *p0 = rec + (size_t)sb * LLM__X16IQ4_SB;
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i table = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                          _mm512_set1_epi8(127));   // (value + 127: the tile's offset)
    __m512i ls[8];
    llm__x16iq4_scales(p0, ls);
    for (int b = 0; b < 8; b++) {
        _mm512_storeu_si512((void *)t->ls[b], ls[b]);
        const __m512i o =
                _mm512_and_si512(_mm512_mullo_epi32(ls[b], _mm512_set1_epi32(127)), _mm512_set1_epi32(0xffff));
        _mm512_storeu_si512((void *)t->ol[b], _mm512_or_si512(o, _mm512_slli_epi32(o, 16)));   // (both halves)
    }
    for (int c = 0; c < 32; c++) {   // sub-block c / 4: columns 32 (c / 4) + 4 (c % 4) .., and 16 on
        const __m512i raw = _mm512_load_si512((const void *)(p0 + 64 * c));
        const int nc = 8 * (c / 4) + c % 4;
        _mm512_store_si512((void *)t->q[nc], _mm512_shuffle_epi8(table, _mm512_and_si512(raw, m4)));
        _mm512_store_si512((void *)t->q[nc + 4],
                           _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4)));
    }
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 2144))));
}

// Super-block sb of an x16 Q6_K group (rec) into a tile of the plain blocks (type LLM__TYPE_Q6_K).
LLM__AVX512 void llm__kt_unpack_x16q6(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q6_SB;
    for (int s = 0; s < 16; s++)
        _mm512_storeu_si512((void *)t->ls[s],
                            _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(p0 + 3072 + 16 * s))));
    for (int p = 0; p < 8; p++) {   // 32 x the scales of sub-blocks 2p, 2p + 1, row by row
        const __m128i s0 = _mm_load_si128((const __m128i *)(p0 + 3072 + 32 * p));
        const __m128i s1 = _mm_load_si128((const __m128i *)(p0 + 3072 + 32 * p + 16));
        const __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi8(s0, s1), _mm_unpacklo_epi8(s0, s1));
        _mm512_storeu_si512((void *)t->ol[p], _mm512_slli_epi16(_mm512_cvtepi8_epi16(pairs), 5));
    }
    for (int c = 0; c < 64; c++)   // columns 4c..4c+3: 128 h + 32 g + 4 k
        _mm512_store_si512((void *)t->q[c], llm__x16q6_chunk(p0, c / 32, c % 32 / 8, c % 8));
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 3328))));
}

// Super-block sb of an x16 Q5_K group (rec) into a tile of the plain blocks (type LLM__TYPE_Q5_K).
LLM__AVX512 void llm__kt_unpack_x16q5(const uint8_t *rec, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *p0 = rec + (size_t)sb * LLM__X16Q5_SB;
    __m512i sc[8], mp[8];
    llm__x16q5_scales(p0, sc, mp);
    for (int s = 0; s < 8; s++) {
        _mm512_storeu_si512((void *)t->ls[s], sc[s]);
        _mm512_storeu_si512((void *)t->m[s], mp[s]);
    }
    for (int c = 0; c < 64; c++)   // columns 4c..4c+3: 64 j + 32 hi + 4 k
        _mm512_store_si512((void *)t->q[c], llm__x16q5_chunk(p0, c / 16, c % 16 / 8, c % 8));
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 192))));
    _mm512_storeu_ps(t->dmin, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(p0 + 224))));
}

// out[t][0..16) (+)= the tile's 16 rows times NT tokens' Q8_K block (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__kt_tokens(
        int type, int NT, const struct llm__kt_tile *tl, const uint8_t *act, size_t stride, float *out, size_t ostride,
        bool first) {
    const int off = llm__kt_off(type), G = llm__kt_group(type);
    const struct llm__block_q8_K *a[8] = {0};   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
    __m512i s[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride);
        int32_t bs = 0;
        for (int g = 0; g < 16; g++) bs += a[t]->bsums[g];
        s[t] = _mm512_set1_epi32(G == 64 ? -off * bs : 0);
    }
    if (G < 64 && off) {   // the offset's share, - off x sum over groups of scale x bsum, up front
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            __m512i o = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                int32_t pair;
                memcpy(&pair, a[t]->bsums + 2 * p, 4);
                o = _mm512_dpwssd_epi32(o, _mm512_loadu_si512((const void *)tl->ol[p]), _mm512_set1_epi32(pair));
            }
            s[t] = _mm512_sub_epi32(s[t], o);
        }
    }
    for (int g0 = 0; g0 < 64; g0 += G) {   // one group of columns with one scale per row
        const int gi = g0 / G;
        __m512i sg[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) sg[t] = G == 64 ? s[t] : _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = g0; c < g0 + G; c++) {
            const __m512i wv = _mm512_load_si512((const void *)tl->q[c]);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) sg[t] = llm__dpbusd_bcast(sg[t], wv, a[t]->qs + 4 * c);
        }
        if (G == 64) {
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) s[t] = sg[t];
        } else {
            const __m512i ls = _mm512_loadu_si512((const void *)tl->ls[gi]);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(sg[t], ls));
        }
    }
    const __m512 d = _mm512_loadu_ps(tl->d);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        float *o = out + (size_t)t * ostride;
        __m512 acc = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(d, _mm512_set1_ps(a[t]->d)), acc);
        if (type == LLM__TYPE_Q2_K || type == LLM__TYPE_Q5_K) {
            __m512i mi = _mm512_setzero_si512();
            for (int p = 0; p < 8; p++) {
                int32_t pair;
                memcpy(&pair, a[t]->bsums + 2 * p, 4);
                mi = _mm512_dpwssd_epi32(mi, _mm512_loadu_si512((const void *)tl->m[p]), _mm512_set1_epi32(pair));
            }
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi),
                                  _mm512_mul_ps(_mm512_loadu_ps(tl->dmin), _mm512_set1_ps(-a[t]->d)), acc);
        }
        _mm512_storeu_ps(o, acc);
    }
}

LLM__AVX512 void llm__kt_tokens_avx512(int type, int nt, const struct llm__kt_tile *tl, const uint8_t *act,
                                              size_t stride, float *out, size_t ostride, bool first) {
#define LLM__KT_CALL(TYPE, N) llm__kt_tokens(TYPE, N, tl, act, stride, out, ostride, first)
#define LLM__KT_CASE(TYPE) LLM__NT_SWITCH(LLM__KT_CALL, TYPE)
    switch (type) {
    case LLM__KT_X16Q3: LLM__KT_CASE(LLM__KT_X16Q3) break;
    case LLM__TYPE_Q2_K: LLM__KT_CASE(LLM__TYPE_Q2_K) break;
    case LLM__TYPE_Q5_K: LLM__KT_CASE(LLM__TYPE_Q5_K) break;
    case LLM__TYPE_Q6_K: LLM__KT_CASE(LLM__TYPE_Q6_K) break;
    default: LLM__KT_CASE(LLM__TYPE_IQ4_XS) break;
    }
#undef LLM__KT_CASE
#undef LLM__KT_CALL
}
#endif

// Splits chunks [0, n) into contiguous shares, one per thread.
void llm__cursors_init(struct llm__cpu *c, int64_t n) {
    int nth = llm__pool_nth(c->pool);
    for (int i = 0; i < nth; i++) {
        int64_t lo, hi;
        llm__split(n, i, nth, &lo, &hi);
        atomic_store_explicit(&c->cursors[i].next, lo, memory_order_relaxed);
        c->cursors[i].end = hi;
    }
}

// The next chunk for thread ith: its own first, then the others'. -1 when all are taken.
int64_t llm__cursors_next(struct llm__cpu *c, int ith, int nth) {
    for (int k = 0; k < nth; k++) {
        struct llm__cursor *cur = &c->cursors[(ith + k) % nth];
        if (atomic_load_explicit(&cur->next, memory_order_relaxed) >= cur->end) continue;
        int64_t ch = atomic_fetch_add_explicit(&cur->next, 1, memory_order_relaxed);
        if (ch < cur->end) return ch;
    }
    return -1;
}

enum llm_status llm__cpu_reserve(struct llm__cpu *c, size_t size, struct llm__err *e) {
    if (size <= c->scratch_size) return LLM_OK;
    void *p = llm__alloc(size);
    if (!p) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes of scratch)", size);
    free(c->scratch);
    c->scratch = p;
    c->scratch_size = size;
    return LLM_OK;
}

void llm__cpu_free(void *ctx) {
    struct llm__cpu *c = ctx;
    if (!c) return;
    llm__pool_free(c->pool);
    free(c->scratch);
    free(c->cursors);
    free(c->gelu);
    free(c);
}

enum llm_status llm__cpu_buf_alloc(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e) {
    (void)ctx;
    memset(buf, 0, sizeof(*buf));
    buf->data = llm__alloc(size);
    if (!buf->data) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes)", size);
    buf->size = size;
    return LLM_OK;
}

void llm__cpu_buf_free(void *ctx, struct llm__buf *buf) {
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
    if (llm__is_gq(w->type)) llm__x16g_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
    else if (w->type == LLM__TYPE_Q4_K) llm__x16k_repack(job->src, w->buf.data, w->ne0, g0, g1);
    else if (w->type == LLM__TYPE_Q3_K) llm__x16q3_repack(job->src, w->buf.data, w->ne0, g0, g1);
    else if (llm__x16_q8k(w->type)) llm__x16f_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
    else llm__x16_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
}

enum llm_status llm__cpu_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                     int64_t ne1, const void *data, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    memset(w, 0, sizeof(*w));
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->buf.size = llm__row_bytes(type, ne0) * (size_t)ne1;
    if (c->simd == LLM__SIMD_AVX512 && c->repack && llm__x16_supported(type, ne0, ne1) &&
        (type != LLM__TYPE_MXFP4 || llm__x16_mxfp4_fits(data, ne0, ne1))) {
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

void llm__cpu_weight_free(void *ctx, struct llm__weight *w) {
    llm__cpu_buf_free(ctx, &w->buf);
}

void llm__cpu_upload(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n) {
    (void)ctx;
    memcpy((char *)buf->data + offs, src, n);
}

void llm__cpu_download(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n) {
    (void)ctx;
    memcpy(dst, (const char *)buf->data + offs, n);
}

void llm__cpu_begin_step(void *ctx, const struct llm__step *step) {
    struct llm__cpu *c = ctx;
    c->step = step;
    llm__pool_step_begin(c->pool, step->n_tokens);
}

enum llm_status llm__cpu_end_step(void *ctx, struct llm__err *e) {
    (void)e;
    struct llm__cpu *c = ctx;
    llm__pool_step_end(c->pool);
    c->step = NULL;
    return LLM_OK;
}

#if defined(LLM__X86_SIMD)
#endif
