#version 450
// Paged causal attention, one workgroup per (query head, token, split): the keys of the token's
// sequence (positions 0..pos) are read through its block table 64 at a time with an online
// softmax (running max and sum, rescaled per chunk); no score matrix is stored. Cache rows are
// [slot][n_head_kv * head_dim], f16 (queries rounded to f16 first, as the CPU does), f32 or
// q8_0 (kv_store.comp's layout, the heads rotated: queries rotated as the keys, in pieces of rk,
// the output rotated back as the values were, in pieces of 64; f16 is mode 1, q8_0 mode 2).
// With nsplit > 1 (flash-decoding) split s takes its share of the keys and writes its running
// max, sum and unnormalised output to part[] for attn_reduce.comp; with 1 it writes the output.
// window > 0: a sliding window, only keys pos - window + 1 .. pos are read; softcap > 0: scores
// become softcap * tanh(score / softcap); has_sink: head h's sink sink[osink + h] joins the softmax's
// denominator as one more key's logit with no value (gpt-oss; split: in attn_reduce.comp).
#ifdef USE_16BIT
#extension GL_EXT_shader_16bit_storage : require
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) readonly buffer KC { uint kc[]; };
layout(std430, binding = 3) readonly buffer VC { uint vc[]; };
#ifdef USE_16BIT
layout(std430, binding = 2) readonly buffer KC16 { float16_t kc16[]; };
layout(std430, binding = 3) readonly buffer VC16 { float16_t vc16[]; };
#endif
layout(std430, binding = 4) readonly buffer S { int st[]; };
layout(std430, binding = 5) buffer PART { float part[]; };
layout(std430, binding = 6) readonly buffer SINK { float sink[]; };
layout(push_constant) uniform P {
    uint hd, n_head, n_head_kv, oq, sq, oo, so, ock, ocv, row_words, f16, bs, max_blocks, opos, oseq, obt; float scale;
    uint nsplit, opart, window; float softcap; uint has_sink, osink, rk; float skey, sval;
} p;
shared float qs[256];
shared float sc[64];
shared float red[64];
float kv_at(bool isk, uint slot, uint d) {
    uint w = (isk ? p.ock : p.ocv) + slot * p.row_words;
    if (p.f16 == 2u) {   // q8_0: the quant times its group's scale
        uint qw = isk ? kc[w + (d >> 2)] : vc[w + (d >> 2)];
        uint sw = isk ? kc[w + p.n_head_kv * p.hd / 4u + (d >> 6)] : vc[w + p.n_head_kv * p.hd / 4u + (d >> 6)];
        vec2 sc = unpackHalf2x16(sw);
        return float(bitfieldExtract(int(qw), int(8u * (d & 3u)), 8)) * ((d & 32u) != 0u ? sc.y : sc.x);
    }
    if (p.f16 == 1u) {
#ifdef USE_16BIT
        return float(isk ? kc16[2u * w + d] : vc16[2u * w + d]);
#else
        uint x = isk ? kc[w + (d >> 1)] : vc[w + (d >> 1)];
        return (d & 1u) != 0u ? unpackHalf2x16(x).y : unpackHalf2x16(x).x;
#endif
    }
    return uintBitsToFloat(isk ? kc[w + d] : vc[w + d]);
}
// qs[0..hd) rotated in pieces of n (the CPU's butterflies and order), then scaled by s
void rotate(uint n, float s) {
    uint tid = gl_LocalInvocationID.x;
    for (uint h = 1u; h < n; h <<= 1) {
        for (uint b = tid; b < p.hd / 2u; b += 64u) {
            uint i = (b / h) * 2u * h + b % h;
            float a = qs[i], c = qs[i + h];
            qs[i] = a + c;
            qs[i + h] = a - c;
        }
        barrier();
    }
    for (uint d = tid; d < p.hd; d += 64u) qs[d] *= s;
    barrier();
}
void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, split = gl_WorkGroupID.z, tid = gl_LocalInvocationID.x;
    uint g = h / (p.n_head / p.n_head_kv), n_ctx = uint(st[p.opos + t]) + 1u;
    uint bt = p.obt + uint(st[p.oseq + t]) * p.max_blocks;
    uint j_lo = p.window > 0u && n_ctx > p.window ? n_ctx - p.window : 0u;
    uint chunk = ((n_ctx - j_lo + p.nsplit - 1u) / p.nsplit + 63u) & ~63u;
    uint j_begin = min(n_ctx, j_lo + split * chunk), j_end = min(n_ctx, j_begin + chunk);
    for (uint d = tid; d < p.hd; d += 64u) {
        float v = q[p.oq + t * p.sq + h * p.hd + d];
        qs[d] = p.f16 == 1u ? unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x : v;
    }
    barrier();
    if (p.f16 == 2u) rotate(p.rk, p.skey);
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    for (uint j0 = j_begin; j0 < j_end; j0 += 64u) {
        uint j = j0 + tid;
        float s = -1.0 / 0.0;
        if (j < j_end) {
            uint slot = uint(st[bt + j / p.bs]) * p.bs + j % p.bs;
            s = 0.0;
            for (uint d = 0u; d < p.hd; d++) s += qs[d] * kv_at(true, slot, g * p.hd + d);
            s *= p.scale;
            if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
        }
        red[tid] = s;
        barrier();
        for (uint k = 32u; k > 0u; k >>= 1) { if (tid < k) red[tid] = max(red[tid], red[tid + k]); barrier(); }
        float mnew = max(m, red[0]);
        barrier();
        float e = j < j_end ? exp(s - mnew) : 0.0;
        sc[tid] = e;
        red[tid] = e;
        barrier();
        for (uint k = 32u; k > 0u; k >>= 1) { if (tid < k) red[tid] += red[tid + k]; barrier(); }
        float corr = m == -1.0 / 0.0 ? 0.0 : exp(m - mnew);
        l = l * corr + red[0];
        m = mnew;
        uint nk = min(64u, j_end - j0);
        for (uint i = 0u; i < 4u; i++) {
            uint d = tid + 64u * i;
            if (d >= p.hd) break;
            float a = acc[i] * corr;
            for (uint jj = 0u; jj < nk; jj++) {
                uint jp = j0 + jj, slot = uint(st[bt + jp / p.bs]) * p.bs + jp % p.bs;
                a += sc[jj] * kv_at(false, slot, g * p.hd + d);
            }
            acc[i] = a;
        }
        barrier();
    }
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    if (p.has_sink != 0u && p.nsplit == 1u) {
        float sk = sink[p.osink + h], mx = max(m, sk), a = exp(m - mx);
        inv = a / (l * a + exp(sk - mx));
    }
    if (p.f16 == 2u) {   // the output rotated back (a split's part before the reduction: it is linear)
        for (uint i = 0u; i < 4u; i++) {
            uint d = tid + 64u * i;
            if (d < p.hd) qs[d] = p.nsplit == 1u ? acc[i] * inv : acc[i];
        }
        barrier();
        rotate(64u, p.sval);
        for (uint i = 0u; i < 4u; i++) {
            uint d = tid + 64u * i;
            if (d < p.hd) acc[i] = qs[d];
        }
        if (p.nsplit == 1u) inv = 1.0;
    }
    if (p.nsplit == 1u) {
        for (uint i = 0u; i < 4u; i++) {
            uint d = tid + 64u * i;
            if (d < p.hd) o[p.oo + t * p.so + h * p.hd + d] = acc[i] * inv;
        }
        return;
    }
    uint base = p.opart + ((t * p.n_head + h) * p.nsplit + split) * (p.hd + 2u);
    if (tid == 0u) { part[base] = m; part[base + 1u] = l; }
    for (uint i = 0u; i < 4u; i++) {
        uint d = tid + 64u * i;
        if (d < p.hd) part[base + 2u + d] = acc[i];
    }
}
