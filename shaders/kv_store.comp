#version 450
// Writes each token's K and V rows into the caches at its slot; cache rows are [slot][n_kv]
// of f16 (two values per 32-bit word) or f32: one invocation per word of a row.
// q8_0 (mode 2): a row is its n_kv int8 quants (4 a word), then the fp16 scales of its groups of
// 32 (2 a word), as many bytes as n_kv / 32 Q8_0 blocks; one workgroup per (KV head, token).
// As the CPU backend does (backends/cpu.c), each head is rotated first by the orthonormal
// Walsh-Hadamard transform: keys in pieces of rk values, values in pieces of 64 (the same
// butterflies in the same order, then the scale 1/sqrt(piece) computed by the host), then each
// group quantized as the CPU quantizes Q8_0: d = amax / 127, q = round(x / d) half away from 0.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer KC { uint kc[]; };
layout(std430, binding = 1) buffer VC { uint vc[]; };
layout(std430, binding = 2) readonly buffer K { float k[]; };
layout(std430, binding = 3) readonly buffer V { float v[]; };
layout(std430, binding = 4) readonly buffer S { int st[]; };
layout(push_constant) uniform P {
    uint ncols, ok, ov, sk, sv, ock, ocv, row_words, mode, oslot, hd, rk; float skey, sval;
} p;
shared float xs[2][256];   // q8_0: the head's keys, then its values
void quantize_group(uint which, uint w0, uint g) {   // groups 2g, 2g + 1 of the head's row piece
    uint n_kv = p.ncols, head = gl_WorkGroupID.x;
    vec2 d2;
    for (uint h = 0u; h < 2u; h++) {
        uint c0 = 64u * g + 32u * h;
        float amax = 0.0;
        for (uint i = 0u; i < 32u; i++) amax = max(amax, abs(xs[which][c0 + i]));
        float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
        d2[h] = d;
        for (uint i = 0u; i < 32u; i += 4u) {
            uint word = 0u;
            for (uint b = 0u; b < 4u; b++) {
                float x = clamp(xs[which][c0 + i + b] * id, -127.0, 127.0), r = trunc(x);
                if (abs(x - r) >= 0.5) r += sign(x);
                word |= (uint(int(r)) & 255u) << (8u * b);
            }
            uint at = w0 + (head * p.hd + c0 + i) / 4u;
            if (which == 0u) kc[at] = word; else vc[at] = word;
        }
    }
    uint at = w0 + n_kv / 4u + (head * p.hd + 64u * g) / 64u;
    if (which == 0u) kc[at] = packHalf2x16(d2); else vc[at] = packHalf2x16(d2);
}
void main() {
    if (p.mode == 2u) {
        uint head = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
        uint slot = uint(st[p.oslot + t]);
        for (uint d = tid; d < p.hd; d += 256u) {
            xs[0][d] = k[p.ok + t * p.sk + head * p.hd + d];
            xs[1][d] = v[p.ov + t * p.sv + head * p.hd + d];
        }
        barrier();
        for (uint h = 1u; h < max(p.rk, 64u); h <<= 1) {
            for (uint b = tid; b < p.hd; b += 256u) {   // b < hd / 2: keys' butterflies, then values'
                uint which = b < p.hd / 2u ? 0u : 1u, bb = b % (p.hd / 2u), i = (bb / h) * 2u * h + bb % h;
                if ((which == 0u && h < p.rk) || (which == 1u && h < 64u)) {
                    float a = xs[which][i], c = xs[which][i + h];
                    xs[which][i] = a + c;
                    xs[which][i + h] = a - c;
                }
            }
            barrier();
        }
        if (p.rk != 0u) {
            for (uint d = tid; d < p.hd; d += 256u) { xs[0][d] *= p.skey; xs[1][d] *= p.sval; }
            barrier();
        }
        uint groups = p.hd / 64u, w0 = slot * p.row_words;
        if (tid < 2u * groups) quantize_group(tid < groups ? 0u : 1u, (tid < groups ? p.ock : p.ocv) + w0, tid % groups);
        return;
    }
    uint c = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (c >= p.row_words) return;
    uint slot = uint(st[p.oslot + t]), kr = p.ok + t * p.sk, vr = p.ov + t * p.sv;
    if (p.mode == 1u) {
        kc[p.ock + slot * p.row_words + c] = packHalf2x16(vec2(k[kr + 2u * c], k[kr + 2u * c + 1u]));
        vc[p.ocv + slot * p.row_words + c] = packHalf2x16(vec2(v[vr + 2u * c], v[vr + 2u * c + 1u]));
    } else {
        kc[p.ock + slot * p.row_words + c] = floatBitsToUint(k[kr + c]);
        vc[p.ocv + slot * p.row_words + c] = floatBitsToUint(v[vr + c]);
    }
}
