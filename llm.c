// llm.c — a portable LLM inference engine in one C file. MIT licence (LICENSE).
// See llm.h for the interface.
//
// Contents (each section starts with a banner "// === name ===")
//   1. helpers: errors, memory
//   2. tensor types: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_XS
//      (+ Q8_1, Q8_K activations) and the engine's AWQ/GPTQ layouts (int4/int8, groups of
//      32-128), SIMD kernels
//   3. model files: GGUF reader (mapped or read into memory, validated); JSON; safetensors;
//      Hugging Face directories (F32/F16/BF16, AWQ, GPTQ)
//   4. thread pool
//   5. backend vtable and the CPU backend
//   6. the transformer
//   7. KV cache blocks
//   8. sampler
//   9. tokenizer
//  10. quantizing model files (llm_quantize: llama-quantize's types, mixes and files)
//  11. public API, then serving: requests, the scheduler, steps
//  12. calibrated quantization: the calibration's statistics, GPTQ, AWQ, AWQ/GPTQ checkpoints
// The llm program (cli/) is built against llm.h alone; the GGUF writer of the tests and the
// model generator is tests/gguf_writer.h (llm_quantize has its own, for files as llama-quantize
// writes them).
//
// Portability: C11 and POSIX.1-2008 (threads, mmap, clock_gettime, sysconf). Linux-only calls
// are guarded, each with a fallback: madvise's MADV_HUGEPAGE and MADV_DONTNEED (skipped where
// the headers lack them), /proc/meminfo (llm__mem_available). `make portability` compiles llm.c
// as POSIX alone, with Linux's own headers hidden.

// Feature-test macros, before any header. glibc and musl declare madvise's MADV_* flags and
// _SC_AVPHYS_PAGES only with _GNU_SOURCE (which a -std=c11 build does not imply). macOS and the
// BSDs expose POSIX and their own calls by default, which a _POSIX_C_SOURCE would narrow: there
// nothing is defined.
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "llm.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define LLM__X86 1
#include <immintrin.h>
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
#define LLM__NEON 1
#include <arm_neon.h>
#endif

// === helpers: errors, logging, memory ===

#define LLM__MIN(a, b) ((a) < (b) ? (a) : (b))
#define LLM__MAX(a, b) ((a) > (b) ? (a) : (b))
#define LLM__MAX_SPEC 16   // speculative decoding: drafts per request and step, at most
#define LLM__TSTEP 128     // step times are measured per token count up to this many
#define LLM__SPEC_REQS 64  // draft model: requests that speculate in one step, at most
#define LLM__SPEC_MARGIN 1.1   // drafts are verified when the expected rate beats none by 10%
#define LLM__SPEC_MARGIN_DRAFT 1.25   // a draft model's: 25% (its sampling and a step's other work are not in the times)
#define LLM__SPEC_PROBE_SHARE 0.02    // a draft model's forced drafts (the first, probes): at most 2% of the steps' time
#define LLM__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define LLM__MAX_THREADS_AWQ 256   // llm_quantize's threads, at most

// An error message buffer. Every fallible internal function takes one and returns a status.
struct llm__err { char msg[512]; enum llm_status status; };

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static enum llm_status llm__fail(struct llm__err *e, enum llm_status st, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        e->status = st;
    }
    return st;
}

// memmem is a GNU and BSD extension, not POSIX: the first n-byte needle in h[0..hn), or NULL.
static const void *llm__memmem(const void *h, size_t hn, const void *needle, size_t n) {
    const char *p = h;
    if (n == 0) return p;
    while (hn >= n) {
        const char *q = memchr(p, *(const char *)needle, hn - n + 1);
        if (!q) return NULL;
        if (memcmp(q, needle, n) == 0) return q;
        hn -= (size_t)(q + 1 - p);
        p = q + 1;
    }
    return NULL;
}

// A NUL-terminated copy of s[0..n) (strndup is POSIX.1-2008, but not C11); NULL: no memory.
static char *llm__strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) { if (n) memcpy(d, s, n); d[n] = 0; }
    return d;
}

// A growable byte buffer: text being streamed, a header being written. A failed allocation is
// kept in fail (later puts do nothing).
struct llm__outbuf { char *p; size_t n, cap; bool fail; };
static void llm__outbuf_put(struct llm__outbuf *o, const void *s, size_t n) {
    if (o->fail || n == 0) return;
    if (o->n + n > o->cap) {
        size_t cap = LLM__MAX(2 * o->cap, o->n + n + 64);
        char *p = realloc(o->p, cap);
        if (!p) { o->fail = true; return; }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static inline double llm__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// 64-byte aligned allocation (cache lines, AVX-512 loads). Large buffers (weights, KV cache) are
// 2 MB aligned and asked to be backed by huge pages where the kernel does that on request
// (Linux THP "madvise" mode): streaming hundreds of MB per token through 4 KB pages costs a TLB
// miss every 4 KB.
static void *llm__alloc(size_t size) {
    void *p = NULL;
    if (size == 0) size = 64;
    size_t align = size >= ((size_t)4 << 20) ? ((size_t)2 << 20) : 64;
    if (posix_memalign(&p, align, (size + align - 1) & ~(align - 1)) != 0) return NULL;
#if defined(MADV_HUGEPAGE)
    if (align > 64) madvise(p, (size + align - 1) & ~(align - 1), MADV_HUGEPAGE);
#endif
    return p;
}

// === tensor types ===
// Tensor element types, numbered and laid out exactly as ggml does, so GGUF files written by
// llama.cpp are used in place. A quantized row is a run of blocks; a block holds `blck` elements
// in `block_bytes` bytes: one or two scales (fp16; fp32 for Q8_K) and small integers.
//
// This section provides
//   - per-type facts (llm__type_info, llm__row_bytes),
//   - fp16 / bf16 conversions (scalar, and row versions using F16C / NEON),
//   - row dequantizers and quantizers,
//   - dot product kernels, the inner loop of every matmul: s = dot(weight row, activation row).
//     The activation row is first quantized to the weight type's vec_dot_type, the same pairing
//     llama.cpp's CPU backend uses (Q4_0 x Q8_0, Q4_K x Q8_K, F16 x F16, ...), so results agree
//     with llama.cpp's up to the order of float additions.
//
// Every kernel exists as a scalar twin (always compiled; it defines the result) and as SIMD
// versions (AVX2, AVX-512 VNNI, NEON) that compute the same integer sums per block and differ
// only in how the float partial sums are added up. The x86 versions are compiled with function
// target attributes and picked at run time, so `cc -c llm.c` needs no -march flag.

enum llm__type {
    LLM__TYPE_F32 = 0, LLM__TYPE_F16 = 1, LLM__TYPE_Q4_0 = 2, LLM__TYPE_Q4_1 = 3,
    LLM__TYPE_Q5_0 = 6, LLM__TYPE_Q5_1 = 7, LLM__TYPE_Q8_0 = 8, LLM__TYPE_Q8_1 = 9,
    LLM__TYPE_Q2_K = 10, LLM__TYPE_Q3_K = 11, LLM__TYPE_Q4_K = 12, LLM__TYPE_Q5_K = 13,
    LLM__TYPE_Q6_K = 14, LLM__TYPE_Q8_K = 15,
    LLM__TYPE_IQ2_XXS = 16, LLM__TYPE_IQ2_XS = 17, LLM__TYPE_IQ3_XXS = 18, LLM__TYPE_IQ1_S = 19,
    LLM__TYPE_IQ4_NL = 20, LLM__TYPE_IQ3_S = 21, LLM__TYPE_IQ2_S = 22, LLM__TYPE_IQ4_XS = 23,
    LLM__TYPE_I8 = 24, LLM__TYPE_I16 = 25, LLM__TYPE_I32 = 26, LLM__TYPE_I64 = 27,
    LLM__TYPE_F64 = 28, LLM__TYPE_IQ1_M = 29, LLM__TYPE_BF16 = 30,
    // 31-33 and 36-38 are ggml's former repacked Q4_0 / IQ4_NL layouts (removed from ggml, still
    // found in old files); 4 and 5 were dropped before GGUF existed.
    LLM__TYPE_Q4_0_4X4 = 31, LLM__TYPE_Q4_0_4X8 = 32, LLM__TYPE_Q4_0_8X8 = 33,
    LLM__TYPE_TQ1_0 = 34, LLM__TYPE_TQ2_0 = 35,
    LLM__TYPE_IQ4_NL_4X4 = 36, LLM__TYPE_IQ4_NL_4X8 = 37, LLM__TYPE_IQ4_NL_8X8 = 38,
    LLM__TYPE_MXFP4 = 39,
    // The engine's own layouts for AWQ and GPTQ weights (made at load from a Hugging Face
    // checkpoint; never in a GGUF file, whose reader refuses these ids): see struct llm__block_gq.
    LLM__TYPE_G4_32 = 64, LLM__TYPE_G4_64 = 65, LLM__TYPE_G4_128 = 66,
    LLM__TYPE_G8_32 = 67, LLM__TYPE_G8_64 = 68, LLM__TYPE_G8_128 = 69,
    LLM__TYPE_COUNT = 70
};

struct llm__type_info {
    const char *name;      // ggml's name: "f32", "q4_0", "q4_K", ...
    int64_t blck;          // elements per block (1 for plain float and integer types)
    size_t block_bytes;    // bytes per block
    bool supported;        // usable as a weight type by llm.c
    int vec_dot_type;      // activation type a weight row of this type is multiplied with; -1: none
    bool internal;         // the engine's own layout, not a ggml type (GGUF files cannot hold it)
};

static const struct llm__type_info llm__type_table[LLM__TYPE_COUNT] = {
    [LLM__TYPE_F32]        = {"f32",         1,   4, true,  LLM__TYPE_F32, false},
    [LLM__TYPE_F16]        = {"f16",         1,   2, true,  LLM__TYPE_F16, false},
    [LLM__TYPE_Q4_0]       = {"q4_0",       32,  18, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_1]       = {"q4_1",       32,  20, true,  LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q5_0]       = {"q5_0",       32,  22, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q5_1]       = {"q5_1",       32,  24, true,  LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q8_0]       = {"q8_0",       32,  34, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q8_1]       = {"q8_1",       32,  36, false, LLM__TYPE_Q8_1, false},
    [LLM__TYPE_Q2_K]       = {"q2_K",      256,  84, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q3_K]       = {"q3_K",      256, 110, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q4_K]       = {"q4_K",      256, 144, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q5_K]       = {"q5_K",      256, 176, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q6_K]       = {"q6_K",      256, 210, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_Q8_K]       = {"q8_K",      256, 292, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_XXS]    = {"iq2_xxs",   256,  66, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_XS]     = {"iq2_xs",    256,  74, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ3_XXS]    = {"iq3_xxs",   256,  98, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ1_S]      = {"iq1_s",     256,  50, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_NL]     = {"iq4_nl",     32,  18, true,  LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ3_S]      = {"iq3_s",     256, 110, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ2_S]      = {"iq2_s",     256,  82, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_XS]     = {"iq4_xs",    256, 136, true,  LLM__TYPE_Q8_K, false},
    [LLM__TYPE_I8]         = {"i8",          1,   1, false, -1, false},
    [LLM__TYPE_I16]        = {"i16",         1,   2, false, -1, false},
    [LLM__TYPE_I32]        = {"i32",         1,   4, false, -1, false},
    [LLM__TYPE_I64]        = {"i64",         1,   8, false, -1, false},
    [LLM__TYPE_F64]        = {"f64",         1,   8, false, -1, false},
    [LLM__TYPE_IQ1_M]      = {"iq1_m",     256,  56, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_BF16]       = {"bf16",        1,   2, true,  LLM__TYPE_BF16, false},
    [LLM__TYPE_Q4_0_4X4]   = {"q4_0_4x4",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_0_4X8]   = {"q4_0_4x8",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_Q4_0_8X8]   = {"q4_0_8x8",   32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_TQ1_0]      = {"tq1_0",     256,  54, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_TQ2_0]      = {"tq2_0",     256,  66, false, LLM__TYPE_Q8_K, false},
    [LLM__TYPE_IQ4_NL_4X4] = {"iq4_nl_4x4", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ4_NL_4X8] = {"iq4_nl_4x8", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_IQ4_NL_8X8] = {"iq4_nl_8x8", 32,  18, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_MXFP4]      = {"mxfp4",      32,  17, false, LLM__TYPE_Q8_0, false},
    [LLM__TYPE_G4_32]      = {"int4_g32",   32,  20, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G4_64]      = {"int4_g64",   64,  36, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G4_128]     = {"int4_g128", 128,  68, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_32]      = {"int8_g32",   32,  36, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_64]      = {"int8_g64",   64,  68, true,  LLM__TYPE_Q8_0, true},
    [LLM__TYPE_G8_128]     = {"int8_g128", 128, 132, true,  LLM__TYPE_Q8_0, true},
};

// NULL when `type` is not a ggml type id at all (a loader reports "unknown type N"); otherwise the
// facts, including for types llm.c cannot compute with (supported == false).
static const struct llm__type_info *llm__type_info(uint32_t type) {
    if (type >= LLM__TYPE_COUNT || !llm__type_table[type].name) return NULL;
    return &llm__type_table[type];
}

// Bytes of a row of n elements; n must be a multiple of the block size. 0 for an unknown type.
static size_t llm__row_bytes(int type, int64_t n) {
    const struct llm__type_info *ti = llm__type_info((uint32_t)type);
    if (!ti) return 0;
    assert(n % ti->blck == 0);
    return (size_t)(n / ti->blck) * ti->block_bytes;
}

// --- block layouts (ggml-common.h), byte for byte ---
//
// The structs are only ever read through pointers to rows ggml laid out; rows must be 2-byte
// aligned (4-byte for Q8_K), which GGUF's 32-byte tensor alignment and llm__alloc guarantee.

#define LLM__QK 32      // elements per block of Q4_0 / Q8_0
#define LLM__QK_K 256   // elements per super-block of the k-quants

struct llm__block_q8_0 {   // x[j] = d * qs[j]
    uint16_t d;            // fp16 scale
    int8_t qs[32];
};
struct llm__block_q4_0 {   // x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8), j < 16
    uint16_t d;
    uint8_t qs[16];
};
// Q8_1: Q8_0 plus s = fp16(d * sum of qs), the activations of Q4_1/Q5_1 weights (their min
// times s is the min's share of a block's dot product).
struct llm__block_q8_1 {   // x[j] = d * qs[j]
    uint16_t d, s;
    int8_t qs[32];
};
struct llm__block_q4_1 {   // x[j] = d * (qs[j] & 15) + m, x[j+16] = d * (qs[j] >> 4) + m, j < 16
    uint16_t d, m;
    uint8_t qs[16];
};
// Q5_0 / Q5_1: Q4_0 / Q4_1 nibbles plus a fifth bit: bit j of qh (read as a little-endian u32) is
// bit 4 of quant j. Q5_0: x = d * (q - 16); Q5_1: x = d * q + m.
struct llm__block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};
struct llm__block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
// IQ4_NL: Q4_0's layout; a nibble indexes a fixed non-uniform grid: x = d * llm__iq4nl_values[q].
struct llm__block_iq4_nl {
    uint16_t d;
    uint8_t qs[16];
};
static const int8_t llm__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// Q4_K: 8 sub-blocks of 32. Sub-block s has a 6-bit scale sc[s] and 6-bit min m[s]:
// x = d*sc[s]*q - dmin*m[s], q a 4-bit quant. Sub-blocks 2c and 2c+1 (c = 0..3) share the 32
// bytes qs[32c..32c+32): low nibbles hold 2c, high nibbles 2c+1. `scales` packs sc and m:
//   bytes 0-3:  sc[0..3] in bits 0-5, bits 4-5 of sc[4..7] in bits 6-7
//   bytes 4-7:  m[0..3]  in bits 0-5, bits 4-5 of m[4..7]  in bits 6-7
//   bytes 8-11: bits 0-3 of sc[4..7] in the low nibble, bits 0-3 of m[4..7] in the high nibble
struct llm__block_q4_K {
    uint16_t d, dmin;      // fp16 super-block scales of the scales and of the mins
    uint8_t scales[12];
    uint8_t qs[128];
};
// Q5_K: Q4_K plus a fifth bit: bit s of qh[l] is bit 4 of element l of sub-block s.
struct llm__block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales: x = d * scales[s] * (q - 32), q a 6-bit quant.
// In each half h (128 elements; ql += 64h, qh += 32h), for l < 32:
//   q[l]    = ql[l]    & 15 | (qh[l] >> 0 & 3) << 4      q[l+64] = ql[l]    >> 4 | (qh[l] >> 4 & 3) << 4
//   q[l+32] = ql[l+32] & 15 | (qh[l] >> 2 & 3) << 4      q[l+96] = ql[l+32] >> 4 | (qh[l] >> 6 & 3) << 4
struct llm__block_q6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// Q3_K: 16 sub-blocks of 16 with 6-bit scales: x = d * (sc[s] - 32) * (q - 4), q a 3-bit quant.
// Element e (half h = e / 128, j = e % 128 / 32, l = e % 32): bits 0-1 of q are qs[32h + l] >> 2j & 3,
// bit 2 is hmask[l] >> (4h + j) & 1. sc[s]: bits 0-3 are scales[s] & 15 (s < 8) or scales[s - 8] >> 4,
// bits 4-5 are scales[8 + s % 4] >> 2(s / 4) & 3.
struct llm__block_q3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
// Q2_K: 16 sub-blocks of 16 with 4-bit scales and mins: x = d * (scales[s] & 15) * q - dmin *
// (scales[s] >> 4), q a 2-bit quant stored as Q3_K's low 2 bits.
struct llm__block_q2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales ls: x = d * (ls - 32) * llm__iq4nl_values[q], q a
// 4-bit index. Sub-block b: ls = scales_l[b / 2] >> 4(b % 2) & 15 | (scales_h >> 2b & 3) << 4;
// its elements l < 16 are the low nibbles of qs[16b + l], elements 16 + l the high nibbles.
struct llm__block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
// (IQ4_XS's 16 non-linear levels are IQ4_NL's, llm__iq4nl_values, above.)
// Q8_K: activations for the k-quants. bsums[g] = sum of qs[16g..16g+16), so a kernel gets the
// sums it needs for the mins (Q2_K/Q4_K/Q5_K) and the -32 offset (Q6_K) without touching qs again.
struct llm__block_q8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};
// The AWQ / GPTQ layouts (LLM__TYPE_G4_* and G8_*, the engine's own): a block is one
// quantization group of g = 32, 64 or 128 inputs with one fp16 scale d and one zero point z,
// x = d * (q - z), as the checkpoints define their weights. G4 (4.25 bits a weight at g = 128):
// q is a 4-bit unsigned quant and sub-block c (elements 32c..32c+31) keeps its nibbles in
// qs[16c..16c+16) as Q4_0 does (element 32c + j in the low nibble of byte 16c + j, 32c + 16 + j in
// the high one); z is 0..16 (GPTQ's v1 zeros, stored less one, can make 16). G8: qs[j] is the 8-bit
// quant less 128 (int8) and z the zero point less 128 (-128..128). Products are taken against
// Q8_0 activations with exact integer sums per sub-block: sum((q - z) * a).
struct llm__block_gq {
    uint16_t d;
    int16_t z;
    uint8_t qs[];          // g / 2 (G4) or g (G8) bytes
};
static bool llm__is_gq(int type) { return type >= LLM__TYPE_G4_32 && type <= LLM__TYPE_G8_128; }
static int llm__gq_bits(int type) { return type <= LLM__TYPE_G4_128 ? 4 : 8; }
static int llm__gq_group(int type) { return 32 << ((type - LLM__TYPE_G4_32) % 3); }

_Static_assert(sizeof(struct llm__block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(struct llm__block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(struct llm__block_q8_1) == 36, "block_q8_1 layout");
_Static_assert(sizeof(struct llm__block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(struct llm__block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(struct llm__block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(struct llm__block_iq4_nl) == 18, "block_iq4_nl layout");
_Static_assert(sizeof(struct llm__block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(struct llm__block_q5_K) == 176, "block_q5_K layout");
_Static_assert(sizeof(struct llm__block_q6_K) == 210, "block_q6_K layout");
_Static_assert(sizeof(struct llm__block_q3_K) == 110, "block_q3_K layout");
_Static_assert(sizeof(struct llm__block_q2_K) == 84, "block_q2_K layout");
_Static_assert(sizeof(struct llm__block_iq4_xs) == 136, "block_iq4_xs layout");
_Static_assert(sizeof(struct llm__block_q8_K) == 292, "block_q8_K layout");

// --- fp16 and bf16 ---

// Exact; NaNs come out quiet with their payload, as F16C's vcvtph2ps does.
static float llm__fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    float f;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | mant << 13 | (mant ? 0x00400000u : 0);
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | mant << 13;   // rebias the exponent: 15 -> 127
    } else {
        f = (float)mant * 0x1p-24f;                     // zero or subnormal: mant * 2^-24, exact
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest, ties to even, like F16C's vcvtps2ph (and so ggml): overflow gives infinity,
// NaNs stay NaN (quiet, the top 10 payload bits kept).
static uint16_t llm__fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | (ax >> 13 & 0x3ff));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);   // >= 65520 rounds to infinity
    uint32_t h, rest, half;
    if (ax >= 0x38800000u) {   // a normal half (>= 2^-14): keep 10 of the 23 mantissa bits
        h = (ax - 0x38000000u) >> 13;
        rest = ax & 0x1fff;
        half = 0x1000;
    } else {                   // a subnormal half: a multiple of 2^-24
        const uint32_t e = ax >> 23;
        if (e < 102) return sign;   // below 2^-25 (or exactly it: a tie, to even 0)
        const uint32_t mant = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
        h = mant >> shift;
        rest = mant & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    }
    if (rest > half || (rest == half && (h & 1))) h++;   // a carry into the exponent is correct
    return (uint16_t)(sign | h);
}

static float llm__bf16_to_fp32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// As ggml_compute_fp32_to_bf16: round to nearest even; NaN keeps its top bits and is made quiet.
static uint16_t llm__fp32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(x >> 16 | 64);
    return (uint16_t)((x + 0x7fffu + (x >> 16 & 1)) >> 16);
}

// --- CPU features ---

enum llm__simd { LLM__SIMD_SCALAR = 0, LLM__SIMD_AVX2 = 1, LLM__SIMD_AVX512 = 2, LLM__SIMD_NEON = 3 };

// LLM_NO_SIMD leaves the x86 SIMD kernels out (scalar kernels only): the fuzzers' builds, whose
// instrumentation of those kernels took clang over 2 minutes per harness.
#if defined(LLM__X86) && (defined(__GNUC__) || defined(__clang__)) && !defined(LLM_NO_SIMD)
#define LLM__X86_SIMD 1
// AVX2 level: AVX2 + FMA + F16C. AVX-512 level: F, BW, VL, DQ and VNNI (Ice Lake, Zen 4 and later).
#define LLM__AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLM__AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#endif

// The best level this CPU runs. The x86 checks read what the compiler runtime found at start-up
// (including OS support for the AVX / AVX-512 register state), so this is cheap to call often.
static enum llm__simd llm__simd_best(void) {
#if defined(LLM__X86_SIMD)
    __builtin_cpu_init();
#if defined(__clang__)
    // clang's __builtin_cpu_supports has no "f16c" (before clang 16); every AVX2 CPU has F16C.
    const bool f16c = true;
#else
    const bool f16c = __builtin_cpu_supports("f16c");
#endif
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)) return LLM__SIMD_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return LLM__SIMD_AVX512;
    return LLM__SIMD_AVX2;
#elif defined(LLM__NEON) && defined(__aarch64__)
    return LLM__SIMD_NEON;
#else
    return LLM__SIMD_SCALAR;
#endif
}

// --- fp16 rows: the same results as the scalar conversions, faster ---

#if defined(LLM__X86_SIMD)
LLM__AVX2 static void llm__fp16_to_fp32_row_f16c(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}
LLM__AVX2 static void llm__fp32_to_fp16_row_f16c(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif

static void llm__fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() != LLM__SIMD_SCALAR) {
        llm__fp16_to_fp32_row_f16c(x, y, n);
        return;
    }
#elif defined(LLM__NEON) && defined(__aarch64__)
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) y[i] = llm__fp16_to_fp32(x[i]);
    return;
#endif
    for (int64_t i = 0; i < n; i++) y[i] = llm__fp16_to_fp32(x[i]);
}

static void llm__fp32_to_fp16_row(const float *x, uint16_t *y, int64_t n) {
#if defined(LLM__X86_SIMD)
    if (llm__simd_best() != LLM__SIMD_SCALAR) {
        llm__fp32_to_fp16_row_f16c(x, y, n);
        return;
    }
#elif defined(LLM__NEON) && defined(__aarch64__)
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = llm__fp32_to_fp16(x[i]);
    return;
#endif
    for (int64_t i = 0; i < n; i++) y[i] = llm__fp32_to_fp16(x[i]);
}

// --- dequantization (scalar; off the hot path: embeddings, tests, debugging) ---

// Unpacks the 12 `scales` bytes of a Q4_K/Q5_K block into sm[0..8) = sc[0..8), sm[8..16) = m[0..8).
// Done on 32-bit words; every operation stays within its byte, so byte order does not matter.
static inline void llm__unpack_k4_scales(const uint8_t *scales, uint8_t sm[16]) {
    uint32_t w[3], o[4];
    memcpy(w, scales, 12);
    o[0] = w[0] & 0x3f3f3f3fu;
    o[1] = (w[2] & 0x0f0f0f0fu) | (w[0] >> 2 & 0x30303030u);
    o[2] = w[1] & 0x3f3f3f3fu;
    o[3] = (w[2] >> 4 & 0x0f0f0f0fu) | (w[1] >> 2 & 0x30303030u);
    memcpy(sm, o, 16);
}

static void llm__dequantize_q8_0(const struct llm__block_q8_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)x[i].qs[j];
    }
}

// The quant j of a G4 / G8 block (as stored: G8's less 128).
static inline int llm__gq_quant(const struct llm__block_gq *b, int bits, int j) {
    if (bits == 8) return (int8_t)b->qs[j];
    const uint8_t q = b->qs[16 * (j / 32) + j % 16];
    return j % 32 < 16 ? q & 15 : q >> 4;
}

static void llm__dequantize_gq(int type, const void *x, float *y, int64_t n) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type);
    const size_t bb = llm__type_table[type].block_bytes;
    for (int64_t i = 0; i < n / g; i++) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)x + (size_t)i * bb);
        const float d = llm__fp16_to_fp32(b->d);
        for (int j = 0; j < g; j++) y[i * g + j] = (float)(llm__gq_quant(b, bits, j) - b->z) * d;
    }
}

static void llm__dequantize_q4_0(const struct llm__block_q4_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((x[i].qs[j] & 15) - 8);
            y[j + 16] = d * (float)((x[i].qs[j] >> 4) - 8);
        }
    }
}

// The 32 quants (0..15, or 0..31 with qh) of a Q4_1/Q5_0/Q5_1/IQ4_NL block, in element order.
static inline void llm__b32_quants(const uint8_t *qs, const uint8_t *qh, uint8_t q[32]) {
    uint32_t h = 0;
    if (qh) memcpy(&h, qh, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 15) | (h >> j & 1) << 4);
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (h >> (j + 16) & 1) << 4);
    }
}

static void llm__dequantize_q4_1(const struct llm__block_q4_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d), m = llm__fp16_to_fp32(x[i].m);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, NULL, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

static void llm__dequantize_q5_0(const struct llm__block_q5_0 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

static void llm__dequantize_q5_1(const struct llm__block_q5_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d), m = llm__fp16_to_fp32(x[i].m);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

static void llm__dequantize_iq4_nl(const struct llm__block_iq4_nl *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        uint8_t q[32];
        llm__b32_quants(x[i].qs, NULL, q);
        for (int j = 0; j < 32; j++) y[j] = d * (float)llm__iq4nl_values[q[j]];
    }
}

static void llm__dequantize_q8_1(const struct llm__block_q8_1 *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK) {
        const float d = llm__fp16_to_fp32(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = d * (float)x[i].qs[j];
    }
}

// The 256 quants of a Q4_K (qh = NULL: 0..15) or Q5_K (0..31) super-block, in element order.
static inline void llm__k45_quants(const uint8_t *qs, const uint8_t *qh, uint8_t q[LLM__QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
    if (qh)
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] |= (uint8_t)((qh[l] >> (2 * c) & 1) << 4);
                q[64 * c + 32 + l] |= (uint8_t)((qh[l] >> (2 * c + 1) & 1) << 4);
            }
}

// The 256 quants of a Q6_K super-block minus 32 (-32..31), in element order.
static inline void llm__q6_K_quants(const struct llm__block_q6_K *x, int8_t q[LLM__QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        int8_t *qq = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            qq[l] = (int8_t)(((ql[l] & 15) | (qh[l] & 3) << 4) - 32);
            qq[l + 32] = (int8_t)(((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4) - 32);
            qq[l + 64] = (int8_t)(((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4) - 32);
            qq[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4) - 32);
        }
    }
}

// Q4_K and Q5_K: x = d * sc[s] * q - dmin * m[s] for sub-block s of 32.
static void llm__dequantize_k45(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qh,
                                const uint8_t *qs, float *y) {
    const float d = llm__fp16_to_fp32(d16), dmin = llm__fp16_to_fp32(dmin16);
    uint8_t sm[16], q[LLM__QK_K];
    llm__unpack_k4_scales(scales, sm);
    llm__k45_quants(qs, qh, q);
    for (int s = 0; s < 8; s++) {
        const float ds = d * sm[s], dm = dmin * sm[8 + s];
        for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)q[32 * s + l] - dm;
    }
}

static void llm__dequantize_q4_K(const struct llm__block_q4_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, NULL, x[i].qs, y + LLM__QK_K * i);
}

static void llm__dequantize_q5_K(const struct llm__block_q5_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) llm__dequantize_k45(x[i].d, x[i].dmin, x[i].scales, x[i].qh, x[i].qs, y + LLM__QK_K * i);
}

// x = d * scales[g] * q for sub-block g of 16.
static void llm__dequantize_q6_K(const struct llm__block_q6_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t q[LLM__QK_K];
        llm__q6_K_quants(&x[i], q);
        for (int g = 0; g < 16; g++) {
            const float dg = d * (float)x[i].scales[g];
            for (int l = 0; l < 16; l++) y[16 * g + l] = dg * (float)q[16 * g + l];
        }
    }
}

// The 256 2-bit fields of a Q2_K/Q3_K qs array (0..3), in element order.
static inline void llm__k23_low_quants(const uint8_t qs[64], uint8_t q[LLM__QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) q[128 * h + 32 * j + l] = qs[32 * h + l] >> (2 * j) & 3;
}

// The 16 6-bit scales of a Q3_K block (0..63, before the -32), unpacked on 32-bit words as
// described at struct llm__block_q3_K; every operation stays within its byte, so byte order does
// not matter.
static inline void llm__q3_K_scales_raw(const uint8_t scales[12], uint8_t sc[16]) {
    uint32_t w[3], o[4];
    memcpy(w, scales, 12);
    o[0] = (w[0] & 0x0f0f0f0fu) | (w[2] & 0x03030303u) << 4;
    o[1] = (w[1] & 0x0f0f0f0fu) | (w[2] >> 2 & 0x03030303u) << 4;
    o[2] = (w[0] >> 4 & 0x0f0f0f0fu) | (w[2] >> 4 & 0x03030303u) << 4;
    o[3] = (w[1] >> 4 & 0x0f0f0f0fu) | (w[2] >> 6 & 0x03030303u) << 4;
    memcpy(sc, o, 16);
}

// The 16 scales of a Q3_K block minus 32 (-32..31).
static inline void llm__q3_K_scales(const uint8_t scales[12], int8_t sc[16]) {
    uint8_t raw[16];
    llm__q3_K_scales_raw(scales, raw);
    for (int s = 0; s < 16; s++) sc[s] = (int8_t)(raw[s] - 32);
}

// The 256 quants of a Q3_K block minus 4 (-4..3), in element order.
static inline void llm__q3_K_quants(const struct llm__block_q3_K *x, int8_t q[LLM__QK_K]) {
    uint8_t lo[LLM__QK_K];
    llm__k23_low_quants(x->qs, lo);
    for (int e = 0; e < LLM__QK_K; e++) q[e] = (int8_t)((lo[e] | (x->hmask[e % 32] >> (e / 32) & 1) << 2) - 4);
}

// The 8 scales of an IQ4_XS block minus 32 (-32..31).
static inline void llm__iq4_xs_scales(const struct llm__block_iq4_xs *x, int8_t ls[8]) {
    for (int b = 0; b < 8; b++) ls[b] = (int8_t)(((x->scales_l[b / 2] >> (4 * (b % 2)) & 15) | (x->scales_h >> (2 * b) & 3) << 4) - 32);
}

// x = d * (sc[s] - 32) * (q - 4) for sub-block s of 16.
static void llm__dequantize_q3_K(const struct llm__block_q3_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t sc[16], q[LLM__QK_K];
        llm__q3_K_scales(x[i].scales, sc);
        llm__q3_K_quants(&x[i], q);
        for (int s = 0; s < 16; s++) {
            const float ds = d * (float)sc[s];
            for (int l = 0; l < 16; l++) y[16 * s + l] = ds * (float)q[16 * s + l];
        }
    }
}

// x = d * sc[s] * q - dmin * m[s] for sub-block s of 16.
static void llm__dequantize_q2_K(const struct llm__block_q2_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d), dmin = llm__fp16_to_fp32(x[i].dmin);
        uint8_t q[LLM__QK_K];
        llm__k23_low_quants(x[i].qs, q);
        for (int s = 0; s < 16; s++) {
            const float ds = d * (float)(x[i].scales[s] & 15), dm = dmin * (float)(x[i].scales[s] >> 4);
            for (int l = 0; l < 16; l++) y[16 * s + l] = ds * (float)q[16 * s + l] - dm;
        }
    }
}

// x = d * (ls[b] - 32) * value[q] for sub-block b of 32.
static void llm__dequantize_iq4_xs(const struct llm__block_iq4_xs *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K) {
        const float d = llm__fp16_to_fp32(x[i].d);
        int8_t ls[8];
        llm__iq4_xs_scales(&x[i], ls);
        for (int b = 0; b < 8; b++) {
            const float db = d * (float)ls[b];
            const uint8_t *qs = x[i].qs + 16 * b;
            for (int l = 0; l < 16; l++) {
                y[32 * b + l] = db * (float)llm__iq4nl_values[qs[l] & 15];
                y[32 * b + 16 + l] = db * (float)llm__iq4nl_values[qs[l] >> 4];
            }
        }
    }
}

static void llm__dequantize_q8_K(const struct llm__block_q8_K *x, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += LLM__QK_K)
        for (int j = 0; j < LLM__QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

// --- quantization ---

// Round to nearest, ties to even (for |f| < 2^51), as ggml's nearest_int does for |f| < 2^22.
// Adding 1.5 * 2^52 leaves the integer in the low mantissa bits. The add is done in double on
// the already rounded float: a compiler cannot fuse it with the multiply that produced f into an
// FMA (gcc does that in GNU C mode), which would round differently from ggml's reference code.
static inline int llm__nearest_int(float f) {
    const double v = (double)f + 6755399441055744.0;
    int64_t bits;
    memcpy(&bits, &v, 8);
    return (int)(bits - 0x4338000000000000);
}

// Activations that are not finite (a model whose weights overflow) must quantize without
// undefined behaviour and stay not finite, so that the logits show it (the engine checks the
// rows it samples from, not every activation):
//   - a block with a NaN gets the scale NaN (every product with it is NaN); the maximum alone
//     could miss it (comparisons with NaN are false) and turn it into a 0;
//   - a block with an infinity gets the scale infinity (amax / 127), so id = 0;
//   - x * id is then NaN for such elements, and beyond +-127 only when id overflowed (a subnormal
//     amax): such a value is clamped before it is converted, NaN to 0, the others to +-127.
// Finite blocks never reach the clamp (|x * id| <= 127 up to rounding, which rounds to 127
// either way): their bytes stay ggml's. The AVX-512 quantizers do the same: on every path the
// quants lie in [-127, 127] and block sums are bounded (the x16 layouts store -c x the sum of 32
// quants in an int32).
static inline float llm__clamp_q127(float v) {
    return v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v == v ? v : 0.0f;
}

// As quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
static void llm__quantize_q8_0(const float *x, struct llm__block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        bool nan = false;
        for (int j = 0; j < 32; j++) amax = LLM__MAX(amax, fabsf(x[j])), nan |= x[j] != x[j];
        const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) {
            // roundf(v) without a libm call: v +- 0.5 is exact in double, then truncate
            const double v = (double)llm__clamp_q127(x[j] * id);
            y[i].qs[j] = (int8_t)(int)(v + (v < 0 ? -0.5 : 0.5));
        }
    }
}

// As quantize_row_q4_0_ref: the element of largest magnitude maps to -8, d = max / -8.
// G4 / G8 by rounding to nearest, group by group (the tests' and --quantize's; AWQ and GPTQ
// checkpoints bring their own quants): the group's range [min(x, 0), max(x, 0)] over 2^bits - 1
// steps, z the step where 0 falls, q = clamp(round(x / d) + z).
static void llm__quantize_gq(int type, const float *x, void *y, int64_t n) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), qmax = (1 << bits) - 1, off = bits == 8 ? 128 : 0;
    const size_t bb = llm__type_table[type].block_bytes;
    for (int64_t i = 0; i < n / g; i++) {
        struct llm__block_gq *b = (void *)((uint8_t *)y + (size_t)i * bb);
        const float *v = x + i * g;
        float lo = 0.0f, hi = 0.0f;
        for (int j = 0; j < g; j++) lo = v[j] < lo ? v[j] : lo, hi = v[j] > hi ? v[j] : hi;
        b->d = llm__fp32_to_fp16((hi - lo) / (float)qmax);
        const float d = llm__fp16_to_fp32(b->d), id = d > 0.0f ? 1.0f / d : 0.0f;
        const int z = (int)LLM__MIN((float)qmax, LLM__MAX(0.0f, nearbyintf(-lo * id)));
        b->z = (int16_t)(z - off);
        memset(b->qs, 0, (size_t)(bits == 8 ? g : g / 2));
        for (int j = 0; j < g; j++) {
            const int q = (int)LLM__MIN((float)qmax, LLM__MAX(0.0f, nearbyintf(v[j] * id) + (float)z));
            if (bits == 8) b->qs[j] = (uint8_t)(q - off);
            else b->qs[16 * (j / 32) + j % 16] |= (uint8_t)(q << (j % 32 < 16 ? 0 : 4));
        }
    }
}

static void llm__quantize_q4_0(const float *x, struct llm__block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            // ggml truncates v + 8.5f; the float sum is formed in double (exact) and rounded to
            // float, so it cannot be fused with the multiply (see llm__nearest_int)
            const float v0 = x[j] * id, v1 = x[j + 16] * id;
            const int q0 = LLM__MIN(15, (int)(float)((double)v0 + 8.5)), q1 = LLM__MIN(15, (int)(float)((double)v1 + 8.5));
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// As quantize_row_q8_1_ref: Q8_0's quants and scale, and s = fp16(d * sum of the quants) (d before
// its rounding to fp16, as ggml). Not finite: as Q8_0 (s is then NaN or infinite too).
static void llm__quantize_q8_1(const float *x, struct llm__block_q8_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f;
        bool nan = false;
        for (int j = 0; j < 32; j++) amax = LLM__MAX(amax, fabsf(x[j])), nan |= x[j] != x[j];
        const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const double v = (double)llm__clamp_q127(x[j] * id);   // roundf, as in llm__quantize_q8_0
            y[i].qs[j] = (int8_t)(int)(v + (v < 0 ? -0.5 : 0.5));
            sum += y[i].qs[j];
        }
        y[i].s = llm__fp32_to_fp16((float)sum * d);
    }
}

// Min and max of a block of 32 (quantize_row_q4_1_ref / q5_1_ref start from FLT_MAX / -FLT_MAX).
static void llm__block_min_max(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) *min = LLM__MIN(*min, x[j]), *max = LLM__MAX(*max, x[j]);
}

// Packs 32 quants (element order, < 32) into nibbles and, when qh is given, fifth bits.
static void llm__b32_pack(const uint8_t q[32], uint8_t qs[16], uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        h |= (uint32_t)(q[j] >> 4 & 1) << j | (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    if (qh) memcpy(qh, &h, 4);
}

// As quantize_row_q4_1_ref (bits 4) and quantize_row_q5_1_ref (bits 5): d = (max - min) / (2^bits
// - 1), m = min, q = (x - min) / d + 0.5 truncated (capped at 15 for Q4_1, as ggml). The sums are
// formed in double and rounded to float, so they cannot be fused (see llm__nearest_int).
static void llm__quantize_min_block(const float *x, int bits, uint16_t *d_out, uint16_t *m_out, uint8_t q[32]) {
    float min, max;
    llm__block_min_max(x, &min, &max);
    const float d = (max - min) / (float)((1 << bits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = llm__fp32_to_fp16(d);
    *m_out = llm__fp32_to_fp16(min);
    for (int j = 0; j < 32; j++) {
        const float v = (float)((double)x[j] - min) * id;
        const int qi = (int)(float)((double)v + 0.5);
        q[j] = (uint8_t)(bits == 4 ? LLM__MIN(15, qi) : qi);
    }
}

static void llm__quantize_q4_1(const float *x, struct llm__block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        uint8_t q[32];
        llm__quantize_min_block(x, 4, &y[i].d, &y[i].m, q);
        llm__b32_pack(q, y[i].qs, NULL);
    }
}

static void llm__quantize_q5_1(const float *x, struct llm__block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        uint8_t q[32];
        llm__quantize_min_block(x, 5, &y[i].d, &y[i].m, q);
        llm__b32_pack(q, y[i].qs, y[i].qh);
    }
}

// As quantize_row_q5_0_ref: the element of largest magnitude maps to -16, d = max / -16.
static void llm__quantize_q5_0(const float *x, struct llm__block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = llm__fp32_to_fp16(d);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)LLM__MIN(31, (int)(float)((double)(x[j] * id) + 16.5));
        llm__b32_pack(q, y[i].qs, y[i].qh);
    }
}

// The grid value of llm__iq4nl_values nearest to v (the grid is sorted).
static int llm__iq4nl_index(float v) {
    int k = 0;
    while (k < 15 && v > 0.5f * (float)(llm__iq4nl_values[k] + llm__iq4nl_values[k + 1])) k++;
    return k;
}

// The scale of 32 elements on the IQ4_NL grid: for 15 trial scales around the one that puts the
// element of largest magnitude on the grid's end, each element takes the nearest grid value and the
// scale is refitted to those by least squares; the fit of least squared error is kept (0: all zero).
// ggml searches the same trials but weighs each element by its square; unweighted fits the values
// closer (tests/test_quantize.sh compares the errors with llama-quantize's).
static float llm__iq4nl_fit(const float *xb) {
    float amax = 0.0f, max = 0.0f, best_s = 0.0f;
    for (int l = 0; l < 32; l++)
        if (fabsf(xb[l]) > amax) amax = fabsf(xb[l]), max = xb[l];
    if (amax == 0.0f) return 0.0f;
    double best = INFINITY;
    for (int t = -7; t <= 7; t++) {
        const float id = ((float)t - 127.0f) / max;
        double sqq = 0, sqx = 0;
        for (int l = 0; l < 32; l++) {
            const int v = llm__iq4nl_values[llm__iq4nl_index(id * xb[l])];
            sqq += (double)v * v, sqx += (double)v * xb[l];
        }
        if (sqq == 0) continue;
        const double sc = sqx / sqq;
        double err = 0;
        for (int l = 0; l < 32; l++) {
            const int v = llm__iq4nl_values[llm__iq4nl_index(id * xb[l])];
            err += (sc * v - xb[l]) * (sc * v - xb[l]);
        }
        if (err < best) best = err, best_s = (float)sc;
    }
    return best_s;
}

// IQ4_NL: the scale of llm__iq4nl_fit in fp16, each element the nearest grid value against it.
static void llm__quantize_iq4_nl(const float *x, struct llm__block_iq4_nl *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK) {
        y[i].d = llm__fp32_to_fp16(llm__iq4nl_fit(x));
        const float d = llm__fp16_to_fp32(y[i].d), id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t q[32];
        for (int j = 0; j < 32; j++) q[j] = (uint8_t)llm__iq4nl_index(x[j] * id);
        llm__b32_pack(q, y[i].qs, NULL);
    }
}

// As quantize_row_q8_K_ref: iscale = -127 / max (max: the element of largest magnitude),
// q = nearest_int(iscale * x) capped at 127, d = 1 / iscale, and the 16 group sums.
static void llm__quantize_q8_K(const float *x, struct llm__block_q8_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float amax = 0.0f, max = 0.0f;
        bool nan = false;
        for (int j = 0; j < LLM__QK_K; j++) {
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
            nan |= x[j] != x[j];
        }
        if (amax == 0.0f || nan) {   // (a NaN: quants 0, the scale NaN; see llm__clamp_q127)
            memset(&y[i], 0, sizeof(y[i]));
            if (nan) y[i].d = NAN;
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < LLM__QK_K; j++) {
            const float v = llm__clamp_q127(iscale * x[j]);   // (not finite: see llm__clamp_q127)
            y[i].qs[j] = (int8_t)LLM__MIN(127, llm__nearest_int(v));
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

// Fits x[0..n) ~ scale * q - offset with integer q in [0, qmax], scale >= 0 and offset >= 0 (the
// k-quant formats store a non-negative min that is subtracted, so the range always includes 0).
// Tries ranges slightly narrower and wider than [min(x, 0), max(x)]; for each, assigns q and
// refits (scale, offset) by least squares; keeps the pair with the smallest squared error.
static void llm__fit_scale_min(const float *x, int n, int qmax, float *scale, float *offset) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) lo = LLM__MIN(lo, x[i]), hi = LLM__MAX(hi, x[i]);
    *scale = (hi - lo) / (float)qmax;
    *offset = -lo;
    if (hi <= lo) {
        *scale = 0.0f;
        return;
    }
    double sum_x = 0;
    for (int i = 0; i < n; i++) sum_x += x[i];
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = ((float)qmax + 0.1f * (float)t) / (hi - lo);
        double sq = 0, sqq = 0, sqx = 0;
        int q[LLM__QK];
        for (int i = 0; i < n; i++) {
            q[i] = LLM__MAX(0, LLM__MIN(qmax, llm__nearest_int(iscale * (x[i] - lo))));
            sq += q[i], sqq += (double)q[i] * q[i], sqx += (double)q[i] * x[i];
        }
        // minimize sum (s*q + b - x)^2 over s and b; the format needs b = -offset <= 0
        const double det = n * sqq - sq * sq;
        if (det <= 0) continue;
        double s = (n * sqx - sq * sum_x) / det, b = (sum_x - s * sq) / n;
        if (b > 0) b = 0, s = sqx / sqq;
        if (s <= 0) continue;
        double err = 0;
        for (int i = 0; i < n; i++) err += (s * q[i] + b - x[i]) * (s * q[i] + b - x[i]);
        if (err < best) best = err, *scale = (float)s, *offset = (float)-b;
    }
}

// Fits x[0..n) ~ scale * q with integer q in [-32, 31] (scale may be negative so the element of
// largest magnitude can use -32). Tries scales around max / -32 and refits each by least squares.
static float llm__fit_scale_sym(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax == 0.0f) return 0.0f;
    float best_scale = max / -32.0f;
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = (-32.0f + 0.1f * (float)t) / max;
        double sqq = 0, sqx = 0;
        int q[16];
        for (int i = 0; i < n; i++) {
            q[i] = LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(iscale * x[i])));
            sqq += (double)q[i] * q[i], sqx += (double)q[i] * x[i];
        }
        if (sqq == 0) continue;
        const double s = sqx / sqq;
        double err = 0;
        for (int i = 0; i < n; i++) err += (s * q[i] - x[i]) * (s * q[i] - x[i]);
        if (err < best) best = err, best_scale = (float)s;
    }
    return best_scale;
}

// Q4_K (qmax 15) and Q5_K (qmax 31): fit each sub-block of 32, quantize the 8 scales and 8 mins
// to 6 bits against fp16 super-block scales, then requantize every element against the scale
// and min it will really be decoded with. q[0..256) receives the quants.
static void llm__quantize_k_super(const float *x, int qmax, uint16_t *d_out, uint16_t *dmin_out,
                                  uint8_t scales[12], uint8_t q[LLM__QK_K]) {
    float sub_scale[8], sub_min[8], max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; s++) {
        llm__fit_scale_min(x + 32 * s, 32, qmax, &sub_scale[s], &sub_min[s]);
        max_scale = LLM__MAX(max_scale, sub_scale[s]);
        max_min = LLM__MAX(max_min, sub_min[s]);
    }
    *d_out = llm__fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = llm__fp32_to_fp16(max_min / 63.0f);
    const float d = llm__fp16_to_fp32(*d_out), dmin = llm__fp16_to_fp32(*dmin_out);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = (uint8_t)(d > 0.0f ? LLM__MAX(0, LLM__MIN(63, llm__nearest_int(sub_scale[s] / d))) : 0);
        m[s] = (uint8_t)(dmin > 0.0f ? LLM__MAX(0, LLM__MIN(63, llm__nearest_int(sub_min[s] / dmin))) : 0);
    }
    for (int j = 0; j < 4; j++) {   // the packing described at struct llm__block_q4_K
        scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    for (int s = 0; s < 8; s++) {
        const float ds = d * sc[s], dm = dmin * m[s];
        for (int l = 0; l < 32; l++) {
            const int v = ds > 0.0f ? llm__nearest_int((x[32 * s + l] + dm) / ds) : 0;
            q[32 * s + l] = (uint8_t)LLM__MAX(0, LLM__MIN(qmax, v));
        }
    }
}

static void llm__quantize_q4_K(const float *x, struct llm__block_q4_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        uint8_t q[LLM__QK_K];
        llm__quantize_k_super(x, 15, &y[i].d, &y[i].dmin, y[i].scales, q);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) y[i].qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
}

static void llm__quantize_q5_K(const float *x, struct llm__block_q5_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        uint8_t q[LLM__QK_K];
        llm__quantize_k_super(x, 31, &y[i].d, &y[i].dmin, y[i].scales, q);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
                y[i].qs[32 * c + l] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
                y[i].qh[l] |= (uint8_t)((q0 >> 4) << (2 * c) | (q1 >> 4) << (2 * c + 1));
            }
    }
}

static void llm__quantize_q6_K(const float *x, struct llm__block_q6_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], amax = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub_scale[s] = llm__fit_scale_sym(x + 16 * s, 16);
            amax = LLM__MAX(amax, fabsf(sub_scale[s]));
        }
        y[i].d = llm__fp32_to_fp16(amax / 127.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        uint8_t q[LLM__QK_K];   // quant + 32, in [0, 64)
        for (int s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? LLM__MAX(-127, LLM__MIN(127, llm__nearest_int(sub_scale[s] / d))) : 0;
            y[i].scales[s] = (int8_t)sc;
            const float ds = d * (float)sc;
            for (int l = 0; l < 16; l++) {
                const int v = ds != 0.0f ? llm__nearest_int(x[16 * s + l] / ds) : 0;
                q[16 * s + l] = (uint8_t)(LLM__MAX(-32, LLM__MIN(31, v)) + 32);
            }
        }
        for (int h = 0; h < 2; h++) {   // the packing described at struct llm__block_q6_K
            const uint8_t *qq = q + 128 * h;
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((qq[l] & 15) | (qq[l + 64] & 15) << 4);
                ql[l + 32] = (uint8_t)((qq[l + 32] & 15) | (qq[l + 96] & 15) << 4);
                qh[l] = (uint8_t)(qq[l] >> 4 | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
            }
        }
    }
}

// Fits x[0..n) ~ scale * q with integer q in [-nmax, nmax) (scale may be negative so the element
// of largest magnitude can use -nmax). Tries scales around max / -nmax, refits each by least squares.
static float llm__fit_scale_sym_n(const float *x, int n, int nmax) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax == 0.0f) return 0.0f;
    float best_scale = max / (float)-nmax;
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        const float iscale = ((float)-nmax + 0.05f * (float)(nmax * t)) / max;
        double sqq = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            const int q = LLM__MAX(-nmax, LLM__MIN(nmax - 1, llm__nearest_int(iscale * x[i])));
            sqq += (double)q * q, sqx += (double)q * x[i];
        }
        if (sqq == 0) continue;
        const double s = sqx / sqq;
        double err = 0;
        for (int i = 0; i < n; i++) {
            const int q = LLM__MAX(-nmax, LLM__MIN(nmax - 1, llm__nearest_int(iscale * x[i])));
            err += (s * q - x[i]) * (s * q - x[i]);
        }
        if (err < best) best = err, best_scale = (float)s;
    }
    return best_scale;
}

// Packs 256 quants 0..3 into the Q2_K/Q3_K qs layout (the inverse of llm__k23_low_quants).
static void llm__pack_k23_low(const uint8_t q[LLM__QK_K], uint8_t qs[64]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *qq = q + 128 * h + l;
            qs[32 * h + l] = (uint8_t)((qq[0] & 3) | (qq[32] & 3) << 2 | (qq[64] & 3) << 4 | (qq[96] & 3) << 6);
        }
}

// Q3_K: a symmetric scale per sub-block of 16 (quants -4..3), the 16 scales to 6 bits against an
// fp16 super-block scale, then every element requantized against the scale it will be decoded with.
static void llm__quantize_q3_K(const float *x, struct llm__block_q3_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], amax = 0.0f, max = 0.0f;
        for (int s = 0; s < 16; s++) {
            sub_scale[s] = llm__fit_scale_sym_n(x + 16 * s, 16, 4);
            if (fabsf(sub_scale[s]) > amax) amax = fabsf(sub_scale[s]), max = sub_scale[s];
        }
        y[i].d = llm__fp32_to_fp16(max / -32.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        uint8_t q[LLM__QK_K], lo[LLM__QK_K];
        memset(y[i].scales, 0, sizeof(y[i].scales));
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int s = 0; s < 16; s++) {
            const int sc = d != 0.0f ? LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(sub_scale[s] / d))) : 0;
            const int u = sc + 32;   // the packing described at struct llm__block_q3_K
            y[i].scales[s % 8] |= (uint8_t)((u & 15) << (4 * (s / 8)));
            y[i].scales[8 + s % 4] |= (uint8_t)((u >> 4) << (2 * (s / 4)));
            const float ds = d * (float)sc;
            for (int l = 0; l < 16; l++) {
                const int v = ds != 0.0f ? llm__nearest_int(x[16 * s + l] / ds) : 0;
                q[16 * s + l] = (uint8_t)(LLM__MAX(-4, LLM__MIN(3, v)) + 4);
            }
        }
        for (int e = 0; e < LLM__QK_K; e++) {
            lo[e] = q[e] & 3;
            y[i].hmask[e % 32] |= (uint8_t)((q[e] >> 2) << (e / 32));
        }
        llm__pack_k23_low(lo, y[i].qs);
    }
}

// Q2_K: scale and min per sub-block of 16 (quants 0..3), both to 4 bits against fp16 super-block
// scales, then every element requantized against the scale and min it will be decoded with.
static void llm__quantize_q2_K(const float *x, struct llm__block_q2_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[16], sub_min[16], max_scale = 0.0f, max_min = 0.0f;
        for (int s = 0; s < 16; s++) {
            llm__fit_scale_min(x + 16 * s, 16, 3, &sub_scale[s], &sub_min[s]);
            max_scale = LLM__MAX(max_scale, sub_scale[s]);
            max_min = LLM__MAX(max_min, sub_min[s]);
        }
        y[i].d = llm__fp32_to_fp16(max_scale / 15.0f);
        y[i].dmin = llm__fp32_to_fp16(max_min / 15.0f);
        const float d = llm__fp16_to_fp32(y[i].d), dmin = llm__fp16_to_fp32(y[i].dmin);
        uint8_t q[LLM__QK_K];
        for (int s = 0; s < 16; s++) {
            const int sc = d > 0.0f ? LLM__MAX(0, LLM__MIN(15, llm__nearest_int(sub_scale[s] / d))) : 0;
            const int m = dmin > 0.0f ? LLM__MAX(0, LLM__MIN(15, llm__nearest_int(sub_min[s] / dmin))) : 0;
            y[i].scales[s] = (uint8_t)(sc | m << 4);
            const float ds = d * (float)sc, dm = dmin * (float)m;
            for (int l = 0; l < 16; l++) {
                const int v = ds > 0.0f ? llm__nearest_int((x[16 * s + l] + dm) / ds) : 0;
                q[16 * s + l] = (uint8_t)LLM__MAX(0, LLM__MIN(3, v));
            }
        }
        llm__pack_k23_low(q, y[i].qs);
    }
}

// The index of the IQ4_NL level nearest to v (in units of the sub-block's scale).
static inline int llm__iq4nl_nearest(float v) {
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf(v - (float)llm__iq4nl_values[k]) < fabsf(v - (float)llm__iq4nl_values[best])) best = k;
    return best;
}

// IQ4_XS: per sub-block of 32, scales around max / -127 (the largest magnitude on the level -127)
// each assigned and refit by least squares; the 8 scales to 6 bits against an fp16 super-block
// scale; then every element gets the level nearest to it under the scale it will be decoded with.
static void llm__quantize_iq4_xs(const float *x, struct llm__block_iq4_xs *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += LLM__QK_K) {
        float sub_scale[8], amax_s = 0.0f, max_s = 0.0f;
        for (int b = 0; b < 8; b++) {
            sub_scale[b] = llm__iq4nl_fit(x + 32 * b);
            if (fabsf(sub_scale[b]) > amax_s) amax_s = fabsf(sub_scale[b]), max_s = sub_scale[b];
        }
        y[i].d = llm__fp32_to_fp16(max_s / -32.0f);
        const float d = llm__fp16_to_fp32(y[i].d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
        for (int b = 0; b < 8; b++) {
            const int ls = d != 0.0f ? LLM__MAX(-32, LLM__MIN(31, llm__nearest_int(sub_scale[b] / d))) : 0;
            const int u = ls + 32;   // the packing described at struct llm__block_iq4_xs
            y[i].scales_l[b / 2] |= (uint8_t)((u & 15) << (4 * (b % 2)));
            y[i].scales_h |= (uint16_t)((u >> 4) << (2 * b));
            const float db = d * (float)ls, idb = db != 0.0f ? 1.0f / db : 0.0f;
            for (int l = 0; l < 16; l++) {
                const int q0 = llm__iq4nl_nearest(x[32 * b + l] * idb), q1 = llm__iq4nl_nearest(x[32 * b + 16 + l] * idb);
                y[i].qs[16 * b + l] = (uint8_t)(q0 | q1 << 4);
            }
        }
    }
}

// --- dot products: scalar twins ---
//
// All kernels share one signature. n: elements (a multiple of the weight type's block size);
// w: a weight row; a: an activation row of the weight type's vec_dot_type. Q8_0 activations must
// lie in [-127, 127], as llm__quantize_row produces them (the AVX2 kernel relies on it).

typedef void (*llm__vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);

static void llm__vec_dot_f32_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(w[i] * a[i]);
    *s = (float)sum;
}

static void llm__vec_dot_f16_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(llm__fp16_to_fp32(w[i]) * llm__fp16_to_fp32(a[i]));
    *s = (float)sum;
}

static void llm__vec_dot_bf16_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]));
    *s = (float)sum;
}

static void llm__vec_dot_q8_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += w[i].qs[j] * a[i].qs[j];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

static void llm__vec_dot_q4_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((w[i].qs[j] & 15) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

// G4 / G8 x Q8_0: per sub-block of 32, the integer sum((q - z) * a) times d_w * d_a.
static inline float llm__vec_dot_gq_scalar(int type, int64_t n, const void *vw, const void *va) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type);
    const size_t bb = llm__type_table[type].block_bytes;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / g; i++) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);
        const float d = llm__fp16_to_fp32(b->d);
        for (int c = 0; c < g / 32; c++, a++) {
            int32_t sumi = 0;
            for (int j = 0; j < 32; j++) sumi += (llm__gq_quant(b, bits, 32 * c + j) - b->z) * a->qs[j];
            sum += (float)sumi * (d * llm__fp16_to_fp32(a->d));
        }
    }
    return sum;
}
#define LLM__GQ_KERNELS(SFX, ATTR, IMPL)                                                                                 \
    ATTR static void llm__vec_dot_int4_g32_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G4_32, n, w, a); }   \
    ATTR static void llm__vec_dot_int4_g64_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G4_64, n, w, a); }   \
    ATTR static void llm__vec_dot_int4_g128_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G4_128, n, w, a); } \
    ATTR static void llm__vec_dot_int8_g32_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G8_32, n, w, a); }   \
    ATTR static void llm__vec_dot_int8_g64_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G8_64, n, w, a); }   \
    ATTR static void llm__vec_dot_int8_g128_##SFX(int64_t n, float *s, const void *w, const void *a) { *s = IMPL(LLM__TYPE_G8_128, n, w, a); }
LLM__GQ_KERNELS(scalar, , llm__vec_dot_gq_scalar)
// The kernel of G type t at one level (the dispatch's case lines).
#define LLM__GQ_CASES(SFX)                                                          \
    case LLM__TYPE_G4_32: return llm__vec_dot_int4_g32_##SFX;                       \
    case LLM__TYPE_G4_64: return llm__vec_dot_int4_g64_##SFX;                       \
    case LLM__TYPE_G4_128: return llm__vec_dot_int4_g128_##SFX;                     \
    case LLM__TYPE_G8_32: return llm__vec_dot_int8_g32_##SFX;                       \
    case LLM__TYPE_G8_64: return llm__vec_dot_int8_g64_##SFX;                       \
    case LLM__TYPE_G8_128: return llm__vec_dot_int8_g128_##SFX;

// Q4_1 / Q5_1 x Q8_1: d_w * d_a * dot(q, a) + m * s (s = d_a * sum(a): the min's share).
static void llm__vec_dot_q4_1_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_1 *w = vw;
    const struct llm__block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) sumi += (w[i].qs[j] & 15) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + 16];
        sum += (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d)) * (float)sumi +
               llm__fp16_to_fp32(w[i].m) * llm__fp16_to_fp32(a[i].s);
    }
    *s = sum;
}

static void llm__vec_dot_q5_1_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_1 *w = vw;
    const struct llm__block_q8_1 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        uint8_t q[32];
        llm__b32_quants(w[i].qs, w[i].qh, q);
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += q[j] * a[i].qs[j];
        sum += (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d)) * (float)sumi +
               llm__fp16_to_fp32(w[i].m) * llm__fp16_to_fp32(a[i].s);
    }
    *s = sum;
}

static void llm__vec_dot_q5_0_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        uint8_t q[32];
        llm__b32_quants(w[i].qs, w[i].qh, q);
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += (q[j] - 16) * a[i].qs[j];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

static void llm__vec_dot_iq4_nl_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_nl *w = vw;
    const struct llm__block_q8_0 *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += llm__iq4nl_values[w[i].qs[j] & 15] * a[i].qs[j] + llm__iq4nl_values[w[i].qs[j] >> 4] * a[i].qs[j + 16];
        sum += (float)sumi * (llm__fp16_to_fp32(w[i].d) * llm__fp16_to_fp32(a[i].d));
    }
    *s = sum;
}

// Q4_K and Q5_K: per super-block, sum_s sc[s] * dot(q, a) over the sub-blocks is one integer; the
// mins contribute dmin * sum_s m[s] * (sum of the activations of s), taken from bsums.
static inline float llm__vec_dot_k45_scalar(uint16_t d, uint16_t dmin, const uint8_t *scales,
                                            const uint8_t *qh, const uint8_t *qs, const struct llm__block_q8_K *a) {
    uint8_t sm[16], q[LLM__QK_K];
    llm__unpack_k4_scales(scales, sm);
    llm__k45_quants(qs, qh, q);
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 8; s++) {
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) dot += q[32 * s + l] * a->qs[32 * s + l];
        sumi += sm[s] * dot;
        summ += sm[8 + s] * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
    }
    return llm__fp16_to_fp32(d) * a->d * (float)sumi - llm__fp16_to_fp32(dmin) * a->d * (float)summ;
}

static void llm__vec_dot_q4_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, NULL, w[i].qs, &a[i]);
    *s = sum;
}

static void llm__vec_dot_q5_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q5_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) sum += llm__vec_dot_k45_scalar(w[i].d, w[i].dmin, w[i].scales, w[i].qh, w[i].qs, &a[i]);
    *s = sum;
}

static void llm__vec_dot_q6_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t q[LLM__QK_K];
        llm__q6_K_quants(&w[i], q);
        int32_t sumi = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += w[i].scales[g] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q3_K: per super-block sum_s (sc[s] - 32) * dot(q - 4, a) is one integer (|.| < 2^23).
static void llm__vec_dot_q3_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q3_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t sc[16], q[LLM__QK_K];
        llm__q3_K_scales(w[i].scales, sc);
        llm__q3_K_quants(&w[i], q);
        int32_t sumi = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += sc[g] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q2_K: as Q4_K with sub-blocks of 16; the mins take bsums[s] directly.
static void llm__vec_dot_q2_K_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q2_K *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        uint8_t q[LLM__QK_K];
        llm__k23_low_quants(w[i].qs, q);
        int32_t sumi = 0, summ = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += q[16 * g + l] * a[i].qs[16 * g + l];
            sumi += (w[i].scales[g] & 15) * dot;
            summ += (w[i].scales[g] >> 4) * a[i].bsums[g];
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi - llm__fp16_to_fp32(w[i].dmin) * a[i].d * (float)summ;
    }
    *s = sum;
}

// IQ4_XS: per super-block sum_b (ls[b] - 32) * dot(value[q], a) is one integer (|.| < 2^28).
static void llm__vec_dot_iq4_xs_scalar(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        int32_t sumi = 0;
        for (int b = 0; b < 8; b++) {
            const uint8_t *qs = w[i].qs + 16 * b;
            const int8_t *q8 = a[i].qs + 32 * b;
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += llm__iq4nl_values[qs[l] & 15] * q8[l] + llm__iq4nl_values[qs[l] >> 4] * q8[16 + l];
            sumi += ls[b] * dot;
        }
        sum += llm__fp16_to_fp32(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// --- dot products: AVX2 (+FMA, F16C) ---
//
// Integer products use vpmaddubsw (unsigned 8-bit x signed 8-bit -> pairs summed to 16 bits), so
// weights are brought to unsigned form first; vpmaddwd then sums pairs to 32 bits, optionally
// times a 16-bit scale. Each block's integer sums are converted to float and added into float
// accumulators with the block's scale; horizontal sums happen once per row.

#if defined(LLM__X86_SIMD)
LLM__AVX2 static inline float llm__hsum_avx2(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

LLM__AVX2 static inline float llm__hmax_avx2(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

LLM__AVX2 static inline int32_t llm__hsum_epi32_avx2(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    return _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32(x, 1)));
}

LLM__AVX2 static void llm__vec_dot_f32_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(a + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(a + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

LLM__AVX2 static void llm__vec_dot_f16_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 16))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 16))), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 24))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 24))), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))),
                               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += _cvtsh_ss(w[i]) * _cvtsh_ss(a[i]);
    *s = sum;
}

// bf16 -> fp32 is a 16-bit left shift of the bits.
LLM__AVX2 static inline __m256 llm__load_bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

LLM__AVX2 static void llm__vec_dot_bf16_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(llm__load_bf16x8(w + i), llm__load_bf16x8(a + i), acc0);
        acc1 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 8), llm__load_bf16x8(a + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 16), llm__load_bf16x8(a + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(llm__load_bf16x8(w + i + 24), llm__load_bf16x8(a + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(llm__load_bf16x8(w + i), llm__load_bf16x8(a + i), acc0);
    float sum = llm__hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]);
    *s = sum;
}

// dot of 32 signed weights with 32 signed activations as 8 int32 partial sums: |w| times a with
// w's sign (vpsignb), so vpmaddubsw sees an unsigned first operand. Needs a != -128.
LLM__AVX2 static inline __m256i llm__dot_i8_avx2(__m256i w, __m256i a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

LLM__AVX2 static void llm__vec_dot_q8_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        const __m256i p1 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i + 1].qs), _mm256_loadu_si256((const __m256i *)a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)w[i].qs), _mm256_loadu_si256((const __m256i *)a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
    }
    *s = llm__hsum_avx2(_mm256_add_ps(acc0, acc1));
}

// One Q4_0 block times one Q8_0 block as 8 int32 partial sums: the 32 nibbles are spread to bytes
// in element order (16 low nibbles, then 16 high), and dot(q - 8, a) = dot(q, a) - dot(8, a).
LLM__AVX2 static inline __m256i llm__dot_q4_0_avx2(const uint8_t *qs, const int8_t *q8) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(nib, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

LLM__AVX2 static void llm__vec_dot_q4_0_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs), p1 = llm__dot_q4_0_avx2(w[i + 1].qs, a[i + 1].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(_cvtsh_ss(w[i + 1].d) * _cvtsh_ss(a[i + 1].d)), acc1);
    }
    if (i < nb) {
        const __m256i p0 = llm__dot_q4_0_avx2(w[i].qs, a[i].qs);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc0);
    }
    *s = llm__hsum_avx2(_mm256_add_ps(acc0, acc1));
}

// The block-32 types with a fifth bit or a min (Q4_1, Q5_0, Q5_1) or a grid (IQ4_NL), block by
// block. The 32 quants are spread to bytes in element order (low nibbles, then high ones); bit j
// of qh adds 16 to byte j.

// 0xff in byte j where bit j of the 32 bits at qh is set.
LLM__AVX2 static inline __m256i llm__qh_bytes_avx2(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                                                      0x0101010101010101LL, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

LLM__AVX2 static inline __m256i llm__nibbles_avx2(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

// One weight block of `type` times 32 activations as 8 int32 partial sums (without the min).
// Always inlined so `type` is a constant.
LLM__AVX2 static inline __attribute__((always_inline)) __m256i llm__dot_b32_avx2(int type, const void *blk, const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), ones = _mm256_set1_epi16(1);
    if (type == LLM__TYPE_Q4_1)
        return _mm256_madd_epi16(_mm256_maddubs_epi16(llm__nibbles_avx2(((const struct llm__block_q4_1 *)blk)->qs), a), ones);
    if (type == LLM__TYPE_IQ4_NL) {
        const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values));
        const __m256i v = _mm256_shuffle_epi8(grid, llm__nibbles_avx2(((const struct llm__block_iq4_nl *)blk)->qs));
        return llm__dot_i8_avx2(v, a);
    }
    const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qs : ((const struct llm__block_q5_1 *)blk)->qs;
    const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qh : ((const struct llm__block_q5_1 *)blk)->qh;
    const __m256i q = _mm256_or_si256(llm__nibbles_avx2(qs), _mm256_and_si256(llm__qh_bytes_avx2(qh), _mm256_set1_epi8(16)));
    __m256i p = _mm256_maddubs_epi16(q, a);
    if (type == LLM__TYPE_Q5_0) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(16), a));   // q - 16
    return _mm256_madd_epi16(p, ones);
}

// The block-32 dot products (Q4_1, Q5_0, Q5_1, IQ4_NL) at one SIMD level: ATTR its target
// attribute, SFX its suffix (llm__dot_b32_SFX does one block). Per block, llm__b32_step_SFX adds
// block i of the row into acc (and the min term into *summ: Q4_1, Q5_1); llm__vec_dot_b32_SFX is
// the common loop, two blocks per step into two accumulators: Q8_1 activations for the types
// with a min (Q4_1, Q5_1), Q8_0 for the others.
#define LLM__B32_DOTS(ATTR, SFX) \
ATTR static inline __attribute__((always_inline)) __m256 llm__b32_step_##SFX(int type, const void *vw, const void *va, int64_t i,      \
                                                                          __m256 acc, float *summ) {                                   \
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;                                                                 \
    const size_t wb = llm__type_table[type].block_bytes, ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);   \
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);                             \
    const uint8_t *w = (const uint8_t *)vw + (size_t)i * wb, *a = (const uint8_t *)va + (size_t)i * ab;                                \
    uint16_t wd, ad;                                                                                                                   \
    memcpy(&wd, w, 2), memcpy(&ad, a, 2);   /* d leads every block */                                                                  \
    const __m256i p = llm__dot_b32_##SFX(type, w, (const int8_t *)(a + qoff));                                                         \
    if (q81) {   /* m (after d) times s (after d) */                                                                                   \
        uint16_t wm, as;                                                                                                               \
        memcpy(&wm, w + 2, 2), memcpy(&as, a + 2, 2);                                                                                  \
        *summ += _cvtsh_ss(wm) * _cvtsh_ss(as);                                                                                        \
    }                                                                                                                                  \
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(wd) * _cvtsh_ss(ad)), acc);                                 \
}                                                                                                                                      \
ATTR static inline __attribute__((always_inline)) float llm__vec_dot_b32_##SFX(int type, int64_t n, const void *vw, const void *va) {  \
    const int64_t nb = n / LLM__QK;                                                                                                    \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                                                     \
    float summ0 = 0.0f, summ1 = 0.0f;                                                                                                  \
    int64_t i = 0;                                                                                                                     \
    for (; i + 2 <= nb; i += 2) {                                                                                                      \
        acc0 = llm__b32_step_##SFX(type, vw, va, i, acc0, &summ0);                                                                     \
        acc1 = llm__b32_step_##SFX(type, vw, va, i + 1, acc1, &summ1);                                                                 \
    }                                                                                                                                  \
    if (i < nb) acc0 = llm__b32_step_##SFX(type, vw, va, i, acc0, &summ0);                                                             \
    return llm__hsum_avx2(_mm256_add_ps(acc0, acc1)) + (summ0 + summ1);                                                                \
}                                                                                                                                      \
ATTR static void llm__vec_dot_q4_1_##SFX(int64_t n, float *s, const void *vw, const void *va) {                                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q4_1, n, vw, va);                                                                            \
}                                                                                                                                      \
ATTR static void llm__vec_dot_q5_0_##SFX(int64_t n, float *s, const void *vw, const void *va) {                                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q5_0, n, vw, va);                                                                            \
}                                                                                                                                      \
ATTR static void llm__vec_dot_q5_1_##SFX(int64_t n, float *s, const void *vw, const void *va) {                                        \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_Q5_1, n, vw, va);                                                                            \
}                                                                                                                                      \
ATTR static void llm__vec_dot_iq4_nl_##SFX(int64_t n, float *s, const void *vw, const void *va) {                                      \
    *s = llm__vec_dot_b32_##SFX(LLM__TYPE_IQ4_NL, n, vw, va);                                                                          \
}
LLM__B32_DOTS(LLM__AVX2, avx2)

// G4 / G8 x Q8_0 (AVX2 and AVX-512 VNNI, the sub-block dot given as DOT): per sub-block of 32,
// the integer sum((q - z) * a) as 8 int32 partial sums, into two float accumulators by turns.
#define LLM__GQ_DOTS(ATTR, SFX, DOT)                                                                                    \
ATTR static inline __attribute__((always_inline)) float llm__vec_dot_gq_##SFX(int type, int64_t n, const void *vw, const void *va) { \
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), nsub = g / 32;                                       \
    const size_t bb = llm__type_table[type].block_bytes;                                                                \
    const struct llm__block_q8_0 *a = va;                                                                               \
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                                         \
    for (int64_t i = 0; i < n / g; i++, a += nsub) {                                                                    \
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);                          \
        const float d = _cvtsh_ss(b->d);                                                                                \
        for (int c = 0; c < nsub; c++) {                                                                                \
            const __m256i p = DOT(bits, b->qs + (bits == 8 ? 32 : 16) * c, b->z, a[c].qs);                               \
            acc[c & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * _cvtsh_ss(a[c].d)), acc[c & 1]);      \
        }                                                                                                               \
    }                                                                                                                   \
    return llm__hsum_avx2(_mm256_add_ps(acc[0], acc[1]));                                                               \
}                                                                                                                       \
LLM__GQ_KERNELS(SFX, ATTR, llm__vec_dot_gq_##SFX)

// sum((q - z) * a) of one sub-block: G4 as Q4_0 with z for 8; G8 as Q8_0, less z * sum(a).
LLM__AVX2 static inline __attribute__((always_inline)) __m256i llm__gq_sub_avx2(int bits, const uint8_t *qs, int z, const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), ones = _mm256_set1_epi16(1);
    if (bits == 4) {
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(llm__nibbles_avx2(qs), a),
                                           _mm256_maddubs_epi16(_mm256_set1_epi8((char)z), a));
        return _mm256_madd_epi16(p, ones);
    }
    const __m256i sa = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), ones);
    return _mm256_sub_epi32(llm__dot_i8_avx2(_mm256_loadu_si256((const __m256i *)qs), a), _mm256_mullo_epi32(sa, _mm256_set1_epi32(z)));
}
LLM__GQ_DOTS(LLM__AVX2, avx2, llm__gq_sub_avx2)

// llm__unpack_k4_scales in registers: the 12 scale bytes (read as 16; the 4 after them are still
// inside the block) become [sc0..sc7, m0..m7]. Dword lanes: w0 & 3f | w2 & 0f, (w0 >> 2) & 30 |
// w1 & 3f | (w2 >> 4) & 0f, (w1 >> 2) & 30.
LLM__AVX2 static inline __m128i llm__k4_scales_sse(const uint8_t *scales) {
    const __m128i v = _mm_loadu_si128((const __m128i *)scales);
    __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_set_epi32(4, 0, 0, 0));
    lo = _mm_and_si128(lo, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                     _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(lo, hi);
}

// The mins term of a Q4_K/Q5_K super-block as 8 int32 partial sums of m[s] * bsums[2s + {0,1}].
LLM__AVX2 static inline __m256i llm__k4_mins_dot(__m128i sm, const int16_t *bsums) {
    const __m128i dup = _mm_shuffle_epi8(sm, _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(dup), _mm256_loadu_si256((const __m256i *)bsums));
}

// vpshufb control giving every 16-bit lane the 16-bit element e of a 128-bit lane.
LLM__AVX2 static inline __m256i llm__spread1(int e) { return _mm256_set1_epi16((short)(2 * e | (2 * e + 1) << 8)); }

// Q4_K (five = false) and Q5_K: 4-bit (5-bit) unsigned quants times activations, per sub-block,
// times the sub-block's 6-bit scale, all in int32; the mins go to a separate accumulator.
// Always inlined so `five` is a constant in each kernel.
LLM__AVX2 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx2(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const __m256i m4 = _mm256_set1_epi8(15), b16 = _mm256_set1_epi8(16);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *qs = five ? w5[i].qs : w4[i].qs;
        const __m128i sm = llm__k4_scales_sse(five ? w5[i].scales : w4[i].scales);
        const float dd = _cvtsh_ss(d) * a[i].d, dm = _cvtsh_ss(dmin) * a[i].d;
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(llm__k4_mins_dot(sm, a[i].bsums)), _mm256_set1_ps(-dm), accm);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m256i hb = five ? _mm256_loadu_si256((const __m256i *)w5[i].qh) : _mm256_setzero_si256();
        __m256i sumi = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {   // bit 2c (2c+1) of each qh byte is bit 4 of the low (high) nibble quant
                const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c))), bh = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bl), bl), b16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bh), bh), b16));
            }
            const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c)));
            const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[i].qs + 64 * c + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, llm__spread1(2 * c))));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, llm__spread1(2 * c + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dd), acc);
    }
    return llm__hsum_avx2(_mm256_add_ps(acc, accm));
}

LLM__AVX2 static void llm__vec_dot_q4_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, false);
}

LLM__AVX2 static void llm__vec_dot_q5_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx2(n, vw, va, true);
}

// Q6_K: quants used unsigned (0..63); the -32 offset is applied once per super-block as
// 32 * sum_s scale[s] * bsums[s]. Each 128-bit lane of a 32-quant vector is one sub-block of 16,
// so the scales are spread with vpshufb: lane L of quarter k gets scale 2k + L of the half.
LLM__AVX2 static void llm__vec_dot_q6_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h));
            // 16-bit shifts leak bits across bytes only outside the 0x30 mask
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
            };
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * h + 32 * k)));
                const short lo = (short)(4 * k | (4 * k + 1) << 8), hi = (short)((4 * k + 2) | (4 * k + 3) << 8);
                const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, ctrl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(w[i].d) * a[i].d), acc);
    }
    *s = llm__hsum_avx2(acc);
}

// Q3_K (three = true) and Q2_K: the 2-bit fields of qs (plus Q3_K's hmask bit as bit 2) used
// unsigned; each 128-bit lane of a 32-quant vector is one sub-block of 16, its 16-bit scale spread
// with vpshufb as in the Q6_K kernel. Q3_K's -4 offset is 4 * sum_s sc[s] * bsums[s]; Q2_K's mins
// are sum_s m[s] * bsums[s], in a separate float accumulator.
LLM__AVX2 static inline __attribute__((always_inline)) float llm__vec_dot_k23_avx2(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m256i sc16, sumi = _mm256_setzero_si256(), hm = _mm256_setzero_si256();
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        float dd;
        if (three) {
            uint8_t raw[16];
            llm__q3_K_scales_raw(w3[i].scales, raw);
            sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)raw)), _mm256_set1_epi16(32));
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 2));
            hm = _mm256_loadu_si256((const __m256i *)w3[i].hmask);
            dd = _cvtsh_ss(w3[i].d) * a[i].d;
        } else {
            const __m128i sb = _mm_loadu_si128((const __m128i *)w2[i].scales);
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
            const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
            accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(m16, bsums)), _mm256_set1_ps(-_cvtsh_ss(w2[i].dmin) * a[i].d), accm);
            dd = _cvtsh_ss(w2[i].d) * a[i].d;
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                if (three) {   // bit 4h + j of hmask[l] to bit 2 (16-bit shifts: the mask keeps each byte's own bit)
                    const int b = 4 * h + j;
                    q = _mm256_or_si256(q, _mm256_and_si256(b >= 2 ? _mm256_srli_epi16(hm, b - 2) : _mm256_slli_epi16(hm, 2 - b), b4));
                }
                const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a[i].qs + 128 * h + 32 * j)));
                const short lo = (short)(4 * j | (4 * j + 1) << 8), hi = (short)((4 * j + 2) | (4 * j + 3) << 8);
                const __m256i ctrl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, ctrl)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(dd), acc);
    }
    return llm__hsum_avx2(_mm256_add_ps(acc, accm));
}

LLM__AVX2 static void llm__vec_dot_q3_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx2(n, vw, va, true);
}

LLM__AVX2 static void llm__vec_dot_q2_K_avx2(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx2(n, vw, va, false);
}

// IQ4_XS: a sub-block of 32 per vector (low nibbles of its 16 bytes, then the high ones), levels
// looked up with vpshufb, signed x signed as in llm__dot_i8_avx2 (levels and activations lie in
// [-127, 127], so vpmaddubsw's pair sums cannot saturate), times the sub-block's scale in vpmaddwd.
LLM__AVX2 static void llm__vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        __m256i sumi = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int b = 0; b < 8; b++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(w[i].qs + 16 * b));
            const __m256i v = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * b));
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(av, v));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16(ls[b])));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(w[i].d) * a[i].d), acc);
    }
    *s = llm__hsum_avx2(acc);
}

// --- dot products: AVX-512 (F, BW, VL, DQ, VNNI) ---
//
// 512-bit registers hold two 32-quant blocks (Q8_0), four 16-byte nibble blocks (Q4_0) or half a
// k-quant super-block. Signed x signed int8 dots use vpdpbusd on (w + 128) and subtract 128 * sum(a)
// (exact for every int8); nibbles are unsigned already.

LLM__AVX512 static inline __m512i llm__load_2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

// 16-bit lane selectors for vpermw / vpermt2w: lanes 4k..4k+3 select 16-bit word k*stride (k < 4).
// A 64-byte load at block i of a Q4_0 row holds the fp16 scales of blocks i..i+3 at words 0, 9,
// 18, 27; two loads at block i of a Q8_0 row hold them at words 0, 17, 34, 51.
LLM__AVX512 static inline __m512i llm__word_sel4(int stride) {
    const int s1 = stride * 0x10001, s2 = 2 * stride * 0x10001, s3 = 3 * stride * 0x10001;
    return _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, s3, s3, s2, s2, s1, s1, 0, 0);
}

LLM__AVX512 static void llm__vec_dot_f32_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(a + i + 16), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(a + i + 32), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(a + i + 48), acc3);
    }
    for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(a + i), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, a + i), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

LLM__AVX512 static void llm__vec_dot_f16_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), acc1);
        acc2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 32))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 32))), acc2);
        acc3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i + 48))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 48))), acc3);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                               _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

LLM__AVX512 static inline __m512 llm__bf16x16_to_ps(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

LLM__AVX512 static void llm__vec_dot_bf16_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        acc0 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
        acc1 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 16))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))), acc1);
        acc2 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 32))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 32))), acc2);
        acc3 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i + 48))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i + 48))), acc3);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(w + i))),
                               llm__bf16x16_to_ps(_mm256_loadu_si256((const __m256i *)(a + i))), acc0);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc1 = _mm512_fmadd_ps(llm__bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, w + i)),
                               llm__bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, a + i)), acc1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// Q8_0 x Q8_0, 4 blocks per step: two registers of two blocks each; 8 int32 lanes per block.
LLM__AVX512 static void llm__vec_dot_q8_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    const int64_t nb = n / LLM__QK;
    const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i blk01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i blk23 = _mm512_add_epi32(blk01, _mm512_set1_epi32(2));
    // 16-bit words 0, 17, 34, 51 of 128 bytes from block i: the fp16 scales of blocks i..i+3
    const __m512i sel = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 51 << 16 | 34, 17 << 16 | 0);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m512i w01 = llm__load_2x256(w[i].qs, w[i + 1].qs), w23 = llm__load_2x256(w[i + 2].qs, w[i + 3].qs);
        const __m512i a01 = llm__load_2x256(a[i].qs, a[i + 1].qs), a23 = llm__load_2x256(a[i + 2].qs, a[i + 3].qs);
        const __m512i p01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, _mm512_xor_si512(w01, flip), a01),
                                             _mm512_dpbusd_epi32(zero, flip, a01));
        const __m512i p23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, _mm512_xor_si512(w23, flip), a23),
                                             _mm512_dpbusd_epi32(zero, flip, a23));
        // d_w * d_a of the 4 blocks, spread to each block's 8 lanes
        const __m512i wd = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&w[i]), sel,
                                                     _mm512_loadu_si512((const void *)((const char *)&w[i] + 64)));
        const __m512i ad = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&a[i]), sel,
                                                     _mm512_loadu_si512((const void *)((const char *)&a[i] + 64)));
        const __m512 d4 = _mm512_castps128_ps512(_mm_mul_ps(_mm_cvtph_ps(_mm512_castsi512_si128(wd)),
                                                            _mm_cvtph_ps(_mm512_castsi512_si128(ad))));
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p01), _mm512_permutexvar_ps(blk01, d4), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p23), _mm512_permutexvar_ps(blk23, d4), acc1);
    }
    __m256 acc256 = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m256i wq = _mm256_loadu_si256((const __m256i *)w[i].qs), aq = _mm256_loadu_si256((const __m256i *)a[i].qs);
        const __m256i f = _mm256_set1_epi8((char)0x80), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, _mm256_xor_si256(wq, f), aq), _mm256_dpbusd_epi32(z, f, aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + llm__hsum_avx2(acc256);
}

// Q4_0 x Q8_0, 4 blocks per step. One register holds the 4 blocks' nibble bytes; its low nibbles
// are elements 0-15 of each block, its high nibbles elements 16-31. The activations are regrouped
// to match (first and second halves of each block), so 128-bit lane k belongs to block k.
LLM__AVX512 static void llm__vec_dot_q4_0_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const int64_t nb = n / LLM__QK;
    const __m512i m4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
    const __m512i first = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0), second = _mm512_set_epi64(15, 14, 11, 10, 7, 6, 3, 2);
    const __m512i wsel = llm__word_sel4(9), asel = llm__word_sel4(17);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)w[i].qs));
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 1].qs), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 2].qs), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)w[i + 3].qs), 3);
        const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        const __m512i a01 = llm__load_2x256(a[i].qs, a[i + 1].qs), a23 = llm__load_2x256(a[i + 2].qs, a[i + 3].qs);
        const __m512i alo = _mm512_permutex2var_epi64(a01, first, a23), ahi = _mm512_permutex2var_epi64(a01, second, a23);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, alo), hi, ahi);
        const __m512i c = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, alo), eight, ahi);
        // scales of blocks i..i+3, each repeated for its 4 lanes, gathered from 64-byte lines
        const __m512i wd = _mm512_permutexvar_epi16(wsel, _mm512_loadu_si512((const void *)&w[i]));
        const __m512i ad = _mm512_permutex2var_epi16(_mm512_loadu_si512((const void *)&a[i]), asel,
                                                     _mm512_loadu_si512((const void *)((const char *)&a[i] + 64)));
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(wd)), _mm512_cvtph_ps(_mm512_castsi512_si256(ad)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p, c)), d, acc);
    }
    __m256 acc256 = _mm256_setzero_ps();
    for (; i < nb; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)w[i].qs);
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
        const __m256i aq = _mm256_loadu_si256((const __m256i *)a[i].qs), z = _mm256_setzero_si256();
        const __m256i p = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, nib, aq), _mm256_dpbusd_epi32(z, _mm256_set1_epi8(8), aq));
        acc256 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(_cvtsh_ss(w[i].d) * _cvtsh_ss(a[i].d)), acc256);
    }
    *s = _mm512_reduce_add_ps(acc) + llm__hsum_avx2(acc256);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL: the AVX2 loop with vpdpbusd on 256-bit registers. Quants are made
// unsigned (IQ4_NL: grid + 128), and the offset (16 for Q5_0, 128 for IQ4_NL) times the sum of
// the activations is subtracted; the fifth bits are a byte mask (vpmovm2b's k-register input).
LLM__AVX512 static inline __attribute__((always_inline)) __m256i llm__dot_b32_avx512(int type, const void *blk, const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), z = _mm256_setzero_si256();
    if (type == LLM__TYPE_Q4_1) return _mm256_dpbusd_epi32(z, llm__nibbles_avx2(((const struct llm__block_q4_1 *)blk)->qs), a);
    if (type == LLM__TYPE_IQ4_NL) {
        const __m256i grid = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                              _mm256_set1_epi8((char)0x80));
        const __m256i u = _mm256_shuffle_epi8(grid, llm__nibbles_avx2(((const struct llm__block_iq4_nl *)blk)->qs));
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u, a), _mm256_dpbusd_epi32(z, _mm256_set1_epi8((char)0x80), a));
    }
    const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qs : ((const struct llm__block_q5_1 *)blk)->qs;
    const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)blk)->qh : ((const struct llm__block_q5_1 *)blk)->qh;
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i nib = llm__nibbles_avx2(qs);
    const __m256i q = _mm256_mask_add_epi8(nib, (__mmask32)h, nib, _mm256_set1_epi8(16));
    const __m256i p = _mm256_dpbusd_epi32(z, q, a);
    return type == LLM__TYPE_Q5_0 ? _mm256_sub_epi32(p, _mm256_dpbusd_epi32(z, _mm256_set1_epi8(16), a)) : p;
}

LLM__B32_DOTS(LLM__AVX512, avx512)

// G8's quants less 128 become unsigned again for vpdpbusd: sum(q * a) - (z + 128) * sum(a).
LLM__AVX512 static inline __attribute__((always_inline)) __m256i llm__gq_sub_avx512(int bits, const uint8_t *qs, int z, const int8_t *q8) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)q8), zero = _mm256_setzero_si256();
    if (bits == 4)
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, llm__nibbles_avx2(qs), a),
                                _mm256_dpbusd_epi32(zero, _mm256_set1_epi8((char)z), a));
    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    const __m256i sa = _mm256_dpbusd_epi32(zero, _mm256_set1_epi8(1), a);
    return _mm256_sub_epi32(_mm256_dpbusd_epi32(zero, u, a), _mm256_mullo_epi32(sa, _mm256_set1_epi32(z + 128)));
}
LLM__GQ_DOTS(LLM__AVX512, avx512, llm__gq_sub_avx512)

// A vpshufb control that fills 128-bit lanes 0-1 with 16-bit element e0 and lanes 2-3 with e1 of
// a source whose 4 lanes are identical.
LLM__AVX512 static inline __m512i llm__spread2(int e0, int e1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(2 * e0 | (2 * e0 + 1) << 8))),
                              _mm256_set1_epi16((short)(2 * e1 | (2 * e1 + 1) << 8)), 1);
}

// A super-block's exact integer sums into a row's float sum, in the order of the tile kernels
// (llm__kt_tokens) that multiply prompts: acc + isum * d, then (mins) + imin * dm. A token's
// result then does not depend on how many tokens share its step (greedy text is the same batched
// or alone, with or without drafts); the integer sums are the same in both.
LLM__AVX512 static inline float llm__sb_acc(float acc, int32_t isum, float d, bool mins, int32_t imin, float dm) {
    acc = fmaf((float)isum, d, acc);
    return mins ? fmaf((float)imin, dm, acc) : acc;
}

// Q4_K / Q5_K, half a super-block (2 x 32 quant bytes = sub-blocks 4h..4h+3) per step. The low
// nibbles of the 64 bytes are sub-blocks 4h and 4h+2, the high nibbles 4h+1 and 4h+3; activations
// are loaded in that order. Sub-block scales multiply the 16-bit pair sums (vpmaddwd).
LLM__AVX512 static inline __attribute__((always_inline)) float llm__vec_dot_k45_avx512(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const __m512i m4 = _mm512_set1_epi8(15), b16 = _mm512_set1_epi8(16);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *qs = five ? w5[i].qs : w4[i].qs;
        const __m128i sm = llm__k4_scales_sse(five ? w5[i].scales : w4[i].scales);
        const float dd = _cvtsh_ss(d) * a[i].d, dm = _cvtsh_ss(dmin) * a[i].d;
        const int32_t imin = llm__hsum_epi32_avx2(llm__k4_mins_dot(sm, a[i].bsums));
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
        const __m512i hb = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w5[i].qh)) : _mm512_setzero_si512();
        __m512i sumi = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (five) {   // bit s of qh[l] is bit 4 of quant l of sub-block s
                const __m512i bl = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))), _mm256_set1_epi8((char)(1 << (4 * h + 2))), 1);
                const __m512i bh = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 1))), _mm256_set1_epi8((char)(1 << (4 * h + 3))), 1);
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hb, bl), lo, b16);
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hb, bh), hi, b16);
            }
            const int8_t *q8 = a[i].qs + 128 * h;
            const __m512i plo = _mm512_maddubs_epi16(lo, llm__load_2x256(q8, q8 + 64));
            const __m512i phi = _mm512_maddubs_epi16(hi, llm__load_2x256(q8 + 32, q8 + 96));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sc, llm__spread2(4 * h, 4 * h + 2))));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sc, llm__spread2(4 * h + 1, 4 * h + 3))));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), dd, true, imin, -dm);
    }
    return acc;
}

LLM__AVX512 static void llm__vec_dot_q4_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, false);
}

LLM__AVX512 static void llm__vec_dot_q5_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_avx512(n, vw, va, true);
}

// Q6_K, a half super-block (128 quants) per step in two registers: elements 0-63 (low nibbles of
// ql[0..64) with qh bits 0-1 / 2-3) and 64-127 (high nibbles, qh bits 4-5 / 6-7). Each 128-bit
// lane is one sub-block of 16; the -32 offset comes from bsums as in the AVX2 kernel.
LLM__AVX512 static void llm__vec_dot_q6_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    // per-16-bit-lane shift counts: first 256 bits, second 256 bits
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    // lane L takes 16-bit element L (first register) or 4 + L (second) of the half's 8 scales
    const __m512i spread_lo = _mm512_set_epi32(0x07060706, 0x07060706, 0x07060706, 0x07060706, 0x05040504, 0x05040504,
                                               0x05040504, 0x05040504, 0x03020302, 0x03020302, 0x03020302, 0x03020302,
                                               0x01000100, 0x01000100, 0x01000100, 0x01000100);
    const __m512i spread_hi = _mm512_add_epi8(spread_lo, _mm512_set1_epi8(8));
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a[i].bsums));
        __m512i sumi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5)), 0);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m512i ql = _mm512_loadu_si512((const void *)(w[i].ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[i].qh + 32 * h)));
            const __m512i qlo = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
            const __m512i qhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
            const __m512i plo = _mm512_maddubs_epi16(qlo, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h)));
            const __m512i phi = _mm512_maddubs_epi16(qhi, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(plo, _mm512_shuffle_epi8(sch, spread_lo)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(phi, _mm512_shuffle_epi8(sch, spread_hi)));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), _cvtsh_ss(w[i].d) * a[i].d, false, 0, 0.0f);
    }
    *s = acc;
}
// Q3_K / Q2_K, a half super-block (128 quants) per step in two registers: fields j = 0, 1 of the
// half's 32 qs bytes (elements 0-63) and j = 2, 3 (64-127), each 128-bit lane one sub-block of 16
// with its scale spread as in the Q6_K kernel; offsets and mins as in the AVX2 twin.
LLM__AVX512 static inline __attribute__((always_inline)) float llm__vec_dot_k23_avx512(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4);
    // per-16-bit-lane shift counts of field j: register 0 takes j = 0 | 1, register 1 j = 2 | 3
    const __m512i sh0 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    const __m512i sh1 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i spread_lo = _mm512_set_epi32(0x07060706, 0x07060706, 0x07060706, 0x07060706, 0x05040504, 0x05040504,
                                               0x05040504, 0x05040504, 0x03020302, 0x03020302, 0x03020302, 0x03020302,
                                               0x01000100, 0x01000100, 0x01000100, 0x01000100);
    const __m512i spread_hi = _mm512_add_epi8(spread_lo, _mm512_set1_epi8(8));
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        __m256i sc16;
        __m512i sumi = _mm512_setzero_si512(), hm = _mm512_setzero_si512();
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        float dd, dm = 0.0f;
        int32_t imin = 0;
        if (three) {
            uint8_t raw[16];
            llm__q3_K_scales_raw(w3[i].scales, raw);
            sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)raw)), _mm256_set1_epi16(32));
            const __m256i offs = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 2);
            sumi = _mm512_inserti64x4(sumi, _mm256_sub_epi32(_mm256_setzero_si256(), offs), 0);
            hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w3[i].hmask));
            dd = _cvtsh_ss(w3[i].d) * a[i].d;
        } else {
            const __m128i sb = _mm_loadu_si128((const __m128i *)w2[i].scales);
            sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
            const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
            imin = llm__hsum_epi32_avx2(_mm256_madd_epi16(m16, bsums));
            dm = _cvtsh_ss(w2[i].dmin) * a[i].d;
            dd = _cvtsh_ss(w2[i].d) * a[i].d;
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i sch = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m512i qv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * h)));
            __m512i q0 = _mm512_and_si512(_mm512_srlv_epi16(qv, sh0), m3), q1 = _mm512_and_si512(_mm512_srlv_epi16(qv, sh1), m3);
            if (three) {   // bit 4h + j of hmask[l] adds 4
                const __m512i t0 = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h))), _mm256_set1_epi8((char)(1 << (4 * h + 1))), 1);
                const __m512i t1 = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + 2))), _mm256_set1_epi8((char)(1 << (4 * h + 3))), 1);
                q0 = _mm512_mask_add_epi8(q0, _mm512_test_epi8_mask(hm, t0), q0, b4);
                q1 = _mm512_mask_add_epi8(q1, _mm512_test_epi8_mask(hm, t1), q1, b4);
            }
            const __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h)));
            const __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512((const void *)(a[i].qs + 128 * h + 64)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p0, _mm512_shuffle_epi8(sch, spread_lo)));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(p1, _mm512_shuffle_epi8(sch, spread_hi)));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), dd, !three, imin, -dm);
    }
    return acc;
}

LLM__AVX512 static void llm__vec_dot_q3_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx512(n, vw, va, true);
}

LLM__AVX512 static void llm__vec_dot_q2_K_avx512(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_avx512(n, vw, va, false);
}

// IQ4_XS, two sub-blocks per register: lanes [low nibbles of b, high of b, low of b+1, high of
// b+1]. The levels are looked up plus 128 (1..241, unsigned) for vpdpbusd; the 128 * sum(a)
// this adds is taken off once per super-block from bsums, times the scales.
LLM__AVX512 static void llm__vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const __m512i table = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)), _mm512_set1_epi8(-128));
    const __m512i m4 = _mm512_set1_epi8(15);
    // dword selectors of the pair's two scales: elements 0-7 take sub-block 2k, 8-15 take 2k + 1
    const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    // lane b of the scales: bits 4b.. of scales_l and 2b.. of scales_h (see llm__iq4_xs_scales)
    const __m256i shl = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), shh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        uint32_t sl;
        memcpy(&sl, w[i].scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), shl), _mm256_set1_epi32(15));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w[i].scales_h), shh), _mm256_set1_epi32(3));
        const __m256i ls8 = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        const __m512i ls32 = _mm512_zextsi256_si512(ls8);
        // -128 * ls[b] * (the sub-block's activation sum), lane b
        const __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[i].bsums), _mm256_set1_epi16(1));
        __m512i sumi = _mm512_zextsi256_si512(_mm256_mullo_epi32(_mm256_mullo_epi32(ls8, sums), _mm256_set1_epi32(-128)));
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(w[i].qs + 32 * k)));
            const __m512i v = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0));
            const __m512i idx = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xff00ff00u, v, 4), m4);   // lanes 1, 3: high nibbles
            const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(table, idx),
                                                   _mm512_loadu_si512((const void *)(a[i].qs + 64 * k)));
            const __m512i lsv = _mm512_permutexvar_epi32(_mm512_add_epi32(pair, _mm512_set1_epi32(2 * k)), ls32);
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dp, lsv));
        }
        acc = llm__sb_acc(acc, _mm512_reduce_add_epi32(sumi), _cvtsh_ss(w[i].d) * a[i].d, false, 0, 0.0f);
    }
    *s = acc;
}
#endif   // LLM__X86_SIMD

// --- dot products: NEON (aarch64) ---
//
// Signed 8-bit dots use sdot (vdotq_s32) where the compiler targets it (-march=armv8.2-a+dotprod
// or later), else widening multiplies with pairwise accumulation; both give exact int32 sums.

#if defined(LLM__NEON) && defined(__aarch64__)
static inline int32x4_t llm__dot_s8_neon(int32x4_t acc, int8x16_t x, int8x16_t y) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, x, y);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
#endif
}

// One fp16 value by the hardware conversion (the same result as llm__fp16_to_fp32).
static inline float llm__fp16_to_fp32_neon(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static void llm__vec_dot_f32_neon(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(w + i), vld1q_f32(a + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(w + i + 4), vld1q_f32(a + i + 4));
        acc2 = vfmaq_f32(acc2, vld1q_f32(w + i + 8), vld1q_f32(a + i + 8));
        acc3 = vfmaq_f32(acc3, vld1q_f32(w + i + 12), vld1q_f32(a + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += w[i] * a[i];
    *s = sum;
}

static void llm__vec_dot_f16_neon(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i))));
        acc1 = vfmaq_f32(acc1, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 4))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4))));
        acc2 = vfmaq_f32(acc2, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 8))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 8))));
        acc3 = vfmaq_f32(acc3, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(w + i + 12))),
                         vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 12))));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += llm__fp16_to_fp32_neon(w[i]) * llm__fp16_to_fp32_neon(a[i]);
    *s = sum;
}

static void llm__vec_dot_bf16_neon(int64_t n, float *s, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i), 16)));
        acc1 = vfmaq_f32(acc1, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 4), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 4), 16)));
        acc2 = vfmaq_f32(acc2, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 8), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 8), 16)));
        acc3 = vfmaq_f32(acc3, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(w + i + 12), 16)),
                         vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(a + i + 12), 16)));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += llm__bf16_to_fp32(w[i]) * llm__bf16_to_fp32(a[i]);
    *s = sum;
}

static void llm__vec_dot_q8_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q8_0 *w = vw, *a = va;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), vld1q_s8(w[i].qs), vld1q_s8(a[i].qs));
        p = llm__dot_s8_neon(p, vld1q_s8(w[i].qs + 16), vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), llm__fp16_to_fp32_neon(w[i].d) * llm__fp16_to_fp32_neon(a[i].d));
    }
    *s = vaddvq_f32(acc);
}

static void llm__vec_dot_q4_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q4_0 *w = vw;
    const struct llm__block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), lo, vld1q_s8(a[i].qs));
        p = llm__dot_s8_neon(p, hi, vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), llm__fp16_to_fp32_neon(w[i].d) * llm__fp16_to_fp32_neon(a[i].d));
    }
    *s = vaddvq_f32(acc);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL: quants as signed bytes (Q5_0 less 16, IQ4_NL through the grid
// with vqtbl1q), two 16-byte dots per block; the min term as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_b32_neon(int type, int64_t n, const void *vw, const void *va) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes, ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);
    const size_t qsoff = type == LLM__TYPE_Q4_1 ? 4 : type == LLM__TYPE_Q5_0 ? 6 : type == LLM__TYPE_Q5_1 ? 8 : 2;
    const size_t qhoff = type == LLM__TYPE_Q5_0 ? 2 : 4;
    const uint8x16_t m4 = vdupq_n_u8(15), b16 = vdupq_n_u8(16), bit = vld1q_u8(bits);
    const int8x16_t grid = vld1q_s8(llm__iq4nl_values);
    float32x4_t acc = vdupq_n_f32(0);
    float summ = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK; i++) {
        const uint8_t *w = (const uint8_t *)vw + (size_t)i * wb, *a = (const uint8_t *)va + (size_t)i * ab;
        const uint8x16_t q = vld1q_u8(w + qsoff);
        uint8x16_t lo = vandq_u8(q, m4), hi = vshrq_n_u8(q, 4);
        int8x16_t slo, shi;
        if (type == LLM__TYPE_IQ4_NL) {
            slo = vqtbl1q_s8(grid, lo), shi = vqtbl1q_s8(grid, hi);
        } else {
            if (type != LLM__TYPE_Q4_1) {   // bit j of qh: 16 more for quant j
                uint32_t h;
                memcpy(&h, w + qhoff, 4);
                const uint8x16_t h0 = vcombine_u8(vdup_n_u8((uint8_t)h), vdup_n_u8((uint8_t)(h >> 8)));
                const uint8x16_t h1 = vcombine_u8(vdup_n_u8((uint8_t)(h >> 16)), vdup_n_u8((uint8_t)(h >> 24)));
                lo = vorrq_u8(lo, vandq_u8(vtstq_u8(h0, bit), b16));
                hi = vorrq_u8(hi, vandq_u8(vtstq_u8(h1, bit), b16));
            }
            slo = vreinterpretq_s8_u8(lo), shi = vreinterpretq_s8_u8(hi);
            if (type == LLM__TYPE_Q5_0) slo = vsubq_s8(slo, vreinterpretq_s8_u8(b16)), shi = vsubq_s8(shi, vreinterpretq_s8_u8(b16));
        }
        const int8_t *q8 = (const int8_t *)(a + qoff);
        const int32x4_t p = llm__dot_s8_neon(llm__dot_s8_neon(vdupq_n_s32(0), slo, vld1q_s8(q8)), shi, vld1q_s8(q8 + 16));
        uint16_t wd, ad;
        memcpy(&wd, w, 2), memcpy(&ad, a, 2);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), llm__fp16_to_fp32_neon(wd) * llm__fp16_to_fp32_neon(ad));
        if (q81) {
            uint16_t wm, as;
            memcpy(&wm, w + 2, 2), memcpy(&as, a + 2, 2);
            summ += llm__fp16_to_fp32_neon(wm) * llm__fp16_to_fp32_neon(as);
        }
    }
    return vaddvq_f32(acc) + summ;
}

static void llm__vec_dot_q4_1_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q4_1, n, vw, va);
}
static void llm__vec_dot_q5_0_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q5_0, n, vw, va);
}
static void llm__vec_dot_q5_1_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_Q5_1, n, vw, va);
}
static void llm__vec_dot_iq4_nl_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_b32_neon(LLM__TYPE_IQ4_NL, n, vw, va);
}

// G4 / G8: per sub-block, G4's quants less z as signed bytes (-16..15); G8's dot less z * sum(a).
static inline __attribute__((always_inline)) float llm__vec_dot_gq_neon(int type, int64_t n, const void *vw, const void *va) {
    const int g = llm__gq_group(type), bits = llm__gq_bits(type), nsub = g / 32;
    const size_t bb = llm__type_table[type].block_bytes;
    const struct llm__block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / g; i++, a += nsub) {
        const struct llm__block_gq *b = (const void *)((const uint8_t *)vw + (size_t)i * bb);
        const float d = llm__fp16_to_fp32_neon(b->d);
        for (int c = 0; c < nsub; c++) {
            const int8x16_t a0 = vld1q_s8(a[c].qs), a1 = vld1q_s8(a[c].qs + 16);
            int32x4_t p;
            if (bits == 4) {
                const uint8x16_t q = vld1q_u8(b->qs + 16 * c);
                const int8x16_t z = vdupq_n_s8((int8_t)b->z);
                p = llm__dot_s8_neon(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), z), a0);
                p = llm__dot_s8_neon(p, vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), z), a1);
            } else {
                const int8x16_t one = vdupq_n_s8(1);
                p = llm__dot_s8_neon(vdupq_n_s32(0), vld1q_s8((const int8_t *)b->qs + 32 * c), a0);
                p = llm__dot_s8_neon(p, vld1q_s8((const int8_t *)b->qs + 32 * c + 16), a1);
                p = vmlsq_n_s32(p, llm__dot_s8_neon(llm__dot_s8_neon(vdupq_n_s32(0), one, a0), one, a1), b->z);
            }
            acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), d * llm__fp16_to_fp32_neon(a[c].d));
        }
    }
    return vaddvq_f32(acc);
}
LLM__GQ_KERNELS(neon, , llm__vec_dot_gq_neon)

// Q4_K / Q5_K: per sub-block an int32 dot, times its scale; mins from bsums as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_k45_neon(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool five) {
    const struct llm__block_q4_K *w4 = vw;
    const struct llm__block_q5_K *w5 = vw;   // the same fields as Q4_K, plus qh
    const uint8x16_t m4 = vdupq_n_u8(15), b16 = vdupq_n_u8(16);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        const uint16_t d = five ? w5[i].d : w4[i].d, dmin = five ? w5[i].dmin : w4[i].dmin;
        const uint8_t *scales = five ? w5[i].scales : w4[i].scales, *qs = five ? w5[i].qs : w4[i].qs;
        const uint8_t *qh = five ? w5[i].qh : NULL;
        uint8_t sm[16];
        llm__unpack_k4_scales(scales, sm);
        const uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : vdupq_n_u8(0);
        int32_t sumi = 0, summ = 0;
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * c), q1 = vld1q_u8(qs + 32 * c + 16);
            uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4), hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
            if (qh) {
                const uint8x16_t bl = vdupq_n_u8((uint8_t)(1 << (2 * c))), bh = vdupq_n_u8((uint8_t)(1 << (2 * c + 1)));
                lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(h0, bl), b16));
                lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(h1, bl), b16));
                hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(h0, bh), b16));
                hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(h1, bh), b16));
            }
            const int8_t *q8 = a[i].qs + 64 * c;
            int32x4_t plo = llm__dot_s8_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(lo0), vld1q_s8(q8));
            plo = llm__dot_s8_neon(plo, vreinterpretq_s8_u8(lo1), vld1q_s8(q8 + 16));
            int32x4_t phi = llm__dot_s8_neon(vdupq_n_s32(0), vreinterpretq_s8_u8(hi0), vld1q_s8(q8 + 32));
            phi = llm__dot_s8_neon(phi, vreinterpretq_s8_u8(hi1), vld1q_s8(q8 + 48));
            sumi += sm[2 * c] * vaddvq_s32(plo) + sm[2 * c + 1] * vaddvq_s32(phi);
        }
        for (int j = 0; j < 8; j++) summ += sm[8 + j] * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
        sum += llm__fp16_to_fp32_neon(d) * a[i].d * (float)sumi - llm__fp16_to_fp32_neon(dmin) * a[i].d * (float)summ;
    }
    return sum;
}

static void llm__vec_dot_q4_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_neon(n, vw, va, false);
}

static void llm__vec_dot_q5_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k45_neon(n, vw, va, true);
}

static void llm__vec_dot_q6_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_q6_K *w = vw;
    const struct llm__block_q8_K *a = va;
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int32_t sumi = 0;
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *q8 = a[i].qs + 128 * h, *sc = w[i].scales + 8 * h;
            #pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {   // l in [16k, 16k + 16): sub-blocks k, k+2, k+4, k+6
                const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k), hb = vld1q_u8(qh + 16 * k);
                const uint8x16_t u[4] = {
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[j]), off);
                    sumi += sc[k + 2 * j] * vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * j + 16 * k)));
                }
            }
        }
        sum += llm__fp16_to_fp32_neon(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}

// Q3_K (three = true) and Q2_K: per sub-block of 16 an int32 dot, times its scale; Q3_K's quants
// are made signed (q - 4) in registers, Q2_K's mins come from bsums as in the scalar twin.
static inline __attribute__((always_inline)) float llm__vec_dot_k23_neon(int64_t n, const void *vw, const struct llm__block_q8_K *a, bool three) {
    const struct llm__block_q3_K *w3 = vw;
    const struct llm__block_q2_K *w2 = vw;
    const uint8x16_t m3 = vdupq_n_u8(3), b4 = vdupq_n_u8(4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t sc[16];
        const uint8_t *qs = three ? w3[i].qs : w2[i].qs;
        int32_t summ = 0;
        if (three) {
            llm__q3_K_scales(w3[i].scales, sc);
        } else {
            for (int g = 0; g < 16; g++) sc[g] = (int8_t)(w2[i].scales[g] & 15), summ += (w2[i].scales[g] >> 4) * a[i].bsums[g];
        }
        const uint8x16_t hm0 = three ? vld1q_u8(w3[i].hmask) : vdupq_n_u8(0), hm1 = three ? vld1q_u8(w3[i].hmask + 16) : vdupq_n_u8(0);
        int32_t sumi = 0;
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * h), q1 = vld1q_u8(qs + 32 * h + 16);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * j));
                uint8x16_t u0 = vandq_u8(vshlq_u8(q0, sh), m3), u1 = vandq_u8(vshlq_u8(q1, sh), m3);
                int8x16_t v0, v1;
                if (three) {   // q - 4 + 4 * hbit
                    const uint8x16_t bit = vdupq_n_u8((uint8_t)(1 << (4 * h + j)));
                    u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(hm0, bit), b4));
                    u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(hm1, bit), b4));
                    v0 = vsubq_s8(vreinterpretq_s8_u8(u0), vreinterpretq_s8_u8(b4));
                    v1 = vsubq_s8(vreinterpretq_s8_u8(u1), vreinterpretq_s8_u8(b4));
                } else {
                    v0 = vreinterpretq_s8_u8(u0), v1 = vreinterpretq_s8_u8(u1);
                }
                const int8_t *q8 = a[i].qs + 128 * h + 32 * j;
                const int32_t d0 = vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), v0, vld1q_s8(q8)));
                const int32_t d1 = vaddvq_s32(llm__dot_s8_neon(vdupq_n_s32(0), v1, vld1q_s8(q8 + 16)));
                sumi += sc[8 * h + 2 * j] * d0 + sc[8 * h + 2 * j + 1] * d1;
            }
        }
        if (three) sum += llm__fp16_to_fp32_neon(w3[i].d) * a[i].d * (float)sumi;
        else sum += llm__fp16_to_fp32_neon(w2[i].d) * a[i].d * (float)sumi - llm__fp16_to_fp32_neon(w2[i].dmin) * a[i].d * (float)summ;
    }
    return sum;
}

static void llm__vec_dot_q3_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_neon(n, vw, va, true);
}

static void llm__vec_dot_q2_K_neon(int64_t n, float *s, const void *vw, const void *va) {
    *s = llm__vec_dot_k23_neon(n, vw, va, false);
}

// IQ4_XS: levels looked up with tbl, a signed dot per sub-block of 32, times its scale.
static void llm__vec_dot_iq4_xs_neon(int64_t n, float *s, const void *vw, const void *va) {
    const struct llm__block_iq4_xs *w = vw;
    const struct llm__block_q8_K *a = va;
    const int8x16_t table = vld1q_s8(llm__iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(15);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LLM__QK_K; i++) {
        int8_t ls[8];
        llm__iq4_xs_scales(&w[i], ls);
        int32_t sumi = 0;
        #pragma GCC unroll 8
        for (int b = 0; b < 8; b++) {
            const uint8x16_t q = vld1q_u8(w[i].qs + 16 * b);
            int32x4_t p = llm__dot_s8_neon(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(q, m4)), vld1q_s8(a[i].qs + 32 * b));
            p = llm__dot_s8_neon(p, vqtbl1q_s8(table, vshrq_n_u8(q, 4)), vld1q_s8(a[i].qs + 32 * b + 16));
            sumi += ls[b] * vaddvq_s32(p);
        }
        sum += llm__fp16_to_fp32_neon(w[i].d) * a[i].d * (float)sumi;
    }
    *s = sum;
}
#endif   // LLM__NEON && __aarch64__

// --- dispatch ---

// The kernel of exactly `level` for weight type `type`, or NULL if that level has none in this
// build (the caller then tries a lower level). LLM__SIMD_SCALAR has one for every supported type.
static llm__vec_dot_fn llm__vec_dot_kernel(int type, enum llm__simd level) {
    switch (level) {
    case LLM__SIMD_SCALAR:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_scalar;
        case LLM__TYPE_F16: return llm__vec_dot_f16_scalar;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_scalar;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_scalar;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_scalar;
        case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_scalar;
        case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_scalar;
        case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_scalar;
        case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_scalar;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_scalar;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_scalar;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_scalar;
        case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_scalar;
        case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_scalar;
        case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_scalar;
        LLM__GQ_CASES(scalar)
        default: return NULL;
        }
#if defined(LLM__X86_SIMD)
    case LLM__SIMD_AVX2:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_avx2;
        case LLM__TYPE_F16: return llm__vec_dot_f16_avx2;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx2;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx2;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx2;
        case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_avx2;
        case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_avx2;
        case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_avx2;
        case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_avx2;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx2;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx2;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx2;
        case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_avx2;
        case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_avx2;
        case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_avx2;
        LLM__GQ_CASES(avx2)
        default: return NULL;
        }
    case LLM__SIMD_AVX512:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_avx512;
        case LLM__TYPE_F16: return llm__vec_dot_f16_avx512;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_avx512;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_avx512;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_avx512;
        case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_avx512;
        case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_avx512;
        case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_avx512;
        case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_avx512;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_avx512;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_avx512;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_avx512;
        case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_avx512;
        case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_avx512;
        case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_avx512;
        LLM__GQ_CASES(avx512)
        default: return NULL;
        }
#endif
#if defined(LLM__NEON) && defined(__aarch64__)
    case LLM__SIMD_NEON:
        switch (type) {
        case LLM__TYPE_F32: return llm__vec_dot_f32_neon;
        case LLM__TYPE_F16: return llm__vec_dot_f16_neon;
        case LLM__TYPE_BF16: return llm__vec_dot_bf16_neon;
        case LLM__TYPE_Q8_0: return llm__vec_dot_q8_0_neon;
        case LLM__TYPE_Q4_0: return llm__vec_dot_q4_0_neon;
        case LLM__TYPE_Q4_1: return llm__vec_dot_q4_1_neon;
        case LLM__TYPE_Q5_0: return llm__vec_dot_q5_0_neon;
        case LLM__TYPE_Q5_1: return llm__vec_dot_q5_1_neon;
        case LLM__TYPE_IQ4_NL: return llm__vec_dot_iq4_nl_neon;
        case LLM__TYPE_Q4_K: return llm__vec_dot_q4_K_neon;
        case LLM__TYPE_Q5_K: return llm__vec_dot_q5_K_neon;
        case LLM__TYPE_Q6_K: return llm__vec_dot_q6_K_neon;
        case LLM__TYPE_Q3_K: return llm__vec_dot_q3_K_neon;
        case LLM__TYPE_Q2_K: return llm__vec_dot_q2_K_neon;
        case LLM__TYPE_IQ4_XS: return llm__vec_dot_iq4_xs_neon;
        LLM__GQ_CASES(neon)
        default: return NULL;
        }
#endif
    default:
        return NULL;
    }
}

// n elements of `type` (any supported type, or Q8_K / Q8_1) to floats; n a multiple of the block size.
static void llm__dequantize_row(int type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp16_to_fp32_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = llm__bf16_to_fp32(((const uint16_t *)src)[i]);
        return;
    case LLM__TYPE_Q8_0: llm__dequantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__dequantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_1: llm__dequantize_q4_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_0: llm__dequantize_q5_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_1: llm__dequantize_q5_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_IQ4_NL: llm__dequantize_iq4_nl(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q8_1: llm__dequantize_q8_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__dequantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__dequantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__dequantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q3_K: llm__dequantize_q3_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q2_K: llm__dequantize_q2_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_IQ4_XS: llm__dequantize_iq4_xs(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__dequantize_q8_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:
    case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: llm__dequantize_gq(type, src, dst, n); return;
    default: assert(!"llm__dequantize_row: unsupported type"); memset(dst, 0, (size_t)n * sizeof(float)); return;
    }
}

// n floats to `type` (any supported type, or Q8_K / Q8_1); n a multiple of the block size. Q8_0,
// Q8_1 and Q8_K (the activation types) are bit-identical to ggml's reference quantizers, as are
// Q4_0, Q4_1, Q5_0 and Q5_1 (IQ4_NL is not: ggml searches for its scale).
static void llm__quantize_row(int type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case LLM__TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LLM__TYPE_F16: llm__fp32_to_fp16_row(src, dst, n); return;
    case LLM__TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = llm__fp32_to_bf16(src[i]);
        return;
    case LLM__TYPE_Q8_0: llm__quantize_q8_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_0: llm__quantize_q4_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_1: llm__quantize_q4_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_0: llm__quantize_q5_0(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q5_1: llm__quantize_q5_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_IQ4_NL: llm__quantize_iq4_nl(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q8_1: llm__quantize_q8_1(src, dst, n / LLM__QK); return;
    case LLM__TYPE_Q4_K: llm__quantize_q4_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q5_K: llm__quantize_q5_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q6_K: llm__quantize_q6_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q3_K: llm__quantize_q3_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q2_K: llm__quantize_q2_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_IQ4_XS: llm__quantize_iq4_xs(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_Q8_K: llm__quantize_q8_K(src, dst, n / LLM__QK_K); return;
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128:
    case LLM__TYPE_G8_32: case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: llm__quantize_gq(type, src, dst, n); return;
    default: assert(!"llm__quantize_row: unsupported type"); return;
    }
}

// === model files: GGUF ===
// GGUF v2/v3 (little-endian), the file format of llama.cpp. Layout:
//
//   "GGUF"  u32 version  u64 n_tensors  u64 n_kv
//   n_kv x      { str key, u32 type, value }       value: scalar, str, or
//                                                  { u32 elem_type, u64 n, n elements }
//   n_tensors x { str name, u32 n_dims, i64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to general.alignment (u32, default 32)
//   data section: each tensor at data_offset + offset, offset a multiple of the alignment
//
// A string is { u64 len, len bytes } with no terminator. v1 (u32 counts and lengths) is gone
// from the wild and not read; v2 and v3 only differ in that v3 may be big-endian, which this
// reader refuses (its integers would all read byte-swapped).
//
// The reader maps the whole file (or reads it into memory: no_mmap) and keeps pointers into it
// (tensor data, string values, array elements): nothing is copied but the key and tensor names,
// which get a NUL.
// The file is treated as hostile: every count, length, offset and size is checked against the
// bytes that remain before it is used or anything proportional to it is allocated, so a
// corrupt or malicious file gets a message naming what is wrong and where, never a crash.
//
// Decisions where ggml is looser:
// - n_dims must be 1..4 and every dimension >= 1. ggml accepts n_dims 0 and empty (0-sized)
//   dimensions, but no model uses them, and refusing them here spares every consumer a
//   division by zero or a zero-row special case.
// - arrays of arrays are refused (ggml refuses them too; the spec allows them).
// - tensor names are at most 63 bytes (ggml's GGML_MAX_NAME 64 with its NUL); keys at most
//   65535 bytes (the spec's limit); neither may be empty or contain a NUL byte.
// - tensor offsets need not be in order or contiguous (ggml's reader wants them contiguous, the
//   spec does not); each must be aligned and lie with its data inside the file. Overlaps are
//   not checked: they cannot make a read leave the file.
// - a tensor type id that is no ggml type is an error; a ggml type this build cannot compute
//   with is not (the model loader decides, and can then name the tensor and the type).
//
// The reader assumes a little-endian host (x86, ARM): GGUF integers are read with memcpy. The
// writers: tests/gguf_writer.h (the tests and the model generator) and llm_quantize's (section 10).

enum llm__gguf_type {
    LLM__GGUF_U8 = 0, LLM__GGUF_I8 = 1, LLM__GGUF_U16 = 2, LLM__GGUF_I16 = 3,
    LLM__GGUF_U32 = 4, LLM__GGUF_I32 = 5, LLM__GGUF_F32 = 6, LLM__GGUF_BOOL = 7,
    LLM__GGUF_STR = 8, LLM__GGUF_ARR = 9, LLM__GGUF_U64 = 10, LLM__GGUF_I64 = 11,
    LLM__GGUF_F64 = 12, LLM__GGUF_TYPE_COUNT
};

#define LLM__GGUF_DEFAULT_ALIGNMENT 32
#define LLM__GGUF_MAX_KEY 65535   // bytes, the spec's limit
#define LLM__GGUF_MAX_NAME 63     // bytes, ggml's GGML_MAX_NAME (64) less the NUL
#define LLM__GGUF_MAX_DIMS 4

// A string inside the mapping: not NUL-terminated.
struct llm__gguf_str { const char *ptr; uint64_t len; };

struct llm__gguf_kv {
    char *key;                 // NUL-terminated copy (first member: see llm__gguf_index_find)
    uint32_t type;             // enum llm__gguf_type
    union {                    // scalars: unsigned in u64, signed in i64, f32/f64 in f64,
        uint64_t u64;          // bool in u64 (0 or 1), string in str
        int64_t i64;
        double f64;
        struct llm__gguf_str str;
    } v;
    uint32_t arr_type;         // arrays: element type (never LLM__GGUF_ARR)
    uint64_t arr_n;            //         element count
    const uint8_t *arr_data;   //         elements, packed, in the mapping (strings: serialized)
    struct llm__gguf_str *arr_str; //     string arrays: arr_n strings (allocated)
    const uint8_t *raw;        // the type id and value as serialized (for the writer's copy)
    size_t raw_len;
};

struct llm__gguf_tensor {
    char *name;                // NUL-terminated copy (first member: see llm__gguf_index_find)
    uint32_t type;             // ggml type id (llm__type_info(type) != NULL)
    int n_dims;                // 1..4
    int64_t ne[4];             // elements per dimension, ne[0] the row length; unused ones 1
    uint64_t offset;           // from the start of the data section
    size_t size;               // bytes
    const void *data;          // in the mapping
    const int32_t *perm;       // GPTQ act-order (directories only): column k holds input perm[k]; NULL: none
};

// Open-addressing hash from names to item indices (-1: empty slot), for duplicate checks
// and O(1) lookups. The hash is keyed with a seed of each index's own (its address and the
// clock), so that a hostile file cannot name its tensors to collide and make the probes quadratic.
struct llm__gguf_index { int64_t *slots; uint64_t mask, seed; };

struct llm__gguf {
    void *map;                 // the whole file
    size_t size;
    bool owns_map;             // munmap on close (false for a file in memory)
    bool owns_buf;             // free on close: the file was read into memory (llm__alloc)
    uint32_t version;
    size_t alignment, data_offset;
    int64_t n_kv, n_tensors;
    struct llm__gguf_kv *kv;           // (n_kv)
    struct llm__gguf_tensor *tensors;  // (n_tensors), in file order
    struct llm__gguf_index kv_index, tensor_index;
    void *extra;                       // what else the tensors point into (a Hugging Face directory's
    void (*extra_free)(void *);        // files), freed on close
};

static const char *llm__gguf_type_name(uint32_t type) {
    static const char *const names[LLM__GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    return type < LLM__GGUF_TYPE_COUNT ? names[type] : "unknown";
}

// Bytes of one scalar value; 0 for strings, arrays and unknown ids.
static size_t llm__gguf_type_size(uint32_t type) {
    static const uint8_t sizes[LLM__GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < LLM__GGUF_TYPE_COUNT ? sizes[type] : 0;
}

// A name from the file, made safe to print in a message: at most 80 bytes, non-printable
// bytes as '?', "..." when cut.
static const char *llm__gguf_printable(char out[88], const char *p, uint64_t len) {
    size_t n = len > 80 ? 80 : (size_t)len, i;
    for (i = 0; i < n; i++) out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    if (len > 80) out[n++] = '.', out[n++] = '.', out[n++] = '.';
    out[n] = 0;
    return out;
}

static bool llm__gguf_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Checked a * b for non-negative operands; false on overflow of INT64_MAX.
static bool llm__gguf_mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

// === GGUF: name index ===

// The index's hash: FNV-1a from the index's seed, mixed so that every bit of the state reaches
// the slot (its low bits).
static uint64_t llm__gguf_hash_keyed(const char *s, size_t n, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ h >> 33;
}

static bool llm__gguf_index_init(struct llm__gguf_index *ix, int64_t n) {
    uint64_t cap = 8;
    while (cap < (uint64_t)n * 2) cap *= 2;     // load factor <= 1/2
    ix->slots = malloc(cap * sizeof(int64_t));
    if (!ix->slots) return false;
    for (uint64_t i = 0; i < cap; i++) ix->slots[i] = -1;
    ix->mask = cap - 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = ((uint64_t)(uintptr_t)ix ^ (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec) * 0x9E3779B97F4A7C15ull;
    ix->seed = x ^ x >> 29;
    return true;
}

// Finds name in items (an array of structs of `stride` bytes whose first member is the
// char * name). Returns the item index, or -1 with *slot set to the empty slot where the
// name would go.
static int64_t llm__gguf_index_find(const struct llm__gguf_index *ix, const void *items,
                                    size_t stride, const char *name, uint64_t *slot) {
    if (!ix->slots) return -1;
    size_t n = strlen(name);
    uint64_t i = llm__gguf_hash_keyed(name, n, ix->seed) & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        int64_t at = ix->slots[i];
        if (at < 0) break;
        const char *other = *(char *const *)(const void *)((const char *)items + (size_t)at * stride);
        if (strcmp(other, name) == 0) return at;
    }
    if (slot) *slot = i;
    return -1;
}

// === GGUF: reader ===

// A read position in the mapping. The read functions check the bytes left, and on failure
// leave the message in e and the status in st and return false.
struct llm__gguf_cur {
    const uint8_t *base;
    size_t size, pos;
    enum llm_status st;
    struct llm__err *e;
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool llm__gguf_bad(struct llm__gguf_cur *c, enum llm_status st, const char *fmt, ...) {
    if (c->e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->e->msg, sizeof(c->e->msg), fmt, ap);
        va_end(ap);
    }
    c->st = st;
    return false;
}

static bool llm__gguf_need(struct llm__gguf_cur *c, uint64_t n, const char *what) {
    if (n <= c->size - c->pos) return true;
    return llm__gguf_bad(c, LLM_ERR_FORMAT,
                         "gguf: truncated file: %s at byte offset %zu needs %llu bytes, %zu left "
                         "(file is %zu bytes)", what, c->pos, (unsigned long long)n,
                         c->size - c->pos, c->size);
}

static bool llm__gguf_rd(struct llm__gguf_cur *c, void *out, size_t n, const char *what) {
    if (!llm__gguf_need(c, n, what)) return false;
    memcpy(out, c->base + c->pos, n);
    c->pos += n;
    return true;
}

// A string of at most max_len bytes. The length is checked against the bytes left, so a
// huge length is refused before anything is done with it.
static bool llm__gguf_rd_str(struct llm__gguf_cur *c, struct llm__gguf_str *s, uint64_t max_len,
                             const char *what) {
    size_t at = c->pos;
    uint64_t len;
    if (!llm__gguf_rd(c, &len, 8, what)) return false;
    if (len > max_len)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is %llu bytes long, "
                             "more than the limit of %llu", what, at, (unsigned long long)len,
                             (unsigned long long)max_len);
    if (len > c->size - c->pos)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: %s at byte offset %zu is "
                             "%llu bytes long, only %zu bytes left (file is %zu bytes)", what, at,
                             (unsigned long long)len, c->size - c->pos, c->size);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

// A key or tensor name: 1..max_len bytes, no NUL, copied with a terminator.
static bool llm__gguf_rd_name(struct llm__gguf_cur *c, char **out, uint64_t max_len,
                              const char *what, int64_t i) {
    size_t at = c->pos;
    struct llm__gguf_str s;
    char desc[64];
    snprintf(desc, sizeof(desc), "%s %lld", what, (long long)i);
    if (!llm__gguf_rd_str(c, &s, max_len, desc)) return false;
    if (s.len == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s at byte offset %zu is empty", desc, at);
    if (memchr(s.ptr, 0, (size_t)s.len)) {
        char pr[88];
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: %s '%s' at byte offset %zu contains a NUL "
                             "byte", desc, llm__gguf_printable(pr, s.ptr, s.len), at);
    }
    *out = malloc((size_t)s.len + 1);
    if (!*out) return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory reading %s", desc);
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = 0;
    return true;
}

// An array value: element type, count, then the elements (strings are indexed; other elements
// are left in place, at arr_data).
static bool llm__gguf_rd_arr(struct llm__gguf_cur *c, struct llm__gguf_kv *kv, const char *key, const char *what) {
    char item[128];
    size_t elem_at = c->pos;
    if (!llm__gguf_rd(c, &kv->arr_type, 4, what) || !llm__gguf_rd(c, &kv->arr_n, 8, what)) return false;
    if (kv->arr_type == LLM__GGUF_ARR)
        return llm__gguf_bad(c, LLM_ERR_UNSUPPORTED, "gguf: key '%s' is an array of arrays "
                             "(byte offset %zu); nested arrays are not supported", key, elem_at);
    if (kv->arr_type >= LLM__GGUF_TYPE_COUNT)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown array element "
                             "type id %u at byte offset %zu", key, kv->arr_type, elem_at);
    // Each element takes at least 1 byte (8 for a string's length), so this bounds the
    // count, and the allocation below, by the file size.
    size_t esize = kv->arr_type == LLM__GGUF_STR ? 8 : llm__gguf_type_size(kv->arr_type);
    if (kv->arr_n > (c->size - c->pos) / esize)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: truncated file: key '%s' is an array of "
                             "%llu %s at byte offset %zu, more than the %zu bytes left can "
                             "hold", key, (unsigned long long)kv->arr_n,
                             llm__gguf_type_name(kv->arr_type), elem_at, c->size - c->pos);
    kv->arr_data = c->base + c->pos;
    if (kv->arr_type != LLM__GGUF_STR) {
        c->pos += (size_t)kv->arr_n * esize;
        return true;
    }
    kv->arr_str = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof(*kv->arr_str));
    if (!kv->arr_str)
        return llm__gguf_bad(c, LLM_ERR_NOMEM, "gguf: out of memory for the %llu strings "
                             "of key '%s'", (unsigned long long)kv->arr_n, key);
    for (uint64_t j = 0; j < kv->arr_n; j++) {
        snprintf(item, sizeof(item), "string %llu of key '%s'", (unsigned long long)j, key);
        if (!llm__gguf_rd_str(c, &kv->arr_str[j], UINT64_MAX, item)) return false;
    }
    return true;
}

// A number or bool value, widened into kv->v (u64, i64 or f64 by its type).
static bool llm__gguf_rd_scalar(struct llm__gguf_cur *c, struct llm__gguf_kv *kv, const char *what) {
    uint8_t b[8] = {0};
    if (!llm__gguf_rd(c, b, llm__gguf_type_size(kv->type), what)) return false;
    switch (kv->type) {
    case LLM__GGUF_U8: kv->v.u64 = b[0]; break;
    case LLM__GGUF_BOOL: kv->v.u64 = b[0] != 0; break;
    case LLM__GGUF_I8: { int8_t x; memcpy(&x, b, 1); kv->v.i64 = x; } break;
    case LLM__GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.u64 = x; } break;
    case LLM__GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i64 = x; } break;
    case LLM__GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.u64 = x; } break;
    case LLM__GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i64 = x; } break;
    case LLM__GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f64 = x; } break;
    case LLM__GGUF_U64: memcpy(&kv->v.u64, b, 8); break;
    case LLM__GGUF_I64: memcpy(&kv->v.i64, b, 8); break;
    case LLM__GGUF_F64: memcpy(&kv->v.f64, b, 8); break;
    default: break;
    }
    return true;
}

// One key/value pair, from its key to the end of its value.
static bool llm__gguf_rd_kv(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_kv *kv = &g->kv[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &kv->key, LLM__GGUF_MAX_KEY, "key", i)) return false;
    char pr[88], what[128];
    const char *key = llm__gguf_printable(pr, kv->key, strlen(kv->key));
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), kv->key, &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate key '%s' (key/value %lld at byte "
                             "offset %zu repeats key/value %lld)", key, (long long)i, at,
                             (long long)dup);
    g->kv_index.slots[slot] = i;

    kv->raw = c->base + c->pos;
    size_t type_at = c->pos;
    snprintf(what, sizeof(what), "the type of key '%s'", key);
    if (!llm__gguf_rd(c, &kv->type, 4, what)) return false;
    if (kv->type >= LLM__GGUF_TYPE_COUNT)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: key '%s' has unknown value type id %u at "
                             "byte offset %zu", key, kv->type, type_at);

    snprintf(what, sizeof(what), "the value of key '%s'", key);
    bool ok = kv->type == LLM__GGUF_ARR ? llm__gguf_rd_arr(c, kv, key, what)
            : kv->type == LLM__GGUF_STR ? llm__gguf_rd_str(c, &kv->v.str, UINT64_MAX, what)
                                        : llm__gguf_rd_scalar(c, kv, what);
    if (!ok) return false;
    kv->raw_len = (size_t)(c->base + c->pos - kv->raw);
    return true;
}

// One tensor info: name, shape, type, offset. Sizes are computed with overflow checks.
static bool llm__gguf_rd_tensor(struct llm__gguf_cur *c, struct llm__gguf *g, int64_t i) {
    struct llm__gguf_tensor *t = &g->tensors[i];
    size_t at = c->pos;
    if (!llm__gguf_rd_name(c, &t->name, UINT64_MAX, "tensor name", i)) return false;
    char pr[88];
    const char *name = llm__gguf_printable(pr, t->name, strlen(t->name));
    if (strlen(t->name) > LLM__GGUF_MAX_NAME)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor %lld name '%s' at byte offset %zu is "
                             "%zu bytes long, more than the limit of %d", (long long)i, name, at,
                             strlen(t->name), LLM__GGUF_MAX_NAME);
    uint64_t slot = 0;
    int64_t dup = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), t->name,
                                       &slot);
    if (dup >= 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: duplicate tensor name '%s' (tensors %lld "
                             "and %lld, byte offset %zu)", name, (long long)dup, (long long)i, at);
    g->tensor_index.slots[slot] = i;

    char what[128];
    snprintf(what, sizeof(what), "the shape, type and offset of tensor '%s'", name);
    uint32_t n_dims;
    if (!llm__gguf_rd(c, &n_dims, 4, what)) return false;
    if (n_dims < 1 || n_dims > LLM__GGUF_MAX_DIMS)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has %u dimensions, must be 1..%d "
                             "(byte offset %zu)", name, n_dims, LLM__GGUF_MAX_DIMS, c->pos - 4);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < LLM__GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        if (!llm__gguf_rd(c, &t->ne[d], 8, what)) return false;
        if (t->ne[d] < 1)
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' dimension %d is %lld, must be "
                                 ">= 1 (byte offset %zu)", name, d, (long long)t->ne[d], c->pos - 8);
        if (!llm__gguf_mul_i64(nel, t->ne[d], &nel))
            return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' element count overflows "
                                 "(dimension %d is %lld)", name, d, (long long)t->ne[d]);
    }

    size_t type_at = c->pos;
    if (!llm__gguf_rd(c, &t->type, 4, what)) return false;
    const struct llm__type_info *ti = llm__type_info(t->type);
    int64_t blck = ti ? (int64_t)ti->blck : 0, bytes;
    if (!ti || ti->internal || blck <= 0 || ti->block_bytes == 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' has unknown tensor type id %u "
                             "(byte offset %zu)", name, t->type, type_at);
    if (t->ne[0] % blck != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' of type %s has rows of %lld "
                             "elements, not a multiple of the type's block size %lld", name,
                             ti->name, (long long)t->ne[0], (long long)blck);
    if (!llm__gguf_mul_i64(nel / blck, (int64_t)ti->block_bytes, &bytes) ||
        (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' byte size overflows "
                             "(%lld elements of type %s)", name, (long long)nel, ti->name);
    t->size = (size_t)bytes;

    if (!llm__gguf_rd(c, &t->offset, 8, what)) return false;
    if (t->offset % g->alignment != 0)
        return llm__gguf_bad(c, LLM_ERR_FORMAT, "gguf: tensor '%s' data offset %llu is not a "
                             "multiple of the alignment %zu (byte offset %zu)", name,
                             (unsigned long long)t->offset, g->alignment, c->pos - 8);
    return true;
}

// The header: magic, version (v2 and v3, little-endian), the tensor and key/value counts, which
// must fit in the bytes after it.
static enum llm_status llm__gguf_rd_header(struct llm__gguf_cur *c, struct llm__gguf *g, uint64_t *n_tensors,
                                           uint64_t *n_kv, struct llm__err *e) {
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian hosts are not supported");
    char magic[4];
    if (!llm__gguf_rd(c, magic, 4, "magic")) return c->st;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char pr[88];
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad magic '%s' (bytes %02x %02x %02x %02x), "
                         "expected 'GGUF': not a GGUF file", llm__gguf_printable(pr, magic, 4),
                         (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    }
    if (!llm__gguf_rd(c, &g->version, 4, "version")) return c->st;
    // A big-endian file's small version number reads as n << 24 here.
    if (g->version != 0 && (g->version & 0xffffu) == 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: big-endian GGUF is not supported (version "
                         "field 0x%08x)", g->version);
    if (g->version == 0)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: bad GGUF version 0");
    if (g->version == 1)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: GGUF v1 is not supported (convert the model "
                         "again with a current llama.cpp)");
    if (g->version > 3)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "gguf: unsupported GGUF version %u (this reader "
                         "knows v2 and v3)", g->version);

    if (!llm__gguf_rd(c, n_tensors, 8, "tensor count")) return c->st;
    if (!llm__gguf_rd(c, n_kv, 8, "key/value count")) return c->st;
    // Smallest serialized key/value: key length 8 + 1 byte of key + type 4 + a u8 value.
    // Smallest tensor info: name length 8 + 1 + n_dims 4 + one dimension 8 + type 4 + offset 8.
    // Counts that cannot fit are refused before the caller allocates arrays for them.
    size_t left = c->size - c->pos;
    if (*n_kv > left / 14)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key/value count %llu cannot fit in the %zu "
                         "bytes after the header", (unsigned long long)*n_kv, left);
    if (*n_tensors > left / 33 || *n_kv * 14 + *n_tensors * 33 > left)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: tensor count %llu cannot fit in the %zu bytes "
                         "after the header (with %llu key/values)", (unsigned long long)*n_tensors,
                         left, (unsigned long long)*n_kv);
    return LLM_OK;
}

// The tensor data alignment: general.alignment (a u32 power of two) or the default.
static enum llm_status llm__gguf_alignment(struct llm__gguf *g, struct llm__err *e) {
    g->alignment = LLM__GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), "general.alignment", NULL);
    if (ai < 0) return LLM_OK;
    const struct llm__gguf_kv *kv = &g->kv[ai];
    if (kv->type != LLM__GGUF_U32)
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' has type %s, must be "
                         "u32", llm__gguf_type_name(kv->type));
    if (!llm__gguf_is_pow2(kv->v.u64))
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: key 'general.alignment' is %llu, must be a "
                         "power of two", (unsigned long long)kv->v.u64);
    g->alignment = (size_t)kv->v.u64;
    return LLM_OK;
}

// Places the data section at the first multiple of the alignment after the tensor infos (which
// end at byte `end`) and every tensor's data in it, each checked to lie inside the file.
static enum llm_status llm__gguf_place_tensors(struct llm__gguf *g, size_t end, struct llm__err *e) {
    // A vocabulary-only file may end before the data section; then there is none.
    uint64_t data_offset = ((uint64_t)end + g->alignment - 1) / g->alignment * g->alignment;
    if (data_offset > g->size) {
        if (g->n_tensors > 0)
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: truncated file: the data section would start "
                             "at byte offset %llu, past the end of the file (%zu bytes)",
                             (unsigned long long)data_offset, g->size);
        data_offset = g->size;
    }
    g->data_offset = (size_t)data_offset;
    size_t data_size = g->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct llm__gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_size || t->size > data_size - t->offset) {
            char pr[88];
            return llm__fail(e, LLM_ERR_FORMAT, "gguf: truncated file: tensor '%s' data [offset %llu, size %zu] "
                             "extends past the end of the file (%zu bytes, data section from "
                             "byte offset %zu)", llm__gguf_printable(pr, t->name, strlen(t->name)),
                             (unsigned long long)t->offset, t->size, g->size, g->data_offset);
        }
        t->data = (const uint8_t *)g->map + g->data_offset + t->offset;
    }
    return LLM_OK;
}

// Parses g->map[0 .. g->size): header, key/values, alignment, tensor infos, data placement. On
// failure the caller closes g (which frees what was built).
static enum llm_status llm__gguf_parse(struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_cur c = {g->map, g->size, 0, LLM_OK, e};
    uint64_t n_tensors, n_kv;
    enum llm_status st = llm__gguf_rd_header(&c, g, &n_tensors, &n_kv, e);
    if (st) return st;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*g->kv));
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors || !llm__gguf_index_init(&g->kv_index, (int64_t)n_kv) ||
        !llm__gguf_index_init(&g->tensor_index, (int64_t)n_tensors))
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: out of memory for %llu key/values and %llu "
                         "tensors", (unsigned long long)n_kv, (unsigned long long)n_tensors);
    for (int64_t i = 0; i < (int64_t)n_kv; i++) {
        g->n_kv = i + 1;   // so that close frees what this entry allocated, even on failure
        if (!llm__gguf_rd_kv(&c, g, i)) return c.st;
    }
    if ((st = llm__gguf_alignment(g, e))) return st;
    for (int64_t i = 0; i < (int64_t)n_tensors; i++) {
        g->n_tensors = i + 1;
        if (!llm__gguf_rd_tensor(&c, g, i)) return c.st;
    }
    return llm__gguf_place_tensors(g, c.pos, e);
}

static void llm__gguf_close(struct llm__gguf *g) {
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].arr_str);
        }
    if (g->tensors)
        for (int64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->owns_map && g->map) munmap(g->map, g->size);
    if (g->owns_buf) free(g->map);
    if (g->extra_free) g->extra_free(g->extra);
    memset(g, 0, sizeof(*g));
}

// Reads size bytes of fd into buf. A file that ends early changed since it was measured.
static enum llm_status llm__read_all(int fd, void *buf, size_t size, const char *path, struct llm__err *e) {
    size_t done = 0;
    while (done < size) {
        ssize_t k = read(fd, (char *)buf + done, LLM__MIN(size - done, (size_t)1 << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return llm__fail(e, LLM_ERR_IO, "gguf: cannot read '%s': %s", path, strerror(errno));
        if (k == 0)
            return llm__fail(e, LLM_ERR_IO, "gguf: '%s' ended after %zu of its %zu bytes: it changed while it was read",
                             path, done, size);
        done += (size_t)k;
    }
    return LLM_OK;
}

// Opens a GGUF file and parses it: mapped read-only (tensors are used in place from the page
// cache: the file must not change while it is mapped, or an access to a page that is gone ends
// the process with SIGBUS), or, with read_all, read into memory (as llama.cpp's --no-mmap:
// afterwards the file may change or go). Every open checks the tensors' extents against the
// file's size as it is then. Error messages end with the path.
static enum llm_status llm__gguf_open_file(struct llm__gguf *g, const char *path, bool read_all, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    // O_NONBLOCK: opening a FIFO waits for a writer without it (forever); the file is checked
    // to be a regular one right after, and regular files ignore the flag
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(err));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is a directory, not a GGUF file", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return llm__fail(e, LLM_ERR_FORMAT, "gguf: '%s' is empty (0 bytes)", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__fail(e, LLM_ERR_NOMEM, "gguf: '%s' (%lld bytes) is too large to map", path,
                         (long long)st.st_size);
    }
    enum llm_status s = LLM_OK;
    if (read_all) {
        void *buf = llm__alloc((size_t)st.st_size);
        if (!buf) s = llm__fail(e, LLM_ERR_NOMEM, "gguf: no memory to read '%s' (%lld bytes)", path, (long long)st.st_size);
        else if ((s = llm__read_all(fd, buf, (size_t)st.st_size, path, e)) != LLM_OK) free(buf);
        close(fd);
        if (s != LLM_OK) return s;
        g->map = buf;
        g->owns_buf = true;
    } else {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        int err = errno;
        close(fd);   // the mapping stays valid
        if (map == MAP_FAILED)
            return llm__fail(e, LLM_ERR_IO, "gguf: cannot map '%s': %s", path, strerror(err));
        g->map = map;
        g->owns_map = true;
    }
    g->size = (size_t)st.st_size;
    s = llm__gguf_parse(g, e);
    if (s != LLM_OK) {
        llm__gguf_close(g);
        if (e) {
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof(e->msg) - n, " (in '%s')", path);
        }
    }
    return s;
}

static int64_t llm__gguf_find_key(const struct llm__gguf *g, const char *key) {
    return llm__gguf_index_find(&g->kv_index, g->kv, sizeof(*g->kv), key, NULL);
}

static const struct llm__gguf_tensor *llm__gguf_find_tensor(const struct llm__gguf *g,
                                                            const char *name) {
    int64_t i = llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), name, NULL);
    return i < 0 ? NULL : &g->tensors[i];
}

// === GGUF: typed getters ===
// Each returns false with a message naming the key when the key is absent, has an
// incompatible type, or a value out of range. For an optional key, test llm__gguf_find_key first.

static const struct llm__gguf_kv *llm__gguf_get_kv(const struct llm__gguf *g, const char *key,
                                                   struct llm__err *e) {
    int64_t i = llm__gguf_find_key(g, key);
    if (i < 0) llm__fail(e, LLM_ERR_FORMAT, "gguf: missing key '%s'", key);
    return i < 0 ? NULL : &g->kv[i];
}

static bool llm__gguf_kv_is_int(const struct llm__gguf_kv *kv) {
    switch (kv->type) {
    case LLM__GGUF_U8: case LLM__GGUF_U16: case LLM__GGUF_U32: case LLM__GGUF_U64:
    case LLM__GGUF_I8: case LLM__GGUF_I16: case LLM__GGUF_I32: case LLM__GGUF_I64: return true;
    default: return false;
    }
}
static bool llm__gguf_kv_is_signed(const struct llm__gguf_kv *kv) {
    return kv->type == LLM__GGUF_I8 || kv->type == LLM__GGUF_I16 || kv->type == LLM__GGUF_I32 ||
           kv->type == LLM__GGUF_I64;
}

// A key of any integer type whose value lies in [lo, hi] (lo <= 0 compared as signed, hi as
// unsigned, so the range can reach from INT64_MIN to UINT64_MAX). The value goes to *out_i or
// *out_u, whichever is not NULL.
static bool llm__gguf_get_int(const struct llm__gguf *g, const char *key, int64_t lo, uint64_t hi,
                              const char *want, int64_t *out_i, uint64_t *out_u, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (!llm__gguf_kv_is_int(kv)) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                  llm__gguf_type_name(kv->type), want);
        return false;
    }
    bool neg = llm__gguf_kv_is_signed(kv) && kv->v.i64 < 0;
    if ((neg && kv->v.i64 < lo) || (!neg && kv->v.u64 > hi)) {
        if (neg)
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %lld, out of range for %s", key,
                      (long long)kv->v.i64, want);
        else
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %llu, out of range for %s", key,
                      (unsigned long long)kv->v.u64, want);
        return false;
    }
    if (out_i) *out_i = kv->v.i64;
    if (out_u) *out_u = kv->v.u64;
    return true;
}

static bool llm__gguf_get_u32(const struct llm__gguf *g, const char *key, uint32_t *out,
                              struct llm__err *e) {
    uint64_t v;
    if (!llm__gguf_get_int(g, key, 0, UINT32_MAX, "an unsigned 32-bit integer", NULL, &v, e))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool llm__gguf_get_f32(const struct llm__gguf *g, const char *key, float *out,
                              struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type == LLM__GGUF_F32 || kv->type == LLM__GGUF_F64) {
        if (isfinite(kv->v.f64) && fabs(kv->v.f64) > FLT_MAX) {
            llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' is %g, out of range for f32", key, kv->v.f64);
            return false;
        }
        *out = (float)kv->v.f64;
    } else if (llm__gguf_kv_is_int(kv)) {
        *out = llm__gguf_kv_is_signed(kv) ? (float)kv->v.i64 : (float)kv->v.u64;
    } else {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected a number", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    return true;
}

static bool llm__gguf_get_bool(const struct llm__gguf *g, const char *key, bool *out,
                               struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_BOOL) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected bool", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.u64 != 0;
    return true;
}

static bool llm__gguf_get_str(const struct llm__gguf *g, const char *key, struct llm__gguf_str *out,
                              struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_STR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected string", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *out = kv->v.str;
    return true;
}

// An array of any element type: *data points at n packed elements in the mapping (read them
// with memcpy: they need not be aligned), or for string arrays at n struct llm__gguf_str.
static bool llm__gguf_get_arr(const struct llm__gguf *g, const char *key, uint32_t *elem_type,
                              uint64_t *n, const void **data, struct llm__err *e) {
    const struct llm__gguf_kv *kv = llm__gguf_get_kv(g, key, e);
    if (!kv) return false;
    if (kv->type != LLM__GGUF_ARR) {
        llm__fail(e, LLM_ERR_FORMAT, "gguf: key '%s' has type %s, expected an array", key,
                  llm__gguf_type_name(kv->type));
        return false;
    }
    *elem_type = kv->arr_type;
    *n = kv->arr_n;
    *data = kv->arr_type == LLM__GGUF_STR ? (const void *)kv->arr_str : (const void *)kv->arr_data;
    return true;
}

// === JSON ===
// (LLM__UNUSED: the Hugging Face directory loader, still being written, is what calls these;
// until then only the tests and the fuzzer do.)
#if defined(__GNUC__)
#define LLM__UNUSED __attribute__((unused))
#else
#define LLM__UNUSED
#endif
// Hugging Face model directories are JSON (config.json, tokenizer.json, the index of a sharded
// checkpoint) and so is a safetensors file's header. The reader parses a whole text (RFC 8259,
// UTF-8) into a flat array of nodes, each a value with its bytes in the text, in document order:
// an array's elements follow it, an object's members follow it as key, value, key, value; `next`
// is the node after a value and everything inside it, so a lookup walks siblings without
// descending. Strings stay undecoded in the text until asked for. The text is treated as
// hostile: nesting deeper than 64, bad UTF-8, control characters in strings, numbers outside
// the grammar, and trailing bytes are errors with the byte offset.

enum llm__json_type {
    LLM__JSON_NULL, LLM__JSON_FALSE, LLM__JSON_TRUE, LLM__JSON_NUM, LLM__JSON_STR, LLM__JSON_ARR, LLM__JSON_OBJ
};

#define LLM__JSON_MAX_DEPTH 64
#define LLM__JSON_MAX_SIZE ((size_t)1 << 31)   // bytes of text (offsets are 32-bit)

struct llm__jnode {
    uint8_t type;      // enum llm__json_type
    bool esc;          // a string with backslash escapes
    uint32_t start;    // the value's first byte (a string: after its opening quote)
    uint32_t len;      // its bytes (a string: up to its closing quote)
    int32_t n;         // an array's elements, an object's members
    int32_t next;      // the node after this value and all that it holds
};

struct llm__json {
    const char *text;
    size_t size;
    struct llm__jnode *nodes;   // (n), nodes[0] the document's value
    int32_t n, cap;
};

struct llm__json_cur { struct llm__json *j; size_t pos; struct llm__err *e; const char *what; };

static void llm__json_free(struct llm__json *j) {
    free(j->nodes);
    memset(j, 0, sizeof(*j));
}

static bool llm__json_bad(struct llm__json_cur *c, const char *msg) {
    llm__fail(c->e, LLM_ERR_FORMAT, "%s: bad JSON at byte %zu: %s", c->what, c->pos, msg);
    return false;
}

static void llm__json_ws(struct llm__json_cur *c) {
    const char *t = c->j->text;
    while (c->pos < c->j->size && (t[c->pos] == ' ' || t[c->pos] == '\t' || t[c->pos] == '\n' || t[c->pos] == '\r')) c->pos++;
}

static int32_t llm__json_node(struct llm__json_cur *c, enum llm__json_type type) {
    struct llm__json *j = c->j;
    if (j->n == j->cap) {
        int32_t cap = j->cap == 0 ? 64 : j->cap <= INT32_MAX / 2 ? j->cap * 2 : 0;
        struct llm__jnode *nodes = cap > 0 ? realloc(j->nodes, (size_t)cap * sizeof(*nodes)) : NULL;
        if (!nodes) {
            llm__fail(c->e, LLM_ERR_NOMEM, "%s: out of memory for %d JSON values", c->what, (int)j->n);
            return -1;
        }
        j->nodes = nodes;
        j->cap = cap;
    }
    j->nodes[j->n] = (struct llm__jnode){.type = (uint8_t)type, .start = (uint32_t)c->pos};
    return j->n++;
}

// (the tokenizer's UTF-8 helpers, below)
static int llm__utf8_char(const uint8_t *s, size_t n);
static int llm__utf8_put(uint32_t cp, char *out);

static int llm__json_hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static bool llm__json_string(struct llm__json_cur *c) {
    const char *t = c->j->text;
    int32_t i = llm__json_node(c, LLM__JSON_STR);
    if (i < 0) return false;
    size_t p = ++c->pos;
    bool esc = false;
    for (;;) {
        if (p >= c->j->size) { c->pos = p; return llm__json_bad(c, "a string does not end"); }
        unsigned char ch = (unsigned char)t[p];
        if (ch == '"') break;
        if (ch < 0x20) { c->pos = p; return llm__json_bad(c, "a control character in a string"); }
        if (ch == '\\') {
            esc = true;
            if (p + 1 >= c->j->size) { c->pos = p; return llm__json_bad(c, "a string does not end"); }
            char x = t[p + 1];
            if (x == 'u') {
                if (p + 6 > c->j->size || llm__json_hex4(t + p + 2) < 0) { c->pos = p; return llm__json_bad(c, "a bad \\u escape"); }
                p += 6;
            } else if (x && strchr("\"\\/bfnrt", x)) {
                p += 2;
            } else {
                c->pos = p;
                return llm__json_bad(c, "an unknown escape in a string");
            }
            continue;
        }
        int len = llm__utf8_char((const uint8_t *)t + p, c->j->size - p);
        if (len <= 0) { c->pos = p; return llm__json_bad(c, "a string is not valid UTF-8"); }
        p += (size_t)len;
    }
    struct llm__jnode *nd = &c->j->nodes[i];
    nd->start = (uint32_t)c->pos;
    nd->len = (uint32_t)(p - c->pos);
    nd->esc = esc;
    nd->next = i + 1;
    c->pos = p + 1;
    return true;
}

static bool llm__json_number(struct llm__json_cur *c) {
    const char *t = c->j->text;
    const size_t n = c->j->size, s = c->pos;
    size_t p = s;
    int32_t i = llm__json_node(c, LLM__JSON_NUM);
    if (i < 0) return false;
    if (p < n && t[p] == '-') p++;
    if (p < n && t[p] == '0') p++;
    else if (p < n && t[p] >= '1' && t[p] <= '9') while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    else { c->pos = p; return llm__json_bad(c, "a number without digits"); }
    if (p < n && t[p] == '.') {
        if (++p >= n || t[p] < '0' || t[p] > '9') { c->pos = p; return llm__json_bad(c, "a number without digits after '.'"); }
        while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    }
    if (p < n && (t[p] == 'e' || t[p] == 'E')) {
        if (++p < n && (t[p] == '+' || t[p] == '-')) p++;
        if (p >= n || t[p] < '0' || t[p] > '9') { c->pos = p; return llm__json_bad(c, "a number without exponent digits"); }
        while (p < n && t[p] >= '0' && t[p] <= '9') p++;
    }
    c->j->nodes[i].len = (uint32_t)(p - s);
    c->j->nodes[i].next = i + 1;
    c->pos = p;
    return true;
}

static bool llm__json_value(struct llm__json_cur *c, int depth) {
    const char *t = c->j->text;
    llm__json_ws(c);
    if (c->pos >= c->j->size) return llm__json_bad(c, "a value is missing");
    char ch = t[c->pos];
    if (ch == '"') return llm__json_string(c);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return llm__json_number(c);
    static const char *const words[3] = {"null", "false", "true"};
    for (int w = 0; w < 3; w++) {
        size_t wl = strlen(words[w]);
        if (c->j->size - c->pos >= wl && memcmp(t + c->pos, words[w], wl) == 0) {
            int32_t i = llm__json_node(c, (enum llm__json_type)(LLM__JSON_NULL + w));
            if (i < 0) return false;
            c->j->nodes[i].len = (uint32_t)wl;
            c->j->nodes[i].next = i + 1;
            c->pos += wl;
            return true;
        }
    }
    if (ch != '[' && ch != '{') return llm__json_bad(c, "not a JSON value");
    if (depth >= LLM__JSON_MAX_DEPTH) return llm__json_bad(c, "nested deeper than 64");
    const bool obj = ch == '{';
    int32_t i = llm__json_node(c, obj ? LLM__JSON_OBJ : LLM__JSON_ARR), n = 0;
    if (i < 0) return false;
    c->pos++;
    llm__json_ws(c);
    if (c->pos < c->j->size && t[c->pos] == (obj ? '}' : ']')) c->pos++;
    else
        for (;;) {
            if (obj) {
                llm__json_ws(c);
                if (c->pos >= c->j->size || t[c->pos] != '"') return llm__json_bad(c, "an object key is not a string");
                if (!llm__json_string(c)) return false;
                llm__json_ws(c);
                if (c->pos >= c->j->size || t[c->pos] != ':') return llm__json_bad(c, "':' expected after an object key");
                c->pos++;
            }
            if (!llm__json_value(c, depth + 1)) return false;
            if (n == INT32_MAX) return llm__json_bad(c, "too many elements");
            n++;
            llm__json_ws(c);
            if (c->pos < c->j->size && t[c->pos] == ',') { c->pos++; continue; }
            if (c->pos < c->j->size && t[c->pos] == (obj ? '}' : ']')) { c->pos++; break; }
            return llm__json_bad(c, obj ? "',' or '}' expected" : "',' or ']' expected");
        }
    struct llm__jnode *nd = &c->j->nodes[i];
    nd->n = n;
    nd->len = (uint32_t)(c->pos - nd->start);
    nd->next = c->j->n;
    return true;
}

// Parses text[0..size) (what: the file, for messages). On failure j is empty.
static enum llm_status llm__json_parse(struct llm__json *j, const char *text, size_t size, const char *what, struct llm__err *e) {
    memset(j, 0, sizeof(*j));
    if (size >= LLM__JSON_MAX_SIZE)
        return llm__fail(e, LLM_ERR_FORMAT, "%s: %zu bytes of JSON, more than this reader takes (2 GiB)", what, size);
    j->text = text;
    j->size = size;
    struct llm__json_cur c = {j, 0, e, what};
    if (size >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) c.pos = 3;   // a byte order mark, as some editors write
    bool ok = llm__json_value(&c, 0);
    if (ok) {
        llm__json_ws(&c);
        if (c.pos < size) ok = llm__json_bad(&c, "bytes after the value");
    }
    if (!ok) {
        enum llm_status st = e ? e->status : LLM_ERR_FORMAT;
        llm__json_free(j);
        return st;
    }
    return LLM_OK;
}

// Member `key` of object node o: its value's node, or -1 (o not an object, or no such key).
static int32_t llm__json_get(const struct llm__json *j, int32_t o, const char *key);

// String node i decoded (escapes, \u surrogate pairs as UTF-8) into out (at least len + 1 bytes:
// decoding never grows a string); its length. A lone surrogate becomes U+FFFD.
static size_t llm__json_decode(const struct llm__json *j, int32_t i, char *out) {
    const struct llm__jnode *nd = &j->nodes[i];
    const char *s = j->text + nd->start;
    size_t n = nd->len, o = 0;
    if (!nd->esc) {
        memcpy(out, s, n);
        out[n] = 0;
        return n;
    }
    for (size_t p = 0; p < n;) {
        if (s[p] != '\\') { out[o++] = s[p++]; continue; }
        char x = s[p + 1];
        p += 2;
        if (x != 'u') {
            out[o++] = x == 'b' ? '\b' : x == 'f' ? '\f' : x == 'n' ? '\n' : x == 'r' ? '\r' : x == 't' ? '\t' : x;
            continue;
        }
        uint32_t cp = (uint32_t)llm__json_hex4(s + p);
        p += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && p + 6 <= n && s[p] == '\\' && s[p + 1] == 'u') {
            int lo = llm__json_hex4(s + p + 2);
            if (lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (uint32_t)(lo - 0xdc00);
                p += 6;
            }
        }
        if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;
        o += (size_t)llm__utf8_put(cp, out + o);   // (4 bytes at most for the 6 or 12 of text)
    }
    out[o] = 0;
    return o;
}

// String node i decoded into a new NUL-terminated string (*len: its bytes, which may include a
// NUL); NULL: not a string, or no memory.
static char *llm__json_strdup(const struct llm__json *j, int32_t i, size_t *len) {
    if (i < 0 || j->nodes[i].type != LLM__JSON_STR) return NULL;
    char *s = malloc((size_t)j->nodes[i].len + 1);
    if (!s) return NULL;
    size_t n = llm__json_decode(j, i, s);
    if (len) *len = n;
    return s;
}

// Whether string node i is `s`.
static bool llm__json_eq(const struct llm__json *j, int32_t i, const char *s) {
    const struct llm__jnode *nd = &j->nodes[i];
    size_t n = strlen(s);
    if (nd->type != LLM__JSON_STR) return false;
    if (!nd->esc) return nd->len == n && memcmp(j->text + nd->start, s, n) == 0;
    if (nd->len < n) return false;
    char stackbuf[256], *buf = nd->len < sizeof(stackbuf) ? stackbuf : malloc((size_t)nd->len + 1);
    if (!buf) return false;
    size_t m = llm__json_decode(j, i, buf);
    bool eq = m == n && memcmp(buf, s, n) == 0;
    if (buf != stackbuf) free(buf);
    return eq;
}

static int32_t llm__json_get(const struct llm__json *j, int32_t o, const char *key) {
    if (o < 0 || j->nodes[o].type != LLM__JSON_OBJ) return -1;
    int32_t found = -1;
    for (int32_t m = 0, k = o + 1; m < j->nodes[o].n; m++) {
        if (llm__json_eq(j, k, key)) found = k + 1;   // the last of duplicate keys, as most readers take
        k = j->nodes[k + 1].next;
    }
    return found;
}

// Element x of array node a, or -1.
static int32_t llm__json_at(const struct llm__json *j, int32_t a, int32_t x) {
    if (a < 0 || j->nodes[a].type != LLM__JSON_ARR || x < 0 || x >= j->nodes[a].n) return -1;
    int32_t k = a + 1;
    while (x-- > 0) k = j->nodes[k].next;
    return k;
}

// Number node i as a double: exact where the digits (at most 19 significant) and the power of
// ten are exactly representable, else within a rounding or two (configuration values need no
// more). Not strtod: its decimal point follows the program's locale.
static bool llm__json_num(const struct llm__json *j, int32_t i, double *out) {
    if (i < 0 || j->nodes[i].type != LLM__JSON_NUM) return false;
    const char *s = j->text + j->nodes[i].start, *end = s + j->nodes[i].len;
    bool neg = *s == '-';
    s += neg;
    uint64_t m = 0;
    int digits = 0;
    long e10 = 0;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (digits < 19) { m = m * 10 + (uint64_t)(*s - '0'); digits += m > 0; }
        else e10++;
    }
    if (s < end && *s == '.')
        for (s++; s < end && *s >= '0' && *s <= '9'; s++)
            if (digits < 19) { m = m * 10 + (uint64_t)(*s - '0'); digits += m > 0; e10--; }
    if (s < end) {   // the exponent
        s++;
        bool eneg = *s == '-';
        s += *s == '-' || *s == '+';
        long x = 0;
        for (; s < end; s++) x = x < 100000 ? x * 10 + (*s - '0') : x;
        e10 += eneg ? -x : x;
    }
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double v = (double)m;
    if (m == 0) v = 0.0;
    else if (m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) v = e10 < 0 ? v / p10[-e10] : v * p10[e10];
    else v = e10 < -400 ? 0.0 : e10 > 400 ? HUGE_VAL : v * pow(10.0, (double)e10);
    *out = neg ? -v : v;
    return true;
}

// Number node i as an integer in [lo, hi]: false when it is not a number, has a fraction or an
// exponent that leaves one, or lies outside.
static bool llm__json_int(const struct llm__json *j, int32_t i, int64_t lo, int64_t hi, int64_t *out) {
    double v;
    if (!llm__json_num(j, i, &v) || !(v >= (double)lo && v <= (double)hi) || v != floor(v)) return false;
    const char *s = j->text + j->nodes[i].start;
    if (!memchr(s, '.', j->nodes[i].len) && !memchr(s, 'e', j->nodes[i].len) && !memchr(s, 'E', j->nodes[i].len)) {
        // plain digits: exact (a double is not past 2^53)
        bool neg = *s == '-';
        uint64_t u = 0;
        for (uint32_t k = neg; k < j->nodes[i].len; k++) {
            if (u > (UINT64_MAX - 9) / 10) return false;
            u = u * 10 + (uint64_t)(s[k] - '0');
        }
        if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX) return false;
        int64_t x = neg ? (int64_t)(0 - u) : (int64_t)u;
        if (x < lo || x > hi) return false;
        *out = x;
        return true;
    }
    *out = (int64_t)v;
    return true;
}

// A whole file read into memory (a NUL after it), for JSON; *size its bytes.
static enum llm_status llm__read_file(const char *path, size_t max, char **out, size_t *size, struct llm__err *e) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return llm__fail(e, LLM_ERR_FORMAT, "'%s' has %lld bytes, more than the %zu this file may have", path,
                         (long long)st.st_size, max);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return llm__fail(e, LLM_ERR_NOMEM, "no memory to read '%s'", path);
    }
    enum llm_status s = llm__read_all(fd, buf, (size_t)st.st_size, path, e);
    close(fd);
    if (s != LLM_OK) { free(buf); return s; }
    buf[st.st_size] = 0;
    *out = buf;
    *size = (size_t)st.st_size;
    return LLM_OK;
}

// === safetensors ===
// Hugging Face's weight files: u64 (little-endian) N, N bytes of a JSON object, the data. Each
// member but "__metadata__" (an object of strings) describes a tensor:
//   "name": {"dtype": "F16", "shape": [out, in], "data_offsets": [begin, end]}
// with begin and end counted from the first byte after the header, the shape outermost first
// (GGUF's ne[] the other way round), the data row-major and little-endian. The file is hostile:
// the header's length (at most 100 MB, as the format's own reader allows), every dtype, shape
// and offset pair (its bytes must be the shape's; inside the data; no two tensors overlapping)
// are checked before anything points into the data.

struct llm__st_tensor {
    char *name;                 // NUL-terminated copy
    uint32_t type;              // a ggml type id (F32, F16, BF16, I8/I16/I32/I64, F64), or LLM__ST_U8 / LLM__ST_BOOL
    int n_dims;                 // 0..8
    int64_t shape[8];           // outermost first, as in the file
    const uint8_t *data;        // in the mapping
    size_t size;                // bytes
};

#define LLM__ST_U8 0x10000u     // safetensors dtypes with no ggml type
#define LLM__ST_BOOL 0x10001u
#define LLM__ST_MAX_HEADER ((uint64_t)100000000)

struct llm__safetensors {
    void *map;
    size_t size;
    bool owns_map, owns_buf;
    int64_t n;                  // tensors
    struct llm__st_tensor *t;   // (n), in header order
    struct llm__gguf_index ix;  // their names (duplicates refused, lookups in O(1))
    char *path_name;            // a shard's file name (Hugging Face directories), or NULL
};

static void llm__st_close(struct llm__safetensors *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->t);
    free(s->ix.slots);
    free(s->path_name);
    if (s->owns_map && s->map) munmap(s->map, s->size);
    if (s->owns_buf) free(s->map);
    memset(s, 0, sizeof(*s));
}

// The tensor `name` of s, or NULL.
static const struct llm__st_tensor *llm__st_find(const struct llm__safetensors *s, const char *name) {
    int64_t i = llm__gguf_index_find(&s->ix, s->t, sizeof(*s->t), name, NULL);
    return i < 0 ? NULL : &s->t[i];
}

// A safetensors dtype: the type id and the element size in bytes (0: unknown).
static size_t llm__st_dtype(const struct llm__json *j, int32_t i, uint32_t *type) {
    static const struct { const char *name; uint32_t type; size_t size; } dt[] = {
        {"F32", 0, 4}, {"F16", 1, 2}, {"BF16", 30, 2}, {"F64", 28, 8}, {"I8", 24, 1}, {"I16", 25, 2},
        {"I32", 26, 4}, {"I64", 27, 8}, {"U8", LLM__ST_U8, 1}, {"BOOL", LLM__ST_BOOL, 1},
    };
    for (size_t k = 0; k < LLM__ARRAY_LEN(dt); k++)
        if (llm__json_eq(j, i, dt[k].name)) { *type = dt[k].type; return dt[k].size; }
    return 0;
}

struct llm__st_span { uint64_t begin, end; int64_t i; };
static int llm__st_span_cmp(const void *a, const void *b) {
    const struct llm__st_span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

// Parses s->map[0 .. s->size). On failure the caller closes s.
static enum llm_status llm__st_parse(struct llm__safetensors *s, struct llm__err *e) {
    const uint8_t *b = s->map;
    uint64_t hlen;
    if (s->size < 8) return llm__fail(e, LLM_ERR_FORMAT, "safetensors: %zu bytes, too short for the header length", s->size);
    memcpy(&hlen, b, 8);
    if (hlen > LLM__ST_MAX_HEADER)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: header length %llu is more than the format allows (100000000)",
                         (unsigned long long)hlen);
    if (hlen > s->size - 8)
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: header length %llu runs past the end of the file (%zu bytes)",
                         (unsigned long long)hlen, s->size);
    const uint8_t *data = b + 8 + hlen;
    const uint64_t dsize = s->size - 8 - hlen;
    struct llm__json j;
    enum llm_status st = llm__json_parse(&j, (const char *)b + 8, (size_t)hlen, "safetensors header", e);
    if (st) return st;
    if (j.nodes[0].type != LLM__JSON_OBJ) {
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_FORMAT, "safetensors: the header is not a JSON object");
    }
    s->t = calloc((size_t)j.nodes[0].n + 1, sizeof(*s->t));
    struct llm__st_span *spans = calloc((size_t)j.nodes[0].n + 1, sizeof(*spans));
    if (!s->t || !spans || !llm__gguf_index_init(&s->ix, j.nodes[0].n)) {
        free(spans);
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_NOMEM, "safetensors: out of memory for %d tensors", (int)j.nodes[0].n);
    }
    char pr[88];
    int64_t n_spans = 0;
    st = LLM_OK;
    for (int32_t m = 0, k = 1; m < j.nodes[0].n && st == LLM_OK; m++, k = j.nodes[k + 1].next) {
        const int32_t v = k + 1;
        size_t nlen;
        char *name = llm__json_strdup(&j, k, &nlen);
        if (!name) { st = llm__fail(e, LLM_ERR_NOMEM, "safetensors: out of memory"); break; }
        llm__gguf_printable(pr, name, nlen);
        if (strcmp(name, "__metadata__") == 0) {
            free(name);
            bool ok = j.nodes[v].type == LLM__JSON_OBJ;
            for (int32_t q = 0, x = v + 1; ok && q < j.nodes[v].n; q++, x = j.nodes[x + 1].next) ok = j.nodes[x + 1].type == LLM__JSON_STR;
            if (!ok) st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: __metadata__ is not an object of strings");
            continue;
        }
        struct llm__st_tensor *t = &s->t[s->n];
        t->name = name;
        s->n++;
        if (nlen == 0 || strlen(name) != nlen) { st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: a tensor name is empty or holds a NUL byte"); break; }
        uint64_t slot;
        if (llm__gguf_index_find(&s->ix, s->t, sizeof(*s->t), name, &slot) >= 0) {
            st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s' is named twice", pr);
            break;
        }
        s->ix.slots[slot] = s->n - 1;
        const int32_t dt = llm__json_get(&j, v, "dtype"), sh = llm__json_get(&j, v, "shape"), of = llm__json_get(&j, v, "data_offsets");
        if (dt < 0 || sh < 0 || of < 0) { st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s' lacks dtype, shape or data_offsets", pr); break; }
        size_t esize = llm__st_dtype(&j, dt, &t->type);
        if (!esize) {
            char dname[88] = "?";
            if (j.nodes[dt].type == LLM__JSON_STR) llm__gguf_printable(dname, j.text + j.nodes[dt].start, LLM__MIN(j.nodes[dt].len, 40u));
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "safetensors: tensor '%s' has dtype %s, which this reader does not know (F32, F16, BF16, F64, I8-I64, U8, BOOL)",
                           pr, dname);
            break;
        }
        if (j.nodes[sh].type != LLM__JSON_ARR || j.nodes[sh].n > 8) { st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': shape is not an array of at most 8 sizes", pr); break; }
        t->n_dims = j.nodes[sh].n;
        uint64_t nel = 1;
        for (int d = 0; d < t->n_dims && st == LLM_OK; d++) {
            int64_t x;
            if (!llm__json_int(&j, llm__json_at(&j, sh, d), 0, INT64_MAX, &x))
                st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': dimension %d is not a non-negative integer", pr, d);
            else if (x > 0 && nel > UINT64_MAX / 8 / (uint64_t)x)
                st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': its element count overflows", pr);
            else { t->shape[d] = x; nel *= (uint64_t)x; }
        }
        if (st) break;
        int64_t ob, oe;
        if (j.nodes[of].type != LLM__JSON_ARR || j.nodes[of].n != 2 || !llm__json_int(&j, llm__json_at(&j, of, 0), 0, INT64_MAX, &ob) ||
            !llm__json_int(&j, llm__json_at(&j, of, 1), 0, INT64_MAX, &oe) || ob > oe) {
            st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': data_offsets is not [begin, end] with begin <= end", pr);
            break;
        }
        if ((uint64_t)oe > dsize) {
            st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': data [%lld, %lld) runs past the data (%llu bytes): truncated file?",
                           pr, (long long)ob, (long long)oe, (unsigned long long)dsize);
            break;
        }
        if ((uint64_t)(oe - ob) != nel * esize) {
            st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: tensor '%s': %lld bytes of data for %llu elements of %zu bytes", pr,
                           (long long)(oe - ob), (unsigned long long)nel, esize);
            break;
        }
        t->data = data + ob;
        t->size = (size_t)(oe - ob);
        if (oe > ob) spans[n_spans++] = (struct llm__st_span){(uint64_t)ob, (uint64_t)oe, s->n - 1};
    }
    llm__json_free(&j);
    if (st == LLM_OK && n_spans > 1) {   // no two tensors share a byte
        qsort(spans, (size_t)n_spans, sizeof(*spans), llm__st_span_cmp);
        for (int64_t q = 1; q < n_spans && st == LLM_OK; q++)
            if (spans[q].begin < spans[q - 1].end) {
                char pr2[88];
                llm__gguf_printable(pr, s->t[spans[q - 1].i].name, strlen(s->t[spans[q - 1].i].name));
                llm__gguf_printable(pr2, s->t[spans[q].i].name, strlen(s->t[spans[q].i].name));
                st = llm__fail(e, LLM_ERR_FORMAT, "safetensors: the data of tensors '%s' and '%s' overlap", pr, pr2);
            }
    }
    free(spans);
    return st;
}

// Opens a safetensors file: mapped (or read into memory: read_all) and parsed. Messages end with
// the path.
static enum llm_status llm__st_open(struct llm__safetensors *s, const char *path, bool read_all, struct llm__err *e) {
    memset(s, 0, sizeof(*s));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return llm__fail(e, LLM_ERR_IO, "safetensors: cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0 || (uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__fail(e, LLM_ERR_IO, "safetensors: '%s' is not a regular, non-empty file", path);
    }
    enum llm_status st = LLM_OK;
    if (read_all) {
        void *buf = llm__alloc((size_t)sb.st_size);
        if (!buf) st = llm__fail(e, LLM_ERR_NOMEM, "safetensors: no memory to read '%s'", path);
        else if ((st = llm__read_all(fd, buf, (size_t)sb.st_size, path, e)) != LLM_OK) free(buf);
        else { s->map = buf; s->owns_buf = true; }
    } else {
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) st = llm__fail(e, LLM_ERR_IO, "safetensors: cannot map '%s': %s", path, strerror(errno));
        else { s->map = map; s->owns_map = true; }
    }
    close(fd);
    if (st) return st;
    s->size = (size_t)sb.st_size;
    if ((st = llm__st_parse(s, e)) != LLM_OK) {
        llm__st_close(s);
        if (e) {
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof(e->msg) - n, " (in '%s')", path);
        }
    }
    return st;
}

// === Hugging Face model directories ===
// A directory of config.json and model.safetensors (or shards listed by
// model.safetensors.index.json) becomes the same struct llm__gguf a GGUF file gives: the
// configuration as the GGUF keys llama.cpp's converter writes (serialized into a small GGUF
// header in memory and parsed by the GGUF reader, so that every consumer and check is the same),
// the tensors under their GGUF names, pointing into the mapped safetensors files. Where the
// converter changes data, so does this: llama-style q and k rows are permuted from Hugging
// Face's rotate-half layout to GGUF's interleaved pairs; tensors not aligned to 32 bytes are
// copied (the kernels read aligned rows). Architectures: LlamaForCausalLM, MistralForCausalLM
// (llama), Qwen2ForCausalLM, Qwen3ForCausalLM.

// A GGUF header under construction (keys and values only).
struct llm__gbuf { struct llm__outbuf o; int64_t n_kv; };

static void llm__gbuf_put(struct llm__gbuf *b, const void *p, size_t n) { llm__outbuf_put(&b->o, p, n); }
// The header's first 24 bytes (magic, version 3, no tensors, the keys written): put 24 bytes
// first, call this last.
static void llm__gbuf_seal(struct llm__gbuf *b) {
    if (b->o.fail || b->o.n < 24) return;
    const uint32_t version = 3;
    const uint64_t nt = 0, nkv = (uint64_t)b->n_kv;
    memcpy(b->o.p, "GGUF", 4);
    memcpy(b->o.p + 4, &version, 4);
    memcpy(b->o.p + 8, &nt, 8);
    memcpy(b->o.p + 16, &nkv, 8);
}
static void llm__gbuf_str(struct llm__gbuf *b, const char *s, size_t n) {
    uint64_t len = n;
    llm__gbuf_put(b, &len, 8);
    llm__gbuf_put(b, s, n);
}
static void llm__gbuf_key(struct llm__gbuf *b, const char *arch, const char *key, uint32_t type) {
    char k[160];
    int n = arch ? snprintf(k, sizeof(k), "%s.%s", arch, key) : snprintf(k, sizeof(k), "%s", key);
    llm__gbuf_str(b, k, (size_t)n);
    llm__gbuf_put(b, &type, 4);
    b->n_kv++;
}
static void llm__gbuf_u32(struct llm__gbuf *b, const char *arch, const char *key, uint32_t v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_U32);
    llm__gbuf_put(b, &v, 4);
}
static void llm__gbuf_f32(struct llm__gbuf *b, const char *arch, const char *key, float v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_F32);
    llm__gbuf_put(b, &v, 4);
}
static void llm__gbuf_s(struct llm__gbuf *b, const char *arch, const char *key, const char *v) {
    llm__gbuf_key(b, arch, key, LLM__GGUF_STR);
    llm__gbuf_str(b, v, strlen(v));
}

// What a directory owns besides the GGUF header: its safetensors files and the tensors copied
// (permuted or aligned).
struct llm__hf_owned {
    struct llm__safetensors *files;   // (n_files)
    int n_files;
    void **copies;                    // (n_copies), llm__alloc'd
    int64_t n_copies;
    // how the tensors were mapped (for llm_quantize's checkpoints): q/k rows permuted (of
    // hp[0] / hp[1] heads of hp[2] rows), Gemma's norms stored as 1 + w, AWQ/GPTQ weights
    bool permute, gemma, quantized;
    int64_t hp[3];
    // every tensor of every file by name (llm__hf_index): lookups in O(1) however many files
    struct llm__hf_name { const char *name; const struct llm__st_tensor *t; } *names;
    struct llm__gguf_index names_ix;
};

static void llm__hf_owned_free(void *p) {
    struct llm__hf_owned *o = p;
    if (!o) return;
    for (int i = 0; i < o->n_files; i++) llm__st_close(&o->files[i]);
    for (int64_t i = 0; i < o->n_copies; i++) free(o->copies[i]);
    free(o->files);
    free(o->copies);
    free(o->names);
    free(o->names_ix.slots);
    free(o);
}

// Indexes the tensors of all of o's files by name (of a name in several files, the first file's).
static enum llm_status llm__hf_index(struct llm__hf_owned *o, struct llm__err *e) {
    int64_t n = 0, k = 0;
    for (int f = 0; f < o->n_files; f++) n += o->files[f].n;
    if (!(o->names = malloc((size_t)(n + 1) * sizeof(*o->names))) || !llm__gguf_index_init(&o->names_ix, n))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory for the names of %lld tensors", (long long)n);
    for (int f = 0; f < o->n_files; f++)
        for (int64_t i = 0; i < o->files[f].n; i++) {
            uint64_t slot;
            const struct llm__st_tensor *t = &o->files[f].t[i];
            if (llm__gguf_index_find(&o->names_ix, o->names, sizeof(*o->names), t->name, &slot) >= 0) continue;
            o->names[k] = (struct llm__hf_name){t->name, t};
            o->names_ix.slots[slot] = k++;
        }
    return LLM_OK;
}

// A config.json integer in [lo, hi] into *out (left as it is when absent and not required), or an
// error naming the key.
static enum llm_status llm__hf_cfg_int(const struct llm__json *j, const char *key, int64_t lo, int64_t hi, bool required,
                                       int64_t *out, struct llm__err *e) {
    int32_t v = llm__json_get(j, 0, key);
    if (v < 0 || j->nodes[v].type == LLM__JSON_NULL) {
        if (required) return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is missing", key);
        return LLM_OK;
    }
    if (!llm__json_int(j, v, lo, hi, out))
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is not an integer in [%lld, %lld]", key, (long long)lo, (long long)hi);
    return LLM_OK;
}

static enum llm_status llm__hf_cfg_num(const struct llm__json *j, const char *key, double *out, struct llm__err *e) {
    int32_t v = llm__json_get(j, 0, key);
    if (v < 0 || j->nodes[v].type == LLM__JSON_NULL) return LLM_OK;
    if (!llm__json_num(j, v, out) || !isfinite(*out) || fabs(*out) > FLT_MAX)
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: '%s' is not a finite number", key);
    return LLM_OK;
}

// --- AWQ and GPTQ checkpoints ---
// config.json's quantization_config says how the linear layers' weights are stored; each such
// weight W (out x in) is then the tensors X.qweight, X.qzeros, X.scales (and for GPTQ X.g_idx)
// in place of X.weight, with w[o][i] = s[g][o] * (q[i][o] - z[g][o]) for input i of group g:
//   AWQ (AutoAWQ's GEMM format, 4 bits): qweight int32 [in, out/8] and qzeros int32
//     [in/group, out/8], both with 8 nibbles a word along the output: nibble k (bits 4k..4k+3) of
//     word c holds output 8c + {0, 2, 4, 6, 1, 3, 5, 7}[k]; scales fp16 [in/group, out].
//   GPTQ (AutoGPTQ / GPTQModel, 4 or 8 bits): qweight int32 [in * bits / 32, out] packed along the
//     input (input 8r + k of 4-bit row r in nibble k), qzeros int32 [in/group, out * bits / 32]
//     packed along the output, stored less one in the original ("v1", checkpoint_format "gptq")
//     layout and as they are in "gptq_v2"; scales [in/group, out]; g_idx int32 [in], each input's
//     group: with act-order (desc_act) the groups are not runs of inputs.
// A group of -1 is the whole row. Every such weight becomes a G4 / G8 tensor (struct llm__block_gq)
// of 32, 64 or 128 inputs a block, the largest that divides the group (a block repeats its group's
// scale and zero); act-order inputs are sorted by group, and the tensor's perm tells the products
// to gather their activations the same way.

enum { LLM__HF_AWQ = 1, LLM__HF_GPTQ = 2 };
struct llm__hf_quant {
    int method;            // 0: none, LLM__HF_AWQ, LLM__HF_GPTQ
    int bits;              // 4 (AWQ, GPTQ) or 8 (GPTQ)
    int64_t group;         // inputs a group; -1: the whole row
    bool zeros_less_one;   // GPTQ v1: a stored zero point is the zero point less one
};

// quantization_config (member q of config.json's object) into *out.
static enum llm_status llm__hf_quant_config(const struct llm__json *j, int32_t q, struct llm__hf_quant *out, struct llm__err *e) {
    memset(out, 0, sizeof(*out));
    if (q < 0 || j->nodes[q].type == LLM__JSON_NULL) return LLM_OK;
    if (j->nodes[q].type != LLM__JSON_OBJ) return llm__fail(e, LLM_ERR_FORMAT, "config.json: quantization_config is not an object");
    const int32_t m = llm__json_get(j, q, "quant_method");
    char pr[88] = "(none)";
    if (m >= 0 && j->nodes[m].type == LLM__JSON_STR) llm__gguf_printable(pr, j->text + j->nodes[m].start, j->nodes[m].len);
    out->method = m >= 0 && llm__json_eq(j, m, "awq") ? LLM__HF_AWQ : m >= 0 && llm__json_eq(j, m, "gptq") ? LLM__HF_GPTQ : 0;
    if (!out->method)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config's quant_method %s is not supported "
                         "(awq, gptq)", pr);
    const bool awq = out->method == LLM__HF_AWQ;
    int64_t bits = 0, group = 0;
    const int32_t bv = llm__json_get(j, q, "bits"), gv = llm__json_get(j, q, "group_size");
    if (bv < 0 || !llm__json_int(j, bv, 1, 64, &bits) || (bits != 4 && (awq || bits != 8))) {
        char pb[88] = "unknown";
        if (bv >= 0) llm__gguf_printable(pb, j->text + j->nodes[bv].start, j->nodes[bv].len);
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: %s weights of %s bits are not supported "
                         "(AWQ: 4; GPTQ: 4 or 8)", pr, pb);
    }
    if (gv < 0 || !llm__json_int(j, gv, -1, 1 << 20, &group) || group == 0 || (group > 0 && group % 32))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: group_size must be -1 or a multiple of 32");
    out->bits = (int)bits;
    out->group = group;
    // the layout: AWQ's "version" (GEMM only: GEMV and the others pack differently), GPTQ's
    // gptq (v1) or gptq_v2; GPTQModel writes "checkpoint_format" and "format" for both
    static const char *const keys[3] = {"version", "checkpoint_format", "format"};
    int32_t v = -1;
    for (int k = awq ? 0 : 1; k < 3 && (v < 0 || j->nodes[v].type == LLM__JSON_NULL); k++) v = llm__json_get(j, q, keys[k]);
    if (v >= 0 && j->nodes[v].type != LLM__JSON_NULL) {
        char name[16] = "";
        if (j->nodes[v].type == LLM__JSON_STR && (size_t)j->nodes[v].len < sizeof(name))
            for (uint32_t k = 0; k < (uint32_t)j->nodes[v].len; k++) name[k] = (char)tolower((unsigned char)j->text[j->nodes[v].start + k]);
        llm__gguf_printable(pr, j->text + j->nodes[v].start, j->nodes[v].len);
        if (awq ? strcmp(name, "gemm") != 0 : strcmp(name, "gptq") != 0 && strcmp(name, "gptq_v2") != 0)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: the %s layout \"%s\" is not supported (%s)",
                             awq ? "AWQ" : "GPTQ", pr, awq ? "gemm" : "gptq, gptq_v2");
        out->zeros_less_one = !awq && strcmp(name, "gptq") == 0;
    } else out->zeros_less_one = !awq;
    const int32_t zp = llm__json_get(j, q, "zero_point"), mf = llm__json_get(j, q, "is_marlin_format");
    if (awq && zp >= 0 && j->nodes[zp].type == LLM__JSON_FALSE)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: AWQ without zero points is not supported");
    if (mf >= 0 && j->nodes[mf].type == LLM__JSON_TRUE)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: quantization_config: GPTQ's Marlin layout is not supported");
    return LLM_OK;
}

// The GGUF keys of config.json (its text cfg[0..n)): *arch (a static name) and the header in b.
static enum llm_status llm__hf_config(const char *cfg, size_t n, struct llm__gbuf *b, const char **arch_out, bool *permute_qk,
                                      int64_t hp[5], struct llm__hf_quant *quant, struct llm__err *e) {
    struct llm__json j;
    enum llm_status st = llm__json_parse(&j, cfg, n, "config.json", e);
    if (st) return st;
    if (j.nodes[0].type != LLM__JSON_OBJ) {
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: not a JSON object");
    }
    static const struct { const char *hf, *arch; bool permute; } archs[] = {
        {"LlamaForCausalLM", "llama", true}, {"MistralForCausalLM", "llama", true},
        {"Qwen2ForCausalLM", "qwen2", false}, {"Qwen3ForCausalLM", "qwen3", false},
        {"Phi3ForCausalLM", "phi3", false}, {"Gemma2ForCausalLM", "gemma2", false},
        {"Gemma3ForCausalLM", "gemma3", false},
    };
    const int32_t av = llm__json_at(&j, llm__json_get(&j, 0, "architectures"), 0);
    const char *arch = NULL;
    bool permute = false;
    for (size_t k = 0; av >= 0 && k < LLM__ARRAY_LEN(archs); k++)
        if (llm__json_eq(&j, av, archs[k].hf)) { arch = archs[k].arch; permute = archs[k].permute; }
    if (!arch) {
        char pr[88] = "(none)";
        if (av >= 0 && j.nodes[av].type == LLM__JSON_STR) llm__gguf_printable(pr, j.text + j.nodes[av].start, j.nodes[av].len);
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: architecture %s is not supported in Hugging Face format "
                         "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
                         "Gemma2ForCausalLM, Gemma3ForCausalLM; others as GGUF files)", pr);
    }
    if ((st = llm__hf_quant_config(&j, llm__json_get(&j, 0, "quantization_config"), quant, e))) {
        llm__json_free(&j);
        return st;
    }
    const bool gemma = !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3");
    int64_t embd = 0, layers = 0, ff = 0, heads = 0, kv_heads = -1, head_dim = -1, ctx = 2048, vocab = 0;
    int64_t window = -1, pattern = -1, qpas = -1;
    double eps = 1e-6, theta = 10000.0, factor = 1.0, theta_local = -1.0, attn_cap = -1.0, final_cap = -1.0, rot_pct = 1.0;
    if ((st = llm__hf_cfg_int(&j, "hidden_size", 1, 65536, true, &embd, e)) ||
        (st = llm__hf_cfg_int(&j, "num_hidden_layers", 1, 1024, true, &layers, e)) ||
        (st = llm__hf_cfg_int(&j, "intermediate_size", 1, 1 << 20, true, &ff, e)) ||
        (st = llm__hf_cfg_int(&j, "num_attention_heads", 1, 1024, true, &heads, e)) ||
        (st = llm__hf_cfg_int(&j, "num_key_value_heads", 1, 1024, false, &kv_heads, e)) ||
        (st = llm__hf_cfg_int(&j, "head_dim", 2, 1024, false, &head_dim, e)) ||
        (st = llm__hf_cfg_int(&j, "max_position_embeddings", 1, 1 << 24, false, &ctx, e)) ||
        (st = llm__hf_cfg_int(&j, "vocab_size", 1, 1 << 24, true, &vocab, e)) ||
        (st = llm__hf_cfg_num(&j, "rms_norm_eps", &eps, e)) || (st = llm__hf_cfg_num(&j, "rope_theta", &theta, e)) ||
        (st = llm__hf_cfg_int(&j, "sliding_window", 0, 1 << 24, false, &window, e)) ||
        (st = llm__hf_cfg_int(&j, "sliding_window_pattern", 0, 1024, false, &pattern, e)) ||
        (st = llm__hf_cfg_int(&j, "query_pre_attn_scalar", 1, 1 << 20, false, &qpas, e)) ||
        (st = llm__hf_cfg_num(&j, "rope_local_base_freq", &theta_local, e)) ||
        (st = llm__hf_cfg_num(&j, "attn_logit_softcapping", &attn_cap, e)) ||
        (st = llm__hf_cfg_num(&j, "final_logit_softcapping", &final_cap, e)) ||
        (st = llm__hf_cfg_num(&j, "partial_rotary_factor", &rot_pct, e))) {
        llm__json_free(&j);
        return st;
    }
    // transformers 5 writes RoPE as rope_parameters (per layer type for Gemma 3) instead of
    // rope_theta and rope_scaling
    const int32_t rp = llm__json_get(&j, 0, "rope_parameters");
    int32_t rope = llm__json_get(&j, 0, "rope_scaling");   // the scaling: rope_scaling, else rope_parameters
    if (rp >= 0 && j.nodes[rp].type == LLM__JSON_OBJ) {
        const int32_t full = llm__json_get(&j, rp, "full_attention"), slide = llm__json_get(&j, rp, "sliding_attention");
        const int32_t main = full >= 0 ? full : rp;
        if (llm__json_get(&j, 0, "rope_theta") < 0 && llm__json_get(&j, main, "rope_theta") >= 0 &&
            !llm__json_num(&j, llm__json_get(&j, main, "rope_theta"), &theta))
            theta = -1.0;
        if (slide >= 0 && theta_local < 0.0 && llm__json_get(&j, slide, "rope_theta") >= 0 &&
            !llm__json_num(&j, llm__json_get(&j, slide, "rope_theta"), &theta_local))
            theta = -1.0;
        if (rope < 0 || j.nodes[rope].type == LLM__JSON_NULL) rope = main;
    } else if (!strcmp(arch, "gemma3") && llm__json_get(&j, 0, "rope_theta") < 0) {
        theta = 1000000.0;   // Gemma 3's default (transformers, llama.cpp's converter)
    }
    if (!(theta > 1.0 && theta < 1e30)) {
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_FORMAT, "config.json: the RoPE base (rope_theta) must be a number > 1");
    }
    // Gemma: null soft-capping means none (0 for the engine, whose Gemma 2 default is 50 and 30)
    if (gemma && llm__json_get(&j, 0, "attn_logit_softcapping") >= 0 && attn_cap < 0.0) attn_cap = 0.0;
    if (gemma && llm__json_get(&j, 0, "final_logit_softcapping") >= 0 && final_cap < 0.0) final_cap = 0.0;
    if (!strcmp(arch, "gemma3") && attn_cap > 0.0) {
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: attention soft-capping with Gemma 3 is not supported");
    }
    if (kv_heads < 0) kv_heads = heads;
    if (head_dim < 0 && embd % heads == 0) head_dim = embd / heads;
    // the engine scales attention by 1/sqrt(head_dim), Gemma 2 27B and Gemma 3 27B by
    // 1/sqrt(n_embd/n_head), as llama.cpp does: a config asking otherwise is refused
    const int64_t want_qpas = ((!strcmp(arch, "gemma2") && layers == 46) || (!strcmp(arch, "gemma3") && layers == 62)) ? embd / heads : head_dim;
    const char *bad = head_dim < 0                      ? "hidden_size is not a multiple of num_attention_heads (and no head_dim)"
                      : permute && head_dim % 2         ? "the head dimension is odd"
                      : gemma && qpas > 0 && qpas != want_qpas ? "query_pre_attn_scalar is not the one llama.cpp assumes for this model"
                      : !(rot_pct > 0.0 && rot_pct <= 1.0) ? "partial_rotary_factor is not in (0, 1]"
                                                          : NULL;
    if (bad) {
        llm__json_free(&j);
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: %s", bad);
    }
    // Gemma: which layers are local (layer_types, as sliding_window_pattern's array form)
    const int32_t lt = llm__json_get(&j, 0, "layer_types");
    uint8_t *local = NULL;
    if (gemma && lt >= 0 && j.nodes[lt].type == LLM__JSON_ARR) {
        if (j.nodes[lt].n != layers || !(local = calloc((size_t)layers, 1))) {
            llm__json_free(&j);
            free(local);
            return llm__fail(e, LLM_ERR_FORMAT, "config.json: layer_types does not have num_hidden_layers entries");
        }
        for (int32_t i = 0, k = lt + 1; i < j.nodes[lt].n; i++, k = j.nodes[k].next) {
            local[i] = llm__json_eq(&j, k, "sliding_attention");
            if (!local[i] && !llm__json_eq(&j, k, "full_attention")) {
                free(local);
                llm__json_free(&j);
                return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: layer_types other than sliding_attention and full_attention");
            }
        }
    }
    const int32_t rs = rope;
    int32_t ty = llm__json_get(&j, rs, "rope_type");
    if (ty < 0) ty = llm__json_get(&j, rs, "type");
    if (rs >= 0 && j.nodes[rs].type != LLM__JSON_NULL && !(ty >= 0 && llm__json_eq(&j, ty, "default"))) {
        if (ty < 0 || !llm__json_eq(&j, ty, "linear") || !llm__json_num(&j, llm__json_get(&j, rs, "factor"), &factor) || !(factor >= 1.0)) {
            free(local);
            llm__json_free(&j);
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "config.json: rope_scaling other than linear with a factor >= 1 is not supported");
        }
    }
    llm__json_free(&j);
    llm__gbuf_s(b, NULL, "general.architecture", arch);
    llm__gbuf_u32(b, arch, "embedding_length", (uint32_t)embd);
    llm__gbuf_u32(b, arch, "block_count", (uint32_t)layers);
    llm__gbuf_u32(b, arch, "feed_forward_length", (uint32_t)ff);
    llm__gbuf_u32(b, arch, "attention.head_count", (uint32_t)heads);
    llm__gbuf_u32(b, arch, "attention.head_count_kv", (uint32_t)kv_heads);
    llm__gbuf_u32(b, arch, "attention.key_length", (uint32_t)head_dim);
    llm__gbuf_u32(b, arch, "attention.value_length", (uint32_t)head_dim);
    llm__gbuf_u32(b, arch, "context_length", (uint32_t)ctx);
    llm__gbuf_u32(b, arch, "vocab_size", (uint32_t)vocab);
    llm__gbuf_f32(b, arch, "attention.layer_norm_rms_epsilon", (float)eps);
    llm__gbuf_f32(b, arch, "rope.freq_base", (float)theta);
    if (factor > 1.0) {
        llm__gbuf_s(b, arch, "rope.scaling.type", "linear");
        llm__gbuf_f32(b, arch, "rope.scaling.factor", (float)factor);
    }
    if (rot_pct < 1.0) llm__gbuf_u32(b, arch, "rope.dimension_count", (uint32_t)((double)head_dim * rot_pct));
    if (gemma) {
        if (window >= 0) llm__gbuf_u32(b, arch, "attention.sliding_window", (uint32_t)window);
        if (local) {
            llm__gbuf_key(b, arch, "attention.sliding_window_pattern", LLM__GGUF_ARR);
            const uint32_t bt = LLM__GGUF_BOOL;
            const uint64_t n = (uint64_t)layers;
            llm__gbuf_put(b, &bt, 4);
            llm__gbuf_put(b, &n, 8);
            llm__gbuf_put(b, local, (size_t)layers);
        } else if (pattern >= 0) {
            llm__gbuf_u32(b, arch, "attention.sliding_window_pattern", (uint32_t)pattern);
        }
        if (theta_local > 0.0) llm__gbuf_f32(b, arch, "rope.freq_base_swa", (float)theta_local);
        if (attn_cap >= 0.0) llm__gbuf_f32(b, arch, "attn_logit_softcapping", (float)attn_cap);
        if (final_cap >= 0.0) llm__gbuf_f32(b, arch, "final_logit_softcapping", (float)final_cap);
    }
    free(local);
    *arch_out = arch;
    *permute_qk = permute;
    hp[0] = heads;
    hp[1] = kv_heads;
    hp[2] = head_dim;
    hp[3] = layers;
    hp[4] = vocab;
    return b->o.fail ? llm__fail(e, LLM_ERR_NOMEM, "out of memory") : LLM_OK;
}

// A Hugging Face tensor name as GGUF's (out), or false for a name this loader does not know.
// *qk: 1 for a q projection, 2 for a k projection (the rows llama's permutation moves).
static bool llm__hf_name(const char *hf, bool gemma, char *out, size_t size, int *qk) {
    static const struct { const char *hf, *gguf; int qk; } glob[] = {
        {"model.embed_tokens.weight", "token_embd.weight", 0}, {"model.norm.weight", "output_norm.weight", 0},
        {"lm_head.weight", "output.weight", 0},
    };
    static const struct { const char *hf, *gguf; int qk; } per_layer[] = {
        {"input_layernorm.weight", "attn_norm.weight", 0}, {"post_attention_layernorm.weight", "ffn_norm.weight", 0},
        {"self_attn.q_proj.weight", "attn_q.weight", 1}, {"self_attn.k_proj.weight", "attn_k.weight", 2},
        {"self_attn.v_proj.weight", "attn_v.weight", 0}, {"self_attn.o_proj.weight", "attn_output.weight", 0},
        {"self_attn.q_proj.bias", "attn_q.bias", 1}, {"self_attn.k_proj.bias", "attn_k.bias", 2},
        {"self_attn.v_proj.bias", "attn_v.bias", 0}, {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", 0}, {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
        {"mlp.up_proj.weight", "ffn_up.weight", 0}, {"mlp.down_proj.weight", "ffn_down.weight", 0},
        {"self_attn.qkv_proj.weight", "attn_qkv.weight", 0}, {"mlp.gate_up_proj.weight", "ffn_up.weight", 0},   // phi3
    };
    static const struct { const char *hf, *gguf; int qk; } gemma_norms[] = {   // gemma's four norms a layer
        {"post_attention_layernorm.weight", "post_attention_norm.weight", 0}, {"pre_feedforward_layernorm.weight", "ffn_norm.weight", 0},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", 0},
    };
    *qk = 0;
    for (size_t k = 0; k < LLM__ARRAY_LEN(glob); k++)
        if (strcmp(hf, glob[k].hf) == 0) return snprintf(out, size, "%s", glob[k].gguf) < (int)size;
    const char *pre = "model.layers.";
    if (strncmp(hf, pre, strlen(pre)) != 0) return false;
    const char *p = hf + strlen(pre);
    long l = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 5; p++, digits++) l = l * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && hf[strlen(pre)] == '0')) return false;
    p++;
    for (size_t k = 0; gemma && k < LLM__ARRAY_LEN(gemma_norms); k++)
        if (strcmp(p, gemma_norms[k].hf) == 0) return snprintf(out, size, "blk.%ld.%s", l, gemma_norms[k].gguf) < (int)size;
    for (size_t k = 0; k < LLM__ARRAY_LEN(per_layer); k++)
        if (strcmp(p, per_layer[k].hf) == 0) {
            *qk = per_layer[k].qk;
            return snprintf(out, size, "blk.%ld.%s", l, per_layer[k].gguf) < (int)size;
        }
    return false;
}

// Copies src (rows of `row` bytes, n_head heads of head_dim rows) permuted as llama.cpp's
// converter does for llama-style q and k: within each head, row i of the first half and row i
// of the second half become rows 2i and 2i + 1.
static void llm__hf_permute_rows(uint8_t *dst, const uint8_t *src, size_t row, int64_t n_head, int64_t head_dim) {
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++)
                memcpy(dst + (size_t)(h * head_dim + 2 * i + j) * row, src + (size_t)(h * head_dim + j * half + i) * row, row);
}

static void llm__map_release(const void *p, size_t n);

// The tensor `name` in any file of the directory (the first file that has it), or NULL.
static const struct llm__st_tensor *llm__hf_find(const struct llm__hf_owned *o, const char *name) {
    int64_t i = llm__gguf_index_find(&o->names_ix, o->names, sizeof(*o->names), name, NULL);
    return i < 0 ? NULL : o->names[i].t;
}

// Element (r, c) of a 2-D int32 tensor of `cols` columns (little-endian, maybe unaligned).
static inline uint32_t llm__hf_u32(const struct llm__st_tensor *t, int64_t r, int64_t c, int64_t cols) {
    uint32_t v;
    memcpy(&v, t->data + 4 * ((size_t)r * (size_t)cols + (size_t)c), 4);
    return v;
}

// The AWQ / GPTQ weight `base` (base.qweight qw, base.qzeros, base.scales, base.g_idx) as a G4 /
// G8 tensor into t (type, shape, data: a copy kept in o; perm: act-order's, also in o).
static enum llm_status llm__hf_gq_tensor(const struct llm__hf_quant *qc, struct llm__hf_owned *o, const char *base,
                                         const struct llm__st_tensor *qw, struct llm__gguf_tensor *t, struct llm__err *e) {
    char name[LLM__GGUF_MAX_NAME + 16], pr[88];
    llm__gguf_printable(pr, base, strlen(base));
    const struct llm__st_tensor *part[3];
    static const char *const sfx[3] = {"qzeros", "scales", "g_idx"};
    for (int k = 0; k < 3; k++) {
        part[k] = snprintf(name, sizeof(name), "%s.%s", base, sfx[k]) < (int)sizeof(name) ? llm__hf_find(o, name) : NULL;
        if (!part[k] && k < 2) return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s' has a qweight but no %s", pr, sfx[k]);
    }
    const struct llm__st_tensor *qz = part[0], *sc = part[1], *gi = qc->method == LLM__HF_GPTQ ? part[2] : NULL;
    if (qw->type != 26 || qz->type != 26 || (gi && gi->type != 26) || (sc->type != 1 && sc->type != 30 && sc->type != 0))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': qweight, qzeros and g_idx must be I32 and scales F16, BF16 or F32", pr);
    if (qw->n_dims != 2 || qz->n_dims != 2 || sc->n_dims != 2 || (gi && gi->n_dims != 1))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': qweight, qzeros and scales must be matrices, g_idx a vector", pr);
    const bool awq = qc->method == LLM__HF_AWQ;
    const int bits = qc->bits, pack = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const int64_t in = awq ? qw->shape[0] : qw->shape[0] * pack, out = awq ? qw->shape[1] * pack : qw->shape[1];
    // groups of G inputs, the last one shorter when G does not divide the inputs (as GPTQ makes them)
    const int64_t G = qc->group > 0 ? qc->group : in, ng = G ? (in + G - 1) / G : 0;
    if (in == 0 || out == 0 || in % 32 || G % 32 || out % pack || qz->shape[0] != ng || qz->shape[1] != out / pack ||
        sc->shape[0] != ng || sc->shape[1] != out || (gi && gi->shape[0] != in))
        return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': shapes qweight [%lld, %lld], qzeros [%lld, %lld], scales [%lld, %lld] "
                         "do not fit a %lld x %lld weight of %d bits in groups of %lld (its inputs a multiple of 32)", pr,
                         (long long)qw->shape[0], (long long)qw->shape[1], (long long)qz->shape[0], (long long)qz->shape[1],
                         (long long)sc->shape[0], (long long)sc->shape[1], (long long)out, (long long)in, bits, (long long)G);
    const int64_t tail = in % G ? in % G : G;   // (blocks divide every group)
    const int type = (bits == 4 ? LLM__TYPE_G4_32 : LLM__TYPE_G8_32) + (G % 128 == 0 && tail % 128 == 0 ? 2 : G % 64 == 0 && tail % 64 == 0);
    const int64_t g = llm__gq_group(type);
    // act-order: inputs sorted by group (stable), each group exactly G of them (the last: tail)
    int32_t *perm = NULL;
    bool identity = true;
    for (int64_t i = 0; gi && i < in && identity; i++) identity = (int64_t)llm__hf_u32(gi, 0, i, in) == i / G;
    if (!identity) {
        int64_t *fill = calloc((size_t)ng, sizeof(int64_t));
        perm = llm__alloc((size_t)in * sizeof(int32_t));
        if (!fill || !perm) { free(fill); free(perm); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
        o->copies[o->n_copies++] = perm;
        bool ok = true;
        for (int64_t i = 0; i < in && ok; i++) {
            const uint32_t gr = llm__hf_u32(gi, 0, i, in);
            if ((ok = gr < (uint64_t)ng && fill[gr] < ((int64_t)gr == ng - 1 ? tail : G))) perm[(int64_t)gr * G + fill[gr]++] = (int32_t)i;
        }
        free(fill);   // (ng groups, in inputs, none over its size: all full)
        if (!ok) return llm__fail(e, LLM_ERR_FORMAT, "hf: '%s': g_idx does not put %lld inputs in each of %lld groups", pr,
                                  (long long)G, (long long)ng);
    }
    const size_t row = llm__row_bytes(type, in), bb = llm__type_table[type].block_bytes;
    uint8_t *dst = llm__alloc(row * (size_t)out);
    if (!dst) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
    o->copies[o->n_copies++] = dst;
    memset(dst, 0, row * (size_t)out);
    static const int awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};   // output 8c + r is in nibble awq_nibble[r] of word c
    for (int64_t r = 0; r < out; r++) {
        const int zshift = awq ? 4 * awq_nibble[r % 8] : bits * (int)(r % pack);
        for (int64_t b = 0; b < in / g; b++) {
            struct llm__block_gq *blk = (void *)(dst + (size_t)r * row + (size_t)b * bb);
            const int64_t gr = b * g / G;
            int z = (int)(llm__hf_u32(qz, gr, r / pack, out / pack) >> zshift & mask) + qc->zeros_less_one;
            if (sc->type == 1) memcpy(&blk->d, sc->data + 2 * ((size_t)gr * (size_t)out + (size_t)r), 2);
            else {
                float f;
                uint16_t h;
                if (sc->type == 0) memcpy(&f, sc->data + 4 * ((size_t)gr * (size_t)out + (size_t)r), 4);
                else memcpy(&h, sc->data + 2 * ((size_t)gr * (size_t)out + (size_t)r), 2), f = llm__bf16_to_fp32(h);
                blk->d = llm__fp32_to_fp16(f);
            }
            blk->z = (int16_t)(bits == 8 ? z - 128 : z);
            for (int64_t j = 0; j < g; j++) {
                const int64_t i = perm ? perm[b * g + j] : b * g + j;
                const uint32_t q = awq ? llm__hf_u32(qw, i, r / 8, out / 8) >> (4 * awq_nibble[r % 8]) & 15
                                       : llm__hf_u32(qw, i / pack, r, out) >> (bits * (int)(i % pack)) & mask;
                if (bits == 8) blk->qs[j] = (uint8_t)(q - 128);
                else blk->qs[16 * (j / 32) + j % 16] |= (uint8_t)(q << (j % 32 < 16 ? 0 : 4));
            }
        }
    }
    t->type = (uint32_t)type;
    t->n_dims = 2;
    t->ne[0] = in, t->ne[1] = out, t->ne[2] = t->ne[3] = 1;
    t->size = row * (size_t)out;
    t->data = dst;
    t->perm = perm;
    return LLM_OK;
}

// Adds the tensors of safetensors file f to g under their GGUF names (copies in o).
static enum llm_status llm__hf_add_tensors(struct llm__gguf *g, struct llm__hf_owned *o, const struct llm__safetensors *f,
                                           bool permute, bool gemma, const int64_t hp[5], const struct llm__hf_quant *quant,
                                           struct llm__err *e) {
    struct llm__gguf_tensor *t2 = realloc(g->tensors, (size_t)(g->n_tensors + f->n + 1) * sizeof(*t2));
    void **c2 = realloc(o->copies, (size_t)(o->n_copies + 3 * f->n + 1) * sizeof(*c2));   // (a quantized one: 3)
    if (t2) g->tensors = t2;
    if (c2) o->copies = c2;
    if (!t2 || !c2) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for the tensors");
    for (int64_t i = 0; i < f->n; i++) {
        const struct llm__st_tensor *s = &f->t[i];
        char name[LLM__GGUF_MAX_NAME + 1], pr[88];
        int qk;
        llm__gguf_printable(pr, s->name, strlen(s->name));
        if (strstr(s->name, "rotary_emb.inv_freq")) continue;   // recomputed from rope_theta, as the converter skips it
        // a quantized weight: its qweight stands for it (the other parts are read with it)
        const char *dot = strrchr(s->name, '.');
        const bool qweight = quant->method && dot && strcmp(dot, ".qweight") == 0;
        if (quant->method && dot && !qweight && (!strcmp(dot, ".qzeros") || !strcmp(dot, ".scales") || !strcmp(dot, ".g_idx"))) {
            char qn[LLM__GGUF_MAX_NAME + 16];
            if (snprintf(qn, sizeof(qn), "%.*s.qweight", (int)(dot - s->name), s->name) < (int)sizeof(qn) && llm__hf_find(o, qn)) continue;
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' belongs to no qweight", pr);
        }
        char hfname[LLM__GGUF_MAX_NAME + 16];
        if (snprintf(hfname, sizeof(hfname), "%.*s%s", qweight ? (int)(dot - s->name) : (int)strlen(s->name), s->name,
                     qweight ? ".weight" : "") >= (int)sizeof(hfname) ||
            !llm__hf_name(hfname, gemma, name, sizeof(name), &qk))
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "hf: tensor '%s' is not one this loader knows", pr);
        if (!qweight && s->type != 0 && s->type != 1 && s->type != 30)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "hf: tensor '%s' is not F32, F16 or BF16", pr);
        if (s->n_dims < 1 || s->n_dims > 2)
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' has %d dimensions, expected 1 or 2", pr, s->n_dims);
        struct llm__gguf_tensor *t = &g->tensors[g->n_tensors];
        memset(t, 0, sizeof(*t));
        t->type = s->type;
        t->n_dims = s->n_dims;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (int d = 0; d < s->n_dims; d++) t->ne[d] = s->shape[s->n_dims - 1 - d];
        if (t->ne[0] == 0 || t->ne[1] == 0) return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' is empty", pr);
        t->size = s->size;
        t->data = s->data;
        if (qweight) {
            hfname[strlen(hfname) - strlen(".weight")] = 0;
            enum llm_status st = llm__hf_gq_tensor(quant, o, hfname, s, t, e);
            if (st) return st;
            llm__map_release(s->data, s->size);
        }
        const int64_t heads = qk == 1 ? hp[0] : hp[1], rows = s->n_dims == 2 ? t->ne[1] : t->ne[0];
        const bool perm = permute && qk && rows == heads * hp[2];
        if (permute && qk && !perm)
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' has %lld rows, expected %lld heads x %lld", pr, (long long)rows,
                             (long long)heads, (long long)hp[2]);
        const size_t nl = strlen(name);
        if (gemma && nl >= 11 && !strcmp(name + nl - 11, "norm.weight")) {
            // Gemma's RMSNorm multiplies by 1 + w: stored as F32 w + 1, as llama.cpp's converter does (the sum in F32, as
            // transformers computes it; the converter adds in the checkpoint's type, which rounds BF16 and F16 sums)
            const int64_t n = t->ne[0] * t->ne[1];
            float *c = llm__alloc((size_t)n * sizeof(float));
            if (!c) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
            o->copies[o->n_copies++] = c;
            const uint16_t *h = (const uint16_t *)s->data;
            for (int64_t i = 0; i < n; i++) {
                float w;
                if (s->type == 0) memcpy(&w, (const char *)s->data + 4 * i, 4);
                else {
                    uint16_t x;
                    memcpy(&x, h + i, 2);
                    w = s->type == 1 ? llm__fp16_to_fp32(x) : llm__bf16_to_fp32(x);
                }
                c[i] = w + 1.0f;
            }
            t->type = 0;
            t->size = (size_t)n * sizeof(float);
            t->data = c;
        } else if (perm || ((uintptr_t)t->data % 32) != 0) {
            uint8_t *c = llm__alloc(t->size);
            if (!c) return llm__fail(e, LLM_ERR_NOMEM, "out of memory for tensor '%s'", pr);
            o->copies[o->n_copies++] = c;
            if (perm) llm__hf_permute_rows(c, t->data, t->size / (size_t)rows, heads, hp[2]);
            else memcpy(c, t->data, t->size);
            if (t->data == s->data) llm__map_release(s->data, s->size);   // (the file's pages are not read again)
            t->data = c;
        }
        if (!(t->name = llm__strndup(name, strlen(name)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        uint64_t slot = 0;
        if (llm__gguf_index_find(&g->tensor_index, g->tensors, sizeof(*g->tensors), t->name, &slot) >= 0) {
            free(t->name);
            return llm__fail(e, LLM_ERR_FORMAT, "hf: tensor '%s' is in the checkpoint twice", pr);
        }
        g->tensor_index.slots[slot] = g->n_tensors++;
    }
    return LLM_OK;
}

// The tokenizer's kinds, pre-tokenizers and token types (tokenizer.ggml.token_type's values),
// here since a Hugging Face directory's tokenizer is written into those keys.
enum llm__vocab_type { LLM__VOCAB_SPM = 1, LLM__VOCAB_BPE = 2 };
enum llm__pre_type { LLM__PRE_DEFAULT = 1, LLM__PRE_GPT2, LLM__PRE_LLAMA3, LLM__PRE_QWEN2, LLM__PRE_SMOLLM,
                     LLM__PRE_TEKKEN };
enum llm__tok_attr { LLM__TOK_NORMAL = 1, LLM__TOK_UNKNOWN = 2, LLM__TOK_CONTROL = 3, LLM__TOK_USER = 4,
                     LLM__TOK_UNUSED = 5, LLM__TOK_BYTE = 6 };

// tokenizer.ggml.pre values and the pre-tokenizer each stands for (the names llama.cpp gives
// the same splitting rules).
static const struct { const char *name; enum llm__pre_type pre; bool ignore_merges, add_bos; } llm__pre_names[] = {
    {"default", LLM__PRE_DEFAULT, false, false},
    {"llama3", LLM__PRE_LLAMA3, true, true},     {"llama-v3", LLM__PRE_LLAMA3, true, true},
    {"llama-bpe", LLM__PRE_LLAMA3, true, true},  {"falcon3", LLM__PRE_LLAMA3, true, true},
    {"gpt-2", LLM__PRE_GPT2, false, false},      {"phi-2", LLM__PRE_GPT2, false, false},
    {"mpt", LLM__PRE_GPT2, false, false},        {"olmo", LLM__PRE_GPT2, false, false},
    {"qwen2", LLM__PRE_QWEN2, false, false},     {"stablelm2", LLM__PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", LLM__PRE_QWEN2, false, false},
    {"smollm", LLM__PRE_SMOLLM, false, false},   {"starcoder", LLM__PRE_SMOLLM, false, false},
    {"tekken", LLM__PRE_TEKKEN, true, true},
};

static uint64_t llm__hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;   // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

// Looks a string up in a table of ids + 1 into strs; -1 when absent.
static int32_t llm__strtab_find(const uint32_t *ht, uint32_t mask, const struct llm__gguf_str *strs, const char *s,
                                size_t n) {
    for (uint32_t i = (uint32_t)llm__hash(s, n) & mask;; i = (i + 1) & mask) {
        uint32_t id = ht[i];
        if (!id) return -1;
        const struct llm__gguf_str *t = &strs[id - 1];
        if (t->len == n && memcmp(t->ptr, s, n) == 0) return (int32_t)(id - 1);
    }
}

// Builds such a table; of duplicate strings the first wins (as in llama.cpp). NULL: no memory.
static uint32_t *llm__strtab_build(const struct llm__gguf_str *strs, int n, uint32_t *mask) {
    uint32_t cap = 2;
    while (cap < 2 * (uint32_t)n) cap <<= 1;
    uint32_t *ht = calloc(cap, sizeof(uint32_t));
    if (!ht) return NULL;
    *mask = cap - 1;
    for (int i = 0; i < n; i++) {
        const struct llm__gguf_str *t = &strs[i];
        uint32_t h = (uint32_t)llm__hash(t->ptr, t->len) & *mask;
        bool dup = false;
        for (; ht[h]; h = (h + 1) & *mask) {
            const struct llm__gguf_str *o = &strs[ht[h] - 1];
            if (o->len == t->len && memcmp(o->ptr, t->ptr, t->len) == 0) { dup = true; break; }
        }
        if (!dup) ht[h] = (uint32_t)i + 1;
    }
    return ht;
}

// --- tokenizer.json ---
// A directory's tokenizer as the GGUF keys llama.cpp's converter writes, which the engine's
// tokenizer then reads as from any GGUF file. tokenizer.json's BPE model, of two kinds:
//   - byte-level (GPT-2, Llama 3, Qwen 2, SmolLM, Tekken): the merges (pairs joined by a space,
//     spaces inside them written as U+0120 as the converter does) and the pre-tokenizer's name
//     for what the file's pre_tokenizer does: ByteLevel alone is GPT-2's, Digits (each) then
//     ByteLevel SmolLM's, a Split by Llama 3's, Qwen 2's, Tekken's or GPT-2's regex then
//     ByteLevel theirs. Anything else is refused: the engine's scanners are written for those
//     rules. The normalizer must be none or NFC (text is taken as already NFC, as llama.cpp
//     takes it).
//   - SentencePiece style, with byte_fallback (Llama 2, Mistral, Gemma; llm__hf_spm_style):
//     tokenizer.ggml.model "llama", byte tokens <0xNN>, and scores from the merges' ranks (see
//     below), since the engine's SentencePiece merger merges by score.
// Both: the tokens by id (vocab, then added_tokens over it; ids without one become "[PADn]",
// unused), their types (an added token is a control token when special or shaped like one,
// "<|...|>", else user-defined, as the converter decides; the rest normal), the added tokens
// that take the whitespace after them (rstrip). The special tokens: tokenizer_config.json's
// bos_token, eos_token, unk_token, pad_token looked up among the added tokens, else config.json's
// ids; whether BOS and EOS are added: the post-processor's template, else tokenizer_config.json's
// add_bos_token / add_eos_token (llama.cpp's converter's order); the chat template:
// tokenizer_config.json's, else chat_template.jinja; up to two of generation_config.json's other
// eos_token_id values end generations too (as EOT and EOM).

// A directory's texts (NULL: the file is absent).
struct llm__hf_texts {
    const char *cfg, *tok, *tok_cfg, *gen_cfg, *tmpl;
    size_t cfg_len, tok_len, tok_cfg_len, gen_cfg_len, tmpl_len;
    const char *name;   // general.name, or NULL
};

static void llm__gbuf_bool(struct llm__gbuf *b, const char *key, bool v) {
    llm__gbuf_key(b, NULL, key, LLM__GGUF_BOOL);
    uint8_t x = v;
    llm__gbuf_put(b, &x, 1);
}
static void llm__gbuf_arr(struct llm__gbuf *b, const char *key, uint32_t type, uint64_t n) {
    llm__gbuf_key(b, NULL, key, LLM__GGUF_ARR);
    llm__gbuf_put(b, &type, 4);
    llm__gbuf_put(b, &n, 8);
}

// The steps of a pre-tokenizer or normalizer (a Sequence's, under `key`, or itself): at most
// max, their count (-1: more).
static int llm__hf_steps(const struct llm__json *j, int32_t p, const char *key, int32_t *out, int max) {
    if (p < 0 || j->nodes[p].type != LLM__JSON_OBJ) return 0;
    const int32_t ty = llm__json_get(j, p, "type");
    if (ty < 0 || !llm__json_eq(j, ty, "Sequence")) { out[0] = p; return 1; }
    const int32_t a = llm__json_get(j, p, key);
    if (a < 0 || j->nodes[a].type != LLM__JSON_ARR || j->nodes[a].n > max) return -1;
    for (int32_t i = 0, k = a + 1; i < j->nodes[a].n; i++, k = j->nodes[k].next) out[i] = k;
    return j->nodes[a].n;
}

// Whether member key of object o is the string s.
static bool llm__hf_member_is(const struct llm__json *j, int32_t o, const char *key, const char *s) {
    const int32_t v = llm__json_get(j, o, key);
    return v >= 0 && llm__json_eq(j, v, s);
}

static bool llm__hf_is(const struct llm__json *j, int32_t o, const char *type) { return llm__hf_member_is(j, o, "type", type); }

// A boolean member of o: its value, or def when absent (or not a boolean).
static bool llm__hf_flag(const struct llm__json *j, int32_t o, const char *key, bool def) {
    const int32_t v = llm__json_get(j, o, key);
    return v < 0 ? def : j->nodes[v].type == LLM__JSON_TRUE ? true : j->nodes[v].type == LLM__JSON_FALSE ? false : def;
}

// The engine's name (tokenizer.ggml.pre) for pre-tokenizer p of a byte-level BPE, or NULL.
static const char *llm__hf_pre_name(const struct llm__json *j, int32_t p) {
    static const struct { const char *re, *pre; } res[] = {
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         "\\s+(?!\\S)|\\s+", "llama-bpe"},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
         "\\s+(?!\\S)|\\s+", "qwen2"},
        {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"
         "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "tekken"},
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
    };
    int32_t st[3];
    const int n = llm__hf_steps(j, p, "pretokenizers", st, 3);
    if (n < 1 || n > 2) return NULL;
    const int32_t bl = st[n - 1];   // the last step maps bytes to GPT-2's code points
    if (!llm__hf_is(j, bl, "ByteLevel") || llm__hf_flag(j, bl, "add_prefix_space", true)) return NULL;
    const bool regex = llm__hf_flag(j, bl, "use_regex", true);
    if (n == 1) return regex ? "gpt-2" : NULL;
    if (llm__hf_is(j, st[0], "Digits")) return regex && llm__hf_flag(j, st[0], "individual_digits", false) ? "smollm" : NULL;
    if (regex || !llm__hf_is(j, st[0], "Split") || llm__hf_flag(j, st[0], "invert", false) ||
        !llm__hf_member_is(j, st[0], "behavior", "Isolated"))
        return NULL;
    const int32_t re = llm__json_get(j, llm__json_get(j, st[0], "pattern"), "Regex");
    for (size_t k = 0; re >= 0 && k < LLM__ARRAY_LEN(res); k++)
        if (llm__json_eq(j, re, res[k].re)) return res[k].pre;
    return NULL;
}

// SentencePiece-style BPE (byte_fallback: Llama 2, Mistral, Gemma): whether spaces become U+2581
// (by the normalizer's Replace, or by a Metaspace pre-tokenizer that does not split) and
// *prefix, whether one goes in front of the text (Prepend: in front of every text between
// special tokens; Metaspace's *scheme "always": the same unless the text starts with a space,
// "first": only at the start of the whole text); NULL, or what is not supported.
static const char *llm__hf_spm_style(const struct llm__json *j, int32_t norm, int32_t pre, bool *prefix, const char **scheme) {
    int32_t st[8];
    bool replaced = false;
    *prefix = false;
    *scheme = NULL;
    int n = llm__hf_steps(j, norm, "normalizers", st, 8);
    if (n < 0) return "a normalizer of more than 8 steps";
    for (int i = 0; i < n; i++) {
        if (llm__hf_is(j, st[i], "Replace") && llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " ") &&
            llm__hf_member_is(j, st[i], "content", "\xe2\x96\x81"))
            replaced = true;
        else if (llm__hf_is(j, st[i], "Prepend") && llm__hf_member_is(j, st[i], "prepend", "\xe2\x96\x81"))
            *prefix = true;
        else
            return "a normalizer step other than Replace(' ', U+2581) and Prepend(U+2581)";
    }
    n = llm__hf_steps(j, pre, "pretokenizers", st, 8);
    if (n < 0) return "a pre-tokenizer of more than 8 steps";
    for (int i = 0; i < n; i++) {
        if (llm__hf_is(j, st[i], "Metaspace")) {
            if (!llm__hf_member_is(j, st[i], "replacement", "\xe2\x96\x81")) return "a Metaspace replacement other than U+2581";
            if (llm__hf_flag(j, st[i], "split", false)) return "a Metaspace pre-tokenizer that splits the text into words";
            const int32_t sc = llm__json_get(j, st[i], "prepend_scheme");
            if (sc >= 0 && !llm__json_eq(j, sc, "always") && !llm__json_eq(j, sc, "first") && !llm__json_eq(j, sc, "never"))
                return "a Metaspace prepend scheme other than always, first, never";
            *prefix = sc >= 0 ? !llm__json_eq(j, sc, "never") : llm__hf_flag(j, st[i], "add_prefix_space", true);
            *scheme = sc >= 0 && llm__json_eq(j, sc, "first") ? "first" : "always";
            replaced = true;
        } else if (!(replaced && llm__hf_is(j, st[i], "Split") && llm__hf_member_is(j, llm__json_get(j, st[i], "pattern"), "String", " "))) {
            return "a pre-tokenizer other than Metaspace";   // (a Split at spaces after they became U+2581 splits nothing)
        }
    }
    return replaced ? NULL : "spaces not replaced by U+2581";
}

// The content of a tokenizer_config.json entry (a string, or an object with "content"), or -1.
static int32_t llm__hf_tok_content(const struct llm__json *j, int32_t v) {
    if (v >= 0 && j->nodes[v].type == LLM__JSON_OBJ) v = llm__json_get(j, v, "content");
    return v >= 0 && j->nodes[v].type == LLM__JSON_STR ? v : -1;
}

// An id of config.json or generation_config.json (a number, or the first of an array), or -1.
static int64_t llm__hf_json_id(const struct llm__json *j, int32_t v, int64_t n) {
    int64_t id = -1;
    if (v >= 0 && j->nodes[v].type == LLM__JSON_ARR) v = llm__json_at(j, v, 0);
    return v >= 0 && llm__json_int(j, v, 0, n - 1, &id) ? id : -1;
}

// Whether added token text t looks like a control token, as the converter decides.
static bool llm__hf_looks_special(const char *t, size_t n) {
    static const char *const named[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    for (size_t i = 0; i < LLM__ARRAY_LEN(named); i++)
        if (n == strlen(named[i]) && !memcmp(t, named[i], n)) return true;
    if (n >= 3 && !memcmp(t, "<|", 2) && !memcmp(t + n - 2, "|>", 2)) return true;   // (<|> too, as in Python)
    if (n >= 7 && !memcmp(t, "<\xef\xbd\x9c", 4) && !memcmp(t + n - 4, "\xef\xbd\x9c>", 4)) return true;   // <｜...｜>
    return n >= 8 && !memcmp(t, "<unused", 7) && t[n - 1] == '>';
}

struct llm__hf_tokens {
    struct llm__outbuf text;   // every token's text, back to back
    uint64_t *off;             // [n + 1]: token i is text.p[off[i] .. off[i] + len[i])
    uint32_t *len;             // [n]
    int32_t *type;             // [n] enum llm__tok_attr
    int64_t n;
};

// Id of the token with text s, or -1 (a linear search: a few lookups per directory).
static int64_t llm__hf_tok_find(const struct llm__hf_tokens *t, const char *s, size_t n) {
    for (int64_t i = 0; i < t->n; i++)
        if (t->len[i] == n && memcmp(t->text.p + t->off[i], s, n) == 0) return i;
    return -1;
}

static enum llm_status llm__hf_tokenizer(const struct llm__hf_texts *tx, int64_t n_vocab, struct llm__gbuf *b,
                                         struct llm__err *e) {
    struct llm__json j = {0}, jc = {0}, jcfg = {0}, jg = {0};
    struct llm__hf_tokens t = {0};
    char *buf = NULL, pr[88];
    enum llm_status st = llm__json_parse(&j, tx->tok, tx->tok_len, "tokenizer.json", e);
    if (st == LLM_OK && tx->tok_cfg) st = llm__json_parse(&jc, tx->tok_cfg, tx->tok_cfg_len, "tokenizer_config.json", e);
    if (st == LLM_OK && tx->gen_cfg) st = llm__json_parse(&jg, tx->gen_cfg, tx->gen_cfg_len, "generation_config.json", e);
    if (st == LLM_OK) st = llm__json_parse(&jcfg, tx->cfg, tx->cfg_len, "config.json", e);
    if (st) goto done;
    const int32_t model = llm__json_get(&j, 0, "model"), mtype = llm__json_get(&j, model, "type");
    const int32_t vocab = llm__json_get(&j, model, "vocab"), merges = llm__json_get(&j, model, "merges");
    const int32_t added = llm__json_get(&j, 0, "added_tokens");
    if (model < 0 || j.nodes[model].type != LLM__JSON_OBJ) {
        st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: no model object (with model.vocab and model.merges)");
        goto done;
    }
    if (mtype >= 0 && !llm__json_eq(&j, mtype, "BPE")) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the %s model is not supported (BPE only)",
                       j.nodes[mtype].type == LLM__JSON_STR ? llm__gguf_printable(pr, j.text + j.nodes[mtype].start, j.nodes[mtype].len)
                                                            : "(not a string)");
        goto done;
    }
    if (vocab < 0 || j.nodes[vocab].type != LLM__JSON_OBJ || merges < 0 || j.nodes[merges].type != LLM__JSON_ARR ||
        (added >= 0 && j.nodes[added].type != LLM__JSON_ARR)) {
        st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: model.vocab (an object), model.merges and added_tokens (arrays) are needed");
        goto done;
    }
    const int32_t pre_node = llm__json_get(&j, 0, "pre_tokenizer"), norm = llm__json_get(&j, 0, "normalizer");
    int32_t steps[8];
    bool byte_level = false, spm = false, space_prefix = false;
    const char *scheme = NULL;
    for (int i = 0, n = llm__hf_steps(&j, pre_node, "pretokenizers", steps, 8); i < n; i++)
        byte_level |= llm__hf_is(&j, steps[i], "ByteLevel");
    if (!byte_level) {
        const char *why = "neither a ByteLevel pre-tokenizer nor byte_fallback";
        if (llm__hf_flag(&j, model, "byte_fallback", false)) why = llm__hf_spm_style(&j, norm, pre_node, &space_prefix, &scheme);
        if (why) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: %s; the engine reads byte-level BPE (GPT-2, Llama 3, Qwen, "
                           "SmolLM, Tekken) and SentencePiece-style BPE with byte_fallback (Llama 2, Mistral, Gemma)", why);
            goto done;
        }
        spm = true;
    }
    const char *pre = spm ? "" : llm__hf_pre_name(&j, pre_node);
    if (!pre) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: the pre-tokenizer is not one the engine has: ByteLevel alone "
                       "(GPT-2), Digits then ByteLevel (SmolLM), or a Split by Llama 3's, Qwen 2's, Tekken's or GPT-2's regex then "
                       "ByteLevel, without add_prefix_space");
        goto done;
    }
    if (!spm && norm >= 0 && j.nodes[norm].type != LLM__JSON_NULL && !llm__hf_is(&j, norm, "NFC")) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: a byte-level tokenizer with a normalizer other than NFC is not supported");
        goto done;
    }
    const bool ignore = llm__hf_flag(&j, model, "ignore_merges", false);
    if (spm && ignore) {
        st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges with byte_fallback is not supported");
        goto done;
    }
    for (size_t k = 0; k < LLM__ARRAY_LEN(llm__pre_names); k++)
        if (!strcmp(llm__pre_names[k].name, pre) && llm__pre_names[k].ignore_merges != ignore) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer.json: ignore_merges %s with the %s pre-tokenizer is not supported",
                           ignore ? "true" : "false", pre);
            goto done;
        }
    // the tokens by id
    int64_t max_id = -1;
    for (int pass = 0; pass < 2; pass++) {   // 0: the largest id; 1: the texts
        if (pass == 1) {
            t.n = LLM__MAX(n_vocab, max_id + 1);
            if (n_vocab > 0 && max_id >= n_vocab) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is beyond the model's vocab_size %lld",
                               (long long)max_id, (long long)n_vocab);
                goto done;
            }
            t.off = calloc((size_t)t.n + 1, sizeof(*t.off));
            t.len = calloc((size_t)t.n, sizeof(*t.len));
            t.type = calloc((size_t)t.n, sizeof(*t.type));
            buf = malloc(tx->tok_len + 1);
            if (!t.off || !t.len || !t.type || !buf) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        }
        for (int32_t m = 0, k = vocab + 1; m < j.nodes[vocab].n; m++, k = j.nodes[k + 1].next) {
            int64_t id;
            if (!llm__json_int(&j, k + 1, 0, (1 << 24) - 1, &id)) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: the id of vocab entry %d is not an integer in [0, 2^24)", m);
                goto done;
            }
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            if (t.type[id]) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: token id %lld is in the vocab twice", (long long)id);
                goto done;
            }
            size_t n = llm__json_decode(&j, k, buf);
            t.off[id] = t.text.n;
            t.len[id] = (uint32_t)n;
            t.type[id] = LLM__TOK_NORMAL;
            llm__outbuf_put(&t.text, buf, n);
        }
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            int64_t id;
            const int32_t c = llm__json_get(&j, k, "content");
            if (!llm__json_int(&j, llm__json_get(&j, k, "id"), 0, (1 << 24) - 1, &id) || c < 0 || j.nodes[c].type != LLM__JSON_STR) {
                st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: added token %d needs an id in [0, 2^24) and a content string", m);
                goto done;
            }
            if (pass == 0) { max_id = LLM__MAX(max_id, id); continue; }
            size_t n = llm__json_decode(&j, c, buf);
            t.off[id] = t.text.n;   // over the vocab's entry, as the tokenizer's get_vocab() has it
            t.type[id] = llm__hf_flag(&j, k, "special", false) || llm__hf_looks_special(buf, n) ? LLM__TOK_CONTROL : LLM__TOK_USER;
            for (size_t i = 0; i < n; i++) {   // SentencePiece style: user-defined tokens' U+2581 as spaces, as the converter has them
                const bool sp = spm && t.type[id] == LLM__TOK_USER && i + 3 <= n && !memcmp(buf + i, "\xe2\x96\x81", 3);
                llm__outbuf_put(&t.text, sp ? " " : buf + i, 1);
                i += sp ? 2 : 0;
            }
            t.len[id] = (uint32_t)(t.text.n - t.off[id]);
        }
    }
    for (int64_t i = 0; i < t.n; i++)
        if (!t.type[i]) {
            char pad[32];
            int n = snprintf(pad, sizeof(pad), "[PAD%lld]", (long long)i);
            t.off[i] = t.text.n;
            t.len[i] = (uint32_t)n;
            t.type[i] = LLM__TOK_UNUSED;
            llm__outbuf_put(&t.text, pad, (size_t)n);
        }
    if (t.text.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
    // SentencePiece style: scores that merge as the merges' ranks do (a token's score is minus
    // the rank of the first merge that makes it; the encoder merges the best-scoring pair that
    // makes a token); byte tokens <0xNN>
    float *scores = NULL;
    uint32_t *ht = NULL, mask = 0;
    struct llm__gguf_str *strs = NULL;
    if (spm) {
        scores = malloc((size_t)t.n * sizeof(float));
        strs = malloc((size_t)t.n * sizeof(*strs));
        if (!scores || !strs) { free(scores); free(strs); st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        for (int64_t i = 0; i < t.n; i++) {
            strs[i] = (struct llm__gguf_str){t.text.p + t.off[i], t.len[i]};
            scores[i] = -INFINITY;   // no merge makes it: never merged (as the tokenizers library)
            const char *p = t.text.p + t.off[i];   // <0xNN>, NN upper-case hexadecimal (not NUL-terminated)
            const bool hex = t.len[i] == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && strchr("0123456789ABCDEF", p[3]) && p[3] &&
                             strchr("0123456789ABCDEF", p[4]) && p[4];
            if (t.type[i] == LLM__TOK_NORMAL && hex) t.type[i] = LLM__TOK_BYTE;
        }
        if (!(ht = llm__strtab_build(strs, (int)t.n, &mask))) {
            free(scores);
            free(strs);
            st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    llm__gbuf_s(b, NULL, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
    if (!spm) llm__gbuf_s(b, NULL, "tokenizer.ggml.pre", pre);
    else llm__gbuf_bool(b, "tokenizer.ggml.add_space_prefix", space_prefix);
    if (spm && space_prefix && scheme) llm__gbuf_s(b, NULL, "tokenizer.ggml.prepend_scheme", scheme);
    if (!spm) llm__gbuf_arr(b, "tokenizer.ggml.merges", LLM__GGUF_STR, (uint64_t)j.nodes[merges].n);
    for (int32_t m = 0, k = merges + 1; st == LLM_OK && m < j.nodes[merges].n; m++, k = j.nodes[k].next) {
        const int32_t l = llm__json_at(&j, k, 0), r = llm__json_at(&j, k, 1);
        if (j.nodes[k].type != LLM__JSON_STR && (j.nodes[k].type != LLM__JSON_ARR || j.nodes[k].n != 2 ||
                                                 j.nodes[l].type != LLM__JSON_STR || j.nodes[r].type != LLM__JSON_STR)) {
            st = llm__fail(e, LLM_ERR_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [\"a\", \"b\"]", m);
            break;
        }
        struct llm__outbuf o = {0};   // "left right", spaces inside a pair's parts as U+0120
        if (j.nodes[k].type == LLM__JSON_STR) llm__outbuf_put(&o, buf, llm__json_decode(&j, k, buf));
        for (int side = 0; j.nodes[k].type == LLM__JSON_ARR && side < 2; side++) {
            const size_t n = llm__json_decode(&j, side ? r : l, buf);
            if (side) llm__outbuf_put(&o, " ", 1);
            for (size_t i = 0; i < n; i++) llm__outbuf_put(&o, buf[i] == ' ' ? "\xc4\xa0" : buf + i, buf[i] == ' ' ? 2 : 1);
        }
        if (!spm) llm__gbuf_str(b, o.p, o.n);
        char *sp = o.p ? memchr(o.p, ' ', o.n) : NULL;
        if (spm && sp) {   // the token the merge makes
            memmove(sp, sp + 1, o.n - (size_t)(sp - o.p) - 1);
            const int32_t id = llm__strtab_find(ht, mask, strs, o.p, o.n - 1);
            if (id >= 0 && scores[id] == -INFINITY) scores[id] = -(float)m;
        }
        b->o.fail |= o.fail;
        free(o.p);
    }
    llm__gbuf_arr(b, "tokenizer.ggml.tokens", LLM__GGUF_STR, (uint64_t)t.n);
    for (int64_t i = 0; i < t.n; i++) llm__gbuf_str(b, t.text.p + t.off[i], t.len[i]);
    if (spm) {
        llm__gbuf_arr(b, "tokenizer.ggml.scores", LLM__GGUF_F32, (uint64_t)t.n);
        llm__gbuf_put(b, scores, (size_t)t.n * sizeof(float));
    }
    free(scores);
    free(strs);
    free(ht);
    if (st) goto done;
    // special tokens
    static const char *const kinds[][3] = {
        {"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"}, {"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
        {"unk_token", "unk_token_id", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
    };
    int64_t ids[4];
    for (int s = 0; s < 4; s++) {
        ids[s] = -1;
        const int32_t c = tx->tok_cfg ? llm__hf_tok_content(&jc, llm__json_get(&jc, 0, kinds[s][0])) : -1;
        size_t cn = 0;
        char *cs = c >= 0 ? llm__json_strdup(&jc, c, &cn) : NULL;
        if (c >= 0 && !cs) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        for (int32_t m = 0, k = added + 1; cs && ids[s] < 0 && added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            const int32_t ct = llm__json_get(&j, k, "content");
            int64_t id;
            if (strlen(cs) == cn && llm__json_eq(&j, ct, cs) && llm__json_int(&j, llm__json_get(&j, k, "id"), 0, t.n - 1, &id))
                ids[s] = id;
        }
        free(cs);
        if (ids[s] < 0) ids[s] = llm__hf_json_id(&jcfg, llm__json_get(&jcfg, 0, kinds[s][1]), t.n);
    }
    if (ids[2] < 0) {   // the BPE model's unk_token
        const int32_t u = llm__json_get(&j, model, "unk_token");
        if (u >= 0 && j.nodes[u].type == LLM__JSON_STR) ids[2] = llm__hf_tok_find(&t, buf, llm__json_decode(&j, u, buf));
    }
    int64_t gen_eos[2] = {-1, -1};   // generation_config.json's other ends
    const int32_t ge = tx->gen_cfg ? llm__json_get(&jg, 0, "eos_token_id") : -1;
    if (ids[1] < 0) ids[1] = llm__hf_json_id(&jg, ge, t.n);
    for (int32_t i = 0, ng = 0, k = ge + 1; ge >= 0 && jg.nodes[ge].type == LLM__JSON_ARR && i < jg.nodes[ge].n && ng < 2;
         i++, k = jg.nodes[k].next) {
        int64_t id;
        if (llm__json_int(&jg, k, 0, t.n - 1, &id) && id != ids[1]) gen_eos[ng++] = id;
    }
    for (int s = 0; s < 4; s++)
        if (ids[s] >= 0) llm__gbuf_u32(b, NULL, kinds[s][2], (uint32_t)ids[s]);
    if (spm && ids[2] >= 0 && t.type[ids[2]] != LLM__TOK_CONTROL) t.type[ids[2]] = LLM__TOK_UNKNOWN;
    // added tokens that take the whitespace after them (rstrip), as tokenizer.ggml.rstrip_ids
    int64_t n_rstrip = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && n_rstrip) llm__gbuf_arr(b, "tokenizer.ggml.rstrip_ids", LLM__GGUF_I32, (uint64_t)n_rstrip);
        for (int32_t m = 0, k = added + 1; added >= 0 && m < j.nodes[added].n; m++, k = j.nodes[k].next) {
            int64_t id;
            if (!llm__hf_flag(&j, k, "rstrip", false) || !llm__json_int(&j, llm__json_get(&j, k, "id"), 0, t.n - 1, &id)) continue;
            if (pass == 0) n_rstrip++;
            else {
                const int32_t x = (int32_t)id;
                llm__gbuf_put(b, &x, 4);
            }
        }
        if (!n_rstrip) break;
    }
    llm__gbuf_arr(b, "tokenizer.ggml.token_type", LLM__GGUF_I32, (uint64_t)t.n);
    llm__gbuf_put(b, t.type, (size_t)t.n * 4);
    if (gen_eos[0] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eot_token_id", (uint32_t)gen_eos[0]);
    if (gen_eos[1] >= 0) llm__gbuf_u32(b, NULL, "tokenizer.ggml.eom_token_id", (uint32_t)gen_eos[1]);
    // whether BOS / EOS are added: the post-processor, else tokenizer_config.json
    int add[2] = {-1, -1};
    const int32_t pp = llm__json_get(&j, 0, "post_processor");
    int32_t procs[8];
    const int32_t ppl = llm__json_get(&j, pp, "processors");
    int np = 0;
    if (ppl >= 0 && j.nodes[ppl].type == LLM__JSON_ARR)
        for (int32_t i = 0, k = ppl + 1; i < j.nodes[ppl].n && np < 8; i++, k = j.nodes[k].next) procs[np++] = k;
    else if (pp >= 0 && j.nodes[pp].type == LLM__JSON_OBJ) procs[np++] = pp;
    for (int i = 0; i < np; i++) {
        if (llm__hf_is(&j, procs[i], "ByteLevel")) {
            for (int s = 0; s < 2; s++) add[s] = add[s] < 0 ? 0 : add[s];
        } else if (llm__hf_is(&j, procs[i], "TemplateProcessing")) {
            const int32_t single = llm__json_get(&j, procs[i], "single");
            if (single < 0 || j.nodes[single].type != LLM__JSON_ARR || j.nodes[single].n < 2) continue;
            for (int s = 0; s < 2; s++) {
                const int32_t end = llm__json_at(&j, single, s ? j.nodes[single].n - 1 : 0);
                const int32_t sp = llm__json_get(&j, llm__json_get(&j, end, "SpecialToken"), "id");
                add[s] = 0;
                if (sp >= 0 && j.nodes[sp].type == LLM__JSON_STR && ids[s] >= 0) {
                    const size_t n = llm__json_decode(&j, sp, buf);
                    add[s] = n == t.len[ids[s]] && !memcmp(buf, t.text.p + t.off[ids[s]], n);
                }
            }
        }
    }
    for (int s = 0; s < 2; s++) {
        if (add[s] < 0 && tx->tok_cfg) {
            const int32_t v = llm__json_get(&jc, 0, s ? "add_eos_token" : "add_bos_token");
            if (v >= 0 && (jc.nodes[v].type == LLM__JSON_TRUE || jc.nodes[v].type == LLM__JSON_FALSE)) add[s] = jc.nodes[v].type == LLM__JSON_TRUE;
        }
        if (add[s] >= 0) llm__gbuf_bool(b, s ? "tokenizer.ggml.add_eos_token" : "tokenizer.ggml.add_bos_token", add[s] == 1);
    }
    // the chat template
    int32_t ct = tx->tok_cfg ? llm__json_get(&jc, 0, "chat_template") : -1;
    if (ct >= 0 && jc.nodes[ct].type == LLM__JSON_ARR) {   // named templates: the default one
        int32_t d = -1;
        for (int32_t i = 0, k = ct + 1; i < jc.nodes[ct].n; i++, k = jc.nodes[k].next)
            if (llm__hf_member_is(&jc, k, "name", "default"))
                d = llm__json_get(&jc, k, "template");
        ct = d;
    }
    if (ct >= 0 && jc.nodes[ct].type == LLM__JSON_STR) {
        char *s = llm__json_strdup(&jc, ct, NULL);
        if (!s) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
        llm__gbuf_s(b, NULL, "tokenizer.chat_template", s);
        free(s);
    } else if (tx->tmpl) {
        llm__gbuf_key(b, NULL, "tokenizer.chat_template", LLM__GGUF_STR);
        llm__gbuf_str(b, tx->tmpl, tx->tmpl_len);
    }
    if (b->o.fail) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
done:
    llm__json_free(&j);
    llm__json_free(&jc);
    llm__json_free(&jg);
    llm__json_free(&jcfg);
    free(t.text.p);
    free(t.off);
    free(t.len);
    free(t.type);
    free(buf);
    return st;
}

// Builds g from a directory's texts (config.json's required; without tokenizer.json, no
// tokenizer) and the opened safetensors files in o, which g then owns (on failure: everything
// freed, g empty).
static enum llm_status llm__hf_build(struct llm__gguf *g, const struct llm__hf_texts *tx, struct llm__hf_owned *o,
                                     struct llm__err *e) {
    struct llm__gbuf b = {0};
    const char *arch = NULL;
    bool permute = false;
    int64_t hp[5] = {0};
    struct llm__hf_quant quant = {0};
    char hdr[24] = "GGUF";
    llm__gbuf_put(&b, hdr, 24);   // magic, version, counts: filled in below
    enum llm_status st = llm__hf_index(o, e);
    if (st == LLM_OK) st = llm__hf_config(tx->cfg, tx->cfg_len, &b, &arch, &permute, hp, &quant, e);
    const bool gemma = st == LLM_OK && (!strcmp(arch, "gemma2") || !strcmp(arch, "gemma3"));
    if (st == LLM_OK && tx->name) llm__gbuf_s(&b, NULL, "general.name", tx->name);
    // the vocabulary is as large as the embedding's rows, checked before the tokenizer makes a
    // token for every id below vocab_size: memory in proportion to what the files hold
    const struct llm__st_tensor *emb = st == LLM_OK && tx->tok ? llm__hf_find(o, "model.embed_tokens.weight") : NULL;
    if (st == LLM_OK && tx->tok && !emb)
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: no tensor model.embed_tokens.weight (the token embeddings)");
    else if (emb && (emb->n_dims != 2 || emb->shape[1] < 1))
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: model.embed_tokens.weight is not a matrix of at least one column");
    else if (emb && emb->shape[0] != hp[4])
        st = llm__fail(e, LLM_ERR_FORMAT, "hf: config.json's vocab_size is %lld, but model.embed_tokens.weight has %lld rows",
                       (long long)hp[4], (long long)emb->shape[0]);
    if (st == LLM_OK && tx->tok) st = llm__hf_tokenizer(tx, hp[4], &b, e);
    if (st) {
        free(b.o.p);
        llm__hf_owned_free(o);
        memset(g, 0, sizeof(*g));
        return st;
    }
    int64_t n_tensors = 0;
    for (int i = 0; i < o->n_files; i++) n_tensors += o->files[i].n;
    llm__gbuf_seal(&b);
    memset(g, 0, sizeof(*g));
    g->map = b.o.p;
    g->size = b.o.n;
    g->owns_buf = true;
    g->extra = o;
    g->extra_free = llm__hf_owned_free;
    if ((st = llm__gguf_parse(g, e)) == LLM_OK) {
        free(g->tensor_index.slots);
        g->tensor_index.slots = NULL;
        if (!llm__gguf_index_init(&g->tensor_index, n_tensors)) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        o->permute = permute, o->gemma = gemma, o->quantized = quant.method != 0;
        memcpy(o->hp, hp, sizeof(o->hp));
        for (int i = 0; i < o->n_files && st == LLM_OK; i++) st = llm__hf_add_tensors(g, o, &o->files[i], permute, gemma, hp, &quant, e);
    }
    if (st) llm__gguf_close(g);
    else g->version = 0;   // (not a GGUF file: llm_model_info says so)
    return st;
}

// A shard's file name from model.safetensors.index.json, checked to name a file inside the
// directory: not empty, no '/', not "." or "..", at most 255 bytes, no control characters.
static bool llm__hf_shard_name_ok(const char *s, size_t n) {
    if (n == 0 || n > 255 || strlen(s) != n || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) if ((unsigned char)s[i] < 0x20) return false;
    return true;
}

// The text of file `name` of the directory into *out (NULL and LLM_OK when it is absent and not
// required).
static enum llm_status llm__hf_read(const char *dir, const char *name, size_t max, bool required, char **out, size_t *len,
                                    struct llm__err *e) {
    char path[4096];
    *out = NULL;
    *len = 0;
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) return llm__fail(e, LLM_ERR_IO, "hf: directory path too long");
    if (!required && access(path, F_OK) != 0) return LLM_OK;
    if (required && access(path, F_OK) != 0)
        return llm__fail(e, LLM_ERR_IO, "hf: '%s' has no %s%s", dir, name,
                         strcmp(name, "tokenizer.json") == 0 ? " (the tokenizer; the engine reads no other form of it)" : "");
    return llm__read_file(path, max, out, len, e);
}

// Opens a Hugging Face model directory as g: config.json, model.safetensors or the shards that
// model.safetensors.index.json lists (every tensor it names checked to be in its shard),
// tokenizer.json, and tokenizer_config.json, generation_config.json and chat_template.jinja when
// they are there.
static enum llm_status llm__hf_open_dir(struct llm__gguf *g, const char *dir, bool read_all, struct llm__err *e) {
    memset(g, 0, sizeof(*g));
    char path[4096], *cfg = NULL, *idx = NULL, *tok = NULL, *tok_cfg = NULL, *gen_cfg = NULL, *tmpl = NULL, *name = NULL;
    size_t cfg_len = 0, idx_len = 0;
    struct llm__hf_texts tx = {0};
    struct llm__hf_owned *o = calloc(1, sizeof(*o));
    if (!o) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    enum llm_status st = LLM_OK;
    struct llm__json j = {0};
    if (snprintf(path, sizeof(path), "%s/config.json", dir) >= (int)sizeof(path)) st = llm__fail(e, LLM_ERR_IO, "hf: directory path too long");
    else if (access(path, F_OK) != 0)
        st = llm__fail(e, LLM_ERR_IO, "'%s' is a directory without config.json: a model is a GGUF file or a Hugging Face model "
                       "directory (config.json, model.safetensors, tokenizer.json)", dir);
    else st = llm__read_file(path, (size_t)16 << 20, &cfg, &cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "tokenizer.json", (size_t)1 << 30, true, &tok, &tx.tok_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "tokenizer_config.json", (size_t)64 << 20, false, &tok_cfg, &tx.tok_cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "generation_config.json", (size_t)16 << 20, false, &gen_cfg, &tx.gen_cfg_len, e);
    if (st == LLM_OK) st = llm__hf_read(dir, "chat_template.jinja", (size_t)16 << 20, false, &tmpl, &tx.tmpl_len, e);
    if (st == LLM_OK) {   // the model's name: the directory's
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/') b--;
        if (!(name = llm__strndup(dir + b, n - b))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    if (st == LLM_OK) {
        snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
        if (access(path, F_OK) == 0) {
            if ((st = llm__read_file(path, (size_t)64 << 20, &idx, &idx_len, e)) == LLM_OK)
                st = llm__json_parse(&j, idx, idx_len, "model.safetensors.index.json", e);
            const int32_t wm = st ? -1 : llm__json_get(&j, 0, "weight_map");
            if (st == LLM_OK && (wm < 0 || j.nodes[wm].type != LLM__JSON_OBJ || j.nodes[wm].n == 0))
                st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: no weight_map object of tensor names and files");
            // the shards' names, indexed (a weight_map of many tensors names its few files again and again)
            struct llm__gguf_index shard_ix = {0};
            const char **shard = NULL;
            if (st == LLM_OK && (!(o->files = calloc((size_t)j.nodes[wm].n, sizeof(*o->files))) ||
                                 !(shard = malloc((size_t)j.nodes[wm].n * sizeof(*shard))) ||
                                 !llm__gguf_index_init(&shard_ix, j.nodes[wm].n)))
                st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            for (int32_t m = 0, k = wm + 1; st == LLM_OK && m < j.nodes[wm].n; m++, k = j.nodes[k + 1].next) {
                size_t fl = 0, tl = 0;
                char *file = llm__json_strdup(&j, k + 1, &fl), *tname = llm__json_strdup(&j, k, &tl), pr[88];
                if (!file || !llm__hf_shard_name_ok(file, fl)) {
                    st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: '%s' is not a file name in the directory",
                                   file ? llm__gguf_printable(pr, file, fl) : "(not a string)");
                } else {
                    uint64_t slot;   // the shard, opened on its first mention
                    int64_t f = llm__gguf_index_find(&shard_ix, shard, sizeof(*shard), file, &slot);
                    if (f < 0) {
                        f = o->n_files;
                        snprintf(path, sizeof(path), "%s/%s", dir, file);
                        if ((st = llm__st_open(&o->files[f], path, read_all, e)) == LLM_OK) {
                            o->n_files++;
                            if (!(o->files[f].path_name = llm__strndup(file, fl))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
                            else shard[f] = o->files[f].path_name, shard_ix.slots[slot] = f;
                        }
                    }
                    if (st == LLM_OK && !llm__st_find(&o->files[f], tname))
                        st = llm__fail(e, LLM_ERR_FORMAT, "model.safetensors.index.json: tensor '%s' is not in %s",
                                       llm__gguf_printable(pr, tname, tl), file);
                }
                free(file);
                free(tname);
            }
            free(shard);
            free(shard_ix.slots);
        } else {
            snprintf(path, sizeof(path), "%s/model.safetensors", dir);
            if (access(path, F_OK) != 0)
                st = llm__fail(e, LLM_ERR_IO, "hf: '%s' has config.json but neither model.safetensors nor model.safetensors.index.json", dir);
            else if (!(o->files = calloc(1, sizeof(*o->files)))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            else if ((st = llm__st_open(&o->files[0], path, read_all, e)) == LLM_OK) o->n_files = 1;
        }
    }
    llm__json_free(&j);
    free(idx);
    tx.cfg = cfg;
    tx.cfg_len = cfg_len;
    tx.tok = tok;
    tx.tok_cfg = tok_cfg;
    tx.gen_cfg = gen_cfg;
    tx.tmpl = tmpl;
    tx.name = name;
    if (st == LLM_OK) st = llm__hf_build(g, &tx, o, e);   // (owns o now)
    else llm__hf_owned_free(o);
    free(cfg);
    free(tok);
    free(tok_cfg);
    free(gen_cfg);
    free(tmpl);
    free(name);
    return st;
}

// A model: a GGUF file, or a Hugging Face model directory.
static enum llm_status llm__model_open(struct llm__gguf *g, const char *path, bool read_all, struct llm__err *e) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return llm__hf_open_dir(g, path, read_all, e);
    return llm__gguf_open_file(g, path, read_all, e);
}

// === thread pool ===
//
// A persistent pool of worker threads. llm__pool_run(pool, fn, arg) runs fn(arg, i, n) once for
// every part i of [0, n) and returns when all n have finished; n is the number of threads that
// take part (llm__pool_nth: at most the pool's size, see "active" below). Part i is thread i's (the
// caller's is 0), but a thread must claim it: when a worker is not running (more threads than
// free cores: another program, a build, a browser), the caller takes its part over instead of
// waiting for it to be scheduled. Each part runs exactly once per job, on one thread, so fn may
// index per-part scratch by i. The ops split their work so that results do not depend on n (each
// output row, or attention item, is computed whole by one part).
//
// Waiting is spin-then-sleep on both sides. Between the jobs of one step (hundreds per token,
// microseconds apart) an idle worker spins on the job counter for LLM__POOL_SPIN, then sleeps (a
// futex on Linux, a condition variable elsewhere), so that it neither burns a core another
// program needs nor holds up the caller on a shared core. The caller, once its part is done and
// the others claimed, spins as long for the parts still running, then sleeps until the last one
// finishes: a worker descheduled in the middle of its part gets a core back sooner when the
// caller stops spinning.
//
// How many threads take part (active: the caller and workers 1..active-1; the others sleep,
// parked) is chosen by measuring steps (llm__pool_step_begin/end, below), never more than the
// cores the process may use: on a machine whose cores are busy with other programs, a worker
// preempted in the middle of its part stalls the whole job until it is scheduled again
// (milliseconds), and fewer threads are faster. With one, llm__pool_run is a plain call.

typedef void (*llm__job_fn)(void *arg, int ith, int nth);

// The step-time tuner's state for steps of one size (n_tokens); see llm__pool_step_begin.
#define LLM__TUNE_RUNGS 11   // active thread counts tried: 1, 2, 4, ..., 512 (and n itself)
#define LLM__TUNE_SIZES 4
#define LLM__TUNE_PROBE 5    // steps a probe counts at least
#define LLM__TUNE_RING 32    // and at most: the steps at cur kept to compare with
#define LLM__TUNE_SPAN 0.5e-3   // seconds of steps a probe and its comparison cover (up to RING)
#define LLM__TUNE_WARM 1e-3  // seconds of steps not counted after the threads change
#define LLM__TUNE_GAP 0.25e-3   // seconds of steps at least between probes, per step of the interval
struct llm__tune {
    int n_tokens;                  // the step size this entry is for (0: unused)
    unsigned long long last_use;
    int cur;                       // rung in use
    int probe;                     // rung being probed (-1: none)
    int dir;                       // the next probe's direction: -1 or +1
    int until_probe, interval;     // steps at cur before the next probe; steps between probes
    double probe_after;            // and the step clock's time before which none starts
    double last[LLM__TUNE_RING];   // the last steps at cur (seconds), a ring
    int cur_n, cur_pos;            // steps in it
    double probe_sum, probe_max;   // the probe's steps so far, and the slowest of them
    int probe_n;
    bool skip;                     // the next step does not count; nor do steps begun before
    double warm_until;             // this time (on the pool's step clock): threads waking up
    bool decided;                  // a probe has ended
    double more_cost;              // at the last probe's end: the higher rung's step time over the
                                   // lower one's (0: none yet)
};

struct llm__pool {
    int n_threads;
    pthread_t *threads;
    struct llm__pool_worker *workers;
    struct llm__pool_part *parts;   // [n_threads]
    uint64_t n_jobs;                // jobs published (the caller's count)
    // The current job, in one cache line: what a worker reads when woken. fn and arg are written
    // before cur, [job number: 54 bits][parts: 10], which is published before job, its number's
    // low 32 bits (the word idle workers sleep on).
    _Alignas(64) atomic_uint job;
    _Atomic uint64_t cur;
    llm__job_fn fn;
    void *arg;
    _Alignas(64) atomic_int sleepers;   // workers asleep on job (or about to be)
    atomic_int active;              // threads that take part in jobs
    atomic_uint park;               // bumped when active grows: the word parked workers sleep on
    atomic_bool stop;
    _Alignas(64) atomic_uint left;  // parts of the current job not finished: the caller's word
    atomic_int caller_sleeps;
#if !defined(__linux__)
    pthread_mutex_t mu;             // the fallback of the futex calls (llm__futex_*)
    pthread_cond_t cv;
#endif
    // the tuner (the caller's thread only)
    int rungs[LLM__TUNE_RUNGS], n_rungs, first_rung;
    struct llm__tune tune[LLM__TUNE_SIZES], *step_tune;
    int step_rung;
    unsigned long long n_steps;
    double step_t0;
    double step_clock;              // seconds of all steps timed so far (the tuner's clock)
};

struct llm__pool_worker { struct llm__pool *pool; int index; };
// Part i (i >= 1) of a job is worker i's; the caller takes it over when the worker has not
// claimed it soon enough. claimed, in the part's own cache line (the worker's alone as long as
// it keeps up), is the last job number that claimed the part: a compare-and-swap from a smaller
// number claims it, so a part is claimed once per job, and a thread still on an earlier job
// (every part of which was claimed) cannot claim a part of a later one.
struct llm__pool_part { _Alignas(64) _Atomic uint64_t claimed; };

// Spin budget of an idle worker and of the caller waiting for the last parts, in seconds: the jobs
// of a decode step follow each other within 1-5 us, and steps within tens of us (sampling);
// waking a sleeping thread costs 5-50 us. Yielding starts after LLM__POOL_YIELD (llm__pool_spin).
// A worker that is running claims its part within a microsecond of the job's publication; the
// caller takes over a part not claimed after LLM__POOL_GRACE. That is longer than
// LLM__POOL_YIELD: a worker on the caller's core gets it first (with 2 us instead of 10, the
// caller, never yielding, kept such a worker off its core, and the load balancer had no reason to
// move it: one core's speed, measured).
#define LLM__POOL_SPIN 50e-6
#define LLM__POOL_YIELD 5e-6
#define LLM__POOL_GRACE 10e-6

static inline void llm__cpu_relax(void) {
#if defined(LLM__X86)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Sleeps while *w == val. It may also return early (a signal, a wake-up meant for an earlier
// value): callers re-check their condition.
static void llm__futex_wait(struct llm__pool *pool, atomic_uint *w, unsigned val) {
#if defined(__linux__)
    (void)pool;
    syscall(SYS_futex, (void *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(w) == val) pthread_cond_wait(&pool->cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
#endif
}

// Wakes every thread asleep on w. The caller has changed *w before: with the fallback, a waiter
// that checked *w before the change is inside pthread_cond_wait by the time the mutex is ours.
static void llm__futex_wake(struct llm__pool *pool, atomic_uint *w) {
#if defined(__linux__)
    (void)pool;
    syscall(SYS_futex, (void *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
#endif
}

// Spins while *w == val (until_zero false) or until *w is 0 (until_zero true), for at most
// `budget` seconds; true when it stopped for *w. The clock is read every 16 pauses (a pause takes
// 10 to 150 cycles depending on the CPU, hence a budget in time rather than in iterations).
// After LLM__POOL_YIELD the spinning thread also yields: when the thread it waits for was placed
// on its core (a worker woken up lands on its waker's core until the load balancer moves one of
// them), spinning would keep that thread from running; a yield costs a system call when
// nothing else is runnable.
static bool llm__pool_spin(const atomic_uint *w, unsigned val, bool until_zero, double budget) {
    double t0 = 0.0;
    for (unsigned i = 1;; i++) {
        unsigned v = atomic_load_explicit(w, memory_order_acquire);
        if (until_zero ? v == 0 : v != val) return true;
        if ((i & 15) == 0) {
            double now = llm__now();
            if (t0 == 0.0) t0 = now;
            else if (now - t0 > budget) return false;
            else if (now - t0 > LLM__POOL_YIELD) sched_yield();
        }
        llm__cpu_relax();
    }
}

static bool llm__pool_claim(struct llm__pool *pool, int i, uint64_t job) {
    uint64_t v = atomic_load_explicit(&pool->parts[i].claimed, memory_order_relaxed);
    return v < job && atomic_compare_exchange_strong_explicit(&pool->parts[i].claimed, &v, job, memory_order_relaxed,
                                                              memory_order_relaxed);
}

// Runs part i and counts it done (the last part wakes a caller that sleeps).
static void llm__pool_part_run(struct llm__pool *pool, int i, int nth) {
    pool->fn(pool->arg, i, nth);
    // seq_cst, as the caller's caller_sleeps store then left load: one sees the other.
    if (atomic_fetch_sub(&pool->left, 1) == 1 && atomic_load(&pool->caller_sleeps))
        llm__futex_wake(pool, &pool->left);
}

static void *llm__pool_main(void *p) {
    struct llm__pool_worker *wk = p;
    struct llm__pool *pool = wk->pool;
    unsigned seen = 0;
    while (!atomic_load_explicit(&pool->stop, memory_order_acquire)) {
        if (wk->index >= atomic_load(&pool->active)) {
            // Parked. park is read before active: a rise of active after that read bumps park,
            // and the wait returns at once.
            unsigned pk = atomic_load(&pool->park);
            if (wk->index >= atomic_load(&pool->active) && !atomic_load(&pool->stop))
                llm__futex_wait(pool, &pool->park, pk);
            continue;
        }
        if (!llm__pool_spin(&pool->job, seen, false, LLM__POOL_SPIN)) {
            // Sleep. sleepers is raised before job is read again, and llm__pool_run reads
            // sleepers after it bumps job (all seq_cst): a wake-up cannot be lost.
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->job) == seen && wk->index < atomic_load(&pool->active))
                llm__futex_wait(pool, &pool->job, seen);
            atomic_fetch_sub(&pool->sleepers, 1);
        }
        // (Woken also when parked: then the job may be the one already seen.)
        unsigned job = atomic_load_explicit(&pool->job, memory_order_acquire);
        if (job == seen || atomic_load_explicit(&pool->stop, memory_order_acquire)) continue;
        seen = job;
        const uint64_t cur = atomic_load_explicit(&pool->cur, memory_order_acquire);
        const int nth = (int)(cur & 1023);
        if (wk->index < nth && llm__pool_claim(pool, wk->index, cur >> 10)) llm__pool_part_run(pool, wk->index, nth);
    }
    return NULL;
}

// Parts of the next job: the active thread count (what a job that sizes per-part state before
// llm__pool_run must use).
static inline int llm__pool_nth(const struct llm__pool *pool) {
    return atomic_load_explicit(&pool->active, memory_order_relaxed);
}

static void llm__pool_run(struct llm__pool *pool, llm__job_fn fn, void *arg) {
    const int n = llm__pool_nth(pool);
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    const uint64_t job = ++pool->n_jobs;
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->left, (unsigned)n, memory_order_relaxed);
    atomic_store_explicit(&pool->cur, job << 10 | (uint64_t)n, memory_order_release);
    atomic_store(&pool->job, (unsigned)job);   // seq_cst: pairs with a worker's sleepers increment
    if (atomic_load(&pool->sleepers) > 0) llm__futex_wake(pool, &pool->job);
    llm__pool_part_run(pool, 0, n);
    // Wait for the other parts. LLM__POOL_GRACE after its own part, take over those whose
    // workers have not claimed them (asleep, or descheduled: more threads than free cores), so
    // that the job does not wait for them to be scheduled. Then spin for the parts still running,
    // and sleep (a descheduled worker gets this core sooner). The grace counts from the end of
    // the caller's part, not from the job's publication: then no clock is read at all where the
    // workers are done by then, as in nearly every job of a decode step (short jobs, each of
    // which used to pay two clock reads).
    unsigned left = atomic_load_explicit(&pool->left, memory_order_acquire);
    if (left != 0 && !llm__pool_spin(&pool->left, 0, true, LLM__POOL_GRACE))
        for (int i = 1; i < n; i++)
            if (llm__pool_claim(pool, i, job)) llm__pool_part_run(pool, i, n);
    while ((left = atomic_load_explicit(&pool->left, memory_order_acquire)) != 0) {
        if (llm__pool_spin(&pool->left, left, false, LLM__POOL_SPIN)) continue;
        atomic_store(&pool->caller_sleeps, 1);
        while ((left = atomic_load(&pool->left)) != 0) llm__futex_wait(pool, &pool->left, left);
        atomic_store(&pool->caller_sleeps, 0);
    }
}

// Threads that take part in the next jobs (1..n): the caller and workers 1..active-1.
static void llm__pool_set_active(struct llm__pool *pool, int active) {
    active = LLM__MAX(1, LLM__MIN(active, pool->n_threads));
    int old = atomic_load_explicit(&pool->active, memory_order_relaxed);
    if (active == old) return;
    atomic_store(&pool->active, active);
    if (active > old) {
        atomic_fetch_add(&pool->park, 1);
        llm__futex_wake(pool, &pool->park);
    }
}

// --- choosing the number of active threads by measuring steps ---
//
// The steps of a generation repeat (one decode step after another, chunks of a long prompt), so
// the time of steps at one thread count can be compared with the next ones at another. Per step
// size (n_tokens; the last LLM__TUNE_SIZES sizes seen) the tuner runs at one rung of the ladder
// 1, 2, 4, ..., min(n, cores) and now and then runs a few steps at a neighbouring rung (a
// probe, alternately below and above). It compares the mean time of the probe's steps with that
// of as many steps just before it, each without its slowest step (one preemption of the caller):
// at least LLM__TUNE_PROBE steps and LLM__TUNE_SPAN of time, at most LLM__TUNE_RING steps. A probe step 4 times as slow as those and 0.5 ms slower ends the
// probe at once. Adjacent windows of equal length, because another program's load comes and goes;
// means, because on a shared machine step times are bimodal (fast while the other program waits
// for a core, slow while a worker waits for one) and the mean is the throughput. Steps in which
// threads change are not counted: the first after a change, and those begun within
// LLM__TUNE_WARM of it (parked workers take that long to run again where they should; a tiny
// model's steps take 20 us); nor are the first steps of a new step size (caches, page faults).
//
// A probe faster by 3% moves the tuner there (and the next probe, 4 steps later, looks further
// that way); a probe 15% slower after two steps ends there; one that loses makes the steps until
// the next probe 4 times as many, up to 256, so that on a steady machine probes cost about 1% at
// most and the tuner still follows a machine whose load changes within a second or two. Tiny
// models' steps are so short that the warm-up dominates a probe: probes are also LLM__TUNE_GAP
// of step time per step of the interval apart (64 ms at 256). A new step size starts where the
// last one probed is, and follows it until its own first probe (llm__tune_start says when not).

// The mean of n step times without the slowest (one preemption of the caller alone).
static double llm__tune_mean(double sum, double max, int n) {
    return n >= 2 ? (sum - max) / (n - 1) : sum;
}

// Whether the steps at cur kept cover enough time to compare a probe with: LLM__TUNE_SPAN, or a
// full ring (a tiny model's decode steps take 20 us: 5 of them are too few against the noise of
// a shared machine, and a wrong move to one thread costs 20% there).
static bool llm__tune_ready(const struct llm__tune *t) {
    if (t->cur_n < LLM__TUNE_PROBE) return false;
    double sum = 0.0;
    for (int i = 0; i < t->cur_n; i++) sum += t->last[i];
    return t->cur_n == LLM__TUNE_RING || sum >= LLM__TUNE_SPAN;
}

// The rung a size that has not been probed yet starts at (or stays at until its first probe): the
// last probed size's, unless that size has fewer tokens and its last probe found more threads
// less than 2 times as slow: then the top. A step of more tokens has more work per job, so
// threads pay off more: a tiny model's decode (jobs of a microsecond) can run 25% faster on one
// thread than on two while its prompt steps run 25% slower there (measured). On a busy machine
// more threads are several times as slow (workers preempted in their parts), for prompt steps
// too: they follow.
static int llm__tune_start(const struct llm__pool *pool, const struct llm__tune *last, int n_tokens) {
    if (!last) return pool->first_rung;
    return last->n_tokens >= n_tokens || last->more_cost > 2.0 ? last->cur : pool->first_rung;
}

static struct llm__tune *llm__tune_find(struct llm__pool *pool, int n_tokens) {
    struct llm__tune *t = NULL, *lru = &pool->tune[0], *last = NULL;
    for (int i = 0; i < LLM__TUNE_SIZES; i++) {
        struct llm__tune *u = &pool->tune[i];
        if (u->n_tokens == n_tokens) t = u;
        if (u->last_use < lru->last_use) lru = u;
        if (u->decided && (!last || u->last_use > last->last_use)) last = u;
    }
    if (t && !t->decided && t->probe < 0 && t->cur != llm__tune_start(pool, last, n_tokens)) {
        // A size too rare to have been probed yet (a prompt's step among decode steps) follows
        // the last size that was.
        t->cur = llm__tune_start(pool, last, n_tokens);
        t->cur_n = t->cur_pos = 0;
    }
    if (!t) {
        t = lru;
        int cur = llm__tune_start(pool, last, n_tokens);
        memset(t, 0, sizeof(*t));
        t->n_tokens = n_tokens;
        t->cur = cur;
        t->probe = -1;
        t->dir = -1;
        t->skip = true;       // the first steps fault weights and caches in
        t->warm_until = pool->step_clock + LLM__TUNE_WARM;
        t->until_probe = LLM__TUNE_PROBE;
        t->interval = 4;
    }
    t->last_use = ++pool->n_steps;
    return t;
}

static void llm__pool_step_begin(struct llm__pool *pool, int n_tokens) {
    pool->step_tune = NULL;
    if (pool->n_rungs < 2) return;
    struct llm__tune *t = llm__tune_find(pool, n_tokens);
    if (t->probe < 0 && t->until_probe == 0 && pool->step_clock >= t->probe_after && llm__tune_ready(t)) {
        if (t->cur + t->dir < 0 || t->cur + t->dir >= pool->n_rungs) t->dir = -t->dir;
        t->probe = t->cur + t->dir;
        t->probe_sum = t->probe_max = 0.0;
        t->probe_n = 0;
        t->skip = true;
        t->warm_until = pool->step_clock + LLM__TUNE_WARM;
    }
    pool->step_tune = t;
    pool->step_rung = t->probe >= 0 ? t->probe : t->cur;
    llm__pool_set_active(pool, pool->rungs[pool->step_rung]);
    pool->step_t0 = llm__now();
}

// Records the time of the step begun last (seconds); at the end of a probe, decides.
static void llm__pool_step_record(struct llm__pool *pool, double dt) {
    struct llm__tune *t = pool->step_tune;
    if (!t) return;
    pool->step_tune = NULL;
    bool counts = !t->skip && pool->step_clock >= t->warm_until;
    pool->step_clock += dt;
    t->skip = false;
    if (pool->step_rung == t->cur) {
        if (!counts) return;
        t->last[t->cur_pos] = dt;
        t->cur_pos = (t->cur_pos + 1) % LLM__TUNE_RING;
        t->cur_n = LLM__MIN(t->cur_n + 1, LLM__TUNE_RING);
        if (t->until_probe > 0) t->until_probe--;
        return;
    }
    // The steps at cur just before the probe, as many as the probe has (at least PROBE).
    const int k = LLM__MIN(t->cur_n, LLM__MAX(t->probe_n + 1, LLM__TUNE_PROBE));
    double sum = 0.0, max = 0.0;
    for (int i = 1; i <= k; i++) {
        const double x = t->last[(t->cur_pos - i + LLM__TUNE_RING) % LLM__TUNE_RING];
        sum += x, max = LLM__MAX(max, x);
    }
    const double cur = llm__tune_mean(sum, max, k);
    // A probe step 4 times as slow and 0.5 ms slower (workers preempted in their parts) ends the
    // probe, warm-up or not: no wake-up costs that much.
    const bool hopeless = dt > 4.0 * cur && dt - cur > 0.5e-3;
    if (!counts && !hopeless) return;
    t->probe_n++;
    t->probe_sum += dt;
    t->probe_max = LLM__MAX(t->probe_max, dt);
    const double probe = hopeless ? dt : llm__tune_mean(t->probe_sum, t->probe_max, t->probe_n);
    // Clearly slower after two steps: over already.
    const bool enough = t->probe_n >= LLM__TUNE_PROBE &&
                        (t->probe_sum >= LLM__TUNE_SPAN || t->probe_n >= LLM__MIN(t->cur_n, LLM__TUNE_RING));
    if (!hopeless && !enough && !(t->probe_n >= 2 && probe > 1.15 * cur)) return;
    t->more_cost = t->probe > t->cur ? probe / cur : cur / probe;
    if (probe < 0.97 * cur) {
        t->cur = t->probe;
        t->interval = 4;
    } else {
        t->dir = -t->dir;
        t->interval = LLM__MIN(4 * t->interval, 256);
    }
    if (t->cur != t->probe) {   // back from a probe: threads parked or woken again
        t->skip = true;
        t->warm_until = pool->step_clock + LLM__TUNE_WARM;
    }
    t->cur_n = t->cur_pos = 0;
    t->probe = -1;
    t->until_probe = t->interval;
    t->probe_after = pool->step_clock + t->interval * LLM__TUNE_GAP;
    t->decided = true;
}

static void llm__pool_step_end(struct llm__pool *pool) {
    if (pool->step_tune) llm__pool_step_record(pool, llm__now() - pool->step_t0);
}

// Cores this process may run on (1..256): on Linux, those of its affinity mask (taskset, a
// container's cpuset), else the cores online; 1 where the system cannot tell
// (_SC_NPROCESSORS_ONLN is not POSIX, but Linux, macOS and the BSDs have it).
static int llm__online_cpus(void) {
    long n = 1;
#if defined(_SC_NPROCESSORS_ONLN)
    n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;   // 1024 cores; with more, sched_getaffinity fails and the count above stays
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 1) n = CPU_COUNT(&set);
#endif
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

static void llm__pool_free(struct llm__pool *pool) {
    if (!pool) return;
    if (pool->threads) {
        atomic_store(&pool->stop, true);
        atomic_fetch_add(&pool->job, 1);
        atomic_fetch_add(&pool->park, 1);
        llm__futex_wake(pool, &pool->job);
        llm__futex_wake(pool, &pool->park);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
    }
#if !defined(__linux__)
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
#endif
    free(pool->threads);
    free(pool->workers);
    free(pool->parts);
    free(pool);
}

static struct llm__pool *llm__pool_new(int n_threads, struct llm__err *e) {
    struct llm__pool *pool = llm__alloc(sizeof(*pool));
    if (!pool) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return NULL; }
    memset(pool, 0, sizeof(*pool));
    pool->n_threads = n_threads;
    atomic_init(&pool->cur, 0);   // job 0, no parts
    pool->parts = llm__alloc(sizeof(struct llm__pool_part) * (size_t)n_threads);
    if (!pool->parts) {
        free(pool);
        llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&pool->parts[i].claimed, 0);
    atomic_init(&pool->job, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->park, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->left, 0);
    atomic_init(&pool->caller_sleeps, 0);
    // The ladder: 1, 2, 4, ... up to n_threads or the cores this process may use, whichever is
    // fewer (more threads than cores are never faster, and a probe there costs a lot: workers
    // preempted in their parts).
    const int cores = llm__online_cpus(), top = LLM__MIN(n_threads, cores);
    for (int k = 1; k < top && pool->n_rungs < LLM__TUNE_RUNGS - 1; k *= 2) pool->rungs[pool->n_rungs++] = k;
    pool->rungs[pool->n_rungs++] = top;
    // The start (jobs before the first step: weights repacked at load; the first step size): the top.
    pool->first_rung = pool->n_rungs - 1;
    atomic_init(&pool->active, pool->rungs[pool->first_rung]);
#if !defined(__linux__)
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
#endif
    if (n_threads == 1) return pool;
    pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    pool->workers = calloc((size_t)n_threads, sizeof(struct llm__pool_worker));
    if (!pool->threads || !pool->workers) {
        llm__pool_free(pool);
        llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        pool->workers[i] = (struct llm__pool_worker){pool, i};
        if (pthread_create(&pool->threads[i], NULL, llm__pool_main, &pool->workers[i]) != 0) {
            pool->n_threads = i;   // join only the ones that started
            llm__pool_free(pool);
            llm__fail(e, LLM_ERR_BACKEND, "cannot start worker thread %d", i);
            return NULL;
        }
    }
    return pool;
}

// Splits [0, n) into nth near-equal parts; part ith is [*lo, *hi).
static inline void llm__split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, rem = n % nth;
    *lo = ith * per + LLM__MIN(ith, rem);
    *hi = *lo + per + (ith < rem);
}

// === backend vtable ===
//
// The transformer (section "transformer") calls only these ops; a backend fills one table,
// struct llm_backend_i, with designated initializers (`.matmul = llm__cpu_matmul,`). Ops take
// backend buffers (struct llm__buf), never host pointers, so the same layer loop runs on the CPU
// and on a GPU. The contract every backend keeps (the CPU backend below is the reference):
//
// Entries. Every entry is required unless its comment says "optional" and what NULL means there.
//   llm__backend_check refuses a table with a required entry NULL when a backend is opened
//   (LLM_ERR_BACKEND naming the op), so the engine calls required entries without testing them.
// Allocation. Only buf_alloc, weight_load and reserve allocate (device or host memory, pipelines
//   for a weight type, scratch), plus the optional bandwidth probe, which frees what it takes.
//   begin_step, the ops and end_step never do: reserve sizes every scratch buffer for the largest
//   step (struct llm__shape) before the first one, so a decode step allocates nothing. A step
//   beyond the reserved shape is a programmer error (an assert, or end_step's error).
// Steps. begin_step hands over the step's arrays (struct llm__step), which stay valid and
//   unchanged until end_step; ops in between may read them. Ops return nothing: a backend keeps
//   the first failure of a step's ops and end_step returns it (with its message in e).
// Threads. The engine calls the table from one thread at a time (the engine's caller; llm.h:
//   one engine, one thread at a time). Ops may run asynchronously: what they write is ready for
//   download once end_step (or sync) has returned. The CPU backend runs each op on its own pool
//   of worker threads and returns when the op is done.
// KV cache. The engine allocates each of the K and V caches with one buf_alloc of n_layer x
//   n_blocks x block_size rows of row_bytes(kv type, n_head_kv * head_dim) and hands kv_store and
//   attention per-layer views (struct llm__tensor) of it; it never reads them. It addresses the
//   cache only by slot (= block * block_size + offset in the block: struct llm__step). How the
//   values of a block are laid out inside it is private to the backend's kv_store and attention.
// Matmul. One call multiplies up to LLM__MAX_MATMUL_WEIGHTS weights that share one input (the
//   q/k/v projections: 3), so a backend quantizes or rounds the input once for all of them.
// Devices. A GPU backend also lists its devices for llm_list_devices (llm__list_devices, in the
//   public API section: index i there is the device `index` i of its constructor) and may probe
//   bandwidth for llm_measure_bandwidth; CPU-only builds list none.

// Weights sharing one input in a matmul call, at most (the transformer's q/k/v projections).
#define LLM__MAX_MATMUL_WEIGHTS 3

// Memory owned by a backend. The CPU backend's `data` is host memory; a GPU backend keeps its
// handles in `handle`.
struct llm__buf {
    void *data;
    size_t size;
    void *handle;
    bool borrowed;   // data belongs to someone else (e.g. the mapped model file)
};

// A 2-D view of a buffer: ne1 rows of ne0 elements, rows nb1 bytes apart.
struct llm__tensor {
    struct llm__buf *buf;
    size_t offs;
    int type;
    int64_t ne0, ne1;
    size_t nb1;
};

// A weight matrix of ne1 rows (output features) by ne0 columns (input features), in whatever
// layout the backend chose when loading it (it may repack).
struct llm__weight {
    int type;
    int64_t ne0, ne1;
    struct llm__buf buf;
    int layout;   // backend-specific
    // GPTQ act-order (set by the engine after weight_load): column k multiplies input perm[k]
    // (ne0 int32, LLM__TYPE_I32), so the engine gathers the input (gather_cols) first. No buffer: none.
    struct llm__tensor perm;
};

// Rotary position embedding settings of a model.
struct llm__rope {
    int n_rot;                 // rotated dimensions per head (<= head_dim)
    bool neox;                 // rotate pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    float freq_base;
    float freq_scale;          // linear scaling: positions are multiplied by this
    struct llm__tensor freq_factors;   // n_rot/2 divisors of the frequencies (Llama 3.1); no buffer: none
};

// What one engine step computes: n_tokens tokens of up to n_seqs sequences. Token i belongs to
// sequence seq_idx[i] (a row of block_tables) at position positions[i]; its K/V go to cache slot
// slot_mapping[i] (= block * block_size + offset). Attention of token i covers positions
// 0..positions[i] of its sequence. Logits are wanted for the out_rows[0..n_out) tokens.
struct llm__step {
    int n_tokens;
    const int32_t *tokens;        // [n_tokens]
    const int32_t *positions;     // [n_tokens]
    const int32_t *seq_idx;       // [n_tokens]
    const int32_t *slot_mapping;  // [n_tokens]
    int n_seqs;
    int max_blocks;               // columns of block_tables
    const int32_t *block_tables;  // [n_seqs][max_blocks]
    int block_size;
    int n_out;
    const int32_t *out_rows;      // [n_out]
};

// The largest step the engine will run, for llm_backend_i.reserve: every step has n_tokens <=
// max_tokens, n_out <= max_out, n_seqs <= max_seqs, max_blocks <= this max_blocks.
struct llm__shape {
    int max_tokens;      // tokens per step
    int max_out;         // logit rows per step
    int max_seqs;        // sequences per step
    int max_blocks;      // block table columns: the blocks of the longest sequence
    int64_t max_cols;    // longest matmul input row
    int n_head, n_head_kv, head_dim, block_size;
};

struct llm__attn {
    int n_head, n_head_kv, head_dim;
    float scale;       // scores are q.k * scale
    int window;        // sliding window: a token at position p sees keys at p - window + 1 .. p; 0: all
    float softcap;     // scores become softcap * tanh(score / softcap) before the softmax; 0: none
};

struct llm_backend_i {
    const char *name;   // "cpu", "vulkan", "cuda": llm_get_engine_info's backend_name
    void (*free)(void *ctx);   // frees the backend; every buffer and weight was freed before

    // --- memory (may allocate; never between begin_step and end_step) ---
    enum llm_status (*buf_alloc)(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e);
    void (*buf_free)(void *ctx, struct llm__buf *buf);
    // Takes a weight from host memory (the mapped file; it stays mapped while the engine lives):
    // copies or repacks it, or borrows it in place. A type the backend cannot multiply is refused
    // here (LLM_ERR_UNSUPPORTED), not at the first step.
    enum llm_status (*weight_load)(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                   int64_t ne1, const void *data, struct llm__err *e);
    void (*weight_free)(void *ctx, struct llm__weight *w);
    // Copies n bytes between host memory and a buffer, outside steps (synchronous).
    void (*upload)(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n);
    void (*download)(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n);
    // Sizes the backend's scratch memory for the largest step, once, so that steps never allocate.
    enum llm_status (*reserve)(void *ctx, const struct llm__shape *shape, struct llm__err *e);
    size_t (*mem_free)(void *ctx);   // memory left for the KV cache, in bytes (0: unknown)

    // --- steps ---
    void (*begin_step)(void *ctx, const struct llm__step *step);
    // Waits for every op of the step; the first failure of any of them, or LLM_OK.
    enum llm_status (*end_step)(void *ctx, struct llm__err *e);
    // Optional: waits for the ops issued so far (profiling times each op) and reports their first
    // failure; the step goes on. NULL: every op has finished when it returns.
    enum llm_status (*sync)(void *ctx, struct llm__err *e);

    // --- ops (between begin_step and end_step; tensors f32 unless a cache) ---
    // dst[i] = table row step->tokens[i]                                  (n_tokens rows)
    void (*embed)(void *ctx, struct llm__tensor dst, const struct llm__weight *table);
    // dst = x / rms(x) * w, row by row
    void (*rmsnorm)(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor w,
                    float eps);
    // dst[j] = x @ w[j]^T (+ bias[j] when bias and bias[j].buf) for j < n, 1 <= n <=
    // LLM__MAX_MATMUL_WEIGHTS: several weights sharing one input
    void (*matmul)(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                   const struct llm__tensor *bias, struct llm__tensor x);
    // rotates each head of each row of x in place by its token's position
    void (*rope)(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *rope);
    // writes each token's k and v rows into the caches at its slot (the backend's layout)
    void (*kv_store)(void *ctx, struct llm__tensor k_cache, struct llm__tensor v_cache,
                     struct llm__tensor k, struct llm__tensor v);
    // paged causal attention of each token's q over its sequence's cached K/V
    void (*attention)(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                      struct llm__tensor v_cache, const struct llm__attn *p);
    void (*silu_mul)(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up);
    void (*add)(void *ctx, struct llm__tensor dst, struct llm__tensor a, struct llm__tensor b);
    // dst[i] = src[step->out_rows[i]]                                       (n_out rows)
    void (*get_rows)(void *ctx, struct llm__tensor dst, struct llm__tensor src);

    // --- ops of some architectures (optional: NULL / false, and a model that needs them is
    // refused at load with a message naming the backend) ---
    // dst = x * s, element by element (Gemma's embedding scaling)
    void (*scale)(void *ctx, struct llm__tensor dst, struct llm__tensor x, float s);
    // dst = gelu(gate) * up, GELU's tanh approximation (Gemma's GeGLU feed-forward)
    void (*gelu_mul)(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up);
    // attention as above, also honouring llm__attn.window and .softcap (which attention ignores)
    void (*attention_window)(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                             struct llm__tensor v_cache, const struct llm__attn *p);
    // dst[i][k] = x[i][perm[k]], perm int32: GPTQ act-order weights' inputs (optional: NULL, and
    // such a checkpoint is refused at load with a message naming the backend)
    void (*gather_cols)(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor perm);

    // --- device (optional) ---
    // The device's name, for llm_get_engine_info. NULL: "".
    const char *(*device_name)(void *ctx);
    // The device's memory bandwidth in GB/s, measured by copying (may allocate and free a
    // buffer; outside steps). NULL: llm_measure_bandwidth says LLM_ERR_UNSUPPORTED.
    enum llm_status (*bandwidth)(void *ctx, double *gbps, struct llm__err *e);
};

struct llm_backend {
    const struct llm_backend_i *iface;
    void *ctx;
};

// LLM_OK when every required entry of the table is there; else LLM_ERR_BACKEND naming the first
// one missing. Called on every backend as it is opened (llm__backend_open).
static enum llm_status llm__backend_check(const struct llm_backend_i *b, struct llm__err *e) {
    const struct { const char *op; bool set; } req[] = {
        {"name", b->name != NULL}, {"free", b->free != NULL}, {"buf_alloc", b->buf_alloc != NULL},
        {"buf_free", b->buf_free != NULL}, {"weight_load", b->weight_load != NULL},
        {"weight_free", b->weight_free != NULL}, {"upload", b->upload != NULL}, {"download", b->download != NULL},
        {"reserve", b->reserve != NULL}, {"mem_free", b->mem_free != NULL}, {"begin_step", b->begin_step != NULL},
        {"end_step", b->end_step != NULL}, {"embed", b->embed != NULL}, {"rmsnorm", b->rmsnorm != NULL},
        {"matmul", b->matmul != NULL}, {"rope", b->rope != NULL}, {"kv_store", b->kv_store != NULL},
        {"attention", b->attention != NULL}, {"silu_mul", b->silu_mul != NULL}, {"add", b->add != NULL},
        {"get_rows", b->get_rows != NULL},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(req); i++)
        if (!req[i].set)
            return llm__fail(e, LLM_ERR_BACKEND, "backend '%s': the required op '%s' is missing",
                             b->name ? b->name : "(unnamed)", req[i].op);
    return LLM_OK;
}

static inline char *llm__tensor_row(struct llm__tensor t, int64_t i) {
    return (char *)t.buf->data + t.offs + (size_t)i * t.nb1;
}

// === CPU backend ===
//
// Every op is one job on the thread pool. Matrix products quantize the activations once to the
// weight's dot-product type (Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16, as
// llama.cpp does), then each thread takes chunks of weight rows. A step with many tokens (prefill)
// walks tiles of rows x tokens so a tile of weights stays in cache while it meets many tokens.

// A thread's share of the chunks of a job: it takes them front to back from its own cursor,
// then helps the others from theirs. Contiguous shares keep each core on one stream through
// memory (chunks handed out round-robin made the hardware prefetchers restart at every chunk:
// 25 vs 45 GB/s measured); the stealing evens out a thread that fell behind.
struct llm__cursor {
    _Alignas(64) atomic_int_fast64_t next;
    int64_t end;
};

struct llm__cpu {
    struct llm__pool *pool;
    struct llm__cursor *cursors;   // [n_threads]
    enum llm__simd simd;
    bool repack;                // rewrite weights into the x16 layouts (AVX-512; see below)
    llm__vec_dot_fn vec_dot[LLM__TYPE_COUNT];
    const struct llm__step *step;
    void *scratch;              // quantized activations
    size_t scratch_size;
    float *gelu;                // [65536]: llm__gelu_ggml of each half-precision input (made on first use)
};

// --- repacked weights: 16 rows interleaved, for AVX-512 VNNI ---
//
// A matrix-vector product reads each weight once per token, so decode speed is how fast the
// weights stream from memory; a prompt multiplies each weight with many tokens, so prefill speed
// is how few instructions a multiply-add takes. The GGUF layout (34- or 18-byte blocks, one row
// after another) serves neither: unaligned loads, and per-row dot products that end in
// horizontal sums. At load time the CPU backend rewrites Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 matrices
// whose row count is a multiple of 16 (and Q4_K and Q3_K ones, in layouts of their own, below)
// into the "x16" layout: for each group of 16 rows and each
// block of 32 columns, the rows' quants interleaved 4 bytes at a time, so one 64-byte vector holds
// the same 4 columns of 16 rows. vpdpbusd against 4 broadcast activation bytes then adds 4
// products into each row's own lane; 8 of them finish a block of 16 rows, with no horizontal sum,
// and one multiply-add applies the 16 rows' scales times the token's. Per group of 16 rows, in
// units of two blocks (64-byte aligned; an odd last block gets 32 bytes of padding):
//
//   Q8_0: per block 8 chunks of 64 bytes, chunk c = columns 4c..4c+3 of rows 0..15, +128 each
//         (unsigned, for vpdpbusd)
//   Q4_0, Q4_1: per block 4 chunks of 64 bytes, chunk c = quant bytes 4c..4c+3 of rows 0..15 as
//         stored (low nibbles: columns 4c..4c+3; high nibbles: columns 16+4c..16+4c+3; 0..15)
//   Q5_0, Q5_1: the 4 chunks of nibbles, then the fifth bits as 16 words, one per row, arranged
//         for the kernel: bit c of byte k is column 4c+k's, bit 4+c column 16+4c+k's (c, k < 4),
//         so that one shift and a mask put chunk c's bits at bit 4 of each byte
//   then the 2 x 16 fp16 scales of the unit's blocks, row by row; Q4_1, Q5_1: then their mins
//
// Activations are quantized to Q8_0 exactly as for the plain kernels and laid out per token as K
// quant bytes, K/32 block scales (f32) and K/32 values -c * (sum of the block's quants), where c
// is the offset of the weight encoding (128 for Q8_0, 8 for Q4_0, 16 for Q5_0): a row's block sum
// starts from that value, so sum((w + c) * a) - c * sum(a) = sum(w * a), exactly. For Q4_1 and
// Q5_1 (x = d * q + m) that last value is instead the f32 s of their Q8_1 activations, fp16(d *
// sum of the quants), and the min's share m * s is added per block as the plain kernels do. 1.25
// bytes per column: a long row's activations stay in L1 while the weights stream past.

enum { LLM__LAYOUT_PLAIN = 0, LLM__LAYOUT_X16 = 1 };
#define LLM__X16_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 4)   // bytes per token of x16 activations

static bool llm__x16_five(int type) { return type == LLM__TYPE_Q5_0 || type == LLM__TYPE_Q5_1; }
static bool llm__x16_min(int type) { return type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1; }

static bool llm__x16_supported(int type, int64_t ne0, int64_t ne1) {
    if (ne1 % 16 != 0) return false;
    switch (type) {
    case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128: return true;
    case LLM__TYPE_Q8_0: case LLM__TYPE_Q4_0: case LLM__TYPE_Q4_1: case LLM__TYPE_Q5_0: case LLM__TYPE_Q5_1:
        return ne0 % 32 == 0;
    case LLM__TYPE_Q4_K: case LLM__TYPE_Q3_K: return ne0 % 256 == 0;
    default: return false;
    }
}

// Bytes of quants per block of 16 rows; of scales (and mins) per unit; offsets of block b's
// quants, scales and mins in a record of nb blocks; bytes of a record.
static size_t llm__x16_qbytes(int type) { return type == LLM__TYPE_Q8_0 ? 512 : llm__x16_five(type) ? 320 : 256; }
static size_t llm__x16_sbytes(int type) { return llm__x16_min(type) ? 128 : 64; }
static size_t llm__x16_unit(int type) { return 2 * llm__x16_qbytes(type) + llm__x16_sbytes(type); }
static size_t llm__x16_qoffs(int type, int64_t b) {
    return (size_t)(b / 2) * llm__x16_unit(type) + (size_t)(b % 2) * llm__x16_qbytes(type);
}
static size_t llm__x16_soffs(int type, int64_t b, int64_t nb) {
    size_t nq = b / 2 * 2 + 1 < nb ? 2 : 1;   // blocks in this unit
    return (size_t)(b / 2) * llm__x16_unit(type) + nq * llm__x16_qbytes(type) + (size_t)(b % 2) * 32;
}
// G4 (AWQ / GPTQ 4-bit) records: per quantization group of g inputs (g / 32 blocks), the blocks'
// quants in Q4_0's chunks (256 bytes each), then the 16 rows' fp16 scales d and int16 zero points
// z (64 bytes): 4.25 bits a weight at g = 128, as the plain layout. Their activations are Q4_1's
// x16 format with s = d_a * (sum of the block's quants) exact in f32 (no fp16 rounding), and a
// block adds d * d_a * sum(q * a) - (d * z) * s, d * z exact in f32.
static size_t llm__x16g_unit(int type) { return (size_t)(llm__gq_group(type) / 32) * 256 + 64; }

static size_t llm__x16q3_group_bytes(int64_t ne0);
static size_t llm__x16_group_bytes(int type, int64_t ne0) {
    if (llm__is_gq(type)) return (size_t)(ne0 / llm__gq_group(type)) * llm__x16g_unit(type);
    if (type == LLM__TYPE_Q4_K) return (size_t)(ne0 / 256) * 2368;   // LLM__X16K_SB
    if (type == LLM__TYPE_Q3_K) return llm__x16q3_group_bytes(ne0);
    int64_t nb = ne0 / 32;
    return (size_t)(nb / 2) * llm__x16_unit(type) + (nb % 2 ? llm__x16_qbytes(type) + llm__x16_sbytes(type) : 0);
}

// A Q5 block's fifth bits (bit j: column j's) in the x16 word order above.
static uint32_t llm__x16_five_word(uint32_t h) {
    uint32_t w = 0;
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 4; c++)
            w |= (h >> (4 * c + k) & 1) << (8 * k + c) | (h >> (16 + 4 * c + k) & 1) << (8 * k + 4 + c);
    return w;
}

// Rewrites row groups [g0, g1) (16 rows each) of a plain G4 matrix into x16 records.
static void llm__x16g_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int g = llm__gq_group(type), nsub = g / 32;
    const size_t rb = llm__row_bytes(type, ne0), bb = llm__type_table[type].block_bytes, unit = llm__x16g_unit(type);
    const size_t rec_bytes = llm__x16_group_bytes(type, ne0);
    for (int64_t gr = g0; gr < g1; gr++) {
        uint8_t *rec = (uint8_t *)dst + rec_bytes * (size_t)gr;
        for (int64_t k = 0; k < ne0 / g; k++) {
            uint8_t *u = rec + (size_t)k * unit;
            for (int r = 0; r < 16; r++) {
                const struct llm__block_gq *b = (const void *)((const uint8_t *)src + (size_t)(16 * gr + r) * rb + (size_t)k * bb);
                memcpy(u + 256 * nsub + 2 * r, &b->d, 2);
                memcpy(u + 256 * nsub + 32 + 2 * r, &b->z, 2);
                for (int c = 0; c < nsub; c++)
                    for (int j = 0; j < 16; j++) u[256 * c + (j / 4) * 64 + r * 4 + j % 4] = b->qs[16 * c + j];
            }
        }
    }
}

// Rewrites row groups [g0, g1) (16 rows each) of a plain matrix of a block-32 type into x16 records.
static void llm__x16_repack(int type, const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nb = ne0 / 32;
    const size_t rec_bytes = llm__x16_group_bytes(type, ne0);
    const size_t blk = llm__type_table[type].block_bytes;
    const bool five = llm__x16_five(type), min = llm__x16_min(type);
    // where a block keeps its nibbles (or Q8_0's quants) and its fifth bits
    const size_t qs_at = type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0 ? 2 : type == LLM__TYPE_Q4_1 ? 4
                         : type == LLM__TYPE_Q5_0 ? 6 : 8;
    const size_t qh_at = min ? 4 : 2;
    memset((uint8_t *)dst + rec_bytes * (size_t)g0, 0, rec_bytes * (size_t)(g1 - g0));
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *rec = (uint8_t *)dst + rec_bytes * (size_t)g;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *q = rec + llm__x16_qoffs(type, b);
            uint8_t *sc = rec + llm__x16_soffs(type, b, nb);
            for (int r = 0; r < 16; r++) {
                const uint8_t *x = (const uint8_t *)src + ((size_t)(16 * g + r) * (size_t)nb + (size_t)b) * blk;
                memcpy(sc + 2 * r, x, 2);                   // d comes first in every block
                if (min) memcpy(sc + 64 + 2 * r, x + 2, 2);   // then m
                if (type == LLM__TYPE_Q8_0)
                    for (int j = 0; j < 32; j++) q[(j / 4) * 64 + r * 4 + j % 4] = (uint8_t)(x[qs_at + j] ^ 0x80);
                else
                    for (int j = 0; j < 16; j++) q[(j / 4) * 64 + r * 4 + j % 4] = x[qs_at + j];
                if (five) {
                    uint32_t h;
                    memcpy(&h, x + qh_at, 4);
                    h = llm__x16_five_word(h);
                    memcpy(q + 256 + 4 * r, &h, 4);
                }
            }
        }
    }
}

// Row r of an x16 matrix as floats (the embedding lookup of a tied, repacked table), computed as
// the plain dequantizers do.
static void llm__x16_dequantize_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nb = ne0 / 32;
    const uint8_t *rec = (const uint8_t *)w + (size_t)(r / 16) * llm__x16_group_bytes(type, ne0);
    const int ri = (int)(r % 16);
    if (llm__is_gq(type)) {
        const int nsub = llm__gq_group(type) / 32;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *u = rec + (size_t)(b / nsub) * llm__x16g_unit(type), *q = u + 256 * (b % nsub);
            uint16_t dh;
            int16_t z;
            memcpy(&dh, u + 256 * nsub + 2 * ri, 2);
            memcpy(&z, u + 256 * nsub + 32 + 2 * ri, 2);
            for (int j = 0; j < 32; j++) {
                const uint8_t byte = q[(j % 16 / 4) * 64 + ri * 4 + j % 4];
                y[b * 32 + j] = (float)((j < 16 ? byte & 15 : byte >> 4) - z) * llm__fp16_to_fp32(dh);
            }
        }
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *q = rec + llm__x16_qoffs(type, b);
        const uint8_t *sc = rec + llm__x16_soffs(type, b, nb);
        uint16_t dh, mh = 0;
        memcpy(&dh, sc + 2 * ri, 2);
        if (llm__x16_min(type)) memcpy(&mh, sc + 64 + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh), m = llm__fp16_to_fp32(mh);
        uint32_t h = 0;
        if (llm__x16_five(type)) memcpy(&h, q + 256 + 4 * ri, 4);
        for (int j = 0; j < 32; j++) {
            if (type == LLM__TYPE_Q8_0) {
                y[b * 32 + j] = d * (float)(int8_t)(q[(j / 4) * 64 + ri * 4 + j % 4] ^ 0x80);
                continue;
            }
            const int jj = j % 16, hi = j >= 16;
            const uint8_t byte = q[(jj / 4) * 64 + ri * 4 + jj % 4];
            // column j's fifth bit: byte jj % 4 of the word, bit jj / 4 (+4 for the high half)
            const int u = (hi ? byte >> 4 : byte & 15) | (int)(h >> (8 * (jj % 4) + 4 * hi + jj / 4) & 1) << 4;
            switch (type) {
            case LLM__TYPE_Q4_0: y[b * 32 + j] = d * (float)(u - 8); break;
            case LLM__TYPE_Q5_0: y[b * 32 + j] = (float)(u - 16) * d; break;
            default: y[b * 32 + j] = (float)u * d + m; break;   // Q4_1, Q5_1
            }
        }
    }
}

#if defined(LLM__X86_SIMD)
// Q8_0 quantization of one block of 32, exactly as llm__quantize_q8_0: q = roundf(x / d) with
// d = max|x| / 127 (roundf: a truncation, then one more step away from zero when the dropped
// fraction is at least a half; both steps are exact in float). Returns the block's sum of quants.
LLM__AVX512 static int32_t llm__quantize_q8_0_block_avx512(const float *x, int8_t *q, uint16_t *dh, float *df) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const bool nan = (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
    const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;   // (see llm__clamp_q127)
    *dh = llm__fp32_to_fp16(d);
    *df = d;
    const __m512 idv = _mm512_set1_ps(id), half = _mm512_set1_ps(0.5f), lim = _mm512_set1_ps(127.0f);
    __m512i qi[2];
    for (int h = 0; h < 2; h++) {
        // clamped as llm__clamp_q127 does: NaN to 0, then to [-127, 127] (a no-op when finite)
        __m512 v = _mm512_mul_ps(h ? x1 : x0, idv);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m512 sgn = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
        qi[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, sgn));
    }
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(qi[0]));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(qi[1]));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
}

// The same on AVX2: 4 vectors of 8, the quants packed to bytes in element order.
LLM__AVX2 static int32_t llm__quantize_q8_0_block_avx2(const float *x, int8_t *q, uint16_t *dh, float *df) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 xv[4], am = _mm256_setzero_ps(), un = _mm256_setzero_ps();
    for (int h = 0; h < 4; h++) {
        xv[h] = _mm256_loadu_ps(x + 8 * h);
        am = _mm256_max_ps(am, _mm256_andnot_ps(sign, xv[h]));
        un = _mm256_or_ps(un, _mm256_cmp_ps(xv[h], xv[h], _CMP_UNORD_Q));
    }
    const bool nan = _mm256_movemask_ps(un) != 0;
    const float amax = llm__hmax_avx2(am);
    const float d = nan ? NAN : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;   // (see llm__clamp_q127)
    *dh = llm__fp32_to_fp16(d);
    *df = d;
    const __m256 idv = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), lim = _mm256_set1_ps(127.0f);
    __m256i qi[4];
    for (int h = 0; h < 4; h++) {
        __m256 v = _mm256_mul_ps(xv[h], idv);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));   // NaN to 0
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m256 sgn = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
        qi[h] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, sgn)));
    }
    // int32 x 32 -> int8 x 32: the packs work per 128-bit lane; a dword permutation restores the order
    const __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    return llm__hsum_epi32_avx2(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
}

// Q8_K quantization of one super-block of 256, exactly as llm__quantize_q8_K: the element of
// largest magnitude (the first of equals) maps to -127, rounding to nearest even.
LLM__AVX512 static void llm__quantize_q8_K_block_avx512(const float *x, struct llm__block_q8_K *y) {
    __m512 am = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int i = 0; i < 256; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        am = _mm512_max_ps(am, _mm512_abs_ps(v));
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    const float amax = _mm512_reduce_max_ps(am);
    if (amax == 0.0f || nan) {   // (a NaN: quants 0, the scale NaN; see llm__clamp_q127)
        memset(y, 0, sizeof(*y));
        if (nan) y->d = NAN;
        return;
    }
    float max = 0.0f;
    for (int i = 0; i < 256; i += 16) {
        __mmask16 k = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (k) { max = x[i + __builtin_ctz(k)]; break; }
    }
    const float iscale = -127.0f / max;
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f);
    for (int i = 0; i < 256; i += 16) {
        __m512 f = _mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x + i));
        f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);   // as llm__clamp_q127
        f = _mm512_min_ps(_mm512_max_ps(f, nlim), lim);
        __m512i v = _mm512_cvtps_epi32(f);   // nearest even
        v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
        _mm_storeu_si128((__m128i *)(y->qs + i), _mm512_cvtepi32_epi8(v));
        y->bsums[i / 16] = (int16_t)_mm512_reduce_add_epi32(v);
    }
    y->d = 1.0f / iscale;
}
#endif

// One token's activations (n floats) in the x16 format for weights of the given type.
static void llm__x16_quantize_act(int type, const float *x, uint8_t *out, int64_t n) {
    const int c = type == LLM__TYPE_Q8_0 ? 128 : type == LLM__TYPE_Q4_0 ? 8 : 16;
    const bool gq = llm__is_gq(type), min = llm__x16_min(type) || gq;
    float *d = (float *)(out + n);
    uint8_t *nc = out + n + n / 8;
    for (int64_t b = 0; b < n / 32; b++) {
        int32_t sum = 0;
        float s;   // Q4_1, Q5_1: Q8_1's s
#if defined(LLM__X86_SIMD)
        // (x16 weights exist only where AVX-512 runs)
        uint16_t dh;
        float df;
        sum = llm__quantize_q8_0_block_avx512(x + 32 * b, (int8_t *)out + 32 * b, &dh, &df);
        d[b] = llm__fp16_to_fp32(dh);
        s = llm__fp16_to_fp32(llm__fp32_to_fp16((float)sum * df));   // as llm__quantize_q8_1
#else
        struct llm__block_q8_1 blk;   // Q8_0's quants and scale, and s
        llm__quantize_row(LLM__TYPE_Q8_1, x + 32 * b, &blk, 32);
        memcpy(out + 32 * b, blk.qs, 32);
        for (int j = 0; j < 32; j++) sum += blk.qs[j];
        d[b] = llm__fp16_to_fp32(blk.d);
        s = llm__fp16_to_fp32(blk.s);
#endif
        const int32_t v = -c * sum;
        if (gq) s = (float)sum * d[b];   // (exact: |sum| < 2^12, d an fp16 value)
        if (min) memcpy(nc + 4 * b, &s, 4);
        else memcpy(nc + 4 * b, &v, 4);
    }
}

#if defined(LLM__X86_SIMD)
// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
// One block of 16 rows (quants q, scales ws, mins ms) times NT tokens' block b, added to acc.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_block(
        int type, int NT, const uint8_t *q, __m512 ws, __m512 ms, int64_t b, const uint8_t *act, size_t stride,
        int64_t K, __m512 *acc) {
    const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
    const bool five = llm__x16_five(type), min = llm__x16_min(type);
    const __m512i h = five ? _mm512_loadu_si512((const void *)(q + 256)) : _mm512_setzero_si512();
    __m512i wv[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        // Q4_0/Q4_1 high nibbles stay in place (16 x their value): one instruction instead of
        // two, and the sum is shifted back once per block. Q5: each chunk's fifth bits are moved
        // to bit 4 of their bytes (see the layout).
        if (type == LLM__TYPE_Q8_0) wv[c] = _mm512_loadu_si512((const void *)(q + 64 * c));
        else if (c < 4) {
            wv[c] = _mm512_and_si512(_mm512_loadu_si512((const void *)(q + 64 * c)), m4);
            if (five) wv[c] = _mm512_or_si512(wv[c], _mm512_and_si512(_mm512_slli_epi32(h, 4 - c), b4));
        } else if (!five) wv[c] = _mm512_andnot_si512(m4, _mm512_loadu_si512((const void *)(q + 64 * (c - 4))));
        else
            wv[c] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512((const void *)(q + 64 * (c - 4))), 4), m4),
                                    _mm512_and_si512(_mm512_srli_epi32(h, c - 4), b4));
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        const uint8_t *a = act + (size_t)t * stride;
        const int8_t *aq = (const int8_t *)a + 32 * b;
        int32_t nc;
        float d, s;
        memcpy(&nc, a + K + K / 8 + 4 * b, 4);   // -c * sum, or (Q4_1, Q5_1) the f32 s
        memcpy(&s, a + K + K / 8 + 4 * b, 4);
        memcpy(&d, a + K + 4 * b, 4);
        // two chains of 4 so consecutive vpdpbusd do not wait on each other (Q4_0/Q4_1: the low
        // nibbles' chain and the high nibbles', which is 16 x too large)
        __m512i s0 = min ? _mm512_setzero_si512() : _mm512_set1_epi32(nc), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            // Q8_0 chunk c: columns 4c..; the others: low nibbles of chunk c (< 4), then high ones
            const int col = type == LLM__TYPE_Q8_0 ? 4 * c : (c < 4 ? 4 * c : 16 + 4 * (c - 4));
            int32_t a4;
            memcpy(&a4, aq + col, 4);
            const bool first = type == LLM__TYPE_Q8_0 ? c % 2 == 0 : c < 4;
            if (first) s0 = _mm512_dpbusd_epi32(s0, wv[c], _mm512_set1_epi32(a4));
            else s1 = _mm512_dpbusd_epi32(s1, wv[c], _mm512_set1_epi32(a4));
        }
        if (type == LLM__TYPE_Q4_0 || type == LLM__TYPE_Q4_1) s1 = _mm512_srai_epi32(s1, 4);
        const __m512 p = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
        acc[t] = _mm512_fmadd_ps(p, _mm512_mul_ps(ws, _mm512_set1_ps(d)), acc[t]);
        if (min) acc[t] = _mm512_fmadd_ps(ms, _mm512_set1_ps(s), acc[t]);
    }
}

// out[t][0..16) = the 16 rows of one x16 record times NT tokens' activations (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16_tile(
        int type, int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const size_t qb = llm__x16_qbytes(type), unit = llm__x16_unit(type);
    const bool min = llm__x16_min(type);
    const int64_t nb = K / 32;
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    // whole units of two blocks: [quants b][quants b+1][scales b, b+1]([mins b, b+1])
    for (int64_t b = 0; b + 1 < nb; b += 2, rec += unit) {
        if (NT == 1) {
            // Decode streams the weights once: ask for them 4 KB ahead (measured: +10-20% on top
            // of the hardware prefetcher, which alone leaves the core waiting on memory).
#pragma GCC unroll 18
            for (size_t pf = 0; pf < unit; pf += 64) _mm_prefetch((const char *)rec + 4096 + pf, _MM_HINT_T0);
        }
        const uint8_t *sc = rec + 2 * qb;
        const __m512 ws0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
        const __m512 ws1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32)));
        const __m512 ms0 = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 64))) : ws0;
        const __m512 ms1 = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 96))) : ws1;
        llm__x16_block(type, NT, rec, ws0, ms0, b, act, stride, K, acc);
        llm__x16_block(type, NT, rec + qb, ws1, ms1, b + 1, act, stride, K, acc);
    }
    if (nb % 2) {   // the last unit holds one block
        const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + qb)));
        const __m512 ms = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + qb + 64))) : ws;
        llm__x16_block(type, NT, rec, ws, ms, nb - 1, act, stride, K, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

// switch (nt) over 1..8 (8 and more: 8), calling CALL(TYPE, constant count): the tile kernels
// are inlined once per count. Built with LLM_GENERIC_TILES defined, they are inlined once per type
// with the count as a variable instead: the same results, slower, and compiled in under half the
// time (the fuzzers, and the test programs other than test_backend, which checks these kernels
// as the program and the library build them).
#if defined(LLM_GENERIC_TILES)
#define LLM__NT_SWITCH(CALL, TYPE) CALL(TYPE, LLM__MIN(nt, 8));
#else
#define LLM__NT_SWITCH(CALL, TYPE)                                                              \
    switch (nt) {                                                                               \
    case 1: CALL(TYPE, 1); break;                                                               \
    case 2: CALL(TYPE, 2); break;                                                               \
    case 3: CALL(TYPE, 3); break;                                                               \
    case 4: CALL(TYPE, 4); break;                                                               \
    case 5: CALL(TYPE, 5); break;                                                               \
    case 6: CALL(TYPE, 6); break;                                                               \
    case 7: CALL(TYPE, 7); break;                                                               \
    default: CALL(TYPE, 8); break;                                                              \
    }
#endif
// The same over 1..4 (4 and more: 4) for the K-quant x16 kernels (4 tokens per call).
#if defined(LLM_GENERIC_TILES)
#define LLM__NT4_SWITCH(CALL) CALL(LLM__MIN(nt, 4));
#else
#define LLM__NT4_SWITCH(CALL) \
    switch (nt) {             \
    case 1: CALL(1); break;   \
    case 2: CALL(2); break;   \
    case 3: CALL(3); break;   \
    default: CALL(4); break;  \
    }
#endif

// The same for G4 records: per group, its scales and d * z, then its blocks as Q4_1's (min -d * z).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16g_tile(
        int type, int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int g = llm__gq_group(type), nsub = g / 32;
    const size_t unit = llm__x16g_unit(type);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K / g; k++, rec += unit) {
        if (NT == 1)
            for (size_t pf = 0; pf < unit; pf += 64) _mm_prefetch((const char *)rec + 4096 + pf, _MM_HINT_T0);
        const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 256 * nsub)));
        const __m512 zs = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(rec + 256 * nsub + 32))));
        const __m512 ms = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(ws, zs));
        for (int c = 0; c < nsub; c++) llm__x16_block(LLM__TYPE_Q4_1, NT, rec + 256 * c, ws, ms, k * nsub + c, act, stride, K, acc);
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 static void llm__x16_tile_avx512(int type, int nt, const uint8_t *rec, const uint8_t *act, size_t stride,
                                             int64_t K, float *out, size_t ostride) {
    // Constant token counts let the compiler keep the accumulators in registers.
#define LLM__X16_CALL(TYPE, N) llm__x16_tile(TYPE, N, rec, act, stride, K, out, ostride)
#define LLM__X16_CASE(TYPE) LLM__NT_SWITCH(LLM__X16_CALL, TYPE)
#define LLM__X16G_CALL(TYPE, N) llm__x16g_tile(TYPE, N, rec, act, stride, K, out, ostride)
    switch (type) {
    case LLM__TYPE_G4_32: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_32) break;
    case LLM__TYPE_G4_64: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_64) break;
    case LLM__TYPE_G4_128: LLM__NT_SWITCH(LLM__X16G_CALL, LLM__TYPE_G4_128) break;
    case LLM__TYPE_Q8_0: LLM__X16_CASE(LLM__TYPE_Q8_0) break;
    case LLM__TYPE_Q4_1: LLM__X16_CASE(LLM__TYPE_Q4_1) break;
    case LLM__TYPE_Q5_0: LLM__X16_CASE(LLM__TYPE_Q5_0) break;
    case LLM__TYPE_Q5_1: LLM__X16_CASE(LLM__TYPE_Q5_1) break;
    default: LLM__X16_CASE(LLM__TYPE_Q4_0) break;
    }
#undef LLM__X16_CASE
#undef LLM__X16_CALL
#undef LLM__X16G_CALL
}
#endif

// Q4_K in x16: per group of 16 rows and per super-block of 256 columns (2368 bytes, 64-byte
// aligned): the 128 quant bytes of the 16 rows interleaved 4 bytes at a time (32 chunks of 64
// bytes; chunk c holds quant bytes 4c..4c+3 of each row: low nibbles are sub-block 2(c/8), high
// nibbles sub-block 2(c/8)+1, columns 4(c%8)..), the 6-bit sub-block scales unpacked to bytes
// [sub-block][row] (128 bytes), the mins as byte pairs [pair of sub-blocks][row][2] (128 bytes),
// then d and dmin of the 16 rows (2 x 32 bytes of fp16). Activations are Q8_K, laid out per token
// as K quant bytes, K/256 scales (f32) and K/256 x 4 pairs of sub-block sums (int16 x 2).
#define LLM__X16K_SB 2368   // bytes of one super-block of 16 rows
#define LLM__X16K_ACT_STRIDE(K) ((size_t)(K) + (size_t)(K) / 256 * 20)

static void llm__x16k_repack(const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nsb = ne0 / 256;
    for (int64_t g = g0; g < g1; g++) {
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *o = (uint8_t *)dst + ((size_t)g * (size_t)nsb + (size_t)sb) * LLM__X16K_SB;
            for (int r = 0; r < 16; r++) {
                const struct llm__block_q4_K *x = (const struct llm__block_q4_K *)src + (16 * g + r) * nsb + sb;
                uint8_t sm[16];
                llm__unpack_k4_scales(x->scales, sm);
                for (int j = 0; j < 128; j++) o[(j / 4) * 64 + r * 4 + j % 4] = x->qs[j];
                for (int j = 0; j < 8; j++) {
                    o[2048 + j * 16 + r] = sm[j];
                    o[2176 + (j / 2) * 32 + r * 2 + j % 2] = sm[8 + j];
                }
                memcpy(o + 2304 + 2 * r, &x->d, 2);
                memcpy(o + 2336 + 2 * r, &x->dmin, 2);
            }
        }
    }
}

static void llm__x16k_dequantize_row(const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nsb = ne0 / 256;
    const int ri = (int)(r % 16);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = (const uint8_t *)w + ((size_t)(r / 16) * (size_t)nsb + (size_t)sb) * LLM__X16K_SB;
        uint16_t dh, mh;
        memcpy(&dh, o + 2304 + 2 * ri, 2);
        memcpy(&mh, o + 2336 + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh), dmin = llm__fp16_to_fp32(mh);
        for (int j = 0; j < 8; j++) {
            const float sc = d * o[2048 + j * 16 + ri], m = dmin * o[2176 + (j / 2) * 32 + ri * 2 + j % 2];
            for (int l = 0; l < 32; l++) {
                // column l of sub-block j: pair j/2, chunk 8(j/2) + l/4, byte l%4, nibble j%2
                uint8_t byte = o[(8 * (j / 2) + l / 4) * 64 + ri * 4 + l % 4];
                y[sb * 256 + j * 32 + l] = sc * (float)(j % 2 ? byte >> 4 : byte & 15) - m;
            }
        }
    }
}

static void llm__x16k_quantize_act(const float *x, uint8_t *out, int64_t n) {
    float *d = (float *)(out + n);
    uint8_t *bsp = out + n + n / 256 * 4;
    for (int64_t sb = 0; sb < n / 256; sb++) {
        struct llm__block_q8_K blk;
#if defined(LLM__X86_SIMD)
        llm__quantize_q8_K_block_avx512(x + 256 * sb, &blk);   // (x16 weights exist only where AVX-512 runs)
#else
        llm__quantize_row(LLM__TYPE_Q8_K, x + 256 * sb, &blk, 256);
#endif
        memcpy(out + 256 * sb, blk.qs, 256);
        d[sb] = blk.d;
        for (int j = 0; j < 8; j++) {
            int16_t s16 = (int16_t)(blk.bsums[2 * j] + blk.bsums[2 * j + 1]);
            memcpy(bsp + sb * 16 + j * 2, &s16, 2);
        }
    }
}

#if defined(LLM__X86_SIMD)
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16k_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const int64_t nsb = K / 256;
    __m512 acc[8];   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *o = rec + (size_t)sb * LLM__X16K_SB;
        if (NT == 1)
            for (int pf = 0; pf < LLM__X16K_SB; pf += 64) _mm_prefetch((const char *)o + 4096 + pf, _MM_HINT_T0);
        __m512i isum[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(o + 2048 + 16 * j)));
            __m512i wv[8];
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                // high nibbles stay in place (16 x their value); the sum is shifted back once
                const __m512i raw = _mm512_loadu_si512((const void *)(o + 64 * (8 * (j / 2) + c)));
                wv[c] = j % 2 ? _mm512_andnot_si512(m4, raw) : _mm512_and_si512(raw, m4);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const int8_t *aq = (const int8_t *)(act + (size_t)t * stride) + 256 * sb + 32 * j;
                __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    int32_t a4;
                    memcpy(&a4, aq + 4 * c, 4);
                    if (c % 2 == 0) s0 = _mm512_dpbusd_epi32(s0, wv[c], _mm512_set1_epi32(a4));
                    else s1 = _mm512_dpbusd_epi32(s1, wv[c], _mm512_set1_epi32(a4));
                }
                __m512i dot = _mm512_add_epi32(s0, s1);
                if (j % 2) dot = _mm512_srai_epi32(dot, 4);
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot, sc));
            }
        }
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2304)));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 2336)));
        __m512i mp[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) mp[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(o + 2176 + 32 * p)));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            const uint8_t *a = act + (size_t)t * stride;
            float da;
            memcpy(&da, a + K + 4 * sb, 4);
            __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                int32_t pair;
                memcpy(&pair, a + K + (K / 256) * 4 + 16 * sb + 4 * p, 4);
                msum = _mm512_dpwssd_epi32(msum, mp[p], _mm512_set1_epi32(pair));
            }
            const __m512 dav = _mm512_set1_ps(da);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d16, dav), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(m16, dav), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 static void llm__x16k_tile_avx512(int nt, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K,
                                              float *out, size_t ostride) {
#define LLM__X16K_CALL(N) llm__x16k_tile(N, rec, act, stride, K, out, ostride)
    LLM__NT4_SWITCH(LLM__X16K_CALL)
#undef LLM__X16K_CALL
}
#endif


// Q3_K in x16, at the file's own size (110 bytes per row and super-block). Per group of 16 rows,
// in units of two super-blocks (3520 bytes: both quants, both high bits, both scales, both d, so
// that every part is 64-byte aligned; an odd last super-block is a unit of its own, padded by 32
// bytes), per super-block:
//   quants  1024 bytes: 16 chunks of 64 bytes, chunk c = qs bytes
//           32 (c / 8) + 4 (c % 8) .. +3 of rows 0..15 as stored (2 bits each of 4 elements)
//   hmask    512 bytes: the high bits as one 64-bit mask per chunk c and shift j
//           (at 8 (4c + j)): bit 4r + b is element 128 (c / 8) + 32 j + 4 (c % 8) + b of row r,
//           so that one masked add puts them into the chunk's bytes
//   scales   192 bytes: the 6-bit scales v of 16 sub-blocks x 16 rows, split so
//           that four vectors of bytes come out in the kernel's order, byte i of vector k being
//           sub-block 2p + i % 2 of row (i % 32) / 2, p = 2k + i / 32: low nibbles in two
//           vectors (k = 0, 1 low, k = 2, 3 high nibbles), then the top 2 bits (bits 2k, 2k + 1)
//   d         32 bytes: the 16 rows' fp16 d
// The kernel adds u = q + 4 (0..7) times the Q8_K activations per sub-block of 16 columns, starting
// from -4 times the activations' sum there, so each sub-block's sum is exactly the plain
// kernel's; two sub-blocks' sums as 16-bit pairs then meet their scales in one vpdpwssd.
#define LLM__X16Q3_SB 1760   // bytes of one super-block of 16 rows

static size_t llm__x16q3_group_bytes(int64_t ne0) { return ((size_t)(ne0 / 256) * LLM__X16Q3_SB + 63) & ~(size_t)63; }
// Part 0 (quants), 1 (high bits), 2 (scales) or 3 (d) of super-block sb in a group of nsb.
static const uint8_t *llm__x16q3_part(const uint8_t *g, int64_t nsb, int64_t sb, int part) {
    static const size_t size[4] = {1024, 512, 192, 32};
    const size_t k = (size_t)(sb % 2), n = sb / 2 * 2 + 1 < nsb ? 2 : 1;   // super-blocks in this unit
    size_t o = (size_t)(sb / 2) * 2 * LLM__X16Q3_SB;
    for (int i = 0; i < part; i++) o += n * size[i];
    return g + o + k * size[part];
}
static const uint8_t *llm__x16q3_hm(const uint8_t *g, int64_t nsb, int64_t sb) { return llm__x16q3_part(g, nsb, sb, 1); }
static const uint8_t *llm__x16q3_sc(const uint8_t *g, int64_t nsb, int64_t sb) { return llm__x16q3_part(g, nsb, sb, 2); }
static const uint8_t *llm__x16q3_d(const uint8_t *g, int64_t nsb, int64_t sb) { return llm__x16q3_part(g, nsb, sb, 3); }

// Where the 6-bit scale of sub-block s of row r lies: vector k, byte i.
static void llm__x16q3_scale_pos(int s, int r, int *k, int *i) {
    const int p = s / 2;
    *k = p / 2;
    *i = 32 * (p % 2) + 2 * r + s % 2;
}

static int llm__x16q3_scale(const uint8_t *sc, int s, int r) {
    int k, i;
    llm__x16q3_scale_pos(s, r, &k, &i);
    return (sc[64 * (k % 2) + i] >> (4 * (k / 2)) & 15) | (sc[128 + i] >> (2 * k) & 3) << 4;
}

static void llm__x16q3_repack(const void *src, void *dst, int64_t ne0, int64_t g0, int64_t g1) {
    const int64_t nsb = ne0 / 256;
    const size_t gb = llm__x16q3_group_bytes(ne0);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *o = (uint8_t *)dst + (size_t)g * gb;
        memset(o, 0, gb);
        for (int64_t sb = 0; sb < nsb; sb++) {
            uint8_t *qs = (uint8_t *)llm__x16q3_part(o, nsb, sb, 0), *hm = (uint8_t *)llm__x16q3_hm(o, nsb, sb);
            uint8_t *sc = (uint8_t *)llm__x16q3_sc(o, nsb, sb), *d = (uint8_t *)llm__x16q3_d(o, nsb, sb);
            uint64_t masks[64] = {0};
            for (int r = 0; r < 16; r++) {
                const struct llm__block_q3_K *x = (const struct llm__block_q3_K *)src + (16 * g + r) * nsb + sb;
                for (int c = 0; c < 16; c++) {
                    memcpy(qs + 64 * c + 4 * r, x->qs + 32 * (c / 8) + 4 * (c % 8), 4);
                    uint32_t h;
                    memcpy(&h, x->hmask + 4 * (c % 8), 4);
                    for (int j = 0; j < 4; j++) {
                        // bit 4n + j of the 4 bytes (bits 0, 8, 16, 24 after the shift) gathered into bits 24..27
                        const uint64_t nib = ((uint64_t)(h >> (4 * (c / 8) + j) & 0x01010101u) * 0x01020408u) >> 24 & 15;
                        masks[4 * c + j] |= nib << (4 * r);
                    }
                }
                uint8_t v[16];
                llm__q3_K_scales_raw(x->scales, v);
                for (int s = 0; s < 16; s++) {
                    int k, i;
                    llm__x16q3_scale_pos(s, r, &k, &i);
                    sc[64 * (k % 2) + i] |= (uint8_t)((v[s] & 15) << (4 * (k / 2)));
                    sc[128 + i] |= (uint8_t)((v[s] >> 4) << (2 * k));
                }
                memcpy(d + 2 * r, &x->d, 2);
            }
            for (int m = 0; m < 64; m++)   // (bit i of mask m: byte i / 8, bit i % 8)
                for (int i = 0; i < 8; i++) hm[8 * m + i] = (uint8_t)(masks[m] >> (8 * i));
        }
    }
}

// Row r as floats, as llm__dequantize_row computes it from the plain block.
static void llm__x16q3_dequantize_row(const void *w, int64_t r, float *y, int64_t ne0) {
    const int64_t nsb = ne0 / 256;
    const int ri = (int)(r % 16);
    const uint8_t *g = (const uint8_t *)w + (size_t)(r / 16) * llm__x16q3_group_bytes(ne0);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *qs = llm__x16q3_part(g, nsb, sb, 0), *hm = llm__x16q3_hm(g, nsb, sb), *sc = llm__x16q3_sc(g, nsb, sb);
        uint16_t dh;
        memcpy(&dh, llm__x16q3_d(g, nsb, sb) + 2 * ri, 2);
        const float d = llm__fp16_to_fp32(dh);
        for (int e = 0; e < 256; e++) {
            const int n = e / 128, j = e % 128 / 32, l = e % 32, c = 8 * n + l / 4, bit = 4 * ri + l % 4;
            const int q = (qs[64 * c + 4 * ri + l % 4] >> (2 * j) & 3) + 4 * (hm[8 * (4 * c + j) + bit / 8] >> (bit % 8) & 1) - 4;
            const float dl = d * (float)(llm__x16q3_scale(sc, e / 16, ri) - 32);
            y[sb * 256 + e] = dl * (float)q;
        }
    }
}

// Row r of any x16 matrix as floats (the embedding lookup of a tied, repacked table).
static void llm__x16_row(int type, const void *w, int64_t r, float *y, int64_t ne0) {
    if (type == LLM__TYPE_Q4_K) llm__x16k_dequantize_row(w, r, y, ne0);
    else if (type == LLM__TYPE_Q3_K) llm__x16q3_dequantize_row(w, r, y, ne0);
    else llm__x16_dequantize_row(type, w, r, y, ne0);
}

#if defined(LLM__X86_SIMD)
// The four vectors of signed scales (v - 32) of one super-block (see the layout above).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q3_scales(const uint8_t *sc, __m512i s[4]) {
    const __m512i m15 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), b32 = _mm512_set1_epi8(32);
    const __m512i l0 = _mm512_load_si512((const void *)sc), l1 = _mm512_load_si512((const void *)(sc + 64));
    const __m512i h = _mm512_load_si512((const void *)(sc + 128));
    // (16-bit shifts move bits across bytes only outside the masks)
    s[0] = _mm512_or_si512(_mm512_and_si512(l0, m15), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    s[1] = _mm512_or_si512(_mm512_and_si512(l1, m15), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
    s[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m15), _mm512_and_si512(h, m30));
    s[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m15), _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
    for (int k = 0; k < 4; k++) s[k] = _mm512_sub_epi8(s[k], b32);
}

// u = q + 4 (0..7) of chunk c (raw: its quant bytes) at shift j.
LLM__AVX512 static inline __attribute__((always_inline)) __m512i llm__x16q3_chunk(__m512i raw, const uint8_t *hm, int c, int j) {
    uint64_t bits;
    memcpy(&bits, hm + 8 * (4 * c + j), 8);
    const __m512i lo = _mm512_and_si512(j ? _mm512_srli_epi16(raw, 2 * j) : raw, _mm512_set1_epi8(3));
    return _mm512_mask_add_epi8(lo, _cvtu64_mask64(bits), lo, _mm512_set1_epi8(4));
}

// out[t][0..16) = the 16 rows of one x16 Q3_K group times NT tokens' Q8_K rows (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__x16q3_tile(
        int NT, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K, float *out, size_t ostride) {
    const int64_t nsb = K / 256;
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *qs = llm__x16q3_part(rec, nsb, sb, 0), *hm = llm__x16q3_hm(rec, nsb, sb);
        if (NT == 1)   // (as the other x16 kernels: the hardware prefetcher alone leaves the core waiting)
            for (int pf = 0; pf < LLM__X16Q3_SB; pf += 64)
                _mm_prefetch((const char *)rec + (size_t)sb * LLM__X16Q3_SB + 4096 + pf, _MM_HINT_T0);
        const struct llm__block_q8_K *a[4] = {0};   // (all 4 set: LLM_GENERIC_TILES builds warn otherwise)
        __m512i isum[4], s[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride) + sb;
        llm__x16q3_scales(llm__x16q3_sc(rec, nsb, sb), s);
        for (int n = 0; n < 2; n++) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {   // sub-blocks 8n + 2j (chunks 8n..8n+3) and 8n + 2j + 1
                const int p = 4 * n + j;
                __m512i d0[4], d1[4];
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) d0[t] = d1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    d0[t] = _mm512_set1_epi32(-4 * a[t]->bsums[2 * p]);
                    d1[t] = _mm512_set1_epi32(-4 * a[t]->bsums[2 * p + 1]);
                }
#pragma GCC unroll 8
                for (int c4 = 0; c4 < 8; c4++) {
                    const int c = 8 * n + c4;
                    const __m512i u = llm__x16q3_chunk(_mm512_load_si512((const void *)(qs + 64 * c)), hm, c, j);
#pragma GCC unroll 4
                    for (int t = 0; t < NT; t++) {
                        int32_t a4;
                        memcpy(&a4, a[t]->qs + 128 * n + 32 * j + 4 * c4, 4);
                        if (c4 < 4) d0[t] = _mm512_dpbusd_epi32(d0[t], u, _mm512_set1_epi32(a4));
                        else d1[t] = _mm512_dpbusd_epi32(d1[t], u, _mm512_set1_epi32(a4));
                    }
                }
                // the pair's sums (each within +-8192) as 16-bit halves, times the scale pairs
                const __m512i sp = _mm512_cvtepi8_epi16(p % 2 ? _mm512_extracti64x4_epi64(s[p / 2], 1)
                                                              : _mm512_castsi512_si256(s[p / 2]));
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    const __m512i v = _mm512_mask_blend_epi16(0xAAAAAAAAu, d0[t], _mm512_slli_epi32(d1[t], 16));
                    isum[t] = _mm512_dpwssd_epi32(isum[t], v, sp);
                }
            }
        }
        const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)llm__x16q3_d(rec, nsb, sb)));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d16, _mm512_set1_ps(a[t]->d)), acc[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(out + (size_t)t * ostride, acc[t]);
}

LLM__AVX512 static void llm__x16q3_tile_avx512(int nt, const uint8_t *rec, const uint8_t *act, size_t stride, int64_t K,
                                               float *out, size_t ostride) {
#define LLM__X16Q3_CALL(N) llm__x16q3_tile(N, rec, act, stride, K, out, ostride)
    LLM__NT4_SWITCH(LLM__X16Q3_CALL)
#undef LLM__X16Q3_CALL
}
#endif
// --- K-quant tiles: prompt products of Q2_K, Q3_K, Q5_K, Q6_K and IQ4_XS weights (AVX-512) ---
//
// These types have no x16 layout: unpacked to bytes they would grow 1.3-3x, and decode reads them
// as stored (Q3_K's x16 layout keeps its size and is unpacked the same way). A step of at least
// LLM__KT_MIN_TOKENS tokens instead unpacks 16 rows x one
// super-block at a time into bytes in x16's chunk order (64 bytes = 4 columns of 16 rows) and
// multiplies them with every token's Q8_K activations by vpdpbusd, so the unpacking is paid once
// per step rather than once per token. A byte is u = w + off >= 0, w the integer the plain kernels
// multiply by the activations:
//   Q3_K  sc * q (-124..128, off 124) from its x16 layout: the sub-block scale folds in, one sum
//         per super-block
//   Q2_K  sc * q (0..45), the sub-block scale folded in; the mins' sum m[s] * bsums[s] by vpdpwssd
//   Q6_K  q - 32 (off 32), its scale per group of 16 columns applied by an integer multiply
//   Q5_K  q (0..31), the scale per group of 32 by an integer multiply, the mins as Q2_K's
//   IQ4_XS the grid value (-127..113, off 127), ls - 32 per group of 32 by an integer multiply
// The offset comes back out through the activations' group sums. The integer sums are the plain
// kernels', so results differ from theirs only in float rounding.
#if defined(LLM__X86_SIMD)
#define LLM__KT_MIN_TOKENS 32
#define LLM__KT_X16Q3 (-1)   // the tile type of Q3_K weights in x16

struct llm__kt_tile {
    _Alignas(64) uint8_t q[64][64];   // chunk c: columns 4c..4c+3 of rows 0..15
    int32_t ls[16][16];               // the scale of each group of columns, per row (not Q3_K, Q2_K)
    int16_t m[8][16][2];              // Q2_K, Q5_K: the mins of bsums 2p and 2p + 1, per row
    float d[16], dmin[16];
};

static bool llm__kt_supported(int type, int64_t ne0, int64_t ne1) {
    switch (type) {
    case LLM__TYPE_Q2_K: case LLM__TYPE_Q5_K: case LLM__TYPE_Q6_K: case LLM__TYPE_IQ4_XS:
        return ne0 % 256 == 0 && ne1 % 16 == 0;
    default: return false;
    }
}

static int llm__kt_off(int type) {
    return type == LLM__KT_X16Q3 ? 124 : type == LLM__TYPE_IQ4_XS ? 127 : type == LLM__TYPE_Q6_K ? 32 : 0;
}
// Chunks (of 4 columns) per scale group: 64 where the scales fold into the bytes.
static int llm__kt_group(int type) {
    return type == LLM__TYPE_Q6_K ? 4 : type == LLM__KT_X16Q3 || type == LLM__TYPE_Q2_K ? 64 : 8;
}

// Super-block sb of the 16 rows at w (rb bytes apart) into a tile (test_backend has a scalar
// version of this to compare with).
LLM__AVX512 static void llm__kt_unpack_avx512(int type, const uint8_t *w, size_t rb, int64_t sb, struct llm__kt_tile *t) {
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const __m512i off = _mm512_set1_epi16((short)llm__kt_off(type));
    for (int r = 0; r < 16; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        _Alignas(64) uint8_t u[LLM__QK_K];
        if (type == LLM__TYPE_IQ4_XS) {
            const struct llm__block_iq4_xs *x = (const struct llm__block_iq4_xs *)row + sb;
            int8_t ls[8];
            llm__iq4_xs_scales(x, ls);
            const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values));
            for (int b = 0; b < 8; b++) {
                t->ls[b][r] = ls[b];
                const __m128i q = _mm_loadu_si128((const __m128i *)(x->qs + 16 * b));
                const __m256i n = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
                _mm256_store_si256((__m256i *)(u + 32 * b), _mm256_add_epi8(_mm256_shuffle_epi8(grid, n), _mm256_set1_epi8(127)));
            }
            t->d[r] = llm__fp16_to_fp32(x->d);
        } else if (type == LLM__TYPE_Q6_K) {
            const struct llm__block_q6_K *x = (const struct llm__block_q6_K *)row + sb;
            for (int g = 0; g < 16; g++) t->ls[g][r] = x->scales[g];
            for (int h = 0; h < 2; h++) {   // (16-bit shifts leak bits across bytes only outside the masks)
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
                uint8_t *o = u + 128 * h;
                _mm256_store_si256((__m256i *)o, _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
                _mm256_store_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
                _mm256_store_si256((__m256i *)(o + 64), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)));
                _mm256_store_si256((__m256i *)(o + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
            }
            t->d[r] = llm__fp16_to_fp32(x->d);
        } else if (type == LLM__TYPE_Q5_K) {
            const struct llm__block_q5_K *x = (const struct llm__block_q5_K *)row + sb;
            uint8_t sm[16];
            llm__unpack_k4_scales(x->scales, sm);
            for (int s = 0; s < 8; s++) t->ls[s][r] = sm[s], t->m[s][r][0] = t->m[s][r][1] = sm[8 + s];
            const __m256i qh = _mm256_loadu_si256((const __m256i *)x->qh);
            for (int j = 0; j < 4; j++) {   // elements 64j + l: low nibbles, qh bit 2j; 64j + 32 + l: high, bit 2j + 1
                const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * j));
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one);
                _mm256_store_si256((__m256i *)(u + 64 * j), _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4)));
                _mm256_store_si256((__m256i *)(u + 64 * j + 32),
                                   _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(h1, 4)));
            }
            t->d[r] = llm__fp16_to_fp32(x->d);
            t->dmin[r] = llm__fp16_to_fp32(x->dmin);
        } else {   // Q2_K
            const struct llm__block_q2_K *x2 = (const struct llm__block_q2_K *)row + sb;
            int8_t sc[16];
            for (int s = 0; s < 16; s++) {
                sc[s] = (int8_t)(x2->scales[s] & 15);
                t->m[s / 2][r][s % 2] = (int16_t)(x2->scales[s] >> 4);
            }
            for (int h = 0; h < 2; h++) {
                const __m256i qv = _mm256_loadu_si256((const __m256i *)(x2->qs + 32 * h));
                for (int j = 0; j < 4; j++) {
                    const int g = 4 * h + j;   // elements 32g..32g+31
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
                    const __m512i s16 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(sc[2 * g])),
                                                           _mm256_set1_epi16(sc[2 * g + 1]), 1);
                    const __m512i v = _mm512_add_epi16(_mm512_mullo_epi16(_mm512_cvtepi8_epi16(q), s16), off);
                    _mm256_store_si256((__m256i *)(u + 32 * g), _mm512_cvtepi16_epi8(v));
                }
            }
            t->d[r] = llm__fp16_to_fp32(x2->d);
            t->dmin[r] = llm__fp16_to_fp32(x2->dmin);
        }
        for (int c = 0; c < 64; c++) memcpy(&t->q[c][4 * r], u + 4 * c, 4);
    }
}

// Super-block sb of an x16 Q3_K group (rec, nsb super-blocks) into a tile of type LLM__KT_X16Q3.
LLM__AVX512 static void llm__kt_unpack_x16q3(const uint8_t *rec, int64_t nsb, int64_t sb, struct llm__kt_tile *t) {
    const uint8_t *qs = llm__x16q3_part(rec, nsb, sb, 0), *hm = llm__x16q3_hm(rec, nsb, sb), *sc = llm__x16q3_sc(rec, nsb, sb);
    // the scales as bytes [sub-block][row] (from the kernel's order: vector k, byte i)
    _Alignas(64) int8_t v[4][64], ls[16][16];
    __m512i s[4];
    llm__x16q3_scales(sc, s);
    for (int k = 0; k < 4; k++) _mm512_store_si512((void *)v[k], s[k]);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) ls[4 * k + 2 * (i / 32) + i % 2][(i % 32) / 2] = v[k][i];
    const __m512i even = _mm512_set1_epi16(0x00ff), odd = _mm512_set1_epi16((short)0xff00);
    __m512i sc8[16], bias[16];   // per sub-block: each row's scale in its 4 bytes; 124 - 4 * scale in 16 bits
    for (int g = 0; g < 16; g++) {
        const __m512i l32 = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)ls[g]));
        sc8[g] = _mm512_mullo_epi32(_mm512_and_si512(l32, _mm512_set1_epi32(0xff)), _mm512_set1_epi32(0x01010101));
        bias[g] = _mm512_sub_epi16(_mm512_set1_epi16(124), _mm512_slli_epi16(_mm512_srai_epi16(_mm512_slli_epi16(sc8[g], 8), 8), 2));
    }
    for (int c = 0; c < 16; c++) {
        const __m512i raw = _mm512_load_si512((const void *)(qs + 64 * c));
        for (int j = 0; j < 4; j++) {   // columns 128 (c / 8) + 32 j + 4 (c % 8) .., sub-block 8 (c / 8) + 2 j + (c % 8) / 4
            const int nc = 32 * (c / 8) + 8 * j + c % 8, g = nc / 4;
            const __m512i u = llm__x16q3_chunk(raw, hm, c, j);   // q + 4, 0..7
            // sc * (u - 4) + 124 = u * sc + (124 - 4 sc), 0..252, in 16 bits: even bytes, then odd
            const __m512i lo = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_and_si512(u, even), sc8[g]), bias[g]);
            const __m512i hi = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_and_si512(u, odd), sc8[g]), bias[g]);
            _mm512_store_si512((void *)t->q[nc], _mm512_or_si512(lo, _mm512_slli_epi16(hi, 8)));
        }
    }
    _mm512_storeu_ps(t->d, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)llm__x16q3_d(rec, nsb, sb))));
}

// out[t][0..16) (+)= the tile's 16 rows times NT tokens' Q8_K block (act + t * stride).
LLM__AVX512 static inline __attribute__((always_inline)) void llm__kt_tokens(
        int type, int NT, const struct llm__kt_tile *tl, const uint8_t *act, size_t stride, float *out, size_t ostride,
        bool first) {
    const int off = llm__kt_off(type), G = llm__kt_group(type);
    const struct llm__block_q8_K *a[8] = {0};   // (all 8 set: LLM_GENERIC_TILES builds warn otherwise)
    __m512i s[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        a[t] = (const struct llm__block_q8_K *)(act + (size_t)t * stride);
        int32_t bs = 0;
        for (int g = 0; g < 16; g++) bs += a[t]->bsums[g];
        s[t] = _mm512_set1_epi32(G == 64 ? -off * bs : 0);
    }
    for (int g0 = 0; g0 < 64; g0 += G) {   // one group of columns with one scale per row
        const int gi = g0 / G;
        __m512i sg[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) sg[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            const int bs = G == 4 ? a[t]->bsums[gi] : a[t]->bsums[2 * gi] + a[t]->bsums[2 * gi + 1];
            sg[t] = G == 64 ? s[t] : _mm512_set1_epi32(-off * bs);
        }
#pragma GCC unroll 8
        for (int c = g0; c < g0 + G; c++) {
            const __m512i wv = _mm512_load_si512((const void *)tl->q[c]);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                int32_t a4;
                memcpy(&a4, a[t]->qs + 4 * c, 4);
                sg[t] = _mm512_dpbusd_epi32(sg[t], wv, _mm512_set1_epi32(a4));
            }
        }
        if (G == 64) {
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) s[t] = sg[t];
        } else {
            const __m512i ls = _mm512_loadu_si512((const void *)tl->ls[gi]);
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(sg[t], ls));
        }
    }
    const __m512 d = _mm512_loadu_ps(tl->d);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
        float *o = out + (size_t)t * ostride;
        __m512 acc = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(d, _mm512_set1_ps(a[t]->d)), acc);
        if (type == LLM__TYPE_Q2_K || type == LLM__TYPE_Q5_K) {
            __m512i mi = _mm512_setzero_si512();
            for (int p = 0; p < 8; p++) {
                int32_t pair;
                memcpy(&pair, a[t]->bsums + 2 * p, 4);
                mi = _mm512_dpwssd_epi32(mi, _mm512_loadu_si512((const void *)tl->m[p]), _mm512_set1_epi32(pair));
            }
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi), _mm512_mul_ps(_mm512_loadu_ps(tl->dmin), _mm512_set1_ps(-a[t]->d)), acc);
        }
        _mm512_storeu_ps(o, acc);
    }
}

LLM__AVX512 static void llm__kt_tokens_avx512(int type, int nt, const struct llm__kt_tile *tl, const uint8_t *act,
                                              size_t stride, float *out, size_t ostride, bool first) {
#define LLM__KT_CALL(TYPE, N) llm__kt_tokens(TYPE, N, tl, act, stride, out, ostride, first)
#define LLM__KT_CASE(TYPE) LLM__NT_SWITCH(LLM__KT_CALL, TYPE)
    switch (type) {
    case LLM__KT_X16Q3: LLM__KT_CASE(LLM__KT_X16Q3) break;
    case LLM__TYPE_Q2_K: LLM__KT_CASE(LLM__TYPE_Q2_K) break;
    case LLM__TYPE_Q5_K: LLM__KT_CASE(LLM__TYPE_Q5_K) break;
    case LLM__TYPE_Q6_K: LLM__KT_CASE(LLM__TYPE_Q6_K) break;
    default: LLM__KT_CASE(LLM__TYPE_IQ4_XS) break;
    }
#undef LLM__KT_CASE
#undef LLM__KT_CALL
}
#endif

// Splits chunks [0, n) into contiguous shares, one per thread.
static void llm__cursors_init(struct llm__cpu *c, int64_t n) {
    int nth = llm__pool_nth(c->pool);
    for (int i = 0; i < nth; i++) {
        int64_t lo, hi;
        llm__split(n, i, nth, &lo, &hi);
        atomic_store_explicit(&c->cursors[i].next, lo, memory_order_relaxed);
        c->cursors[i].end = hi;
    }
}

// The next chunk for thread ith: its own first, then the others'. -1 when all are taken.
static int64_t llm__cursors_next(struct llm__cpu *c, int ith, int nth) {
    for (int k = 0; k < nth; k++) {
        struct llm__cursor *cur = &c->cursors[(ith + k) % nth];
        if (atomic_load_explicit(&cur->next, memory_order_relaxed) >= cur->end) continue;
        int64_t ch = atomic_fetch_add_explicit(&cur->next, 1, memory_order_relaxed);
        if (ch < cur->end) return ch;
    }
    return -1;
}

static enum llm_status llm__cpu_reserve(struct llm__cpu *c, size_t size, struct llm__err *e) {
    if (size <= c->scratch_size) return LLM_OK;
    void *p = llm__alloc(size);
    if (!p) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes of scratch)", size);
    free(c->scratch);
    c->scratch = p;
    c->scratch_size = size;
    return LLM_OK;
}

static void llm__cpu_free(void *ctx) {
    struct llm__cpu *c = ctx;
    if (!c) return;
    llm__pool_free(c->pool);
    free(c->scratch);
    free(c->cursors);
    free(c->gelu);
    free(c);
}

static enum llm_status llm__cpu_buf_alloc(void *ctx, struct llm__buf *buf, size_t size, struct llm__err *e) {
    (void)ctx;
    memset(buf, 0, sizeof(*buf));
    buf->data = llm__alloc(size);
    if (!buf->data) return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes)", size);
    buf->size = size;
    return LLM_OK;
}

static void llm__cpu_buf_free(void *ctx, struct llm__buf *buf) {
    (void)ctx;
    if (!buf->borrowed) free(buf->data);
    memset(buf, 0, sizeof(*buf));
}

struct llm__cpu_repack_job { struct llm__weight *w; const void *src; };

static void llm__cpu_repack_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_repack_job *job = arg;
    const struct llm__weight *w = job->w;
    int64_t g0, g1;
    llm__split(w->ne1 / 16, ith, nth, &g0, &g1);
    if (llm__is_gq(w->type)) llm__x16g_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
    else if (w->type == LLM__TYPE_Q4_K) llm__x16k_repack(job->src, w->buf.data, w->ne0, g0, g1);
    else if (w->type == LLM__TYPE_Q3_K) llm__x16q3_repack(job->src, w->buf.data, w->ne0, g0, g1);
    else llm__x16_repack(w->type, job->src, w->buf.data, w->ne0, g0, g1);
}

static enum llm_status llm__cpu_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                            int64_t ne1, const void *data, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    memset(w, 0, sizeof(*w));
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->buf.size = llm__row_bytes(type, ne0) * (size_t)ne1;
    if (c->simd == LLM__SIMD_AVX512 && c->repack && llm__x16_supported(type, ne0, ne1)) {
        w->buf.size = llm__x16_group_bytes(type, ne0) * (size_t)(ne1 / 16);
        if (!(w->buf.data = llm__alloc(w->buf.size)))
            return llm__fail(e, LLM_ERR_NOMEM, "out of memory (%zu bytes for a weight)", w->buf.size);
        struct llm__cpu_repack_job job = {w, data};
        llm__pool_run(c->pool, llm__cpu_repack_worker, &job);
        w->layout = LLM__LAYOUT_X16;
        return LLM_OK;
    }
    // Zero-copy: the rows are used where the mapped file has them.
    w->buf.data = (void *)data;
    w->buf.borrowed = true;
    return LLM_OK;
}

static void llm__cpu_weight_free(void *ctx, struct llm__weight *w) {
    llm__cpu_buf_free(ctx, &w->buf);
}

static void llm__cpu_upload(void *ctx, struct llm__buf *buf, size_t offs, const void *src, size_t n) {
    (void)ctx;
    memcpy((char *)buf->data + offs, src, n);
}

static void llm__cpu_download(void *ctx, const struct llm__buf *buf, size_t offs, void *dst, size_t n) {
    (void)ctx;
    memcpy(dst, (const char *)buf->data + offs, n);
}

static void llm__cpu_begin_step(void *ctx, const struct llm__step *step) {
    struct llm__cpu *c = ctx;
    c->step = step;
    llm__pool_step_begin(c->pool, step->n_tokens);
}

static enum llm_status llm__cpu_end_step(void *ctx, struct llm__err *e) {
    (void)e;
    struct llm__cpu *c = ctx;
    llm__pool_step_end(c->pool);
    c->step = NULL;
    return LLM_OK;
}

#if defined(LLM__X86_SIMD)
// e^x for 16 floats, about 1 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-6 Taylor
// polynomial, times 2^n with vscalefps (which flushes to 0 far below the float range).
LLM__AVX512 static inline __m512 llm__exp_avx512(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

// --- row-wise ops: a job over the rows of a tensor ---

struct llm__cpu_rows_job {
    struct llm__cpu *c;
    struct llm__tensor dst, a, b;
    float eps;
    const struct llm__weight *table;
    int64_t n_rows;
    void (*row)(const struct llm__cpu_rows_job *job, int64_t i);
};

static void llm__cpu_rows_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_rows_job *job = arg;
    int64_t lo, hi;
    llm__split(job->n_rows, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) job->row(job, i);
}

// Small ops on few rows are not worth waking the pool for.
static void llm__cpu_run_rows(struct llm__cpu_rows_job *job) {
    if (job->n_rows * job->dst.ne0 < 16384) llm__cpu_rows_worker(job, 0, 1);
    else llm__pool_run(job->c->pool, llm__cpu_rows_worker, job);
}

static void llm__cpu_embed_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const struct llm__weight *t = job->table;
    int32_t tok = job->c->step->tokens[i];
    if (t->layout == LLM__LAYOUT_X16) {
        llm__x16_row(t->type, t->buf.data, tok, (float *)llm__tensor_row(job->dst, i), t->ne0);
        return;
    }
    const char *src = (const char *)t->buf.data + (size_t)tok * llm__row_bytes(t->type, t->ne0);
    llm__dequantize_row(t->type, src, (float *)llm__tensor_row(job->dst, i), t->ne0);
}

static void llm__cpu_embed(void *ctx, struct llm__tensor dst, const struct llm__weight *table) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rows_job job = {.c = c, .dst = dst, .table = table,
                                    .n_rows = c->step->n_tokens, .row = llm__cpu_embed_row};
    llm__cpu_run_rows(&job);
}

#if defined(LLM__X86_SIMD)
// Sum of the squares (each squared in float) in double, 8 at a time.
LLM__AVX512 static double llm__sumsq_avx512(const float *x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(x + j), sq = _mm512_mul_ps(v, v);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
    }
    double ss = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    for (; j < n; j++) ss += (double)(x[j] * x[j]);
    return ss;
}
#endif

static void llm__cpu_rmsnorm_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *x = (const float *)llm__tensor_row(job->a, i);
    const float *w = (const float *)llm__tensor_row(job->b, 0);
    float *y = (float *)llm__tensor_row(job->dst, i);
    int64_t n = job->dst.ne0;
    double ss = 0.0;   // as llama.cpp: the sum of squares in double
#if defined(LLM__X86_SIMD)
    if (job->c->simd == LLM__SIMD_AVX512) ss = llm__sumsq_avx512(x, n);
    else
#endif
    for (int64_t j = 0; j < n; j++) ss += (double)(x[j] * x[j]);
    float scale = 1.0f / sqrtf((float)(ss / (double)n) + job->eps);
    for (int64_t j = 0; j < n; j++) y[j] = (x[j] * scale) * w[j];
}

static void llm__cpu_rmsnorm(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor w,
                             float eps) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .b = w, .eps = eps,
                                    .n_rows = x.ne1, .row = llm__cpu_rmsnorm_row};
    llm__cpu_run_rows(&job);
}

#if defined(LLM__X86_SIMD)
LLM__AVX512 static void llm__silu_mul_avx512(const float *g, const float *u, float *y, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 gv = _mm512_loadu_ps(g + j);
        const __m512 e = llm__exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(u + j)));
    }
    for (; j < n; j++) y[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}
#endif

static void llm__cpu_silu_mul_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *g = (const float *)llm__tensor_row(job->a, i);
    const float *u = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
#if defined(LLM__X86_SIMD)
    if (job->c->simd == LLM__SIMD_AVX512) {
        llm__silu_mul_avx512(g, u, y, job->dst.ne0);
        return;
    }
#endif
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}

static void llm__cpu_silu_mul(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = gate, .b = up,
                                    .n_rows = gate.ne1, .row = llm__cpu_silu_mul_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_add_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *a = (const float *)llm__tensor_row(job->a, i);
    const float *b = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = a[j] + b[j];
}

static void llm__cpu_add(void *ctx, struct llm__tensor dst, struct llm__tensor a, struct llm__tensor b) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = a, .b = b,
                                    .n_rows = a.ne1, .row = llm__cpu_add_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_scale_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *a = (const float *)llm__tensor_row(job->a, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = a[j] * job->eps;
}

static void llm__cpu_scale(void *ctx, struct llm__tensor dst, struct llm__tensor x, float s) {
    // (eps carries the factor)
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .eps = s, .n_rows = x.ne1, .row = llm__cpu_scale_row};
    llm__cpu_run_rows(&job);
}

// GELU, tanh approximation, as llama.cpp's CPU backend computes it: the input rounded to half
// precision and the result read from a table of half-precision values (its GGML_GELU_FP16), so
// gelu(x) = fp16(gelu(fp16(x))) for |x| < 10; 0 below -10, x above 10.
static inline float llm__gelu_half(uint16_t x) {   // the table's entry for a half-precision x
    const float h = llm__fp16_to_fp32(x);
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)));
    return llm__fp16_to_fp32(llm__fp32_to_fp16(g));
}
static inline float llm__gelu_ggml(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return llm__gelu_half(llm__fp32_to_fp16(x));
}

// As llm__gelu_ggml, read from the table of its values at every half-precision input (the
// rounding to half precision is vectorized; tanhf per element was a tenth of Gemma's prefill).
static void llm__cpu_gelu_mul_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *g = (const float *)llm__tensor_row(job->a, i);
    const float *u = (const float *)llm__tensor_row(job->b, i);
    float *y = (float *)llm__tensor_row(job->dst, i);
    const float *tab = job->c->gelu;
    if (!tab) {   // (no memory for the table)
        for (int64_t j = 0; j < job->dst.ne0; j++) y[j] = llm__gelu_ggml(g[j]) * u[j];
        return;
    }
    uint16_t h[256];
    for (int64_t j0 = 0; j0 < job->dst.ne0; j0 += 256) {
        const int64_t n = LLM__MIN(256, job->dst.ne0 - j0);
        llm__fp32_to_fp16_row(g + j0, h, n);
        for (int64_t j = 0; j < n; j++) {
            const float x = g[j0 + j];
            y[j0 + j] = (x <= -10.0f ? 0.0f : x >= 10.0f ? x : tab[h[j]]) * u[j0 + j];
        }
    }
}

static void llm__cpu_gelu_mul(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up) {
    struct llm__cpu *c = ctx;
    if (!c->gelu && (c->gelu = malloc(sizeof(float) * 65536)))
        for (uint32_t v = 0; v < 65536; v++) c->gelu[v] = llm__gelu_half((uint16_t)v);
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = gate, .b = up,
                                    .n_rows = gate.ne1, .row = llm__cpu_gelu_mul_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_gather_cols_row(const struct llm__cpu_rows_job *job, int64_t i) {
    const float *x = (const float *)llm__tensor_row(job->a, i);
    const int32_t *perm = (const int32_t *)(const void *)llm__tensor_row(job->b, 0);
    float *y = (float *)llm__tensor_row(job->dst, i);
    for (int64_t k = 0; k < job->dst.ne0; k++) y[k] = x[perm[k]];
}

static void llm__cpu_gather_cols(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor perm) {
    struct llm__cpu_rows_job job = {.c = ctx, .dst = dst, .a = x, .b = perm, .n_rows = x.ne1, .row = llm__cpu_gather_cols_row};
    llm__cpu_run_rows(&job);
}

static void llm__cpu_get_rows_row(const struct llm__cpu_rows_job *job, int64_t i) {
    int32_t r = job->c->step->out_rows[i];
    memcpy(llm__tensor_row(job->dst, i), llm__tensor_row(job->a, r), (size_t)job->dst.ne0 * sizeof(float));
}

static void llm__cpu_get_rows(void *ctx, struct llm__tensor dst, struct llm__tensor src) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rows_job job = {.c = c, .dst = dst, .a = src,
                                    .n_rows = c->step->n_out, .row = llm__cpu_get_rows_row};
    llm__cpu_run_rows(&job);
}

// --- RoPE ---

struct llm__cpu_rope_job {
    struct llm__cpu *c;
    struct llm__tensor x;
    int n_head, head_dim;
    const struct llm__rope *rope;
};

// cos/sin of every rotated pair at position pos, computed as llama.cpp does (theta multiplied by
// theta_scale pair after pair, in float) so that results agree closely.
static void llm__rope_cache(const struct llm__rope *r, int32_t pos, float *cs) {
    float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    const float *ff = r->freq_factors.buf ? (const float *)llm__tensor_row(r->freq_factors, 0) : NULL;
    float theta = (float)pos;
    for (int i = 0; i < r->n_rot / 2; i++) {
        float t = r->freq_scale * (ff ? theta / ff[i] : theta);
        cs[2 * i + 0] = cosf(t);
        cs[2 * i + 1] = sinf(t);
        theta *= theta_scale;
    }
}

static void llm__rope_apply(const struct llm__rope *r, const float *cs, float *x) {
    int half = r->n_rot / 2;
    for (int i = 0; i < half; i++) {
        int i0 = r->neox ? i : 2 * i;
        int i1 = r->neox ? i + half : 2 * i + 1;
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}

static void llm__cpu_rope_worker(void *arg, int ith, int nth) {
    const struct llm__cpu_rope_job *job = arg;
    float cs[1024];   // head_dim <= 1024 is checked at load
    int64_t lo, hi;
    llm__split(job->x.ne1, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        llm__rope_cache(job->rope, job->c->step->positions[t], cs);
        float *row = (float *)llm__tensor_row(job->x, t);
        for (int h = 0; h < job->n_head; h++) llm__rope_apply(job->rope, cs, row + h * job->head_dim);
    }
}

static void llm__cpu_rope(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *rope) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_rope_job job = {c, x, n_head, head_dim, rope};
    if (x.ne1 < 4) llm__cpu_rope_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_rope_worker, &job);
}

// --- KV store ---
//
// The CPU backend's cache layout, block by block (a block is block_size slots of the views the
// engine hands over, so its bytes are the same): V as rows, [slot][kv head][dim]; K transposed
// within the block, [kv head][dim][slot], so that the scores of one query against a block's
// keys are dim-by-dim multiply-adds of contiguous vectors (no horizontal sums).

struct llm__cpu_kv_job { struct llm__cpu *c; struct llm__tensor k_cache, v_cache, k, v; };

// Tokens [lo, hi): values as rows, keys scattered into their block's [dim][slot] layout.
static void llm__cpu_kv_store_worker(void *arg, int ith, int nth) {
    struct llm__cpu_kv_job *j = arg;
    const struct llm__step *s = j->c->step;
    const int bs = s->block_size;
    const size_t esz = j->k_cache.type == LLM__TYPE_F32 ? 4 : 2;
    int64_t lo, hi;
    llm__split(s->n_tokens, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int32_t slot = s->slot_mapping[t];
        llm__quantize_row(j->v_cache.type, (const float *)llm__tensor_row(j->v, t), llm__tensor_row(j->v_cache, slot), j->v.ne0);
        char *blk = llm__tensor_row(j->k_cache, (int64_t)(slot / bs) * bs);
        const float *kr = (const float *)llm__tensor_row(j->k, t);
        uint16_t h[1024];   // a row is converted 1024 values at a time, then scattered
        for (int64_t c0 = 0; c0 < j->k.ne0; c0 += 1024) {
            int64_t nc = LLM__MIN(1024, j->k.ne0 - c0);
            if (esz == 2) llm__fp32_to_fp16_row(kr + c0, h, nc);
            for (int64_t col = c0; col < c0 + nc; col++) {
                size_t at = ((size_t)col * (size_t)bs + (size_t)(slot % bs)) * esz;
                if (esz == 4) memcpy(blk + at, &kr[col], 4);
                else memcpy(blk + at, &h[col - c0], 2);
            }
        }
    }
}

static void llm__cpu_kv_store(void *ctx, struct llm__tensor k_cache, struct llm__tensor v_cache,
                              struct llm__tensor k, struct llm__tensor v) {
    struct llm__cpu *c = ctx;
    struct llm__cpu_kv_job job = {c, k_cache, v_cache, k, v};
    if (c->step->n_tokens < 4) llm__cpu_kv_store_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_kv_store_worker, &job);
}

// --- paged attention ---
//
// One work item = one token and one KV head with its group of query heads (GQA). Keys are read
// block by block through the sequence's block table with an online softmax: per block, the
// scores of its keys, then the running max and sum are rescaled once and the values added. No
// score matrix is ever materialised. With a half-precision cache, queries are rounded to half
// precision before the dot product with the keys, as llama.cpp does.

struct llm__cpu_attn_job {
    struct llm__cpu *c;
    struct llm__tensor out, q, k_cache, v_cache;
    const struct llm__attn *p;
    atomic_int next;
    size_t scratch_per_thread;   // floats
};

// Per-thread scratch, in floats: q, acc [G][hd]; kt [hd][bs]; vb [bs][hd]; sc [G][max(32, bs, hd)];
// m, l [G]. (sc first holds q in half precision.)
static size_t llm__attn_scratch(int G, int hd, int bs) {
    return ((size_t)(2 * G * hd + 2 * hd * bs + G * LLM__MAX(32, LLM__MAX(bs, hd)) + 2 * G) + 15) & ~(size_t)15;
}

// Converts n cache elements (f16 or f32) to f32.
static inline void llm__kv_to_f32(int type, const void *src, float *dst, int64_t n) {
    if (type == LLM__TYPE_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else llm__fp16_to_fp32_row((const uint16_t *)src, dst, n);
}

#if defined(LLM__X86_SIMD)

// 16 cache values (f16 or f32) as floats.
// e^x for 8 floats, as llm__exp_avx512 (x clamped to [-87, 88.3]; 2^n built in the exponent bits).
LLM__AVX2 static inline __m256 llm__exp_avx2(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3f)), _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

LLM__AVX2 static inline __m256 llm__kv_load8(const char *p, bool f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

// llm__attn_block_avx512 on AVX2 (head_dim % 8 == 0): the 32 keys as 4 groups of 8 (the first
// two in kt0's 16 slots, the others in kt1's), scores of 2 heads at a time, values 8 columns at
// a time for up to 8 heads.
LLM__AVX2 static void llm__attn_block_avx2(int G, int hd, int kstride, int nk, int skip, float scale, const float *q,
                                           const char *kt0, const char *kt1, const char *v0, const char *v1,
                                           size_t vstride, bool f16, float *sc, float *m, float *l, float *acc) {
    const size_t esz = f16 ? 2 : 4;
    const int ngrp = (nk + 7) / 8;
    __m256 valid[4];   // keys at or past nk, or before skip: -inf scores, zero weights
    for (int g = 0; g < 4; g++) {
        const __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * g));
        valid[g] = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(skip), idx),
                                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(nk), idx)));
    }
    for (int h0 = 0; h0 < G; h0 += 2) {
        const int ng = LLM__MIN(2, G - h0);
        __m256 s[2][4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) s[0][g] = s[1][g] = _mm256_setzero_ps();
        for (int i = 0; i < hd; i++) {
            __m256 kv[4];
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++)
                kv[g] = g < ngrp ? llm__kv_load8((g < 2 ? kt0 : kt1) + ((size_t)i * kstride + (size_t)(g & 1) * 8) * esz, f16)
                                 : _mm256_setzero_ps();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                if (h >= ng) break;
                const __m256 qi = _mm256_set1_ps(q[(size_t)(h0 + h) * hd + i]);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) s[h][g] = _mm256_fmadd_ps(qi, kv[g], s[h][g]);
            }
        }
        for (int h = 0; h < ng; h++) {
            const int hh = h0 + h;
            __m256 a[4], mx = _mm256_set1_ps(-INFINITY);
            for (int g = 0; g < 4; g++) {
                a[g] = _mm256_mul_ps(s[h][g], _mm256_set1_ps(scale));
                mx = _mm256_max_ps(mx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), a[g], valid[g]));
            }
            const float bmax = llm__hmax_avx2(mx);
            const float mnew = fmaxf(m[hh], bmax);
            const float corr = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - mnew);
            const __m256 mv = _mm256_set1_ps(mnew);
            __m256 sum = _mm256_setzero_ps();
            for (int g = 0; g < 4; g++) {
                const __m256 p = _mm256_and_ps(valid[g], llm__exp_avx2(_mm256_sub_ps(a[g], mv)));
                _mm256_storeu_ps(sc + (size_t)hh * 32 + 8 * g, p);
                sum = _mm256_add_ps(sum, p);
            }
            l[hh] = l[hh] * corr + llm__hsum_avx2(sum);
            m[hh] = mnew;
            float *ah = acc + (size_t)hh * hd;
            const __m256 cv = _mm256_set1_ps(corr);
            for (int c = 0; c < hd; c += 8) _mm256_storeu_ps(ah + c, _mm256_mul_ps(_mm256_loadu_ps(ah + c), cv));
        }
    }
    // acc[h] += sum_j p[h][j] v[j], 8 columns at a time
    for (int h0 = 0; h0 < G; h0 += 8) {
        const int ng = LLM__MIN(8, G - h0);
        for (int c = 0; c < hd; c += 8) {
            __m256 a[8];
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) a[h] = h < ng ? _mm256_loadu_ps(acc + (size_t)(h0 + h) * hd + c) : _mm256_setzero_ps();
            for (int j = 0; j < nk; j++) {
                const char *vr = j < 16 ? v0 + (size_t)j * vstride : v1 + (size_t)(j - 16) * vstride;
                const __m256 v = llm__kv_load8(vr + (size_t)c * esz, f16);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    if (h >= ng) break;
                    a[h] = _mm256_fmadd_ps(_mm256_set1_ps(sc[(size_t)(h0 + h) * 32 + j]), v, a[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                if (h < ng) _mm256_storeu_ps(acc + (size_t)(h0 + h) * hd + c, a[h]);
        }
    }
}

LLM__AVX512 static inline __m512 llm__kv_load16(const char *p, bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

// The block part of the attention worker for head_dim % 16 == 0 and block size 16 or 32 (8 takes
// the scalar path), reading the cache directly, 32 keys at a time: one block of 32, or two
// blocks of 16 (keys nk <= 32). kt0, kt1 = this head's keys of the first and second 16 slots,
// [dim][slot] with kstride values between dims; v0, v1 = the value rows of their first slots
// for this head, rows vstride bytes apart. Scores of up to 8 heads at a time (each key vector
// converted once for all of them), the softmax update, then the values, 16 columns at a time.
// Keys before skip (< nk) are outside a sliding window: masked as those past nk.
LLM__AVX512 static void llm__attn_block_avx512(int G, int hd, int kstride, int nk, int skip, float scale, const float *q,
                                               const char *kt0, const char *kt1, const char *v0, const char *v1,
                                               size_t vstride, bool f16, float *sc, float *m, float *l, float *acc) {
    const size_t esz = f16 ? 2 : 4;
    const bool two = nk > 16;
    const __mmask16 tail = nk % 16 ? (__mmask16)((1u << (nk % 16)) - 1) : (__mmask16)0xFFFF;
    // keys past nk do not exist and keys before skip are out of the window: -inf scores, zero weights
    const __mmask16 lo0 = skip >= 16 ? (__mmask16)0 : (__mmask16)(0xFFFFu << skip);
    const __mmask16 lo1 = skip <= 16 ? (__mmask16)0xFFFF : (__mmask16)(0xFFFFu << (skip - 16));
    const __mmask16 k0 = (nk >= 16 ? (__mmask16)0xFFFF : tail) & lo0;
    const __mmask16 k1 = (nk >= 32 ? (__mmask16)0xFFFF : nk > 16 ? tail : 0) & lo1;
    for (int h0 = 0; h0 < G; h0 += 8) {
        const int ng = LLM__MIN(8, G - h0);
        __m512 s0[8], s1[8];
#pragma GCC unroll 8
        for (int h = 0; h < 8; h++) s0[h] = s1[h] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i++) {
            const __m512 ka = llm__kv_load16(kt0 + (size_t)i * kstride * esz, f16);
            const __m512 kb = two ? llm__kv_load16(kt1 + (size_t)i * kstride * esz, f16) : ka;
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) {
                if (h >= ng) break;
                const __m512 qi = _mm512_set1_ps(q[(size_t)(h0 + h) * hd + i]);
                s0[h] = _mm512_fmadd_ps(qi, ka, s0[h]);
                if (two) s1[h] = _mm512_fmadd_ps(qi, kb, s1[h]);
            }
        }
        for (int h = 0; h < ng; h++) {
            const int hh = h0 + h;
            const __m512 a = _mm512_mul_ps(s0[h], _mm512_set1_ps(scale)), b = _mm512_mul_ps(s1[h], _mm512_set1_ps(scale));
            float bmax = k0 ? _mm512_mask_reduce_max_ps(k0, a) : -INFINITY;
            if (two && k1) bmax = fmaxf(bmax, _mm512_mask_reduce_max_ps(k1, b));
            const float mnew = fmaxf(m[hh], bmax);
            const float corr = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - mnew);
            const __m512 mv = _mm512_set1_ps(mnew);
            const __m512 p0 = _mm512_maskz_mov_ps(k0, llm__exp_avx512(_mm512_sub_ps(a, mv)));
            const __m512 p1 = two ? _mm512_maskz_mov_ps(k1, llm__exp_avx512(_mm512_sub_ps(b, mv))) : _mm512_setzero_ps();
            _mm512_storeu_ps(sc + (size_t)hh * 32, p0);
            _mm512_storeu_ps(sc + (size_t)hh * 32 + 16, p1);
            l[hh] = l[hh] * corr + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
            m[hh] = mnew;
            float *ah = acc + (size_t)hh * hd;
            const __m512 cv = _mm512_set1_ps(corr);
            for (int c = 0; c < hd; c += 16) _mm512_storeu_ps(ah + c, _mm512_mul_ps(_mm512_loadu_ps(ah + c), cv));
        }
        // acc[h] += sum_j p[h][j] v[j], 16 columns at a time
        for (int c = 0; c < hd; c += 16) {
            __m512 a[8];
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++) a[h] = h < ng ? _mm512_loadu_ps(acc + (size_t)(h0 + h) * hd + c) : _mm512_setzero_ps();
            for (int j = 0; j < nk; j++) {
                const char *vr = j < 16 ? v0 + (size_t)j * vstride : v1 + (size_t)(j - 16) * vstride;
                const __m512 v = llm__kv_load16(vr + (size_t)c * esz, f16);
#pragma GCC unroll 8
                for (int h = 0; h < 8; h++) {
                    if (h >= ng) break;
                    a[h] = _mm512_fmadd_ps(_mm512_set1_ps(sc[(size_t)(h0 + h) * 32 + j]), v, a[h]);
                }
            }
#pragma GCC unroll 8
            for (int h = 0; h < 8; h++)
                if (h < ng) _mm512_storeu_ps(acc + (size_t)(h0 + h) * hd + c, a[h]);
        }
    }
}
#endif

// The same, one value at a time (any head_dim and block size).
// Keys before skip are outside a sliding window (at least one key, nk > skip, is inside).
// softcap > 0: scores become softcap * tanh(score / softcap), as llama.cpp computes it.
static void llm__attn_block_scalar(int G, int hd, int bs, int nk, int skip, float scale, float softcap,
                                   const float *q, const float *kt, const float *vb, float *sc, float *m, float *l,
                                   float *acc) {
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * hd;
        float *sh = sc + (size_t)h * bs, bmax = -INFINITY;
        for (int j = 0; j < nk; j++) {
            if (j < skip) { sh[j] = -INFINITY; continue; }
            float d = 0.0f;
            for (int i = 0; i < hd; i++) d += qh[i] * kt[(size_t)i * bs + j];
            sh[j] = d * scale;
            if (softcap > 0.0f) sh[j] = softcap * tanhf(sh[j] * (1.0f / softcap));
            bmax = fmaxf(bmax, sh[j]);
        }
        const float mnew = fmaxf(m[h], bmax);
        const float corr = m[h] == -INFINITY ? 0.0f : expf(m[h] - mnew);
        float sum = 0.0f;
        for (int j = 0; j < nk; j++) {
            sh[j] = expf(sh[j] - mnew);
            sum += sh[j];
        }
        l[h] = l[h] * corr + sum;
        m[h] = mnew;
        float *ah = acc + (size_t)h * hd;
        for (int i = 0; i < hd; i++) ah[i] *= corr;
        for (int j = 0; j < nk; j++)
            for (int i = 0; i < hd; i++) ah[i] += sh[j] * vb[(size_t)j * hd + i];
    }
}

static void llm__cpu_attn_worker(void *arg, int ith, int nth) {
    (void)nth;
    struct llm__cpu_attn_job *job = arg;
    const struct llm__step *s = job->c->step;
    const struct llm__attn *p = job->p;
    const int hd = p->head_dim, G = p->n_head / p->n_head_kv, bs = s->block_size;
    const int kvt = job->k_cache.type;
    const size_t esz = kvt == LLM__TYPE_F32 ? 4 : 2;
    float *q = (float *)job->c->scratch + (size_t)ith * job->scratch_per_thread;
    float *acc = q + (size_t)G * hd, *kt = acc + (size_t)G * hd, *vb = kt + (size_t)hd * bs;
    float *sc = vb + (size_t)bs * hd, *m = sc + (size_t)G * LLM__MAX(32, LLM__MAX(bs, hd)), *l = m + G;
    bool simd = false;
#if defined(LLM__X86_SIMD)
    simd = (job->c->simd == LLM__SIMD_AVX512 && hd % 16 == 0 && bs % 16 == 0 && p->softcap == 0.0f) ||
           (job->c->simd == LLM__SIMD_AVX2 && hd % 8 == 0 && bs % 16 == 0 && p->softcap == 0.0f);
#endif
    int n_items = s->n_tokens * p->n_head_kv;
    for (int item; (item = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < n_items;) {
        int t = item / p->n_head_kv, g = item % p->n_head_kv;
        int n_ctx = s->positions[t] + 1;
        // a sliding window starts at key j_lo; the blocks before its block are not read
        const int j_lo = p->window > 0 && n_ctx > p->window ? n_ctx - p->window : 0;
        const int32_t *bt = s->block_tables + (size_t)s->seq_idx[t] * s->max_blocks;
        const float *qrow = (const float *)llm__tensor_row(job->q, t) + (size_t)g * G * hd;
        if (kvt == LLM__TYPE_F16) {
            // round q to half precision (sc is free until the first block)
            llm__fp32_to_fp16_row(qrow, (uint16_t *)sc, (int64_t)G * hd);
            llm__fp16_to_fp32_row((const uint16_t *)sc, q, (int64_t)G * hd);
        } else {
            memcpy(q, qrow, sizeof(float) * (size_t)G * hd);
        }
        memset(acc, 0, sizeof(float) * (size_t)G * hd);
        for (int h = 0; h < G; h++) { m[h] = -INFINITY; l[h] = 0.0f; }
        for (int j0 = j_lo / bs * bs; j0 < n_ctx; j0 += simd ? 32 : bs) {
            int nk = LLM__MIN(simd ? 32 : bs, n_ctx - j0), skip = LLM__MAX(0, j_lo - j0);
            int64_t slot0 = (int64_t)bt[j0 / bs] * bs;
            const char *kblk = llm__tensor_row(job->k_cache, slot0) + (size_t)g * hd * bs * esz;
            const char *v0 = llm__tensor_row(job->v_cache, slot0) + (size_t)g * hd * esz;
#if defined(LLM__X86_SIMD)
            if (simd) {   // 32 keys: a block of 32, or two blocks of 16
                const char *kt1 = kblk + 16 * esz, *v1 = v0 + 16 * job->v_cache.nb1;
                if (bs == 16 && nk > 16) {
                    int64_t slot1 = (int64_t)bt[j0 / bs + 1] * bs;
                    kt1 = llm__tensor_row(job->k_cache, slot1) + (size_t)g * hd * bs * esz;
                    v1 = llm__tensor_row(job->v_cache, slot1) + (size_t)g * hd * esz;
                }
                (job->c->simd == LLM__SIMD_AVX512 ? llm__attn_block_avx512 : llm__attn_block_avx2)(
                    G, hd, bs, nk, skip, p->scale, q, kblk, kt1, v0, v1, job->v_cache.nb1, kvt == LLM__TYPE_F16, sc, m, l, acc);
                continue;
            }
#endif
            // this head's keys, [dim][slot], and its values, [slot][dim], as f32
            llm__kv_to_f32(kvt, kblk, kt, (int64_t)hd * bs);
            for (int j = 0; j < nk; j++) llm__kv_to_f32(kvt, v0 + (size_t)j * job->v_cache.nb1, vb + (size_t)j * hd, hd);
            llm__attn_block_scalar(G, hd, bs, nk, skip, p->scale, p->softcap, q, kt, vb, sc, m, l, acc);
        }
        float *orow = (float *)llm__tensor_row(job->out, t) + (size_t)g * G * hd;
        for (int h = 0; h < G; h++) {
            float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
            for (int i = 0; i < hd; i++) orow[h * hd + i] = acc[h * hd + i] * inv;
        }
    }
}

static void llm__cpu_attention(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                               struct llm__tensor v_cache, const struct llm__attn *p) {
    struct llm__cpu *c = ctx;
    int G = p->n_head / p->n_head_kv;
    size_t per = llm__attn_scratch(G, p->head_dim, c->step->block_size);
    assert(per * sizeof(float) * (size_t)llm__pool_nth(c->pool) <= c->scratch_size);   // see llm__cpu_reserve_shape
    struct llm__cpu_attn_job job = {.c = c, .out = out, .q = q, .k_cache = k_cache, .v_cache = v_cache,
                                    .p = p, .scratch_per_thread = per};
    atomic_init(&job.next, 0);
    if (c->step->n_tokens * p->n_head_kv == 1) llm__cpu_attn_worker(&job, 0, 1);
    else llm__pool_run(c->pool, llm__cpu_attn_worker, &job);
}

// --- matrix products ---

struct llm__cpu_mm_job {
    struct llm__cpu *c;
    int n;                                     // weights
    const struct llm__tensor *dst;
    const struct llm__weight *const *w;
    const struct llm__tensor *bias;
    struct llm__tensor x;                      // [ntok][ne0] f32
    int64_t ntok;
    const char *xq[LLM__MAX_MATMUL_WEIGHTS];   // activations of weight j in its dot type
    size_t xq_stride[LLM__MAX_MATMUL_WEIGHTS];
    int fmt[LLM__MAX_MATMUL_WEIGHTS];          // the activation format of weight j (as types[])
    int n_types;                               // distinct activation formats to quantize into
    int types[LLM__MAX_MATMUL_WEIGHTS];        // a dot type, LLM__X16_ACT + weight type or LLM__HALF_ACT + weight type
    char *xq_base[LLM__MAX_MATMUL_WEIGHTS];
    int64_t rows_per_chunk;
    int64_t chunk_start[LLM__MAX_MATMUL_WEIGHTS + 1];   // prefix sums of chunks per weight
};

#define LLM__SC_ACT 500      // from this up to 1000: Q8_0 or Q8_1 (id - 500) rows followed by their blocks'
                             // scales as floats (d of every block, then s: Q8_1), for llm__b32_tile
#define LLM__SC_OFF(n) (((size_t)(n) + 3) & ~(size_t)3)   // where the scales start: 4-byte aligned
#define LLM__X16_ACT 1000    // activation format ids from this up to 2000: x16 formats of type id - 1000
#define LLM__HALF_ACT 2000   // activation format ids from this up: floats rounded to half type id - 2000

// y = x rounded to F16 or BF16 (type) and widened back.
static void llm__round_half_row(int type, const float *x, float *y, int64_t n) {
    uint16_t h[256];
    for (int64_t i = 0; i < n; i += 256) {
        const int64_t m = LLM__MIN(256, n - i);
        if (type == LLM__TYPE_BF16) {
            for (int64_t k = 0; k < m; k++) y[i + k] = llm__bf16_to_fp32(llm__fp32_to_bf16(x[i + k]));
        } else {
            llm__fp32_to_fp16_row(x + i, h, m);
            llm__fp16_to_fp32_row(h, y + i, m);
        }
    }
}

static size_t llm__act_row_bytes(int fmt, int64_t K) {
    if (fmt >= LLM__HALF_ACT) return (size_t)K * sizeof(float);
    if (fmt == LLM__X16_ACT + LLM__TYPE_Q4_K) return LLM__X16K_ACT_STRIDE(K);
    if (fmt >= LLM__SC_ACT && fmt < LLM__X16_ACT)
        return LLM__SC_OFF(llm__row_bytes(fmt - LLM__SC_ACT, K)) + (size_t)(K / LLM__QK) * (fmt - LLM__SC_ACT == LLM__TYPE_Q8_1 ? 8 : 4);
    return fmt >= LLM__X16_ACT ? LLM__X16_ACT_STRIDE(K) : llm__row_bytes(fmt, K);
}

static void llm__cpu_mm_quantize(struct llm__cpu_mm_job *job, int64_t lo, int64_t hi) {
    int64_t K = job->x.ne0;
    for (int i = 0; i < job->n_types; i++) {
        int fmt = job->types[i];
        size_t stride = llm__act_row_bytes(fmt, K);
        for (int64_t t = lo; t < hi; t++) {
            const float *x = (const float *)llm__tensor_row(job->x, t);
            uint8_t *out = (uint8_t *)job->xq_base[i] + (size_t)t * stride;
            if (fmt >= LLM__HALF_ACT) llm__round_half_row(fmt - LLM__HALF_ACT, x, (float *)(void *)out, K);
            else if (fmt == LLM__X16_ACT + LLM__TYPE_Q4_K) llm__x16k_quantize_act(x, out, K);
            else if (fmt >= LLM__X16_ACT) llm__x16_quantize_act(fmt - LLM__X16_ACT, x, out, K);
            else if (fmt >= LLM__SC_ACT) {
                const int vt = fmt - LLM__SC_ACT;
                const int64_t nb = K / LLM__QK;
                const size_t bb = vt == LLM__TYPE_Q8_1 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
                float *sc = (float *)(void *)(out + LLM__SC_OFF((size_t)nb * bb));
                for (int64_t i = 0; i < nb; i++) {   // the blocks as llm__quantize_row writes them
                    uint8_t *blk = out + (size_t)i * bb;
                    uint16_t h[2];
                    float df;
#if defined(LLM__X86_SIMD)   // (LLM__SC_ACT exists only there)
                    const int32_t sum = llm__quantize_q8_0_block_avx2(x + (size_t)i * LLM__QK, (int8_t *)(blk + bb - LLM__QK), &h[0], &df);
#else
                    int32_t sum = 0;
                    df = 0.0f;
                    assert(!"LLM__SC_ACT off x86");
#endif
                    h[1] = llm__fp32_to_fp16((float)sum * df);   // Q8_1's s, as llm__quantize_q8_1
                    memcpy(blk, h, vt == LLM__TYPE_Q8_1 ? 4 : 2);
                    sc[i] = llm__fp16_to_fp32(h[0]);
                    if (vt == LLM__TYPE_Q8_1) sc[nb + i] = llm__fp16_to_fp32(h[1]);
                }
            }
            else llm__quantize_row(fmt, x, out, K);
        }
    }
}

static void llm__cpu_mm_quantize_worker(void *arg, int ith, int nth) {
    int64_t lo, hi;
    struct llm__cpu_mm_job *job = arg;
    llm__split(job->ntok, ith, nth, &lo, &hi);
    llm__cpu_mm_quantize(job, lo, hi);
}

// Tokens per tile of a prefill product: their activations (a few KB each) stay in L2 while a
// chunk of weight rows is walked.
#define LLM__MM_TOKEN_TILE 32

#if defined(LLM__X86_SIMD)
static void llm__cpu_mm_kt(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias);

// Rows [r0, r1) of x16 weight j (r0, r1 multiples of 16) for every token: token blocks sized to
// stay in L2, then tiles of 16 rows x 8 tokens.
static void llm__cpu_mm_x16(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const size_t stride = job->xq_stride[j], rec_bytes = llm__x16_group_bytes(w->type, K);
    const int64_t tb = LLM__MAX(8, LLM__MIN(job->ntok, (int64_t)((512u << 10) / stride) & ~(int64_t)7));
    const int tile = w->type == LLM__TYPE_Q4_K || w->type == LLM__TYPE_Q3_K ? 4 : 8;   // tokens per kernel call
    const struct llm__tensor d = job->dst[j];
    if (w->type == LLM__TYPE_Q3_K && job->ntok >= LLM__KT_MIN_TOKENS) {
        llm__cpu_mm_kt(job, j, r0, r1, bias);
        return;
    }
    for (int64_t t0 = 0; t0 < job->ntok; t0 += tb) {
        int64_t t1 = LLM__MIN(t0 + tb, job->ntok);
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *rec = (const uint8_t *)w->buf.data + (size_t)(r / 16) * rec_bytes;
            for (int64_t t = t0; t < t1; t += tile) {
                int nt = (int)LLM__MIN(tile, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                const uint8_t *act = (const uint8_t *)job->xq[j] + (size_t)t * stride;
                if (w->type == LLM__TYPE_Q4_K) llm__x16k_tile_avx512(nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                else if (w->type == LLM__TYPE_Q3_K) llm__x16q3_tile_avx512(nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                else llm__x16_tile_avx512(w->type, nt, rec, act, stride, K, out, d.nb1 / sizeof(float));
                if (bias)
                    for (int i = 0; i < nt; i++)
                        for (int k = 0; k < 16; k++) out[(size_t)i * (d.nb1 / sizeof(float)) + k] += bias[r + k];
            }
        }
    }
}
#endif

#if defined(LLM__X86_SIMD)
// Rows [r0, r1) of plain K-quant (or IQ4_XS) weight j, or of x16 Q3_K, (r0, r1 multiples of 16) for every token, a
// tile of 16 rows x one super-block at a time (see llm__kt_unpack).
static void llm__cpu_mm_kt(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0, nsb = K / LLM__QK_K;
    const size_t rb = llm__row_bytes(w->type, K), stride = job->xq_stride[j];
    const bool x16 = w->layout == LLM__LAYOUT_X16;   // Q3_K
    const int type = x16 ? LLM__KT_X16Q3 : w->type;
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    struct llm__kt_tile tile;
    for (int64_t r = r0; r < r1; r += 16) {
        for (int64_t sb = 0; sb < nsb; sb++) {
            if (x16) llm__kt_unpack_x16q3((const uint8_t *)w->buf.data + (size_t)(r / 16) * llm__x16q3_group_bytes(K), nsb, sb, &tile);
            else llm__kt_unpack_avx512(w->type, (const uint8_t *)w->buf.data + (size_t)r * rb, rb, sb, &tile);
            for (int64_t t = 0; t < job->ntok; t += 8) {
                const uint8_t *act = (const uint8_t *)job->xq[j] + (size_t)t * stride + (size_t)sb * sizeof(struct llm__block_q8_K);
                llm__kt_tokens_avx512(type, (int)LLM__MIN(8, job->ntok - t), &tile, act, stride,
                                      (float *)llm__tensor_row(d, t) + r, os, sb == 0);
            }
        }
        if (bias)
            for (int64_t t = 0; t < job->ntok; t++)
                for (int k = 0; k < 16; k++) ((float *)llm__tensor_row(d, t))[r + k] += bias[r + k];
    }
}
#endif

#if defined(LLM__X86_SIMD)
// --- F16 and BF16 weights on AVX-512: a register tile of rows x tokens ---
//
// A row of half-precision weights is widened to floats once per tile and multiplied with up to
// 4 tokens (a verification step of speculative decoding, a prompt) instead of once per token.
// The activations are rounded to the weight's half type, as the per-row dot products (and
// ggml) do, but kept as floats so that the tile loads them without a conversion. Each (row,
// token) pair has one accumulator summed in column order and reduced the same way whatever the
// tile's shape, so a token's result does not depend on how many tokens share the step (greedy
// decoding with and without drafts is the same text).

LLM__AVX512 static inline __attribute__((always_inline)) __m512 llm__half16_to_ps(bool bf16, __m256i h) {
    return bf16 ? llm__bf16x16_to_ps(h) : _mm512_cvtph_ps(h);
}

// out[t * os + r] (r < NR, t < NT) = row r of w (ws elements apart) . token t of a (as floats apart) over K.
LLM__AVX512 static inline __attribute__((always_inline)) void llm__half_tile(bool bf16, bool pf, int NR, int NT, const uint16_t *w,
                                                                             size_t ws, const float *a, size_t as,
                                                                             int64_t K, float *out, size_t os) {
    __m512 acc[4][4];   // (all set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < 4; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 wv[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        // the tile's rows are one block of memory (NR * K halves); the block two tiles ahead is
        // prefetched in address order, the bytes this step reads (NR * 32) at a time, as one
        // stream: the hardware prefetchers alone, or a prefetch of the same columns of the next
        // rows, leave the core waiting on these short rows (only in the first token tile of a
        // group: pf)
        if (pf) {
            const char *p = (const char *)(w + (size_t)2 * NR * ws) + (size_t)k * 2 * NR;
            _Pragma("GCC unroll 2")
            for (int r = 0; r < NR; r += 2) _mm_prefetch(p + 64 * (r / 2), _MM_HINT_T0);
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            wv[r] = llm__half16_to_ps(bf16, _mm256_loadu_si256((const __m256i *)(w + r * ws + k)));
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m512 av = _mm512_loadu_ps(a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (k < K) {
        const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
        __m512 wv[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) wv[r] = llm__half16_to_ps(bf16, _mm256_maskz_loadu_epi16(m, w + r * ws + k));
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m512 av = _mm512_maskz_loadu_ps(m, a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) out[t * os + r] = _mm512_reduce_add_ps(acc[r][t]);
}

#if defined(LLM_GENERIC_TILES)   // (see LLM__NT_SWITCH)
#define LLM__HALF_TILES(BF)                                                                            \
    LLM__AVX512 static void llm__half_tile_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const float *a, \
                                                size_t as, int64_t K, float *out, size_t os) {          \
        llm__half_tile(BF, pf, nr, nt, w, ws, a, as, K, out, os);                                      \
    }
#else
#define LLM__HALF_TILES(BF)                                                                            \
    LLM__AVX512 static void llm__half_tile_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const float *a, \
                                                size_t as, int64_t K, float *out, size_t os) {          \
        switch ((nr - 1) * 4 + nt - 1) {                                                               \
        case 0: llm__half_tile(BF, pf, 1, 1, w, ws, a, as, K, out, os); return;                          \
        case 1: llm__half_tile(BF, pf, 1, 2, w, ws, a, as, K, out, os); return;                          \
        case 2: llm__half_tile(BF, pf, 1, 3, w, ws, a, as, K, out, os); return;                          \
        case 3: llm__half_tile(BF, pf, 1, 4, w, ws, a, as, K, out, os); return;                          \
        case 4: llm__half_tile(BF, pf, 2, 1, w, ws, a, as, K, out, os); return;                          \
        case 5: llm__half_tile(BF, pf, 2, 2, w, ws, a, as, K, out, os); return;                          \
        case 6: llm__half_tile(BF, pf, 2, 3, w, ws, a, as, K, out, os); return;                          \
        case 7: llm__half_tile(BF, pf, 2, 4, w, ws, a, as, K, out, os); return;                          \
        case 8: llm__half_tile(BF, pf, 3, 1, w, ws, a, as, K, out, os); return;                          \
        case 9: llm__half_tile(BF, pf, 3, 2, w, ws, a, as, K, out, os); return;                          \
        case 10: llm__half_tile(BF, pf, 3, 3, w, ws, a, as, K, out, os); return;                         \
        case 11: llm__half_tile(BF, pf, 3, 4, w, ws, a, as, K, out, os); return;                         \
        case 12: llm__half_tile(BF, pf, 4, 1, w, ws, a, as, K, out, os); return;                         \
        case 13: llm__half_tile(BF, pf, 4, 2, w, ws, a, as, K, out, os); return;                         \
        case 14: llm__half_tile(BF, pf, 4, 3, w, ws, a, as, K, out, os); return;                         \
        default: llm__half_tile(BF, pf, 4, 4, w, ws, a, as, K, out, os); return;                         \
        }                                                                                              \
    }
#endif
LLM__HALF_TILES(false)
LLM__HALF_TILES(true)
#undef LLM__HALF_TILES

// The same on AVX2: 8 columns a step, one accumulator per (row, token) pair, tiles of at most
// 8 pairs (16 registers); the columns after the last multiple of 8 come zero-padded. The rows
// two tiles ahead are prefetched (pf): 4 rows read at once defeat the hardware prefetcher
// (decode fell from 48 to 37 tokens/s on SmolLM2 F16 without it).
LLM__AVX2 static inline __attribute__((always_inline)) __m256 llm__half8_to_ps(bool bf16, const uint16_t *p) {
    return bf16 ? llm__load_bf16x8(p) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

LLM__AVX2 static inline __attribute__((always_inline)) void llm__half_tile8(bool bf16, bool pf, int NR, int NT, const uint16_t *w,
                                                                            size_t ws, const float *a, size_t as,
                                                                            int64_t K, float *out, size_t os) {
    __m256 acc[4][4];   // (all set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int r = 0; r < 4; r++)
        _Pragma("GCC unroll 4")
        for (int t = 0; t < 4; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            if (pf && (k & 31) == 0) _mm_prefetch((const char *)(w + (size_t)(2 * NR + r) * ws + k), _MM_HINT_T0);
            wv[r] = llm__half8_to_ps(bf16, w + r * ws + k);
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m256 av = _mm256_loadu_ps(a + t * as + k);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (k < K) {
        const int m = (int)(K - k);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 wv[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) {
            uint16_t h[8] = {0};
            memcpy(h, w + r * ws + k, (size_t)m * sizeof(uint16_t));
            wv[r] = llm__half8_to_ps(bf16, h);
        }
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) {
            const __m256 av = _mm256_maskload_ps(a + t * as + k, mask);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < NR; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++)
        _Pragma("GCC unroll 4")
        for (int r = 0; r < NR; r++) out[t * os + r] = llm__hsum_avx2(acc[r][t]);
}

#if defined(LLM_GENERIC_TILES)
#define LLM__HALF_TILES8(BF)                                                                           \
    LLM__AVX2 static void llm__half_tile8_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const float *a, \
                                               size_t as, int64_t K, float *out, size_t os) {           \
        llm__half_tile8(BF, pf, nr, nt, w, ws, a, as, K, out, os);                                     \
    }
#else
#define LLM__HALF_TILES8(BF)                                                                           \
    LLM__AVX2 static void llm__half_tile8_##BF(bool pf, int nr, int nt, const uint16_t *w, size_t ws, const float *a, \
                                               size_t as, int64_t K, float *out, size_t os) {           \
        switch ((nr - 1) * 4 + nt - 1) {                                                               \
        case 0: llm__half_tile8(BF, pf, 1, 1, w, ws, a, as, K, out, os); return;                         \
        case 1: llm__half_tile8(BF, pf, 1, 2, w, ws, a, as, K, out, os); return;                         \
        case 2: llm__half_tile8(BF, pf, 1, 3, w, ws, a, as, K, out, os); return;                         \
        case 3: llm__half_tile8(BF, pf, 1, 4, w, ws, a, as, K, out, os); return;                         \
        case 4: llm__half_tile8(BF, pf, 2, 1, w, ws, a, as, K, out, os); return;                         \
        case 5: llm__half_tile8(BF, pf, 2, 2, w, ws, a, as, K, out, os); return;                         \
        case 6: llm__half_tile8(BF, pf, 2, 3, w, ws, a, as, K, out, os); return;                         \
        case 8: llm__half_tile8(BF, pf, 3, 1, w, ws, a, as, K, out, os); return;                         \
        case 12: llm__half_tile8(BF, pf, 4, 1, w, ws, a, as, K, out, os); return;                        \
        default: llm__half_tile8(BF, pf, 2, 4, w, ws, a, as, K, out, os); return;                        \
        }                                                                                              \
    }
#endif
LLM__HALF_TILES8(false)
LLM__HALF_TILES8(true)
#undef LLM__HALF_TILES8

// --- Block-32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) on AVX2: a row times up to 4 tokens ---
//
// The row's blocks are unpacked once for the tokens of the tile. Each token's arithmetic is the
// per-row dot product's (llm__vec_dot_*_avx2, which a decode step runs): the same integer sums,
// even blocks into one accumulator and odd ones into another, the same final sums; so a token's
// result does not depend on how many tokens share the step.

static bool llm__b32_tiled(int type) {
    return type == LLM__TYPE_Q8_0 || type == LLM__TYPE_Q4_0 || type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_0 ||
           type == LLM__TYPE_Q5_1 || type == LLM__TYPE_IQ4_NL;
}

// Block i of a row of `type` times the tokens' blocks i into acc[t]; the tokens' activations
// are LLM__SC_ACT rows (their scales as floats after the blocks).
LLM__AVX2 static inline __attribute__((always_inline)) void llm__b32_tile_step(int type, int NT, const uint8_t *w, const uint8_t *a,
                                                                               size_t as, int64_t nb, int64_t i, __m256 *acc) {
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes, ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    const size_t qoff = q81 ? offsetof(struct llm__block_q8_1, qs) : offsetof(struct llm__block_q8_0, qs);
    const uint8_t *wi = w + (size_t)i * wb;
    uint16_t wd;
    memcpy(&wd, wi, 2);
    // the weights as bytes: signed (Q8_0, IQ4_NL: |w| and the signs), else unsigned
    __m256i q, qa = _mm256_setzero_si256();
    if (type == LLM__TYPE_Q8_0) q = _mm256_loadu_si256((const __m256i *)((const struct llm__block_q8_0 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_Q4_0) q = llm__nibbles_avx2(((const struct llm__block_q4_0 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_Q4_1) q = llm__nibbles_avx2(((const struct llm__block_q4_1 *)(const void *)wi)->qs);
    else if (type == LLM__TYPE_IQ4_NL)
        q = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)llm__iq4nl_values)),
                                llm__nibbles_avx2(((const struct llm__block_iq4_nl *)(const void *)wi)->qs));
    else {
        const uint8_t *qs = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)(const void *)wi)->qs : ((const struct llm__block_q5_1 *)(const void *)wi)->qs;
        const uint8_t *qh = type == LLM__TYPE_Q5_0 ? ((const struct llm__block_q5_0 *)(const void *)wi)->qh : ((const struct llm__block_q5_1 *)(const void *)wi)->qh;
        q = _mm256_or_si256(llm__nibbles_avx2(qs), _mm256_and_si256(llm__qh_bytes_avx2(qh), _mm256_set1_epi8(16)));
    }
    if (type == LLM__TYPE_Q8_0 || type == LLM__TYPE_IQ4_NL) qa = _mm256_sign_epi8(q, q);
    const __m256 wdv = _mm256_set1_ps(_cvtsh_ss(wd));
    const __m256i ones = _mm256_set1_epi16(1);
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++) {
        const uint8_t *at = a + (size_t)t * as;
        const __m256i av = _mm256_loadu_si256((const __m256i *)(at + (size_t)i * ab + qoff));
        __m256i p;
        if (type == LLM__TYPE_Q8_0 || type == LLM__TYPE_IQ4_NL) p = _mm256_maddubs_epi16(qa, _mm256_sign_epi8(av, q));
        else if (type == LLM__TYPE_Q4_0) p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, av), _mm256_maddubs_epi16(_mm256_set1_epi8(8), av));
        else if (type == LLM__TYPE_Q5_0) p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, av), _mm256_maddubs_epi16(_mm256_set1_epi8(16), av));
        else p = _mm256_maddubs_epi16(q, av);
        p = _mm256_madd_epi16(p, ones);
        // d_w * d_a in every lane, as the dot product's scalar product
        const __m256 sc = _mm256_mul_ps(wdv, _mm256_broadcast_ss((const float *)(const void *)(at + LLM__SC_OFF((size_t)nb * ab)) + i));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc[t]);
    }
}

// out[t * os] = the row of nb blocks at w . token t of a (as bytes apart), t < NT.
LLM__AVX2 static inline __attribute__((always_inline)) void llm__b32_tile(int type, int NT, const uint8_t *w, const uint8_t *a, size_t as,
                                                                          int64_t nb, float *out, size_t os) {
    __m256 acc0[4], acc1[4];   // (all 4 set: LLM_GENERIC_TILES builds warn otherwise)
    _Pragma("GCC unroll 4")
    for (int t = 0; t < 4; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        llm__b32_tile_step(type, NT, w, a, as, nb, i, acc0);
        llm__b32_tile_step(type, NT, w, a, as, nb, i + 1, acc1);
    }
    if (i < nb) llm__b32_tile_step(type, NT, w, a, as, nb, i, acc0);
    const bool q81 = type == LLM__TYPE_Q4_1 || type == LLM__TYPE_Q5_1;
    const size_t wb = llm__type_table[type].block_bytes, ab = q81 ? sizeof(struct llm__block_q8_1) : sizeof(struct llm__block_q8_0);
    // as the dot products: the mins' terms (Q4_1, Q5_1) summed over even and odd blocks apart
    float summ0[4] = {0}, summ1[4] = {0};
    if (q81) {
        const float *ss[4];
        _Pragma("GCC unroll 4")
        for (int t = 0; t < NT; t++) ss[t] = (const float *)(const void *)(a + (size_t)t * as + LLM__SC_OFF((size_t)nb * ab)) + nb;
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            uint16_t m0, m1;
            memcpy(&m0, w + (size_t)b * wb + 2, 2);
            memcpy(&m1, w + (size_t)(b + 1) * wb + 2, 2);
            const float f0 = _cvtsh_ss(m0), f1 = _cvtsh_ss(m1);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < NT; t++) {
                summ0[t] += f0 * ss[t][b];
                summ1[t] += f1 * ss[t][b + 1];
            }
        }
        if (b < nb) {
            uint16_t m0;
            memcpy(&m0, w + (size_t)b * wb + 2, 2);
            const float f0 = _cvtsh_ss(m0);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < NT; t++) summ0[t] += f0 * ss[t][b];
        }
    }
    _Pragma("GCC unroll 4")
    for (int t = 0; t < NT; t++) {
        float s = llm__hsum_avx2(_mm256_add_ps(acc0[t], acc1[t]));
        if (type != LLM__TYPE_Q8_0 && type != LLM__TYPE_Q4_0) s += summ0[t] + summ1[t];
        out[(size_t)t * os] = s;
    }
}

#if defined(LLM_GENERIC_TILES)
#define LLM__B32_TILES(T, NAME)                                                                                            \
    LLM__AVX2 static void llm__b32_tile_##NAME(int nt, const uint8_t *w, const uint8_t *a, size_t as, int64_t nb, float *out, \
                                               size_t os) {                                                                \
        llm__b32_tile(T, LLM__MIN(nt, 4), w, a, as, nb, out, os);                                                          \
    }
#else
#define LLM__B32_TILES(T, NAME)                                                                                            \
    LLM__AVX2 static void llm__b32_tile_##NAME(int nt, const uint8_t *w, const uint8_t *a, size_t as, int64_t nb, float *out, \
                                               size_t os) {                                                                \
        switch (nt) {                                                                                                      \
        case 1: llm__b32_tile(T, 1, w, a, as, nb, out, os); return;                                                        \
        case 2: llm__b32_tile(T, 2, w, a, as, nb, out, os); return;                                                        \
        case 3: llm__b32_tile(T, 3, w, a, as, nb, out, os); return;                                                        \
        default: llm__b32_tile(T, 4, w, a, as, nb, out, os); return;                                                       \
        }                                                                                                                  \
    }
#endif
LLM__B32_TILES(LLM__TYPE_Q8_0, q8_0)
LLM__B32_TILES(LLM__TYPE_Q4_0, q4_0)
LLM__B32_TILES(LLM__TYPE_Q4_1, q4_1)
LLM__B32_TILES(LLM__TYPE_Q5_0, q5_0)
LLM__B32_TILES(LLM__TYPE_Q5_1, q5_1)
LLM__B32_TILES(LLM__TYPE_IQ4_NL, iq4_nl)
#undef LLM__B32_TILES

// Rows [r0, r1) of block-32 weight j for every token, on AVX2: token blocks of
// LLM__MM_TOKEN_TILE, each row against 4 tokens at a time.
static void llm__cpu_mm_b32(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0, nb = K / LLM__QK;
    const size_t wrow = llm__row_bytes(w->type, K), as = job->xq_stride[j];
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    void (*tile)(int, const uint8_t *, const uint8_t *, size_t, int64_t, float *, size_t) =
        w->type == LLM__TYPE_Q8_0   ? llm__b32_tile_q8_0
        : w->type == LLM__TYPE_Q4_0 ? llm__b32_tile_q4_0
        : w->type == LLM__TYPE_Q4_1 ? llm__b32_tile_q4_1
        : w->type == LLM__TYPE_Q5_0 ? llm__b32_tile_q5_0
        : w->type == LLM__TYPE_Q5_1 ? llm__b32_tile_q5_1
                                    : llm__b32_tile_iq4_nl;
    for (int64_t t0 = 0; t0 < job->ntok; t0 += LLM__MM_TOKEN_TILE) {
        const int64_t t1 = LLM__MIN(t0 + LLM__MM_TOKEN_TILE, job->ntok);
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *wr = (const uint8_t *)w->buf.data + (size_t)r * wrow;
            for (int64_t t = t0; t < t1; t += 4) {
                const int nt = (int)LLM__MIN(4, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                tile(nt, wr, (const uint8_t *)job->xq[j] + (size_t)t * as, as, nb, out, os);
                if (bias)
                    for (int i = 0; i < nt; i++) out[(size_t)i * os] += bias[r];
            }
        }
    }
}

// Rows [r0, r1) of F16 or BF16 weight j for every token: token blocks whose activations stay in
// L2, then tiles of 4 rows x 4 tokens.
static void llm__cpu_mm_half(struct llm__cpu_mm_job *job, int j, int64_t r0, int64_t r1, const float *bias) {
    const struct llm__weight *w = job->w[j];
    const int64_t K = job->x.ne0;
    const size_t as = job->xq_stride[j] / sizeof(float), ws = (size_t)K;
    const int64_t tb = LLM__MAX(4, LLM__MIN(job->ntok, (int64_t)((768u << 10) / job->xq_stride[j]) & ~(int64_t)3));
    const struct llm__tensor d = job->dst[j];
    const size_t os = d.nb1 / sizeof(float);
    const bool bf16 = w->type == LLM__TYPE_BF16, wide = job->c->simd == LLM__SIMD_AVX512;
    void (*tile)(bool, int, int, const uint16_t *, size_t, const float *, size_t, int64_t, float *, size_t) =
        wide ? (bf16 ? llm__half_tile_true : llm__half_tile_false) : (bf16 ? llm__half_tile8_true : llm__half_tile8_false);
    // AVX-512: 1 row at a time for 1 token (a decode step: the weights read in address order;
    // SmolLM2-135M F16 decoded at 107 tokens/s instead of 69 with 4-row tiles on 2 Zen 4 cores),
    // else 4 rows x 4 tokens; AVX2: 4 rows x 1 token alone, else 2 rows x 4 tokens
    const int RS = wide ? (job->ntok == 1 ? 1 : 4) : job->ntok == 1 ? 4 : 2;
    for (int64_t t0 = 0; t0 < job->ntok; t0 += tb) {
        const int64_t t1 = LLM__MIN(t0 + tb, job->ntok);
        for (int64_t r = r0; r < r1; r += RS) {
            const int nr = (int)LLM__MIN(RS, r1 - r);
            const uint16_t *wr = (const uint16_t *)w->buf.data + (size_t)r * ws;
            for (int64_t t = t0; t < t1; t += 4) {
                const int nt = (int)LLM__MIN(4, t1 - t);
                float *out = (float *)llm__tensor_row(d, t) + r;
                tile(t == t0 && r + 3 * RS <= w->ne1, nr, nt, wr, ws, (const float *)job->xq[j] + (size_t)t * as, as, K, out, os);
                if (bias)
                    for (int i = 0; i < nt; i++)
                        for (int k = 0; k < nr; k++) out[(size_t)i * os + k] += bias[r + k];
            }
        }
    }
}
#endif

static void llm__cpu_mm_worker(void *arg, int ith, int nth) {
    struct llm__cpu_mm_job *job = arg;
    const int64_t K = job->x.ne0;
    for (int64_t ch; (ch = llm__cursors_next(job->c, ith, nth)) >= 0;) {
        int j = 0;
        while (ch >= job->chunk_start[j + 1]) j++;
        const struct llm__weight *w = job->w[j];
        const llm__vec_dot_fn dot = job->c->vec_dot[w->type];
        const size_t wrow = llm__row_bytes(w->type, K);
        const int64_t r0 = (ch - job->chunk_start[j]) * job->rows_per_chunk;
        const int64_t r1 = LLM__MIN(r0 + job->rows_per_chunk, w->ne1);
        const struct llm__tensor d = job->dst[j];
        const float *bias = job->bias && job->bias[j].buf ? (const float *)llm__tensor_row(job->bias[j], 0) : NULL;
#if defined(LLM__X86_SIMD)
        if (w->layout == LLM__LAYOUT_X16) {
            llm__cpu_mm_x16(job, j, r0, r1, bias);
            continue;
        }
        if (job->fmt[j] >= LLM__HALF_ACT) {
            llm__cpu_mm_half(job, j, r0, r1, bias);
            continue;
        }
        if (job->fmt[j] >= LLM__SC_ACT && job->fmt[j] < LLM__X16_ACT) {
            llm__cpu_mm_b32(job, j, r0, r1, bias);
            continue;
        }
        if (job->ntok >= LLM__KT_MIN_TOKENS && job->c->simd == LLM__SIMD_AVX512 && job->c->repack &&
            llm__kt_supported(w->type, K, w->ne1)) {
            llm__cpu_mm_kt(job, j, r0, r1, bias);
            continue;
        }
#endif
        for (int64_t t0 = 0; t0 < job->ntok; t0 += LLM__MM_TOKEN_TILE) {
            int64_t t1 = LLM__MIN(t0 + LLM__MM_TOKEN_TILE, job->ntok);
            for (int64_t r = r0; r < r1; r++) {
                const char *wr = (const char *)w->buf.data + (size_t)r * wrow;
                float b = bias ? bias[r] : 0.0f;
                for (int64_t t = t0; t < t1; t++) {
                    float s;
                    dot(K, &s, wr, job->xq[j] + (size_t)t * job->xq_stride[j]);
                    ((float *)llm__tensor_row(d, t))[r] = s + b;
                }
            }
        }
    }
}

static void llm__cpu_matmul(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                            const struct llm__tensor *bias, struct llm__tensor x) {
    struct llm__cpu *c = ctx;
    assert(n >= 1 && n <= LLM__MAX_MATMUL_WEIGHTS);
    struct llm__cpu_mm_job job = {.c = c, .n = n, .dst = dst, .w = w, .bias = bias, .x = x, .ntok = x.ne1};
    // Activations: one copy per distinct dot type, F32 read in place.
    char *scratch = c->scratch;
    for (int j = 0; j < n; j++) {
        int vt = llm__type_info((uint32_t)w[j]->type)->vec_dot_type;
        if (w[j]->layout == LLM__LAYOUT_X16 && w[j]->type != LLM__TYPE_Q3_K) vt = LLM__X16_ACT + w[j]->type;
#if defined(LLM__X86_SIMD)
        if (c->simd == LLM__SIMD_AVX2 && w[j]->layout == LLM__LAYOUT_PLAIN && llm__b32_tiled(w[j]->type)) vt += LLM__SC_ACT;
#endif
        if ((c->simd == LLM__SIMD_AVX512 || c->simd == LLM__SIMD_AVX2) && (w[j]->type == LLM__TYPE_F16 || w[j]->type == LLM__TYPE_BF16))
            vt = LLM__HALF_ACT + w[j]->type;
        job.fmt[j] = vt;
        if (vt == LLM__TYPE_F32) {
            job.xq[j] = llm__tensor_row(x, 0);
            job.xq_stride[j] = x.nb1;
            continue;
        }
        int i = 0;
        while (i < job.n_types && job.types[i] != vt) i++;
        if (i == job.n_types) {
            job.types[i] = vt;
            job.xq_base[i] = scratch;
            scratch += ((llm__act_row_bytes(vt, x.ne0) * (size_t)x.ne1) + 63) & ~(size_t)63;
            job.n_types++;
        }
        job.xq[j] = job.xq_base[i];
        job.xq_stride[j] = llm__act_row_bytes(vt, x.ne0);
    }
    assert((size_t)(scratch - (char *)c->scratch) <= c->scratch_size);
    if (job.n_types) {
        if (job.ntok < 4) llm__cpu_mm_quantize(&job, 0, job.ntok);
        else llm__pool_run(c->pool, llm__cpu_mm_quantize_worker, &job);
    }
    // Chunks of rows: about 32 KB of weights each (a thread walks its share of them in order).
    size_t row_bytes = llm__row_bytes(w[0]->type, x.ne0);
    job.rows_per_chunk = LLM__MAX(16, LLM__MIN(256, (int64_t)((32u << 10) / row_bytes))) & ~(int64_t)15;
    job.chunk_start[0] = 0;
    for (int j = 0; j < n; j++)
        job.chunk_start[j + 1] = job.chunk_start[j] + (w[j]->ne1 + job.rows_per_chunk - 1) / job.rows_per_chunk;
    llm__cursors_init(c, job.chunk_start[n]);
    llm__pool_run(c->pool, llm__cpu_mm_worker, &job);
}

static enum llm_status llm__cpu_reserve_shape(void *ctx, const struct llm__shape *sh, struct llm__err *e) {
    struct llm__cpu *c = ctx;
    // matmul: up to LLM__MAX_MATMUL_WEIGHTS quantized copies of the input (at most 4 bytes an element)
    size_t mm = (size_t)LLM__MAX_MATMUL_WEIGHTS * (((size_t)sh->max_tokens * (size_t)sh->max_cols * 4 + 64 * 4) + 64);
    size_t attn = llm__attn_scratch(sh->n_head / sh->n_head_kv, sh->head_dim, sh->block_size) * sizeof(float) *
                  (size_t)c->pool->n_threads;
    return llm__cpu_reserve(c, LLM__MAX(mm, attn), e);
}

static const char *llm__cpu_device_name(void *ctx) {
    static const char *const names[] = {"scalar", "x86-64 AVX2", "x86-64 AVX-512 VNNI", "ARM NEON"};
    struct llm__cpu *c = ctx;
    return (size_t)c->simd < LLM__ARRAY_LEN(names) ? names[c->simd] : "cpu";
}

static size_t llm__mem_available(void);
static size_t llm__cpu_mem_free(void *ctx) {
    (void)ctx;
    return llm__mem_available();
}

static const struct llm_backend_i llm__cpu_iface = {
    .name = "cpu",
    .free = llm__cpu_free,
    .buf_alloc = llm__cpu_buf_alloc,
    .buf_free = llm__cpu_buf_free,
    .weight_load = llm__cpu_weight_load,
    .weight_free = llm__cpu_weight_free,
    .upload = llm__cpu_upload,
    .download = llm__cpu_download,
    .reserve = llm__cpu_reserve_shape,
    .mem_free = llm__cpu_mem_free,
    .begin_step = llm__cpu_begin_step,
    .end_step = llm__cpu_end_step,
    .sync = NULL,   // each op returns when its pool job is done
    .embed = llm__cpu_embed,
    .rmsnorm = llm__cpu_rmsnorm,
    .matmul = llm__cpu_matmul,
    .rope = llm__cpu_rope,
    .kv_store = llm__cpu_kv_store,
    .attention = llm__cpu_attention,
    .silu_mul = llm__cpu_silu_mul,
    .add = llm__cpu_add,
    .get_rows = llm__cpu_get_rows,
    .scale = llm__cpu_scale,
    .gelu_mul = llm__cpu_gelu_mul,
    .attention_window = llm__cpu_attention,
    .gather_cols = llm__cpu_gather_cols,
    .device_name = llm__cpu_device_name,
    .bandwidth = NULL,   // no probe: a STREAM-like tool measures host memory better
};

// simd: the level to use, or -1 for the best this CPU runs.
static enum llm_status llm__cpu_backend_new(struct llm_backend *be, int n_threads, int simd, struct llm__err *e) {
    struct llm__cpu *c = calloc(1, sizeof(*c));
    if (!c) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    c->pool = llm__pool_new(n_threads, e);
    if (!c->pool) { free(c); return LLM_ERR_BACKEND; }
    c->cursors = llm__alloc(sizeof(struct llm__cursor) * (size_t)n_threads);
    if (!c->cursors) { llm__cpu_free(c); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    c->simd = simd < 0 ? llm__simd_best() : (enum llm__simd)simd;
    c->repack = true;
    for (int t = 0; t < LLM__TYPE_COUNT; t++) {
        const struct llm__type_info *ti = llm__type_info((uint32_t)t);
        if (!ti || !ti->supported) continue;
        for (int lvl = (int)c->simd; lvl >= 0 && !c->vec_dot[t]; lvl--) {
            if (lvl == LLM__SIMD_NEON && c->simd != LLM__SIMD_NEON) continue;
            c->vec_dot[t] = llm__vec_dot_kernel(t, (enum llm__simd)lvl);
        }
    }
    be->iface = &llm__cpu_iface;
    be->ctx = c;
    return LLM_OK;
}

#ifdef LLM_CUDA
#include "backends/cuda.c"
#endif
#ifdef LLM_VULKAN
#include "backends/vulkan.c"
#endif

// === the transformer ===
//
// Llama-family decoder: token embedding, n_layer x (RMSNorm, attention with RoPE and GQA,
// residual, RMSNorm, gated MLP, residual), final RMSNorm, output projection. The layer loop
// below is the only one; it calls backend ops and never touches memory itself. The architectures
// differ, as llama.cpp computes them, in:
//   qwen2   biases on q/k/v; NeoX RoPE (pairs (i, i + n_rot/2))
//   qwen3   per-head RMSNorm of q and k (weights of head_dim) before RoPE; NeoX RoPE
//   phi3    q/k/v fused into one matrix (attn_qkv) and gate/up into one (ffn_up, gate first):
//           split into separate weights at load; NeoX RoPE
//   gemma2  embeddings scaled by sqrt(n_embd); RMSNorm also after attention and after the MLP
//           (before each residual add); GELU-gated MLP; sliding-window attention on even layers;
//           attention scores and final logits soft-capped (cap * tanh(x / cap)); NeoX RoPE
//   gemma3  gemma2's layout with per-head q/k RMSNorm, no attention soft-capping, five local
//           (sliding-window) layers to one global, local layers with their own RoPE base
// Gemma's RMSNorm multiplies by (1 + w): llama.cpp's converter stores w + 1 in the file, so every
// architecture here multiplies by the stored weight.

enum llm__arch { LLM__ARCH_LLAMA, LLM__ARCH_QWEN2, LLM__ARCH_QWEN3, LLM__ARCH_PHI3, LLM__ARCH_GEMMA2, LLM__ARCH_GEMMA3 };

struct llm__layer {
    struct llm__tensor attn_norm;    // (n_embd)
    struct llm__weight wq;           // (n_head*head_dim, n_embd): ne1 rows of ne0 inputs
    struct llm__weight wk;           // (n_head_kv*head_dim, n_embd)
    struct llm__weight wv;           // (n_head_kv*head_dim, n_embd)
    struct llm__tensor bq, bk, bv;   // qwen2 only: (n_head*head_dim), (n_head_kv*head_dim) x 2
    struct llm__tensor q_norm, k_norm;   // qwen3, gemma3: (head_dim), applied to every head
    struct llm__weight wo;           // (n_embd, n_head*head_dim)
    struct llm__tensor attn_post_norm;   // gemma2/3: (n_embd), on the attention's output
    struct llm__tensor ffn_norm;     // (n_embd)
    struct llm__weight w_gate;       // (n_ff, n_embd)
    struct llm__weight w_up;         // (n_ff, n_embd)
    struct llm__weight w_down;       // (n_embd, n_ff)
    struct llm__tensor ffn_post_norm;    // gemma2/3: (n_embd), on the MLP's output
    bool swa;                        // a local layer: sliding-window attention, rope_swa
};

struct llm__model {
    struct llm__gguf gguf;
    enum llm__arch arch;
    char arch_name[32];
    char name[128];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float norm_eps;
    struct llm__rope rope;
    struct llm__rope rope_swa;       // the local (sliding-window) layers' RoPE
    int n_swa;                       // sliding window of the local layers, in tokens; 0: none
    float attn_scale;                // attention scores are q.k * attn_scale
    float attn_softcap, final_softcap;   // soft-capping of attention scores / logits; 0: none
    float embd_scale;                // embeddings are multiplied by this; 0: not scaled
    bool gelu;                       // the MLP's gate is GELU (tanh approximation), else SiLU
    bool qk_norm, post_norms;        // per-head q/k RMSNorm; RMSNorm after attention and MLP
    struct llm__weight tok_embd;     // (n_vocab, n_embd)
    struct llm__weight output;       // (n_vocab, n_embd); the same as tok_embd when tied
    bool tied_output;
    struct llm__tensor output_norm;  // (n_embd)
    struct llm__tensor rope_freqs;   // (n_rot/2) or no buffer
    struct llm__layer *layers;       // [n_layer]
    struct llm__buf small;           // every 1-D parameter (norms, biases, rope factors), f32
    struct llm__buf perms;           // the act-order weights' distinct input permutations, int32
    int64_t max_perm;                // the longest of them (0: none)
    void **qbufs;                    // (n_qbufs) matrices quantized at load (llm_engine_params.quantize)
    int64_t n_qbufs;
    struct llm__calib *calib;        // llm_quantize's calibration (CPU backend): the forward hands it
                                     // every linear layer's input; NULL otherwise
};

// The inputs of a layer's linear layers, as llm_quantize's calibration collects them.
enum { LLM__CAL_ATTN_IN, LLM__CAL_ATTN_OUT, LLM__CAL_FFN_IN, LLM__CAL_FFN_ACT, LLM__CAL_SLOTS };
struct llm__calib;
static void llm__calib_take(struct llm__calib *c, int layer, int slot, struct llm__tensor x);

static struct llm__tensor llm__vec_view(struct llm__buf *buf, size_t offs, int64_t ne0, int64_t ne1) {
    return (struct llm__tensor){buf, offs, LLM__TYPE_F32, ne0, ne1, (size_t)ne0 * sizeof(float)};
}

// Key of the model's architecture, e.g. "llama.block_count".
static const char *llm__arch_key(const struct llm__model *m, const char *suffix, char *buf, size_t size) {
    snprintf(buf, size, "%s.%s", m->arch_name, suffix);
    return buf;
}

static enum llm_status llm__hparam_u32(const struct llm__model *m, const char *suffix, int *out, int def,
                                       uint32_t lo, uint32_t hi, struct llm__err *e) {
    char key[128];
    uint32_t v;
    llm__arch_key(m, suffix, key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) < 0) {
        if (def < 0) return llm__fail(e, LLM_ERR_FORMAT, "model: missing key '%s'", key);
        *out = def;
        return LLM_OK;
    }
    if (!llm__gguf_get_u32(&m->gguf, key, &v, e)) return LLM_ERR_FORMAT;
    if (v < lo || v > hi)
        return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' = %u is out of range [%u, %u]", key, v, lo, hi);
    *out = (int)v;
    return LLM_OK;
}

static enum llm_status llm__hparam_f32(const struct llm__model *m, const char *suffix, float *out, float def,
                                       struct llm__err *e) {
    char key[128];
    llm__arch_key(m, suffix, key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) < 0) { *out = def; return LLM_OK; }
    if (!llm__gguf_get_f32(&m->gguf, key, out, e)) return LLM_ERR_FORMAT;
    if (!isfinite(*out)) return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' is not a finite number", key);
    return LLM_OK;
}

// A tensor's shape as "[ne0, ne1, ...]", every dimension it has (a shape error shows them all).
static const char *llm__shape_str(char buf[96], int n_dims, const int64_t *ne) {
    int n = snprintf(buf, 96, "[");
    for (int d = 0; d < n_dims && n < 96; d++) n += snprintf(buf + n, (size_t)(96 - n), "%s%lld", d ? ", " : "", (long long)ne[d]);
    if (n < 96) snprintf(buf + n, (size_t)(96 - n), "]");
    return buf;
}

// Finds a tensor and checks its shape (ne0, ne1; ne1 = 0 for a vector) and that its type is usable.
static enum llm_status llm__model_tensor(const struct llm__model *m, const char *name, int64_t ne0, int64_t ne1,
                                         bool optional, const struct llm__gguf_tensor **out, struct llm__err *e) {
    const struct llm__gguf_tensor *t = llm__gguf_find_tensor(&m->gguf, name);
    *out = t;
    if (!t) return optional ? LLM_OK : llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor '%s'", name);
    // (unused dimensions are 1: a [n, 1] file tensor is a vector, a [n, m, 1] one a matrix)
    int64_t want[2] = {ne0, ne1 ? ne1 : 1};
    bool same = t->ne[0] == want[0] && t->ne[1] == want[1] && t->ne[2] == 1 && t->ne[3] == 1;
    if (!same) {
        char got_s[96], want_s[96];
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' has shape %s, expected %s", name,
                         llm__shape_str(got_s, t->n_dims, t->ne), llm__shape_str(want_s, ne1 ? 2 : 1, want));
    }
    const struct llm__type_info *ti = llm__type_info(t->type);
    if (!ti || !ti->supported)
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "model: tensor '%s' has type %s, which llm.c does not support "
                         "(supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs)",
                         name, ti ? ti->name : "unknown");
    return LLM_OK;
}

// Reads hyper-parameters and checks them; no tensors yet.
// The file's architecture and name (general.architecture, general.name), whatever the load mode.
static void llm__model_names(struct llm__model *m) {
    struct llm__gguf_str s;
    if (llm__gguf_find_key(&m->gguf, "general.architecture") >= 0 && llm__gguf_get_str(&m->gguf, "general.architecture", &s, NULL))
        snprintf(m->arch_name, sizeof(m->arch_name), "%.*s", (int)LLM__MIN(s.len, 31), s.ptr);
    if (llm__gguf_find_key(&m->gguf, "general.name") >= 0 && llm__gguf_get_str(&m->gguf, "general.name", &s, NULL))
        snprintf(m->name, sizeof(m->name), "%.*s", (int)LLM__MIN(s.len, 127), s.ptr);
}

// Which layers are local (sliding-window) ones: the key sliding_window_pattern as an array of
// bools (one per layer) or a number n (layer l is local unless l % n == n - 1; 0: all local),
// else the architecture's n, as llama.cpp's set_swa_pattern.
static enum llm_status llm__model_swa_pattern(struct llm__model *m, int n_pattern, struct llm__err *e) {
    char key[128];
    llm__arch_key(m, "attention.sliding_window_pattern", key, sizeof(key));
    int64_t ki = llm__gguf_find_key(&m->gguf, key);
    if (ki >= 0 && m->gguf.kv[ki].type == LLM__GGUF_ARR) {
        const struct llm__gguf_kv *kv = &m->gguf.kv[ki];
        if (kv->arr_type != LLM__GGUF_BOOL || kv->arr_n != (uint64_t)m->n_layer)
            return llm__fail(e, LLM_ERR_FORMAT, "model: '%s' is not an array of %d bools", key, m->n_layer);
        for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = kv->arr_data[l] != 0;
        return LLM_OK;
    }
    enum llm_status st = llm__hparam_u32(m, "attention.sliding_window_pattern", &n_pattern, n_pattern, 0, 1024, e);
    if (st) return st;
    for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = n_pattern == 0 || l % n_pattern < n_pattern - 1;
    return LLM_OK;
}

// What sets the architectures apart (see the top of this section), from their keys as llama.cpp
// reads them, with its defaults; allocates m->layers (which holds the local/global pattern).
static enum llm_status llm__model_arch_hparams(struct llm__model *m, struct llm__err *e) {
    enum llm_status st;
    const bool gemma = m->arch == LLM__ARCH_GEMMA2 || m->arch == LLM__ARCH_GEMMA3;
    m->attn_scale = 1.0f / sqrtf((float)m->head_dim);
    m->rope_swa = m->rope;
    m->qk_norm = m->arch == LLM__ARCH_QWEN3 || m->arch == LLM__ARCH_GEMMA3;
    if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    if (!gemma) return LLM_OK;
    m->embd_scale = sqrtf((float)m->n_embd);
    m->gelu = m->post_norms = true;
    // Gemma 2 27B and Gemma 3 27B scale by n_embd / n_head instead of the head size (llama.cpp
    // tells them by their layer count)
    if ((m->arch == LLM__ARCH_GEMMA2 && m->n_layer == 46) || (m->arch == LLM__ARCH_GEMMA3 && m->n_layer == 62))
        m->attn_scale = 1.0f / sqrtf((float)(m->n_embd / m->n_head));
    char key[128];
    bool has_window = llm__gguf_find_key(&m->gguf, llm__arch_key(m, "attention.sliding_window", key, sizeof(key))) >= 0;
    if ((st = llm__hparam_u32(m, "attention.sliding_window", &m->n_swa, m->arch == LLM__ARCH_GEMMA2 ? 4096 : 0, 0,
                              1u << 24, e)))
        return st;
    if (m->arch == LLM__ARCH_GEMMA2) {
        if ((st = llm__hparam_f32(m, "attn_logit_softcapping", &m->attn_softcap, 50.0f, e))) return st;
        if ((st = llm__hparam_f32(m, "final_logit_softcapping", &m->final_softcap, 30.0f, e))) return st;
        if ((st = llm__model_swa_pattern(m, 2, e))) return st;
    } else {
        if ((st = llm__hparam_f32(m, "final_logit_softcapping", &m->final_softcap, 0.0f, e))) return st;
        // without a window every layer is global (llama.cpp: swa_type none)
        if (has_window && m->n_swa > 0 && (st = llm__model_swa_pattern(m, 6, e))) return st;
        m->rope_swa.freq_base = 10000.0f;   // llama.cpp's default local base
        m->rope_swa.freq_scale = 1.0f;      // (rope scaling is for the global layers)
    }
    if ((st = llm__hparam_f32(m, "rope.freq_base_swa", &m->rope_swa.freq_base, m->rope_swa.freq_base, e))) return st;
    if (!(m->rope_swa.freq_base > 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base_swa must be > 1");
    if (!(m->attn_softcap >= 0.0f) || !(m->final_softcap >= 0.0f))
        return llm__fail(e, LLM_ERR_FORMAT, "model: a soft-capping value is negative");
    if (m->n_swa == 0)
        for (int l = 0; l < m->n_layer; l++) m->layers[l].swa = false;
    return LLM_OK;
}

static enum llm_status llm__model_hparams(struct llm__model *m, struct llm__err *e) {
    struct llm__gguf_str s;
    enum llm_status st;
    if (!llm__gguf_get_str(&m->gguf, "general.architecture", &s, e)) return LLM_ERR_FORMAT;
    static const struct { const char *name; enum llm__arch arch; } archs[] = {
        {"llama", LLM__ARCH_LLAMA}, {"qwen2", LLM__ARCH_QWEN2}, {"qwen3", LLM__ARCH_QWEN3},
        {"phi3", LLM__ARCH_PHI3}, {"gemma2", LLM__ARCH_GEMMA2}, {"gemma3", LLM__ARCH_GEMMA3},
    };
    size_t ai = 0;
    while (ai < LLM__ARRAY_LEN(archs) && strcmp(m->arch_name, archs[ai].name) != 0) ai++;
    if (ai == LLM__ARRAY_LEN(archs))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: architecture '%s' is not supported "
                         "(supported: llama, qwen2, qwen3, phi3, gemma2, gemma3)", m->arch_name);
    m->arch = archs[ai].arch;
    if ((st = llm__hparam_u32(m, "embedding_length", &m->n_embd, -1, 1, 65536, e))) return st;
    if ((st = llm__hparam_u32(m, "block_count", &m->n_layer, -1, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "feed_forward_length", &m->n_ff, -1, 1, 1 << 20, e))) return st;
    if ((st = llm__hparam_u32(m, "attention.head_count", &m->n_head, -1, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "attention.head_count_kv", &m->n_head_kv, m->n_head, 1, 1024, e))) return st;
    if ((st = llm__hparam_u32(m, "context_length", &m->n_ctx_train, 2048, 1, 1u << 24, e))) return st;
    char key[128];
    if (m->n_embd % m->n_head != 0 && llm__gguf_find_key(&m->gguf, llm__arch_key(m, "attention.key_length", key, sizeof(key))) < 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: embedding length %d is not a multiple of the head count %d",
                         m->n_embd, m->n_head);
    if ((st = llm__hparam_u32(m, "attention.key_length", &m->head_dim, m->n_embd / m->n_head, 2, 1024, e))) return st;
    int vdim;
    if ((st = llm__hparam_u32(m, "attention.value_length", &vdim, m->head_dim, 2, 1024, e))) return st;
    if (vdim != m->head_dim)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: key length %d differs from value length %d", m->head_dim, vdim);
    if (m->n_head % m->n_head_kv != 0)
        return llm__fail(e, LLM_ERR_FORMAT, "model: head count %d is not a multiple of the KV head count %d",
                         m->n_head, m->n_head_kv);
    if ((st = llm__hparam_f32(m, "attention.layer_norm_rms_epsilon", &m->norm_eps, 1e-5f, e))) return st;
    if (!(m->norm_eps > 0.0f && m->norm_eps < 1.0f))
        return llm__fail(e, LLM_ERR_FORMAT, "model: RMS norm epsilon %g is out of range", (double)m->norm_eps);
    m->rope.neox = m->arch != LLM__ARCH_LLAMA;   // llama.cpp: LLAMA_ROPE_TYPE_NEOX for all the others
    if ((st = llm__hparam_u32(m, "rope.dimension_count", &m->rope.n_rot, m->head_dim, 2, (uint32_t)m->head_dim, e)))
        return st;
    if (m->rope.n_rot % 2) return llm__fail(e, LLM_ERR_FORMAT, "model: odd rope dimension count %d", m->rope.n_rot);
    if ((st = llm__hparam_f32(m, "rope.freq_base", &m->rope.freq_base, 10000.0f, e))) return st;
    if (!(m->rope.freq_base > 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope.freq_base must be > 1");
    m->rope.freq_scale = 1.0f;
    llm__arch_key(m, "rope.scaling.type", key, sizeof(key));
    if (llm__gguf_find_key(&m->gguf, key) >= 0) {
        if (!llm__gguf_get_str(&m->gguf, key, &s, e)) return LLM_ERR_FORMAT;
        float factor = 1.0f;
        if ((st = llm__hparam_f32(m, "rope.scaling.factor", &factor, 1.0f, e))) return st;
        if (s.len == 6 && memcmp(s.ptr, "linear", 6) == 0) {
            if (!(factor >= 1.0f)) return llm__fail(e, LLM_ERR_FORMAT, "model: rope scaling factor %g", (double)factor);
            m->rope.freq_scale = 1.0f / factor;
        } else if (!(s.len == 4 && memcmp(s.ptr, "none", 4) == 0)) {
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: rope scaling '%.*s' is not supported (none, linear)",
                             (int)LLM__MIN(s.len, 32), s.ptr);
        }
    }
    const struct llm__gguf_tensor *te = llm__gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te) return llm__fail(e, LLM_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1 << 24)) {
        char got_s[96];
        return llm__fail(e, LLM_ERR_FORMAT, "model: tensor 'token_embd.weight' has shape %s, expected [%d, n_vocab] "
                         "with n_vocab in [1, %d]", llm__shape_str(got_s, te->n_dims, te->ne), m->n_embd, 1 << 24);
    }
    m->n_vocab = (int)te->ne[1];
    return llm__model_arch_hparams(m, e);
}

// The model's tensors, found and checked, before any is loaded: the 1-D parameters (norms,
// biases, rope factors) and the matrices, each with the field it goes to.
struct llm__model_plan {
    struct { struct llm__tensor *dst; const struct llm__gguf_tensor *src; } *vecs;
    // a matrix is rows [row0, row0 + rows) of its file tensor (a part of a fused one, phi3's)
    struct { struct llm__weight *dst; const struct llm__gguf_tensor *src; int64_t row0, rows; } *mats;
    size_t n_vecs, n_mats;
};

// Finds every tensor the architecture uses and checks its shape and type (llm__model_tensor);
// the optional output matrix decides tied_output.
static enum llm_status llm__model_plan(struct llm__model *m, struct llm__model_plan *pl, struct llm__err *e) {
    const int E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    const bool bias = m->arch == LLM__ARCH_QWEN2;
    enum llm_status st;
    char name[96];
    pl->vecs = calloc((size_t)m->n_layer * 9 + 2, sizeof(*pl->vecs));
    pl->mats = calloc((size_t)m->n_layer * 7 + 2, sizeof(*pl->mats));
    if (!pl->vecs || !pl->mats) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    const struct llm__gguf_tensor *t;
#define LLM__VEC(field, nm, n, opt)                                                     \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, n, 0, opt, &t, e))) return st;               \
        if (t) pl->vecs[pl->n_vecs].dst = field, pl->vecs[pl->n_vecs++].src = t;        \
    } while (0)
#define LLM__PART(field, r0, nr)                                                        \
    (pl->mats[pl->n_mats].dst = field, pl->mats[pl->n_mats].src = t, pl->mats[pl->n_mats].row0 = r0, \
     pl->mats[pl->n_mats++].rows = nr)
#define LLM__MAT(field, nm, cols, rows, opt)                                            \
    do {                                                                                \
        if ((st = llm__model_tensor(m, nm, cols, rows, opt, &t, e))) return st;         \
        if (t) LLM__PART(field, 0, rows);                                               \
    } while (0)
    LLM__MAT(&m->tok_embd, "token_embd.weight", E, m->n_vocab, false);
    LLM__VEC(&m->output_norm, "output_norm.weight", E, false);
    if (m->arch != LLM__ARCH_GEMMA2) LLM__MAT(&m->output, "output.weight", E, m->n_vocab, true);
    else t = NULL;   // llama.cpp always ties gemma2's output to the embeddings
    m->tied_output = t == NULL;
    LLM__VEC(&m->rope_freqs, "rope_freqs.weight", m->rope.n_rot / 2, true);
    if (m->arch == LLM__ARCH_PHI3 && (llm__gguf_find_tensor(&m->gguf, "rope_factors_long.weight") ||
                                      llm__gguf_find_tensor(&m->gguf, "rope_factors_short.weight")))
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: phi3 with long-context RoPE factors (rope_factors_long/short, "
                         "LongRoPE) is not supported");
    for (int l = 0; l < m->n_layer; l++) {
        struct llm__layer *L = &m->layers[l];
#define LLM__NAME(s) (snprintf(name, sizeof(name), "blk.%d." s, l), name)
        LLM__VEC(&L->attn_norm, LLM__NAME("attn_norm.weight"), E, false);
        // phi3 may fuse q/k/v into attn_qkv (rows: Q of q, KV of k, KV of v)
        if (m->arch == LLM__ARCH_PHI3 && llm__gguf_find_tensor(&m->gguf, LLM__NAME("attn_qkv.weight"))) {
            if ((st = llm__model_tensor(m, name, E, Q + 2 * KV, false, &t, e))) return st;
            LLM__PART(&L->wq, 0, Q);
            LLM__PART(&L->wk, Q, KV);
            LLM__PART(&L->wv, Q + KV, KV);
        } else {
            LLM__MAT(&L->wq, LLM__NAME("attn_q.weight"), E, Q, false);
            LLM__MAT(&L->wk, LLM__NAME("attn_k.weight"), E, KV, false);
            LLM__MAT(&L->wv, LLM__NAME("attn_v.weight"), E, KV, false);
        }
        LLM__MAT(&L->wo, LLM__NAME("attn_output.weight"), Q, E, false);
        LLM__VEC(&L->ffn_norm, LLM__NAME("ffn_norm.weight"), E, false);
        if (m->arch == LLM__ARCH_PHI3) {   // gate and up fused in ffn_up: n_ff rows of gate, then up
            if ((st = llm__model_tensor(m, LLM__NAME("ffn_up.weight"), E, 2 * (int64_t)m->n_ff, false, &t, e))) return st;
            LLM__PART(&L->w_gate, 0, m->n_ff);
            LLM__PART(&L->w_up, m->n_ff, m->n_ff);
        } else {
            LLM__MAT(&L->w_gate, LLM__NAME("ffn_gate.weight"), E, m->n_ff, false);
            LLM__MAT(&L->w_up, LLM__NAME("ffn_up.weight"), E, m->n_ff, false);
        }
        LLM__MAT(&L->w_down, LLM__NAME("ffn_down.weight"), m->n_ff, E, false);
        if (bias) {
            LLM__VEC(&L->bq, LLM__NAME("attn_q.bias"), Q, false);
            LLM__VEC(&L->bk, LLM__NAME("attn_k.bias"), KV, false);
            LLM__VEC(&L->bv, LLM__NAME("attn_v.bias"), KV, false);
        }
        if (m->qk_norm) {
            LLM__VEC(&L->q_norm, LLM__NAME("attn_q_norm.weight"), m->head_dim, false);
            LLM__VEC(&L->k_norm, LLM__NAME("attn_k_norm.weight"), m->head_dim, false);
        }
        if (m->post_norms) {
            LLM__VEC(&L->attn_post_norm, LLM__NAME("post_attention_norm.weight"), E, false);
            LLM__VEC(&L->ffn_post_norm, LLM__NAME("post_ffw_norm.weight"), E, false);
        }
#undef LLM__NAME
    }
#undef LLM__VEC
#undef LLM__MAT
#undef LLM__PART
    return LLM_OK;
}

// The 1-D parameters, converted to f32 and checked (finite; rope factors > 0), into one backend
// buffer (m->small), each 64-byte aligned; the model's fields become views of it.
static enum llm_status llm__model_load_vectors(struct llm__model *m, struct llm_backend *be,
                                               const struct llm__model_plan *pl, struct llm__err *e) {
    size_t total = 0, longest = 1;
    for (size_t i = 0; i < pl->n_vecs; i++) {
        total += ((size_t)pl->vecs[i].src->ne[0] * sizeof(float) + 63) & ~(size_t)63;
        longest = LLM__MAX(longest, (size_t)pl->vecs[i].src->ne[0]);
    }
    enum llm_status st = be->iface->buf_alloc(be->ctx, &m->small, total, e);
    if (st) return st;
    float *tmp = malloc(longest * sizeof(float));
    if (!tmp) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    size_t offs = 0;
    for (size_t i = 0; i < pl->n_vecs && !st; i++) {
        const struct llm__gguf_tensor *src = pl->vecs[i].src;
        int64_t n = src->ne[0];
        llm__dequantize_row((int)src->type, src->data, tmp, n);
        for (int64_t j = 0; j < n && !st; j++) {
            if (pl->vecs[i].dst == &m->rope_freqs && !(tmp[j] > 0.0f))
                st = llm__fail(e, LLM_ERR_FORMAT, "model: rope_freqs.weight holds a factor that is not > 0");
            else if (!isfinite(tmp[j]))
                st = llm__fail(e, LLM_ERR_FORMAT, "model: tensor '%s' holds a value that is not finite", src->name);
        }
        if (st) break;
        be->iface->upload(be->ctx, &m->small, offs, tmp, (size_t)n * sizeof(float));
        *pl->vecs[i].dst = llm__vec_view(&m->small, offs, n, 1);
        offs += ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    }
    free(tmp);
    m->rope.freq_factors = m->rope_freqs;   // (no buffer when the model has none)
    return st;
}

// Tells the kernel the mapped file's pages of [p, p + n) are not needed again (the backend made
// its own copy of a tensor there), so the resident memory stays at one copy of the weights.
// Where madvise cannot drop pages, they stay until memory pressure evicts them (clean pages).
// A file read into memory (no_mmap) gets the same: the whole pages inside a tensor's data, which
// nothing reads again, are given back (they would read as zeros).
static void llm__map_release(const void *p, size_t n) {
#if defined(MADV_DONTNEED)
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

// The act-order weights' input permutations (a directory's GPTQ weights with g_idx), each
// distinct one once, into m->perms; each weight's perm a view of its own.
static enum llm_status llm__model_load_perms(struct llm__model *m, struct llm_backend *be, const struct llm__model_plan *pl,
                                             struct llm__err *e) {
    size_t total = 0;
    for (size_t i = 0; i < pl->n_mats; i++)
        if (pl->mats[i].src->perm) total += ((size_t)pl->mats[i].src->ne[0] * 4 + 63) & ~(size_t)63;
    if (!total) return LLM_OK;
    if (!be->iface->gather_cols)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: the %s backend cannot run GPTQ act-order (desc_act) weights yet; "
                         "the CPU backend can", be->iface->name);
    enum llm_status st = be->iface->buf_alloc(be->ctx, &m->perms, total, e);
    size_t offs = 0;
    for (size_t i = 0; i < pl->n_mats && !st; i++) {
        const struct llm__gguf_tensor *src = pl->mats[i].src;
        if (!src->perm) continue;
        size_t at = offs;
        for (size_t k = 0; k < i && at == offs; k++)   // the same permutation as an earlier weight's
            if (pl->mats[k].src->perm && pl->mats[k].src->ne[0] == src->ne[0] &&
                (pl->mats[k].src->perm == src->perm || !memcmp(pl->mats[k].src->perm, src->perm, (size_t)src->ne[0] * 4)))
                at = pl->mats[k].dst->perm.offs;
        if (at == offs) {
            be->iface->upload(be->ctx, &m->perms, offs, src->perm, (size_t)src->ne[0] * 4);
            offs += ((size_t)src->ne[0] * 4 + 63) & ~(size_t)63;
        }
        pl->mats[i].dst->perm = (struct llm__tensor){&m->perms, at, LLM__TYPE_I32, src->ne[0], 1, (size_t)src->ne[0] * 4};
        m->max_perm = LLM__MAX(m->max_perm, src->ne[0]);
    }
    return st;
}

// --- quantization at load (llm_engine_params.quantize) ---

// The type a name gives (ggml's names, any case), or -1: a supported GGUF type.
static int llm__type_by_name(const char *name) {
    for (int t = 0; t < LLM__TYPE_COUNT; t++) {
        const struct llm__type_info *ti = llm__type_info((uint32_t)t);
        size_t k = 0;
        while (ti && ti->name[k] && tolower((unsigned char)ti->name[k]) == tolower((unsigned char)name[k])) k++;
        if (ti && ti->supported && !ti->internal && !ti->name[k] && !name[k]) return t;
    }
    return -1;
}

// llama-quantize's fallback for rows a K-quant's super-block does not divide.
static int llm__quant_fallback(int type) {
    switch (type) {
    case LLM__TYPE_Q2_K: case LLM__TYPE_Q3_K: return LLM__TYPE_Q4_0;
    case LLM__TYPE_IQ4_XS: return LLM__TYPE_IQ4_NL;
    case LLM__TYPE_Q4_K: return LLM__TYPE_Q5_0;
    case LLM__TYPE_Q5_K: return LLM__TYPE_Q5_1;
    case LLM__TYPE_Q6_K: return LLM__TYPE_Q8_0;
    default: return type;
    }
}

struct llm__quant_job { const struct llm__gguf_tensor *src; int type; void *dst; bool fail; };

static void llm__quant_worker(void *arg, int ith, int nth) {
    struct llm__quant_job *job = arg;
    const struct llm__gguf_tensor *t = job->src;
    const int64_t n = t->ne[0];
    const size_t sb = llm__row_bytes((int)t->type, n), db = llm__row_bytes(job->type, n);
    int64_t r0, r1;
    llm__split(t->ne[1] * t->ne[2] * t->ne[3], ith, nth, &r0, &r1);
    float *tmp = malloc(sizeof(float) * (size_t)n * 2);
    if (!tmp) { job->fail = true; return; }
    for (int64_t r = r0; r < r1; r++) {
        llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)r * sb, tmp, n);
        if (t->perm)   // GPTQ act-order: column k holds input perm[k]
            for (int64_t k = 0; k < n; k++) tmp[n + t->perm[k]] = tmp[k];
        llm__quantize_row(job->type, t->perm ? tmp + n : tmp, (uint8_t *)job->dst + (size_t)r * db, n);
    }
    free(tmp);
}

// Every F32/F16/BF16 matrix of the model's file quantized to the type named `name` (see
// llm_engine_params.quantize), in place of the file's: the tensor then points to the new data
// (m->qbufs), and the mapped file's pages are given back.
static enum llm_status llm__model_quantize(struct llm__model *m, const char *name, int n_threads, bool progress,
                                           struct llm__err *e) {
    const int type = llm__type_by_name(name);
    if (type < 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a weight type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, "
                         "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, f16, bf16, f32)", name);
    struct llm__gguf *g = &m->gguf;
    if (!(m->qbufs = calloc((size_t)g->n_tensors + 1, sizeof(void *)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    struct llm__pool *pool = llm__pool_new(n_threads, e);
    if (!pool) return LLM_ERR_BACKEND;
    enum llm_status st = LLM_OK;
    size_t total = 0, done = 0;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int64_t i = 0; i < g->n_tensors && !st; i++) {
            struct llm__gguf_tensor *t = &g->tensors[i];
            if (t->n_dims != 2 || (t->type != LLM__TYPE_F32 && t->type != LLM__TYPE_F16 && t->type != LLM__TYPE_BF16)) continue;
            int tt = t->ne[0] % llm__type_info((uint32_t)type)->blck == 0 ? type : llm__quant_fallback(type);
            if (t->ne[0] % llm__type_info((uint32_t)tt)->blck != 0 || (uint32_t)tt == t->type) continue;
            if (pass == 0) { total += t->size; continue; }
            const size_t size = llm__row_bytes(tt, t->ne[0]) * (size_t)t->ne[1];
            struct llm__quant_job job = {t, tt, llm__alloc(size), false};
            if (!job.dst) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory (%zu bytes for '%s')", size, t->name); break; }
            m->qbufs[m->n_qbufs++] = job.dst;
            llm__pool_run(pool, llm__quant_worker, &job);
            if (job.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
            // the old data's pages given back: a mapped file's, or a directory's copy (permuted or
            // aligned), which is freed too (its whole pages first: the allocator may keep them)
            if (g->owns_map || g->owns_buf) llm__map_release(t->data, t->size);
            if (g->extra_free == llm__hf_owned_free) {
                struct llm__hf_owned *o = g->extra;
                for (int64_t c = 0; c < o->n_copies; c++)
                    if (o->copies[c] == t->data) { free(o->copies[c]); o->copies[c] = NULL; break; }
            }
            done += t->size;
            t->type = (uint32_t)tt;
            t->data = job.dst;
            t->size = size;
            if (progress) fprintf(stderr, "\rllm: quantizing to %s %3d%%", llm__type_info((uint32_t)type)->name,
                                  (int)(100.0 * (double)done / (double)(total ? total : 1)));
        }
    if (progress) fprintf(stderr, "\r%40s\r", "");
    llm__pool_free(pool);
    return st;
}

// The matrices, into backend weights (weight_load: copied, repacked or borrowed from the map).
// progress: a percentage on stderr while they are taken in.
static enum llm_status llm__model_load_matrices(struct llm__model *m, struct llm_backend *be,
                                                const struct llm__model_plan *pl, bool progress, struct llm__err *e) {
    size_t total_bytes = 0, done_bytes = 0;
    int shown = -1;
    for (size_t i = 0; i < pl->n_mats; i++)
        total_bytes += (size_t)pl->mats[i].rows * llm__row_bytes((int)pl->mats[i].src->type, pl->mats[i].src->ne[0]);
    for (size_t i = 0; i < pl->n_mats; i++) {
        const struct llm__gguf_tensor *src = pl->mats[i].src;
        const size_t row_bytes = llm__row_bytes((int)src->type, src->ne[0]);
        const char *data = (const char *)src->data + (size_t)pl->mats[i].row0 * row_bytes;
        const size_t size = (size_t)pl->mats[i].rows * row_bytes;
        enum llm_status st = be->iface->weight_load(be->ctx, pl->mats[i].dst, (int)src->type, src->ne[0],
                                                    pl->mats[i].rows, data, e);
        if (st) return st;
        if (!pl->mats[i].dst->buf.borrowed && (m->gguf.owns_map || m->gguf.owns_buf)) llm__map_release(data, size);
        done_bytes += size;
        int pct = (int)(100.0 * (double)done_bytes / (double)(total_bytes ? total_bytes : 1));
        if (progress && pct != shown) {
            fprintf(stderr, "\rllm: loading weights %3d%%", pct);
            shown = pct;
        }
    }
    if (progress) fprintf(stderr, "\r%40s\r", "");
    if (m->tied_output) m->output = m->tok_embd;
    return LLM_OK;
}

// Collects the 1-D parameters into one f32 backend buffer and the matrices into backend weights.
// progress: print a percentage to stderr while the weights are taken in (a terminal only).
static enum llm_status llm__model_load_tensors(struct llm__model *m, struct llm_backend *be, bool progress,
                                               struct llm__err *e) {
    if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    const struct llm_backend_i *B = be->iface;
    bool windowed = m->attn_softcap > 0.0f;
    for (int l = 0; l < m->n_layer; l++) windowed |= m->layers[l].swa;
    const char *missing = m->embd_scale > 0.0f && !B->scale ? "scale" : m->gelu && !B->gelu_mul ? "gelu_mul"
                          : windowed && !B->attention_window ? "sliding-window or soft-capped attention" : NULL;
    if (missing)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "model: the %s backend cannot run architecture '%s' yet (no %s); "
                         "the CPU backend can", B->name, m->arch_name, missing);
    struct llm__model_plan pl = {0};
    enum llm_status st = llm__model_plan(m, &pl, e);
    if (!st) st = llm__model_load_vectors(m, be, &pl, e);
    if (!st) st = llm__model_load_matrices(m, be, &pl, progress, e);
    if (!st) st = llm__model_load_perms(m, be, &pl, e);
    free(pl.vecs);
    free(pl.mats);
    return st;
}

// Bytes of weights one decode step reads: every matrix once, the embedding table only as the
// output projection of a tied model (a lookup reads one row). The roofline of decode speed is
// memory bandwidth divided by this.
static size_t llm__model_bytes_per_token(const struct llm__model *m) {
    size_t n = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        const struct llm__gguf_tensor *t = &m->gguf.tensors[i];
        if (t->n_dims < 2) continue;
        if (strcmp(t->name, "token_embd.weight") == 0 && !m->tied_output) continue;
        n += t->size;
    }
    return n;
}

static void llm__model_free(struct llm__model *m, struct llm_backend *be) {
    if (be->iface) {
        if (m->layers) {
            for (int l = 0; l < m->n_layer; l++) {
                struct llm__layer *L = &m->layers[l];
                struct llm__weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
                for (size_t i = 0; i < LLM__ARRAY_LEN(ws); i++)
                    if (ws[i]->buf.data || ws[i]->buf.handle) be->iface->weight_free(be->ctx, ws[i]);
            }
        }
        if (!m->tied_output && (m->output.buf.data || m->output.buf.handle)) be->iface->weight_free(be->ctx, &m->output);
        if (m->tok_embd.buf.data || m->tok_embd.buf.handle) be->iface->weight_free(be->ctx, &m->tok_embd);
        if (m->small.data || m->small.handle) be->iface->buf_free(be->ctx, &m->small);
        if (m->perms.data || m->perms.handle) be->iface->buf_free(be->ctx, &m->perms);
    }
    for (int64_t i = 0; i < m->n_qbufs; i++) free(m->qbufs[i]);
    free(m->qbufs);
    free(m->layers);
    llm__gguf_close(&m->gguf);
    memset(m, 0, sizeof(*m));
}

// Activations of one step, views into one backend buffer sized for max_tokens rows.
struct llm__acts {
    struct llm__buf buf;
    int max_tokens, max_out;
    size_t off_x, off_xb, off_q, off_k, off_v, off_att, off_xb2, off_gate, off_up, off_xo, off_logits;
    size_t off_gather;   // act-order weights' gathered inputs (max_tokens x m->max_perm)
};

static enum llm_status llm__acts_init(struct llm__acts *a, const struct llm__model *m, struct llm_backend *be,
                                      int max_tokens, int max_out, struct llm__err *e) {
    size_t T = (size_t)max_tokens, off = 0;
    const size_t E = (size_t)m->n_embd, Q = (size_t)m->n_head * m->head_dim, KV = (size_t)m->n_head_kv * m->head_dim;
#define LLM__ALLOC(field, n) (a->field = off, off += (((n) * sizeof(float)) + 63) & ~(size_t)63)
    LLM__ALLOC(off_x, T * E);
    LLM__ALLOC(off_xb, T * E);
    LLM__ALLOC(off_q, T * Q);
    LLM__ALLOC(off_k, T * KV);
    LLM__ALLOC(off_v, T * KV);
    LLM__ALLOC(off_att, T * Q);
    LLM__ALLOC(off_xb2, T * E);
    LLM__ALLOC(off_gate, T * (size_t)m->n_ff);
    LLM__ALLOC(off_up, T * (size_t)m->n_ff);
    LLM__ALLOC(off_xo, (size_t)max_out * E);
    LLM__ALLOC(off_logits, (size_t)max_out * (size_t)m->n_vocab);
    LLM__ALLOC(off_gather, T * (size_t)m->max_perm);
#undef LLM__ALLOC
    a->max_tokens = max_tokens;
    a->max_out = max_out;
    return be->iface->buf_alloc(be->ctx, &a->buf, off, e);
}

// The products of n weights sharing input x: one matmul call for each run of weights with the same
// input permutation (act-order GPTQ), the input gathered into g first where they have one.
static void llm__forward_matmul(const struct llm_backend_i *B, void *ctx, int n, const struct llm__tensor *dst,
                                const struct llm__weight *const *w, const struct llm__tensor *bias, struct llm__tensor x,
                                struct llm__tensor g) {
    for (int j = 0, k; j < n; j = k) {
        const struct llm__tensor p = w[j]->perm;
        for (k = j + 1; k < n && w[k]->perm.buf == p.buf && (!p.buf || w[k]->perm.offs == p.offs); k++) {}
        struct llm__tensor in = x;
        if (p.buf) {
            assert(p.ne0 == x.ne0 && llm__is_gq(w[j]->type));
            in = (struct llm__tensor){g.buf, g.offs, LLM__TYPE_F32, x.ne0, x.ne1, (size_t)x.ne0 * sizeof(float)};
            B->gather_cols(ctx, in, x, p);
        }
        B->matmul(ctx, k - j, dst + j, w + j, bias ? bias + j : NULL, in);
    }
}

// Time spent per module of the model (enum llm_prof_op), when profiling (llm_set_profiling).
struct llm__prof { double t[LLM_PROF_COUNT]; long long steps; };

// Runs the model over one step; logits (n_out rows of n_vocab) are copied to host memory. With
// prof, each op is timed (a backend whose ops run asynchronously is synchronized after each; a
// failure there ends the step early and is returned).
static enum llm_status llm__forward(const struct llm__model *m, struct llm_backend *be, struct llm__acts *a,
                                    const struct llm__tensor *k_cache, const struct llm__tensor *v_cache,
                                    const struct llm__step *s, float *logits, struct llm__prof *prof,
                                    struct llm__err *e) {
    const struct llm_backend_i *B = be->iface;
    void *ctx = be->ctx;
    enum llm_status st = LLM_OK;
#define LLM__OP(cat, call)                                                          \
    do {                                                                            \
        double t0_ = prof ? llm__now() : 0.0;                                       \
        call;                                                                       \
        if (prof) {                                                                 \
            if (B->sync && (st = B->sync(ctx, e)) != LLM_OK) goto finish;           \
            prof->t[cat] += llm__now() - t0_;                                       \
        }                                                                           \
    } while (0)
    _Static_assert(LLM__MAX_MATMUL_WEIGHTS >= 3, "the q/k/v projections share one matmul call");
    const int T = s->n_tokens, E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim;
    assert(T >= 1 && T <= a->max_tokens && s->n_out <= a->max_out);
    struct llm__tensor x = llm__vec_view(&a->buf, a->off_x, E, T);
    struct llm__tensor xb = llm__vec_view(&a->buf, a->off_xb, E, T);
    struct llm__tensor q = llm__vec_view(&a->buf, a->off_q, Q, T);
    struct llm__tensor k = llm__vec_view(&a->buf, a->off_k, KV, T);
    struct llm__tensor v = llm__vec_view(&a->buf, a->off_v, KV, T);
    struct llm__tensor att = llm__vec_view(&a->buf, a->off_att, Q, T);
    struct llm__tensor xb2 = llm__vec_view(&a->buf, a->off_xb2, E, T);
    struct llm__tensor gate = llm__vec_view(&a->buf, a->off_gate, m->n_ff, T);
    struct llm__tensor up = llm__vec_view(&a->buf, a->off_up, m->n_ff, T);
    struct llm__tensor xo = llm__vec_view(&a->buf, a->off_xo, E, s->n_out);
    struct llm__tensor lg = llm__vec_view(&a->buf, a->off_logits, m->n_vocab, s->n_out);
    const struct llm__tensor gx = llm__vec_view(&a->buf, a->off_gather, m->max_perm, T);
    const struct llm__attn ap = {m->n_head, m->n_head_kv, m->head_dim, m->attn_scale, 0, m->attn_softcap};
    struct llm__attn ap_swa = ap;
    ap_swa.window = m->n_swa;
    // q and k as one row per head, (head_dim, T * heads), for the per-head norms
    const struct llm__tensor qh = llm__vec_view(&a->buf, a->off_q, m->head_dim, (int64_t)T * m->n_head);
    const struct llm__tensor kh = llm__vec_view(&a->buf, a->off_k, m->head_dim, (int64_t)T * m->n_head_kv);

    B->begin_step(ctx, s);
    LLM__OP(LLM_PROF_EMBED, B->embed(ctx, x, &m->tok_embd));
    if (m->embd_scale > 0.0f) LLM__OP(LLM_PROF_EMBED, B->scale(ctx, x, x, m->embd_scale));
    for (int l = 0; l < m->n_layer; l++) {
        const struct llm__layer *L = &m->layers[l];
        const struct llm__rope *rope = L->swa ? &m->rope_swa : &m->rope;
        LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb, x, L->attn_norm, m->norm_eps));
        const struct llm__tensor qkv[3] = {q, k, v}, bqkv[3] = {L->bq, L->bk, L->bv};
        const struct llm__weight *wqkv[3] = {&L->wq, &L->wk, &L->wv};
        if (m->calib) llm__calib_take(m->calib, l, LLM__CAL_ATTN_IN, xb);
        LLM__OP(LLM_PROF_QKV, llm__forward_matmul(B, ctx, 3, qkv, wqkv, bqkv, xb, gx));
        if (m->qk_norm)
            LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, qh, qh, L->q_norm, m->norm_eps);
                                    B->rmsnorm(ctx, kh, kh, L->k_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ROPE, B->rope(ctx, q, m->n_head, m->head_dim, rope);
                                B->rope(ctx, k, m->n_head_kv, m->head_dim, rope));
        LLM__OP(LLM_PROF_KV_STORE, B->kv_store(ctx, k_cache[l], v_cache[l], k, v));
        if (L->swa || m->attn_softcap > 0.0f)
            LLM__OP(LLM_PROF_ATTN, B->attention_window(ctx, att, q, k_cache[l], v_cache[l], L->swa ? &ap_swa : &ap));
        else
            LLM__OP(LLM_PROF_ATTN, B->attention(ctx, att, q, k_cache[l], v_cache[l], &ap));
        const struct llm__weight *wo[1] = {&L->wo};
        if (m->calib) llm__calib_take(m->calib, l, LLM__CAL_ATTN_OUT, att);
        LLM__OP(LLM_PROF_O_PROJ, llm__forward_matmul(B, ctx, 1, &xb2, wo, NULL, att, gx));
        if (m->post_norms) LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb2, xb2, L->attn_post_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ADD, B->add(ctx, x, x, xb2));
        LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb, x, L->ffn_norm, m->norm_eps));
        const struct llm__tensor gu[2] = {gate, up};
        const struct llm__weight *wgu[2] = {&L->w_gate, &L->w_up};
        if (m->calib) llm__calib_take(m->calib, l, LLM__CAL_FFN_IN, xb);
        LLM__OP(LLM_PROF_MLP_UP, llm__forward_matmul(B, ctx, 2, gu, wgu, NULL, xb, gx));
        if (m->gelu) LLM__OP(LLM_PROF_SILU, B->gelu_mul(ctx, gate, gate, up));
        else LLM__OP(LLM_PROF_SILU, B->silu_mul(ctx, gate, gate, up));
        const struct llm__weight *wd[1] = {&L->w_down};
        if (m->calib) llm__calib_take(m->calib, l, LLM__CAL_FFN_ACT, gate);
        LLM__OP(LLM_PROF_MLP_DOWN, llm__forward_matmul(B, ctx, 1, &xb2, wd, NULL, gate, gx));
        if (m->post_norms) LLM__OP(LLM_PROF_NORM, B->rmsnorm(ctx, xb2, xb2, L->ffn_post_norm, m->norm_eps));
        LLM__OP(LLM_PROF_ADD, B->add(ctx, x, x, xb2));
    }
    if (s->n_out > 0) {
        const struct llm__weight *wout[1] = {&m->output};
        LLM__OP(LLM_PROF_LOGITS, B->get_rows(ctx, xo, x);
                                  B->rmsnorm(ctx, xo, xo, m->output_norm, m->norm_eps);
                                  llm__forward_matmul(B, ctx, 1, &lg, wout, NULL, xo, gx));
    }
#undef LLM__OP
finish:
    if (st != LLM_OK) {   // a failed sync: the step is still ended; its error is the one returned
        struct llm__err ignored;
        B->end_step(ctx, &ignored);
        return st;
    }
    st = B->end_step(ctx, e);
    if (st == LLM_OK && s->n_out > 0) {
        const size_t n = (size_t)s->n_out * (size_t)m->n_vocab;
        B->download(ctx, &a->buf, a->off_logits, logits, n * sizeof(float));
        if (m->final_softcap > 0.0f) {   // gemma2: cap * tanh(logit / cap), on the host for every backend
            const float cap = m->final_softcap, inv = 1.0f / cap;
            for (size_t i = 0; i < n; i++) logits[i] = tanhf(logits[i] * inv) * cap;
        }
    }
    return st;
}

static uint64_t llm__splitmix64(uint64_t *x);

// === KV cache blocks ===
//
// Two structures with two jobs, as in vLLM:
//   struct llm__blocks    the block manager: which block holds which tokens. Host bookkeeping
//                         only (block ids, reference counts, prefix hashes, an LRU list, a free
//                         list; each sequence's block table is its struct llm__seq), with no
//                         model and no backend, so it is created and tested alone.
//   struct llm__kv_cache  the backend's KV memory: K and V buffers of n_blocks * block_size token
//                         rows per layer, and the per-layer views the layer loop hands to
//                         kv_store and attention.
// A sequence's token at position p lives in row (slot) blocks[p / block_size] * block_size +
// p % block_size of every layer's K and V; a sequence's blocks are allocated a whole block at a
// time as it grows.
//
// Reference counts: a block is used by every sequence whose table holds it. With prefix caching,
// a block that is full is identified by a chained hash of (its parent block's hash, its token
// ids) and entered in a hash table; a new sequence whose prompt starts with the same tokens takes
// those blocks (reference count + 1; every hash hit is confirmed by comparing the tokens and the
// parent's hash). A block whose count drops to zero stays cached, in least-recently-used order,
// until a block is needed and none is free: then the oldest is evicted. Blocks of a sequence are
// only ever written while they are its partly filled last block, which is never shared.
//
// The calls come in pairs, as nano-vllm's BlockManager: llm__blocks_can_allocate says whether a
// sequence can grow by n tokens, llm__blocks_allocate then grows its table (it cannot run out of
// blocks after a yes). llm__blocks_take_prefix (the cached start of a prompt),
// llm__blocks_commit (blocks that became full enter the cache), llm__blocks_truncate (a sequence
// gives back its last tokens) and llm__blocks_release (all of them) complete the set.

// One sequence's tokens in the cache: its block table.
struct llm__seq {
    bool used;               // llm_seq_new's sequences: the id is taken
    int len;                 // tokens whose K and V are in the cache
    int32_t *blocks;         // [cap_blocks] block table: blocks[i] holds positions [i * bs, (i + 1) * bs)
    int n_blocks, cap_blocks;
    int n_committed;         // leading full blocks entered in the prefix cache
    uint64_t last_hash;      // the hash of the last of them (0: none)
};

struct llm__blocks {
    int block_size, n_blocks;
    int32_t *free_ids;             // [n_blocks] stack of free blocks that hold nothing cached
    int n_free;
    int32_t *ref;                  // [n_blocks] sequences using the block
    // prefix cache
    bool caching;
    uint8_t *hashed;               // [n_blocks] the block is in the hash table
    uint64_t *hash, *parent;       // [n_blocks]
    int32_t *content;              // [n_blocks][block_size] token ids of hashed blocks
    int32_t *bucket, *bnext;       // hash table: chains of block ids, -1 ends
    uint32_t bucket_mask;
    int32_t *lru_prev, *lru_next;  // [n_blocks] cached blocks nobody uses, least recently used first
    int32_t lru_head, lru_tail;
    int n_lru;
};

static void llm__blocks_free(struct llm__blocks *bm) {
    free(bm->free_ids);
    free(bm->ref);
    free(bm->hashed);
    free(bm->hash);
    free(bm->parent);
    free(bm->content);
    free(bm->bucket);
    free(bm->bnext);
    free(bm->lru_prev);
    free(bm->lru_next);
    memset(bm, 0, sizeof(*bm));
}

static enum llm_status llm__blocks_init(struct llm__blocks *bm, int n_blocks, int block_size, bool caching,
                                        struct llm__err *e) {
    memset(bm, 0, sizeof(*bm));
    // slots (block * block_size + offset) are int32, and the hash table has 2 buckets per block
    if (block_size < 1 || n_blocks < 1 || n_blocks > INT32_MAX / block_size / 2)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "KV blocks: %d blocks of %d tokens", n_blocks, block_size);
    size_t nb = (size_t)n_blocks;
    bm->block_size = block_size;
    bm->n_blocks = n_blocks;
    bm->free_ids = malloc(nb * sizeof(int32_t));
    bm->ref = calloc(nb, sizeof(int32_t));
    if (!bm->free_ids || !bm->ref) { llm__blocks_free(bm); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    // Hand out low ids first.
    bm->n_free = n_blocks;
    for (int i = 0; i < n_blocks; i++) bm->free_ids[i] = n_blocks - 1 - i;
    bm->lru_head = bm->lru_tail = -1;
    bm->caching = caching;
    if (!caching) return LLM_OK;
    uint32_t nbk = 1;
    while (nbk < 2 * nb) nbk <<= 1;
    bm->bucket_mask = nbk - 1;
    bm->hashed = calloc(nb, 1);
    bm->hash = calloc(nb, sizeof(uint64_t));
    bm->parent = calloc(nb, sizeof(uint64_t));
    bm->content = malloc(nb * (size_t)block_size * sizeof(int32_t));
    bm->bucket = malloc((size_t)nbk * sizeof(int32_t));
    bm->bnext = malloc(nb * sizeof(int32_t));
    bm->lru_prev = malloc(nb * sizeof(int32_t));
    bm->lru_next = malloc(nb * sizeof(int32_t));
    if (!bm->hashed || !bm->hash || !bm->parent || !bm->content || !bm->bucket || !bm->bnext || !bm->lru_prev ||
        !bm->lru_next) {
        llm__blocks_free(bm);
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < nbk; i++) bm->bucket[i] = -1;
    return LLM_OK;
}

// Blocks that can be handed out: free ones and cached ones nobody uses.
static int llm__blocks_available(const struct llm__blocks *bm) { return bm->n_free + bm->n_lru; }

static void llm__lru_remove(struct llm__blocks *bm, int32_t b) {
    int32_t p = bm->lru_prev[b], n = bm->lru_next[b];
    if (p >= 0) bm->lru_next[p] = n; else bm->lru_head = n;
    if (n >= 0) bm->lru_prev[n] = p; else bm->lru_tail = p;
    bm->n_lru--;
}

static void llm__lru_push(struct llm__blocks *bm, int32_t b) {   // most recently used at the tail
    bm->lru_prev[b] = bm->lru_tail;
    bm->lru_next[b] = -1;
    if (bm->lru_tail >= 0) bm->lru_next[bm->lru_tail] = b; else bm->lru_head = b;
    bm->lru_tail = b;
    bm->n_lru++;
}

static void llm__hash_remove(struct llm__blocks *bm, int32_t b) {
    int32_t *p = &bm->bucket[bm->hash[b] & bm->bucket_mask];
    while (*p != b) p = &bm->bnext[*p];
    *p = bm->bnext[b];
    bm->hashed[b] = 0;
}

// A block for a sequence (reference count 1), evicting the least recently used cached block when
// no block is free; -1 when every block is in use.
static int32_t llm__block_alloc(struct llm__blocks *bm) {
    int32_t b;
    if (bm->n_free > 0) b = bm->free_ids[--bm->n_free];
    else if (bm->lru_head >= 0) {
        b = bm->lru_head;
        llm__lru_remove(bm, b);
        llm__hash_remove(bm, b);
    } else return -1;
    bm->ref[b] = 1;
    return b;
}

// One sequence stops using a block: at zero references it is free, or cached when it is hashed.
static void llm__block_release(struct llm__blocks *bm, int32_t b) {
    if (--bm->ref[b] > 0) return;
    if (bm->caching && bm->hashed[b]) llm__lru_push(bm, b);
    else bm->free_ids[bm->n_free++] = b;
}

// The chained hash of a full block: its parent's hash and its tokens (parent 0 for the first).
static uint64_t llm__block_hash(uint64_t parent, const int32_t *tokens, int n) {
    uint64_t h = parent ^ 0x6a09e667f3bcc909ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)tokens[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return llm__splitmix64(&h);
}

// A cached block with this hash, parent and tokens (confirmed: a hash collision does not match), or -1.
static int32_t llm__block_find(const struct llm__blocks *bm, uint64_t h, uint64_t parent, const int32_t *tokens) {
    for (int32_t b = bm->bucket[h & bm->bucket_mask]; b >= 0; b = bm->bnext[b])
        if (bm->hash[b] == h && bm->parent[b] == parent &&
            memcmp(&bm->content[(size_t)b * (size_t)bm->block_size], tokens, (size_t)bm->block_size * sizeof(int32_t)) == 0)
            return b;
    return -1;
}

// Enters a sequence's block that just became full into the cache (unless the same content is
// there already). Returns its hash, the parent of the next block.
static uint64_t llm__block_commit(struct llm__blocks *bm, int32_t b, uint64_t parent, const int32_t *tokens) {
    uint64_t h = llm__block_hash(parent, tokens, bm->block_size);
    if (!bm->caching || bm->hashed[b] || llm__block_find(bm, h, parent, tokens) >= 0) return h;
    bm->hash[b] = h;
    bm->parent[b] = parent;
    memcpy(&bm->content[(size_t)b * (size_t)bm->block_size], tokens, (size_t)bm->block_size * sizeof(int32_t));
    bm->bnext[b] = bm->bucket[h & bm->bucket_mask];
    bm->bucket[h & bm->bucket_mask] = b;
    bm->hashed[b] = 1;
    return h;
}

// The KV slot of a sequence's position (its blocks cover it).
static inline int32_t llm__seq_slot(const struct llm__seq *sq, int block_size, int pos) {
    return sq->blocks[pos / block_size] * block_size + pos % block_size;
}

static bool llm__seq_grow_table(struct llm__seq *sq, int n) {
    if (n <= sq->cap_blocks) return true;
    int cap = LLM__MAX(n, 2 * sq->cap_blocks);
    int32_t *b = realloc(sq->blocks, (size_t)cap * sizeof(int32_t));
    if (!b) return false;
    sq->blocks = b;
    sq->cap_blocks = cap;
    return true;
}

// Blocks a sequence lacks to hold n more tokens (0 when its last block has room).
static int64_t llm__blocks_needed(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    int64_t need = ((int64_t)sq->len + n + bm->block_size - 1) / bm->block_size - sq->n_blocks;
    return need > 0 ? need : 0;
}

static bool llm__blocks_can_allocate(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    return llm__blocks_needed(bm, sq, n) <= llm__blocks_available(bm);
}

// The same from free blocks alone: drafts, which must not evict a cached prefix block (a block
// the next request with the same prompt would have found) for tokens that may be rejected.
static bool llm__blocks_can_allocate_free(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    return llm__blocks_needed(bm, sq, n) <= bm->n_free;
}

// Grows a sequence's block table to hold n more tokens; llm__blocks_can_allocate said yes. Its
// length does not change (it grows as the tokens are computed). false: no memory for the table,
// and nothing changed.
static bool llm__blocks_allocate(struct llm__blocks *bm, struct llm__seq *sq, int n) {
    int need = (int)llm__blocks_needed(bm, sq, n);
    assert(need <= llm__blocks_available(bm));
    if (need == 0) return true;
    if (!llm__seq_grow_table(sq, sq->n_blocks + need)) return false;
    for (int i = 0; i < need; i++) sq->blocks[sq->n_blocks++] = llm__block_alloc(bm);
    return true;
}

// An empty sequence takes the cached blocks that hold the start of tokens[0..n): whole blocks
// only, and never all n tokens (the last one is computed again, for its logits). Returns the
// tokens covered, now its length.
static int llm__blocks_take_prefix(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens, int n) {
    if (!bm->caching || sq->n_blocks > 0) return 0;
    int bs = bm->block_size, max_blocks = (n - 1) / bs;
    uint64_t parent = 0;
    for (int i = 0; i < max_blocks; i++) {
        const int32_t *t = tokens + (size_t)i * (size_t)bs;
        uint64_t h = llm__block_hash(parent, t, bs);
        int32_t b = llm__block_find(bm, h, parent, t);
        if (b < 0 || !llm__seq_grow_table(sq, sq->n_blocks + 1)) break;
        if (bm->ref[b]++ == 0) llm__lru_remove(bm, b);
        sq->blocks[sq->n_blocks++] = b;
        parent = h;
    }
    sq->len = sq->n_committed = sq->n_blocks;
    sq->len *= bs;
    sq->last_hash = parent;
    return sq->len;
}

// Enters the sequence's blocks that are full (of tokens[0..len)) into the prefix cache.
static void llm__blocks_commit(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens) {
    if (!bm->caching) return;
    while (sq->n_committed < sq->len / bm->block_size) {
        int i = sq->n_committed;
        sq->last_hash = llm__block_commit(bm, sq->blocks[i], sq->last_hash, tokens + (size_t)i * (size_t)bm->block_size);
        sq->n_committed++;
    }
}

// Shrinks a sequence to its first len tokens and gives back the blocks past them: speculative
// decoding's rollback of rejected draft tokens, or blocks allocated for tokens that were not
// computed. Blocks entered in the prefix cache are never cut into (len >= n_committed *
// block_size): other sequences may share them, so they must not be written again.
static void llm__blocks_truncate(struct llm__blocks *bm, struct llm__seq *sq, int len) {
    assert(len >= 0 && len <= sq->len && len >= sq->n_committed * bm->block_size);
    int keep = (len + bm->block_size - 1) / bm->block_size;
    while (sq->n_blocks > keep) llm__block_release(bm, sq->blocks[--sq->n_blocks]);
    sq->len = len;
}

// Gives back all of a sequence's blocks (the last first, so a prefix's blocks leave the cache
// after their children) and empties it.
static void llm__blocks_release(struct llm__blocks *bm, struct llm__seq *sq) {
    for (int i = sq->n_blocks - 1; i >= 0; i--) llm__block_release(bm, sq->blocks[i]);
    free(sq->blocks);
    memset(sq, 0, sizeof(*sq));
}

// The backend's KV memory: block b's rows of layer l are rows [b * block_size, (b + 1) *
// block_size) of k_layer[l] and v_layer[l].
struct llm__kv_cache {
    int type;                      // LLM__TYPE_F16 (default) or LLM__TYPE_F32
    int block_size, n_blocks;
    size_t row_bytes;              // one token of one layer: n_head_kv * head_dim values
    struct llm__buf k, v;          // [n_layer][n_blocks * block_size][n_head_kv * head_dim] each
    struct llm__tensor *k_layer;   // [n_layer] views of k
    struct llm__tensor *v_layer;
};

// As many blocks as `bytes` hold (at least one).
static enum llm_status llm__kv_cache_init(struct llm__kv_cache *kv, const struct llm__model *m, struct llm_backend *be,
                                          int type, int block_size, size_t bytes, struct llm__err *e) {
    enum llm_status st;
    kv->type = type;
    kv->block_size = block_size;
    kv->row_bytes = llm__row_bytes(type, (int64_t)m->n_head_kv * m->head_dim);
    size_t per_block = kv->row_bytes * (size_t)block_size * (size_t)m->n_layer * 2;
    size_t nb = bytes / per_block;
    if (nb < 1)
        return llm__fail(e, LLM_ERR_NOMEM, "KV cache memory of %zu bytes holds no block of %d tokens (%zu bytes)",
                         bytes, block_size, per_block);
    if (nb > (size_t)INT32_MAX / (size_t)block_size / 2) nb = (size_t)INT32_MAX / (size_t)block_size / 2;
    kv->n_blocks = (int)nb;
    size_t layer = kv->row_bytes * (size_t)block_size * nb;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->k, layer * (size_t)m->n_layer, e))) return st;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->v, layer * (size_t)m->n_layer, e))) return st;
    kv->k_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    kv->v_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    if (!kv->k_layer || !kv->v_layer) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layer; l++) {
        int64_t rows = (int64_t)nb * block_size, cols = (int64_t)m->n_head_kv * m->head_dim;
        kv->k_layer[l] = (struct llm__tensor){&kv->k, layer * (size_t)l, type, cols, rows, kv->row_bytes};
        kv->v_layer[l] = (struct llm__tensor){&kv->v, layer * (size_t)l, type, cols, rows, kv->row_bytes};
        // Host memory: the first 2 MB of each layer's part (the first blocks taken: block 0
        // first) are touched now. Each layer's part starts a huge page of its own, which the
        // kernel zeroes when it is first written: 2 x n_layer x 2 MB at the first prompt step
        // otherwise (60 huge pages, 100-200 ms on SmolLM2, in its time to first token).
        if (be->iface == &llm__cpu_iface) {
            const size_t n = LLM__MIN(layer, (size_t)2 << 20);
            for (size_t o = 0; o < n; o += 4096) {
                ((volatile char *)kv->k.data)[layer * (size_t)l + o] = 0;
                ((volatile char *)kv->v.data)[layer * (size_t)l + o] = 0;
            }
        }
    }
    return LLM_OK;
}

static void llm__kv_cache_free(struct llm__kv_cache *kv, struct llm_backend *be) {
    if (be->iface) {
        if (kv->k.data || kv->k.handle) be->iface->buf_free(be->ctx, &kv->k);
        if (kv->v.data || kv->v.handle) be->iface->buf_free(be->ctx, &kv->v);
    }
    free(kv->k_layer);
    free(kv->v_layer);
    memset(kv, 0, sizeof(*kv));
}

// === sampler ===

struct llm_sampler {
    struct llm_sampling_params p;
    int n_vocab;
    uint64_t rng[4];          // xoshiro256**
    float *probs;             // [n_vocab]
    int32_t *idx;             // [n_vocab]
    float *work;              // [n_vocab] penalised logits
    int32_t *hist;            // the last penalty_last_n tokens, a ring
    int n_hist, hist_pos;
    int32_t *count;           // [n_vocab] zeros, but while the penalties count occurrences
};

static uint64_t llm__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t llm__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t llm__xoshiro(uint64_t s[4]) {
    uint64_t r = llm__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = llm__rotl(s[3], 45);
    return r;
}

static double llm__rng_uniform(uint64_t s[4]) {   // [0, 1)
    return (double)(llm__xoshiro(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct llm_sampling_params llm_sampling_params_default(void) {
    struct llm_sampling_params p = {0};
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    p.seed = 0;
    return p;
}

static bool llm__penalties_on(const struct llm_sampling_params *p) {
    return p->penalty_last_n > 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f);
}

// Parameters llm_sampler_create accepts (NaN fails every comparison).
static bool llm__sampling_params_ok(const struct llm_sampling_params *p) {
    return p->penalty_last_n >= 0 && p->top_k >= 0 && isfinite(p->temperature) && p->temperature >= 0.0f &&
           p->top_p >= 0.0f && p->top_p <= 1.0f && p->min_p >= 0.0f && p->min_p <= 1.0f &&
           isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f && isfinite(p->frequency_penalty) &&
           isfinite(p->presence_penalty);
}

llm_sampler *llm_sampler_create(const struct llm_sampling_params *params, int n_vocab) {
    if (!params || n_vocab < 1 || !llm__sampling_params_ok(params)) return NULL;
    llm_sampler *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->p = *params;
    s->n_vocab = n_vocab;
    s->probs = malloc((size_t)n_vocab * sizeof(float));
    s->idx = malloc((size_t)n_vocab * sizeof(int32_t));
    bool pen = llm__penalties_on(params);
    s->work = pen ? malloc((size_t)n_vocab * sizeof(float)) : NULL;
    s->count = pen ? calloc((size_t)n_vocab, sizeof(int32_t)) : NULL;
    s->hist = params->penalty_last_n > 0 ? malloc((size_t)params->penalty_last_n * sizeof(int32_t)) : NULL;
    if (!s->probs || !s->idx || (pen && (!s->work || !s->count)) || (params->penalty_last_n > 0 && !s->hist)) {
        llm_sampler_free(s);
        return NULL;
    }
    uint64_t seed = params->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = llm__splitmix64(&seed);
    return s;
}

void llm_sampler_free(llm_sampler *s) {
    if (!s) return;
    free(s->probs);
    free(s->idx);
    free(s->work);
    free(s->count);
    free(s->hist);
    free(s);
}

void llm_sampler_accept(llm_sampler *s, int32_t token) {
    if (!s->hist || token < 0 || token >= s->n_vocab) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.penalty_last_n;
    if (s->n_hist < s->p.penalty_last_n) s->n_hist++;
}

void llm_sampler_reset(llm_sampler *s) {
    s->n_hist = s->hist_pos = 0;
}

// Whether x[0..n) are all finite: the largest magnitude's bits (sign cleared) stay below those of
// infinity. An integer maximum over 16 lanes (a loop compilers vectorise); it looks at one logit
// row per sampled token, so a model whose activations overflow is caught without a check in the
// layers' hot paths.
static bool llm__all_finite(const float *x, size_t n) {
    uint32_t lane[16] = {0}, mx = 0, b;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            memcpy(&b, x + i + (size_t)l, 4);
            b &= 0x7fffffffu;
            lane[l] = b > lane[l] ? b : lane[l];
        }
    for (int l = 0; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; i < n; i++) {
        memcpy(&b, x + i, 4);
        b &= 0x7fffffffu;
        mx = b > mx ? b : mx;
    }
    return mx < 0x7f800000u;
}

// The first index of the largest value (NaN never wins). The maximum is found over 16 lanes
// (a loop compilers vectorise), then its first position.
static int32_t llm__argmax(const float *x, int n) {
    float lane[16];
    int i = 0;
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    float mx = -INFINITY;
    for (int l = 0; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (i = 0; i < n; i++) if (x[i] == mx) return i;
    return 0;   // all NaN or -inf
}

// Sorts idx[0..n) by descending key[idx[i]], ties by ascending id.
static void llm__sort_desc(int32_t *idx, int n, const float *key) {
    // Heap sort: no recursion, no allocation, O(n log n) worst case.
#define LLM__BEFORE(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) > (b)))   // a sorts after b
    for (int start = n / 2 - 1; start >= 0; start--) {
        for (int r = start;;) {
            int c = 2 * r + 1;
            if (c >= n) break;
            if (c + 1 < n && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            int32_t t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
    for (int end = n - 1; end > 0; end--) {
        int32_t t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        for (int r = 0;;) {
            int c = 2 * r + 1;
            if (c >= end) break;
            if (c + 1 < end && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
#undef LLM__BEFORE
}

// Keeps the k best of idx[0..n) in idx[0..k), sorted best first (of equal keys, the lower ids).
#define LLM__TOP_K_INSERT 64   // k up to this: insertion into a sorted buffer, else a heap
static int llm__top_k(int32_t *idx, int n, int k, const float *key) {
    if (k <= 0 || k >= n) { llm__sort_desc(idx, n, key); return n; }
    if (k > LLM__TOP_K_INSERT) {
        // A large k (a request may ask for top_k = n_vocab - 1): the k best kept in a heap whose
        // root is the worst of them, O(n log k) (the buffer below would cost O(n k) when the keys
        // rise), then sorted.
#define LLM__WORSE(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) > (b)))
#define LLM__SIFT(r0)                                                                   \
        for (int r = (r0);;) {                                                          \
            int c = 2 * r + 1;                                                          \
            if (c >= k) break;                                                          \
            if (c + 1 < k && LLM__WORSE(idx[c + 1], idx[c])) c++;                       \
            if (!LLM__WORSE(idx[c], idx[r])) break;                                     \
            int32_t t = idx[r]; idx[r] = idx[c]; idx[c] = t;                            \
            r = c;                                                                      \
        }
        for (int top = k / 2 - 1; top >= 0; top--) LLM__SIFT(top)
        for (int i = k; i < n; i++)
            if (LLM__WORSE(idx[0], idx[i])) {
                idx[0] = idx[i];
                LLM__SIFT(0)
            }
#undef LLM__SIFT
#undef LLM__WORSE
        llm__sort_desc(idx, k, key);
        return k;
    }
    // One pass with a small sorted buffer when k is small: at most k moves per key.
    int m = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = idx[i];
        if (m == k && !(key[id] > key[idx[k - 1]])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && key[idx[j - 1]] < key[id]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = id;
    }
    return m;
}

static int llm__cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

// Repetition (divides positive logits, multiplies negative ones), frequency (per occurrence)
// and presence (once) penalties for the tokens of the recent history, as llama.cpp applies them.
// Occurrences are counted in s->count, which is left zero again: time linear in the history (and
// the copy of the row), whatever it holds.
static const float *llm__apply_penalties(llm_sampler *s, const float *logits) {
    if (!llm__penalties_on(&s->p) || s->n_hist == 0) return logits;
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof(float));
    for (int i = 0; i < s->n_hist; i++) s->count[s->hist[i]]++;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (!s->count[t]) continue;   // done at its first occurrence
        float *x = &s->work[t];
        if (*x <= 0.0f) *x *= s->p.repeat_penalty;
        else *x /= s->p.repeat_penalty;
        *x -= (float)s->count[t] * s->p.frequency_penalty + s->p.presence_penalty;
        s->count[t] = 0;
    }
    return s->work;
}

// The distribution the sampler draws from: candidates s->idx[0..m) with weights s->probs[0..m)
// (their sum in *sum; not normalised), after the whole chain (penalties, top-k, top-p, min-p,
// temperature). Greedy (temperature 0): the argmax alone. Returns m.
static int llm__sampler_dist(llm_sampler *s, const float *logits_in, double *sum_out) {
    const int n = s->n_vocab;
    const float *logits = llm__apply_penalties(s, logits_in);
    if (!(s->p.temperature > 0.0f)) {
        s->idx[0] = llm__argmax(logits, n);
        s->probs[0] = 1.0f;
        *sum_out = 1.0;
        return 1;
    }
    // candidates: top-k (sorted), or all (sorted when top-p or min-p needs it)
    for (int i = 0; i < n; i++) s->idx[i] = i;
    int m = n;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < n) { m = llm__top_k(s->idx, n, s->p.top_k, logits); sorted = true; }
    else if (s->p.top_p < 1.0f || s->p.min_p > 0.0f) { llm__sort_desc(s->idx, n, logits); sorted = true; }
    float mx = sorted ? logits[s->idx[0]] : logits[llm__argmax(logits, n)];
    // top-p and min-p on the probabilities before temperature
    if (s->p.top_p < 1.0f) {
        double sum = 0.0, cum = 0.0;
        for (int i = 0; i < m; i++) sum += (s->probs[i] = expf(logits[s->idx[i]] - mx));
        int keep = m;
        for (int i = 0; i < m; i++) {
            cum += s->probs[i];
            if (cum >= (double)s->p.top_p * sum) { keep = i + 1; break; }
        }
        m = keep;
    }
    if (s->p.min_p > 0.0f) {   // keep p >= min_p * p_max: logit >= max + log(min_p)
        float lim = mx + logf(s->p.min_p);
        int keep = 1;
        while (keep < m && logits[s->idx[keep]] >= lim) keep++;
        m = keep;
    }
    double sum = 0.0;
    for (int i = 0; i < m; i++) sum += (s->probs[i] = expf((logits[s->idx[i]] - mx) / s->p.temperature));
    *sum_out = sum;
    return m;
}

// A draw from candidates idx[0..m) by weight, leaving out `skip` (-1: none; its weight w_skip).
static int32_t llm__sampler_draw(llm_sampler *s, int m, double sum, int32_t skip, double w_skip) {
    double r = llm__rng_uniform(s->rng) * (sum - w_skip), acc = 0.0;
    int32_t tok = -1;
    for (int i = 0; i < m; i++) {
        if (s->idx[i] == skip) continue;
        tok = s->idx[i];   // the last candidate when rounding leaves r past the total
        acc += s->probs[i];
        if (r < acc) break;
    }
    return tok;
}

int32_t llm_sampler_sample(llm_sampler *s, const float *logits_in) {
    double sum;
    int m = llm__sampler_dist(s, logits_in, &sum);
    int32_t tok = m == 1 && !(s->p.temperature > 0.0f) ? s->idx[0] : llm__sampler_draw(s, m, sum, -1, 0.0);
    llm_sampler_accept(s, tok);
    return tok;
}

// Speculative decoding's verification of a draft token (Leviathan et al., Chen et al.): q is
// the draft's distribution (a draft model's, dense over the vocabulary, normalised), or NULL for
// a draft proposed with certainty (an n-gram's: q is a point mass). The draft is kept with
// probability min(1, p(draft) / q(draft)), p being the sampler's whole chain; else the token is
// drawn from max(0, p - q), normalised (a point mass: p without the draft; from p when that is
// empty). Each emitted token then has probability p(x), as without speculation; greedy keeps the
// draft exactly when it is the argmax. *accepted says which; the token is returned and accepted
// into the penalties' history.
static int32_t llm__sampler_verify(llm_sampler *s, const float *logits, int32_t draft, const float *q, bool *accepted) {
    double sum;
    int m = llm__sampler_dist(s, logits, &sum);
    int32_t tok;
    if (!(s->p.temperature > 0.0f)) {
        tok = s->idx[0];
    } else {
        double w = 0.0;   // the draft's weight under p (0: not a candidate)
        for (int i = 0; i < m; i++)
            if (s->idx[i] == draft) w = s->probs[i];
        double qd = q ? q[draft] : 1.0;
        if (qd > 0.0 && llm__rng_uniform(s->rng) * qd * sum < w) {
            tok = draft;
        } else if (!q) {   // p without the draft (the draft alone: kept, whatever the draw)
            tok = m == 1 && w > 0.0 ? draft : llm__sampler_draw(s, m, sum, w > 0.0 ? draft : -1, w);
        } else {
            double rsum = 0.0;
            for (int i = 0; i < m; i++) {
                double d = s->probs[i] / sum - (double)q[s->idx[i]];
                rsum += (s->probs[i] = d > 0.0 ? (float)d : 0.0f);
            }
            if (rsum > 0.0) {
                tok = llm__sampler_draw(s, m, rsum, -1, 0.0);
            } else {   // p and q agree on every candidate: p itself
                m = llm__sampler_dist(s, logits, &sum);
                tok = llm__sampler_draw(s, m, sum, -1, 0.0);
            }
        }
    }
    *accepted = tok == draft;
    llm_sampler_accept(s, tok);
    return tok;
}

// llm_top_logprobs, returning log(sum(exp(logits))) (the log-softmax of token t is logits[t] minus it).
static double llm__top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out) {
    k = LLM__MIN(k, n_vocab);
    float mx = logits[llm__argmax(logits, n_vocab)];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)mx);
    double lse = (double)mx + log(sum);
    // best k by insertion into a sorted list (k is small)
    int m = 0;
    for (int i = 0; i < n_vocab; i++) {
        if (m == k && !(logits[i] > logits[out[k - 1].id])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && logits[out[j - 1].id] < logits[i]) { out[j] = out[j - 1]; j--; }
        out[j].id = i;
    }
    for (int i = 0; i < k; i++) out[i].logprob = (float)((double)logits[out[i].id] - lse);
    return lse;
}

void llm_top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out) {
    if (k > 0 && n_vocab > 0) llm__top_logprobs(logits, n_vocab, k, out);
}

// === tokenizer ===
//
// The vocabulary of the GGUF file (token texts, scores, types, special ids) and the two encoders
// common files use, written to give llama.cpp's token ids exactly:
//   - SentencePiece ("llama"): spaces become U+2581, a space in front of the text (and after each
//     special token), then the highest-scoring adjacent pair of symbols is merged while the merge
//     is a token; what remains unknown falls back to byte tokens <0xNN>.
//   - byte-level BPE ("gpt2"): the text is split into words by the pre-tokenizer the file names
//     (tokenizer.ggml.pre), each word's bytes are mapped to GPT-2's printable code points, and
//     the adjacent pair with the lowest merge rank (tokenizer.ggml.merges) is merged while any is.
// Before either, special tokens are cut out of the text: user-defined tokens always, control
// tokens when the caller asks (chat templates do). Token texts are looked up through an
// open-addressing hash table, merges through another.


struct llm__vocab {
    enum llm__vocab_type type;
    enum llm__pre_type pre;
    int n;
    const struct llm__gguf_str *text;   // [n] into the mapped file
    float *scores;                      // [n]
    uint8_t *attr;                      // [n] enum llm__tok_attr
    uint8_t *eog;                       // [n] ends a generation
    int32_t bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    bool exact;                         // a Hugging Face directory's: token types as tokenizer.json
                                        // has them; SPM tokens scored -inf are never merged
    uint8_t prepend;                    // SPM: where the space in front goes: 0 every text after a
                                        // special token (llama.cpp's rule); a Hugging Face
                                        // Metaspace's (tokenizer.ggml.prepend_scheme, only in
                                        // directories): 1 "always", the same unless the text
                                        // starts with a space; 2 "first", only at the start
    uint32_t *ht;                       // token text -> id + 1, 0 = empty
    uint32_t ht_mask;
    const struct llm__gguf_str *merges; // BPE: "left right", by rank
    int n_merges;
    uint32_t *mht;                      // merge text -> rank + 1
    uint32_t mht_mask;
    int32_t *special;                   // control, user-defined and unknown tokens, longest text first
    int n_special;
    uint8_t *rstrip;                    // [n] or NULL: the whitespace after this special token is
                                        // dropped (llama.cpp's RSTRIP, given to Phi-3's tokens)
    size_t max_token_bytes;             // the most bytes of text a token stands for, when every byte
                                        // becomes part of a token (0: some can be dropped); see
                                        // llm__vocab_token_bound
    int32_t byte_tok[256];              // SPM: id of <0xNN>
    int16_t bpe_byte[324];              // BPE: code point -> byte (GPT-2's byte-to-unicode, inverted), -1: none
    char bpe_enc[256][2];               // BPE: byte -> UTF-8 of its code point (1 or 2 bytes)
    uint8_t bpe_enc_len[256];
    char chat_template[16];             // recognised tokenizer.chat_template, "" when none
};

static int32_t llm__vocab_find(const struct llm__vocab *v, const char *s, size_t n) {
    return llm__strtab_find(v->ht, v->ht_mask, v->text, s, n);
}

static void llm__vocab_free(struct llm__vocab *v) {
    free(v->scores);
    free(v->attr);
    free(v->eog);
    free(v->ht);
    free(v->mht);
    free(v->special);
    free(v->rstrip);
    memset(v, 0, sizeof(*v));
}

static bool llm__gguf_opt_id(const struct llm__gguf *g, const char *key, int32_t *id, int n, struct llm__err *e,
                             bool *bad) {
    uint32_t u;
    if (llm__gguf_find_key(g, key) < 0) return false;
    if (!llm__gguf_get_u32(g, key, &u, e)) { *bad = true; return false; }
    if (u >= (uint32_t)n) {   // files carry -1 style values for "none" too: treat out of range as absent
        return false;
    }
    *id = (int32_t)u;
    return true;
}

static bool llm__str_is(const struct llm__gguf_str *s, const char *z) {
    return s->len == strlen(z) && memcmp(s->ptr, z, s->len) == 0;
}

static bool llm__str_has(const struct llm__gguf_str *s, const char *z) {
    size_t n = strlen(z);
    return n <= s->len && llm__memmem(s->ptr, s->len, z, n) != NULL;
}

// Token texts llama.cpp treats as control tokens whatever the file says: ends of turns and
// text, fill-in-the-middle markers. The first group also ends a generation.
static const char *const llm__eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "<|end_of_text|>", "<end_of_utterance>", "</s>", "<|fim_pad|>", "<|fim_repo|>", "<|file_sep|>",
};
static const char *const llm__control_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<fim-pad>", "<fim_pad>", "<PAD>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
};

static int llm__u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool llm__vocab_get_bool(const struct llm__gguf *g, const char *key, bool *out, struct llm__err *e) {
    if (llm__gguf_find_key(g, key) < 0) return true;
    return llm__gguf_get_bool(g, key, out, e);
}

static void llm__chat_template_recognise(struct llm__vocab *v, const struct llm__gguf *g);

// The tokenizer's kind and its tokens: texts (in place in the file), scores, attributes (from
// tokenizer.ggml.token_type; normal when absent), and the hash table of texts.
static enum llm_status llm__vocab_load_tokens(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                              struct llm__err *e) {
    struct llm__gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *data;
    if (!llm__gguf_get_str(g, "tokenizer.ggml.model", &s, e)) return LLM_ERR_FORMAT;
    if (llm__str_is(&s, "llama")) v->type = LLM__VOCAB_SPM;
    else if (llm__str_is(&s, "gpt2")) v->type = LLM__VOCAB_BPE;
    else
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "tokenizer: model '%.*s' is not supported (llama, gpt2)",
                         (int)LLM__MIN(s.len, 32), s.ptr);
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, e)) return LLM_ERR_FORMAT;
    if (et != 8 /* string */ || n < 1 || n > (1u << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens must be a non-empty string array");
    if (n_vocab_model > 0 && (int64_t)n != n_vocab_model)
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: %llu tokens, but the embedding has %d rows",
                         (unsigned long long)n, n_vocab_model);
    v->n = (int)n;
    v->text = data;
    v->scores = calloc(n, sizeof(float));
    v->attr = malloc(n);
    v->eog = calloc(n, 1);
    v->ht = llm__strtab_build(v->text, v->n, &v->ht_mask);
    if (!v->scores || !v->attr || !v->eog || !v->ht) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memset(v->attr, LLM__TOK_NORMAL, n);
    if (llm__gguf_find_key(g, "tokenizer.ggml.scores") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if (et != 6 /* f32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores must be %d f32 values", v->n);
        memcpy(v->scores, data, n * sizeof(float));
    }
    if (llm__gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n, &data, e)) return LLM_ERR_FORMAT;
        if ((et != 5 && et != 4) /* i32, u32 */ || n != (uint64_t)v->n)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.token_type must be %d i32 values", v->n);
        for (int i = 0; i < v->n; i++) {
            int32_t t;
            memcpy(&t, (const char *)data + 4 * (size_t)i, 4);
            v->attr[i] = (uint8_t)(t >= 1 && t <= 6 ? t : LLM__TOK_UNUSED);
        }
    }
    return LLM_OK;
}

// BPE only: the pre-tokenizer (tokenizer.ggml.pre, with the defaults it implies) and the merges.
static enum llm_status llm__vocab_load_bpe(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_str s;
    uint32_t et;
    uint64_t n;
    const void *data;
    v->pre = LLM__PRE_DEFAULT;   // what llama.cpp assumes for files without the key
    if (llm__gguf_find_key(g, "tokenizer.ggml.pre") >= 0) {
        if (!llm__gguf_get_str(g, "tokenizer.ggml.pre", &s, e)) return LLM_ERR_FORMAT;
        size_t i = 0;
        while (i < LLM__ARRAY_LEN(llm__pre_names) && !llm__str_is(&s, llm__pre_names[i].name)) i++;
        if (i == LLM__ARRAY_LEN(llm__pre_names))
            return llm__fail(e, LLM_ERR_UNSUPPORTED,
                             "tokenizer: pre-tokenizer '%.*s' is not supported (llama-bpe, qwen2, gpt-2, smollm, "
                             "tekken, default and their aliases)", (int)LLM__MIN(s.len, 64), s.ptr);
        v->pre = llm__pre_names[i].pre;
        v->ignore_merges = llm__pre_names[i].ignore_merges;
        v->add_bos = llm__pre_names[i].add_bos;
    }
    if (!llm__gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n, &data, e))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: a gpt2 vocabulary needs tokenizer.ggml.merges");
    if (et != 8 || n > (1u << 24))
        return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges must be a string array");
    v->merges = data;
    v->n_merges = (int)n;
    v->mht = llm__strtab_build(v->merges, v->n_merges, &v->mht_mask);
    if (!v->mht) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return LLM_OK;
}

// The file's add_bos / add_eos / add_space_prefix over the defaults of the tokenizer's kind; no
// BOS or EOS to add when the vocabulary has none.
static enum llm_status llm__vocab_load_flags(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    bool b = v->add_bos;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_bos_token", &b, e)) return LLM_ERR_FORMAT;
    v->add_bos = b;
    b = v->add_eos;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_eos_token", &b, e)) return LLM_ERR_FORMAT;
    v->add_eos = b;
    b = v->add_space_prefix;
    if (!llm__vocab_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, e)) return LLM_ERR_FORMAT;
    v->add_space_prefix = b;
    struct llm__gguf_str ps;
    if (llm__gguf_find_key(g, "tokenizer.ggml.prepend_scheme") >= 0) {
        if (!llm__gguf_get_str(g, "tokenizer.ggml.prepend_scheme", &ps, e)) return LLM_ERR_FORMAT;
        v->prepend = llm__str_is(&ps, "always") ? 1 : llm__str_is(&ps, "first") ? 2 : 0;
        if (!v->prepend) return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.prepend_scheme is neither always nor first");
    }
    if (v->add_bos && v->bos < 0) v->add_bos = false;
    if (v->add_eos && v->eos < 0) v->add_eos = false;
    return LLM_OK;
}

static bool llm__vocab_is_special(const struct llm__vocab *v, int i) {
    uint8_t a = v->attr[i];
    return (a == LLM__TOK_CONTROL || a == LLM__TOK_USER || a == LLM__TOK_UNKNOWN) && v->text[i].len > 0;
}

// End of generation: EOS, EOT, EOM and the end-of-turn texts; those texts and the fill-in-the-
// middle markers are control tokens in GGUF files, as llama.cpp has them (in a Hugging Face
// directory, `exact`, the types its tokenizer.json gave: an end-of-turn text that is an
// ordinary token there stays one, as in the tokenizers library). Then
// the list of special tokens (control, user-defined, unknown), longest text first (ties: lower id
// first), which tokenization matches in that order.
static enum llm_status llm__vocab_mark_special(struct llm__vocab *v, int32_t eot, int32_t eom, bool exact, struct llm__err *e) {
    if (v->eos >= 0) v->eog[v->eos] = 1;
    if (eot >= 0) v->eog[eot] = 1;
    if (eom >= 0) v->eog[eom] = 1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__eog_texts); i++) {
        int32_t id = llm__vocab_find(v, llm__eog_texts[i], strlen(llm__eog_texts[i]));
        if (id >= 0 && (!exact || v->attr[id] == LLM__TOK_CONTROL)) { v->eog[id] = 1; v->attr[id] = LLM__TOK_CONTROL; }
    }
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__control_texts) && !exact; i++) {
        int32_t id = llm__vocab_find(v, llm__control_texts[i], strlen(llm__control_texts[i]));
        if (id >= 0) v->attr[id] = LLM__TOK_CONTROL;
    }
    for (int i = 0; i < v->n; i++) v->n_special += llm__vocab_is_special(v, i);
    // sorted by (longer text first, lower id first): keys of (~length, id)
    uint64_t *keys = malloc((size_t)LLM__MAX(v->n_special, 1) * sizeof(uint64_t));
    v->special = malloc((size_t)LLM__MAX(v->n_special, 1) * sizeof(int32_t));
    if (!keys || !v->special) { free(keys); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    v->n_special = 0;
    for (int i = 0; i < v->n; i++)
        if (llm__vocab_is_special(v, i))
            keys[v->n_special++] = (uint64_t)(UINT32_MAX - (uint32_t)LLM__MIN(v->text[i].len, UINT32_MAX)) << 32 | (uint32_t)i;
    qsort(keys, (size_t)v->n_special, sizeof(uint64_t), llm__u64_cmp);
    for (int i = 0; i < v->n_special; i++) v->special[i] = (int32_t)(uint32_t)keys[i];
    free(keys);
    return LLM_OK;
}

// llama.cpp strips the whitespace after the special tokens of models whose general.name has
// "phi-3" or "phi3" in it (case-insensitive), as Phi-3's tokenizer does: all special tokens and
// </s>, but not <unk>, <s> and <|endoftext|>.
static enum llm_status llm__vocab_rstrip(struct llm__vocab *v, const struct llm__gguf *g, struct llm__err *e) {
    struct llm__gguf_str name;
    if (g->version == 0) {   // a Hugging Face directory: tokenizer.json's rstrip flags (tokenizer.ggml.rstrip_ids)
        uint32_t et;
        uint64_t n;
        const void *data;
        if (llm__gguf_find_key(g, "tokenizer.ggml.rstrip_ids") < 0) return LLM_OK;
        if (!llm__gguf_get_arr(g, "tokenizer.ggml.rstrip_ids", &et, &n, &data, e) || et != LLM__GGUF_I32)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: tokenizer.ggml.rstrip_ids must be an i32 array");
        if (!(v->rstrip = calloc((size_t)v->n, 1))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < n; i++) {
            int32_t id;
            memcpy(&id, (const char *)data + 4 * i, 4);
            if (id >= 0 && id < v->n) v->rstrip[id] = 1;
        }
        return LLM_OK;
    }
    if (llm__gguf_find_key(g, "general.name") < 0 || !llm__gguf_get_str(g, "general.name", &name, NULL)) return LLM_OK;
    char *low = malloc(name.len + 1);
    if (!low) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < name.len; i++) low[i] = (char)tolower((unsigned char)name.ptr[i]);
    bool phi3 = llm__memmem(low, name.len, "phi-3", 5) || llm__memmem(low, name.len, "phi3", 4);
    free(low);
    if (!phi3) return LLM_OK;
    if (!(v->rstrip = calloc((size_t)v->n, 1))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < v->n_special; i++) v->rstrip[v->special[i]] = 1;
    static const char *const on[] = {"</s>"}, *const off[] = {"<unk>", "<s>", "<|endoftext|>"};
    int32_t id = llm__vocab_find(v, on[0], strlen(on[0]));
    if (id >= 0) v->rstrip[id] = 1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(off); i++)
        if ((id = llm__vocab_find(v, off[i], strlen(off[i]))) >= 0) v->rstrip[id] = 0;
    return LLM_OK;
}

// How bytes become tokens: SentencePiece's <0xXX> byte tokens; GPT-2's byte-to-code-point map
// (the 188 printable bytes to themselves, the other 68 to U+0100 onwards) and its inverse.
static void llm__vocab_byte_tokens(struct llm__vocab *v) {
    if (v->type == LLM__VOCAB_SPM) {
        for (int i = 0; i < 256; i++) {
            char buf[8];
            snprintf(buf, sizeof(buf), "<0x%02X>", i);
            v->byte_tok[i] = llm__vocab_find(v, buf, 6);
        }
        return;
    }
    for (size_t i = 0; i < LLM__ARRAY_LEN(v->bpe_byte); i++) v->bpe_byte[i] = -1;
    int next = 256;
    for (int c = 0; c < 256; c++) {
        bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174);
        int cp = printable ? c : next++;
        v->bpe_byte[cp] = (int16_t)c;
        if (cp < 0x80) { v->bpe_enc[c][0] = (char)cp; v->bpe_enc_len[c] = 1; }
        else {
            v->bpe_enc[c][0] = (char)(0xC0 | (cp >> 6));
            v->bpe_enc[c][1] = (char)(0x80 | (cp & 0x3F));
            v->bpe_enc_len[c] = 2;
        }
    }
}

// Whether a text of n bytes can be known to need more than some number of tokens without
// tokenizing it: when every byte of any text ends up in a token, a token stands for at most as many
// bytes as its text has (SentencePiece writes a space as the 3 bytes of U+2581, byte-level BPE a byte
// as 1 or 2 bytes), so the text needs at least n / max_token_bytes tokens. Every byte ends up in a
// token when SentencePiece has a byte token for each byte or an unknown token (what no piece
// covers falls back to those), and when byte-level BPE has the token of each byte's code point and
// every merge makes a token (else a symbol that is no token falls back to single bytes, and those
// without a token are dropped, as llama.cpp drops them). Sets v->max_token_bytes, 0 otherwise.
static void llm__vocab_token_bound(struct llm__vocab *v) {
    v->max_token_bytes = 0;
    bool covered = true;
    if (v->type == LLM__VOCAB_SPM) {
        for (int b = 0; b < 256 && v->unk < 0; b++) covered &= v->byte_tok[b] >= 0;
    } else {
        for (int b = 0; b < 256 && covered; b++) covered = llm__vocab_find(v, v->bpe_enc[b], v->bpe_enc_len[b]) >= 0;
        size_t longest = 0;
        for (int i = 0; i < v->n_merges; i++) longest = LLM__MAX(longest, (size_t)v->merges[i].len);
        char *buf = covered ? malloc(longest + 1) : NULL;
        covered = buf != NULL;
        for (int i = 0; i < v->n_merges && covered; i++) {
            // "left right" with one space (the merger could cut one with more at any of them), and
            // left + right a token
            const struct llm__gguf_str *m = &v->merges[i];
            const char *sp = memchr(m->ptr, ' ', (size_t)m->len);
            size_t at = sp ? (size_t)(sp - m->ptr) : 0;
            covered = sp && !memchr(sp + 1, ' ', (size_t)m->len - at - 1);
            if (!covered) break;
            memcpy(buf, m->ptr, at);
            memcpy(buf + at, sp + 1, (size_t)m->len - at - 1);
            covered = llm__vocab_find(v, buf, (size_t)m->len - 1) >= 0;
        }
        free(buf);
    }
    if (!covered) return;
    for (int i = 0; i < v->n; i++) v->max_token_bytes = LLM__MAX(v->max_token_bytes, (size_t)v->text[i].len);
}

// A SentencePiece vocabulary encodes what no piece covers byte by byte: <0xNN> tokens, else the
// unknown token. One with neither for some byte could not tokenize text holding that byte (the
// id would be -1, an embedding row before the table). llama.cpp loads such a vocabulary and
// fails when such text comes (an exception out of its tokenizer); it is refused here, at load,
// with the byte named. Real SentencePiece models always have an unknown token.
static enum llm_status llm__vocab_check_bytes(const struct llm__vocab *v, struct llm__err *e) {
    if (v->type != LLM__VOCAB_SPM || v->unk >= 0) return LLM_OK;
    for (int b = 0; b < 256; b++)
        if (v->byte_tok[b] < 0)
            return llm__fail(e, LLM_ERR_FORMAT, "tokenizer: the SentencePiece vocabulary cannot encode byte 0x%02X: "
                             "it has no <0x%02X> token and no unknown token (tokenizer.ggml.unknown_token_id is "
                             "missing or out of range)", b, b);
    return LLM_OK;
}

// The vocabulary of a GGUF file (n_vocab_model > 0: it must have that many tokens): tokens,
// special ids, the tokenizer's settings, special tokens, byte tokens, the chat template.
static enum llm_status llm__vocab_load(struct llm__vocab *v, const struct llm__gguf *g, int n_vocab_model,
                                       struct llm__err *e) {
    enum llm_status st;
    memset(v, 0, sizeof(*v));
    v->bos = v->eos = v->unk = -1;
    if ((st = llm__vocab_load_tokens(v, g, n_vocab_model, e))) return st;
    bool bad = false;
    llm__gguf_opt_id(g, "tokenizer.ggml.bos_token_id", &v->bos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eos_token_id", &v->eos, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.unknown_token_id", &v->unk, v->n, e, &bad);
    int32_t eot = -1, eom = -1;
    llm__gguf_opt_id(g, "tokenizer.ggml.eot_token_id", &eot, v->n, e, &bad);
    llm__gguf_opt_id(g, "tokenizer.ggml.eom_token_id", &eom, v->n, e, &bad);
    if (bad) return LLM_ERR_FORMAT;
    if (v->type == LLM__VOCAB_SPM) {
        v->add_bos = true;
        v->add_space_prefix = true;
    } else if ((st = llm__vocab_load_bpe(v, g, e))) {
        return st;
    }
    if ((st = llm__vocab_load_flags(v, g, e))) return st;
    v->exact = g->version == 0;
    if ((st = llm__vocab_mark_special(v, eot, eom, v->exact, e))) return st;
    if ((st = llm__vocab_rstrip(v, g, e))) return st;
    llm__vocab_byte_tokens(v);
    llm__vocab_token_bound(v);
    if ((st = llm__vocab_check_bytes(v, e))) return st;
    llm__chat_template_recognise(v, g);
    return LLM_OK;
}

// --- Unicode: what the pre-tokenizers need to know of a code point ---

// 1789 ranges: start << 2 | class (0 other, 1 letter, 2 number, 3 punctuation); generated by
// tools/gen_unicode.py from the Unicode Character Database 15.0 + CJK Extension I (15.1).
static const uint32_t llm__ucd_ranges[1789] = {
  0x0, 0x87, 0x90, 0x97, 0xac, 0xb3, 0xc2, 0xeb, 0xf0, 0xff, 0x105, 0x16f, 0x178, 0x17f, 0x180, 0x185, 0x1ef,
  0x1f0, 0x1f7, 0x1f8, 0x287, 0x288, 0x29f, 0x2a0, 0x2a9, 0x2af, 0x2b0, 0x2ca, 0x2d0, 0x2d5, 0x2db, 0x2e0,
  0x2e6, 0x2e9, 0x2ef, 0x2f2, 0x2ff, 0x301, 0x35c, 0x361, 0x3dc, 0x3e1, 0xb08, 0xb19, 0xb48, 0xb81, 0xb94,
  0xbb1, 0xbb4, 0xbb9, 0xbbc, 0xdc1, 0xdd4, 0xdd9, 0xde0, 0xde9, 0xdfb, 0xdfd, 0xe00, 0xe19, 0xe1f, 0xe21,
  0xe2c, 0xe31, 0xe34, 0xe39, 0xe88, 0xe8d, 0xfd8, 0xfdd, 0x1208, 0x1229, 0x14c0, 0x14c5, 0x155c, 0x1565,
  0x156b, 0x1581, 0x1627, 0x162c, 0x16fb, 0x16fc, 0x1703, 0x1704, 0x170f, 0x1710, 0x171b, 0x171c, 0x1741,
  0x17ac, 0x17bd, 0x17cf, 0x17d4, 0x1827, 0x182c, 0x1833, 0x1838, 0x186f, 0x1870, 0x1877, 0x1881, 0x192c,
  0x1982, 0x19ab, 0x19b9, 0x19c0, 0x19c5, 0x1b53, 0x1b55, 0x1b58, 0x1b95, 0x1b9c, 0x1bb9, 0x1bc2, 0x1be9,
  0x1bf4, 0x1bfd, 0x1c03, 0x1c38, 0x1c41, 0x1c44, 0x1c49, 0x1cc0, 0x1d35, 0x1e98, 0x1ec5, 0x1ec8, 0x1f02,
  0x1f29, 0x1fac, 0x1fd1, 0x1fd8, 0x1fdf, 0x1fe9, 0x1fec, 0x2001, 0x2058, 0x2069, 0x206c, 0x2091, 0x2094,
  0x20a1, 0x20a4, 0x20c3, 0x20fc, 0x2101, 0x2164, 0x217b, 0x217c, 0x2181, 0x21ac, 0x21c1, 0x2220, 0x2225,
  0x223c, 0x2281, 0x2328, 0x2411, 0x24e8, 0x24f5, 0x24f8, 0x2541, 0x2544, 0x2561, 0x2588, 0x2593, 0x259a,
  0x25c3, 0x25c5, 0x2604, 0x2615, 0x2634, 0x263d, 0x2644, 0x264d, 0x26a4, 0x26a9, 0x26c4, 0x26c9, 0x26cc,
  0x26d9, 0x26e8, 0x26f5, 0x26f8, 0x2739, 0x273c, 0x2771, 0x2778, 0x277d, 0x2788, 0x279a, 0x27c1, 0x27c8,
  0x27d2, 0x27e8, 0x27f1, 0x27f7, 0x27f8, 0x2815, 0x282c, 0x283d, 0x2844, 0x284d, 0x28a4, 0x28a9, 0x28c4,
  0x28c9, 0x28d0, 0x28d5, 0x28dc, 0x28e1, 0x28e8, 0x2965, 0x2974, 0x2979, 0x297c, 0x299a, 0x29c0, 0x29c9,
  0x29d4, 0x29db, 0x29dc, 0x2a15, 0x2a38, 0x2a3d, 0x2a48, 0x2a4d, 0x2aa4, 0x2aa9, 0x2ac4, 0x2ac9, 0x2ad0,
  0x2ad5, 0x2ae8, 0x2af5, 0x2af8, 0x2b41, 0x2b44, 0x2b81, 0x2b88, 0x2b9a, 0x2bc3, 0x2bc4, 0x2be5, 0x2be8,
  0x2c15, 0x2c34, 0x2c3d, 0x2c44, 0x2c4d, 0x2ca4, 0x2ca9, 0x2cc4, 0x2cc9, 0x2cd0, 0x2cd5, 0x2ce8, 0x2cf5,
  0x2cf8, 0x2d71, 0x2d78, 0x2d7d, 0x2d88, 0x2d9a, 0x2dc0, 0x2dc5, 0x2dca, 0x2de0, 0x2e0d, 0x2e10, 0x2e15,
  0x2e2c, 0x2e39, 0x2e44, 0x2e49, 0x2e58, 0x2e65, 0x2e6c, 0x2e71, 0x2e74, 0x2e79, 0x2e80, 0x2e8d, 0x2e94,
  0x2ea1, 0x2eac, 0x2eb9, 0x2ee8, 0x2f41, 0x2f44, 0x2f9a, 0x2fcc, 0x3015, 0x3034, 0x3039, 0x3044, 0x3049,
  0x30a4, 0x30a9, 0x30e8, 0x30f5, 0x30f8, 0x3161, 0x316c, 0x3175, 0x3178, 0x3181, 0x3188, 0x319a, 0x31c0,
  0x31df, 0x31e2, 0x31fc, 0x3201, 0x3204, 0x3213, 0x3215, 0x3234, 0x3239, 0x3244, 0x3249, 0x32a4, 0x32a9,
  0x32d0, 0x32d5, 0x32e8, 0x32f5, 0x32f8, 0x3375, 0x337c, 0x3381, 0x3388, 0x339a, 0x33c0, 0x33c5, 0x33cc,
  0x3411, 0x3434, 0x3439, 0x3444, 0x3449, 0x34ec, 0x34f5, 0x34f8, 0x3539, 0x353c, 0x3551, 0x355c, 0x3562,
  0x357d, 0x3588, 0x359a, 0x35e4, 0x35e9, 0x3600, 0x3615, 0x365c, 0x3669, 0x36c8, 0x36cd, 0x36f0, 0x36f5,
  0x36f8, 0x3701, 0x371c, 0x379a, 0x37c0, 0x37d3, 0x37d4, 0x3805, 0x38c4, 0x38c9, 0x38d0, 0x3901, 0x391c,
  0x393f, 0x3942, 0x396b, 0x3970, 0x3a05, 0x3a0c, 0x3a11, 0x3a14, 0x3a19, 0x3a2c, 0x3a31, 0x3a90, 0x3a95,
  0x3a98, 0x3a9d, 0x3ac4, 0x3ac9, 0x3ad0, 0x3af5, 0x3af8, 0x3b01, 0x3b14, 0x3b19, 0x3b1c, 0x3b42, 0x3b68,
  0x3b71, 0x3b80, 0x3c01, 0x3c04, 0x3c13, 0x3c4c, 0x3c53, 0x3c54, 0x3c82, 0x3cd0, 0x3ceb, 0x3cf8, 0x3d01,
  0x3d20, 0x3d25, 0x3db4, 0x3e17, 0x3e18, 0x3e21, 0x3e34, 0x3f43, 0x3f54, 0x3f67, 0x3f6c, 0x4001, 0x40ac,
  0x40fd, 0x4102, 0x412b, 0x4141, 0x4158, 0x4169, 0x4178, 0x4185, 0x4188, 0x4195, 0x419c, 0x41b9, 0x41c4,
  0x41d5, 0x4208, 0x4239, 0x423c, 0x4242, 0x4268, 0x4281, 0x4318, 0x431d, 0x4320, 0x4335, 0x4338, 0x4341,
  0x43ef, 0x43f1, 0x4924, 0x4929, 0x4938, 0x4941, 0x495c, 0x4961, 0x4964, 0x4969, 0x4978, 0x4981, 0x4a24,
  0x4a29, 0x4a38, 0x4a41, 0x4ac4, 0x4ac9, 0x4ad8, 0x4ae1, 0x4afc, 0x4b01, 0x4b04, 0x4b09, 0x4b18, 0x4b21,
  0x4b5c, 0x4b61, 0x4c44, 0x4c49, 0x4c58, 0x4c61, 0x4d6c, 0x4d83, 0x4da6, 0x4df4, 0x4e01, 0x4e40, 0x4e81,
  0x4fd8, 0x4fe1, 0x4ff8, 0x5003, 0x5005, 0x59b4, 0x59bb, 0x59bd, 0x5a00, 0x5a05, 0x5a6f, 0x5a74, 0x5a81,
  0x5baf, 0x5bba, 0x5bc5, 0x5be4, 0x5c01, 0x5c48, 0x5c7d, 0x5cc8, 0x5cd7, 0x5cdc, 0x5d01, 0x5d48, 0x5d81,
  0x5db4, 0x5db9, 0x5dc4, 0x5e01, 0x5ed0, 0x5f53, 0x5f5d, 0x5f63, 0x5f6c, 0x5f71, 0x5f74, 0x5f82, 0x5fa8,
  0x5fc2, 0x5fe8, 0x6003, 0x602c, 0x6042, 0x6068, 0x6081, 0x61e4, 0x6201, 0x6214, 0x621d, 0x62a4, 0x62a9,
  0x62ac, 0x62c1, 0x63d8, 0x6401, 0x647c, 0x6513, 0x651a, 0x6541, 0x65b8, 0x65c1, 0x65d4, 0x6601, 0x66b0,
  0x66c1, 0x6728, 0x6742, 0x676c, 0x6801, 0x685c, 0x687b, 0x6881, 0x6954, 0x6a02, 0x6a28, 0x6a42, 0x6a68,
  0x6a83, 0x6a9d, 0x6aa3, 0x6ab8, 0x6c15, 0x6cd0, 0x6d15, 0x6d34, 0x6d42, 0x6d6b, 0x6d84, 0x6df7, 0x6dfc,
  0x6e0d, 0x6e84, 0x6eb9, 0x6ec2, 0x6ee9, 0x6f98, 0x6ff3, 0x7001, 0x7090, 0x70ef, 0x7102, 0x7128, 0x7135,
  0x7142, 0x7169, 0x71fb, 0x7201, 0x7224, 0x7241, 0x72ec, 0x72f5, 0x7303, 0x7320, 0x734f, 0x7350, 0x73a5,
  0x73b4, 0x73b9, 0x73d0, 0x73d5, 0x73dc, 0x73e9, 0x73ec, 0x7401, 0x7700, 0x7801, 0x7c58, 0x7c61, 0x7c78,
  0x7c81, 0x7d18, 0x7d21, 0x7d38, 0x7d41, 0x7d60, 0x7d65, 0x7d68, 0x7d6d, 0x7d70, 0x7d75, 0x7d78, 0x7d7d,
  0x7df8, 0x7e01, 0x7ed4, 0x7ed9, 0x7ef4, 0x7ef9, 0x7efc, 0x7f09, 0x7f14, 0x7f19, 0x7f34, 0x7f41, 0x7f50,
  0x7f59, 0x7f70, 0x7f81, 0x7fb4, 0x7fc9, 0x7fd4, 0x7fd9, 0x7ff4, 0x8043, 0x80a0, 0x80c3, 0x8110, 0x8117,
  0x8148, 0x814f, 0x817c, 0x81c2, 0x81c5, 0x81c8, 0x81d2, 0x81e8, 0x81f7, 0x81fd, 0x8202, 0x8228, 0x8237,
  0x823c, 0x8241, 0x8274, 0x8409, 0x840c, 0x841d, 0x8420, 0x8429, 0x8450, 0x8455, 0x8458, 0x8465, 0x8478,
  0x8491, 0x8494, 0x8499, 0x849c, 0x84a1, 0x84a4, 0x84a9, 0x84b8, 0x84bd, 0x84e8, 0x84f1, 0x8500, 0x8515,
  0x8528, 0x8539, 0x853c, 0x8542, 0x860d, 0x8616, 0x8628, 0x8c23, 0x8c30, 0x8ca7, 0x8cac, 0x9182, 0x9270,
  0x93aa, 0x9400, 0x9da3, 0x9dda, 0x9e50, 0x9f17, 0x9f1c, 0x9f9b, 0x9fc0, 0xa60f, 0xa664, 0xa763, 0xa770,
  0xa7f3, 0xa7f8, 0xb001, 0xb394, 0xb3ad, 0xb3bc, 0xb3c9, 0xb3d0, 0xb3e7, 0xb3f6, 0xb3fb, 0xb401, 0xb498,
  0xb49d, 0xb4a0, 0xb4b5, 0xb4b8, 0xb4c1, 0xb5a0, 0xb5bd, 0xb5c3, 0xb5c4, 0xb601, 0xb65c, 0xb681, 0xb69c,
  0xb6a1, 0xb6bc, 0xb6c1, 0xb6dc, 0xb6e1, 0xb6fc, 0xb701, 0xb71c, 0xb721, 0xb73c, 0xb741, 0xb75c, 0xb761,
  0xb77c, 0xb803, 0xb8bd, 0xb8c3, 0xb940, 0xb94b, 0xb978, 0xc007, 0xc010, 0xc015, 0xc01e, 0xc023, 0xc048,
  0xc053, 0xc080, 0xc086, 0xc0a8, 0xc0c3, 0xc0c5, 0xc0d8, 0xc0e2, 0xc0ed, 0xc0f7, 0xc0f8, 0xc105, 0xc25c,
  0xc275, 0xc283, 0xc285, 0xc3ef, 0xc3f1, 0xc400, 0xc415, 0xc4c0, 0xc4c5, 0xc63c, 0xc64a, 0xc658, 0xc681,
  0xc700, 0xc7c1, 0xc800, 0xc882, 0xc8a8, 0xc922, 0xc940, 0xc946, 0xc980, 0xca02, 0xca28, 0xcac6, 0xcb00,
  0xd001, 0x13700, 0x13801, 0x29234, 0x29341, 0x293fb, 0x29401, 0x29837, 0x29841, 0x29882, 0x298a9, 0x298b0,
  0x29901, 0x299bc, 0x299cf, 0x299d0, 0x299fb, 0x299fd, 0x29a78, 0x29a81, 0x29b9a, 0x29bc0, 0x29bcb, 0x29be0,
  0x29c5d, 0x29c80, 0x29c89, 0x29e24, 0x29e2d, 0x29f2c, 0x29f41, 0x29f48, 0x29f4d, 0x29f50, 0x29f55, 0x29f68,
  0x29fc9, 0x2a008, 0x2a00d, 0x2a018, 0x2a01d, 0x2a02c, 0x2a031, 0x2a08c, 0x2a0c2, 0x2a0d8, 0x2a101, 0x2a1d3,
  0x2a1e0, 0x2a209, 0x2a2d0, 0x2a33b, 0x2a342, 0x2a368, 0x2a3c9, 0x2a3e3, 0x2a3ed, 0x2a3f3, 0x2a3f5, 0x2a3fc,
  0x2a402, 0x2a429, 0x2a498, 0x2a4bb, 0x2a4c1, 0x2a51c, 0x2a57f, 0x2a581, 0x2a5f4, 0x2a611, 0x2a6cc, 0x2a707,
  0x2a738, 0x2a73d, 0x2a742, 0x2a768, 0x2a77b, 0x2a781, 0x2a794, 0x2a799, 0x2a7c2, 0x2a7e9, 0x2a7fc, 0x2a801,
  0x2a8a4, 0x2a901, 0x2a90c, 0x2a911, 0x2a930, 0x2a942, 0x2a968, 0x2a973, 0x2a981, 0x2a9dc, 0x2a9e9, 0x2a9ec,
  0x2a9f9, 0x2aac0, 0x2aac5, 0x2aac8, 0x2aad5, 0x2aadc, 0x2aae5, 0x2aaf8, 0x2ab01, 0x2ab04, 0x2ab09, 0x2ab0c,
  0x2ab6d, 0x2ab7b, 0x2ab81, 0x2abac, 0x2abc3, 0x2abc9, 0x2abd4, 0x2ac05, 0x2ac1c, 0x2ac25, 0x2ac3c, 0x2ac45,
  0x2ac5c, 0x2ac81, 0x2ac9c, 0x2aca1, 0x2acbc, 0x2acc1, 0x2ad6c, 0x2ad71, 0x2ada8, 0x2adc1, 0x2af8c, 0x2afaf,
  0x2afb0, 0x2afc2, 0x2afe8, 0x2b001, 0x35e90, 0x35ec1, 0x35f1c, 0x35f2d, 0x35ff0, 0x3e401, 0x3e9b8, 0x3e9c1,
  0x3eb68, 0x3ec01, 0x3ec1c, 0x3ec4d, 0x3ec60, 0x3ec75, 0x3ec78, 0x3ec7d, 0x3eca4, 0x3eca9, 0x3ecdc, 0x3ece1,
  0x3ecf4, 0x3ecf9, 0x3ecfc, 0x3ed01, 0x3ed08, 0x3ed0d, 0x3ed14, 0x3ed19, 0x3eec8, 0x3ef4d, 0x3f4fb, 0x3f500,
  0x3f541, 0x3f640, 0x3f649, 0x3f720, 0x3f7c1, 0x3f7f0, 0x3f843, 0x3f868, 0x3f8c3, 0x3f94c, 0x3f953, 0x3f988,
  0x3f98f, 0x3f990, 0x3f9a3, 0x3f9a4, 0x3f9ab, 0x3f9b0, 0x3f9c1, 0x3f9d4, 0x3f9d9, 0x3fbf4, 0x3fc07, 0x3fc10,
  0x3fc17, 0x3fc2c, 0x3fc33, 0x3fc42, 0x3fc6b, 0x3fc70, 0x3fc7f, 0x3fc85, 0x3fcef, 0x3fcf8, 0x3fcff, 0x3fd00,
  0x3fd05, 0x3fd6f, 0x3fd70, 0x3fd77, 0x3fd78, 0x3fd7f, 0x3fd99, 0x3fefc, 0x3ff09, 0x3ff20, 0x3ff29, 0x3ff40,
  0x3ff49, 0x3ff60, 0x3ff69, 0x3ff74, 0x40001, 0x40030, 0x40035, 0x4009c, 0x400a1, 0x400ec, 0x400f1, 0x400f8,
  0x400fd, 0x40138, 0x40141, 0x40178, 0x40201, 0x403ec, 0x40403, 0x4040c, 0x4041e, 0x404d0, 0x40502, 0x405e4,
  0x4062a, 0x40630, 0x40a01, 0x40a74, 0x40a81, 0x40b44, 0x40b86, 0x40bf0, 0x40c01, 0x40c82, 0x40c90, 0x40cb5,
  0x40d06, 0x40d09, 0x40d2a, 0x40d2c, 0x40d41, 0x40dd8, 0x40e01, 0x40e78, 0x40e7f, 0x40e81, 0x40f10, 0x40f21,
  0x40f43, 0x40f46, 0x40f58, 0x41001, 0x41278, 0x41282, 0x412a8, 0x412c1, 0x41350, 0x41361, 0x413f0, 0x41401,
  0x414a0, 0x414c1, 0x41590, 0x415bf, 0x415c1, 0x415ec, 0x415f1, 0x4162c, 0x41631, 0x4164c, 0x41651, 0x41658,
  0x4165d, 0x41688, 0x4168d, 0x416c8, 0x416cd, 0x416e8, 0x416ed, 0x416f4, 0x41801, 0x41cdc, 0x41d01, 0x41d58,
  0x41d81, 0x41da0, 0x41e01, 0x41e18, 0x41e1d, 0x41ec4, 0x41ec9, 0x41eec, 0x42001, 0x42018, 0x42021, 0x42024,
  0x42029, 0x420d8, 0x420dd, 0x420e4, 0x420f1, 0x420f4, 0x420fd, 0x42158, 0x4215f, 0x42162, 0x42181, 0x421dc,
  0x421e6, 0x42201, 0x4227c, 0x4229e, 0x422c0, 0x42381, 0x423cc, 0x423d1, 0x423d8, 0x423ee, 0x42401, 0x4245a,
  0x42470, 0x4247f, 0x42481, 0x424e8, 0x424ff, 0x42500, 0x42601, 0x426e0, 0x426f2, 0x426f9, 0x42702, 0x42740,
  0x4274a, 0x42801, 0x42804, 0x42841, 0x42850, 0x42855, 0x42860, 0x42865, 0x428d8, 0x42902, 0x42924, 0x42943,
  0x42964, 0x42981, 0x429f6, 0x429ff, 0x42a01, 0x42a76, 0x42a80, 0x42b01, 0x42b20, 0x42b25, 0x42b94, 0x42bae,
  0x42bc3, 0x42bdc, 0x42c01, 0x42cd8, 0x42ce7, 0x42d01, 0x42d58, 0x42d62, 0x42d81, 0x42dcc, 0x42de2, 0x42e01,
  0x42e48, 0x42e67, 0x42e74, 0x42ea6, 0x42ec0, 0x43001, 0x43124, 0x43201, 0x432cc, 0x43301, 0x433cc, 0x433ea,
  0x43401, 0x43490, 0x434c2, 0x434e8, 0x43982, 0x439fc, 0x43a01, 0x43aa8, 0x43ab7, 0x43ab8, 0x43ac1, 0x43ac8,
  0x43c01, 0x43c76, 0x43c9d, 0x43ca0, 0x43cc1, 0x43d18, 0x43d46, 0x43d57, 0x43d68, 0x43dc1, 0x43e08, 0x43e1b,
  0x43e28, 0x43ec1, 0x43f16, 0x43f30, 0x43f81, 0x43fdc, 0x4400d, 0x440e0, 0x4411f, 0x44138, 0x4414a, 0x441c0,
  0x441c5, 0x441cc, 0x441d5, 0x441d8, 0x4420d, 0x442c0, 0x442ef, 0x442f4, 0x442fb, 0x44308, 0x44341, 0x443a4,
  0x443c2, 0x443e8, 0x4440d, 0x4449c, 0x444da, 0x44503, 0x44511, 0x44514, 0x4451d, 0x44520, 0x44541, 0x445cc,
  0x445d3, 0x445d9, 0x445dc, 0x4460d, 0x446cc, 0x44705, 0x44717, 0x44724, 0x44737, 0x44738, 0x44742, 0x44769,
  0x4476f, 0x44771, 0x44777, 0x44780, 0x44786, 0x447d4, 0x44801, 0x44848, 0x4484d, 0x448b0, 0x448e3, 0x448f8,
  0x448fd, 0x44904, 0x44a01, 0x44a1c, 0x44a21, 0x44a24, 0x44a29, 0x44a38, 0x44a3d, 0x44a78, 0x44a7d, 0x44aa7,
  0x44aa8, 0x44ac1, 0x44b7c, 0x44bc2, 0x44be8, 0x44c15, 0x44c34, 0x44c3d, 0x44c44, 0x44c4d, 0x44ca4, 0x44ca9,
  0x44cc4, 0x44cc9, 0x44cd0, 0x44cd5, 0x44ce8, 0x44cf5, 0x44cf8, 0x44d41, 0x44d44, 0x44d75, 0x44d88, 0x45001,
  0x450d4, 0x4511d, 0x4512f, 0x45142, 0x4516b, 0x45170, 0x45177, 0x45178, 0x4517d, 0x45188, 0x45201, 0x452c0,
  0x45311, 0x4531b, 0x4531d, 0x45320, 0x45342, 0x45368, 0x45601, 0x456bc, 0x45707, 0x45761, 0x45770, 0x45801,
  0x458c0, 0x45907, 0x45911, 0x45914, 0x45942, 0x45968, 0x45983, 0x459b4, 0x45a01, 0x45aac, 0x45ae1, 0x45ae7,
  0x45ae8, 0x45b02, 0x45b28, 0x45c01, 0x45c6c, 0x45cc2, 0x45cf3, 0x45cfc, 0x45d01, 0x45d1c, 0x46001, 0x460b0,
  0x460ef, 0x460f0, 0x46281, 0x46382, 0x463cc, 0x463fd, 0x4641c, 0x46425, 0x46428, 0x46431, 0x46450, 0x46455,
  0x4645c, 0x46461, 0x464c0, 0x464fd, 0x46500, 0x46505, 0x46508, 0x46513, 0x4651c, 0x46542, 0x46568, 0x46681,
  0x466a0, 0x466a9, 0x46744, 0x46785, 0x4678b, 0x4678d, 0x46790, 0x46801, 0x46804, 0x4682d, 0x468cc, 0x468e9,
  0x468ec, 0x468ff, 0x4691c, 0x46941, 0x46944, 0x46971, 0x46a28, 0x46a6b, 0x46a75, 0x46a7b, 0x46a8c, 0x46ac1,
  0x46be4, 0x46c03, 0x46c28, 0x47001, 0x47024, 0x47029, 0x470bc, 0x47101, 0x47107, 0x47118, 0x47142, 0x471b4,
  0x471c3, 0x471c9, 0x47240, 0x47401, 0x4741c, 0x47421, 0x47428, 0x4742d, 0x474c4, 0x47519, 0x4751c, 0x47542,
  0x47568, 0x47581, 0x47598, 0x4759d, 0x475a4, 0x475a9, 0x47628, 0x47661, 0x47664, 0x47682, 0x476a8, 0x47b81,
  0x47bcc, 0x47bdf, 0x47be4, 0x47c09, 0x47c0c, 0x47c11, 0x47c44, 0x47c49, 0x47cd0, 0x47d0f, 0x47d42, 0x47d68,
  0x47ec1, 0x47ec4, 0x47f02, 0x47f54, 0x47fff, 0x48001, 0x48e68, 0x49002, 0x491bc, 0x491c3, 0x491d4, 0x49201,
  0x49510, 0x4be41, 0x4bfc7, 0x4bfcc, 0x4c001, 0x4d0c0, 0x4d105, 0x4d11c, 0x51001, 0x5191c, 0x5a001, 0x5a8e4,
  0x5a901, 0x5a97c, 0x5a982, 0x5a9a8, 0x5a9bb, 0x5a9c1, 0x5aafc, 0x5ab02, 0x5ab28, 0x5ab41, 0x5abb8, 0x5abd7,
  0x5abd8, 0x5ac01, 0x5acc0, 0x5acdf, 0x5acf0, 0x5ad01, 0x5ad13, 0x5ad14, 0x5ad42, 0x5ad68, 0x5ad6e, 0x5ad88,
  0x5ad8d, 0x5ade0, 0x5adf5, 0x5ae40, 0x5b901, 0x5ba02, 0x5ba5f, 0x5ba6c, 0x5bc01, 0x5bd2c, 0x5bd41, 0x5bd44,
  0x5be4d, 0x5be80, 0x5bf81, 0x5bf8b, 0x5bf8d, 0x5bf90, 0x5c001, 0x61fe0, 0x62001, 0x63358, 0x63401, 0x63424,
  0x6bfc1, 0x6bfd0, 0x6bfd5, 0x6bff0, 0x6bff5, 0x6bffc, 0x6c001, 0x6c48c, 0x6c4c9, 0x6c4cc, 0x6c541, 0x6c54c,
  0x6c555, 0x6c558, 0x6c591, 0x6c5a0, 0x6c5c1, 0x6cbf0, 0x6f001, 0x6f1ac, 0x6f1c1, 0x6f1f4, 0x6f201, 0x6f224,
  0x6f241, 0x6f268, 0x6f27f, 0x6f280, 0x74b02, 0x74b50, 0x74b82, 0x74bd0, 0x74d82, 0x74de4, 0x75001, 0x75154,
  0x75159, 0x75274, 0x75279, 0x75280, 0x75289, 0x7528c, 0x75295, 0x7529c, 0x752a5, 0x752b4, 0x752b9, 0x752e8,
  0x752ed, 0x752f0, 0x752f5, 0x75310, 0x75315, 0x75418, 0x7541d, 0x7542c, 0x75435, 0x75454, 0x75459, 0x75474,
  0x75479, 0x754e8, 0x754ed, 0x754fc, 0x75501, 0x75514, 0x75519, 0x7551c, 0x75529, 0x75544, 0x75549, 0x75a98,
  0x75aa1, 0x75b04, 0x75b09, 0x75b6c, 0x75b71, 0x75bec, 0x75bf1, 0x75c54, 0x75c59, 0x75cd4, 0x75cd9, 0x75d3c,
  0x75d41, 0x75dbc, 0x75dc1, 0x75e24, 0x75e29, 0x75ea4, 0x75ea9, 0x75f0c, 0x75f11, 0x75f30, 0x75f3a, 0x76000,
  0x76a1f, 0x76a30, 0x77c01, 0x77c7c, 0x77c95, 0x77cac, 0x780c1, 0x781b8, 0x78401, 0x784b4, 0x784dd, 0x784f8,
  0x78502, 0x78528, 0x78539, 0x7853c, 0x78a41, 0x78ab8, 0x78b01, 0x78bb0, 0x78bc2, 0x78be8, 0x79341, 0x793b0,
  0x793c2, 0x793e8, 0x79f81, 0x79f9c, 0x79fa1, 0x79fb0, 0x79fb5, 0x79fbc, 0x79fc1, 0x79ffc, 0x7a001, 0x7a314,
  0x7a31e, 0x7a340, 0x7a401, 0x7a510, 0x7a52d, 0x7a530, 0x7a542, 0x7a568, 0x7a57b, 0x7a580, 0x7b1c6, 0x7b2b0,
  0x7b2b6, 0x7b2c0, 0x7b2c6, 0x7b2d4, 0x7b406, 0x7b4b8, 0x7b4be, 0x7b4f8, 0x7b801, 0x7b810, 0x7b815, 0x7b880,
  0x7b885, 0x7b88c, 0x7b891, 0x7b894, 0x7b89d, 0x7b8a0, 0x7b8a5, 0x7b8cc, 0x7b8d1, 0x7b8e0, 0x7b8e5, 0x7b8e8,
  0x7b8ed, 0x7b8f0, 0x7b909, 0x7b90c, 0x7b91d, 0x7b920, 0x7b925, 0x7b928, 0x7b92d, 0x7b930, 0x7b935, 0x7b940,
  0x7b945, 0x7b94c, 0x7b951, 0x7b954, 0x7b95d, 0x7b960, 0x7b965, 0x7b968, 0x7b96d, 0x7b970, 0x7b975, 0x7b978,
  0x7b97d, 0x7b980, 0x7b985, 0x7b98c, 0x7b991, 0x7b994, 0x7b99d, 0x7b9ac, 0x7b9b1, 0x7b9cc, 0x7b9d1, 0x7b9e0,
  0x7b9e5, 0x7b9f4, 0x7b9f9, 0x7b9fc, 0x7ba01, 0x7ba28, 0x7ba2d, 0x7ba70, 0x7ba85, 0x7ba90, 0x7ba95, 0x7baa8,
  0x7baad, 0x7baf0, 0x7c402, 0x7c434, 0x7efc2, 0x7efe8, 0x80001, 0xa9b80, 0xa9c01, 0xadce8, 0xadd01, 0xae078,
  0xae081, 0xb3a88, 0xb3ac1, 0xbaf84, 0xbafc1, 0xbb978, 0xbe001, 0xbe878, 0xc0001, 0xc4d2c, 0xc4d41, 0xc8ec0,
};

enum { LLM__CP_LETTER = 1, LLM__CP_NUMBER = 2, LLM__CP_PUNCT = 4, LLM__CP_SPACE = 8, LLM__CP_ANY = 16 };

static int llm__cp_flags(uint32_t cp) {
    static const uint8_t cls_flag[4] = {0, LLM__CP_LETTER, LLM__CP_NUMBER, LLM__CP_PUNCT};
    int f = LLM__CP_ANY;
    if (cp < 0x110000) {
        size_t lo = 0, hi = LLM__ARRAY_LEN(llm__ucd_ranges);
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if ((llm__ucd_ranges[mid] >> 2) <= cp) lo = mid;
            else hi = mid;
        }
        f |= cls_flag[llm__ucd_ranges[lo] & 3];
    }
    // White_Space
    if ((cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
        f |= LLM__CP_SPACE;
    return f;
}

// Length of the UTF-8 sequence a lead byte starts, as llama.cpp counts it (a stray continuation
// byte counts as one).
static size_t llm__utf8_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

// Decodes one code point leniently, as llama.cpp does before pre-tokenizing: a byte that does
// not start a complete sequence becomes U+FFFD (one byte consumed); overlong forms and
// surrogates are taken as they come.
static uint32_t llm__utf8_next(const uint8_t *s, size_t n, size_t *off) {
    uint8_t c = s[*off];
    size_t len = c < 0x80 ? 1 : (c & 0x40) == 0 ? 0 : (c & 0x20) == 0 ? 2 : (c & 0x10) == 0 ? 3 : (c & 0x08) == 0 ? 4 : 0;
    if (len == 1) { (*off)++; return c; }
    if (len == 0 || *off + len > n) { (*off)++; return 0xFFFD; }
    uint32_t cp = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        uint8_t x = s[*off + i];
        if ((x & 0xC0) != 0x80) { (*off)++; return 0xFFFD; }
        cp = cp << 6 | (x & 0x3Fu);
    }
    *off += len;
    return cp;
}

static int llm__utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Length of the valid UTF-8 character at s (n bytes available): >0 valid, 0 incomplete but
// possibly valid if more bytes come, -1 invalid (one byte to replace). Strict: no overlong
// forms, surrogates or code points above U+10FFFF.
static int llm__utf8_char(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    int len;
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    else return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        if ((s[i] & 0xC0) != 0x80) return -1;
        if (i == 1) {   // overlong, surrogate and too-large forms show in the second byte
            if (c == 0xE0 && s[1] < 0xA0) return -1;
            if (c == 0xED && s[1] >= 0xA0) return -1;
            if (c == 0xF0 && s[1] < 0x90) return -1;
            if (c == 0xF4 && s[1] >= 0x90) return -1;
        }
    }
    return len;
}

// --- pre-tokenizers: split code points into words ---
//
// A split is a list of word lengths (in code points) over the text. Each stage refines every
// word of the previous one, as llama.cpp applies its list of regular expressions; the regular
// expressions of the supported pre-tokenizers are written out as scanners.

struct llm__split { size_t *len; size_t n, cap; bool oom; };

static void llm__split_push(struct llm__split *s, size_t len) {
    if (len == 0) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        size_t *p = realloc(s->len, cap * sizeof(size_t));
        if (!p) { s->oom = true; return; }
        s->len = p;
        s->cap = cap;
    }
    s->len[s->n++] = len;
}

struct llm__scan {
    const uint32_t *cp;
    size_t a, b, prev;   // the word [a, b) being split; end of the last piece
    struct llm__split *out;
};
#define LLM__OUT_OF_RANGE 0xFFFFFFFFu
static uint32_t llm__scan_cp(const struct llm__scan *s, size_t p) { return p >= s->a && p < s->b ? s->cp[p] : LLM__OUT_OF_RANGE; }
static int llm__scan_f(const struct llm__scan *s, size_t p) { return p >= s->a && p < s->b ? llm__cp_flags(s->cp[p]) : 0; }
static size_t llm__scan_piece(struct llm__scan *s, size_t end) {
    size_t len = end - s->prev;
    llm__split_push(s->out, len);
    s->prev = end;
    return len;
}
static uint32_t llm__ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when fold): the length of a match at pos, or 0.
static size_t llm__scan_contraction(const struct llm__scan *s, size_t pos, bool fold) {
    if (s->cp[pos] != '\'' || pos + 1 >= s->b) return 0;
    uint32_t c1 = s->cp[pos + 1];
    if (fold) c1 = llm__ascii_lower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= s->b) return 0;
    uint32_t c2 = s->cp[pos + 2];
    if (fold) c2 = llm__ascii_lower(c2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
static void llm__scan_gpt2(struct llm__scan *s) {
    const int LNS = LLM__CP_LETTER | LLM__CP_NUMBER | LLM__CP_SPACE;
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        size_t m = llm__scan_contraction(s, pos, false);
        if (m) { pos += llm__scan_piece(s, pos + m); continue; }
        int f2 = c == ' ' ? llm__scan_f(s, pos + 1) : llm__scan_f(s, pos);
        if (f2 & (LLM__CP_LETTER | LLM__CP_NUMBER)) {
            int cls = f2 & LLM__CP_LETTER ? LLM__CP_LETTER : LLM__CP_NUMBER;
            pos += c == ' ';
            while (f2 & cls) f2 = llm__scan_f(s, ++pos);
            llm__scan_piece(s, pos);
            continue;
        }
        if (!(f2 & LNS) && f2) {
            pos += c == ' ';
            while (!(f2 & LNS) && f2) f2 = llm__scan_f(s, ++pos);
            llm__scan_piece(s, pos);
            continue;
        }
        size_t nws = 0;
        while (llm__scan_f(s, pos + nws) & LLM__CP_SPACE) nws++;
        if (nws > 1 && llm__scan_cp(s, pos + nws) != LLM__OUT_OF_RANGE) { pos += nws - 1; llm__scan_piece(s, pos); continue; }
        if (nws > 0) { pos += nws; llm__scan_piece(s, pos); continue; }
        llm__scan_piece(s, ++pos);
    }
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
static void llm__scan_llama3(struct llm__scan *s, size_t max_digits) {
    const int LNS = LLM__CP_LETTER | LLM__CP_NUMBER | LLM__CP_SPACE;
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        int f = llm__scan_f(s, pos);
        size_t m = llm__scan_contraction(s, pos, true);
        if (m) { pos += llm__scan_piece(s, pos + m); continue; }
        if (!(c == '\r' || c == '\n' || (f & LLM__CP_NUMBER)) &&
            ((f & LLM__CP_LETTER) || (llm__scan_f(s, pos + 1) & LLM__CP_LETTER))) {
            pos++;
            while (llm__scan_f(s, pos) & LLM__CP_LETTER) pos++;
            llm__scan_piece(s, pos);
            continue;
        }
        if (f & LLM__CP_NUMBER) {
            size_t ini = pos;
            while (llm__scan_f(s, pos) & LLM__CP_NUMBER) {
                if (++pos - ini >= max_digits) { llm__scan_piece(s, pos); ini = pos; }
            }
            llm__scan_piece(s, pos);
            continue;
        }
        int f2 = c == ' ' ? llm__scan_f(s, pos + 1) : f;
        if (!(f2 & LNS) && f) {
            pos += c == ' ';
            while (!(f2 & LNS) && f2) f2 = llm__scan_f(s, ++pos);
            for (uint32_t c2 = llm__scan_cp(s, pos); c2 == '\r' || c2 == '\n'; c2 = llm__scan_cp(s, ++pos)) {}
            llm__scan_piece(s, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (llm__scan_f(s, pos + nws) & LLM__CP_SPACE) {
            uint32_t c2 = s->cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) { pos = last_rn; llm__scan_piece(s, pos); continue; }
        if (nws > 1 && llm__scan_cp(s, pos + nws) != LLM__OUT_OF_RANGE) { pos += nws - 1; llm__scan_piece(s, pos); continue; }
        if (nws > 0) { pos += nws; llm__scan_piece(s, pos); continue; }
        llm__scan_piece(s, ++pos);
    }
}

// Tekken (Mistral NeMo, Mistral Small 3), as llama.cpp writes its regular expression:
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|
// \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// llama.cpp runs it as a backtracking std::regex over the text with each non-ASCII code point
// replaced by one byte for its class, so an "upper" letter is any letter but a-z and a "lower"
// one any letter but A-Z: a non-ASCII letter is both.
static bool llm__tekken_upper(const struct llm__scan *s, size_t p) {
    return (llm__scan_f(s, p) & LLM__CP_LETTER) && !(s->cp[p] >= 'a' && s->cp[p] <= 'z');
}
static bool llm__tekken_lower(const struct llm__scan *s, size_t p) {
    return (llm__scan_f(s, p) & LLM__CP_LETTER) && !(s->cp[p] >= 'A' && s->cp[p] <= 'Z');
}
// The end of a match of upper* lower+ (lower_needed) or upper+ lower* at q; 0 when none. The
// greedy upper* gives letters back, last first, until a lower one follows.
static size_t llm__tekken_word(const struct llm__scan *s, size_t q, bool lower_needed) {
    size_t u = q;
    while (llm__tekken_upper(s, u)) u++;
    if (!lower_needed) {
        if (u == q) return 0;
        while (llm__tekken_lower(s, u)) u++;
        return u;
    }
    for (size_t k = u;; k--) {
        if (llm__tekken_lower(s, k)) {
            while (llm__tekken_lower(s, k)) k++;
            return k;
        }
        if (k == q) return 0;
    }
}
static void llm__scan_tekken(struct llm__scan *s) {
    const int LNS = LLM__CP_LETTER | LLM__CP_NUMBER | LLM__CP_SPACE;
    for (size_t pos = s->a; pos < s->b;) {
        uint32_t c = s->cp[pos];
        int f = llm__scan_f(s, pos);
        // the two word alternatives, each with the optional leading character first
        bool lead = c != '\r' && c != '\n' && !(f & (LLM__CP_LETTER | LLM__CP_NUMBER));
        size_t end = 0;
        for (int alt = 0; alt < 2 && !end; alt++) {
            if (lead) end = llm__tekken_word(s, pos + 1, alt == 0);
            if (!end) end = llm__tekken_word(s, pos, alt == 0);
        }
        if (end) { pos = end; llm__scan_piece(s, pos); continue; }
        if (f & LLM__CP_NUMBER) { llm__scan_piece(s, ++pos); continue; }
        int f2 = c == ' ' ? llm__scan_f(s, pos + 1) : f;
        if (!(f2 & LNS) && f) {
            pos += c == ' ';
            while (!(f2 & LNS) && f2) f2 = llm__scan_f(s, ++pos);
            for (uint32_t c2 = llm__scan_cp(s, pos); c2 == '\r' || c2 == '\n' || c2 == '/'; c2 = llm__scan_cp(s, ++pos)) {}
            llm__scan_piece(s, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (llm__scan_f(s, pos + nws) & LLM__CP_SPACE) {
            uint32_t c2 = s->cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) { pos = last_rn; llm__scan_piece(s, pos); continue; }
        if (nws > 1 && llm__scan_cp(s, pos + nws) != LLM__OUT_OF_RANGE) { pos += nws - 1; llm__scan_piece(s, pos); continue; }
        if (nws > 0) { pos += nws; llm__scan_piece(s, pos); continue; }
        llm__scan_piece(s, ++pos);
    }
}

// Runs of code points of a class, as a regular expression "[class]+" (run 0), "[class]" (run 1)
// or exactly run code points ("[0-9][0-9][0-9]") finds them: matches and the text between.
enum { LLM__RUN_PUNCT, LLM__RUN_NUMBER, LLM__RUN_ASCII_DIGIT };
static bool llm__run_class(uint32_t c, int cls) {
    switch (cls) {
    case LLM__RUN_PUNCT: return (llm__cp_flags(c) & LLM__CP_PUNCT) || (c < 0x80 && strchr("$+<=>^~|", (int)c) && c);
    case LLM__RUN_NUMBER: return (llm__cp_flags(c) & LLM__CP_NUMBER) != 0;
    default: return c >= '0' && c <= '9';
    }
}
static void llm__scan_runs(struct llm__scan *s, int cls, size_t run) {
    for (size_t pos = s->a; pos < s->b;) {
        if (!llm__run_class(s->cp[pos], cls)) { pos++; continue; }
        size_t end = pos;
        while (end < s->b && llm__run_class(s->cp[end], cls)) end++;
        size_t k = end - pos;
        if (run == 0) { llm__scan_piece(s, pos); llm__scan_piece(s, end); }
        else if (k >= run) {
            llm__scan_piece(s, pos);
            for (size_t i = 0; i + run <= k; i += run) llm__scan_piece(s, pos + i + run);
        }
        pos = end;
    }
    llm__scan_piece(s, s->b);
}

enum { LLM__STAGE_GPT2, LLM__STAGE_LLAMA3, LLM__STAGE_QWEN2, LLM__STAGE_PUNCT_RUNS, LLM__STAGE_NUMBER_RUNS,
       LLM__STAGE_NUMBER_EACH, LLM__STAGE_DIGIT3, LLM__STAGE_TEKKEN };

// Applies one stage to every word of in.
static bool llm__split_stage(const uint32_t *cp, const struct llm__split *in, int stage, struct llm__split *out) {
    size_t start = 0;
    out->n = 0;
    for (size_t w = 0; w < in->n; w++) {
        struct llm__scan s = {cp, start, start + in->len[w], start, out};
        switch (stage) {
        case LLM__STAGE_GPT2: llm__scan_gpt2(&s); break;
        case LLM__STAGE_LLAMA3: llm__scan_llama3(&s, 3); break;
        case LLM__STAGE_QWEN2: llm__scan_llama3(&s, 1); break;
        case LLM__STAGE_PUNCT_RUNS: llm__scan_runs(&s, LLM__RUN_PUNCT, 0); break;
        case LLM__STAGE_NUMBER_RUNS: llm__scan_runs(&s, LLM__RUN_NUMBER, 0); break;
        case LLM__STAGE_NUMBER_EACH: llm__scan_runs(&s, LLM__RUN_NUMBER, 1); break;
        case LLM__STAGE_TEKKEN: llm__scan_tekken(&s); break;
        default: llm__scan_runs(&s, LLM__RUN_ASCII_DIGIT, 3); break;
        }
        start += in->len[w];
    }
    return !out->oom;
}

// --- merging adjacent symbols (SentencePiece by score, BPE by rank) ---

struct llm__sym { int prev, next; const char *text; int n; };
struct llm__bigram { int left, right; double score; int size; };

static bool llm__bigram_before(const struct llm__bigram *a, const struct llm__bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct llm__merger {
    const struct llm__vocab *v;
    struct llm__sym *sym;
    struct llm__bigram *heap;
    int n_heap;
    char *key;   // BPE: "left right"
};

static void llm__merger_push(struct llm__merger *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const struct llm__sym *l = &s->sym[left], *r = &s->sym[right];
    int n = l->n + r->n;
    double score;
    if (s->v->type == LLM__VOCAB_SPM) {
        int32_t id = llm__vocab_find(s->v, l->text, (size_t)n);
        if (id < 0 || (s->v->exact && s->v->scores[id] == -INFINITY)) return;
        score = s->v->scores[id];
    } else {
        memcpy(s->key, l->text, (size_t)l->n);
        s->key[l->n] = ' ';
        memcpy(s->key + l->n + 1, r->text, (size_t)r->n);
        int32_t rank = llm__strtab_find(s->v->mht, s->v->mht_mask, s->v->merges, s->key, (size_t)n + 1);
        if (rank < 0) return;
        score = -(double)rank;   // the lowest rank merges first
    }
    struct llm__bigram b = {left, right, score, n};
    int i = s->n_heap++;
    while (i > 0 && llm__bigram_before(&b, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = b;
}

static struct llm__bigram llm__merger_pop(struct llm__merger *s) {
    struct llm__bigram top = s->heap[0], last = s->heap[--s->n_heap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->n_heap) break;
        if (c + 1 < s->n_heap && llm__bigram_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!llm__bigram_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n_heap > 0) s->heap[i] = last;
    return top;
}

// Token ids appended through a bounded writer that still counts what did not fit.
struct llm__tokbuf { int32_t *ids; int cap, n; };
static void llm__tokbuf_push(struct llm__tokbuf *b, int32_t id) {
    if (b->n < b->cap) b->ids[b->n] = id;
    if (b->n < INT_MAX) b->n++;
}

// Encodes one piece of text: SentencePiece-escaped text, or one byte-encoded BPE word.
static bool llm__merge_encode(const struct llm__vocab *v, const char *text, size_t len, struct llm__tokbuf *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX / 4) return false;
    if (v->type == LLM__VOCAB_BPE && v->ignore_merges) {
        int32_t id = llm__vocab_find(v, text, len);
        if (id >= 0) { llm__tokbuf_push(out, id); return true; }
    }
    struct llm__merger s = {v, malloc(len * sizeof(struct llm__sym)), malloc(3 * len * sizeof(struct llm__bigram)), 0,
                            v->type == LLM__VOCAB_BPE ? malloc(len + 2) : NULL};
    if (!s.sym || !s.heap || (v->type == LLM__VOCAB_BPE && !s.key)) { free(s.sym); free(s.heap); free(s.key); return false; }
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = LLM__MIN(llm__utf8_len((uint8_t)text[off]), len - off);
        s.sym[n] = (struct llm__sym){n - 1, off + l == len ? -1 : n + 1, text + off, (int)l};
        off += l;
    }
    for (int i = 1; i < n; i++) llm__merger_push(&s, i - 1, i);
    while (s.n_heap > 0) {
        struct llm__bigram b = llm__merger_pop(&s);
        struct llm__sym *l = &s.sym[b.left], *r = &s.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;   // stale
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        llm__merger_push(&s, l->prev, b.left);
        llm__merger_push(&s, b.left, l->next);
    }
    for (int i = 0; i != -1; i = s.sym[i].next) {
        int32_t id = llm__vocab_find(v, s.sym[i].text, (size_t)s.sym[i].n);
        if (id >= 0) { llm__tokbuf_push(out, id); continue; }
        for (int j = 0; j < s.sym[i].n; j++) {
            if (v->type == LLM__VOCAB_SPM) {
                int32_t bt = v->byte_tok[(uint8_t)s.sym[i].text[j]];
                llm__tokbuf_push(out, bt >= 0 ? bt : v->unk);
            } else {   // single bytes that are tokens; llama.cpp drops the others
                int32_t bt = llm__vocab_find(v, s.sym[i].text + j, 1);
                if (bt >= 0) llm__tokbuf_push(out, bt);
            }
        }
    }
    free(s.sym);
    free(s.heap);
    free(s.key);
    return true;
}

// Byte-level BPE over one fragment of text (no special tokens in it).
static bool llm__bpe_encode(const struct llm__vocab *v, const char *text, size_t len, struct llm__tokbuf *out) {
    if (len == 0) return true;
    uint32_t *cp = malloc(len * sizeof(uint32_t));
    char *word = malloc(8 * len + 8);   // a code point re-encoded: <= 4 bytes, each byte -> <= 2
    struct llm__split a = {0}, b = {0};
    bool ok = cp && word;
    size_t n = 0;
    for (size_t off = 0; ok && off < len;) cp[n++] = llm__utf8_next((const uint8_t *)text, len, &off);
    static const int stages[][4] = {
        [LLM__PRE_DEFAULT] = {LLM__STAGE_PUNCT_RUNS, LLM__STAGE_GPT2, LLM__STAGE_NUMBER_RUNS, LLM__STAGE_DIGIT3},
        [LLM__PRE_GPT2] = {LLM__STAGE_GPT2, -1, -1, -1},
        [LLM__PRE_LLAMA3] = {LLM__STAGE_LLAMA3, -1, -1, -1},
        [LLM__PRE_QWEN2] = {LLM__STAGE_QWEN2, -1, -1, -1},
        [LLM__PRE_SMOLLM] = {LLM__STAGE_NUMBER_EACH, LLM__STAGE_GPT2, -1, -1},
        [LLM__PRE_TEKKEN] = {LLM__STAGE_TEKKEN, -1, -1, -1},
    };
    if (ok) llm__split_push(&a, n);
    ok = ok && !a.oom;
    for (int i = 0; ok && i < 4 && stages[v->pre][i] >= 0; i++) {
        ok = llm__split_stage(cp, &a, stages[v->pre][i], &b);
        struct llm__split t = a;
        a = b;
        b = t;
    }
    size_t start = 0;
    for (size_t w = 0; ok && w < a.n; w++) {
        size_t m = 0;
        for (size_t i = start; i < start + a.len[w]; i++) {
            char u[4];
            int k = llm__utf8_put(cp[i], u);
            for (int j = 0; j < k; j++) {
                uint8_t byte = (uint8_t)u[j];
                memcpy(word + m, v->bpe_enc[byte], v->bpe_enc_len[byte]);
                m += v->bpe_enc_len[byte];
            }
        }
        ok = llm__merge_encode(v, word, m, out);
        start += a.len[w];
    }
    free(cp);
    free(word);
    free(a.len);
    free(b.len);
    return ok;
}

// SentencePiece over one fragment: optional leading space, every ' ' becomes U+2581.
static bool llm__spm_encode(const struct llm__vocab *v, const char *text, size_t len, bool space_prefix,
                            struct llm__tokbuf *out) {
    size_t n = 0;
    char *esc = malloc(3 * len + 3);
    if (!esc) return false;
    if (space_prefix) { memcpy(esc, "\xe2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(esc + n, "\xe2\x96\x81", 3); n += 3; }
        else esc[n++] = text[i];
    }
    bool ok = llm__merge_encode(v, esc, n, out);
    free(esc);
    return ok;
}

// A piece of the text: raw bytes [off, off + len), or a special token when tok >= 0.
struct llm__frag { int32_t tok; size_t off, len; };

static int llm__frag_cmp(const void *a, const void *b) {
    size_t x = ((const struct llm__frag *)a)->off, y = ((const struct llm__frag *)b)->off;
    return (x > y) - (x < y);
}

// Cuts special tokens out of the text as llama.cpp does: token by token, longest text first
// (control and unknown tokens only when parse_special), each taking its leftmost non-overlapping
// occurrences in what the earlier ones left. The bytes taken are marked in taken[len] instead of
// splitting a list of fragments, which moved the whole list on every cut (quadratic in the
// occurrences): the work is one scan of the text per special token that occurs in it. An
// occurrence [p, p + L) is free when neither taken[p] nor taken[p + L - 1] is set: the earlier
// tokens are at least L bytes long, so one overlapping it without covering an end would lie
// strictly inside it. A token with v->rstrip takes the whitespace after it too (up to the next
// taken byte); such runs are shorter than later tokens, so then every byte of an occurrence is
// checked. Returns the fragments in text order (count in *n_frag), or NULL when out of memory.
static struct llm__frag *llm__special_split(const struct llm__vocab *v, const char *text, size_t len, bool parse_special,
                                            size_t *n_frag) {
    uint8_t *taken = NULL;
    struct llm__frag *hit = NULL, *f = NULL;   // the tokens found; then the fragments
    size_t n_hit = 0, cap_hit = 0;
    for (int k = 0; k < v->n_special; k++) {
        int32_t id = v->special[k];
        if (!parse_special && v->attr[id] != LLM__TOK_USER) continue;
        const char *s = v->text[id].ptr;
        size_t L = (size_t)v->text[id].len;   // >= 1 (llm__vocab_is_special)
        const char *at = llm__memmem(text, len, s, L);
        if (!at) continue;
        if (!taken && !(taken = calloc(len, 1))) goto oom;
        for (size_t p = (size_t)(at - text), next;; p = (size_t)(at - text)) {
            bool busy = taken[p] || taken[p + L - 1];
            for (size_t i = 1; v->rstrip && !busy && i + 1 < L; i++) busy = taken[p + i];
            if (busy) {
                // no occurrence starting before the end of this taken run is free
                next = taken[p + L - 1] ? p + L - 1 : taken[p] ? p : p + 1;
                while (next < len && taken[next]) next++;
            } else {
                if (n_hit == cap_hit) {
                    cap_hit = cap_hit ? 2 * cap_hit : 16;
                    struct llm__frag *g = realloc(hit, cap_hit * sizeof(*g));
                    if (!g) goto oom;
                    hit = g;
                }
                size_t end = p + L;   // the token and the whitespace it strips
                while (v->rstrip && v->rstrip[id] && end < len && !taken[end] && strchr(" \t\n\v\f\r", text[end]) && text[end])
                    end++;
                hit[n_hit++] = (struct llm__frag){id, p, end - p};
                memset(taken + p, 1, end - p);
                next = end;
            }
            if (next >= len || !(at = llm__memmem(text + next, len - next, s, L))) break;
        }
    }
    if (n_hit) qsort(hit, n_hit, sizeof(*hit), llm__frag_cmp);
    // the tokens with the raw bytes between them: at most 2 n_hit + 1 fragments
    if (!(f = malloc((2 * n_hit + 1) * sizeof(*f)))) goto oom;
    size_t n = 0, pos = 0;
    for (size_t i = 0; i < n_hit; i++) {
        if (hit[i].off > pos) f[n++] = (struct llm__frag){-1, pos, hit[i].off - pos};
        f[n++] = hit[i];
        pos = hit[i].off + hit[i].len;
    }
    if (pos < len || n == 0) f[n++] = (struct llm__frag){-1, pos, len - pos};
    free(taken);
    free(hit);
    *n_frag = n;
    return f;
oom:
    free(taken);
    free(hit);
    return NULL;
}

// Returns the number of tokens, or -1 (message in e).
static int llm__tokenize(const struct llm__vocab *v, const char *text, size_t len, int flags, int32_t *ids, int cap,
                         struct llm__err *e) {
    struct llm__tokbuf out = {ids, cap, 0};
    bool add_special = flags & LLM_TOKENIZE_ADD_SPECIAL;
    if (add_special && v->add_bos) llm__tokbuf_push(&out, v->bos);
    size_t n_frag = 0;
    struct llm__frag *frag = len ? llm__special_split(v, text, len, flags & LLM_TOKENIZE_PARSE_SPECIAL, &n_frag) : NULL;
    if (len && !frag) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
    bool prev_special = true, ok = true;
    for (size_t i = 0; ok && i < n_frag; i++) {
        if (frag[i].tok >= 0) {
            llm__tokbuf_push(&out, frag[i].tok);
            prev_special = true;
        } else if (v->type == LLM__VOCAB_SPM) {
            const bool space = frag[i].len > 0 && text[frag[i].off] == ' ';
            const bool prefix = v->prepend == 0 ? prev_special : v->prepend == 1 ? !space : frag[i].off == 0 && !space;
            ok = llm__spm_encode(v, text + frag[i].off, frag[i].len, v->add_space_prefix && prefix, &out);
            prev_special = false;
        } else {
            ok = llm__bpe_encode(v, text + frag[i].off, frag[i].len, &out);
        }
    }
    free(frag);
    if (!ok) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return -1; }
    if (add_special && v->add_eos) llm__tokbuf_push(&out, v->eos);
    if (out.n == INT_MAX) { llm__fail(e, LLM_ERR_INVALID_ARG, "tokenize: the text is too long"); return -1; }
    return out.n;
}

// --- detokenization ---

// Bytes of a token: special (control, unknown) tokens' text only when special. Returns the
// full length; writes at most size.
static int llm__token_piece(const struct llm__vocab *v, int32_t id, bool special, char *buf, size_t size) {
    if (id < 0 || id >= v->n) return -1;
    const struct llm__gguf_str *t = &v->text[id];
    size_t n = 0;
#define LLM__PUT(c) do { if (n < size) buf[n] = (char)(c); n++; } while (0)
    switch (v->attr[id]) {
    case LLM__TOK_CONTROL:
    case LLM__TOK_UNKNOWN:
        if (special) for (size_t i = 0; i < t->len; i++) LLM__PUT(t->ptr[i]);
        break;
    case LLM__TOK_USER:
        for (size_t i = 0; i < t->len; i++) LLM__PUT(t->ptr[i]);
        break;
    case LLM__TOK_UNUSED:
        break;
    case LLM__TOK_BYTE:
        if (v->type == LLM__VOCAB_SPM) {
            unsigned b;
            char hex[3] = {t->len == 6 ? t->ptr[3] : 0, t->len == 6 ? t->ptr[4] : 0, 0};
            if (sscanf(hex, "%2x", &b) == 1) LLM__PUT(b);
            break;
        }
        /* fallthrough */
    default:
        if (v->type == LLM__VOCAB_SPM) {
            for (size_t i = 0; i < t->len; i++) {
                if (i + 2 < t->len && memcmp(t->ptr + i, "\xe2\x96\x81", 3) == 0) { LLM__PUT(' '); i += 2; }
                else LLM__PUT(t->ptr[i]);
            }
        } else {
            // each code point of the text stands for one byte
            for (size_t off = 0; off < t->len;) {
                size_t at = off;
                uint32_t cp = llm__utf8_next((const uint8_t *)t->ptr, t->len, &off);
                if (cp < LLM__ARRAY_LEN(v->bpe_byte) && v->bpe_byte[cp] >= 0)
                    LLM__PUT(v->bpe_byte[cp]);
                else
                    for (size_t k = at; k < off; k++) LLM__PUT(t->ptr[k]);
            }
        }
        break;
    }
#undef LLM__PUT
    return (int)LLM__MIN(n, (size_t)INT_MAX);
}

// Whether the first text of a detokenization loses its leading space: SentencePiece adds one.
static bool llm__piece_drop_space(const struct llm__vocab *v, int32_t id) {
    return v->type == LLM__VOCAB_SPM && v->add_space_prefix && v->attr[id] != LLM__TOK_CONTROL &&
           v->attr[id] != LLM__TOK_UNKNOWN && v->attr[id] != LLM__TOK_USER;
}

// Streams pieces as whole characters: valid UTF-8 goes out once complete, anything else as U+FFFD.
static void llm__stream_feed(struct llm_text_stream *u, const char *s, size_t n, struct llm__outbuf *out, bool flush) {
    for (size_t i = 0; i < n || u->n_pending > 0;) {
        while (u->n_pending < 4 && i < n) u->pending[u->n_pending++] = (unsigned char)s[i++];
        if (u->n_pending == 0) break;
        int l = llm__utf8_char(u->pending, (size_t)u->n_pending);
        if (l == 0 && i == n && !flush) break;   // wait for the rest of the character
        if (l <= 0) { llm__outbuf_put(out, "\xEF\xBF\xBD", 3); l = 1; }
        else llm__outbuf_put(out, u->pending, (size_t)l);
        memmove(u->pending, u->pending + l, (size_t)(u->n_pending - l));
        u->n_pending -= l;
    }
}

// llm.h's truncation rule, for every function that hands out text: what fits of o into buf
// (NUL-terminated when size > 0), and the whole length; -1 when memory ran out. Frees o.
static int llm__outbuf_emit(struct llm__outbuf *o, char *buf, size_t size) {
    bool ok = !o->fail && o->n < INT_MAX;
    if (ok && size) {
        size_t k = LLM__MIN(o->n, size - 1);
        if (k) memcpy(buf, o->p, k);
        buf[k] = 0;
    }
    free(o->p);
    return ok ? (int)o->n : -1;
}

// A token's bytes appended to o (special tokens' text only when special); false: out of memory.
static bool llm__piece_put(const struct llm__vocab *v, int32_t id, bool special, bool *first, struct llm__outbuf *o,
                           struct llm_text_stream *stream) {
    char small[64];
    int k = llm__token_piece(v, id, special, small, sizeof(small));
    char *piece = small;
    if (k > (int)sizeof(small)) {
        if (!(piece = malloc((size_t)k))) return false;
        llm__token_piece(v, id, special, piece, (size_t)k);
    }
    int skip = 0;   // the first text loses SentencePiece's space
    if (k > 0 && *first) {
        *first = false;
        skip = llm__piece_drop_space(v, id) && piece[0] == ' ';
    }
    if (stream) llm__stream_feed(stream, piece + skip, (size_t)(k - skip), o, false);
    else llm__outbuf_put(o, piece + skip, (size_t)(k - skip));
    if (piece != small) free(piece);
    return true;
}

// The text of ids appended to o; false when an id is out of range (o->fail: out of memory).
static bool llm__detokenize(const struct llm__vocab *v, const int32_t *ids, int n, int flags, struct llm__outbuf *o) {
    bool first = true;
    if ((flags & LLM_DETOKENIZE_SKIP_BOS) && n > 0 && v->bos >= 0 && ids[0] == v->bos) { ids++; n--; }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n) return false;
        if (!llm__piece_put(v, ids[i], flags & LLM_DETOKENIZE_SPECIAL, &first, o, NULL)) o->fail = true;
    }
    return true;
}

// One token into a text stream: the whole characters it completes are appended to o. An id out
// of range adds nothing. st->n_tokens counts the tokens from the first one with text: that one
// loses SentencePiece's space, as in llm__detokenize (a BOS before it has no text).
static void llm__stream_push(const struct llm__vocab *v, struct llm_text_stream *st, int32_t id, int flags,
                             struct llm__outbuf *o) {
    if (id < 0 || id >= v->n) return;
    bool first = st->n_tokens == 0;
    if (!llm__piece_put(v, id, flags & LLM_DETOKENIZE_SPECIAL, &first, o, st)) o->fail = true;
    if (!first) st->n_tokens++;
}

// --- chat templates ---
//
// The prompt formats of common model families, chosen by recognising the file's Jinja
// tokenizer.chat_template (not run: the formats are written out here).
//   chatml   <|im_start|>ROLE\nCONTENT<|im_end|>\n ...            then <|im_start|>assistant\n
//   llama3   <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//   llama2   [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s><s>[INST] USER [/INST]
//   mistral  [INST] SYSTEM\n\nUSER [/INST]ANSWER</s>[INST] USER [/INST]
//   zephyr   <|ROLE|>\nCONTENT</s>\n ...                            then <|assistant|>\n
//   gemma    <start_of_turn>user\nSYSTEM\n\nUSER<end_of_turn>\n<start_of_turn>model\nANSWER<end_of_turn>\n ...
//            then <start_of_turn>model\n (Gemma 2 and 3: no system turn, the system prompt opens
//            the first user turn; "assistant" is "model"; contents trimmed)
//   phi3     <|ROLE|>\nCONTENT<|end|>\n ...                          then <|assistant|>\n
//   qwen3    ChatML, and an answer before the last user message loses its reasoning
//            (<think>...</think>); one after it keeps it as <think>\nREASONING\n</think>\n\n
//            (Qwen3's template); "tool" messages become <tool_response> blocks of a user turn
// BOS is left to the tokenizer (LLM_TOKENIZE_ADD_SPECIAL).

static const char *const llm__chat_names[] = {"chatml", "llama3", "llama2", "mistral", "zephyr", "gemma", "phi3", "qwen3"};
enum { LLM__CHAT_CHATML, LLM__CHAT_LLAMA3, LLM__CHAT_LLAMA2, LLM__CHAT_MISTRAL, LLM__CHAT_ZEPHYR, LLM__CHAT_GEMMA,
       LLM__CHAT_PHI3, LLM__CHAT_QWEN3 };

// The format a Jinja chat template stands for, by the markers it writes; NULL when unknown.
static const char *llm__chat_template_name(const struct llm__gguf_str *t) {
    // Qwen3's template splits answers at </think> (Qwen2's has no reasoning)
    if (llm__str_has(t, "<|im_start|>")) return llm__str_has(t, "</think>") ? "qwen3" : "chatml";
    if (llm__str_has(t, "<start_of_turn>")) return "gemma";
    if (llm__str_has(t, "<|assistant|>") && llm__str_has(t, "<|end|>")) return "phi3";
    if (llm__str_has(t, "<|start_header_id|>") && llm__str_has(t, "<|end_header_id|>")) return "llama3";
    if (llm__str_has(t, "[INST]")) return llm__str_has(t, "<<SYS>>") ? "llama2" : "mistral";
    if (llm__str_has(t, "<|user|>") && llm__str_has(t, "<|assistant|>") && !llm__str_has(t, "<|end|>")) return "zephyr";
    return NULL;
}

static void llm__chat_template_recognise(struct llm__vocab *v, const struct llm__gguf *g) {
    struct llm__gguf_str t;
    struct llm__err e = {{0}, LLM_OK};
    v->chat_template[0] = 0;
    if (llm__gguf_find_key(g, "tokenizer.chat_template") < 0 || !llm__gguf_get_str(g, "tokenizer.chat_template", &t, &e))
        return;
    const char *name = llm__chat_template_name(&t);
    if (name) snprintf(v->chat_template, sizeof(v->chat_template), "%s", name);
}

static void llm__outbuf_str(struct llm__outbuf *o, const char *s) { llm__outbuf_put(o, s, strlen(s)); }

// Content without leading and trailing white space (Llama 2 and 3 strip messages).
static void llm__outbuf_trimmed(struct llm__outbuf *o, const char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    llm__outbuf_put(o, s, n);
}

// s[0..n) without the newlines at its start (lstrip) and/or end (rstrip), as Jinja's
// lstrip('\n') / rstrip('\n') / strip('\n').
static void llm__strip_nl(const char **s, size_t *n, bool left, bool right) {
    while (left && *n && **s == '\n') (*s)++, (*n)--;
    while (right && *n && (*s)[*n - 1] == '\n') (*n)--;
}

static const char *llm__strstr_last(const char *s, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

// One message of Qwen3's template; last_query: the index of the last user message that is not a
// tool's response (before it, answers drop their reasoning).
static void llm__chat_qwen3(struct llm__outbuf *o, const struct llm_chat_message *msg, int n, int i, int last_query) {
    const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
    if (!strcmp(role, "user") || !strcmp(role, "system")) {
        llm__outbuf_str(o, "<|im_start|>");
        llm__outbuf_str(o, role);
        llm__outbuf_str(o, "\n");
        llm__outbuf_str(o, c);
        llm__outbuf_str(o, "<|im_end|>\n");
    } else if (!strcmp(role, "assistant")) {
        // content: after the last </think>, its leading newlines dropped; reasoning: before the
        // first </think>, after the last <think> there, newlines stripped around it
        const char *content = c, *reason = "", *end = strstr(c, "</think>");
        size_t n_content = strlen(c), n_reason = 0;
        if (end) {
            content = llm__strstr_last(c, "</think>") + 8;
            n_content = strlen(content);
            llm__strip_nl(&content, &n_content, true, false);
            reason = c;
            n_reason = (size_t)(end - c);
            for (const char *p = c; (p = llm__memmem(p, (size_t)(end - p), "<think>", 7)) != NULL; p += 7)
                reason = p + 7, n_reason = (size_t)(end - reason);
            llm__strip_nl(&reason, &n_reason, true, true);
        }
        llm__outbuf_str(o, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || n_reason > 0)) {
            llm__outbuf_str(o, "<think>\n");
            llm__outbuf_put(o, reason, n_reason);
            llm__outbuf_str(o, "\n</think>\n\n");
            llm__strip_nl(&content, &n_content, true, false);
        }
        llm__outbuf_put(o, content, n_content);
        llm__outbuf_str(o, "<|im_end|>\n");
    } else if (!strcmp(role, "tool")) {
        bool first = i == 0 || !msg[i - 1].role || strcmp(msg[i - 1].role, "tool") != 0;
        bool last = i == n - 1 || !msg[i + 1].role || strcmp(msg[i + 1].role, "tool") != 0;
        if (first) llm__outbuf_str(o, "<|im_start|>user");
        llm__outbuf_str(o, "\n<tool_response>\n");
        llm__outbuf_str(o, c);
        llm__outbuf_str(o, "\n</tool_response>");
        if (last) llm__outbuf_str(o, "<|im_end|>\n");
    }
}

static bool llm__has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool llm__has_suffix(const char *s, const char *x) {
    size_t n = strlen(s), k = strlen(x);
    return n >= k && memcmp(s + n - k, x, k) == 0;
}

static int llm__chat_apply(const char *name, const struct llm_chat_message *msg, int n, bool add_assistant,
                           struct llm__outbuf *o) {
    int t = -1;
    for (int i = 0; i < (int)LLM__ARRAY_LEN(llm__chat_names); i++)
        if (name && strcmp(name, llm__chat_names[i]) == 0) t = i;
    if (t < 0) return -1;
    bool in_turn = false;   // llama2/mistral: inside an open [INST] ... [/INST]
    int last_query = n - 1;   // qwen3
    for (int i = n - 1; t == LLM__CHAT_QWEN3 && i >= 0; i--) {
        const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
        if (!strcmp(role, "user") && !(llm__has_prefix(c, "<tool_response>") && llm__has_suffix(c, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    struct llm__outbuf sys_prefix = {0};   // gemma: system prompts waiting for the next user turn
    for (int i = 0; i < n; i++) {
        const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
        bool sys = strcmp(role, "system") == 0, user = strcmp(role, "user") == 0;
        switch (t) {
        case LLM__CHAT_GEMMA:
            if (sys) {
                llm__outbuf_str(&sys_prefix, c);
                break;
            }
            if (strcmp(role, "assistant") == 0) role = "model";
            llm__outbuf_str(o, "<start_of_turn>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "\n");
            if (sys_prefix.n && strcmp(role, "model") != 0) {
                llm__outbuf_put(o, sys_prefix.p, sys_prefix.n);
                llm__outbuf_str(o, "\n\n");
                sys_prefix.n = 0;
            }
            llm__outbuf_trimmed(o, c);
            llm__outbuf_str(o, "<end_of_turn>\n");
            break;
        case LLM__CHAT_PHI3:
            if (sys && !*c) break;   // Phi-3's template leaves an empty system message out
            llm__outbuf_str(o, "<|");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "|>\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "<|end|>\n");
            break;
        case LLM__CHAT_QWEN3:
            llm__chat_qwen3(o, msg, n, i, last_query);
            break;
        case LLM__CHAT_CHATML:
            llm__outbuf_str(o, "<|im_start|>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "<|im_end|>\n");
            break;
        case LLM__CHAT_LLAMA3:
            llm__outbuf_str(o, "<|start_header_id|>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "<|end_header_id|>\n\n");
            llm__outbuf_trimmed(o, c);
            llm__outbuf_str(o, "<|eot_id|>");
            break;
        case LLM__CHAT_LLAMA2:
        case LLM__CHAT_MISTRAL:
            if (!in_turn && (sys || user)) {
                llm__outbuf_str(o, i == 0 ? "[INST] " : t == 2 ? "<s>[INST] " : "[INST] ");
                in_turn = true;
            }
            if (sys) {
                if (t == 2) { llm__outbuf_str(o, "<<SYS>>\n"); llm__outbuf_trimmed(o, c); llm__outbuf_str(o, "\n<</SYS>>\n\n"); }
                else { llm__outbuf_str(o, c); llm__outbuf_str(o, "\n\n"); }
            } else if (user) {
                if (t == 2) llm__outbuf_trimmed(o, c);
                else llm__outbuf_str(o, c);
                llm__outbuf_str(o, " [/INST]");
                in_turn = false;
            } else {
                if (t == 2) { llm__outbuf_str(o, " "); llm__outbuf_trimmed(o, c); llm__outbuf_str(o, " </s>"); }
                else { llm__outbuf_str(o, c); llm__outbuf_str(o, "</s>"); }
            }
            break;
        default:   // zephyr
            llm__outbuf_str(o, "<|");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "|>\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "</s>\n");
            break;
        }
    }
    if (add_assistant) {
        if (t == 0) llm__outbuf_str(o, "<|im_start|>assistant\n");
        else if (t == 1) llm__outbuf_str(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        else if (t == LLM__CHAT_ZEPHYR || t == LLM__CHAT_PHI3) llm__outbuf_str(o, "<|assistant|>\n");
        else if (t == LLM__CHAT_GEMMA) llm__outbuf_str(o, "<start_of_turn>model\n");
        else if (t == LLM__CHAT_QWEN3) llm__outbuf_str(o, "<|im_start|>assistant\n");
    }
    bool fail = sys_prefix.fail;
    free(sys_prefix.p);
    return o->fail || fail ? -2 : 0;
}

// === quantizing model files ===
// llm_quantize (llm quantize): a model's matrices to a llama-quantize file type, written as GGUF
// the way llama-quantize writes it, so that where the quantizers agree the files agree byte for
// byte:
// - the tensors in llama.cpp's loader order: those outside the blocks first, then block by block
//   (blk.N. numerically), by name within each;
// - the metadata: the input's keys in their order, less general.quantization_version,
//   general.file_type and split.*, then those two appended (quantization version 2, the ftype);
// - each tensor's data padded with zeros to the alignment; 1-D tensors, norms and the tensors
//   whose type does not change copied as they are;
// - the types: llama_tensor_get_type's rules for the file types offered here (the output
//   projection, or a tied embedding, at q6_K or q8_0; attn_v and ffn_down of some layers at more
//   bits in the _M/_L mixes; rows a K-quant's 256 does not divide at the fallback type).

enum {   // llama.cpp's llama_ftype values (general.file_type)
    LLM__FT_F32 = 0, LLM__FT_F16 = 1, LLM__FT_Q4_0 = 2, LLM__FT_Q4_1 = 3, LLM__FT_Q8_0 = 7,
    LLM__FT_Q5_0 = 8, LLM__FT_Q5_1 = 9, LLM__FT_Q2_K = 10, LLM__FT_Q3_K_S = 11, LLM__FT_Q3_K_M = 12,
    LLM__FT_Q3_K_L = 13, LLM__FT_Q4_K_S = 14, LLM__FT_Q4_K_M = 15, LLM__FT_Q5_K_S = 16,
    LLM__FT_Q5_K_M = 17, LLM__FT_Q6_K = 18, LLM__FT_IQ4_NL = 25, LLM__FT_IQ4_XS = 30, LLM__FT_BF16 = 32,
};

static const struct llm__ftype { const char *name; int ftype, type; } llm__ftypes[] = {
    {"q4_0", LLM__FT_Q4_0, LLM__TYPE_Q4_0},       {"q4_1", LLM__FT_Q4_1, LLM__TYPE_Q4_1},
    {"q5_0", LLM__FT_Q5_0, LLM__TYPE_Q5_0},       {"q5_1", LLM__FT_Q5_1, LLM__TYPE_Q5_1},
    {"q8_0", LLM__FT_Q8_0, LLM__TYPE_Q8_0},       {"iq4_nl", LLM__FT_IQ4_NL, LLM__TYPE_IQ4_NL},
    {"iq4_xs", LLM__FT_IQ4_XS, LLM__TYPE_IQ4_XS}, {"q2_K", LLM__FT_Q2_K, LLM__TYPE_Q2_K},
    {"q3_K_S", LLM__FT_Q3_K_S, LLM__TYPE_Q3_K},   {"q3_K_M", LLM__FT_Q3_K_M, LLM__TYPE_Q3_K},
    {"q3_K", LLM__FT_Q3_K_M, LLM__TYPE_Q3_K},     {"q3_K_L", LLM__FT_Q3_K_L, LLM__TYPE_Q3_K},
    {"q4_K_S", LLM__FT_Q4_K_S, LLM__TYPE_Q4_K},   {"q4_K_M", LLM__FT_Q4_K_M, LLM__TYPE_Q4_K},
    {"q4_K", LLM__FT_Q4_K_M, LLM__TYPE_Q4_K},     {"q5_K_S", LLM__FT_Q5_K_S, LLM__TYPE_Q5_K},
    {"q5_K_M", LLM__FT_Q5_K_M, LLM__TYPE_Q5_K},   {"q5_K", LLM__FT_Q5_K_M, LLM__TYPE_Q5_K},
    {"q6_K", LLM__FT_Q6_K, LLM__TYPE_Q6_K},       {"f16", LLM__FT_F16, LLM__TYPE_F16},
    {"bf16", LLM__FT_BF16, LLM__TYPE_BF16},       {"f32", LLM__FT_F32, LLM__TYPE_F32},
};

static const struct llm__ftype *llm__ftype_by_name(const char *name) {
    for (size_t i = 0; name && i < LLM__ARRAY_LEN(llm__ftypes); i++) {
        const char *a = llm__ftypes[i].name, *b = name;
        while (*a && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return &llm__ftypes[i];
    }
    return NULL;
}

// ggml_n_dims: the dimensions up to the last one above 1 (at least 1).
static int llm__tensor_dims(const struct llm__gguf_tensor *t) {
    for (int i = 3; i >= 1; i--)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

// What llama-quantize may quantize: matrices named *weight, but not norms, position or token-type
// embeddings, a MoE router, or Gemma 3n's small side tables.
static bool llm__qmix_allows(const struct llm__gguf_tensor *t) {
    static const char *const never[] = {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj"};
    const size_t n = strlen(t->name);
    if (llm__tensor_dims(t) < 2 || n < 6 || strcmp(t->name + n - 6, "weight") != 0) return false;
    for (size_t i = 0; i < LLM__ARRAY_LEN(never); i++)
        if (strstr(t->name, never[i])) return false;
    return strcmp(t->name, "position_embd.weight") != 0 && strcmp(t->name, "token_types.weight") != 0;
}

// The state of llama-quantize's type choice across a file's tensors (taken in file order).
struct llm__qmix {
    int ftype, type;          // the file type and its base tensor type
    bool pure, tied;          // tied: no output.weight (the embedding is the output projection)
    bool is_70b;              // llama.cpp's LLM_TYPE_70B: 80 layers of llama (with GQA) or qwen2
    int n_layer, n_gqa, n_attn_v, i_attn_v, i_ffn_down, n_fallback;
};

// The hyper-parameters of g that the mixes look at, into q.
static enum llm_status llm__qmix_init(const struct llm__gguf *g, struct llm__qmix *q, struct llm__err *e) {
    char arch[64] = "", key[128];
    const int64_t ak = llm__gguf_find_key(g, "general.architecture");
    if (ak >= 0 && g->kv[ak].type == LLM__GGUF_STR && g->kv[ak].v.str.len < sizeof(arch))
        memcpy(arch, g->kv[ak].v.str.ptr, (size_t)g->kv[ak].v.str.len), arch[g->kv[ak].v.str.len] = 0;
    uint32_t v[3] = {0, 0, 0};
    static const char *const keys[3] = {"block_count", "attention.head_count", "attention.head_count_kv"};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "%s.%s", arch, keys[i]);
        if (llm__gguf_find_key(g, key) >= 0 && !llm__gguf_get_u32(g, key, &v[i], e)) return LLM_ERR_FORMAT;
    }
    const uint32_t n_layer = v[0], n_head = v[1], n_head_kv = v[2] ? v[2] : v[1];
    q->n_layer = (int)n_layer;
    q->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 1;
    q->is_70b = n_layer == 80 && ((!strcmp(arch, "llama") && n_head != n_head_kv) || !strcmp(arch, "qwen2"));
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        if (!strcmp(name, "output.weight")) q->tied = false;
        if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight")) q->n_attn_v++;
    }
    return LLM_OK;
}

static bool llm__qmix_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type tensor t gets (llama_tensor_get_type for these file types).
static int llm__qmix_type(struct llm__qmix *q, const struct llm__gguf_tensor *t) {
    if (!llm__qmix_allows(t)) return (int)t->type;
    int nt = q->type;
    const int ft = q->ftype;
    if (llm__type_info((uint32_t)nt)->blck == 1) return nt;   // f32, f16, bf16: no mix, no fallback
    const char *name = t->name;
    const bool out = !strcmp(name, "output.weight");
    const bool embd = !strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight");
    if (q->pure) {
    } else if (out || (q->tied && embd)) {
        if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) nt = LLM__TYPE_Q8_0;
        else if (nt != LLM__TYPE_Q8_0) nt = LLM__TYPE_Q6_K;
    } else if (embd) {
        // the base type, for every file type offered here
    } else if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight")) {
        if (ft == LLM__FT_Q2_K) nt = q->n_gqa >= 4 ? LLM__TYPE_Q4_K : LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = q->i_attn_v < 2 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_IQ4_NL || ft == LLM__FT_IQ4_XS) && q->n_gqa >= 4) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_Q4_K_M || ft == LLM__FT_Q5_K_M) && llm__qmix_more_bits(q->i_attn_v, q->n_attn_v)) nt = LLM__TYPE_Q6_K;
        else if (ft == LLM__FT_Q4_K_S && q->i_attn_v < 4) nt = LLM__TYPE_Q5_K;
        if (q->is_70b && (nt == LLM__TYPE_Q3_K || nt == LLM__TYPE_Q4_K)) nt = LLM__TYPE_Q5_K;
        q->i_attn_v++;
    } else if (strstr(name, "attn_k.weight") || strstr(name, "attn_q.weight")) {
        // changed only for file types not offered here
    } else if (strstr(name, "attn_output.weight")) {
        if (ft == LLM__FT_Q2_K) nt = LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
    } else if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) {
        // changed only for file types not offered here
    } else if (strstr(name, "ffn_down")) {
        const int i = q->i_ffn_down++, n = q->n_layer;
        if (ft == LLM__FT_Q2_K) nt = LLM__TYPE_Q3_K;
        else if (ft == LLM__FT_Q3_K_M) nt = i < n / 16 ? LLM__TYPE_Q5_K : LLM__TYPE_Q4_K;
        else if (ft == LLM__FT_Q3_K_L) nt = LLM__TYPE_Q5_K;
        else if ((ft == LLM__FT_Q4_K_M || ft == LLM__FT_Q5_K_M) && llm__qmix_more_bits(i, n)) nt = LLM__TYPE_Q6_K;
        else if ((ft == LLM__FT_IQ4_NL || ft == LLM__FT_IQ4_XS) && i < n / 8) nt = LLM__TYPE_Q5_K;
        else if (ft == LLM__FT_Q4_K_S && i < n / 8) nt = LLM__TYPE_Q5_K;
    }
    if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) {
        q->n_fallback++;
        nt = llm__quant_fallback(nt);
        if (t->ne[0] % llm__type_info((uint32_t)nt)->blck != 0) nt = LLM__TYPE_F16;
    }
    return nt;
}

// llama.cpp's loader order: tensors outside the blocks (layer -1) first, then by layer, then by name.
static int llm__tensor_layer(const char *name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}
static int llm__tensor_order(const void *a, const void *b) {
    const struct llm__gguf_tensor *x = *(const struct llm__gguf_tensor *const *)a, *y = *(const struct llm__gguf_tensor *const *)b;
    const int lx = llm__tensor_layer(x->name), ly = llm__tensor_layer(y->name);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->name, y->name);
}

static void llm__gguf_put_str(struct llm__outbuf *o, const char *s) {
    const uint64_t n = strlen(s);
    llm__outbuf_put(o, &n, 8);
    llm__outbuf_put(o, s, (size_t)n);
}

// Writes n bytes to f; false on an error (errno set).
static bool llm__fwrite(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

// A tensor's data decided before the file is written (calibrated quantization): its type and bytes.
struct llm__qrepl { int type; const void *data; size_t size; };

// The model g (a GGUF file or a directory) as a GGUF file of file type ft at params->output (see
// the section's head); repl: NULL, or for each of g's tensors a replacement (data NULL: none), whose
// type and bytes are written as they are.
static enum llm_status llm__quantize_gguf(struct llm__gguf *g, const struct llm_quantize_params *params,
                                          const struct llm__ftype *ft, const struct llm__qrepl *repl,
                                          struct llm_quantize_stats *st_, struct llm__err *e) {
    const struct llm__gguf_tensor **order = NULL;
    const struct llm__qrepl **orepl = NULL;
    int *types = NULL;
    struct llm__outbuf hdr = {0};
    struct llm__pool *pool = NULL;
    FILE *f = NULL;
    char *part = NULL;
    enum llm_status st = LLM_OK;

    struct llm__qmix q = {.ftype = ft->ftype, .type = ft->type, .pure = params->pure != 0, .tied = true};
    if ((st = llm__qmix_init(g, &q, e))) return st;
    order = malloc(sizeof(*order) * (size_t)(g->n_tensors + 1));
    orepl = malloc(sizeof(*orepl) * (size_t)(g->n_tensors + 1));
    types = malloc(sizeof(*types) * (size_t)(g->n_tensors + 1));
    if (!order || !types || !orepl) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof(*order), llm__tensor_order);
    for (int64_t i = 0; i < g->n_tensors; i++) orepl[i] = repl && repl[order[i] - g->tensors].data ? &repl[order[i] - g->tensors] : NULL;

    // the types, and the header: metadata, then the tensors' names, shapes, types and offsets
    const uint32_t version = 3;
    const uint64_t n_tensors = (uint64_t)g->n_tensors;
    uint64_t n_kv = 0;
    llm__outbuf_put(&hdr, "GGUF", 4);
    llm__outbuf_put(&hdr, &version, 4);
    llm__outbuf_put(&hdr, &n_tensors, 8);
    llm__outbuf_put(&hdr, &n_kv, 8);   // counted below
    for (int64_t i = 0; i < g->n_kv; i++) {
        const char *k = g->kv[i].key;
        if (!strcmp(k, "general.quantization_version") || !strcmp(k, "general.file_type") || !strncmp(k, "split.", 6)) continue;
        llm__gguf_put_str(&hdr, k);
        llm__outbuf_put(&hdr, g->kv[i].raw, g->kv[i].raw_len);
        n_kv++;
    }
    const uint32_t u32 = LLM__GGUF_U32, qversion = 2, ftype = (uint32_t)ft->ftype;
    llm__gguf_put_str(&hdr, "general.quantization_version");
    llm__outbuf_put(&hdr, &u32, 4);
    llm__outbuf_put(&hdr, &qversion, 4);
    llm__gguf_put_str(&hdr, "general.file_type");
    llm__outbuf_put(&hdr, &u32, 4);
    llm__outbuf_put(&hdr, &ftype, 4);
    n_kv += 2;
    const size_t align = g->alignment ? g->alignment : LLM__GGUF_DEFAULT_ALIGNMENT;
    uint64_t offset = 0;
    size_t total = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = order[i];
        const int mixed = llm__qmix_type(&q, t);   // (counts the mix's layers also for replaced tensors)
        const int nt = types[i] = orepl[i] ? orepl[i]->type : mixed;
        const struct llm__type_info *ti = llm__type_info(t->type);
        if (!orepl[i] && (uint32_t)nt != t->type && ti->blck > 1 && !params->allow_requantize) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s already: requantizing it to %s needs "
                           "--allow-requantize (quality suffers; quantize the F16/BF16/F32 model instead)",
                           t->name, ti->name, llm__type_info((uint32_t)nt)->name);
            goto out;
        }
        if (!orepl[i] && (uint32_t)nt != t->type && !ti->supported) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s, which this build cannot read", t->name, ti->name);
            goto out;
        }
        if (llm__type_info((uint32_t)nt)->internal) {   // no internal type may reach the file
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' would be %s (an AWQ/GPTQ layout), which GGUF cannot hold",
                           t->name, llm__type_info((uint32_t)nt)->name);
            goto out;
        }
        const int nd = llm__tensor_dims(t);
        const uint32_t tt = (uint32_t)nt;
        llm__gguf_put_str(&hdr, t->name);
        llm__outbuf_put(&hdr, &(uint32_t){(uint32_t)nd}, 4);
        llm__outbuf_put(&hdr, t->ne, 8 * (size_t)nd);
        llm__outbuf_put(&hdr, &tt, 4);
        llm__outbuf_put(&hdr, &offset, 8);
        const size_t size = llm__row_bytes(nt, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        assert(!orepl[i] || orepl[i]->size == size);
        offset += (size + align - 1) / align * align;
        total += t->size;
        st_->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        st_->n_quantized += (uint32_t)nt != t->type;
    }
    st_->n_fallback = q.n_fallback;
    st_->n_tensors = (int)g->n_tensors;
    while (hdr.n % align) llm__outbuf_put(&hdr, "", 1);
    if (hdr.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    memcpy(hdr.p + 16, &n_kv, 8);

    // the data, tensor by tensor, to OUTPUT.part
    const size_t plen = strlen(params->output);
    if (!(part = malloc(plen + 6))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    memcpy(part, params->output, plen);
    memcpy(part + plen, ".part", 6);
    if (!(pool = llm__pool_new(params->n_threads > 0 ? params->n_threads : llm__online_cpus(), e))) { st = LLM_ERR_BACKEND; goto out; }
    if (!(f = fopen(part, "wb"))) {
        st = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", part, strerror(errno));
        goto out;
    }
    bool ok = llm__fwrite(f, hdr.p, hdr.n);
    static const char zeros[64];
    size_t done = 0;
    for (int64_t i = 0; i < g->n_tensors && ok; i++) {
        const struct llm__gguf_tensor *t = order[i];
        const int nt = types[i];
        size_t size = t->size;
        if (orepl[i]) {
            size = orepl[i]->size;
            ok = llm__fwrite(f, orepl[i]->data, size);
        } else if ((uint32_t)nt == t->type) {
            ok = llm__fwrite(f, t->data, t->size);
        } else {
            size = llm__row_bytes(nt, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            struct llm__quant_job job = {t, nt, llm__alloc(size), false};
            if (!job.dst) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory (%zu bytes for '%s')", size, t->name); break; }
            llm__pool_run(pool, llm__quant_worker, &job);
            if (!job.fail) ok = llm__fwrite(f, job.dst, size);
            free(job.dst);
            if (job.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
        }
        for (size_t pad = (align - size % align) % align; ok && pad; pad -= LLM__MIN(pad, sizeof(zeros)))
            ok = llm__fwrite(f, zeros, LLM__MIN(pad, sizeof(zeros)));
        if (g->owns_map) llm__map_release(t->data, t->size);
        st_->bytes_in += t->size;
        st_->bytes_out += size;
        done += t->size;
        if (params->progress) params->progress(params->progress_user, (double)done / (double)(total ? total : 1), t->name);
    }
    if (!st && !ok) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", part, strerror(errno));
    if (fclose(f) != 0 && !st) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", part, strerror(errno));
    f = NULL;
    if (!st && rename(part, params->output) != 0)
        st = llm__fail(e, LLM_ERR_IO, "quantize: cannot rename '%s' to '%s': %s", part, params->output, strerror(errno));
    if (st) remove(part);
out:
    if (f) { fclose(f); remove(part); }
    free(part);
    llm__pool_free(pool);
    free(hdr.p);
    free(order);
    free(orepl);
    free(types);
    return st;
}

struct llm_quantize_params llm_quantize_params_default(void) {
    struct llm_quantize_params p;
    memset(&p, 0, sizeof(p));
    p.type = "q4_K_M";
    return p;
}

// === public API ===

// The GPU devices of the backends built in.
static int llm__list_devices(struct llm_device *out, int max, struct llm__err *e) {
    int n = 0;
    if (max < 0 || (max > 0 && !out)) return llm__fail(e, LLM_ERR_INVALID_ARG, "list devices: bad output array"), -1;
#ifdef LLM_VULKAN
    int k = llm__vk_list_devices(out, max, e);
    if (k < 0) return -1;
    n += k;
#endif
#ifdef LLM_CUDA
    int kc = llm__cu_list_devices(out + n, max - n, e);
    if (kc < 0) return -1;
    n += kc;
#endif
    (void)out;
    (void)e;
    return n;
}

// The serving section's (below): requests, the step's plan, their memory.
struct llm__req;
struct llm__plan_entry;
static enum llm_status llm__serving_init(llm_engine *E, struct llm__err *e);
static void llm__serving_free(llm_engine *E);
static enum llm_status llm__seq_eval_chunk(llm_engine *E, struct llm__seq *s, const int32_t *tokens, int n,
                                           int n_logits, float *logits);

struct llm_engine {
    struct llm_engine_params params;
    struct llm__err err;
    struct llm__model model;
    struct llm__vocab vocab;
    struct llm_backend be;
    struct llm__kv_cache kv;   // the KV memory (backend buffers)
    struct llm__blocks blocks; // which tokens its blocks hold (host bookkeeping)
    struct llm__acts acts;
    int max_model_len;
    struct llm__seq *seqs;     // llm_seq_new's sequences
    int n_seqs;
    // host arrays of one step (llm__prepare): [acts.max_tokens] each; block tables
    // [max_num_seqs][cap_tables]
    int32_t *st_tokens, *st_pos, *st_seq, *st_slot, *st_out, *st_tables;
    int cap_tables;
    float *step_logits;        // [acts.max_out][n_vocab] llm_step's logit rows
    struct llm__prof *prof;   // per-module times when profiling (&prof_data), else NULL
    struct llm__prof prof_data;
    char unsupported[512];    // LLM_LOAD_METADATA: why a full load would fail
    // serving
    struct llm__req **reqs, **q_run, **q_wait;   // [cap_reqs]; q_wait: a heap (see llm__wait_push)
    struct llm__plan_entry *plan;                // [cap_reqs] a step's plan
    int n_reqs, cap_reqs, next_id, n_wait;
    long long n_arrivals, n_preemptions, n_steps;
    long long prefix_query_tokens, prefix_hit_tokens;   // prompt tokens looked up in the prefix cache, found
    // speculative decoding's counters (llm_engine_stats)
    long long spec_proposed[LLM__MAX_SPEC], spec_accepted[LLM__MAX_SPEC], spec_verifications, spec_emitted;
    double spec_draft_seconds, spec_verify_seconds;
    double t_step[LLM__TSTEP + 1];   // measured forward-pass seconds of steps of T tokens (decayed mean; 0: none yet)
    bool t_step_warm[LLM__TSTEP + 1];   // a step of T tokens has run (the first is not measured)
    bool spec_always;          // tests: every proposed draft is verified (no cost model)
    llm_engine *draft;         // speculative_model's engine (its requests' sequences are the requests')
    float *spec_q;             // [LLM__SPEC_REQS][K][n_vocab] the draft's distributions of a step's drafts
    double t_draft;            // measured seconds of a draft round of one token per request (llm__time_update)
    double t_draft0;           // the same for a first round, which also catches up (usually 1-3 tokens)
    double t_busy;             // seconds of the steps that computed something (llm_step: schedule to execute)
    double t_forced;           // seconds of the draft model's forced rounds (the first drafts, probes)
    struct llm__plan_entry *spec_de;   // [2 * LLM__SPEC_REQS] a draft round's plan (speculative_model)
    struct llm_output *outs;
    size_t *out_off;
    int cap_outs;
    struct llm__outbuf arena;  // the new text of a step's outputs
};

const char *llm_status_str(enum llm_status status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_ERR_INVALID_ARG: return "invalid argument";
    case LLM_ERR_IO: return "i/o error";
    case LLM_ERR_FORMAT: return "bad model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_NOMEM: return "out of memory";
    case LLM_ERR_CONTEXT: return "context full";
    case LLM_ERR_BACKEND: return "backend error";
    }
    return "unknown status";
}

int llm_version(void) { return LLM_VERSION_NUMBER; }
const char *llm_version_string(void) { return LLM_VERSION; }

struct llm_engine_params llm_engine_params_default(void) {
    struct llm_engine_params p = {0};
    p.backend = LLM_BACKEND_CPU;
    p.device = LLM_DEVICE_AUTO;
    p.block_size = 16;
    p.kv_cache_dtype = LLM_KV_F16;
    p.max_num_seqs = 256;
    p.max_num_batched_tokens = 512;
    p.scheduling_policy = LLM_SCHED_FCFS;
    return p;
}

// Logit rows of llm_seq_eval's steps with all_logits (each is n_vocab floats).
#define LLM__MAX_STEP_OUT 64

// Memory the system has free for the KV cache, in bytes, or 0 when unknown. Linux: MemAvailable
// of /proc/meminfo (free memory and the page cache it can reclaim). Otherwise the free pages
// where sysconf counts them (_SC_AVPHYS_PAGES: Linux without /proc, OpenBSD, Solaris), else the
// physical memory (_SC_PHYS_PAGES: macOS, FreeBSD, NetBSD; what is free there needs system calls
// outside libc), else 0, and the engine sizes the KV cache for one sequence of max_model_len.
static size_t llm__mem_available(void) {
    unsigned long long kb = 0;
#if defined(__linux__)
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
#endif
#if defined(_SC_AVPHYS_PAGES)
    const int which = _SC_AVPHYS_PAGES;
#elif defined(_SC_PHYS_PAGES)
    const int which = _SC_PHYS_PAGES;
#else
    const int which = -1;
#endif
    if (!kb && which != -1) {
        long pages = sysconf(which), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0) kb = (unsigned long long)pages * (unsigned long long)psz / 1024;
    }
    return (size_t)kb * 1024;
}

// Fills in the defaults of the parameters' zero fields and checks them; the first one wrong is
// the error (LLM_ERR_INVALID_ARG, or LLM_ERR_UNSUPPORTED for a backend not built in).
static enum llm_status llm__params_check(struct llm_engine_params *p, struct llm__err *e) {
    if (!p->block_size) p->block_size = 16;
    if (p->n_threads <= 0) p->n_threads = llm__online_cpus();
    if (!p->max_num_seqs) p->max_num_seqs = 256;
    if (!p->max_num_batched_tokens) p->max_num_batched_tokens = 512;
    if ((p->speculative_ngram || p->speculative_model) && !p->num_speculative_tokens) p->num_speculative_tokens = 4;
    if (p->speculative_ngram && p->speculative_model)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "speculative_model and speculative_ngram: choose one way to draft");
    if (!p->prompt_lookup_min) p->prompt_lookup_min = 2;
    if (!p->prompt_lookup_max) p->prompt_lookup_max = LLM__MAX(4, p->prompt_lookup_min);
    if (p->num_speculative_tokens < 0 || p->num_speculative_tokens > LLM__MAX_SPEC)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "num_speculative_tokens must be in [0, %d] (got %d)", LLM__MAX_SPEC,
                         p->num_speculative_tokens);
    if (p->num_speculative_tokens > 0 && !p->speculative_ngram && !p->speculative_model)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "num_speculative_tokens needs a way to draft: speculative_model or speculative_ngram");
    if (p->prompt_lookup_min < 1 || p->prompt_lookup_max < p->prompt_lookup_min || p->prompt_lookup_max > 64)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "prompt lookup n-grams must have 1 <= min <= max <= 64 (got %d, %d)",
                         p->prompt_lookup_min, p->prompt_lookup_max);
    if (!p->model_path) return llm__fail(e, LLM_ERR_INVALID_ARG, "no model file given");
    if (!(p->gpu_memory_utilization >= 0.0f && p->gpu_memory_utilization <= 1.0f))   // NaN too
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gpu_memory_utilization must be in (0, 1] (0: the default)");
    if (p->block_size != 8 && p->block_size != 16 && p->block_size != 32)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "block size must be 8, 16 or 32 (got %d)", p->block_size);
    if (p->kv_cache_dtype != LLM_KV_F16 && p->kv_cache_dtype != LLM_KV_F32)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "KV cache type must be LLM_KV_F16 or LLM_KV_F32 (got %d)",
                         (int)p->kv_cache_dtype);
    if (p->n_threads > 512) return llm__fail(e, LLM_ERR_INVALID_ARG, "too many threads (%d)", p->n_threads);
    // (at most 2^24 tokens: block counts and slot numbers stay far from int's limit)
    if (p->max_model_len < 0 || p->max_model_len > (1 << 24))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_model_len must be in [0, %d] (got %d)", 1 << 24, p->max_model_len);
    if (p->max_num_seqs < 1 || p->max_num_seqs > 65536)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_num_seqs must be in [1, 65536] (got %d)", p->max_num_seqs);
    if (p->max_num_batched_tokens < 1 || p->max_num_batched_tokens > 65536)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_num_batched_tokens must be in [1, 65536] (got %d)",
                         p->max_num_batched_tokens);
    if (p->scheduling_policy != LLM_SCHED_FCFS && p->scheduling_policy != LLM_SCHED_PRIORITY)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown scheduling policy %d", (int)p->scheduling_policy);
    if (p->backend != LLM_BACKEND_CPU && p->backend != LLM_BACKEND_AUTO && p->backend != LLM_BACKEND_VULKAN &&
        p->backend != LLM_BACKEND_CUDA)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown backend %d", (int)p->backend);
    if (p->device < LLM_DEVICE_AUTO)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "device must be LLM_DEVICE_AUTO or an index >= 0 (got %d)", p->device);
    if (p->load != LLM_LOAD_ALL && p->load != LLM_LOAD_VOCAB && p->load != LLM_LOAD_METADATA)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown load mode %d", (int)p->load);
#ifndef LLM_VULKAN
    if (p->backend == LLM_BACKEND_VULKAN)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "backend 'vulkan' is not in this build (make VULKAN=1); available: cpu%s",
                         llm_has_backend(LLM_BACKEND_CUDA) ? ", cuda" : "");
#endif
#ifndef LLM_CUDA
    if (p->backend == LLM_BACKEND_CUDA)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "backend 'cuda' is not in this build (make CUDA=1); available: cpu%s",
                         llm_has_backend(LLM_BACKEND_VULKAN) ? ", vulkan" : "");
#endif
    return LLM_OK;
}

// Frees a backend that was opened, or whatever part of it its constructor made.
static void llm__backend_close(struct llm_backend *be) {
    if (be->iface && be->iface->free) be->iface->free(be->ctx);
    memset(be, 0, sizeof(*be));
}

// The backend the parameters ask for, its table checked (llm__backend_check). "auto": the CUDA
// backend when it is built in and opens, else the Vulkan backend on its preferred device when it
// is built in and opens; otherwise the CPU.
static enum llm_status llm__backend_open(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e) {
    enum llm_status st;
#ifdef LLM_CUDA
    if (p->backend == LLM_BACKEND_CUDA || p->backend == LLM_BACKEND_AUTO) {
        st = llm__cu_backend_new(be, p->device, e);
        if (st == LLM_OK) st = llm__backend_check(be->iface, e);
        if (st == LLM_OK) return LLM_OK;
        llm__backend_close(be);
        if (p->backend == LLM_BACKEND_CUDA) return st;
        *e = (struct llm__err){{0}, LLM_OK};   // auto: Vulkan or the CPU instead
    }
#endif
#ifdef LLM_VULKAN
    if (p->backend == LLM_BACKEND_VULKAN || p->backend == LLM_BACKEND_AUTO) {
        st = llm__vk_backend_new(be, p->device, 0, e);
        if (st == LLM_OK) st = llm__backend_check(be->iface, e);
        if (st == LLM_OK) return LLM_OK;
        llm__backend_close(be);
        if (p->backend == LLM_BACKEND_VULKAN) return st;
        *e = (struct llm__err){{0}, LLM_OK};   // auto: the CPU instead
    }
#endif
    st = llm__cpu_backend_new(be, p->n_threads, -1, e);
    if (st == LLM_OK) st = llm__backend_check(be->iface, e);
    if (st != LLM_OK) llm__backend_close(be);
    return st;
}

// LLM_LOAD_METADATA: what a full load would say of the file (the hyper-parameters and the
// tensors' types, no weights), kept for llm_model_info.unsupported.
static void llm__engine_check_loadable(llm_engine *E) {
    struct llm__err why = {{0}, LLM_OK};
    struct llm__model *m = &E->model;
    llm__chat_template_recognise(&E->vocab, &m->gguf);   // plain metadata, whatever else fails
    if (m->gguf.n_tensors == 0) {
        llm__fail(&why, LLM_ERR_FORMAT, "the file has no tensors (a vocabulary-only file)");
    } else if (llm__model_hparams(m, &why) == LLM_OK && llm__vocab_load(&E->vocab, &m->gguf, m->n_vocab, &why) == LLM_OK) {
        // every tensor the architecture uses, with its shape and type, as the load would find them
        struct llm__model_plan pl = {0};
        if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
            llm__fail(&why, LLM_ERR_NOMEM, "out of memory");
        else llm__model_plan(m, &pl, &why);
        free(pl.vecs);
        free(pl.mats);
    }
    if (why.msg[0]) snprintf(E->unsupported, sizeof(E->unsupported), "%s", why.msg);
}

// Sizes and allocates the KV cache: kv_cache_bytes; else gpu_memory_utilization of the backend's
// free memory; else a quarter of it, at most what max_num_seqs sequences of max_model_len use and
// at least one such sequence (pages are only touched as blocks are used).
static enum llm_status llm__engine_kv_init(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    const struct llm__model *m = &E->model;
    size_t kv_bytes = p->kv_cache_bytes;
    int kv_type = p->kv_cache_dtype == LLM_KV_F32 ? LLM__TYPE_F32 : LLM__TYPE_F16;
    size_t per_token = 2 * (size_t)m->n_layer * llm__row_bytes(kv_type, (int64_t)m->n_head_kv * m->head_dim);
    size_t one_seq = per_token * (size_t)((E->max_model_len + p->block_size - 1) / p->block_size * p->block_size);
    if (!kv_bytes && p->gpu_memory_utilization > 0) {
        kv_bytes = (size_t)((double)E->be.iface->mem_free(E->be.ctx) * p->gpu_memory_utilization);
    }
    if (!kv_bytes) {
        size_t avail = E->be.iface->mem_free(E->be.ctx) / 4;
        size_t most = one_seq * (size_t)p->max_num_seqs;
        kv_bytes = LLM__MAX(LLM__MIN(avail ? avail : one_seq, most), one_seq);
    }
    return llm__kv_cache_init(&E->kv, m, &E->be, kv_type, p->block_size, kv_bytes, e);
}

// Memory of the largest step: the activations, the backend's scratch (reserve), then serving's
// (the block manager, the logits and the host arrays of a step). A step has at most max_num_batched_tokens tokens (or
// LLM__MAX_STEP_OUT: llm_seq_eval's steps with all logits) of max_num_seqs sequences, each of at
// most max_model_len tokens (its block table: that many blocks).
static enum llm_status llm__engine_step_buffers(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    const struct llm__model *m = &E->model;
    enum llm_status st;
    int max_tokens = LLM__MAX(p->max_num_batched_tokens, LLM__MAX_STEP_OUT);
    int max_out = LLM__MAX(LLM__MAX_STEP_OUT, LLM__MIN(p->max_num_seqs, max_tokens));
    // speculative decoding: rows for the drafts of up to 64 sequences a step besides one per sequence
    if (p->num_speculative_tokens > 0) max_out = LLM__MIN(max_tokens, LLM__MIN(p->max_num_seqs, max_tokens) + 64 * p->num_speculative_tokens);
    max_out = LLM__MAX(max_out, LLM__MAX_STEP_OUT);
    if ((st = llm__acts_init(&E->acts, m, &E->be, max_tokens, max_out, e))) return st;
    struct llm__shape shape = {
        .max_tokens = max_tokens, .max_out = max_out, .max_seqs = p->max_num_seqs,
        .max_blocks = LLM__MIN((E->max_model_len + p->block_size - 1) / p->block_size, E->kv.n_blocks),
        .max_cols = LLM__MAX(m->n_embd, LLM__MAX(m->n_ff, m->n_head * m->head_dim)),
        .n_head = m->n_head, .n_head_kv = m->n_head_kv, .head_dim = m->head_dim, .block_size = p->block_size,
    };
    if ((st = E->be.iface->reserve(E->be.ctx, &shape, e))) return st;
    return llm__serving_init(E, e);   // the block manager and the host arrays of a step
}

// Opens the model file and loads what the load mode asks for: metadata only, the vocabulary, or
// everything a forward pass needs (the backend, the weights, the KV cache, the step's memory).
static enum llm_status llm__engine_load(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    enum llm_status st;
    if ((st = llm__model_open(&E->model.gguf, p->model_path, p->no_mmap != 0, e))) return st;
    llm__model_names(&E->model);
    if (p->load == LLM_LOAD_METADATA) {
        llm__engine_check_loadable(E);
        return LLM_OK;
    }
    if (p->load == LLM_LOAD_VOCAB) {
        if ((st = llm__vocab_load(&E->vocab, &E->model.gguf, 0, e))) return st;
        E->model.n_vocab = E->vocab.n;
        return LLM_OK;
    }
    if (E->model.gguf.n_tensors == 0)
        return llm__fail(e, LLM_ERR_FORMAT, "the file has no tensors: a vocabulary-only file can tokenize "
                                            "(llm tokenize, LLM_LOAD_VOCAB) but not run");
    if ((st = llm__model_hparams(&E->model, e))) return st;
    if ((st = llm__vocab_load(&E->vocab, &E->model.gguf, E->model.n_vocab, e))) return st;
    if (p->quantize && (st = llm__model_quantize(&E->model, p->quantize, p->n_threads, p->verbose > 0 && isatty(2), e))) return st;
    if ((st = llm__backend_open(&E->be, p, e))) return st;
    if ((st = llm__model_load_tensors(&E->model, &E->be, p->verbose > 0 && isatty(2), e))) return st;
    E->max_model_len = p->max_model_len ? p->max_model_len : LLM__MIN(E->model.n_ctx_train, 4096);
    if ((st = llm__engine_kv_init(E, e))) return st;
    return llm__engine_step_buffers(E, e);
}

// speculative_model: the draft's engine, on the same backend and device, for the same contexts
// and batches, without prefix caching; its vocabulary must be the model's, token for token.
static enum llm_status llm__draft_open(llm_engine *E, struct llm__err *e) {
    struct llm_engine_params dp = E->params;
    dp.model_path = E->params.speculative_model;
    dp.speculative_model = NULL;
    dp.speculative_ngram = 0;
    dp.num_speculative_tokens = 0;
    dp.enable_prefix_caching = 0;
    dp.max_model_len = E->max_model_len;
    dp.kv_cache_bytes = 0;
    dp.verbose = 0;
    char err[512];
    llm_engine *D = llm_engine_create(&dp, err, sizeof(err));
    if (!D) return llm__fail(e, LLM_ERR_INVALID_ARG, "the draft model %s: %s", dp.model_path, err);
    E->draft = D;
    if (E->model.n_vocab != D->model.n_vocab)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "the draft model %s has %d tokens, the model %d: their vocabularies must be the same",
                         dp.model_path, D->model.n_vocab, E->model.n_vocab);
    for (int t = 0; t < E->model.n_vocab; t++) {
        char pa[256], pb[256];
        int la = llm_token_to_piece(E, t, pa, sizeof(pa)), lb = llm_token_to_piece(D, t, pb, sizeof(pb));
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)LLM__MIN(la, (int)sizeof(pa)))) ||
            llm_token_is_control(E, t) != llm_token_is_control(D, t))
            return llm__fail(e, LLM_ERR_INVALID_ARG, "the draft model %s has another vocabulary: token %d differs", dp.model_path, t);
    }
    // a first forward pass now (weights repacked, pages touched), not in the first step's time
    int s = llm_seq_new(D);
    int32_t warm[8];
    for (int i = 0; i < 8; i++) warm[i] = D->vocab.bos >= 0 ? D->vocab.bos : 0;
    if (s < 0 || llm_seq_eval(D, s, warm, 8, NULL, 0) != LLM_OK)
        return llm__fail(e, LLM_ERR_BACKEND, "the draft model %s: %s", dp.model_path, llm_last_error(D));
    llm_seq_free(D, s);
    size_t n = (size_t)LLM__SPEC_REQS * (size_t)E->params.num_speculative_tokens * (size_t)E->model.n_vocab;
    if (!(E->spec_q = malloc(n * sizeof(float)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return LLM_OK;
}

llm_engine *llm_engine_create(const struct llm_engine_params *params, char *err, size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    llm_engine *E = calloc(1, sizeof(*E));
    if (!E) { if (err && err_size) snprintf(err, err_size, "out of memory"); return NULL; }
    struct llm_engine_params p = params ? *params : llm_engine_params_default();
    enum llm_status st = llm__params_check(&p, &e);
    E->params = p;
    if (st == LLM_OK) st = llm__engine_load(E, &e);
    if (st == LLM_OK && p.speculative_model && p.load == LLM_LOAD_ALL) st = llm__draft_open(E, &e);
    if (st == LLM_OK) return E;
    if (p.backend == LLM_BACKEND_AUTO && E->be.iface && strcmp(E->be.iface->name, "cpu") != 0) {
        // auto: the GPU could not take the model (memory, a type): the CPU instead
        if (p.verbose > 0) fprintf(stderr, "llm: %s; running on the CPU\n", e.msg[0] ? e.msg : llm_status_str(st));
        llm_engine_free(E);
        p.backend = LLM_BACKEND_CPU;
        return llm_engine_create(&p, err, err_size);
    }
    if (err && err_size) snprintf(err, err_size, "%s", e.msg[0] ? e.msg : llm_status_str(st));
    llm_engine_free(E);
    return NULL;
}

void llm_engine_free(llm_engine *E) {
    if (!E) return;
    llm__serving_free(E);
    llm_engine_free(E->draft);
    free(E->spec_q);
    if (E->be.iface && (E->acts.buf.data || E->acts.buf.handle)) E->be.iface->buf_free(E->be.ctx, &E->acts.buf);
    llm__kv_cache_free(&E->kv, &E->be);
    llm__model_free(&E->model, &E->be);
    llm__vocab_free(&E->vocab);
    llm__backend_close(&E->be);
    free(E);
}

const char *llm_last_error(const llm_engine *E) {
    return E ? E->err.msg : "no engine";
}

enum llm_status llm_last_status(const llm_engine *E) {
    return E ? E->err.status : LLM_ERR_INVALID_ARG;
}

void llm_get_model_info(const llm_engine *E, struct llm_model_info *info) {
    const struct llm__model *m = &E->model;
    memset(info, 0, sizeof(*info));
    info->arch = m->arch_name;
    info->name = m->name;
    info->n_vocab = m->n_vocab;
    info->n_embd = m->n_embd;
    info->n_layer = m->n_layer;
    info->n_head = m->n_head;
    info->n_head_kv = m->n_head_kv;
    info->head_dim = m->head_dim;
    info->n_ff = m->n_ff;
    info->n_ctx_train = m->n_ctx_train;
    info->n_params = 0;
    info->weight_bytes = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        int64_t n = 1;
        for (int d = 0; d < m->gguf.tensors[i].n_dims; d++) n *= m->gguf.tensors[i].ne[d];
        info->n_params += n;
        info->weight_bytes += m->gguf.tensors[i].size;
    }
    info->bytes_per_token = E->params.load == LLM_LOAD_ALL ? llm__model_bytes_per_token(m) : 0;
    info->bos_id = E->params.load == LLM_LOAD_METADATA ? -1 : E->vocab.bos;
    info->eos_id = E->params.load == LLM_LOAD_METADATA ? -1 : E->vocab.eos;
    info->add_bos = E->vocab.add_bos;
    info->max_token_bytes = E->params.load == LLM_LOAD_METADATA ? 0 : E->vocab.max_token_bytes;
    info->gguf_version = m->gguf.version;
    info->n_tensors = m->gguf.n_tensors;
    info->n_metadata = m->gguf.n_kv;
    info->unsupported = E->unsupported[0] ? E->unsupported : NULL;
}

void llm_get_engine_info(const llm_engine *E, struct llm_engine_info *info) {
    memset(info, 0, sizeof(*info));
    const char *bn = E->be.iface ? E->be.iface->name : "none";
    info->backend = !strcmp(bn, "vulkan") ? LLM_BACKEND_VULKAN : !strcmp(bn, "cuda") ? LLM_BACKEND_CUDA : LLM_BACKEND_CPU;
    info->backend_name = bn;
    info->device_name = E->be.iface && E->be.iface->device_name ? E->be.iface->device_name(E->be.ctx) : "";
    info->n_threads = E->params.n_threads;
    info->max_model_len = E->max_model_len;
    info->block_size = E->params.block_size;
    info->kv_tokens = E->kv.n_blocks * E->kv.block_size;
    info->kv_cache_bytes = E->kv.k.size + E->kv.v.size;
    info->kv_cache_dtype = E->params.kv_cache_dtype;
    info->max_num_seqs = E->params.max_num_seqs;
    info->max_num_batched_tokens = E->params.max_num_batched_tokens;
    info->enable_prefix_caching = E->params.enable_prefix_caching != 0;
    info->scheduling_policy = E->params.scheduling_policy;
}

static enum llm_meta_type llm__meta_type(uint32_t t) {
    switch (t) {
    case LLM__GGUF_I8: case LLM__GGUF_I16: case LLM__GGUF_I32: case LLM__GGUF_I64: return LLM_META_INT;
    case LLM__GGUF_F32: case LLM__GGUF_F64: return LLM_META_FLOAT;
    case LLM__GGUF_BOOL: return LLM_META_BOOL;
    case LLM__GGUF_STR: return LLM_META_STRING;
    case LLM__GGUF_ARR: return LLM_META_ARRAY;
    default: return LLM_META_UINT;
    }
}

enum llm_status llm_model_meta(llm_engine *E, int64_t index, struct llm_meta *meta) {
    const struct llm__gguf *g = &E->model.gguf;
    if (index < 0 || index >= g->n_kv || !meta)
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "metadata index %lld out of range [0, %lld)",
                         (long long)index, (long long)g->n_kv);
    const struct llm__gguf_kv *kv = &g->kv[index];
    memset(meta, 0, sizeof(*meta));
    meta->key = kv->key;
    meta->type = llm__meta_type(kv->type);
    switch (meta->type) {
    case LLM_META_INT: meta->i = kv->v.i64; meta->f = (double)kv->v.i64; break;
    case LLM_META_UINT: meta->u = kv->v.u64; meta->i = (int64_t)kv->v.u64; meta->f = (double)kv->v.u64; break;
    case LLM_META_FLOAT: meta->f = kv->v.f64; break;
    case LLM_META_BOOL: meta->b = kv->v.u64 != 0; break;
    case LLM_META_STRING: meta->str = kv->v.str.ptr; meta->str_len = (size_t)kv->v.str.len; break;
    case LLM_META_ARRAY: meta->elem_type = llm__meta_type(kv->arr_type); meta->n_elems = kv->arr_n; break;
    }
    return LLM_OK;
}

enum llm_status llm_model_tensor(llm_engine *E, int64_t index, struct llm_tensor_info *info) {
    const struct llm__gguf *g = &E->model.gguf;
    if (index < 0 || index >= g->n_tensors || !info)
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tensor index %lld out of range [0, %lld)",
                         (long long)index, (long long)g->n_tensors);
    const struct llm__gguf_tensor *t = &g->tensors[index];
    const struct llm__type_info *ti = llm__type_info(t->type);
    memset(info, 0, sizeof(*info));
    info->name = t->name;
    info->type = (int)t->type;
    info->type_name = ti ? ti->name : "unknown";
    info->supported = ti && ti->supported;
    info->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) info->ne[d] = t->ne[d];
    info->bytes = t->size;
    return LLM_OK;
}

int llm_list_devices(struct llm_device *devices, int max, char *err, size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    int n = llm__list_devices(devices, max, &e);
    if (n < 0 && err && err_size) snprintf(err, err_size, "%s", e.msg);
    return n;
}

int llm_has_backend(enum llm_backend_kind backend) {
#ifdef LLM_VULKAN
    if (backend == LLM_BACKEND_VULKAN) return 1;
#endif
#ifdef LLM_CUDA
    if (backend == LLM_BACKEND_CUDA) return 1;
#endif
    return backend == LLM_BACKEND_CPU || backend == LLM_BACKEND_AUTO;
}

enum llm_status llm_measure_bandwidth(llm_engine *E, double *gb_per_s) {
    *gb_per_s = 0.0;
    if (!E->be.iface || !E->be.iface->bandwidth)
        return llm__fail(&E->err, LLM_ERR_UNSUPPORTED, "the %s backend has no bandwidth probe",
                         E->be.iface ? E->be.iface->name : "(no)");
    return E->be.iface->bandwidth(E->be.ctx, gb_per_s, &E->err);
}

void llm_set_profiling(llm_engine *E, int on) {
    if (on && !E->prof) memset(&E->prof_data, 0, sizeof(E->prof_data));   // a stopped profile stays readable
    E->prof = on ? &E->prof_data : NULL;
}

void llm_get_profile(const llm_engine *E, struct llm_profile *p) {
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < LLM_PROF_COUNT; i++) p->seconds[i] = E->prof_data.t[i];
    p->n_steps = E->prof_data.steps;
}

const char *llm_prof_op_name(enum llm_prof_op op) {
    static const char *const names[LLM_PROF_COUNT] = {
        "embedding", "norms", "attention: q/k/v projections", "attention: rope", "attention: KV store",
        "attention: paged attention", "attention: output projection", "MLP: gate/up", "MLP: silu x up", "MLP: down",
        "residual adds", "logits (final norm + output)", "sampling", "scheduling"};
    return op >= 0 && op < LLM_PROF_COUNT ? names[op] : NULL;
}

const char *llm_finish_reason_str(enum llm_finish_reason r) {
    switch (r) {
    case LLM_FINISH_NONE: return "";
    case LLM_FINISH_STOP: return "stop";
    case LLM_FINISH_LENGTH: return "length";
    case LLM_FINISH_ABORT: return "abort";
    case LLM_FINISH_ERROR: return "error";
    case LLM_FINISH_CONTEXT: return "context";
    }
    return "";
}

int llm_tokenize(llm_engine *E, const char *text, size_t len, int flags, int32_t *tokens, int max_tokens) {
    if (E->params.load == LLM_LOAD_METADATA) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: the engine has no vocabulary (LLM_LOAD_METADATA)");
        return -1;
    }
    if (!text && len) { llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: NULL text"); return -1; }
    if (max_tokens < 0 || (!tokens && max_tokens > 0)) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: bad output buffer");
        return -1;
    }
    return llm__tokenize(&E->vocab, text, len, flags, tokens, max_tokens, &E->err);
}

int llm_token_to_piece(llm_engine *E, int32_t token, char *buf, size_t size) {
    if (!buf && size) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "token_to_piece: NULL buffer"), -1;
    int n = llm__token_piece(&E->vocab, token, false, buf, size);
    if (n < 0) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "token id %d is out of range [0, %d)", token, E->vocab.n), -1;
    if (size) buf[LLM__MIN((size_t)n, size - 1)] = 0;
    return n;
}

int llm_token_is_eog(const llm_engine *E, int32_t token) {
    return token >= 0 && token < E->vocab.n && E->vocab.eog[token];
}

int llm_token_is_control(const llm_engine *E, int32_t token) {
    return token >= 0 && token < E->vocab.n && E->vocab.attr[token] == LLM__TOK_CONTROL;
}

int llm_detokenize(llm_engine *E, const int32_t *tokens, int n, int flags, char *buf, size_t size) {
    if (n < 0 || (n > 0 && !tokens) || (!buf && size))
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "detokenize: bad arguments"), -1;
    struct llm__outbuf o = {0};
    if (!llm__detokenize(&E->vocab, tokens, n, flags, &o)) {
        free(o.p);
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "detokenize: a token id is out of range [0, %d)", E->vocab.n), -1;
    }
    int r = llm__outbuf_emit(&o, buf, size);
    if (r < 0) llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    return r;
}

void llm_text_stream_reset(struct llm_text_stream *stream) {
    memset(stream, 0, sizeof(*stream));
}

int llm_text_stream_push(llm_engine *E, struct llm_text_stream *stream, int32_t token, int flags, char *out,
                         size_t size) {
    if (!out && size) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "text_stream_push: NULL buffer"), -1;
    struct llm_text_stream u = *stream;
    struct llm__outbuf o = {0};
    llm__stream_push(&E->vocab, &u, token, flags, &o);
    if (o.fail || o.n >= INT_MAX) { free(o.p); return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1; }
    if (o.n >= size) { free(o.p); return (int)o.n; }   // does not fit: nothing written or consumed
    *stream = u;
    return llm__outbuf_emit(&o, out, size);
}

int llm_text_stream_flush(struct llm_text_stream *stream, char *out, size_t size) {
    struct llm_text_stream u = *stream;
    struct llm__outbuf o = {0};
    llm__stream_feed(&u, "", 0, &o, true);
    int r = llm__outbuf_emit(&o, out, size);
    if (r >= 0 && (size_t)r < size) llm_text_stream_reset(stream);   // all of it was written
    return r;
}

const char *llm_chat_template_detect(const llm_engine *E) {
    return E->vocab.chat_template[0] ? E->vocab.chat_template : NULL;
}

int llm_chat_apply(const char *template_name, const struct llm_chat_message *messages, int n, int add_assistant,
                   char *buf, size_t size) {
    struct llm__outbuf o = {0};
    if (n < 0 || (n > 0 && !messages) || (!buf && size)) return -1;
    if (llm__chat_apply(template_name, messages, n, add_assistant != 0, &o) < 0) { free(o.p); return -1; }
    return llm__outbuf_emit(&o, buf, size);
}

int llm_seq_new(llm_engine *E) {
    int i = 0;
    if (E->params.load != LLM_LOAD_ALL) { llm__fail(&E->err, LLM_ERR_INVALID_ARG, "the engine has no weights loaded (LLM_LOAD_VOCAB or LLM_LOAD_METADATA)"); return -1; }
    while (i < E->n_seqs && E->seqs[i].used) i++;
    if (i == E->n_seqs) {
        struct llm__seq *s = realloc(E->seqs, (size_t)(E->n_seqs + 1) * sizeof(*s));
        if (!s) { llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"); return -1; }
        E->seqs = s;
        E->n_seqs++;
    }
    memset(&E->seqs[i], 0, sizeof(E->seqs[i]));
    E->seqs[i].used = true;
    return i;
}

// Every id that enters a sequence (prompt tokens, tokenizer output, llm_seq_eval's tokens, stop
// token ids) is checked against the vocabulary first: an id out of range would index the
// embedding table outside its rows. The first bad id is the error (LLM_ERR_INVALID_ARG).
static bool llm__ids_ok(llm_engine *E, const int32_t *ids, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= E->model.n_vocab)
            return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "%s: token id %d (at %d) is out of range [0, %d)", what,
                             (int)ids[i], i, E->model.n_vocab), false;
    return true;
}

static struct llm__seq *llm__seq_get(const llm_engine *E, int seq) {
    return seq >= 0 && seq < E->n_seqs && E->seqs[seq].used ? &E->seqs[seq] : NULL;
}

void llm_seq_free(llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    if (s) llm__blocks_release(&E->blocks, s);
}

int llm_seq_len(llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    if (!s) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no sequence %d", seq), -1;
    return s->len;
}

// The tokens go through the step pipeline without the scheduler: blocks for all of them first,
// then chunks of at most max_num_batched_tokens (LLM__MAX_STEP_OUT with all_logits: one logit
// row per token), each prepared and executed as a step of one sequence.
enum llm_status llm_seq_eval(llm_engine *E, int seq, const int32_t *tokens, int n, float *logits, int all_logits) {
    struct llm__seq *s = llm__seq_get(E, seq);
    const struct llm__model *m = &E->model;
    enum llm_status st = LLM_OK;
    if (!s) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no sequence %d", seq);
    if (n < 1 || !tokens) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no tokens to evaluate");
    if (!llm__ids_ok(E, tokens, n, "seq_eval")) return E->err.status;
    if ((int64_t)s->len + n > E->max_model_len)
        return llm__fail(&E->err, LLM_ERR_CONTEXT, "%d tokens do not fit in the context: %d used of %d",
                         n, s->len, E->max_model_len);
    if (!llm__blocks_can_allocate(&E->blocks, s, n))
        return llm__fail(&E->err, LLM_ERR_CONTEXT, "KV cache is full: %lld more blocks of %d tokens needed, %d free of %d",
                         (long long)llm__blocks_needed(&E->blocks, s, n), E->blocks.block_size,
                         llm__blocks_available(&E->blocks), E->blocks.n_blocks);
    if (!llm__blocks_allocate(&E->blocks, s, n)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    const int chunk = all_logits ? LLM__MAX_STEP_OUT : E->params.max_num_batched_tokens;
    for (int i0 = 0; i0 < n && st == LLM_OK; i0 += chunk) {
        int T = LLM__MIN(chunk, n - i0);
        int n_logits = !logits ? 0 : all_logits ? T : i0 + T == n;
        float *out = logits && all_logits ? logits + (size_t)i0 * (size_t)m->n_vocab : logits;
        st = llm__seq_eval_chunk(E, s, tokens + i0, T, n_logits, out);
    }
    if (st != LLM_OK) llm__blocks_truncate(&E->blocks, s, s->len);   // the blocks of what was not computed
    return st;
}

// === serving: requests, the scheduler, steps ===
//
// A step is five calls with one job each (nano-vllm's Scheduler, BlockManager and ModelRunner):
//   llm__schedule     which requests run and how many tokens each, within max_num_seqs and
//                     max_num_batched_tokens; KV blocks for them (llm__blocks); preemptions.
//                     Its decisions are plain data: a struct llm__plan.
//   llm__prepare      the step's arrays from the plan (tokens, positions, sequence indices, KV
//                     slots, block tables, logit rows): the struct llm__step the backend reads.
//   llm__execute      the forward pass (llm__forward).
//   llm__postprocess  sampling, appending, stop checks; blocks that became full enter the prefix
//                     cache; finished requests free their blocks.
//   llm__collect      the step's outputs.
// llm_seq_eval runs prepare and execute on plans of one sequence, without the scheduler.
//
// The policy is vLLM's: each step spends a budget of max_num_batched_tokens on the running
// requests first (a decode is one token; an unfinished prompt continues in chunks), then admits
// waiting requests (FCFS, or by priority then arrival) while the budget and max_num_seqs allow,
// reusing cached prefix blocks. When a running request needs a block and none is left, the
// latest admitted (or lowest-priority) running request is preempted: its blocks are freed and its
// tokens, prompt and output so far, are computed again when it is readmitted, so its output does
// not change. A step that preempted admits nobody. One forward pass computes every planned token.
//
// Why requests end (llm_output.finish_reason):
//   LLM_FINISH_STOP    an end-of-generation token (unless ignore_eos), a stop token, a stop string
//   LLM_FINISH_LENGTH  max_tokens
//   LLM_FINISH_ABORT   llm_abort_request
//   LLM_FINISH_ERROR   only in llm_generate's results: a prompt that could not be added, or what
//                      had not finished when the backend failed
//   LLM_FINISH_CONTEXT before max_tokens: max_model_len; a request the KV cache cannot hold even
//                      when it runs alone (also when no host memory is left for its tokens)

#define LLM__MAX_LOGPROBS 20   // llm_request_params.logprobs at most

enum llm__req_state { LLM__REQ_WAITING, LLM__REQ_RUNNING, LLM__REQ_DONE };

// --- stop strings: one automaton over all of a request's stop strings (Aho-Corasick) ---
//
// The trie of the strings, each node a prefix of some string; a node's fail link is the node of
// the longest proper suffix of its prefix that is also a prefix of some string. Children are found
// in a hash table keyed by (node, byte). Scanning the text byte by byte keeps the node of the
// longest end of the text that is a prefix of a stop string: every byte moves down one edge or
// follows fail links up (each step up shortens that end, which only moves down one byte per byte
// read), so the whole text costs O(its length) however many or long the strings are, and each
// new token costs only what its bytes can complete.
#define LLM__MAX_STOP 64            // stop strings per request, at most
#define LLM__MAX_STOP_BYTES 16384   // their bytes in all, at most

struct llm__stop_node {
    int32_t parent, fail;
    int32_t depth;     // the prefix's length
    int32_t out;       // the longest stop string that ends the prefix (0: none)
    uint8_t byte;      // the edge from the parent
    bool final;        // the prefix is a whole stop string
};

struct llm__stops {
    struct llm__stop_node *node;   // [n_node]; node 0 is the empty prefix
    int n_node;
    uint32_t *key;     // [mask + 1] hash table: (node << 8 | byte) + 1, 0 for an empty slot
    int32_t *child;    // [mask + 1] the child of that key
    uint32_t mask;
    int shift;         // 64 - log2(mask + 1)
    uint64_t mult;     // the hash's seed, drawn for each automaton: the request chooses every key (its
                       // bytes), so a fixed hash could be steered to put them in one run of slots
    uint64_t steps;    // edges and fail links taken (the tests check it stays linear)
    uint64_t probes;   // hash table slots looked at (the tests check they stay few)
    // the n choices of a request (added one after the other with the same strings) share one
    // automaton: its strings, to compare, and how many requests hold it
    char *strs;        // the strings, each with its NUL
    size_t strs_len;
    int n_strs, refs;
    struct llm__stop_pos { int32_t state; size_t scanned; } pos;   // the tests' own text (a request has its own)
};

static void llm__stops_free(struct llm__stops *a) {
    free(a->strs);
    free(a->node);
    free(a->key);
    free(a->child);
    memset(a, 0, sizeof(*a));
}

static uint32_t llm__stops_slot(struct llm__stops *a, uint32_t key) {
    uint64_t x = (uint64_t)key ^ a->mult;   // mixed with the automaton's own seed (a request cannot aim at a slot)
    x = (x ^ x >> 33) * 0xff51afd7ed558ccdull;
    x = (x ^ x >> 33) * 0xc4ceb9fe1a85ec53ull;
    uint32_t h = (uint32_t)((x ^ x >> 33) >> a->shift);
    for (a->probes++; a->key[h] && a->key[h] != key; a->probes++) h = (h + 1) & a->mask;
    return h;
}

static int32_t llm__stops_child(struct llm__stops *a, int32_t v, uint8_t c) {
    uint32_t h = llm__stops_slot(a, ((uint32_t)v << 8 | c) + 1);
    return a->key[h] ? a->child[h] : -1;
}

// Whether a's strings are stops[0..n).
static bool llm__stops_same(const struct llm__stops *a, const char *const *stops, int n) {
    if (a->n_strs != n) return false;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t m = strlen(stops[i]) + 1;
        if (at + m > a->strs_len || memcmp(a->strs + at, stops[i], m)) return false;
        at += m;
    }
    return true;
}

// The automaton of stops[0..n) (non-empty strings, checked by the caller); false: out of memory.
static bool llm__stops_build(struct llm__stops *a, const char *const *stops, int n) {
    memset(a, 0, sizeof(*a));
    size_t total = 0, with_nuls = 1;
    for (int i = 0; i < n; i++) total += strlen(stops[i]), with_nuls += strlen(stops[i]) + 1;
    if (!(a->strs = malloc(with_nuls))) return false;
    for (int i = 0; i < n; i++) {
        size_t m = strlen(stops[i]) + 1;
        memcpy(a->strs + a->strs_len, stops[i], m);
        a->strs_len += m;
    }
    a->n_strs = n;
    a->refs = 1;
    uint32_t cap = 16;
    int bits = 4;
    while (cap < total + total / 3 + 2) cap *= 2, bits++;   // at most three quarters full
    a->node = calloc(total + 1, sizeof(*a->node));
    a->key = calloc(cap, sizeof(*a->key));
    a->child = malloc(cap * sizeof(*a->child));
    if (!a->node || !a->key || !a->child) return llm__stops_free(a), false;
    a->mask = cap - 1;
    a->shift = 64 - bits;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)(uintptr_t)a ^ (uint64_t)ts.tv_nsec << 24 ^ (uint64_t)ts.tv_sec;
    for (int i = 0; i < 2; i++) x = (x ^ x >> 31) * 0xBF58476D1CE4E5B9ull;
    a->mult = x | 1;
    a->n_node = 1;
    for (int i = 0; i < n; i++) {
        int32_t v = 0;
        for (const uint8_t *p = (const uint8_t *)stops[i]; *p; p++) {
            uint32_t key = ((uint32_t)v << 8 | *p) + 1, h = llm__stops_slot(a, key);
            if (!a->key[h]) {
                struct llm__stop_node *w = &a->node[a->n_node];
                w->parent = v, w->byte = *p, w->depth = a->node[v].depth + 1;
                a->key[h] = key;
                a->child[h] = a->n_node++;
            }
            v = a->child[h];
        }
        a->node[v].final = true;
    }
    // fail links and outputs in order of depth (a node's fail link is shallower): nodes sorted
    // by depth with a counting sort
    int32_t *order = malloc((size_t)a->n_node * sizeof(int32_t)), *start = calloc(total + 2, sizeof(int32_t));
    if (!order || !start) return free(order), free(start), llm__stops_free(a), false;
    for (int v = 0; v < a->n_node; v++) start[a->node[v].depth + 1]++;
    for (size_t d = 1; d <= total + 1; d++) start[d] += start[d - 1];
    for (int v = 0; v < a->n_node; v++) order[start[a->node[v].depth]++] = v;
    for (int i = 1; i < a->n_node; i++) {
        struct llm__stop_node *w = &a->node[order[i]];
        int32_t f = -1;
        if (w->parent != 0)
            for (int32_t u = a->node[w->parent].fail; f < 0; u = a->node[u].fail) {
                f = llm__stops_child(a, u, w->byte);
                if (u == 0) break;
            }
        w->fail = f < 0 ? 0 : f;
        w->out = w->final ? w->depth : a->node[w->fail].out;
    }
    free(order);
    free(start);
    return true;
}

// Scans text[pos->scanned..n) (the text may only have grown since the last call at pos): the
// offset of the earliest stop string that ends in it, or -1; *hold: the length of the longest end
// of the text that could still become a stop string (not to be shown yet).
static long llm__stops_scan(struct llm__stops *a, struct llm__stop_pos *pos, const char *text, size_t n, size_t *hold) {
    long best = -1;
    int32_t v = pos->state;
    for (size_t i = pos->scanned; i < n; i++) {
        uint8_t c = (uint8_t)text[i];
        int32_t w;
        while ((w = llm__stops_child(a, v, c)) < 0 && v != 0) { v = a->node[v].fail; a->steps++; }
        v = w < 0 ? 0 : w;
        a->steps++;
        // the longest stop string ending here starts earliest among those ending here
        long at = (long)(i + 1) - a->node[v].out;
        if (a->node[v].out && (best < 0 || at < best)) best = at;
    }
    pos->state = v;
    pos->scanned = n;
    *hold = (size_t)a->node[v].depth;
    return best;
}

struct llm__req {
    int id;
    enum llm__req_state state;
    int32_t *tokens;            // [cap_tokens] the prompt, then the output
    int n_tokens, cap_tokens, n_prompt;
    struct llm_logprob *logprobs;   // [cap_tokens - n_prompt][p.logprobs] per output token (p.logprobs > 0)
    float *token_logprobs;      // [cap_tokens - n_prompt]: each output token's own (p.logprobs > 0)
    int n_computed;             // tokens whose K and V are in the cache
    int n_cached;               // prompt tokens found in the prefix cache at first admission
    bool admitted_once;
    struct llm__seq seq;
    llm_sampler *smp;
    struct llm_request_params p;   // n_stop / n_stop_token_ids: of the copies below
    struct llm__stops *stops;   // the automaton of the stop strings (p.n_stop of them), maybe shared
    struct llm__stop_pos stop_pos;   // where this request's text is in it
    int32_t *stop_ids;          // a copy, sorted, without repeats (p.n_stop_token_ids of them)
    long long arrival;          // order of arrival
    double t_arrival, t_first, t_last;
    float *itl;
    int n_itl, cap_itl;
    struct llm_text_stream ts;
    struct llm__outbuf text;    // text so far (a stop string cut off)
    size_t text_sent;           // bytes of it reported
    size_t text_hold;           // bytes at its end that may start a stop string (not reported yet)
    int out_sent;               // tokens reported
    enum llm_finish_reason finish;   // LLM_FINISH_NONE while running
    char *error;                // LLM_FINISH_ERROR: why (NULL when there was no memory for it)
    int n_preempt;
    struct llm__seq dseq;       // draft model: the KV of its tokens in the draft's cache
    llm_sampler *dsmp;          // draft model: the request's sampling on the draft's logits
    int spec_q;                 // draft model, this step: its rows of E->spec_q (-1: none)
    double spec_kept, spec_missed;   // speculation: drafts kept, and verifications that rejected one
                                     // (decayed counts; the acceptance estimate)
    bool reported_done;
    int wait_pos;               // its index in the waiting heap E->q_wait, -1 when not waiting
    uint64_t ngram_steps;       // tokens compared by its n-gram lookups (the tests check the bound)
};

static void llm__req_free(llm_engine *E, struct llm__req *r) {
    if (!r) return;
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->draft) llm__blocks_release(&E->draft->blocks, &r->dseq);
    llm_sampler_free(r->smp);
    llm_sampler_free(r->dsmp);
    if (r->stops && --r->stops->refs == 0) {
        llm__stops_free(r->stops);
        free(r->stops);
    }
    free(r->stop_ids);
    free(r->tokens);
    free(r->logprobs);
    free(r->token_logprobs);
    free(r->itl);
    free(r->text.p);
    free(r->error);
    free(r);
}

struct llm_request_params llm_request_params_default(void) {
    struct llm_request_params p = {0};
    p.sampling = llm_sampling_params_default();
    p.max_tokens = 16;
    p.add_special = 1;
    return p;
}

static struct llm__req *llm__req_find(const llm_engine *E, int id) {
    for (int i = 0; i < E->n_reqs; i++) if (E->reqs[i]->id == id) return E->reqs[i];
    return NULL;
}

// Scheduling order: FCFS by arrival, or priority (lower first) then arrival.
static bool llm__req_before(const llm_engine *E, const struct llm__req *a, const struct llm__req *b) {
    if (E->params.scheduling_policy == LLM_SCHED_PRIORITY && a->p.priority != b->p.priority) return a->p.priority < b->p.priority;
    return a->arrival < b->arrival;
}

// The waiting requests: a binary min-heap in scheduling order, E->q_wait[0] the first of them
// (r->wait_pos is r's index, -1 when not waiting). A request enters when it is added or
// preempted and leaves when admitted or finished, each in O(log n), so that admitting costs
// the same with any number of waiting requests under either policy (sorting them all on every
// step was quadratic under the priority policy: 20,000 requests took 200 s instead of 4).
static void llm__wait_put(llm_engine *E, int i, struct llm__req *r) {
    E->q_wait[i] = r;
    r->wait_pos = i;
}

// Moves r (at index i) up or down to its place.
static void llm__wait_sift(llm_engine *E, int i, struct llm__req *r) {
    while (i > 0 && llm__req_before(E, r, E->q_wait[(i - 1) / 2])) {
        llm__wait_put(E, i, E->q_wait[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (int c; (c = 2 * i + 1) < E->n_wait; i = c) {
        if (c + 1 < E->n_wait && llm__req_before(E, E->q_wait[c + 1], E->q_wait[c])) c++;
        if (!llm__req_before(E, E->q_wait[c], r)) break;
        llm__wait_put(E, i, E->q_wait[c]);
    }
    llm__wait_put(E, i, r);
}

// Room for it: q_wait has cap_reqs entries, and every waiting request is in E->reqs.
static void llm__wait_push(llm_engine *E, struct llm__req *r) {
    assert(E->n_wait < E->cap_reqs);
    llm__wait_sift(E, E->n_wait++, r);
}

static void llm__wait_remove(llm_engine *E, struct llm__req *r) {
    int i = r->wait_pos;
    if (i < 0) return;
    r->wait_pos = -1;
    struct llm__req *last = E->q_wait[--E->n_wait];
    if (i < E->n_wait) llm__wait_sift(E, i, last);
}

// What one step computes: the scheduler's decisions as plain data, in the order of the step's
// sequences (their logit rows come in the same order).
//
// Each entry computes n_compute tokens of a sequence from position `start` and wants the logits
// of its last n_logits tokens. Today n_logits is 0 (a prompt chunk that does not reach the end)
// or 1 (the next token is sampled from the last row). Speculative decoding fits in as it is:
// the request's tokens end with k draft tokens, the entry computes them with the last accepted
// token (n_compute = 1 + k) and wants all their rows (n_logits = 1 + k); postprocess verifies the
// drafts row by row and gives back the KV of the rejected ones with llm__blocks_truncate before
// the full blocks are committed.
struct llm__plan_entry {
    struct llm__req *r;         // NULL in llm_seq_eval's plans
    struct llm__seq *seq;       // its blocks already hold start + n_compute tokens
    const int32_t *tokens;      // [n_compute] the tokens to compute, at positions start, start + 1, ...
    int start;                  // tokens whose K and V are in the cache before the step
    int n_compute;              // a prompt chunk, 1 for a decode, 1 + k to verify k drafts
    int n_logits;               // rows wanted: those of the last n_logits computed tokens
    int n_draft;                // k: the drafts among the computed tokens (after the first)
};

struct llm__plan {
    struct llm__plan_entry *e;  // [n] (at most max_num_seqs)
    int n;
    int n_tokens;               // sum of n_compute (at most max_num_batched_tokens)
    int n_logits;               // sum of n_logits (at most acts.max_out)
    int n_preempted;            // requests preempted to make room (freed, waiting again)
    int n_drafts;               // sum of n_draft: rows beyond one per sequence
};

// The memory of serving: the block manager over the KV cache's blocks, the arrays of one step.
static enum llm_status llm__serving_init(llm_engine *E, struct llm__err *e) {
    enum llm_status st = llm__blocks_init(&E->blocks, E->kv.n_blocks, E->kv.block_size,
                                          E->params.enable_prefix_caching != 0, e);
    if (st) return st;
    size_t T = (size_t)E->acts.max_tokens;
    E->step_logits = malloc((size_t)E->acts.max_out * (size_t)E->model.n_vocab * sizeof(float));
    if (E->params.speculative_model && !(E->spec_de = calloc(2 * LLM__SPEC_REQS, sizeof(*E->spec_de))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    E->st_tokens = malloc(T * sizeof(int32_t));
    E->st_pos = malloc(T * sizeof(int32_t));
    E->st_seq = malloc(T * sizeof(int32_t));
    E->st_slot = malloc(T * sizeof(int32_t));
    E->st_out = malloc(T * sizeof(int32_t));
    if (!E->step_logits || !E->st_tokens || !E->st_pos || !E->st_seq || !E->st_slot || !E->st_out)
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return LLM_OK;
}

// Everything that holds blocks (requests, llm_seq_new's sequences), then the rest.
static void llm__serving_free(llm_engine *E) {
    for (int i = 0; i < E->n_reqs; i++) llm__req_free(E, E->reqs[i]);
    free(E->spec_de);
    for (int i = 0; i < E->n_seqs; i++) if (E->seqs[i].used) llm__blocks_release(&E->blocks, &E->seqs[i]);
    free(E->reqs);
    free(E->q_run);
    free(E->q_wait);
    free(E->plan);
    free(E->seqs);
    free(E->outs);
    free(E->out_off);
    free(E->arena.p);
    free(E->step_logits);
    free(E->st_tokens);
    free(E->st_pos);
    free(E->st_seq);
    free(E->st_slot);
    free(E->st_out);
    free(E->st_tables);
    llm__blocks_free(&E->blocks);
}

// --- adding requests ---

// It ends: blocks that are full enter the prefix cache, then all of its blocks are freed.
static void llm__req_finish(llm_engine *E, struct llm__req *r, enum llm_finish_reason why) {
    llm__wait_remove(E, r);
    r->finish = why;
    r->state = LLM__REQ_DONE;
    if (!r->t_last) r->t_last = llm__now();
    llm__blocks_commit(&E->blocks, &r->seq, r->tokens);
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->draft) llm__blocks_release(&E->draft->blocks, &r->dseq);
}

// Checks a request before anything is allocated (LLM_ERR_INVALID_ARG, the message in E).
static bool llm__req_params_ok(llm_engine *E, const struct llm_prompt *prompt, const struct llm_request_params *p) {
    struct llm__err *e = &E->err;
    if (E->params.load != LLM_LOAD_ALL)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "the engine has no weights loaded (LLM_LOAD_VOCAB or LLM_LOAD_METADATA)"), false;
    if (!prompt || (!prompt->text && (!prompt->tokens || prompt->n_tokens < 1)))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: no prompt"), false;
    if (p->max_tokens < 0 || p->n_stop < 0 || p->n_stop_token_ids < 0 || (p->n_stop && !p->stop) ||
        (p->n_stop_token_ids && !p->stop_token_ids))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: bad parameters"), false;
    if (p->logprobs < 0 || p->logprobs > LLM__MIN(LLM__MAX_LOGPROBS, E->model.n_vocab))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: logprobs must be in [0, %d] (got %d)",
                         LLM__MIN(LLM__MAX_LOGPROBS, E->model.n_vocab), p->logprobs), false;
    if (p->num_speculative_tokens < -1 || p->num_speculative_tokens > LLM__MAX_SPEC)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: num_speculative_tokens must be in [-1, %d] (got %d)", LLM__MAX_SPEC,
                         p->num_speculative_tokens), false;
    if (p->n_stop > LLM__MAX_STOP)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: %d stop strings: at most %d", p->n_stop, LLM__MAX_STOP), false;
    size_t stop_bytes = 0;
    for (int i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0]) return llm__fail(e, LLM_ERR_INVALID_ARG, "request: stop string %d is empty", i), false;
        stop_bytes += strnlen(p->stop[i], LLM__MAX_STOP_BYTES + 1);
        if (stop_bytes > LLM__MAX_STOP_BYTES)
            return llm__fail(e, LLM_ERR_INVALID_ARG, "request: the stop strings are longer than %d bytes in all",
                             LLM__MAX_STOP_BYTES), false;
    }
    if (!llm__ids_ok(E, p->stop_token_ids, p->n_stop_token_ids, "request: stop_token_ids")) return false;
    if (!llm__sampling_params_ok(&p->sampling))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: bad sampling parameters (negative or not a number, "
                                                 "top_p or min_p outside [0, 1])"), false;
    return true;
}

// Room for cap tokens, and the log-probabilities of the output ones when they are asked for.
static bool llm__req_reserve_tokens(struct llm__req *r, int cap) {
    int32_t *t = realloc(r->tokens, (size_t)cap * sizeof(int32_t));
    if (!t) return false;
    r->tokens = t;
    if (r->p.logprobs > 0) {
        size_t n = (size_t)(cap - r->n_prompt) * (size_t)r->p.logprobs;
        struct llm_logprob *lp = realloc(r->logprobs, n * sizeof(*lp));
        if (!lp) return false;
        r->logprobs = lp;
        float *tl = realloc(r->token_logprobs, (size_t)(cap - r->n_prompt) * sizeof(float));
        if (!tl) return false;
        r->token_logprobs = tl;
    }
    r->cap_tokens = cap;
    return true;
}

// The prompt's tokens (text tokenized as the parameters say), with room for the output; rejects a
// prompt that is empty, has an id out of range, or does not fit the context or the KV cache.
static enum llm_status llm__req_set_prompt(llm_engine *E, struct llm__req *r, const struct llm_prompt *prompt) {
    struct llm__err *e = &E->err;
    int n = prompt->n_tokens, flags = 0;
    size_t len = prompt->text ? strlen(prompt->text) : 0;
    if (prompt->text) {
        // a text too long for the context in any tokenization is refused before it is tokenized
        size_t k = E->vocab.max_token_bytes;
        if (k && len && (len - 1) / k + 1 > (size_t)E->max_model_len)
            return llm__fail(e, LLM_ERR_CONTEXT, "request: the prompt's %zu bytes are more than max_model_len (%d) tokens "
                             "can hold (a token of this vocabulary stands for at most %zu bytes)", len, E->max_model_len, k);
        flags = (r->p.add_special >= 0 ? LLM_TOKENIZE_ADD_SPECIAL : 0) | (r->p.parse_special > 0 ? LLM_TOKENIZE_PARSE_SPECIAL : 0);
        if ((n = llm__tokenize(&E->vocab, prompt->text, len, flags, NULL, 0, e)) < 0) return e->status;
    } else if (!llm__ids_ok(E, prompt->tokens, n, "request: prompt")) {
        return e->status;
    }
    if (n < 1) return llm__fail(e, LLM_ERR_INVALID_ARG, "request: the prompt has no tokens");
    if (n > E->max_model_len)
        return llm__fail(e, LLM_ERR_CONTEXT, "request: the prompt has %d tokens, more than max_model_len (%d)", n, E->max_model_len);
    int blocks = (n + 1 + E->blocks.block_size - 1) / E->blocks.block_size;   // with its first output token
    if (blocks > E->blocks.n_blocks)
        return llm__fail(e, LLM_ERR_CONTEXT, "request: the prompt needs %d KV blocks, the cache has %d", blocks, E->blocks.n_blocks);
    r->n_tokens = r->n_prompt = n;
    // room for the output too, as far as the context lets it grow (llm__req_append grows it on)
    int out = LLM__MIN(LLM__MIN(r->p.max_tokens, E->max_model_len - n), 1 << 16);
    if (!llm__req_reserve_tokens(r, n + out + 1)) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    if (prompt->text) llm__tokenize(&E->vocab, prompt->text, len, flags, r->tokens, n, e);
    else memcpy(r->tokens, prompt->tokens, (size_t)n * sizeof(int32_t));
    // the tokenizer's ids too (the vocabulary was checked at load to encode every byte)
    return llm__ids_ok(E, r->tokens, n, "request: tokenized prompt") ? LLM_OK : e->status;
}

// The stop strings' automaton (the last request's when it has the same strings: the choices of
// one request share it) and a copy of the stop ids (the caller's may go away); false: out of
// memory.
static bool llm__req_copy_stops(llm_engine *E, struct llm__req *r, const struct llm_request_params *p) {
    if (p->n_stop) {
        struct llm__req *last = E->n_reqs ? E->reqs[E->n_reqs - 1] : NULL;
        if (last && last->stops && llm__stops_same(last->stops, p->stop, p->n_stop)) {
            r->stops = last->stops;
            r->stops->refs++;
        } else {
            if (!(r->stops = malloc(sizeof(*r->stops)))) return false;
            if (!llm__stops_build(r->stops, p->stop, p->n_stop)) return free(r->stops), r->stops = NULL, false;
        }
        r->p.n_stop = p->n_stop;
    }
    if (p->n_stop_token_ids) {
        if (!(r->stop_ids = malloc((size_t)p->n_stop_token_ids * sizeof(int32_t)))) return false;
        memcpy(r->stop_ids, p->stop_token_ids, (size_t)p->n_stop_token_ids * sizeof(int32_t));
        // sorted and without repeats: each token is looked up in O(log n_vocab), however long
        // the list the request brought
        qsort(r->stop_ids, (size_t)p->n_stop_token_ids, sizeof(int32_t), llm__cmp_i32);
        int n = 0;
        for (int i = 0; i < p->n_stop_token_ids; i++)
            if (n == 0 || r->stop_ids[i] != r->stop_ids[n - 1]) r->stop_ids[n++] = r->stop_ids[i];
        r->p.n_stop_token_ids = n;
    }
    return true;
}

// Room for one more request in the engine's list, queues and plan; false: out of memory.
static bool llm__reqs_reserve(llm_engine *E) {
    if (E->n_reqs < E->cap_reqs) return true;
    int cap = E->cap_reqs ? 2 * E->cap_reqs : 16;
    struct llm__req **q[3] = {realloc(E->reqs, (size_t)cap * sizeof(*q[0])), NULL, NULL};
    if (q[0]) E->reqs = q[0];
    if ((q[1] = realloc(E->q_run, (size_t)cap * sizeof(*q[1])))) E->q_run = q[1];
    if ((q[2] = realloc(E->q_wait, (size_t)cap * sizeof(*q[2])))) E->q_wait = q[2];
    struct llm__plan_entry *pl = realloc(E->plan, (size_t)cap * sizeof(*pl));
    if (pl) E->plan = pl;
    if (!q[0] || !q[1] || !q[2] || !pl) return false;
    E->cap_reqs = cap;
    return true;
}

int llm_add_request(llm_engine *E, const struct llm_prompt *prompt, const struct llm_request_params *params) {
    struct llm_request_params p = params ? *params : llm_request_params_default();
    if (!llm__req_params_ok(E, prompt, &p)) return -1;
    struct llm__req *r = calloc(1, sizeof(*r));
    if (!r) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1;
    r->wait_pos = -1;
    r->p = p;
    r->p.stop = NULL;
    r->p.stop_token_ids = NULL;
    r->p.n_stop = r->p.n_stop_token_ids = 0;   // until the copies exist
    enum llm_status st = llm__req_set_prompt(E, r, prompt);
    struct llm_sampling_params dp = p.sampling;   // the draft's draws: the same chain, its own random numbers
    dp.seed ^= 0x9E3779B97F4A7C15ull;
    if (st == LLM_OK && (!(r->smp = llm_sampler_create(&p.sampling, E->model.n_vocab)) || !llm__req_copy_stops(E, r, &p) ||
                         (E->draft && !(r->dsmp = llm_sampler_create(&dp, E->model.n_vocab))) || !llm__reqs_reserve(E)))
        st = llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");   // the parameters were checked above
    if (st != LLM_OK) {
        llm__req_free(E, r);
        return -1;
    }
    for (int i = 0; i < r->n_prompt; i++) llm_sampler_accept(r->smp, r->tokens[i]);
    r->id = E->next_id++;
    r->arrival = E->n_arrivals++;
    r->t_arrival = llm__now();
    r->state = LLM__REQ_WAITING;
    E->reqs[E->n_reqs++] = r;
    llm__wait_push(E, r);
    // max_tokens 0: an empty completion, reported by the next step; the prompt is not computed
    if (p.max_tokens == 0) llm__req_finish(E, r, LLM_FINISH_LENGTH);
    return r->id;
}

// --- the life of a request ---

enum llm_status llm_abort_request(llm_engine *E, int id) {
    struct llm__req *r = llm__req_find(E, id);
    if (!r || r->state == LLM__REQ_DONE) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no unfinished request %d", id);
    // what was held back is final now: the start of a possible stop string, a partial character
    llm__stream_feed(&r->ts, "", 0, &r->text, true);
    r->text_hold = 0;
    llm__req_finish(E, r, LLM_FINISH_ABORT);
    return LLM_OK;
}

// A request counts until the step that reports it finished: one that ended outside a step
// (max_tokens 0, llm_abort_request) is still to be reported, and a `while unfinished: step` loop
// must not miss that report.
int llm_has_unfinished_requests(const llm_engine *E) {
    for (int i = 0; i < E->n_reqs; i++) if (!E->reqs[i]->reported_done) return 1;
    return 0;
}

// Frees a running request's blocks; it waits to be computed again from its first token.
// A running request back to waiting, its blocks freed: computed again from its first token.
static void llm__req_requeue(llm_engine *E, struct llm__req *r) {
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->draft) llm__blocks_release(&E->draft->blocks, &r->dseq);
    r->n_computed = 0;
    r->state = LLM__REQ_WAITING;
    llm__wait_push(E, r);
}

static void llm__req_preempt(llm_engine *E, struct llm__req *r) {
    llm__req_requeue(E, r);
    r->n_preempt++;
    E->n_preemptions++;
}

// The text a new token adds; the stop strings; what is safe to report.
static void llm__req_text(struct llm__req *r, const struct llm__vocab *v, int32_t tok, bool push, bool last) {
    if (push) llm__stream_push(v, &r->ts, tok, 0, &r->text);
    if (last) llm__stream_feed(&r->ts, "", 0, &r->text, true);
}

// Checks the stop strings in the text added since the last check; cuts the text at the first one.
static bool llm__req_stop_string(struct llm__req *r, size_t *hold) {
    long best = llm__stops_scan(r->stops, &r->stop_pos, r->text.p, r->text.n, hold);
    if (best < 0) return false;
    r->text.n = (size_t)best;
    *hold = 0;
    return true;
}

// The time of a new output token: the first one's, or the gap since the previous one.
static void llm__req_time(struct llm__req *r, double now) {
    if (r->n_tokens - r->n_prompt == 1) r->t_first = now;
    else {
        if (r->n_itl == r->cap_itl) {
            int cap = r->cap_itl ? 2 * r->cap_itl : 64;
            float *t = realloc(r->itl, (size_t)cap * sizeof(float));
            if (t) { r->itl = t; r->cap_itl = cap; }
        }
        if (r->n_itl < r->cap_itl) r->itl[r->n_itl++] = (float)((now - r->t_last) * 1e3);
    }
    r->t_last = now;
}

// Whether the token just appended ends the request (and its text up to now).
static void llm__req_check_end(llm_engine *E, struct llm__req *r, int32_t tok) {
    bool stop_tok = !r->p.ignore_eos && llm_token_is_eog(E, tok);
    stop_tok |= r->p.n_stop_token_ids &&
                bsearch(&tok, r->stop_ids, (size_t)r->p.n_stop_token_ids, sizeof(int32_t), llm__cmp_i32) != NULL;
    bool at_max = r->n_tokens - r->n_prompt >= r->p.max_tokens, at_len = at_max || r->n_tokens >= E->max_model_len;
    size_t hold = 0;
    llm__req_text(r, &E->vocab, tok, !stop_tok, stop_tok || at_len);
    bool stop_str = r->p.n_stop && llm__req_stop_string(r, &hold);
    r->text_hold = stop_str || stop_tok || at_len ? 0 : hold;
    if (stop_tok || stop_str) llm__req_finish(E, r, LLM_FINISH_STOP);
    else if (at_len) llm__req_finish(E, r, at_max ? LLM_FINISH_LENGTH : LLM_FINISH_CONTEXT);
}

// The logit row r was to sample from is not finite (NaN or infinity: the model's weights or
// activations overflow, e.g. a damaged file). Computing on would give garbage tokens: r ends with
// LLM_FINISH_ERROR and a message (also the engine's error, llm_last_error), once. Its blocks are
// freed without entering the prefix cache.
static void llm__req_fail_nonfinite(llm_engine *E, struct llm__req *r) {
    llm__fail(&E->err, LLM_ERR_BACKEND, "request %d: the model computed logits that are not finite (NaN or "
              "infinity) after %d tokens: its weights or activations overflow (a damaged or badly converted "
              "model file?)", r->id, r->n_tokens);
    free(r->error);
    r->error = llm__strndup(E->err.msg, strlen(E->err.msg));
    llm__stream_feed(&r->ts, "", 0, &r->text, true);   // what was held back is final
    r->text_hold = 0;
    r->finish = LLM_FINISH_ERROR;
    r->state = LLM__REQ_DONE;
    r->t_last = llm__now();
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->draft) llm__blocks_release(&E->draft->blocks, &r->dseq);
}

// After a token was sampled from a logit row: append it (and the row's top log-probabilities when
// asked), record its time, decide whether the request ends.
static void llm__req_append(llm_engine *E, struct llm__req *r, int32_t tok, const float *row, double now) {
    if (r->n_tokens == r->cap_tokens && !llm__req_reserve_tokens(r, 2 * r->cap_tokens)) {
        llm__req_finish(E, r, LLM_FINISH_CONTEXT);   // no memory for more tokens: it ends with those it has
        return;
    }
    int k = r->p.logprobs;
    if (k > 0) {
        size_t at = (size_t)(r->n_tokens - r->n_prompt);
        double lse = llm__top_logprobs(row, E->model.n_vocab, k, r->logprobs + at * (size_t)k);
        r->token_logprobs[at] = (float)((double)row[tok] - lse);
    }
    r->tokens[r->n_tokens++] = tok;
    llm__req_time(r, now);
    llm__req_check_end(E, r, tok);
}

// --- schedule: which requests run, how many tokens each ---

static int llm__req_cmp_priority(const void *x, const void *y) {
    const struct llm__req *a = *(struct llm__req *const *)x, *b = *(struct llm__req *const *)y;
    if (a->p.priority != b->p.priority) return a->p.priority < b->p.priority ? -1 : 1;
    return (a->arrival > b->arrival) - (a->arrival < b->arrival);
}

// The running requests in scheduling order. E->reqs is in order of arrival (requests are appended
// as they come, and leave without reordering), so FCFS needs no sorting; under the priority policy
// they are sorted (at most max_num_seqs of them). Returns how many.
static int llm__queue_running(const llm_engine *E, struct llm__req **q) {
    int n = 0;
    for (int i = 0; i < E->n_reqs; i++) if (E->reqs[i]->state == LLM__REQ_RUNNING) q[n++] = E->reqs[i];
    if (E->params.scheduling_policy == LLM_SCHED_PRIORITY) qsort(q, (size_t)n, sizeof(*q), llm__req_cmp_priority);
    return n;
}

// Requests reported as finished in the previous step leave (their outputs pointed into them).
static void llm__reqs_reap(llm_engine *E) {
    int w = 0;
    for (int i = 0; i < E->n_reqs; i++) {
        struct llm__req *r = E->reqs[i];
        if (r->state == LLM__REQ_DONE && r->reported_done) llm__req_free(E, r);
        else E->reqs[w++] = r;
    }
    E->n_reqs = w;
}

// r computes its next n tokens in this step (its blocks hold them).
static void llm__plan_add(struct llm__plan *plan, struct llm__req *r, int n) {
    struct llm__plan_entry *pe = &plan->e[plan->n++];
    *pe = (struct llm__plan_entry){r, &r->seq, r->tokens + r->n_computed, r->n_computed, n, 0, 0};
    pe->n_logits = r->n_computed + n == r->n_tokens;   // its last token is computed: the next one is sampled
    plan->n_tokens += n;
    plan->n_logits += pe->n_logits;
}

// --- speculative decoding: n-gram drafts ---
//
// A decoding request (one token to compute: the one it sampled last) may propose drafts: with
// speculative_ngram, the tokens that followed the latest earlier occurrence of its last n tokens
// (n from prompt_lookup_max down to prompt_lookup_min) in its prompt and output (prompt lookup, as
// vLLM's ngram proposer). They are written after its tokens (r->tokens[n_tokens ..], not counted
// in n_tokens) and computed with its last token in the same step; postprocess verifies them.

// k drafts for plan entry pe (a decoding request): computed with its token, a logit row each.
static void llm__plan_add_drafts(struct llm__plan *plan, struct llm__plan_entry *pe, int k) {
    pe->n_compute += k;
    pe->n_logits += k;
    pe->n_draft = k;
    plan->n_tokens += k;
    plan->n_logits += k;
    plan->n_drafts += k;
}

// pe keeps the first `have` of its drafts.
static void llm__plan_cut_drafts(struct llm__plan *plan, struct llm__plan_entry *pe, int have) {
    int cut = pe->n_draft - have;
    pe->n_compute -= cut;
    pe->n_logits -= cut;
    pe->n_draft = have;
    plan->n_tokens -= cut;
    plan->n_logits -= cut;
    plan->n_drafts -= cut;
}

// Up to k drafts for r into r->tokens[n_tokens ..] (the room is there); returns how many. At most
// (1 + n) comparisons per earlier token for each n: linear in the tokens, whatever they are.
static int llm__spec_ngram(const llm_engine *E, struct llm__req *r, int k) {
    const int32_t *t = r->tokens;
    const int n = r->n_tokens;
    for (int g = LLM__MIN(E->params.prompt_lookup_max, n - 1); g >= E->params.prompt_lookup_min; g--) {
        const int32_t *tail = t + n - g;
        // the latest earlier occurrence: starts at i < n - g, and something follows it
        for (int i = n - g - 1; i >= 0; i--) {
            r->ngram_steps++;
            if (t[i] != tail[0]) continue;
            r->ngram_steps += (uint64_t)g;
            if (memcmp(t + i, tail, (size_t)g * sizeof(int32_t))) continue;
            int m = LLM__MIN(k, n - (i + g));
            memmove(r->tokens + n, t + i + g, (size_t)m * sizeof(int32_t));
            return m;
        }
    }
    return 0;
}

// How many drafts decoding request r may have this step (0: none), within the budgets of the
// step, the request (max_tokens, the context) and its tokens' memory (room after its tokens).
static int llm__spec_propose_budget(llm_engine *E, const struct llm__plan *plan, struct llm__req *r) {
    int k = r->p.num_speculative_tokens < 0 ? 0 : r->p.num_speculative_tokens > 0
                                                      ? LLM__MIN(r->p.num_speculative_tokens, E->params.num_speculative_tokens)
                                                      : E->params.num_speculative_tokens;
    if (k <= 0 || r->n_tokens - r->n_computed != 1) return 0;
    k = LLM__MIN(k, E->params.max_num_batched_tokens - plan->n_tokens);
    k = LLM__MIN(k, E->acts.max_out - plan->n_logits);
    k = LLM__MIN(k, r->p.max_tokens - (r->n_tokens - r->n_prompt) - 1);   // the last token comes from the model
    k = LLM__MIN(k, E->max_model_len - r->n_tokens - 1);
    if (k <= 0) return 0;
    if (r->n_tokens + k > r->cap_tokens && !llm__req_reserve_tokens(r, LLM__MAX(2 * r->cap_tokens, r->n_tokens + k))) return 0;
    return k;
}

// The n-gram drafts of decoding request r this step, written after its tokens; how many.
static int llm__spec_propose(llm_engine *E, const struct llm__plan *plan, struct llm__req *r) {
    int k = llm__spec_propose_budget(E, plan, r);
    if (k <= 0) return 0;
    double t0 = llm__now();
    k = llm__spec_ngram(E, r, k);
    E->spec_draft_seconds += llm__now() - t0;
    return k;
}

// A measured duration into its running estimate *m (0: none yet): down quickly, up slowly, as
// a first step is slow (pages touched for the first time) and other programs only ever make
// steps slower, never faster.
static void llm__time_update(double *m, double t) {
    *m = *m <= 0 || t < 0.5 * *m ? t : t < *m ? 0.5 * *m + 0.5 * t : 0.9 * *m + 0.1 * LLM__MIN(t, 2 * *m);
}

// The forward pass's expected seconds for a step of T tokens, from the measured ones: a measured
// count's own, else interpolated between the nearest measured counts, else extrapolated along
// the last two (time per token at least what the largest measured step shows), else (nothing
// measured around it: none below, or none above within twice T) 10% more per token than the
// nearest measurement below, an optimistic guess that speculation then corrects by measuring.
static double llm__step_time(const llm_engine *E, int T) {
    if (T >= 1 && T <= LLM__TSTEP && E->t_step[T] > 0) return E->t_step[T];
    int lo = 0, lo2 = 0, hi = 0;
    for (int t = LLM__MIN(T, LLM__TSTEP); t >= 1; t--)
        if (E->t_step[t] > 0) {
            if (!lo) lo = t;
            else { lo2 = t; break; }
        }
    for (int t = LLM__MAX(T, 1); t <= LLM__TSTEP && !hi; t++) if (E->t_step[t] > 0) hi = t;
    if (lo && hi > 2 * T) hi = 0;   // too far above (a prompt's step) to say much about T: the guess below
    if (lo && hi) return E->t_step[lo] + (E->t_step[hi] - E->t_step[lo]) * (T - lo) / (hi - lo);
    if (hi) return E->t_step[hi];
    if (!lo) return 1.0 + 0.1 * (T - 1);
    double slope = 0.1 * E->t_step[lo];
    if (lo2 && lo >= T / 2) slope = LLM__MAX((E->t_step[lo] - E->t_step[lo2]) / (lo - lo2), E->t_step[lo] / lo * 0.25);
    return E->t_step[lo] + slope * (T - lo);
}

// How many of m drafts to verify in a step of T tokens that emits G: the k maximising
// (G + a + a^2 + ... + a^k) / t(T + k), 0 when none beats G / t(T); *gain: the expected tokens.
static int llm__spec_choose(const llm_engine *E, double G, int T, double a, int m, double *gain_out) {
    double base = G / llm__step_time(E, T), best = 0.0, gain = 0.0, ak = 1.0, k_gain = 0.0;
    int k = 0;
    *gain_out = 0.0;
    for (int j = 1; j <= m; j++) {
        ak *= a;
        gain += ak;
        double rate = (G + gain) / llm__step_time(E, T + j);
        if (rate > best) { best = rate; k = j; k_gain = gain; }
    }
    if (best < LLM__SPEC_MARGIN * base) return 0;   // what is left unmeasured must not turn a gain into a loss
    *gain_out = k_gain;
    return k;
}

static enum llm_status llm__prepare(llm_engine *E, const struct llm__plan *plan, struct llm__step *step);
static enum llm_status llm__execute(llm_engine *E, const struct llm__step *step, float *logits);

// The draft model's next token for request r from its logit row: the request's own chain on the
// draft's logits (penalties over the same history), its distribution kept in q (sampling; greedy:
// the argmax, q unused).
static int32_t llm__spec_draw(struct llm__req *r, const float *row, float *q, int n_vocab) {
    double sum;
    int m = llm__sampler_dist(r->dsmp, row, &sum);
    int32_t d = r->dsmp->idx[0];
    if (r->dsmp->p.temperature > 0.0f) {
        memset(q, 0, (size_t)n_vocab * sizeof(float));
        for (int i = 0; i < m; i++) q[r->dsmp->idx[i]] = (float)(r->dsmp->probs[i] / sum);
        d = llm__sampler_draw(r->dsmp, m, sum, -1, 0.0);
    }
    llm_sampler_accept(r->dsmp, d);
    return d;
}

// Whether a probe may force drafts: the forced rounds so far took at most LLM__SPEC_PROBE_SHARE of
// the time the steps took.
static bool llm__spec_probe_allowed(const llm_engine *E) {
    return E->t_forced <= LLM__SPEC_PROBE_SHARE * E->t_busy;
}

// speculative_model: the drafts of the step's decoding requests (at most LLM__SPEC_REQS), each
// k of them (the cost model's choice, the draft's rounds counted), drawn by the draft model in
// k rounds batched over the requests: the first round also computes what the draft's cache lacks
// of each request's tokens (its prompt, the tokens of the last step), the others one token each.
// Returns how many requests speculate; their entries and the plan are updated.
static int llm__spec_draft_model(llm_engine *E, struct llm__plan *plan) {
    llm_engine *D = E->draft;
    const int nv = E->model.n_vocab;
    struct llm__plan_entry *de = E->spec_de;
    int who[LLM__SPEC_REQS], kk[LLM__SPEC_REQS], n = 0, kmax = 0, dtok = 0, n_cu = 0, cun[LLM__SPEC_REQS];
    struct llm__req *cu[LLM__SPEC_REQS];   // requests whose draft cache catches up, partly, without drafting
    double G = plan->n_logits, td = E->t_draft, td0 = E->t_draft0 > 0 ? E->t_draft0 : td;
    if (td <= 0) {   // not measured yet: a draft round as the model's decode step, scaled by the weights read
        td = llm__step_time(E, 1) * (double)llm__model_bytes_per_token(&D->model) /
             (double)LLM__MAX(llm__model_bytes_per_token(&E->model), 1);
        if (td0 <= 0) td0 = td;
    }
    const int dmax = D->params.max_num_batched_tokens;
    // every 64th step drafts for up to 4 requests that can (a probe): the draft's time and the
    // requests' acceptance are measured again even where the choice had stopped drafting; while
    // the forced rounds so far (the first drafts, probes) took at most 2% of the steps' time, so
    // that a pair whose drafts never pay costs little more than that (a probe's draft catches up
    // on up to 64 tokens: several model tokens' time)
    const bool probe = E->n_steps % 64 == 31 && llm__spec_probe_allowed(E);
    // the acceptance so far over all requests: a request's prior; before any draft, one request
    // drafts (its catch-up and rounds measure the draft, its drafts the acceptance)
    long long prop = 0, acc = 0;
    for (int j = 0; j < LLM__MAX_SPEC; j++) { prop += E->spec_proposed[j]; acc += E->spec_accepted[j]; }
    const double a0 = (acc + 1.0) / (prop + 2.0);
    bool explore = prop == 0, any_forced = false;
    int n_probed = 0;
    for (int i = 0; i < plan->n && n < LLM__SPEC_REQS && n_cu < LLM__SPEC_REQS && n + n_cu < D->params.max_num_seqs; i++) {
        struct llm__plan_entry *pe = &plan->e[i];
        struct llm__req *r = pe->r;
        if (!r || !r->dsmp || pe->n_compute != 1 || pe->n_logits != 1) continue;
        int m = llm__spec_propose_budget(E, plan, r);
        pe->tokens = r->tokens + pe->start;   // the room for drafts may have moved the tokens
        int catch_up = r->n_tokens - r->dseq.len;
        if (m <= 0 || catch_up < 1) continue;
        double a = (r->spec_kept + 2.0 * a0) / (r->spec_kept + r->spec_missed + 2.0), gain = 0.0, ak = 1.0, k_gain = 0.0;
        double base = G / llm__step_time(E, plan->n_tokens), best = 0.0;
        // a probe: at most 4 requests, none with a long catch-up (which a probe would pay for all)
        const bool forced = E->spec_always || explore || (probe && n_probed < 4 && catch_up <= 64);
        n_probed += probe && forced;
        explore = false;
        int k = forced ? m : 0;
        for (int j = 1; j <= m && !forced; j++) {   // the draft's rounds are part of the cost
            ak *= a;
            gain += ak;
            double rate = (G + gain) / (llm__step_time(E, plan->n_tokens + j) + td0 + td * (j - 1));
            if (rate > best) { best = rate; k = j; k_gain = gain; }
        }
        if (!forced && best < LLM__SPEC_MARGIN_DRAFT * base) k = 0;
        if (k == 0) continue;   // (nor does its draft cache catch up: a catch-up is paid only for drafts)
        any_forced |= forced && !E->spec_always;
        if (dtok + catch_up > dmax) {   // the draft's cache lacks much (a long prompt): a part now, drafts later
            int c = dmax - dtok;
            if (c > 0 && llm__blocks_can_allocate(&D->blocks, &r->dseq, c) && llm__blocks_allocate(&D->blocks, &r->dseq, c)) {
                cu[n_cu] = r;
                cun[n_cu++] = c;
                dtok += c;
            }
            continue;
        }
        if (!llm__blocks_can_allocate_free(&E->blocks, &r->seq, 1 + k) ||
            !llm__blocks_can_allocate(&D->blocks, &r->dseq, catch_up + k - 1) ||
            !llm__blocks_allocate(&E->blocks, &r->seq, 1 + k) || !llm__blocks_allocate(&D->blocks, &r->dseq, catch_up + k - 1))
            continue;
        G += k_gain;
        llm__plan_add_drafts(plan, pe, k);
        r->spec_q = n;
        who[n] = i;
        kk[n++] = k;
        kmax = LLM__MAX(kmax, k);
        dtok += catch_up;
        // the draft's sampling sees the request's recent tokens, as the request's own does
        llm_sampler_reset(r->dsmp);
        int h = LLM__MAX(0, r->n_tokens - LLM__MAX(r->p.sampling.penalty_last_n, 0));
        for (int t = h; t < r->n_tokens; t++) llm_sampler_accept(r->dsmp, r->tokens[t]);
    }
    if (n == 0 && n_cu == 0) return 0;
    double t0 = llm__now();
    for (int round = 0; round < LLM__MAX(kmax, 1); round++) {
        struct llm__plan dplan = {.e = de};
        int map[2 * LLM__SPEC_REQS];
        for (int j = 0; round == 0 && j < n_cu; j++) {   // catching up only: no logits
            de[dplan.n] = (struct llm__plan_entry){NULL, &cu[j]->dseq, cu[j]->tokens + cu[j]->dseq.len, cu[j]->dseq.len, cun[j], 0, 0};
            map[dplan.n++] = -1;
            dplan.n_tokens += cun[j];
        }
        for (int j = 0; j < n; j++) {
            struct llm__req *r = plan->e[who[j]].r;
            if (round >= kk[j]) continue;
            int start = r->dseq.len, cnt = round == 0 ? r->n_tokens - start : 1;
            de[dplan.n] = (struct llm__plan_entry){NULL, &r->dseq, r->tokens + start, start, cnt, 1, 0};
            map[dplan.n++] = j;
            dplan.n_tokens += cnt;
            dplan.n_logits++;
        }
        struct llm__step st;
        double t_round = llm__now();
        if (llm__prepare(D, &dplan, &st) != LLM_OK || llm__execute(D, &st, D->step_logits) != LLM_OK) {
            // the draft failed: these requests verify the drafts they have (none past this round)
            for (int j = 0; j < n; j++) {
                kk[j] = LLM__MIN(kk[j], round);
                llm__plan_cut_drafts(plan, &plan->e[who[j]], kk[j]);
            }
            break;
        }
        // (not the draft's first step of a size: see llm_step)
        const bool dwarm = dplan.n_tokens > LLM__TSTEP || D->t_step_warm[dplan.n_tokens];
        if (dplan.n_tokens <= LLM__TSTEP) D->t_step_warm[dplan.n_tokens] = true;
        if (dwarm && round > 0) llm__time_update(&E->t_draft, llm__now() - t_round);
        else if (dwarm && n_cu == 0 && dtok <= 4 * n) llm__time_update(&E->t_draft0, llm__now() - t_round);   // a usual catch-up
        for (int x = 0, row = 0; x < dplan.n; x++) {
            int j = map[x];
            de[x].seq->len += de[x].n_compute;
            if (j < 0) continue;   // catching up only: no row
            struct llm__req *r = plan->e[who[j]].r;
            float *q = E->spec_q + ((size_t)j * (size_t)E->params.num_speculative_tokens + (size_t)round) * (size_t)nv;
            r->tokens[r->n_tokens + round] = llm__spec_draw(r, D->step_logits + (size_t)row++ * (size_t)nv, q, nv);
        }
    }
    E->spec_draft_seconds += llm__now() - t0;
    if (any_forced) E->t_forced += llm__now() - t0;
    return n;
}

// 3. Drafts, once the step's other tokens are planned: each decoding request in turn proposes
// up to its K, and keeps the k whose expected gain pays for the longer step. The step emits G
// tokens in time t(T) (one per sequence that samples); k drafts, each kept with r's estimated
// probability a (given the ones before it), add a + a^2 + ... + a^k tokens and cost t(T + k):
// k is chosen to maximise (G + gain) / t(T + k), 0 when no k beats G / t(T). So speculation stops
// by itself where verifying is not nearly free (large batches, compute-bound steps) or drafts are
// rarely kept; t(.) is measured on this machine as the engine runs (llm__step_time).
static void llm__schedule_drafts(llm_engine *E, struct llm__plan *plan) {
    if (E->params.num_speculative_tokens <= 0) return;
    // every 16th step speculates nowhere: the step times without drafts, which the choice compares
    // against, keep being measured
    if (E->n_steps % 16 == 15 && !E->spec_always) return;
    for (int i = 0; i < plan->n; i++) {
        struct llm__req *r = plan->e[i].r;
        if (!r) continue;
        r->spec_q = -1;
        // a request's acceptance estimate drifts back to its prior while it does not speculate, so
        // that one which stopped (its drafts were rejected) tries again later
        r->spec_kept *= 0.95;
        r->spec_missed *= 0.95;
    }
    if (E->draft) {
        llm__spec_draft_model(E, plan);
        return;
    }
    double G = plan->n_logits;
    for (int i = 0; i < plan->n; i++) {
        struct llm__plan_entry *pe = &plan->e[i];
        struct llm__req *r = pe->r;
        if (!r || pe->n_compute != 1 || pe->n_logits != 1) continue;
        int m = llm__spec_propose(E, plan, r);
        pe->tokens = r->tokens + pe->start;   // the room for drafts may have moved the tokens
        if (m <= 0) continue;
        double a = (r->spec_kept + 1.0) / (r->spec_kept + r->spec_missed + 2.0), k_gain = 0.0;
        int k = E->spec_always || E->n_steps % 64 == 31 ? m : llm__spec_choose(E, G, plan->n_tokens, a, m, &k_gain);
        if (k == 0 || !llm__blocks_can_allocate_free(&E->blocks, &r->seq, 1 + k)) continue;   // drafts never preempt nor evict
        if (!llm__blocks_allocate(&E->blocks, &r->seq, 1 + k)) continue;
        G += k_gain;
        llm__plan_add_drafts(plan, pe, k);
    }
}

// r leaves the plan (it is being preempted): its tokens go back to the budget.

// Blocks for running request r to grow by n tokens: running requests are preempted from the back
// of the queue q (the latest, or lowest priority), r itself last. Returns whether r still runs;
// one that the cache cannot hold even alone ends with LLM_FINISH_CONTEXT.
static bool llm__sched_make_room(llm_engine *E, struct llm__plan *plan, struct llm__req *r, int n, struct llm__req **q,
                                 int n_q) {
    while (!llm__blocks_can_allocate(&E->blocks, &r->seq, n)) {
        int v = n_q - 1;
        while (v >= 0 && q[v]->state != LLM__REQ_RUNNING) v--;
        struct llm__req *victim = q[v];
        if (victim == r) {
            bool alone = true;
            for (int k = 0; k < n_q; k++) alone &= q[k] == r || q[k]->state != LLM__REQ_RUNNING;
            if (alone) { llm__req_finish(E, r, LLM_FINISH_CONTEXT); return false; }
        }
        // The victim is the last running request of the queue, r or one after it: requests are
        // planned in queue order, so it is not in the plan yet.
        llm__req_preempt(E, victim);
        plan->n_preempted++;
        if (victim == r) return false;
    }
    return true;
}

// 1. The running requests, in order: the next token of each (or the next chunk of its prompt).
static enum llm_status llm__schedule_running(llm_engine *E, struct llm__plan *plan) {
    int n_run = llm__queue_running(E, E->q_run);
    const int max = E->params.max_num_batched_tokens;
    for (int i = 0; i < n_run && plan->n_tokens < max; i++) {
        struct llm__req *r = E->q_run[i];
        if (r->state != LLM__REQ_RUNNING) continue;   // preempted for an earlier one
        int n = LLM__MIN(r->n_tokens - r->n_computed, max - plan->n_tokens);
        if (!llm__sched_make_room(E, plan, r, n, E->q_run, n_run)) continue;
        if (!llm__blocks_allocate(&E->blocks, &r->seq, n)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
        llm__plan_add(plan, r, n);
    }
    return LLM_OK;
}

// Admits waiting request r with the tokens left in the budget, from its cached prefix on.
// Returns 1 when admitted, 0 when its blocks do not fit (it stays waiting; it ends with
// LLM_FINISH_CONTEXT when nothing else holds blocks), -1 when out of memory.
static int llm__sched_admit(llm_engine *E, struct llm__plan *plan, struct llm__req *r, int n_running) {
    int hit = llm__blocks_take_prefix(&E->blocks, &r->seq, r->tokens, r->n_tokens);
    int n = LLM__MIN(r->n_tokens - hit, E->params.max_num_batched_tokens - plan->n_tokens);
    if (!llm__blocks_can_allocate(&E->blocks, &r->seq, n)) {
        llm__blocks_release(&E->blocks, &r->seq);   // the prefix blocks it took
        if (n_running == 0 && plan->n == 0) llm__req_finish(E, r, LLM_FINISH_CONTEXT);   // can never fit
        return 0;
    }
    if (!llm__blocks_allocate(&E->blocks, &r->seq, n)) {
        llm__blocks_release(&E->blocks, &r->seq);
        return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1;
    }
    if (E->blocks.caching && !r->admitted_once) {
        E->prefix_query_tokens += r->n_prompt;
        E->prefix_hit_tokens += hit;
        r->n_cached = hit;
    }
    r->admitted_once = true;
    r->n_computed = hit;
    llm__wait_remove(E, r);
    r->state = LLM__REQ_RUNNING;
    llm__plan_add(plan, r, n);
    return 1;
}

// 2. Waiting requests (preempted ones included), in order, while the budget and max_num_seqs
// allow; the first that does not fit stops admission (no request overtakes it). An admitted
// request leaves the heap, so the next one is at its top.
static enum llm_status llm__schedule_waiting(llm_engine *E, struct llm__plan *plan) {
    int n_running = 0;
    for (int i = 0; i < E->n_reqs; i++) n_running += E->reqs[i]->state == LLM__REQ_RUNNING;
    while (E->n_wait > 0 && plan->n_tokens < E->params.max_num_batched_tokens && n_running < E->params.max_num_seqs) {
        int a = llm__sched_admit(E, plan, E->q_wait[0], n_running);
        if (a < 0) return E->err.status;
        if (a == 0) break;
        n_running++;
    }
    return LLM_OK;
}

// The plan of a step: running requests first, then admissions unless someone was preempted.
static enum llm_status llm__schedule(llm_engine *E, struct llm__plan *plan) {
    enum llm_status st;
    llm__reqs_reap(E);
    *plan = (struct llm__plan){.e = E->plan};
    if ((st = llm__schedule_running(E, plan))) return st;
    if (!plan->n_preempted && (st = llm__schedule_waiting(E, plan))) return st;
    llm__schedule_drafts(E, plan);
    return LLM_OK;
}

// --- prepare and execute ---

// The step's arrays from the plan: for every computed token its id, position, sequence index and
// KV slot; every sequence's block table (one row of max_blocks columns each); the rows whose
// logits are wanted. The step's pointers point into E's arrays until the next step.
static enum llm_status llm__prepare(llm_engine *E, const struct llm__plan *plan, struct llm__step *step) {
    assert(plan->n >= 1 && plan->n <= E->params.max_num_seqs && plan->n_tokens <= E->acts.max_tokens &&
           plan->n_logits <= E->acts.max_out);
    int max_blocks = 0;
    for (int k = 0; k < plan->n; k++) max_blocks = LLM__MAX(max_blocks, plan->e[k].seq->n_blocks);
    if (max_blocks > E->cap_tables) {
        int32_t *t = realloc(E->st_tables, (size_t)E->params.max_num_seqs * (size_t)max_blocks * sizeof(int32_t));
        if (!t) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
        E->st_tables = t;
        E->cap_tables = max_blocks;
    }
    const int bs = E->blocks.block_size;
    int T = 0, n_out = 0;
    for (int k = 0; k < plan->n; k++) {
        const struct llm__plan_entry *pe = &plan->e[k];
        assert(pe->seq->n_blocks * bs >= pe->start + pe->n_compute && pe->n_logits <= pe->n_compute);
        for (int j = 0; j < pe->n_compute; j++, T++) {
            E->st_tokens[T] = pe->tokens[j];
            E->st_pos[T] = pe->start + j;
            E->st_seq[T] = k;
            E->st_slot[T] = llm__seq_slot(pe->seq, bs, pe->start + j);
        }
        for (int j = pe->n_logits; j > 0; j--) E->st_out[n_out++] = T - j;
        memcpy(E->st_tables + (size_t)k * (size_t)max_blocks, pe->seq->blocks, (size_t)pe->seq->n_blocks * sizeof(int32_t));
    }
    *step = (struct llm__step){
        .n_tokens = T, .tokens = E->st_tokens, .positions = E->st_pos, .seq_idx = E->st_seq,
        .slot_mapping = E->st_slot, .n_seqs = plan->n, .max_blocks = max_blocks, .block_tables = E->st_tables,
        .block_size = bs, .n_out = n_out, .out_rows = E->st_out,
    };
    return LLM_OK;
}

// The forward pass; logits receives step->n_out rows of n_vocab.
// Every forward pass, of llm_step and of llm_seq_eval (counted as a step when profiling).
static enum llm_status llm__execute(llm_engine *E, const struct llm__step *step, float *logits) {
    if (E->prof) E->prof->steps++;
    return llm__forward(&E->model, &E->be, &E->acts, E->kv.k_layer, E->kv.v_layer, step, logits, E->prof, &E->err);
}

// One chunk of llm_seq_eval: n tokens of a sequence whose blocks hold them, as a step of one
// sequence; the rows of its last n_logits tokens go to logits.
static enum llm_status llm__seq_eval_chunk(llm_engine *E, struct llm__seq *s, const int32_t *tokens, int n,
                                           int n_logits, float *logits) {
    struct llm__plan_entry pe = {NULL, s, tokens, s->len, n, n_logits, 0};
    struct llm__plan plan = {&pe, 1, n, n_logits, 0, 0};
    struct llm__step step;
    enum llm_status st = llm__prepare(E, &plan, &step);
    if (st == LLM_OK) st = llm__execute(E, &step, logits);
    for (int i = 0; st == LLM_OK && i < n_logits; i++)   // as requests' rows (llm__req_fail_nonfinite)
        if (!llm__all_finite(logits + (size_t)i * (size_t)E->model.n_vocab, (size_t)E->model.n_vocab))
            st = llm__fail(&E->err, LLM_ERR_BACKEND, "seq_eval: the model computed logits that are not finite (NaN "
                           "or infinity) at position %d: its weights or activations overflow (a damaged or badly "
                           "converted model file?)", s->len + n - n_logits + i);
    if (st == LLM_OK) s->len += n;
    return st;
}

// --- postprocess and collect ---

// Verification of a request's k drafts against the step's k + 1 rows (row j: the distribution
// after its j-th computed token): each draft in turn is kept or replaced by the request's own
// sampling (llm__sampler_verify); the first replaced one, or the token after the last draft when
// all are kept, ends it. The KV of the rejected drafts is given back (llm__blocks_truncate) before
// the request's full blocks enter the prefix cache, which so never holds an unverified token.
static void llm__spec_verify(llm_engine *E, const struct llm__plan_entry *pe, const float *rows) {
    const size_t nv = (size_t)E->model.n_vocab;
    struct llm__req *r = pe->r;
    const int k = pe->n_draft;
    int32_t draft[LLM__MAX_SPEC];
    memcpy(draft, r->tokens + r->n_tokens, (size_t)k * sizeof(int32_t));   // appending overwrites them
    // the cache's length counts verified tokens only, all along: a token that ends the request
    // (EOS, a stop string) has it committed to the prefix cache at once (llm__req_finish), and
    // the KV of a rejected draft must not go with it
    r->seq.len = r->n_computed = pe->start + 1;
    double now = llm__now();
    int kept = 0, emitted = 0;
    for (int j = 0; j <= k; j++) {
        const float *lg = rows + (size_t)j * nv;
        if (!llm__all_finite(lg, nv)) { llm__req_fail_nonfinite(E, r); break; }
        bool accepted = false;
        const float *q = r->spec_q >= 0 ? E->spec_q + ((size_t)r->spec_q * (size_t)E->params.num_speculative_tokens + (size_t)j) * nv : NULL;
        int32_t tok = j == k ? llm_sampler_sample(r->smp, lg) : llm__sampler_verify(r->smp, lg, draft[j], q, &accepted);
        if (j < k) E->spec_proposed[j]++;
        if (accepted) { E->spec_accepted[j]++; kept++; r->seq.len = ++r->n_computed; }   // its KV is the token's
        llm__req_append(E, r, tok, lg, now);
        emitted++;
        if (!accepted || r->state != LLM__REQ_RUNNING) break;
    }
    E->spec_verifications++;
    E->spec_emitted += emitted;
    r->spec_kept = 0.8 * r->spec_kept + kept;   // recent verifications weigh most
    r->spec_missed = 0.8 * r->spec_missed + (kept < k);
    if (r->state == LLM__REQ_RUNNING) {   // the cache holds the last token and the kept drafts
        llm__blocks_truncate(&E->blocks, &r->seq, pe->start + 1 + kept);   // (the blocks of the others go)
        r->n_computed = r->seq.len;
        if (E->draft && r->dseq.len > r->seq.len) llm__blocks_truncate(&E->draft->blocks, &r->dseq, r->seq.len);
    }
}


// After the forward pass: the planned tokens are in the cache; a request whose last token was
// computed samples the next one from its row. Full blocks enter the prefix cache after the
// tokens are settled (with speculative decoding: after the rejected drafts were rolled back).
static void llm__postprocess(llm_engine *E, const struct llm__plan *plan, const float *logits) {
    double t0 = llm__now();
    const size_t nv = (size_t)E->model.n_vocab;
    size_t row = 0;
    E->n_steps++;
    for (int k = 0; k < plan->n; k++) {
        const struct llm__plan_entry *pe = &plan->e[k];
        struct llm__req *r = pe->r;
        r->n_computed = r->seq.len = pe->start + pe->n_compute;
        if (pe->n_draft > 0) {
            llm__spec_verify(E, pe, logits + row * nv);
            row += (size_t)pe->n_logits;
        } else if (pe->n_logits > 0) {   // one row: the last token's
            const float *lg = logits + (row + (size_t)pe->n_logits - 1) * nv;
            row += (size_t)pe->n_logits;
            if (llm__all_finite(lg, nv)) llm__req_append(E, r, llm_sampler_sample(r->smp, lg), lg, llm__now());
            else llm__req_fail_nonfinite(E, r);
        }
        if (r->state == LLM__REQ_RUNNING) llm__blocks_commit(&E->blocks, &r->seq, r->tokens);
    }
    if (E->prof) E->prof->t[LLM_PROF_SAMPLING] += llm__now() - t0;
}

// The forward pass failed: the planned requests are computed again from their first token.
static void llm__plan_undo(llm_engine *E, const struct llm__plan *plan) {
    for (int k = 0; k < plan->n; k++) llm__req_requeue(E, plan->e[k].r);
}

// What r has to report: new tokens, new text, or its end (once).
static bool llm__req_has_news(const struct llm__req *r) {
    return r->n_tokens - r->n_prompt > r->out_sent || r->text.n - r->text_hold > r->text_sent ||
           (r->state == LLM__REQ_DONE && !r->reported_done);
}

// r's output of this step; its new text goes to the arena, at *text_off.
static void llm__output_fill(llm_engine *E, struct llm__req *r, struct llm_output *out, size_t *text_off) {
    int n_gen = r->n_tokens - r->n_prompt, k = r->p.logprobs;
    size_t shown = r->text.n - r->text_hold;
    memset(out, 0, sizeof(*out));
    out->request_id = r->id;
    out->new_tokens = r->tokens + r->n_prompt + r->out_sent;
    out->n_new_tokens = n_gen - r->out_sent;
    out->new_logprobs = k > 0 && out->n_new_tokens > 0 ? r->logprobs + (size_t)r->out_sent * (size_t)k : NULL;
    out->new_token_logprobs = out->new_logprobs ? r->token_logprobs + r->out_sent : NULL;
    r->out_sent = n_gen;
    *text_off = E->arena.n;
    if (shown > r->text_sent) llm__outbuf_put(&E->arena, r->text.p + r->text_sent, shown - r->text_sent);
    llm__outbuf_put(&E->arena, "", 1);
    out->n_new_text = (int)(shown > r->text_sent ? shown - r->text_sent : 0);
    r->text_sent = LLM__MAX(r->text_sent, shown);
    out->finished = r->state == LLM__REQ_DONE;
    out->finish_reason = out->finished ? r->finish : LLM_FINISH_NONE;
    out->ttft_ms = r->t_first ? (r->t_first - r->t_arrival) * 1e3 : 0.0;
    out->e2e_ms = out->finished ? (r->t_last - r->t_arrival) * 1e3 : 0.0;
    out->n_prompt_tokens = r->n_prompt;
    out->n_cached_tokens = r->n_cached;
    out->n_output_tokens = n_gen;
    out->n_preemptions = r->n_preempt;
    out->itl_ms = out->finished ? r->itl : NULL;
    out->n_itl = out->finished ? r->n_itl : 0;
    if (out->finished) r->reported_done = true;
}

// The step's outputs: one per request with new tokens or text, or that finished.
// Memory for the step's outputs is found first, so that filling them (which marks what was
// reported) cannot fail halfway.
static bool llm__collect_reserve(llm_engine *E, int n_outs, size_t text) {
    if (n_outs > E->cap_outs) {
        int cap = LLM__MAX(n_outs, 2 * E->cap_outs);
        struct llm_output *q = realloc(E->outs, (size_t)cap * sizeof(*q));
        if (q) E->outs = q;
        size_t *f = realloc(E->out_off, (size_t)cap * sizeof(size_t));
        if (f) E->out_off = f;
        if (!q || !f) return false;
        E->cap_outs = cap;
    }
    E->arena.n = 0;
    E->arena.fail = false;
    if (text > E->arena.cap) {
        char *p = realloc(E->arena.p, text);
        if (!p) return false;
        E->arena.p = p;
        E->arena.cap = text;
    }
    return true;
}

static int llm__collect(llm_engine *E, const struct llm_output **outputs) {
    int n_outs = 0;
    size_t text = 0;
    *outputs = E->outs;
    for (int i = 0; i < E->n_reqs; i++) {
        const struct llm__req *r = E->reqs[i];
        if (!llm__req_has_news(r)) continue;
        n_outs++;
        size_t shown = r->text.n - r->text_hold;
        text += (shown > r->text_sent ? shown - r->text_sent : 0) + 1;
    }
    if (!llm__collect_reserve(E, n_outs, text)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1;
    *outputs = E->outs;
    n_outs = 0;
    for (int i = 0; i < E->n_reqs; i++)
        if (llm__req_has_news(E->reqs[i])) {
            llm__output_fill(E, E->reqs[i], &E->outs[n_outs], &E->out_off[n_outs]);
            n_outs++;
        }
    for (int i = 0; i < n_outs; i++) E->outs[i].new_text = E->arena.p + E->out_off[i];   // the arena has stopped moving
    return n_outs;
}

// schedule -> prepare -> execute -> postprocess -> collect (a step with an empty plan only collects).
int llm_step(llm_engine *E, const struct llm_output **outputs) {
    struct llm__plan plan;
    struct llm__step step;
    double t0 = llm__now();
    *outputs = E->outs;
    if (llm__schedule(E, &plan) != LLM_OK) return -1;
    if (plan.n > 0 && llm__prepare(E, &plan, &step) != LLM_OK) return -1;
    if (E->prof) E->prof->t[LLM_PROF_SCHEDULING] += llm__now() - t0;
    double t_exec = llm__now();
    if (plan.n > 0 && llm__execute(E, &step, E->step_logits) != LLM_OK) {
        llm__plan_undo(E, &plan);
        return -1;
    }
    const double t_done = llm__now();
    // the step times speculation decides from; not a size's first step, which touches memory
    // for the first time and runs while the thread pool's tuner warms up for it (a first
    // verification of 3 tokens measured 3 times a decode step and stopped drafting for good)
    if (plan.n > 0 && plan.n_tokens <= LLM__TSTEP) {
        if (E->t_step_warm[plan.n_tokens]) llm__time_update(&E->t_step[plan.n_tokens], t_done - t_exec);
        E->t_step_warm[plan.n_tokens] = true;
    }
    if (plan.n_drafts > 0) E->spec_verify_seconds += t_done - t_exec;
    if (plan.n > 0) E->t_busy += t_done - t0;
    if (plan.n > 0) llm__postprocess(E, &plan, E->step_logits);
    return llm__collect(E, outputs);
}

void llm_get_stats(const llm_engine *E, struct llm_engine_stats *s) {
    memset(s, 0, sizeof(*s));
    const struct llm__blocks *bm = &E->blocks;
    s->kv_blocks_total = bm->n_blocks;
    s->kv_blocks_cached = bm->n_lru;
    s->kv_blocks_used = bm->n_blocks - bm->n_free - bm->n_lru;
    long long blocks = 0;
    for (int i = 0; i < E->n_reqs; i++) {
        const struct llm__req *r = E->reqs[i];
        if (r->state == LLM__REQ_RUNNING) { s->n_running++; s->kv_tokens_stored += r->seq.len; blocks += r->seq.n_blocks; }
        else if (r->state == LLM__REQ_WAITING) s->n_waiting++;
    }
    s->kv_utilization = blocks ? (double)s->kv_tokens_stored / ((double)blocks * bm->block_size) : 0.0;
    s->prefix_query_tokens = E->prefix_query_tokens;
    s->prefix_hit_tokens = E->prefix_hit_tokens;
    s->n_preemptions = E->n_preemptions;
    s->n_steps = E->n_steps;
    memcpy(s->spec_proposed, E->spec_proposed, sizeof(s->spec_proposed));
    memcpy(s->spec_accepted, E->spec_accepted, sizeof(s->spec_accepted));
    s->spec_verifications = E->spec_verifications;
    s->spec_emitted = E->spec_emitted;
    s->spec_draft_seconds = E->spec_draft_seconds;
    s->spec_verify_seconds = E->spec_verify_seconds;
}

// A finished request's result (copies: the request leaves at the next step).
static enum llm_status llm__result_fill(llm_engine *E, const struct llm__req *r, const struct llm_output *out,
                                        struct llm_result *x) {
    size_t k = (size_t)r->p.logprobs;
    x->n_prompt_tokens = r->n_prompt;
    x->prompt_tokens = malloc((size_t)r->n_prompt * sizeof(int32_t));
    x->n_tokens = r->n_tokens - r->n_prompt;
    x->tokens = malloc((size_t)LLM__MAX(x->n_tokens, 1) * sizeof(int32_t));
    x->logprobs = k && x->n_tokens ? malloc((size_t)x->n_tokens * k * sizeof(struct llm_logprob)) : NULL;
    x->text = llm__strndup(r->text.p ? r->text.p : "", r->text.n);
    x->n_text = (int)LLM__MIN(r->text.n, (size_t)INT_MAX);
    x->n_itl = r->n_itl;
    x->itl_ms = malloc((size_t)LLM__MAX(r->n_itl, 1) * sizeof(float));
    if (!x->prompt_tokens || !x->tokens || (k && x->n_tokens && !x->logprobs) || !x->text || !x->itl_ms)
        return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    memcpy(x->prompt_tokens, r->tokens, (size_t)r->n_prompt * sizeof(int32_t));
    if (x->n_tokens) memcpy(x->tokens, r->tokens + r->n_prompt, (size_t)x->n_tokens * sizeof(int32_t));
    if (x->logprobs) memcpy(x->logprobs, r->logprobs, (size_t)x->n_tokens * k * sizeof(struct llm_logprob));
    if (r->n_itl) memcpy(x->itl_ms, r->itl, (size_t)r->n_itl * sizeof(float));
    x->finish_reason = r->finish;
    if (r->finish == LLM_FINISH_ERROR &&
        !(x->error = r->error ? llm__strndup(r->error, strlen(r->error)) : llm__strndup(E->err.msg, strlen(E->err.msg))))
        return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    x->ttft_ms = out->ttft_ms;
    x->e2e_ms = out->e2e_ms;
    x->n_cached_tokens = r->n_cached;
    x->n_preemptions = r->n_preempt;
    return LLM_OK;
}

enum llm_status llm_generate(llm_engine *E, const struct llm_prompt *prompts, int n, const struct llm_request_params *params,
                             struct llm_result *res) {
    if (n < 0 || (n > 0 && (!prompts || !res))) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "generate: bad arguments");
    if (llm_has_unfinished_requests(E))   // their outputs would be lost here
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "generate: the engine has unfinished requests (llm_generate "
                                                       "needs an idle engine; use llm_step for them)");
    if (n == 0) return LLM_OK;
    memset(res, 0, (size_t)n * sizeof(*res));
    int *ids = malloc((size_t)LLM__MAX(n, 1) * sizeof(int));
    if (!ids) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        ids[i] = llm_add_request(E, &prompts[i], params ? &params[i] : NULL);
        if (ids[i] < 0) {
            res[i].finish_reason = LLM_FINISH_ERROR;
            res[i].error = llm__strndup(E->err.msg, strlen(E->err.msg));
        }
    }
    enum llm_status st = LLM_OK;
    while (st == LLM_OK && llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int k = llm_step(E, &out);
        if (k < 0) st = E->err.status ? E->err.status : LLM_ERR_BACKEND;
        for (int j = 0; j < k; j++) {
            if (!out[j].finished) continue;
            int i = 0;
            while (i < n && ids[i] != out[j].request_id) i++;
            if (i == n) continue;   // a request added by someone else
            enum llm_status s2 = llm__result_fill(E, llm__req_find(E, out[j].request_id), &out[j], &res[i]);
            if (s2 != LLM_OK) st = s2;
        }
    }
    if (st != LLM_OK)   // what is left ends with the error (and is not reported by a later llm_step)
        for (int i = 0; i < n; i++)
            if (!res[i].finish_reason) {
                struct llm__req *r = ids[i] >= 0 ? llm__req_find(E, ids[i]) : NULL;
                if (r && r->state != LLM__REQ_DONE) llm__req_finish(E, r, LLM_FINISH_ABORT);
                if (r) r->reported_done = true;
                res[i].finish_reason = LLM_FINISH_ERROR;
                res[i].error = llm__strndup(E->err.msg, strlen(E->err.msg));
            }
    free(ids);
    return st;
}

void llm_results_free(struct llm_result *res, int n) {
    for (int i = 0; res && i < n; i++) {
        free(res[i].prompt_tokens);
        free(res[i].tokens);
        free(res[i].logprobs);
        free(res[i].text);
        free(res[i].error);
        free(res[i].itl_ms);
        memset(&res[i], 0, sizeof(res[i]));
    }
}

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

struct llm__cal_in {           // one input of a layer's linear layers
    int64_t n, tokens;         // width; tokens seen
    float *h;                  // (n, n) sum of x x^T, upper triangle (GPTQ)
    double *abs_sum;           // (n) sum of |x|
    float *xs;                 // (max_xs, n) every stride-th token (AWQ's losses)
    int n_xs;
};

struct llm__calib {
    struct llm__cal_in *in;    // (n_layer x LLM__CAL_SLOTS)
    int n_layer, max_xs;
    int l0, l1;                // the layers taken in this pass (the others' inputs are passed over)
    bool want_h, fail;         // fail: out of memory
    int64_t stride;
    struct llm__pool *pool;
    llm__vec_dot_fn dot;       // f32 x f32
    float *xt;                 // an input transposed, (n, T)
    size_t xt_cap;
};

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

static void llm__calib_take(struct llm__calib *c, int layer, int slot, struct llm__tensor x) {
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

static void llm__calib_free(struct llm__calib *c) {
    if (c->in)
        for (int i = 0; i < c->n_layer * LLM__CAL_SLOTS; i++) free(c->in[i].h), free(c->in[i].abs_sum), free(c->in[i].xs);
    free(c->in);
    free(c->xt);
    llm__pool_free(c->pool);
    memset(c, 0, sizeof(*c));
}

// --- GPTQ ---

static double llm__dot_f64(const double *a, const double *b, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) s0 += a[i] * b[i], s1 += a[i + 1] * b[i + 1], s2 += a[i + 2] * b[i + 2], s3 += a[i + 3] * b[i + 3];
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
            while (j > 0 && ci->h[(int64_t)order[j - 1] * n + order[j - 1]] < ci->h[(int64_t)v * n + v]) order[j] = order[j - 1], j--;
            order[j] = v;
        }
    // A = J P H P^T J (processing order, reversed), dampened
    for (double extra = damp;; extra *= 10) {
        for (int64_t a = 0; a < n; a++)
            for (int64_t b = 0; b <= a; b++) {
                const int64_t i = order[n - 1 - a], j = order[n - 1 - b];
                const double h = i == j ? (dead[i] ? 1.0 : scale * ci->h[i * n + i]) : scale * ci->h[LLM__MIN(i, j) * n + LLM__MAX(i, j)];
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
        for (int64_t j = 0; j < i; j++)
            A[j * n + i] = -(A[i * n + j] / A[j * n + j] + llm__dot_f64(A + i * n + j + 1, A + j * n + j + 1, i - 1 - j)) / A[i * n + i];
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

// A layer's matrix being quantized (a 2-D tensor of the model's GGUF view).
struct llm__qmat {
    int64_t tensor;            // index in the model's tensors
    int layer, slot;           // its input: LLM__CAL_*
    bool qk;                   // attn_q / attn_k (AWQ does not clip them)
    int64_t rows, n;
    float *w;                  // (rows, n) its values (AWQ: scaled, clipped); freed once quantized
    int type;                  // GGUF: the llama.cpp type; hf: -1
    uint8_t *data;             // GGUF: the quantized rows
    uint8_t *q;                // hf: (rows, n) codes, columns in the input's order
    float *scale;              // hf: (rows, n_groups)
    int32_t *zero;             // hf: (rows, n_groups)
    int32_t *g_idx;            // hf act-order: (n) each input's group; NULL: input / group
};

struct llm__cq {
    const struct llm_quantize_params *p;
    llm_engine *E;
    struct llm__gguf *g;
    struct llm__calib cal;
    bool hf, awq;
    int bits;
    int64_t group;             // hf: inputs a group (a row: n)
    struct llm__qmat *mats;    // (n_mats)
    int n_mats;
    float **vecs;              // AWQ: per tensor, new f32 values of a norm or bias, or NULL
    int *types;                // GGUF: per tensor, the mix's type
    double done, total;        // progress (matrix elements)
    char *outdir;              // hf: OUTPUT.part, the directory written, renamed OUTPUT when complete
};

// Removes directory d and the regular files in it (a checkpoint that was not completed).
static void llm__rm_dir(const char *d) {
    DIR *dir = opendir(d);
    char path[4200];
    for (struct dirent *de; dir && (de = readdir(dir)) != NULL;)
        if (de->d_name[0] != '.' && snprintf(path, sizeof(path), "%s/%s", d, de->d_name) < (int)sizeof(path)) remove(path);
    if (dir) closedir(dir);
    rmdir(d);
}

static int llm__cq_slot(const char *name, bool *qk) {
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
static bool llm__cq_load(struct llm__cq *c, struct llm__qmat *mt) {
    const struct llm__gguf_tensor *t = &c->g->tensors[mt->tensor];
    if (!(mt->w = malloc(sizeof(float) * (size_t)(mt->rows * mt->n)))) return false;
    const size_t rb = llm__row_bytes((int)t->type, mt->n);
    for (int64_t r = 0; r < mt->rows; r++) llm__dequantize_row((int)t->type, (const uint8_t *)t->data + (size_t)r * rb, mt->w + r * mt->n, mt->n);
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

static void llm__cq_progress(struct llm__cq *c, const struct llm__qmat *mt) {
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

static enum llm_status llm__cq_gptq_layer(struct llm__cq *c, int layer, struct llm__pool *pool, struct llm__err *e) {
    for (int slot = 0; slot < LLM__CAL_SLOTS; slot++) {
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + slot];
        bool any = false;
        for (int i = 0; i < c->n_mats; i++) any |= c->mats[i].layer == layer && c->mats[i].slot == slot;
        if (!any) continue;
        if (!ci->h || ci->tokens == 0) return llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d's inputs were not seen", layer);
        const int64_t n = ci->n;
        float *U = malloc(sizeof(float) * (size_t)n * (size_t)n);
        int32_t *order = malloc(sizeof(int32_t) * (size_t)n);
        uint8_t *dead = malloc((size_t)n);
        const bool act = c->hf && c->p->act_order;
        if (!U || !order || !dead || !llm__gptq_factor(ci, c->p->damp > 0 ? c->p->damp : 0.01, act, order, dead, U)) {
            const bool mem = !U || !order || !dead;
            free(U), free(order), free(dead);
            return mem ? llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory")
                       : llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d: the inputs' X X^T has no Cholesky factor (not finite: "
                                   "the model's activations overflow?)", layer);
        }
        enum llm_status st = LLM_OK;
        for (int i = 0; i < c->n_mats && !st; i++) {
            struct llm__qmat *mt = &c->mats[i];
            if (mt->layer != layer || mt->slot != slot) continue;
            if (mt->n != n) { st = llm__fail(e, LLM_ERR_FORMAT, "quantize: '%s' has %lld columns, its input %lld",
                                             c->g->tensors[mt->tensor].name, (long long)mt->n, (long long)n); break; }
            if (!llm__cq_load(c, mt) || !llm__cq_alloc_out(c, mt)) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
            if (act) {
                if (!(mt->g_idx = malloc(sizeof(int32_t) * (size_t)n))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); break; }
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

// The scales of one input (see the section's head) into s; false: out of memory.
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
    for (int64_t i = 0; i < n && !fail; i++) s[i] = 1.0f, xm[i] = (float)(ci->abs_sum[i] / (double)LLM__MAX(ci->tokens, 1));
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
static bool llm__cq_round(struct llm__cq *c, struct llm__qmat *mt, int zmin) {
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

static enum llm_status llm__cq_awq_layer(struct llm__cq *c, int layer, struct llm__pool *pool, struct llm__err *e) {
    struct llm__qmat *q = llm__cq_find(c, layer, "attn_q"), *k = llm__cq_find(c, layer, "attn_k");
    struct llm__qmat *v = llm__cq_find(c, layer, "attn_v"), *qkv = llm__cq_find(c, layer, "attn_qkv");
    struct llm__qmat *o = llm__cq_find(c, layer, "attn_output"), *gate = llm__cq_find(c, layer, "ffn_gate");
    struct llm__qmat *up = llm__cq_find(c, layer, "ffn_up"), *down = llm__cq_find(c, layer, "ffn_down");
    for (int i = 0; i < c->n_mats; i++)
        if (c->mats[i].layer == layer && !llm__cq_load(c, &c->mats[i])) return llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory");
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
            if (!norm && llm__gguf_find_tensor(c->g, name)) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); goto done; }
        } else {
            ok &= grp[gi].prev && grp[gi].prev->rows >= grp[gi].row0 + grp[gi].lin[0]->n;
        }
        if (!ok) continue;   // nothing to fold the scales into (e.g. v and o under grouped-query attention)
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + grp[gi].slot];
        const int64_t n = grp[gi].lin[0]->n;
        if (ci->n != n || ci->n_xs == 0) { st = llm__fail(e, LLM_ERR_BACKEND, "quantize: layer %d's inputs were not seen", layer); goto done; }
        float *s = malloc(sizeof(float) * (size_t)n);
        if (!s || !llm__awq_search(c, pool, grp[gi].lin, grp[gi].nl, ci, s) || !(sinv[grp[gi].slot] = malloc(sizeof(float) * (size_t)n))) {
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
    // clipping, then rounding
    for (int i = 0; i < c->n_mats; i++) {
        struct llm__qmat *mt = &c->mats[i];
        if (mt->layer != layer) continue;
        const struct llm__cal_in *ci = &c->cal.in[layer * LLM__CAL_SLOTS + mt->slot];
        if (!mt->qk && mt != qkv && ci->n == mt->n && ci->n_xs > 0) {
            struct llm__qmat *one[1] = {mt};
            struct llm__awq_job job = {c, one, 1, NULL, ci, sinv[mt->slot], {0}, false};
            llm__pool_run(pool, llm__awq_clip_worker, &job);
            if (job.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
        }
        if (!llm__cq_round(c, mt, 0)) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory"); break; }
        llm__cq_progress(c, mt);
    }
done:
    for (int i = 0; i < LLM__CAL_SLOTS; i++) free(sinv[i]);
    if (st) return st;
    for (int i = 0; i < c->n_mats; i++)
        if (c->mats[i].layer == layer) free(c->mats[i].w), c->mats[i].w = NULL;
    return LLM_OK;
}

// --- writing an AWQ or GPTQ checkpoint ---

// The row of the checkpoint's matrix that the engine's row r came from (q and k of llama-style
// models were permuted at load, see llm__hf_permute_rows): its inverse.
static int64_t llm__hf_row(const struct llm__hf_owned *o, bool qk, int64_t rows, int64_t r) {
    const int64_t hd = o->hp[2];
    if (!qk || !o->permute || hd < 2 || rows % hd) return r;
    const int64_t h = r / hd, i = (r % hd) / 2, j = r % 2;
    return h * hd + j * (hd / 2) + i;
}

// The packed tensors of a matrix: AWQ (qweight [n, rows/8], nibbles in AutoAWQ's order) or GPTQ
// (qweight [n*bits/32, rows] packed along the input; zeros as they are: checkpoint_format gptq_v2,
// the format for asymmetric groups: v1's zeros less one cannot hold a zero point of 0, and
// GPTQModel loads asymmetric v1 only from its own hand). which: 0 qweight,
// 1 qzeros, 2 scales (fp16), 3 g_idx. Returns the bytes written to out (NULL: just counted) and
// the shape; SIZE_MAX: out of memory.
static size_t llm__hf_pack(const struct llm__cq *c, const struct llm__hf_owned *o, const struct llm__qmat *mt, bool qk,
                           int which, uint8_t *out, int64_t shape[2]) {
    static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};   // nibble k holds output 8c + awq_order[k]
    const int64_t n = mt->n, rows = mt->rows, ng = (n + c->group - 1) / c->group, per = 32 / c->bits;
    int64_t *src = malloc(sizeof(int64_t) * (size_t)rows);   // checkpoint row -> engine row
    if (!src) return SIZE_MAX;
    for (int64_t r = 0; r < rows; r++) src[llm__hf_row(o, qk, rows, r)] = r;
    size_t bytes = 0;
    if (which == 0 && c->awq) {
        shape[0] = n, shape[1] = rows / 8, bytes = (size_t)(n * rows / 8) * 4;
        for (int64_t i = 0; out && i < n; i++)
            for (int64_t w = 0; w < rows / 8; w++) {
                uint32_t v = 0;
                for (int k = 0; k < 8; k++) v |= (uint32_t)mt->q[src[8 * w + awq_order[k]] * n + i] << (4 * k);
                memcpy(out + 4 * (size_t)(i * (rows / 8) + w), &v, 4);
            }
    } else if (which == 0) {
        shape[0] = n / per, shape[1] = rows, bytes = (size_t)(n / per * rows) * 4;
        for (int64_t w = 0; out && w < n / per; w++)
            for (int64_t r = 0; r < rows; r++) {
                uint32_t v = 0;
                for (int k = 0; k < per; k++) v |= (uint32_t)mt->q[src[r] * n + w * per + k] << (c->bits * k);
                memcpy(out + 4 * (size_t)(w * rows + r), &v, 4);
            }
    } else if (which == 1) {
        const int64_t words = rows * c->bits / 32;
        shape[0] = ng, shape[1] = words, bytes = (size_t)(ng * words) * 4;
        for (int64_t g = 0; out && g < ng; g++)
            for (int64_t w = 0; w < words; w++) {
                uint32_t v = 0;
                for (int k = 0; k < per; k++) {
                    const int64_t r = c->awq ? 8 * w + awq_order[k] : w * per + k;
                    const uint32_t z = (uint32_t)mt->zero[src[r] * ng + g] & ((1u << c->bits) - 1);
                    v |= z << (c->bits * k);
                }
                memcpy(out + 4 * (size_t)(g * words + w), &v, 4);
            }
    } else if (which == 2) {
        shape[0] = ng, shape[1] = rows, bytes = (size_t)(ng * rows) * 2;
        for (int64_t g = 0; out && g < ng; g++)
            for (int64_t r = 0; r < rows; r++) {
                const uint16_t h = llm__fp32_to_fp16(mt->scale[src[r] * ng + g]);
                memcpy(out + 2 * (size_t)(g * rows + r), &h, 2);
            }
    } else {
        shape[0] = n, shape[1] = 0, bytes = (size_t)n * 4;
        for (int64_t i = 0; out && i < n; i++) {
            const int32_t gi = mt->g_idx ? mt->g_idx[i] : (int32_t)(i / c->group);
            memcpy(out + 4 * (size_t)i, &gi, 4);
        }
    }
    free(src);
    return bytes;
}

static bool llm__copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    bool ok = a && b;
    char buf[1 << 16];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof(buf), a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    ok = ok && !ferror(a);
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

static void llm__json_str(struct llm__outbuf *o, const char *s) {
    llm__outbuf_put(o, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') llm__outbuf_put(o, "\\", 1);
        llm__outbuf_put(o, s, 1);
    }
    llm__outbuf_put(o, "\"", 1);
}

// The checkpoint: OUTPUT/config.json (the input's with a quantization_config), OUTPUT/model.safetensors
// (the input's tensors, the layers' matrices packed, AWQ's divided norms and biases), and the
// input directory's other files (tokenizer, generation config, ...) copied.
static enum llm_status llm__cq_write_hf(struct llm__cq *c, struct llm__err *e) {
    const struct llm__hf_owned *o = c->g->extra;
    const char *in = c->p->input, *out = c->outdir;
    struct stat sb;
    char *from = NULL, *to = NULL;
    struct llm__outbuf hdr = {0}, cfg = {0};
    enum llm_status st = LLM_OK;
    const size_t pl = strlen(in) + strlen(out) + 300;
    if (!(from = malloc(pl)) || !(to = malloc(pl))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto done; }
    // the other files
    DIR *d = opendir(in);
    if (!d) { st = llm__fail(e, LLM_ERR_IO, "quantize: cannot read the directory '%s': %s", in, strerror(errno)); goto done; }
    for (struct dirent *de; (de = readdir(d)) != NULL && !st;) {
        const char *nm = de->d_name;
        const size_t nl = strlen(nm);
        static const char *const weights[] = {".safetensors", ".bin", ".pth", ".pt", ".gguf", ".h5", ".msgpack", ".onnx", ".ckpt"};
        bool skip = nm[0] == '.' || nl > 200 || !strcmp(nm, "model.safetensors.index.json") || !strcmp(nm, "config.json") ||
                    !strcmp(nm, "quantize_config.json");
        for (size_t k = 0; k < LLM__ARRAY_LEN(weights) && !skip; k++)   // (other copies of the weights)
            skip = nl > strlen(weights[k]) && !strcmp(nm + nl - strlen(weights[k]), weights[k]);
        if (skip) continue;
        snprintf(from, pl, "%s/%s", in, nm);
        snprintf(to, pl, "%s/%s", out, nm);
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (!llm__copy_file(from, to)) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot copy '%s' to '%s'", from, to);
    }
    closedir(d);
    if (st) goto done;
    // config.json with the quantization_config
    snprintf(from, pl, "%s/config.json", in);
    char *text = NULL;
    size_t len = 0;
    if ((st = llm__hf_read(in, "config.json", (size_t)1 << 24, true, &text, &len, e))) goto done;
    size_t end = len;
    while (end > 0 && text[end - 1] != '}') end--;
    if (end == 0) { free(text); st = llm__fail(e, LLM_ERR_FORMAT, "quantize: '%s' is not a JSON object", from); goto done; }
    char qc[400];
    if (c->awq)
        snprintf(qc, sizeof(qc), ",\n  \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": %d, \"group_size\": %lld, "
                 "\"zero_point\": true, \"version\": \"gemm\"}\n}\n", c->bits, (long long)(c->p->group_size == -1 ? -1 : c->group));
    else
        snprintf(qc, sizeof(qc), ",\n  \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %d, \"group_size\": %lld, "
                 "\"desc_act\": %s, \"sym\": false, \"static_groups\": false, \"true_sequential\": true, \"damp_percent\": %g, "
                 "\"checkpoint_format\": \"gptq_v2\"}\n}\n", c->bits, (long long)(c->p->group_size == -1 ? -1 : c->group),
                 c->p->act_order ? "true" : "false", c->p->damp > 0 ? c->p->damp : 0.01);
    size_t body = end - 1;
    while (body > 0 && isspace((unsigned char)text[body - 1])) body--;
    llm__outbuf_put(&cfg, text, body);
    llm__outbuf_put(&cfg, qc + (body > 0 && text[body - 1] == '{'), strlen(qc) - (body > 0 && text[body - 1] == '{'));   // {} has no member before
    free(text);
    snprintf(to, pl, "%s/config.json", out);
    FILE *f = fopen(to, "wb");
    bool ok = f && !cfg.fail && llm__fwrite(f, cfg.p, cfg.n);
    if (f && fclose(f) != 0) ok = false;
    if (!ok) { st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s'", to); goto done; }
    // model.safetensors: the header, then the data in its order
    static const char *const sfx[4] = {"qweight", "qzeros", "scales", "g_idx"};
    for (int pass = 0; pass < 2 && !st; pass++) {
        size_t off = 0;
        uint8_t *buf = NULL;
        FILE *sf = NULL;
        if (pass == 1) {
            while ((hdr.n + 1) % 8) llm__outbuf_put(&hdr, " ", 1);
            llm__outbuf_put(&hdr, "}", 1);
            if (hdr.fail) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); break; }
            snprintf(to, pl, "%s/model.safetensors.part", out);
            if (!(sf = fopen(to, "wb"))) { st = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", to, strerror(errno)); break; }
            const uint64_t hl = hdr.n;
            ok = llm__fwrite(sf, &hl, 8) && llm__fwrite(sf, hdr.p, hdr.n);
        } else {
            llm__outbuf_put(&hdr, "{\"__metadata__\":{\"format\":\"pt\"}", 31);
        }
        for (int fi = 0; fi < o->n_files && !st && ok; fi++)
            for (int64_t ti = 0; ti < o->files[fi].n && !st && ok; ti++) {
                const struct llm__st_tensor *s = &o->files[fi].t[ti];
                char gname[LLM__GGUF_MAX_NAME + 16], base[512];
                int qkf = 0;
                const bool mapped = llm__hf_name(s->name, o->gemma, gname, sizeof(gname), &qkf);
                const struct llm__gguf_tensor *gt = mapped ? llm__gguf_find_tensor(c->g, gname) : NULL;
                const struct llm__qmat *mt = NULL;
                for (int i = 0; gt && i < c->n_mats; i++)
                    if (c->mats[i].tensor == gt - c->g->tensors) mt = &c->mats[i];
                const float *vec = gt ? c->vecs[gt - c->g->tensors] : NULL;
                if (mt) {   // the packed parts, in place of NAME.weight
                    const size_t bl = strlen(s->name) - strlen(".weight");
                    snprintf(base, sizeof(base), "%.*s", (int)bl, s->name);
                    for (int w = 0; w < (c->awq ? 3 : 4) && !st; w++) {
                        int64_t shape[2];
                        const size_t bytes = llm__hf_pack(c, o, mt, qkf != 0, w, NULL, shape);
                        if (bytes == SIZE_MAX) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); break; }
                        if (pass == 0) {
                            char ent[800], dims[48];
                            if (w == 3) snprintf(dims, sizeof(dims), "%lld", (long long)shape[0]);
                            else snprintf(dims, sizeof(dims), "%lld,%lld", (long long)shape[0], (long long)shape[1]);
                            snprintf(ent, sizeof(ent), ",\"%s.%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                                     base, sfx[w], w == 2 ? "F16" : "I32", dims, off, off + bytes);
                            llm__outbuf_put(&hdr, ent, strlen(ent));
                        } else {
                            if (!(buf = malloc(bytes ? bytes : 1))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); break; }
                            ok = llm__hf_pack(c, o, mt, qkf != 0, w, buf, shape) == bytes && llm__fwrite(sf, buf, bytes);
                            free(buf);
                            buf = NULL;
                        }
                        off += bytes;
                    }
                    continue;
                }
                // as it is, or a divided norm or bias in the checkpoint's dtype (Gemma's norms as w, not 1 + w)
                if (pass == 0) {
                    llm__outbuf_put(&hdr, ",", 1);
                    llm__json_str(&hdr, s->name);
                    char ent[200];
                    int k = snprintf(ent, sizeof(ent), ":{\"dtype\":\"%s\",\"shape\":[", s->type == LLM__TYPE_F16 ? "F16" :
                                     s->type == LLM__TYPE_BF16 ? "BF16" : "F32");
                    for (int dd = 0; dd < s->n_dims; dd++) k += snprintf(ent + k, sizeof(ent) - (size_t)k, "%s%lld", dd ? "," : "", (long long)s->shape[dd]);
                    snprintf(ent + k, sizeof(ent) - (size_t)k, "],\"data_offsets\":[%zu,%zu]}", off, off + s->size);
                    llm__outbuf_put(&hdr, ent, strlen(ent));
                } else if (!vec) {
                    ok = llm__fwrite(sf, s->data, s->size);
                } else {
                    const int64_t cnt = gt->ne[0];
                    const size_t es = s->size / (size_t)cnt;
                    if (!(buf = malloc(s->size))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); break; }
                    const bool gemma_norm = o->gemma && strstr(gname, "norm.weight");
                    for (int64_t i = 0; i < cnt; i++) {
                        const float v = vec[i] - (gemma_norm ? 1.0f : 0.0f);
                        if (es == 4) memcpy(buf + 4 * i, &v, 4);
                        else {
                            const uint16_t h = s->type == LLM__TYPE_F16 ? llm__fp32_to_fp16(v) : llm__fp32_to_bf16(v);
                            memcpy(buf + 2 * i, &h, 2);
                        }
                    }
                    ok = llm__fwrite(sf, buf, s->size);
                    free(buf);
                    buf = NULL;
                }
                off += s->size;
            }
        if (pass == 1 && sf) {
            if (fclose(sf) != 0) ok = false;
            snprintf(from, pl, "%s/model.safetensors.part", out);
            snprintf(to, pl, "%s/model.safetensors", out);
            if (!st && (!ok || rename(from, to) != 0)) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", to, strerror(errno));
            if (st) remove(from);
        }
    }
done:
    free(hdr.p);
    free(cfg.p);
    free(from);
    free(to);
    return st;
}

// --- llm_quantize ---

static enum llm_status llm__quantize_calibrated(const struct llm_quantize_params *p, struct llm_quantize_stats *stats,
                                                struct llm__err *e) {
    struct llm__cq c;
    memset(&c, 0, sizeof(c));
    c.p = p;
    const char *method = p->method ? p->method : "rtn";
    c.awq = !strcmp(method, "awq");
    const bool rtn = !strcmp(method, "rtn");   // (here: a checkpoint of round-to-nearest groups)
    if (!c.awq && !rtn && strcmp(method, "gptq") != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a method (gptq, awq, rtn)", method);
    c.hf = !p->format || !strcmp(p->format, "hf");
    if (!c.hf && strcmp(p->format, "gguf") != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not an output format (hf, gguf)", p->format);
    c.bits = p->bits ? p->bits : 4;
    if (c.bits != 4 && (c.bits != 8 || c.awq))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %d bits: %s", c.bits, c.awq ? "AWQ is 4-bit" : "GPTQ is 4- or 8-bit");
    const int gsz = p->group_size ? p->group_size : 128;
    if (gsz != 32 && gsz != 64 && gsz != 128 && gsz != -1)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: group size %d: 32, 64, 128 or -1 (a row)", gsz);
    if (c.awq && gsz == -1) return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: AWQ's groups are 32, 64 or 128 inputs (AutoAWQ's format has no whole-row group)");
    if (p->act_order && (c.awq || !c.hf))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: act-order is GPTQ's, for Hugging Face checkpoints (--format hf)");
    const struct llm__ftype *ft = c.hf ? NULL : llm__ftype_by_name(p->type);
    if (!c.hf && (!ft || ft->type == LLM__TYPE_F32 || ft->type == LLM__TYPE_F16 || ft->type == LLM__TYPE_BF16))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a quantized file type (q4_0, q4_K_M, ...)", p->type ? p->type : "(none)");
    if (!p->calib_path && !rtn) return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %s needs a calibration text (--calib FILE)", method);
    const int samples = p->n_samples > 0 ? p->n_samples : 128, seq = p->seq_len > 0 ? p->seq_len : 512;
    if (seq < 16 || seq > 16384) return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: --seq-len %d: 16 to 16384", seq);
    struct stat sb;
    if (c.hf && (stat(p->input, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: a checkpoint (--format hf) is made from a Hugging Face directory; "
                         "'%s' is not one (--format gguf writes a GGUF file)", p->input);
    // the calibration text
    FILE *tf = fopen(rtn ? "/dev/null" : p->calib_path, "rb");
    if (!tf) return llm__fail(e, LLM_ERR_IO, "quantize: cannot open '%s': %s", p->calib_path, strerror(errno));
    struct llm__outbuf text = {0};
    char chunk[1 << 16];
    for (size_t k; (k = fread(chunk, 1, sizeof(chunk), tf)) > 0 && text.n < ((size_t)1 << 30);) llm__outbuf_put(&text, chunk, k);
    const bool rerr = ferror(tf);
    fclose(tf);
    if (rerr || text.fail) { free(text.p); return llm__fail(e, LLM_ERR_IO, "quantize: cannot read '%s'", p->calib_path); }
    // the output, checked before the calibration: a checkpoint is written to OUTPUT.part and renamed
    // when complete (OUTPUT must not exist or be empty); a GGUF file's directory must be writable
    const size_t ol = strlen(p->output);
    char *part = malloc(ol + 6);
    if (!part) { free(text.p); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    memcpy(part, p->output, ol), memcpy(part + ol, ".part", 6);
    enum llm_status st0 = LLM_OK;
    if (c.hf) {
        DIR *od = stat(p->output, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(p->output) : NULL;
        bool empty = true;
        for (struct dirent *de; od && (de = readdir(od)) != NULL;) empty &= !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        if (od) closedir(od);
        if (stat(p->output, &sb) == 0 && !S_ISDIR(sb.st_mode))
            st0 = llm__fail(e, LLM_ERR_IO, "quantize: '%s': a file is in the way (a checkpoint is a directory)", p->output);
        else if (!empty)
            st0 = llm__fail(e, LLM_ERR_IO, "quantize: '%s' is not empty: remove it, or write the checkpoint elsewhere", p->output);
        else {
            llm__rm_dir(part);   // what an interrupted run left
            if (mkdir(part, 0755) != 0) st0 = llm__fail(e, LLM_ERR_IO, "quantize: cannot make the directory '%s': %s", part, strerror(errno));
            else c.outdir = part, part = NULL;
        }
    } else {
        FILE *pf = fopen(part, "wb");
        if (!pf) st0 = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", part, strerror(errno));
        else fclose(pf), remove(part);
    }
    free(part);
    if (st0) { free(text.p); return st0; }

    // the engine: the model as it is, one sequence of a window at a time
    struct llm_engine_params ep = llm_engine_params_default();
    ep.model_path = p->input;
    ep.n_threads = p->n_threads;
    ep.max_model_len = seq + 1;
    ep.max_num_batched_tokens = seq + 1;
    ep.max_num_seqs = 1;
    char err[512];
    enum llm_status st = LLM_OK;
    int32_t *toks = NULL, *win = NULL;
    struct llm__pool *pool = NULL;
    struct llm__qrepl *repl = NULL;
    llm_engine *E = llm_engine_create(&ep, err, sizeof(err));
    if (!E) {
        free(text.p);
        if (c.outdir) llm__rm_dir(c.outdir), free(c.outdir);
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %s", err);
    }
    c.E = E;
    c.g = &E->model.gguf;
    struct llm__model *m = &E->model;
    if (c.hf && (c.g->extra_free != llm__hf_owned_free || ((struct llm__hf_owned *)c.g->extra)->quantized)) {
        st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is quantized already; a checkpoint is made from F32/F16/BF16 weights", p->input);
        goto out;
    }
    c.vecs = calloc((size_t)c.g->n_tensors + 1, sizeof(float *));
    c.types = calloc((size_t)c.g->n_tensors + 1, sizeof(int));
    c.mats = calloc((size_t)c.g->n_tensors + 1, sizeof(*c.mats));
    if (!c.vecs || !c.types || !c.mats) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    if (!c.hf) {   // the mix's types, as llama-quantize gives them (the calibrated matrices get theirs)
        struct llm__qmix q = {.ftype = ft->ftype, .type = ft->type, .pure = p->pure != 0, .tied = true};
        if ((st = llm__qmix_init(c.g, &q, e))) goto out;
        const struct llm__gguf_tensor **ord = malloc(sizeof(*ord) * (size_t)(c.g->n_tensors + 1));
        if (!ord) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
        for (int64_t i = 0; i < c.g->n_tensors; i++) ord[i] = &c.g->tensors[i];
        qsort(ord, (size_t)c.g->n_tensors, sizeof(*ord), llm__tensor_order);
        for (int64_t i = 0; i < c.g->n_tensors; i++) c.types[ord[i] - c.g->tensors] = llm__qmix_type(&q, ord[i]);
        free(ord);
    }
    for (int64_t i = 0; i < c.g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = &c.g->tensors[i];
        bool qk = false;
        const int slot = llm__cq_slot(t->name, &qk), layer = llm__tensor_layer(t->name);
        if (slot < 0 || layer < 0 || layer >= m->n_layer || t->n_dims != 2) continue;
        if (t->type != LLM__TYPE_F32 && t->type != LLM__TYPE_F16 && t->type != LLM__TYPE_BF16) {
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s; %s quantizes F32/F16/BF16 weights", t->name,
                           llm__type_info(t->type)->name, method);
            goto out;
        }
        struct llm__qmat *mt = &c.mats[c.n_mats++];
        *mt = (struct llm__qmat){.tensor = i, .layer = layer, .slot = slot, .qk = qk, .rows = t->ne[1], .n = t->ne[0],
                                 .type = c.hf ? -1 : c.types[i]};
        c.total += (double)(mt->rows * mt->n);
        if (c.hf && ((c.awq && gsz > 0 && mt->n % gsz) || mt->n % 32 || mt->rows % 8)) {   // (GPTQ's last group may be partial)
            st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %lld x %lld: a checkpoint needs rows a multiple of 8 and "
                           "columns of whole groups of %d%s", t->name, (long long)mt->rows, (long long)mt->n,
                           c.awq && gsz > 0 ? gsz : 32, c.awq ? " (AWQ: a smaller --group-size may divide them)" : "");
            goto out;
        }
        if (!c.hf && llm__type_info((uint32_t)mt->type)->blck == 1) c.n_mats--, c.total -= (double)(mt->rows * mt->n);
    }
    if (!c.n_mats) { st = llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: the model has no layer matrices to quantize"); goto out; }
    c.group = gsz > 0 ? gsz : 1 << 30;

    if (rtn) {
        for (int i = 0; i < c.n_mats && !st; i++) {
            if (!llm__cq_load(&c, &c.mats[i]) || !llm__cq_round(&c, &c.mats[i], 0)) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            free(c.mats[i].w);
            c.mats[i].w = NULL;
            llm__cq_progress(&c, &c.mats[i]);
        }
        if (st) goto out;
        goto write;
    }
    // calibration
    const int n_tok = llm_tokenize(E, text.p, text.n, 0, NULL, 0);
    if (n_tok < 0) { st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: cannot tokenize '%s': %s", p->calib_path, llm_last_error(E)); goto out; }
    if (!(toks = malloc(sizeof(int32_t) * (size_t)(n_tok + 1))) || !(win = malloc(sizeof(int32_t) * (size_t)(seq + 1)))) {
        st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        goto out;
    }
    llm_tokenize(E, text.p, text.n, 0, toks, n_tok);
    const int windows = LLM__MIN(samples, n_tok / seq);
    if (windows < 1) {
        st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is %d tokens, less than one window of --seq-len %d", p->calib_path, n_tok, seq);
        goto out;
    }
    const int threads = LLM__MIN(E->params.n_threads > 0 ? E->params.n_threads : llm__online_cpus(), LLM__MAX_THREADS_AWQ);
    if (!(pool = llm__pool_new(threads, e))) { st = LLM_ERR_BACKEND; goto out; }
    c.cal.n_layer = m->n_layer;
    c.cal.want_h = !c.awq;
    c.cal.max_xs = c.awq ? 512 : 0;
    c.cal.stride = LLM__MAX(1, (int64_t)windows * (seq + 1) / 512);
    c.cal.pool = pool;
    c.cal.dot = llm__vec_dot_kernel(LLM__TYPE_F32, llm__simd_best());
    if (!(c.cal.in = calloc((size_t)m->n_layer * LLM__CAL_SLOTS, sizeof(*c.cal.in)))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
    // passes over the text, each taking as many layers' statistics as a third of the free memory holds
    const size_t widths[LLM__CAL_SLOTS] = {(size_t)m->n_embd, (size_t)m->n_head * (size_t)m->head_dim, (size_t)m->n_embd, (size_t)m->n_ff};
    size_t per_layer = 1, budget = llm__mem_available() / 3;
    for (int i = 0; i < LLM__CAL_SLOTS; i++) per_layer += c.awq ? widths[i] * 512 * 4 : widths[i] * widths[i] * 4;
    if (!budget) budget = (size_t)1 << 30;
    const int per_pass = (int)LLM__MAX(1, LLM__MIN((size_t)m->n_layer, budget / per_layer));
    const int passes = (m->n_layer + per_pass - 1) / per_pass;
    const int bos = E->vocab.bos;
    for (int pass = 0; pass < passes && !st; pass++) {
        c.cal.l0 = pass * per_pass;
        c.cal.l1 = LLM__MIN(m->n_layer, c.cal.l0 + per_pass);
        c.cal.pool = pool;
        m->calib = &c.cal;
        for (int w = 0; w < windows && !st; w++) {
            int k = 0;
            if (E->vocab.add_bos && bos >= 0) win[k++] = bos;
            memcpy(win + k, toks + (size_t)w * (size_t)seq, sizeof(int32_t) * (size_t)seq);
            const int sid = llm_seq_new(E);
            if (sid < 0) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: %s", llm_last_error(E)); break; }
            if (llm_seq_eval(E, sid, win, k + seq, NULL, 0) != LLM_OK) st = llm__fail(e, llm_last_status(E), "quantize: %s", llm_last_error(E));
            llm_seq_free(E, sid);
            if (p->progress) p->progress(p->progress_user, (double)(pass * windows + w + 1) / (passes * windows), "calibration");
        }
        m->calib = NULL;
        if (!st && c.cal.fail) st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory for the calibration's statistics");
        // the pass's layers, then their statistics given back
        for (int l = c.cal.l0; l < c.cal.l1 && !st; l++) st = c.awq ? llm__cq_awq_layer(&c, l, pool, e) : llm__cq_gptq_layer(&c, l, pool, e);
        for (int i = c.cal.l0 * LLM__CAL_SLOTS; i < c.cal.l1 * LLM__CAL_SLOTS; i++) {
            struct llm__cal_in *ci = &c.cal.in[i];
            free(ci->h), free(ci->abs_sum), free(ci->xs);
            ci->h = NULL, ci->abs_sum = NULL, ci->xs = NULL;
        }
    }
    c.cal.pool = NULL;
    if (st) goto out;
write:
    if (c.hf) {
        st = llm__cq_write_hf(&c, e);
        if (!st && stat(p->output, &sb) == 0) rmdir(p->output);   // (empty)
        if (!st && rename(c.outdir, p->output) != 0)
            st = llm__fail(e, LLM_ERR_IO, "quantize: cannot rename '%s' to '%s': %s", c.outdir, p->output, strerror(errno));
        if (stats) {
            memset(stats, 0, sizeof(*stats));
            stats->n_quantized = c.n_mats;
            stats->n_tensors = (int)c.g->n_tensors;
            for (int i = 0; i < c.n_mats; i++) {
                const struct llm__gguf_tensor *t = &c.g->tensors[c.mats[i].tensor];
                stats->bytes_in += t->size;
                stats->bytes_out += (size_t)(c.mats[i].rows * c.mats[i].n) * (size_t)c.bits / 8 +
                                    (size_t)(c.mats[i].rows * ((c.mats[i].n + c.group - 1) / c.group)) * (2 + (size_t)c.bits / 8);
                stats->n_params += c.mats[i].rows * c.mats[i].n;
            }
        }
    } else {
        if (!(repl = calloc((size_t)c.g->n_tensors + 1, sizeof(*repl)))) { st = llm__fail(e, LLM_ERR_NOMEM, "out of memory"); goto out; }
        for (int i = 0; i < c.n_mats; i++)
            repl[c.mats[i].tensor] = (struct llm__qrepl){c.mats[i].type, c.mats[i].data, llm__row_bytes(c.mats[i].type, c.mats[i].n) * (size_t)c.mats[i].rows};
        for (int64_t i = 0; i < c.g->n_tensors; i++)
            if (c.vecs[i]) repl[i] = (struct llm__qrepl){LLM__TYPE_F32, c.vecs[i], sizeof(float) * (size_t)c.g->tensors[i].ne[0]};
        struct llm_quantize_stats s0 = {0};
        st = llm__quantize_gguf(c.g, p, ft, repl, &s0, e);
        if (stats) *stats = s0;
    }
out:
    m->calib = NULL;
    if (st && c.outdir) llm__rm_dir(c.outdir);
    free(c.outdir);
    if (c.cal.pool == NULL) c.cal.pool = pool;
    llm__calib_free(&c.cal);
    for (int i = 0; c.mats && i < c.n_mats; i++) {
        struct llm__qmat *mt = &c.mats[i];
        free(mt->w), free(mt->data), free(mt->q), free(mt->scale), free(mt->zero), free(mt->g_idx);
    }
    for (int64_t i = 0; c.vecs && i < c.g->n_tensors; i++) free(c.vecs[i]);
    free(c.vecs), free(c.types), free(c.mats), free(repl), free(toks), free(win), free(text.p);
    llm_engine_free(E);
    return st;
}

// p with "/suffix" appended (p freed), or NULL (p freed) when there is no memory.
static char *llm__path_join(char *p, const char *suffix) {
    size_t n = strlen(p), m = strlen(suffix);
    char *q = realloc(p, n + m + 2);
    if (!q) return free(p), NULL;
    q[n] = '/';
    memcpy(q + n + 1, suffix, m + 1);
    return q;
}

// The folder that holds p, as a path (p freed): its text up to the last '/', "/" or ".".
static char *llm__path_dir(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (slash == p) p[1] = 0;
    else if (slash) *slash = 0;
    else { free(p); p = llm__strndup(".", 1); }
    return p;
}

// Where a path to be written lies against a file or directory being read: 0 apart, 1 it is that
// file, 2 it lies inside that directory, -1 no memory. Files are compared by device and inode,
// symbolic links followed: the path when it exists, else the nearest part of it that does (where
// it would be created); then the folder that holds it (a link to a file: its target's), and every
// folder above that, reached through "/.." (which leaves a folder physically, links resolved),
// up to the root. POSIX.1-2008 alone (no realpath).
static int llm__path_overlap(const char *out, const char *in) {
    struct stat si, so, sl, up;
    if (!in || stat(in, &si) != 0) return 0;   // a missing input: its reader's message names it
    char *p = llm__strndup(out, strlen(out));
    if (!p) return -1;
    bool exists = true;
    while (stat(p, &so) != 0) {
        exists = false;
        if (!strcmp(p, ".") || !strcmp(p, "/")) { free(p); return 0; }
        if (!(p = llm__path_dir(p))) return -1;
    }
    if (so.st_dev == si.st_dev && so.st_ino == si.st_ino) { free(p); return exists ? 1 : 2; }
    for (int hops = 0; hops < 40 && lstat(p, &sl) == 0 && S_ISLNK(sl.st_mode); hops++) {   // to the link's target
        char target[4096];
        ssize_t k = readlink(p, target, sizeof(target) - 1);
        if (k <= 0) break;
        target[k] = 0;
        if (target[0] == '/') { free(p); p = llm__strndup(target, (size_t)k); }
        else if ((p = llm__path_dir(p))) p = llm__path_join(p, target);
        if (!p) return -1;
    }
    if (!S_ISDIR(so.st_mode) && !(p = llm__path_dir(p))) return -1;
    int overlap = 0;
    for (int depth = 0; !overlap && depth < 1024 && stat(p, &so) == 0; depth++) {
        if (so.st_dev == si.st_dev && so.st_ino == si.st_ino) overlap = 2;
        if (!(p = llm__path_join(p, ".."))) return -1;
        if (stat(p, &up) != 0 || (up.st_dev == so.st_dev && up.st_ino == so.st_ino)) break;   // the root
    }
    free(p);
    return overlap;
}

// Refuses an output that is an input or lies inside one (LLM_ERR_INVALID_ARG): OUT.part renamed
// over a file of a model directory, a checkpoint written into the directory being read, or
// OUT.part (written first) being the input file destroys what is being read, even while it is
// read (the input is mapped).
static enum llm_status llm__quantize_output_ok(const char *out, const char *in, const char *what, struct llm__err *e) {
    size_t n = strlen(out);
    char *part = malloc(n + 6);
    if (!part) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memcpy(part, out, n);
    memcpy(part + n, ".part", 6);
    enum llm_status st = LLM_OK;
    for (int i = 0; i < 2 && st == LLM_OK; i++) {
        int o = llm__path_overlap(i ? part : out, in);
        if (o < 0) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        else if (o && i)
            st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: the output '%s' is written first as '%s', which %s the %s '%s': "
                           "write it elsewhere", out, part, o == 1 ? "is" : "is inside", what, in);
        else if (o)
            st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: the output '%s' %s the %s '%s': write it elsewhere", out,
                           o == 1 ? "is" : "is inside", what, in);
    }
    free(part);
    return st;
}

enum llm_status llm_quantize(const struct llm_quantize_params *params, struct llm_quantize_stats *stats, char *err,
                             size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    struct llm_quantize_stats st_ = {0};
    struct llm__gguf g;
    memset(&g, 0, sizeof(g));
    enum llm_status st = LLM_OK;
    // round-to-nearest to a GGUF file, unless a checkpoint (--format hf) is asked for
    const bool rtn = params && (!params->method || !strcmp(params->method, "rtn")) && !(params->format && !strcmp(params->format, "hf"));
    const struct llm__ftype *ft = params && rtn ? llm__ftype_by_name(params->type) : NULL;
    if (!params || !params->input || !params->output)
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "quantize: an input model and an output file are needed");
    else if (rtn && !ft)
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a file type (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, "
                       "iq4_xs, q2_K, q3_K_S, q3_K_M, q3_K_L, q4_K_S, q4_K_M, q5_K_S, q5_K_M, q6_K, f16, bf16, f32)",
                       params->type ? params->type : "(none)");
    else if ((st = llm__quantize_output_ok(params->output, params->input, "input", &e)) == LLM_OK &&
             (st = llm__quantize_output_ok(params->output, params->calib_path, "calibration text", &e)) == LLM_OK) {
        if (!rtn) st = llm__quantize_calibrated(params, &st_, &e);
        else if (!(st = llm__model_open(&g, params->input, false, &e))) st = llm__quantize_gguf(&g, params, ft, NULL, &st_, &e);
    }
    llm__gguf_close(&g);
    if (stats) *stats = st_;
    if (st && err && err_size) snprintf(err, err_size, "%s", e.msg[0] ? e.msg : llm_status_str(st));
    return st;
}
