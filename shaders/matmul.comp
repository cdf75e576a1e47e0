#version 450
// dst[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r]) for F32, F16, Q8_0 and Q4_0 weights (ggml's
// layouts, read as 32-bit words at byte offsets). The activations are first rounded as the CPU
// backend (and llama.cpp) does: to f16 for F16 weights, to Q8_0 blocks (an f16 scale, 32 int8)
// for Q8_0 and Q4_0 weights, with integer dot products per block. One workgroup of 64 per (row,
// token); rows beyond 65535 go to the z dimension.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint K, N, type, row_bytes, ox, sx, od, sd, has_bias, ob; } p;
shared float red[64];
uint byte_at(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xFFu; }
float half_at(uint o) { return unpackHalf2x16((w[o >> 2] >> ((o & 2u) * 8u)) & 0xFFFFu).x; }
float to_half(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }
// Q8_0 of the activation block at xr + 32 * blk: its int8 values in q, its scale returned.
float quant_block(uint xb, out int q[32]) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; j++) amax = max(amax, abs(x[xb + j]));
    float d = amax / 127.0, id = d != 0.0 ? 1.0 / d : 0.0;
    for (uint j = 0u; j < 32u; j++) { float v = x[xb + j] * id; q[j] = int(sign(v) * floor(abs(v) + 0.5)); }
    return to_half(d);
}
void main() {
    uint r = gl_WorkGroupID.x + gl_WorkGroupID.z * 65535u, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    if (r >= p.N) return;
    uint row = r * p.row_bytes, xr = p.ox + t * p.sx;
    float s = 0.0;
    if (p.type == 0u) {
        for (uint k = tid; k < p.K; k += 64u) s += uintBitsToFloat(w[(row >> 2) + k]) * x[xr + k];
    } else if (p.type == 1u) {
        for (uint k = tid; k < p.K; k += 64u) s += half_at(row + 2u * k) * to_half(x[xr + k]);
    } else if (p.type == 8u) {
        for (uint blk = tid; blk < p.K / 32u; blk += 64u) {   // one block of 32 per thread
            uint o = row + blk * 34u;
            int qx[32];
            float dx = quant_block(xr + blk * 32u, qx);
            int a = 0;
            for (uint j = 0u; j < 32u; j++) { int q = int(byte_at(o + 2u + j)); a += (q >= 128 ? q - 256 : q) * qx[j]; }
            s += float(a) * (half_at(o) * dx);
        }
    } else {
        for (uint blk = tid; blk < p.K / 32u; blk += 64u) {
            uint o = row + blk * 18u;
            int qx[32];
            float dx = quant_block(xr + blk * 32u, qx);
            int a = 0;
            for (uint j = 0u; j < 16u; j++) {
                uint q = byte_at(o + 2u + j);
                a += (int(q & 15u) - 8) * qx[j] + (int(q >> 4) - 8) * qx[j + 16u];
            }
            s += float(a) * (half_at(o) * dx);
        }
    }
    red[tid] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) { if (tid < k) red[tid] += red[tid + k]; barrier(); }
    if (tid == 0u) d[p.od + t * p.sd + r] = red[0] + (p.has_bias != 0u ? b[p.ob + r] : 0.0);
}
