/*
 * triage._userblank: blank logged user text out of a buffer before the pattern scan.
 *
 * vLLM with request logging writes every prompt and answer into the server log
 * (`Received request <id>: prompt: '...'`, `Request <id> details: prompt: '...'`,
 * `Generated response <id>: output: '...'`), SGLang its request dumps
 * (`Receive: obj=...`, `Finish: obj=...`). triage never confirms a pattern on those texts
 * (triage/usertext.py elides them from every candidate line), yet they are up to half of a busy
 * server's log and the most expensive bytes for the multi-pattern scanner (everyday words hit
 * its literal tables). This module copies a segment with the bodies of those texts overwritten
 * by spaces, so the scanner skips them at full speed; offsets and line breaks do not move.
 *
 * The rules are the ones of triage/usertext.py, applied left to right on each line: a vLLM
 * marker followed by a quote blanks the Python string literal after it (up to its closing quote,
 * which is kept, or the end of the line); an SGLang marker blanks the rest of its line. Where
 * this code cannot tell (a request id that is not printable ASCII or longer than MAX_ID), it
 * blanks nothing: blanking less only costs speed, never a match.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>


/* request ids are short (`chatcmpl-<hex>`, `cmpl-<uuid>-0`); a longer "id" is not trusted */
#define MAX_ID 256

static int is_id_byte(unsigned char c) { return c > 0x20 && c < 0x7f; }

static int is_word_byte(unsigned char c)
{
    /* bytes >= 0x80 may be part of a Unicode letter, which is a word character to Python */
    return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* Does s[lo:end] end with lit? */
static int ends_with(const unsigned char *s, Py_ssize_t lo, Py_ssize_t end, const char *lit)
{
    Py_ssize_t k = (Py_ssize_t)strlen(lit);
    return end - lo >= k && memcmp(s + end - k, lit, (size_t)k) == 0;
}

/* Start of the request id that ends at `end` (a run of printable ASCII), or -1. */
static Py_ssize_t id_start(const unsigned char *s, Py_ssize_t lo, Py_ssize_t end)
{
    Py_ssize_t q = end;
    while (q > lo && end - q < MAX_ID && is_id_byte(s[q - 1]))
        q--;
    if (q == end || (q > lo && is_id_byte(s[q - 1])))
        return -1;
    return q;
}

/*
 * Start of the vLLM marker that ends just before the quote at `quote` (s[quote - 8:quote] is
 * "prompt: " or "output: "), or -1. The marker regexes of triage/usertext.py, checked backwards:
 *   Received request <id>: prompt: | Request <id> details: prompt:
 *   Generated response <id>[ (streaming delta)| (streaming complete)]: output:
 * `lo` bounds the look back.
 */
static Py_ssize_t vllm_marker_before(const unsigned char *s, Py_ssize_t lo, Py_ssize_t quote)
{
    Py_ssize_t word = quote - 8, q;
    if (word < lo)
        return -1;
    if (memcmp(s + word, "prompt: ", 8) == 0) {
        if (ends_with(s, lo, word, ": ")) {
            q = id_start(s, lo, word - 2);
            if (q >= 0 && ends_with(s, lo, q, "Received request "))
                return q - 17;
        }
        if (ends_with(s, lo, word, " details: ")) {
            q = id_start(s, lo, word - 10);
            if (q >= 0 && ends_with(s, lo, q, "Request "))
                return q - 8;
        }
        return -1;
    }
    if (memcmp(s + word, "output: ", 8) == 0 && ends_with(s, lo, word, ": ")) {
        Py_ssize_t end = word - 2;
        /* the id is greedy in the regex: try the plain form first, then the streaming ones */
        q = id_start(s, lo, end);
        if (q >= 0 && ends_with(s, lo, q, "Generated response "))
            return q - 19;
        if (ends_with(s, lo, end, " (streaming delta)"))
            end -= 18;
        else if (ends_with(s, lo, end, " (streaming complete)"))
            end -= 21;
        else
            return -1;
        q = id_start(s, lo, end);
        return q >= 0 && ends_with(s, lo, q, "Generated response ") ? q - 19 : -1;
    }
    return -1;
}

/* Start of the SGLang marker `\b(?:Receive|Receive OpenAI|Finish): obj=` that ends at
 * `obj + 4`, or -1. */
static Py_ssize_t sglang_marker_before(const unsigned char *s, Py_ssize_t lo, Py_ssize_t obj)
{
    static const char *const names[] = {"Receive: ", "Receive OpenAI: ", "Finish: "};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        Py_ssize_t k = (Py_ssize_t)strlen(names[i]);
        if (ends_with(s, lo, obj, names[i]) && (obj - k == lo || !is_word_byte(s[obj - k - 1])))
            return obj - k;
    }
    return -1;
}

/* Offset of the first LF or CR at or after pos, or n. */
static Py_ssize_t line_end(const unsigned char *s, Py_ssize_t pos, Py_ssize_t n)
{
    const unsigned char *lf = memchr(s + pos, '\n', (size_t)(n - pos));
    Py_ssize_t end = lf ? lf - s : n;
    const unsigned char *cr = memchr(s + pos, '\r', (size_t)(end - pos));
    return cr ? cr - s : end;
}

/* The closing quote of the string literal whose body starts at body (a repr escapes its own
 * quote with a backslash), or the line's end when it has none. */
static Py_ssize_t repr_end(const unsigned char *s, Py_ssize_t body, Py_ssize_t end, unsigned char mark)
{
    Py_ssize_t pos = body;
    while (pos < end) {
        const unsigned char *f = memchr(s + pos, mark, (size_t)(end - pos));
        if (!f)
            return end;
        Py_ssize_t at = f - s, back = at;
        while (back > body && s[back - 1] == '\\')
            back--;
        if ((at - back) % 2 == 0)
            return at;
        pos = at + 1;
    }
    return end;
}

/*
 * Next offset >= pos where a marker may end: "t: '" or "t: \"" (prompt/output) or "obj=".
 * The vector loops test three of the four bytes (": " + quote, "j="), a superset that the
 * scalar check and the marker rules narrow; AVX2 when the CPU has it, else SSE2.
 */
static int is_candidate(const unsigned char *p)
{
    return (p[0] == 't' && p[1] == ':' && p[2] == ' ' && (p[3] == '\'' || p[3] == '"')) ||
           (p[0] == 'o' && p[1] == 'b' && p[2] == 'j' && p[3] == '=');
}

static Py_ssize_t next_candidate_scalar(const unsigned char *s, Py_ssize_t pos, Py_ssize_t n)
{
    for (; pos + 4 <= n; pos++)
        if (is_candidate(s + pos))
            return pos;
    return n;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_VECTORS 1

__attribute__((target("avx2"))) static Py_ssize_t
next_candidate_avx2(const unsigned char *s, Py_ssize_t pos, Py_ssize_t n)
{
    const __m256i colon = _mm256_set1_epi8(':'), space = _mm256_set1_epi8(' ');
    const __m256i q1 = _mm256_set1_epi8('\''), q2 = _mm256_set1_epi8('"');
    const __m256i j = _mm256_set1_epi8('j'), eq = _mm256_set1_epi8('=');
    while (pos + 32 + 3 <= n) {
        __m256i c1 = _mm256_loadu_si256((const __m256i *)(s + pos + 1));
        __m256i c2 = _mm256_loadu_si256((const __m256i *)(s + pos + 2));
        __m256i c3 = _mm256_loadu_si256((const __m256i *)(s + pos + 3));
        __m256i quoted = _mm256_and_si256(
            _mm256_and_si256(_mm256_cmpeq_epi8(c1, colon), _mm256_cmpeq_epi8(c2, space)),
            _mm256_or_si256(_mm256_cmpeq_epi8(c3, q1), _mm256_cmpeq_epi8(c3, q2)));
        __m256i obj = _mm256_and_si256(_mm256_cmpeq_epi8(c2, j), _mm256_cmpeq_epi8(c3, eq));
        unsigned mask = (unsigned)_mm256_movemask_epi8(_mm256_or_si256(quoted, obj));
        while (mask) {
            Py_ssize_t at = pos + __builtin_ctz(mask);
            if (is_candidate(s + at))
                return at;
            mask &= mask - 1;
        }
        pos += 32;
    }
    return next_candidate_scalar(s, pos, n);
}

static Py_ssize_t next_candidate_sse2(const unsigned char *s, Py_ssize_t pos, Py_ssize_t n)
{
    const __m128i colon = _mm_set1_epi8(':'), space = _mm_set1_epi8(' ');
    const __m128i q1 = _mm_set1_epi8('\''), q2 = _mm_set1_epi8('"');
    const __m128i j = _mm_set1_epi8('j'), eq = _mm_set1_epi8('=');
    while (pos + 16 + 3 <= n) {
        __m128i c1 = _mm_loadu_si128((const __m128i *)(s + pos + 1));
        __m128i c2 = _mm_loadu_si128((const __m128i *)(s + pos + 2));
        __m128i c3 = _mm_loadu_si128((const __m128i *)(s + pos + 3));
        __m128i quoted = _mm_and_si128(
            _mm_and_si128(_mm_cmpeq_epi8(c1, colon), _mm_cmpeq_epi8(c2, space)),
            _mm_or_si128(_mm_cmpeq_epi8(c3, q1), _mm_cmpeq_epi8(c3, q2)));
        __m128i obj = _mm_and_si128(_mm_cmpeq_epi8(c2, j), _mm_cmpeq_epi8(c3, eq));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(quoted, obj));
        while (mask) {
            Py_ssize_t at = pos + __builtin_ctz(mask);
            if (is_candidate(s + at))
                return at;
            mask &= mask - 1;
        }
        pos += 16;
    }
    return next_candidate_scalar(s, pos, n);
}
#endif

static Py_ssize_t (*next_candidate)(const unsigned char *, Py_ssize_t, Py_ssize_t) =
    next_candidate_scalar;

static void choose_search(void)
{
#if defined(HAVE_X86_VECTORS)
    __builtin_cpu_init();
    next_candidate = __builtin_cpu_supports("avx2") ? next_candidate_avx2 : next_candidate_sse2;
#endif
}

/* Copy src into dst with user text blanked; returns the number of bytes blanked (0: dst was not
 * written at all). */
static Py_ssize_t blank(const unsigned char *s, Py_ssize_t n, unsigned char *d)
{
    Py_ssize_t pos = 0, copied = 0, blanked = 0;
    /* where the last blanked text ended (past its closing quote): as in usertext.py, a marker
     * that starts before it was quoted inside that text and is not one */
    Py_ssize_t elided_to = 0;
    while ((pos = next_candidate(s, pos, n)) < n) {
        /* markers are checked backwards against the buffer's start, not the line's: their bytes
         * (literals and a printable id) never include a line break, so they cannot cross one */
        Py_ssize_t from, to, start;
        if (s[pos] == 't') {
            Py_ssize_t quote = pos + 3;
            start = vllm_marker_before(s, 0, quote);
            if (start < 0 || start < elided_to) {
                pos += 1;
                continue;
            }
            Py_ssize_t end = line_end(s, quote + 1, n);
            from = quote + 1;
            to = repr_end(s, from, end, s[quote]);
            elided_to = to < end ? to + 1 : to;
        } else {
            start = sglang_marker_before(s, 0, pos);
            if (start < 0 || start < elided_to) {
                pos += 1;
                continue;
            }
            from = pos + 4;
            to = line_end(s, from, n);
            elided_to = to;
        }
        if (to > from) {
            memcpy(d + copied, s + copied, (size_t)(from - copied));
            memset(d + from, ' ', (size_t)(to - from));
            copied = to;
            blanked += to - from;
        }
        pos = to > pos ? to : pos + 1;
    }
    if (blanked)
        memcpy(d + copied, s + copied, (size_t)(n - copied));
    return blanked;
}

static PyObject *blank_user_text(PyObject *self, PyObject *args)
{
    Py_buffer src, dst;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*:blank_user_text", &src, &dst))
        return NULL;
    if (dst.len < src.len) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, "destination shorter than source");
        return NULL;
    }
    Py_ssize_t blanked;
    Py_BEGIN_ALLOW_THREADS
    blanked = blank((const unsigned char *)src.buf, src.len, (unsigned char *)dst.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return PyLong_FromSsize_t(blanked);
}

static PyMethodDef methods[] = {
    {"blank_user_text", blank_user_text, METH_VARARGS,
     "blank_user_text(src, dst) -> int\n\n"
     "Copy src into dst (at least as long) with the bodies of logged prompts, outputs and\n"
     "request dumps overwritten by spaces; returns the number of bytes blanked. When it\n"
     "returns 0, dst was not written."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "triage._userblank",
    "Blank logged user text out of a buffer before the pattern scan (see triage/usertext.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__userblank(void)
{
    choose_search();
    return PyModule_Create(&module);
}
