// The emulated CUDA device of the tests (see emu.h): the runtime calls backends/cuda.c makes
// (memory is host memory; streams run everything at once, in order; graph capture records the
// stream's work and a graph replays it) and the launcher that runs a kernel's blocks, each block's
// threads as fibers.
#include "emu.h"
#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <setjmp.h>
#include <ucontext.h>
#include <time.h>
#include <mutex>
#include <algorithm>
#include <vector>
#include <map>
#include <atomic>
#include <cstring>

namespace {

enum { RUN, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };
const size_t STACK = 256 << 10;

// A fiber lives as long as its OS thread and runs one CUDA thread after another (the launch's
// body, with the ids it is given), switching with _setjmp/_longjmp: no system call a switch (a
// new fiber's first switch goes through swapcontext).
struct fiber {
    void *jb[5];
    ucontext_t uc;
    llm_emu_ids ids;
    int state;
    unsigned shuffles;   // shuffles taken part in, in this block
    void *stack;
};

struct launch {
    std::function<void()> *body;
    int n, cur;
    bool on_fibers;                   // threads run as fibers (the kernel may wait at barriers)
    std::vector<unsigned char> smem;
    std::vector<unsigned char> xch;   // per lane: 8 bytes
    llm_emu_ids direct;               // the thread running without a fiber
};

struct device {
    size_t total = (size_t)16 << 30, used = 0;
    std::map<void *, size_t> allocs;
    std::mutex mu;
    cudaError_t last = cudaSuccess;
    long long graph_launches = 0, kernel_runs = 0;
};

device &dev() {
    static device d;
    return d;
}
thread_local launch *cur_launch;
thread_local std::vector<fiber *> fibers;
thread_local void *sched_jb[5];
thread_local fiber *starting;

// (GCC's builtins: a few registers saved, no signal mask, no unwinding; a jump from another function
// than the one that saved)
__attribute__((noinline)) void jump(void **jb) { __builtin_longjmp(jb, 1); }

__attribute__((noinline)) void to_scheduler(fiber *f) {
    if (__builtin_setjmp(f->jb) == 0) jump(sched_jb);
}

__attribute__((noinline)) void to_fiber(fiber *f) {
    if (__builtin_setjmp(sched_jb) == 0) jump(f->jb);
}

void fiber_main() {
    fiber *f = starting;
    for (;;) {
        to_scheduler(f);   // (wait for a thread to run)
        (*cur_launch->body)();
        f->state = DONE;
    }
}

// (a function of its own: _setjmp returns twice, which no caller's variables should see)
__attribute__((noinline)) void start_fiber(fiber *f) {
    ucontext_t here;
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_main, 0);
    starting = f;
    if (__builtin_setjmp(sched_jb) == 0) swapcontext(&here, &f->uc);   // back when the fiber first waits
}

fiber *get_fiber(int i) {
    while ((int)fibers.size() <= i) {
        fiber *f = new fiber();
        f->stack = mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (f->stack == MAP_FAILED) { std::fprintf(stderr, "cuda emulator: no memory for fiber stacks\n"); std::abort(); }
        start_fiber(f);
        fibers.push_back(f);
    }
    return fibers[(size_t)i];
}

void run_block(launch *L, const llm_emu_ids &base) {
    int i = 0;
    if (!L->on_fibers) {   // no barriers: thread after thread on this stack
        L->direct = base;
        for (unsigned z = 0; z < base.bdim.z; z++)
            for (unsigned y = 0; y < base.bdim.y; y++)
                for (unsigned x = 0; x < base.bdim.x; x++, i++) {
                    L->direct.tid = {x, y, z};
                    L->cur = i;
                    (*L->body)();
                }
        return;
    }
    for (unsigned z = 0; z < base.bdim.z; z++)
        for (unsigned y = 0; y < base.bdim.y; y++)
            for (unsigned x = 0; x < base.bdim.x; x++, i++) {
                fiber *f = fibers[(size_t)i];
                f->ids = base;
                f->ids.tid = {x, y, z};
                f->state = RUN;
                f->shuffles = 0;
            }
    // counts of live threads and of those waiting, for the block and per warp
    const int nw = (L->n + 31) / 32;
    int live = L->n, at_block = 0;
    int warp_live[32], warp_wait[32];
    for (int w = 0; w < nw; w++) warp_live[w] = std::min(32, L->n - 32 * w), warp_wait[w] = 0;
    auto release = [&](int lo, int hi, int state) {
        for (int t = lo; t < hi; t++)
            if (fibers[(size_t)t]->state == state) fibers[(size_t)t]->state = RUN;
    };
    while (live > 0) {
        bool ran = false;
        for (int t = 0; t < L->n;) {
            fiber *f = fibers[(size_t)t];
            if (f->state != RUN) { t++; continue; }
            L->cur = t;
            to_fiber(f);
            ran = true;
            const int w = t / 32;
            if (f->state == DONE) live--, warp_live[w]--;
            else if (f->state == AT_WARP_BARRIER) warp_wait[w]++;
            else if (f->state == AT_BLOCK_BARRIER) at_block++;
            if (warp_live[w] > 0 && warp_wait[w] == warp_live[w]) {   // the warp meets: on with it
                release(32 * w, std::min(L->n, 32 * w + 32), AT_WARP_BARRIER);
                warp_wait[w] = 0;
                t = 32 * w;
                continue;
            }
            if (live > 0 && at_block == live) {   // the block meets: on from its first thread
                release(0, L->n, AT_BLOCK_BARRIER);
                at_block = 0;
                t = 0;
                continue;
            }
            t++;
        }
        if (!ran && live > 0) {
            std::fprintf(stderr, "cuda emulator: deadlock in block (%u,%u,%u): a barrier or shuffle not reached by every "
                         "live thread\n", base.bid.x, base.bid.y, base.bid.z);
            std::abort();
        }
    }
}

bool device_ptr(const void *p) {
    device &d = dev();
    std::lock_guard<std::mutex> lock(d.mu);
    auto it = d.allocs.upper_bound((void *)p);
    if (it == d.allocs.begin()) return false;
    --it;
    return (const char *)p >= (const char *)it->first && (const char *)p < (const char *)it->first + it->second;
}

void wait_here(int state) {
    launch *L = cur_launch;
    if (!L->on_fibers) {
        std::fprintf(stderr, "cuda emulator: a barrier or shuffle in a kernel launched as having none\n");
        std::abort();
    }
    fiber *f = fibers[(size_t)L->cur];
    f->state = state;
    to_scheduler(f);
}

}  // namespace

struct llm_emu_stream {
    bool capturing = false;
    struct llm_emu_graph *graph = nullptr;
};
struct llm_emu_graph { std::vector<std::function<void()>> work; };
struct llm_emu_event { double t = 0; };

const llm_emu_ids *llm_emu_self() {
    launch *L = cur_launch;
    if (!L) { std::fprintf(stderr, "cuda emulator: device code outside a launch\n"); std::abort(); }
    return L->on_fibers ? &fibers[(size_t)L->cur]->ids : &L->direct;
}

int llm_emu_thread_index() { return cur_launch->cur; }

void llm_emu_wmma_check(const void *p, size_t ld_bytes) {
    if ((uintptr_t)p % 32 || ld_bytes % 16) {
        std::fprintf(stderr, "cuda emulator: a WMMA tile at %p (ldm %zu bytes): tiles must be 32-byte aligned, ldm a "
                     "multiple of 16 bytes\n", p, ld_bytes);
        std::abort();
    }
}

void __syncthreads() { wait_here(AT_BLOCK_BARRIER); }
void __syncwarp(unsigned) { wait_here(AT_WARP_BARRIER); }

void *llm_emu_dyn_smem() { return cur_launch->smem.data(); }

void llm_emu_exchange(const void *v, size_t n, int src_lane, void *out) {
    launch *L = cur_launch;
    int t = L->cur, w = t / 32;
    if (n > 8) { std::fprintf(stderr, "cuda emulator: shuffle of %zu bytes\n", n); std::abort(); }
    // two slots a lane, used in turn: a lane writes a slot again two shuffles later, after every lane
    // of its warp has reached the barrier of the shuffle between, so has read it. A lane that took
    // no part (it has returned) gives the reader its own value.
    fiber *f = fibers[(size_t)t];
    const unsigned k = ++f->shuffles;
    const size_t par = (size_t)(k & 1) * (size_t)L->n * 8;
    std::memcpy(&L->xch[par + (size_t)t * 8], v, n);
    __syncwarp();
    int src = w * 32 + src_lane;
    if (src_lane < 0 || src_lane >= 32 || src >= L->n || fibers[(size_t)src]->shuffles < k) src = t;
    std::memcpy(out, &L->xch[par + (size_t)src * 8], n);
}

static void run_kernel(dim3 grid, dim3 block, size_t smem, bool sync, std::function<void()> body) {
    int n = (int)(block.x * block.y * block.z);
    if (sync) get_fiber(n - 1);
    launch L;
    L.body = &body;
    L.n = n;
    L.cur = 0;
    L.on_fibers = sync;
    L.smem.assign(smem + 16, 0xA5);   // not zero: kernels must not count on it
    L.xch.assign((size_t)n * 16, 0);
    launch *saved = cur_launch;
    cur_launch = &L;
    llm_emu_ids base{};
    base.bdim = block;
    base.gdim = grid;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                base.bid = {x, y, z};
                run_block(&L, base);
            }
    cur_launch = saved;
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().kernel_runs++;
}

cudaError_t llm_emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool sync, std::function<void()> body) {
    int n = (int)(block.x * block.y * block.z);
    if (n < 1 || n > 1024 || grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535 ||
        smem > (227u << 10)) {
        std::fprintf(stderr, "cuda emulator: bad launch: grid (%u,%u,%u), block (%u,%u,%u), %zu bytes shared\n", grid.x,
                     grid.y, grid.z, block.x, block.y, block.z, smem);
        return dev().last = cudaErrorInvalidConfiguration;
    }
    if (s && s->capturing) {
        s->graph->work.push_back([=] { run_kernel(grid, block, smem, sync, body); });
        return cudaSuccess;
    }
    run_kernel(grid, block, smem, sync, body);
    return cudaSuccess;
}

// --- cuBLAS: the calls backends/cuda.c makes, by their names and C signatures (enums as int) ---

namespace {

struct blas_handle {
    cudaStream_t stream = nullptr;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
};
std::atomic<long long> blas_gemms{0};

enum { BLAS_OK = 0, BLAS_NOT_INITIALIZED = 1, BLAS_INVALID_VALUE = 7, BLAS_NOT_SUPPORTED = 15 };
enum { R_32F = 0, R_16F = 2, R_16BF = 14, COMPUTE_32F = 68 };

int blas_create(blas_handle **h) { *h = new blas_handle(); return BLAS_OK; }
int blas_destroy(blas_handle *h) { delete h; return BLAS_OK; }
int blas_set_stream(blas_handle *h, cudaStream_t s) { if (!h) return BLAS_NOT_INITIALIZED; h->stream = s; return BLAS_OK; }
int blas_set_workspace(blas_handle *h, void *w, size_t n) {
    if (!h) return BLAS_NOT_INITIALIZED;
    if (n && !device_ptr(w)) return BLAS_INVALID_VALUE;
    h->workspace = w, h->workspace_bytes = n;
    return BLAS_OK;
}

double blas_elem(const void *p, int type, size_t i) {
    if (type == R_32F) return ((const float *)p)[i];
    uint16_t h;
    std::memcpy(&h, (const unsigned char *)p + 2 * i, 2);
    if (type == R_16BF) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    return (double)__half2float(__half{h});
}

// C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C; op(A) m x k, op(B) k x n
int blas_gemm_ex(blas_handle *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo) {
    if (!h) return BLAS_NOT_INITIALIZED;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0 || lda < std::max(1, ta ? k : m) ||
        ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m) || !alpha || !beta)
        return BLAS_INVALID_VALUE;
    if (at != bt || (at != R_32F && at != R_16F && at != R_16BF) || ct != R_32F || compute != COMPUTE_32F || algo != -1)
        return BLAS_NOT_SUPPORTED;
    if (!device_ptr(A) || !device_ptr(B) || !device_ptr(C)) {
        std::fprintf(stderr, "cuda emulator: cublasGemmEx with a host pointer\n");
        return BLAS_INVALID_VALUE;
    }
    if (h->stream && h->stream->capturing && !h->workspace_bytes) {
        std::fprintf(stderr, "cuda emulator: cublasGemmEx captured without a workspace of its own (cublasSetWorkspace)\n");
        return BLAS_NOT_SUPPORTED;
    }
    const float al = *(const float *)alpha, be = *(const float *)beta;   // (host pointer mode: read now)
    auto work = [=] {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int l = 0; l < k; l++)
                    s += blas_elem(A, at, ta ? (size_t)i * lda + l : (size_t)l * lda + i) *
                         blas_elem(B, bt, tb ? (size_t)l * ldb + j : (size_t)j * ldb + l);
                float *c = (float *)C + (size_t)j * ldc + i;
                *c = (float)(al * s + (be != 0.0f ? be * (double)*c : 0.0));
            }
        blas_gemms++;
    };
    if (h->stream && h->stream->capturing) h->stream->graph->work.push_back(work);
    else work();
    return BLAS_OK;
}

}  // namespace

extern "C" {

void *llm_emu_cublas_open(const char *soname) {
    static char lib;
    return std::strcmp(soname, "libcublas.so.13") == 0 ? &lib : nullptr;
}
void *llm_emu_cublas_sym(void *lib, const char *name) {
    static const struct { const char *name; void *fn; } fns[] = {
        {"cublasCreate_v2", (void *)blas_create}, {"cublasDestroy_v2", (void *)blas_destroy},
        {"cublasSetStream_v2", (void *)blas_set_stream}, {"cublasSetWorkspace_v2", (void *)blas_set_workspace},
        {"cublasGemmEx", (void *)blas_gemm_ex}};
    for (auto &f : fns)
        if (lib && std::strcmp(f.name, name) == 0) return f.fn;
    return nullptr;
}
long long llm_emu_cublas_gemms(void) { return blas_gemms; }

void llm_emu_set_memory(size_t total_bytes) { dev().total = total_bytes; }
long long llm_emu_graph_launches(void) { return dev().graph_launches; }
long long llm_emu_kernel_runs(void) { return dev().kernel_runs; }

cudaError_t cudaGetDeviceCount(int *count) { *count = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(p, 0, sizeof(*p));
    std::snprintf(p->name, sizeof(p->name), "CUDA emulator (CPU)");
    p->totalGlobalMem = dev().total;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->multiProcessorCount = 4;
    p->major = 9;
    p->minor = 0;
    p->memoryBusWidth = 64;
    p->warpSize = 32;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaMalloc(void **ptr, size_t size) {
    device &d = dev();
    std::lock_guard<std::mutex> lock(d.mu);
    *ptr = nullptr;
    size_t r = (size + 255) & ~(size_t)255;
    if (d.used + r > d.total) return d.last = cudaErrorMemoryAllocation;
    void *p = std::aligned_alloc(256, r ? r : 256);
    if (!p) return d.last = cudaErrorMemoryAllocation;
    std::memset(p, 0xCD, std::min(r ? r : 256, (size_t)64 << 20));   // fresh device memory is not zero
    d.allocs[p] = r;
    d.used += r;
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaFree(void *ptr) {
    device &d = dev();
    std::lock_guard<std::mutex> lock(d.mu);
    if (!ptr) return cudaSuccess;
    auto it = d.allocs.find(ptr);
    if (it == d.allocs.end()) return d.last = cudaErrorInvalidValue;
    d.used -= it->second;
    d.allocs.erase(it);
    std::free(ptr);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **ptr, size_t size) {
    *ptr = std::malloc(size ? size : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *ptr) { std::free(ptr); return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    std::lock_guard<std::mutex> lock(dev().mu);
    *free_bytes = dev().total - dev().used;
    *total_bytes = dev().total;
    return cudaSuccess;
}

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
    bool dd = device_ptr(dst), sd = device_ptr(src);
    if ((kind == cudaMemcpyHostToDevice && (!dd || sd)) || (kind == cudaMemcpyDeviceToHost && (dd || !sd)) ||
        (kind == cudaMemcpyDeviceToDevice && (!dd || !sd))) {
        std::fprintf(stderr, "cuda emulator: cudaMemcpy kind %d between %s and %s memory\n", (int)kind, dd ? "device" : "host",
                     sd ? "device" : "host");
        return dev().last = cudaErrorInvalidValue;
    }
    std::memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) { return copy(dst, src, n, kind); }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (s && s->capturing) {
        s->graph->work.push_back([=] { copy(dst, src, n, kind); });
        return cudaSuccess;
    }
    return copy(dst, src, n, kind);
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
    if (!device_ptr(dst)) return dev().last = cudaErrorInvalidValue;
    if (s && s->capturing) {
        s->graph->work.push_back([=] { std::memset(dst, value, n); });
        return cudaSuccess;
    }
    std::memset(dst, value, n);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = new llm_emu_stream(); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    // as on a GPU: waiting for a stream that is being captured breaks the capture
    if (s && s->capturing) return dev().last = cudaErrorStreamCaptureUnsupported;
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    if (!s || s->capturing) return cudaErrorInvalidValue;
    s->capturing = true;
    s->graph = new llm_emu_graph();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->capturing) return cudaErrorInvalidValue;
    s->capturing = false;
    *g = s->graph;
    s->graph = nullptr;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long) {
    *exec = new llm_emu_graph(*g);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (s && s->capturing) return cudaErrorStreamCaptureUnsupported;
    for (auto &w : exec->work) w();
    std::lock_guard<std::mutex> lock(dev().mu);
    dev().graph_launches++;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { delete exec; return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *ev) { *ev = new llm_emu_event(); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t ev) { delete ev; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ev->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { *ms = (float)(b->t - a->t); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { cudaError_t e = dev().last; dev().last = cudaSuccess; return e; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "unknown error";
    }
}

}  // extern "C"
