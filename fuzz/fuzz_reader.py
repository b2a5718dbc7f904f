"""Fuzz the reader and the normalisers: arbitrary bytes, any chunk size, from a pipe or a file.

    python fuzz/fuzz_reader.py -max_total_time=60 -timeout=2 -rss_limit_mb=1024 [CORPUS_DIR]

Checks on every input (an AssertionError is a finding): segments are contiguous and their line
counts add up to what a person would count (LF, CRLF and lone CR); the framer keeps the message
inside the line; masking is bounded; neutralised text carries no control character.
"""

from __future__ import annotations

import io
import re
import sys

import atheris

with atheris.instrument_imports(include=["triage"]):
    from triage.frame import frame_line
    from triage.models import Line
    from triage.read import InputError, Source, count_breaks, iter_segments, read_source
    from triage.textutil import mask, neutralise

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _expected_lines(data: bytes) -> int:
    if not data:
        return 0
    return count_breaks(data) + (0 if data.endswith((b"\n", b"\r")) else 1)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    chunk = fdp.ConsumeIntInRange(1, 512)
    through_read_source = fdp.ConsumeBool()
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    if through_read_source:
        # the stdin path: sniffs gzip/zstd magic on a buffered stream, caps decompression
        stream = io.BufferedReader(io.BytesIO(body))  # type: ignore[arg-type]
        try:
            source, segments = read_source("<stdin>", None, chunk_size=chunk,
                                           max_decompressed=1 << 20, stdin=stream)
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
        text = seg.data.decode("utf-8", "replace")
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
