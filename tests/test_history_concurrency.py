"""Three writer processes (the CLI, a bot, a follower) record into one history database at once,
300+ transactions each, while a reader lists: zero lock errors, `PRAGMA integrity_check` ok.

Each transaction reads before it writes (cluster lookup of the unrecognized lines), the pattern that
fails at once with SQLITE_BUSY under deferred transactions; `BEGIN IMMEDIATE` makes it wait.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import multiprocessing.queues
import multiprocessing.synchronize
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import ROOT
from triage.api import Engine
from triage.history.schema import connect, opened
from triage.kb import store
from triage.kb.paths import default_signature_dir
from triage.models import Report, Unrecognized

WRITERS = 3
TRANSACTIONS = 300
LOG = ROOT / "corpus" / "engine" / "nccl-2.14-no-socket-interface-internal-error.log"


def _writer(
    db: str,
    report_json: str,
    worker: int,
    out: multiprocessing.queues.Queue[tuple[object, int, list[str]]],
) -> None:
    from triage.history.recorder import record_run

    report = Report.from_json_dict(json.loads(report_json))
    errors: list[str] = []
    done = 0
    conn = connect(db)
    try:
        for i in range(TRANSACTIONS):
            # A new template now and then: a new cluster, created by exactly one writer.
            extra = Unrecognized(
                input="x.log",
                line=i,
                text=f"KeyError: 'w{worker}-{i % 7}'",
                fingerprint=f"KeyError: 'w{worker}-{i % 7}'",
            )
            one = dataclasses.replace(report, unrecognized=[*report.unrecognized, extra])
            try:
                if i % 10 == 0:  # some writers open a fresh connection per run, as the CLI does
                    record_run(one, db, run_id=f"w{worker}-{i}", host=f"host-{worker}")
                else:
                    record_run(one, run_id=f"w{worker}-{i}", host=f"host-{worker}", conn=conn)
                done += 1
            except Exception as exc:  # counted, never raised: the test asserts there are none
                errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
    out.put((worker, done, errors))


def _reader(
    db: str,
    stop: multiprocessing.synchronize.Event,
    out: multiprocessing.queues.Queue[tuple[object, int, list[str]]],
) -> None:
    from triage.history import query

    reads, errors = 0, list[str]()
    while not stop.is_set():
        try:
            with opened(db) as conn:
                query.list_runs(conn, limit=5)
                query.list_clusters(conn, limit=5)
            reads += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    out.put(("reader", reads, errors))


@pytest.fixture
def report_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    # no message catalog: this log's lines stay unrecognized, the cluster lookups this test needs
    monkeypatch.setenv("TRIAGE_CATALOG", str(tmp_path / "no-catalog.sqlite"))
    kb = store.load_current(default_signature_dir(), tmp_path / "kb.db")
    report = Engine(kb).run([str(LOG)])
    assert report.unrecognized and report.hypotheses
    return json.dumps(report.to_json_dict())


def test_three_writers_no_lock_errors(tmp_path: Path, report_json: str) -> None:
    db = str(tmp_path / "history.db")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop = ctx.Event()
    writers = [ctx.Process(target=_writer, args=(db, report_json, w, out)) for w in range(WRITERS)]
    reader = ctx.Process(target=_reader, args=(db, stop, out))
    for p in writers:
        p.start()
    reader.start()
    results = [out.get(timeout=300) for _ in writers]
    stop.set()
    results.append(out.get(timeout=60))
    for p in [*writers, reader]:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [e for _, _, errs in results for e in errs]
    assert errors == [], errors[:5]
    assert sorted(done for who, done, _ in results if who != "reader") == [TRANSACTIONS] * WRITERS
    assert next(done for who, done, _ in results if who == "reader") > 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == WRITERS * TRANSACTIONS
        report = json.loads(report_json)
        per_run = len(report["unrecognized"]) + 1
        lines = conn.execute("SELECT count(*) FROM unknown_lines").fetchone()[0]
        assert lines == WRITERS * TRANSACTIONS * per_run
        # Every template is in exactly one cluster, though three writers met it concurrently.
        dupes = conn.execute(
            "SELECT count(*) FROM (SELECT template FROM cluster_templates "
            "GROUP BY template HAVING count(*) > 1)"
        ).fetchone()[0]
        assert dupes == 0
        clusters = conn.execute(
            "SELECT count(DISTINCT cluster) FROM cluster_templates WHERE template LIKE 'KeyError%'"
        ).fetchone()[0]
        assert clusters >= 1
