"""Score and order hypotheses: causes before the symptoms they explain, node before engine, the
first fatal error before later ones, corroborated evidence up, out-of-range versions down
(never hidden).

Every score is a sum of named terms (see `explain` in each hypothesis) so that `--explain` can show
why a hypothesis ranks where it does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from triage.events import Evidence, fold_evidence
from triage.facts import condition_holds, parse_version
from triage.kb.records import Signature, VersionRange
from triage.models import (
    DifferentialOut,
    EvidenceOut,
    ExplainedOut,
    FixOut,
    Hit,
    Hypothesis,
)
from triage.textutil import mask

SEVERITY_BASE = {"error": 0.55, "warning": 0.30, "info": 0.10}
LAYER_BONUS = {"node": 0.10, "harness": 0.05, "engine": 0.0, "model": 0.0}
SYMPTOM_FACTOR = 0.5
OUT_OF_RANGE_FACTOR = 0.6
MAX_EVIDENCE = 12

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
class Candidate:
    sig: Signature
    decisive: list[Hit] = field(default_factory=list)
    supporting: list[Hit] = field(default_factory=list)
    diff_evidence: dict[str, list[Hit]] = field(default_factory=lambda: defaultdict(list))
    score: float = 0.0
    terms: list[str] = field(default_factory=list)
    explained_by: str | None = None
    explains: list[Candidate] = field(default_factory=list)

    @property
    def first(self) -> tuple[str, int]:
        h = min(self.decisive, key=lambda x: (x.line.input, x.line.number))
        return (h.line.input, h.line.number)

    def add(self, value: float, why: str) -> None:
        self.score += value
        self.terms.append(f"{value:+.2f} {why}")


def _in_range(version: str, rng: VersionRange) -> bool | None:
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
        if isinstance(value, str) and _in_range(value, rng) is False:
            bounds = ", ".join(f"{k} {v}" for k, v in asdict(rng).items() if v is not None)
            return f"{component} {value} is outside the affected range ({bounds})"
    gpu = facts.get("gpu")
    if sig.applies_to.gpu_arch and isinstance(gpu, str):
        arch = gpu_arch(gpu)
        if arch and arch not in sig.applies_to.gpu_arch:
            return f"GPU {gpu} ({arch}) is not among {', '.join(sig.applies_to.gpu_arch)}"
    return None


def build_candidates(signatures: dict[str, Signature], hits: Sequence[Hit]) -> list[Candidate]:
    cands: dict[str, Candidate] = {}
    first_decisive: dict[str, int] = {}  # candidates in the order of their first decisive hit
    for n, hit in enumerate(hits):
        sig = signatures.get(hit.signature)
        if sig is None:
            continue
        cand = cands.setdefault(sig.id, Candidate(sig))
        if hit.role == "decisive":
            first_decisive.setdefault(sig.id, n)
            cand.decisive.append(hit)
        elif hit.role == "supporting":
            cand.supporting.append(hit)
        else:
            cand.diff_evidence[_branch_of(sig, hit)].append(hit)
    out = []
    for cand in cands.values():
        if not cand.decisive:
            continue  # supporting evidence never fires alone
        decisive_at = {(h.line.input, h.line.number) for h in cand.decisive}
        cand.supporting = [
            h for h in cand.supporting if (h.line.input, h.line.number) not in decisive_at
        ]
        if cand.sig.window:
            decisive_lines = [(h.line.input, h.line.number) for h in cand.decisive]
            cand.supporting = [
                h
                for h in cand.supporting
                if any(
                    i == h.line.input and abs(n - h.line.number) <= cand.sig.window
                    for i, n in decisive_lines
                )
            ]
        out.append(cand)
    out.sort(key=lambda c: first_decisive[c.sig.id])
    return out


def _branch_of(sig: Signature, hit: Hit) -> str:
    """The differential branch a whole-log evidence hit belongs to (recorded by the matcher)."""
    return hit.captures.get("__branch__", sig.differential[0].branch if sig.differential else "")


def score(cand: Candidate, facts: dict[str, Any]) -> None:
    sig = cand.sig
    cand.score = 0.0
    cand.terms = []
    cand.add(SEVERITY_BASE[sig.severity], f"severity {sig.severity}")
    if sig.kind == "symptom":
        cand.add(-SEVERITY_BASE[sig.severity] * (1 - SYMPTOM_FACTOR), "a symptom, not a cause")
    if LAYER_BONUS[sig.layer]:
        cand.add(LAYER_BONUS[sig.layer], f"{sig.layer} layer is read first")
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


def differential(cand: Candidate, facts: dict[str, Any]) -> list[DifferentialOut]:
    out = []
    for d in cand.sig.differential:
        why: list[str] = [
            f"line {hit.line.number}: {hit.line.message[:120] or hit.line.text[:120]}"
            for hit in cand.diff_evidence.get(d.branch, [])
        ]
        verdicts = []
        for key, cond in d.facts.items():
            held = condition_holds(facts, key, cond)
            verdicts.append(held)
            if held:
                why.append(f"fact {key} {cond}")
        favoured = bool(cand.diff_evidence.get(d.branch)) or (
            any(v is True for v in verdicts) and not any(v is False for v in verdicts)
        )
        out.append(
            DifferentialOut(
                branch=d.branch, check=d.check, favoured=favoured, why=why, ask=d.ask, probe=d.probe
            )
        )
    return out


def rank(
    signatures: dict[str, Signature], hits: Sequence[Hit], facts: dict[str, Any]
) -> list[Hypothesis]:
    """Order the hypotheses; symptoms explained by a cause move under it. `hits` come in input
    order (`Engine.report` sorts them), which every tie below relies on."""
    cands = build_candidates(signatures, hits)
    by_id = {c.sig.id: c for c in cands}
    # explicit explanations: a cause that lists a fired symptom in `explains`
    for cand in cands:
        for other_id in cand.sig.explains:
            other = by_id.get(other_id)
            if other is not None and other.explained_by is None and other is not cand:
                other.explained_by = cand.sig.id
                cand.explains.append(other)
    for cand in cands:
        score(cand, facts)
    causes = [c for c in cands if c.sig.kind != "symptom" and c.sig.severity == "error"]
    if causes:
        earliest = min(c.first for c in causes)
        for cause in causes:
            if cause.first == earliest:  # ties (several signatures on one line) share the bonus
                cause.add(0.04, "the first fatal error in the input")
    # implicit: a symptom nobody claimed goes under the best-ranked error cause of the same input
    # (vLLM logs "EngineCore failed to start" just before the traceback that holds the cause)
    ordered = sorted(cands, key=lambda c: (-c.score, c.first))
    for cand in ordered:
        if cand.sig.kind != "symptom" or cand.explained_by is not None:
            continue
        for cause in ordered:
            if cause.sig.kind == "symptom" or cause.sig.severity != "error":
                continue
            if cause.explained_by is not None or cause.sig.id in cand.sig.explains:
                continue  # never adopt into an explained cause, nor into its own effect
            cand.explained_by = cause.sig.id
            cause.explains.append(cand)
            break
    for cand in cands:
        if cand.explains:
            cand.add(
                min(0.12, 0.04 * len(cand.explains)),
                "explains " + ", ".join(c.sig.id for c in cand.explains),
            )
    top = [c for c in ordered if c.explained_by is None]
    top.sort(key=lambda c: (-round(c.score, 6), c.first))
    # Several signatures of one family on the very same lines (the generic CUDA OOM and its
    # situation-specific variants): the best-scored one leads, the others become its alternatives.
    alternatives: dict[str, list[str]] = defaultdict(list)
    kept: list[Candidate] = []
    for cand in top:
        lines = {(h.line.input, h.line.number) for h in cand.decisive}
        leader = next(
            (
                k
                for k in kept
                if k.sig.layer == cand.sig.layer
                and not cand.supporting
                and lines <= {(h.line.input, h.line.number) for h in k.decisive}
            ),
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


def _evidence(cand: Candidate) -> list[EvidenceOut]:
    evidence: list[Evidence] = fold_evidence(cand.decisive) + fold_evidence(cand.supporting)
    for hits in cand.diff_evidence.values():  # branches in order of their first line
        evidence += fold_evidence(hits)
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
    diffs = differential(cand, facts)
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
            captures.setdefault(k, v)
    explains = []
    for sym in cand.explains:
        lines = sorted({h.line.number for h in sym.decisive})
        explains.append(
            ExplainedOut(
                signature=sym.sig.id,
                title=sym.sig.title,
                input=sym.decisive[0].line.input,
                lines=lines[:50],
            )
        )
    return Hypothesis(
        rank=rank_no,
        signature=sig.id,
        title=sig.title,
        layer=sig.layer,
        severity=sig.severity,
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
    )
