"""Read the history: recent runs, hit counts over time, clusters of unexplained lines, feedback.

Functions take an open connection (see `schema.opened`) and return plain data; the CLI renders it.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from triage.history.schema import HistoryError, damaged, opened, resolve, safe_text, write
from triage.redact import redact

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """'30d', '12h', '2w', '90m' or an ISO date/time -> an epoch; None for all time."""
    if not text:
        return None
    now = time.time() if now is None else now
    found = _DURATION_RE.match(text)
    if found:
        return now - float(found.group(1)) * _UNITS[found.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise HistoryError(
            f"--since {text!r}: give a duration like 30d, 12h, 2w or a date like 2025-01-31"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def _in(values: Sequence[object]) -> str:
    """'?, ?, ?' for a parameterised IN list (the SQL holds placeholders only, never data)."""
    return ", ".join("?" for _ in values)


# -- runs ----------------------------------------------------------------------------------------


@dataclass
class RunRow:
    number: int
    run_id: str | None
    ts: float
    host: str | None
    engine_version: str | None
    gpu: str | None
    failed: bool
    inputs: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    unknown: int = 0


def list_runs(
    conn: sqlite3.Connection,
    *,
    limit: int = 20,
    since: float | None = None,
    signature: str | None = None,
    host: str | None = None,
) -> list[RunRow]:
    where: list[str] = ["1 = 1"]
    args: list[object] = []
    if since is not None:
        where.append("r.ts >= ?")
        args.append(since)
    if host:
        where.append("r.host = ?")
        args.append(host)
    if signature:
        where.append("EXISTS (SELECT 1 FROM hits h WHERE h.run = r.id AND h.signature = ?)")
        args.append(signature)
    rows = conn.execute(
        "SELECT r.id, r.run_id, r.ts, r.host, r.engine_version, r.gpu, r.failed FROM runs r "
        f"WHERE {' AND '.join(where)} ORDER BY r.ts DESC, r.id DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    out = [
        RunRow(
            number=int(r[0]),
            run_id=r[1],
            ts=float(r[2]),
            host=r[3],
            engine_version=r[4],
            gpu=r[5],
            failed=bool(r[6]),
        )
        for r in rows
    ]
    by_id = {r.number: r for r in out}
    if by_id:
        ids = list(by_id)
        for run, name in conn.execute(
            f"SELECT run, name FROM inputs WHERE run IN ({_in(ids)}) ORDER BY rowid", ids
        ):
            by_id[run].inputs.append(name)
        for run, sig in conn.execute(
            f"SELECT run, signature FROM hits WHERE run IN ({_in(ids)}) "
            "AND explained_by IS NULL ORDER BY run, rank",
            ids,
        ):
            by_id[run].signatures.append(sig)
        for run, n in conn.execute(
            f"SELECT run, count(*) FROM unknown_lines WHERE run IN ({_in(ids)}) GROUP BY run", ids
        ):
            by_id[run].unknown = n
    return out


def find_run(conn: sqlite3.Connection, ref: str) -> int:
    """A run by its number, or by the run id given when it was recorded (the latest such run)."""
    ref = ref.strip()
    if ref.isdigit():
        row = conn.execute("SELECT id FROM runs WHERE id = ?", (int(ref),)).fetchone()
        if row:
            return int(row[0])
    row = conn.execute(
        "SELECT id FROM runs WHERE run_id = ? ORDER BY ts DESC, id DESC LIMIT 1", (ref,)
    ).fetchone()
    if row:
        return int(row[0])
    raise HistoryError(f"no run {ref!r} in the history (see `triage history`)")


# -- signature statistics ------------------------------------------------------------------------


@dataclass
class SignatureStats:
    signature: str
    runs: int
    first_ts: float
    last_ts: float
    last_host: str | None
    hosts: Counter[str] = field(default_factory=Counter)
    versions: Counter[str] = field(default_factory=Counter)


def signature_stats(
    conn: sqlite3.Connection, *, since: float | None = None, signatures: Iterable[str] | None = None
) -> list[SignatureStats]:
    """Per signature: runs it fired in (top-level or explained), first and last seen, hosts and
    engine versions."""
    where: list[str] = ["r.ts >= ?"]
    args: list[object] = [since if since is not None else float("-inf")]
    wanted = list(signatures) if signatures is not None else None
    if wanted is not None:
        if not wanted:
            return []
        where.append(f"h.signature IN ({_in(wanted)})")
        args.extend(wanted)
    rows = conn.execute(
        "SELECT DISTINCT h.signature, r.id, r.ts, r.host, r.engine_version FROM hits h "
        f"JOIN runs r ON r.id = h.run WHERE {' AND '.join(where)} ORDER BY r.ts, r.id",
        args,
    ).fetchall()
    stats: dict[str, SignatureStats] = {}
    seen: set[tuple[str, int]] = set()
    for sig, run, ts, host, version in rows:
        if (sig, run) in seen:
            continue
        seen.add((sig, run))
        st = stats.get(sig)
        if st is None:
            st = stats[sig] = SignatureStats(sig, 0, ts, ts, host)
        st.runs += 1
        st.last_ts, st.last_host = ts, host
        st.hosts[host or "-"] += 1
        st.versions[version or "unknown"] += 1
    return sorted(stats.values(), key=lambda s: (-s.runs, -s.last_ts, s.signature))


def breakdown(
    conn: sqlite3.Connection, column: str, *, since: float | None = None
) -> list[tuple[str, int, int]]:
    """(value, runs, runs with a diagnosis) per host or per engine version."""
    if column not in ("host", "engine_version"):
        raise ValueError(column)
    rows = conn.execute(
        f"SELECT coalesce(r.{column}, 'unknown'), count(*), "
        "sum(EXISTS (SELECT 1 FROM hits h WHERE h.run = r.id)) FROM runs r WHERE r.ts >= ? "
        "GROUP BY 1 ORDER BY 2 DESC, 1",
        (since if since is not None else float("-inf"),),
    ).fetchall()
    return [(str(a), int(b), int(c or 0)) for a, b, c in rows]


def weekly_counts(
    conn: sqlite3.Connection, signature: str, weeks: int, now: float | None = None
) -> list[int]:
    """Runs the signature fired in, per week, oldest first (for a sparkline)."""
    now = time.time() if now is None else now
    start = now - weeks * 7 * 86400
    counts = [0] * weeks
    for (ts,) in conn.execute(
        "SELECT r.ts FROM runs r WHERE r.ts >= ? AND EXISTS (SELECT 1 FROM hits h WHERE "
        "h.run = r.id AND h.signature = ?)",
        (start, signature),
    ):
        index = min(weeks - 1, int((ts - start) // (7 * 86400)))
        counts[index] += 1
    return counts


def seen_summary(
    db_path: Path | str | None,
    signature_ids: Iterable[str],
    days: int = 30,
    *,
    now: float | None = None,
) -> dict[str, str]:
    """{'kv-cache-no-memory': 'seen 14 times in the last 30 days, last on host gpu-3'}.

    Signatures not seen in the window are left out; a missing database gives {}.
    Raises `HistoryError` for a damaged or foreign file.
    """
    ids = list(dict.fromkeys(signature_ids))
    path = resolve(db_path)
    if not ids or not path.exists():
        return {}
    now = time.time() if now is None else now
    with opened(path, create=False) as conn:
        stats = signature_stats(conn, since=now - days * 86400, signatures=ids)
    out = {}
    for st in stats:
        times = "once" if st.runs == 1 else "twice" if st.runs == 2 else f"{st.runs} times"
        last = f"last on host {st.last_host}" if st.last_host else f"last {when(st.last_ts)} UTC"
        out[st.signature] = f"seen {times} in the last {days} days, {last}"
    return out


# -- clusters of unrecognized lines --------------------------------------------------------------


@dataclass
class ClusterRow:
    id: int
    template: str
    lines: int
    runs: int
    first_ts: float
    last_ts: float
    example: str
    hosts: list[str] = field(default_factory=list)
    run_numbers: list[int] = field(default_factory=list)


def list_clusters(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    limit: int = 30,
    cluster_id: int | None = None,
) -> list[ClusterRow]:
    """Clusters by size (runs, then lines) and recency, each with its runs and an example line
    (the shortest: wrappers such as Ray's process prefix make lines longer, not clearer)."""
    where: list[str] = ["r.ts >= ?"]
    args: list[object] = [since if since is not None else float("-inf")]
    if cluster_id is not None:
        where.append("c.id = ?")
        args.append(cluster_id)
    rows = conn.execute(
        "SELECT c.id, c.template, sum(u.count), count(DISTINCT u.run), min(r.ts), max(r.ts), "
        "(SELECT u2.text FROM unknown_lines u2 WHERE u2.cluster = c.id "
        "ORDER BY length(u2.text), u2.id DESC LIMIT 1) "
        "FROM clusters c JOIN unknown_lines u ON u.cluster = c.id JOIN runs r ON r.id = u.run "
        f"WHERE {' AND '.join(where)} GROUP BY c.id "
        "ORDER BY count(DISTINCT u.run) DESC, sum(u.count) DESC, max(r.ts) DESC, c.id LIMIT ?",
        (*args, limit),
    ).fetchall()
    # Text is redacted as it is read too: a database written by an older triage may hold secrets.
    out = [
        ClusterRow(int(a), redact(b), int(c), int(d), e, f, redact(g or ""))
        for a, b, c, d, e, f, g in rows
    ]
    for row in out:
        for run, host in conn.execute(
            "SELECT DISTINCT r.id, r.host FROM unknown_lines u JOIN runs r ON r.id = u.run "
            "WHERE u.cluster = ? ORDER BY r.id",
            (row.id,),
        ):
            row.run_numbers.append(int(run))
            if host and host not in row.hosts:
                row.hosts.append(host)
    return out


@dataclass
class ClusterDetail:
    row: ClusterRow
    templates: list[tuple[str, float, int]]  # template, similarity when it joined, lines
    lines: list[tuple[int, str, str | None, int | None, int]]  # run, text, input, line, count
    # number, run_id, ts, host, engine version
    runs: list[tuple[int, str | None, float, str | None, str | None]]


def cluster_detail(conn: sqlite3.Connection, cluster_id: int) -> ClusterDetail:
    rows = list_clusters(conn, cluster_id=cluster_id, limit=1)
    if not rows:
        raise HistoryError(f"no cluster {cluster_id} (see `triage unknown`)")
    templates = [
        (redact(t), float(s), int(n or 0))
        for t, s, n in conn.execute(
            "SELECT t.template, t.similarity, (SELECT sum(u.count) FROM unknown_lines u "
            "WHERE u.cluster = t.cluster AND u.fingerprint = t.template) "
            "FROM cluster_templates t WHERE t.cluster = ? ORDER BY 3 DESC, t.rowid",
            (cluster_id,),
        )
    ]
    lines = [
        (int(a), redact(b), c, d, int(e))
        for a, b, c, d, e in conn.execute(
            "SELECT run, text, input, line, count FROM unknown_lines WHERE cluster = ? ORDER BY id",
            (cluster_id,),
        )
    ]
    runs = [
        (int(a), redact(b) if b else b, float(c), d, e)
        for a, b, c, d, e in conn.execute(
            "SELECT DISTINCT r.id, r.run_id, r.ts, r.host, r.engine_version FROM unknown_lines u "
            "JOIN runs r ON r.id = u.run WHERE u.cluster = ? ORDER BY r.id",
            (cluster_id,),
        )
    ]
    return ClusterDetail(rows[0], templates, lines, runs)


# -- feedback ------------------------------------------------------------------------------------


@dataclass
class Precision:
    signature: str
    confirmed: int
    wrong: int
    missed: int = 0  # confirmed as the answer in runs where it did not fire (recall, not precision)

    @property
    def value(self) -> float | None:
        total = self.confirmed + self.wrong
        return self.confirmed / total if total else None


def add_feedback(
    conn: sqlite3.Connection,
    run: int,
    signature: str,
    verdict: str,
    *,
    fix: str | None = None,
    note: str | None = None,
    user: str | None = None,
    at: float | None = None,
) -> int:
    if verdict not in ("confirm", "wrong"):
        raise ValueError(verdict)
    with write(conn):
        cur = conn.execute(
            "INSERT INTO feedback (run, signature, verdict, fix, note, ts, user) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run,
                safe_text(signature, 200),
                verdict,
                safe_text(fix, 2000) if fix else None,
                safe_text(note, 2000) if note else None,
                time.time() if at is None else at,
                user,
            ),
        )
        return int(cur.lastrowid or 0)


def run_signatures(conn: sqlite3.Connection, run: int) -> list[str]:
    """The signatures a run reported, rank order, top-level first."""
    return [
        s
        for (s,) in conn.execute(
            "SELECT signature FROM hits WHERE run = ? ORDER BY rank, explained_by IS NOT NULL",
            (run,),
        )
    ]


def precision(conn: sqlite3.Connection) -> dict[str, Precision]:
    """Per signature, from feedback on runs where it fired: confirmed / (confirmed + wrong).

    The latest verdict per (run, signature) counts once; a confirmation for a signature that did
    not fire in that run is a miss, counted apart.
    """
    rows = conn.execute(
        "SELECT f.signature, f.verdict, EXISTS (SELECT 1 FROM hits h WHERE h.run = f.run AND "
        "h.signature = f.signature) FROM feedback f WHERE f.id IN "
        "(SELECT max(id) FROM feedback GROUP BY run, signature)"
    ).fetchall()
    out: dict[str, Precision] = {}
    for sig, verdict, fired in rows:
        p = out.setdefault(sig, Precision(sig, 0, 0))
        if not fired:
            p.missed += verdict == "confirm"
        elif verdict == "confirm":
            p.confirmed += 1
        else:
            p.wrong += 1
    return out


def fired_counts(db_path: Path | str | None) -> dict[str, tuple[int, float]] | None:
    """signature -> (runs it fired in, last seen), all time; None when there is no history."""
    path = resolve(db_path)
    if not path.exists():
        return None
    with opened(path, create=False) as conn:
        try:
            rows = conn.execute(
                "SELECT h.signature, count(DISTINCT h.run), max(r.ts) FROM hits h "
                "JOIN runs r ON r.id = h.run GROUP BY h.signature"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None
    return {s: (int(n), float(t)) for s, n, t in rows}
