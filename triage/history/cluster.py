"""Clustering of unrecognized lines across runs: masked template equality, then rapidfuzz.

A fingerprint (`textutil.mask` of the line's message) joins the cluster that already holds the
same template. Otherwise it joins the most similar cluster template when the similarity is at
least `SIMILARITY` and both name the same exception class (so that "torch.OutOfMemoryError: ..."
from one version and "torch.cuda.OutOfMemoryError: ..." from another join, but a ValueError never
joins a RuntimeError). Otherwise it starts a cluster. Assignment runs inside the caller's
`BEGIN IMMEDIATE` transaction, so concurrent writers never create the same cluster twice.
"""

from __future__ import annotations

import re
import sqlite3

from rapidfuzz import fuzz, process

SIMILARITY = 88.0
_EXCEPTION_RE = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\b")


def exception_class(template: str) -> str:
    """The last component of the first exception class named in a template ('' when none)."""
    found = _EXCEPTION_RE.search(template)
    return found.group(1).rsplit(".", 1)[-1] if found else ""


def similarity(a: str, b: str) -> float:
    return float(fuzz.ratio(a, b))


def assign(conn: sqlite3.Connection, template: str, ts: float) -> int:
    """The cluster id for a fingerprint template, creating or extending a cluster (call it inside
    a write transaction)."""
    row = conn.execute(
        "SELECT cluster FROM cluster_templates WHERE template = ?", (template,)
    ).fetchone()
    if row is not None:
        cluster = int(row[0])
        conn.execute(
            "UPDATE clusters SET last_ts = max(last_ts, ?), first_ts = min(first_ts, ?) "
            "WHERE id = ?",
            (ts, ts, cluster),
        )
        return cluster
    exc = exception_class(template)
    candidates = conn.execute(
        "SELECT t.template, t.cluster FROM cluster_templates t JOIN clusters c ON c.id = t.cluster "
        "WHERE c.exception = ?",
        (exc,),
    ).fetchall()
    best = (
        process.extractOne(
            template,
            {i: t for i, (t, _) in enumerate(candidates)},
            scorer=fuzz.ratio,
            score_cutoff=SIMILARITY,
        )
        if candidates
        else None
    )
    if best is not None:
        _, score, index = best
        cluster = int(candidates[index][1])
        conn.execute(
            "UPDATE clusters SET last_ts = max(last_ts, ?), first_ts = min(first_ts, ?) "
            "WHERE id = ?",
            (ts, ts, cluster),
        )
    else:
        score = 100.0
        cur = conn.execute(
            "INSERT INTO clusters (template, exception, first_ts, last_ts) VALUES (?, ?, ?, ?)",
            (template, exc, ts, ts),
        )
        cluster = int(cur.lastrowid or 0)
    conn.execute(
        "INSERT INTO cluster_templates (template, cluster, similarity) VALUES (?, ?, ?)",
        (template, cluster, float(score)),
    )
    return cluster


def parse_cluster_id(text: str) -> int | None:
    """'12', '#12' or 'U12' -> 12."""
    text = text.strip().lstrip("#").lstrip("Uu")
    return int(text) if text.isdigit() else None
