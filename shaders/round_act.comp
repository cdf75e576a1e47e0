#version 450
// Rounds activation rows as the CPU backend (and llama.cpp) does before a product with a weight
// of a given type, and writes the rounded values back as f32 (dst[t][k], rows of K): mode 1 f16,
// 2 bf16, 3 Q8_0 blocks of 32 (d = amax / 127, q = round half away from zero), 4 Q8_K blocks of
// 256 (iscale = -127 / the element of largest magnitude, q = round half to even, at most 127).
// A product of a dequantized weight with these values is then the CPU's integer dot product up
// to float rounding. Mode 5 copies (for F32 weights, when x's rows are not 16-byte aligned).
// One invocation per element, one workgroup per 256 elements of a row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint K, mode, ox, sx, od; } p;
shared float mag[256];
shared uint idx[256];
void main() {
    uint tid = gl_LocalInvocationID.x, k = gl_WorkGroupID.x * 256u + tid, t = gl_WorkGroupID.y;
    bool in_row = k < p.K;
    float v = in_row ? x[p.ox + t * p.sx + k] : 0.0, r = v;
    if (p.mode == 1u) r = unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
    else if (p.mode == 2u) {
        uint u = floatBitsToUint(v);
        r = isnan(v) ? uintBitsToFloat((u | 0x400000u) & 0xFFFF0000u) : uintBitsToFloat((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    } else if (p.mode == 3u || p.mode == 4u) {
        // the element of largest magnitude of the block (the first one on ties)
        uint bs = p.mode == 3u ? 32u : 256u;
        mag[tid] = abs(v);
        idx[tid] = tid;
        barrier();
        for (uint s = bs / 2u; s > 0u; s >>= 1) {
            if ((tid & (bs - 1u)) < s) {
                uint o = tid + s;
                if (mag[o] > mag[tid] || (mag[o] == mag[tid] && idx[o] < idx[tid])) { mag[tid] = mag[o]; idx[tid] = idx[o]; }
            }
            barrier();
        }
        uint first = tid & ~(bs - 1u);
        float amax = mag[first];
        if (p.mode == 3u) {
            float dd = amax / 127.0, id = dd != 0.0 ? 1.0 / dd : 0.0, s = v * id, tr = trunc(s);
            float q = tr + (abs(s - tr) >= 0.5 ? sign(s) : 0.0);
            r = unpackHalf2x16(packHalf2x16(vec2(dd, 0.0))).x * q;
        } else {
            float mx = x[p.ox + t * p.sx + gl_WorkGroupID.x * 256u + idx[first]];
            float iscale = amax != 0.0 ? -127.0 / mx : 0.0;
            r = amax != 0.0 ? (1.0 / iscale) * min(127.0, roundEven(iscale * v)) : 0.0;
        }
    }
    if (in_row) d[p.od + t * p.K + k] = r;
}
