#version 450
// dst = gelu(gate) * up, element by element (offsets in 4-byte words), GELU's tanh approximation
// as llama.cpp's CPU backend computes it and the CPU backend here does: the input rounded to
// half precision and the result too (its table of half-precision values); 0 below -10, x above 10.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, od, og, ou; } p;
float half_round(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i < p.n) {
        float x = g[p.og + i], y;
        if (x <= -10.0) y = 0.0;
        else if (x >= 10.0) y = x;
        else {
            float h = half_round(x);
            y = half_round(0.5 * h * (1.0 + tanh(0.7978845608028654 * h * (1.0 + 0.044715 * h * h))));
        }
        d[p.od + i] = y * u[p.ou + i];
    }
}
