// The part of the CUDA runtime API that backends/cuda.c uses, for the emulated device of the
// tests (tests/cuda_emu/emu.cpp runs the kernels of backends/cuda.cu on the CPU): the same names
// and meanings as NVIDIA's header, so the backend's host code is compiled unchanged against
// either. Built with make CUDA_EMU=1; make CUDA=1 uses the real header and runtime instead.
#ifndef LLM_CUDA_EMU_RUNTIME_H
#define LLM_CUDA_EMU_RUNTIME_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorLaunchFailure = 719,
    cudaErrorUnknown = 999
} cudaError_t;

typedef struct llm_emu_stream *cudaStream_t;
typedef struct llm_emu_event *cudaEvent_t;
typedef struct llm_emu_graph *cudaGraph_t;
typedef struct llm_emu_graph *cudaGraphExec_t;

enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
#define cudaStreamNonBlocking 0x01
#define cudaHostAllocDefault 0x00

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int multiProcessorCount;
    int major, minor;
    int memoryBusWidth;
    int warpSize;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaEventCreate(cudaEvent_t *ev);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaGetLastError(void);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
const char *cudaGetErrorString(cudaError_t e);

// The emulator's own: how much device memory it pretends to have (tests of the out-of-memory
// paths), and how many graphs it has replayed and kernels it has run (tests of the graph cache).
void llm_emu_set_memory(size_t total_bytes);

// The emulator's cuBLAS. backends/cuda.c opens NVIDIA's library at run time (dlopen) and takes the
// few functions it calls by name (dlsym); on the emulator it asks these two instead, which give it
// the emulator's versions of those functions: the products computed on the CPU in double, on the
// stream (recorded while it is captured), with the arguments checked as cuBLAS checks them.
// llm_emu_cublas_open returns NULL for a name that is not cuBLAS's soname of this runtime's major
// version (libcublas.so.13), as a missing library would.
void *llm_emu_cublas_open(const char *soname);
void *llm_emu_cublas_sym(void *lib, const char *name);
long long llm_emu_cublas_gemms(void);   // products run so far (for the tests)
long long llm_emu_graph_launches(void);
long long llm_emu_kernel_runs(void);

#ifdef __cplusplus
}
#endif
#endif
