"""applies_to from the message catalog: the derivation (`triage.catalog.applies`), the YAML text
edit of `kb applies --write` (`triage.kb.applies`) and the lint check of written ranges, on the
fixture catalog the catalog tests build and on the shipped catalog and signatures."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from triage.catalog import Derived, component_ranges, open_catalog
from triage.catalog.applies import just_after
from triage.catalog.store import DATA_FILE
from triage.kb.applies import add_range, check_edit, contradicts
from triage.kb.schema import VersionRange

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "catalog"

ARCHITECTURE = (
    "ValueError: The checkpoint you are trying to load has model type `qwen9` but Transformers "
    "does not recognize this architecture."
)  # the fixture's vllm 0.11.2 only (vllm/transformers_utils/config.py, a new file there)
NO_MEMORY_0_11 = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)  # 0.11.2's wording; 0.10.0 ends at "initializing the engine."


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location(
        "build_message_catalog", ROOT / "scripts" / "build_message_catalog.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script
    spec.loader.exec_module(script)
    out = tmp_path_factory.mktemp("catalog") / "catalog.sqlite"
    assert script.main(["--fixtures", str(FIXTURES), "--out", str(out)]) == 0
    return out


@pytest.fixture
def fixture_catalog(built: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TRIAGE_CATALOG", str(built))
    yield built


class _Pattern:
    def __init__(self, regex: str) -> None:
        self.regex = regex


class _Sig:
    def __init__(self, sig_id: str, *regexes: str) -> None:
        self.id = sig_id
        self.decisive = [_Pattern(r) for r in regexes]


def _derive(path: Path, sig: _Sig, lines: list[str]) -> list[Derived]:
    cat = open_catalog(path)
    assert cat is not None
    return list(cat.derive_applies(sig, lines))


def test_a_new_message_is_release_bound_from_just_after_the_release_without_it(
    fixture_catalog: Path,
) -> None:
    (d,) = _derive(
        fixture_catalog, _Sig("arch", r"does not recognize this architecture"), [ARCHITECTURE]
    )
    assert (d.project, d.component, d.printing) == ("vllm", "vllm", ("0.11.2",))
    assert d.bound and d.range() == {"introduced": "0.10.0.post1"}
    assert "first seen in catalogued 0.11.2; catalogued 0.10.0 does not print it" in d.note()
    assert set(component_ranges([d])) == {"vllm"}


def test_near_miss_a_reworded_message_the_pattern_still_fires_on_is_not_bound(
    fixture_catalog: Path,
) -> None:
    wide = _Sig("wide", r"No available memory for the cache blocks")
    (d,) = _derive(fixture_catalog, wide, [NO_MEMORY_0_11])
    # 0.10.0's shorter wording is the same function's, and the pattern fires on it
    assert d.printing == ("0.10.0", "0.11.2") and not d.bound and d.range() == {}
    assert component_ranges([d]) == {}
    narrow = _Sig("narrow", r"initializing the engine\. See https://docs\.vllm\.ai")
    (n,) = _derive(fixture_catalog, narrow, [NO_MEMORY_0_11])
    assert n.printing == ("0.11.2",) and n.range() == {"introduced": "0.10.0.post1"}


def test_near_miss_text_in_a_placeholder_does_not_bound_the_signature(
    fixture_catalog: Path,
) -> None:
    """The decisive text stands where the template has a placeholder: the template is a wrapper
    around the message, not the message."""
    wrapped = ARCHITECTURE.replace("`qwen9`", "`No available memory for the cache blocks`")
    sig = _Sig("wrapped", r"No available memory for the cache blocks")
    cat = open_catalog(fixture_catalog)
    assert cat is not None
    found = cat.locate_text(wrapped)
    assert found is not None and "does not recognize" in found.source.template  # located
    assert _derive(fixture_catalog, sig, [wrapped]) == []


def test_a_pattern_the_catalog_cannot_date_leaves_the_range_unwritten(
    fixture_catalog: Path,
) -> None:
    sig = _Sig("two", r"does not recognize this architecture", r"some other tool's own wording")
    (d,) = _derive(fixture_catalog, sig, [ARCHITECTURE])
    assert d.uncovered == (r"some other tool's own wording",)
    assert d.bound and component_ranges([d]) == {}


def test_just_after() -> None:
    assert just_after("0.5.5") == "0.5.5.post1"
    assert just_after("0.8.5.post1") == "0.8.5.post2"
    assert just_after("2.14.3") == "2.14.3.post1"


def _changed_lines(before: str, after: str) -> list[str]:
    import difflib

    return [
        x
        for x in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if x[:1] in "+-" and not x.startswith(("+++", "---"))
    ]


def test_write_inserts_a_block_and_keeps_every_other_line() -> None:
    path = ROOT / "signatures" / "engine" / "vllm-worker-proc-died.yaml"  # no applies_to
    before = path.read_text(encoding="utf-8")
    assert "\napplies_to:" not in before
    after = add_range(before, "vllm", {"introduced": "0.7.3.post1"}, "catalogued vllm ...")
    check_edit(before, after, {"vllm": {"introduced": "0.7.3.post1"}})
    assert _changed_lines(before, after) == [
        "+applies_to:",
        "+  versions:",
        '+    vllm: {introduced: "0.7.3.post1"}',
        '+  note: "From the message catalog (catalogued releases only; releases between them '
        'unknown): catalogued vllm ...."',
    ]
    assert after.index("applies_to:") < after.index("\ndifferential:")


def test_write_adds_to_a_hand_written_block_and_refuses_other_changes() -> None:
    path = ROOT / "signatures" / "engine" / "vllm-v1-unsupported-forced.yaml"
    before = path.read_text(encoding="utf-8")
    after = add_range(before, "torch", {"fixed": "2.7.1"}, "catalogued torch 2.5.1 print it")
    check_edit(before, after, {"torch": {"fixed": "2.7.1"}})
    data = yaml.safe_load(after)["applies_to"]
    assert data["versions"] == {
        "vllm": {"introduced": "0.8.0", "fixed": "0.11.1"},
        "torch": {"fixed": "2.7.1"},
    }
    assert data["note"].startswith("V0 was removed around 0.10/0.11")  # the hand note kept
    assert data["note"].endswith("catalogued torch 2.5.1 print it.")
    with pytest.raises(ValueError, match="changed more than applies_to"):
        check_edit(
            before, after.replace("priority: 55", "priority: 56"), {"torch": {"fixed": "2.7.1"}}
        )


def _write_signature(root: Path, versions: str) -> None:
    (root / "model").mkdir(parents=True)
    (root / "model" / "unknown-architecture-x.yaml").write_text(
        f"""schema_version: 1
id: unknown-architecture-x
title: Transformers does not recognize the checkpoint's model type
layer: model
severity: error
status: open
summary: The installed Transformers has no configuration class for the checkpoint's model_type.
match:
  - regex: 'does not recognize this architecture'
applies_to:
  versions:
    vllm: {versions}
fixes:
  - do: "Upgrade transformers to a release that knows the model type"
    confidence: suggested
verify: ["The model loads"]
provenance:
  reproduction: "the fixture catalog's own line"
examples:
  match:
    - "{ARCHITECTURE}"
  no_match:
    - "ValueError: The checkpoint you are trying to load has no config.json"
""",
        encoding="utf-8",
    )


def test_lint_flags_a_range_that_excludes_a_release_printing_the_message(
    fixture_catalog: Path, tmp_path: Path
) -> None:
    from triage.kb.lint import check_catalog_applies
    from triage.kb.load import load_signatures

    _write_signature(tmp_path / "bad", '{fixed: "0.11.0"}')
    issues = check_catalog_applies(load_signatures(tmp_path / "bad"))
    assert len(issues) == 1 and "excludes catalogued 0.11.2" in issues[0].message
    # near miss: a range that starts before the release printing it
    _write_signature(tmp_path / "good", '{introduced: "0.11.0"}')
    assert check_catalog_applies(load_signatures(tmp_path / "good")) == []


def test_write_fills_a_bound_range_once_and_never_a_hand_written_one(
    fixture_catalog: Path, tmp_path: Path
) -> None:
    from triage.kb.applies import derive_all, fill
    from triage.kb.load import load_signatures

    _write_signature(tmp_path / "sigs", '{introduced: "0.11.0"}')
    path = tmp_path / "sigs" / "model" / "unknown-architecture-x.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace('applies_to:\n  versions:\n    vllm: {introduced: "0.11.0"}\n', "")
    )
    rows = derive_all(load_signatures(tmp_path / "sigs"))
    assert rows is not None and fill(rows) == [path]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))["applies_to"]
    assert data["versions"] == {"vllm": {"introduced": "0.10.0.post1"}}
    assert "catalogued 0.10.0 does not print it" in data["note"]
    again = derive_all(load_signatures(tmp_path / "sigs"))
    assert again is not None and fill(again) == []  # written once
    # near miss: the hand-written range of the same component stays as it was
    _write_signature(tmp_path / "hand", '{introduced: "0.11.0"}')
    hand = derive_all(load_signatures(tmp_path / "hand"))
    assert hand is not None and [r.write for r in hand] == [{}] and fill(hand) == []


@pytest.mark.skipif(not DATA_FILE.is_file(), reason="no catalog shipped")
def test_shipped_catalog_dates_the_v1_fallback_check() -> None:
    """Real data: vLLM's _raise_or_fallback prints 'VLLM_USE_V1=1 is not supported with' in the
    catalogued 0.8.5-0.11.0 (the wheels 0.8.0-0.11.0 have it, 0.11.1 not): the old bound 0.10.0
    contradicts the catalog, the one the signature has now does not."""
    from triage.kb.load import load_signatures

    result = load_signatures(ROOT / "signatures")
    sig = next(s for s in result.signatures if s.id == "vllm-v1-unsupported-forced")
    cat = open_catalog(DATA_FILE)
    assert cat is not None
    (d,) = [x for x in cat.derive_applies(sig, list(sig.examples.match)) if x.project == "vllm"]
    assert "0.11.0" in d.printing and "0.11.2" not in d.printing
    old = {"vllm": VersionRange(introduced="0.8.0", fixed="0.10.0")}
    assert contradicts(d, old) and "0.10.2, 0.11.0" in contradicts(d, old)[0]
    assert contradicts(d, dict(sig.applies_to.versions)) == []


def test_draft_proposes_the_same_range(fixture_catalog: Path) -> None:
    from triage.history.draft import catalog_proposal

    out = catalog_proposal([ARCHITECTURE])
    assert out is not None
    assert out[out.index("    vllm:") + 1] == "      introduced: '0.10.0.post1'"
    # near miss: a message every catalogued release prints proposes no range
    socket = (
        "host:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer h<1>"
    )
    out = catalog_proposal([socket])
    assert out is not None and "applies_to:" not in out
