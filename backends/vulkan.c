// Vulkan backend: the vtable, memory, pipelines (the kernels are shaders/*.comp)
// === Vulkan backend ===
//
// Built in with -DLLM_VULKAN (make VULKAN=1): make compiles this file on its own like every
// module, and tools/amalgamate.sh pastes it into llm.c inside #ifdef LLM_VULKAN. The compute
// shaders of shaders/*.comp are compiled to SPIR-V at build time and embedded (llm_shaders.inc).
//
// One compute queue. Buffers are device-local; when that memory is also host-visible (integrated
// GPUs, Mesa's lavapipe) it is mapped and copied directly, otherwise through a staging buffer.
// A step is recorded into one command buffer (an op = one dispatch + a barrier), submitted once
// in end_step and waited for. Shaders bind whole buffers and find tensors by offsets in push
// constants, so no descriptor depends on alignment rules. As the backend contract asks
// (backends/backend.h), memory is allocated only by buf_alloc (and the staging buffer with the
// first buffer that needs it), weight_load (with the shader pipelines of the weight's type) and
// reserve (scratch and the step's arrays, for the largest step); a step records and submits, no
// more.
//
// Products: the activations are first rounded as the CPU backend rounds them for the weight type
// (round_act.comp), then a GEMV shader (matvec.comp, up to 8 tokens) or a tiled GEMM with shared
// memory (matmul.comp) dequantizes the weights (quant.glsl: every type the CPU multiplies, the
// AWQ/GPTQ layouts too; a pipeline per type through a specialization constant); an act-order
// GPTQ weight's input is gathered first (gather_cols.comp). Attention is one pass
// with an online softmax over the block table: prefill steps by tiles of a sequence's queries
// that share K/V chunks in shared memory (attn_prefill.comp); decode steps per (head, token),
// long contexts split across workgroups and the parts combined (flash-decoding,
// attn_reduce.comp). Mixtures of experts: moe_route.comp routes each token, moe_group.comp lists
// the step's slots by expert, matmul_id.comp multiplies each expert's rows with its slots, 64 at a
// time (the tiles of matmul.comp), moe_sum.comp weighs the results together. Allocations stay
// within the device-local heap.
// Shaders that can use subgroup arithmetic or 16-bit storage come in variants; the plain one is
// used where the device lacks the feature (or the caller asks for the plain ones: the tests).

#include "../src/internal.h"
#include <vulkan/vulkan.h>
#include "llm_shaders.inc"

enum { LLM__VK_ADD, LLM__VK_SILU_MUL, LLM__VK_RMSNORM, LLM__VK_GET_ROWS, LLM__VK_EMBED, LLM__VK_ROPE, LLM__VK_KV_STORE,
       LLM__VK_ATTENTION, LLM__VK_ATTN_REDUCE, LLM__VK_ATTN_PREFILL, LLM__VK_ROUND_ACT, LLM__VK_MATVEC, LLM__VK_MATMUL,
       LLM__VK_SCALE, LLM__VK_GELU_MUL, LLM__VK_GATHER_COLS, LLM__VK_SWIGLU_OAI, LLM__VK_MOE_ROUTE, LLM__VK_MOE_GROUP,
       LLM__VK_MATMUL_ID, LLM__VK_MOE_SUM, LLM__VK_N };

// Device features a shader variant may use (flags of llm__vk_backend_new: the ones to leave
// unused), and LLM__VK_NOMAP: no mapping of device memory even where it is host-visible (every
// copy through the staging buffer, as on a discrete GPU).
enum { LLM__VK_SUBGROUP = 1, LLM__VK_16BIT = 2, LLM__VK_PLAIN = LLM__VK_SUBGROUP | LLM__VK_16BIT, LLM__VK_NOMAP = 4 };

#define LLM__VK_CODE(x) {x, sizeof(x)}
static const struct {
    struct { const uint32_t *code; size_t size; } v[4];   // [features used: LLM__VK_SUBGROUP | LLM__VK_16BIT]
    int n_bufs;
    uint32_t push;
    bool typed;   // a pipeline per weight type: specialization constant 0 is the type (ggml's number)
} llm__vk_shaders[LLM__VK_N] = {
    [LLM__VK_ADD] = {{LLM__VK_CODE(llm_spv_add)}, 3, 16, false},
    [LLM__VK_SILU_MUL] = {{LLM__VK_CODE(llm_spv_silu_mul)}, 3, 16, false},
    [LLM__VK_RMSNORM] = {{LLM__VK_CODE(llm_spv_rmsnorm)}, 3, 28, false},
    [LLM__VK_GET_ROWS] = {{LLM__VK_CODE(llm_spv_get_rows)}, 3, 24, false},
    [LLM__VK_GATHER_COLS] = {{LLM__VK_CODE(llm_spv_gather_cols)}, 3, 24, false},
    [LLM__VK_EMBED] = {{LLM__VK_CODE(llm_spv_embed)}, 3, 20, true},
    [LLM__VK_ROPE] = {{LLM__VK_CODE(llm_spv_rope)}, 3, 60, false},
    [LLM__VK_KV_STORE] = {{LLM__VK_CODE(llm_spv_kv_store)}, 5, 56, false},
    [LLM__VK_ATTENTION] = {{LLM__VK_CODE(llm_spv_attention), {0}, LLM__VK_CODE(llm_spv_attention_f16)}, 7, 104, false},
    [LLM__VK_ATTN_REDUCE] = {{LLM__VK_CODE(llm_spv_attn_reduce)}, 3, 32, false},
    [LLM__VK_ATTN_PREFILL] = {{LLM__VK_CODE(llm_spv_attn_prefill), {0}, LLM__VK_CODE(llm_spv_attn_prefill_f16)}, 6, 104,
                              false},
    [LLM__VK_SCALE] = {{LLM__VK_CODE(llm_spv_scale)}, 2, 16, false},
    [LLM__VK_GELU_MUL] = {{LLM__VK_CODE(llm_spv_gelu_mul)}, 3, 16, false},
    [LLM__VK_ROUND_ACT] = {{LLM__VK_CODE(llm_spv_round_act)}, 2, 20, false},
    [LLM__VK_MATVEC] = {{LLM__VK_CODE(llm_spv_matvec), LLM__VK_CODE(llm_spv_matvec_sg),
                         LLM__VK_CODE(llm_spv_matvec_f16), LLM__VK_CODE(llm_spv_matvec_sg_f16)}, 4, 44, true},
    [LLM__VK_MATMUL] = {{LLM__VK_CODE(llm_spv_matmul), {0}, LLM__VK_CODE(llm_spv_matmul_f16)}, 4, 40, true},
    [LLM__VK_SWIGLU_OAI] = {{LLM__VK_CODE(llm_spv_swiglu_oai)}, 3, 24, false},
    [LLM__VK_MOE_ROUTE] = {{LLM__VK_CODE(llm_spv_moe_route)}, 3, 48, false},
    [LLM__VK_MOE_GROUP] = {{LLM__VK_CODE(llm_spv_moe_group)}, 2, 24, false},
    [LLM__VK_MATMUL_ID] = {{LLM__VK_CODE(llm_spv_matmul_id), {0}, LLM__VK_CODE(llm_spv_matmul_id_f16)}, 5, 56, true},
    [LLM__VK_MOE_SUM] = {{LLM__VK_CODE(llm_spv_moe_sum)}, 5, 52, false},
};

#define LLM__VK_NTYPES 22          // weight types with shaders (llm__vk_type_slot)
#define LLM__VK_MATVEC_MAX 8        // tokens up to which products take the GEMV shader
#define LLM__VK_SPLIT_KEYS 256      // flash-decoding: keys per split at least
#define LLM__VK_SPLIT_MAX 32        // and at most this many splits
#define LLM__VK_PART_BYTES (64u << 20)   // the splits' partial results: at most this much memory
#define LLM__VK_TILE_Q 8            // attn_prefill.comp: queries per tile (TQ)
#define LLM__VK_TILE_SHARED 26000   // ... and the shared memory it needs (bytes)
#define LLM__VK_STAGING_BYTES ((size_t)32 << 20)   // copies without a mapping go in pieces of this
#define LLM__VK_MAX_EXPERTS 1024    // moe_group.comp's shared arrays

struct llm__vk_mem {
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;        // host pointer when the memory is host-visible
    uint64_t bytes;   // counted in llm__vk.allocated (device-local memory)
};

struct llm__vk {
    VkInstance inst;
    VkPhysicalDevice pdev;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    VkPhysicalDeviceMemoryProperties memp;
    VkCommandPool cpool;
    VkCommandBuffer cmd;         // a step's ops
    VkCommandBuffer xfer;        // a copy through the staging buffer
    VkFence fence;
    VkDescriptorPool dpool;
    VkDescriptorSetLayout dsl[LLM__VK_N];
    VkPipelineLayout layout[LLM__VK_N];
    VkPipeline pipe[LLM__VK_N];
    VkShaderModule module[LLM__VK_N];      // of the typed shaders, whose pipelines weight_load makes per type
    VkPipeline tpipe[LLM__VK_N][LLM__VK_NTYPES];
    bool recording;
    int features;                // LLM__VK_SUBGROUP | LLM__VK_16BIT: what the device has and we use
    bool nomap;                  // LLM__VK_NOMAP
    uint32_t subgroup_size;
    const struct llm__step *step;
    int max_pos;                 // the step's largest position
    uint32_t n_tiles, o_tiles;   // the step's tiles for attn_prefill.comp: (first token, count) pairs
    bool tiled_attn;             // the device has the shared memory attn_prefill.comp needs
    int head_dim;                // (reserve's: kv_store of a q8_0 cache quantizes head by head)
    uint32_t xmax;               // matvec.comp: activations it keeps in shared memory (16 KB less)
    // scratch: activations rounded for a weight type (act), flash-decoding's partial results (part),
    // a mixture of experts' slots grouped by expert (moe: moe_group.comp's lists)
    struct llm__buf act, part, staging, moe;
    struct llm__err err;         // the first failure of an op of this step (reported by end_step)
    uint64_t allocated;          // bytes of device memory allocated
    uint64_t heap;               // size of the device-local heap
    // the step's arrays on the device, int32 each: tokens, positions, seq_idx, slot_mapping,
    // out_rows, block_tables (word offsets o_*)
    struct llm__buf stepbuf;
    int32_t *host;               // ... gathered here first
    size_t host_cap;
    uint32_t o_tok, o_pos, o_seq, o_slot, o_out, o_bt;
    char name[256];
};

static const char *llm__vk_result(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "success";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case VK_ERROR_INITIALIZATION_FAILED: return "initialization failed";
    case VK_ERROR_DEVICE_LOST: return "device lost";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "incompatible driver";
    case VK_ERROR_LAYER_NOT_PRESENT: return "layer not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "extension not present";
    default: return "error";
    }
}

// The Vulkan instance (1.1) for listing and opening devices.
static enum llm_status llm__vk_instance(VkInstance *inst, struct llm__err *e) {
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "llm.c",
                             .pEngineName = "llm.c", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ci, NULL, inst);
    if (r != VK_SUCCESS)
        return llm__fail(e, LLM_ERR_BACKEND, "vulkan: no Vulkan driver could be loaded (%s); install one (e.g. Mesa's "
                                             "mesa-vulkan-drivers) or use --backend cpu", llm__vk_result(r));
    return LLM_OK;
}

// The device type as llm_device.type names it.
static const char *llm__vk_type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

// Device memory: the largest device-local heap.
static uint64_t llm__vk_device_memory(VkPhysicalDevice pd) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    uint64_t best = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) best = LLM__MAX(best, mp.memoryHeaps[i].size);
    return best;
}

// The subgroup size, and in *features what the shader variants may use: subgroup arithmetic in
// compute shaders (LLM__VK_SUBGROUP), 16-bit storage buffers (LLM__VK_16BIT).
static uint32_t llm__vk_subgroup_size(VkPhysicalDevice pd, int *features) {
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    *features = ((sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                 (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)
                     ? LLM__VK_SUBGROUP : 0) |
                (s16.storageBuffer16BitAccess ? LLM__VK_16BIT : 0);
    return sg.subgroupSize;
}

// The physical devices in the order llm_list_devices numbers them (at most 16).
static uint32_t llm__vk_physical_devices(VkInstance inst, VkPhysicalDevice pds[16]) {
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(inst, &n, NULL);
    n = LLM__MIN(n, 16u);
    vkEnumeratePhysicalDevices(inst, &n, pds);
    return n;
}

// Describes up to max Vulkan devices (entry i: device index i of llm__vk_backend_new). Returns
// the number of devices, or -1 with the reason in e.
static int llm__vk_list_devices(struct llm_device *out, int max, struct llm__err *e) {
    VkInstance inst;
    if (llm__vk_instance(&inst, e) != LLM_OK) return -1;
    VkPhysicalDevice pds[16];
    uint32_t n = llm__vk_physical_devices(inst, pds);
    for (uint32_t i = 0; i < n && (int)i < max; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        int feat;
        struct llm_device *d = &out[i];
        memset(d, 0, sizeof(*d));
        d->backend = LLM_BACKEND_VULKAN;
        d->index = (int)i;
        snprintf(d->name, sizeof(d->name), "%s", p.deviceName);
        snprintf(d->type, sizeof(d->type), "%s", llm__vk_type_name(p.deviceType));
        d->memory_bytes = (size_t)llm__vk_device_memory(pds[i]);
        d->subgroup_size = (int)llm__vk_subgroup_size(pds[i], &feat);
        d->subgroup_arithmetic = (feat & LLM__VK_SUBGROUP) != 0;
        d->storage_16bit = (feat & LLM__VK_16BIT) != 0;
        snprintf(d->api_version, sizeof(d->api_version), "%u.%u.%u", VK_VERSION_MAJOR(p.apiVersion),
                 VK_VERSION_MINOR(p.apiVersion), VK_VERSION_PATCH(p.apiVersion));
    }
    vkDestroyInstance(inst, NULL);
    return (int)n;
}

static void llm__vk_buf_free(void *ctx, struct llm__buf *b);

static void llm__vk_free(void *ctx) {
    struct llm__vk *vk = ctx;
    if (!vk) return;
    if (vk->dev) {
        vkDeviceWaitIdle(vk->dev);
        struct llm__buf *scratch[] = {&vk->stepbuf, &vk->act, &vk->part, &vk->staging, &vk->moe};
        for (size_t i = 0; i < LLM__ARRAY_LEN(scratch); i++)
            if (scratch[i]->handle) llm__vk_buf_free(vk, scratch[i]);
        for (int i = 0; i < LLM__VK_N; i++) {
            if (vk->pipe[i]) vkDestroyPipeline(vk->dev, vk->pipe[i], NULL);
            for (int t = 0; t < LLM__VK_NTYPES; t++)
                if (vk->tpipe[i][t]) vkDestroyPipeline(vk->dev, vk->tpipe[i][t], NULL);
            if (vk->module[i]) vkDestroyShaderModule(vk->dev, vk->module[i], NULL);
            if (vk->layout[i]) vkDestroyPipelineLayout(vk->dev, vk->layout[i], NULL);
            if (vk->dsl[i]) vkDestroyDescriptorSetLayout(vk->dev, vk->dsl[i], NULL);
        }
        if (vk->dpool) vkDestroyDescriptorPool(vk->dev, vk->dpool, NULL);
        if (vk->fence) vkDestroyFence(vk->dev, vk->fence, NULL);
        if (vk->cpool) vkDestroyCommandPool(vk->dev, vk->cpool, NULL);
        vkDestroyDevice(vk->dev, NULL);
    }
    if (vk->inst) vkDestroyInstance(vk->inst, NULL);
    free(vk->host);
    free(vk);
}

// Memory type index with the required flags (and the preferred ones when possible), or -1.
static int llm__vk_mem_type(const struct llm__vk *vk, uint32_t bits, VkMemoryPropertyFlags need,
                            VkMemoryPropertyFlags want) {
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < vk->memp.memoryTypeCount; i++) {
            VkMemoryPropertyFlags f = vk->memp.memoryTypes[i].propertyFlags;
            if ((bits & (1u << i)) && (f & need) == need && (pass == 1 || (f & want) == want)) return (int)i;
        }
    return -1;
}

// A buffer of `size` bytes. Device-local, and mapped when that memory is also host-visible
// (unless the backend was opened with LLM__VK_NOMAP); a staging buffer instead is host-visible and
// always mapped. The first buffer without a mapping also makes the staging buffer its copies go
// through (here, where the contract lets the backend allocate: upload and download never do).
static enum llm_status llm__vk_alloc(struct llm__vk *vk, struct llm__buf *b, size_t size, bool staging,
                                     struct llm__err *e) {
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    memset(b, 0, sizeof(*b));
    struct llm__vk_mem *m = calloc(1, sizeof(*m));
    if (!m) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    // sizes rounded up to 16 bytes: shaders read 32-bit words, and a row of Q6_K (210-byte blocks)
    // may end in the middle of the buffer's last word
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = LLM__MAX((size + 15) & ~(size_t)15, 16),
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(vk->dev, &bi, NULL, &m->buf);
    VkMemoryRequirements req;
    if (r == VK_SUCCESS) vkGetBufferMemoryRequirements(vk->dev, m->buf, &req);
    int type = r != VK_SUCCESS ? -1
               : staging       ? llm__vk_mem_type(vk, req.memoryTypeBits, hv, 0)
                               : llm__vk_mem_type(vk, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, hv);
    if (r == VK_SUCCESS && type < 0) r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    VkMemoryPropertyFlags f = type >= 0 ? vk->memp.memoryTypes[type].propertyFlags : 0;
    // not beyond the heap, even where the driver would allow it (and then page, or fail later)
    bool counted = (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0;
    if (r == VK_SUCCESS && counted && vk->heap && vk->allocated + req.size > vk->heap)
        r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    if (r == VK_SUCCESS) {
        VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                   .memoryTypeIndex = (uint32_t)type};
        r = vkAllocateMemory(vk->dev, &ai, NULL, &m->mem);
    }
    if (r == VK_SUCCESS) r = vkBindBufferMemory(vk->dev, m->buf, m->mem, 0);
    if (r == VK_SUCCESS && (f & hv) == hv && (staging || !vk->nomap))
        r = vkMapMemory(vk->dev, m->mem, 0, VK_WHOLE_SIZE, 0, &m->map);
    if (r != VK_SUCCESS) {
        if (m->buf) vkDestroyBuffer(vk->dev, m->buf, NULL);
        if (m->mem) vkFreeMemory(vk->dev, m->mem, NULL);
        free(m);
        return llm__fail(e, LLM_ERR_NOMEM,
                         "vulkan: not enough device memory for %.1f MiB more (%s; %.2f GiB in use of %.2f GiB "
                         "on %s); use a smaller model, --kv-cache-memory or --max-num-batched-tokens, or --backend cpu",
                         (double)size / (1 << 20), llm__vk_result(r), (double)vk->allocated / (1 << 30),
                         (double)vk->heap / (1 << 30), vk->name);
    }
    m->bytes = counted ? req.size : 0;
    vk->allocated += m->bytes;
    b->handle = m;
    b->size = size;
    enum llm_status st = LLM_OK;
    if (!m->map && !vk->staging.handle && (st = llm__vk_alloc(vk, &vk->staging, LLM__VK_STAGING_BYTES, true, e)))
        llm__vk_buf_free(vk, b);
    return st;
}

static enum llm_status llm__vk_buf_alloc(void *ctx, struct llm__buf *b, size_t size, struct llm__err *e) {
    return llm__vk_alloc(ctx, b, size, false, e);
}

static void llm__vk_buf_free(void *ctx, struct llm__buf *b) {
    struct llm__vk *vk = ctx;
    struct llm__vk_mem *m = b->handle;
    if (m) {
        if (m->map) vkUnmapMemory(vk->dev, m->mem);
        vk->allocated -= m->bytes;
        vkDestroyBuffer(vk->dev, m->buf, NULL);
        vkFreeMemory(vk->dev, m->mem, NULL);
        free(m);
    }
    memset(b, 0, sizeof(*b));
}

// Copies between host memory and a buffer without a mapping, through the staging buffer (pieces
// of its size), one submit of the transfer command buffer and a wait per piece.
static void llm__vk_staged(struct llm__vk *vk, const struct llm__buf *b, size_t offs, void *host, size_t n, bool up) {
    struct llm__vk_mem *s = vk->staging.handle, *d = b->handle;
    assert(s && s->map);   // made by llm__vk_alloc with the first buffer without a mapping
    const size_t piece = vk->staging.size;
    for (size_t done = 0; done < n; done += piece) {
        size_t len = LLM__MIN(piece, n - done);
        if (up) memcpy(s->map, (char *)host + done, len);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        vkBeginCommandBuffer(vk->xfer, &bi);
        VkBufferCopy c = {up ? 0 : offs + done, up ? offs + done : 0, len};
        vkCmdCopyBuffer(vk->xfer, up ? s->buf : d->buf, up ? d->buf : s->buf, 1, &c);
        vkEndCommandBuffer(vk->xfer);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &vk->xfer};
        vkResetFences(vk->dev, 1, &vk->fence);
        vkQueueSubmit(vk->queue, 1, &si, vk->fence);
        vkWaitForFences(vk->dev, 1, &vk->fence, VK_TRUE, UINT64_MAX);
        if (!up) memcpy((char *)host + done, s->map, len);
    }
}

static void llm__vk_upload(void *ctx, struct llm__buf *b, size_t offs, const void *src, size_t n) {
    struct llm__vk_mem *m = b->handle;
    if (m->map) memcpy((char *)m->map + offs, src, n);
    else llm__vk_staged(ctx, b, offs, (void *)src, n, true);
}

static void llm__vk_download(void *ctx, const struct llm__buf *b, size_t offs, void *dst, size_t n) {
    struct llm__vk_mem *m = b->handle;
    if (m->map) memcpy(dst, (const char *)m->map + offs, n);
    else llm__vk_staged(ctx, b, offs, dst, n, false);
}

// The weight types with shaders, numbered 0..LLM__VK_NTYPES-1 (their typed pipelines); -1: none.
static int llm__vk_type_slot(int type) {
    static const int types[LLM__VK_NTYPES] = {LLM__TYPE_F32,  LLM__TYPE_F16,  LLM__TYPE_BF16, LLM__TYPE_Q8_0,
                                              LLM__TYPE_Q4_0, LLM__TYPE_Q4_1, LLM__TYPE_Q5_0, LLM__TYPE_Q5_1,
                                              LLM__TYPE_IQ4_NL, LLM__TYPE_Q4_K, LLM__TYPE_Q5_K, LLM__TYPE_Q6_K,
                                              LLM__TYPE_Q3_K, LLM__TYPE_Q2_K, LLM__TYPE_IQ4_XS, LLM__TYPE_G4_32,
                                              LLM__TYPE_G4_64, LLM__TYPE_G4_128, LLM__TYPE_G8_32, LLM__TYPE_G8_64,
                                              LLM__TYPE_G8_128, LLM__TYPE_MXFP4};
    for (int i = 0; i < LLM__VK_NTYPES; i++)
        if (types[i] == type) return i;
    return -1;
}

// How round_act.comp rounds activations for a weight type (the CPU's vec_dot_type): 1 f16, 2 bf16,
// 3 Q8_0, 4 Q8_K, 5 none (F32: a copy, when x is not aligned for the shaders). Types with a slot only.
// Q8_1 (Q4_1, Q5_1) has Q8_0's quants; its s, the rounded sum the CPU multiplies the min with,
// is not made: the dequantized weights' min meets the rounded activations themselves.
static int llm__vk_round_mode(int type) {
    switch (type) {
    case LLM__TYPE_F32: return 5;
    case LLM__TYPE_F16: return 1;
    case LLM__TYPE_BF16: return 2;
    case LLM__TYPE_Q8_0: case LLM__TYPE_Q4_0: case LLM__TYPE_Q4_1: case LLM__TYPE_Q5_0: case LLM__TYPE_Q5_1:
    case LLM__TYPE_IQ4_NL: case LLM__TYPE_G4_32: case LLM__TYPE_G4_64: case LLM__TYPE_G4_128: case LLM__TYPE_G8_32:
    case LLM__TYPE_G8_64: case LLM__TYPE_G8_128: case LLM__TYPE_MXFP4: return 3;
    case LLM__TYPE_Q4_K: case LLM__TYPE_Q5_K: case LLM__TYPE_Q6_K: return 4;
    case LLM__TYPE_Q3_K: case LLM__TYPE_Q2_K: case LLM__TYPE_IQ4_XS: return 4;
    default: return 0;
    }
}

static enum llm_status llm__vk_typed_pipelines(struct llm__vk *vk, int type, struct llm__err *e);

// Copies a weight to the device as it is in the file, and builds the shaders for its type (the
// first weight of a type), so that a type the device cannot take fails here and steps build none.
static enum llm_status llm__vk_weight_load(void *ctx, struct llm__weight *w, int type, int64_t ne0, int64_t ne1,
                                           const void *data, struct llm__err *e) {
    if (llm__vk_type_slot(type) < 0)
        return llm__fail(e, LLM_ERR_UNSUPPORTED,
                         "vulkan: weights of type %s are not supported (f32, f16, bf16, q8_0, q4_0, q4_1, "
                         "q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs, AWQ/GPTQ int4 and int8)",
                         llm__type_info((uint32_t)type)->name);
    if (ne0 % 4)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "vulkan: weight rows of %lld columns (a multiple of 4 is needed)",
                         (long long)ne0);
    size_t n = llm__row_bytes(type, ne0) * (size_t)ne1;
    enum llm_status st = llm__vk_typed_pipelines(ctx, type, e);
    if (!st) st = llm__vk_buf_alloc(ctx, &w->buf, n, e);
    if (st) return st;
    llm__vk_upload(ctx, &w->buf, 0, data, n);
    w->type = type;
    w->ne0 = ne0;
    w->ne1 = ne1;
    w->layout = 0;
    return LLM_OK;
}

static void llm__vk_weight_free(void *ctx, struct llm__weight *w) { llm__vk_buf_free(ctx, &w->buf); }

// Makes scratch buffer b at least n bytes (outside steps: reserve).
static enum llm_status llm__vk_scratch(struct llm__vk *vk, struct llm__buf *b, size_t n, struct llm__err *e) {
    if (b->handle && b->size >= n) return LLM_OK;
    if (b->handle) llm__vk_buf_free(vk, b);
    return llm__vk_buf_alloc(vk, b, n, e);
}

// Words of the per-step arrays (int32 each) of a step of n tokens, n_out logit rows and a block
// table of nbt entries: tokens, positions, seq_idx, slot_mapping (n each), out_rows, the block
// table, and the (first token, count) pairs of attn_prefill.comp's tiles (at most n).
static size_t llm__vk_step_words(size_t n, size_t n_out, size_t nbt) { return 6 * n + n_out + nbt; }

// Everything a step uses, for the largest step: the rounded activations of a product, flash-
// decoding's partial results, the step's arrays on the device and gathered on the host.
static enum llm_status llm__vk_reserve(void *ctx, const struct llm__shape *shape, struct llm__err *e) {
    struct llm__vk *vk = ctx;
    if (shape->head_dim > 256)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "vulkan: heads of %d dimensions (at most 256)", shape->head_dim);
    vk->head_dim = shape->head_dim;
    size_t words = llm__vk_step_words((size_t)shape->max_tokens, (size_t)shape->max_out,
                                      (size_t)shape->max_seqs * (size_t)shape->max_blocks);
    // (a mixture of experts' down projection takes a row per slot: k a token)
    const size_t slots = (size_t)shape->max_tokens * (size_t)LLM__MAX(shape->n_expert_used, 1);
    enum llm_status st = llm__vk_scratch(vk, &vk->act, slots * (size_t)shape->max_cols * 4, e);
    if (!st) st = llm__vk_scratch(vk, &vk->part, LLM__VK_PART_BYTES, e);
    if (!st && shape->n_expert) st = llm__vk_scratch(vk, &vk->moe, ((size_t)shape->n_expert + 1 + slots) * 4, e);
    if (!st) st = llm__vk_scratch(vk, &vk->stepbuf, words * 4, e);
    if (!st && words > vk->host_cap) {
        free(vk->host);
        vk->host_cap = 0;
        if (!(vk->host = malloc(words * 4))) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        vk->host_cap = words;
    }
    return st;
}

// Device memory not yet allocated by this backend (of the largest device-local heap).
static size_t llm__vk_mem_free(void *ctx) {
    struct llm__vk *vk = ctx;
    return vk->heap > vk->allocated ? (size_t)(vk->heap - vk->allocated) : 0;
}

static void llm__vk_begin(struct llm__vk *vk) {
    if (vk->recording) return;
    vkResetDescriptorPool(vk->dev, vk->dpool, 0);
    vkResetCommandBuffer(vk->cmd, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(vk->cmd, &bi);
    vk->recording = true;
}

static enum llm_status llm__vk_submit(struct llm__vk *vk, struct llm__err *e) {
    if (!vk->recording) return LLM_OK;
    vk->recording = false;
    VkResult r = vkEndCommandBuffer(vk->cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &vk->cmd};
    if (r == VK_SUCCESS) r = vkResetFences(vk->dev, 1, &vk->fence);
    if (r == VK_SUCCESS) r = vkQueueSubmit(vk->queue, 1, &si, vk->fence);
    if (r == VK_SUCCESS) r = vkWaitForFences(vk->dev, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) return llm__fail(e, LLM_ERR_BACKEND, "vulkan: the step failed (%s)", llm__vk_result(r));
    return LLM_OK;
}

// Keeps the first failure of a step's ops, for end_step (or sync) to report; the step's later ops
// record nothing.
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void llm__vk_error(struct llm__vk *vk, enum llm_status st, const char *fmt, ...) {
    if (vk->err.msg[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vk->err.msg, sizeof(vk->err.msg), fmt, ap);
    va_end(ap);
    vk->err.status = st;
}

// Uploads the step's arrays (sized by reserve) and starts recording its command buffer.
static void llm__vk_begin_step(void *ctx, const struct llm__step *step) {
    struct llm__vk *vk = ctx;
    vk->step = step;
    vk->err.msg[0] = 0;
    vk->err.status = LLM_OK;
    // The per-step arrays, int32 each, gathered on the host and uploaded at once (the previous
    // step has finished: end_step waited).
    size_t n = (size_t)step->n_tokens, nbt = (size_t)step->n_seqs * (size_t)step->max_blocks;
    size_t words = llm__vk_step_words(n, (size_t)step->n_out, nbt);
    if (words > vk->host_cap || words * 4 > vk->stepbuf.size) {
        llm__vk_error(vk, LLM_ERR_BACKEND, "vulkan: a step of %d tokens, %d sequences x %d blocks is larger than the "
                      "shape reserved", step->n_tokens, step->n_seqs, step->max_blocks);
        llm__vk_begin(vk);
        return;
    }
    int32_t *h = vk->host;
    vk->o_tok = 0;
    vk->o_pos = (uint32_t)n;
    vk->o_seq = (uint32_t)(2 * n);
    vk->o_slot = (uint32_t)(3 * n);
    vk->o_out = (uint32_t)(4 * n);
    vk->o_bt = (uint32_t)(4 * n + (size_t)step->n_out);
    vk->o_tiles = vk->o_bt + (uint32_t)nbt;
    const int32_t *src[6] = {step->tokens, step->positions, step->seq_idx, step->slot_mapping, step->out_rows,
                             step->block_tables};
    const size_t len[6] = {n, n, n, n, (size_t)step->n_out, nbt}, at[6] = {0, n, 2 * n, 3 * n, 4 * n, vk->o_bt};
    for (int i = 0; i < 6; i++) {
        if (src[i] && len[i]) memcpy(h + at[i], src[i], len[i] * 4);
        else memset(h + at[i], 0, len[i] * 4);
    }
    vk->max_pos = 0;
    for (size_t i = 0; step->positions && i < n; i++) vk->max_pos = LLM__MAX(vk->max_pos, step->positions[i]);
    // tiles: runs of tokens of one sequence, cut every LLM__VK_TILE_Q tokens
    vk->n_tiles = 0;
    for (size_t i = 0; step->seq_idx && i < n; vk->n_tiles++) {
        size_t i0 = i;
        while (i < n && step->seq_idx[i] == step->seq_idx[i0] && i - i0 < LLM__VK_TILE_Q) i++;
        h[vk->o_tiles + 2 * vk->n_tiles] = (int32_t)i0;
        h[vk->o_tiles + 2 * vk->n_tiles + 1] = (int32_t)(i - i0);
    }
    llm__vk_upload(vk, &vk->stepbuf, 0, h, ((size_t)vk->o_tiles + 2 * vk->n_tiles) * 4);
    llm__vk_begin(vk);
}

// Runs the step's command buffer and waits; the first failure of its ops, or of the run.
static enum llm_status llm__vk_end_step(void *ctx, struct llm__err *e) {
    struct llm__vk *vk = ctx;
    enum llm_status st = llm__vk_submit(vk, e);
    if (!st && vk->err.msg[0]) st = llm__fail(e, vk->err.status ? vk->err.status : LLM_ERR_BACKEND, "%s", vk->err.msg);
    return st;
}

// Runs what is recorded of the step and goes on recording; a failure is kept as the step's.
static void llm__vk_flush(struct llm__vk *vk) {
    struct llm__err e = {{0}, LLM_OK};
    if (llm__vk_submit(vk, &e) != LLM_OK) llm__vk_error(vk, e.status, "%s", e.msg);
    llm__vk_begin(vk);
}

static enum llm_status llm__vk_sync(void *ctx, struct llm__err *e) {
    struct llm__vk *vk = ctx;
    llm__vk_flush(vk);
    if (vk->err.msg[0]) return llm__fail(e, vk->err.status ? vk->err.status : LLM_ERR_BACKEND, "%s", vk->err.msg);
    return LLM_OK;
}

// Builds the pipelines of every typed shader for weight type `type`, once per type (weight_load).
static enum llm_status llm__vk_typed_pipelines(struct llm__vk *vk, int type, struct llm__err *e) {
    int slot = llm__vk_type_slot(type);
    for (int k = 0; k < LLM__VK_N; k++) {
        if (!llm__vk_shaders[k].typed || vk->tpipe[k][slot]) continue;
        uint32_t sc[2] = {(uint32_t)type, vk->xmax};   // constant 0: the type; 1: matvec.comp's XMAX
        VkSpecializationMapEntry me[2] = {{0, 0, 4}, {1, 4, 4}};
        VkSpecializationInfo si = {2, me, sizeof(sc), sc};
        VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                          .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                    .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = vk->module[k],
                                                    .pName = "main", .pSpecializationInfo = &si},
                                          .layout = vk->layout[k]};
        VkResult r = vkCreateComputePipelines(vk->dev, VK_NULL_HANDLE, 1, &ci, NULL, &vk->tpipe[k][slot]);
        if (r != VK_SUCCESS) {
            vk->tpipe[k][slot] = VK_NULL_HANDLE;
            return llm__fail(e, LLM_ERR_BACKEND, "vulkan: a shader for %s failed to build (%s)",
                             llm__type_info((uint32_t)type)->name, llm__vk_result(r));
        }
    }
    return LLM_OK;
}

// Records one dispatch of shader k (for weight type `type` when the shader is typed) over groups
// (x, y, z) with the buffers and push constants given, then a barrier so the next op sees its
// results.
static void llm__vk_dispatch_t(struct llm__vk *vk, int k, int type, const struct llm__buf *const *bufs,
                               const void *push, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (vk->err.msg[0]) return;   // the step failed: nothing more is recorded
    int slot = llm__vk_shaders[k].typed ? llm__vk_type_slot(type) : -1;
    VkPipeline pipe = !llm__vk_shaders[k].typed ? vk->pipe[k] : slot >= 0 ? vk->tpipe[k][slot] : VK_NULL_HANDLE;
    if (!pipe) {   // weights come through weight_load, which builds their type's pipelines
        llm__vk_error(vk, LLM_ERR_BACKEND, "vulkan: no pipeline for a weight of type %d", type);
        return;
    }
    llm__vk_begin(vk);
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = vk->dpool, .descriptorSetCount = 1,
                                      .pSetLayouts = &vk->dsl[k]};
    VkDescriptorSet set;
    if (vkAllocateDescriptorSets(vk->dev, &ai, &set) != VK_SUCCESS) {   // pool exhausted: run what is recorded
        llm__vk_flush(vk);
        if (vk->err.msg[0]) return;
        if (vkAllocateDescriptorSets(vk->dev, &ai, &set) != VK_SUCCESS) {
            llm__vk_error(vk, LLM_ERR_BACKEND, "vulkan: no descriptor set for an op");
            return;
        }
    }
    VkDescriptorBufferInfo bi[8];
    VkWriteDescriptorSet w[8];
    int n = llm__vk_shaders[k].n_bufs;
    for (int i = 0; i < n; i++) {
        bi[i] = (VkDescriptorBufferInfo){((struct llm__vk_mem *)bufs[i]->handle)->buf, 0, VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                                      .dstBinding = (uint32_t)i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[i]};
    }
    vkUpdateDescriptorSets(vk->dev, (uint32_t)n, w, 0, NULL);
    vkCmdBindPipeline(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->layout[k], 0, 1, &set, 0, NULL);
    vkCmdPushConstants(vk->cmd, vk->layout[k], VK_SHADER_STAGE_COMPUTE_BIT, 0, llm__vk_shaders[k].push, push);
    vkCmdDispatch(vk->cmd, gx, gy, gz);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(vk->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
}

static void llm__vk_dispatch_3d(struct llm__vk *vk, int k, const struct llm__buf *const *bufs, const void *push,
                                uint32_t gx, uint32_t gy, uint32_t gz) {
    llm__vk_dispatch_t(vk, k, -1, bufs, push, gx, gy, gz);
}

static void llm__vk_dispatch(struct llm__vk *vk, int k, const struct llm__buf *const *bufs, const void *push,
                             uint32_t gx, uint32_t gy) {
    llm__vk_dispatch_t(vk, k, -1, bufs, push, gx, gy, 1);
}

// Work groups of 256 for n elements, as (x, y) within the 65535 limit per dimension.
static void llm__vk_groups(uint64_t n, uint32_t *gx, uint32_t *gy) {
    uint64_t g = (n + 255) / 256;
    *gx = (uint32_t)LLM__MIN(g, 65535u);
    *gy = (uint32_t)((g + *gx - 1) / *gx);
}

// Element-wise ops on whole f32 tensors of contiguous rows: offsets in 4-byte words.
static void llm__vk_eltwise(struct llm__vk *vk, int k, struct llm__tensor d, struct llm__tensor a,
                            struct llm__tensor b) {
    uint64_t n = (uint64_t)d.ne0 * (uint64_t)d.ne1;
    uint32_t push[4] = {(uint32_t)n, (uint32_t)(d.offs / 4), (uint32_t)(a.offs / 4), (uint32_t)(b.offs / 4)};
    const struct llm__buf *bufs[3] = {d.buf, a.buf, b.buf};
    uint32_t gx, gy;
    llm__vk_groups(n, &gx, &gy);
    llm__vk_dispatch(vk, k, bufs, push, gx, gy);
}

static void llm__vk_add(void *ctx, struct llm__tensor d, struct llm__tensor a, struct llm__tensor b) {
    llm__vk_eltwise(ctx, LLM__VK_ADD, d, a, b);
}

static void llm__vk_silu_mul(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u) {
    llm__vk_eltwise(ctx, LLM__VK_SILU_MUL, d, g, u);
}

static void llm__vk_gelu_mul(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u) {
    llm__vk_eltwise(ctx, LLM__VK_GELU_MUL, d, g, u);
}

static void llm__vk_scale(void *ctx, struct llm__tensor d, struct llm__tensor x, float s) {
    uint64_t n = (uint64_t)d.ne0 * (uint64_t)d.ne1;
    struct { uint32_t n, od, ox; float s; } push = {(uint32_t)n, (uint32_t)(d.offs / 4), (uint32_t)(x.offs / 4), s};
    const struct llm__buf *bufs[2] = {d.buf, x.buf};
    uint32_t gx, gy;
    llm__vk_groups(n, &gx, &gy);
    llm__vk_dispatch(ctx, LLM__VK_SCALE, bufs, &push, gx, gy);
}

static void llm__vk_rmsnorm(void *ctx, struct llm__tensor d, struct llm__tensor x, struct llm__tensor w, float eps) {
    struct { uint32_t ncols, od, ox, ow, sd, sx; float eps; } push = {
        (uint32_t)d.ne0, (uint32_t)(d.offs / 4), (uint32_t)(x.offs / 4), (uint32_t)(w.offs / 4),
        (uint32_t)(d.nb1 / 4), (uint32_t)(x.nb1 / 4), eps};
    const struct llm__buf *bufs[3] = {d.buf, x.buf, w.buf};
    llm__vk_dispatch(ctx, LLM__VK_RMSNORM, bufs, &push, (uint32_t)d.ne1, 1);
}

static void llm__vk_get_rows(void *ctx, struct llm__tensor d, struct llm__tensor src) {
    struct llm__vk *vk = ctx;
    uint32_t push[6] = {(uint32_t)d.ne0, (uint32_t)(d.offs / 4), (uint32_t)(src.offs / 4), (uint32_t)(d.nb1 / 4),
                        (uint32_t)(src.nb1 / 4), vk->o_out};
    const struct llm__buf *bufs[3] = {d.buf, src.buf, &vk->stepbuf};
    if (vk->step->n_out)
        llm__vk_dispatch(vk, LLM__VK_GET_ROWS, bufs, push, (uint32_t)((d.ne0 + 255) / 256), (uint32_t)vk->step->n_out);
}

static void llm__vk_gather_cols(void *ctx, struct llm__tensor d, struct llm__tensor x, struct llm__tensor perm) {
    struct llm__vk *vk = ctx;
    uint32_t push[6] = {(uint32_t)d.ne0, (uint32_t)(d.offs / 4), (uint32_t)(x.offs / 4), (uint32_t)(d.nb1 / 4),
                        (uint32_t)(x.nb1 / 4), (uint32_t)(perm.offs / 4)};
    const struct llm__buf *bufs[3] = {d.buf, x.buf, perm.buf};
    llm__vk_dispatch(vk, LLM__VK_GATHER_COLS, bufs, push, (uint32_t)((d.ne0 + 255) / 256), (uint32_t)x.ne1);
}

static void llm__vk_embed(void *ctx, struct llm__tensor d, const struct llm__weight *table) {
    struct llm__vk *vk = ctx;
    uint32_t push[5] = {(uint32_t)d.ne0, (uint32_t)(d.offs / 4), (uint32_t)(d.nb1 / 4),
                        (uint32_t)llm__row_bytes(table->type, table->ne0), vk->o_tok};
    const struct llm__buf *bufs[3] = {d.buf, &table->buf, &vk->stepbuf};
    llm__vk_dispatch_t(vk, LLM__VK_EMBED, table->type, bufs, push, (uint32_t)((d.ne0 + 255) / 256),
                       (uint32_t)vk->step->n_tokens, 1);
}

static void llm__vk_rope(void *ctx, struct llm__tensor x, int n_head, int head_dim, const struct llm__rope *r) {
    struct llm__vk *vk = ctx;
    bool ff = r->freq_factors.buf != NULL;
    struct { uint32_t n_head, head_dim, n_rot, neox, ox, sx, opos, has_ff, off;
             float base, scale, ext_factor, mscale, corr0, corr1; } push = {
        (uint32_t)n_head, (uint32_t)head_dim, (uint32_t)r->n_rot, r->neox, (uint32_t)(x.offs / 4),
        (uint32_t)(x.nb1 / 4), vk->o_pos, ff, ff ? (uint32_t)(r->freq_factors.offs / 4) : 0, r->freq_base,
        r->freq_scale, r->ext_factor, r->mscale, r->corr_dims[0], r->corr_dims[1]};
    const struct llm__buf *bufs[3] = {x.buf, &vk->stepbuf, ff ? r->freq_factors.buf : x.buf};
    llm__vk_dispatch_3d(vk, LLM__VK_ROPE, bufs, &push, (uint32_t)((r->n_rot / 2 + 63) / 64), (uint32_t)n_head,
                        (uint32_t)x.ne1);
}

// K/V cache rows are [slot][n_kv] of f16 or f32, or for q8_0 the row's n_kv int8 quants, then
// its groups' fp16 scales, each head rotated as the CPU backend rotates a q8_0 cache's heads
// (kv_store.comp; this backend's layout: only its kv_store and attention read them). Mode: 0
// f32, 1 f16, 2 q8_0; row_words: 32-bit words of a row.
static uint32_t llm__vk_kv_mode(int type) { return type == LLM__TYPE_F16 ? 1 : type == LLM__TYPE_Q8_0 ? 2 : 0; }
static uint32_t llm__vk_kv_row_words(int type, int64_t n_kv) {
    return (uint32_t)(type == LLM__TYPE_F16 ? n_kv / 2 : type == LLM__TYPE_Q8_0 ? n_kv / 64 * 17 : n_kv);
}

// The q8_0 cache's rotation (head_dim % 64 == 0): keys and queries in pieces of the largest power
// of two (>= 64) dividing head_dim, values in pieces of 64; the scales 1/sqrt(piece) as the CPU
// computes them.
static uint32_t llm__vk_kv_rot(int hd) {
    uint32_t n = 64;
    while (hd % (int)(2 * n) == 0) n *= 2;
    return n;
}

static void llm__vk_kv_store(void *ctx, struct llm__tensor kc, struct llm__tensor vc, struct llm__tensor k,
                             struct llm__tensor v) {
    struct llm__vk *vk = ctx;
    const uint32_t mode = llm__vk_kv_mode(kc.type), row_words = llm__vk_kv_row_words(kc.type, k.ne0);
    const uint32_t rk = mode == 2 ? llm__vk_kv_rot(vk->head_dim) : 0;
    struct { uint32_t ncols, ok, ov, sk, sv, ock, ocv, row_words, mode, oslot, hd, rk; float skey, sval; } push = {
        (uint32_t)k.ne0, (uint32_t)(k.offs / 4), (uint32_t)(v.offs / 4), (uint32_t)(k.nb1 / 4), (uint32_t)(v.nb1 / 4),
        (uint32_t)(kc.offs / 4), (uint32_t)(vc.offs / 4), row_words, mode, vk->o_slot, (uint32_t)vk->head_dim, rk,
        rk ? 1.0f / sqrtf((float)rk) : 0.0f, 1.0f / sqrtf(64.0f)};
    const struct llm__buf *bufs[5] = {kc.buf, vc.buf, k.buf, v.buf, &vk->stepbuf};
    if (mode == 2) {   // a workgroup per (KV head, token)
        assert(vk->head_dim % 64 == 0 && k.ne0 % vk->head_dim == 0);   // (llm__kv_type_check)
        llm__vk_dispatch(vk, LLM__VK_KV_STORE, bufs, &push, (uint32_t)(k.ne0 / vk->head_dim), (uint32_t)k.ne1);
    } else llm__vk_dispatch(vk, LLM__VK_KV_STORE, bufs, &push, (row_words + 255) / 256, (uint32_t)k.ne1);
}

// Attention. Steps that are mostly prefill (two tokens or more per tile on average) take
// attn_prefill.comp: a workgroup per (head, tile of a sequence's tokens). Otherwise one pass per
// (head, token); when the step has few such pairs and long contexts, each is split across
// workgroups (LLM__VK_SPLIT_KEYS keys or more each) and the parts reduced (flash-decoding).
static void llm__vk_attention(void *ctx, struct llm__tensor out, struct llm__tensor q, struct llm__tensor kc,
                              struct llm__tensor vc, const struct llm__attn *a) {
    struct llm__vk *vk = ctx;
    const uint32_t mode = llm__vk_kv_mode(kc.type), rk = mode == 2 ? llm__vk_kv_rot(a->head_dim) : 0;
    int64_t n_kv = (int64_t)a->n_head_kv * a->head_dim;
    uint32_t ntok = (uint32_t)q.ne1, nsplit = 1;
    size_t per_split = (size_t)(a->head_dim + 2) * 4 * (size_t)a->n_head * ntok;
    if ((size_t)ntok * (size_t)a->n_head < 2048 && vk->part.handle) {
        nsplit = (uint32_t)LLM__MIN((vk->max_pos + LLM__VK_SPLIT_KEYS) / LLM__VK_SPLIT_KEYS, LLM__VK_SPLIT_MAX);
        nsplit = (uint32_t)LLM__MIN((size_t)nsplit, vk->part.size / per_split);
        nsplit = LLM__MAX(nsplit, 1u);
    }
    const bool sink = a->sinks.buf != NULL;
    struct { uint32_t hd, n_head, n_head_kv, oq, sq, oo, so, ock, ocv, row_words, f16, bs, max_blocks, opos, oseq, obt;
             float scale; uint32_t nsplit, opart, window; float softcap; uint32_t has_sink, osink, rk;
             float skey, sval; } push = {
        (uint32_t)a->head_dim, (uint32_t)a->n_head, (uint32_t)a->n_head_kv, (uint32_t)(q.offs / 4),
        (uint32_t)(q.nb1 / 4), (uint32_t)(out.offs / 4), (uint32_t)(out.nb1 / 4), (uint32_t)(kc.offs / 4),
        (uint32_t)(vc.offs / 4), llm__vk_kv_row_words(kc.type, n_kv), mode, (uint32_t)vk->step->block_size,
        (uint32_t)vk->step->max_blocks, vk->o_pos, vk->o_seq, vk->o_bt, a->scale, nsplit, 0, (uint32_t)a->window,
        a->softcap, sink, sink ? (uint32_t)(a->sinks.offs / 4) : 0, rk, rk ? 1.0f / sqrtf((float)rk) : 0.0f,
        1.0f / sqrtf(64.0f)};
    const struct llm__buf *sb = sink ? a->sinks.buf : out.buf;
    const struct llm__buf *bufs[7] = {out.buf,      q.buf, kc.buf, vc.buf, &vk->stepbuf,
                                      nsplit > 1 ? &vk->part : out.buf, sb};
    if (vk->tiled_attn && vk->n_tiles * 2 <= ntok) {
        push.nsplit = vk->o_tiles;   // (the prefill shader's push constant there: where the tiles are)
        const struct llm__buf *pb[6] = {out.buf, q.buf, kc.buf, vc.buf, &vk->stepbuf, sb};
        llm__vk_dispatch(vk, LLM__VK_ATTN_PREFILL, pb, &push, (uint32_t)a->n_head, vk->n_tiles);
        return;
    }
    llm__vk_dispatch_3d(vk, LLM__VK_ATTENTION, bufs, &push, (uint32_t)a->n_head, ntok, nsplit);
    if (nsplit > 1) {
        uint32_t rp[8] = {(uint32_t)a->head_dim, (uint32_t)a->n_head, nsplit, 0, (uint32_t)(out.offs / 4),
                          (uint32_t)(out.nb1 / 4), sink, push.osink};
        const struct llm__buf *rb[3] = {out.buf, &vk->part, sb};
        llm__vk_dispatch(vk, LLM__VK_ATTN_REDUCE, rb, rp, (uint32_t)a->n_head, ntok);
    }
}

// x (ntok rows of K) as the product shaders read it for a weight of type `type`: rounded as the
// CPU backend rounds it (round_act.comp, into the act scratch; once per call and mode: *rounded
// holds the mode the scratch has), or in place (F32 whose rows are 16-byte aligned). False: the
// step has failed.
static bool llm__vk_act(struct llm__vk *vk, struct llm__tensor x, uint32_t K, int type, uint32_t *rounded,
                        const struct llm__buf **xb, uint32_t *ox, uint32_t *sx) {
    uint32_t ntok = (uint32_t)x.ne1, mode = (uint32_t)llm__vk_round_mode(type);
    *xb = x.buf, *ox = (uint32_t)(x.offs / 4), *sx = (uint32_t)(x.nb1 / 4);
    if (mode == 5 && *ox % 4 == 0 && *sx % 4 == 0) return true;   // (the shaders read x 16 bytes at a time)
    if (*rounded != mode) {
        if ((size_t)ntok * K * 4 > vk->act.size) {
            llm__vk_error(vk, LLM_ERR_BACKEND, "vulkan: a product of %u tokens x %u columns is larger than the shape "
                          "reserved", ntok, K);
            return false;
        }
        uint32_t push[5] = {K, mode, *ox, *sx, 0};
        const struct llm__buf *bufs[2] = {&vk->act, x.buf};
        llm__vk_dispatch(vk, LLM__VK_ROUND_ACT, bufs, push, (K + 255) / 256, ntok);
        *rounded = mode;
    }
    *xb = &vk->act, *ox = 0, *sx = K;
    return true;
}

// Products: per weight, the activations rounded for its type (once per type and call; F32 weights
// take them as they are), then the GEMV shader for up to LLM__VK_MATVEC_MAX tokens, else the GEMM.
static void llm__vk_matmul(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                           const struct llm__tensor *bias, struct llm__tensor x) {
    struct llm__vk *vk = ctx;
    assert(n >= 1 && n <= LLM__MAX_MATMUL_WEIGHTS);
    uint32_t ntok = (uint32_t)x.ne1, rounded = 0;
    for (int j = 0; j < n; j++) {
        uint32_t K = (uint32_t)w[j]->ne0, N = (uint32_t)w[j]->ne1, ox, sx;
        const struct llm__buf *xb;
        if (!llm__vk_act(vk, x, K, w[j]->type, &rounded, &xb, &ox, &sx)) return;
        bool hb = bias && bias[j].buf;
        uint32_t rows = vk->features & LLM__VK_SUBGROUP ? LLM__MAX(64 / vk->subgroup_size, 1u) : 4;   // per workgroup
        uint32_t push[11] = {K, N, (uint32_t)llm__row_bytes(w[j]->type, K), ox, sx,
                             (uint32_t)(dst[j].offs / 4), (uint32_t)(dst[j].nb1 / 4), hb,
                             hb ? (uint32_t)(bias[j].offs / 4) : 0, ntok, rows};
        const struct llm__buf *bufs[4] = {dst[j].buf, &w[j]->buf, xb, hb ? bias[j].buf : xb};
        uint32_t groups = (N + rows - 1) / rows;
        if (ntok <= LLM__VK_MATVEC_MAX)
            llm__vk_dispatch_t(vk, LLM__VK_MATVEC, w[j]->type, bufs, push, LLM__MIN(groups, 65535u),
                               (groups + 65534) / 65535, 1);
        else llm__vk_dispatch_t(vk, LLM__VK_MATMUL, w[j]->type, bufs, push, (N + 63) / 64, (ntok + 63) / 64, 1);
    }
}

static void llm__vk_swiglu_oai(void *ctx, struct llm__tensor d, struct llm__tensor g, struct llm__tensor u, float alpha,
                               float limit) {
    uint64_t n = (uint64_t)d.ne0 * (uint64_t)d.ne1;
    struct { uint32_t n, od, og, ou; float alpha, limit; } push = {(uint32_t)n, (uint32_t)(d.offs / 4),
                                                                  (uint32_t)(g.offs / 4), (uint32_t)(u.offs / 4),
                                                                  alpha, limit};
    const struct llm__buf *bufs[3] = {d.buf, g.buf, u.buf};
    uint32_t gx, gy;
    llm__vk_groups(n, &gx, &gy);
    llm__vk_dispatch(ctx, LLM__VK_SWIGLU_OAI, bufs, &push, gx, gy);
}

// A layer's experts, stacked as in the file (expert e's rows from e x rows), in one buffer
// matmul_id.comp reads: weight_load's copy. At most LLM__VK_MAX_EXPERTS experts (moe_group.comp).
static enum llm_status llm__vk_weight_load_experts(void *ctx, struct llm__weight *w, int type, int64_t ne0,
                                                   int64_t ne1, int n_expert, const void *data, struct llm__err *e) {
    if (n_expert < 1 || n_expert > LLM__VK_MAX_EXPERTS || ne1 % n_expert)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "vulkan: %d experts in a layer (at most %d)", n_expert,
                         LLM__VK_MAX_EXPERTS);
    if ((uint64_t)llm__row_bytes(type, ne0) * (uint64_t)ne1 > UINT32_MAX)
        return llm__fail(e, LLM_ERR_UNSUPPORTED, "vulkan: a layer's experts of more than 4 GiB");
    return llm__vk_weight_load(ctx, w, type, ne0, ne1, data, e);
}

static void llm__vk_moe_route(void *ctx, struct llm__tensor ids, struct llm__tensor wts, struct llm__tensor logits,
                              const struct llm__moe *m) {
    struct llm__vk *vk = ctx;
    struct { uint32_t n_expert, k, norm, softmax_weight, ol, sl, oi, si, ow, sw, ntok; float scale; } push = {
        (uint32_t)m->n_expert, (uint32_t)m->k, m->norm, m->softmax_weight, (uint32_t)(logits.offs / 4),
        (uint32_t)(logits.nb1 / 4), (uint32_t)(ids.offs / 4), (uint32_t)(ids.nb1 / 4), (uint32_t)(wts.offs / 4),
        (uint32_t)(wts.nb1 / 4), (uint32_t)logits.ne1, m->scale};
    const struct llm__buf *bufs[3] = {logits.buf, ids.buf, wts.buf};
    llm__vk_dispatch(vk, LLM__VK_MOE_ROUTE, bufs, &push, (uint32_t)((logits.ne1 + 63) / 64), 1);
}

// The slots grouped by expert (moe_group.comp, into the moe scratch), then per weight the
// activations rounded for its type and matmul_id.comp: a workgroup per (64 rows, expert).
static void llm__vk_matmul_id(void *ctx, int n, const struct llm__tensor *dst, const struct llm__weight *const *w,
                              const struct llm__tensor *bias, struct llm__tensor x, struct llm__tensor ids,
                              bool x_per_slot) {
    struct llm__vk *vk = ctx;
    assert(n >= 1 && n <= 2);
    const uint32_t k = (uint32_t)ids.ne0, slots = (uint32_t)(ids.ne1 * ids.ne0), N = (uint32_t)dst[0].ne0;
    const uint32_t n_expert = (uint32_t)(w[0]->ne1 / N);
    if (((size_t)n_expert + 1 + slots) * 4 > vk->moe.size) {
        llm__vk_error(vk, LLM_ERR_BACKEND, "vulkan: %u experts' slots (%u) are more than the shape reserved", n_expert,
                      slots);
        return;
    }
    uint32_t gp[6] = {n_expert, slots, k, (uint32_t)(ids.offs / 4), (uint32_t)(ids.nb1 / 4), 0};
    const struct llm__buf *gb[2] = {ids.buf, &vk->moe};
    llm__vk_dispatch(vk, LLM__VK_MOE_GROUP, gb, gp, 1, 1);
    uint32_t rounded = 0;
    for (int j = 0; j < n; j++) {
        uint32_t K = (uint32_t)w[j]->ne0, ox, sx;
        const struct llm__buf *xb;
        if (!llm__vk_act(vk, x, K, w[j]->type, &rounded, &xb, &ox, &sx)) return;
        bool hb = bias && bias[j].buf;
        uint32_t push[14] = {K, N, (uint32_t)llm__row_bytes(w[j]->type, K), ox, sx, (uint32_t)(dst[j].offs / 4),
                             (uint32_t)(dst[j].nb1 / 4), hb, hb ? (uint32_t)(bias[j].offs / 4) : 0,
                             hb ? (uint32_t)(bias[j].nb1 / 4) : 0, k, x_per_slot, 0, n_expert};
        const struct llm__buf *bufs[5] = {dst[j].buf, &w[j]->buf, xb, hb ? bias[j].buf : xb, &vk->moe};
        llm__vk_dispatch_t(vk, LLM__VK_MATMUL_ID, w[j]->type, bufs, push, (N + 63) / 64, n_expert, 1);
    }
}

static void llm__vk_moe_sum(void *ctx, struct llm__tensor d, struct llm__tensor src, struct llm__tensor wts,
                            struct llm__tensor shared, struct llm__tensor gate) {
    const bool sh = shared.buf != NULL;
    uint32_t push[13] = {(uint32_t)d.ne0, (uint32_t)wts.ne0, (uint32_t)(d.offs / 4), (uint32_t)(d.nb1 / 4),
                         (uint32_t)(src.offs / 4), (uint32_t)(src.nb1 / 4), (uint32_t)(wts.offs / 4),
                         (uint32_t)(wts.nb1 / 4), sh, sh ? (uint32_t)(shared.offs / 4) : 0,
                         sh ? (uint32_t)(shared.nb1 / 4) : 0, sh ? (uint32_t)(gate.offs / 4) : 0,
                         sh ? (uint32_t)(gate.nb1 / 4) : 0};
    const struct llm__buf *bufs[5] = {d.buf, src.buf, wts.buf, sh ? shared.buf : src.buf, sh ? gate.buf : src.buf};
    llm__vk_dispatch(ctx, LLM__VK_MOE_SUM, bufs, push, (uint32_t)((d.ne0 + 255) / 256), (uint32_t)d.ne1);
}

// Device memory bandwidth as a copy between two device buffers measures it: (bytes read + bytes
// written) / seconds over 10 copies of up to 256 MiB in one submit, after one warm-up copy.
// (For llm bench's roofline share.)
static enum llm_status llm__vk_bandwidth(void *ctx, double *gbps, struct llm__err *err) {
    struct llm__vk *vk = ctx;
    struct llm__err e = {{0}, LLM_OK};
    struct llm__buf a = {0}, b = {0};
    const int reps = 10;
    size_t n = (size_t)LLM__MIN((uint64_t)256 << 20, vk->heap / 8) & ~(size_t)255;
    *gbps = 0;
    if (llm__vk_buf_alloc(vk, &a, n, &e) || llm__vk_buf_alloc(vk, &b, n, &e)) {
        if (a.handle) llm__vk_buf_free(vk, &a);
        return llm__fail(err, e.status, "vulkan: bandwidth probe: %s", e.msg);
    }
    double best = 0;
    for (int round = 0; round < 2; round++) {   // round 0: warm-up
        int k = round ? reps : 1;
        llm__vk_begin(vk);
        VkBufferCopy c = {0, 0, n};
        for (int i = 0; i < k; i++) {
            vkCmdCopyBuffer(vk->cmd, ((struct llm__vk_mem *)a.handle)->buf, ((struct llm__vk_mem *)b.handle)->buf, 1,
                            &c);
            VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                  .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                  .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
            vkCmdPipelineBarrier(vk->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                 NULL, 0, NULL);
        }
        double t0 = llm__now();
        if (llm__vk_submit(vk, &e)) break;
        best = 2.0 * (double)n * k / (llm__now() - t0) / 1e9;
    }
    llm__vk_buf_free(vk, &a);
    llm__vk_buf_free(vk, &b);
    if (e.msg[0]) return llm__fail(err, e.status ? e.status : LLM_ERR_BACKEND, "vulkan: bandwidth probe: %s", e.msg);
    *gbps = best;
    return LLM_OK;
}

static const char *llm__vk_device_name(void *ctx) { return ((struct llm__vk *)ctx)->name; }

static const struct llm_backend_i llm__vk_iface = {
    .name = "vulkan",
    .free = llm__vk_free,
    .buf_alloc = llm__vk_buf_alloc,
    .buf_free = llm__vk_buf_free,
    .weight_load = llm__vk_weight_load,
    .weight_free = llm__vk_weight_free,
    .upload = llm__vk_upload,
    .download = llm__vk_download,
    .reserve = llm__vk_reserve,
    .mem_free = llm__vk_mem_free,
    .begin_step = llm__vk_begin_step,
    .end_step = llm__vk_end_step,
    .sync = llm__vk_sync,
    .embed = llm__vk_embed,
    .rmsnorm = llm__vk_rmsnorm,
    .matmul = llm__vk_matmul,
    .rope = llm__vk_rope,
    .kv_store = llm__vk_kv_store,
    .attention = llm__vk_attention,
    .silu_mul = llm__vk_silu_mul,
    .add = llm__vk_add,
    .get_rows = llm__vk_get_rows,
    .gather_cols = llm__vk_gather_cols,
    .scale = llm__vk_scale,
    .gelu_mul = llm__vk_gelu_mul,
    .attention_window = llm__vk_attention,
    .swiglu_oai = llm__vk_swiglu_oai,
    .rope_yarn = true,
    .attention_sinks = true,
    .weight_load_experts = llm__vk_weight_load_experts,
    .moe_route = llm__vk_moe_route,
    .matmul_id = llm__vk_matmul_id,
    .moe_sum = llm__vk_moe_sum,
    .device_name = llm__vk_device_name,
    .bandwidth = llm__vk_bandwidth,
};

// Chooses device `index` (-1: by type, discrete first) and reads what the backend needs of it:
// name, memory types and heap, shared memory limits, subgroup size and features.
static enum llm_status llm__vk_pick_device(struct llm__vk *vk, int index, int unused, struct llm__err *e) {
    VkPhysicalDevice pds[16];
    uint32_t n = llm__vk_physical_devices(vk->inst, pds);
    if (n == 0) return llm__fail(e, LLM_ERR_BACKEND, "vulkan: no Vulkan device found");
    if (index >= (int)n) return llm__fail(e, LLM_ERR_INVALID_ARG, "vulkan: no device %d (there are %u)", index, n);
    if (index < 0) {
        static const VkPhysicalDeviceType order[] = {VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU,
                                                     VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
                                                     VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, VK_PHYSICAL_DEVICE_TYPE_CPU,
                                                     VK_PHYSICAL_DEVICE_TYPE_OTHER};
        for (size_t o = 0; o < LLM__ARRAY_LEN(order) && index < 0; o++)
            for (uint32_t i = 0; i < n && index < 0; i++) {
                VkPhysicalDeviceProperties p;
                vkGetPhysicalDeviceProperties(pds[i], &p);
                if (p.deviceType == order[o]) index = (int)i;
            }
        if (index < 0) index = 0;
    }
    vk->pdev = pds[index];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(vk->pdev, &props);
    snprintf(vk->name, sizeof(vk->name), "%s", props.deviceName);
    vkGetPhysicalDeviceMemoryProperties(vk->pdev, &vk->memp);
    vk->heap = llm__vk_device_memory(vk->pdev);
    vk->tiled_attn = props.limits.maxComputeSharedMemorySize >= LLM__VK_TILE_SHARED;
    vk->xmax = (uint32_t)LLM__MIN(16384, (LLM__MAX(props.limits.maxComputeSharedMemorySize, 8192u) - 4096) / 4) & ~3u;
    vk->subgroup_size = LLM__MAX(llm__vk_subgroup_size(vk->pdev, &vk->features), 1u);
    vk->features &= ~unused;
    return LLM_OK;
}

// The logical device with one compute queue (16-bit storage enabled when used), the command pool
// with the step's and the copies' command buffers, the fence, the descriptor pool.
static enum llm_status llm__vk_open_device(struct llm__vk *vk, struct llm__err *e) {
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(vk->pdev, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    nq = LLM__MIN(nq, 16u);
    vkGetPhysicalDeviceQueueFamilyProperties(vk->pdev, &nq, qf);
    vk->qfam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && vk->qfam == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) vk->qfam = i;
    if (vk->qfam == UINT32_MAX) return llm__fail(e, LLM_ERR_BACKEND, "vulkan: %s has no compute queue", vk->name);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = vk->qfam,
                                  .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
                                                .storageBuffer16BitAccess = (vk->features & LLM__VK_16BIT) != 0};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &s16, .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi};
    VkResult r = vkCreateDevice(vk->pdev, &di, NULL, &vk->dev);
    if (r != VK_SUCCESS)
        return llm__fail(e, LLM_ERR_BACKEND, "vulkan: cannot open %s (%s)", vk->name, llm__vk_result(r));
    vkGetDeviceQueue(vk->dev, vk->qfam, 0, &vk->queue);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vk->qfam};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8 * 4096};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 4096,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    r = vkCreateCommandPool(vk->dev, &pi, NULL, &vk->cpool);
    if (r == VK_SUCCESS) r = vkCreateFence(vk->dev, &fi, NULL, &vk->fence);
    if (r == VK_SUCCESS) r = vkCreateDescriptorPool(vk->dev, &dpi, NULL, &vk->dpool);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = vk->cpool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    if (r == VK_SUCCESS) r = vkAllocateCommandBuffers(vk->dev, &ai, &vk->cmd);
    if (r == VK_SUCCESS) r = vkAllocateCommandBuffers(vk->dev, &ai, &vk->xfer);
    if (r != VK_SUCCESS)
        return llm__fail(e, LLM_ERR_BACKEND, "vulkan: set-up of %s failed (%s)", vk->name, llm__vk_result(r));
    return LLM_OK;
}

// Per shader: its descriptor set layout (one storage buffer per binding), pipeline layout (its
// push constants) and module, in the variant using the most of the device's features; the
// pipeline itself, except for typed shaders (weight_load builds those per weight type).
static enum llm_status llm__vk_build_pipelines(struct llm__vk *vk, struct llm__err *e) {
    VkResult r = VK_SUCCESS;
    for (int k = 0; r == VK_SUCCESS && k < LLM__VK_N; k++) {
        VkDescriptorSetLayoutBinding b[8];
        for (int i = 0; i < llm__vk_shaders[k].n_bufs; i++)
            b[i] = (VkDescriptorSetLayoutBinding){(uint32_t)i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                                  VK_SHADER_STAGE_COMPUTE_BIT, NULL};
        VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                              .bindingCount = (uint32_t)llm__vk_shaders[k].n_bufs, .pBindings = b};
        r = vkCreateDescriptorSetLayout(vk->dev, &li, NULL, &vk->dsl[k]);
        VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, llm__vk_shaders[k].push};
        VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                          .pSetLayouts = &vk->dsl[k], .pushConstantRangeCount = 1,
                                          .pPushConstantRanges = &pr};
        if (r == VK_SUCCESS) r = vkCreatePipelineLayout(vk->dev, &pli, NULL, &vk->layout[k]);
        int v = vk->features;   // the variant using the most of what the device has
        if (!llm__vk_shaders[k].v[v].code) v &= ~LLM__VK_SUBGROUP;
        if (!llm__vk_shaders[k].v[v].code) v = 0;
        VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                       .codeSize = llm__vk_shaders[k].v[v].size, .pCode = llm__vk_shaders[k].v[v].code};
        VkShaderModule mod = VK_NULL_HANDLE;
        if (r == VK_SUCCESS) r = vkCreateShaderModule(vk->dev, &mi, NULL, &mod);
        if (llm__vk_shaders[k].typed) {   // pipelines per weight type, when a weight of the type is loaded
            vk->module[k] = mod;
            continue;
        }
        VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                          .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                    .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod,
                                                    .pName = "main"},
                                          .layout = vk->layout[k]};
        if (r == VK_SUCCESS) r = vkCreateComputePipelines(vk->dev, VK_NULL_HANDLE, 1, &ci, NULL, &vk->pipe[k]);
        if (mod) vkDestroyShaderModule(vk->dev, mod, NULL);
    }
    if (r != VK_SUCCESS)
        return llm__fail(e, LLM_ERR_BACKEND, "vulkan: set-up of %s failed (%s)", vk->name, llm__vk_result(r));
    return LLM_OK;
}

// Opens device `index` (-1: the first discrete GPU, else integrated, else any) and builds the
// pipelines; `unused`: device features (LLM__VK_SUBGROUP, LLM__VK_16BIT) the shaders must not use,
// and LLM__VK_NOMAP. On failure be holds what was made, for its free.
static enum llm_status llm__vk_backend_new(struct llm_backend *be, int index, int unused, struct llm__err *e) {
    struct llm__vk *vk = calloc(1, sizeof(*vk));
    if (!vk) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    be->iface = &llm__vk_iface;
    be->ctx = vk;
    vk->nomap = (unused & LLM__VK_NOMAP) != 0;
    enum llm_status st = llm__vk_instance(&vk->inst, e);
    if (!st) st = llm__vk_pick_device(vk, index, unused, e);
    if (!st) st = llm__vk_open_device(vk, e);
    if (!st) st = llm__vk_build_pipelines(vk, e);
    return st;
}

static enum llm_status llm__vk_open(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e) {
    return llm__vk_backend_new(be, p->device, 0, e);
}

LLM__INTERNAL const struct llm__backend_desc llm__backend_vulkan = {
    .kind = LLM_BACKEND_VULKAN, .name = "vulkan", .open = llm__vk_open, .list_devices = llm__vk_list_devices,
};
