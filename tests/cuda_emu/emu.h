// A CUDA device on the CPU, for the tests: compiled with g++ as the first include of
// backends/cuda.cu (make CUDA_EMU=1), it gives the kernels what nvcc would (threadIdx, __shared__,
// __syncthreads, warp shuffles, __dp4a, half precision, WMMA fragments) and runs each launch block
// by block, the block's threads as fibers (ucontext) switched at every barrier, so barriers and
// shuffles meet as on a GPU: a thread waits at __syncthreads until every live thread of its block
// is there, at a shuffle until every live lane of its warp is. A kernel that deadlocks (a barrier
// some threads never reach) aborts with a message. What it cannot show: timing, races between
// blocks (blocks run one after the other), memory-model effects.
#ifndef LLM_CUDA_EMU_H
#define LLM_CUDA_EMU_H
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include "cuda_runtime_api.h"

#define LLM_CUDA_EMULATED 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__
#define __align__(n) alignas(n)

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct int4 { int x, y, z, w; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };

struct llm_emu_ids { uint3 tid, bid; dim3 bdim, gdim; };
const llm_emu_ids *llm_emu_self();
int llm_emu_thread_index();   // x + y * blockDim.x + z * blockDim.x * blockDim.y
#define threadIdx (llm_emu_self()->tid)
#define blockIdx (llm_emu_self()->bid)
#define blockDim (llm_emu_self()->bdim)
#define gridDim (llm_emu_self()->gdim)
static const int warpSize = 32;
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }

void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
void *llm_emu_dyn_smem();
// a lane's 8-byte slot of its warp's exchange, for shuffles
void llm_emu_exchange(const void *v, size_t n, int src_lane, void *out);

template <class T> static inline T llm_emu_shfl(T v, int src) {
    T r;
    llm_emu_exchange(&v, sizeof(T), src, &r);
    return r;
}
static inline unsigned llm_emu_lane() { return (unsigned)llm_emu_thread_index() % 32u; }
template <class T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    int lane = (int)llm_emu_lane();
    return llm_emu_shfl(v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
    int lane = (int)llm_emu_lane(), src = lane ^ m;
    return llm_emu_shfl(v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}
template <class T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
    int lane = (int)llm_emu_lane(), src = lane + (int)d;
    return llm_emu_shfl(v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}

// Atomics: the blocks' threads run one at a time, so plain read-modify-writes are atomic here.
static inline float atomicAdd(float *p, float v) { float o = *p; *p = o + v; return o; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p = o + v; return o; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }

static inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(a >> 8 * i) * (int)(int8_t)(b >> 8 * i);
    return c;
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = (unsigned long long)y << 32 | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned)(v >> 8 * (s >> 4 * i & 7) & 0xFF) << 8 * i;
    return r;
}
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }

// half precision: IEEE binary16, round to nearest even, as the hardware converts
struct __half { uint16_t x; };
static inline float __half2float(__half h) {
    uint32_t s = (uint32_t)(h.x >> 15) << 31, e = h.x >> 10 & 31, m = h.x & 1023, u;
    if (e == 0) {
        if (m == 0) u = s;
        else { float f = std::ldexp((float)m, -24); std::memcpy(&u, &f, 4); u |= s; }
    } else if (e == 31) u = s | 0x7f800000u | m << 13;
    else u = s | (e + 112) << 23 | m << 13;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline __half __float2half(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint32_t s = u >> 16 & 0x8000, a = u & 0x7fffffffu;
    __half h;
    if (a >= 0x7f800000u) { h.x = (uint16_t)(s | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0)); return h; }
    if (a >= 0x477ff000u) { h.x = (uint16_t)(s | 0x7c00); return h; }   // rounds to infinity
    if (a < 0x38800000u) {   // subnormal or zero: a multiple of 2^-24
        float v;
        std::memcpy(&v, &a, 4);
        h.x = (uint16_t)(s | (uint32_t)std::nearbyint(std::ldexp(v, 24)));
        return h;
    }
    uint32_t m = a + 0xfffu + (a >> 13 & 1);   // round to nearest even at bit 13
    h.x = (uint16_t)(s | ((m - 0x38000000u) >> 13));
    return h;
}
// bfloat16: the top half of a float, rounded to nearest even
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    __nv_bfloat16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) h.x = (uint16_t)(u >> 16 | 0x40);   // NaN stays NaN
    else h.x = (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
    return h;
}
static inline __half __ushort_as_half(unsigned short v) { __half h; h.x = v; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }

// WMMA: matrix_a / matrix_b fragments hold the whole 16 x 16 tile in every lane; an accumulator's
// element (r, c) is computed and stored by lane (16 r + c) % 32 only (the hardware spreads a tile
// over the warp in an unspecified layout, so kernels only load, store, fill and multiply
// fragments, and element-wise operations apply to all elements alike).
// WMMA's rules on the hardware: a tile's address 256-bit aligned, ldm a multiple of 16 bytes
// (aborts with a message otherwise)
void llm_emu_wmma_check(const void *p, size_t ld_bytes);
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    enum { num_elements = 256 };
    float x[256];   // element (r, c) at r * 16 + c (int8 inputs and int32 sums below 2^24 are exact)
};
static inline float llm_emu_value(__half h) { return __half2float(h); }
static inline float llm_emu_value(__nv_bfloat16 h) { return __bfloat162float(h); }
static inline float llm_emu_value(signed char v) { return (float)v; }
static inline float llm_emu_value(unsigned char v) { return (float)v; }
template <class Use, class T, class L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ld) {
    llm_emu_wmma_check(p, ld * sizeof(T));
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            bool col = std::is_same<L, col_major>::value;
            f.x[r * 16 + c] = llm_emu_value(p[col ? c * ld + r : r * ld + c]);
        }
}
template <class T>
static inline void fill_fragment(fragment<accumulator, 16, 16, 16, T> &f, T v) {
    for (int i = 0; i < 256; i++) f.x[i] = (float)v;
}
template <class La, class Lb, class Ta, class T>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, T> &d, const fragment<matrix_a, 16, 16, 16, Ta, La> &a,
                            const fragment<matrix_b, 16, 16, 16, Ta, Lb> &b,
                            const fragment<accumulator, 16, 16, 16, T> &c) {
    for (int e = (int)llm_emu_lane(); e < 256; e += 32) {
        const int r = e / 16, col = e % 16;
        float s = c.x[e];
        for (int k = 0; k < 16; k++) s += a.x[r * 16 + k] * b.x[k * 16 + col];
        d.x[e] = s;
    }
}
template <class T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f, unsigned ld, layout_t l) {
    llm_emu_wmma_check(p, ld * sizeof(T));
    for (int e = (int)llm_emu_lane(); e < 256; e += 32) {
        const int r = e / 16, c = e % 16;
        p[l == mem_col_major ? c * ld + r : r * ld + c] = (T)f.x[e];
    }
}
}  // namespace wmma
}  // namespace nvcuda

// kernel<<<grid, block, smem, stream>>>(args): the launch macro of backends/cuda.cu calls this
// (sync: the kernel may wait at barriers or shuffles, so its threads run as fibers; else one after
// the other, faster)
cudaError_t llm_emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool sync, std::function<void()> body);
#endif
