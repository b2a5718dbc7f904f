/*
 * triage._lineindex: the line-break index of a segment (triage/read.py, `index_breaks`).
 *
 * A break is a LF, or a CR that no LF follows (CRLF counts once, on its LF; a lone CR is a line
 * of its own: tqdm bars, CR-only files). For each block of `block` bytes the index holds the
 * breaks before it, so that a candidate's line number is found by counting inside one block.
 * numpy builds the same index at about 4 GB/s; this loop counts LFs 32 bytes at a time.
 *
 * `group_by_line` is the matcher's `_locate` (triage/match.py) for dense segments: the scanner's
 * (match end, pattern) pairs grouped by the line that holds each match's last byte, with the
 * line's bounds and index. In Python it cost a find and an rfind per match and a block count per
 * line; a failure-dense log has a candidate on most lines.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static Py_ssize_t count_lf_scalar(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += s[i] == '\n';
    return count;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86_VECTORS 1

__attribute__((target("avx2,popcnt"))) static Py_ssize_t count_lf_avx2(const unsigned char *s,
                                                                       Py_ssize_t n)
{
    const __m256i lf = _mm256_set1_epi8('\n');
    Py_ssize_t count = 0, i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i chunk = _mm256_loadu_si256((const __m256i *)(s + i));
        count += __builtin_popcount((unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(chunk, lf)));
    }
    return count + count_lf_scalar(s + i, n - i);
}

static Py_ssize_t count_lf_sse2(const unsigned char *s, Py_ssize_t n)
{
    const __m128i lf = _mm_set1_epi8('\n');
    Py_ssize_t count = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i chunk = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(chunk, lf));
        while (mask) {
            count++;
            mask &= mask - 1;
        }
    }
    return count + count_lf_scalar(s + i, n - i);
}
#endif

static Py_ssize_t (*count_lf)(const unsigned char *, Py_ssize_t) = count_lf_scalar;

/* Lone CRs in s[start:end]; the byte after `end` (up to n) decides a CR at the edge. */
static Py_ssize_t count_lone_cr(const unsigned char *s, Py_ssize_t start, Py_ssize_t end,
                                Py_ssize_t n)
{
    Py_ssize_t count = 0, pos = start;
    const unsigned char *cr;
    while (pos < end && (cr = memchr(s + pos, '\r', (size_t)(end - pos))) != NULL) {
        Py_ssize_t at = cr - s;
        count += at + 1 >= n || s[at + 1] != '\n';
        pos = at + 1;
    }
    return count;
}

static PyObject *index_breaks(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t block;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*n:index_breaks", &view, &block))
        return NULL;
    if (block <= 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "block must be positive");
        return NULL;
    }
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, full = n / block;
    int has_cr = memchr(s, '\r', (size_t)n) != NULL;
    PyObject *before = PyList_New(full + 1);
    if (!before) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t b = 0; b <= full; b++) {
        PyObject *value = PyLong_FromSsize_t(total);
        if (!value) {
            Py_DECREF(before);
            PyBuffer_Release(&view);
            return NULL;
        }
        PyList_SET_ITEM(before, b, value);
        Py_ssize_t start = b * block, end = b < full ? start + block : n;
        total += count_lf(s + start, end - start);
        if (has_cr)
            total += count_lone_cr(s, start, end, n);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nN)", total, before);
}

typedef struct {
    Py_ssize_t end;
    long pid;
} match_pair;

static int compare_pairs(const void *a, const void *b)
{
    const match_pair *x = a, *y = b;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static int compare_longs(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Breaks in s[a:b) (LF, and CRs that no LF follows), as count_breaks_in in triage/read.py. */
static Py_ssize_t breaks_between(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t n,
                                 int has_cr)
{
    if (b <= a)
        return 0;
    Py_ssize_t count = count_lf(s + a, b - a);
    if (has_cr)
        count += count_lone_cr(s, a, b, n);
    return count;
}

static Py_ssize_t rfind_byte(const unsigned char *s, Py_ssize_t lo, Py_ssize_t hi, unsigned char c)
{
    /* last index i in [lo, hi) with s[i] == c, or lo - 1 */
    for (Py_ssize_t i = hi - 1; i >= lo; i--)
        if (s[i] == c)
            return i;
    return lo - 1;
}

static PyObject *line_entry(Py_ssize_t start, Py_ssize_t end, Py_ssize_t index, Py_ssize_t last,
                            long *pids, Py_ssize_t count)
{
    qsort(pids, (size_t)count, sizeof(long), compare_longs);
    Py_ssize_t unique = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        if (unique == 0 || pids[unique - 1] != pids[i])
            pids[unique++] = pids[i];
    PyObject *ids = PyTuple_New(unique);
    if (!ids)
        return NULL;
    for (Py_ssize_t i = 0; i < unique; i++) {
        PyObject *value = PyLong_FromLong(pids[i]);
        if (!value) {
            Py_DECREF(ids);
            return NULL;
        }
        PyTuple_SET_ITEM(ids, i, value);
    }
    return Py_BuildValue("((nnn)Nn)", start, end, index, ids, last);
}

static PyObject *group_by_line(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *hits;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!:group_by_line", &view, &PyList_Type, &hits))
        return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, count = PyList_GET_SIZE(hits);
    PyObject *out = PyList_New(0);
    match_pair *pairs = PyMem_Malloc(sizeof(match_pair) * (size_t)(count ? count : 1));
    long *pids = PyMem_Malloc(sizeof(long) * (size_t)(count ? count : 1));
    if (!out || !pairs || !pids)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(hits, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "hits must be (end, pattern) tuples");
            goto fail;
        }
        pairs[i].end = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
        pairs[i].pid = PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
        if (PyErr_Occurred())
            goto fail;
    }
    qsort(pairs, (size_t)count, sizeof(match_pair), compare_pairs);
    int has_cr = n > 0 && memchr(s, '\r', (size_t)n) != NULL;
    Py_ssize_t line_start = 0, line_end = -1, index = 0, counted_to = 0, last = 0, held = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t p = 0;
        if (n) {
            p = pairs[i].end - 1;
            if (p < 0)
                p = 0;
            if (p > n - 1)
                p = n - 1;
        }
        /* a match that ends on a line break belongs to the line before it */
        while (p > 0 && (s[p] == '\n' || s[p] == '\r'))
            p--;
        if (held && line_start <= p && p < line_end) {
            pids[held++] = pairs[i].pid;
            if (p + 1 > last)
                last = p + 1;
            continue;
        }
        if (held) {
            PyObject *entry = line_entry(line_start, line_end, index, last, pids, held);
            if (!entry || PyList_Append(out, entry) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
            held = 0;
        }
        Py_ssize_t upto = n ? p + 1 : 0;
        Py_ssize_t lf = rfind_byte(s, 0, upto, '\n');
        Py_ssize_t cr = has_cr ? rfind_byte(s, lf + 1, upto, '\r') : lf;
        line_start = (lf > cr ? lf : cr) + 1;
        const unsigned char *next = n ? memchr(s + p, '\n', (size_t)(n - p)) : NULL;
        Py_ssize_t next_lf = next ? next - s : n;
        line_end = next_lf;
        if (has_cr && next_lf > line_start) {
            const unsigned char *c = memchr(s + line_start, '\r', (size_t)(next_lf - line_start));
            if (c)
                line_end = c - s;
        }
        /* matches are in order of their end, so line starts only grow: count breaks once */
        if (line_start >= counted_to) {
            index += breaks_between(s, counted_to, line_start, n, has_cr);
        } else {
            index -= breaks_between(s, line_start, counted_to, n, has_cr);
        }
        counted_to = line_start;
        pids[held++] = pairs[i].pid;
        last = p + 1;
    }
    if (held) {
        PyObject *entry = line_entry(line_start, line_end, index, last, pids, held);
        if (!entry || PyList_Append(out, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
    }
    PyMem_Free(pairs);
    PyMem_Free(pids);
    PyBuffer_Release(&view);
    return out;
fail:
    PyMem_Free(pairs);
    PyMem_Free(pids);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"index_breaks", index_breaks, METH_VARARGS,
     "index_breaks(data, block) -> (total, before)\n\n"
     "Line breaks in data (LF, CRLF and lone CR, each once) and, for each block of `block`\n"
     "bytes (the last one partial), the breaks before it: len(data) // block + 1 entries."},
    {"group_by_line", group_by_line, METH_VARARGS,
     "group_by_line(data, hits) -> [((start, end, index), pattern ids, last end), ...]\n\n"
     "The (match end, pattern) pairs grouped by the line holding each match's last byte, in\n"
     "order: the line's bounds (end before its CR or LF), its 0-based index in data, the\n"
     "sorted distinct pattern ids, and the end of its last match."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "triage._lineindex",
    "The line-break index of a segment (see triage/read.py, index_breaks).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lineindex(void)
{
#if defined(HAVE_X86_VECTORS)
    __builtin_cpu_init();
    count_lf = __builtin_cpu_supports("avx2") ? count_lf_avx2 : count_lf_sse2;
#endif
    return PyModule_Create(&module);
}
