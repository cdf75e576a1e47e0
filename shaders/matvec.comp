#version 450
#extension GL_GOOGLE_include_directive : require
// Products for few tokens (decode): dst[t][r] = sum_k w[r][k] * x[t][k] (+ bias[r]) for up to 8
// tokens. A workgroup of 64 takes `rows` weight rows (groups beyond 65535 go to the y
// dimension). With USE_SUBGROUP each subgroup takes a row at a time and reduces with
// subgroupAdd, no barrier; otherwise 64 / rows invocations share a row and reduce through
// shared memory. Each invocation dequantizes 4 weights at a time and uses them for every token;
// a single token's activations (as many as shared memory takes) are read once per workgroup.
// x holds the activations already rounded for the weight type (round_act.comp), or f32 for F32.
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
layout(std430, binding = 2) readonly buffer X { vec4 x4[]; };   // rows 16-byte aligned
layout(std430, binding = 3) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint K, N, row_bytes, ox, sx, od, sd, has_bias, ob, ntok, rows; } p;
layout(constant_id = 0) const uint TYPE = 0u;   // the weight type (ggml's number): a pipeline per type
#include "quant.glsl"
#define MAXT 8u
// One token of at most XMAX values: x is read once for the workgroup's rows, into shared memory.
layout(constant_id = 1) const uint XMAX = 4096u;   // set from the device's shared memory size
shared vec4 xs[XMAX / 4u];
bool x_shared() { return p.ntok == 1u && p.K <= XMAX; }
void load_x() {
    if (!x_shared()) return;
    for (uint k = gl_LocalInvocationID.x; k < p.K / 4u; k += 64u) xs[k] = x4[(p.ox >> 2) + k];
    barrier();
}
// the partial sums of `lanes` invocations (lane, stride lanes) for row r over all tokens
void row_sums(uint r, uint lane, uint lanes, out float acc[MAXT]) {
    for (uint t = 0u; t < MAXT; t++) acc[t] = 0.0;
    uint row = r * p.row_bytes;
    if (x_shared()) {
        float a = 0.0;
        for (uint k = 4u * lane; k < p.K; k += 4u * lanes) a += dot(dequant4(TYPE, row, k), xs[k >> 2]);
        acc[0] = a;
        return;
    }
    for (uint k = 4u * lane; k < p.K; k += 4u * lanes) {
        vec4 wv = dequant4(TYPE, row, k);
        for (uint t = 0u; t < p.ntok; t++) {
            acc[t] += dot(wv, x4[(p.ox + t * p.sx + k) >> 2]);
        }
    }
}
void store(uint r, uint t, float s) { d[p.od + t * p.sd + r] = s + (p.has_bias != 0u ? b[p.ob + r] : 0.0); }
#ifdef USE_SUBGROUP
void main() {
    load_x();
    uint r0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * p.rows;
    for (uint i = gl_SubgroupID; i < p.rows; i += gl_NumSubgroups) {
        uint r = r0 + i;
        if (r >= p.N) break;
        float acc[MAXT];
        row_sums(r, gl_SubgroupInvocationID, gl_SubgroupSize, acc);
        for (uint t = 0u; t < p.ntok; t++) {
            float s = subgroupAdd(acc[t]);
            if (subgroupElect()) store(r, t, s);
        }
    }
}
#else
shared float red[64][MAXT];
void main() {
    load_x();
    uint tid = gl_LocalInvocationID.x, lanes = 64u / p.rows, i = tid / lanes, lane = tid % lanes;
    uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * 65535u) * p.rows + i;
    float acc[MAXT];
    if (r < p.N) row_sums(r, lane, lanes, acc);
    for (uint t = 0u; t < p.ntok; t++) red[tid][t] = acc[t];
    barrier();
    if (r < p.N && lane < p.ntok) {
        float s = 0.0;
        for (uint j = 0u; j < lanes; j++) s += red[i * lanes + j][lane];
        store(r, lane, s);
    }
}
#endif
