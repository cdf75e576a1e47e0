// The backends built in: opening one, listing devices, checking a table

#include "internal.h"

// LLM_OK when every required entry of the table is there; else LLM_ERR_BACKEND naming the first
// one missing. Called on every backend as it is opened (llm__backend_open).
enum llm_status llm__backend_check(const struct llm_backend_i *b, struct llm__err *e) {
    const struct { const char *op; bool set; } req[] = {
        {"name", b->name != NULL}, {"free", b->free != NULL}, {"buf_alloc", b->buf_alloc != NULL},
        {"buf_free", b->buf_free != NULL}, {"weight_load", b->weight_load != NULL},
        {"weight_free", b->weight_free != NULL}, {"upload", b->upload != NULL}, {"download", b->download != NULL},
        {"reserve", b->reserve != NULL}, {"mem_free", b->mem_free != NULL}, {"begin_step", b->begin_step != NULL},
        {"end_step", b->end_step != NULL}, {"embed", b->embed != NULL}, {"rmsnorm", b->rmsnorm != NULL},
        {"matmul", b->matmul != NULL}, {"rope", b->rope != NULL}, {"kv_store", b->kv_store != NULL},
        {"attention", b->attention != NULL}, {"silu_mul", b->silu_mul != NULL}, {"add", b->add != NULL},
        {"get_rows", b->get_rows != NULL},
    };
    for (size_t i = 0; i < LLM__ARRAY_LEN(req); i++)
        if (!req[i].set)
            return llm__fail(e, LLM_ERR_BACKEND, "backend '%s': the required op '%s' is missing",
                             b->name ? b->name : "(unnamed)", req[i].op);
    return LLM_OK;
}

// The backends built in, in the order "auto" tries them: a GPU first, the CPU last.
static const struct llm__backend_desc *const llm__backends[] = {
#ifdef LLM_CUDA
    &llm__backend_cuda,
#endif
#ifdef LLM_VULKAN
    &llm__backend_vulkan,
#endif
    &llm__backend_cpu,
};

// Every backend there is, built in or not, for messages: its name and the build that has it.
static const struct { enum llm_backend_kind kind; const char *name, *build; } llm__backend_names[] = {
    {LLM_BACKEND_CPU, "cpu", "every build"},
    {LLM_BACKEND_VULKAN, "vulkan", "make VULKAN=1"},
    {LLM_BACKEND_CUDA, "cuda", "make CUDA=1"},
};

static const struct llm__backend_desc *llm__backend_find(enum llm_backend_kind kind) {
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__backends); i++)
        if (llm__backends[i]->kind == kind) return llm__backends[i];
    return NULL;
}

int llm_has_backend(enum llm_backend_kind backend) {
    return backend == LLM_BACKEND_AUTO || llm__backend_find(backend) != NULL;
}

enum llm_status llm__backend_available(enum llm_backend_kind kind, struct llm__err *e) {
    if (llm_has_backend(kind)) return LLM_OK;
    char avail[64] = "";
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__backends); i++)
        snprintf(avail + strlen(avail), sizeof(avail) - strlen(avail), "%s%s", i ? ", " : "", llm__backends[i]->name);
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__backend_names); i++)
        if (llm__backend_names[i].kind == kind)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "backend '%s' is not in this build (%s); available: %s",
                             llm__backend_names[i].name, llm__backend_names[i].build, avail);
    return llm__fail(e, LLM_ERR_INVALID_ARG, "unknown backend %d", (int)kind);
}

void llm__backend_close(struct llm_backend *be) {
    if (be->iface && be->iface->free) be->iface->free(be->ctx);
    memset(be, 0, sizeof(*be));
}

enum llm_status llm__backend_open(struct llm_backend *be, const struct llm_engine_params *p, struct llm__err *e) {
    enum llm_status st = llm__backend_available(p->backend, e);
    for (size_t i = 0; st == LLM_OK && i < LLM__ARRAY_LEN(llm__backends); i++) {
        const struct llm__backend_desc *d = llm__backends[i];
        if (p->backend != LLM_BACKEND_AUTO && d->kind != p->backend) continue;
        st = d->open(be, p, e);
        if (st == LLM_OK) st = llm__backend_check(be->iface, e);
        if (st == LLM_OK) return LLM_OK;
        llm__backend_close(be);
        if (p->backend != LLM_BACKEND_AUTO || i + 1 == LLM__ARRAY_LEN(llm__backends)) return st;
        *e = (struct llm__err){{0}, LLM_OK};   // auto: the next one instead
        st = LLM_OK;
    }
    return st;
}

int llm__list_devices(struct llm_device *out, int max, struct llm__err *e) {
    int n = 0;
    if (max < 0 || (max > 0 && !out)) return llm__fail(e, LLM_ERR_INVALID_ARG, "list devices: bad output array"), -1;
    for (size_t i = 0; i < LLM__ARRAY_LEN(llm__backends); i++) {
        if (!llm__backends[i]->list_devices) continue;
        int k = llm__backends[i]->list_devices(out ? out + n : NULL, max - n, e);
        if (k < 0) return -1;
        n += k;
    }
    return n;
}
