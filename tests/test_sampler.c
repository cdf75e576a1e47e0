// The sampler: greedy is the argmax; the same seed gives the same draws; top-k and top-p never
// draw an excluded token; draws follow the temperature-scaled, truncated distribution (chi-square
// bound); log-probabilities are a log-softmax.
#include "../llm.c"
#include "test.h"

enum { V = 50 };

// Chi-square statistic of counts against expected probabilities (cells with p > 0).
static double chi2(const int *count, const double *p, int n, int draws) {
    double x = 0;
    for (int i = 0; i < n; i++)
        if (p[i] > 0) x += (count[i] - draws * p[i]) * (count[i] - draws * p[i]) / (draws * p[i]);
    return x;
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

    // distributions: plain, temperature 0.5, top-k 5, top-p 0.6
    struct { float temp; int k; float top_p; } cases[] = {{1.0f, 0, 1.0f}, {0.5f, 0, 1.0f}, {1.0f, 5, 1.0f}, {1.0f, 0, 0.6f}, {0.7f, 10, 0.9f}};
    for (size_t ci = 0; ci < LLM__ARRAY_LEN(cases); ci++) {
        double q[V], sum = 0;
        int idx[V];
        for (int i = 0; i < V; i++) idx[i] = i;
        for (int i = 0; i < V; i++)   // sort ids by logit, descending
            for (int j = i + 1; j < V; j++)
                if (logits[idx[j]] > logits[idx[i]]) { int t = idx[i]; idx[i] = idx[j]; idx[j] = t; }
        int keep = cases[ci].k ? cases[ci].k : V;
        for (int i = 0; i < V; i++) q[i] = 0;
        for (int r = 0; r < keep; r++) { q[idx[r]] = exp((logits[idx[r]] - logits[idx[0]]) / cases[ci].temp); sum += q[idx[r]]; }
        if (cases[ci].top_p < 1.0f) {   // the smallest prefix whose mass reaches top_p
            double cum = 0;
            int r = 0;
            for (; r < keep; r++) { cum += q[idx[r]] / sum; if (cum >= cases[ci].top_p) { r++; break; } }
            for (int t = r; t < V; t++) q[idx[t]] = 0;
        }
        sum = 0;
        for (int i = 0; i < V; i++) sum += q[i];
        for (int i = 0; i < V; i++) q[i] /= sum;
        p = llm_sampling_params_default();
        p.temperature = cases[ci].temp; p.top_k = cases[ci].k; p.top_p = cases[ci].top_p; p.seed = 1000 + ci;
        s = llm_sampler_create(&p, V);
        int count[V] = {0}, excluded = 0, cells = 0;
        const int draws = 40000;
        for (int i = 0; i < draws; i++) {
            int t = llm_sampler_sample(s, logits);
            count[t]++;
            excluded += q[t] == 0;
        }
        for (int i = 0; i < V; i++) cells += q[i] > 0;
        double x = chi2(count, q, V, draws);
        // 99.9% quantile of chi-square with up to 49 degrees of freedom is below 86
        EXPECT(excluded == 0, "case %zu: %d draws of excluded tokens", ci, excluded);
        EXPECT(x < 86.0, "case %zu: chi-square %.1f over %d cells", ci, x, cells);
        llm_sampler_free(s);
    }

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
