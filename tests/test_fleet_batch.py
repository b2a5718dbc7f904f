"""`triage batch` over the corpus: on a local Ray with 2 CPUs its rows equal the serial
`triage --format json` of each file; --local gives the same rows; the summary counts what the
rows say; `triage history import` puts them in the history for `triage history` and `unknown`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from triage.api import Engine
from triage.read import expand_inputs
from triage.render.json import render_json

ROOT = Path(__file__).resolve().parent.parent
RAY_RUN_LIMIT_S = 600  # a local Ray's start plus 467 files on 2 shared cores, with room to spare

needs_ray = pytest.mark.skipif(find_spec("ray") is None, reason="Ray is not installed")


def _triage(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


def _comparable(hypotheses: list[dict[str, Any]], unrecognized: list[dict[str, Any]]) -> Any:
    """What both a row and a full report say: hypotheses with their evidence lines, and the
    unrecognized lines with their fingerprints."""
    return (
        [
            (
                h["rank"],
                h["signature"],
                h["layer"],
                h["severity"],
                h["score"],
                [(e["line"], e["text"], e["role"], e["count"]) for e in h["evidence"]],
                [x if isinstance(x, str) else x["signature"] for x in h["explains"]],
            )
            for h in hypotheses
        ],
        [(u["line"], u["text"], u["fingerprint"], u["count"]) for u in unrecognized],
    )


@pytest.fixture(scope="module")
def corpus_files() -> list[str]:
    old = Path.cwd()
    os.chdir(ROOT)
    try:
        return [name for name, _ in expand_inputs(["corpus"])]
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("batch-local")
    done = _triage("batch", "--local", "corpus/", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "serially" in done.stdout
    return out, _rows(out)


def test_local_rows_equal_serial_reports(
    local_rows: tuple[Path, list[dict[str, Any]]],
    corpus_files: list[str],
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, rows = local_rows
    assert [r["path"] for r in rows] == corpus_files  # one row per input, in input order
    monkeypatch.chdir(ROOT)
    for row in rows:
        report = json.loads(render_json(engine.run([row["path"]])))
        assert row["digest"] == report["inputs"][0]["digest"], row["path"]
        assert _comparable(row["hypotheses"], row["unrecognized"]) == _comparable(
            report["hypotheses"], report["unrecognized"]
        ), row["path"]


def test_rows_equal_the_real_cli_on_files_of_every_layer(
    local_rows: tuple[Path, list[dict[str, Any]]],
) -> None:
    """The in-process reference is the CLI's: a few files through `triage --format json`."""
    _, rows = local_rows
    by_layer: dict[str, dict[str, Any]] = {}
    for row in rows:
        layer = row["path"].split("/")[1]
        if row["hypotheses"] or row["unrecognized"]:
            by_layer.setdefault(layer, row)
    assert {"node", "engine", "model", "harness"} <= set(by_layer)
    for row in by_layer.values():
        done = _triage("--format", "json", "--no-history", row["path"])
        assert done.returncode in (0, 1), done.stderr
        report = json.loads(done.stdout)
        assert _comparable(row["hypotheses"], row["unrecognized"]) == _comparable(
            report["hypotheses"], report["unrecognized"]
        )


@needs_ray
def test_ray_rows_equal_serial_rows(
    local_rows: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """The acceptance test: a local Ray with 2 CPUs (2 actors) over corpus/, bounded in time."""
    out = tmp_path / "ray"
    done = _triage("batch", "corpus/", "--out", str(out), "--workers", "2", timeout=RAY_RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on Ray, 2 workers" in done.stdout
    local_out, _ = local_rows
    assert (out / "rows.jsonl").read_bytes() == (local_out / "rows.jsonl").read_bytes()
    assert json.loads((out / "summary.json").read_text()) == json.loads(
        (local_out / "summary.json").read_text()
    )


def test_summary_counts_what_the_rows_say(local_rows: tuple[Path, list[dict[str, Any]]]) -> None:
    out, rows = local_rows
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files"] == len(rows)
    assert summary["failed"] == sum(r["failed"] for r in rows)
    fired: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    files_per_fp: Counter[str] = Counter()
    for r in rows:
        fired.update(
            {h["signature"] for h in r["hypotheses"]}
            | {s for h in r["hypotheses"] for s in h["explains"]}
        )
        layers.update({h["layer"] for h in r["hypotheses"]})
        files_per_fp.update({u["fingerprint"] for u in r["unrecognized"]})
    assert summary["signatures"] == dict(fired)
    assert summary["layers"] == dict(layers)
    assert set(summary["layers"]) <= {"node", "harness", "engine", "model"}
    clusters = summary["unknown_clusters"]
    assert clusters, "the corpus has unexplained lines"
    assert [c["files"] for c in clusters] == sorted((c["files"] for c in clusters), reverse=True)
    assert clusters[0]["files"] == max(files_per_fp.values())
    for c in clusters:
        assert files_per_fp[c["fingerprint"]] == c["files"]
        path, line = c["where"].rsplit(":", 1)
        row = next(r for r in rows if r["path"] == path)
        assert any(
            u["line"] == int(line) and u["text"] == c["example"] for u in row["unrecognized"]
        )
    healthy = [r for r in rows if r["path"].startswith("corpus/healthy/")]
    assert healthy and not any(h["severity"] == "error" for r in healthy for h in r["hypotheses"])


def test_parquet_holds_the_same_rows(local_rows: tuple[Path, list[dict[str, Any]]]) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
    out, rows = local_rows
    table = pq.read_table(out / "rows.parquet").to_pylist()
    assert [t["path"] for t in table] == [r["path"] for r in rows]
    for t, r in zip(table, rows, strict=True):
        assert t["signatures"] == [h["signature"] for h in r["hypotheses"]]
        assert t["fingerprints"] == [u["fingerprint"] for u in r["unrecognized"]]
        assert json.loads(t["hypotheses"]) == r["hypotheses"]


def test_without_ray_it_says_how_to_install_and_local_still_runs(tmp_path: Path) -> None:
    blocked = (
        "import sys; sys.modules['ray'] = None; from triage.cli import main; main(sys.argv[1:])"
    )
    run = [sys.executable, "-c", blocked, "batch", "corpus/node", "--out"]
    done = subprocess.run(
        [*run, str(tmp_path / "a")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "pip install 'llm-triage[ray]'" in done.stderr and "--local" in done.stderr
    done = subprocess.run(
        [*run, str(tmp_path / "b"), "--local"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert len(_rows(tmp_path / "b")) == len(list((ROOT / "corpus/node").glob("*.log")))


def test_an_unreadable_input_gets_an_error_row(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "empty.log").write_bytes(b"")
    (logs / "oom.log").write_bytes((ROOT / "examples/vllm-kv-cache-oom.log").read_bytes())
    done = _triage("batch", "--local", str(logs), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    rows = {Path(r["path"]).name: r for r in _rows(tmp_path / "out")}
    assert rows["empty.log"]["error"] == "empty input: nothing to triage"
    assert rows["oom.log"]["error"] is None and rows["oom.log"]["hypotheses"]


def test_history_import_feeds_history_and_unknown(
    local_rows: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    out, rows = local_rows
    db = str(tmp_path / "fleet.db")
    done = _triage("history", "import", str(out / "rows.jsonl"), "--db", db)
    assert done.returncode == 0, done.stderr
    assert f"imported {len(rows)} runs" in done.stdout
    again = _triage("history", "import", str(out / "rows.jsonl"), "--db", db)
    assert f"imported 0 runs into {db}, {len(rows)} already there" in again.stdout

    listed = json.loads(_triage("history", "--db", db, "-n", "100000", "-f", "json").stdout)
    assert len(listed) == len(rows)
    by_path = {r["path"]: r for r in rows}
    for run in listed:
        row = by_path[run["run_id"]]
        assert run["inputs"] == [row["path"]]
        # a line the message catalog located is not a signature's hit: it goes to the unknown queue
        curated = [h for h in row["hypotheses"] if h.get("basis") != "located"]
        assert run["signatures"] == [h["signature"] for h in curated]
        located = [h for h in row["hypotheses"] if h.get("basis") == "located"]
        assert run["unknown"] == len(row["unrecognized"]) + len(located)
        assert run["host"] == Path(row["path"]).parent.name
        assert run["ts"] == pytest.approx(row["mtime"])

    clusters = json.loads(_triage("unknown", "--db", db, "-n", "100000", "-f", "json").stdout)
    located_evidence = [
        h["evidence"][0]
        for r in rows
        for h in r["hypotheses"]
        if h.get("basis") == "located" and h["evidence"]
    ]
    assert sum(c["lines"] for c in clusters) == sum(
        u["count"] for r in rows for u in r["unrecognized"]
    ) + sum(e["count"] for e in located_evidence)
    texts = {u["text"] for r in rows for u in r["unrecognized"]} | {
        e["text"] for e in located_evidence
    }
    assert all(c["example"] in texts for c in clusters)


def test_history_import_refuses_what_is_not_a_batch_row(tmp_path: Path) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"schema": "triage.report/1"}\n')
    done = _triage("history", "import", str(bad), "--db", str(tmp_path / "h.db"))
    assert done.returncode == 2
    assert f"{bad}:1: not a batch row" in done.stderr
