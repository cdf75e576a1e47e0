#version 450
// dst = silu(gate) * up, element by element (offsets in 4-byte words)
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, od, og, ou; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i < p.n) {
        float x = g[p.og + i];
        d[p.od + i] = x / (1.0 + exp(-x)) * u[p.ou + i];
    }
}
