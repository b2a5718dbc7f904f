"""Record one triage report in the history database (one `BEGIN IMMEDIATE` transaction).

What is stored is always the redacted report (`triage.redact.redact_report`), whoever calls and
whatever `--no-redact` said: the database outlives the terminal it was shown in.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from triage.history.schema import damaged, opened, resolve, safe_text, write
from triage.models import Report
from triage.redact import redact, redact_report

_ENGINE_FACTS = (("vllm_version", "vllm"), ("sglang_version", "sglang"))


def engine_version(facts: dict[str, Any]) -> str | None:
    """'vllm 0.6.3' / 'sglang 0.4.1' from the report's facts, when the log says."""
    for key, name in _ENGINE_FACTS:
        value = facts.get(key)
        if value:
            return f"{name} {value}"
    return None


def _hostname() -> str:
    """This machine's name (`os.uname` where it exists: `socket` costs an import)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def record_run(
    report: Report,
    db_path: Path | str | None = None,
    run_id: str | None = None,
    host: str | None = None,
    *,
    at: float | None = None,
    kb_digest: str | None = None,
    conn: sqlite3.Connection | None = None,
) -> int:
    """Store a report: inputs, facts, hypotheses (rank, score), unrecognized lines (clustered).

    Returns the run's number (what `triage feedback RUN` takes). `host` defaults to this machine.
    Raises `HistoryError` when the database cannot be used.
    """
    report = redact_report(report)  # idempotent: a report redacted already is unchanged
    if conn is not None:
        return _record(conn, report, run_id, host, at, kb_digest)
    path = resolve(db_path)
    with opened(path) as own:
        try:
            return _record(own, report, run_id, host, at, kb_digest)
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None


def _record(
    conn: sqlite3.Connection,
    report: Report,
    run_id: str | None,
    host: str | None,
    at: float | None,
    kb_digest: str | None,
) -> int:
    from triage import __version__

    ts = time.time() if at is None else at
    facts = report.facts or {}
    facts_json = safe_text(
        json.dumps(facts, default=str, ensure_ascii=False, sort_keys=True), limit=200_000
    )
    gpu = facts.get("gpu")
    row = (
        safe_text(redact(run_id), 200) if run_id else None,
        ts,
        safe_text(host or os.environ.get("TRIAGE_HOST") or _hostname(), 200),
        safe_text(_hostname(), 200),
        __version__,
        kb_digest,
        report.engine,
        engine_version(facts),
        safe_text(str(gpu), 200) if gpu else None,
        facts_json,
        int(report.failed),
    )
    with write(conn):
        cur = conn.execute(
            "INSERT INTO runs (run_id, ts, host, recorded_on, triage_version, kb_digest, scanner, "
            "engine_version, gpu, facts, failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        run = int(cur.lastrowid or 0)
        conn.executemany(
            "INSERT INTO inputs (run, name, digest, lines, bytes, format) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (run, safe_text(i.name, 1000), i.digest, i.lines, i.bytes, i.format)
                for i in report.inputs
            ],
        )
        hits: list[tuple[int, str, int, float | None, str | None, str | None]] = []
        for h in report.hypotheses:
            if h.basis == "located":
                continue  # not a signature's hit: the line goes to the unknown queue (below)
            hits.append((run, h.signature, h.rank, h.score, h.severity, None))
            hits.extend((run, e.signature, h.rank, None, None, h.signature) for e in h.explains)
        conn.executemany(
            "INSERT INTO hits (run, signature, rank, score, severity, explained_by) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            hits,
        )
        unknown = [(u.fingerprint, u.text, u.input, u.line, u.count) for u in report.unrecognized]
        unknown += _located_lines(report)
        if unknown:  # rapidfuzz is imported only for a run that has lines to cluster
            from triage.history import cluster
        for fingerprint, text, input_name, line, count in unknown:
            template = safe_text(fingerprint, 1000)
            cid = cluster.assign(conn, template, ts)
            conn.execute(
                "INSERT INTO unknown_lines (run, cluster, fingerprint, text, input, line, count) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run, cid, template, safe_text(text), safe_text(input_name, 1000), line, count),
            )
    return run


def _located_lines(report: Report) -> list[tuple[str, str, str, int, int]]:
    """Lines the message catalog located (basis "located"): no curated signature explains them,
    so they join the queue of unexplained failures like unrecognized ones, fingerprinted alike."""
    from triage.frame import frame_line
    from triage.models import Line
    from triage.textutil import mask

    out = []
    for h in report.hypotheses:
        if h.basis == "located" and h.evidence:
            ev = h.evidence[0]
            framed = frame_line(Line(input=ev.input, number=ev.line, raw=ev.text))
            out.append((mask(framed.message or framed.text), ev.text, ev.input, ev.line, ev.count))
    return out
