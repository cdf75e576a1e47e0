// models.c — the cache of llm pull by name: llm list (each model's name, size, architecture, type
// and path), llm rm NAME, and -m NAME.
//
// The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c/hf/OWNER/NAME/FILE (see pull.c). A model in it
// is a file (FILE.part, a download in progress, is none), or the parts of a split GGUF model
// (FILE-00001-of-00003.gguf, ...) together. Its name is its path in the cache less .gguf and less
// the part's -00001-of-0000N: unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M. -m and rm take
// the name, or the file's name, or any piece of the name that no other model's has, in any case
// (cache_find): -m gemma-3-270m-it-q4 or -m smollm2 when one model has it.
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CACHE_MAX_DEPTH = 32 };   // folders deeper in the cache are not looked into

// "a/b" (malloc'd).
static char *path_join(const char *a, const char *b) {
    struct cli_strbuf s = {0};
    cli_sb_printf(&s, "%s/%s", a, b);
    return s.p;
}

static char *str_dup(const char *s) {
    char *p = strdup(s);
    if (!p) cli_die("out of memory");
    return p;
}

// --- the files of a folder ---

struct strv { char **v; int n, cap; };

static void strv_push(struct strv *s, char *p) {
    if (s->n == s->cap) {
        s->cap = CLI_MAX(2 * s->cap, 16);
        char **v = realloc(s->v, (size_t)s->cap * sizeof(char *));
        if (!v) cli_die("out of memory");
        s->v = v;
    }
    s->v[s->n++] = p;
}

void cli_strv_free(char **v, int n) {
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

// Adds the files under dir/rel (rel "": dir itself) to out, as paths relative to dir.
static void cache_walk(const char *dir, const char *rel, int depth, struct strv *out, int *n_partial) {
    char *path = rel[0] ? path_join(dir, rel) : str_dup(dir);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *r = rel[0] ? path_join(rel, e->d_name) : str_dup(e->d_name), *full = path_join(path, e->d_name);
        size_t n = strlen(e->d_name);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) {   // a folder, not a link to one
            if (depth < CACHE_MAX_DEPTH) cache_walk(dir, r, depth + 1, out, n_partial);
            free(r);
        } else if (n > 5 && !strcmp(e->d_name + n - 5, ".part")) {
            if (n_partial) ++*n_partial;
            free(r);
        } else if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {   // a file, or a link to one
            strv_push(out, r);
        } else {
            free(r);
        }
        free(full);
    }
    if (d) closedir(d);
    free(path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **cli_cache_files(const char *dir, int *n, int *n_partial) {
    struct strv out = {0};
    if (n_partial) *n_partial = 0;
    cache_walk(dir, "", 0, &out, n_partial);
    if (out.n) qsort(out.v, (size_t)out.n, sizeof(char *), cmp_str);
    *n = out.n;
    return out.v;
}

// --- the models of the cache ---

struct cache_model {
    char *name;          // the path in the cache less .gguf and less a part's -0000i-of-0000N
    char **parts;        // the files present, relative to the root: [i] part i + 1 (NULL: missing)
    int count, n_parts;  // the parts of the model (1: a file) and those present
    long long size;      // bytes of those present
};
struct cache {
    char *root;          // NULL: neither XDG_CACHE_HOME nor HOME is set
    struct cache_model *m;
    int n, n_partial;    // models, downloads in progress (.part)
};

// The first file of m present (a complete model: its first part).
static const char *cache_file(const struct cache_model *m) {
    for (int i = 0; i < m->count; i++)
        if (m->parts[i]) return m->parts[i];
    return "";
}

static int cmp_model(const void *a, const void *b) {
    const struct cache_model *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->count - y->count;
}

// Adds file f (relative to the root; size bytes) to its model in c, a new one unless it is a part
// of a split model already there.
static void cache_add(struct cache *c, const char *f, long long size) {
    size_t prefix, len = strlen(f);
    int index = 1, count = 1;
    bool split = cli_gguf_split(f, &prefix, &index, &count);
    if (!split) prefix = len > 5 && !strcasecmp(f + len - 5, ".gguf") ? len - 5 : len;
    struct cache_model *m = NULL;
    for (int i = 0; split && i < c->n && !m; i++)
        if (c->m[i].count == count && !c->m[i].parts[index - 1] && strlen(c->m[i].name) == prefix &&
            !strncmp(c->m[i].name, f, prefix))
            m = &c->m[i];
    if (!m) {
        m = &c->m[c->n++];
        if (!(m->name = strndup(f, prefix)) || !(m->parts = calloc((size_t)count, sizeof(char *))))
            cli_die("out of memory");
        m->count = count;
    }
    m->parts[index - 1] = str_dup(f);
    m->n_parts++;
    m->size += size;
}

// The models of the cache, by name.
static void cache_scan(struct cache *c) {
    memset(c, 0, sizeof(*c));
    if (!(c->root = cli_cache_root())) return;
    int n;
    char **files = cli_cache_files(c->root, &n, &c->n_partial);
    if (!(c->m = calloc((size_t)n + 1, sizeof(*c->m)))) cli_die("out of memory");
    for (int i = 0; i < n; i++) {
        char *full = path_join(c->root, files[i]);
        struct stat st;
        if (stat(full, &st) == 0) cache_add(c, files[i], (long long)st.st_size);
        free(full);
    }
    cli_strv_free(files, n);
    if (c->n) qsort(c->m, (size_t)c->n, sizeof(*c->m), cmp_model);
}

static void cache_free(struct cache *c) {
    for (int i = 0; i < c->n; i++) {
        cli_strv_free(c->m[i].parts, c->m[i].count);
        free(c->m[i].name);
    }
    free(c->m);
    free(c->root);
}

// Whether s holds t, in any case.
static bool has_nocase(const char *s, const char *t) {
    size_t n = strlen(t);
    for (; *s; s++)
        if (!strncasecmp(s, t, n)) return true;
    return n == 0;
}

static const char *base_name(const char *s) {
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

// Whether arg names m by rule 0 (its name or its file's path in the cache), 1 (the same in any
// case, or only the last part of either: the file's name) or 2 (a piece of either, in any case).
static bool cache_match(const struct cache_model *m, const char *arg, int rule) {
    const char *file = cache_file(m);
    if (rule == 0) return !strcmp(m->name, arg) || !strcmp(file, arg);
    if (rule == 1)
        return !strcasecmp(m->name, arg) || !strcasecmp(file, arg) || !strcasecmp(base_name(m->name), arg) ||
               !strcasecmp(base_name(file), arg);
    return has_nocase(m->name, arg) || has_nocase(file, arg);
}

// The models arg names: those of the first rule of cache_match that some model meets (a model's
// whole name wins over pieces of others'); their indexes in out (room for c->n). A path in the
// cache counts as its path relative to the root.
static int cache_find(const struct cache *c, const char *arg, int *out) {
    size_t r = c->root ? strlen(c->root) : 0;
    if (r && !strncmp(arg, c->root, r) && arg[r] == '/') arg += r + 1;
    if (!*arg) return 0;
    for (int rule = 0; rule < 3; rule++) {
        int k = 0;
        for (int i = 0; i < c->n; i++)
            if (cache_match(&c->m[i], arg, rule)) out[k++] = i;
        if (k) return k;
    }
    return 0;
}

// The model of c that arg names, or NULL when none does; cli_die listing them when several do.
static struct cache_model *cache_resolve(const struct cache *c, const char *arg) {
    int *hits = malloc(((size_t)c->n + 1) * sizeof(int));
    if (!hits) cli_die("out of memory");
    int k = cache_find(c, arg, hits);
    if (k > 1) {
        struct cli_strbuf b = {0};
        cli_sb_printf(&b, "'%s' names %d models of the cache (%s); give more of the name:", arg, k, c->root);
        for (int i = 0; i < k; i++) cli_sb_printf(&b, "\n  %s", c->m[hits[i]].name);
        cli_die("%s", b.p);
    }
    struct cache_model *m = k == 1 ? &c->m[hits[0]] : NULL;
    free(hits);
    return m;
}

char *cli_model_path(const char *arg) {
    if (!arg || !*arg || arg[0] == '/' || !strncmp(arg, "./", 2) || !strncmp(arg, "../", 3)) return NULL;
    struct stat st;
    if (stat(arg, &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return NULL;   // a path, as it is
    if (!strncmp(arg, "hf://", 5)) return cli_hf_model(arg);
    struct cache c;
    cache_scan(&c);
    if (!c.root) cli_die("'%s' is no file (and there is no cache of models: neither XDG_CACHE_HOME nor HOME is set)",
                         arg);
    struct cache_model *m = cache_resolve(&c, arg);
    if (!m)
        cli_die("'%s' is neither a file nor a model in the cache (%s): llm list shows the cached models, llm pull "
                "REPO:QUANT downloads one (e.g. llm pull unsloth/gemma-3-270m-it-GGUF:Q4_K_M)", arg, c.root);
    if (m->n_parts < m->count)
        cli_die("%s is a model split into %d parts, and %d of them are in the cache: pull it again for the others, "
                "or llm rm %s", m->name, m->count, m->n_parts, m->name);
    char *path = path_join(c.root, cache_file(m));
    cache_free(&c);
    return path;
}

// --- llm list ---

// llama.cpp's file types (general.file_type) by number.
static const char *const ftype_names[] = {
    [0] = "F32",      [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",     [7] = "Q8_0",      [8] = "Q5_0",
    [9] = "Q5_1",     [10] = "Q2_K",    [11] = "Q3_K_S",  [12] = "Q3_K_M",  [13] = "Q3_K_L",   [14] = "Q4_K_S",
    [15] = "Q4_K_M",  [16] = "Q5_K_S",  [17] = "Q5_K_M",  [18] = "Q6_K",    [19] = "IQ2_XXS",  [20] = "IQ2_XS",
    [21] = "Q2_K_S",  [22] = "IQ3_XS",  [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",   [26] = "IQ3_S",
    [27] = "IQ3_M",   [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",  [31] = "IQ1_M",    [32] = "BF16",
    [36] = "TQ1_0",   [37] = "TQ2_0",   [38] = "MXFP4_MOE",
};

// What llm list says of a model's file: its architecture and type from the GGUF header, or that
// it is not a GGUF file that can be read.
struct model_meta { char *arch, *type; bool gguf; };

// The type: the file type its metadata names (general.file_type), else the type of the most bytes
// of its tensors, in capitals ("-": no tensor).
static char *model_type(llm_engine *E, const struct llm_model_info *mi) {
    for (int64_t i = 0; i < mi->n_metadata; i++) {
        struct llm_meta kv;
        if (llm_model_meta(E, i, &kv) != LLM_OK || strcmp(kv.key, "general.file_type") != 0) continue;
        uint64_t t = kv.type == LLM_META_UINT ? kv.u : kv.type == LLM_META_INT && kv.i >= 0 ? (uint64_t)kv.i : ~0ull;
        if (t < CLI_ARRAY_LEN(ftype_names) && ftype_names[t]) return str_dup(ftype_names[t]);
    }
    size_t bytes[256] = {0}, best = 0;
    char name[32] = "-";
    for (int64_t i = 0; i < mi->n_tensors; i++) {
        struct llm_tensor_info t;
        if (llm_model_tensor(E, i, &t) != LLM_OK || t.type < 0 || t.type >= 256) continue;
        bytes[t.type] += t.bytes;
        if (bytes[t.type] > best || name[0] == '-') {
            best = bytes[t.type];
            snprintf(name, sizeof(name), "%s", t.type_name);
        }
    }
    for (char *p = name; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    return str_dup(name);
}

static void model_meta(const char *path, struct model_meta *mm) {
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.load = LLM_LOAD_METADATA;   // the header only: any well-formed GGUF file, no weights read
    char err[256];
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    mm->gguf = E != NULL;
    if (!E) {
        mm->arch = str_dup("-");
        mm->type = str_dup("not GGUF");
        return;
    }
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    mm->arch = str_dup(mi.arch[0] ? mi.arch : "-");
    mm->type = model_type(E, &mi);
    llm_engine_free(E);
}

// s escaped for a terminal (cli_print_escaped), malloc'd.
static char *escaped(const char *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) cli_die("out of memory");
    cli_print_escaped(f, s, strlen(s), 0);
    if (fclose(f) != 0 || !buf) cli_die("out of memory");
    return buf;
}

static void list_json(const struct cache *c, const struct model_meta *mm) {
    json_t *a = cli_jcheck(json_array());
    for (int i = 0; i < c->n; i++) {
        const struct cache_model *m = &c->m[i];
        json_t *o = cli_jcheck(json_object());
        char *path = path_join(c->root, cache_file(m));
        cli_jset(o, "name", cli_json_cstr(m->name));
        cli_jset(o, "size", cli_json_int(m->size));
        cli_jset(o, "architecture", mm[i].gguf ? cli_json_cstr(mm[i].arch) : cli_jcheck(json_null()));
        cli_jset(o, "type", mm[i].gguf ? cli_json_cstr(mm[i].type) : cli_jcheck(json_null()));
        cli_jset(o, "gguf", cli_jcheck(json_boolean(mm[i].gguf)));
        cli_jset(o, "path", cli_json_cstr(path));
        cli_jset(o, "parts", cli_json_int(m->count));
        cli_jset(o, "complete", cli_jcheck(json_boolean(m->n_parts == m->count)));
        cli_jpush(a, o);
        free(path);
    }
    cli_json_print(stdout, a);
}

// The table: NAME SIZE ARCH TYPE PATH, columns as wide as their longest entry.
static void list_table(const struct cache *c, const struct model_meta *mm) {
    enum { COLS = 5 };
    char **cell = calloc((size_t)(c->n + 1) * COLS, sizeof(char *));
    if (!cell) cli_die("out of memory");
    size_t w[COLS] = {0};
    const char *head[COLS] = {"NAME", "SIZE", "ARCH", "TYPE", "PATH"};
    for (int j = 0; j < COLS; j++) cell[j] = str_dup(head[j]);
    for (int i = 0; i < c->n; i++) {
        char **row = cell + (size_t)(i + 1) * COLS, sz[32], *path = path_join(c->root, cache_file(&c->m[i]));
        row[0] = escaped(c->m[i].name);
        row[1] = str_dup(cli_human_size((double)c->m[i].size, sz, sizeof(sz)));
        row[2] = escaped(mm[i].arch);
        row[3] = escaped(mm[i].type);
        row[4] = escaped(path);
        free(path);
    }
    for (int i = 0; i <= c->n; i++)
        for (int j = 0; j < COLS; j++) w[j] = CLI_MAX(w[j], strlen(cell[(size_t)i * COLS + j]));
    for (int i = 0; i <= c->n; i++) {
        char **row = cell + (size_t)i * COLS;
        printf("%-*s  %*s  %-*s  %-*s  %s", (int)w[0], row[0], (int)w[1], row[1], (int)w[2], row[2], (int)w[3], row[3],
               row[4]);
        const struct cache_model *m = i ? &c->m[i - 1] : NULL;
        if (m && m->n_parts < m->count) printf("  (incomplete: %d of %d parts)", m->n_parts, m->count);
        else if (m && m->count > 1) printf("  (the first of %d parts)", m->count);
        putchar('\n');
    }
    cli_strv_free(cell, (c->n + 1) * COLS);
}

int cli_cmd_list(int argc, char **argv) {
    bool json = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { cli_print_command_help("list"); return 0; }
        if (strcmp(argv[i], "--json") != 0) cli_die("list: unknown argument '%s' (usage: llm list [--json])", argv[i]);
        json = true;
    }
    struct cache c;
    cache_scan(&c);
    if (!c.root) cli_die("neither XDG_CACHE_HOME nor HOME is set: there is no cache of models");
    struct model_meta *mm = calloc((size_t)c.n + 1, sizeof(*mm));
    if (!mm) cli_die("out of memory");
    for (int i = 0; i < c.n; i++) {
        char *path = path_join(c.root, cache_file(&c.m[i]));
        model_meta(path, &mm[i]);
        free(path);
    }
    if (json) {
        list_json(&c, mm);
    } else if (c.n == 0) {
        char *root = escaped(c.root);
        printf("no models in the cache (%s): download one with llm pull REPO:QUANT, e.g.\n"
               "  llm pull unsloth/gemma-3-270m-it-GGUF:Q4_K_M\n", root);
        free(root);
    } else {
        list_table(&c, mm);
    }
    if (c.n_partial && !json)
        printf("%d download%s not finished (a FILE.part in the cache; llm pull again resumes it)\n", c.n_partial,
               c.n_partial > 1 ? "s" : "");
    for (int i = 0; i < c.n; i++) free(mm[i].arch), free(mm[i].type);
    free(mm);
    cache_free(&c);
    return 0;
}

// --- llm rm ---

// Removes the file root/rel, going down to it folder by folder without following symbolic links
// (a folder of the cache that became a link since the scan leads nowhere outside it), then the
// folders above it left empty, innermost first; never the root. Says what it removed; false
// (and why, on stderr) when it could not remove the file.
static bool cache_unlink(const char *root, const char *rel, long long size) {
    char *r = str_dup(rel), *comp[CACHE_MAX_DEPTH + 2];
    int k = 0, fd[CACHE_MAX_DEPTH + 2];
    for (char *p = r; p && k < CACHE_MAX_DEPTH + 2; k++) {
        comp[k] = p;
        if ((p = strchr(p, '/'))) *p++ = 0;
    }
    int opened = 0;
    fd[opened++] = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (; fd[opened - 1] >= 0 && opened < k; opened++)
        fd[opened] = openat(fd[opened - 1], comp[opened - 1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char *path = path_join(root, rel), *shown = escaped(path), sz[32];
    bool ok = fd[opened - 1] >= 0 && unlinkat(fd[opened - 1], comp[k - 1], 0) == 0;
    if (ok) printf("removed %s (%s)\n", shown, cli_human_size((double)size, sz, sizeof(sz)));
    else fprintf(stderr, "llm: cannot remove %s: %s\n", shown, strerror(errno));
    for (int i = k - 2; ok && i >= 0 && unlinkat(fd[i], comp[i], AT_REMOVEDIR) == 0; i--) {
        struct cli_strbuf dir = {0};
        cli_sb_put(&dir, root, strlen(root));
        for (int j = 0; j <= i; j++) cli_sb_printf(&dir, "/%s", comp[j]);
        char *d = escaped(dir.p);
        printf("removed the empty folder %s\n", d);
        free(d);
        free(dir.p);
    }
    for (int i = 0; i < opened; i++)
        if (fd[i] >= 0) close(fd[i]);
    free(shown);
    free(path);
    free(r);
    return ok;
}

int cli_cmd_rm(int argc, char **argv) {
    if (argc == 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))) {
        cli_print_command_help("rm");
        return 0;
    }
    if (argc < 3) cli_die("usage: llm rm NAME... (the names of llm list, or pieces of them that one model has)");
    struct cache c;
    cache_scan(&c);
    if (!c.root) cli_die("neither XDG_CACHE_HOME nor HOME is set: there is no cache of models");
    // every name resolved before anything goes
    bool *del = calloc((size_t)c.n + 1, sizeof(bool));
    if (!del) cli_die("out of memory");
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-') cli_die("rm: unknown option '%s' (usage: llm rm NAME...)", argv[i]);
        struct cache_model *m = cache_resolve(&c, argv[i]);
        if (!m)
            cli_die("no model in the cache (%s) is named '%s' or has it in its name (llm list shows them)", c.root,
                    argv[i]);
        del[m - c.m] = true;
    }
    bool ok = true;
    for (int i = 0; i < c.n; i++)
        for (int j = 0; del[i] && j < c.m[i].count; j++) {
            if (!c.m[i].parts[j]) continue;
            char *full = path_join(c.root, c.m[i].parts[j]);
            struct stat st;
            long long size = stat(full, &st) == 0 ? (long long)st.st_size : 0;
            free(full);
            ok &= cache_unlink(c.root, c.m[i].parts[j], size);
        }
    free(del);
    cache_free(&c);
    return ok ? 0 : 1;
}
