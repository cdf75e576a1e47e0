// membw: memory read bandwidth with N threads, the roofline of decode speed (a decode step
// reads every weight once). Each thread sums its own slice of a large buffer that it touched
// first; the best of several repetitions is reported, in GB/s.
//   cc -O3 -march=native -pthread bench/membw.c -o build/membw && build/membw 2 1024 5
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slice { uint64_t *p; size_t n; uint64_t sum; pthread_barrier_t *start, *stop; int reps; double t0[64], t1[64]; };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void *run(void *arg) {
    struct slice *s = arg;
    // First touch by this thread (pages near it), with distinct values: pages of identical
    // content can be merged by the host of a virtual machine, and reads of them then hit in cache.
    uint64_t x = (uint64_t)(uintptr_t)s->p | 1;
    for (size_t i = 0; i < s->n; i++) s->p[i] = (x = x * 6364136223846793005ull + 1442695040888963407ull) >> 7;
    for (int r = 0; r < s->reps; r++) {
        pthread_barrier_wait(s->start);
        s->t0[r] = now();
        uint64_t a[8] = {0};
        for (size_t i = 0; i + 8 <= s->n; i += 8)
            for (int k = 0; k < 8; k++) a[k] += s->p[i + k];
        for (int k = 0; k < 8; k++) s->sum += a[k];
        s->t1[r] = now();
        pthread_barrier_wait(s->stop);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 3 ? atoi(argv[3]) : 5;
    if (reps > 64) reps = 64;
    size_t mib = argc > 2 ? (size_t)atoll(argv[2]) : 1024;
    if (nth < 1 || nth > 256 || reps < 1 || mib < 1) { fprintf(stderr, "usage: membw THREADS MIB REPS\n"); return 2; }
    size_t n = mib * (1u << 20) / sizeof(uint64_t) / (size_t)nth;
    pthread_barrier_t start, stop;
    pthread_barrier_init(&start, NULL, (unsigned)nth + 1);
    pthread_barrier_init(&stop, NULL, (unsigned)nth + 1);
    struct slice *s = calloc((size_t)nth, sizeof(*s));
    pthread_t *th = calloc((size_t)nth, sizeof(*th));
    for (int i = 0; i < nth; i++) {
        s[i] = (struct slice){.p = malloc(n * sizeof(uint64_t)), .n = n, .start = &start, .stop = &stop, .reps = reps};
        if (!s[i].p) { fprintf(stderr, "membw: out of memory\n"); return 1; }
        pthread_create(&th[i], NULL, run, &s[i]);
    }
    // The threads time themselves (this one only waits: timing from here would count late when
    // it is scheduled after them): bytes of all slices / (last end - first start).
    double best = 0;
    for (int r = 0; r < reps; r++) {
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&stop);
        double t0 = s[0].t0[r], t1 = s[0].t1[r];
        for (int i = 1; i < nth; i++) {
            if (s[i].t0[r] < t0) t0 = s[i].t0[r];
            if (s[i].t1[r] > t1) t1 = s[i].t1[r];
        }
        double gbs = (double)n * sizeof(uint64_t) * nth / (t1 - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    uint64_t sum = 0;
    for (int i = 0; i < nth; i++) { pthread_join(th[i], NULL); sum += s[i].sum; free(s[i].p); }
    printf("%.2f\n", best);
    fprintf(stderr, "membw: %d threads, %zu MiB, best of %d: %.2f GB/s read (checksum %llu)\n", nth, mib, reps, best,
            (unsigned long long)(sum & 0xFF));
    return 0;
}
