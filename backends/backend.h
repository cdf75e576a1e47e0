// The backend contract: the ops a backend implements (struct llm_backend_i)
// (docs/backends.md).
//
// Included by src/internal.h, after the helpers it uses (struct llm__err and llm__fail, the
// tensor types of src/types.c); a backend is a C file that includes src/internal.h, fills one
// struct llm_backend_i and describes itself in a struct llm__backend_desc (at the end of this
// file), which src/backend.c's table lists.
//
// The transformer (src/model.c) calls only these ops; a backend fills one table,
// struct llm_backend_i, with designated initializers (`.matmul = llm__cpu_matmul,`). Ops take
// backend buffers (struct llm__buf), never host pointers, so the same layer loop runs on the CPU
// and on a GPU. The contract every backend keeps (backends/cpu.c is the reference):
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
// Devices. A GPU backend also lists its devices for llm_list_devices (the list_devices entry of
//   its struct llm__backend_desc, below, which src/backend.c's llm__list_devices calls: entry i
//   there is device i of its open, p->device) and may probe bandwidth for llm_measure_bandwidth;
//   CPU-only builds list none.

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
    // YaRN (ext_factor != 0; a backend without rope_yarn refuses such a model): pair i (of dimension
    // 2i) rotates by t_i = f * (1 - r) + e * r, e its angle unscaled, f = e * freq_scale, r =
    // ext_factor * (1 - clamp((i - corr_dims[0]) / max(0.001, corr_dims[1] - corr_dims[0]), 0, 1)),
    // and its cos and sin are multiplied by mscale (ggml's rope_yarn). ext_factor 0: neither.
    float ext_factor, mscale;
    float corr_dims[2];
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
    int n_expert, n_expert_used;   // a mixture of experts' experts and those a token uses (0: dense)
};

// The routing of a mixture-of-experts layer (moe_route): each token goes to the k experts of the
// largest probabilities (a softmax of the router's logits over the n_expert experts; ties to the
// lower index), weighted by their probabilities, divided by their sum when norm (the sum clamped
// to at least 2^-14, as llama.cpp), times scale when scale is not 0.
struct llm__moe {
    int n_expert, k;
    bool norm;
    float scale;
    // gpt-oss (llama.cpp's SOFTMAX_WEIGHT gating): the k largest logits chosen, their weights a
    // softmax over those k alone (then norm and scale as above)
    bool softmax_weight;
};

struct llm__attn {
    int n_head, n_head_kv, head_dim;
    float scale;       // scores are q.k * scale
    int window;        // sliding window: a token at position p sees keys at p - window + 1 .. p; 0: all
    float softcap;     // scores become softcap * tanh(score / softcap) before the softmax; 0: none
    // (n_head) f32: head h's sink, a logit that joins its softmax's denominator and carries no value
    // (gpt-oss; attention_window only, of a backend with attention_sinks); no buffer: none
    struct llm__tensor sinks;
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
    // dst = g * sigmoid(alpha * g) * (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit)
    // (gpt-oss's SwiGLU, llama.cpp's swiglu_oai)
    void (*swiglu_oai)(void *ctx, struct llm__tensor dst, struct llm__tensor gate, struct llm__tensor up, float alpha,
                       float limit);
    // rope honours llm__rope's YaRN fields; attention_window honours llm__attn.sinks
    bool rope_yarn, attention_sinks;
    // attention as above, also honouring llm__attn.window and .softcap (which attention ignores)
    void (*attention_window)(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor k_cache,
                             struct llm__tensor v_cache, const struct llm__attn *p);
    // dst[i][k] = x[i][perm[k]], perm int32: GPTQ act-order weights' inputs (optional: NULL, and
    // such a checkpoint is refused at load with a message naming the backend)
    void (*gather_cols)(void *ctx, struct llm__tensor dst, struct llm__tensor x, struct llm__tensor perm);

    // --- mixtures of experts (optional, the four together: NULL, and an MoE model is refused at
    // load with a message naming the backend) ---
    // Takes a layer's n_expert experts stacked in one weight (ne1 = n_expert x the rows of one;
    // expert e's rows from e x rows), in the layout matmul_id reads: like weight_load.
    enum llm_status (*weight_load_experts)(void *ctx, struct llm__weight *w, int type, int64_t ne0, int64_t ne1,
                                           int n_expert, const void *data, struct llm__err *e);
    // ids (int32) and wts (f32), k columns per token: the experts of each row of logits (n_expert
    // columns, the router's output) and their weights (struct llm__moe), best first
    void (*moe_route)(void *ctx, struct llm__tensor ids, struct llm__tensor wts, struct llm__tensor logits,
                      const struct llm__moe *p);
    // dst[j] row i*k + s = (x row i*k + s when x_per_slot, else row i) @ (expert ids[i][s] of
    // w[j])^T for j < n (1 or 2 stacked-expert weights sharing the input; dst[j].ne0 = the rows of
    // one expert): an expert's rows are read once for all the tokens routed to it; + row ids[i][s]
    // of bias[j] (n_expert rows of dst[j].ne0, f32) when bias and bias[j].buf
    void (*matmul_id)(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                      const struct llm__tensor *bias, struct llm__tensor x, struct llm__tensor ids, bool x_per_slot);
    // dst[i] = sum over s < k, in order, of wts[i][s] * src row i*k + s; then, when shared has a
    // buffer (a shared expert's output, a row per token), + sigmoid(gate[i][0]) * shared[i]
    void (*moe_sum)(void *ctx, struct llm__tensor dst, struct llm__tensor src, struct llm__tensor wts,
                    struct llm__tensor shared, struct llm__tensor gate);

    // --- device (optional) ---
    // The device's name, for llm_get_engine_info. NULL: "".
    const char *(*device_name)(void *ctx);
    // The device's memory bandwidth in GB/s, measured by copying (may allocate and free a
    // buffer; outside steps). NULL: llm_measure_bandwidth says LLM_ERR_UNSUPPORTED.
    enum llm_status (*bandwidth)(void *ctx, double *gbps, struct llm__err *e);
    // The int8 multiply-accumulates a second the device reaches, in G MAC/s: its int8 dot
    // instruction in independent chains on every core it uses (a fraction of a second; outside
    // steps). NULL, or LLM_ERR_UNSUPPORTED where the device has none: llm_measure_compute says so.
    enum llm_status (*compute_peak)(void *ctx, double *gmacs, struct llm__err *e);
};

struct llm_backend {
    const struct llm_backend_i *iface;
    void *ctx;
};

LLM__INTERNAL enum llm_status llm__backend_check(const struct llm_backend_i *b, struct llm__err *e);

static inline char *llm__tensor_row(struct llm__tensor t, int64_t i) {
    return (char *)t.buf->data + t.offs + (size_t)i * t.nb1;
}

// --- the backends built in (src/backend.c's table lists them) ---

// One backend: how to open it and list its devices. llm__backends (src/backend.c) lists those
// built in, in the order the "auto" backend tries them.
struct llm__backend_desc {
    enum llm_backend_kind kind;
    const char *name;   // the name llm.h and --backend use
    // Opens the backend for the engine's parameters (p->device, p->n_threads); on failure
    // frees what it made (be is left zeroed) and says why in e.
    enum llm_status (*open)(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e);
    // Optional: describes up to max of its devices (entry i: p->device i of open); their count,
    // or -1 with e set. NULL: no devices to list (the CPU).
    int (*list_devices)(struct llm_device *out, int max, struct llm__err *e);
};

LLM__EXTERN const struct llm__backend_desc llm__backend_cpu;   // backends/cpu.c
#ifdef LLM_VULKAN
LLM__EXTERN const struct llm__backend_desc llm__backend_vulkan;   // backends/vulkan.c
#endif
#ifdef LLM_CUDA
LLM__EXTERN const struct llm__backend_desc llm__backend_cuda;   // backends/cuda.c
#endif

// The backend the parameters ask for, opened, its table checked (llm__backend_check). "auto":
// the first of the table that opens. llm__backend_close frees one opened or half made.
LLM__INTERNAL enum llm_status llm__backend_open(struct llm_backend *be, const struct llm_engine_params *p,
                                                struct llm__err *e);
LLM__INTERNAL void llm__backend_close(struct llm_backend *be);
// LLM_OK when the parameters' backend is built in; else LLM_ERR_UNSUPPORTED naming what is.
LLM__INTERNAL enum llm_status llm__backend_available(enum llm_backend_kind kind, struct llm__err *e);
// The GPU devices of the backends built in (llm_list_devices), or -1 with e set.
LLM__INTERNAL int llm__list_devices(struct llm_device *out, int max, struct llm__err *e);
