"""Golden tests: every corpus case gets its expected top hypothesis with evidence on the expected
line; healthy cases get no error-severity hypothesis and exit 0."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from triage.api import Engine
from triage.evaluate import corpus_cases, judge

CASES = corpus_cases(ROOT / "corpus")


@pytest.mark.parametrize("case", CASES, ids=[str(c[0].relative_to(ROOT / "corpus")) for c in CASES])
def test_case(case, engine: Engine) -> None:  # type: ignore[no-untyped-def]
    log, _, data = case
    expect = data.get("expect") or {}
    report = engine.run([str(log)])
    aliases = {a: s.id for s in engine.kb.signatures for a in s.aliases}
    top1, _, _, false_alarm = judge(report, expect, aliases)
    got = [(h.signature, [e.line for e in h.evidence][:4]) for h in report.hypotheses[:3]]
    if expect.get("top") is None:
        assert not false_alarm, (
            f"healthy log raised {got} / {[u.text for u in report.unrecognized]}"
        )
        assert not report.failed
    else:
        assert top1, f"expected {expect['top']} at line {expect.get('line')}, got {got}"


def test_corpus_size() -> None:
    healthy = [c for c in CASES if (c[2].get("expect") or {}).get("top") is None]
    assert len(healthy) >= 15
    for _log, exp, data in CASES:
        assert data.get("source"), f"{exp}: no source"
        assert data.get("origin") in ("real", "reproduced", "reconstructed"), f"{exp}: origin"
