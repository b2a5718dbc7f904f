"""`kill -9` a knowledge-base rebuild mid-way: the previous database still loads and passes
`quick_check`, and the next build sweeps the orphaned temporary file."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from triage.kb import store
from triage.kb.paths import content_hash, default_signature_dir

IDS = (
    "cuda-illegal-memory-access",
    "kv-cache-no-memory",
    "nccl-unhandled-system-error",
    "gpu-fallen-off-the-bus",
    "hf-repo-not-found",
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRIAGE_DB", str(tmp_path / "history.db"))


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "signatures"
    for path in sorted(default_signature_dir().glob("*/*.yaml")):
        if path.stem in IDS:
            (root / path.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, root / path.parent.name / path.name)
    return root


def _check_loads(db: Path, digest: str) -> None:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        meta = store.read_meta(conn)
        assert meta.digest == digest
        assert len(store.read_signatures(conn)) == meta.rows == len(IDS)
    finally:
        conn.close()


# The child rebuilds after a change to the YAML; it announces when it is inside the build (the
# temporary file is written, not yet moved into place) and then stalls there.
_STALLING_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from triage.kb import store

    root, db, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    real_check = store._check

    def stalled_check(conn, rows):
        real_check(conn, rows)
        ready.write_text("inside")
        time.sleep(60)

    store._check = stalled_check
    store.build(root, db)
""")

# The child rebuilds over and over; the parent kills it at a random moment.
_LOOPING_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from triage.kb import store

    root, db, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    while True:
        store.build(root, db)
        ready.touch()
""")


def _spawn(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_kill_mid_build_keeps_previous_database(tmp_path: Path) -> None:
    root = _root(tmp_path)
    db = tmp_path / "kb.db"
    store.build(root, db)
    old_digest = content_hash(root)
    victim = next(root.glob("*/kv-cache-no-memory.yaml"))
    victim.write_text(victim.read_text().replace("priority: 60", "priority: 61"))
    ready = tmp_path / "ready"
    child = _spawn(_STALLING_CHILD, str(root), str(db), str(ready))
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, child.stderr.read() if child.stderr else b""
            assert time.monotonic() < deadline, "the rebuild never started"
            time.sleep(0.02)
        leftovers = [p for p in tmp_path.iterdir() if store._TMP_MARK in p.name]
        assert leftovers, "the rebuild writes a temporary file beside the database"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # The previous database is intact, and it is the old one.
    _check_loads(db, old_digest)
    assert [p for p in tmp_path.iterdir() if store._TMP_MARK in p.name], "kill -9 left its temp"
    # The engine notices it is stale, rebuilds, and the orphan is swept.
    kb = store.load_current(root, db)
    assert kb.by_id["kv-cache-no-memory"].priority == 61
    assert not [p for p in tmp_path.iterdir() if store._TMP_MARK in p.name]
    _check_loads(db, content_hash(root))


def test_kill_at_random_moments(tmp_path: Path) -> None:
    root = _root(tmp_path)
    db = tmp_path / "kb.db"
    store.build(root, db)
    digest = content_hash(root)
    rng = random.Random(6)
    for attempt in range(3):
        ready = tmp_path / f"ready-{attempt}"
        child = _spawn(_LOOPING_CHILD, str(root), str(db), str(ready))
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():  # one build done: the next ones are under way
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(rng.random() * 0.3)  # a build takes about that long
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        _check_loads(db, digest)
    assert store.load_current(root, db).source == "sqlite"
