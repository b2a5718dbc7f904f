"""Score and order hypotheses: causes before the symptoms they explain, node before engine, the
first fatal error before later ones, corroborated evidence up, out-of-range versions down
(never hidden).

Every score is a sum of named terms (see `explain` in each hypothesis) so that `--explain` can show
why a hypothesis ranks where it does.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from triage.events import Evidence, fold_evidence, process_key
from triage.facts import (
    condition_holds,
    launch_index,
    parse_timestamp,
    parse_version,
    seconds_apart,
)
from triage.kb.records import Signature, VersionRange
from triage.models import (
    DifferentialOut,
    EvidenceOut,
    ExplainedOut,
    FixOut,
    Hit,
    Hypothesis,
)
from triage.regexes import compile_linear
from triage.textutil import mask

SEVERITY_BASE = {"error": 0.55, "warning": 0.30, "info": 0.10}
LAYER_BONUS = {"node": 0.10, "harness": 0.05, "engine": 0.0, "model": 0.0}
SYMPTOM_FACTOR = 0.5
OUT_OF_RANGE_FACTOR = 0.6
MAX_EVIDENCE = 12
# A hypothesis built from supporting lines only (basis "inferred") scores this share of what the
# same evidence would score with a decisive line, and never more than INFERRED_CAP: it ranks below
# every decisive cause.
INFERRED_FACTOR = 0.6
INFERRED_CAP = 0.5
# With no decisive cause, a supporting line counts as a tell only this close to a failure line
# (the signature's own `window` when it has one).
INFERRED_NEAR_LINES = 50
# Across inputs with timestamps, a cause explains (or is read before) a failure in another input
# only when their times are this close.
TIME_WINDOW_SECONDS = 600
# A hang or stall symptom (tag `hang`) repeated this many times with nothing explaining it is a
# failure in its own right.
HANG_REPEATS = 5
# Continuation lines of a multi-line block (AER, NVRM, NCCL WARN) join the evidence when they lie
# this close after a decisive line.
CONTINUATION_LINES = 8

_FACT_FOR_COMPONENT = {
    "vllm": "vllm_version",
    "sglang": "sglang_version",
    "torch": "torch_version",
    "cuda": "cuda_version",
    "driver": "driver_version",
    "nccl": "nccl_version",
}

# GPU marketing names to compute capability (for applies_to.gpu_arch).
_GPU_ARCH = (
    ("GB10", "sm121"),
    ("GB200", "sm100"),
    ("B200", "sm100"),
    ("B100", "sm100"),
    ("H100", "sm90"),
    ("H200", "sm90"),
    ("H800", "sm90"),
    ("H20", "sm90"),
    ("GH200", "sm90"),
    ("L40", "sm89"),
    ("L4", "sm89"),
    ("4090", "sm89"),
    ("RTX 6000 Ada", "sm89"),
    ("A100", "sm80"),
    ("A800", "sm80"),
    ("A30", "sm80"),
    ("A10", "sm86"),
    ("A40", "sm86"),
    ("3090", "sm86"),
    ("A6000", "sm86"),
    ("T4", "sm75"),
    ("V100", "sm70"),
)


def gpu_arch(gpu: str) -> str | None:
    for name, arch in _GPU_ARCH:
        if name in gpu:
            return arch
    return None


@dataclass
class Scope:
    """What the engine facade knows about the inputs beyond the hits: where launches start, and
    which lines show a failure (for the inferred basis)."""

    launches: dict[str, list[int]] = field(default_factory=dict)  # input -> later launch starts
    failure_lines: set[tuple[str, int]] = field(default_factory=set)
    infer: bool = False  # supporting-only candidates may become (inferred) hypotheses
    # Traceback frame lines ('File "...", line N, in f'): a frame and the source line printed
    # under it say where a failure passed, not what it was, so neither is a tell.
    frame_lines: set[tuple[str, int]] = field(default_factory=set)

    def in_traceback_body(self, hit: Hit) -> bool:
        place = (hit.line.input, hit.line.number)
        return place in self.frame_lines or (place[0], place[1] - 1) in self.frame_lines

    def launch(self, hit: Hit) -> tuple[str, int]:
        return self.launch_of(hit.line.input, hit.line.number)

    def launch_of(self, input_name: str, number: int) -> tuple[str, int]:
        starts = self.launches.get(input_name)
        return (input_name, launch_index(starts, number) if starts else 0)


@dataclass
class Candidate:
    """A signature with its hits, being scored."""

    sig: Signature
    decisive: list[Hit] = field(default_factory=list)
    supporting: list[Hit] = field(default_factory=list)
    diff_evidence: dict[str, list[Hit]] = field(default_factory=lambda: defaultdict(list))
    against: dict[str, list[Hit]] = field(default_factory=lambda: defaultdict(list))
    continuation: list[Hit] = field(default_factory=list)
    score: float = 0.0
    terms: list[str] = field(default_factory=list)
    explained_by: str | None = None
    explains: list[Candidate] = field(default_factory=list)
    basis: str = "decisive"
    severity: str = ""  # the signature's, unless the evidence escalated it
    layer: str = ""  # the signature's, unless the chosen differential branch names another
    layer_why: str | None = None
    separate: bool = False  # far in time from the failures of the other inputs: listed after them

    def __post_init__(self) -> None:
        self.severity = self.severity or self.sig.severity
        self.layer = self.layer or self.sig.layer

    @property
    def lines(self) -> list[Hit]:
        """The hits that place the candidate: decisive ones, or supporting ones when inferred."""
        return self.decisive or self.supporting

    @property
    def first(self) -> tuple[str, int]:
        h = min(self.lines, key=lambda x: (x.line.input, x.line.number))
        return (h.line.input, h.line.number)

    def add(self, value: float, why: str) -> None:
        self.score += value
        self.terms.append(f"{value:+.2f} {why}")


def version_in_range(version: str, rng: VersionRange) -> bool | None:
    """Is this version inside the range (None: not a version)? `kb applies` and `kb lint` test
    the catalog's releases with it, so they agree with the score."""
    v = parse_version(version)
    if v is None:
        return None
    if rng.introduced and (lo := parse_version(rng.introduced)) and v < lo:
        return False
    if rng.fixed and (hi := parse_version(rng.fixed)) and v >= hi:
        return False
    return not (rng.last_affected and (last := parse_version(rng.last_affected)) and v > last)


def applicability(sig: Signature, facts: dict[str, Any]) -> str | None:
    """Why the signature does not apply to the facts, or None when it may apply."""
    for component, rng in sig.applies_to.versions.items():
        fact = _FACT_FOR_COMPONENT.get(component)
        value = facts.get(fact) if fact else None
        if isinstance(value, str) and version_in_range(value, rng) is False:
            bounds = ", ".join(f"{k} {v}" for k, v in asdict(rng).items() if v is not None)
            return f"{component} {value} is outside the affected range ({bounds})"
    gpu = facts.get("gpu")
    if sig.applies_to.gpu_arch and isinstance(gpu, str):
        arch = gpu_arch(gpu)
        if arch and arch not in sig.applies_to.gpu_arch:
            return f"GPU {gpu} ({arch}) is not among {', '.join(sig.applies_to.gpu_arch)}"
    return None


def build_candidates(
    signatures: Mapping[str, Signature], hits: Sequence[Hit], scope: Scope | None = None
) -> list[Candidate]:
    """Candidates in the order of their first decisive hit. Supporting, continuation and branch
    evidence count only inside the launch of a decisive line (`Scope.launches`); with
    `scope.infer`, signatures with supporting lines and no decisive one come after, as inferred
    candidates (`admit_inferred` decides which become hypotheses)."""
    scope = scope or Scope()
    cands: dict[str, Candidate] = {}
    first_decisive: dict[str, int] = {}  # candidates in the order of their first decisive hit
    first_any: dict[str, int] = {}
    for n, hit in enumerate(hits):
        sig = signatures.get(hit.signature)
        if sig is None:
            continue
        cand = cands.setdefault(sig.id, Candidate(sig))
        first_any.setdefault(sig.id, n)
        if hit.role == "decisive":
            first_decisive.setdefault(sig.id, n)
            cand.decisive.append(hit)
        elif hit.role == "supporting":
            cand.supporting.append(hit)
        elif hit.role == "continuation":
            cand.continuation.append(hit)
        elif hit.role == "against":
            cand.against[_branch_of(sig, hit)].append(hit)
        else:
            cand.diff_evidence[_branch_of(sig, hit)].append(hit)
    out = []
    inferred = []
    for cand in cands.values():
        if not cand.decisive:
            if scope.infer and cand.supporting and cand.sig.kind == "cause":
                cand.basis = "inferred"
                cand.diff_evidence.clear()  # a branch is chosen on a decisive line's launch only
                cand.against.clear()
                cand.continuation = []
                inferred.append(cand)
            continue  # supporting evidence never fires alone
        decisive_at = {(h.line.input, h.line.number) for h in cand.decisive}
        # a supporting pattern on a decisive line adds its captures to that line's hit
        # (the Xid a cleanup names, the size an OOM tried to allocate)
        on_line = {(h.line.input, h.line.number): h for h in cand.decisive}
        for h in cand.supporting:
            owner = on_line.get((h.line.input, h.line.number))
            if owner is not None:
                added = {k: v for k, v in h.captures.items() if k not in owner.captures}
                if added:  # a new dict: hits share their captures with the confirm memo
                    owner.captures = {**owner.captures, **added}
        launches = {scope.launch(h) for h in cand.decisive}
        inputs = {h.line.input for h in cand.decisive}

        def same_launch(
            h: Hit, launches: set[tuple[str, int]] = launches, inputs: set[str] = inputs
        ) -> bool:
            # another input is not scoped (a dmesg beside a server log); the same input is
            return h.line.input not in inputs or scope.launch(h) in launches

        cand.supporting = [
            h
            for h in cand.supporting
            if (h.line.input, h.line.number) not in decisive_at and same_launch(h)
        ]
        for branch in list(cand.diff_evidence):
            cand.diff_evidence[branch] = [h for h in cand.diff_evidence[branch] if same_launch(h)]
        for branch in list(cand.against):
            cand.against[branch] = [h for h in cand.against[branch] if same_launch(h)]
        supporting_at = {(h.line.input, h.line.number) for h in cand.supporting}
        cand.continuation = [
            h
            for h in _continuation(cand, decisive_at)
            if (h.line.input, h.line.number) not in supporting_at  # listed once, as supporting
        ]
        if cand.sig.window:
            cand.supporting = _within_window(cand.supporting, cand.decisive, cand.sig.window)
        out.append(cand)
    out.sort(key=lambda c: first_decisive[c.sig.id])
    inferred.sort(key=lambda c: first_any[c.sig.id])
    return out + inferred


def _continuation(cand: Candidate, decisive_at: set[tuple[str, int]]) -> list[Hit]:
    """Continuation lines of the decisive lines' blocks: each lies within CONTINUATION_LINES of a
    decisive line or of another line of the block, before or after it (the NVRM notice spreads
    one message over three lines; the AER status lines follow their header).

    The lines of one input, decisive and continuation, sorted by number fall into runs whose
    neighbours are at most CONTINUATION_LINES apart; a continuation line is taken when its run
    holds a decisive line (linear, where growing the reach line by line was quadratic on a log
    whose every rank prints the same block)."""
    pending = sorted(
        (h for h in cand.continuation if (h.line.input, h.line.number) not in decisive_at),
        key=lambda h: (h.line.input, h.line.number),
    )
    anchors: dict[str, list[int]] = defaultdict(list)
    for input_name, number in decisive_at:
        anchors[input_name].append(number)
    by_input: dict[str, list[Hit]] = defaultdict(list)
    for hit in pending:
        by_input[hit.line.input].append(hit)
    taken: list[Hit] = []
    for input_name, hits in by_input.items():
        # (number, 0 for a decisive line | 1 for a continuation line, position in `hits`)
        points = sorted(
            [(n, 0, -1) for n in anchors.get(input_name, ())]
            + [(h.line.number, 1, i) for i, h in enumerate(hits)]
        )
        run: list[int] = []
        anchored = False
        previous: int | None = None
        chosen: set[int] = set()
        for number, kind, position in points:
            if previous is not None and number - previous > CONTINUATION_LINES:
                if anchored:
                    chosen.update(run)
                run, anchored = [], False
            previous = number
            if kind == 0:
                anchored = True
            else:
                run.append(position)
        if anchored:
            chosen.update(run)
        taken.extend(h for i, h in enumerate(hits) if i in chosen)
    return sorted(taken, key=lambda h: (h.line.input, h.line.number))


def _within_window(hits: list[Hit], decisive: list[Hit], window: int) -> list[Hit]:
    """The hits within `window` lines of a decisive line of their own input."""
    numbers: dict[str, list[int]] = defaultdict(list)
    for h in decisive:
        numbers[h.line.input].append(h.line.number)
    for values in numbers.values():
        values.sort()
    kept = []
    for h in hits:
        near = numbers.get(h.line.input)
        if not near:
            continue
        at = bisect_left(near, h.line.number - window)
        if at < len(near) and near[at] <= h.line.number + window:
            kept.append(h)
    return kept


def _branch_of(sig: Signature, hit: Hit) -> str:
    """The differential branch a whole-log evidence hit belongs to (recorded by the matcher)."""
    return hit.captures.get("__branch__", sig.differential[0].branch if sig.differential else "")


def score(cand: Candidate, facts: dict[str, Any]) -> None:
    sig = cand.sig
    cand.score = 0.0
    cand.terms = []
    severity = cand.severity
    cand.add(SEVERITY_BASE[severity], f"severity {severity}")
    if sig.kind == "symptom":
        cand.add(-SEVERITY_BASE[severity] * (1 - SYMPTOM_FACTOR), "a symptom, not a cause")
    if LAYER_BONUS[cand.layer]:
        cand.add(LAYER_BONUS[cand.layer], f"{cand.layer} layer is read first")
    if sig.priority != 50:
        cand.add((sig.priority - 50) / 250, f"priority {sig.priority}")
    # corroboration: different decisive messages (not the same line matched twice, nor one message
    # repeated by every rank)
    messages = {mask(h.line.message or h.line.text) for h in cand.decisive}
    if len(messages) > 1:
        cand.add(min(0.1, 0.05 * (len(messages) - 1)), f"{len(messages)} distinct decisive lines")
    if cand.supporting:
        cand.add(0.08, f"{len(cand.supporting)} supporting line(s)")
    if not all(h.confirmed for h in cand.decisive):
        cand.add(-0.05, "some matches unconfirmed (regex timed out on a huge line)")
    reason = applicability(sig, facts)
    if reason:
        cut = cand.score * (1 - OUT_OF_RANGE_FACTOR)
        cand.add(-cut, f"lowered: {reason}")
    if cand.basis == "inferred":
        kept = min(cand.score * INFERRED_FACTOR, INFERRED_CAP)
        cand.add(kept - cand.score, "inferred: supporting lines only, no decisive line")


# A branch's reasons cite at most this many lines, then count the rest: a day of journal repeats
# a branch's line on every launch (83 KB of `why` on one hypothesis of the real-log benchmark).
BRANCH_LINES_CITED = 12


def _cited(hits: list[Hit]) -> list[str]:
    cited = [
        f"line {hit.line.number}: {hit.line.message[:120] or hit.line.text[:120]}"
        for hit in hits[:BRANCH_LINES_CITED]
    ]
    if len(hits) > BRANCH_LINES_CITED:
        cited.append(f"and {len(hits) - BRANCH_LINES_CITED:,} more lines")
    return cited


def differential(cand: Candidate, facts: dict[str, Any]) -> list[DifferentialOut]:
    """Each branch: favoured by its evidence lines or its facts, never when a line of the log
    contradicts it (`against`)."""
    out = []
    for d in cand.sig.differential:
        why = _cited(cand.diff_evidence.get(d.branch, []))
        ruled_out = _cited(cand.against.get(d.branch, []))
        verdicts = []
        for key, cond in d.facts.items():
            held = condition_holds(facts, key, cond)
            verdicts.append(held)
            if held:
                why.append(f"fact {key} {cond}")
        favoured = not ruled_out and (
            bool(cand.diff_evidence.get(d.branch))
            or (any(v is True for v in verdicts) and not any(v is False for v in verdicts))
        )
        out.append(
            DifferentialOut(
                branch=d.branch,
                check=d.check,
                favoured=favoured,
                why=why,
                ask=d.ask,
                probe=d.probe,
                layer=d.layer,
                ruled_out=ruled_out,
            )
        )
    return out


def branch_layer(cand: Candidate, facts: dict[str, Any]) -> None:
    """The layer of the favoured branch, when it names one and no other favoured branch names a
    different one (the branch decides where the fault lives; `--explain` says which)."""
    diffs = differential(cand, facts)
    layers = {d.layer for d in diffs if d.favoured and d.layer}
    if len(layers) == 1:
        layer = layers.pop()
        branch = next(d for d in diffs if d.favoured and d.layer == layer)
        if layer != cand.sig.layer:
            cand.layer = layer
            cand.layer_why = (
                f"layer {layer} from branch {branch.branch} ({'; '.join(branch.why) or 'facts'})"
            )


def _stamps(cand: Candidate) -> dict[str, list[tuple[int | None, int, int, int, int, int]]]:
    out: dict[str, list[tuple[int | None, int, int, int, int, int]]] = defaultdict(list)
    for h in cand.lines:
        ts = parse_timestamp(h.line.timestamp)
        if ts is not None:
            out[h.line.input].append(ts)
    return out


def far_apart(a: Candidate, b: Candidate) -> bool:
    """Two candidates on different inputs whose timestamped lines are all more than
    TIME_WINDOW_SECONDS apart (unknown times never separate them)."""
    inputs_a = {h.line.input for h in a.lines}
    inputs_b = {h.line.input for h in b.lines}
    if inputs_a & inputs_b:
        return False
    stamps_a = [t for ts in _stamps(a).values() for t in ts]
    stamps_b = [t for ts in _stamps(b).values() for t in ts]
    if not stamps_a or not stamps_b:
        return False
    for x in stamps_a:
        for y in stamps_b:
            gap = seconds_apart(x, y)
            if gap is None or gap <= TIME_WINDOW_SECONDS:
                return False
    return True


# Evidence that makes a warning a failure: (signature, capture, values) on a decisive line.
_ESCALATING_CAPTURES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("machine-check-exception", "edac_kind", ("UE",)),
    ("machine-check-exception", "apei_severity", ("fatal",)),
)
# A warning that becomes a failure when the GPU it concerns is lost in the same log.
_ESCALATES_WITH_GPU_LOST = ("pcie-aer-corrected-errors",)
_GPU_LOST = ("gpu-fallen-off-the-bus",)
_GPU_LOST_TEXT = ("GPU is lost", "fallen off the bus")


def escalate(
    cands: list[Candidate], signatures: Mapping[str, Signature], by_id: dict[str, Candidate]
) -> list[Candidate]:
    """Severity from the evidence: a fatal EDAC / APEI capture, an AER warning beside a lost GPU,
    and an Xid whose own text names the Xid that caused it (routed to that Xid's signature, which
    then explains it). Returns candidates created by routing."""
    created: list[Candidate] = []
    lost = any(i in by_id and by_id[i].decisive for i in _GPU_LOST) or any(
        any(t in (h.line.message or h.line.text) for t in _GPU_LOST_TEXT)
        for c in cands
        for h in c.decisive
    )
    for cand in cands:
        if cand.basis != "decisive" or cand.severity == "error":
            continue
        for sig_id, key, values in _ESCALATING_CAPTURES:
            if cand.sig.id != sig_id:
                continue
            hit = next((h for h in cand.decisive if h.captures.get(key) in values), None)
            if hit is not None:
                cand.severity = "error"
                cand.terms.append(f"escalated: {key}={hit.captures[key]} on line {hit.line.number}")
                break
        if cand.sig.id in _ESCALATES_WITH_GPU_LOST and lost:
            cand.severity = "error"
            cand.terms.append("escalated: the GPU is lost in the same log")
    for cand in list(cands):
        for hit in cand.decisive + cand.supporting:
            previous = hit.captures.get("previous_xid")
            if not previous or previous == hit.captures.get("xid"):
                continue
            target = _xid_signature(previous, signatures, exclude=cand.sig.id)
            if target is None:
                continue
            routed = by_id.get(target.id)
            if routed is None:
                routed = Candidate(target)
                by_id[target.id] = routed
                created.append(routed)
            routed_hit = Hit(
                signature=target.id,
                pattern_index=hit.pattern_index,
                role="decisive",
                line=hit.line,
                captures={"xid": previous, **{k: v for k, v in hit.captures.items() if k == "pci"}},
            )
            if all(h.line is not hit.line for h in routed.decisive):
                routed.decisive.append(routed_hit)
                routed.terms.append(f"routed: line {hit.line.number} names previous Xid {previous}")
            if cand.explained_by is None and cand is not routed:
                cand.explained_by = routed.sig.id
                routed.explains.append(cand)
    return created


def _xid_signature(xid: str, signatures: Mapping[str, Signature], exclude: str) -> Signature | None:
    """The signature whose decisive patterns capture this Xid number in their `xid` group."""
    for sig in signatures.values():
        if sig.id == exclude or sig.status == "withdrawn":
            continue
        for pattern in sig.decisive:
            group = _named_group(pattern.regex, "xid")
            if group is None:
                continue
            try:
                if compile_linear(f"^(?:{group})$").search(xid):
                    return sig
            except (TimeoutError, ValueError):
                continue
    return None


def _named_group(regex: str, name: str) -> str | None:
    """The text of a named group of a regex, e.g. '14[4-9]|150' for (?P<xid>14[4-9]|150)."""
    start = regex.find(f"(?P<{name}>")
    if start < 0:
        return None
    i = start + len(name) + 5
    depth, body = 1, i
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return regex[body:i]
        i += 1
    return None


def _repeats(cand: Candidate) -> int:
    return sum(e.count for e in fold_evidence(cand.decisive))


_CONTEXT_LEVELS = ("INFO", "DEBUG")
_TELLS: dict[str, tuple[str, ...]] = {}
# A line that states a configuration rather than an outcome: a call with keyword arguments
# (`llm = LLM("m", tensor_parallel_size=2)`), an argument dump (`non-default args: {...}`,
# `Namespace(...)`, `ServerArgs(...)`), a command line with two or more flags, a shell command
# whose environment is set before it (`CUDA_VISIBLE_DEVICES=0 trl vllm-serve ...`, after an
# optional `$ ` prompt) or an `export VAR=value` line. A supporting
# pattern that reads a value off it (a TP size, a dtype) says how the engine was launched, not
# that this cause happened.
_CONFIG_ECHO = (
    r"\b[A-Za-z_][\w.]*\((?:[^()]*,\s*)?[A-Za-z_]\w*\s?=\s?[^=\s,()][^,()]*[,)]"
    r"|non-default args:|\bNamespace\(|\b(?:Server|Engine|AsyncEngine)Args\("
    r"|(?:^|\s)--[A-Za-z][\w-]*(?:[ =]\S+)?\s+--[A-Za-z][\w-]*"
    r"|^\s*(?:[$#>] )?(?:[A-Z][A-Z0-9_]*=\S* +)+[\w./-]+(?: |$)"
    r"|^\s*(?:[$#>] )?export [A-Z][A-Z0-9_]*="
)


def _tell_patterns(sig: Signature) -> tuple[str, ...]:
    """The supporting patterns of a signature that can be tells: those that match none of its own
    near misses (`examples.no_match`). A supporting pattern that matches a near miss is context
    its author wrote for a decisive line, never a reason to name the cause alone."""
    cached = _TELLS.get(sig.id)
    if cached is None:
        tells = []
        for pattern in sig.supporting:
            try:
                compiled = compile_linear(pattern.regex)
                if not any(compiled.search(line) for line in sig.examples.no_match):
                    tells.append(pattern.regex)
            except (TimeoutError, ValueError):
                continue
        cached = _TELLS[sig.id] = tuple(tells)
    return cached


def _is_tell(sig: Signature, hit: Hit, on_failure: bool = False) -> bool:
    """A supporting line that says something about the cause. On the failure line itself
    (`on_failure`), a match that stops where the line's own detail begins (`error loading model`
    in "error loading model: illegal split file") read only the generic prefix: the detail, which
    no decisive pattern matched, is the failure, so the line tells nothing about this cause."""
    if hit.line.level in _CONTEXT_LEVELS:
        return False  # an INFO or DEBUG line is context (a version, an interface, a size)
    text = hit.line.text or hit.line.raw
    if compile_linear(_CONFIG_ECHO).search(text):
        return False  # the launch configuration, stated
    for regex in _tell_patterns(sig):
        try:
            found = compile_linear(regex).search(text)
        except (TimeoutError, ValueError):
            continue
        if found and not (on_failure and compile_linear(_DETAIL_AFTER).search(text[found.end :])):
            return True
    return False


# what follows a generic prefix on a failure line: ": " and the failure's own words
# (after the object it names, quoted: "failed to load model 'x.gguf': load_hparams: ...")
_DETAIL_AFTER = r"^(?: +'[^']{1,300}'| +\"[^\"]{1,300}\")? *: +[A-Za-z(\[<'\"]"


def admit_inferred(cands: list[Candidate], scope: Scope) -> list[Candidate]:
    """Which supporting-only candidates become hypotheses (basis inferred): a cause that lists a
    fired error symptom nothing decisive explains, with a supporting line in that symptom's launch;
    or, when no decisive error cause fired at all, a cause with a supporting line near a failure
    line. Only tells count: lines above INFO level, outside a traceback's frames and their source
    lines, matched by a supporting pattern that matches none of the signature's own near misses.
    Everything else is dropped."""
    decided = [c for c in cands if c.basis == "decisive"]
    symptoms = [
        c
        for c in decided
        if c.sig.kind == "symptom" and c.severity == "error" and not c.explained_by
    ]
    any_cause = any(c.sig.kind != "symptom" and c.severity == "error" for c in decided)
    if any_cause:
        return []  # a decisive cause is there: supporting lines only support
    admitted = []
    for cand in cands:
        if cand.basis != "inferred" or cand.severity == "info":
            continue  # a note explains no failure: it is never inferred
        near = cand.sig.window or INFERRED_NEAR_LINES
        claimed = [s for s in symptoms if s.sig.id in cand.sig.explains]
        keep: list[Hit] = []
        if claimed:
            places = {scope.launch(h) for s in claimed for h in s.decisive}
            keep = [h for h in cand.supporting if scope.launch(h) in places]
            if cand.sig.window:
                keep = _within_window(keep, [h for c in claimed for h in c.decisive], near)
        elif not any_cause:
            keep = [
                h
                for h in cand.supporting
                if any(
                    i == h.line.input
                    and abs(n - h.line.number) <= near
                    and scope.launch(h) == scope.launch_of(i, n)
                    for i, n in scope.failure_lines
                )
            ]
        keep = [
            h
            for h in keep
            if _is_tell(cand.sig, h, (h.line.input, h.line.number) in scope.failure_lines)
            and not scope.in_traceback_body(h)
        ]
        if keep:
            cand.supporting = keep
            admitted.append(cand)
    return admitted


def rank(
    signatures: Mapping[str, Signature],
    hits: Sequence[Hit],
    facts: dict[str, Any],
    scope: Scope | None = None,
) -> list[Hypothesis]:
    """Order the hypotheses; symptoms explained by a cause move under it. `hits` come in input
    order (`Engine.report` sorts them), which every tie below relies on."""
    scope = scope or Scope()
    cands = build_candidates(signatures, hits, scope)
    decided = [c for c in cands if c.basis == "decisive"]
    cands = decided + admit_inferred(cands, scope)
    by_id = {c.sig.id: c for c in cands}
    cands += escalate(cands, signatures, by_id)
    # explicit explanations: a cause that lists a fired symptom in `explains`, unless they sit in
    # different inputs whose times are far apart
    for cand in cands:
        for other_id in cand.sig.explains:
            other = by_id.get(other_id)
            if other is not None and other.explained_by is None and other is not cand:
                if far_apart(cand, other):
                    cand.terms.append(
                        f"does not explain {other_id}: times more than "
                        f"{TIME_WINDOW_SECONDS // 60} min apart"
                    )
                    continue
                other.explained_by = cand.sig.id
                cand.explains.append(other)
    for cand in cands:
        # a hang symptom that keeps repeating with nothing to explain it is the failure
        if (
            "hang" in cand.sig.tags
            and cand.severity != "error"
            and cand.explained_by is None
            and _repeats(cand) >= HANG_REPEATS
        ):
            cand.severity = "error"
            cand.terms.append(f"escalated: repeated {_repeats(cand)} times, nothing explains it")
        branch_layer(cand, facts)
    for cand in cands:
        notes = [t for t in cand.terms if t[:1] not in "+-"]
        score(cand, facts)
        cand.terms = notes + cand.terms
        if cand.layer_why:
            cand.terms.append(cand.layer_why)
    causes = [
        c
        for c in cands
        if c.sig.kind != "symptom" and c.severity == "error" and c.basis == "decisive"
    ]
    # a node event in another input, far in time from every other failure, is a finding of its
    # own: it neither explains those failures nor is read before them (D23 in the audit)
    for cause in causes:
        others = [c for c in causes if c.layer != "node"]
        if cause.layer == "node" and others and all(far_apart(cause, o) for o in others):
            cause.separate = True
            if LAYER_BONUS["node"]:
                cause.add(-LAYER_BONUS["node"], "node layer not read first: far in time")
    joined = [c for c in causes if not c.separate]
    if joined:
        earliest = min(c.first for c in joined)
        for cause in joined:
            if cause.first == earliest:  # ties (several signatures on one line) share the bonus
                cause.add(0.04, "the first fatal error in the input")
    # implicit: a symptom nobody claimed goes under the best-ranked error cause of the same input
    # (vLLM logs "EngineCore failed to start" just before the traceback that holds the cause)
    ordered = sorted(cands, key=lambda c: (-c.score, c.first))
    for cand in ordered:
        if cand.sig.kind != "symptom" or cand.explained_by is not None:
            continue
        for cause in ordered:
            if cause.sig.kind == "symptom" or cause.severity != "error":
                continue
            if cause.explained_by is not None or cause.sig.id in cand.sig.explains:
                continue  # never adopt into an explained cause, nor into its own effect
            if far_apart(cause, cand):
                continue
            cand.explained_by = cause.sig.id
            cause.explains.append(cand)
            break
    for cand in cands:
        if cand.explains:
            cand.add(
                min(0.12, 0.04 * len(cand.explains)),
                "explains " + ", ".join(c.sig.id for c in cand.explains),
            )
    # inferred hypotheses rank below every decisive cause of warning or error severity (they may
    # still lead a symptom, or an info note)
    floor = min(
        (
            c.score
            for c in cands
            if c.basis == "decisive" and c.sig.kind != "symptom" and c.severity != "info"
        ),
        default=INFERRED_CAP + 0.01,
    )
    cap = min(INFERRED_CAP, floor - 0.01)
    for cand in cands:
        if cand.basis == "inferred" and cand.score > cap:
            cand.add(cap - cand.score, "inferred: ranked below decisive causes")
    top = [c for c in ordered if c.explained_by is None]
    top.sort(key=lambda c: (c.separate, -round(c.score, 6), c.first))
    # Several signatures of one family on the very same lines (the generic CUDA OOM and its
    # situation-specific variants): a member leads only with evidence of its own (a supporting
    # line in the decisive line's process stream); the others become the leader's alternatives.
    top = _family_order(top)
    alternatives: dict[str, list[str]] = defaultdict(list)
    kept: list[Candidate] = []
    line_sets = {id(c): {(h.line.input, h.line.number) for h in c.lines} for c in top}
    for cand in top:
        lines = line_sets[id(cand)]
        own = _own_evidence(cand)
        leader = next(
            (k for k in kept if k.layer == cand.layer and not own and lines <= line_sets[id(k)]),
            None,
        )
        if leader is not None:
            alternatives[leader.sig.id].append(cand.sig.id)
            continue
        kept.append(cand)
    out = []
    for rank_no, cand in enumerate(kept, start=1):
        hyp = _hypothesis(rank_no, cand, facts)
        hyp.alternatives = alternatives.get(cand.sig.id, [])
        out.append(hyp)
    return out


def _own_evidence(cand: Candidate) -> bool:
    """Supporting lines in the process stream of a decisive line: what tells a variant (the OOM
    of one phase) from its generic parent, which fires on the same decisive line."""
    streams = {process_key(h.line) for h in cand.decisive}
    return any(process_key(h.line) in streams for h in cand.supporting)


def _family_order(top: list[Candidate]) -> list[Candidate]:
    """Within each family on identical decisive lines, members with evidence of their own come
    first (then by score); the families keep their places in the order."""
    groups: dict[tuple[str, frozenset[tuple[str, int]]], list[Candidate]] = defaultdict(list)
    keys = []
    for cand in top:
        key = (cand.layer, frozenset((h.line.input, h.line.number) for h in cand.lines))
        keys.append(key)
        groups[key].append(cand)
    for members in groups.values():
        members.sort(key=lambda c: not _own_evidence(c))  # stable: score order otherwise
    cursor: dict[tuple[str, frozenset[tuple[str, int]]], int] = defaultdict(int)
    out = []
    for key in keys:
        out.append(groups[key][cursor[key]])
        cursor[key] += 1
    return out


def _evidence(cand: Candidate) -> list[EvidenceOut]:
    """Decisive lines, the continuation lines of their blocks, supporting lines, the branches'
    evidence, then the lines of the symptoms this cause explains; each line once, with all the
    roles it plays."""
    evidence: list[Evidence] = fold_evidence(cand.decisive) + fold_evidence(cand.continuation)
    evidence += fold_evidence(cand.supporting)
    for branch, hits in cand.diff_evidence.items():  # branches in order of their first line
        if not cand.against.get(branch):  # a ruled-out branch's lines are not evidence
            evidence += fold_evidence(hits)
    shown = {(e.line.input, e.line.number) for e in evidence}
    for sym in cand.explains:
        for e in fold_evidence(sym.decisive):
            if (e.line.input, e.line.number) not in shown:
                e.role = "explained"
                evidence.append(e)
    out: list[EvidenceOut] = []
    by_line: dict[tuple[str, int], EvidenceOut] = {}
    for e in evidence:
        key = (e.line.input, e.line.number)
        seen = by_line.get(key)
        if seen is not None:  # one line, several roles: listed once, with all of them
            if e.role not in seen.roles:
                seen.roles.append(e.role)
            continue
        if len(out) == MAX_EVIDENCE:
            continue
        item = EvidenceOut(
            input=e.line.input,
            line=e.line.number,
            text=(e.line.text or e.line.raw)[:2000],
            role=e.role,
            count=e.count,
            roles=[e.role],
        )
        by_line[key] = item
        out.append(item)
    return out


def _hypothesis(rank_no: int, cand: Candidate, facts: dict[str, Any]) -> Hypothesis:
    sig = cand.sig
    diffs = differential(cand, facts) if cand.basis == "decisive" else []
    favoured = {d.branch for d in diffs if d.favoured}
    fixes = [
        FixOut(
            do=f.do,
            confidence=f.confidence,
            when=f.when,
            caveat=f.caveat,
            likely=f.branch in favoured if f.branch else False,
        )
        for f in sig.fixes
    ]
    if favoured:
        order = {True: 0, False: 1}
        fixes = sorted(fixes, key=lambda f: order[f.likely])
    captures: dict[str, str] = {}
    for h in cand.decisive + cand.supporting:
        for k, v in h.captures.items():
            if k.startswith("__"):
                continue
            captures.setdefault(k, v)
    explains = []
    for sym in cand.explains:
        lines = sorted({h.line.number for h in sym.lines})
        explains.append(
            ExplainedOut(
                signature=sym.sig.id,
                title=sym.sig.title,
                input=sym.lines[0].line.input,
                lines=lines[:50],
            )
        )
    return Hypothesis(
        rank=rank_no,
        signature=sig.id,
        title=sig.title,
        layer=cand.layer,
        severity=cand.severity,
        status=sig.status,
        score=round(max(0.0, min(1.0, cand.score)), 3),
        evidence=_evidence(cand),
        explains=explains,
        fixes=fixes,
        verify=list(sig.verify),
        references=list(sig.references),
        summary=sig.summary,
        kind=sig.kind,
        captures=captures,
        differential=diffs,
        applicability=applicability(sig, facts),
        explain=list(cand.terms),
        basis=cand.basis,
    )
