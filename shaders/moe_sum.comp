#version 450
// A mixture of experts' output: dst[i] = sum over j < k, in order, of wts[i][j] * src row i*k + j,
// then + sigmoid(gate[i]) * shared[i] when has_shared (a shared expert's row and its gate's
// logit). One invocation per column of a row; offsets and row strides in 4-byte words.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer S { float src[]; };
layout(std430, binding = 2) readonly buffer W { float wts[]; };
layout(std430, binding = 3) readonly buffer SH { float sh[]; };
layout(std430, binding = 4) readonly buffer SG { float sg[]; };
layout(push_constant) uniform P { uint E, k, od, sd, os, ss, ow, sw, has_shared, osh, ssh, og, sgs; } p;
void main() {
    uint c = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (c >= p.E) return;
    float a = 0.0;
    for (uint j = 0u; j < p.k; j++) {
        float v = wts[p.ow + i * p.sw + j] * src[p.os + (i * p.k + j) * p.ss + c];
        a = j == 0u ? v : a + v;
    }
    if (p.has_shared != 0u) a += 1.0 / (1.0 + exp(-sg[p.og + i * p.sgs])) * sh[p.osh + i * p.ssh + c];
    d[p.od + i * p.sd + c] = a;
}
