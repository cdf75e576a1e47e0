// The public API: engines, sequences, info

#include "internal.h"

// === public API ===

const char *llm_status_str(enum llm_status status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_ERR_INVALID_ARG: return "invalid argument";
    case LLM_ERR_IO: return "i/o error";
    case LLM_ERR_FORMAT: return "bad model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_NOMEM: return "out of memory";
    case LLM_ERR_CONTEXT: return "context full";
    case LLM_ERR_BACKEND: return "backend error";
    }
    return "unknown status";
}

int llm_version(void) { return LLM_VERSION_NUMBER; }
const char *llm_version_string(void) { return LLM_VERSION; }

struct llm_engine_params llm_engine_params_default(void) {
    struct llm_engine_params p = {0};
    p.backend = LLM_BACKEND_CPU;
    p.device = LLM_DEVICE_AUTO;
    p.block_size = 16;
    p.kv_cache_dtype = LLM_KV_F16;
    p.max_num_seqs = 256;
    p.max_num_batched_tokens = 512;
    p.scheduling_policy = LLM_SCHED_FCFS;
    return p;
}

// Logit rows of llm_seq_eval's steps with all_logits (each is n_vocab floats).
#define LLM__MAX_STEP_OUT 64

// Fills in the defaults of the parameters' zero fields and checks them; the first one wrong is
// the error (LLM_ERR_INVALID_ARG, or LLM_ERR_UNSUPPORTED for a backend not built in).
static enum llm_status llm__params_check(struct llm_engine_params *p, struct llm__err *e) {
    if (!p->block_size) p->block_size = 16;
    if (p->n_threads <= 0) p->n_threads = llm__online_cpus();
    if (!p->max_num_seqs) p->max_num_seqs = 256;
    if (!p->max_num_batched_tokens) p->max_num_batched_tokens = 512;
    if ((p->speculative_ngram || p->speculative_model) && !p->num_speculative_tokens) p->num_speculative_tokens = 4;
    if (p->speculative_ngram && p->speculative_model)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "speculative_model and speculative_ngram: choose one way to draft");
    if (!p->prompt_lookup_min) p->prompt_lookup_min = 2;
    if (!p->prompt_lookup_max) p->prompt_lookup_max = LLM__MAX(4, p->prompt_lookup_min);
    if (p->num_speculative_tokens < 0 || p->num_speculative_tokens > LLM__MAX_SPEC)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "num_speculative_tokens must be in [0, %d] (got %d)", LLM__MAX_SPEC,
                         p->num_speculative_tokens);
    if (p->num_speculative_tokens > 0 && !p->speculative_ngram && !p->speculative_model)
        return llm__fail(e, LLM_ERR_INVALID_ARG,
                         "num_speculative_tokens needs a way to draft: speculative_model or speculative_ngram");
    if (p->prompt_lookup_min < 1 || p->prompt_lookup_max < p->prompt_lookup_min || p->prompt_lookup_max > 64)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "prompt lookup n-grams must have 1 <= min <= max <= 64 (got %d, %d)",
                         p->prompt_lookup_min, p->prompt_lookup_max);
    if (!p->model_path) return llm__fail(e, LLM_ERR_INVALID_ARG, "no model file given");
    if (!(p->gpu_memory_utilization >= 0.0f && p->gpu_memory_utilization <= 1.0f))   // NaN too
        return llm__fail(e, LLM_ERR_INVALID_ARG, "gpu_memory_utilization must be in (0, 1] (0: the default)");
    if (p->block_size != 8 && p->block_size != 16 && p->block_size != 32)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "block size must be 8, 16 or 32 (got %d)", p->block_size);
    if (p->kv_cache_dtype != LLM_KV_F16 && p->kv_cache_dtype != LLM_KV_F32 && p->kv_cache_dtype != LLM_KV_Q8_0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "KV cache type must be LLM_KV_F16, LLM_KV_F32 or LLM_KV_Q8_0 (got %d)",
                         (int)p->kv_cache_dtype);
    if (p->n_threads > 512) return llm__fail(e, LLM_ERR_INVALID_ARG, "too many threads (%d)", p->n_threads);
    // (at most 2^24 tokens: block counts and slot numbers stay far from int's limit)
    if (p->max_model_len < 0 || p->max_model_len > (1 << 24))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_model_len must be in [0, %d] (got %d)", 1 << 24,
                         p->max_model_len);
    if (p->max_num_seqs < 1 || p->max_num_seqs > 65536)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_num_seqs must be in [1, 65536] (got %d)", p->max_num_seqs);
    if (p->max_num_batched_tokens < 1 || p->max_num_batched_tokens > 65536)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "max_num_batched_tokens must be in [1, 65536] (got %d)",
                         p->max_num_batched_tokens);
    if (p->scheduling_policy != LLM_SCHED_FCFS && p->scheduling_policy != LLM_SCHED_PRIORITY)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown scheduling policy %d", (int)p->scheduling_policy);
    if (p->backend != LLM_BACKEND_CPU && p->backend != LLM_BACKEND_AUTO && p->backend != LLM_BACKEND_VULKAN &&
        p->backend != LLM_BACKEND_CUDA)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown backend %d", (int)p->backend);
    if (p->device < LLM_DEVICE_AUTO)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "device must be LLM_DEVICE_AUTO or an index >= 0 (got %d)", p->device);
    if (p->load != LLM_LOAD_ALL && p->load != LLM_LOAD_VOCAB && p->load != LLM_LOAD_METADATA)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown load mode %d", (int)p->load);
    return llm__backend_available(p->backend, e);
}

// LLM_LOAD_METADATA: what a full load would say of the file (the hyper-parameters and the
// tensors' types, no weights), kept for llm_model_info.unsupported.
static void llm__engine_check_loadable(llm_engine *E) {
    struct llm__err why = {{0}, LLM_OK};
    struct llm__model *m = &E->model;
    llm__chat_template_recognise(&E->vocab, &m->gguf);   // plain metadata, whatever else fails
    if (m->gguf.n_tensors == 0) {
        llm__fail(&why, LLM_ERR_FORMAT, "the file has no tensors (a vocabulary-only file)");
    } else if (llm__model_hparams(m, &why) == LLM_OK &&
               llm__vocab_load(&E->vocab, &m->gguf, m->n_vocab, &why) == LLM_OK) {
        // every tensor the architecture uses, with its shape and type, as the load would find them
        struct llm__model_plan pl = {0};
        if (!m->layers && !(m->layers = calloc((size_t)m->n_layer, sizeof(*m->layers))))
            llm__fail(&why, LLM_ERR_NOMEM, "out of memory");
        else llm__model_plan(m, &pl, &why);
        free(pl.vecs);
        free(pl.mats);
    }
    if (why.msg[0]) snprintf(E->unsupported, sizeof(E->unsupported), "%s", why.msg);
}

static int llm__kv_type(enum llm_kv_dtype t) {
    return t == LLM_KV_F32 ? LLM__TYPE_F32 : t == LLM_KV_Q8_0 ? LLM__TYPE_Q8_0 : LLM__TYPE_F16;
}

// Whether the backend can keep this model's KV cache in the type asked for (before the weights
// are loaded: auto then tries the next backend at once).
static enum llm_status llm__kv_type_check(const llm_engine *E, struct llm__err *e) {
    if (llm__kv_type(E->params.kv_cache_dtype) != LLM__TYPE_Q8_0) return LLM_OK;
    const bool vulkan = strcmp(E->be.iface->name, "vulkan") == 0;
    if (vulkan && E->model.head_dim % 64 != 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "a q8_0 KV cache on vulkan needs a head size that is a multiple of 64 "
                         "(the model's is %d); use f16, or the CPU backend", E->model.head_dim);
    if (E->model.head_dim % 32 != 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "a q8_0 KV cache needs a head size that is a multiple of 32 (the "
                         "model's is %d); use f16", E->model.head_dim);
    return LLM_OK;
}

// Sizes and allocates the KV cache: kv_cache_bytes; else gpu_memory_utilization of the backend's
// free memory; else a quarter of it, at most what max_num_seqs sequences of max_model_len use and
// at least one such sequence (pages are only touched as blocks are used).
static enum llm_status llm__engine_kv_init(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    const struct llm__model *m = &E->model;
    size_t kv_bytes = p->kv_cache_bytes;
    const int kv_type = llm__kv_type(p->kv_cache_dtype);
    size_t per_token = 2 * (size_t)m->n_layer * llm__row_bytes(kv_type, (int64_t)m->n_head_kv * m->head_dim);
    size_t one_seq = per_token * (size_t)((E->max_model_len + p->block_size - 1) / p->block_size * p->block_size);
    if (!kv_bytes && p->gpu_memory_utilization > 0) {
        kv_bytes = (size_t)((double)E->be.iface->mem_free(E->be.ctx) * p->gpu_memory_utilization);
    }
    if (!kv_bytes) {
        size_t avail = E->be.iface->mem_free(E->be.ctx) / 4;
        size_t most = one_seq * (size_t)p->max_num_seqs;
        kv_bytes = LLM__MAX(LLM__MIN(avail ? avail : one_seq, most), one_seq);
    }
    return llm__kv_cache_init(&E->kv, m, &E->be, kv_type, p->block_size, kv_bytes, e);
}

// Memory of the largest step: the activations, the backend's scratch (reserve), then serving's
// (the block manager, the logits and the host arrays of a step). A step has at most max_num_batched_tokens tokens (or
// LLM__MAX_STEP_OUT: llm_seq_eval's steps with all logits) of max_num_seqs sequences, each of at
// most max_model_len tokens (its block table: that many blocks).
static enum llm_status llm__engine_step_buffers(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    const struct llm__model *m = &E->model;
    enum llm_status st;
    int max_tokens = LLM__MAX(p->max_num_batched_tokens, LLM__MAX_STEP_OUT);
    int max_out = LLM__MAX(LLM__MAX_STEP_OUT, LLM__MIN(p->max_num_seqs, max_tokens));
    // speculative decoding: rows for the drafts of up to 64 sequences a step besides one per sequence
    if (p->num_speculative_tokens > 0)
        max_out = LLM__MIN(max_tokens, LLM__MIN(p->max_num_seqs, max_tokens) + 64 * p->num_speculative_tokens);
    max_out = LLM__MAX(max_out, LLM__MAX_STEP_OUT);
    if ((st = llm__acts_init(&E->acts, m, &E->be, max_tokens, max_out, e))) return st;
    struct llm__shape shape = {
        .max_tokens = max_tokens, .max_out = max_out, .max_seqs = p->max_num_seqs,
        .max_blocks = LLM__MIN((E->max_model_len + p->block_size - 1) / p->block_size, E->kv.n_blocks),
        // (a mixture of experts has no MLP of n_ff: its experts' and shared expert's lengths count)
        .max_cols = LLM__MAX(LLM__MAX(LLM__MAX(m->n_embd, m->n_ff_exp), m->n_ff_shexp),
                             LLM__MAX(m->n_expert ? 0 : m->n_ff, m->n_head * m->head_dim)),
        .n_head = m->n_head, .n_head_kv = m->n_head_kv, .head_dim = m->head_dim, .block_size = p->block_size,
        .n_expert = m->n_expert, .n_expert_used = m->n_expert_used,
    };
    if ((st = E->be.iface->reserve(E->be.ctx, &shape, e))) return st;
    return llm__serving_init(E, e);   // the block manager and the host arrays of a step
}

// Opens the model file and loads what the load mode asks for: metadata only, the vocabulary, or
// everything a forward pass needs (the backend, the weights, the KV cache, the step's memory).
static enum llm_status llm__engine_load(llm_engine *E, struct llm__err *e) {
    const struct llm_engine_params *p = &E->params;
    enum llm_status st;
    if ((st = llm__model_open(&E->model.gguf, p->model_path, p->no_mmap != 0, e))) return st;
    llm__model_names(&E->model);
    if (p->load == LLM_LOAD_METADATA) {
        llm__engine_check_loadable(E);
        return LLM_OK;
    }
    if (p->load == LLM_LOAD_VOCAB) {
        if ((st = llm__vocab_load(&E->vocab, &E->model.gguf, 0, e))) return st;
        E->model.n_vocab = E->vocab.n;
        return LLM_OK;
    }
    if (E->model.gguf.n_tensors == 0)
        return llm__fail(e, LLM_ERR_FORMAT, "the file has no tensors: a vocabulary-only file can tokenize "
                                            "(llm tokenize, LLM_LOAD_VOCAB) but not run");
    if ((st = llm__model_hparams(&E->model, e))) return st;
    if ((st = llm__vocab_load(&E->vocab, &E->model.gguf, E->model.n_vocab, e))) return st;
    if (p->quantize && (st = llm__model_quantize(&E->model, p->quantize, p->n_threads, p->verbose > 0 && isatty(2), e)))
        return st;
    if ((st = llm__backend_open(&E->be, p, e))) return st;
    if ((st = llm__kv_type_check(E, e))) return st;
    if ((st = llm__model_load_tensors(&E->model, &E->be, p->verbose > 0 && isatty(2), e))) return st;
    E->max_model_len = p->max_model_len ? p->max_model_len : LLM__MIN(E->model.n_ctx_train, 4096);
    if ((st = llm__engine_kv_init(E, e))) return st;
    return llm__engine_step_buffers(E, e);
}

// speculative_model: the draft's engine, on the same backend and device, for the same contexts
// and batches, without prefix caching; its vocabulary must be the model's, token for token.
static enum llm_status llm__draft_open(llm_engine *E, struct llm__err *e) {
    struct llm_engine_params dp = E->params;
    dp.model_path = E->params.speculative_model;
    dp.speculative_model = NULL;
    dp.speculative_ngram = 0;
    dp.num_speculative_tokens = 0;
    dp.enable_prefix_caching = 0;
    dp.max_model_len = E->max_model_len;
    dp.kv_cache_bytes = 0;
    dp.verbose = 0;
    char err[512];
    llm_engine *D = llm_engine_create(&dp, err, sizeof(err));
    if (!D) return llm__fail(e, LLM_ERR_INVALID_ARG, "the draft model %s: %s", dp.model_path, err);
    E->spec.draft = D;
    if (E->model.n_vocab != D->model.n_vocab)
        return llm__fail(e, LLM_ERR_INVALID_ARG,
                         "the draft model %s has %d tokens, the model %d: their vocabularies must be the same",
                         dp.model_path, D->model.n_vocab, E->model.n_vocab);
    for (int t = 0; t < E->model.n_vocab; t++) {
        char pa[256], pb[256];
        int la = llm_token_to_piece(E, t, pa, sizeof(pa)), lb = llm_token_to_piece(D, t, pb, sizeof(pb));
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)LLM__MIN(la, (int)sizeof(pa)))) ||
            llm_token_is_control(E, t) != llm_token_is_control(D, t))
            return llm__fail(e, LLM_ERR_INVALID_ARG, "the draft model %s has another vocabulary: token %d differs",
                             dp.model_path, t);
    }
    // a first forward pass now (weights repacked, pages touched), not in the first step's time
    int s = llm_seq_new(D);
    int32_t warm[8];
    for (int i = 0; i < 8; i++) warm[i] = D->vocab.bos >= 0 ? D->vocab.bos : 0;
    if (s < 0 || llm_seq_eval(D, s, warm, 8, NULL, 0) != LLM_OK)
        return llm__fail(e, LLM_ERR_BACKEND, "the draft model %s: %s", dp.model_path, llm_last_error(D));
    llm_seq_free(D, s);
    size_t n = (size_t)LLM__SPEC_REQS * (size_t)E->params.num_speculative_tokens * (size_t)E->model.n_vocab;
    if (!(E->spec.q = malloc(n * sizeof(float)))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    return LLM_OK;
}

llm_engine *llm_engine_create(const struct llm_engine_params *params, char *err, size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    llm_engine *E = calloc(1, sizeof(*E));
    if (!E) { if (err && err_size) snprintf(err, err_size, "out of memory"); return NULL; }
    struct llm_engine_params p = params ? *params : llm_engine_params_default();
    enum llm_status st = llm__params_check(&p, &e);
    E->params = p;
    if (st == LLM_OK) st = llm__engine_load(E, &e);
    if (st == LLM_OK && p.speculative_model && p.load == LLM_LOAD_ALL) st = llm__draft_open(E, &e);
    if (st == LLM_OK) return E;
    if (p.backend == LLM_BACKEND_AUTO && E->be.iface && strcmp(E->be.iface->name, "cpu") != 0) {
        // auto: the GPU could not take the model (memory, a type): the CPU instead
        if (p.verbose > 0) fprintf(stderr, "llm: %s; running on the CPU\n", e.msg[0] ? e.msg : llm_status_str(st));
        llm_engine_free(E);
        p.backend = LLM_BACKEND_CPU;
        return llm_engine_create(&p, err, err_size);
    }
    if (err && err_size) snprintf(err, err_size, "%s", e.msg[0] ? e.msg : llm_status_str(st));
    llm_engine_free(E);
    return NULL;
}

void llm_engine_free(llm_engine *E) {
    if (!E) return;
    llm__serving_free(E);
    llm_engine_free(E->spec.draft);
    free(E->spec.q);
    if (E->be.iface && (E->acts.buf.data || E->acts.buf.handle)) E->be.iface->buf_free(E->be.ctx, &E->acts.buf);
    llm__kv_cache_free(&E->kv, &E->be);
    llm__model_free(&E->model, &E->be);
    llm__vocab_free(&E->vocab);
    llm__backend_close(&E->be);
    free(E);
}

const char *llm_last_error(const llm_engine *E) {
    return E ? E->err.msg : "no engine";
}

enum llm_status llm_last_status(const llm_engine *E) {
    return E ? E->err.status : LLM_ERR_INVALID_ARG;
}

void llm_get_model_info(const llm_engine *E, struct llm_model_info *info) {
    const struct llm__model *m = &E->model;
    memset(info, 0, sizeof(*info));
    info->arch = m->arch_name;
    info->name = m->name;
    info->n_vocab = m->n_vocab;
    info->n_embd = m->n_embd;
    info->n_layer = m->n_layer;
    info->n_head = m->n_head;
    info->n_head_kv = m->n_head_kv;
    info->head_dim = m->head_dim;
    info->n_ff = m->n_ff;
    info->n_ctx_train = m->n_ctx_train;
    info->n_params = 0;
    info->weight_bytes = 0;
    for (int64_t i = 0; i < m->gguf.n_tensors; i++) {
        int64_t n = 1;
        for (int d = 0; d < m->gguf.tensors[i].n_dims; d++) n *= m->gguf.tensors[i].ne[d];
        info->n_params += n;
        info->n_params_active += m->n_expert && strstr(m->gguf.tensors[i].name, "_exps.")
                                     ? n / m->n_expert * m->n_expert_used : n;
        info->weight_bytes += m->gguf.tensors[i].size;
    }
    info->n_expert = m->n_expert;
    info->n_expert_used = m->n_expert_used;
    info->n_ff_exp = m->n_ff_exp;
    info->bytes_per_token = E->params.load == LLM_LOAD_ALL ? llm__model_bytes_per_token(m) : 0;
    info->macs_per_token = E->params.load == LLM_LOAD_ALL ? llm__model_macs_per_token(m) : 0;
    info->bos_id = E->params.load == LLM_LOAD_METADATA ? -1 : E->vocab.bos;
    info->eos_id = E->params.load == LLM_LOAD_METADATA ? -1 : E->vocab.eos;
    info->add_bos = E->vocab.add_bos;
    info->max_token_bytes = E->params.load == LLM_LOAD_METADATA ? 0 : E->vocab.max_token_bytes;
    info->gguf_version = m->gguf.version;
    info->n_tensors = m->gguf.n_tensors;
    info->n_metadata = m->gguf.n_kv;
    info->unsupported = E->unsupported[0] ? E->unsupported : NULL;
}

void llm_get_engine_info(const llm_engine *E, struct llm_engine_info *info) {
    memset(info, 0, sizeof(*info));
    const char *bn = E->be.iface ? E->be.iface->name : "none";
    info->backend = !strcmp(bn, "vulkan") ? LLM_BACKEND_VULKAN
                    : !strcmp(bn, "cuda") ? LLM_BACKEND_CUDA
                                          : LLM_BACKEND_CPU;
    info->backend_name = bn;
    info->device_name = E->be.iface && E->be.iface->device_name ? E->be.iface->device_name(E->be.ctx) : "";
    info->n_threads = E->params.n_threads;
    info->max_model_len = E->max_model_len;
    info->block_size = E->params.block_size;
    info->kv_tokens = E->kv.n_blocks * E->kv.block_size;
    info->kv_cache_bytes = E->kv.k.size + E->kv.v.size;
    info->kv_cache_dtype = E->params.kv_cache_dtype;
    info->max_num_seqs = E->params.max_num_seqs;
    info->max_num_batched_tokens = E->params.max_num_batched_tokens;
    info->enable_prefix_caching = E->params.enable_prefix_caching != 0;
    info->scheduling_policy = E->params.scheduling_policy;
}

static enum llm_meta_type llm__meta_type(uint32_t t) {
    switch (t) {
    case LLM__GGUF_I8: case LLM__GGUF_I16: case LLM__GGUF_I32: case LLM__GGUF_I64: return LLM_META_INT;
    case LLM__GGUF_F32: case LLM__GGUF_F64: return LLM_META_FLOAT;
    case LLM__GGUF_BOOL: return LLM_META_BOOL;
    case LLM__GGUF_STR: return LLM_META_STRING;
    case LLM__GGUF_ARR: return LLM_META_ARRAY;
    default: return LLM_META_UINT;
    }
}

enum llm_status llm_model_meta(llm_engine *E, int64_t index, struct llm_meta *meta) {
    const struct llm__gguf *g = &E->model.gguf;
    if (index < 0 || index >= g->n_kv || !meta)
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "metadata index %lld out of range [0, %lld)",
                         (long long)index, (long long)g->n_kv);
    const struct llm__gguf_kv *kv = &g->kv[index];
    memset(meta, 0, sizeof(*meta));
    meta->key = kv->key;
    meta->type = llm__meta_type(kv->type);
    switch (meta->type) {
    case LLM_META_INT: meta->i = kv->v.i64; meta->f = (double)kv->v.i64; break;
    case LLM_META_UINT: meta->u = kv->v.u64; meta->i = (int64_t)kv->v.u64; meta->f = (double)kv->v.u64; break;
    case LLM_META_FLOAT: meta->f = kv->v.f64; break;
    case LLM_META_BOOL: meta->b = kv->v.u64 != 0; break;
    case LLM_META_STRING: meta->str = kv->v.str.ptr; meta->str_len = (size_t)kv->v.str.len; break;
    case LLM_META_ARRAY: meta->elem_type = llm__meta_type(kv->arr_type); meta->n_elems = kv->arr_n; break;
    }
    return LLM_OK;
}

enum llm_status llm_model_tensor(llm_engine *E, int64_t index, struct llm_tensor_info *info) {
    const struct llm__gguf *g = &E->model.gguf;
    if (index < 0 || index >= g->n_tensors || !info)
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tensor index %lld out of range [0, %lld)",
                         (long long)index, (long long)g->n_tensors);
    const struct llm__gguf_tensor *t = &g->tensors[index];
    const struct llm__type_info *ti = llm__type_info(t->type);
    memset(info, 0, sizeof(*info));
    info->name = t->name;
    info->type = (int)t->type;
    info->type_name = ti ? ti->name : "unknown";
    info->supported = ti && ti->supported;
    info->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) info->ne[d] = t->ne[d];
    info->bytes = t->size;
    return LLM_OK;
}

int llm_list_devices(struct llm_device *devices, int max, char *err, size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    int n = llm__list_devices(devices, max, &e);
    if (n < 0 && err && err_size) snprintf(err, err_size, "%s", e.msg);
    return n;
}

enum llm_status llm_measure_bandwidth(llm_engine *E, double *gb_per_s) {
    *gb_per_s = 0.0;
    if (!E->be.iface || !E->be.iface->bandwidth)
        return llm__fail(&E->err, LLM_ERR_UNSUPPORTED, "the %s backend has no bandwidth probe",
                         E->be.iface ? E->be.iface->name : "(no)");
    return E->be.iface->bandwidth(E->be.ctx, gb_per_s, &E->err);
}

enum llm_status llm_measure_compute(llm_engine *E, double *gmacs) {
    *gmacs = 0.0;
    if (!E->be.iface || !E->be.iface->compute_peak)
        return llm__fail(&E->err, LLM_ERR_UNSUPPORTED, "the %s backend has no compute probe",
                         E->be.iface ? E->be.iface->name : "(no)");
    return E->be.iface->compute_peak(E->be.ctx, gmacs, &E->err);
}

void llm_set_profiling(llm_engine *E, int on) {
    if (on && !E->prof) memset(&E->prof_data, 0, sizeof(E->prof_data));   // a stopped profile stays readable
    E->prof = on ? &E->prof_data : NULL;
}

void llm_get_profile(const llm_engine *E, struct llm_profile *p) {
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < LLM_PROF_COUNT; i++) p->seconds[i] = E->prof_data.t[i];
    p->n_steps = E->prof_data.steps;
}

const char *llm_prof_op_name(enum llm_prof_op op) {
    static const char *const names[LLM_PROF_COUNT] = {
        "embedding", "norms", "attention: q/k/v projections", "attention: rope", "attention: KV store",
        "attention: paged attention", "attention: output projection", "MLP: gate/up", "MLP: silu x up", "MLP: down",
        "residual adds", "logits (final norm + output)", "sampling", "scheduling"};
    return op >= 0 && op < LLM_PROF_COUNT ? names[op] : NULL;
}

const char *llm_finish_reason_str(enum llm_finish_reason r) {
    switch (r) {
    case LLM_FINISH_NONE: return "";
    case LLM_FINISH_STOP: return "stop";
    case LLM_FINISH_LENGTH: return "length";
    case LLM_FINISH_ABORT: return "abort";
    case LLM_FINISH_ERROR: return "error";
    case LLM_FINISH_CONTEXT: return "context";
    }
    return "";
}

int llm_tokenize(llm_engine *E, const char *text, size_t len, int flags, int32_t *tokens, int max_tokens) {
    if (E->params.load == LLM_LOAD_METADATA) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: the engine has no vocabulary (LLM_LOAD_METADATA)");
        return -1;
    }
    if (!text && len) { llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: NULL text"); return -1; }
    if (max_tokens < 0 || (!tokens && max_tokens > 0)) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG, "tokenize: bad output buffer");
        return -1;
    }
    return llm__tokenize(&E->vocab, text, len, flags, tokens, max_tokens, &E->err);
}

int llm_token_to_piece(llm_engine *E, int32_t token, char *buf, size_t size) {
    if (!buf && size) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "token_to_piece: NULL buffer"), -1;
    int n = llm__token_piece(&E->vocab, token, false, buf, size);
    if (n < 0)
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "token id %d is out of range [0, %d)", token, E->vocab.n), -1;
    if (size) buf[LLM__MIN((size_t)n, size - 1)] = 0;
    return n;
}

int llm_token_is_eog(const llm_engine *E, int32_t token) {
    return token >= 0 && token < E->vocab.n && E->vocab.eog[token];
}

int llm_token_is_control(const llm_engine *E, int32_t token) {
    return token >= 0 && token < E->vocab.n && E->vocab.attr[token] == LLM__TOK_CONTROL;
}

int llm_detokenize(llm_engine *E, const int32_t *tokens, int n, int flags, char *buf, size_t size) {
    if (n < 0 || (n > 0 && !tokens) || (!buf && size))
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "detokenize: bad arguments"), -1;
    struct llm__outbuf o = {0};
    if (!llm__detokenize(&E->vocab, tokens, n, flags, &o)) {
        free(o.p);
        return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "detokenize: a token id is out of range [0, %d)", E->vocab.n),
               -1;
    }
    int r = llm__outbuf_emit(&o, buf, size);
    if (r < 0) llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    return r;
}

void llm_text_stream_reset(struct llm_text_stream *stream) {
    memset(stream, 0, sizeof(*stream));
}

int llm_text_stream_push(llm_engine *E, struct llm_text_stream *stream, int32_t token, int flags, char *out,
                         size_t size) {
    if (!out && size) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "text_stream_push: NULL buffer"), -1;
    struct llm_text_stream u = *stream;
    struct llm__outbuf o = {0};
    llm__stream_push(&E->vocab, &u, token, flags, &o);
    if (o.fail || o.n >= INT_MAX) { free(o.p); return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"), -1; }
    if (o.n >= size) { free(o.p); return (int)o.n; }   // does not fit: nothing written or consumed
    *stream = u;
    return llm__outbuf_emit(&o, out, size);
}

int llm_text_stream_flush(struct llm_text_stream *stream, char *out, size_t size) {
    struct llm_text_stream u = *stream;
    struct llm__outbuf o = {0};
    llm__stream_feed(&u, "", 0, &o, true);
    int r = llm__outbuf_emit(&o, out, size);
    if (r >= 0 && (size_t)r < size) llm_text_stream_reset(stream);   // all of it was written
    return r;
}

const char *llm_chat_template_detect(const llm_engine *E) {
    return E->vocab.chat_template[0] ? E->vocab.chat_template : NULL;
}

int llm_chat_apply(const char *template_name, const struct llm_chat_message *messages, int n, int add_assistant,
                   char *buf, size_t size) {
    struct llm__outbuf o = {0};
    if (n < 0 || (n > 0 && !messages) || (!buf && size)) return -1;
    if (llm__chat_apply(template_name, messages, n, add_assistant != 0, &o) < 0) { free(o.p); return -1; }
    return llm__outbuf_emit(&o, buf, size);
}

int llm_seq_new(llm_engine *E) {
    int i = 0;
    if (E->params.load != LLM_LOAD_ALL) {
        llm__fail(&E->err, LLM_ERR_INVALID_ARG,
                  "the engine has no weights loaded (LLM_LOAD_VOCAB or LLM_LOAD_METADATA)");
        return -1;
    }
    while (i < E->n_seqs && E->seqs[i].used) i++;
    if (i == E->n_seqs) {
        struct llm__seq *s = realloc(E->seqs, (size_t)(E->n_seqs + 1) * sizeof(*s));
        if (!s) { llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory"); return -1; }
        E->seqs = s;
        E->n_seqs++;
    }
    memset(&E->seqs[i], 0, sizeof(E->seqs[i]));
    E->seqs[i].used = true;
    return i;
}

static struct llm__seq *llm__seq_get(const llm_engine *E, int seq) {
    return seq >= 0 && seq < E->n_seqs && E->seqs[seq].used ? &E->seqs[seq] : NULL;
}

void llm_seq_free(llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    if (s) llm__blocks_release(&E->blocks, s);
}

int llm_seq_len(llm_engine *E, int seq) {
    struct llm__seq *s = llm__seq_get(E, seq);
    if (!s) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no sequence %d", seq), -1;
    return s->len;
}

// The tokens go through the step pipeline without the scheduler: blocks for all of them first,
// then chunks of at most max_num_batched_tokens (LLM__MAX_STEP_OUT with all_logits: one logit
// row per token), each prepared and executed as a step of one sequence.
enum llm_status llm_seq_eval(llm_engine *E, int seq, const int32_t *tokens, int n, float *logits, int all_logits) {
    struct llm__seq *s = llm__seq_get(E, seq);
    const struct llm__model *m = &E->model;
    enum llm_status st = LLM_OK;
    if (!s) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no sequence %d", seq);
    if (n < 1 || !tokens) return llm__fail(&E->err, LLM_ERR_INVALID_ARG, "no tokens to evaluate");
    if (!llm__ids_ok(E, tokens, n, "seq_eval")) return E->err.status;
    if ((int64_t)s->len + n > E->max_model_len)
        return llm__fail(&E->err, LLM_ERR_CONTEXT, "%d tokens do not fit in the context: %d used of %d",
                         n, s->len, E->max_model_len);
    if (!llm__blocks_can_allocate(&E->blocks, s, n))
        return llm__fail(&E->err, LLM_ERR_CONTEXT,
                         "KV cache is full: %lld more blocks of %d tokens needed, %d free of %d",
                         (long long)llm__blocks_needed(&E->blocks, s, n), E->blocks.block_size,
                         llm__blocks_available(&E->blocks), E->blocks.n_blocks);
    if (!llm__blocks_allocate(&E->blocks, s, n)) return llm__fail(&E->err, LLM_ERR_NOMEM, "out of memory");
    const int chunk = all_logits ? LLM__MAX_STEP_OUT : E->params.max_num_batched_tokens;
    for (int i0 = 0; i0 < n && st == LLM_OK; i0 += chunk) {
        int T = LLM__MIN(chunk, n - i0);
        int n_logits = !logits ? 0 : all_logits ? T : i0 + T == n;
        float *out = logits && all_logits ? logits + (size_t)i0 * (size_t)m->n_vocab : logits;
        st = llm__seq_eval_chunk(E, s, tokens + i0, T, n_logits, out);
    }
    if (st != LLM_OK) llm__blocks_truncate(&E->blocks, s, s->len);   // the blocks of what was not computed
    return st;
}
