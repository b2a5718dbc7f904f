"""Read inputs (files, stdin, directories, .gz/.zst) into byte segments that end on a line break.

A segment is the unit the matcher scans: its bytes, the 1-based number of its first line, and the
input it belongs to. Line breaks are LF, CRLF and lone CR, counted the same way whatever the source.
Memory stays bounded: segments are at most `chunk_size` bytes (longer only for a single longer
line, up to `max_line`), and compressed input stops at `max_decompressed` bytes.
JSON-per-line logs (`journalctl -o json`, docker's json-file) are decoded here, one message per
input line, so line numbers still point at the input as given.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import re
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol, overload

# 1 MiB: a segment stays in a core's L2 cache between the copy, the line index and the scan.
# Over 1 GB, medians of 5 alternating runs: 16 MiB 4.9 s, 2 MiB 3.7-3.95 s, 1 MiB 3.55-3.84 s
# (smaller segments pay more per-segment Python than they gain).
CHUNK_SIZE = 1 << 20
MAX_LINE = 256 << 20
MAX_DECOMPRESSED = 4 << 30
SNIFF_BYTES = 64 << 10

LOG_SUFFIXES = {".log", ".txt", ".out", ".err", ".json", ".jsonl", ".gz", ".zst", ".md", ".sh", ""}
SKIP_DIR_NAMES = {".git", "__pycache__", "node_modules", ".venv"}
# triage's own outputs in a run directory (`triage run`, `triage watch`, `triage bench`): walking
# the directory again must not cite its own report.
OWN_OUTPUT_NAMES = {"triage.md", "triage.json", "triage_invalid_rows.csv", "triage.prom"}


class InputError(Exception):
    """An input that cannot be read at all (the CLI exits 2 with this message)."""


class TextWindow:
    """A window of a larger buffer (the bytes of one read from a file, or the scanner's copy of
    a segment with user text blanked) that reads like bytes, without copying it: scanners and the
    line index read the buffer itself; slices are copied out as bytes. Offsets are relative to
    the window."""

    __slots__ = ("_buffer", "_len", "_start")

    def __init__(self, buffer: bytes | bytearray, start: int, end: int) -> None:
        self._buffer = buffer
        self._start = start
        self._len = end - start

    def __len__(self) -> int:
        return self._len

    def __bytes__(self) -> bytes:
        return self._slice(self._start, self._start + self._len)

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            start, stop, step = key.indices(self._len)
            if step != 1:
                return bytes(self)[key]
            return self._slice(self._start + start, self._start + max(start, stop))
        if key < 0:
            key += self._len
        if not 0 <= key < self._len:
            raise IndexError("index out of range")
        return self._buffer[self._start + key]

    def _slice(self, start: int, end: int) -> bytes:
        """buffer[start:end] as bytes, copied once (slicing a bytearray and then converting the
        slice would copy twice)."""
        if isinstance(self._buffer, bytes):
            return self._buffer[start:end]
        with memoryview(self._buffer) as view:
            return view[start:end].tobytes()

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        a, b, _ = slice(start, end).indices(self._len)
        return self._start + a, self._start + max(a, b)

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, b = self._bounds(start, end)
        found = self._buffer.find(sub, a, b)
        return found - self._start if found >= 0 else -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, b = self._bounds(start, end)
        found = self._buffer.rfind(sub, a, b)
        return found - self._start if found >= 0 else -1

    def count(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        a, b = self._bounds(start, end)
        return self._buffer.count(sub, a, b)

    def __contains__(self, sub: bytes) -> bool:
        return self.find(sub) >= 0

    def endswith(self, suffix: bytes | tuple[bytes, ...]) -> bool:
        tail = self[-64:] if self._len > 64 else bytes(self)
        return tail.endswith(suffix)

    def array(self) -> Any:
        """The window as a read-only numpy uint8 array over the buffer."""
        import numpy as np

        return np.frombuffer(self._buffer, np.uint8, count=self._len, offset=self._start)

    def view(self) -> memoryview:
        """The window as a memoryview of the buffer."""
        return memoryview(self._buffer)[self._start : self._start + self._len]

    def address(self) -> tuple[int, object]:
        """The window's first byte in memory, for C code that reads it in place, and the object
        that must stay alive (and keeps a bytearray from being resized) while it does."""
        import ctypes

        if isinstance(self._buffer, bytearray):
            if not self._buffer:
                return 0, None
            anchor: object = ctypes.c_char.from_buffer(self._buffer)
            base = ctypes.addressof(anchor)  # type: ignore[arg-type]
        else:
            anchor = ctypes.c_char_p(self._buffer)
            base = ctypes.cast(anchor, ctypes.c_void_p).value or 0
        return base + self._start, anchor


# What a segment's data is: bytes, or a window of the bytes of one read.
Text = bytes | TextWindow


@dataclass
class Segment:
    input: str
    data: Text
    first_line: int  # 1-based number of the first line in data
    lines: int  # number of line starts in data (a trailing partial line counts)
    # Line-break index: the breaks before each INDEX_BLOCK-sized block of data, so that the
    # matcher finds a candidate's line number by counting inside one block, never the segment.
    block_breaks: Sequence[int] = ()

    def line_index(self, offset: int) -> int:
        """0-based index of the line starting at `offset` (a line start) within this segment."""
        if len(self.block_breaks) == 0:
            return count_breaks_in(self.data, 0, offset)
        block = offset // INDEX_BLOCK
        before = self.block_breaks[block]
        return before + count_breaks_in(self.data, block * INDEX_BLOCK, offset)


@dataclass
class Source:
    """One named input and its counters, filled while it is read."""

    name: str
    path: Path | None = None
    fmt: str = "plain"
    lines: int = 0
    bytes: int = 0
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    binary: bool = False


def count_breaks(data: bytes) -> int:
    """Line breaks in data: LF, CRLF and lone CR each count once."""
    n = data.count(b"\n")
    if b"\r" in data:  # a memchr-speed test; CRs are rare outside tqdm bars and vLLM tracebacks
        n += data.count(b"\r") - data.count(b"\r\n")
    return n


# 255 x 8 bytes: the largest block whose LF count per byte lane of a uint64 cannot overflow a byte
# (see `_index_breaks_vector`).
INDEX_BLOCK = 2040
# Segments from this size on are indexed with numpy (about 4 GB/s against 1.7 for bytes.count
# block by block); smaller ones do not pay its import.
VECTOR_INDEX_MIN = 1 << 18
# More CRs than this in a segment (a CRLF file) are located with numpy rather than bytes.find.
FEW_CRS = 4096


def count_breaks_in(data: Text, start: int, end: int) -> int:
    """Breaks in data[start:end] without copying. A break sits on its LF, or on a CR that no LF
    follows, so a range may end between the two bytes of a CRLF."""
    n = data.count(b"\n", start, end)
    if data.find(b"\r", start, end) >= 0:
        n += data.count(b"\r", start, end) - data.count(b"\r\n", start, min(end + 1, len(data)))
    return n


def index_breaks(data: Text) -> tuple[int, Sequence[int]]:
    """Total line breaks of data, and the breaks before each INDEX_BLOCK-sized block."""
    native = native_index()
    if native is not None:
        return native(data.view() if isinstance(data, TextWindow) else data, INDEX_BLOCK)
    if len(data) >= VECTOR_INDEX_MIN:
        vector = _index_breaks_vector(data)
        if vector is not None:
            return vector
    return _index_breaks_plain(data)


def _index_breaks_plain(data: Text) -> tuple[int, list[int]]:
    before: list[int] = []
    total = 0
    for pos in range(0, len(data), INDEX_BLOCK):
        before.append(total)
        total += count_breaks_in(data, pos, pos + INDEX_BLOCK)
    return total, before


@functools.cache
def native_index() -> Callable[[bytes | memoryview, int], tuple[int, list[int]]] | None:
    """The C helper `triage._lineindex` (about 4x numpy's speed), when it was built."""
    if os.environ.get("TRIAGE_NO_NATIVE_INDEX"):
        return None
    try:
        from triage._lineindex import index_breaks as native
    except ImportError:
        return None
    return native


def _index_breaks_vector(data: Text) -> tuple[int, Sequence[int]] | None:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency; this only keeps reading alive
        return None
    a = data.array() if isinstance(data, TextWindow) else np.frombuffer(data, np.uint8)
    n = len(a)
    block = INDEX_BLOCK
    full = n - n % block
    # LFs per block, eight byte lanes at a time: each lane of a uint64 sums at most 255 flags.
    # The flags go to a buffer kept between segments (a fresh one per segment costs ~30%).
    flags = _flag_buffer(full)
    np.equal(a[:full], 10, out=flags)
    lanes = flags.view(np.uint64).reshape(-1, block // 8).sum(axis=1, dtype=np.uint64)
    per_block = lanes.view(np.uint8).reshape(-1, 8).sum(axis=1, dtype=np.int64)
    tail = data.count(b"\n", full)
    if data.find(b"\r") >= 0:
        lone = _lone_crs(data, a)
        tail += int(np.count_nonzero(lone >= full))
        np.add.at(per_block, lone[lone < full] // block, 1)
    before = np.zeros(len(per_block) + 1, dtype=np.int64)
    np.cumsum(per_block, out=before[1:])
    index: list[int] = before.tolist()  # a list: indexing it is ~10x cheaper than numpy's
    return index[-1] + tail, index


# One flag buffer per thread (`--follow` reads several inputs at once, each on its thread).
_per_thread = threading.local()


def _flag_buffer(size: int) -> Any:
    """A bool array of `size` elements backed by a buffer the calling thread reuses from one
    segment to the next."""
    import numpy as np

    flags = getattr(_per_thread, "flags", None)
    if flags is None or len(flags) < size:
        flags = _per_thread.flags = np.empty(max(size, CHUNK_SIZE + INDEX_BLOCK), dtype=np.bool_)
    return flags[:size]


def _lone_crs(data: Text, a: Any) -> Any:
    """Offsets of the CRs that no LF follows (each one a line break of its own)."""
    import numpy as np

    found: list[int] = []
    pos = data.find(b"\r")
    for _ in range(FEW_CRS):  # tqdm bars: a few CRs, each found at memchr speed
        if pos < 0:
            return np.array(found, dtype=np.int64)
        if data[pos + 1 : pos + 2] != b"\n":
            found.append(pos)
        pos = data.find(b"\r", pos + 1)
    crs = np.flatnonzero(a == 13)  # a CRLF file: every line has one
    follower = a[np.minimum(crs + 1, len(a) - 1)]
    return crs[(crs + 1 >= len(a)) | (follower != 10)]


def _last_break_end(data: bytes | bytearray) -> int:
    """Offset just past the last complete line break in data, or 0 when there is none.

    A CR at the very end is not trusted: a LF may follow in the next read (CRLF split)."""
    lf = data.rfind(b"\n")
    cr = data.rfind(b"\r", 0, len(data) - 1) if data else -1
    return max(lf, cr) + 1


class _LimitedReader:
    """Wraps a decompressing stream and stops it at a byte limit (decompression bombs)."""

    def __init__(self, raw: BinaryIO, limit: int, name: str) -> None:
        self._raw = raw
        self._left = limit
        self._limit = limit
        self._name = name
        self._pending: Exception | None = None

    def read(self, size: int) -> bytes:
        if self._pending is not None:
            exc, self._pending = self._pending, None
            raise exc
        if self._left <= 0:
            extra = self._raw.read(1)
            if extra:
                raise InputError(
                    f"{self._name}: decompressed size exceeds the limit of "
                    f"{self._limit >> 20} MiB (--max-decompressed); refusing a possible bomb"
                )
            return b""
        # small reads, so that a truncated stream still yields what came before the damage
        parts: list[bytes] = []
        want = min(size, self._left)
        got = 0
        while got < want:
            try:
                reader = getattr(self._raw, "read1", None) or self._raw.read
                piece = reader(min(1 << 16, want - got))
            except Exception as exc:
                if not parts:
                    raise
                self._pending = exc
                break
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        self._left -= got
        return b"".join(parts)


def _open_stream(path: Path, name: str, max_decompressed: int) -> BinaryIO | _LimitedReader:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None
    head = fh.read(4)
    fh.seek(0)
    if head[:2] == b"\x1f\x8b":
        return _LimitedReader(gzip.GzipFile(fileobj=fh), max_decompressed, name)  # type: ignore[arg-type]
    if head == b"\x28\xb5\x2f\xfd":
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(fh)
        return _LimitedReader(reader, max_decompressed, name)
    return fh


class ByteStream(Protocol):
    def read(self, size: int, /) -> bytes: ...


def iter_segments(
    stream: ByteStream,
    source: Source,
    chunk_size: int = CHUNK_SIZE,
    max_line: int = MAX_LINE,
) -> Iterator[Segment]:
    """Cut a byte stream into segments ending on a line break; count lines as they pass."""
    carry: list[bytes] = []  # the unfinished last line, in pieces: joined once, never regrown
    carried = 0
    next_line = 1
    json_mode: bool | None = None
    while True:
        try:
            data = stream.read(chunk_size)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            source.notes.append(f"input truncated or corrupt after {source.bytes} bytes: {exc}")
            source.skipped = source.skipped or "truncated"
            data = b""
        except Exception as exc:  # zstandard raises its own ZstdError
            if type(exc).__name__ == "ZstdError":
                source.notes.append(f"input truncated or corrupt after {source.bytes} bytes: {exc}")
                source.skipped = source.skipped or "truncated"
                data = b""
            else:
                raise
        source.bytes += len(data)
        if data and _last_break_end(data) == 0 and carried + len(data) <= max_line:
            carry.append(data)  # still inside one long line
            carried += len(data)
            continue
        buf = b"".join((*carry, data)) if carry else data
        if not data:
            if buf:
                for seg in _emit(buf, source, next_line, json_mode):
                    yield seg
                    next_line += seg.lines
            break
        cut = _last_break_end(buf)
        if cut == 0:
            source.notes.append(f"a line longer than {max_line >> 20} MiB was cut")
            cut = len(buf)
        chunk = buf[:cut]
        carry = [buf[cut:]] if cut < len(buf) else []
        carried = len(buf) - cut
        if json_mode is None:
            json_mode = _sniff_json(chunk, source)
        for seg in _emit(chunk, source, next_line, json_mode):
            yield seg
            next_line += seg.lines
    source.lines = next_line - 1


def iter_file_segments(
    path: Path,
    source: Source,
    chunk_size: int = CHUNK_SIZE,
    byte_range: tuple[int, int] | None = None,
    max_line: int = MAX_LINE,
) -> Iterator[Segment]:
    """Segments of a regular file, each read with one pread into fresh bytes. A segment is the
    read up to its last line break, as a `TextWindow` when large (no copy: the bytes after the
    break are simply read again by the next read). A line longer than a read is read again whole,
    up to `max_line`, as from a pipe.

    Reads, not a memory map: a map kills the process with SIGBUS when the file is truncated while
    it is read (a log rotated with copytruncate, a server restarted with `> server.log`); a read
    just comes back short, and the input ends there with a note. (Scanning the map in place
    measured as fast over 1 GB: 4.61-5.07 s against 4.62-4.96 s, docs/performance.md.)

    `byte_range` (start, end) reads only that part (a --jobs worker's range; both ends must sit
    just after a line break or at the file's ends); line numbers then count from the range."""
    with path.open("rb", buffering=0) as fh:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        pos, stop = byte_range if byte_range is not None else (0, size)
        stop = min(stop, size)
        next_line = 1
        json_mode: bool | None = None
        want = chunk_size
        while pos < stop:
            asked = min(want, stop - pos)
            try:
                chunk = os.pread(fd, asked, pos)
            except OSError as exc:
                source.notes.append(f"input unreadable after {source.bytes} bytes: {exc.strerror}")
                source.skipped = source.skipped or "truncated"
                break
            short = len(chunk) < asked  # the file shrank under us: this is all there is
            end = len(chunk)
            if not short and pos + end < stop:
                end = _last_break_end(chunk)
                if end == 0 and want < max_line:
                    want = min(want * 2, max_line)  # inside one long line: read it whole
                    continue
                if end == 0:
                    source.notes.append(f"a line longer than {max_line >> 20} MiB was cut")
                    end = len(chunk)
            want = chunk_size
            data: Text = chunk
            if end < len(chunk):
                data = TextWindow(chunk, 0, end) if end >= VECTOR_INDEX_MIN else chunk[:end]
            source.bytes += len(data)
            if json_mode is None:
                json_mode = _sniff_json(data, source)
            for seg in _emit(data, source, next_line, json_mode):
                yield seg
                next_line += seg.lines
            pos += end
            if short:
                source.notes.append(
                    f"the file shrank while it was read: {stop - pos} bytes were gone "
                    "(truncated or rotated); triaged what was there"
                )
                break
        source.lines = next_line - 1


def _emit(
    chunk: Text, source: Source, first_line: int, json_mode: bool | None
) -> Iterator[Segment]:
    if b"\0" in chunk[:SNIFF_BYTES] and source.bytes <= len(chunk) + CHUNK_SIZE:
        nul_share = chunk[:SNIFF_BYTES].count(b"\0") / max(1, min(len(chunk), SNIFF_BYTES))
        if nul_share > 0.1 and not source.binary:
            source.binary = True
            source.notes.append("binary data (NUL bytes); scanned as text anyway")
    if b"\0" in chunk:
        chunk = bytes(chunk).replace(b"\0", b" ")  # NULs would end C strings in the scanners
    if json_mode:
        chunk = _decode_json_lines(bytes(chunk))
    # ANSI colour stays in the bytes: vLLM colours prefixes, levels and timestamps, never the
    # message, so the scan finds the same lines; candidate lines are stripped before confirmation.
    partial = bool(chunk) and not chunk.endswith((b"\n", b"\r"))
    total, block_breaks = index_breaks(chunk)
    lines = total + (1 if partial else 0)
    yield Segment(source.name, chunk, first_line, lines, block_breaks)


def _sniff_json(chunk: Text, source: Source) -> bool:
    """Decide once per input, on its first chunk, whether it is one JSON object per line."""
    if _looks_like_json_lines(chunk):
        source.fmt = "json-lines"
        return True
    return False


def _looks_like_json_lines(chunk: Text) -> bool:
    head = chunk[:SNIFF_BYTES].lstrip()
    if not head.startswith(b"{"):
        return False
    first = head.split(b"\n", 1)[0].strip()
    try:
        obj = json.loads(first)
    except ValueError:
        return False
    return isinstance(obj, dict) and any(k in obj for k in _JSON_MESSAGE_KEYS)


_JSON_MESSAGE_KEYS = ("MESSAGE", "log", "message", "msg", "body")
_LINE_SPLIT_RE = re.compile(rb"\r\n|\n|\r")


def _json_message(obj: dict[str, object]) -> str | None:
    for key in _JSON_MESSAGE_KEYS:
        if key not in obj:
            continue
        value = obj[key]
        if isinstance(value, list) and all(isinstance(x, int) for x in value):
            # journald stores non-printable messages as arrays of byte values
            return bytes(x & 0xFF for x in value).decode("utf-8", "replace")
        if value is None:
            return "[message hidden: journald shows fields over 4096 bytes as null; use --all]"
        if isinstance(value, str):
            return value
        return json.dumps(value)
    return None


def _decode_json_lines(chunk: bytes) -> bytes:
    """Replace each JSON object line by its message (one output line per input line)."""
    out: list[bytes] = []
    parts = _LINE_SPLIT_RE.split(chunk)
    trailing = chunk.endswith((b"\n", b"\r"))
    if trailing:
        parts = parts[:-1]
    for part in parts:
        text: str | None = None
        if part.startswith(b"{"):
            try:
                obj = json.loads(part)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                text = _json_message(obj)
                prefix = _json_prefix(obj)
                if text is not None and prefix:
                    text = prefix + text
        if text is None:
            out.append(part)
            continue
        # keep one line per input line: inner line breaks become spaces
        out.append(
            text.rstrip("\r\n").replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")
        )
    joined = b"\n".join(out)
    return joined + b"\n" if trailing else joined


def _json_prefix(obj: dict[str, object]) -> str:
    """Keep the journal identity (unit, pid) in front of the message, as `short` output would."""
    ident = obj.get("SYSLOG_IDENTIFIER") or obj.get("_COMM")
    if isinstance(ident, str):
        pid = obj.get("_PID")
        return f"{ident}[{pid}]: " if isinstance(pid, str) else f"{ident}: "
    return ""


def is_log_like(path: Path) -> bool:
    """Files worth reading in a run directory: text logs and compressed logs, not binaries."""
    if path.name.startswith(".") or not path.is_file():
        return False
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() not in LOG_SUFFIXES and not suffixes.endswith((".log.gz", ".log.zst")):
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b" or head[:4] == b"\x28\xb5\x2f\xfd":
        return True
    return b"\0" not in head


def expand_inputs(args: list[str]) -> list[tuple[str, Path | None]]:
    """Turn CLI arguments into (display name, path) pairs; '-' is stdin; directories are walked."""
    out: list[tuple[str, Path | None]] = []
    for arg in args:
        if arg == "-":
            out.append(("<stdin>", None))
            continue
        path = Path(arg)
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIR_NAMES)
                for fname in sorted(files):
                    if fname in OWN_OUTPUT_NAMES:
                        continue
                    candidate = Path(root) / fname
                    if is_log_like(candidate):
                        found.append(candidate)
            if not found:
                raise InputError(f"{arg}: directory holds no log-like files")
            out.extend((str(p), p) for p in found)
        elif path.exists():
            out.append((arg, path))
        else:
            raise InputError(f"{arg}: no such file or directory")
    return out


def read_source(
    name: str,
    path: Path | None,
    *,
    chunk_size: int = CHUNK_SIZE,
    max_decompressed: int = MAX_DECOMPRESSED,
    stdin: BinaryIO | None = None,
) -> tuple[Source, Iterator[Segment]]:
    """Open one input; the iterator yields its segments and fills the Source counters."""
    source = Source(name=name, path=path)
    if path is None:
        stream: BinaryIO | _LimitedReader = stdin or sys.stdin.buffer
        head = stream.peek(4)[:4] if isinstance(stream, io.BufferedReader) else b""
        if head[:2] == b"\x1f\x8b":
            stream = _LimitedReader(gzip.GzipFile(fileobj=stream), max_decompressed, name)  # type: ignore[arg-type]
        elif head == b"\x28\xb5\x2f\xfd":
            import zstandard

            stream = _LimitedReader(
                zstandard.ZstdDecompressor().stream_reader(stream),  # type: ignore[arg-type]
                max_decompressed,
                name,
            )
    else:
        if not path.is_file() and not path.is_fifo() and not str(path).startswith("/dev/"):
            raise InputError(f"{name}: not a regular file")
        stream = _open_stream(path, name, max_decompressed)
        # A regular file of size 0 is empty, or a /proc or /sys file whose size says nothing:
        # those are read as a stream, to their real end.
        if isinstance(stream, io.BufferedReader) and path.is_file() and path.stat().st_size > 0:
            stream.close()
            return source, iter_file_segments(path, source, chunk_size=chunk_size)
    return source, iter_segments(stream, source, chunk_size=chunk_size)
