#version 450
// Flash-decoding's second pass: combines the nsplit partial results of attention.comp for each
// (head, token): out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s, M the largest m_s; with
// has_sink, head h's sink joins the denominator (attention.comp).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer PART { float part[]; };
layout(std430, binding = 2) readonly buffer SINK { float sink[]; };
layout(push_constant) uniform P { uint hd, n_head, nsplit, opart, oo, so, has_sink, osink; } p;
void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, st = p.hd + 2u;
    uint base = p.opart + (t * p.n_head + h) * p.nsplit * st;
    float M = -1.0 / 0.0;
    for (uint s = 0u; s < p.nsplit; s++)
        if (part[base + s * st + 1u] > 0.0) M = max(M, part[base + s * st]);
    float L = 0.0;
    for (uint s = 0u; s < p.nsplit; s++) {
        float l = part[base + s * st + 1u];
        if (l > 0.0) L += l * exp(part[base + s * st] - M);
    }
    float scale = L > 0.0 ? 1.0 / L : 0.0;
    if (p.has_sink != 0u) {
        float sk = sink[p.osink + h], mx = max(M, sk), a = exp(M - mx);
        scale = a / (L * a + exp(sk - mx));
    }
    for (uint d = tid; d < p.hd; d += 64u) {
        float a = 0.0;
        for (uint s = 0u; s < p.nsplit; s++)
            if (part[base + s * st + 1u] > 0.0) a += part[base + s * st + 2u + d] * exp(part[base + s * st] - M);
        o[p.oo + t * p.so + h * p.hd + d] = a * scale;
    }
}
