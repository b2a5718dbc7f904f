"""The message catalog's cost: the located stage on the corpus, start-up of a healthy run, and the
scan of a generated log with and without the traceback-frame pattern the catalog adds.

    python bench/catalog.py [--runs N] [--size-mb 50]

The catalog is switched off by pointing $TRIAGE_CATALOG at a missing file (the stage then leaves
every line unrecognized); the frame pattern by rebuilding the engine's table without it. Medians
of N runs; caches and history under a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
HEALTHY = sorted((ROOT / "corpus" / "healthy").glob("*.log"))[0]


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def corpus_runs(runs: int) -> dict[str, float]:
    """Wall ms to triage every corpus log in one process, catalog on and off, and the lines located."""
    from triage.api import Engine, load_kb
    from triage.catalog import store

    engine = Engine(load_kb())
    logs = sorted((ROOT / "corpus").rglob("*.log"))
    out: dict[str, float] = {}
    for label, path in (("off", "/nonexistent/catalog.sqlite"), ("on", "")):
        if path:
            os.environ["TRIAGE_CATALOG"] = path
        else:
            os.environ.pop("TRIAGE_CATALOG", None)
        store._OPEN.clear()
        samples = []
        located = 0
        for _ in range(runs):
            start = time.perf_counter()
            located = sum(
                h.basis == "located" for log in logs for h in engine.run([str(log)]).hypotheses
            )
            samples.append(time.perf_counter() - start)
        out[f"corpus_{label}_ms"] = _median(samples)
        out[f"corpus_{label}_located"] = located
    os.environ.pop("TRIAGE_CATALOG", None)
    return out


def startup(runs: int, tmp: Path) -> dict[str, float]:
    """Wall ms of `triage --no-history` on a healthy log in a fresh process, catalog on and off."""
    out: dict[str, float] = {}
    for label, path in (("off", "/nonexistent/catalog.sqlite"), ("on", "")):
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache"), "PYTHONPATH": str(ROOT)}
        if path:
            env["TRIAGE_CATALOG"] = path
        cmd = [sys.executable, "-m", "triage", "--no-history", str(HEALTHY)]
        subprocess.run(cmd, env=env, capture_output=True, check=False)  # warm the pattern cache
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=False)
            samples.append(time.perf_counter() - start)
        out[f"healthy_startup_{label}_ms"] = _median(samples)
    return out


def frame_scan(runs: int, size_mb: int, tmp: Path) -> dict[str, float]:
    """Wall ms to triage a generated log (bench/genlog.py) with and without the frame pattern."""
    from triage.api import Engine, load_kb
    from triage.events import SALIENT_PATTERNS
    from triage.facts import FACT_PATTERNS
    from triage.match import build_table

    log = tmp / f"gen-{size_mb}.log"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "genlog.py"), str(log), "--size-mb", str(size_mb)],
        check=True,
    )
    kb = load_kb()
    with_frame = Engine(kb)
    without = Engine(kb)
    without.table = build_table(kb.signatures, FACT_PATTERNS, SALIENT_PATTERNS)
    out: dict[str, float] = {}
    for label, engine in (("without_frames", without), ("with_frames", with_frame)):
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            engine.run([str(log)])
            samples.append(time.perf_counter() - start)
        out[f"gen{size_mb}_{label}_ms"] = _median(samples)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mb", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
        os.environ["TRIAGE_DB"] = str(tmp / "history.db")
        results = {**corpus_runs(args.runs), **startup(args.runs, tmp)}
        results.update(frame_scan(args.runs, args.size_mb, tmp))
    for key, value in results.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
