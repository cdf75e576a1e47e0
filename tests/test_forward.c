// The engine's forward pass against a plain float64 reference transformer written here from the
// GGUF tensors (dequantized): logits of every position of a prompt must agree. F32 weights with
// an F32 KV cache must match to 1e-4 relative; quantized types and the half-precision cache are
// held to looser bounds that still catch any wrong index, layout or formula.
#include "../llm.c"
#include "test.h"

struct ref {
    int arch_qwen2, n_vocab, E, L, H, HKV, hd, F, n_rot;
    double eps, base;
    double *tok, *out, *onorm, *ff;
    struct { double *an, *wq, *wk, *wv, *bq, *bk, *bv, *wo, *fn, *wg, *wu, *wd; } *l;
};

static double *ref_tensor(const struct llm__gguf *g, const char *name, int64_t *n_out) {
    const struct llm__gguf_tensor *t = llm__gguf_find_tensor(g, name);
    if (!t) return NULL;
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->ne[d];
    float *f = malloc((size_t)n * sizeof(float));
    double *x = malloc((size_t)n * sizeof(double));
    int64_t rows = n / t->ne[0];
    size_t rb = llm__row_bytes((int)t->type, t->ne[0]);
    for (int64_t r = 0; r < rows; r++)
        llm__dequantize_row((int)t->type, (const char *)t->data + (size_t)r * rb, f + r * t->ne[0], t->ne[0]);
    for (int64_t i = 0; i < n; i++) x[i] = f[i];
    free(f);
    if (n_out) *n_out = n;
    return x;
}

static void ref_load(struct ref *r, const llm_engine *E) {
    const struct llm__model *m = &E->model;
    const struct llm__gguf *g = &m->gguf;
    char nm[96];
    r->arch_qwen2 = m->arch == LLM__ARCH_QWEN2;
    r->n_vocab = m->n_vocab; r->E = m->n_embd; r->L = m->n_layer; r->H = m->n_head; r->HKV = m->n_head_kv;
    r->hd = m->head_dim; r->F = m->n_ff; r->n_rot = m->rope.n_rot; r->eps = m->norm_eps; r->base = m->rope.freq_base;
    r->tok = ref_tensor(g, "token_embd.weight", NULL);
    r->out = ref_tensor(g, "output.weight", NULL);
    if (!r->out) r->out = r->tok;
    r->onorm = ref_tensor(g, "output_norm.weight", NULL);
    r->ff = ref_tensor(g, "rope_freqs.weight", NULL);
    r->l = calloc((size_t)r->L, sizeof(*r->l));
    for (int i = 0; i < r->L; i++) {
#define T(f, s) (snprintf(nm, sizeof(nm), "blk.%d." s, i), r->l[i].f = ref_tensor(g, nm, NULL))
        T(an, "attn_norm.weight"); T(wq, "attn_q.weight"); T(wk, "attn_k.weight"); T(wv, "attn_v.weight");
        T(bq, "attn_q.bias"); T(bk, "attn_k.bias"); T(bv, "attn_v.bias"); T(wo, "attn_output.weight");
        T(fn, "ffn_norm.weight"); T(wg, "ffn_gate.weight"); T(wu, "ffn_up.weight"); T(wd, "ffn_down.weight");
#undef T
    }
}

static void ref_free(struct ref *r) {
    if (r->out != r->tok) free(r->out);
    free(r->tok); free(r->onorm); free(r->ff);
    for (int i = 0; i < r->L; i++) {
        free(r->l[i].an); free(r->l[i].wq); free(r->l[i].wk); free(r->l[i].wv); free(r->l[i].bq); free(r->l[i].bk);
        free(r->l[i].bv); free(r->l[i].wo); free(r->l[i].fn); free(r->l[i].wg); free(r->l[i].wu); free(r->l[i].wd);
    }
    free(r->l);
}

// y[rows] = W[rows][cols] x[cols] (+ b)
static void ref_mv(const double *W, const double *b, const double *x, double *y, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        double s = b ? b[i] : 0.0;
        for (int j = 0; j < cols; j++) s += W[(size_t)i * cols + j] * x[j];
        y[i] = s;
    }
}

static void ref_rmsnorm(const double *x, const double *w, double *y, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * sc * w[i];
}

static void ref_rope(const struct ref *r, double *x, int pos) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double theta = pos * pow(r->base, -2.0 * i / r->n_rot);
        if (r->ff) theta /= r->ff[i];
        int i0 = r->arch_qwen2 ? i : 2 * i, i1 = r->arch_qwen2 ? i + half : 2 * i + 1;
        double c = cos(theta), s = sin(theta), a = x[i0], b = x[i1];
        x[i0] = a * c - b * s;
        x[i1] = a * s + b * c;
    }
}

// logits[n][n_vocab] for every position of tokens
static void ref_forward(const struct ref *r, const int32_t *tokens, int n, double *logits) {
    const int E = r->E, Q = r->H * r->hd, KV = r->HKV * r->hd, G = r->H / r->HKV;
    double *x = calloc((size_t)n * E, sizeof(double)), *xb = malloc(sizeof(double) * (size_t)E);
    double *q = malloc(sizeof(double) * (size_t)n * Q), *k = malloc(sizeof(double) * (size_t)n * KV);
    double *v = malloc(sizeof(double) * (size_t)n * KV), *att = malloc(sizeof(double) * (size_t)n * Q);
    double *o = malloc(sizeof(double) * (size_t)E), *g = malloc(sizeof(double) * (size_t)r->F);
    double *u = malloc(sizeof(double) * (size_t)r->F), *sc = malloc(sizeof(double) * (size_t)n);
    for (int t = 0; t < n; t++) memcpy(x + (size_t)t * E, r->tok + (size_t)tokens[t] * E, sizeof(double) * (size_t)E);
    for (int l = 0; l < r->L; l++) {
        for (int t = 0; t < n; t++) {
            ref_rmsnorm(x + (size_t)t * E, r->l[l].an, xb, E, r->eps);
            ref_mv(r->l[l].wq, r->l[l].bq, xb, q + (size_t)t * Q, Q, E);
            ref_mv(r->l[l].wk, r->l[l].bk, xb, k + (size_t)t * KV, KV, E);
            ref_mv(r->l[l].wv, r->l[l].bv, xb, v + (size_t)t * KV, KV, E);
            for (int h = 0; h < r->H; h++) ref_rope(r, q + (size_t)t * Q + h * r->hd, t);
            for (int h = 0; h < r->HKV; h++) ref_rope(r, k + (size_t)t * KV + h * r->hd, t);
        }
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < r->H; h++) {
                const double *qh = q + (size_t)t * Q + h * r->hd;
                int kh = h / G;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int i = 0; i < r->hd; i++) d += qh[i] * k[(size_t)j * KV + kh * r->hd + i];
                    sc[j] = d / sqrt((double)r->hd);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= t; j++) { sc[j] = exp(sc[j] - mx); sum += sc[j]; }
                double *ah = att + (size_t)t * Q + h * r->hd;
                for (int i = 0; i < r->hd; i++) {
                    double a = 0;
                    for (int j = 0; j <= t; j++) a += sc[j] * v[(size_t)j * KV + kh * r->hd + i];
                    ah[i] = a / sum;
                }
            }
        }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * E;
            ref_mv(r->l[l].wo, NULL, att + (size_t)t * Q, o, E, Q);
            for (int i = 0; i < E; i++) xt[i] += o[i];
            ref_rmsnorm(xt, r->l[l].fn, xb, E, r->eps);
            ref_mv(r->l[l].wg, NULL, xb, g, r->F, E);
            ref_mv(r->l[l].wu, NULL, xb, u, r->F, E);
            for (int i = 0; i < r->F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            ref_mv(r->l[l].wd, NULL, g, o, E, r->F);
            for (int i = 0; i < E; i++) xt[i] += o[i];
        }
    }
    for (int t = 0; t < n; t++) {
        ref_rmsnorm(x + (size_t)t * E, r->onorm, xb, E, r->eps);
        ref_mv(r->out, NULL, xb, logits + (size_t)t * r->n_vocab, r->n_vocab, E);
    }
    free(x); free(xb); free(q); free(k); free(v); free(att); free(o); free(g); free(u); free(sc);
}

// max |a - b| / max |b| over one row
static double rel_err(const float *a, const double *b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return num / (den > 0 ? den : 1);
}

static const char *models_dir(void) {
    const char *d = getenv("LLM_TEST_MODELS");
    return d ? d : "build/models";
}

// Evaluates the prompt in pieces of `step` tokens (exercising the cache across calls) and
// compares every position's logits with the reference.
static void check_model(const char *file, const char *kv_dtype, int threads, int step, double tol) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", models_dir(), file);
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.n_threads = threads;
    p.kv_cache_dtype = strcmp(kv_dtype, "f32") == 0 ? LLM_KV_F32 : LLM_KV_F16;
    p.block_size = 8;   // several blocks even for a short prompt
    char err[512];
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "%s: %s", path, err);
    if (!E) return;
    struct ref r;
    ref_load(&r, E);
    enum { N = 37 };
    int32_t toks[N];
    unsigned long long seed = 42;
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(test_rng_next(&seed) % (unsigned long long)r.n_vocab);
    double *want = malloc(sizeof(double) * (size_t)N * r.n_vocab);
    float *got = malloc(sizeof(float) * (size_t)N * r.n_vocab);
    ref_forward(&r, toks, N, want);
    int seq = llm_seq_new(E);
    for (int i = 0; i < N; i += step) {
        int n = N - i < step ? N - i : step;
        enum llm_status st = llm_seq_eval(E, seq, toks + i, n, got + (size_t)i * r.n_vocab, 1);
        EXPECT(st == LLM_OK, "%s: %s", file, llm_last_error(E));
    }
    double worst = 0;
    int worst_pos = 0;
    for (int t = 0; t < N; t++) {
        double e = rel_err(got + (size_t)t * r.n_vocab, want + (size_t)t * r.n_vocab, r.n_vocab);
        if (e > worst) { worst = e; worst_pos = t; }
    }
    EXPECT(worst < tol, "%s kv=%s threads=%d step=%d: logits relative error %.3g at position %d (bound %.1g)",
           file, kv_dtype, threads, step, worst, worst_pos, tol);
    printf("  %-24s kv %-3s threads %d step %2d: max relative error %.2e (bound %.0e)\n", file, kv_dtype, threads,
           step, worst, tol);
    free(want);
    free(got);
    ref_free(&r);
    llm_engine_free(E);
}

// The generator falls back per tensor as llama-quantize does: in a Q4_K_M / Q5_K_M file of
// SmolLM2's shape, rows of 576 take Q5_0 / Q5_1 (Q8_0 where the mix asks for Q6_K), rows of
// 1536 (ffn_down) keep the k-quant.
static void check_fallback_types(const char *file, int small, int big) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", models_dir(), file);
    struct llm__gguf g;
    struct llm__err e = {0};
    if (llm__gguf_open_file(&g, path, false, &e) != LLM_OK) { EXPECT(0, "%s: %s", path, e.msg); return; }
    static const struct { const char *name; int want; } cases[] = {
        {"blk.0.attn_q.weight", 0}, {"blk.0.ffn_up.weight", 0}, {"blk.1.attn_output.weight", 0},
        {"blk.0.ffn_down.weight", 1}, {"blk.1.attn_v.weight", LLM__TYPE_Q8_0}, {"token_embd.weight", LLM__TYPE_Q8_0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct llm__gguf_tensor *t = llm__gguf_find_tensor(&g, cases[i].name);
        const int want = cases[i].want == 0 ? small : cases[i].want == 1 ? big : cases[i].want;
        EXPECT(t && (int)t->type == want, "%s: %s has type %s, want %s", file, cases[i].name,
               t ? llm__type_info(t->type)->name : "(missing)", llm__type_info((uint32_t)want)->name);
    }
    llm__gguf_close(&g);
}

int main(void) {
    check_fallback_types("tiny-576-q4_k_m.gguf", LLM__TYPE_Q5_0, LLM__TYPE_Q4_K);
    check_fallback_types("tiny-576-q5_k_m.gguf", LLM__TYPE_Q5_1, LLM__TYPE_Q5_K);
    // F32: the bound of the issue; the only differences are float vs double rounding.
    check_model("tiny-f32.gguf", "f32", 1, 37, 1e-4);
    check_model("tiny-f32.gguf", "f32", 2, 5, 1e-4);
    check_model("tiny-qwen2-f32.gguf", "f32", 2, 37, 1e-4);
    check_model("tiny-llama3-f32.gguf", "f32", 2, 3, 1e-4);
    // The half-precision cache rounds K, V and q to 11 bits.
    check_model("tiny-f32.gguf", "f16", 2, 37, 5e-3);
    // F16/BF16 weights: activations are rounded to the weight type before the dot product.
    check_model("tiny-f16.gguf", "f32", 2, 37, 5e-3);
    check_model("tiny-bf16.gguf", "f32", 2, 37, 3e-2);
    // 8-bit activations against the exact dequantized weights: the rounding of activations alone
    // moves logits by a few percent in these small models (a wrong layout or scale gives O(1)).
    check_model("tiny-q8_0.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q4_0.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q4_1.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q5_0.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q5_1.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-iq4_nl.gguf", "f32", 2, 37, 0.1);
    // k-quant files with rows of 576: Q5_0 / Q5_1 / Q8_0 fallbacks next to Q4_K / Q5_K / Q6_K
    check_model("tiny-576-q4_k_m.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-576-q5_k_m.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q4_k.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q5_k.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q6_k.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q3_k.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q2_k.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-iq4_xs.gguf", "f32", 2, 37, 0.1);
    check_model("tiny-q3_k_m.gguf", "f32", 1, 5, 0.1);
    return test_summary("test_forward");
}
