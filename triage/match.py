"""Find every signature, fact and salient-line pattern in the input with one multi-pattern pass.

The pattern table holds every regex the run needs; a scanner (Hyperscan, RE2 Set or `re`) reports
candidate end offsets over each byte segment; offsets are mapped to their lines; only those lines
are decoded and confirmed with the exact pattern (RE2, or `regex` under a timeout), captures
extracted, and a signature's `not` confusers checked on the same line. Cost is linear in the input
plus the number of candidate lines, never lines x patterns.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from triage.confirm_cache import MAX_CACHED_LINE, ConfirmCache, confirm_text
from triage.frame import frame_line
from triage.kb.records import DifferentialCheck, EvidenceCheck, Signature, SignatureCore
from triage.models import Hit, Line
from triage.read import Segment, Text, TextWindow, native_grouping
from triage.scanners import Scanner, make_scanner
from triage.usertext import hide_user_text

# Per pattern, the confirmed hits kept in full; beyond that only counted (bounded memory on logs
# where one error repeats a million times).
KEEP_HITS_PER_PATTERN = 200
_NO_CAPTURES: dict[str, str] = {}  # shared by every hit without named groups: read-only
# Supporting and differential-evidence candidates are confirmed only for signatures that have a
# decisive hit: until then the most recent ones wait here, raw and unframed (bounded per signature).
PENDING_PER_SIGNATURE = 64
MAX_PENDING_LINE = 64 << 10
# Lines longer than this are confirmed on their head and a window around the match.
LONG_LINE = 256 << 10
FRAME_HEAD_BYTES = 4096
# A window of a file read with more candidates than this is copied to bytes once, so that locating
# and slicing its lines are native calls rather than the window's Python methods.
DENSE_SEGMENT = 256


@dataclass(frozen=True, slots=True)
class PatternRef:
    """One scanned pattern and whom it reports to."""

    kind: str  # sig | diff | fact | salient
    owner: str  # signature id, fact name or salient class
    role: str  # decisive | supporting | evidence | fact | salient
    index: int  # index in the owner's list
    regex: str
    against: bool = False  # a differential branch's contradicting evidence (kind diff)


@dataclass
class PatternTable:
    """Every pattern of a run, numbered as the scanner reports them."""

    refs: list[PatternRef] = field(default_factory=list)
    not_patterns: dict[str, list[str]] = field(default_factory=dict)

    @property
    def patterns(self) -> list[str]:
        return [r.regex for r in self.refs]


# The continuation lines of multi-line blocks: a signature whose decisive patterns name the block's
# producer gets these as waiting patterns (role continuation), attached to its evidence when they
# follow a decisive line closely (rank.CONTINUATION_LINES).
CONTINUATIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("AER", "PCIe Bus Error"),
        r"error status/mask=[0-9a-fA-F]{8}"
        r"|[0-9a-fA-F]{2}\.[0-9]:(?: AER:)? +\[ ?[0-9]{1,2}\] [A-Za-z]"
        r"|PCIe Bus Error: severity=",
    ),
    (
        ("NVRM",),
        r"NVRM: (?:GPU at PCI|GPU Board Serial|A GPU crash dump|GPU [0-9a-fA-F]{4}:"
        r"|The NVIDIA GPU [0-9a-fA-F]{4}:|\(PCI ID: [0-9a-fA-F]{4}:|Reconstructed|_kgsp|krc"
        r"|RmInit)",
    ),
    (("NCCL", "nccl"), r"NCCL WARN "),
)


def build_table(
    signatures: Sequence[Signature | SignatureCore],
    facts: Sequence[tuple[str, str]] = (),
    salient: Sequence[tuple[str, str]] = (),
) -> PatternTable:
    table = PatternTable()
    for sig in signatures:
        if sig.status == "withdrawn":
            continue
        for i, p in enumerate(sig.match):
            table.refs.append(PatternRef("sig", sig.id, p.role, i, p.regex))
        branches: Sequence[DifferentialCheck | EvidenceCheck] = sig.differential
        for i, d in enumerate(branches):
            for j, ev in enumerate(d.evidence):
                table.refs.append(PatternRef("diff", sig.id, d.branch, i * 100 + j, ev))
            for j, ev in enumerate(d.against):
                table.refs.append(
                    PatternRef("diff", sig.id, d.branch, i * 100 + 50 + j, ev, against=True)
                )
        if sig.not_:
            table.not_patterns[sig.id] = [p.regex for p in sig.not_]
        for n, (producers, regex) in enumerate(CONTINUATIONS):
            if any(word in p.regex for p in sig.decisive for word in producers):
                table.refs.append(PatternRef("sig", sig.id, "continuation", 1000 + n, regex))
    for name, regex in facts:
        table.refs.append(PatternRef("fact", name, "fact", 0, regex))
    for name, regex in salient:
        table.refs.append(PatternRef("salient", name, "salient", 0, regex))
    return table


@dataclass
class MatchResult:
    """What one run's confirmation kept and counted."""

    hits: list[Hit] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # pattern id -> total
    # signature -> lines one of its decisive patterns matched, kept as hits or only counted
    decisive_lines: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Matcher:
    """Confirms the candidates of one run in a single pass over the input.

    Every pattern is scanned at once. Supporting and differential candidates wait, bounded per
    signature, until their signature has a decisive hit. When a signature's queue overflowed
    before it fired and the input can be read again (a plain file), `begin_rescan` builds a
    scanner for just its supporting patterns and `feed_rescan` finds all of them, replacing
    what the bounded queue kept: a file's report never depends on where its decisive line sat.
    (Scanning supporting patterns only in a second pass was measured slower: the second read and
    line index cost more than Hyperscan saves on the first.)

    With `rereadable` set (every input a plain file), a signature's waiting candidates stop being
    located once its queue overflowed: should it fire, the rescan finds them all again and
    replaces whatever this pass kept, so locating them would be wasted (a healthy high-load log's
    stats lines are most candidate lines).
    """

    def __init__(self, table: PatternTable, engine: str | None = None) -> None:
        self.table = table
        self._engine_name = engine
        self._eager = [
            not (r.kind == "diff" or (r.kind == "sig" and r.role in ("supporting", "continuation")))
            for r in table.refs
        ]
        self.scanner, self._users = self._scanner_for(range(len(table.refs)))
        self._rescan: tuple[Scanner, list[list[int]]] | None = None
        self.result = MatchResult()
        self._decided: set[str] = set()  # signatures with a confirmed decisive hit
        self._pending: dict[str, deque[tuple[str, int, bytes, list[int]]]] = {}
        self.overflowed: set[str] = set()  # signatures whose queue dropped a candidate
        self.rereadable = False
        self._skipped: set[int] = set()  # waiting patterns of overflowed signatures (rereadable)
        self._skip_cache: tuple[tuple[int, int], frozenset[int]] = ((0, -1), frozenset())
        self.confirmer = ConfirmCache()  # a line repeated up to its numbers is confirmed once
        # a line repeated byte for byte is decoded, confirmed and framed once
        self._lines = LineMemo(self.confirmer.enabled)

    def _scanner_for(self, pattern_ids: Iterable[int]) -> tuple[Scanner, list[list[int]]]:
        """One scanner pattern per distinct regex (signatures share evidence patterns such as
        'NVRM: Xid'); each reports back to every table entry that uses it."""
        unique: dict[str, int] = {}
        users: list[list[int]] = []
        for pid in pattern_ids:
            regex = self.table.refs[pid].regex
            if regex not in unique:
                unique[regex] = len(users)
                users.append([])
            users[unique[regex]].append(pid)
        return make_scanner(list(unique), self._engine_name), users

    @property
    def engine(self) -> str:
        return self.scanner.name

    def reset(self) -> None:
        """Forget everything one run found (hits, waiting candidates, decisions), keeping the
        compiled scanner: a matcher serves one run at a time."""
        self.result = MatchResult()
        self._decided = set()
        self._pending = {}
        self.overflowed = set()
        self._skipped = set()
        self._skip_cache = ((0, -1), frozenset())
        self._rescan = None

    def forget_lines(self) -> None:
        """Drop what the scan remembered per distinct line (decoded text, outcomes, framing) and
        per masked line (the confirm memo): the input is read, and a run's report needs neither
        (a memo is a cache: anything confirmed later is confirmed again, with the same result).
        A few MB that the report's own objects reuse (a following run keeps feeding and does
        not call this)."""
        self._lines = LineMemo(self.confirmer.enabled)
        self.confirmer.clear()

    @property
    def decided(self) -> set[str]:
        """Signatures with a confirmed decisive hit."""
        return self._decided

    def adopt_decisions(self, signature_ids: Iterable[str]) -> None:
        """Decisive hits found elsewhere (another --jobs worker's range)."""
        self._decided.update(signature_ids)

    def rescan_needed(self) -> set[str]:
        """Signatures that fired after their queue of waiting candidates overflowed."""
        return self.overflowed & self._decided

    def begin_rescan(self, signature_ids: Iterable[str]) -> None:
        """Forget the supporting hits of these signatures and build the scanner that finds them
        all again (`feed_rescan` over every input of the run)."""
        owners = set(signature_ids)
        refs = self.table.refs
        pids = [
            pid for pid, eager in enumerate(self._eager) if not eager and refs[pid].owner in owners
        ]
        dropped = set(pids)
        self._skipped.clear()  # the first pass is over
        self._skip_cache = ((0, -1), frozenset())
        self.result.hits = [h for h in self.result.hits if h.pattern_index not in dropped]
        for pid in dropped:
            self.result.counts.pop(pid, None)
        self._decided |= owners
        self._rescan = self._scanner_for(pids)

    def waiting(self) -> dict[str, list[tuple[str, int, bytes, list[int]]]]:
        """Candidates still waiting for their signature's decisive hit, per signature."""
        return {owner: list(queue) for owner, queue in self._pending.items()}

    def confirm_waiting(self, entries: Iterable[tuple[str, int, bytes, list[int]]]) -> None:
        """Candidates that waited in another worker: confirm those whose signature fired; the
        others keep waiting here, as they would in one process (`confirm_undecided`)."""
        refs = self.table.refs
        decided = []
        for entry in entries:
            owner = refs[entry[3][0]].owner
            if owner in self._decided:
                decided.append(entry)
            else:
                queue = self._pending.setdefault(owner, deque(maxlen=PENDING_PER_SIGNATURE))
                queue.append(entry)
        self._confirm_waited(decided)

    def confirm_undecided(self) -> list[Hit]:
        """Confirm the supporting candidates still waiting for a decisive hit that never came, and
        return the new hits. Only a failing report asks for them (the `inferred` basis: supporting
        tells beside a failure), so a healthy log never pays for this."""
        before = len(self.result.hits)
        refs = self.table.refs
        entries = []
        for queue in self._pending.values():
            for input_name, number, raw, pids in queue:
                # only supporting lines can be tells; branch evidence and continuation lines
                # mean something only beside a decisive line
                kept = [p for p in pids if refs[p].kind == "sig" and refs[p].role == "supporting"]
                if kept:
                    entries.append((input_name, number, raw, kept))
        self._pending.clear()
        self._confirm_waited(entries)
        return self.result.hits[before:]

    def feed_rescan(self, segment: Segment) -> None:
        assert self._rescan is not None
        self._feed(segment, *self._rescan)

    def feed(self, segment: Segment) -> None:
        """Scan one segment and confirm its candidate lines."""
        self._feed(segment, self.scanner, self._users)

    def _feed(self, segment: Segment, scanner: Scanner, users: list[list[int]]) -> None:
        skip = self._skip_for(users) if self._skipped else frozenset()
        scanned = scanner.scan(hide_user_text(segment.data), skip)
        if not scanned:
            return
        raw_hits = [(end, pid) for end, upid in scanned for pid in users[upid]]
        if self._skipped:
            skipped = self._skipped
            raw_hits = [hit for hit in raw_hits if hit[1] not in skipped]
            if not raw_hits:
                return
        data = segment.data
        if not isinstance(data, bytes) and len(raw_hits) > DENSE_SEGMENT:
            data = bytes(data)  # one copy, then native find and slices for every line
        by_line = locate(segment, raw_hits, data)
        refs = self.table.refs
        eager_kind = self._eager
        decided = self._decided
        for (start, end, number_offset), pattern_ids, last_end in by_line:
            eager = [pid for pid in pattern_ids if eager_kind[pid] or refs[pid].owner in decided]
            number = segment.first_line + number_offset
            if len(eager) < len(pattern_ids):
                waiting = [pid for pid in pattern_ids if pid not in eager]
                raw = data[start : min(end, start + MAX_PENDING_LINE)]
                for owner in {refs[pid].owner for pid in waiting}:
                    queue = self._pending.setdefault(owner, deque(maxlen=PENDING_PER_SIGNATURE))
                    if len(queue) == PENDING_PER_SIGNATURE:
                        self._overflow(owner)
                    queue.append(
                        (
                            segment.input,
                            number,
                            raw,
                            [pid for pid in waiting if refs[pid].owner == owner],
                        )
                    )
            if not eager:
                continue
            if end - start > LONG_LINE:
                # A huge line (a prompt or token dump): keep its head and a window before the
                # last match end, so decoding and confirming stay cheap.
                lo = max(start + FRAME_HEAD_BYTES, last_end - LONG_LINE // 4)
                raw_bytes = (
                    data[start : start + FRAME_HEAD_BYTES]
                    + b" ... "
                    + data[lo : min(end, last_end + 1024)]
                )
            else:
                raw_bytes = data[start:end]
            self._confirm(segment.input, number, raw_bytes, eager)

    def _skip_for(self, users: list[list[int]]) -> frozenset[int]:
        """Scanner patterns all of whose users are skipped (cached until `_skipped` changes)."""
        key = (id(users), len(self._skipped))
        if self._skip_cache[0] != key:
            skipped = self._skipped
            ids = frozenset(u for u, pids in enumerate(users) if all(p in skipped for p in pids))
            self._skip_cache = (key, ids)
        return self._skip_cache[1]

    def _overflow(self, owner: str) -> None:
        if owner in self.overflowed and (self._skipped or not self.rereadable):
            return  # already marked (a full queue reports every further candidate)
        self.overflowed.add(owner)
        if self.rereadable:
            refs = self.table.refs
            self._skipped.update(
                pid
                for pid, eager in enumerate(self._eager)
                if not eager and refs[pid].owner == owner
            )

    def _release(self, owner: str) -> None:
        """A decisive hit arrived: confirm the supporting candidates that waited for it."""
        self._decided.add(owner)
        self._confirm_waited(self._pending.pop(owner, ()))

    def _confirm_waited(self, entries: Iterable[tuple[str, int, bytes, list[int]]]) -> None:
        for input_name, number, raw, pids in entries:
            self._confirm(input_name, number, raw, sorted(pids))

    def _confirm(self, input_name: str, number: int, raw: bytes, pattern_ids: list[int]) -> None:
        """Confirm one candidate line's patterns (in pattern order) and keep its hits.

        What a line yields depends on its bytes only, so a repeated line reuses its decoded text,
        each pattern's outcome and its framing (`LineMemo`); only the counting is per copy. The
        Line object is built only when one of its hits is kept."""
        memo = self._lines.get(raw)
        refs = self.table.refs
        counts = self.result.counts
        line: Line | None = None
        counted: str | None = None  # the last signature whose decisive line this was counted for
        for pid in pattern_ids:
            try:
                outcome = memo.outcomes[pid]
            except KeyError:  # first time this pattern meets this line
                outcome = self._outcome(pid, memo)
            if outcome is None:
                continue
            found, confirmed = outcome
            counts[pid] += 1
            ref = refs[pid]
            if ref.role == "decisive" and ref.kind == "sig" and ref.owner != counted:
                # a signature's patterns are consecutive in the table: one count per line
                self.result.decisive_lines[ref.owner] += 1
                counted = ref.owner
            if counts[pid] > KEEP_HITS_PER_PATTERN:
                continue
            # Hits share the confirm memo's captures (never mutated: rank copies before adding);
            # one dict per hit was a tenth of the heap on failure-dense logs.
            captures = _NO_CAPTURES if found is None else found
            if ref.kind == "diff":  # one dict per distinct line and branch, shared by its copies
                branched = memo.branched.get(pid)
                if branched is None:
                    branched = memo.branched[pid] = {**captures, "__branch__": ref.role}
                captures = branched
            if line is None:
                line = self._lines.line(memo, input_name, number)
            self.result.hits.append(
                Hit(
                    signature=ref.owner,
                    pattern_index=pid,
                    role=ref.role if ref.kind != "diff" else _diff_role(ref),
                    line=line,
                    captures=captures,
                    confirmed=confirmed,
                )
            )
            if ref.kind == "sig" and ref.role == "decisive" and ref.owner not in self._decided:
                self._release(ref.owner)

    def _outcome(self, pid: int, memo: LineOutcomes) -> Outcome | None:
        """One pattern on one line: None when it does not match (or a `not` confuser of its
        signature does), else its captures and whether the search completed. A timed-out search
        is counted as an unconfirmed hit and not remembered."""
        ref = self.table.refs[pid]
        text = memo.text
        try:
            found = self.confirmer.captures(ref.regex, text)
        except TimeoutError:
            return (None, False)
        if found is None:
            memo.outcomes[pid] = None
            return None
        if ref.kind == "sig":
            rejected = memo.rejected.get(ref.owner)
            if rejected is None:
                rejected = memo.rejected[ref.owner] = self._rejected_by_not(ref.owner, text)
            if rejected:
                memo.outcomes[pid] = None
                return None
        outcome: Outcome = (found, True)
        memo.outcomes[pid] = outcome
        return outcome

    def _rejected_by_not(self, sig_id: str, text: str) -> bool:
        for regex in self.table.not_patterns.get(sig_id, ()):
            try:
                if self.confirmer.captures(regex, text) is not None:
                    return True
            except TimeoutError:
                continue
        return False


# A pattern's outcome on a line: its captures (None: no named groups) and whether the search
# completed; None in LineOutcomes.outcomes when it does not match.
Outcome = tuple[dict[str, str] | None, bool]
# Distinct lines remembered before the memo starts again (bounded memory on logs that never
# repeat: at most this many lines of MAX_CACHED_LINE characters, a few MiB on real lines).
MAX_MEMO_LINES = 1 << 14


@dataclass(slots=True)
class LineOutcomes:
    """What one distinct line yielded so far: its text, each pattern's outcome, each signature's
    `not` verdict, and its framing (the fields `frame_line` fills), once it was framed."""

    raw: str
    text: str
    outcomes: dict[int, Outcome | None] = field(default_factory=dict)
    rejected: dict[str, bool] = field(default_factory=dict)
    branched: dict[int, dict[str, str]] = field(default_factory=dict)  # a branch's captures
    framed: Line | None = None


class LineMemo:
    """Decoded text, pattern outcomes and framing per distinct line (its bytes) of one run."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._memo: dict[bytes, LineOutcomes] = {}

    def get(self, raw: bytes) -> LineOutcomes:
        memo = self._memo.get(raw) if self.enabled else None
        if memo is None:
            decoded = raw.decode("utf-8", "replace")
            memo = LineOutcomes(decoded, confirm_text(decoded))
            if self.enabled and len(raw) <= MAX_CACHED_LINE:
                if len(self._memo) >= MAX_MEMO_LINES:
                    self._memo.clear()
                self._memo[raw] = memo
        return memo

    def line(self, memo: LineOutcomes, input_name: str, number: int) -> Line:
        """A framed Line for this copy of the line: framed once per distinct line, each copy a
        new Line with its own input and number (callers renumber and trim hits' lines in
        place: the memo's template is never handed out)."""
        if memo.framed is None:
            memo.framed = frame_line(Line(input_name, number, memo.raw, memo.text))
        return memo.framed.copy_at(input_name, number)


def locate(
    segment: Segment, raw_hits: list[tuple[int, int]], data: Text
) -> list[tuple[tuple[int, int, int], Sequence[int], int]]:
    """`_locate` through the C helper when it was built (the same result, pattern ids sorted)."""
    native = native_grouping()
    if native is not None:
        buffer = data.view() if isinstance(data, TextWindow) else data
        return list(native(buffer, raw_hits))
    return [(key, sorted(ids), last) for key, ids, last in _locate(segment, raw_hits, data)]


def _diff_role(ref: PatternRef) -> str:
    """A differential hit's role: evidence for its branch, or against it."""
    return "against" if ref.against else "evidence"


def _locate(
    segment: Segment, raw_hits: list[tuple[int, int]], data: Text | None = None
) -> list[tuple[tuple[int, int, int], set[int], int]]:
    """Group (end_offset, pattern) pairs by the line holding the match's last byte.

    Returns ((line_start, line_end, line_index_in_segment), pattern ids, last match end) sorted
    by position.
    Every search is bounded by the nearest LF, and line numbers come from the segment's block
    index, so the cost is linear in the candidates, not in the segment."""
    data = segment.data if data is None else data  # a copy of the segment's bytes, or itself
    raw_hits.sort()
    out: list[tuple[tuple[int, int, int], set[int], int]] = []
    current_ids: set[int] = set()
    current_last = 0
    current_key: tuple[int, int, int] | None = None
    n = len(data)
    for end, pid in raw_hits:
        p = min(max(end - 1, 0), n - 1) if n else 0
        while p > 0 and data[p] in (10, 13):  # a match that ends on a line break belongs before it
            p -= 1
        if current_key is not None and current_key[0] <= p < current_key[1]:
            current_ids.add(pid)
            current_last = max(current_last, p + 1)
            continue
        lf = data.rfind(b"\n", 0, p + 1)
        cr = data.rfind(b"\r", lf + 1, p + 1)
        start = max(lf, cr) + 1
        next_lf = data.find(b"\n", p)
        if next_lf < 0:
            next_lf = n
        next_cr = data.find(b"\r", start, next_lf)
        line_end = next_cr if next_cr >= 0 else next_lf
        if current_key is not None:
            out.append((current_key, current_ids, current_last))
        current_key = (start, line_end, segment.line_index(start))
        current_ids = {pid}
        current_last = p + 1
    if current_key is not None:
        out.append((current_key, current_ids, current_last))
    return out
