// Serving: requests, the scheduler, steps

#include "internal.h"

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

// --- requests and the waiting queue ---

struct llm_request_params llm_request_params_default(void) {
    struct llm_request_params p = {0};
    p.sampling = llm_sampling_params_default();
    p.max_tokens = 16;
    p.add_special = 1;
    return p;
}

struct llm__req *llm__req_find(const llm_engine *E, int id) {
    for (int i = 0; i < E->sched.n_reqs; i++) if (E->sched.reqs[i]->id == id) return E->sched.reqs[i];
    return NULL;
}

// Scheduling order: FCFS by arrival, or priority (lower first) then arrival.
static bool llm__req_before(const llm_engine *E, const struct llm__req *a, const struct llm__req *b) {
    if (E->params.scheduling_policy == LLM_SCHED_PRIORITY && a->p.priority != b->p.priority)
        return a->p.priority < b->p.priority;
    return a->arrival < b->arrival;
}

// The waiting requests: a binary min-heap in scheduling order, E->q_wait[0] the first of them
// (r->wait_pos is r's index, -1 when not waiting). A request enters when it is added or
// preempted and leaves when admitted or finished, each in O(log n), so that admitting costs
// the same with any number of waiting requests under either policy (sorting them all on every
// step was quadratic under the priority policy: 20,000 requests took 200 s instead of 4).
static void llm__wait_put(llm_engine *E, int i, struct llm__req *r) {
    E->sched.q_wait[i] = r;
    r->wait_pos = i;
}

// Moves r (at index i) up or down to its place.
static void llm__wait_sift(llm_engine *E, int i, struct llm__req *r) {
    while (i > 0 && llm__req_before(E, r, E->sched.q_wait[(i - 1) / 2])) {
        llm__wait_put(E, i, E->sched.q_wait[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (int c; (c = 2 * i + 1) < E->sched.n_wait; i = c) {
        if (c + 1 < E->sched.n_wait && llm__req_before(E, E->sched.q_wait[c + 1], E->sched.q_wait[c])) c++;
        if (!llm__req_before(E, E->sched.q_wait[c], r)) break;
        llm__wait_put(E, i, E->sched.q_wait[c]);
    }
    llm__wait_put(E, i, r);
}

// Room for it: q_wait has cap_reqs entries, and every waiting request is in E->sched.reqs.
void llm__wait_push(llm_engine *E, struct llm__req *r) {
    assert(E->sched.n_wait < E->sched.cap_reqs);
    llm__wait_sift(E, E->sched.n_wait++, r);
}

void llm__wait_remove(llm_engine *E, struct llm__req *r) {
    int i = r->wait_pos;
    if (i < 0) return;
    r->wait_pos = -1;
    struct llm__req *last = E->sched.q_wait[--E->sched.n_wait];
    if (i < E->sched.n_wait) llm__wait_sift(E, i, last);
}

#define LLM__MAX_LOGPROBS 20   // llm_request_params.logprobs at most

// --- adding requests ---

// It ends: blocks that are full enter the prefix cache, then all of its blocks are freed.
static void llm__req_finish(llm_engine *E, struct llm__req *r, enum llm_finish_reason why) {
    llm__wait_remove(E, r);
    r->finish = why;
    r->state = LLM__REQ_DONE;
    if (!r->t_last) r->t_last = llm__now();
    llm__blocks_commit(&E->blocks, &r->seq, r->tokens);
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->spec.draft) llm__blocks_release(&E->spec.draft->blocks, &r->dseq);
}

// Checks a request before anything is allocated (LLM_ERR_INVALID_ARG, the message in E).
static bool llm__req_params_ok(llm_engine *E, const struct llm_prompt *prompt, const struct llm_request_params *p) {
    struct llm__err *e = &E->err;
    if (E->params.load != LLM_LOAD_ALL)
        return llm__fail(e, LLM_ERR_INVALID_ARG,
                         "the engine has no weights loaded (LLM_LOAD_VOCAB or LLM_LOAD_METADATA)"),
               false;
    if (!prompt || (!prompt->text && (!prompt->tokens || prompt->n_tokens < 1)))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: no prompt"), false;
    if (p->max_tokens < 0 || p->n_stop < 0 || p->n_stop_token_ids < 0 || (p->n_stop && !p->stop) ||
        (p->n_stop_token_ids && !p->stop_token_ids))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: bad parameters"), false;
    if (p->logprobs < 0 || p->logprobs > LLM__MIN(LLM__MAX_LOGPROBS, E->model.n_vocab))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: logprobs must be in [0, %d] (got %d)",
                         LLM__MIN(LLM__MAX_LOGPROBS, E->model.n_vocab), p->logprobs), false;
    if (p->num_speculative_tokens < -1 || p->num_speculative_tokens > LLM__MAX_SPEC)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: num_speculative_tokens must be in [-1, %d] (got %d)",
                         LLM__MAX_SPEC, p->num_speculative_tokens),
               false;
    if (p->n_stop > LLM__MAX_STOP)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "request: %d stop strings: at most %d", p->n_stop, LLM__MAX_STOP),
               false;
    size_t stop_bytes = 0;
    for (int i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0])
            return llm__fail(e, LLM_ERR_INVALID_ARG, "request: stop string %d is empty", i), false;
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
            return llm__fail(e, LLM_ERR_CONTEXT,
                             "request: the prompt's %zu bytes are more than max_model_len (%d) tokens "
                             "can hold (a token of this vocabulary stands for at most %zu bytes)",
                             len, E->max_model_len, k);
        flags = (r->p.add_special >= 0 ? LLM_TOKENIZE_ADD_SPECIAL : 0) |
                (r->p.parse_special > 0 ? LLM_TOKENIZE_PARSE_SPECIAL : 0);
        if ((n = llm__tokenize(&E->vocab, prompt->text, len, flags, NULL, 0, e)) < 0) return e->status;
    } else if (!llm__ids_ok(E, prompt->tokens, n, "request: prompt")) {
        return e->status;
    }
    if (n < 1) return llm__fail(e, LLM_ERR_INVALID_ARG, "request: the prompt has no tokens");
    if (n > E->max_model_len)
        return llm__fail(e, LLM_ERR_CONTEXT, "request: the prompt has %d tokens, more than max_model_len (%d)", n,
                         E->max_model_len);
    int blocks = (n + 1 + E->blocks.block_size - 1) / E->blocks.block_size;   // with its first output token
    if (blocks > E->blocks.n_blocks)
        return llm__fail(e, LLM_ERR_CONTEXT, "request: the prompt needs %d KV blocks, the cache has %d", blocks,
                         E->blocks.n_blocks);
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
        struct llm__req *last = E->sched.n_reqs ? E->sched.reqs[E->sched.n_reqs - 1] : NULL;
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

// r's grammar compiled (the last request's when it has the same text: the choices of one request
// share it), its matcher, and the engine's token trie and scratch rows the first time.
static enum llm_status llm__req_grammar(llm_engine *E, struct llm__req *r, const char *text) {
    struct llm__err *e = &E->err;
    struct llm__req *last = E->sched.n_reqs ? E->sched.reqs[E->sched.n_reqs - 1] : NULL;
    if (last && last->grammar && !strcmp(last->grammar->text, text)) {
        r->grammar = last->grammar;
        r->grammar->refs++;
    } else if (!(r->grammar = llm__grammar_parse(text, NULL, e))) {
        return e->status;
    }
    if (!E->gtrie_built) {
        size_t n = (size_t)E->model.n_vocab;
        if (!E->g_row && !(E->g_row = malloc(n * sizeof(*E->g_row))))
            return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        if (!E->g_mask && !(E->g_mask = malloc((n + 63) / 64 * sizeof(*E->g_mask))))
            return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        if (!llm__gtrie_build(&E->gtrie, &E->vocab)) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        E->gtrie_built = true;
    }
    if (!(r->gm = malloc(sizeof(*r->gm))) || !llm__gmatch_init(r->gm, r->grammar)) {
        free(r->gm);
        r->gm = NULL;
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    return LLM_OK;
}

// Room for one more request in the engine's list, queues and plan; false: out of memory.
static bool llm__reqs_reserve(llm_engine *E) {
    if (E->sched.n_reqs < E->sched.cap_reqs) return true;
    int cap = E->sched.cap_reqs ? 2 * E->sched.cap_reqs : 16;
    struct llm__req **q[3] = {realloc(E->sched.reqs, (size_t)cap * sizeof(*q[0])), NULL, NULL};
    if (q[0]) E->sched.reqs = q[0];
    if ((q[1] = realloc(E->sched.q_run, (size_t)cap * sizeof(*q[1])))) E->sched.q_run = q[1];
    if ((q[2] = realloc(E->sched.q_wait, (size_t)cap * sizeof(*q[2])))) E->sched.q_wait = q[2];
    struct llm__plan_entry *pl = realloc(E->sched.plan, (size_t)cap * sizeof(*pl));
    if (pl) E->sched.plan = pl;
    if (!q[0] || !q[1] || !q[2] || !pl) return false;
    E->sched.cap_reqs = cap;
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
    r->p.grammar = NULL;
    enum llm_status st = llm__req_set_prompt(E, r, prompt);
    if (st == LLM_OK && p.grammar) st = llm__req_grammar(E, r, p.grammar);
    struct llm_sampling_params dp = p.sampling;   // the draft's draws: the same chain, its own random numbers
    dp.seed ^= 0x9E3779B97F4A7C15ull;
    if (st == LLM_OK &&
        (!(r->smp = llm_sampler_create(&p.sampling, E->model.n_vocab)) || !llm__req_copy_stops(E, r, &p) ||
         (E->spec.draft && !(r->dsmp = llm_sampler_create(&dp, E->model.n_vocab))) || !llm__reqs_reserve(E)))
        st = llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");   // the parameters were checked above
    if (st != LLM_OK) {
        llm__req_free(E, r);
        return -1;
    }
    for (int i = 0; i < r->n_prompt; i++) llm_sampler_accept(r->smp, r->tokens[i]);
    r->id = E->sched.next_id++;
    r->arrival = E->sched.n_arrivals++;
    r->t_arrival = llm__now();
    r->state = LLM__REQ_WAITING;
    E->sched.reqs[E->sched.n_reqs++] = r;
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
    for (int i = 0; i < E->sched.n_reqs; i++) if (!E->sched.reqs[i]->reported_done) return 1;
    return 0;
}

// Frees a running request's blocks; it waits to be computed again from its first token.
// A running request back to waiting, its blocks freed: computed again from its first token.
static void llm__req_requeue(llm_engine *E, struct llm__req *r) {
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->spec.draft) llm__blocks_release(&E->spec.draft->blocks, &r->dseq);
    r->n_computed = 0;
    r->state = LLM__REQ_WAITING;
    llm__wait_push(E, r);
}

static void llm__req_preempt(llm_engine *E, struct llm__req *r) {
    llm__req_requeue(E, r);
    r->n_preempt++;
    E->sched.n_preemptions++;
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
    bool g_end = r->gm && llm__gmatch_must_end(r->gm);   // the grammar's text is complete
    size_t hold = 0;
    llm__req_text(r, &E->vocab, tok, !stop_tok, stop_tok || at_len || g_end);
    bool stop_str = r->p.n_stop && llm__req_stop_string(r, &hold);
    r->text_hold = stop_str || stop_tok || at_len || g_end ? 0 : hold;
    if (stop_tok || stop_str || g_end) llm__req_finish(E, r, LLM_FINISH_STOP);
    else if (at_len) llm__req_finish(E, r, at_max ? LLM_FINISH_LENGTH : LLM_FINISH_CONTEXT);
}

// The logit row r was to sample from is not finite (NaN or infinity: the model's weights or
// activations overflow, e.g. a damaged file). Computing on would give garbage tokens: r ends with
// LLM_FINISH_ERROR and a message (also the engine's error, llm_last_error), once. Its blocks are
// freed without entering the prefix cache.
static void llm__req_fail(llm_engine *E, struct llm__req *r) {
    free(r->error);
    r->error = llm__strndup(E->err.msg, strlen(E->err.msg));
    llm__stream_feed(&r->ts, "", 0, &r->text, true);   // what was held back is final
    r->text_hold = 0;
    r->finish = LLM_FINISH_ERROR;
    r->state = LLM__REQ_DONE;
    r->t_last = llm__now();
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->spec.draft) llm__blocks_release(&E->spec.draft->blocks, &r->dseq);
}

static void llm__req_fail_nonfinite(llm_engine *E, struct llm__req *r) {
    llm__fail(&E->err, LLM_ERR_BACKEND, "request %d: the model computed logits that are not finite (NaN or "
              "infinity) after %d tokens: its weights or activations overflow (a damaged or badly converted "
              "model file?)", r->id, r->n_tokens);
    llm__req_fail(E, r);
}

// r's grammar lets no token continue its text, or its matcher failed (out of memory, beyond its
// limits): r ends with LLM_FINISH_ERROR and the matcher's message.
static void llm__req_fail_grammar(llm_engine *E, struct llm__req *r) {
    llm__fail(&E->err, r->gm->err.status != LLM_OK ? r->gm->err.status : LLM_ERR_INVALID_ARG, "request %d: %s", r->id,
              r->gm->err.status != LLM_OK ? r->gm->err.msg : "grammar: the token does not continue the text");
    llm__req_fail(E, r);
}

// The next token of r from its logit row: its sampler's, under its grammar when it has one; -1:
// the grammar lets no token continue (r has ended with LLM_FINISH_ERROR).
static int32_t llm__req_sample(llm_engine *E, struct llm__req *r, const float *lg) {
    if (!r->gm) return llm_sampler_sample(r->smp, lg);
    int32_t tok = llm__grammar_sample(r->smp, r->gm, &E->gtrie, lg, E->g_mask, E->g_row);
    if (tok < 0) llm__req_fail_grammar(E, r);
    return tok;
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
    if (r->gm && !llm__gmatch_token(r->gm, &E->gtrie, tok)) {
        llm__req_fail_grammar(E, r);
        return;
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

// The running requests in scheduling order. E->sched.reqs is in order of arrival (requests are appended
// as they come, and leave without reordering), so FCFS needs no sorting; under the priority policy
// they are sorted (at most max_num_seqs of them). Returns how many.
static int llm__queue_running(const llm_engine *E, struct llm__req **q) {
    int n = 0;
    for (int i = 0; i < E->sched.n_reqs; i++)
        if (E->sched.reqs[i]->state == LLM__REQ_RUNNING) q[n++] = E->sched.reqs[i];
    if (E->params.scheduling_policy == LLM_SCHED_PRIORITY) qsort(q, (size_t)n, sizeof(*q), llm__req_cmp_priority);
    return n;
}

// Requests reported as finished in the previous step leave (their outputs pointed into them).
static void llm__reqs_reap(llm_engine *E) {
    int w = 0;
    for (int i = 0; i < E->sched.n_reqs; i++) {
        struct llm__req *r = E->sched.reqs[i];
        if (r->state == LLM__REQ_DONE && r->reported_done) llm__req_free(E, r);
        else E->sched.reqs[w++] = r;
    }
    E->sched.n_reqs = w;
}

// r computes its next n tokens in this step (its blocks hold them).
static void llm__plan_add(struct llm__plan *plan, struct llm__req *r, int n) {
    struct llm__plan_entry *pe = &plan->e[plan->n++];
    *pe = (struct llm__plan_entry){r, &r->seq, r->tokens + r->n_computed, r->n_computed, n, 0, 0};
    pe->n_logits = r->n_computed + n == r->n_tokens;   // its last token is computed: the next one is sampled
    plan->n_tokens += n;
    plan->n_logits += pe->n_logits;
}

// --- prepare and execute ---

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
        const float *q =
            r->spec_q >= 0 ? E->spec.q + ((size_t)r->spec_q * (size_t)E->params.num_speculative_tokens + (size_t)j) * nv
                           : NULL;
        int32_t tok;
        if (j == k) tok = llm__req_sample(E, r, lg);
        else if (!r->gm) tok = llm__sampler_verify(r->smp, lg, draft[j], q, &accepted);
        else if (!(r->p.sampling.temperature > 0.0f)) accepted = (tok = llm__req_sample(E, r, lg)) == draft[j];
        else if (llm__grammar_row(r->gm, &E->gtrie, lg, (int)nv, E->g_mask, E->g_row))   // verified on the masked row
            tok = llm__sampler_verify(r->smp, E->g_row, draft[j], q, &accepted);
        else {
            tok = -1;
            llm__req_fail_grammar(E, r);
        }
        if (tok < 0) break;
        if (j < k) E->spec.proposed[j]++;
        if (accepted) { E->spec.accepted[j]++; kept++; r->seq.len = ++r->n_computed; }   // its KV is the token's
        llm__req_append(E, r, tok, lg, now);
        emitted++;
        if (!accepted || r->state != LLM__REQ_RUNNING) break;
    }
    E->spec.verifications++;
    E->spec.emitted += emitted;
    r->spec_kept = 0.8 * r->spec_kept + kept;   // recent verifications weigh most
    r->spec_missed = 0.8 * r->spec_missed + (kept < k);
    if (r->state == LLM__REQ_RUNNING) {   // the cache holds the last token and the kept drafts
        llm__blocks_truncate(&E->blocks, &r->seq, pe->start + 1 + kept);   // (the blocks of the others go)
        r->n_computed = r->seq.len;
        if (E->spec.draft && r->dseq.len > r->seq.len)
            llm__blocks_truncate(&E->spec.draft->blocks, &r->dseq, r->seq.len);
    }
}

// After the forward pass: the planned tokens are in the cache; a request whose last token was
// computed samples the next one from its row. Full blocks enter the prefix cache after the
// tokens are settled (with speculative decoding: after the rejected drafts were rolled back).
static void llm__postprocess(llm_engine *E, const struct llm__plan *plan, const float *logits) {
    double t0 = llm__now();
    const size_t nv = (size_t)E->model.n_vocab;
    size_t row = 0;
    E->sched.n_steps++;
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
            int32_t tok = llm__all_finite(lg, nv) ? llm__req_sample(E, r, lg) : -2;
            if (tok >= 0) llm__req_append(E, r, tok, lg, llm__now());
            else if (tok == -2) llm__req_fail_nonfinite(E, r);
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
    *text_off = E->sched.arena.n;
    if (shown > r->text_sent) llm__outbuf_put(&E->sched.arena, r->text.p + r->text_sent, shown - r->text_sent);
    llm__outbuf_put(&E->sched.arena, "", 1);
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
    if (n_outs > E->sched.cap_outs) {
        int cap = LLM__MAX(n_outs, 2 * E->sched.cap_outs);
        struct llm_output *q = realloc(E->sched.outs, (size_t)cap * sizeof(*q));
        if (q) E->sched.outs = q;
        size_t *f = realloc(E->sched.out_off, (size_t)cap * sizeof(size_t));
        if (f) E->sched.out_off = f;
        if (!q || !f) return false;
        E->sched.cap_outs = cap;
    }
    E->sched.arena.n = 0;
    E->sched.arena.fail = false;
    if (text > E->sched.arena.cap) {
        char *p = realloc(E->sched.arena.p, text);
        if (!p) return false;
        E->sched.arena.p = p;
        E->sched.arena.cap = text;
    }
    return true;
}

static int llm__collect(llm_engine *E, const struct llm_output **outputs) {
    int n_outs = 0;
    size_t text = 0;
    *outputs = E->sched.outs;
    for (int i = 0; i < E->sched.n_reqs; i++) {
        const struct llm__req *r = E->sched.reqs[i];
        if (!llm__req_has_news(r)) continue;
        n_outs++;
        size_t shown = r->text.n - r->text_hold;
        text += (shown > r->text_sent ? shown - r->text_sent : 0) + 1;
    }
    if (!llm__collect_reserve(E, n_outs, text)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1;
    *outputs = E->sched.outs;
    n_outs = 0;
    for (int i = 0; i < E->sched.n_reqs; i++)
        if (llm__req_has_news(E->sched.reqs[i])) {
            llm__output_fill(E, E->sched.reqs[i], &E->sched.outs[n_outs], &E->sched.out_off[n_outs]);
            n_outs++;
        }
    for (int i = 0; i < n_outs; i++)
        E->sched.outs[i].new_text = E->sched.arena.p + E->sched.out_off[i];   // the arena has stopped moving
    return n_outs;
}

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
        E->sched.prefix_query_tokens += r->n_prompt;
        E->sched.prefix_hit_tokens += hit;
        r->n_cached = hit;
    }
    r->admitted_once = true;
    r->n_computed = hit;
    llm__wait_remove(E, r);
    r->state = LLM__REQ_RUNNING;
    llm__plan_add(plan, r, n);
    return 1;
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
    if (E->sched.n_steps % 16 == 15 && !E->spec.always) return;
    for (int i = 0; i < plan->n; i++) {
        struct llm__req *r = plan->e[i].r;
        if (!r) continue;
        r->spec_q = -1;
        // a request's acceptance estimate drifts back to its prior while it does not speculate, so
        // that one which stopped (its drafts were rejected) tries again later
        r->spec_kept *= 0.95;
        r->spec_missed *= 0.95;
    }
    if (E->spec.draft) {
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
        int k =
            E->spec.always || E->sched.n_steps % 64 == 31 ? m : llm__spec_choose(E, G, plan->n_tokens, a, m, &k_gain);
        if (k == 0 || !llm__blocks_can_allocate_free(&E->blocks, &r->seq, 1 + k))
            continue;   // drafts never preempt nor evict
        if (!llm__blocks_allocate(&E->blocks, &r->seq, 1 + k)) continue;
        G += k_gain;
        llm__plan_add_drafts(plan, pe, k);
    }
}

// 1. The running requests, in order: the next token of each (or the next chunk of its prompt).
static enum llm_status llm__schedule_running(llm_engine *E, struct llm__plan *plan) {
    int n_run = llm__queue_running(E, E->sched.q_run);
    const int max = E->params.max_num_batched_tokens;
    for (int i = 0; i < n_run && plan->n_tokens < max; i++) {
        struct llm__req *r = E->sched.q_run[i];
        if (r->state != LLM__REQ_RUNNING) continue;   // preempted for an earlier one
        int n = LLM__MIN(r->n_tokens - r->n_computed, max - plan->n_tokens);
        if (!llm__sched_make_room(E, plan, r, n, E->sched.q_run, n_run)) continue;
        if (!llm__blocks_allocate(&E->blocks, &r->seq, n)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
        llm__plan_add(plan, r, n);
    }
    return LLM_OK;
}

// 2. Waiting requests (preempted ones included), in order, while the budget and max_num_seqs
// allow; the first that does not fit stops admission (no request overtakes it). An admitted
// request leaves the heap, so the next one is at its top.
static enum llm_status llm__schedule_waiting(llm_engine *E, struct llm__plan *plan) {
    int n_running = 0;
    for (int i = 0; i < E->sched.n_reqs; i++) n_running += E->sched.reqs[i]->state == LLM__REQ_RUNNING;
    while (E->sched.n_wait > 0 && plan->n_tokens < E->params.max_num_batched_tokens &&
           n_running < E->params.max_num_seqs) {
        int a = llm__sched_admit(E, plan, E->sched.q_wait[0], n_running);
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
    *plan = (struct llm__plan){.e = E->sched.plan};
    if ((st = llm__schedule_running(E, plan))) return st;
    if (!plan->n_preempted && (st = llm__schedule_waiting(E, plan))) return st;
    llm__schedule_drafts(E, plan);
    return LLM_OK;
}

// schedule -> prepare -> execute -> postprocess -> collect (a step with an empty plan only collects).
int llm_step(llm_engine *E, const struct llm_output **outputs) {
    struct llm__plan plan;
    struct llm__step step;
    double t0 = llm__now();
    *outputs = E->sched.outs;
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
        if (E->spec.t_step_warm[plan.n_tokens]) llm__time_update(&E->spec.t_step[plan.n_tokens], t_done - t_exec);
        E->spec.t_step_warm[plan.n_tokens] = true;
    }
    if (plan.n_drafts > 0) E->spec.verify_seconds += t_done - t_exec;
    if (plan.n > 0) E->spec.t_busy += t_done - t0;
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
    for (int i = 0; i < E->sched.n_reqs; i++) {
        const struct llm__req *r = E->sched.reqs[i];
        if (r->state == LLM__REQ_RUNNING) {
            s->n_running++;
            s->kv_tokens_stored += r->seq.len;
            blocks += r->seq.n_blocks;
        } else if (r->state == LLM__REQ_WAITING)
            s->n_waiting++;
    }
    s->kv_utilization = blocks ? (double)s->kv_tokens_stored / ((double)blocks * bm->block_size) : 0.0;
    s->prefix_query_tokens = E->sched.prefix_query_tokens;
    s->prefix_hit_tokens = E->sched.prefix_hit_tokens;
    s->n_preemptions = E->sched.n_preemptions;
    s->n_steps = E->sched.n_steps;
    memcpy(s->spec_proposed, E->spec.proposed, sizeof(s->spec_proposed));
    memcpy(s->spec_accepted, E->spec.accepted, sizeof(s->spec_accepted));
    s->spec_verifications = E->spec.verifications;
    s->spec_emitted = E->spec.emitted;
    s->spec_draft_seconds = E->spec.draft_seconds;
    s->spec_verify_seconds = E->spec.verify_seconds;
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
    if (r->finish == LLM_FINISH_ERROR && !(x->error = r->error ? llm__strndup(r->error, strlen(r->error))
                                                               : llm__strndup(E->err.msg, strlen(E->err.msg))))
        return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    x->ttft_ms = out->ttft_ms;
    x->e2e_ms = out->e2e_ms;
    x->n_cached_tokens = r->n_cached;
    x->n_preemptions = r->n_preempt;
    return LLM_OK;
}

enum llm_status llm_generate(llm_engine *E, const struct llm_prompt *prompts, int n,
                             const struct llm_request_params *params, struct llm_result *res) {
    if (n < 0 || (n > 0 && (!prompts || !res)))
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "generate: bad arguments");
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

// The memory of serving: the block manager over the KV cache's blocks, the arrays of one step.
enum llm_status llm__serving_init(llm_engine *E, struct llm__err *e) {
    enum llm_status st = llm__blocks_init(&E->blocks, E->kv.n_blocks, E->kv.block_size,
                                          E->params.enable_prefix_caching != 0, e);
    if (st) return st;
    size_t T = (size_t)E->acts.max_tokens;
    E->step_logits = malloc((size_t)E->acts.max_out * (size_t)E->model.n_vocab * sizeof(float));
    if (E->params.speculative_model && !(E->spec.de = calloc(2 * LLM__SPEC_REQS, sizeof(*E->spec.de))))
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
void llm__serving_free(llm_engine *E) {
    for (int i = 0; i < E->sched.n_reqs; i++) llm__req_free(E, E->sched.reqs[i]);
    free(E->spec.de);
    for (int i = 0; i < E->n_seqs; i++) if (E->seqs[i].used) llm__blocks_release(&E->blocks, &E->seqs[i]);
    free(E->sched.reqs);
    free(E->sched.q_run);
    free(E->sched.q_wait);
    free(E->sched.plan);
    free(E->seqs);
    free(E->sched.outs);
    free(E->sched.out_off);
    free(E->sched.arena.p);
    free(E->step_logits);
    llm__gtrie_free(&E->gtrie);
    free(E->g_row);
    free(E->g_mask);
    free(E->st_tokens);
    free(E->st_pos);
    free(E->st_seq);
    free(E->st_slot);
    free(E->st_out);
    free(E->st_tables);
    llm__blocks_free(&E->blocks);
}

// Every id that enters a sequence (prompt tokens, tokenizer output, llm_seq_eval's tokens, stop
// token ids) is checked against the vocabulary first: an id out of range would index the
// embedding table outside its rows. The first bad id is the error (LLM_ERR_INVALID_ARG).
bool llm__ids_ok(llm_engine *E, const int32_t *ids, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= E->model.n_vocab)
            return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "%s: token id %d (at %d) is out of range [0, %d)", what,
                             (int)ids[i], i, E->model.n_vocab), false;
    return true;
}

void llm__req_free(llm_engine *E, struct llm__req *r) {
    if (!r) return;
    llm__blocks_release(&E->blocks, &r->seq);
    if (E->spec.draft) llm__blocks_release(&E->spec.draft->blocks, &r->dseq);
    llm_sampler_free(r->smp);
    llm_sampler_free(r->dsmp);
    if (r->stops && --r->stops->refs == 0) {
        llm__stops_free(r->stops);
        free(r->stops);
    }
    if (r->gm) {
        llm__gmatch_free(r->gm);
        free(r->gm);
    }
    if (r->grammar && --r->grammar->refs == 0) llm__grammar_free(r->grammar);
    free(r->stop_ids);
    free(r->tokens);
    free(r->logprobs);
    free(r->token_logprobs);
    free(r->itl);
    free(r->text.p);
    free(r->error);
    free(r);
}
