// cpu_moe.c — the CPU backend's mixture-of-experts ops (struct llm_backend_i's weight_load_experts,
// moe_route, matmul_id, moe_sum; backends/backend.h says what each computes).
//
// A layer's experts stay where the mapped file has them (stacked: expert e's rows from e x rows).
// matmul_id groups the step's tokens by expert and walks each routed expert's rows once, each row
// dotted with every token routed to it: a decode step of B tokens reads the union of their experts
// once, whatever B is.
#include "../src/internal.h"

// Where the dense weights of the type are repacked into the x16 layout (AVX-512; not Q2_K, Q3_K, Q5_K,
// Q6_K or IQ4_XS, whose x16 tiles read another activation format) and an expert is whole groups of 16 rows, the experts
// are too (backends/cpu_tiles.c; the file's pages are given back); elsewhere they stay where the
// mapped file has them.
enum llm_status llm__cpu_weight_load_experts(void *ctx, struct llm__weight *w, int type, int64_t ne0, int64_t ne1,
                                             int n_expert, const void *data, struct llm__err *e) {
    if (!llm__x16_q8k(type) && n_expert > 0 && ne1 % n_expert == 0 && (ne1 / n_expert) % 16 == 0)
        return llm__cpu_weight_load(ctx, w, type, ne0, ne1, data, e);   // x16 where it would be
    memset(w, 0, sizeof(*w));
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->buf.size = llm__row_bytes(type, ne0) * (size_t)ne1;
    w->buf.data = (void *)data;   // zero-copy, plain rows (LLM__LAYOUT_PLAIN)
    w->buf.borrowed = true;
    return LLM_OK;
}

// Each token's k best experts: the largest logits (the softmax keeps their order; ties to the
// lower index), their probabilities (softmax_weight: a softmax over the k chosen logits alone),
// normalised and scaled as p says.
void llm__cpu_moe_route(void *ctx, struct llm__tensor ids, struct llm__tensor wts, struct llm__tensor logits,
                        const struct llm__moe *p) {
    (void)ctx;
    const int k = p->k, n = p->n_expert;
    for (int64_t i = 0; i < logits.ne1; i++) {
        const float *lg = (const float *)llm__tensor_row(logits, i);
        int32_t *id = (int32_t *)(void *)llm__tensor_row(ids, i);
        float *w = (float *)llm__tensor_row(wts, i);
        float mx = -INFINITY;
        for (int x = 0; x < n; x++) mx = lg[x] > mx ? lg[x] : mx;
        double sum = 0.0;
        for (int x = 0; x < n; x++) sum += expf(lg[x] - mx);
        double chosen = 0.0;
        for (int s = 0; s < k; s++) {
            int best = -1;
            for (int x = 0; x < n; x++) {
                bool taken = false;
                for (int q = 0; q < s && !taken; q++) taken = id[q] == x;
                if (!taken && (best < 0 || lg[x] > lg[best])) best = x;
            }
            id[s] = best;
            w[s] = (float)(expf(lg[best] - mx) / sum);
            chosen += w[s];
        }
        if (p->softmax_weight) {   // (the first chosen is the largest of the k)
            double sk = 0.0;
            for (int s = 0; s < k; s++) sk += expf(lg[id[s]] - lg[id[0]]);
            chosen = 0.0;
            for (int s = 0; s < k; s++) chosen += w[s] = (float)(expf(lg[id[s]] - lg[id[0]]) / sk);
        }
        const float div = p->norm ? (float)LLM__MAX(chosen, 6.103515625e-5) : 1.0f;
        for (int s = 0; s < k; s++) {
            w[s] /= div;
            if (p->scale != 0.0f) w[s] *= p->scale;
        }
    }
}

struct llm__moe_job {
    struct llm__cpu *c;
    int n;                                      // weights (gate and up: 2)
    const struct llm__tensor *dst;
    const struct llm__weight *const *w;
    const struct llm__tensor *bias;             // per weight: n_expert rows added by expert (NULL / no buffer: none)
    struct llm__tensor x;
    int k;                                      // slots per token
    bool x_per_slot;
    int64_t rows;                               // rows of one expert
    int vt[2];                                  // the activation type of weight j (F32: x read in place)
    const char *xq[2];
    size_t xq_stride[2];
    const int32_t *off, *slots, *active;        // per expert its slots slots[off[e]..off[e+1]); experts used
    int n_active;
    int64_t rows_per_chunk, chunks_per_expert;
    // x16 weights: the activations of the slots in the order of slots[] (so an expert's are
    // consecutive), in the x16 activation format of weight j's type
    bool x16[2];
    int64_t n_slots;
};

static void llm__moe_quantize_worker(void *arg, int ith, int nth) {
    struct llm__moe_job *job = arg;
    int64_t lo, hi;
    for (int j = 0; j < job->n; j++) {
        if ((job->vt[j] == LLM__TYPE_F32 && !job->x16[j]) || (j == 1 && job->xq[1] == job->xq[0])) continue;
        if (job->x16[j]) {   // a row per slot, in the order of slots[]
            llm__split(job->n_slots, ith, nth, &lo, &hi);
            for (int64_t q = lo; q < hi; q++) {
                const int32_t s = job->slots[q];
                const float *x = (const float *)llm__tensor_row(job->x, job->x_per_slot ? s : s / job->k);
                uint8_t *out = (uint8_t *)job->xq[j] + (size_t)q * job->xq_stride[j];
                llm__x16_quantize_act(job->w[j]->type, x, out, job->x.ne0);
            }
            continue;
        }
        llm__split(job->x.ne1, ith, nth, &lo, &hi);
        for (int64_t t = lo; t < hi; t++)
            llm__quantize_row(job->vt[j], (const float *)llm__tensor_row(job->x, t),
                              (char *)job->xq[j] + (size_t)t * job->xq_stride[j], job->x.ne0);
    }
}

#if defined(LLM__X86_SIMD)
// Rows [r0, r1) of expert e of x16 weight j for the slots routed to it: tiles of 16 rows x up to
// 8 slots into a small buffer, then into each slot's row of dst.
static void llm__moe_mm_x16(const struct llm__moe_job *job, int j, int e, int64_t r0, int64_t r1) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const size_t rec_bytes = llm__x16_group_bytes(w->type, K), stride = job->xq_stride[j];
    const int tile = 8;
    float out[8 * 16];
    for (int64_t r = r0; r < r1; r += 16) {
        const uint8_t *rec = (const uint8_t *)w->buf.data + (size_t)((e * job->rows + r) / 16) * rec_bytes;
        for (int32_t q = job->off[e]; q < job->off[e + 1]; q += tile) {
            const int nt = (int)LLM__MIN(tile, job->off[e + 1] - q);
            const uint8_t *act = (const uint8_t *)job->xq[j] + (size_t)q * stride;
            if (w->type == LLM__TYPE_Q4_K) llm__x16k_tile_avx512(nt, rec, act, stride, K, out, 16);
            else llm__x16_tile_avx512(w->type, nt, rec, act, stride, K, out, 16);
            const float *b = job->bias && job->bias[j].buf ? (const float *)llm__tensor_row(job->bias[j], e) + r : NULL;
            for (int t = 0; t < nt; t++) {
                float *d = (float *)llm__tensor_row(job->dst[j], job->slots[q + t]) + r;
                if (b)
                    for (int i = 0; i < 16; i++) d[i] = out[16 * t + i] + b[i];
                else
                    memcpy(d, out + 16 * t, 16 * sizeof(float));
            }
        }
    }
}
#endif

static void llm__moe_mm_worker(void *arg, int ith, int nth) {
    struct llm__moe_job *job = arg;
    const int64_t K = job->x.ne0, per_w = (int64_t)job->n_active * job->chunks_per_expert;
    for (int64_t ch; (ch = llm__cursors_next(job->c, ith, nth)) >= 0;) {
        const int j = (int)(ch / per_w);
        const int64_t rem = ch % per_w, ci = rem % job->chunks_per_expert;
        const int e = job->active[rem / job->chunks_per_expert];
        const struct llm__weight *w = job->w[j];
        const llm__vec_dot_fn dot = job->c->vec_dot[w->type];
        const size_t wrow = llm__row_bytes(w->type, K);
        const int64_t r0 = ci * job->rows_per_chunk, r1 = LLM__MIN(r0 + job->rows_per_chunk, job->rows);
#if defined(LLM__X86_SIMD)
        if (job->x16[j]) {
            llm__moe_mm_x16(job, j, e, r0, r1);
            continue;
        }
#endif
        const float *b = job->bias && job->bias[j].buf ? (const float *)llm__tensor_row(job->bias[j], e) : NULL;
        for (int64_t r = r0; r < r1; r++) {
            const char *wr = (const char *)w->buf.data + ((size_t)e * (size_t)job->rows + (size_t)r) * wrow;
            for (int32_t q = job->off[e]; q < job->off[e + 1]; q++) {
                const int32_t s = job->slots[q], src = job->x_per_slot ? s : s / job->k;
                float v;
                dot(K, &v, wr, job->xq[j] + (size_t)src * job->xq_stride[j]);
                ((float *)llm__tensor_row(job->dst[j], s))[r] = b ? v + b[r] : v;
            }
        }
    }
}

void llm__cpu_matmul_id(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                        const struct llm__tensor *bias, struct llm__tensor x, struct llm__tensor ids, bool x_per_slot) {
    struct llm__cpu *c = ctx;
    assert(n >= 1 && n <= 2 && !w[0]->perm.buf && !w[n - 1]->perm.buf);   // (no act-order experts)
    const int k = (int)ids.ne0;
    const int64_t slots = ids.ne1 * k, rows = dst[0].ne0, n_expert = w[0]->ne1 / rows;
    struct llm__moe_job job = {.c = c, .n = n, .dst = dst, .w = w, .bias = bias, .x = x, .k = k,
                               .x_per_slot = x_per_slot, .rows = rows, .n_slots = slots};
    // the scratch: the activations in each weight's dot type (x16: a row per slot), then the
    // slots grouped by expert
    char *scratch = c->scratch;
    for (int j = 0; j < n; j++) {
        job.vt[j] = llm__type_info((uint32_t)w[j]->type)->vec_dot_type;
        job.x16[j] = w[j]->layout == LLM__LAYOUT_X16;
        if (job.vt[j] == LLM__TYPE_F32 && !job.x16[j]) {
            job.xq[j] = llm__tensor_row(x, 0);
            job.xq_stride[j] = x.nb1;
        } else if (j == 1 && job.vt[1] == job.vt[0] && job.x16[1] == job.x16[0] && w[1]->type == w[0]->type) {
            job.xq[1] = job.xq[0];
            job.xq_stride[1] = job.xq_stride[0];
        } else {
            job.xq[j] = scratch;
            job.xq_stride[j] = job.x16[j] ? llm__x16_act_stride(w[j]->type, x.ne0) : llm__row_bytes(job.vt[j], x.ne0);
            scratch += (job.xq_stride[j] * (size_t)(job.x16[j] ? slots : x.ne1) + 63) & ~(size_t)63;
        }
    }
    int32_t *off = (int32_t *)(void *)scratch, *fill = off + n_expert + 1, *slot = fill + n_expert,
            *active = slot + slots;
    assert((size_t)((char *)(active + n_expert) - (char *)c->scratch) <= c->scratch_size);
    memset(off, 0, sizeof(int32_t) * (size_t)(n_expert + 1));
    for (int64_t s = 0; s < slots; s++) {
        const int32_t e = ((const int32_t *)(void *)llm__tensor_row(ids, s / k))[s % k];
        assert(e >= 0 && e < n_expert);
        off[e + 1]++;
    }
    job.n_active = 0;
    for (int64_t e = 0; e < n_expert; e++) {
        if (off[e + 1]) active[job.n_active++] = (int32_t)e;
        off[e + 1] += off[e];
        fill[e] = off[e];
    }
    for (int64_t s = 0; s < slots; s++)
        slot[fill[((const int32_t *)(void *)llm__tensor_row(ids, s / k))[s % k]]++] = (int32_t)s;
    job.off = off;
    job.slots = slot;
    job.active = active;
    if (slots < 4) llm__moe_quantize_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__moe_quantize_worker, &job);
    // chunks of about 32 KB of weights (x16: whole groups of 16 rows), the same number for every expert
    const size_t wrow = llm__row_bytes(w[0]->type, x.ne0);
    job.rows_per_chunk = LLM__MAX(16, LLM__MIN(256, (int64_t)((32u << 10) / wrow)));
    if (job.x16[0] || (n > 1 && job.x16[1])) job.rows_per_chunk &= ~(int64_t)15;
    job.chunks_per_expert = (rows + job.rows_per_chunk - 1) / job.rows_per_chunk;
    llm__cursors_init(c, (int64_t)n * job.n_active * job.chunks_per_expert);
    llm__pool_run(c->pool, llm__moe_mm_worker, &job);
}

struct llm__moe_sum_job { struct llm__tensor dst, src, wts, shared, gate; };

static void llm__moe_sum_worker(void *arg, int ith, int nth) {
    const struct llm__moe_sum_job *job = arg;
    const int64_t k = job->wts.ne0, E = job->dst.ne0;
    int64_t lo, hi;
    llm__split(job->dst.ne1, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        float *d = (float *)llm__tensor_row(job->dst, i);
        const float *w = (const float *)llm__tensor_row(job->wts, i);
        for (int64_t s = 0; s < k; s++) {
            const float *x = (const float *)llm__tensor_row(job->src, i * k + s);
            for (int64_t c = 0; c < E; c++) d[c] = s ? d[c] + w[s] * x[c] : w[s] * x[c];
        }
        if (job->shared.buf) {   // + sigmoid(gate) x the shared expert's row
            const float g = *(const float *)llm__tensor_row(job->gate, i), sg = 1.0f / (1.0f + expf(-g));
            const float *x = (const float *)llm__tensor_row(job->shared, i);
            for (int64_t c = 0; c < E; c++) d[c] += sg * x[c];
        }
    }
}

void llm__cpu_moe_sum(void *ctx, struct llm__tensor dst, struct llm__tensor src, struct llm__tensor wts,
                      struct llm__tensor shared, struct llm__tensor gate) {
    struct llm__cpu *c = ctx;
    struct llm__moe_sum_job job = {dst, src, wts, shared, gate};
    llm__pool_run(c->pool, llm__moe_sum_worker, &job);
}
