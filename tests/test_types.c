// Tests of the tensor types section: fp16/bf16 conversions, block layouts (against decoders
// written here from the layout description, in float64), quantizer accuracy, bit-exact activation
// quantizers (against float64 transcriptions of ggml's reference formulas) and every vec_dot
// kernel at every SIMD level this CPU runs (against a float64 dot of the dequantized rows, and
// against its scalar twin).
#include "../llm.c"
#include "test.h"

static const int supported_types[] = {LLM__TYPE_F32,  LLM__TYPE_F16,  LLM__TYPE_BF16, LLM__TYPE_Q8_0,
                                      LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1,
                                      LLM__TYPE_IQ4_NL, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K,
                                      LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_IQ4_XS, LLM__TYPE_MXFP4,
                                      LLM__TYPE_G4_32, LLM__TYPE_G4_64, LLM__TYPE_G4_128,
                                      LLM__TYPE_G8_32, LLM__TYPE_G8_64, LLM__TYPE_G8_128};
#define N_SUPPORTED ((int)(sizeof(supported_types) / sizeof(supported_types[0])))

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// --- float64 references ---

static double ref_half_value(uint16_t h) {   // not for NaN/inf
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// Nearest half, ties to even, from the value: find the exponent, scale to an integer significand
// in double (exact), round with rint. Not for NaN.
static uint16_t ref_to_half(float f) {
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    const double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    if (a < ldexp(1, -14)) return (uint16_t)(sign | (uint16_t)rint(a * ldexp(1, 24)));
    int ex;
    frexp(a, &ex);
    int e = ex - 1;   // a in [2^e, 2^(e+1))
    double q = rint(ldexp(a, 10 - e));
    if (q == 2048) q = 1024, e++;
    return (uint16_t)(sign | (e + 15) << 10 | ((int)q - 1024));
}

// Nearest bf16, ties to even, by comparing the two neighbours in double. Not for NaN.
static uint16_t ref_to_bf16(float f) {
    const uint32_t u = f2u(f), lo = u & 0xffff0000u;
    const double x = fabs((double)f), vlo = fabs((double)u2f(lo));
    if (isinf(f)) return (uint16_t)(u >> 16);
    const int e = ((lo >> 23) & 255);
    const double ulp = ldexp(1, (e ? e : 1) - 127 - 7);   // spacing of bf16 values around x
    const double vhi = vlo + ulp;
    if (x - vlo < vhi - x) return (uint16_t)(lo >> 16);
    if (x - vlo > vhi - x) return (uint16_t)((lo >> 16) + 1);
    return (uint16_t)((lo >> 16) + ((lo >> 16) & 1));
}

static double round_half_away(double v) { return v >= 0 ? floor(v + 0.5) : -floor(-v + 0.5); }

// quantize_row_q8_0_ref, transcribed: float values computed in double and rounded to float where
// ggml rounds (every float op on floats is exact in double, so this rounds once, as float does).
// quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127; each element the E2M1 value nearest to
// it (in float64; the first of a tie) at scale 2^(e - 127).
static void ref_quantize_mxfp4(const float *x, uint8_t out[17]) {
    static const double e2m1[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6};
    double amax = 0;
    for (int j = 0; j < 32; j++)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]);
    const int e = amax > 0 ? (int)floor(log2(amax)) - 2 + 127 : 0;
    out[0] = (uint8_t)e;
    uint8_t q[32];
    for (int j = 0; j < 32; j++) {
        int best = 0;
        for (int k = 1; k < 16; k++)
            if (fabs(ldexp(e2m1[k], e - 127) - x[j]) < fabs(ldexp(e2m1[best], e - 127) - x[j])) best = k;
        q[j] = (uint8_t)best;
    }
    for (int j = 0; j < 16; j++) out[1 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

static void ref_quantize_q8_0(const float *x, uint8_t out[34]) {
    double amax = 0;
    for (int j = 0; j < 32; j++)   // (not fmax: gcc 12 for aarch64 crashes vectorizing that reduction)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]);
    const float d = (float)(amax / 127.0), id = d != 0 ? (float)(1.0 / d) : 0.0f;
    const uint16_t dh = ref_to_half(d);
    memcpy(out, &dh, 2);
    for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)round_half_away((float)((double)x[j] * id));
}

static void ref_quantize_q4_0(const float *x, uint8_t out[18]) {
    double amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]), max = x[j];
    const float d = (float)(max / -8.0), id = d != 0 ? (float)(1.0 / d) : 0.0f;
    const uint16_t dh = ref_to_half(d);
    memcpy(out, &dh, 2);
    for (int j = 0; j < 16; j++) {
        int q[2];
        for (int k = 0; k < 2; k++) {
            const float v = (float)((double)x[j + 16 * k] * id);
            q[k] = (int)floor((float)((double)v + 8.5));
            if (q[k] > 15) q[k] = 15;
        }
        out[2 + j] = (uint8_t)(q[0] | q[1] << 4);
    }
}

// quantize_row_q8_1_ref: Q8_0's bytes with s = fp16(float(sum of quants) * d) after d.
static void ref_quantize_q8_1(const float *x, uint8_t out[36]) {
    uint8_t q80[34];
    ref_quantize_q8_0(x, q80);
    double amax = 0;
    for (int j = 0; j < 32; j++)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]);
    const float d = (float)(amax / 127.0);
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += (int8_t)q80[2 + j];
    const uint16_t sh = ref_to_half((float)((double)sum * d));
    memcpy(out, q80, 2);
    memcpy(out + 2, &sh, 2);
    memcpy(out + 4, q80 + 2, 32);
}

// quantize_row_q4_1_ref (bits 4) / quantize_row_q5_1_ref (bits 5), transcribed: d, m = min, then
// qs (and qh: bit j = bit 4 of quant j) of trunc((x - min) * id + 0.5) (capped at 15 for Q4_1).
static void ref_quantize_min(const float *x, int bits, uint8_t *out) {
    double min = INFINITY, max = -INFINITY;
    for (int j = 0; j < 32; j++) min = x[j] < min ? x[j] : min, max = x[j] > max ? x[j] : max;
    const float d = (float)((float)(max - min) / ((1 << bits) - 1)), id = d != 0 ? (float)(1.0 / d) : 0.0f;
    const uint16_t dh = ref_to_half(d), mh = ref_to_half((float)min);
    memcpy(out, &dh, 2);
    memcpy(out + 2, &mh, 2);
    uint32_t qh = 0;
    int q[32];
    for (int j = 0; j < 32; j++) {
        const float v = (float)((double)(float)(x[j] - min) * id);
        q[j] = (int)floor((float)((double)v + 0.5));
        if (bits == 4 && q[j] > 15) q[j] = 15;
        qh |= (uint32_t)(q[j] >> 4 & 1) << j;
    }
    uint8_t *qs = out + (bits == 4 ? 4 : 8);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    if (bits == 5) memcpy(out + 4, &qh, 4);
}

// quantize_row_q5_0_ref: d = max / -16, q = min(31, trunc(x * id + 16.5)).
static void ref_quantize_q5_0(const float *x, uint8_t out[22]) {
    double amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]), max = x[j];
    const float d = (float)(max / -16.0), id = d != 0 ? (float)(1.0 / d) : 0.0f;
    const uint16_t dh = ref_to_half(d);
    memcpy(out, &dh, 2);
    uint32_t qh = 0;
    int q[32];
    for (int j = 0; j < 32; j++) {
        const float v = (float)((double)x[j] * id);
        q[j] = (int)floor((float)((double)v + 16.5));
        if (q[j] > 31) q[j] = 31;
        qh |= (uint32_t)(q[j] >> 4 & 1) << j;
    }
    memcpy(out + 2, &qh, 4);
    for (int j = 0; j < 16; j++) out[6 + j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
}

static void ref_quantize_q8_K(const float *x, uint8_t out[292]) {
    double amax = 0, max = 0;
    memset(out, 0, 292);
    for (int j = 0; j < 256; j++)
        if (fabs((double)x[j]) > amax) amax = fabs((double)x[j]), max = x[j];
    if (amax == 0) return;
    const float iscale = (float)(-127.0 / max), d = (float)(1.0 / iscale);
    int8_t q[256];
    for (int j = 0; j < 256; j++) {
        const double r = rint((float)((double)iscale * x[j]));   // ties to even
        q[j] = (int8_t)(r > 127 ? 127 : r);
    }
    memcpy(out, &d, 4);
    memcpy(out + 4, q, 256);
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++) sum += q[16 * g + l];
        const int16_t s16 = (int16_t)sum;
        memcpy(out + 260 + 2 * g, &s16, 2);
    }
}

// Decoders written from the layout description, one element at a time, in float64.
// q4_K/q5_K 6-bit scale (which = 0) or min (which = 1) of sub-block s.
static int ref_k4_scale(const uint8_t *scales, int s, int which) {
    if (s < 4) return scales[s + 4 * which] & 63;
    const int low4 = which ? scales[s + 4] >> 4 : scales[s + 4] & 15;
    return low4 | (scales[s - 4 + 4 * which] >> 6) << 4;
}

static double ref_element(int type, const uint8_t *row, int64_t e) {
    uint16_t h;
    switch (type) {
    case LLM__TYPE_F32: { float f; memcpy(&f, row + 4 * e, 4); return f; }
    case LLM__TYPE_F16: memcpy(&h, row + 2 * e, 2); return ref_half_value(h);
    case LLM__TYPE_BF16: memcpy(&h, row + 2 * e, 2); return u2f((uint32_t)h << 16);
    case LLM__TYPE_Q8_0: {
        const uint8_t *b = row + 34 * (e / 32);
        memcpy(&h, b, 2);
        return ref_half_value(h) * (int8_t)b[2 + e % 32];
    }
    case LLM__TYPE_Q4_0: {
        const uint8_t *b = row + 18 * (e / 32);
        const int j = (int)(e % 32), q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
        memcpy(&h, b, 2);
        return ref_half_value(h) * (q - 8);
    }
    case LLM__TYPE_Q8_1: {   // d, s, 32 quants
        const uint8_t *b = row + 36 * (e / 32);
        memcpy(&h, b, 2);
        return ref_half_value(h) * (int8_t)b[4 + e % 32];
    }
    case LLM__TYPE_Q4_1:     // d, m, 16 nibble bytes: x = d * q + m
    case LLM__TYPE_Q5_0:     // d, qh (u32 LE), 16 nibble bytes: x = d * (q - 16)
    case LLM__TYPE_Q5_1:     // d, m, qh, 16 nibble bytes: x = d * q + m
    case LLM__TYPE_IQ4_NL: { // d, 16 nibble bytes: x = d * grid[q]
        static const int grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const int bytes = type == LLM__TYPE_Q4_1 ? 20 : type == LLM__TYPE_Q5_0 ? 22 : type == LLM__TYPE_Q5_1 ? 24 : 18;
        const int qs_at = type == LLM__TYPE_Q4_1 ? 4 : type == LLM__TYPE_Q5_0 ? 6 : type == LLM__TYPE_Q5_1 ? 8 : 2;
        const uint8_t *b = row + bytes * (e / 32);
        const int j = (int)(e % 32);
        int q = j < 16 ? b[qs_at + j] & 15 : b[qs_at + j - 16] >> 4;
        if (type == LLM__TYPE_Q5_0 || type == LLM__TYPE_Q5_1) {
            const uint8_t *qh = b + (type == LLM__TYPE_Q5_0 ? 2 : 4);
            q += ((qh[j / 8] >> (j % 8)) & 1) * 16;
        }
        uint16_t hm = 0;
        memcpy(&h, b, 2);
        if (type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1) memcpy(&hm, b + 2, 2);
        if (type == LLM__TYPE_IQ4_NL) return ref_half_value(h) * grid[q];
        if (type == LLM__TYPE_Q5_0) return ref_half_value(h) * (q - 16);
        return ref_half_value(h) * q + ref_half_value(hm);
    }
    case LLM__TYPE_MXFP4: {   // e (E8M0), 16 nibble bytes: x = 2^(e - 127) * e2m1(q)
        const uint8_t *b = row + 17 * (e / 32);
        const int j = (int)(e % 32), q = j < 16 ? b[1 + j] & 15 : b[1 + j - 16] >> 4;
        const double mag = (q & 7) == 0 ? 0.0 : (q & 7) == 1 ? 0.5 : ldexp(1.0 + 0.5 * ((q & 7) & 1), ((q & 7) >> 1) - 1);
        return ldexp(q & 8 ? -mag : mag, b[0] - 127);
    }
    case LLM__TYPE_Q4_K:
    case LLM__TYPE_Q5_K: {
        const bool five = type == LLM__TYPE_Q5_K;
        const uint8_t *b = row + (five ? 176 : 144) * (e / 256), *scales = b + 4;
        const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
        const int j = (int)(e % 256), s = j / 32, l = j % 32;
        int q = s % 2 == 0 ? qs[32 * (s / 2) + l] & 15 : qs[32 * (s / 2) + l] >> 4;
        if (five) q += ((qh[l] >> s) & 1) * 16;
        uint16_t hd, hm;
        memcpy(&hd, b, 2);
        memcpy(&hm, b + 2, 2);
        return ref_half_value(hd) * ref_k4_scale(scales, s, 0) * q - ref_half_value(hm) * ref_k4_scale(scales, s, 1);
    }
    case LLM__TYPE_Q6_K: {
        const uint8_t *b = row + 210 * (e / 256), *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const int j = (int)(e % 256), half = j / 128, r = j % 128, quarter = r / 32, l = r % 32;
        const uint8_t lowbyte = ql[64 * half + l + 32 * (quarter & 1)];
        const int low4 = quarter < 2 ? lowbyte & 15 : lowbyte >> 4;
        const int high2 = (qh[32 * half + l] >> (2 * quarter)) & 3;
        memcpy(&h, b + 208, 2);
        return ref_half_value(h) * sc[j / 16] * ((low4 | high2 << 4) - 32);
    }
    case LLM__TYPE_Q3_K: {   // hmask[32] qs[64] scales[12] d
        const uint8_t *b = row + 110 * (e / 256), *hmask = b, *qs = b + 32, *scales = b + 96;
        const int j = (int)(e % 256), s = j / 16, half = j / 128, quarter = j % 128 / 32, l = j % 32;
        const int low2 = (qs[32 * half + l] >> (2 * quarter)) & 3, high = (hmask[l] >> (4 * half + quarter)) & 1;
        const int sc_low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4, sc_high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        memcpy(&h, b + 108, 2);
        return ref_half_value(h) * ((sc_low | sc_high << 4) - 32) * ((low2 | high << 2) - 4);
    }
    case LLM__TYPE_Q2_K: {   // scales[16] qs[64] d dmin
        const uint8_t *b = row + 84 * (e / 256), *scales = b, *qs = b + 16;
        const int j = (int)(e % 256), s = j / 16, half = j / 128, quarter = j % 128 / 32, l = j % 32;
        const int q = (qs[32 * half + l] >> (2 * quarter)) & 3;
        uint16_t hm;
        memcpy(&h, b + 80, 2);
        memcpy(&hm, b + 82, 2);
        return ref_half_value(h) * (scales[s] & 15) * q - ref_half_value(hm) * (scales[s] >> 4);
    }
    case LLM__TYPE_IQ4_XS: {   // d scales_h scales_l[4] qs[128]
        static const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const uint8_t *b = row + 136 * (e / 256);
        const int j = (int)(e % 256), sb = j / 32, l = j % 32;
        const int scale_h = (b[2] | b[3] << 8) >> (2 * sb) & 3, scale_l = (b[4 + sb / 2] >> (4 * (sb % 2))) & 15;
        const uint8_t qb = b[8 + 16 * sb + l % 16];
        memcpy(&h, b, 2);
        return ref_half_value(h) * ((scale_l | scale_h << 4) - 32) * levels[l < 16 ? qb & 15 : qb >> 4];
    }
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:   // d z qs[g/2]: x = d (q - z)
    case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: {  // d z qs[g]: x = d (q - z), both less 128
        const int g = 32 << ((type - LLM__TYPE_G4_32) % 3), eight = type >= LLM__TYPE_G8_32;
        const uint8_t *b = row + (size_t)(4 + (eight ? g : g / 2)) * (size_t)(e / g);
        const int j = (int)(e % g);
        int16_t z;
        memcpy(&h, b, 2);
        memcpy(&z, b + 2, 2);
        const int q = eight ? (int8_t)b[4 + j] : j % 32 < 16 ? b[4 + 16 * (j / 32) + j % 32] & 15 : b[4 + 16 * (j / 32) + j % 32 - 16] >> 4;
        return ref_half_value(h) * (q - z);
    }
    case LLM__TYPE_Q8_K: {
        const uint8_t *b = row + 292 * (e / 256);
        float d;
        memcpy(&d, b, 4);
        return (double)d * (int8_t)b[4 + e % 256];
    }
    default: return NAN;
    }
}

// --- test data ---

static float rand_normal(unsigned long long *rng) { return (float)test_rng_normal(rng); }

static uint16_t rand_scale_half(unsigned long long *rng, double lo_log2, double hi_log2) {
    return llm__fp32_to_fp16((float)exp2(lo_log2 + (hi_log2 - lo_log2) * test_rng_uniform(rng)));
}

// n elements of `type` made of random bytes, with sane (finite, positive) scales patched in.
static void fill_random_row(int type, uint8_t *row, int64_t n, unsigned long long *rng) {
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    const size_t bytes = llm__row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)test_rng_next(rng);
    for (int64_t b = 0; b < n / ti->blck; b++) {
        uint8_t *blk = row + (size_t)b * ti->block_bytes;
        uint16_t h, h2;
        switch (type) {
        case LLM__TYPE_F32: { float f = rand_normal(rng); memcpy(blk, &f, 4); break; }
        case LLM__TYPE_F16: h = llm__fp32_to_fp16(rand_normal(rng)); memcpy(blk, &h, 2); break;
        case LLM__TYPE_BF16: h = llm__fp32_to_bf16(rand_normal(rng)); memcpy(blk, &h, 2); break;
        case LLM__TYPE_Q8_0: case LLM__TYPE_Q4_0: case LLM__TYPE_Q5_0: case LLM__TYPE_IQ4_NL:
            h = rand_scale_half(rng, -10, -2); memcpy(blk, &h, 2); break;
        case LLM__TYPE_Q4_1: case LLM__TYPE_Q5_1: case LLM__TYPE_Q8_1:   // (Q8_1: s is not checked against qs here)
            h = rand_scale_half(rng, -10, -2), h2 = rand_scale_half(rng, -8, 0) ^ 0x8000;
            memcpy(blk, &h, 2), memcpy(blk + 2, &h2, 2);
            break;
        case LLM__TYPE_Q4_K: case LLM__TYPE_Q5_K:
            h = rand_scale_half(rng, -12, -4), h2 = rand_scale_half(rng, -12, -4);
            memcpy(blk, &h, 2), memcpy(blk + 2, &h2, 2);
            break;
        case LLM__TYPE_Q6_K: h = rand_scale_half(rng, -12, -4); memcpy(blk + 208, &h, 2); break;
        case LLM__TYPE_Q3_K: h = rand_scale_half(rng, -12, -4); memcpy(blk + 108, &h, 2); break;
        case LLM__TYPE_Q2_K:
            h = rand_scale_half(rng, -12, -4), h2 = rand_scale_half(rng, -12, -4);
            memcpy(blk + 80, &h, 2), memcpy(blk + 82, &h2, 2);
            break;
        case LLM__TYPE_IQ4_XS: h = rand_scale_half(rng, -14, -6); memcpy(blk, &h, 2); break;
        case LLM__TYPE_MXFP4: blk[0] = (uint8_t)(118 + test_rng_next(rng) % 8); break;   // 2^-10 .. 2^-3
        case LLM__TYPE_Q8_K: { float d = (float)exp2(-10 + 6 * test_rng_uniform(rng)); memcpy(blk, &d, 4); break; }
        case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:   // z in 0..16
        case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: {  // z in -128..128
            const int16_t z = (int16_t)(type >= LLM__TYPE_G8_32 ? (int)(test_rng_next(rng) % 257) - 128 : (int)(test_rng_next(rng) % 17));
            h = rand_scale_half(rng, -10, -2);
            memcpy(blk, &h, 2), memcpy(blk + 2, &z, 2);
            break;
        }
        default: break;
        }
    }
}

// --- tests ---

static void test_type_info(void) {
    static const struct { int type; const char *name; int64_t blck; size_t bytes; bool supported; int dot; } want[] = {
        {LLM__TYPE_F32, "f32", 1, 4, true, LLM__TYPE_F32},      {LLM__TYPE_F16, "f16", 1, 2, true, LLM__TYPE_F16},
        {LLM__TYPE_BF16, "bf16", 1, 2, true, LLM__TYPE_BF16},   {LLM__TYPE_Q8_0, "q8_0", 32, 34, true, LLM__TYPE_Q8_0},
        {LLM__TYPE_Q4_0, "q4_0", 32, 18, true, LLM__TYPE_Q8_0}, {LLM__TYPE_Q4_K, "q4_K", 256, 144, true, LLM__TYPE_Q8_K},
        {LLM__TYPE_Q5_K, "q5_K", 256, 176, true, LLM__TYPE_Q8_K}, {LLM__TYPE_Q6_K, "q6_K", 256, 210, true, LLM__TYPE_Q8_K},
        {LLM__TYPE_Q8_K, "q8_K", 256, 292, false, LLM__TYPE_Q8_K}, {LLM__TYPE_Q4_1, "q4_1", 32, 20, true, LLM__TYPE_Q8_1},
        {LLM__TYPE_Q5_0, "q5_0", 32, 22, true, LLM__TYPE_Q8_0},   {LLM__TYPE_Q5_1, "q5_1", 32, 24, true, LLM__TYPE_Q8_1},
        {LLM__TYPE_Q8_1, "q8_1", 32, 36, false, LLM__TYPE_Q8_1},  {LLM__TYPE_Q2_K, "q2_K", 256, 84, true, LLM__TYPE_Q8_K},
        {LLM__TYPE_Q3_K, "q3_K", 256, 110, true, LLM__TYPE_Q8_K}, {LLM__TYPE_IQ4_XS, "iq4_xs", 256, 136, true, LLM__TYPE_Q8_K},
        {LLM__TYPE_IQ4_NL, "iq4_nl", 32, 18, true, LLM__TYPE_Q8_0}, {LLM__TYPE_TQ2_0, "tq2_0", 256, 66, false, LLM__TYPE_Q8_K},
        {LLM__TYPE_MXFP4, "mxfp4", 32, 17, true, LLM__TYPE_Q8_0},
        {LLM__TYPE_G4_32, "int4_g32", 32, 20, true, LLM__TYPE_Q8_0},   {LLM__TYPE_G4_64, "int4_g64", 64, 36, true, LLM__TYPE_Q8_0},
        {LLM__TYPE_G4_128, "int4_g128", 128, 68, true, LLM__TYPE_Q8_0}, {LLM__TYPE_G8_32, "int8_g32", 32, 36, true, LLM__TYPE_Q8_0},
        {LLM__TYPE_G8_64, "int8_g64", 64, 68, true, LLM__TYPE_Q8_0},    {LLM__TYPE_G8_128, "int8_g128", 128, 132, true, LLM__TYPE_Q8_0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct llm__type_info *ti = llm__type_info((uint32_t)want[i].type);
        EXPECT(ti != NULL, "type %d has no info", want[i].type);
        if (!ti) continue;
        EXPECT(strcmp(ti->name, want[i].name) == 0 && ti->blck == want[i].blck && ti->block_bytes == want[i].bytes &&
                   ti->supported == want[i].supported && ti->vec_dot_type == want[i].dot,
               "type %d: got %s blck %lld bytes %zu supported %d dot %d", want[i].type, ti->name,
               (long long)ti->blck, ti->block_bytes, ti->supported, ti->vec_dot_type);
    }
    for (uint32_t t = 0; t < LLM__TYPE_COUNT; t++)   // the engine's own layouts are G4_* / G8_*, and only they
        EXPECT(!llm__type_info(t) || llm__type_info(t)->internal == (t >= LLM__TYPE_G4_32 && t <= LLM__TYPE_G8_128),
               "type %u: internal flag", t);
    EXPECT(llm__type_info(4) == NULL && llm__type_info(5) == NULL && llm__type_info(40) == NULL &&
               llm__type_info(0xffffffffu) == NULL, "ids that are not ggml types must give NULL");
    int n_supported = 0;
    for (uint32_t t = 0; t < LLM__TYPE_COUNT; t++) {
        const struct llm__type_info *ti = llm__type_info(t);
        if (ti) n_supported += ti->supported;
        if (ti && ti->supported)
            EXPECT(llm__vec_dot_kernel((int)t, LLM__SIMD_SCALAR) != NULL, "no scalar kernel for %s", ti->name);
    }
    EXPECT(n_supported == N_SUPPORTED, "%d supported types", n_supported);
    EXPECT(llm__row_bytes(LLM__TYPE_Q4_K, 4096) == 16 * 144 && llm__row_bytes(LLM__TYPE_Q8_0, 96) == 3 * 34 &&
               llm__row_bytes(LLM__TYPE_F16, 7) == 14,
           "row bytes");
}

static void test_fp16(void) {
    static uint16_t all[65536], back[65536];
    static float f[65536], frow[65536];
    int bad_value = 0, bad_trip = 0, bad_row = 0;
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i, f[i] = llm__fp16_to_fp32((uint16_t)i);
    llm__fp16_to_fp32_row(all, frow, 65536);
    for (int i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan) {
            // NaN: stays NaN with its sign and payload, made quiet
            const uint32_t want = (uint32_t)(h & 0x8000) << 16 | 0x7fc00000u | (uint32_t)(h & 0x3ff) << 13;
            if (f2u(f[i]) != want) bad_value++;
        } else if ((h & 0x7c00) == 0x7c00) {
            if (!isinf(f[i]) || (signbit(f[i]) != 0) != ((h & 0x8000) != 0)) bad_value++;
        } else if ((double)f[i] != ref_half_value(h) || (signbit(f[i]) != 0) != ((h & 0x8000) != 0)) {
            bad_value++;
        }
        const uint16_t t = llm__fp32_to_fp16(f[i]);
        if (t != (nan ? (h | 0x200) : h)) bad_trip++;
        if (f2u(frow[i]) != f2u(f[i])) bad_row++;
    }
    EXPECT(bad_value == 0, "%d halfs decode wrong", bad_value);
    EXPECT(bad_trip == 0, "%d halfs do not round-trip", bad_trip);
    EXPECT(bad_row == 0, "%d halfs: row conversion differs from scalar", bad_row);
    llm__fp32_to_fp16_row(f, back, 65536);
    bad_row = 0;
    for (int i = 0; i < 65536; i++) bad_row += back[i] != llm__fp32_to_fp16(f[i]);
    EXPECT(bad_row == 0, "%d halfs: fp32->fp16 row conversion differs from scalar", bad_row);

    // fp32 -> fp16 rounding: fixed cases, all exponents x interesting low bits (ties at bit 12
    // for normal halfs), ties between subnormal halfs, and random bit patterns.
    const struct { float f; uint16_t h; } fixed[] = {
        {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-1e6f, 0xfc00}, {1e-8f, 0},
        {0x1p-25f, 0}, {0x1.000002p-25f, 1}, {0x1.8p-24f, 2}, {0x1.4p-23f, 2}, {-0x1p-24f, 0x8001},
        {0x1.ff8p-15f, 0x3ff}, {0x1.ffcp-15f, 0x400}, {1.0f, 0x3c00}, {0x1.002p0f, 0x3c00}, {0x1.006p0f, 0x3c02},
        {-0.0f, 0x8000}, {INFINITY, 0x7c00},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        EXPECT(llm__fp32_to_fp16(fixed[i].f) == fixed[i].h, "fp16(%a) = 0x%04x, want 0x%04x", fixed[i].f,
               llm__fp32_to_fp16(fixed[i].f), fixed[i].h);
    enum { NX = 65536 * 12 + 2048 + 200000 };
    float *xs = malloc(NX * sizeof(float));
    uint16_t *hs = malloc(NX * sizeof(uint16_t));
    int nx = 0;
    static const uint32_t lows[] = {0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff, 0x8000, 0xffff, 0x5a5a};
    for (uint32_t top = 0; top < 65536; top++)
        for (size_t k = 0; k < sizeof(lows) / sizeof(lows[0]); k++) xs[nx++] = u2f(top << 16 | lows[k]);
    for (int k = 0; k < 1024; k++) {   // halfway between subnormal halfs k and k+1, and a hair above
        xs[nx++] = (float)ldexp(2 * k + 1, -25);
        xs[nx++] = nextafterf((float)ldexp(2 * k + 1, -25), 1.0f);
    }
    unsigned long long rng = 1;
    while (nx < NX) xs[nx++] = u2f((uint32_t)test_rng_next(&rng));
    llm__fp32_to_fp16_row(xs, hs, nx);
    int bad = 0, bad_nan = 0;
    bad_row = 0;
    for (int i = 0; i < nx; i++) {
        const uint16_t h = llm__fp32_to_fp16(xs[i]);
        if (isnan(xs[i])) {   // NaN stays NaN, sign kept, quiet, top payload bits kept
            const uint32_t u = f2u(xs[i]);
            bad_nan += h != (uint16_t)((u >> 16 & 0x8000) | 0x7e00 | (u >> 13 & 0x3ff));
        } else {
            bad += h != ref_to_half(xs[i]);
        }
        bad_row += hs[i] != h;
    }
    EXPECT(bad == 0, "%d of %d floats round to the wrong half", bad, nx);
    EXPECT(bad_nan == 0, "%d NaNs convert wrong", bad_nan);
    EXPECT(bad_row == 0, "%d of %d floats: row conversion (F16C where present) differs from scalar", bad_row, nx);

    // bf16: exhaustive decode and round trip; rounding against the neighbour comparison
    int bad_bf = 0;
    for (int i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const float v = llm__bf16_to_fp32(h);
        const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (nan) bad_bf += !isnan(v) || llm__fp32_to_bf16(v) != (h | 0x40);
        else bad_bf += f2u(v) != (uint32_t)h << 16 || llm__fp32_to_bf16(v) != h;
    }
    EXPECT(bad_bf == 0, "%d bf16 values do not round-trip", bad_bf);
    bad_bf = 0;
    for (int i = 0; i < nx; i++)
        if (!isnan(xs[i])) bad_bf += llm__fp32_to_bf16(xs[i]) != ref_to_bf16(xs[i]);
    EXPECT(bad_bf == 0, "%d floats round to the wrong bf16", bad_bf);
    EXPECT(llm__fp32_to_bf16(u2f(0x7f800001u)) == 0x7fc0 && llm__fp32_to_bf16(u2f(0xffc00000u)) == 0xffc0,
           "bf16 NaN must stay a quiet NaN");
    free(xs);
    free(hs);
}

// Every supported type and Q8_K: dequantize_row of random blocks equals the float64 decoder.
static void test_dequantize(void) {
    static const int types[] = {LLM__TYPE_F32,  LLM__TYPE_F16,  LLM__TYPE_BF16, LLM__TYPE_Q8_0,   LLM__TYPE_Q4_0,
                                LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1, LLM__TYPE_IQ4_NL, LLM__TYPE_Q4_K,
                                LLM__TYPE_Q5_K, LLM__TYPE_Q6_K, LLM__TYPE_Q8_K, LLM__TYPE_Q8_1,
                                LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_IQ4_XS, LLM__TYPE_MXFP4, LLM__TYPE_G4_32, LLM__TYPE_G4_64,
                                LLM__TYPE_G4_128, LLM__TYPE_G8_32, LLM__TYPE_G8_64, LLM__TYPE_G8_128};
    unsigned long long rng = 2;
    const int64_t n = 256 * 40;
    uint8_t *row = malloc(llm__row_bytes(LLM__TYPE_F32, n));
    float *y = malloc((size_t)n * sizeof(float));
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        const int type = types[t];
        fill_random_row(type, row, n, &rng);
        llm__dequantize_row(type, row, y, n);
        int64_t bad = 0, first = -1;
        for (int64_t e = 0; e < n; e++) {
            const double want = ref_element(type, row, e);
            // the float code rounds once, at the end: allow exactly that (and a 1-ulp slack)
            const float wf = (float)want;
            if (!(y[e] == wf || fabsf(y[e] - wf) <= fabsf(nextafterf(wf, INFINITY) - wf))) {
                if (first < 0) first = e;
                bad++;
            }
        }
        EXPECT(bad == 0, "%s: %lld of %lld elements decode wrong (first: %lld: got %g want %g)",
               llm__type_info((uint32_t)type)->name, (long long)bad, (long long)n, (long long)first,
               first >= 0 ? y[first] : 0.0, first >= 0 ? ref_element(type, row, first) : 0.0);
    }
    free(row);
    free(y);
}

// quantize -> dequantize on normal data: RMS error relative to the data's RMS, per type.
static void test_round_trip(void) {
    static const struct { int type; double bound; } cases[] = {
        {LLM__TYPE_F16, 0.0005}, {LLM__TYPE_BF16, 0.004}, {LLM__TYPE_Q8_0, 0.008}, {LLM__TYPE_Q4_0, 0.115},
        {LLM__TYPE_Q4_K, 0.085}, {LLM__TYPE_Q5_K, 0.042}, {LLM__TYPE_Q6_K, 0.019}, {LLM__TYPE_Q8_K, 0.008},
        {LLM__TYPE_Q3_K, 0.16}, {LLM__TYPE_Q2_K, 0.29}, {LLM__TYPE_IQ4_XS, 0.085},
        {LLM__TYPE_Q4_1, 0.115}, {LLM__TYPE_Q5_0, 0.06},  {LLM__TYPE_Q5_1, 0.06},  {LLM__TYPE_IQ4_NL, 0.115},
        {LLM__TYPE_Q8_1, 0.008}, {LLM__TYPE_MXFP4, 0.13}, {LLM__TYPE_G4_32, 0.1}, {LLM__TYPE_G4_64, 0.11}, {LLM__TYPE_G4_128, 0.12},
        {LLM__TYPE_G8_32, 0.006}, {LLM__TYPE_G8_64, 0.007}, {LLM__TYPE_G8_128, 0.008},
    };
    const int64_t n = 256 * 64;
    unsigned long long rng = 3;
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    void *q = malloc(llm__row_bytes(LLM__TYPE_F32, n));
    for (int64_t i = 0; i < n; i++) x[i] = rand_normal(&rng) * (float)exp2(-3 + 6 * (double)(i / 256) / 64);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        llm__quantize_row(cases[c].type, x, q, n);
        llm__dequantize_row(cases[c].type, q, y, n);
        double err = 0, sig = 0;
        for (int64_t i = 0; i < n; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), sig += (double)x[i] * x[i];
        const double rel = sqrt(err / sig);
        printf("  round trip %-5s relative RMS error %.5f (bound %.4f)\n", llm__type_info((uint32_t)cases[c].type)->name,
               rel, cases[c].bound);
        EXPECT(rel < cases[c].bound, "%s: relative RMS error %g", llm__type_info((uint32_t)cases[c].type)->name, rel);
    }
    // zero, constant and single-spike rows stay finite and (for zero) exact
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int type = cases[c].type;
        for (int pattern = 0; pattern < 3; pattern++) {
            for (int i = 0; i < 256; i++) x[i] = pattern == 0 ? 0.0f : pattern == 1 ? 0.75f : (i == 77 ? -3.0f : 0.0f);
            llm__quantize_row(type, x, q, 256);
            llm__dequantize_row(type, q, y, 256);
            double maxerr = 0;
            for (int i = 0; i < 256; i++)
                if (fabs((double)y[i] - x[i]) > maxerr) maxerr = fabs((double)y[i] - x[i]);
            EXPECT(maxerr <= (pattern == 0 ? 0.0 : 0.07), "%s pattern %d: max error %g",
                   llm__type_info((uint32_t)type)->name, pattern, maxerr);
        }
    }
    free(x);
    free(y);
    free(q);
}

// Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_K quantizers produce ggml's reference bytes.
static void test_reference_quantizers(void) {
    enum { NB = 4000 };
    unsigned long long rng = 4;
    float *x = malloc(NB * 256 * sizeof(float));
    uint8_t *got = malloc(NB * 292), want[292];
    for (int i = 0; i < NB * 256; i++) {
        const int block = i / 32;
        const double scale = exp2(-12 + 16 * test_rng_uniform(&rng));
        x[i] = block % 50 == 7 ? 0.0f : (float)(test_rng_normal(&rng) * scale);
    }
    // crafted blocks whose scaled values sit exactly on .5: Q8_0 (amax 127: d = id = 1),
    // Q8_K (max -127: iscale 1), Q4_0 (max -8: d = 1)
    for (int j = 0; j < 32; j++) x[32 + j] = j == 0 ? 127.0f : (float)(j - 16) + 0.5f;
    for (int j = 0; j < 256; j++) x[256 * 3 + j] = j == 0 ? -127.0f : (float)((j % 200) - 100) + 0.5f;
    for (int j = 0; j < 32; j++) x[32 * 5 + j] = j == 0 ? -8.0f : (float)((j % 16) - 8) + 0.5f;
    // Q5_0 (max -16: d = 1), Q4_1 / Q5_1 (min 0, max 15 / 31: d = 1): on .5 as well
    for (int j = 0; j < 32; j++) x[32 * 7 + j] = j == 0 ? -16.0f : (float)((j % 32) - 16) + 0.5f;
    for (int j = 0; j < 32; j++) x[32 * 9 + j] = j == 0 ? 0.0f : j == 1 ? 15.0f : (float)(j % 15) + 0.5f;
    for (int j = 0; j < 32; j++) x[32 * 11 + j] = j == 0 ? 0.0f : j == 1 ? 31.0f : (float)(j % 31) + 0.5f;

    int bad = 0, first = -1;
    llm__quantize_row(LLM__TYPE_Q8_0, x, got, NB * 256);
    for (int b = 0; b < NB * 8; b++) {
        ref_quantize_q8_0(x + 32 * b, want);
        if (memcmp(got + 34 * b, want, 34) != 0) bad++, first = first < 0 ? b : first;
    }
    EXPECT(bad == 0, "q8_0: %d of %d blocks differ from quantize_row_q8_0_ref (first %d)", bad, NB * 8, first);
    bad = 0, first = -1;
    llm__quantize_row(LLM__TYPE_Q4_0, x, got, NB * 256);
    for (int b = 0; b < NB * 8; b++) {
        ref_quantize_q4_0(x + 32 * b, want);
        if (memcmp(got + 18 * b, want, 18) != 0) bad++, first = first < 0 ? b : first;
    }
    EXPECT(bad == 0, "q4_0: %d of %d blocks differ from quantize_row_q4_0_ref (first %d)", bad, NB * 8, first);
    static const struct { int type; size_t bytes; } b32[] = {{LLM__TYPE_Q8_1, 36}, {LLM__TYPE_Q4_1, 20}, {LLM__TYPE_Q5_0, 22},
                                                            {LLM__TYPE_Q5_1, 24}};
    for (size_t t = 0; t < sizeof(b32) / sizeof(b32[0]); t++) {
        bad = 0, first = -1;
        llm__quantize_row(b32[t].type, x, got, NB * 256);
        for (int b = 0; b < NB * 8; b++) {
            if (b32[t].type == LLM__TYPE_Q8_1) ref_quantize_q8_1(x + 32 * b, want);
            else if (b32[t].type == LLM__TYPE_Q5_0) ref_quantize_q5_0(x + 32 * b, want);
            else ref_quantize_min(x + 32 * b, b32[t].type == LLM__TYPE_Q4_1 ? 4 : 5, want);
            if (memcmp(got + b32[t].bytes * (size_t)b, want, b32[t].bytes) != 0) bad++, first = first < 0 ? b : first;
        }
        EXPECT(bad == 0, "%s: %d of %d blocks differ from quantize_row_%s_ref (first %d)", llm__type_info((uint32_t)b32[t].type)->name,
               bad, NB * 8, llm__type_info((uint32_t)b32[t].type)->name, first);
    }
    bad = 0, first = -1;
    llm__quantize_row(LLM__TYPE_MXFP4, x, got, NB * 256);
    for (int b = 0; b < NB * 8; b++) {
        ref_quantize_mxfp4(x + 32 * b, want);
        if (memcmp(got + 17 * b, want, 17) != 0) bad++, first = first < 0 ? b : first;
    }
    EXPECT(bad == 0, "mxfp4: %d of %d blocks differ from quantize_row_mxfp4_ref (first %d)", bad, NB * 8, first);
    bad = 0, first = -1;
    llm__quantize_row(LLM__TYPE_Q8_K, x, got, NB * 256);
    for (int b = 0; b < NB; b++) {
        ref_quantize_q8_K(x + 256 * b, want);
        if (memcmp(got + 292 * b, want, 292) != 0) bad++, first = first < 0 ? b : first;
    }
    EXPECT(bad == 0, "q8_K: %d of %d blocks differ from quantize_row_q8_K_ref (first %d)", bad, NB, first);
    free(x);
    free(got);
}

// Activations that are not finite (a model whose weights overflow): every activation quantizer
// stays defined (under UBSan: no signed overflow, no out-of-range float conversion), keeps its
// invariants (quants in [-127, 127], the stored sums equal to the quants' sums) and passes the
// trouble on: a block's scale is not finite exactly when the block is not (so products and the
// logits show it); blocks that are finite keep their exact bytes. The x16 ones (AVX-512 only) are those of the repacked
// Q8_0, Q4_0 and Q4_K matrices.
static void test_nonfinite_activations(void) {
    enum { K = 1024 };   // 32 Q8_0 blocks, 4 Q8_K super-blocks
    static const float specials[] = {INFINITY, -INFINITY, NAN, -NAN, 3e38f, -3e38f};
    float *x = malloc(K * sizeof(float));
    uint8_t *q = malloc(K * 2), *ref = malloc(K * 2);
    unsigned long long rng = 11;
    int checked = 0;
    for (int pattern = 0; pattern < 4; pattern++) {
        // 0: one special value per block; 1: a block all of them; 2: NaN everywhere; 3: inf and
        // NaN in the same block; the last super-block stays finite in every pattern
        for (int i = 0; i < K; i++) x[i] = (float)test_rng_normal(&rng);
        for (int i = 0; i < 768; i++) {
            const float sp = specials[(i / 32 + pattern) % 6];
            if ((pattern == 0 && i % 32 == 5) || (pattern == 1 && i < 32) || pattern == 2 ||
                (pattern == 3 && i % 32 < 2))
                x[i] = pattern == 2 ? NAN : pattern == 3 ? (i % 2 ? NAN : INFINITY) : sp;
        }
        // which blocks of 32 and 256 hold a value that is not finite: their scales must not be
        // finite either (else the NaN would vanish into zero quants, unseen by the logits)
        // (Q8_0's fp16 scale also overflows for finite blocks beyond 127 x 65504: 3e38 there)
        bool odd32[K / 32] = {false}, odd256[K / 256] = {false}, huge32[K / 32] = {false};
        for (int i = 0; i < K; i++) {
            if (!isfinite(x[i])) odd32[i / 32] = odd256[i / 256] = true;
            if (fabsf(x[i]) > 8e6f) huge32[i / 32] = true;
        }
        // plain Q8_0 and Q8_K (the dot types of the per-row kernels)
        llm__quantize_row(LLM__TYPE_Q8_0, x, q, K);
        int bad = 0, bad_d = 0;
        for (int b = 0; b < K / 32; b++) {
            for (int j = 0; j < 32; j++) bad += ((int8_t)q[34 * b + 2 + j]) < -127;
            uint16_t dh;
            memcpy(&dh, q + 34 * b, 2);
            bad_d += isfinite(llm__fp16_to_fp32(dh)) ? odd32[b] : !odd32[b] && !huge32[b];
        }
        EXPECT(bad == 0 && bad_d == 0, "q8_0, pattern %d: %d quants below -127, %d scales finite where the block is not "
               "(or not where it is, below fp16's range)", pattern, bad, bad_d);
        llm__quantize_row(LLM__TYPE_Q8_0, x + 768, ref, 256);
        EXPECT(!memcmp(q + 34 * 24, ref, 34 * 8), "q8_0, pattern %d: the finite blocks changed", pattern);
        llm__quantize_row(LLM__TYPE_Q8_1, x, q, K);   // Q8_0's rules, and s not finite with d
        bad = 0, bad_d = 0;
        for (int b = 0; b < K / 32; b++) {
            for (int j = 0; j < 32; j++) bad += ((int8_t)q[36 * b + 4 + j]) < -127;
            uint16_t dh, sh;
            memcpy(&dh, q + 36 * b, 2);
            memcpy(&sh, q + 36 * b + 2, 2);
            bad_d += isfinite(llm__fp16_to_fp32(dh)) ? odd32[b] : !odd32[b] && !huge32[b];
            bad_d += odd32[b] && isfinite(llm__fp16_to_fp32(sh)) && llm__fp16_to_fp32(sh) != 0.0f;
        }
        EXPECT(bad == 0 && bad_d == 0, "q8_1, pattern %d: %d quants below -127, %d scales or sums finite where the block "
               "is not (or not where it is, below fp16's range)", pattern, bad, bad_d);
        llm__quantize_row(LLM__TYPE_Q8_1, x + 768, ref, 256);
        EXPECT(!memcmp(q + 36 * 24, ref, 36 * 8), "q8_1, pattern %d: the finite blocks changed", pattern);
        llm__quantize_row(LLM__TYPE_Q8_K, x, q, K);
        bad = 0;
        for (int b = 0; b < K / 256; b++) {
            const struct llm__block_q8_K *y = (const struct llm__block_q8_K *)q + b;
            bad += isfinite(y->d) == odd256[b];
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int l = 0; l < 16; l++) sum += y->qs[16 * g + l], bad += y->qs[16 * g + l] < -127;
                bad += sum != y->bsums[g];
            }
        }
        EXPECT(bad == 0, "q8_K, pattern %d: %d quants below -127, group sums that differ or scales finite where the "
               "block is not (or the reverse)", pattern, bad);
        checked += 3;
#if defined(LLM__X86_SIMD)
        if (llm__simd_best() != LLM__SIMD_AVX512) continue;
        for (int t = 0; t < 2; t++) {   // the x16 Q8_0 format, for Q8_0 (offset 128) and Q4_0 (8) weights
            const int type = t ? LLM__TYPE_Q4_0 : LLM__TYPE_Q8_0, c = t ? 8 : 128;
            llm__x16_quantize_act(type, x, q, K);
            const int8_t *qs = (const int8_t *)q;
            const int32_t *nc = (const int32_t *)(q + K + K / 8);
            const float *dq = (const float *)(q + K);
            bad = 0;
            for (int b = 0; b < K / 32; b++) {
                int sum = 0;
                bad += isfinite(dq[b]) ? odd32[b] : !odd32[b] && !huge32[b];
                for (int j = 0; j < 32; j++) sum += qs[32 * b + j], bad += qs[32 * b + j] < -127;
                bad += nc[b] != -c * sum;
            }
            EXPECT(bad == 0, "x16 %s activations, pattern %d: %d quants below -127, block sums that differ or scales "
                   "finite where the block is not (or the reverse)", t ? "q4_0" : "q8_0", pattern, bad);
            llm__quantize_row(LLM__TYPE_Q8_0, x + 768, ref, 256);
            bad = 0;
            for (int b = 24; b < 32; b++) bad += memcmp(qs + 32 * b, ref + 34 * (b - 24) + 2, 32) != 0;
            EXPECT(bad == 0, "x16 %s activations, pattern %d: %d finite blocks changed", t ? "q4_0" : "q8_0", pattern, bad);
            checked++;
        }
        llm__x16k_quantize_act(x, q, K);   // the x16 Q4_K format: Q8_K quants, 8 pair sums per super-block
        bad = 0;
        for (int b = 0; b < K / 256; b++) {
            float dk;
            memcpy(&dk, q + K + 4 * b, 4);
            bad += isfinite(dk) == odd256[b];
            for (int j = 0; j < 8; j++) {
                int sum = 0;
                int16_t s16;
                for (int l = 0; l < 32; l++) sum += (int8_t)q[256 * b + 32 * j + l], bad += (int8_t)q[256 * b + 32 * j + l] < -127;
                memcpy(&s16, q + K + K / 256 * 4 + 16 * b + 2 * j, 2);
                bad += s16 != sum;
            }
        }
        EXPECT(bad == 0, "x16 q4_K activations, pattern %d: %d quants below -127, sums that differ or scales finite "
               "where the block is not (or the reverse)", pattern, bad);
        checked++;
#endif
    }
    printf("  non-finite activations: %d quantizer runs checked%s\n", checked,
           llm__simd_best() == LLM__SIMD_AVX512 ? " (with the AVX-512 x16 ones)" : " (no AVX-512 here: not the x16 ones)");
    free(x);
    free(q);
    free(ref);
}

static const char *level_name(enum llm__simd l) {
    return l == LLM__SIMD_SCALAR ? "scalar" : l == LLM__SIMD_AVX2 ? "avx2" : l == LLM__SIMD_AVX512 ? "avx512" : "neon";
}

// Levels this CPU can run: scalar, and on x86 every level up to the best; on aarch64 NEON.
static bool level_runs(enum llm__simd l) {
    const enum llm__simd best = llm__simd_best();
    if (l == LLM__SIMD_SCALAR) return true;
    if (best == LLM__SIMD_NEON) return l == LLM__SIMD_NEON;
    return l != LLM__SIMD_NEON && l <= best;
}

// True when the space-separated list `line` holds the word `w`.
static bool has_word(const char *line, const char *w) {
    const size_t n = strlen(w);
    for (const char *p = strstr(line, w); p; p = strstr(p + 1, w))
        if ((p == line || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
    return false;
}

// The first line of /proc/cpuinfo that starts with `key` (Linux), into buf; false without one.
static bool cpuinfo_line(const char *key, char *buf, size_t size) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    bool found = false;
    while (!found && fgets(buf, (int)size, f)) found = strncmp(buf, key, strlen(key)) == 0;
    fclose(f);
    return found;
}

// llm__simd_best against a source that does not share its code: the kernel's list of CPU
// features (/proc/cpuinfo, which leaves out what the OS does not enable, as AVX-512 state that
// XSAVE does not cover), else what the compiler was told the CPU has (-march: __AVX2__, ...).
// AVX2 level: avx2, fma, f16c; AVX-512 level: avx512f, bw, vl, dq and vnni on top.
static void test_simd_best(void) {
    const enum llm__simd best = llm__simd_best();
    static char line[1 << 14];
#if defined(LLM__X86_SIMD)
    if (cpuinfo_line("flags", line, sizeof line)) {
        const bool avx2 = has_word(line, "avx2") && has_word(line, "fma") && has_word(line, "f16c");
        const bool avx512 = avx2 && has_word(line, "avx512f") && has_word(line, "avx512bw") &&
                            has_word(line, "avx512vl") && has_word(line, "avx512dq") &&
                            (has_word(line, "avx512_vnni") || has_word(line, "avx512vnni"));
        const enum llm__simd want = avx512 ? LLM__SIMD_AVX512 : avx2 ? LLM__SIMD_AVX2 : LLM__SIMD_SCALAR;
        printf("  /proc/cpuinfo: %s; llm__simd_best: %s\n", level_name(want), level_name(best));
        EXPECT(best == want, "llm__simd_best() is %s, /proc/cpuinfo's flags give %s", level_name(best), level_name(want));
        return;
    }
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__)
    EXPECT(best == LLM__SIMD_AVX512, "built for AVX-512 (-march), llm__simd_best() is %s", level_name(best));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    EXPECT(best == LLM__SIMD_AVX2 || best == LLM__SIMD_AVX512, "built for AVX2 (-march), llm__simd_best() is %s",
           level_name(best));
#else
    SKIP("no /proc/cpuinfo and a build without -march: nothing independent to compare llm__simd_best (%s) with",
         level_name(best));
#endif
#elif defined(__aarch64__)
    // AArch64 has Advanced SIMD in every CPU (the compiler defines __ARM_NEON for it).
    if (cpuinfo_line("Features", line, sizeof line))
        EXPECT(has_word(line, "asimd"), "/proc/cpuinfo's Features have no asimd: %s", line);
    EXPECT(best == LLM__SIMD_NEON, "aarch64: llm__simd_best() is %s, not neon", level_name(best));
#else
    // Neither x86 with GCC/clang nor aarch64: no SIMD kernels are built.
    (void)line;
    EXPECT(best == LLM__SIMD_SCALAR, "llm__simd_best() is %s on a target without SIMD kernels", level_name(best));
#endif
}

static void test_vec_dot(void) {
    static const int64_t sizes_1[] = {1, 7, 16, 17, 33, 100, 4096, 5632, 11008};
    static const int64_t sizes_32[] = {32, 64, 96, 160, 224, 4096, 5632, 11008};
    static const int64_t sizes_128[] = {128, 384, 640, 4096, 5632, 11008};
    static const int64_t sizes_256[] = {256, 768, 1280, 4096, 5632, 11008};
    const enum llm__simd levels[] = {LLM__SIMD_SCALAR, LLM__SIMD_AVX2, LLM__SIMD_AVX512, LLM__SIMD_NEON};
    printf("  SIMD levels tested:");
    for (int l = 0; l < 4; l++)
        if (level_runs(levels[l])) printf(" %s", level_name(levels[l]));
    printf("\n");
    for (int l = 0; l < 4; l++)
        if (!level_runs(levels[l])) SKIP("vec_dot at level %s: not available on this CPU/build", level_name(levels[l]));

    const int64_t nmax = 11008;
    unsigned long long rng = 5;
    uint8_t *w = malloc(nmax * 4), *a = malloc(nmax * 4);
    float *x = malloc(nmax * sizeof(float)), *wf = malloc(nmax * sizeof(float)), *af = malloc(nmax * sizeof(float));
    for (int t = 0; t < N_SUPPORTED; t++) {
        const int type = supported_types[t];
        const struct llm__type_info *ti = llm__type_info((uint32_t)type);
        const int dot_type = ti->vec_dot_type;
        const int64_t *sizes = ti->blck == 1 ? sizes_1 : ti->blck == 32 ? sizes_32 : ti->blck < 256 ? sizes_128 : sizes_256;
        const int nsizes = ti->blck == 1 ? 9 : ti->blck == 32 ? 8 : 6;
        int checked[4] = {0};
        for (int si = 0; si < nsizes; si++) {
            const int64_t n = sizes[si];
            for (int source = 0; source < 2; source++) {   // random blocks, then quantized data
                if (source == 0) {
                    fill_random_row(type, w, n, &rng);
                } else {
                    for (int64_t i = 0; i < n; i++) x[i] = rand_normal(&rng);
                    llm__quantize_row(type, x, w, n);
                }
                for (int64_t i = 0; i < n; i++) x[i] = rand_normal(&rng) * (i % 97 == 3 ? 8.0f : 1.0f);
                llm__quantize_row(dot_type, x, a, n);
                llm__dequantize_row(type, w, wf, n);
                llm__dequantize_row(dot_type, a, af, n);
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) ref += (double)wf[i] * af[i], mag += fabs((double)wf[i] * af[i]);
                if (dot_type == LLM__TYPE_Q8_1) {
                    // the min's share is m * s, s the block's fp16 sum of the activations (ggml's
                    // pairing): the float64 dot takes that rounded sum in place of the exact one
                    for (int64_t b = 0; b < n / 32; b++) {
                        uint16_t mh, sh;
                        memcpy(&mh, w + llm__row_bytes(type, 32) * (size_t)b + 2, 2);
                        memcpy(&sh, a + 36 * b + 2, 2);
                        double sum = 0;
                        for (int j = 0; j < 32; j++) sum += af[32 * b + j];
                        ref += ref_half_value(mh) * (ref_half_value(sh) - sum);
                    }
                }
                float scalar = NAN;
                for (int l = 0; l < 4; l++) {
                    if (!level_runs(levels[l])) continue;
                    const llm__vec_dot_fn fn = llm__vec_dot_kernel(type, levels[l]);
                    EXPECT(fn != NULL, "%s: no kernel at level %s", ti->name, level_name(levels[l]));
                    if (!fn) continue;
                    float s = NAN;
                    fn(n, &s, w, a);
                    if (levels[l] == LLM__SIMD_SCALAR) scalar = s;
                    EXPECT(fabs(s - ref) <= 1e-5 * mag, "%s %s n=%lld source %d: %.9g vs float64 %.9g (sum|wa| %g)",
                           ti->name, level_name(levels[l]), (long long)n, source, s, ref, mag);
                    EXPECT(fabs((double)s - scalar) <= 1e-5 * mag, "%s %s n=%lld: %.9g vs scalar %.9g", ti->name,
                           level_name(levels[l]), (long long)n, s, scalar);
                    checked[l]++;
                }
            }
        }
        printf("  vec_dot %-5s x %-5s:", ti->name, llm__type_info((uint32_t)dot_type)->name);
        for (int l = 0; l < 4; l++)
            if (checked[l]) printf(" %s(%d)", level_name(levels[l]), checked[l]);
        printf("\n");
    }
    free(w);
    free(a);
    free(x);
    free(wf);
    free(af);
}

int main(void) {
    test_type_info();
    test_fp16();
    test_dequantize();
    test_round_trip();
    test_reference_quantizers();
    test_nonfinite_activations();
    test_simd_best();
    test_vec_dot();
    return test_summary("test_types");
}
