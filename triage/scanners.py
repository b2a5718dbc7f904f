"""Multi-pattern scanning engines over bytes: Hyperscan (primary), RE2 Set (fallback), `re` (last resort).

Each engine takes the whole pattern table at once and reports candidate `(end_offset, pattern_id)`
pairs for a byte buffer. Candidates are a superset of true matches: named groups are dropped and
`\\w \\d \\s` are widened to non-ASCII bytes, so bytes matching never misses what `str` matching
on the decoded line would find. Confirmation happens later, per candidate line.
The compiled Hyperscan database is cached on disk, keyed by the pattern set.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from triage.read import Text, TextWindow

_hs: Any
try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - hosts without the wheel (e.g. some aarch64)
    _hs = None

try:
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None


class Scanner(Protocol):
    name: str

    def scan(self, data: Text, skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        """Candidate (end_offset, pattern_id) pairs in data, in any order. Patterns in `skip` may
        be left out (the caller drops their hits anyway): engines that search pattern by pattern
        save the work, Hyperscan scans its whole database regardless."""
        ...


# Bump when `to_bytes_pattern` changes: cached databases are keyed by the raw patterns and this.
TRANSLATION_VERSION = 3

_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
_COUNTED = re.compile(r"\{(\d+)(,)?(\d*)\}")
_WIDEN = {"w": r"\w\x80-\xff", "d": r"\d\x80-\xff", "s": r"\s\x80-\xff"}


def to_bytes_pattern(pattern: str) -> str:
    """Rewrite a `regex` pattern so that matching on UTF-8 bytes is a superset of matching on str."""
    pattern = _NAMED_GROUP.sub("(?:", pattern)
    out: list[str] = []
    i = 0
    in_class = False
    negated = False
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt in _WIDEN:
                if not in_class:
                    out.append("[" + _WIDEN[nxt] + "]")
                elif not negated:
                    out.append(_WIDEN[nxt])
                else:
                    out.append("\\" + nxt)
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if not in_class and ch == "[":
            in_class = True
            negated = pattern.startswith("[^", i)
            j = i + (2 if negated else 1)
            out.append(pattern[i:j])
            if j < n and pattern[j] == "]":  # a literal ] first in a class
                out.append("\\]")
                j += 1
            i = j
            continue
        if in_class and ch == "]":
            in_class = False
        if not in_class and ch == "." and (i + 1 >= n or pattern[i + 1] not in "*+"):
            # one character may be up to 4 UTF-8 bytes (a typographic apostrophe in "couldn't");
            # a counted `.{m,n}` becomes one flat `[^\\n]{m,4n}`, never a nested repetition
            # that a backtracking engine could explode on
            counted = _COUNTED.match(pattern, i + 1)
            if counted:
                low, comma, high = counted.groups()
                if not comma:
                    high = low
                upper = str(4 * int(high)) if high else ""
                out.append(f"[^\\n]{{{low},{upper}}}")
                i = counted.end()
                continue
            out.append("(?:[^\\n]{1,4})")
            i += 1
            continue
        if ord(ch) > 0x7F:
            # a non-ASCII literal: its UTF-8 bytes (inside a class: any high byte, a superset)
            if in_class:
                out.append("" if negated else "\\x80-\\xff")
            else:
                out.append("(?:" + "".join(f"\\x{b:02x}" for b in ch.encode("utf-8")) + ")")
            i += 1
            continue
        out.append(ch)
        i += 1
    text = "".join(out)
    # A trailing unbounded gap adds nothing to whether a line matches, only callbacks.
    for tail in (".*", ".+"):
        while text.endswith(tail) and not text.endswith("\\" + tail):
            text = text[: -len(tail)] + ("." if tail == ".+" else "")
            if not text:
                break
    return text


def cache_dir() -> Path:
    base = os.environ.get("TRIAGE_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return (root / "triage") if not os.environ.get("TRIAGE_CACHE_DIR") else root


def _digest(patterns: Sequence[str], engine: str) -> str:
    h = hashlib.sha256(engine.encode())
    for p in patterns:
        h.update(b"\0")
        h.update(p.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:24]


class HyperscanScanner:
    name = "hyperscan"

    def __init__(self, patterns: Sequence[str], *, use_cache: bool = True) -> None:
        assert _hs is not None
        self.prefiltered: list[int] = []
        key = _digest(patterns, f"hs-{_hs_version()}-t{TRANSLATION_VERSION}")
        path = cache_dir() / f"hs-{key}.db"
        self.db: Any = None
        if use_cache and path.is_file():
            try:
                self.db = _hs.loadb(path.read_bytes(), _hs.HS_MODE_BLOCK)
                self.db.scratch = _hs.Scratch(self.db)  # a loaded database has none yet
                self.cached = True
            except Exception:
                self.db = None
        if self.db is None:
            self.cached = False
            exprs = [to_bytes_pattern(p).encode("utf-8", "surrogatepass") for p in patterns]
            self.db = self._compile(exprs)
            if use_cache:
                _atomic_write(path, _hs.dumpb(self.db))

    def _compile(self, exprs: list[bytes]) -> Any:
        db = _hs.Database()
        if not exprs:
            return db

        def compiles(batch: list[bytes], flags: list[int]) -> Any:
            attempt = _hs.Database()
            try:
                attempt.compile(
                    expressions=batch, ids=list(range(len(batch))), elements=len(batch), flags=flags
                )
            except Exception:
                return None
            return attempt

        db, self.prefiltered = _compile_with_prefilter(exprs, compiles)
        return db

    def scan(self, data: Text, skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        append = hits.append

        def on_match(pid: int, start: int, end: int, flags: int, ctx: object) -> None:
            append((end, pid))

        if not data:
            return hits
        if isinstance(data, TextWindow):
            with data.view() as view:  # the read's own buffer
                self.db.scan(view, match_event_handler=on_match)
        else:
            self.db.scan(data, match_event_handler=on_match)
        return hits


class _CompileError(ctypes.Structure):
    _fields_ = [("message", ctypes.c_char_p), ("expression", ctypes.c_int)]


_MATCH_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_ulonglong,
    ctypes.c_ulonglong,
    ctypes.c_uint,
    ctypes.c_void_p,
)
_HS_FLAG_MULTILINE = 4
_HS_FLAG_PREFILTER = 128
_HS_MODE_BLOCK = 1


def _compile_with_prefilter(
    exprs: list[bytes],
    compile_set: Callable[[list[bytes], list[int]], Any],
    discard: Callable[[Any], object] = lambda db: None,
) -> tuple[Any, list[int]]:
    """Compile the whole set with one Hyperscan binding; when it refuses, find the patterns it
    cannot compile exactly (one compile each) and give them prefilter mode (a superset that
    confirmation narrows). Returns the database and the prefiltered pattern indexes."""
    flags = [_HS_FLAG_MULTILINE] * len(exprs)
    db = compile_set(exprs, flags)
    prefiltered: list[int] = []
    if db is None:
        for i, expr in enumerate(exprs):
            probe = compile_set([expr], [flags[i]])
            if probe is None:
                flags[i] |= _HS_FLAG_PREFILTER
                prefiltered.append(i)
            else:
                discard(probe)
        db = compile_set(exprs, flags)
    if db is None:
        bad = [e for i, e in enumerate(exprs) if compile_set([e], [flags[i]]) is None]
        shown = ", ".join(repr(e.decode("utf-8", "replace")) for e in bad[:3]) or "(none alone)"
        raise RuntimeError(f"hyperscan cannot compile these patterns, even as prefilters: {shown}")
    return db, prefiltered


def _system_libhs() -> Any:
    """The host's Hyperscan library (e.g. Debian's libhyperscan5), built with a runtime that picks
    AVX2/AVX-512 code paths; the PyPI wheel's bundled build has none. None when absent."""
    if os.environ.get("TRIAGE_NO_SYSTEM_HS"):
        return None
    for name in ("libhs.so.5", "libhs.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.hs_version.restype = ctypes.c_char_p
        ptr, out = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        lib.hs_compile_multi.argtypes = [
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.c_uint,
            ctypes.c_uint,
            ptr,
            out,
            ctypes.POINTER(ctypes.POINTER(_CompileError)),
        ]
        lib.hs_free_compile_error.argtypes = [ctypes.POINTER(_CompileError)]
        lib.hs_free_database.argtypes = [ptr]
        lib.hs_free_scratch.argtypes = [ptr]
        lib.hs_alloc_scratch.argtypes = [ptr, out]
        lib.hs_serialize_database.argtypes = [ptr, out, ctypes.POINTER(ctypes.c_size_t)]
        lib.hs_deserialize_database.argtypes = [ctypes.c_char_p, ctypes.c_size_t, out]
        lib.hs_scan.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            _MATCH_CALLBACK,
            ctypes.c_void_p,
        ]
        return lib
    return None


class SystemHyperscanScanner:
    """Hyperscan through the host's shared library (ctypes): same patterns, same cache scheme."""

    name = "hyperscan-system"

    def __init__(self, patterns: Sequence[str], *, use_cache: bool = True) -> None:
        lib = _libhs()
        assert lib is not None
        self._lib = lib
        self.prefiltered: list[int] = []
        version = lib.hs_version().decode("ascii", "replace").split()[0]
        key = _digest(patterns, f"hs-system-{version}-t{TRANSLATION_VERSION}")
        path = cache_dir() / f"hss-{key}.db"
        self._db = ctypes.c_void_p()
        self.cached = False
        if use_cache and path.is_file():
            blob = path.read_bytes()
            self.cached = lib.hs_deserialize_database(blob, len(blob), ctypes.byref(self._db)) == 0
        if not self.cached:
            exprs = [to_bytes_pattern(p).encode("utf-8", "surrogatepass") for p in patterns]
            self._compile(exprs)
            if use_cache:
                _atomic_write(path, self._serialize())
        self._scratch = ctypes.c_void_p()
        if self._db.value and lib.hs_alloc_scratch(self._db, ctypes.byref(self._scratch)) != 0:
            raise RuntimeError("hyperscan: cannot allocate scratch space")

    def __del__(self) -> None:
        # The database and scratch live in the library's heap, not Python's: a scanner built for
        # every run (the bot, `kb eval`, the test suite) leaked both, about 2 MB a run.
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        scratch = getattr(self, "_scratch", None)
        if scratch is not None and scratch.value:
            lib.hs_free_scratch(scratch)
            scratch.value = None
        db = getattr(self, "_db", None)
        if db is not None and db.value:
            lib.hs_free_database(db)
            db.value = None

    def _try_compile(self, exprs: list[bytes], flags: list[int]) -> ctypes.c_void_p | None:
        n = len(exprs)
        db = ctypes.c_void_p()
        err = ctypes.POINTER(_CompileError)()
        rc = self._lib.hs_compile_multi(
            (ctypes.c_char_p * n)(*exprs),
            (ctypes.c_uint * n)(*flags),
            (ctypes.c_uint * n)(*range(n)),
            n,
            _HS_MODE_BLOCK,
            None,  # the platform this process runs on
            ctypes.byref(db),
            ctypes.byref(err),
        )
        if rc != 0:
            self._lib.hs_free_compile_error(err)
            return None
        return db

    def _compile(self, exprs: list[bytes]) -> None:
        if exprs:
            self._db, self.prefiltered = _compile_with_prefilter(
                exprs, self._try_compile, self._lib.hs_free_database
            )

    def _serialize(self) -> bytes:
        blob = ctypes.c_void_p()
        length = ctypes.c_size_t()
        if not self._db.value or self._lib.hs_serialize_database(
            self._db, ctypes.byref(blob), ctypes.byref(length)
        ):
            return b""
        try:
            return ctypes.string_at(blob, length.value)
        finally:
            libc = ctypes.CDLL(None)
            libc.free.argtypes = [ctypes.c_void_p]
            libc.free(blob)

    def scan(self, data: Text, skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        if not data or not self._db.value:
            return hits
        append = hits.append

        def on_match(pid: int, start: int, end: int, flags: int, ctx: object) -> int:
            append((end, pid))
            return 0

        callback = _MATCH_CALLBACK(on_match)
        anchor = None
        if isinstance(data, TextWindow):
            # Hyperscan reads the buffer in place; the anchor keeps it alive for the call
            address, anchor = data.address()
            buffer: bytes | ctypes.c_char_p = ctypes.c_char_p(address)
        else:
            buffer = data
        rc = self._lib.hs_scan(self._db, buffer, len(data), 0, self._scratch, callback, None)
        del anchor
        if rc != 0:
            raise RuntimeError(f"hyperscan: scan failed ({rc})")
        return hits


@functools.cache
def _libhs() -> Any:
    return _system_libhs()


def _hs_version() -> str:
    """The bindings' version (the wheel bundles its Hyperscan build), read from the module rather
    than importlib.metadata, which costs ~20 ms of start-up."""
    return str(getattr(_hs, "__version__", "unknown"))


_UPPER_BOUND = re.compile(rb"\{(\d+)(?:,\d*)?\}")


class Re2SetScanner:
    """RE2 Set over blocks: which patterns occur in a block, then locate them with single RE2s.

    Patterns and data are bytes under RE2's Latin-1 mode: one byte, one character, the same
    superset rewriting as for Hyperscan."""

    name = "re2"
    BLOCK = 256 << 10

    def __init__(self, patterns: Sequence[str]) -> None:
        assert _re2 is not None
        opts = _re2.Options()
        opts.max_mem = 1 << 30
        opts.encoding = _re2.Options.Encoding.LATIN1
        opts.never_capture = True
        opts.log_errors = False
        self._set = _re2.Set.SearchSet(opts)
        self._singles = []
        for p in patterns:
            # (?m): ^ and $ at line breaks, as Hyperscan's HS_FLAG_MULTILINE
            bp = b"(?m)" + to_bytes_pattern(p).encode("utf-8", "surrogatepass")
            try:
                single = _re2.compile(bp, opts)
            except Exception:
                # RE2 caps counted repetition at 1000 (a widened `.{1,400}` exceeds it): drop
                # the upper bounds, a superset that confirmation narrows again.
                bp = _UPPER_BOUND.sub(rb"{\1,}", bp)
                single = _re2.compile(bp, opts)
            self._set.Add(bp)
            self._singles.append(single)
        self._set.Compile()

    def scan(self, data: Text, skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        data = bytes(data)  # RE2's matches run on bytes (a copy for a window)
        view = memoryview(data)
        start = 0
        n = len(data)
        while start < n:
            end = min(n, start + self.BLOCK)
            if end < n:
                nl = data.find(b"\n", end)
                end = n if nl < 0 else nl + 1
            block_ids = self._set.Match(view[start:end]) or ()
            for pid in block_ids:
                if pid in skip:
                    continue
                regex = self._singles[pid]
                pos = start
                while pos < end:
                    m = regex.search(data, pos, end)
                    if m is None:
                        break
                    hits.append((max(m.end(), m.start() + 1), pid))
                    pos = _next_line(data, max(m.end(), m.start() + 1), end)
            start = end
        return hits


class ReScanner:
    """Last resort: one backtracking pass per pattern over the bytes (slow with many patterns,
    but linear-ish). Every search runs under a timeout (the `regex` module's), so no pattern
    can hang a run: a pattern that times out on a segment is searched again line by line, and
    a line it still times out on is passed over (counted in `timeouts`)."""

    name = "re"
    SEGMENT_TIMEOUT_S = 1.0
    LINE_TIMEOUT_S = 0.05

    def __init__(self, patterns: Sequence[str]) -> None:
        import regex

        self._compiled = [
            regex.compile(
                to_bytes_pattern(p).encode("utf-8", "surrogatepass"), regex.MULTILINE | regex.V0
            )
            for p in patterns
        ]
        self.timeouts = 0

    def scan(self, data: Text, skip: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        data = bytes(data)
        for pid, compiled in enumerate(self._compiled):
            if pid in skip:
                continue
            try:
                self._search(compiled, data, 0, len(data), pid, hits, self.SEGMENT_TIMEOUT_S)
            except TimeoutError:
                self._search_by_line(compiled, data, pid, hits)
        return hits

    @staticmethod
    def _search(
        compiled: Any,
        data: bytes,
        pos: int,
        end: int,
        pid: int,
        hits: list[tuple[int, int]],
        timeout: float,
    ) -> None:
        while True:
            m = compiled.search(data, pos, end, timeout=timeout)
            if m is None:
                return
            hits.append((max(m.end(), m.start() + 1), pid))
            pos = _next_line(data, max(m.end(), m.start() + 1), end)

    def _search_by_line(
        self, compiled: Any, data: bytes, pid: int, hits: list[tuple[int, int]]
    ) -> None:
        del hits[len(hits) - sum(1 for _, p in hits if p == pid) :]  # this pattern's partial hits
        pos, n = 0, len(data)
        while pos < n:
            end = _next_line(data, pos, n)
            try:
                self._search(compiled, data, pos, end, pid, hits, self.LINE_TIMEOUT_S)
            except TimeoutError:
                self.timeouts += 1
            pos = end


def _next_line(data: bytes, pos: int, end: int) -> int:
    """Where the line after `pos` starts (one match per pattern and line is all a scan needs):
    after the next LF, or after a lone CR (tqdm bars, CR-only files); `end` when there is none."""
    lf = data.find(b"\n", pos, end)
    cr = data.find(b"\r", pos, lf if lf >= 0 else end)
    if cr >= 0 and (cr + 1 >= end or data[cr + 1] != 10):
        return cr + 1
    return end if lf < 0 else lf + 1


def available_engines() -> list[str]:
    out = []
    if _libhs() is not None:
        out.append("hyperscan-system")
    if _hs is not None:
        out.append("hyperscan")
    if _re2 is not None:
        out.append("re2")
    out.append("re")
    return out


def chosen_engine(engine: str | None = None) -> str:
    """The engine a run uses: the one asked for (argument or TRIAGE_ENGINE) when available,
    else the fastest available (Hyperscan, then RE2, then `re`)."""
    available = available_engines()
    wanted = engine or os.environ.get("TRIAGE_ENGINE") or available[0]
    if wanted in available:
        return wanted
    return available[0] if wanted == "hyperscan" else available[-1]


def make_scanner(patterns: Sequence[str], engine: str | None = None) -> Scanner:
    """A scanner of the chosen engine (see `chosen_engine`)."""
    name = chosen_engine(engine)
    if name == "hyperscan-system":
        try:
            return SystemHyperscanScanner(patterns)
        except Exception:  # an unusable host library: the next engine still works
            if engine == name:
                raise
            name = available_engines()[1]
    if name == "hyperscan":
        try:
            return HyperscanScanner(patterns)
        except RuntimeError:  # a pattern it cannot take: a slower engine still scans them all
            if engine == name:
                raise
            name = "re2" if _re2 is not None else "re"
    if name == "re2":
        return Re2SetScanner(patterns)
    return ReScanner(patterns)


def _atomic_write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        import tempfile  # only when a pattern database is compiled: not on a warm start

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a recompilation next time
