"""Never destroy a user's file (reliability audit F10, issue 17 point 3): every path triage writes
(`--kb`, `kb build --kb`, `--db`, `kb docs -o`, a run directory's `triage.md` / `triage.json`)
refuses a file that is not triage's with one line on stderr and exit 2, and leaves it
byte-identical; a missing or zero-length file is new; triage's own files are replaced atomically.

On main `--kb precious.log` replaced the log with SQLite, `kb docs -o` and `triage run` overwrote
any file, and `--db precious.log` only printed a note."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"


def _triage(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _precious(tmp_path: Path, name: str = "precious.log") -> Path:
    path = tmp_path / name
    path.write_bytes(EXAMPLE.read_bytes())
    return path


def _someones_database(tmp_path: Path) -> Path:
    path = tmp_path / "someone.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO accounts (name) VALUES ('alice')")
    return path


def _refused(proc: subprocess.CompletedProcess[str], path: Path) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("make", [_precious, _someones_database], ids=["log", "sqlite"])
def test_kb_refuses_a_file_that_is_not_a_knowledge_base(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    before = _digest(target)
    proc = _triage("--no-history", "--kb", str(target), str(EXAMPLE))
    _refused(proc, target)
    assert _digest(target) == before


def test_kb_build_refuses_a_foreign_file(tmp_path: Path) -> None:
    target = _precious(tmp_path)
    before = _digest(target)
    proc = _triage("kb", "build", "--kb", str(target))
    assert proc.returncode == 2, proc.stderr
    assert str(target) in proc.stderr and "refusing to overwrite" in proc.stderr
    assert _digest(target) == before


def test_kb_zero_length_is_new_and_its_own_file_is_rebuilt(tmp_path: Path) -> None:
    target = tmp_path / "kb.db"
    target.touch()
    proc = _triage("--no-history", "--kb", str(target), str(EXAMPLE))
    assert proc.returncode == 1, proc.stderr
    assert target.read_bytes().startswith(b"SQLite format 3\0")
    proc = _triage("kb", "build", "--force", "--kb", str(target))
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name != "kb.db"]  # no temporary left


def test_kb_damaged_but_ours_is_rebuilt(tmp_path: Path) -> None:
    target = tmp_path / "kb.db"
    assert _triage("kb", "build", "--kb", str(target)).returncode == 0
    data = target.read_bytes()
    target.write_bytes(data[:4096] + b"\xff" * 4096)  # header kept, body gone
    proc = _triage("--no-history", "--kb", str(target), str(EXAMPLE))
    assert proc.returncode == 1, proc.stderr


@pytest.mark.parametrize("make", [_precious, _someones_database], ids=["log", "sqlite"])
def test_db_refuses_a_file_that_is_not_a_history(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    before = _digest(target)
    proc = _triage("--db", str(target), str(EXAMPLE))
    _refused(proc, target)
    assert _digest(target) == before


def test_db_zero_length_is_a_new_history(tmp_path: Path) -> None:
    target = tmp_path / "history.db"
    target.touch()
    proc = _triage("--db", str(target), str(EXAMPLE))
    assert proc.returncode == 1, proc.stderr
    assert target.read_bytes().startswith(b"SQLite format 3\0")


def test_kb_docs_refuses_a_page_it_did_not_write(tmp_path: Path) -> None:
    target = tmp_path / "notes.md"
    target.write_text("# my notes\n\nhand-written, not generated\n")
    before = _digest(target)
    proc = _triage("kb", "docs", "-o", str(target))
    _refused(proc, target)
    assert _digest(target) == before
    own = tmp_path / "signatures.md"
    assert _triage("kb", "docs", "-o", str(own)).returncode == 0
    own.write_text(own.read_text() + "stale line\n")
    assert _triage("kb", "docs", "-o", str(own)).returncode == 0  # its own page: replaced
    assert "stale line" not in own.read_text()


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "server.log").write_bytes(EXAMPLE.read_bytes())
    return run


@pytest.mark.parametrize("name", ["triage.md", "triage.json"])
def test_triage_run_keeps_a_users_file_of_the_same_name(tmp_path: Path, name: str) -> None:
    run = _run_dir(tmp_path)
    mine = run / name
    mine.write_text("my own notes about this run\n")
    before = _digest(mine)
    proc = _triage("run", str(run))
    assert proc.returncode == 2, proc.stderr
    assert str(mine) in proc.stderr and "refusing to overwrite" in proc.stderr
    assert _digest(mine) == before
    other = run / ({"triage.md", "triage.json"} - {name}).pop()
    assert not other.exists()  # refused before either file was written


def test_triage_run_replaces_its_own_outputs(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    assert _triage("run", str(run)).returncode == 1
    first = (run / "triage.json").read_text()
    assert _triage("run", str(run)).returncode == 1
    assert (run / "triage.json").read_text() == first
    assert sorted(p.name for p in run.iterdir()) == ["server.log", "triage.json", "triage.md"]


def test_write_atomic_keeps_the_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    from triage.safewrite import write_atomic

    target = tmp_path / "out.md"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]


def test_bench_ledger_keeps_a_users_csv(tmp_path: Path) -> None:
    results = ROOT / "tests" / "fixtures" / "bench" / "bench_h256_00.json"
    mine = tmp_path / "my-table.csv"
    mine.write_text("name,score\nalice,1\n")
    before = _digest(mine)
    proc = _triage("bench", str(results), "--ledger", str(mine))
    _refused(proc, mine)
    assert _digest(mine) == before
    own = tmp_path / "ledger.csv"
    assert _triage("bench", str(results), "--ledger", str(own)).returncode == 1
    assert _triage("bench", str(results), "--ledger", str(own)).returncode == 1  # its own: replaced


def test_bench_plot_file_keeps_a_users_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = ROOT / "tests" / "fixtures" / "bench" / "bench_h256_00.json"
    mine = tmp_path / "holiday.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(512))  # someone's PNG, not matplotlib's
    before = _digest(mine)
    proc = _triage("bench", str(results), "--plot-file", str(mine))
    _refused(proc, mine)
    assert _digest(mine) == before
    own = tmp_path / "plot.png"
    assert _triage("bench", str(results), "--plot-file", str(own)).returncode == 1
    first = own.read_bytes()
    assert first.startswith(b"\x89PNG")
    assert _triage("bench", str(results), "--plot-file", str(own)).returncode == 1  # replaced


def test_probe_bundle_keeps_a_users_files(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    out.mkdir()
    mine = out / "probe.json"
    mine.write_text('{"my": "notes"}\n')
    before = _digest(mine)
    proc = _triage("probe", "--out", str(out), "--timeout", "5")
    _refused(proc, mine)
    assert _digest(mine) == before
    fresh = tmp_path / "fresh"
    assert _triage("probe", "--out", str(fresh), "--timeout", "5").returncode == 0
    assert _triage("probe", "--out", str(fresh), "--timeout", "5").returncode == 0
    assert (fresh / "probe-summary.txt").read_text().startswith("triage probe bundle")
