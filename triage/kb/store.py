"""The compiled knowledge base: `signatures/` as one SQLite file, so start-up parses no YAML.

YAML stays the source of truth. `load_current(root)` opens the compiled database when its
`content_hash` matches the YAML, and otherwise rebuilds it from the YAML it had to parse anyway, or,
where the cache cannot be written (read-only location, full disk), simply returns the YAML.

A rebuild is atomic: the database is written to a temporary file beside the target
(`journal_mode=DELETE`, never WAL, whose side file would not follow a rename), checked with
`PRAGMA integrity_check` and a row count, fsynced, and moved into place with `os.replace`. A reader
sees either the old file or the new one; a `kill -9` mid-build leaves the old one valid, and the
orphaned temporary file is swept by the next build.

Where it lives: `$TRIAGE_KB` (an exact file), else one file per signature directory in the user
cache directory (`$TRIAGE_CACHE_DIR`, `$XDG_CACHE_HOME/triage`, `~/.cache/triage`).
`TRIAGE_NO_KB_CACHE=1` turns the compiled database off (always YAML).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.kb.paths import (
    LoadError,
    content_hash,
    default_signature_dir,
    require_signature_dir,
    stat_key,
)
from triage.kb.records import Signature as SignatureRecord
from triage.kb.records import SignatureCore, core_dict
from triage.safewrite import check_target, sqlite_application_id

if TYPE_CHECKING:
    from triage.kb.knowledge import KnowledgeBase
    from triage.kb.load import LoadResult
    from triage.kb.schema import Signature

# Bump when the tables or the stored JSON change shape: an older file is then rebuilt.
# 2: the `core` column (the scan's part of each signature, decoded at start-up).
STORE_FORMAT = 2
# "TRKB": marks the file as a compiled triage knowledge base.
APPLICATION_ID = 0x54524B42
_TMP_MARK = ".building-"


class StoreError(Exception):
    """The compiled knowledge base cannot be written or read (the caller falls back to YAML)."""


def cache_dir() -> Path:
    """The user cache directory for compiled artefacts."""
    explicit = os.environ.get("TRIAGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "triage"


def default_db_path(root: Path | None = None) -> Path:
    """Where the compiled KB of a signature directory lives (`$TRIAGE_KB` wins)."""
    explicit = os.environ.get("TRIAGE_KB")
    if explicit:
        return Path(explicit)
    root = (root or default_signature_dir()).resolve()
    tag = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return cache_dir() / f"kb-{tag}.db"


@dataclass
class BuildResult:
    """What a compile of the knowledge base produced."""

    path: Path
    signatures: list[Signature]
    errors: list[LoadError] = field(default_factory=list)
    digest: str = ""
    seconds: float = 0.0


@dataclass
class Meta:
    """The compiled knowledge base's meta table."""

    values: dict[str, str]

    @property
    def digest(self) -> str:
        return self.values.get("content_hash", "")

    @property
    def rows(self) -> int:
        return int(self.values.get("rows", "-1"))


# -- reading ------------------------------------------------------------------------------------


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection (a file that does not exist is an error, not a new database)."""
    if not path.is_file():
        raise StoreError(f"{path}: no compiled knowledge base")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    return conn


def read_meta(conn: sqlite3.Connection) -> Meta:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise StoreError("not a compiled triage knowledge base")
    return Meta(dict(conn.execute("SELECT key, value FROM meta").fetchall()))


def is_current(meta: Meta, root: Path) -> bool:
    if meta.values.get("format") != str(STORE_FORMAT):
        return False
    if meta.values.get("stat_key") == stat_key(root):
        return True
    return meta.digest == content_hash(root)


def read_signatures(conn: sqlite3.Connection) -> list[SignatureRecord]:
    """Every stored signature as a record, from the JSON validated when the store was built."""
    rows = conn.execute("SELECT json FROM signatures ORDER BY position").fetchall()
    return [SignatureRecord.from_dict(json.loads(row[0])) for row in rows]


def read_lazy(conn: sqlite3.Connection, meta: Meta) -> KnowledgeBase:
    """The stored knowledge base with only each signature's scan part decoded (see
    `triage.kb.knowledge`): a run that matches little decodes few records."""
    from triage.kb.knowledge import KnowledgeBase

    rows = conn.execute("SELECT core FROM signatures ORDER BY position").fetchall()
    cores = [SignatureCore.from_dict(json.loads(core)) for (core,) in rows]
    return KnowledgeBase.from_store(cores, _RecordReader(conn), "sqlite", meta.digest)


class _RecordReader:
    """Reads one stored signature's JSON by id, on a read-only connection of its own to the file
    the cores came from, opened at once and kept for the process (one read at a time across
    threads). A rebuild replaces the cache file by rename; the open file keeps its inode, so the
    records always match the cores."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        import threading

        path = Path(conn.execute("PRAGMA database_list").fetchone()[2])
        self._conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, timeout=5.0, check_same_thread=False
        )
        self._conn.execute("PRAGMA schema_version").fetchone()  # the file is open from here on
        self._lock = threading.Lock()

    def __call__(self, ident: str) -> str:
        with self._lock:
            query = self._conn.execute("SELECT json FROM signatures WHERE id = ?", (ident,))
            row = query.fetchone()
        if row is None:
            raise KeyError(ident)
        return str(row[0])


def read_errors(conn: sqlite3.Connection) -> list[LoadError]:
    return [
        LoadError(p, f, m)
        for p, f, m in conn.execute("SELECT path, field, message FROM load_errors ORDER BY rowid")
    ]


def open_current(
    root: Path | None = None, db_path: Path | None = None
) -> sqlite3.Connection | None:
    """A read-only connection to the compiled KB when it is current for root, else None."""
    root = root or default_signature_dir()
    path = db_path or default_db_path(root)
    try:
        conn = connect_ro(path)
    except (StoreError, sqlite3.Error, OSError):
        return None
    try:
        if is_current(read_meta(conn), root):
            return conn
    except (StoreError, sqlite3.Error, OSError, ValueError):
        pass
    conn.close()
    return None


def load_current(root: Path | None = None, db_path: Path | None = None) -> KnowledgeBase:
    """The knowledge base of root: compiled when current, rebuilt when stale, else YAML."""
    from triage.kb.knowledge import KnowledgeBase

    root = require_signature_dir(root)
    if os.environ.get("TRIAGE_NO_KB_CACHE", "") not in ("", "0"):
        return _from_yaml(root)
    path = db_path or default_db_path(root)
    conn = open_current(root, path)
    if conn is not None:
        try:
            with contextlib.closing(conn):
                meta = read_meta(conn)
                kb = read_lazy(conn, meta)
            if len(kb.pattern_sources) == meta.rows:
                return kb
        except (StoreError, sqlite3.Error, ValueError):
            pass  # damaged or foreign: rebuilt below
    try:
        built = build(root, path)
    except (StoreError, sqlite3.Error, OSError):
        return _from_yaml(root)  # e.g. a read-only cache directory
    return KnowledgeBase(records(built.signatures), source="yaml", digest=built.digest)


def _from_yaml(root: Path) -> KnowledgeBase:
    from triage.kb.knowledge import KnowledgeBase
    from triage.kb.load import load_signatures

    digest = content_hash(root)
    return KnowledgeBase(records(load_signatures(root).signatures), source="yaml", digest=digest)


def records(signatures: list[Signature]) -> list[SignatureRecord]:
    """Validated signatures as the records a run reads."""
    return [SignatureRecord.from_dict(s.model_dump(by_alias=True, mode="json")) for s in signatures]


# -- building -----------------------------------------------------------------------------------

_DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE signatures (
    id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    layer TEXT NOT NULL,
    kind TEXT NOT NULL,
    severity TEXT NOT NULL,
    status TEXT NOT NULL,
    priority INTEGER NOT NULL,
    path TEXT,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    name_words TEXT NOT NULL,
    patterns TEXT NOT NULL,
    fixes_text TEXT NOT NULL,
    examples TEXT NOT NULL,
    details TEXT NOT NULL,
    core TEXT NOT NULL,
    json TEXT NOT NULL
);
CREATE TABLE aliases (alias TEXT PRIMARY KEY, id TEXT NOT NULL REFERENCES signatures(id));
CREATE TABLE fixes (
    signature TEXT NOT NULL REFERENCES signatures(id),
    position INTEGER NOT NULL,
    confidence TEXT NOT NULL,
    branch TEXT,
    action TEXT NOT NULL,
    PRIMARY KEY (signature, position)
);
CREATE TABLE example_lines (signature TEXT NOT NULL REFERENCES signatures(id), line TEXT NOT NULL);
CREATE TABLE load_errors (path TEXT NOT NULL, field TEXT NOT NULL, message TEXT NOT NULL);
"""

# Full-text columns and their bm25 weights: a word in the title counts most.
FTS_COLUMNS: tuple[tuple[str, float], ...] = (
    ("title", 8.0),
    ("name_words", 6.0),
    ("summary", 3.0),
    ("patterns", 2.0),
    ("examples", 2.0),
    ("fixes_text", 1.0),
    ("details", 1.0),
)


def _row(sig: Signature, position: int, path: Path | None) -> dict[str, Any]:
    patterns = [p.regex for p in (*sig.match, *sig.not_)]
    patterns += [ev for d in sig.differential for ev in d.evidence]
    fixes = [" ".join(x for x in (f.do, f.when, f.caveat) if x) for f in sig.fixes]
    data = sig.model_dump(by_alias=True, mode="json")
    details = [
        sig.details or "",
        *sig.verify,
        *sig.tags,
        *(f"{d.branch} {d.check}" for d in sig.differential),
        *sig.aliases,
    ]
    return {
        "id": sig.id,
        "position": position,
        "layer": sig.layer,
        "kind": sig.kind,
        "severity": sig.severity,
        "status": sig.status,
        "priority": sig.priority,
        "path": str(path) if path else None,
        "title": sig.title,
        "summary": sig.summary,
        "name_words": " ".join(n.replace("-", " ") for n in (sig.id, *sig.aliases)),
        "patterns": "\n".join(patterns),
        "fixes_text": "\n".join(fixes),
        "examples": "\n".join(sig.examples.match),
        "details": "\n".join(d for d in details if d),
        "core": json.dumps(core_dict(data), ensure_ascii=False, separators=(",", ":")),
        "json": json.dumps(data, ensure_ascii=False, separators=(",", ":")),
    }


def build(
    root: Path | None = None, db_path: Path | None = None, *, result: LoadResult | None = None
) -> BuildResult:
    """Compile root into db_path atomically (temporary file, check, fsync, `os.replace`)."""
    import sqlite_utils

    from triage.kb.load import load_signatures

    start = time.perf_counter()
    root = require_signature_dir(root)
    path = db_path or default_db_path(root)
    # Hash before parsing: a file edited during the build makes the stored key stale, not wrong.
    skey = stat_key(root)
    digest = content_hash(root)
    result = result or load_signatures(root)
    check_target(path, "a compiled triage knowledge base", _is_knowledge_base)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    sweep_temporaries(path)
    tmp = path.with_name(f"{path.name}{_TMP_MARK}{os.getpid()}-{time.monotonic_ns()}")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            for stmt in _DDL.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            db = sqlite_utils.Database(conn)
            rows = [_row(s, i, result.paths.get(s.id)) for i, s in enumerate(result.signatures)]
            db.table("signatures").insert_all(rows)
            db.table("aliases").insert_all(
                {"alias": a, "id": s.id} for s in result.signatures for a in s.aliases
            )
            db.table("fixes").insert_all(
                {
                    "signature": s.id,
                    "position": i,
                    "confidence": f.confidence,
                    "branch": f.branch,
                    "action": f.do,
                }
                for s in result.signatures
                for i, f in enumerate(s.fixes, 1)
            )
            db.table("example_lines").insert_all(
                {"signature": s.id, "line": line}
                for s in result.signatures
                for line in s.examples.match
            )
            db.table("load_errors").insert_all(
                {"path": e.path, "field": e.field, "message": e.message} for e in result.errors
            )
            meta = {
                "format": str(STORE_FORMAT),
                "content_hash": digest,
                "stat_key": skey,
                "root": str(root.resolve()),
                "rows": str(len(rows)),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            db.table("meta").insert_all({"key": k, "value": v} for k, v in meta.items())
            db.table("signatures").enable_fts([c for c, _ in FTS_COLUMNS], tokenize="porter")
            _check(conn, len(rows))
        finally:
            conn.close()
        _fsync(tmp)
        os.chmod(tmp, 0o600)  # private like every cache of triage
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return BuildResult(
        path, list(result.signatures), list(result.errors), digest, time.perf_counter() - start
    )


def _is_knowledge_base(path: Path, head: bytes) -> bool:
    """Ours: the application id of a compiled KB, or (a file from before the id) an SQLite file
    with the KB's `meta` and `signatures` tables. A damaged KB keeps its header, so it is ours
    and rebuilt; anything else (a log, someone's database) is refused, never overwritten."""
    app_id = sqlite_application_id(head)
    if app_id is None:
        return False
    if app_id == APPLICATION_ID:
        return True
    try:
        with contextlib.closing(connect_ro(path)) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except (StoreError, sqlite3.Error, OSError):
        return False
    return app_id == 0 and {"meta", "signatures"} <= names


def _check(conn: sqlite3.Connection, rows: int) -> None:
    status = conn.execute("PRAGMA integrity_check").fetchone()[0]
    if status != "ok":
        raise StoreError(f"integrity_check of the new knowledge base failed: {status}")
    count = conn.execute("SELECT count(*) FROM signatures").fetchone()[0]
    fts = conn.execute("SELECT count(*) FROM signatures_fts").fetchone()[0]
    if count != rows or fts != rows:
        raise StoreError(f"new knowledge base has {count} rows ({fts} indexed), expected {rows}")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        _fsync(path)


def _temporaries(path: Path) -> Iterator[Path]:
    yield from path.parent.glob(f"{glob.escape(path.name)}{_TMP_MARK}*")


def sweep_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files of builds that died (their process is gone)."""
    removed = []
    for tmp in _temporaries(path):
        pid_text = tmp.name.rsplit(_TMP_MARK, 1)[1].split("-", 1)[0]
        if pid_text.isdigit() and _alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
