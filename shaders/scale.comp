#version 450
// dst = x * s, element by element (offsets in 4-byte words): Gemma's embedding scaling
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint n, od, ox; float s; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i < p.n) d[p.od + i] = x[p.ox + i] * p.s;
}
