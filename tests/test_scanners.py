"""Every scanning engine finds the same confirmed hits: the fallbacks are not second-class."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.api import Engine, KnowledgeBase, RunOptions
from triage.read import read_source
from triage.scanners import available_engines, to_bytes_pattern

ROOT = Path(__file__).resolve().parent.parent
CORPUS_LOGS = sorted((ROOT / "corpus").rglob("*.log"))


def _confirmed_hits(kb: KnowledgeBase, engine_name: str) -> set[tuple[str, int, int]]:
    engine = Engine(kb, RunOptions(engine=engine_name))
    matcher = engine.new_matcher()
    assert matcher.engine == engine_name
    for path in CORPUS_LOGS:
        name = str(path.relative_to(ROOT))
        _, segments = read_source(name, path)
        for segment in segments:
            matcher.feed(segment)
    return {(h.line.input, h.line.number, h.pattern_index) for h in matcher.result.hits}


@pytest.fixture(scope="module")
def reference_hits(kb: KnowledgeBase) -> set[tuple[str, int, int]]:
    return _confirmed_hits(kb, available_engines()[0])


@pytest.mark.parametrize("engine_name", available_engines()[1:])
def test_fallback_engines_find_the_same_hits_on_the_corpus(
    kb: KnowledgeBase, reference_hits: set[tuple[str, int, int]], engine_name: str
) -> None:
    assert len(reference_hits) > 1000  # the corpus is real work, not a token sample
    found = _confirmed_hits(kb, engine_name)
    assert found == reference_hits, (
        f"{engine_name} missed {sorted(reference_hits - found)[:5]}, "
        f"added {sorted(found - reference_hits)[:5]}"
    )


def test_re2_accepts_every_pattern_despite_its_repetition_cap(kb: KnowledgeBase) -> None:
    """RE2 refuses counted repetitions over 1000; widened `.{1,400}` needs its relaxed form."""
    pytest.importorskip("re2")
    from triage.scanners import Re2SetScanner

    widened = to_bytes_pattern("Loading lora .{1,400} failed")
    assert "{1,1600}" in widened
    scanner = Re2SetScanner(["Loading lora .{1,400} failed"])
    line = b"x\nLoading lora " + "é".encode() * 300 + b" failed\n"
    assert scanner.scan(line) == [(len(line) - 1, 0)]


def test_version_reports_the_engine_a_run_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    from triage.scanners import chosen_engine

    assert chosen_engine() == available_engines()[0]
    env = {**__import__("os").environ, "TRIAGE_ENGINE": "re2"}
    out = subprocess.run(
        [sys.executable, "-m", "triage", "--version"], capture_output=True, text=True, env=env
    ).stdout
    expected = "re2" if "re2" in available_engines() else available_engines()[-1]
    assert f"scanner: {expected};" in out


@pytest.mark.parametrize(
    "engine_name", [e for e in available_engines() if e.startswith("hyperscan")]
)
def test_a_pattern_hyperscan_refuses_runs_in_prefilter_mode(engine_name: str) -> None:
    """A back-reference compiles only as a prefilter: the rest of the set still compiles exactly,
    and the prefiltered pattern reports a superset that confirmation narrows."""
    from triage.scanners import HyperscanScanner, SystemHyperscanScanner

    cls = HyperscanScanner if engine_name == "hyperscan" else SystemHyperscanScanner
    scanner = cls(["abc", r"(a)\1x"], use_cache=False)
    assert scanner.prefiltered == [1]
    assert scanner.scan(b"zz abc\naax\n") == [(6, 0), (10, 1)]


def test_an_unusable_host_library_falls_back_to_the_next_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from triage import scanners

    if "hyperscan-system" not in available_engines():
        pytest.skip("no host Hyperscan library")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("unusable")

    monkeypatch.setattr(scanners, "SystemHyperscanScanner", broken)
    monkeypatch.delenv("TRIAGE_ENGINE", raising=False)
    assert scanners.make_scanner(["abc"]).name == available_engines()[1]
    with pytest.raises(RuntimeError):
        scanners.make_scanner(["abc"], "hyperscan-system")


@pytest.mark.parametrize("engine_name", [e for e in ("re2", "re") if e in available_engines()])
def test_a_fallback_scanner_leaves_out_the_patterns_it_is_told_to_skip(engine_name: str) -> None:
    from triage.scanners import make_scanner

    scanner = make_scanner(["GPU KV cache usage", "Avg prompt throughput"], engine_name)
    data = b"Avg prompt throughput: 1.0 tokens/s, GPU KV cache usage: 95.0%\n" * 3
    assert {pid for _, pid in scanner.scan(data)} == {0, 1}
    assert {pid for _, pid in scanner.scan(data, frozenset({0}))} == {1}


@pytest.mark.skipif(
    "hyperscan-system" not in available_engines(), reason="the host's libhs is not installed"
)
def test_the_host_library_scanner_frees_its_database_and_scratch(kb: KnowledgeBase) -> None:
    """A scanner is built for every run (the bot, `kb eval`, the test suite): the database and
    scratch it holds in libhs's heap go with it. Before, every run leaked both (about 2 MB with the
    shipped knowledge base); 60 scanners of the shipped pattern set now leave the process's
    resident memory where it was."""
    import resource

    from triage.scanners import SystemHyperscanScanner

    patterns = sorted({ref.regex for ref in Engine(kb).table.refs})
    SystemHyperscanScanner(patterns)  # compiled and cached once; the rest deserialize
    one = SystemHyperscanScanner(patterns)
    assert one._db.value and one._scratch.value
    one.__del__()
    assert not one._db.value and not one._scratch.value
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(60):
        SystemHyperscanScanner(patterns).scan(b"NCCL WARN Call to connect returned\n")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 40, grown_mb
