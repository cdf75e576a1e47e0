// cli.h — what the files of the llm program share. The program is built against llm.h alone,
// as SQLite's shell.c is built against sqlite3.h: it uses nothing of the engine but its public
// interface, and is an example of it.
//
//   main.c   the usage text and main, which runs the command
//   args.c   the table of flags, number parsing, reading files, the prompt of run / tokenize, JSON output
//            (Jansson), UTF-8 checks, escaped text, token pieces
//   run.c    llm run, llm chat
//   info.c   llm info (and --devices), llm tokenize, llm detokenize
//   request.c  completion requests in JSON (llm generate's lines, llm serve's bodies)
//   tools.c  tool calling in llm serve's chat: the families' tool formats, calls parsed, their grammar
//   serve.c  llm generate, llm bench (one sequence; serving), llm profile
//   server.c llm serve: the OpenAI-compatible HTTP server (libmicrohttpd)
//   serve_log.c  llm serve's request log: a line per request, text or JSON
//   serve_scan.c  llm serve's request bodies scanned as they arrive (prompt ids, parse cost)
//   bench_http.c  llm bench --base-url: the serving benchmark against a server (libcurl)
//   perplexity.c  llm perplexity (and KL divergence against a base model), as llama-perplexity
//   pull.c   llm pull and -m hf://REPO[:QUANT], hf://REPO/FILE: downloads from Hugging Face (libcurl),
//            a repository's file list (its model API), SHA-256
//   models.c the cache of llm pull by name: llm list, llm rm, -m NAME
//   quantize.c  llm quantize: a model to a GGUF file of a llama-quantize type
#ifndef CLI_H
#define CLI_H

#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L   // getline, strdup, clock_gettime, sigwait, nanosleep
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "llm.h"

#define CLI_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CLI_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLI_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

// The flags of every command, as parsed (the engine and sampling parameters filled in).
struct cli {
    struct llm_engine_params ep;
    struct llm_sampling_params sp;
    const char *prompt, *prompt_file, *tokens, *chat_template, *system;
    const char *stops[16];
    int n_stops;
    int32_t stop_ids[16];
    int n_stop_ids;
    int n_predict, logprobs, reps;
    bool json, ignore_eos, no_bos, n_predict_set, special;
    bool peak;                  // bench --peak: the int8 compute peak alone
    int depth;                  // bench -d: tokens in the sequence before the timed prefill or decode
    bool ids, tensors;   // tokenize: ids only; info: every tensor
    bool seed_set, ctx_set, verbose;   // --seed, -c given; -v
    int n_gpu_layers;                  // -ngl (accepted for llama.cpp's users; -1: not given)
    bool flash_attn;                   // -fa (likewise)
    // generate, bench (serving), profile
    const char *requests;
    int num_prompts, input_len, output_len, context_len, questions, question_len;
    double request_rate;
    uint64_t seed;
    bool rag, serve;
    // perplexity
    const char *kld_base;              // --kl-divergence-base FILE
    bool kl_divergence;                // --kl-divergence
    int chunks, batch;                 // --chunks K, -b N (0: all, the default)
    // run, chat, generate, bench, profile: structured output
    const char *grammar_file, *json_schema_file;   // --grammar FILE, --json-schema FILE
    bool json_object;                  // --json-object: any JSON object
    char *grammar;                     // the grammar of the three (malloc'd), or NULL
    char *json_schema;                 // --json-schema's text (malloc'd), or NULL
    char *model_alloc;   // -m hf://... or NAME: the cached file's path (malloc'd), or NULL
    char *draft_alloc;   // the same for --speculative-model
    // serve
    const char *host, *api_key, *served_model_name;
    const char *base_url;              // bench --base-url: a server to measure
    int max_concurrency;               // bench --max-concurrency (0: all at once)
    int port, max_queued, timeout_s, shutdown_timeout_s, max_connections;
    long long max_body;
    int header_timeout_s;              // --header-timeout
    long long body_min_rate;           // --body-min-rate (bytes/s; 0: none)
    long long max_body_memory;         // --max-body-memory (-1: the default)
    int max_connections_per_ip;        // --max-connections-per-ip (-1: the default, 0: none)
    const char *replica_id;            // --replica-id: the X-Replica-Id header of every answer
    int ready_max_waiting;             // --ready-max-waiting (-1: the default, --max-queued-requests)
    int log_format;                    // --log-format (enum cli_log_format)
    bool quiet;                        // --quiet: no request log
};

extern const char cli_usage[];
// llm COMMAND --help: the command's lines of the usage text and the options that concern it.
void cli_print_command_help(const char *cmd);

// --- args.c ---

// A growing NUL-terminated byte string (p is NULL until the first put).
struct cli_strbuf { char *p; size_t n, cap; };
void cli_sb_put(struct cli_strbuf *b, const char *s, size_t n);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cli_sb_printf(struct cli_strbuf *b, const char *fmt, ...);

// UTF-8: the length of the well-formed character at s[0..n) (1..4; no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
int cli_utf8_char(const char *s, size_t n);
// The offset of the first byte of s[0..n) that is not part of a well-formed character (n: none).
size_t cli_utf8_check(const char *s, size_t n);
// How many bytes of s[0..n) hold at most max_chars whole characters (invalid bytes count as one).
size_t cli_utf8_prefix(const char *s, size_t n, size_t max_chars);
// Writes s[0..n) for people, on a terminal or not: printable characters as they are; newline,
// tab, CR as \n \t \r; backslash as \\; other control characters (C0, DEL, C1: terminal
// escape sequences start with them) and bytes that are not UTF-8 as \xHH, C1 ones as \u00HH.
// At most max_chars characters (0: all); returns 1 when it stopped short.
int cli_print_escaped(FILE *f, const char *s, size_t n, size_t max_chars);

// JSON through Jansson. Every constructor exits with "out of memory" rather than return NULL.
json_t *cli_jcheck(json_t *v);
// A JSON string of the bytes s[0..n): those bytes when they are UTF-8, else each byte that is not
// part of a character replaced by U+FFFD (JSON text is UTF-8). NUL bytes become \u0000.
json_t *cli_json_bytes(const char *s, size_t n);
json_t *cli_json_cstr(const char *s);   // the same for a NUL-terminated string (NULL: null)
// A number rounded to `decimals` places (printed as the shortest decimal that reads back to it);
// null for NaN and infinities, which JSON cannot hold.
json_t *cli_json_num(double x, int decimals);
json_t *cli_json_int(long long v);
// obj[key] = v (v's reference is taken), exiting on failure; the same for appending to arrays.
void cli_jset(json_t *obj, const char *key, json_t *v);
void cli_jpush(json_t *arr, json_t *v);
// Writes v on one line (compact, keys in insertion order) and a newline, then frees v.
void cli_json_print(FILE *f, json_t *v);
// obj's "finish_reason": OpenAI's and vLLM's word ("length" for LLM_FINISH_CONTEXT too), and
// after "length" a "length_limit": "max_tokens", or "context" when the context or the KV cache
// cut the request short.
void cli_json_finish(json_t *obj, enum llm_finish_reason reason);
// s[0..n) as a JSON string (quoted, escaped; see cli_json_bytes).
void cli_json_str(FILE *f, const char *s, size_t n);

// The text of a token for people: its piece (the bytes it stands for), or for a control token,
// which has none, its text (e.g. "<|im_end|>"). Replaces b's contents; returns its length, or -1
// for an id out of range.
int cli_token_text(llm_engine *E, int32_t token, struct cli_strbuf *b);
// The log-probabilities of n_tok generated positions, k each ([n_tok][k] in lp), as JSON: per
// position an array of {"id":N,"token":"TEXT","logprob":X}. TEXT is the token's text
// (cli_token_text); a piece that is not valid UTF-8 on its own (part of a character) has U+FFFD
// for each byte that is not, and its exact bytes in "bytes":[...] (OpenAI's field). A logprob of
// -infinity is null.
json_t *cli_json_logprobs(llm_engine *E, const struct llm_logprob *lp, int n_tok, int k);

// Speculative decoding's statistics (llm_engine_stats.spec_*): whether any draft was proposed; a
// line for people (drafts kept, tokens per verification, acceptance by draft position, drafting
// time); the same as a JSON object.
bool cli_spec_used(const struct llm_engine_stats *st);
void cli_spec_print(FILE *f, const char *indent, const struct llm_engine_stats *st);
json_t *cli_spec_json(const struct llm_engine_stats *st);

// "llm: message" on stderr, exit status 1.
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2), noreturn))
#endif
void cli_die(const char *fmt, ...);
// A flag's value in [lo, hi], or cli_die naming the flag.
long long cli_parse_int(const char *flag, const char *s, long long lo, long long hi);
double cli_parse_float(const char *flag, const char *s, double lo, double hi);
// Comma-separated token ids into ids (at most cap); returns their number.
int cli_parse_id_list(const char *flag, const char *s, int32_t *ids, int cap);
// What the program reads is bounded (as --help and the README say), so that an endless input
// (/dev/zero, a pipe that never ends) stops it with a message instead of filling the memory: a
// file or standard input (a prompt, token ids, requests) at most CLI_MAX_INPUT bytes, a request
// line or a chat line at most CLI_MAX_LINE bytes, at most CLI_MAX_REQUESTS request lines.
#define CLI_MAX_INPUT ((size_t)1 << 30)
#define CLI_MAX_LINE ((size_t)16 << 20)
#define CLI_MAX_REQUESTS (1 << 20)
// A whole file (NUL-terminated, *len bytes) of at most max bytes, or cli_die. cli_read_stream:
// the rest of an open stream (standard input), name for messages.
char *cli_read_file(const char *path, size_t max, size_t *len);
char *cli_read_stream(FILE *f, const char *name, size_t max, size_t *len);
// The next line of f into b (replacing what b held; the '\n' dropped, NUL-terminated). Returns
// its length, -1 at the end of the input, -2 when it goes on past max bytes (b holds max of them).
// A line is returned as soon as it has arrived: llm chat's standard input may be another
// program waiting for the answer.
long long cli_getline(FILE *f, struct cli_strbuf *b, size_t max);

// Parses argv[2..] (argv[1] is the command) over the defaults, by the table of flags in args.c
// (cli_flags). Flags that take a value take it as the next argument or after '=' (--temp=0.5).
// c->grammar is made from --grammar, --json-schema or --json-object (cli_die when it cannot be).
void cli_parse_args(int argc, char **argv, struct cli *c);
// The engine of the flags, or cli_die with the model file's name and the message. Notes on
// stderr for llama.cpp's flags that change nothing here (-ngl, -fa), and a warning when -c is
// beyond the context the model was trained with.
llm_engine *cli_engine(struct cli *c);
// The prompt of llm run / llm tokenize: text (-p, -f) tokenized, or ids (--tokens). max_tokens > 0:
// a text with more bytes than that many tokens can stand for (llm_model_info.max_token_bytes) is
// refused before it is tokenized, and no more of the file is read.
int32_t *cli_prompt(llm_engine *E, const struct cli *c, int max_tokens, int *n_prompt);
// Seconds on a monotonic clock.
double cli_now(void);
// A part of a split GGUF model, PREFIX-00001-of-00003.gguf (.gguf in any case; 1 <= index <= count):
// true with the length of PREFIX, the part's index and the number of parts; false for another name.
bool cli_gguf_split(const char *path, size_t *prefix_len, int *index, int *count);

// --- request.c: completion requests as JSON (llm generate's lines, llm serve's bodies) ---

// A chat request's tools (tools.c): the family's format, tool_choice, the grammar of the calls.
enum cli_tool_format { CLI_TOOLS_HERMES, CLI_TOOLS_LLAMA3, CLI_TOOLS_MISTRAL };
enum cli_tool_choice { CLI_TOOL_AUTO, CLI_TOOL_NONE, CLI_TOOL_REQUIRED, CLI_TOOL_NAMED };
#define CLI_TOOLS_MAX_CALLS 16     // calls read from one answer (and that a grammar allows)
struct cli_tools {
    json_t *list;              // the request's tools (in its root object), NULL: none
    json_t *choice_v;          // tool_choice as given (NULL: not)
    int n;                     // tools
    enum cli_tool_format format;
    enum cli_tool_choice choice;
    int named;                 // CLI_TOOL_NAMED: the tool's index
    bool single;               // parallel_tool_calls false: one call at most
    bool active;               // tools rendered in the prompt, calls parsed from the answer
    bool harmony;              // gpt-oss's harmony format: rendered as its template; its calls (read by
                               // cli_harmony_feed into the Hermes format) parsed as Hermes calls
    char *grammar;             // "required" or a named function: the calls' grammar (p.grammar)
};
// What a streamed choice has sent: content bytes, calls announced, the last call's argument bytes.
struct cli_tool_stream { size_t content_sent, args_sent; int calls_sent; };

enum cli_jreq_kind {
    CLI_JREQ_GENERATE,         // a request line of llm generate: prompt or tokens; strict
    CLI_JREQ_COMPLETION,       // /v1/completions: prompt (one or many, text or ids)
    CLI_JREQ_CHAT,             // /v1/chat/completions: messages, rendered with a chat template
};
struct cli_jreq {
    enum cli_jreq_kind kind;
    json_t *root;              // the parsed object; strings point into it
    struct llm_request_params p;   // over the defaults the caller set after cli_jreq_init
    // generate: one prompt
    const char *prompt;
    bool has_prompt, has_tokens;
    int32_t *tokens;
    int n_tokens;
    // completion: n_prompts prompts (ids in prompt_ids); chat: one, the rendered chat_text
    struct llm_prompt *prompts;
    int32_t **prompt_ids;
    int n_prompts;
    char *chat_text;
    const char **stop;
    int n_stop;
    int32_t *stop_ids;
    // the server's fields
    const char *model;         // NULL: not given
    int n;                     // choices per prompt
    bool stream, include_usage, echo, chat_logprobs, seed_set, max_tokens_set, max_completion_set, logprobs_set;
    int top_logprobs;
    json_t *messages;          // chat: the messages, rendered once every field is read
    struct cli_tools tools;    // chat: tools, tool_choice, parallel_tool_calls
    // structured output: the field that asks for a grammar (grammar, json_schema,
    // response_format; one at most), what it gives; p.grammar is the grammar
    const char *grammar_param;
    const char *grammar_text;  // grammar: GBNF
    json_t *schema;            // a JSON Schema (NULL with response_format json_object: any object)
    const char *schema_path;   // where it is, for messages (response_format.json_schema.schema)
    bool format_text;          // response_format {"type": "text"}: no grammar (over a default)
    char *grammar_alloc;       // the schema's grammar
    char *err;                 // why the request cannot run (valid UTF-8), or NULL
    const char *err_param;     // the field it is about, or NULL
};
void cli_jreq_init(struct cli_jreq *q, enum cli_jreq_kind kind);
// Parses a request over q's defaults; false with q->err when it cannot run. chat_template: the
// template CLI_JREQ_CHAT renders messages with.
bool cli_jreq_parse(const char *json, size_t len, struct cli_jreq *q, const char *chat_template);
void cli_jreq_free(struct cli_jreq *q);
// Records why the request cannot run (param: the field, or NULL); returns false.
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool cli_jreq_fail_at(struct cli_jreq *q, const char *param, const char *fmt, ...);

// --- tools.c: tool calling in /v1/chat/completions (docs/structured-output.md) ---

// The fields tools, tool_choice, parallel_tool_calls (key) of a chat request.
bool cli_tools_field(struct cli_jreq *q, const char *key, json_t *v);
// Once every field is read: the tools checked (names, schemas), tool_choice resolved, the format
// of the template tmpl's family, for "required" or a named function the grammar (q->p.grammar).
bool cli_tools_prepare(struct cli_jreq *q, const char *tmpl);
// Whether the conversation needs the family's tool format: tools offered, tool messages or calls.
bool cli_tools_involved(const struct cli_jreq *q, json_t *messages);
// The conversation (messages v, their roles and texts in m) rendered into q->chat_text.
bool cli_tools_render(struct cli_jreq *q, json_t *v, const struct llm_chat_message *m, int n, const char *tmpl);
void cli_tools_free(struct cli_tools *t);
// A whole answer's message: "content" (null when calls came with no text before them) and
// "tool_calls" of the calls in text[0..n); id: the completion's, choice: its index (call ids).
void cli_tools_message(const struct cli_tools *t, const char *id, int choice, const char *text, size_t n, json_t *m);
// A streamed choice's deltas for its text so far (st: what was sent): content, then each call's
// first delta (id, type, name, arguments "") and its arguments' pieces. force: a delta even when
// nothing is new (logprobs to send); final: the text is whole.
json_t *cli_chat_deltas(const struct cli_tools *t, struct cli_tool_stream *st, const char *id, int choice,
                        const struct cli_strbuf *text, bool force, bool final);
// gpt-oss's harmony output read as it grows: the final (and commentary) channels' text into
// content, the analysis channel's into reasoning; text outside any message is content. With calls
// (the request's tools active), a message to=functions.NAME goes into content as a Hermes call,
// <tool_call>\n{"name": "NAME", "arguments": BODY}\n</tool_call>, for the tools' parser. Markers
// come whole (each is one token); a message header not yet complete waits for more text, unless
// final (s[0..n) is the whole answer). Feed it the same text, longer each time.
struct cli_harmony { size_t pos, scan; int chan; bool calls; struct cli_strbuf content, reasoning; };
void cli_harmony_feed(struct cli_harmony *h, const char *s, size_t n, bool final);
void cli_harmony_free(struct cli_harmony *h);
// The finish reason: "tool_calls" for a "stop" whose choice (its message) or stream made calls.
const char *cli_tools_finish(const json_t *choice, int calls_streamed, const char *finish);
// The grammar (GBNF, malloc'd) of the JSON texts a JSON Schema (its text) accepts, or NULL with
// the converter's message in err ("json schema: the keyword \"not\" is not supported").
char *cli_schema_grammar(const char *schema, char *err, size_t size);

// --- the serving benchmark (serve.c; bench_http.c for a server) ---

// Its requests: n prompts of in_len random token ids (BOS first; --rag: a shared context and
// questions), arriving at arrival[i] seconds (Poisson at --request-rate, else all at 0).
struct cli_bench_workload { int n, in_len; int32_t *prompts; double *arrival; };
void cli_bench_workload(const struct cli *c, int n_vocab, int bos_id, struct cli_bench_workload *w);
struct cli_serve_result {
    int n_requests;
    double elapsed, output_tps, total_tps, req_per_s;
    double ttft[3], itl[3];           // p50, p90, p99 in ms
    double kv_utilization, prefix_hit_rate;
    long long n_output, n_prompt, n_preemptions;
    int kv_tokens, n_threads;
    uint64_t outputs_hash;            // of every request's output tokens, in request order
    struct llm_engine_stats stats;    // the engine's at the end (speculation's counters)
    bool http;                        // measured over HTTP (--base-url): no engine figures
    int n_failed, max_concurrency;
};
void cli_bench_print(const struct cli *c, const struct cli_serve_result *R, const char *what);
// The p-th percentile (0..100) of v[0..n), linear between ranks; v gets sorted.
double cli_percentile(float *v, int n, double p);

// --- serve_scan.c: llm serve's request bodies, scanned as they arrive ---

// A JSON body scanned as it arrives, never built: the token ids in each prompt of the top-level
// "prompt" (/v1/completions), so that a prompt certain to exceed the context is refused before
// the body is kept and parsed whole (Jansson takes some 40 bytes per id). Exact for valid JSON;
// what it counts in invalid JSON does not matter: such a body is refused either way.
struct cli_scan {
    int depth;                 // arrays and objects open
    bool str, esc, atom;       // in a string; after its backslash; in a number or literal
    int hex;                   // \uXXXX digits still to come
    unsigned cp;               // their value so far
    bool want_key, in_key;     // depth 1: the next string is a key; reading one
    char key[8];               // the key's first characters, decoded (0x80: not ASCII)
    int key_len;
    bool key_prompt;           // the last key of depth 1 was "prompt"
    bool prompt;               // in the value of "prompt"
    long long ids, max_ids;    // ids in the prompt being read, the most in one
    long long values;          // JSON values begun (keys included)
    long long parse_bytes;     // what parsing them will hold (serve_scan.c's estimate, from above)
};
// n more bytes of a body through the scanner (z zeroed before the first); returns the most token
// ids seen in one prompt so far.
long long cli_scan(struct cli_scan *z, const char *p, size_t n);

// --- serve_log.c: llm serve's request log ---

struct sockaddr;
enum cli_log_format { CLI_LOG_TEXT, CLI_LOG_JSON };
// Where and how: a stream (stderr), text or JSON, or nothing (--quiet).
struct cli_reqlog {
    FILE *f;
    enum cli_log_format format;
    bool quiet;
};
// An HTTP request as it ended.
struct cli_reqlog_entry {
    char client[64];                   // the client's address ("-": unknown)
    const char *method, *path;
    int status;                        // the answer's status (0: none was sent)
    long long prompt, completion;      // a generation request's tokens, as its usage (-1: none ran)
    double ttft_ms;                    // from its arrival to the first generated token (-1: none)
    double total_ms;                   // from its arrival to its end
    bool aborted;                      // it ended before its answer was whole (the client went, a
                                       // timeout, the server stopping)
    const char *error;                 // the message of its error body (4xx, 5xx), or NULL
};
// The numeric address of sa (IPv4 or IPv6) into buf, or "-".
void cli_reqlog_client(const struct sockaddr *sa, char *buf, size_t size);
// e's line, written whole (nothing with L->quiet). Text: the time the request ended (ISO 8601,
// UTC, milliseconds), client, method, path, status, prompt=N completion=N ttft=Xms total=Xms
// ('-' for what does not apply), then "aborted" and error="MESSAGE" when they apply; JSON: an
// object with the same fields (time, client, method, path, status, prompt_tokens,
// completion_tokens, ttft_ms, total_ms, aborted, error; null for what does not apply).
void cli_reqlog_write(const struct cli_reqlog *L, const struct cli_reqlog_entry *e);

// --- the commands: each returns the exit status ---
int cli_cmd_run(struct cli *c);
int cli_cmd_chat(struct cli *c);
int cli_cmd_info(struct cli *c);
int cli_cmd_devices(void);
int cli_cmd_tokenize(struct cli *c);
int cli_cmd_detokenize(struct cli *c);
int cli_cmd_generate(struct cli *c);
int cli_cmd_bench(struct cli *c);
int cli_cmd_bench_serve(struct cli *c);
int cli_cmd_profile(struct cli *c);
int cli_cmd_perplexity(struct cli *c);
int cli_cmd_pull(int argc, char **argv);
int cli_cmd_quantize(int argc, char **argv);
int cli_cmd_serve(struct cli *c);
int cli_cmd_bench_http(struct cli *c);
int cli_cmd_list(int argc, char **argv);
int cli_cmd_rm(int argc, char **argv);
// -m hf://OWNER/NAME/FILE: the path of that file in the cache, downloaded first when it is not
// there (or cli_die: a bad name, HTTP errors, no network, a failed size or sha256 check).
// hf://OWNER/NAME:QUANT, hf://OWNER/NAME: the model of the repository that QUANT (or the default
// choice) names, as llm pull REPO[:QUANT] chooses it: from the cache when it holds exactly one
// such model (every part of it), else from the repository's file list; every part downloaded;
// the path of the first.
char *cli_hf_model(const char *spec);
// The folder of llm pull's downloads, ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c/hf (malloc'd), or NULL
// when neither variable is set (XDG_CACHE_HOME counts when it is an absolute path).
char *cli_cache_root(void);
// A size for people: "1.23 GB", "45.6 MB", "789 kB" (decimal units).
const char *cli_human_size(double bytes, char *out, size_t cap);
// The files under the folder dir (the cache or a repository's folder in it), recursively, as
// paths relative to it, sorted; folders reached through symbolic links are left out, and so are
// downloads in progress (*.part: their number in *n_partial when it is not NULL). NULL and *n 0
// when the folder is missing or unreadable.
char **cli_cache_files(const char *dir, int *n, int *n_partial);
void cli_strv_free(char **v, int n);
// A model argument (-m, --speculative-model, quantize's IN): NULL when it is to be used as it is
// (an existing file or folder, a path starting with '/', './' or '../'); for hf://... the pulled
// file (cli_hf_model); else the model of the cache it names (llm list: its name, or a part of the
// name, in any case, that no other model has). cli_die when it names none (neither a file nor a
// cached model), several (they are listed), or a split model with parts missing. malloc'd.
char *cli_model_path(const char *arg);

#endif
