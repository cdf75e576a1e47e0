#version 450
#extension GL_GOOGLE_include_directive : require
// dst row i = the table's row tokens[i], dequantized (any weight type of quant.glsl); one
// invocation per 4 columns.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer T { uint w[]; };
layout(std430, binding = 2) readonly buffer I { int st[]; };
layout(push_constant) uniform P { uint ncols, od, sd, row_bytes, otok; } p;
layout(constant_id = 0) const uint TYPE = 0u;   // the weight type (ggml's number): a pipeline per type
#include "quant.glsl"
void main() {
    uint c = 4u * gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (c >= p.ncols) return;
    vec4 v = dequant4(TYPE, uint(st[p.otok + i]) * p.row_bytes, c);
    uint o = p.od + i * p.sd + c;
    d[o] = v.x;
    d[o + 1u] = v.y;
    d[o + 2u] = v.z;
    d[o + 3u] = v.w;
}
