// The CUDA backend's two halves meet here: backends/cuda.c (host code, included by llm.c under
// -DLLM_CUDA, C) fills the backend vtable and decides what runs; backends/cuda.cu (kernels,
// compiled by nvcc, or as C++ on the CPU emulator of the tests) runs it. Every kernel takes one
// parameter struct of this header; the host records it and hands it to llm__cu_launch, directly or
// while a CUDA graph is captured. Plain C types only (C and C++ include this file). The structs
// have no padding (pad_ fields where the layout would have some): the host hashes their bytes to
// find a step's graph.
#ifndef LLM_BACKENDS_CUDA_H
#define LLM_BACKENDS_CUDA_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum llm__cu_kernel {
    LLM__CU_ELTWISE,      // struct llm__cu_eltwise
    LLM__CU_RMSNORM,      // struct llm__cu_rmsnorm
    LLM__CU_ROWS,         // struct llm__cu_rows: get_rows, gather_cols, embed
    LLM__CU_ROPE,         // struct llm__cu_rope
    LLM__CU_KV_STORE,     // struct llm__cu_kv_store
    LLM__CU_QUANT_ACT,    // struct llm__cu_quant_act
    LLM__CU_MATVEC,       // struct llm__cu_matmul, up to LLM__CU_MATVEC_MAX tokens
    LLM__CU_MATMUL,       // struct llm__cu_matmul, tensor cores
    LLM__CU_MATVEC_REDUCE,// struct llm__cu_matmul: sums a split GEMV's partial results
    LLM__CU_ATTN_DECODE,  // struct llm__cu_attn
    LLM__CU_ATTN_REDUCE,  // struct llm__cu_attn
    LLM__CU_ATTN_PREFILL, // struct llm__cu_attn
    LLM__CU_COPY,         // struct llm__cu_copy (the bandwidth probe)
    LLM__CU_DEQUANT,      // struct llm__cu_dequant
    LLM__CU_MOE_ROUTE,    // struct llm__cu_moe_route
    LLM__CU_MOE_GROUP,    // struct llm__cu_moe_group
    LLM__CU_MATMUL_ID,    // struct llm__cu_matmul_id
    LLM__CU_MOE_SUM,      // struct llm__cu_moe_sum
    LLM__CU_N
};

#define LLM__CU_MATVEC_MAX 8   // tokens up to which products take the GEMV kernel
#define LLM__CU_TILE_Q 16      // attention prefill: queries per tile
#define LLM__CU_MAX_HEAD_DIM 256
#define LLM__CU_MAX_EXPERTS 1024   // a mixture of experts' experts a layer, at most (k_moe_group)

// A weight as the device holds it. Quantized types are repacked at load into two planes so that
// quants are read with aligned 128-bit loads: `body` holds each block's quants (llm__cu_layout:
// a contiguous run of the block, a multiple of 16 bytes), block after block, row after row;
// `hdr` the rest of each block (scales, mins, high bits), in the block's order, hdr_len bytes a
// block. F32 / F16 / BF16 rows are kept as they are (body; hdr NULL).
struct llm__cu_w {
    const uint8_t *body, *hdr;
    int64_t K, N;       // columns (inputs), rows (outputs)
    int32_t type, pad_;
};

// The step's arrays on the device (int32 each), valid for the kernels of one step.
struct llm__cu_stepv {
    const int32_t *tokens, *positions, *seq_idx, *slot_mapping, *out_rows, *block_tables, *tiles;
    int32_t n_tokens, n_out, bt_stride, block_size, n_tiles, pad_;
};

// d = op(a, b) row by row: 0 add, 1 silu(a) * b, 2 gelu(a) * b, 3 a * s, 4 gpt-oss's SwiGLU
// (llama.cpp's swiglu_oai: alpha s, limit)
struct llm__cu_eltwise {
    float *d;
    const float *a, *b;
    int64_t rows, cols, sd, sa, sb;   // strides in floats
    int op;
    float s, limit;
    int32_t pad_;
};

struct llm__cu_rmsnorm {
    float *d;
    const float *x, *w;
    int64_t rows, cols, sd, sx;
    float eps;
    int32_t pad_;
};

// d[i] = row idx[i] of src (mode 0: get_rows, f32 src, idx = out_rows, n = n_out rows; mode 2:
// embed, a weight table w, idx = tokens) or d[i][k] = x[i][perm[k]] (mode 1: gather_cols)
struct llm__cu_rows {
    float *d;
    const float *src;
    const int32_t *idx;
    struct llm__cu_w w;
    int64_t rows, cols, sd, ssrc;
    int32_t mode, pad_;
};

struct llm__cu_rope {
    float *x;
    const int32_t *positions;
    const float *freq_factors;   // n_rot / 2 or NULL
    int64_t rows, sx;
    int n_head, head_dim, n_rot, neox;
    float freq_base, freq_scale;   // (freq_base: theta_scale = base^(-2 / n_rot), the host's)
    float ext_factor, mscale, corr0, corr1;   // YaRN (backends/backend.h's struct llm__rope); ext_factor 0: none
};

// Cache rows, slot after slot, of n_kv values: f32 (mode 0), f16 (1), or q8_0 (2: the row's n_kv
// int8 quants, then the fp16 scales of its groups of 32, as many bytes as n_kv / 32 Q8_0 blocks;
// each head rotated first as the CPU backend rotates a q8_0 cache's heads when 64 divides
// head_dim: keys in pieces of the largest power of two dividing it, values in pieces of 64).
struct llm__cu_kv_store {
    void *kc, *vc;
    const float *k, *v;
    const int32_t *slots;
    int64_t rows, n_kv, sk, sv;
    int32_t mode, head_dim;
};

// Activations rounded to 8 bits for the integer products: per row of K, K int8 quants (q) and
// K / 32 float scales (dq), x = dq[j / 32] * q[j].
struct llm__cu_quant_act {
    int8_t *q;
    float *dq;
    const float *x;
    int64_t rows, K, sx;
    int32_t mode, pad_;   // mode 0: as Q8_0 (blocks of 32), 1: as Q8_K (blocks of 256); for cuBLAS (K
                          // 2-byte values a row in q, no dq): 2 to f16, 3 to bf16, 4 and 5 rounded as
                          // 0 and 1, as f16
};

// dst[t][n] = sum_k w[n][k] x[t][k] (+ bias[n]) for t < ntok. Integer types take the rounded
// activations (q, dq: llm__cu_quant_act's layout); float types and the tensor-core GEMM take x.
// Split-K (GEMV of few rows): nsplit > 1 blocks share a row, each over a slice of K, writing
// partial sums to part ([split][token][row]) that MATVEC_REDUCE adds up (with the bias) into d.
struct llm__cu_matmul {
    struct llm__cu_w w;
    float *d;
    const float *x, *bias;
    const int8_t *q;
    const float *dq;
    float *part;
    int64_t ntok, sd, sx;
    int32_t nsplit, pad_;
};

// Paged attention of n_tok queries (rows of q, n_head heads of head_dim) over the cache (rows of
// n_head_kv * head_dim per slot), as struct llm__attn says; decode splits each query's keys into
// nsplit parts (partial results in part: per (token, head, split) head_dim sums, max, sum) that
// ATTN_REDUCE combines.
struct llm__cu_attn {
    float *out;
    const float *q;
    const void *kc, *vc;
    float *part;
    const float *sinks;   // n_head: a sink per head joining each softmax's denominator (gpt-oss); NULL: none
    struct llm__cu_stepv st;
    int64_t sq, so, n_tok;
    int32_t n_head, n_head_kv, head_dim, mode, nsplit, window;   // mode: the cache's (struct llm__cu_kv_store)
    float scale, softcap;
};

// Rows row0 .. row0 + rows - 1 of a quantized weight as f16 (out: rows x K, row after row), for
// cuBLAS's GEMM.
struct llm__cu_dequant {
    struct llm__cu_w w;
    void *out;
    int64_t row0, rows;
};

// A mixture of experts' routing (backends/backend.h: moe_route), a thread per token: ids and wts
// rows of k (strides in elements) from logits rows of n_expert.
struct llm__cu_moe_route {
    int32_t *ids;
    float *wts;
    const float *logits;
    int64_t ntok, si, sw, sl;
    int32_t n_expert, k, norm, softmax_weight;
    float scale;
    int32_t pad_;
};

// The slots (token * k + j) grouped by expert: off[0..n_expert] then the slot list, into out (one
// block; an expert's slots in whatever order the atomics give).
struct llm__cu_moe_group {
    int32_t *out;
    const int32_t *ids;
    int64_t nslots, si;
    int32_t n_expert, k;
};

// d[s][r] = x[xs] . (row e N + r of the stacked experts w) (+ bias[e][r]) for each slot s of
// expert e (groups: k_moe_group's lists), xs = s (x_per_slot) or s / k; quantized types take the
// rounded activations (q, dq) as the GEMV does, float types x.
struct llm__cu_matmul_id {
    struct llm__cu_w w;   // N = the rows of one expert
    float *d;
    const float *x, *bias;
    const int8_t *q;
    const float *dq;
    const int32_t *groups;
    int64_t sd, sx, sb;
    int32_t n_expert, k, x_per_slot, pad_;
};

// d[i] = sum over j < k of wts[i][j] src[i k + j] (+ sigmoid(gate[i]) shared[i] when shared)
struct llm__cu_moe_sum {
    float *d;
    const float *src, *wts, *shared, *gate;
    int64_t rows, cols, sd, ss, sw, ssh, sg;
    int32_t k, pad_;
};

struct llm__cu_copy {
    void *dst;
    const void *src;
    size_t n;   // bytes, a multiple of 16
};

union llm__cu_params {
    struct llm__cu_eltwise eltwise;
    struct llm__cu_rmsnorm rmsnorm;
    struct llm__cu_rows rows;
    struct llm__cu_rope rope;
    struct llm__cu_kv_store kv_store;
    struct llm__cu_quant_act quant_act;
    struct llm__cu_matmul matmul;
    struct llm__cu_attn attn;
    struct llm__cu_copy copy;
    struct llm__cu_dequant dequant;
    struct llm__cu_moe_route moe_route;
    struct llm__cu_moe_group moe_group;
    struct llm__cu_matmul_id matmul_id;
    struct llm__cu_moe_sum moe_sum;
};

// Where a quantized type's quants lie in its block (the body plane), and the header's length; 0
// when the type has no kernels (llm__cu_layout returns 0) or is a float type (returns 1, body_len
// 0: kept as it is).
int llm__cu_layout(int type, int *body_off, int *body_len, int *hdr_len);
// Launches kernel `kernel` with its parameters on `stream` (a cudaStream_t); the launch's error
// code (cudaError_t; 0: none).
int llm__cu_launch(int kernel, const union llm__cu_params *p, void *stream);
// Once per process, before the first launch: per-kernel settings (shared memory beyond 48 KB).
int llm__cu_setup(void);

#ifdef __cplusplus
}
#endif
#endif
