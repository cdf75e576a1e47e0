// KV cache blocks: the paged block manager, prefix caching

#include "internal.h"

// === KV cache blocks ===
//
// Two structures with two jobs, as in vLLM:
//   struct llm__blocks    the block manager: which block holds which tokens. Host bookkeeping
//                         only (block ids, reference counts, prefix hashes, an LRU list, a free
//                         list; each sequence's block table is its struct llm__seq), with no
//                         model and no backend, so it is created and tested alone.
//   struct llm__kv_cache  the backend's KV memory: K and V buffers of n_blocks * block_size token
//                         rows per layer, and the per-layer views the layer loop hands to
//                         kv_store and attention.
// A sequence's token at position p lives in row (slot) blocks[p / block_size] * block_size +
// p % block_size of every layer's K and V; a sequence's blocks are allocated a whole block at a
// time as it grows.
//
// Reference counts: a block is used by every sequence whose table holds it. With prefix caching,
// a block that is full is identified by a chained hash of (its parent block's hash, its token
// ids) and entered in a hash table; a new sequence whose prompt starts with the same tokens takes
// those blocks (reference count + 1; every hash hit is confirmed by comparing the tokens and the
// parent's hash). A block whose count drops to zero stays cached, in least-recently-used order,
// until a block is needed and none is free: then the oldest is evicted. Blocks of a sequence are
// only ever written while they are its partly filled last block, which is never shared.
//
// The calls come in pairs, as nano-vllm's BlockManager: llm__blocks_can_allocate says whether a
// sequence can grow by n tokens, llm__blocks_allocate then grows its table (it cannot run out of
// blocks after a yes). llm__blocks_take_prefix (the cached start of a prompt),
// llm__blocks_commit (blocks that became full enter the cache), llm__blocks_truncate (a sequence
// gives back its last tokens) and llm__blocks_release (all of them) complete the set.

void llm__blocks_free(struct llm__blocks *bm) {
    free(bm->free_ids);
    free(bm->ref);
    free(bm->hashed);
    free(bm->hash);
    free(bm->parent);
    free(bm->content);
    free(bm->bucket);
    free(bm->bnext);
    free(bm->lru_prev);
    free(bm->lru_next);
    memset(bm, 0, sizeof(*bm));
}

enum llm_status llm__blocks_init(struct llm__blocks *bm, int n_blocks, int block_size, bool caching,
                                 struct llm__err *e) {
    memset(bm, 0, sizeof(*bm));
    // slots (block * block_size + offset) are int32, and the hash table has 2 buckets per block
    if (block_size < 1 || n_blocks < 1 || n_blocks > INT32_MAX / block_size / 2)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "KV blocks: %d blocks of %d tokens", n_blocks, block_size);
    size_t nb = (size_t)n_blocks;
    bm->block_size = block_size;
    bm->n_blocks = n_blocks;
    bm->free_ids = malloc(nb * sizeof(int32_t));
    bm->ref = calloc(nb, sizeof(int32_t));
    if (!bm->free_ids || !bm->ref) { llm__blocks_free(bm); return llm__fail(e, LLM_ERR_NOMEM, "out of memory"); }
    // Hand out low ids first.
    bm->n_free = n_blocks;
    for (int i = 0; i < n_blocks; i++) bm->free_ids[i] = n_blocks - 1 - i;
    bm->lru_head = bm->lru_tail = -1;
    bm->caching = caching;
    if (!caching) return LLM_OK;
    uint32_t nbk = 1;
    while (nbk < 2 * nb) nbk <<= 1;
    bm->bucket_mask = nbk - 1;
    bm->hashed = calloc(nb, 1);
    bm->hash = calloc(nb, sizeof(uint64_t));
    bm->parent = calloc(nb, sizeof(uint64_t));
    bm->content = malloc(nb * (size_t)block_size * sizeof(int32_t));
    bm->bucket = malloc((size_t)nbk * sizeof(int32_t));
    bm->bnext = malloc(nb * sizeof(int32_t));
    bm->lru_prev = malloc(nb * sizeof(int32_t));
    bm->lru_next = malloc(nb * sizeof(int32_t));
    if (!bm->hashed || !bm->hash || !bm->parent || !bm->content || !bm->bucket || !bm->bnext || !bm->lru_prev ||
        !bm->lru_next) {
        llm__blocks_free(bm);
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < nbk; i++) bm->bucket[i] = -1;
    return LLM_OK;
}

// Blocks that can be handed out: free ones and cached ones nobody uses.
int llm__blocks_available(const struct llm__blocks *bm) { return bm->n_free + bm->n_lru; }

static void llm__lru_remove(struct llm__blocks *bm, int32_t b) {
    int32_t p = bm->lru_prev[b], n = bm->lru_next[b];
    if (p >= 0) bm->lru_next[p] = n; else bm->lru_head = n;
    if (n >= 0) bm->lru_prev[n] = p; else bm->lru_tail = p;
    bm->n_lru--;
}

static void llm__lru_push(struct llm__blocks *bm, int32_t b) {   // most recently used at the tail
    bm->lru_prev[b] = bm->lru_tail;
    bm->lru_next[b] = -1;
    if (bm->lru_tail >= 0) bm->lru_next[bm->lru_tail] = b; else bm->lru_head = b;
    bm->lru_tail = b;
    bm->n_lru++;
}

static void llm__hash_remove(struct llm__blocks *bm, int32_t b) {
    int32_t *p = &bm->bucket[bm->hash[b] & bm->bucket_mask];
    while (*p != b) p = &bm->bnext[*p];
    *p = bm->bnext[b];
    bm->hashed[b] = 0;
}

// A block for a sequence (reference count 1), evicting the least recently used cached block when
// no block is free; -1 when every block is in use.
static int32_t llm__block_alloc(struct llm__blocks *bm) {
    int32_t b;
    if (bm->n_free > 0) b = bm->free_ids[--bm->n_free];
    else if (bm->lru_head >= 0) {
        b = bm->lru_head;
        llm__lru_remove(bm, b);
        llm__hash_remove(bm, b);
    } else return -1;
    bm->ref[b] = 1;
    return b;
}

// One sequence stops using a block: at zero references it is free, or cached when it is hashed.
static void llm__block_release(struct llm__blocks *bm, int32_t b) {
    if (--bm->ref[b] > 0) return;
    if (bm->caching && bm->hashed[b]) llm__lru_push(bm, b);
    else bm->free_ids[bm->n_free++] = b;
}

// The chained hash of a full block: its parent's hash and its tokens (parent 0 for the first).
static uint64_t llm__block_hash(uint64_t parent, const int32_t *tokens, int n) {
    uint64_t h = parent ^ 0x6a09e667f3bcc909ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)tokens[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return llm__splitmix64(&h);
}

// A cached block with this hash, parent and tokens (confirmed: a hash collision does not match), or -1.
static int32_t llm__block_find(const struct llm__blocks *bm, uint64_t h, uint64_t parent, const int32_t *tokens) {
    for (int32_t b = bm->bucket[h & bm->bucket_mask]; b >= 0; b = bm->bnext[b])
        if (bm->hash[b] == h && bm->parent[b] == parent &&
            memcmp(&bm->content[(size_t)b * (size_t)bm->block_size], tokens,
                   (size_t)bm->block_size * sizeof(int32_t)) == 0)
            return b;
    return -1;
}

// Enters a sequence's block that just became full into the cache (unless the same content is
// there already). Returns its hash, the parent of the next block.
static uint64_t llm__block_commit(struct llm__blocks *bm, int32_t b, uint64_t parent, const int32_t *tokens) {
    uint64_t h = llm__block_hash(parent, tokens, bm->block_size);
    if (!bm->caching || bm->hashed[b] || llm__block_find(bm, h, parent, tokens) >= 0) return h;
    bm->hash[b] = h;
    bm->parent[b] = parent;
    memcpy(&bm->content[(size_t)b * (size_t)bm->block_size], tokens, (size_t)bm->block_size * sizeof(int32_t));
    bm->bnext[b] = bm->bucket[h & bm->bucket_mask];
    bm->bucket[h & bm->bucket_mask] = b;
    bm->hashed[b] = 1;
    return h;
}

static bool llm__seq_grow_table(struct llm__seq *sq, int n) {
    if (n <= sq->cap_blocks) return true;
    int cap = LLM__MAX(n, 2 * sq->cap_blocks);
    int32_t *b = realloc(sq->blocks, (size_t)cap * sizeof(int32_t));
    if (!b) return false;
    sq->blocks = b;
    sq->cap_blocks = cap;
    return true;
}

// Blocks a sequence lacks to hold n more tokens (0 when its last block has room).
int64_t llm__blocks_needed(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    int64_t need = ((int64_t)sq->len + n + bm->block_size - 1) / bm->block_size - sq->n_blocks;
    return need > 0 ? need : 0;
}

bool llm__blocks_can_allocate(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    return llm__blocks_needed(bm, sq, n) <= llm__blocks_available(bm);
}

// The same from free blocks alone: drafts, which must not evict a cached prefix block (a block
// the next request with the same prompt would have found) for tokens that may be rejected.
bool llm__blocks_can_allocate_free(const struct llm__blocks *bm, const struct llm__seq *sq, int n) {
    return llm__blocks_needed(bm, sq, n) <= bm->n_free;
}

// Grows a sequence's block table to hold n more tokens; llm__blocks_can_allocate said yes. Its
// length does not change (it grows as the tokens are computed). false: no memory for the table,
// and nothing changed.
bool llm__blocks_allocate(struct llm__blocks *bm, struct llm__seq *sq, int n) {
    int need = (int)llm__blocks_needed(bm, sq, n);
    assert(need <= llm__blocks_available(bm));
    if (need == 0) return true;
    if (!llm__seq_grow_table(sq, sq->n_blocks + need)) return false;
    for (int i = 0; i < need; i++) sq->blocks[sq->n_blocks++] = llm__block_alloc(bm);
    return true;
}

// An empty sequence takes the cached blocks that hold the start of tokens[0..n): whole blocks
// only, and never all n tokens (the last one is computed again, for its logits). Returns the
// tokens covered, now its length.
int llm__blocks_take_prefix(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens, int n) {
    if (!bm->caching || sq->n_blocks > 0) return 0;
    int bs = bm->block_size, max_blocks = (n - 1) / bs;
    uint64_t parent = 0;
    for (int i = 0; i < max_blocks; i++) {
        const int32_t *t = tokens + (size_t)i * (size_t)bs;
        uint64_t h = llm__block_hash(parent, t, bs);
        int32_t b = llm__block_find(bm, h, parent, t);
        if (b < 0 || !llm__seq_grow_table(sq, sq->n_blocks + 1)) break;
        if (bm->ref[b]++ == 0) llm__lru_remove(bm, b);
        sq->blocks[sq->n_blocks++] = b;
        parent = h;
    }
    sq->len = sq->n_committed = sq->n_blocks;
    sq->len *= bs;
    sq->last_hash = parent;
    return sq->len;
}

// Enters the sequence's blocks that are full (of tokens[0..len)) into the prefix cache.
void llm__blocks_commit(struct llm__blocks *bm, struct llm__seq *sq, const int32_t *tokens) {
    if (!bm->caching) return;
    while (sq->n_committed < sq->len / bm->block_size) {
        int i = sq->n_committed;
        sq->last_hash =
            llm__block_commit(bm, sq->blocks[i], sq->last_hash, tokens + (size_t)i * (size_t)bm->block_size);
        sq->n_committed++;
    }
}

// Shrinks a sequence to its first len tokens and gives back the blocks past them: speculative
// decoding's rollback of rejected draft tokens, or blocks allocated for tokens that were not
// computed. Blocks entered in the prefix cache are never cut into (len >= n_committed *
// block_size): other sequences may share them, so they must not be written again.
void llm__blocks_truncate(struct llm__blocks *bm, struct llm__seq *sq, int len) {
    assert(len >= 0 && len <= sq->len && len >= sq->n_committed * bm->block_size);
    int keep = (len + bm->block_size - 1) / bm->block_size;
    while (sq->n_blocks > keep) llm__block_release(bm, sq->blocks[--sq->n_blocks]);
    sq->len = len;
}

// Gives back all of a sequence's blocks (the last first, so a prefix's blocks leave the cache
// after their children) and empties it.
void llm__blocks_release(struct llm__blocks *bm, struct llm__seq *sq) {
    for (int i = sq->n_blocks - 1; i >= 0; i--) llm__block_release(bm, sq->blocks[i]);
    free(sq->blocks);
    memset(sq, 0, sizeof(*sq));
}

// As many blocks as `bytes` hold (at least one).
enum llm_status llm__kv_cache_init(struct llm__kv_cache *kv, const struct llm__model *m, struct llm_backend *be,
                                   int type, int block_size, size_t bytes, struct llm__err *e) {
    enum llm_status st;
    kv->type = type;
    kv->block_size = block_size;
    kv->row_bytes = llm__row_bytes(type, (int64_t)m->n_head_kv * m->head_dim);
    size_t per_block = kv->row_bytes * (size_t)block_size * (size_t)m->n_layer * 2;
    size_t nb = bytes / per_block;
    if (nb < 1)
        return llm__fail(e, LLM_ERR_NOMEM, "KV cache memory of %zu bytes holds no block of %d tokens (%zu bytes)",
                         bytes, block_size, per_block);
    if (nb > (size_t)INT32_MAX / (size_t)block_size / 2) nb = (size_t)INT32_MAX / (size_t)block_size / 2;
    kv->n_blocks = (int)nb;
    size_t layer = kv->row_bytes * (size_t)block_size * nb;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->k, layer * (size_t)m->n_layer, e))) return st;
    if ((st = be->iface->buf_alloc(be->ctx, &kv->v, layer * (size_t)m->n_layer, e))) return st;
    kv->k_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    kv->v_layer = calloc((size_t)m->n_layer, sizeof(struct llm__tensor));
    if (!kv->k_layer || !kv->v_layer) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int l = 0; l < m->n_layer; l++) {
        int64_t rows = (int64_t)nb * block_size, cols = (int64_t)m->n_head_kv * m->head_dim;
        kv->k_layer[l] = (struct llm__tensor){&kv->k, layer * (size_t)l, type, cols, rows, kv->row_bytes};
        kv->v_layer[l] = (struct llm__tensor){&kv->v, layer * (size_t)l, type, cols, rows, kv->row_bytes};
        // Host memory: the first 2 MB of each layer's part (the first blocks taken: block 0
        // first) are touched now. Each layer's part starts a huge page of its own, which the
        // kernel zeroes when it is first written: 2 x n_layer x 2 MB at the first prompt step
        // otherwise (60 huge pages, 100-200 ms on SmolLM2, in its time to first token).
        if (!strcmp(be->iface->name, "cpu")) {
            const size_t n = LLM__MIN(layer, (size_t)2 << 20);
            for (size_t o = 0; o < n; o += 4096) {
                ((volatile char *)kv->k.data)[layer * (size_t)l + o] = 0;
                ((volatile char *)kv->v.data)[layer * (size_t)l + o] = 0;
            }
        }
    }
    return LLM_OK;
}

void llm__kv_cache_free(struct llm__kv_cache *kv, struct llm_backend *be) {
    if (be->iface) {
        if (kv->k.data || kv->k.handle) be->iface->buf_free(be->ctx, &kv->k);
        if (kv->v.data || kv->v.handle) be->iface->buf_free(be->ctx, &kv->v);
    }
    free(kv->k_layer);
    free(kv->v_layer);
    memset(kv, 0, sizeof(*kv));
}
