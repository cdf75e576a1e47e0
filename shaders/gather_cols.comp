#version 450
// dst[i][k] = x[i][perm[k]] (f32 rows; offsets and strides in 4-byte words): the input of a GPTQ
// act-order weight, whose columns are sorted by group
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer S { float s[]; };
layout(std430, binding = 2) readonly buffer I { int perm[]; };
layout(push_constant) uniform P { uint ncols, od, os, sd, ss, op; } p;
void main() {
    uint c = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (c < p.ncols) d[p.od + i * p.sd + c] = s[p.os + i * p.ss + uint(perm[p.op + c])];
}
