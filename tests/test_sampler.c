// The sampler: greedy is the argmax; the same seed gives the same draws; top-k, top-p and min-p
// never draw an excluded token; draws follow the truncated, temperature-scaled distribution
// (chi-square bound), in llama.cpp's order: penalties, top-k, top-p, min-p, temperature;
// log-probabilities are a log-softmax.
// Through llm.h alone, linked with the library.
#define _POSIX_C_SOURCE 200809L   // clock_gettime
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <stdint.h>
#include "../llm.h"
#include "test.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

enum { V = 50 };

// Chi-square statistic of counts against expected probabilities (cells with p > 0).
static double chi2(const int *count, const double *p, int n, int draws) {
    double x = 0;
    for (int i = 0; i < n; i++)
        if (p[i] > 0) x += (count[i] - draws * p[i]) * (count[i] - draws * p[i]) / (draws * p[i]);
    return x;
}

static int cmp_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int main(void) {
    unsigned long long seed = 3;
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)test_rng_normal(&seed) * 2;
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;

    struct llm_sampling_params p = llm_sampling_params_default();
    p.temperature = 0;
    llm_sampler *s = llm_sampler_create(&p, V);
    EXPECT(llm_sampler_sample(s, logits) == best, "greedy is not the argmax");
    llm_sampler_free(s);

    // same seed, same draws; another seed, other draws
    p = llm_sampling_params_default();
    p.temperature = 1.0f; p.top_k = 0; p.top_p = 1.0f; p.seed = 42;
    llm_sampler *a = llm_sampler_create(&p, V), *b = llm_sampler_create(&p, V);
    p.seed = 43;
    llm_sampler *c = llm_sampler_create(&p, V);
    int same = 0, diff = 0;
    for (int i = 0; i < 200; i++) {
        int x = llm_sampler_sample(a, logits), y = llm_sampler_sample(b, logits), z = llm_sampler_sample(c, logits);
        same += x == y;
        diff += x != z;
    }
    EXPECT(same == 200, "same seed: %d of 200 draws agree", same);
    EXPECT(diff > 50, "seeds 42 and 43: only %d of 200 draws differ", diff);
    llm_sampler_free(a); llm_sampler_free(b); llm_sampler_free(c);

    // distributions: plain, temperature, top-k, top-p, min-p, penalties and mixes
    struct { float temp; int k; float top_p, min_p, rep, freq, pres; } cases[] = {
        {1.0f, 0, 1.0f, 0, 1, 0, 0},    {0.5f, 0, 1.0f, 0, 1, 0, 0},    {1.0f, 5, 1.0f, 0, 1, 0, 0},
        {1.0f, 0, 0.6f, 0, 1, 0, 0},    {0.7f, 10, 0.9f, 0, 1, 0, 0},   {1.0f, 0, 1.0f, 0.1f, 1, 0, 0},
        {1.5f, 0, 0.95f, 0.05f, 1, 0, 0}, {1.0f, 0, 1.0f, 0, 1.5f, 0, 0}, {1.0f, 0, 1.0f, 0, 1, 0.5f, 0.7f},
        {0.8f, 20, 0.9f, 0.02f, 1.3f, 0.2f, 0.1f},
    };
    // the history the penalties see: token 7 three times, the best token twice, token 11 once
    const int hist[] = {7, best, 7, 11, best, 7};
    const int n_hist = (int)ARRAY_LEN(hist);
    for (size_t ci = 0; ci < ARRAY_LEN(cases); ci++) {
        double l[V], q[V], sum = 0;
        int idx[V];
        for (int i = 0; i < V; i++) l[i] = logits[i];
        bool pen = cases[ci].rep != 1 || cases[ci].freq != 0 || cases[ci].pres != 0;
        if (pen) {
            for (int t = 0; t < V; t++) {
                int cnt = 0;
                for (int h = 0; h < n_hist; h++) cnt += hist[h] == t;
                if (!cnt) continue;
                l[t] = l[t] <= 0 ? l[t] * cases[ci].rep : l[t] / cases[ci].rep;
                l[t] -= cnt * cases[ci].freq + cases[ci].pres;
            }
        }
        for (int i = 0; i < V; i++) idx[i] = i;
        for (int i = 0; i < V; i++)   // sort ids by logit, descending
            for (int j = i + 1; j < V; j++)
                if (l[idx[j]] > l[idx[i]]) { int t = idx[i]; idx[i] = idx[j]; idx[j] = t; }
        int keep = cases[ci].k ? cases[ci].k : V;
        if (cases[ci].top_p < 1.0f) {   // the smallest prefix whose mass (before temperature) reaches top_p
            double z = 0, cum = 0;
            for (int r = 0; r < keep; r++) z += exp(l[idx[r]] - l[idx[0]]);
            int r = 0;
            while (r < keep) { cum += exp(l[idx[r]] - l[idx[0]]) / z; r++; if (cum >= cases[ci].top_p) break; }
            keep = r;
        }
        if (cases[ci].min_p > 0) {   // p >= min_p * p_max
            int r = 1;
            while (r < keep && exp(l[idx[r]] - l[idx[0]]) >= cases[ci].min_p) r++;
            keep = r;
        }
        for (int i = 0; i < V; i++) q[i] = 0;
        for (int r = 0; r < keep; r++) { q[idx[r]] = exp((l[idx[r]] - l[idx[0]]) / cases[ci].temp); sum += q[idx[r]]; }
        for (int i = 0; i < V; i++) q[i] /= sum;
        p = llm_sampling_params_default();
        p.temperature = cases[ci].temp; p.top_k = cases[ci].k; p.top_p = cases[ci].top_p; p.min_p = cases[ci].min_p;
        p.repeat_penalty = cases[ci].rep; p.frequency_penalty = cases[ci].freq; p.presence_penalty = cases[ci].pres;
        p.penalty_last_n = n_hist; p.seed = 1000 + ci;
        s = llm_sampler_create(&p, V);
        int count[V] = {0}, excluded = 0, cells = 0;
        const int draws = 40000;
        for (int i = 0; i < draws; i++) {
            llm_sampler_reset(s);   // the same history before every draw
            for (int h = 0; h < n_hist; h++) llm_sampler_accept(s, hist[h]);
            int t = llm_sampler_sample(s, logits);
            count[t]++;
            excluded += q[t] == 0;
        }
        for (int i = 0; i < V; i++) cells += q[i] > 0;
        double x = chi2(count, q, V, draws);
        // 99.9% quantile of chi-square with up to 49 degrees of freedom is below 86
        EXPECT(excluded == 0, "case %zu: %d draws of excluded tokens", ci, excluded);
        EXPECT(x < 86.0, "case %zu: chi-square %.1f over %d cells", ci, x, cells);
        EXPECT(cells > 1, "case %zu: degenerate distribution", ci);
        llm_sampler_free(s);
    }

    // a window longer than the vocabulary (every token counted many times), greedy: the argmax of
    // the logits with the penalties applied here
    {
        enum { N = 3 * V + 7 };
        p = llm_sampling_params_default();
        p.temperature = 0; p.penalty_last_n = 4 * V; p.repeat_penalty = 1.3f; p.frequency_penalty = 0.4f;
        p.presence_penalty = 0.25f;
        s = llm_sampler_create(&p, V);
        int count[V] = {0};
        for (int i = 0; i < N; i++) {
            int t = (i * i + 3 * i) % V;
            llm_sampler_accept(s, t);
            count[t]++;
        }
        int want = 0;
        float pen[V];
        for (int i = 0; i < V; i++) {
            pen[i] = logits[i];
            if (count[i]) {
                pen[i] = pen[i] <= 0 ? pen[i] * p.repeat_penalty : pen[i] / p.repeat_penalty;
                pen[i] -= (float)count[i] * p.frequency_penalty + p.presence_penalty;
            }
            if (pen[i] > pen[want]) want = i;
        }
        int got = llm_sampler_sample(s, logits);
        EXPECT(got == want, "a window of %d over %d tokens: %d, want %d", p.penalty_last_n, V, got, want);
        llm_sampler_free(s);
    }

    // a large top_k over a large vocabulary with rising logits (each logit displaces every kept
    // one from a sorted buffer: k moves per logit, minutes per token for a top_k of n_vocab - 1):
    // the token left out is the lowest, and a draw takes well under the 5 s bound (a whole sort)
    {
        enum { BIG = 200000 };
        float *rise = malloc(sizeof(float) * BIG);
        for (int i = 0; i < BIG; i++) rise[i] = (float)i * 1e-4f;
        p = llm_sampling_params_default();
        p.temperature = 1.0f; p.top_k = BIG - 1; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 5;
        s = llm_sampler_create(&p, BIG);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int low = 0;
        for (int i = 0; i < 3; i++) low += llm_sampler_sample(s, rise) == 0;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        EXPECT(low == 0, "top_k %d of %d: the lowest token drawn", BIG - 1, BIG);
        EXPECT(dt < 5.0, "top_k %d of %d with rising logits: %.1f s for 3 draws", BIG - 1, BIG, dt);
        llm_sampler_free(s);
        // top_k 100 (past the buffer's limit): only the 100 best are drawn
        for (int i = 0; i < BIG; i++) rise[i] = (float)test_rng_normal(&seed);
        float *sorted = malloc(sizeof(float) * BIG);   // the reference: the 100th largest
        memcpy(sorted, rise, sizeof(float) * BIG);
        qsort(sorted, BIG, sizeof(float), cmp_float_desc);
        p.top_k = 100;
        s = llm_sampler_create(&p, BIG);
        int outside = 0;
        for (int i = 0; i < 300; i++) outside += rise[llm_sampler_sample(s, rise)] < sorted[99];
        free(sorted);
        EXPECT(outside == 0, "top_k 100: %d of 300 draws outside the 100 best", outside);
        llm_sampler_free(s);
        free(rise);
    }

    // the penalty window: only the last penalty_last_n tokens count; greedy sees penalties too
    p = llm_sampling_params_default();
    p.temperature = 0; p.repeat_penalty = 1000.0f; p.penalty_last_n = 2;
    s = llm_sampler_create(&p, V);
    llm_sampler_accept(s, best);
    EXPECT(llm_sampler_sample(s, logits) != best, "repeat penalty ignored by greedy");
    llm_sampler_accept(s, (best + 1) % V); llm_sampler_accept(s, (best + 2) % V);   // best leaves the window of 2
    EXPECT(llm_sampler_sample(s, logits) == best, "penalty outlived its window");
    llm_sampler_free(s);
    p = llm_sampling_params_default();
    p.top_p = 1.5f;
    EXPECT(llm_sampler_create(&p, V) == NULL, "top_p 1.5 accepted");

    // top log-probabilities: sorted, and a log-softmax
    struct llm_logprob lp[5];
    llm_top_logprobs(logits, V, 5, lp);
    double mx = logits[best], z = 0;
    for (int i = 0; i < V; i++) z += exp(logits[i] - mx);
    EXPECT(lp[0].id == best, "top logprob is not the argmax");
    for (int i = 0; i < 5; i++) {
        EXPECT(fabs(lp[i].logprob - (logits[lp[i].id] - mx - log(z))) < 1e-5, "logprob %d", i);
        if (i) EXPECT(lp[i].logprob <= lp[i - 1].logprob, "logprobs not sorted at %d", i);
    }
    return test_summary("test_sampler");
}
