#version 450
// Paged causal attention for prefill: one workgroup per (query head, tile of up to 8 consecutive
// tokens of one sequence). Keys and values are read through the block table 16 at a time into
// shared memory once for the whole tile; each query keeps its own running max and sum (online
// softmax; a key after a query's position is masked), no score matrix beyond the 8 x 16 chunk.
// Cache rows as in attention.comp; queries rounded to f16 for f16 caches, as the CPU does; q8_0:
// queries rotated as the keys, the output rotated back as the values (attention.comp).
// window > 0: a key more than window - 1 positions before a query is masked too (sliding
// window), and the keys before every query's window are not read; softcap and sinks as in
// attention.comp.
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
layout(std430, binding = 5) readonly buffer SINK { float sink[]; };
layout(push_constant) uniform P {
    uint hd, n_head, n_head_kv, oq, sq, oo, so, ock, ocv, row_words, f16, bs, max_blocks, opos, oseq, obt; float scale;
    uint otiles, unused, window; float softcap; uint has_sink, osink, rk; float skey, sval;
} p;
#define TQ 8u
#define TK 16u
shared float qs[TQ][256];
shared float kv[TK][256];
shared float sp[TQ][TK];
shared float m_s[TQ], l_s[TQ], corr_s[TQ];
shared int pos_s[TQ];
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
// qs[i][0..hd) of every query i rotated in pieces of n (the CPU's butterflies), then scaled by s
void rotate(uint n, float s) {
    uint tid = gl_LocalInvocationID.x, half_ = p.hd / 2u;
    for (uint h = 1u; h < n; h <<= 1) {
        for (uint e = tid; e < TQ * half_; e += 64u) {
            uint r = e / half_, b = e % half_, i = (b / h) * 2u * h + b % h;
            float a = qs[r][i], c = qs[r][i + h];
            qs[r][i] = a + c;
            qs[r][i + h] = a - c;
        }
        barrier();
    }
    for (uint e = tid; e < TQ * p.hd; e += 64u) qs[e / p.hd][e % p.hd] *= s;
    barrier();
}
void main() {
    uint h = gl_WorkGroupID.x, tile = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint t0 = uint(st[p.otiles + 2u * tile]), cnt = uint(st[p.otiles + 2u * tile + 1u]);
    uint g = h / (p.n_head / p.n_head_kv), bt = p.obt + uint(st[p.oseq + t0]) * p.max_blocks;
    for (uint e = tid; e < TQ * p.hd; e += 64u) {
        uint i = e / p.hd, d = e % p.hd;
        float v = i < cnt ? q[p.oq + (t0 + i) * p.sq + h * p.hd + d] : 0.0;
        qs[i][d] = p.f16 == 1u ? unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x : v;
    }
    barrier();
    if (p.f16 == 2u) rotate(p.rk, p.skey);
    if (tid < TQ) {
        pos_s[tid] = tid < cnt ? st[p.opos + t0 + tid] : -1;
        m_s[tid] = -1.0 / 0.0;
        l_s[tid] = 0.0;
    }
    barrier();
    int maxpos = -1, minpos = pos_s[0];
    for (uint i = 0u; i < cnt; i++) { maxpos = max(maxpos, pos_s[i]); minpos = min(minpos, pos_s[i]); }
    uint j_lo = p.window > 0u ? uint(max(0, minpos - int(p.window) + 1)) : 0u;
    uint qi = tid / 8u, dl = tid % 8u, nd = (p.hd + 7u) / 8u;
    float acc[32];
    for (uint k = 0u; k < 32u; k++) acc[k] = 0.0;
    for (uint j0 = j_lo; int(j0) <= maxpos; j0 += TK) {
        uint nk = min(TK, uint(maxpos) + 1u - j0);
        for (uint e = tid; e < nk * p.hd; e += 64u) {
            uint jj = e / p.hd, d = e % p.hd, j = j0 + jj;
            kv[jj][d] = kv_at(true, uint(st[bt + j / p.bs]) * p.bs + j % p.bs, g * p.hd + d);
        }
        barrier();
        for (uint pr = tid; pr < TQ * TK; pr += 64u) {
            uint i = pr / TK, jj = pr % TK;
            float s = -1.0 / 0.0;
            if (jj < nk && int(j0 + jj) <= pos_s[i] && (p.window == 0u || pos_s[i] - int(j0 + jj) < int(p.window))) {
                s = 0.0;
                for (uint d = 0u; d < p.hd; d++) s += qs[i][d] * kv[jj][d];
                s *= p.scale;
                if (p.softcap > 0.0) s = p.softcap * tanh(s / p.softcap);
            }
            sp[i][jj] = s;
        }
        barrier();
        if (tid < TQ) {
            float mx = m_s[tid];
            for (uint jj = 0u; jj < TK; jj++) mx = max(mx, sp[tid][jj]);
            float corr = m_s[tid] == -1.0 / 0.0 ? 0.0 : exp(m_s[tid] - mx), sum = 0.0;
            for (uint jj = 0u; jj < TK; jj++) {
                float e = sp[tid][jj] == -1.0 / 0.0 ? 0.0 : exp(sp[tid][jj] - mx);
                sp[tid][jj] = e;
                sum += e;
            }
            l_s[tid] = l_s[tid] * corr + sum;
            m_s[tid] = mx;
            corr_s[tid] = corr;
        }
        for (uint e = tid; e < nk * p.hd; e += 64u) {   // the scores are done with the keys
            uint jj = e / p.hd, d = e % p.hd, j = j0 + jj;
            kv[jj][d] = kv_at(false, uint(st[bt + j / p.bs]) * p.bs + j % p.bs, g * p.hd + d);
        }
        barrier();
        float corr = corr_s[qi];
        for (uint k = 0u; k < nd; k++) {
            uint d = min(dl + 8u * k, p.hd - 1u);   // (head_dim is a multiple of 8 but for a few models)
            float a = acc[k] * corr;
            for (uint jj = 0u; jj < nk; jj++) a += sp[qi][jj] * kv[jj][d];
            acc[k] = a;
        }
        barrier();
    }
    float l = l_s[qi], inv = l > 0.0 ? 1.0 / l : 0.0;
    if (p.has_sink != 0u) {
        float sk = sink[p.osink + h], mx = max(m_s[qi], sk), a = exp(m_s[qi] - mx);
        inv = a / (l * a + exp(sk - mx));
    }
    if (p.f16 == 2u) {   // the output rotated back
        for (uint k = 0u; k < nd; k++) {
            uint d = dl + 8u * k;
            if (d < p.hd) qs[qi][d] = acc[k] * inv;
        }
        barrier();
        rotate(64u, p.sval);
        for (uint k = 0u; k < nd; k++) {
            uint d = dl + 8u * k;
            if (d < p.hd) acc[k] = qs[qi][d];
        }
        inv = 1.0;
    }
    if (qi < cnt) {
        for (uint k = 0u; k < nd; k++) {
            uint d = dl + 8u * k;
            if (d < p.hd) o[p.oo + (t0 + qi) * p.so + h * p.hd + d] = acc[k] * inv;
        }
    }
}
