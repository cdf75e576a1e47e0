// Weight rows in ggml's layouts (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) and the engine's G4 / G8 (AWQ, GPTQ), read from the
// 32-bit words w[] (and, with USE_16BIT, the same buffer as float16_t w16[]) at byte offsets.
// The including shader declares w (and w16). Type numbers are ggml's.
#define T_F32 0u
#define T_F16 1u
#define T_Q4_0 2u
#define T_Q4_1 3u
#define T_Q5_0 6u
#define T_Q5_1 7u
#define T_IQ4_NL 20u
#define T_Q8_0 8u
#define T_Q2_K 10u
#define T_Q3_K 11u
#define T_Q4_K 12u
#define T_Q5_K 13u
#define T_Q6_K 14u
#define T_IQ4_XS 23u
#define T_BF16 30u
#define T_MXFP4 39u
#define T_G4_32 64u   // the engine's AWQ / GPTQ layouts: G4_32, G4_64, G4_128, G8_32, G8_64, G8_128
#define T_G8_128 69u

uint byte_at(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xFFu; }
// the 4 bytes from byte o on (any alignment), as one little-endian word
uint word_at(uint o) {
    uint s = (o & 3u) * 8u, lo = w[o >> 2] >> s;
    return s == 0u ? lo : lo | (w[(o >> 2) + 1u] << (32u - s));
}
#ifdef USE_16BIT
float half_at(uint o) { return float(w16[o >> 1]); }
#else
float half_at(uint o) { return unpackHalf2x16((w[o >> 2] >> ((o & 2u) * 8u)) & 0xFFFFu).x; }
#endif
vec4 ubytes(uint q) { return vec4(q & 0xFFu, (q >> 8) & 0xFFu, (q >> 16) & 0xFFu, q >> 24); }
vec4 sbytes(uint q) {
    int s = int(q);
    return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8), bitfieldExtract(s, 24, 8));
}

// IQ4_NL's grid: a nibble q stands for IQ4NL[q]
const float IQ4NL[16] = float[](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// MXFP4's grid (E2M1 values times 2): a nibble q stands for MXFP4[q]
const float MXFP4[16] = float[](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// The 4-bit quants of elements j..j+3 (j % 4 == 0) of a block of 32 whose 16 nibble bytes start at
// byte o (element j in the low nibble of byte j, j+16 in the high), one a byte.
uint nibbles4(uint o, uint j) { return (word_at(o + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 0x0F0F0F0Fu; }
// Bits j..j+3 of the 32-bit qh at byte o, moved to bit 4 of each byte.
uint fifth4(uint o, uint j) {
    uint h = (word_at(o) >> j) & 15u;
    return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4;
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block sb (0..7) from the 12 bytes at byte o.
vec2 k4_scale_min(uint o, uint sb) {
    if (sb < 4u) return vec2(byte_at(o + sb) & 63u, byte_at(o + sb + 4u) & 63u);
    uint hi = byte_at(o + sb + 4u);
    return vec2((hi & 15u) | ((byte_at(o + sb - 4u) >> 6) << 4), (hi >> 4) | ((byte_at(o + sb) >> 6) << 4));
}

// IQ4_NL / IQ4_XS levels (ggml's kvalues_iq4nl).
const float iq4nl_values[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                         38.0, 53.0, 69.0, 89.0, 113.0);

// Elements k..k+3 (k a multiple of 4) of the row starting at byte `row`.
vec4 dequant4(uint type, uint row, uint k) {
    if (type == T_F32) {
        uint o = (row >> 2) + k;
        return uintBitsToFloat(uvec4(w[o], w[o + 1u], w[o + 2u], w[o + 3u]));
    }
    if (type == T_F16) {
#ifdef USE_16BIT
        uint o = (row >> 1) + k;
        return vec4(float(w16[o]), float(w16[o + 1u]), float(w16[o + 2u]), float(w16[o + 3u]));
#else
        uint o = (row >> 2) + (k >> 1);
        return vec4(unpackHalf2x16(w[o]), unpackHalf2x16(w[o + 1u]));
#endif
    }
    if (type == T_BF16) {
        uint o = (row >> 2) + (k >> 1), a = w[o], b = w[o + 1u];
        return uintBitsToFloat(uvec4(a << 16, a & 0xFFFF0000u, b << 16, b & 0xFFFF0000u));
    }
    if (type == T_Q8_0) {   // f16 scale, 32 int8
        uint blk = row + (k >> 5) * 34u;
        return half_at(blk) * sbytes(word_at(blk + 2u + (k & 31u)));
    }
    if (type == T_Q4_0) {   // f16 scale, 16 bytes: element j in the low nibble of byte j, j+16 in the high
        uint blk = row + (k >> 5) * 18u, j = k & 31u;
        uint q = (word_at(blk + 2u + (j & 15u)) >> (j < 16u ? 0u : 4u)) & 0x0F0F0F0Fu;
        return half_at(blk) * (ubytes(q) - 8.0);
    }
    if (type == T_Q4_1) {   // f16 d, f16 m, 16 nibble bytes: x = d * q + m
        uint blk = row + (k >> 5) * 20u;
        return half_at(blk) * ubytes(nibbles4(blk + 4u, k & 31u)) + half_at(blk + 2u);
    }
    if (type == T_Q5_0) {   // f16 d, qh (32 bits), 16 nibble bytes: x = d * (q - 16)
        uint blk = row + (k >> 5) * 22u, j = k & 31u;
        return half_at(blk) * (ubytes(nibbles4(blk + 6u, j) | fifth4(blk + 2u, j)) - 16.0);
    }
    if (type == T_Q5_1) {   // f16 d, f16 m, qh, 16 nibble bytes: x = d * q + m
        uint blk = row + (k >> 5) * 24u, j = k & 31u;
        return half_at(blk) * ubytes(nibbles4(blk + 8u, j) | fifth4(blk + 4u, j)) + half_at(blk + 2u);
    }
    if (type == T_IQ4_NL) {   // Q4_0's layout, the nibble an index into the grid
        uint blk = row + (k >> 5) * 18u, q = nibbles4(blk + 2u, k & 31u);
        return half_at(blk) * vec4(IQ4NL[q & 15u], IQ4NL[(q >> 8) & 15u], IQ4NL[(q >> 16) & 15u], IQ4NL[q >> 24]);
    }
    if (type == T_MXFP4) {   // an E8M0 exponent e, Q4_0's nibbles as indices into the FP4 grid: x = 2^(e - 128) grid[q]
        uint blk = row + (k >> 5) * 17u, q = nibbles4(blk + 1u, k & 31u), e = byte_at(blk);
        float d = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
        return d * vec4(MXFP4[q & 15u], MXFP4[(q >> 8) & 15u], MXFP4[(q >> 16) & 15u], MXFP4[q >> 24]);
    }
    if (type == T_Q4_K || type == T_Q5_K) {   // d, dmin, 12 bytes of scales, [qh 32], qs 128
        bool five = type == T_Q5_K;
        uint sup = row + (k >> 8) * (five ? 176u : 144u), i = k & 255u, sb = i >> 5, l = i & 31u;
        uint q = (w[(sup + (five ? 48u : 16u) + 32u * (sb >> 1) + l) >> 2] >> (4u * (sb & 1u))) & 0x0F0F0F0Fu;
        if (five) q |= ((w[(sup + 16u + l) >> 2] >> sb) & 0x01010101u) << 4;
        vec2 sm = k4_scale_min(sup + 4u, sb);
        return (half_at(sup) * sm.x) * ubytes(q) - half_at(sup + 2u) * sm.y;
    }
    if (type == T_Q2_K || type == T_Q3_K) {
        // element i of a super-block: h = i / 128, j = i % 128 / 32, l = i % 32; 2 bits at qs[32h + l] >> 2j
        bool three = type == T_Q3_K;   // Q3_K: hmask 32, qs 64, scales 12, d (110 bytes); Q2_K: scales 16, qs 64, d, dmin (84)
        uint sup = row + (k >> 8) * (three ? 110u : 84u), i = k & 255u, h = i >> 7, j = (i >> 5) & 3u, l = i & 31u, s = i >> 4;
        uint q = (word_at(sup + (three ? 32u : 16u) + 32u * h + l) >> (2u * j)) & 0x03030303u;
        if (!three) {
            uint sc = byte_at(sup + s);
            return (half_at(sup + 80u) * float(sc & 15u)) * ubytes(q) - half_at(sup + 82u) * float(sc >> 4);
        }
        q |= ((word_at(sup + l) >> (4u * h + j)) & 0x01010101u) << 2;   // bit 4h + j of hmask[l] is bit 2
        uint lo = s < 8u ? byte_at(sup + 96u + s) & 15u : byte_at(sup + 88u + s) >> 4;
        uint hi = (byte_at(sup + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
        return (half_at(sup + 108u) * (float(lo | (hi << 4)) - 32.0)) * (ubytes(q) - 4.0);
    }
    if (type == T_IQ4_XS) {   // d, scales_h (u16), scales_l 4, qs 128 (136 bytes): sub-block b of 32 at qs[16b]
        uint sup = row + (k >> 8) * 136u, i = k & 255u, b = i >> 5, l = i & 31u;
        uint q = (w[(sup + 8u + 16u * b + (l & 15u)) >> 2] >> (l < 16u ? 0u : 4u)) & 0x0F0F0F0Fu;
        uint ls = ((byte_at(sup + 4u + (b >> 1)) >> (4u * (b & 1u))) & 15u) | (((w[sup >> 2] >> (16u + 2u * b)) & 3u) << 4);
        return (half_at(sup) * (float(ls) - 32.0)) *
               vec4(iq4nl_values[q & 15u], iq4nl_values[(q >> 8) & 15u], iq4nl_values[(q >> 16) & 15u], iq4nl_values[q >> 24]);
    }
    if (type >= T_G4_32 && type <= T_G8_128) {   // f16 d, int16 z, g/2 nibble bytes (Q4_0's per 32) or g int8: x = d (q - z)
        uint rel = type - T_G4_32, g = 32u << (rel % 3u);
        bool eight = rel >= 3u;
        uint blk = row + (k / g) * (4u + (eight ? g : g / 2u)), j = k % g;   // (blocks 4-byte aligned)
        float z = float(bitfieldExtract(int(w[blk >> 2]), 16, 16));
        if (eight) return half_at(blk) * (sbytes(word_at(blk + 4u + j)) - z);
        return half_at(blk) * (ubytes(nibbles4(blk + 4u + 16u * (j >> 5), j & 31u)) - z);
    }
    // Q6_K: ql 128, qh 64, int8 scales 16, f16 d; 210-byte blocks (2-byte aligned)
    uint sup = row + (k >> 8) * 210u, i = k & 255u, h = i >> 7, r = i & 127u, qd = r >> 5, l = r & 31u;
    uint ql = (word_at(sup + 64u * h + l + 32u * (qd & 1u)) >> (4u * (qd >> 1))) & 0x0F0F0F0Fu;
    uint qh = (word_at(sup + 128u + 32u * h + l) >> (2u * qd)) & 0x03030303u;
    int sc = bitfieldExtract(int(byte_at(sup + 192u + (i >> 4))), 0, 8);
    return (half_at(sup + 208u) * float(sc)) * (ubytes(ql | (qh << 4)) - 32.0);
}
