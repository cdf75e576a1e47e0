// The serving core: the block manager (allocation, reference counts, prefix hashes confirmed by
// tokens, LRU eviction, no leak after thousands of random requests), the scheduler (admission
// limits, chunked prefill, priority order, preemption under memory pressure with the same
// outputs as an unconstrained run, a too-long prompt rejected alone), prefix caching (the same
// outputs with and without it; hits counted) and batching (every request's greedy output is the
// one it gets alone).
#include "../llm.c"
#include "test.h"

static const char *model_path(void) {
    static char path[512];
    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    snprintf(path, sizeof(path), "%s/tiny-q8_0.gguf", dir);
    return path;
}

static llm_engine *engine(int max_seqs, int max_tokens, size_t kv_bytes, int caching, const char *policy) {
    struct llm_engine_params p = llm_engine_params_default();
    char err[512];
    p.model_path = model_path();
    p.n_threads = 2;
    p.max_num_seqs = max_seqs;
    p.max_num_batched_tokens = max_tokens;
    p.kv_cache_bytes = kv_bytes;
    p.enable_prefix_caching = caching;
    p.scheduling_policy = strcmp(policy, "priority") == 0 ? LLM_SCHED_PRIORITY : LLM_SCHED_FCFS;
    p.max_model_len = 256;
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    if (!E) fprintf(stderr, "engine: %s\n", err);
    return E;
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

// Runs every prompt through llm_generate (greedy, ignore_eos, max_tokens each) and keeps the tokens.
static void run_all(llm_engine *E, int n, const int *which, int max_tokens, int32_t out[][40], struct llm_result *keep) {
    struct llm_prompt pr[NP];
    struct llm_request_params rp[NP];
    struct llm_result res[NP];
    for (int i = 0; i < n; i++) {
        pr[i] = (struct llm_prompt){NULL, prompts[which[i]], prompt_len[which[i]]};
        rp[i] = llm_request_params_default();
        rp[i].sampling.temperature = 0;
        rp[i].max_tokens = max_tokens;
        rp[i].ignore_eos = 1;
    }
    enum llm_status st = llm_generate(E, pr, n, rp, res);
    EXPECT(st == LLM_OK, "generate: %s", llm_last_error(E));
    for (int i = 0; i < n; i++) {
        EXPECT(res[i].n_tokens == max_tokens && res[i].finish_reason == LLM_FINISH_LENGTH, "request %d: %d tokens, %s", i,
               res[i].n_tokens, llm_finish_reason_str(res[i].finish_reason));
        memcpy(out[which[i]], res[i].tokens, sizeof(int32_t) * (size_t)LLM__MIN(res[i].n_tokens, 40));
        if (keep) keep[i] = res[i];
    }
    if (!keep) llm_results_free(res, n);
}

static void test_block_manager(void) {
    llm_engine *E = engine(8, 64, 64 * 1024, 1, "fcfs");
    if (!E) { EXPECT(0, "no engine"); return; }
    struct llm__kv *kv = &E->kv;
    const int bs = kv->block_size, nb = kv->n_blocks;
    EXPECT(nb >= 8, "only %d blocks", nb);
    // every block can be handed out once; then none
    int32_t *got = malloc(sizeof(int32_t) * (size_t)nb);
    for (int i = 0; i < nb; i++) got[i] = llm__block_alloc(kv);
    EXPECT(llm__block_alloc(kv) == -1, "a block beyond the pool");
    int distinct = 1;
    for (int i = 0; i < nb; i++) for (int j = 0; j < i; j++) distinct &= got[i] != got[j];
    EXPECT(distinct, "a block handed out twice");
    for (int i = 0; i < nb; i++) llm__block_release(kv, got[i]);
    EXPECT(kv->n_free == nb && kv->n_lru == 0, "after release: %d free, %d cached", kv->n_free, kv->n_lru);
    free(got);

    // a committed block is found by hash + tokens + parent, and only so
    int32_t toks[3 * 32];
    for (int i = 0; i < 3 * bs; i++) toks[i] = 100 + i;
    struct llm__seq a = {0};
    EXPECT(llm__seq_reserve(kv, &a, 3 * bs, &E->err) == LLM_OK, "reserve");
    a.len = 3 * bs;
    llm__seq_commit(kv, &a, toks);
    EXPECT(a.n_committed == 3, "%d blocks committed", a.n_committed);
    uint64_t h0 = llm__block_hash(0, toks, bs);
    EXPECT(llm__block_find(kv, h0, 0, toks) == a.blocks[0], "first block not found");
    int32_t other[32];
    memcpy(other, toks, sizeof(int32_t) * (size_t)bs);
    other[bs - 1]++;
    EXPECT(llm__block_find(kv, h0, 0, other) == -1, "a hash hit was not confirmed by the tokens");
    EXPECT(llm__block_find(kv, h0, 1, toks) == -1, "a hash hit was not confirmed by the parent");
    // a new sequence with the same start shares the blocks (never the last token's block)
    struct llm__seq b = {0};
    int hit = llm__seq_take_prefix(kv, &b, toks, 3 * bs);
    EXPECT(hit == 2 * bs, "prefix of %d tokens, want %d (all but the block of the last token)", hit, 2 * bs);
    EXPECT(kv->ref[a.blocks[0]] == 2 && kv->ref[a.blocks[1]] == 2 && kv->ref[a.blocks[2]] == 1, "reference counts");
    struct llm__seq c = {0};
    hit = llm__seq_take_prefix(kv, &c, toks, 3 * bs + 1);
    EXPECT(hit == 3 * bs, "prefix of %d tokens, want %d", hit, 3 * bs);
    // released blocks stay cached (LRU) and are found again
    llm__seq_release(kv, &a);
    llm__seq_release(kv, &b);
    llm__seq_release(kv, &c);
    EXPECT(kv->n_lru == 3 && kv->n_free == nb - 3, "cached %d, free %d", kv->n_lru, kv->n_free);
    struct llm__seq d = {0};
    EXPECT(llm__seq_take_prefix(kv, &d, toks, 3 * bs + 1) == 3 * bs, "cached blocks not reused");
    EXPECT(kv->n_lru == 0, "reused blocks still in the LRU list");
    llm__seq_release(kv, &d);
    // eviction: taking every block evicts the cached ones, least recently used first
    int32_t first_evicted = kv->lru_head;
    got = malloc(sizeof(int32_t) * (size_t)nb);
    for (int i = 0; i < kv->n_blocks - 3; i++) got[i] = llm__block_alloc(kv);
    int32_t e1 = llm__block_alloc(kv);
    EXPECT(e1 == first_evicted, "evicted %d, want the least recently used %d", e1, first_evicted);
    EXPECT(!kv->hashed[e1] && llm__block_find(kv, llm__block_hash(kv->parent[e1], toks, bs), kv->parent[e1], toks) != e1,
           "an evicted block is still in the hash table");
    llm__block_release(kv, e1);
    for (int i = 0; i < kv->n_blocks - 3; i++) llm__block_release(kv, got[i]);
    free(got);

    // thousands of random sequences: grow, share prefixes, release; nothing leaks
    unsigned long long s = 7;
    struct llm__seq live[16] = {{0}};
    int32_t lt[16][8 * 32];
    int lens[16] = {0};
    for (int it = 0; it < 5000; it++) {
        int k = (int)(test_rng_next(&s) % 16);
        if (live[k].n_blocks && test_rng_next(&s) % 3 == 0) { llm__seq_release(kv, &live[k]); continue; }
        if (!live[k].n_blocks) {   // a new sequence: one of 4 prompt families
            int fam = (int)(test_rng_next(&s) % 4);
            lens[k] = 1 + (int)(test_rng_next(&s) % (unsigned)(6 * bs));
            for (int j = 0; j < 8 * bs; j++) lt[k][j] = fam * 1000 + (j < 3 * bs ? j : (int)(test_rng_next(&s) % 50));
            int h = llm__seq_take_prefix(kv, &live[k], lt[k], lens[k]);
            EXPECT(h % bs == 0 && h < lens[k], "prefix %d of %d", h, lens[k]);
            if (llm__seq_reserve(kv, &live[k], lens[k] - h, &E->err) != LLM_OK) { llm__seq_release(kv, &live[k]); continue; }
            live[k].len = lens[k];
        } else if (live[k].len < 8 * bs) {   // grow by a token
            if (llm__seq_reserve(kv, &live[k], 1, &E->err) != LLM_OK) continue;
            live[k].len++;
        }
        llm__seq_commit(kv, &live[k], lt[k]);
    }
    for (int k = 0; k < 16; k++) llm__seq_release(kv, &live[k]);
    int refs = 0;
    for (int i = 0; i < nb; i++) refs += kv->ref[i];
    EXPECT(refs == 0 && kv->n_free + kv->n_lru == nb, "leak: %d references, %d free + %d cached of %d", refs, kv->n_free,
           kv->n_lru, nb);
    llm_engine_free(E);
}

int main(void) {
    FILE *f = fopen(model_path(), "rb");
    if (!f) { SKIP("%s is absent (make models)", model_path()); return test_summary("test_serving"); }
    fclose(f);
    test_block_manager();

    llm_engine *E = engine(64, 512, 0, 0, "fcfs");
    if (!E) return test_summary("test_serving");
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    make_prompts(mi.n_vocab, 48);
    int all[NP];
    for (int i = 0; i < NP; i++) all[i] = i;
    static int32_t alone[NP][40], batched[NP][40], cached[NP][40], small[NP][40], chunked[NP][40];

    // every request alone, then all together
    for (int i = 0; i < NP; i++) run_all(E, 1, &all[i], 24, alone, NULL);
    run_all(E, NP, all, 24, batched, NULL);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], batched[i], sizeof(int32_t) * 24) == 0, "request %d: batched output differs from alone", i);
    llm_engine_free(E);

    // prefix caching: the same outputs, and the shared 48-token prefix is found
    E = engine(64, 512, 0, 1, "fcfs");
    run_all(E, NP, all, 24, cached, NULL);
    run_all(E, NP, all, 24, cached, NULL);   // the second time, everything is cached
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
    struct llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 24;
    rp.ignore_eos = 1;
    for (int i = 0; i < NP; i++) { pr[i] = (struct llm_prompt){NULL, prompts[i], prompt_len[i]}; llm_add_request(E, &pr[i], &rp); }
    int steps = 0, max_running = 0;
    while (llm_has_unfinished_requests(E)) {
        const struct llm_output *out;
        int n = llm_step(E, &out);
        EXPECT(n >= 0, "step: %s", llm_last_error(E));
        if (n < 0) break;
        llm_get_stats(E, &st);
        max_running = LLM__MAX(max_running, st.n_running);
        for (int j = 0; j < n; j++)
            for (int t = 0; t < out[j].n_new_tokens; t++) {
                int id = out[j].request_id, k = out[j].n_output_tokens - out[j].n_new_tokens + t;
                if (k < 40) chunked[id][k] = out[j].new_tokens[t];
            }
        steps++;
    }
    int total_prompt = 0;
    for (int i = 0; i < NP; i++) total_prompt += prompt_len[i];
    EXPECT(max_running <= 3 && max_running >= 2, "max running %d with max_num_seqs 3", max_running);
    EXPECT(steps >= total_prompt / 16, "%d steps for %d prompt tokens at 16 a step", steps, total_prompt);
    for (int i = 0; i < NP; i++)
        EXPECT(memcmp(alone[i], chunked[i], sizeof(int32_t) * 24) == 0, "request %d: output with chunked prefill differs", i);
    llm_engine_free(E);

    // preemption: KV memory for ~4 sequences, 12 requests of up to 113 tokens each
    size_t per_token = 2 * (size_t)mi.n_layer * (size_t)mi.n_head_kv * (size_t)mi.head_dim * 2;
    E = engine(64, 512, per_token * 16 * 24, 0, "fcfs");
    run_all(E, NP, all, 24, small, NULL);
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

    // a prompt longer than max_model_len is rejected alone; abort; stop strings
    E = engine(64, 512, 0, 0, "fcfs");
    static int32_t longp[300];
    for (int i = 0; i < 300; i++) longp[i] = 5 + i;
    struct llm_prompt two[2] = {{NULL, longp, 300}, {NULL, prompts[0], prompt_len[0]}};
    struct llm_result res[2];
    rp.priority = 0;
    rp.max_tokens = 24;
    EXPECT(llm_generate(E, two, 2, (struct llm_request_params[]){rp, rp}, res) == LLM_OK, "generate");
    EXPECT(res[0].finish_reason == LLM_FINISH_ERROR && res[0].error && strstr(res[0].error, "max_model_len"),
           "long prompt: %s (%s)", llm_finish_reason_str(res[0].finish_reason), res[0].error ? res[0].error : "");
    EXPECT(res[1].finish_reason == LLM_FINISH_LENGTH && res[1].n_tokens == 24 && !memcmp(res[1].tokens, alone[0], 24 * 4),
           "the other request was affected: %s, %d tokens", llm_finish_reason_str(res[1].finish_reason), res[1].n_tokens);
    // stop string: the third word of the text
    char stop[64] = "";
    const char *sp = strchr(res[1].text + 1, ' ');
    if (sp && strchr(sp + 1, ' ')) snprintf(stop, sizeof(stop), "%.*s", (int)(strchr(sp + 1, ' ') - sp), sp);
    if (stop[0]) {
        struct llm_request_params rs = rp;
        const char *stops[1] = {stop};
        rs.stop = stops;
        rs.n_stop = 1;
        struct llm_result r2;
        llm_generate(E, &two[1], 1, &rs, &r2);
        size_t want_len = (size_t)(strstr(res[1].text, stop) - res[1].text);
        EXPECT(r2.finish_reason == LLM_FINISH_STOP && strlen(r2.text) == want_len && !strncmp(r2.text, res[1].text, want_len),
               "stop '%s': '%s' (%s), full '%s'", stop, r2.text, llm_finish_reason_str(r2.finish_reason), res[1].text);
        llm_results_free(&r2, 1);
    }
    llm_results_free(res, 2);
    int id = llm_add_request(E, &two[1], &rp);
    const struct llm_output *out;
    llm_step(E, &out);
    EXPECT(llm_abort_request(E, id) == LLM_OK, "abort");
    int n = llm_step(E, &out);
    EXPECT(n == 1 && out[0].finished && out[0].finish_reason == LLM_FINISH_ABORT, "abort not reported");
    EXPECT(!llm_has_unfinished_requests(E), "an aborted request is still unfinished");
    llm_engine_free(E);
    return test_summary("test_serving");
}
