"""Fuzz the reader and the normalisers: arbitrary bytes, any chunk size, from a pipe or a file.

    python fuzz/fuzz_reader.py -max_total_time=60 -timeout=2 -rss_limit_mb=1024 [CORPUS_DIR]

Checks on every input (an AssertionError is a finding): segments are contiguous and their line
counts add up to what a person would count (LF, CRLF and lone CR); the framer keeps the message
inside the line; masking is bounded; neutralised text carries no control character; the scanner's
copy with user text blanked (the C helper) differs only by spaces, never over a line break.
"""

from __future__ import annotations

import io
import re
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["triage"]):
    from triage import read
    from triage.frame import frame_line
    from triage.models import Line
    from triage.read import (
        InputError,
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


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    chunk = fdp.ConsumeIntInRange(1, 512)
    path = fdp.ConsumeIntInRange(0, 2)  # 0: a pipe, 1: stdin through read_source, 2: a file
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
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
