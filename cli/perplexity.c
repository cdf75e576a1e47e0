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

int cli_cmd_perplexity(struct cli *c) {
    const bool kld = c->kl_divergence;
    if (kld && !c->kld_base)
        cli_die("--kl-divergence needs --kl-divergence-base FILE: the base model's log-probabilities, written by "
                "llm perplexity --kl-divergence-base FILE (without --kl-divergence) or llama-perplexity");
    if (!kld && !c->prompt_file) cli_die("perplexity: no text given: use -f FILE");
    if (c->tokens || c->prompt) cli_die("perplexity: the text comes from a file: use -f FILE");

    int n_ctx = c->ctx_set ? c->ep.max_model_len : 512, n_vocab_file = 0, n_chunk_file = 0;
    FILE *base = NULL;
    int32_t *tokens = NULL;
    int n_tokens = 0;
    if (kld) {
        // the base file's header, checked before the model is loaded
        base = fopen(c->kld_base, "rb");
        if (!base) cli_die("cannot open '%s': %s", c->kld_base, strerror(errno));
        char magic[8];
        int32_t hdr[3];
        ppl_read(base, c->kld_base, magic, 8, "no header");
        if (memcmp(magic, "_logits_", 8))
            cli_die("%s: not a base file of log-probabilities (it does not start with \"_logits_\")", c->kld_base);
        ppl_read(base, c->kld_base, hdr, sizeof(hdr), "no header");
        if (hdr[0] < 3 || hdr[0] > (1 << 24) || hdr[1] < 1 || hdr[2] < 1)
            cli_die("%s: a header that makes no sense (n_ctx %d, n_vocab %d, %d chunks)", c->kld_base, hdr[0], hdr[1],
                    hdr[2]);
        if (c->ctx_set && hdr[0] != n_ctx)
            cli_die("%s was computed with a context of %d tokens, not %d (-c): leave -c out or give -c %d",
                    c->kld_base, hdr[0], n_ctx, hdr[0]);
        n_ctx = hdr[0];
        n_vocab_file = hdr[1];
        n_chunk_file = hdr[2];
        // the size the header promises (in double: a corrupt header must not overflow), checked
        // before anything is allocated for it
        double want = 20.0 + 4.0 * n_chunk_file * n_ctx +
                      2.0 * n_chunk_file * (n_ctx - 1 - n_ctx / 2) * (2.0 * ((n_vocab_file + 1LL) / 2) + 4);
        if (fseeko(base, 0, SEEK_END) != 0) cli_die("cannot read '%s': %s", c->kld_base, strerror(errno));
        double have = (double)ftello(base);
        if (have < want)
            cli_die("%s is cut short: its header (n_ctx %d, n_vocab %d, %d chunks) needs %.0f bytes, it has %.0f",
                    c->kld_base, n_ctx, n_vocab_file, n_chunk_file, want, have);
        if ((int64_t)n_chunk_file * n_ctx > INT32_MAX) cli_die("%s: too many tokens", c->kld_base);
        if (fseeko(base, 20, SEEK_SET) != 0) cli_die("cannot read '%s': %s", c->kld_base, strerror(errno));
        n_tokens = n_chunk_file * n_ctx;
        if (!(tokens = malloc((size_t)n_tokens * sizeof(int32_t)))) cli_die("out of memory");
        ppl_read(base, c->kld_base, tokens, (size_t)n_tokens * sizeof(int32_t), "its tokens are cut short");
        if (c->prompt_file)
            fprintf(stderr, "llm: note: --kl-divergence evaluates the tokens of %s; -f %s is not read\n",
                    c->kld_base, c->prompt_file);
    }
    if (n_ctx < 3) cli_die("perplexity: -c %d is too short: a chunk of n_ctx tokens scores its last n_ctx/2 - 1 (-c 3 at least)", n_ctx);

    c->ep.max_model_len = n_ctx;
    if (!c->ep.max_num_seqs) c->ep.max_num_seqs = 1;
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    const int n_vocab = mi.n_vocab;
    const int add_bos = mi.add_bos && mi.bos_id >= 0;

    if (kld) {
        if (n_vocab_file != n_vocab)
            cli_die("%s was made with a vocabulary of %d tokens; %s has %d: a base file compares models of the same "
                    "vocabulary", c->kld_base, n_vocab_file, c->ep.model_path, n_vocab);
        for (int i = 0; i < n_tokens; i++)
            if (tokens[i] < 0 || tokens[i] >= n_vocab)
                cli_die("%s: token %d is %d, outside this vocabulary of %d tokens", c->kld_base, i, tokens[i], n_vocab);
    } else {
        size_t len;
        char *text = cli_read_file(c->prompt_file, CLI_MAX_INPUT, &len);
        if (len > 0 && text[len - 1] == '\n') text[--len] = 0;   // as llama.cpp's -f
        int n = llm_tokenize(E, text, len, LLM_TOKENIZE_ADD_SPECIAL, NULL, 0);
        if (n < 0) cli_die("%s: %s", c->prompt_file, llm_last_error(E));
        if (!(tokens = malloc(((size_t)n + 1) * sizeof(int32_t)))) cli_die("out of memory");
        n_tokens = llm_tokenize(E, text, len, LLM_TOKENIZE_ADD_SPECIAL, tokens, n);
        free(text);
        // llama-perplexity's rule, kept so that the same -c and text give the same chunks
        if (n_tokens < 2 * n_ctx)
            cli_die("%s has %d tokens: perplexity with a context of %d tokens needs at least %d (2 x -c, as "
                    "llama-perplexity); use a longer text or a smaller -c", c->prompt_file, n_tokens, n_ctx, 2 * n_ctx);
    }

    const int first = n_ctx / 2, n_scored = n_ctx - 1 - first;
    int n_chunk = kld ? n_chunk_file : n_tokens / n_ctx;
    if (c->chunks > 0 && c->chunks < n_chunk) n_chunk = c->chunks;
    const int batch = CLI_MIN(c->batch > 0 ? c->batch : 2048, n_ctx);
    const size_t nv = 2 * (((size_t)n_vocab + 1) / 2) + 4;   // uint16 per base-file record

    FILE *out = NULL;
    uint16_t *recs = NULL;
    float *kld_vals = NULL, *p_diff_vals = NULL;
    if (!kld && c->kld_base) {
        out = fopen(c->kld_base, "wb");
        if (!out) cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
        int32_t hdr[3] = {n_ctx, n_vocab, n_chunk};
        if (fwrite("_logits_", 1, 8, out) != 8 || fwrite(hdr, sizeof(hdr), 1, out) != 1 ||
            fwrite(tokens, sizeof(int32_t), (size_t)n_chunk * (size_t)n_ctx, out) != (size_t)n_chunk * (size_t)n_ctx)
            cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
    }
    if (c->kld_base && !(recs = malloc((size_t)batch * nv * sizeof(uint16_t)))) cli_die("out of memory");
    if (kld && (!(kld_vals = malloc((size_t)n_chunk * (size_t)n_scored * sizeof(float))) ||
                !(p_diff_vals = malloc((size_t)n_chunk * (size_t)n_scored * sizeof(float)))))
        cli_die("out of memory");
    float *logits = malloc((size_t)batch * (size_t)n_vocab * sizeof(float));
    int32_t *chunk = malloc((size_t)n_ctx * sizeof(int32_t));
    if (!logits || !chunk) cli_die("out of memory");

    fprintf(stderr, "llm: perplexity over %d chunks of %d tokens (of %d), scoring the last %d of each, batch %d\n",
            n_chunk, n_ctx, n_tokens, n_scored, batch);
    if (kld)
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
               "            Same top p\n");
    double nll = 0, nll2 = 0, t0 = cli_now();
    long long count = 0;
    struct ppl_kld k;
    memset(&k, 0, sizeof(k));
    for (int ci = 0; ci < n_chunk; ci++) {
        memcpy(chunk, tokens + (size_t)ci * (size_t)n_ctx, (size_t)n_ctx * sizeof(int32_t));
        if (add_bos) chunk[0] = mi.bos_id;
        int seq = llm_seq_new(E);
        if (seq < 0) cli_die("%s", llm_last_error(E));
        // the first half needs no logits; the second half's logits come batch rows at a time
        // (the last token's are not used, so it is not evaluated)
        for (int i = 0; i < n_ctx - 1;) {
            int n = CLI_MIN(batch, (i < first ? first : n_ctx - 1) - i);
            bool want = i >= first;
            if (llm_seq_eval(E, seq, chunk + i, n, want ? logits : NULL, want) != LLM_OK)
                cli_die("chunk %d: %s", ci + 1, llm_last_error(E));
            for (int r = 0; want && r < n; r++) {
                const float *row = logits + (size_t)r * (size_t)n_vocab;
                int next = chunk[i + r + 1];
                if (kld) {
                    ppl_read(base, c->kld_base, recs, nv * sizeof(uint16_t), "its log-probabilities are cut short");
                    size_t at = (size_t)ci * (size_t)n_scored + (size_t)(i + r - first);
                    ppl_kld_row(n_vocab, row, recs, next, &k, kld_vals + at, p_diff_vals + at);
                } else {
                    double v = out ? ppl_log_probs_u16(n_vocab, row, recs + (size_t)r * nv, next)
                                   : -ppl_log_softmax(n_vocab, row, next);
                    nll += v;
                    nll2 += v * v;
                }
            }
            if (want && out && fwrite(recs, nv * sizeof(uint16_t), (size_t)n, out) != (size_t)n)
                cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
            i += n;
        }
        llm_seq_free(E, seq);
        if (ci == 0) fprintf(stderr, "llm: %.2f seconds per chunk\n", cli_now() - t0);
        if (kld) {
            ppl_kld_line(ci + 1, &k);
        } else {
            count += n_scored;
            printf("[%d]%.4f,", ci + 1, exp(nll / (double)count));
            fflush(stdout);
        }
    }
    printf("\n");
    int rc = 0;
    if (kld) {
        if (k.count >= 100) {
            printf("\n");
            ppl_kld_summary(&k, kld_vals, p_diff_vals, k.count);
        } else {
            fprintf(stderr, "llm: %zu scored tokens: too few for the summary statistics (100 at least, as "
                            "llama-perplexity)\n", k.count);
        }
    } else {
        double mean = nll / (double)count, var = nll2 / (double)count - mean * mean, ppl = exp(mean);
        if (var > 0) {
            printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, sqrt(var / (double)(count - 1)) * ppl);
        } else {
            fprintf(stderr, "llm: the log-probabilities have no spread (variance %g): no error estimate\n", var);
            printf("Final estimate: PPL = %.4f\n", ppl);
        }
    }
    if (out && fclose(out) != 0) cli_die("cannot write '%s': %s", c->kld_base, strerror(errno));
    if (base) fclose(base);
    free(logits);
    free(chunk);
    free(recs);
    free(kld_vals);
    free(p_diff_vals);
    free(tokens);
    llm_engine_free(E);
    return rc;
}
