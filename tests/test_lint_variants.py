"""`triage kb lint`: two signatures may share a decisive pattern only as a declared variant with
evidence of its own (issue 19: the six OOM signatures whose choice fell to priority)."""

from __future__ import annotations

import shutil
from pathlib import Path

from triage.kb.lint import check_shared_decisive
from triage.kb.load import load_signatures

SIGNATURES = Path(__file__).resolve().parent.parent / "signatures"


def _kb(tmp_path: Path, edit: str | None = None) -> list[str]:
    """The generic CUDA OOM and its sampler variant alone in a knowledge base, the variant's
    file edited by `edit` (a sed-like (old, new) pair as 'old=>new')."""
    engine = tmp_path / "engine"
    engine.mkdir()
    for name in ("cuda-out-of-memory", "cuda-oom-sampler"):
        shutil.copy(SIGNATURES / "engine" / f"{name}.yaml", engine / f"{name}.yaml")
    variant = engine / "cuda-oom-sampler.yaml"
    if edit is not None:
        old, new = edit.split("=>")
        text = variant.read_text()
        assert old in text
        variant.write_text(text.replace(old, new))
    result = load_signatures(tmp_path)
    assert not [e for e in result.errors if "explains" not in e.field], result.errors
    return [issue.message for issue in check_shared_decisive(result)]


def test_declared_variant_with_its_own_evidence_passes(tmp_path: Path) -> None:
    assert _kb(tmp_path) == []


def test_undeclared_twin_is_an_issue(tmp_path: Path) -> None:
    messages = _kb(tmp_path, "variant_of: cuda-out-of-memory\n=>")
    assert messages and all("declare variant_of" in m for m in messages)


def test_variant_without_evidence_of_its_own_is_an_issue(tmp_path: Path) -> None:
    # the variant's supporting patterns turned into decisive-only text: nothing tells it apart
    messages = _kb(tmp_path, "role: supporting=>role: decisive")
    assert any("needs a supporting pattern of its own" in m for m in messages)


def test_capture_named_like_a_secret_is_an_issue(tmp_path: Path) -> None:
    """A capture called `load_key` would be redacted from every report by its name (the model
    pack's first version of torch-checkpoint-archive-corrupt); `first_byte` passes."""
    from triage.kb.lint import check_capture_names
    from triage.kb.load import load_signature_file

    source = SIGNATURES / "model" / "torch-checkpoint-archive-corrupt.yaml"
    good, _ = load_signature_file(source)
    assert good is not None and check_capture_names(good, str(source)) == []
    bad_file = tmp_path / "model" / source.name
    bad_file.parent.mkdir()
    bad_file.write_text(source.read_text().replace("first_byte", "load_key"))
    bad, _ = load_signature_file(bad_file)
    assert bad is not None
    assert [i.message for i in check_capture_names(bad, str(bad_file))] == [
        "capture name 'load_key' reads as a secret's and is redacted from reports"
    ]
