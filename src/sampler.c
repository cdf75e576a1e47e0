// Sampler: penalties, top-k/top-p/min-p, temperature, logprobs

#include "internal.h"

// === sampler ===

static uint64_t llm__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t llm__xoshiro(uint64_t s[4]) {
    uint64_t r = llm__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = llm__rotl(s[3], 45);
    return r;
}

static double llm__rng_uniform(uint64_t s[4]) {   // [0, 1)
    return (double)(llm__xoshiro(s) >> 11) * (1.0 / 9007199254740992.0);
}

struct llm_sampling_params llm_sampling_params_default(void) {
    struct llm_sampling_params p = {0};
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    p.seed = 0;
    return p;
}

static bool llm__penalties_on(const struct llm_sampling_params *p) {
    return p->penalty_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f);
}

// Parameters llm_sampler_create accepts (NaN fails every comparison).
bool llm__sampling_params_ok(const struct llm_sampling_params *p) {
    return p->penalty_last_n >= 0 && p->top_k >= 0 && isfinite(p->temperature) && p->temperature >= 0.0f &&
           p->top_p >= 0.0f && p->top_p <= 1.0f && p->min_p >= 0.0f && p->min_p <= 1.0f &&
           isfinite(p->repeat_penalty) && p->repeat_penalty > 0.0f && isfinite(p->frequency_penalty) &&
           isfinite(p->presence_penalty);
}

llm_sampler *llm_sampler_create(const struct llm_sampling_params *params, int n_vocab) {
    if (!params || n_vocab < 1 || !llm__sampling_params_ok(params)) return NULL;
    llm_sampler *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->p = *params;
    s->n_vocab = n_vocab;
    s->probs = malloc((size_t)n_vocab * sizeof(float));
    s->idx = malloc((size_t)n_vocab * sizeof(int32_t));
    bool pen = llm__penalties_on(params);
    s->work = pen ? malloc((size_t)n_vocab * sizeof(float)) : NULL;
    s->count = pen ? calloc((size_t)n_vocab, sizeof(int32_t)) : NULL;
    s->hist = params->penalty_last_n > 0 ? malloc((size_t)params->penalty_last_n * sizeof(int32_t)) : NULL;
    if (!s->probs || !s->idx || (pen && (!s->work || !s->count)) || (params->penalty_last_n > 0 && !s->hist)) {
        llm_sampler_free(s);
        return NULL;
    }
    uint64_t seed = params->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = llm__splitmix64(&seed);
    return s;
}

void llm_sampler_free(llm_sampler *s) {
    if (!s) return;
    free(s->probs);
    free(s->idx);
    free(s->work);
    free(s->count);
    free(s->hist);
    free(s);
}

void llm_sampler_accept(llm_sampler *s, int32_t token) {
    if (!s->hist || token < 0 || token >= s->n_vocab) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.penalty_last_n;
    if (s->n_hist < s->p.penalty_last_n) s->n_hist++;
}

void llm_sampler_reset(llm_sampler *s) {
    s->n_hist = s->hist_pos = 0;
}

// Whether x[0..n) are all finite: the largest magnitude's bits (sign cleared) stay below those of
// infinity. An integer maximum over 16 lanes (a loop compilers vectorise); it looks at one logit
// row per sampled token, so a model whose activations overflow is caught without a check in the
// layers' hot paths.
bool llm__all_finite(const float *x, size_t n) {
    uint32_t lane[16] = {0}, mx = 0, b;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            memcpy(&b, x + i + (size_t)l, 4);
            b &= 0x7fffffffu;
            lane[l] = b > lane[l] ? b : lane[l];
        }
    for (int l = 0; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; i < n; i++) {
        memcpy(&b, x + i, 4);
        b &= 0x7fffffffu;
        mx = b > mx ? b : mx;
    }
    return mx < 0x7f800000u;
}

// The first index of the largest value (NaN never wins). The maximum is found over 16 lanes
// (a loop compilers vectorise), then its first position.
static int32_t llm__argmax(const float *x, int n) {
    float lane[16];
    int i = 0;
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    float mx = -INFINITY;
    for (int l = 0; l < 16; l++) mx = lane[l] > mx ? lane[l] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (i = 0; i < n; i++) if (x[i] == mx) return i;
    return 0;   // all NaN or -inf
}

// Sorts idx[0..n) by descending key[idx[i]], ties by ascending id.
static void llm__sort_desc(int32_t *idx, int n, const float *key) {
    // Heap sort: no recursion, no allocation, O(n log n) worst case.
#define LLM__BEFORE(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) > (b)))   // a sorts after b
    for (int start = n / 2 - 1; start >= 0; start--) {
        for (int r = start;;) {
            int c = 2 * r + 1;
            if (c >= n) break;
            if (c + 1 < n && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            int32_t t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
    for (int end = n - 1; end > 0; end--) {
        int32_t t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        for (int r = 0;;) {
            int c = 2 * r + 1;
            if (c >= end) break;
            if (c + 1 < end && LLM__BEFORE(idx[c + 1], idx[c])) c++;
            if (!LLM__BEFORE(idx[c], idx[r])) break;
            t = idx[r]; idx[r] = idx[c]; idx[c] = t;
            r = c;
        }
    }
#undef LLM__BEFORE
}

// Keeps the k best of idx[0..n) in idx[0..k), sorted best first (of equal keys, the lower ids).
#define LLM__TOP_K_INSERT 64   // k up to this: insertion into a sorted buffer, else a heap
static int llm__top_k(int32_t *idx, int n, int k, const float *key) {
    if (k <= 0 || k >= n) { llm__sort_desc(idx, n, key); return n; }
    if (k > LLM__TOP_K_INSERT) {
        // A large k (a request may ask for top_k = n_vocab - 1): the k best kept in a heap whose
        // root is the worst of them, O(n log k) (the buffer below would cost O(n k) when the keys
        // rise), then sorted.
#define LLM__WORSE(a, b) (key[a] < key[b] || (key[a] == key[b] && (a) > (b)))
#define LLM__SIFT(r0)                                                                   \
        for (int r = (r0);;) {                                                          \
            int c = 2 * r + 1;                                                          \
            if (c >= k) break;                                                          \
            if (c + 1 < k && LLM__WORSE(idx[c + 1], idx[c])) c++;                       \
            if (!LLM__WORSE(idx[c], idx[r])) break;                                     \
            int32_t t = idx[r]; idx[r] = idx[c]; idx[c] = t;                            \
            r = c;                                                                      \
        }
        for (int top = k / 2 - 1; top >= 0; top--) LLM__SIFT(top)
        for (int i = k; i < n; i++)
            if (LLM__WORSE(idx[0], idx[i])) {
                idx[0] = idx[i];
                LLM__SIFT(0)
            }
#undef LLM__SIFT
#undef LLM__WORSE
        llm__sort_desc(idx, k, key);
        return k;
    }
    // One pass with a small sorted buffer when k is small: at most k moves per key.
    int m = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = idx[i];
        if (m == k && !(key[id] > key[idx[k - 1]])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && key[idx[j - 1]] < key[id]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = id;
    }
    return m;
}

int llm__cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

// Repetition (divides positive logits, multiplies negative ones), frequency (per occurrence)
// and presence (once) penalties for the tokens of the recent history, as llama.cpp applies them.
// Occurrences are counted in s->count, which is left zero again: time linear in the history (and
// the copy of the row), whatever it holds.
static const float *llm__apply_penalties(llm_sampler *s, const float *logits) {
    if (!llm__penalties_on(&s->p) || s->n_hist == 0) return logits;
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof(float));
    for (int i = 0; i < s->n_hist; i++) s->count[s->hist[i]]++;
    for (int i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (!s->count[t]) continue;   // done at its first occurrence
        float *x = &s->work[t];
        if (*x <= 0.0f) *x *= s->p.repeat_penalty;
        else *x /= s->p.repeat_penalty;
        *x -= (float)s->count[t] * s->p.frequency_penalty + s->p.presence_penalty;
        s->count[t] = 0;
    }
    return s->work;
}

// The distribution the sampler draws from: candidates s->idx[0..m) with weights s->probs[0..m)
// (their sum in *sum; not normalised), after the whole chain (penalties, top-k, top-p, min-p,
// temperature). Greedy (temperature 0): the argmax alone. Returns m.
int llm__sampler_dist(llm_sampler *s, const float *logits_in, double *sum_out) {
    const int n = s->n_vocab;
    const float *logits = llm__apply_penalties(s, logits_in);
    if (!(s->p.temperature > 0.0f)) {
        s->idx[0] = llm__argmax(logits, n);
        s->probs[0] = 1.0f;
        *sum_out = 1.0;
        return 1;
    }
    // candidates: top-k (sorted), or all (sorted when top-p or min-p needs it)
    for (int i = 0; i < n; i++) s->idx[i] = i;
    int m = n;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < n) { m = llm__top_k(s->idx, n, s->p.top_k, logits); sorted = true; }
    else if (s->p.top_p < 1.0f || s->p.min_p > 0.0f) { llm__sort_desc(s->idx, n, logits); sorted = true; }
    float mx = sorted ? logits[s->idx[0]] : logits[llm__argmax(logits, n)];
    // top-p and min-p on the probabilities before temperature
    if (s->p.top_p < 1.0f) {
        double sum = 0.0, cum = 0.0;
        for (int i = 0; i < m; i++) sum += (s->probs[i] = expf(logits[s->idx[i]] - mx));
        int keep = m;
        for (int i = 0; i < m; i++) {
            cum += s->probs[i];
            if (cum >= (double)s->p.top_p * sum) { keep = i + 1; break; }
        }
        m = keep;
    }
    if (s->p.min_p > 0.0f) {   // keep p >= min_p * p_max: logit >= max + log(min_p)
        float lim = mx + logf(s->p.min_p);
        int keep = 1;
        while (keep < m && logits[s->idx[keep]] >= lim) keep++;
        m = keep;
    }
    double sum = 0.0;
    for (int i = 0; i < m; i++) sum += (s->probs[i] = expf((logits[s->idx[i]] - mx) / s->p.temperature));
    *sum_out = sum;
    return m;
}

// A draw from candidates idx[0..m) by weight, leaving out `skip` (-1: none; its weight w_skip).
int32_t llm__sampler_draw(llm_sampler *s, int m, double sum, int32_t skip, double w_skip) {
    double r = llm__rng_uniform(s->rng) * (sum - w_skip), acc = 0.0;
    int32_t tok = -1;
    for (int i = 0; i < m; i++) {
        if (s->idx[i] == skip) continue;
        tok = s->idx[i];   // the last candidate when rounding leaves r past the total
        acc += s->probs[i];
        if (r < acc) break;
    }
    return tok;
}

int32_t llm_sampler_sample(llm_sampler *s, const float *logits_in) {
    double sum;
    int m = llm__sampler_dist(s, logits_in, &sum);
    int32_t tok = m == 1 && !(s->p.temperature > 0.0f) ? s->idx[0] : llm__sampler_draw(s, m, sum, -1, 0.0);
    llm_sampler_accept(s, tok);
    return tok;
}

// The chain's candidates among the tokens ok() allows, found by checking tokens best first (at most
// LLM__CHECKED_MAX of them) instead of every token of the vocabulary: greedy takes the first
// allowed one; top-k the first k allowed; top-p the allowed ones until the cut is settled whatever
// the unchecked tokens hold (the allowed mass lies between what was found and that plus the mass
// not yet checked: the cut is known when both bounds give it); min-p those above the first allowed
// one's threshold, until a token below it. The same candidates, so the same law, as the chain on
// the logits with the refused tokens at -inf. Returns the token drawn (accepted into the history);
// -1: not settled within the checks (nothing drawn or accepted: compute the whole mask); -2: every
// token was checked and none is allowed.
#define LLM__CHECKED_MAX 64
int32_t llm__sampler_sample_checked(llm_sampler *s, const float *logits_in, bool (*ok)(void *, int32_t), void *ctx) {
    const int n = s->n_vocab;
    const struct llm_sampling_params *p = &s->p;
    const float *lg = llm__apply_penalties(s, logits_in);
    const bool greedy = !(p->temperature > 0.0f), use_p = p->top_p < 1.0f, use_min = p->min_p > 0.0f;
    const int k_top = p->top_k > 0 && p->top_k < n ? p->top_k : 0;
    if (greedy) {
        int32_t best = llm__argmax(lg, n);
        if (ok(ctx, best)) {
            llm_sampler_accept(s, best);
            return best;
        }
    } else if (!k_top && !use_p && !use_min) return -1;   // temperature alone needs every allowed token
    for (int i = 0; i < n; i++) s->idx[i] = i;
    const int m = llm__top_k(s->idx, n, LLM__MIN(LLM__CHECKED_MAX, n), lg);
    const float l0 = lg[s->idx[0]];
    double total = 0.0, checked = 0.0, cum = 0.0;
    if (!greedy && !k_top && use_p)
        for (int i = 0; i < n; i++) total += exp((double)lg[i] - l0);
    int na = 0, cut = -1;   // allowed tokens found (moved to idx[0..na)), and how many the chain keeps
    float thr = -INFINITY;  // min-p's threshold, once the first allowed token is known
    for (int j = 0; j < m && cut < 0; j++) {
        int32_t t = s->idx[j];
        double w = exp((double)lg[t] - l0);
        checked += w;
        if (!greedy && use_min && na > 0 && lg[t] < thr && !k_top && !use_p) { cut = na; break; }
        if (!ok(ctx, t)) continue;
        s->idx[na] = t;
        s->probs[na] = (float)(cum += w);   // cumulative mass of the allowed ones
        if (na++ == 0) thr = lg[t] + logf(p->min_p);
        if (greedy) cut = 1;
        else if (k_top && na == k_top) cut = na;
        else if (!k_top && use_p) {   // the cut under both bounds of the allowed mass
            double hi = cum + LLM__MAX(total - checked, 0.0);
            int c_lo = 0, c_hi = 0;
            while (c_lo < na && s->probs[c_lo] < p->top_p * cum) c_lo++;
            while (c_hi < na && s->probs[c_hi] < p->top_p * hi) c_hi++;
            if (c_hi < na && c_lo == c_hi) cut = c_lo + 1;
        }
    }
    if (cut < 0 && m == n) cut = na;   // every token checked: what was found is all there is
    if (cut < 0) return -1;
    if (cut == 0) return -2;
    // the rest of the chain on the candidates idx[0..cut): top-p (top-k's ones: of their own mass),
    // min-p, temperature
    if (k_top && use_p) {
        int keep = cut;
        for (int i = 0; i < cut; i++)
            if (s->probs[i] >= p->top_p * s->probs[cut - 1]) { keep = i + 1; break; }
        cut = keep;
    }
    if (use_min)
        for (int i = 1; i < cut; i++)
            if (lg[s->idx[i]] < thr) { cut = i; break; }
    int32_t tok = s->idx[0];
    if (!greedy) {
        double sum = 0.0;
        float mx = lg[s->idx[0]];
        for (int i = 0; i < cut; i++) sum += (s->probs[i] = expf((lg[s->idx[i]] - mx) / p->temperature));
        tok = llm__sampler_draw(s, cut, sum, -1, 0.0);
    }
    llm_sampler_accept(s, tok);
    return tok;
}

// Speculative decoding's verification of a draft token (Leviathan et al., Chen et al.): q is
// the draft's distribution (a draft model's, dense over the vocabulary, normalised), or NULL for
// a draft proposed with certainty (an n-gram's: q is a point mass). The draft is kept with
// probability min(1, p(draft) / q(draft)), p being the sampler's whole chain; else the token is
// drawn from max(0, p - q), normalised (a point mass: p without the draft; from p when that is
// empty). Each emitted token then has probability p(x), as without speculation; greedy keeps the
// draft exactly when it is the argmax. *accepted says which; the token is returned and accepted
// into the penalties' history.
int32_t llm__sampler_verify(llm_sampler *s, const float *logits, int32_t draft, const float *q, bool *accepted) {
    double sum;
    int m = llm__sampler_dist(s, logits, &sum);
    int32_t tok;
    if (!(s->p.temperature > 0.0f)) {
        tok = s->idx[0];
    } else {
        double w = 0.0;   // the draft's weight under p (0: not a candidate)
        for (int i = 0; i < m; i++)
            if (s->idx[i] == draft) w = s->probs[i];
        double qd = q ? q[draft] : 1.0;
        if (qd > 0.0 && llm__rng_uniform(s->rng) * qd * sum < w) {
            tok = draft;
        } else if (!q) {   // p without the draft (the draft alone: kept, whatever the draw)
            tok = m == 1 && w > 0.0 ? draft : llm__sampler_draw(s, m, sum, w > 0.0 ? draft : -1, w);
        } else {
            double rsum = 0.0;
            for (int i = 0; i < m; i++) {
                double d = s->probs[i] / sum - (double)q[s->idx[i]];
                rsum += (s->probs[i] = d > 0.0 ? (float)d : 0.0f);
            }
            if (rsum > 0.0) {
                tok = llm__sampler_draw(s, m, rsum, -1, 0.0);
            } else {   // p and q agree on every candidate: p itself
                m = llm__sampler_dist(s, logits, &sum);
                tok = llm__sampler_draw(s, m, sum, -1, 0.0);
            }
        }
    }
    *accepted = tok == draft;
    llm_sampler_accept(s, tok);
    return tok;
}

// llm_top_logprobs, returning log(sum(exp(logits))) (the log-softmax of token t is logits[t] minus it).
double llm__top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out) {
    k = LLM__MIN(k, n_vocab);
    float mx = logits[llm__argmax(logits, n_vocab)];
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)mx);
    double lse = (double)mx + log(sum);
    // best k by insertion into a sorted list (k is small)
    int m = 0;
    for (int i = 0; i < n_vocab; i++) {
        if (m == k && !(logits[i] > logits[out[k - 1].id])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && logits[out[j - 1].id] < logits[i]) { out[j] = out[j - 1]; j--; }
        out[j].id = i;
    }
    for (int i = 0; i < k; i++) out[i].logprob = (float)((double)logits[out[i].id] - lse);
    return lse;
}

void llm_top_logprobs(const float *logits, int n_vocab, int k, struct llm_logprob *out) {
    if (k > 0 && n_vocab > 0) llm__top_logprobs(logits, n_vocab, k, out);
}
