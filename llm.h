// llm.h — the public interface of llm.c, a portable LLM inference engine. MIT licence (LICENSE).
//
// Use: #include "llm.h" and compile llm.c with your program (C11; libc, libm, pthreads):
//     cc -O2 -c llm.c && cc -O2 app.c llm.o -lm -lpthread
// or link the installed library: cc app.c $(pkg-config --cflags --libs llm)
//
// The rules every function here follows:
//
// Errors. A function that can fail says so by its return value, one of three ways:
//   - enum llm_status: LLM_OK (0) or the kind of failure;
//   - int: a value >= 0 on success (an id, a count, a length), -1 on failure;
//   - pointer: NULL on failure.
//   Functions that take an engine then record the failure in it: llm_last_status(engine) gives
//   its kind and llm_last_error(engine) a message for people, until the next failure. Functions
//   without an engine (llm_engine_create, llm_list_devices) write the message into a buffer the
//   caller passes; the few others (llm_sampler_create, llm_chat_apply) fail only for the reasons
//   their comments give. Functions returning void cannot fail.
// Truncation. A function that writes text or ids into the caller's buffer returns the size of
//   the whole result: the text's length (without the terminating NUL) or the number of ids. When
//   the text does not fit (length >= size) or the ids do not (count > max), the buffer holds as
//   much as fits (text NUL-terminated when size > 0) and the caller may call again with a larger
//   buffer. llm_text_stream_push writes and consumes nothing when the text does not fit.
// Memory. Strings and arrays passed in are copied when the function needs them after it returns.
//   Pointers handed out stay valid as their comments say, at most until llm_engine_free.
// Threads. There is no global state: different engines may be used from different threads at
//   the same time. One engine is used by one thread at a time (calls on it must not overlap);
//   it computes with its own pool of worker threads (n_threads at most, and no more than the
//   cores it may use: each step runs on as many as measure fastest, fewer while other programs
//   keep cores busy; results do not depend on how many). Samplers and text streams likewise. The functions without an engine argument
//   may be called from any thread at any time.
// Parameters. Option structs are filled by their *_default() function, then changed field by
//   field. In llm_engine_params, zero in a field means its default unless the comment says
//   otherwise; in the sampling and request parameters each field's comment says what its values
//   mean (0 is not always the default there: temperature 0 is greedy, top_p 0 keeps one token).
#ifndef LLM_H
#define LLM_H

#include <stddef.h>
#include <stdint.h>

// LLM_API marks the exported functions (the shared library exports nothing else).
#ifndef LLM_API
#if defined(_WIN32) && defined(LLM_BUILD_SHARED)
#define LLM_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define LLM_API __attribute__((visibility("default")))
#else
#define LLM_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_VERSION_MAJOR 0
#define LLM_VERSION_MINOR 2
#define LLM_VERSION_PATCH 0
#define LLM_VERSION "0.2.0"
#define LLM_VERSION_NUMBER (LLM_VERSION_MAJOR * 10000 + LLM_VERSION_MINOR * 100 + LLM_VERSION_PATCH)
// The version of the library linked in (LLM_VERSION_NUMBER of the llm.c compiled), and its text.
LLM_API int llm_version(void);
LLM_API const char *llm_version_string(void);

enum llm_status {
    LLM_OK = 0,
    LLM_ERR_INVALID_ARG,   // a bad parameter from the caller
    LLM_ERR_IO,            // a file could not be opened or read
    LLM_ERR_FORMAT,        // a model file is corrupt, truncated or inconsistent
    LLM_ERR_UNSUPPORTED,   // well-formed, but uses something this build cannot run
    LLM_ERR_NOMEM,         // out of host or device memory
    LLM_ERR_CONTEXT,       // too many tokens for the context or the KV cache
    LLM_ERR_BACKEND,       // the compute backend failed
};
LLM_API const char *llm_status_str(enum llm_status status);

typedef struct llm_engine llm_engine;

// --- Engines ---

enum llm_backend_kind {
    LLM_BACKEND_CPU = 0,   // always there
    LLM_BACKEND_VULKAN,    // builds made with make VULKAN=1 (any GPU with a Vulkan driver)
    LLM_BACKEND_AUTO,      // a GPU backend when one is built in and can take the model, else the CPU
    LLM_BACKEND_CUDA,      // builds made with make CUDA=1 (NVIDIA GPUs of compute capability 8.0 or newer)
};
// The KV cache's type. LLM_KV_Q8_0: llama.cpp's Q8_0 (blocks of 32 values of a head, an f16 scale
// each: 8.5 bits a value, about half of f16's memory), on the CPU backend; head_dim a multiple of 32.
enum llm_kv_dtype { LLM_KV_F16 = 0, LLM_KV_F32, LLM_KV_Q8_0 };
enum llm_sched_policy {
    LLM_SCHED_FCFS = 0,    // first come, first served
    LLM_SCHED_PRIORITY,    // lower llm_request_params.priority first, then arrival
};
enum llm_load_mode {
    LLM_LOAD_ALL = 0,      // everything: the engine can generate
    LLM_LOAD_VOCAB,        // the metadata and the tokenizer (vocabulary-only GGUF files work)
    LLM_LOAD_METADATA,     // only the file's metadata and tensor list (any well-formed GGUF file,
                           // even of an architecture or type this build cannot run)
};
#define LLM_DEVICE_AUTO (-1)

struct llm_engine_params {
    const char *model_path;    // a GGUF file, or a Hugging Face model directory (config.json,
                               // model.safetensors or its shards, tokenizer.json; F32/F16/BF16
                               // weights, or AWQ (GEMM) / GPTQ 4- and 8-bit ones, of
                               // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
                               // Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM,
                               // Gemma3ForCausalLM; BPE tokenizers, byte-level or SentencePiece-
                               // style with byte fallback)
    enum llm_backend_kind backend;   // default LLM_BACKEND_CPU
    int device;                // GPU backends: an index of llm_list_devices, or LLM_DEVICE_AUTO
                               // (the default: the first discrete GPU, else an integrated one)
    int n_threads;             // CPU worker threads, at most (0: the cores this process may use)
    int max_model_len;         // context length in tokens (0: the model's, at most 4096; at most 2^24)
    int block_size;            // KV cache block size in tokens: 8, 16 (default) or 32
    size_t kv_cache_bytes;     // KV cache memory (0: see gpu_memory_utilization)
    enum llm_kv_dtype kv_cache_dtype;   // default LLM_KV_F16
    int verbose;               // 0 quiet (default), 1 loading progress on stderr when it is a terminal
    enum llm_load_mode load;   // default LLM_LOAD_ALL
    // serving (llm_add_request / llm_step / llm_generate), with vLLM's names and defaults
    int max_num_seqs;          // requests computed together in a step (default 256)
    int max_num_batched_tokens;// tokens per step (default 512); longer prompts are prefilled in
                               // chunks, mixed with the decodes of running requests
    int enable_prefix_caching; // 1: full KV blocks are shared between requests with the same
                               // prompt prefix and kept after they finish, until memory is needed
    enum llm_sched_policy scheduling_policy;   // default LLM_SCHED_FCFS
    float gpu_memory_utilization;  // when kv_cache_bytes is 0: the share of the free memory the
                               // KV cache takes (the GPU's after the weights, the available RAM
                               // on the CPU), used as given. 0 (default): a quarter of it, at
                               // most what max_num_seqs full contexts need and at least one full
                               // context. On the CPU, pages are only used as blocks fill.
    int no_mmap;               // 0 (default): the model file is mapped and weights the backend
                               // does not copy are used in place, so the file must not change
                               // while the engine uses it: truncated or rewritten in place, the
                               // next read of a page that is gone ends the process with SIGBUS
                               // (the engine installs no signal handler). 1: the whole file is
                               // read into memory at llm_engine_create (as llama.cpp's --no-mmap);
                               // the file may then change or go. Either way each create checks
                               // the tensors against the file's size as it is then.
    // speculative decoding (vLLM's names): each step a decoding request proposes up to
    // num_speculative_tokens draft tokens, the model computes them together with its next token
    // and keeps the longest prefix its own sampling agrees with (rejection sampling: the outputs
    // are distributed exactly as without speculation; greedy outputs are identical).
    int num_speculative_tokens;// K: drafts per request and step, at most 16 (0: off; with
                               // speculative_model or speculative_ngram, 0 means 4)
    const char *speculative_model;  // a draft model (GGUF) with the same vocabulary, smaller or
                               // at a lower type: it proposes each request's drafts, computed on
                               // the same backend with its own KV cache. Or:
    int speculative_ngram;     // 1: drafts are the tokens that followed the latest earlier
                               // occurrence of the request's last n tokens (prompt lookup)
    int prompt_lookup_min;     // n from prompt_lookup_max down to prompt_lookup_min (defaults 2, 4)
    int prompt_lookup_max;
    const char *quantize;      // a weight type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K,
                               // q4_K, q5_K, q6_K, iq4_xs, f16, bf16; any case): the F32, F16 and
                               // BF16 matrices are quantized to it at load, on n_threads threads
                               // (rows a K-quant's 256 does not divide fall back as llama-quantize
                               // does: q4_K to q5_0, q5_K to q5_1, q6_K to q8_0, q2_K and q3_K to
                               // q4_0, iq4_xs to iq4_nl). NULL: the weights as the file has them.
};
LLM_API struct llm_engine_params llm_engine_params_default(void);

// Loads the model and sets up the backend. Returns NULL on failure with a message in err.
LLM_API llm_engine *llm_engine_create(const struct llm_engine_params *params, char *err, size_t err_size);
LLM_API void llm_engine_free(llm_engine *engine);
// The last failure of a function called on this engine (LLM_OK and "" when there was none).
LLM_API enum llm_status llm_last_status(const llm_engine *engine);
LLM_API const char *llm_last_error(const llm_engine *engine);

// What was loaded.
struct llm_model_info {
    const char *arch;          // "llama", "qwen2", ... ("" when the file has none)
    const char *name;          // general.name or ""
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;   // 0 when not loaded
    int64_t n_params;
    size_t weight_bytes;       // bytes of the weights as stored in the file
    size_t bytes_per_token;    // weight bytes a decode step reads (all matrices; the embedding
                               // table only when it is also the output projection)
    int bos_id, eos_id;        // -1 when the vocabulary has none
    int add_bos;               // the vocabulary asks for a BOS token in front of prompts
    size_t max_token_bytes;    // the most bytes of text one token stands for, when the vocabulary
                               // turns every byte of any text into tokens: a text of more than
                               // n x max_token_bytes bytes has more than n tokens. 0 when it may
                               // drop bytes (no byte token and no unknown token for some byte)
    unsigned gguf_version;     // 0: a Hugging Face model directory
    int64_t n_tensors, n_metadata;
    const char *unsupported;   // LLM_LOAD_METADATA: why this build could not run the model
                               // (the message llm_engine_create would give), or NULL. Checked:
                               // the hyper-parameters, the tokenizer, every tensor the model
                               // uses (present, shape, type); non-finite values show only in a
                               // full load, which reads them
    // a mixture of experts: experts per layer, those a token uses, an expert's feed-forward length
    // (0 for a dense model); the parameters one token uses (all but the experts it is not routed
    // to; n_params for a dense model)
    int n_expert, n_expert_used, n_ff_exp;
    int64_t n_params_active;
    // the multiply-adds of one token's matrix products: every matrix it multiplies (of a mixture
    // of experts, its experts), the output projection included, the embedding lookup and the
    // attention over the context not (0 unless the weights are loaded)
    int64_t macs_per_token;
};
LLM_API void llm_get_model_info(const llm_engine *engine, struct llm_model_info *info);

// How the engine runs it.
struct llm_engine_info {
    enum llm_backend_kind backend;   // the backend in use (never LLM_BACKEND_AUTO)
    const char *backend_name;  // "cpu", "vulkan", "cuda"; "none" for LLM_LOAD_VOCAB / METADATA engines
    const char *device_name;   // the GPU's name, or the CPU's features (e.g. "x86-64 AVX-512")
    int n_threads;             // CPU worker threads (at most; see "Threads" above)
    int max_model_len;         // context length in use
    int block_size;
    int kv_tokens;             // tokens the KV cache can hold
    size_t kv_cache_bytes;     // its memory
    enum llm_kv_dtype kv_cache_dtype;
    int max_num_seqs, max_num_batched_tokens, enable_prefix_caching;
    enum llm_sched_policy scheduling_policy;
};
LLM_API void llm_get_engine_info(const llm_engine *engine, struct llm_engine_info *info);

// The file's metadata, key by key (index 0 .. llm_model_info.n_metadata - 1), in file order.
enum llm_meta_type { LLM_META_INT, LLM_META_UINT, LLM_META_FLOAT, LLM_META_BOOL, LLM_META_STRING, LLM_META_ARRAY };
struct llm_meta {
    const char *key;
    enum llm_meta_type type;
    int64_t i; uint64_t u; double f; int b;   // the value, by type (BOOL: b is 0 or 1)
    const char *str; size_t str_len;   // STRING: the bytes (not NUL-terminated; may hold any byte)
    enum llm_meta_type elem_type;      // ARRAY: the elements' type and count
    uint64_t n_elems;
};
LLM_API enum llm_status llm_model_meta(llm_engine *engine, int64_t index, struct llm_meta *meta);
// The file's tensors (index 0 .. n_tensors - 1).
struct llm_tensor_info {
    const char *name;
    const char *type_name;     // "f32", "q4_K", ...
    int type;                  // ggml's type number
    int supported;             // this build can compute with this type
    int n_dims;
    int64_t ne[4];             // ne[0] is the row length
    size_t bytes;
};
LLM_API enum llm_status llm_model_tensor(llm_engine *engine, int64_t index, struct llm_tensor_info *info);

// GPU devices the built-in GPU backends can use (none without one). Writes up to max entries;
// returns how many there are (may exceed max), or -1 with the message in err.
struct llm_device {
    enum llm_backend_kind backend;
    int index;                 // for llm_engine_params.device
    char name[256];
    char type[24];             // "discrete", "integrated", "virtual", "cpu", "other"
    size_t memory_bytes;       // device-local memory
    int subgroup_size, subgroup_arithmetic, storage_16bit;
    char api_version[24];      // Vulkan: the API version; CUDA: the driver's version
    int compute_units;         // CUDA: streaming multiprocessors; Vulkan: 0 (not reported)
    char compute_capability[8];   // CUDA: "8.0", "9.0", ...; Vulkan: ""
};
LLM_API int llm_list_devices(struct llm_device *devices, int max, char *err, size_t err_size);
// 1 when this build of the library has the backend built in (LLM_BACKEND_CPU and LLM_BACKEND_AUTO:
// always; LLM_BACKEND_VULKAN: builds made with make VULKAN=1; LLM_BACKEND_CUDA: make CUDA=1), else 0.
LLM_API int llm_has_backend(enum llm_backend_kind backend);

// The memory bandwidth the engine's device reaches copying a large buffer, in GB/s (the roofline
// of decode: llm_model_info.bytes_per_token x tokens/s against it). LLM_ERR_UNSUPPORTED on
// backends without a probe (the CPU: use a STREAM-like tool).
LLM_API enum llm_status llm_measure_bandwidth(llm_engine *engine, double *gb_per_s);

// The int8 multiply-accumulates a second the engine's device reaches, in billions (G MAC/s): its
// int8 dot-product instruction in independent chains on every thread the engine uses (the CPU:
// AVX-512 VNNI, AVX2 or NEON, about 0.2 s), the compute roofline of prefill:
// llm_model_info.macs_per_token x tokens/s against it. LLM_ERR_UNSUPPORTED where there is no
// probe (the GPU backends, a CPU build without SIMD).
LLM_API enum llm_status llm_measure_compute(llm_engine *engine, double *gmacs);

// --- Tokens and text ---

// Tokenization, as llama.cpp tokenizes. flags:
//   LLM_TOKENIZE_ADD_SPECIAL    BOS (and EOS) where the vocabulary asks for them
//   LLM_TOKENIZE_PARSE_SPECIAL  the text of control tokens (e.g. "<|im_start|>") becomes those
//                               tokens; without it such text is tokenized as plain text.
//                               User-defined tokens are always recognised.
// Returns the number of ids the text needs (writing at most max_tokens), or -1.
enum { LLM_TOKENIZE_ADD_SPECIAL = 1, LLM_TOKENIZE_PARSE_SPECIAL = 2 };
LLM_API int llm_tokenize(llm_engine *engine, const char *text, size_t len, int flags,
                         int32_t *tokens, int max_tokens);
// The bytes a token stands for (control tokens: none). Returns their length, or -1 for an id out
// of range. A piece can be part of a UTF-8 character; llm_text_stream puts characters together.
LLM_API int llm_token_to_piece(llm_engine *engine, int32_t token, char *buf, size_t size);
LLM_API int llm_token_is_eog(const llm_engine *engine, int32_t token);   // end of generation?
LLM_API int llm_token_is_control(const llm_engine *engine, int32_t token);
// The text of a token sequence: the pieces joined, without the space a SentencePiece
// vocabulary puts in front of the first word. flags: LLM_DETOKENIZE_SPECIAL writes the text of
// control tokens too; LLM_DETOKENIZE_SKIP_BOS drops a leading BOS. Returns the text's length,
// or -1 (an id out of range).
enum { LLM_DETOKENIZE_SPECIAL = 1, LLM_DETOKENIZE_SKIP_BOS = 2 };
LLM_API int llm_detokenize(llm_engine *engine, const int32_t *tokens, int n, int flags, char *buf, size_t size);

// Streaming detokenization: feed tokens one at a time and get text that is always whole,
// valid UTF-8. A character split across tokens comes out once its last byte has arrived;
// bytes that cannot form a character come out as U+FFFD. Like llm_detokenize, the first text
// of a stream loses the space a SentencePiece vocabulary puts in front of the first word, so
// for valid UTF-8 the stream is exactly llm_detokenize's text. Zero-initialise the struct (or
// call llm_text_stream_reset) before the first token of a text.
struct llm_text_stream { unsigned char pending[4]; int n_pending; int n_tokens; };
LLM_API void llm_text_stream_reset(struct llm_text_stream *stream);
// Writes the text a token adds and returns its length (an id out of range adds nothing); when it
// does not fit (length >= size), nothing is written or consumed. -1: out of memory.
LLM_API int llm_text_stream_push(llm_engine *engine, struct llm_text_stream *stream, int32_t token,
                                 int flags, char *out, size_t size);
// What is left at the end (an unfinished character becomes U+FFFD); 13 bytes always suffice.
LLM_API int llm_text_stream_flush(struct llm_text_stream *stream, char *out, size_t size);

// Chat templates. A conversation is rendered into the prompt text of a model family; tokenize
// it with LLM_TOKENIZE_PARSE_SPECIAL (and LLM_TOKENIZE_ADD_SPECIAL: templates leave BOS to
// the tokenizer). Names: "llama2", "llama3", "chatml", "mistral", "zephyr", "gemma", "phi3",
// "qwen3".
struct llm_chat_message { const char *role; const char *content; };   // "system", "user", "assistant"
// The template the model file's tokenizer.chat_template is recognised as, or NULL when it has
// none or it is not one of the above.
LLM_API const char *llm_chat_template_detect(const llm_engine *engine);
// Renders messages (a NULL role is "user", a NULL content empty); add_assistant appends the start
// of the assistant's turn. Returns the text's length, or -1: an unknown template name, no memory.
LLM_API int llm_chat_apply(const char *template_name, const struct llm_chat_message *messages, int n,
                           int add_assistant, char *buf, size_t size);

// --- Sequences: one token history and its KV cache blocks, evaluated directly ---
//
// llm_seq_eval appends tokens at the end of a sequence and runs the model over them. logits,
// when not NULL, receives vocabulary-size rows: one row (the last token) when all_logits is 0,
// n rows when it is 1; a row that is not finite (NaN or infinity: the model's weights or
// activations overflow) makes it fail with LLM_ERR_BACKEND, the tokens of that chunk not added.
// (Generation with sampling, stop strings and batching goes through requests, below.)
LLM_API int llm_seq_new(llm_engine *engine);          // a sequence id, or -1
LLM_API void llm_seq_free(llm_engine *engine, int seq);
LLM_API int llm_seq_len(llm_engine *engine, int seq);   // tokens in it, or -1: no such sequence
LLM_API enum llm_status llm_seq_eval(llm_engine *engine, int seq, const int32_t *tokens, int n,
                                     float *logits, int all_logits);

// --- Sampling ---
// Order as llama.cpp's default chain: penalties, top-k, top-p, min-p, temperature, draw.
struct llm_sampling_params {
    float temperature;         // 0 = greedy
    int top_k;                 // 0 = off
    float top_p;               // 1 = off
    float min_p;               // 0 = off: drop tokens below min_p x the best one's probability
    float repeat_penalty;      // 1 = off: logits of recent tokens divided (positive) or multiplied
    float frequency_penalty;   // 0 = off: minus frequency_penalty x count of recent occurrences
    float presence_penalty;    // 0 = off: minus presence_penalty once a token occurred recently
    int penalty_last_n;        // how many recent tokens the penalties look at (default 64)
    uint64_t seed;             // the same seed gives the same draws
};
LLM_API struct llm_sampling_params llm_sampling_params_default(void);
typedef struct llm_sampler llm_sampler;
// NULL: invalid parameters (a non-finite value, a negative temperature, top_k or penalty_last_n,
// top_p or min_p outside [0, 1], repeat_penalty <= 0), n_vocab < 1, or no memory.
LLM_API llm_sampler *llm_sampler_create(const struct llm_sampling_params *params, int n_vocab);
LLM_API void llm_sampler_free(llm_sampler *sampler);
LLM_API int32_t llm_sampler_sample(llm_sampler *sampler, const float *logits);   // also accepts the token
// Tells the penalties about a token that was not drawn by the sampler (prompt tokens).
LLM_API void llm_sampler_accept(llm_sampler *sampler, int32_t token);
LLM_API void llm_sampler_reset(llm_sampler *sampler);   // forgets the history (not the RNG)

// The log-probabilities (log-softmax of the logits) of the k most likely tokens, best first.
struct llm_logprob { int32_t id; float logprob; };
LLM_API void llm_top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out);


// --- Structured output: JSON Schema as a grammar ---
//
// The grammar (GBNF, for llm_request_params.grammar) of the JSON texts a JSON Schema accepts:
// types, properties / required / additionalProperties (no other properties when the schema lists
// some and says nothing), maxProperties (when every listed property is required), enum, const,
// items / minItems / maxItems, anyOf / oneOf (oneOf taken as anyOf), $ref to #/$defs/NAME or
// #/definitions/NAME (recursion too), minLength / maxLength, integer ranges, format date / time /
// date-time / uuid, pattern (a documented regular-expression subset). Writes it into buf
// (snprintf's way: at most size bytes with the NUL) and returns its length; -1 when the schema is
// not JSON or has a keyword or form this cannot hold exactly (the message, naming it, in err):
// never a weaker constraint.
LLM_API int llm_json_schema_to_grammar(const char *schema, char *buf, size_t size, char *err, size_t err_size);
// Whether a grammar (GBNF, as llm_request_params.grammar takes it) compiles: LLM_OK, or the
// status llm_add_request would refuse it with and its message in err ("grammar: line L column C:
// ..."), so that a caller can check one before it has an engine or a request.
LLM_API enum llm_status llm_grammar_check(const char *grammar, char *err, size_t err_size);

// --- Serving: many requests at once (continuous batching, paged KV cache, prefix caching) ---
//
// Requests are added at any time and computed together, step by step: each llm_step runs the
// decodes of the running requests plus chunks of waiting prompts within max_num_seqs and
// max_num_batched_tokens, and reports what each request produced. When KV memory runs out, the
// latest (or lowest-priority) request is preempted: its blocks are freed and it is computed
// again later; no request is dropped, and greedy outputs are the same as without preemption.

// Why a request ended.
enum llm_finish_reason {
    LLM_FINISH_NONE = 0,       // it has not
    LLM_FINISH_STOP,           // an end-of-generation token (unless ignore_eos), a stop token or
                               // a stop string
    LLM_FINISH_LENGTH,         // max_tokens generated
    LLM_FINISH_ABORT,          // llm_abort_request
    LLM_FINISH_ERROR,          // the model computed logits that are not finite (NaN or infinity:
                               // its weights or activations overflow) for the request: nothing is
                               // sampled from them, the message is in llm_last_error (and in
                               // llm_generate's error); in llm_generate's results also a prompt that
                               // could not be added (the message in error), or unfinished when the
                               // backend failed
    LLM_FINISH_CONTEXT,        // cut short before max_tokens, with no room to go on: the context
                               // length (max_model_len) reached, a KV cache too small to hold the
                               // request even when it runs alone, or no host memory for its
                               // tokens. OpenAI's and vLLM's APIs say "length" here too: llm
                               // generate and llm run --json write "finish_reason":"length" with
                               // "length_limit":"context" (and "max_tokens" for LLM_FINISH_LENGTH)
};
// "stop", "length", "abort", "error" (OpenAI's and vLLM's words), "context"; "" for
// LLM_FINISH_NONE.
LLM_API const char *llm_finish_reason_str(enum llm_finish_reason reason);

struct llm_request_params {
    struct llm_sampling_params sampling;
    int max_tokens;            // tokens to generate (default 16, as vLLM); stops earlier at the
                               // context length. 0: none, an empty completion (OpenAI's): the
                               // request ends at the next llm_step with LLM_FINISH_LENGTH and no
                               // tokens, its prompt checked and tokenized but not computed
    int priority;              // LLM_SCHED_PRIORITY: lower values first (default 0)
    int ignore_eos;            // 1: end-of-generation tokens do not stop it
    const char *const *stop;   // stop strings: the text ends before the first one (not included);
    int n_stop;                // at most 64 non-empty strings of 16384 bytes in all
                               // (LLM_ERR_INVALID_ARG beyond)
    const int32_t *stop_token_ids;  // ids that stop it (included in the tokens)
    int n_stop_token_ids;
    int add_special;           // text prompts: BOS as the vocabulary asks (default 1; -1: no)
    int parse_special;         // text prompts: 1: control-token text becomes those tokens
    int logprobs;              // report the top-k log-probabilities of each generated position
                               // (0: none, at most 20), those of the model's logits the token was
                               // sampled from (before penalties and temperature)
    int num_speculative_tokens;// speculative decoding for this request: 0 (default) as the engine
                               // does, -1 none, N > 0 at most N drafts a step. Sampling with drafts
                               // has the same distribution, but a seed no longer fixes the text
                               // (the draws used depend on the drafts verified, which depend on the
                               // measured step times): -1 where a seed must reproduce a text
    const char *grammar;       // NULL, or a grammar in llama.cpp's GBNF syntax (start rule "root")
                               // that the generated text must follow: tokens that cannot continue
                               // a text of the grammar are left out before every sampler stage;
                               // the request ends ("stop") when nothing can follow. A grammar that
                               // does not compile refuses the request (LLM_ERR_INVALID_ARG, the
                               // message naming line and column)
};
LLM_API struct llm_request_params llm_request_params_default(void);

// A prompt: text (tokenized with the model's vocabulary) or token ids.
struct llm_prompt { const char *text; const int32_t *tokens; int n_tokens; };

// Queues a request (the strings and arrays are copied). Returns its id (>= 0), or -1: bad
// parameters (a prompt or stop token id outside [0, n_vocab) among them), a prompt longer than
// max_model_len, or one that the KV cache cannot hold even alone. Nothing else is affected by a
// rejected request. A text with more bytes than max_model_len tokens can stand for is refused
// before it is tokenized (LLM_ERR_CONTEXT).
LLM_API int llm_add_request(llm_engine *engine, const struct llm_prompt *prompt,
                            const struct llm_request_params *params);
// Stops a request; it is reported once more by the next llm_step, with LLM_FINISH_ABORT.
LLM_API enum llm_status llm_abort_request(llm_engine *engine, int request_id);

// What a request produced in a step. Pointers stay valid until the next llm_step.
struct llm_output {
    int request_id;
    const int32_t *new_tokens; // tokens generated in this step
    int n_new_tokens;
    const char *new_text;      // their text: whole UTF-8 characters, a possible stop string held
    int n_new_text;            // back until it is decided (NUL-terminated too)
    const struct llm_logprob *new_logprobs;   // logprobs > 0: n_new_tokens x logprobs entries
    const float *new_token_logprobs;   // logprobs > 0: the log-probability of each new token (in the
                               // same logits, whether it is among the top ones or not)
    int finished;
    enum llm_finish_reason finish_reason;   // when finished
    // metrics (milliseconds); the totals are final when finished
    double ttft_ms;            // arrival to first token (0 until there is one)
    double e2e_ms;             // arrival to the end (when finished)
    int n_prompt_tokens, n_cached_tokens, n_output_tokens, n_preemptions;
    const float *itl_ms;       // when finished: the inter-token latencies, n_itl of them
    int n_itl;                 // n_output_tokens - 1 (fewer only when memory ran out)
};
// Runs one step. Returns the number of outputs written to *outputs (0 when there was nothing
// to do), or -1 when the backend failed or memory ran out.
LLM_API int llm_step(llm_engine *engine, const struct llm_output **outputs);
// 1 while a request has not been reported finished by llm_step (also one aborted or with
// max_tokens 0, whose report the next step brings), else 0.
LLM_API int llm_has_unfinished_requests(const llm_engine *engine);

// The engine's state: KV blocks, how full the used ones are, prefix cache hits, queues.
struct llm_engine_stats {
    int kv_blocks_total, kv_blocks_used, kv_blocks_cached;   // cached: kept for reuse, unused
    int kv_tokens_stored;      // tokens in the blocks of running requests
    double kv_utilization;     // kv_tokens_stored / (their blocks x block_size)
    long long prefix_query_tokens, prefix_hit_tokens;   // prompt tokens looked up / found
    int n_running, n_waiting;
    long long n_preemptions, n_steps;
    // speculative decoding: per draft position i (0 first) the drafts proposed and accepted
    // (acceptance rate per position: spec_accepted[i] / spec_proposed[i]); verifications (a
    // request's drafts checked in a step) and the tokens they emitted (accepted + 1 each, unless
    // the request ended: mean accepted length = spec_emitted / spec_verifications); seconds spent
    // proposing drafts, and in the forward passes of the steps that verified drafts (those steps'
    // other tokens included)
    long long spec_proposed[16], spec_accepted[16];
    long long spec_verifications, spec_emitted;
    double spec_draft_seconds, spec_verify_seconds;
    // grammars (llm_request_params.grammar): tokens chosen under one, the seconds spent on it
    // (checking tokens, computing masks, following the text), masks computed in whole (a state's
    // first time: later ones come from a cache) and taken from the cache
    long long grammar_tokens, grammar_masks, grammar_mask_hits;
    double grammar_seconds;
};
LLM_API void llm_get_stats(const llm_engine *engine, struct llm_engine_stats *stats);

// Profiling: time per module of the model (each op waits for the device when it runs
// asynchronously, so profiling slows a GPU down), sampling and scheduling.
enum llm_prof_op {
    LLM_PROF_EMBED, LLM_PROF_NORM, LLM_PROF_QKV, LLM_PROF_ROPE, LLM_PROF_KV_STORE, LLM_PROF_ATTN,
    LLM_PROF_O_PROJ, LLM_PROF_MLP_UP, LLM_PROF_SILU, LLM_PROF_MLP_DOWN, LLM_PROF_ADD, LLM_PROF_LOGITS,
    LLM_PROF_SAMPLING, LLM_PROF_SCHEDULING, LLM_PROF_COUNT
};
struct llm_profile { double seconds[LLM_PROF_COUNT]; long long n_steps; };
// on = 1 starts (from zero), 0 stops.
LLM_API void llm_set_profiling(llm_engine *engine, int on);
LLM_API void llm_get_profile(const llm_engine *engine, struct llm_profile *profile);
LLM_API const char *llm_prof_op_name(enum llm_prof_op op);   // "attention: rope", ...

// Offline batch generation (vLLM's LLM.generate): all prompts at once, results in order.
// params: one per prompt, or NULL for the defaults. A prompt that cannot run gets
// LLM_FINISH_ERROR and the message in error; the others are not affected. Returns LLM_OK unless
// the backend failed (then what had not finished ends with LLM_FINISH_ERROR).
struct llm_result {
    int32_t *prompt_tokens; int n_prompt_tokens;
    int32_t *tokens; int n_tokens;
    char *text; int n_text;    // NUL-terminated; n_text: its length (a byte token can put a NUL in it)
    struct llm_logprob *logprobs;   // n_tokens x logprobs entries when asked for, else NULL
    enum llm_finish_reason finish_reason;
    char *error;               // the message when finish_reason is LLM_FINISH_ERROR, else NULL
    double ttft_ms, e2e_ms;
    int n_cached_tokens, n_preemptions;
    float *itl_ms; int n_itl;
};
LLM_API enum llm_status llm_generate(llm_engine *engine, const struct llm_prompt *prompts, int n,
                                     const struct llm_request_params *params, struct llm_result *results);
LLM_API void llm_results_free(struct llm_result *results, int n);

// Quantizing a model file (llm quantize; llama.cpp's llama-quantize): a GGUF file or a Hugging
// Face directory in, a GGUF file out. type names a llama-quantize file type: q4_0, q4_1, q5_0,
// q5_1, q8_0, iq4_nl, iq4_xs, q2_K, q3_K_S, q3_K_M (q3_K), q3_K_L, q4_K_S, q4_K_M (q4_K), q5_K_S,
// q5_K_M (q5_K), q6_K, f16, bf16, f32 (any case). Each matrix gets the type llama-quantize's mix
// gives it (the output projection at q6_K, some attn_v and ffn_down rows at more bits in the _M
// mixes, rows a K-quant does not divide at its fallback), unless pure; 1-D tensors are copied.
// The tensors are written in llama-quantize's order with its metadata, so that for the types whose
// quantizers are exact (q4_0, q4_1, q5_0, q5_1, q8_0, f16, bf16, f32) the file is byte for byte
// llama-quantize's. The output is written to OUTPUT.part and renamed when complete.
struct llm_quantize_params {
    const char *input;         // a GGUF file or a Hugging Face model directory
    const char *output;        // the GGUF file to write (neither it nor OUTPUT.part the input or the
                               // calibration text, nor inside an input directory: LLM_ERR_INVALID_ARG)
    const char *type;          // the file type (above)
    int n_threads;             // 0: the cores this process may use
    int pure;                  // 1: every matrix at the type itself (llama-quantize --pure)
    int allow_requantize;      // 1: matrices already quantized are requantized from their values
                               // (0: such a matrix that would change type is an error)
    void (*progress)(void *user, double done, const char *what);   // now and then, done in [0, 1]
    void *progress_user;
    // Calibrated quantization: the engine runs the model (CPU) over a calibration text, collects
    // each linear layer's inputs and quantizes the layers' matrices with
    //   "gptq": H = X X^T per input, dampened; each row column by column, every rounding error
    //           spread over the columns not yet rounded through the Cholesky factor of H^-1;
    //   "awq":  per input channel a scale s = mean|x|^a / mean|w|^(1-a), a searched on a grid per
    //           group of matrices sharing an input (the error of their outputs on the samples),
    //           folded into the norm or matrix before; then each group's range clipped (searched).
    // NULL or "rtn": rounding to nearest, as above.
    const char *method;
    const char *calib_path;    // the calibration text (a file; UTF-8)
    const char *format;        // "hf" (default with a method): an AWQ or GPTQ checkpoint directory
                               // at output (int4/int8 groups; the input must be a Hugging Face
                               // directory, whose other files are copied); "gguf": a GGUF file of
                               // `type`, the layers' matrices quantized with the method
    int bits;                  // hf: 4 (default) or 8 (gptq only)
    int group_size;            // hf: 32, 64 or 128 (default), or -1 (a group per row)
    int n_samples, seq_len;    // calibration windows of the text (defaults 128 and 512; fewer when
                               // the text is shorter)
    int act_order;             // gptq, hf: columns in order of decreasing H diagonal (desc_act, g_idx)
    double damp;               // gptq: H's diagonal mean times this is added (default 0.01)
};
struct llm_quantize_stats {
    size_t bytes_in, bytes_out;   // tensor data, before and after
    int64_t n_params;
    int n_tensors, n_quantized, n_fallback;   // n_fallback: matrices a K-quant's 256 does not divide
};
LLM_API struct llm_quantize_params llm_quantize_params_default(void);
// stats may be NULL. On failure nothing is left at OUTPUT (nor OUTPUT.part).
LLM_API enum llm_status llm_quantize(const struct llm_quantize_params *params, struct llm_quantize_stats *stats,
                                     char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif // LLM_H
