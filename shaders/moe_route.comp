#version 450
// A mixture of experts' routing, one invocation per token: its k experts of the largest router
// logits (ties to the lower index) into ids, best first, and their weights into wts: the
// softmax's probabilities over all n_expert experts, or with softmax_weight a softmax over the k
// chosen logits alone; divided by their sum when norm (at least 2^-14), times scale when not 0.
// As the CPU backend's moe_route (backends/cpu_moe.c). Offsets and row strides in 4-byte words.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer L { float lg[]; };
layout(std430, binding = 1) buffer I { int ids[]; };
layout(std430, binding = 2) buffer W { float wts[]; };
layout(push_constant) uniform P { uint n_expert, k, norm, softmax_weight, ol, sl, oi, si, ow, sw, ntok; float scale; } p;
void main() {
    uint t = gl_GlobalInvocationID.x;
    if (t >= p.ntok) return;
    uint l0 = p.ol + t * p.sl, i0 = p.oi + t * p.si, w0 = p.ow + t * p.sw;
    float mx = -1.0 / 0.0;
    for (uint x = 0u; x < p.n_expert; x++) mx = max(mx, lg[l0 + x]);
    float sum = 0.0;
    for (uint x = 0u; x < p.n_expert; x++) sum += exp(lg[l0 + x] - mx);
    float chosen = 0.0;
    for (uint s = 0u; s < p.k; s++) {
        int best = -1;
        for (uint x = 0u; x < p.n_expert; x++) {
            bool taken = false;
            for (uint q = 0u; q < s && !taken; q++) taken = ids[i0 + q] == int(x);
            if (!taken && (best < 0 || lg[l0 + x] > lg[l0 + uint(best)])) best = int(x);
        }
        ids[i0 + s] = best;
        float w = exp(lg[l0 + uint(best)] - mx) / sum;
        wts[w0 + s] = w;
        chosen += w;
    }
    if (p.softmax_weight != 0u) {   // (the first chosen is the largest of the k)
        float top = lg[l0 + uint(ids[i0])], sk = 0.0;
        for (uint s = 0u; s < p.k; s++) sk += exp(lg[l0 + uint(ids[i0 + s])] - top);
        chosen = 0.0;
        for (uint s = 0u; s < p.k; s++) {
            float w = exp(lg[l0 + uint(ids[i0 + s])] - top) / sk;
            wts[w0 + s] = w;
            chosen += w;
        }
    }
    float div = p.norm != 0u ? max(chosen, 6.103515625e-5) : 1.0;
    for (uint s = 0u; s < p.k; s++) {
        float w = wts[w0 + s] / div;
        wts[w0 + s] = p.scale != 0.0 ? w * p.scale : w;
    }
}
