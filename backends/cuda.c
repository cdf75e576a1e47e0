// CUDA backend: the vtable, memory, graphs (the kernels are backends/cuda.cu)
// === CUDA backend ===
//
// Built in with -DLLM_CUDA (make CUDA=1: NVIDIA's runtime; make CUDA_EMU=1: the CPU emulator of
// the tests, tests/cuda_emu/, behind the same runtime calls): make compiles this file on its own
// like every module, and tools/amalgamate.sh pastes it into llm.c inside #ifdef LLM_CUDA. The
// kernels are backends/cuda.cu's; this half fills the backend vtable and decides what runs.
//
// One stream. Ops do not launch at once: each records its kernel and parameters (struct
// llm__cu_rec), and end_step runs the step's records. A step whose records were seen before (the
// same kernels, shapes and buffers: the key is a hash of the records) is replayed as a CUDA graph
// captured the second time such a step came, so a decode step of a given batch size is one
// graph launch, not hundreds of kernel launches; other steps launch their kernels one by one. The
// parameters never hold the step's data, which kernels read from the step's arrays on the device
// (uploaded in begin_step from pinned memory, before the step's kernels), so a graph stays valid
// from step to step. As the backend contract asks (backends/backend.h), memory is allocated only
// by buf_alloc, weight_load and reserve (the activations' scratch, flash-decoding's partial
// results, the step's arrays on the device and pinned on the host, the records); graphs are made
// by end_step, outside the ops.
//
// Weights are repacked at load (backends/cuda.h, struct llm__cu_w: quants in a plane of their own
// for 128-bit loads). Products of up to LLM__CU_MATVEC_MAX tokens take the GEMV kernels (the
// activations rounded to 8 bits first for the quantized types), more tokens the tensor-core GEMM.
// Products of more tokens may go to cuBLAS instead (see "cuBLAS" below).
// Attention: steps that are mostly prefill (two tokens or more per tile on average) take the
// tiled prefill kernel, others the decode kernel, split over the keys when there are few (head,
// token) pairs and long contexts (flash-decoding).

#include "../src/internal.h"
#include <cuda_runtime_api.h>
#include "cuda.h"

// (the kernels' parameters are hashed as bytes: no padding in them; see backends/cuda.h)
_Static_assert(sizeof(struct llm__cu_w) == 40 && sizeof(struct llm__cu_stepv) == 80 &&
               sizeof(struct llm__cu_rmsnorm) == 64 && sizeof(struct llm__cu_rows) == 104 &&
               sizeof(struct llm__cu_kv_store) == 80 && sizeof(struct llm__cu_quant_act) == 56 &&
               sizeof(struct llm__cu_attn) == 184 && sizeof(struct llm__cu_eltwise) == 80 &&
               sizeof(struct llm__cu_rope) == 80 && sizeof(struct llm__cu_matmul) == 120 &&
               sizeof(struct llm__cu_moe_route) == 80 && sizeof(struct llm__cu_moe_group) == 40 &&
               sizeof(struct llm__cu_matmul_id) == 128 && sizeof(struct llm__cu_moe_sum) == 104,
               "padding in a kernel's parameters");

#define LLM__CU_GRAPHS 16            // graphs kept (least recently used replaced)
#define LLM__CU_GRAPH_TOKENS 512     // steps of more tokens run without graphs (prefill: launches are a sliver)
#define LLM__CU_RECS 16384           // records a step at most; beyond, the step's kernels launch directly
#define LLM__CU_SPLIT_KEYS 256       // flash-decoding: keys per split at least
#define LLM__CU_SPLIT_MAX 32         // ... and at most this many splits
#define LLM__CU_SPLIT_K_MAX 16       // GEMV split-K: slices of K at most
#define LLM__CU_PART_BYTES ((size_t)64 << 20)
#define LLM__CU_PINNED_BYTES ((size_t)8 << 20)   // downloads go through this much pinned memory at a time

#define LLM__CU_BLAS LLM__CU_N      // a record that is a cuBLAS product (struct llm__cu_matmul), not a kernel
#define LLM__CU_NTYPES 72            // weight type numbers are below this
#define LLM__CU_TUNE_SIZES 3         // the GEMMs are timed at up to 3 token counts (llm__cu_blas_choose)
#define LLM__CU_DEQ_BYTES ((size_t)64 << 20)   // cuBLAS for quantized weights: f16 rows at a time, at most
#define LLM__CU_DEQ_SLICES 32        // ... in at most this many slices (else the own GEMM)
#define LLM__CU_PRODUCT_RECS (3 + 2 * LLM__CU_DEQ_SLICES)   // a product's records at most

struct llm__cu_rec {
    int kernel;
    union llm__cu_params p;
};

// cublasGemmEx's C signature (cuBLAS's enums are ints)
typedef int (*llm__cublas_gemm_fn)(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                                   int at, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct,
                                   int ldc, int compute, int algo);

struct llm__cu_graph {
    uint64_t key;
    cudaGraphExec_t exec;   // NULL: seen once, not captured yet
    uint64_t used;          // the step it was last used in (LRU)
};

struct llm__cu {
    int dev;
    char name[256];
    struct cudaDeviceProp prop;
    cudaStream_t stream;
    bool graphs_off;             // LLM_CUDA_GRAPHS=0 in the environment: every step launches its kernels
    // scratch: rounded activations (q: max_tokens x max_cols int8, then dq), flash-decoding's
    // partial results, the step's arrays
    struct llm__buf act, part, stepbuf;
    struct llm__buf moe;         // a mixture of experts' slots grouped by expert (k_moe_group's lists)
    int64_t act_cols, act_rows;
    int32_t *host;               // pinned: the step's arrays gathered before their upload
    size_t host_words;
    void *pinned;                // pinned: downloads
    int bt_stride;               // block table columns on the device (reserve's max_blocks)
    const struct llm__step *step;
    struct llm__cu_stepv sv;     // the step's arrays on the device
    int max_pos;
    int head_dim;   // reserve's
    // the step's records
    struct llm__cu_rec *recs;
    int n_recs;
    bool direct;                 // the step overflowed its records: launched as it went
    struct llm__cu_graph graphs[LLM__CU_GRAPHS];
    uint64_t steps;
    long long graph_hits, graph_captures;   // (for the tests)
    struct llm__err err;         // the first failure of the step's ops
    size_t allocated;
    // cuBLAS (opened by reserve; see "cuBLAS")
    int blas_env;                // LLM_CUDA_CUBLAS: -1 not set (measure), 0 never, 1 always
    bool blas_tried;
    void *blas_lib, *blas;       // the library, its handle
    int (*blas_destroy)(void *);
    llm__cublas_gemm_fn blas_gemm;
    struct llm__buf blas_ws;     // its workspace (cuBLAS allocates none while a graph is captured)
    int64_t wK[LLM__CU_NTYPES], wN[LLM__CU_NTYPES];   // per weight type: the largest weight loaded
    int blas_from[LLM__CU_NTYPES];      // ... its products of this many tokens or more go to cuBLAS (0: none)
    float blas_ms[LLM__CU_NTYPES][LLM__CU_TUNE_SIZES][2];   // ... measured: own GEMM, cuBLAS (ms; 0: not)
    struct llm__buf deq;         // quantized weights as f16 for cuBLAS, a slice of rows at a time
    char desc[1024];             // the device's name and what reserve chose
};

// code > 0: a cudaError_t; < 0: a cuBLAS status, negated
static const char *llm__cu_strerror(int code) {
    if (code >= 0) return cudaGetErrorString((cudaError_t)code);
    switch (-code) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "a cuBLAS error";
    }
}

// The runtime's current device is per thread: every entry that touches the device makes it this
// backend's first (engines on different devices may be driven from one thread).
static void llm__cu_here(const struct llm__cu *cu) { cudaSetDevice(cu->dev); }

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void llm__cu_error(struct llm__cu *cu, enum llm_status st, const char *fmt, ...) {
    if (cu->err.msg[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cu->err.msg, sizeof(cu->err.msg), fmt, ap);
    va_end(ap);
    cu->err.status = st;
}

// --- cuBLAS ---
//
// Products of more than LLM__CU_MATVEC_MAX tokens may run as cuBLAS's GEMM (cublasGemmEx: f32,
// f16 or bf16 inputs, f32 sums and results) instead of this backend's own: F32, F16 and BF16
// weights as they are (the activations converted to their type first, as the CPU rounds them),
// quantized weights dequantized to f16 a slice of rows at a time (LLM__CU_DEQ_BYTES of scratch;
// the activations rounded to 8 bits as the CPU rounds them, then given to cuBLAS as f16).
// cuBLAS is opened at run time, not linked (the build then runs where only the driver is, and a
// machine without cuBLAS keeps the own GEMM): libcublas.so.<the runtime's major version>, from
// the library path, $CUDA_HOME/lib64 or /usr/local/cuda/lib64. reserve measures both, per weight
// type the model has, on products of the largest such weight's shape (up to LLM__CU_TUNE_K x
// LLM__CU_TUNE_N) at up to 3 token counts, and keeps the faster (llm__cu_blas_choose).
// LLM_CUDA_CUBLAS=0 never uses cuBLAS, =1 always (when it opens). The choice and the times are in
// the device's name (llm run -v, llm bench --json).
#ifdef LLM_CUDA_EMU_RUNTIME_H   // the tests' emulator has a cuBLAS of its own
#define LLM__CU_TUNE_K 64   // (the emulator is slow: a small product)
#define LLM__CU_TUNE_N 64
#define LLM__CU_TUNE_T 16
static void *llm__cu_dlopen(const char *name) { return llm_emu_cublas_open(name); }
static void *llm__cu_dlsym(void *lib, const char *name) { return llm_emu_cublas_sym(lib, name); }
static void llm__cu_dlclose(void *lib) { (void)lib; }
#else
#include <dlfcn.h>
#define LLM__CU_TUNE_K 4096
#define LLM__CU_TUNE_N 4096
#define LLM__CU_TUNE_T 512
static void *llm__cu_dlopen(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static void *llm__cu_dlsym(void *lib, const char *name) { return dlsym(lib, name); }
static void llm__cu_dlclose(void *lib) { dlclose(lib); }
#endif
#define LLM__CU_BLAS_WS ((size_t)32 << 20)   // cuBLAS's workspace (what it asks for on Hopper)
#define LLM__CU_TUNE_RUNS 10                  // products timed together (launch costs amortised as in a graph)

// F32 0, F16 1, BF16 2; -1 for other types
static int llm__cu_float_index(int type) {
    return type == LLM__TYPE_F32 ? 0 : type == LLM__TYPE_F16 ? 1 : type == LLM__TYPE_BF16 ? 2 : -1;
}

// d (ntok x N, rows sd apart) = x w^T: for cuBLAS (column-major), d^T (N x ntok) = w^T (w: K x N
// column-major, transposed) times x^T (K x ntok). F16 / BF16 take the converted activations (q:
// ntok rows of K), F32 x itself. 0, or a cuBLAS status negated.
static int llm__cu_blas_gemm(struct llm__cu *cu, const struct llm__cu_matmul *p) {
    static const int dtype[3] = {0, 2, 14};   // CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
    const int fi = llm__cu_float_index(p->w.type);
    if (!cu->blas || fi < 0) return -1;
    const float one = 1.0f, zero = 0.0f;
    const void *b = fi == 0 ? (const void *)p->x : (const void *)p->q;
    const int64_t ldb = fi == 0 ? p->sx : p->w.K;
    int st = cu->blas_gemm(cu->blas, 1, 0, (int)p->w.N, (int)p->ntok, (int)p->w.K, &one, p->w.body, dtype[fi],
                           (int)p->w.K, b, dtype[fi], (int)ldb, &zero, p->d, 0, (int)p->sd,
                           68 /* CUBLAS_COMPUTE_32F */, -1);
    return st ? -st : 0;
}

// Describes up to max CUDA devices (entry i: device i of llm__cu_backend_new). The number of
// devices (0 when there is no driver or no device), or -1 with the reason in e.
static int llm__cu_list_devices(struct llm_device *out, int max, struct llm__err *e) {
    int n = 0;
    (void)e;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   // (no driver, no device: none listed)
        return 0;
    }
    int drv = 0;
    cudaDriverGetVersion(&drv);
    for (int i = 0; i < n && i < max; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        struct llm_device *d = &out[i];
        memset(d, 0, sizeof(*d));
        d->backend = LLM_BACKEND_CUDA;
        d->index = i;
        snprintf(d->name, sizeof(d->name), "%s", p.name);
        snprintf(d->type, sizeof(d->type), "discrete");
        d->memory_bytes = p.totalGlobalMem;
        d->subgroup_size = p.warpSize;
        d->subgroup_arithmetic = 1;
        d->storage_16bit = 1;
        d->compute_units = p.multiProcessorCount;
        snprintf(d->api_version, sizeof(d->api_version), "%d.%d", drv / 1000, drv % 1000 / 10);
        snprintf(d->compute_capability, sizeof(d->compute_capability), "%d.%d", p.major, p.minor);
    }
    return LLM__MIN(n, max);
}

static void llm__cu_buf_free(void *ctx, struct llm__buf *b);

static void llm__cu_graphs_clear(struct llm__cu *cu) {
    for (int i = 0; i < LLM__CU_GRAPHS; i++)
        if (cu->graphs[i].exec) cudaGraphExecDestroy(cu->graphs[i].exec);
    memset(cu->graphs, 0, sizeof(cu->graphs));
}

static void llm__cu_free(void *ctx) {
    struct llm__cu *cu = ctx;
    if (!cu) return;
    llm__cu_here(cu);
    if (cu->stream) {
        cudaStreamSynchronize(cu->stream);
        llm__cu_graphs_clear(cu);
        if (cu->blas) cu->blas_destroy(cu->blas);
        struct llm__buf *scratch[] = {&cu->act, &cu->part, &cu->stepbuf, &cu->blas_ws, &cu->deq, &cu->moe};
        for (size_t i = 0; i < LLM__ARRAY_LEN(scratch); i++)
            if (scratch[i]->handle) llm__cu_buf_free(cu, scratch[i]);
        if (cu->host) cudaFreeHost(cu->host);
        if (cu->pinned) cudaFreeHost(cu->pinned);
        cudaStreamDestroy(cu->stream);
    }
    // (cuBLAS's library stays loaded: unloading it and cuBLASLt is known to crash at exit)
    free(cu->recs);
    free(cu);
}

static enum llm_status llm__cu_buf_alloc(void *ctx, struct llm__buf *b, size_t size, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    memset(b, 0, sizeof(*b));
    void *p = NULL;
    // (rounded up to 16 bytes: kernels read 16 bytes at a time)
    cudaError_t r = cudaMalloc(&p, LLM__MAX((size + 15) & ~(size_t)15, 16));
    if (r != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return llm__fail(e, LLM_ERR_NOMEM,
                         "cuda: not enough device memory for %.1f MiB more (%s; %.2f GiB free of %.2f GiB "
                         "on %s, %.2f GiB of it this engine's); use a smaller model, --kv-cache-memory, "
                         "--gpu-memory-utilization or --max-num-batched-tokens, or --backend cpu",
                         (double)size / (1 << 20), cudaGetErrorString(r), (double)fr / (1 << 30),
                         (double)tot / (1 << 30), cu->name, (double)cu->allocated / (1 << 30));
    }
    b->handle = p;
    b->size = size;
    cu->allocated += size;
    return LLM_OK;
}

static void llm__cu_buf_free(void *ctx, struct llm__buf *b) {
    struct llm__cu *cu = ctx;
    if (b->handle) {
        cudaFree(b->handle);
        cu->allocated -= b->size;
    }
    memset(b, 0, sizeof(*b));
}

static inline char *llm__cu_ptr(const struct llm__buf *b, size_t offs) { return (char *)b->handle + offs; }

// (on the backend's stream, which does not wait for the legacy default stream's copies)
static void llm__cu_upload(void *ctx, struct llm__buf *b, size_t offs, const void *src, size_t n) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    cudaError_t r = cudaMemcpyAsync(llm__cu_ptr(b, offs), src, n, cudaMemcpyHostToDevice, cu->stream);
    if (r == cudaSuccess) r = cudaStreamSynchronize(cu->stream);
    if (r != cudaSuccess)
        llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: upload of %zu bytes failed (%s)", n, cudaGetErrorString(r));
}

// Downloads go through pinned memory (a copy from the device into pageable memory would be staged
// by the driver anyway, at a lower rate), in pieces of its size.
static void llm__cu_download(void *ctx, const struct llm__buf *b, size_t offs, void *dst, size_t n) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    for (size_t done = 0; done < n;) {
        size_t len = cu->pinned ? LLM__MIN(n - done, LLM__CU_PINNED_BYTES) : n - done;
        void *to = cu->pinned ? cu->pinned : (char *)dst + done;
        cudaError_t r = cudaMemcpyAsync(to, llm__cu_ptr(b, offs + done), len, cudaMemcpyDeviceToHost, cu->stream);
        if (r == cudaSuccess) r = cudaStreamSynchronize(cu->stream);
        if (r != cudaSuccess) {
            llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: download of %zu bytes failed (%s)", n, cudaGetErrorString(r));
            memset((char *)dst + done, 0, n - done);
            return;
        }
        if (cu->pinned) memcpy((char *)dst + done, cu->pinned, len);
        done += len;
    }
}

// The weight types with kernels (llm__cu_layout): every type the CPU multiplies.
static enum llm_status llm__cu_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0, int64_t ne1,
                                           const void *data, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    int off, len, hdr;
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    if (!ti || !llm__cu_layout(type, &off, &len, &hdr))
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "cuda: weights of type %s are not supported (f32, f16, bf16, q8_0, q4_0, "
                         "q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, AWQ/GPTQ int4 "
                         "and int8)",
                         ti ? ti->name : "unknown");
    size_t n = llm__row_bytes(type, ne0) * (size_t)ne1;
    enum llm_status st = llm__cu_buf_alloc(cu, &w->buf, n, e);
    if (st) return st;
    if (len == 0) {   // float types, as they are
        llm__cu_upload(cu, &w->buf, 0, data, n);
    } else {          // quants to the body plane, the rest of each block to the header plane
        const size_t nb = n / ti->block_bytes, body = nb * (size_t)len;
        uint8_t *h = malloc(n);
        if (!h) {
            llm__cu_buf_free(cu, &w->buf);
            return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        }
        const uint8_t *src = data;
        for (size_t i = 0; i < nb; i++) {
            const uint8_t *blk = src + i * ti->block_bytes;
            memcpy(h + i * (size_t)len, blk + off, (size_t)len);
            memcpy(h + body + i * (size_t)hdr, blk, (size_t)off);
            memcpy(h + body + i * (size_t)hdr + off, blk + off + len, (size_t)hdr - (size_t)off);
        }
        llm__cu_upload(cu, &w->buf, 0, h, n);
        free(h);
    }
    if (cu->err.msg[0]) {
        llm__cu_buf_free(cu, &w->buf);
        enum llm_status s = llm__fail(e, cu->err.status, "%s", cu->err.msg);
        cu->err = (struct llm__err){{0}, LLM_OK};
        return s;
    }
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->layout = len ? 1 : 0;
    if (type >= 0 && type < LLM__CU_NTYPES && ne0 * ne1 > cu->wK[type] * cu->wN[type])
        cu->wK[type] = ne0, cu->wN[type] = ne1;
    return LLM_OK;
}

static void llm__cu_weight_free(void *ctx, struct llm__weight *w) { llm__cu_buf_free(ctx, &w->buf); }

// the kernels' view of K x N weights of a type at base, as weight_load lays them out
static struct llm__cu_w llm__cu_wview_of(const void *base, int type, int64_t K, int64_t N) {
    int off = 0, len = 0, hdr = 0;
    llm__cu_layout(type, &off, &len, &hdr);
    size_t n = llm__row_bytes(type, K) * (size_t)N;
    size_t body = len ? n / llm__type_info((uint32_t)type)->block_bytes * (size_t)len : n;
    return (struct llm__cu_w){base, len ? (const uint8_t *)base + body : NULL, K, N, type, 0};
}
static struct llm__cu_w llm__cu_wview(const struct llm__weight *w) {
    return llm__cu_wview_of(w->buf.handle, w->type, w->ne0, w->ne1);
}

static enum llm_status llm__cu_scratch(struct llm__cu *cu, struct llm__buf *b, size_t n, struct llm__err *e) {
    if (b->handle && b->size >= n) return LLM_OK;
    if (b->handle) llm__cu_buf_free(cu, b);
    return llm__cu_buf_alloc(cu, b, n, e);
}

// Words of the step's arrays: tokens, positions, seq_idx, slot_mapping (n each), out_rows (n_out),
// the block table (n_seqs x the reserved columns), prefill tiles (2 n).
static size_t llm__cu_step_words(size_t n, size_t n_out, size_t n_seqs, size_t cols) {
    return 6 * n + n_out + n_seqs * cols;
}

static int llm__cu_run(struct llm__cu *cu, int kernel, const union llm__cu_params *p);

// Opens cuBLAS (once): false when it is not there or fails to start (the own GEMM then).
static bool llm__cu_blas_open(struct llm__cu *cu) {
    if (cu->blas_tried) return cu->blas != NULL;
    cu->blas_tried = true;
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    char name[3][300];
    const char *home = getenv("CUDA_HOME");
    snprintf(name[0], sizeof(name[0]), "libcublas.so.%d", rt / 1000);
    snprintf(name[1], sizeof(name[1]), "%s/lib64/libcublas.so.%d", home && *home ? home : "/usr/local/cuda", rt / 1000);
    snprintf(name[2], sizeof(name[2]), "/usr/local/cuda/lib64/libcublas.so.%d", rt / 1000);
    for (int i = 0; i < 3 && !cu->blas_lib; i++) cu->blas_lib = llm__cu_dlopen(name[i]);
    if (!cu->blas_lib) return false;
    int (*create)(void **) = (int (*)(void **))llm__cu_dlsym(cu->blas_lib, "cublasCreate_v2");
    int (*set_stream)(void *, cudaStream_t) =
        (int (*)(void *, cudaStream_t))llm__cu_dlsym(cu->blas_lib, "cublasSetStream_v2");
    int (*set_ws)(void *, void *, size_t) =
        (int (*)(void *, void *, size_t))llm__cu_dlsym(cu->blas_lib, "cublasSetWorkspace_v2");
    cu->blas_destroy = (int (*)(void *))llm__cu_dlsym(cu->blas_lib, "cublasDestroy_v2");
    cu->blas_gemm = (llm__cublas_gemm_fn)llm__cu_dlsym(cu->blas_lib, "cublasGemmEx");
    void *h = NULL;
    if (!create || !set_stream || !set_ws || !cu->blas_destroy || !cu->blas_gemm || create(&h) || !h) {
        cudaGetLastError();
        llm__cu_dlclose(cu->blas_lib);
        cu->blas_lib = NULL;
        return false;
    }
    cu->blas = h;
    struct llm__err ws_e = {{0}, LLM_OK};
    if (set_stream(h, cu->stream) || llm__cu_buf_alloc(cu, &cu->blas_ws, LLM__CU_BLAS_WS, &ws_e) ||
        set_ws(h, cu->blas_ws.handle, LLM__CU_BLAS_WS)) {
        if (cu->blas_ws.handle) llm__cu_buf_free(cu, &cu->blas_ws);
        cu->blas_destroy(h);
        cu->blas = NULL;
        cudaGetLastError();
        return false;
    }
    return true;
}

// Split-K for the GEMV (a warp per row, 4 rows a block): a product of so few rows that its blocks
// would leave SMs idle (fewer than 4 per SM) is split along K into up to LLM__CU_SPLIT_K_MAX
// slices (each at least one step of a warp: 256 columns of a float row, 32 chunks of 32 quants),
// whose partial sums MATVEC_REDUCE adds up. 1: not split.
static int llm__cu_matvec_splits(const struct llm__cu *cu, int type, int64_t K, int64_t N, int64_t ntok) {
    const bool fl = type == LLM__TYPE_F32 || type == LLM__TYPE_F16 || type == LLM__TYPE_BF16;
    const int64_t blocks = (N + 3) / 4, want = 4 * (int64_t)cu->prop.multiProcessorCount;
    const int64_t units = fl ? (K / 8 * 8 + 255) / 256 : (K / 32 + 31) / 32;
    if (blocks >= want || units < 2) return 1;
    int64_t s = LLM__MIN(LLM__MIN(units, (int64_t)LLM__CU_SPLIT_K_MAX), (want + blocks - 1) / blocks);
    s = LLM__MIN(s, (int64_t)(cu->part.size / ((size_t)ntok * (size_t)N * sizeof(float))));
    return s > 1 ? (int)s : 1;
}

// Whether K x N weights of a type can go to cuBLAS: a float type, or a quantized one whose rows
// as f16 fit the scratch in at most LLM__CU_DEQ_SLICES slices.
static bool llm__cu_blas_fits(const struct llm__cu *cu, int type, int64_t K, int64_t N) {
    if (llm__cu_float_index(type) >= 0) return true;
    const int64_t rows = (int64_t)(cu->deq.size / ((size_t)K * 2));
    return rows > 0 && (N + rows - 1) / rows <= LLM__CU_DEQ_SLICES;
}

// Whether product m goes to cuBLAS: as many tokens as reserve chose cuBLAS for, for its type, and
// it fits.
static bool llm__cu_use_blas(const struct llm__cu *cu, const struct llm__cu_matmul *m) {
    return m->ntok > LLM__CU_MATVEC_MAX && m->w.type >= 0 && m->w.type < LLM__CU_NTYPES && cu->blas_from[m->w.type] &&
           m->ntok >= cu->blas_from[m->w.type] && llm__cu_blas_fits(cu, m->w.type, m->w.K, m->w.N);
}

// The records of product m into r (LLM__CU_PRODUCT_RECS at most): by the own kernels (the GEMV
// with split-K where it pays, the GEMM) or (blas) by cuBLAS. The activations are rounded first to
// 8 bits as the CPU rounds them for the weight type (quantized types; for cuBLAS the rounded
// values then written as f16) or converted to f16 / bf16 (cuBLAS, F16 / BF16), unless *rounded
// says the scratch holds them so already (it is updated: the weights of one call share their
// input). A quantized weight goes to cuBLAS as f16, a slice of its rows at a time. How many
// records.
static int llm__cu_product_recs(const struct llm__cu *cu, const struct llm__cu_matmul *m, bool blas, int *rounded,
                                struct llm__cu_rec *r) {
    const int type = m->w.type, fi = llm__cu_float_index(type);
    const int q8 = fi >= 0 ? -1 : llm__type_info((uint32_t)type)->vec_dot_type == LLM__TYPE_Q8_K ? 1 : 0;
    const int mode = !blas ? q8 : fi < 0 ? 4 + q8 : type == LLM__TYPE_F32 ? -1 : type == LLM__TYPE_BF16 ? 3 : 2;
    int8_t *q = (int8_t *)cu->act.handle;
    float *dq = (float *)(q + (size_t)cu->act_rows * (size_t)cu->act_cols);
    struct llm__cu_matmul p = *m;
    int n = 0;
    memset(r, 0, LLM__CU_PRODUCT_RECS * sizeof(*r));   // (records are hashed as bytes)
    if (mode >= 0) {
        if (*rounded != mode) {
            r[n].kernel = LLM__CU_QUANT_ACT;
            r[n++].p.quant_act =
                (struct llm__cu_quant_act){q, mode < 2 ? dq : NULL, m->x, m->ntok, m->w.K, m->sx, mode, 0};
            *rounded = mode;
        }
        p.q = q;
        p.dq = mode < 2 ? dq : NULL;
    }
    if (!blas) {
        if (m->ntok <= LLM__CU_MATVEC_MAX) {
            p.nsplit = llm__cu_matvec_splits(cu, type, m->w.K, m->w.N, m->ntok);
            p.part = p.nsplit > 1 ? (float *)cu->part.handle : NULL;
        }
        r[n].kernel = m->ntok > LLM__CU_MATVEC_MAX ? LLM__CU_MATMUL : LLM__CU_MATVEC;
        r[n++].p.matmul = p;
        if (p.nsplit > 1) {
            r[n].kernel = LLM__CU_MATVEC_REDUCE;
            r[n++].p.matmul = p;
        }
        return n;
    }
    p.bias = NULL;   // (cuBLAS has none: added after)
    if (fi >= 0) {
        r[n].kernel = LLM__CU_BLAS;
        r[n++].p.matmul = p;
    } else {
        int64_t step = (int64_t)(cu->deq.size / ((size_t)m->w.K * 2));
        step = step >= 64 ? step / 64 * 64 : step;   // (slices of whole 64-row tiles: aligned outputs)
        for (int64_t n0 = 0; n0 < m->w.N; n0 += step) {
            const int64_t rows = LLM__MIN(step, m->w.N - n0);
            r[n].kernel = LLM__CU_DEQUANT;
            r[n++].p.dequant = (struct llm__cu_dequant){m->w, cu->deq.handle, n0, rows};
            r[n].kernel = LLM__CU_BLAS;
            r[n].p.matmul = p;
            r[n].p.matmul.w = (struct llm__cu_w){cu->deq.handle, NULL, m->w.K, rows, LLM__TYPE_F16, 0};
            r[n++].p.matmul.d = m->d + n0;
        }
    }
    if (m->bias) {
        r[n].kernel = LLM__CU_ELTWISE;
        r[n++].p.eltwise =
            (struct llm__cu_eltwise){m->d, m->d, m->bias, m->ntok, m->w.N, m->sd, m->sd, 0, 0, 0.0f, 0.0f, 0};
    }
    return n;
}

// Times products of weight type `type` (K x N, at each of ns token counts T[i]) by the own GEMM
// and by cuBLAS: ms[i][0], ms[i][1], per product, the best of 2 rounds (after a warm-up round) of
// LLM__CU_TUNE_RUNS products between two events, the two ways alternating. 0: not run (no memory
// for its buffers, which are its own). LLM_ERR_BACKEND when the device failed (an error that
// stays: the context is lost).
static enum llm_status llm__cu_blas_measure(struct llm__cu *cu, int type, int64_t K, int64_t N, const int64_t *T,
                                            int ns, float (*ms)[2], struct llm__err *err) {
    struct llm__err e = {{0}, LLM_OK};
    struct llm__buf w = {0}, x = {0}, d = {0};
    cudaEvent_t ev[2] = {NULL, NULL};
    const int64_t Tmax = T[ns - 1];
    memset(ms, 0, sizeof(float) * 2 * (size_t)ns);
    bool ok = llm__cu_blas_fits(cu, type, K, N) && Tmax * K <= cu->act_rows * cu->act_cols &&
              !llm__cu_buf_alloc(cu, &w, llm__row_bytes(type, K) * (size_t)N, &e) &&
              !llm__cu_buf_alloc(cu, &x, (size_t)(Tmax * K) * 4, &e) &&
              !llm__cu_buf_alloc(cu, &d, (size_t)(Tmax * N) * 4, &e) &&
              cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess;
    // (bytes 0x3c: f16 1.06, bf16 and f32 0.011; quantized blocks of such scales and quants)
    ok = ok && cudaMemsetAsync(w.handle, 0x3c, w.size, cu->stream) == cudaSuccess &&
         cudaMemsetAsync(x.handle, 0x3c, x.size, cu->stream) == cudaSuccess;
    struct llm__cu_rec r[LLM__CU_PRODUCT_RECS];
    for (int i = 0; i < ns && ok; i++) {
        struct llm__cu_matmul m;
        memset(&m, 0, sizeof(m));
        m = (struct llm__cu_matmul){llm__cu_wview_of(w.handle, type, K, N), d.handle, x.handle, NULL, NULL, NULL, NULL,
                                    T[i], N, K, 1, 0};
        for (int round = 0; round < 3 && ok; round++)
            for (int b = 0; b < 2 && ok; b++) {
                ok = cudaEventRecord(ev[0], cu->stream) == cudaSuccess;
                for (int run = 0; run < LLM__CU_TUNE_RUNS && ok; run++) {
                    int rounded = -1;   // (each product converts its input, as in a step)
                    const int n = llm__cu_product_recs(cu, &m, b == 1, &rounded, r);
                    for (int j = 0; j < n && ok; j++) ok = llm__cu_run(cu, r[j].kernel, &r[j].p) == 0;
                }
                float t = 0;
                ok = ok && cudaEventRecord(ev[1], cu->stream) == cudaSuccess &&
                     cudaEventSynchronize(ev[1]) == cudaSuccess &&
                     cudaEventElapsedTime(&t, ev[0], ev[1]) == cudaSuccess;
                t /= LLM__CU_TUNE_RUNS;
                if (ok && round > 0 && (round == 1 || t < ms[i][b])) ms[i][b] = t;   // (round 0: the warm-up)
            }
    }
    cudaError_t sync = cudaStreamSynchronize(cu->stream);
    cudaGetLastError();
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    struct llm__buf *bufs[] = {&w, &x, &d};
    for (int i = 0; i < 3; i++)
        if (bufs[i]->handle) llm__cu_buf_free(cu, bufs[i]);
    if (!ok) memset(ms, 0, sizeof(float) * 2 * (size_t)ns);
    if (sync != cudaSuccess)
        return llm__fail(err, LLM_ERR_BACKEND, "cuda: timing the GEMMs of %s weights failed (%s)",
                         llm__type_info((uint32_t)type)->name, cudaGetErrorString(sync));
    return LLM_OK;
}

// reserve's choice, per weight type the model has: cuBLAS or the own GEMM (see "cuBLAS"). Both
// are timed at up to LLM__CU_TUNE_SIZES token counts (LLM__CU_TUNE_T / 32, / 4 and itself, within
// the step's tokens); products of a type go to cuBLAS from the smallest count from which cuBLAS
// was the faster at every count measured (a quantized weight is dequantized whole for each
// product: cuBLAS pays off for enough tokens only).
static enum llm_status llm__cu_blas_choose(struct llm__cu *cu, const struct llm__shape *shape, struct llm__err *e) {
    snprintf(cu->desc, sizeof(cu->desc), "%s", cu->name);
    static const int shift[LLM__CU_TUNE_SIZES] = {5, 2, 0};
    int64_t T[LLM__CU_TUNE_SIZES];
    int ns = 0;
    for (int i = 0; i < LLM__CU_TUNE_SIZES; i++) {
        int64_t t = LLM__MIN((int64_t)shape->max_tokens,
                             LLM__MAX((int64_t)LLM__CU_TUNE_T >> shift[i], (int64_t)LLM__CU_MATVEC_MAX + 1));
        if (!ns || t > T[ns - 1]) T[ns++] = t;
    }
    for (int t = 0; t < LLM__CU_NTYPES; t++) {
        cu->blas_from[t] = 0;
        if (!cu->wK[t] || shape->max_tokens <= LLM__CU_MATVEC_MAX) continue;
        const char *tn = llm__type_info((uint32_t)t)->name;
        size_t at = strlen(cu->desc);
        if (!cu->blas || !llm__cu_blas_fits(cu, t, cu->wK[t], 1)) {
            snprintf(cu->desc + at, sizeof(cu->desc) - at, "; %s GEMM: own (%s)", tn,
                     cu->blas_env == 0 ? "LLM_CUDA_CUBLAS=0" : !cu->blas ? "no cuBLAS" : "no memory for cuBLAS");
            continue;
        }
        if (cu->blas_env == 1) {
            cu->blas_from[t] = LLM__CU_MATVEC_MAX + 1;
            snprintf(cu->desc + at, sizeof(cu->desc) - at, "; %s GEMM: cuBLAS (LLM_CUDA_CUBLAS=1)", tn);
            continue;
        }
        float (*ms)[2] = cu->blas_ms[t];
        if (!ms[ns - 1][0]) {
            const int64_t blck = (int64_t)llm__type_info((uint32_t)t)->blck;   // (K: whole blocks)
            const int64_t K = LLM__MIN(cu->wK[t], LLM__MAX((int64_t)LLM__CU_TUNE_K / blck, (int64_t)1) * blck);
            enum llm_status st =
                llm__cu_blas_measure(cu, t, K, LLM__MIN(cu->wN[t], (int64_t)LLM__CU_TUNE_N), T, ns, ms, e);
            if (st) return st;
        }
        if (!ms[ns - 1][0]) {
            snprintf(cu->desc + at, sizeof(cu->desc) - at, "; %s GEMM: own (not measured: no memory)", tn);
            continue;
        }
        for (int i = ns - 1; i >= 0 && ms[i][1] < ms[i][0]; i--)
            cu->blas_from[t] = i ? (int)T[i - 1] + 1 : LLM__CU_MATVEC_MAX + 1;
        at += (size_t)snprintf(cu->desc + at, sizeof(cu->desc) - at, "; %s GEMM: ", tn);
        if (at < sizeof(cu->desc)) {
            if (cu->blas_from[t])
                at += (size_t)snprintf(cu->desc + at, sizeof(cu->desc) - at, "cuBLAS from %d tokens", cu->blas_from[t]);
            else at += (size_t)snprintf(cu->desc + at, sizeof(cu->desc) - at, "own");
        }
        for (int i = 0; i < ns && at < sizeof(cu->desc); i++)
            at += (size_t)snprintf(cu->desc + at, sizeof(cu->desc) - at, "%s%lld: cuBLAS %.3f / own %.3f ms%s",
                                   i ? ", " : " (", (long long)T[i], (double)ms[i][1], (double)ms[i][0],
                                   i == ns - 1 ? ")" : "");
    }
    return LLM_OK;
}

static enum llm_status llm__cu_reserve(void *ctx, const struct llm__shape *shape, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    cu->head_dim = shape->head_dim;   // (kv_store of a q8_0 cache quantizes head by head)
    if (shape->head_dim > LLM__CU_MAX_HEAD_DIM)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "cuda: heads of %d dimensions (at most %d)", shape->head_dim,
                         LLM__CU_MAX_HEAD_DIM);
    if (shape->n_head_kv < 1 || shape->n_head % shape->n_head_kv)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "cuda: %d query heads over %d KV heads", shape->n_head,
                         shape->n_head_kv);
    cu->bt_stride = LLM__MAX(shape->max_blocks, 1);
    size_t words = llm__cu_step_words((size_t)shape->max_tokens, (size_t)shape->max_out, (size_t)shape->max_seqs,
                                      (size_t)cu->bt_stride);
    int64_t cols = (shape->max_cols + 31) / 32 * 32;
    // rounded activations: q (max_tokens x cols int8; a mixture of experts' down projection: a row
    // per slot, k a token), then dq (a float a 32)
    const int64_t slots = (int64_t)shape->max_tokens * LLM__MAX(shape->n_expert_used, 1);
    cu->act_rows = LLM__MAX(slots, LLM__CU_MATVEC_MAX);
    // (cuBLAS for float weights: the activations converted to f16 / bf16 there, 2 bytes each)
    size_t deq = 0;   // (the largest quantized weight as f16, up to LLM__CU_DEQ_BYTES)
    bool any = false;
    for (int t = 0; t < LLM__CU_NTYPES; t++) {
        any = any || cu->wK[t];
        if (cu->wK[t] && llm__cu_float_index(t) < 0) deq = LLM__MAX(deq, (size_t)(cu->wK[t] * cu->wN[t]) * 2);
    }
    bool blas = cu->blas_env != 0 && any && shape->max_tokens > LLM__CU_MATVEC_MAX && llm__cu_blas_open(cu);
    const size_t act = (size_t)cu->act_rows * (size_t)cols;
    struct llm__err blas_e = {{0}, LLM_OK};   // (cuBLAS's buffers: without them, the own GEMM)
    if (blas && (llm__cu_scratch(cu, &cu->act, act * 2, &blas_e) ||
                 (deq && llm__cu_scratch(cu, &cu->deq, LLM__MIN(deq, LLM__CU_DEQ_BYTES), &blas_e)))) {
        if (cu->deq.handle) llm__cu_buf_free(cu, &cu->deq);
        blas = false;
    }
    if (!blas && cu->blas) {   // (not needed, or no memory for its buffers: the own GEMM from now on)
        cu->blas_destroy(cu->blas);
        cu->blas = NULL;
        llm__cu_buf_free(cu, &cu->blas_ws);
    }
    enum llm_status st = llm__cu_scratch(cu, &cu->act, blas ? act * 2 : act * 9 / 8, e);
    if (!st) st = llm__cu_scratch(cu, &cu->part, LLM__CU_PART_BYTES, e);
    if (!st) st = llm__cu_scratch(cu, &cu->stepbuf, words * 4, e);
    if (!st && shape->n_expert)
        st = llm__cu_scratch(cu, &cu->moe, ((size_t)shape->n_expert + 1 + (size_t)slots) * 4, e);
    if (st) return st;
    cu->act_cols = cols;
    if (words > cu->host_words) {
        if (cu->host) cudaFreeHost(cu->host);
        cu->host = NULL;
        cu->host_words = 0;
        if (cudaMallocHost((void **)&cu->host, words * 4) != cudaSuccess)
            return cudaGetLastError(), llm__fail(e, LLM_ERR_NOMEM, "cuda: no pinned host memory for the step's arrays");
        cu->host_words = words;
    }
    if (!cu->pinned && cudaMallocHost(&cu->pinned, LLM__CU_PINNED_BYTES) != cudaSuccess) {
        cudaGetLastError();
        cu->pinned = NULL;   // (downloads then go straight to pageable memory)
    }
    // (zeroed: records are hashed as bytes, the padding after their kernel number too)
    if (!cu->recs && !(cu->recs = calloc(LLM__CU_RECS, sizeof(*cu->recs))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    llm__cu_graphs_clear(cu);   // (their buffers may have moved)
    return llm__cu_blas_choose(cu, shape, e);
}

// Device memory left for the KV cache: what is free, less a margin for the activations, scratch
// and graphs allocated after it (512 MiB or 2% of the device, the larger).
static size_t llm__cu_mem_free(void *ctx) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return cudaGetLastError(), 0;
    size_t margin = LLM__MAX((size_t)512 << 20, tot / 50);
    return fr > margin ? fr - margin : 0;
}

// Runs a record on the stream: its kernel, or its cuBLAS product. 0, or llm__cu_strerror's code.
static int llm__cu_run(struct llm__cu *cu, int kernel, const union llm__cu_params *p) {
    return kernel == LLM__CU_BLAS ? llm__cu_blas_gemm(cu, &p->matmul) : llm__cu_launch(kernel, p, cu->stream);
}

// Launches the step's records so far, kernel by kernel (the first failure kept), and empties them.
static void llm__cu_launch_recs(struct llm__cu *cu) {
    for (int i = 0; i < cu->n_recs && !cu->err.msg[0]; i++) {
        int r = llm__cu_run(cu, cu->recs[i].kernel, &cu->recs[i].p);
        if (r) llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: a kernel launch failed (%s)", llm__cu_strerror(r));
    }
    cu->n_recs = 0;
}

// Records kernel k (run at end_step); a step with more records than the array holds launches the
// ones recorded and then each as it comes.
static void llm__cu_rec(struct llm__cu *cu, int kernel, const union llm__cu_params *p) {
    if (cu->err.msg[0]) return;
    if (!cu->direct && cu->n_recs == LLM__CU_RECS) {
        cu->direct = true;
        llm__cu_launch_recs(cu);
    }
    if (cu->direct) {
        int r = llm__cu_run(cu, kernel, p);
        if (r) llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: a kernel launch failed (%s)", llm__cu_strerror(r));
        return;
    }
    cu->recs[cu->n_recs].kernel = kernel;
    cu->recs[cu->n_recs].p = *p;
    cu->n_recs++;
}

static void llm__cu_begin_step(void *ctx, const struct llm__step *step) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    cu->step = step;   // (cu->err may hold a failed copy since the last step: end_step reports it)
    cu->n_recs = 0;
    cu->direct = false;
    // block tables at the reserved width (kernels' parameters then stay the same from step to step),
    // or the step's when wider (a step of fewer sequences than reserved may have longer tables)
    const int stride = LLM__MAX(cu->bt_stride, step->max_blocks);
    size_t n = (size_t)step->n_tokens, nbt = (size_t)step->n_seqs * (size_t)stride;
    size_t words = llm__cu_step_words(n, (size_t)step->n_out, (size_t)step->n_seqs, (size_t)stride);
    if (!cu->recs || words > cu->host_words || words * 4 > cu->stepbuf.size) {
        llm__cu_error(cu, LLM_ERR_BACKEND,
                      "cuda: a step of %d tokens, %d sequences x %d blocks is larger than the shape reserved",
                      step->n_tokens, step->n_seqs, step->max_blocks);
        return;
    }
    // tokens, positions, seq_idx, slot_mapping, out_rows, block tables (bt_stride columns), tiles
    int32_t *h = cu->host;
    const size_t o_pos = n, o_seq = 2 * n, o_slot = 3 * n, o_out = 4 * n, o_bt = 4 * n + (size_t)step->n_out,
                 o_tiles = o_bt + nbt;
    const int32_t *src[5] = {step->tokens, step->positions, step->seq_idx, step->slot_mapping, step->out_rows};
    const size_t len[5] = {n, n, n, n, (size_t)step->n_out}, at[5] = {0, o_pos, o_seq, o_slot, o_out};
    for (int i = 0; i < 5; i++) {
        if (src[i] && len[i]) memcpy(h + at[i], src[i], len[i] * 4);
        else memset(h + at[i], 0, len[i] * 4);
    }
    for (int s = 0; s < step->n_seqs; s++) {
        int32_t *row = h + o_bt + (size_t)s * (size_t)stride;
        memset(row, 0, (size_t)stride * 4);
        if (step->block_tables)
            memcpy(row, step->block_tables + (size_t)s * (size_t)step->max_blocks, (size_t)step->max_blocks * 4);
    }
    // prefill tiles: runs of tokens of one sequence, cut every LLM__CU_TILE_Q tokens
    int n_tiles = 0;
    cu->max_pos = 0;
    for (size_t i = 0; step->positions && i < n; i++) cu->max_pos = LLM__MAX(cu->max_pos, step->positions[i]);
    for (size_t i = 0; step->seq_idx && i < n; n_tiles++) {
        size_t i0 = i;
        while (i < n && step->seq_idx[i] == step->seq_idx[i0] && i - i0 < LLM__CU_TILE_Q) i++;
        h[o_tiles + 2 * (size_t)n_tiles] = (int32_t)i0;
        h[o_tiles + 2 * (size_t)n_tiles + 1] = (int32_t)(i - i0);
    }
    const int32_t *d = (const int32_t *)cu->stepbuf.handle;
    cu->sv = (struct llm__cu_stepv){d, d + o_pos, d + o_seq, d + o_slot, d + o_out, d + o_bt, d + o_tiles,
                                    step->n_tokens, step->n_out, stride, step->block_size, n_tiles, 0};
    cudaError_t r = cudaMemcpyAsync(cu->stepbuf.handle, h, (o_tiles + 2 * (size_t)n_tiles) * 4, cudaMemcpyHostToDevice,
                                    cu->stream);
    if (r != cudaSuccess)
        llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: the step's upload failed (%s)", cudaGetErrorString(r));
}

static uint64_t llm__cu_hash(const struct llm__cu_rec *recs, int n) {
    uint64_t h = 1469598103934665603ull;   // FNV-1a over the records' bytes
    const unsigned char *p = (const unsigned char *)recs;
    for (size_t i = 0; i < (size_t)n * sizeof(*recs); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ^ (uint64_t)n;
}

// Runs the step's records: as a graph when this step's key has a graph (or is seen the second
// time: captured now), else kernel by kernel.
static void llm__cu_run_records(struct llm__cu *cu) {
    if (cu->err.msg[0] || cu->direct || cu->n_recs == 0) return;
    cu->steps++;
    struct llm__cu_graph *g = NULL;
    if (!cu->graphs_off && cu->step && cu->step->n_tokens <= LLM__CU_GRAPH_TOKENS) {
        uint64_t key = llm__cu_hash(cu->recs, cu->n_recs);
        struct llm__cu_graph *lru = &cu->graphs[0];
        for (int i = 0; i < LLM__CU_GRAPHS && !g; i++) {
            if (cu->graphs[i].used && cu->graphs[i].key == key) g = &cu->graphs[i];
            else if (cu->graphs[i].used < lru->used) lru = &cu->graphs[i];
        }
        if (!g) {   // first sight: remembered, run without a graph
            if (lru->exec) cudaGraphExecDestroy(lru->exec);
            *lru = (struct llm__cu_graph){key, NULL, cu->steps};
        } else if (!g->exec) {   // second: captured
            cudaGraph_t graph = NULL;
            cudaError_t r = cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeThreadLocal);
            if (r == cudaSuccess) {
                for (int i = 0; r == cudaSuccess && i < cu->n_recs; i++)
                    r = llm__cu_run(cu, cu->recs[i].kernel, &cu->recs[i].p) ? cudaErrorUnknown : cudaSuccess;
                cudaError_t r2 = cudaStreamEndCapture(cu->stream, &graph);
                if (r == cudaSuccess) r = r2;
            }
            if (r == cudaSuccess) r = cudaGraphInstantiate(&g->exec, graph, 0);
            if (graph) cudaGraphDestroy(graph);
            if (r != cudaSuccess) {
                cudaGetLastError();
                g->exec = NULL;
                g->used = 0;
                g = NULL;   // (run without one)
            } else {
                cu->graph_captures++;
            }
        }
        if (g) {
            g->used = cu->steps;
            if (g->exec) {
                cudaError_t r = cudaGraphLaunch(g->exec, cu->stream);
                if (r != cudaSuccess)
                    llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: a graph launch failed (%s)", cudaGetErrorString(r));
                else cu->graph_hits++;
                cu->n_recs = 0;
                return;
            }
        }
    }
    llm__cu_launch_recs(cu);
}

static enum llm_status llm__cu_end_step(void *ctx, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    llm__cu_run_records(cu);
    cudaError_t r = cudaStreamSynchronize(cu->stream);
    if (r == cudaSuccess) r = cudaGetLastError();
    if (r != cudaSuccess) llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: the step failed (%s)", cudaGetErrorString(r));
    cu->step = NULL;
    if (cu->err.msg[0]) {
        enum llm_status st = llm__fail(e, cu->err.status ? cu->err.status : LLM_ERR_BACKEND, "%s", cu->err.msg);
        cu->err = (struct llm__err){{0}, LLM_OK};
        return st;
    }
    return LLM_OK;
}

// Profiling: what is recorded runs now, kernel by kernel, and is waited for.
static enum llm_status llm__cu_sync(void *ctx, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    llm__cu_launch_recs(cu);
    cu->direct = true;   // (the rest of the step too: a graph of part of a step would not be the step's)
    cudaError_t r = cudaStreamSynchronize(cu->stream);
    if (r != cudaSuccess) llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: the step failed (%s)", cudaGetErrorString(r));
    if (cu->err.msg[0]) return llm__fail(e, cu->err.status ? cu->err.status : LLM_ERR_BACKEND, "%s", cu->err.msg);
    return LLM_OK;
}

#define LLM__CU_F(t) ((float *)llm__cu_ptr((t).buf, (t).offs))

static void llm__cu_eltwise_op(struct llm__cu *cu, int op, struct llm__tensor d, struct llm__tensor a,
                               struct llm__tensor b, float s) {
    if (d.ne1 <= 0 || d.ne0 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.eltwise = (struct llm__cu_eltwise){LLM__CU_F(d), LLM__CU_F(a), b.buf ? LLM__CU_F(b) : NULL, d.ne1, d.ne0,
                                         (int64_t)(d.nb1 / 4), (int64_t)(a.nb1 / 4), b.buf ? (int64_t)(b.nb1 / 4) : 0,
                                         op, s, 0.0f, 0};
    llm__cu_rec(cu, LLM__CU_ELTWISE, &p);
}

static void llm__cu_add(void *ctx, struct llm__tensor d, struct llm__tensor a, struct llm__tensor b) {
    llm__cu_eltwise_op(ctx, 0, d, a, b, 0.0f);
}
static void llm__cu_silu_mul(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u) {
    llm__cu_eltwise_op(ctx, 1, d, g, u, 0.0f);
}
static void llm__cu_gelu_mul(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u) {
    llm__cu_eltwise_op(ctx, 2, d, g, u, 0.0f);
}
static void llm__cu_swiglu_oai(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u, float alpha,
                               float limit) {
    if (d.ne1 <= 0 || d.ne0 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.eltwise = (struct llm__cu_eltwise){LLM__CU_F(d), LLM__CU_F(g), LLM__CU_F(u), d.ne1, d.ne0, (int64_t)(d.nb1 / 4),
                                         (int64_t)(g.nb1 / 4), (int64_t)(u.nb1 / 4), 4, alpha, limit, 0};
    llm__cu_rec(ctx, LLM__CU_ELTWISE, &p);
}
static void llm__cu_scale(void *ctx, struct llm__tensor d, struct llm__tensor x, float s) {
    struct llm__tensor none = {0};
    llm__cu_eltwise_op(ctx, 3, d, x, none, s);
}

static void llm__cu_rmsnorm(void *ctx, struct llm__tensor d, struct llm__tensor x, struct llm__tensor w, float eps) {
    if (d.ne1 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.rmsnorm = (struct llm__cu_rmsnorm){LLM__CU_F(d), LLM__CU_F(x), LLM__CU_F(w), d.ne1, d.ne0, (int64_t)(d.nb1 / 4),
                                         (int64_t)(x.nb1 / 4), eps, 0};
    llm__cu_rec(ctx, LLM__CU_RMSNORM, &p);
}

static void llm__cu_rows_op(struct llm__cu *cu, int mode, struct llm__tensor d, const float *src, int64_t ssrc,
                            const int32_t *idx, const struct llm__weight *w, int64_t rows) {
    if (rows <= 0 || d.ne0 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.rows.mode = mode;
    p.rows.d = LLM__CU_F(d);
    p.rows.src = src;
    p.rows.idx = idx;
    if (w) p.rows.w = llm__cu_wview(w);
    p.rows.rows = rows;
    p.rows.cols = d.ne0;
    p.rows.sd = (int64_t)(d.nb1 / 4);
    p.rows.ssrc = ssrc;
    llm__cu_rec(cu, LLM__CU_ROWS, &p);
}

static void llm__cu_get_rows(void *ctx, struct llm__tensor d, struct llm__tensor src) {
    struct llm__cu *cu = ctx;
    if (!cu->step) return;
    llm__cu_rows_op(cu, 0, d, LLM__CU_F(src), (int64_t)(src.nb1 / 4), cu->sv.out_rows, NULL, cu->step->n_out);
}

static void llm__cu_gather_cols(void *ctx, struct llm__tensor d, struct llm__tensor x, struct llm__tensor perm) {
    llm__cu_rows_op(ctx, 1, d, LLM__CU_F(x), (int64_t)(x.nb1 / 4), (const int32_t *)llm__cu_ptr(perm.buf, perm.offs),
                    NULL, x.ne1);
}

static void llm__cu_embed(void *ctx, struct llm__tensor d, const struct llm__weight *table) {
    struct llm__cu *cu = ctx;
    if (!cu->step) return;
    llm__cu_rows_op(cu, 2, d, NULL, 0, cu->sv.tokens, table, cu->step->n_tokens);
}

static void llm__cu_rope(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *r) {
    struct llm__cu *cu = ctx;
    if (x.ne1 <= 0 || r->n_rot < 2) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    // (freq_base carries theta_scale = base^(-2 / n_rot), computed here as the CPU backend does)
    p.rope = (struct llm__cu_rope){LLM__CU_F(x), cu->sv.positions,
                                   r->freq_factors.buf ? LLM__CU_F(r->freq_factors) : NULL, x.ne1, (int64_t)(x.nb1 / 4),
                                   n_head, head_dim, r->n_rot, r->neox, powf(r->freq_base, -2.0f / (float)r->n_rot),
                                   r->freq_scale, r->ext_factor, r->mscale, r->corr_dims[0], r->corr_dims[1]};
    llm__cu_rec(cu, LLM__CU_ROPE, &p);
}

// K/V cache rows are [slot][n_kv] of f16, f32 or q8_0 (this backend's layout: struct llm__cu_kv_store).
static int llm__cu_kv_mode(int type) { return type == LLM__TYPE_F16 ? 1 : type == LLM__TYPE_Q8_0 ? 2 : 0; }

static void llm__cu_kv_store(void *ctx, struct llm__tensor kc, struct llm__tensor vc, struct llm__tensor k,
                             struct llm__tensor v) {
    struct llm__cu *cu = ctx;
    if (k.ne1 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.kv_store = (struct llm__cu_kv_store){llm__cu_ptr(kc.buf, kc.offs), llm__cu_ptr(vc.buf, vc.offs), LLM__CU_F(k),
                                           LLM__CU_F(v), cu->sv.slot_mapping, k.ne1, k.ne0, (int64_t)(k.nb1 / 4),
                                           (int64_t)(v.nb1 / 4), llm__cu_kv_mode(kc.type), cu->head_dim};
    llm__cu_rec(cu, LLM__CU_KV_STORE, &p);
}

static void llm__cu_attention(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor kc,
                              struct llm__tensor vc, const struct llm__attn *a) {
    struct llm__cu *cu = ctx;
    if (q.ne1 <= 0 || !cu->step) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    struct llm__cu_attn *t = &p.attn;
    t->out = LLM__CU_F(out);
    t->q = LLM__CU_F(q);
    t->kc = llm__cu_ptr(kc.buf, kc.offs);
    t->vc = llm__cu_ptr(vc.buf, vc.offs);
    t->part = (float *)cu->part.handle;
    t->sinks = a->sinks.buf ? LLM__CU_F(a->sinks) : NULL;
    t->st = cu->sv;
    t->sq = (int64_t)(q.nb1 / 4);
    t->so = (int64_t)(out.nb1 / 4);
    t->n_tok = q.ne1;
    t->n_head = a->n_head;
    t->n_head_kv = a->n_head_kv;
    t->head_dim = a->head_dim;
    t->mode = llm__cu_kv_mode(kc.type);
    t->window = a->window;
    t->scale = a->scale;
    t->softcap = a->softcap;
    t->nsplit = 1;
    if (cu->sv.n_tiles * 2 <= q.ne1) {
        llm__cu_rec(cu, LLM__CU_ATTN_PREFILL, &p);
        return;
    }
    // few (head, token) pairs and long contexts: split the keys (flash-decoding)
    const size_t per_split = (size_t)(a->head_dim + 2) * 4 * (size_t)a->n_head * (size_t)q.ne1;
    if ((size_t)q.ne1 * (size_t)a->n_head < 4u * (size_t)cu->prop.multiProcessorCount * 8u) {
        int ctxlen = a->window > 0 ? LLM__MIN(cu->max_pos + 1, a->window) : cu->max_pos + 1;
        size_t ns = (size_t)LLM__MIN((ctxlen + LLM__CU_SPLIT_KEYS - 1) / LLM__CU_SPLIT_KEYS, LLM__CU_SPLIT_MAX);
        ns = LLM__MIN(ns, cu->part.size / per_split);
        t->nsplit = (int)LLM__MAX(ns, (size_t)1);
    }
    llm__cu_rec(cu, LLM__CU_ATTN_DECODE, &p);
    if (t->nsplit > 1) llm__cu_rec(cu, LLM__CU_ATTN_REDUCE, &p);
}

// Products: per weight, the GEMV (up to LLM__CU_MATVEC_MAX tokens) or the GEMM, the own or
// cuBLAS's for the types reserve chose it for (llm__cu_product_recs).
static void llm__cu_matmul(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                           const struct llm__tensor *bias, struct llm__tensor x) {
    struct llm__cu *cu = ctx;
    assert(n >= 1 && n <= LLM__MAX_MATMUL_WEIGHTS);
    const int64_t ntok = x.ne1;
    if (ntok <= 0) return;
    int rounded = -1;   // what the activations' scratch holds (llm__cu_quant_act's mode; -1 nothing)
    struct llm__cu_rec r[LLM__CU_PRODUCT_RECS];
    for (int j = 0; j < n; j++) {
        const int64_t K = w[j]->ne0;
        struct llm__cu_matmul m;
        memset(&m, 0, sizeof(m));
        m.w = llm__cu_wview(w[j]);
        m.d = LLM__CU_F(dst[j]);
        m.x = LLM__CU_F(x);
        m.bias = bias && bias[j].buf ? LLM__CU_F(bias[j]) : NULL;
        m.ntok = ntok;
        m.sd = (int64_t)(dst[j].nb1 / 4);
        m.sx = (int64_t)(x.nb1 / 4);
        const bool blas = llm__cu_use_blas(cu, &m);
        if ((llm__cu_float_index(w[j]->type) < 0 || blas) && (K > cu->act_cols || ntok > cu->act_rows)) {
            llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: a product of %lld tokens x %lld columns is larger than the shape "
                          "reserved", (long long)ntok, (long long)K);
            return;
        }
        const int nr = llm__cu_product_recs(cu, &m, blas, &rounded, r);
        for (int i = 0; i < nr; i++) llm__cu_rec(cu, r[i].kernel, &r[i].p);
    }
}

// --- mixtures of experts ---

// A layer's experts stacked as in the file, repacked as one weight (weight_load's planes: expert
// e's rows from e x rows). Not counted among the weights cuBLAS is tuned for (matmul_id never
// goes there).
static enum llm_status llm__cu_weight_load_experts(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                                   int64_t ne1, int n_expert, const void *data, struct llm__err *e) {
    struct llm__cu *cu = ctx;
    if (n_expert < 1 || n_expert > LLM__CU_MAX_EXPERTS || ne1 % n_expert)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "cuda: %d experts in a layer (at most %d)", n_expert,
                         LLM__CU_MAX_EXPERTS);
    const bool counted = type >= 0 && type < LLM__CU_NTYPES;
    const int64_t k0 = counted ? cu->wK[type] : 0, n0 = counted ? cu->wN[type] : 0;
    enum llm_status st = llm__cu_weight_load(ctx, w, type, ne0, ne1, data, e);
    if (counted) cu->wK[type] = k0, cu->wN[type] = n0;
    return st;
}

static void llm__cu_moe_route(void *ctx, struct llm__tensor ids, struct llm__tensor wts, struct llm__tensor logits,
                              const struct llm__moe *m) {
    if (logits.ne1 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.moe_route = (struct llm__cu_moe_route){(int32_t *)(void *)llm__cu_ptr(ids.buf, ids.offs), LLM__CU_F(wts),
                                             LLM__CU_F(logits), logits.ne1, (int64_t)(ids.nb1 / 4),
                                             (int64_t)(wts.nb1 / 4), (int64_t)(logits.nb1 / 4), m->n_expert, m->k,
                                             m->norm, m->softmax_weight, m->scale, 0};
    llm__cu_rec(ctx, LLM__CU_MOE_ROUTE, &p);
}

// The slots grouped by expert (k_moe_group, into the moe scratch), then per weight the activations
// rounded for its type (quantized types) and k_matmul_id: a warp per row of an expert.
static void llm__cu_matmul_id(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                              const struct llm__tensor *bias, struct llm__tensor x, struct llm__tensor ids,
                              bool x_per_slot) {
    struct llm__cu *cu = ctx;
    assert(n >= 1 && n <= 2);
    const int64_t k = ids.ne0, slots = ids.ne1 * ids.ne0, N = dst[0].ne0, n_expert = w[0]->ne1 / N;
    if (slots <= 0) return;
    if ((size_t)(n_expert + 1 + slots) * 4 > cu->moe.size || x.ne1 > cu->act_rows || x.ne0 > cu->act_cols) {
        llm__cu_error(cu, LLM_ERR_BACKEND, "cuda: %lld experts' slots (%lld) are more than the shape reserved",
                      (long long)n_expert, (long long)slots);
        return;
    }
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    int32_t *groups = (int32_t *)cu->moe.handle;
    p.moe_group = (struct llm__cu_moe_group){groups, (const int32_t *)(void *)llm__cu_ptr(ids.buf, ids.offs), slots,
                                             (int64_t)(ids.nb1 / 4), (int32_t)n_expert, (int32_t)k};
    llm__cu_rec(cu, LLM__CU_MOE_GROUP, &p);
    int8_t *q = (int8_t *)cu->act.handle;
    float *dq = (float *)(q + (size_t)cu->act_rows * (size_t)cu->act_cols);
    int rounded = -1;
    for (int j = 0; j < n; j++) {
        const int type = w[j]->type, fl = llm__cu_float_index(type) >= 0;
        const int mode = fl ? -1 : llm__type_info((uint32_t)type)->vec_dot_type == LLM__TYPE_Q8_K ? 1 : 0;
        if (!fl && rounded != mode) {
            memset(&p, 0, sizeof(p));
            p.quant_act = (struct llm__cu_quant_act){q, dq, LLM__CU_F(x), x.ne1, x.ne0, (int64_t)(x.nb1 / 4), mode, 0};
            llm__cu_rec(cu, LLM__CU_QUANT_ACT, &p);
            rounded = mode;
        }
        memset(&p, 0, sizeof(p));
        const bool hb = bias && bias[j].buf;
        struct llm__cu_w wv = llm__cu_wview(w[j]);   // (the planes of all the experts; N: one expert's rows)
        wv.N = N;
        p.matmul_id = (struct llm__cu_matmul_id){wv, LLM__CU_F(dst[j]), LLM__CU_F(x), hb ? LLM__CU_F(bias[j]) : NULL,
                                                 fl ? NULL : q, fl ? NULL : dq, groups, (int64_t)(dst[j].nb1 / 4),
                                                 (int64_t)(x.nb1 / 4), hb ? (int64_t)(bias[j].nb1 / 4) : 0,
                                                 (int32_t)n_expert, (int32_t)k, x_per_slot, 0};
        llm__cu_rec(cu, LLM__CU_MATMUL_ID, &p);
    }
}

static void llm__cu_moe_sum(void *ctx, struct llm__tensor d, struct llm__tensor src, struct llm__tensor wts,
                            struct llm__tensor shared, struct llm__tensor gate) {
    if (d.ne1 <= 0) return;
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    const bool sh = shared.buf != NULL;
    p.moe_sum = (struct llm__cu_moe_sum){LLM__CU_F(d), LLM__CU_F(src), LLM__CU_F(wts), sh ? LLM__CU_F(shared) : NULL,
                                         sh ? LLM__CU_F(gate) : NULL, d.ne1, d.ne0, (int64_t)(d.nb1 / 4),
                                         (int64_t)(src.nb1 / 4), (int64_t)(wts.nb1 / 4),
                                         sh ? (int64_t)(shared.nb1 / 4) : 0, sh ? (int64_t)(gate.nb1 / 4) : 0,
                                         (int32_t)wts.ne0, 0};
    llm__cu_rec(ctx, LLM__CU_MOE_SUM, &p);
}

// Device memory bandwidth as a copy kernel measures it: (bytes read + bytes written) / seconds over
// 10 copies of up to 1 GiB, after a warm-up copy.
static enum llm_status llm__cu_bandwidth(void *ctx, double *gbps, struct llm__err *err) {
    struct llm__cu *cu = ctx;
    llm__cu_here(cu);
    struct llm__err e = {{0}, LLM_OK};
    struct llm__buf a = {0}, b = {0};
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    size_t n = LLM__MIN((size_t)1 << 30, fr / 8) & ~(size_t)255;
    *gbps = 0;
    if (n < (1 << 20) || llm__cu_buf_alloc(cu, &a, n, &e) || llm__cu_buf_alloc(cu, &b, n, &e)) {
        if (a.handle) llm__cu_buf_free(cu, &a);
        return llm__fail(err, LLM_ERR_NOMEM, "cuda: bandwidth probe: %s", e.msg[0] ? e.msg : "no memory free");
    }
    union llm__cu_params p;
    memset(&p, 0, sizeof(p));
    p.copy = (struct llm__cu_copy){b.handle, a.handle, n};
    cudaEvent_t t0 = NULL, t1 = NULL;
    cudaError_t r = cudaEventCreate(&t0);
    if (r == cudaSuccess) r = cudaEventCreate(&t1);
    if (r == cudaSuccess) r = (cudaError_t)llm__cu_launch(LLM__CU_COPY, &p, cu->stream);
    if (r == cudaSuccess) r = cudaEventRecord(t0, cu->stream);
    for (int i = 0; i < 10 && r == cudaSuccess; i++) r = (cudaError_t)llm__cu_launch(LLM__CU_COPY, &p, cu->stream);
    if (r == cudaSuccess) r = cudaEventRecord(t1, cu->stream);
    if (r == cudaSuccess) r = cudaEventSynchronize(t1);
    float ms = 0;
    if (r == cudaSuccess) r = cudaEventElapsedTime(&ms, t0, t1);
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    llm__cu_buf_free(cu, &a);
    llm__cu_buf_free(cu, &b);
    if (r != cudaSuccess)
        return cudaGetLastError(), llm__fail(err, LLM_ERR_BACKEND, "cuda: bandwidth probe: %s", cudaGetErrorString(r));
    *gbps = ms > 0 ? 2.0 * (double)n * 10 / (ms / 1e3) / 1e9 : 0;
    return LLM_OK;
}

static const char *llm__cu_device_name(void *ctx) {
    const struct llm__cu *cu = ctx;
    return cu->desc[0] ? cu->desc : cu->name;
}

static const struct llm_backend_i llm__cu_iface = {
    .name = "cuda",
    .free = llm__cu_free,
    .buf_alloc = llm__cu_buf_alloc,
    .buf_free = llm__cu_buf_free,
    .weight_load = llm__cu_weight_load,
    .weight_free = llm__cu_weight_free,
    .upload = llm__cu_upload,
    .download = llm__cu_download,
    .reserve = llm__cu_reserve,
    .mem_free = llm__cu_mem_free,
    .begin_step = llm__cu_begin_step,
    .end_step = llm__cu_end_step,
    .sync = llm__cu_sync,
    .embed = llm__cu_embed,
    .rmsnorm = llm__cu_rmsnorm,
    .matmul = llm__cu_matmul,
    .rope = llm__cu_rope,
    .kv_store = llm__cu_kv_store,
    .attention = llm__cu_attention,
    .silu_mul = llm__cu_silu_mul,
    .add = llm__cu_add,
    .get_rows = llm__cu_get_rows,
    .gather_cols = llm__cu_gather_cols,
    .scale = llm__cu_scale,
    .gelu_mul = llm__cu_gelu_mul,
    .attention_window = llm__cu_attention,
    .swiglu_oai = llm__cu_swiglu_oai,
    .rope_yarn = true,
    .attention_sinks = true,
    .weight_load_experts = llm__cu_weight_load_experts,
    .moe_route = llm__cu_moe_route,
    .matmul_id = llm__cu_matmul_id,
    .moe_sum = llm__cu_moe_sum,
    .device_name = llm__cu_device_name,
    .bandwidth = llm__cu_bandwidth,
};

// Opens CUDA device `index` (-1: device 0). On failure be holds what was made, for its free.
static enum llm_status llm__cu_backend_new(struct llm_backend *be, int index, struct llm__err *e) {
    struct llm__cu *cu = calloc(1, sizeof(*cu));
    if (!cu) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    be->iface = &llm__cu_iface;
    be->ctx = cu;
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess || n == 0) {
        cudaGetLastError();
        return llm__fail(e, LLM_ERR_BACKEND, "cuda: no CUDA device (%s); use --backend cpu",
                         r != cudaSuccess ? cudaGetErrorString(r) : "none found");
    }
    if (index >= n) return llm__fail(e, LLM_ERR_INVALID_ARG, "cuda: no device %d (there are %d)", index, n);
    cu->dev = index < 0 ? 0 : index;
    r = cudaSetDevice(cu->dev);
    if (r == cudaSuccess) r = cudaGetDeviceProperties(&cu->prop, cu->dev);
    if (r == cudaSuccess && cu->prop.major < 8) {
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "cuda: %s is compute capability %d.%d; this build's kernels need 8.0 or "
                         "newer (A100, H100, H200, RTX 30xx and later); use --backend vulkan or cpu",
                         cu->prop.name, cu->prop.major, cu->prop.minor);
    }
    if (r == cudaSuccess) r = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    if (r == cudaSuccess) r = (cudaError_t)llm__cu_setup();
    if (r != cudaSuccess) {
        cudaGetLastError();
        return llm__fail(e, LLM_ERR_BACKEND, "cuda: cannot open device %d (%s)", cu->dev, cudaGetErrorString(r));
    }
    snprintf(cu->name, sizeof(cu->name), "%s", cu->prop.name);
    const char *g = getenv("LLM_CUDA_GRAPHS");
    cu->graphs_off = g && strcmp(g, "0") == 0;
    const char *b = getenv("LLM_CUDA_CUBLAS");
    cu->blas_env = b && *b ? (strcmp(b, "0") == 0 ? 0 : 1) : -1;
    return LLM_OK;
}

static enum llm_status llm__cu_open(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e) {
    return llm__cu_backend_new(be, p->device, e);
}

LLM__INTERNAL const struct llm__backend_desc llm__backend_cuda = {
    .kind = LLM_BACKEND_CUDA, .name = "cuda", .open = llm__cu_open, .list_devices = llm__cu_list_devices,
};
