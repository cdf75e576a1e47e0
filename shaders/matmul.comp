#version 450
#extension GL_GOOGLE_include_directive : require
// Products for many tokens (prefill): dst[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r]), tiled:
// a workgroup of 256 computes 64 rows x 64 tokens; per step of 32 columns it dequantizes the
// weight tile and loads the activation tile into shared memory, then each invocation updates
// 4 x 4 outputs from there (two vec4 loads, four vec4 multiply-adds per column). x holds
// activations rounded for the weight type (round_act.comp).
#ifdef USE_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
#ifdef USE_16BIT
layout(std430, binding = 1) readonly buffer W16 { float16_t w16[]; };
#endif
layout(std430, binding = 2) readonly buffer X { vec4 x4[]; };   // rows 16-byte aligned
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint K, N, row_bytes, ox, sx, od, sd, has_bias, ob, ntok; } p;
layout(constant_id = 0) const uint TYPE = 0u;   // the weight type (ggml's number): a pipeline per type
#include "quant.glsl"
shared vec4 ws[32][16];   // [k][rows 4i..4i+3]
shared vec4 xs[32][16];   // [k][tokens 4j..4j+3]
void main() {
    uint r0 = gl_WorkGroupID.x * 64u, t0 = gl_WorkGroupID.y * 64u, tid = gl_LocalInvocationID.x;
    uint tr = tid >> 4, tc = tid & 15u;   // this invocation: rows r0 + 4tr.., tokens t0 + 4tc..
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));   // [row][token]
    for (uint k0 = 0u; k0 < p.K; k0 += 32u) {
        for (uint s = 0u; s < 2u; s++) {   // 64 x 32 of each: 512 groups of 4
            uint g = tid + 256u * s, i = g >> 3, kk = (g & 7u) * 4u, q = i >> 2, c = i & 3u;
            bool in_k = k0 + kk < p.K;   // K is a multiple of 4
            vec4 wv = r0 + i < p.N && in_k ? dequant4(TYPE, (r0 + i) * p.row_bytes, k0 + kk) : vec4(0.0);
            ws[kk][q][c] = wv.x; ws[kk + 1u][q][c] = wv.y; ws[kk + 2u][q][c] = wv.z; ws[kk + 3u][q][c] = wv.w;
            vec4 xv = t0 + i < p.ntok && in_k ? x4[(p.ox + (t0 + i) * p.sx + k0 + kk) >> 2] : vec4(0.0);
            xs[kk][q][c] = xv.x; xs[kk + 1u][q][c] = xv.y; xs[kk + 2u][q][c] = xv.z; xs[kk + 3u][q][c] = xv.w;
        }
        barrier();
        for (uint kk = 0u; kk < 32u; kk++) {
            vec4 a = ws[kk][tr], x = xs[kk][tc];
            acc[0] += a.x * x;
            acc[1] += a.y * x;
            acc[2] += a.z * x;
            acc[3] += a.w * x;
        }
        barrier();
    }
    for (uint i = 0u; i < 4u; i++) {
        uint r = r0 + 4u * tr + i;
        if (r >= p.N) continue;
        float bias = p.has_bias != 0u ? b[p.ob + r] : 0.0;
        for (uint j = 0u; j < 4u; j++) {
            uint t = t0 + 4u * tc + j;
            if (t < p.ntok) d[p.od + t * p.sd + r] = acc[i][j] + bias;
        }
    }
}
