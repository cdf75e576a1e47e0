// Calibrated quantization: writing AWQ/GPTQ checkpoints, llm_quantize

#include "internal.h"

// --- writing an AWQ or GPTQ checkpoint ---

// The row of the checkpoint's matrix that the engine's row r came from (q and k of llama-style
// models were permuted at load, see llm__hf_permute_rows): its inverse.
static int64_t llm__hf_row(const struct llm__hf_owned *o, bool qk, int64_t rows, int64_t r) {
    const int64_t hd = o->hp[2];
    if (!qk || !o->permute || hd < 2 || rows % hd) return r;
    const int64_t h = r / hd, i = (r % hd) / 2, j = r % 2;
    return h * hd + j * (hd / 2) + i;
}

// The packed tensors of a matrix: AWQ (qweight [n, rows/8], nibbles in AutoAWQ's order) or GPTQ
// (qweight [n*bits/32, rows] packed along the input; zeros as they are: checkpoint_format gptq_v2,
// the format for asymmetric groups: v1's zeros less one cannot hold a zero point of 0, and
// GPTQModel loads asymmetric v1 only from its own hand). which: 0 qweight,
// 1 qzeros, 2 scales (fp16), 3 g_idx. Returns the bytes written to out (NULL: just counted) and
// the shape; SIZE_MAX: out of memory.
static size_t llm__hf_pack(const struct llm__cq *c, const struct llm__hf_owned *o, const struct llm__qmat *mt, bool qk,
                           int which, uint8_t *out, int64_t shape[2]) {
    static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};   // nibble k holds output 8c + awq_order[k]
    const int64_t n = mt->n, rows = mt->rows, ng = (n + c->group - 1) / c->group, per = 32 / c->bits;
    int64_t *src = malloc(sizeof(int64_t) * (size_t)rows);   // checkpoint row -> engine row
    if (!src) return SIZE_MAX;
    for (int64_t r = 0; r < rows; r++) src[llm__hf_row(o, qk, rows, r)] = r;
    size_t bytes = 0;
    if (which == 0 && c->awq) {
        shape[0] = n, shape[1] = rows / 8, bytes = (size_t)(n * rows / 8) * 4;
        for (int64_t i = 0; out && i < n; i++)
            for (int64_t w = 0; w < rows / 8; w++) {
                uint32_t v = 0;
                for (int k = 0; k < 8; k++) v |= (uint32_t)mt->q[src[8 * w + awq_order[k]] * n + i] << (4 * k);
                memcpy(out + 4 * (size_t)(i * (rows / 8) + w), &v, 4);
            }
    } else if (which == 0) {
        shape[0] = n / per, shape[1] = rows, bytes = (size_t)(n / per * rows) * 4;
        for (int64_t w = 0; out && w < n / per; w++)
            for (int64_t r = 0; r < rows; r++) {
                uint32_t v = 0;
                for (int k = 0; k < per; k++) v |= (uint32_t)mt->q[src[r] * n + w * per + k] << (c->bits * k);
                memcpy(out + 4 * (size_t)(w * rows + r), &v, 4);
            }
    } else if (which == 1) {
        const int64_t words = rows * c->bits / 32;
        shape[0] = ng, shape[1] = words, bytes = (size_t)(ng * words) * 4;
        for (int64_t g = 0; out && g < ng; g++)
            for (int64_t w = 0; w < words; w++) {
                uint32_t v = 0;
                for (int k = 0; k < per; k++) {
                    const int64_t r = c->awq ? 8 * w + awq_order[k] : w * per + k;
                    const uint32_t z = (uint32_t)mt->zero[src[r] * ng + g] & ((1u << c->bits) - 1);
                    v |= z << (c->bits * k);
                }
                memcpy(out + 4 * (size_t)(g * words + w), &v, 4);
            }
    } else if (which == 2) {
        shape[0] = ng, shape[1] = rows, bytes = (size_t)(ng * rows) * 2;
        for (int64_t g = 0; out && g < ng; g++)
            for (int64_t r = 0; r < rows; r++) {
                const uint16_t h = llm__fp32_to_fp16(mt->scale[src[r] * ng + g]);
                memcpy(out + 2 * (size_t)(g * rows + r), &h, 2);
            }
    } else {
        shape[0] = n, shape[1] = 0, bytes = (size_t)n * 4;
        for (int64_t i = 0; out && i < n; i++) {
            const int32_t gi = mt->g_idx ? mt->g_idx[i] : (int32_t)(i / c->group);
            memcpy(out + 4 * (size_t)i, &gi, 4);
        }
    }
    free(src);
    return bytes;
}

// Copies the file from to the file to (made or truncated); false on an error.
static bool llm__copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    bool ok = a && b;
    char buf[1 << 16];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof(buf), a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    ok = ok && !ferror(a);
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

// s as a JSON string: quoted, its quotes and backslashes escaped.
static void llm__json_str(struct llm__outbuf *o, const char *s) {
    llm__outbuf_put(o, "\"", 1);
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20) {   // a control character (a hostile input's tensor name)
            char u[8];
            snprintf(u, sizeof(u), "\\u%04x", (unsigned char)*s);
            llm__outbuf_put(o, u, 6);
            continue;
        }
        if (*s == '"' || *s == '\\') llm__outbuf_put(o, "\\", 1);
        llm__outbuf_put(o, s, 1);
    }
    llm__outbuf_put(o, "\"", 1);
}

// The input directory's other files (tokenizer, generation config, ...) copied to out: its regular
// files but hidden ones, config.json, quantize_config.json, the index and other copies of the
// weights. from, to: room for a path (pl bytes).
static enum llm_status llm__cq_copy_files(const char *in, const char *out, char *from, char *to, size_t pl,
                                          struct llm__err *e) {
    static const char *const weights[] = {".safetensors", ".bin", ".pth", ".pt", ".gguf", ".h5", ".msgpack", ".onnx",
                                          ".ckpt"};
    struct stat sb;
    enum llm_status st = LLM_OK;
    DIR *d = opendir(in);
    if (!d) return llm__fail(e, LLM_ERR_IO, "quantize: cannot read the directory '%s': %s", in, strerror(errno));
    for (struct dirent *de; (de = readdir(d)) != NULL && !st;) {
        const char *nm = de->d_name;
        const size_t nl = strlen(nm);
        bool skip = nm[0] == '.' || nl > 200 || !strcmp(nm, "model.safetensors.index.json") ||
                    !strcmp(nm, "config.json") || !strcmp(nm, "quantize_config.json");
        for (size_t k = 0; k < LLM__ARRAY_LEN(weights) && !skip; k++)   // (other copies of the weights)
            skip = nl > strlen(weights[k]) && !strcmp(nm + nl - strlen(weights[k]), weights[k]);
        if (skip) continue;
        snprintf(from, pl, "%s/%s", in, nm);
        snprintf(to, pl, "%s/%s", out, nm);
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (!llm__copy_file(from, to)) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot copy '%s' to '%s'", from, to);
    }
    closedir(d);
    return st;
}

// The checkpoint's config.json: the input's, with a quantization_config member added before its
// closing brace. from, to: room for a path (pl bytes).
static enum llm_status llm__cq_write_config(const struct llm__cq *c, char *from, char *to, size_t pl,
                                            struct llm__err *e) {
    const struct llm_quantize_params *p = c->p;
    const long long group = p->group_size == -1 ? -1 : (long long)c->group;
    snprintf(from, pl, "%s/config.json", p->input);
    char *text = NULL;
    size_t len = 0;
    enum llm_status st = llm__hf_read(p->input, "config.json", (size_t)1 << 24, true, &text, &len, e);
    if (st) return st;
    size_t end = len;
    while (end > 0 && text[end - 1] != '}') end--;
    if (end == 0) { free(text); return llm__fail(e, LLM_ERR_FORMAT, "quantize: '%s' is not a JSON object", from); }
    char qc[400];
    if (c->awq)
        snprintf(qc, sizeof(qc), ",\n  \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": %d, "
                 "\"group_size\": %lld, \"zero_point\": true, \"version\": \"gemm\"}\n}\n", c->bits, group);
    else
        snprintf(qc, sizeof(qc), ",\n  \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": %d, "
                 "\"group_size\": %lld, \"desc_act\": %s, \"sym\": false, \"static_groups\": false, "
                 "\"true_sequential\": true, \"damp_percent\": %g, \"checkpoint_format\": \"gptq_v2\"}\n}\n",
                 c->bits, group, p->act_order ? "true" : "false", p->damp > 0 ? p->damp : 0.01);
    size_t body = end - 1;
    while (body > 0 && isspace((unsigned char)text[body - 1])) body--;
    const size_t first = body > 0 && text[body - 1] == '{';   // {} has no member before: no comma
    struct llm__outbuf cfg = {0};
    llm__outbuf_put(&cfg, text, body);
    llm__outbuf_put(&cfg, qc + first, strlen(qc) - first);
    free(text);
    snprintf(to, pl, "%s/config.json", c->outdir);
    FILE *f = fopen(to, "wb");
    bool ok = f && !cfg.fail && llm__fwrite(f, cfg.p, cfg.n);
    if (f && fclose(f) != 0) ok = false;
    free(cfg.p);
    return ok ? LLM_OK : llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s'", to);
}

// The checkpoint's model.safetensors being written, in two passes over the input's tensors:
// pass 0 makes the header, pass 1 writes it and the data, in the same order.
struct llm__cq_st {
    struct llm__cq *c;
    const struct llm__hf_owned *o;
    int pass;
    struct llm__outbuf hdr;
    FILE *sf;                  // pass 1: the file written
    size_t off;                // the data's bytes before the tensor
    bool ok;                   // pass 1: the last write succeeded
};

// A quantized matrix's packed parts (qweight, qzeros, scales, and GPTQ's g_idx), named base.PART in
// place of base.weight: pass 0 their header entries, pass 1 their data.
static enum llm_status llm__cq_st_packed(struct llm__cq_st *w, const struct llm__qmat *mt, bool qk, const char *base,
                                         struct llm__err *e) {
    static const char *const sfx[4] = {"qweight", "qzeros", "scales", "g_idx"};
    const struct llm__cq *c = w->c;
    for (int k = 0; k < (c->awq ? 3 : 4); k++) {
        int64_t shape[2];
        const size_t bytes = llm__hf_pack(c, w->o, mt, qk, k, NULL, shape);
        if (bytes == SIZE_MAX) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        if (w->pass == 0) {
            char ent[800], dims[48], name[600];
            if (k == 3) snprintf(dims, sizeof(dims), "%lld", (long long)shape[0]);
            else snprintf(dims, sizeof(dims), "%lld,%lld", (long long)shape[0], (long long)shape[1]);
            snprintf(name, sizeof(name), "%s.%s", base, sfx[k]);
            llm__outbuf_put(&w->hdr, ",", 1);
            llm__json_str(&w->hdr, name);
            snprintf(ent, sizeof(ent), ":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                     k == 2 ? "F16" : "I32", dims, w->off, w->off + bytes);
            llm__outbuf_put(&w->hdr, ent, strlen(ent));
        } else {
            uint8_t *buf = malloc(bytes ? bytes : 1);
            if (!buf) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
            w->ok = w->ok && llm__hf_pack(c, w->o, mt, qk, k, buf, shape) == bytes && llm__fwrite(w->sf, buf, bytes);
            free(buf);
        }
        w->off += bytes;
    }
    return LLM_OK;
}

// A tensor s of the input as it is, or (vec: NULL or the values of gt, its GGUF view, gname) a
// norm or bias AWQ divided, in the checkpoint's dtype (Gemma's norms as w, not 1 + w): pass 0 its
// header entry, pass 1 its data.
static enum llm_status llm__cq_st_plain(struct llm__cq_st *w, const struct llm__st_tensor *s,
                                        const struct llm__gguf_tensor *gt, const char *gname, const float *vec,
                                        struct llm__err *e) {
    if (w->pass == 0) {
        llm__outbuf_put(&w->hdr, ",", 1);
        llm__json_str(&w->hdr, s->name);
        char ent[200];
        const char *dtype = s->type == LLM__TYPE_F16 ? "F16" : s->type == LLM__TYPE_BF16 ? "BF16" : "F32";
        int k = snprintf(ent, sizeof(ent), ":{\"dtype\":\"%s\",\"shape\":[", dtype);
        for (int dd = 0; dd < s->n_dims; dd++)
            k += snprintf(ent + k, sizeof(ent) - (size_t)k, "%s%lld", dd ? "," : "", (long long)s->shape[dd]);
        snprintf(ent + k, sizeof(ent) - (size_t)k, "],\"data_offsets\":[%zu,%zu]}", w->off, w->off + s->size);
        llm__outbuf_put(&w->hdr, ent, strlen(ent));
    } else if (!vec) {
        w->ok = llm__fwrite(w->sf, s->data, s->size);
    } else {
        const int64_t cnt = gt->ne[0];
        const size_t es = s->size / (size_t)cnt;
        uint8_t *buf = malloc(s->size);
        if (!buf) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        const bool gemma_norm = w->o->gemma && strstr(gname, "norm.weight");
        for (int64_t i = 0; i < cnt; i++) {
            const float v = vec[i] - (gemma_norm ? 1.0f : 0.0f);
            if (es == 4) memcpy(buf + 4 * i, &v, 4);
            else {
                const uint16_t h = s->type == LLM__TYPE_F16 ? llm__fp32_to_fp16(v) : llm__fp32_to_bf16(v);
                memcpy(buf + 2 * i, &h, 2);
            }
        }
        w->ok = llm__fwrite(w->sf, buf, s->size);
        free(buf);
    }
    w->off += s->size;
    return LLM_OK;
}

// One pass over the input's tensors, in its files' order: a quantized matrix as its packed parts,
// any other tensor as it is or divided (AWQ's norms and biases).
static enum llm_status llm__cq_st_pass(struct llm__cq_st *w, struct llm__err *e) {
    const struct llm__cq *c = w->c;
    const struct llm__hf_owned *o = w->o;
    enum llm_status st = LLM_OK;
    for (int fi = 0; fi < o->n_files && !st && w->ok; fi++)
        for (int64_t ti = 0; ti < o->files[fi].n && !st && w->ok; ti++) {
            const struct llm__st_tensor *s = &o->files[fi].t[ti];
            char gname[LLM__GGUF_MAX_NAME + 16], base[512];
            int qkf = 0;
            const bool mapped = llm__hf_name(s->name, o->gemma, gname, sizeof(gname), &qkf);
            const struct llm__gguf_tensor *gt = mapped ? llm__gguf_find_tensor(c->g, gname) : NULL;
            const struct llm__qmat *mt = NULL;
            for (int i = 0; gt && i < c->n_mats; i++)
                if (c->mats[i].tensor == gt - c->g->tensors) mt = &c->mats[i];
            const float *vec = gt ? c->vecs[gt - c->g->tensors] : NULL;
            if (mt) {   // the packed parts, in place of NAME.weight
                const size_t bl = strlen(s->name) - strlen(".weight");
                snprintf(base, sizeof(base), "%.*s", (int)bl, s->name);
                st = llm__cq_st_packed(w, mt, qkf != 0, base, e);
            } else {
                st = llm__cq_st_plain(w, s, gt, gname, vec, e);
            }
        }
    return st;
}

// The checkpoint's model.safetensors: the header (made by a first pass), then the data in its
// order, written to model.safetensors.part and renamed when complete. from, to: room for a path
// (pl bytes).
static enum llm_status llm__cq_write_safetensors(struct llm__cq *c, char *from, char *to, size_t pl,
                                                 struct llm__err *e) {
    const char *out = c->outdir;
    struct llm__cq_st w = {.c = c, .o = c->g->extra, .pass = 0, .ok = true};
    llm__outbuf_put(&w.hdr, "{\"__metadata__\":{\"format\":\"pt\"}", 31);
    enum llm_status st = llm__cq_st_pass(&w, e);
    if (!st) {
        while ((w.hdr.n + 1) % 8) llm__outbuf_put(&w.hdr, " ", 1);
        llm__outbuf_put(&w.hdr, "}", 1);
        if (w.hdr.fail) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        snprintf(to, pl, "%s/model.safetensors.part", out);
        if (!(w.sf = fopen(to, "wb")))
            st = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", to, strerror(errno));
    }
    if (!st) {
        const uint64_t hl = w.hdr.n;
        w.pass = 1;
        w.off = 0;
        w.ok = llm__fwrite(w.sf, &hl, 8) && llm__fwrite(w.sf, w.hdr.p, w.hdr.n);
        st = llm__cq_st_pass(&w, e);
        if (fclose(w.sf) != 0) w.ok = false;
        snprintf(from, pl, "%s/model.safetensors.part", out);
        snprintf(to, pl, "%s/model.safetensors", out);
        if (!st && (!w.ok || rename(from, to) != 0))
            st = llm__fail(e, LLM_ERR_IO, "quantize: cannot write '%s': %s", to, strerror(errno));
        if (st) remove(from);
    }
    free(w.hdr.p);
    return st;
}

// The checkpoint in c->outdir: config.json (the input's with a quantization_config),
// model.safetensors (the input's tensors, the layers' matrices packed, AWQ's divided norms and
// biases), and the input directory's other files (tokenizer, generation config, ...) copied.
static enum llm_status llm__cq_write_hf(struct llm__cq *c, struct llm__err *e) {
    const size_t pl = strlen(c->p->input) + strlen(c->outdir) + 300;
    char *from = NULL, *to = NULL;
    enum llm_status st = LLM_OK;
    if (!(from = malloc(pl)) || !(to = malloc(pl))) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    if (!st) st = llm__cq_copy_files(c->p->input, c->outdir, from, to, pl, e);
    if (!st) st = llm__cq_write_config(c, from, to, pl, e);
    if (!st) st = llm__cq_write_safetensors(c, from, to, pl, e);
    free(from);
    free(to);
    return st;
}

// --- a calibrated quantization, step by step; llm_quantize ---

// llm_quantize's settings for a calibrated quantization, checked (llm__cq_check).
struct llm__cq_opts {
    const char *method;        // gptq, awq or rtn
    bool rtn;                  // round-to-nearest groups (no calibration)
    int gsz;                   // inputs a group; -1: a row
    int samples, seq;          // the calibration's windows, at most, and their tokens
    const struct llm__ftype *ft;   // GGUF: the file type; hf: NULL
};

// The calibration text as windows of tokens.
struct llm__cq_text {
    int32_t *toks;             // the text's tokens
    int32_t *win;              // a window, with room for a BOS
    int windows, seq;          // the windows taken; tokens a window
};

// c->p's method, format, bits, group size, file type and calibration settings checked, into c
// and o (LLM_ERR_INVALID_ARG: one not offered, or not with the others).
static enum llm_status llm__cq_check(struct llm__cq *c, struct llm__cq_opts *o, struct llm__err *e) {
    const struct llm_quantize_params *p = c->p;
    const char *method = o->method = p->method ? p->method : "rtn";
    c->awq = !strcmp(method, "awq");
    o->rtn = !strcmp(method, "rtn");   // (here: a checkpoint of round-to-nearest groups)
    if (!c->awq && !o->rtn && strcmp(method, "gptq") != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a method (gptq, awq, rtn)", method);
    c->hf = !p->format || !strcmp(p->format, "hf");
    if (!c->hf && strcmp(p->format, "gguf") != 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not an output format (hf, gguf)", p->format);
    c->bits = p->bits ? p->bits : 4;
    if (c->bits != 4 && (c->bits != 8 || c->awq))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %d bits: %s", c->bits,
                         c->awq ? "AWQ is 4-bit" : "GPTQ is 4- or 8-bit");
    const int gsz = o->gsz = p->group_size ? p->group_size : 128;
    if (gsz != 32 && gsz != 64 && gsz != 128 && gsz != -1)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: group size %d: 32, 64, 128 or -1 (a row)", gsz);
    if (c->awq && gsz == -1)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: AWQ's groups are 32, 64 or 128 inputs (AutoAWQ's format "
                         "has no whole-row group)");
    if (p->act_order && (c->awq || !c->hf))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: act-order is GPTQ's, for Hugging Face checkpoints "
                         "(--format hf)");
    const struct llm__ftype *ft = o->ft = c->hf ? NULL : llm__ftype_by_name(p->type);
    if (!c->hf && (!ft || ft->type == LLM__TYPE_F32 || ft->type == LLM__TYPE_F16 || ft->type == LLM__TYPE_BF16))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a quantized file type (q4_0, q4_K_M, ...)",
                         p->type ? p->type : "(none)");
    if (!p->calib_path && !o->rtn)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %s needs a calibration text (--calib FILE)", method);
    o->samples = p->n_samples > 0 ? p->n_samples : 128;
    o->seq = p->seq_len > 0 ? p->seq_len : 512;
    if (o->seq < 16 || o->seq > 16384)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: --seq-len %d: 16 to 16384", o->seq);
    struct stat sb;
    if (c->hf && (stat(p->input, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: a checkpoint (--format hf) is made from a Hugging Face "
                         "directory; '%s' is not one (--format gguf writes a GGUF file)", p->input);
    return LLM_OK;
}

// The calibration text (rtn: none), up to the first read past 1 GiB, into text (the caller frees
// it, also on an error).
static enum llm_status llm__cq_read_text(const struct llm_quantize_params *p, bool rtn, struct llm__outbuf *text,
                                         struct llm__err *e) {
    FILE *tf = fopen(rtn ? "/dev/null" : p->calib_path, "rb");
    if (!tf) return llm__fail(e, LLM_ERR_IO, "quantize: cannot open '%s': %s", p->calib_path, strerror(errno));
    char chunk[1 << 16];
    for (size_t k; (k = fread(chunk, 1, sizeof(chunk), tf)) > 0 && text->n < ((size_t)1 << 30);)
        llm__outbuf_put(text, chunk, k);
    const bool rerr = ferror(tf);
    fclose(tf);
    if (rerr || text->fail) return llm__fail(e, LLM_ERR_IO, "quantize: cannot read '%s'", p->calib_path);
    return LLM_OK;
}

// The output, checked before the calibration: a checkpoint is written to OUTPUT.part (made here:
// c->outdir) and renamed when complete (OUTPUT must not exist or be empty); a GGUF file's
// directory must be writable.
static enum llm_status llm__cq_prepare_output(struct llm__cq *c, struct llm__err *e) {
    const char *output = c->p->output;
    const size_t ol = strlen(output);
    char *part = malloc(ol + 6);
    if (!part) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memcpy(part, output, ol), memcpy(part + ol, ".part", 6);
    enum llm_status st = LLM_OK;
    struct stat sb;
    if (c->hf) {
        DIR *od = stat(output, &sb) == 0 && S_ISDIR(sb.st_mode) ? opendir(output) : NULL;
        bool empty = true;
        for (struct dirent *de; od && (de = readdir(od)) != NULL;)
            empty &= !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        if (od) closedir(od);
        if (stat(output, &sb) == 0 && !S_ISDIR(sb.st_mode))
            st = llm__fail(e, LLM_ERR_IO, "quantize: '%s': a file is in the way (a checkpoint is a directory)", output);
        else if (!empty)
            st = llm__fail(e, LLM_ERR_IO, "quantize: '%s' is not empty: remove it, or write the checkpoint elsewhere",
                           output);
        else {
            llm__rm_dir(part);   // what an interrupted run left
            if (mkdir(part, 0755) != 0)
                st = llm__fail(e, LLM_ERR_IO, "quantize: cannot make the directory '%s': %s", part, strerror(errno));
            else c->outdir = part, part = NULL;
        }
    } else {
        FILE *pf = fopen(part, "wb");
        if (!pf) st = llm__fail(e, LLM_ERR_IO, "quantize: cannot create '%s': %s", part, strerror(errno));
        else fclose(pf), remove(part);
    }
    free(part);
    return st;
}

// GGUF: every tensor's type as the mix gives it (the calibrated matrices get theirs), into c->types.
static enum llm_status llm__cq_mix_types(struct llm__cq *c, const struct llm__ftype *ft, struct llm__err *e) {
    struct llm__qmix q = {.ftype = ft->ftype, .type = ft->type, .pure = c->p->pure != 0, .tied = true};
    enum llm_status st = llm__qmix_init(c->g, &q, e);
    if (st) return st;
    const struct llm__gguf_tensor **ord = malloc(sizeof(*ord) * (size_t)(c->g->n_tensors + 1));
    if (!ord) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < c->g->n_tensors; i++) ord[i] = &c->g->tensors[i];
    qsort(ord, (size_t)c->g->n_tensors, sizeof(*ord), llm__tensor_order);
    for (int64_t i = 0; i < c->g->n_tensors; i++) c->types[ord[i] - c->g->tensors] = llm__qmix_type(&q, ord[i]);
    free(ord);
    return LLM_OK;
}

// The layers' matrices to quantize, into c->mats (c->vecs and c->types made too); a checkpoint's
// must be of F32/F16/BF16 weights, with rows and columns its packing can hold.
static enum llm_status llm__cq_find_mats(struct llm__cq *c, const struct llm__cq_opts *o, struct llm__err *e) {
    const struct llm__model *m = &c->E->model;
    const int gsz = o->gsz;
    if (c->hf && (c->g->extra_free != llm__hf_owned_free || ((struct llm__hf_owned *)c->g->extra)->quantized))
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is quantized already; a checkpoint is made from "
                         "F32/F16/BF16 weights", c->p->input);
    c->vecs = calloc((size_t)c->g->n_tensors + 1, sizeof(float *));
    c->types = calloc((size_t)c->g->n_tensors + 1, sizeof(int));
    c->mats = calloc((size_t)c->g->n_tensors + 1, sizeof(*c->mats));
    if (!c->vecs || !c->types || !c->mats) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    enum llm_status st;
    if (!c->hf && (st = llm__cq_mix_types(c, o->ft, e))) return st;
    for (int64_t i = 0; i < c->g->n_tensors; i++) {
        const struct llm__gguf_tensor *t = &c->g->tensors[i];
        bool qk = false;
        const int slot = llm__cq_slot(t->name, &qk), layer = llm__tensor_layer(t->name);
        if (slot < 0 || layer < 0 || layer >= m->n_layer || t->n_dims != 2) continue;
        if (t->type != LLM__TYPE_F32 && t->type != LLM__TYPE_F16 && t->type != LLM__TYPE_BF16)
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %s; %s quantizes F32/F16/BF16 weights",
                             t->name, llm__type_info(t->type)->name, o->method);
        struct llm__qmat *mt = &c->mats[c->n_mats++];
        *mt = (struct llm__qmat){.tensor = i, .layer = layer, .slot = slot, .qk = qk, .rows = t->ne[1],
                                 .n = t->ne[0], .type = c->hf ? -1 : c->types[i]};
        c->total += (double)(mt->rows * mt->n);
        // (GPTQ's last group may be partial)
        if (c->hf && ((c->awq && gsz > 0 && mt->n % gsz) || mt->n % 32 || mt->rows % 8))
            return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: '%s' is %lld x %lld: a checkpoint needs rows a "
                             "multiple of 8 and columns of whole groups of %d%s", t->name, (long long)mt->rows,
                             (long long)mt->n, c->awq && gsz > 0 ? gsz : 32,
                             c->awq ? " (AWQ: a smaller --group-size may divide them)" : "");
        if (!c->hf && llm__type_info((uint32_t)mt->type)->blck == 1)
            c->n_mats--, c->total -= (double)(mt->rows * mt->n);
    }
    if (!c->n_mats) return llm__fail(e, LLM_ERR_UNSUPPORTED, "quantize: the model has no layer matrices to quantize");
    c->group = gsz > 0 ? gsz : 1 << 30;
    return LLM_OK;
}

// Round-to-nearest groups of every matrix (no calibration).
static enum llm_status llm__cq_rtn(struct llm__cq *c, struct llm__err *e) {
    enum llm_status st = LLM_OK;
    for (int i = 0; i < c->n_mats && !st; i++) {
        if (!llm__cq_load(c, &c->mats[i]) || !llm__cq_round(c, &c->mats[i], 0))
            st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        free(c->mats[i].w);
        c->mats[i].w = NULL;
        llm__cq_progress(c, &c->mats[i]);
    }
    return st;
}

// The calibration text's tokens into t, and as many windows of t->seq tokens as it holds, up to
// samples (LLM_ERR_INVALID_ARG: not one).
static enum llm_status llm__cq_tokenize(struct llm__cq *c, const struct llm__outbuf *text, int samples,
                                        struct llm__cq_text *t, struct llm__err *e) {
    llm_engine *E = c->E;
    const int n_tok = llm_tokenize(E, text->p, text->n, 0, NULL, 0);
    if (n_tok < 0)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: cannot tokenize '%s': %s", c->p->calib_path,
                         llm_last_error(E));
    if (!(t->toks = malloc(sizeof(int32_t) * (size_t)(n_tok + 1))) ||
        !(t->win = malloc(sizeof(int32_t) * (size_t)(t->seq + 1))))
        return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    llm_tokenize(E, text->p, text->n, 0, t->toks, n_tok);
    t->windows = LLM__MIN(samples, n_tok / t->seq);
    if (t->windows < 1)
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: '%s' is %d tokens, less than one window of --seq-len %d",
                         c->p->calib_path, n_tok, t->seq);
    return LLM_OK;
}

// How many layers' statistics a pass over the text takes: as many as a third of the free memory
// holds (of 1 GiB when that is not known), at least one.
static int llm__cq_layers_per_pass(const struct llm__cq *c) {
    const struct llm__model *m = &c->E->model;
    const size_t widths[LLM__CAL_SLOTS] = {(size_t)m->n_embd, (size_t)m->n_head * (size_t)m->head_dim,
                                           (size_t)m->n_embd, (size_t)m->n_ff};
    size_t per_layer = 1, budget = llm__mem_available() / 3;
    for (int i = 0; i < LLM__CAL_SLOTS; i++) per_layer += c->awq ? widths[i] * 512 * 4 : widths[i] * widths[i] * 4;
    if (!budget) budget = (size_t)1 << 30;
    return (int)LLM__MAX(1, LLM__MIN((size_t)m->n_layer, budget / per_layer));
}

// Pass number `pass` of `passes` over the text's windows, one sequence a window, the forward
// handing the linear layers' inputs to c->cal (which keeps those of its layers l0 to l1).
static enum llm_status llm__cq_eval_windows(struct llm__cq *c, const struct llm__cq_text *t, int pass, int passes,
                                            struct llm__err *e) {
    llm_engine *E = c->E;
    const struct llm_quantize_params *p = c->p;
    const int bos = E->vocab.bos, seq = t->seq;
    enum llm_status st = LLM_OK;
    E->model.capture = llm__calib_take;
    E->model.capture_ctx = &c->cal;
    for (int w = 0; w < t->windows && !st; w++) {
        int k = 0;
        if (E->vocab.add_bos && bos >= 0) t->win[k++] = bos;
        memcpy(t->win + k, t->toks + (size_t)w * (size_t)seq, sizeof(int32_t) * (size_t)seq);
        const int sid = llm_seq_new(E);
        if (sid < 0) { st = llm__fail(e, LLM_ERR_NOMEM, "quantize: %s", llm_last_error(E)); break; }
        if (llm_seq_eval(E, sid, t->win, k + seq, NULL, 0) != LLM_OK)
            st = llm__fail(e, llm_last_status(E), "quantize: %s", llm_last_error(E));
        llm_seq_free(E, sid);
        if (p->progress)
            p->progress(p->progress_user, (double)(pass * t->windows + w + 1) / (passes * t->windows), "calibration");
    }
    E->model.capture = NULL;
    return st;
}

// GPTQ or AWQ: the engine runs over the text's windows in passes, each taking the inputs of as
// many layers as llm__cq_layers_per_pass allows; then the pass's layers are quantized and their
// statistics given back.
static enum llm_status llm__cq_calibrate(struct llm__cq *c, const struct llm__cq_opts *o,
                                         const struct llm__outbuf *text, struct llm__err *e) {
    llm_engine *E = c->E;
    const struct llm__model *m = &E->model;
    struct llm__cq_text t = {.seq = o->seq};
    enum llm_status st = llm__cq_tokenize(c, text, o->samples, &t, e);
    if (st) goto done;
    const int threads = LLM__MIN(E->params.n_threads > 0 ? E->params.n_threads : llm__online_cpus(),
                                 LLM__MAX_THREADS_AWQ);
    if (!(c->cal.pool = llm__pool_new(threads, e))) { st = LLM_ERR_BACKEND; goto done; }
    c->cal.n_layer = m->n_layer;
    c->cal.want_h = !c->awq;
    c->cal.max_xs = c->awq ? 512 : 0;
    c->cal.stride = LLM__MAX(1, (int64_t)t.windows * (t.seq + 1) / 512);
    c->cal.dot = llm__vec_dot_kernel(LLM__TYPE_F32, llm__simd_best());
    if (!(c->cal.in = calloc((size_t)m->n_layer * LLM__CAL_SLOTS, sizeof(*c->cal.in)))) {
        st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    const int per_pass = llm__cq_layers_per_pass(c);
    const int passes = (m->n_layer + per_pass - 1) / per_pass;
    for (int pass = 0; pass < passes && !st; pass++) {
        c->cal.l0 = pass * per_pass;
        c->cal.l1 = LLM__MIN(m->n_layer, c->cal.l0 + per_pass);
        st = llm__cq_eval_windows(c, &t, pass, passes, e);
        if (!st && c->cal.fail)
            st = llm__fail(e, LLM_ERR_NOMEM, "quantize: out of memory for the calibration's statistics");
        // the pass's layers, then their statistics given back
        for (int l = c->cal.l0; l < c->cal.l1 && !st; l++)
            st = c->awq ? llm__cq_awq_layer(c, l, c->cal.pool, e) : llm__cq_gptq_layer(c, l, c->cal.pool, e);
        for (int i = c->cal.l0 * LLM__CAL_SLOTS; i < c->cal.l1 * LLM__CAL_SLOTS; i++) {
            struct llm__cal_in *ci = &c->cal.in[i];
            free(ci->h), free(ci->abs_sum), free(ci->xs);
            ci->h = NULL, ci->abs_sum = NULL, ci->xs = NULL;
        }
    }
done:
    free(t.toks);
    free(t.win);
    return st;
}

// The checkpoint written, then renamed OUTPUT (an empty directory there removed first); stats:
// the quantized matrices' bytes in and out (codes, and a scale and a zero point a group).
static enum llm_status llm__cq_finish_hf(struct llm__cq *c, struct llm_quantize_stats *stats, struct llm__err *e) {
    const struct llm_quantize_params *p = c->p;
    struct stat sb;
    enum llm_status st = llm__cq_write_hf(c, e);
    if (!st && stat(p->output, &sb) == 0) rmdir(p->output);   // (empty)
    if (!st && rename(c->outdir, p->output) != 0)
        st = llm__fail(e, LLM_ERR_IO, "quantize: cannot rename '%s' to '%s': %s", c->outdir, p->output,
                       strerror(errno));
    if (stats) {
        memset(stats, 0, sizeof(*stats));
        stats->n_quantized = c->n_mats;
        stats->n_tensors = (int)c->g->n_tensors;
        for (int i = 0; i < c->n_mats; i++) {
            const struct llm__qmat *mt = &c->mats[i];
            stats->bytes_in += c->g->tensors[mt->tensor].size;
            stats->bytes_out += (size_t)(mt->rows * mt->n) * (size_t)c->bits / 8 +
                                (size_t)(mt->rows * ((mt->n + c->group - 1) / c->group)) * (2 + (size_t)c->bits / 8);
            stats->n_params += mt->rows * mt->n;
        }
    }
    return st;
}

// The GGUF file of file type ft: the quantized matrices, and AWQ's divided norms and biases in
// F32, in place of the model's tensors; the others as the mix makes them.
static enum llm_status llm__cq_finish_gguf(struct llm__cq *c, const struct llm__ftype *ft,
                                           struct llm_quantize_stats *stats, struct llm__err *e) {
    struct llm__qrepl *repl = calloc((size_t)c->g->n_tensors + 1, sizeof(*repl));
    if (!repl) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n_mats; i++) {
        const struct llm__qmat *mt = &c->mats[i];
        repl[mt->tensor] = (struct llm__qrepl){mt->type, mt->data, llm__row_bytes(mt->type, mt->n) * (size_t)mt->rows};
    }
    for (int64_t i = 0; i < c->g->n_tensors; i++)
        if (c->vecs[i])
            repl[i] = (struct llm__qrepl){LLM__TYPE_F32, c->vecs[i], sizeof(float) * (size_t)c->g->tensors[i].ne[0]};
    struct llm_quantize_stats s0 = {0};
    const enum llm_status st = llm__quantize_gguf(c->g, c->p, ft, repl, &s0, e);
    if (stats) *stats = s0;
    free(repl);
    return st;
}

// What c holds: the calibration's statistics and pool, the matrices' values and outputs, the
// divided vectors.
static void llm__cq_free(struct llm__cq *c) {
    llm__calib_free(&c->cal);
    for (int i = 0; c->mats && i < c->n_mats; i++) {
        struct llm__qmat *mt = &c->mats[i];
        free(mt->w), free(mt->data), free(mt->q), free(mt->scale), free(mt->zero), free(mt->g_idx);
    }
    for (int64_t i = 0; c->vecs && i < c->g->n_tensors; i++) free(c->vecs[i]);
    free(c->vecs), free(c->types), free(c->mats);
}

// A calibrated quantization (llm_quantize with a method, or a checkpoint): the settings and the
// output checked, the model run by an engine of its own, its layers' matrices quantized (GPTQ,
// AWQ or round-to-nearest), then the checkpoint or the GGUF file written.
static enum llm_status llm__quantize_calibrated(const struct llm_quantize_params *p, struct llm_quantize_stats *stats,
                                                struct llm__err *e) {
    struct llm__cq c;
    memset(&c, 0, sizeof(c));
    c.p = p;
    struct llm__cq_opts o = {0};
    enum llm_status st = llm__cq_check(&c, &o, e);
    if (st) return st;
    struct llm__outbuf text = {0};
    if (!(st = llm__cq_read_text(p, o.rtn, &text, e))) st = llm__cq_prepare_output(&c, e);
    if (st) { free(text.p); return st; }

    // the engine: the model as it is, one sequence of a window at a time
    struct llm_engine_params ep = llm_engine_params_default();
    ep.model_path = p->input;
    ep.n_threads = p->n_threads;
    ep.max_model_len = o.seq + 1;
    ep.max_num_batched_tokens = o.seq + 1;
    ep.max_num_seqs = 1;
    char err[512];
    llm_engine *E = llm_engine_create(&ep, err, sizeof(err));
    if (!E) {
        free(text.p);
        if (c.outdir) llm__rm_dir(c.outdir), free(c.outdir);
        return llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: %s", err);
    }
    c.E = E;
    c.g = &E->model.gguf;
    st = llm__cq_find_mats(&c, &o, e);
    if (!st) st = o.rtn ? llm__cq_rtn(&c, e) : llm__cq_calibrate(&c, &o, &text, e);
    if (!st) st = c.hf ? llm__cq_finish_hf(&c, stats, e) : llm__cq_finish_gguf(&c, o.ft, stats, e);
    E->model.capture = NULL;
    if (st && c.outdir) llm__rm_dir(c.outdir);
    free(c.outdir);
    llm__cq_free(&c);
    free(text.p);
    llm_engine_free(E);
    return st;
}

// p with "/suffix" appended (p freed), or NULL (p freed) when there is no memory.
static char *llm__path_join(char *p, const char *suffix) {
    size_t n = strlen(p), m = strlen(suffix);
    char *q = realloc(p, n + m + 2);
    if (!q) return free(p), NULL;
    q[n] = '/';
    memcpy(q + n + 1, suffix, m + 1);
    return q;
}

// The folder that holds p, as a path (p freed): its text up to the last '/', "/" or ".".
static char *llm__path_dir(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (slash == p) p[1] = 0;
    else if (slash) *slash = 0;
    else { free(p); p = llm__strndup(".", 1); }
    return p;
}

// Where a path to be written lies against a file or directory being read: 0 apart, 1 it is that
// file, 2 it lies inside that directory, -1 no memory. Files are compared by device and inode,
// symbolic links followed: the path when it exists, else the nearest part of it that does (where
// it would be created); then the folder that holds it (a link to a file: its target's), and every
// folder above that, reached through "/.." (which leaves a folder physically, links resolved),
// up to the root. POSIX.1-2008 alone (no realpath).
static int llm__path_overlap(const char *out, const char *in) {
    struct stat si, so, sl, up;
    if (!in || stat(in, &si) != 0) return 0;   // a missing input: its reader's message names it
    char *p = llm__strndup(out, strlen(out));
    if (!p) return -1;
    bool exists = true;
    while (stat(p, &so) != 0) {
        exists = false;
        if (!strcmp(p, ".") || !strcmp(p, "/")) { free(p); return 0; }
        if (!(p = llm__path_dir(p))) return -1;
    }
    if (so.st_dev == si.st_dev && so.st_ino == si.st_ino) { free(p); return exists ? 1 : 2; }
    for (int hops = 0; hops < 40 && lstat(p, &sl) == 0 && S_ISLNK(sl.st_mode); hops++) {   // to the link's target
        char target[4096];
        ssize_t k = readlink(p, target, sizeof(target) - 1);
        if (k <= 0) break;
        target[k] = 0;
        if (target[0] == '/') { free(p); p = llm__strndup(target, (size_t)k); }
        else if ((p = llm__path_dir(p))) p = llm__path_join(p, target);
        if (!p) return -1;
    }
    if (!S_ISDIR(so.st_mode) && !(p = llm__path_dir(p))) return -1;
    int overlap = 0;
    for (int depth = 0; !overlap && depth < 1024 && stat(p, &so) == 0; depth++) {
        if (so.st_dev == si.st_dev && so.st_ino == si.st_ino) overlap = 2;
        if (!(p = llm__path_join(p, ".."))) return -1;
        if (stat(p, &up) != 0 || (up.st_dev == so.st_dev && up.st_ino == so.st_ino)) break;   // the root
    }
    free(p);
    return overlap;
}

// Refuses an output that is an input or lies inside one (LLM_ERR_INVALID_ARG): OUT.part renamed
// over a file of a model directory, a checkpoint written into the directory being read, or
// OUT.part (written first) being the input file destroys what is being read, even while it is
// read (the input is mapped).
static enum llm_status llm__quantize_output_ok(const char *out, const char *in, const char *what, struct llm__err *e) {
    size_t n = strlen(out);
    char *part = malloc(n + 6);
    if (!part) return llm__fail(e, LLM_ERR_NOMEM, "out of memory");
    memcpy(part, out, n);
    memcpy(part + n, ".part", 6);
    enum llm_status st = LLM_OK;
    for (int i = 0; i < 2 && st == LLM_OK; i++) {
        int o = llm__path_overlap(i ? part : out, in);
        if (o < 0) st = llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        else if (o && i)
            st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: the output '%s' is written first as '%s', which %s the "
                           "%s '%s': write it elsewhere", out, part, o == 1 ? "is" : "is inside", what, in);
        else if (o)
            st = llm__fail(e, LLM_ERR_INVALID_ARG, "quantize: the output '%s' %s the %s '%s': write it elsewhere", out,
                           o == 1 ? "is" : "is inside", what, in);
    }
    free(part);
    return st;
}

enum llm_status llm_quantize(const struct llm_quantize_params *params, struct llm_quantize_stats *stats, char *err,
                             size_t err_size) {
    struct llm__err e = {{0}, LLM_OK};
    struct llm_quantize_stats st_ = {0};
    struct llm__gguf g;
    memset(&g, 0, sizeof(g));
    enum llm_status st = LLM_OK;
    // round-to-nearest to a GGUF file, unless a checkpoint (--format hf) is asked for
    const bool rtn = params && (!params->method || !strcmp(params->method, "rtn")) &&
                     !(params->format && !strcmp(params->format, "hf"));
    const struct llm__ftype *ft = params && rtn ? llm__ftype_by_name(params->type) : NULL;
    if (!params || !params->input || !params->output)
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "quantize: an input model and an output file are needed");
    else if (rtn && !ft)
        st = llm__fail(&e, LLM_ERR_INVALID_ARG, "quantize: '%s' is not a file type (q4_0, q4_1, q5_0, q5_1, q8_0, "
                       "iq4_nl, iq4_xs, q2_K, q3_K_S, q3_K_M, q3_K_L, q4_K_S, q4_K_M, q5_K_S, q5_K_M, q6_K, mxfp4_moe, "
                       "f16, bf16, f32)",
                       params->type ? params->type : "(none)");
    else if ((st = llm__quantize_output_ok(params->output, params->input, "input", &e)) == LLM_OK &&
             (st = llm__quantize_output_ok(params->output, params->calib_path, "calibration text", &e)) == LLM_OK) {
        if (!rtn) st = llm__quantize_calibrated(params, &st_, &e);
        else if (!(st = llm__model_open(&g, params->input, false, &e)))
            st = llm__quantize_gguf(&g, params, ft, NULL, &st_, &e);
    }
    llm__gguf_close(&g);
    if (stats) *stats = st_;
    if (st && err && err_size) snprintf(err, err_size, "%s", e.msg[0] ? e.msg : llm_status_str(st));
    return st;
}
