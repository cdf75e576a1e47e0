// perplexity.c — llm perplexity: perplexity and KL divergence as llama.cpp's llama-perplexity
// computes them, so that the figures of the two programs can be compared.
//
// The text is tokenized with BOS (as the vocabulary asks; one trailing newline of the file is
// dropped first, as llama.cpp's -f does) and cut into chunks of n_ctx tokens (the rest is not
// used; --chunks K keeps the first K). Each chunk is evaluated alone, from an empty KV cache, its
// first token replaced by BOS when the vocabulary adds one. Only the second half is scored: the
// logits at positions first = n_ctx/2 .. n_ctx - 2 predict the tokens after them, so that every
// scored token has at least n_ctx/2 tokens of context; n_ctx - 1 - first tokens per chunk.
// PPL = exp(mean nll), and its error exp(mean) x sqrt(var(nll) / (count - 1)) (the standard
// error of the mean log-likelihood carried through exp).
//
// --kl-divergence-base FILE also writes the log-probabilities of every scored position to FILE,
// in llama-perplexity's format (so that either program reads the other's files):
//   "_logits_", int32 n_ctx, int32 n_vocab, int32 n_chunk, int32 tokens[n_chunk][n_ctx] (as
//   tokenized, before the BOS replacement), then per chunk and scored position nv = 2 x
//   ceil(n_vocab / 2) + 4 uint16: a float scale and a float min_log_prob (4 uint16), then per
//   token round((logit - min_logit) / scale) (0 below min_logit), where min_logit is the
//   smallest logit but at least max - 16 and scale = (max - min_logit) / 65535: a log-probability
//   is scale x q + min_log_prob. Native byte order (llama.cpp's too).
// --kl-divergence with that file evaluates the file's tokens with this model and compares.
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// log-softmax of row at tok, as llama-perplexity: the maximum in float, the sum of exp in double
static double ppl_log_softmax(int n_vocab, const float *row, int tok) {
    float max = row[0];
    for (int i = 1; i < n_vocab; i++) max = row[i] > max ? row[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(row[i] - max);
    return row[tok] - max - log(sum);
}

// The base file's record of a row (nv uint16, see above); returns the row's nll at tok.
static double ppl_log_probs_u16(int n_vocab, const float *row, uint16_t *rec, int tok) {
    float max = row[0], min = row[0];
    for (int i = 1; i < n_vocab; i++) {
        max = row[i] > max ? row[i] : max;
        min = row[i] < min ? row[i] : min;
    }
    min = min > max - 16 ? min : max - 16;
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) sum += expf(row[i] - max);
    const float log_sum = (float)log(sum);
    const float min_log_prob = min - max - log_sum;
    const float scale = (max - min) / 65535.f;
    memcpy(rec, &scale, sizeof(float));
    memcpy(rec + 2, &min_log_prob, sizeof(float));
    uint16_t *q = rec + 4;
    if (scale != 0) {
        const float inv = 1 / scale;
        // lrintf: round to nearest, ties to even (the default rounding), as ggml's nearest_int
        for (int i = 0; i < n_vocab; i++) q[i] = row[i] > min ? (uint16_t)lrintf(inv * (row[i] - min)) : 0;
    } else {
        memset(q, 0, (size_t)n_vocab * sizeof(uint16_t));
    }
    if (n_vocab & 1) q[n_vocab] = 0;   // the padding to an even count
    return max + log_sum - row[tok];
}

// The running sums of --kl-divergence (llama-perplexity's kl_divergence_result).
struct ppl_kld {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    size_t n_same_top, count;
};

// One position against the base record: adds to k, writes its KL divergence and p - p_base.
static void ppl_kld_row(int n_vocab, const float *row, const uint16_t *rec, int tok, struct ppl_kld *k,
                        float *kld_out, float *p_diff_out) {
    float max = row[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (row[i] > max) { max = row[i]; imax = i; }
    double sum_exp = 0.0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(row[i] - max);
    const float log_sum = (float)log(sum_exp);
    float scale, min_log_prob;
    memcpy(&scale, rec, sizeof(float));
    memcpy(&min_log_prob, rec + 2, sizeof(float));
    const uint16_t *q = rec + 4;

    const float nll = max + log_sum - row[tok];
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    const float nll_base = -(scale * q[tok] + min_log_prob);
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_nll_nll_base += nll * nll_base;

    // KL(base || this) over the tokens the base gives a log-probability above -16
    const float log_norm = max + log_sum;
    double kl = 0;
    int imax_base = -1;
    float lp_base_max = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float lp_base = scale * q[i] + min_log_prob;
        if (i == 0 || lp_base > lp_base_max) { lp_base_max = lp_base; imax_base = i; }
        if (lp_base > -16.f) kl += expf(lp_base) * (lp_base - row[i] + log_norm);
    }
    k->sum_kld += kl;
    k->sum_kld2 += kl * kl;
    k->count++;
    if (imax == imax_base) k->n_same_top++;

    const float p_diff = expf(-nll) - expf(-nll_base);
    k->sum_p_diff += p_diff;
    const double p_diff2 = (double)p_diff * p_diff;
    k->sum_p_diff2 += p_diff2;
    k->sum_p_diff4 += p_diff2 * p_diff2;
    if (fabsf(p_diff) > k->max_p_diff) k->max_p_diff = fabsf(p_diff);
    *kld_out = (float)kl;
    *p_diff_out = p_diff;
}

// mean and its standard error from a sum and a sum of squares (0 error for 10 values or fewer)
static void ppl_mean_unc(double sum, double sum2, size_t count, double *mean, double *unc) {
    *mean = *unc = 0;
    if (count < 1) return;
    double f = sum / (double)count, df = sum2 / (double)count - f * f;
    *mean = f;
    *unc = df > 0 && count > 10 ? sqrt(df / (double)(count - 1)) : 0.;
}

static double ppl_cov(double suma, double sumb, double sumab, size_t count) {
    if (count < 10) return 0.0;
    double n = (double)count;
    return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

static int ppl_cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

// the value at fraction of the sorted values, interpolated (in float, as llama-perplexity)
static float ppl_percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float ppl_median(const float *v, size_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static void ppl_kld_line(int chunk, const struct ppl_kld *k) {
    double lp, lp_unc, lb, lb_unc, kl, kl_unc, mse, mse_unc;
    ppl_mean_unc(k->sum_nll, k->sum_nll2, k->count, &lp, &lp_unc);
    ppl_mean_unc(k->sum_nll_base, k->sum_nll_base2, k->count, &lb, &lb_unc);
    ppl_mean_unc(k->sum_kld, k->sum_kld2, k->count, &kl, &kl_unc);
    ppl_mean_unc(k->sum_p_diff2, k->sum_p_diff4, k->count, &mse, &mse_unc);
    double cov = ppl_cov(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    double rms = sqrt(mse), top = (double)k->n_same_top / (double)k->count;
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
           chunk, exp(lp), exp(lp) * lp_unc, lp - lb, sqrt(lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov), kl, kl_unc,
           100.0 * rms, 100.0 * 0.5 / rms * mse_unc, 100.0 * top,
           100.0 * sqrt(top * (1 - top) / (double)(k->count - 1)));
    fflush(stdout);
}

static void ppl_kld_summary(const struct ppl_kld *k, float *kld, float *p_diff, size_t n) {
    qsort(kld, n, sizeof(float), ppl_cmp_float);
    qsort(p_diff, n, sizeof(float), ppl_cmp_float);
    double lp, lp_unc, lb, lb_unc, kl, kl_unc, pd, pd_unc, mse, mse_unc;
    ppl_mean_unc(k->sum_nll, k->sum_nll2, k->count, &lp, &lp_unc);
    ppl_mean_unc(k->sum_nll_base, k->sum_nll_base2, k->count, &lb, &lb_unc);
    double ppl = exp(lp), ppl_unc = ppl * lp_unc, ppl_b = exp(lb), ppl_b_unc = ppl_b * lb_unc;
    double cov = ppl_cov(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    double ratio = lp - lb, ratio_unc = sqrt(lp_unc * lp_unc + lb_unc * lb_unc - 2.0 * cov);
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_unc);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_b, ppl_b_unc);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cov / (lp_unc * lb_unc));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", ratio, ratio_unc);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(ratio), exp(ratio) * ratio_unc);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", ppl - ppl_b,
           sqrt(ppl_unc * ppl_unc + ppl_b_unc * ppl_b_unc - 2.0 * ppl * ppl_b * cov));
    printf("\n====== KL divergence statistics ======\n");
    ppl_mean_unc(k->sum_kld, k->sum_kld2, k->count, &kl, &kl_unc);
    printf("Mean    KLD: %10.6f ± %10.6f\n", kl, kl_unc);
    printf("Maximum KLD: %10.6f\n", (double)kld[n - 1]);
    static const float fr[] = {0.999f, 0.990f, 0.950f, 0.900f};
    static const char *fr_name[] = {"99.9%", "99.0%", "95.0%", "90.0%"};
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", fr_name[i], (double)ppl_percentile(kld, n, fr[i]));
    printf("Median  KLD: %10.6f\n", (double)ppl_median(kld, n));
    static const float lo[] = {0.100f, 0.050f, 0.010f, 0.001f};
    static const char *lo_name[] = {"10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", lo_name[i], (double)ppl_percentile(kld, n, lo[i]));
    printf("Minimum KLD: %10.6f\n", (double)kld[0]);
    printf("\n====== Token probability statistics ======\n");
    ppl_mean_unc(k->sum_p_diff, k->sum_p_diff2, k->count, &pd, &pd_unc);
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * pd, 100.0 * pd_unc);
    printf("Maximum Δp: %6.3f%%\n", 100.0 * p_diff[n - 1]);
    static const float pf[] = {0.999f, 0.990f, 0.950f, 0.900f, 0.750f};
    static const char *pf_name[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%"};
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3f%%\n", pf_name[i], 100.0 * ppl_percentile(p_diff, n, pf[i]));
    printf("Median  Δp: %6.3f%%\n", 100.0 * ppl_median(p_diff, n));
    static const float pl[] = {0.250f, 0.100f, 0.050f, 0.010f, 0.001f};
    static const char *pl_name[] = {"25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3f%%\n", pl_name[i], 100.0 * ppl_percentile(p_diff, n, pl[i]));
    printf("Minimum Δp: %6.3f%%\n", 100.0 * p_diff[0]);
    ppl_mean_unc(k->sum_p_diff2, k->sum_p_diff4, k->count, &mse, &mse_unc);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * sqrt(mse), 100.0 * 0.5 / sqrt(mse) * mse_unc);
    double top = (double)k->n_same_top / (double)k->count;
    printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * top, 100.0 * sqrt(top * (1.0 - top) / (double)(k->count - 1)));
}

static void ppl_read(FILE *f, const char *path, void *p, size_t n, const char *what) {
    if (fread(p, 1, n, f) != n)
        cli_die("%s: %s (the file ends early: not a complete base file of llm perplexity or llama-perplexity)",
                path, what);
}

// One run of llm perplexity: the tokens, how they are cut into chunks, the buffers a chunk is
// evaluated with, and the running sums.
struct ppl_run {
    bool kld;                  // --kl-divergence: this model against the base file's
    FILE *base;                // --kl-divergence: the base file, read as the chunks go
    FILE *out;                 // --kl-divergence-base alone: the base file written
    int32_t *tokens;
    int n_tokens, n_ctx, n_vocab_file, n_chunk_file;
    llm_engine *E;
    int n_vocab, add_bos, bos_id;
    int first, n_scored, n_chunk, batch;   // the scored positions of a chunk: first .. n_ctx - 2
    size_t nv;                 // uint16 per base-file record
    uint16_t *recs;            // batch records
    float *kld_vals, *p_diff_vals;   // --kl-divergence: per scored position
    float *logits;             // batch rows
    int32_t *chunk;
    double nll, nll2;
    long long count;
    struct ppl_kld k;
};

// The flags perplexity needs: a text (-f) or, with --kl-divergence, a base file.
static void ppl_check_flags(const struct cli *c) {
    if (c->kl_divergence && !c->kld_base)
        cli_die("--kl-divergence needs --kl-divergence-base FILE: the base model's log-probabilities, written by "
                "llm perplexity --kl-divergence-base FILE (without --kl-divergence) or llama-perplexity");
    if (!c->kl_divergence && !c->prompt_file) cli_die("perplexity: no text given: use -f FILE");
    if (c->tokens || c->prompt) cli_die("perplexity: the text comes from a file: use -f FILE");
}

// --kl-divergence: the base file's header and tokens, checked before the model is loaded; the
// file is left at the first record.
static void ppl_open_base(const struct cli *c, struct ppl_run *r) {
    r->base = fopen(c->kld_base, "rb");
    if (!r->base) cli_die("cannot open '%s': %s", c->kld_base, strerror(errno));
    char magic[8];
    int32_t hdr[3];
    ppl_read(r->base, c->kld_base, magic, 8, "no header");
    if (memcmp(magic, "_logits_", 8))
        cli_die("%s: not a base file of log-probabilities (it does not start with \"_logits_\")", c->kld_base);
    ppl_read(r->base, c->kld_base, hdr, sizeof(hdr), "no header");
    if (hdr[0] < 3 || hdr[0] > (1 << 24) || hdr[1] < 1 || hdr[2] < 1)
        cli_die("%s: a header that makes no sense (n_ctx %d, n_vocab %d, %d chunks)", c->kld_base, hdr[0], hdr[1],
                hdr[2]);
    if (c->ctx_set && hdr[0] != r->n_ctx)
        cli_die("%s was computed with a context of %d tokens, not %d (-c): leave -c out or give -c %d",
                c->kld_base, hdr[0], r->n_ctx, hdr[0]);
    r->n_ctx = hdr[0];
    r->n_vocab_file = hdr[1];
    r->n_chunk_file = hdr[2];
    // the size the header promises (in double: a corrupt header must not overflow), checked
    // before anything is allocated for it
    double want = 20.0 + 4.0 * r->n_chunk_file * r->n_ctx +
                  2.0 * r->n_chunk_file * (r->n_ctx - 1 - r->n_ctx / 2) * (2.0 * ((r->n_vocab_file + 1LL) / 2) + 4);
    if (fseeko(r->base, 0, SEEK_END) != 0) cli_die("cannot read '%s': %s", c->kld_base, strerror(errno));
    double have = (double)ftello(r->base);
    if (have < want)
        cli_die("%s is cut short: its header (n_ctx %d, n_vocab %d, %d chunks) needs %.0f bytes, it has %.0f",
                c->kld_base, r->n_ctx, r->n_vocab_file, r->n_chunk_file, want, have);
    if ((int64_t)r->n_chunk_file * r->n_ctx > INT32_MAX) cli_die("%s: too many tokens", c->kld_base);
    if (fseeko(r->base, 20, SEEK_SET) != 0) cli_die("cannot read '%s': %s", c->kld_base, strerror(errno));
    r->n_tokens = r->n_chunk_file * r->n_ctx;
    if (!(r->tokens = malloc((size_t)r->n_tokens * sizeof(int32_t)))) cli_die("out of memory");
    ppl_read(r->base, c->kld_base, r->tokens, (size_t)r->n_tokens * sizeof(int32_t), "its tokens are cut short");
    if (c->prompt_file)
        fprintf(stderr, "llm: note: --kl-divergence evaluates the tokens of %s; -f %s is not read\n",
                c->kld_base, c->prompt_file);
}

// The tokens to evaluate: the base file's (checked against this vocabulary), or the text of -f.
static void ppl_tokens(const struct cli *c, struct ppl_run *r) {
    if (r->kld) {
        if (r->n_vocab_file != r->n_vocab)
            cli_die("%s was made with a vocabulary of %d tokens; %s has %d: a base file compares models of the same "
                    "vocabulary", c->kld_base, r->n_vocab_file, c->ep.model_path, r->n_vocab);
        for (int i = 0; i < r->n_tokens; i++)
            if (r->tokens[i] < 0 || r->tokens[i] >= r->n_vocab)
                cli_die("%s: token %d is %d, outside this vocabulary of %d tokens", c->kld_base, i, r->tokens[i],
                        r->n_vocab);
        return;
    }
    size_t len;
    char *text = cli_read_file(c->prompt_file, CLI_MAX_INPUT, &len);
    if (len > 0 && text[len - 1] == '\n') text[--len] = 0;   // as llama.cpp's -f
    int n = llm_tokenize(r->E, text, len, LLM_TOKENIZE_ADD_SPECIAL, NULL, 0);
    if (n < 0) cli_die("%s: %s", c->prompt_file, llm_last_error(r->E));
    if (!(r->tokens = malloc(((size_t)n + 1) * sizeof(int32_t)))) cli_die("out of memory");
    r->n_tokens = llm_tokenize(r->E, text, len, LLM_TOKENIZE_ADD_SPECIAL, r->tokens, n);
    free(text);
    // llama-perplexity's rule, kept so that the same -c and text give the same chunks
    if (r->n_tokens < 2 * r->n_ctx)
        cli_die("%s has %d tokens: perplexity with a context of %d tokens needs at least %d (2 x -c, as "
                "llama-perplexity); use a longer text or a smaller -c", c->prompt_file, r->n_tokens, r->n_ctx,
                2 * r->n_ctx);
}

// The chunks (how many, the scored positions, the batch), the base file to write (its header and
// tokens), and the buffers.
static void ppl_prepare(const struct cli *c, struct ppl_run *r) {
    r->first = r->n_ctx / 2;
    r->n_scored = r->n_ctx - 1 - r->first;
    r->n_chunk = r->kld ? r->n_chunk_file : r->n_tokens / r->n_ctx;
    if (c->chunks > 0 && c->chunks < r->n_chunk) r->n_chunk = c->chunks;
    r->batch = CLI_MIN(c->batch > 0 ? c->batch : 2048, r->n_ctx);
    r->nv = 2 * (((size_t)r->n_vocab + 1) / 2) + 4;
    if (!r->kld && c->kld_base) {
        r->out = fopen(c->kld_base, "wb");
        if (!r->out) cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
        int32_t hdr[3] = {r->n_ctx, r->n_vocab, r->n_chunk};
        size_t n = (size_t)r->n_chunk * (size_t)r->n_ctx;
        if (fwrite("_logits_", 1, 8, r->out) != 8 || fwrite(hdr, sizeof(hdr), 1, r->out) != 1 ||
            fwrite(r->tokens, sizeof(int32_t), n, r->out) != n)
            cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
    }
    if (c->kld_base && !(r->recs = malloc((size_t)r->batch * r->nv * sizeof(uint16_t)))) cli_die("out of memory");
    size_t n_vals = (size_t)r->n_chunk * (size_t)r->n_scored;
    if (r->kld && (!(r->kld_vals = malloc(n_vals * sizeof(float))) ||
                   !(r->p_diff_vals = malloc(n_vals * sizeof(float)))))
        cli_die("out of memory");
    r->logits = malloc((size_t)r->batch * (size_t)r->n_vocab * sizeof(float));
    r->chunk = malloc((size_t)r->n_ctx * sizeof(int32_t));
    if (!r->logits || !r->chunk) cli_die("out of memory");
}

// The n rows of logits of chunk ci from position i on: each scored against the token after it
// (against the base record, or into the sums and the base file written).
static void ppl_score_rows(const struct cli *c, struct ppl_run *r, int ci, int i, int n) {
    for (int j = 0; j < n; j++) {
        const float *row = r->logits + (size_t)j * (size_t)r->n_vocab;
        int next = r->chunk[i + j + 1];
        if (r->kld) {
            ppl_read(r->base, c->kld_base, r->recs, r->nv * sizeof(uint16_t), "its log-probabilities are cut short");
            size_t at = (size_t)ci * (size_t)r->n_scored + (size_t)(i + j - r->first);
            ppl_kld_row(r->n_vocab, row, r->recs, next, &r->k, r->kld_vals + at, r->p_diff_vals + at);
        } else {
            double v = r->out ? ppl_log_probs_u16(r->n_vocab, row, r->recs + (size_t)j * r->nv, next)
                              : -ppl_log_softmax(r->n_vocab, row, next);
            r->nll += v;
            r->nll2 += v * v;
        }
    }
    if (r->out && fwrite(r->recs, r->nv * sizeof(uint16_t), (size_t)n, r->out) != (size_t)n)
        cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
}

// Chunk ci, evaluated alone in a new sequence, its second half scored.
static void ppl_eval_chunk(const struct cli *c, struct ppl_run *r, int ci) {
    memcpy(r->chunk, r->tokens + (size_t)ci * (size_t)r->n_ctx, (size_t)r->n_ctx * sizeof(int32_t));
    if (r->add_bos) r->chunk[0] = r->bos_id;
    int seq = llm_seq_new(r->E);
    if (seq < 0) cli_die("%s", llm_last_error(r->E));
    // the first half needs no logits; the second half's logits come batch rows at a time
    // (the last token's are not used, so it is not evaluated)
    for (int i = 0; i < r->n_ctx - 1;) {
        int n = CLI_MIN(r->batch, (i < r->first ? r->first : r->n_ctx - 1) - i);
        bool want = i >= r->first;
        if (llm_seq_eval(r->E, seq, r->chunk + i, n, want ? r->logits : NULL, want) != LLM_OK)
            cli_die("chunk %d: %s", ci + 1, llm_last_error(r->E));
        if (want) ppl_score_rows(c, r, ci, i, n);
        i += n;
    }
    llm_seq_free(r->E, seq);
}

// After the chunks: the final estimate, or --kl-divergence's summary statistics.
static void ppl_finish(struct ppl_run *r) {
    printf("\n");
    if (r->kld) {
        if (r->k.count >= 100) {
            printf("\n");
            ppl_kld_summary(&r->k, r->kld_vals, r->p_diff_vals, r->k.count);
        } else {
            fprintf(stderr, "llm: %zu scored tokens: too few for the summary statistics (100 at least, as "
                            "llama-perplexity)\n", r->k.count);
        }
        return;
    }
    double mean = r->nll / (double)r->count, var = r->nll2 / (double)r->count - mean * mean, ppl = exp(mean);
    if (var > 0) {
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, sqrt(var / (double)(r->count - 1)) * ppl);
    } else {
        fprintf(stderr, "llm: the log-probabilities have no spread (variance %g): no error estimate\n", var);
        printf("Final estimate: PPL = %.4f\n", ppl);
    }
}

int cli_cmd_perplexity(struct cli *c) {
    ppl_check_flags(c);
    struct ppl_run r;
    memset(&r, 0, sizeof(r));
    r.kld = c->kl_divergence;
    r.n_ctx = c->ctx_set ? c->ep.max_model_len : 512;
    if (r.kld) ppl_open_base(c, &r);
    if (r.n_ctx < 3)
        cli_die("perplexity: -c %d is too short: a chunk of n_ctx tokens scores its last n_ctx/2 - 1 (-c 3 at least)",
                r.n_ctx);

    c->ep.max_model_len = r.n_ctx;
    if (!c->ep.max_num_seqs) c->ep.max_num_seqs = 1;
    r.E = cli_engine(c);
    struct llm_model_info mi;
    llm_get_model_info(r.E, &mi);
    r.n_vocab = mi.n_vocab;
    r.add_bos = mi.add_bos && mi.bos_id >= 0;
    r.bos_id = mi.bos_id;
    ppl_tokens(c, &r);
    ppl_prepare(c, &r);

    fprintf(stderr, "llm: perplexity over %d chunks of %d tokens (of %d), scoring the last %d of each, batch %d\n",
            r.n_chunk, r.n_ctx, r.n_tokens, r.n_scored, r.batch);
    if (r.kld)
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
               "            Same top p\n");
    double t0 = cli_now();
    for (int ci = 0; ci < r.n_chunk; ci++) {
        ppl_eval_chunk(c, &r, ci);
        if (ci == 0) fprintf(stderr, "llm: %.2f seconds per chunk\n", cli_now() - t0);
        if (r.kld) {
            ppl_kld_line(ci + 1, &r.k);
        } else {
            r.count += r.n_scored;
            printf("[%d]%.4f,", ci + 1, exp(r.nll / (double)r.count));
            fflush(stdout);
        }
    }
    ppl_finish(&r);
    if (r.out && fclose(r.out) != 0) cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
    if (r.base) fclose(r.base);
    free(r.logits);
    free(r.chunk);
    free(r.recs);
    free(r.kld_vals);
    free(r.p_diff_vals);
    free(r.tokens);
    llm_engine_free(r.E);
    return 0;
}
