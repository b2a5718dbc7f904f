"""Fuzz the reader and the normalisers: arbitrary bytes, any chunk size, from a pipe or a file.

    python fuzz/fuzz_reader.py -max_total_time=60 -timeout=2 -rss_limit_mb=1024 [CORPUS_DIR]

Checks on every input (an AssertionError is a finding): segments are contiguous and their line
counts add up to what a person would count (LF, CRLF and lone CR); the framer keeps the message
inside the line; masking is bounded; neutralised text carries no control character; the scanner's
copy with user text blanked (the C helper) differs only by spaces, never over a line break.

Paths: a pipe, stdin through `read_source`, a file; a stream that cannot seek (a pipe given by
path, as `<(zcat x.gz)` is); journald JSON lines around one nested up to 5,000 levels deep (no
RecursionError, the line count kept); and the line cap at a small `max_line`, from a pipe and from
a file (a cut line is still one line, and no segment holds more than the cap of one line).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["triage"]):
    from triage import read
    from triage.frame import frame_line
    from triage.models import Line
    from triage.read import (
        InputError,
        Segment,
        Source,
        count_breaks,
        iter_file_segments,
        iter_segments,
        read_source,
    )
    from triage.textutil import mask, neutralise
    from triage.usertext import hide_user_text

read.VECTOR_INDEX_MIN = 1  # every segment of a file a window of its read, however small
_FILE = Path(tempfile.mkdtemp(prefix="triage-fuzz-")) / "input.log"

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _expected_lines(data: bytes) -> int:
    if not data:
        return 0
    return count_breaks(data) + (0 if data.endswith((b"\n", b"\r")) else 1)


_MARKER = re.compile(rb" \[triage: \d+ bytes of this \d+-byte line not read\] ")


def _through_a_pipe(body: bytes, chunk: int) -> tuple[Source, list[Segment]] | None:
    """read_source on a pipe given by path (/dev/fd/N): no seek, the sniffed head given back."""
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as fh:
            fh.write(body)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        source, segments = read_source(
            "pipe", Path(f"/dev/fd/{r}"), chunk_size=chunk, max_decompressed=1 << 20
        )
        return source, list(segments)
    except InputError:
        return None
    finally:
        writer.join()
        os.close(r)


def _nested_json(fdp: atheris.FuzzedDataProvider) -> bytes:
    depth = fdp.ConsumeIntInRange(0, 5000)
    closed = fdp.ConsumeBool()
    where = fdp.ConsumeIntInRange(0, 1000)
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    deep = b'{"MESSAGE":' + b"[" * depth + (b"]" * depth + b"}" if closed else b"")
    lines = [
        json.dumps({"MESSAGE": x.decode("utf-8", "replace"), "_PID": "1"}).encode()
        for x in body.split(b"\n")
    ]
    lines.insert(where % (len(lines) + 1), deep)
    return b"\n".join(lines) + b"\n"


def _check_cut(segs: list[Segment], body: bytes, source: Source, max_line: int) -> None:
    if source.lines != _expected_lines(body):
        raise AssertionError(f"cut: line count {source.lines} != {_expected_lines(body)}")
    for seg in segs:
        for line in bytes(seg.data).splitlines():
            if len(_MARKER.sub(b"", line)) > max_line:
                raise AssertionError(f"a line of {len(line)} bytes passed the cap of {max_line}")


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    chunk = fdp.ConsumeIntInRange(1, 512)
    # 0: a pipe, 1: stdin through read_source, 2: a file, 3: a pipe by path (no seek),
    # 4: nested journald JSON, 5: the line cap from a pipe, 6: the line cap from a file
    path = fdp.ConsumeIntInRange(0, 6)
    if path == 4:
        body = _nested_json(fdp)
        source = Source(name="journal")
        segs = list(iter_segments(io.BytesIO(body), source, chunk_size=chunk))
        if source.lines != _expected_lines(body):
            raise AssertionError(f"json: line count {source.lines} != {_expected_lines(body)}")
        return
    if path in (5, 6):
        max_line = fdp.ConsumeIntInRange(chunk, 1024)
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        source = Source(name="cut")
        if path == 5:
            segs = list(iter_segments(io.BytesIO(body), source, chunk, max_line=max_line))
        else:
            _FILE.write_bytes(body)
            segs = list(iter_file_segments(_FILE, source, chunk, max_line=max_line))
        if source.fmt != "json-lines":
            _check_cut(segs, body.replace(b"\0", b" "), source, max(max_line, chunk))
        return
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    if path == 3:
        got = _through_a_pipe(body, chunk)
        if got is None:
            return
        source, segs = got
        compressed = body[:2] == b"\x1f\x8b" or body[:4] == b"\x28\xb5\x2f\xfd"
        if not compressed and source.lines != _expected_lines(body):
            raise AssertionError(f"pipe: line count {source.lines} != {_expected_lines(body)}")
        return
    if path == 2:
        # the file path: one pread per segment, large ones kept as windows of their read
        _FILE.write_bytes(body)
        source = Source(name="fuzz")
        segs = list(iter_file_segments(_FILE, source, chunk_size=chunk))
        if source.lines != _expected_lines(body):
            raise AssertionError(f"file: line count {source.lines} != {_expected_lines(body)}")
        joined = b"".join(bytes(seg.data) for seg in segs)
        if source.fmt != "json-lines" and joined != body.replace(b"\0", b" "):
            raise AssertionError("file: segments do not cover the input exactly once")
    elif path == 1:
        # the stdin path: sniffs gzip/zstd magic on a buffered stream, caps decompression
        stream = io.BufferedReader(io.BytesIO(body))  # type: ignore[arg-type]
        try:
            source, segments = read_source(
                "<stdin>", None, chunk_size=chunk, max_decompressed=1 << 20, stdin=stream
            )
            segs = list(segments)
        except InputError:
            return
    else:
        source = Source(name="fuzz")
        segs = list(iter_segments(io.BytesIO(body), source, chunk_size=chunk))
        if source.lines != _expected_lines(body):
            raise AssertionError(f"line count {source.lines} != {_expected_lines(body)}")
    line = 1
    for seg in segs:
        if seg.first_line != line:
            raise AssertionError(f"segment starts at line {seg.first_line}, expected {line}")
        line += count_breaks(seg.data)
        original = bytes(seg.data)
        hidden = bytes(hide_user_text(seg.data))  # the scanner's view: user text blanked (C)
        if len(hidden) != len(original) or any(
            a != b and (b != 0x20 or a in (10, 13)) for a, b in zip(original, hidden, strict=True)
        ):
            raise AssertionError("blanking wrote something other than spaces, or over a break")
        text = original.decode("utf-8", "replace")
        for raw in text.splitlines()[:20]:
            framed = frame_line(Line(input="fuzz", number=1, raw=raw))
            if framed.message not in framed.text:
                raise AssertionError("the framer lost the message")
            if len(mask(raw, 100)) > 100:
                raise AssertionError("mask exceeded its limit")
            if _UNSAFE.search(neutralise(raw)):
                raise AssertionError("neutralise left a control character")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
