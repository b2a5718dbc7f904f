"""Property tests (hypothesis) on the stages that see untrusted bytes: reader, framer, masking.

Each property runs at least 1,000 examples, derandomised so that CI is reproducible; inputs are
kept small so the whole file stays well under a minute on two cores. Run more with
`HYPOTHESIS_PROFILE=nightly` (10,000 examples per property).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from triage.api import Engine
from triage.frame import frame_line
from triage.kb.load import load_signature_file
from triage.match import Matcher, MatchResult
from triage.models import Line, Report
from triage.read import Segment, Source, count_breaks, iter_segments, read_source
from triage.textutil import mask, neutralise, strip_ansi

EXAMPLES = 10_000 if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else 1_000
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

EOLS = ("\n", "\r\n", "\r")


def _expected_lines(data: bytes) -> int:
    """Lines as a person counts them: LF, CRLF and lone CR each end one; a tail counts too."""
    if not data:
        return 0
    return count_breaks(data) + (0 if data.endswith((b"\n", b"\r")) else 1)


def _drain(segments: list[Segment], source: Source) -> None:
    """Segments are contiguous: each starts where the previous one's lines end."""
    line = 1
    for seg in segments:
        assert seg.first_line == line
        assert seg.lines >= 0
        line += count_breaks(seg.data)
    assert source.lines in (line - 1, line)


# ---------------------------------------------------------------------------------------------
# reader: never raises on arbitrary bytes, from a pipe or a file, at any chunk size


@PROPERTY
@given(data=st.binary(max_size=600), chunk=st.integers(min_value=1, max_value=97))
@example(data=b"\r\n" * 3, chunk=1)
@example(data=b"\x1f\x8b\x08\x00garbage", chunk=4)
@example(data=b"\x28\xb5\x2f\xfd\x00\x01", chunk=4)
@example(data=b'{"MESSAGE": [255, 0, 10]}\n{"MESSAGE": null}\n{"log": "\\ud800"}\n', chunk=7)
@example(data=b"\x00" * 64 + b"\n\x1b]0;t\x07\x1b[2J", chunk=3)
def test_reader_never_raises_pipe(data: bytes, chunk: int) -> None:
    source = Source(name="<stdin>")
    segments = list(iter_segments(io.BytesIO(data), source, chunk_size=chunk))
    _drain(segments, source)
    assert source.bytes == len(data)
    for seg in segments:
        seg.data.decode("utf-8", "replace")


@PROPERTY
@given(data=st.binary(max_size=400), chunk=st.integers(min_value=1, max_value=64))
@example(data=b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", chunk=2)  # truncated gzip
@example(data=b"\x28\xb5\x2f\xfd\x04\x00", chunk=2)  # truncated zstd
def test_reader_never_raises_file(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk: int
) -> None:
    path = tmp_path_factory.mktemp("reader") / "input.log"
    path.write_bytes(data)
    source, segments = read_source("input.log", path, chunk_size=chunk)
    _drain(list(segments), source)


@PROPERTY
@given(
    lines=st.lists(
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
            max_size=12,
        ),
        max_size=12,
    ),
    chunk=st.integers(min_value=1, max_value=40),
    trailing=st.booleans(),
)
@example(lines=["", ""], chunk=1, trailing=True)  # the CRLF-split bug seen in the research
def test_line_count_same_for_every_eol_and_chunk(
    lines: list[str], chunk: int, trailing: bool
) -> None:
    counts = set()
    for eol in EOLS:
        text = eol.join(lines) + (eol if trailing and lines else "")
        data = text.encode("utf-8")
        source = Source(name="<stdin>")
        segments = list(iter_segments(io.BytesIO(data), source, chunk_size=chunk))
        _drain(segments, source)
        assert source.lines == _expected_lines(data)
        counts.add(source.lines)
    assert len(counts) == 1


# ---------------------------------------------------------------------------------------------
# chunk boundaries never lose or duplicate a match; line numbers identical for LF/CRLF/CR and
# for a file and a pipe

HEALTHY = (
    "INFO 10-25 13:08:43 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3 tokens/s, "
    "Avg generation throughput: 45.6 tokens/s, Running: 2 reqs, Waiting: 0 reqs",
    'INFO:     127.0.0.1:58610 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 10-25 13:08:44 [metrics.py:455] GPU KV cache usage: 3.1%, CPU KV cache usage: 0.0%.",
    "(APIServer pid=4120) INFO 10-25 13:08:45 [api_server.py:1880] Started server process",
    "[2025-09-03 18:33:18 TP0] Decode batch. #running-req: 3, #token: 4021, gen throughput "
    "(token/s): 88.12",
    "",
    "    some indented continuation",
)
FAILURES = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.25 GiB is free.",
    "[rank0]:[E1129 18:43:39.855 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
)


class _Harness:
    """One compiled matcher reused for every example (building one costs a hyperscan compile)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.matcher: Matcher = engine.new_matcher()

    def scan(self, source: Source, segments: list[Segment]) -> tuple[MatchResult, Report]:
        self.matcher.reset()  # one run at a time (waiting candidates are per run)
        for seg in segments:
            self.matcher.feed(seg)
        report = self.engine.report(self.matcher, [source], {}, {})
        return self.matcher.result, report


@pytest.fixture(scope="module")
def harness(engine: Engine) -> _Harness:
    h = _Harness(engine)
    # the premises: healthy lines hit nothing, each failure line alone gives a hypothesis
    data = "\n".join(HEALTHY).encode()
    src = Source(name="x")
    result, _ = h.scan(src, list(iter_segments(io.BytesIO(data), src)))
    assert result.hits == [], [h.line.raw for h in result.hits]
    for failure in FAILURES:
        src = Source(name="x")
        _, report = h.scan(src, list(iter_segments(io.BytesIO(failure.encode()), src)))
        assert report.hypotheses, failure
    return h


def _pipe_segments(data: bytes, chunk: int) -> tuple[Source, list[Segment]]:
    source = Source(name="log")
    return source, list(iter_segments(io.BytesIO(data), source, chunk_size=chunk))


def _check_planted(result: MatchResult, report: Report, planted: dict[int, str]) -> None:
    seen: dict[tuple[int, int], int] = {}
    for hit in result.hits:
        assert hit.line.number in planted, (hit.line.number, hit.line.raw)
        assert hit.line.raw == planted[hit.line.number]
        key = (hit.pattern_index, hit.line.number)
        seen[key] = seen.get(key, 0) + 1
    assert all(n == 1 for n in seen.values()), "a match was reported twice"
    assert {n for _, n in seen} == set(planted), "a planted failure line was lost"
    evidence_lines: set[int] = set()
    for hyp in report.hypotheses:
        keys = [(ev.line, ev.role) for ev in hyp.evidence]
        assert len(keys) == len(set(keys)), "evidence line listed twice in one role"
        evidence_lines.update(line for line, _ in keys)
    assert evidence_lines <= set(planted)
    assert evidence_lines, "no hypothesis reported"


@PROPERTY
@given(
    noise=st.lists(
        st.tuples(st.sampled_from(HEALTHY), st.text(alphabet="0123456789 ", max_size=8)),
        min_size=0,
        max_size=25,
    ),
    picks=st.lists(
        st.tuples(st.integers(min_value=0, max_value=30), st.sampled_from(FAILURES)),
        min_size=1,
        max_size=3,
    ),
    chunk=st.integers(min_value=1, max_value=700),
    trailing=st.booleans(),
)
def test_chunk_boundaries_never_lose_or_duplicate_a_match(
    harness: _Harness,
    noise: list[tuple[str, str]],
    picks: list[tuple[int, str]],
    chunk: int,
    trailing: bool,
) -> None:
    lines = [a + b if a else b for a, b in noise]
    for pos, failure in picks:
        lines.insert(min(pos, len(lines)), failure)
    planted = {i + 1: text for i, text in enumerate(lines) if text in FAILURES}
    outcomes = []
    for eol in EOLS:
        data = (eol.join(lines) + (eol if trailing else "")).encode()
        source, segments = _pipe_segments(data, chunk)
        result, report = harness.scan(source, segments)
        _check_planted(result, report, planted)
        assert source.lines == _expected_lines(data)
        outcomes.append(sorted((h.pattern_index, h.line.number) for h in result.hits))
    assert outcomes[0] == outcomes[1] == outcomes[2]


@pytest.mark.parametrize("eol", EOLS, ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 16 << 20])
def test_engine_run_same_lines_from_file_and_pipe(
    engine: Engine, tmp_path: Path, eol: str, chunk: int
) -> None:
    """The full Engine.run path (read_source, file and stdin) with the chunk size under test."""
    lines = [HEALTHY[i % 5] for i in range(40)]
    lines.insert(17, FAILURES[0])
    lines.insert(31, FAILURES[1])
    data = (eol.join(lines) + eol).encode()
    path = tmp_path / "server.log"
    path.write_bytes(data)
    saved = engine.options.chunk_size
    engine.options.chunk_size = chunk
    try:
        from_file = engine.run([str(path)])
        from_pipe = engine.run(["-"], stdin=io.BytesIO(data))
    finally:
        engine.options.chunk_size = saved
    for report in (from_file, from_pipe):
        assert report.inputs[0].lines == len(lines)
        found = {ev.line for h in report.hypotheses for ev in h.evidence}
        assert found == {18, 32}

    def key(r: Report) -> list[tuple[str, tuple[int, ...]]]:
        return [(h.signature, tuple(ev.line for ev in h.evidence)) for h in r.hypotheses]

    assert key(from_file) == key(from_pipe)


# ---------------------------------------------------------------------------------------------
# framer: never raises, never loses the message

_MESSAGE_CHARS = st.characters(
    blacklist_characters="\r\n\t|[]\x1b", blacklist_categories=("Cs", "Cc")
)
# Wrappers in the order real tools nest them: outer ones (any order, stripped repeatedly), then a
# process prefix, then one producer header.
OUTER = (
    "2025-10-25T13:08:43.123456789Z ",
    "2025-10-25T13:08:43Z stdout F ",
    "vllm-1  | ",
    "Oct 25 13:08:43 gpu-node-3 vllm[4120]: ",
    "[  123.456789] ",
    "> ",
)
PROCESS = (
    "",
    "(EngineCore_DP0 pid=931083) ",
    "[rank0]:",
    "\x1b[1;36m(VllmWorker TP0 pid=931083)\x1b[0;0m ",
    "[1;36m(VllmWorker TP0 pid=931083)[0;0m ",
)
HEADERS = (
    "",
    "ERROR 10-25 13:08:43 [core.py:708] ",
    "[E1129 18:43:39.855 ProcessGroupNCCL.cpp:689] ",
    "gpu-node-3:4120:4188 [0] NCCL WARN ",
    "[2025-09-03 18:33:18 TP0] ",
    "2025-03-27 21:33:31,320 - INFO - ",
    "INFO:     ",
)


@PROPERTY
@given(raw=st.text(max_size=300))
@example(raw="\x1b]0;title\x07" * 50)
@example(raw="(" * 200 + "pid=1) " * 5)
@example(raw=" [repeated 3x across cluster]")
def test_frame_line_never_raises(raw: str) -> None:
    line = frame_line(Line(input="x", number=1, raw=raw))
    assert line.message in line.text
    assert line.text == strip_ansi(raw)


@PROPERTY
@given(
    outer=st.lists(st.sampled_from(OUTER), max_size=3),
    process=st.sampled_from(PROCESS),
    header=st.sampled_from(HEADERS),
    head=st.sampled_from("ZQXabc"),
    tail=st.text(alphabet=_MESSAGE_CHARS, max_size=80),
)
def test_frame_line_keeps_the_message(
    outer: list[str], process: str, header: str, head: str, tail: str
) -> None:
    message = head + tail
    raw = "".join(outer) + process + header + message
    line = frame_line(Line(input="x", number=1, raw=raw))
    assert line.message == message.strip()


# ---------------------------------------------------------------------------------------------
# masking (fingerprints) and neutralising (terminal safety)


@PROPERTY
@given(text=st.text(max_size=500), limit=st.integers(min_value=1, max_value=400))
@example(text="/a/b/c 0x1f 12.5 GiB " * 40, limit=400)
@example(text="1" * 2000, limit=3)
def test_mask_never_raises_and_is_bounded(text: str, limit: int) -> None:
    once = mask(text, limit)
    assert len(once) <= limit
    assert "\n" not in once and "  " not in once


@PROPERTY
@given(text=st.text(max_size=500), limit=st.integers(min_value=1, max_value=400))
@example(text="ab cd", limit=3)
def test_mask_is_stable(text: str, limit: int) -> None:
    # Truncation can cut a token in half (a cut "0A" re-masks as "<N>"): stability is promised
    # for fingerprints that fit their limit, which is what the history clusters on.
    once = mask(text, limit)
    if len(mask(text, 10 * limit + 1000)) <= limit:
        assert mask(once, limit) == once
    assert len(once) <= limit


@PROPERTY
@given(text=st.text(max_size=300))
def test_mask_of_a_mask_is_stable_below_the_limit(text: str) -> None:
    once = mask(text, 10_000)
    assert mask(once, 10_000) == once


_UNSAFE = {
    *range(0, 9),
    *range(11, 32),
    *range(0x7F, 0xA0),
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
}


@PROPERTY
@given(text=st.text(max_size=300))
@example(text="\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\\x9b2J\u202eabc\x07\x08\x00\x7f")
def test_neutralise_leaves_no_control_character(text: str) -> None:
    out = neutralise(text)
    assert not [hex(ord(ch)) for ch in out if ord(ch) in _UNSAFE]


# ---------------------------------------------------------------------------------------------
# signature files: the loader reports, never raises


@PROPERTY
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(lambda s: s.encode()))
@example(data=b"a: &x 1\nb: *x\n")
@example(data=b"id: a\nid: b\n")
@example(data=b"!!python/object/apply:os.system ['true']\n")
def test_signature_loader_never_raises(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("sig") / "engine" / "probe.yaml"
    path.parent.mkdir()
    path.write_bytes(data)
    sig, errors = load_signature_file(path)
    assert sig is not None or errors


@pytest.mark.parametrize("text", ["[" * 5000, "{a: " * 3000, "- " * 3000 + "x"])
def test_signature_loader_deep_nesting_is_a_load_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "engine" / "deep.yaml"
    path.parent.mkdir()
    path.write_text(text)
    sig, errors = load_signature_file(path)
    assert sig is None and errors


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=3000).map(lambda b: bytes(b"a\r\n"[x % 3] for x in b)))
def test_vector_line_index_equals_the_byte_count(data: bytes) -> None:
    """The numpy index of large segments and the bytes.count index agree on every line start."""
    from triage import read

    saved = read.INDEX_BLOCK, read.FEW_CRS
    try:
        # many blocks with CRLFs split between two of them; blocks long enough for the C
        # helper's 32-byte loop
        for block in (16, 104):
            read.INDEX_BLOCK, read.FEW_CRS = block, saved[1]
            _check_indexes(data)
            read.FEW_CRS = 1  # the numpy search for CRs of CRLF files
            _check_indexes(data)
    finally:
        read.INDEX_BLOCK, read.FEW_CRS = saved


def _check_indexes(data: bytes) -> None:
    from triage import read

    vector = read._index_breaks_vector(data)
    assert vector is not None
    total, before = vector
    plain_total, plain_before = read._index_breaks_plain(data)  # bytes.count, block by block
    assert total == plain_total == count_breaks(data)
    assert [int(x) for x in before[: len(plain_before)]] == list(plain_before)
    native = read.native_index()
    if native is not None:  # the C helper, when built, gives numpy's index exactly
        assert native(data, read.INDEX_BLOCK) == (total, [int(x) for x in before])
        assert read.index_breaks(data) == (total, [int(x) for x in before])
    for cls in (read.Segment("v", data, 1, 0, before), read.Segment("p", data, 1, 0, plain_before)):
        for offset in range(len(data) + 1):
            starts_line = (
                offset == 0
                or data[offset - 1 : offset] == b"\n"
                or (data[offset - 1 : offset] == b"\r" and data[offset : offset + 1] != b"\n")
            )
            if starts_line and offset < len(data):
                assert cls.line_index(offset) == count_breaks(data[:offset])


# ---------------------------------------------------------------------------------------------
# text windows: a large segment of a file is a window of one read's bytes, read like bytes

_WINDOW_BYTES = st.binary(max_size=600).map(lambda b: bytes(b"ab\r\n\0x"[x % 6] for x in b))


@PROPERTY
@given(
    data=_WINDOW_BYTES,
    cut=st.tuples(st.integers(0, 600), st.integers(0, 600)),
    probe=st.tuples(
        st.sampled_from([b"\n", b"\r", b"\r\n", b"ab", b"\0", b"zz"]),  # never searched: b""
        st.one_of(st.none(), st.integers(-700, 700)),
        st.one_of(st.none(), st.integers(-700, 700)),
    ),
)
def test_a_text_window_reads_like_its_bytes(
    data: bytes,
    cut: tuple[int, int],
    probe: tuple[bytes, int | None, int | None],
) -> None:
    from triage.read import TextWindow

    start, end = sorted(min(c, len(data)) for c in cut)
    expected = data[start:end]
    sub, a, b = probe
    window = TextWindow(data, start, end)
    assert len(window) == len(expected) and bytes(window) == expected
    assert window.find(sub, a, b) == expected.find(sub, a, b)
    assert window.rfind(sub, a, b) == expected.rfind(sub, a, b)
    assert window.count(sub, a, b) == expected.count(sub, a, b)
    assert window[a:b] == expected[a:b]
    assert (sub in window) == (sub in expected)
    assert window.endswith((b"\n", b"\r")) == expected.endswith((b"\n", b"\r"))
    for index in (a, b, 0, -1):
        if index is not None and -len(expected) <= index < len(expected):
            assert window[index] == expected[index]
    if expected:
        assert bytes(window.array()) == expected
        with window.view() as view:
            assert view.tobytes() == expected
        assert read_index_of(window) == read_index_of(expected)


def read_index_of(data: bytes | object) -> tuple[int, list[int]]:
    from triage import read

    saved = read.INDEX_BLOCK
    read.INDEX_BLOCK = 16  # many blocks, CRLFs split between two of them
    try:
        result = read._index_breaks_vector(data)  # type: ignore[arg-type]
    finally:
        read.INDEX_BLOCK = saved
    assert result is not None
    return result[0], [int(x) for x in result[1]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r", b"\r\n", b"x" * 40]), max_size=60),
    ends=st.lists(st.tuples(st.integers(0, 2500), st.integers(0, 9)), max_size=40),
)
def test_native_line_grouping_is_the_python_one(
    pieces: list[bytes], ends: list[tuple[int, int]]
) -> None:
    """The C helper's `group_by_line` groups the scanner's (end, pattern) pairs by line exactly
    as `match._locate` does: bounds, index, the distinct patterns (sorted) and the last end."""
    from triage import match, read

    native = read.native_grouping()
    if native is None:
        pytest.skip("the C helper triage._lineindex is not built")
    data = b"".join(pieces)
    hits = [(min(end, len(data)), pid) for end, pid in ends]
    segment = Segment("p", data, 1, count_breaks(data) + 1)
    python = [(key, sorted(ids), last) for key, ids, last in match._locate(segment, list(hits))]
    c = [(key, list(ids), last) for key, ids, last in native(data, list(hits))]
    assert c == python
