"""The compiled knowledge base: build, load when current, rebuild when stale, fall back to YAML,
full-text search, show and stats, all on a real SQLite file under tmp (never the user's cache)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from triage.kb import store
from triage.kb.commands import APPS, fts_query
from triage.kb.load import load_signatures
from triage.kb.paths import content_hash, default_signature_dir

SIGNATURES = default_signature_dir()
runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRIAGE_DB", str(tmp_path / "history.db"))
    monkeypatch.delenv("TRIAGE_KB", raising=False)
    monkeypatch.delenv("TRIAGE_NO_KB_CACHE", raising=False)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped signatures (the working tree may change while the tests run)."""
    root = tmp_path_factory.mktemp("snapshot") / "signatures"
    shutil.copytree(SIGNATURES, root)
    return root


@pytest.fixture(scope="module")
def full_kb(tmp_path_factory: pytest.TempPathFactory, snapshot: Path) -> Iterator[Path]:
    """The shipped signatures compiled once into a module-private file."""
    path = tmp_path_factory.mktemp("kb") / "kb.db"
    store.build(snapshot, path)
    yield path


def small_root(
    tmp_path: Path,
    ids: tuple[str, ...] = (
        "cuda-illegal-memory-access",
        "kv-cache-no-memory",
        "nccl-unhandled-system-error",
    ),
) -> Path:
    """A copy of a few real signature files (fast to build)."""
    root = tmp_path / "signatures"
    for path in sorted(SIGNATURES.glob("*/*.yaml")):
        if path.stem in ids:
            (root / path.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, root / path.parent.name / path.name)
    return root


def test_build_then_load_is_sqlite_and_equal(full_kb: Path, snapshot: Path) -> None:
    kb = store.load_current(snapshot, full_kb)
    assert kb.source == "sqlite"
    assert kb.digest == content_hash(snapshot)
    with sqlite3.connect(full_kb) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == store.APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # renamed: never WAL
        rows = conn.execute("SELECT count(*) FROM signatures").fetchone()[0]
    assert rows == len(kb.signatures) > 100
    # The stored JSON round-trips to the very objects the YAML gives.
    yaml_sigs = {
        s.id: s.model_dump(by_alias=True, mode="json") for s in load_signatures(snapshot).signatures
    }
    assert {s.id: s.to_dict() for s in kb.signatures} == yaml_sigs


def test_stale_rebuilds_and_touch_does_not(tmp_path: Path) -> None:
    root = small_root(tmp_path)
    db = tmp_path / "kb.db"
    assert store.load_current(root, db).source == "yaml"  # first use builds
    assert store.load_current(root, db).source == "sqlite"
    victim = next(root.glob("*/kv-cache-no-memory.yaml"))
    os.utime(victim, ns=(1, 1))  # same content, new mtime: the content hash decides
    assert store.load_current(root, db).source == "sqlite"
    victim.write_text(victim.read_text().replace("priority: 60", "priority: 61"))
    kb = store.load_current(root, db)
    assert kb.source == "yaml" and kb.by_id["kv-cache-no-memory"].priority == 61
    kb = store.load_current(root, db)
    assert kb.source == "sqlite" and kb.by_id["kv-cache-no-memory"].priority == 61
    victim.unlink()
    assert "kv-cache-no-memory" not in store.load_current(root, db).by_id


def test_default_location_is_the_cache_dir(tmp_path: Path) -> None:
    root = small_root(tmp_path)
    kb = store.load_current(root)
    path = store.default_db_path(root)
    assert path.parent == tmp_path / "cache" and path.is_file()
    assert kb.source == "yaml" and store.load_current(root).source == "sqlite"


def test_unwritable_location_falls_back_to_yaml(tmp_path: Path) -> None:
    root = small_root(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    kb = store.load_current(root, blocker / "kb.db")
    assert kb.source == "yaml" and len(kb.signatures) == 3


def test_no_cache_env_means_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = small_root(tmp_path)
    monkeypatch.setenv("TRIAGE_NO_KB_CACHE", "1")
    assert store.load_current(root, tmp_path / "kb.db").source == "yaml"
    assert not (tmp_path / "kb.db").exists()


@pytest.mark.parametrize("damage", ["truncated", "header-kept"])
def test_damaged_compiled_kb_is_rebuilt(tmp_path: Path, damage: str) -> None:
    root = small_root(tmp_path)
    db = tmp_path / "kb.db"
    store.build(root, db)
    data = db.read_bytes()
    if damage == "truncated":
        db.write_bytes(data[: len(data) // 3])
    else:
        db.write_bytes(data[:100] + b"\x00garbage" * 100)
    kb = store.load_current(root, db)
    assert len(kb.signatures) == 3
    assert store.load_current(root, db).source == "sqlite"


@pytest.mark.parametrize("content", ["garbage", "foreign-sqlite"])
def test_a_file_that_is_not_a_compiled_kb_is_never_overwritten(
    tmp_path: Path, content: str
) -> None:
    """Issue 17: garbage or someone's SQLite (a `meta` table, not ours) at --kb is refused."""
    from triage.safewrite import ForeignFileError

    root = small_root(tmp_path)
    db = tmp_path / "kb.db"
    if content == "garbage":
        db.write_bytes(b"\x00garbage" * 100)
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE meta (key, value)")
    before = db.read_bytes()
    with pytest.raises(ForeignFileError, match="refusing to overwrite"):
        store.load_current(root, db)
    assert db.read_bytes() == before


def test_build_leaves_no_temporaries_and_sweeps_dead_ones(tmp_path: Path) -> None:
    root = small_root(tmp_path)
    db = tmp_path / "kb.db"
    dead = tmp_path / f"kb.db{store._TMP_MARK}999999999-1"  # no such pid
    dead.write_bytes(b"half a database")
    store.build(root, db)
    assert [p.name for p in tmp_path.iterdir() if store._TMP_MARK in p.name] == []


@pytest.fixture
def kb_args(full_kb: Path, snapshot: Path) -> list[str]:
    return ["--kb", str(full_kb), "--signatures", str(snapshot)]


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('illegal "memory" OR access*') == '"illegal" "memory" "OR" "access"'
    assert fts_query("  ") == ""


def test_cli_search_ranks_by_relevance(kb_args: list[str]) -> None:
    result = runner.invoke(APPS["search"], ["illegal memory access", *kb_args])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "cuda-illegal-memory-access" in first


def test_cli_search_fuzzy_fallback_for_pasted_line(kb_args: list[str]) -> None:
    line = (
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, "
        "internal error, NCCL version 2.14.3 zzqx"
    )
    result = runner.invoke(APPS["search"], [line, *kb_args])
    assert result.exit_code == 0, result.output
    assert "closest known" in result.output
    # an NCCL signature among the three closest ("internal error" is also CUTLASS's wording)
    listed = [row.split()[1] for row in result.output.splitlines()[1:4] if row.split()]
    assert any(name.startswith("nccl-") for name in listed), result.output


def test_cli_search_nothing(kb_args: list[str]) -> None:
    result = runner.invoke(APPS["search"], ["qqqxz", *kb_args])
    assert result.exit_code == 1 and "no signature matches" in result.output


def test_cli_build_reports_up_to_date(tmp_path: Path) -> None:
    root = small_root(tmp_path)
    db = tmp_path / "kb.db"
    first = runner.invoke(APPS["build"], ["--signatures", str(root), "--kb", str(db)])
    assert first.exit_code == 0 and "3 signatures compiled" in first.output
    again = runner.invoke(APPS["build"], ["--signatures", str(root), "--kb", str(db)])
    assert again.exit_code == 0 and "up to date" in again.output


def test_cli_show_renders_every_section(kb_args: list[str]) -> None:
    from triage.history.recorder import record_run
    from triage.models import Hypothesis, InputInfo, Report

    hyp = Hypothesis(
        rank=1,
        signature="kv-cache-no-memory",
        title="t",
        layer="engine",
        severity="error",
        status="fixed",
        score=9.5,
        evidence=[],
    )
    report = Report(inputs=[InputInfo(name="a.log", lines=10, format="plain")], hypotheses=[hyp])
    for _ in range(3):
        record_run(report, host="gpu-3")
    result = runner.invoke(APPS["show"], ["kv-cache-no-memory", *kb_args])
    assert result.exit_code == 0, result.output
    out = result.output
    for part in (
        "layer engine",
        "status fixed",
        "patterns:",
        "differential checks:",
        "fixes (in order):",
        "1. [demonstrated]",
        "verify:",
        "references:",
        "examples:",
        "fired in 3 run(s)",
        "seen 3 times in the last 30 days, last on host gpu-3",
    ):
        assert part in out, part


def test_cli_show_unknown_suggests(kb_args: list[str]) -> None:
    result = runner.invoke(APPS["show"], ["kv-cache-no-memry", *kb_args])
    assert result.exit_code == 2
    assert "did you mean kv-cache-no-memory" in result.output


def test_cli_stats_counts_and_never_fired(kb_args: list[str]) -> None:
    from triage.history.recorder import record_run
    from triage.models import Hypothesis, InputInfo, Report

    hyp = Hypothesis(
        rank=1,
        signature="kv-cache-no-memory",
        title="t",
        layer="engine",
        severity="error",
        status="fixed",
        score=9.5,
        evidence=[],
    )
    record_run(Report(inputs=[InputInfo(name="a.log", lines=1, format="plain")], hypotheses=[hyp]))
    result = runner.invoke(APPS["stats"], [*kb_args, "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    assert sum(data["layer"].values()) == data["signatures"]
    assert set(data["fix_confidence"]) <= {"demonstrated", "suggested", "lead"}
    assert "kv-cache-no-memory" not in data["never_fired"]
    assert "cuda-illegal-memory-access" in data["never_fired"]


def test_repo_root_is_where_signatures_live() -> None:
    assert SIGNATURES == ROOT / "signatures"
