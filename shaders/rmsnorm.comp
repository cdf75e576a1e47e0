#version 450
// dst row = x row / sqrt(mean(x^2) + eps) * w; one workgroup per row (offsets and row strides
// in 4-byte words)
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(push_constant) uniform P { uint ncols, od, ox, ow, sd, sx; float eps; } p;
shared float part[256];
void main() {
    uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint xr = p.ox + row * p.sx, dr = p.od + row * p.sd;
    float s = 0.0;
    for (uint i = t; i < p.ncols; i += 256u) { float v = x[xr + i]; s += v * v; }
    part[t] = s;
    barrier();
    for (uint k = 128u; k > 0u; k >>= 1) {
        if (t < k) part[t] += part[t + k];
        barrier();
    }
    float scale = 1.0 / sqrt(part[0] / float(p.ncols) + p.eps);
    for (uint i = t; i < p.ncols; i += 256u) d[dr + i] = x[xr + i] * scale * w[p.ow + i];
}
