"""Measure what the message catalog's lookup costs on a large real log: the corpus concatenated.

Runs the engine on one file made of every corpus log (healthy ones included), N times with the
shipped catalog and N times with none (TRIAGE_CATALOG pointing at a missing file: every salient
line then stays unrecognized, nothing else changes), alternating, and prints the medians of the
process CPU time of each run, and of the catalog stage itself (`triage.catalog.locate`, timed from
inside the run: on a shared machine the difference of two whole runs is mostly noise). The benchmark (bench/run.py) is the
lead's; this is the catalog's own check of issue 18's "< 5%" on a log where many lines need one.

Usage: python scripts/measure_catalog_cost.py corpus [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import triage.catalog
from triage.api import Engine, load_kb
from triage.catalog import store

STAGE: list[float] = []  # CPU seconds spent in the catalog stage, per call


def _timed_locate(*args: Any, **kwargs: Any) -> Any:
    start = time.process_time()
    try:
        return _LOCATE(*args, **kwargs)
    finally:
        STAGE.append(time.process_time() - start)


_LOCATE = triage.catalog.locate


def concatenated(root: Path, out: Path) -> tuple[int, int]:
    """Every .log under root, in path order, into one file; returns (bytes, lines)."""
    lines = 0
    with out.open("wb") as fh:
        for log in sorted(root.rglob("*.log")):
            data = log.read_bytes()
            data = data if data.endswith(b"\n") else data + b"\n"
            lines += data.count(b"\n")
            fh.write(data)
    return out.stat().st_size, lines


def one_run(engine: Engine, log: Path, catalog: str) -> tuple[float, int, int]:
    os.environ["TRIAGE_CATALOG"] = catalog
    store._OPEN.clear()  # each run opens the catalog afresh, as a new process would
    start = time.process_time()
    report = engine.run([str(log)])
    took = time.process_time() - start
    located = sum(1 for h in report.hypotheses if getattr(h, "basis", "") == "located")
    return took, located, len(report.unrecognized)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    triage.catalog.locate = _timed_locate  # the facade imports it at call time
    engine = Engine(load_kb())
    shipped = str(store.DATA_FILE)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "corpus-concatenated.log"
        size, lines = concatenated(args.root, log)
        missing = str(Path(tmp) / "no-catalog.sqlite")
        one_run(engine, log, shipped)  # warm the page cache and the knowledge base
        with_cat: list[float] = []
        without: list[float] = []
        stage: list[float] = []
        counts = (0, 0)
        for _ in range(args.runs):
            STAGE.clear()
            took, located, unrec = one_run(engine, log, shipped)
            with_cat.append(took)
            stage.append(sum(STAGE))
            counts = (located, unrec)
            without.append(one_run(engine, log, missing)[0])
    a, b = statistics.median(with_cat), statistics.median(without)
    c = statistics.median(stage)
    print(f"input: {args.root} concatenated, {size} bytes, {lines} lines")
    print(f"runs: {args.runs} each, alternating; process CPU time")
    print(f"median run with the catalog:    {a:.3f} s")
    print(f"median run without (no file):   {b:.3f} s  (difference {100.0 * (a - b) / b:+.1f}%)")
    print(f"median catalog stage (locate):  {c:.3f} s  ({100.0 * c / a:.1f}% of the run)")
    print(f"located hypotheses: {counts[0]}; still unrecognized: {counts[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
