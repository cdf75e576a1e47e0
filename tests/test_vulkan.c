// The Vulkan backend's ops against the CPU backend on random inputs (normalised mean squared
// error, as ggml's test-backend-ops), for several shapes, on whatever Vulkan device there is
// (Mesa's lavapipe in CI). Prints SKIP when the build has no Vulkan (make VULKAN=1) or there is
// no device.
#include "../llm.c"
#include "test.h"

#ifdef LLM_VULKAN
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
        struct llm__err e = {{0}};
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
        for (int op = 0; op < 3; op++) {
            struct llm_backend *be[2] = {vk, cpu};
            struct llm__buf *src[2] = {&gb[0], &cb[0]}, *dst[2] = {&gb[1], &cb[1]};
            for (int k = 0; k < 2; k++) {
                struct llm__tensor d = ten(dst[k], od, cols, rows, nb1), a = ten(src[k], oa, cols, rows, nb1),
                                   b = ten(src[k], ob, cols, rows, nb1), w = ten(src[k], ow, cols, 1, nb1);
                be[k]->iface->begin_step(be[k]->ctx, &step);
                if (op == 0) be[k]->iface->add(be[k]->ctx, d, a, b);
                else if (op == 1) be[k]->iface->silu_mul(be[k]->ctx, d, a, b);
                else be[k]->iface->rmsnorm(be[k]->ctx, d, a, w, 1e-5f);
                EXPECT(be[k]->iface->end_step(be[k]->ctx, &e) == LLM_OK, "end_step: %s", e.msg);
                be[k]->iface->download(be[k]->ctx, dst[k], od, k ? want : got, sizeof(float) * n);
            }
            static const char *names[] = {"add", "silu_mul", "rmsnorm"};
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

// Embedding rows of every supported table type, and get_rows, against the CPU backend.
static void test_rows(struct llm_backend *vk, struct llm_backend *cpu) {
    static const int types[] = {LLM__TYPE_F32, LLM__TYPE_F16, LLM__TYPE_BF16, LLM__TYPE_Q8_0,
                                LLM__TYPE_Q4_0, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K};
    const int64_t cols = 256, rows = 50;
    unsigned long long seed = 5;
    float *f = malloc(sizeof(float) * (size_t)(cols * rows));
    for (int64_t i = 0; i < cols * rows; i++) f[i] = (float)test_rng_normal(&seed);
    int32_t tokens[9] = {3, 0, 49, 3, 17, 25, 8, 8, 1}, out_rows[4] = {8, 0, 3, 5};
    struct llm__step step = {.n_tokens = 9, .tokens = tokens, .n_out = 4, .out_rows = out_rows};
    struct llm__err e = {{0}};
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
    size_t rb = llm__row_bytes(LLM__TYPE_Q2_K, cols);
    char *q = calloc(rb, 1);
    EXPECT(vk->iface->weight_load(vk->ctx, &w, LLM__TYPE_Q2_K, cols, 1, q, &e) == LLM_ERR_UNSUPPORTED && strstr(e.msg, "q2_K"),
           "q2_K weight: %s", e.msg);
    free(q);
    free(f);
}

static llm_engine *open_engine(const char *path, const char *backend) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = path;
    p.backend = backend;
    p.n_threads = 2;
    p.max_model_len = 128;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "%s on %s: %s", path, backend, err);
    return E;
}

// End to end, as the llama.cpp comparison does: the CPU's greedy sequence is fed to both
// backends (teacher forcing: the prompt and 24 tokens in one step, then 8 one at a time); at
// each of the 32 positions the top-5 log-probabilities agree within tol and the argmax is the
// same wherever the CPU's top-1 leads its top-2 by more than tol. Then 4 requests batched
// through the scheduler (random block tables, ragged lengths): f32 models give the same tokens.
static void test_model(const char *name, double tol) {
    char path[512];
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { SKIP("%s is absent (make models)", path); return; }
    fclose(f);
    llm_engine *C = open_engine(path, "cpu"), *G = open_engine(path, "vulkan");
    if (!C || !G) { llm_engine_free(C); llm_engine_free(G); return; }
    const int nv = C->model.n_vocab, np = 8, ng = 32;
    int32_t toks[40];
    for (int i = 0; i < np; i++) toks[i] = i == 0 ? 1 : 100 + 37 * i;
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
    EXPECT(llm_seq_eval(G, sg, toks, first, lg, 1) == LLM_OK, "vulkan eval: %s", llm_last_error(G));
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
#endif

int main(void) {
#ifndef LLM_VULKAN
    SKIP("built without Vulkan (make VULKAN=1 test runs these tests)");
#else
    struct llm__err e = {{0}};
    int n = llm__vk_list_devices(stdout, &e);
    if (n <= 0) {
        SKIP("no Vulkan device: %s", n < 0 ? e.msg : "none found");
        return test_summary("test_vulkan");
    }
    struct llm_backend vk = {0}, cpu = {0};
    EXPECT(llm__vk_backend_new(&vk, -1, 0, &e) == LLM_OK, "vulkan backend: %s", e.msg);
    EXPECT(llm__cpu_backend_new(&cpu, 2, -1, &e) == LLM_OK, "cpu backend: %s", e.msg);
    if (vk.iface && cpu.iface && !e.msg[0]) {
        struct llm__shape shape = {64, 4096, 8, 8, 64, 16};
        cpu.iface->reserve(cpu.ctx, &shape, &e);
        test_ops(&vk, &cpu);
        test_rows(&vk, &cpu);
    }
    // Whole models. Sums in another order move f32 results by ~1e-4 through the random-weight
    // layers, f16/bf16 a little more; with 8-bit activations such differences flip roundings
    // of the next layer's activations, so quantized models differ by up to ~0.1 (as llama.cpp's
    // own results move between its code paths; the bound of the llama.cpp comparison).
    test_model("tiny-f32", 1e-3);
    test_model("tiny-f16", 1e-2);
    test_model("tiny-bf16", 4e-2);
    test_model("tiny-q8_0", 0.15);
    test_model("tiny-q4_0", 0.15);
    test_model("tiny-q4_k", 0.15);
    test_model("tiny-q5_k", 0.15);
    test_model("tiny-q6_k", 0.15);
    test_model("tiny-q4_k_m", 0.15);
    test_model("tiny-qwen2-f32", 1e-3);
    test_model("tiny-qwen2-q4_k", 0.15);
    test_model("tiny-llama3-f32", 1e-3);
    test_model("tiny-llama3-f16", 1e-2);
    test_model("tiny-llama3-q6_k", 0.15);
    if (vk.iface) vk.iface->free(vk.ctx);
    if (cpu.iface) cpu.iface->free(cpu.ctx);
    // a device number that does not exist is an error, not a crash
    struct llm_backend bad = {0};
    EXPECT(llm__vk_backend_new(&bad, 99, 0, &e) != LLM_OK && strstr(e.msg, "no device"), "device 99: %s", e.msg);
    if (bad.iface) bad.iface->free(bad.ctx);
#endif
    return test_summary("test_vulkan");
}
