"""Load batch rows (`triage.batch-row/1`, written by `triage batch`) into the history database.

Each row becomes one run, recorded exactly as `triage FILE` would have recorded it (the same
`record_run`: hits with rank and score, unrecognized lines clustered into the unknown queue), so
`triage history`, `triage stats`, `triage unknown` and `triage draft` work over a whole archive.
The run's time is the file's modification time when the row has one (an archive's time axis is
when its logs were written, not when they were imported); its run id is the file's path.

Importing the same rows twice records nothing new: a row whose input name and content digest are
already in the history is skipped.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.history.recorder import record_run
from triage.history.schema import HistoryError
from triage.models import (
    EvidenceOut,
    ExplainedOut,
    Hypothesis,
    InputInfo,
    Report,
    Unrecognized,
)

ROW_SCHEMA = "triage.batch-row/1"


@dataclass
class ImportResult:
    imported: int = 0
    already: int = 0  # the same input and digest were in the history
    errors: int = 0  # rows of inputs the batch could not triage (nothing to record)


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for each non-blank line; a line that is not a batch row is an error
    naming its line, before anything after it is recorded."""
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise HistoryError(f"cannot read {path}: {exc.strerror}") from None
    with fh:
        for number, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise HistoryError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or row.get("schema") != ROW_SCHEMA:
                raise HistoryError(
                    f"{path}:{number}: not a batch row (expected schema {ROW_SCHEMA!r}; "
                    "rows come from `triage batch ... --out DIR`, DIR/rows.jsonl)"
                )
            yield number, row


def report_from_row(row: dict[str, Any]) -> Report:
    """The report a row stands for, with what the history records (no fixes or references)."""
    name = str(row["path"])
    return Report(
        inputs=[
            InputInfo(
                name=name,
                lines=int(row.get("lines") or 0),
                format=str(row.get("format") or "plain"),
                bytes=int(row.get("bytes") or 0),
                digest=row.get("digest"),
            )
        ],
        facts=dict(row.get("facts") or {}),
        hypotheses=[
            Hypothesis(
                rank=int(h["rank"]),
                signature=str(h["signature"]),
                title=str(h.get("title", "")),
                layer=str(h.get("layer", "")),
                severity=str(h.get("severity", "")),
                status=str(h.get("status", "")),
                score=float(h.get("score") or 0.0),
                basis=str(h.get("basis") or "decisive"),
                evidence=[
                    EvidenceOut(
                        input=name,
                        line=int(e["line"]),
                        text=str(e["text"]),
                        role=str(e.get("role", "decisive")),
                        count=int(e.get("count", 1)),
                    )
                    for e in h.get("evidence", [])
                ],
                explains=[ExplainedOut(signature=str(s)) for s in h.get("explains", [])],
            )
            for h in row.get("hypotheses", [])
        ],
        unrecognized=[
            Unrecognized(
                input=name,
                line=int(u["line"]),
                text=str(u["text"]),
                fingerprint=str(u["fingerprint"]),
                count=int(u.get("count", 1)),
            )
            for u in row.get("unrecognized", [])
        ],
        engine=str(row.get("engine") or ""),
    )


def host_of(row: dict[str, Any], host: str | None) -> str:
    """The host a row's run is recorded under: the one given, else the name of the directory
    holding the file (archives are kept as HOST/.../FILE), else 'archive'."""
    if host:
        return host
    parent = Path(str(row["path"])).parent.name
    return parent or "archive"


def import_rows(
    conn: sqlite3.Connection,
    rows: Iterable[tuple[int, dict[str, Any]]],
    *,
    host: str | None = None,
    now: float | None = None,
) -> ImportResult:
    """Record every row as a run; one write transaction per row (as `triage FILE` does), so an
    import can share the database with recording triage runs."""
    result = ImportResult()
    now = time.time() if now is None else now
    for number, row in rows:
        if row.get("error"):
            result.errors += 1
            continue
        try:
            report = report_from_row(row)
        except (KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"row {number}: malformed ({type(exc).__name__}: {exc})") from None
        name, digest = report.inputs[0].name, report.inputs[0].digest
        if (
            digest
            and conn.execute(
                "SELECT 1 FROM inputs WHERE name = ? AND digest = ? LIMIT 1", (name, digest)
            ).fetchone()
        ):
            result.already += 1
            continue
        mtime = row.get("mtime")
        record_run(
            report,
            run_id=name,
            host=host_of(row, host),
            at=float(mtime) if isinstance(mtime, int | float) else now,
            kb_digest=row.get("kb_digest") or None,
            conn=conn,
        )
        result.imported += 1
    return result
