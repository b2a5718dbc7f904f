"""The history database: location, schema, connection pragmas and the write-transaction helper.

Concurrency (the CLI, a bot and a long-running follower write at once, on one host):
- `journal_mode=WAL`: readers never block the writer, nor the writer the readers;
- `busy_timeout`: a writer waits for the lock instead of failing at once;
- every write runs in `BEGIN IMMEDIATE` (`write()`): a deferred transaction that reads and then
  writes fails with SQLITE_BUSY at once if another writer committed in between, whatever the busy
  timeout (measured: 637 of 900 failed deferred, 0 of 900 immediate);
- `synchronous=NORMAL` (durable across process crashes in WAL), `foreign_keys=ON`;
- no checkpoint when a connection closes (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`): by default the last
  connection to close copies the WAL into the database and deletes it, two fsyncs and a file
  creation for the next run, about 20 ms of every recorded run on a VM disk (measured: commit and
  close 19.5 ms with, 0.05 ms without). The WAL then stays beside the database (`-wal`, `-shm`)
  and SQLite's automatic checkpoint (every 1,000 pages) folds it in during some later commit.

Values from logs go in through `?` parameters only; SQL text is never built from data.
A file that is not SQLite, not ours, damaged or from a newer triage raises `HistoryError` with a
way out, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

# "TRHI": marks the file as a triage history database.
APPLICATION_ID = 0x54524849
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000

_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY,
        run_id TEXT,
        ts REAL NOT NULL,
        host TEXT,
        recorded_on TEXT,
        triage_version TEXT,
        kb_digest TEXT,
        scanner TEXT,
        engine_version TEXT,
        gpu TEXT,
        facts TEXT NOT NULL DEFAULT '{}',
        failed INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS runs_ts ON runs(ts)",
    "CREATE INDEX IF NOT EXISTS runs_run_id ON runs(run_id)",
    """CREATE TABLE IF NOT EXISTS inputs (
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        digest TEXT,
        lines INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        format TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS inputs_run ON inputs(run)",
    "CREATE INDEX IF NOT EXISTS inputs_digest ON inputs(digest)",
    """CREATE TABLE IF NOT EXISTS hits (
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        signature TEXT NOT NULL,
        rank INTEGER NOT NULL,
        score REAL,
        severity TEXT,
        explained_by TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS hits_run ON hits(run)",
    "CREATE INDEX IF NOT EXISTS hits_signature ON hits(signature, run)",
    """CREATE TABLE IF NOT EXISTS clusters (
        id INTEGER PRIMARY KEY,
        template TEXT NOT NULL,
        exception TEXT NOT NULL DEFAULT '',
        first_ts REAL NOT NULL,
        last_ts REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS cluster_templates (
        template TEXT PRIMARY KEY,
        cluster INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
        similarity REAL NOT NULL DEFAULT 100
    )""",
    "CREATE INDEX IF NOT EXISTS cluster_templates_cluster ON cluster_templates(cluster)",
    """CREATE TABLE IF NOT EXISTS unknown_lines (
        id INTEGER PRIMARY KEY,
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cluster INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
        fingerprint TEXT NOT NULL,
        text TEXT NOT NULL,
        input TEXT,
        line INTEGER,
        count INTEGER NOT NULL DEFAULT 1
    )""",
    "CREATE INDEX IF NOT EXISTS unknown_lines_cluster ON unknown_lines(cluster)",
    "CREATE INDEX IF NOT EXISTS unknown_lines_run ON unknown_lines(run)",
    """CREATE TABLE IF NOT EXISTS feedback (
        id INTEGER PRIMARY KEY,
        run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        signature TEXT NOT NULL,
        verdict TEXT NOT NULL CHECK (verdict IN ('confirm', 'wrong')),
        fix TEXT,
        note TEXT,
        ts REAL NOT NULL,
        user TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS feedback_signature ON feedback(signature)",
)


class HistoryError(Exception):
    """The history database cannot be used; the message says why and what to do."""


def data_dir() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "triage"


def default_db_path() -> Path:
    """`$TRIAGE_DB`, else `$XDG_DATA_HOME/triage/history.db` (~/.local/share/triage/...)."""
    explicit = os.environ.get("TRIAGE_DB")
    if explicit:
        return Path(explicit)
    return data_dir() / "history.db"


def resolve(db_path: Path | str | None) -> Path:
    return Path(db_path) if db_path else default_db_path()


def way_out(path: Path) -> str:
    return (
        f"move it aside (mv '{path}' '{path}.bad') or choose another file with --db PATH "
        "/ TRIAGE_DB"
    )


def _precheck(path: Path) -> None:
    # The file is never opened here with Python's open(): closing any descriptor of a database file
    # drops the POSIX locks every SQLite connection of this process holds on it, which lets another
    # process checkpoint and reset a WAL still in use (the classic way to corrupt SQLite).
    if path.is_dir():
        raise HistoryError(f"history database {path} is a directory: choose a file with --db PATH")


def _create_private(path: Path) -> None:
    """Create the empty database file readable by its owner only (SQLite gives its -wal and -shm
    files the same mode): the history holds log lines. A new file has no lock to lose on close."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def refuse_foreign(db_path: Path | str) -> None:
    """Raise HistoryError when db_path holds a file that is not a triage history (not SQLite, or
    someone else's database), before anything opens it for writing. Missing or zero-length: new.
    Call it before any connection to that file exists in this process (see `_precheck`)."""
    path = resolve(db_path)
    _precheck(path)
    try:
        if not path.exists() or path.stat().st_size == 0:
            return
    except OSError as exc:
        raise HistoryError(f"cannot open history database {path}: {exc.strerror}") from None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open history database {path}: {exc}") from None
    try:
        _identify(conn, path)
    except sqlite3.DatabaseError as exc:
        raise damaged(path, exc) from None
    finally:
        conn.close()


def connect(db_path: Path | str | None = None, *, create: bool = True) -> sqlite3.Connection:
    """Open (and if needed create) the history database with the project's pragmas.

    The connection is in autocommit mode; writes go through `write()`.
    """
    path = resolve(db_path)
    _precheck(path)
    if not path.exists():
        if not create:
            raise HistoryError(f"no history database at {path} (nothing recorded yet)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_private(path)
        except OSError as exc:
            raise HistoryError(f"cannot create {path.parent}: {exc.strerror}") from None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open history database {path}: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        _identify(conn, path)
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        _no_checkpoint_on_close(conn, path)
        _ensure_schema(conn, path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise damaged(path, exc) from None
    except HistoryError:
        conn.close()
        raise
    return conn


_NO_CKPT_ON_CLOSE = 1006  # SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (SQLite >= 3.16)


def _no_checkpoint_on_close(conn: sqlite3.Connection, path: Path) -> bool:
    """Turn off the checkpoint on close (see the module docstring); False where it cannot be.

    Python 3.12 has `Connection.setconfig`. On CPython 3.11 the same call goes through ctypes to
    the SQLite library the `_sqlite3` module is linked with, on the connection's handle (the first
    field of CPython 3.11's connection object), used only once `sqlite3_db_filename` on it names
    this very file. Anything else (another interpreter, a statically linked SQLite) keeps
    SQLite's default: slower, never wrong."""
    setconfig = getattr(conn, "setconfig", None)
    if setconfig is not None:
        with contextlib.suppress(sqlite3.Error, AttributeError):
            setconfig(getattr(sqlite3, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", _NO_CKPT_ON_CLOSE), True)
            return True
        return False
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return False
    try:
        import _sqlite3
        import ctypes

        lib = ctypes.CDLL(_sqlite3.__file__)
        filename = lib.sqlite3_db_filename
        db_config = lib.sqlite3_db_config
    except (OSError, AttributeError, ImportError):
        return False
    filename.restype = ctypes.c_char_p
    filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle:
        return False
    named = filename(handle, b"main")
    if not named or os.path.realpath(os.fsdecode(named)) != os.path.realpath(path):
        return False
    db_config.restype = ctypes.c_int
    done = db_config(
        ctypes.c_void_p(handle), ctypes.c_int(_NO_CKPT_ON_CLOSE), ctypes.c_int(1), None
    )
    return bool(done == 0)


def damaged(path: Path, exc: BaseException) -> HistoryError:
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return HistoryError(f"history database {path} is busy ({exc}); try again")
    if "file is not a database" in str(exc):
        return HistoryError(
            f"{path} is not an SQLite database (not a triage history): {way_out(path)}"
        )
    return HistoryError(
        f"history database {path} is damaged or unreadable ({exc}): {way_out(path)}"
    )


def _foreign(path: Path) -> HistoryError:
    return HistoryError(f"{path} is an SQLite database but not a triage history: {way_out(path)}")


def _identify(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse, before changing anything, someone else's database or one from a newer triage."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id == APPLICATION_ID and version > SCHEMA_VERSION:
        raise HistoryError(
            f"history database {path} was written by a newer triage "
            f"(schema {version} > {SCHEMA_VERSION}): upgrade triage or use "
            "--db PATH"
        )
    if app_id == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables:
            raise _foreign(path)
    elif app_id != APPLICATION_ID:
        raise _foreign(path)


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id == APPLICATION_ID and version == SCHEMA_VERSION:
        return
    with write(conn):
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
            raise _foreign(path)
        for stmt in _DDL:
            conn.execute(stmt)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the write lock up front (`BEGIN IMMEDIATE`)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def opened(
    db_path: Path | str | None = None, *, create: bool = True
) -> Iterator[sqlite3.Connection]:
    """`connect()` as a context manager that closes the connection and turns SQLite errors into
    `HistoryError` (damaged file, busy, ...)."""
    path = resolve(db_path)
    conn = connect(path, create=create)
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        raise damaged(path, exc) from None
    finally:
        conn.close()


def safe_text(text: str, limit: int = 4000) -> str:
    """Text from a log as it can be stored and shown: lone surrogates replaced, NUL made visible."""
    text = text[:limit]
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
