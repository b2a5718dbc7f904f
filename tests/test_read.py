"""The reader: line numbering across line-break styles and sources, compressed and hostile input."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from tests.conftest import ROOT
from triage.read import InputError, Source, TextWindow, count_breaks, iter_segments, read_source

KV_LINE = (
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
)


def _lines(data: bytes, chunk: int = 7) -> list[tuple[int, int]]:
    src = Source("x")
    return [(s.first_line, s.lines) for s in iter_segments(io.BytesIO(data), src, chunk_size=chunk)]


def test_count_breaks_all_styles() -> None:
    assert count_breaks(b"a\nb\r\nc\rd") == 3
    assert count_breaks(b"\r\n\r\n") == 2
    assert count_breaks(b"\r\r") == 2


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_segments_cover_every_line_once(sep: bytes) -> None:
    data = sep.join(f"line {i}".encode() for i in range(1, 40)) + sep
    src = Source("x")
    segs = list(iter_segments(io.BytesIO(data), src, chunk_size=5))
    expected_first = 1
    for seg in segs:
        assert seg.first_line == expected_first
        expected_first += count_breaks(seg.data)
    assert src.lines == 39
    assert b"".join(s.data for s in segs) == data


def _report_lines(engine, path_or_bytes, tmp_path: Path, sep: bytes, via_pipe: bool):  # type: ignore[no-untyped-def]
    body = sep.join([b"INFO start", b"INFO loading", KV_LINE.encode(), b"INFO done"]) + sep
    path = tmp_path / "x.log"
    path.write_bytes(body)
    if via_pipe:
        proc = subprocess.run(
            [sys.executable, "-m", "triage", "--format", "json", "-"],
            input=body,
            capture_output=True,
            check=False,
        )
        import json

        return json.loads(proc.stdout)["hypotheses"][0]["evidence"][0]["line"]
    return engine.run([str(path)]).hypotheses[0].evidence[0].line


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("via_pipe", [False, True], ids=["file", "pipe"])
def test_line_numbers_same_from_file_and_pipe(
    engine, tmp_path: Path, sep: bytes, via_pipe: bool
) -> None:  # type: ignore[no-untyped-def]
    assert _report_lines(engine, None, tmp_path, sep, via_pipe) == 3


def test_gzip_and_zstd(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = ("INFO a\n" * 5 + KV_LINE + "\n").encode()
    gz = tmp_path / "s.log.gz"
    gz.write_bytes(gzip.compress(body))
    zs = tmp_path / "s.log.zst"
    zs.write_bytes(zstandard.ZstdCompressor().compress(body))
    for p in (gz, zs):
        report = engine.run([str(p)])
        assert report.hypotheses[0].signature == "kv-cache-no-memory"
        assert report.hypotheses[0].evidence[0].line == 6


def test_truncated_gzip_is_recorded_not_fatal(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = (
        "".join(f"INFO a {i * 7919 % 10007}\n" for i in range(3000))
        + KV_LINE
        + "\n"
        + "".join(f"INFO b {i * 104729 % 1009}\n" for i in range(3000))
    ).encode()
    p = tmp_path / "t.log.gz"
    p.write_bytes(gzip.compress(body)[:-40])
    report = engine.run([str(p)])
    assert any("truncated" in s["reason"] for s in report.skipped)
    assert report.hypotheses and report.hypotheses[0].signature == "kv-cache-no-memory"


def test_decompression_bomb_stops_at_limit(tmp_path: Path) -> None:
    p = tmp_path / "bomb.log.gz"
    p.write_bytes(gzip.compress(b"A" * (8 << 20)))
    src, segs = read_source(str(p), p, max_decompressed=1 << 20)
    with pytest.raises(InputError, match="exceeds the limit"):
        list(segs)
    del src


def test_nul_bytes_and_invalid_utf8(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = b"\x00\x01garbage\xff\xfe\n" + KV_LINE.encode() + b"\x00\n\xc3\x28\n"
    p = tmp_path / "b.log"
    p.write_bytes(body)
    report = engine.run([str(p)])
    assert report.hypotheses[0].evidence[0].line == 2


def test_long_single_line_match_at_end(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "long.log"
    p.write_bytes(b"x" * (8 << 20) + b" " + KV_LINE.encode())
    report = engine.run([str(p)])
    assert report.hypotheses[0].signature == "kv-cache-no-memory"
    assert report.inputs[0].lines == 1


def test_directory_names_each_file(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "client.log").write_text("INFO ok\n")
    (tmp_path / "run" / "server.log").write_text("INFO a\n" + KV_LINE + "\n")
    (tmp_path / "run" / "weights.bin").write_bytes(b"\x00" * 100)
    report = engine.run([str(tmp_path / "run")])
    names = [i.name for i in report.inputs]
    assert any(n.endswith("server.log") for n in names) and not any(
        n.endswith(".bin") for n in names
    )
    assert report.hypotheses[0].evidence[0].input.endswith("server.log")


def test_a_line_spanning_many_reads_is_joined_once_and_capped() -> None:
    long_line = b"y" * 50_000 + b" tail\r\n"
    source = Source(name="s")
    segs = list(iter_segments(io.BytesIO(b"a\n" + long_line + b"b\n"), source, chunk_size=1000))
    joined = b"".join(s.data for s in segs)
    assert joined == b"a\n" + long_line + b"b\n"
    assert source.lines == 3 and not source.notes
    capped = Source(name="c")
    segs = list(iter_segments(io.BytesIO(long_line), capped, chunk_size=1000, max_line=10_000))
    cut = b"".join(s.data for s in segs)  # head and tail kept around a marker, one line still
    assert cut.startswith(b"y" * 5000 + b" [triage: 40005 bytes of this 50005-byte line not read]")
    assert cut.endswith(b"y tail\r\n") and len(cut) < 11_000 and capped.lines == 1
    assert capped.notes and "longer than" in capped.notes[0]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_text_windows_give_the_report_a_pipe_gives(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eol: bytes
) -> None:  # type: ignore[no-untyped-def]
    """Large reads are scanned in place (a window up to the read's last line break, no copy):
    every engine then reports what it reports from the same bytes read through a pipe."""
    from triage import read
    from triage.api import InputSpec
    from triage.render.json import render_json
    from triage.scanners import available_engines

    corpus = sorted((Path(__file__).resolve().parent.parent / "corpus").rglob("*.log"))
    body = b"".join(p.read_bytes() for p in corpus[:40])
    data = eol.join(body.splitlines()) + eol + b"tail without a break"
    path = tmp_path / "big.log"
    path.write_bytes(data)
    monkeypatch.setattr(read, "VECTOR_INDEX_MIN", 1)  # a window for every read, however small
    windows: list[int] = []
    original = read._emit

    def spying(chunk, *args):  # type: ignore[no-untyped-def]
        windows.append(isinstance(chunk, read.TextWindow))
        return original(chunk, *args)

    monkeypatch.setattr(read, "_emit", spying)
    for name in available_engines():
        engine.options.engine = name
        engine._engine_name = name
        engine.options.chunk_size = 8 << 10
        try:
            from_file = engine.run([str(path)])
            assert any(windows)
            windows.clear()
            with path.open("rb") as fh:
                piped = engine.run_inputs([InputSpec(str(path), stream=fh)])
            assert windows and not any(windows)
            windows.clear()
        finally:
            engine.options.engine = engine._engine_name = None
            engine.options.chunk_size = read.CHUNK_SIZE
        assert len(from_file.hypotheses) > 5, name
        assert render_json(from_file) == render_json(piped), name


def test_a_file_truncated_while_it_is_read_ends_with_a_note(tmp_path: Path) -> None:
    """logrotate's copytruncate, or a server restarted with `> server.log`, while triage reads:
    the input ends where the file now ends (a memory map died of SIGBUS here)."""
    from triage.read import iter_file_segments

    line = b"INFO 10-25 13:08:43 [core.py:708] a line of a busy log\n"
    path = tmp_path / "server.log"
    path.write_bytes(line * 60_000)  # ~3.4 MB: several reads of 1 MiB
    source = Source("server.log")
    segments = iter_file_segments(path, source)
    first = next(segments)
    assert first.first_line == 1 and first.lines > 1000
    with path.open("r+b") as fh:
        fh.truncate(len(line) * 10)
    rest = list(segments)
    assert all(len(seg.data) < len(line) * 60_000 for seg in rest)
    assert any("shrank while it was read" in note for note in source.notes)
    assert source.lines >= first.lines


def test_a_cr_only_file_is_read_in_segments_of_lines(tmp_path: Path) -> None:
    from triage.read import iter_file_segments

    path = tmp_path / "tqdm.log"
    path.write_bytes(b"progress 10%\r" * 200_000)  # 2.6 MB, no LF at all
    source = Source("tqdm.log")
    segments = list(iter_file_segments(path, source, chunk_size=1 << 18))
    assert len(segments) > 5
    assert sum(seg.lines for seg in segments) == 200_000 == source.lines


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_a_proc_file_whose_size_says_zero_is_read_to_its_end() -> None:
    source, segments = read_source("status", Path("/proc/self/status"))
    assert sum(seg.lines for seg in segments) > 5 and source.lines > 5


def test_a_text_window_gives_c_code_the_address_of_its_own_bytes() -> None:
    """Hyperscan reads windows in place, of a read's bytes or of the blanked copy (a bytearray)."""
    import ctypes

    for buffer in (b"0123456789abcdef" * 4, bytearray(b"fedcba9876543210" * 4)):
        window = TextWindow(buffer, 5, 40)
        address, anchor = window.address()
        assert ctypes.string_at(address, len(window)) == bytes(window) == bytes(buffer[5:40])
        del anchor
        assert window[3:9] == bytes(buffer[8:14]) and isinstance(window[3:9], bytes)
        assert isinstance(bytes(window), bytes)


def test_structured_json_record_keeps_its_level_and_error_field(tmp_path: Path) -> None:
    """A Go gateway's slog record (corpus/harness/kgateway-no-endpoints-found-for-inferencepool)
    names the cause in its `error` field and its severity in `level`: both reach the scan. Near
    miss: an info record of the same shape reads as its message alone."""
    from triage.read import _decode_json_lines

    record = ROOT / "corpus" / "harness" / "kgateway-no-endpoints-found-for-inferencepool.log"
    line = next(x for x in record.read_bytes().splitlines() if x.startswith(b'{"time"'))
    decoded = _decode_json_lines(line + b"\n").decode()
    assert decoded == (
        "level=error error processing backends: no endpoints found for InferencePool aiscope/gemma2\n"
    )
    info = b'{"level":"info","ts":"2026-01-23T09:33:08Z","msg":"Starting workers","worker count":1}'
    assert _decode_json_lines(info + b"\n").decode() == "Starting workers\n"
