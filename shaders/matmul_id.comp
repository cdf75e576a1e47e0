#version 450
#extension GL_GOOGLE_include_directive : require
// A mixture of experts' products (matmul_id): for each slot s routed to expert e (moe_group.comp's
// lists in g), dst[s][r] = sum_c w[e * N + r][c] * x[xs][c] (+ bias[e][r]), xs = s when x has a
// row per slot, else s / k (the token's row). A workgroup takes 64 rows of one expert (x: the row
// tile, y: the expert) and its slots 64 at a time, tiled as matmul.comp: per step of 32 columns
// the weight tile is dequantized and the slots' activations loaded into shared memory, each
// invocation updating 4 x 4 outputs. An expert no slot is routed to is not read. x holds
// activations rounded for the weight type (round_act.comp), rows 16-byte aligned.
#ifdef USE_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer W { uint w[]; };
#ifdef USE_16BIT
layout(std430, binding = 1) readonly buffer W16 { float16_t w16[]; };
#endif
layout(std430, binding = 2) readonly buffer X { vec4 x4[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(std430, binding = 4) readonly buffer G { int g[]; };
layout(push_constant) uniform P {
    uint K, N, row_bytes, ox, sx, od, sd, has_bias, ob, sb, k, x_per_slot, og, n_expert;
} p;
layout(constant_id = 0) const uint TYPE = 0u;   // the weight type (ggml's number): a pipeline per type
#include "quant.glsl"
shared vec4 ws[32][16];   // [k][rows 4i..4i+3]
shared vec4 xs[32][16];   // [k][slots 4j..4j+3]
shared uint slot_s[64];
void main() {
    uint e = gl_WorkGroupID.y, r0 = gl_WorkGroupID.x * 64u, tid = gl_LocalInvocationID.x;
    uint tr = tid >> 4, tc = tid & 15u;   // this invocation: rows r0 + 4tr.., slots 4tc.. of the chunk
    uint s_begin = uint(g[p.og + e]), s_end = uint(g[p.og + e + 1u]), list = p.og + p.n_expert + 1u;
    for (uint c0 = s_begin; c0 < s_end; c0 += 64u) {
        uint ns = min(64u, s_end - c0);
        if (tid < ns) slot_s[tid] = uint(g[list + c0 + tid]);
        barrier();
        vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));   // [row][slot]
        for (uint k0 = 0u; k0 < p.K; k0 += 32u) {
            for (uint s = 0u; s < 2u; s++) {   // 64 x 32 of each: 512 groups of 4
                uint gi = tid + 256u * s, i = gi >> 3, kk = (gi & 7u) * 4u, q = i >> 2, c = i & 3u;
                bool in_k = k0 + kk < p.K;   // K is a multiple of 4
                vec4 wv = r0 + i < p.N && in_k ? dequant4(TYPE, (e * p.N + r0 + i) * p.row_bytes, k0 + kk) : vec4(0.0);
                ws[kk][q][c] = wv.x; ws[kk + 1u][q][c] = wv.y; ws[kk + 2u][q][c] = wv.z; ws[kk + 3u][q][c] = wv.w;
                vec4 xv = vec4(0.0);
                if (i < ns && in_k) {
                    uint row = p.x_per_slot != 0u ? slot_s[i] : slot_s[i] / p.k;
                    xv = x4[(p.ox + row * p.sx + k0 + kk) >> 2];
                }
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
            float bias = p.has_bias != 0u ? b[p.ob + e * p.sb + r] : 0.0;
            for (uint j = 0u; j < 4u; j++) {
                uint t = 4u * tc + j;
                if (t < ns) d[p.od + slot_s[t] * p.sd + r] = acc[i][j] + bias;
            }
        }
        barrier();   // (slot_s is rewritten for the next chunk)
    }
}
