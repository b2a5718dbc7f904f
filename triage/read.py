"""Read inputs (files, stdin, directories, .gz/.zst) into byte segments that end on a line break.

A segment is the unit the matcher scans: its bytes, the 1-based number of its first line, and the
input it belongs to. Line breaks are LF, CRLF and lone CR, counted the same way whatever the source.
Memory stays bounded: segments are at most `chunk_size` bytes (longer only for a single longer
line); a line longer than `max_line` is cut to its head and tail around a marker; compressed input
stops at `max_decompressed` bytes, and sooner when its compression ratio says it is a bomb.
JSON-per-line logs (`journalctl -o json`, docker's json-file) are decoded here, one message per
input line, so line numbers still point at the input as given.
An input that fails half-way (a stream error, a decoder error) ends with the reason recorded on
its `Source`; the other inputs of a run are not affected.
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

from triage.textutil import looks_binary

# 1 MiB: a segment stays in a core's L2 cache between the copy, the line index and the scan.
# Over 1 GB, medians of 5 alternating runs: 16 MiB 4.9 s, 2 MiB 3.7-3.95 s, 1 MiB 3.55-3.84 s
# (smaller segments pay more per-segment Python than they gain).
CHUNK_SIZE = 1 << 20
# A line longer than this is cut for matching: its first and last MAX_LINE / 2 bytes are kept
# around a marker saying how many bytes were left out, and the rest is read past, not held.
# That bounds memory on input without line breaks (/dev/zero, a bomb of zeros, a binary: an
# uncut 200 MB line peaked at 431 MB). Log lines that carry a diagnosis are far shorter; the
# longest real ones are logged prompts and token-id lists, user text that is never matched.
MAX_LINE = 1 << 20
MAX_DECOMPRESSED = 4 << 30
# Decompression bombs: once the output passes BOMB_CHECK_AFTER, a compression ratio above
# BOMB_RATIO refuses the input. Logs compress 5-10x (the corpus: 5.2x gzip, 5.6x zstd); a 10 GiB
# bomb of zeros is 228x-1,030x (gzip) to 32,000x (zstd), and is refused after 32 MiB of output
# instead of 4 GiB. The ratio is measured on the compressed bytes read so far (read-ahead
# included, so it errs low). Smaller inputs never reach the check: --max-decompressed holds.
BOMB_RATIO = 100
BOMB_CHECK_AFTER = 32 << 20
# JSON-per-line input: a line nested deeper than this is read as plain text (json.loads would
# recurse into a RecursionError at about 1,000 levels; journald and docker lines have 1 or 2).
MAX_JSON_DEPTH = 64
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
    """A chunk of one input's lines with the number of the first."""

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
    skip_reason: str | None = None  # why, in a sentence, when `skipped` is set
    notes: list[str] = field(default_factory=list)
    binary: bool = False
    # The first bytes read are not text (looks_binary, on the raw bytes before NULs are blanked):
    # the engine skips the input as "binary file, skipped".
    not_text: bool = False
    cut_lines: int = 0  # lines longer than the cap, cut for matching
    first_cut_line: int = 0
    deep_json_lines: int = 0  # JSON lines nested too deep, read as plain text
    first_deep_json_line: int = 0

    def fail(self, skipped: str, reason: str) -> None:
        """Record why this input stopped being read (the first reason wins)."""
        if self.skipped is None or self.skipped == "truncated":
            self.skipped = skipped
            self.skip_reason = reason

    def note_once(self, key: str, text: str) -> None:
        """A note that is counted, not repeated: replaces the earlier note starting with `key`."""
        for i, note in enumerate(self.notes):
            if note.startswith(key):
                self.notes[i] = text
                return
        self.notes.append(text)


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
def native_grouping() -> (
    Callable[
        [bytes | memoryview, list[tuple[int, int]]],
        list[tuple[tuple[int, int, int], tuple[int, ...], int]],
    ]
    | None
):
    """`group_by_line` of the C helper `triage._lineindex` (the matcher's `_locate` in C), when
    it was built; `TRIAGE_NO_NATIVE_LOCATE=1` leaves it out (the tests compare the two)."""
    if os.environ.get("TRIAGE_NO_NATIVE_LOCATE", "") not in ("", "0"):
        return None
    try:
        from triage._lineindex import group_by_line
    except ImportError:
        return None
    return group_by_line


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


class _RawReader:
    """The compressed bytes under a decompressor: counts what was read (the bomb ratio), and
    gives back the few bytes read to sniff the format first, so that a stream that cannot seek
    (a FIFO, `<(zcat x.gz)`, a pipe) is read from its first byte."""

    def __init__(self, raw: Any, head: bytes = b"") -> None:
        self._raw = raw
        self._head = head
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        if self._head:
            out = self._head if size < 0 else self._head[:size]
            self._head = self._head[len(out) :]
        else:
            out = self._raw.read(size)
        self.consumed += len(out)
        return bytes(out)


class _LimitedReader:
    """Wraps a decompressing stream and stops it at a byte limit, or as soon as its compression
    ratio shows a bomb (see BOMB_RATIO): the check runs on the stream, before gigabytes are
    inflated."""

    def __init__(
        self,
        raw: BinaryIO,
        limit: int,
        name: str,
        compressed: _RawReader | None = None,
    ) -> None:
        self._raw = raw
        self._left = limit
        self._limit = limit
        self._name = name
        self._pending: Exception | None = None
        self._compressed = compressed  # the compressed bytes, counted (the ratio)
        self._out = 0

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
        self._out += got
        self._check_ratio()
        return b"".join(parts)

    def _check_ratio(self) -> None:
        if self._compressed is None or self._out < BOMB_CHECK_AFTER:
            return
        ratio = self._out / max(1, self._compressed.consumed)
        if ratio > BOMB_RATIO:
            raise InputError(
                f"{self._name}: compression ratio {ratio:,.0f}:1 after {self._out >> 20} MiB "
                f"(logs compress about 10:1, the limit is {BOMB_RATIO}:1); refusing a possible "
                "bomb (decompress it yourself to read it anyway)"
            )


def _read_head(fh: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes, however the writer of a pipe split them."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        piece = fh.read(size - got)
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def _decompressing(
    raw: _RawReader, head: bytes, name: str, max_decompressed: int
) -> _LimitedReader | None:
    """A bounded decompressor when `head` is gzip or zstd magic, else None."""
    if head[:2] == b"\x1f\x8b":
        inner: Any = gzip.GzipFile(fileobj=raw)  # type: ignore[call-overload]
    elif head[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        # across frames: pzstd and `zstd -T` with --block write several; a bomb can too
        inner = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[arg-type]
    else:
        return None
    return _LimitedReader(inner, max_decompressed, name, raw)


def _open_stream(path: Path, name: str, max_decompressed: int) -> BinaryIO | ByteStream:
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None
    try:
        head = _read_head(fh, 4)
    except OSError as exc:
        fh.close()
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None
    if fh.seekable():
        fh.seek(0)
        stream = _decompressing(_RawReader(fh), head, name, max_decompressed)
        return fh if stream is None else stream
    # a FIFO, a character device, process substitution: no seek; the head is given back
    raw = _RawReader(fh, head)
    return _decompressing(raw, head, name, max_decompressed) or raw


class ByteStream(Protocol):
    def read(self, size: int, /) -> bytes: ...


def _last(data: bytes, n: int) -> bytes:
    """The last n bytes (none for n == 0, where `data[-0:]` would be all of them: a cap of one
    byte keeps no tail)."""
    return data[-n:] if n > 0 else b""


class _LongLine:
    """A line over the cap, while it is read: its head, and its last bytes so far (its tail)."""

    def __init__(self, first: bytes, max_line: int) -> None:
        self.half = max_line // 2
        self.head = first[: self.half]
        self.tail = _last(first[self.half :], self.half)
        self.total = len(first)
        self.cr_pending = False  # the bytes so far end on a CR: a LF may follow in the next read

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (
            _last(data, self.half) if len(data) >= self.half else _last(self.tail + data, self.half)
        )

    def close(self, line_break: bytes) -> bytes:
        """The cut line: head, a marker with the count of bytes left out, tail, its break."""
        left_out = self.total - len(self.head) - len(self.tail)
        marker = f" [triage: {left_out} bytes of this {self.total}-byte line not read] ".encode()
        return self.head + marker + self.tail + line_break


def _first_break(data: bytes, start: int = 0) -> tuple[int, int]:
    """Offset and length (1 or 2) of the first line break at or after `start`, or (-1, 0).
    A CR as the last byte is reported with length 0: a LF may follow in the next read."""
    lf = data.find(b"\n", start)
    cr = data.find(b"\r", start, lf if lf >= 0 else len(data))
    if cr < 0:
        return (lf, 1) if lf >= 0 else (-1, 0)
    if cr == len(data) - 1:
        return cr, 0
    return cr, 2 if data[cr + 1] == 10 else 1


def _continue_long_line(long: _LongLine, data: bytes) -> tuple[bytes | None, bytes]:
    """Feed the next read to a line over the cap: (the cut line when it ended, bytes after it)."""
    if long.cr_pending:
        long.cr_pending = False
        if data[:1] == b"\n":
            return long.close(b"\r\n"), data[1:]
        return long.close(b"\r"), data
    if not data:
        return long.close(b""), b""  # the input ends inside the line
    pos, size = _first_break(data)
    if pos < 0:
        long.add(data)
        return None, b""
    long.add(data[:pos])
    if size == 0:
        long.cr_pending = True
        return None, b""
    return long.close(data[pos : pos + size]), data[pos + size :]


def _size(n: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _note_cut(source: Source, line: int, max_line: int) -> None:
    source.cut_lines += 1
    source.first_cut_line = source.first_cut_line or line
    source.note_once(
        "cut for matching:",
        f"cut for matching: {source.cut_lines} line(s) longer than {_size(max_line)} "
        f"(the first: line {source.first_cut_line}); each kept its first and last "
        f"{_size(max_line // 2)} around a marker",
    )


def iter_segments(
    stream: ByteStream,
    source: Source,
    chunk_size: int = CHUNK_SIZE,
    max_line: int = MAX_LINE,
) -> Iterator[Segment]:
    """Cut a byte stream into segments ending on a line break; count lines as they pass.

    A line longer than `max_line` is cut to its head and tail (`_LongLine`): what comes between
    is read and dropped, so memory stays bounded on a stream that never breaks a line."""
    max_line = max(max_line, chunk_size)
    carry: list[bytes] = []  # the unfinished last line, in pieces: joined once, never regrown
    carried = 0
    long: _LongLine | None = None
    next_line = 1
    json_mode: bool | None = None
    while True:
        data = _read_or_note(stream, chunk_size, source)
        source.bytes += len(data)
        if long is not None:
            cut_line, data = _continue_long_line(long, data)
            if cut_line is None:
                continue
            long = None
            _note_cut(source, next_line, max_line)
            if json_mode is None:
                json_mode = _sniff_json(cut_line, source)
            for seg in _emit(cut_line, source, next_line, json_mode):
                yield seg
                next_line += seg.lines
            if not data:
                if cut_line.endswith((b"\n", b"\r")):
                    continue  # more may follow
                break
        if data and _last_break_end(data) == 0 and carried + len(data) <= max_line:
            carry.append(data)  # still inside one long line
            carried += len(data)
            continue
        buf = b"".join((*carry, data)) if carry else data
        had_carry, carry, carried = bool(carry), [], 0
        if not data:
            if buf:
                for seg in _emit(buf, source, next_line, json_mode):
                    yield seg
                    next_line += seg.lines
            break
        cut = _last_break_end(buf)
        if cut == 0:  # one unfinished line past the cap: keep its head, follow its tail
            long = _LongLine(buf[:-1] if buf.endswith(b"\r") else buf, max_line)
            long.cr_pending = buf.endswith(b"\r")
            continue
        if had_carry:
            pos, size = _first_break(buf)
            if pos > max_line:  # the carried line ended in this read, past the cap
                long = _LongLine(buf[:pos], max_line)
                cut_line = long.close(buf[pos : pos + size])
                long = None
                _note_cut(source, next_line, max_line)
                if json_mode is None:
                    json_mode = _sniff_json(cut_line, source)
                for seg in _emit(cut_line, source, next_line, json_mode):
                    yield seg
                    next_line += seg.lines
                buf = buf[pos + size :]
                cut = _last_break_end(buf)
        chunk = buf[:cut]
        if cut < len(buf):
            carry, carried = [buf[cut:]], len(buf) - cut
        if not chunk:
            continue
        if json_mode is None:
            json_mode = _sniff_json(chunk, source)
        for seg in _emit(chunk, source, next_line, json_mode):
            yield seg
            next_line += seg.lines
    source.lines = next_line - 1


def _read_or_note(stream: ByteStream, size: int, source: Source) -> bytes:
    """One read; a decoder or stream error ends the input (b"") with a note, never the run."""
    try:
        return stream.read(size)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        error: Exception = exc
    except Exception as exc:  # zstandard raises its own ZstdError
        if type(exc).__name__ != "ZstdError":
            raise
        error = exc
    source.notes.append(f"input truncated or corrupt after {source.bytes} bytes: {error}")
    source.skipped = source.skipped or "truncated"
    return b""


def _cut_file_line(
    fd: int, start: int, stop: int, chunk_size: int, max_line: int
) -> tuple[bytes, int]:
    """A line of a file that starts at `start` and is longer than `max_line`: the cut line
    (head, marker, tail, its break) and the offset after it. Reads past the middle in
    `chunk_size` steps and keeps none of it."""
    half = max_line // 2
    pos = start + max_line - 1  # no break before: the read of max_line bytes had none
    line_end, size = stop, 0
    while pos < stop:
        block = os.pread(fd, min(chunk_size, stop - pos), pos)
        if not block:
            line_end = pos  # the file shrank
            break
        found, size = _first_break(block)
        if found >= 0:
            line_end = pos + found
            if size == 0:  # a CR as the block's last byte: CRLF or a lone CR
                size = 2 if os.pread(fd, 1, line_end + 1) == b"\n" else 1
            break
        pos += len(block)
    if line_end - start <= max_line:  # the line ended on the CR that closed the first read
        return os.pread(fd, line_end + size - start, start), line_end + size
    long = _LongLine(os.pread(fd, half, start), max_line)
    tail_len = min(half, line_end - start - half)
    long.add(os.pread(fd, tail_len, line_end - tail_len) if tail_len else b"")
    long.total = line_end - start
    return long.close(os.pread(fd, size, line_end) if size else b""), line_end + size


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
    up to `max_line`; a longer one is cut to its head and tail (`_cut_file_line`).

    Reads, not a memory map: a map kills the process with SIGBUS when the file is truncated while
    it is read (a log rotated with copytruncate, a server restarted with `> server.log`); a read
    just comes back short, and the input ends there with a note. (Scanning the map in place
    measured as fast over 1 GB: 4.61-5.07 s against 4.62-4.96 s, docs/performance.md.)

    `byte_range` (start, end) reads only that part (a --jobs worker's range; both ends must sit
    just after a line break or at the file's ends); line numbers then count from the range."""
    max_line = max(max_line, chunk_size)
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
            consumed = 0
            if not short and pos + end < stop:
                end = _last_break_end(chunk)
                if end == 0 and want < max_line:
                    want = min(want * 2, max_line)  # inside one long line: read it whole
                    continue
                if end == 0:
                    chunk, consumed = _cut_file_line(fd, pos, stop, chunk_size, max_line)
                    consumed -= pos
                    end = len(chunk)
                    _note_cut(source, next_line, max_line)
            want = chunk_size
            data: Text = chunk
            if end < len(chunk):
                data = TextWindow(chunk, 0, end) if end >= VECTOR_INDEX_MIN else chunk[:end]
            source.bytes += consumed or len(data)
            if json_mode is None:
                json_mode = _sniff_json(data, source)
            for seg in _emit(data, source, next_line, json_mode):
                yield seg
                next_line += seg.lines
            pos += consumed or end
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
    if first_line == 1 and looks_binary(bytes(chunk[:SNIFF_BYTES])):
        source.not_text = True
    if b"\0" in chunk[:SNIFF_BYTES] and source.bytes <= len(chunk) + CHUNK_SIZE:
        nul_share = chunk[:SNIFF_BYTES].count(b"\0") / max(1, min(len(chunk), SNIFF_BYTES))
        if nul_share > 0.1 and not source.binary:
            source.binary = True
            source.notes.append("binary data (NUL bytes); scanned as text anyway")
    if b"\0" in chunk:
        chunk = bytes(chunk).replace(b"\0", b" ")  # NULs would end C strings in the scanners
    if json_mode:
        chunk = _decode_json_lines(bytes(chunk), source, first_line)
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
    # the first line that is not nested too deep decides (a hostile first line does not)
    for first in head.split(b"\n", 8)[:8]:
        first = first.strip()
        if _json_too_deep(first):
            continue
        try:
            obj = json.loads(first)
        except ValueError:
            return False
        return isinstance(obj, dict) and any(k in obj for k in _JSON_MESSAGE_KEYS)
    return False


_JSON_MESSAGE_KEYS = ("MESSAGE", "log", "message", "msg", "body")
_LINE_SPLIT_RE = re.compile(rb"\r\n|\n|\r")
_JSON_STRING_RE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET_RE = re.compile(rb"[\[\]{}]")


def _json_too_deep(line: bytes) -> bool:
    """Whether a JSON line nests deeper than MAX_JSON_DEPTH, found without parsing it (json.loads
    recurses once per level). Brackets inside strings do not count."""
    if line.count(b"[") + line.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the common case: one count at memchr speed
    depth = 0
    for bracket in _JSON_BRACKET_RE.findall(_JSON_STRING_RE.sub(b'""', line)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        else:
            depth -= 1
    return False


def _note_deep_json(source: Source, line: int) -> None:
    source.deep_json_lines += 1
    source.first_deep_json_line = source.first_deep_json_line or line
    source.note_once(
        "JSON nested deeper",
        f"JSON nested deeper than {MAX_JSON_DEPTH} levels: {source.deep_json_lines} line(s) "
        f"read as plain text (the first: line {source.first_deep_json_line})",
    )


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


def _decode_json_lines(chunk: bytes, source: Source | None = None, first_line: int = 1) -> bytes:
    """Replace each JSON object line by its message (one output line per input line). A line
    nested deeper than MAX_JSON_DEPTH stays as it is, plain text, with a note."""
    out: list[bytes] = []
    parts = _LINE_SPLIT_RE.split(chunk)
    trailing = chunk.endswith((b"\n", b"\r"))
    if trailing:
        parts = parts[:-1]
    for index, part in enumerate(parts):
        text: str | None = None
        if part.startswith(b"{"):
            obj: object = None
            if _json_too_deep(part):
                if source is not None:
                    _note_deep_json(source, first_line + index)
            else:
                try:
                    obj = json.loads(part)
                except ValueError:
                    obj = None
            if isinstance(obj, dict):
                text = _json_message(obj)
                prefix = _json_prefix(obj)
                if text is not None:
                    text = _json_level(obj) + text + _json_error(obj, text)
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


# Structured loggers (zap, logr, zerolog, logrus, slog) keep the level and the error beside the
# message: "msg":"Reconciler error", "error":"fails to reconcile predictor: no runtime found ...".
_JSON_ERROR_KEYS = ("error", "err")
# "type": an SDK's stream of JSON events ({"type":"error","message":"404 No endpoints ..."})
_JSON_LEVEL_KEYS = ("level", "lvl", "severity", "type")
_JSON_FAILURE_LEVELS = ("error", "fatal", "panic", "dpanic", "critical")


def _json_level(obj: dict[str, object]) -> str:
    """`level=error ` in front of a failure-level record (as logfmt writes it, which the salient
    scan reads), nothing for other levels."""
    for key in _JSON_LEVEL_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value.lower() in _JSON_FAILURE_LEVELS:
            return f"level={value.lower()} "
    return ""


def _json_error(obj: dict[str, object], message: str) -> str:
    """The record's error field after its message (": <error>"), the text that names the cause."""
    for key in _JSON_ERROR_KEYS:
        value = obj.get(key)
        if isinstance(value, dict):
            value = json.dumps(value)
        if isinstance(value, str) and value and value not in message:
            return f": {value}"
    return ""


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
    """Open one input; the iterator yields its segments and fills the Source counters.

    An input that cannot be opened raises InputError; one that fails while it is read ends
    there, with `skipped` and `skip_reason` set on its Source (see `_guarded`)."""
    source = Source(name=name, path=path)
    stream: BinaryIO | ByteStream
    if path is None:
        stream = stdin or sys.stdin.buffer
        head = stream.peek(4)[:4] if isinstance(stream, io.BufferedReader) else b""
        stream = _decompressing(_RawReader(stream), head, name, max_decompressed) or stream
    else:
        if not path.is_file() and not path.is_fifo() and not str(path).startswith("/dev/"):
            raise InputError(f"{name}: not a regular file")
        stream = _open_stream(path, name, max_decompressed)
        # A regular file of size 0 is empty, or a /proc or /sys file whose size says nothing:
        # those are read as a stream, to their real end.
        if isinstance(stream, io.BufferedReader) and path.is_file() and path.stat().st_size > 0:
            stream.close()
            return source, _guarded(iter_file_segments(path, source, chunk_size=chunk_size), source)
    return source, _guarded(iter_segments(stream, source, chunk_size=chunk_size), source)


def _guarded(segments: Iterator[Segment], source: Source) -> Iterator[Segment]:
    """The segments of one input; an unexpected error while reading it ends this input only,
    recorded as `skipped: failed` with the reason, and the run goes on with the other inputs.
    InputError (a refused bomb, an unreadable file) still propagates: the caller decides."""
    try:
        yield from segments
    except InputError:
        raise
    except Exception as exc:
        source.fail(
            "failed",
            f"reading stopped after {source.bytes} bytes: {type(exc).__name__}: {exc}",
        )
