#version 450
// Groups a mixture of experts' slots by expert for matmul_id.comp: slot s (= token * k + j) goes
// to expert ids[s / k][s % k]; writes off[0..n_expert] (expert e's slots are slots[off[e] ..
// off[e + 1])) and then slots[] after it, at word o of g. One workgroup; the order of an expert's
// slots is whatever the atomics give (each slot's result does not depend on it).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer I { int ids[]; };
layout(std430, binding = 1) buffer G { int g[]; };
layout(push_constant) uniform P { uint n_expert, nslots, k, oi, si, o; } p;
#define MAXE 1024u
shared uint cnt[MAXE];
shared uint fill[MAXE];
uint expert(uint s) { return uint(ids[p.oi + (s / p.k) * p.si + s % p.k]); }
void main() {
    uint tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < p.n_expert; e += 256u) cnt[e] = 0u;
    barrier();
    for (uint s = tid; s < p.nslots; s += 256u) atomicAdd(cnt[min(expert(s), p.n_expert - 1u)], 1u);
    barrier();
    if (tid == 0u) {
        uint at = 0u;
        for (uint e = 0u; e < p.n_expert; e++) {
            g[p.o + e] = int(at);
            fill[e] = at;
            at += cnt[e];
        }
        g[p.o + p.n_expert] = int(at);
    }
    barrier();
    for (uint s = tid; s < p.nslots; s += 256u)
        g[p.o + p.n_expert + 1u + atomicAdd(fill[min(expert(s), p.n_expert - 1u)], 1u)] = int(s);
}
