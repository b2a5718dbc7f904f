"""The knowledge base as a whole: lint clean, every field-report row covered, docs current."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from triage.api import KnowledgeBase
from triage.kb.docs import render_docs
from triage.kb.lint import lint
from triage.kb.load import load_signatures

# The row ids of ../shared/seeds/INVENTORY.md (N1-N14, H1-H8, E1-E31, M1-M5), copied here so the
# test runs on a clone without the shared folder.
INVENTORY_ROWS = (ROOT / "tests" / "data" / "inventory_rows.txt").read_text().split()


def test_lint_clean() -> None:
    issues = lint(ROOT / "signatures")
    assert not issues, "\n".join(map(str, issues[:40]))


def test_every_inventory_row_is_covered(kb: KnowledgeBase) -> None:
    covered: dict[str, list[str]] = {}
    for sig in kb.signatures:
        for row in sig.provenance.rows:
            covered.setdefault(row, []).append(sig.id)
    missing = [row for row in INVENTORY_ROWS if row not in covered]
    assert len(INVENTORY_ROWS) == 58
    assert not missing, f"inventory rows without a signature or knowledge entry: {missing}"


def test_at_least_200_signatures_in_four_layers(kb: KnowledgeBase) -> None:
    layers = {s.layer for s in kb.signatures}
    assert layers == {"node", "harness", "engine", "model"}
    assert len(kb.signatures) >= 200


def test_docs_current() -> None:
    result = load_signatures(ROOT / "signatures")
    shipped = (ROOT / "docs" / "signatures.md").read_text(encoding="utf-8")
    assert shipped == render_docs(result.signatures), (
        "run `triage kb docs` and commit docs/signatures.md"
    )


def test_signature_files_named_by_id() -> None:
    for path in (ROOT / "signatures").glob("*/*.yaml"):
        assert path.stem == path.stem.lower()
    assert Path(ROOT / "signatures" / "README.md").exists()
