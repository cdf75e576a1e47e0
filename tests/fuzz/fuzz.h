// fuzz.h — what the fuzz harnesses (tests/fuzz/fuzz_*.c) share. Each harness defines FUZZ_NAME
// ("gguf", ...), includes what it tests, then this file, then defines LLVMFuzzerTestOneInput.
// Two builds:
//   - make fuzz: clang -fsanitize=fuzzer,address,undefined -DLLM_FUZZ_LIBFUZZER; libFuzzer's
//     main mutates inputs, a failed FUZZ_CHECK or a sanitizer report is a crash it saves;
//   - make test (any compiler, with or without SAN=1): the main below replays files, the files
//     given on the command line or, without arguments, every file of the committed seed corpus
//     tests/fuzz/corpus/NAME/ and of the crashes found so far, tests/fuzz/regress/NAME/.
//     It prints "fuzz_NAME: N passed, 0 failed" (N: files replayed; tests/run.sh adds it up).
// Both run from the repository root (the harnesses find build/models and the vocabularies as
// the tests do: LLM_TEST_MODELS, LLM_VOCAB_DIR).
#ifndef LLM_FUZZ_H
#define LLM_FUZZ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// The file being replayed (replay builds), for messages.
static const char *fuzz_current_file;

// An invariant of the harness: when it does not hold, the message and abort() (a crash for
// libFuzzer, which keeps the input; a failed replay for make test, naming the file).
#define FUZZ_CHECK(cond, ...)                                                                 \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fuzz_%s: %s%s%s:%d: check failed: %s: ", FUZZ_NAME,              \
                    fuzz_current_file ? fuzz_current_file : "", fuzz_current_file ? ": " : "", \
                    __FILE__, __LINE__, #cond);                                               \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF): the
// offset of the first byte of s[0..n) that is not part of a well-formed character, n if none.
static inline size_t fuzz_utf8_check(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (len == 0 || i + len > n) return i;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] >= 0x90))
            return i;
        i += len;
    }
    return n;
}

// The first occurrence of needle[0..m) in s[0..n), or NULL (m > 0).
static inline const char *fuzz_memmem(const char *s, size_t n, const char *needle, size_t m) {
    for (size_t i = 0; m && i + m <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, m)) return s + i;
    return NULL;
}

// The folder of the test models (make models): $LLM_TEST_MODELS, else build/models.
static inline const char *fuzz_models_dir(void) {
    const char *d = getenv("LLM_TEST_MODELS");
    return d && *d ? d : "build/models";
}

// The folder of the vocabulary files tests/fixtures.sh fetches (as tests/test.h finds it).
static inline void fuzz_vocab_path(const char *file, char *buf, size_t size) {
    const char *dir = getenv("LLM_VOCAB_DIR"), *fx = getenv("LLM_FIXTURES"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir && *dir) snprintf(buf, size, "%s/%s", dir, file);
    else if (fx && *fx) snprintf(buf, size, "%s/vocab/%s", fx, file);
    else if (xdg && *xdg) snprintf(buf, size, "%s/llm.c-tests/vocab/%s", xdg, file);
    else snprintf(buf, size, "%s/.cache/llm.c-tests/vocab/%s", home && *home ? home : ".", file);
}

// Dies with a message: the harness cannot run at all (a missing model or vocabulary file).
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2), noreturn))
#endif
static inline void fuzz_setup_failed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_%s: ", FUZZ_NAME);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

#ifndef LLM_FUZZ_LIBFUZZER
#include <dirent.h>
#include <sys/stat.h>

// Replays one file; returns 1 (a file that cannot be read fails the run).
static int fuzz_replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fuzz_setup_failed("cannot open %s", path);
    size_t cap = 4096, n = 0;
    uint8_t *data = malloc(cap);
    for (size_t k; data && (k = fread(data + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            uint8_t *p = realloc(data, cap *= 2);
            if (!p) free(data);
            data = p;
        }
    }
    if (!data || ferror(f)) fuzz_setup_failed("cannot read %s", path);
    fclose(f);
    // an exact-size copy, so that ASan sees a read past the input as libFuzzer's build does
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) fuzz_setup_failed("out of memory");
    if (n) memcpy(exact, data, n);
    free(data);
    fuzz_current_file = path;
    LLVMFuzzerTestOneInput(exact, n);
    fuzz_current_file = NULL;
    free(exact);
    return 1;
}

static int fuzz_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Replays the files of a folder in name order (none when it does not exist); returns their number.
static int fuzz_replay_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap && !(names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names))))
            fuzz_setup_failed("out of memory");
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len))) fuzz_setup_failed("out of memory");
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof(*names), fuzz_cmp_str);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) count += fuzz_replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv) {
    int count = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            struct stat st;
            if (stat(argv[i], &st) != 0) fuzz_setup_failed("cannot open %s", argv[i]);
            count += S_ISDIR(st.st_mode) ? fuzz_replay_dir(argv[i]) : fuzz_replay_file(argv[i]);
        }
    } else {
        count += fuzz_replay_dir("tests/fuzz/corpus/" FUZZ_NAME);
        count += fuzz_replay_dir("tests/fuzz/regress/" FUZZ_NAME);
    }
    // every replayed input held every invariant (a failure aborted)
    printf("fuzz_%s: %d passed, 0 failed\n", FUZZ_NAME, count);
    return count > 0 ? 0 : 1;
}
#endif
#endif
