"""Scan one large file with several worker processes over byte ranges, then merge in input order.

Ranges end just after a line feed, so no line is split and every line break is counted once. Each
worker scans and confirms its range with its own matcher and returns its hits with line numbers
relative to the range; the parent shifts them by the lines of the ranges before, and confirms the
supporting candidates that waited for a decisive hit found in another range.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.match import KEEP_HITS_PER_PATTERN
from triage.read import CHUNK_SIZE, Source, iter_mmap_segments

if TYPE_CHECKING:
    from triage.api import Engine
    from triage.match import Matcher
    from triage.models import Hit

_ENGINE: Engine | None = None


@dataclass
class RangeResult:
    lines: int
    nbytes: int
    hits: list[Hit]
    counts: dict[int, int]
    decided: set[str]
    pending: dict[str, list[tuple[str, int, bytes, list[int]]]]
    notes: list[str] = field(default_factory=list)
    fmt: str = "plain"
    ends_with_break: bool = True


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


def _scan_range(args: tuple[str, str, int, int]) -> RangeResult:
    name, path_str, start, end = args
    assert _ENGINE is not None
    matcher = _ENGINE.new_matcher()
    source = Source(name=name, path=Path(path_str))
    last = b""
    segments = iter_mmap_segments(Path(path_str), source, CHUNK_SIZE, byte_range=(start, end))
    for seg in segments:
        matcher.feed(seg)
        last = seg.data[-1:] if seg.data else last
    pending = {owner: list(q) for owner, q in matcher._pending.items()}
    return RangeResult(
        source.lines,
        source.bytes,
        matcher.result.hits,
        dict(matcher.result.counts),
        set(matcher._decided),
        pending,
        source.notes,
        source.fmt,
        last in (b"\n", b"\r"),
    )


def scan_parallel(engine: Engine, matcher: Matcher, source: Source, path: Path, jobs: int) -> None:
    """Fill matcher and source from `jobs` workers scanning byte ranges of path."""
    global _ENGINE
    _ENGINE = engine
    ranges = split_points(path, jobs)
    ctx: Any = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(ranges), mp_context=ctx) as pool:
        results = list(pool.map(_scan_range, [(source.name, str(path), a, b) for a, b in ranges]))
    offset = 0
    all_pending: list[tuple[str, int, bytes, list[int]]] = []
    owners: dict[int, str] = {}
    kept: dict[int, int] = defaultdict(int)
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
        matcher._decided |= res.decided
        for owner, entries in res.pending.items():
            for input_name, number, raw, pids in entries:
                all_pending.append((input_name, number + offset, raw, pids))
                for pid in pids:
                    owners[pid] = owner
        source.notes.extend(res.notes)
        if res.fmt != "plain":
            source.fmt = res.fmt
        offset += res.lines
        source.bytes += res.nbytes
    source.lines = offset
    for input_name, number, raw, pids in all_pending:
        owner = owners[pids[0]]
        if owner in matcher._decided:
            from triage.frame import frame_line
            from triage.models import Line

            line = Line(input=input_name, number=number, raw=raw.decode("utf-8", "replace"))
            frame_line(line)
            matcher._confirm(line, pids)
    _ENGINE = None
