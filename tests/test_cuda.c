// The CUDA backend's ops against the CPU backend on random inputs (normalised mean squared error,
// as ggml's test-backend-ops), for several shapes, at odd offsets and padded strides; whole
// models, the scheduler's features, the real models (tests/gpu_tests.h, shared with test_vulkan);
// and what is CUDA's own: the device list, decode steps replayed as CUDA graphs giving the logits
// of steps launched kernel by kernel, memory errors. On a GPU with make CUDA=1 test-cuda; on the
// CPU emulator of a CUDA device (tests/cuda_emu/) with make CUDA_EMU=1 test-cuda, where the real
// models are left out (minutes each there). Prints SKIP when the build has no CUDA or there is no
// device. Two programs: test_cuda (the ops, graphs, memory) and test_cuda_models (whole models:
// tests/test_cuda_models.c defines TEST_CUDA_MODELS and includes this file), so that the suite's
// lanes run them side by side (the emulator uses one core).
#include "../llm.c"
#include "test.h"
#include "json.h"

#ifdef LLM_CUDA
#define GPU_NAME "cuda"
#define GPU_LABEL "CUDA"
#define GPU_KIND LLM_BACKEND_CUDA
#include "gpu_tests.h"

// llm_list_devices gives the devices the runtime counts, in its order, with what llm info shows.
static void test_device_list(void) {
    int n = 0;
    cudaGetDeviceCount(&n);
    struct llm_device devs[16];
    char err[256] = "";
    int got = llm_list_devices(devs, 16, err, sizeof(err)), cuda = 0;
    for (int i = 0; i < got; i++) {
        if (devs[i].backend != LLM_BACKEND_CUDA) continue;
        struct cudaDeviceProp p;
        cudaGetDeviceProperties(&p, devs[i].index);
        char cc[8];
        snprintf(cc, sizeof(cc), "%d.%d", p.major, p.minor);
        EXPECT(devs[i].index == cuda && !strcmp(devs[i].name, p.name) && devs[i].memory_bytes == p.totalGlobalMem &&
               devs[i].compute_units == p.multiProcessorCount && !strcmp(devs[i].compute_capability, cc),
               "device %d: '%s' %zu bytes, %d SMs, %s (the runtime: '%s', %zu, %d, %s)", devs[i].index, devs[i].name,
               devs[i].memory_bytes, devs[i].compute_units, devs[i].compute_capability, p.name, p.totalGlobalMem,
               p.multiProcessorCount, cc);
        cuda++;
    }
    EXPECT(cuda == n, "llm_list_devices: %d CUDA devices, the runtime has %d (%s)", cuda, n, err);
    struct llm_backend bad = {0};
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__cu_backend_new(&bad, n + 3, &e) == LLM_ERR_INVALID_ARG && strstr(e.msg, "no device"), "device %d: %s", n + 3, e.msg);
    if (bad.iface) bad.iface->free(bad.ctx);
}

// Steps as CUDA graphs: the same sequence evaluated twice, with graphs and with every step's
// kernels launched one by one, gives the same logits, and the first engine replayed graphs (a
// step's graph is captured the second time its shape comes, then replayed). Steps of `chunk`
// tokens: 1 (decode: the GEMV), or more than 8 (the GEMM; with blas, cuBLAS's, which must then be
// captured too).
static void test_graphs(const char *name, int chunk, bool blas) {
    char path[512];
    if (!model_path(name, path, sizeof(path))) return;
    setenv("LLM_CUDA_CUBLAS", blas ? "1" : "0", 1);
    llm_engine *G[2] = {open_engine(path, GPU_NAME), open_engine(path, GPU_NAME)};
    unsetenv("LLM_CUDA_CUBLAS");
    if (!G[0] || !G[1]) { llm_engine_free(G[0]); llm_engine_free(G[1]); return; }
    ((struct llm__cu *)G[1]->be.ctx)->graphs_off = true;
    const int nv = G[0]->model.n_vocab, steps = 8, n = 4 + steps * chunk;
    // (a step's logits: its last token's row; the other rows stay 0)
    float *lg[2] = {calloc((size_t)nv * (size_t)n, sizeof(float)), calloc((size_t)nv * (size_t)n, sizeof(float))};
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) toks[i] = 1 + (int32_t)((i * 7919 + 300) % (nv - 1));
    for (int k = 0; k < 2; k++) {
        int s = llm_seq_new(G[k]);
        EXPECT(llm_seq_eval(G[k], s, toks, 4, lg[k], 1) == LLM_OK, "eval: %s", llm_last_error(G[k]));
        for (int i = 4; i < n; i += chunk)   // steps of one shape
            EXPECT(llm_seq_eval(G[k], s, &toks[i], chunk, lg[k] + (size_t)i * nv, 0) == LLM_OK, "eval: %s", llm_last_error(G[k]));
    }
    const struct llm__cu *a = G[0]->be.ctx, *b = G[1]->be.ctx;
#ifndef LLM_CUDA_EMU_RUNTIME_H
    if (blas && !a->blas) {
        SKIP("%s: cuBLAS (libcublas.so) not found: no steps through cuBLAS to capture", name);
        blas = false;
    } else
#endif
    EXPECT((a->blas_from[LLM__TYPE_F32] > 0) == blas && (!blas || a->blas), "%s: cuBLAS %s (%s)", name,
           a->blas_from[LLM__TYPE_F32] ? "used" : "not used", a->desc);
    // (the same kernels give the same logits; cuBLAS on a GPU promises that for the same algorithm
    // only, which a graph's capture need not keep: close enough then)
    double err = nmse(lg[0] + 4 * (size_t)nv, lg[1] + 4 * (size_t)nv, (size_t)nv * (size_t)(n - 4));
#ifdef LLM_CUDA_EMU_RUNTIME_H
    const double bound = 0.0;
#else
    const double bound = blas ? 1e-10 : 0.0;
#endif
    EXPECT(err <= bound, "%s: logits with graphs differ from without (NMSE %.3g)", name, err);
    EXPECT(a->graph_captures >= 1 && a->graph_hits >= steps - 3 && b->graph_hits == 0, "%s: %lld graphs captured, %lld replayed "
           "(without: %lld)", name, a->graph_captures, a->graph_hits, b->graph_hits);
    printf("  graphs: %s, %d steps of %d token%s%s: %lld captured, %lld replayed; logits the same as without graphs\n", name,
           steps, chunk, chunk > 1 ? "s" : "", blas ? " (cuBLAS)" : "", a->graph_captures, a->graph_hits);
    free(toks);
    free(lg[0]);
    free(lg[1]);
    llm_engine_free(G[0]);
    llm_engine_free(G[1]);
}

// The KV cache from --gpu-memory-utilization: a larger fraction gives a larger cache, within what
// the device has free.
static void test_utilization(const char *name) {
    char path[512], err[512];
    if (!model_path(name, path, sizeof(path))) return;
    size_t got[2] = {0, 0};
    const float util[2] = {0.1f, 0.3f};
    for (int k = 0; k < 2; k++) {
        struct llm_engine_params p = llm_engine_params_default();
        p.model_path = path;
        p.backend = GPU_KIND;
        p.gpu_memory_utilization = util[k];
        llm_engine *E = llm_engine_create(&p, err, sizeof(err));
        EXPECT(E != NULL, "--gpu-memory-utilization %.1f: %s", util[k], err);
        if (!E) return;
        struct llm_engine_info ei;
        llm_get_engine_info(E, &ei);
        got[k] = ei.kv_cache_bytes;
        llm_engine_free(E);
    }
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    EXPECT(got[1] > 2 * got[0] && got[1] < fr, "KV caches of %zu and %zu bytes for 0.1 and 0.3 (%zu free)", got[0], got[1], fr);
    printf("  --gpu-memory-utilization 0.1 / 0.3: KV caches of %.2f / %.2f GiB\n", (double)got[0] / (1 << 30),
           (double)got[1] / (1 << 30));
}
#endif

#ifndef TEST_CUDA_MODELS
// cuBLAS's GEMM: with LLM_CUDA_CUBLAS=1, products of more than 8 tokens of F32, F16 and BF16
// weights and of quantized ones (as f16, in slices of rows) alone, with a bias, beside another
// type, against the CPU, run as cuBLAS products; without the variable reserve measures both GEMMs
// and names its choice.
static void test_blas(struct llm_backend *cpu, const struct llm__shape *shape, bool emulated) {
    static const int types[] = {LLM__TYPE_F32, LLM__TYPE_F16,  LLM__TYPE_BF16,   LLM__TYPE_Q8_0,  LLM__TYPE_Q4_0,
                                LLM__TYPE_Q4_1, LLM__TYPE_Q4_K, LLM__TYPE_Q6_K, LLM__TYPE_IQ4_XS, LLM__TYPE_G4_128};
    struct llm_backend gpu = {0};
    struct llm__err e = {{0}, LLM_OK};
    setenv("LLM_CUDA_CUBLAS", "1", 1);
    enum llm_status st = llm__cu_backend_new(&gpu, -1, &e);
    unsetenv("LLM_CUDA_CUBLAS");
    EXPECT(st == LLM_OK, "cuda backend: %s", e.msg);
    struct llm__cu *cu = gpu.ctx;
    if (st == LLM_OK) {
        for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++) cu->wK[types[i]] = cu->wN[types[i]] = 1024;   // (as if loaded)
        EXPECT(gpu.iface->reserve(gpu.ctx, shape, &e) == LLM_OK, "cuda reserve: %s", e.msg);
    }
    if (st != LLM_OK || !cu->blas) {
#ifdef LLM_CUDA_EMU_RUNTIME_H
        EXPECT(cu && cu->blas, "the emulator's cuBLAS did not open");
#else
        SKIP("cuBLAS (libcublas.so) not found: the own GEMM is used for every type");
#endif
        if (gpu.iface) gpu.iface->free(gpu.ctx);
        return;
    }
    for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++)
        EXPECT(cu->blas_from[types[i]] == LLM__CU_MATVEC_MAX + 1, "LLM_CUDA_CUBLAS=1: not chosen for %s (%s)",
               llm__type_info((uint32_t)types[i])->name, cu->desc);
#ifdef LLM_CUDA_EMU_RUNTIME_H
    const long long g0 = llm_emu_cublas_gemms();
#endif
    static const int shapes[][3] = {{256, 130, 17}, {768, 67, 70}};
    unsigned long long seed = 91;
    long long gemms = 0;
    for (size_t t = 0; t < LLM__ARRAY_LEN(types); t++)
        for (size_t s = 0; s < LLM__ARRAY_LEN(shapes); s++, gemms += 2)
            matmul_case(&gpu, cpu, types[t], types[t], shapes[s][0], shapes[s][1], shapes[s][2], seed++);
    matmul_case(&gpu, cpu, LLM__TYPE_Q8_0, LLM__TYPE_F16, 512, 80, 17, seed++);
    matmul_case(&gpu, cpu, LLM__TYPE_BF16, LLM__TYPE_Q4_K, 512, 80, 33, seed++);
    gemms += 4;
    // a quantized weight in slices of 48 rows (the scratch made small): 3 + 3 products
    const size_t deq = cu->deq.size;
    cu->deq.size = 256 * 2 * 48;
    matmul_case(&gpu, cpu, LLM__TYPE_Q4_K, LLM__TYPE_Q4_K, 256, 130, 17, seed++);
    cu->deq.size = deq;
    gemms += 6;
#ifdef LLM_CUDA_EMU_RUNTIME_H
    const long long ran = llm_emu_cublas_gemms() - g0;
    EXPECT(ran == gemms, "%lld cuBLAS products for %lld", ran, gemms);
#endif
    // the measured choice: from the smallest token count from which cuBLAS was the faster at every
    // count measured (on the emulator 9 and 16 tokens)
    cu->blas_env = -1;
    memset(cu->blas_ms, 0, sizeof(cu->blas_ms));
    EXPECT(llm__cu_blas_choose(cu, shape, &e) == LLM_OK, "choose: %s", e.msg);
    for (size_t i = 0; i < LLM__ARRAY_LEN(types); i++) {
        float (*ms)[2] = cu->blas_ms[types[i]];
        int ns = 0, from = 0;
        while (ns < LLM__CU_TUNE_SIZES && ms[ns][0] > 0 && ms[ns][1] > 0) ns++;
        const int64_t T[2] = {9, 16};   // (LLM__CU_TUNE_T 16 on the emulator)
        for (int k = ns - 1; k >= 0 && ms[k][1] < ms[k][0]; k--) from = k ? (int)T[k - 1] + 1 : 9;
        EXPECT(ns == (emulated ? 2 : 3) && cu->blas_from[types[i]] == from, "%s: %d counts timed, cuBLAS from %d tokens (%s)",
               llm__type_info((uint32_t)types[i])->name, ns, cu->blas_from[types[i]], cu->desc);
    }
    const char *name = gpu.iface->device_name(gpu.ctx);
    EXPECT(strstr(name, "; f16 GEMM: ") && strstr(name, "; q4_K GEMM: ") && strstr(name, " ms)"), "device name: %s", name);
    printf("  cuBLAS: %lld products as cuBLAS's; measured: %s\n", gemms, name);
    gpu.iface->free(gpu.ctx);
}
#endif

#ifdef TEST_CUDA_MODELS
#define TEST_NAME "test_cuda_models"
#else
#define TEST_NAME "test_cuda"
#endif

int main(void) {
#ifndef LLM_CUDA
    SKIP("built without CUDA (make CUDA=1 test-cuda on a GPU; make CUDA_EMU=1 test-cuda on the CPU emulator)");
#else
    struct llm__err e = {{0}, LLM_OK};
    struct llm_device devs[16];
    int n = llm__cu_list_devices(devs, 16, &e);
    for (int i = 0; i < n && i < 16; i++)
        printf("  device %d: %s, %.1f GiB, %d SMs, compute capability %s\n", devs[i].index, devs[i].name,
               (double)devs[i].memory_bytes / (1 << 30), devs[i].compute_units, devs[i].compute_capability);
    if (n <= 0) {
        SKIP("no CUDA device: %s", n < 0 ? e.msg : "none found (make CUDA_EMU=1 test-cuda runs these tests on the CPU)");
        return test_summary(TEST_NAME);
    }
#ifdef LLM_CUDA_EMU_RUNTIME_H
    const bool emulated = true;
#else
    const bool emulated = false;
#define llm_emu_set_memory(n) ((void)(n))
#endif
    if (emulated) llm_emu_set_memory((size_t)4 << 30);   // (caches sized from it are filled on the host)
#ifndef TEST_CUDA_MODELS
    struct llm_backend gpu = {0}, cpu = {0};
    setenv("LLM_CUDA_CUBLAS", "0", 1);   // (the own kernels; test_blas tests cuBLAS)
    EXPECT(llm__cu_backend_new(&gpu, -1, &e) == LLM_OK, "cuda backend: %s", e.msg);
    unsetenv("LLM_CUDA_CUBLAS");
    EXPECT(llm__cpu_backend_new(&cpu, 2, -1, &e) == LLM_OK, "cpu backend: %s", e.msg);
    if (gpu.iface && cpu.iface && !e.msg[0]) {
        struct llm__shape shape = gpu_test_shape(8, 2, 128);
        EXPECT(gpu.iface->reserve(gpu.ctx, &shape, &e) == LLM_OK, "cuda reserve: %s", e.msg);
        EXPECT(cpu.iface->reserve(cpu.ctx, &shape, &e) == LLM_OK, "cpu reserve: %s", e.msg);
        test_ops(&gpu, &cpu);
        test_gather_cols(&gpu, &cpu);
        test_rows(&gpu, &cpu);
        test_matmul(&gpu, &cpu);
        test_moe(&gpu, &cpu);
        test_rope(&gpu, &cpu);
        test_attention(&gpu, &cpu);
        test_step_limits(&gpu);
        test_blas(&cpu, &shape, emulated);
    }
    test_device_list();
    test_bandwidth("tiny-f32");
    test_profiling("tiny-q4_k");
    test_graphs("tiny-q4_0", 1, false);
    test_graphs("tiny-llama3-f32", 1, false);
    test_graphs("tiny-llama3-f32", 12, true);
    test_utilization("tiny-f32");
    if (gpu.iface) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        test_memory("tiny-f32", tot);
        gpu.iface->free(gpu.ctx);
    }
    if (cpu.iface) cpu.iface->free(cpu.ctx);
#else
    // Whole models, bounds as test_vulkan's (see there). On the emulator (about 10 s a model) one
    // of each kind of product and architecture; every op and weight type is tested above.
    static const struct { const char *name; double tol; bool emu; } models[] = {
        {"tiny-f32", 1e-3, true},         {"tiny-f16", 1e-2, false},        {"tiny-bf16", 4e-2, true},
        {"tiny-q8_0", 0.15, false},       {"tiny-q4_0", 0.15, true},       {"tiny-q4_k", 0.15, true},
        {"tiny-q5_k", 0.15, false},       {"tiny-q6_k", 0.15, false},      {"tiny-q4_k_m", 0.15, false},
        {"tiny-iq4_xs", 0.15, false},     {"nano-k-q3_k", 0.15, false},    {"nano-k-q2_k", 0.15, false},
        {"nano-k-iq4_xs", 0.15, false},   {"tiny-q4_1", 0.15, false},       {"tiny-q5_0", 0.15, false},
        {"tiny-q5_1", 0.15, false},       {"tiny-iq4_nl", 0.15, false},    {"tiny-576-q4_k_m", 0.15, true},
        {"tiny-qwen2-f32", 1e-3, false},   {"tiny-qwen2-q4_k", 0.15, false}, {"tiny-llama3-f32", 1e-3, true},
        {"tiny-llama3-f16", 1e-2, false}, {"tiny-llama3-q6_k", 0.15, false}, {"tiny-qwen3-f32", 1e-3, true},
        {"tiny-phi3-q4_0", 0.15, true},   {"tiny-gemma3-f32", 1e-2, true}, {"tiny-gemma2-f32", 1e-2, false},
        {"tiny-gemma2-q8_0", 0.15, true}, {"hf/tiny-qwen3-awq", 0.15, false}, {"hf/tiny-phi3-gptq", 0.15, true},
        {"hf/tiny-gemma2-gptq8", 0.15, false},
        // mixtures of experts (test_vulkan says why olmoe's and gpt-oss's f32 bounds are 5e-3)
        {"tiny-qwen3moe-f32", 1e-3, false}, {"tiny-qwen3moe-q4_k", 0.15, true}, {"tiny-qwen3moe-mxfp4", 0.15, false},
        {"tiny-mixtral-q8_0", 0.15, false}, {"tiny-qwen2moe-f32", 1e-3, true}, {"tiny-olmoe-f32", 5e-3, false},
        {"tiny-gpt-oss-f32", 5e-3, false},  {"tiny-gpt-oss-mxfp4", 0.15, true},
    };
    int left = 0;
    for (size_t i = 0; i < LLM__ARRAY_LEN(models); i++) {
        if (emulated && !models[i].emu) { left++; continue; }
        // the GEMMs: cuBLAS's for every other model, the own for the rest. Quantized models (bound
        // 0.15) on cuBLAS: twice the bound. cuBLAS multiplies their weights as f16 where the CPU and
        // the own kernels sum integers exactly (products' NMSE 1e-7 against 1e-14, test_blas), and
        // these random tiny models magnify it: measured on the emulator, tiny-q4_k 0.10 -> 0.215,
        // tiny-q4_0 0.02 -> 0.13, tiny-gemma2-q8_0 0.02 -> 0.06; a wrong product is off by nats.
        const bool blas = i % 2;
        setenv("LLM_CUDA_CUBLAS", blas ? "1" : "0", 1);
        test_model(models[i].name, blas && models[i].tol >= 0.15 ? 2 * models[i].tol : models[i].tol);
        unsetenv("LLM_CUDA_CUBLAS");
        if (!strcmp(models[i].name, "tiny-llama3-f32")) test_serving("tiny-llama3-f32");
    }
    // a q8_0 KV cache on both backends (bounds: test_vulkan's): heads of 64 (rotated), of 128 with
    // Gemma 3's sliding windows, of 32 (not rotated, as on the CPU)
    test_model_kv("tiny-llama3-f32", 0.15, LLM_KV_Q8_0);
    test_model_kv("tiny-gemma3-f32", 0.15, LLM_KV_Q8_0);
    test_model_kv("tiny-f32", 0.15, LLM_KV_Q8_0);
    // each MoE architecture against llama.cpp's goldens with an f32 cache (as test_vulkan)
    static const struct { const char *name; bool emu; } moe_goldens[] = {
        {"tiny-qwen3moe-f32", false}, {"tiny-mixtral-f32", false}, {"tiny-qwen2moe-f32", true},
        {"tiny-olmoe-f32", false}, {"tiny-gpt-oss-f32", true}};
    for (size_t i = 0; i < LLM__ARRAY_LEN(moe_goldens); i++)
        if (!emulated || moe_goldens[i].emu) test_golden_f32(moe_goldens[i].name, 1e-4);
        else left++;
    if (left) printf("  (%d of the tiny models' checks left out on the emulator: they run on a GPU)\n", left);
    // The real models: all 18 goldens on a GPU; none on the emulator (minutes a golden there)
    static const char *const prompts[] = {"prose", "chat", "code_py", "chinese", "code_c", "french", "list", "math", "recipe"};
    if (emulated) {
        printf("  (the real models' goldens are left out on the emulator: they run on a GPU)\n");
    } else {
        for (int mi = 0; mi < 2; mi++)
            for (size_t pi = 0; pi < LLM__ARRAY_LEN(prompts); pi++) {
                char name[64];
                snprintf(name, sizeof(name), "%s.%s", mi ? "gemma3" : "smollm2", prompts[pi]);
                test_real(name, 1.75, 27);
            }
    }
#endif
#endif
    return test_summary(TEST_NAME);
}
