// llm.h — the public interface of llm.c, a portable LLM inference engine in one C file.
//
//   #include "llm.h"      and compile llm.c with your program (C11, libc, libm, pthreads).
//
// Handles are opaque. Functions that can fail return an enum llm_status; the message that goes
// with the last failure of an engine is llm_last_error(engine). Creating an engine reports its
// error into a caller-supplied buffer, since there is no engine yet.
#ifndef LLM_H
#define LLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLM_VERSION "0.1.0"

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
const char *llm_status_str(enum llm_status status);

typedef struct llm_engine llm_engine;

// Engine options. Zero means "default" for every field; llm_engine_params_default() fills the
// defaults explicitly.
struct llm_engine_params {
    const char *model_path;    // a GGUF file
    const char *backend;       // "cpu" (default), "vulkan" (make VULKAN=1), or "auto": Vulkan when
                               // it is built in and works, else the CPU
    int device;                // Vulkan: device number + 1 (llm info --devices); 0: the first
                               // discrete GPU, else an integrated one, else any
    int n_threads;             // CPU worker threads (default: the number of online cores)
    int max_model_len;         // context length in tokens (default: the model's, at most 4096)
    int block_size;            // KV cache block size in tokens: 8, 16 (default) or 32
    size_t kv_cache_bytes;     // KV cache memory (default: enough for max_model_len tokens)
    const char *kv_cache_dtype;// "f16" (default) or "f32"
    int verbose;               // 0 quiet (default), 1 loading progress on stderr when it is a terminal
    int vocab_only;            // 1: load only the tokenizer (vocab-only GGUF files work); no sequences
    // serving (llm_add_request / llm_step / llm_generate), with vLLM's names and defaults
    int max_num_seqs;          // requests computed together in a step (default 256)
    int max_num_batched_tokens;// tokens per step (default 512); longer prompts are prefilled in
                               // chunks, mixed with the decodes of running requests
    int enable_prefix_caching; // 1: full KV blocks are shared between requests with the same
                               // prompt prefix and kept after they finish, until memory is needed
    const char *scheduling_policy; // "fcfs" (default) or "priority" (lower value first)
    float gpu_memory_utilization;  // share of the free memory for the KV cache when kv_cache_bytes
                               // is 0: the GPU's after the weights (Vulkan), the available RAM
                               // (CPU). 0: default (1/4 of it, at most what max_num_seqs full
                               // contexts need)
};
struct llm_engine_params llm_engine_params_default(void);

// Loads the model and sets up the backend. Returns NULL on failure with a message in err.
llm_engine *llm_engine_create(const struct llm_engine_params *params, char *err, size_t err_size);
void llm_engine_free(llm_engine *engine);
const char *llm_last_error(const llm_engine *engine);

// What was loaded.
struct llm_model_info {
    const char *arch;          // "llama", "qwen2"
    const char *name;          // general.name or ""
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    int64_t n_params;
    size_t weight_bytes;       // bytes of the weights as stored in the file
    size_t bytes_per_token;    // weight bytes a decode step reads (all matrices; the embedding
                               // table only when it is also the output projection)
    int kv_tokens;             // tokens the KV cache can hold
    size_t kv_cache_bytes;     // its memory
    int max_model_len;         // context length in use
    int bos_id, eos_id;        // -1 when the vocabulary has none
    int add_bos;               // the vocabulary asks for a BOS token in front of prompts
};
void llm_model_info(const llm_engine *engine, struct llm_model_info *info);

// Tokenization, as llama.cpp tokenizes. flags:
//   LLM_TOKENIZE_ADD_SPECIAL    BOS (and EOS) where the vocabulary asks for them
//   LLM_TOKENIZE_PARSE_SPECIAL  the text of control tokens (e.g. "<|im_start|>") becomes those
//                               tokens; without it such text is tokenized as plain text.
//                               User-defined tokens are always recognised.
// Writes up to max_tokens ids and returns how many the text needs (so a second call with a
// larger buffer gets them all), or -1 with llm_last_error set.
enum { LLM_TOKENIZE_ADD_SPECIAL = 1, LLM_TOKENIZE_PARSE_SPECIAL = 2 };
int llm_tokenize(llm_engine *engine, const char *text, size_t len, int flags,
                 int32_t *tokens, int max_tokens);
// The bytes a token stands for (control tokens: none). Returns the length (may exceed
// size, then the piece is cut), or -1 for an id out of range. A piece can be part of a UTF-8
// character; llm_text_stream puts characters back together.
int llm_token_to_piece(const llm_engine *engine, int32_t token, char *buf, size_t size);
int llm_token_is_eog(const llm_engine *engine, int32_t token);   // end of generation?
int llm_token_is_control(const llm_engine *engine, int32_t token);
// The text of a token sequence: the pieces joined, without the space a SentencePiece
// vocabulary puts in front of the first word. flags: LLM_DETOKENIZE_SPECIAL writes the text of
// control tokens too; LLM_DETOKENIZE_SKIP_BOS drops a leading BOS. Returns the length (may
// exceed size, then the text is cut) or -1 for an id out of range.
enum { LLM_DETOKENIZE_SPECIAL = 1, LLM_DETOKENIZE_SKIP_BOS = 2 };
int llm_detokenize(const llm_engine *engine, const int32_t *tokens, int n, int flags, char *buf, size_t size);

// Streaming detokenization: feed tokens one at a time and get text that is always whole,
// valid UTF-8. A character split across tokens comes out once its last byte has arrived;
// bytes that cannot form a character come out as U+FFFD. Like llm_detokenize, the first text
// of a stream loses the space a SentencePiece vocabulary puts in front of the first word, so
// for valid UTF-8 the stream is exactly llm_detokenize's text. Zero-initialise the struct (or
// call llm_text_stream_reset) before the first token of a text.
struct llm_text_stream { unsigned char pending[4]; int n_pending; int n_tokens; };
void llm_text_stream_reset(struct llm_text_stream *stream);
// Writes the text a token adds, NUL-terminated, and returns its length; when it does not fit
// in size bytes, returns -(bytes needed) and consumes nothing (call again with a larger
// buffer). An id out of range adds nothing.
int llm_text_stream_push(const llm_engine *engine, struct llm_text_stream *stream, int32_t token,
                         int flags, char *out, size_t size);
// What is left at the end (an unfinished character becomes U+FFFD); 13 bytes always suffice.
int llm_text_stream_flush(struct llm_text_stream *stream, char *out, size_t size);

// Chat templates. A conversation is rendered into the prompt text of a model family; tokenize
// it with LLM_TOKENIZE_PARSE_SPECIAL (and LLM_TOKENIZE_ADD_SPECIAL: templates leave BOS to
// the tokenizer). Names: "llama2", "llama3", "chatml", "mistral", "zephyr".
struct llm_chat_message { const char *role; const char *content; };   // "system", "user", "assistant"
// The template the model file's tokenizer.chat_template is recognised as, or NULL when it has
// none or it is not one of the above.
const char *llm_chat_template_detect(const llm_engine *engine);
// Renders messages; add_assistant appends the start of the assistant's turn. Returns the
// length (may exceed size, then the text is cut), or -1 for an unknown template name.
int llm_chat_apply(const char *template_name, const struct llm_chat_message *messages, int n,
                   int add_assistant, char *buf, size_t size);

// Sequences: each has its own token history and KV cache blocks.
// llm_seq_eval appends tokens at the end of a sequence and runs the model over them. logits,
// when not NULL, receives vocabulary-size rows: one row (the last token) when all_logits is 0,
// n rows when it is 1.
int llm_seq_new(llm_engine *engine);                  // a sequence id, or -1
void llm_seq_free(llm_engine *engine, int seq);
int llm_seq_len(const llm_engine *engine, int seq);
enum llm_status llm_seq_eval(llm_engine *engine, int seq, const int32_t *tokens, int n,
                             float *logits, int all_logits);

// Sampling.
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
    uint64_t seed;
};
struct llm_sampling_params llm_sampling_params_default(void);
typedef struct llm_sampler llm_sampler;
llm_sampler *llm_sampler_create(const struct llm_sampling_params *params, int n_vocab);
void llm_sampler_free(llm_sampler *sampler);
int32_t llm_sampler_sample(llm_sampler *sampler, const float *logits);   // also accepts the token
// Tells the penalties about a token that was not drawn by the sampler (prompt tokens).
void llm_sampler_accept(llm_sampler *sampler, int32_t token);
void llm_sampler_reset(llm_sampler *sampler);   // forgets the history (not the RNG)

// The log-probabilities (log-softmax of the logits) of the k most likely tokens, best first.
struct llm_logprob { int32_t id; float logprob; };
void llm_top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out);


// --- Serving: many requests at once (continuous batching, paged KV cache, prefix caching) ---
//
// Requests are added at any time and computed together, step by step: each llm_step runs the
// decodes of the running requests plus chunks of waiting prompts within max_num_seqs and
// max_num_batched_tokens, and reports what each request produced. When KV memory runs out, the
// latest (or lowest-priority) request is preempted: its blocks are freed and it is computed
// again later; no request is dropped, and greedy outputs are the same as without preemption.
// Call these from one thread; the engine computes with its own pool.

struct llm_request_params {
    struct llm_sampling_params sampling;
    int max_tokens;            // tokens to generate (default 16, as vLLM); stops earlier at the
                               // context length
    int priority;              // scheduling_policy "priority": lower values first (default 0)
    int ignore_eos;            // 1: end-of-generation tokens do not stop it
    const char *const *stop;   // stop strings: the text ends before the first one (not included)
    int n_stop;
    const int32_t *stop_token_ids;  // ids that stop it (included in the tokens)
    int n_stop_token_ids;
    int add_special;           // text prompts: BOS as the vocabulary asks (default 1; -1: no)
};
struct llm_request_params llm_request_params_default(void);

// A prompt: text (tokenized with the model's vocabulary) or token ids.
struct llm_prompt { const char *text; const int32_t *tokens; int n_tokens; };

// Queues a request (the strings and arrays are copied). Returns its id (>= 0), or -1 with
// llm_last_error set: bad parameters, a prompt longer than max_model_len, or one that the KV
// cache cannot hold even alone. Nothing else is affected by a rejected request.
int llm_add_request(llm_engine *engine, const struct llm_prompt *prompt, const struct llm_request_params *params);
// Stops a request; it is reported once more by the next llm_step, with finish_reason "abort".
enum llm_status llm_abort_request(llm_engine *engine, int request_id);

// What a request produced in a step. Pointers stay valid until the next llm_step.
struct llm_output {
    int request_id;
    const int32_t *new_tokens; // tokens generated in this step
    int n_new_tokens;
    const char *new_text;      // their text: whole UTF-8 characters, a possible stop string held
    int n_new_text;            // back until it is decided (NUL-terminated too)
    int finished;
    const char *finish_reason; // when finished: "stop", "length" or "abort"; else NULL
    // metrics (milliseconds); the totals are final when finished
    double ttft_ms;            // arrival to first token (0 until there is one)
    double e2e_ms;             // arrival to the end (when finished)
    int n_prompt_tokens, n_cached_tokens, n_output_tokens, n_preemptions;
    const float *itl_ms;       // when finished: the n_output_tokens - 1 inter-token latencies
};
// Runs one step. Returns the number of outputs written to *outputs (0 when there was nothing
// to do), or -1 with llm_last_error set when the backend failed.
int llm_step(llm_engine *engine, const struct llm_output **outputs);
int llm_has_unfinished_requests(const llm_engine *engine);

// The engine's state: KV blocks, how full the used ones are, prefix cache hits, queues.
struct llm_engine_stats {
    int kv_blocks_total, kv_blocks_used, kv_blocks_cached;   // cached: kept for reuse, unused
    int kv_tokens_stored;      // tokens in the blocks of running requests
    double kv_utilization;     // kv_tokens_stored / (their blocks x block_size)
    long long prefix_query_tokens, prefix_hit_tokens;   // prompt tokens looked up / found
    int n_running, n_waiting;
    long long n_preemptions, n_steps;
};
void llm_engine_stats(const llm_engine *engine, struct llm_engine_stats *stats);

// Offline batch generation (vLLM's LLM.generate): all prompts at once, results in order.
// params: one per prompt, or NULL for the defaults. A prompt that cannot run gets
// finish_reason "error" and the message in error; the others are not affected.
struct llm_result {
    int32_t *prompt_tokens; int n_prompt_tokens;
    int32_t *tokens; int n_tokens;
    char *text;
    const char *finish_reason; // "stop", "length", "abort" or "error"
    char *error;               // the message when finish_reason is "error", else NULL
    double ttft_ms, e2e_ms;
    int n_cached_tokens, n_preemptions;
    float *itl_ms; int n_itl;
};
enum llm_status llm_generate(llm_engine *engine, const struct llm_prompt *prompts, int n,
                             const struct llm_request_params *params, struct llm_result *results);
void llm_results_free(struct llm_result *results, int n);

#ifdef __cplusplus
}
#endif
#endif // LLM_H
