"""Scan one large file with several worker processes over byte ranges, then merge in input order.

Ranges end just after a line feed, so no line is split and every line break is counted once. Each
worker scans and confirms its range with its own matcher and returns its hits with line numbers
relative to the range; the parent shifts them by the lines of the ranges before, and confirms the
supporting candidates that waited for a decisive hit found in another range. Where a worker's
bounded queue overflowed, the rescan (see `Matcher.begin_rescan`) runs over the same ranges.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from triage.match import KEEP_HITS_PER_PATTERN
from triage.read import CHUNK_SIZE, Source, iter_file_segments, native_index

if TYPE_CHECKING:
    from triage.match import Matcher
    from triage.models import Hit


class Engine(Protocol):
    """What the workers need of the engine facade (`triage.api.Engine`, which calls this
    module: a protocol keeps the import one-way)."""

    def new_matcher(self) -> Matcher: ...


_ENGINE: Engine | None = None


@dataclass
class RangeResult:
    lines: int
    nbytes: int
    hits: list[Hit]
    counts: dict[int, int]
    decided: set[str]
    pending: dict[str, list[tuple[str, int, bytes, list[int]]]]
    overflowed: set[str]
    notes: list[str] = field(default_factory=list)
    fmt: str = "plain"
    decisive_lines: dict[str, int] = field(default_factory=dict)


def split_points(path: Path, jobs: int) -> list[tuple[int, int]]:
    size = path.stat().st_size
    cuts = [0]
    with path.open("rb") as fh:
        for k in range(1, jobs):
            fh.seek(size * k // jobs)
            fh.readline()  # move just past the next LF
            pos = fh.tell()
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def _scan_range(args: tuple[str, str, int, int, frozenset[str] | None]) -> RangeResult:
    """One worker's range; with `rescan`, only the supporting patterns of those signatures."""
    name, path_str, start, end, rescan = args
    assert _ENGINE is not None
    matcher = _ENGINE.new_matcher()
    matcher.rereadable = True  # a range of a plain file: any overflow is answered by a rescan
    source = Source(name=name, path=Path(path_str))
    feed = matcher.feed
    if rescan is not None:
        matcher.begin_rescan(rescan)
        feed = matcher.feed_rescan
    for seg in iter_file_segments(Path(path_str), source, CHUNK_SIZE, byte_range=(start, end)):
        feed(seg)
    return RangeResult(
        source.lines,
        source.bytes,
        matcher.result.hits,
        dict(matcher.result.counts),
        set(matcher.decided),
        matcher.waiting(),
        matcher.overflowed,
        source.notes,
        source.fmt,
        dict(matcher.result.decisive_lines),
    )


def _run(
    engine: Engine, name: str, path: Path, jobs: int, rescan: frozenset[str] | None
) -> list[RangeResult]:
    global _ENGINE
    _ENGINE = engine  # inherited by the forked workers, never pickled
    if native_index() is None:  # the numpy line index is imported once here, not per worker
        with contextlib.suppress(ImportError):
            import numpy  # noqa: F401
    try:
        ranges = split_points(path, jobs)
        ctx: Any = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=len(ranges), mp_context=ctx) as pool:
            work = [(name, str(path), a, b, rescan) for a, b in ranges]
            return list(pool.map(_scan_range, work))
    finally:
        _ENGINE = None


def _merge(matcher: Matcher, results: list[RangeResult]) -> int:
    """Add the workers' hits to matcher with file line numbers; return the file's lines."""
    offset = 0
    kept: dict[int, int] = defaultdict(int)
    waiting: list[tuple[str, int, bytes, list[int]]] = []
    for res in results:
        shifted: set[int] = set()
        for hit in res.hits:
            # the first KEEP_HITS_PER_PATTERN in input order, as one process keeps them
            kept[hit.pattern_index] += 1
            if kept[hit.pattern_index] > KEEP_HITS_PER_PATTERN:
                continue
            if id(hit.line) not in shifted:  # hits on one line share its Line object
                shifted.add(id(hit.line))
                hit.line.number += offset
            matcher.result.hits.append(hit)
        for pid, n in res.counts.items():
            matcher.result.counts[pid] += n
        for sig_id, n in res.decisive_lines.items():
            matcher.result.decisive_lines[sig_id] += n
        matcher.adopt_decisions(res.decided)
        matcher.overflowed |= res.overflowed
        for entries in res.pending.values():
            waiting.extend(
                (name, number + offset, raw, pids) for name, number, raw, pids in entries
            )
        offset += res.lines
    matcher.confirm_waiting(waiting)
    return offset


def scan_parallel(engine: Engine, matcher: Matcher, source: Source, path: Path, jobs: int) -> None:
    """First pass: fill matcher and source from `jobs` workers scanning byte ranges of path."""
    results = _run(engine, source.name, path, jobs, None)
    source.lines = _merge(matcher, results)
    for res in results:
        source.notes.extend(res.notes)
        source.bytes += res.nbytes
        if res.fmt != "plain":
            source.fmt = res.fmt


def rescan_parallel(
    engine: Engine, matcher: Matcher, name: str, path: Path, jobs: int, owners: frozenset[str]
) -> None:
    """The rescan of `Matcher.begin_rescan` over the same ranges, in parallel."""
    _merge(matcher, _run(engine, name, path, jobs, owners))
