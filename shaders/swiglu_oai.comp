#version 450
// gpt-oss's SwiGLU (llama.cpp's swiglu_oai), element by element (offsets in 4-byte words):
// dst = g * sigmoid(alpha * g) * (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit),
// with comparisons as the CPU backend makes them (a NaN goes on).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, od, og, ou; float alpha, limit; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
    if (i < p.n) {
        float a = g[p.og + i], b = u[p.ou + i];
        float x = p.limit < a ? p.limit : a;
        float v = b > p.limit ? p.limit : b < -p.limit ? -p.limit : b;
        d[p.od + i] = x / (1.0 + exp(p.alpha * -x)) * (v + 1.0);
    }
}
