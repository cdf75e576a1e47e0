// cli.h — what the files of the llm program share. The program is built against llm.h alone,
// as SQLite's shell.c is built against sqlite3.h: it uses nothing of the engine but its public
// interface, and is an example of it.
//
//   main.c   the command table and the usage text
//   args.c   flags, number parsing, reading files, the prompt of run / tokenize, JSON strings
//   run.c    llm run, llm chat
//   info.c   llm info (and --devices), llm tokenize
//   serve.c  llm generate, llm bench (one sequence; serving), llm profile
#ifndef CLI_H
#define CLI_H

#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L   // getline, strdup, clock_gettime, sigwait, nanosleep
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
    bool seed_set, ctx_set, verbose;   // --seed, -c given; -v
    int n_gpu_layers;                  // -ngl (accepted for llama.cpp's users; -1: not given)
    bool flash_attn;                   // -fa (likewise)
    // generate, bench (serving), profile
    const char *requests;
    int num_prompts, input_len, output_len, context_len, questions, question_len;
    double request_rate;
    uint64_t seed;
    bool rag, serve;
};

extern const char cli_usage[];

// --- args.c ---

// A growing NUL-terminated byte string (p is NULL until the first put).
struct cli_strbuf { char *p; size_t n, cap; };
void cli_sb_put(struct cli_strbuf *b, const char *s, size_t n);
// s[0..n) as a JSON string, quoted and escaped.
void cli_json_str(FILE *f, const char *s, size_t n);

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
// A whole file (NUL-terminated, *len bytes), or cli_die.
char *cli_read_file(const char *path, size_t *len);

// Parses argv[2..] (argv[1] is the command) over the defaults. Flags that take a value take it
// as the next argument or after '=' (--temp=0.5).
void cli_parse_args(int argc, char **argv, struct cli *c);
// The engine of the flags, or cli_die with the model file's name and the message. Notes on
// stderr for llama.cpp's flags that change nothing here (-ngl, -fa), and a warning when -c is
// beyond the context the model was trained with.
llm_engine *cli_engine(struct cli *c);
// The prompt of llm run / llm tokenize: text (-p, -f) tokenized, or ids (--tokens).
int32_t *cli_prompt(llm_engine *E, const struct cli *c, int *n_prompt);
// Seconds on a monotonic clock.
double cli_now(void);

// --- the commands: each returns the exit status ---
int cli_cmd_run(struct cli *c);
int cli_cmd_chat(struct cli *c);
int cli_cmd_info(struct cli *c);
int cli_cmd_devices(void);
int cli_cmd_tokenize(struct cli *c);
int cli_cmd_generate(struct cli *c);
int cli_cmd_bench(struct cli *c);
int cli_cmd_bench_serve(struct cli *c);
int cli_cmd_profile(struct cli *c);

#endif
