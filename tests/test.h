// Shared test helpers. Each test program includes this after "../llm.c" (or, testing the
// interface only, after "llm.h"), calls EXPECT for every check and ends main() with
// `return test_summary("name");`, which prints "name: N passed, N failed" (tests/run.sh adds
// the lines up). C11 and C++11 alike (tests/test_cpp.cpp).
#ifndef LLM_TEST_H
#define LLM_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_;

#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (cond) {                                                              \
            test_passed_++;                                                      \
        } else {                                                                 \
            test_failed_++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

// TEST_SANITIZED: built with AddressSanitizer (make test SAN=1). The longest real-model checks
// then run on a part of their inputs, said in a SKIP line; the build without sanitizers (make
// test) runs them all.
#if defined(__SANITIZE_ADDRESS__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif

// Prints a skipped check visibly (counted in neither column).
#define SKIP(...)                                                                \
    do {                                                                         \
        fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                     \
        fprintf(stderr, __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                     \
    } while (0)

// The folder of the vocabulary files that tests/fixtures.sh fetches: $LLM_VOCAB_DIR (make test
// sets it), else vocab/ in that script's cache:
// ${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/vocab.
static inline const char *test_vocab_dir(void) {
    static char buf[1024];
    const char *dir = getenv("LLM_VOCAB_DIR"), *fx = getenv("LLM_FIXTURES"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir && *dir) return dir;
    if (fx && *fx) snprintf(buf, sizeof buf, "%s/vocab", fx);
    else if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/llm.c-tests/vocab", xdg);
    else snprintf(buf, sizeof buf, "%s/.cache/llm.c-tests/vocab", home && *home ? home : ".");
    return buf;
}

static int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

// A small deterministic RNG for test data (splitmix64).
static inline unsigned long long test_rng_next(unsigned long long *s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double test_rng_uniform(unsigned long long *s) {   // [0, 1)
    return (double)(test_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double test_rng_normal(unsigned long long *s) {
    double u1 = test_rng_uniform(s), u2 = test_rng_uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#endif
