// run.c — llm run (one prompt, its text streamed) and llm chat (a conversation). Both generate
// through the engine's requests (llm_add_request, llm_step), as serving does: the engine
// samples, stops (end-of-generation tokens, --stop, --stop-token-ids, -n, the context) and
// times them. Chat renders the whole conversation every turn and adds it as one request; the
// engine's prefix cache holds the earlier turns' KV blocks, so only the new text is computed.
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef LLM_HAVE_EDITLINE
#include <editline/readline.h>
#endif

// --- signals, seeds ---

// SIGINT stays blocked in every thread (the engine's workers inherit the mask) and is polled
// between steps: no handler and no global flag.
static void cli_block_sigint(void) {
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
}

// A SIGINT that arrived while it was blocked: consumes it and says so.
static bool cli_sigint_taken(void) {
    sigset_t pending, one;
    if (sigpending(&pending) != 0 || !sigismember(&pending, SIGINT)) return false;
    sigemptyset(&one);
    sigaddset(&one, SIGINT);
    int sig;
    sigwait(&one, &sig);
    return true;
}

// A seed for runs without --seed: from /dev/urandom, else the time and the process id. 32 bits,
// as llama.cpp's, so that it is easy to give back with --seed.
static uint64_t cli_random_seed(void) {
    uint32_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof(s), 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + ((uint64_t)getpid() << 40);
        x ^= x >> 33;   // a 64-bit finaliser (MurmurHash3's): every input bit reaches the low 32
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        s = (uint32_t)x;
    }
    if (f) fclose(f);
    return s;
}

// The request parameters of the flags (sampling, stops, end-of-generation).
static struct llm_request_params cli_request_params(const struct cli *c) {
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling = c->sp;
    rp.ignore_eos = c->ignore_eos;
    rp.stop = c->stops;
    rp.n_stop = c->n_stops;
    rp.stop_token_ids = c->stop_ids;
    rp.n_stop_token_ids = c->n_stop_ids;
    rp.grammar = c->grammar;   // --grammar, --json-schema, --json-object
    return rp;
}

// --- one request, from llm_add_request to its end ---

struct cli_answer {
    int32_t *toks;                 // the generated tokens
    int n_toks, cap_toks;
    struct llm_logprob *lp;        // [cap_toks x k]: each position's top k (k = the request's logprobs)
    int k;
    struct cli_strbuf text;        // their text (a stop string cut off)
    enum llm_finish_reason finish;
    double ttft_ms, e2e_ms;
    int n_prompt, n_cached;
};

static void cli_answer_free(struct cli_answer *a) {
    free(a->toks);
    free(a->lp);
    free(a->text.p);
    memset(a, 0, sizeof(*a));
}

// Adds a step's output of the request to the answer.
static void cli_answer_add(struct cli_answer *a, const struct llm_output *o) {
    if (a->n_toks + o->n_new_tokens > a->cap_toks) {
        a->cap_toks = CLI_MAX(2 * a->cap_toks, a->n_toks + o->n_new_tokens + 64);
        a->toks = realloc(a->toks, (size_t)a->cap_toks * sizeof(int32_t));
        if (a->k) a->lp = realloc(a->lp, (size_t)a->cap_toks * (size_t)a->k * sizeof(*a->lp));
        if (!a->toks || (a->k && !a->lp)) cli_die("out of memory");
    }
    if (o->n_new_tokens) memcpy(a->toks + a->n_toks, o->new_tokens, (size_t)o->n_new_tokens * sizeof(int32_t));
    if (a->k && o->new_logprobs)
        memcpy(a->lp + (size_t)a->n_toks * (size_t)a->k, o->new_logprobs,
               (size_t)o->n_new_tokens * (size_t)a->k * sizeof(*a->lp));
    a->n_toks += o->n_new_tokens;
    cli_sb_put(&a->text, o->new_text, (size_t)o->n_new_text);
    a->ttft_ms = o->ttft_ms;
    a->n_prompt = o->n_prompt_tokens;
    a->n_cached = o->n_cached_tokens;
    if (o->finished) {
        a->finish = o->finish_reason;
        a->e2e_ms = o->e2e_ms;
    }
}

// Adds the request and steps the engine until it ends, writing its text to out (unless NULL) as
// it comes. A SIGINT (blocked, polled between steps) aborts the request: it ends with
// LLM_FINISH_ABORT and what had been shown of it; nothing it generated after the signal was seen
// is written or kept. Returns 0, or -1 when the request was not accepted, a step failed or the
// request ended with an error (the model's logits were not finite): the message in llm_last_error.
// hm (gpt-oss's harmony format; else NULL): the text read into its channels as it comes, the
// final answer written to out and the reasoning, on a terminal, dimmed before it.
static int cli_answer_run(llm_engine *E, const struct llm_prompt *prompt, const struct llm_request_params *rp,
                          FILE *out, struct cli_answer *a, struct cli_harmony *hm) {
    a->k = rp->logprobs;
    int id = llm_add_request(E, prompt, rp);
    if (id < 0) return -1;
    bool stopped = false;
    double next_poll = 0;
    for (;;) {
        const struct llm_output *outs;
        int n = llm_step(E, &outs);
        if (n < 0) {
            llm_abort_request(E, id);   // its blocks were freed; it leaves at the next step
            return -1;
        }
        // The signal is looked for after the step and before its text is written, so that the
        // token of a step that a Ctrl-C came during is not printed after the ^C. sigpending is a
        // system call (a microsecond or two, as long as a small model's step): asked before each
        // write, itself one, and otherwise at most every 10 ms (the clock is read without one).
        bool writes = false;
        for (int i = 0; out && i < n; i++) writes |= outs[i].request_id == id && outs[i].n_new_text > 0;
        double now = cli_now();
        if (!stopped && (writes || now >= next_poll)) {
            next_poll = now + 0.01;
            // the abort fails only when the request ended in this very step: it is stopped all the same
            if (cli_sigint_taken()) stopped = true, llm_abort_request(E, id);
        }
        for (int i = 0; i < n; i++) {
            const struct llm_output *o = &outs[i];
            if (o->request_id != id) continue;   // an earlier request, reported once more
            if (stopped) {
                // what came after the signal (this step's tokens, text held back for a stop string)
                // is dropped: the answer is what was shown
                if (!o->finished) continue;
                a->finish = LLM_FINISH_ABORT;
                a->e2e_ms = o->e2e_ms;
                return 0;
            }
            cli_answer_add(a, o);
            if (out && hm) {
                const size_t c0 = hm->content.n, r0 = hm->reasoning.n;
                cli_harmony_feed(hm, a->text.p ? a->text.p : "", a->text.n, o->finished);
                const bool dim = isatty(fileno(out));
                if (hm->reasoning.n > r0 && dim) {
                    fputs("\x1b[2m", out);
                    fwrite(hm->reasoning.p + r0, 1, hm->reasoning.n - r0, out);
                    fputs("\x1b[0m", out);
                }
                if (hm->content.n > c0) {
                    if (c0 == 0 && hm->reasoning.n && dim) fputs("\n\n", out);
                    fwrite(hm->content.p + c0, 1, hm->content.n - c0, out);
                }
                fflush(out);
            } else if (out && o->n_new_text) {
                fwrite(o->new_text, 1, (size_t)o->n_new_text, out);
                fflush(out);
            }
            if (o->finished) return o->finish_reason == LLM_FINISH_ERROR ? -1 : 0;
        }
    }
}

// Prompt and decode speed: the prompt's computed tokens over the time to the first token; the
// tokens after the first over the time from the first to the last.
static double cli_prompt_tps(const struct cli_answer *a) {
    return a->ttft_ms > 0 ? (a->n_prompt - a->n_cached) / (a->ttft_ms * 1e-3) : 0.0;
}
static int cli_n_decode(const struct cli_answer *a) { return CLI_MAX(a->n_toks - 1, 0); }
static double cli_decode_tps(const struct cli_answer *a) {
    double t = (a->e2e_ms - a->ttft_ms) * 1e-3;
    return cli_n_decode(a) && t > 0 ? cli_n_decode(a) / t : 0.0;
}

// --- llm run ---

int cli_cmd_run(struct cli *c) {
    int n_prompt = 0;
    if (!!c->prompt + !!c->prompt_file + !!c->tokens != 1) cli_die("run: give exactly one of -p, -f or --tokens");
    if (c->logprobs && !c->json) cli_die("--logprobs needs --json");
    if (!c->seed_set) c->sp.seed = cli_random_seed();
    if (!c->ep.max_num_seqs) c->ep.max_num_seqs = 1;   // one request: KV memory for one context
    cli_block_sigint();   // before the engine's threads start, so that they inherit it
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    if (c->verbose)
        fprintf(stderr, "llm: seed %llu; %s backend (%s), %d threads, context %d tokens (trained %d)\n",
                (unsigned long long)c->sp.seed, ei.backend_name, ei.device_name, ei.n_threads, ei.max_model_len,
                mi.n_ctx_train);
    int32_t *prompt = cli_prompt(E, c, ei.max_model_len, &n_prompt);
    if (n_prompt == 0) cli_die("run: the prompt is empty (no tokens)");
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= mi.n_vocab)
            cli_die("--tokens: id %d is out of range (vocabulary of %d)", prompt[i], mi.n_vocab);
    if (n_prompt > ei.max_model_len)
        cli_die("run: the prompt has %d tokens, more than the context of %d (-c)", n_prompt, ei.max_model_len);

    struct llm_request_params rp = cli_request_params(c);
    rp.max_tokens = c->n_predict < 0 ? INT_MAX : c->n_predict;   // -1: until the context ends it
    rp.logprobs = c->logprobs;
    struct llm_prompt pr = {NULL, prompt, n_prompt};
    struct cli_answer a = {0};
    a.finish = LLM_FINISH_LENGTH;
    a.n_prompt = n_prompt;
    if (cli_answer_run(E, &pr, &rp, c->json ? NULL : stdout, &a, NULL) < 0) {
        if (!c->json) { putchar('\n'); fflush(stdout); }
        cli_die("%s", llm_last_error(E));
    }
    if (c->json) {
        json_t *o = cli_jcheck(json_object()), *arr;
        cli_jset(o, "prompt_tokens", arr = cli_jcheck(json_array()));
        for (int i = 0; i < n_prompt; i++) cli_jpush(arr, cli_json_int(prompt[i]));
        cli_jset(o, "tokens", arr = cli_jcheck(json_array()));
        for (int i = 0; i < a.n_toks; i++) cli_jpush(arr, cli_json_int(a.toks[i]));
        cli_jset(o, "text", cli_json_bytes(a.text.p ? a.text.p : "", a.text.n));
        cli_json_finish(o, a.finish);
        cli_jset(o, "prompt_tps", cli_json_num(cli_prompt_tps(&a), 3));
        cli_jset(o, "decode_tps", cli_json_num(cli_decode_tps(&a), 3));
        cli_jset(o, "seed", cli_json_int((long long)c->sp.seed));
        if (a.k) cli_jset(o, "logprobs", cli_json_logprobs(E, a.lp, a.n_toks, a.k));
        struct llm_engine_stats st;
        llm_get_stats(E, &st);
        if (c->ep.speculative_ngram || c->ep.speculative_model) cli_jset(o, "speculation", cli_spec_json(&st));
        cli_json_print(stdout, o);
    } else {
        printf("\n");
    }
    // the text's last line is out before the statistics, which may go to the same file (2>&1)
    fflush(stdout);
    if (a.finish == LLM_FINISH_CONTEXT && n_prompt + a.n_toks >= ei.max_model_len)
        fprintf(stderr, "llm: the generation reached the end of the context (%d tokens; -c sets it)\n",
                ei.max_model_len);
    else if (a.finish == LLM_FINISH_CONTEXT)
        fprintf(stderr, "llm: the generation filled the KV cache (%d tokens; --kv-cache-memory sets it)\n",
                ei.kv_tokens);
    fprintf(stderr, "prompt: %d tokens, %.2f tokens/s | decode: %d tokens, %.2f tokens/s\n", n_prompt,
            cli_prompt_tps(&a), cli_n_decode(&a), cli_decode_tps(&a));
    const char *tmpl = llm_chat_template_detect(E);
    if (a.finish == LLM_FINISH_STOP && a.text.n == 0 && tmpl)   // a chat model given plain text
        fprintf(stderr, "llm: the model ended before any text: it is a chat model (%s template) and run gives it the "
                        "prompt as it is; ask it with: llm chat -m %s -p \"...\"\n", tmpl, c->ep.model_path);
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    if (c->ep.speculative_ngram || c->ep.speculative_model) cli_spec_print(stderr, "", &st);
    bool aborted = a.finish == LLM_FINISH_ABORT;
    cli_answer_free(&a);
    free(prompt);
    llm_engine_free(E);
    return aborted ? 130 : 0;   // 128 + SIGINT, as a shell reports an interrupted command
}


// --- llm chat ---

// A growing array of token ids.
struct cli_ids { int32_t *p; int n, cap; };

static void cli_ids_grow(struct cli_ids *v, int n) {
    if (v->n + n <= v->cap) return;
    v->cap = CLI_MAX(2 * v->cap, v->n + n + 64);
    if (!(v->p = realloc(v->p, (size_t)v->cap * sizeof(int32_t)))) cli_die("out of memory");
}

// Text tokenized as plain text (control-token text stays text) onto v; raw is emptied.
static void cli_ids_plain(llm_engine *E, struct cli_strbuf *raw, struct cli_ids *v) {
    if (!raw->n) return;
    int n = llm_tokenize(E, raw->p, raw->n, 0, NULL, 0);
    if (n < 0) cli_die("%s", llm_last_error(E));
    cli_ids_grow(v, n);
    llm_tokenize(E, raw->p, raw->n, 0, v->p + v->n, n);
    v->n += n;
    raw->n = 0;
}

// The first occurrence of s[0..m) in t[0..n), or NULL.
static const char *cli_find(const char *t, size_t n, const char *s, size_t m) {
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (!memcmp(t + i, s, m)) return t + i;
    return NULL;
}

// Template markup t[0..n): its special tokens (as LLM_TOKENIZE_PARSE_SPECIAL finds them) go to
// v, each after the text before it (raw, then t's) tokenized as plain text; the text after the
// last one is left in raw, where the message content that follows joins it.
static void cli_ids_markup(llm_engine *E, const char *t, size_t n, struct cli_strbuf *raw, struct cli_ids *v) {
    int k = n ? llm_tokenize(E, t, n, LLM_TOKENIZE_PARSE_SPECIAL, NULL, 0) : 0;
    int32_t *ids = malloc((size_t)CLI_MAX(k, 1) * sizeof(int32_t));
    if (k < 0 || !ids) cli_die("%s", k < 0 ? llm_last_error(E) : "out of memory");
    llm_tokenize(E, t, n, LLM_TOKENIZE_PARSE_SPECIAL, ids, k);
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        char s[256];
        if (llm_token_to_piece(E, ids[i], NULL, 0) != 0) continue;   // text of its own: not split out
        int m = llm_detokenize(E, &ids[i], 1, LLM_DETOKENIZE_SPECIAL, s, sizeof(s));
        const char *hit = m > 0 && (size_t)m < sizeof(s) ? cli_find(t + off, n - off, s, (size_t)m) : NULL;
        if (!hit) continue;
        cli_sb_put(raw, t + off, (size_t)(hit - (t + off)));
        cli_ids_plain(E, raw, v);
        cli_ids_grow(v, 1);
        v->p[v->n++] = ids[i];
        off = (size_t)(hit - t) + (size_t)m;
    }
    cli_sb_put(raw, t + off, n - off);
    free(ids);
}

struct cli_chat {
    llm_engine *E;
    const struct cli *c;
    const char *tmpl;
    struct llm_chat_message *msg;   // the conversation (strings owned)
    int n_msg, cap_msg;
    char *system;
    int max_model_len;
    int n_turns;                    // answers so far: turn t samples with seed --seed + t
    int n_dropped;                  // earlier turns dropped to fit the context
    struct cli_answer last;         // the last answer (its text is in the conversation)
};

static void cli_chat_add(struct cli_chat *ch, const char *role, const char *content) {
    if (ch->n_msg == ch->cap_msg) {
        ch->cap_msg = ch->cap_msg ? 2 * ch->cap_msg : 16;
        if (!(ch->msg = realloc(ch->msg, (size_t)ch->cap_msg * sizeof(*ch->msg)))) cli_die("out of memory");
    }
    ch->msg[ch->n_msg].role = role;
    if (!(ch->msg[ch->n_msg].content = strdup(content))) cli_die("out of memory");
    ch->n_msg++;
}

// Removes messages [at, at + n).
static void cli_chat_remove(struct cli_chat *ch, int at, int n) {
    if (n == 0) return;   // msg may still be NULL
    for (int i = at; i < at + n; i++) free((char *)ch->msg[i].content);
    memmove(ch->msg + at, ch->msg + at + n, (size_t)(ch->n_msg - at - n) * sizeof(*ch->msg));
    ch->n_msg -= n;
}

static void cli_chat_reset(struct cli_chat *ch) {
    cli_chat_remove(ch, 0, ch->n_msg);
    if (ch->system && *ch->system) cli_chat_add(ch, "system", ch->system);
}

static char *cli_chat_render(const struct cli_chat *ch, const struct llm_chat_message *msg) {
    int n = llm_chat_apply(ch->tmpl, msg, ch->n_msg, 1, NULL, 0);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || llm_chat_apply(ch->tmpl, msg, ch->n_msg, 1, s, (size_t)n + 1) != n) cli_die("chat template failed");
    return s;
}

// The conversation as the prompt's token ids: the template's markup with its special tokens
// parsed, the messages as plain text (a user who types "<|im_end|>" gets those characters, not
// the token). Without special-token text in the messages, the ids are those of the whole
// rendered text tokenized with LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL: special
// tokens split the text and each piece between them is tokenized alone, as here.
static void cli_chat_ids(const struct cli_chat *ch, struct cli_ids *v) {
    // the markup: the conversation rendered with a marker "\x01<i>\x02" for message i's content
    // (no white space: templates that trim contents keep it as it is)
    struct llm_chat_message *mk = malloc((size_t)CLI_MAX(ch->n_msg, 1) * sizeof(*mk));
    char (*marks)[16] = malloc((size_t)CLI_MAX(ch->n_msg, 1) * sizeof(*marks));
    if (!mk || !marks) cli_die("out of memory");
    for (int i = 0; i < ch->n_msg; i++) {
        snprintf(marks[i], sizeof(marks[i]), "\x01%d\x02", i);
        mk[i] = (struct llm_chat_message){ch->msg[i].role, marks[i]};
    }
    char *M = cli_chat_render(ch, mk), *R = cli_chat_render(ch, ch->msg);
    struct llm_model_info mi;
    llm_get_model_info(ch->E, &mi);
    v->n = 0;
    if (mi.add_bos && mi.bos_id >= 0) { cli_ids_grow(v, 1); v->p[v->n++] = mi.bos_id; }
    struct cli_strbuf raw = {0};
    size_t pm = 0, pr = 0;   // read so far of M and of R
    for (;;) {
        const char *at = strchr(M + pm, '\x01');
        size_t tn = (at ? (size_t)(at - M) : strlen(M)) - pm;
        if (strncmp(R + pr, M + pm, tn) != 0) cli_die("chat template: the conversation does not follow its markup");
        cli_ids_markup(ch->E, M + pm, tn, &raw, v);
        pm += tn;
        pr += tn;
        if (!at) break;
        int i = atoi(at + 1);
        pm = (size_t)(strchr(at, '\x02') + 1 - M);
        // the content as the template wrote it, whole or without white space around it
        const char *next = strchr(M + pm, '\x01');
        size_t nn = next ? (size_t)(next - (M + pm)) : strlen(M + pm);
        const char *s = ch->msg[i].content;
        size_t n = strlen(s);
        if (strncmp(R + pr, s, n) != 0 || strncmp(R + pr + n, M + pm, nn) != 0) {
            while (n && isspace((unsigned char)*s)) { s++; n--; }
            while (n && isspace((unsigned char)s[n - 1])) n--;
            if (strncmp(R + pr, s, n) != 0) cli_die("chat template: the conversation does not follow its markup");
        }
        cli_sb_put(&raw, s, n);
        pr += n;
    }
    cli_ids_plain(ch->E, &raw, v);
    free(raw.p);
    free(M);
    free(R);
    free(mk);
    free(marks);
}

// The prompt of the conversation; while it leaves less than room tokens of the context for the
// answer, the oldest turns after the system prompt are dropped (a user message and its answer).
// Returns how many were, or -1 when the last message alone does not fit.
static int cli_chat_fit(struct cli_chat *ch, int room, struct cli_ids *v) {
    int dropped = 0;
    for (;;) {
        cli_chat_ids(ch, v);
        if (v->n + room <= ch->max_model_len) return dropped;
        int first = ch->n_msg > 0 && !strcmp(ch->msg[0].role, "system");
        if (ch->n_msg - first <= 1) return -1;   // only the new message is left
        int n = 1 + (first + 1 < ch->n_msg - 1 && !strcmp(ch->msg[first + 1].role, "assistant"));
        cli_chat_remove(ch, first, n);
        dropped++;
    }
}

// One line of input without its end; NULL at the end of input. SIGINT is let through while
// waiting, so Ctrl-C there quits.
static char *cli_read_line(bool edit, const char *prompt, const char *history) {
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &ss, NULL);
    char *line = NULL;
#ifdef LLM_HAVE_EDITLINE
    if (edit) {
        line = readline(prompt);
        if (line && *line) {
            add_history(line);
            if (history) write_history(history);   // now: Ctrl-C at the prompt ends the process
        }
    } else
#else
    (void)history;
#endif
    {
        if (edit) { fputs(prompt, stdout); fflush(stdout); }
        struct cli_strbuf b = {0};
        long long n = cli_getline(stdin, &b, CLI_MAX_LINE);
        if (n == -2)
            cli_die("chat: a line of standard input is longer than %zu MiB, the most llm reads", CLI_MAX_LINE >> 20);
        if (n < 0) { free(b.p); b.p = NULL; }
        line = b.p;
        while (n > 0 && line[n - 1] == '\r') line[--n] = 0;
    }
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    return line;
}

// A message: lines joined while they end in '\' (as llama-cli's; the backslash becomes a
// newline). NULL at the end of input.
static char *cli_read_message(bool edit, const char *history) {
    struct cli_strbuf b = {0};
    char *line;
    while ((line = cli_read_line(edit, b.p ? "... " : "> ", history)) != NULL) {
        size_t n = strlen(line);
        bool more = n > 0 && line[n - 1] == '\\';
        cli_sb_put(&b, line, n - more);
        free(line);
        if (b.n > CLI_MAX_LINE)
            cli_die("chat: a message is longer than %zu MiB, the most llm reads", CLI_MAX_LINE >> 20);
        if (!more) break;
        cli_sb_put(&b, "\n", 1);
    }
    if (!line && !b.p) return NULL;
    return b.p ? b.p : strdup("");
}

#ifdef LLM_HAVE_EDITLINE
// Where the chat's line history is kept, ${XDG_STATE_HOME:-~/.local/state}/llm.c/chat_history,
// its folders made as needed; NULL when there is no home.
static char *cli_history_path(void) {
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    struct cli_strbuf p = {0};
    if (state && *state) cli_sb_put(&p, state, strlen(state));
    else if (home && *home) { cli_sb_put(&p, home, strlen(home)); cli_sb_put(&p, "/.local/state", 13); }
    else return NULL;
    cli_sb_put(&p, "/llm.c", 6);
    for (char *s = p.p + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(p.p, 0700); *s = '/'; }
    mkdir(p.p, 0700);
    cli_sb_put(&p, "/chat_history", 13);
    return p.p;
}
#endif

// One user message: the conversation's prompt (older turns dropped when the context needs it),
// one request, its text streamed.
static bool cli_chat_turn(struct cli_chat *ch, const char *text, struct cli_ids *ids) {
    const struct cli *c = ch->c;
    cli_chat_add(ch, "user", text);
    // room for the answer: -n tokens, else a quarter of the context; at most half of it
    int room = c->n_predict_set && c->n_predict > 0 ? c->n_predict : ch->max_model_len / 4;
    room = CLI_MAX(CLI_MIN(room, ch->max_model_len / 2), 1);
    int dropped = cli_chat_fit(ch, room, ids);
    if (dropped < 0) {
        printf("(the message does not fit the context of %d tokens with room for an answer)\n", ch->max_model_len);
        cli_chat_remove(ch, ch->n_msg - 1, 1);
        return false;
    }
    if (dropped) {
        ch->n_dropped += dropped;
        if (isatty(2)) {
            fflush(stdout);
            fprintf(stderr, "(%d earlier turn%s dropped to fit the context of %d tokens)\n", dropped,
                    dropped > 1 ? "s" : "", ch->max_model_len);
        }
    }
    struct llm_request_params rp = cli_request_params(c);
    // -n, else up to the end of the turn or of the context
    rp.max_tokens = c->n_predict_set && c->n_predict >= 0 ? c->n_predict : INT_MAX;
    rp.sampling.seed = c->sp.seed + (uint64_t)ch->n_turns;
    struct llm_prompt pr = {NULL, ids->p, ids->n};
    cli_answer_free(&ch->last);
    struct cli_harmony hm = {0};   // (gpt-oss: only the final channel's text is the answer kept)
    const bool harmony = !strcmp(ch->tmpl, "harmony");
    if (cli_answer_run(ch->E, &pr, &rp, stdout, &ch->last, harmony ? &hm : NULL) < 0) {
        cli_harmony_free(&hm);
        printf("\n(%s: /reset to start a new conversation)\n", llm_last_error(ch->E));
        cli_chat_remove(ch, ch->n_msg - 1, 1);
        cli_answer_free(&ch->last);
        return false;
    }
    ch->n_turns++;
    if (ch->last.finish == LLM_FINISH_ABORT) printf(" [stopped]");
    printf("\n");
    if (ch->last.finish == LLM_FINISH_CONTEXT && ch->last.n_prompt + ch->last.n_toks >= ch->max_model_len)
        printf("(the answer reached the end of the context: the next message drops the oldest turns)\n");
    const char *answer = harmony ? hm.content.p : ch->last.text.p;
    cli_chat_add(ch, "assistant", answer ? answer : "");
    cli_harmony_free(&hm);
    return true;
}

// The conversation from the terminal or standard input: a message a line, or a /command.
static void cli_chat_repl(struct cli_chat *ch, bool tty, const char *history, struct cli_ids *ids) {
    char *line;
    while ((line = cli_read_message(tty, history)) != NULL) {
        char *cmd = line;
        if (!strcmp(cmd, "/quit") || !strcmp(cmd, "/exit")) { free(line); break; }
        if (!*cmd) { free(line); continue; }
        if (!strcmp(cmd, "/help")) {
            printf("/reset         forget the conversation\n/system TEXT   set the system prompt (and reset)\n"
                   "/stats         speed of the last answer, context used\n/quit          leave\n"
                   "a line that ends with \\ goes on on the next\n");
        } else if (!strcmp(cmd, "/reset")) {
            cli_chat_reset(ch);
            printf("(conversation reset)\n");
        } else if (!strncmp(cmd, "/system", 7) && (cmd[7] == ' ' || cmd[7] == 0)) {
            free(ch->system);
            if (!(ch->system = strdup(cmd[7] ? cmd + 8 : ""))) cli_die("out of memory");
            cli_chat_reset(ch);
            printf("(system prompt set; conversation reset)\n");
        } else if (!strcmp(cmd, "/stats")) {
            const struct cli_answer *a = &ch->last;
            printf("last answer: prompt %d tokens (%d cached) at %.2f tokens/s, %d tokens generated at %.2f tokens/s\n"
                   "context: %d of %d tokens used, %d earlier turns dropped to fit it\n", a->n_prompt, a->n_cached,
                   cli_prompt_tps(a), a->n_toks, cli_decode_tps(a), a->n_prompt + a->n_toks, ch->max_model_len,
                   ch->n_dropped);
        } else if (cmd[0] == '/' && strchr("abcdefghijklmnopqrstuvwxyz", cmd[1] ? cmd[1] : '!')) {
            printf("unknown command %s (/help lists them)\n", cmd);
        } else {
            cli_chat_turn(ch, cmd, ids);
        }
        fflush(stdout);
        free(line);
    }
}

// One question (-p TEXT, or -f FILE: the file's text as one message): its answer, then the end.
static bool cli_chat_once(struct cli_chat *ch, struct cli_ids *ids) {
    const struct cli *c = ch->c;
    char *text = NULL;
    if (c->prompt_file) {
        size_t len;
        text = cli_read_file(c->prompt_file, CLI_MAX_LINE, &len);
        if (!text) cli_die("out of memory");
        if (strlen(text) != len) cli_die("chat: '%s' holds a NUL byte: not a text", c->prompt_file);
    } else if (!(text = strdup(c->prompt))) {
        cli_die("out of memory");
    }
    if (!*text) cli_die("chat: the question is empty");
    bool ok = cli_chat_turn(ch, text, ids);
    free(text);
    return ok;
}

int cli_cmd_chat(struct cli *c) {
    if (c->tokens) cli_die("chat: a question is text (-p TEXT or -f FILE), not --tokens");
    if (c->prompt && c->prompt_file) cli_die("chat: give one of -p or -f");
    if (c->n_predict_set && c->n_predict == 0) cli_die("chat: -n must be at least 1 (or -1: no limit)");
    if (!c->seed_set) c->sp.seed = cli_random_seed();
    c->ep.enable_prefix_caching = 1;   // the earlier turns' KV blocks are found again
    if (!c->ep.max_num_seqs) c->ep.max_num_seqs = 1;
    cli_block_sigint();
    bool tty = isatty(0) && isatty(1);
    struct cli_chat ch = {0};
    ch.c = c;
    ch.E = cli_engine(c);
    struct llm_engine_info ei;
    llm_get_engine_info(ch.E, &ei);
    ch.max_model_len = ei.max_model_len;
    ch.tmpl = c->chat_template ? c->chat_template : llm_chat_template_detect(ch.E);
    if (!ch.tmpl) {
        ch.tmpl = "chatml";
        fprintf(stderr, "llm: the model file has no chat template this program knows; using chatml "
                        "(choose with --chat-template)\n");
    }
    if (c->system && !(ch.system = strdup(c->system))) cli_die("out of memory");
    struct llm_model_info mi;
    llm_get_model_info(ch.E, &mi);
    if (c->verbose)
        fprintf(stderr, "llm: seed %llu; %s backend (%s), %d threads, context %d tokens (trained %d)\n",
                (unsigned long long)c->sp.seed, ei.backend_name, ei.device_name, ei.n_threads, ei.max_model_len,
                mi.n_ctx_train);
    cli_chat_reset(&ch);
    char *history = NULL;
#ifdef LLM_HAVE_EDITLINE
    if (tty) {
        history = cli_history_path();
        using_history();
        stifle_history(1000);
        if (history) read_history(history);   // none yet, or unreadable: a new history
    }
#endif
    if (tty)
        fprintf(stderr, "chat with %s (%s format, context %d tokens). /help for commands, /quit or Ctrl-D to leave, "
                        "Ctrl-C stops an answer; end a line with \\ to go on on the next.\n",
                mi.name[0] ? mi.name : c->ep.model_path, ch.tmpl, ch.max_model_len);
#ifndef LLM_HAVE_EDITLINE
    if (isatty(0)) fprintf(stderr, "line editing is off: build with libedit (Debian: libedit-dev)\n");
#endif
    struct cli_ids ids = {0};
    int rc = 0;
    if (c->prompt || c->prompt_file) rc = cli_chat_once(&ch, &ids) ? 0 : 1;
    else cli_chat_repl(&ch, tty, history, &ids);
    if (tty) fputc('\n', stderr);
    cli_chat_remove(&ch, 0, ch.n_msg);
    cli_answer_free(&ch.last);
    free(ids.p);
    free(ch.msg);
    free(ch.system);
    free(history);
    llm_engine_free(ch.E);
    return rc;
}
