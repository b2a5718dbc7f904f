"""Helpers for tests: run the engine on text without touching the user's files."""

from __future__ import annotations

from pathlib import Path

from triage.api import Engine
from triage.models import Report


def run_text(engine: Engine, text: str | bytes, tmp_path: Path, name: str = "server.log") -> Report:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return engine.run([str(path)])


def fired(report: Report) -> set[str]:
    out = {h.signature for h in report.hypotheses}
    for h in report.hypotheses:
        out |= {e.signature for e in h.explains}
        out |= set(h.alternatives)
    return out
