"""Every signature's examples, through the whole pipeline: match lines fire it, near misses do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import fired, run_text
from triage.api import Engine, load_kb

KB = load_kb()
SIGS = [s for s in KB.signatures if s.kind != "knowledge"]


@pytest.mark.parametrize("sig", SIGS, ids=[s.id for s in SIGS])
def test_examples(sig, engine: Engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for line in sig.examples.match:
        report = run_text(engine, line + "\n", tmp_path)
        assert sig.id in fired(report), f"{sig.id} did not fire on {line!r}"
    for line in sig.examples.no_match:
        report = run_text(engine, line + "\n", tmp_path)
        assert sig.id not in fired(report), f"{sig.id} fired on near miss {line!r}"
