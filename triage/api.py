"""The engine facade: the only module that knows the order of the stages.

read -> (scan + locate + frame + confirm) -> facts + snapshots -> events -> rank -> catalog
-> Report -> redact.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from triage.events import (
    SALIENT_PATTERNS,
    TRACEBACK_HEAD,
    UnexplainedLine,
    group_tracebacks,
    headless_tracebacks,
    process_key,
    unexplained,
)
from triage.facts import FACT_PATTERNS, STATS_PATTERN, collect_facts, launch_index, launch_starts
from triage.frame import detect_format, frame_line
from triage.kb.knowledge import KnowledgeBase as KnowledgeBase  # re-exported: the facade's type
from triage.match import Matcher, build_table
from triage.models import Hit, Hypothesis, InputInfo, Line, Report, Unrecognized
from triage.rank import Scope, rank
from triage.read import (
    CHUNK_SIZE,
    MAX_DECOMPRESSED,
    SNIFF_BYTES,
    InputError,
    Segment,
    Source,
    Text,
    TextWindow,
    expand_inputs,
    read_source,
)
from triage.redact import redact, redact_report
from triage.snapshots import SNAPSHOT_PATTERNS, read_snapshots
from triage.textutil import looks_binary, mask, only_journal_markers

if TYPE_CHECKING:
    from triage.kb.records import Signature

FORMAT_SAMPLE_LINES = 200
# Traceback frame lines: the message catalog locates a bare exception line by its innermost frame.
# (The pattern is a literal of triage.catalog.frames, repeated so a run imports that package only
# when a line needs locating; a test keeps the two equal.)
CATALOG_FRAME = (
    "catalog-frame",
    r'File "[^"\n]{1,400}", line [0-9]+, in |File [^"\s][^\n]{0,400}?\.py:[0-9]+, in ',
)
# Go stack frame lines (function and file lines): a Go panic is located by its goroutine's frames
# (a literal of triage.catalog.native, repeated for the same reason; a test keeps the two equal).
GO_FRAME = (
    "go-frame",
    r"\.go:[0-9]+(?: \+0x[0-9a-f]+|\r?$)"
    r"|(?:^|\s)(?:(?:[a-z0-9-]+\.)+[a-z]{2,}/[\w./~-]+|main|runtime)\.(?:\(\*?[A-Za-z_]\w*(?:\[[^\]\n]{0,80}\])?\)\.)?"
    r"[A-Za-z_]\w*(?:\.func[0-9]+)*\((?:0x[0-9a-f]|\{0x|\.\.\.\)|\)$)",
)


def _crash_shadow(
    loose: Sequence[UnexplainedLine], go_frame_hits: Sequence[Hit]
) -> set[tuple[str, int]]:
    """The failure lines a crash that prints its own place accounts for (a Go panic and its
    frames, an assertion's file:line; see `triage.catalog.native.crash_shadow`)."""
    from triage.catalog.native import crash_shadow

    lines = [
        (u.line.input, u.line.number, u.line.message or u.line.text or u.line.raw) for u in loose
    ]
    frames = [(h.line.input, h.line.number, h.line.text) for h in go_frame_hits]
    return crash_shadow(lines, frames)


def load_kb(root: Path | None = None) -> KnowledgeBase:
    """The knowledge base: from the compiled SQLite store when current, else from YAML."""
    from triage.kb import store

    return store.load_current(root)


@dataclass
class InputSpec:
    """One input: a path, or a stream (stdin, an in-memory text) when path is None."""

    name: str
    path: Path | None = None
    stream: BinaryIO | None = None
    first_line: int = 1  # the number of its first line (an excerpt of a larger text)


@dataclass
class RunOptions:
    """How one run reads and reports."""

    chunk_size: int = CHUNK_SIZE
    max_decompressed: int = MAX_DECOMPRESSED
    engine: str | None = None
    stats: bool = False  # also read vLLM's periodic stats lines into facts["stats"]
    jobs: int = 1  # worker processes for large regular files (byte ranges, merged in order)
    digest: bool = True  # CRC-32 of each input (the history's content key; costs ~0.3 s per GB)
    # Told (input name, bytes just read) after each segment: the CLI's progress line.
    progress: Callable[[str, int], None] | None = None
    redact: bool = True  # secrets removed from the report (`triage --no-redact` turns it off)


class Engine:
    """Compiles the knowledge base once; `run` triages one set of inputs."""

    def __init__(self, kb: KnowledgeBase, options: RunOptions | None = None) -> None:
        self.kb = kb
        self.options = options or RunOptions()
        facts = FACT_PATTERNS + SNAPSHOT_PATTERNS + ((STATS_PATTERN,) if self.options.stats else ())
        self.table = build_table(
            kb.pattern_sources, facts, (*SALIENT_PATTERNS, CATALOG_FRAME, GO_FRAME)
        )
        self._engine_name = self.options.engine

    def new_matcher(self) -> Matcher:
        return Matcher(self.table, self._engine_name)

    def run(self, args: Sequence[str], stdin: BinaryIO | None = None) -> Report:
        """Triage the named inputs ('-' is stdin; directories are walked)."""
        pairs = expand_inputs(list(args) or ["-"])
        specs = [InputSpec(name, path, stdin if path is None else None) for name, path in pairs]
        return self.run_inputs(specs, strict=len(pairs) == 1)

    def run_inputs(self, specs: Sequence[InputSpec], *, strict: bool = False) -> Report:
        """Triage inputs given as paths or streams. With `strict`, an input that cannot be read
        raises InputError; otherwise it is recorded as skipped.

        When every input is a plain file, a signature whose waiting supporting candidates
        overflowed before it fired gets them all from a rescan (see `Matcher`)."""
        rereadable = bool(specs) and all(s.path is not None and _plain_file(s.path) for s in specs)
        matcher = self.new_matcher()
        matcher.rereadable = rereadable
        sources: list[Source] = []
        samples: dict[str, list[Line]] = {}
        digests: dict[str, str] = {}
        parallel: set[str] = set()
        for spec in specs:
            name, path = spec.name, spec.path
            try:
                source, segments = self._open(spec)
            except InputError as exc:
                if strict:
                    raise
                sources.append(Source(name, path, skipped="unreadable", skip_reason=str(exc)))
                continue
            sources.append(source)
            digest = 0  # CRC-32 of the bytes scanned: a cheap content key for the history
            if self.options.jobs > 1 and path is not None and _splittable(path):
                from triage.parallel import scan_parallel

                head = _head(path)
                if looks_binary(head[:SNIFF_BYTES]):
                    source.skipped = BINARY_SKIPPED
                    continue
                samples[name] = sample_lines(head, name, 1)
                scan_parallel(self, matcher, source, path, self.options.jobs)
                parallel.add(name)
                digests[name] = ""
                continue
            try:
                for seg in segments:
                    if seg.first_line == 1 and _not_a_log(seg, source):
                        break
                    seg.first_line += spec.first_line - 1
                    if self.options.progress is not None:
                        self.options.progress(name, len(seg.data))
                    if self.options.digest:
                        digest = _crc32(seg.data, digest)
                    if name not in samples:
                        samples[name] = sample_lines(seg.data, seg.input, seg.first_line)
                    matcher.feed(seg)
            except InputError as exc:
                if strict:
                    raise
                source.skipped, source.skip_reason = "refused", str(exc)
            digests[name] = f"crc32:{digest:08x}" if self.options.digest else ""
        owners = matcher.rescan_needed()
        if rereadable and owners:
            self._rescan(matcher, frozenset(owners), specs, sources, parallel)
        matcher.forget_lines()  # every input is read: the per-line memos are no longer needed
        return self.report(matcher, sources, samples, digests)

    def _open(self, spec: InputSpec) -> tuple[Source, Iterator[Segment]]:
        return read_source(
            spec.name,
            spec.path,
            chunk_size=self.options.chunk_size,
            max_decompressed=self.options.max_decompressed,
            stdin=spec.stream,
        )

    def _rescan(
        self,
        matcher: Matcher,
        owners: frozenset[str],
        specs: Sequence[InputSpec],
        sources: list[Source],
        parallel: set[str],
    ) -> None:
        """Read the inputs again for every supporting line of these signatures."""
        matcher.begin_rescan(owners)
        readable = {src.name for src in sources if not src.skipped}
        for spec in specs:
            if spec.name not in readable or spec.path is None:
                continue
            if spec.name in parallel:
                from triage.parallel import rescan_parallel

                rescan_parallel(self, matcher, spec.name, spec.path, self.options.jobs, owners)
                continue
            try:
                _, segments = self._open(spec)
                for seg in segments:
                    seg.first_line += spec.first_line - 1
                    matcher.feed_rescan(seg)
            except InputError:
                continue  # the first pass recorded why

    def report(
        self,
        matcher: Matcher,
        sources: list[Source],
        samples: dict[str, list[Line]],
        digests: dict[str, str],
    ) -> Report:
        sig_hits: list[Hit] = []
        fact_hits: list[Hit] = []
        salient_hits: list[Hit] = []
        frame_hits: list[Hit] = []
        go_frame_hits: list[Hit] = []
        # Input order, whatever order the scan confirmed them in (supporting lines wait for their
        # decisive line; --jobs workers finish in any order): reports depend on the input only.
        position = {src.name: i for i, src in enumerate(sources)}
        ordered = _input_order(matcher.result.hits, position)
        for hit in ordered:
            ref = self.table.refs[hit.pattern_index]
            if ref.kind in ("sig", "diff"):
                sig_hits.append(hit)
            elif ref.kind == "fact":
                fact_hits.append(hit)
            elif ref.owner == CATALOG_FRAME[0]:
                frame_hits.append(hit)
            elif ref.owner == GO_FRAME[0]:
                go_frame_hits.append(hit)
            else:
                salient_hits.append(hit)
        headless = headless_tracebacks(salient_hits, frame_hits)
        salient_hits += headless
        cut_heads = {(h.line.input, h.line.number) for h in headless}
        launches = launch_starts(fact_hits)
        facts = collect_facts(_launch_facts(fact_hits, sig_hits, launches, self.kb.by_id))
        facts.update(read_snapshots(fact_hits))  # pasted ulimit / nvidia-smi / kubectl / ... blocks
        scope = Scope(launches=launches)
        hypotheses = rank(self.kb.by_id, sig_hits, facts, scope)
        # per input, the span from a launch's start to each of its ready lines (a start-up's
        # error records before one were recovered from)
        ready: dict[str, list[tuple[int, int]]] = {}
        for hit in fact_hits:
            if hit.signature == "ready":
                starts = launches.get(hit.line.input, [])
                launch = launch_index(starts, hit.line.number) if starts else 0
                begin = starts[launch] if starts and hit.line.number >= starts[0] else 1
                ready.setdefault(hit.line.input, []).append((begin, hit.line.number))
        loose = self._loose(hypotheses, sig_hits, salient_hits, ready)
        failing = bool(loose) or any(h.severity == "error" for h in hypotheses)
        if failing and not any(h.severity == "error" and h.kind != "symptom" for h in hypotheses):
            # A failure and no decisive cause: the supporting lines of signatures that never
            # fired may say which cause it is (basis "inferred"). A healthy log never gets here.
            extra = matcher.confirm_undecided()
            if extra:
                sig_hits = _input_order(sig_hits + extra, position)
            scope.infer = True
            # a traceback cut before its exception line says that something failed, not what:
            # it is reported, but no cause is inferred from lines near it
            shadow = _crash_shadow(loose, go_frame_hits)
            scope.failure_lines = {
                (u.line.input, u.line.number)
                for u in loose
                if TRACEBACK_HEAD not in (u.line.text or u.line.raw)
                and (u.line.input, u.line.number) not in cut_heads
                and (u.line.input, u.line.number) not in shadow
            }
            scope.frame_lines = {(h.line.input, h.line.number) for h in frame_hits}
            hypotheses = rank(self.kb.by_id, sig_hits, facts, scope)
            loose = self._loose(hypotheses, sig_hits, salient_hits, ready)
        if loose:  # the message catalog, opened only when a line needs locating
            from triage.catalog import locate

            frames = [(process_key(h.line), h.line.number, h.line.text) for h in frame_hits]
            excs = [
                (process_key(h.line), h.line.number, h.line.message or h.line.text)
                for h in salient_hits
                if h.signature == "exception"
            ]
            go_frames = [(h.line.input, h.line.number, h.line.text) for h in go_frame_hits]
            located, loose = locate(
                loose,
                facts,
                first_rank=len(hypotheses) + 1,
                frames=frames,
                exceptions=excs,
                go_frames=go_frames,
            )
            hypotheses = hypotheses + located
        for hyp in hypotheses:  # every decisive line, also those beyond the kept sample
            if hyp.basis == "decisive":
                hyp.matched_lines = matcher.result.decisive_lines.get(hyp.signature, 0)
        inputs = []
        skipped = []
        for src in sources:
            fmt = detect_format(samples.get(src.name, [])) if src.fmt == "plain" else src.fmt
            if src.lines == 0 and not src.skipped:
                src.skipped = "empty"
            inputs.append(
                InputInfo(
                    name=src.name,
                    lines=src.lines,
                    format=fmt,
                    bytes=src.bytes,
                    skip_reason=src.skip_reason if src.skipped else None,
                    digest=digests.get(src.name) or None,
                    skipped=src.skipped,
                    launches=launches.get(src.name, []),
                )
            )
            if src.skipped:
                reason = f"{src.skipped}: {src.skip_reason}" if src.skip_reason else src.skipped
                skipped.append({"input": src.name, "reason": reason})
            skipped.extend({"input": src.name, "reason": note} for note in src.notes)
        report = Report(
            inputs=inputs,
            facts=facts,
            hypotheses=hypotheses,
            unrecognized=[
                Unrecognized(
                    input=u.line.input,
                    line=u.line.number,
                    text=(u.line.text or u.line.raw)[:2000],
                    fingerprint=_fingerprint(u.line, u.fingerprint),
                    count=u.count,
                )
                for u in loose
            ],
            skipped=skipped,
            engine=matcher.engine,
        )
        return redact_report(report) if self.options.redact else report

    def _loose(
        self,
        hypotheses: list[Hypothesis],
        sig_hits: list[Hit],
        salient_hits: list[Hit],
        ready: dict[str, list[tuple[int, int]]],
    ) -> list[UnexplainedLine]:
        """Salient lines that no hypothesis accounts for."""
        fired = {h.signature for h in hypotheses} | {
            e.signature for h in hypotheses for e in h.explains
        }
        # only the places of salient lines are ever looked up (`events.unexplained` asks about
        # salient lines and their tracebacks' exception lines): a set of every signature hit's
        # place was 16 MB of a run's peak on 330,000 hits
        salient_at = {(h.line.input, h.line.number) for h in salient_hits}
        explained_lines = {
            place
            for h in sig_hits
            if h.signature in fired
            and h.role in ("decisive", "supporting", "continuation")
            and (place := (h.line.input, h.line.number)) in salient_at
        }
        explained_lines |= {(e.input, e.line) for h in hypotheses for e in h.evidence}
        failure_lines = {
            (e.input, e.line)
            for h in hypotheses
            if h.severity == "error"
            for e in h.evidence
            if e.role == "decisive"
        }
        tracebacks = group_tracebacks(salient_hits)
        return unexplained(
            salient_hits, explained_lines, tracebacks, failure_lines=failure_lines, ready=ready
        )


def _launch_facts(
    fact_hits: list[Hit],
    sig_hits: list[Hit],
    launches: dict[str, list[int]],
    signatures: Mapping[str, Signature],
) -> list[Hit]:
    """The fact hits of the launch that holds the failure: in an input with several launches, the
    launch of the first decisive line of an error-severity cause (else of any decisive line, else
    the last launch); other inputs keep all their facts."""
    if not launches:
        return fact_hits

    def rank_of(hit: Hit) -> int:
        sig = signatures.get(hit.signature)
        if sig is None:
            return 3
        return 0 if sig.severity == "error" and sig.kind == "cause" else 1

    decisive = [h for h in sig_hits if h.role == "decisive" and h.line.input in launches]
    focus: dict[str, int] = {}
    for hit in sorted(decisive, key=rank_of):  # stable: input order among equals
        focus.setdefault(hit.line.input, launch_index(launches[hit.line.input], hit.line.number))
    kept = []
    for hit in fact_hits:
        starts = launches.get(hit.line.input)
        if starts is None:
            kept.append(hit)
            continue
        wanted = focus.get(hit.line.input, len(starts))
        if launch_index(starts, hit.line.number) == wanted:
            kept.append(hit)
    return kept


PARALLEL_MIN_BYTES = 32 << 20


def _input_order(hits: list[Hit], position: dict[str, int]) -> list[Hit]:
    """Hits by (input position, line number, pattern index), ties in their given order: stable
    sorts on one key each, last key first, the same order as one sort on the tuple of the three
    without a tuple per hit (a tuple key per hit was 20 MB of a run's peak on 330,000 hits)."""
    ordered = sorted(hits, key=_PATTERN_INDEX)
    ordered.sort(key=_LINE_NUMBER)
    if len(position) > 1 or not position.keys() >= set(map(_LINE_INPUT, hits)):
        ordered.sort(key=lambda h: position.get(h.line.input, -1))
    return ordered


_PATTERN_INDEX = attrgetter("pattern_index")
_LINE_NUMBER = attrgetter("line.number")
_LINE_INPUT = attrgetter("line.input")


def _fingerprint(line: Line, fingerprint: str) -> str:
    """The fingerprint of a line holding a secret is made from the redacted line: masking may have
    cut the secret (a password with a '/' becomes part of a <PATH>) where redaction cannot find it,
    and lines that differ only in a secret belong to one cluster."""
    text = line.message or line.text
    clean = redact(text)
    return fingerprint if clean == text else mask(clean)


def _plain_file(path: Path) -> bool:
    """A regular, uncompressed file: it can be read twice and cut into byte ranges."""
    try:
        if not path.is_file():
            return False
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head[:2] != b"\x1f\x8b" and head != b"\x28\xb5\x2f\xfd"


def _splittable(path: Path) -> bool:
    """A large plain file: worth cutting into byte ranges for several workers."""
    try:
        large = path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False
    return large and _plain_file(path)


BINARY_SKIPPED = "binary file, skipped"
NO_ENTRIES_SKIPPED = "no log entries (journalctl printed only its markers, e.g. '-- No entries --')"


def _not_a_log(seg: Segment, source: Source) -> bool:
    """Mark an input whose first segment is binary data, or only journalctl's markers, as
    skipped: such an input is not a healthy log, and must not be reported as one."""
    if source.not_text:  # judged by the reader on the raw bytes (triage/read.py)
        source.skipped = BINARY_SKIPPED
    elif len(seg.data) <= SNIFF_BYTES and only_journal_markers(bytes(seg.data)):
        source.skipped = NO_ENTRIES_SKIPPED
    else:
        return False
    source.lines = 0
    return True


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(1 << 16)


def _crc32(data: Text, value: int) -> int:
    if isinstance(data, TextWindow):
        with data.view() as view:
            return zlib.crc32(view, value)
    return zlib.crc32(data, value)


def sample_lines(data: Text, name: str, first_line: int) -> list[Line]:
    """Frame the first lines of an input to name its format (cheap: a few hundred lines)."""
    head = data[: 1 << 16].decode("utf-8", "replace")
    out = []
    for i, raw in enumerate(
        head.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:FORMAT_SAMPLE_LINES]
    ):
        if raw.strip():
            out.append(frame_line(Line(input=name, number=first_line + i, raw=raw)))
    return out


def triage(args: Sequence[str], kb: KnowledgeBase | None = None) -> Report:
    """One-call API: triage files, directories or '-' with the shipped knowledge base."""
    return Engine(kb or load_kb()).run(args)
