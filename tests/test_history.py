"""Triage history on a real SQLite file: recording real corpus reports, listing, stats, seen
summaries, clustering of unrecognized lines across runs, drafting a signature from a real cluster,
feedback and precision, and clean errors for damaged or foreign databases."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from triage.api import Engine
from triage.history import HistoryError, query, record_run, seen_summary
from triage.history import cluster as clusters
from triage.history.cli import APPS
from triage.history.draft import draft_cluster, template_regex
from triage.history.schema import connect, opened
from triage.kb import store
from triage.kb.load import load_signature_file
from triage.kb.paths import default_signature_dir
from triage.models import Hypothesis, InputInfo, Report, Unrecognized

CORPUS = ROOT / "corpus"
# Real logs whose reports carry unrecognized lines: the NCCL "internal error" pair shares
# "ncclInternalError: Internal check failed." and the two systemd exits differ only in the unit
# name. The exits are cut out of their logs (line 2 and line 49): after the diagnosed failure that
# precedes them in the full log they are that failure's tail, not unrecognized.
NCCL_A = CORPUS / "engine" / "nccl-2.14-no-socket-interface-internal-error.log"
NCCL_B = CORPUS / "engine" / "nccl-vllm-ray-proxy-call-connect-failed.log"
UNIT_A_SOURCE = (CORPUS / "node" / "seed-N14-invalid-wheel-filename.log", 2)
UNIT_B_SOURCE = (CORPUS / "engine" / "seed-e25-qwen38-awq-vision-tower-tp2.log", 49)
KV_OOM = ROOT / "examples" / "vllm-kv-cache-oom.log"
runner = CliRunner()
DAY = 86400.0


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_DB", str(tmp_path / "history.db"))
    monkeypatch.setenv("TRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRIAGE_KB", raising=False)


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kb") / "kb.db"
    store.build(default_signature_dir(), path)
    return path


def _excerpt(source: tuple[Path, int], target: Path) -> Path:
    path, line = source
    target.write_bytes(path.read_bytes().splitlines(keepends=True)[line - 1])
    return target


# names of the excerpts, written to a temporary directory by the `reports` fixture
UNIT_A = Path("unit-exit-vllm-venv.log")
UNIT_B = Path("unit-exit-vllm.log")


@pytest.fixture(scope="module")
def reports(kb_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Report]:
    engine = Engine(store.load_current(default_signature_dir(), kb_path))
    out = tmp_path_factory.mktemp("units")
    unit_a = _excerpt(UNIT_A_SOURCE, out / UNIT_A.name)
    unit_b = _excerpt(UNIT_B_SOURCE, out / UNIT_B.name)
    return {p.name: engine.run([str(p)]) for p in (NCCL_A, NCCL_B, unit_a, unit_b, KV_OOM)}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.db"


@pytest.fixture
def filled(db: Path, reports: dict[str, Report]) -> Iterator[Path]:
    now = time.time()
    hosts = {
        NCCL_A.name: "gpu-1",
        NCCL_B.name: "gpu-2",
        UNIT_A.name: "gpu-3",
        UNIT_B.name: "gpu-3",
        KV_OOM.name: "gpu-3",
    }
    for i, (name, report) in enumerate(reports.items()):
        record_run(report, db, run_id=f"job-{i}", host=hosts[name], at=now - (5 - i) * 60)
    yield db


def test_record_stores_inputs_hits_and_unrecognized(
    filled: Path, reports: dict[str, Report]
) -> None:
    with opened(filled) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 5
        digest = reports[KV_OOM.name].inputs[0].digest
        row = conn.execute(
            "SELECT i.name, i.lines, r.host, r.run_id, r.engine_version FROM inputs i "
            "JOIN runs r ON r.id = i.run WHERE i.digest = ?",
            (digest,),
        ).fetchone()
        assert row[0] == str(KV_OOM) and row[1] > 0 and row[2] == "gpu-3" and row[3] == "job-4"
        assert row[4] and row[4].startswith("vllm ")
        top = conn.execute(
            "SELECT signature, rank, score FROM hits h JOIN runs r ON r.id = h.run "
            "WHERE r.run_id = 'job-4' AND explained_by IS NULL ORDER BY rank"
        ).fetchone()
        assert top[0] == "kv-cache-no-memory" and top[1] == 1 and top[2] > 0
        unknown = conn.execute("SELECT count(*) FROM unknown_lines").fetchone()[0]
    # unrecognized lines and lines only the message catalog located: no curated signature explains either
    located = sum(h.basis == "located" for r in reports.values() for h in r.hypotheses)
    assert unknown == sum(len(r.unrecognized) for r in reports.values()) + located > 0


def test_pragmas_read_back(db: Path) -> None:
    conn = connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        conn.close()


def test_history_command_lists_recent_runs(filled: Path) -> None:
    result = runner.invoke(APPS["history"], [])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "run" in lines[0] and "fired" in lines[0]
    assert "kv-cache-no-memory" in lines[2] and "job-4" in lines[2]  # newest first
    only = runner.invoke(APPS["history"], ["--signature", "kv-cache-no-memory", "--format", "json"])
    assert [r["run_id"] for r in json.loads(only.output)] == ["job-4"]


def test_clusters_join_across_runs(filled: Path) -> None:
    with opened(filled) as conn:
        rows = query.list_clusters(conn)
        by_template = {r.template: r for r in rows}
        nccl = by_template["ncclInternalError: Internal check failed."]
        assert nccl.runs == 2 and set(nccl.hosts) == {"gpu-1", "gpu-2"}
        # 'vllm.service' and 'vllm-venv.service' exits join one cluster by similarity.
        units = [r for r in rows if "Main process exited" in r.template]
        assert len(units) == 1 and units[0].runs == 2
        detail = query.cluster_detail(conn, units[0].id)
        assert len(detail.templates) == 2 and min(s for _, s, _ in detail.templates) < 100
    assert rows[0].runs >= rows[-1].runs  # biggest first


def test_cluster_assignment_rules(db: Path) -> None:
    with opened(db) as conn:
        ids = []
        for template in (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <N> MiB",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate <N> MiB",
            "ValueError: CUDA out of memory. Tried to allocate <N> MiB",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <N> MiB",
        ):
            conn.execute("BEGIN IMMEDIATE")
            ids.append(clusters.assign(conn, template, time.time()))
            conn.execute("COMMIT")
    assert ids[0] == ids[1] == ids[3]  # versions differ in the module path: one cluster
    assert ids[2] != ids[0]  # another exception class never joins
    assert clusters.parse_cluster_id("#12") == clusters.parse_cluster_id("U12") == 12


def test_unknown_command_lists_and_shows(filled: Path) -> None:
    result = runner.invoke(APPS["unknown"], [])
    assert result.exit_code == 0, result.output
    assert "ncclInternalError: Internal check failed." in result.output
    with opened(filled) as conn:
        cid = next(r.id for r in query.list_clusters(conn) if r.template.startswith("ncclInternal"))
    shown = runner.invoke(APPS["unknown"], ["show", str(cid)])
    assert shown.exit_code == 0, shown.output
    assert "2 runs" in shown.output and "gpu-2" in shown.output and NCCL_B.name in shown.output
    missing = runner.invoke(APPS["unknown"], ["show", "9999"])
    assert missing.exit_code == 2 and "no cluster 9999" in missing.output


def _nccl_error_cluster(db: Path) -> int:
    with opened(db) as conn:
        return next(
            r.id
            for r in query.list_clusters(conn)
            if r.template.startswith("RuntimeError: NCCL error in:")
        )


def test_draft_of_a_real_cluster_passes_the_schema_once_filled(
    filled: Path, kb_path: Path, tmp_path: Path
) -> None:
    import yaml

    from triage.kb.lint import check_examples, check_generic, check_linear_time, check_syntax, lint

    cid = _nccl_error_cluster(filled)
    kb = store.load_current(default_signature_dir(), kb_path)
    with opened(filled) as conn:
        result = draft_cluster(conn, cid, kb.signatures)
    assert result.examples and result.examples[0].startswith("RuntimeError: NCCL error in:")
    assert result.related and all(r in kb.by_id for r in result.related)
    # the closest signatures by text: an NCCL one among the first three (the knowledge base also
    # knows other "internal error" messages, CUTLASS's among them)
    assert any("nccl" in r for r in result.related[:3])
    # As drafted: the TODOs make it fail.
    root = tmp_path / "signatures"
    shutil.copytree(default_signature_dir(), root)
    raw = root / "engine" / f"{result.id}.yaml"
    raw.write_text(result.text)
    sig, errors = load_signature_file(raw)
    assert sig is None and {e.field for e in errors} >= {"title", "layer"}
    # A human fills in title, layer and fixes: now it passes the schema and every lint rule.
    data = yaml.safe_load(result.text)
    data.update(
        title="NCCL internal error during a collective (no socket interface)",
        layer="engine",
        fixes=[{"do": "Set NCCL_SOCKET_IFNAME to a real interface", "confidence": "lead"}],
    )
    raw.write_text(yaml.safe_dump(data, sort_keys=False))
    sig, errors = load_signature_file(raw)
    assert sig is not None and errors == [], errors
    assert sig.provenance.reproduction and f"cluster {cid}" in sig.provenance.reproduction
    path = str(raw)
    for rule in (check_syntax, check_examples, check_generic, check_linear_time):
        assert rule(sig, path) == [], rule.__name__
    assert [i for i in lint(root, timing=False) if i.path == path] == []


def test_draft_command_writes_a_file(
    filled: Path, tmp_path: Path, kb_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIAGE_KB", str(kb_path))
    cid = _nccl_error_cluster(filled)
    out = tmp_path / "draft.yaml"
    result = runner.invoke(APPS["draft"], [str(cid), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "title: TODO" in text and "examples:" in text and "provenance:" in text
    again = runner.invoke(APPS["draft"], [str(cid), "-o", str(out)])
    assert again.exit_code == 2 and "--force" in again.output


def test_template_regex_matches_what_the_masks_replaced() -> None:
    import re

    regex = template_regex("RuntimeError: NCCL error in: ..<PATH>:<N>, internal error (<HEX>)")
    line = (
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201,"
        " internal error (0x7f0fdcb92b90)"
    )
    assert re.search(regex, line)
    assert not re.search(regex, line.replace("internal", "remote"))


def test_stats_and_seen_summary(db: Path, reports: dict[str, Report]) -> None:
    now = time.time()
    report = reports[KV_OOM.name]
    for days_ago, host in ((40, "gpu-9"), (20, "gpu-1"), (10, "gpu-2"), (1, "gpu-3")):
        record_run(report, db, host=host, at=now - days_ago * DAY)
    summary = seen_summary(db, ["kv-cache-no-memory", "cuda-illegal-memory-access"], 30)
    assert summary == {"kv-cache-no-memory": "seen 3 times in the last 30 days, last on host gpu-3"}
    assert seen_summary(db.with_name("none.db"), ["kv-cache-no-memory"]) == {}
    result = runner.invoke(APPS["stats"], ["--since", "30d", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    kv = next(s for s in data["signatures"] if s["signature"] == "kv-cache-no-memory")
    assert (
        kv["runs"] == 3
        and kv["last_host"] == "gpu-3"
        and set(kv["hosts"]) == {"gpu-1", "gpu-2", "gpu-3"}
    )
    assert sum(kv["weekly"]) == 4 and len(kv["weekly"]) == 8  # the trend spans 8 weeks
    assert {v["version"] for v in data["engine_versions"]} == {kv_version(report)}
    text = runner.invoke(APPS["stats"], ["--since", "all"])
    assert "kv-cache-no-memory" in text.output and "per host" in text.output
    assert "gpu-9" in text.output


def kv_version(report: Report) -> str:
    return f"vllm {report.facts['vllm_version']}"


def test_feedback_and_precision(
    filled: Path, kb_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triage.kb.commands import APPS as KB_APPS

    monkeypatch.setenv("TRIAGE_KB", str(kb_path))
    ok = runner.invoke(APPS["feedback"], ["job-4", "--confirm", "kv-cache-no-memory"])
    assert ok.exit_code == 0 and "confirmed" in ok.output
    wrong = runner.invoke(APPS["feedback"], ["2", "--wrong", "nccl-bootstrap-connect-failed"])
    assert wrong.exit_code == 0, wrong.output
    fixed = runner.invoke(APPS["feedback"], ["job-4", "--fixed-by", "3"])
    assert fixed.exit_code == 0 and "#3:" in fixed.output
    bad = runner.invoke(APPS["feedback"], ["job-4", "--confirm", "no-such-signature"])
    assert bad.exit_code == 2 and "unknown signature" in bad.output
    none = runner.invoke(APPS["feedback"], ["job-4"])
    assert none.exit_code == 2
    with opened(filled) as conn:
        prec = query.precision(conn)
    assert prec["kv-cache-no-memory"].value == 1.0
    assert prec["nccl-bootstrap-connect-failed"].value == 0.0
    stats = runner.invoke(KB_APPS["stats"], ["--format", "json"])
    data = json.loads(stats.output)
    assert data["precision"]["kv-cache-no-memory"]["confirmed"] == 1
    assert data["precision"]["nccl-bootstrap-connect-failed"]["wrong"] == 1


def test_arbitrary_bytes_are_stored_safely(db: Path) -> None:
    nasty = "x'); DROP TABLE runs; --\x00\x1b[31m\udcff\u202e RuntimeError: boom"
    report = Report(
        inputs=[InputInfo(name=nasty, lines=1, format="plain")],
        hypotheses=[
            Hypothesis(
                rank=1,
                signature="kv-cache-no-memory",
                title=nasty,
                layer="engine",
                severity="error",
                status="fixed",
                score=1.0,
                evidence=[],
            )
        ],
        unrecognized=[Unrecognized(input=nasty, line=1, text=nasty, fingerprint=nasty)],
        facts={"gpu": nasty, "launch_args": {"k": nasty}},
    )
    run = record_run(report, db, run_id=nasty, host=nasty)
    with opened(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        text = conn.execute("SELECT text FROM unknown_lines WHERE run = ?", (run,)).fetchone()[0]
        assert "DROP TABLE runs" in text and "\x00" not in text
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    listed = runner.invoke(APPS["unknown"], [])
    assert listed.exit_code == 0 and "\x1b" not in listed.output and "\u202e" not in listed.output


@pytest.mark.parametrize("kind", ["garbage", "truncated", "foreign", "newer", "directory"])
def test_bad_database_gives_a_clear_error(
    tmp_path: Path, kind: str, reports: dict[str, Report]
) -> None:
    path = tmp_path / "bad.db"
    if kind == "garbage":
        path.write_bytes(os.urandom(4096))
    elif kind == "truncated":
        for _ in range(30):
            record_run(reports[KV_OOM.name], path)
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = path.read_bytes()
        path.write_bytes(data[:4096] + b"\x13" * 4096 + data[8192 : len(data) // 2])
    elif kind == "foreign":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE photos (id)")
    elif kind == "newer":
        connect(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA user_version = 99")
    else:
        path.mkdir()
    expected = r"move it aside|newer triage|directory|damaged"
    with pytest.raises(HistoryError, match=expected), opened(path) as conn:
        query.list_runs(conn)
        record_run(reports[KV_OOM.name], conn=conn)
    result = runner.invoke(APPS["history"], ["--db", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith("triage: ") and "Traceback" not in result.output
    if kind != "directory":
        with pytest.raises(HistoryError):
            seen_summary(path, ["kv-cache-no-memory"])


def test_cli_records_unless_no_history(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TRIAGE_DB": str(tmp_path / "cli.db"),
        "TRIAGE_CACHE_DIR": str(tmp_path / "cache"),
    }
    for extra in (["--run-id", "ci-7"], ["--no-history"]):
        proc = subprocess.run(
            [sys.executable, "-m", "triage", *extra, str(KV_OOM)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
    with opened(tmp_path / "cli.db") as conn:
        assert [r[0] for r in conn.execute("SELECT run_id FROM runs")] == ["ci-7"]


def test_close_keeps_the_wal_and_every_run_stays_readable(tmp_path: Path) -> None:
    """A recorded run's close does not checkpoint (the WAL stays beside the database, so the next
    run creates no file and syncs nothing); what was written is read back by a new connection."""
    from triage.history import schema

    db = tmp_path / "history.db"
    for n in range(3):
        with opened(db) as conn, schema.write(conn):
            conn.execute("INSERT INTO runs (ts) VALUES (?)", (float(n),))
    if sys.implementation.name == "cpython" and sys.version_info[:2] >= (3, 11):
        assert (tmp_path / "history.db-wal").stat().st_size > 0
    with opened(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 3


def test_no_checkpoint_setting_refuses_a_handle_of_another_file(tmp_path: Path) -> None:
    """The ctypes path checks the handle by its file name before touching it: a connection whose
    file is not the one named is left with SQLite's default."""
    from triage.history import schema

    db = tmp_path / "history.db"
    conn = connect(db)
    try:
        assert schema._no_checkpoint_on_close(conn, db) is (
            sys.implementation.name == "cpython" and sys.version_info[:2] >= (3, 11)
        )
        if not hasattr(conn, "setconfig"):  # the name check is the ctypes path's
            assert schema._no_checkpoint_on_close(conn, tmp_path / "other.db") is False
    finally:
        conn.close()
