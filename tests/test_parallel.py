"""`--jobs N` over byte ranges gives the same report as one process: line numbers, evidence,
counts, and supporting lines whose decisive line sits in another worker's range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage import api, parallel
from triage.api import Engine, KnowledgeBase, RunOptions
from triage.render.json import render_json

ROOT = Path(__file__).resolve().parent.parent


def _mixed_log(tmp_path: Path) -> Path:
    """Every corpus log, a rejected-request line repeated past the per-pattern cap in both
    halves, CRLF and CR-only stretches, and a decisive line far from its supporting line."""
    parts = [p.read_bytes() for p in sorted((ROOT / "corpus").rglob("*.log"))]
    rejected = (
        b'(APIServer pid=7) INFO:     10.0.0.9:5000 - "POST /v1/chat/completions HTTP/1.1" '
        b"429 Too Many Requests\n"
    )
    half = len(parts) // 2
    body = (
        b"".join(parts[:half])
        + rejected * 150
        + b"tqdm 10%\rtqdm 50%\rtqdm 100%\r\n"
        + b"windows line\r\n" * 500
        + b"".join(parts[half:])
        + rejected * 150
    )
    path = tmp_path / "mixed.log"
    path.write_bytes(body)
    return path


@pytest.mark.parametrize("jobs", [2, 3])
def test_jobs_report_equals_one_process(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    path = _mixed_log(tmp_path)
    monkeypatch.setattr(api, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "CHUNK_SIZE", 64 << 10)  # many segments per range
    single = Engine(kb, RunOptions(chunk_size=64 << 10, digest=False)).run([str(path)])
    several = Engine(kb, RunOptions(chunk_size=64 << 10, digest=False, jobs=jobs)).run([str(path)])
    assert len(single.hypotheses) > 20
    assert render_json(several) == render_json(single)


def _supporting_count(report, signature: str, prefix: str) -> int:  # type: ignore[no-untyped-def]
    hyp = next(h for h in report.hypotheses if h.signature == signature)
    return sum(e.count for e in hyp.evidence if e.role == "supporting" and prefix in e.text)


def test_supporting_lines_beyond_the_waiting_queue_are_found_in_files(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 supporting lines before the decisive one: the bounded queue keeps 64 of them; a file
    is read again for all 100 (with --jobs too); a pipe keeps the 64 most recent."""
    from triage.match import PENDING_PER_SIGNATURE

    loading = [
        f"INFO [loader.py:100] Model loading took {10 + i / 100:.2f} GiB\n" for i in range(100)
    ]
    filler = "INFO [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s\n" * 2000
    body = "".join(loading) + filler + "ValueError: No available memory for the cache blocks.\n"
    path = tmp_path / "kv.log"
    path.write_text(body)
    monkeypatch.setattr(api, "PARALLEL_MIN_BYTES", 0)
    from_file = Engine(kb, RunOptions(digest=False)).run([str(path)])
    assert _supporting_count(from_file, "kv-cache-no-memory", "Model loading took") == 100
    several = Engine(kb, RunOptions(digest=False, jobs=2)).run([str(path)])
    assert render_json(several) == render_json(from_file)
    with path.open("rb") as fh:
        piped = Engine(kb, RunOptions(digest=False)).run(["-"], stdin=fh)  # type: ignore[arg-type]
    count = _supporting_count(piped, "kv-cache-no-memory", "Model loading took")
    assert count == PENDING_PER_SIGNATURE


def test_rescan_reads_every_input_of_a_directory(kb: KnowledgeBase, tmp_path: Path) -> None:
    """The supporting lines sit in one file, the decisive line in another: a directory run finds
    all of them, with each file's own line numbers."""
    logs = tmp_path / "run"
    logs.mkdir()
    loading = [
        f"INFO [loader.py:100] Model loading took {20 + i / 100:.2f} GiB\n" for i in range(90)
    ]
    (logs / "a-startup.log").write_text("".join(loading))
    (logs / "b-crash.log").write_text("ValueError: No available memory for the cache blocks.\n")
    report = Engine(kb, RunOptions(digest=False)).run([str(logs)])
    assert _supporting_count(report, "kv-cache-no-memory", "Model loading took") == 90
    hyp = next(h for h in report.hypotheses if h.signature == "kv-cache-no-memory")
    first = next(e for e in hyp.evidence if e.role == "supporting")
    assert first.input.endswith("a-startup.log") and first.line == 1


def test_a_file_stops_locating_candidates_once_their_queue_overflowed(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Healthy high-load stats lines are supporting candidates of a signature that never fires:
    from a file, only the first queue's worth is located (a rescan would replace them anyway);
    from a pipe, the queue keeps the most recent. The report is the same either way."""
    from triage import match
    from triage.match import PENDING_PER_SIGNATURE

    stats = "".join(
        f"INFO [loggers.py:123] Engine 000: GPU KV cache usage: 9{i % 10}.{i % 7}%, "
        f"Prefix cache hit rate: 0.0%\n"
        for i in range(500)
    )
    path = tmp_path / "busy.log"
    path.write_text(stats)
    located: list[int] = []
    original = match.locate

    def counting(segment, raw_hits, *data):  # type: ignore[no-untyped-def]
        located.append(len(raw_hits))
        return original(segment, raw_hits, *data)

    monkeypatch.setattr(match, "locate", counting)
    engine = Engine(kb, RunOptions(chunk_size=4 << 10, digest=False))
    from_file = engine.run([str(path)])
    assert 0 < sum(located) <= PENDING_PER_SIGNATURE + 40  # one segment past the overflow
    located.clear()
    with path.open("rb") as fh:
        piped = engine.run_inputs([api.InputSpec(str(path), stream=fh)])  # named as the file
    assert sum(located) >= 500
    assert render_json(from_file) == render_json(piped)


@pytest.mark.parametrize("engine_name", ["re2", "re"])
def test_fallback_engines_skip_what_the_matcher_stopped_locating(
    kb: KnowledgeBase, tmp_path: Path, engine_name: str
) -> None:
    """Once a queue overflowed, RE2 and `re` stop searching its patterns (Hyperscan scans them
    regardless and they are dropped); the report, rescan included, is what Hyperscan gives."""
    from triage.scanners import available_engines

    if engine_name not in available_engines():
        pytest.skip(f"{engine_name} not installed")
    stats = "".join(
        f"INFO [loggers.py:123] Engine 000: GPU KV cache usage: 9{i % 10}.{i % 7}%, "
        f"Prefix cache hit rate: 0.0%\n"
        for i in range(300)
    )
    loading = [
        f"INFO [loader.py:100] Model loading took {10 + i / 100:.2f} GiB\n" for i in range(100)
    ]
    path = tmp_path / "busy.log"
    path.write_text(
        "".join(loading) + stats + "ValueError: No available memory for the cache blocks.\n"
    )
    reports = {
        name: render_json(
            Engine(kb, RunOptions(chunk_size=4 << 10, digest=False, engine=name)).run([str(path)])
        )
        for name in (available_engines()[0], engine_name)
    }

    def without_engine(text: str) -> str:
        return re.sub(r'"engine": "[^"]*"', "", text)

    assert without_engine(reports[engine_name]) == without_engine(reports[available_engines()[0]])
    assert (
        _supporting_count(
            Engine(kb, RunOptions(chunk_size=4 << 10, digest=False, engine=engine_name)).run(
                [str(path)]
            ),
            "kv-cache-no-memory",
            "Model loading took",
        )
        == 100
    )
