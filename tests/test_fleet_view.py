"""The fleet view: `triage history serve` over a history built from the corpus (`triage batch
--local` then `triage history import`), in Datasette, looked at in a real headless Chromium: every
canned query page shows its title and rows, the chart page draws the chart, and a screenshot is
taken. The SQL of the canned queries is also checked against the history directly."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from triage.fleet import serve as view
from triage.history.recorder import record_run
from triage.models import InputInfo, Report

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_datasette = pytest.mark.skipif(
    not view.datasette_available(),
    reason="datasette and datasette-vega are not installed (pip install '.[fleet]')",
)


def _triage(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "triage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A history over a copy of the corpus whose files were written over two weeks (an archive's
    mtimes), so the views have a time axis."""
    base = tmp_path_factory.mktemp("fleet")
    archive = base / "archive"
    shutil.copytree(ROOT / "corpus", archive, ignore=shutil.ignore_patterns("*.yaml", "*.py"))
    now = time.time()
    for i, path in enumerate(sorted(p for p in archive.rglob("*") if p.is_file())):
        when = now - (i % 14) * DAY
        os.utime(path, (when, when))
    done = _triage("batch", "--local", str(archive), "--out", str(base / "out"))
    assert done.returncode == 0, done.stderr
    db = base / "fleet.db"
    done = _triage("history", "import", str(base / "out" / "rows.jsonl"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db


def _query(db: Path, name: str, **params: Any) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        sql = view.QUERIES[name]["sql"]
        names = {"days": ""} if ":days" in sql else {}
        names.update(params)
        return [dict(r) for r in conn.execute(sql, names)]
    finally:
        conn.close()


def test_snapshot_is_consistent_and_leaves_the_source_alone(fleet_db: Path, tmp_path: Path) -> None:
    source = tmp_path / "live.db"
    shutil.copy(fleet_db, source)
    # A run recorded just now sits in the write-ahead log: the snapshot must include it.
    record_run(
        Report(inputs=[InputInfo(name="late.log", lines=1, format="plain")]),
        db_path=source,
        run_id="late",
        host="late-host",
    )
    before = source.read_bytes()
    snap = view.snapshot(source, tmp_path / "snap" / "history.db")
    assert source.read_bytes() == before
    conn = sqlite3.connect(snap)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("SELECT count(*) FROM runs WHERE run_id = 'late'").fetchone()[0] == 1
        layers = {r[0] for r in conn.execute("SELECT DISTINCT layer FROM signatures")}
        assert layers == {"node", "harness", "engine", "model"}
    finally:
        conn.close()


def test_canned_queries_say_what_the_history_holds(fleet_db: Path, tmp_path: Path) -> None:
    snap = view.snapshot(fleet_db, tmp_path / "history.db")
    per_day = _query(snap, "hits_per_day")
    assert len({r["day"] for r in per_day}) >= 10  # two weeks of mtimes
    assert {r["layer"] for r in per_day} <= {"node", "harness", "engine", "model"}
    conn = sqlite3.connect(snap)
    diagnosed = conn.execute(
        "SELECT count(DISTINCT run) FROM hits WHERE explained_by IS NULL"
    ).fetchone()[0]
    hosts = conn.execute("SELECT count(DISTINCT host) FROM runs").fetchone()[0]
    runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    conn.close()
    assert sum(r["runs"] for r in _query(snap, "per_host")) == runs
    assert len(_query(snap, "per_run")) == min(runs, 500)  # the page lists the latest 500
    assert len(_query(snap, "per_host")) == hosts
    assert max(r["runs"] for r in per_day) <= diagnosed
    clusters = _query(snap, "unknown_clusters")
    assert clusters and all(r["example"] and r["example_at"] for r in clusters)
    assert [r["runs"] for r in clusters] == sorted((r["runs"] for r in clusters), reverse=True)
    ranked = _query(snap, "signatures_ranked")
    assert ranked[0]["runs"] >= ranked[-1]["runs"]
    # Stopped firing, counted back from the latest run: with a 3-day window the signatures last
    # seen earlier are listed, with their days of silence; a 30-day window lists none of those.
    recent = _query(snap, "stopped_firing", days="3")
    silent = [r for r in recent if r["runs"]]
    assert silent and all(r["days_silent"] > 3 for r in silent)
    assert not [r for r in _query(snap, "stopped_firing") if r["runs"]]
    never = [r for r in recent if not r["runs"]]
    fired = {r["signature"] for r in ranked}
    assert not {r["signature"] for r in never} & fired


def test_metadata_has_titles_descriptions_units_and_every_query() -> None:
    meta = view.metadata(Path("/x/history.db"))
    db = meta["databases"][view.DATABASE]
    assert set(db["queries"]) == set(view.QUERIES)
    assert all(
        q["title"] and (q.get("description") or q.get("description_html"))
        for q in db["queries"].values()
    )
    assert db["tables"]["inputs"]["units"] == {"bytes": "byte"}
    assert all(t["title"] and t["description"] for t in db["tables"].values())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(fleet_db: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "TRIAGE_CACHE_DIR": str(tmp_path / "cache")}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "triage",
            "history",
            "serve",
            "--db",
            str(fleet_db),
            "-p",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/versions.json", timeout=5) as resp:
                    versions = json.load(resp)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    pytest.fail(f"serve did not start: {(tmp_path / 'serve.log').read_text()}")
                time.sleep(0.5)
        assert versions["datasette"]["version"].startswith("0.")
        with urllib.request.urlopen(f"{url}/-/databases.json", timeout=5) as resp:
            (database,) = json.load(resp)
        assert database["name"] == view.DATABASE and database["is_mutable"] is False
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _chromium(url: str, *mode: str, profile: Path) -> str:
    assert CHROMIUM
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--window-size=1280,1400",
            "--virtual-time-budget=30000",  # let the chart fetch its JSON and draw
            *mode,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class _Page(HTMLParser):
    """The elements a person looks for: the heading, the results table, the chart's marks."""

    def __init__(self) -> None:
        super().__init__()
        self.h1 = ""
        self.tables: list[str] = []
        self.cells: list[str] = []
        self.marks: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "table":
            self.tables.append(attr.get("class") or "")
        if tag in ("canvas", "svg") and "marks" in (attr.get("class") or ""):
            self.marks.append(tag)
        if tag in ("h1", "td"):
            self._in = tag
            if tag == "td":
                self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "h1":
            self.h1 += data
        elif self._in == "td":
            self.cells[-1] += data


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@needs_datasette
def test_fleet_view_in_a_browser(served: str, fleet_db: Path, tmp_path: Path) -> None:
    profile = tmp_path / "chromium-profile"
    index = _Page()
    index.feed(_chromium(f"{served}/{view.DATABASE}", "--dump-dom", profile=profile))
    assert index.h1.strip() == "triage history"
    snap = view.snapshot(fleet_db, tmp_path / "check" / "history.db")
    for name, query in view.QUERIES.items():
        page = _Page()
        page.feed(_chromium(f"{served}/{view.DATABASE}/{name}", "--dump-dom", profile=profile))
        assert page.h1.strip() == query["title"], name
        assert "rows-and-columns" in page.tables, name
        rows = _query(snap, name)
        assert rows, name
        first = next(str(v) for v in rows[0].values() if v is not None)
        assert first in [c.strip() for c in page.cells], (name, first)
    chart_url = f"{served}/{view.DATABASE}/hits_per_day{view.CHART_FRAGMENT}"
    chart = _Page()
    chart.feed(_chromium(chart_url, "--dump-dom", profile=profile))
    assert chart.marks, "the chart was not drawn (no canvas or svg of marks)"
    shot = Path(os.environ.get("TRIAGE_SCREENSHOT_DIR") or tmp_path) / "fleet-view-chart.png"
    _chromium(chart_url, f"--screenshot={shot}", profile=profile)
    assert shot.stat().st_size > 20_000  # a page with a chart, not a blank one


def test_without_datasette_serve_says_how_to_install(fleet_db: Path) -> None:
    blocked = (
        "import sys; sys.modules['datasette'] = None; from triage.cli import main; "
        "main(sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked, "history", "serve", "--db", str(fleet_db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "pip install 'llm-triage[fleet]'" in done.stderr
