// run.c — llm run (one prompt, the text streamed) and llm chat (a conversation kept in one
// sequence: each turn evaluates only its new text).
#include "cli.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef LLM_HAVE_EDITLINE
#include <editline/readline.h>
#endif

// --- generation: sample, stream the text, stop ---

// The earliest of n stop strings in text[from - longest + 1 .. n) (its offset, or -1); *hold:
// the length of the longest end of the text that could still become a stop string (not to be
// shown yet).
static long cli_find_stop(const char *const *stops, int n_stops, const char *text, size_t n, size_t from,
                          size_t *hold) {
    long best = -1;
    *hold = 0;
    for (int i = 0; i < n_stops; i++) {
        size_t m = strlen(stops[i]), start = from > m ? from - m : 0;
        for (size_t at = start; at + m <= n && (best < 0 || at < (size_t)best); at++)
            if (memcmp(text + at, stops[i], m) == 0) { best = (long)at; break; }
        for (size_t k = CLI_MIN(m - 1, n); k > *hold; k--)
            if (memcmp(text + n - k, stops[i], k) == 0) { *hold = k; break; }
    }
    return best;
}

// A SIGINT that arrived while it was blocked (chat blocks it during answers; nothing else
// needs a handler or a global flag): consumes it and says so.
static bool cli_sigint_taken(void) {
    sigset_t pending, one;
    if (sigpending(&pending) != 0 || !sigismember(&pending, SIGINT)) return false;
    sigemptyset(&one);
    sigaddset(&one, SIGINT);
    int sig;
    sigwait(&one, &sig);
    return true;
}

struct cli_gen {
    int32_t *toks;
    int n, cap;
    struct cli_strbuf text;        // what was generated, a stop string cut off
    const char *finish;            // "stop", "length", "context", "interrupted"
    int n_decode;
    double t_decode;
    struct llm_logprob *lp;        // [cap x k] when k > 0
    int k;
};

static void cli_gen_free(struct cli_gen *g) {
    free(g->toks);
    free(g->text.p);
    free(g->lp);
    memset(g, 0, sizeof(*g));
}

// Generates from logits (those of the sequence's last token) until an end-of-generation token
// (when stop_eog), a stop token or string, n_max tokens (-1: no limit), a full context or
// Ctrl-C (when interruptible). Streams the text to out unless NULL. With eval_last, a token
// that ends the generation by length is evaluated too, so the sequence holds the whole answer.
static void cli_generate(llm_engine *E, int seq, llm_sampler *smp, float *logits, const struct cli *c, int n_max,
                         bool stop_eog, bool interruptible, bool eval_last, FILE *out, struct cli_gen *g) {
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    struct llm_text_stream ts;
    llm_text_stream_reset(&ts);
    size_t shown = 0, cap_piece = 256;
    char *piece = malloc(cap_piece);
    if (!piece) cli_die("out of memory");
    g->finish = "length";
    bool done = false;
    for (int i = 0; !done && (n_max < 0 || i < n_max); i++) {
        if (interruptible && cli_sigint_taken()) { g->finish = "interrupted"; break; }
        if (g->n == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 64;
            g->toks = realloc(g->toks, (size_t)g->cap * sizeof(int32_t));
            if (g->k) g->lp = realloc(g->lp, (size_t)g->cap * (size_t)g->k * sizeof(*g->lp));
            if (!g->toks || (g->k && !g->lp)) cli_die("out of memory");
        }
        if (g->k) llm_top_logprobs(logits, mi.n_vocab, g->k, g->lp + (size_t)g->n * (size_t)g->k);
        int32_t tok = llm_sampler_sample(smp, logits);
        g->toks[g->n++] = tok;
        bool stop_tok = stop_eog && llm_token_is_eog(E, tok);
        for (int j = 0; j < c->n_stop_ids; j++) stop_tok |= tok == c->stop_ids[j];
        if (stop_tok) { g->finish = "stop"; break; }
        int r;
        while ((r = llm_text_stream_push(E, &ts, tok, 0, piece, cap_piece)) >= 0 && (size_t)r >= cap_piece) {
            cap_piece = (size_t)r + 1;   // it did not fit: nothing was consumed
            if (!(piece = realloc(piece, cap_piece))) cli_die("out of memory");
        }
        if (r < 0) cli_die("%s", llm_last_error(E));
        size_t before = g->text.n, hold = 0;
        if (r > 0) cli_sb_put(&g->text, piece, (size_t)r);
        long at = cli_find_stop(c->stops, c->n_stops, g->text.p ? g->text.p : "", g->text.n, before, &hold);
        if (at >= 0) { g->text.n = (size_t)at; g->text.p[at] = 0; hold = 0; g->finish = "stop"; done = true; }
        if (out && g->text.n - hold > shown) {
            fwrite(g->text.p + shown, 1, g->text.n - hold - shown, out);
            fflush(out);
            shown = g->text.n - hold;
        }
        if (done || (n_max >= 0 && i + 1 == n_max && !eval_last)) break;
        double t1 = cli_now();
        enum llm_status st = llm_seq_eval(E, seq, &tok, 1, logits, 0);
        g->t_decode += cli_now() - t1;
        if (st) {
            if (out) fflush(out);
            fprintf(stderr, "\nllm: generation stopped: %s\n", llm_last_error(E));
            g->finish = "context";
            break;
        }
        g->n_decode++;
    }
    if (strcmp(g->finish, "stop") != 0 || g->text.n == shown) {   // the end of the stream
        int r = llm_text_stream_flush(&ts, piece, cap_piece);
        if (r > 0) cli_sb_put(&g->text, piece, (size_t)r);
    }
    if (out && g->text.n > shown) fwrite(g->text.p + shown, 1, g->text.n - shown, out);
    if (out) fflush(out);
    free(piece);
}

int cli_cmd_run(struct cli *c) {
    int n_prompt = 0;
    if (!!c->prompt + !!c->prompt_file + !!c->tokens != 1) cli_die("run: give exactly one of -p, -f or --tokens");
    if (c->logprobs && !c->json) cli_die("--logprobs needs --json");
    if (c->n_predict < 0) c->n_predict = 1 << 24;
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    int32_t *prompt = cli_prompt(E, c, &n_prompt);
    if (n_prompt == 0) cli_die("run: the prompt is empty (no tokens)");
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= mi.n_vocab) cli_die("--tokens: id %d is out of range (vocabulary of %d)", prompt[i], mi.n_vocab);
    float *logits = malloc((size_t)mi.n_vocab * sizeof(float));
    llm_sampler *smp = llm_sampler_create(&c->sp, mi.n_vocab);
    if (!logits || !smp) cli_die("out of memory");
    for (int i = 0; i < n_prompt; i++) llm_sampler_accept(smp, prompt[i]);
    int seq = llm_seq_new(E);
    double t0 = cli_now();
    if (llm_seq_eval(E, seq, prompt, n_prompt, logits, 0)) cli_die("%s", llm_last_error(E));
    double t_prompt = cli_now() - t0;
    struct cli_gen g = {0};
    g.k = c->logprobs;
    if (c->n_predict > 0)
        cli_generate(E, seq, smp, logits, c, c->n_predict, !c->ignore_eos, false, false, c->json ? NULL : stdout, &g);
    double prompt_tps = n_prompt / (t_prompt > 0 ? t_prompt : 1e-9);
    double decode_tps = g.n_decode ? g.n_decode / (g.t_decode > 0 ? g.t_decode : 1e-9) : 0.0;
    if (c->json) {
        printf("{\"prompt_tokens\":[");
        for (int i = 0; i < n_prompt; i++) printf("%s%d", i ? "," : "", prompt[i]);
        printf("],\"tokens\":[");
        for (int i = 0; i < g.n; i++) printf("%s%d", i ? "," : "", g.toks[i]);
        printf("],\"text\":");
        cli_json_str(stdout, g.text.p ? g.text.p : "", g.text.n);
        printf(",\"finish_reason\":\"%s\",\"prompt_tps\":%.3f,\"decode_tps\":%.3f", g.finish ? g.finish : "length",
               prompt_tps, decode_tps);
        if (g.k) {
            printf(",\"logprobs\":[");
            for (int i = 0; i < g.n; i++) {
                printf("%s[", i ? "," : "");
                for (int k = 0; k < g.k; k++) {
                    const struct llm_logprob *x = &g.lp[(size_t)i * (size_t)g.k + (size_t)k];
                    printf("%s{\"id\":%d,\"logprob\":%.6f}", k ? "," : "", x->id, (double)x->logprob);
                }
                printf("]");
            }
            printf("]");
        }
        printf("}\n");
    } else {
        printf("\n");
    }
    fprintf(stderr, "prompt: %d tokens, %.2f tokens/s | decode: %d tokens, %.2f tokens/s\n", n_prompt, prompt_tps,
            g.n_decode, decode_tps);
    cli_gen_free(&g);
    free(logits);
    free(prompt);
    llm_sampler_free(smp);
    llm_engine_free(E);
    return 0;
}


// --- llm chat ---

struct cli_chat {
    llm_engine *E;
    const char *tmpl;
    struct llm_chat_message *msg;   // the conversation (strings owned)
    int n_msg, cap_msg;
    char *system;
    int seq, max_model_len;
    int n_prompt_last, n_gen_last;
    double prompt_tps_last, decode_tps_last;
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

static void cli_chat_reset(struct cli_chat *ch) {
    for (int i = 0; i < ch->n_msg; i++) free((char *)ch->msg[i].content);
    ch->n_msg = 0;
    if (ch->seq >= 0) llm_seq_free(ch->E, ch->seq);
    ch->seq = llm_seq_new(ch->E);
    if (ch->seq < 0) cli_die("%s", llm_last_error(ch->E));
    if (ch->system && *ch->system) cli_chat_add(ch, "system", ch->system);
}

static char *cli_chat_render(const struct cli_chat *ch, int add_assistant) {
    int n = llm_chat_apply(ch->tmpl, ch->msg, ch->n_msg, add_assistant, NULL, 0);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || llm_chat_apply(ch->tmpl, ch->msg, ch->n_msg, add_assistant, s, (size_t)n + 1) != n) cli_die("chat template failed");
    return s;
}

// The text that goes into the sequence for a new user message: the whole conversation the first
// time; later only what follows the last answer (which the sequence already holds). That is
// found by rendering the conversation with a marker in place of the last answer.
static char *cli_chat_delta(struct cli_chat *ch, bool *first) {
    static const char marker[] = "\x01\x02llm-answer\x02\x01";
    int last = ch->n_msg - 2;   // the answer before the new user message
    *first = llm_seq_len(ch->E, ch->seq) == 0 || last < 0 || strcmp(ch->msg[last].role, "assistant") != 0;
    if (*first) return cli_chat_render(ch, 1);
    const char *answer = ch->msg[last].content;
    ch->msg[last].content = marker;
    char *full = cli_chat_render(ch, 1);
    ch->msg[last].content = answer;
    char *at = strstr(full, marker);
    if (!at) cli_die("chat template lost the answer");
    char *delta = strdup(at + strlen(marker));
    free(full);
    if (!delta) cli_die("out of memory");
    return delta;
}

// A line of input without its end; NULL at the end of input. SIGINT is let through while
// waiting, so Ctrl-C there quits.
static char *cli_read_line(bool tty, const char *prompt) {
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &ss, NULL);
    char *line = NULL;
#ifdef LLM_HAVE_EDITLINE
    if (tty) {
        line = readline(prompt);
        if (line && *line) add_history(line);
    } else
#endif
    {
        if (tty) { fputs(prompt, stdout); fflush(stdout); }
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) { free(line); line = NULL; }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    }
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    return line;
}

int cli_cmd_chat(struct cli *c) {
    if (c->prompt || c->prompt_file || c->tokens) cli_die("chat: the conversation comes from the terminal or stdin, not -p/-f/--tokens");
    sigset_t ss;   // SIGINT stays blocked in every thread; answers poll for it
    sigemptyset(&ss);
    sigaddset(&ss, SIGINT);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    bool tty = isatty(0) && isatty(1);
    struct cli_chat ch = {0};
    ch.E = cli_engine(c);
    ch.seq = -1;
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
    float *logits = malloc((size_t)mi.n_vocab * sizeof(float));
    llm_sampler *smp = llm_sampler_create(&c->sp, mi.n_vocab);
    if (!logits || !smp) cli_die("out of memory");
    cli_chat_reset(&ch);
    if (tty)
        fprintf(stderr, "chat with %s (%s format, context %d tokens). /help for commands, /quit or Ctrl-D to leave, "
                        "Ctrl-C stops an answer.\n", mi.name[0] ? mi.name : c->ep.model_path, ch.tmpl, ch.max_model_len);
    char *line;
    while ((line = cli_read_line(tty, "> ")) != NULL) {
        char *cmd = line;
        if (!strcmp(cmd, "/quit") || !strcmp(cmd, "/exit")) { free(line); break; }
        if (!*cmd) { free(line); continue; }
        if (!strcmp(cmd, "/help")) {
            printf("/reset         forget the conversation\n/system TEXT   set the system prompt (and reset)\n"
                   "/stats         speed of the last answer, context used\n/quit          leave\n");
        } else if (!strcmp(cmd, "/reset")) {
            cli_chat_reset(&ch);
            llm_sampler_reset(smp);
            printf("(conversation reset)\n");
        } else if (!strncmp(cmd, "/system", 7) && (cmd[7] == ' ' || cmd[7] == 0)) {
            free(ch.system);
            if (!(ch.system = strdup(cmd[7] ? cmd + 8 : ""))) cli_die("out of memory");
            cli_chat_reset(&ch);
            llm_sampler_reset(smp);
            printf("(system prompt set; conversation reset)\n");
        } else if (!strcmp(cmd, "/stats")) {
            printf("last answer: prompt %d tokens at %.2f tokens/s, %d tokens generated at %.2f tokens/s\n"
                   "context: %d of %d tokens used\n", ch.n_prompt_last, ch.prompt_tps_last, ch.n_gen_last,
                   ch.decode_tps_last, llm_seq_len(ch.E, ch.seq), ch.max_model_len);
        } else if (cmd[0] == '/' && strchr("abcdefghijklmnopqrstuvwxyz", cmd[1] ? cmd[1] : '!')) {
            printf("unknown command %s (/help lists them)\n", cmd);
        } else {
            cli_chat_add(&ch, "user", cmd);
            bool first;
            char *delta = cli_chat_delta(&ch, &first);
            int flags = LLM_TOKENIZE_PARSE_SPECIAL | (first ? LLM_TOKENIZE_ADD_SPECIAL : 0);
            int n = llm_tokenize(ch.E, delta, strlen(delta), flags, NULL, 0);
            int32_t *ids = n > 0 ? malloc((size_t)n * sizeof(int32_t)) : NULL;
            if (n > 0 && ids) llm_tokenize(ch.E, delta, strlen(delta), flags, ids, n);
            free(delta);
            double t0 = cli_now();
            if (n <= 0 || !ids || llm_seq_eval(ch.E, ch.seq, ids, n, logits, 0) != LLM_OK) {
                printf("(%s: /reset to start a new conversation)\n", n <= 0 ? "nothing to say" : llm_last_error(ch.E));
                free((char *)ch.msg[--ch.n_msg].content);
                free(ids);
                free(line);
                continue;
            }
            double t_prompt = cli_now() - t0;
            for (int i = 0; i < n; i++) llm_sampler_accept(smp, ids[i]);
            free(ids);
            struct cli_gen g = {0};
            cli_generate(ch.E, ch.seq, smp, logits, c, c->n_predict_set ? c->n_predict : -1, !c->ignore_eos, true, true, stdout, &g);
            if (!strcmp(g.finish, "interrupted")) printf(" [stopped]");
            printf("\n");
            fflush(stdout);
            cli_chat_add(&ch, "assistant", g.text.p ? g.text.p : "");
            ch.n_prompt_last = n;
            ch.prompt_tps_last = n / (t_prompt > 0 ? t_prompt : 1e-9);
            ch.n_gen_last = g.n;
            ch.decode_tps_last = g.n_decode ? g.n_decode / (g.t_decode > 0 ? g.t_decode : 1e-9) : 0.0;
            if (!strcmp(g.finish, "context")) printf("(the context is full: /reset to start a new conversation)\n");
            cli_gen_free(&g);
        }
        fflush(stdout);
        free(line);
    }
    if (tty) fputc('\n', stderr);
    for (int i = 0; i < ch.n_msg; i++) free((char *)ch.msg[i].content);
    free(ch.msg);
    free(ch.system);
    free(logits);
    llm_sampler_free(smp);
    llm_engine_free(ch.E);
    return 0;
}
