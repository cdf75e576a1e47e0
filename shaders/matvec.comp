#version 450
#extension GL_GOOGLE_include_directive : require
// Products for few tokens (decode): dst[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r]) for up to 8
// tokens, one workgroup of 64 per weight row (rows beyond 65535 go to the y dimension). Each
// invocation dequantizes 4 weights at a time and uses them for every token; the partial sums
// are reduced with subgroup operations (USE_SUBGROUP) or through shared memory. x holds the
// activations already rounded for the weight type (round_act.comp), or f32 for F32 weights.
#ifdef USE_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
#ifdef USE_16BIT
layout(std430, binding = 1) readonly buffer W16 { float16_t w16[]; };
#endif
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint K, N, type, row_bytes, ox, sx, od, sd, has_bias, ob, ntok; } p;
#include "quant.glsl"
#define MAXT 8u
shared float red[MAXT][64];
void main() {
    uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u, tid = gl_LocalInvocationID.x;
    if (r >= p.N) return;
    uint row = r * p.row_bytes;
    float acc[MAXT];
    for (uint t = 0u; t < MAXT; t++) acc[t] = 0.0;
    for (uint k = 4u * tid; k < p.K; k += 256u) {
        vec4 wv = dequant4(p.type, row, k);
        for (uint t = 0u; t < p.ntok; t++) {
            uint o = p.ox + t * p.sx + k;
            acc[t] += dot(wv, vec4(x[o], x[o + 1u], x[o + 2u], x[o + 3u]));
        }
    }
#ifdef USE_SUBGROUP
    for (uint t = 0u; t < p.ntok; t++) {
        float s = subgroupAdd(acc[t]);
        if (subgroupElect()) red[t][gl_SubgroupID] = s;
    }
    barrier();
    if (tid < p.ntok) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += red[tid][i];
        d[p.od + tid * p.sd + r] = s + (p.has_bias != 0u ? b[p.ob + r] : 0.0);
    }
#else
    for (uint t = 0u; t < p.ntok; t++) red[t][tid] = acc[t];
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s)
            for (uint t = 0u; t < p.ntok; t++) red[t][tid] += red[t][tid + s];
        barrier();
    }
    if (tid < p.ntok) d[p.od + tid * p.sd + r] = red[tid][0] + (p.has_bias != 0u ? b[p.ob + r] : 0.0);
#endif
}
