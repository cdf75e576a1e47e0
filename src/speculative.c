// Speculative decoding: n-gram drafts and draft models

#include "internal.h"

// --- speculative decoding: n-gram drafts ---
//
// A decoding request (one token to compute: the one it sampled last) may propose drafts: with
// speculative_ngram, the tokens that followed the latest earlier occurrence of its last n tokens
// (n from prompt_lookup_max down to prompt_lookup_min) in its prompt and output (prompt lookup, as
// vLLM's ngram proposer). They are written after its tokens (r->tokens[n_tokens ..], not counted
// in n_tokens) and computed with its last token in the same step; postprocess verifies them.

// k drafts for plan entry pe (a decoding request): computed with its token, a logit row each.
void llm__plan_add_drafts(struct llm__plan *plan, struct llm__plan_entry *pe, int k) {
    pe->n_compute += k;
    pe->n_logits += k;
    pe->n_draft = k;
    plan->n_tokens += k;
    plan->n_logits += k;
    plan->n_drafts += k;
}

// pe keeps the first `have` of its drafts.
static void llm__plan_cut_drafts(struct llm__plan *plan, struct llm__plan_entry *pe, int have) {
    int cut = pe->n_draft - have;
    pe->n_compute -= cut;
    pe->n_logits -= cut;
    pe->n_draft = have;
    plan->n_tokens -= cut;
    plan->n_logits -= cut;
    plan->n_drafts -= cut;
}

// Up to k drafts for r into r->tokens[n_tokens ..] (the room is there); returns how many. At most
// (1 + n) comparisons per earlier token for each n: linear in the tokens, whatever they are.
static int llm__spec_ngram(const llm_engine *E, struct llm__req *r, int k) {
    const int32_t *t = r->tokens;
    const int n = r->n_tokens;
    for (int g = LLM__MIN(E->params.prompt_lookup_max, n - 1); g >= E->params.prompt_lookup_min; g--) {
        const int32_t *tail = t + n - g;
        // the latest earlier occurrence: starts at i < n - g, and something follows it
        for (int i = n - g - 1; i >= 0; i--) {
            r->ngram_steps++;
            if (t[i] != tail[0]) continue;
            r->ngram_steps += (uint64_t)g;
            if (memcmp(t + i, tail, (size_t)g * sizeof(int32_t))) continue;
            int m = LLM__MIN(k, n - (i + g));
            memmove(r->tokens + n, t + i + g, (size_t)m * sizeof(int32_t));
            return m;
        }
    }
    return 0;
}

// How many drafts decoding request r may have this step (0: none), within the budgets of the
// step, the request (max_tokens, the context) and its tokens' memory (room after its tokens).
static int llm__spec_propose_budget(llm_engine *E, const struct llm__plan *plan, struct llm__req *r) {
    int k = r->p.num_speculative_tokens < 0   ? 0
            : r->p.num_speculative_tokens > 0 ? LLM__MIN(r->p.num_speculative_tokens, E->params.num_speculative_tokens)
                                              : E->params.num_speculative_tokens;
    if (k <= 0 || r->n_tokens - r->n_computed != 1) return 0;
    k = LLM__MIN(k, E->params.max_num_batched_tokens - plan->n_tokens);
    k = LLM__MIN(k, E->acts.max_out - plan->n_logits);
    k = LLM__MIN(k, r->p.max_tokens - (r->n_tokens - r->n_prompt) - 1);   // the last token comes from the model
    k = LLM__MIN(k, E->max_model_len - r->n_tokens - 1);
    if (k <= 0) return 0;
    if (r->n_tokens + k > r->cap_tokens && !llm__req_reserve_tokens(r, LLM__MAX(2 * r->cap_tokens, r->n_tokens + k)))
        return 0;
    return k;
}

// The n-gram drafts of decoding request r this step, written after its tokens; how many.
int llm__spec_propose(llm_engine *E, const struct llm__plan *plan, struct llm__req *r) {
    int k = llm__spec_propose_budget(E, plan, r);
    if (k <= 0) return 0;
    double t0 = llm__now();
    k = llm__spec_ngram(E, r, k);
    E->spec.draft_seconds += llm__now() - t0;
    return k;
}

// The forward pass's expected seconds for a step of T tokens, from the measured ones: a measured
// count's own, else interpolated between the nearest measured counts, else extrapolated along
// the last two (time per token at least what the largest measured step shows), else (nothing
// measured around it: none below, or none above within twice T) 10% more per token than the
// nearest measurement below, an optimistic guess that speculation then corrects by measuring.
static double llm__step_time(const llm_engine *E, int T) {
    if (T >= 1 && T <= LLM__TSTEP && E->spec.t_step[T] > 0) return E->spec.t_step[T];
    int lo = 0, lo2 = 0, hi = 0;
    for (int t = LLM__MIN(T, LLM__TSTEP); t >= 1; t--)
        if (E->spec.t_step[t] > 0) {
            if (!lo) lo = t;
            else { lo2 = t; break; }
        }
    for (int t = LLM__MAX(T, 1); t <= LLM__TSTEP && !hi; t++) if (E->spec.t_step[t] > 0) hi = t;
    if (lo && hi > 2 * T) hi = 0;   // too far above (a prompt's step) to say much about T: the guess below
    if (lo && hi) return E->spec.t_step[lo] + (E->spec.t_step[hi] - E->spec.t_step[lo]) * (T - lo) / (hi - lo);
    if (hi) return E->spec.t_step[hi];
    if (!lo) return 1.0 + 0.1 * (T - 1);
    double slope = 0.1 * E->spec.t_step[lo];
    if (lo2 && lo >= T / 2)
        slope = LLM__MAX((E->spec.t_step[lo] - E->spec.t_step[lo2]) / (lo - lo2), E->spec.t_step[lo] / lo * 0.25);
    return E->spec.t_step[lo] + slope * (T - lo);
}

// How many of m drafts to verify in a step of T tokens that emits G: the k maximising
// (G + a + a^2 + ... + a^k) / t(T + k), 0 when none beats G / t(T); *gain: the expected tokens.
int llm__spec_choose(const llm_engine *E, double G, int T, double a, int m, double *gain_out) {
    double base = G / llm__step_time(E, T), best = 0.0, gain = 0.0, ak = 1.0, k_gain = 0.0;
    int k = 0;
    *gain_out = 0.0;
    for (int j = 1; j <= m; j++) {
        ak *= a;
        gain += ak;
        double rate = (G + gain) / llm__step_time(E, T + j);
        if (rate > best) { best = rate; k = j; k_gain = gain; }
    }
    if (best < LLM__SPEC_MARGIN * base) return 0;   // what is left unmeasured must not turn a gain into a loss
    *gain_out = k_gain;
    return k;
}

// The draft model's next token for request r from its logit row: the request's own chain on the
// draft's logits (penalties over the same history), its distribution kept in q (sampling; greedy:
// the argmax, q unused).
static int32_t llm__spec_draw(struct llm__req *r, const float *row, float *q, int n_vocab) {
    double sum;
    int m = llm__sampler_dist(r->dsmp, row, &sum);
    int32_t d = r->dsmp->idx[0];
    if (r->dsmp->p.temperature > 0.0f) {
        memset(q, 0, (size_t)n_vocab * sizeof(float));
        for (int i = 0; i < m; i++) q[r->dsmp->idx[i]] = (float)(r->dsmp->probs[i] / sum);
        d = llm__sampler_draw(r->dsmp, m, sum, -1, 0.0);
    }
    llm_sampler_accept(r->dsmp, d);
    return d;
}

// Whether a probe may force drafts: the forced rounds so far took at most LLM__SPEC_PROBE_SHARE of
// the time the steps took.
static bool llm__spec_probe_allowed(const llm_engine *E) {
    return E->spec.t_forced <= LLM__SPEC_PROBE_SHARE * E->spec.t_busy;
}

// The requests a step drafts for with the draft model (llm__spec_draft_select) and those whose
// draft cache only catches up, partly, without drafting (a long prompt: the rest in later steps).
struct llm__draft_sel {
    int who[LLM__SPEC_REQS], kk[LLM__SPEC_REQS], n, kmax;   // plan entries drafting, their drafts
    struct llm__req *cu[LLM__SPEC_REQS];
    int cun[LLM__SPEC_REQS], n_cu;
    int dtok;         // the draft model's tokens of the first round
    bool any_forced;  // a forced draft (a first one or a probe) is among them
};

// The drafts worth making for request r (the cost model: the expected tokens per second with k
// drafts against none), given the acceptance a of its drafts so far; all m when forced.
static int llm__spec_draft_k(llm_engine *E, const struct llm__plan *plan, double G, double a, int m, bool forced,
                             double td, double td0, double *k_gain) {
    double gain = 0.0, ak = 1.0, base = G / llm__step_time(E, plan->n_tokens), best = 0.0;
    int k = forced ? m : 0;
    *k_gain = 0.0;
    for (int j = 1; j <= m && !forced; j++) {   // the draft's rounds are part of the cost
        ak *= a;
        gain += ak;
        double rate = (G + gain) / (llm__step_time(E, plan->n_tokens + j) + td0 + td * (j - 1));
        if (rate > best) { best = rate; k = j; *k_gain = gain; }
    }
    return !forced && best < LLM__SPEC_MARGIN_DRAFT * base ? 0 : k;
}

// Chooses the requests of the plan that draft this step and how many tokens each (their drafts
// added to the plan, their blocks allocated), and the requests whose draft cache catches up.
static void llm__spec_draft_select(llm_engine *E, struct llm__plan *plan, struct llm__draft_sel *sel) {
    llm_engine *D = E->spec.draft;
    double G = plan->n_logits, td = E->spec.t_draft, td0 = E->spec.t_draft0 > 0 ? E->spec.t_draft0 : td;
    if (td <= 0) {   // not measured yet: a draft round as the model's decode step, scaled by the weights read
        td = llm__step_time(E, 1) * (double)llm__model_bytes_per_token(&D->model) /
             (double)LLM__MAX(llm__model_bytes_per_token(&E->model), 1);
        if (td0 <= 0) td0 = td;
    }
    const int dmax = D->params.max_num_batched_tokens;
    // every 64th step drafts for up to 4 requests that can (a probe): the draft's time and the
    // requests' acceptance are measured again even where the choice had stopped drafting; while
    // the forced rounds so far (the first drafts, probes) took at most 2% of the steps' time, so
    // that a pair whose drafts never pay costs little more than that (a probe's draft catches up
    // on up to 64 tokens: several model tokens' time)
    const bool probe = E->sched.n_steps % 64 == 31 && llm__spec_probe_allowed(E);
    // the acceptance so far over all requests: a request's prior; before any draft, one request
    // drafts (its catch-up and rounds measure the draft, its drafts the acceptance)
    long long prop = 0, acc = 0;
    for (int j = 0; j < LLM__MAX_SPEC; j++) { prop += E->spec.proposed[j]; acc += E->spec.accepted[j]; }
    const double a0 = (acc + 1.0) / (prop + 2.0);
    bool explore = prop == 0;
    int n_probed = 0;
    for (int i = 0; i < plan->n && sel->n < LLM__SPEC_REQS && sel->n_cu < LLM__SPEC_REQS &&
                    sel->n + sel->n_cu < D->params.max_num_seqs; i++) {
        struct llm__plan_entry *pe = &plan->e[i];
        struct llm__req *r = pe->r;
        if (!r || !r->dsmp || pe->n_compute != 1 || pe->n_logits != 1) continue;
        int m = llm__spec_propose_budget(E, plan, r);
        pe->tokens = r->tokens + pe->start;   // the room for drafts may have moved the tokens
        int catch_up = r->n_tokens - r->dseq.len;
        if (m <= 0 || catch_up < 1) continue;
        double a = (r->spec_kept + 2.0 * a0) / (r->spec_kept + r->spec_missed + 2.0), k_gain;
        // a probe: at most 4 requests, none with a long catch-up (which a probe would pay for all)
        const bool forced = E->spec.always || explore || (probe && n_probed < 4 && catch_up <= 64);
        n_probed += probe && forced;
        explore = false;
        int k = llm__spec_draft_k(E, plan, G, a, m, forced, td, td0, &k_gain);
        if (k == 0) continue;   // (nor does its draft cache catch up: a catch-up is paid only for drafts)
        sel->any_forced |= forced && !E->spec.always;
        if (sel->dtok + catch_up > dmax) {   // the draft's cache lacks much (a long prompt): a part now, drafts later
            int c = dmax - sel->dtok;
            if (c > 0 && llm__blocks_can_allocate(&D->blocks, &r->dseq, c) &&
                llm__blocks_allocate(&D->blocks, &r->dseq, c)) {
                sel->cu[sel->n_cu] = r;
                sel->cun[sel->n_cu++] = c;
                sel->dtok += c;
            }
            continue;
        }
        if (!llm__blocks_can_allocate_free(&E->blocks, &r->seq, 1 + k) ||
            !llm__blocks_can_allocate(&D->blocks, &r->dseq, catch_up + k - 1) ||
            !llm__blocks_allocate(&E->blocks, &r->seq, 1 + k) ||
            !llm__blocks_allocate(&D->blocks, &r->dseq, catch_up + k - 1))
            continue;
        G += k_gain;
        llm__plan_add_drafts(plan, pe, k);
        r->spec_q = sel->n;
        sel->who[sel->n] = i;
        sel->kk[sel->n++] = k;
        sel->kmax = LLM__MAX(sel->kmax, k);
        sel->dtok += catch_up;
        // the draft's sampling sees the request's recent tokens, as the request's own does
        llm_sampler_reset(r->dsmp);
        int h = LLM__MAX(0, r->n_tokens - LLM__MAX(r->p.sampling.penalty_last_n, 0));
        for (int t = h; t < r->n_tokens; t++) llm_sampler_accept(r->dsmp, r->tokens[t]);
    }
}

// One round of the draft model: the catch-ups (first round only) and one more draft token of each
// request still drafting; map[x] is the selection's index of the round's entry x (-1: catch-up).
static void llm__spec_draft_round_plan(llm_engine *E, const struct llm__plan *plan, const struct llm__draft_sel *sel,
                                       int round, struct llm__plan *dplan, int *map) {
    struct llm__plan_entry *de = E->spec.de;
    for (int j = 0; round == 0 && j < sel->n_cu; j++) {   // catching up only: no logits
        struct llm__req *r = sel->cu[j];
        de[dplan->n] =
            (struct llm__plan_entry){ NULL, &r->dseq, r->tokens + r->dseq.len, r->dseq.len, sel->cun[j], 0, 0 };
        map[dplan->n++] = -1;
        dplan->n_tokens += sel->cun[j];
    }
    for (int j = 0; j < sel->n; j++) {
        struct llm__req *r = plan->e[sel->who[j]].r;
        if (round >= sel->kk[j]) continue;
        int start = r->dseq.len, cnt = round == 0 ? r->n_tokens - start : 1;
        de[dplan->n] = (struct llm__plan_entry){NULL, &r->dseq, r->tokens + start, start, cnt, 1, 0};
        map[dplan->n++] = j;
        dplan->n_tokens += cnt;
        dplan->n_logits++;
    }
}

// speculative_model: the drafts of the step's decoding requests (at most LLM__SPEC_REQS), each
// k of them (the cost model's choice, the draft's rounds counted), drawn by the draft model in
// k rounds batched over the requests: the first round also computes what the draft's cache lacks
// of each request's tokens (its prompt, the tokens of the last step), the others one token each.
// Returns how many requests speculate; their entries and the plan are updated.
int llm__spec_draft_model(llm_engine *E, struct llm__plan *plan) {
    llm_engine *D = E->spec.draft;
    const int nv = E->model.n_vocab;
    struct llm__draft_sel sel = {.n = 0};
    llm__spec_draft_select(E, plan, &sel);
    if (sel.n == 0 && sel.n_cu == 0) return 0;
    double t0 = llm__now();
    for (int round = 0; round < LLM__MAX(sel.kmax, 1); round++) {
        struct llm__plan dplan = {.e = E->spec.de};
        int map[2 * LLM__SPEC_REQS];
        llm__spec_draft_round_plan(E, plan, &sel, round, &dplan, map);
        struct llm__step st;
        double t_round = llm__now();
        if (llm__prepare(D, &dplan, &st) != LLM_OK || llm__execute(D, &st, D->step_logits) != LLM_OK) {
            // the draft failed: these requests verify the drafts they have (none past this round)
            for (int j = 0; j < sel.n; j++) {
                sel.kk[j] = LLM__MIN(sel.kk[j], round);
                llm__plan_cut_drafts(plan, &plan->e[sel.who[j]], sel.kk[j]);
            }
            break;
        }
        // (not the draft's first step of a size: see llm_step)
        const bool dwarm = dplan.n_tokens > LLM__TSTEP || D->spec.t_step_warm[dplan.n_tokens];
        if (dplan.n_tokens <= LLM__TSTEP) D->spec.t_step_warm[dplan.n_tokens] = true;
        if (dwarm && round > 0) llm__time_update(&E->spec.t_draft, llm__now() - t_round);
        else if (dwarm && sel.n_cu == 0 && sel.dtok <= 4 * sel.n)   // a usual catch-up
            llm__time_update(&E->spec.t_draft0, llm__now() - t_round);
        for (int x = 0, row = 0; x < dplan.n; x++) {
            int j = map[x];
            dplan.e[x].seq->len += dplan.e[x].n_compute;
            if (j < 0) continue;   // catching up only: no row
            struct llm__req *r = plan->e[sel.who[j]].r;
            float *q = E->spec.q + ((size_t)j * (size_t)E->params.num_speculative_tokens + (size_t)round) * (size_t)nv;
            r->tokens[r->n_tokens + round] = llm__spec_draw(r, D->step_logits + (size_t)row++ * (size_t)nv, q, nv);
        }
    }
    E->spec.draft_seconds += llm__now() - t0;
    if (sel.any_forced) E->spec.t_forced += llm__now() - t0;
    return sel.n;
}

// r leaves the plan (it is being preempted): its tokens go back to the budget.
