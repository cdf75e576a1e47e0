// Steps: a plan turned into the step arrays of the model and run; requests' token buffers

#include "internal.h"

// Room for cap tokens, and the log-probabilities of the output ones when they are asked for.
bool llm__req_reserve_tokens(struct llm__req *r, int cap) {
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

// The step's arrays from the plan: for every computed token its id, position, sequence index and
// KV slot; every sequence's block table (one row of max_blocks columns each); the rows whose
// logits are wanted. The step's pointers point into E's arrays until the next step.
enum llm_status llm__prepare(llm_engine *E, const struct llm__plan *plan, struct llm__step *step) {
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
        memcpy(E->st_tables + (size_t)k * (size_t)max_blocks, pe->seq->blocks,
               (size_t)pe->seq->n_blocks * sizeof(int32_t));
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
enum llm_status llm__execute(llm_engine *E, const struct llm__step *step, float *logits) {
    if (E->prof) E->prof->steps++;
    return llm__forward(&E->model, &E->be, &E->acts, E->kv.k_layer, E->kv.v_layer, step, logits, E->prof, &E->err);
}

// One chunk of llm_seq_eval: n tokens of a sequence whose blocks hold them, as a step of one
// sequence; the rows of its last n_logits tokens go to logits.
enum llm_status llm__seq_eval_chunk(llm_engine *E, struct llm__seq *s, const int32_t *tokens, int n,
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
