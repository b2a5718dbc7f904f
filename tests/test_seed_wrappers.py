"""Every field-report row with decisive log text is diagnosed first, with evidence on the right line,
when its realistic full log (the reconstructed corpus case) is read plain, through journalctl and
through docker compose."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import run_text
from triage.api import Engine
from triage.evaluate import corpus_cases, judge

SEED_CASES = [
    c
    for c in corpus_cases(ROOT / "corpus")
    if str(c[2].get("source", "")).startswith("seed") and (c[2].get("expect") or {}).get("top")
]


def _lines(log: Path) -> list[bytes]:
    return log.read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


WRAPPERS = {
    "plain": lambda i, line: line,
    "journalctl-short-iso": lambda i, line: (
        b"2026-11-29T18:%02d:%02d+00:00 gpu-node-3 vllm[8707]: " % (i // 60 % 60, i % 60) + line
    ),
    "docker-compose": lambda i, line: b"vllm-1  | " + line,
}


def test_every_seed_row_with_text_has_a_case() -> None:
    rows_with_cases = {row for c in SEED_CASES for row in _rows(c[2])}
    assert len(SEED_CASES) >= 30, len(SEED_CASES)
    assert len(rows_with_cases) >= 30, sorted(rows_with_cases)


def _rows(data: dict[str, object]) -> list[str]:
    source = str(data.get("source", ""))
    return [source.rsplit("#", 1)[-1].upper()] if "#" in source else []


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("case", SEED_CASES, ids=[c[0].name for c in SEED_CASES])
def test_seed_case_through_wrappers(case, wrapper: str, engine: Engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, _, data = case
    lines = _lines(log)
    if lines and lines[-1] == b"":
        lines = lines[:-1]
    body = b"\n".join(WRAPPERS[wrapper](i, line) for i, line in enumerate(lines)) + b"\n"
    report = run_text(engine, body, tmp_path, name=log.name)
    aliases = {a: s.id for s in engine.kb.signatures for a in s.aliases}
    top1, _, _, _ = judge(report, data["expect"], aliases)
    got = [(h.signature, [e.line for e in h.evidence][:4]) for h in report.hypotheses[:3]]
    assert top1, f"{wrapper}: expected {data['expect']} got {got}"
