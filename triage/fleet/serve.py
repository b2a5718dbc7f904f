"""The fleet view: the history database in Datasette, read-only, with titles, descriptions, units,
canned queries and a chart (the datasette-vega plugin). No web server or page of our own.

What `triage history serve` does:
1. snapshot the history (SQLite's online backup: consistent while triage runs keep recording,
   and WAL content included, which an immutable open of the live file would miss);
2. add one reference table to the snapshot, `signatures` (id, title, layer, severity, kind and
   status from the knowledge base), so queries can group hits by layer and list signatures that
   never fired;
3. exec `datasette serve --immutable SNAPSHOT --metadata METADATA.json --host 127.0.0.1`.

The snapshot lives in the user's cache directory and is replaced on every start: restart the view
to see newer runs. Datasette is an optional extra: `pip install 'llm-triage[fleet]'`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from triage.history.schema import APPLICATION_ID, HistoryError

DATABASE = "history"  # Datasette names a database after its file: /history/...
DATASETTE_MISSING = (
    "triage history serve needs Datasette: pip install 'llm-triage[fleet]' "
    "(from a clone: pip install '.[fleet]')"
)

# The chart: datasette-vega reads its settings from the page's #fragment (g.mark, g.x_column ...)
CHART_FRAGMENT = (
    "#g.mark=bar&g.x_column=day&g.x_type=ordinal&g.y_column=runs&g.y_type=quantitative"
    "&g.color_column=layer"
)

_SILENT_DAYS = "CAST(coalesce(nullif(:days, ''), '30') AS REAL)"

QUERIES: dict[str, dict[str, Any]] = {
    "hits_per_day": {
        "title": "Failures per day and layer",
        "hide_sql": True,
        "description": "Runs with at least one top-level hypothesis, per UTC day and layer "
        "(node, harness, engine, model); the chart stacks them.",
        "sql": """SELECT date(r.ts, 'unixepoch') AS day, coalesce(s.layer, '?') AS layer,
  count(DISTINCT r.id) AS runs
FROM hits h JOIN runs r ON r.id = h.run LEFT JOIN signatures s ON s.id = h.signature
WHERE h.explained_by IS NULL
GROUP BY day, layer ORDER BY day, layer""",
    },
    "failures_over_time": {
        "title": "Failures per signature over time",
        "description": "Per UTC day: the runs each signature fired in (top-level, not explained "
        "by another), with its layer and severity.",
        "sql": """SELECT date(r.ts, 'unixepoch') AS day, h.signature,
  coalesce(s.layer, '?') AS layer, coalesce(s.severity, h.severity) AS severity,
  count(DISTINCT r.id) AS runs, count(DISTINCT r.host) AS hosts
FROM hits h JOIN runs r ON r.id = h.run LEFT JOIN signatures s ON s.id = h.signature
WHERE h.explained_by IS NULL
GROUP BY day, h.signature ORDER BY day DESC, runs DESC, h.signature""",
    },
    "signatures_ranked": {
        "title": "Signatures by runs",
        "description": "Every signature that fired, top-level or explained by another: runs, "
        "hosts, first and last seen (UTC).",
        "sql": """SELECT h.signature, coalesce(s.layer, '?') AS layer, s.severity, s.title,
  count(DISTINCT h.run) AS runs, count(DISTINCT r.host) AS hosts,
  datetime(min(r.ts), 'unixepoch') AS first_seen, datetime(max(r.ts), 'unixepoch') AS last_seen
FROM hits h JOIN runs r ON r.id = h.run LEFT JOIN signatures s ON s.id = h.signature
GROUP BY h.signature ORDER BY runs DESC, last_seen DESC, h.signature""",
    },
    "per_host": {
        "title": "Per host",
        "description": "Runs per host: how many failed, how many got a diagnosis, unexplained "
        "lines, the most frequent top signature and the last run (UTC).",
        "sql": """SELECT r.host, count(*) AS runs, sum(r.failed) AS failed,
  sum(EXISTS (SELECT 1 FROM hits h WHERE h.run = r.id AND h.explained_by IS NULL)) AS diagnosed,
  (SELECT count(*) FROM unknown_lines u JOIN runs r2 ON r2.id = u.run
   WHERE r2.host IS r.host) AS unknown_lines,
  (SELECT h.signature FROM hits h JOIN runs r3 ON r3.id = h.run
   WHERE r3.host IS r.host AND h.rank = 1 AND h.explained_by IS NULL
   GROUP BY h.signature ORDER BY count(*) DESC, h.signature LIMIT 1) AS top_signature,
  datetime(max(r.ts), 'unixepoch') AS last_run
FROM runs r GROUP BY r.host ORDER BY runs DESC, r.host""",
    },
    "per_run": {
        "title": "Per run",
        "description": "The latest runs: when (UTC), host, run id, inputs, the top hypothesis "
        "and the count of unexplained lines.",
        "sql": """SELECT r.id AS run, datetime(r.ts, 'unixepoch') AS at, r.host, r.run_id,
  (SELECT group_concat(i.name, ', ') FROM inputs i WHERE i.run = r.id) AS inputs,
  (SELECT sum(i.bytes) FROM inputs i WHERE i.run = r.id) AS bytes,
  (SELECT h.signature FROM hits h WHERE h.run = r.id AND h.explained_by IS NULL
   ORDER BY h.rank LIMIT 1) AS top_signature,
  (SELECT count(*) FROM unknown_lines u WHERE u.run = r.id) AS unknown_lines, r.failed
FROM runs r ORDER BY r.ts DESC, r.id DESC LIMIT 500""",
    },
    "unknown_clusters": {
        "title": "Largest unknown clusters",
        "description": "Unrecognized failure lines clustered across runs (the queue that "
        "`triage unknown` lists), largest first, each with its shortest example line. "
        "`triage draft CLUSTER` writes a signature skeleton from one.",
        "sql": """SELECT c.id AS cluster, count(DISTINCT u.run) AS runs, sum(u.count) AS lines,
  count(DISTINCT r.host) AS hosts,
  (SELECT u2.text FROM unknown_lines u2 WHERE u2.cluster = c.id
   ORDER BY length(u2.text), u2.id DESC LIMIT 1) AS example,
  (SELECT u3.input || ':' || u3.line FROM unknown_lines u3 WHERE u3.cluster = c.id
   ORDER BY length(u3.text), u3.id DESC LIMIT 1) AS example_at,
  datetime(min(r.ts), 'unixepoch') AS first_seen, datetime(max(r.ts), 'unixepoch') AS last_seen,
  c.template
FROM clusters c JOIN unknown_lines u ON u.cluster = c.id JOIN runs r ON r.id = u.run
GROUP BY c.id ORDER BY runs DESC, lines DESC, max(r.ts) DESC, c.id""",
    },
    "stopped_firing": {
        "title": "Signatures that stopped firing",
        "description": "Candidates for pruning: signatures of the knowledge base that fired "
        "before but not in the last DAYS days of this history (counted back from its latest "
        "run, so an old archive reads the same), then those that never fired in it. "
        "DAYS defaults to 30.",
        "sql": f"""WITH latest AS (SELECT max(ts) AS ts FROM runs),
fired AS (SELECT h.signature, count(DISTINCT h.run) AS runs, min(r.ts) AS first_ts,
  max(r.ts) AS last_ts FROM hits h JOIN runs r ON r.id = h.run GROUP BY h.signature)
SELECT s.id AS signature, s.layer, s.severity, s.status, coalesce(f.runs, 0) AS runs,
  datetime(f.first_ts, 'unixepoch') AS first_seen, datetime(f.last_ts, 'unixepoch') AS last_seen,
  round((latest.ts - f.last_ts) / 86400.0, 1) AS days_silent
FROM signatures s LEFT JOIN fired f ON f.signature = s.id, latest
WHERE f.last_ts IS NULL OR f.last_ts < latest.ts - {_SILENT_DAYS} * 86400
ORDER BY f.last_ts IS NULL, f.last_ts, s.id""",
    },
}

_EPOCH = "seconds since 1970-01-01 UTC"
TABLES: dict[str, dict[str, Any]] = {
    "runs": {
        "title": "Runs",
        "description": "One row per triage run (a `triage LOG` call, a bot run, or one file of "
        "a `triage history import`).",
        "columns": {
            "ts": f"when the run happened ({_EPOCH}; for an import, the file's mtime)",
            "host": "host the logs came from",
            "run_id": "run id given with --run-id; the file's path for an import",
            "engine_version": "serving engine and version read from the log",
            "failed": "1 when an error hypothesis or an unexplained failure line was found",
            "kb_digest": "content hash of the knowledge base that triaged it",
        },
    },
    "inputs": {
        "title": "Inputs",
        "description": "The files of each run, with their size and content digest.",
        "columns": {"bytes": "bytes read", "digest": "CRC-32 of the bytes scanned"},
        "units": {"bytes": "byte"},
    },
    "hits": {
        "title": "Hits",
        "description": "Signatures that fired, per run: top-level hypotheses (explained_by "
        "empty) and the symptoms they explain.",
        "columns": {
            "rank": "1 = the top hypothesis",
            "score": "ranking score, 0 to 1",
            "explained_by": "the hypothesis that explains this symptom",
        },
    },
    "clusters": {
        "title": "Unknown clusters",
        "description": "Clusters of unrecognized lines (masked templates joined by similarity).",
        "columns": {"first_ts": _EPOCH, "last_ts": _EPOCH},
    },
    "unknown_lines": {
        "title": "Unrecognized lines",
        "description": "Salient failure lines no signature explains, with their cluster.",
    },
    "signatures": {
        "title": "Signatures",
        "description": "The knowledge base the view was started with (reference table added "
        "to the snapshot).",
    },
}


def metadata(source: Path) -> dict[str, Any]:
    """Datasette metadata: titles, descriptions, units and canned queries."""
    chart = f"/{DATABASE}/hits_per_day{CHART_FRAGMENT}"
    queries = {name: dict(q) for name, q in QUERIES.items()}
    queries["hits_per_day"]["description_html"] = (
        f'{queries["hits_per_day"].pop("description")} <a href="{chart}">Show the chart</a>.'
    )
    links = "".join(
        f'<li><a href="/{DATABASE}/{name}">{q["title"]}</a></li>' for name, q in QUERIES.items()
    )
    return {
        "title": "triage fleet view",
        "description_html": (
            f"Read-only snapshot of the triage history <code>{_html(str(source))}</code>: "
            "what fired where and when, and the queue of unexplained failures. "
            f'<a href="{chart}">Failures per day (chart)</a>.'
        ),
        "databases": {
            DATABASE: {
                "title": "triage history",
                "description_html": f"Canned queries:<ul>{links}</ul>",
                "tables": TABLES,
                "queries": queries,
            }
        },
    }


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def snapshot(source: Path, dest: Path) -> Path:
    """Copy the history into dest (online backup, read-only on the source) and add the knowledge
    base's `signatures` table; the copy is a single file in rollback-journal mode, as an
    immutable open needs."""
    if not source.is_file():
        raise HistoryError(
            f"no history database at {source} (record runs with `triage LOG`, or "
            "`triage history import ROWS.jsonl`)"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open history database {source}: {exc}") from None
    try:
        if src.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise HistoryError(f"{source} is not a triage history database")
        out = sqlite3.connect(partial)
        try:
            src.backup(out)
            out.execute("PRAGMA journal_mode=DELETE")
            _add_signatures(out)
            out.commit()
        finally:
            out.close()
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"cannot read history database {source}: {exc}") from None
    finally:
        src.close()
    os.replace(partial, dest)
    return dest


def _add_signatures(conn: sqlite3.Connection) -> None:
    from triage.api import load_kb

    conn.execute("DROP TABLE IF EXISTS signatures")
    conn.execute(
        "CREATE TABLE signatures (id TEXT PRIMARY KEY, title TEXT, layer TEXT, severity TEXT, "
        "kind TEXT, status TEXT)"
    )
    conn.executemany(
        "INSERT INTO signatures VALUES (?, ?, ?, ?, ?, ?)",
        [(s.id, s.title, s.layer, s.severity, s.kind, s.status) for s in load_kb().signatures],
    )


def view_dir(source: Path) -> Path:
    """Where the snapshot and metadata of this history live: the user's cache, one folder per
    history file."""
    from triage.scanners import cache_dir

    key = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "fleet-view" / key


def datasette_available() -> bool:
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("datasette", "datasette_vega"))


def prepare(source: Path) -> tuple[Path, Path]:
    """Snapshot and metadata file for this history; returns (snapshot, metadata path)."""
    where = view_dir(source)
    snap = snapshot(source, where / f"{DATABASE}.db")
    meta = where / "metadata.json"
    meta.write_text(json.dumps(metadata(source), indent=2) + "\n", encoding="utf-8")
    return snap, meta


def command(snap: Path, meta: Path, host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "datasette",
        "serve",
        "--immutable",
        str(snap),
        "--metadata",
        str(meta),
        "--host",
        host,
        "--port",
        str(port),
        "--setting",
        "sql_time_limit_ms",
        "5000",
    ]


def serve(source: Path, host: str, port: int) -> None:
    """Replace this process with Datasette over a fresh snapshot (never returns)."""
    if not datasette_available():
        raise HistoryError(DATASETTE_MISSING)
    snap, meta = prepare(source)
    argv = command(snap, meta, host, port)
    print(
        f"fleet view of {source} (snapshot {snap}): http://{host}:{port}/{DATABASE}\n"
        f"chart: http://{host}:{port}/{DATABASE}/hits_per_day{CHART_FRAGMENT}",
        file=sys.stderr,
        flush=True,
    )
    os.execv(argv[0], argv)
