// The serving core. The block manager alone, with no model and no backend: allocation until
// exhaustion, reference counts of shared prefixes, hash hits confirmed by tokens (a forged
// collision does not match), LRU eviction order, truncation, release of everything, and 5,000
// random operations checked against a simple model of the state. Then the engine: the step's
// arrays (several logit rows per sequence, as draft verification needs), the scheduler
// (admission limits, chunked prefill, priority order, preemption under memory pressure with the
// same outputs as an unconstrained run, a too-long prompt rejected alone; the order of admission
// and preemption against a reference under random arrivals, priorities and aborts; the cost of
// scheduling 20,000 requests by priority against FCFS), prefix caching (the
// same outputs with and without it; hits counted), batching (every request's greedy output is
// the one it gets alone), finish reasons, stop strings, log-probabilities, parse_special.
#include "../llm.c"
#include "test.h"

// --- the block manager alone ---

static void test_blocks_alloc(void) {
    struct llm__blocks bm;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__blocks_init(&bm, 0, 4, false, &e) == LLM_ERR_INVALID_ARG, "no blocks accepted");
    EXPECT(llm__blocks_init(&bm, 12, 4, false, &e) == LLM_OK, "init: %s", e.msg);
    // every block can be handed out once; then none
    int32_t got[12];
    for (int i = 0; i < 12; i++) got[i] = llm__block_alloc(&bm);
    EXPECT(llm__block_alloc(&bm) == -1, "a block beyond the pool");
    int ok = 1;
    for (int i = 0; i < 12; i++) {
        ok &= got[i] >= 0 && got[i] < 12 && bm.ref[got[i]] == 1;
        for (int j = 0; j < i; j++) ok &= got[i] != got[j];
    }
    EXPECT(ok, "blocks handed out twice or out of range");
    for (int i = 0; i < 12; i++) llm__block_release(&bm, got[i]);
    EXPECT(bm.n_free == 12 && bm.n_lru == 0, "after release: %d free, %d cached", bm.n_free, bm.n_lru);
    // sequences: can_allocate answers for whole blocks; allocate grows the table, not the length
    struct llm__seq a = {0}, b = {0}, c = {0};
    EXPECT(llm__blocks_can_allocate(&bm, &a, 48) && !llm__blocks_can_allocate(&bm, &a, 49), "48 tokens fit, 49 do not");
    EXPECT(llm__blocks_allocate(&bm, &a, 5) && a.n_blocks == 2 && a.len == 0, "a: %d blocks, len %d", a.n_blocks, a.len);
    a.len = 5;
    EXPECT(llm__blocks_allocate(&bm, &b, 40) && b.n_blocks == 10, "b: %d blocks", b.n_blocks);
    b.len = 40;
    EXPECT(llm__blocks_available(&bm) == 0, "%d blocks left of 12", llm__blocks_available(&bm));
    EXPECT(llm__blocks_can_allocate(&bm, &a, 3) && !llm__blocks_can_allocate(&bm, &a, 4) && !llm__blocks_can_allocate(&bm, &c, 1),
           "a full pool: only room left in a's last block");
    EXPECT(llm__blocks_allocate(&bm, &a, 3) && a.n_blocks == 2, "growing within the last block took a block");
    // truncation gives back the blocks past the new length
    llm__blocks_truncate(&bm, &b, 9);
    EXPECT(b.len == 9 && b.n_blocks == 3 && llm__blocks_available(&bm) == 7, "truncated to 9: %d blocks, %d free", b.n_blocks,
           llm__blocks_available(&bm));
    EXPECT(llm__blocks_can_allocate(&bm, &c, 28) && !llm__blocks_can_allocate(&bm, &c, 29), "after truncation: 7 blocks free");
    llm__blocks_release(&bm, &a);
    llm__blocks_release(&bm, &b);
    llm__blocks_release(&bm, &c);
    int refs = 0;
    for (int i = 0; i < 12; i++) refs += bm.ref[i];
    EXPECT(refs == 0 && bm.n_free == 12 && a.n_blocks == 0 && !a.blocks, "release: %d references, %d free", refs, bm.n_free);
    llm__blocks_free(&bm);
}

// A sequence of len tokens (toks) with its blocks, the full ones committed.
static void seq_fill(struct llm__blocks *bm, struct llm__seq *s, const int32_t *toks, int len) {
    int hit = llm__blocks_take_prefix(bm, s, toks, len);
    EXPECT(llm__blocks_can_allocate(bm, s, len - hit) && llm__blocks_allocate(bm, s, len - hit), "allocate %d", len - hit);
    s->len = len;
    llm__blocks_commit(bm, s, toks);
}

static void test_blocks_prefix(void) {
    struct llm__blocks bm;
    struct llm__err e = {{0}, LLM_OK};
    const int bs = 4, nb = 16;
    EXPECT(llm__blocks_init(&bm, nb, bs, true, &e) == LLM_OK, "init: %s", e.msg);
    int32_t toks[13];
    for (int i = 0; i < 13; i++) toks[i] = 100 + i;
    struct llm__seq a = {0}, b = {0}, c = {0}, d = {0};
    seq_fill(&bm, &a, toks, 12);
    EXPECT(a.n_committed == 3 && bm.hashed[a.blocks[0]] && bm.hashed[a.blocks[2]], "%d blocks committed", a.n_committed);
    uint64_t h0 = llm__block_hash(0, toks, bs);
    EXPECT(llm__block_find(&bm, h0, 0, toks) == a.blocks[0], "first block not found");
    int32_t other[4] = {100, 101, 102, 104};
    EXPECT(llm__block_find(&bm, h0, 0, other) == -1, "a hash hit was not confirmed by the tokens");
    EXPECT(llm__block_find(&bm, h0, 1, toks) == -1, "a hash hit was not confirmed by the parent");
    // shared prefixes: whole blocks, never the block of the last token
    EXPECT(llm__blocks_take_prefix(&bm, &b, toks, 12) == 8 && b.len == 8 && b.n_committed == 2, "b: prefix of %d tokens", b.len);
    EXPECT(bm.ref[a.blocks[0]] == 2 && bm.ref[a.blocks[1]] == 2 && bm.ref[a.blocks[2]] == 1, "reference counts %d %d %d",
           bm.ref[a.blocks[0]], bm.ref[a.blocks[1]], bm.ref[a.blocks[2]]);
    EXPECT(llm__blocks_take_prefix(&bm, &c, toks, 13) == 12, "c: prefix of %d tokens", c.len);
    EXPECT(bm.ref[a.blocks[0]] == 3 && bm.ref[a.blocks[2]] == 2, "reference counts %d %d", bm.ref[a.blocks[0]], bm.ref[a.blocks[2]]);
    // b writes its third block itself: a new one, not a's
    EXPECT(llm__blocks_allocate(&bm, &b, 4) && b.n_blocks == 3 && b.blocks[2] != a.blocks[2] && bm.ref[b.blocks[2]] == 1,
           "b's own last block");
    b.len = 12;
    llm__blocks_commit(&bm, &b, toks);   // the same content is cached already: b's block stays out of the cache
    EXPECT(!bm.hashed[b.blocks[2]], "a duplicate block entered the cache");
    // released blocks stay cached (LRU) and are found again; the duplicate goes to the free list
    llm__blocks_release(&bm, &a);
    llm__blocks_release(&bm, &b);
    llm__blocks_release(&bm, &c);
    EXPECT(bm.n_lru == 3 && bm.n_free == nb - 3, "cached %d, free %d", bm.n_lru, bm.n_free);
    EXPECT(llm__blocks_take_prefix(&bm, &d, toks, 13) == 12 && bm.n_lru == 0, "cached blocks not reused (%d in the LRU list)", bm.n_lru);
    // a hash collision: d's second block is filed under the hash the other tokens have; a lookup
    // of those tokens reaches it by hash and parent and must still not take it
    int32_t forged[8] = {100, 101, 102, 103, 7, 7, 7, 7};
    uint64_t hf = llm__block_hash(h0, forged + 4, bs);
    int32_t b1 = d.blocks[1];
    llm__hash_remove(&bm, b1);
    bm.hash[b1] = hf;
    bm.bnext[b1] = bm.bucket[hf & bm.bucket_mask];
    bm.bucket[hf & bm.bucket_mask] = b1;
    bm.hashed[b1] = 1;
    struct llm__seq f = {0};
    EXPECT(llm__blocks_take_prefix(&bm, &f, forged, 8) == 4 && f.blocks[0] == d.blocks[0],
           "a colliding hash with other tokens matched: prefix of %d tokens", f.len);
    llm__blocks_release(&bm, &f);
    llm__blocks_release(&bm, &d);
    int refs = 0;
    for (int i = 0; i < nb; i++) refs += bm.ref[i];
    EXPECT(refs == 0 && bm.n_free + bm.n_lru == nb, "leak: %d references, %d free + %d cached", refs, bm.n_free, bm.n_lru);
    llm__blocks_free(&bm);
}

static void test_blocks_lru(void) {
    struct llm__blocks bm;
    struct llm__err e = {{0}, LLM_OK};
    const int bs = 4, nb = 8;
    EXPECT(llm__blocks_init(&bm, nb, bs, true, &e) == LLM_OK, "init: %s", e.msg);
    // four one-block prompts (5 tokens: the first block is full), released in the order 2, 0, 3, 1
    int32_t toks[4][5];
    struct llm__seq s[4] = {{0}};
    int32_t blk[4];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 5; j++) toks[i][j] = 10 * i + j;
        seq_fill(&bm, &s[i], toks[i], 5);
        blk[i] = s[i].blocks[0];
    }
    const int order[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++) llm__blocks_release(&bm, &s[order[i]]);
    EXPECT(bm.n_lru == 4 && bm.n_free == 4, "cached %d, free %d", bm.n_lru, bm.n_free);
    // using prompt 0 again makes its block the most recent: 2, 3, 1, 0
    struct llm__seq t = {0};
    EXPECT(llm__blocks_take_prefix(&bm, &t, toks[0], 5) == 4, "prompt 0 not cached");
    llm__blocks_release(&bm, &t);
    // free blocks go first: the cached ones survive
    int32_t got[8];
    for (int i = 0; i < 4; i++) got[i] = llm__block_alloc(&bm);
    int found = 0;
    for (int i = 0; i < 4; i++) found += llm__block_find(&bm, llm__block_hash(0, toks[i], bs), 0, toks[i]) == blk[i];
    EXPECT(found == 4, "a cached block was evicted while free ones were left (%d of 4 found)", found);
    // then the least recently used, each no longer found by its own tokens; the others still are
    const int evict[4] = {2, 3, 1, 0};
    for (int i = 0; i < 4; i++) {
        int v = evict[i];
        got[4 + i] = llm__block_alloc(&bm);
        EXPECT(got[4 + i] == blk[v], "eviction %d: block %d, want %d (prompt %d's)", i, got[4 + i], blk[v], v);
        EXPECT(!bm.hashed[blk[v]] && llm__block_find(&bm, llm__block_hash(0, toks[v], bs), 0, toks[v]) == -1,
               "the evicted block of prompt %d is still found by its tokens", v);
        for (int j = i + 1; j < 4; j++)
            EXPECT(llm__block_find(&bm, llm__block_hash(0, toks[evict[j]], bs), 0, toks[evict[j]]) == blk[evict[j]],
                   "prompt %d's block lost before its turn", evict[j]);
    }
    EXPECT(llm__block_alloc(&bm) == -1 && bm.n_lru == 0 && bm.n_free == 0, "a block beyond the pool");
    for (int i = 0; i < 8; i++) llm__block_release(&bm, got[i]);
    EXPECT(bm.n_free == nb && bm.n_lru == 0, "after release: %d free, %d cached", bm.n_free, bm.n_lru);
    llm__blocks_free(&bm);
}

// The random stress: a model of the state (per block: references, cached or not, the whole token
// prefix it stands for, when it became unused) checked against the block manager after every
// operation: grow, new sequences with shared prefixes, truncation, release.
enum { SB = 4, SN = 32, SSEQ = 10, SMAX = 8 * SB };
struct smodel {
    int ref[SN];
    bool hashed[SN];
    int plen[SN];
    int32_t prefix[SN][SMAX];
    long long unused_at[SN];   // the time its count dropped to zero (cached blocks: LRU order)
    long long clock;
};

static int smodel_find(const struct smodel *m, const int32_t *toks, int len) {
    for (int b = 0; b < SN; b++)
        if (m->hashed[b] && m->plen[b] == len && !memcmp(m->prefix[b], toks, (size_t)len * sizeof(int32_t))) return b;
    return -1;
}

static void smodel_release(struct smodel *m, int32_t b) {
    if (--m->ref[b] == 0) m->unused_at[b] = ++m->clock;
}

// Checks the manager's choice of a new block against the model, then takes it in the model.
static bool smodel_alloc(struct smodel *m, int32_t b) {
    bool any_free = false;
    int32_t oldest = -1;
    for (int i = 0; i < SN; i++) {
        if (m->ref[i]) continue;
        if (!m->hashed[i]) any_free = true;
        else if (oldest < 0 || m->unused_at[i] < m->unused_at[oldest]) oldest = i;
    }
    bool ok = b >= 0 && b < SN && m->ref[b] == 0 && (any_free ? !m->hashed[b] : b == oldest);
    if (b >= 0 && b < SN) { m->hashed[b] = false; m->ref[b] = 1; }
    return ok;
}

static bool smodel_check(const struct smodel *m, const struct llm__blocks *bm, const struct llm__seq *live) {
    int n_free = 0, n_lru = 0, uses[SN] = {0};
    bool ok = true;
    for (int k = 0; k < SSEQ; k++) for (int i = 0; i < live[k].n_blocks; i++) uses[live[k].blocks[i]]++;
    for (int b = 0; b < SN; b++) {
        ok &= bm->ref[b] == m->ref[b] && uses[b] == m->ref[b];
        ok &= !bm->caching || (bm->hashed[b] != 0) == m->hashed[b];
        if (!m->ref[b]) { if (m->hashed[b]) n_lru++; else n_free++; }
    }
    ok &= bm->n_free == n_free && bm->n_lru == n_lru;
    long long last = 0;
    int n = 0;
    for (int32_t b = bm->lru_head; b >= 0 && n <= SN; b = bm->lru_next[b], n++) {   // oldest first
        ok &= m->ref[b] == 0 && m->hashed[b] && m->unused_at[b] > last;
        last = m->unused_at[b];
    }
    return ok && (!bm->caching || n == n_lru);
}

static void test_blocks_stress(bool caching) {
    struct llm__blocks bm;
    struct llm__err e = {{0}, LLM_OK};
    EXPECT(llm__blocks_init(&bm, SN, SB, caching, &e) == LLM_OK, "init: %s", e.msg);
    static struct smodel m;
    memset(&m, 0, sizeof(m));
    struct llm__seq live[SSEQ] = {{0}};
    int32_t toks[SSEQ][SMAX];
    unsigned long long s = caching ? 7 : 8;
    int bad = 0, n_hits = 0, n_full = 0, n_evict = 0;
    for (int it = 0; it < 5000 && bad < 5; it++) {
        int k = (int)(test_rng_next(&s) % SSEQ), op = (int)(test_rng_next(&s) % 8);
        struct llm__seq *q = &live[k];
        int n = 0;
        bool fresh = false;
        if (q->n_blocks && op < 2) {   // release
            for (int i = q->n_blocks - 1; i >= 0; i--) smodel_release(&m, q->blocks[i]);
            llm__blocks_release(&bm, q);
        } else if (q->n_blocks && op == 2) {   // truncate, never into committed blocks
            int lo = q->n_committed * SB, len = lo + (int)(test_rng_next(&s) % (unsigned)(q->len - lo + 1));
            for (int i = q->n_blocks - 1; i >= (len + SB - 1) / SB; i--) smodel_release(&m, q->blocks[i]);
            llm__blocks_truncate(&bm, q, len);
        } else if (!q->n_blocks) {   // a new sequence: one of 4 prompt families sharing 3 blocks
            int fam = (int)(test_rng_next(&s) % 4);
            for (int j = 0; j < SMAX; j++) toks[k][j] = fam * 1000 + (j < 3 * SB ? j : (int)(test_rng_next(&s) % 3));
            int len = 1 + (int)(test_rng_next(&s) % SMAX), want = 0;
            while (caching && (want + 1) * SB <= len - 1 && smodel_find(&m, toks[k], (want + 1) * SB) >= 0) want++;
            int hit = llm__blocks_take_prefix(&bm, q, toks[k], len);
            bad += hit != want * SB || q->len != hit;
            n_hits += hit > 0;
            for (int i = 0; i < q->n_blocks; i++) {
                bad += q->blocks[i] != smodel_find(&m, toks[k], (i + 1) * SB);
                m.ref[q->blocks[i]]++;
            }
            n = len - hit;
            fresh = true;
        } else {   // grow
            n = LLM__MIN(1 + (int)(test_rng_next(&s) % 6), SMAX - q->len);
        }
        if (n > 0) {
            int avail = 0;
            for (int b = 0; b < SN; b++) avail += m.ref[b] == 0;
            int need = LLM__MAX((q->len + n + SB - 1) / SB - q->n_blocks, 0);
            bool can = llm__blocks_can_allocate(&bm, q, n);
            bad += can != (need <= avail);
            n_full += !can;
            if (can) {
                int had = q->n_blocks;
                EXPECT(llm__blocks_allocate(&bm, q, n), "allocate");
                bad += q->n_blocks != had + need;
                for (int i = had; i < q->n_blocks; i++) {
                    n_evict += m.hashed[q->blocks[i]];
                    bad += !smodel_alloc(&m, q->blocks[i]);
                }
                q->len += n;
                int c0 = q->n_committed;
                llm__blocks_commit(&bm, q, toks[k]);
                for (int i = c0; caching && i < q->len / SB; i++)
                    if (smodel_find(&m, toks[k], (i + 1) * SB) < 0) {
                        int32_t b = q->blocks[i];
                        m.hashed[b] = true;
                        m.plen[b] = (i + 1) * SB;
                        memcpy(m.prefix[b], toks[k], (size_t)m.plen[b] * sizeof(int32_t));
                    }
            } else if (fresh) {   // it does not fit: its prefix blocks go back
                for (int i = q->n_blocks - 1; i >= 0; i--) smodel_release(&m, q->blocks[i]);
                llm__blocks_release(&bm, q);
            }
        }
        if (!smodel_check(&m, &bm, live)) { bad++; fprintf(stderr, "stress: state differs after operation %d\n", it); }
    }
    EXPECT(bad == 0, "caching %d: %d differences from the model of the state", caching, bad);
    EXPECT(n_full > 50 && (!caching || (n_hits > 100 && n_evict > 20)), "the stress missed cases: %d full, %d hits, %d evictions",
           n_full, n_hits, n_evict);
    for (int k = 0; k < SSEQ; k++) llm__blocks_release(&bm, &live[k]);
    int refs = 0;
    for (int i = 0; i < SN; i++) refs += bm.ref[i];
    EXPECT(refs == 0 && bm.n_free + bm.n_lru == SN, "leak: %d references, %d free + %d cached", refs, bm.n_free, bm.n_lru);
    llm__blocks_free(&bm);
}

// --- the engine ---

// The model of engine() and engine_threads(): tiny-q8_0, or the one test_invariants names while it runs.
static const char *model_file = "tiny-q8_0";
static enum llm_kv_dtype kv_dtype = LLM_KV_F16;   // the engines' KV cache (test_invariants)

static const char *model_path(void) {
    static char path[512];
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, model_file);
    return path;
}

static llm_engine *engine_threads(int n_threads, int max_seqs, int max_tokens, size_t kv_bytes, int caching,
                                  const char *policy) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = model_path();
    p.n_threads = n_threads;
    p.max_num_seqs = max_seqs;
    p.max_num_batched_tokens = max_tokens;
    p.kv_cache_bytes = kv_bytes;
    p.enable_prefix_caching = caching;
    p.scheduling_policy = strcmp(policy, "priority") == 0 ? LLM_SCHED_PRIORITY : LLM_SCHED_FCFS;
    p.max_model_len = 256;
    p.kv_cache_dtype = kv_dtype;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "engine: %s", err);
    return E;
}

static llm_engine *engine(int max_seqs, int max_tokens, size_t kv_bytes, int caching, const char *policy) {
    return engine_threads(2, max_seqs, max_tokens, kv_bytes, caching, policy);
}

// Prompts: random tokens; those of a group share their first `shared` tokens.
enum { NP = 12 };
static int32_t prompts[NP][96];
static int prompt_len[NP];

static void make_prompts(int n_vocab, int shared) {
    unsigned long long s = 42;
    for (int i = 0; i < NP; i++) {
        prompt_len[i] = 20 + (int)(test_rng_next(&s) % 70);
        for (int j = 0; j < prompt_len[i]; j++) prompts[i][j] = 3 + (int)(test_rng_next(&s) % (unsigned)(n_vocab - 3));
        if (i > 0 && shared) memcpy(prompts[i], prompts[0], sizeof(int32_t) * (size_t)LLM__MIN(shared, prompt_len[i]));
        prompts[i][0] = 1;
    }
}

static struct llm_request_params greedy(int max_tokens) {
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = max_tokens;
    rp.ignore_eos = 1;
    return rp;
}

// Runs every prompt through llm_generate (greedy, ignore_eos, max_tokens each) and keeps the tokens.
static void run_all(llm_engine *E, int n, const int *which, int max_tokens, int32_t out[][40]) {
    struct llm_prompt pr[NP];
    struct llm_request_params rp[NP];
    struct llm_result res[NP];
    for (int i = 0; i < n; i++) {
        pr[i] = (struct llm_prompt){NULL, prompts[which[i]], prompt_len[which[i]]};
        rp[i] = greedy(max_tokens);
    }
    enum llm_status st = llm_generate(E, pr, n, rp, res);
    EXPECT(st == LLM_OK, "generate: %s", llm_last_error(E));
    for (int i = 0; i < n; i++) {
        EXPECT(res[i].n_tokens == max_tokens && res[i].finish_reason == LLM_FINISH_LENGTH, "request %d: %d tokens, %s", i,
               res[i].n_tokens, llm_finish_reason_str(res[i].finish_reason));
        memcpy(out[which[i]], res[i].tokens, sizeof(int32_t) * (size_t)LLM__MIN(res[i].n_tokens, 40));
    }
    llm_results_free(res, n);
}

// --- speculative decoding (n-gram drafts) ---

static llm_engine *engine_spec_draft(int max_seqs, int max_tokens, size_t kv_bytes, int caching, int k, const char *path,
                                     int max_model_len, int lookup_min, const char *draft) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = path;
    p.n_threads = 2;
    p.max_num_seqs = max_seqs;
    p.max_num_batched_tokens = max_tokens;
    p.kv_cache_bytes = kv_bytes;
    p.enable_prefix_caching = caching;
    p.max_model_len = max_model_len;
    p.speculative_ngram = !draft;
    p.speculative_model = draft;
    p.num_speculative_tokens = k;
    p.prompt_lookup_min = lookup_min;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(E != NULL, "engine with speculation: %s", err);
    if (E) E->spec.always = true;   // every draft verified: the checks see many (the cost model is tested apart)
    return E;
}

static llm_engine *engine_spec_n(int max_seqs, int max_tokens, size_t kv_bytes, int caching, int k, const char *path,
                                 int max_model_len, int lookup_min) {
    return engine_spec_draft(max_seqs, max_tokens, kv_bytes, caching, k, path, max_model_len, lookup_min, NULL);
}

static llm_engine *engine_spec(int max_seqs, int max_tokens, size_t kv_bytes, int caching, int k, const char *path,
                               int max_model_len) {
    return engine_spec_n(max_seqs, max_tokens, kv_bytes, caching, k, path, max_model_len, 2);
}

static const char *model_named(const char *name) {
    static char path[4][512];
    static int i;
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    i = (i + 1) % 4;
    snprintf(path[i], sizeof(path[i]), "%s/%s.gguf", dir, name);
    return path[i];
}

static long long spec_sum(const long long *v) {
    long long s = 0;
    for (int i = 0; i < 16; i++) s += v[i];
    return s;
}

// Greedy outputs with n-gram drafts equal those without, alone, batched, with prefix caching,
// chunked prefill and preemption; drafts were both kept and rejected; no block is left behind.
// want: each prompt's tokens without speculation, alone.
static void test_spec_greedy(const int32_t want[][40], size_t per_token, const char *draft) {
    static int32_t got[NP][40];
    int all[NP];
    for (int i = 0; i < NP; i++) all[i] = i;
    struct { const char *what; int seqs, tokens, caching; size_t kv; } cfg[] = {
        {"alone", 1, 512, 0, 0}, {"batched", 64, 512, 0, 0}, {"prefix caching", 64, 512, 1, 0},
        {"chunked prefill", 3, 16, 0, 0}, {"preemption", 64, 512, 0, per_token * 16 * 24},
    };
    for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
        llm_engine *E = engine_spec_draft(cfg[c].seqs, cfg[c].tokens, cfg[c].kv, cfg[c].caching, 4, model_path(), 256, 2, draft);
        if (!E) return;
        if (!strcmp(cfg[c].what, "alone")) for (int i = 0; i < NP; i++) run_all(E, 1, &all[i], 32, got);
        else run_all(E, NP, all, 32, got);
        if (cfg[c].caching) run_all(E, NP, all, 32, got);   // again, from the cache
        struct llm_engine_stats st;
        llm_get_stats(E, &st);
        int same = 0;
        for (int i = 0; i < NP; i++) same += !memcmp(want[i], got[i], sizeof(int32_t) * 32);
        EXPECT(same == NP, "speculation (%s), %s: %d of %d greedy outputs equal those without", draft ? "draft model" : "n-gram",
               cfg[c].what, same, NP);
        long long prop = spec_sum(st.spec_proposed), acc = spec_sum(st.spec_accepted);
        EXPECT(acc > 0 && prop > acc, "speculation, %s: %lld drafts proposed, %lld kept: the check needs both kept and "
               "rejected ones", cfg[c].what, prop, acc);
        EXPECT(st.spec_verify_seconds > 0 && st.spec_draft_seconds > 0,
               "speculation, %s: %.6f s verifying, %.6f s drafting", cfg[c].what, st.spec_verify_seconds, st.spec_draft_seconds);
        EXPECT(st.spec_emitted >= st.spec_verifications && st.spec_emitted <= acc + st.spec_verifications,
               "speculation, %s: %lld tokens from %lld verifications with %lld kept drafts", cfg[c].what, st.spec_emitted,
               st.spec_verifications, acc);
        for (int j = 1; j < 16; j++)
            EXPECT(st.spec_proposed[j] <= st.spec_proposed[j - 1] && st.spec_accepted[j] <= st.spec_proposed[j],
                   "speculation, %s: position %d proposed %lld, kept %lld (position %d: %lld)", cfg[c].what, j,
                   st.spec_proposed[j], st.spec_accepted[j], j - 1, st.spec_proposed[j - 1]);
        if (!strcmp(cfg[c].what, "preemption")) EXPECT(st.n_preemptions > 0, "speculation: no preemption");
        // what the cache holds after speculating is what the tokens say: the prompts followed by
        // their outputs, continued, give what an engine without drafts gives (the ends of the
        // outputs, where a request stopped right after a rejected draft, are read from the cache)
        if (cfg[c].caching) {
            static int32_t longer[NP][144];
            struct llm_prompt pr[NP];
            struct llm_request_params rp[NP];
            struct llm_result res[NP], ref[NP];
            // first, requests that stop at a stop token: one of their greedy tokens that fills a
            // block (the last of its 16 positions) and has not come before, so that the block is
            // full and committed when they stop; a stop may come right after a rejected draft, whose
            // KV must not enter the cache with the stop token
            int32_t stop_tok[NP];
            for (int i = 0; i < NP; i++) {
                pr[i] = (struct llm_prompt){NULL, prompts[i], prompt_len[i]};
                rp[i] = greedy(32);
                stop_tok[i] = want[i][20];
                for (int j = 31; j >= 4; j--) {
                    bool first = true;
                    for (int x = 0; x < j; x++) first &= want[i][x] != want[i][j];
                    if (first && (prompt_len[i] + j + 1) % 16 == 0) stop_tok[i] = want[i][j];
                }
                rp[i].stop_token_ids = &stop_tok[i];
                rp[i].n_stop_token_ids = 1;
            }
            EXPECT(llm_generate(E, pr, NP, rp, res) == LLM_OK, "generate: %s", llm_last_error(E));
            int n_out[NP];
            for (int i = 0; i < NP; i++) {
                n_out[i] = res[i].n_tokens;
                memcpy(longer[i], prompts[i], sizeof(int32_t) * (size_t)prompt_len[i]);
                memcpy(longer[i] + prompt_len[i], res[i].tokens, sizeof(int32_t) * (size_t)res[i].n_tokens);
                memcpy(longer[i] + prompt_len[i] + n_out[i], prompts[i] + 1, sizeof(int32_t) * 5);   // a next turn
                pr[i] = (struct llm_prompt){NULL, longer[i], prompt_len[i] + n_out[i] + 5};
                rp[i] = greedy(8);
            }
            llm_results_free(res, NP);
            EXPECT(llm_generate(E, pr, NP, rp, res) == LLM_OK, "generate: %s", llm_last_error(E));
            llm_engine *R = engine(64, 512, 0, 0, "fcfs");
            EXPECT(R && llm_generate(R, pr, NP, rp, ref) == LLM_OK, "generate without drafts");
            int eq = 0;
            for (int i = 0; i < NP; i++) eq += res[i].n_tokens == 8 && ref[i].n_tokens == 8 && !memcmp(res[i].tokens, ref[i].tokens, 32);
            EXPECT(eq == NP, "speculation (%s), prefix caching: %d of %d continuations of prompt + output equal those without drafts",
                   draft ? "draft model" : "n-gram", eq, NP);
            llm_results_free(res, NP);
            llm_results_free(ref, NP);
            llm_engine_free(R);
        }
        // the same random weights at Q4_0 guess about 30% of Q8_0's greedy tokens (random models'
        // logits are close: the types' roundings flip them); a draft cache that is not rolled back
        // with the request's guesses 11-17%
        if (draft) EXPECT(acc >= 0.22 * prop, "speculation (draft model), %s: %lld of %lld drafts kept", cfg[c].what, acc, prop);
        EXPECT(st.kv_blocks_used == 0, "speculation, %s: %d blocks still used", cfg[c].what, st.kv_blocks_used);
        if (draft) {
            struct llm_engine_stats ds;
            llm_get_stats(E->spec.draft, &ds);
            EXPECT(ds.kv_blocks_used == 0, "speculation, %s: %d of the draft's blocks still used", cfg[c].what, ds.kv_blocks_used);
        }
        // a request that asks for none proposes none
        if (c == 1) {
            struct llm_prompt pr = {NULL, prompts[0], prompt_len[0]};
            struct llm_request_params rp = greedy(32);
            rp.num_speculative_tokens = -1;
            struct llm_result res;
            EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK && res.n_tokens == 32 && !memcmp(res.tokens, want[0], 32 * 4),
                   "a request without speculation: %s", llm_last_error(E));
            llm_results_free(&res, 1);
            struct llm_engine_stats st2;
            llm_get_stats(E, &st2);
            EXPECT(spec_sum(st2.spec_proposed) == prop, "a request with num_speculative_tokens -1 proposed drafts");
            rp.num_speculative_tokens = 17;
            EXPECT(llm_add_request(E, &pr, &rp) < 0 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "num_speculative_tokens 17 accepted");
        }
        llm_engine_free(E);
    }
}

// The chi-square statistic of two samples over the same categories (counts a, b; totals na, nb),
// categories with fewer than 10 in both merged into one; df in *df.
static double chi2_two(const int *a, const int *b, int n, double na, double nb, int *df) {
    double x = 0.0, ra = 0.0, rb = 0.0;
    int k = 0;
    for (int i = 0; i <= n; i++) {
        double ca = i < n ? a[i] : ra, cb = i < n ? b[i] : rb;
        if (i < n && ca + cb < 10) { ra += ca; rb += cb; continue; }
        if (ca + cb == 0) continue;
        double e = (ca + cb);
        double ea = e * na / (na + nb), eb = e * nb / (na + nb);
        x += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
        k++;
    }
    *df = k - 1;
    return x;
}

// The chi-square value a statistic with df degrees of freedom exceeds with probability 0.001
// (Wilson-Hilferty).
static double chi2_crit(int df) {
    double z = 3.0902, h = 2.0 / (9.0 * df);
    return df * pow(1.0 - h + z * sqrt(h), 3.0);
}

// Drafts never evict a cached prefix block: with no free block left, the drafts of a request
// that would need a new block are not verified, and the cache keeps what it held. A (48 tokens,
// 3 full blocks) is cached; B (59 tokens) takes the 4 free blocks; B's first decode step has
// n-gram drafts (lookup from 1 token: B's prompt holds the token the model decodes after it,
// found first with an engine without drafts) that would cross into a fifth block.
static void test_spec_keeps_cache(size_t per_token) {
    enum { LB = 59 };
    int32_t a[48], b[LB];
    for (int i = 0; i < 48; i++) a[i] = 3 + (i * 37) % 400;
    a[0] = 1;
    // a prompt that holds the model's next token early enough for 7 tokens to follow it: the
    // token it decodes is written into the prompt's start, until it decodes one already there
    for (int i = 0; i < LB; i++) b[i] = 500 + (i % 7) * 3;
    b[0] = 1;
    llm_engine *P = engine(1, 512, 0, 0, "fcfs");
    bool found = false;
    for (int it = 0; it < 40 && !found && P; it++) {
        struct llm_prompt pr = {NULL, b, LB};
        struct llm_request_params rp = greedy(1);
        struct llm_result res;
        if (llm_generate(P, &pr, 1, &rp, &res) != LLM_OK) break;
        for (int i = 1; i < LB - 8 && res.n_tokens == 1; i++) found |= b[i] == res.tokens[0];
        if (!found && res.n_tokens == 1) b[1 + it] = res.tokens[0];
        llm_results_free(&res, 1);
    }
    llm_engine_free(P);
    EXPECT(found, "no prompt that holds the model's next token (40 tried)");
    if (!found) return;
    llm_engine *E = engine_spec_n(4, 512, per_token * 16 * 7, 1, 16, model_path(), 256, 1);
    if (!E) return;
    struct llm_prompt pa = {NULL, a, 48}, pb = {NULL, b, LB};
    struct llm_request_params rp = greedy(1);
    struct llm_result res;
    EXPECT(llm_generate(E, &pa, 1, &rp, &res) == LLM_OK, "A: %s", llm_last_error(E));
    llm_results_free(&res, 1);
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    EXPECT(st.kv_blocks_total == 7 && st.kv_blocks_cached == 3, "A cached: %d blocks of %d (want 3 of 7)", st.kv_blocks_cached,
           st.kv_blocks_total);
    rp = greedy(20);
    int id = llm_add_request(E, &pb, &rp);
    const struct llm_output *out;
    EXPECT(id >= 0 && llm_step(E, &out) == 1, "B's prompt step");
    llm_step(E, &out);   // B's first decode step: drafts proposed, no free block for them
    llm_get_stats(E, &st);
    EXPECT(st.kv_blocks_cached == 3, "B's drafts evicted cached prefix blocks: %d of 3 left", st.kv_blocks_cached);
    llm_abort_request(E, id);
    while (llm_has_unfinished_requests(E)) llm_step(E, &out);
    // A again: its whole prefix (2 blocks: the last token is computed again) from the cache
    rp = greedy(1);
    EXPECT(llm_generate(E, &pa, 1, &rp, &res) == LLM_OK && res.n_cached_tokens == 32, "A again: %d tokens from the cache (want 32)",
           res.n_cached_tokens);
    llm_results_free(&res, 1);
    llm_engine_free(E);
}

// The cost model that decides how many drafts a step verifies (llm__spec_choose, llm__step_time)
// on made-up step times: verifying is free -> all drafts, with any acceptance worth having; time
// proportional to tokens -> none; a machine like this one (a 1.1B Q8_0 step of 1, 4, 8, 64
// tokens: 26, 32, 58, 146 ms) -> a few drafts alone at high acceptance, none at 5% (a first draft costs 8%)
// or in a batch of 64.
static void test_spec_cost_model(llm_engine *E) {
    // a step size's first step is not measured (memory touched for the first time, the thread
    // pool warming up for the size): a 7-token prompt, then 3 decode steps
    {
        const int32_t toks[7] = {1, 5, 9, 13, 17, 21, 25};
        struct llm_prompt pr = {NULL, toks, 7};
        struct llm_request_params rp = greedy(4);
        rp.num_speculative_tokens = -1;
        const struct llm_output *out;
        EXPECT(llm_add_request(E, &pr, &rp) >= 0, "add: %s", llm_last_error(E));
        int steps = 0;
        double t1_after[4] = {0};
        while (llm_has_unfinished_requests(E) && steps < 4) {
            llm_step(E, &out);
            t1_after[steps++] = E->spec.t_step[1];
        }
        EXPECT(steps == 4 && E->spec.t_step[7] == 0.0 && t1_after[1] == 0.0 && t1_after[2] > 0.0,
               "first steps measured: t(7) %g after the prompt's only step; t(1) %g after the first decode step, %g after the second",
               E->spec.t_step[7], t1_after[1], t1_after[2]);
    }
    double saved[LLM__TSTEP + 1], gain;
    memcpy(saved, E->spec.t_step, sizeof(saved));
    memset(E->spec.t_step, 0, sizeof(E->spec.t_step));
    for (int t = 1; t <= 16; t++) E->spec.t_step[t] = 1.0;
    EXPECT(llm__spec_choose(E, 1, 1, 0.5, 4, &gain) == 4 && fabs(gain - 0.9375) < 1e-9, "free verification: not all 4 drafts");
    EXPECT(llm__spec_choose(E, 1, 1, 0.2, 4, &gain) == 4, "free verification, 20%% kept: not all 4");
    EXPECT(llm__spec_choose(E, 1, 1, 0.05, 4, &gain) == 0, "free verification, 5%% kept: drafts (a 5%% gain is within the margin)");
    for (int t = 1; t <= 16; t++) E->spec.t_step[t] = t;
    EXPECT(llm__spec_choose(E, 1, 1, 0.9, 4, &gain) == 0, "time proportional to tokens: drafts verified");
    EXPECT(fabs(llm__step_time(E, 20) - 20.0) < 1e-9, "extrapolated time %g for 20 tokens (want 20)", llm__step_time(E, 20));
    // a prompt's step far above says little about small steps: the optimistic guess instead
    memset(E->spec.t_step, 0, sizeof(E->spec.t_step));
    E->spec.t_step[1] = 2.0;
    E->spec.t_step[128] = 240.0;
    EXPECT(fabs(llm__step_time(E, 5) - 2.8) < 1e-9, "t(5) with t(1) = 2 and t(128) = 240 measured: %g (want 2.8)", llm__step_time(E, 5));
    EXPECT(fabs(llm__step_time(E, 80) - 240.0 * 79 / 127 - 2.0 * 48 / 127) < 1e-6, "t(80): interpolated %g", llm__step_time(E, 80));
    memset(E->spec.t_step, 0, sizeof(E->spec.t_step));
    E->spec.t_step[1] = 26; E->spec.t_step[4] = 32; E->spec.t_step[8] = 58; E->spec.t_step[64] = 146;
    EXPECT(fabs(llm__step_time(E, 2) - 28.0) < 1e-9 && fabs(llm__step_time(E, 6) - 45.0) < 1e-9, "interpolated times %g, %g",
           llm__step_time(E, 2), llm__step_time(E, 6));
    int k_hi = llm__spec_choose(E, 1, 1, 0.8, 8, &gain), k_lo = llm__spec_choose(E, 1, 1, 0.05, 8, &gain);
    int k_batch = llm__spec_choose(E, 64, 64, 0.6, 4, &gain);
    EXPECT(k_hi >= 2 && k_hi <= 4, "alone, 80%% kept: %d drafts (want 2-4: 4 tokens cost little, 8 much)", k_hi);
    EXPECT(k_lo == 0, "alone, 5%% kept: %d drafts (one costs 8%%)", k_lo);
    EXPECT(k_batch == 0, "a batch of 64, 60%% kept: %d drafts", k_batch);
    memcpy(E->spec.t_step, saved, sizeof(saved));
    // a draft model's probes: while its forced rounds took at most 2% of the steps' time
    double busy = E->spec.t_busy, forced = E->spec.t_forced;
    E->spec.t_busy = 10.0;
    E->spec.t_forced = 0.15;
    bool under = llm__spec_probe_allowed(E);
    E->spec.t_forced = 0.25;
    bool over = llm__spec_probe_allowed(E);
    EXPECT(under && !over, "probes after 0.15 s and 0.25 s of forced drafts in 10 s of steps: %d, %d (want 1, 0)", under, over);
    E->spec.t_busy = busy;
    E->spec.t_forced = forced;
}

// The verification of a draft (llm__sampler_verify) emits tokens with the sampler's own
// distribution, whatever the draft: against llm_sampler_sample on the same logits (40 tokens),
// several chains (penalties over a history), drafts likely, unlikely and outside top-k; a
// two-sample chi-square test at p = 0.001, and the share of kept drafts equal to p(draft).
static void test_spec_verify_distribution(void) {
    enum { V = 40, N = 40000 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)(2.5 * sin(1.7 * i) + 0.05 * i);
    struct { const char *what; float temp; int top_k; float top_p, min_p, presence, repeat; } chains[] = {
        {"temperature 1", 1.0f, 0, 1.0f, 0.0f, 0.0f, 1.0f},
        {"temperature 0.6, top-k 6", 0.6f, 6, 1.0f, 0.0f, 0.0f, 1.0f},
        {"temperature 1.3, top-p 0.8, min-p 0.02", 1.3f, 0, 0.8f, 0.02f, 0.0f, 1.0f},
        {"temperature 1, presence 0.8, repetition 1.5", 1.0f, 0, 1.0f, 0.0f, 0.8f, 1.5f},
    };
    const int32_t hist[3] = {3, 5, 3};
    for (size_t c = 0; c < sizeof(chains) / sizeof(chains[0]); c++) {
        struct llm_sampling_params sp = llm_sampling_params_default();
        sp.temperature = chains[c].temp;
        sp.top_k = chains[c].top_k;
        sp.top_p = chains[c].top_p;
        sp.min_p = chains[c].min_p;
        sp.presence_penalty = chains[c].presence;
        sp.repeat_penalty = chains[c].repeat;
        llm_sampler *ref = llm_sampler_create(&sp, V);
        sp.seed = 99;
        llm_sampler *ver = llm_sampler_create(&sp, V);
        // p under the chain (with the history), to choose drafts and check the kept share
        for (int h = 0; h < 3; h++) llm_sampler_accept(ver, hist[h]);
        double sum;
        int m = llm__sampler_dist(ver, logits, &sum);
        double p[V] = {0};
        for (int i = 0; i < m; i++) p[ver->idx[i]] = ver->probs[i] / sum;
        int best = 0, mid = -1, zero = -1;
        for (int i = 1; i < V; i++) if (p[i] > p[best]) best = i;
        for (int i = 0; i < V; i++) if (i != best && p[i] > 0.05 && p[i] < 0.5 && (mid < 0 || p[i] > p[mid])) mid = i;
        for (int i = 0; i < V; i++) if (p[i] == 0.0) zero = i;
        int drafts[3] = {best, mid, zero};
        for (int d = 0; d < 3; d++) {
            if (drafts[d] < 0) continue;
            static int a[V], b[V];
            memset(a, 0, sizeof(a));
            memset(b, 0, sizeof(b));
            int kept = 0, consistent = 1;
            for (int n = 0; n < N; n++) {
                llm_sampler_reset(ref);
                llm_sampler_reset(ver);
                for (int h = 0; h < 3; h++) { llm_sampler_accept(ref, hist[h]); llm_sampler_accept(ver, hist[h]); }
                a[llm_sampler_sample(ref, logits)]++;
                bool acc;
                int32_t t = llm__sampler_verify(ver, logits, drafts[d], NULL, &acc);
                b[t]++;
                kept += acc;
                consistent &= acc == (t == drafts[d]);
            }
            EXPECT(consistent, "%s: verify said kept for another token than the draft, or the reverse", chains[c].what);
            int df;
            double x = chi2_two(a, b, V, N, N, &df);
            double pd = p[drafts[d]], tol = 4.0 * sqrt(pd * (1.0 - pd) / N) + 1e-9;
            EXPECT(df >= 1 && x < chi2_crit(df), "%s, draft %d (p %.3f): chi-square %.1f, %d degrees of freedom (limit %.1f)",
                   chains[c].what, drafts[d], pd, x, df, df >= 1 ? chi2_crit(df) : 0.0);
            EXPECT(fabs((double)kept / N - pd) <= tol, "%s, draft %d: kept %.4f of the time, p(draft) %.4f", chains[c].what,
                   drafts[d], (double)kept / N, pd);
        }
        // a draft drawn from a distribution q (a draft model's): min(1, p/q), else max(0, p - q)
        static float q[V];
        unsigned long long rs = 7 + c;
        double qs = 0.0;
        for (int i = 0; i < V; i++) qs += (q[i] = (float)(0.05 + (test_rng_next(&rs) % 1000) / 1000.0 * (i % 3 ? 1.0 : 4.0)));
        for (int i = 0; i < V; i++) q[i] = (float)(q[i] / qs);
        static int a[V], b[V];
        memset(a, 0, sizeof(a));
        memset(b, 0, sizeof(b));
        int consistent = 1;
        for (int n = 0; n < N; n++) {
            llm_sampler_reset(ref);
            llm_sampler_reset(ver);
            for (int h = 0; h < 3; h++) { llm_sampler_accept(ref, hist[h]); llm_sampler_accept(ver, hist[h]); }
            a[llm_sampler_sample(ref, logits)]++;
            // the draft: drawn from q with the test's generator
            double u = (double)(test_rng_next(&rs) >> 11) / 9007199254740992.0, acc_q = 0.0;
            int32_t d = V - 1;
            for (int i = 0; i < V; i++) { acc_q += q[i]; if (u < acc_q) { d = i; break; } }
            bool acc;
            int32_t t = llm__sampler_verify(ver, logits, d, q, &acc);
            b[t]++;
            consistent &= acc == (t == d);
        }
        int df;
        double x = chi2_two(a, b, V, N, N, &df);
        EXPECT(consistent, "%s: verify with q said kept for another token than the draft", chains[c].what);
        EXPECT(df >= 1 && x < chi2_crit(df), "%s, drafts from q: chi-square %.1f, %d degrees of freedom (limit %.1f)",
               chains[c].what, x, df, df >= 1 ? chi2_crit(df) : 0.0);
        llm_sampler_free(ref);
        llm_sampler_free(ver);
    }
}

// A draft model whose vocabulary is not the model's is refused at load, with the reason.
static void test_spec_draft_errors(void) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512] = "";
    p.model_path = model_path();
    p.speculative_model = model_named("micro-q8_0");
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(!E && strstr(err, "draft model") && strstr(err, "vocabular"), "a draft with another vocabulary: %s", E ? "accepted" : err);
    llm_engine_free(E);
    p.speculative_model = model_named("no-such-model");
    E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(!E && strstr(err, "draft model"), "a missing draft model: %s", E ? "accepted" : err);
    llm_engine_free(E);
    p.speculative_model = model_named("tiny-q4_0");
    p.speculative_ngram = 1;
    E = llm_engine_create(&p, err, sizeof(err));
    EXPECT(!E && strstr(err, "choose one"), "a draft model and n-gram drafts: %s", E ? "accepted" : err);
    llm_engine_free(E);
}

// Sampling with speculation has the distribution of sampling without: on the micro model (300
// tokens), a prompt whose end repeats (so n-gram drafts are proposed at once), many seeds; the
// first two generated tokens, with and without drafts, under several sampler chains; a
// two-sample chi-square test at p = 0.001 for each position.
static void test_spec_distribution(void) {
    char path[512];
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, sizeof(path), "%s/micro-q8_0.gguf", dir);
    enum { N = 3000, V = 300 };
    int32_t prompt[24] = {1};
    for (int i = 1; i < 24; i++) prompt[i] = 10 + (i - 1) % 5;   // 10 11 12 13 14 10 11 ...
    struct { const char *what; float temp; int top_k; float top_p, presence, repeat; } chains[] = {
        {"temperature 1", 1.0f, 0, 1.0f, 0.0f, 1.0f},
        {"temperature 0.7, top-k 8, top-p 0.9", 0.7f, 8, 0.9f, 0.0f, 1.0f},
        {"temperature 1.2, presence 1, repetition 1.3", 1.2f, 0, 1.0f, 1.0f, 1.3f},
    };
    static int cnt[3][2][V];
    static struct llm_prompt pr[N];
    static struct llm_request_params rp[N];
    static struct llm_result res[N];
    for (size_t c = 0; c < sizeof(chains) / sizeof(chains[0]); c++) {
        memset(cnt, 0, sizeof(cnt));
        long long kept[3] = {0}, proposed[3] = {0};
        for (int spec = 0; spec < 3; spec++) {   // none, n-gram drafts, a draft model (micro-lq-q4_1)
            llm_engine *E = engine_spec_draft(256, 4096, 0, 0, spec ? 4 : 0, path, 64, 1, spec == 2 ? model_named("micro-lq-q4_1") : NULL);
            if (!E) return;
            for (int i = 0; i < N; i++) {
                pr[i] = (struct llm_prompt){NULL, prompt, 24};
                rp[i] = llm_request_params_default();
                rp[i].max_tokens = 6;
                rp[i].ignore_eos = 1;
                rp[i].sampling.temperature = chains[c].temp;
                rp[i].sampling.top_k = chains[c].top_k;
                rp[i].sampling.top_p = chains[c].top_p;
                rp[i].sampling.presence_penalty = chains[c].presence;
                rp[i].sampling.repeat_penalty = chains[c].repeat;
                rp[i].sampling.seed = 1000003ull * (uint64_t)i + (uint64_t)spec;
                rp[i].num_speculative_tokens = spec ? 0 : -1;
            }
            EXPECT(llm_generate(E, pr, N, rp, res) == LLM_OK, "generate: %s", llm_last_error(E));
            for (int i = 0; i < N; i++) {
                if (res[i].n_tokens != 6) continue;
                cnt[spec][0][res[i].tokens[2]]++;
                cnt[spec][1][res[i].tokens[5]]++;
            }
            llm_results_free(res, N);
            struct llm_engine_stats st;
            llm_get_stats(E, &st);
            kept[spec] = spec_sum(st.spec_accepted);
            proposed[spec] = spec_sum(st.spec_proposed);
            llm_engine_free(E);
        }
        if (c < 2)   // (the penalties make the prompt's repeats unlikely: few n-gram drafts there)
            EXPECT(kept[1] >= 20 && proposed[1] - kept[1] >= 20, "%s, n-gram: %lld of %lld drafts kept: the test needs both",
                   chains[c].what, kept[1], proposed[1]);
        EXPECT(kept[2] >= 20 && proposed[2] - kept[2] >= 20, "%s, draft model: %lld of %lld drafts kept: the test needs both",
               chains[c].what, kept[2], proposed[2]);
        for (int spec = 1; spec < 3; spec++)
            for (int pos = 0; pos < 2; pos++) {
                int df;
                double x = chi2_two(cnt[0][pos], cnt[spec][pos], V, N, N, &df);
                EXPECT(df >= 2 && x < chi2_crit(df), "%s, %s, token %d: chi-square %.1f with %d degrees of freedom (limit %.1f): "
                       "the distribution with drafts differs", chains[c].what, spec == 1 ? "n-gram" : "draft model", pos == 0 ? 3 : 6,
                       x, df, df >= 1 ? chi2_crit(df) : 0.0);
            }
    }
}

static float max_abs_diff(const float *a, const float *b, int n) {
    float d = 0.0f;
    for (int i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

// The step's arrays from a plan of two sequences, one wanting several logit rows (as verifying
// draft tokens will), and the logits of executing it: those llm_seq_eval gives token by token.
static void test_prepare(llm_engine *E, int nv) {
    const int32_t *A = prompts[0], *B = prompts[1];
    int ref = llm_seq_new(E), ia = llm_seq_new(E), ib = llm_seq_new(E);
    // rows 0..21: A's 22 tokens; rows 22..30: B's 9
    float *want = malloc(sizeof(float) * (size_t)nv * 31), *got = malloc(sizeof(float) * (size_t)nv * 4);
    EXPECT(llm_seq_eval(E, ref, A, 22, want, 1) == LLM_OK, "eval: %s", llm_last_error(E));
    llm_seq_free(E, ref);
    ref = llm_seq_new(E);
    EXPECT(llm_seq_eval(E, ref, B, 9, want + (size_t)22 * (size_t)nv, 1) == LLM_OK, "eval: %s", llm_last_error(E));
    struct llm__seq *sa = llm__seq_get(E, ia), *sb = llm__seq_get(E, ib);
    EXPECT(llm__blocks_allocate(&E->blocks, sa, 20) && llm__blocks_allocate(&E->blocks, sb, 9), "allocate");
    struct llm__plan_entry pe[2] = {{NULL, sa, A, 0, 20, 3, 0}, {NULL, sb, B, 0, 9, 1, 0}};
    struct llm__plan plan = {pe, 2, 29, 4, 0, 0};
    struct llm__step st;
    EXPECT(llm__prepare(E, &plan, &st) == LLM_OK, "prepare: %s", llm_last_error(E));
    const int bs = E->blocks.block_size;
    int ok = st.n_tokens == 29 && st.n_seqs == 2 && st.n_out == 4 && st.max_blocks == 2 && st.block_size == bs;
    for (int t = 0; ok && t < 29; t++) {
        int k = t >= 20, p = k ? t - 20 : t;
        const struct llm__seq *q = k ? sb : sa;
        ok &= st.tokens[t] == (k ? B : A)[p] && st.positions[t] == p && st.seq_idx[t] == k &&
              st.slot_mapping[t] == q->blocks[p / bs] * bs + p % bs;
    }
    ok &= st.out_rows[0] == 17 && st.out_rows[1] == 18 && st.out_rows[2] == 19 && st.out_rows[3] == 28;
    ok &= st.block_tables[0] == sa->blocks[0] && st.block_tables[1] == sa->blocks[1] && st.block_tables[2] == sb->blocks[0];
    EXPECT(ok, "the step's arrays do not follow the plan");
    EXPECT(llm__execute(E, &st, got) == LLM_OK, "execute: %s", llm_last_error(E));
    float d = max_abs_diff(got, want + (size_t)17 * (size_t)nv, 3 * nv);
    float d2 = max_abs_diff(got + (size_t)3 * (size_t)nv, want + (size_t)(22 + 8) * (size_t)nv, nv);
    EXPECT(d < 1e-4f && d2 < 1e-4f, "logit rows differ from llm_seq_eval's by %g, %g", d, d2);
    // the next step: two tokens of A at once, both rows wanted (a token and a draft to verify)
    sa->len = 20;
    sb->len = 9;
    int32_t next[2] = {A[20], A[21]};
    EXPECT(llm__blocks_allocate(&E->blocks, sa, 2), "allocate");
    struct llm__plan_entry pe2 = {NULL, sa, next, 20, 2, 2, 0};
    struct llm__plan plan2 = {&pe2, 1, 2, 2, 0, 0};
    EXPECT(llm__prepare(E, &plan2, &st) == LLM_OK && st.positions[0] == 20 && st.positions[1] == 21 && st.n_out == 2 &&
           st.out_rows[0] == 0 && st.out_rows[1] == 1, "the second step's arrays");
    EXPECT(llm__execute(E, &st, got) == LLM_OK, "execute: %s", llm_last_error(E));
    d = max_abs_diff(got, want + (size_t)20 * (size_t)nv, 2 * nv);
    EXPECT(d < 1e-4f, "rows of a two-token step differ from llm_seq_eval's by %g", d);
    llm_seq_free(E, ref);
    llm_seq_free(E, ia);
    llm_seq_free(E, ib);
    free(want);
    free(got);
}

// Log-probabilities: the count and layout of outputs and results, the best entry is the greedy
// token, and the values are llm_top_logprobs of the logits llm_seq_eval gives for the same tokens.
static void test_logprobs(llm_engine *E, int nv) {
    enum { K = 5, N = 12 };
    struct llm_prompt pr = {NULL, prompts[2], prompt_len[2]};
    struct llm_request_params rp = greedy(N);
    rp.logprobs = K;
    struct llm_logprob streamed[N * K];
    int n_streamed = 0, layout = 1;
    int id = llm_add_request(E, &pr, &rp);
    EXPECT(id >= 0, "add: %s", llm_last_error(E));
    while (llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int n = llm_step(E, &out);
        if (n < 0) { EXPECT(0, "step: %s", llm_last_error(E)); break; }
        for (int j = 0; j < n; j++) {
            layout &= (out[j].n_new_tokens > 0) == (out[j].new_logprobs != NULL);
            for (int t = 0; t < out[j].n_new_tokens && n_streamed < N; t++, n_streamed++)
                memcpy(&streamed[n_streamed * K], &out[j].new_logprobs[t * K], sizeof(struct llm_logprob) * K);
        }
    }
    EXPECT(layout && n_streamed == N, "outputs: %d tokens with log-probabilities, layout %d", n_streamed, layout);
    struct llm_result res;
    EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK && res.n_tokens == N && res.logprobs, "generate: %s", llm_last_error(E));
    if (res.n_tokens != N || !res.logprobs) return;
    EXPECT(!memcmp(streamed, res.logprobs, sizeof(streamed)), "streamed log-probabilities differ from the result's");
    float *lg = malloc(sizeof(float) * (size_t)nv);
    struct llm_logprob want[K];
    int s = llm_seq_new(E), best = 1, sorted = 1;
    float d = 0.0f;
    for (int i = 0; i < N; i++) {
        enum llm_status st = i == 0 ? llm_seq_eval(E, s, pr.tokens, pr.n_tokens, lg, 0) : llm_seq_eval(E, s, &res.tokens[i - 1], 1, lg, 0);
        EXPECT(st == LLM_OK, "eval: %s", llm_last_error(E));
        llm_top_logprobs(lg, nv, K, want);
        const struct llm_logprob *got = &res.logprobs[i * K];
        for (int j = 0; j < K; j++) {
            EXPECT(got[j].id == want[j].id, "position %d, entry %d: token %d, want %d", i, j, got[j].id, want[j].id);
            d = fmaxf(d, fabsf(got[j].logprob - want[j].logprob));
            sorted &= got[j].logprob <= 0.0f && (j == 0 || got[j].logprob <= got[j - 1].logprob);
        }
        best &= got[0].id == res.tokens[i];
    }
    EXPECT(d <= 1e-5f, "log-probabilities differ from llm_top_logprobs of llm_seq_eval's logits by %g", d);
    EXPECT(best, "a greedy token is not the most likely one");
    EXPECT(sorted, "log-probabilities not sorted or positive");
    llm_seq_free(E, s);
    free(lg);
    llm_results_free(&res, 1);
    // not asked: none; out of range: rejected
    rp.logprobs = 0;
    rp.max_tokens = 2;
    EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK && res.n_tokens == 2 && !res.logprobs, "logprobs without asking");
    llm_results_free(&res, 1);
    // each token's own log-probability (new_token_logprobs), also for tokens outside the top k:
    // drawn at a high temperature with k = 1, against the log-softmax of llm_seq_eval's logits
    rp = greedy(N);
    rp.logprobs = 1;
    rp.sampling.temperature = 3.0f;
    rp.sampling.seed = 7;
    id = llm_add_request(E, &pr, &rp);
    EXPECT(id >= 0, "add: %s", llm_last_error(E));
    int32_t toks[N];
    float tlp[N];
    int n_tok = 0, outside = 0;
    while (llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int n = llm_step(E, &out);
        if (n < 0) { EXPECT(0, "step: %s", llm_last_error(E)); break; }
        for (int j = 0; j < n; j++)
            for (int t = 0; t < out[j].n_new_tokens && n_tok < N; t++, n_tok++) {
                toks[n_tok] = out[j].new_tokens[t];
                tlp[n_tok] = out[j].new_token_logprobs ? out[j].new_token_logprobs[t] : 1.0f;
                outside += toks[n_tok] != out[j].new_logprobs[t].id;
            }
    }
    EXPECT(n_tok == N, "sampled request: %d tokens", n_tok);
    lg = malloc(sizeof(float) * (size_t)nv);
    s = llm_seq_new(E);
    d = 0.0f;
    for (int i = 0; i < n_tok; i++) {
        enum llm_status st = i == 0 ? llm_seq_eval(E, s, pr.tokens, pr.n_tokens, lg, 0) : llm_seq_eval(E, s, &toks[i - 1], 1, lg, 0);
        EXPECT(st == LLM_OK, "eval: %s", llm_last_error(E));
        double mx = lg[0], sum = 0.0;
        for (int v = 1; v < nv; v++) mx = fmax(mx, lg[v]);
        for (int v = 0; v < nv; v++) sum += exp(lg[v] - mx);
        d = fmaxf(d, fabsf(tlp[i] - (float)(lg[toks[i]] - mx - log(sum))));
    }
    EXPECT(d <= 1e-4f, "sampled tokens' log-probabilities differ from the log-softmax of llm_seq_eval's logits by %g", d);
    EXPECT(outside > 0, "every token drawn at temperature 3 was the most likely one: the check saw no token outside the top 1");
    llm_seq_free(E, s);
    free(lg);
    rp.logprobs = 21;
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "logprobs 21 accepted");
    rp.logprobs = -1;
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "logprobs -1 accepted");
}

// parse_special: a control token's text in a text prompt becomes that token only when set.
static void test_parse_special(llm_engine *E, int nv) {
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    int ctl = -1;
    char name[64] = "";
    for (int t = 0; t < nv && ctl < 0; t++)
        if (t != mi.bos_id && llm_token_is_control(E, t) && llm_detokenize(E, &t, 1, LLM_DETOKENIZE_SPECIAL, name, sizeof(name)) > 1)
            ctl = t;
    if (ctl < 0) { SKIP("the test model's vocabulary has no control token besides BOS: parse_special untested"); return; }
    char text[128];
    snprintf(text, sizeof(text), "once%supon", name);
    struct llm_prompt pr = {text, NULL, 0};
    struct llm_request_params rp[2] = {greedy(1), greedy(1)};
    rp[1].parse_special = 1;
    struct llm_result res[2];
    EXPECT(llm_generate(E, (struct llm_prompt[]){pr, pr}, 2, rp, res) == LLM_OK, "generate: %s", llm_last_error(E));
    int32_t want[2][64];
    int nw[2] = {llm_tokenize(E, text, strlen(text), LLM_TOKENIZE_ADD_SPECIAL, want[0], 64),
                 llm_tokenize(E, text, strlen(text), LLM_TOKENIZE_ADD_SPECIAL | LLM_TOKENIZE_PARSE_SPECIAL, want[1], 64)};
    for (int i = 0; i < 2; i++) {
        int has = 0;
        for (int j = 1; j < res[i].n_prompt_tokens; j++) has += res[i].prompt_tokens[j] == ctl;
        EXPECT(has == i, "parse_special %d: '%s' (token %d) found %d times in the prompt", i, name, ctl, has);
        EXPECT(res[i].n_prompt_tokens == nw[i] && !memcmp(res[i].prompt_tokens, want[i], sizeof(int32_t) * (size_t)nw[i]),
               "parse_special %d: the prompt is not llm_tokenize's", i);
    }
    llm_results_free(res, 2);
}

// The stop string test: a piece of the middle of the greedy text (whole characters); the text
// then ends before its first occurrence.
static void test_stop_string(llm_engine *E, const struct llm_prompt *pr, struct llm_request_params rp, const char *full) {
    size_t n = strlen(full), p = n / 2, q;
    while (p < n && ((unsigned char)full[p] & 0xC0) == 0x80) p++;
    for (q = LLM__MIN(p + 3, n); q < n && ((unsigned char)full[q] & 0xC0) == 0x80;) q++;
    char stop[32] = "";
    if (q > p && q - p < sizeof(stop)) memcpy(stop, full + p, q - p);
    EXPECT(stop[0], "no stop string can be taken from the text '%s'", full);
    if (!stop[0]) return;
    const char *stops[1] = {stop};
    rp.stop = stops;
    rp.n_stop = 1;
    struct llm_result r2;
    EXPECT(llm_generate(E, pr, 1, &rp, &r2) == LLM_OK, "generate: %s", llm_last_error(E));
    size_t want_len = (size_t)(strstr(full, stop) - full);
    EXPECT(r2.finish_reason == LLM_FINISH_STOP && strlen(r2.text) == want_len && !strncmp(r2.text, full, want_len),
           "stop '%s': '%s' (%s), full '%s'", stop, r2.text, llm_finish_reason_str(r2.finish_reason), full);
    llm_results_free(&r2, 1);
    const char *empty[1] = {""};
    rp.stop = empty;
    EXPECT(llm_add_request(E, pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "an empty stop string accepted");
}

// The stop strings' automaton against a plain search: texts over a 3-letter alphabet fed in
// random pieces, random sets of stop strings (prefixes and suffixes of each other, repeats); at
// each piece the earliest stop string that ends in it and the longest end of the text that is a
// proper prefix of some string (what is held back).
static void test_stop_automaton(void) {
    uint64_t seed = 77;
    int bad = 0;
    for (int round = 0; round < 2000 && bad < 5; round++) {
        char buf[8][12];
        const char *stops[8];
        int ns = 1 + (int)(llm__splitmix64(&seed) % 8);
        for (int i = 0; i < ns; i++) {
            int len = 1 + (int)(llm__splitmix64(&seed) % 10);
            for (int j = 0; j < len; j++) buf[i][j] = (char)('a' + llm__splitmix64(&seed) % 3);
            buf[i][len] = 0;
            stops[i] = buf[i];
        }
        struct llm__stops a;
        if (!llm__stops_build(&a, stops, ns)) { EXPECT(0, "out of memory"); return; }
        char text[200];
        size_t n = 0, from = 0;
        while (n < sizeof(text) - 8) {
            size_t piece = llm__splitmix64(&seed) % 5;   // 0: a token that adds no text
            for (size_t j = 0; j < piece; j++) text[n++] = (char)('a' + llm__splitmix64(&seed) % 3);
            size_t hold;
            long got = llm__stops_scan(&a, &a.pos, text, n, &hold);
            long want = -1;   // the earliest start among occurrences ending in text[from..n)
            size_t want_hold = 0;
            for (int i = 0; i < ns; i++) {
                size_t m = strlen(stops[i]);
                for (size_t s = 0; s + m <= n; s++)
                    if (s + m > from && !memcmp(text + s, stops[i], m) && (want < 0 || (long)s < want)) want = (long)s;
                for (size_t k = LLM__MIN(m - 1, n); k > want_hold; k--)
                    if (!memcmp(text + n - k, stops[i], k)) { want_hold = k; break; }
            }
            if (got != want || (want < 0 && hold != want_hold)) {
                if (bad++ < 5) EXPECT(0, "round %d: at %zu bytes: stop at %ld (want %ld), hold %zu (want %zu)", round, n, got,
                                      want, hold, want_hold);
                break;
            }
            if (got >= 0) break;   // the request would end here
            from = n;
        }
        llm__stops_free(&a);
    }
    EXPECT(bad == 0, "%d rounds disagree with the plain search", bad);
}

// Stop strings against hostile text: 64 strings "!"*P + "Z" + "!"*Q (16 KB in all) and an output
// of '!' only, which keeps every string almost matched: the automaton's work (edges and fail links
// taken) stays within twice the text's bytes, whatever the strings' lengths. A search of every
// suffix of the text for every string (what requests did) costs P for each string and byte.
static void test_stop_hostile(void) {
    static char buf[64][257];
    const char *stops[64];
    for (int i = 0; i < 64; i++) {
        memset(buf[i], '!', 256);   // P = 100 + i, Q = 155 - i
        buf[i][100 + i] = 'Z';
        buf[i][256] = 0;
        stops[i] = buf[i];
    }
    struct llm__stops a;
    if (!llm__stops_build(&a, stops, 64)) { EXPECT(0, "out of memory"); return; }
    static char text[1 << 20];
    memset(text, '!', sizeof(text));
    size_t hold = 0;
    long hit = -1;
    size_t n = 3;   // 3 bytes a token; a scan that is not linear is stopped at once
    for (; n <= sizeof(text) && hit < 0 && a.steps <= 2 * n; n += 3) hit = llm__stops_scan(&a, &a.pos, text, n, &hold);
    EXPECT(hit < 0 && hold == 163, "hostile: a stop at %ld, hold %zu (want none, 163: the longest run of '!')", hit, hold);
    EXPECT(n > sizeof(text) && a.steps <= 2 * sizeof(text), "hostile: %llu steps for %zu bytes (not linear)",
           (unsigned long long)a.steps, n - 3);
    llm__stops_free(&a);
}

// The sampler's top-k (a sorted buffer for small k, a heap for large k) against a whole sort:
// the same ids in the same order, ties (few distinct keys) to the lower ids.
static void test_top_k(void) {
    enum { N = 3000 };
    static float key[N];
    static int32_t a[N], b[N];
    uint64_t seed = 5;
    int bad = 0;
    for (int round = 0; round < 40; round++) {
        int distinct = round % 2 ? 7 : 1 << 20;
        for (int i = 0; i < N; i++) key[i] = (float)(llm__splitmix64(&seed) % (uint64_t)distinct);
        if (round % 5 == 4) for (int i = 0; i < N; i++) key[i] = (float)i;   // rising: the buffer's worst case
        int k = (int)(1 + llm__splitmix64(&seed) % (round < 20 ? LLM__TOP_K_INSERT : N - 1));
        for (int i = 0; i < N; i++) a[i] = b[i] = i;
        llm__sort_desc(a, N, key);
        int m = llm__top_k(b, N, k, key);
        bad += m != k || memcmp(a, b, (size_t)k * sizeof(int32_t)) != 0;
    }
    EXPECT(bad == 0, "top-k: %d of 40 rounds differ from a whole sort", bad);
}

// n-gram lookup against hostile tokens: 100,000 copies of one token ending in n-grams that never
// occurred (each earlier position matches their first token, so every n is compared at every
// position): the comparisons stay within (1 + n) per token for each n, and nothing is proposed;
// a planted occurrence is found, the latest one.
static void test_ngram_hostile(void) {
    enum { N = 100000 };
    static llm_engine E0;
    static struct llm__req r;
    static int32_t toks[N + 16];
    E0.params.prompt_lookup_min = 2;
    E0.params.prompt_lookup_max = 4;
    for (int i = 0; i < N; i++) toks[i] = 7;
    toks[N - 1] = 9;   // the tail ends in a token seen nowhere else
    r.tokens = toks;
    r.n_tokens = N;
    r.cap_tokens = N + 16;
    r.ngram_steps = 0;
    int got = llm__spec_ngram(&E0, &r, 4);
    uint64_t bound = 0;
    for (int g = 2; g <= 4; g++) bound += (uint64_t)(1 + g) * N;
    EXPECT(got == 0, "hostile n-grams: %d drafts from tokens where the tail never occurred", got);
    EXPECT(r.ngram_steps <= bound, "hostile n-grams: %llu tokens compared for %d tokens (bound %llu)",
           (unsigned long long)r.ngram_steps, N, (unsigned long long)bound);
    // the tail 7 7 7 9 after ... 7 7 7 9 5 6 at 50,000 and 60,000: the later one's followers
    for (int at = 50000; at <= 60000; at += 10000) {
        toks[at] = 9;
        toks[at + 1] = 5 + (at == 60000);
        toks[at + 2] = 6;
    }
    got = llm__spec_ngram(&E0, &r, 2);
    EXPECT(got == 2 && toks[N] == 6 && toks[N + 1] == 6, "the latest occurrence: %d drafts %d %d", got, toks[N], toks[N + 1]);
}

// A stop string made to steer the automaton's hash table: each byte chosen so that its key
// ((node << 8 | byte) + 1) lands next to slot 0 under a fixed multiplier (Fibonacci hashing, the
// table's low 16 bits), which would put 16,384 keys in one run (hundreds of millions of probes
// to build, thousands a byte to scan). With a multiplier drawn for each automaton, the probes
// stay a few per key and per byte.
static void test_stop_steered(void) {
    static char s[16385];
    for (uint32_t u = 0; u < 16384; u++) {
        uint32_t best = 0xffffffffu;
        for (uint32_t c = 0x20; c < 0x7f; c++) {
            uint32_t h = ((((u << 8) | c) + 1) * 0x9E3779B1u) & 0xffff, d = h < 0x8000 ? h : 0x10000 - h;
            if (d < best) best = d, s[u] = (char)c;
        }
    }
    s[16384] = 0;
    const char *stops[1] = {s};
    struct llm__stops a;
    if (!llm__stops_build(&a, stops, 1)) { EXPECT(0, "out of memory"); return; }
    uint64_t build = a.probes;
    static char text[1 << 16];
    uint64_t seed = 9;
    for (size_t i = 0; i < sizeof(text); i++) text[i] = s[llm__splitmix64(&seed) % 16384];
    size_t hold;
    llm__stops_scan(&a, &a.pos, text, sizeof(text), &hold);
    uint64_t scan = a.probes - build;
    EXPECT(build < 8 * 16384 && scan < 8 * 2 * sizeof(text), "a steered stop string: %llu probes to build (16,384 keys), %llu to "
           "scan %zu bytes", (unsigned long long)build, (unsigned long long)scan, sizeof(text));
    llm__stops_free(&a);
}

// The limits of stop strings: 64 of 16384 bytes in all are taken, one more string or byte is
// refused (LLM_ERR_INVALID_ARG, a message naming the limit).
static void test_stop_limits(llm_engine *E, const struct llm_prompt *pr) {
    static char big[16385];
    memset(big, 'x', sizeof(big) - 1);
    const char *stops[65];
    for (int i = 0; i < 65; i++) stops[i] = "never";
    struct llm_request_params rp = greedy(1);
    rp.stop = stops;
    rp.n_stop = 64;
    int id = llm_add_request(E, pr, &rp);
    EXPECT(id >= 0, "64 stop strings refused: %s", llm_last_error(E));
    if (id >= 0) llm_abort_request(E, id);
    rp.n_stop = 65;
    EXPECT(llm_add_request(E, pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG &&
           strstr(llm_last_error(E), "at most 64"), "65 stop strings: %s", llm_last_error(E));
    stops[0] = big + 1;   // 16383 bytes, and "never" 5: over
    rp.n_stop = 2;
    EXPECT(llm_add_request(E, pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG &&
           strstr(llm_last_error(E), "16384 bytes"), "16388 bytes of stop strings: %s", llm_last_error(E));
    stops[0] = big;
    rp.n_stop = 1;
    id = llm_add_request(E, pr, &rp);
    EXPECT(id >= 0, "16384 bytes of stop strings refused: %s", llm_last_error(E));
    if (id >= 0) llm_abort_request(E, id);
    const struct llm_output *out;
    while (llm_has_unfinished_requests(E)) if (llm_step(E, &out) < 0) break;
    // choices with the same stop strings, added one after the other, share one automaton (16 KB
    // of stop strings build some 600 KB of tables: not once per choice); another set gets its own
    stops[0] = big;
    rp = greedy(1);
    rp.stop = stops;
    rp.n_stop = 1;
    int ids4[4];
    for (int i = 0; i < 4; i++) ids4[i] = llm_add_request(E, pr, &rp);
    const char *two[2] = {"never", "again"};
    rp.stop = two;
    rp.n_stop = 2;
    int other = llm_add_request(E, pr, &rp);
    // (refs: 4, or 5 with the aborted request above when it is not yet gone from the engine's list)
    struct llm__req *q0 = llm__req_find(E, ids4[0]), *q3 = llm__req_find(E, ids4[3]), *qo = llm__req_find(E, other);
    EXPECT(q0 && q3 && qo && q0->stops == q3->stops && q0->stops->refs >= 4 && qo->stops != q0->stops && qo->stops->refs == 1,
           "4 choices with the same stop strings: not one automaton shared (refs %d)", q0 && q0->stops ? q0->stops->refs : -1);
    while (llm_has_unfinished_requests(E)) if (llm_step(E, &out) < 0) break;
    // stop ids: 100,000 of them, all repeats of two: kept as those two (a token's look-up costs
    // O(log n_vocab), not the list's length), and the one the model emits first still stops it
    struct llm_result r1;
    rp = greedy(1);
    EXPECT(llm_generate(E, pr, 1, &rp, &r1) == LLM_OK && r1.n_tokens == 1, "generate: %s", llm_last_error(E));
    static int32_t ids[100000];
    for (int i = 0; i < 100000; i++) ids[i] = i == 77777 ? r1.tokens[0] : (r1.tokens[0] + 1) % 8;
    llm_results_free(&r1, 1);
    rp = greedy(8);
    rp.stop_token_ids = ids;
    rp.n_stop_token_ids = 100000;
    id = llm_add_request(E, pr, &rp);
    struct llm__req *q = id >= 0 ? llm__req_find(E, id) : NULL;
    EXPECT(q && q->p.n_stop_token_ids == 2, "100,000 stop ids of 2 values kept as %d", q ? q->p.n_stop_token_ids : -1);
    int n_out = 0;
    enum llm_finish_reason why = LLM_FINISH_NONE;
    while (llm_has_unfinished_requests(E)) {
        int n = llm_step(E, &out);
        if (n < 0) break;
        for (int j = 0; j < n; j++) if (out[j].request_id == id && out[j].finished) { n_out = out[j].n_output_tokens; why = out[j].finish_reason; }
    }
    EXPECT(n_out == 1 && why == LLM_FINISH_STOP, "a stop id among 100,000: %d tokens, %s", n_out, llm_finish_reason_str(why));
}

// Finish reasons: a stop token (included), the context (LLM_FINISH_CONTEXT, unless max_tokens is
// reached with its last token), a KV cache too small for the request alone or holding no room
// to admit it (LLM_FINISH_CONTEXT), bad sampling parameters rejected.
static void test_finish_reasons(llm_engine *E, const int32_t *alone0, size_t per_token) {
    struct llm_prompt pr = {NULL, prompts[0], prompt_len[0]};
    struct llm_request_params rp = greedy(24);
    int j = 0;
    while (alone0[j] != alone0[4]) j++;
    int32_t stop_id = alone0[4];
    rp.stop_token_ids = &stop_id;
    rp.n_stop_token_ids = 1;
    struct llm_result res;
    EXPECT(llm_generate(E, &pr, 1, &rp, &res) == LLM_OK && res.finish_reason == LLM_FINISH_STOP && res.n_tokens == j + 1 &&
           res.tokens[j] == stop_id, "stop token: %s after %d tokens, want stop after %d", llm_finish_reason_str(res.finish_reason),
           res.n_tokens, j + 1);
    llm_results_free(&res, 1);
    static int32_t longp[250];
    for (int i = 0; i < 250; i++) longp[i] = 5 + i;
    struct llm_prompt lp = {NULL, longp, 250};
    rp = greedy(24);
    EXPECT(llm_generate(E, &lp, 1, &rp, &res) == LLM_OK && res.finish_reason == LLM_FINISH_CONTEXT && res.n_tokens == 256 - 250,
           "context: %s after %d tokens", llm_finish_reason_str(res.finish_reason), res.n_tokens);
    llm_results_free(&res, 1);
    rp.max_tokens = 256 - 250;   // max_tokens reached with the context's last token: max_tokens's limit
    EXPECT(llm_generate(E, &lp, 1, &rp, &res) == LLM_OK && res.finish_reason == LLM_FINISH_LENGTH && res.n_tokens == 256 - 250,
           "max_tokens at the end of the context: %s after %d tokens", llm_finish_reason_str(res.finish_reason), res.n_tokens);
    llm_results_free(&res, 1);
    rp.sampling.temperature = -1;
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_INVALID_ARG, "a negative temperature accepted");
    // a cache of 3 blocks (48 tokens): a 30-token prompt gets its 19th token, then the cache is full
    llm_engine *S = engine(4, 512, per_token * 16 * 3, 0, "fcfs");
    if (!S) return;
    struct llm_engine_info ei;
    llm_get_engine_info(S, &ei);
    lp.n_tokens = 30;
    rp = greedy(40);
    EXPECT(ei.kv_tokens == 48, "%d tokens in the cache", ei.kv_tokens);
    EXPECT(llm_generate(S, &lp, 1, &rp, &res) == LLM_OK && res.finish_reason == LLM_FINISH_CONTEXT && res.n_tokens == 48 - 30 + 1,
           "a full KV cache: %s after %d tokens", llm_finish_reason_str(res.finish_reason), res.n_tokens);
    llm_results_free(&res, 1);
    // a request that cannot be admitted while nothing runs (a sequence holds the blocks): it ends
    // at once, for the same reason
    int seq = llm_seq_new(S);
    EXPECT(seq >= 0 && llm_seq_eval(S, seq, longp, 40, NULL, 0) == LLM_OK, "a sequence of 40 tokens: %s", llm_last_error(S));
    lp.n_tokens = 20;
    EXPECT(llm_generate(S, &lp, 1, &rp, &res) == LLM_OK && res.finish_reason == LLM_FINISH_CONTEXT && res.n_tokens == 0,
           "no blocks to admit it: %s after %d tokens", llm_finish_reason_str(res.finish_reason), res.n_tokens);
    llm_results_free(&res, 1);
    llm_seq_free(S, seq);
    EXPECT(!strcmp(llm_finish_reason_str(LLM_FINISH_CONTEXT), "context") && !strcmp(llm_finish_reason_str(LLM_FINISH_LENGTH), "length"),
           "finish reason words: %s, %s", llm_finish_reason_str(LLM_FINISH_CONTEXT), llm_finish_reason_str(LLM_FINISH_LENGTH));
    llm_engine_free(S);
}

// A text prompt whose bytes cannot fit max_model_len tokens (256 here) in any tokenization is
// refused before it is tokenized, saying so; with one byte less it is tokenized, and refused for
// its number of tokens.
static void test_long_text(llm_engine *E) {
    size_t k = E->vocab.max_token_bytes, len = 256 * k + 1;
    EXPECT(k > 0, "the test vocabulary has no bound on the bytes of a token");
    char *text = malloc(len + 1);
    for (size_t i = 0; i < len; i++) text[i] = "ab "[i % 3];
    text[len] = 0;
    struct llm_prompt pr = {text, NULL, 0};
    struct llm_request_params rp = greedy(4);
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_CONTEXT && strstr(llm_last_error(E), "bytes"),
           "%zu bytes (at most %zu a token) for 256 tokens: %s", len, k, llm_last_error(E));
    text[len - 1] = 0;
    EXPECT(llm_add_request(E, &pr, &rp) == -1 && llm_last_status(E) == LLM_ERR_CONTEXT &&
           strstr(llm_last_error(E), "tokens, more than max_model_len"), "%zu bytes: %s", len - 1, llm_last_error(E));
    free(text);
}

// --- the scheduler's order against a reference ---
//
// The reference is the order the scheduler sorted its queues in before it kept the waiting ones
// in a heap: by priority under LLM_SCHED_PRIORITY (lower first), then by arrival; a stable
// sort of the requests in arrival order. Random arrivals, priorities (INT_MIN among them) and
// aborts, a KV cache small enough for preemptions; before every step the waiting heap holds
// exactly the waiting requests; every step admits a prefix of the waiting ones in that order
// (the first that does not fit stops admission) and preempts a suffix of the running ones.

static bool ref_before(bool by_priority, const struct llm__req *a, const struct llm__req *b) {
    if (by_priority && a->p.priority != b->p.priority) return a->p.priority < b->p.priority;
    return a->arrival < b->arrival;
}

// The requests of E in a state, in the reference order; returns how many.
static int ref_queue(llm_engine *E, enum llm__req_state state, struct llm__req **q) {
    bool by_priority = E->params.scheduling_policy == LLM_SCHED_PRIORITY;
    int n = 0;
    for (int i = 0; i < E->sched.n_reqs; i++) {
        struct llm__req *x = E->sched.reqs[i];
        if (x->state != state) continue;
        int j = n++;
        while (j > 0 && ref_before(by_priority, x, q[j - 1])) { q[j] = q[j - 1]; j--; }
        q[j] = x;
    }
    return n;
}

static void test_sched_order(const char *policy, size_t per_token, int n_vocab) {
    enum { NREQ = 160 };
    llm_engine *E = engine_threads(1, 4, 32, per_token * 16 * 10, 0, policy);
    if (!E) return;
    static const int prios[5] = {INT_MIN, -1, 0, 1, 2};
    static struct llm__req *W[NREQ], *R[NREQ];
    static int32_t toks[40];
    unsigned long long s = 1234;
    int n_added = 0, steps = 0, n_heap_bad = 0, n_admit_bad = 0, n_preempt_bad = 0, n_admitted = 0, n_preempted = 0;
    int n_done = 0, n_len_bad = 0, ids[NREQ], max_tok[NREQ];
    while ((n_added < NREQ || llm_has_unfinished_requests(E)) && steps < 4000) {
        for (int k = (int)(test_rng_next(&s) % 4); k > 0 && n_added < NREQ; k--) {
            int len = 1 + (int)(test_rng_next(&s) % 40);
            for (int j = 0; j < len; j++) toks[j] = 3 + (int)(test_rng_next(&s) % (unsigned)(n_vocab - 3));
            struct llm_prompt pr = {NULL, toks, len};
            struct llm_request_params rp = greedy(1 + (int)(test_rng_next(&s) % 12));
            rp.priority = prios[test_rng_next(&s) % 5];
            max_tok[n_added] = rp.max_tokens;
            ids[n_added++] = llm_add_request(E, &pr, &rp);
        }
        if (test_rng_next(&s) % 10 == 0) llm_abort_request(E, ids[test_rng_next(&s) % (unsigned)n_added]);
        // the heap: exactly the waiting requests, each parent before its children
        int nw = ref_queue(E, LLM__REQ_WAITING, W), nr = ref_queue(E, LLM__REQ_RUNNING, R);
        bool heap_ok = E->sched.n_wait == nw;
        for (int i = 0; i < nw; i++) heap_ok &= W[i]->wait_pos >= 0 && W[i]->wait_pos < E->sched.n_wait && E->sched.q_wait[W[i]->wait_pos] == W[i];
        for (int i = 1; heap_ok && i < E->sched.n_wait; i++) heap_ok &= !llm__req_before(E, E->sched.q_wait[i], E->sched.q_wait[(i - 1) / 2]);
        n_heap_bad += !heap_ok;
        const struct llm_output *out;
        int n = llm_step(E, &out);
        EXPECT(n >= 0, "step: %s", llm_last_error(E));
        if (n < 0) break;
        steps++;
        // admitted (or finished as never fitting): a prefix of the waiting order
        int left = 0;
        while (left < nw && W[left]->state != LLM__REQ_WAITING) left++;
        n_admitted += left;
        for (int i = left; i < nw; i++) n_admit_bad += W[i]->state != LLM__REQ_WAITING;
        // preempted: a suffix of the running order
        int first = 0;
        while (first < nr && R[first]->state != LLM__REQ_WAITING) first++;
        n_preempted += nr - first;
        for (int i = first; i < nr; i++) n_preempt_bad += R[i]->state != LLM__REQ_WAITING;
        for (int j = 0; j < n; j++) {
            if (!out[j].finished || out[j].finish_reason == LLM_FINISH_ABORT) continue;
            int i = 0;
            while (i < n_added && ids[i] != out[j].request_id) i++;
            n_done++;
            n_len_bad += out[j].finish_reason != LLM_FINISH_LENGTH || i == n_added || out[j].n_output_tokens != max_tok[i];
        }
    }
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    EXPECT(!llm_has_unfinished_requests(E), "%s: requests left after %d steps", policy, steps);
    EXPECT(n_heap_bad == 0, "%s: the waiting heap was wrong before %d of %d steps", policy, n_heap_bad, steps);
    EXPECT(n_admit_bad == 0, "%s: %d requests admitted out of order", policy, n_admit_bad);
    EXPECT(n_preempt_bad == 0, "%s: %d requests preempted out of order", policy, n_preempt_bad);
    EXPECT(n_admitted >= NREQ / 2 && n_preempted > 0 && st.n_preemptions == n_preempted,
           "%s: %d admitted, %d preempted (the engine counts %lld): the test does not test much", policy, n_admitted,
           n_preempted, st.n_preemptions);
    EXPECT(n_done >= NREQ / 2 && n_len_bad == 0, "%s: %d of %d finished requests without their max_tokens", policy, n_len_bad,
           n_done);
    llm_engine_free(E);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median time a step spends scheduling (llm_get_profile's LLM_PROF_SCHEDULING: the plan and
// the step's arrays, not the forward pass) with 20,000 waiting requests whose priorities fall
// with arrival (each new one goes first: the worst case of the former insertion sort, which
// re-sorted the whole queue twice a step).
static double median_step(const char *policy) {
    enum { N = 20000, STEPS = 15 };
    llm_engine *E = engine_threads(1, 8, 64, 0, 0, policy);
    if (!E) return 0;
    struct llm_request_params rp = greedy(4);
    int32_t toks[2] = {1, 0};
    for (int i = 0; i < N; i++) {
        toks[1] = 5 + i % 100;
        rp.priority = N - i;
        struct llm_prompt pr = {NULL, toks, 2};
        llm_add_request(E, &pr, &rp);
    }
    double t[STEPS];
    llm_set_profiling(E, 1);
    for (int k = 0; k < STEPS; k++) {
        const struct llm_output *out;
        struct llm_profile p0, p1;
        llm_get_profile(E, &p0);
        EXPECT(llm_step(E, &out) >= 0, "%s step: %s", policy, llm_last_error(E));
        llm_get_profile(E, &p1);
        t[k] = p1.seconds[LLM_PROF_SCHEDULING] - p0.seconds[LLM_PROF_SCHEDULING];
    }
    qsort(t, STEPS, sizeof(double), cmp_double);
    llm_engine_free(E);
    return t[STEPS / 2];
}

// Scheduling a step costs the same under the priority policy as under FCFS: a ratio of two
// medians, with a bound (3) that leaves room for noise; nothing absolute is timed. Re-sorting
// the waiting queue took hundreds of times as long.
static void test_sched_priority_cost(void) {
    double fcfs = median_step("fcfs"), prio = median_step("priority");
    EXPECT(prio < 3 * fcfs, "a step with 20,000 waiting requests: %.5f s by priority, %.5f s FCFS", prio, fcfs);
}

// The scheduler's invariants on a model and KV cache type: each request's greedy tokens are the
// same alone, batched (a mixture of experts: the tokens of a step routed to different experts),
// with prefix caching, with chunked prefill (16 tokens and 3 sequences a step) and after
// preemption (a q8_0 cache: blocks of quants and scales shared, freed and written again as f16's).
static void test_invariants(const char *name, enum llm_kv_dtype kv) {
    model_file = name;
    kv_dtype = kv;
    llm_engine *E = engine(64, 512, 0, 0, "fcfs");
    if (!E) { model_file = "tiny-q8_0"; kv_dtype = LLM_KV_F16; return; }
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    int all[NP];
    for (int i = 0; i < NP; i++) all[i] = i;
    static int32_t alone[NP][40], other[NP][40];
    for (int i = 0; i < NP; i++) run_all(E, 1, &all[i], 24, alone);
    run_all(E, NP, all, 24, other);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], other[i], sizeof(int32_t) * 24) == 0, "%s: request %d: batched output differs", name, i);
    llm_engine_free(E);
    size_t per_token = 2 * (size_t)mi.n_layer *
                       llm__row_bytes(kv == LLM_KV_Q8_0 ? LLM__TYPE_Q8_0 : LLM__TYPE_F16, (int64_t)mi.n_head_kv * mi.head_dim);
    struct { const char *what; int seqs, tokens, caching; size_t kv; } cfg[] = {
        {"prefix caching", 64, 512, 1, 0}, {"chunked prefill", 3, 16, 0, 0}, {"preemption", 64, 512, 0, per_token * 16 * 24},
    };
    for (size_t c = 0; c < LLM__ARRAY_LEN(cfg); c++) {
        E = engine(cfg[c].seqs, cfg[c].tokens, cfg[c].kv, cfg[c].caching, "fcfs");
        if (!E) break;
        memset(other, 0, sizeof(other));
        run_all(E, NP, all, 24, other);
        if (cfg[c].caching) run_all(E, NP, all, 24, other);   // the second time from the cache
        struct llm_engine_stats st;
        llm_get_stats(E, &st);
        EXPECT(!cfg[c].kv || st.n_preemptions > 0, "%s: no preemption with %d blocks", name, st.kv_blocks_total);
        EXPECT(!cfg[c].caching || st.prefix_hit_tokens > 0, "%s: no prefix hits", name);
        for (int i = 0; i < NP; i++)
            EXPECT(memcmp(alone[i], other[i], sizeof(int32_t) * 24) == 0, "%s: request %d: output with %s differs", name, i,
                   cfg[c].what);
        llm_engine_free(E);
    }
    model_file = "tiny-q8_0";
    kv_dtype = LLM_KV_F16;
}

int main(void) {
    test_blocks_alloc();
    test_blocks_prefix();
    test_blocks_lru();
    test_blocks_stress(true);
    test_blocks_stress(false);
    test_stop_automaton();
    test_stop_hostile();
    test_stop_steered();
    test_top_k();
    test_ngram_hostile();

    FILE *f = fopen(model_path(), "rb");
    if (!f) { SKIP("%s is absent (make models): the engine's tests did not run", model_path()); return test_summary("test_serving"); }
    fclose(f);
    llm_engine *E = engine(64, 512, 0, 0, "fcfs");
    if (!E) return test_summary("test_serving");
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    make_prompts(mi.n_vocab, 48);
    int all[NP];
    for (int i = 0; i < NP; i++) all[i] = i;
    static int32_t alone[NP][40], batched[NP][40], cached[NP][40], small[NP][40], chunked[NP][40];
    test_prepare(E, mi.n_vocab);

    // every request alone, then all together
    for (int i = 0; i < NP; i++) run_all(E, 1, &all[i], 24, alone);
    run_all(E, NP, all, 24, batched);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], batched[i], sizeof(int32_t) * 24) == 0, "request %d: batched output differs from alone", i);
    llm_engine_free(E);

    // prefix caching: the same outputs, and the shared 48-token prefix is found
    E = engine(64, 512, 0, 1, "fcfs");
    run_all(E, NP, all, 24, cached);
    run_all(E, NP, all, 24, cached);   // the second time, everything is cached
    struct llm_engine_stats st;
    llm_get_stats(E, &st);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], cached[i], sizeof(int32_t) * 24) == 0, "request %d: output with prefix caching differs", i);
    EXPECT(st.prefix_hit_tokens > 0 && st.prefix_hit_tokens < st.prefix_query_tokens, "prefix hits %lld of %lld",
           st.prefix_hit_tokens, st.prefix_query_tokens);
    llm_engine_free(E);

    // chunked prefill and admission limits: 16 tokens and 3 sequences a step
    E = engine(3, 16, 0, 0, "fcfs");
    struct llm_prompt pr[NP];
    struct llm_request_params rp = greedy(24);
    for (int i = 0; i < NP; i++) { pr[i] = (struct llm_prompt){NULL, prompts[i], prompt_len[i]}; llm_add_request(E, &pr[i], &rp); }
    int steps = 0, max_running = 0, reasons = 1;
    while (llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int n = llm_step(E, &out);
        EXPECT(n >= 0, "step: %s", llm_last_error(E));
        if (n < 0) break;
        llm_get_stats(E, &st);
        max_running = LLM__MAX(max_running, st.n_running);
        for (int j = 0; j < n; j++) {
            reasons &= out[j].finished ? out[j].finish_reason == LLM_FINISH_LENGTH : out[j].finish_reason == LLM_FINISH_NONE;
            for (int t = 0; t < out[j].n_new_tokens; t++) {
                int id = out[j].request_id, k = out[j].n_output_tokens - out[j].n_new_tokens + t;
                if (k < 40) chunked[id][k] = out[j].new_tokens[t];
            }
        }
        steps++;
    }
    int total_prompt = 0;
    for (int i = 0; i < NP; i++) total_prompt += prompt_len[i];
    EXPECT(max_running <= 3 && max_running >= 2, "max running %d with max_num_seqs 3", max_running);
    EXPECT(steps >= total_prompt / 16, "%d steps for %d prompt tokens at 16 a step", steps, total_prompt);
    EXPECT(reasons, "a finish reason other than NONE while running, LENGTH at the end");
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], chunked[i], sizeof(int32_t) * 24) == 0, "request %d: output with chunked prefill differs", i);
    llm_engine_free(E);

    // preemption: KV memory for ~4 sequences, 12 requests of up to 113 tokens each
    size_t per_token = 2 * (size_t)mi.n_layer * (size_t)mi.n_head_kv * (size_t)mi.head_dim * 2;
    E = engine(64, 512, per_token * 16 * 24, 0, "fcfs");
    run_all(E, NP, all, 24, small);
    llm_get_stats(E, &st);
    EXPECT(st.n_preemptions > 0, "no preemption with %d blocks", st.kv_blocks_total);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], small[i], sizeof(int32_t) * 24) == 0, "request %d: output after preemption differs", i);
    EXPECT(st.kv_blocks_used == 0, "%d blocks still used after all finished", st.kv_blocks_used);
    llm_engine_free(E);

    // priority: one sequence at a time, lower values first, FCFS among equals
    E = engine(1, 512, 0, 0, "priority");
    int prio[5] = {3, 1, 2, 1, 0}, order[5], n_done = 0, id2i[5];
    for (int i = 0; i < 5; i++) {
        rp.priority = prio[i];
        rp.max_tokens = 2;
        id2i[i] = llm_add_request(E, &pr[i], &rp);
    }
    while (llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int n = llm_step(E, &out);
        if (n < 0) break;
        for (int j = 0; j < n; j++)
            if (out[j].finished && n_done < 5)
                for (int i = 0; i < 5; i++) if (id2i[i] == out[j].request_id) order[n_done++] = i;
    }
    // all wait when the first step runs: 4 (priority 0), 1 and 3 (1, in arrival order), 2, 0
    int want[5] = {4, 1, 3, 2, 0};
    EXPECT(n_done == 5 && !memcmp(order, want, sizeof(want)), "finish order %d %d %d %d %d", order[0], order[1], order[2],
           order[3], order[4]);
    llm_engine_free(E);

    test_invariants("tiny-q8_0", LLM_KV_Q8_0);
    test_invariants("tiny-qwen3moe-q8_0", LLM_KV_F16);
    test_invariants("tiny-mixtral-q4_k", LLM_KV_F16);
    test_invariants("tiny-qwen2moe-q8_0", LLM_KV_F16);
    test_invariants("tiny-gpt-oss-mxfp4", LLM_KV_F16);   // (sinks, windows, YaRN, biases; MXFP4 experts)
    test_invariants("tiny-olmoe-q8_0", LLM_KV_F16);
    test_sched_order("priority", per_token, mi.n_vocab);
    test_sched_order("fcfs", per_token, mi.n_vocab);
    test_sched_priority_cost();

    // a prompt longer than max_model_len is rejected alone; stop strings; abort
    E = engine(64, 512, 0, 0, "fcfs");
    static int32_t longp[300];
    for (int i = 0; i < 300; i++) longp[i] = 5 + i;
    struct llm_prompt two[2] = {{NULL, longp, 300}, {NULL, prompts[0], prompt_len[0]}};
    struct llm_result res[2];
    rp = greedy(24);
    EXPECT(llm_generate(E, two, 2, (struct llm_request_params[]){rp, rp}, res) == LLM_OK, "generate");
    EXPECT(res[0].finish_reason == LLM_FINISH_ERROR && res[0].error && strstr(res[0].error, "max_model_len"),
           "long prompt: %s (%s)", llm_finish_reason_str(res[0].finish_reason), res[0].error ? res[0].error : "");
    EXPECT(res[1].finish_reason == LLM_FINISH_LENGTH && res[1].n_tokens == 24 && !memcmp(res[1].tokens, alone[0], 24 * 4),
           "the other request was affected: %s, %d tokens", llm_finish_reason_str(res[1].finish_reason), res[1].n_tokens);
    test_stop_string(E, &two[1], rp, res[1].text);
    test_stop_limits(E, &two[1]);
    llm_results_free(res, 2);
    int id = llm_add_request(E, &two[1], &rp);
    const struct llm_output *out;
    llm_step(E, &out);
    EXPECT(llm_abort_request(E, id) == LLM_OK, "abort");
    int n = llm_step(E, &out);
    EXPECT(n == 1 && out[0].finished && out[0].finish_reason == LLM_FINISH_ABORT, "abort not reported");
    EXPECT(!llm_has_unfinished_requests(E), "an aborted request is still unfinished");
    test_finish_reasons(E, alone[0], per_token);
    test_long_text(E);
    test_logprobs(E, mi.n_vocab);
    test_parse_special(E, mi.n_vocab);
    llm_engine_free(E);
    // speculative decoding: the prompts get repeated runs (the model's outputs are compared with
    // the same prompts without drafts, alone)
    for (int i = 0; i < NP; i++)
        for (int j = 8; j < prompt_len[i]; j++) prompts[i][j] = prompts[i][1 + (j - 8) % 7];
    E = engine(1, 512, 0, 0, "fcfs");
    for (int i = 0; i < NP; i++) run_all(E, 1, &all[i], 32, alone);
    llm_engine_free(E);
    E = engine_spec(4, 512, 0, 0, 4, model_path(), 256);
    if (E) test_spec_cost_model(E);
    llm_engine_free(E);
    test_spec_greedy((const int32_t(*)[40])alone, per_token, NULL);
    test_spec_keeps_cache(per_token);
    test_spec_greedy((const int32_t(*)[40])alone, per_token, model_named("tiny-q4_0"));
    test_spec_draft_errors();
    test_spec_verify_distribution();
    test_spec_distribution();
    return test_summary("test_serving");
}
