/*
 * Address- and undefined-behaviour-sanitised stress of the C helpers (triage/_userblank.c,
 * triage/_lineindex.c) on random buffers of marker fragments, each in a heap block of its exact
 * size so that any read past the end trips ASAN. On demand, not in CI (it links libpython):
 *
 *   PY=$(python3 -c 'import sysconfig as s; print(s.get_paths()["include"])')
 *   LIB=$(python3 -c 'import sysconfig as s; print(s.get_config_var("LIBDIR"))')
 *   VER=$(python3 -c 'import sysconfig as s; print(s.get_config_var("LDVERSION"))')
 *   gcc -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -I"$PY" \
 *       fuzz/asan_c_helpers.c -o /tmp/asan_c_helpers -L"$LIB" -lpython"$VER" -Wl,-rpath,"$LIB"
 *   /tmp/asan_c_helpers 300000
 *
 * Checks: blanking writes only spaces and never over a line break; the line index's total is
 * the count of LFs plus lone CRs, whatever vector path the CPU takes.
 */
#define methods userblank_methods
#define module userblank_module
#include "../triage/_userblank.c"
#undef methods
#undef module
#define methods lineindex_methods
#define module lineindex_module
#include "../triage/_lineindex.c"

#include <stdio.h>
#include <stdlib.h>

static const char *fragments[] = {
    "Received request ", "Request ", " details: ", "prompt: ", "output: ", "Generated response ",
    " (streaming delta)", " (streaming complete)", ": ", "'", "\"", "\\", "id-1", "x", " ", "\n",
    "\r", "Receive: obj=", "Receive OpenAI: obj=", "Finish: obj=", "\xc3", "obj=", "t: '", "t: \"",
};

static Py_ssize_t breaks_slowly(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += s[i] == '\n' || (s[i] == '\r' && (i + 1 >= n || s[i + 1] != '\n'));
    return count;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100000, blanked = 0;
    choose_search();
#if defined(HAVE_X86_VECTORS)
    count_lf = __builtin_cpu_supports("avx2") ? count_lf_avx2 : count_lf_sse2;
#endif
    srand(1);
    for (long round = 0; round < rounds; round++) {
        size_t cap = 1 + (size_t)rand() % 400, n = 0;
        unsigned char *soup = malloc(cap);
        while (n < cap) {
            const char *f = fragments[(size_t)rand() % (sizeof fragments / sizeof *fragments)];
            size_t k = strlen(f) < cap - n ? strlen(f) : cap - n;
            memcpy(soup + n, f, k);
            n += k;
        }
        n = (size_t)rand() % (cap + 1);
        unsigned char *exact = malloc(n ? n : 1), *copy = malloc(n ? n : 1);
        memcpy(exact, soup, n);
        Py_ssize_t done = blank(exact, (Py_ssize_t)n, copy);
        blanked += done;
        for (size_t i = 0; done && i < n; i++)
            if (copy[i] != exact[i] && (copy[i] != ' ' || exact[i] == '\n' || exact[i] == '\r')) {
                fprintf(stderr, "round %ld: bad write at %zu\n", round, i);
                return 1;
            }
        Py_ssize_t total = count_lf(exact, (Py_ssize_t)n) +
                           count_lone_cr(exact, 0, (Py_ssize_t)n, (Py_ssize_t)n);
        if (total != breaks_slowly(exact, (Py_ssize_t)n)) {
            fprintf(stderr, "round %ld: %zd breaks counted, %zd there\n", round, total,
                    breaks_slowly(exact, (Py_ssize_t)n));
            return 1;
        }
        free(soup);
        free(exact);
        free(copy);
    }
    printf("%ld buffers, %ld bytes blanked: clean\n", rounds, blanked);
    return 0;
}
