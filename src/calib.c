// Calibrated quantization: statistics, GPTQ, AWQ

#include "internal.h"

// === calibrated quantization ===
// llm_quantize with a method (see llm.h): the engine (CPU backend, the model's own weights) runs
// over windows of a calibration text while its forward hands every linear layer's input to a
// struct llm__calib (llm__calib_take); then each layer's matrices are quantized:
//   GPTQ (Frantar et al.): per input, H = sum x x^T over the tokens (upper triangle), dampened
//     by 1% of its mean diagonal; U, the upper Cholesky factor of H^-1 (H^-1 = U^T U), from one
//     Cholesky of H with rows and columns reversed and one triangular inverse. Rows are independent:
//     each is taken column by column (in act-order: by decreasing diagonal of H), each group's
//     scale and zero found when its first column comes (from the values as updated so far), every
//     rounding error e spread over the columns after it, w[j] -= e / U[i][i] * U[i][j]. A llama.cpp
//     type (GGUF output) rounds a block of columns at once with its own quantizer; the block's
//     errors go to the columns after it the same way (solved through the block's triangle of U).
//   AWQ (Lin et al.): per group of matrices sharing an input, the scales s = mean|x|^a /
//     mean|w|^(1-a) (w relative to its group's largest) for a = 0, 0.05, .. 0.95, normalised,
//     the one kept whose quantized matrices' outputs on the sampled tokens err least; the columns
//     are multiplied by s and the norm or matrix before divided by it (q/k/v: attn_norm; gate/up:
//     ffn_norm; down: up's rows; o: v's rows when there is one v row per o column). Then each group
//     of each matrix but q and k is clipped to the range, of 1 to 0.5 times its largest value, whose
//     group outputs on the samples err least, and rounded (asymmetric: scale and zero from min and
//     max).
// The losses are taken on the outputs of the matrices themselves (AutoAWQ takes those of the whole
// attention block or MLP). The calibration runs once on the unquantized model: every layer's inputs
// are those of the original weights (GPTQ's tools feed each layer the quantized layers' outputs).

struct llm__calib_h_job { float *h; const float *xt; int64_t n, T; llm__vec_dot_fn dot; };

static void llm__calib_h_worker(void *arg, int ith, int nth) {
    const struct llm__calib_h_job *j = arg;
    for (int64_t i = ith; i < j->n; i += nth)   // rows interleaved: row i has n - i products
        for (int64_t k = i; k < j->n; k++) {
            float s;
            j->dot(j->T, &s, j->xt + i * j->T, j->xt + k * j->T);
            j->h[i * j->n + k] += s;
        }
}

void llm__calib_take(void *calib, int layer, int slot, struct llm__tensor x) {
    struct llm__calib *c = calib;
    if (c->fail || layer < c->l0 || layer >= c->l1) return;
    if (!x.buf->data) { c->fail = true; return; }   // (the CPU backend's buffers are host memory)
    struct llm__cal_in *ci = &c->in[layer * LLM__CAL_SLOTS + slot];
    const int64_t n = x.ne0, T = x.ne1;
    const char *base = (const char *)x.buf->data + x.offs;
    if (!ci->abs_sum) {
        ci->n = n;
        ci->abs_sum = calloc((size_t)n, sizeof(double));
        ci->xs = malloc(sizeof(float) * (size_t)n * (size_t)(c->max_xs ? c->max_xs : 1));
        ci->h = c->want_h ? calloc((size_t)n * (size_t)n, sizeof(float)) : NULL;
        if (!ci->abs_sum || !ci->xs || (c->want_h && !ci->h)) { c->fail = true; return; }
    }
    for (int64_t t = 0; t < T; t++) {
        const float *row = (const float *)(base + (size_t)t * x.nb1);
        for (int64_t i = 0; i < n; i++) ci->abs_sum[i] += fabsf(row[i]);
        if ((ci->tokens + t) % c->stride == 0 && ci->n_xs < c->max_xs)
            memcpy(ci->xs + (size_t)ci->n_xs++ * (size_t)n, row, sizeof(float) * (size_t)n);
    }
    if (c->want_h) {
        const size_t need = (size_t)n * (size_t)T;
        if (need > c->xt_cap) {
            free(c->xt);
            if (!(c->xt = malloc(sizeof(float) * need))) { c->xt_cap = 0; c->fail = true; return; }
            c->xt_cap = need;
        }
        for (int64_t t = 0; t < T; t++) {
            const float *row = (const float *)(base + (size_t)t * x.nb1);
            for (int64_t i = 0; i < n; i++) c->xt[i * T + t] = row[i];
        }
        struct llm__calib_h_job job = {ci->h, c->xt, n, T, c->dot};
        llm__pool_run(c->pool, llm__calib_h_worker, &job);
    }
    ci->tokens += T;
}

void llm__calib_free(struct llm__calib *c) {
    if (c->in)
        for (int i = 0; i < c->n_layer * LLM__CAL_SLOTS; i++)
            free(c->in[i].h), free(c->in[i].abs_sum), free(c->in[i].xs);
    free(c->in);
    free(c->xt);
    llm__pool_free(c->pool);
    memset(c, 0, sizeof(*c));
}

// --- GPTQ ---

static double llm__dot_f64(const double *a, const double *b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        s0 += a[i] * b[i], s1 += a[i + 1] * b[i + 1], s2 += a[i + 2] * b[i + 2], s3 += a[i + 3] * b[i + 3];
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

// U (n x n, upper; rows and columns in the processing order `order`) with H^-1 = U^T U, where H is
// ci's sum of x x^T over its tokens, with its diagonal raised by damp x its mean. order: identity,
// or with act_order the inputs by decreasing diagonal. dead[i]: input i was always zero (its
// diagonal is set to 1 and its weights must be zeroed). false: out of memory, or H not finite.
static bool llm__gptq_factor(const struct llm__cal_in *ci, double damp, bool act_order, int32_t *order, uint8_t *dead,
                             float *U) {
    const int64_t n = ci->n;
    double *A = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!A) return false;
    const double scale = 2.0 / (double)LLM__MAX(ci->tokens, 1);
    double mean = 0;
    for (int64_t i = 0; i < n; i++) {
        order[i] = (int32_t)i;
        dead[i] = ci->h[i * n + i] == 0.0f;
        mean += dead[i] ? 1.0 : scale * ci->h[i * n + i];
    }
    mean /= (double)n;
    if (act_order)   // insertion sort by decreasing diagonal (stable: ties keep their order)
        for (int64_t i = 1; i < n; i++) {
            const int32_t v = order[i];
            int64_t j = i;
            while (j > 0 && ci->h[(int64_t)order[j - 1] * n + order[j - 1]] < ci->h[(int64_t)v * n + v])
                order[j] = order[j - 1], j--;
            order[j] = v;
        }
    // A = J P H P^T J (processing order, reversed), dampened
    for (double extra = damp;; extra *= 10) {
        for (int64_t a = 0; a < n; a++)
            for (int64_t b = 0; b <= a; b++) {
                const int64_t i = order[n - 1 - a], j = order[n - 1 - b];
                const double h = i == j ? (dead[i] ? 1.0 : scale * ci->h[i * n + i])
                                        : scale * ci->h[LLM__MIN(i, j) * n + LLM__MAX(i, j)];
                A[a * n + b] = h + (a == b ? extra * mean : 0.0);
            }
        bool pd = true;   // Cholesky, lower, in place: A = L L^T
        for (int64_t i = 0; i < n && pd; i++)
            for (int64_t j = 0; j <= i; j++) {
                const double s = A[i * n + j] - llm__dot_f64(A + i * n, A + j * n, j);
                if (i == j) {
                    if (!(s > 0)) { pd = false; break; }
                    A[i * n + i] = sqrt(s);
                } else {
                    A[i * n + j] = s / A[j * n + j];
                }
            }
        if (pd) break;
        if (extra > 1e6) { free(A); return false; }   // not finite (NaN activations): no factor
        // not positive definite (H of rank < n in floating point): dampen more
    }
    // M = L^-1 (lower), row by row: M[i][j] = -(sum_{k=j..i-1} L[i][k] M[k][j]) / L[i][i], into the
    // upper triangle of A transposed (A[j][i] = M[i][j], i > j) so that L stays readable and both
    // factors of each sum lie contiguous (L[i][j..i-1] and M[j..i-1][j] = A[j][j..i-1]); M[j][j] = 1 / L[j][j]
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++) {
            const double tail = llm__dot_f64(A + i * n + j + 1, A + j * n + j + 1, i - 1 - j);
            A[j * n + i] = -(A[i * n + j] / A[j * n + j] + tail) / A[i * n + i];
        }
    // U = J M J: U[a][b] = M[n-1-a][n-1-b] for b >= a; the diagonal is 1 / L's
    for (int64_t a = 0; a < n; a++)
        for (int64_t b = 0; b < n; b++) {
            const int64_t i = n - 1 - a, j = n - 1 - b;   // M[i][j], j <= i
            U[a * n + b] = b < a ? 0.0f : (float)(i == j ? 1.0 / A[i * n + i] : A[j * n + i]);
        }
    free(A);
    return true;
}

// A group's scale and zero point. GPTQ's quantizer (zero_in_range): the range [min(x, 0),
// max(x, 0)] (symmetric: +-max|x|; all zero: [-1, 1]); AWQ's: [min x, max x]; either over
// 2^bits - 1 steps, at least 1e-5 wide. The scale rounded to fp16 (as checkpoints store it); the
// zero point in [zmin, 2^bits - 1].
static void llm__gq_params(const float *x, int64_t n, int bits, bool sym, bool zero_in_range, int zmin, float *scale,
                           int *zero) {
    const int maxq = (1 << bits) - 1;
    float lo = zero_in_range ? 0.0f : INFINITY, hi = zero_in_range ? 0.0f : -INFINITY;
    for (int64_t i = 0; i < n; i++) lo = LLM__MIN(lo, x[i]), hi = LLM__MAX(hi, x[i]);
    if (sym) {
        hi = LLM__MAX(-lo, hi);
        if (lo < 0.0f) lo = -hi;
    }
    if (zero_in_range && lo == 0.0f && hi == 0.0f) lo = -1.0f, hi = 1.0f;
    float s = llm__fp16_to_fp32(llm__fp32_to_fp16(LLM__MAX(hi - lo, 1e-5f) / (float)maxq));
    if (!(s > 0.0f)) s = 5.9604645e-08f;   // the least fp16
    const int z = sym ? (maxq + 1) / 2 : (int)nearbyintf(-lo / s);
    *zero = LLM__MAX(zmin, LLM__MIN(maxq, z));
    *scale = s;
}

static inline int llm__gq_round(float w, float s, int z, int maxq) {
    const int q = (int)nearbyintf(w / s) + z;
    return q < 0 ? 0 : q > maxq ? maxq : q;
}

// GPTQ of one row w (n values, in processing order; updated) into codes q (processing order) and a
// scale and zero per group of `group` processed columns.
static void llm__gptq_row(float *w, const float *U, int64_t n, int bits, int64_t group, bool sym, int zmin, uint8_t *q,
                          float *scale, int32_t *zero) {
    const int maxq = (1 << bits) - 1;
    float s = 1.0f;
    int z = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i % group == 0) {
            llm__gq_params(w + i, LLM__MIN(group, n - i), bits, sym, true, zmin, &s, &z);
            scale[i / group] = s, zero[i / group] = z;
        }
        const int qi = llm__gq_round(w[i], s, z, maxq);
        q[i] = (uint8_t)qi;
        const float err = (w[i] - s * (float)(qi - z)) / U[i * n + i];
        const float *u = U + i * n;
        for (int64_t j = i + 1; j < n; j++) w[j] -= err * u[j];
    }
}

// GPTQ of one row w (n values; updated) to a llama.cpp type, a block of columns at a time: the
// block rounded by the type's quantizer into dst, its errors solved through U's triangle for the
// block (err[k] = (e[k] - sum_{m<k} err[m] U[m][k]) / U[k][k], the column-by-column updates
// within the block) and spread over the columns after it. tmp: a block's floats, twice.
static void llm__gptq_row_type(float *w, const float *U, int64_t n, int type, uint8_t *dst, float *tmp) {
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    const int64_t bs = ti->blck;
    float *err = tmp + bs;
    for (int64_t k0 = 0; k0 < n; k0 += bs) {
        uint8_t *blk = dst + (size_t)(k0 / bs) * ti->block_bytes;
        llm__quantize_row(type, w + k0, blk, bs);
        llm__dequantize_row(type, blk, tmp, bs);
        for (int64_t k = 0; k < bs; k++) {
            double e = (double)w[k0 + k] - tmp[k];
            for (int64_t m = 0; m < k; m++) e -= (double)err[m] * U[(k0 + m) * n + k0 + k];
            err[k] = (float)(e / U[(k0 + k) * n + k0 + k]);
        }
        for (int64_t m = 0; m < bs; m++) {
            const float *u = U + (k0 + m) * n;
            for (int64_t j = k0 + bs; j < n; j++) w[j] -= err[m] * u[j];
        }
    }
}

// --- the matrices of a calibrated quantization ---

// Removes directory d and the regular files in it (a checkpoint that was not completed).
void llm__rm_dir(const char *d) {
    DIR *dir = opendir(d);
    char path[4200];
    for (struct dirent *de; dir && (de = readdir(dir)) != NULL;)
        if (de->d_name[0] != '.' && snprintf(path, sizeof(path), "%s/%s", d, de->d_name) < (int)sizeof(path))
            remove(path);
    if (dir) closedir(dir);
    rmdir(d);
}

int llm__cq_slot(const char *name, bool *qk) {
    static const struct { const char *sfx; int slot; bool qk; } map[] = {
        {".attn_q.weight", LLM__CAL_ATTN_IN, true},   {".attn_k.weight", LLM__CAL_ATTN_IN, true},
        {".attn_v.weight", LLM__CAL_ATTN_IN, false},  {".attn_qkv.weight", LLM__CAL_ATTN_IN, false},
        {".attn_output.weight", LLM__CAL_ATTN_OUT, false}, {".ffn_gate.weight", LLM__CAL_FFN_IN, false},
        {".ffn_up.weight", LLM__CAL_FFN_IN, false},   {".ffn_down.weight", LLM__CAL_FFN_ACT, false},
    };
    const size_t n = strlen(name);
    for (size_t i = 0; i < LLM__ARRAY_LEN(map); i++) {
        const size_t k = strlen(map[i].sfx);
        if (n > k && !strcmp(name + n - k, map[i].sfx)) { *qk = map[i].qk; return map[i].slot; }
    }
    return -1;
}

static struct llm__qmat *llm__cq_find(struct llm__cq *c, int layer, const char *what) {
    char name[64];
    snprintf(name, sizeof(name), "blk.%d.%s.weight", layer, what);
    for (int i = 0; i < c->n_mats; i++)
        if (!strcmp(c->g->tensors[c->mats[i].tensor].name, name)) return &c->mats[i];
    return NULL;
}

// The f32 values of a matrix (dequantized from its file type).
bool llm__cq_load(struct llm__cq *c, struct llm__qmat *mt) {
    const struct llm__gguf_tensor *t = &c->g->tensors[mt->tensor];
    if (!(mt->w = malloc(sizeof(float) * (size_t)(mt->rows * mt->n)))) return false;
    const size_t rb = llm__row_bytes((int)t->type, mt->n);
    for (int64_t r = 0; r < mt->rows; r++)
        llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)r * rb, mt->w + r * mt->n, mt->n);
    return true;
}

static bool llm__cq_alloc_out(struct llm__cq *c, struct llm__qmat *mt) {
    if (!c->hf) return (mt->data = malloc(llm__row_bytes(mt->type, mt->n) * (size_t)mt->rows)) != NULL;
    const int64_t ng = (mt->n + c->group - 1) / c->group;
    mt->q = malloc((size_t)(mt->rows * mt->n));
    mt->scale = malloc(sizeof(float) * (size_t)(mt->rows * ng));
    mt->zero = malloc(sizeof(int32_t) * (size_t)(mt->rows * ng));
    return mt->q && mt->scale && mt->zero;
}

void llm__cq_progress(struct llm__cq *c, const struct llm__qmat *mt) {
    c->done += (double)(mt->rows * mt->n);
    if (c->p->progress) c->p->progress(c->p->progress_user, c->done / c->total, c->g->tensors[mt->tensor].name);
}

// --- GPTQ of a layer's matrices ---

struct llm__gptq_job {
    struct llm__cq *c;
    struct llm__qmat *mt;
    const float *U;
    const int32_t *order;
    const uint8_t *dead;
    bool fail;
};

static void llm__gptq_worker(void *arg, int ith, int nth) {
    struct llm__gptq_job *j = arg;
    struct llm__qmat *mt = j->mt;
    const int64_t n = mt->n, ng = (n + j->c->group - 1) / j->c->group;
    int64_t r0, r1;
    llm__split(mt->rows, ith, nth, &r0, &r1);
    float *wp = malloc(sizeof(float) * (size_t)(n + 2 * 256));
    uint8_t *qp = malloc((size_t)n);
    if (!wp || !qp) { j->fail = true; free(wp); free(qp); return; }
    for (int64_t r = r0; r < r1; r++) {
        const float *w = mt->w + r * n;
        for (int64_t k = 0; k < n; k++) wp[k] = j->dead[j->order[k]] ? 0.0f : w[j->order[k]];
        if (j->c->hf) {
            llm__gptq_row(wp, j->U, n, j->c->bits, j->c->group, false, 0, qp, mt->scale + r * ng, mt->zero + r * ng);
            for (int64_t k = 0; k < n; k++) mt->q[r * n + j->order[k]] = qp[k];
        } else {
            llm__gptq_row_type(wp, j->U, n, mt->type, mt->data + (size_t)r * llm__row_bytes(mt->type, n), wp + n);
        }
    }
    free(wp);
    free(qp);
}

enum llm_status llm__cq_gptq_layer(struct llm__cq *c, int layer, struct llm__pool *pool, struct llm__err *e) {
    for (int slot = 0; slot < LLM__CAL_SLOTS; slot++) {
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + slot];
        bool any = false;
        for (int i = 0; i < c->n_mats; i++) any |= c->mats[i].layer == layer && c->mats[i].slot == slot;
        if (!any) continue;
        if (!ci->h || ci->tokens == 0)
            return llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d's inputs were not seen", layer);
        const int64_t n = ci->n;
        float *U = malloc(sizeof(float) * (size_t)n * (size_t)n);
        int32_t *order = malloc(sizeof(int32_t) * (size_t)n);
        uint8_t *dead = malloc((size_t)n);
        const bool act = c->hf && c->p->act_order;
        if (!U || !order || !dead || !llm__gptq_factor(ci, c->p->damp > 0 ? c->p->damp : 0.01, act, order, dead, U)) {
            const bool mem = !U || !order || !dead;
            free(U), free(order), free(dead);
            return mem ? llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory")
                       : llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d: the inputs' X X^T has no Cholesky factor "
                                   "(not finite: the model's activations overflow?)", layer);
        }
        enum llm_status st = LLM_OK;
        for (int i = 0; i < c->n_mats && !st; i++) {
            struct llm__qmat *mt = &c->mats[i];
            if (mt->layer != layer || mt->slot != slot) continue;
            if (mt->n != n) { st = llm__fail(e, LLM_ERR_FORMAT, "quantize: '%s' has %lld columns, its input %lld",
                                             c->g->tensors[mt->tensor].name, (long long)mt->n, (long long)n); break; }
            if (!llm__cq_load(c, mt) || !llm__cq_alloc_out(c, mt)) {
                st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
                break;
            }
            if (act) {
                if (!(mt->g_idx = malloc(sizeof(int32_t) * (size_t)n))) {
                    st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
                    break;
                }
                for (int64_t k = 0; k < n; k++) mt->g_idx[order[k]] = (int32_t)(k / c->group);
            }
            struct llm__gptq_job job = {c, mt, U, order, dead, false};
            llm__pool_run(pool, llm__gptq_worker, &job);
            if (job.fail) st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
            free(mt->w);
            mt->w = NULL;
            llm__cq_progress(c, mt);
        }
        free(U), free(order), free(dead);
        if (st) return st;
    }
    return LLM_OK;
}

// --- AWQ of a layer's matrices ---

// w (n) rounded and back: hf, AWQ's groups (asymmetric over [min, max]); GGUF, the type's
// quantizer. tmp: a row of the type.
static void llm__awq_qdq(const struct llm__cq *c, int type, const float *w, int64_t n, float *out, uint8_t *tmp) {
    if (!c->hf) {
        llm__quantize_row(type, w, tmp, n);
        llm__dequantize_row(type, tmp, out, n);
        return;
    }
    const int maxq = (1 << c->bits) - 1;
    for (int64_t g0 = 0; g0 < n; g0 += c->group) {
        const int64_t len = LLM__MIN(c->group, n - g0);
        float s;
        int z;
        llm__gq_params(w + g0, len, c->bits, false, false, 0, &s, &z);
        for (int64_t i = g0; i < g0 + len; i++) out[i] = s * (float)(llm__gq_round(w[i], s, z, maxq) - z);
    }
}

struct llm__awq_job {
    const struct llm__cq *c;
    struct llm__qmat *const *lin;
    int nl;
    const float *s;            // (n) the scales tried; NULL: clip search
    const struct llm__cal_in *ci;
    const float *sinv;         // clip search: (n) 1 / the scales the columns were multiplied by (the
                               // samples are the inputs before the scaling); NULL: none
    double part[LLM__MAX_THREADS_AWQ];
    bool fail;
};

// The squared error of the scaled, quantized matrices' outputs on the sampled tokens, over a share
// of their rows.
static void llm__awq_loss_worker(void *arg, int ith, int nth) {
    struct llm__awq_job *j = arg;
    const int64_t n = j->ci->n;
    int64_t total = 0;
    for (int k = 0; k < j->nl; k++) total += j->lin[k]->rows;
    int64_t r0, r1;
    llm__split(total, ith, nth, &r0, &r1);
    float *buf = malloc(sizeof(float) * (size_t)n * 3);
    uint8_t *tmp = malloc(llm__row_bytes(LLM__TYPE_F32, n));
    if (!buf || !tmp) { j->fail = true; free(buf); free(tmp); return; }
    float *ws = buf, *dq = buf + n, *d = buf + 2 * n;
    double err = 0;
    for (int64_t gr = r0; gr < r1; gr++) {
        int k = 0;
        int64_t r = gr;
        while (r >= j->lin[k]->rows) r -= j->lin[k]->rows, k++;
        const struct llm__qmat *mt = j->lin[k];
        const float *w = mt->w + r * n;
        for (int64_t i = 0; i < n; i++) ws[i] = w[i] * j->s[i];
        llm__awq_qdq(j->c, mt->type, ws, n, dq, tmp);
        for (int64_t i = 0; i < n; i++) d[i] = w[i] - dq[i] / j->s[i];
        for (int t = 0; t < j->ci->n_xs; t++) {
            float v;
            j->c->cal.dot(n, &v, d, j->ci->xs + (size_t)t * (size_t)n);
            err += (double)v * v;
        }
    }
    j->part[ith] = err;
    free(buf);
    free(tmp);
}

// Clipping: each group (hf) or block (GGUF) of each row of lin[0] limited to +-(1 - k/20) of its
// largest magnitude, k = 0..9, the k whose group outputs on the samples err least.
static void llm__awq_clip_worker(void *arg, int ith, int nth) {
    struct llm__awq_job *j = arg;
    struct llm__qmat *mt = j->lin[0];
    const int64_t n = mt->n, gs = j->c->hf ? LLM__MIN(j->c->group, n) : llm__type_info((uint32_t)mt->type)->blck;
    const int S = j->ci->n_xs;
    int64_t r0, r1;
    llm__split(mt->rows, ith, nth, &r0, &r1);
    float *buf = malloc(sizeof(float) * (size_t)(3 * gs + S + 1));
    uint8_t *tmp = malloc(llm__row_bytes(LLM__TYPE_F32, gs));
    if (!buf || !tmp) { j->fail = true; free(buf); free(tmp); return; }
    float *cur = buf, *dq = buf + gs, *org = buf + 3 * gs;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t g0 = 0; g0 + gs <= n; g0 += gs) {
            float *w = mt->w + r * n + g0, amax = 0.0f;
            for (int64_t i = 0; i < gs; i++) amax = LLM__MAX(amax, fabsf(w[i]));
            if (amax == 0.0f) continue;
            // outputs on the samples, x / s against the scaled columns: of w, and of each trial's values
            const float *si = j->sinv ? j->sinv + g0 : NULL;
            for (int64_t i = 0; i < gs; i++) cur[i] = si ? w[i] * si[i] : w[i];
            for (int t = 0; t < S; t++) j->c->cal.dot(gs, &org[t], cur, j->ci->xs + (size_t)t * (size_t)n + g0);
            double best = INFINITY;
            float best_mx = amax;
            for (int k = 0; k < 10; k++) {
                const float mx = amax * (1.0f - (float)k / 20.0f);
                for (int64_t i = 0; i < gs; i++) cur[i] = LLM__MAX(-mx, LLM__MIN(mx, w[i]));
                llm__awq_qdq(j->c, mt->type, cur, gs, dq, tmp);
                for (int64_t i = 0; si && i < gs; i++) dq[i] *= si[i];
                double err = 0;
                for (int t = 0; t < S; t++) {
                    float v;
                    j->c->cal.dot(gs, &v, dq, j->ci->xs + (size_t)t * (size_t)n + g0);
                    err += ((double)v - org[t]) * ((double)v - org[t]);
                }
                if (err < best) best = err, best_mx = mx;
            }
            for (int64_t i = 0; i < gs; i++) w[i] = LLM__MAX(-best_mx, LLM__MIN(best_mx, w[i]));
        }
    free(buf);
    free(tmp);
}

static double llm__awq_loss(struct llm__cq *c, struct llm__pool *pool, struct llm__qmat *const *lin, int nl,
                            const float *s, const struct llm__cal_in *ci, bool *fail) {
    struct llm__awq_job job = {c, lin, nl, s, ci, NULL, {0}, false};
    llm__pool_run(pool, llm__awq_loss_worker, &job);
    double sum = 0;
    for (int i = 0; i < LLM__MAX_THREADS_AWQ; i++) sum += job.part[i];
    *fail |= job.fail;
    return sum;
}

// The scales of one input (AWQ, see the head of src/calib.c) into s; false: out of memory.
static bool llm__awq_search(struct llm__cq *c, struct llm__pool *pool, struct llm__qmat *const *lin, int nl,
                            const struct llm__cal_in *ci, float *s) {
    const int64_t n = ci->n;
    double *wm = calloc((size_t)n, sizeof(double));
    float *xm = malloc(sizeof(float) * (size_t)n), *try = malloc(sizeof(float) * (size_t)n);
    bool fail = !wm || !xm || !try;
    int64_t rows = 0;
    const int64_t gs = c->hf ? LLM__MIN(c->group, n) : 32;   // w relative to its group's largest
    for (int k = 0; k < nl && !fail; k++, rows += lin[k - 1]->rows)
        for (int64_t r = 0; r < lin[k]->rows; r++)
            for (int64_t g0 = 0; g0 < n; g0 += gs) {
                const float *w = lin[k]->w + r * n + g0;
                const int64_t len = LLM__MIN(gs, n - g0);
                float mx = 0.0f;
                for (int64_t i = 0; i < len; i++) mx = LLM__MAX(mx, fabsf(w[i]));
                for (int64_t i = 0; i < len; i++) wm[g0 + i] += fabsf(w[i]) / (mx + 1e-6f);
            }
    double best = INFINITY;
    for (int64_t i = 0; i < n && !fail; i++)
        s[i] = 1.0f, xm[i] = (float)(ci->abs_sum[i] / (double)LLM__MAX(ci->tokens, 1));
    if (!fail) best = llm__awq_loss(c, pool, lin, nl, s, ci, &fail);   // no scaling at all: kept unless beaten
    for (int g = 0; g < 20 && !fail; g++) {
        const double a = g / 20.0;
        float lo = INFINITY, hi = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const double v = pow((double)xm[i], a) / (pow(wm[i] / (double)LLM__MAX(rows, 1), 1.0 - a) + 1e-4);
            try[i] = (float)LLM__MAX(v, 1e-4);
            lo = LLM__MIN(lo, try[i]), hi = LLM__MAX(hi, try[i]);
        }
        const float norm = sqrtf(lo * hi);
        for (int64_t i = 0; i < n; i++) try[i] /= norm;
        const double loss = llm__awq_loss(c, pool, lin, nl, try, ci, &fail);
        if (loss < best) best = loss, memcpy(s, try, sizeof(float) * (size_t)n);
    }
    free(wm), free(xm), free(try);
    return !fail;
}

// A norm's or bias's values (f32), for AWQ to divide: c->vecs[tensor], made on first use.
static float *llm__cq_vec(struct llm__cq *c, const char *name) {
    const struct llm__gguf_tensor *t = llm__gguf_find_tensor(c->g, name);
    if (!t) return NULL;
    const int64_t i = t - c->g->tensors;
    if (!c->vecs[i] && (c->vecs[i] = malloc(sizeof(float) * (size_t)t->ne[0])))
        llm__dequantize_row((int)t->type, t->data, c->vecs[i], t->ne[0]);
    return c->vecs[i];
}

// Round-to-nearest of mt's values (hf: groups over [min, max], zero points at least zmin; GGUF:
// the type's quantizer) into its outputs.
bool llm__cq_round(struct llm__cq *c, struct llm__qmat *mt, int zmin) {
    if (!llm__cq_alloc_out(c, mt)) return false;
    const int64_t n = mt->n, ng = (n + c->group - 1) / c->group;
    const int maxq = (1 << c->bits) - 1;
    for (int64_t r = 0; r < mt->rows; r++) {
        const float *w = mt->w + r * n;
        if (!c->hf) {
            llm__quantize_row(mt->type, w, mt->data + (size_t)r * llm__row_bytes(mt->type, n), n);
            continue;
        }
        for (int64_t g0 = 0; g0 < n; g0 += c->group) {
            const int64_t len = LLM__MIN(c->group, n - g0);
            float s;
            int z;
            llm__gq_params(w + g0, len, c->bits, false, false, zmin, &s, &z);
            mt->scale[r * ng + g0 / c->group] = s, mt->zero[r * ng + g0 / c->group] = z;
            for (int64_t j = g0; j < g0 + len; j++) mt->q[r * n + j] = (uint8_t)llm__gq_round(w[j], s, z, maxq);
        }
    }
    return true;
}

// AWQ's last step for a layer's matrices, scaled: each but q, k and a fused qkv clipped (sinv: per
// input, 1 / the scales its columns were multiplied by, or NULL), then each rounded.
static enum llm_status llm__awq_clip_round(struct llm__cq *c, int layer, const struct llm__qmat *qkv,
                                           float *const *sinv, struct llm__pool *pool, struct llm__err *e) {
    for (int i = 0; i < c->n_mats; i++) {
        struct llm__qmat *mt = &c->mats[i];
        if (mt->layer != layer) continue;
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + mt->slot];
        if (!mt->qk && mt != qkv && ci->n == mt->n && ci->n_xs > 0) {
            struct llm__qmat *one[1] = {mt};
            struct llm__awq_job job = {c, one, 1, NULL, ci, sinv[mt->slot], {0}, false};
            llm__pool_run(pool, llm__awq_clip_worker, &job);
            if (job.fail) return llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
        }
        if (!llm__cq_round(c, mt, 0)) return llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
        llm__cq_progress(c, mt);
    }
    return LLM_OK;
}

// AWQ of a layer's matrices (see the head of src/calib.c): per input, the scales searched and
// folded into the norm or matrix before; then clipping and rounding.
enum llm_status llm__cq_awq_layer(struct llm__cq *c, int layer, struct llm__pool *pool, struct llm__err *e) {
    struct llm__qmat *q = llm__cq_find(c, layer, "attn_q"), *k = llm__cq_find(c, layer, "attn_k");
    struct llm__qmat *v = llm__cq_find(c, layer, "attn_v"), *qkv = llm__cq_find(c, layer, "attn_qkv");
    struct llm__qmat *o = llm__cq_find(c, layer, "attn_output"), *gate = llm__cq_find(c, layer, "ffn_gate");
    struct llm__qmat *up = llm__cq_find(c, layer, "ffn_up"), *down = llm__cq_find(c, layer, "ffn_down");
    for (int i = 0; i < c->n_mats; i++)
        if (c->mats[i].layer == layer && !llm__cq_load(c, &c->mats[i]))
            return llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
    char name[64];
    struct {
        struct llm__qmat *lin[3];
        int nl, slot;
        const char *norm;          // the norm before (a vector), or
        struct llm__qmat *prev;    // the matrix before: its rows [row0, row0 + n)
        int64_t row0;
        const char *bias;          // prev's bias, divided too
    } grp[4] = {
        {{qkv ? qkv : q, qkv ? NULL : k, qkv ? NULL : v}, qkv ? 1 : 3, LLM__CAL_ATTN_IN, "attn_norm", NULL, 0, NULL},
        {{o, NULL, NULL}, 1, LLM__CAL_ATTN_OUT, NULL, v && o && v->rows == o->n ? v : NULL, 0, "attn_v"},
        {{gate ? gate : up, gate ? up : NULL, NULL}, gate ? 2 : 1, LLM__CAL_FFN_IN, "ffn_norm", NULL, 0, NULL},
        {{down, NULL, NULL}, 1, LLM__CAL_FFN_ACT, NULL, up, gate || !down ? 0 : down->n, NULL},
    };
    float *sinv[LLM__CAL_SLOTS] = {NULL, NULL, NULL, NULL};   // each input's 1 / scales, for the clipping
    enum llm_status st = LLM_OK;
    for (int gi = 0; gi < 4; gi++) {
        bool ok = true;
        for (int i = 0; i < grp[gi].nl; i++) ok &= grp[gi].lin[i] != NULL;
        float *norm = NULL;
        if (grp[gi].norm) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", layer, grp[gi].norm);
            ok &= (norm = llm__cq_vec(c, name)) != NULL;
            if (!norm && llm__gguf_find_tensor(c->g, name)) {
                st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
                goto done;
            }
        } else {
            ok &= grp[gi].prev && grp[gi].prev->rows >= grp[gi].row0 + grp[gi].lin[0]->n;
        }
        if (!ok) continue;   // nothing to fold the scales into (e.g. v and o under grouped-query attention)
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + grp[gi].slot];
        const int64_t n = grp[gi].lin[0]->n;
        if (ci->n != n || ci->n_xs == 0) {
            st = llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d's inputs were not seen", layer);
            goto done;
        }
        float *s = malloc(sizeof(float) * (size_t)n);
        if (!s || !llm__awq_search(c, pool, grp[gi].lin, grp[gi].nl, ci, s) ||
            !(sinv[grp[gi].slot] = malloc(sizeof(float) * (size_t)n))) {
            free(s);
            st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
            goto done;
        }
        for (int64_t j = 0; j < n; j++) sinv[grp[gi].slot][j] = 1.0f / s[j];
        for (int i = 0; i < grp[gi].nl; i++)
            for (int64_t r = 0; r < grp[gi].lin[i]->rows; r++)
                for (int64_t j = 0; j < n; j++) grp[gi].lin[i]->w[r * n + j] *= s[j];
        if (norm) {
            for (int64_t j = 0; j < n; j++) norm[j] /= s[j];
        } else {
            struct llm__qmat *pv = grp[gi].prev;
            for (int64_t j = 0; j < n; j++)
                for (int64_t i = 0; i < pv->n; i++) pv->w[(grp[gi].row0 + j) * pv->n + i] /= s[j];
            float *bias = NULL;
            if (grp[gi].bias) {
                snprintf(name, sizeof(name), "blk.%d.%s.bias", layer, grp[gi].bias);
                if (llm__gguf_find_tensor(c->g, name) && !(bias = llm__cq_vec(c, name))) {
                    free(s);
                    st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
                    goto done;
                }
            }
            for (int64_t j = 0; bias && j < n; j++) bias[grp[gi].row0 + j] /= s[j];
        }
        free(s);
    }
    st = llm__awq_clip_round(c, layer, qkv, sinv, pool, e);
done:
    for (int i = 0; i < LLM__CAL_SLOTS; i++) free(sinv[i]);
    if (st) return st;
    for (int i = 0; i < c->n_mats; i++)
        if (c->mats[i].layer == layer) free(c->mats[i].w), c->mats[i].w = NULL;
    return LLM_OK;
}
