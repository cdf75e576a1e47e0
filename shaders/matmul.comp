#version 450
#extension GL_GOOGLE_include_directive : require
// Products for many tokens (prefill): dst[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r]), tiled:
// a workgroup of 256 computes 64 rows x 64 tokens; per step of 32 columns it dequantizes the
// weight tile and loads the activation tile into shared memory, then each invocation updates
// 4 x 4 outputs from there. x holds activations rounded for the weight type (round_act.comp).
#ifdef USE_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
#ifdef USE_16BIT
layout(std430, binding = 1) readonly buffer W16 { float16_t w16[]; };
#endif
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint K, N, type, row_bytes, ox, sx, od, sd, has_bias, ob, ntok; } p;
#include "quant.glsl"
shared float ws[32][65];   // [k][row], padded
shared float xs[32][65];   // [k][token]
void main() {
    uint r0 = gl_WorkGroupID.x * 64u, t0 = gl_WorkGroupID.y * 64u, tid = gl_LocalInvocationID.x;
    uint tr = tid >> 4, tc = tid & 15u;
    float acc[4][4];
    for (uint i = 0u; i < 4u; i++)
        for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < p.K; k0 += 32u) {
        for (uint s = 0u; s < 2u; s++) {   // 64 x 32 of each: 512 groups of 4
            uint g = tid + 256u * s, i = g >> 3, kk = (g & 7u) * 4u;
            bool in_k = k0 + kk < p.K;   // K is a multiple of 4
            vec4 wv = r0 + i < p.N && in_k ? dequant4(p.type, (r0 + i) * p.row_bytes, k0 + kk) : vec4(0.0);
            ws[kk][i] = wv.x; ws[kk + 1u][i] = wv.y; ws[kk + 2u][i] = wv.z; ws[kk + 3u][i] = wv.w;
            uint o = p.ox + (t0 + i) * p.sx + k0 + kk;
            bool in_t = t0 + i < p.ntok && in_k;
            xs[kk][i] = in_t ? x[o] : 0.0;
            xs[kk + 1u][i] = in_t ? x[o + 1u] : 0.0;
            xs[kk + 2u][i] = in_t ? x[o + 2u] : 0.0;
            xs[kk + 3u][i] = in_t ? x[o + 3u] : 0.0;
        }
        barrier();
        for (uint kk = 0u; kk < 32u; kk++) {
            float a[4], c[4];
            for (uint i = 0u; i < 4u; i++) { a[i] = ws[kk][tr + 16u * i]; c[i] = xs[kk][tc + 16u * i]; }
            for (uint i = 0u; i < 4u; i++)
                for (uint j = 0u; j < 4u; j++) acc[i][j] += a[i] * c[j];
        }
        barrier();
    }
    for (uint i = 0u; i < 4u; i++) {
        uint r = r0 + tr + 16u * i;
        if (r >= p.N) continue;
        float bias = p.has_bias != 0u ? b[p.ob + r] : 0.0;
        for (uint j = 0u; j < 4u; j++) {
            uint t = t0 + tc + 16u * j;
            if (t < p.ntok) d[p.od + t * p.sd + r] = acc[i][j] + bias;
        }
    }
}
