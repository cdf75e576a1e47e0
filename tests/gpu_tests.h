// The GPU backends' tests against the CPU backend, shared by tests/test_vulkan.c and
// tests/test_cuda.c, which define GPU_NAME (the --backend name), GPU_LABEL (for messages) and
// GPU_KIND (the llm_backend_kind) before including it: every op on random inputs (normalised mean
// squared error, as ggml's test-backend-ops), for several shapes, at odd offsets and padded
// strides with guard words around outputs; whole models against the CPU (top-5 log-probabilities);
// the scheduler's features; the real models against llama.cpp's goldens; profiling, step limits,
// memory errors. (A program may use only some of them.)
#pragma GCC diagnostic ignored "-Wunused-function"
static double nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]); den += (double)ref[i] * ref[i]; }
    return den > 0 ? num / den : num;
}

// A tensor of rows x cols f32 values in buffer b at byte offset offs (rows nb1 bytes apart).
static struct llm__tensor ten(struct llm__buf *b, size_t offs, int64_t cols, int64_t rows, size_t nb1) {
    return (struct llm__tensor){b, offs, LLM__TYPE_F32, cols, rows, nb1};
}

static void test_ops(struct llm_backend *vk, struct llm_backend *cpu) {
    const int shapes[][2] = {{1, 1}, {7, 33}, {64, 256}, {3, 4096}, {300, 17}};
    unsigned long long seed = 11;
    for (size_t s = 0; s < LLM__ARRAY_LEN(shapes); s++) {
        const int rows = shapes[s][0], cols = shapes[s][1];
        const size_t n = (size_t)rows * cols, pad = 64;   // tensors at odd word offsets inside buffers
        float *h = malloc(sizeof(float) * (3 * n + 2 * pad + cols)), *got = malloc(sizeof(float) * n),
              *want = malloc(sizeof(float) * n);
        for (size_t i = 0; i < 3 * n + 2 * pad + cols; i++) h[i] = (float)test_rng_normal(&seed);
        struct llm__err e = {{0}, LLM_OK};
        struct llm__buf gb[2], cb[2];
        size_t bytes = sizeof(float) * (3 * n + 2 * pad + cols);
        EXPECT(vk->iface->buf_alloc(vk->ctx, &gb[0], bytes, &e) == LLM_OK, "buf_alloc: %s", e.msg);
        EXPECT(vk->iface->buf_alloc(vk->ctx, &gb[1], sizeof(float) * (n + pad), &e) == LLM_OK, "buf_alloc: %s", e.msg);
        cpu->iface->buf_alloc(cpu->ctx, &cb[0], bytes, &e);
        cpu->iface->buf_alloc(cpu->ctx, &cb[1], sizeof(float) * (n + pad), &e);
        vk->iface->upload(vk->ctx, &gb[0], 0, h, bytes);
        cpu->iface->upload(cpu->ctx, &cb[0], 0, h, bytes);
        // operands: a at word 5, b at word 5 + n + pad, w (one row) after them; dst at word 3 of buffer 1
        const size_t oa = 5 * 4, ob = (5 + n + pad) * 4, ow = (5 + 2 * n + pad) * 4, od = 3 * 4;
        const size_t nb1 = sizeof(float) * (size_t)cols;
        struct llm__step step = {0};
        for (int op = 0; op < 5; op++) {
            struct llm_backend *be[2] = {vk, cpu};
            struct llm__buf *src[2] = {&gb[0], &cb[0]}, *dst[2] = {&gb[1], &cb[1]};
            for (int k = 0; k < 2; k++) {
                struct llm__tensor d = ten(dst[k], od, cols, rows, nb1), a = ten(src[k], oa, cols, rows, nb1),
                                   b = ten(src[k], ob, cols, rows, nb1), w = ten(src[k], ow, cols, 1, nb1);
                be[k]->iface->begin_step(be[k]->ctx, &step);
                if (op == 0) be[k]->iface->add(be[k]->ctx, d, a, b);
                else if (op == 1) be[k]->iface->silu_mul(be[k]->ctx, d, a, b);
                else if (op == 2) be[k]->iface->rmsnorm(be[k]->ctx, d, a, w, 1e-5f);
                else if (op == 3) be[k]->iface->scale(be[k]->ctx, d, a, 25.3f);
                else be[k]->iface->gelu_mul(be[k]->ctx, d, a, b);
                EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
                be[k]->iface->download(be[k]->ctx, dst[k], od, k ? want : got, sizeof(float) * n);
            }
            static const char *names[] = {"add", "silu_mul", "rmsnorm", "scale", "gelu_mul"};
            double err = nmse(got, want, n);
            EXPECT(err < 1e-10, "%s %dx%d: NMSE %.3g", names[op], rows, cols, err);
            printf("  %-9s %4d x %-5d NMSE %.2e\n", names[op], rows, cols, err);
        }
        for (int k = 0; k < 2; k++) { vk->iface->buf_free(vk->ctx, &gb[k]); cpu->iface->buf_free(cpu->ctx, &cb[k]); }
        free(h);
        free(got);
        free(want);
    }
}

// gather_cols (act-order GPTQ's inputs) of 5 rows of 384 by a random permutation, at odd offsets:
// the CPU's values exactly.
static void test_gather_cols(struct llm_backend *vk, struct llm_backend *cpu) {
    enum { K = 384, T = 5 };
    unsigned long long seed = 9;
    float x[T * (K + 3)];
    int32_t perm[K + 7];
    for (int i = 0; i < T * (K + 3); i++) x[i] = (float)test_rng_normal(&seed);
    for (int k = 0; k < K; k++) perm[7 + k] = k;
    for (int k = K - 1; k > 0; k--) {   // Fisher-Yates
        int j = (int)(test_rng_next(&seed) % (unsigned)(k + 1)), t = perm[7 + k];
        perm[7 + k] = perm[7 + j], perm[7 + j] = t;
    }
    struct llm_backend *be[2] = {vk, cpu};
    float *res[2];
    int32_t tokens[T] = {0};
    struct llm__step step = {.n_tokens = T, .tokens = tokens};
    struct llm__err e = {{0}, LLM_OK};
    for (int k = 0; k < 2; k++) {
        struct llm__buf bx, bp, bd;
        be[k]->iface->buf_alloc(be[k]->ctx, &bx, sizeof(x), &e);
        be[k]->iface->buf_alloc(be[k]->ctx, &bp, sizeof(perm), &e);
        be[k]->iface->buf_alloc(be[k]->ctx, &bd, sizeof(float) * (T * K + 1), &e);
        be[k]->iface->upload(be[k]->ctx, &bx, 0, x, sizeof(x));
        be[k]->iface->upload(be[k]->ctx, &bp, 0, perm, sizeof(perm));
        struct llm__tensor tx = {&bx, 12, LLM__TYPE_F32, K, T, sizeof(float) * (K + 3)};
        struct llm__tensor tp = {&bp, 28, LLM__TYPE_I32, K, 1, sizeof(int32_t) * K};
        struct llm__tensor td = {&bd, 4, LLM__TYPE_F32, K, T, sizeof(float) * K};
        be[k]->iface->begin_step(be[k]->ctx, &step);
        be[k]->iface->gather_cols(be[k]->ctx, td, tx, tp);
        EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
        res[k] = malloc(sizeof(float) * (T * K + 1));
        be[k]->iface->download(be[k]->ctx, &bd, 0, res[k], sizeof(float) * (T * K + 1));
        be[k]->iface->buf_free(be[k]->ctx, &bx);
        be[k]->iface->buf_free(be[k]->ctx, &bp);
        be[k]->iface->buf_free(be[k]->ctx, &bd);
    }
    int wrong = 0;
    for (int i = 0; i < T; i++)
        for (int c = 0; c < K; c++) wrong += res[0][1 + i * K + c] != x[3 + i * (K + 3) + perm[7 + c]] || res[1][1 + i * K + c] != res[0][1 + i * K + c];
    EXPECT(wrong == 0, "gather_cols: %d values wrong", wrong);
    printf("  gather_cols %d rows of %d: %s\n", T, K, wrong ? "wrong" : "exact");
    free(res[0]);
    free(res[1]);
}

// Embedding rows of every supported table type, and get_rows, against the CPU backend.
static void test_rows(struct llm_backend *vk, struct llm_backend *cpu) {
    static const int types[] = {LLM__TYPE_F32,  LLM__TYPE_F16,  LLM__TYPE_BF16, LLM__TYPE_Q8_0,
                                LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1,
                                LLM__TYPE_IQ4_NL, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K,
                                LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_IQ4_XS, LLM__TYPE_G4_32,
                                LLM__TYPE_G4_64, LLM__TYPE_G4_128, LLM__TYPE_G8_32, LLM__TYPE_G8_64, LLM__TYPE_G8_128};
    const int64_t cols = 256, rows = 50;
    unsigned long long seed = 5;
    float *f = malloc(sizeof(float) * (size_t)(cols * rows));
    for (int64_t i = 0; i < cols * rows; i++) f[i] = (float)test_rng_normal(&seed);
    int32_t tokens[9] = {3, 0, 49, 3, 17, 25, 8, 8, 1}, out_rows[4] = {8, 0, 3, 5};
    struct llm__step step = {.n_tokens = 9, .tokens = tokens, .n_out = 4, .out_rows = out_rows};
    struct llm__err e = {{0}, LLM_OK};
    for (size_t ti = 0; ti < LLM__ARRAY_LEN(types); ti++) {
        size_t rb = llm__row_bytes(types[ti], cols);
        char *q = malloc(rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) llm__quantize_row(types[ti], f + r * cols, q + (size_t)r * rb, cols);
        struct llm_backend *be[2] = {vk, cpu};
        float *res[2];
        for (int k = 0; k < 2; k++) {
            struct llm__weight w = {0};
            struct llm__buf out;
            EXPECT(be[k]->iface->weight_load(be[k]->ctx, &w, types[ti], cols, rows, q, &e) == LLM_OK, "weight_load: %s", e.msg);
            be[k]->iface->buf_alloc(be[k]->ctx, &out, sizeof(float) * (size_t)(cols * 13), &e);
            struct llm__tensor d = {&out, 0, LLM__TYPE_F32, cols, 9, sizeof(float) * (size_t)cols};
            struct llm__tensor g = {&out, sizeof(float) * (size_t)(cols * 9), LLM__TYPE_F32, cols, 4, sizeof(float) * (size_t)cols};
            be[k]->iface->begin_step(be[k]->ctx, &step);
            be[k]->iface->embed(be[k]->ctx, d, &w);
            be[k]->iface->get_rows(be[k]->ctx, g, d);
            EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
            res[k] = malloc(sizeof(float) * (size_t)(cols * 13));
            be[k]->iface->download(be[k]->ctx, &out, 0, res[k], sizeof(float) * (size_t)(cols * 13));
            be[k]->iface->buf_free(be[k]->ctx, &out);
            be[k]->iface->weight_free(be[k]->ctx, &w);
        }
        double err = nmse(res[0], res[1], (size_t)(cols * 9)), err2 = nmse(res[0] + cols * 9, res[1] + cols * 9, (size_t)(cols * 4));
        EXPECT(err < 1e-12, "embed %s: NMSE %.3g", llm__type_info((uint32_t)types[ti])->name, err);
        EXPECT(err2 < 1e-12, "get_rows after embed %s: NMSE %.3g", llm__type_info((uint32_t)types[ti])->name, err2);
        printf("  embed     %-5s 9 rows of %d  NMSE %.2e; get_rows NMSE %.2e\n", llm__type_info((uint32_t)types[ti])->name,
               (int)cols, err, err2);
        free(res[0]);
        free(res[1]);
        free(q);
    }
    // a type without a shader is refused when loaded, not later
    struct llm__weight w = {0};
    size_t rb = llm__row_bytes(LLM__TYPE_IQ2_XXS, cols);
    char *q = calloc(rb, 1);
    EXPECT(vk->iface->weight_load(vk->ctx, &w, LLM__TYPE_IQ2_XXS, cols, 1, q, &e) == LLM_ERR_UNSUPPORTED && strstr(e.msg, "iq2_xxs"),
           "iq2_xxs weight: %s", e.msg);
    free(q);
    free(f);
}

// --- matmul, rope, kv_store + attention against the CPU backend ---
//
// Tensors sit at odd word offsets with row strides longer than their rows, in buffers filled
// with a marker first: the words between and around the rows must come back unchanged from the
// GPU backend. Besides the NMSE of the whole output, the worst NMSE of a single row is held
// to the same bound, so that a wrong row or a wrong tile edge cannot hide in a big output.

#define MARK (-1234.5f)

// The same bytes in a new buffer of each backend (be[0] Vulkan, be[1] CPU).
static void buf2_alloc(struct llm_backend *const *be, struct llm__buf *b, const void *data, size_t bytes) {
    struct llm__err e = {{0}, LLM_OK};
    for (int k = 0; k < 2; k++) {
        EXPECT(be[k]->iface->buf_alloc(be[k]->ctx, &b[k], bytes, &e) == LLM_OK, "buf_alloc %zu: %s", bytes, e.msg);
        if (data) be[k]->iface->upload(be[k]->ctx, &b[k], 0, data, bytes);
    }
}

static void buf2_free(struct llm_backend *const *be, struct llm__buf *b) {
    for (int k = 0; k < 2; k++) be[k]->iface->buf_free(be[k]->ctx, &b[k]);
}

static float *marked(size_t words) {
    float *p = malloc(sizeof(float) * words);
    for (size_t i = 0; i < words; i++) p[i] = MARK;
    return p;
}

// Error of rows x cols values at word offs, rows stride words apart: adds to the sums of the
// whole output (num, den) and raises *worst to the worst row's NMSE.
static void rows_err(const float *got, const float *want, size_t offs, int64_t rows, int64_t cols, size_t stride,
                     double *num, double *den, double *worst) {
    for (int64_t r = 0; r < rows; r++) {
        double n = 0, d = 0;
        for (int64_t c = 0; c < cols; c++) {
            double g = got[offs + (size_t)r * stride + (size_t)c], w = want[offs + (size_t)r * stride + (size_t)c];
            n += (g - w) * (g - w);
            d += w * w;
        }
        *num += n;
        *den += d;
        double row = d > 0 ? n / d : n;
        if (!(row <= *worst)) *worst = row;   // NaN sticks
    }
}

// Clears the words of a tensor (rows x cols at offs, stride apart) in a mask of the buffer.
static void unmask(char *mask, size_t offs, int64_t rows, int64_t cols, size_t stride) {
    for (int64_t r = 0; r < rows; r++) memset(mask + offs + (size_t)r * stride, 0, (size_t)cols);
}

// Words of a buffer that changed outside the tensors (mask set) compared to before.
static int changed_outside(const float *now, const float *before, const char *mask, size_t words) {
    int n = 0;
    for (size_t i = 0; i < words; i++) n += mask[i] && memcmp(&now[i], &before[i], sizeof(float)) != 0;
    return n;
}

static double final_nmse(double num, double den) { return den > 0 ? num / den : num; }

// A comparison of the Vulkan output buffer (got) with the CPU's (want) over one or more tensors
// in it: cmp_begin, cmp_tensor for each tensor, cmp_end for the NMSE of all, the worst row's,
// and the count of words outside the tensors that differ from the buffer's initial contents.
struct outcmp { double num, den, worst; char *mask; size_t words; };
static void cmp_begin(struct outcmp *c, size_t words) {
    *c = (struct outcmp){0, 0, 0, malloc(words), words};
    memset(c->mask, 1, words);
}
static void cmp_tensor(struct outcmp *c, const float *got, const float *want, size_t offs, int64_t rows, int64_t cols,
                       size_t stride) {
    rows_err(got, want, offs, rows, cols, stride, &c->num, &c->den, &c->worst);
    unmask(c->mask, offs, rows, cols, stride);
}
static double cmp_end(struct outcmp *c, const float *got, const float *before, double *worst, int *moved) {
    *moved = changed_outside(got, before, c->mask, c->words);
    *worst = c->worst;
    free(c->mask);
    return final_nmse(c->num, c->den);
}
static double cmp_one(const float *got, const float *want, const float *before, size_t words, size_t offs, int64_t rows,
                      int64_t cols, size_t stride, double *worst, int *moved) {
    struct outcmp c;
    cmp_begin(&c, words);
    cmp_tensor(&c, got, want, offs, rows, cols, stride);
    return cmp_end(&c, got, before, worst, moved);
}

static bool exact_type(int t) { return t == LLM__TYPE_F32 || t == LLM__TYPE_F16 || t == LLM__TYPE_BF16; }

// dst[j] = x @ w[j]^T for two weights of types t0, t1 (N and 3N/4 rows of K columns) on T
// tokens; the second with a bias. False when the Vulkan backend refuses a weight type (a
// failure, printed once).
static bool matmul_case(struct llm_backend *vk, struct llm_backend *cpu, int t0, int t1, int64_t K, int64_t N,
                        int64_t T, unsigned long long seed) {
    struct llm_backend *be[2] = {vk, cpu};
    const int types[2] = {t0, t1};
    const int64_t rows[2] = {N, LLM__MAX(1, N * 3 / 4)};
    char name[32];
    if (t0 == t1) snprintf(name, sizeof(name), "%s", llm__type_info((uint32_t)t0)->name);
    else snprintf(name, sizeof(name), "%s+%s", llm__type_info((uint32_t)t0)->name, llm__type_info((uint32_t)t1)->name);
    struct llm__err e = {{0}, LLM_OK};
    // weights (the CPU backend reads the host copy in place: it lives until weight_free)
    struct llm__weight w[2][2];   // [backend][weight]
    char *q[2];
    bool loaded[2][2] = {{false}}, refused = false;
    for (int j = 0; j < 2; j++) {
        float *f = malloc(sizeof(float) * (size_t)(K * rows[j]));
        for (int64_t i = 0; i < K * rows[j]; i++) f[i] = (float)test_rng_normal(&seed);
        size_t rb = llm__row_bytes(types[j], K);
        q[j] = malloc(rb * (size_t)rows[j]);
        for (int64_t r = 0; r < rows[j]; r++) llm__quantize_row(types[j], f + r * K, q[j] + (size_t)r * rb, K);
        free(f);
        for (int k = 0; k < 2 && !refused; k++) {
            memset(&w[k][j], 0, sizeof(w[k][j]));
            e.msg[0] = 0;
            enum llm_status st = be[k]->iface->weight_load(be[k]->ctx, &w[k][j], types[j], K, rows[j], q[j], &e);
            loaded[k][j] = st == LLM_OK;
            EXPECT(loaded[k][j], "%s weight_load %s %dx%d: %s", be[k]->iface->name,
                   llm__type_info((uint32_t)types[j])->name, (int)rows[j], (int)K, e.msg);
            if (st == LLM_ERR_UNSUPPORTED && k == 0) {
                printf("  matmul    %-10s not supported by the " GPU_LABEL " backend: %s\n", name, e.msg);
                refused = true;
            }
        }
    }
    if (loaded[0][0] && loaded[0][1] && loaded[1][0] && loaded[1][1]) {
        // x: T rows at word 7, K + 13 words apart; the bias after it at an odd offset
        const size_t ox = 7, sx = (size_t)K + 13, ob = ox + (size_t)T * sx + 6, xw = ob + (size_t)rows[1] + 3;
        float *xh = marked(xw);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < K; c++) xh[ox + (size_t)t * sx + (size_t)c] = (float)test_rng_normal(&seed);
        for (int64_t r = 0; r < rows[1]; r++) xh[ob + (size_t)r] = (float)test_rng_normal(&seed);
        // dst[0] at word 3, N + 5 words apart; dst[1] after it at an odd offset, 3N/4 + 9 apart
        const size_t od[2] = {3, (3 + (size_t)T * ((size_t)N + 5) + 4) | 1}, sd[2] = {(size_t)N + 5, (size_t)rows[1] + 9};
        const size_t dw = od[1] + (size_t)T * sd[1] + 5;
        float *dh = marked(dw), *out[2];
        struct llm__buf xb[2], db[2];
        buf2_alloc(be, xb, xh, sizeof(float) * xw);
        buf2_alloc(be, db, dh, sizeof(float) * dw);
        int32_t *tok = calloc((size_t)T, sizeof(int32_t));
        struct llm__step step = {.n_tokens = (int)T, .tokens = tok};
        for (int k = 0; k < 2; k++) {
            struct llm__tensor d[2], bias[2] = {{0}, ten(&xb[k], ob * 4, rows[1], 1, (size_t)rows[1] * 4)};
            for (int j = 0; j < 2; j++) d[j] = ten(&db[k], od[j] * 4, rows[j], T, sd[j] * 4);
            const struct llm__weight *wp[2] = {&w[k][0], &w[k][1]};
            be[k]->iface->begin_step(be[k]->ctx, &step);
            be[k]->iface->matmul(be[k]->ctx, 2, d, wp, bias, ten(&xb[k], ox * 4, K, T, sx * 4));
            EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
            out[k] = malloc(sizeof(float) * dw);
            be[k]->iface->download(be[k]->ctx, &db[k], 0, out[k], sizeof(float) * dw);
        }
        struct outcmp cmp;
        cmp_begin(&cmp, dw);
        for (int j = 0; j < 2; j++) cmp_tensor(&cmp, out[0], out[1], od[j], T, rows[j], sd[j]);
        double worst;
        int moved;
        const double err = cmp_end(&cmp, out[0], dh, &worst, &moved);
        // f32/f16/bf16: the same products when activations are rounded to f16/bf16 as the CPU
        // does (not rounding them is off by ~1e-8 for f16, ~1e-6 for bf16); only the order of
        // additions differs (seen: 2.5e-14). Quantized: the CPU rounds activations to Q8_0/Q8_K
        // (its AVX-512 Q8_0/Q4_0/Q4_K kernels to 8 bits in their own way); a backend that does
        // the same agrees as closely (seen for Q8_0/Q4_0: 2.4e-14), one that does not is off by
        // ~1e-5.
        const double bound = exact_type(t0) && exact_type(t1) ? 1e-9 : 5e-4;
        EXPECT(err < bound && worst < bound, "matmul %s K %d N %d T %d: NMSE %.3g, worst row %.3g (bound %.0e)", name,
               (int)K, (int)N, (int)T, err, worst, bound);
        EXPECT(moved == 0, "matmul %s K %d N %d T %d: %d words outside dst changed", name, (int)K, (int)N, (int)T, moved);
        printf("  matmul    %-10s K %4d N %3d+%-3d T %-3d NMSE %.2e  worst row %.2e  bound %.0e\n", name, (int)K,
               (int)rows[0], (int)rows[1], (int)T, err, worst, bound);
        for (int k = 0; k < 2; k++) free(out[k]);
        buf2_free(be, xb);
        buf2_free(be, db);
        free(tok);
        free(xh);
        free(dh);
    }
    for (int j = 0; j < 2; j++) {
        for (int k = 0; k < 2; k++)
            if (loaded[k][j]) be[k]->iface->weight_free(be[k]->ctx, &w[k][j]);
        free(q[j]);
    }
    return !refused;
}

// Every weight type on shapes (K, N, T) for decode (T = 1; K = 16640 is more than the GEMV keeps
// in shared memory on any device), small batches, N not a multiple of 64 (tile edges) and
// T > 64, few rows of a long K (the CUDA GEMV splits K: the last two shapes); then weights of
// different types in one call.
static void test_matmul(struct llm_backend *vk, struct llm_backend *cpu) {
    static const int types[] = {LLM__TYPE_F32,  LLM__TYPE_F16,  LLM__TYPE_BF16, LLM__TYPE_Q8_0,
                                LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1,
                                LLM__TYPE_IQ4_NL, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K,
                                LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_IQ4_XS, LLM__TYPE_G4_32,
                                LLM__TYPE_G4_64, LLM__TYPE_G4_128, LLM__TYPE_G8_32, LLM__TYPE_G8_64, LLM__TYPE_G8_128,
                                LLM__TYPE_MXFP4};
    static const int shapes[][3] = {{256, 64, 1}, {512, 96, 3}, {256, 130, 17}, {768, 67, 70}, {1024, 256, 8}, {16640, 16, 1}, {4096, 14, 5}};
    static const int mixed[][2] = {{LLM__TYPE_Q4_K, LLM__TYPE_Q6_K}, {LLM__TYPE_Q8_0, LLM__TYPE_F16},
                                   {LLM__TYPE_Q4_0, LLM__TYPE_F32}, {LLM__TYPE_Q5_0, LLM__TYPE_Q4_1}};
    unsigned long long seed = 21;
    for (size_t ti = 0; ti < LLM__ARRAY_LEN(types); ti++)
        for (size_t s = 0; s < LLM__ARRAY_LEN(shapes); s++) {
            // (the AWQ/GPTQ layouts share one shader path: decode, the GEMM and the long row)
            if (llm__is_gq(types[ti]) && s != 0 && s != 3 && s != 5) continue;
            if (!matmul_case(vk, cpu, types[ti], types[ti], shapes[s][0], shapes[s][1], shapes[s][2], seed + s)) break;
        }
    seed += LLM__ARRAY_LEN(shapes);
    for (size_t m = 0; m < LLM__ARRAY_LEN(mixed); m++) matmul_case(vk, cpu, mixed[m][0], mixed[m][1], 512, 80, 5, seed++);
}

// Copies of rows x cols random normal values (times scale) in both backends' buffers; the host copy
// (marked words around them) is returned in *h, the tensors' offset is word off, rows stride apart.
static void moe_data(struct llm_backend *const *be, struct llm__buf *b, float **h, size_t off, int64_t rows,
                     int64_t cols, size_t stride, double scale, unsigned long long *seed) {
    const size_t words = off + (size_t)rows * stride + 3;
    *h = marked(words);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) (*h)[off + (size_t)r * stride + (size_t)c] = (float)(scale * test_rng_normal(seed));
    buf2_alloc(be, b, *h, sizeof(float) * words);
}

// Runs one op on both backends (op(k): backend k's call) and compares out (rows x cols at word
// off, stride apart, in buffers of `words`) within bound, and that nothing else moved.
#define MOE_RUN(what, bound, outb, outh, words, off, rows, cols, stride, call)                                       \
    do {                                                                                                           \
        float *got_[2];                                                                                            \
        for (int k = 0; k < 2; k++) {                                                                              \
            be[k]->iface->begin_step(be[k]->ctx, &step);                                                           \
            call;                                                                                                  \
            EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "%s: end_step: %s", what, e.msg);            \
            got_[k] = malloc(sizeof(float) * (words));                                                             \
            be[k]->iface->download(be[k]->ctx, &(outb)[k], 0, got_[k], sizeof(float) * (words));                   \
        }                                                                                                          \
        double worst_;                                                                                             \
        int moved_;                                                                                                \
        const double err_ = cmp_one(got_[0], got_[1], outh, words, off, rows, cols, stride, &worst_, &moved_);     \
        EXPECT(err_ < (bound) && worst_ < (bound), "%s: NMSE %.3g, worst row %.3g (bound %.0e)", what, err_, worst_, \
               (double)(bound));                                                                                   \
        EXPECT(moved_ == 0, "%s: %d words outside the output changed", what, moved_);                              \
        printf("  %-44s NMSE %.2e  worst row %.2e  bound %.0e\n", what, err_, worst_, (double)(bound));            \
        free(got_[0]);                                                                                             \
        free(got_[1]);                                                                                             \
    } while (0)

// moe_route on T tokens of n_expert logits (token 0's all equal: ties go to the lower index;
// token 1's two equal at the top): the same experts as the CPU and weights within 1e-6, for
// softmax top-k plain, normalised, scaled, and gpt-oss's softmax over the k.
static void test_moe_route(struct llm_backend *vk, struct llm_backend *cpu) {
    struct llm_backend *be[2] = {vk, cpu};
    unsigned long long seed = 61;
    struct llm__err e = {{0}, LLM_OK};
    static const struct { int n_expert, k; bool norm, softmax_weight; float scale; } cases[] = {
        {8, 2, true, false, 0.0f}, {128, 8, true, false, 0.0f}, {60, 4, false, false, 0.0f},
        {32, 4, false, true, 0.0f}, {64, 6, true, false, 2.5f}};
    for (size_t c = 0; c < LLM__ARRAY_LEN(cases); c++) {
        const int n = cases[c].n_expert, k = cases[c].k, T = 37;
        const size_t ol = 5, sl = (size_t)n + 3, oi = 7, si = (size_t)k + 1, ow = oi + (size_t)T * si + 5, sw = (size_t)k + 2;
        float *lh;
        struct llm__buf lb[2], ob[2];
        moe_data(be, lb, &lh, ol, T, n, sl, 3.0, &seed);
        for (int x = 0; x < n; x++) lh[ol + (size_t)x] = 0.5f;
        lh[ol + sl + 3] = lh[ol + sl + 1] = 20.0f;
        for (int b = 0; b < 2; b++) be[b]->iface->upload(be[b]->ctx, &lb[b], 0, lh, sizeof(float) * (ol + (size_t)T * sl));
        const size_t words = ow + (size_t)T * sw + 3;
        float *oh = marked(words), *got[2];
        buf2_alloc(be, ob, oh, sizeof(float) * words);
        const struct llm__moe m = {n, k, cases[c].norm, cases[c].scale, cases[c].softmax_weight};
        struct llm__step step = {.n_tokens = T};
        for (int b = 0; b < 2; b++) {
            struct llm__tensor ids = {&ob[b], oi * 4, LLM__TYPE_I32, k, T, si * 4};
            be[b]->iface->begin_step(be[b]->ctx, &step);
            be[b]->iface->moe_route(be[b]->ctx, ids, ten(&ob[b], ow * 4, k, T, sw * 4), ten(&lb[b], ol * 4, n, T, sl * 4), &m);
            EXPECT(be[b]->iface->end_step(be[b]->ctx, &e) == LLM_OK, "moe_route: end_step: %s", e.msg);
            got[b] = malloc(sizeof(float) * words);
            be[b]->iface->download(be[b]->ctx, &ob[b], 0, got[b], sizeof(float) * words);
        }
        int same_ids = 0, moved = 0;
        double worst = 0;
        for (int t = 0; t < T; t++)
            for (int s = 0; s < k; s++) {
                int32_t a, b;
                memcpy(&a, &got[0][oi + (size_t)t * si + (size_t)s], 4);
                memcpy(&b, &got[1][oi + (size_t)t * si + (size_t)s], 4);
                same_ids += a == b;
                const double wa = got[0][ow + (size_t)t * sw + (size_t)s], wb = got[1][ow + (size_t)t * sw + (size_t)s];
                worst = fmax(worst, fabs(wa - wb) / fmax(fabs(wb), 1e-30));
            }
        int32_t t0[2];
        memcpy(t0, &got[1][oi], 8);
        EXPECT(t0[0] == 0 && t0[1] == 1, "moe_route: the CPU breaks ties to the lower index (%d, %d)", t0[0], t0[1]);
        for (size_t i = 0; i < words; i++) {   // nothing outside ids and wts
            const size_t a = i >= oi && i < oi + (size_t)T * si ? (i - oi) % si : SIZE_MAX;
            const size_t w = i >= ow && i < ow + (size_t)T * sw ? (i - ow) % sw : SIZE_MAX;
            if (!(a < (size_t)k || w < (size_t)k)) moved += memcmp(&got[0][i], &oh[i], 4) != 0;
        }
        EXPECT(same_ids == T * k, "moe_route %d experts top %d: %d of %d experts the same", n, k, same_ids, T * k);
        EXPECT(worst < 1e-5, "moe_route %d experts top %d: weights differ by %.3g (relative)", n, k, worst);
        EXPECT(moved == 0, "moe_route: %d words outside ids and wts changed", moved);
        printf("  moe_route %3d experts top %d%s%s%s  experts %d/%d, weights within %.1e\n", n, k,
               cases[c].norm ? " norm" : "", cases[c].softmax_weight ? " softmax-k" : "",
               cases[c].scale != 0.0f ? " scaled" : "", same_ids, T * k, worst);
        for (int b = 0; b < 2; b++) free(got[b]);
        buf2_free(be, lb);
        buf2_free(be, ob);
        free(lh);
        free(oh);
    }
}

// matmul_id of E experts (N rows of K each, stacked), k a token on T tokens routed at random
// (skew: every token's first expert is expert 3, so an expert takes more than 64 slots): gate
// and up sharing x with a bias on up, then a weight on a row per slot (as the down projection).
static void moe_matmul_case(struct llm_backend *vk, struct llm_backend *cpu, int type, int E, int64_t N, int64_t K,
                            int T, int k, bool skew, unsigned long long seed) {
    struct llm_backend *be[2] = {vk, cpu};
    struct llm__err e = {{0}, LLM_OK};
    struct llm__weight w[2][3];
    char *q[3];
    const size_t rb = llm__row_bytes(type, K);
    bool ok = true;
    for (int j = 0; j < 3; j++) {
        q[j] = malloc(rb * (size_t)(E * N));
        float *f = malloc(sizeof(float) * (size_t)K);
        for (int64_t r = 0; r < E * N; r++) {
            for (int64_t c = 0; c < K; c++) f[c] = (float)test_rng_normal(&seed);
            llm__quantize_row(type, f, q[j] + (size_t)r * rb, K);
        }
        free(f);
        for (int b = 0; b < 2; b++) {
            memset(&w[b][j], 0, sizeof(w[b][j]));
            const enum llm_status st = be[b]->iface->weight_load_experts(be[b]->ctx, &w[b][j], type, K, E * N, E, q[j], &e);
            EXPECT(st == LLM_OK, "%s weight_load_experts %s: %s", be[b]->iface->name, llm__type_info((uint32_t)type)->name,
                   e.msg);
            ok &= st == LLM_OK;
        }
    }
    if (ok) {
        // ids (int32): k distinct experts a token, at word 3, k + 2 apart
        const size_t oid = 3, sid = (size_t)k + 2, idw = oid + (size_t)T * sid + 2;
        int32_t *ih = calloc(idw, sizeof(int32_t));
        for (int t = 0; t < T; t++)
            for (int s = 0; s < k; s++) {
                int32_t x;
                bool dup;
                do {
                    x = skew && s == 0 ? 3 : (int32_t)(test_rng_next(&seed) % (unsigned long long)E);
                    dup = false;
                    for (int z = 0; z < s; z++) dup |= ih[oid + (size_t)t * sid + (size_t)z] == x;
                } while (dup);
                ih[oid + (size_t)t * sid + (size_t)s] = x;
            }
        struct llm__buf ib[2], xb[2], xsb[2], bb[2], db[2];
        buf2_alloc(be, ib, ih, sizeof(int32_t) * idw);
        float *xh, *xsh, *bh;
        const size_t ox = 7, sx = (size_t)K + 5, ob = 5, sb = (size_t)N + 3;
        moe_data(be, xb, &xh, ox, T, K, sx, 1.0, &seed);
        moe_data(be, xsb, &xsh, ox, (int64_t)T * k, K, sx, 1.0, &seed);
        moe_data(be, bb, &bh, ob, E, N, sb, 1.0, &seed);
        // outputs: gate at word 3, up after it (odd offset), N + 5 apart; the per-slot product in another buffer
        const size_t sd = (size_t)N + 5, od0 = 3, od1 = (od0 + (size_t)T * k * sd + 2) | 1, dw = od1 + (size_t)T * k * sd + 4;
        float *dh = marked(dw);
        buf2_alloc(be, db, dh, sizeof(float) * dw);
        int32_t *toks = calloc((size_t)T, sizeof(int32_t));
        struct llm__step step = {.n_tokens = T, .tokens = toks};
        char what[96];
        const double bound = type == LLM__TYPE_F32 ? 1e-9 : 5e-4;
        const int64_t TK = (int64_t)T * k;
        float *got[2];
        for (int b = 0; b < 2; b++) {
            const struct llm__tensor d[2] = {ten(&db[b], od0 * 4, N, TK, sd * 4), ten(&db[b], od1 * 4, N, TK, sd * 4)};
            const struct llm__tensor bias[2] = {{0}, ten(&bb[b], ob * 4, N, E, sb * 4)};
            const struct llm__weight *wp[2] = {&w[b][0], &w[b][1]};
            const struct llm__tensor ids = {&ib[b], oid * 4, LLM__TYPE_I32, k, T, sid * 4};
            be[b]->iface->begin_step(be[b]->ctx, &step);
            be[b]->iface->matmul_id(be[b]->ctx, 2, d, wp, bias, ten(&xb[b], ox * 4, K, T, sx * 4), ids, false);
            EXPECT(be[b]->iface->end_step(be[b]->ctx, &e) == LLM_OK, "matmul_id: end_step: %s", e.msg);
            got[b] = malloc(sizeof(float) * dw);
            be[b]->iface->download(be[b]->ctx, &db[b], 0, got[b], sizeof(float) * dw);
        }
        struct outcmp cmp;
        cmp_begin(&cmp, dw);
        cmp_tensor(&cmp, got[0], got[1], od0, TK, N, sd);
        cmp_tensor(&cmp, got[0], got[1], od1, TK, N, sd);
        double worst;
        int moved;
        double err = cmp_end(&cmp, got[0], dh, &worst, &moved);
        snprintf(what, sizeof(what), "matmul_id %s %d experts x %d, K %d, %d tokens x %d%s (gate, up + bias)",
                 llm__type_info((uint32_t)type)->name, E, (int)N, (int)K, T, k, skew ? " skewed" : "");
        EXPECT(err < bound && worst < bound, "%s: NMSE %.3g, worst row %.3g (bound %.0e)", what, err, worst, bound);
        EXPECT(moved == 0, "%s: %d words outside dst changed", what, moved);
        printf("  %-70s NMSE %.2e  worst row %.2e\n", what, err, worst);
        for (int b = 0; b < 2; b++) free(got[b]);
        // a row per slot (the down projection's input), no bias
        buf2_free(be, db);
        buf2_alloc(be, db, dh, sizeof(float) * dw);
        for (int b = 0; b < 2; b++) {
            const struct llm__tensor d = ten(&db[b], od1 * 4, N, TK, sd * 4);
            const struct llm__weight *wp[1] = {&w[b][2]};
            const struct llm__tensor ids = {&ib[b], oid * 4, LLM__TYPE_I32, k, T, sid * 4};
            be[b]->iface->begin_step(be[b]->ctx, &step);
            be[b]->iface->matmul_id(be[b]->ctx, 1, &d, wp, NULL, ten(&xsb[b], ox * 4, K, TK, sx * 4), ids, true);
            EXPECT(be[b]->iface->end_step(be[b]->ctx, &e) == LLM_OK, "matmul_id: end_step: %s", e.msg);
            got[b] = malloc(sizeof(float) * dw);
            be[b]->iface->download(be[b]->ctx, &db[b], 0, got[b], sizeof(float) * dw);
        }
        err = cmp_one(got[0], got[1], dh, dw, od1, TK, N, sd, &worst, &moved);
        snprintf(what, sizeof(what), "matmul_id %s %d experts x %d, K %d, %d tokens x %d%s (a row a slot)",
                 llm__type_info((uint32_t)type)->name, E, (int)N, (int)K, T, k, skew ? " skewed" : "");
        EXPECT(err < bound && worst < bound, "%s: NMSE %.3g, worst row %.3g (bound %.0e)", what, err, worst, bound);
        EXPECT(moved == 0, "%s: %d words outside dst changed", what, moved);
        printf("  %-70s NMSE %.2e  worst row %.2e\n", what, err, worst);
        for (int b = 0; b < 2; b++) free(got[b]);
        buf2_free(be, ib);
        buf2_free(be, xb);
        buf2_free(be, xsb);
        buf2_free(be, bb);
        buf2_free(be, db);
        free(ih);
        free(xh);
        free(xsh);
        free(bh);
        free(dh);
        free(toks);
    }
    for (int j = 0; j < 3; j++) {
        for (int b = 0; b < 2; b++)
            if (w[b][j].buf.size || w[b][j].buf.handle) be[b]->iface->weight_free(be[b]->ctx, &w[b][j]);
        free(q[j]);
    }
}

// moe_sum with and without a shared expert (and its gate), and swiglu_oai on values past its
// clamp (|x| up to ~25 against the limit 7).
static void test_moe_sum(struct llm_backend *vk, struct llm_backend *cpu) {
    struct llm_backend *be[2] = {vk, cpu};
    struct llm__err e = {{0}, LLM_OK};
    unsigned long long seed = 67;
    const int T = 19, ks = 4;
    const int64_t E = 300;
    const size_t os = 5, ss = (size_t)E + 3, ow = 3, sw = (size_t)ks + 1, osh = 9, ssh = (size_t)E + 7, og = 4, sg = 3;
    float *sh_src, *sh_w, *sh_sh, *sh_g;
    struct llm__buf sb[2], wb[2], hb[2], gb[2], db[2];
    moe_data(be, sb, &sh_src, os, (int64_t)T * ks, E, ss, 1.0, &seed);
    moe_data(be, wb, &sh_w, ow, T, ks, sw, 1.0, &seed);
    moe_data(be, hb, &sh_sh, osh, T, E, ssh, 1.0, &seed);
    moe_data(be, gb, &sh_g, og, T, 1, sg, 2.0, &seed);
    const size_t od = 7, sd = (size_t)E + 1, dw = od + (size_t)T * sd + 3;
    float *dh = marked(dw);
    buf2_alloc(be, db, dh, sizeof(float) * dw);
    struct llm__step step = {.n_tokens = T};
    for (int shared = 0; shared < 2; shared++) {
        const char *what = shared ? "moe_sum 19 tokens x 4, 300 columns, shared expert" : "moe_sum 19 tokens x 4, 300 columns";
        MOE_RUN(what, 1e-12, db, dh, dw, od, T, E, sd,
                be[k]->iface->moe_sum(be[k]->ctx, ten(&db[k], od * 4, E, T, sd * 4),
                                      ten(&sb[k], os * 4, E, (int64_t)T * 4, ss * 4), ten(&wb[k], ow * 4, 4, T, sw * 4),
                                      shared ? ten(&hb[k], osh * 4, E, T, ssh * 4) : (struct llm__tensor){0},
                                      shared ? ten(&gb[k], og * 4, 1, T, sg * 4) : (struct llm__tensor){0}));
    }
    // swiglu_oai: contiguous rows (an element-wise op), gate and up 8x normal
    float *gh, *uh;
    struct llm__buf g2[2], u2[2], d2[2];
    moe_data(be, g2, &gh, 5, T, E, (size_t)E, 8.0, &seed);
    moe_data(be, u2, &uh, 3, T, E, (size_t)E, 8.0, &seed);
    const size_t w2 = 9 + (size_t)T * (size_t)E + 3;
    float *h2 = marked(w2);
    buf2_alloc(be, d2, h2, sizeof(float) * w2);
    MOE_RUN("swiglu_oai 19 x 300 (|x| up to ~25, limit 7)", 1e-10, d2, h2, w2, 9, T, E, (size_t)E,
            be[k]->iface->swiglu_oai(be[k]->ctx, ten(&d2[k], 9 * 4, E, T, (size_t)E * 4), ten(&g2[k], 5 * 4, E, T, (size_t)E * 4),
                                     ten(&u2[k], 3 * 4, E, T, (size_t)E * 4), 1.702f, 7.0f));
    struct llm__buf *all[] = {sb, wb, hb, gb, db, g2, u2, d2};
    for (size_t i = 0; i < LLM__ARRAY_LEN(all); i++) buf2_free(be, all[i]);
    free(sh_src); free(sh_w); free(sh_sh); free(sh_g); free(dh); free(gh); free(uh); free(h2);
}

// The mixture-of-experts ops: routing, the products per expert for the types experts come in,
// the weighted sum, gpt-oss's SwiGLU.
static void test_moe(struct llm_backend *vk, struct llm_backend *cpu) {
    test_moe_route(vk, cpu);
    static const int types[] = {LLM__TYPE_F32, LLM__TYPE_Q8_0, LLM__TYPE_Q4_0, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K,
                                LLM__TYPE_Q6_K, LLM__TYPE_MXFP4};
    unsigned long long seed = 71;
    for (size_t t = 0; t < LLM__ARRAY_LEN(types); t++) {
        const int64_t K = llm__type_info((uint32_t)types[t])->blck == 256 ? 512 : 256;
        moe_matmul_case(vk, cpu, types[t], 8, 64, K, 1, 2, false, seed++);      // decode
        moe_matmul_case(vk, cpu, types[t], 8, 80, K, 5, 2, false, seed++);      // a few tokens; rows not 64s
        moe_matmul_case(vk, cpu, types[t], 16, 32, K, 100, 4, true, seed++);    // prefill, one expert past 64 slots
    }
    moe_matmul_case(vk, cpu, LLM__TYPE_Q8_0, 300, 16, 256, 40, 8, false, seed++);   // more experts than a group's threads
    moe_matmul_case(vk, cpu, LLM__TYPE_MXFP4, 8, 32, 96, 5, 2, false, seed++);      // rows of 51 bytes: unaligned
    test_moe_sum(vk, cpu);
}

// RoPE of 37 token rows at random positions 0..5000, normal and NeoX, with and without
// frequency factors, partial rotation (n_rot < head_dim).
static void test_rope(struct llm_backend *vk, struct llm_backend *cpu) {
    static const struct { int n_head, head_dim, n_rot; bool neox, ff; float base, scale; bool yarn; } cases[] = {
        {8, 64, 64, false, false, 10000.0f, 1.0f, false},  {4, 64, 64, true, false, 1000000.0f, 1.0f, false},
        {4, 128, 128, false, true, 500000.0f, 1.0f, false}, {4, 128, 128, true, true, 500000.0f, 0.25f, false},
        {2, 128, 64, true, false, 10000.0f, 1.0f, false},  {2, 64, 32, false, true, 10000.0f, 1.0f, false},
        // YaRN (gpt-oss's): the blend between the corrections' dimensions, cos and sin scaled
        {4, 64, 64, true, false, 150000.0f, 0.03125f, true}, {2, 128, 128, false, true, 10000.0f, 0.25f, true},
    };
    struct llm_backend *be[2] = {vk, cpu};
    const int64_t T = 37;
    unsigned long long seed = 31;
    int32_t pos[37], tok[37] = {0};
    for (int t = 0; t < T; t++) pos[t] = t == 0 ? 0 : t == 1 ? 5000 : (int32_t)(test_rng_next(&seed) % 5001);
    struct llm__step step = {.n_tokens = (int)T, .tokens = tok, .positions = pos};
    struct llm__err e = {{0}, LLM_OK};
    for (size_t c = 0; c < LLM__ARRAY_LEN(cases); c++) {
        const int64_t cols = (int64_t)cases[c].n_head * cases[c].head_dim;
        const size_t ox = 5, sx = (size_t)cols + 3, words = ox + (size_t)T * sx + 4, of = 3;
        float *xh = marked(words), *ffh = marked(of + (size_t)cases[c].n_rot / 2 + 2), *out[2];
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < cols; i++) xh[ox + (size_t)t * sx + (size_t)i] = (float)test_rng_normal(&seed);
        for (int i = 0; i < cases[c].n_rot / 2; i++) ffh[of + (size_t)i] = (float)(1.0 + 31.0 * test_rng_uniform(&seed));
        struct llm__buf xb[2], fb[2];
        buf2_alloc(be, xb, xh, sizeof(float) * words);
        buf2_alloc(be, fb, ffh, sizeof(float) * (of + (size_t)cases[c].n_rot / 2 + 2));
        for (int k = 0; k < 2; k++) {
            struct llm__rope r = {cases[c].n_rot, cases[c].neox, cases[c].base, cases[c].scale, {0},
                                  0.0f, 1.0f, {0, 0}};
            if (cases[c].yarn) r.ext_factor = 1.0f, r.mscale = 1.35f, r.corr_dims[0] = 4.5f, r.corr_dims[1] = 19.25f;
            if (cases[c].ff) r.freq_factors = ten(&fb[k], of * 4, cases[c].n_rot / 2, 1, sizeof(float) * (size_t)(cases[c].n_rot / 2));
            be[k]->iface->begin_step(be[k]->ctx, &step);
            be[k]->iface->rope(be[k]->ctx, ten(&xb[k], ox * 4, cols, T, sx * 4), cases[c].n_head, cases[c].head_dim, &r);
            EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
            out[k] = malloc(sizeof(float) * words);
            be[k]->iface->download(be[k]->ctx, &xb[k], 0, out[k], sizeof(float) * words);
        }
        double worst;
        int moved;
        const double err = cmp_one(out[0], out[1], xh, words, ox, T, cols, sx, &worst, &moved);
        // Angles up to 5000 rad: the CPU computes theta pair after pair in float (theta *=
        // theta_scale, as llama.cpp), the GPU may use pow() and its own sin/cos, so angles differ
        // by ~1e-4 rad. Worst row seen on lavapipe: 1.1e-8; bound 10x that.
        const double bound = 1e-7;
        char what[64];
        snprintf(what, sizeof(what), "%s hd %d rot %d%s%s%s", cases[c].neox ? "neox" : "norm", cases[c].head_dim,
                 cases[c].n_rot, cases[c].ff ? " ff" : "", cases[c].scale != 1.0f ? " scaled" : "",
                 cases[c].yarn ? " yarn" : "");
        EXPECT(err < bound && worst < bound, "rope %s: NMSE %.3g, worst row %.3g (bound %.0e)", what, err, worst, bound);
        EXPECT(moved == 0, "rope %s: %d words outside x changed", what, moved);
        printf("  rope      %-28s %d heads, %d rows  NMSE %.2e  worst row %.2e  bound %.0e\n", what, cases[c].n_head,
               (int)T, err, worst, bound);
        for (int k = 0; k < 2; k++) free(out[k]);
        buf2_free(be, xb);
        buf2_free(be, fb);
        free(xh);
        free(ffh);
    }
}

// Paged attention: sequences of ctx[s] tokens whose last n_new[s] are computed in the step
// tested (their K/V stored, then attention of each over its sequence), the earlier ones stored
// by kv_store in steps before it (at most 512 tokens each). Blocks of 16 slots are handed out
// as a random permutation of a pool with spare blocks; unused block-table entries point to a
// spare block. Unwritten cache slots hold a large value, so reading one shows.
// window > 0: sliding-window attention; softcap > 0: soft-capped scores; sinks: a sink per head
// (attention_window).
struct attn_case { const char *name; int n_seqs, ctx[4], n_new[4], window; float softcap; bool sinks; };

// The shape test_vulkan and test_cuda reserve (every test fits it: 512 tokens a step, rows of up to
// 16640), with the given heads (the default: 8 query heads, 2 KV heads of 128). A q8_0 cache's
// case reserves its own heads: kv_store quantizes head by head, with reserve's head size.
static struct llm__shape gpu_test_shape(int n_head, int n_head_kv, int head_dim) {
    return (struct llm__shape){.max_tokens = 512, .max_out = 512, .max_seqs = 4, .max_blocks = 128, .max_cols = 16640,
                               .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = head_dim, .block_size = 16,
                               .n_expert = 128, .n_expert_used = 8};
}

static void attn_case(struct llm_backend *vk, struct llm_backend *cpu, const struct attn_case *ac, int n_head,
                      int n_head_kv, int hd, int type, unsigned long long seed) {
    struct llm_backend *be[2] = {vk, cpu};
    const int bs = 16, n_kv = n_head_kv * hd, n_q = n_head * hd;
    int nblk[4], total = 0, max_blocks = 0, n_all = 0, n_old = 0;
    for (int s = 0; s < ac->n_seqs; s++) {
        nblk[s] = (ac->ctx[s] + bs - 1) / bs;
        total += nblk[s];
        max_blocks = LLM__MAX(max_blocks, nblk[s] + 1);
        n_all += ac->ctx[s];
        n_old += ac->ctx[s] - ac->n_new[s];
    }
    const int pool = total + 5, n_new = n_all - n_old;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool), *bt = malloc(sizeof(int32_t) * (size_t)(ac->n_seqs * max_blocks));
    for (int i = 0; i < pool; i++) perm[i] = i;
    for (int i = pool - 1; i > 0; i--) {
        int j = (int)(test_rng_next(&seed) % (unsigned long long)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int s = 0, next = 0; s < ac->n_seqs; s++)
        for (int b = 0; b < max_blocks; b++) bt[s * max_blocks + b] = b < nblk[s] ? perm[next++] : perm[pool - 1];
    // tokens: the earlier ones of every sequence, then the new ones
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_all), *seq = malloc(sizeof(int32_t) * (size_t)n_all),
            *slot = malloc(sizeof(int32_t) * (size_t)n_all), *tok = calloc((size_t)n_all, sizeof(int32_t));
    for (int pass = 0, i = 0; pass < 2; pass++)
        for (int s = 0; s < ac->n_seqs; s++) {
            const int first = ac->ctx[s] - ac->n_new[s];
            for (int p = pass ? first : 0; p < (pass ? ac->ctx[s] : first); p++, i++) {
                pos[i] = p;
                seq[i] = s;
                slot[i] = bt[s * max_blocks + p / bs] * bs + p % bs;
            }
        }
    // k, v rows of every token and q rows of the new ones, at odd offsets with padded strides
    const size_t sk = (size_t)n_kv + 5, sq = (size_t)n_q + 7, ok = 3, ov = (ok + (size_t)n_all * sk + 2) | 1,
                 oq = (ov + (size_t)n_all * sk + 2) | 1, osk = oq + (size_t)n_new * sq + 3, aw = osk + (size_t)n_head + 2;
    float *ah = marked(aw);
    for (int h = 0; h < n_head; h++) ah[osk + (size_t)h] = (float)(2.0 * test_rng_normal(&seed));   // (some dominate)
    for (int i = 0; i < n_all; i++)
        for (int c = 0; c < n_kv; c++) {
            ah[ok + (size_t)i * sk + (size_t)c] = (float)test_rng_normal(&seed);
            ah[ov + (size_t)i * sk + (size_t)c] = (float)test_rng_normal(&seed);
        }
    for (int i = 0; i < n_new; i++)
        for (int c = 0; c < n_q; c++) ah[oq + (size_t)i * sq + (size_t)c] = (float)test_rng_normal(&seed);
    // the caches: two layers of pool blocks, layer 1 used (as the engine's views); all 30.0
    const size_t row_bytes = llm__row_bytes(type, n_kv), layer = row_bytes * (size_t)bs * (size_t)pool;
    char *ch = malloc(2 * layer);
    const uint16_t h30 = llm__fp32_to_fp16(30.0f);
    const float f30 = 30.0f;
    for (size_t i = 0; i < 2 * layer; i += type == LLM__TYPE_F16 ? 2 : 4)
        memcpy(ch + i, type == LLM__TYPE_F16 ? (const void *)&h30 : (const void *)&f30, type == LLM__TYPE_F16 ? 2 : 4);
    const size_t oo = 5, so = (size_t)n_q + 3, ow = oo + (size_t)n_new * so + 4;
    float *oh = marked(ow), *out[2];
    struct llm__buf ab[2], kb[2], vb[2], obuf[2];
    buf2_alloc(be, ab, ah, sizeof(float) * aw);
    buf2_alloc(be, kb, ch, 2 * layer);
    buf2_alloc(be, vb, ch, 2 * layer);
    buf2_alloc(be, obuf, oh, sizeof(float) * ow);
    struct llm__err e = {{0}, LLM_OK};
    if (type == LLM__TYPE_Q8_0) {
        const struct llm__shape sh = gpu_test_shape(n_head, n_head_kv, hd);
        for (int k = 0; k < 2; k++)
            EXPECT(be[k]->iface->reserve(be[k]->ctx, &sh, &e) == LLM_OK, "reserve: %s", e.msg);
    }
    for (int k = 0; k < 2; k++) {
        struct llm__attn ap = {n_head, n_head_kv, hd, 1.0f / sqrtf((float)hd), ac->window, ac->softcap, {0}};
        if (ac->sinks) ap.sinks = ten(&ab[k], osk * 4, n_head, 1, sizeof(float) * (size_t)n_head);
        const int64_t slots = (int64_t)pool * bs;
        struct llm__tensor kc = {&kb[k], layer, type, n_kv, slots, row_bytes}, vc = {&vb[k], layer, type, n_kv, slots, row_bytes};
        // steps [a, a + n): at most 512 earlier tokens each, then the new ones with attention
        for (int a = 0; a < n_all;) {
            const int n = a < n_old ? LLM__MIN(512, n_old - a) : n_new;
            struct llm__step step = {.n_tokens = n, .tokens = tok + a, .positions = pos + a, .seq_idx = seq + a,
                                     .slot_mapping = slot + a, .n_seqs = ac->n_seqs, .max_blocks = max_blocks,
                                     .block_tables = bt, .block_size = bs};
            be[k]->iface->begin_step(be[k]->ctx, &step);
            be[k]->iface->kv_store(be[k]->ctx, kc, vc, ten(&ab[k], (ok + (size_t)a * sk) * 4, n_kv, n, sk * 4),
                                   ten(&ab[k], (ov + (size_t)a * sk) * 4, n_kv, n, sk * 4));
            if (a >= n_old)
                (ac->window || ac->softcap > 0 || ac->sinks ? be[k]->iface->attention_window : be[k]->iface->attention)(
                    be[k]->ctx, ten(&obuf[k], oo * 4, n_q, n, so * 4), ten(&ab[k], oq * 4, n_q, n, sq * 4), kc, vc, &ap);
            EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
            a += n;
        }
        out[k] = malloc(sizeof(float) * ow);
        be[k]->iface->download(be[k]->ctx, &obuf[k], 0, out[k], sizeof(float) * ow);
    }
    double worst;
    int moved;
    const double err = cmp_one(out[0], out[1], oh, ow, oo, n_new, n_q, so, &worst, &moved);
    // The same rounded inputs (queries to f16 for an f16 cache, as the CPU does); the f32 sums and
    // exponentials differ in order and implementation only. Worst row seen on lavapipe: 3e-13 in
    // one pass, 1e-12 with a flash-decoding split of 2000 keys; bound 10x that. A q8_0 cache: the
    // same rotation and quantization, so the same bytes where the device's division is exact, as
    // lavapipe's is (worst row seen: 9e-13, as f16's and f32's).
    const double bound = 1e-11;
    char what[80], ctx[40] = "";
    for (int s = 0; s < ac->n_seqs; s++)
        snprintf(ctx + strlen(ctx), sizeof(ctx) - strlen(ctx), "%s%d", s ? "," : "", ac->ctx[s]);
    snprintf(what, sizeof(what), "%-7s %s %d/%d x %d ctx %s new %d", ac->name, llm__type_info((uint32_t)type)->name, n_head,
             n_head_kv, hd, ctx, n_new);
    EXPECT(err < bound && worst < bound, "attention %s: NMSE %.3g, worst row %.3g (bound %.0e)", what, err, worst, bound);
    EXPECT(moved == 0, "attention %s: %d words outside out changed", what, moved);
    printf("  attention %-46s NMSE %.2e  worst row %.2e  bound %.0e\n", what, err, worst, bound);
    if (type == LLM__TYPE_Q8_0) {   // back to the shape of the other tests
        const struct llm__shape sh = gpu_test_shape(8, 2, 128);
        for (int k = 0; k < 2; k++)
            EXPECT(be[k]->iface->reserve(be[k]->ctx, &sh, &e) == LLM_OK, "reserve: %s", e.msg);
    }
    for (int k = 0; k < 2; k++) free(out[k]);
    buf2_free(be, ab);
    buf2_free(be, kb);
    buf2_free(be, vb);
    buf2_free(be, obuf);
    free(ah);
    free(ch);
    free(oh);
    free(perm);
    free(bt);
    free(pos);
    free(seq);
    free(slot);
    free(tok);
}

// Prefill of ragged sequences; decode of one token each, or 5 for one of them; a long context
// (flash-decoding splits), each for f16, f32 and q8_0 caches, with GQA and without.
static void test_attention(struct llm_backend *vk, struct llm_backend *cpu) {
    static const struct attn_case cases[] = {
        {"prefill", 4, {1, 17, 64, 300}, {1, 17, 64, 300}, 0, 0.0f, false},
        {"decode", 4, {2, 18, 65, 301}, {1, 1, 1, 1}, 0, 0.0f, false},
        {"mixed", 4, {2, 22, 65, 301}, {1, 5, 1, 1}, 0, 0.0f, false},
        {"long", 2, {2001, 777}, {1, 1}, 0, 0.0f, false},
        // sliding windows (a tile's queries with different first keys; flash-decoding splits of
        // the window only), soft-capping, both
        {"swa-pre", 4, {1, 17, 64, 300}, {1, 17, 64, 300}, 20, 0.0f, false},
        {"swa-mix", 4, {2, 22, 65, 301}, {1, 5, 1, 1}, 8, 0.0f, false},
        {"swa-long", 2, {2001, 777}, {1, 1}, 700, 0.0f, false},
        {"softcap", 4, {2, 22, 65, 301}, {1, 5, 1, 1}, 0, 2.0f, false},
        {"swa-cap", 4, {1, 17, 64, 300}, {1, 17, 64, 300}, 13, 1.5f, false},
        // gpt-oss's sinks: prefill tiles, decode, flash-decoding's reduction, with a window
        {"sink-pre", 4, {1, 17, 64, 300}, {1, 17, 64, 300}, 0, 0.0f, true},
        {"sink-mix", 4, {2, 22, 65, 301}, {1, 5, 1, 1}, 0, 0.0f, true},
        {"sink-lng", 2, {2001, 777}, {1, 1}, 0, 0.0f, true},
        {"sink-swa", 4, {2, 22, 65, 301}, {1, 5, 1, 1}, 8, 0.0f, true},
    };
    static const int heads[][3] = {{8, 2, 64}, {4, 4, 128}};
    static const int types[] = {LLM__TYPE_F16, LLM__TYPE_F32, LLM__TYPE_Q8_0};
    unsigned long long seed = 41;
    for (size_t c = 0; c < LLM__ARRAY_LEN(cases); c++)
        for (size_t h = 0; h < LLM__ARRAY_LEN(heads); h++)
            for (size_t t = 0; t < LLM__ARRAY_LEN(types); t++)
                attn_case(vk, cpu, &cases[c], heads[h][0], heads[h][1], heads[h][2], types[t], seed++);
}

// The test model's path in path; false (and a SKIP) when it has not been made.
// build/models/NAME.gguf, or the Hugging Face directory build/models/NAME/ for a name "hf/..."
static bool model_path(const char *name, char *path, size_t size) {
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, size, strncmp(name, "hf/", 3) == 0 ? "%s/%s/config.json" : "%s/%s.gguf", dir, name);
    FILE *f = fopen(path, "rb");
    if (f && strncmp(name, "hf/", 3) == 0) *strrchr(path, '/') = 0;
    if (!f) { SKIP("%s is absent (make models)", path); return false; }
    fclose(f);
    return true;
}

static llm_engine *open_engine_kv(const char *path, const char *backend, enum llm_kv_dtype kv) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = path;
    p.kv_cache_dtype = kv;
    p.backend = strcmp(backend, "cpu") == 0 ? LLM_BACKEND_CPU : GPU_KIND;
    p.n_threads = 2;
    p.max_model_len = 128;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "%s on %s: %s", path, backend, err);
    return E;
}

static llm_engine *open_engine(const char *path, const char *backend) { return open_engine_kv(path, backend, LLM_KV_F16); }

// End to end, as the llama.cpp comparison does: the CPU's greedy sequence is fed to both
// backends (teacher forcing: the prompt and 24 tokens in one step, then 8 one at a time); at
// each of the 32 positions the top-5 log-probabilities agree within tol and the argmax is the
// same wherever the CPU's top-1 leads its top-2 by more than tol. Then 4 requests batched
// through the scheduler (random block tables, ragged lengths): f32 models give the same tokens.
// kv: both backends' KV cache type (test_model: f16).
static void test_model_kv(const char *name, double tol, enum llm_kv_dtype kv) {
    char path[512];
    if (!model_path(name, path, sizeof(path))) return;
    llm_engine *C = open_engine_kv(path, "cpu", kv), *G = open_engine_kv(path, GPU_NAME, kv);
    if (!C || !G) { llm_engine_free(C); llm_engine_free(G); return; }
    const int nv = C->model.n_vocab, np = 8, ng = 32;
    int32_t toks[40];
    for (int i = 0; i < np; i++) toks[i] = i == 0 ? 1 : (100 + 37 * i) % nv;   // (% nv: nano-k has 300 tokens)
    float *lc = malloc(sizeof(float) * (size_t)nv * (np + ng)), *lg = malloc(sizeof(float) * (size_t)nv * (np + ng));
    int sc = llm_seq_new(C);
    llm_seq_eval(C, sc, toks, np, lc, 0);
    for (int i = 0; i < ng; i++) {   // the CPU's greedy continuation
        toks[np + i] = llm__argmax(lc, nv);
        if (i + 1 < ng) llm_seq_eval(C, sc, &toks[np + i], 1, lc, 0);
    }
    llm_seq_free(C, sc);
    sc = llm_seq_new(C);
    int sg = llm_seq_new(G);
    const int first = np + ng - 8;   // teacher forcing: 32 positions, the last 8 decoded one by one
    EXPECT(llm_seq_eval(C, sc, toks, first, lc, 1) == LLM_OK, "cpu eval");
    EXPECT(llm_seq_eval(G, sg, toks, first, lg, 1) == LLM_OK, GPU_NAME " eval: %s", llm_last_error(G));
    for (int i = first; i < np + ng; i++) {
        llm_seq_eval(C, sc, &toks[i], 1, lc + (size_t)i * nv, 0);
        llm_seq_eval(G, sg, &toks[i], 1, lg + (size_t)i * nv, 0);
    }
    double worst = 0;
    int agree = 0, clear = 0;
    for (int pos = np - 1; pos < np + ng - 1; pos++) {
        struct llm_logprob a[5], b[6];
        llm_top_logprobs(lc + (size_t)pos * nv, nv, 5, a);
        llm_top_logprobs(lg + (size_t)pos * nv, nv, 5, b);
        // the GPU's log-probabilities of the CPU's top 5
        double mx = -INFINITY, z = 0;
        const float *g = lg + (size_t)pos * nv;
        for (int v = 0; v < nv; v++) mx = fmax(mx, g[v]);
        for (int v = 0; v < nv; v++) z += exp(g[v] - mx);
        for (int k = 0; k < 5; k++) worst = fmax(worst, fabs(a[k].logprob - (g[a[k].id] - mx - log(z))));
        if (a[0].logprob - a[1].logprob > tol) { clear++; agree += a[0].id == b[0].id; }
    }
    EXPECT(worst < tol, "%s: top-5 log-probabilities differ by %.3g (bound %.3g)", name, worst, tol);
    EXPECT(agree == clear, "%s: argmax agrees at %d of %d clear positions", name, agree, clear);
    printf("  %-16s 32 positions: top-5 logprob max diff %.2e (bound %.2g), argmax %d/%d\n", name, worst, tol, agree, clear);
    free(lc);
    free(lg);
    // batched through the scheduler
    struct llm_prompt pr[4];
    int32_t pt[4][40];
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 10 + 7 * r; i++) pt[r][i] = i == 0 ? 1 : 50 + (i * 13 + r * 101) % (nv - 50);
        pr[r] = (struct llm_prompt){NULL, pt[r], 10 + 7 * r};
    }
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 12;
    rp.ignore_eos = 1;
    struct llm_request_params rps[4] = {rp, rp, rp, rp};
    struct llm_result rc[4], rg[4];
    EXPECT(llm_generate(C, pr, 4, rps, rc) == LLM_OK && llm_generate(G, pr, 4, rps, rg) == LLM_OK, "generate: %s",
           llm_last_error(G));
    if (tol <= 1e-3)
        for (int r = 0; r < 4; r++)
            EXPECT(rc[r].n_tokens == rg[r].n_tokens && !memcmp(rc[r].tokens, rg[r].tokens, sizeof(int32_t) * (size_t)rc[r].n_tokens),
                   "%s: request %d differs between the backends", name, r);
    llm_results_free(rc, 4);
    llm_results_free(rg, 4);
    llm_engine_free(C);
    llm_engine_free(G);
}

static void test_model(const char *name, double tol) { test_model_kv(name, tol, LLM_KV_F16); }

// Against llama.cpp's golden (tests/golden/NAME.p1.json: made with an f32 KV cache, flash
// attention off): the prompt, then its greedy continuation teacher-forced, on this backend with an
// f32 cache; llama.cpp's top-5 log-probabilities at every one of its 32 steps within tol.
static void test_golden_f32(const char *name, double tol) {
    char path[512], golden[600];
    if (!model_path(name, path, sizeof(path))) return;
    snprintf(golden, sizeof(golden), "tests/golden/%s.p1.json", name);
    struct json j;
    if (json_load(golden, &j) != 0) { EXPECT(0, "cannot parse %s", golden); return; }
    int32_t prompt[128], greedy[32], seq[32];
    const int np = json_ints(json_get(&j, "prompt.tokens"), prompt, 128), ng = json_ints(json_get(&j, "greedy.tokens"), greedy, 32);
    const struct json *top = json_get(&j, "trace.top");
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = path;
    p.backend = GPU_KIND;
    p.n_threads = 2;
    p.max_model_len = 128;
    p.kv_cache_dtype = LLM_KV_F32;
    llm_engine *G = np > 1 && np + ng <= 128 && top && top->n == ng ? llm_engine_create(&p, err, sizeof(err)) : NULL;
    EXPECT(G != NULL, "%s: %s", golden, G ? "" : err);
    if (!G) { json_free(&j); return; }
    const int nv = G->model.n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)nv * (size_t)ng);
    seq[0] = prompt[np - 1];
    for (int i = 0; i + 1 < ng; i++) seq[i + 1] = greedy[i];
    const int sg = llm_seq_new(G);
    EXPECT(llm_seq_eval(G, sg, prompt, np - 1, NULL, 0) == LLM_OK && llm_seq_eval(G, sg, seq, ng, lg, 1) == LLM_OK,
           "%s: " GPU_NAME " eval: %s", name, llm_last_error(G));
    double worst = 0;
    for (int s = 0; s < ng; s++) {
        const float *g = lg + (size_t)s * nv;
        double mx = -INFINITY, z = 0;
        for (int v = 0; v < nv; v++) mx = fmax(mx, g[v]);
        for (int v = 0; v < nv; v++) z += exp(g[v] - mx);
        const struct json *row = json_at(top, s);
        for (int k = 0; row && k < row->n && k < 5; k++) {
            const int id = (int)json_get(json_at(row, k), "id")->num;
            worst = fmax(worst, fabs(json_get(json_at(row, k), "logprob")->num - (g[id] - mx - log(z))));
        }
    }
    EXPECT(worst < tol, "%s: top-5 log-probabilities differ from llama.cpp's by %.3g (bound %.3g)", name, worst, tol);
    printf("  %-18s against llama.cpp (f32 cache), 32 steps: top-5 logprob max diff %.2e (bound %.0e)\n", name, worst,
           tol);
    free(lg);
    llm_engine_free(G);
    json_free(&j);
}

// The scheduler's features on Vulkan (f32 model: tokens comparable exactly): 6 requests with a
// shared 40-token prefix, prefix caching on, chunked prefill (16 tokens a step), a KV cache of
// 96 tokens (so requests are preempted and recomputed), twice (the second round finds the prefix in the cache): the same greedy
// tokens as the CPU alone, request by request.
static void test_serving(const char *name) {
    char path[512];
    if (!model_path(name, path, sizeof(path))) return;
    llm_engine *C = open_engine(path, "cpu");
    if (!C) return;
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = path;
    p.backend = GPU_KIND;
    p.max_model_len = 64;
    p.block_size = 16;
    p.enable_prefix_caching = 1;
    p.max_num_batched_tokens = 16;   // prompts prefilled in chunks, mixed with decodes
    p.kv_cache_bytes = 96 * 2 * (size_t)C->model.n_layer * llm__row_bytes(LLM__TYPE_F16, (int64_t)C->model.n_head_kv * C->model.head_dim);
    llm_engine *G = llm_engine_create(&p, err, sizeof(err));
    EXPECT(G != NULL, "%s on " GPU_NAME " with a small KV cache: %s", name, err);
    if (!G) { llm_engine_free(C); return; }
    const int nv = C->model.n_vocab, n = 6;
    struct llm_prompt pr[6];
    int32_t pt[6][48];
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < 40 + r; i++) pt[r][i] = i == 0 ? 1 : 50 + (i < 40 ? i * 31 : i * 7 + r * 97) % (nv - 50);
        pr[r] = (struct llm_prompt){NULL, pt[r], 40 + r};
    }
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 16;
    rp.ignore_eos = 1;
    struct llm_request_params rps[6] = {rp, rp, rp, rp, rp, rp};
    struct llm_result alone[6], rg[6];
    for (int r = 0; r < n; r++) EXPECT(llm_generate(C, &pr[r], 1, &rps[r], &alone[r]) == LLM_OK, "cpu generate");
    int same = 0;
    for (int round = 0; round < 2; round++) {
        EXPECT(llm_generate(G, pr, n, rps, rg) == LLM_OK, GPU_NAME " generate: %s", llm_last_error(G));
        for (int r = 0; r < n; r++) {
            bool eq = rg[r].n_tokens == alone[r].n_tokens &&
                      !memcmp(rg[r].tokens, alone[r].tokens, sizeof(int32_t) * (size_t)alone[r].n_tokens);
            EXPECT(eq, "%s: round %d request %d differs from the CPU's", name, round, r);
            same += eq;
        }
        llm_results_free(rg, n);
    }
    struct llm_engine_stats st;
    llm_get_stats(G, &st);
    EXPECT(st.n_preemptions > 0, "%s: no request was preempted", name);
    EXPECT(st.prefix_hit_tokens > 0, "%s: no prefix cache hit", name);
    printf("  %-16s serving: %d/%d requests as the CPU's alone, %lld preemptions, %lld of %lld prompt tokens from the "
           "prefix cache\n", name, same, 2 * n, st.n_preemptions, st.prefix_hit_tokens, st.prefix_query_tokens);
    llm_results_free(alone, n);
    llm_engine_free(C);
    llm_engine_free(G);
}

// The backend contract's device list: llm_list_devices gives the devices Vulkan itself
// enumerates (counted here with Vulkan's own calls), in its order, index i being device i.
// The real models (tests/golden/real, $LLM_REAL_MODELS) on Vulkan: llama.cpp's prompt and greedy
// continuation fed to both backends (teacher forcing, 32 positions); the Vulkan backend's top-5
// log-probabilities against llama.cpp's (test_golden's bounds for real models: top-5 1.75; top-1
// 0.6 where the CPU has 0.5: over all 18 goldens lavapipe measured top-1 up to 0.56, at one step
// of smollm2.math, the next 0.31) and against the CPU backend's, and its argmax against
// llama.cpp's at every step.
static void test_real(const char *golden_name, double cpu_tol, int min_same) {
    const char *dir = getenv("LLM_REAL_MODELS");
    if (!dir || !*dir) {
        EXPECT(0, "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches");
        return;
    }
    char golden[600], path[1200];
    snprintf(golden, sizeof(golden), "tests/golden/real/%s.json", golden_name);
    struct json j;
    if (json_load(golden, &j) != 0) { EXPECT(0, "cannot parse %s", golden); return; }
    int32_t prompt[128], greedy[32], seq[32];
    int np = json_ints(json_get(&j, "prompt.tokens"), prompt, 128);
    int ng = json_ints(json_get(&j, "greedy.tokens"), greedy, 32);
    const struct json *top = json_get(&j, "trace.top"), *mp = json_get(&j, "model");
    bool layout = np > 1 && np + ng <= 128 && ng == 32 && top && top->n == ng && mp && mp->str;
    EXPECT(layout, "%s: unexpected golden layout", golden);
    if (!layout) { json_free(&j); return; }
    snprintf(path, sizeof(path), "%s/%s", dir, strrchr(mp->str, '/') ? strrchr(mp->str, '/') + 1 : mp->str);
    if (access(path, R_OK) != 0) { EXPECT(0, "%s: model %s is missing (make fixtures)", golden, path); json_free(&j); return; }
    llm_engine *C = open_engine(path, "cpu"), *G = open_engine(path, GPU_NAME);
    if (!C || !G) { llm_engine_free(C); llm_engine_free(G); json_free(&j); return; }
    const int nv = C->model.n_vocab;
    seq[0] = prompt[np - 1];
    for (int i = 0; i + 1 < ng; i++) seq[i + 1] = greedy[i];
    float *lc = malloc(sizeof(float) * (size_t)nv * ng), *lg = malloc(sizeof(float) * (size_t)nv * ng);
    int sc = llm_seq_new(C), sg = llm_seq_new(G);
    EXPECT(llm_seq_eval(C, sc, prompt, np - 1, NULL, 0) == LLM_OK && llm_seq_eval(C, sc, seq, ng, lc, 1) == LLM_OK,
           "%s: cpu eval: %s", golden_name, llm_last_error(C));
    EXPECT(llm_seq_eval(G, sg, prompt, np - 1, NULL, 0) == LLM_OK && llm_seq_eval(G, sg, seq, ng, lg, 1) == LLM_OK,
           "%s: " GPU_NAME " eval: %s", golden_name, llm_last_error(G));
    double worst = 0, worst1 = 0, worst_cpu = 0;
    int same = 0;
    for (int s = 0; s < ng; s++) {
        const float *g = lg + (size_t)s * nv, *c = lc + (size_t)s * nv;
        double mg = -INFINITY, mc = -INFINITY, zg = 0, zc = 0;
        for (int v = 0; v < nv; v++) mg = fmax(mg, g[v]), mc = fmax(mc, c[v]);
        for (int v = 0; v < nv; v++) zg += exp(g[v] - mg), zc += exp(c[v] - mc);
        double lseg = mg + log(zg), lsec = mc + log(zc);
        const struct json *row = json_at(top, s);
        for (int k = 0; row && k < row->n; k++) {
            int id = (int)json_get(json_at(row, k), "id")->num;
            double d = fabs(g[id] - lseg - json_get(json_at(row, k), "logprob")->num);
            worst = fmax(worst, d);
            if (k == 0) worst1 = fmax(worst1, d);
        }
        struct llm_logprob a[5];   // the CPU's top 5
        llm_top_logprobs(c, nv, 5, a);
        for (int k = 0; k < 5; k++) worst_cpu = fmax(worst_cpu, fabs((g[a[k].id] - lseg) - (c[a[k].id] - lsec)));
        same += row && row->n > 0 && (int)llm__argmax(g, nv) == (int)json_get(json_at(row, 0), "id")->num;
    }
    EXPECT(worst <= 1.75 && worst1 <= 0.6, "%s: " GPU_LABEL "'s top-5 log-probabilities differ from llama.cpp's by %.3g "
           "(top-1 %.3g; bounds 1.75, 0.6)", golden_name, worst, worst1);
    EXPECT(worst_cpu <= cpu_tol, "%s: " GPU_LABEL "'s top-5 log-probabilities differ from the CPU's by %.3g (bound %.2g)",
           golden_name, worst_cpu, cpu_tol);
    EXPECT(same >= min_same, "%s: " GPU_LABEL "'s argmax agrees with llama.cpp's at %d of %d steps (want %d)", golden_name,
           same, ng, min_same);
    printf("  %-18s llama.cpp: top-5 max %.2f, top-1 max %.2f, argmax %d/%d; CPU: top-5 max %.2f (bound %.3g)\n",
           golden_name, worst, worst1, same, ng, worst_cpu, cpu_tol);
    free(lc);
    free(lg);
    llm_engine_free(C);
    llm_engine_free(G);
    json_free(&j);
}

// A Vulkan engine has a bandwidth probe; it measures a copy rate above zero.
static void test_bandwidth(const char *name) {
    char path[512];
    if (!model_path(name, path, sizeof(path))) return;
    llm_engine *G = open_engine(path, GPU_NAME);
    if (!G) return;
    double gbps = 0;
    enum llm_status st = llm_measure_bandwidth(G, &gbps);
    EXPECT(st == LLM_OK && gbps > 0, GPU_NAME " bandwidth: %s, %g GB/s (%s)", llm_status_str(st), gbps, llm_last_error(G));
    printf("  bandwidth probe: %.1f GB/s\n", gbps);
    llm_engine_free(G);
}

// Profiling syncs after every op (the step's command buffer run, then recording goes on): the
// logits are the same as without, and every module's time is counted.
static void test_profiling(const char *name) {
    char path[512];
    if (!model_path(name, path, sizeof(path))) return;
    llm_engine *G = open_engine(path, GPU_NAME);
    if (!G) return;
    const int nv = G->model.n_vocab, n = 9;
    int32_t toks[9] = {1, 300, 17, 3000, 42, 8, 99, 1234, 7};
    float *a = malloc(sizeof(float) * (size_t)nv * n), *b = malloc(sizeof(float) * (size_t)nv * n);
    int32_t other[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int s0 = llm_seq_new(G), s1 = llm_seq_new(G), s2 = llm_seq_new(G);
    // other tokens first, so that a profiled step that computed nothing would not find this
    // step's results left in the buffers
    EXPECT(llm_seq_eval(G, s2, other, n, a, 1) == LLM_OK, "eval: %s", llm_last_error(G));
    llm_set_profiling(G, 1);
    EXPECT(llm_seq_eval(G, s1, toks, n, b, 1) == LLM_OK, "eval with profiling: %s", llm_last_error(G));
    struct llm_profile prof;
    llm_get_profile(G, &prof);
    llm_set_profiling(G, 0);
    EXPECT(llm_seq_eval(G, s0, toks, n, a, 1) == LLM_OK, "eval: %s", llm_last_error(G));
    double err = nmse(b, a, (size_t)nv * n);
    EXPECT(err < 1e-12, "logits with profiling: NMSE %.3g against without", err);
    int timed = 0;
    for (int i = 0; i <= LLM_PROF_LOGITS; i++) timed += prof.seconds[i] > 0;
    EXPECT(timed == LLM_PROF_LOGITS + 1, "profiling timed %d of %d modules", timed, LLM_PROF_LOGITS + 1);
    printf("  profiling: logits NMSE %.2e against a step without\n", err);
    free(a);
    free(b);
    llm_engine_free(G);
}

// A step beyond the shape given to reserve is refused by end_step (the step's arrays are sized
// there; begin_step allocates nothing), and the next step is fine.
static void test_step_limits(struct llm_backend *vk) {
    struct llm__err e = {{0}, LLM_OK};
    int32_t *bt = calloc(5 * 1000, sizeof(int32_t)), zero[1] = {0};
    struct llm__buf b;
    EXPECT(vk->iface->buf_alloc(vk->ctx, &b, 64 * sizeof(float), &e) == LLM_OK, "buf_alloc: %s", e.msg);
    struct llm__tensor t = ten(&b, 0, 16, 1, 64);
    struct llm__step big = {.n_tokens = 1, .tokens = zero, .positions = zero, .seq_idx = zero, .slot_mapping = zero,
                            .n_seqs = 5, .max_blocks = 1000, .block_tables = bt, .block_size = 16};
    vk->iface->begin_step(vk->ctx, &big);
    vk->iface->add(vk->ctx, t, t, t);
    enum llm_status st = vk->iface->end_step(vk->ctx, &e);
    EXPECT(st == LLM_ERR_BACKEND && strstr(e.msg, "larger than the shape reserved"), "a step of 5 x 1000 blocks: %s: %s",
           llm_status_str(st), e.msg);
    struct llm__step small = big;
    small.n_seqs = 1;
    e = (struct llm__err){{0}, LLM_OK};
    vk->iface->begin_step(vk->ctx, &small);
    vk->iface->add(vk->ctx, t, t, t);
    EXPECT(vk->iface->end_step(vk->ctx, &e) == LLM_OK, "the next step: %s", e.msg);
    vk->iface->buf_free(vk->ctx, &b);
    free(bt);
}

// A KV cache larger than the device: --backend vulkan fails with a message that says so, auto
// runs on the CPU instead.
static void test_memory(const char *name, uint64_t heap) {
    char path[512], err[512] = "";
    if (!model_path(name, path, sizeof(path))) return;
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.backend = GPU_KIND;
    p.n_threads = 2;
    p.kv_cache_bytes = (size_t)heap + ((size_t)1 << 30);
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(!E && strstr(err, "not enough device memory"), "a KV cache larger than the device: %s", E ? "created" : err);
    printf("  " GPU_NAME ", KV cache of %.1f GiB: %s\n", (double)p.kv_cache_bytes / (1 << 30), err);
    llm_engine_free(E);
    p.backend = LLM_BACKEND_AUTO;
    E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E && !strcmp(E->be.iface->name, "cpu"), "auto with a KV cache larger than the device: %s", E ? E->be.iface->name : err);
    llm_engine_free(E);
}
