#version 450
// Writes each token's K and V rows into the caches at its slot; cache rows are [slot][n_kv]
// of f16 (two values per 32-bit word) or f32. One invocation per word of a row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer KC { uint kc[]; };
layout(std430, binding = 1) buffer VC { uint vc[]; };
layout(std430, binding = 2) readonly buffer K { float k[]; };
layout(std430, binding = 3) readonly buffer V { float v[]; };
layout(std430, binding = 4) readonly buffer S { int st[]; };
layout(push_constant) uniform P { uint ncols, ok, ov, sk, sv, ock, ocv, row_words, f16, oslot; } p;
void main() {
    uint c = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (c >= p.row_words) return;
    uint slot = uint(st[p.oslot + t]), kr = p.ok + t * p.sk, vr = p.ov + t * p.sv;
    if (p.f16 != 0u) {
        kc[p.ock + slot * p.row_words + c] = packHalf2x16(vec2(k[kr + 2u * c], k[kr + 2u * c + 1u]));
        vc[p.ocv + slot * p.row_words + c] = packHalf2x16(vec2(v[vr + 2u * c], v[vr + 2u * c + 1u]));
    } else {
        kc[p.ock + slot * p.row_words + c] = floatBitsToUint(k[kr + c]);
        vc[p.ocv + slot * p.row_words + c] = floatBitsToUint(v[vr + c]);
    }
}
