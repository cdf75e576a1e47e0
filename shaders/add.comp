#version 450
// dst = a + b, element by element (n elements; offsets in 4-byte words)
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint n, od, oa, ob; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i < p.n) d[p.od + i] = a[p.oa + i] + b[p.ob + i];
}
