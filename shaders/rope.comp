#version 450
// Rotates pairs of each head of each token row in place by the token's position: pairs
// (2i, 2i+1), or (i, i + n_rot/2) NeoX-style; theta = freq_scale * pos * base^(-2i/n_rot)
// (divided by freq_factors[i] when given). YaRN (ext_factor != 0): theta blends the scaled and
// the unscaled angle by ramp = ext_factor * (1 - clamp((i - corr0) / max(0.001, corr1 - corr0),
// 0, 1)) and cos and sin are multiplied by mscale (backends/backend.h's struct llm__rope). One
// invocation per (pair, head, token).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { int st[]; };
layout(std430, binding = 2) readonly buffer F { float ff[]; };
layout(push_constant) uniform P {
    uint n_head, head_dim, n_rot, neox, ox, sx, opos, has_ff, off; float base, scale, ext_factor, mscale, corr0, corr1;
} p;
void main() {
    uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, t = gl_WorkGroupID.z, half_rot = p.n_rot / 2u;
    if (i >= half_rot) return;
    float extrap = float(st[p.opos + t]) * pow(p.base, -2.0 * float(i) / float(p.n_rot));
    if (p.has_ff != 0u) extrap /= ff[p.off + i];
    float theta = extrap * p.scale, ms = 1.0;
    if (p.ext_factor != 0.0) {
        float ramp = (1.0 - min(1.0, max(0.0, (float(i) - p.corr0) / max(0.001, p.corr1 - p.corr0)))) * p.ext_factor;
        theta = theta * (1.0 - ramp) + extrap * ramp;
        ms = p.mscale;
    }
    uint base = p.ox + t * p.sx + h * p.head_dim;
    uint i0 = p.neox != 0u ? i : 2u * i, i1 = p.neox != 0u ? i + half_rot : 2u * i + 1u;
    float c = cos(theta) * ms, s = sin(theta) * ms, x0 = x[base + i0], x1 = x[base + i1];
    x[base + i0] = x0 * c - x1 * s;
    x[base + i1] = x0 * s + x1 * c;
}
